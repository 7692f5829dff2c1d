"""Writing what the command found: one JSON document, or `rich` tables; and one-line errors.

Log content is never read as `rich` markup: every value from a log goes into a
`Text`, so a message saying `[bold]` prints as typed. Nor does it reach the
terminal raw: control characters (C0 but newline and tab, DEL, C1) and lone
surrogates are written as escapes (`\\x1b`), in tables, error lines and JSON alike.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any, Final

import orjson
from rich.console import Console
from rich.table import Table
from rich.text import Text

from kernel.values.json import FrozenArray, FrozenObject, raw, thaw
from kernel.wire.jsontext import encode_json_bytes

__all__ = (
    "printable",
    "printable_doc",
    "stdout_console",
    "stderr_console",
    "print_json",
    "json_document",
    "json_line",
    "print_json_lines",
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

_SURROGATE: Final = re.compile("[\ud800-\udfff]")

_ORJSON_LEVELS: Final = 200
"""Subtrees nested deeper than this are laid out by `_indented_json`'s own walk (orjson
refuses 255 levels; the margin keeps a later orjson with a lower limit from failing)."""

_INDENTED_LEVELS: Final = 200
"""`_indented_json` writes the containers it reaches this deep or deeper compact."""

_RETRY_LEVELS: Final = 8
"""`_indented_json` retries orjson on each container this near the top; a subtree it still
refuses deeper down is walked once by `_whole_subtrees`."""

_CONTAINERS: Final = (dict, list, tuple)
_FROZEN: Final = (FrozenObject, FrozenArray)

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


def _scalar_json(value: Any) -> bytes:
    """One scalar as orjson spells it; what orjson refuses (a string holding a lone
    surrogate, an integer beyond 64 bits) as the kernel's writer spells it."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        if type(value) is not str and type(value) is not int:
            raise
        return encode_json_bytes(value)


def _whole_subtrees(root: Any) -> set[int]:
    """The ids of the containers under `root` that orjson writes whole: nested at most
    `_ORJSON_LEVELS` deep and holding no string (key or value) with a surrogate.

    One post-order walk. Frozen views count as the containers behind them; a
    container that holds itself raises TypeError.
    """
    height: dict[int, int] = {}
    whole: set[int] = set()
    entered: set[int] = set()  # children not all settled yet: met again, it is a cycle
    # Each item: (container, None) to enter it, or (container, its children) to settle it.
    stack: list[tuple[Any, list[Any] | None]] = [(root, None)]
    while stack:
        node, children = stack.pop()
        ident = id(node)
        if children is None:
            if ident in height:
                continue  # shared: settled already
            if ident in entered:
                raise TypeError("a container that holds itself is not JSON")
            entered.add(ident)
            items = node.values() if type(node) is dict else node
            children = [c._raw if type(c) in _FROZEN else c for c in items]
            stack.append((node, children))
            stack.extend([(c, None) for c in children if type(c) in _CONTAINERS])
            continue
        clean = type(node) is not dict or _keys_clean(node)
        tallest = 0
        for child in children:
            kind = type(child)
            if kind is str:
                clean = clean and (child.isascii() or _SURROGATE.search(child) is None)
            elif kind in _CONTAINERS:
                tallest = max(tallest, height[id(child)])
                clean = clean and id(child) in whole
        height[ident] = tallest + 1
        if clean and tallest < _ORJSON_LEVELS:
            whole.add(ident)
    return whole


def _keys_clean(obj: dict[Any, Any]) -> bool:
    """Whether every key is a string and none holds a surrogate."""
    try:
        keys = "".join(obj)
    except TypeError:
        return False
    return keys.isascii() or _SURROGATE.search(keys) is None


def _orjson_written(value: Any, depth: int) -> bytes | None:
    """`value` as orjson writes it at `depth` (indented there, compact from
    `_INDENTED_LEVELS` down); None when orjson refuses it."""
    indented = depth < _INDENTED_LEVELS
    try:
        written = orjson.dumps(
            value, default=_default, option=orjson.OPT_INDENT_2 if indented else None
        )
    except orjson.JSONEncodeError:
        return None
    return written.replace(b"\n", b"\n" + b"  " * depth) if indented and depth else written


def _indented_json(document: Any) -> bytes:
    """`document` laid out as orjson's `OPT_INDENT_2` does, at any depth; linear in size.

    Members in insertion order, two spaces a level, `": "` after a key, empty
    containers as `{}` and `[]`; a string holding a lone surrogate by
    `_scalar_json`. orjson writes each subtree it accepts, re-indented to its
    level; what the walk writes itself at level `_INDENTED_LEVELS` or deeper is
    compact, since indenting every level of a deep value makes the text
    quadratic in its depth. The walk asks orjson about every container of the
    first `_RETRY_LEVELS` levels, then decides below them from `_whole_subtrees`:
    asking at every level would redo up to 254 levels of work each time.
    """
    whole: set[int] = set()
    parts: list[bytes] = []
    # Each item: (text, None) to emit, or (None, (value, depth)) to write.
    stack: list[tuple[bytes | None, Any]] = [(None, (document, 0))]
    while stack:
        text, pending = stack.pop()
        if text is not None:
            parts.append(text)
            continue
        value, depth = pending
        value = raw(value)
        kind = type(value)
        if kind not in _CONTAINERS:
            parts.append(_scalar_json(value))
            continue
        if depth == _RETRY_LEVELS:
            whole |= _whole_subtrees(value)
        if depth < _RETRY_LEVELS or id(value) in whole:
            written = _orjson_written(value, depth)
            if written is not None:
                parts.append(written)
                continue
        if not value:
            parts.append(b"{}" if kind is dict else b"[]")
            continue
        indented = depth < _INDENTED_LEVELS
        inner = b"\n" + b"  " * (depth + 1) if indented else b""
        end = b"\n" + b"  " * depth if indented else b""
        if kind is dict:
            if any(type(key) is not str for key in value):
                raise TypeError("an object key that is not a string is not JSON")
            colon = b": " if indented else b":"
            members = list(value.items())
            stack.append((end + b"}", None))
            for index in range(len(members) - 1, -1, -1):
                key, child = members[index]
                stack.append((None, (child, depth + 1)))
                lead = b"{" if index == 0 else b","
                stack.append((lead + inner + _scalar_json(key) + colon, None))
        else:
            stack.append((end + b"]", None))
            for index in range(len(value) - 1, -1, -1):
                stack.append((None, (value[index], depth + 1)))
                stack.append(((b"[" if index == 0 else b",") + inner, None))
    parts.append(b"\n")
    return b"".join(parts)


def json_document(document: Any) -> bytes:
    """The bytes `print_json` writes: one indented JSON document and a newline, UTF-8.

    orjson writes every document it can; one it refuses (nesting past 255
    levels, a lone surrogate) is laid out the same way by `_indented_json`, a
    lone surrogate written as its escape (`\\udcff`), so any value a log admits
    prints. DEL and C1 controls are escaped last (`\\u009b`).
    """
    try:
        data = orjson.dumps(document, default=_default, option=_JSON_OPTIONS)
    except orjson.JSONEncodeError:
        data = _indented_json(document)
    return _JSON_UNPRINTABLE.sub(_json_escape, data)


_LAYOUT: Final = re.compile(b"\n *")
"""The line breaks and indentation of `_indented_json`: a string holds no raw newline."""


def json_line(document: Any) -> bytes:
    """One JSON document on one line and a newline: `json_document`'s text, compact.

    The same values print, escaped the same way; only the layout differs.
    """
    try:
        data = orjson.dumps(document, default=_default, option=orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        data = _LAYOUT.sub(b"", _indented_json(document)) + b"\n"
    return _JSON_UNPRINTABLE.sub(_json_escape, data)


def print_json_lines(documents: Iterable[Any]) -> None:
    """Write each document as one JSON line (`json_line`) to stdout, flushing at the end."""
    out = sys.stdout.buffer
    for document in documents:
        out.write(json_line(document))
    sys.stdout.flush()


def print_json(document: Any) -> None:
    """Write one JSON document (frozen values thawed) to stdout (`json_document`).

    Control characters are JSON escapes (`\\u001b`, `\\u009b`), so the document
    says exactly what the log holds and a terminal shows it inert. A lone
    surrogate (log text may hold one; so does a file name that is not UTF-8) is
    its `\\udcff` escape, and values nest to any depth.
    """
    sys.stdout.buffer.write(json_document(document))
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
