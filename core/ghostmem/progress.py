"""ghostmem's own progress display for long jobs (import, embed): on an interactive terminal only.

A person waiting at a terminal sees each step as it happens: a bar per counted phase with its rate and the time
left (fed batch by batch, so it moves steadily), and each uncounted step (loading the embedding model, enriching)
as one line with its duration once done (``loading the embedding model… 0.4 s``). Nothing of it is written to a
pipe, a file, a CI log or a ``--json`` run: output that is read by a program or kept in a log holds only the report.
The display goes to stderr; stdout carries the report.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

# a line fits 80 columns: spinner, what is going on (cut), bar, then counts with rate and time left
DESCRIPTION_WIDTH = 30
BAR_WIDTH = 16


def interactive(stream: IO[str] | None = None) -> bool:
    """Whether ``stream`` (default stderr) is a terminal a person watches: a TTY, not a ``dumb`` one, and not a
    CI job (whose runner may give its steps a terminal, but keeps their output as a log)."""
    stream = stream if stream is not None else sys.stderr
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False
    return tty and os.environ.get("TERM") != "dumb" and not os.environ.get("CI")


class Step:
    """A step that was timed: ``seconds`` is set when it ends (shown or not)."""

    def __init__(self) -> None:
        self.seconds = 0.0


class Bar:
    """A counted phase: ``advance`` by the units each batch finished, ``describe`` to say what it is on."""

    def __init__(self, live: Progress | None, task: TaskID | None) -> None:
        self._live = live
        self._task = task
        self.done = 0

    def advance(self, units: int) -> None:
        self.done += units
        if self._live is not None and self._task is not None:
            self._live.advance(self._task, units)

    def describe(self, text: str) -> None:
        if self._live is not None and self._task is not None:
            self._live.update(self._task, description=text)


class Display:
    """The steps and bars of one job. Without a terminal (or when not wanted) every call times and shows nothing."""

    def __init__(self, live: Progress | None = None) -> None:
        self._live = live

    @contextmanager
    def step(self, label: str) -> Iterator[Step]:
        """An uncounted step: a spinner while it runs, then ``label… N.N s`` as a line that stays."""
        step = Step()
        task = self._live.add_task(f"{label}…", total=None) if self._live is not None else None
        started = time.perf_counter()
        try:
            yield step
        finally:
            step.seconds = time.perf_counter() - started
            if task is not None:
                self._finish(task, f"{label}… {step.seconds:.1f} s")

    @contextmanager
    def bar(self, label: str, total: int, unit: str) -> Iterator[Bar]:
        """A counted phase of ``total`` ``unit`` (e.g. "messages") with its rate and time left; when it ends, the
        line ``label: N unit in S s`` stays."""
        if self._live is None:
            yield Bar(None, None)
            return
        task = self._live.add_task(label, total=total, unit=unit)
        started = time.perf_counter()
        bar = Bar(self._live, task)
        try:
            yield bar
        finally:
            self._finish(task, f"{label}: {bar.done:,} {unit} in {time.perf_counter() - started:.1f} s")

    def _finish(self, task: TaskID, line: str) -> None:
        """The task's live line goes; ``line`` stays, above whatever is still running."""
        assert self._live is not None
        self._live.remove_task(task)
        self._live.refresh()
        self._live.console.print(line, highlight=False)


@contextmanager
def display(wanted: bool) -> Iterator[Display]:
    """A display on stderr when ``wanted`` and stderr is an interactive terminal (:func:`interactive`), else one
    that shows nothing."""
    if not (wanted and interactive()):
        yield Display()
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, ProgressColumn, SpinnerColumn, TextColumn
    from rich.table import Column
    from rich.text import Text

    class Counts(ProgressColumn):
        """``done/total unit · rate/s · eta M:SS`` of a counted phase (rate and time left from rich's moving
        estimate, once there is one); nothing for an uncounted step."""

        def render(self, task: Any) -> Text:
            if task.total is None:
                return Text("")
            speed = task.speed
            left = task.time_remaining
            rate = f"{speed:,.0f}/s" if speed else "–/s"
            eta = f"{int(left) // 60}:{int(left) % 60:02d}" if left is not None else "–"
            unit = task.fields.get("unit", "")
            return Text(f"{task.completed:,.0f}/{task.total:,.0f} {unit} · {rate} · eta {eta}", style="cyan")

    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}", table_column=Column(max_width=DESCRIPTION_WIDTH, no_wrap=True)),
        BarColumn(bar_width=BAR_WIDTH),
        Counts(table_column=Column(no_wrap=True)),
    )
    # transient: the live lines go when the job ends; the finished steps' lines printed above them stay
    with Progress(*columns, console=Console(stderr=True), transient=True, refresh_per_second=8) as live:
        yield Display(live)
