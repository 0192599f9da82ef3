"""Limits of the HTTP server that no caller can talk it out of.

- Request headers must arrive within ``header_timeout_s`` of a connection opening (or of the previous
  response): a client sending partial headers forever (slowloris) is disconnected.
- A request body over ``max_body_bytes`` is refused with 413, one nested deeper than ``max_json_depth``
  with 400, before any JSON parser or tool sees it.
- ``GET /mcp`` (a server-to-client event stream, which this stateless server never uses) is refused
  with 405, so no idle stream stays open; clients then simply do not listen.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """The bounds of ``serve --http`` (``[http]`` in the configuration)."""

    header_timeout_s: float = 10.0
    max_body_bytes: int = 1_048_576
    max_json_depth: int = 64


def header_timeout_protocol(timeout_s: float) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol, closing connections whose request headers do not arrive in time.

    httptools parses in C: a served ``memory_search`` answered from the read cache took 9% fewer
    instructions (callgrind, 5.06 -> 4.59 M) than with uvicorn's pure-Python h11 protocol, and
    about 12% less CPU time (10k store, 10 connections, one worker). An uncached call (~20 ms of
    pipeline) shows no measurable difference.
    """
    # only the HTTP server needs these; the CLI does not pay for them
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class HeaderTimeoutProtocol(HttpToolsProtocol):
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(timeout_s, self._overdue)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _awaiting_headers(self) -> bool:
            # No request whose headers are in is being answered or waits its turn (pipelined).
            return (self.cycle is None or self.cycle.response_complete) and not self.pipeline

        def _overdue(self) -> None:
            # Still waiting for a whole request line and headers: give the connection up.
            self._header_timer = None
            if self._awaiting_headers() and not self.transport.is_closing():
                self.transport.close()

        def on_headers_complete(self) -> None:
            self._disarm()
            super().on_headers_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self._awaiting_headers():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeaderTimeoutProtocol


def json_depth(body: bytes) -> int:
    """The deepest nesting of objects and arrays in ``body`` (strings skipped), without parsing it."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in body:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return deepest


class RequestLimitsMiddleware:
    """Refuses oversized or over-nested request bodies and event-stream GETs on the MCP path."""

    def __init__(self, app: ASGIApp, limits: HttpLimits, *, mcp_path: str = "/mcp") -> None:
        self._app = app
        self._limits = limits
        self._mcp_path = mcp_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check one request, then hand it on with its body replayed."""
        if scope["type"] != "http" or scope.get("path") != self._mcp_path:
            await self._app(scope, receive, send)
            return
        if scope.get("method") == "GET":
            await _answer(send, 405, "this server sends no event stream; POST JSON-RPC requests")
            return
        declared = _content_length(scope)
        if declared is not None and declared > self._limits.max_body_bytes:
            await _answer(send, 413, f"request body over {self._limits.max_body_bytes} bytes")
            return
        body = await read_body(receive, self._limits.max_body_bytes)
        if body is None:
            await _answer(send, 413, f"request body over {self._limits.max_body_bytes} bytes")
            return
        if json_depth(body) > self._limits.max_json_depth:
            await _answer(send, 400, f"JSON nested deeper than {self._limits.max_json_depth} levels")
            return
        await self._app(scope, replay(body, receive), send)


def _content_length(scope: Scope) -> int | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or ``None`` when it exceeds ``limit`` bytes or the client went away."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands ``body`` over once more (it was read already), then the real one."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def _answer(send: Send, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    headers: list[Any] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    if status == 405:
        headers.append((b"allow", b"POST"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
