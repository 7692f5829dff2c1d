"""Writing what the command found: one JSON document, or `rich` tables; and one-line errors.

Log content is never read as `rich` markup: every value from a log goes into a
`Text`, so a message saying `[bold]` prints as typed. Nor does it reach the
terminal raw: control characters (C0 but newline and tab, DEL, C1) and lone
surrogates are written as escapes (`\\x1b`), in tables, error lines and JSON alike.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any, Final

import orjson
from rich.console import Console
from rich.table import Table
from rich.text import Text

from kernel.json import thaw

__all__ = (
    "printable",
    "printable_doc",
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

_UNPRINTABLE: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
"""What a terminal may act on or cannot encode: C0 controls but newline and tab, DEL, C1
controls, and lone surrogates (the undecodable bytes of a file name)."""

_JSON_UNPRINTABLE: Final = re.compile(b"\x7f|\xc2[\x80-\x9f]")
"""DEL and C1 controls as orjson writes them (raw UTF-8); it escapes C0 itself."""

_DOC_DEPTH: Final = 64
"""`printable_doc` walks the command's own documents; deeper values are shown as their `str`."""


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code == 0x0D:
        return "\\r"
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte of a file name (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(value: str) -> str:
    """`value` with every character a terminal could act on written as an escape.

    Newline and tab are kept (they are layout); a byte of a file name that is
    not UTF-8 shows as the byte.

    >>> printable("title \\x1b]0;pwned\\x07 done")
    'title \\\\x1b]0;pwned\\\\x07 done'
    """
    return _UNPRINTABLE.sub(_escape, value)


def printable_doc(value: Any, depth: int = 0) -> Any:
    """A report with `printable` applied to every string in it, keys included.

    Dicts, lists and tuples are walked (they are the command's own documents);
    any other container (a frozen value from the log) becomes its printable `str`.
    """
    if isinstance(value, str):
        return printable(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if depth < _DOC_DEPTH and type(value) is dict:
        return {printable_doc(k, depth + 1): printable_doc(v, depth + 1) for k, v in value.items()}
    if depth < _DOC_DEPTH and type(value) in (list, tuple):
        return [printable_doc(item, depth + 1) for item in value]
    return printable(str(value))


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


def _json_escape(match: re.Match[bytes]) -> bytes:
    return b"\\u%04x" % ord(match.group().decode())


def print_json(document: Any) -> None:
    """Write one JSON document (frozen values thawed) to stdout.

    Control characters are JSON escapes (`\\u001b`, `\\u009b`), so the document
    says exactly what the log holds and a terminal shows it inert. A document
    holding a lone surrogate (log text may; so does a file name that is not
    UTF-8) is written all-ASCII by `json`, the surrogate as its `\\udcff` escape.
    """
    try:
        data = orjson.dumps(document, default=_default, option=_JSON_OPTIONS)
    except orjson.JSONEncodeError as exc:
        if "surrogates" not in str(exc):
            raise
        data = (json.dumps(thaw(document), ensure_ascii=True, indent=2) + "\n").encode("ascii")
    sys.stdout.buffer.write(_JSON_UNPRINTABLE.sub(_json_escape, data))
    sys.stdout.flush()


def error_line(message: str) -> None:
    """Write one line to stderr: whitespace flattened, control characters escaped."""
    flat = printable(" ".join(message.split()))
    sys.stderr.write(f"session-kernel: {flat}\n")
    sys.stderr.flush()


def text(value: Any, style: str = "") -> Text:
    """A cell holding a value verbatim (`printable`): None as an empty cell, else its `str`."""
    if value is None:
        return Text("")
    if isinstance(value, bool):
        return Text("yes" if value else "no", style=style)
    return Text(printable(value if isinstance(value, str) else str(value)), style=style)


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
