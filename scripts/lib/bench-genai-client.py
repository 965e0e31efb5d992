#!/usr/bin/env python3
"""The reference client of scripts/bench: Google's official Python client (google-genai) driving the
same workload as `hark converse`. Streams a 16 kHz mono PCM16 WAV file to a Live endpoint in 20 ms
chunks with send_realtime_input(audio=Blob), in real time (--paced) or as fast as the connection
takes it, and writes every answer's audio (24 kHz PCM16) to a raw file as it arrives.

The run ends when the input has been sent and either --turns answers have completed or --idle-timeout
seconds passed with no message from the service (unpaced, the service may still be working through
audio that was sent long before, so give --turns there). Prints one JSON line to stdout: when the session was ready (time.monotonic(), comparable with
the measuring parent's clock), turns completed, interruptions, answer audio bytes, audio seconds sent.

usage: bench-genai-client.py --input IN.wav --output OUT.raw --base-url https://127.0.0.1:PORT
                             [--paced] [--chunk-ms 20] [--turns N] [--idle-timeout 1] [--model NAME]
TLS: the CA the client trusts comes from SSL_CERT_FILE (the library reads it for its websockets).
"""
import argparse
import asyncio
import json
import sys
import time
import wave

from google import genai
from google.genai import types


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True, help="16 kHz mono PCM16 WAV")
    parser.add_argument("--output", required=True, help="raw 24 kHz PCM16 answers")
    parser.add_argument("--base-url", required=True, help="https://HOST:PORT of the Live endpoint")
    parser.add_argument("--api-version", default="v1beta")
    parser.add_argument("--model", default="gemini-3.8-live")  # hark's default: the simulator answers both alike
    parser.add_argument("--api-key", default="bench")
    parser.add_argument("--paced", action="store_true", help="send in real time (default: unpaced)")
    parser.add_argument("--chunk-ms", type=int, default=20)
    parser.add_argument("--idle-timeout", type=float, default=1.0)
    parser.add_argument("--turns", type=int, help="stop once this many answers have completed")
    return parser.parse_args()


def read_pcm(path):
    with wave.open(path, "rb") as source:
        if source.getframerate() != 16000 or source.getnchannels() != 1 or source.getsampwidth() != 2:
            sys.exit(f"{path}: need 16 kHz mono 16-bit PCM")
        return source.readframes(source.getnframes())


async def main():
    args = parse_args()
    pcm = read_pcm(args.input)
    chunk_bytes = 16000 * 2 * args.chunk_ms // 1000
    client = genai.Client(
        api_key=args.api_key,
        http_options=types.HttpOptions(base_url=args.base_url, api_version=args.api_version),
    )
    config = types.LiveConnectConfig(
        response_modalities=[types.Modality.AUDIO],
        input_audio_transcription=types.AudioTranscriptionConfig(),
        output_audio_transcription=types.AudioTranscriptionConfig(),
        session_resumption=types.SessionResumptionConfig(),
        context_window_compression=types.ContextWindowCompressionConfig(
            sliding_window=types.SlidingWindow()
        ),
    )
    report = {"turns": 0, "interrupted": 0, "answer_bytes": 0, "sent_seconds": 0.0}
    last_message = time.monotonic()
    with open(args.output, "wb") as output:
        async with client.aio.live.connect(model=args.model, config=config) as session:
            report["ready_monotonic"] = time.monotonic()
            try:  # permessage-deflate or not: it changes what each side pays per message
                report["extensions"] = session._ws.response.headers.get("Sec-WebSocket-Extensions", "")
            except AttributeError:
                report["extensions"] = None

            async def receive():
                nonlocal last_message
                while True:
                    async for message in session.receive():
                        last_message = time.monotonic()
                        if message.data:
                            output.write(message.data)
                            report["answer_bytes"] += len(message.data)
                        content = message.server_content
                        if content is not None:
                            if content.interrupted:
                                report["interrupted"] += 1
                            if content.turn_complete:
                                report["turns"] += 1

            receiver = asyncio.create_task(receive())
            start = time.monotonic()
            for index, offset in enumerate(range(0, len(pcm), chunk_bytes)):
                if args.paced:
                    delay = start + index * args.chunk_ms / 1000 - time.monotonic()
                    if delay > 0:
                        await asyncio.sleep(delay)
                await session.send_realtime_input(
                    audio=types.Blob(data=pcm[offset:offset + chunk_bytes], mime_type="audio/pcm;rate=16000")
                )
            report["sent_seconds"] = len(pcm) / 32000
            await session.send_realtime_input(audio_stream_end=True)
            last_message = max(last_message, time.monotonic())
            while time.monotonic() - last_message < args.idle_timeout:
                if receiver.done() or (args.turns is not None and report["turns"] >= args.turns):
                    break
                await asyncio.sleep(0.05)
            receiver.cancel()
            try:
                await receiver
            except (asyncio.CancelledError, Exception):  # the socket closes under it
                pass
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
