"""Stateless JSON-RPC requests answered in the HTTP request's own task.

For every POST, the SDK's stateless streamable HTTP handling builds a transport with memory streams,
starts a task that runs a JSON-RPC dispatcher over them (which spawns one more task for the request)
and a router task, and tears them all down again. ``DirectCalls`` answers the common case itself:
one JSON-RPC request other than ``initialize``, on the 2025-era wire (no protocol version header,
or a handshake version), that passes the same transport checks (body size, DNS rebinding
protection, ``Accept``, ``Content-Type``; a Host or Origin the protection refuses gets the SDK's own
refusal from here, so it is checked and logged once). It runs the SDK's own request kernel
(``serve_one``: the same runner, middleware, method validation, handler and result serialization)
in the request's task, maps a failure to its JSON-RPC error as the dispatcher does, and writes the
response as the transport does, so the answer is the same byte for byte. Everything else
(notifications, responses, batches, ``initialize``, parse or validation errors, other refused
headers, GET and DELETE, the 2026 protocol) goes to the SDK unchanged, its body replayed. A served
``memory_search`` costs ~16% less server CPU this way (10k store, 50 connections, one worker).

Every ``mcp`` import of this module is one the SDK's stateless path makes itself; ``mcp==2.3.0`` is
pinned and ``tests/entrypoints/test_mcp_direct_calls.py`` compares the two paths answer for answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import pydantic_core
from mcp.server.connection import Connection
from mcp.server.runner import serve_one
from mcp.server.streamable_http import check_accept_headers
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data, progress_token_from_params
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import (
    DEFAULT_NEGOTIATED_VERSION,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    ProgressToken,
    RequestId,
    jsonrpc_message_adapter,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from memory_orchestrator.entrypoints.mcp.http_limits import read_body, replay

#: The SDK's own names: the response media type, and the logger its dispatcher reports failures on.
CONTENT_TYPE_JSON = "application/json"
DISPATCH_LOG = logging.getLogger("mcp.shared.jsonrpc_dispatcher")
#: The body is read whole: ``RequestLimitsMiddleware`` in front of this app has bounded it already.
UNBOUNDED = 1 << 62
_TRANSPORT = TransportContext(kind="streamable-http", can_send_request=False)


@dataclass
class _RequestContext:
    """The dispatch context of one request, as the SDK's stateless JSON mode gives it: no back
    channel (a server-to-client request raises), and notifications dropped (a JSON body carries
    only the response)."""

    request_id: RequestId
    message_metadata: ServerMessageMetadata
    progress_token: ProgressToken | None = None
    cancel_requested: anyio.Event = field(default_factory=anyio.Event)
    transport: TransportContext = _TRANSPORT
    can_send_request: bool = False

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> None:
        """Dropped, as the SDK's router drops it in JSON mode."""

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: Any = None
    ) -> dict[str, Any]:
        """Refused: a JSON response has no room for a server-initiated request."""
        raise NoBackChannelError(method)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Dropped, as every notification of the request is."""


class DirectCalls:
    """ASGI app in front of the SDK's streamable HTTP app (stateless, JSON responses): answers a
    single JSON-RPC request on the ``path`` itself, hands everything else to ``app``."""

    def __init__(
        self,
        app: ASGIApp,
        manager: StreamableHTTPSessionManager,
        lifespan_state: Callable[[], Any],
        *,
        path: str = "/mcp",
    ) -> None:
        self._app = app
        self._server = manager.app
        self._security = TransportSecurityMiddleware(manager.security_settings)
        self._max_body = manager.max_request_body_size
        self._state = lifespan_state
        self._path = path
        self._enabled = manager.stateless and manager.json_response

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request directly when it is the common case, else pass it on."""
        if (
            not self._enabled
            or scope["type"] != "http"
            or scope.get("path") != self._path
            or scope.get("method") != "POST"
        ):
            await self._app(scope, receive, send)
            return
        body = await read_body(receive, UNBOUNDED)
        if body is None:  # the client went away: the SDK sees that as it would
            await self._app(scope, receive, send)
            return
        request = Request(scope, replay(body, receive))
        verdict = await self._direct_request(request, body)
        state = self._state() if isinstance(verdict, JSONRPCRequest) else None
        if isinstance(verdict, Response):
            await verdict(scope, request.receive, send)
        elif isinstance(verdict, JSONRPCRequest) and state is not None:
            answer = await self._answer(request, verdict, state)
            response = Response(
                answer.model_dump_json(by_alias=True, exclude_unset=True),
                status_code=200,
                headers={"Content-Type": CONTENT_TYPE_JSON},
            )
            await response(scope, request.receive, send)
        else:  # (no state: the lifespan is not running)
            await self._app(scope, replay(body, receive), send)

    async def _direct_request(self, request: Request, body: bytes) -> JSONRPCRequest | Response | None:
        """The SDK's checks of a POST, in its order: the request to answer here, the answer to a
        request its transport security refuses, or ``None`` when the SDK should answer."""
        headers = request.headers
        declared = headers.get("content-length")
        if len(body) > self._max_body or (declared is not None and not declared.isdigit()):
            return None  # the SDK answers 413 (or decides)
        if declared is not None and int(declared) > self._max_body:
            return None
        version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return None  # the 2026 protocol, or an unknown version: the SDK's modern entry
        refused = await self._security.validate_request(request, is_post=True)
        if refused is not None:
            return refused  # what the SDK's transport answers first (checked once: it logs)
        if not check_accept_headers(request)[0]:
            return None
        content_type = headers.get("content-type", "")
        if not any(part.strip() == CONTENT_TYPE_JSON for part in content_type.split(";")[0].split(",")):
            return None
        try:
            message = jsonrpc_message_adapter.validate_python(pydantic_core.from_json(body), by_name=False)
        except (ValueError, ValidationError):
            return None
        if not isinstance(message, JSONRPCRequest) or message.method == "initialize":
            return None
        return message

    async def _answer(
        self, request: Request, message: JSONRPCRequest, state: Any
    ) -> JSONRPCResponse | JSONRPCError:
        """Run the SDK's request kernel once; a failure becomes the error its dispatcher writes."""
        metadata = ServerMessageMetadata(request_context=request, can_send_request=False)
        context = _RequestContext(message.id, metadata, progress_token_from_params(message.params))
        version = request.headers.get(MCP_PROTOCOL_VERSION_HEADER, DEFAULT_NEGOTIATED_VERSION)
        connection = Connection.from_envelope(version, None, None)
        try:
            result = await serve_one(
                self._server,
                context,
                message.method,
                message.params,
                connection=connection,
                lifespan_state=state,
            )
        except Exception as exc:
            error = handler_exception_to_error_data(exc)
            if error is None:
                DISPATCH_LOG.exception("handler for %r raised", message.method)
                error = ErrorData(code=0, message=str(exc))
            return JSONRPCError(jsonrpc="2.0", id=message.id, error=error)
        return JSONRPCResponse(jsonrpc="2.0", id=message.id, result=result)
