"""The Cypher statements of the Neo4j backend.

Every statement is a constant: caller input only ever travels as parameters. Every statement is scoped
by ``$store`` (directly or through ``uid`` keys that start with it). Node variable ``m`` is the memory a
filter applies to.
"""

from __future__ import annotations

from memory_orchestrator.adapters.neo4j.schema import FULLTEXT_INDEX
from memory_orchestrator.ports import EdgeType

#: Relationship type per edge type (a fixed table, so no input ever becomes a type name).
RELATIONSHIP_TYPES: dict[EdgeType, str] = {kind: kind.value.upper() for kind in EdgeType}
EDGE_TYPES_BY_RELATIONSHIP: dict[str, EdgeType] = {rel: kind for kind, rel in RELATIONSHIP_TYPES.items()}

#: A memory node with ``superseded_by`` = the active memories superseding it (sorted), as the port wants.
MEMORY = (
    "m {.*, superseded_by: COLLECT { MATCH (s:Memory)-[:SUPERSEDES]->(m) WHERE s.forgotten = false "
    "RETURN s.id ORDER BY s.id }}"
)

#: Active memory of the store passing every ``Filters`` restriction and visible "as of" ``$now``.
#: The time bounds are always numbers (open sides are sentinels) so they stay index-seekable ranges.
MEMORY_FILTER = """
m.store = $store AND m.forgotten = false
AND m.created_at <= $now AND m.created_at >= $start AND m.created_at < $end
AND ($categories IS NULL OR m.category IN $categories)
AND ($sources IS NULL OR m.source IN $sources)
AND ($filter_entity_uids IS NULL
     OR EXISTS { MATCH (m)-[:MENTIONS]->(fe:Entity) WHERE fe.uid IN $filter_entity_uids })
"""

KEYWORD_CHANNEL = f"""
CALL () {{
  UNWIND CASE WHEN $lucene = '' THEN [] ELSE [$lucene] END AS lucene
  CALL db.index.fulltext.queryNodes('{FULLTEXT_INDEX}', lucene, {{limit: $fulltext_limit}})
  YIELD node AS m, score
  WHERE {MEMORY_FILTER}
  WITH m, score ORDER BY score DESC, m.id LIMIT $depth
  RETURN collect({{memory: {MEMORY}, score: score}}) AS keyword
}}
"""

SEARCH = KEYWORD_CHANNEL + "RETURN keyword"

RECALL = (
    KEYWORD_CHANNEL
    + f"""
CALL () {{
  MATCH (m:Memory) WHERE {MEMORY_FILTER}
  WITH m ORDER BY m.store DESC, m.created_at DESC LIMIT $recency_depth + $tie_slack
  WITH m ORDER BY m.created_at DESC, m.id DESC LIMIT $recency_depth
  RETURN collect({{memory: {MEMORY}, score: 1.0}}) AS recency
}}
CALL () {{
  UNWIND $anchor_uids AS anchor
  CALL (anchor) {{
    MATCH (m:Memory)-[mention:MENTIONS]->()
    // Without the hint the planner may seek every memory by time and expand all their mentions.
    USING INDEX mention:MENTIONS(entity_uid, created_at)
    WHERE mention.entity_uid = anchor AND mention.created_at <= $now AND {MEMORY_FILTER}
    WITH m ORDER BY mention.entity_uid DESC, mention.created_at DESC LIMIT $depth
    RETURN m
  }}
  WITH DISTINCT m ORDER BY m.created_at DESC, m.id DESC LIMIT $depth
  RETURN collect({{memory: {MEMORY}, score: 1.0}}) AS entity
}}
RETURN keyword, recency, entity
"""
)

RECENT = f"""
MATCH (m:Memory) WHERE {MEMORY_FILTER}
WITH m ORDER BY m.store DESC, m.created_at DESC LIMIT $limit + $tie_slack
WITH m ORDER BY m.created_at DESC, m.id DESC LIMIT $limit
RETURN {MEMORY} AS m
"""

#: One hop of ``neighbors`` for the whole frontier: per (memory, edge type) its strongest edge.
NEIGHBORS_HOP = f"""
UNWIND $frontier AS start_uid
MATCH (a:Memory {{uid: start_uid}}) WHERE a.forgotten = false
CALL (a) {{
  // A subquery so the planner walks out from the frontier instead of seeking every memory by time.
  MATCH (a)-[r:TEMPORAL|ENTITY|CAUSAL|SEMANTIC|SUPERSEDES]-(m:Memory)
  RETURN r, m
}}
WITH a, r, m WHERE type(r) IN $types AND NOT m.id IN $visited AND {MEMORY_FILTER}
WITH a, r, m ORDER BY r.weight DESC, a.id
WITH m, type(r) AS rel_type, collect({{rel: r, from_id: a.id}})[0] AS best
WITH m, rel_type, best ORDER BY best.rel.weight DESC, m.id, rel_type LIMIT $limit
RETURN {MEMORY} AS m, best.from_id AS from_id, rel_type AS type, startNode(best.rel).id AS source,
       endNode(best.rel).id AS target, best.rel.weight AS weight, best.rel.metadata AS metadata,
       best.rel.created_at AS created_at
"""

#: One hop ranked, capped per origin and floored in the store (``ports.RankedNeighbors``): as
#: ``NEIGHBORS_HOP`` (per reached memory and type its strongest edge), then per (origin, memory) the
#: strongest entry by ``$weights[type] * weight`` (clamped to 0..1), none below ``$min_strength``, and
#: per origin its ``$per_source`` strongest memories, ties by id. Same order and ties as SQLite's hop.
STRONGEST_HOP = f"""
UNWIND $frontier AS start_uid
MATCH (a:Memory {{uid: start_uid}}) WHERE a.forgotten = false
CALL (a) {{
  MATCH (a)-[r:TEMPORAL|ENTITY|CAUSAL|SEMANTIC|SUPERSEDES]-(m:Memory)
  RETURN r, m
}}
WITH a, r, m WHERE type(r) IN $types AND NOT m.id IN $visited AND {MEMORY_FILTER}
WITH a, r, m ORDER BY r.weight DESC, a.id
WITH m, type(r) AS rel_type, collect({{rel: r, from_id: a.id}})[0] AS best
WITH m, rel_type, best,
     $weights[rel_type] * CASE WHEN best.rel.weight < 0.0 THEN 0.0 WHEN best.rel.weight > 1.0 THEN 1.0
                               ELSE best.rel.weight END AS strength
WITH m, rel_type, best, strength ORDER BY strength DESC, best.rel.weight DESC, rel_type
WITH best.from_id AS origin, m, collect({{rel_type: rel_type, best: best, strength: strength}})[0] AS pick
WHERE pick.strength >= $min_strength
WITH origin, m, pick ORDER BY pick.strength DESC, m.id
WITH origin, collect({{m: m, pick: pick}})[0..$per_source] AS kept
UNWIND kept AS entry
WITH entry.m AS m, entry.pick.rel_type AS rel_type, entry.pick.best AS best
ORDER BY best.rel.weight DESC, m.id, rel_type LIMIT $limit
RETURN {MEMORY} AS m, best.from_id AS from_id, rel_type AS type, startNode(best.rel).id AS source,
       endNode(best.rel).id AS target, best.rel.weight AS weight, best.rel.metadata AS metadata,
       best.rel.created_at AS created_at
"""

GET = (
    """
UNWIND range(0, size($uids) - 1) AS position
MATCH (m:Memory {uid: $uids[position]}) WHERE m.forgotten = false
WITH m, position ORDER BY position
RETURN """
    + MEMORY
    + " AS m"
)

EXISTING_DUPLICATE = (
    """
MATCH (m:Memory) WHERE m.store = $store AND m.content_hash = $hash AND m.forgotten = false
WITH m ORDER BY m.created_at, m.id LIMIT 1
RETURN """
    + MEMORY
    + " AS m"
)

#: Everything the write-time link rules need, in one round trip. The same candidate queries as the
#: SQLite backend (see ``ports.autolinks``), so both stores build the same edges from the same writes.
LINK_CANDIDATES = (
    """
CALL () {
  // Known names the content mentions (ports.text.name_candidates keys) join the memory's entities.
  UNWIND $name_uids AS name_uid
  MATCH (e:Entity {uid: name_uid}) WHERE COUNT { (e)<-[:MENTIONS]-() } > 0
  RETURN collect([e.key, e.name]) AS known
}
WITH known, reduce(
  uids = [], uid IN $entity_uids + [pair IN known | $store + ':' + pair[0]]
  | CASE WHEN uid IN uids THEN uids ELSE uids + uid END
) AS entity_uids
CALL () {
  MATCH (m:Memory) WHERE $dedup AND m.store = $store AND m.content_hash = $hash AND m.forgotten = false
  WITH m ORDER BY m.created_at, m.id LIMIT 1
  RETURN collect("""
    + MEMORY
    + """) AS duplicate
}
CALL () {
  MATCH (m:Memory) WHERE m.store = $store AND m.source = $source AND m.created_at <= $at
    AND m.forgotten = false
  WITH m ORDER BY m.store DESC, m.source DESC, m.created_at DESC LIMIT $causal_window
  RETURN collect(m) AS earlier
}
CALL () {
  MATCH (m:Memory) WHERE m.store = $store AND m.source = $source AND m.created_at >= $at
    AND m.forgotten = false
  WITH m ORDER BY m.store, m.source, m.created_at LIMIT 2
  RETURN collect(m) AS later
}
CALL () {
  MATCH (m:Memory) WHERE m.store = $store AND m.forgotten = false
    AND m.created_at >= $window_start AND m.created_at <= $at
  WITH m ORDER BY m.store DESC, m.created_at DESC LIMIT $proximity_max
  RETURN collect(m) AS before
}
CALL () {
  MATCH (m:Memory) WHERE m.store = $store AND m.forgotten = false
    AND m.created_at >= $at AND m.created_at <= $window_end
  WITH m ORDER BY m.store, m.created_at LIMIT $proximity_max
  RETURN collect(m) AS after
}
CALL (entity_uids) {
  UNWIND entity_uids AS entity_uid
  CALL (entity_uid) {
    MATCH (m:Memory)-[mention:MENTIONS]->()
    WHERE mention.entity_uid = entity_uid AND mention.created_at <= $at
    WITH m ORDER BY mention.entity_uid DESC, mention.created_at DESC LIMIT $entity_per_name
    RETURN m
    UNION
    MATCH (m:Memory)-[mention:MENTIONS]->()
    WHERE mention.entity_uid = entity_uid AND mention.created_at >= $at
    WITH m ORDER BY mention.entity_uid, mention.created_at LIMIT $entity_per_name
    RETURN m
  }
  RETURN collect(m) AS sharing
}
CALL (entity_uids) {
  UNWIND entity_uids AS entity_uid
  MATCH (e:Entity {uid: entity_uid})
  RETURN collect([e.key, COUNT { (e)<-[:MENTIONS]-() }]) AS counts
}
CALL () {
  UNWIND CASE WHEN $lucene = '' THEN [] ELSE [$lucene] END AS lucene
  CALL db.index.fulltext.queryNodes('"""
    + FULLTEXT_INDEX
    + """', lucene, {limit: $similar_max}) YIELD node AS m, score
  WHERE m.store = $store AND m.forgotten = false
  WITH m ORDER BY score DESC, m.id LIMIT $similar_max
  RETURN collect(m) AS similar
}
RETURN known, duplicate, earlier, later, before, after, sharing, counts, similar
"""
)


def _create_edge_clause(relationship: str) -> str:
    return (
        f"FOREACH (_ IN CASE WHEN edge.type = '{relationship}' THEN [1] ELSE [] END |"
        f" CREATE (a)-[:{relationship} {{store: $store, weight: edge.weight, metadata: edge.metadata,"
        " created_at: edge.created_at}]->(b))"
    )


_CREATE_EDGE_CLAUSES = "\n".join(_create_edge_clause(rel) for rel in RELATIONSHIP_TYPES.values())

#: Creates ``$edges`` (maps with from/to uids, type, weight, metadata, created_at).
CREATE_EDGES = (
    "UNWIND $edges AS edge\n"
    "MATCH (a:Memory {uid: edge.from}), (b:Memory {uid: edge.to})\n" + _CREATE_EDGE_CLAUSES
)

CREATE_MEMORY = f"""
CREATE (m:Memory)
SET m = $props
WITH m
CALL (m) {{
  UNWIND $entities AS entity
  MERGE (e:Entity {{uid: entity.uid}})
    ON CREATE SET e.store = $store, e.key = entity.key, e.name = entity.name
  CREATE (m)-[:MENTIONS {{store: $store, entity_uid: entity.uid, created_at: m.created_at}}]->(e)
}}
CALL () {{
{CREATE_EDGES}
}}
CREATE (:Change {{store: $store, seq: $seq, kind: 'added', memory_id: m.id, at: $written_at}})
RETURN m.id AS id
"""

ACTIVE_IDS = """
UNWIND $uids AS uid
MATCH (m:Memory {uid: uid}) WHERE m.forgotten = false
RETURN m.id AS id
"""

#: Replaces any edge of the same type between the two (either direction; supersedes: same direction).
REPLACE_EDGE = f"""
MATCH (a:Memory {{uid: $source_uid}}), (b:Memory {{uid: $target_uid}})
WHERE a.forgotten = false AND b.forgotten = false
CALL (a, b) {{
  OPTIONAL MATCH (a)-[old]-(b)
  WHERE type(old) = $type AND (type(old) <> 'SUPERSEDES' OR startNode(old) = a)
  DELETE old
}}
WITH a, b, [{{from: a.uid, to: b.uid, type: $type, weight: $weight, metadata: $metadata,
              created_at: $created_at}}] AS edges
CALL (a, b, edges) {{
  UNWIND edges AS edge
{_CREATE_EDGE_CLAUSES}
}}
RETURN a.id AS source
"""

MARK_SUPERSEDED = """
MATCH (old:Memory {uid: $target_uid})
CREATE (:Change {store: $store, seq: $seq, kind: 'superseded', memory_id: old.id, at: $written_at,
                 detail: 'superseded by ' + $source_id})
"""

FORGET = """
MATCH (m:Memory {uid: $uid}) WHERE m.forgotten = false
SET m.forgotten = true, m.forgotten_at = $written_at, m.updated_at = $written_at, m.dedup_key = null,
    m.fulltext_store = null
WITH m
CALL (m) {
  MATCH (m)-[mention:MENTIONS]->()
  DELETE mention
}
CREATE (:Change {store: $store, seq: $seq, kind: 'forgotten', memory_id: m.id, at: $written_at})
RETURN m.id AS id
"""

CHANGES = (
    """
MATCH (c:Change) WHERE c.store = $store AND c.at >= $since
WITH c ORDER BY c.store, c.at LIMIT $limit + $tie_slack
WITH c ORDER BY c.at, c.seq LIMIT $limit
OPTIONAL MATCH (m:Memory {uid: $store + ':' + c.memory_id}) WHERE m.forgotten = false
RETURN c.kind AS kind, c.memory_id AS memory_id, c.at AS at, coalesce(c.detail, '') AS detail,
       CASE WHEN m IS NULL THEN null ELSE """
    + MEMORY
    + """ END AS m
ORDER BY c.at, c.seq
"""
)

KNOWN_ENTITIES = """
MATCH (e:Entity) WHERE e.store = $store
WITH e, COUNT { (e)<-[:MENTIONS]-() } AS uses
WHERE uses > 0
RETURN e.name AS name ORDER BY uses DESC, e.key LIMIT $limit
"""

COUNT_ACTIVE = """
MATCH (m:Memory) WHERE m.store = $store AND m.forgotten = false RETURN count(m) AS memories
"""

VERSION = "CALL dbms.components() YIELD name, versions, edition RETURN versions[0] AS version, edition"
