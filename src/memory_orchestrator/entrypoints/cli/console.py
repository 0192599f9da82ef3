"""The ``orchestrator`` console script.

``--version`` is answered before the CLI is imported: the commands pull in the MCP SDK, pydantic and the
evaluation stack (about a second of imports), which a version check does not need.

Start-up imports several hundred modules and builds hundreds of pydantic classes: every object they
make lives as long as the process, yet the cyclic garbage collector would walk them again and again
(~250 collections, about a sixth of ``serve``'s start). :func:`imports_without_gc` pauses it while
they load and then moves what they made out of its sight (``gc.freeze``).
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def imports_without_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while modules load, then freeze what they made (those
    objects stay for the life of the process; later collections skip them). Re-entrant."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def main() -> None:
    """Print the version, or run the CLI."""
    if sys.argv[1:] == ["--version"]:
        from memory_orchestrator import __version__

        sys.stdout.write(f"orchestrator {__version__}\n")
        return
    with imports_without_gc():
        from memory_orchestrator.entrypoints.cli.app import main as run_cli

    run_cli()
