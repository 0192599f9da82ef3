"""Retrieval metrics checked against values computed by hand."""

from __future__ import annotations

import math

import pytest

from memory_orchestrator.evaluation.metrics import (
    Judgement,
    all_gold_at_k,
    duplicate_rate,
    evidence_kept,
    must_not_at_k,
    ndcg_at_k,
    percentile,
    precision_at_k,
    query_metrics,
    recall_at_k,
    reciprocal_rank,
)
from memory_orchestrator.evaluation.runner import ModeOutcome, QueryOutcome
from memory_orchestrator.evaluation.summary import aggregate_modes, headline_queries, losses, slices

# gold a, b, c; a2 says the same as a; x must stay out.
JUDGEMENT = Judgement(gold=("a", "b", "c"), gold_dups={"a": ("a2",)}, must_not=("x",))
RANKED = ["x", "a2", "d", "a", "b", "e"]


def test_precision_counts_slots_holding_gold_or_its_duplicate() -> None:
    assert precision_at_k(RANKED, JUDGEMENT, 1) == 0.0
    assert precision_at_k(RANKED, JUDGEMENT, 3) == pytest.approx(1 / 3)
    assert precision_at_k(RANKED, JUDGEMENT, 5) == pytest.approx(3 / 5)
    # empty slots beyond the list are misses
    assert precision_at_k(RANKED, JUDGEMENT, 10) == pytest.approx(3 / 10)


def test_recall_counts_each_gold_once_and_dups_as_that_gold() -> None:
    assert recall_at_k(RANKED, JUDGEMENT, 1) == 0.0
    assert recall_at_k(RANKED, JUDGEMENT, 3) == pytest.approx(1 / 3)  # a2 finds a
    assert recall_at_k(RANKED, JUDGEMENT, 5) == pytest.approx(2 / 3)  # a again adds nothing
    assert all_gold_at_k(RANKED, JUDGEMENT, 10) == 0.0
    assert all_gold_at_k(["c", "b", "a"], JUDGEMENT, 3) == 1.0


def test_ndcg_by_hand() -> None:
    # new gold at ranks 2 (a2 -> a) and 5 (b); rank 4 (a) repeats a and gains nothing
    dcg = 1 / math.log2(3) + 1 / math.log2(6)
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at_k(RANKED, JUDGEMENT, 5) == pytest.approx(dcg / ideal)
    assert ndcg_at_k(RANKED, JUDGEMENT, 5) == pytest.approx(0.477624, abs=1e-6)
    # ideal DCG is capped at k when there are more gold than slots
    assert ndcg_at_k(["a", "b"], JUDGEMENT, 2) == pytest.approx(1.0)


def test_mrr_must_not_and_absorbed_ids() -> None:
    assert reciprocal_rank(RANKED, JUDGEMENT) == 0.5
    assert reciprocal_rank(["d", "e"], JUDGEMENT) == 0.0
    assert must_not_at_k(RANKED, JUDGEMENT, 1) == 1
    assert must_not_at_k(RANKED[1:], JUDGEMENT, 5) == 0
    # an item that absorbed c (deduplicated) finds c at its rank
    merged = [("d", "c"), "b"]
    assert recall_at_k(merged, JUDGEMENT, 1) == pytest.approx(1 / 3)
    assert reciprocal_rank(merged, JUDGEMENT) == 1.0


def test_duplicate_rate_and_evidence_kept() -> None:
    assert duplicate_rate(["h1", "h2", "h1", "h3"], 4) == 0.25
    assert duplicate_rate(["h1", "h2", "h1", "h3"], 2) == 0.0
    assert duplicate_rate([], 5) == 0.0
    assert evidence_kept(["b", "a2", "zz"], JUDGEMENT) == pytest.approx(2 / 3)
    assert evidence_kept([], Judgement(gold=())) == 1.0


def test_percentiles_interpolate_between_ranks() -> None:
    assert percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    assert percentile([float(v) for v in range(1, 21)], 0.95) == pytest.approx(19.05)
    assert percentile([7.0], 0.95) == 7.0
    assert percentile([], 0.5) == 0.0


def test_query_metrics_names_every_metric_per_k() -> None:
    values = query_metrics(RANKED, JUDGEMENT, (1, 5))

    assert values["mrr"] == 0.5
    assert values["recall@5"] == pytest.approx(2 / 3)
    assert values["must_not@1"] == 1.0
    assert set(values) == {
        "mrr",
        *(f"{name}@{k}" for name in ("precision", "recall", "all_gold", "ndcg", "must_not") for k in (1, 5)),
    }


def _outcome(query_id: str, category: str, recalls: dict[str, float], must_not: int = 0) -> QueryOutcome:
    outcome = QueryOutcome("store", query_id, 1, {"category": category}, must_not=must_not)
    for mode, recall in recalls.items():
        metrics = {
            "recall@10": recall,
            "ndcg@10": recall,
            "mrr": recall,
            "must_not@10": float(must_not and recall < 1),
        }
        outcome.modes[mode] = ModeOutcome([["x"]], metrics, latency_ms=1.0, duplicate_keys=["a", "a"])
    return outcome


def test_headline_leaves_out_adversarial_and_aggregates_per_mode() -> None:
    queries = [
        _outcome("q1", "1", {"raw": 1.0, "bm25": 0.0}),
        _outcome("q2", "4", {"raw": 0.5, "bm25": 1.0}, must_not=1),
        _outcome("q3", "5", {"raw": 0.0, "bm25": 0.0}),
    ]

    label, headline = headline_queries(queries)
    table = aggregate_modes(headline, ["raw", "bm25"], (10,))

    assert label.startswith("categories 1-4") and [q.query_id for q in headline] == ["q1", "q2"]
    assert table["raw"]["recall@10"] == 0.75 and table["bm25"]["recall@10"] == 0.5
    # must-not rate only over queries listing must-not memories (q2: raw missed part, so it leaked)
    assert table["raw"]["must_not_rate@10"] == 1.0 and table["bm25"]["must_not_rate@10"] == 0.0
    assert table["raw"]["duplicate_rate@10"] == 0.5


def test_losses_name_the_slice_mode_and_gap() -> None:
    queries = [
        _outcome("q1", "1", {"expanded": 0.2, "raw": 0.3, "bm25": 0.6}),
        _outcome("q2", "2", {"expanded": 1.0, "raw": 1.0, "bm25": 1.0}),
    ]

    found = losses(slices(queries, ["expanded", "raw", "bm25"], (10,)), ["raw", "expanded"], 10)

    assert [(row["value"], row["mode"], row["versus"]) for row in found] == [
        ("1", "expanded", "bm25"),
        ("1", "raw", "bm25"),
        ("1", "expanded", "raw"),
    ]
    assert found[0]["gap"] == pytest.approx(0.4)
