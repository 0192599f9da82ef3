"""The knowledge-graph server's tools, typed, and how its graph maps onto memories.

Mapping (documented in the README): every observation is one memory whose id is derived from the
entity name and the observation text, so it is stable across restarts of the server and of us; the
entity is the memory's entity and the entity type one of its tags. A relation between two entities
keeps its name and becomes a typed edge by :data:`RELATION_EDGE_TYPES` (causal names), everything
else an entity edge.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from memory_orchestrator.ports import BackendRejected, EdgeType

#: Relation names (lower case, separators as ``_``) read as causal edges; every other name is an
#: entity edge. Prefixes cover inflections (``caused_by``, ``leads_to``...).
CAUSAL_RELATION_PREFIXES = (
    "cause",
    "because",
    "leads_to",
    "led_to",
    "results_in",
    "resulted_in",
    "motivated",
    "triggered",
    "due_to",
    "prompted",
    "drives",
    "drove",
)
RELATION_EDGE_TYPES: Mapping[str, EdgeType] = {prefix: EdgeType.CAUSAL for prefix in CAUSAL_RELATION_PREFIXES}
_SEPARATORS = re.compile(r"[\s\-]+")


class Transport(Protocol):
    """What the graph needs from an MCP transport."""

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> Any:
        """Call a tool and return its decoded JSON result."""
        ...


def memory_id(entity: str, observation: str) -> str:
    """The stable id of ``observation`` on ``entity`` (``kg-`` and 24 hex digits)."""
    digest = hashlib.sha256(f"{entity}\0{observation}".encode()).hexdigest()
    return f"kg-{digest[:24]}"


#: Causal relation names whose *source* is the effect (``B caused_by A``): their edge points the other
#: way, from the cause to the effect, like every causal edge.
EFFECT_FIRST_PREFIXES = ("because", "due_to", "caused_by", "results_from", "resulted_from")


def _key(relation: str) -> str:
    return _SEPARATORS.sub("_", relation.strip().lower())


def cause_first(relation: str) -> bool:
    """False for causal names read effect -> cause (``caused_by``, ``because_of``, ``*_by``)."""
    key = _key(relation)
    return not (key.startswith(EFFECT_FIRST_PREFIXES) or key.endswith("_by"))


def edge_type(relation: str) -> EdgeType:
    """The typed edge a relation name becomes (see :data:`RELATION_EDGE_TYPES`)."""
    key = _key(relation)
    if any(key.startswith(prefix) for prefix in RELATION_EDGE_TYPES):
        return EdgeType.CAUSAL
    return EdgeType.ENTITY


@dataclass(frozen=True, slots=True)
class Entity:
    """One node of the server's graph."""

    name: str
    entity_type: str
    observations: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Relation:
    """One directed, named edge between two entities."""

    source: str
    target: str
    name: str


@dataclass(frozen=True, slots=True)
class Graph:
    """A (part of the) graph as the server returns it."""

    entities: tuple[Entity, ...]
    relations: tuple[Relation, ...]


def _graph(payload: Any) -> Graph:
    if not isinstance(payload, Mapping):
        raise BackendRejected(f"unexpected graph payload {payload!r:.200}", backend="mcp_kg")
    entities = tuple(
        Entity(str(e["name"]), str(e.get("entityType", "")), tuple(str(o) for o in e.get("observations", ())))
        for e in payload.get("entities", ())
    )
    relations = tuple(
        Relation(str(r["from"]), str(r["to"]), str(r["relationType"])) for r in payload.get("relations", ())
    )
    return Graph(entities, relations)


class KnowledgeGraph:
    """The server's tools over one transport (one memory file)."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    async def create_entities(self, entities: Sequence[Entity]) -> None:
        """Create entities (the server ignores names it already has)."""
        payload = [
            {"name": e.name, "entityType": e.entity_type, "observations": list(e.observations)}
            for e in entities
        ]
        await self.transport.call("create_entities", {"entities": payload})

    async def add_observations(self, observations: Mapping[str, Sequence[str]]) -> None:
        """Add observations to existing entities (the server skips ones it already has)."""
        payload = [{"entityName": name, "contents": list(texts)} for name, texts in observations.items()]
        await self.transport.call("add_observations", {"observations": payload})

    async def create_relations(self, relations: Sequence[Relation]) -> None:
        """Create named relations between existing entities."""
        payload = [{"from": r.source, "to": r.target, "relationType": r.name} for r in relations]
        await self.transport.call("create_relations", {"relations": payload})

    async def delete_observations(self, observations: Mapping[str, Sequence[str]]) -> None:
        """Remove observations from their entities (unknown ones are ignored by the server)."""
        payload = [{"entityName": name, "observations": list(texts)} for name, texts in observations.items()]
        await self.transport.call("delete_observations", {"deletions": payload})

    async def delete_entities(self, names: Sequence[str]) -> None:
        """Remove entities and the relations touching them."""
        await self.transport.call("delete_entities", {"entityNames": list(names)})

    async def read_graph(self) -> Graph:
        """The whole graph."""
        return _graph(await self.transport.call("read_graph", {}))

    async def search_nodes(self, query: str) -> Graph:
        """The server's own search (substring match on names, types and observations)."""
        return _graph(await self.transport.call("search_nodes", {"query": query}))

    async def open_nodes(self, names: Sequence[str]) -> Graph:
        """The named entities and the relations touching any of them (this server version)."""
        return _graph(await self.transport.call("open_nodes", {"names": list(names)}))
