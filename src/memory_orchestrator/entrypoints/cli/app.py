"""The ``orchestrator`` command line: backend commands, the pipeline, plugins, config and the demo.

Each command group lives in a module of its own (``COMMANDS``); a run mounts only the module of the
command it names, so ``serve`` starts without the others' imports. ``eval``/``bench`` (evaluation)
and ``serve`` (MCP server) are mounted only when they import.
"""

from __future__ import annotations

import enum
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer

# Typer 0.29 carries its own copy of click; its exceptions are not re-exported publicly.
from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError

from memory_orchestrator import __version__
from memory_orchestrator.entrypoints.cli.console import end_of_startup
from memory_orchestrator.entrypoints.cli.invocation import CliState
from memory_orchestrator.ports.validation import lone_surrogate


class LogLevel(enum.StrEnum):
    """Levels of ``--log-level``."""

    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"orchestrator {__version__}")
        raise typer.Exit()


def main_options(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", "-c", help="TOML file (default: $ORCHESTRATOR_CONFIG or ./orchestrator.toml)."
        ),
    ] = None,
    backend: Annotated[
        str | None, typer.Option("--backend", "-b", help="Backend to use (overrides backend.name).")
    ] = None,
    store: Annotated[
        str | None, typer.Option("--store", help="Store (namespace) inside the backend.")
    ] = None,
    log_level: Annotated[
        LogLevel | None,
        typer.Option(
            "--log-level",
            help="Lowest level of the JSON log lines on stderr (default: \\[log] level; else info for "
            "serve, warning for other commands).",
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option("--version", is_eager=True, callback=_print_version, help="Print the version and exit."),
    ] = False,
) -> None:
    """Global options, given before the command."""
    ctx.obj = CliState(
        config=config, backend=backend, store=store, log_level=log_level.value if log_level else None
    )


#: The commands each CLI module mounts: a run imports only the module of the command it names (so
#: ``serve`` does not load the tables and progress bars of the others); help, or a word that names no
#: command, mounts them all. ``evaluate`` and ``serve`` are mounted only if they import (they pull in
#: the evaluation stack and the MCP SDK, optional for the rest of the CLI).
COMMANDS: dict[str, tuple[str, ...]] = {
    "store": ("remember", "link", "recall", "get", "forget", "health", "import"),
    "pipeline": ("search", "context", "expand", "explain", "write", "trace"),
    "admin": ("plugins", "config"),
    "demo": ("demo",),
    "stats": ("stats",),
    "evaluate": ("eval", "bench"),
    "serve": ("serve",),
}
#: Global options that take a value (the word after them is not the command).
_VALUED_OPTIONS = frozenset({"--config", "-c", "--backend", "-b", "--store", "--log-level"})


def command_named(args: Sequence[str]) -> str | None:
    """The command word of a command line (``args`` without the program), or None (none given)."""
    takes_value = False
    for word in args:
        if takes_value:
            takes_value = False
        elif word.startswith("-"):
            takes_value = word in _VALUED_OPTIONS
        else:
            return word
    return None


def build_app(command: str | None = None) -> typer.Typer:
    """The CLI with the module of ``command`` mounted, or every module (``None`` or an unknown word)."""
    cli = typer.Typer(
        name="orchestrator",
        help="Memory orchestration for AI agents: plan, retrieve, expand, rank, pack and explain.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    cli.callback()(main_options)
    modules = [module for module, names in COMMANDS.items() if command in names] or list(COMMANDS)
    for module in modules:
        _mount(cli, module)
    return cli


def _mount(cli: typer.Typer, module: str) -> None:
    if module == "evaluate":
        _mount_optional(cli, "cli.evaluate", "app", "eval", group=True)
        _mount_optional(cli, "cli.evaluate", "bench", "bench", group=False)
    elif module == "serve":
        _mount_optional(cli, "cli.serve", "serve", "serve", group=False)
    else:
        importlib.import_module(f"memory_orchestrator.entrypoints.cli.{module}").register(cli)


def _mount_optional(cli: typer.Typer, module_name: str, attribute: str, command: str, *, group: bool) -> None:
    # Written by other engineers; a missing or broken module must not take the whole CLI down.
    try:
        module = importlib.import_module(f"memory_orchestrator.entrypoints.{module_name}")
        target = getattr(module, attribute)
    except (ImportError, AttributeError):
        return
    if group:
        cli.add_typer(target, name=command)
    else:
        cli.command(command)(target)


def __getattr__(name: str) -> typer.Typer:
    # ``app``, the whole CLI (for tests and embedding), is built on first use: the console script
    # builds only what its command needs (``main``)
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    whole = globals()["app"] = build_app()
    return whole


def main() -> None:
    """Console-script entry point: a usage mistake is one line on stderr and exit code 2."""
    undecodable = _undecodable_argument(sys.argv[1:])
    if undecodable is not None:
        sys.stderr.write(f"error: {undecodable}\n")
        sys.exit(2)
    command = command_named(sys.argv[1:])
    cli = build_app(command)
    if command != "serve":  # serve's start-up goes on until its server is built
        end_of_startup()
    try:
        code = cli(standalone_mode=False)
    except NoArgsIsHelpError:
        code = 2  # a group called without a command: its help is already printed
    except UsageError as exc:
        command = exc.ctx.command_path if exc.ctx else "orchestrator"
        sys.stderr.write(f"error: {' '.join(exc.format_message().split())} (see `{command} --help`)\n")
        code = exc.exit_code
    except typer.Abort:
        sys.stderr.write("aborted\n")
        code = 1
    except ClickException as exc:
        sys.stderr.write(f"error: {' '.join(exc.format_message().split())}\n")
        code = exc.exit_code
    sys.exit(code if isinstance(code, int) else 0)


def _undecodable_argument(arguments: Sequence[str]) -> str | None:
    # Bytes that are not UTF-8 reach Python as lone surrogates, which nothing downstream can store,
    # print or send: one clear line here rather than an encoding error from wherever they land.
    for number, argument in enumerate(arguments, start=1):
        position = lone_surrogate(argument)
        if position is not None:
            return f"argument {number} is not valid UTF-8 text (at character {position + 1})"
    return None


if __name__ == "__main__":
    main()
