"""Starting the MCP server from settings: tokens, store opening, options, stdio or HTTP.

Kept apart from the ``serve`` command so that the CLI imports the MCP SDK (about half a second)
only when a server is actually started, not for every ``orchestrator`` command.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import os
import signal
import socket
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager
from typing import Any

from memory_orchestrator.adapters.sqlite import store_path as sqlite_store_path
from memory_orchestrator.entrypoints.config.bootstrap import build_plugins, open_runtime
from memory_orchestrator.entrypoints.config.settings import Settings
from memory_orchestrator.entrypoints.mcp.auth import TokenGrant, TokenRegistry
from memory_orchestrator.entrypoints.mcp.http_limits import HttpLimits
from memory_orchestrator.entrypoints.mcp.server import (
    build_server,
    configure_logging,
    serve_http,
    serve_stdio,
)
from memory_orchestrator.entrypoints.mcp.state import ServerOptions, StoreExists, StoreHandle, StoreOpener
from memory_orchestrator.entrypoints.mcp.store_listing import store_listing
from memory_orchestrator.entrypoints.mcp.tools import tool_specs
from memory_orchestrator.entrypoints.telemetry.observed_traces import LostTraces, TraceObserver
from memory_orchestrator.ports import OrchestratorError

#: What a first tool call imports that the start-up leaves out: ``serve`` (stdio) answers its first
#: messages without them (~60 ms of imports) and imports them ``WARM_UP_AFTER_S`` after it starts,
#: when a client is usually between its handshake and its first tool call (a call that comes sooner
#: imports what it needs itself). Over HTTP they are imported before serving, as before.
FIRST_CALL_MODULES = (
    "memory_orchestrator.domain.orchestrator",
    "memory_orchestrator.domain.read_cache",
    "memory_orchestrator.domain.sessions",
    "memory_orchestrator.domain.provenance",
    "memory_orchestrator.adapters.sqlite.trace_store",
)
WARM_UP_AFTER_S = 0.3


def warm_up(settings: Settings) -> None:
    """Import what the first tool call needs (the pipeline, the configured built-in backend's module,
    the trace store) and build the tools' input and output models; a module already imported or a
    model already built costs nothing."""
    backend = f"memory_orchestrator.adapters.{settings.backend.name}"
    for name in (*FIRST_CALL_MODULES, f"{backend}.backend"):
        try:
            importlib.import_module(name)
        except ImportError:  # a plugin's backend, or a driver not installed: the call will say so
            continue
    for spec in tool_specs():
        spec.input_model.model_rebuild()
        spec.output_model.model_rebuild()


def token_registry(settings: Settings) -> TokenRegistry:
    """The bearer tokens configured in ``[auth]``."""
    grants = (
        TokenGrant(
            name=token.name,
            sha256=token.sha256.get_secret_value().lower(),
            stores=tuple(token.stores),
            write=token.write,
        )
        for token in settings.auth.tokens
    )
    return TokenRegistry(grants)


def store_opener(
    settings: Settings, observer: TraceObserver | None = None, on_lost_traces: LostTraces | None = None
) -> StoreOpener:
    """Opens one runtime (backend + orchestrator) per store, sharing the loaded plugins; every saved
    trace goes to ``observer``, and the count of traces a failed write or drop lost to
    ``on_lost_traces`` (the metrics), if any."""
    plugins = build_plugins(settings)

    @asynccontextmanager
    async def open_store(store: str) -> AsyncIterator[StoreHandle]:
        opened = open_runtime(
            settings, plugins=plugins, store=store, observer=observer, on_lost_traces=on_lost_traces
        )
        async with opened as runtime:
            yield runtime

    return open_store


def store_exists(settings: Settings, default_store: str) -> StoreExists:
    """Whether a store exists without creating it: the default store always does (it is created on
    first use); a SQLite store is its file; other backends decide when they open (Mnemon refuses a
    missing store itself)."""
    name = settings.backend.name

    def exists(store: str) -> bool:
        if store == default_store or name != "sqlite":
            return True
        try:
            return sqlite_store_path(settings.backend_options("sqlite")["path"], store).exists()
        except OrchestratorError:
            return False

    return exists


def server_options(settings: Settings, *, default_store: str | None, http: bool) -> ServerOptions:
    """The server options the settings ask for."""
    return ServerOptions(
        default_store=default_store or settings.default_store,
        log_contents=settings.traces.verbosity == "full",
        session_tools=settings.features.session_tools,
        require_http_caller=http,
        read_timeout_s=settings.server.read_timeout_s,
        write_timeout_s=settings.server.write_timeout_s,
        concurrent_calls=settings.server.concurrent_calls,
    )


def run(
    settings: Settings,
    *,
    store: str | None,
    http: bool,
    host: str,
    port: int,
    started: Callable[[], None] | None = None,
) -> None:
    """Serve until interrupted (stdio, or streamable HTTP on ``host:port`` with ``/metrics``);
    ``started`` is called once the server is built, before it serves."""
    configure_logging(settings.log.level or "info")
    sys.setswitchinterval(settings.server.switch_interval_ms / 1000.0)  # see [server] switch_interval_ms
    if not http:
        options = server_options(settings, default_store=store, http=False)
        exists = store_exists(settings, options.default_store)
        server = build_server(store_opener(settings), options, exists=exists, listing=store_listing(settings))
        if started is not None:
            started()
        asyncio.run(serve_stdio(server, warm_up=lambda: warm_up(settings), warm_up_after_s=WARM_UP_AFTER_S))
        return
    with metrics_directory(settings.http.workers) as directory:
        serve_http_processes(
            settings, store=store, host=host, port=port, metrics_dir=directory, started=started
        )


@contextlib.contextmanager
def metrics_directory(workers: int) -> Iterator[str | None]:
    """With several worker processes, a fresh directory where each records its metrics (the
    Prometheus client's multiprocess mode, chosen when the library is first imported); removed at
    exit. A ``PROMETHEUS_MULTIPROC_DIR`` set by the operator is used as it is."""
    from memory_orchestrator.entrypoints.telemetry.metrics import MULTIPROCESS_ENV

    if workers == 1 or os.environ.get(MULTIPROCESS_ENV):
        yield os.environ.get(MULTIPROCESS_ENV) or None
        return
    with tempfile.TemporaryDirectory(prefix="orchestrator-metrics-") as directory:
        os.environ[MULTIPROCESS_ENV] = directory
        try:
            yield directory
        finally:
            os.environ.pop(MULTIPROCESS_ENV, None)


def serve_http_processes(
    settings: Settings,
    *,
    store: str | None,
    host: str,
    port: int,
    metrics_dir: str | None,
    started: Callable[[], None] | None = None,
) -> None:
    """Serve streamable HTTP (one process, or ``[http] workers`` forked ones) with ``/metrics``."""
    from memory_orchestrator.entrypoints.mcp.metrics_route import mount_metrics
    from memory_orchestrator.entrypoints.telemetry.metrics import Metrics

    metrics = Metrics(multiprocess_dir=metrics_dir)
    registry = token_registry(settings)
    options = dataclasses.replace(
        server_options(settings, default_store=store, http=True), on_call=metrics.observe_call
    )
    exists = store_exists(settings, options.default_store)
    opener = store_opener(settings, metrics.observe_trace, metrics.observe_lost_traces)
    server = build_server(opener, options, exists=exists, listing=store_listing(settings))
    mount_metrics(server, metrics)
    limits = HttpLimits(**settings.http.model_dump(exclude={"workers"}))
    warm_up(settings)
    if started is not None:
        started()
    sys.stderr.write(start_line(settings, registry, host=host, port=port) + "\n")
    sys.stderr.flush()
    if settings.http.workers == 1:
        run_event_loop(serve_http(server, registry, host=host, port=port, limits=limits))
        return
    listening = bind_socket(host, port)

    def serve_one() -> None:
        run_event_loop(serve_http(server, registry, host=host, port=port, limits=limits, sockets=[listening]))

    serve_forked(serve_one, settings.http.workers)


def run_event_loop(main: Coroutine[Any, Any, None]) -> None:
    """Run the HTTP server's ``main`` on uvloop when it is installed (a dependency on POSIX; it
    serves ~1.3x the calls per CPU second of the standard loop here), else on asyncio's own loop."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
        return
    uvloop.run(main)


def start_line(settings: Settings, registry: TokenRegistry, *, host: str, port: int) -> str:
    """The one line ``serve --http`` prints: where it listens and how callers are authenticated."""
    shown = f"[{host}]" if ":" in host else host
    count = len(settings.auth.tokens)
    auth = (
        f"bearer tokens ({count} configured; without one only the handshake and memory_health)"
        if registry
        else "no tokens: every caller is the local user (loopback only)"
    )
    workers = settings.http.workers
    processes = f", {workers} processes" if workers > 1 else ""
    return (
        f"orchestrator serve: MCP over streamable HTTP at http://{shown}:{port}/mcp; auth: {auth}{processes}"
    )


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket the worker processes share."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listening.bind((host, port))
    listening.listen(2048)
    listening.set_inheritable(True)
    return listening


def serve_forked(serve_one: Callable[[], None], workers: int) -> None:
    """Run ``serve_one`` in ``workers`` forked processes; this one only supervises them: SIGTERM or
    SIGINT here stops them all (a worker's server re-raises the signal when it stops, so the parent
    cannot be one of them and still clean up)."""

    def stop(_signum: int, _frame: object) -> None:
        raise SystemExit(0)

    previous = {number: signal.signal(number, stop) for number in (signal.SIGTERM, signal.SIGINT)}
    children: list[int] = []
    try:
        for _ in range(workers):
            pid = os.fork()
            if pid == 0:
                for number, handler in previous.items():
                    signal.signal(number, handler)
                try:
                    serve_one()
                finally:
                    os._exit(0)
            children.append(pid)
        while children:  # a worker that dies leaves the others serving
            pid, _status = os.wait()
            children.remove(pid)
    finally:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        for pid in children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
