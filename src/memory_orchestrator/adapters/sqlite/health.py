"""Readiness checks of the SQLite backend."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from memory_orchestrator.adapters.sqlite.rows import stamp
from memory_orchestrator.adapters.sqlite.schema import SCHEMA_VERSION, schema_version
from memory_orchestrator.ports import BackendHealth, HealthCheck, OrchestratorError

if TYPE_CHECKING:
    import aiosqlite

    from memory_orchestrator.adapters.sqlite.backend import SqliteBackend


def _elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


async def health_report(backend: SqliteBackend, *, probe: bool = False) -> BackendHealth:
    """File present, schema current, FTS answering, and (``probe``) a write/read/delete round trip."""
    checks: list[HealthCheck] = []
    started = time.perf_counter()
    present = backend.path.exists()
    checks.append(HealthCheck("file", "ok" if present else "error", str(backend.path), _elapsed_ms(started)))
    if not present or backend._db is None:
        checks.append(HealthCheck("connection", "error", "not open"))
        return BackendHealth(backend.name, "error", tuple(checks), details={"store": backend.store})
    checks.append(await _schema_check(backend))
    checks.append(await _fts_check(backend))
    if probe:
        checks.append(await _probe_check(backend))
    status = "error" if any(check.status == "error" for check in checks) else "ok"
    count = await backend.count() if status == "ok" else None
    details = {"store": backend.store, "path": str(backend.path)}
    return BackendHealth(backend.name, status, tuple(checks), f"schema {SCHEMA_VERSION}", count, details)


async def _schema_check(backend: SqliteBackend) -> HealthCheck:
    started = time.perf_counter()
    try:
        version = await schema_version(backend.db)
    except Exception as exc:  # any failure is the finding, reported rather than raised
        return HealthCheck("schema", "error", str(exc), _elapsed_ms(started))
    status = "ok" if version == SCHEMA_VERSION else "error"
    return HealthCheck(
        "schema", status, f"version {version} (expected {SCHEMA_VERSION})", _elapsed_ms(started)
    )


async def _fts_check(backend: SqliteBackend) -> HealthCheck:
    started = time.perf_counter()
    try:
        sql = "SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?"
        # on the read connection: the one that answers searches
        await backend._read("fts check", lambda db: db.execute_fetchall(sql, ('"healthcheck"',)))
    except Exception as exc:  # any failure is the finding, reported rather than raised
        return HealthCheck("fts", "error", str(exc), _elapsed_ms(started))
    return HealthCheck("fts", "ok", "fts5 answering", _elapsed_ms(started))


async def _probe_check(backend: SqliteBackend) -> HealthCheck:
    started = time.perf_counter()
    try:
        at = stamp(backend.clock.now())
        read_back = await backend._write("health probe", lambda db: _round_trip(db, at))  # as any write
    except (OrchestratorError, OSError) as exc:
        return HealthCheck("probe", "error", str(exc), _elapsed_ms(started))
    status = "ok" if read_back else "error"
    return HealthCheck("probe", status, "write/read/delete round trip", _elapsed_ms(started))


async def _round_trip(db: aiosqlite.Connection, at: str) -> bool:
    """Write a probe row, read it back and delete it; whether it was read."""
    cursor = await db.execute("INSERT INTO probe (at) VALUES (?)", (at,))
    probe_id = cursor.lastrowid
    found = await db.execute_fetchall("SELECT at FROM probe WHERE id = ?", (probe_id,))
    await db.execute("DELETE FROM probe WHERE id = ?", (probe_id,))
    return bool(list(found))
