#!/usr/bin/env python3
"""The wake-word test fixtures: clips spoken by espeak-ng, and the per-frame probabilities the Python
reference (pyopen-wakeword 1.1.0) gives on them, which Tests/HarkWakeTests compares Hark's detector with.

usage:
  wake-reference.py speak OUT.wav "TEXT" [--voice en-us] [--speed 140]
      espeak-ng's voice (22050 Hz) resampled to 16 kHz mono 16-bit with the standard library's audioop,
      with 0.5 s of silence before and after
  wake-reference.py scores IN.wav WORD...
      prints "SECONDS WORD PROBABILITY" for every frame of every word, as `hark wake --scores` does; needs
      pyopen-wakeword in the Python that runs it:
        python3 -m venv /tmp/wake-ref && /tmp/wake-ref/bin/pip install pyopen-wakeword==1.1.0
        /tmp/wake-ref/bin/python scripts/lib/wake-reference.py scores IN.wav hey_jarvis okay_nabu

The reference is fed 1280 samples (80 ms) at a time, as a stream. Its windows do not depend on the
chunking: melspectrogram windows of 1760 samples every 1280, the first starting 8 s of zeros before the
clip, so window k (k >= 0) is the first to reach into the clip past its start and ends 480 + 1280 k samples
into it; from there on each window gives one embedding and one probability per word. Frame k's time is
that end, in seconds. Frames whose audio ended before the clip began (the zeros alone) are left out.
"""
import warnings

warnings.simplefilter("ignore", DeprecationWarning)
import audioop  # noqa: E402 (deprecated in 3.11, still there; the clips are made once)
import subprocess
import sys
import wave

RATE = 16000
CHUNK = 1280


def speak(out, text, voice="en-us", speed="140"):
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


def scores(path, words):
    from pyopen_wakeword import Model, OpenWakeWord, OpenWakeWordFeatures

    with wave.open(path, "rb") as source:
        assert source.getframerate() == RATE and source.getsampwidth() == 2 and source.getnchannels() == 1
        audio = source.readframes(source.getnframes())
    samples = len(audio) // 2
    frames = (samples - 480) // CHUNK + 1 if samples >= 480 else 0
    for word in words:
        features = OpenWakeWordFeatures.from_builtin()
        detector = OpenWakeWord.from_builtin(Model(word))
        probabilities = []
        for start in range(0, len(audio), CHUNK * 2):
            for embedding in features.process_streaming(audio[start : start + CHUNK * 2]):
                probabilities.extend(detector.process_streaming(embedding))
        # In steady state every window gives one probability: the clip's frames are the last ones.
        for k, probability in enumerate(probabilities[len(probabilities) - frames :]):
            print(f"{(480 + CHUNK * k) / RATE:.2f} {word} {probability:.8f}")


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "speak":
        options = dict(zip(sys.argv[4::2], sys.argv[5::2]))
        speak(sys.argv[2], sys.argv[3], options.get("--voice", "en-us"), options.get("--speed", "140"))
    elif len(sys.argv) >= 4 and sys.argv[1] == "scores":
        scores(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(__doc__)
