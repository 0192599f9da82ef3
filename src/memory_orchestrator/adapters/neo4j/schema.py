"""The Neo4j schema of the memory store, created idempotently when a backend opens.

Memories are ``(:Memory)`` nodes keyed by ``uid = store + ':' + id`` (a plain uniqueness constraint,
since node keys need Enterprise). ``dedup_key = store + ':' + content_hash`` is set only on active memories
written with dedup, and its uniqueness constraint is what makes concurrent identical writes safe.
Entity names are ``(:Entity {uid = store + ':' + casefolded name})`` nodes linked by ``MENTIONS``
relationships (which carry the entity uid and the memory's ``created_at`` and are deleted when the memory
is forgotten), so entity anchors, filters and counts are index seeks and degree lookups.
Timestamps (``created_at``, ``updated_at``, ``at`` ...) are integer microseconds since the Unix epoch.
"""

from __future__ import annotations

import re

from neo4j import AsyncManagedTransaction, AsyncSession
from neo4j import exceptions as neo4j_errors

FULLTEXT_INDEX = "memory_orchestrator_fulltext"

SCHEMA_STATEMENTS: tuple[str, ...] = (
    "CREATE CONSTRAINT memory_orchestrator_memory_uid IF NOT EXISTS FOR (m:Memory) REQUIRE m.uid IS UNIQUE",
    "CREATE CONSTRAINT memory_orchestrator_memory_dedup IF NOT EXISTS "
    "FOR (m:Memory) REQUIRE m.dedup_key IS UNIQUE",
    "CREATE CONSTRAINT memory_orchestrator_entity_uid IF NOT EXISTS FOR (e:Entity) REQUIRE e.uid IS UNIQUE",
    "CREATE INDEX memory_orchestrator_memory_store IF NOT EXISTS FOR (m:Memory) ON (m.store)",
    "CREATE INDEX memory_orchestrator_memory_store_created IF NOT EXISTS "
    "FOR (m:Memory) ON (m.store, m.created_at)",
    "CREATE INDEX memory_orchestrator_memory_store_source_created IF NOT EXISTS "
    "FOR (m:Memory) ON (m.store, m.source, m.created_at)",
    # Entity anchors and link candidates walk an entity's mentions newest-first through this index,
    # so a name carried by thousands of memories costs a seek, not a scan.
    "CREATE INDEX memory_orchestrator_mentions_entity_created IF NOT EXISTS "
    "FOR ()-[r:MENTIONS]-() ON (r.entity_uid, r.created_at)",
    "CREATE INDEX memory_orchestrator_memory_store_hash IF NOT EXISTS "
    "FOR (m:Memory) ON (m.store, m.content_hash)",
    "CREATE INDEX memory_orchestrator_memory_created IF NOT EXISTS FOR (m:Memory) ON (m.created_at)",
    "CREATE INDEX memory_orchestrator_memory_category IF NOT EXISTS FOR (m:Memory) ON (m.category)",
    "CREATE INDEX memory_orchestrator_memory_source IF NOT EXISTS FOR (m:Memory) ON (m.source)",
    "CREATE INDEX memory_orchestrator_entity_store IF NOT EXISTS FOR (e:Entity) ON (e.store)",
    "CREATE INDEX memory_orchestrator_change_store_at IF NOT EXISTS FOR (c:Change) ON (c.store, c.at)",
    # ``fulltext_store`` (a token per store, removed when a memory is forgotten) lets Lucene itself keep
    # to one store's active memories, so its top-k ``limit`` is exact instead of ranking every store.
    f"CREATE FULLTEXT INDEX {FULLTEXT_INDEX} IF NOT EXISTS "
    "FOR (m:Memory) ON EACH [m.content, m.fulltext_store]",
)

#: Index and constraint names whose state ``health`` reports.
SCHEMA_NAMES: tuple[str, ...] = tuple(
    re.search(r"(memory_orchestrator_\w+) IF NOT EXISTS", statement).group(1)  # type: ignore[union-attr]
    for statement in SCHEMA_STATEMENTS
)


async def ensure_schema(session: AsyncSession, *, wait_seconds: int = 300) -> None:
    """Create every constraint and index if missing, then wait until they are online."""
    for statement in SCHEMA_STATEMENTS:
        try:
            await (await session.run(statement)).consume()
        except neo4j_errors.ClientError as exc:
            # Two backends opening at once may race on the same IF NOT EXISTS; the loser is harmless.
            if "AlreadyExists" not in (exc.code or ""):
                raise
    await (await session.run("CALL db.awaitIndexes($seconds)", seconds=wait_seconds)).consume()


async def schema_states(tx: AsyncManagedTransaction) -> dict[str, str]:
    """Name -> state (``ONLINE``, ``POPULATING``, ``FAILED``) of this adapter's indexes."""
    result = await tx.run(
        "SHOW INDEXES YIELD name, state WHERE name IN $names RETURN name, state", names=list(SCHEMA_NAMES)
    )
    return {record["name"]: record["state"] async for record in result}
