"""Finding and reading stored logs for the command: JSONL, Zstandard JSONL, SQLite.

The I/O edge of the command. A file's kind comes from its name (`.jsonl`,
`.jsonl.zstd`) or its first bytes (SQLite's magic header); each stored session
becomes one `Opened` value (header, durable prefix, closers, torn-tail facts)
computed by the kernel's pure load pipeline or the SQLite store.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from kernel.cli.sqlite import inspect_sqlite, sqlite_sessions
from kernel.codec import header_to_json
from kernel.durable import Loaded, load_jsonl
from kernel.events import Event, SessionHeader
from kernel.frames import ZSTD_MAGIC, load_jsonl_zstd
from kernel.store.collector import paused_collector
from kernel.store.errors import SessionNotFound
from kernel.store.results import StoredSession

__all__ = (
    "JSONL",
    "ZSTD",
    "SQLITE",
    "SQLITE_MAGIC",
    "Opened",
    "kind_of",
    "discover",
    "open_logs",
    "open_log",
    "session_ids",
    "opened_from_loaded",
    "opened_from_stored",
)

JSONL: Final = "jsonl"
ZSTD: Final = "jsonl.zstd"
SQLITE: Final = "sqlite"

SQLITE_MAGIC: Final = b"SQLite format 3\x00"
_ZSTD_MAGIC: Final = ZSTD_MAGIC.to_bytes(4, "little")


@attrs.frozen
class Opened:
    """One stored session as the load pipeline sees it.

    `stored` is the durable prefix (what is on disk and kept), `closers` what a
    repair appends; `tail` describes the torn tail in the words of the backend
    (byte offsets for JSONL, a seq for SQLite).
    """

    path: str
    kind: str
    header: SessionHeader
    stored: tuple[Event, ...]
    closers: tuple[Event, ...]
    tail: dict[str, Any]

    @property
    def session(self) -> str:
        return self.header.id

    @property
    def torn(self) -> bool:
        return bool(self.tail.get("torn"))

    def header_json(self) -> dict[str, Any]:
        return header_to_json(self.header)


def _head(path: Path, size: int = 16) -> bytes:
    with path.open("rb") as handle:
        return handle.read(size)


def _kind_by_name(name: str) -> str | None:
    if name.endswith(".jsonl.zstd"):
        return ZSTD
    if name.endswith(".jsonl"):
        return JSONL
    return None


def kind_of(path: Path) -> str | None:
    """The kind of a log file: SQLite or Zstandard by magic bytes, else by name; None if neither.

    Magic bytes win over the name, as they do for the store (`repair_file`
    tells Zstandard from plain JSONL by the first bytes).
    """
    head = _head(path)
    if head == SQLITE_MAGIC:
        return SQLITE
    if head.startswith(_ZSTD_MAGIC):
        return ZSTD
    return _kind_by_name(path.name)


def _sniff(path: Path) -> str | None:
    """The kind of a file met in a directory walk: a log by name, or a SQLite database.

    An unreadable file named like a log is kept (verify reports it); any
    other unreadable or unrelated file is skipped.
    """
    by_name = _kind_by_name(path.name)
    try:
        kind = kind_of(path)
    except OSError:
        return by_name
    return kind if by_name is not None or kind == SQLITE else None


def discover(paths: Sequence[str]) -> list[tuple[str, str]]:
    """Every log under `paths` as `(path, kind)`, sorted; directories are walked recursively.

    A file named on the command line is taken whatever its name (its kind by
    magic bytes, else JSONL); inside directories only `*.jsonl`, `*.jsonl.zstd`
    and SQLite databases are picked. A missing path raises `FileNotFoundError`.
    """
    found: dict[str, str] = {}
    for given in paths:
        root = Path(given)
        if root.is_dir():
            for directory, dirs, files in os.walk(root):
                dirs.sort()
                for name in sorted(files):
                    path = Path(directory, name)
                    if path.is_file() and (kind := _sniff(path)) is not None:
                        found[str(path)] = kind
        elif root.exists():
            found[str(root)] = kind_of(root) or JSONL
        else:
            raise FileNotFoundError(2, "no such file or directory", given)
    return sorted(found.items())


def opened_from_loaded(path: str, kind: str, loaded: Loaded) -> Opened:
    """The `Opened` view of a JSONL load: prefix, closers and the torn-tail facts."""
    stored = loaded.events[: len(loaded.events) - len(loaded.closers)]
    tail: dict[str, Any] = {
        "torn": loaded.torn,
        "committedBytes": loaded.committed_bytes,
        "totalBytes": loaded.total_bytes,
        "droppedRecords": loaded.dropped_records,
        "reason": loaded.torn_reason,
    }
    if loaded.torn_frame is not None:
        tail["tornFrameStart"] = loaded.torn_frame.truncate_to
        tail["recoveredEvents"] = len(loaded.torn_frame.recovered)
    return Opened(path, kind, loaded.header, tuple(stored), tuple(loaded.closers), tail)


def opened_from_stored(path: str, stored: StoredSession) -> Opened:
    """The `Opened` view of a store's balanced session: prefix, closers, torn rows."""
    repair = stored.repair
    prefix = stored.events[: len(stored.events) - len(repair.closers)]
    tail = {
        "torn": repair.torn,
        "tornFromSeq": repair.torn_from_seq,
        "droppedRecords": repair.dropped_records,
        "reason": repair.torn_reason,
    }
    return Opened(path, SQLITE, stored.header, tuple(prefix), tuple(repair.closers), tail)


def session_ids(path: str, kind: str, *, session: str | None) -> list[str | None]:
    """The sessions stored in one file: `[session]` for JSONL (None: the header's own id),
    the listed (or the one requested) sessions of a SQLite database."""
    if kind == SQLITE:
        return list(sqlite_sessions(path, session=session))
    return [session]


def open_log(path: str, kind: str, *, session: str | None, now: int) -> Opened:
    """Load one stored session; raises the kernel's `KernelError`s or `OSError`; writes nothing."""
    if kind == SQLITE:
        if session is None:
            raise SessionNotFound("a SQLite database needs a session id")
        return opened_from_stored(path, inspect_sqlite(path, session=session, now=now))
    data = Path(path).read_bytes()
    load = load_jsonl_zstd if kind == ZSTD else load_jsonl
    with paused_collector():
        loaded = load(data, session_id=session, now=now)
    return opened_from_loaded(path, kind, loaded)


def open_logs(path: str, kind: str, *, session: str | None, now: int) -> Iterator[Opened]:
    """Load every stored session of one file (one for JSONL; all or `session` for SQLite)."""
    for sid in session_ids(path, kind, session=session):
        yield open_log(path, kind, session=sid, now=now)
