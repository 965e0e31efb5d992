"""A small MCP server on the official Python SDK (`mcp`, MCPServer), which Hark's MCP tests use as a real server.

    .venv-mcp/bin/python scripts/lib/mcp-test-server.py stdio
    .venv-mcp/bin/python scripts/lib/mcp-test-server.py http --port 8765 [--json] [--page-size 5]

Its tools: echo and add (read-only), count (reports progress), wait (acts: runs until cancelled), waiting and
cancelled (how many waits run, and were cancelled), huge (a result of N megabytes), die (the process exits
mid-call), grow (adds the tool `late` and announces list_changed, to a session and on subscriptions/listen streams), wipe (marked destructive), a tool whose name holds characters backends
refuse, and filler tools so that tools/list takes several pages. With --print-port the HTTP port it listens on is
printed on stdout (give --port 0 to let the system choose).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import sys
import time

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ListToolsResult, ToolAnnotations

READ_ONLY = ToolAnnotations(readOnlyHint=True)


class PagedServer(MCPServer):
    """tools/list in pages of `page_size` (the cursor is the index of the next tool)."""

    page_size = 5

    async def _handle_list_tools(self, ctx, params):  # noqa: ANN001 - the SDK's signature
        tools = await self.list_tools()
        cursor = getattr(params, "cursor", None) if params is not None else None
        start = int(cursor) if cursor else 0
        end = start + self.page_size
        return ListToolsResult(tools=tools[start:end], next_cursor=str(end) if end < len(tools) else None)


# The SDK warns (on stderr) of the tool name that is refused on purpose below.
logging.getLogger("mcp").setLevel(logging.ERROR)
server = PagedServer("hark-test", version="1.0")
cancellations = 0
running = 0


@server.tool(annotations=READ_ONLY)
def echo(text: str) -> str:
    """Says the text back."""
    return text


@server.tool(annotations=READ_ONLY)
def add(a: int, b: int) -> int:
    """Adds two whole numbers."""
    return a + b


@server.tool(annotations=READ_ONLY)
async def count(steps: int, ctx: Context) -> str:
    """Counts to `steps`, reporting each step as progress."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
        await asyncio.sleep(0.05)
    return f"counted to {steps}"


@server.tool()
async def wait(seconds: float = 60) -> str:
    """Waits; a cancelled wait is counted."""
    global cancellations, running
    running += 1
    try:
        await asyncio.sleep(seconds)
    except BaseException:
        cancellations += 1
        raise
    finally:
        running -= 1
    return "waited"


@server.tool(annotations=READ_ONLY)
def waiting() -> int:
    """How many waits are running."""
    return running


@server.tool(annotations=READ_ONLY)
def cancelled() -> int:
    """How many waits were cancelled."""
    return cancellations


@server.tool(annotations=READ_ONLY)
def huge(megabytes: int) -> str:
    """A result of `megabytes` MB."""
    return "x" * (megabytes << 20)


@server.tool(annotations=READ_ONLY)
async def die() -> str:
    """Ends the server's process in the middle of the call."""
    await asyncio.sleep(0.05)
    os._exit(3)


def late(room: str) -> str:
    """Switches the light of `room` on (appears after grow)."""
    return f"the light in {room} is on"


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `late` and announces that the tools changed."""
    if "late" not in [tool.name for tool in await server.list_tools()]:
        server.add_tool(late, annotations=READ_ONLY)
    await ctx.session.send_tool_list_changed()
    # 2026-07-28 clients hear of it on their subscriptions/listen stream.
    await ctx.notify_tools_changed()
    return "grown"


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def wipe() -> str:
    """Deletes everything (marked destructive)."""
    return "wiped"


server.add_tool(echo, name="lights.on/off-π", description="A name with characters backends refuse.", annotations=READ_ONLY)
for index in range(6):
    server.add_tool(echo, name=f"filler_{index}", description=f"Filler tool {index}.", annotations=READ_ONLY)


class Timed:
    """ASGI: each response's head carries X-Server-Time-Us, the microseconds from the request's arrival to the
    head (with JSON answers, the whole of the server's work on it)."""

    def __init__(self, app) -> None:  # noqa: ANN001 - an ASGI app
        self.app = app

    async def __call__(self, scope, receive, send) -> None:  # noqa: ANN001 - ASGI
        started = time.perf_counter_ns()

        async def timed_send(message) -> None:  # noqa: ANN001 - ASGI
            if message["type"] == "http.response.start":
                spent = (time.perf_counter_ns() - started) // 1000
                message = dict(message)
                message["headers"] = [*message.get("headers", []), (b"x-server-time-us", str(spent).encode())]
            await send(message)

        await self.app(scope, receive, timed_send)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="answer requests with JSON, not event streams")
    parser.add_argument("--page-size", type=int, default=5)
    parser.add_argument("--timing", action="store_true", help="answer with X-Server-Time-Us: the time spent")
    arguments = parser.parse_args()
    PagedServer.page_size = arguments.page_size
    if arguments.transport == "stdio":
        server.run("stdio")
        return
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", arguments.port))
    print(listener.getsockname()[1], flush=True)
    app = server.streamable_http_app(json_response=arguments.json)
    if arguments.timing:
        app = Timed(app)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    asyncio.run(uvicorn.Server(config).serve(sockets=[listener]))


if __name__ == "__main__":
    sys.exit(main())
