"""Seeded synthetic memory corpora for benchmarks.

Shaped like a team's working memory: a Zipf-ish distribution of entities (a few projects and people
are everywhere, most appear rarely), a handful of sources with skewed volume, decisions with causal
cue sentences ("because", "led to"), facts, preferences and context notes, dates spread over months,
and a few explicit causal links. The same ``seed`` and size give the same corpus, byte for byte.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from itertools import accumulate

from memory_orchestrator.evaluation.datasets import Dataset, DatasetLink, DatasetMemory, DatasetQuery
from memory_orchestrator.ports import EdgeType

START = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
SPAN_DAYS = 180

_SYLLABLES = (
    "at",
    "lo",
    "ve",
    "ra",
    "ne",
    "qui",
    "sol",
    "mar",
    "tan",
    "dor",
    "bel",
    "cy",
    "on",
    "ix",
    "pe",
    "zu",
)
_FIRST_NAMES = (
    "Ada", "Bruno", "Chiara", "Dmitri", "Esther", "Farid", "Greta", "Hiro", "Ines", "Jonas", "Kemal", "Lena",
    "Mateo", "Nadia", "Omar", "Priya", "Quentin", "Rosa", "Sven", "Tariq", "Uma", "Viktor", "Wen", "Yusuf",
)  # fmt: skip
_COMPONENTS = (
    "billing service", "search index", "ingest pipeline", "auth gateway", "mobile app", "data warehouse",
    "release train", "on-call rota", "design system", "cache layer", "export job", "audit log",
)  # fmt: skip
_TECH = ("Postgres", "Kafka", "Redis", "SQLite", "Rust", "Go", "Terraform", "Kubernetes", "GraphQL", "gRPC")
_WORDS = (
    "latency", "budget", "migration", "rollout", "regression", "contract", "renewal", "outage", "backlog",
    "roadmap", "quota", "incident", "benchmark", "schema", "retention", "pricing", "onboarding", "security",
    "compliance", "throughput", "deadline", "prototype", "feedback", "dashboard", "alerting", "capacity",
)  # fmt: skip
_SOURCES = (("user", 0.45), ("agent", 0.25), ("slack", 0.15), ("email", 0.1), ("meeting-notes", 0.05))

_TEMPLATES: tuple[tuple[str, str, int], ...] = (
    (
        "decision",
        "We decided to move the {component} of {project} to {tech} because the {word} kept growing.",
        4,
    ),
    ("decision", "{person} chose {tech} for {project} in order to cut {word} before the {word2} review.", 4),
    ("fact", "{person} owns the {component} of {project}; questions about {word} go to them.", 3),
    ("fact", "The {component} outage on {project} led to a {word} freeze for two weeks.", 3),
    ("fact", "{project} depends on {vendor} for {word}; the contract renews every quarter.", 3),
    ("insight", "The {word} problem in {project} was caused by the {component}, not by {tech}.", 3),
    ("preference", "{person} prefers written {word} updates over meetings for {project}.", 2),
    ("context", "Sync with {person} and {person2} about {project}: {word} and {word2} are on track.", 2),
    ("context", "{vendor} reported a {word} issue affecting the {component}; {person} is following up.", 2),
)


@dataclass(frozen=True, slots=True)
class EntityPool:
    """Names with Zipf weights: the first names are the most frequent."""

    names: tuple[str, ...]
    cumulative: tuple[float, ...]

    @classmethod
    def zipf(cls, names: list[str], exponent: float = 1.1) -> EntityPool:
        """Weights 1 / rank**exponent."""
        weights = [1.0 / (rank**exponent) for rank in range(1, len(names) + 1)]
        return cls(tuple(names), tuple(accumulate(weights)))

    def pick(self, rng: random.Random) -> str:
        """One name, Zipf-distributed."""
        return rng.choices(self.names, cum_weights=self.cumulative, k=1)[0]


def _project_names(rng: random.Random, count: int) -> list[str]:
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < count:
        name = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()
        if name not in seen:
            seen.add(name)
            names.append(name)
    return names


def _pools(rng: random.Random, size: int) -> dict[str, EntityPool]:
    projects = _project_names(rng, max(8, min(2000, size // 40)))
    people = [
        f"{first} {rng.choice(_SYLLABLES).capitalize()}{rng.choice(_SYLLABLES)}" for first in _FIRST_NAMES
    ]
    people += [
        f"{rng.choice(_FIRST_NAMES)} {name}" for name in _project_names(rng, max(4, min(500, size // 200)))
    ]
    vendors = [f"{name}Corp" for name in _project_names(rng, max(4, min(200, size // 500)))]
    return {
        "project": EntityPool.zipf(projects),
        "person": EntityPool.zipf(people),
        "vendor": EntityPool.zipf(vendors),
    }


def _timestamps(rng: random.Random, size: int) -> list[datetime]:
    seconds = sorted(rng.uniform(0, SPAN_DAYS * 86400) for _ in range(size))
    return [START + timedelta(seconds=round(value)) for value in seconds]


def _memory(
    rng: random.Random, index: int, created_at: datetime, pools: dict[str, EntityPool]
) -> DatasetMemory:
    category, template, importance = rng.choice(_TEMPLATES)
    slots = {
        "project": pools["project"].pick(rng),
        "person": pools["person"].pick(rng),
        "person2": pools["person"].pick(rng),
        "vendor": pools["vendor"].pick(rng),
        "component": rng.choice(_COMPONENTS),
        "tech": rng.choice(_TECH),
        "word": rng.choice(_WORDS),
        "word2": rng.choice(_WORDS),
    }
    content = template.format(**slots)
    entities = tuple(
        dict.fromkeys(
            slots[key] for key in ("project", "person", "person2", "vendor") if slots[key] in content
        )
    )
    source = rng.choices([name for name, _ in _SOURCES], weights=[weight for _, weight in _SOURCES], k=1)[0]
    return DatasetMemory(
        id=f"s{index:06d}",
        content=f"{content} (note {index})",
        category=category,
        importance=importance,
        entities=entities,
        tags=(slots["word"],),
        source=source,
        created_at=created_at,
    )


def _links(rng: random.Random, memories: list[DatasetMemory]) -> list[DatasetLink]:
    """Explicit causal links from ~5% of decisions to an earlier memory about the same project."""
    latest_by_entity: dict[str, str] = {}
    links = []
    for memory in memories:
        if memory.category == "decision" and memory.entities and rng.random() < 0.05:
            cause = latest_by_entity.get(memory.entities[0])
            if cause is not None:
                links.append(DatasetLink(cause, memory.id, EdgeType.CAUSAL, round(rng.uniform(0.5, 1.0), 2)))
        for entity in memory.entities:
            latest_by_entity[entity] = memory.id
    return links


def _queries(
    rng: random.Random, memories: list[DatasetMemory], count: int, now: datetime
) -> list[DatasetQuery]:
    shapes = (
        ("why did {person} decide on {tech}?", "WHY"),
        ("what do we know about {entity} and {word}?", "ENTITY"),
        ("when was the {word} issue with {entity}?", "WHEN"),
        ("{word} {entity}", "GENERAL"),
    )
    queries = []
    for number in range(count):
        target = rng.choice(memories)
        shape, intent = shapes[number % len(shapes)]
        entity = target.entities[0] if target.entities else "the team"
        word = target.tags[0] if target.tags else "status"
        tech = next((name for name in _TECH if name in target.content), "it")
        text = shape.format(person=entity, entity=entity, tech=tech, word=word)
        queries.append(
            DatasetQuery(f"q{number:04d}", text, (target.id,), now=now, intent=intent, kind="synthetic")
        )
    return queries


def synthetic_dataset(size: int, *, queries: int = 100, seed: int = 7) -> Dataset:
    """A corpus of ``size`` memories with ``queries`` questions, fully determined by ``seed``."""
    if size <= 0:
        raise ValueError("size must be positive")
    rng = random.Random(f"{seed}:{size}")
    pools = _pools(rng, size)
    memories = [
        _memory(rng, index, moment, pools) for index, moment in enumerate(_timestamps(rng, size), start=1)
    ]
    now = START + timedelta(days=SPAN_DAYS + 1)
    return Dataset(
        name=f"synthetic-{size}",
        memories=tuple(memories),
        links=tuple(_links(rng, memories)),
        queries=tuple(_queries(rng, memories, queries, now)),
    )


def new_memories(count: int, *, seed: int = 11, start: datetime | None = None) -> list[DatasetMemory]:
    """Fresh memories for write benchmarks (same shape as the corpus, ids ``w000001`` ...)."""
    rng = random.Random(f"writes:{seed}:{count}")
    pools = _pools(rng, 1000)
    moment = start or START + timedelta(days=SPAN_DAYS)
    return [
        replace(_memory(rng, index, moment + timedelta(minutes=index), pools), id=f"w{index:06d}")
        for index in range(1, count + 1)
    ]
