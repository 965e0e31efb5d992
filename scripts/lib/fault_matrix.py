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
import signal
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
# hark's network deadlines (NIOWebSocketTransport's and GeminiConfiguration's defaults) and systemd's stop timeout.
UPGRADE_DEADLINE = 10.0
TLS_DEADLINE = 10.0
CLOSE_DEADLINE = 2.0
SETUP_DEADLINE = 15.0
STOP_DEADLINE = 10.0  # TimeoutStopSec in systemd/hark.service
DEADLINE_SLACK = 1.5  # what a deadline may be late by on a loaded two-core machine
WATCHDOG_SECONDS = 2.0  # WATCHDOG_USEC for the network cases: pings every second
CONVERSE_TIMEOUT = 10
REPLY_DEADLINE = 90.0  # CascadeConfiguration.replyDeadline: a cascade reply's time from its request to its last audio


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
        case("flood", "20000 tiny frames in a row, mid answer (verdict: hark catches up, then its CPU is back "
             "to normal)", sim=["--fault", "answer=2:flood=20000:conn=1"], kind="flood_sim"),
        case("goaway-absurd", "goAway with timeLeft 9223372036854775807s mid answer 2 (past protobuf's range: "
             "refused as undecodable, no trap): every turn answered", sim=["--fault",
             "answer=2:go-away=9223372036854775807s:conn=1"], expect="survive"),
        case("goaway-far", "goAway with timeLeft 31557600000s (1000 years) mid answer 2: the turn finishes within "
             "the bounded wait, the session resumes", sim=["--fault", "answer=2:go-away=31557600000s:conn=1"]),
        case("keepalive-stall", "mid answer 2, only usageMetadata every 300 ms from then on (alive, no progress): "
             "left after 15-30 s like a silent server", sim=["--fault", "answer=2:keep-alive=300ms:conn=1"],
             timeout=90, quiet=35),
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
        case("sighup-then-sigterm", "SIGHUP (the same configuration reloaded), then SIGTERM: exit 0",
             expect="exit", audio=False, kind="sighup"),
        case("sighup-at-ready", "SIGHUP the moment READY=1 arrives (systemctl reload may), then SIGTERM: "
             "still running, reloaded, exit 0", expect="exit", audio=False, kind="sighup_at_ready"),
    ]
    # The network's phases, by hostile servers of scripts/lib/hostile.py (the simulator behind the proxies).
    out += [
        case("upgrade-silent", "TCP accepted, the WebSocket upgrade never answered (ws://); SIGTERM mid-attempt",
             expect="phase-deadline", audio=False, kind="silent", timeout=45),
        case("tls-silent", "TCP accepted, the TLS handshake never answered (wss://); SIGTERM mid-attempt",
             expect="phase-deadline", audio=False, kind="silent", timeout=45),
        case("close-deaf", "the client's close frame never answered, the socket never closed by the server "
             "(5 sessions ended by session.idle_timeout)", expect="close-deadline", audio=False, kind="deaf_close"),
        case("flood-bytes", "200000 1-byte text frames mid answer 2 (a proxy), then the same connection goes on",
             expect="recover", kind="flood_bytes"),
        case("flood-bytes-sigterm", "1-byte text frames without end mid answer: SIGTERM during the flood",
             expect="flood-stop", audio=False, kind="flood_sigterm"),
        case("flood-usage-sigterm", "tiny valid messages (usageMetadata) without end mid answer: SIGTERM during it",
             expect="flood-stop", audio=False, kind="flood_sigterm"),
        case("flood-sim-sigterm", "the simulator's flood=1000000 (tiny valid messages) mid answer: SIGTERM during it",
             sim=["--fault", "answer=1:flood=1000000:conn=1"], expect="flood-stop", audio=False,
             kind="flood_sigterm"),
        case("flood-presetup", "1-byte text frames without end right after the upgrade (no setupComplete), "
             "connection 1 only", expect="setup-deadline", audio=False, kind="flood_presetup", timeout=60),
        case("converse-upgrade-silent", "hark converse --timeout 10, the upgrade never answered: exit 4 in time",
             expect="converse", audio=False, kind="converse"),
        case("converse-tls-silent", "hark converse --timeout 10, the TLS handshake never answered: exit 4 in time",
             expect="converse", audio=False, kind="converse"),
        case("converse-flood-presetup", "hark converse --timeout 10, 1-byte frames without end after the upgrade: "
             "exit 4 in time", expect="converse", audio=False, kind="converse"),
        case("converse-flood-bytes", "hark converse --timeout 10, 1-byte frames without end from 2 s into the "
             "answer: exit 4 in time", expect="converse", audio=False, kind="converse"),
        case("converse-close-deaf", "hark converse, its close frame never answered: exit 0, socket closed "
             "by hark within the close deadline", expect="converse", audio=False, kind="converse"),
    ]
    # The cascade (Sarvam speech-to-text -> Gemini text -> Sarvam text-to-speech) against hark-cascade-sim.
    out += [
        case("cascade-baseline", "cascade, no fault (four spoken turns answered)", expect="cascade", kind="cascade"),
        case("cascade-tool-loop", "cascade, a text model that calls a tool in every reply: bounded rounds per turn, "
             "each turn ends in error", sim=["--call", "get_time", "--call-every-reply"], expect="cascade",
             kind="cascade"),
        case("cascade-endless-turn", "cascade, speech-to-text sends an 8 KiB final transcript per audio message "
             "and never an end of speech: the turn is cut and answered", sim=["--stt-endless-turn", "8192"],
             expect="cascade", kind="cascade"),
        case("cascade-speech-close", "cascade, the speech socket closes with 1011 after a reply's first audio: the "
             "reply fails with the error earcon, the next is whole", sim=["--tts-fault", "close=1011",
                                                                          "--tts-fault-sockets", "1"],
             expect="cascade", kind="cascade"),
        case("cascade-keepalive-reply", "cascade, one question whose text answer is keep-alive comments for ever "
             "(then silence): the reply's deadline (90 s) ends it", sim=["--text-fault", "keep-alive:200"],
             expect="cascade", kind="cascade", timeout=200, quiet=10),
        case("cascade-silent-speech", "cascade, one question, the speech sockets take text and never answer (then "
             "silence): the reply's deadline (90 s) ends it", sim=["--tts-fault", "silent"], expect="cascade",
             kind="cascade", timeout=200, quiet=10),
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

    def run_cascade(self, c, path, key, result):
        """`hark run` on the cascade against hark-cascade-sim with the case's faults; the simulator's --record
        says what the services saw (text requests and their sizes)."""
        sim = lab.Simulator(self.args.cascade_sim, path, c["sim"])
        script = self.script()
        if c["name"] in ("cascade-keepalive-reply", "cascade-silent-speech"):
            # One question, then quiet for longer than the reply's deadline on the wall clock (the microphone is
            # read at the file pace).
            script = [lab.silence(LEAD), self.cycle, lab.silence(REPLY_DEADLINE * 1.2 * self.args.pace)]
        mic = lab.MicrophoneFIFO(os.path.join(path, "mic.fifo"), script)
        extra = ("backend: cascade\n"
                 "cascade:\n"
                 f"  sarvam_endpoint: {sim.url}\n"
                 f"  gemini_endpoint: {sim.url}\n"
                 f"  sarvam_key_file: {key}\n"
                 f"  api_key_file: {key}\n")
        hark = lab.Hark(self.args.bin, path, self.config(path, key, "ws://127.0.0.1:9", mic.path, extra))
        self.wait_quiet(hark, mic, c["timeout"], c["quiet"])
        states = list(hark.states)
        report, cpu, alive, code, took = self.wind_down(sim, mic, hark)
        self.common(result, hark, None, cpu, alive, code)
        result["notes"] = [n for n in result["notes"] if n != "no simulator record"]
        result["cascade"] = report or {}
        result["final_state"] = states[-1] if states else None
        log = result.get("log", "")
        result["answer_failed"] = log.count("the answer failed")
        result["answered"] = log.count("state: speaking")
        record = report or {}
        sizes = record.get("textRequestBytes", [])
        result["notes"].append(f"{record.get('textRequests', 0)} text requests (largest {max(sizes or [0])} bytes), "
                               f"{result['answer_failed']} answers failed, {result['answered']} spoken, "
                               f"last state {result['final_state']}")

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
        # wss://: a plain ws:// endpoint may only name a loopback address.
        self.offline_then_reload(c, path, key, result, "wss://hark-fault-matrix.invalid:9")

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

    def run_sighup(self, c, path, key, result):
        sim = lab.Simulator(self.args.sim, path, [])
        mic = lab.MicrophoneFIFO(os.path.join(path, "mic.fifo"), [lab.silence(LEAD)], loop=self.cycle)
        hark = lab.Hark(self.args.bin, path, self.config(path, key, sim.url, mic.path))
        answered = hark.wait_for(lambda: "agent: " in hark.log_text(), 30, step=0.1)
        hark.process.send_signal(signal.SIGHUP)
        reloaded = hark.wait_for(lambda: "reloading the configuration" in hark.log_text(), 10, step=0.1)
        time.sleep(2)
        cpu = hark.cpu_percent()
        alive = hark.process.poll() is None
        code, took = hark.terminate(timeout=15)
        report = sim.stop()
        mic.close()
        self.common(result, hark, report, cpu, alive, code)
        result["sigterm_exit"] = (code, took, answered and reloaded)
        tail = [line for line in result["log"].splitlines() if "stopped on an error" in line or "Error" in line]
        result["notes"].append(f"answered {answered}, reload logged {reloaded}; SIGTERM: exit {code} after "
                               f"{took:.2f} s" + (f"; {tail[-1].strip()[:160]}" if tail else ""))

    def run_sighup_at_ready(self, c, path, key, result):
        sim = lab.Simulator(self.args.sim, path, [])
        notify, env = self.watch_pings(path)
        mic = lab.MicrophoneFIFO(os.path.join(path, "mic.fifo"), [lab.silence(LEAD)], loop=self.cycle)
        hark = lab.Hark(self.args.bin, path, self.config(path, key, sim.url, mic.path), env=env)
        ready = hark.wait_for(lambda: any("READY=1" in m.split("\n") for _, m in notify.messages), 20, step=0.002)
        hark.process.send_signal(signal.SIGHUP)
        reloaded = hark.wait_for(lambda: "reloading the configuration" in hark.log_text(), 10, step=0.1)
        time.sleep(1)
        cpu = hark.cpu_percent()
        alive = hark.process.poll() is None
        code, took = hark.terminate(timeout=15)
        report = sim.stop()
        mic.close()
        notify.close()
        self.common(result, hark, report, cpu, alive, code)
        result["sigterm_exit"] = (code, took, ready and reloaded)
        result["notes"].append(f"READY seen {ready}; after SIGHUP: alive {alive}, reload logged {reloaded}; "
                               f"exit {code} after {took:.2f} s")

    # -- network phases -------------------------------------------------------------------------------

    def watch_pings(self, path):
        """A NOTIFY_SOCKET with a 2 s watchdog (pings every second), and hark's environment for it."""
        notify = lab.NotifySocket(os.path.join(path, "notify.sock"))
        return notify, {"NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": str(int(WATCHDOG_SECONDS * 1e6))}

    @staticmethod
    def longest_gap(times, since, until):
        marks = [since] + [t for t in times if since <= t <= until] + [until]
        return max(b - a for a, b in zip(marks, marks[1:]))

    def stop_mid(self, hark, result, when):
        """SIGTERM now (when = what is going on); exit code and seconds into result['stop']."""
        cpu = hark.cpu_percent()
        alive = hark.process.poll() is None
        code, took = hark.terminate(timeout=STOP_DEADLINE + 5)
        result["stop"] = (code, took, when)
        result["notes"].append(f"SIGTERM {when}: exit {code} after {took:.2f} s")
        return cpu, alive, code

    def run_silent(self, c, path, key, result):
        """Speech over and over against a server that accepts TCP and then says nothing: every attempt must
        end at its phase's deadline, attempts back off, offline shows, the watchdog is fed (a reconnecting
        session is progress), and SIGTERM in the middle of an attempt stops hark at once."""
        secure = c["name"].startswith("tls")
        hostile = lab.Hostile(path, "silent")
        notify, env = self.watch_pings(path)
        mic = lab.MicrophoneFIFO(os.path.join(path, "mic.fifo"), [lab.silence(LEAD)], loop=self.cycle)
        endpoint = f"{'wss' if secure else 'ws'}://127.0.0.1:{hostile.port}"
        hark = lab.Hark(self.args.bin, path, self.config(path, key, endpoint, mic.path), env=env)
        opened = hark.wait_for(lambda: "opening a session" in hark.log_text(), 20)
        start = time.monotonic()
        result["window_cpu"] = lab.cpu_percent_over(hark.pid, c["timeout"])
        end = time.monotonic()
        result["ping_gap"] = self.longest_gap(notify.pings(), start, end)
        result["states_before_stop"] = sorted(hark.seen)

        def attempt_open():
            lines = hostile.lines()
            return sum(1 for x in lines if x.startswith("accepted")) > sum(1 for x in lines if x.startswith("ended"))
        in_attempt = hark.wait_for(attempt_open, 40, step=0.05)
        time.sleep(1.0)
        cpu, alive, code = self.stop_mid(hark, result, "1 s into a hanging attempt" if in_attempt else
                                         "(no attempt open)")
        stopped_at = time.monotonic()
        mic.close()
        notify.close()
        record = hostile.stop()
        self.common(result, hark, None, cpu, alive, code)
        result["notes"] = [n for n in result["notes"] if n != "no simulator record"]
        connections = (record or {}).get("connections", [])
        deadline = TLS_DEADLINE if secure else UPGRADE_DEADLINE
        held = [x["ended"] - x["accepted"] for x in connections if x.get("ended")]
        full = held[:-1] if in_attempt else held  # the last one was cut short by SIGTERM
        result["held"] = held
        result["attempts"] = len(connections)
        result["by_client"] = all(x.get("ended_by") == "client" for x in connections)
        result["last_closed_after_stop"] = (connections[-1]["ended"] - stopped_at + result["stop"][1]) \
            if connections and connections[-1].get("ended") else None
        gaps = [b["accepted"] - a["ended"] for a, b in zip(connections, connections[1:]) if a.get("ended")]
        result["deadline"] = deadline
        result["full_held_max"] = max(full) if full else None
        result["opened"] = opened
        result["in_attempt"] = in_attempt
        result["notes"].append(
            f"{len(connections)} attempts; each held {', '.join(f'{h:.1f}' for h in held)} s "
            f"(deadline {deadline} s); waits between them {', '.join(f'{g:.1f}' for g in gaps)} s; "
            f"CPU {result['window_cpu']:.1f}% over {c['timeout']} s; longest watchdog gap "
            f"{result['ping_gap']:.1f} s (pings every {WATCHDOG_SECONDS / 2:g} s); states {result['states_before_stop']}")

    def run_deaf_close(self, c, path, key, result):
        """Utterances far apart, session.idle_timeout 2 s: each session ends by hark's close frame, which the
        proxy swallows and never answers, the socket left open. Hark must close each socket itself within its
        close deadline; its socket count must come back to where it was."""
        sim = lab.Simulator(self.args.sim, path, [])
        proxy = lab.Hostile(path, "deaf-close", ["--upstream", sim.url])
        gap = 44.0  # audio seconds: 11 s at file pace 4, time for an answer, the idle timeout and the close
        cycle = lab.speech_cycle(BURST, gap)
        sessions = 5
        mic = lab.MicrophoneFIFO(os.path.join(path, "mic.fifo"), [lab.silence(LEAD)] + [cycle] * sessions,
                                 loop=lab.silence(1.0))
        hark = lab.Hark(self.args.bin, path,
                        self.config(path, key, f"ws://127.0.0.1:{proxy.port}", mic.path,
                                    extra="").replace("idle_timeout: 10m", "idle_timeout: 2s"))
        hark.wait_for(lambda: "ready:" in hark.log_text(), 20)
        before = lab.sockets_of(hark.pid)
        peak = 0
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and hark.process.poll() is None:
            lines = proxy.lines()
            peak = max(peak, lab.sockets_of(hark.pid, proxy.port) or 0)
            ended = sum(1 for x in lines if x.startswith("ended"))
            if ended >= sessions:
                break
            time.sleep(0.25)
        time.sleep(CLOSE_DEADLINE + 1)
        after = lab.sockets_of(hark.pid)
        left = lab.sockets_of(hark.pid, proxy.port)
        cpu = hark.cpu_percent()
        alive = hark.process.poll() is None
        report = sim.stop()
        code, took = hark.terminate()
        mic.close()
        record = proxy.stop()
        self.common(result, hark, report, cpu, alive, code)
        connections = (record or {}).get("connections", [])
        closes = [x["ended"] - x["client_close_at"] for x in connections if x.get("client_close_at") and x.get("ended")]
        result["deaf"] = {"connections": len(connections), "swallowed": len(closes), "closes": closes,
                          "by_client": all(x.get("ended_by") == "client" for x in connections),
                          "before": before, "after": after, "left": left, "peak": peak}
        result["notes"].append(
            f"{len(connections)} connections, {len(closes)} close frames swallowed; hark closed the socket "
            f"{', '.join(f'{x:.2f}' for x in closes)} s after its close frame (deadline {CLOSE_DEADLINE} s); "
            f"hark's sockets {before} before the first session, {after} after the last "
            f"({left} still to the proxy; at most {peak} at once)")

    def run_flood_bytes(self, c, path, key, result):
        sim = lab.Simulator(self.args.sim, path, [])
        proxy = lab.Hostile(path, "flood", ["--upstream", sim.url, "--payload", "byte", "--count", "200000"])
        mic = lab.MicrophoneFIFO(os.path.join(path, "mic.fifo"), self.script())
        hark = lab.Hark(self.args.bin, path, self.config(path, key, f"ws://127.0.0.1:{proxy.port}", mic.path))
        if hark.wait_for(lambda: "agent: answering turn 2" in hark.log_text(), c["timeout"], step=0.02):
            proxy.flood()
        else:
            result["notes"].append("answer 2 never began: no flood")
        flood_done = hark.wait_for(lambda: any("flood of" in x for x in proxy.lines()), 60, step=0.1)
        # The proxy is done once the frames are in the socket buffers; hark is done once its CPU is back
        # under the bound (it reads the flood at its own pace): then the CPU of the next 3 s is the verdict.
        sent_at = time.monotonic()
        bound = self.cpu_bound or 100.0
        while time.monotonic() - sent_at < 30 and lab.cpu_percent_over(hark.pid, 1.0) > bound:
            pass
        caught_up = time.monotonic() - sent_at
        after_cpu = lab.cpu_percent_over(hark.pid, 3.0)
        self.wait_quiet(hark, mic, c["timeout"], c["quiet"])
        report, cpu, alive, code, took = self.wind_down(sim, mic, hark)
        record = proxy.stop()
        self.common(result, hark, report, cpu, alive, code)
        result["mic_samples"] = self.consumed
        conn = ((record or {}).get("connections") or [{}])[0]
        lasted = (conn.get("flood_ended") or 0) - (conn.get("flood_started") or 0)
        result["notes"].append(
            f"the proxy wrote {conn.get('flood_frames', 0)} frames in {lasted:.1f} s (ended: {flood_done}); "
            f"hark's CPU back under {bound:.0f}% {caught_up:.1f} s later, then {after_cpu:.1f}% over 3 s; "
            f"{cpu:.1f}% over the run")
        result["cpu"] = after_cpu

    def run_flood_sim(self, c, path, key, result):
        """The simulator's flood of tiny valid messages mid answer: reading it costs CPU by construction (the
        figure per message is printed); the verdict is the CPU once hark has caught up, which a hot loop or a
        backlog that never drains would keep high."""
        sim = lab.Simulator(self.args.sim, path, c["sim"])
        mic = lab.MicrophoneFIFO(os.path.join(path, "mic.fifo"), self.script())
        hark = lab.Hark(self.args.bin, path, self.config(path, key, sim.url, mic.path))
        def fired():
            with open(sim.log_path, errors="replace") as f:
                return "fault fired" in f.read()
        began = hark.wait_for(fired, c["timeout"], step=0.01)
        start, cpu0 = time.monotonic(), lab.cpu_seconds(hark.pid) or 0
        bound = self.cpu_bound or 100.0
        # The flood reaches hark as fast as it reads (TCP backpressure): a busy second or more, then caught up
        # once a second is back under the bound (the paced audio pipeline alone is under it). A flood that never
        # shows is taken as read after 5 s.
        busy = False
        while time.monotonic() - start < 30:
            if lab.cpu_percent_over(hark.pid, 1.0) > bound:
                busy = True
            elif busy or time.monotonic() - start >= 5:
                break
        caught_up = time.monotonic() - start
        spent = (lab.cpu_seconds(hark.pid) or 0) - cpu0
        after_cpu = lab.cpu_percent_over(hark.pid, 3.0)
        self.wait_quiet(hark, mic, c["timeout"], c["quiet"])
        report, cpu, alive, code, took = self.wind_down(sim, mic, hark)
        self.common(result, hark, report, cpu, alive, code)
        result["mic_samples"] = self.consumed
        # The flood's messages as the simulator counted them (its record of what each connection was sent): the cost
        # per message is the CPU hark spent over them, and a flood that never came is a failure, not a pass.
        flooded = sum(run.get("count", 0) for connection in (report or {}).get("connections", [])
                      for run in connection.get("sentKinds", []) if run.get("kind") == "raw")
        if not began or flooded == 0:
            result["broken"] = "the flood never fired: nothing was tested"
        per_message = f"at most {1e6 * spent / flooded:.1f} us a message" if flooded else "no message counted"
        result["notes"].append(
            f"{flooded} flood messages sent; caught up {caught_up:.1f} s later, having spent {spent:.2f} CPU s "
            f"({per_message}, the paced pipeline included); then {after_cpu:.1f}% over 3 s; {cpu:.1f}% over the run")
        result["cpu"] = after_cpu

    def run_flood_sigterm(self, c, path, key, result):
        """An endless flood (or the simulator's long one) mid answer; SIGTERM 3 s into it."""
        sim = lab.Simulator(self.args.sim, path, c["sim"])
        proxy = None
        endpoint = sim.url
        if c["name"] != "flood-sim-sigterm":
            payload = "byte" if "bytes" in c["name"] else "usage"
            proxy = lab.Hostile(path, "flood", ["--upstream", sim.url, "--payload", payload])
            endpoint = f"ws://127.0.0.1:{proxy.port}"
        notify, env = self.watch_pings(path)
        mic = lab.MicrophoneFIFO(os.path.join(path, "mic.fifo"), [lab.silence(LEAD)], loop=self.cycle)
        hark = lab.Hark(self.args.bin, path, self.config(path, key, endpoint, mic.path), env=env)
        began = hark.wait_for(lambda: "agent: answering turn 1" in hark.log_text(), 30, step=0.02)
        if proxy:
            proxy.flood()
            hark.wait_for(lambda: any(x.startswith("flooding") for x in proxy.lines()), 5, step=0.02)
        start = time.monotonic()
        result["flood_cpu"] = lab.cpu_percent_over(hark.pid, 3.0)
        result["ping_gap"] = self.longest_gap(notify.pings(), start, time.monotonic())
        cpu, alive, code = self.stop_mid(hark, result, "3 s into the flood" if began else "(no answer began)")
        report = sim.stop()
        mic.close()
        notify.close()
        record = proxy.stop() if proxy else None
        self.common(result, hark, report, cpu, alive, code)
        if record:
            conn = (record.get("connections") or [{}])[-1]
            result["flooding"] = conn.get("flood_frames", 0) > 0 and (conn.get("flood_ended") or 0) >= start + 2.5
            result["notes"].append(f"{conn.get('flood_frames', 0)} flood frames sent, the proxy's socket closed "
                                   f"by {conn.get('ended_by')}")
        else:
            result["flooding"] = True
        result["notes"].append(f"CPU {result['flood_cpu']:.1f}% during the flood; longest watchdog gap "
                               f"{result['ping_gap']:.1f} s (pings every {WATCHDOG_SECONDS / 2:g} s)")
        result["cpu"] = 0.0  # a flood is the server's doing: the figure is in the notes

    def run_flood_presetup(self, c, path, key, result):
        sim = lab.Simulator(self.args.sim, path, [])
        proxy = lab.Hostile(path, "flood", ["--upstream", sim.url, "--payload", "byte", "--presetup", "--conn", "1"])
        mic = lab.MicrophoneFIFO(os.path.join(path, "mic.fifo"), [lab.silence(LEAD)], loop=self.cycle)
        hark = lab.Hark(self.args.bin, path, self.config(path, key, f"ws://127.0.0.1:{proxy.port}", mic.path))

        def answered_later():
            lines = proxy.lines()
            return any(x.startswith("ended 1") for x in lines) and "agent: " in hark.log_text()
        answered = hark.wait_for(answered_later, c["timeout"], step=0.2)
        cpu, alive, code = self.stop_mid(hark, result, "after the answer" if answered else "(no answer)")
        report = sim.stop()
        mic.close()
        record = proxy.stop()
        self.common(result, hark, report, cpu, alive, code)
        connections = (record or {}).get("connections", [])
        first = connections[0] if connections else {}
        held = (first.get("ended") or time.monotonic()) - first.get("accepted", time.monotonic())
        result["presetup"] = {"held": held, "by": first.get("ended_by"), "frames": first.get("flood_frames", 0),
                              "answered": answered, "connections": len(connections)}
        result["notes"].append(f"connection 1 held {held:.1f} s under {first.get('flood_frames', 0)} flood frames, "
                               f"ended by {first.get('ended_by')} (setup deadline {SETUP_DEADLINE} s); "
                               f"{len(connections)} connections; answered afterwards: {answered}; "
                               f"CPU {cpu:.1f}% over the run (the flood included)")
        result["cpu"] = 0.0

    def speech_wav(self, path):
        import wave
        name = os.path.join(path, "question.wav")
        with wave.open(name, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(lab.RATE)
            w.writeframes(lab.silence(0.5) + self.cycle + self.cycle)
        return name

    def run_converse(self, c, path, key, result):
        name = c["name"]
        sim, hostile = None, None
        expected_code = 4
        if "silent" in name:
            hostile = lab.Hostile(path, "silent")
            endpoint = f"{'wss' if 'tls' in name else 'ws'}://127.0.0.1:{hostile.port}"
        else:
            sim = lab.Simulator(self.args.sim, path, [])
            if "close-deaf" in name:
                hostile = lab.Hostile(path, "deaf-close", ["--upstream", sim.url])
                expected_code = 0
            elif "presetup" in name:
                hostile = lab.Hostile(path, "flood", ["--upstream", sim.url, "--presetup", "--conn", "1"])
            else:
                hostile = lab.Hostile(path, "flood", ["--upstream", sim.url])
            endpoint = f"ws://127.0.0.1:{hostile.port}"
        wav = self.speech_wav(path)
        env = {k: v for k, v in os.environ.items() if not k.startswith("HARK_") and k != "GEMINI_API_KEY"}
        command = [self.args.bin, "converse", "--input", wav, "--output", os.path.join(path, "answer.wav"),
                   "--endpoint", endpoint, "--api-key-file", key, "--timeout", str(CONVERSE_TIMEOUT)]
        if "close-deaf" in name:
            # The question (12.5 s) is sent as fast as the socket takes it: the answer, and the close after it,
            # come well within --timeout.
            command.append("--fast")
        with open(os.path.join(path, "converse.log"), "w") as log, open(os.path.join(path, "converse.out"), "w") as out:
            started = time.monotonic()
            process = lab.subprocess.Popen(command, stdout=out, stderr=log, stdin=lab.subprocess.DEVNULL, env=env)
            lab._children.append(process)
            if "flood-bytes" in name:
                time.sleep(2.0)
                hostile.flood()
            try:
                code = process.wait(timeout=CONVERSE_TIMEOUT + 30)
            except lab.subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                code = None
            took = time.monotonic() - started
        record = hostile.stop() if hostile else None
        if sim:
            sim.stop()
        with open(os.path.join(path, "converse.log"), errors="replace") as f:
            text = f.read()
        last = [line for line in text.splitlines() if line.startswith("hark converse:")]
        connections = (record or {}).get("connections", [])
        closes = [x["ended"] - x["client_close_at"] for x in connections if x.get("client_close_at") and x.get("ended")]
        result["converse"] = {"code": code, "took": took, "expected": expected_code, "closes": closes,
                              "connections": len(connections),
                              "by_client": all(x.get("ended_by") == "client" for x in connections)}
        result["crash"] = "no" if code is not None and code >= 0 else f"yes (exit {code})"
        result["log"] = text
        result["exit"] = code
        result["notes"].append(
            f"exit {code} after {took:.1f} s (--timeout {CONVERSE_TIMEOUT}); {len(connections)} connections"
            + (f"; closed {', '.join(f'{x:.2f}' for x in closes)} s after its close frame" if closes else "")
            + (f"; {last[-1][:140]}" if last else ""))

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
        if r.get("broken"):
            reasons.append(r["broken"])
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
            in_band = any(a in c["what"] for a in ("not JSON", "truncated", "tiny frames", "1-byte"))
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
            code, took, reached = r.get("sigterm_exit", (None, 99, False))
            recovered = f"exit {code} in {took:.2f}s"
            if code != 0 or took > 5:
                reasons.append("SIGTERM did not exit 0 within 5 s")
            if not reached:
                reasons.append("never reached speaking" if c["kind"] == "sigterm" else "no answer or no reload")
        elif expect in ("phase-deadline", "close-deadline", "flood-stop", "setup-deadline"):
            recovered = self.decide_network(c, r, s, reasons)
        elif expect == "converse":
            v = r.get("converse", {})
            code, took, want = v.get("code"), v.get("took", 99), v.get("expected")
            recovered = f"exit {code} after {took:.1f} s"
            if code != want:
                reasons.append(f"exit {code}, not {want}")
            if took > CONVERSE_TIMEOUT + 3:
                reasons.append(f"took {took:.1f} s, over --timeout {CONVERSE_TIMEOUT} + 3 s")
            if not v.get("by_client", True):
                reasons.append("the server, not hark, ended a connection")
            if "close-deaf" in c["name"]:
                closes = v.get("closes", [])
                if not closes:
                    reasons.append("no close frame came from hark")
                elif max(closes) > CLOSE_DEADLINE + DEADLINE_SLACK:
                    reasons.append(f"socket closed {max(closes):.1f} s after the close frame")
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
        elif expect == "cascade":
            recovered = self.decide_cascade(c, r, reasons)
        elif expect == "survive":
            completed = s.get("completed", 0)
            recovered = f"{completed}/{TURNS} answered on {connections} connection(s)"
            if completed < TURNS - 1:
                reasons.append("turns went unanswered")
        elif expect == "watchdog":
            recovered = "pings stopped and resumed" if r.get("watchdog") else "NO"
            if not r.get("watchdog"):
                reasons.append("watchdog pings did not stop and resume")
        if c["audio"] and self.baseline is not None and expect in ("recover", "clean", "recover-xrun", "survive") \
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

    def decide_cascade(self, c, r, reasons):
        """The cascade cases' verdicts: the daemon lives, its CPU is bounded (the common checks), the services are
        asked a bounded number of times with bounded requests, every reply ends (never left thinking), and a fault
        that fails a reply says so; returns the 'recovered' cell."""
        name = c["name"]
        record = r.get("cascade", {})
        requests = int(record.get("textRequests", 0))
        sizes = record.get("textRequestBytes", [])
        failed, answered = r.get("answer_failed", 0), r.get("answered", 0)
        if r.get("final_state") == "thinking":
            reasons.append("left thinking: a reply never ended")
        if sizes and max(sizes) > 256 * 1024:
            reasons.append(f"a text request of {max(sizes)} bytes")
        # Four turns; at most five requests each (a question and four rounds of tools); thirty a minute.
        if requests > TURNS * 5:
            reasons.append(f"{requests} text requests for {TURNS} turns")
        if name == "cascade-baseline":
            if answered < TURNS or failed:
                reasons.append(f"{answered} answers spoken, {failed} failed (want {TURNS}, none failed)")
        elif name == "cascade-tool-loop":
            if failed < 1:
                reasons.append("no turn ended in error")
        elif name == "cascade-endless-turn":
            if requests < 1:
                reasons.append("the endless turn was never answered")
        elif name == "cascade-speech-close":
            if failed < 1:
                reasons.append("the reply cut by the close did not fail")
            if answered < 2:
                reasons.append("no whole answer after the close")
        elif name in ("cascade-keepalive-reply", "cascade-silent-speech"):
            if failed < 1:
                reasons.append("no reply ended at its deadline")
        return f"{requests} requests, {answered} spoken, {failed} failed"

    def decide_network(self, c, r, s, reasons):
        """The network cases' verdicts; returns the 'recovered' cell."""
        expect = c["expect"]
        stop = r.get("stop")
        if stop is not None:
            code, took, when = stop
            if code != 0 or took > STOP_DEADLINE:
                reasons.append(f"SIGTERM {when}: exit {code} after {took:.1f} s (need 0 within {STOP_DEADLINE:g} s)")
        if expect == "phase-deadline":
            held, deadline = r.get("held", []), r.get("deadline", 0)
            longest = r.get("full_held_max")
            attempts = r.get("attempts", 0)
            if not r.get("opened"):
                reasons.append("no session was opened")
            if attempts < 2:
                reasons.append(f"{attempts} attempt(s): no reconnect")
            # A hot loop would make an attempt every few milliseconds; backoff starts at ~1 s, and every attempt
            # waits out its deadline here.
            if attempts > c["timeout"] / deadline + 4:
                reasons.append(f"{attempts} attempts: not backing off")
            if longest is None or longest > deadline + DEADLINE_SLACK:
                reasons.append(f"an attempt was held {longest} s (deadline {deadline:g} s)")
            if not r.get("by_client"):
                reasons.append("the server, not hark, ended an attempt")
            if r.get("in_attempt") and (r.get("last_closed_after_stop") or 99) > STOP_DEADLINE:
                reasons.append("the attempt open at SIGTERM was not closed")
            if "offline" not in r.get("states_before_stop", []):
                reasons.append("offline not shown")
            if r.get("ping_gap", 99) > 3 * WATCHDOG_SECONDS / 2:
                reasons.append(f"watchdog not fed for {r.get('ping_gap', 0):.1f} s while reconnecting")
            cpu = r.get("window_cpu", 0.0)
            if self.cpu_bound is not None and cpu > self.cpu_bound:
                reasons.append(f"CPU {cpu:.1f}% while offline")
            return (f"{attempts} attempts, longest {longest or 0:.1f}s/{deadline:g}s, "
                    f"exit {stop[0] if stop else '?'} in {stop[1] if stop else 0:.1f}s")
        if expect == "close-deadline":
            d = r.get("deaf", {})
            closes = d.get("closes", [])
            if len(closes) < 3:
                reasons.append(f"only {len(closes)} sessions ended with a close frame")
            elif max(closes) > CLOSE_DEADLINE + DEADLINE_SLACK:
                reasons.append(f"a socket stayed open {max(closes):.1f} s after the close frame")
            if not d.get("by_client"):
                reasons.append("the proxy, not hark, ended a connection")
            if d.get("left") or (d.get("after") or 0) > (d.get("before") or 0):
                reasons.append(f"sockets leaked: {d.get('before')} before, {d.get('after')} after, "
                               f"{d.get('left')} still to the proxy")
            if s.get("completed", 0) < len(closes) - 1:
                reasons.append("turns went unanswered")
            return (f"{len(closes)} closes unanswered, closed in <= {max(closes) if closes else 0:.1f}s; "
                    f"sockets {d.get('before')}->{d.get('after')}")
        if expect == "flood-stop":
            if not r.get("flooding"):
                reasons.append("the flood did not last until SIGTERM")
            return f"exit {stop[0] if stop else '?'} in {stop[1] if stop else 0:.1f}s under flood"
        if expect == "setup-deadline":
            p = r.get("presetup", {})
            if p.get("by") != "client":
                reasons.append("hark did not leave the flooded connection")
            elif p.get("held", 99) > SETUP_DEADLINE + DEADLINE_SLACK:
                reasons.append(f"the flooded connection was held {p.get('held'):.1f} s (setup deadline "
                               f"{SETUP_DEADLINE:g} s)")
            if not p.get("answered"):
                reasons.append("no answer on a later connection")
            return f"left conn 1 after {p.get('held', 0):.1f}s, answered later: {p.get('answered')}"
        return "-"



def main():
    parser = argparse.ArgumentParser(prog="scripts/fault-matrix")
    parser.add_argument("--bin", required=True)
    parser.add_argument("--sim", required=True)
    parser.add_argument("--cascade-sim", default=None)
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
