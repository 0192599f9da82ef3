"""The ``orchestrator`` command line: backend commands, the pipeline, plugins, config and the demo.

``eval``/``bench`` (evaluation) and ``serve`` (MCP server) live in their own modules and are mounted
when present, so the CLI works while they are being written.
"""

from __future__ import annotations

import enum
import importlib
import sys
from pathlib import Path
from typing import Annotated

import typer

# Typer 0.29 carries its own copy of click; its exceptions are not re-exported publicly.
from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError

from memory_orchestrator import __version__
from memory_orchestrator.entrypoints.cli import admin as cli_admin
from memory_orchestrator.entrypoints.cli import demo as cli_demo
from memory_orchestrator.entrypoints.cli import pipeline as cli_pipeline
from memory_orchestrator.entrypoints.cli import stats as cli_stats
from memory_orchestrator.entrypoints.cli import store as cli_store
from memory_orchestrator.entrypoints.cli.state import CliState


class LogLevel(enum.StrEnum):
    """Levels of ``--log-level``."""

    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


app = typer.Typer(
    name="orchestrator",
    help="Memory orchestration for AI agents: plan, retrieve, expand, rank, pack and explain.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"orchestrator {__version__}")
        raise typer.Exit()


@app.callback()
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
            help="Lowest level of the JSON log lines on stderr (default: [log] level; else info for "
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


def _mount_optional(module_name: str, attribute: str, command: str, *, group: bool) -> None:
    # Written by other engineers; a missing or broken module must not take the whole CLI down.
    try:
        module = importlib.import_module(f"memory_orchestrator.entrypoints.{module_name}")
        target = getattr(module, attribute)
    except (ImportError, AttributeError):
        return
    if group:
        app.add_typer(target, name=command)
    else:
        app.command(command)(target)


cli_store.register(app)
cli_pipeline.register(app)
cli_admin.register(app)
cli_demo.register(app)
cli_stats.register(app)
_mount_optional("cli.evaluate", "app", "eval", group=True)
_mount_optional("cli.evaluate", "bench", "bench", group=False)
_mount_optional("cli.serve", "serve", "serve", group=False)


def main() -> None:
    """Console-script entry point: a usage mistake is one line on stderr and exit code 2."""
    try:
        code = app(standalone_mode=False)
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


if __name__ == "__main__":
    main()
