"""The write-time edge rules shared by every backend."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory_orchestrator.ports import Edge, EdgeType, MemoryRecord, NewMemory
from memory_orchestrator.ports.autolinks import (
    LinkLimits,
    MemorySketch,
    entities_for,
    link_candidates,
    plan_edges,
    sketch,
)
from memory_orchestrator.ports.records import automatic_edge, frozen
from memory_orchestrator.ports.text import tokenize

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def make(
    memory_id: str, content: str, hours: float, source: str = "user", entities: tuple[str, ...] = ()
) -> MemorySketch:
    return MemorySketch(
        id=memory_id,
        content=content,
        source=source,
        created_at=T0 + timedelta(hours=hours),
        tokens=frozenset(tokenize(content)),
        entities=frozenset(name.casefold() for name in entities),
    )


def edges_of(new: MemorySketch, pool: list[MemorySketch], kind: EdgeType) -> dict[tuple[str, str], dict]:
    return {
        (edge.source, edge.target): {"weight": edge.weight, **edge.metadata}
        for edge in plan_edges(new, pool, at=T0)
        if edge.type is kind
    }


def test_backbone_links_to_previous_memory_of_the_same_source() -> None:
    pool = [make("a", "alpha", 0), make("b", "beta", 1), make("x", "other source", 1.5, source="bot")]
    new = make("n", "gamma", 2)
    temporal = edges_of(new, pool, EdgeType.TEMPORAL)
    assert temporal[("n", "b")] == {"weight": 1.0, "sub_type": "backbone"}
    assert temporal[("n", "a")]["sub_type"] == "proximity"
    assert temporal[("n", "x")]["sub_type"] == "proximity"


def test_backdated_memory_links_to_its_true_neighbours_in_time() -> None:
    pool = [make("a", "alpha", 0), make("c", "gamma", 100), make("d", "delta", 200)]
    new = make("b", "beta", 50)
    backbone = {
        key for key, meta in edges_of(new, pool, EdgeType.TEMPORAL).items() if meta["sub_type"] == "backbone"
    }
    assert backbone == {("b", "a"), ("b", "c")}


def test_proximity_is_limited_to_ten_within_24_hours_weighted_by_distance() -> None:
    pool = [make(f"m{i:02d}", f"note {i}", -i, source=f"s{i}") for i in range(1, 15)]
    pool.append(make("far", "far away", -30, source="far"))
    temporal = edges_of(make("n", "now", 0, source="me"), pool, EdgeType.TEMPORAL)
    assert len(temporal) == 10
    assert ("n", "far") not in temporal
    assert temporal[("n", "m01")]["weight"] == 0.5
    assert temporal[("n", "m03")]["weight"] == 0.25


def test_entity_edges_cap_per_name_prefer_nearest_and_weigh_rarity() -> None:
    pool = [make(f"r{i}", f"redis note {i}", -i * 48, entities=("redis",)) for i in range(1, 8)]
    pool.append(make("k", "kafka note", -500, entities=("kafka",)))
    new = make("n", "redis and kafka", 0, entities=("redis", "kafka"))
    counts = {"redis": 7, "kafka": 1}
    edges = [e for e in plan_edges(new, pool, at=T0, entity_counts=counts) if e.type is EdgeType.ENTITY]
    targets = {edge.target: edge for edge in edges}
    assert set(targets) == {"r1", "r2", "r3", "r4", "r5", "k"}
    assert targets["k"].weight == 1.0
    assert targets["r1"].weight < 0.5
    assert targets["r1"].metadata["entities"] == "redis"


def test_causal_edge_points_from_cause_to_the_memory_stating_the_reason() -> None:
    pool = [make("a", "The deploy pipeline failed on the disk", 0)]
    new = make("b", "The deploy pipeline was paused because the disk was full", 1)
    causal = edges_of(new, pool, EdgeType.CAUSAL)
    assert list(causal) == [("a", "b")]
    assert causal[("a", "b")]["sub_type"] == "causes"


def test_causal_edge_needs_overlap_and_a_cue() -> None:
    pool = [make("a", "Lunch was pizza", 0), make("c", "deploy pipeline disk", 0.5)]
    assert edges_of(make("b", "We paused deploys because disk was full", 1), pool[:1], EdgeType.CAUSAL) == {}
    assert edges_of(make("d", "deploy pipeline disk again", 1), pool[1:], EdgeType.CAUSAL) == {}


def test_causal_subtype_comes_from_the_effect_text() -> None:
    pool = [make("a", "Rate limiting on the public API", 0)]
    new = make("b", "Rate limiting on the public API prevents abuse by bots", 1)
    assert edges_of(new, pool, EdgeType.CAUSAL)[("a", "b")]["sub_type"] == "prevents"


def test_semantic_edges_keep_the_top_three_similar() -> None:
    text = "postgres connection pool size tuning"
    pool = [make(f"s{i}", text + f" variant{i}", -i * 100) for i in range(5)]
    pool.append(make("u", "completely unrelated words here", -1000))
    semantic = edges_of(make("n", text, 0), pool, EdgeType.SEMANTIC)
    assert len(semantic) == 3
    assert ("n", "u") not in semantic


def test_link_candidates_flag_near_duplicates_first() -> None:
    pool = [
        make("dup", "we deploy on fridays after the standup meeting", 0),
        make("sim", "deploy on fridays after lunch", 0),
        make("no", "cats are great", 0),
    ]
    found = link_candidates(make("n", "We deploy on Fridays, after the standup meeting.", 1), pool)
    assert [candidate.id for candidate in found] == ["dup", "sim"]
    assert found[0].reason.startswith("near duplicate")


def test_entities_for_merges_given_and_extracted_names() -> None:
    memory = NewMemory("Alice Smith moved the API to PostgreSQL", entities=("postgresql", "Billing"))
    assert entities_for(memory) == ("postgresql", "Billing", "Alice Smith", "API")


def test_entities_for_adds_known_names_the_content_mentions() -> None:
    memory = NewMemory("the kafka consumer lagged again")
    assert entities_for(memory, {"kafka": "Kafka", "redis": "Redis"}) == ("Kafka",)


def test_equal_similarity_goes_to_the_memory_nearest_in_time() -> None:
    pool = [make("z-far", "postgres pool tuning", -50), make("a-near", "postgres pool tuning", -1)]
    [edge] = [
        e
        for e in plan_edges(make("n", "postgres pool tuning", 0), pool, at=T0)
        if e.type is EdgeType.SEMANTIC
    ][:1]
    assert edge.target == "a-near"


def test_edge_metadata_is_a_read_only_copy_unless_already_frozen() -> None:
    given = {"sub_type": "manual"}
    edge = Edge("a", "b", EdgeType.ENTITY, 1.0, given)
    given["sub_type"] = "changed"
    assert edge.metadata == {"sub_type": "manual"}
    with pytest.raises(TypeError):
        edge.metadata["sub_type"] = "x"  # type: ignore[index]

    shared = frozen({"sub_type": "lexical"})
    first, second = (Edge("a", target, EdgeType.SEMANTIC, 0.5, shared) for target in ("b", "c"))
    assert first.metadata is shared and second.metadata is shared


def test_entity_edges_sharing_the_same_names_share_one_metadata_view() -> None:
    pool = [make(f"r{i}", f"redis note {i}", -i, entities=("redis",)) for i in range(1, 4)]
    pool.append(make("both", "redis and kafka note", -5, entities=("redis", "kafka")))
    new = make("n", "redis and kafka", 0, entities=("redis", "kafka"))
    edges = {e.target: e for e in plan_edges(new, pool, at=T0) if e.type is EdgeType.ENTITY}
    assert edges["r1"].metadata is edges["r2"].metadata is edges["r3"].metadata
    assert dict(edges["r1"].metadata) == {"sub_type": "shared_entity", "entities": "redis"}
    assert dict(edges["both"].metadata) == {"sub_type": "shared_entity", "entities": "kafka,redis"}
    with pytest.raises(TypeError):
        edges["r1"].metadata["entities"] = "x"  # type: ignore[index]


def test_an_automatic_edge_is_the_edge_the_constructor_makes() -> None:
    metadata = frozen({"sub_type": "proximity"})
    made = automatic_edge("a", "b", EdgeType.TEMPORAL, 0.5, metadata, T0)
    expected = Edge("a", "b", EdgeType.TEMPORAL, 0.5, metadata, T0)
    assert made == expected
    assert repr(made) == repr(expected)
    assert hash(made) == hash(expected)
    assert made.metadata is metadata  # kept, not copied
    with pytest.raises(AttributeError):
        made.weight = 1.0  # type: ignore[misc]
    # plain metadata is made read-only, as the constructor makes it
    plain = automatic_edge("a", "b", EdgeType.TEMPORAL, 0.5, {"sub_type": "proximity"}, T0)
    assert plain == expected
    with pytest.raises(TypeError):
        plain.metadata["sub_type"] = "x"  # type: ignore[index]


def test_causal_edges_carry_read_only_metadata() -> None:
    cause = make("a", "The vendor missed the deadline for the Atlas migration", 0)
    effect = make("b", "The Atlas migration was delayed because the vendor missed the deadline", 1)
    edges = [edge for edge in plan_edges(effect, [cause], at=T0) if edge.type is EdgeType.CAUSAL]
    assert edges
    with pytest.raises(TypeError):
        edges[0].metadata["sub_type"] = "x"  # type: ignore[index]


def test_entity_edges_go_to_the_most_shared_names_first_then_the_nearest() -> None:
    pool = [
        make("far-both", "atlas and postgres", -100, entities=("atlas", "postgres")),
        make("near-atlas", "atlas", -1, entities=("atlas",)),
        make("nearer-postgres", "postgres", -0.5, entities=("postgres",)),
        make("later-atlas", "atlas later", 3, entities=("atlas",)),
        make("old-atlas", "atlas old", -50, entities=("atlas",)),
    ]
    new = make("n", "atlas on postgres", 0, entities=("atlas", "postgres"))

    def targets(per_name: int) -> list[str]:
        limits = LinkLimits(entity_per_name=per_name, entity_max=4)
        edges = plan_edges(new, pool, at=T0, limits=limits)
        return [edge.target for edge in edges if edge.type is EdgeType.ENTITY]

    # far-both is atlas's 4th nearest carrier: with 3 per name it shares postgres only
    assert targets(3) == ["nearer-postgres", "near-atlas", "later-atlas", "old-atlas"]
    assert targets(4) == ["far-both", "nearer-postgres", "near-atlas", "later-atlas"]
    assert targets(0) == []


def test_sketches_share_one_string_per_word() -> None:
    # Backends keep many sketches (SQLite: tens of thousands); each word is stored once, not per memory.
    word = "".join(["post", "gres"])  # built at run time, so not interned by the compiler
    other = "".join(["post", "gres"])
    assert word is not other
    first = sketch(MemoryRecord(id="a", content=f"moved to {word}", created_at=T0, updated_at=T0))
    second = sketch(MemoryRecord(id="b", content="x", created_at=T0, updated_at=T0), tokens=[other])
    (shared,) = first.tokens & second.tokens
    assert next(token for token in first.tokens if token == shared) is next(iter(second.tokens))
