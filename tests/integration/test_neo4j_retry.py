"""The Neo4j adapter's retry policy and error translation, with the driver's real exception classes.

No server is needed: these run everywhere (an unreachable port stands in for a server that is down).
"""

from __future__ import annotations

import pytest
from neo4j import exceptions as neo4j_errors

from memory_orchestrator.adapters.neo4j import Neo4jBackend, Neo4jOptions, RetryPolicy
from memory_orchestrator.adapters.neo4j.retry import is_transient, translate
from memory_orchestrator.ports import BackendRejected, BackendUnavailable, InvalidRequest, NewMemory


class RecordedSleep:
    """Stands in for ``asyncio.sleep``: remembers the requested delays instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


class FlakyOperation:
    """Fails with the given errors in turn, then returns ``"done"``."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


@pytest.mark.anyio
@pytest.mark.parametrize(
    "error",
    [
        neo4j_errors.ServiceUnavailable("connection refused"),
        neo4j_errors.SessionExpired("leader switched"),
        neo4j_errors.TransientError("deadlock detected"),
    ],
    ids=["service-unavailable", "session-expired", "transient"],
)
async def test_transient_errors_are_retried_with_growing_delays(error: Exception) -> None:
    sleep = RecordedSleep()
    policy = RetryPolicy(attempts=3, base_delay_s=0.05, sleep=sleep)
    operation = FlakyOperation(error, error)

    assert await policy.run(operation) == "done"
    assert operation.calls == 3
    assert sleep.delays == [0.05, 0.1]


@pytest.mark.anyio
async def test_the_last_transient_failure_is_raised_when_attempts_run_out() -> None:
    sleep = RecordedSleep()
    policy = RetryPolicy(attempts=2, sleep=sleep)
    last = neo4j_errors.ServiceUnavailable("still down")
    operation = FlakyOperation(
        neo4j_errors.ServiceUnavailable("down"), last, neo4j_errors.ServiceUnavailable()
    )

    with pytest.raises(neo4j_errors.ServiceUnavailable) as raised:
        await policy.run(operation)
    assert raised.value is last
    assert operation.calls == 2
    assert len(sleep.delays) == 1


@pytest.mark.anyio
@pytest.mark.parametrize(
    "error",
    [neo4j_errors.ClientError("bad cypher"), neo4j_errors.ConstraintError("duplicate"), ValueError("bug")],
    ids=["client", "constraint", "value"],
)
async def test_permanent_errors_are_not_retried(error: Exception) -> None:
    sleep = RecordedSleep()
    operation = FlakyOperation(error)

    with pytest.raises(type(error)):
        await RetryPolicy(attempts=5, sleep=sleep).run(operation)
    assert operation.calls == 1
    assert sleep.delays == []


def test_backoff_is_capped() -> None:
    policy = RetryPolicy(attempts=10, base_delay_s=0.1, max_delay_s=0.5, multiplier=3.0)

    assert [policy.delay(attempt) for attempt in range(1, 5)] == pytest.approx([0.1, 0.3, 0.5, 0.5])


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (neo4j_errors.ServiceUnavailable("down"), BackendUnavailable),
        (neo4j_errors.SessionExpired("expired"), BackendUnavailable),
        (neo4j_errors.TransientError("deadlock"), BackendUnavailable),
        (neo4j_errors.ConstraintError("dup"), BackendRejected),
        (neo4j_errors.AuthError("wrong password"), BackendRejected),
        (neo4j_errors.CypherSyntaxError("syntax"), BackendRejected),
        (OSError("socket closed"), BackendUnavailable),
    ],
)
def test_driver_errors_become_port_errors_naming_the_backend(
    error: Exception, expected: type[Exception]
) -> None:
    translated = translate(error)

    assert isinstance(translated, expected)
    assert getattr(translated, "backend", None) == "neo4j"
    assert is_transient(error) is (expected is BackendUnavailable and not isinstance(error, OSError))


def test_port_errors_pass_translation_unchanged() -> None:
    original = InvalidRequest("limit must be positive")

    assert translate(original) is original


@pytest.mark.anyio
async def test_opening_against_a_closed_port_is_backend_unavailable() -> None:
    backend = Neo4jBackend(
        {"uri": "bolt://127.0.0.1:9", "store": "nowhere", "connection_timeout": 2, "retry_attempts": 2},
        retry=RetryPolicy(attempts=2, sleep=RecordedSleep()),
    )

    with pytest.raises(BackendUnavailable):
        await backend.open()
    with pytest.raises(BackendUnavailable, match="not open"):
        await backend.remember(NewMemory("never stored"))
    await backend.aclose()  # closing a backend that never opened is harmless


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"store": "has space"}, "store"),
        ({"uri": "localhost"}, "uri"),
        ({"pasword": "typo"}, "unknown neo4j option"),
        ({"retry_attempts": 0}, "retry_attempts"),
    ],
)
def test_bad_options_are_invalid_requests(options: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        Neo4jOptions.from_mapping(options)


def test_pool_and_tls_options_reach_the_driver() -> None:
    options = Neo4jOptions.from_mapping(
        {
            "user": "reader",
            "password": "secret",
            "max_connection_pool_size": 7,
            "connection_timeout": 3,
            "encrypted": True,
            "trusted_certificates": "all",
        }
    )
    kwargs = options.driver_kwargs()

    assert kwargs["auth"] == ("reader", "secret")
    assert kwargs["max_connection_pool_size"] == 7
    assert kwargs["connection_timeout"] == 3.0
    assert kwargs["encrypted"] is True
    assert type(kwargs["trusted_certificates"]).__name__ == "TrustAll"
    assert "encrypted" not in Neo4jOptions().driver_kwargs()
