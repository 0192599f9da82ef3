"""The per-process caches of parsed memories hold values the cycle collector does not walk.

A serving process keeps ~30,000 parsed rows and token sets; held as records or sets, every full
collection walked them (80 ms at a 10k store, the tail of the latency). These tests pin the property
the caches rely on, and that what they hand out is unchanged.
"""

from __future__ import annotations

import gc

import pytest

from memory_orchestrator.adapters.sqlite import rows
from memory_orchestrator.domain import candidates, dedup, entity_evidence
from memory_orchestrator.entrypoints.cli import console
from memory_orchestrator.ports import EdgeType
from memory_orchestrator.ports.text import tokenize

ROW = (
    "mem-1",
    "Paid invoice 42 on Tuesday",
    "fact",
    4,
    '["billing"]',
    '["Acme"]',
    "user",
    '{"speaker": "Ana"}',
    "2026-02-01T09:00:00.000000Z",
    "2026-02-02T09:00:00.000000Z",
)


def untracked_after_collection(value: object) -> bool:
    # A tuple is untracked once the tuples inside it are: each collection peels one level of nesting.
    for _ in range(4):
        gc.collect()
    return not gc.is_tracked(value)


def test_a_cached_row_is_plain_values_and_builds_an_equal_read_only_record() -> None:
    first = rows.record_from_row(ROW)
    second = rows.record_from_row(list(ROW), superseded_by=["mem-2"])
    assert untracked_after_collection(rows._fields(ROW))
    assert (first.id, first.tags, first.entities, dict(first.metadata)) == (
        "mem-1",
        ("billing",),
        ("Acme",),
        {"speaker": "Ana"},
    )
    assert first.created_at.isoformat() == "2026-02-01T09:00:00+00:00"
    assert second.superseded_by == ("mem-2",) and first.superseded_by == ()
    with pytest.raises(TypeError):
        first.metadata["speaker"] = "Bo"  # type: ignore[index]
    assert rows.record_from_row(ROW).metadata == {"speaker": "Ana"}


def test_a_row_without_metadata_gets_the_empty_mapping() -> None:
    record = rows.record_from_row((*ROW[:7], "{}", *ROW[8:]))
    assert dict(record.metadata) == {}


def test_edges_are_parsed_per_row() -> None:
    edge = rows.edge_from_row(("a", "b", "causal", 0.5, "{}", "2026-02-01T09:00:00Z"))
    assert (edge.type, edge.weight, dict(edge.metadata)) == (EdgeType.CAUSAL, 0.5, {})
    tagged = rows.edge_from_row(("a", "b", "causal", 1, '{"subtype": "enables"}', "2026-02-01T09:00:00Z"))
    assert dict(tagged.metadata) == {"subtype": "enables"}


def test_token_and_claim_caches_are_plain_tuples() -> None:
    text = "We never paid invoice 42 and invoice 7 on Tuesday, or 42 again"
    assert untracked_after_collection(candidates.content_tokens(text))
    assert candidates.content_words(text) == frozenset(candidates.content_tokens(text))
    _, negated, numbers = dedup._claim(text)
    assert untracked_after_collection(dedup._claim(text))
    assert negated and numbers == ("42", "7")


def test_the_console_script_collects_the_young_generation_less_often(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before = gc.get_threshold()
    monkeypatch.setattr("sys.argv", ["orchestrator", "--version"])
    try:
        console.main()
        assert gc.get_threshold() == (console.YOUNG_COLLECTION_THRESHOLD, *before[1:])
    finally:
        gc.set_threshold(*before)
    assert capsys.readouterr().out.startswith("orchestrator ")


def test_the_stems_cache_is_keyed_by_content_and_holds_a_plain_tuple() -> None:
    text = "Melanie painted games and painting sunsets"
    stems = entity_evidence.stemmed(text)
    assert untracked_after_collection(stems)
    assert len(stems) == len(set(stems)) == 4  # painted / painting: one stem; "and" is no word
    assert set(stems) == {entity_evidence.stem(word) for word in tokenize(text)}
    question = frozenset(entity_evidence.stem(word) for word in ("paint", "game", "lake"))
    assert entity_evidence.coverage("She paints games", question) == 2
