"""Composition root: settings -> plugins -> backend -> scorers -> trace store -> Orchestrator.

The CLI, the MCP server and the evaluation harness all start here, so one configuration gives the
same pipeline everywhere. Nothing is opened before :func:`open_runtime` is entered.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memory_orchestrator.domain.trace import InProcessTraceStore
from memory_orchestrator.entrypoints.config.settings import Settings
from memory_orchestrator.entrypoints.telemetry.observed_traces import (
    LostTraces,
    ObservedTraceStore,
    TraceObserver,
)
from memory_orchestrator.plugins.manager import PluginManager, load_plugins
from memory_orchestrator.ports import (
    BackendUnavailable,
    MemoryBackend,
    PluginError,
    RetrievalChannel,
    Scorer,
    TraceStore,
    VersionedStore,
)
from memory_orchestrator.ports.notifying import NotifyingBackend
from memory_orchestrator.ports.retrying import RetryingBackend, RetryPolicy

if TYPE_CHECKING:
    from memory_orchestrator.domain.orchestrator import Orchestrator
    from memory_orchestrator.domain.read_cache import ReadCache

# The pipeline (domain.orchestrator), the SQLite trace store and the read cache are imported where a
# runtime is built, not with this module: the MCP server imports it to start and answers its first
# message sooner without them (``mcp.launch.warm_up`` imports them soon after).

LOG = logging.getLogger("memory_orchestrator")


@dataclass(frozen=True, slots=True)
class Runtime:
    """Everything one process needs, opened together and closed together."""

    backend: MemoryBackend
    orchestrator: Orchestrator
    settings: Settings
    plugins: PluginManager
    scorers: tuple[Scorer, ...] = ()
    traces: TraceStore | None = None
    channels: tuple[RetrievalChannel, ...] = ()


def build_plugins(settings: Settings, *, check: bool = True) -> PluginManager:
    """Load the installed plugins allowed by the settings (``check``: fail on a misspelt hook)."""
    return load_plugins(allow=settings.plugins.allow, check=check)


def build_backend(
    settings: Settings, plugins: PluginManager, *, name: str | None = None, store: str | None = None
) -> MemoryBackend:
    """An unopened backend from the factory its plugin registered; ``store`` overrides the namespace.

    With ``retry.attempts > 1`` reads that fail with ``BackendUnavailable`` are retried.
    """
    backend_name = name or settings.backend.name
    options = settings.backend_options(backend_name)
    if store is not None:
        options["store"] = store
    backend = plugins.create_backend(backend_name, options)
    retry = settings.retry
    if retry.attempts <= 1:
        return backend
    policy = RetryPolicy(
        attempts=retry.attempts, backoff_s=retry.backoff_s, max_backoff_s=retry.max_backoff_s
    )
    return RetryingBackend(backend, policy)


def build_scorers(settings: Settings, plugins: PluginManager) -> tuple[Scorer, ...]:
    """The enabled plugin scorers (every registered one unless ``scorers.enabled`` lists them)."""
    names = settings.scorers.enabled
    if names is None:
        names = sorted(plugins.scorers)
    unknown = sorted(set(settings.scorers.options) - set(plugins.scorers))
    if unknown:
        raise PluginError(
            f"options given for unregistered scorer(s): {', '.join(unknown)} "
            f"(registered: {', '.join(sorted(plugins.scorers)) or 'none'})"
        )
    return tuple(plugins.create_scorer(name, settings.scorers.options.get(name, {})) for name in names)


def build_channels(settings: Settings, plugins: PluginManager) -> tuple[RetrievalChannel, ...]:
    """The plugin retrieval channels ``channels.enabled`` names (none by default)."""
    section = settings.channels
    named = set(section.enabled) | set(section.options) | set(section.weights)
    unknown = sorted(named - set(plugins.channels))
    if unknown:
        raise PluginError(
            f"unregistered channel(s) in [channels]: {', '.join(unknown)} "
            f"(registered: {', '.join(sorted(plugins.channels)) or 'none'})"
        )
    return tuple(plugins.create_channel(name, section.options.get(name, {})) for name in section.enabled)


def build_trace_store(settings: Settings, *, on_lost: LostTraces | None = None) -> TraceStore | None:
    """The persistent trace store next to the data, or ``None`` when traces are not stored;
    ``on_lost`` is told how many traces each of its failed writes or drops lost."""
    if not settings.features.store_traces or settings.traces.retention == 0:
        return None
    from memory_orchestrator.adapters.sqlite.trace_store import SqliteTraceStore

    return SqliteTraceStore(settings.trace_path(), retention=settings.traces.retention, on_lost=on_lost)


def build_orchestrator(
    settings: Settings,
    backend: MemoryBackend,
    scorers: tuple[Scorer, ...],
    traces: TraceStore | None,
    channels: tuple[RetrievalChannel, ...] = (),
    cache: ReadCache | None = None,
) -> Orchestrator:
    """The domain Orchestrator wired with the configured pipeline."""
    from memory_orchestrator.domain.orchestrator import Orchestrator

    config = settings.pipeline_config()
    return Orchestrator(
        backend, config=config, scorers=scorers, traces=traces, channels=channels, cache=cache
    )


def build_read_cache(settings: Settings) -> ReadCache | None:
    """The read cache ``[cache] reads_ttl_s`` asks for (``None`` when 0)."""
    section = settings.cache
    if section.reads_ttl_s <= 0:
        return None
    from memory_orchestrator.domain.read_cache import ReadCache

    return ReadCache(section.reads_ttl_s, max_entries=section.reads_max_entries)


def observed_traces(
    settings: Settings, traces: TraceStore | None, store: str, observer: TraceObserver | None
) -> TraceStore:
    """The trace store the Orchestrator saves into: every trace names ``store`` and reaches
    ``observer``; traces stay in process when none are stored."""
    inner = traces if traces is not None else InProcessTraceStore(settings.traces.retention)
    return ObservedTraceStore(inner, store, observer)


@contextlib.asynccontextmanager
async def open_backend(
    settings: Settings,
    plugins: PluginManager | None = None,
    *,
    name: str | None = None,
    store: str | None = None,
) -> AsyncIterator[MemoryBackend]:
    """Open the configured backend alone (raw commands that do not need the pipeline)."""
    plugins = plugins or build_plugins(settings)
    backend = build_backend(settings, plugins, name=name, store=store)
    async with backend:
        yield backend


@contextlib.asynccontextmanager
async def open_runtime(
    settings: Settings,
    *,
    plugins: PluginManager | None = None,
    store: str | None = None,
    observer: TraceObserver | None = None,
    on_lost_traces: LostTraces | None = None,
) -> AsyncIterator[Runtime]:
    """Open backend and trace store, build the Orchestrator, close everything on exit.

    Every saved trace names its store and is handed to ``observer`` (the server's metrics), if any;
    ``on_lost_traces`` is told how many traces each failed write or drop of the trace store lost.
    """
    plugins = plugins or build_plugins(settings)
    scorers = build_scorers(settings, plugins)
    channels = build_channels(settings, plugins)
    traces = build_trace_store(settings, on_lost=on_lost_traces)
    async with contextlib.AsyncExitStack() as stack:
        backend = await stack.enter_async_context(open_backend(settings, plugins, store=store))
        if traces is not None:
            try:
                await traces.open()
                stack.push_async_callback(traces.aclose)
            except BackendUnavailable as exc:
                # A read-only data folder: the store still answers reads; traces stay in process.
                LOG.warning("trace store unavailable (%s); traces are kept in memory only", exc)
                traces = None
        cache = build_read_cache(settings)
        if cache is not None:  # every write through this runtime clears the store's cached reads
            if isinstance(backend, VersionedStore):  # ... and a write by anyone else is seen too
                cache.watch(backend.store_version)
            backend = NotifyingBackend(backend, cache.invalidate)
        observed = observed_traces(settings, traces, store or settings.store_name(), observer)
        orchestrator = build_orchestrator(settings, backend, scorers, observed, channels, cache)
        yield Runtime(
            backend=backend,
            orchestrator=orchestrator,
            settings=settings,
            plugins=plugins,
            scorers=scorers,
            traces=traces,
            channels=channels,
        )
