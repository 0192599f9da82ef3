"""The one place the Neo4j adapter talks to the driver: life cycle, managed transactions, retries, errors."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from neo4j import AsyncDriver, AsyncGraphDatabase, AsyncManagedTransaction, AsyncTransaction
from neo4j import exceptions as neo4j_errors

from memory_orchestrator.adapters.neo4j.options import Neo4jOptions
from memory_orchestrator.adapters.neo4j.retry import RetryPolicy, translate
from memory_orchestrator.adapters.neo4j.schema import ensure_schema
from memory_orchestrator.ports import BackendRejected, BackendUnavailable

T = TypeVar("T")
Rows = list[dict[str, Any]]


class Statements(Protocol):
    """Runs one statement and returns its rows: a :class:`CypherRunner` (each in a transaction of its
    own) or :class:`InTransaction` (all in one)."""

    async def read(self, query: str, **params: Any) -> Rows:
        """The rows of one read statement."""
        ...

    async def write(self, query: str, **params: Any) -> Rows:
        """The rows of one write statement."""
        ...


class InTransaction:
    """Statements run in one open transaction (its reads see its own earlier writes)."""

    def __init__(self, tx: AsyncManagedTransaction) -> None:
        self.tx = tx

    async def read(self, query: str, **params: Any) -> Rows:
        """The rows of one statement in the transaction."""
        return await (await self.tx.run(query, params)).data()

    write = read


class UniquenessConflict(BackendRejected):
    """A write hit a uniqueness constraint (for ``dedup_key``: a concurrent identical write won)."""


_last_sequence = [0]


def next_sequence() -> int:
    """A per-process strictly increasing number (wall-clock nanoseconds, bumped on ties).

    It orders change-log entries written in the same instant; the event loop is single-threaded, so
    the read-modify-write below cannot interleave.
    """
    value = max(time.time_ns(), _last_sequence[0] + 1)
    _last_sequence[0] = value
    return value


class CypherRunner:
    """Owns the ``AsyncDriver`` of one backend and runs statements with bounded retries.

    Every driver error leaves here translated to the port's error tree.
    """

    def __init__(self, options: Neo4jOptions, retry: RetryPolicy) -> None:
        self.options = options
        self.retry = retry
        self._driver: AsyncDriver | None = None

    @property
    def is_open(self) -> bool:
        """True between a successful ``open`` and ``close``."""
        return self._driver is not None

    async def open(self) -> None:
        """Create the driver, check the server answers and create the schema. Idempotent."""
        if self._driver is not None:
            return
        try:
            driver = AsyncGraphDatabase.driver(self.options.uri, **self.options.driver_kwargs())
        except Exception as exc:
            raise translate(exc) from exc
        try:
            await self.retry.run(driver.verify_connectivity)
            await self.retry.run(lambda: self._create_schema(driver))
        except Exception as exc:
            await driver.close()
            raise translate(exc) from exc
        self._driver = driver

    async def _create_schema(self, driver: AsyncDriver) -> None:
        async with driver.session(database=self.options.database) as session:
            await ensure_schema(session)

    async def close(self) -> None:
        """Close the driver. Idempotent."""
        driver, self._driver = self._driver, None
        if driver is not None:
            await driver.close()

    def _require_driver(self) -> AsyncDriver:
        if self._driver is None:
            raise BackendUnavailable("the neo4j backend is not open; call open() first", backend="neo4j")
        return self._driver

    async def read_tx(self, work: Callable[[AsyncManagedTransaction], Awaitable[T]]) -> T:
        """Run ``work`` in a managed read transaction."""
        driver = self._require_driver()

        async def attempt() -> T:
            async with driver.session(database=self.options.database) as session:
                return await session.execute_read(work)

        return await self._guarded(attempt)

    async def write_tx(self, work: Callable[[AsyncManagedTransaction], Awaitable[T]]) -> T:
        """Run ``work`` in a managed write transaction."""
        driver = self._require_driver()

        async def attempt() -> T:
            async with driver.session(database=self.options.database) as session:
                return await session.execute_write(work)

        return await self._guarded(attempt)

    async def explicit_tx(self, work: Callable[[AsyncTransaction], Awaitable[T]]) -> T:
        """Run ``work`` in an explicit transaction that is always rolled back (health probes)."""
        driver = self._require_driver()

        async def attempt() -> T:
            async with driver.session(database=self.options.database) as session:
                tx = await session.begin_transaction()
                try:
                    return await work(tx)
                finally:
                    await tx.rollback()

        return await self._guarded(attempt)

    async def read(self, query: str, **params: Any) -> Rows:
        """The rows of one read statement (nodes as property dicts)."""

        async def work(tx: AsyncManagedTransaction) -> Rows:
            return await (await tx.run(query, params)).data()

        return await self.read_tx(work)

    async def write(self, query: str, **params: Any) -> Rows:
        """The rows of one write statement, committed."""

        async def work(tx: AsyncManagedTransaction) -> Rows:
            return await (await tx.run(query, params)).data()

        return await self.write_tx(work)

    async def _guarded(self, attempt: Callable[[], Awaitable[T]]) -> T:
        try:
            try:
                return await self.retry.run(attempt)
            except neo4j_errors.ClientError as exc:
                if not _schema_missing(exc):
                    raise
                # The database was replaced under us (restored, recreated, a fresh server at the
                # same address): its indexes are gone. Create them again, once, and retry.
                await self.retry.run(lambda: self._create_schema(self._require_driver()))
                return await self.retry.run(attempt)
        except neo4j_errors.ConstraintError as exc:
            raise UniquenessConflict(f"neo4j uniqueness conflict: {exc}", backend="neo4j") from exc
        except Exception as exc:
            raise translate(exc) from exc


def _schema_missing(exc: BaseException) -> bool:
    """Whether a query failed because one of our indexes does not exist in the database."""
    text = str(exc)
    return "no such fulltext schema index" in text or "There is no such index" in text
