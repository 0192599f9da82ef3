"""Running ``orchestrator serve``, and reading its usual command lines without the CLI framework.

An MCP client starts ``serve`` at the beginning of every session and waits for its first answer;
the CLI framework (typer and its copy of click, ~25 ms of imports and parsing) is not needed to read
``orchestrator [--config F] [--backend B] [--store S] [--log-level L] serve [--http] [--host H]
[--port P]``. :func:`serve_call` reads exactly those lines; any other (help, ``--version``, a
mistake, an option written in another form) is left to the CLI, which answers it as it always has.
Both run :func:`serve`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from memory_orchestrator.entrypoints.cli.invocation import LOG_LEVELS, CliState, settings_for
from memory_orchestrator.ports import OrchestratorError
from memory_orchestrator.ports.validation import lone_surrogate

#: The global options that take a value, by the ``CliState`` field they set.
GLOBAL_OPTIONS = {
    "--config": "config",
    "-c": "config",
    "--backend": "backend",
    "-b": "backend",
    "--store": "store",
    "--log-level": "log_level",
}
#: ``serve``'s own options: the one flag, and those that take a value.
SERVE_FLAGS = frozenset({"--http"})
SERVE_OPTIONS = frozenset({"--host", "--port"})
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
MAX_PORT = 65535


@dataclass(slots=True)
class ServeCall:
    """One ``serve`` command line: the global options, then ``serve``'s."""

    state: CliState = field(default_factory=CliState)
    http: bool = False
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT


def serve(call: ServeCall, *, started: Callable[[], None] | None = None) -> int:
    """Serve until interrupted; the exit code (2: settings or options the server cannot start with,
    said in one line on stderr; stdout is the protocol's)."""
    try:
        settings = settings_for(call.state)
        from memory_orchestrator.entrypoints.mcp import launch  # the MCP SDK: only when serving

        launch.run(
            settings, store=call.state.store, http=call.http, host=call.host, port=call.port, started=started
        )
    except (OrchestratorError, ValueError) as exc:
        print(f"orchestrator serve: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    return 0


def serve_call(args: Sequence[str]) -> ServeCall | None:
    """``args`` (the command line without the program) as a ``serve`` call, or ``None`` when they are
    anything else or written in a form only the CLI reads."""
    if any(lone_surrogate(arg) is not None for arg in args):
        return None
    words = _split(args)
    if words is None:
        return None
    try:
        at = words.index(("serve", None))
    except ValueError:
        return None
    state = _global_options(words[:at])
    call = _serve_options(words[at + 1 :])
    if state is None or call is None:
        return None
    call.state = state
    return call


def _split(args: Sequence[str]) -> list[tuple[str, str | None]] | None:
    """Options paired with their values (``--name value`` or ``--name=value``), other words alone."""
    words: list[tuple[str, str | None]] = []
    position = 0
    while position < len(args):
        word = args[position]
        position += 1
        name, equals, value = word.partition("=")
        if word.startswith("--") and equals and (name in GLOBAL_OPTIONS or name in SERVE_OPTIONS):
            words.append((name, value))
        elif word in GLOBAL_OPTIONS or word in SERVE_OPTIONS:
            if position == len(args) or args[position].startswith("-"):
                return None  # (the CLI says what is missing, or takes the option-like value)
            words.append((word, args[position]))
            position += 1
        else:
            words.append((word, None))
    return words


def _global_options(words: list[tuple[str, str | None]]) -> CliState | None:
    state = CliState()
    for name, value in words:
        if value is None or name not in GLOBAL_OPTIONS:
            return None
        if name == "--log-level" and value not in LOG_LEVELS:
            return None
        setattr(state, GLOBAL_OPTIONS[name], Path(value) if GLOBAL_OPTIONS[name] == "config" else value)
    return state


def _serve_options(words: list[tuple[str, str | None]]) -> ServeCall | None:
    call = ServeCall()
    for name, value in words:
        if name in SERVE_FLAGS and value is None:
            call.http = True
        elif name == "--host" and value is not None:
            call.host = value
        elif name == "--port" and value is not None and value.isascii() and value.isdigit():
            call.port = int(value)
            if not 1 <= call.port <= MAX_PORT:
                return None
        else:
            return None
    return call
