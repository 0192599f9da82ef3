"""The bundled Atlas example set: well-formed, and it holds the cases the demo and the eval rely on."""

from __future__ import annotations

import pytest

from memory_orchestrator.evaluation.datasets import Dataset, load_dataset
from memory_orchestrator.examples import EXAMPLE_SETS, example_path
from memory_orchestrator.ports import EdgeType, InvalidRequest
from memory_orchestrator.ports.text import jaccard, tokenize


@pytest.fixture(scope="module")
def atlas() -> Dataset:
    (dataset,) = load_dataset(example_path("atlas"))
    return dataset


def test_bundled_as_package_data() -> None:
    assert EXAMPLE_SETS == ("atlas",)
    folder = example_path()
    assert (folder / "memories.jsonl").is_file() and (folder / "queries.jsonl").is_file()
    with pytest.raises(InvalidRequest, match="unknown example set"):
        example_path("locomo")


def test_size_and_every_reference_resolves(atlas: Dataset) -> None:
    ids = {memory.id for memory in atlas.memories}
    assert 45 <= len(atlas.memories) <= 60
    assert len(atlas.queries) >= 10
    for link in atlas.links:
        assert {link.source, link.target} <= ids
    for query in atlas.queries:
        assert query.gold and set(query.gold) <= ids, query.id
        assert set(query.must_not) <= ids, query.id
        assert query.now is not None
        # Gold memories existed when the question was asked.
        created = {m.id: m.created_at for m in atlas.memories}
        assert all(created[gold] is not None and created[gold] <= query.now for gold in query.gold)


def test_dated_over_several_months(atlas: Dataset) -> None:
    months = {m.created_at.month for m in atlas.memories if m.created_at is not None}
    assert len(months) >= 4


def causes_of(atlas: Dataset, effect: str) -> set[str]:
    return {link.source for link in atlas.links if link.type is EdgeType.CAUSAL and link.target == effect}


def test_why_question_whose_cause_shares_no_keyword(atlas: Dataset) -> None:
    texts = {memory.id: memory.content for memory in atlas.memories}
    found = []
    for query in atlas.queries:
        if query.intent != "WHY":
            continue
        question = set(tokenize(query.query)) | {word.lower() for word in query.query.split()}
        for decision in query.gold:
            for cause in causes_of(atlas, decision) & set(query.gold):
                cause_words = set(tokenize(texts[cause])) | {
                    w.lower().strip(".,:;") for w in texts[cause].split()
                }
                if not question & cause_words:
                    found.append((query.id, decision, cause))
    assert ("q01", "a26", "a24") in found


def test_superseded_decisions_and_must_not(atlas: Dataset) -> None:
    superseded = {link.target: link.source for link in atlas.links if link.type is EdgeType.SUPERSEDES}
    categories = {m.id: m.category for m in atlas.memories}
    assert len(superseded) >= 2
    assert all(categories[old] == "decision" == categories[new] for old, new in superseded.items())
    penalised = {item for query in atlas.queries for item in query.must_not}
    assert penalised & set(superseded)


def test_near_duplicate_pair_is_declared(atlas: Dataset) -> None:
    texts = {memory.id: memory.content for memory in atlas.memories}
    pairs = [(gold, dup) for query in atlas.queries for gold, dups in query.gold_dups.items() for dup in dups]
    assert pairs
    for gold, dup in pairs:
        assert texts[gold] != texts[dup]
        assert jaccard(tokenize(texts[gold]), tokenize(texts[dup])) >= 0.85
