#!/usr/bin/env python3
"""What a recording of the appliance's speaker holds (scripts/board-vm): prints one line of figures,
  sounding=S first=S peak_dbfs=D answer=S answer_first=S answer_hz=HZ
sounding: seconds of 50 ms windows above -40 dBFS (the answer and any earcons); first: when the first
starts. The simulator answers with sine beeps of one frequency per turn (440, 550, 660, 880 Hz for
turns 1 to 4, each beep 250 ms): answer is the span from the first to the last loud window whose
frequency (from zero crossings) is within 6 % of EXPECTED_HZ, in runs of at least two such windows
(an earcon's sweep passes through the frequency for one window), answer_hz their mean frequency. Mono or
the first channel of a PCM16 WAV; standard library only.

usage: answer-audio.py FILE.wav [EXPECTED_HZ]
"""
import math
import struct
import sys
import wave

expected = float(sys.argv[2]) if len(sys.argv) > 2 else 440.0
with wave.open(sys.argv[1], "rb") as w:
    rate, channels = w.getframerate(), w.getnchannels()
    raw = w.readframes(w.getnframes())
samples = struct.unpack(f"<{len(raw) // 2}h", raw[: len(raw) // 2 * 2])[::channels]
window = rate // 20
sounding, first, peak = 0, None, 0
answer_first, answer_last, answer_hz = None, None, []
run = []  # (start, hz) of the current run of windows at the expected frequency


def end_run():
    global answer_first, answer_last
    if len(run) >= 2:
        answer_hz.extend(hz for _, hz in run)
        if answer_first is None:
            answer_first = run[0][0] / rate
        answer_last = (run[-1][0] + window) / rate
    run.clear()


for start in range(0, len(samples) - window + 1, window):
    chunk = samples[start : start + window]
    rms = math.sqrt(sum(s * s for s in chunk) / window)
    peak = max(peak, max(abs(s) for s in chunk))
    if rms <= 32768 * 10 ** (-40 / 20):
        end_run()
        continue
    sounding += 1
    if first is None:
        first = start / rate
    hz = sum(1 for a, b in zip(chunk, chunk[1:]) if (a < 0) != (b < 0)) / 2 / (window / rate)
    if abs(hz - expected) <= expected * 0.06:
        run.append((start, hz))
    else:
        end_run()
end_run()
peak_dbfs = 20 * math.log10(peak / 32768) if peak else -120
span = answer_last - answer_first if answer_first is not None else 0
print(
    f"sounding={sounding * window / rate:.2f} first={first if first is not None else -1:.2f} "
    f"peak_dbfs={peak_dbfs:.1f} answer={span:.2f} answer_first={answer_first if answer_first is not None else -1:.2f} "
    f"answer_hz={sum(answer_hz) / len(answer_hz) if answer_hz else 0:.0f}"
)
