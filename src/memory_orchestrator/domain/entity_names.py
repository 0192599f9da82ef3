"""Entity names a caller asks for, resolved against the names the store knows.

A filter or a seed names an entity the way a person would: ``stratus`` for "Stratus Hosting", or
``SH`` for the same. :func:`resolve_names` turns each requested name into every known name that

- equals it, ignoring case;
- starts with it word for word: "Stratus" and "stratus hosting" match "Stratus Hosting", "Strat"
  does not (a whole-word prefix, so a short name never matches inside a word);
- is abbreviated by it (the alias rule): a requested name of two or more capital letters and nothing
  else ("SH") matches a known name of as many words whose initials spell it ("Stratus Hosting"), but
  only when no known name matches it by the two rules above (a store that knows "SH" gets "SH").

The store knows no other aliases (records carry names, not alternative spellings), so this is all
"known aliases" means here. A requested name is always kept as given too, so a name the store holds
beyond its known-entities list still matches exactly; a name matching no known entity is reported
with the closest known names, so an empty answer never goes unexplained.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from memory_orchestrator.domain.deadlines import within
from memory_orchestrator.domain.trace import Trace
from memory_orchestrator.ports import MemoryBackend

#: How many names the store is asked for (most used first).
KNOWN_LIMIT = 1000
#: How many close names a warning offers, and how close (0..1) a name must be to be offered.
CLOSEST = 3
CLOSEST_CUTOFF = 0.6

_WORD = re.compile(r"\w+")
_ACRONYM = re.compile(r"[A-Z]{2,}")


@dataclass(frozen=True, slots=True)
class EntityResolution:
    """What the requested names became: ``names`` to filter or seed with, and the unmatched ones."""

    names: tuple[str, ...]
    #: Per known name found for each requested one (for the trace).
    matched: dict[str, tuple[str, ...]]
    #: Requested names matching no known entity, each with the closest known names.
    unmatched: dict[str, tuple[str, ...]]

    def warnings(self, field: str) -> list[str]:
        """One warning per unmatched name, naming ``field`` (e.g. ``filters.entities``)."""
        return [unmatched_warning(field, name, close) for name, close in self.unmatched.items()]


class KnownEntities:
    """The store's entity names, fetched at most once per ``ttl_s`` (``[cache] known_entities_ttl_s``)."""

    def __init__(self, backend: MemoryBackend, *, ttl_s: float, timeout_s: float) -> None:
        self._backend = backend
        self._ttl_s = ttl_s
        self._timeout_s = timeout_s
        self._names: list[str] | None = None
        self._fetched_at = 0.0

    def invalidate(self) -> None:
        """Fetch again next time (a write may have introduced names)."""
        self._names = None

    async def names(self, trace: Trace) -> list[str] | None:
        """The names, most used first; ``None`` when the backend cannot list them or failed to."""
        if not self._backend.capabilities.known_entities:
            return None
        if self._names is not None and time.monotonic() - self._fetched_at < self._ttl_s:
            return self._names
        try:
            names = await within(self._backend.known_entities(limit=KNOWN_LIMIT), self._timeout_s)
        except Exception as exc:  # planning works without them, just less well
            trace.warn(f"known entities unavailable ({type(exc).__name__}); planning without them")
            return self._names
        self._names, self._fetched_at = list(names), time.monotonic()
        return self._names

    async def resolve(self, names: tuple[str, ...], field: str, trace: Trace) -> tuple[str, ...]:
        """``names`` with every known name they stand for; a name matching none is kept as given and
        warned about (``field`` names it) with the closest known names. Without a list of known
        names (backend cannot give one, or failed to) the names are used as given."""
        known = await self.names(trace) if names else None
        if known is None:
            return names
        resolution = resolve_names(names, known)
        details = {"matched": resolution.matched, "unmatched": resolution.unmatched}
        trace.record("entities", **{field: details})
        for warning in resolution.warnings(field):
            trace.warn(warning)
        return resolution.names


def resolve_names(requested: Sequence[str], known: Sequence[str]) -> EntityResolution:
    """Every known name each ``requested`` name stands for (see the module docstring for the rules)."""
    indexed = [(name, _words(name)) for name in known]
    names: dict[str, str] = {}
    matched: dict[str, tuple[str, ...]] = {}
    unmatched: dict[str, tuple[str, ...]] = {}
    for name in requested:
        names.setdefault(name.casefold(), name)
        found = _matches(name, indexed)
        if found:
            matched[name] = found
            for known_name in found:
                names.setdefault(known_name.casefold(), known_name)
        else:
            unmatched[name] = closest_names(name, known)
    return EntityResolution(tuple(names.values()), matched, unmatched)


def closest_names(name: str, known: Sequence[str], *, limit: int = CLOSEST) -> tuple[str, ...]:
    """The known names most like ``name`` (also like its start, so "Strat" finds "Stratus Hosting")."""
    key = name.casefold()
    scored: list[tuple[float, int, str]] = []
    for position, candidate in enumerate(known):
        folded = candidate.casefold()
        whole = SequenceMatcher(None, key, folded).ratio()
        # a truncated name is close to the start of the one meant, slightly less than to all of it
        start = SequenceMatcher(None, key, folded[: len(key)]).ratio() * 0.9
        score = max(whole, start)
        if score >= CLOSEST_CUTOFF:
            scored.append((-score, position, candidate))
    return tuple(candidate for _, _, candidate in sorted(scored)[:limit])


def unmatched_warning(field: str, name: str, close: Sequence[str]) -> str:
    """The warning for a requested entity name that matches no known entity."""
    hint = "closest known: " + ", ".join(close) if close else "no known entity is close"
    return f'{field}: "{name}" matches no known entity; {hint}'


def _matches(name: str, indexed: Sequence[tuple[str, tuple[str, ...]]]) -> tuple[str, ...]:
    wanted = _words(name)
    if not wanted:
        return ()
    found = [known for known, words in indexed if words[: len(wanted)] == wanted]
    if found or not _ACRONYM.fullmatch(name.strip()):
        return tuple(found)
    initials = tuple(name.strip().casefold())
    return tuple(
        known
        for known, words in indexed
        if len(words) == len(initials) and tuple(word[0] for word in words) == initials
    )


def _words(name: str) -> tuple[str, ...]:
    return tuple(_WORD.findall(name.casefold()))
