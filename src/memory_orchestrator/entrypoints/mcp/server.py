"""The MCP server: the agent-facing tool surface over stdio and streamable HTTP.

Tools are thin: validate the input model, check the caller may use the store, call the orchestrator
(or the session / provenance logic), convert the result. Errors the model can fix become tool errors
with a one-line message; backend internals never leak. Nothing is written to stdout except the
protocol (stdio); one JSON log line per call goes to stderr.

Every ``mcp`` import of the project lives in this module, except those of ``direct_calls``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, cast

from mcp.server import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp.server.stdio import stdio_server
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ConfigDict
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp

from memory_orchestrator import __version__
from memory_orchestrator.entrypoints.mcp import published
from memory_orchestrator.entrypoints.mcp.auth import (
    LOCAL_CALLER,
    BearerAuthMiddleware,
    Caller,
    TokenRegistry,
    caller_from_scope,
    check_bind,
)
from memory_orchestrator.entrypoints.mcp.direct_calls import DirectCalls
from memory_orchestrator.entrypoints.mcp.http_limits import (
    HttpLimits,
    RequestLimitsMiddleware,
    header_timeout_protocol,
)
from memory_orchestrator.entrypoints.mcp.pipes import event_loop_stdio
from memory_orchestrator.entrypoints.mcp.schemas import validate_input
from memory_orchestrator.entrypoints.mcp.state import (
    ServerOptions,
    ServerState,
    StoreExists,
    StoreOpener,
    StorePool,
    ToolCall,
)
from memory_orchestrator.entrypoints.mcp.text import result_text
from memory_orchestrator.entrypoints.mcp.tools import ToolSpec, tool_specs
from memory_orchestrator.entrypoints.telemetry.log_lines import in_request_scope
from memory_orchestrator.ports import (
    AccessDenied,
    BackendError,
    BackendUnavailable,
    Clock,
    InvalidRequest,
    NotFound,
    SystemClock,
)

SERVER_NAME = "memory-orchestrator"
INSTRUCTIONS = (
    "Long-term memory for this agent. Start a task with memory_context (a budgeted, ready-to-paste "
    "block); use memory_search for ranked lookups, memory_why for the reasons behind a decision, "
    "memory_changes to catch up, memory_write to remember something, and memory_session_summary at "
    "the end of a session. Every answer carries a trace_id that memory_explain can expand."
)
LOG = logging.getLogger("memory_orchestrator.mcp")


class _RawArguments(ArgModelBase):
    # The SDK validates nothing here: the tool body validates against the strict input model itself,
    # so unknown fields are rejected and error messages stay one line and value-free.
    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

    def model_dump_one_level(self) -> dict[str, Any]:
        return {"arguments": dict(self.__pydantic_extra__ or {})}


def _resolve_caller(ctx: Context, options: ServerOptions) -> Caller:
    request = ctx.request_context.request
    scope = getattr(request, "scope", None)
    caller = caller_from_scope(scope)
    if caller is not None:
        return caller
    if scope is not None and options.require_http_caller:
        raise AccessDenied("not authorised: no authenticated caller")
    return LOCAL_CALLER


def _choose_store(requested: str | None, caller: Caller, options: ServerOptions) -> str:
    if requested:
        return requested
    if caller.may_read(options.default_store) or caller.anonymous:
        return options.default_store
    own = sorted(caller.stores)
    return own[0] if len(own) == 1 else options.default_store


class CallTimedOut(BackendUnavailable):
    """A tool call that outlived its deadline (the backend hangs, or is down and slow to say so)."""

    def __init__(self, tool: str, seconds: float, read_only: bool) -> None:
        self.answer = f"the memory store did not answer within {seconds:g} s; retry in a moment" + (
            ""
            if read_only
            else " (the write may still complete: retrying it is safe, duplicates are skipped)"
        )
        super().__init__(f"{tool} timed out after {seconds:g} s", backend="mcp")


class ServerBusy(BackendUnavailable):
    """A tool call still waiting for its turn when its deadline came (``[server] concurrent_calls``
    calls were running all that time): nothing of it ran."""

    def __init__(self, tool: str, seconds: float) -> None:
        self.answer = (
            f"the server was busy with other calls and did not get to this one within {seconds:g} s; "
            "retry in a moment"
        )
        super().__init__(f"{tool} waited {seconds:g} s for its turn", backend="mcp")


def _tool_error(exc: Exception) -> ToolError:
    if isinstance(exc, CallTimedOut | ServerBusy):
        return ToolError(exc.answer)
    if isinstance(exc, AccessDenied):
        return ToolError(str(exc))
    if isinstance(exc, InvalidRequest):
        return ToolError(f"invalid arguments: {exc}")
    if isinstance(exc, NotFound):
        return ToolError(f"not found: {exc}")
    if isinstance(exc, BackendError) and (condition := storage_condition(str(exc))):
        return ToolError(f"the memory store {condition}; nothing was written")
    if isinstance(exc, BackendUnavailable):
        return ToolError("the memory store is unavailable right now; retry in a moment")
    if isinstance(exc, BackendError):
        return ToolError("the memory store rejected the request")
    return ToolError("internal error; the server log has the details")


#: Storage conditions worth naming to a caller (retrying will not help), by what the drivers say.
_STORAGE_CONDITIONS = (
    (("disk is full", "no space left", "disk full", "quota exceeded"), "is out of disk space"),
    (("readonly database", "read-only file system", "read-only database"), "is read-only"),
)


def storage_condition(message: str) -> str | None:
    """``is out of disk space`` / ``is read-only`` when a backend error says so, else ``None``."""
    lowered = message.lower()
    for needles, condition in _STORAGE_CONDITIONS:
        if any(needle in lowered for needle in needles):
            return condition
    return None


#: The tools that may create a store that does not exist yet (every other tool answers "unknown store").
_CREATES_STORE = frozenset({"memory_write", "memory_session_summary"})


def _make_tool(spec: ToolSpec, parameters: dict[str, Any]) -> Tool:
    async def run(arguments: dict[str, Any], ctx: Context) -> CallToolResult:
        state = cast(ServerState, ctx.request_context.lifespan_context)
        started = time.perf_counter()
        call = ToolCall(
            spec.name,
            LOCAL_CALLER,
            _named_store(arguments, state.options),
            state,
            writes=spec.name in _CREATES_STORE,
        )
        status = "ok"
        try:
            # The caller first, so that the audit line of a call failing validation names who made it.
            call.caller = _resolve_caller(ctx, state.options)
            try:
                payload = validate_input(spec.input_model, arguments)
            except ValueError as exc:
                raise InvalidRequest(str(exc).removeprefix("invalid arguments: ")) from None
            call.store = _choose_store(getattr(payload, "store", None), call.caller, state.options)
            if spec.per_store and not (spec.anonymous and call.caller.anonymous):
                call.caller.check(spec.name, call.store)
            limit = state.options.read_timeout_s if spec.read_only else state.options.write_timeout_s
            admitted = False
            try:
                async with asyncio.timeout(limit), state.admission:
                    admitted = True
                    output = await spec.body(payload, call)
            except TimeoutError:
                if not admitted:
                    raise ServerBusy(spec.name, limit) from None
                raise CallTimedOut(spec.name, limit, spec.read_only) from None
            data = output.model_dump(mode="json", by_alias=True)
            # Compact text for the model, the full result once as structured content.
            text = TextContent(type="text", text=result_text(spec.name, output, data))
            return CallToolResult(content=[text], structured_content=data)
        except Exception as exc:
            status = type(exc).__name__
            if not isinstance(exc, InvalidRequest | NotFound | AccessDenied | BackendError):
                LOG.exception("tool %s failed", spec.name)
            raise _tool_error(exc) from None
        finally:
            call.release()
            _log_call(call, status, time.perf_counter() - started)

    return Tool(
        fn=in_request_scope(run),  # the call's log lines carry its request id = its trace id
        name=spec.name,
        title=spec.title,
        description=spec.description,
        parameters=parameters,
        fn_metadata=FuncMetadata(
            arg_model=_RawArguments,
            # The schema is published; no output model, so the SDK does not validate each result
            # against it again: ``run`` returns the dump of an output model the body validated
            # (a second full validation of every answer cost ~1% of a served search's CPU).
            output_model=None,
            output_schema=published.output_schema(spec.output_model),
        ),
        is_async=True,
        context_kwarg="ctx",
        annotations=ToolAnnotations(
            read_only_hint=spec.read_only,
            destructive_hint=spec.destructive,
            idempotent_hint=spec.idempotent,
            open_world_hint=False,
        ),
    )


def _named_store(arguments: dict[str, Any], options: ServerOptions) -> str:
    """The store a call names, for its audit line even when validation fails (bounded, never trusted)."""
    store = arguments.get("store") if isinstance(arguments, dict) else None
    return store[:64] if isinstance(store, str) and store else options.default_store


def _log_call(call: ToolCall, status: str, seconds: float) -> None:
    line: dict[str, Any] = {
        "event": "tool_call",
        "tool": call.tool,
        "caller": call.caller.name,
        "store": call.store,
        "status": status,
        "latency_ms": round(seconds * 1000, 2),
    }
    for key, value in call.log.items():
        if key in {"query", "content"} and not call.state.options.log_contents:
            continue
        line[key] = value
    LOG.info(json.dumps(line, sort_keys=True, default=str))
    if call.state.options.on_call is not None:
        call.state.options.on_call(call.tool, status, seconds)


def configure_logging(level: str | int = logging.INFO) -> None:
    """Send the server's JSON log lines to stderr (never stdout: it carries the stdio protocol)."""
    from memory_orchestrator.entrypoints.telemetry.log_lines import configure_logging as configure

    configure(level, exclusive=True)


def build_server(
    opener: StoreOpener,
    options: ServerOptions,
    *,
    clock: Clock | None = None,
    exists: StoreExists | None = None,
    max_open_stores: int = 32,
    listing: Callable[[], list[str]] | None = None,
) -> MCPServer[Any]:
    """The MCP server over the stores ``opener`` opens; nothing is opened before the lifespan starts.

    ``exists`` tells whether a store exists, so that reads of a missing one are refused (only writes
    create stores); ``max_open_stores`` bounds the stores open at once (least recently used closed);
    ``listing`` names the stores that exist (``memory_stores``).
    """
    the_clock = clock or SystemClock()
    live: list[ServerState] = []  # the state while the lifespan runs (for ``DirectCalls``)

    @asynccontextmanager
    async def lifespan(_server: MCPServer[Any]) -> AsyncIterator[ServerState]:
        pool = StorePool(opener, exists=exists, max_open=max_open_stores)
        state = ServerState(pool, options, the_clock, listing=listing)
        live.append(state)
        try:
            yield state
        finally:
            live.remove(state)
            await pool.aclose()

    specs = tool_specs(include_session_tools=options.session_tools)
    server: MCPServer[Any] = MCPServer(
        SERVER_NAME,
        instructions=INSTRUCTIONS,
        version=__version__,  # the package's own (its metadata would cost a scan of every distribution)
        tools=[
            _make_tool(spec, parameters)
            for spec, parameters in zip(
                specs, published.input_schemas(spec.input_model for spec in specs), strict=True
            )
        ],
        lifespan=lifespan,
        log_level="WARNING",
    )

    async def liveness(_request: Request) -> Response:
        return JSONResponse({"status": "ok", "server": SERVER_NAME})

    server.custom_route("/health", methods=["GET"])(liveness)
    _LIVE_STATES[server] = lambda: live[-1] if live else None
    return server


#: How ``http_app`` finds the lifespan state of a server ``build_server`` made.
_LIVE_STATES: weakref.WeakKeyDictionary[MCPServer[Any], Callable[[], ServerState | None]] = (
    weakref.WeakKeyDictionary()
)


def http_app(
    server: MCPServer[Any],
    registry: TokenRegistry,
    *,
    host: str,
    limits: HttpLimits | None = None,
    direct: bool = True,
) -> RequestLimitsMiddleware:
    """The streamable HTTP app (stateless, JSON responses) behind fail-closed bearer auth, inside the
    request limits (body size and nesting, no event-stream GET). With ``direct`` (and a server from
    ``build_server``), single requests are answered in their own task (``DirectCalls``)."""
    check_bind(host, registry)
    app: ASGIApp = server.streamable_http_app(stateless_http=True, json_response=True, host=host)
    if direct and (state := _LIVE_STATES.get(server)) is not None:
        app = DirectCalls(app, server.session_manager, state)
    guarded = BearerAuthMiddleware(app, registry, open_paths={"/health"})
    return RequestLimitsMiddleware(guarded, limits or HttpLimits())


async def serve_stdio(
    server: MCPServer[Any], *, warm_up: Callable[[], None] | None = None, warm_up_after_s: float = 0.0
) -> None:
    """Serve over stdin/stdout until the client closes the stream; ``warm_up`` (if any) runs once on
    the event loop ``warm_up_after_s`` after the start (unless the stream closed before)."""
    loop = asyncio.get_running_loop()
    timer = loop.call_later(warm_up_after_s, warm_up) if warm_up is not None else None
    try:
        async with event_loop_stdio() as pipes:
            if pipes is None:
                await server.run_stdio_async()
                return
            # what run_stdio_async runs, with the SDK's stdio transport over the loop's pipes (pipes.py);
            # mcp is pinned, and tests/entrypoints/test_mcp_pipes.py serves through this path
            lines, writer = pipes
            async with stdio_server(cast(Any, lines), cast(Any, writer)) as (read_stream, write_stream):
                lowlevel = server._lowlevel_server
                await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
    finally:
        if timer is not None:
            timer.cancel()


async def serve_http(
    server: MCPServer[Any],
    registry: TokenRegistry,
    *,
    host: str,
    port: int,
    limits: HttpLimits | None = None,
    sockets: list[socket.socket] | None = None,
) -> None:
    """Serve streamable HTTP on ``host:port`` until interrupted (headers must arrive in time, idle
    keep-alive connections close after 5 s)."""
    import uvicorn

    limits = limits or HttpLimits()
    config = uvicorn.Config(
        http_app(server, registry, host=host, limits=limits),
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        http=header_timeout_protocol(limits.header_timeout_s),
        timeout_keep_alive=5,
    )
    await uvicorn.Server(config).serve(sockets=sockets)
