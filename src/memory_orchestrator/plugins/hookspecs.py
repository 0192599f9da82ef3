"""The hooks a plugin can implement.

Every hook is synchronous, cheap and free of I/O: it only *registers* factories, which are called
later by the composition root when the configuration asks for them. Hooks are always called with
keyword arguments, so new arguments can be added without breaking existing plugins (a plugin only
declares the arguments it uses).
"""

from __future__ import annotations

from collections.abc import Callable

from memory_orchestrator.plugins.markers import hookspec
from memory_orchestrator.ports import BackendFactory, ChannelFactory, ScorerFactory

#: ``register(name, factory)`` for backends.
RegisterBackend = Callable[[str, BackendFactory], None]
#: ``register(name, factory)`` for scorers.
RegisterScorer = Callable[[str, ScorerFactory], None]
#: ``register(name, factory)`` for retrieval channels.
RegisterChannel = Callable[[str, ChannelFactory], None]


@hookspec
def register_backends(register: RegisterBackend) -> None:
    """Register memory backends by calling ``register(name, factory)`` once per backend.

    Arguments:
        register: callable taking ``name`` (str, the name used by ``backend.name`` in the
            configuration and by ``--backend``) and ``factory`` (a callable ``factory(options) ->
            MemoryBackend`` that builds an *unopened* backend from its configuration mapping,
            without I/O). Importing a heavy driver belongs inside the factory, not at module level.

    Registering a name that another plugin already registered is an error naming both plugins.
    """


@hookspec
def register_scorers(register: RegisterScorer) -> None:
    """Register ranking signals by calling ``register(name, factory)`` once per scorer.

    Arguments:
        register: callable taking ``name`` (str, the key shown in every result's score breakdown
            and used in the ``[scorers]`` configuration section) and ``factory`` (a callable
            ``factory(options) -> Scorer`` building a :class:`memory_orchestrator.ports.Scorer`
            from its options mapping, e.g. ``{"weight": 0.1}``).

    Registering a name that another plugin already registered is an error naming both plugins.
    """


@hookspec
def register_channels(register: RegisterChannel) -> None:
    """Register retrieval channels by calling ``register(name, factory)`` once per channel.

    Arguments:
        register: callable taking ``name`` (str, the channel's name in traces, in
            ``pipeline.channel_weights`` and in the ``[channels]`` configuration section) and
            ``factory`` (a callable ``factory(options) -> RetrievalChannel``, see
            :class:`memory_orchestrator.ports.RetrievalChannel`). A channel is only used when the
            configuration enables it (``channels.enabled``); loading a model belongs in the channel's
            first search, not in the factory.

    Registering a name that another plugin already registered is an error naming both plugins.
    """
