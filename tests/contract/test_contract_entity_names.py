"""Contract: entity filters and expand seeds resolve against the store's names on every backend.

"Stratus" finds the memories about "Stratus Hosting" (whole-word prefix, any case, or its initials
"SH"); "Strat" finds nothing and says which known names are close.
"""

from __future__ import annotations

import pytest

from conftest import at
from memory_orchestrator.domain.orchestrator import Orchestrator
from memory_orchestrator.domain.requests import ExpandRequest, SearchRequest
from memory_orchestrator.ports import Filters, MemoryBackend, NewMemory, NotFound

pytestmark = pytest.mark.anyio

MEMORIES = [
    ("Stratus Hosting raised its prices by twenty percent", ("Stratus Hosting",)),
    ("Stratus Hosting had a storage outage on Tuesday", ("Stratus Hosting",)),
    ("Nimbus Cloud offers a discount on prices for storage", ("Nimbus Cloud",)),
    ("Atlas migration plan: move storage off the old racks", ("Atlas",)),
]


async def _store(backend: MemoryBackend) -> dict[str, str]:
    ids = {}
    for day, (content, entities) in enumerate(MEMORIES):
        written = await backend.remember(
            NewMemory(content, entities=entities, source=f"s{day}", created_at=at(days=day))
        )
        ids[content] = written.id
    return ids


async def _search(orchestrator: Orchestrator, *names: str) -> tuple[set[str], tuple[str, ...]]:
    request = SearchRequest(query="storage prices outage", filters=Filters(entities=names), top_k=10)
    result = await orchestrator.search(request)
    return {item.memory_id for item in result.items}, result.warnings


@pytest.mark.parametrize("name", ["Stratus", "stratus", "STRATUS HOSTING", "SH"])
async def test_an_entity_filter_matches_by_whole_word_prefix_case_and_initials(
    backend: MemoryBackend, name: str
) -> None:
    ids = await _store(backend)
    found, warnings = await _search(Orchestrator(backend), name)
    stratus = {ids[content] for content, entities in MEMORIES if entities == ("Stratus Hosting",)}
    assert found == stratus
    assert not [warning for warning in warnings if "matches no known entity" in warning]


async def test_a_filter_matching_no_known_entity_says_so_with_the_closest_names(
    backend: MemoryBackend,
) -> None:
    await _store(backend)
    found, warnings = await _search(Orchestrator(backend), "Strat")
    assert found == set()  # "Strat" is not a whole word of "Stratus Hosting"
    [warning] = [warning for warning in warnings if "matches no known entity" in warning]
    assert warning.startswith('filters.entities: "Strat" matches no known entity; closest known: ')
    assert "Stratus Hosting" in warning and "Atlas" not in warning


async def test_one_unknown_name_does_not_hide_the_known_ones(backend: MemoryBackend) -> None:
    ids = await _store(backend)
    found, warnings = await _search(Orchestrator(backend), "atlas", "Zebra Corp")
    assert found == {ids[MEMORIES[3][0]]}
    assert any('"Zebra Corp" matches no known entity; no known entity is close' in w for w in warnings)


async def test_expand_seeds_resolve_like_filters(backend: MemoryBackend) -> None:
    ids = await _store(backend)
    orchestrator = Orchestrator(backend)
    result = await orchestrator.expand(ExpandRequest(seed_entities=("stratus",), hops=1))
    assert set(result.seeds) == {ids[MEMORIES[0][0]], ids[MEMORIES[1][0]]}
    with pytest.raises(NotFound, match=r'"Strat" matches no known entity; closest known: Stratus Hosting'):
        await orchestrator.expand(ExpandRequest(seed_entities=("Strat",), hops=1))
