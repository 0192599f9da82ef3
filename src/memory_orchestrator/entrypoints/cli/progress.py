"""Progress of long CLI work (import, eval, bench) on stderr, with a rate and an ETA.

On a terminal: a live bar (done/total, rate, time left). Elsewhere (a pipe, a log file, CI): one
plain line when a stage starts, one every ``interval_s`` while it runs, and one when it ends, so a
long import never leaves the output blank. Nothing is written to stdout, so ``--json`` output stays
clean. Implements the evaluation runner's ``RunProgress`` protocol (``stage`` / ``advance``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import IO, Any, Self

from rich.console import Console

#: Seconds between two plain progress lines off a terminal.
PLAIN_INTERVAL_S = 10.0


def describe_rate(done: int, seconds: float, unit: str) -> str:
    """``312/s`` style rate of ``done`` items in ``seconds`` (``-`` before any time has passed)."""
    if seconds <= 0:
        return f"- {unit}/s"
    rate = done / seconds
    return f"{rate:.1f} {unit}/s" if rate < 10 else f"{rate:.0f} {unit}/s"


def describe_eta(done: int, total: int, seconds: float) -> str:
    """Time left at the rate so far (``?`` before the first item)."""
    if done <= 0 or seconds <= 0:
        return "?"
    left = (total - done) * seconds / done
    minutes, secs = divmod(round(left), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def _live_bar(unit: str, console: Console | None) -> Any:
    """A rich progress bar with rate and time left (rich.progress loads only on a terminal)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        Task,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task: Task) -> Text:
            speed = task.finished_speed or task.speed
            return Text("" if speed is None else f"{speed:.0f} {unit}/s")

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        TimeElapsedColumn(),
        console=console or Console(stderr=True),
        transient=False,
    )


class TerminalProgress:
    """Progress on stderr: a rich bar on a terminal, plain periodic lines otherwise (see module)."""

    def __init__(
        self,
        *,
        unit: str = "items",
        enabled: bool = True,
        stream: IO[str] | None = None,
        console: Console | None = None,
        live: bool | None = None,
        interval_s: float = PLAIN_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.unit = unit
        self.enabled = enabled
        self._stream = stream
        self.live = (stream or sys.stderr).isatty() if live is None else live
        self.interval_s = interval_s
        self._clock = clock
        self._bar: Any = None
        self._task: Any = None
        self._stage: tuple[str, int] | None = None
        self._done = 0
        self._started = self._last_line = 0.0
        if enabled and self.live:
            self._bar = _live_bar(unit, console)

    def __enter__(self) -> Self:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.stop()
        elif exc_type is None:
            self._finish()

    def stage(self, description: str, total: int) -> None:
        """A new stage of ``total`` steps begins (the previous one is reported as ended)."""
        if self._bar is not None:
            self._task = self._bar.add_task(description, total=total)
            return
        self._finish()
        self._stage, self._done = (description, total), 0
        self._started = self._last_line = self._clock()
        self._line(f"{description}: 0/{total}")

    def advance(self, steps: int = 1) -> None:
        """``steps`` more steps of the current stage are done."""
        if self._bar is not None:
            if self._task is not None:
                self._bar.advance(self._task, steps)
            return
        if self._stage is None:
            return
        self._done += steps
        now = self._clock()
        if now - self._last_line >= self.interval_s and self._done < self._stage[1]:
            self._last_line = now
            self._line(self._running_line(now - self._started))

    def _running_line(self, elapsed: float) -> str:
        description, total = self._stage or ("", 0)
        share = 100 * self._done / total if total else 100.0
        rate = describe_rate(self._done, elapsed, self.unit)
        eta = describe_eta(self._done, total, elapsed)
        return f"{description}: {self._done}/{total} ({share:.0f} %), {rate}, ETA {eta}"

    def _finish(self) -> None:
        if self._stage is None:
            return
        description, total = self._stage
        elapsed = self._clock() - self._started
        self._line(
            f"{description}: {self._done}/{total} in {elapsed:.1f} s, "
            f"{describe_rate(self._done, elapsed, self.unit)}"
        )
        self._stage = None

    def _line(self, text: str) -> None:
        if not self.enabled:
            return
        stream = self._stream or sys.stderr
        stream.write(text + "\n")
        stream.flush()
