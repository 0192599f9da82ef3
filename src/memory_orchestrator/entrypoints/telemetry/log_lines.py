"""JSON log lines on stderr: each with a UTC timestamp, a level, and the request id when a request
is being served.

A request id is a trace id reserved for the request (:func:`request_scope`): the first trace the
request creates takes it, so ``request_id`` in a log line is the ``trace_id`` that ``memory_explain``
and ``orchestrator trace show`` accept. Lines written by ``LOG.info(json.dumps({...}))`` keep their
fields; any other message becomes ``{"message": ...}``.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, ParamSpec, TypeVar

from memory_orchestrator.domain.trace import new_trace_id, reserved_trace_id

ROOT_LOGGER = "memory_orchestrator"
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
_request_id: ContextVar[str | None] = ContextVar("memory_orchestrator_request_id", default=None)
P = ParamSpec("P")
T = TypeVar("T")


def current_request_id() -> str | None:
    """The id of the request being served in this context, if any."""
    return _request_id.get()


@contextmanager
def request_scope() -> Iterator[str]:
    """Serve one request: a fresh request id, which the request's first trace takes as its id."""
    request_id = new_trace_id()
    token = _request_id.set(request_id)
    try:
        with reserved_trace_id(request_id):
            yield request_id
    finally:
        _request_id.reset(token)


def in_request_scope(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """``fn`` (a coroutine function, e.g. an MCP tool) run inside a :func:`request_scope`."""

    @functools.wraps(fn)
    async def scoped(*args: P.args, **kwargs: P.kwargs) -> T:
        with request_scope():
            return await fn(*args, **kwargs)

    return scoped


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time (tests and runners swap it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


class JsonLineFormatter(logging.Formatter):
    """One JSON object per line: ``ts`` (ISO 8601 UTC), ``level``, ``logger``, ``request_id``, fields."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one JSON line."""
        message = record.getMessage()
        fields: dict[str, Any] | None = None
        if message.startswith("{"):
            try:
                parsed = json.loads(message)
                fields = parsed if isinstance(parsed, dict) else None
            except ValueError:
                fields = None
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        request_id = _request_id.get()
        if request_id is not None:
            line["request_id"] = request_id
        line.update(fields if fields is not None else {"message": message})
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, sort_keys=True, default=str)


def configure_logging(level: str | int = "info", *, exclusive: bool = False) -> None:
    """JSON lines at ``level`` and above on stderr (never stdout: it carries the stdio protocol and
    ``--json`` output) for every logger of the project; idempotent (a second call sets the level).

    ``exclusive`` (the server): lines do not also go to handlers on Python's root logger, which the
    MCP SDK configures for its own messages and would print them a second time.
    """
    numeric = LEVELS[level.lower()] if isinstance(level, str) else level
    root = logging.getLogger(ROOT_LOGGER)
    if not any(getattr(handler, "_memory_orchestrator", False) for handler in root.handlers):
        handler = _StderrHandler()
        handler.setFormatter(JsonLineFormatter())
        handler._memory_orchestrator = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    root.propagate = not exclusive
    root.setLevel(numeric)
