"""The server's own retrieval, ``search_nodes``, as the backend's native recall.

``search_nodes(query)`` returns the entities whose name, type or any observation contains ``query``
(case-insensitive substring), each with all its observations, in file order: no ranking. To score it
per memory:

* ``terms`` (the default): one ``search_nodes`` per query word (stop words dropped), as an agent
  searching keyword by keyword would; entities returned for more words come first;
* ``literal``: one ``search_nodes`` with the whole query text, exactly what the tool does.

Inside an entity its observations containing more of the query words come first, then the rest in
the server's order (an agent reading the entity sees all of them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from memory_orchestrator.adapters.mcp_kg.graph import Graph, KnowledgeGraph
from memory_orchestrator.adapters.mcp_kg.snapshot import Snapshot
from memory_orchestrator.ports import Hit, MemoryRecord
from memory_orchestrator.ports.text import tokenize

RECALL_MODES = ("terms", "literal")
#: At most this many words of a question become ``search_nodes`` calls.
MAX_TERMS = 8


async def search_nodes_hits(
    kg: KnowledgeGraph, snap: Snapshot, text: str, mode: str, admits: Callable[[MemoryRecord], bool]
) -> list[Hit]:
    """The memories ``search_nodes`` finds for ``text``, best first (see the module docstring)."""
    words = list(dict.fromkeys(tokenize(text)))[:MAX_TERMS]
    queries = [text.strip()] if mode == "literal" else words
    if not queries or not queries[0]:
        return []
    graphs: Sequence[Graph] = await asyncio.gather(*(kg.search_nodes(query) for query in queries))
    entity_votes: dict[str, int] = {}
    for graph in graphs:
        for entity in graph.entities:
            entity_votes[entity.name] = entity_votes.get(entity.name, 0) + 1
    order = {name: position for position, name in enumerate(entity_votes)}
    ranked = sorted(entity_votes, key=lambda name: (-entity_votes[name], order[name]))
    hits: list[Hit] = []
    seen: set[str] = set()
    for name in ranked:
        observations = [
            (sum(word in observation.lower() for word in words), position, observation)
            for position, observation in enumerate(_observations(graphs, name))
        ]
        observations.sort(key=lambda item: (-item[0], item[1]))
        for contained, _, observation in observations:
            for memory_id in snap.by_observation.get((name, observation), ()):
                record = snap.records[memory_id]
                if memory_id in seen or not admits(record):
                    continue
                seen.add(memory_id)
                score = entity_votes[name] + contained / (len(words) + 1)
                signals = {"entity_terms": float(entity_votes[name]), "observation_terms": float(contained)}
                hits.append(Hit(record, round(score, 6), via="recall", signals=signals))
    hits.sort(key=lambda hit: -hit.score)
    return hits


def _observations(graphs: Sequence[Graph], name: str) -> tuple[str, ...]:
    for graph in graphs:
        for entity in graph.entities:
            if entity.name == name:
                return entity.observations
    return ()
