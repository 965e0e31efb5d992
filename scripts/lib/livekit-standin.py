#!/usr/bin/env python3
"""An offline stand-in for a LiveKit server with one scripted voice agent, for tests of LiveKit clients.

Run (in a venv holding scripts/lib/livekit-standin-requirements.txt):
    python scripts/lib/livekit-standin.py --port 7880 --api-key devkey --api-secret devsecret \
        [--record out.json] [--agent-delay 1] [--reject-token] [--drop-after S] [--delete-room-after S] \
        [--agent-leave-after S] [--no-v1] [--token-port P [--token-credential C] [--sandbox-id ID]]
It prints "READY ws://127.0.0.1:PORT" once it listens (and " http://127.0.0.1:TOKEN_PORT" with --token-port); a port of
0 means one the system chooses. Check it with scripts/lib/livekit-standin-smoke.py.

What it does, as a LiveKit server (the protocol as the livekit 1.2.1 client speaks it):
- WebSocket signalling on `/rtc/v1?join_request=<base64url WrappedJoinRequest>` (JoinRequest possibly GZIP'd, with
  the publisher offer), and on the older `/rtc?...` (the offer comes afterwards; `--no-v1` answers /rtc/v1 with 404
  so the client falls back to it); `Authorization: Bearer JWT` (or `access_token`) checked as HS256 with the given
  key and secret (issuer, nbf/exp, `video.roomJoin`): a bad token gets HTTP 401 on the upgrade and on
  `/rtc/v1/validate` (with a body).
- /rtc/v1, one peer connection: aiortc answers the client's offers; the agent's audio goes on one of the client's
  receive-only m-lines after a `MediaSectionsRequirement` and the client's re-offer (msid
  "<participant sid>|<track sid>", `mid_to_track_id`, TrackInfo first in a ParticipantUpdate).
  /rtc: the agent's audio goes on a second (subscriber) peer connection that the server offers.
- Data packets both ways on the client's `_reliable` data channel; incoming streams may be DEFLATE_RAW compressed.
- One AGENT participant (`lk.agent.state`: initializing, listening, thinking, speaking) that decodes the client's
  microphone, takes speech followed by ~0.6 s of quiet as a turn and answers with tones (440 Hz then 660 Hz) and
  `lk.transcription` text streams; answers `lk.chat` text too; records `lk.agent.pre-connect-audio-buffer` bytes
  and hears them before the track's own frames (as livekit-agents' pre-connect handler does).
- Faults: --reject-token, --drop-after (closes the socket; a resume is refused with LeaveRequest RECONNECT, so the
  client rejoins in full; the agent stays in the room), --delete-room-after (LeaveRequest ROOM_DELETED),
  --agent-leave-after (ParticipantUpdate: the agent DISCONNECTED).
- --token-port: a token server over plain HTTP on that port, both shapes a device meets: your backend's token endpoint
  (`POST /token` {room_name, participant_identity, participant_name, room_config.agents[].agent_name} ->
  {server_url, participant_token}; with --token-credential it wants `Authorization: Bearer C`) and LiveKit Cloud's
  sandbox (`POST /api/sandbox/connection-details` with `X-Sandbox-ID` {roomName, participantName, agentName} ->
  {serverUrl, participantToken}; with --sandbox-id it wants that id). Refusals are HTTP 401 with a JSON error.
- --record FILE: JSON of joins (identity, room, agents dispatched, path), refused tokens and resumes, the microphone
  (tracks, samples, seconds, peak, speech seconds, utterances, the wall-clock time of its first loud frame),
  pre-connect buffers (bytes, seconds, attributes, when they arrived),
  chats, faults, agent states and turns answered, the client's track mutes and unmutes; rewritten as things happen.
What it does not model: more than one client per room, several rooms, video, simulcast, TURN/ICE restarts, token
refresh, permissions and subscription settings, data packets between clients, speech recognition (the
"transcript" of the user's speech only states its length), end-to-end encryption, compressing what it sends,
interruptions (the agent finishes each reply), agent dispatch (the one agent always joins), a resume that works.
"""

import argparse
import asyncio
import base64
import fractions
import gzip
import json
import secrets
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import av
import jwt
import numpy as np
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from aiortc.sdp import candidate_from_sdp
from livekit.protocol import models, rtc
from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

RATE = 48000
FRAME = 960  # 20 ms
AGENT_IDENTITY = "agent-standin"


def sid(prefix):
    return prefix + secrets.token_hex(6)


class Record:
    """What happened, written to a JSON file after each change."""

    def __init__(self, path):
        self.path = path
        self.data = {"joins": [], "identities": [], "rejected_tokens": 0, "resumes_refused": 0,
                     "microphone": {"tracks": 0, "samples": 0, "seconds": 0.0, "peak": 0.0, "speech_seconds": 0.0},
                     "utterances": [], "pre_connect": [], "chats": [], "turns": 0, "states": [], "faults": [],
                     "token_requests": [], "mutes": []}

    def save(self):
        if self.path:
            with open(self.path, "w") as f:
                json.dump(self.data, f, indent=1)


class ToneTrack(MediaStreamTrack):
    """The agent's voice: 20 ms frames at real-time pace, silence unless tones are queued."""

    kind = "audio"

    def __init__(self):
        super().__init__()
        self.pending = np.zeros(0, dtype=np.int16)
        self.start = None
        self.pts = 0

    def play(self, freqs, seconds_each):
        t = np.arange(int(RATE * seconds_each)) / RATE
        ramp = np.minimum(1.0, np.minimum(t, t[::-1]) / 0.01)
        parts = [(0.4 * 32767 * np.sin(2 * np.pi * f * t) * ramp).astype(np.int16) for f in freqs]
        self.pending = np.concatenate([self.pending] + parts)
        return len(parts) * seconds_each

    async def recv(self):
        if self.readyState != "live":
            raise MediaStreamError
        if self.start is None:
            self.start = time.monotonic()
        wait = self.start + self.pts / RATE - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        chunk, self.pending = self.pending[:FRAME], self.pending[FRAME:]
        if len(chunk) < FRAME:
            chunk = np.concatenate([chunk, np.zeros(FRAME - len(chunk), dtype=np.int16)])
        frame = av.AudioFrame.from_ndarray(chunk.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate, frame.pts, frame.time_base = RATE, self.pts, fractions.Fraction(1, RATE)
        self.pts += FRAME
        return frame


class Session:
    """One client's signalling connection and peer connection, and the agent that talks with it."""

    def __init__(self, server, ws, claims, join):
        self.server, self.ws, self.claims, self.join = server, ws, claims, join
        self.identity = claims.get("sub", "")
        self.psid = sid("PA_")
        self.agent_sid, self.agent_track_sid = server.agent_sid, server.agent_track_sid
        self.agent_state = "listening" if server.agent_present else None
        self.agent_joined = server.agent_present
        self.pc = RTCPeerConnection()
        self.legacy = join is None  # /rtc: a second peer connection, offered by the server, carries downstream media
        self.sub = RTCPeerConnection() if self.legacy else None
        self.reliable = None
        self.tone = ToneTrack()
        self.mic_track_sid = None
        # What the client said before the agent was there (its pre-connect buffer): heard first, as livekit-agents'
        # pre-connect handler pushes it into the agent's audio input before the track's own frames.
        self.pre_connect_pcm = []
        self.published = []
        self.streams = {}
        self.busy = False
        self.pc.on("datachannel", self.on_datachannel)
        self.pc.on("track", self.on_track)

    # signalling
    async def send(self, **kw):
        await self.ws.send(rtc.SignalResponse(**kw).SerializeToString())

    def participant(self):
        return models.ParticipantInfo(sid=self.psid, identity=self.identity, name=self.claims.get("name", ""),
                                      state=models.ParticipantInfo.ACTIVE, tracks=self.published,
                                      kind=models.ParticipantInfo.STANDARD, joined_at=int(time.time()))

    def agent(self):
        tracks = []
        if self.agent_joined:
            tracks = [models.TrackInfo(sid=self.agent_track_sid, type=models.AUDIO, name="agent-voice",
                                       source=models.MICROPHONE, mime_type="audio/opus")]
        return models.ParticipantInfo(sid=self.agent_sid, identity=AGENT_IDENTITY, name="Stand-in agent",
                                      state=models.ParticipantInfo.ACTIVE, kind=models.ParticipantInfo.AGENT,
                                      attributes={"lk.agent.state": self.agent_state or "initializing"},
                                      tracks=tracks, version=self.server.agent_version, is_publisher=True,
                                      joined_at=int(time.time()))

    async def run(self):
        room = models.Room(sid=self.server.room_sid, name=self.claims.get("video", {}).get("room", "room"),
                           creation_time=int(time.time()), num_participants=2 if self.agent_joined else 1)
        await self.send(join=rtc.JoinResponse(
            room=room, participant=self.participant(),
            other_participants=[self.agent()] if self.agent_joined else [],
            server_version="1.9.0", subscriber_primary=False, ping_timeout=15, ping_interval=5,
            server_info=models.ServerInfo(edition=models.ServerInfo.Standard, version="1.9.0", protocol=16)))
        if self.join is not None and self.join.HasField("publisher_offer"):
            await self.answer(self.join.publisher_offer)
        tasks = [asyncio.create_task(self.agent_script())]
        for after, action in ((self.server.args.drop_after, self.drop),
                              (self.server.args.delete_room_after, self.delete_room),
                              (self.server.args.agent_leave_after, self.agent_leave)):
            if after is not None and not self.server.fault_done.get(action.__name__):
                tasks.append(asyncio.create_task(self.later(after, action)))
        try:
            async for message in self.ws:
                await self.on_signal(rtc.SignalRequest.FromString(message))
        except ConnectionClosed:
            pass
        finally:
            for t in tasks:
                t.cancel()
            self.tone.stop()
            await self.pc.close()
            if self.sub:
                await self.sub.close()

    async def later(self, seconds, action):
        """A fault, once, this long after the first join."""
        await asyncio.sleep(max(0.0, self.server.first_join + seconds - time.monotonic()))
        self.server.fault_done[action.__name__] = True
        self.server.record.data["faults"].append(action.__name__)
        self.server.record.save()
        await action()

    async def drop(self):
        log("dropping the signalling connection")
        await self.ws.close()

    async def delete_room(self):
        log("deleting the room")
        await self.send(leave=rtc.LeaveRequest(reason=models.ROOM_DELETED, action=rtc.LeaveRequest.DISCONNECT))
        await self.ws.close()

    async def agent_leave(self):
        log("the agent leaves")
        info = self.agent()
        info.state, info.disconnect_reason = models.ParticipantInfo.DISCONNECTED, models.CLIENT_INITIATED
        self.server.agent_version += 1
        info.version = self.server.agent_version
        self.agent_joined = self.server.agent_present = False
        self.tone.pending = np.zeros(0, dtype=np.int16)
        await self.send(update=rtc.ParticipantUpdate(participants=[info]))

    async def answer(self, offer):
        """Answers the client's offer, the agent's voice on the first receive-only audio m-line offered."""
        await self.pc.setRemoteDescription(RTCSessionDescription(sdp=offer.sdp, type="offer"))
        mid_to_track = {}
        if self.agent_joined:
            for tr in self.pc.getTransceivers():
                if tr.kind == "audio" and tr.sender.track is self.tone:
                    mid_to_track[tr.mid] = self.agent_track_sid
                    break
            else:
                for tr in self.pc.getTransceivers():
                    # aiortc keeps the offered direction reversed: the client's recvonly is our sendonly
                    if tr.kind == "audio" and tr._offerDirection == "sendonly" and tr.sender.track is None:
                        tr.sender.replaceTrack(self.tone)
                        tr.sender._stream_id = f"{self.agent_sid}|{self.agent_track_sid}"
                        tr.direction = "sendonly"
                        mid_to_track[tr.mid] = self.agent_track_sid
                        break
        await self.pc.setLocalDescription(await self.pc.createAnswer())
        await self.send(answer=rtc.SessionDescription(type="answer", sdp=self.pc.localDescription.sdp, id=offer.id,
                                                      mid_to_track_id=mid_to_track))

    async def offer_subscriber(self):
        """On /rtc the agent's voice goes out on the subscriber peer connection, which the server offers."""
        sender = self.sub.addTrack(self.tone)
        sender._stream_id = f"{self.agent_sid}|{self.agent_track_sid}"
        await self.sub.setLocalDescription(await self.sub.createOffer())
        await self.send(offer=rtc.SessionDescription(type="offer", sdp=self.sub.localDescription.sdp))

    async def on_signal(self, req):
        which = req.WhichOneof("message")
        if which == "offer":
            await self.answer(req.offer)
        elif which == "answer" and self.sub:
            await self.sub.setRemoteDescription(RTCSessionDescription(sdp=req.answer.sdp, type="answer"))
        elif which == "trickle":
            init = json.loads(req.trickle.candidateInit)
            if init.get("candidate"):
                c = candidate_from_sdp(init["candidate"].removeprefix("candidate:"))
                c.sdpMid, c.sdpMLineIndex = init.get("sdpMid"), init.get("sdpMLineIndex")
                pc = self.sub if self.sub and req.trickle.target == rtc.SUBSCRIBER else self.pc
                await pc.addIceCandidate(c)
        elif which == "add_track":
            a = req.add_track
            info = models.TrackInfo(sid=sid("TR_"), type=a.type, name=a.name, source=a.source, muted=a.muted,
                                    mime_type="audio/opus" if a.type == models.AUDIO else "", stream=a.stream)
            self.published.append(info)
            if a.source == models.MICROPHONE:
                self.mic_track_sid = info.sid
            await self.send(track_published=rtc.TrackPublishedResponse(cid=a.cid, track=info))
        elif which == "mute":
            self.server.record.data["mutes"].append(req.mute.muted)
            self.server.record.save()
        elif which == "ping_req":
            await self.send(pong_resp=rtc.Pong(last_ping_timestamp=req.ping_req.timestamp,
                                               timestamp=int(time.time() * 1000)))
        elif which == "ping":
            await self.send(pong=int(time.time() * 1000))
        elif which == "leave":
            await self.ws.close()

    # the agent
    async def set_state(self, state):
        self.agent_state = state
        self.server.agent_version += 1
        self.server.record.data["states"].append(state)
        self.server.record.save()
        log(f"agent state {state}")
        await self.send(update=rtc.ParticipantUpdate(participants=[self.agent()]))

    async def agent_script(self):
        """The agent joins (late by --agent-delay) once; a client that rejoins finds it in the room."""
        if not self.agent_joined:
            await asyncio.sleep(self.server.args.agent_delay)
            self.agent_joined = self.server.agent_present = True
            await self.set_state("initializing")
        if self.legacy:
            await self.offer_subscriber()
        else:
            await self.send(media_sections_requirement=rtc.MediaSectionsRequirement(num_audios=1))
        await asyncio.sleep(0.3)
        await self.set_state("listening")

    async def answer_turn(self, user_text):
        if self.busy or not self.agent_joined:
            return
        self.busy = True
        try:
            await self.set_state("thinking")
            seg = sid("SG_")
            if user_text is not None:
                attrs = {"lk.segment_id": seg, "lk.transcribed_track_id": self.mic_track_sid or ""}
                await self.send_text("lk.transcription", user_text[: len(user_text) // 2], self.identity,
                                     dict(attrs, **{"lk.transcription_final": "false"}))
                await self.send_text("lk.transcription", user_text, self.identity,
                                     dict(attrs, **{"lk.transcription_final": "true"}))
            await asyncio.sleep(0.2)
            await self.set_state("speaking")
            self.server.record.data["turns"] += 1
            reply = f"Answer {self.server.record.data['turns']} in two tones.".split()
            seconds = self.tone.play([440, 660], 0.5)
            await self.send_text("lk.transcription", reply, AGENT_IDENTITY,
                                 {"lk.segment_id": sid("SG_"), "lk.transcribed_track_id": self.agent_track_sid,
                                  "lk.transcription_final": "false"}, seconds, {"lk.transcription_final": "true"})
            await asyncio.sleep(0.3)
            await self.set_state("listening")
        finally:
            self.busy = False

    async def send_text(self, topic, text, sender, attrs, seconds=0.0, trailer_attrs=None):
        """A text stream: header, chunks (a list is sent piece by piece over `seconds`), trailer."""
        stream_id = sid("ST_")
        pieces = text if isinstance(text, list) else [text]
        header = models.DataStream.Header(stream_id=stream_id, timestamp=int(time.time() * 1000), topic=topic,
                                          mime_type="text/plain", attributes=attrs,
                                          text_header=models.DataStream.TextHeader(generated=True))
        self.send_data(sender, stream_header=header)
        for i, piece in enumerate(pieces):
            chunk = (piece + " ") if isinstance(text, list) and i < len(pieces) - 1 else piece
            self.send_data(sender, stream_chunk=models.DataStream.Chunk(stream_id=stream_id, chunk_index=i,
                                                                         content=chunk.encode()))
            await asyncio.sleep(seconds / len(pieces))
        self.send_data(sender, stream_trailer=models.DataStream.Trailer(stream_id=stream_id,
                                                                         attributes=trailer_attrs or {}))

    def send_data(self, sender, **kw):
        if self.reliable is None or self.reliable.readyState != "open":
            log("no reliable data channel yet; packet dropped")
            return
        packet = models.DataPacket(kind=models.DataPacket.RELIABLE, participant_identity=sender, **kw)
        self.reliable.send(packet.SerializeToString())

    def on_datachannel(self, channel):
        if channel.label == "_reliable":
            self.reliable = channel
        channel.on("message", lambda m: self.on_data(m) if isinstance(m, bytes) else None)

    def on_data(self, message):
        packet = models.DataPacket.FromString(message)
        which = packet.WhichOneof("value")
        if which == "stream_header":
            h = packet.stream_header
            self.streams[h.stream_id] = {"topic": h.topic, "attributes": dict(h.attributes), "data": b"",
                                         "deflate": h.compression == models.DataStream.DEFLATE_RAW}
        elif which == "stream_chunk" and packet.stream_chunk.stream_id in self.streams:
            self.streams[packet.stream_chunk.stream_id]["data"] += packet.stream_chunk.content
        elif which == "stream_trailer" and packet.stream_trailer.stream_id in self.streams:
            s = self.streams.pop(packet.stream_trailer.stream_id)
            if s["deflate"]:
                s["data"] = zlib.decompress(s["data"], -15)
            rec = self.server.record
            if s["topic"] == "lk.chat":
                text = s["data"].decode(errors="replace")
                log(f"chat: {text}")
                rec.data["chats"].append(text)
                asyncio.ensure_future(self.answer_turn(text))
            elif s["topic"] == "lk.agent.pre-connect-audio-buffer":
                log(f"pre-connect audio: {len(s['data'])} bytes")
                a = s["attributes"]
                rate, channels = int(a.get("sampleRate", RATE)), int(a.get("channels", 1))
                rec.data["pre_connect"].append({"bytes": len(s["data"]), "attributes": a, "at": round(time.time(), 3),
                                                "seconds": round(len(s["data"]) / (2 * rate * channels), 3),
                                                "for_track": a.get("trackId") == self.mic_track_sid})
                if a.get("trackId") == self.mic_track_sid and channels == 1 and rate == RATE:
                    pcm = np.frombuffer(s["data"][: len(s["data"]) // 2 * 2], dtype="<i2").astype(np.float32) / 32768
                    self.pre_connect_pcm.append(pcm)
            rec.save()

    def on_track(self, track):
        if track.kind == "audio":
            asyncio.ensure_future(self.listen(track))

    async def listen(self, track):
        """Decodes the microphone and answers each utterance: speech, then 0.6 s of quiet."""
        mic = self.server.record.data["microphone"]
        mic["tracks"] += 1
        t, start, last = 0.0, None, None  # this track's time; its utterance's first and last loud frame
        while True:
            early = self.pre_connect_pcm.pop(0) if self.pre_connect_pcm else None
            if early is not None:
                # The pre-connect buffer, in 20 ms pieces, before the next frame of the track.
                pieces = [early[i:i + RATE // 50] for i in range(0, len(early), RATE // 50)]
                rate = RATE
            else:
                try:
                    frame = await track.recv()
                except MediaStreamError:
                    return
                pcm = frame.to_ndarray().astype(np.float32).reshape(-1, len(frame.layout.channels))[:, 0] / 32768
                pieces, rate = [pcm], frame.sample_rate
            for pcm in pieces:
                t, start, last = self.hear(pcm, rate, t, start, last, track=early is None)

    def hear(self, pcm, rate, t, start, last, track):
        """One piece of the microphone (from the track, or from the pre-connect buffer): the utterance detector's
        step. Returns the new (time, utterance start, last loud time)."""
        mic = self.server.record.data["microphone"]
        now, t = t, t + len(pcm) / rate
        if track:
            mic["samples"] += len(pcm)
            mic["seconds"] = round(mic["seconds"] + len(pcm) / rate, 3)
        if not len(pcm):
            return t, start, last
        if track:
            mic["peak"] = round(max(mic["peak"], float(np.max(np.abs(pcm)))), 4)
            if "first_speech_at" not in mic and float(np.sqrt(np.mean(pcm * pcm))) > 0.01:
                mic["first_speech_at"] = round(time.time(), 3)  # the first loud frame the track carried
        if float(np.sqrt(np.mean(pcm * pcm))) > 0.01:
            start = now if start is None else start
            last = t
        elif start is not None and t - last >= 0.6:
            speech, start = last - start, None
            if speech >= 0.2:
                log(f"utterance of {speech:.2f} s")
                mic["speech_seconds"] = round(mic["speech_seconds"] + speech, 3)
                self.server.record.data["utterances"].append(round(speech, 2))
                asyncio.ensure_future(self.answer_turn(f"(an utterance of {speech:.1f} seconds)"))
        if track and mic["samples"] % (RATE * 2) < len(pcm):
            self.server.record.save()
        return t, start, last


class Server:
    def __init__(self, args):
        self.args = args
        self.record = Record(args.record)
        self.room_sid = sid("RM_")
        self.fault_done = {}
        self.agent_present = False
        self.first_join = None
        self.agent_sid, self.agent_track_sid, self.agent_version = sid("PA_"), sid("TR_"), 1

    def check(self, request):
        """The token's claims, or None when it is missing or bad."""
        auth = request.headers.get("Authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else parse_qs(urlsplit(request.path).query).get(
            "access_token", [""])[0]
        if self.args.reject_token or not token:
            return None
        try:
            claims = jwt.decode(token, self.args.api_secret, algorithms=["HS256"], leeway=10,
                                options={"verify_aud": False})
        except jwt.PyJWTError as e:
            log(f"bad token: {e}")
            return None
        if claims.get("iss") != self.args.api_key or not claims.get("video", {}).get("roomJoin"):
            log("token refused: unknown API key or no roomJoin grant")
            return None
        return claims

    def process_request(self, connection, request):
        path = urlsplit(request.path).path.rstrip("/")
        claims = self.check(request)
        if path.endswith("/validate"):
            if claims is None:
                return connection.respond(401, "invalid token: signature or key not accepted by the stand-in\n")
            return connection.respond(200, "success\n")
        if path not in ("/rtc", "/rtc/v1") or (path == "/rtc/v1" and self.args.no_v1):
            return connection.respond(404, "not found\n")
        if claims is None:
            self.record.data["rejected_tokens"] += 1
            self.record.save()
            return connection.respond(401, "invalid token\n")
        return None

    async def handler(self, ws):
        url = urlsplit(ws.request.path)
        query = parse_qs(url.query)
        claims = self.check(ws.request)
        join = None
        if "join_request" in query:
            raw = query["join_request"][0]
            wrapped = rtc.WrappedJoinRequest.FromString(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
            data = wrapped.join_request
            if wrapped.compression == rtc.WrappedJoinRequest.GZIP:
                data = gzip.decompress(data)
            join = rtc.JoinRequest.FromString(data)
        reconnect = join.reconnect if join else query.get("reconnect", ["0"])[0] in ("1", "true")
        rec = self.record.data
        if reconnect:
            log("resume refused: LeaveRequest RECONNECT")
            rec["resumes_refused"] += 1
            self.record.save()
            await ws.send(rtc.SignalResponse(leave=rtc.LeaveRequest(
                can_reconnect=True, reason=models.UNKNOWN_REASON,
                action=rtc.LeaveRequest.RECONNECT)).SerializeToString())
            await ws.close()
            return
        agents = [a.get("agentName", "") for a in claims.get("roomConfig", {}).get("agents", [])]
        rec["joins"].append({"identity": claims.get("sub"), "name": claims.get("name"),
                             "room": claims.get("video", {}).get("room"), "agents": agents, "path": url.path,
                             "at": round(time.time(), 3)})
        if claims.get("sub") not in rec["identities"]:
            rec["identities"].append(claims.get("sub"))
        self.record.save()
        log(f"join from {claims.get('sub')} on {url.path}")
        self.first_join = self.first_join or time.monotonic()
        await Session(self, ws, claims, join).run()


def log(message):
    print(f"standin: {message}", file=sys.stderr, flush=True)


def token_server(args, record, loop):
    """The token endpoint and the sandbox token server (see the module's description), on a thread of their own."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def answer(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            length = min(int(self.headers.get("Content-Length", "0") or 0), 65536)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                return self.answer(400, {"error": "the body is not JSON"})
            path = self.path.split("?")[0]
            entry = {"path": path, "body": body, "authorization": self.headers.get("Authorization") is not None}
            if path == "/token":
                want = f"Bearer {args.token_credential}" if args.token_credential else None
                if want and self.headers.get("Authorization") != want:
                    entry["refused"] = True
                    loop.call_soon_threadsafe(record_request, record, entry)
                    return self.answer(401, {"error": "unknown device credential"})
                room, identity = body.get("room_name", ""), body.get("participant_identity", "")
                name = body.get("participant_name", "")
                agents = [a.get("agent_name", "") for a in body.get("room_config", {}).get("agents", [])]
                token = mint(args, identity, name, room, agents)
                loop.call_soon_threadsafe(record_request, record, entry)
                return self.answer(200, {"server_url": f"ws://{args.host}:{args.port}", "participant_token": token})
            if path == "/api/sandbox/connection-details":
                if args.sandbox_id and self.headers.get("X-Sandbox-ID") != args.sandbox_id:
                    entry["refused"] = True
                    loop.call_soon_threadsafe(record_request, record, entry)
                    return self.answer(401, {"error": "unknown sandbox"})
                room = body.get("roomName") or sid("sbx-")
                identity = sid("identity-")
                agents = [body["agentName"]] if body.get("agentName") else []
                token = mint(args, identity, body.get("participantName", ""), room, agents)
                loop.call_soon_threadsafe(record_request, record, entry)
                return self.answer(200, {"serverUrl": f"ws://{args.host}:{args.port}", "participantToken": token})
            return self.answer(404, {"error": "not found"})

    httpd = ThreadingHTTPServer((args.host, args.token_port), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd.server_address[1]


def record_request(record, entry):
    record.data["token_requests"].append(entry)
    record.save()


def mint(args, identity, name, room, agents):
    now = int(time.time())
    claims = {"iss": args.api_key, "sub": identity, "name": name, "nbf": now - 10, "exp": now + 3600,
              "video": {"roomJoin": True, "room": room, "canPublish": True, "canSubscribe": True,
                        "canPublishData": True}}
    if agents:
        claims["roomConfig"] = {"agents": [{"agentName": a} for a in agents]}
    return jwt.encode(claims, args.api_secret, algorithm="HS256")


async def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=7880)
    p.add_argument("--api-key", required=True)
    p.add_argument("--api-secret", required=True)
    p.add_argument("--record", help="JSON file describing what happened")
    p.add_argument("--agent-delay", type=float, default=0.0, help="seconds before the agent joins")
    p.add_argument("--no-v1", action="store_true", help="answer /rtc/v1 with 404, as an older server would")
    p.add_argument("--reject-token", action="store_true", help="refuse every token")
    p.add_argument("--drop-after", type=float, help="close the signalling socket this long after the first join")
    p.add_argument("--delete-room-after", type=float, help="delete the room this long after the first join")
    p.add_argument("--agent-leave-after", type=float, help="the agent leaves this long after the first join")
    p.add_argument("--token-port", type=int, help="serve the token endpoint and the sandbox token server here")
    p.add_argument("--token-credential", help="the device credential the token endpoint wants (Bearer)")
    p.add_argument("--sandbox-id", help="the sandbox id the sandbox token server wants")
    args = p.parse_args()
    server = Server(args)
    server.record.save()
    async with serve(server.handler, args.host, args.port, process_request=server.process_request,
                     max_size=None, compression=None) as listening:
        args.port = listening.sockets[0].getsockname()[1]  # --port 0: the one the system chose
        tokens = ""
        if args.token_port is not None:
            tokens = f" http://{args.host}:{token_server(args, server.record, asyncio.get_running_loop())}"
        print(f"READY ws://{args.host}:{args.port}{tokens}", flush=True)
        await asyncio.Future()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
