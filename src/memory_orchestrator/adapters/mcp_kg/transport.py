"""A small MCP client transport: one stdio server subprocess, one session, every call timed out.

Kept free of anything knowledge-graph specific so another MCP-speaking store (e.g. a future
``mnemon mcp serve``) can reuse it. The ``mcp`` SDK's stdio client is a pair of async context
managers whose cancel scopes must be entered and left in the same task, so one owner task holds
them open and callers from any task talk through the session. A dead server is restarted on the
next call.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from memory_orchestrator.ports import BackendRejected, BackendUnavailable


class McpStdioTransport:
    """Calls tools of one MCP server started as ``command args`` with ``environment`` added."""

    def __init__(
        self,
        command: str,
        args: Sequence[str],
        *,
        environment: Mapping[str, str] | None = None,
        timeout_s: float = 10.0,
        backend: str = "mcp",
    ) -> None:
        self.backend = backend
        self.command = command
        self.args = list(args)
        self.environment = dict(environment or {})
        self.timeout_s = timeout_s
        self.starts = 0
        self._session: ClientSession | None = None
        self._owner: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()

    @property
    def alive(self) -> bool:
        """Whether the server subprocess and its session are up."""
        return self._session is not None and self._owner is not None and not self._owner.done()

    async def _own(self, ready: asyncio.Future[ClientSession]) -> None:
        params = StdioServerParameters(
            command=self.command, args=self.args, env={**os.environ, **self.environment}
        )
        try:
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                ready.set_result(session)
                await self._stop.wait()
        except BaseException as exc:  # the owner must report any start failure to the caller
            if not ready.done():
                ready.set_exception(exc)
            elif not isinstance(exc, asyncio.CancelledError | Exception):
                raise
        finally:
            self._session = None

    async def start(self) -> None:
        """Start the server unless it runs; a start slower than the timeout is an error."""
        async with self._lock:
            if self.alive:
                return
            await self._shutdown()
            self._stop = asyncio.Event()
            ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
            self._owner = asyncio.create_task(self._own(ready))
            try:
                self._session = await asyncio.wait_for(asyncio.shield(ready), self.timeout_s)
            except Exception as exc:
                await self._shutdown()
                message = f"MCP server {self.command} {' '.join(self.args)} did not start: {exc!r}"
                raise BackendUnavailable(message, backend=self.backend) from exc
            self.starts += 1

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> Any:
        """Call ``tool`` and return its JSON result (text content parsed), restarting a dead server."""
        if not self.alive:
            await self.start()
        session = self._session
        assert session is not None
        try:
            result = await asyncio.wait_for(session.call_tool(tool, dict(arguments)), self.timeout_s)
        except TimeoutError as exc:
            # A hung server is killed so the next call starts a fresh one.
            await self._shutdown()
            raise BackendUnavailable(
                f"MCP tool {tool} timed out after {self.timeout_s}s", backend=self.backend
            ) from exc
        except Exception as exc:
            await self._shutdown()
            raise BackendUnavailable(f"MCP tool {tool} failed: {exc!r}", backend=self.backend) from exc
        return _decode(tool, result, self.backend)

    async def _shutdown(self) -> None:
        owner, self._owner = self._owner, None
        self._session = None
        if owner is None:
            return
        self._stop.set()
        try:
            await asyncio.wait_for(owner, self.timeout_s)
        except BaseException:  # a server that will not stop is cancelled; closing never raises
            owner.cancel()

    async def aclose(self) -> None:
        """Stop the server. Idempotent."""
        async with self._lock:
            await self._shutdown()


def _decode(tool: str, result: Any, backend: str) -> Any:
    texts = [getattr(part, "text", "") for part in getattr(result, "content", None) or []]
    body = "".join(texts)
    if getattr(result, "is_error", False) or getattr(result, "isError", False):
        raise BackendRejected(f"MCP tool {tool} refused: {body[:500]}", backend=backend)
    structured = getattr(result, "structured_content", None) or getattr(result, "structuredContent", None)
    if structured is not None:
        return structured
    try:
        return json.loads(body) if body else None
    except json.JSONDecodeError:
        return body
