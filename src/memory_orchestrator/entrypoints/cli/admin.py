"""CLI commands about the installation itself: plugins and configuration."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from rich.text import Text

from memory_orchestrator.entrypoints.cli import output as out
from memory_orchestrator.entrypoints.cli.state import (
    EXIT_CODES,
    JsonOption,
    fail,
    guarded,
    print_json,
    settings_of,
)
from memory_orchestrator.entrypoints.config.bootstrap import build_plugins
from memory_orchestrator.entrypoints.config.settings import hash_token
from memory_orchestrator.ports import PluginError

config_app = typer.Typer(help="Inspect the configuration.", no_args_is_help=True)


def plugins(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """List the loaded plugins and the backends, scorers and channels each registers.

    A plugin implementing an unknown (misspelt) hook is still listed; the problem is reported after
    the list and the exit code is that of a plugin error.
    """

    def action() -> dict[str, Any]:
        manager = build_plugins(settings_of(ctx), check=False)
        return {
            "problems": manager.unknown_hooks(),
            "plugins": [info.to_dict() for info in manager.plugins()],
            "backends": {name: reg.plugin for name, reg in sorted(manager.backends.items())},
            "scorers": {name: reg.plugin for name, reg in sorted(manager.scorers.items())},
            "channels": {name: reg.plugin for name, reg in sorted(manager.channels.items())},
        }

    data = guarded(action)
    if as_json:
        print_json(data)
        if data["problems"]:
            raise fail("; ".join(data["problems"]), dict(EXIT_CODES)[PluginError])
        return
    rows = [
        (
            p["name"],
            "built-in" if p["builtin"] else p["distribution"] or "in-process",
            p["version"],
            ", ".join(p["backends"]) or "-",
            ", ".join(p["scorers"]) or "-",
            ", ".join(p["channels"]) or "-",
        )
        for p in data["plugins"]
    ]
    columns = ("plugin", "from", "version", "backends", "scorers", "channels")
    out.console.print(out.table("plugins", columns, rows))
    if data["problems"]:
        raise fail("; ".join(data["problems"]), dict(EXIT_CODES)[PluginError])


@config_app.command("show")
def config_show(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Print the effective configuration (file + environment + flags), secrets masked."""
    settings = guarded(lambda: settings_of(ctx))
    data = settings.masked()
    if as_json:
        print_json(data)
        return
    source = str(settings.config_file) if settings.config_file else "none (defaults + environment)"
    out.console.print(Text(f"configuration file: {source}"))
    out.console.print(Text(json.dumps(data, indent=2, ensure_ascii=False)))


@config_app.command("hash-token")
def config_hash_token(
    token: Annotated[
        str | None, typer.Argument(help="The bearer token; read from stdin when omitted.")
    ] = None,
) -> None:
    """Print the SHA-256 digest to put in an auth token's sha256 key (the token itself is never stored)."""
    secret = token if token is not None else sys.stdin.readline().strip()
    typer.echo(guarded(lambda: hash_token(secret)))


def register(app: typer.Typer) -> None:
    """Mount the installation commands on ``app``."""
    app.command()(plugins)
    app.add_typer(config_app, name="config")
