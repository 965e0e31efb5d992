#!/usr/bin/env python3
"""A stream server on loopback for the media player's tests: Icecast's ICY protocol and its faults.

  media-test-server.py FILE [--port 0]   # prints the port it listens on, then serves until killed

  /icy?titles=A|B&every=N   FILE in a loop with `icy-metaint: 8192`; the metadata block carries StreamTitle, the
                            next title every N blocks (default 4); `icy-name` in the headers
  /hostile-title            FILE with a StreamTitle of control characters, an escape sequence and 10 000 letters
  /file                     FILE once, with its length (a finite stream)
  /stall                    the first 32 KiB of FILE, then nothing, the connection kept open
  /trickle                  the headers, then one byte of FILE a second
  /garbage                  200 KiB of random bytes as audio/mpeg
  /missing                  404
"""
import argparse
import http.server
import os
import random
import signal
import socketserver
import sys
import time
import urllib.parse

METAINT = 8192


def metadata_block(title):
    if title is None:
        return b"\x00"
    text = ("StreamTitle='%s';" % title).encode("utf-8", "replace")
    length = (len(text) + 15) // 16
    if length > 255:
        text = text[:255 * 16]
        length = 255
    return bytes([length]) + text.ljust(length * 16, b"\x00")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    audio = b""

    def log_message(self, format, *args):
        sys.stderr.write("media-test-server: " + (format % args) + "\n")

    def headers_for(self, extra=None):
        self.send_response(200)
        self.send_header("Content-Type", "audio/mpeg")
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        query = urllib.parse.parse_qs(url.query)
        try:
            if url.path == "/icy":
                titles = query.get("titles", ["Hark Test - First Song|Hark Test - Second Song"])[0].split("|")
                every = int(query.get("every", ["4"])[0])
                self.icy(titles, every)
            elif url.path == "/hostile-title":
                self.icy(["\x1b[31mred\x07\r\nforged log line " + "x" * 10000], 1000000)
            elif url.path == "/file":
                self.headers_for({"Content-Length": str(len(self.audio))})
                self.wfile.write(self.audio)
            elif url.path == "/stall":
                self.headers_for()
                self.wfile.write(self.audio[:32768])
                self.wfile.flush()
                time.sleep(600)
            elif url.path == "/trickle":
                self.headers_for()
                self.wfile.flush()
                for index in range(600):
                    self.wfile.write(self.audio[index:index + 1])
                    self.wfile.flush()
                    time.sleep(1)
            elif url.path == "/garbage":
                data = random.Random(35).randbytes(200 * 1024)
                self.headers_for({"Content-Length": str(len(data))})
                self.wfile.write(data)
            else:
                self.send_error(404)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def icy(self, titles, every):
        wants_metadata = self.headers.get("Icy-MetaData") == "1"
        extra = {"icy-name": "Hark Test Radio"}
        if wants_metadata:
            extra["icy-metaint"] = str(METAINT)
        self.headers_for(extra)
        offset = 0
        block = 0
        while True:
            chunk = bytearray()
            while len(chunk) < METAINT:
                piece = self.audio[offset:offset + METAINT - len(chunk)]
                chunk += piece
                offset = (offset + len(piece)) % len(self.audio)
            self.wfile.write(bytes(chunk))
            if wants_metadata:
                title = titles[(block // every) % len(titles)]
                self.wfile.write(metadata_block(title))
            block += 1


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    # Started from a thread that blocks SIGTERM, the process would inherit the mask and outlive its test.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    with open(args.file, "rb") as f:
        Handler.audio = f.read()
    server = Server(("127.0.0.1", args.port), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
