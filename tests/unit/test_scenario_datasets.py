"""The held-out scenario sets under eval/scenarios/: they load, and their labels are consistent.

A data-integrity test, not a score test: every id a query or link names exists, every question kind
is asked at least twice, gold evidence exists at the moment the question is asked, and every
must-not memory of a superseded or as-of question is really out of date at that moment (replaced,
through ``supersedes`` links, by a gold memory) or does not exist yet.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from memory_orchestrator.evaluation.datasets import Dataset, DatasetQuery, load_dataset
from memory_orchestrator.ports import EdgeType

SCENARIOS = Path(__file__).resolve().parents[2] / "eval" / "scenarios"
NAMES = ("household", "oss-maintainers")
KINDS = ("causal-chain", "time-window", "entity-profile", "superseded", "as-of", "recent-changes")


def _load(name: str) -> Dataset:
    [store] = load_dataset(SCENARIOS / name)
    return store


def _replaced_by(store: Dataset) -> dict[str, set[str]]:
    """Memory id -> every memory that replaces it, directly or through a chain of replacements."""
    direct: dict[str, set[str]] = {}
    for link in store.links:
        if link.type is EdgeType.SUPERSEDES:
            direct.setdefault(link.target, set()).add(link.source)
    closure: dict[str, set[str]] = {}
    for old in direct:
        seen: set[str] = set()
        todo = list(direct[old])
        while todo:
            newer = todo.pop()
            if newer not in seen:
                seen.add(newer)
                todo.extend(direct.get(newer, ()))
        closure[old] = seen
    return closure


def _named_ids(query: DatasetQuery) -> set[str]:
    dups = {dup for group in query.gold_dups.values() for dup in group}
    return {*query.gold, *query.must_not, *query.gold_dups, *dups}


def test_the_scenario_folder_holds_exactly_the_documented_sets() -> None:
    found = sorted(child.name for child in SCENARIOS.iterdir() if child.is_dir())

    assert found == sorted(NAMES)
    assert all((SCENARIOS / name / "README.md").is_file() for name in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_every_id_a_query_or_link_names_exists(name: str) -> None:
    store = _load(name)
    ids = {memory.id for memory in store.memories}

    assert 50 <= len(ids) <= 80 and 14 <= len(store.queries) <= 20
    for query in store.queries:
        assert query.gold, f"{query.id} has no gold"
        assert _named_ids(query) <= ids, f"{query.id} names unknown ids {_named_ids(query) - ids}"
        assert not set(query.gold) & set(query.must_not), f"{query.id}: gold and must_not overlap"
    for link in store.links:
        assert {link.source, link.target} <= ids, f"link {link.source} -> {link.target}"


@pytest.mark.parametrize("name", NAMES)
def test_every_kind_is_asked_at_least_twice_and_only_known_kinds(name: str) -> None:
    kinds = Counter(query.kind for query in _load(name).queries)

    assert set(kinds) == set(KINDS)
    assert min(kinds.values()) >= 2, kinds


@pytest.mark.parametrize("name", NAMES)
def test_gold_exists_when_the_question_is_asked(name: str) -> None:
    store = _load(name)
    created = {memory.id: memory.created_at for memory in store.memories}

    assert all(created.values()), "every scenario memory is dated"
    for query in store.queries:
        assert query.now is not None, f"{query.id} has no 'now'"
        late = [gold for gold in query.gold if (created[gold] or query.now) > query.now]
        assert not late, f"{query.id}: gold {late} is written after the question is asked"


@pytest.mark.parametrize("name", NAMES)
def test_must_not_memories_are_out_of_date_at_the_question_moment(name: str) -> None:
    store = _load(name)
    created = {memory.id: memory.created_at for memory in store.memories}
    replaced_by = _replaced_by(store)
    dated = [query for query in store.queries if query.kind in ("superseded", "as-of")]

    assert dated
    for query in dated:
        assert query.must_not, f"{query.id} ({query.kind}) lists no must_not"
        for stale in query.must_not:
            when = created[stale]
            assert query.now is not None and when is not None
            not_yet_written = when > query.now
            replaced = bool(replaced_by.get(stale, set()) & set(query.gold))
            assert not_yet_written or replaced, f"{query.id}: {stale} is neither later nor replaced"
