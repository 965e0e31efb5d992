#!/usr/bin/env python3
"""The wake-word benchmark, run by scripts/bench-wake (which builds Hark and uses the references' environment,
.venv-wake-reference). Needs numpy, pymicro-wakeword 2.5.0, pymicro-features 2.0.2 and pyopen-wakeword 1.1.0 in the
Python that runs it, espeak-ng and flite.

Both model families on the same recordings: for each wake-word phrase the microWakeWord word (okay_nabu, hey_jarvis,
alexa, hey_mycroft) and openWakeWord's (oww_okay_nabu, ...), each run by Hark and by its Python reference
(pymicro-wakeword, pyopen-wakeword).

Accuracy. TRIALS phrases "<wake word> <question>" said in one breath by flite (five voices) and espeak-ng (seven),
3 s apart, in one recording per condition: clean; white noise, pink noise and speech babble (four other voices) at
10 dB SNR (with --all-conditions also at 20 and 5 dB); and playback: the device's speaker plays a spoken answer at
the same time, heard through a synthetic room (40 ms delay, 120 ms decaying reverberation) as loud as the talker.
Detectors: Hark on the raw audio (`hark wake`, both families at once), Hark's full front end (`hark wake --front-end`,
with `--playback` what the speaker played: echo cancellation and noise suppression, then the detector), and each
family's reference on the raw audio. A trial is detected when its word is detected between its start and 1 s after
its end. Printed per word and family: detections / trials per condition, and the time from the end of the wake word
(where the question begins in the phrase, found by aligning it with the word and the question said alone) to the
detection.

False accepts: NEGATIVE_MINUTES of non-wake speech (confusable phrases such as "hey travis", "okay now", and ordinary
sentences, many voices of both synthesisers) and noise, every word listening, Hark and the references: false accepts
per hour.

The stop word: the agent's own speech (sentences in four voices, NEGATIVE_MINUTES long) played by the speaker and heard
back through the room and the echo canceller, what the stop word hears most: its false accepts per hour; and "stop"
said by the user (TRIALS voices) while the speaker plays, and in quiet: its detections, Hark and the reference. The
model is --stop-model MANIFEST (a maker's microWakeWord stop model); without one (no wheel carries microWakeWord's
"stop"), the four microWakeWord words stand in, on the agent's speech only, and are reported as stand-ins.

Cost: CPU seconds per audio minute of one word alone per family, Hark and the reference, on CPU_MINUTES of the
non-wake audio (the process's CPU less that of a run on one second: loading); and the whole idle appliance (`hark run`
in speaker mode, echo canceller and noise suppression on, microphone a file paced in real time, no session) with a
microWakeWord word and with an openWakeWord word, in a quiet room (pink noise at -55 dBFS with a faint mains hum) and
a talkative one (the non-wake speech): CPU and peak RSS.

Runs two commands at a time (this is a 2-core machine). Figures are printed (and out/bench-wake/report.json), not
asserted.

usage: bench-wake.py --hark HARK --reference-script scripts/lib/wake-reference.py --out DIR
                     [--trials N] [--negative-minutes M] [--cpu-minutes M] [--idle-seconds S] [--phrases a,b]
                     [--all-conditions] [--stop-model MANIFEST] [--idle-only] [--repo DIR]
"""
import argparse
import concurrent.futures
import json
import os
import random
import selectors
import subprocess
import sys
import time
import wave

import numpy as np

RATE = 16000
# Each phrase, and its word in each family.
PHRASES = {
    "okay nabu": ("okay_nabu", "oww_okay_nabu"),
    "hey jarvis": ("hey_jarvis", "oww_hey_jarvis"),
    "alexa": ("alexa", "oww_alexa"),
    "hey mycroft": ("hey_mycroft", "oww_hey_mycroft"),
}
MICRO_CUTOFFS = {"okay_nabu": 0.85, "hey_jarvis": 0.97, "alexa": 0.9, "hey_mycroft": 0.95}
QUESTIONS = [
    "what time is it",
    "what is the weather like today",
    "turn the volume down a little",
    "how far away is the moon",
    "set a timer for ten minutes",
]
# Voices: (engine, voice, speed).
VOICES = [("flite", v, 0) for v in ("awb", "rms", "slt", "kal16", "kal")] + [
    ("espeak-ng", v, s)
    for v, s in (("en-us", 150), ("en", 140), ("en-gb+m3", 160), ("en-us+f2", 150), ("en+m5", 135),
                 ("en-gb+f3", 170), ("en-029", 150))
]
CONFUSABLES = [
    "hey travis", "hey charles", "hey marvin", "a jar of this", "hey jealous", "okay google", "okay now",
    "okay nah boo", "alexander", "a lexus", "elections", "hey michael", "hey micro", "hey rascal",
    "hey rhapsody", "hey there", "hey you", "jarvis cocker", "hello there", "okay then", "stopwatch", "a stop sign",
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
# What an agent says: answers, including the words a stop model might confuse.
ANSWERS = SENTENCES + [
    "the bus stops at the corner every ten minutes",
    "it will be sunny until the evening, then clouds move in from the west",
    "your timer has five minutes left",
    "i have set an alarm for seven in the morning",
    "the capital of australia is canberra",
    "the nearest stop is two hundred metres away",
    "you can pause or stop the music at any time",
    "here is a recipe for a quick tomato soup",
]


def speak(text, voice, path):
    """A voice (engine, name, speed), resampled to 16 kHz mono (linear interpolation is enough for a benchmark that
    compares detectors on the same audio)."""
    engine, name, speed = voice
    if engine == "flite":
        subprocess.run(["flite", "-voice", name, "-t", text, "-o", path], check=True, capture_output=True)
    else:
        subprocess.run(["espeak-ng", "-v", name, "-s", str(speed), "-w", path, text], check=True, capture_output=True)
    with wave.open(path, "rb") as source:
        rate = source.getframerate()
        data = np.frombuffer(source.readframes(source.getnframes()), dtype=np.int16).astype(np.float64)
    count = int(len(data) * RATE / rate)
    return np.interp(np.arange(count) * rate / RATE, np.arange(len(data)), data)


def trim(samples):
    """Without the silence around speech (so the word's own length is its spoken length)."""
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
    """Pink noise: white noise shaped by 1/sqrt(f) in the frequency domain."""
    spectrum = np.fft.rfft(rng.standard_normal(count))
    frequencies = np.fft.rfftfreq(count)
    frequencies[0] = frequencies[1]
    return np.fft.irfft(spectrum / np.sqrt(frequencies), count)


def babble(count, scratch, rng):
    """Four voices reading other sentences at once, each looped to `count` samples."""
    total = np.zeros(count)
    for talker in range(4):
        voice = VOICES[(talker * 3 + 1) % len(VOICES)]
        parts = [speak(s, voice, f"{scratch}/babble.wav") for s in rng.permutation(SENTENCES)[:6]]
        total += np.resize(np.concatenate(parts), count)
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
    aligned (dynamic time warping of log mel frames) with the word said alone followed by the question said alone,
    and the point that meets the joint."""
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


def build_positives(phrase, trials, scratch, with_question=True):
    """One recording of `trials` utterances of `phrase` (and a question after it, in one breath), 3 s apart; the
    trials' (start, wake end, end) in samples."""
    marks, position = [], RATE
    pieces = [np.zeros(RATE)]
    for trial in range(trials):
        voice = VOICES[trial % len(VOICES)]
        question = QUESTIONS[trial % len(QUESTIONS)]
        if with_question:
            said = trim(speak(f"{phrase}, {question}", voice, f"{scratch}/phrase.wav"))
            alone = trim(speak(phrase, voice, f"{scratch}/word.wav"))
            asked = trim(speak(question, voice, f"{scratch}/question.wav"))
            boundary = word_boundary(said, alone, asked)
        else:
            said = trim(speak(phrase, voice, f"{scratch}/phrase.wav"))
            boundary = len(said)
        marks.append((position, position + boundary, position + len(said)))
        pieces += [said, np.zeros(3 * RATE)]
        position += len(said) + 3 * RATE
    return np.concatenate(pieces), marks


def build_speech(minutes, texts, voices, scratch, rng, noise_every=10):
    """`minutes` of `texts` said in `voices`, with pauses and (every `noise_every`th) a stretch of room noise."""
    target = int(minutes * 60 * RATE)
    pieces, total, index = [], 0, 0
    while total < target:
        voice = voices[index % len(voices)]
        speech = speak(texts[index % len(texts)], voice, f"{scratch}/speech.wav")
        gap = np.zeros(int(RATE * (0.3 + rng.random())))
        if noise_every and index % noise_every == noise_every - 1:
            gap = rng.standard_normal(int(RATE * 4)) * 300
        pieces += [speech, gap]
        total += len(speech) + len(gap)
        index += 1
    return np.concatenate(pieces)[:target]


def negatives_text():
    texts = []
    for index in range(len(CONFUSABLES) * 3):
        if index % 3 == 2:
            texts.append(SENTENCES[(index // 3) % len(SENTENCES)])
        else:
            texts.append(CONFUSABLES[index % len(CONFUSABLES)] + " " + QUESTIONS[index % len(QUESTIONS)])
    return texts


def with_condition(clean, condition, rng, scratch, cache):
    """(microphone, playback or None) for `condition`."""
    if condition == "clean":
        return clean, None
    speech = clean[np.abs(clean) > 200]
    if condition == "playback":
        if "answer" not in cache:
            parts = [speak(s, ("espeak-ng", "en-gb+f3", 160), f"{scratch}/answer.wav") for s in SENTENCES]
            cache["answer"] = np.concatenate(parts) * 0.8
        answer = np.resize(cache["answer"], len(clean))
        echo = room(answer, rng)
        echo *= np.sqrt(power(speech) / power(echo))  # the echo as loud as the talker
        return clean + echo, answer
    kind, snr, _ = condition.split(" ")
    count = len(clean)
    noise = {"white": lambda: rng.standard_normal(count), "pink": lambda: pink(count, rng),
             "babble": lambda: babble(count, scratch, rng)}[kind]()
    noise *= np.sqrt(power(speech) / power(noise) / 10 ** (int(snr) / 10))
    return clean + noise, None


def quiet_room(seconds, rng, level=-55.0):
    """A quiet room at the microphone: pink noise at `level` dBFS RMS and a 50 Hz hum 20 dB below it."""
    count = int(seconds * RATE)
    noise = pink(count, rng)
    noise *= 32768 * 10 ** (level / 20) / np.sqrt(power(noise))
    t = np.arange(count) / RATE
    hum = sum(np.sin(2 * np.pi * 50 * k * t + k) / k for k in (1, 2, 3))
    hum *= 32768 * 10 ** ((level - 20) / 20) / np.sqrt(power(hum))
    return noise + hum


def run(command):
    """Runs `command` and returns (its output, the CPU seconds it used), measured with wait4."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    output = bytearray()
    errors = bytearray()
    # Read both pipes to their end, then collect the child with its own resource usage.
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ, output)
    selector.register(process.stderr, selectors.EVENT_READ, errors)
    open_pipes = 2
    while open_pipes:
        for key, _ in selector.select():
            chunk = os.read(key.fileobj.fileno(), 1 << 16)
            if chunk:
                key.data.extend(chunk)
            else:
                selector.unregister(key.fileobj)
                open_pipes -= 1
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({process.returncode}): {errors.decode()[-2000:]}")
    return output.decode(), usage.ru_utime + usage.ru_stime


def hark_detections(hark, path, words, front_end=False, playback=None, starts=None):
    """Hark's detections (seconds, word) and its CPU seconds. With a dict `starts`, it is filled with where the
    appliance would begin sending after each detection (`--question-start`), by (seconds, word)."""
    command = [hark, "wake", "--input", path]
    for word in words:
        command += ["--word", word]
    if front_end:
        command.append("--front-end")
    if playback:
        command += ["--playback", playback]
    if starts is not None:
        command.append("--question-start")
    output, spent = run(command)
    found = []
    for line in output.splitlines():
        fields = line.split()
        found.append((float(fields[0]), fields[1]))
        if starts is not None and len(fields) == 4:
            starts[(float(fields[0]), fields[1])] = float(fields[3])
    return found, spent


def reference_detections(python, script, path, words, cutoffs, refractory=2.0):
    """The references' per-frame scores turned into detections as Hark makes them (above the word's cutoff, outside
    its refractory time), and the CPU seconds of the run."""
    output, spent = run([python, script, "scores", path] + list(words))
    found, last = [], {}
    for line in output.splitlines():
        seconds, word, probability = line.split()
        seconds, probability = float(seconds), float(probability)
        if probability > cutoffs[word] and seconds - last.get(word, -1e9) >= refractory:
            last[word] = seconds
            found.append((seconds, word))
    found.sort()
    return found, spent


def score(found, word, marks, starts=None):
    """(detected trials, wake-end-to-detection latencies in ms, question-start offsets in ms)."""
    detected, latencies, offsets = 0, [], []
    times = sorted(s for s, w in found if w == word)
    for start, wake_end, end in marks:
        hits = [t for t in times if start / RATE <= t <= end / RATE + 1.0]
        if hits:
            detected += 1
            latencies.append((hits[0] - wake_end / RATE) * 1000)
            if starts is not None and (hits[0], word) in starts:
                offsets.append((starts[(hits[0], word)] - wake_end / RATE) * 1000)
    return detected, latencies, offsets


def percentile(values, share):
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def idle_appliance(hark, repo, scratch, name, microphone_wav, seconds, word):
    """`hark run` in speaker mode listening for `word`, no session: CPU s per audio minute and peak RSS (kB). The
    speaker is ALSA's null device, which keeps running between answers as a sound card does."""
    with wave.open(microphone_wav, "rb") as source:
        raw = source.readframes(source.getnframes())
    raw_path = f"{scratch}/idle-{name}.raw"
    with open(raw_path, "wb") as out:
        out.write(raw)
    config = f"""mode: speaker
board: host
board_dir: {repo}/board
state_dir: {scratch}/idle-{name}
status_file: {scratch}/idle-{name}-status.json
gemini:
  endpoint: ws://127.0.0.1:9
audio:
  capture_file: {raw_path}
  playback_device: "null"
  file_pace: 1
session:
  trigger: wake
wake:
  words: {word}
"""
    os.makedirs(f"{scratch}/idle-{name}", exist_ok=True)
    with open(f"{scratch}/idle-{name}.yaml", "w") as out:
        out.write(config)
    report = f"{scratch}/idle-{name}-measure.json"
    subprocess.run(
        [sys.executable, f"{repo}/scripts/lib/bench-measure.py", "--json", report, "--log",
         f"{scratch}/idle-{name}.log", "--", hark, "run", "--config", f"{scratch}/idle-{name}.yaml", "--duration",
         str(seconds)],
        check=True,
    )
    with open(report) as source:
        measured = json.load(source)
    status = {}
    try:
        with open(f"{scratch}/idle-{name}-status.json") as source:
            status = json.load(source)
    except OSError:
        pass
    cpu = measured["user_s"] + measured["sys_s"]
    return cpu / (seconds / 60), measured["max_rss_kb"], status.get("wake") or {}


def idle_rooms(pool, hark, repo, scratch, speech_path, seconds, rng):
    """The idle appliance with each family's word, in the quiet room and in the talkative one: {(family, room): (CPU s
    per audio minute, peak RSS kB, its own wake-word counters)}."""
    quiet_path = f"{scratch}/idle-quiet-room.wav"
    write(quiet_path, quiet_room(seconds + 5, rng))
    jobs = {}
    for family, word in (("microWakeWord", "okay_nabu"), ("openWakeWord", "oww_hey_jarvis")):
        for room_name, path in (("quiet room", quiet_path), ("non-wake speech", speech_path)):
            name = f"{word}-{room_name.replace(' ', '-')}"
            jobs[(family, room_name)] = pool.submit(idle_appliance, hark, repo, scratch, name, path, seconds, word)
    return {key: job.result() for key, job in jobs.items()}


def print_idle(idle, seconds):
    for (family, room_name), (cost, rss, wake) in idle.items():
        print(f"  idle appliance, {family:13} {room_name:15} ({seconds} s in real time): {cost:.3f} CPU s per audio "
              f"minute ({cost / 60 * 100:.2f} % of one core), peak RSS {rss / 1024:.1f} MiB; heard "
              f"{wake.get('audioSeconds', 0):.0f} s, {wake.get('detections', '?')} detections")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hark", required=True)
    parser.add_argument("--reference-script", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--repo", default=os.getcwd())
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--negative-minutes", type=float, default=60)
    parser.add_argument("--cpu-minutes", type=float, default=10)
    parser.add_argument("--idle-seconds", type=int, default=60)
    parser.add_argument("--phrases", default=",".join(PHRASES))
    parser.add_argument("--all-conditions", action="store_true")
    parser.add_argument("--stop-model", help="a maker's microWakeWord stop model: its manifest (.json)")
    parser.add_argument("--idle-only", action="store_true", help="only the idle appliance's cost")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    scratch = args.out
    rng = np.random.default_rng(7)
    random.seed(7)
    python = sys.executable
    script = args.reference_script
    started = time.time()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)
    snrs = (20, 10, 5) if args.all_conditions else (10,)
    conditions = ["clean"] + [f"{kind} {snr} dB" for kind in ("white", "pink", "babble") for snr in snrs] + [
        "playback"]

    def stage(name):
        print(f"bench-wake: {name} ({time.time() - started:.0f} s)", flush=True)

    if args.idle_only:
        stage("the idle appliance")
        speech_path = f"{scratch}/idle-negatives.wav"
        write(speech_path, build_speech(args.idle_seconds / 60 + 0.1, negatives_text(), VOICES, scratch, rng))
        print_idle(idle_rooms(pool, args.hark, args.repo, scratch, speech_path, args.idle_seconds, rng),
                   args.idle_seconds)
        return

    phrases = [p.replace("_", " ") for p in args.phrases.split(",") if p]
    cutoffs = dict(MICRO_CUTOFFS)
    cutoffs.update({open_word: 0.5 for _, open_word in PHRASES.values()})
    print(f"bench-wake: {args.trials} trials per phrase and condition, {len(conditions)} conditions, both families; "
          f"{args.negative_minutes:g} min of non-wake audio and of the agent's speech", flush=True)

    # Accuracy: every phrase in every condition, four detectors.
    rows = []
    for phrase in phrases:
        stage(f"'{phrase}': recordings")
        micro_word, open_word = PHRASES[phrase]
        words = [micro_word, open_word]
        clean, marks = build_positives(phrase, args.trials, scratch)
        cache = {}
        prepared = []
        for condition in conditions:
            microphone, playback = with_condition(clean, condition, rng, scratch, cache)
            path = f"{scratch}/{micro_word}-{condition.replace(' ', '')}.wav"
            write(path, microphone)
            far = None
            if playback is not None:
                far = path.replace(".wav", "-far.wav")
                write(far, playback)
            prepared.append((condition, path, far))
        stage(f"'{phrase}': detectors")
        jobs = []
        for condition, path, far in prepared:
            starts = {}
            jobs.append((condition, starts,
                         pool.submit(hark_detections, args.hark, path, words),
                         pool.submit(hark_detections, args.hark, path, words, True, far, starts),
                         pool.submit(reference_detections, python, script, path, words, cutoffs)))
        for condition, starts, raw, front, reference in jobs:
            results = {"hark": raw.result()[0], "front_end": front.result()[0], "reference": reference.result()[0]}
            for family, word in (("microWakeWord", micro_word), ("openWakeWord", open_word)):
                row = {"phrase": phrase, "word": word, "family": family, "condition": condition, "trials": len(marks)}
                for name, found in results.items():
                    detected, latencies, offsets = score(found, word, marks, starts if name == "front_end" else None)
                    row[name] = {"detected": detected, "latency_p50_ms": percentile(latencies, 0.5),
                                 "latency_p90_ms": percentile(latencies, 0.9)}
                    if name == "front_end":
                        row[name]["question_offsets_ms"] = [round(o, 1) for o in offsets]
                rows.append(row)
                print(f"  {word:16} {condition:14} hark {row['hark']['detected']:3}/{len(marks)}  front end "
                      f"{row['front_end']['detected']:3}/{len(marks)}  reference {row['reference']['detected']:3}/"
                      f"{len(marks)}", flush=True)

    # False accepts on non-wake speech, every word listening; and the agent's own speech for the stop word.
    stage("non-wake speech")
    negatives = build_speech(args.negative_minutes, negatives_text(), VOICES, scratch, rng)
    negative_path = f"{scratch}/negatives.wav"
    write(negative_path, negatives)
    hours = len(negatives) / RATE / 3600
    all_words = [w for phrase in phrases for w in PHRASES[phrase]]
    stage("false accepts")
    hark_negative = pool.submit(hark_detections, args.hark, negative_path, all_words)
    reference_negative = pool.submit(reference_detections, python, script, negative_path, all_words, cutoffs)
    agent_voices = [("flite", "slt", 0), ("espeak-ng", "en-gb+f3", 160), ("flite", "awb", 0), ("espeak-ng", "en-us", 150)]
    agent = build_speech(args.negative_minutes, ANSWERS, agent_voices, scratch, rng, noise_every=0) * 0.8
    agent_far = f"{scratch}/agent-far.wav"
    agent_microphone = f"{scratch}/agent-microphone.wav"
    write(agent_far, agent)
    write(agent_microphone, room(agent, rng) + quiet_room(len(agent) / RATE, rng))
    false_accepts = {
        "hark": {w: sum(1 for _, fw in hark_negative.result()[0] if fw == w) for w in all_words},
        "reference": {w: sum(1 for _, fw in reference_negative.result()[0] if fw == w) for w in all_words},
    }

    # The stop word.
    stage("the stop word")
    stop = {}
    if args.stop_model:
        stop_name = os.path.basename(args.stop_model)[: -len(".json")]
        with open(args.stop_model) as source:
            stop_cutoff = json.load(source)["micro"]["probability_cutoff"]
        stop_words = [args.stop_model]
        stop_names = [stop_name]
    else:
        stop_words = stop_names = [PHRASES[p][0] for p in phrases]
    agent_job = pool.submit(hark_detections, args.hark, agent_microphone, stop_words, True, agent_far)
    agent_raw_job = pool.submit(hark_detections, args.hark, agent_microphone, stop_words)
    stop["agent_hours"] = len(agent) / RATE / 3600
    stop["agent_front_end"] = {n: sum(1 for _, w in agent_job.result()[0] if w == n) for n in stop_names}
    stop["agent_raw"] = {n: sum(1 for _, w in agent_raw_job.result()[0] if w == n) for n in stop_names}
    if args.stop_model:
        said, stop_marks = build_positives("stop", args.trials, scratch, with_question=False)
        cache = {}
        for condition in ("clean", "playback"):
            microphone, playback = with_condition(said, condition, rng, scratch, cache)
            path = f"{scratch}/stop-{condition}.wav"
            write(path, microphone)
            far = None
            if playback is not None:
                far = f"{scratch}/stop-{condition}-far.wav"
                write(far, playback)
            raw = pool.submit(hark_detections, args.hark, path, stop_words)
            front = pool.submit(hark_detections, args.hark, path, stop_words, True, far)
            reference = pool.submit(reference_detections, python, script, path, stop_words,
                                    {stop_name: stop_cutoff})
            stop[condition] = {name: score(job.result()[0], stop_name, stop_marks)[0]
                               for name, job in (("hark", raw), ("front_end", front), ("reference", reference))}
        stop["trials"] = len(stop_marks)

    # Cost: one word per family, CPU_MINUTES of the non-wake audio; loading measured on one second and taken off.
    stage("cost")
    cpu_path = f"{scratch}/cpu.wav"
    cpu_samples = negatives[: int(args.cpu_minutes * 60 * RATE)]
    write(cpu_path, cpu_samples)
    one_second = f"{scratch}/one-second.wav"
    write(one_second, negatives[:RATE])
    minutes = len(cpu_samples) / RATE / 60
    cost = {}
    for family, word in (("microWakeWord", "okay_nabu"), ("openWakeWord", "oww_hey_jarvis")):
        jobs = {
            "hark": (pool.submit(hark_detections, args.hark, one_second, [word]),
                     pool.submit(hark_detections, args.hark, cpu_path, [word])),
            "reference": (pool.submit(reference_detections, python, script, one_second, [word], cutoffs),
                          pool.submit(reference_detections, python, script, cpu_path, [word], cutoffs)),
        }
        cost[family] = {name: max(0.0, full.result()[1] - load.result()[1]) / minutes
                        for name, (load, full) in jobs.items()}
    stage("the idle appliance")
    idle_seconds = min(args.idle_seconds, int(len(negatives) / RATE))
    idle = idle_rooms(pool, args.hark, args.repo, scratch, negative_path, idle_seconds, rng)

    # The tables.
    print()
    print("Detections / trials (wake word end -> detection, p50 ms), by word, family and condition")
    print(f"{'word':16} {'family':13} {'condition':14} {'Hark raw':>16} {'Hark front end':>16} {'reference raw':>16}")
    for row in rows:
        cells = []
        for name in ("hark", "front_end", "reference"):
            cell = row[name]
            latency = cell["latency_p50_ms"]
            shown = "" if latency != latency else f" ({latency:.0f} ms)"
            cells.append(f"{cell['detected']}/{row['trials']}{shown}")
        print(f"{row['word']:16} {row['family']:13} {row['condition']:14} {cells[0]:>16} {cells[1]:>16} {cells[2]:>16}")
    print()
    print("Totals by family and condition (all phrases): Hark raw, Hark front end, reference")
    for family in ("microWakeWord", "openWakeWord"):
        for condition in conditions:
            chosen = [r for r in rows if r["condition"] == condition and r["family"] == family]
            trials = sum(r["trials"] for r in chosen)
            totals = [sum(r[name]["detected"] for r in chosen) for name in ("hark", "front_end", "reference")]
            print(f"  {family:13} {condition:14} {totals[0]:3}/{trials}  {totals[1]:3}/{trials}  {totals[2]:3}/{trials}")
    print()
    print("The question after the wake word (Hark's front end): where the appliance begins sending, from the question's")
    print("first sound; kept = no later than 30 ms into it, word sent = more than 100 ms before it")
    for word in all_words:
        offsets = [o for r in rows if r["word"] == word for o in r["front_end"].get("question_offsets_ms", [])]
        if offsets:
            kept = sum(1 for o in offsets if o <= 30)
            sent = sum(1 for o in offsets if o < -100)
            print(f"  {word:16} kept {kept}/{len(offsets)}, word sent {sent}/{len(offsets)}; median "
                  f"{percentile(offsets, 0.5):+.0f} ms, latest {max(offsets):+.0f} ms")
    print()
    print(f"False accepts on {hours * 60:.0f} min of non-wake speech and noise (all words listening), per hour")
    for word in all_words:
        h, r = false_accepts["hark"][word], false_accepts["reference"][word]
        print(f"  {word:16} Hark {h:3} ({h / hours:6.2f}/h)   reference {r:3} ({r / hours:6.2f}/h)")
    print()
    agent_hours = stop["agent_hours"]
    label = "the stop word" if args.stop_model else "stand-ins for a stop word (no stop model given)"
    print(f"The agent's own speech ({agent_hours * 60:.0f} min) through the echo path, {label}: false accepts")
    for name in stop_names:
        front, raw = stop["agent_front_end"][name], stop["agent_raw"][name]
        print(f"  {name:16} with the front end (as the appliance hears it) {front} ({front / agent_hours:.2f}/h); "
              f"raw microphone {raw} ({raw / agent_hours:.2f}/h)")
    if args.stop_model:
        for condition in ("clean", "playback"):
            cell = stop[condition]
            print(f"  \"stop\" said by the user, {condition:8}: Hark raw {cell['hark']}/{stop['trials']}, front end "
                  f"{cell['front_end']}/{stop['trials']}, reference {cell['reference']}/{stop['trials']}")
    print()
    print(f"Cost (CPU s per audio minute, one word, {minutes:.0f} min of non-wake audio)")
    for family, figures in cost.items():
        ratio = figures["hark"] / figures["reference"] if figures["reference"] else float("nan")
        print(f"  {family:13} Hark {figures['hark']:.3f} ({figures['hark'] / 60 * 100:.2f} % of one core), reference "
              f"{figures['reference']:.3f} ({figures['reference'] / 60 * 100:.2f} %); Hark/reference {ratio:.2f}")
    print_idle(idle, idle_seconds)
    print(f"bench-wake: done in {time.time() - started:.0f} s; recordings and logs in {args.out}")
    with open(f"{args.out}/report.json", "w") as out:
        json.dump({"rows": rows, "false_accepts": false_accepts, "negative_hours": hours, "stop": stop,
                   "cost": cost, "idle": {f"{k[0]} / {k[1]}": v for k, v in idle.items()}}, out, indent=1)


if __name__ == "__main__":
    main()
