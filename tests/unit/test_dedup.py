"""Dedup: exact and near duplicates merged into the stronger item; stale facts demoted and marked."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_orchestrator.domain.candidates import Candidate
from memory_orchestrator.domain.config import PipelineConfig
from memory_orchestrator.domain.dedup import (
    CONTRADICTION_OVERLAP,
    MAX_STALE_MARKS,
    SOFT_DUPLICATE,
    deduplicate,
)
from memory_orchestrator.domain.ranking import RankedItem, RankingContext, order_key
from memory_orchestrator.ports import Intent, MemoryRecord
from memory_orchestrator.ports.text import content_hash, has_negation, tokenize

NOW = datetime(2026, 3, 18, tzinfo=UTC)
CONFIG = PipelineConfig()


def item(memory_id: str, content: str, score: float, *, days_old: int = 5, **fields: object) -> RankedItem:
    created = NOW - timedelta(days=days_old)
    rec = MemoryRecord(id=memory_id, content=content, created_at=created, updated_at=created, **fields)  # type: ignore[arg-type]
    return RankedItem(Candidate(rec, channels={"keyword"}), score, {}, superseded_by=list(rec.superseded_by))


def test_exact_duplicate_is_absorbed_by_the_stronger_item() -> None:
    outcome = deduplicate(
        [item("m1", "Vendor X shipped late", 0.9), item("m2", "vendor x  shipped LATE", 0.5)], CONFIG
    )
    assert [kept.record.id for kept in outcome.kept] == ["m1"]
    assert outcome.kept[0].absorbed_ids == ["m2"]
    assert outcome.drops == [("m2", "duplicate of m1")]
    assert "cross-validated by duplicate m2" in outcome.kept[0].reasons


def test_near_duplicate_at_threshold_merges_entities() -> None:
    first = item("m1", "sensors from vendor x arrived two weeks late", 0.9, entities=("Vendor X",))
    second = item("m2", "sensors from vendor x arrived two weeks late!!", 0.8, entities=("Sensors",))
    outcome = deduplicate([first, second], CONFIG)
    assert len(outcome.kept) == 1
    assert outcome.kept[0].absorbed_entities == ["Sensors"]


def test_partly_redundant_item_is_penalised_not_merged() -> None:
    first = item("m1", "atlas launch moved to april after sensor delay", 0.9)
    second = item("m2", "atlas launch moved to april after sensor delay confirmed by board", 0.85)
    outcome = deduplicate([first, second], CONFIG)
    assert [kept.record.id for kept in outcome.kept] == ["m1", "m2"]
    penalised = outcome.kept[1]
    assert 0.6 <= penalised.signals["duplication"] < CONFIG.dedup_threshold
    assert penalised.score < 0.85


def test_distinct_items_are_untouched() -> None:
    outcome = deduplicate(
        [item("m1", "alpha beta gamma", 0.9), item("m2", "delta epsilon zeta", 0.8)], CONFIG
    )
    assert [kept.record.id for kept in outcome.kept] == ["m1", "m2"]
    assert outcome.drops == []
    assert all(kept.signals["duplication"] == 0.0 for kept in outcome.kept)


def test_explicit_supersession_moves_the_older_after_current_items() -> None:
    old = item("m1", "we deploy with jenkins", 0.9, days_old=30, superseded_by=("m3",))
    old.superseded = True
    other = item("m2", "deploys happen on tuesdays", 0.5)
    new = item("m3", "we deploy with github actions", 0.4, days_old=1)
    outcome = deduplicate([old, other, new], CONFIG)
    assert [kept.record.id for kept in outcome.kept] == ["m2", "m3", "m1"]
    assert {"older": "m1", "newer": "m3", "why": "explicit supersedes edge"} in outcome.stale


def test_newer_negation_on_same_entity_marks_the_older_stale() -> None:
    old = item("m1", "Atlas uses the Postgres database for storage", 0.9, days_old=20, entities=("Atlas",))
    new = item(
        "m2", "Atlas no longer uses the Postgres database for storage", 0.7, days_old=2, entities=("Atlas",)
    )
    outcome = deduplicate([old, new], CONFIG)
    assert [kept.record.id for kept in outcome.kept] == ["m2", "m1"]
    assert outcome.kept[1].superseded
    assert outcome.kept[1].superseded_by == ["m2"]
    assert outcome.stale == [{"older": "m1", "newer": "m2", "why": "contradiction: negation"}]


def test_changed_value_on_same_entity_marks_the_older_stale() -> None:
    old = item("m1", "Atlas budget is 40000 euros", 0.9, days_old=20, entities=("Atlas",))
    new = item("m2", "Atlas budget is 55000 euros", 0.8, days_old=2, entities=("Atlas",))
    outcome = deduplicate([old, new], CONFIG)
    assert outcome.stale[0]["why"] == "contradiction: changed value"


def test_same_speaker_alone_is_not_a_contradiction() -> None:
    old = item("m1", "Caroline: I love painting", 0.9, days_old=20, entities=("Caroline",), source="Caroline")
    new = item(
        "m2", "Caroline: I don't love painting", 0.8, days_old=2, entities=("Caroline",), source="Caroline"
    )
    outcome = deduplicate([old, new], CONFIG)
    assert outcome.stale == []
    assert not outcome.kept[0].superseded


def test_a_why_question_infers_no_contradictions_but_keeps_explicit_supersession() -> None:
    context = RankingContext(query="why", intent=Intent.WHY, entities=(), now=NOW)
    atlas = ("Atlas",)
    before = item("m1", "Atlas budget is 40000 euros", 0.9, days_old=20, entities=atlas)
    after = item("m2", "Atlas budget is 55000 euros", 0.8, days_old=2, entities=atlas)
    old = item("m3", "we deploy with jenkins", 0.7, days_old=30, superseded_by=("m4",))
    new = item("m4", "we deploy with github actions", 0.6, days_old=1)
    for ranked in (before, after, old, new):
        ranked.context = context
    outcome = deduplicate([before, after, old, new], CONFIG)
    assert outcome.stale == [{"older": "m3", "newer": "m4", "why": "explicit supersedes edge"}]
    assert not before.superseded
    # The same pair in a question about the current state: the old budget is outdated.
    for ranked in (before, after):
        ranked.context = replace(context, intent=Intent.GENERAL)
    assert deduplicate([before, after], CONFIG).stale == [
        {"older": "m1", "newer": "m2", "why": "contradiction: changed value"}
    ]


# --- the indexed dedup against a plain pairwise reading of its rules ---------------------------------

WORDS = ["atlas", "budget", "sensor", "vendor", "launch", "april", "delay", "board", "team", "plan"]
EXTRAS = ["", " no longer", " 40000", " 55000", " never"]


def _reference(items: list[RankedItem]) -> tuple[list[tuple[str, str]], list[dict[str, str]]]:
    """Dedup as its module docstring states it, every pair compared directly (no indexes)."""
    kept: list[RankedItem] = []
    drops: list[tuple[str, str]] = []
    for candidate in items:
        mine = _plain_facts(candidate)
        twin = next(
            (k for k in kept if content_hash(k.record.content) == content_hash(candidate.record.content)),
            None,
        )
        overlaps = [(k, _plain_jaccard(mine[0], _plain_facts(k)[0])) for k in kept]
        if twin is None:
            twin = next(
                (k for k, j in overlaps if j >= CONFIG.dedup_threshold and _plain_facts(k)[1:] == mine[1:]),
                None,
            )
        if twin is not None:
            twin.absorbed_ids.append(candidate.record.id)
            drops.append((candidate.record.id, f"duplicate of {twin.record.id}"))
            continue
        worst = max((j for _, j in overlaps), default=0.0)
        value = worst if worst >= SOFT_DUPLICATE else 0.0
        candidate.signals["duplication"] = round(value, 6)
        candidate.score -= CONFIG.weights.duplication * value
        kept.append(candidate)
    kept.sort(key=order_key)
    return drops, _reference_stale(kept)


def _reference_stale(kept: list[RankedItem]) -> list[dict[str, str]]:
    stale, marks = [], dict.fromkeys(range(len(kept)), 0)
    for newer in kept:
        for position, older in enumerate(kept):
            if older is newer or marks[position] >= MAX_STALE_MARKS:
                continue
            if not newer.record.created_at > older.record.created_at:
                continue
            why = _plain_contradiction(older, newer)
            if why is not None and newer.record.id not in older.superseded_by:
                older.superseded_by.append(newer.record.id)
                marks[position] += 1
                stale.append({"older": older.record.id, "newer": newer.record.id, "why": why})
    return stale


def _plain_facts(candidate: RankedItem) -> tuple[frozenset[str], bool, frozenset[str]]:
    content = candidate.record.content
    return (
        frozenset(tokenize(content)),
        has_negation(content),
        frozenset(re.findall(r"\d+(?:[.,:]\d+)*", content)),
    )


def _plain_jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def _plain_contradiction(older: RankedItem, newer: RankedItem) -> str | None:
    (old_words, old_negated, old_values), (new_words, new_negated, new_values) = (
        _plain_facts(older),
        _plain_facts(newer),
    )
    speakers = {older.record.source.casefold(), newer.record.source.casefold()}
    subjects = {e.casefold() for e in older.record.entities} - {older.record.source.casefold()}
    subjects &= {e.casefold() for e in newer.record.entities} - {newer.record.source.casefold()}
    if not subjects - speakers or not old_words or not new_words:
        return None
    if len(old_words & new_words) < CONTRADICTION_OVERLAP * max(len(old_words), len(new_words)):
        return None
    if old_negated != new_negated:
        return "contradiction: negation"
    return "contradiction: changed value" if old_values and new_values and old_values != new_values else None


_ITEM = st.tuples(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=6),
    st.sampled_from(EXTRAS),
    st.sampled_from([(), ("Atlas",), ("Atlas", "Board"), ("Caroline",)]),
    st.sampled_from(["user", "Caroline"]),
    st.integers(min_value=1, max_value=30),
    st.integers(min_value=0, max_value=3),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ITEM, min_size=1, max_size=14))
def test_indexed_dedup_matches_pairwise_rules(
    specs: list[tuple[list[str], str, tuple[str, ...], str, int, int]],
) -> None:
    def build() -> list[RankedItem]:
        made = [
            item(
                f"m{n}",
                " ".join(words) + extra,
                1.0 - score / 10 - n / 1000,
                days_old=age,
                entities=names,
                source=who,
            )
            for n, (words, extra, names, who, age, score) in enumerate(specs)
        ]
        return sorted(made, key=order_key)

    outcome, expected = deduplicate(build(), CONFIG), build()
    drops, stale = _reference(expected)
    assert outcome.drops == drops
    assert outcome.stale == stale
    by_id = {kept.record.id: kept for kept in expected}
    for kept in outcome.kept:
        twin = by_id[kept.record.id]
        assert (kept.score, kept.signals, kept.absorbed_ids) == (twin.score, twin.signals, twin.absorbed_ids)
        assert kept.superseded_by == twin.superseded_by
