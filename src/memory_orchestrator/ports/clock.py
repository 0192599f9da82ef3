"""Time as a port, so every time computation can be given ``now``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """Source of the current time (timezone-aware, UTC)."""

    def now(self) -> datetime:
        """Return the current moment as an aware UTC datetime."""
        ...


class SystemClock:
    """The wall clock."""

    def now(self) -> datetime:
        """Return the current UTC time."""
        return datetime.now(UTC)


class FixedClock:
    """A clock stopped at one moment (tests, evaluation 'as of now' runs)."""

    def __init__(self, moment: datetime) -> None:
        self._moment = ensure_utc(moment)

    def now(self) -> datetime:
        """Return the fixed moment."""
        return self._moment

    def set(self, moment: datetime) -> None:
        """Move the clock to ``moment``."""
        self._moment = ensure_utc(moment)


def ensure_utc(moment: datetime) -> datetime:
    """Return ``moment`` as an aware UTC datetime; naive values are taken to be UTC."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def parse_timestamp(text: str) -> datetime:
    """Parse an ISO 8601 / RFC 3339 timestamp (``Z`` allowed) into an aware UTC datetime."""
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    return ensure_utc(datetime.fromisoformat(value))


def format_timestamp(moment: datetime) -> str:
    """Format an aware datetime as RFC 3339 UTC with microseconds dropped when zero."""
    utc = ensure_utc(moment)
    text = utc.isoformat()
    return text.replace("+00:00", "Z")
