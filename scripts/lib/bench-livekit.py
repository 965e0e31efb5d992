#!/usr/bin/env python3
"""The LiveKit backend's figures, for scripts/bench-livekit (which builds the binaries and the stand-in's venv).

1. Cost: `hark converse --backend livekit` in the stand-in's room over MINUTES of paced speech (bursts of 1.5 s every
   6 s, each answered), measured from outside (scripts/lib/bench-measure.py: CPU of all threads, peak RSS), hark and
   its hark-livekit helper apart and together; beside LiveKit's official Python SDK (livekit 1.2.1, the same Rust
   core) doing the same job in the same room (scripts/lib/bench-livekit-sdk.py: publish the 16 kHz microphone at
   real-time pace, play the agent's track at 24 kHz into a file, read its state and transcripts), and beside
   `hark converse` (Gemini Live) against hark-live-sim over the same input. Printed: CPU seconds per audio minute,
   peak and anonymous RSS, and the ratios; the stripped sizes of hark and hark-livekit.
2. First words: the stand-in's agent joins 1 s late; the question starts as the device starts. With pre-connect
   audio the agent receives the first words in the pre-connect buffer; without it, only what the track carries once
   the agent is in. Printed per run and as medians: when the agent first had the question's audio (seconds from the
   start of speech), and how much of the question it got.
3. A refused token: how long `hark converse` takes to exit 3.

usage: bench-livekit.py --bin DIR --python STANDIN_PYTHON --sdk-python SDK_PYTHON --work DIR [--minutes N] [--runs N]
                        [--cost-only]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SECRET = "bench-secret-5a1e0c7f3b9d2e4f6a8c0b1d"


def start(cmd, out, log, pattern):
    """Starts `cmd` with its stdout in `out`, waits for a line starting with `pattern`, returns (process, line)."""
    with open(out, "w"):
        pass
    proc = subprocess.Popen(cmd, stdout=open(out, "w"), stderr=open(log, "w"))
    for _ in range(600):
        with open(out) as f:
            for line in f:
                if line.startswith(pattern):
                    return proc, line.strip()
        if proc.poll() is not None:
            sys.exit(f"bench-livekit: {cmd[0]} ended; see {log}")
        time.sleep(0.05)
    proc.kill()
    sys.exit(f"bench-livekit: {cmd[0]} did not start; see {log}")


def standin(args, name, flags):
    record = os.path.join(args.work, f"{name}-standin.json")
    proc, line = start([args.python, os.path.join(REPO, "scripts/lib/livekit-standin.py"), "--port", "0",
                        "--api-key", "benchkey", "--api-secret", SECRET, "--record", record] + flags,
                       os.path.join(args.work, f"{name}-standin.out"), os.path.join(args.work, f"{name}-standin.log"),
                       "READY ")
    return proc, line.split()[1], record


def stop(proc):
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()


def measure(args, name, command):
    report = os.path.join(args.work, f"{name}.json")
    subprocess.run([sys.executable, os.path.join(REPO, "scripts/lib/bench-measure.py"), "--json", report,
                    "--log", os.path.join(args.work, f"{name}.log"), "--stdout", os.path.join(args.work, f"{name}.out"),
                    "--"] + command, check=False)
    with open(report) as f:
        return json.load(f)


def livekit_flags(url, secret_file, extra=()):
    return ["--backend", "livekit", "--livekit-url", url, "--api-key", "benchkey", "--api-secret-file", secret_file,
            *extra]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", required=True)
    p.add_argument("--python", required=True, help="the stand-in venv's python")
    p.add_argument("--sdk-python", required=True, help="a python with LiveKit's Python SDK (livekit 1.2.1)")
    p.add_argument("--cost-only", action="store_true", help="only the cost (no first-words or refused-token runs)")
    p.add_argument("--work", required=True)
    p.add_argument("--minutes", type=float, default=2)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    secret_file = os.path.join(args.work, "secret")
    with open(secret_file, "w") as f:
        f.write(SECRET)
    os.chmod(secret_file, 0o600)
    seconds = int(args.minutes * 60)
    paced = os.path.join(args.work, "paced.wav")
    subprocess.run([sys.executable, os.path.join(REPO, "scripts/lib/make-speech.py"), paced, "--seconds", str(seconds),
                    "--burst", "1.5", "--gap", "4.5"], check=True)
    common = ["--input", paced, "--chunk-ms", "20", "--idle-timeout", "2", "--timeout", str(seconds * 3 + 60)]

    # 1. Cost, LiveKit then Gemini Live, the same paced input.
    proc, url, record = standin(args, "cost", [])
    try:
        print(f"bench-livekit: converse-livekit ({seconds} s of paced speech in the stand-in's room)", flush=True)
        lk = measure(args, "converse-livekit", [os.path.join(args.bin, "hark"), "converse", *common,
                                                "--output", os.path.join(args.work, "livekit.wav"),
                                                *livekit_flags(url, secret_file)])
        with open(record) as f:
            turns = json.load(f)["turns"]
    finally:
        stop(proc)
    proc, url, record = standin(args, "cost-sdk", [])
    try:
        print(f"bench-livekit: livekit-sdk (the same input, LiveKit's Python SDK in the stand-in's room)", flush=True)
        sdk = measure(args, "livekit-sdk", [args.sdk_python, os.path.join(REPO, "scripts/lib/bench-livekit-sdk.py"),
                                            "--url", url, "--api-key", "benchkey", "--api-secret-file", secret_file,
                                            "--input", paced, "--output", os.path.join(args.work, "sdk.wav")])
        with open(record) as f:
            sdk_turns = json.load(f)["turns"]
    finally:
        stop(proc)
    sim, line = start([os.path.join(args.bin, "hark-live-sim"), "--port", "0", "--tls", "--ca-out",
                       os.path.join(args.work, "ca.pem")], os.path.join(args.work, "simulator.out"),
                      os.path.join(args.work, "simulator.log"), "listening on ")
    try:
        port = line.split()[2].rsplit(":", 1)[1].split("/")[0]
        print("bench-livekit: converse-gemini (the same input, Gemini Live against hark-live-sim)", flush=True)
        gm = measure(args, "converse-gemini", [os.path.join(args.bin, "hark"), "converse", *common,
                                               "--output", os.path.join(args.work, "gemini.wav"),
                                               "--endpoint", f"wss://localhost:{port}",
                                               "--ca-file", os.path.join(args.work, "ca.pem")])
    finally:
        stop(sim)

    def per_minute(r, key=None):
        cpu = r["user_s"] + r["sys_s"] if key is None else (r.get(key) or 0)
        return cpu / (seconds / 60)

    def stripped(name):
        out = os.path.join(args.work, name + ".stripped")
        subprocess.run(["strip", "-o", out, os.path.join(args.bin, name)], check=True)
        return os.path.getsize(out) / 1e6

    print()
    print(f"LiveKit backend figures ({seconds} s of paced speech; {turns} turns answered for hark, {sdk_turns} for "
          f"the SDK, in the stand-in's room)")
    print(f"  {'session':<38} {'CPU s / audio min':>18} {'peak RSS MiB':>13} {'anon RSS MiB':>13}")
    # hark's own peak and its helper's largest sampled RSS, added (an upper bound of the two processes together).
    both_rss = (lk.get("self_hwm_kb") or 0) + (lk.get("children_max_rss_kb") or 0)
    rows = (("hark livekit: hark + hark-livekit", per_minute(lk), both_rss, None),
            ("  hark (its own)", per_minute(lk, "self_cpu_s"), lk.get("self_hwm_kb") or 0, lk.get("max_anon_kb", 0)),
            ("  hark-livekit (the helper)", per_minute(lk, "children_cpu_s"), lk.get("children_max_rss_kb") or 0,
             None),
            ("LiveKit Python SDK (livekit 1.2.1)", per_minute(sdk), sdk["max_rss_kb"], sdk.get("max_anon_kb", 0)),
            ("hark gemini live (simulator)", per_minute(gm), gm["max_rss_kb"], gm.get("max_anon_kb", 0)))
    for label, cpu, rss, anon in rows:
        shown = "-" if anon is None else f"{anon / 1024:.1f}"
        print(f"  {label:<38} {cpu:>18.2f} {rss / 1024:>13.1f} {shown:>13}")
    print(f"  hark livekit / Python SDK CPU: {per_minute(lk) / max(1e-9, per_minute(sdk)):.2f}x (goal: at most 0.5x)")
    print(f"  hark livekit / hark gemini CPU: {per_minute(lk) / max(1e-9, per_minute(gm)):.2f}x (goal: at most 3x)")
    print(f"  stripped binaries: hark {stripped('hark'):.1f} MB, hark-livekit {stripped('hark-livekit'):.1f} MB")
    if args.cost_only:
        return

    # 2. First words, with and without pre-connect audio, the agent 1 s late.
    question = os.path.join(args.work, "question.wav")
    subprocess.run([sys.executable, os.path.join(REPO, "scripts/lib/make-speech.py"), question, "--seconds", "5",
                    "--burst", "3", "--gap", "2"], check=True)
    first = {"on": [], "off": []}
    got = {"on": [], "off": []}
    for run in range(args.runs):
        for mode in ("on", "off"):
            name = f"first-words-{mode}-{run + 1}"
            proc, url, record = standin(args, name, ["--agent-delay", "1"])
            try:
                began = time.time()
                subprocess.run([os.path.join(args.bin, "hark"), "converse", "--input", question, "--chunk-ms", "20",
                                "--idle-timeout", "1", "--timeout", "40",
                                "--output", os.path.join(args.work, f"{name}.wav"),
                                *livekit_flags(url, secret_file, ["--pre-connect-audio", "true" if mode == "on" else "false"])],
                               stdout=subprocess.DEVNULL, stderr=open(os.path.join(args.work, f"{name}.log"), "w"))
                with open(record) as f:
                    rec = json.load(f)
            finally:
                stop(proc)
            buffers = [b for b in rec["pre_connect"] if b["bytes"] > 0]
            heard_at = [b["at"] for b in buffers] + ([rec["microphone"]["first_speech_at"]]
                                                     if "first_speech_at" in rec["microphone"] else [])
            speech = sum(b["seconds"] for b in buffers) + sum(rec["utterances"])
            first[mode].append(min(heard_at) - began if heard_at else float("nan"))
            got[mode].append(min(3.0, speech))
            print(f"bench-livekit: {name}: the agent had the question's audio {first[mode][-1]:.2f} s after speech "
                  f"began; it got {got[mode][-1]:.2f} s of the 3.0 s question", flush=True)

    # 3. A refused token: how long until `hark converse` exits 3.
    refused = []
    for run in range(args.runs):
        proc, url, _ = standin(args, f"refused-{run + 1}", ["--reject-token"])
        try:
            began = time.monotonic()
            code = subprocess.run([os.path.join(args.bin, "hark"), "converse", "--input", question,
                                   "--output", os.path.join(args.work, "refused.wav"), "--timeout", "30",
                                   *livekit_flags(url, secret_file)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
            refused.append((time.monotonic() - began, code))
        finally:
            stop(proc)

    print(f"First words, the agent joining 1 s late ({args.runs} runs each; medians)")
    for mode, label in (("on", "with pre-connect audio"), ("off", "without")):
        print(f"  {label:<24} the agent has the question's audio {statistics.median(first[mode]):.2f} s after speech "
              f"begins; it gets {statistics.median(got[mode]):.2f} s of the 3.0 s question")


    print(f"A refused token: hark converse exits {refused[0][1]} after "
          f"{statistics.median(t for t, _ in refused):.2f} s (median of {len(refused)}; process start included)")


if __name__ == "__main__":
    main()
