"""The Orchestrator: the one object the MCP server, the CLI and the evaluation talk to.

Read calls (search, context, expand, explain, replay) never raise for backend failures: they return
what is available with explicit warnings, also written to the trace. Invalid input raises
``InvalidRequest`` before anything happens. The caller opens and closes the backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from memory_orchestrator.domain.config import PipelineConfig
from memory_orchestrator.domain.deadlines import within
from memory_orchestrator.domain.entity_names import KnownEntities
from memory_orchestrator.domain.graph_walks import run_expand
from memory_orchestrator.domain.packaging import pack, summarise
from memory_orchestrator.domain.pipeline import PipelineInput, PipelineRun, run_pipeline
from memory_orchestrator.domain.planner import canonicalise
from memory_orchestrator.domain.read_cache import CachedRead, Flight, ReadCache, cache_key
from memory_orchestrator.domain.request_validation import (
    check_context,
    check_expand,
    check_search,
    check_write,
)
from memory_orchestrator.domain.requests import (
    ContextRequest,
    ExpandRequest,
    SearchRequest,
    WriteRequest,
)
from memory_orchestrator.domain.results import (
    ContextResult,
    ExpandResult,
    QueryPlan,
    ReplayResult,
    ResultItem,
    SearchResult,
    WriteOutcome,
)
from memory_orchestrator.domain.trace import InProcessTraceStore, Trace
from memory_orchestrator.domain.write_path import run_write
from memory_orchestrator.ports import (
    Clock,
    Intent,
    InvalidRequest,
    MemoryBackend,
    NotFound,
    RecallQuery,
    RetrievalChannel,
    Scorer,
    SystemClock,
    TraceStore,
    ensure_utc,
)

DEFAULT_CONFIG = PipelineConfig()
#: Trace documents kept in process after saving (see ``Orchestrator.trace``).
RECENT_TRACES = 32
#: Expired answers refreshed in the background at once at most (see ``Orchestrator._cached``).
MAX_REFRESHES = 4
PASSTHROUGH_REASON = "passthrough: backend recall"
REPLAYABLE = ("search", "context")
#: A read result (search, context, expand): frozen, with a ``trace_id``.
R = TypeVar("R", SearchResult, ContextResult, ExpandResult)


class Orchestrator:
    """Plans, retrieves, expands, ranks, dedups and packs memories from one backend, with traces."""

    def __init__(
        self,
        backend: MemoryBackend,
        *,
        config: PipelineConfig = DEFAULT_CONFIG,
        scorers: Sequence[Scorer] = (),
        clock: Clock | None = None,
        traces: TraceStore | None = None,
        channels: Sequence[RetrievalChannel] = (),
        cache: ReadCache | None = None,
    ) -> None:
        self.backend = backend
        #: Answers of identical reads within the cache's TTL; ``None`` or TTL 0: every read runs.
        self.cache = cache if cache is not None and cache.enabled else None
        self.config = config
        self.scorers = tuple(scorers)
        #: Plugin retrieval channels fused with the backend's own (``[channels]`` in settings).
        self.channels = tuple(channels)
        self.clock: Clock = clock or SystemClock()
        self.traces: TraceStore = traces or InProcessTraceStore(config.trace_retention)
        #: Refreshes of expired answers under way (``_cached``), kept so they are not collected.
        self._refreshes: set[asyncio.Task[None]] = set()
        #: The newest trace documents as saved, so reading a trace just written (the MCP layer does,
        #: for its log) costs no round trip to the trace store.
        self._recent_traces: OrderedDict[str, dict[str, Any]] = OrderedDict()
        #: The store's entity names, for the planner and for resolving requested names.
        self._entities = KnownEntities(
            backend, ttl_s=config.known_entities_ttl_s, timeout_s=config.stage_timeout_s
        )

    async def search(self, request: SearchRequest) -> SearchResult:
        """Ranked, explained memories for ``request.query`` (from the read cache when fresh)."""
        return await self._cached("search", request.to_dict(), self._search_result, request)

    async def _search_result(self, request: SearchRequest, cache_state: str | None) -> SearchResult:
        result, _ = await self._search(request, cache_state)
        return result

    async def context(self, request: ContextRequest) -> ContextResult:
        """A context block for ``request.query`` that fits ``request.budget`` (cached when fresh)."""
        check_context(request, self.config)
        return await self._cached("context", request.to_dict(), self._context, request)

    async def _context(self, request: ContextRequest, cache_state: str | None) -> ContextResult:
        budget = request.budget
        keep = min(self.config.max_top_k, max(2 * budget.max_items, budget.max_items + 5))
        search = request.as_search()
        trace = self._trace("context", request.to_dict(), cache_state)
        run = await self._read(search, keep, trace)
        with trace.timed("packaging"):
            packed = pack(
                run.items,
                run.plan,
                budget,
                chars_per_token=self.config.chars_per_token,
                max_item_chars=self.config.max_item_chars,
                group_by=request.group_by,
                task=request.task,
            )
        for memory_id in packed.cut:
            trace.drop(memory_id, "budget", "packaging")
        trace.record("packaging", grouping=packed.grouping, chars=packed.chars, est_tokens=packed.est_tokens)
        trace.result_ids = [item.memory_id for item in packed.items]
        warnings = await self._save(trace)
        return ContextResult(
            query=request.query,
            plan=run.plan,
            strategy=run.plan.strategy,
            summary=summarise(packed.items, run.plan),
            items=packed.items,
            context_block=packed.context_block,
            trace_id=trace.trace_id,
            chars=packed.chars,
            est_tokens=packed.est_tokens,
            cut=packed.cut,
            warnings=warnings,
        )

    async def expand(self, request: ExpandRequest) -> ExpandResult:
        """Memories reached over the graph from the seed memories or seed entities (cached when fresh)."""
        check_expand(request, self.config)
        return await self._cached("expand", _expand_document(request), self._expand, request)

    async def _expand(self, request: ExpandRequest, cache_state: str | None) -> ExpandResult:
        trace = self._trace("expand", _expand_document(request), cache_state)
        now = self._now(request.now)
        entities = await self._resolved(request.seed_entities, "seed_entities", trace)
        request = dataclasses.replace(request, seed_entities=entities)
        try:
            seeds, items = await run_expand(self.backend, request, now=now, config=self.config, trace=trace)
        except NotFound as exc:  # nothing to walk from: say which names were not known, and what is
            raise NotFound("; ".join([str(exc), *trace.warnings])) from None
        trace.result_ids = [item.memory_id for item in items]
        warnings = await self._save(trace)
        return ExpandResult(seeds=seeds, items=tuple(items), trace_id=trace.trace_id, warnings=warnings)

    async def write(self, request: WriteRequest) -> WriteOutcome:
        """Store a memory through the write path (dedup, contradictions, supersession, links)."""
        check_write(request)
        trace = self._trace("write", {"content": request.memory.content[:200], "replace": request.replace})
        known = await self._known_entities(trace)
        try:
            outcome = await run_write(
                self.backend, request, config=self.config, known_entities=known, trace=trace
            )
        finally:
            if self.cache is not None:  # even a failed write may have changed the store
                self.cache.invalidate()
        self._entities.invalidate()  # the write may have introduced names the planner should know
        warnings = await self._save(trace)
        return WriteOutcome(
            id=outcome.id,
            action=outcome.action,
            duplicate_of=outcome.duplicate_of,
            candidates=outcome.candidates,
            links_created=outcome.links_created,
            superseded=outcome.superseded,
            trace_id=trace.trace_id,
            warnings=warnings,
        )

    async def explain(self, request: SearchRequest) -> dict[str, Any]:
        """Run the query and return its full trace document (with the result)."""
        result, trace = await self._search(request)
        document = trace.to_dict()
        document["result"] = result.to_dict()
        return document

    async def trace(self, trace_id: str) -> dict[str, Any]:
        """The stored trace document; ``NotFound`` when unknown or pruned."""
        recent = self._recent_traces.get(trace_id)
        if recent is not None:
            return dict(recent)
        document = await self.traces.load(trace_id)
        if document is None:
            raise NotFound(f"trace {trace_id} not found (unknown or pruned)")
        return dict(document)

    async def replay(self, trace_id: str) -> ReplayResult:
        """Run a stored search or context request again and compare the memory ids it returns."""
        document = await self.trace(trace_id)
        operation = document.get("operation")
        if operation not in REPLAYABLE:
            raise InvalidRequest(f"trace {trace_id} records a {operation}; only search and context replay")
        stored: Mapping[str, Any] = document.get("request") or {}
        request = SearchRequest.from_dict(stored)
        if operation == "context":
            budget = stored.get("budget") or {}
            request = SearchRequest.from_dict({**stored, "top_k": budget.get("max_items", 10)})
        result, _ = await self._search(request)  # replay compares with the store as it is now
        original = tuple(document.get("result_ids") or ())
        current = tuple(item.memory_id for item in result.items)
        return ReplayResult(
            trace_id=trace_id,
            original_ids=original,
            current_ids=current,
            added=tuple(memory_id for memory_id in current if memory_id not in original),
            removed=tuple(memory_id for memory_id in original if memory_id not in current),
            result=result,
        )

    # -- internals ------------------------------------------------------------------------------

    async def _cached(
        self,
        operation: str,
        document: dict[str, Any],
        compute: Callable[[Any, str | None], Awaitable[R]],
        request: Any,
    ) -> R:
        """``compute(request)``, or the answer of the same request made within the cache's TTL, or
        the answer of the same request being computed right now."""
        cache = self.cache
        if cache is None:
            return await compute(request, None)
        key = cache_key(operation, document)
        hit = cache.get(key)
        # Expired, but the (watched) store has not changed: served as it is while one read refreshes
        # it in the background, so that many answers expiring together under load hold no reader.
        if hit is None and (hit := cache.stale(key)) is not None and cache.flight(key) is None:
            self._refresh(key, compute, request)
        # The same read under way: wait for its answer. If it fails (or its caller gave up), the
        # first of those waiting computes it and the others wait for that one.
        while hit is None and (flight := cache.flight(key)) is not None:
            value = await asyncio.shield(flight.answer)
            if value is not None:
                cache.shared += 1
                hit = CachedRead(value, value.trace_id, 0.0, shared=True)
        if hit is not None:
            cached: R = await self._from_cache(operation, document, hit, cache.ttl_s)
            return cached
        return await _flown(cache, cache.start(key), compute, request)

    def _refresh(self, key: str, compute: Callable[[Any, str | None], Awaitable[Any]], request: Any) -> None:
        """Compute ``request`` again in the background, as the computation identical reads share
        and keep (``ReadCache.start``/``finish``); at most ``MAX_REFRESHES`` at once (past that the
        stale answer is served until a read finds it too old and computes it itself)."""
        cache = self.cache
        if cache is None or len(self._refreshes) >= MAX_REFRESHES:
            return
        flight = cache.start(key)  # now, so the reads that come before the task runs see it

        async def refresh() -> None:
            # a failure keeps nothing: the next read past the stale window computes it (and reports it)
            with contextlib.suppress(Exception):
                await _flown(cache, flight, compute, request)

        # a context of its own: not the request's (its log lines' request id, its reserved trace id)
        task = asyncio.get_running_loop().create_task(refresh(), context=contextvars.Context())
        self._refreshes.add(task)
        task.add_done_callback(self._refreshes.discard)

    async def _from_cache(
        self, operation: str, document: dict[str, Any], hit: CachedRead, ttl_s: float
    ) -> Any:
        """A cached (or shared) answer under a trace of its own that says where the answer came from."""
        started = time.perf_counter()
        trace = self._trace(operation, document)
        flags = {"shared": True} if hit.shared else {"stale": True} if hit.stale else {}
        trace.record(
            "cache", hit=True, answer_of=hit.trace_id, age_s=round(hit.age_s, 3), ttl_s=ttl_s, **flags
        )
        trace.result_ids = [item.memory_id for item in hit.value.items]
        trace.timings_ms["cache"] = round((time.perf_counter() - started) * 1000, 3)
        for warning in hit.value.warnings:
            trace.warn(warning)
        warnings = await self._save(trace)
        return dataclasses.replace(hit.value, trace_id=trace.trace_id, warnings=warnings)

    async def _search(
        self, request: SearchRequest, cache_state: str | None = None
    ) -> tuple[SearchResult, Trace]:
        check_search(request, self.config)
        trace = self._trace("search", request.to_dict(), cache_state)
        run = await self._read(request, request.top_k, trace)
        warnings = await self._save(trace)
        result = SearchResult(
            query=request.query,
            plan=run.plan,
            items=tuple(run.items),
            summary=summarise(run.items, run.plan),
            trace_id=trace.trace_id,
            warnings=warnings,
        )
        return result, trace

    async def _read(self, request: SearchRequest, keep: int, trace: Trace) -> PipelineRun:
        now = self._now(request.now)
        trace.record("request", now=now.isoformat())
        if request.filters.entities:
            entities = await self._resolved(request.filters.entities, "filters.entities", trace)
            request = dataclasses.replace(
                request, filters=dataclasses.replace(request.filters, entities=entities)
            )
        if self.config.passthrough:
            return await self._passthrough(request, keep, now, trace)
        known = await self._known_entities(trace)
        pipeline_input = PipelineInput(
            query=request.query,
            now=now,
            keep=keep,
            task=request.task,
            conversation=request.conversation,
            filters=request.filters,
            expand=request.expand,
            overrides=request.overrides,
        )
        return await run_pipeline(
            self.backend,
            pipeline_input,
            config=self.config,
            scorers=self.scorers,
            known_entities=known,
            trace=trace,
            channels=self.channels,
        )

    async def _passthrough(
        self, request: SearchRequest, keep: int, now: datetime, trace: Trace
    ) -> PipelineRun:
        plan = QueryPlan(
            query=request.query,
            canonical=canonicalise(request.query),
            subqueries=(),
            intent=Intent.GENERAL,
            intent_cues=(),
            entities=(),
            time_window=None,
            strategy="passthrough",
            hops=0,
            confidence=1.0,
        )
        trace.set_plan(plan)
        query = RecallQuery(text=request.query, limit=keep, filters=request.filters, now=now)
        try:
            with trace.timed("recall"):
                hits = await within(self.backend.recall(query), self.config.stage_timeout_s)
        except Exception as exc:  # the read path degrades, it does not raise
            trace.warn(f"backend recall failed ({type(exc).__name__}); no results")
            hits = []
        items = [
            ResultItem(
                memory_id=hit.record.id,
                content=hit.record.content,
                summary=canonicalise(hit.record.content)[:160],
                score=round(hit.score, 6),
                signals=dict(hit.signals),
                reasons=(PASSTHROUGH_REASON,),
                entities=hit.record.entities,
                category=hit.record.category,
                source=hit.record.source,
                created_at=hit.record.created_at,
                channels=(hit.via,),
                superseded=bool(hit.record.superseded_by),
                superseded_by=hit.record.superseded_by,
            )
            for hit in hits[:keep]
        ]
        trace.result_ids = [item.memory_id for item in items]
        return PipelineRun(plan, items, list(trace.warnings))

    async def _known_entities(self, trace: Trace) -> list[str]:
        return await self._entities.names(trace) or []

    async def _resolved(self, names: tuple[str, ...], field: str, trace: Trace) -> tuple[str, ...]:
        return await self._entities.resolve(names, field, trace)

    def _trace(self, operation: str, request: Mapping[str, Any], cache_state: str | None = None) -> Trace:
        trace = Trace(
            operation,
            request,
            created_at=ensure_utc(self.clock.now()),
            verbosity=self.config.trace_verbosity,
        )
        if cache_state == "miss":
            trace.record("cache", hit=False)
        return trace

    async def _save(self, trace: Trace) -> tuple[str, ...]:
        document = trace.to_dict()
        try:
            await self.traces.save(trace.trace_id, trace.created_at, document)
        except Exception as exc:  # losing a trace must not lose the answer
            trace.warn(f"trace {trace.trace_id} could not be stored ({type(exc).__name__})")
            return tuple(trace.warnings)
        self._recent_traces[trace.trace_id] = document
        while len(self._recent_traces) > min(RECENT_TRACES, self.config.trace_retention):
            self._recent_traces.popitem(last=False)
        return tuple(trace.warnings)

    def _now(self, moment: datetime | None) -> datetime:
        return ensure_utc(moment) if moment is not None else ensure_utc(self.clock.now())


async def _flown(
    cache: ReadCache, flight: Flight, compute: Callable[[Any, str | None], Awaitable[R]], request: Any
) -> R:
    """``compute(request)`` as the computation ``flight`` stands for: its answer goes to the reads
    waiting for it and is kept; a failure hands them nothing (the first of them computes it again)."""
    try:
        result = await compute(request, "miss")
    except BaseException:
        cache.finish(flight, None, None)
        raise
    # A degraded answer (a channel failed or timed out, a fallback was used) is shared with the
    # reads waiting for it but not kept: the next read must see the store once it has recovered.
    cache.finish(flight, result, None if result.warnings else result.trace_id)
    return result


def _expand_document(request: ExpandRequest) -> dict[str, Any]:
    return {
        "seeds": list(request.seeds),
        "seed_entities": list(request.seed_entities),
        "edge_types": None if request.edge_types is None else [kind.value for kind in request.edge_types],
        "hops": request.hops,
        "limit": request.limit,
        "intent": request.intent.value,
    }
