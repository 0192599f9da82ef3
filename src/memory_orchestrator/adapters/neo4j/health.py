"""Readiness checks of the Neo4j backend."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from memory_orchestrator.adapters.neo4j import cypher
from memory_orchestrator.adapters.neo4j.runner import CypherRunner
from memory_orchestrator.adapters.neo4j.schema import SCHEMA_NAMES, schema_states
from memory_orchestrator.ports import BackendHealth, HealthCheck, OrchestratorError

_PROBE = """
CREATE (m:Memory {uid: $uid, store: $store, id: 'health-probe', content: 'health probe',
                  forgotten: false, created_at: timestamp() * 1000, updated_at: timestamp() * 1000})
WITH m
MATCH (back:Memory {uid: $uid})
RETURN back.content AS content
"""


class HealthReport:
    """Runs the checks of one backend and folds them into a :class:`BackendHealth`."""

    def __init__(self, runner: CypherRunner, store: str) -> None:
        self.runner = runner
        self.store = store
        self.checks: list[HealthCheck] = []
        self.details: dict[str, str] = {"store": store, "uri": runner.options.uri}

    async def run(self, *, probe: bool) -> BackendHealth:
        """Every check in order; a failed connectivity check stops the rest."""
        if not self.runner.is_open:
            return BackendHealth("neo4j", "error", (HealthCheck("open", "error", "backend is not open"),))
        version = await self._check("connectivity", self._version)
        if version is None:
            return self._result(version="")
        await self._check("schema", self._schema)
        count = await self._check("memories", self._count)
        if probe:
            await self._check("probe", self._probe)
        return self._result(version=version, memory_count=count)

    def _result(self, *, version: str, memory_count: Any = None) -> BackendHealth:
        statuses = {check.status for check in self.checks}
        status = "error" if "error" in statuses else "degraded" if "degraded" in statuses else "ok"
        count = int(memory_count) if isinstance(memory_count, int) else None
        return BackendHealth("neo4j", status, tuple(self.checks), version, count, self.details)

    async def _check(self, name: str, work: Callable[[], Awaitable[tuple[str, str, Any]]]) -> Any:
        started = time.perf_counter()
        try:
            status, detail, value = await work()
        except OrchestratorError as exc:
            status, detail, value = "error", str(exc), None
        elapsed = (time.perf_counter() - started) * 1000
        self.checks.append(HealthCheck(name, status, detail, round(elapsed, 3)))
        return value

    async def _version(self) -> tuple[str, str, Any]:
        rows = await self.runner.read(cypher.VERSION)
        version = f"{rows[0]['version']} {rows[0]['edition']}" if rows else "unknown"
        return "ok", f"Neo4j {version}", version

    async def _schema(self) -> tuple[str, str, Any]:
        states = await self.runner.read_tx(schema_states)
        missing = [name for name in SCHEMA_NAMES if name not in states]
        failed = [name for name, state in states.items() if state == "FAILED"]
        pending = [name for name, state in states.items() if state not in ("ONLINE", "FAILED")]
        if failed:
            return "error", f"failed indexes: {', '.join(failed)}", None
        if missing or pending:
            return "degraded", f"missing: {missing}; not online: {pending}", None
        return "ok", f"{len(states)} indexes online", None

    async def _count(self) -> tuple[str, str, Any]:
        rows = await self.runner.read(cypher.COUNT_ACTIVE, store=self.store)
        count = int(rows[0]["memories"])
        return "ok", f"{count} active memories", count

    async def _probe(self) -> tuple[str, str, Any]:
        params = {"uid": f"{self.store}::probe:health-probe", "store": f"{self.store}::probe"}

        async def work(tx: Any) -> str:
            rows = await (await tx.run(_PROBE, params)).data()
            return str(rows[0]["content"]) if rows else ""

        content = await self.runner.explicit_tx(work)
        if content != "health probe":
            return "error", "probe write was not readable", None
        return "ok", "write/read round trip (rolled back)", None
