"""Shared by scripts/fault-matrix and scripts/soak: runs the Live simulator and `hark run` as real processes
(file-backed audio on the host board, a FIFO microphone fed from here), samples the hark process from
/proc, reads the simulator's --record report. Standard library only.
"""
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time

RATE = 16_000
BYTES_PER_SAMPLE = 2

# Every process started here, so an interrupted run leaves none behind.
_children = []


def _reap(*_):
    for process in _children:
        if process.poll() is None:
            process.kill()
            process.wait()


def install_cleanup():
    """Kills the started processes on exit, SIGINT and SIGTERM."""
    import atexit

    atexit.register(_reap)

    def stop(signum, _frame):
        _reap()
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


def speech_cycle(burst=1.6, gap=4.4, rate=RATE):
    """One utterance and the silence after it, as PCM16 bytes: the signal of scripts/lib/make-speech.py
    (a 140 Hz buzz with harmonics under a four-syllables-a-second envelope)."""
    out = bytearray()
    total = int(round((burst + gap) * rate))
    burst_n = int(round(burst * rate))
    for n in range(total):
        value = 0
        if n < burst_n:
            t = n / rate
            syllable = 0.5 - 0.5 * math.cos(2 * math.pi * t * 4)
            buzz = sum(math.sin(2 * math.pi * 140 * k * t) / k for k in (1, 2, 3, 5, 7))
            value = int(max(-32768, min(32767, 0.35 * syllable * buzz * 32767)))
        out += value.to_bytes(2, "little", signed=True)
    return bytes(out)


def silence(seconds, rate=RATE):
    return bytes(int(round(seconds * rate)) * BYTES_PER_SAMPLE)


class MicrophoneFIFO:
    """A FIFO the capture device reads. A thread writes the script (a list of byte chunks) and then, while
    `keep_going` is set, repeats `loop` (for the soak) or stops writing (the stream stalls: the capture thread
    blocks in its read). `written` counts the bytes handed to the FIFO."""

    def __init__(self, path, script=(), loop=None, deep=True, rate=None, stall_at=None, stall_seconds=0.0):
        """`rate`: bytes a second to write at most (for a reader that is not paced itself); `stall_at`: after
        that many bytes, stop writing for `stall_seconds` once (the reader then starves: an overrun)."""
        self.path = path
        self.rate = rate
        self.stall_at = stall_at
        self.stall_seconds = stall_seconds
        self.started = None
        if os.path.exists(path):
            os.unlink(path)
        os.mkfifo(path, 0o600)
        # Read-write, so opening never waits for the reader.
        self.fd = os.open(path, os.O_RDWR)
        # A deep pipe (1 MiB, 32 s of audio where the system allows it), so a feeder thread that is scheduled
        # late on a busy machine does not starve the capture (which would show as xruns, not as a fault).
        # Not for a stall test: a paused feed must starve the reader at once.
        try:
            import fcntl
            if deep:
                fcntl.fcntl(self.fd, 1031, 1 << 20)  # F_SETPIPE_SZ
        except OSError:
            pass
        self.script = list(script)
        self.loop = loop
        self.written = 0
        self.script_done = threading.Event()
        self.feeding = threading.Event()
        self.feeding.set()
        self.running = True
        self.filler = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _write_all(self, data):
        view = memoryview(data)
        step = 3200  # 100 ms
        for start in range(0, len(view), step):
            while self.running and not self.feeding.is_set():
                time.sleep(0.01)
            if not self.running:
                return
            if self.stall_at is not None and self.written >= self.stall_at:
                self.stall_at = None
                time.sleep(self.stall_seconds)
            if self.rate:
                if self.started is None:
                    self.started = time.monotonic() - self.written / self.rate
                ahead = self.started + self.written / self.rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
            chunk = view[start:start + step]
            done = 0
            while done < len(chunk):
                done += os.write(self.fd, chunk[done:])
            self.written += len(chunk)

    def _run(self):
        for chunk in self.script:
            self._write_all(chunk)
        self.script_done.set()
        while self.running:
            if self.loop is not None:
                self._write_all(self.loop)
            elif self.filler is not None and self.feeding.is_set():
                self._write_all(self.filler)
            else:
                time.sleep(0.01)

    def consumed(self):
        """Bytes the reader has taken: written less what still sits in the pipe."""
        try:
            import fcntl
            import termios
            import array
            pending = array.array("i", [0])
            fcntl.ioctl(self.fd, termios.FIONREAD, pending)
            return self.written - pending[0]
        except OSError:
            return self.written

    def pause(self):
        self.feeding.clear()

    def resume(self, filler=None):
        """Feeds again; after the script, `filler` (e.g. silence) is written over and over."""
        if filler is not None:
            self.filler = filler
        self.feeding.set()

    def close(self):
        self.running = False
        self.feeding.set()
        # Unblock a write waiting on a full FIFO.
        try:
            reader = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
            for _ in range(64):
                if not os.read(reader, 65536):
                    break
            os.close(reader)
        except OSError:
            pass
        self.thread.join(timeout=2)
        os.close(self.fd)


class SpeakerFIFO:
    """A FIFO the playback device writes into, drained by a thread here (`read` counts the bytes). `stall()`
    stops reading for a while (the writer blocks: an underrun); `vanish()` takes the device away (the reader
    closes, so writes fail, and a directory stands at the path, so opening it again fails) until `restore()`
    puts a new FIFO there, a reader already on it."""

    def __init__(self, path):
        self.path = path
        self.read = 0
        self.read_since_restore = 0
        self.lock = threading.Lock()
        self.paused_until = 0.0
        self.fd = self._make(path)
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    @staticmethod
    def _make(path):
        if os.path.lexists(path):
            if os.path.isdir(path):
                os.rmdir(path)
            else:
                os.unlink(path)
        os.mkfifo(path, 0o600)
        # Non-blocking open of the read end (no writer yet), then blocking reads with a timeout via select.
        return os.open(path, os.O_RDONLY | os.O_NONBLOCK)

    def _run(self):
        import select
        while self.running:
            if time.monotonic() < self.paused_until:
                time.sleep(0.01)
                continue
            with self.lock:
                fd = self.fd
            if fd is None:
                time.sleep(0.01)
                continue
            try:
                ready, _, _ = select.select([fd], [], [], 0.05)
                if not ready:
                    continue
                data = os.read(fd, 65536)
            except (OSError, ValueError):
                time.sleep(0.01)
                continue
            if not data:
                time.sleep(0.01)  # no writer at the moment (the device is being reopened)
                continue
            self.read += len(data)
            self.read_since_restore += len(data)

    def stall(self, seconds):
        self.paused_until = time.monotonic() + seconds

    def vanish(self):
        with self.lock:
            fd, self.fd = self.fd, None
        os.unlink(self.path)
        os.mkdir(self.path)
        if fd is not None:
            os.close(fd)

    def restore(self):
        temporary = self.path + ".new"
        fd = self._make(temporary)
        os.rmdir(self.path)
        os.rename(temporary, self.path)
        self.read_since_restore = 0
        with self.lock:
            self.fd = fd

    def close(self):
        self.running = False
        self.thread.join(timeout=2)
        with self.lock:
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None


class Simulator:
    """`hark-live-sim` in the background; `url` once it listens. `stop()` sends SIGTERM, which writes --record."""

    def __init__(self, binary, folder, args=(), record=True):
        self.folder = folder
        self.record_path = os.path.join(folder, "simulator-record.json") if record else None
        self.log_path = os.path.join(folder, "simulator.log")
        out_path = os.path.join(folder, "simulator.out")
        command = [binary, "--port", "0", *args]
        if self.record_path:
            command += ["--record", self.record_path]
        self.out = open(out_path, "w")
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(command, stdout=self.out, stderr=self.log, stdin=subprocess.DEVNULL)
        _children.append(self.process)
        self.url = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with open(out_path) as f:
                for line in f:
                    if line.startswith("listening on "):
                        self.url = line.split()[2]
            if self.url:
                break
            if self.process.poll() is not None:
                raise RuntimeError("the simulator exited: " + open(self.log_path).read())
            time.sleep(0.05)
        if not self.url:
            raise RuntimeError("the simulator did not start within 20 s")
        self.port = int(self.url.rsplit(":", 1)[1].split("/")[0])

    def stop(self):
        """Stops it and returns its report (the parsed --record JSON), or None."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.out.close()
        self.log.close()
        if self.record_path and os.path.exists(self.record_path):
            with open(self.record_path) as f:
                return json.load(f)
        return None


class Hostile:
    """A hostile server of scripts/lib/hostile.py in the background (silent, deaf-close, flood); `port` once it
    listens. `flood()` sends it SIGUSR1; `lines()` is what it printed; `stop()` returns its report."""

    def __init__(self, folder, mode, args=(), name="hostile"):
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile.py")
        self.record_path = os.path.join(folder, f"{name}-record.json")
        self.out_path = os.path.join(folder, f"{name}.out")
        self.log_path = os.path.join(folder, f"{name}.log")
        self.out = open(self.out_path, "w")
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [sys.executable, script, mode, "--record", self.record_path, *args],
            stdout=self.out, stderr=self.log, stdin=subprocess.DEVNULL)
        _children.append(self.process)
        self.port = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and self.port is None:
            for line in self.lines():
                if line.startswith("listening on "):
                    self.port = int(line.split()[2])
            if self.process.poll() is not None:
                raise RuntimeError("the hostile server exited: " + open(self.log_path).read())
            time.sleep(0.05)
        if self.port is None:
            raise RuntimeError("the hostile server did not start within 20 s")

    def lines(self):
        with open(self.out_path) as f:
            return f.read().splitlines()

    def flood(self):
        self.process.send_signal(signal.SIGUSR1)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.out.close()
        self.log.close()
        return read_json(self.record_path)


def sockets_of(pid, port=None):
    """The process's open sockets; with `port`, only TCP sockets whose remote port is `port` (loopback, IPv4
    or IPv6), from /proc/PID/fd and /proc/net/tcp*."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        return None
    if port is None:
        return len(inodes)
    count = 0
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                next(f)
                for line in f:
                    fields = line.split()
                    remote_port = int(fields[2].rsplit(":", 1)[1], 16)
                    if remote_port == port and fields[9] in inodes:
                        count += 1
        except OSError:
            pass
    return count


def clock_ticks():
    return os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of the process (all threads), seconds; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / clock_ticks()
    except (OSError, IndexError, ValueError):
        return None


def cpu_percent_over(pid, seconds):
    """Waits `seconds` and returns the process's CPU time over them, in percent of one core: a hot loop
    shows as ~100."""
    t0, c0 = time.monotonic(), cpu_seconds(pid) or 0
    time.sleep(seconds)
    t1, c1 = time.monotonic(), cpu_seconds(pid) or 0
    return 100 * (c1 - c0) / (t1 - t0)


def proc_sample(pid):
    """RSS (KiB), open file descriptors, threads of a live process; None once it is gone."""
    try:
        rss = threads = None
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("Threads:"):
                    threads = int(line.split()[1])
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        return {"rss_kib": rss, "fds": fds, "threads": threads, "cpu": cpu_seconds(pid)}
    except OSError:
        return None


class Hark:
    """`hark run --config` as a real process: stderr to a log file, the status file polled for states."""

    def __init__(self, binary, folder, config_text, args=(), env=None):
        self.folder = folder
        self.config_path = os.path.join(folder, "hark.yaml")
        self.log_path = os.path.join(folder, "hark.log")
        self.status_path = os.path.join(folder, "status.json")
        with open(self.config_path, "w") as f:
            f.write(config_text)
        environment = dict(os.environ)
        for key in list(environment):
            if key.startswith("HARK_") or key in ("GEMINI_API_KEY", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
                del environment[key]
        environment.update(env or {})
        self.log = open(self.log_path, "w")
        # Standard output holds the host board's LEDs drawn for a terminal: kept apart from the log.
        self.leds = open(os.path.join(folder, "hark.stdout"), "w")
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            [binary, "run", "--config", self.config_path, *args],
            stdout=self.leds, stderr=self.log, stdin=subprocess.DEVNULL, env=environment,
        )
        _children.append(self.process)
        self.pid = self.process.pid
        self.states = []
        self.seen = set()
        self.last_status = None
        self.last_cpu = 0.0
        self.ended_at = None
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll, daemon=True)
        self._poller.start()

    def _poll(self):
        while not self._stop.is_set():
            cpu = cpu_seconds(self.pid)
            if cpu is not None and self.process.poll() is None:
                self.last_cpu = cpu
            status = read_json(self.status_path)
            if status:
                self.last_status = status
                names = [status.get("conversation", "")] + list(status.get("overlays", []))
                line = status.get("state", "")
                if not self.states or self.states[-1] != line:
                    self.states.append(line)
                for name in names:
                    if name and name not in self.seen:
                        self.seen.add(name)
            if self.process.poll() is not None and self.ended_at is None:
                self.ended_at = time.monotonic()
            time.sleep(0.1)

    def wall(self):
        return (self.ended_at or time.monotonic()) - self.started

    def cpu_percent(self):
        wall = self.wall()
        return 100.0 * self.last_cpu / wall if wall > 0 else 0.0

    def log_text(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def count(self, needle):
        return self.log_text().count(needle)

    def wait_for(self, predicate, timeout, step=0.1):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            if self.process.poll() is not None:
                return predicate()
            time.sleep(step)
        return predicate()

    def terminate(self, timeout=10):
        """SIGTERM; returns (returncode, seconds to exit). A process that does not exit in time is killed
        (returncode None)."""
        if self.process.poll() is not None:
            return self.process.returncode, 0.0
        self.last_cpu = cpu_seconds(self.pid) or self.last_cpu
        sent = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            code = None
        took = time.monotonic() - sent
        if self.ended_at is None:
            self.ended_at = time.monotonic()
        self._stop.set()
        self._poller.join(timeout=2)
        self.log.close()
        self.leds.close()
        return code, took

    def finish(self):
        self._stop.set()
        self._poller.join(timeout=2)
        if not self.log.closed:
            self.log.close()
            self.leds.close()



def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def hark_config(folder, repo, endpoint, mic, pace, key_file=None, extra="", echo_cancellation=False,
                speaker=None, capture_device=None):
    """The appliance's configuration for one run. Echo cancellation is off by default: the file-backed
    microphone holds no echo, and builds before the echo-alignment change of fc9f37b sent sound during
    answers that the microphone never held (phantom barge-ins), which blurs every turn count here; --aec
    turns it on to check exactly that."""
    key = f"  api_key_file: {key_file}\n" if key_file else ""
    microphone = f"  capture_device: {capture_device}\n" if capture_device else f"  capture_file: {mic}\n"
    return (
        "mode: speaker\n"
        "board: host\n"
        f"board_dir: {repo}/board\n"
        f"state_dir: {folder}\n"
        f"status_file: {folder}/status.json\n"
        "log_transcripts: true\n"
        "gemini:\n"
        f"  endpoint: {endpoint}\n"
        f"{key}"
        "audio:\n"
        f"{microphone}"
        f"  playback_file: {speaker or folder + '/speaker.raw'}\n"
        f"  file_pace: {pace}\n"
        "  volume: 100\n"
        f"  echo_cancellation: {'true' if echo_cancellation else 'false'}\n"
        "session:\n"
        "  idle_timeout: 10m\n"
        # The speech opens the session: the synthetic voice says no wake word (with the wake word's runtime installed,
        # the default trigger would wait for one).
        "  trigger: voice\n"
        f"{extra}"
    )


def free_closed_port():
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NotifySocket:
    """A NOTIFY_SOCKET datagram socket, as systemd gives a Type=notify service; messages with arrival times."""

    def __init__(self, path):
        if os.path.exists(path):
            os.unlink(path)
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.2)
        self.messages = []
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while self.running:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            self.messages.append((time.monotonic(), data.decode(errors="replace")))

    def pings(self, since=0.0, until=None):
        return [t for t, m in self.messages if "WATCHDOG=1" in m.split("\n") and t >= since
                and (until is None or t <= until)]

    def close(self):
        self.running = False
        self.thread.join(timeout=1)
        self.sock.close()


def record_summary(report):
    """Connections, sessions with setup done, resumed sessions, completed turns, audio samples."""
    connections = report.get("connections", []) if report else []
    return {
        "connections": len(connections),
        "sessions": sum(1 for c in connections if c.get("sessionID") is not None),
        "resumed": sum(1 for c in connections if c.get("resumed")),
        "completed": sum(1 for c in connections for t in c.get("turns", []) if t.get("outcome") == "completed"),
        "interrupted": sum(1 for c in connections for t in c.get("turns", []) if t.get("outcome") == "interrupted"),
        "pending": sum(1 for c in connections for t in c.get("turns", []) if t.get("outcome") == "pending"),
        "samples": sum(int(c.get("audioSamples", 0)) for c in connections),
        # Counting once what hark sent again: after each connection but the last, what followed its last
        # resumption handle went out again on the next one.
        "distinct_samples": sum(int(c.get("audioSamples", 0)) for c in connections)
        - sum(int(c.get("audioSamples", 0)) - int(c.get("audioSamplesAtLastHandle", 0)) for c in connections[:-1]),
        "faults": [f for c in connections for f in c.get("faults", [])],
        "closes": [c.get("close") for c in connections],
    }


def grep_secret(marker, paths):
    """The files among `paths` that contain `marker`."""
    found = []
    needle = marker.encode()
    for path in paths:
        try:
            with open(path, "rb") as f:
                if needle in f.read():
                    found.append(path)
        except OSError:
            pass
    return found


def files_under(folder):
    out = []
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            if os.path.isfile(path) and not name.endswith(".key"):
                out.append(path)
    return out


def table(headers, rows):
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(str(cell)))
    lines = ["  ".join(str(h).ljust(widths[i]) for i, h in enumerate(headers)),
             "  ".join("-" * w for w in widths)]
    for row in rows:
        lines.append("  ".join(str(c).ljust(widths[i]) for i, c in enumerate(row)))
    return "\n".join(lines)
