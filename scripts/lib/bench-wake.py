#!/usr/bin/env python3
"""The wake-word benchmark, run by scripts/bench-wake (which builds Hark and makes the reference's virtual
environment). Needs numpy and pyopen-wakeword 1.1.0 in the Python that runs it, and espeak-ng.

Accuracy. For each built-in wake word, TRIALS phrases "<wake word> <question>" said in one breath by espeak-ng
in 20 voice/speed variants; each condition puts them, 3 s apart, into one recording:
  clean; white noise, pink noise and speech babble (four other espeak voices) at 20, 10 and 5 dB SNR; and
  playback: the device's speaker plays a spoken answer at the same time, heard through a synthetic room
  (40 ms delay, 120 ms decaying reverberation) as loud as the talker.
Three detectors hear each recording: Hark's detector on the raw audio (`hark wake`), Hark's full front end
(`hark wake --front-end`, and `--playback` with what the speaker played: echo cancellation and noise
suppression, then the detector), and the Python reference (pyopen-wakeword) on the raw audio. A trial is
detected when its word is detected between its start and 1 s after its end. Printed per word and condition:
detections / trials, and the time from the end of the wake word (where the question begins in the phrase,
found by aligning it with the word and the question said alone) to the detection, the detector's share of
wake-to-session-open (the session opens and audio flows at once). And for Hark's front end, where the appliance
would begin sending after each detection (`--question-start`) against where the question begins: whether the
question's first words are kept, and how much of the wake word goes with them.

False accepts: NEGATIVE_MINUTES of non-wake speech (confusable phrases such as "hey travis", "hey charles",
and ordinary sentences, many voices) and noise, through all three, listening for all five words at once:
false accepts in total and per hour.

Cost: CPU seconds per audio minute of each detector alone on the negative recording (one word, hey_jarvis;
the process's CPU less that of a run on one second of audio: loading), and of the whole idle appliance
(`hark run` in speaker mode, wake word on, echo canceller and noise suppression on, microphone a file paced
in real time, no session) over IDLE_SECONDS; its peak RSS. The idle appliance hears two rooms: a quiet one (pink
noise at -55 dBFS RMS with a faint mains hum, a room's and a microphone's noise floor; not digital silence, which
would be too easy) and a talkative one (the non-wake speech and noise above, its pauses digital silence).

usage: bench-wake.py --hark HARK --reference-script scripts/lib/wake-reference.py --out DIR
                     [--trials N] [--negative-minutes M] [--idle-seconds S] [--repo DIR]
"""
import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time
import wave

import numpy as np

RATE = 16000
WORDS = {
    "hey_jarvis": "hey jarvis",
    "okay_nabu": "okay nabu",
    "alexa": "alexa",
    "hey_mycroft": "hey mycroft",
    "hey_rhasspy": "hey rhasspy",
}
QUESTIONS = [
    "what time is it",
    "what is the weather like today",
    "turn the volume down a little",
    "how far away is the moon",
    "set a timer for ten minutes",
]
# 20 voice/speed variants.
VOICES = ["en-us", "en", "en-gb+m3", "en-us+f2", "en+m5", "en-gb+f3", "en-us+m2", "en+f4", "en-029", "en-gb-x-rp"]
SPEEDS = [135, 170]
CONFUSABLES = [
    "hey travis", "hey charles", "hey marvin", "a jar of this", "hey jealous", "okay google", "okay now",
    "okay nah boo", "alexander", "a lexus", "elections", "hey michael", "hey micro", "hey rascal",
    "hey rhapsody", "hey there", "hey you", "jarvis cocker", "hello there", "okay then",
]
SENTENCES = [
    "the train leaves the station at a quarter past nine",
    "please remember to water the plants on the balcony",
    "we should meet again next week to talk about the budget",
    "the children played in the garden until it was dark",
    "she bought three apples and a loaf of bread at the market",
    "turn left at the second light and then keep going straight",
    "the meeting was moved to thursday afternoon",
    "there is a small cafe on the corner that makes good coffee",
    "could you send me the report before the end of the day",
    "the river was higher than usual after the storm",
    "my brother is learning to play the violin",
    "the museum is closed on mondays",
]
CONDITIONS = ["clean"] + [f"{kind} {snr} dB" for kind in ("white", "pink", "babble") for snr in (20, 10, 5)] + [
    "playback"
]


def speak(text, voice, speed, path):
    """espeak-ng's voice, resampled to 16 kHz mono int16 (numpy, linear interpolation is enough for a benchmark
    that compares detectors on the same audio)."""
    subprocess.run(["espeak-ng", "-v", voice, "-s", str(speed), "-w", path, text], check=True, capture_output=True)
    with wave.open(path, "rb") as source:
        rate = source.getframerate()
        data = np.frombuffer(source.readframes(source.getnframes()), dtype=np.int16).astype(np.float64)
    count = int(len(data) * RATE / rate)
    resampled = np.interp(np.arange(count) * rate / RATE, np.arange(len(data)), data)
    return resampled


def trim(samples):
    """Without the silence espeak puts around speech (so the word's own length is its spoken length)."""
    loud = np.nonzero(np.abs(samples) > 200)[0]
    return samples[loud[0] : loud[-1] + 1] if len(loud) else samples


def write(path, samples):
    data = np.clip(np.round(samples), -32768, 32767).astype("<i2")
    with wave.open(path, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(RATE)
        out.writeframes(data.tobytes())


def power(samples):
    return float(np.mean(samples.astype(np.float64) ** 2)) + 1e-9


def pink(count, rng):
    """Pink noise (Paul Kellet's filter over white noise)."""
    white = rng.standard_normal(count)
    b = np.zeros(7)
    out = np.empty(count)
    for index, w in enumerate(white):
        b[0] = 0.99886 * b[0] + w * 0.0555179
        b[1] = 0.99332 * b[1] + w * 0.0750759
        b[2] = 0.96900 * b[2] + w * 0.1538520
        b[3] = 0.86650 * b[3] + w * 0.3104856
        b[4] = 0.55000 * b[4] + w * 0.5329522
        b[5] = -0.7616 * b[5] - w * 0.0168980
        out[index] = b.sum() + b[6] + w * 0.5362
        b[6] = w * 0.115926
    return out


def babble(count, scratch, rng):
    """Four espeak voices reading other sentences at once, each looped to `count` samples."""
    total = np.zeros(count)
    for talker in range(4):
        voice = VOICES[(talker * 3 + 1) % len(VOICES)]
        parts = [speak(s, voice, 150 + 10 * talker, f"{scratch}/babble.wav") for s in rng.permutation(SENTENCES)]
        stream = np.concatenate(parts)
        total += np.resize(stream, count)
    return total


def room(signal, rng):
    """The speaker's sound at the microphone: 40 ms late, with 120 ms of decaying reverberation."""
    delay = int(0.04 * RATE)
    length = int(0.12 * RATE)
    response = rng.standard_normal(length) * np.exp(-np.arange(length) / (0.03 * RATE)) * 0.3
    response[0] = 1.0
    echo = np.convolve(signal, response)[: len(signal)]
    return np.concatenate([np.zeros(delay), echo])[: len(signal)]


def log_mel(samples, hop=160, size=400, bands=40):
    """Log mel energies every `hop` samples (for aligning speech, not for the detector)."""
    frames = max(1, (len(samples) - size) // hop + 1)
    index = np.arange(size)[None, :] + hop * np.arange(frames)[:, None]
    spectrum = np.abs(np.fft.rfft(np.pad(samples, (0, size))[index] * np.hanning(size), 512)) ** 2
    mel = 2595 * np.log10(1 + np.fft.rfftfreq(512, 1 / RATE) / 700)
    edges = np.linspace(mel[1], mel[-1], bands + 2)
    bank = np.array([np.clip(np.minimum((mel - edges[i]) / (edges[i + 1] - edges[i]),
                                        (edges[i + 2] - mel) / (edges[i + 2] - edges[i + 1])), 0, None)
                     for i in range(bands)])
    return np.log(spectrum @ bank.T + 1e-3)


def word_boundary(phrase, alone, question, hop=160):
    """Where the wake word ends and the question begins in `phrase` (said in one breath), in samples: the phrase
    aligned (dynamic time warping of log mel frames) with the word said alone followed by the question said
    alone, and the point that meets the joint. (The word said alone is longer than in the phrase, lengthened as
    the end of an utterance is; its length would put the boundary 100 to 300 ms into the question.)"""
    a, b = log_mel(phrase, hop), log_mel(np.concatenate([alone, question]), hop)
    cost = np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))
    n, m = cost.shape
    total = np.full((n + 1, m + 1), np.inf)
    total[0, 0] = 0
    for i in range(1, n + 1):
        row, previous = total[i], total[i - 1]
        for j in range(1, m + 1):
            row[j] = cost[i - 1, j - 1] + min(previous[j], row[j - 1], previous[j - 1])
    joint = len(alone) // hop
    i, j, first = n, m, n
    while i > 0 and j > 0:
        if j - 1 >= joint:
            first = i - 1
        step = int(np.argmin([total[i - 1, j - 1], total[i - 1, j], total[i, j - 1]]))
        i, j = (i - 1, j - 1) if step == 0 else (i - 1, j) if step == 1 else (i, j - 1)
    return first * hop


def build_positives(word, trials, scratch, rng):
    """One recording of `trials` phrases for `word`, 3 s apart; the trials' (start, wake end, end) in samples,
    the wake word's end where the question begins in the phrase (``word_boundary``)."""
    clips, marks, position = [], [], RATE
    pieces = [np.zeros(RATE)]
    for trial in range(trials):
        voice = VOICES[trial % len(VOICES)]
        speed = SPEEDS[(trial // len(VOICES)) % len(SPEEDS)]
        question = QUESTIONS[trial % len(QUESTIONS)]
        phrase = trim(speak(f"{WORDS[word]} {question}", voice, speed, f"{scratch}/phrase.wav"))
        alone = trim(speak(WORDS[word], voice, speed, f"{scratch}/word.wav"))
        asked = trim(speak(question, voice, speed, f"{scratch}/question.wav"))
        marks.append((position, position + word_boundary(phrase, alone, asked), position + len(phrase)))
        pieces += [phrase, np.zeros(3 * RATE)]
        position += len(phrase) + 3 * RATE
    return np.concatenate(pieces), marks


def build_negatives(minutes, scratch, rng):
    """Confusable phrases and sentences in many voices, with pauses and stretches of noise, `minutes` long."""
    target = int(minutes * 60 * RATE)
    pieces, total, index = [], 0, 0
    while total < target:
        voice = VOICES[index % len(VOICES)]
        speed = 120 + (index * 7) % 60
        if index % 3 == 2:
            text = SENTENCES[(index // 3) % len(SENTENCES)]
        else:
            text = CONFUSABLES[index % len(CONFUSABLES)] + " " + QUESTIONS[index % len(QUESTIONS)]
        speech = speak(text, voice, speed, f"{scratch}/negative.wav")
        gap = np.zeros(int(RATE * (0.3 + rng.random())))
        if index % 10 == 9:  # a stretch of room noise
            gap = rng.standard_normal(int(RATE * 4)) * 300
        pieces += [speech, gap]
        total += len(speech) + len(gap)
        index += 1
    return np.concatenate(pieces)[:target]


def with_condition(clean, condition, rng, scratch, answer_cache):
    """(microphone, playback or None) for `condition`."""
    if condition == "clean":
        return clean, None
    if condition == "playback":
        if "answer" not in answer_cache:
            parts = [speak(s, "en-gb+f3", 160, f"{scratch}/answer.wav") for s in SENTENCES]
            answer_cache["answer"] = np.concatenate(parts) * 0.8
        answer = np.resize(answer_cache["answer"], len(clean))
        echo = room(answer, rng)
        speech = clean[np.abs(clean) > 200]
        echo *= np.sqrt(power(speech) / power(echo))  # the echo as loud as the talker
        return clean + echo, answer
    kind, snr, _ = condition.split(" ")
    count = len(clean)
    noise = {
        "white": lambda: rng.standard_normal(count),
        "pink": lambda: pink(count, rng),
        "babble": lambda: babble(count, scratch, rng),
    }[kind]()
    speech = clean[np.abs(clean) > 200]
    noise *= np.sqrt(power(speech) / power(noise) / 10 ** (int(snr) / 10))
    return clean + noise, None


def quiet_room(seconds, rng, level=-55.0):
    """A quiet room at the microphone: pink noise at `level` dBFS RMS and a 50 Hz hum (with its harmonics)
    20 dB below it."""
    count = int(seconds * RATE)
    noise = pink(count, rng)
    noise *= 32768 * 10 ** (level / 20) / np.sqrt(power(noise))
    t = np.arange(count) / RATE
    hum = sum(np.sin(2 * np.pi * 50 * k * t + k) / k for k in (1, 2, 3))
    hum *= 32768 * 10 ** ((level - 20) / 20) / np.sqrt(power(hum))
    return noise + hum


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_hark(hark, path, words, front_end=False, playback=None, starts=None):
    """Detections (seconds, word) and the CPU seconds the run took. With a dict `starts`, it is filled with where
    the appliance would begin sending after each detection (seconds: `--question-start`), by detection time."""
    command = [hark, "wake", "--input", path]
    for word in words:
        command += ["--word", word]
    if front_end:
        command.append("--front-end")
    if playback:
        command += ["--playback", playback]
    if starts is not None:
        command.append("--question-start")
    before = children_cpu()
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    spent = children_cpu() - before
    found = []
    for line in output.splitlines():
        fields = line.split()
        found.append((float(fields[0]), fields[1]))
        if starts is not None and len(fields) == 4:
            starts[float(fields[0])] = float(fields[3])
    return found, spent


def run_reference(python, script, path, words, threshold=0.5, refractory=2.0):
    """The reference's per-frame scores turned into detections as Hark makes them (above the threshold,
    outside the word's refractory time), and the CPU seconds the run took."""
    before = children_cpu()
    output = subprocess.run(
        [python, script, "scores", path] + list(words), check=True, capture_output=True, text=True
    ).stdout
    spent = children_cpu() - before
    found, last = [], {}
    for line in output.splitlines():
        seconds, word, probability = line.split()
        seconds, probability = float(seconds), float(probability)
        if probability > threshold and seconds - last.get(word, -1e9) >= refractory:
            last[word] = seconds
            found.append((seconds, word))
    return found, spent


def score(found, word, marks, starts=None):
    """(detected trials, wake-end-to-detection latencies in ms, and with `starts` (see run_hark) how far after the
    question's beginning the appliance would begin sending, in ms, per detected trial: above 0 the question's
    first sound is lost, below it that much of the wake word goes with it)."""
    detected, latencies, offsets = 0, [], []
    times = sorted(s for s, w in found if w == word)
    for start, wake_end, end in marks:
        hits = [t for t in times if start / RATE <= t <= end / RATE + 1.0]
        if hits:
            detected += 1
            latencies.append((hits[0] - wake_end / RATE) * 1000)
            if starts is not None and hits[0] in starts:
                offsets.append((starts[hits[0]] - wake_end / RATE) * 1000)
    return detected, latencies, offsets


def percentile(values, share):
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def idle_appliance(hark, repo, scratch, microphone_wav, seconds):
    """`hark run` in speaker mode with the wake word, no session: CPU s per audio minute and peak RSS (kB). The
    speaker is ALSA's null device, which keeps running between answers as a sound card does (a file would not)."""
    with wave.open(microphone_wav, "rb") as source:
        raw = source.readframes(source.getnframes())
    raw_path = f"{scratch}/idle-mic.raw"
    with open(raw_path, "wb") as out:
        out.write(raw)
    config = f"""mode: speaker
board: host
board_dir: {repo}/board
state_dir: {scratch}
status_file: {scratch}/idle-status.json
gemini:
  endpoint: ws://127.0.0.1:9
audio:
  capture_file: {raw_path}
  playback_device: "null"
  file_pace: 1
session:
  trigger: wake
wake:
  words: hey_jarvis
"""
    with open(f"{scratch}/idle.yaml", "w") as out:
        out.write(config)
    report = f"{scratch}/idle-measure.json"
    subprocess.run(
        [sys.executable, f"{repo}/scripts/lib/bench-measure.py", "--json", report, "--log", f"{scratch}/idle.log",
         "--", hark, "run", "--config", f"{scratch}/idle.yaml", "--duration", str(seconds)],
        check=True,
    )
    with open(report) as source:
        measured = json.load(source)
    status = {}
    try:
        with open(f"{scratch}/idle-status.json") as source:
            status = json.load(source)
    except OSError:
        pass
    cpu = measured["user_s"] + measured["sys_s"]
    return cpu / (seconds / 60), measured["max_rss_kb"], status.get("wake") or {}


def idle_rooms(hark, repo, scratch, speech_path, seconds, rng):
    """The idle appliance in the quiet room and in the talkative one: {room: (CPU s per audio minute, peak RSS
    kB, the appliance's own wake-word counters)}."""
    quiet_path = f"{scratch}/idle-quiet-room.wav"
    write(quiet_path, quiet_room(seconds + 5, rng))
    return {
        "quiet room": idle_appliance(hark, repo, scratch, quiet_path, seconds),
        "non-wake speech": idle_appliance(hark, repo, scratch, speech_path, seconds),
    }


def print_idle(idle, seconds, indent=""):
    for room, (cost, rss, wake) in idle.items():
        print(f"{indent}idle appliance, {room} (microphone, echo canceller, noise suppression, detector, a speaker "
              f"kept running; {seconds} s "
              f"in real time): {cost:.3f} CPU s per audio minute ({cost / 60 * 100:.2f} % of one core), peak RSS "
              f"{rss / 1024:.1f} MiB; its own count: {json.dumps(wake)}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hark", required=True)
    parser.add_argument("--reference-script", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--repo", default=os.getcwd())
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--negative-minutes", type=float, default=60)
    parser.add_argument("--idle-seconds", type=int, default=120)
    parser.add_argument("--words", default=",".join(WORDS))
    parser.add_argument("--idle-only", action="store_true", help="only the idle appliance's cost")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    scratch = args.out
    rng = np.random.default_rng(7)
    random.seed(7)
    words = [w for w in args.words.split(",") if w]
    python = sys.executable
    started = time.time()
    if args.idle_only:
        negative_path = f"{scratch}/idle-negatives.wav"
        write(negative_path, build_negatives(args.idle_seconds / 60 + 0.1, scratch, rng))
        idle = idle_rooms(args.hark, args.repo, scratch, negative_path, args.idle_seconds, rng)
        print_idle(idle, args.idle_seconds)
        return

    print(f"bench-wake: {args.trials} trials per word and condition, {len(CONDITIONS)} conditions; "
          f"{args.negative_minutes:g} min of non-wake audio", flush=True)
    rows = []
    for word in words:
        clean, marks = build_positives(word, args.trials, scratch, rng)
        answers = {}
        for condition in CONDITIONS:
            microphone, playback = with_condition(clean, condition, rng, scratch, answers)
            path = f"{scratch}/{word}-{condition.replace(' ', '')}.wav"
            write(path, microphone)
            far = None
            if playback is not None:
                far = path.replace(".wav", "-far.wav")
                write(far, playback)
            raw, _ = run_hark(args.hark, path, [word])
            starts = {}
            front, _ = run_hark(args.hark, path, [word], front_end=True, playback=far, starts=starts)
            reference, _ = run_reference(python, args.reference_script, path, [word])
            row = {"word": word, "condition": condition, "trials": len(marks)}
            for name, found in (("hark", raw), ("front_end", front), ("reference", reference)):
                detected, latencies, offsets = score(found, word, marks, starts if name == "front_end" else None)
                row[name] = {"detected": detected, "latency_p50_ms": percentile(latencies, 0.5),
                             "latency_p90_ms": percentile(latencies, 0.9)}
                if name == "front_end":
                    row[name]["question_offsets_ms"] = [round(o, 1) for o in offsets]
            rows.append(row)
            print(f"  {word:12} {condition:14} hark {row['hark']['detected']:3}/{len(marks)}  "
                  f"front end {row['front_end']['detected']:3}/{len(marks)}  "
                  f"reference {row['reference']['detected']:3}/{len(marks)}", flush=True)

    negatives = build_negatives(args.negative_minutes, scratch, rng)
    negative_path = f"{scratch}/negatives.wav"
    write(negative_path, negatives)
    hours = len(negatives) / RATE / 3600
    false_accepts = {}
    for name, run in (
        ("hark", lambda: run_hark(args.hark, negative_path, words)),
        ("front_end", lambda: run_hark(args.hark, negative_path, words, front_end=True)),
        ("reference", lambda: run_reference(python, args.reference_script, negative_path, words)),
    ):
        found, _ = run()
        false_accepts[name] = {w: sum(1 for _, fw in found if fw == w) for w in words}

    # Cost: one word, the negative recording; loading measured on one second and taken off.
    one_second = f"{scratch}/one-second.wav"
    write(one_second, negatives[:RATE])
    minutes = len(negatives) / RATE / 60
    _, hark_load = run_hark(args.hark, one_second, ["hey_jarvis"])
    _, hark_cpu = run_hark(args.hark, negative_path, ["hey_jarvis"])
    _, ref_load = run_reference(python, args.reference_script, one_second, ["hey_jarvis"])
    _, ref_cpu = run_reference(python, args.reference_script, negative_path, ["hey_jarvis"])
    detector_cost = max(0.0, hark_cpu - hark_load) / minutes
    reference_cost = max(0.0, ref_cpu - ref_load) / minutes
    idle_seconds = min(args.idle_seconds, int(len(negatives) / RATE))
    idle = idle_rooms(args.hark, args.repo, scratch, negative_path, idle_seconds, rng)

    # The table.
    print()
    print("Detections / trials (wake word end -> detection, p50 ms), by word and condition")
    print(f"{'word':12} {'condition':14} {'Hark raw':>18} {'Hark front end':>18} {'reference raw':>18}")
    for row in rows:
        cells = []
        for name in ("hark", "front_end", "reference"):
            cell = row[name]
            latency = cell["latency_p50_ms"]
            shown = "" if latency != latency else f" ({latency:.0f} ms)"
            cells.append(f"{cell['detected']}/{row['trials']}{shown}")
        print(f"{row['word']:12} {row['condition']:14} {cells[0]:>18} {cells[1]:>18} {cells[2]:>18}")
    print()
    print("Totals by condition (all words)")
    for condition in CONDITIONS:
        chosen = [r for r in rows if r["condition"] == condition]
        trials = sum(r["trials"] for r in chosen)
        totals = [sum(r[name]["detected"] for r in chosen) for name in ("hark", "front_end", "reference")]
        print(f"  {condition:14} Hark raw {totals[0]}/{trials}  front end {totals[1]}/{trials}  "
              f"reference {totals[2]}/{trials}")
    print()
    print("The question after the wake word (Hark's front end, every condition): where the appliance begins sending,")
    print("from the question's first sound; kept = begins no later than 30 ms into it, word sent = begins more than")
    print("100 ms before it (that much of the wake word goes too)")
    for word in words:
        offsets = [o for r in rows if r["word"] == word for o in r["front_end"].get("question_offsets_ms", [])]
        if not offsets:
            print(f"  {word:12} no detections")
            continue
        kept = sum(1 for o in offsets if o <= 30)
        sent = sum(1 for o in offsets if o < -100)
        print(f"  {word:12} kept {kept}/{len(offsets)}, word sent {sent}/{len(offsets)}; median {percentile(offsets, 0.5):+.0f} ms, "
              f"latest {max(offsets):+.0f} ms, earliest {min(offsets):+.0f} ms")
    print()
    print(f"False accepts on {hours * 60:.0f} min of non-wake speech and noise (all words listening)")
    for name, label in (("hark", "Hark raw"), ("front_end", "Hark front end"), ("reference", "reference raw")):
        counts = false_accepts[name]
        total = sum(counts.values())
        per_word = ", ".join(f"{w} {c}" for w, c in counts.items())
        trials_negative = len(negatives) / RATE / 4  # one "trial" per 4 s of audio
        print(f"  {label:15} {total} ({total / hours:.2f} per hour, {total / trials_negative:.4f} per 4 s trial): "
              f"{per_word}")
    print()
    print("Cost")
    print(f"  detector alone (hey_jarvis), Hark:      {detector_cost:.3f} CPU s per audio minute "
          f"({detector_cost / 60 * 100:.2f} % of one core)")
    print(f"  detector alone (hey_jarvis), reference: {reference_cost:.3f} CPU s per audio minute "
          f"({reference_cost / 60 * 100:.2f} % of one core); Hark/reference "
          f"{detector_cost / reference_cost if reference_cost else float('nan'):.2f}")
    print_idle(idle, idle_seconds, indent="  ")
    print(f"bench-wake: done in {time.time() - started:.0f} s; recordings and logs in {args.out}")
    with open(f"{args.out}/report.json", "w") as out:
        json.dump({"rows": rows, "false_accepts": false_accepts, "negative_hours": hours,
                   "detector_cpu_s_per_min": detector_cost, "reference_cpu_s_per_min": reference_cost,
                   "idle": idle}, out, indent=1)


if __name__ == "__main__":
    main()
