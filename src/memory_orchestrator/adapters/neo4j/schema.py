"""The Neo4j schema of the memory store, created idempotently when a backend opens.

Memories are ``(:Memory)`` nodes keyed by ``uid = store + ':' + id`` (a plain uniqueness constraint,
since node keys need Enterprise). ``dedup_key = store + ':' + content_hash`` is set only on active memories
written with dedup, and its uniqueness constraint is what makes concurrent identical writes safe.
Entity names are ``(:Entity {uid = store + ':' + casefolded name})`` nodes linked by ``MENTIONS``
relationships (which carry the entity uid and the memory's ``created_at`` and are deleted when the memory
is forgotten), so entity anchors, filters and counts are index seeks and degree lookups.
Timestamps (``created_at``, ``updated_at``, ``at`` ...) are integer microseconds since the Unix epoch.

A uniqueness constraint is made in two steps: Neo4j creates and fills its index, then the constraint
that owns it. A ``CREATE CONSTRAINT`` cut short in between (its client cancelled, say a call's
deadline on a cold server, or killed) leaves the index behind, owned by nothing and "populating" for
ever: the next ``CREATE CONSTRAINT ... IF NOT EXISTS`` then fails (an index has the name) and
``db.awaitIndexes`` waits for it until it gives up, so the store could never be opened again.
:func:`ensure_schema` replaces such an index with the constraint.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time

from neo4j import AsyncManagedTransaction, AsyncSession
from neo4j import exceptions as neo4j_errors

LOG = logging.getLogger(__name__)

FULLTEXT_INDEX = "memory_orchestrator_fulltext"
#: Seconds an index named like one of our constraints but owned by none is given to become that
#: constraint's (another backend creating it at this moment) before it is taken for one left behind.
#: Short: a store is opened inside a call's deadline, and a repair cut short would start over.
ORPHAN_WAIT_S = 2.0

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


async def ensure_schema(
    session: AsyncSession, *, wait_seconds: int = 300, orphan_wait_s: float = ORPHAN_WAIT_S
) -> None:
    """Create every constraint and index if missing (replacing a constraint's index left behind by a
    creation cut short: see the module docstring), then wait until they are online."""
    for statement, name in zip(SCHEMA_STATEMENTS, SCHEMA_NAMES, strict=True):
        try:
            await (await session.run(statement)).consume()
        except neo4j_errors.ClientError as exc:
            code = exc.code or ""
            if code == _NAME_TAKEN and statement.startswith("CREATE CONSTRAINT"):
                await _replace_orphaned_index(session, statement, name, orphan_wait_s)
            # Two backends opening at once may race on the same IF NOT EXISTS; the loser is harmless.
            elif "AlreadyExists" not in code:
                raise
    await (await session.run("CALL db.awaitIndexes($seconds)", seconds=wait_seconds)).consume()


#: What ``CREATE CONSTRAINT ... IF NOT EXISTS`` says when an index (not a constraint) has its name.
_NAME_TAKEN = "Neo.ClientError.Schema.IndexWithNameAlreadyExists"


async def _replace_orphaned_index(session: AsyncSession, statement: str, name: str, wait_s: float) -> None:
    """Make the constraint ``statement`` creates, whose ``name`` an index owned by no constraint holds:
    unless the constraint appears within ``wait_s`` (another backend creating it), drop the index and
    create the constraint."""
    deadline = time.monotonic() + wait_s
    while True:
        if await _constraint_exists(session, name):
            return  # another backend made it meanwhile
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(0.1)
    LOG.warning(
        "neo4j: index %s is owned by no constraint (a creation of its constraint was cut short); "
        "dropping it and creating the constraint",
        name,
    )
    try:
        await (await session.run(f"DROP INDEX {name} IF EXISTS")).consume()
    except neo4j_errors.ClientError:
        if await _constraint_exists(session, name):
            return  # it became the constraint's index meanwhile
        raise
    await (await session.run(statement)).consume()


async def _constraint_exists(session: AsyncSession, name: str) -> bool:
    query = "SHOW CONSTRAINTS YIELD name WHERE name = $name RETURN count(*) AS n"
    result = await session.run(query, name=name)
    record = await result.single()
    return bool(record and record["n"])


async def schema_states(tx: AsyncManagedTransaction) -> dict[str, str]:
    """Name -> state (``ONLINE``, ``POPULATING``, ``FAILED``) of this adapter's indexes."""
    result = await tx.run(
        "SHOW INDEXES YIELD name, state WHERE name IN $names RETURN name, state", names=list(SCHEMA_NAMES)
    )
    return {record["name"]: record["state"] async for record in result}
