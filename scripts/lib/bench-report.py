#!/usr/bin/env python3
"""Prints the table of scripts/bench from the JSON reports and logs it left in WORK (out/bench).

usage: bench-report.py WORK --minutes N --paced-minutes N --long 0|1 --binary STRIPPED --unstripped BIN
"""
import argparse
import json
import math
import os
import re


def load(work, name):
    path = os.path.join(work, name + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as file:
        return json.load(file)


def percentile(values, fraction):
    """Nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def client_stdout_json(work, name):
    try:
        with open(os.path.join(work, name + ".out")) as file:
            lines = [line for line in file if line.startswith("{")]
        return json.loads(lines[-1]) if lines else {}
    except (OSError, ValueError):
        return {}


def timed_lines(path, offset=0.0):
    """(absolute monotonic time, text) for each line of a timestamped log."""
    result = []
    try:
        with open(path, errors="replace") as file:
            for line in file:
                stamp, _, text = line.partition(" ")
                try:
                    result.append((float(stamp) + offset, text.rstrip("\n")))
                except ValueError:
                    continue
    except OSError:
        pass
    return result


def turns(work, name, kind, report):
    if kind == "converse":
        try:
            with open(os.path.join(work, name + ".out"), errors="replace") as file:
                return str(sum(1 for line in file if line.startswith("model:")))
        except OSError:
            return "?"
    if kind == "genai":
        return str(client_stdout_json(work, name).get("turns", "?"))
    lines = [text for _, text in timed_lines(os.path.join(work, name + ".log"))]
    if "stopped_on" in report:
        return f"{sum(1 for text in lines if 'agent: answering turn' in text)} rx"
    for text in lines:
        match = re.search(r"(\d+) answer\(s\) played", text)
        if match:
            return match.group(1)
    return "time limit"


def ready(work, name, kind, report):
    if kind == "run":
        value = report.get("ready_s")
        return f"{value:.3f} R" if value is not None else "none"
    if kind == "genai":
        value = client_stdout_json(work, name).get("ready_monotonic")
        return f"{value - report['start_monotonic']:.3f} S" if value else "?"
    return "-"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("work")
    parser.add_argument("--minutes", type=float, required=True)
    parser.add_argument("--paced-minutes", type=float, required=True)
    parser.add_argument("--long", type=int, default=0)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--unstripped", required=True)
    args = parser.parse_args()
    work = args.work

    runs = [
        ("converse-fast", "converse", "hark converse --fast", args.minutes),
        ("genai-fast", "genai", "google-genai, unpaced", args.minutes),
        ("run-fast", "run", "hark run, file_pace 0", args.minutes),
        ("converse-paced", "converse", "hark converse, real time", args.paced_minutes),
        ("genai-paced", "genai", "google-genai, real time", args.paced_minutes),
        ("run-paced", "run", "hark run, file_pace 1", args.paced_minutes),
        ("run-paced-plain", "run", "  the same, no AEC or NS", args.paced_minutes),
        ("converse-cascade-paced", "converse", "cascade: hark converse, r.t.", args.paced_minutes),
        ("run-cascade-paced", "run", "cascade: hark run, pace 1", args.paced_minutes),
    ]
    figures = {}
    header = (
        f"{'run':<26} {'audio':>6} {'wall s':>7} {'CPU s':>7} {'CPU s/min':>9} {'peak RSS':>9} "
        f"{'end RSS':>8} {'own mem':>8} {'ready s':>9} {'wake/s':>7} {'(vol+invol)':>13} {'allocs/s':>8} {'turns':>6}"
    )
    print()
    print("Full-duplex session cost (release, static stdlib; all over wss:// to the TLS simulator)")
    print(header)
    print("-" * len(header))
    for name, kind, label, minutes in runs:
        report = load(work, name)
        if report is None:
            continue
        cpu = report["user_s"] + report["sys_s"]
        seconds = minutes * 60
        per_minute = cpu / minutes
        peak = report["max_rss_kb"] / 1024
        end = (report.get("final_rss_kb") or 0) / 1024
        wakeups = (report["nvcsw"] + report["nivcsw"]) / seconds
        anon = (report.get("max_anon_kb") or 0) / 1024
        allocations = f"{report['allocations'] / seconds:.0f}" if report.get("allocations") else "-"
        figures[name] = {"cpu": per_minute, "rss": peak, "anon": anon}
        failed = "" if report["exit"] == 0 else f"  (exit {report['exit']})"
        print(
            f"{label:<26} {minutes:>4g} m {report['wall_s']:>7.1f} {cpu:>7.2f} {per_minute:>9.3f} "
            f"{peak:>5.1f} MiB {end:>4.1f} MiB {anon:>4.1f} MiB {ready(work, name, kind, report):>9} {wakeups:>7.1f} "
            f"{report['nvcsw'] / seconds:>6.1f}+{report['nivcsw'] / seconds:<6.1f} "
            f"{allocations:>8} {turns(work, name, kind, report):>6}{failed}"
        )
    print(
        "CPU s = user+sys of the whole process (all threads, wait4 rusage); CPU s/min per minute of input audio;\n"
        "peak RSS = ru_maxrss; end RSS = last VmRSS sampled (every 0.5 s) before exit; own mem = largest RssAnon\n"
        "sampled (heap, stacks, written data: what only this process holds; the rest of RSS is code and libraries\n"
        "mapped from files, shared and reclaimable); allocs/s = malloc/calloc/realloc calls of the whole process\n"
        "per second of input audio, start-up included (LD_PRELOAD counter; Python's small-object allocator serves\n"
        "most of its objects without malloc, so its figure understates); wake/s = voluntary +\n"
        "involuntary context switches of all threads (wait4 rusage) per second of input audio; ready: R = exec\n"
        "to READY=1 on NOTIFY_SOCKET (devices open; the session opens on speech), S = exec to setupComplete,\n"
        "- = no ready signal; turns = answers (hark run: answers played to their end; 'rx' = answers received:\n"
        "the unpaced run stops when the last answer's transcript arrives, its speaker is not on the audio clock)."
    )
    extensions = client_stdout_json(work, "genai-fast").get("extensions")
    if extensions is not None:
        print(f"google-genai's WebSocket extensions negotiated: {extensions or 'none'}")

    if any(reference in figures for reference in ("genai-fast", "genai-paced")):
        print()
        print("Hark / google-genai (goal: CPU <= 1/5, stretch 1/10; memory <= 1/3, stretch 1/4)")
        pairs = [
            ("converse-fast", "genai-fast", "hark converse --fast / genai unpaced"),
            ("converse-paced", "genai-paced", "hark converse / genai, real time"),
            ("run-paced", "genai-paced", "hark run (appliance) / genai, real time"),
            ("run-paced-plain", "genai-paced", "  the same, no echo cancel. or noise supp."),
        ]
        for hark, reference, label in pairs:
            if hark not in figures or reference not in figures:
                continue
            cpu = figures[hark]["cpu"] / figures[reference]["cpu"]
            rss = figures[hark]["rss"] / figures[reference]["rss"]
            cpu_goal = "stretch met" if cpu <= 0.1 else "met" if cpu <= 0.2 else "NOT met"
            rss_goal = "stretch met" if rss <= 0.25 else "met" if rss <= 1 / 3 else "NOT met"
            own = ""
            if figures[hark]["anon"] and figures[reference]["anon"]:
                anon = figures[hark]["anon"] / figures[reference]["anon"]
                anon_goal = "stretch met" if anon <= 0.25 else "met" if anon <= 1 / 3 else "NOT met"
                own = f"  own mem {anon:5.3f} (1/{1 / anon:4.1f}) {anon_goal}"
            print(
                f"  {label:<42} CPU {cpu:6.3f} (1/{1 / cpu:4.1f}) {cpu_goal:<11}  RSS {rss:5.3f} (1/{1 / rss:4.1f}) "
                f"{rss_goal:<11}{own}"
            )
        print(
            "  (the appliance also runs echo cancellation, noise suppression, its voice detector, the LED engine\n"
            "   and a real-time playback device; the reference client only moves bytes between a file and a socket)"
        )

    print()
    print("The cascade / the Gemini Live session, the same input in real time (goal: CPU <= 1.5x)")
    cascade_pairs = [
        ("converse-cascade-paced", "converse-paced", "hark converse"),
        ("run-cascade-paced", "run-paced", "hark run (appliance)"),
    ]
    for cascade, live, label in cascade_pairs:
        if cascade not in figures or live not in figures:
            print(f"  {label:<42} not run")
            continue
        cpu = figures[cascade]["cpu"] / figures[live]["cpu"]
        rss = figures[cascade]["rss"] / figures[live]["rss"]
        goal = "met" if cpu <= 1.5 else "NOT met"
        print(
            f"  {label:<42} CPU {figures[cascade]['cpu']:.3f} / {figures[live]['cpu']:.3f} s per audio minute = "
            f"{cpu:5.2f}x {goal:<7}  peak RSS {figures[cascade]['rss']:.1f} / {figures[live]['rss']:.1f} MiB = {rss:4.2f}x"
        )
    print(
        "  (the cascade session holds three links: a speech-to-text socket fed all the time, a speech socket and a\n"
        "   streamed HTTPS request per answer; Live holds one socket)"
    )

    def latency_row(label, p50, p99, largest, count, how, unit="ms", width=44):
        print(f"  {label:<{width}} p50 {p50:8.2f} {unit}  p99 {p99:8.2f} {unit}  max {largest:8.2f}  n={count}  {how}")

    def pipeline_row(label, summary, how):
        if summary:
            latency_row(label, summary["p50"], summary["p99"], summary["max"], summary["count"], how)
        else:
            print(f"  {label:<44} not measured  {how}")

    print()
    print("Pipeline latencies (hark run in real time, no faults; the daemon's own histograms from its status file)")
    paced = load(work, "run-paced")
    if paced is None:
        print("  not run")
    else:
        pipeline_row("microphone frame captured -> on the wire", paced.get("capture_to_wire"),
                     "(a frame's last sample read from ALSA -> its message written to the socket; frames go out "
                     "gathered in 60 ms messages)")
        pipeline_row("model audio received -> written to ALSA", paced.get("received_to_speaker"),
                     "(the session's audio event -> snd_pcm_writei of its first sample returned, for audio that "
                     "found the jitter buffer empty, an answer's first; any wait for the 60 ms prebuffer included; "
                     "a paced file device returns a write after its period, as a full card buffer would)")

    print()
    print("Latencies (hark run in real time; simulator with goAway every 12 s and a TCP drop 5 s into every other connection)")
    latency = load(work, "latency")
    if latency is None:
        print("  not run")
    else:
        def row(label, values, unit="ms", how=""):
            if values:
                latency_row(label, percentile(values, 0.5), percentile(values, 0.99), max(values), len(values), how,
                            unit)
            else:
                print(f"  {label:<44} no samples  {how}")

        row("interrupt -> speaker silent", latency.get("interrupts_ms", []),
            how="(Hark's own figure: interrupt() call to snd_pcm_drop done, read from the status file)")
        pipeline_row("microphone frame captured -> on the wire", latency.get("capture_to_wire"),
                     "(with faults: audio held over each switch counts its wait)")
        pipeline_row("model audio received -> written to ALSA", latency.get("received_to_speaker"), "")
        client = timed_lines(os.path.join(work, "latency.log"), latency["start_monotonic"])
        simulator = timed_lines(os.path.join(work, "latency", "simulator.log"))
        ready_times = [time for time, text in client if "INFO hark: session connected" in text]

        def following(events):
            values = []
            for time in events:
                later = [ready for ready in ready_times if ready > time]
                if later:
                    values.append((later[0] - time) * 1000)
            return values

        go_aways = [time for time, text in simulator if "goAway sent" in text]
        drops = [time for time, text in simulator if "dropping the connection" in text]
        row("goAway sent -> new session ready", following(go_aways),
            how="(simulator log -> client 'session connected' = setupComplete; includes letting a turn in flight end)")
        row("TCP drop -> session resumed", following(drops),
            how="(simulator log -> client 'session connected'; includes the jittered first backoff)")
        # The service's interruption -> the appliance stopping its playback (the log line after the interrupt()
        # call): the network side of an interruption, which the first row (the playback side) follows.
        stops = [time for time, text in client if "INFO hark: playback interrupted" in text]
        interruptions = [time for time, text in simulator if "answer interrupted" in text]
        network, local = [], 0
        for time in interruptions:
            near = [stop for stop in stops if time - 0.5 <= stop <= time + 1.0]
            if not near:
                continue
            if near[0] < time:
                local += 1  # the appliance's own barge-in stopped the playback before the service decided
            else:
                network.append((near[0] - time) * 1000)
        row("service 'interrupted' -> interrupt() called", network,
            how=f"(simulator log -> client 'playback interrupted'; {local} stopped by the appliance's own barge-in first)")

    print()
    print("The cascade's latency: end of speech -> first answer audio (hark-cascade-bench: simulator and session in")
    print("one process, one clock; services' delays: final transcript 300 ms after the endpoint, first text chunk")
    print("400 ms then 30 ms a chunk, first speech audio 150 ms)")
    cascade = None
    try:
        with open(os.path.join(work, "cascade-latency.json")) as file:
            cascade = json.load(file)
    except (OSError, ValueError):
        pass
    if not cascade:
        print("  not run")
    else:
        print(f"  turns measured: {cascade['turns']} (left out: {cascade['skipped']})")
        averages = cascade.get("loadAverage") or []
        if len(averages) == 2:
            print(f"  load average (1, 5, 15 min) at the start: {averages[0]}; at the end: {averages[1]} (2 cores shared)")
        for part in cascade["parts"]:
            values = part["values"]
            if values:
                latency_row(part["name"], percentile(values, 0.5), percentile(values, 0.99), max(values), len(values),
                            "", width=70)
            else:
                print(f"  {part['name']:<44} no samples")
        print("  (Hark's own share is measured from the simulator's side of each hand-off, so it also holds the\n"
              "   simulator's own time to write and to parse what passes between them, and the loopback; the\n"
              "   microphone stand-in's lateness is the bench's own, in the total but in neither share)")
        own = next((part["values"] for part in cascade["parts"] if part["name"].startswith("Hark's own")), [])
        if own:
            p99 = percentile(own, 0.99)
            print(f"  goal: Hark adds <= 5 ms at p99: {p99:.2f} ms, {'met' if p99 <= 5 else 'NOT met'}")
    run = load(work, "run-cascade-paced")
    if run:
        print("  and the appliance's own audio path around the session (hark run on the cascade, real time):")
        pipeline_row("microphone frame captured -> on the wire", run.get("capture_to_wire"),
                     "(the cascade sends each frame as it comes)")
        pipeline_row("answer audio received -> written to ALSA", run.get("received_to_speaker"), "")

    print()
    print("Footprint")
    size = os.path.getsize(args.binary) / 1024 / 1024
    unstripped = os.path.getsize(args.unstripped) / 1024 / 1024
    print(f"  hark release binary, static stdlib: {size:.1f} MiB stripped ({unstripped:.1f} MiB unstripped)")
    run = load(work, "run-paced")
    if run:
        what = "after 10 minutes (end of the 10-minute paced run)" if args.long else (
            f"at the end of the {args.paced_minutes:g}-minute paced run (--long for 10 minutes)")
        print(f"  hark run RSS {what}: {(run.get('final_rss_kb') or 0) / 1024:.1f} MiB (peak {run['max_rss_kb'] / 1024:.1f} MiB)")


if __name__ == "__main__":
    main()
