#!/usr/bin/env python3
"""Proves scripts/lib/livekit-standin.py with LiveKit's own Python client (livekit 1.2.1, the same Rust core as Hark).

Run (in a venv holding scripts/lib/livekit-standin-smoke-requirements.txt):
    python scripts/lib/livekit-standin-smoke.py [SCENARIO...]
For each scenario (all by default) it starts the stand-in on a free port, joins with the SDK and prints one
PASS/FAIL line per check.
  turn          the agent joins 1 s late; pre-connect audio once it appears; a speech-like microphone track at
                real-time pace and one chat message are answered (states, tones, transcripts, the stand-in's record)
  drop          the resume is refused, the client rejoins in full and a second turn is answered
  room-deleted  the session ends
  agent-leaves  the client sees the agent leave
  legacy        turn again on the older `/rtc` path (two peer connections; /rtc/v1 answers 404)
  bad-token     a token signed with the wrong secret: 401 in under a second
  reject-token  the stand-in's --reject-token: the same
Exit status 0 when every check passed.
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


class Client:
    """A room joined with the official SDK, collecting what the agent sends."""

    def __init__(self):
        self.room = rtc.Room()
        self.states, self.transcripts, self.heard, self.events = [], [], [], []
        self.agent_seen, self.ended = asyncio.Event(), asyncio.Event()
        room = self.room
        room.on("participant_connected", self.on_participant)
        room.on("participant_attributes_changed", self.on_attrs)
        room.on("track_subscribed", lambda track, pub, p: asyncio.ensure_future(self.read_audio(track))
                if track.kind == rtc.TrackKind.KIND_AUDIO else None)
        room.on("participant_disconnected", lambda p: self.events.append(f"left {p.identity}"))
        room.on("reconnecting", lambda: self.events.append("reconnecting"))
        room.on("reconnected", lambda: self.events.append("reconnected"))
        room.on("disconnected", lambda reason: (self.events.append(f"disconnected {reason}"), self.ended.set()))
        room.register_text_stream_handler("lk.transcription",
                                          lambda reader, who: asyncio.ensure_future(self.read_text(reader, who)))

    def on_attrs(self, changed, participant):
        if "lk.agent.state" in changed:
            self.states.append(changed["lk.agent.state"])

    def on_participant(self, p):
        if p.kind == rtc.ParticipantKind.PARTICIPANT_KIND_AGENT:
            if p.attributes.get("lk.agent.state"):
                self.states.append(p.attributes["lk.agent.state"])
            self.agent_seen.set()

    async def read_audio(self, track):
        async for event in rtc.AudioStream(track, sample_rate=RATE, num_channels=1):
            self.heard.append(np.frombuffer(event.frame.data, dtype=np.int16).copy())

    async def read_text(self, reader, identity):
        text = ""
        async for chunk in reader:
            text += chunk
        self.transcripts.append((identity, reader.info.attributes.get("lk.transcription_final"), text))

    async def join(self, url):
        t0 = time.monotonic()
        await self.room.connect(url, token(), rtc.RoomOptions(auto_subscribe=True))
        check("connect", self.room.connection_state == rtc.ConnectionState.CONN_CONNECTED,
              f"{time.monotonic() - t0:.2f} s")
        for p in self.room.remote_participants.values():
            self.on_participant(p)
        self.source = rtc.AudioSource(RATE, 1)
        track = rtc.LocalAudioTrack.create_audio_track("microphone", self.source)
        self.mic = await self.room.local_participant.publish_track(
            track, rtc.TrackPublishOptions(source=rtc.TrackSource.SOURCE_MICROPHONE))

    def agent(self):
        return next((p for p in self.room.remote_participants.values()
                     if p.kind == rtc.ParticipantKind.PARTICIPANT_KIND_AGENT), None)

    async def wait_agent(self):
        try:
            await asyncio.wait_for(self.agent_seen.wait(), 5)
        except asyncio.TimeoutError:
            pass
        agent = self.agent()
        check("agent participant", agent is not None and "lk.agent.state" in agent.attributes,
              agent and f"{agent.identity} {dict(agent.attributes)}")
        return agent

    async def speak(self, seconds, quiet=4.0):
        await publish(self.source, np.zeros(RATE // 2, dtype=np.int16))
        await publish(self.source, speech_like(seconds))
        await publish(self.source, np.zeros(int(RATE * quiet), dtype=np.int16))

    def check_tones(self, name, frames):
        loud = [c for c in frames if len(c) and np.sqrt(np.mean(c.astype(np.float64) ** 2)) > 1000]
        pitches = sorted({round(dominant(np.concatenate(loud[i:i + 5]).astype(np.float64)), -1)
                          for i in range(0, len(loud), 5)}) if loud else []
        check(name, any(abs(p - 440) < 15 for p in pitches) and any(abs(p - 660) < 15 for p in pitches),
              f"{len(loud)} loud frames, pitches {pitches}")


def recorded(record):
    with open(record) as f:
        return json.load(f)


async def scenario_turn(url, record):
    """The agent joins 1 s late; pre-connect audio, a spoken turn and a typed one."""
    c = Client()
    await c.join(url)
    agent = await c.wait_agent()
    pre = speech_like(0.5).tobytes()
    writer = await c.room.local_participant.stream_bytes(
        "pre-connect", topic="lk.agent.pre-connect-audio-buffer", mime_type="audio/pcm",
        attributes={"trackId": c.mic.sid, "sampleRate": str(RATE), "channels": "1"},
        destination_identities=[agent.identity] if agent else None)
    await writer.write(pre)
    await writer.aclose()
    await c.speak(1.5)
    await c.room.local_participant.send_text("What is the time?", topic="lk.chat")
    await publish(c.source, np.zeros(RATE * 3, dtype=np.int16))

    check("agent states", c.states[:5] == ["initializing", "listening", "thinking", "speaking", "listening"],
          " → ".join(c.states))
    check("agent audio received", sum(map(len, c.heard)) > RATE, f"{sum(map(len, c.heard)) / RATE:.2f} s")
    c.check_tones("agent tones at 440 and 660 Hz", c.heard)
    user = [t for t in c.transcripts if t[0] == "device"]
    model = [t for t in c.transcripts if t[0] != "device"]
    check("user transcripts (interim and final)", any(t[1] == "false" for t in user) and any(
        t[1] == "true" for t in user), str(user[:2]))
    check("agent transcripts", len(model) >= 2 and all(t[2] for t in model), str([t[2] for t in model]))
    await c.room.disconnect()

    rec = recorded(record)
    mic = rec["microphone"]
    # 1.5 s of speech; the span can stretch by a scheduling gap in the real-time push on a busy machine
    check("stand-in decoded the microphone", mic["seconds"] > 5 and abs(mic["speech_seconds"] - 1.5) <= 0.25,
          f"{mic['seconds']} s, speech {mic['speech_seconds']} s")
    check("stand-in got the pre-connect audio", any(p["bytes"] == len(pre) and p["seconds"] == 0.5 and p["for_track"]
                                                    for p in rec["pre_connect"]), str(rec["pre_connect"]))
    check("stand-in got the chat", rec["chats"] == ["What is the time?"], str(rec["chats"]))
    check("turns answered", rec["turns"] == 2, str(rec["turns"]))


async def scenario_drop(url, record):
    """The signalling socket drops 4.5 s in, after a first turn; the client rejoins and a second turn works."""
    c = Client()
    await c.join(url)
    await c.wait_agent()
    await c.speak(1.0)
    before = len(c.heard)
    await asyncio.sleep(3)
    check("reconnected after the drop", "reconnected" in c.events
          and c.room.connection_state == rtc.ConnectionState.CONN_CONNECTED, str(c.events))
    agent = c.agent()
    check("the agent is there again after the rejoin", agent is not None
          and agent.attributes.get("lk.agent.state") == "listening", agent and str(dict(agent.attributes)))
    await c.speak(1.0)
    c.check_tones("agent tones after the rejoin", c.heard[before:])
    rec = recorded(record)
    check("resume refused, then a full rejoin", rec["resumes_refused"] >= 1 and len(rec["joins"]) == 2,
          f"resumes refused {rec['resumes_refused']}, joins {len(rec['joins'])}")
    check("turns answered before and after", rec["turns"] == 2, str(rec["utterances"]))
    await c.room.disconnect()


async def scenario_room_deleted(url, record):
    """The room is deleted 1.5 s after the join: the session ends."""
    c = Client()
    await c.join(url)
    try:
        await asyncio.wait_for(c.ended.wait(), 5)
    except asyncio.TimeoutError:
        pass
    check("room deleted ends the session", any("ROOM_DELETED" in e or e.endswith(" 5") for e in c.events),
          str(c.events))


async def scenario_agent_leaves(url, record):
    """The agent leaves 2 s after the join."""
    c = Client()
    await c.join(url)
    agent = await c.wait_agent()
    await asyncio.sleep(2.5)
    check("the agent left", agent is not None and f"left {agent.identity}" in c.events and c.agent() is None,
          str(c.events))
    await c.room.disconnect()


async def scenario_bad_token(url, record, secret="wrong-secret-wrong-secret-wrong!!"):
    """A token signed with the wrong secret."""
    room = rtc.Room()
    t0 = time.monotonic()
    try:
        await room.connect(url, token(secret=secret))
        check("bad token refused", False, "connected")
    except rtc.ConnectError as e:
        check("bad token refused", "401" in str(e) and time.monotonic() - t0 < 1,
              f"{time.monotonic() - t0:.2f} s: {e}")


async def scenario_reject_token(url, record):
    """A good token while the stand-in refuses every token."""
    await scenario_bad_token(url, record, SECRET)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_scenario(name, scenario, *flags):
    print(f"-- {name}: {(scenario.__doc__ or '').splitlines()[0]} {' '.join(flags)}", flush=True)
    port = free_port()
    record = os.path.join(tempfile.mkdtemp(), "standin.json")
    server = subprocess.Popen([sys.executable, os.path.join(HERE, "livekit-standin.py"), "--port", str(port),
                               "--api-key", KEY, "--api-secret", SECRET, "--record", record, *flags],
                              stdout=subprocess.PIPE, text=True)
    try:
        if not server.stdout.readline().startswith("READY"):
            check("stand-in started", False)
            return
        asyncio.run(scenario(f"ws://127.0.0.1:{port}", record))
    finally:
        server.terminate()
        server.wait()


SCENARIOS = {"turn": (scenario_turn, "--agent-delay", "1"), "drop": (scenario_drop, "--drop-after", "4.5"),
             "room-deleted": (scenario_room_deleted, "--delete-room-after", "1.5"),
             "agent-leaves": (scenario_agent_leaves, "--agent-leave-after", "2"),
             "legacy": (scenario_turn, "--agent-delay", "1", "--no-v1"), "bad-token": (scenario_bad_token,),
             "reject-token": (scenario_reject_token, "--reject-token")}


def main():
    for name in sys.argv[1:] or SCENARIOS:
        run_scenario(name, *SCENARIOS[name])
    print(f"{'PASS' if all(results) else 'FAIL'} livekit stand-in smoke ({sum(results)}/{len(results)})")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
