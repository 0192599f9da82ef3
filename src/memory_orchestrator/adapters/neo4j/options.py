"""Configuration of the Neo4j backend: parsed once from the factory's options mapping."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import neo4j

from memory_orchestrator.ports import InvalidRequest

_STORE_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,100}$")
_KNOWN_OPTIONS = frozenset(
    {
        "uri",
        "user",
        "password",
        "database",
        "store",
        "max_connection_pool_size",
        "connection_timeout",
        "connection_acquisition_timeout",
        "max_transaction_retry_time",
        "encrypted",
        "trusted_certificates",
        "retry_attempts",
    }
)


@dataclass(frozen=True, slots=True)
class Neo4jOptions:
    """Where the store lives and how to reach it.

    ``store`` is the namespace: every node and relationship carries it and every query is scoped by it,
    so several stores share one database safely.
    """

    uri: str = "bolt://127.0.0.1:7687"
    user: str = "neo4j"
    password: str = ""
    database: str = "neo4j"
    store: str = "default"
    max_connection_pool_size: int = 50
    connection_timeout: float = 10.0
    connection_acquisition_timeout: float = 30.0
    max_transaction_retry_time: float = 5.0
    encrypted: bool | None = None
    #: ``"system"``, ``"all"`` (trust any certificate), a list of CA file paths, or a driver trust object.
    trusted_certificates: Any = None
    retry_attempts: int = 3

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> Neo4jOptions:
        """Validate ``options`` (unknown keys are an error, so typos do not pass silently)."""
        unknown = sorted(set(options) - _KNOWN_OPTIONS)
        if unknown:
            raise InvalidRequest(f"unknown neo4j option(s): {', '.join(unknown)}")
        parsed = cls(**{key: value for key, value in options.items() if value is not None})
        if not _STORE_NAME.match(parsed.store):
            raise InvalidRequest("neo4j store must be 1-100 characters of letters, digits, '_', '.', '-'")
        if not isinstance(parsed.uri, str) or "://" not in parsed.uri:
            raise InvalidRequest(f"neo4j uri {parsed.uri!r} is not a URI such as bolt://host:7687")
        if not 1 <= int(parsed.retry_attempts) <= 10:
            raise InvalidRequest("neo4j retry_attempts must be from 1 to 10")
        return parsed

    def driver_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``neo4j.AsyncGraphDatabase.driver`` (auth and TLS passed through)."""
        kwargs: dict[str, Any] = {
            "auth": (self.user, self.password) if self.password else None,
            "max_connection_pool_size": int(self.max_connection_pool_size),
            "connection_timeout": float(self.connection_timeout),
            "connection_acquisition_timeout": float(self.connection_acquisition_timeout),
            "max_transaction_retry_time": float(self.max_transaction_retry_time),
            # Notifications (e.g. planner hints) are noise for a library; they also cost bytes per query.
            "notifications_min_severity": "OFF",
        }
        if self.encrypted is not None:
            kwargs["encrypted"] = bool(self.encrypted)
        trust = _trust(self.trusted_certificates)
        if trust is not None:
            kwargs["trusted_certificates"] = trust
        return kwargs


def _trust(value: Any) -> Any:
    if value is None:
        return None
    if value == "system":
        return neo4j.TrustSystemCAs()
    if value == "all":
        return neo4j.TrustAll()
    if isinstance(value, list | tuple):
        return neo4j.TrustCustomCAs(*[str(path) for path in value])
    if isinstance(value, str):
        return neo4j.TrustCustomCAs(value)
    return value
