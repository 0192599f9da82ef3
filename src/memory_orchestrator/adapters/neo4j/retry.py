"""Bounded retries on transient Neo4j failures, and translation of driver errors to the port's tree."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from neo4j import exceptions as neo4j_errors

from memory_orchestrator.ports import BackendRejected, BackendUnavailable, OrchestratorError

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: The failures worth another attempt: the server or the connection, not the request.
TRANSIENT_ERRORS: tuple[type[Exception], ...] = (
    neo4j_errors.ServiceUnavailable,
    neo4j_errors.SessionExpired,
    neo4j_errors.TransientError,
)


def is_transient(error: BaseException) -> bool:
    """True when retrying the same request may succeed."""
    if isinstance(error, TRANSIENT_ERRORS):
        return True
    return isinstance(error, neo4j_errors.Neo4jError | neo4j_errors.DriverError) and error.is_retryable()


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Up to ``attempts`` tries with exponential backoff capped at ``max_delay_s``.

    ``sleep`` is injectable so tests can observe the delays without waiting for them.
    """

    attempts: int = 3
    base_delay_s: float = 0.05
    max_delay_s: float = 1.0
    multiplier: float = 2.0
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep, compare=False)

    def delay(self, attempt: int) -> float:
        """The pause after failed attempt number ``attempt`` (1-based)."""
        return float(min(self.max_delay_s, self.base_delay_s * self.multiplier ** (attempt - 1)))

    async def run(self, operation: Callable[[], Awaitable[T]]) -> T:
        """Await ``operation()``, retrying transient failures; the last failure is re-raised as is."""
        attempt = 1
        while True:
            try:
                return await operation()
            except Exception as exc:
                if attempt >= self.attempts or not is_transient(exc):
                    raise
                logger.info("neo4j transient failure (attempt %d/%d): %s", attempt, self.attempts, exc)
                await self.sleep(self.delay(attempt))
                attempt += 1


def translate(error: Exception, *, backend: str = "neo4j") -> Exception:
    """The port error for a driver error (callers ``raise translate(exc) from exc``)."""
    if isinstance(error, OrchestratorError):
        return error
    if is_transient(error):
        return BackendUnavailable(f"neo4j is unavailable: {error}", backend=backend)
    if isinstance(error, neo4j_errors.AuthError):
        return BackendRejected(f"neo4j refused the credentials: {error}", backend=backend)
    if isinstance(error, neo4j_errors.ConfigurationError):
        return BackendRejected(f"neo4j driver configuration is invalid: {error}", backend=backend)
    if isinstance(error, neo4j_errors.Neo4jError):
        return BackendRejected(f"neo4j rejected the request: {error}", backend=backend)
    if isinstance(error, neo4j_errors.DriverError | OSError):
        return BackendUnavailable(f"neo4j driver failure: {error}", backend=backend)
    return BackendRejected(f"unexpected neo4j adapter failure: {error!r}", backend=backend)
