"""Progress on standard error for work that takes more than about a second.

A bar appears only when stderr is a terminal, and only once the work has run
for `PROGRESS_DELAY` seconds (a quick command draws nothing); it is transient,
so nothing of it stays on the screen. Tasks can be added and advanced before
it shows: the bar then starts where the work is.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

__all__ = (
    "PROGRESS_DELAY",
    "byte_columns",
    "step_columns",
    "delayed_progress",
    "file_size",
)

PROGRESS_DELAY: Final = 1.0
"""Seconds of work before a progress bar is drawn."""


def byte_columns() -> tuple[ProgressColumn, ...]:
    """A bar over bytes: what, bar, bytes done of total, rate, elapsed and time remaining."""
    return (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )


def step_columns() -> tuple[ProgressColumn, ...]:
    """A spinner over steps that cannot be measured (one load): what, and time elapsed."""
    return (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())


class _Delayed:
    """Starts a `Progress` display after a delay, unless closed first; thread-safe."""

    def __init__(self, progress: Progress, delay: float) -> None:
        self.progress = progress
        self._lock = threading.Lock()
        self._started = False
        self._closed = False
        self._timer: threading.Timer | None = None
        if delay <= 0:
            self._start()
        else:
            self._timer = threading.Timer(delay, self._start)
            self._timer.daemon = True
            self._timer.start()

    def _start(self) -> None:
        with self._lock:
            if not self._closed:
                self.progress.start()
                self._started = True

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            self._closed = True
            if self._started:
                self.progress.stop()


@contextmanager
def delayed_progress(
    console: Console,
    columns: tuple[ProgressColumn, ...],
    *,
    delay: float = PROGRESS_DELAY,
) -> Iterator[Progress | None]:
    """A `Progress` on `console` drawn once `delay` seconds have passed; None off a terminal.

    Lines printed through `progress.console` meanwhile appear above the bar
    once it is drawn, and plainly before.
    """
    if not console.is_terminal:
        yield None
        return
    progress = Progress(
        *columns, console=console, transient=True, redirect_stdout=False, redirect_stderr=False
    )
    shown = _Delayed(progress, delay)
    try:
        yield progress
    finally:
        shown.close()


def file_size(path: str) -> str:
    """` (12.3 MB)` for a file of at least 100 kB, for a progress line; else ``."""
    try:
        size = os.stat(path).st_size
    except OSError:
        return ""
    return f" ({size / 1_000_000:.1f} MB)" if size >= 100_000 else ""
