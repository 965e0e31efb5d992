#!/usr/bin/env python3
"""When a recording of the appliance's speaker first holds a timer's alert (scripts/board-vm): prints
  ring_first=S ring_windows=N peak_dbfs=D
ring_first: the start, in seconds, of the first 20 ms window above -35 dBFS whose frequency (from zero
crossings) is within 8 % of HZ (the alert's beeps: 1760 Hz); ring_windows: how many such windows there are.
Mono or the first channel of a PCM16 WAV; standard library only.

usage: ring-audio.py FILE.wav [HZ]
"""
import math
import struct
import sys
import wave

expected = float(sys.argv[2]) if len(sys.argv) > 2 else 1760.0
with wave.open(sys.argv[1], "rb") as w:
    rate, channels = w.getframerate(), w.getnchannels()
    raw = w.readframes(w.getnframes())
samples = struct.unpack(f"<{len(raw) // 2}h", raw[: len(raw) // 2 * 2])[::channels]
window = rate // 50
first, count, peak = None, 0, 0
for start in range(0, len(samples) - window + 1, window):
    chunk = samples[start : start + window]
    peak = max(peak, max(abs(s) for s in chunk))
    rms = math.sqrt(sum(s * s for s in chunk) / window)
    if rms <= 0 or 20 * math.log10(rms / 32768) < -35:
        continue
    crossings = sum(1 for a, b in zip(chunk, chunk[1:]) if (a < 0) != (b < 0))
    hz = crossings * rate / (2 * window)
    if abs(hz - expected) <= 0.08 * expected:
        count += 1
        if first is None:
            first = start / rate
peak_dbfs = 20 * math.log10(peak / 32768) if peak else -200
print(f"ring_first={'%.2f' % first if first is not None else 'none'} ring_windows={count} peak_dbfs={peak_dbfs:.1f}")
