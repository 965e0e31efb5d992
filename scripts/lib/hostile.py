#!/usr/bin/env python3
"""Hostile servers for scripts/fault-matrix: network behaviour the Live simulator does not have (the protocol page
documents none of it as the service's), each in its own process so a flood does not share an interpreter lock with
the harness's microphone feed. Prints "listening on PORT" once it listens; SIGTERM writes the --record report
(every connection: when it was accepted and ended, who ended it, bytes, close frames, flood frames) and exits.

  silent      accepts TCP, reads and drops whatever comes, never writes and never closes: a WebSocket upgrade
              (ws://) or a TLS handshake (wss://) that is never answered.
  deaf-close  a proxy in front of --upstream that swallows the client's close frame and never closes the client's
              socket itself: only the client can end the connection.
  freeze      a proxy in front of --upstream that, from SIGUSR1 on, neither reads from nor sends to the clients
              connected at that moment (its receive buffers small, the sockets left open: a client's writes back up
              until they block); later connections are served.
  flood       a proxy in front of --upstream that sends the client tiny frames (--payload byte: 1-byte text frames
              "x"; usage: {"usageMetadata":{"totalTokenCount":0}}), --count of them (0: until the client goes),
              in the connection that is open when SIGUSR1 arrives; with --presetup, on connection --conn right
              after the upgrade answer instead, the server's frames held back until the flood ends.

Times in the report are time.monotonic() (CLOCK_MONOTONIC, comparable with the harness's). Standard library only.
"""
import argparse
import asyncio
import json
import signal
import socket
import sys
import time

CHUNK_FRAMES = 4096  # flood frames per write


def flood_frame(payload):
    data = b"x" if payload == "byte" else b'{"usageMetadata":{"totalTokenCount":0}}'
    return bytes([0x81, len(data)]) + data


class Connection:
    def __init__(self, number):
        self.number = number
        self.accepted = time.monotonic()
        self.ended = None
        self.ended_by = None
        self.bytes_in = 0
        self.bytes_out = 0
        self.upgraded = None
        self.client_close_at = None
        self.server_close_at = None
        self.flood_started = None
        self.flood_ended = None
        self.flood_frames = 0
        self.frozen_at = None
        self.frozen = asyncio.Event()

    def report(self):
        return {k: v for k, v in self.__dict__.items() if k != "frozen"}


class Server:
    def __init__(self, args):
        self.args = args
        self.connections = []
        self.flood_requested = asyncio.Event()
        self.flood_frame = flood_frame(args.payload)
        self.flood_chunk = self.flood_frame * CHUNK_FRAMES

    def freeze(self):
        for connection in self.connections:
            if connection.ended is None:
                connection.frozen.set()

    def write_record(self):
        if self.args.record:
            with open(self.args.record, "w") as f:
                json.dump({"mode": self.args.mode, "connections": [c.report() for c in self.connections]}, f,
                          indent=1)

    def say(self, text):
        print(text, flush=True)

    async def handle(self, reader, writer):
        connection = Connection(len(self.connections) + 1)
        self.connections.append(connection)
        self.say(f"accepted {connection.number}")
        try:
            if self.args.mode == "silent":
                await self.silent(connection, reader)
            else:
                await self.proxy(connection, reader, writer)
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        finally:
            if connection.ended is None:
                connection.ended = time.monotonic()
                connection.ended_by = connection.ended_by or "client"
            self.say(f"ended {connection.number} by {connection.ended_by}")
            writer.close()

    async def silent(self, connection, reader):
        while True:
            data = await reader.read(65536)
            if not data:
                break
            connection.bytes_in += len(data)
        connection.ended = time.monotonic()
        connection.ended_by = "client"

    # -- the proxies ---------------------------------------------------------------------------------------------

    async def proxy(self, connection, reader, writer):
        if self.args.mode == "freeze":
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        host, port = self.args.upstream_host, self.args.upstream_port
        up_reader, up_writer = await asyncio.open_connection(host, port)
        outgoing = asyncio.Queue()  # frames (bytes) from upstream for the client, in order
        done = asyncio.Event()
        presetup = self.args.mode == "flood" and self.args.presetup and connection.number == self.args.conn

        async def client_to_upstream():
            # The upgrade request as it is, then frames (masked), parsed so a close frame can be swallowed.
            head = await read_head(reader)
            connection.bytes_in += len(head)
            up_writer.write(head)
            await up_writer.drain()
            buffer = bytearray()
            while True:
                if connection.frozen.is_set():
                    self.say(f"froze {connection.number}")
                    connection.frozen_at = time.monotonic()
                    await asyncio.Event().wait()  # until the client goes away: this task is then cancelled
                data = await reader.read(4096 if self.args.mode == "freeze" else 65536)
                if not data:
                    break
                connection.bytes_in += len(data)
                buffer += data
                for frame, opcode in split_frames(buffer):
                    if opcode == 0x8 and self.args.mode == "deaf-close":
                        if connection.client_close_at is None:
                            connection.client_close_at = time.monotonic()
                            self.say(f"swallowed the close frame of {connection.number}")
                        continue
                    if connection.client_close_at is None:
                        up_writer.write(frame)
                await up_writer.drain()
            connection.ended = time.monotonic()
            connection.ended_by = "client"
            done.set()

        async def upstream_to_queue():
            head = await read_head(up_reader)
            connection.upgraded = b" 101 " in head.split(b"\r\n", 1)[0]
            await outgoing.put(bytes(head))
            buffer = bytearray()
            while True:
                data = await up_reader.read(65536)
                if not data:
                    break
                buffer += data
                for frame, opcode in split_frames(buffer):
                    if opcode == 0x8 and connection.server_close_at is None:
                        connection.server_close_at = time.monotonic()
                    await outgoing.put(frame)
            # The upstream went away: a deaf server keeps the client's socket open all the same.
            if self.args.mode != "deaf-close":
                await outgoing.put(None)

        async def to_client():
            head = await outgoing.get()
            writer.write(head)
            connection.bytes_out += len(head)
            await writer.drain()
            flooding = presetup
            if presetup:
                self.say(f"flooding {connection.number} before setup")
            watching = not presetup and self.args.mode == "flood"
            sent = 0
            while True:
                if watching and self.flood_requested.is_set():
                    self.flood_requested.clear()
                    watching, flooding = False, True
                    self.say(f"flooding {connection.number}")
                if flooding:
                    if connection.flood_started is None:
                        connection.flood_started = time.monotonic()
                    n = CHUNK_FRAMES if self.args.count == 0 else min(CHUNK_FRAMES, self.args.count - sent)
                    chunk = self.flood_chunk if n == CHUNK_FRAMES else self.flood_frame * n
                    writer.write(chunk)
                    sent += n
                    connection.flood_frames = sent
                    connection.bytes_out += len(chunk)
                    await writer.drain()
                    if self.args.count and sent >= self.args.count:
                        flooding = False
                        connection.flood_ended = time.monotonic()
                        self.say(f"flood of {connection.number} ended after {sent} frames")
                    if presetup and flooding:
                        continue  # the server's frames wait
                    while not outgoing.empty():
                        frame = outgoing.get_nowait()
                        if frame is None:
                            return
                        writer.write(frame)
                        connection.bytes_out += len(frame)
                    continue
                if connection.frozen.is_set():
                    await asyncio.sleep(0.05)
                    continue
                try:
                    frame = await asyncio.wait_for(outgoing.get(), 0.05)
                except asyncio.TimeoutError:
                    continue
                if frame is None:
                    return
                writer.write(frame)
                connection.bytes_out += len(frame)
                await writer.drain()

        tasks = [asyncio.create_task(t()) for t in (client_to_upstream, upstream_to_queue, to_client)]
        try:
            # The client going away ends everything; the upstream going away ends a plain proxy (to_client ends).
            pending = set(tasks)
            while pending and not (tasks[0].done() or tasks[2].done()):
                _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in tasks:
                if task.done() and not task.cancelled() and task.exception() and not isinstance(
                        task.exception(), (ConnectionError, OSError, asyncio.IncompleteReadError)):
                    self.say(f"connection {connection.number}: {task.exception()!r}")
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if connection.flood_started is not None and connection.flood_ended is None:
                connection.flood_ended = time.monotonic()
            if connection.ended is None:
                connection.ended = time.monotonic()
                connection.ended_by = "client" if done.is_set() or tasks[2].done() else "server"
            up_writer.close()


async def read_head(reader):
    """An HTTP head (up to the empty line), as bytes."""
    return await reader.readuntil(b"\r\n\r\n")


def split_frames(buffer):
    """Takes every whole WebSocket frame off the front of `buffer`: (the frame's bytes, its opcode)."""
    out = []
    while len(buffer) >= 2:
        opcode = buffer[0] & 0x0F
        masked = buffer[1] & 0x80
        length = buffer[1] & 0x7F
        offset = 2
        if length == 126:
            if len(buffer) < 4:
                break
            length = int.from_bytes(buffer[2:4], "big")
            offset = 4
        elif length == 127:
            if len(buffer) < 10:
                break
            length = int.from_bytes(buffer[2:10], "big")
            offset = 10
        if masked:
            offset += 4
        end = offset + length
        if len(buffer) < end:
            break
        out.append((bytes(buffer[:end]), opcode))
        del buffer[:end]
    return out


async def main():
    parser = argparse.ArgumentParser(prog="hostile.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["silent", "deaf-close", "freeze", "flood"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--upstream", help="ws://HOST:PORT of the server behind a proxy")
    parser.add_argument("--payload", choices=["byte", "usage"], default="byte")
    parser.add_argument("--count", type=int, default=0, help="flood frames (0: until the client goes)")
    parser.add_argument("--presetup", action="store_true")
    parser.add_argument("--conn", type=int, default=1, help="with --presetup: the connection to flood")
    parser.add_argument("--record")
    args = parser.parse_args()
    if args.mode != "silent":
        if not args.upstream:
            parser.error("a proxy needs --upstream")
        hostport = args.upstream.split("://", 1)[-1].split("/", 1)[0]
        args.upstream_host, port = hostport.rsplit(":", 1)
        args.upstream_port = int(port)
    server = Server(args)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", args.port)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, server.flood_requested.set if args.mode == "flood" else server.freeze)
    print(f"listening on {listener.sockets[0].getsockname()[1]}", flush=True)
    await stop.wait()
    server.write_record()
    listener.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
