"""The ``orchestrator`` console script.

``--version`` is answered before the CLI is imported: the commands pull in the MCP SDK, pydantic and the
evaluation stack (about a second of imports), which a version check does not need.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Print the version, or run the CLI."""
    if sys.argv[1:] == ["--version"]:
        from memory_orchestrator import __version__

        sys.stdout.write(f"orchestrator {__version__}\n")
        return
    from memory_orchestrator.entrypoints.cli.app import main as run_cli

    run_cli()
