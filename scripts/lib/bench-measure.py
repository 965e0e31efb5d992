#!/usr/bin/env python3
"""Runs one command and measures it from outside, for scripts/bench. Writes a JSON report:

  user_s, sys_s     CPU time of the whole process, all threads, with the children it reaped (wait4 rusage)
  self_cpu_s        the process's own CPU time without its children (/proc/PID/stat, sampled every 50 ms;
                    hark converse --backend livekit: hark without its hark-livekit helpers)
  children_cpu_s    user_s + sys_s - self_cpu_s: the children's (the helpers')
  max_rss_kb        peak resident set size (wait4 rusage ru_maxrss: the largest of the process and its
                    reaped children)
  self_hwm_kb       the process's own peak resident set size (VmHWM, sampled)
  children_max_rss_kb  the largest sum of its children's VmRSS sampled (every 0.5 s)
  final_rss_kb      the last VmRSS sampled (every 0.5 s) before the process exited
  allocations       with --malloc-count LIB: malloc + calloc + realloc + aligned allocations of the
                    whole process, counted by that LD_PRELOAD library (scripts/lib/malloc-count.c);
                    Python's own small-object allocator serves many objects without calling malloc
  max_anon_kb       the largest RssAnon sampled (every 0.5 s): the process's own memory (heap, stacks,
                    written data), which no other process shares and the kernel cannot drop; the rest
                    of RSS is mapped files (code, libraries), shared and reclaimable
  nvcsw, nivcsw     voluntary and involuntary context switches of all threads (wait4 rusage)
  wall_s            exec to exit, exit code
  ready_s           exec to the first READY=1 datagram on a NOTIFY_SOCKET made here (with --notify)
  interrupts_ms     with --status FILE: each new lastInterruptMilliseconds seen in the daemon's status
                    file (polled every 50 ms)
  capture_to_wire,  with --status FILE: the daemon's own percentiles from its last status file: a
  received_to_speaker  microphone frame's capture to its message on the socket, answer audio's arrival
                    to the ALSA write of its first sample (milliseconds: p50, p99, max, count)
  start_monotonic   time.monotonic() just before the exec (the same clock as the child's)

With --log FILE the command's standard error is written there, each line prefixed with the seconds
since the exec when it arrived (lines are written as they happen, so this times log events).
Standard input is an open pipe nobody writes to. The command's standard output goes to --stdout FILE (default: /dev/null). With --stop-on REGEX (needs
--log) the command gets SIGTERM when a line of its standard error matches.

usage: bench-measure.py --json OUT [--notify] [--log F] [--stdout F] [--status F]
                        [--kill-after S] [--stop-on REGEX] -- COMMAND...
"""
import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time


def vm_kb(pid, field="VmRSS"):
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def cpu_seconds(pid):
    """utime + stime of `pid` alone (/proc/PID/stat), or None."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def children(pid):
    """The pids of `pid`'s children (/proc/PID/task/*/children)."""
    found = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as listed:
                found += [int(child) for child in listed.read().split()]
    except OSError:
        pass
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", required=True)
    parser.add_argument("--notify", action="store_true", help="give the command a NOTIFY_SOCKET")
    parser.add_argument("--log", help="standard error, each line timestamped")
    parser.add_argument("--stdout", default=os.devnull)
    parser.add_argument("--status", help="a hark status file to poll for interrupt latencies")
    parser.add_argument("--kill-after", type=float, help="SIGTERM the command after this many seconds")
    parser.add_argument("--stop-on", help="SIGTERM the command when a log line matches this")
    parser.add_argument("--malloc-count", help="an LD_PRELOAD library that counts allocations (malloc-count.c)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")

    env = dict(os.environ)
    counts_file = None
    if args.malloc_count:
        counts_file = args.json + ".mallocs"
        if os.path.exists(counts_file):
            os.unlink(counts_file)
        env["LD_PRELOAD"] = args.malloc_count
        env["MALLOC_COUNT_OUT"] = counts_file
    report = {"command": command}
    notify = None
    if args.notify:
        folder = tempfile.mkdtemp(prefix="bench-notify-")
        path = os.path.join(folder, "notify.sock")
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(path)
        notify.settimeout(0.2)
        env["NOTIFY_SOCKET"] = path

    log = open(args.log, "w") if args.log else None
    stdout = open(args.stdout, "wb")
    start = time.monotonic()
    report["start_monotonic"] = start
    # Standard input is a pipe that stays open and silent (as a terminal nobody types on): hark run's
    # terminal button on the host board polls it, and at EOF (/dev/null) that poll returns at once.
    child = subprocess.Popen(
        command, env=env, stdin=subprocess.PIPE, stdout=stdout,
        stderr=subprocess.PIPE if log else subprocess.DEVNULL,
    )
    done = threading.Event()
    threads = []

    if log:
        stop = re.compile(args.stop_on) if args.stop_on else None

        def read_log():
            for raw in child.stderr:
                text = raw.decode(errors="replace")
                log.write(f"{time.monotonic() - start:.6f} {text}")
                log.flush()
                if stop and stop.search(text) and "stopped_on" not in report:
                    report["stopped_on"] = time.monotonic() - start
                    child.send_signal(signal.SIGTERM)
        threads.append(threading.Thread(target=read_log, daemon=True))

    if notify:
        def read_notify():
            while not done.is_set():
                try:
                    data = notify.recv(4096).decode(errors="replace")
                except socket.timeout:
                    continue
                except OSError:
                    return
                if "READY=1" in data.split("\n") and "ready_s" not in report:
                    report["ready_s"] = time.monotonic() - start
        threads.append(threading.Thread(target=read_notify, daemon=True))

    for thread in threads:
        thread.start()

    interrupts = []
    last_interrupt = None
    final_rss = None
    max_anon = None
    self_cpu = None
    self_hwm = None
    children_rss = 0
    next_rss = 0.0
    status = None
    last_status = {}
    while True:
        pid, wait_status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid == child.pid:
            break
        now = time.monotonic() - start
        cpu = cpu_seconds(child.pid)
        if cpu is not None:
            self_cpu = cpu
        if now >= next_rss:
            hwm = vm_kb(child.pid, "VmHWM")
            if hwm is not None:
                self_hwm = hwm
            children_rss = max(children_rss, sum(vm_kb(pid) or 0 for pid in children(child.pid)))
            rss = vm_kb(child.pid)
            if rss is not None:
                final_rss = rss
            anon = vm_kb(child.pid, "RssAnon")
            if anon is not None:
                max_anon = max(max_anon or 0, anon)
            next_rss = now + 0.5
        if args.status:
            try:
                with open(args.status) as file:
                    last_status = json.load(file)
                value = last_status.get("lastInterruptMilliseconds")
                if value is not None and value != last_interrupt:
                    interrupts.append(value)
                    last_interrupt = value
            except (OSError, ValueError):
                pass
        if args.kill_after is not None and now >= args.kill_after and status is None:
            status = "killed"
            child.send_signal(signal.SIGTERM)
        time.sleep(0.05)
    wall = time.monotonic() - start
    child.returncode = os.waitstatus_to_exitcode(wait_status)
    done.set()
    for thread in threads:
        thread.join(timeout=2)
    if log:
        log.close()

    report.update(
        wall_s=wall,
        exit=child.returncode,
        user_s=usage.ru_utime,
        sys_s=usage.ru_stime,
        max_rss_kb=usage.ru_maxrss,
        self_cpu_s=self_cpu,
        children_cpu_s=None if self_cpu is None else max(0.0, usage.ru_utime + usage.ru_stime - self_cpu),
        self_hwm_kb=self_hwm,
        children_max_rss_kb=children_rss,
        final_rss_kb=final_rss,
        max_anon_kb=max_anon,
        nvcsw=usage.ru_nvcsw,
        nivcsw=usage.ru_nivcsw,
    )
    if counts_file:
        try:
            with open(counts_file) as file:
                report["allocations"] = sum(int(value) for value in file.read().split())
        except (OSError, ValueError):
            report["allocations"] = None  # the process did not exit through exit() (killed, _exit)
    if args.status:
        report["interrupts_ms"] = interrupts
        try:
            with open(args.status) as file:
                last_status = json.load(file)
        except (OSError, ValueError):
            pass
        # Percentiles the daemon kept from its start (HDR histograms), as its last status file has them.
        report["capture_to_wire"] = last_status.get("captureToWire")
        report["received_to_speaker"] = last_status.get("receivedToSpeaker")
    with open(args.json, "w") as out:
        json.dump(report, out, indent=1)
    if notify:
        notify.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
