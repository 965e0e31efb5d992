#!/usr/bin/env python3
"""Writes a speech-like test signal as a WAV file: voiced bursts (a 140 Hz buzz with formant-ish
harmonics and a syllable envelope) separated by silence. Deterministic; needs only the standard library.

usage: make-speech.py OUT.wav [--seconds S] [--burst B] [--gap G] [--rate R]
"""
import argparse
import math
import struct
import wave

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("--seconds", type=float, default=6.0, help="total length")
parser.add_argument("--burst", type=float, default=1.6, help="length of each utterance")
parser.add_argument("--gap", type=float, default=2.4, help="silence after each utterance")
parser.add_argument("--rate", type=int, default=16000)
args = parser.parse_args()

rate = args.rate
total = int(args.seconds * rate)
period = args.burst + args.gap
frames = bytearray()
for n in range(total):
    t = n / rate
    phase = t % period
    value = 0.0
    if phase < args.burst:
        syllable = 0.5 - 0.5 * math.cos(2 * math.pi * phase * 4)  # four syllables a second
        buzz = sum(math.sin(2 * math.pi * 140 * k * t) / k for k in (1, 2, 3, 5, 7))
        value = 0.35 * syllable * buzz
    frames += struct.pack("<h", max(-32768, min(32767, int(value * 32767))))

with wave.open(args.out, "wb") as out:
    out.setnchannels(1)
    out.setsampwidth(2)
    out.setframerate(rate)
    out.writeframes(bytes(frames))
