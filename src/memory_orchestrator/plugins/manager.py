"""Discovers plugins through entry points and collects the backends, scorers and channels they register."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any, cast

import pluggy

from memory_orchestrator.plugins import hookspecs
from memory_orchestrator.plugins.markers import ENTRY_POINT_GROUP, PROJECT_NAME
from memory_orchestrator.ports import MemoryBackend, OrchestratorError, PluginError, RetrievalChannel, Scorer

#: The distribution whose entry points are the built-in plugins (always loaded).
BUILTIN_DISTRIBUTION = "mnemon-memory-orchestrator"

Factory = Callable[[Mapping[str, Any]], Any]


@dataclass(frozen=True, slots=True)
class Registration:
    """One named factory and the plugin that registered it."""

    kind: str
    name: str
    plugin: str
    factory: Factory


@dataclass(frozen=True, slots=True)
class PluginInfo:
    """What ``orchestrator plugins`` shows about one loaded plugin."""

    name: str
    distribution: str
    version: str
    builtin: bool
    backends: tuple[str, ...]
    scorers: tuple[str, ...]
    channels: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "builtin": self.builtin,
            "backends": list(self.backends),
            "scorers": list(self.scorers),
            "channels": list(self.channels),
        }


class PluginManager:
    """A pluggy manager plus the registries filled by the ``register_*`` hooks.

    ``allow`` restricts third-party plugins to the named entry points (``None`` loads every installed
    plugin); the built-in plugins are always loaded. Nothing happens at construction: call
    :meth:`load_entry_points` (or :meth:`register` for in-process plugins, as tests do).
    """

    def __init__(self, *, allow: Collection[str] | None = None) -> None:
        self._pm = pluggy.PluginManager(PROJECT_NAME)
        self._pm.add_hookspecs(hookspecs)
        self._allow = None if allow is None else frozenset(allow)
        self._origins: dict[str, tuple[str, str, bool]] = {}
        self._registry: dict[str, dict[str, Registration]] | None = None

    def load_entry_points(self) -> None:
        """Load the plugins of the entry-point group ``memory_orchestrator`` (honouring ``allow``)."""
        found = sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)
        if self._allow is not None:
            missing = self._allow - {ep.name for ep in found}
            if missing:
                raise PluginError(
                    f"allow-listed plugin(s) not installed: {', '.join(sorted(missing))} "
                    f"(installed: {', '.join(ep.name for ep in found) or 'none'})"
                )
        origins: dict[int, tuple[str, str]] = {}
        for entry in found:
            origin = _distribution(entry, origins)
            builtin = origin[0] == BUILTIN_DISTRIBUTION
            if not builtin and self._allow is not None and entry.name not in self._allow:
                continue
            self._load_entry_point(entry, builtin, origin)

    def _load_entry_point(self, entry: EntryPoint, builtin: bool, origin: tuple[str, str]) -> None:
        if self._pm.has_plugin(entry.name):
            raise PluginError(
                f"two plugins are named {entry.name!r}: {entry.value} and {self._origin_label(entry.name)}"
            )
        try:
            plugin = entry.load()
        except Exception as exc:
            raise PluginError(f"plugin {entry.name!r} ({entry.value}) failed to load: {exc}") from exc
        self.register(plugin, name=entry.name)
        self._origins[entry.name] = (*origin, builtin)

    def register(self, plugin: object, *, name: str | None = None) -> str:
        """Register an in-process plugin object (module, class or instance); returns its name."""
        try:
            registered = self._pm.register(plugin, name=name)
        except ValueError as exc:
            raise PluginError(f"plugin {name!r} cannot be registered: {exc}") from exc
        except pluggy.PluginValidationError as exc:
            raise PluginError(f"plugin {name!r} is invalid: {exc}") from exc
        if registered is None:
            raise PluginError(f"plugin {name!r} is blocked")
        self._registry = None
        return registered

    def unregister(self, name: str) -> None:
        """Remove a plugin by name (tests register a plugin and unregister it in ``finally``)."""
        self._pm.unregister(name=name)
        self._origins.pop(name, None)
        self._registry = None

    def unknown_hooks(self) -> list[str]:
        """One line per hook a plugin implements that is not ours (usually a misspelling).

        Each line names the plugin, its distribution and the hook, and suggests the closest hook.
        """
        known = sorted(name for name in vars(hookspecs) if name.startswith("register_"))
        problems = []
        for hook_name in sorted(vars(self._pm.hook)):
            caller = getattr(self._pm.hook, hook_name)
            if hook_name.startswith("_") or caller.has_spec():
                continue
            for impl in caller.get_hookimpls():
                if impl.optionalhook:
                    continue
                close = difflib.get_close_matches(hook_name, known, n=1)
                hint = f"did you mean {close[0]!r}?" if close else f"hooks are {', '.join(known)}"
                problems.append(
                    f"plugin {impl.plugin_name!r} ({self._origin_label(impl.plugin_name)}) implements "
                    f"{hook_name!r}, which is not a hook; {hint}"
                )
        return problems

    def check_pending(self) -> None:
        """Fail when a plugin implements a hook that does not exist (usually a misspelling)."""
        problems = self.unknown_hooks()
        if problems:
            raise PluginError("; ".join(problems))

    @property
    def backends(self) -> Mapping[str, Registration]:
        """Registered backend factories by name."""
        return self._collect()["backend"]

    @property
    def scorers(self) -> Mapping[str, Registration]:
        """Registered scorer factories by name."""
        return self._collect()["scorer"]

    @property
    def channels(self) -> Mapping[str, Registration]:
        """Registered retrieval channel factories by name."""
        return self._collect()["channel"]

    def create_backend(self, name: str, options: Mapping[str, Any]) -> MemoryBackend:
        """Build (not open) the backend registered as ``name``."""
        registration = self.backends.get(name)
        if registration is None:
            known = ", ".join(sorted(self.backends)) or "none"
            raise PluginError(f"backend {name!r} is not registered by any plugin (available: {known})")
        backend = _build(registration, options)
        if not isinstance(backend, MemoryBackend):
            raise PluginError(f"plugin {registration.plugin!r}: backend {name!r} is not a MemoryBackend")
        return backend

    def create_scorer(self, name: str, options: Mapping[str, Any]) -> Scorer:
        """Build the scorer registered as ``name``."""
        registration = self.scorers.get(name)
        if registration is None:
            known = ", ".join(sorted(self.scorers)) or "none"
            raise PluginError(f"scorer {name!r} is not registered by any plugin (available: {known})")
        scorer = _build(registration, options)
        if not isinstance(scorer, Scorer):
            raise PluginError(f"plugin {registration.plugin!r}: scorer {name!r} is not a Scorer")
        return scorer

    def create_channel(self, name: str, options: Mapping[str, Any]) -> RetrievalChannel:
        """Build the retrieval channel registered as ``name``."""
        registration = self.channels.get(name)
        if registration is None:
            known = ", ".join(sorted(self.channels)) or "none"
            raise PluginError(f"channel {name!r} is not registered by any plugin (available: {known})")
        channel = _build(registration, options)
        if not all(hasattr(channel, attribute) for attribute in ("name", "supports", "search")):
            raise PluginError(
                f"plugin {registration.plugin!r}: channel {name!r} is not a RetrievalChannel "
                "(it needs name, supports and search)"
            )
        return cast(RetrievalChannel, channel)

    def plugins(self) -> list[PluginInfo]:
        """Every registered plugin with what it provides, sorted by name."""
        registry = self._collect()
        infos = []
        for name, _plugin in sorted(self._pm.list_name_plugin()):
            distribution, version, builtin = self._origins.get(name, ("", "", False))
            infos.append(
                PluginInfo(
                    name=name,
                    distribution=distribution,
                    version=version,
                    builtin=builtin,
                    backends=tuple(sorted(r.name for r in registry["backend"].values() if r.plugin == name)),
                    scorers=tuple(sorted(r.name for r in registry["scorer"].values() if r.plugin == name)),
                    channels=tuple(sorted(r.name for r in registry["channel"].values() if r.plugin == name)),
                )
            )
        return infos

    def _collect(self) -> dict[str, dict[str, Registration]]:
        if self._registry is None:
            self._registry = {
                "backend": self._call_register_hook("register_backends", "backend"),
                "scorer": self._call_register_hook("register_scorers", "scorer"),
                "channel": self._call_register_hook("register_channels", "channel"),
            }
        return self._registry

    def _call_register_hook(self, hook_name: str, kind: str) -> dict[str, Registration]:
        # Each implementation is called on its own so that every registration knows its plugin,
        # which is what lets a duplicate name be reported with both culprits.
        found: dict[str, Registration] = {}
        for impl in getattr(self._pm.hook, hook_name).get_hookimpls():
            plugin_name = impl.plugin_name

            def register(name: str, factory: Factory, _plugin: str = plugin_name) -> None:
                _check_registration(kind, name, factory, _plugin, found)
                found[name] = Registration(kind=kind, name=name, plugin=_plugin, factory=factory)

            arguments = {"register": register}
            try:
                impl.function(**{arg: arguments[arg] for arg in impl.argnames if arg in arguments})
            except PluginError:
                raise
            except Exception as exc:
                raise PluginError(f"plugin {plugin_name!r} failed in {hook_name}: {exc}") from exc
        return found

    def _origin_label(self, name: str) -> str:
        distribution, version = self._origins.get(name, ("", "", False))[:2]
        if not distribution:
            return "an in-process plugin"
        return f"distribution {distribution!r} {version}".rstrip()


def _check_registration(
    kind: str, name: str, factory: Factory, plugin: str, found: Mapping[str, Registration]
) -> None:
    if not isinstance(name, str) or not name.strip():
        raise PluginError(f"plugin {plugin!r} registered a {kind} with an empty or non-text name")
    if not callable(factory):
        raise PluginError(f"plugin {plugin!r} registered {kind} {name!r} with a factory that is not callable")
    if name in found:
        raise PluginError(
            f"{kind} name {name!r} is registered twice: by plugin {found[name].plugin!r} "
            f"and by plugin {plugin!r}"
        )


def _build(registration: Registration, options: Mapping[str, Any]) -> Any:
    try:
        return registration.factory(options)
    except OrchestratorError:
        # Port errors (InvalidRequest for bad options ...) already say what is wrong.
        raise
    except Exception as exc:
        raise PluginError(
            f"plugin {registration.plugin!r} could not build {registration.kind} {registration.name!r}: {exc}"
        ) from exc


def _distribution(entry: EntryPoint, known: dict[int, tuple[str, str]]) -> tuple[str, str]:
    """The name and version of the distribution that declares ``entry`` (``known``: those read).

    Each ``name`` or ``version`` of a distribution parses its whole METADATA file again (ours holds
    the README, ~120 KB): three parses per entry point were ~15 ms of ``serve``'s start.
    """
    dist = entry.dist
    if dist is None:
        return ("", "")
    if id(dist) not in known:  # entry points of one distribution share its object
        metadata = dist.metadata
        known[id(dist)] = (metadata["Name"] or "", metadata["Version"] or "")
    return known[id(dist)]


def load_plugins(*, allow: Collection[str] | None = None, check: bool = True) -> PluginManager:
    """A manager with every installed (and allowed) plugin loaded and (unless ``check=False``) checked."""
    manager = PluginManager(allow=allow)
    manager.load_entry_points()
    if check:
        manager.check_pending()
    return manager
