"""Benchmarks on seeded synthetic corpora: latency of the orchestrator's operations and its overhead.

For each corpus size: ingest throughput; p50/p95 of ``memory_search`` (``Orchestrator.search`` without
expansion), ``memory_context`` (expanded, 2 hops, packed) and ``memory_write`` (``Orchestrator.write``);
the raw backend ``recall`` for comparison; the orchestrator's own overhead (wall time of a call minus
the time during which at least one backend call was in flight); peak RSS of the process.

Growth: with several sizes, ``memory_context`` is timed once more at the end on every size's store
(each kept open), the calls interleaved across the sizes (``interleave.py``) with queries none of
them has answered yet, so the p50 of each size and its ratio to the smallest size's are measured at
the same moments: a ratio of two sizes measured minutes apart moved with the machine as much as
with the store.

Start-up: before any store is built, ``orchestrator --version`` and ``orchestrator serve`` are
started a few times, beside the smallest server the MCP SDK makes (``startup.py``).

Repeat queries: the same ``memory_context`` call made again right away, by an orchestrator without a
read cache (``memory_context_repeat``: the pipeline runs again) and by one with the ``[cache]
reads_ttl_s`` cache (``memory_context_repeat_cached``: answered from memory, with a trace of its own).
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from memory_orchestrator.domain.config import PipelineConfig
from memory_orchestrator.domain.orchestrator import Orchestrator
from memory_orchestrator.domain.read_cache import ReadCache
from memory_orchestrator.domain.requests import (
    Budget,
    ContextRequest,
    PlanOverrides,
    SearchRequest,
    WriteRequest,
)
from memory_orchestrator.evaluation.datasets import Dataset, DatasetQuery, ingest, to_new_memory
from memory_orchestrator.evaluation.environment import versions
from memory_orchestrator.evaluation.interleave import Caller, interleaved
from memory_orchestrator.evaluation.metrics import Judgement, mean, percentile, recall_at_k
from memory_orchestrator.evaluation.runner import BackendMaker, RunProgress, SilentProgress
from memory_orchestrator.evaluation.summary import json_safe
from memory_orchestrator.evaluation.synthetic import new_memories, synthetic_dataset
from memory_orchestrator.ports import (
    BackendUnavailable,
    InvalidRequest,
    MemoryBackend,
    OrchestratorError,
    RecallQuery,
)

OPERATIONS = (
    "raw_recall",
    "memory_search",
    "memory_search_expanded",
    "memory_context",
    "memory_context_repeat",
    "memory_context_repeat_cached",
    "memory_write",
)
#: Time-to-live of the read cache of the ``memory_context_repeat_cached`` row (long: never expires
#: between a query and its repeat).
REPEAT_CACHE_TTL_S = 300.0


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """What one benchmark run measures."""

    backend: str = "sqlite"
    sizes: tuple[int, ...] = (1000, 10000)
    queries: int = 100
    writes: int = 50
    warmup: int = 3
    seed: int = 7
    top_k: int = 10
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    #: The size at which ``memory_search`` is also timed through MCP (stdio and streamable HTTP)
    #: and HTTP is loaded (SQLite only: a server process opens the same file); 0 = never.
    transport_size: int = 10000
    load_clients: tuple[int, ...] = (1, 10, 50, 200)
    load_seconds: float = 10.0
    #: Processes of the HTTP server under load (``[http] workers``).
    http_workers: int = 1
    #: Starts of ``orchestrator --version``, ``orchestrator serve`` and the MCP SDK's floor server,
    #: timed before any store is built (``startup.py``); 0 = never.
    start_runs: int = 9

    def __post_init__(self) -> None:
        if not self.sizes or any(size <= 0 for size in self.sizes):
            raise InvalidRequest("--sizes must be positive integers, e.g. 1000,10000")
        if self.queries <= 0 or self.writes < 0:
            raise InvalidRequest("--queries must be positive and --writes not negative")
        if self.start_runs < 0:
            raise InvalidRequest("--start-runs must not be negative")


class TimedBackend:
    """Wraps a backend and measures the wall time during which any of its calls is in flight.

    Overlapping calls (the orchestrator runs channels concurrently) count once, so ``busy_s`` never
    exceeds the wall time of the surrounding operation.
    """

    def __init__(self, backend: MemoryBackend) -> None:
        self._backend = backend
        self._in_flight = 0
        self._since = 0.0
        self.busy_s = 0.0
        self.calls = 0

    def reset(self) -> None:
        """Start a new measurement."""
        self.busy_s = 0.0
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._backend, name)
        if name.startswith("_") or name in {"open", "aclose"} or not callable(target):
            return target

        async def timed(*args: Any, **kwargs: Any) -> Any:
            self._enter()
            try:
                return await target(*args, **kwargs)
            finally:
                self._leave()

        return timed

    def _enter(self) -> None:
        if self._in_flight == 0:
            self._since = time.perf_counter()
        self._in_flight += 1
        self.calls += 1

    def _leave(self) -> None:
        self._in_flight -= 1
        if self._in_flight == 0:
            self.busy_s += time.perf_counter() - self._since


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def stats(values: Sequence[float]) -> dict[str, float]:
    """p50 / p95 / max / mean of milliseconds, plus the sample count."""
    return {
        "p50": percentile(values, 0.5),
        "p95": percentile(values, 0.95),
        "max": max(values, default=0.0),
        "mean": mean(values),
        "n": float(len(values)),
    }


def _errors(messages: Sequence[str]) -> dict[str, Any]:
    """How many calls failed, with the first few messages (a size's reads and writes, the growth rows)."""
    return {"count": len(messages), "examples": list(messages[:5])}


async def _timed_ms(call: Coroutine[Any, Any, Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = await call
    return (time.perf_counter() - started) * 1000.0, result


@dataclass(slots=True)
class _Samples:
    latency: dict[str, list[float]] = field(default_factory=lambda: {name: [] for name in OPERATIONS})
    overhead: dict[str, list[float]] = field(
        default_factory=lambda: {"memory_search": [], "memory_search_expanded": [], "memory_context": []}
    )
    recall: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


async def _measure_reads(
    dataset: Dataset,
    backend: MemoryBackend,
    timer: TimedBackend,
    orchestrator: Orchestrator,
    config: BenchConfig,
    progress: RunProgress,
) -> _Samples:
    samples = _Samples()
    cached = Orchestrator(orchestrator.backend, config=config.pipeline, cache=ReadCache(REPEAT_CACHE_TTL_S))
    for position, query in enumerate(dataset.queries):
        counted = position >= config.warmup
        progress.advance()
        raw_ms, _ = await _timed_ms(
            backend.recall(RecallQuery(query.query, limit=config.top_k, now=query.now))
        )
        search = SearchRequest(query.query, top_k=config.top_k, expand=False, now=query.now)
        context = _context_request(query, config)
        try:
            timer.reset()
            search_ms, result = await _timed_ms(orchestrator.search(search))
            search_busy = timer.busy_s * 1000.0
            timer.reset()
            expanded_ms, _ = await _timed_ms(orchestrator.search(replace(search, expand=True)))
            expanded_busy = timer.busy_s * 1000.0
            timer.reset()
            context_ms, _ = await _timed_ms(orchestrator.context(context))
            context_busy = timer.busy_s * 1000.0
            repeat_ms, _ = await _timed_ms(orchestrator.context(context))
            await cached.context(context)  # the first call fills the cache
            cached_ms, _ = await _timed_ms(cached.context(context))
        except OrchestratorError as exc:
            samples.errors.append(f"{query.id}: {type(exc).__name__}: {exc}")
            continue
        if not counted:
            continue
        samples.latency["raw_recall"].append(raw_ms)
        samples.latency["memory_search"].append(search_ms)
        samples.latency["memory_search_expanded"].append(expanded_ms)
        samples.latency["memory_context"].append(context_ms)
        samples.latency["memory_context_repeat"].append(repeat_ms)
        samples.latency["memory_context_repeat_cached"].append(cached_ms)
        samples.overhead["memory_search"].append(search_ms - search_busy)
        samples.overhead["memory_search_expanded"].append(expanded_ms - expanded_busy)
        samples.overhead["memory_context"].append(context_ms - context_busy)
        samples.recall.append(_recall(result.items, query.gold, dataset, config.top_k))
    return samples


def _context_request(query: DatasetQuery, config: BenchConfig) -> ContextRequest:
    """The ``memory_context`` call the bench times for ``query``: expanded (2 hops) and packed."""
    return ContextRequest(
        query.query, budget=Budget(max_items=config.top_k), now=query.now, overrides=PlanOverrides(hops=2)
    )


def _recall(items: Sequence[Any], gold: tuple[str, ...], dataset: Dataset, k: int) -> float:
    # synthetic gold ids are dataset ids; results carry backend ids, matched through the content
    wanted = {memory.content for memory in dataset.memories if memory.id in gold}
    return recall_at_k([item.content for item in items], Judgement(tuple(wanted)), k)


async def _measure_writes(orchestrator: Orchestrator, config: BenchConfig, samples: _Samples) -> None:
    # the first writes warm the write path's caches and are not counted, like the first queries
    for position, memory in enumerate(new_memories(config.writes + config.warmup, seed=config.seed)):
        request = WriteRequest(to_new_memory(memory, backdated=True))
        try:
            write_ms, _ = await _timed_ms(orchestrator.write(request))
        except OrchestratorError as exc:
            samples.errors.append(f"write {memory.id}: {type(exc).__name__}: {exc}")
            continue
        if position >= config.warmup:
            samples.latency["memory_write"].append(write_ms)


async def _measure_transports(
    size: int,
    backend: MemoryBackend,
    dataset: Dataset,
    config: BenchConfig,
    progress: RunProgress,
    make_backend: BackendMaker,
) -> dict[str, Any] | None:
    """``memory_search`` in process, over stdio and over HTTP (the same calls), then HTTP load."""
    store_file = getattr(backend, "path", None)
    if size != config.transport_size or backend.name != "sqlite" or not isinstance(store_file, Path):
        return None
    from memory_orchestrator.evaluation import transports  # the MCP client: only when measured

    calls: list[dict[str, Any]] = [
        {"query": query.query, "top_k": config.top_k, "expand": False} for query in dataset.queries
    ]
    progress.stage(f"MCP transports at {size}", 1 + len(config.load_clients))
    # Every path starts as cold as the others: the in-process calls go to a backend opened now on
    # the same file (the bench's own orchestrator has just run these queries), and each server is a
    # process of its own, so no path answers from another's cached reads. The calls are interleaved.
    async with AsyncExitStack() as paths:
        fresh = await paths.enter_async_context(make_backend(f"bench-{size}"))
        in_process = Orchestrator(fresh, config=config.pipeline)

        async def in_process_call(_position: int, arguments: dict[str, Any]) -> None:
            await in_process.search(SearchRequest(arguments["query"], top_k=arguments["top_k"], expand=False))

        bare_base = await paths.enter_async_context(transports.http_server(store_file))
        sdk_base = await paths.enter_async_context(transports.http_server(store_file))
        callers = {
            "in_process": in_process_call,
            "stdio": await paths.enter_async_context(transports.sdk_stdio(store_file)),
            "http": await paths.enter_async_context(transports.sdk_http(sdk_base)),
            # the same requests written and their answers read as bytes: without the SDK client's own
            # work on each answer
            "stdio_bare": await paths.enter_async_context(transports.bare_stdio(store_file)),
            "http_bare": await paths.enter_async_context(transports.bare_http(bare_base)),
        }
        times = await interleaved(callers, calls, config.warmup)
    progress.advance()
    levels = []
    async with transports.http_server(store_file, workers=config.http_workers) as base:
        for clients in config.load_clients:
            level = await transports.load(base, calls, clients=clients, seconds=config.load_seconds)
            levels.append({**level, "latency_ms": stats(level.pop("latencies"))})
            progress.advance()
    measured = {path: stats(values) for path, values in times.items()}
    base_p50 = measured["in_process"]["p50"]
    return {
        "http_workers": config.http_workers,
        "memory_search_ms": measured,
        "added_p50_ms": {
            path: round(cell["p50"] - base_p50, 3) for path, cell in measured.items() if path != "in_process"
        },
        "http_load": levels,
    }


@dataclass(frozen=True, slots=True)
class _Kept:
    """A measured size's store, kept open for the growth measurement, and queries it has not answered."""

    size: int
    orchestrator: Orchestrator
    unseen: tuple[DatasetQuery, ...]


async def bench_size(
    size: int,
    make_backend: BackendMaker,
    config: BenchConfig,
    progress: RunProgress,
    stores: AsyncExitStack,
) -> tuple[dict[str, Any], _Kept]:
    """Measure one corpus size in a fresh backend, which ``stores`` keeps open; returns its JSON-safe
    numbers and the store, with as many further queries, for :func:`_measure_growth`."""
    asked = config.queries + config.warmup
    # the dataset's queries are drawn one after the other: its first ``asked`` do not change
    dataset = synthetic_dataset(size, queries=2 * asked, seed=config.seed)
    unseen = dataset.queries[asked:]
    dataset = replace(dataset, queries=dataset.queries[:asked])
    backend = await stores.enter_async_context(make_backend(f"bench-{size}"))
    progress.stage(f"ingesting {size}", size)
    report = await ingest(backend, dataset, on_progress=lambda _done, _total: progress.advance())
    timer = TimedBackend(backend)
    orchestrator = Orchestrator(cast(MemoryBackend, timer), config=config.pipeline)
    progress.stage(f"querying {size}", len(dataset.queries))
    samples = await _measure_reads(dataset, backend, timer, orchestrator, config, progress)
    await _measure_writes(orchestrator, config, samples)
    health = await backend.health()
    transports = await _measure_transports(size, backend, dataset, config, progress, make_backend)
    kept = _Kept(size, Orchestrator(backend, config=config.pipeline), unseen)
    return {
        "size": size,
        "memories": report.written,
        "explicit_links": report.links,
        "backend_version": health.version,
        "ingest": {
            "seconds": report.seconds,
            "memories_per_s": report.written / report.seconds if report.seconds else 0.0,
            "backdated": report.backdated,
            "warnings": len(report.warnings),
        },
        "latency_ms": {name: stats(values) for name, values in samples.latency.items()},
        "overhead_ms": {name: stats(values) for name, values in samples.overhead.items()},
        "transports": transports,
        "search_recall@10": mean(samples.recall),
        "peak_rss_mb": peak_rss_mb(),
        "errors": _errors(samples.errors),
        "samples_ms": {
            name: [round(value, 3) for value in values] for name, values in samples.latency.items()
        },
    }, kept


async def _measure_growth(
    kept: Sequence[_Kept], config: BenchConfig, progress: RunProgress
) -> dict[str, Any]:
    """``memory_context`` on every kept store, the calls interleaved across sizes, each store with
    queries it has not answered; each size's latency and its p50 over the smallest size's."""
    progress.stage("memory_context growth", 1)
    errors: list[str] = []

    def caller(store: _Kept) -> Caller:
        async def call(position: int, _arguments: dict[str, Any]) -> None:
            query = store.unseen[position]
            try:
                await store.orchestrator.context(_context_request(query, config))
            except OrchestratorError as exc:
                errors.append(f"{store.size} {query.id}: {type(exc).__name__}: {exc}")

        return call

    calls: list[dict[str, Any]] = [{} for _ in kept[0].unseen]
    times = await interleaved({str(store.size): caller(store) for store in kept}, calls, config.warmup)
    progress.advance()
    cells = {size: stats(values) for size, values in times.items()}
    smallest = cells[str(kept[0].size)]["p50"]
    return {
        "memory_context_ms": cells,
        "p50_over_smallest": {
            size: round(cell["p50"] / smallest, 3) if smallest else 0.0 for size, cell in cells.items()
        },
        "errors": _errors(errors),
    }


async def run_bench(
    config: BenchConfig,
    make_backend: BackendMaker,
    *,
    progress: RunProgress | None = None,
    on_size: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Benchmark every size (ascending) and return the whole JSON-safe document."""
    progress = progress or SilentProgress()
    started = time.time()
    environment = versions()
    start = await _measure_start(config, progress) if config.start_runs else None
    results = []
    kept: list[_Kept] = []
    async with AsyncExitStack() as stores:
        for size in sorted(config.sizes):
            result, store = await bench_size(size, make_backend, config, progress, stores)
            results.append(result)
            kept.append(store)
            if on_size is not None:
                on_size(results[-1])
        growth = await _measure_growth(kept, config, progress) if len(kept) > 1 else None
    return {
        "meta": {"backend": config.backend, "versions": environment, "duration_s": time.time() - started},
        "config": json_safe(config),
        "start": start,
        "sizes": results,
        "growth": growth,
    }


async def _measure_start(config: BenchConfig, progress: RunProgress) -> dict[str, Any]:
    """Start-up times (``startup.py``), or why they could not be measured (the bench goes on)."""
    from memory_orchestrator.evaluation import startup

    progress.stage("start-up", 1)
    try:
        return await startup.start_times(config.start_runs, startup.orchestrator_command())
    except BackendUnavailable as exc:
        return {"runs": config.start_runs, "error": str(exc)}
    finally:
        progress.advance()
