#!/usr/bin/env python3
"""Proves scripts/lib/livekit-standin.py with LiveKit's own Python client (livekit 1.2.1, the same Rust core as Hark).

Run (in a venv holding scripts/lib/livekit-standin-requirements.txt):
    python scripts/lib/livekit-standin-smoke.py
It starts the stand-in on a free port (agent 1 s late), joins, sends pre-connect audio once the agent appears,
publishes a speech-like microphone track at real-time pace, types one chat message, checks what came back, tries a
bad token, and prints one PASS/FAIL line per check. Exit status 0 when every check passed.
"""

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np
from livekit import api, rtc

HERE = os.path.dirname(os.path.abspath(__file__))
KEY, SECRET, RATE = "devkey", "devsecret-that-is-long-enough-32b", 48000
results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)


def token(secret=SECRET, identity="device"):
    grants = api.VideoGrants(room_join=True, room="standin", can_publish=True, can_subscribe=True,
                             can_publish_data=True)
    return api.AccessToken(KEY, secret).with_identity(identity).with_name(identity).with_grants(grants).to_jwt()


def speech_like(seconds):
    """A voiced vowel-like sound: 140 Hz harmonics under a syllable-rate envelope."""
    t = np.arange(int(RATE * seconds)) / RATE
    voice = sum(np.sin(2 * np.pi * 140 * k * t) / k for k in range(1, 12))
    envelope = 0.55 + 0.45 * np.sin(2 * np.pi * 4 * t)
    return (0.25 * 32767 * voice / 3 * envelope).astype(np.int16)


def dominant(samples):
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
    return float(np.fft.rfftfreq(len(samples), 1 / RATE)[np.argmax(spectrum)])


async def publish(source, samples):
    """Pushes 10 ms frames at the capture rate."""
    start, step = time.monotonic(), RATE // 100
    for i in range(0, len(samples) - step + 1, step):
        frame = rtc.AudioFrame(samples[i:i + step].tobytes(), RATE, 1, step)
        await source.capture_frame(frame)
        await asyncio.sleep(max(0.0, start + (i + step) / RATE - time.monotonic()))


async def run(url, record):
    room = rtc.Room()
    states, transcripts, heard, agent_seen = [], [], [], asyncio.Event()
    connected = asyncio.Event()

    def on_attrs(changed, participant):
        if "lk.agent.state" in changed:
            states.append(changed["lk.agent.state"])

    def on_participant(p):
        if p.kind == rtc.ParticipantKind.PARTICIPANT_KIND_AGENT:
            if p.attributes.get("lk.agent.state"):
                states.append(p.attributes["lk.agent.state"])
            agent_seen.set()

    async def read_audio(track):
        async for event in rtc.AudioStream(track, sample_rate=RATE, num_channels=1):
            heard.append(np.frombuffer(event.frame.data, dtype=np.int16).copy())

    async def read_text(reader, identity):
        text = ""
        async for chunk in reader:
            text += chunk
        transcripts.append((identity, reader.info.attributes.get("lk.transcription_final"), text))

    room.on("connection_state_changed",
            lambda s: connected.set() if s == rtc.ConnectionState.CONN_CONNECTED else None)
    room.on("participant_connected", on_participant)
    room.on("participant_attributes_changed", on_attrs)
    room.on("track_subscribed", lambda track, pub, p: asyncio.ensure_future(read_audio(track))
            if track.kind == rtc.TrackKind.KIND_AUDIO else None)
    room.register_text_stream_handler("lk.transcription",
                                      lambda reader, who: asyncio.ensure_future(read_text(reader, who)))

    t0 = time.monotonic()
    await room.connect(url, token(), rtc.RoomOptions(auto_subscribe=True))
    check("connect", room.connection_state == rtc.ConnectionState.CONN_CONNECTED,
          f"{time.monotonic() - t0:.2f} s")
    for p in room.remote_participants.values():
        on_participant(p)

    source = rtc.AudioSource(RATE, 1)
    track = rtc.LocalAudioTrack.create_audio_track("microphone", source)
    pub = await room.local_participant.publish_track(
        track, rtc.TrackPublishOptions(source=rtc.TrackSource.SOURCE_MICROPHONE))

    try:
        await asyncio.wait_for(agent_seen.wait(), 5)
    except asyncio.TimeoutError:
        pass
    agent = next((p for p in room.remote_participants.values()
                  if p.kind == rtc.ParticipantKind.PARTICIPANT_KIND_AGENT), None)
    check("agent participant", agent is not None and "lk.agent.state" in agent.attributes,
          agent and f"{agent.identity} {dict(agent.attributes)}")

    pre = speech_like(0.5).tobytes()
    writer = await room.local_participant.stream_bytes(
        "pre-connect", topic="lk.agent.pre-connect-audio-buffer", mime_type="audio/pcm",
        attributes={"trackId": pub.sid, "sampleRate": str(RATE), "channels": "1"},
        destination_identities=[agent.identity] if agent else None)
    await writer.write(pre)
    await writer.aclose()

    await publish(source, np.zeros(RATE // 2, dtype=np.int16))
    await publish(source, speech_like(1.5))
    await publish(source, np.zeros(RATE * 4, dtype=np.int16))
    await room.local_participant.send_text("What is the time?", topic="lk.chat")
    await publish(source, np.zeros(RATE * 3, dtype=np.int16))

    check("agent states", "listening" in states and "thinking" in states and "speaking" in states,
          " → ".join(states))
    audio = np.concatenate(heard) if heard else np.zeros(0, dtype=np.int16)
    loud = [c for c in heard if len(c) and np.sqrt(np.mean(c.astype(np.float64) ** 2)) > 1000]
    pitches = sorted({round(dominant(np.concatenate(loud[i:i + 5]).astype(np.float64)), -1)
                      for i in range(0, len(loud), 5)}) if loud else []
    check("agent audio received", len(audio) > RATE, f"{len(audio) / RATE:.2f} s, {len(loud)} loud frames")
    check("agent tones at 440 and 660 Hz", any(abs(p - 440) < 15 for p in pitches)
          and any(abs(p - 660) < 15 for p in pitches), f"pitches {pitches}")
    user = [t for t in transcripts if t[0] == "device"]
    model = [t for t in transcripts if t[0] != "device"]
    check("user transcripts (interim and final)", any(t[1] == "false" for t in user) and any(
        t[1] == "true" for t in user), str(user[:2]))
    check("agent transcripts", len(model) >= 2 and all(t[2] for t in model), str([t[2] for t in model]))
    await room.disconnect()

    with open(record) as f:
        rec = json.load(f)
    mic = rec["microphone"]
    check("stand-in decoded the microphone", mic["seconds"] > 5 and 1.2 <= mic["speech_seconds"] <= 1.8,
          f"{mic['seconds']} s, speech {mic['speech_seconds']} s")
    check("stand-in got the pre-connect audio", any(p["bytes"] == len(pre) for p in rec["pre_connect"]),
          str(rec["pre_connect"]))
    check("stand-in got the chat", rec["chats"] == ["What is the time?"], str(rec["chats"]))
    check("turns answered", rec["turns"] >= 2, str(rec["turns"]))

    bad = rtc.Room()
    t0 = time.monotonic()
    try:
        await bad.connect(url, token(secret="wrong-secret-wrong-secret-wrong!!"))
        check("bad token refused", False, "connected")
    except rtc.ConnectError as e:
        check("bad token refused", "401" in str(e) and time.monotonic() - t0 < 1,
              f"{time.monotonic() - t0:.2f} s: {e}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    port = free_port()
    record = os.path.join(tempfile.mkdtemp(), "standin.json")
    server = subprocess.Popen([sys.executable, os.path.join(HERE, "livekit-standin.py"), "--port", str(port),
                               "--api-key", KEY, "--api-secret", SECRET, "--record", record,
                               "--agent-delay", "1"], stdout=subprocess.PIPE, text=True)
    try:
        if not server.stdout.readline().startswith("READY"):
            check("stand-in started", False)
            return 1
        asyncio.run(run(f"ws://127.0.0.1:{port}", record))
    finally:
        server.terminate()
        server.wait()
    print(f"{'PASS' if all(results) else 'FAIL'} livekit stand-in smoke ({sum(results)}/{len(results)})")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
