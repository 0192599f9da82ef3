"""Time windows read from question text, relative to the moment the question is asked.

Pure: ``infer_time_window(text, now)`` understands today / yesterday, this / last week, month, year,
past N days / weeks / months, N days ago, ISO dates and months, month names with or without day and
year, quarters (Q1-Q4), bare years, and before / after / since / until any of those. A month, day or
quarter without a year means its most recent occurrence that is not in the future, so "in December"
asked on 2 January 2026 is December 2025. Several expressions are intersected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from memory_orchestrator.ports import TimeRange, ensure_utc
from memory_orchestrator.ports.clock import EARLIEST, LATEST

_MONTHS = {
    "january": 1,
    "february": 2,
    "march": 3,
    "april": 4,
    "may": 5,
    "june": 6,
    "july": 7,
    "august": 8,
    "september": 9,
    "october": 10,
    "november": 11,
    "december": 12,
    "jan": 1,
    "feb": 2,
    "mar": 3,
    "apr": 4,
    "jun": 6,
    "jul": 7,
    "aug": 8,
    "sep": 9,
    "sept": 9,
    "oct": 10,
    "nov": 11,
    "dec": 12,
}
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_YEAR = r"(?P<year>(?:19|20)\d{2})"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"

# Date shapes, most specific first; each names its groups so one decoder handles them all.
_DATE_SHAPES = (
    r"(?P<iso>(?P<iy>\d{4})-(?P<im>\d{2})(?:-(?P<id>\d{2}))?)(?![\d-])",
    rf"{_MONTH}\s+{_DAY}(?:,?\s+{_YEAR})?(?!\d)",
    rf"{_DAY}\s+(?:of\s+)?{_MONTH}(?:,?\s+{_YEAR})?",
    rf"(?P<quarter>q[1-4])(?:\s+{_YEAR})?",
    rf"{_MONTH}(?:,?\s+{_YEAR})?",
    _YEAR,
)
_DATE_ONLY = [re.compile(rf"\b{shape}", re.IGNORECASE) for shape in _DATE_SHAPES]
_RELATION = re.compile(
    r"\b(?P<relation>before|after|since|until|till|prior to)\s+(?:the\s+)?",
    re.IGNORECASE,
)
_IN_DATE = re.compile(r"\b(?:in|during|on|of|for|around)\s+(?:the\s+)?$", re.IGNORECASE)
_RELATIVE = re.compile(
    r"\b(?P<phrase>today|yesterday|(?P<which>this|last|past|previous)\s+(?P<unit>week|month|year)"
    r"|(?:the\s+)?(?:last|past|previous)\s+(?P<n>\d+|two|three|four|five|six|seven|ten)\s+"
    r"(?P<nunit>days?|weeks?|months?|years?)"
    r"|(?P<ago>\d+|a|one|two|three|four|five|six|seven|ten)\s+(?P<agounit>days?|weeks?|months?)\s+ago)\b",
    re.IGNORECASE,
)
_WEEK_OF = re.compile(r"\b(?:the\s+)?week\s+of\s+(?:the\s+)?", re.IGNORECASE)
_BETWEEN = re.compile(r"\b(?:between|from)\s+(?:the\s+)?", re.IGNORECASE)
_RANGE_JOIN = re.compile(r"\s*(?:and|to|until|till|through|thru|-|–)\s+(?:the\s+)?", re.IGNORECASE)
_BARE_DAY = re.compile(r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?\b")
_NUMBER_WORDS = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}
_NUMBER_WORDS["ten"] = 10


@dataclass(frozen=True, slots=True)
class TimeReading:
    """The window read from a text and the phrases it was read from (for the plan's explanation)."""

    window: TimeRange | None
    phrases: tuple[str, ...]


def infer_time_window(text: str, now: datetime) -> TimeReading:
    """Read the time window ``text`` refers to, relative to ``now`` (see the module docstring)."""
    now = ensure_utc(now)
    windows: list[TimeRange] = []
    phrases: list[str] = []
    taken: list[tuple[int, int]] = []
    _read_spans(text, now, windows, phrases, taken)
    for match in _RELATION.finditer(text):
        if not _free(taken, match.start(), match.end()):
            continue
        found = _match_date(text[match.end() : match.end() + 40], now)
        if found is None:
            continue
        window, length = found
        relation = match.group("relation").lower()
        windows.append(_relate(relation, window))
        end = match.end() + length
        taken.append((match.start(), end))
        phrases.append(text[match.start() : end].strip())
    _read_relative(text, now, windows, phrases, taken)
    _read_plain_dates(text, now, windows, phrases, taken)
    return TimeReading(_clamped(_intersect(windows)), tuple(phrases))


@dataclass(slots=True)
class _Found:
    """Windows read so far, the phrases they came from and the text spans those phrases take."""

    text: str
    windows: list[TimeRange]
    phrases: list[str]
    taken: list[tuple[int, int]]

    def add(self, window: TimeRange, begin: int, end: int) -> None:
        if _free(self.taken, begin, end):
            self.windows.append(window)
            self.phrases.append(self.text[begin:end].strip())
            self.taken.append((begin, end))


def _read_spans(
    text: str, now: datetime, windows: list[TimeRange], phrases: list[str], taken: list[tuple[int, int]]
) -> None:
    """ "the week of March 16" (that Monday-to-Sunday week) and "between April 1 and April 10" /
    "from May 3 to 7" (the first day's start to the last day's end)."""
    found = _Found(text, windows, phrases, taken)
    for match in _WEEK_OF.finditer(text):
        date = _match_date(text[match.end() : match.end() + 40], now)
        if date is not None and date[0].start is not None:
            monday = date[0].start - timedelta(days=date[0].start.weekday())
            found.add(TimeRange(monday, monday + timedelta(weeks=1)), match.start(), match.end() + date[1])
    for match in _BETWEEN.finditer(text):
        _read_range(match, now, found)


def _read_range(match: re.Match[str], now: datetime, found: _Found) -> None:
    text = found.text
    first = _match_date(text[match.end() : match.end() + 40], now)
    if first is None:
        return
    join = _RANGE_JOIN.match(text, match.end() + first[1])
    if join is None:
        return
    last = _range_end(text[join.end() : join.end() + 40], first[0], now)
    if last is None:
        return
    start, end = first[0].start, last[0].end
    if start is not None and end is not None and start < end:
        found.add(TimeRange(start, end), match.start(), join.end() + last[1])


def _range_end(fragment: str, first: TimeRange, now: datetime) -> tuple[TimeRange, int] | None:
    """The second date of a range; a bare day ("April 1 to 10") takes the first date's month."""
    found = _match_date(fragment, now)
    if found is not None and not _BARE_DAY.fullmatch(fragment[: found[1]].strip()):
        return found
    bare = _BARE_DAY.match(fragment)
    if bare is None or first.start is None:
        return found
    try:
        day = first.start.replace(day=int(bare.group("day")))
    except ValueError:
        return None
    return _day_window(day), bare.end()


def _clamped(window: TimeRange | None) -> TimeRange | None:
    """A side beyond the supported range is left open ("before year 1" restricts nothing)."""
    if window is None:
        return None
    start = window.start if window.start is not None and EARLIEST <= window.start <= LATEST else None
    end = window.end if window.end is not None and EARLIEST <= window.end <= LATEST else None
    return TimeRange(start, end) if start is not None or end is not None else None


def _read_relative(
    text: str, now: datetime, windows: list[TimeRange], phrases: list[str], taken: list[tuple[int, int]]
) -> None:
    for match in _RELATIVE.finditer(text):
        if not _free(taken, match.start(), match.end()):
            continue
        window = _relative_window(match, now)
        if window is not None:
            windows.append(window)
            phrases.append(match.group().strip())
            taken.append((match.start(), match.end()))


def _read_plain_dates(
    text: str, now: datetime, windows: list[TimeRange], phrases: list[str], taken: list[tuple[int, int]]
) -> None:
    for pattern in _DATE_ONLY:
        for match in pattern.finditer(text):
            if not _free(taken, match.start(), match.end()) or not _plausible(match, text):
                continue
            window = _decode(match, now)
            if window is not None:
                windows.append(window)
                phrases.append(match.group().strip())
                taken.append((match.start(), match.end()))


def _plausible(match: re.Match[str], text: str) -> bool:
    # "may" is usually the verb and a bare month or year needs a preposition ("in March", "in 2025")
    # so that "March" in a name or "2025 budget" as a label is not read as a window.
    groups = match.groupdict()
    month = groups.get("month")
    if month and month.lower() == "may" and not month[0].isupper():
        return False
    bare_month = month and not groups.get("day") and not groups.get("year")
    bare_year = groups.get("year") and not month and not groups.get("quarter") and not groups.get("iso")
    if bare_month or bare_year:
        return _IN_DATE.search(text[: match.start()]) is not None
    return True


def _match_date(fragment: str, now: datetime) -> tuple[TimeRange, int] | None:
    for pattern in _DATE_ONLY:
        match = pattern.match(fragment)
        if match is None:
            continue
        month = match.groupdict().get("month")
        if month and month.lower() == "may" and not month[0].isupper():
            continue
        window = _decode(match, now)
        if window is not None:
            return window, match.end()
    relative = _RELATIVE.match(fragment)
    if relative is not None:
        window = _relative_window(relative, now)
        if window is not None:
            return window, relative.end()
    return None


def _decode(match: re.Match[str], now: datetime) -> TimeRange | None:
    groups = match.groupdict()
    try:
        if groups.get("iso"):
            iso_year, iso_month = int(groups["iy"]), int(groups["im"])
            if groups.get("id"):
                return _day_window(datetime(iso_year, iso_month, int(groups["id"]), tzinfo=UTC))
            return _month_window(iso_year, iso_month)
        year: int | None = int(groups["year"]) if groups.get("year") else None
        if groups.get("quarter"):
            return _quarter_window(int(groups["quarter"][1]), year, now)
        if groups.get("month"):
            month = _MONTHS[groups["month"].lower()]
            if groups.get("day"):
                return _dated_day(month, int(groups["day"]), year, now)
            if year is None:
                year = now.year if month <= now.month else now.year - 1
            return _month_window(year, month)
        if year is not None:
            return TimeRange(datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC))
    except (ValueError, OverflowError):
        return None  # e.g. February 30, or year 10000: not a date, so no window
    return None


def _dated_day(month: int, day: int, year: int | None, now: datetime) -> TimeRange:
    if year is None:
        year = now.year
        if datetime(year, month, day, tzinfo=UTC) > now:
            year -= 1
    return _day_window(datetime(year, month, day, tzinfo=UTC))


def _quarter_window(quarter: int, year: int | None, now: datetime) -> TimeRange:
    if year is None:
        current = (now.month - 1) // 3 + 1
        year = now.year if quarter <= current else now.year - 1
    first = _month_start(year, 3 * quarter - 2)
    return TimeRange(first, _add_months(first, 3))


def _relative_window(match: re.Match[str], now: datetime) -> TimeRange | None:
    try:
        return _relative_window_of(match, now)
    except (ValueError, OverflowError):
        # "the last 3000 years" reaches before year 1: the phrase restricts nothing
        return None


def _relative_window_of(match: re.Match[str], now: datetime) -> TimeRange | None:
    phrase = match.group("phrase").lower()
    today = _day_start(now)
    if phrase == "today":
        return TimeRange(today, today + timedelta(days=1))
    if phrase == "yesterday":
        return TimeRange(today - timedelta(days=1), today)
    if match.group("unit"):
        return _calendar_window(match.group("which").lower(), match.group("unit").lower(), now)
    if match.group("n"):
        count = _count(match.group("n"))
        return TimeRange(_shift(now, count, match.group("nunit").lower()), None)
    count = _count(match.group("ago"))
    unit = match.group("agounit").lower()
    if unit.startswith("day"):
        return _day_window(_day_start(now) - timedelta(days=count))
    return TimeRange(_shift(now, count + 1, unit), _shift(now, max(count - 1, 0), unit))


def _calendar_window(which: str, unit: str, now: datetime) -> TimeRange:
    back = 0 if which == "this" else 1
    if unit == "week":
        monday = _day_start(now) - timedelta(days=now.weekday())
        start = monday - timedelta(weeks=back)
        return TimeRange(start, start + timedelta(weeks=1))
    if unit == "month":
        start = _add_months(_month_start(now.year, now.month), -back)
        return TimeRange(start, _add_months(start, 1))
    year = now.year - back
    return TimeRange(datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC))


def _relate(relation: str, window: TimeRange) -> TimeRange:
    if relation in ("before", "prior to"):
        return TimeRange(None, window.start)
    if relation in ("until", "till"):
        return TimeRange(None, window.end)
    if relation == "after":
        return TimeRange(window.end, None)
    return TimeRange(window.start, None)


def _intersect(windows: list[TimeRange]) -> TimeRange | None:
    if not windows:
        return None
    starts = [window.start for window in windows if window.start is not None]
    ends = [window.end for window in windows if window.end is not None]
    start = max(starts) if starts else None
    end = min(ends) if ends else None
    if start is not None and end is not None and start >= end:
        return windows[0]  # contradictory phrases: trust the first rather than return an empty window
    return TimeRange(start, end)


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBER_WORDS.get(word.lower(), 1)


def _shift(moment: datetime, count: int, unit: str) -> datetime:
    if unit.startswith("day"):
        return moment - timedelta(days=count)
    if unit.startswith("week"):
        return moment - timedelta(weeks=count)
    if unit.startswith("month"):
        return _add_months(moment, -count)
    return _add_months(moment, -12 * count)


def _free(taken: list[tuple[int, int]], start: int, end: int) -> bool:
    return all(end <= first or start >= last for first, last in taken)


def _day_start(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def _day_window(day: datetime) -> TimeRange:
    start = _day_start(day)
    return TimeRange(start, start + timedelta(days=1))


def _month_start(year: int, month: int) -> datetime:
    return datetime(year, month, 1, tzinfo=UTC)


def _month_window(year: int, month: int) -> TimeRange:
    start = _month_start(year, month)
    return TimeRange(start, _add_months(start, 1))


def _add_months(moment: datetime, months: int) -> datetime:
    index = moment.year * 12 + moment.month - 1 + months
    year, month = divmod(index, 12)
    day = min(moment.day, _days_in_month(year, month + 1))
    return moment.replace(year=year, month=month + 1, day=day)


def _days_in_month(year: int, month: int) -> int:
    following = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    return (following - timedelta(days=1)).day
