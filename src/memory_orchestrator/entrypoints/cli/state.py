"""What every CLI command shares: global options, settings loading, running async work, exit codes."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

import typer

from memory_orchestrator.entrypoints.cli.invocation import CliState, settings_for
from memory_orchestrator.entrypoints.config.settings import Settings
from memory_orchestrator.ports import (
    AccessDenied,
    BackendError,
    Filters,
    InvalidRequest,
    NotFound,
    OrchestratorError,
    PluginError,
    TimeRange,
    TimestampOutOfRange,
    parse_timestamp,
)

T = TypeVar("T")

#: Exit codes of expected failures (most specific first); anything else is a bug and shows a traceback.
EXIT_CODES: tuple[tuple[type[OrchestratorError], int], ...] = (
    (InvalidRequest, 2),
    (NotFound, 3),
    (AccessDenied, 4),
    (BackendError, 5),
    (PluginError, 6),
    (OrchestratorError, 1),
)

JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")]


def state_of(ctx: typer.Context) -> CliState:
    """The global options of this invocation."""
    state = ctx.find_root().obj
    return state if isinstance(state, CliState) else CliState()


def settings_of(ctx: typer.Context) -> Settings:
    """Settings from the file and environment, with the global ``--backend`` / ``--store`` applied."""
    return settings_for(state_of(ctx))


def exit_code_for(exc: OrchestratorError) -> int:
    """The process exit code of an expected failure."""
    return next(code for kind, code in EXIT_CODES if isinstance(exc, kind))


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print a one-line error on stderr and return the Exit to raise."""
    # Imported here: the tables behind it (rich) are not needed by ``serve`` before its first answer.
    from memory_orchestrator.entrypoints.cli.output import printable

    sys.stderr.write(f"error: {printable(' '.join(message.split()))}\n")
    return typer.Exit(code)


def run(action: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run async CLI work; expected errors become a one-line message and a non-zero exit code."""
    try:
        return asyncio.run(action())
    except OrchestratorError as exc:
        raise fail(str(exc), exit_code_for(exc)) from None
    except OSError as exc:
        raise fail(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), 1) from None


def guarded(action: Callable[[], T]) -> T:
    """Run synchronous CLI work with the same error handling as :func:`run`."""
    try:
        return action()
    except OrchestratorError as exc:
        raise fail(str(exc), exit_code_for(exc)) from None


def print_json(data: Any) -> None:
    """Write ``data`` as indented JSON on stdout."""
    typer.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))


def parse_time_option(value: str | None, option: str) -> datetime | None:
    """Parse an RFC 3339 option value; a bad value is an ``InvalidRequest`` naming the option."""
    if value is None or value == "":
        return None
    try:
        return parse_timestamp(value)
    except TimestampOutOfRange as exc:
        raise InvalidRequest(f"{option}: {exc}") from exc
    except ValueError as exc:
        raise InvalidRequest(f"{option}: not an ISO 8601 timestamp: {value!r}") from exc


def parse_since_option(value: str | None, option: str, now: datetime | None) -> datetime | None:
    """Read ``--since`` with the parser MCP's ``memory_changes`` uses: a timestamp, '2 days', 'yesterday'."""
    if value is None or value == "":
        return None
    # Imported here: the sessions module (and its time parser) is not needed by ``serve`` to start.
    from memory_orchestrator.domain.sessions import parse_since

    try:
        return parse_since(value, now or datetime.now(UTC))
    except TimestampOutOfRange as exc:
        raise InvalidRequest(f"{option}: {exc}") from exc
    except InvalidRequest as exc:
        raise InvalidRequest(f"{option}: {exc}") from exc


def build_filters(
    categories: list[str] | None,
    sources: list[str] | None,
    entities: list[str] | None,
    since: str | None,
    until: str | None,
    now: datetime | None = None,
) -> Filters:
    """Filters from the common ``--category/--source/--entity/--since/--until`` options.

    ``--since`` also reads relative phrases ('yesterday', '2 days') counted back from ``now``.
    """
    start = parse_since_option(since, "--since", now)
    end = parse_time_option(until, "--until")
    if start is not None and end is not None and start >= end:
        raise InvalidRequest("--since must be earlier than --until")
    return Filters(
        categories=tuple(categories or ()),
        sources=tuple(sources or ()),
        entities=tuple(entities or ()),
        time_range=TimeRange(start, end) if start or end else None,
    )


CategoryOption = Annotated[
    list[str] | None, typer.Option("--category", help="Only these categories (repeatable).")
]
SourceOption = Annotated[list[str] | None, typer.Option("--source", help="Only these sources (repeatable).")]
EntityOption = Annotated[
    list[str] | None, typer.Option("--entity", help="Only memories naming this entity (repeatable).")
]
SinceOption = Annotated[
    str | None, typer.Option("--since", help="Created at or after (ISO 8601, '2 days', 'yesterday').")
]
UntilOption = Annotated[str | None, typer.Option("--until", help="Created before (ISO 8601).")]
NowOption = Annotated[
    str | None, typer.Option("--now", help="Ask 'as of' this moment (ISO 8601); later memories are ignored.")
]
