"""Prometheus metrics of a running server, fed from tool calls and saved traces.

Nothing here is imported by the CLI's start-up path: ``prometheus_client`` is loaded when a
:class:`Metrics` is built (``serve --http`` only). The domain never sees it; the figures come from
trace documents (:mod:`.figures`) and from the MCP layer's per-call observer.

With several ``[http] workers`` every process records into files under one directory (the client
library's multiprocess mode) and a scrape, answered by whichever worker gets it, sums all of them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

from memory_orchestrator.entrypoints.telemetry.figures import READS, figures_of

LOG = logging.getLogger("memory_orchestrator.metrics")
PREFIX = "orchestrator"
#: Seconds: tool calls and pipeline stages run from well under a millisecond to seconds.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: Counts: candidates per channel, recall depth.
COUNT_BUCKETS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"
TOOL_DOC = "MCP tool call latency."
STAGE_DOC = "Pipeline stage latency, from traces."
CHANNEL_DOC = "Candidates one retrieval channel returned for one read."
DEPTH_DOC = "Distinct memories retrieval handed on after fusion, per read."
ERRORS_DOC = "Failed tool calls by error kind; reads answered with warnings as kind 'degraded'."
LOST_DOC = "Traces the trace store could not write or dropped while behind (written after the answers)."


class Metrics:
    """The server's metrics in a registry of their own (never the library's global one)."""

    def __init__(self, *, multiprocess_dir: str | None = None) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.multiprocess_dir = multiprocess_dir
        # In multiprocess mode values live in files; this registry only names the metrics.
        self.registry = r = CollectorRegistry()

        def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Any:
            return Counter(f"{PREFIX}_{name}", doc, labels, registry=r)

        def histogram(name: str, doc: str, labels: tuple[str, ...], buckets: tuple[float, ...]) -> Any:
            return Histogram(f"{PREFIX}_{name}", doc, labels, registry=r, buckets=buckets)

        latency, count = LATENCY_BUCKETS, COUNT_BUCKETS
        self.tool_seconds = histogram("tool_latency_seconds", TOOL_DOC, ("tool", "status"), latency)
        self.stage_seconds = histogram("stage_latency_seconds", STAGE_DOC, ("operation", "stage"), latency)
        self.channel_candidates = histogram("channel_candidates", CHANNEL_DOC, ("channel",), count)
        self.recall_depth = histogram("recall_depth", DEPTH_DOC, ("operation",), count)
        self.reads = counter("reads_total", "Pipeline reads (search, context, expand).", ("operation",))
        self.expanded = counter("expanded_reads_total", "Reads where graph expansion ran.")
        self.expansion_added = counter("expansion_added_total", "Memories added by graph expansion.")
        self.dedup_in = counter("dedup_candidates_total", "Items that entered dedup.")
        self.dedup_merged = counter("dedup_merged_total", "Items merged away as duplicates.")
        self.cache = counter("cache_requests_total", "Read cache look-ups by result.", ("result",))
        self.errors = counter("errors_total", ERRORS_DOC, ("kind",))
        self.traces_lost = counter("traces_lost_total", LOST_DOC)

    def observe_call(self, tool: str, status: str, seconds: float) -> None:
        """One MCP tool call ended (``status`` is ``ok`` or the error's class name)."""
        self.tool_seconds.labels(tool, "ok" if status == "ok" else "error").observe(seconds)
        if status != "ok":
            self.errors.labels(status).inc()

    def observe_lost_traces(self, count: int) -> None:
        """The trace store lost ``count`` traces: a write failed or they were dropped while it was
        behind (each answer had gone out)."""
        self.traces_lost.inc(count)

    def observe_trace(self, document: Mapping[str, Any]) -> None:
        """A trace was saved: record its stages, channels, expansion, dedup and cache figures."""
        figures = figures_of(document)
        for stage, ms in figures.stages_ms.items():
            self.stage_seconds.labels(figures.operation, stage).observe(ms / 1000)
        if figures.cache is not None:
            self.cache.labels(figures.cache).inc()
        if figures.operation not in READS:
            return
        self.reads.labels(figures.operation).inc()
        if figures.warnings:
            self.errors.labels("degraded").inc()
        for channel, count in figures.channel_candidates.items():
            self.channel_candidates.labels(channel).observe(count)
        if figures.recall_depth is not None:
            self.recall_depth.labels(figures.operation).observe(figures.recall_depth)
        if figures.expanded:
            self.expanded.inc()
            self.expansion_added.inc(figures.expansion_added)
        if figures.dedup_in is not None:
            self.dedup_in.inc(figures.dedup_in)
            self.dedup_merged.inc(figures.dedup_merged)

    def render(self) -> tuple[bytes, str]:
        """The Prometheus text exposition of every metric (summed over workers), and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

        if self.multiprocess_dir is None:
            source = self.registry
        else:
            from prometheus_client.multiprocess import MultiProcessCollector

            source = CollectorRegistry()
            MultiProcessCollector(source, path=self.multiprocess_dir)  # type: ignore[no-untyped-call]
        scrape = CollectorRegistry()
        scrape.register(_Everything(source))
        scrape.register(_Ratios(source))
        return generate_latest(scrape), CONTENT_TYPE_LATEST


class _Everything:
    """Hands on what another registry collects (so ratios and raw metrics share one scrape)."""

    def __init__(self, source: Any) -> None:
        self._source = source

    def collect(self) -> Iterator[Any]:
        yield from self._source.collect()


class _Ratios:
    """Gauges derived from counters at scrape time: cache hit rate, dedup ratio, expansion rate."""

    def __init__(self, source: Any) -> None:
        self._source = source

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        totals = _sample_totals(self._source)
        hits = totals.get(("cache_requests_total", "hit"), 0.0)
        misses = totals.get(("cache_requests_total", "miss"), 0.0)
        reads = totals.get(("reads_total", ""), 0.0)
        ratios = (
            ("cache_hit_ratio", "Read cache hits per look-up.", hits, hits + misses),
            (
                "dedup_ratio",
                "Share of the items entering dedup that were merged away.",
                totals.get(("dedup_merged_total", ""), 0.0),
                totals.get(("dedup_candidates_total", ""), 0.0),
            ),
            (
                "expansion_rate",
                "Share of pipeline reads in which graph expansion ran.",
                totals.get(("expanded_reads_total", ""), 0.0),
                reads,
            ),
        )
        for name, doc, part, whole in ratios:
            yield GaugeMetricFamily(f"{PREFIX}_{name}", doc, value=part / whole if whole else 0.0)


def _sample_totals(source: Any) -> dict[tuple[str, str], float]:
    """Counter totals by (name without prefix, cache result label); other labels summed over."""
    totals: dict[tuple[str, str], float] = {}
    for family in source.collect():
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue
            name = sample.name.removeprefix(f"{PREFIX}_")
            key = (name, sample.labels.get("result", ""))
            totals[key] = totals.get(key, 0.0) + sample.value
    return totals


def multiprocess_directory() -> str | None:
    """The directory of multiprocess mode when it is on (set before ``prometheus_client`` loads)."""
    path = os.environ.get(MULTIPROCESS_ENV)
    return path if path and os.path.isdir(path) else None
