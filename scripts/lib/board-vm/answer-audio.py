#!/usr/bin/env python3
"""What a recording of the appliance's speaker holds (scripts/board-vm): prints one line of figures,
  sounding=S first=S peak_dbfs=D frequency=HZ
sounding: seconds of 20 ms windows above -40 dBFS; first: when the first of them starts; frequency: the
dominant frequency over the sounding windows, from zero crossings (the simulator answers with sine beeps:
440, 550, 660, 880 Hz for turns 1 to 4). Mono or the first channel of a PCM16 WAV; standard library only.

usage: answer-audio.py FILE.wav
"""
import math
import struct
import sys
import wave

with wave.open(sys.argv[1], "rb") as w:
    rate, channels = w.getframerate(), w.getnchannels()
    raw = w.readframes(w.getnframes())
samples = struct.unpack(f"<{len(raw) // 2}h", raw[: len(raw) // 2 * 2])[::channels]
window = rate // 50
sounding, first, peak, crossings, loud_samples = 0, None, 0, 0, 0
for start in range(0, len(samples) - window + 1, window):
    chunk = samples[start : start + window]
    rms = math.sqrt(sum(s * s for s in chunk) / window)
    peak = max(peak, max(abs(s) for s in chunk))
    if rms > 32768 * 10 ** (-40 / 20):
        sounding += 1
        if first is None:
            first = start / rate
        crossings += sum(1 for a, b in zip(chunk, chunk[1:]) if (a < 0) != (b < 0))
        loud_samples += window
frequency = crossings / 2 / (loud_samples / rate) if loud_samples else 0
peak_dbfs = 20 * math.log10(peak / 32768) if peak else -120
print(
    f"sounding={sounding * window / rate:.2f} first={first if first is not None else -1:.2f} "
    f"peak_dbfs={peak_dbfs:.1f} frequency={frequency:.0f}"
)
