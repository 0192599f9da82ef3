"""Metrics, store statistics, JSON log lines and progress, in process over the in-memory backend."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from prometheus_client.parser import text_string_to_metric_families

from memory_orchestrator.adapters.sqlite.trace_store import SqliteTraceStore
from memory_orchestrator.domain.requests import SearchRequest
from memory_orchestrator.domain.trace import Trace, new_trace_id
from memory_orchestrator.entrypoints.cli.progress import TerminalProgress, describe_eta, describe_rate
from memory_orchestrator.entrypoints.config.bootstrap import open_runtime
from memory_orchestrator.entrypoints.config.settings import Settings
from memory_orchestrator.entrypoints.telemetry.figures import figures_of
from memory_orchestrator.entrypoints.telemetry.log_lines import JsonLineFormatter, request_scope
from memory_orchestrator.entrypoints.telemetry.metrics import Metrics
from memory_orchestrator.entrypoints.telemetry.stats import percentile, trace_stats
from memory_orchestrator.ports import NewMemory

MEMORIES = (
    ("Stratus Hosting invoices tripled in March", ("Stratus",)),
    ("We decided to leave Stratus Hosting because of the invoices", ("Stratus",)),
    ("We decided to leave Stratus Hosting because of the invoices!", ("Stratus",)),
    ("Atlas moves to Kubernetes in May", ("Atlas",)),
)


def _settings(tmp_path: Path) -> Settings:
    settings = Settings(data_dir=tmp_path)
    settings.backend.name = "memory"
    settings.features.store_traces = False
    return settings


async def _traces_of_a_session(tmp_path: Path) -> list[Mapping[str, Any]]:
    """Every trace document saved while writing four memories and searching (twice the same)."""
    saved: list[Mapping[str, Any]] = []
    async with open_runtime(_settings(tmp_path), store="team", observer=saved.append) as runtime:
        for content, entities in MEMORIES:
            await runtime.backend.remember(NewMemory(content=content, entities=entities, dedup=False))
        question = SearchRequest(query="why did we leave Stratus Hosting?")
        await runtime.orchestrator.search(question)
        await runtime.orchestrator.search(question)  # answered by the read cache
        await runtime.orchestrator.search(SearchRequest(query="Atlas Kubernetes"))
    return saved


def _samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    body, content_type = metrics.render()
    assert content_type.startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


@pytest.mark.anyio
async def test_saved_traces_name_their_store_and_reach_the_observer(tmp_path: Path) -> None:
    documents = await _traces_of_a_session(tmp_path)
    assert [d["operation"] for d in documents] == ["search", "search", "search"]
    assert {d["store"] for d in documents} == {"team"}
    first, cached, _other = (figures_of(d) for d in documents)
    assert first.cache == "miss" and cached.cache == "hit"
    assert first.channel_candidates["keyword"] >= 2 and first.recall_depth and first.recall_depth >= 2
    assert first.dedup_in is not None and first.dedup_merged == 1  # the two near-identical decisions
    assert {"plan", "retrieval", "ranking", "dedup"} <= set(first.stages_ms)


@pytest.mark.anyio
async def test_metrics_count_what_the_traces_and_calls_say(tmp_path: Path) -> None:
    metrics = Metrics()
    for document in await _traces_of_a_session(tmp_path):
        metrics.observe_trace(document)
    metrics.observe_call("memory_search", "ok", 0.004)
    metrics.observe_call("memory_search", "InvalidRequest", 0.0001)
    samples = _samples(metrics)
    assert samples[("orchestrator_reads_total", (("operation", "search"),))] == 3
    assert samples[("orchestrator_cache_requests_total", (("result", "hit"),))] == 1
    assert samples[("orchestrator_cache_requests_total", (("result", "miss"),))] == 2
    assert samples[("orchestrator_cache_hit_ratio", ())] == pytest.approx(1 / 3)
    assert samples[("orchestrator_dedup_merged_total", ())] >= 1
    assert 0 < samples[("orchestrator_dedup_ratio", ())] < 1
    assert samples[("orchestrator_errors_total", (("kind", "InvalidRequest"),))] == 1
    assert (
        samples[("orchestrator_tool_latency_seconds_count", (("status", "ok"), ("tool", "memory_search")))]
        == 1
    )
    assert samples[("orchestrator_channel_candidates_count", (("channel", "keyword"),))] == 2
    retrieval = (("operation", "search"), ("stage", "retrieval"))
    assert samples[("orchestrator_stage_latency_seconds_count", retrieval)] == 2  # the cache hit skips it


@pytest.mark.anyio
async def test_traces_a_failed_write_lost_reach_the_metrics(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    settings.features.store_traces = True  # the SQLite trace store, written behind the answers
    metrics = Metrics()
    async with open_runtime(settings, on_lost_traces=metrics.observe_lost_traces) as runtime:
        store = cast(SqliteTraceStore, runtime.traces)
        await store._conn().execute("DROP TABLE traces")
        result = await runtime.orchestrator.search(SearchRequest(query="anything"))
        assert not result.warnings  # the answer went out before its trace was written
    assert _samples(metrics)[("orchestrator_traces_lost_total", ())] == 1


def test_two_metrics_objects_do_not_share_counts() -> None:
    first, second = Metrics(), Metrics()
    first.observe_call("memory_get", "ok", 0.001)
    assert (
        "orchestrator_tool_latency_seconds_count",
        (("status", "ok"), ("tool", "memory_get")),
    ) in _samples(first)
    assert not any(name == "orchestrator_tool_latency_seconds_count" for name, _ in _samples(second))


@pytest.mark.anyio
async def test_stats_aggregate_one_store_and_count_the_others(tmp_path: Path) -> None:
    documents = list(await _traces_of_a_session(tmp_path))
    documents.append({**documents[0], "store": "elsewhere"})
    documents.append({key: value for key, value in documents[0].items() if key != "store"})
    stats = trace_stats(documents, "team")
    assert (stats["traces"], stats["other_stores"], stats["unlabelled"]) == (3, 1, 1)
    assert stats["operations"]["search"]["count"] == 3
    assert stats["stages"]["retrieval"]["count"] == 2
    assert stats["cache"] == {"hits": 1, "misses": 2, "hit_rate": pytest.approx(1 / 3, abs=1e-4)}
    assert stats["dedup"]["merged"] >= 1 and 0 < stats["dedup"]["ratio"] < 1
    assert stats["channels"]["keyword"]["reads"] == 2
    assert stats["recall_depth"]["reads"] == 2


def test_percentile_is_nearest_rank() -> None:
    assert percentile([5.0, 1.0, 3.0, 2.0, 4.0], 0.5) == 3.0
    assert percentile([1.0, 2.0], 0.95) == 2.0
    assert percentile([], 0.5) == 0.0


def test_the_first_trace_of_a_request_takes_the_request_id() -> None:
    at = datetime(2026, 5, 1, tzinfo=UTC)
    with request_scope() as request_id:
        first, second = Trace("search", {}, created_at=at), Trace("search", {}, created_at=at)
    outside = Trace("search", {}, created_at=at)
    assert first.trace_id == request_id
    assert second.trace_id not in {request_id, outside.trace_id}
    assert outside.trace_id != request_id and outside.trace_id.startswith("tr-")


@pytest.mark.anyio
async def test_a_reserved_trace_id_is_handed_out_once_even_across_tasks() -> None:
    at = datetime(2026, 5, 1, tzinfo=UTC)
    with request_scope() as request_id:
        in_task = await asyncio.create_task(_make_trace(at))
        in_request = Trace("search", {}, created_at=at)
    assert in_task.trace_id == request_id and in_request.trace_id != request_id


async def _make_trace(at: datetime) -> Trace:
    return Trace("search", {}, created_at=at)


def test_log_lines_are_json_with_a_utc_timestamp_and_the_request_id() -> None:
    formatter = JsonLineFormatter()

    def line(message: str) -> dict[str, Any]:
        record = logging.LogRecord("memory_orchestrator.mcp", logging.INFO, __file__, 1, message, None, None)
        return dict(json.loads(formatter.format(record)))

    with request_scope() as request_id:
        inside = line(json.dumps({"event": "tool_call", "tool": "memory_search"}))
    outside = line("trace store unavailable")
    assert inside["request_id"] == request_id and inside["tool"] == "memory_search"
    assert inside["level"] == "info" and inside["logger"] == "memory_orchestrator.mcp"
    stamp = datetime.fromisoformat(inside["ts"])
    assert stamp.utcoffset() is not None and stamp.utcoffset().total_seconds() == 0  # type: ignore[union-attr]
    assert abs((datetime.now(UTC) - stamp).total_seconds()) < 60
    assert "request_id" not in outside and outside["message"] == "trace store unavailable"


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_plain_progress_prints_rate_and_eta_every_interval() -> None:
    stream, clock = io.StringIO(), _Clock()
    with TerminalProgress(unit="memories", stream=stream, live=False, interval_s=10, clock=clock) as bar:
        bar.stage("importing atlas into store team", 320)
        for _ in range(320):
            clock.now += 0.0625  # 16 memories/s, exact in binary floating point
            bar.advance()
    lines = stream.getvalue().splitlines()
    assert lines[0] == "importing atlas into store team: 0/320"
    assert lines[1] == "importing atlas into store team: 160/320 (50 %), 16 memories/s, ETA 10 s"
    assert lines[-1] == "importing atlas into store team: 320/320 in 20.0 s, 16 memories/s"
    assert len(lines) == 3  # start, every 10 s while running (the 20th second is the end), end


def test_disabled_progress_prints_nothing() -> None:
    stream = io.StringIO()
    with TerminalProgress(stream=stream, live=False, enabled=False) as bar:
        bar.stage("loading", 3)
        bar.advance(3)
    assert stream.getvalue() == ""


def test_rate_and_eta_wording() -> None:
    assert describe_rate(5, 2.0, "items") == "2.5 items/s"
    assert describe_rate(0, 0.0, "items") == "- items/s"
    assert describe_eta(100, 1000, 10.0) == "1 min 30 s"
    assert describe_eta(0, 1000, 10.0) == "?"
    assert new_trace_id() != new_trace_id()
