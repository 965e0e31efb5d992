#!/usr/bin/env python3
"""The wake-word references: the test fixtures (clips spoken by espeak-ng or flite), and what the Python reference
of each model family computes on a recording, which Tests/HarkWakeTests and scripts/bench-wake compare Hark with.

usage:
  wake-reference.py speak OUT.wav "TEXT" [--voice en-us] [--speed 140] [--engine espeak-ng|flite]
      espeak-ng's voice (22050 Hz), or flite's (a voice of `flite -lv`; 8 or 16 kHz), resampled to 16 kHz mono
      16-bit with the standard library's audioop, with 0.5 s of silence before and after
  wake-reference.py scores IN.wav WORD...
      prints "SECONDS WORD PROBABILITY" for every frame of every word, as `hark wake --scores` does. A WORD is
      a microWakeWord built-in (okay_nabu, hey_jarvis, alexa, hey_mycroft) or the path of a microWakeWord
      manifest (.json): scored by pymicro-wakeword 2.5.0; or an openWakeWord built-in (oww_hey_jarvis, ...):
      scored by pyopen-wakeword 1.1.0
  wake-reference.py features IN.wav
      prints the microWakeWord front end's features (pymicro-features 2.0.2), one frame of 40 integers a line
      (the front end's uint16 values: pymicro-features' floats divided by 0.0390625)

`scores` and `features` need the references in the Python that runs them: scripts/setup makes
.venv-wake-reference from scripts/lib/wake-reference-requirements.txt (pinned, with hashes):
  .venv-wake-reference/bin/python scripts/lib/wake-reference.py scores IN.wav okay_nabu oww_hey_jarvis

openWakeWord: the reference is fed 1280 samples (80 ms) at a time, as a stream. Its windows do not depend on
the chunking: melspectrogram windows of 1760 samples every 1280, the first starting 8 s of zeros before the
clip, so window k (k >= 0) is the first to reach into the clip past its start and ends 480 + 1280 k samples
into it; from there on each window gives one embedding and one probability per word. Frame k's time is
that end, in seconds. Frames whose audio ended before the clip began (the zeros alone) are left out.

microWakeWord: the reference is fed 160 samples (10 ms) at a time; the front end gives frame k (k >= 0) once
480 + 160 k samples are in; every `stride` frames (3 for the built-in models: the model's input is
[1, stride, 40]) the model runs, and the probability is the mean of its last `sliding_window_size` outputs
(0 until there are that many). One line per run, at the time of its last frame.
"""
import warnings

warnings.simplefilter("ignore", DeprecationWarning)
import audioop  # noqa: E402 (deprecated in 3.11, still there; the clips are made once)
import subprocess
import sys
import wave

RATE = 16000
CHUNK = 1280


def speak(out, text, voice="en-us", speed="140", engine="espeak-ng"):
    if engine == "flite":
        raw = subprocess.run(["flite", "-voice", voice, "-t", text, "-o", "/dev/stdout"], check=True,
                             capture_output=True).stdout
    else:
        raw = subprocess.run(
            ["espeak-ng", "-v", voice, "-s", str(speed), "--stdout", text], check=True, capture_output=True
        ).stdout
    with wave.open(_BytesReader(raw)) as source:
        assert source.getsampwidth() == 2 and source.getnchannels() == 1
        rate = source.getframerate()
        frames = source.readframes(source.getnframes())
    converted, _ = audioop.ratecv(frames, 2, 1, rate, RATE, None)
    silence = b"\0\0" * (RATE // 2)
    with wave.open(out, "wb") as sink:
        sink.setnchannels(1)
        sink.setsampwidth(2)
        sink.setframerate(RATE)
        sink.writeframes(silence + converted + silence)


class _BytesReader:
    """espeak-ng's --stdout WAV has unknown lengths in its header; wave reads it from memory all the same."""

    def __init__(self, data):
        import io

        fixed = bytearray(data)
        # RIFF and data sizes as written by a stream (0xFFFFFFFF or 0): set them from the real length.
        fixed[4:8] = (len(fixed) - 8).to_bytes(4, "little")
        index = fixed.find(b"data")
        fixed[index + 4 : index + 8] = (len(fixed) - index - 8).to_bytes(4, "little")
        self._io = io.BytesIO(bytes(fixed))

    def __getattr__(self, name):
        return getattr(self._io, name)


MICRO_BUILT_IN = ("okay_nabu", "hey_jarvis", "alexa", "hey_mycroft")


def read(path):
    with wave.open(path, "rb") as source:
        assert source.getframerate() == RATE and source.getsampwidth() == 2 and source.getnchannels() == 1
        return source.readframes(source.getnframes())


def scores(path, words):
    audio = read(path)
    micro = [w for w in words if w in MICRO_BUILT_IN or w.endswith(".json")]
    if micro:
        micro_scores(audio, micro)
    open_words = [w for w in words if w not in micro]
    if open_words:
        open_scores(audio, open_words)


def open_scores(audio, words):
    """Every word's probability at every frame, as pyopen-wakeword gives it (the words share one feature stream, as
    Hark's do; each word's scores are those of the word alone)."""
    from pyopen_wakeword import Model, OpenWakeWord, OpenWakeWordFeatures

    samples = len(audio) // 2
    frames = (samples - 480) // CHUNK + 1 if samples >= 480 else 0
    for word in words:
        if not word.startswith("oww_"):
            sys.exit(f"unknown word {word}: openWakeWord's built-ins are oww_hey_jarvis, oww_okay_nabu, ...")
    detectors = [OpenWakeWord.from_builtin(Model(word[len("oww_"):])) for word in words]
    features = OpenWakeWordFeatures.from_builtin()
    probabilities = [[] for _ in words]
    for start in range(0, len(audio), CHUNK * 2):
        for embedding in features.process_streaming(audio[start : start + CHUNK * 2]):
            for index, detector in enumerate(detectors):
                probabilities[index].extend(detector.process_streaming(embedding))
    # In steady state every window gives one probability: the clip's frames are the last ones.
    lines = []
    for word, found in zip(words, probabilities):
        for k, probability in enumerate(found[len(found) - frames :]):
            lines.append(f"{(480 + CHUNK * k) / RATE:.2f} {word} {probability:.8f}")
    print("\n".join(lines))


def micro_scores(audio, words):
    """Every word's probability at every run of its model, as pymicro-wakeword gives it (the words share one
    front end, as Hark's do; each word's scores are those of the word alone)."""
    from pymicro_wakeword import MicroWakeWord, MicroWakeWordFeatures, Model

    detectors = [
        MicroWakeWord.from_config(w) if w.endswith(".json") else MicroWakeWord.from_builtin(Model(w)) for w in words
    ]
    names = [w.rsplit("/", 1)[-1][: -len(".json")] if w.endswith(".json") else w for w in words]
    features = MicroWakeWordFeatures()
    frame = 0
    lines = []
    for start in range(0, len(audio), 320):
        for feature in features.process_streaming(audio[start : start + 320]):
            end = 480 + 160 * frame
            frame += 1
            for name, detector in zip(names, detectors):
                # The wrapper returns 0.0 between runs too: only the frames that complete a run are the model's.
                probability = detector.process_streaming_prob(feature)
                if frame % detector.stride == 0:
                    lines.append(f"{end / RATE:.2f} {name} {probability:.8f}")
    print("\n".join(lines))


def features(path):
    from pymicro_features import MicroFrontend

    audio = read(path)
    frontend = MicroFrontend()
    lines = []
    index = 0
    while index + 320 <= len(audio):
        result = frontend.process_samples(audio[index : index + 320])
        index += result.samples_read * 2
        if result.features:
            lines.append(" ".join(str(round(value / 0.0390625)) for value in result.features))
    print("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "speak":
        options = dict(zip(sys.argv[4::2], sys.argv[5::2]))
        speak(sys.argv[2], sys.argv[3], options.get("--voice", "en-us"), options.get("--speed", "140"),
              options.get("--engine", "espeak-ng"))
    elif len(sys.argv) >= 4 and sys.argv[1] == "scores":
        scores(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) == 3 and sys.argv[1] == "features":
        features(sys.argv[2])
    else:
        sys.exit(__doc__)
