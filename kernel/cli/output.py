"""Writing what the command found: one JSON document, or `rich` tables; and one-line errors.

Log content is never read as `rich` markup: every value from a log goes into a
`Text`, so a message saying `[bold]` prints as typed.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import Any, Final

import orjson
from rich.console import Console
from rich.table import Table
from rich.text import Text

from kernel.json import thaw

__all__ = (
    "stdout_console",
    "stderr_console",
    "print_json",
    "error_line",
    "text",
    "table",
    "seq_ranges",
    "key_values",
)

_JSON_OPTIONS: Final = orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE


def stdout_console() -> Console:
    """The console tables go to; plain (no colour codes) when stdout is not a terminal."""
    return Console(highlight=False, soft_wrap=False)


def stderr_console() -> Console:
    """The console progress bars and warnings go to."""
    return Console(stderr=True, highlight=False)


def _default(value: Any) -> Any:
    plain = thaw(value)
    if plain is value:
        raise TypeError(f"{type(value).__name__} is not JSON")
    return plain


def print_json(document: Any) -> None:
    """Write one JSON document (frozen values thawed) to stdout."""
    sys.stdout.buffer.write(orjson.dumps(document, default=_default, option=_JSON_OPTIONS))
    sys.stdout.flush()


def error_line(message: str) -> None:
    """Write one line to stderr (newlines in the message are flattened)."""
    flat = " ".join(message.split())
    sys.stderr.write(f"session-kernel: {flat}\n")
    sys.stderr.flush()


def text(value: Any, style: str = "") -> Text:
    """A cell holding a value verbatim: None as an empty cell, str as is, else its `str`."""
    if value is None:
        return Text("")
    if isinstance(value, bool):
        return Text("yes" if value else "no", style=style)
    return Text(value if isinstance(value, str) else str(value), style=style)


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Table:
    """A table with a bold title; cells that are not `Text` already become `Text`."""
    grid = Table(title=title, title_justify="left", title_style="bold", expand=False)
    for column in columns:
        grid.add_column(column, overflow="fold")
    for row in rows:
        grid.add_row(*(cell if isinstance(cell, Text) else text(cell) for cell in row))
    return grid


def key_values(title: str, pairs: Iterable[tuple[str, Any]]) -> Table:
    """A two-column table of labelled values."""
    grid = Table(title=title, title_justify="left", title_style="bold", show_header=False)
    grid.add_column("key", style="dim")
    grid.add_column("value", overflow="fold")
    for key, value in pairs:
        grid.add_row(key, value if isinstance(value, Text) else text(value))
    return grid


def seq_ranges(seqs: Sequence[int]) -> str:
    """Seqs written compactly: runs of consecutive seqs as `a-b`.

    >>> seq_ranges([0, 1, 2, 5, 7, 8])
    '0-2, 5, 7-8'
    """
    parts: list[str] = []
    start = prev = None
    for seq in seqs:
        if prev is not None and seq == prev + 1:
            prev = seq
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = seq
    if start is not None:
        parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ", ".join(parts)
