"""The SQLite schema and its migrations, versioned with ``PRAGMA user_version``."""

from __future__ import annotations

import aiosqlite

from memory_orchestrator.adapters.sqlite.impacts import (
    ALL_ROWS,
    LARGE,
    LENGTH,
    SMALL_STORE,
    impact_sql,
    length_sql,
)
from memory_orchestrator.adapters.sqlite.transactions import rollback
from memory_orchestrator.ports import BackendRejected

# Timestamps are stored as fixed-width RFC 3339 UTC text (microseconds always present), so text
# comparison orders them in time and indexes serve range queries.
SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS memories (
    id TEXT PRIMARY KEY,
    content TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    dedup_key TEXT,
    category TEXT NOT NULL,
    importance INTEGER NOT NULL,
    tags TEXT NOT NULL DEFAULT '[]',
    entities TEXT NOT NULL DEFAULT '[]',
    source TEXT NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    deleted_at TEXT
);
CREATE INDEX IF NOT EXISTS memories_created ON memories(created_at) WHERE deleted_at IS NULL;
CREATE INDEX IF NOT EXISTS memories_source_created ON memories(source, created_at)
    WHERE deleted_at IS NULL;
CREATE INDEX IF NOT EXISTS memories_hash ON memories(content_hash) WHERE deleted_at IS NULL;
-- Two writers racing with the same deduplicated content: exactly one insert can win.
CREATE UNIQUE INDEX IF NOT EXISTS memories_dedup ON memories(dedup_key)
    WHERE deleted_at IS NULL AND dedup_key IS NOT NULL;

-- Entity names of active memories only (rows are removed when a memory is forgotten).
CREATE TABLE IF NOT EXISTS memory_entities (
    memory_id TEXT NOT NULL REFERENCES memories(id),
    entity_norm TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (entity_norm, memory_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS memory_entities_time ON memory_entities(entity_norm, created_at);
CREATE INDEX IF NOT EXISTS memory_entities_memory ON memory_entities(memory_id);

CREATE TABLE IF NOT EXISTS entity_stats (
    entity_norm TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    uses INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS entity_stats_uses ON entity_stats(uses DESC, entity_norm);

-- One row per edge; reads follow it from both ends through the two indexes.
CREATE TABLE IF NOT EXISTS edges (
    source_id TEXT NOT NULL,
    target_id TEXT NOT NULL,
    type TEXT NOT NULL,
    weight REAL NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL,
    PRIMARY KEY (source_id, target_id, type)
) WITHOUT ROWID;
-- Covering (target, type, weight, + the key's source): walking edges backwards never touches rows.
CREATE INDEX IF NOT EXISTS edges_target ON edges(target_id, type, weight);

-- The shared tokenizer's output (stop words dropped, Han bigrams) so BM25 sees the same terms as
-- every other backend; rowid is the memory's rowid. Version 2 re-creates it with stemming.
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(
    tokens, tokenize = 'unicode61 remove_diacritics 0'
);

-- Active memories per token, kept with every write: query planning picks rare terms from it
-- (an indexed lookup; fts5vocab answers the same but an order of magnitude slower).
CREATE TABLE IF NOT EXISTS term_stats (
    term TEXT PRIMARY KEY,
    docs INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS oplog (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    at TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS oplog_at ON oplog(at, seq);

CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS probe (id INTEGER PRIMARY KEY, at TEXT NOT NULL);
"""

# Version 2: the keyword index stems (FTS5 ``porter`` over ``unicode61``), so "invoices" finds
# "invoice". The FTS table keeps the shared tokenizer's output as its text, so the rows are copied
# over unchanged and re-indexed by the new tokenizer; the stored memories are untouched.
SCHEMA_V2 = """
ALTER TABLE memories_fts RENAME TO memories_fts_v1;
CREATE VIRTUAL TABLE memories_fts USING fts5(
    tokens, tokenize = 'porter unicode61 remove_diacritics 0'
);
INSERT INTO memories_fts (rowid, tokens) SELECT rowid, tokens FROM memories_fts_v1;
DROP TABLE memories_fts_v1;
"""

# Version 3: vectors a plugin's dense channel keeps beside the memories, one row per (space, memory);
# ``seq`` orders the stores so a channel loads only what is new.
SCHEMA_V3 = """
CREATE TABLE IF NOT EXISTS vectors (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    space TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    memory_rowid INTEGER NOT NULL,
    vector BLOB NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS vectors_memory ON vectors(space, memory_id);
CREATE INDEX IF NOT EXISTS vectors_space_rowid ON vectors(space, memory_rowid);
"""

# Version 4: context at index time (adapters/sqlite/context.py). The keyword index gains a
# ``context`` column: the tokens of the memories just before and after each one (within an hour,
# from another source), weighed by BM25 beside the memory's own words. Existing rows get theirs from
# the memories' order in time.
SCHEMA_V4 = """
ALTER TABLE memories_fts RENAME TO memories_fts_v3;
CREATE VIRTUAL TABLE memories_fts USING fts5(
    tokens, context, tokenize = 'porter unicode61 remove_diacritics 0'
);
INSERT INTO memories_fts (rowid, tokens, context)
SELECT row_id, tokens, trim(
    CASE WHEN previous_source != source AND julianday(created_at) - julianday(previous_at) <= 1.0 / 24
        THEN previous_tokens ELSE '' END || ' ' ||
    CASE WHEN next_source != source AND julianday(next_at) - julianday(created_at) <= 1.0 / 24
        THEN next_tokens ELSE '' END)
FROM (
    SELECT f.rowid AS row_id, f.tokens AS tokens, m.created_at AS created_at, m.source AS source,
        lag(f.tokens) OVER ordered AS previous_tokens, lag(m.created_at) OVER ordered AS previous_at,
        lag(m.source) OVER ordered AS previous_source,
        lead(f.tokens) OVER ordered AS next_tokens, lead(m.created_at) OVER ordered AS next_at,
        lead(m.source) OVER ordered AS next_source
    FROM memories_fts_v3 f JOIN memories m ON m.rowid = f.rowid
    WHERE m.deleted_at IS NULL
    WINDOW ordered AS (ORDER BY m.created_at, m.rowid)
);
DROP TABLE memories_fts_v3;
"""

# Version 5: the postings of each token (adapters/sqlite/lexical.py): a write finds its lexically
# closest memories here rather than through FTS5's bm25(), which scored every match. Existing active
# memories get theirs from their FTS tokens (letter/digit runs: safe to splice into a JSON array).
SCHEMA_V5 = """
CREATE TABLE IF NOT EXISTS memory_terms (
    term TEXT NOT NULL,
    row INTEGER NOT NULL,
    size INTEGER NOT NULL,
    PRIMARY KEY (term, row)
) WITHOUT ROWID;
INSERT OR IGNORE INTO memory_terms (term, row, size)
SELECT DISTINCT t.value, f.rowid,
    (SELECT count(DISTINCT u.value) FROM json_each('["' || replace(f.tokens, ' ', '","') || '"]') u)
FROM memories_fts f JOIN memories m ON m.rowid = f.rowid,
    json_each('["' || replace(f.tokens, ' ', '","') || '"]') t
WHERE m.deleted_at IS NULL AND f.tokens != '';
"""


# Version 6: impact-ordered postings of the keyword index (adapters/sqlite/impacts.py): keyword
# search scores only the matches that can make its pool. They are kept from SMALL_STORE memories on:
# a larger store gets them here from FTS5's own vocabulary (its stems, both columns), by its average
# row length; a smaller one when a write makes it large enough.
def schema_v6(large: str) -> str:
    """Version 6's script; ``large``: when the store is large enough for its postings to be built."""
    return f"""
CREATE TABLE IF NOT EXISTS keyword_impacts (
    term TEXT NOT NULL,
    impact REAL NOT NULL,
    row INTEGER NOT NULL,
    f REAL NOT NULL,
    d INTEGER NOT NULL,
    PRIMARY KEY (term, impact, row)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS keyword_impacts_row ON keyword_impacts(row);
CREATE VIRTUAL TABLE temp.impacts_v6 USING {ALL_ROWS};
{length_sql("temp.impacts_v6", large)};
{impact_sql("temp.impacts_v6", f"({LENGTH}) IS NOT NULL")};
DROP TABLE temp.impacts_v6;
"""


SCHEMA_V6 = schema_v6(LARGE.format(threshold=SMALL_STORE))

# Version 7: the forgotten memories listed by id, so a graph hop can leave them out without joining
# every memory it reaches (adapters/sqlite/graph.py).
SCHEMA_V7 = """
CREATE INDEX IF NOT EXISTS memories_forgotten ON memories(id) WHERE deleted_at IS NOT NULL;
"""

#: (version, script) in order; a database at version N runs every script above N.
MIGRATIONS: tuple[tuple[int, str], ...] = (
    (1, SCHEMA_V1),
    (2, SCHEMA_V2),
    (3, SCHEMA_V3),
    (4, SCHEMA_V4),
    (5, SCHEMA_V5),
    (6, SCHEMA_V6),
    (7, SCHEMA_V7),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]


async def schema_version(db: aiosqlite.Connection) -> int:
    """The database's ``user_version``."""
    async with db.execute("PRAGMA user_version") as cursor:
        row = await cursor.fetchone()
    return int(row[0]) if row else 0


async def migrate(db: aiosqlite.Connection, *, backend: str = "sqlite") -> int:
    """Bring the schema up to :data:`SCHEMA_VERSION` in one immediate transaction; return the version."""
    try:
        await db.execute("BEGIN IMMEDIATE")
        current = await schema_version(db)
        if current > SCHEMA_VERSION:
            raise BackendRejected(
                f"database schema version {current} is newer than this program's {SCHEMA_VERSION}",
                backend=backend,
            )
        for version, script in MIGRATIONS:
            if version > current:
                for statement in _statements(script):
                    await db.execute(statement)
                await db.execute(f"PRAGMA user_version = {version:d}")
        await db.execute("COMMIT")
    except BaseException:
        await rollback(db)
        raise
    return SCHEMA_VERSION


def _statements(script: str) -> list[str]:
    # executescript would COMMIT our transaction first; split on ';' (no ';' inside these statements).
    lines = [line for line in script.splitlines() if not line.strip().startswith("--")]
    return [part.strip() for part in "\n".join(lines).split(";") if part.strip()]
