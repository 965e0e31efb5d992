#!/usr/bin/env python3
"""The fault matrix: each fault in its own run of real `hark run` and `hark-live-sim` processes (file-backed
audio on the host board, a FIFO microphone fed from here). Run through scripts/fault-matrix, which builds
the binaries and passes --bin, --sim and --repo."""
import argparse
import json
import os
import random
import secrets
import shutil
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faultlab as lab  # noqa: E402

TURNS = 4            # utterances in a finite microphone script
BURST = 1.6          # seconds of speech per utterance
GAP = 4.4            # seconds of silence after each
LEAD = 1.0           # silence before the first utterance
TRAIL = 2.0          # silence after the last
MID_SPEECH_2 = "7.2s"  # connection audio in the middle of utterance 2 (pre-roll 0.5 s + one cycle + 0.8 s)
SAMPLE_TOLERANCE = 1600  # 100 ms: what two identical runs may differ by (capture periods at the edges)
# Microphone samples before the first session opens (LEAD less the 500 ms pre-roll, plus the detector's
# reaction), used when the baseline run itself dropped frames; otherwise the baseline measures it.
PRE_SESSION = 8960
OUTAGE = 4.0         # seconds an audio device is gone before it comes back


def case(name, what, sim=(), expect="recover", audio=True, kind="standard", timeout=40, quiet=3.0):
    return {"name": name, "what": what, "sim": list(sim), "expect": expect, "audio": audio,
            "kind": kind, "timeout": timeout, "quiet": quiet}


def cases(seed):
    rng = random.Random(seed)
    out = [case("baseline", "no fault (the reference for audio counts and CPU)", expect="clean")]
    points = [("setup", "setup", "at setupComplete"),
              ("speech", f"audio={MID_SPEECH_2}", "mid user speech (turn 2)"),
              ("answer", "answer=2", "mid answer (turn 2)")]
    for code in (1000, 1006, 1007, 1008, 1011):
        for short, trigger, label in points:
            rejected = code in (1007, 1008)
            out.append(case(f"close-{code}-{short}", f"close {code} {label}",
                            sim=["--fault", f"{trigger}:close={code}:conn=1"],
                            expect="refuse" if rejected else "recover", audio=not rejected))
    out += [
        case("tcp-drop", "TCP drop (no close frame) mid user speech",
             sim=["--fault", f"audio={MID_SPEECH_2}:drop:conn=1"]),
        case("stall", "server stops answering (no frames, no pongs) mid answer; left after 15-30 s of silence",
             sim=["--fault", "answer=2:stall:conn=1"], timeout=90, quiet=35),
        case("stall-question", "server stops answering once it heard question 2 (transcribed, no answer)",
             sim=["--fault", "turn=2:stall:conn=1"], timeout=90, quiet=35),
    ]
    # On the wall clock, as at the real service: on the session clock a lifetime this short is used up by
    # the audio a resume sends again (seconds of it at once), which the real service's ten minutes never are.
    lifetime = rng.uniform(2.5, 5.0)
    out += [
        case("goaway", f"goAway at a random time (lifetime {lifetime:.1f}s wall, grace 1s)",
             sim=["--connection-lifetime", f"{lifetime:.2f}s", "--go-away-grace", "1s",
                  "--lifetime-on-wall-clock"]),
        case("resume-refused-1011", "resumption refused with 1011 (after a 1011 close mid answer)",
             sim=["--refuse-resumption", "1011", "--fault", "answer=2:close=1011:conn=1"], timeout=90, quiet=12),
        case("resume-refused-1007", "resumption refused with 1007 (after a 1011 close mid answer)",
             sim=["--refuse-resumption", "1007", "--fault", "answer=2:close=1011:conn=1"], timeout=90, quiet=12),
        case("malformed-json", "a frame that is not JSON, mid answer", sim=["--fault", "answer=2:malformed:conn=1"]),
        case("truncated-frame", "a truncated frame, mid answer", sim=["--fault", "answer=2:truncated:conn=1"]),
        case("oversized-frame", "an 8 MiB frame (over the 4 MiB limit), mid answer",
             sim=["--fault", "answer=2:oversized=8388608:conn=1"]),
        case("flood", "20000 tiny frames in a row, mid answer", sim=["--fault", "answer=2:flood=20000:conn=1"]),
        case("dns-failure", "endpoint host does not resolve (.invalid), then SIGHUP with the right endpoint",
             expect="recover-after-reload", audio=False, kind="dns"),
        case("connection-refused", "endpoint port closed, then SIGHUP with the right endpoint",
             expect="recover-after-reload", audio=False, kind="refused"),
        case("tls-untrusted", "wss with a certificate hark does not trust: must refuse; then SIGHUP with ca_file",
             sim=["--tls"], expect="refuse-then-reload", audio=False, kind="tls"),
        case("auth-rejected", "a wrong API key (1008 before setupComplete): error state, slow retry",
             sim=["--require-key", "the-right-key-" + secrets.token_hex(4)], expect="refuse", audio=False,
             kind="loop", timeout=25),
        case("sigterm-mid-turn", "SIGTERM while the answer plays: exit 0 within 5 s", expect="exit",
             audio=False, kind="sigterm"),
        case("watchdog-stall", "microphone stalls (FIFO not fed): WATCHDOG=1 pings stop, then resume",
             expect="watchdog", audio=False, kind="watchdog"),
        case("mic-xrun", "microphone overrun: its feed stops 1.5 s during question 2 (the capture read is late)",
             kind="mic_xrun", expect="recover-xrun"),
        case("speaker-xrun", "speaker underrun: its reader stops 1.5 s during answer 2 (the write blocks)",
             kind="speaker_xrun", expect="recover-xrun"),
        case("mic-vanish", f"microphone device gone {OUTAGE:g} s (reads fail, reopening fails), then back",
             kind="mic_vanish", expect="recover-device", audio=False, timeout=40),
        case("speaker-vanish", f"speaker device gone {OUTAGE:g} s mid answer (writes and reopening fail), then back",
             kind="speaker_vanish", expect="recover-device", audio=False, timeout=40),
        case("mic-gone", "microphone device gone for good: exit non-zero within ~20 s, for systemd to restart",
             kind="mic_gone", expect="exit-failure", audio=False, timeout=60),
        case("speaker-gone", "speaker device gone for good mid answer: exit non-zero, for systemd to restart",
             kind="speaker_gone", expect="exit-failure", audio=False, timeout=60),
    ]
    return out


class Runner:
    def __init__(self, args):
        self.args = args
        self.out = args.out
        self.marker = "HARKSECRET" + secrets.token_hex(12)
        self.cycle = lab.speech_cycle(BURST, GAP)
        self.baseline = None
        self.pre_session = PRE_SESSION
        self.consumed = None
        self.cpu_bound = args.cpu_bound

    def folder(self, name):
        path = os.path.join(self.out, name)
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
        key = os.path.join(path, "gemini.key")
        with open(key, "w") as f:
            f.write(self.marker + "\n")
        os.chmod(key, 0o600)
        return path, key

    def script(self):
        return [lab.silence(LEAD)] + [self.cycle] * TURNS + [lab.silence(TRAIL)]

    def config(self, folder, key, endpoint, mic, extra="", speaker=None, capture_device=None):
        return lab.hark_config(folder, self.args.repo, endpoint, mic, self.args.pace, key, extra,
                               echo_cancellation=self.args.aec, speaker=speaker, capture_device=capture_device)

    # A finished run: stop the simulator first (it writes its record), feed the microphone again so the
    # capture thread is not stuck in a read, then SIGTERM hark.
    def wind_down(self, sim, mic, hark):
        cpu = hark.cpu_percent()
        alive = hark.process.poll() is None
        report = sim.stop() if sim else None
        self.consumed = mic.consumed() // 2
        mic.resume(filler=lab.silence(0.1))
        code, took = hark.terminate()
        mic.close()
        return report, cpu, alive, code, took

    def wait_quiet(self, hark, mic, timeout, quiet=3.0):
        """Until the microphone script is out and hark's log has not changed for `quiet` seconds."""
        deadline = time.monotonic() + timeout
        mic.script_done.wait(timeout)
        size, since = -1, time.monotonic()
        while time.monotonic() < deadline and hark.process.poll() is None:
            now_size = os.path.getsize(hark.log_path)
            if now_size != size:
                size, since = now_size, time.monotonic()
            elif time.monotonic() - since >= quiet:
                break
            time.sleep(0.2)

    def run(self, c):
        path, key = self.folder(c["name"])
        started = time.monotonic()
        result = {"name": c["name"], "what": c["what"], "notes": []}
        try:
            getattr(self, "run_" + c["kind"])(c, path, key, result)
        except Exception as error:  # a harness failure is a failed case, with the reason
            result["notes"].append(f"harness error: {error!r}")
            result.setdefault("verdict", "FAIL")
        result["wall"] = time.monotonic() - started
        leaked = lab.grep_secret(self.marker, lab.files_under(path))
        result["secret"] = "LEAKED" if leaked else "clean"
        if leaked:
            result["notes"].append("API key marker found in " + ", ".join(leaked))
        self.decide(c, result)
        return result

    # -- kinds ---------------------------------------------------------------------------------------

    def run_standard(self, c, path, key, result, **microphone):
        sim = lab.Simulator(self.args.sim, path, c["sim"])
        mic = lab.MicrophoneFIFO(os.path.join(path, "mic.fifo"), self.script(), **microphone)
        hark = lab.Hark(self.args.bin, path, self.config(path, key, sim.url, mic.path))
        self.wait_quiet(hark, mic, c["timeout"], c["quiet"])
        report, cpu, alive, code, took = self.wind_down(sim, mic, hark)
        self.common(result, hark, report, cpu, alive, code)
        result["mic_samples"] = self.consumed

    def run_loop(self, c, path, key, result):
        """Speech over and over; waits for a completed answer on a new session after the fault (or the timeout)."""
        sim = lab.Simulator(self.args.sim, path, c["sim"])
        mic = lab.MicrophoneFIFO(os.path.join(path, "mic.fifo"), [lab.silence(LEAD)], loop=self.cycle)
        hark = lab.Hark(self.args.bin, path, self.config(path, key, sim.url, mic.path))
        if c["expect"] == "recover":
            def recovered():
                # A second session, and an answer on it.
                parts = hark.log_text().split("session connected")
                return len(parts) >= 3 and "agent: " in parts[-1]
            hark.wait_for(recovered, c["timeout"], step=0.5)
        else:
            time.sleep(c["timeout"])
        report, cpu, alive, code, took = self.wind_down(sim, mic, hark)
        self.common(result, hark, report, cpu, alive, code)

    def offline_then_reload(self, c, path, key, result, endpoint, sim_args=(), fixed_extra=""):
        sim = lab.Simulator(self.args.sim, path, list(sim_args))
        mic = lab.MicrophoneFIFO(os.path.join(path, "mic.fifo"), [lab.silence(LEAD)], loop=self.cycle)
        hark = lab.Hark(self.args.bin, path, self.config(path, key, endpoint, mic.path))
        # Speech opens a session, which cannot connect: a window in which hark retries.
        hark.wait_for(lambda: "opening a session" in hark.log_text(), 15)
        result["window_cpu"] = lab.cpu_percent_over(hark.pid, 10)
        result["states_before_reload"] = sorted(hark.seen)
        result["sessions_before_reload"] = hark.count("session connected")
        result["attempts_before_reload"] = hark.count("session reconnecting") + hark.count("opening a session")
        with open(hark.config_path, "w") as f:
            f.write(self.config(path, key, sim.url, mic.path, fixed_extra))
        hark.process.send_signal(1)  # SIGHUP: reload
        mark = len(hark.log_text())
        hark.wait_for(lambda: "agent: " in hark.log_text()[mark:], 30, step=0.3)
        report, cpu, alive, code, took = self.wind_down(sim, mic, hark)
        self.common(result, hark, report, cpu, alive, code)
        result["cpu"] = result["window_cpu"]  # the figure that shows a hot retry loop
        result["notes"].append(
            f"before reload: {result['attempts_before_reload']} attempts in ~10 s, states {result['states_before_reload']}, "
            f"CPU {result['window_cpu']:.1f}% while offline; whole run {cpu:.1f}%")

    def run_dns(self, c, path, key, result):
        self.offline_then_reload(c, path, key, result, "ws://hark-fault-matrix.invalid:9")

    def run_refused(self, c, path, key, result):
        self.offline_then_reload(c, path, key, result, f"ws://127.0.0.1:{lab.free_closed_port()}")

    def run_tls(self, c, path, key, result):
        # The simulator's URL is only known once it runs: start it, and point hark at it without its CA.
        ca = os.path.join(path, "ca.pem")
        sim = lab.Simulator(self.args.sim, path, ["--tls", "--ca-out", ca])
        mic = lab.MicrophoneFIFO(os.path.join(path, "mic.fifo"), [lab.silence(LEAD)], loop=self.cycle)
        hark = lab.Hark(self.args.bin, path, self.config(path, key, sim.url, mic.path))
        hark.wait_for(lambda: "opening a session" in hark.log_text(), 15)
        result["window_cpu"] = lab.cpu_percent_over(hark.pid, 10)
        result["states_before_reload"] = sorted(hark.seen)
        result["sessions_before_reload"] = hark.count("session connected")
        log_before = hark.log_text()
        with open(hark.config_path, "w") as f:
            f.write(self.config(path, key, sim.url, mic.path).replace(
                "  endpoint:", f"  ca_file: {ca}\n  endpoint:"))
        hark.process.send_signal(1)
        mark = len(hark.log_text())
        hark.wait_for(lambda: "agent: " in hark.log_text()[mark:], 30, step=0.3)
        report, cpu, alive, code, took = self.wind_down(sim, mic, hark)
        self.common(result, hark, report, cpu, alive, code)
        result["cpu"] = result["window_cpu"]
        refusal = [line for line in log_before.splitlines() if "offline:" in line or "refused" in line]
        result["notes"].append(
            f"untrusted: {result['sessions_before_reload']} sessions, states {result['states_before_reload']}, "
            f"CPU {result['window_cpu']:.1f}%; first refusal line: {refusal[0].strip() if refusal else '(none)'}")

    def run_sigterm(self, c, path, key, result):
        sim = lab.Simulator(self.args.sim, path, [])
        mic = lab.MicrophoneFIFO(os.path.join(path, "mic.fifo"), [lab.silence(LEAD)], loop=self.cycle)
        hark = lab.Hark(self.args.bin, path, self.config(path, key, sim.url, mic.path))
        speaking = hark.wait_for(lambda: "state: speaking" in hark.log_text(), 30, step=0.02)
        cpu = hark.cpu_percent()
        code, took = hark.terminate(timeout=15)
        report = sim.stop()
        mic.close()
        self.common(result, hark, report, cpu, True, code)
        result["sigterm_exit"] = (code, took, speaking)
        result["notes"].append(f"SIGTERM {'while speaking' if speaking else '(speaking never seen)'}: "
                               f"exit {code} after {took:.2f} s")

    def run_watchdog(self, c, path, key, result):
        sim = lab.Simulator(self.args.sim, path, [])
        notify = lab.NotifySocket(os.path.join(path, "notify.sock"))
        mic = lab.MicrophoneFIFO(os.path.join(path, "mic.fifo"), [lab.silence(LEAD)], loop=lab.silence(1.0),
                                 deep=False)
        hark = lab.Hark(self.args.bin, path, self.config(path, key, sim.url, mic.path),
                        env={"NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "300000"})
        ready = hark.wait_for(lambda: any("READY=1" in m for _, m in notify.messages), 20)
        hark.wait_for(lambda: len(notify.pings()) >= 3, 10)
        before = len(notify.pings())
        mic.pause()
        paused_at = time.monotonic()
        time.sleep(5)
        resumed_at = time.monotonic()
        pings = notify.pings(paused_at, resumed_at)
        last = max(pings) if pings else paused_at
        quiet = resumed_at - last
        mic.resume()
        again = hark.wait_for(lambda: len(notify.pings(resumed_at)) >= 1, 10)
        cpu = hark.cpu_percent()
        alive = hark.process.poll() is None
        report = sim.stop()
        code, took = hark.terminate()
        mic.close()
        notify.close()
        self.common(result, hark, report, cpu, alive, code)
        stopped = quiet >= 1.0
        result["watchdog"] = ready and before >= 3 and stopped and again
        result["notes"].append(
            f"READY={ready}, {before} pings before the stall, last ping {quiet:.1f} s before the feed resumed "
            f"(stall 5 s, WATCHDOG_USEC 0.3 s), pings again: {again}; "
            f"'watchdog: no progress' logged: {'watchdog: no progress' in hark.log_text()}")

    def run_mic_xrun(self, c, path, key, result):
        # A shallow pipe, so a pause in the feed starves the capture soon: the feed stops during question 2
        # (the pipe still holds up to 2 s, read at the file pace), and the late read overruns.
        at = int((LEAD + len(self.cycle) / (2 * lab.RATE) + 0.8) * lab.RATE * 2)
        self.run_standard(c, path, key, result, deep=False, stall_at=at, stall_seconds=1.5)

    def run_speaker_xrun(self, c, path, key, result):
        sim = lab.Simulator(self.args.sim, path, c["sim"])
        mic = lab.MicrophoneFIFO(os.path.join(path, "mic.fifo"), self.script())
        speaker = lab.SpeakerFIFO(os.path.join(path, "speaker.fifo"))
        hark = lab.Hark(self.args.bin, path, self.config(path, key, sim.url, mic.path, speaker=speaker.path))
        if hark.wait_for(lambda: "agent: answering turn 2" in hark.log_text(), c["timeout"], step=0.02):
            time.sleep(0.2)
            speaker.stall(1.5)
        else:
            result["notes"].append("answer 2 never began: the speaker was not stalled")
        self.wait_quiet(hark, mic, c["timeout"], c["quiet"])
        report, cpu, alive, code, took = self.wind_down(sim, mic, hark)
        speaker.close()
        self.common(result, hark, report, cpu, alive, code)
        result["mic_samples"] = self.consumed
        result["speaker_bytes"] = speaker.read

    def fault_microphone(self, path):
        """An ALSA configuration with a microphone PCM that can be taken away: alsa-lib's file plugin reads the
        FIFO (infile) and pipes what it captured to a sink process. Killing the sink makes reads fail (EIO);
        the FIFO moved away makes opening fail until it is back. Returns (environment, device name, sink pid
        file). The capture is not paced itself: the FIFO's feed is, at the file pace."""
        sink = os.path.join(path, "mic-sink.sh")
        pid_file = os.path.join(path, "mic-sink.pid")
        with open(sink, "w") as f:
            f.write(f"echo $$ > {pid_file}\nexec cat >/dev/null\n")
        conf = os.path.join(path, "asound.conf")
        with open(conf, "w") as f:
            f.write("</usr/share/alsa/alsa.conf>\n"
                    "pcm.hark_fault_mic {\n"
                    "    type file\n"
                    "    slave.pcm null\n"
                    f"    file \"|exec sh {sink}\"\n"
                    f"    infile \"{path}/mic.fifo\"\n"
                    "    format raw\n"
                    "}\n")
        return {"ALSA_CONFIG_PATH": conf}, "hark_fault_mic", pid_file

    def take_microphone_away(self, path, pid_file):
        os.rename(os.path.join(path, "mic.fifo"), os.path.join(path, "mic.fifo.away"))
        try:
            with open(pid_file) as f:
                os.kill(int(f.read().strip()), 9)
        except (OSError, ValueError) as error:
            return f"could not stop the microphone's sink: {error!r}"
        return None

    def device_outage(self, c, path, key, result, which, forever=False):
        """Speech over and over; after the first answer (for the speaker: while an answer plays) the device
        goes away for OUTAGE seconds (or for good), then comes back; waits for an answer after that."""
        sim = lab.Simulator(self.args.sim, path, c["sim"])
        env, device, pid_file, speaker = {}, None, None, None
        rate = None
        if which == "mic":
            env, device, pid_file = self.fault_microphone(path)
            rate = lab.RATE * 2 * self.args.pace
        else:
            speaker = lab.SpeakerFIFO(os.path.join(path, "speaker.fifo"))
        mic = lab.MicrophoneFIFO(os.path.join(path, "mic.fifo"), [lab.silence(LEAD)], loop=self.cycle,
                                 deep=False, rate=rate)
        hark = lab.Hark(self.args.bin, path,
                        self.config(path, key, sim.url, mic.path, speaker=speaker.path if speaker else None,
                                    capture_device=device), env=env)
        trigger = "agent: answering turn 2" if which == "speaker" else "agent: answering turn 1"
        began = hark.wait_for(lambda: trigger in hark.log_text(), 40, step=0.02)
        if not began:
            result["notes"].append(f"'{trigger}' never seen: the device was not taken away")
        if which == "speaker":
            time.sleep(0.3)
            speaker.vanish()
        else:
            problem = self.take_microphone_away(path, pid_file)
            if problem:
                result["notes"].append(problem)
        if forever:
            gone_at = time.monotonic()
            exited = hark.wait_for(lambda: hark.process.poll() is not None, c["timeout"], step=0.2)
            took = time.monotonic() - gone_at
            cpu = hark.cpu_percent()
            code, _ = hark.terminate()
            report = sim.stop()
            mic.close()
            if speaker:
                speaker.close()
            # Exiting is expected here (decided in decide()); only death by a signal is a crash.
            self.common(result, hark, report, cpu, True, 0)
            result["gone_exit"] = (exited, code, took)
            if code is not None and code < 0:
                result["crash"] = f"yes (signal {-code})"
            result["notes"].append(f"device gone for good: exited {exited}, code {code}, {took:.1f} s after")
            return
        result["window_cpu"] = lab.cpu_percent_over(hark.pid, OUTAGE)
        log_during = hark.log_text()
        if which == "speaker":
            speaker.restore()
        else:
            os.rename(os.path.join(path, "mic.fifo.away"), os.path.join(path, "mic.fifo"))
        mark = len(hark.log_text())
        answered = hark.wait_for(lambda: "agent: answering" in hark.log_text()[mark:], c["timeout"], step=0.2)
        if answered and which == "speaker":
            # The answer must reach the new speaker, not just arrive.
            answered = hark.wait_for(lambda: speaker.read_since_restore > 24_000 * 2 // 2, 20, step=0.2)
        report, cpu, alive, code, took = self.wind_down(sim, mic, hark)
        if speaker:
            speaker.close()
        self.common(result, hark, report, cpu, alive, code)
        result["cpu"] = result["window_cpu"]
        result["device_back"] = answered
        noticed = [line for line in log_during.splitlines() if "audio device failed" in line]
        result["notes"].append(
            f"{which} gone {OUTAGE:g} s: CPU {result['window_cpu']:.1f}% meanwhile; answered after it came back: "
            f"{answered}; first line about it: {noticed[0].strip()[:160] if noticed else '(none)'}")

    def run_mic_vanish(self, c, path, key, result):
        self.device_outage(c, path, key, result, "mic")

    def run_speaker_vanish(self, c, path, key, result):
        self.device_outage(c, path, key, result, "speaker")

    def run_mic_gone(self, c, path, key, result):
        self.device_outage(c, path, key, result, "mic", forever=True)

    def run_speaker_gone(self, c, path, key, result):
        self.device_outage(c, path, key, result, "speaker", forever=True)

    # -- evidence and verdicts ------------------------------------------------------------------------

    def common(self, result, hark, report, cpu, alive, code):
        summary = lab.record_summary(report)
        result["summary"] = summary
        result["cpu"] = cpu
        result["alive"] = alive
        result["exit"] = code
        result["log"] = hark.log_text() if os.path.exists(hark.log_path) else ""
        result["seen"] = sorted(hark.seen)
        result["states"] = hark.states
        status = lab.read_json(hark.status_path) or {}
        result["xruns"] = status.get("xruns")
        result["dropped"] = status.get("droppedFrames")
        result["resent"] = status.get("resentSamples") or 0
        crashed = (not alive) or code != 0
        result["crash"] = "no" if not crashed else f"yes (exit {code}, alive before SIGTERM: {alive})"
        if report is None:
            result["notes"].append("no simulator record")

    def decide(self, c, r):
        s = r.get("summary", {})
        reasons = []
        expect = c["expect"]
        if r.get("crash", "yes") != "no":
            reasons.append("crashed or bad exit")
        cpu = r.get("cpu", 0.0)
        if expect == "clean" and self.cpu_bound is None:
            # The paced audio pipeline's own cost, measured: a hot loop shows as a core's worth on top.
            self.cpu_bound = max(1.5 * cpu, cpu + 30)
            r["notes"].append(f"CPU bound for the other runs: {self.cpu_bound:.0f}% (1.5 x this run's {cpu:.1f}%, "
                              "at least +30 points)")
        if self.cpu_bound is not None and cpu > self.cpu_bound:
            reasons.append(f"CPU {cpu:.1f}% over {self.cpu_bound:.0f}%")
        if r["secret"] != "clean":
            reasons.append("secret in a log")
        recovered = "-"
        lost = "n/a"
        connections = s.get("connections", 0)
        if expect == "clean":
            recovered = f"{s.get('completed', 0)}/{TURNS} answered"
            if s.get("completed", 0) < TURNS:
                reasons.append("baseline did not answer every turn")
            if r.get("dropped") == 0 and r.get("mic_samples"):
                self.pre_session = r["mic_samples"] - s.get("samples", 0)
            else:
                r["notes"].append(f"the baseline dropped {r.get('dropped')} frames (CPU contention?): "
                                  f"assuming {PRE_SESSION} samples before the first session")
            self.baseline = self.pre_session
        elif expect == "recover":
            later = connections >= 2 and s.get("sessions", 0) >= 2
            in_band = any(a in c["what"] for a in ("not JSON", "truncated", "tiny frames"))
            # In-band garbage must not cost the connection; everything else must come back on a new one.
            if in_band:
                ok = connections == 1 and s.get("completed", 0) >= TURNS - 1
                recovered = f"same connection, {s.get('completed', 0)} answered" if ok else \
                    f"NO ({connections} connections, {s.get('completed', 0)} answered)"
            else:
                need = TURNS - 1 if c["kind"] == "standard" else 1
                ok = later and s.get("completed", 0) >= need
                recovered = (f"yes: {connections} conns, {s.get('resumed', 0)} resumed, "
                             f"{s.get('completed', 0)} answered") if ok else \
                    f"NO ({connections} conns, {s.get('sessions', 0)} sessions, {s.get('completed', 0)} answered)"
            if not ok:
                reasons.append("did not recover")
        elif expect == "refuse":
            error_seen = "error" in r.get("seen", []) or "the service refused the device" in r.get("log", "")
            hammer = connections > 3
            recovered = f"refused: error state {'shown' if error_seen else 'NOT shown'}, {connections} conns"
            if not error_seen:
                reasons.append("no error state")
            if hammer:
                reasons.append(f"{connections} connections: retried too fast")
        elif expect == "recover-after-reload":
            ok = r.get("sessions_before_reload", 0) == 0 and s.get("completed", 0) >= 1
            offline_seen = "offline" in r.get("states_before_reload", [])
            recovered = f"offline {'shown' if offline_seen else 'NOT shown'}; after reload " + \
                (f"{s.get('completed', 0)} answered" if ok else "NO answer")
            if not ok:
                reasons.append("no session after the reload")
            if not offline_seen:
                reasons.append("offline state not shown")
        elif expect == "refuse-then-reload":
            refused = r.get("sessions_before_reload", 1) == 0
            states = r.get("states_before_reload", [])
            state = "error" if "error" in states else ("offline" if "offline" in states else "none")
            ok = s.get("completed", 0) >= 1
            recovered = f"refused ({state} state); trusted after reload: {s.get('completed', 0)} answered"
            if not refused:
                reasons.append("a session was opened over an untrusted certificate")
            if state != "error":
                reasons.append(f"shown as {state}, not error")
            if not ok:
                reasons.append("no session after trusting the CA")
        elif expect == "exit":
            code, took, speaking = r.get("sigterm_exit", (None, 99, False))
            recovered = f"exit {code} in {took:.2f}s"
            if code != 0 or took > 5:
                reasons.append("SIGTERM did not exit 0 within 5 s")
            if not speaking:
                reasons.append("never reached speaking")
        elif expect == "recover-xrun":
            completed = s.get("completed", 0)
            xruns = r.get("xruns") or 0
            recovered = f"{xruns} xrun(s) recovered, {completed}/{TURNS} answered"
            if xruns < 1:
                reasons.append("no xrun counted")
            if completed < TURNS - 1:
                reasons.append("turns went unanswered")
        elif expect == "recover-device":
            back = r.get("device_back")
            recovered = f"back: {'answered' if back else 'NO answer'}, {s.get('connections', 0)} conns"
            if not back:
                reasons.append("no answer after the device came back")
        elif expect == "exit-failure":
            exited, code, took = r.get("gone_exit", (False, None, 0))
            recovered = f"exit {code} after {took:.1f} s" if exited else "still running"
            if not exited or code in (None, 0) or code < 0:
                reasons.append("did not exit with a failure code for systemd to restart")
        elif expect == "watchdog":
            recovered = "pings stopped and resumed" if r.get("watchdog") else "NO"
            if not r.get("watchdog"):
                reasons.append("watchdog pings did not stop and resume")
        if c["audio"] and self.baseline is not None and expect in ("recover", "clean", "recover-xrun") \
                and r.get("mic_samples"):
            # What the microphone gave after the first session opened, against what the simulator received.
            # Samples hark sent again (unconfirmed when a connection ended) count once.
            missing = r["mic_samples"] - self.pre_session - s.get("distinct_samples", 0)
            dropped = r.get("dropped") or 0
            lost = str(max(0, missing)) if abs(missing) > SAMPLE_TOLERANCE else f"0 ({missing:+d})"
            if dropped:
                lost += f" ({dropped} frames counted dropped)"
            if missing > SAMPLE_TOLERANCE and not dropped:
                reasons.append(f"{missing} input samples silently lost ({missing / lab.RATE:.2f} s)")
            elif missing > SAMPLE_TOLERANCE:
                r["notes"].append(f"{missing} samples short, with {dropped} frames counted as dropped by hark")
            if r.get("resent"):
                r["notes"].append(f"{r['resent']} samples unconfirmed when a connection ended, sent again")
            if missing < -SAMPLE_TOLERANCE:
                r["notes"].append(f"{-missing} more samples than the microphone held (sent twice?)")
        r["recovered"] = recovered
        r["lost"] = lost
        r["verdict"] = "PASS" if not reasons else "FAIL"
        r["reasons"] = reasons


def main():
    parser = argparse.ArgumentParser(prog="scripts/fault-matrix")
    parser.add_argument("--bin", required=True)
    parser.add_argument("--sim", required=True)
    parser.add_argument("--repo", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--aec", action="store_true")
    parser.add_argument("--pace", type=float, default=4)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--cpu-bound", type=float, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    all_cases = cases(seed)
    if args.list:
        for c in all_cases:
            print(f"  {c['name']:<22} {c['what']}")
        return 0
    selected = all_cases
    if args.only:
        unknown = [n for n in args.only if n not in {c["name"] for c in all_cases}]
        if unknown:
            print("unknown fault(s): " + ", ".join(unknown) + " (see --help)", file=sys.stderr)
            return 2
        # The audio count and the CPU bound need the baseline: it always runs first.
        wanted = set(args.only) | {"baseline"}
        selected = [c for c in all_cases if c["name"] in wanted]
    os.makedirs(args.out, exist_ok=True)
    lab.install_cleanup()
    runner = Runner(args)
    bound = f"{args.cpu_bound}%" if args.cpu_bound is not None else "1.5 x the baseline run's (at least +30 points)"
    print(f"fault-matrix: seed {seed}, file pace {args.pace}, echo cancellation {'on' if args.aec else 'off'}, "
          f"CPU bound {bound} of one core "
          f"(hark's CPU time over the run's wall time; for DNS/refused/TLS over 10 s offline), "
          f"output in {args.out}", flush=True)
    results = []
    for c in selected:
        r = runner.run(c)
        results.append(r)
        print(f"  {r['verdict']}  {c['name']:<22} {r['wall']:5.1f}s  {r['recovered']}"
              + (f"  [{'; '.join(r['reasons'])}]" if r["reasons"] else ""), flush=True)
    rows = []
    for r in results:
        rows.append([r["name"], r["what"][:58], r["recovered"], r["lost"], r.get("crash", "?"),
                     f"{r.get('cpu', 0):.1f}", f"{r.get('dropped')}/{r.get('xruns')}", r["secret"], r["verdict"]])
    print()
    print(lab.table(["fault", "injected", "recovered", "lost samples", "crash", "CPU%", "dropped/xruns",
                     "secret", "verdict"], rows))
    print("(lost samples: microphone samples after the first session opened that the simulator never received, "
          "over all connections; the first session opens "
          f"{runner.pre_session} samples into the microphone stream; "
          "dropped/xruns: hark's own counters from its status file, the microphone FIFO stalls at the end of each "
          "run)")
    notes = [(r["name"], n) for r in results for n in r["notes"]]
    if notes:
        print("\nnotes:")
        for name, note in notes:
            print(f"  {name}: {note}")
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump([{k: v for k, v in r.items() if k != "log"} for r in results], f, indent=1, default=str)
    failed = [r["name"] for r in results if r["verdict"] != "PASS"]
    print(f"\n{len(results) - len(failed)} passed, {len(failed)} failed" + (": " + ", ".join(failed) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
