"""A dense retrieval channel for mnemon-memory-orchestrator, written as a third-party plugin.

Install it beside the orchestrator (``pip install ./packages/memory-orchestrator-dense``) and turn
it on in the configuration::

    [channels]
    enabled = ["dense"]

It registers the channel ``dense`` through the ``memory_orchestrator`` entry-point group; it imports
only the orchestrator's public surface (``memory_orchestrator.ports`` and ``hookimpl``).
"""

from __future__ import annotations

from collections.abc import Callable

from memory_orchestrator.plugins import hookimpl
from memory_orchestrator.ports import ChannelFactory
from memory_orchestrator_dense.channel import DenseChannel, IndexReport, create_channel
from memory_orchestrator_dense.embedder import SPACE, MiniLmEmbedder

__all__ = ["SPACE", "DenseChannel", "IndexReport", "MiniLmEmbedder", "create_channel", "register_channels"]


@hookimpl
def register_channels(register: Callable[[str, ChannelFactory], None]) -> None:
    """Register the ``dense`` channel (the model loads on its first search, not here)."""
    register("dense", create_channel)
