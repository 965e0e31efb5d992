#!/usr/bin/env python3
"""LiveKit's official Python SDK doing the job `hark converse --backend livekit` does, for scripts/bench-livekit to
measure beside it (the same Rust core, liblivekit_ffi, underneath): join the room with a token minted from the API key
and secret, publish a 16 kHz microphone track from a WAV at real-time pace (20 ms frames), play the agent's audio
track (written at 24 kHz to a WAV), follow the agent's state and read its transcripts; leave IDLE seconds after the
input ended and the agent stopped speaking.

usage: bench-livekit-sdk.py --url URL --api-key KEY --api-secret-file FILE --input IN.wav --output OUT.wav [--idle S]
"""
import argparse
import asyncio
import base64
import hashlib
import hmac
import json
import time
import wave

from livekit import rtc

RATE_IN, RATE_OUT = 16000, 24000


def token(key, secret, room, identity):
    """An HS256 access token (what livekit-api's AccessToken makes), signed with the standard library."""
    def b64(data):
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
    now = int(time.time())
    claims = {"iss": key, "sub": identity, "name": identity, "nbf": now - 10, "exp": now + 6 * 3600,
              "video": {"roomJoin": True, "room": room, "canPublish": True, "canSubscribe": True,
                        "canPublishData": True}}
    head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()) + "." + b64(json.dumps(claims).encode())
    return head + "." + b64(hmac.new(secret.encode(), head.encode(), hashlib.sha256).digest())


async def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--url", required=True)
    p.add_argument("--api-key", required=True)
    p.add_argument("--api-secret-file", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--idle", type=float, default=2.0)
    args = p.parse_args()
    with open(args.api_secret_file) as f:
        secret = f.read().strip()
    with wave.open(args.input) as w:
        assert w.getframerate() == RATE_IN and w.getnchannels() == 1 and w.getsampwidth() == 2
        pcm = w.readframes(w.getnframes())

    room = rtc.Room()
    out = wave.open(args.output, "wb")
    out.setnchannels(1)
    out.setsampwidth(2)
    out.setframerate(RATE_OUT)
    state = {"agent": None, "speaking": False, "last_audio": time.monotonic(), "transcripts": 0, "frames": 0}
    tasks = []

    async def play(track):
        async for event in rtc.AudioStream(track, sample_rate=RATE_OUT, num_channels=1):
            out.writeframes(bytes(event.frame.data))
            state["frames"] += 1

    async def read_text(reader):
        async for _ in reader:
            pass
        state["transcripts"] += 1

    def on_attributes(changed, participant):
        if participant.identity == state["agent"] and "lk.agent.state" in changed:
            state["speaking"] = changed["lk.agent.state"] == "speaking"
            state["last_audio"] = time.monotonic()

    def on_participant(participant):
        if participant.kind == rtc.ParticipantKind.PARTICIPANT_KIND_AGENT and state["agent"] is None:
            state["agent"] = participant.identity

    room.on("participant_connected", on_participant)
    room.on("participant_attributes_changed", on_attributes)
    room.on("track_subscribed", lambda track, pub, participant: tasks.append(asyncio.ensure_future(play(track)))
            if track.kind == rtc.TrackKind.KIND_AUDIO else None)
    room.register_text_stream_handler("lk.transcription",
                                      lambda reader, identity: tasks.append(asyncio.ensure_future(read_text(reader))))
    await room.connect(args.url, token(args.api_key, secret, "bench-sdk", "bench-sdk-device"),
                       rtc.RoomOptions(auto_subscribe=True))
    for participant in room.remote_participants.values():
        on_participant(participant)
    source = rtc.AudioSource(RATE_IN, 1, queue_size_ms=200)
    track = rtc.LocalAudioTrack.create_audio_track("microphone", source)
    await room.local_participant.publish_track(track,
                                               rtc.TrackPublishOptions(source=rtc.TrackSource.SOURCE_MICROPHONE))
    step = RATE_IN // 50
    start = time.monotonic()
    for index, offset in enumerate(range(0, len(pcm) // 2 - step + 1, step)):
        frame = rtc.AudioFrame(pcm[offset * 2:(offset + step) * 2], RATE_IN, 1, step)
        await source.capture_frame(frame)
        await asyncio.sleep(max(0.0, start + (index + 1) * step / RATE_IN - time.monotonic()))
    while state["speaking"] or time.monotonic() - state["last_audio"] < args.idle:
        await asyncio.sleep(0.1)
    await room.disconnect()
    for task in tasks:
        task.cancel()
    out.close()
    print(json.dumps({"frames": state["frames"], "transcripts": state["transcripts"]}))


if __name__ == "__main__":
    asyncio.run(main())
