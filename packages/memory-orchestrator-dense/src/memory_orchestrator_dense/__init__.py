"""A dense retrieval channel for mnemon-memory-orchestrator, written as a third-party plugin.

Install it beside the orchestrator (``pip install ./packages/memory-orchestrator-dense``) and turn
it on in the configuration::

    [channels]
    enabled = ["dense"]

It registers the channel ``dense`` through the ``memory_orchestrator`` entry-point group; it imports
only the orchestrator's public surface (``memory_orchestrator.ports`` and ``hookimpl``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from memory_orchestrator.plugins import hookimpl
from memory_orchestrator.ports import ChannelFactory

if TYPE_CHECKING:
    from memory_orchestrator_dense.channel import DenseChannel, IndexReport
    from memory_orchestrator_dense.embedder import SPACE, MiniLmEmbedder

__all__ = ["SPACE", "DenseChannel", "IndexReport", "MiniLmEmbedder", "create_channel", "register_channels"]

#: Where each public name lives. They are imported on first use: numpy and the model runtime cost
#: ~0.15 s, which every process that merely discovers plugins (``orchestrator serve`` at start-up,
#: say) would otherwise pay without ever turning the channel on.
_LAZY = {
    "DenseChannel": "channel",
    "IndexReport": "channel",
    "SPACE": "embedder",
    "MiniLmEmbedder": "embedder",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def create_channel(options: Mapping[str, Any]) -> DenseChannel:
    """The registered factory (see :func:`memory_orchestrator_dense.channel.create_channel`)."""
    from memory_orchestrator_dense.channel import create_channel as create

    return create(options)


@hookimpl
def register_channels(register: Callable[[str, ChannelFactory], None]) -> None:
    """Register the ``dense`` channel (numpy and the model load when a channel is created or
    searches, not here)."""
    register("dense", create_channel)
