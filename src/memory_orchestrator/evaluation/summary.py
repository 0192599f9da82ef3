"""Turn an :class:`EvalRun` into one JSON-safe document holding every number of the report.

Means per mode over all queries, over the headline set (LoCoMo categories 1-4 when categories are
labelled), per slice (kind, intent, category, conversation, planned intent, strategy), latency
percentiles, packing statistics, ingestion notes, versions and configuration.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from enum import Enum
from typing import Any

from memory_orchestrator.evaluation.environment import versions
from memory_orchestrator.evaluation.metrics import duplicate_rate, mean, percentile
from memory_orchestrator.evaluation.runner import BASELINE, EvalRun, QueryOutcome
from memory_orchestrator.ports import format_timestamp

#: Category labels left out of the headline (LoCoMo's adversarial questions have no answer in memory).
HEADLINE_EXCLUDED_CATEGORIES = frozenset({"5"})
#: Metrics shown per slice (the full set is in ``overall`` and ``headline``).
SLICE_METRICS = ("recall", "ndcg")
#: The modes that go through the orchestrator (the ones a loss table is about).
ORCHESTRATOR_MODES = ("orchestrated", "expanded", "context")
SLICE_KEYS = ("kind", "intent", "category", "conversation", "planned_intent", "strategy")


def json_safe(value: Any) -> Any:
    """Dataclasses, mappings, enums and datetimes as plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: json_safe(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(json_safe(key)): json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_safe(item) for item in value]
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return format_timestamp(value)
    return value


def mode_names(run: EvalRun) -> list[str]:
    """Modes in report order: the configured ones, those with plugin channels, then the baseline."""
    return [*run.config.modes, *run.config.channel_modes, BASELINE]


def headline_queries(queries: Sequence[QueryOutcome]) -> tuple[str, list[QueryOutcome]]:
    """The headline set and its description."""
    if any("category" in query.slices for query in queries):
        kept = [q for q in queries if q.slices.get("category") not in HEADLINE_EXCLUDED_CATEGORIES]
        return "categories 1-4 (adversarial category 5 excluded)", kept
    return "all queries", list(queries)


def aggregate_modes(
    queries: Sequence[QueryOutcome], modes: Sequence[str], ks: Sequence[int]
) -> dict[str, Any]:
    """Mean of every metric per mode over ``queries``; must-not only over queries that list some."""
    result: dict[str, Any] = {}
    for mode in modes:
        outcomes = [(q, q.modes[mode]) for q in queries if mode in q.modes]
        if not outcomes:
            continue
        names = sorted({name for _, outcome in outcomes for name in outcome.metrics})
        values: dict[str, float] = {}
        for name in names:
            if name.startswith("must_not@"):
                continue
            values[name] = mean(o.metrics[name] for _, o in outcomes if name in o.metrics)
        for k in ks:
            values[f"duplicate_rate@{k}"] = mean(duplicate_rate(o.duplicate_keys, k) for _, o in outcomes)
            guarded = [o for q, o in outcomes if q.must_not]
            if guarded:
                values[f"must_not_rate@{k}"] = mean(
                    1.0 if o.metrics[f"must_not@{k}"] else 0.0 for o in guarded
                )
        values["errors"] = float(sum(1 for _, o in outcomes if o.error))
        result[mode] = values
    return result


def latency(queries: Sequence[QueryOutcome], modes: Sequence[str]) -> dict[str, dict[str, float]]:
    """p50 / p95 / max / mean latency in milliseconds per mode."""
    table = {}
    for mode in modes:
        values = [q.modes[mode].latency_ms for q in queries if mode in q.modes]
        table[mode] = {
            "p50": percentile(values, 0.50),
            "p95": percentile(values, 0.95),
            "max": max(values, default=0.0),
            "mean": mean(values),
        }
    return table


def context_stats(queries: Sequence[QueryOutcome]) -> dict[str, float]:
    """What packing kept: evidence share, characters, estimated tokens and items per context."""
    packed = [q.modes["context"] for q in queries if "context" in q.modes]
    if not packed:
        return {}
    return {
        "evidence_kept": mean(o.metrics.get("evidence_kept", 0.0) for o in packed),
        "avg_chars": mean(o.extra.get("chars", 0.0) for o in packed),
        "avg_est_tokens": mean(o.extra.get("est_tokens", 0.0) for o in packed),
        "avg_items": mean(o.extra.get("packed_items", 0.0) for o in packed),
    }


def slices(queries: Sequence[QueryOutcome], modes: Sequence[str], ks: Sequence[int]) -> dict[str, Any]:
    """Per slice key and value: query count and recall/nDCG per mode."""
    table: dict[str, Any] = {}
    for key in SLICE_KEYS:
        groups: dict[str, list[QueryOutcome]] = defaultdict(list)
        for query in queries:
            if key in query.slices:
                groups[query.slices[key]].append(query)
        if not groups:
            continue
        table[key] = {
            value: {"queries": len(members), "modes": _slice_modes(members, modes, ks)}
            for value, members in sorted(groups.items())
        }
    return table


def _slice_modes(members: Sequence[QueryOutcome], modes: Sequence[str], ks: Sequence[int]) -> dict[str, Any]:
    full = aggregate_modes(members, modes, ks)
    wanted = {f"{name}@{k}" for name in SLICE_METRICS for k in ks} | {"mrr", "evidence_kept"}
    return {
        mode: {name: value for name, value in values.items() if name in wanted}
        for mode, values in full.items()
    }


def losses(
    summary_slices: Mapping[str, Any], modes: Iterable[str], k: int, *, margin: float = 0.02
) -> list[dict[str, Any]]:
    """Slices where a mode's recall@k trails BM25, raw recall or keyword search by > ``margin``."""
    found = []
    metric = f"recall@{k}"
    for key, values in summary_slices.items():
        for value, cell in values.items():
            scores = {mode: stats.get(metric) for mode, stats in cell["modes"].items()}
            for mode in modes:
                for reference in (BASELINE, "raw", "keyword"):
                    mine, theirs = scores.get(mode), scores.get(reference)
                    if mode == reference or mine is None or theirs is None:
                        continue
                    if theirs - mine > margin:
                        found.append(
                            {
                                "slice": key,
                                "value": value,
                                "queries": cell["queries"],
                                "mode": mode,
                                "versus": reference,
                                metric: mine,
                                f"{reference} {metric}": theirs,
                                "gap": theirs - mine,
                            }
                        )
    return sorted(found, key=lambda row: -row["gap"])


def summarise(run: EvalRun) -> dict[str, Any]:
    """Every number of the run as one JSON-safe document."""
    queries = [query for store in run.stores for query in store.queries]
    modes, ks = mode_names(run), run.config.ks
    label, headline = headline_queries(queries)
    by_slice = slices(queries, modes, ks)
    cut = 10 if 10 in ks else ks[len(ks) // 2]
    finished = run.finished_at or run.started_at
    return {
        "meta": {
            "dataset": run.dataset,
            "backend": run.config.backend,
            "backend_versions": sorted(
                {store.backend_version for store in run.stores if store.backend_version}
            ),
            "versions": run.versions or versions(),
            "started_at": format_timestamp(run.started_at),
            "finished_at": format_timestamp(finished),
            "duration_s": (finished - run.started_at).total_seconds(),
            "stores": len(run.stores),
            "queries": len(queries),
            "memories": sum(store.memories for store in run.stores),
        },
        "config": json_safe(run.config),
        "ingest": [_ingest_row(store) for store in run.stores],
        "channel_index": _channel_index(run),
        "headline": {"set": label, "queries": len(headline), "modes": aggregate_modes(headline, modes, ks)},
        "overall": {"queries": len(queries), "modes": aggregate_modes(queries, modes, ks)},
        "slices": by_slice,
        "losses": losses(by_slice, [m for m in run.config.modes if m in ORCHESTRATOR_MODES], cut),
        "latency_ms": latency(queries, modes),
        "context": context_stats(queries),
        "headline_context": context_stats(headline),
        "errors": _errors(queries, modes),
        "warnings": [warning for store in run.stores for warning in store.warnings],
    }


def _ingest_row(store: Any) -> dict[str, Any]:
    report = store.ingest
    return {
        "store": store.name,
        "memories": store.memories,
        "written": report.written,
        "skipped": report.skipped,
        "links": report.links,
        "backdated": report.backdated,
        "seconds": report.seconds,
        "memories_per_s": report.written / report.seconds if report.seconds else 0.0,
        "warnings": len(report.warnings),
    }


def _channel_index(run: EvalRun) -> dict[str, dict[str, float]]:
    """Per plugin channel: memories it indexed over all stores, the seconds it took, the rate."""
    totals: dict[str, dict[str, float]] = {}
    for store in run.stores:
        for channel, row in store.channel_index.items():
            total = totals.setdefault(channel, {"embedded": 0.0, "seconds": 0.0})
            total["embedded"] += row.get("embedded", 0.0)
            total["seconds"] += row.get("seconds", 0.0)
    for total in totals.values():
        total["per_s"] = round(total["embedded"] / total["seconds"], 1) if total["seconds"] else 0.0
        total["seconds"] = round(total["seconds"], 2)
    return totals


def _errors(queries: Sequence[QueryOutcome], modes: Sequence[str]) -> dict[str, Any]:
    table = {}
    for mode in modes:
        failed = [
            f"{q.query_id}: {q.modes[mode].error}" for q in queries if mode in q.modes and q.modes[mode].error
        ]
        if failed:
            table[mode] = {"count": len(failed), "examples": failed[:5]}
    return table
