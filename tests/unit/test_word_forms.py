"""Base forms of agent nouns, searched only when none of the question's words matched."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_orchestrator.adapters.sqlite import SqliteBackend
from memory_orchestrator.domain.config import PipelineConfig
from memory_orchestrator.domain.orchestrator import Orchestrator
from memory_orchestrator.domain.requests import SearchRequest
from memory_orchestrator.domain.word_forms import base_form, with_base_forms
from memory_orchestrator.ports import Edge, EdgeType, FixedClock, NewMemory

NOW = datetime(2026, 5, 29, 9, tzinfo=UTC)


@pytest.mark.parametrize(
    ("word", "base"),
    [
        ("babysitters", "babysit"),
        ("sitters", "sit"),
        ("runners", "run"),
        ("visitors", "visit"),
        ("teacher", "teach"),
        ("owner", "own"),
        ("sellers", "sell"),  # a double "l" is the verb's own
        ("car", None),
        ("user", None),  # too short a base
        ("v2.0er", None),
    ],
)
def test_base_form_of_agent_nouns(word: str, base: str | None) -> None:
    assert base_form(word) == base


def test_base_forms_are_added_to_the_question() -> None:
    assert with_base_forms("why did we change babysitters?") == "why did we change babysitters? babysit"
    assert with_base_forms("why did we sell the car") == "why did we sell the car"


NOTES = (
    "Clara babysits on Wednesday evenings, paid in cash.",
    "Clara is moving to Lyon at the end of April.",
    "Decision: Mateo takes over from May, Wednesdays and Fridays.",
    "Bought a new kettle.",
)


async def _store(backend: SqliteBackend) -> list[str]:
    ids = []
    for days, content in zip((100, 60, 50, 40), NOTES, strict=True):
        written = await backend.remember(
            NewMemory(content, source="user", created_at=NOW - timedelta(days=days))
        )
        ids.append(written.id)
    old, cause, change, _ = ids
    await backend.link(Edge(change, old, EdgeType.SUPERSEDES, 1.0))
    await backend.link(Edge(cause, change, EdgeType.CAUSAL, 0.8))
    return ids


@pytest.mark.anyio
async def test_a_question_matching_nothing_searches_base_forms_and_walks_to_the_change(
    tmp_path: Path,
) -> None:
    async with SqliteBackend(tmp_path / "m.db", clock=FixedClock(NOW)) as backend:
        old, cause, change, _kettle = await _store(backend)
        assert await backend.search("why did we change babysitters", now=NOW) == []
        orchestrator = Orchestrator(backend, config=PipelineConfig(), clock=FixedClock(NOW))
        result = await orchestrator.search(SearchRequest("why did we change babysitters?", now=NOW))
        ids = [item.memory_id for item in result.items]
        # the change (which replaced the matched note) and its cause come first; the old note is kept
        assert ids[:2] == [change, cause] and old in ids
        assert any("base forms" in warning for warning in result.warnings)
        # a question whose own words match is searched as asked
        direct = await orchestrator.search(SearchRequest("who babysits on Wednesday?", now=NOW))
        assert not any("base forms" in warning for warning in direct.warnings)
