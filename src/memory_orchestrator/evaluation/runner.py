"""The evaluation run: every store into a fresh backend, every query in every mode, plus BM25.

Modes:

- ``raw``: the backend's own ``recall`` (what an agent gets without the orchestrator);
- ``keyword``: the backend's keyword ``search`` alone (its lexical channel, a second reference);
- ``orchestrated``: ``Orchestrator.search`` without graph expansion;
- ``expanded``: ``Orchestrator.search`` with expansion;
- ``context``: ``Orchestrator.context`` under a token budget: how much gold evidence survives packing;
- ``bm25``: the ``bm25s`` baseline over the same corpus, always computed;
- ``orchestrated+NAME`` / ``expanded+NAME``: the same two modes with the plugin retrieval channels
  of ``EvalConfig.channels`` fused in (a dense channel, say), so one report shows them on and off.

Every query runs "as of" its ``now``. The runner knows nothing of settings or plugins: the caller
passes a ``BackendMaker`` that builds a fresh, unopened backend per store (the CLI builds it through the
plugin registry), which keeps the evaluation layer free of the entrypoints.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from memory_orchestrator.domain.config import PipelineConfig
from memory_orchestrator.domain.orchestrator import Orchestrator
from memory_orchestrator.domain.requests import Budget, ContextRequest, SearchRequest
from memory_orchestrator.domain.results import ResultItem
from memory_orchestrator.evaluation.baseline import Bm25Baseline
from memory_orchestrator.evaluation.datasets import Dataset, DatasetQuery, IngestReport, ingest
from memory_orchestrator.evaluation.environment import versions
from memory_orchestrator.evaluation.metrics import Judgement, evidence_kept, query_metrics
from memory_orchestrator.evaluation.modes import MODES
from memory_orchestrator.ports import (
    Hit,
    InvalidRequest,
    MemoryBackend,
    OrchestratorError,
    RecallQuery,
    RetrievalChannel,
    Scorer,
)
from memory_orchestrator.ports.text import content_hash

BASELINE = "bm25"
DEFAULT_KS = (5, 10, 25)

#: Builds a fresh, unopened backend for the store named by the argument.
BackendMaker = Callable[[str], MemoryBackend]


class RunProgress(Protocol):
    """Where the runner reports progress (a rich progress bar in the CLI, nothing in tests)."""

    def stage(self, description: str, total: int) -> None:
        """A new stage begins with ``total`` steps."""

    def advance(self, steps: int = 1) -> None:
        """``steps`` more steps of the current stage are done."""


class SilentProgress:
    """Progress that goes nowhere."""

    def stage(self, description: str, total: int) -> None:
        """Ignore."""

    def advance(self, steps: int = 1) -> None:
        """Ignore."""


@dataclass(frozen=True, slots=True)
class EvalConfig:
    """What one evaluation run does."""

    backend: str = "memory"
    modes: tuple[str, ...] = MODES
    ks: tuple[int, ...] = DEFAULT_KS
    budget_tokens: int | None = 1500
    #: Run only the first N queries of each store (``None``: all of them).
    query_limit: int | None = None
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    #: Plugin retrieval channels evaluated as extra modes (``expanded+dense`` ...).
    channels: tuple[str, ...] = ()

    @property
    def channel_modes(self) -> tuple[str, ...]:
        """The extra modes the channels add: ``orchestrated+NAMES`` and ``expanded+NAMES``."""
        if not self.channels:
            return ()
        label = "+".join(self.channels)
        return tuple(f"{mode}+{label}" for mode in ("orchestrated", "expanded") if mode in self.modes)

    def __post_init__(self) -> None:
        unknown = [mode for mode in self.modes if mode not in MODES]
        if unknown:
            raise InvalidRequest(
                f"unknown mode(s) {', '.join(unknown)}: choose from {', '.join(MODES)} or all"
            )
        if not self.ks or any(k <= 0 for k in self.ks):
            raise InvalidRequest("k values must be positive integers, e.g. 5,10,25")
        if self.budget_tokens is not None and self.budget_tokens <= 0:
            raise InvalidRequest("--budget-tokens must be positive")

    @property
    def max_k(self) -> int:
        """The deepest cut-off: every mode retrieves this many items."""
        return max(self.ks)


@dataclass(slots=True)
class ModeOutcome:
    """One query in one mode: what came back (as dataset ids), its metrics and its latency."""

    ranked: list[list[str]]
    metrics: dict[str, float]
    latency_ms: float
    duplicate_keys: list[str] = field(default_factory=list)
    extra: dict[str, float] = field(default_factory=dict)
    error: str | None = None


@dataclass(slots=True)
class QueryOutcome:
    """One query across every mode."""

    store: str
    query_id: str
    gold: int
    slices: dict[str, str]
    modes: dict[str, ModeOutcome] = field(default_factory=dict)
    must_not: int = 0


@dataclass(slots=True)
class StoreRun:
    """One store: its ingestion and its queries."""

    name: str
    memories: int
    ingest: IngestReport
    backend_version: str = ""
    queries: list[QueryOutcome] = field(default_factory=list)
    #: Per channel: memories embedded after ingestion and the seconds it took.
    channel_index: dict[str, dict[str, float]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


@dataclass(slots=True)
class EvalRun:
    """A whole run, ready for :mod:`memory_orchestrator.evaluation.reports`."""

    config: EvalConfig
    dataset: str
    started_at: datetime
    stores: list[StoreRun] = field(default_factory=list)
    finished_at: datetime | None = None
    #: Taken when the run starts, so the commit is the one whose code ran.
    versions: dict[str, str] = field(default_factory=dict)


async def run_evaluation(
    datasets: Sequence[Dataset],
    make_backend: BackendMaker,
    config: EvalConfig,
    *,
    label: str = "dataset",
    scorers: Sequence[Scorer] = (),
    progress: RunProgress | None = None,
    channels: Sequence[RetrievalChannel] = (),
) -> EvalRun:
    """Evaluate every store of ``datasets`` in a fresh backend each; returns the raw outcomes."""
    progress = progress or SilentProgress()
    if tuple(channel.name for channel in channels) != config.channels:
        raise InvalidRequest("the channels passed must be the ones EvalConfig.channels names")
    run = EvalRun(config=config, dataset=label, started_at=datetime.now(UTC), versions=versions())
    for dataset in datasets:
        backend = make_backend(dataset.name)
        run.stores.append(await _run_store(dataset, backend, config, scorers, progress, channels))
    run.finished_at = datetime.now(UTC)
    return run


async def _run_store(
    dataset: Dataset,
    backend: MemoryBackend,
    config: EvalConfig,
    scorers: Sequence[Scorer],
    progress: RunProgress,
    channels: Sequence[RetrievalChannel],
) -> StoreRun:
    queries = dataset.queries[: config.query_limit] if config.query_limit else dataset.queries
    async with backend:
        progress.stage(f"loading {dataset.name}", len(dataset.memories))
        report = await ingest(backend, dataset, on_progress=lambda _done, _total: progress.advance())
        store = StoreRun(dataset.name, len(dataset.memories), report, warnings=list(report.warnings))
        store.backend_version = await _backend_version(backend)
        orchestrator = Orchestrator(backend, config=config.pipeline, scorers=scorers)
        with_channels = None
        if channels:
            store.channel_index = await _index_channels(backend, channels, store.warnings)
            with_channels = Orchestrator(backend, config=config.pipeline, scorers=scorers, channels=channels)
        baseline = Bm25Baseline(dataset.memories)
        evaluator = _QueryEvaluator(dataset, report, backend, orchestrator, baseline, config, with_channels)
        progress.stage(f"querying {dataset.name}", len(queries))
        for query in queries:
            store.queries.append(await evaluator.evaluate(query))
            progress.advance()
    return store


async def _index_channels(
    backend: MemoryBackend, channels: Sequence[RetrievalChannel], warnings: list[str]
) -> dict[str, dict[str, float]]:
    """Let each channel index the fresh store before the queries (timed: the channel's index cost)."""
    done: dict[str, dict[str, float]] = {}
    for channel in channels:
        if not channel.supports(backend):
            warnings.append(f"channel {channel.name} does not run on backend {backend.name}")
            continue
        index = getattr(channel, "index", None)
        if index is None:
            continue
        started = time.perf_counter()
        report = await index(backend)
        seconds = time.perf_counter() - started
        done[channel.name] = {"embedded": float(getattr(report, "embedded", 0)), "seconds": round(seconds, 3)}
    return done


async def _backend_version(backend: MemoryBackend) -> str:
    try:
        health = await backend.health()
    except OrchestratorError:
        return ""
    return health.version


class _QueryEvaluator:
    """Runs one query in every mode against one opened store."""

    def __init__(
        self,
        dataset: Dataset,
        report: IngestReport,
        backend: MemoryBackend,
        orchestrator: Orchestrator,
        baseline: Bm25Baseline,
        config: EvalConfig,
        with_channels: Orchestrator | None = None,
    ) -> None:
        self._dataset = dataset
        self._to_dataset = {backend_id: dataset_id for dataset_id, backend_id in report.ids.items()}
        self._content = {memory.id: memory.content for memory in dataset.memories}
        self._backend = backend
        self._orchestrator = orchestrator
        self._baseline = baseline
        self._config = config
        self._with_channels = with_channels

    async def evaluate(self, query: DatasetQuery) -> QueryOutcome:
        """Every configured mode plus the baseline for ``query``."""
        outcome = QueryOutcome(self._dataset.name, query.id, len(query.gold), dict(query.slices))
        outcome.must_not = len(query.must_not)
        judgement = Judgement(query.gold, query.gold_dups, query.must_not)
        runners: dict[str, Callable[[DatasetQuery], Any]] = {
            "raw": self._raw,
            "keyword": self._keyword,
            "orchestrated": self._orchestrated,
            "expanded": self._expanded,
            "context": self._context,
        }
        for mode in self._config.modes:
            outcome.modes[mode] = await self._timed(runners[mode], query, judgement, outcome)
        for mode in self._config.channel_modes:
            call = self._expanded_plus if mode.startswith("expanded") else self._orchestrated_plus
            outcome.modes[mode] = await self._timed(call, query, judgement, outcome)
        outcome.modes[BASELINE] = await self._timed(self._bm25, query, judgement, outcome)
        return outcome

    async def _timed(
        self,
        call: Callable[[DatasetQuery], Any],
        query: DatasetQuery,
        judgement: Judgement,
        outcome: QueryOutcome,
    ) -> ModeOutcome:
        started = time.perf_counter()
        error = None
        try:
            ranked, extra = await call(query)
        except OrchestratorError as exc:
            ranked, extra, error = [], {}, f"{type(exc).__name__}: {exc}"
        except Exception as exc:
            # an unexpected error is a bug to report, not a reason to lose a long run: it is counted
            # under the mode's errors with its type, and the query scores zero there
            ranked, extra, error = [], {}, f"unexpected {type(exc).__name__}: {exc}"
        latency_ms = (time.perf_counter() - started) * 1000.0
        if "planned_intent" in extra:
            outcome.slices.setdefault("planned_intent", str(extra.pop("planned_intent")))
            strategy = str(extra.pop("strategy"))
            # without expansion the plan is always direct; the planner's own choice shows when expanding
            if extra.pop("expanding") or "strategy" not in outcome.slices:
                outcome.slices["strategy"] = strategy
        metrics = query_metrics(ranked, judgement, self._config.ks)
        if "packed" in extra:
            metrics["evidence_kept"] = evidence_kept(extra.pop("packed"), judgement)
        keys = [self._duplicate_key(position, judgement) for position in ranked]
        return ModeOutcome(ranked, metrics, latency_ms, keys, extra, error)

    def _duplicate_key(self, position: list[str], judgement: Judgement) -> str:
        golds = judgement.golds_in(position)
        if golds:
            return "gold:" + min(golds)
        return content_hash(self._content.get(position[0], position[0]))

    def _dataset_id(self, backend_id: str) -> str:
        return self._to_dataset.get(backend_id, backend_id)

    def _positions(self, items: Sequence[ResultItem]) -> list[list[str]]:
        return [[self._dataset_id(i) for i in (item.memory_id, *item.absorbed_ids)] for item in items]

    async def _raw(self, query: DatasetQuery) -> tuple[list[list[str]], dict[str, Any]]:
        hits: list[Hit] = await self._backend.recall(
            RecallQuery(query.query, limit=self._config.max_k, now=query.now)
        )
        return [[self._dataset_id(hit.record.id)] for hit in hits], {}

    async def _keyword(self, query: DatasetQuery) -> tuple[list[list[str]], dict[str, Any]]:
        hits = await self._backend.search(query.query, limit=self._config.max_k, now=query.now)
        return [[self._dataset_id(hit.record.id)] for hit in hits], {}

    async def _search(
        self, query: DatasetQuery, expand: bool, orchestrator: Orchestrator | None = None
    ) -> tuple[list[list[str]], dict[str, Any]]:
        request = SearchRequest(query.query, top_k=self._config.max_k, expand=expand, now=query.now)
        result = await (orchestrator or self._orchestrator).search(request)
        extra: dict[str, Any] = {
            "planned_intent": result.plan.intent.value,
            "strategy": result.plan.strategy,
            "expanding": expand,
        }
        extra["warnings"] = float(len(result.warnings))
        return self._positions(result.items), extra

    async def _orchestrated(self, query: DatasetQuery) -> tuple[list[list[str]], dict[str, Any]]:
        return await self._search(query, expand=False)

    async def _expanded(self, query: DatasetQuery) -> tuple[list[list[str]], dict[str, Any]]:
        return await self._search(query, expand=True)

    async def _orchestrated_plus(self, query: DatasetQuery) -> tuple[list[list[str]], dict[str, Any]]:
        return await self._search(query, False, self._with_channels)

    async def _expanded_plus(self, query: DatasetQuery) -> tuple[list[list[str]], dict[str, Any]]:
        return await self._search(query, True, self._with_channels)

    async def _context(self, query: DatasetQuery) -> tuple[list[list[str]], dict[str, Any]]:
        budget = Budget(max_items=self._config.max_k, max_tokens=self._config.budget_tokens)
        result = await self._orchestrator.context(ContextRequest(query.query, budget=budget, now=query.now))
        positions = self._positions(result.items)
        extra: dict[str, Any] = {
            "chars": float(result.chars),
            "est_tokens": float(result.est_tokens),
            "packed_items": float(len(result.items)),
            "packed": positions,
        }
        return positions, extra

    async def _bm25(self, query: DatasetQuery) -> tuple[list[list[str]], dict[str, Any]]:
        ids = self._baseline.search(query.query, limit=self._config.max_k, now=query.now)
        return [[memory_id] for memory_id in ids], {}
