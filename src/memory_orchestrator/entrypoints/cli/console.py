"""The ``orchestrator`` console script.

``--version`` is answered before the CLI is imported: the commands pull in the MCP SDK, pydantic and the
evaluation stack (about a second of imports), which a version check does not need; and the usual
``serve`` command lines are read without the CLI framework (see ``serving``).
"""

from __future__ import annotations

import gc
import sys

#: Allocations (net of frees) between two young-generation collections; Python's default is 700. A
#: request allocates a few thousand objects that live until it answers: at 700 the collector ran
#: several times per request, each time promoting that request's live objects towards the oldest
#: generation, and every tenth promotion round ran a full collection of the whole heap (30-80 ms in a
#: process holding a 10k store, the tail of its latency). At 10,000 a request seldom triggers one, and
#: cyclic garbage is still collected, at most 10,000 objects late.
YOUNG_COLLECTION_THRESHOLD = 10_000


def main() -> None:
    """Print the version, or run the CLI (with the collector tuned for a long-lived process)."""
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])
    if sys.argv[1:] == ["--version"]:
        from memory_orchestrator import __version__

        sys.stdout.write(f"orchestrator {__version__}\n")
        return
    gc.disable()  # until the start-up is over: see end_of_startup
    try:
        if "serve" in sys.argv[1:]:  # started by an MCP client, which waits: without the CLI framework
            from memory_orchestrator.entrypoints.cli.serving import serve, serve_call

            call = serve_call(sys.argv[1:])
            if call is not None:
                sys.exit(serve(call, started=end_of_startup))
        from memory_orchestrator.entrypoints.cli.app import main as run_cli

        run_cli()
    finally:
        end_of_startup()


def end_of_startup() -> None:
    """Turn the collector back on once the start-up (imports, settings, the server) is done.

    The start-up makes ~150k tracked objects (modules, classes, pydantic and MCP schemas), nearly all
    kept for the life of the process; young and middle collections walked them ~16 times during
    ``serve``'s start (~80 ms before its first answer) and found little garbage. With the collector
    off they stay young, and here they move to the oldest generation unwalked (``freeze`` then
    ``unfreeze`` puts them there); the first full collection sees them, as it did before, and the
    little start-up garbage goes then. Idempotent; a no-op when the collector is already on.
    """
    if gc.isenabled():
        return
    gc.freeze()
    gc.unfreeze()
    gc.enable()
