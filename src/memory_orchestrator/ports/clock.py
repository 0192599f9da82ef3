"""Time as a port, so every time computation can be given ``now``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol

from memory_orchestrator.ports.errors import InvalidRequest

#: The moments every computation handles: a year of margin inside ``datetime``'s range at both ends, so
#: that windows, offsets and time zones around them never overflow.
EARLIEST = datetime(2, 1, 1, tzinfo=UTC)
LATEST = datetime(9998, 12, 31, tzinfo=UTC)


class TimestampOutOfRange(InvalidRequest, ValueError):
    """A moment outside ``EARLIEST`` .. ``LATEST`` (also a ``ValueError``, for parsers and validators)."""


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
    """Return ``moment`` as an aware UTC datetime; naive values are taken to be UTC.

    ``TimestampOutOfRange`` for a moment outside ``EARLIEST`` .. ``LATEST``.
    """
    try:
        utc = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except OverflowError as exc:
        raise TimestampOutOfRange(f"timestamp {moment.isoformat()} is out of range") from exc
    if not EARLIEST <= utc <= LATEST:
        raise TimestampOutOfRange(
            f"timestamp {moment.isoformat()} is out of range (supported: years 0002 to 9998)"
        )
    return utc


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
