#!/usr/bin/env python3
"""The compressed-time soak: one `hark run` against one `hark-live-sim` over real loopback sockets for H hours
of simulated conversation at S times real time, goAways every few simulated minutes and seeded random
faults, a FIFO microphone with an utterance every few seconds throughout. Run through scripts/soak."""
import argparse
import json
import os
import random
import shutil
import statistics
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faultlab as lab  # noqa: E402

BURST, GAP = 1.6, 4.4
CYCLE = BURST + GAP
ACTIONS = ["close=1011", "close=1000", "drop", "malformed", "truncated", "flood=2000", "oversized=8388608",
           "stall=20s", "unknown-message"]


def fault_plan(rng, turns, every_minutes):
    """Random faults at random session turns: about one per `every_minutes` of simulated time."""
    count = max(1, int(turns * CYCLE / 60 / every_minutes))
    picks = sorted(rng.sample(range(3, max(4, turns - 2)), min(count, max(1, turns - 5))))
    faults = []
    for turn in picks:
        trigger = rng.choice(["turn", "answer"])
        faults.append(f"{trigger}={turn}:{rng.choice(ACTIONS)}")
    return faults


def quarter_stats(samples, key):
    values = [s[key] for s in samples if s.get(key) is not None]
    q = max(1, len(values) // 4)
    return values[:q], values[-q:]


def main():
    parser = argparse.ArgumentParser(prog="scripts/soak")
    parser.add_argument("--bin", required=True)
    parser.add_argument("--sim", required=True)
    parser.add_argument("--repo", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--speed", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--lifetime-minutes", type=float, default=3.0)
    parser.add_argument("--fault-every-minutes", type=float, default=5.0)
    parser.add_argument("--rss-bound-mib", type=float, default=8.0)
    parser.add_argument("--aec", action="store_true")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    rng = random.Random(seed)
    speed = args.speed
    seconds = args.hours * 3600
    utterances = int(seconds // CYCLE)
    faults = fault_plan(rng, utterances, args.fault_every_minutes)

    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    marker = "HARKSECRET" + os.urandom(12).hex()
    key = os.path.join(args.out, "gemini.key")
    with open(key, "w") as f:
        f.write(marker + "\n")
    os.chmod(key, 0o600)
    scenario = os.path.join(args.out, "scenario.json")
    with open(scenario, "w") as f:
        json.dump({"faults": faults}, f, indent=1)

    # The simulator's timers are multiplied by --time-scale 1/S; the connection lifetime and the goAway grace
    # are on its connection clock, which already runs on input audio (S times real time here), so they are
    # given multiplied by S to mean simulated minutes.
    scale = 1.0 / speed
    lifetime = args.lifetime_minutes * 60
    sim_args = ["--time-scale", f"{scale:.6f}", "--connection-lifetime", f"{lifetime * speed:.3f}s",
                "--go-away-grace", f"{10 * speed:.3f}s", "--scenario", scenario]
    print(f"soak: seed {seed}; {args.hours} h of simulated conversation at {speed}x "
          f"(~{seconds / speed / 60:.1f} min wall); an utterance of {BURST}s every {CYCLE}s ({utterances}); "
          f"goAway every {args.lifetime_minutes} simulated minutes; {len(faults)} random faults: "
          f"{' '.join(faults)}; echo cancellation {'on' if args.aec else 'off'}; output in {args.out}", flush=True)

    sim = lab.Simulator(args.sim, args.out, sim_args)
    cycle = lab.speech_cycle(BURST, GAP)
    script = [lab.silence(1.0)] + [cycle] * utterances + [lab.silence(3.0)]
    mic = lab.MicrophoneFIFO(os.path.join(args.out, "mic.fifo"), script)
    config = lab.hark_config(args.out, args.repo, sim.url, mic.path, speed, key, echo_cancellation=args.aec)
    hark = lab.Hark(args.bin, args.out, config)

    samples = []
    header = ["wall s", "sim min", "RSS MiB", "fds", "threads", "CPU%", "sessions", "answers", "dropped", "xruns"]
    print(lab.table(header, []), flush=True)
    started = time.monotonic()
    last_cpu, last_t = 0.0, started
    while True:
        time.sleep(args.interval)
        now = time.monotonic()
        sample = lab.proc_sample(hark.pid)
        if sample is None or hark.process.poll() is not None:
            print("soak: hark exited early", flush=True)
            break
        cpu = 100 * (sample["cpu"] - last_cpu) / (now - last_t)
        last_cpu, last_t = sample["cpu"], now
        log = hark.log_text()
        status = lab.read_json(hark.status_path) or {}
        sample.update({"dropped": status.get("droppedFrames"), "xruns": status.get("xruns")})
        sample.update({"wall": now - started, "sim_min": mic.written / 2 / lab.RATE / 60, "cpu_pct": cpu,
                       "sessions": log.count("session connected"), "answers": log.count("agent: ")})
        samples.append(sample)
        print("  ".join(str(v).ljust(len(h)) for v, h in zip(
            [f"{sample['wall']:.0f}", f"{sample['sim_min']:.1f}", f"{sample['rss_kib'] / 1024:.1f}",
             sample["fds"], sample["threads"], f"{cpu:.0f}", sample["sessions"], sample["answers"],
             sample["dropped"], sample["xruns"]], header)),
            flush=True)
        if mic.script_done.is_set():
            break
    time.sleep(4)  # the last utterance's answer
    fed_seconds = mic.consumed() / 2 / lab.RATE
    cpu_total = hark.cpu_percent()
    alive = hark.process.poll() is None
    report = sim.stop()
    mic.resume(filler=lab.silence(0.1))
    code, took = hark.terminate()
    mic.close()
    summary = lab.record_summary(report)
    turns_started = summary["completed"] + summary["interrupted"] + summary["pending"]
    fired = summary["faults"]

    failures = []
    print()
    if len(samples) >= 4:
        rows = []
        for key_name, label, fmt in [("rss_kib", "RSS MiB", lambda v: v / 1024), ("fds", "fds", float),
                                     ("threads", "threads", float)]:
            first, last = quarter_stats(samples, key_name)
            a, b = statistics.median(first), statistics.median(last)
            rows.append([label, f"{fmt(min(first)):.1f}..{fmt(max(first)):.1f}", f"{fmt(a):.1f}",
                         f"{fmt(min(last)):.1f}..{fmt(max(last)):.1f}", f"{fmt(b):.1f}", f"{fmt(b) - fmt(a):+.1f}"])
            if key_name == "rss_kib" and (b - a) / 1024 > args.rss_bound_mib:
                failures.append(f"RSS grew {(b - a) / 1024:.1f} MiB (bound {args.rss_bound_mib} MiB)")
            if key_name in ("fds", "threads") and max(last) > max(first) + 2:
                failures.append(f"{label} grew: first-quarter max {max(first)}, last-quarter max {max(last)}")
        print(lab.table(["growth", "first quarter", "median", "last quarter", "median", "change"], rows))
    else:
        failures.append("too few samples to compare quarters")
    answered = summary["completed"]
    # Each fault or goAway may cost the turn it hit (an answer cut by a close is not repeated).
    allowance = len(fired) + summary["connections"]
    received_seconds = summary["samples"] / lab.RATE
    print()
    print(f"utterances fed {utterances}; simulator turns started {turns_started}, completed {answered}, "
          f"interrupted {summary['interrupted']}, pending {summary['pending']}")
    print(f"connections {summary['connections']} ({summary['resumed']} resumed); faults fired {len(fired)}: "
          f"{' '.join(fired)}")
    print(f"audio fed {fed_seconds:.1f} s, received by the simulator {received_seconds:.1f} s "
          f"(difference {fed_seconds - received_seconds:.2f} s; ~0.56 s of it is before the first session opens)")
    status = lab.read_json(hark.status_path) or {}
    print(f"hark's counters: dropped frames {status.get('droppedFrames')}, xruns {status.get('xruns')}, "
          f"underruns {status.get('underruns')}, reconnects {status.get('reconnects')}")
    lost = fed_seconds - received_seconds - 0.56
    if lost > 1.0:
        failures.append(f"{lost:.2f} s of fed audio never reached the simulator (xruns: capture could not keep up "
                        "at this --speed?)" if status.get("xruns") else f"{lost:.2f} s of fed audio never reached "
                        "the simulator")
    print(f"hark CPU over the run {cpu_total:.1f}% of one core; exit {code} after SIGTERM in {took:.2f} s")
    if not alive or code != 0:
        failures.append(f"hark did not survive (alive {alive}, exit {code})")
    if answered + allowance < utterances:
        failures.append(f"only {answered} of {utterances} utterances answered (allowance {allowance})")
    if turns_started and summary["pending"] > len(fired) + summary["connections"]:
        failures.append(f"{summary['pending']} turns left pending")
    leaked = lab.grep_secret(marker, lab.files_under(args.out))
    if leaked:
        failures.append("API key marker in " + ", ".join(leaked))
    print()
    if failures:
        print("soak: FAIL: " + "; ".join(failures))
        return 1
    print(f"soak: PASS (seed {seed}; RSS bound +{args.rss_bound_mib} MiB median last vs first quarter; fds and "
          f"threads: last-quarter max within first-quarter max + 2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
