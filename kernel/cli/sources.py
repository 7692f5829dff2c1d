"""Finding and reading stored logs for the command: JSONL, Zstandard JSONL, SQLite.

The I/O edge of the command. A file's kind comes from its name (`.jsonl`,
`.jsonl.zstd`) or its first bytes (SQLite's magic header); each stored session
becomes one `Opened` value (header, durable prefix, closers, torn-tail facts)
computed by the kernel's pure load pipeline or the SQLite store. Only regular
files are ever opened: a FIFO or a device would block or never end.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import re
import stat
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from kernel.cli.sqlite import inspect_sqlite, sqlite_listing, sqlite_sessions
from kernel.errors import KernelError
from kernel.storage.jsonl import Loaded, load_jsonl
from kernel.storage.quarantine import (
    TailRecord,
    describe_tail_records,
    parse_quarantine_name,
    records_in_tail,
)
from kernel.storage.zstd import ZSTD_MAGIC, load_jsonl_zstd
from kernel.store.collector import paused_collector
from kernel.store.errors import SessionNotFound, StoreLayoutError
from kernel.store.jsonl import JsonlStore
from kernel.store.paths import ZSTD_NAME
from kernel.store.results import StoredSession, UnreadableSession
from kernel.values.events import Event, SessionHeader
from kernel.wire.codec import header_to_json

__all__ = (
    "JSONL",
    "ZSTD",
    "SQLITE",
    "SQLITE_MAGIC",
    "DIRECTORY",
    "Opened",
    "NotRegularFile",
    "Unreadable",
    "Discovery",
    "describe_os_error",
    "read_regular",
    "kind_of",
    "natural_key",
    "holds_zstd",
    "log_file",
    "discover",
    "open_logs",
    "open_log",
    "open_readable",
    "session_ids",
    "opened_from_loaded",
    "opened_from_stored",
)

JSONL: Final = "jsonl"
ZSTD: Final = "jsonl.zstd"
SQLITE: Final = "sqlite"
DIRECTORY: Final = "directory"
"""The `format` of an unreadable directory in a verify report."""

SQLITE_MAGIC: Final = b"SQLite format 3\x00"
_ZSTD_MAGIC: Final = ZSTD_MAGIC.to_bytes(4, "little")


@attrs.frozen
class Opened:
    """One stored session as the load pipeline sees it.

    `stored` is the durable prefix (what is on disk and kept), `closers` what a
    repair appends; `tail` describes the torn tail in the words of the backend
    (byte offsets for JSONL, a seq for SQLite); `normalized` counts the events
    read in an older v0 shape, by shape (docs/format/persistence.md Appendix A).
    """

    path: str
    kind: str
    header: SessionHeader
    stored: tuple[Event, ...]
    closers: tuple[Event, ...]
    tail: dict[str, Any]
    normalized: Mapping[str, int] = attrs.field(factory=dict)

    @property
    def session(self) -> str:
        return self.header.id

    @property
    def torn(self) -> bool:
        return bool(self.tail.get("torn"))

    def header_json(self) -> dict[str, Any]:
        return header_to_json(self.header)


class NotRegularFile(OSError):
    """A path that is not a regular file (a FIFO, socket or device): never opened."""


_FILE_TYPES: Final = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
)


def _require_regular(mode: int, path: str | Path) -> None:
    if stat.S_ISREG(mode):
        return
    what = next((name for test, name in _FILE_TYPES if test(mode)), "not a file")
    raise NotRegularFile(errno.EINVAL, f"not a regular file ({what})", str(path))


def describe_os_error(exc: OSError) -> str:
    """`ClassName: reason` of a failed read, without the path (the report names it)."""
    return f"{type(exc).__name__}: {exc.strerror or exc}"


def read_regular(path: str | Path, limit: int = -1) -> bytes:
    """The bytes of a regular file (the first `limit` of them when `limit >= 0`).

    Raises `NotRegularFile` for anything else, before a read could block: the
    path is checked, then opened without blocking and checked again.
    """
    _require_regular(os.stat(path).st_mode, path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as handle:
        _require_regular(os.fstat(fd).st_mode, path)
        return handle.read(limit)


def _head(path: Path, size: int = 16) -> bytes:
    return read_regular(path, size)


def _kind_by_name(name: str) -> str | None:
    if name.endswith(".jsonl.zstd"):
        return ZSTD
    if name.endswith(".jsonl"):
        return JSONL
    return None


def kind_of(path: Path) -> str | None:
    """The kind of a log file: SQLite or Zstandard by magic bytes, else by name; None if neither.

    Magic bytes win over the name, as they do for the store (`repair_file`
    tells Zstandard from plain JSONL by the first bytes). Raises `OSError`
    (`NotRegularFile` for a FIFO or device) when the file cannot be read.
    """
    head = _head(path)
    if head == SQLITE_MAGIC:
        return SQLITE
    if head.startswith(_ZSTD_MAGIC):
        return ZSTD
    return _kind_by_name(path.name)


_DIGITS: Final = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple[Any, ...]:
    """A sort key that orders the digit runs of `name` by value: log2 before log10.

    Text runs compare as text and digit runs as numbers (then as written, so
    `log01` and `log1` keep one order); the key of any two names compares.

    >>> sorted(["log10", "log2", "log1"], key=natural_key)
    ['log1', 'log2', 'log10']
    """
    parts = _DIGITS.split(name)
    return tuple((int(part), part) if index % 2 else part for index, part in enumerate(parts))


def holds_zstd(root: Path) -> bool:
    """Whether a JSONL store root holds Zstandard session files (a root holds one encoding).

    A project directory that is a symbolic link is not looked into.
    """
    try:
        projects = [p for p in root.iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:
        return False
    for project in projects:
        try:
            if any((entry / ZSTD_NAME).is_file() for entry in project.iterdir()):
                return True
        except OSError:
            continue
    return False


def log_file(path: str, *, session: str | None, command: str) -> tuple[str, str]:
    """The log file a command named `command` reads for `path`, and its kind.

    A file is taken as it is: its kind by name or magic bytes, else plain
    JSONL. A directory is a `JsonlStore` root, and `session` names the session
    in it: its `session.jsonl` (or `.jsonl.zstd`) file, found as the store
    finds it, is the log. A session directory or file that is a symbolic link
    is refused (`StoreLayoutError`), as the store refuses it. A directory
    without `session` raises `IsADirectoryError`; no session by that id,
    `SessionNotFound`.
    """
    target = Path(path)
    if not target.is_dir():
        return path, kind_of(target) or JSONL
    if session is None:
        raise IsADirectoryError(
            errno.EISDIR,
            f"is a directory ({command} takes one log file, or a JsonlStore root "
            "with --session ID)",
            path,
        )
    zstd = holds_zstd(target)
    found = JsonlStore(target, zstd=zstd).path_of(session)
    for link in (found.parent, found):
        if link.is_symlink():
            raise StoreLayoutError(f"{link}: a symbolic link (a store follows none)")
    return str(found), ZSTD if zstd else JSONL


@attrs.frozen
class Unreadable:
    """A path `verify` was asked about, or met, and could not read.

    `format` is the log kind the name promises, `DIRECTORY`, or None for an
    unreadable file named on the command line whose name promises nothing.
    """

    path: str
    format: str | None
    reason: str


@attrs.frozen
class Discovery:
    """What a search for logs found: `(path, kind)` of each log, and what could not be read."""

    logs: tuple[tuple[str, str], ...]
    unreadable: tuple[Unreadable, ...]


def _skipped(name: str, path: str, *, exclude: Sequence[str], hidden: bool) -> bool:
    """Whether a directory walk passes over an entry: hidden, or matched by an exclude glob."""
    if name.startswith(".") and not hidden:
        return True
    return any(fnmatch.fnmatchcase(name, g) or fnmatch.fnmatchcase(path, g) for g in exclude)


def _walked_file(path: Path) -> tuple[str, str] | Unreadable | None:
    """A file met in a directory walk: a log, an unreadable log, or None (not a log).

    A file is a log when it is named like one, or when it is a SQLite
    database. A file named like a log that cannot be read (no permission, a
    dangling link, a FIFO) is unreadable; any other file that cannot be read
    cannot be recognised, and is passed over.
    """
    by_name = _kind_by_name(path.name)
    try:
        kind = kind_of(path)
    except OSError as exc:
        return None if by_name is None else Unreadable(str(path), by_name, describe_os_error(exc))
    if kind is None or (by_name is None and kind != SQLITE):
        return None
    return (str(path), kind)


def discover(
    paths: Sequence[str], *, exclude: Sequence[str] = (), hidden: bool = False
) -> Discovery:
    """Every log under `paths`, in natural order (log2 before log10); directories are
    walked recursively.

    A file named on the command line is taken whatever its name (its kind by
    magic bytes, else JSONL); inside directories only `*.jsonl`, `*.jsonl.zstd`
    and SQLite databases are picked, hidden entries (a name starting with a
    dot) are passed over unless `hidden`, and so is every file and directory
    whose name or path matches a glob of `exclude`. A named path that does not
    exist or cannot be read, a directory that cannot be listed, and a log that
    cannot be read are all reported in `unreadable`, and the search goes on.
    """
    found: dict[str, str] = {}
    unreadable: dict[str, Unreadable] = {}

    def keep(item: tuple[str, str] | Unreadable | None) -> None:
        if isinstance(item, Unreadable):
            unreadable[item.path] = item
        elif item is not None:
            found[item[0]] = item[1]

    for given in paths:
        root = Path(given)
        try:
            mode = os.stat(root).st_mode
        except OSError as exc:
            keep(Unreadable(str(root), _kind_by_name(root.name), describe_os_error(exc)))
            continue
        if not stat.S_ISDIR(mode):
            try:
                keep((str(root), kind_of(root) or JSONL))
            except OSError as exc:
                keep(Unreadable(str(root), _kind_by_name(root.name), describe_os_error(exc)))
            continue
        errors: list[OSError] = []
        for directory, dirs, files in os.walk(root, onerror=errors.append):
            dirs[:] = sorted(
                name
                for name in dirs
                if not _skipped(name, str(Path(directory, name)), exclude=exclude, hidden=hidden)
            )
            for name in sorted(files):
                path = Path(directory, name)
                if not _skipped(name, str(path), exclude=exclude, hidden=hidden):
                    keep(_walked_file(path))
        for failure in errors:
            where = str(Path(failure.filename)) if failure.filename is not None else str(root)
            keep(Unreadable(where, DIRECTORY, describe_os_error(failure)))
    failed = sorted(unreadable.values(), key=lambda item: natural_key(item.path))
    logs = sorted(found.items(), key=lambda item: natural_key(item[0]))
    return Discovery(tuple(logs), tuple(failed))


def tail_records_json(records: Sequence[TailRecord]) -> list[dict[str, Any]]:
    """The complete records a torn tail holds, as JSON (docs/format/persistence.md §6.5)."""
    return [
        {
            "seq": r.seq,
            "type": r.type,
            "start": r.start,
            "end": r.end,
            "terminated": r.terminated,
            "events": r.count,
        }
        for r in records
    ]


def quarantines_beside(path: str) -> list[str]:
    """The quarantine files a repair of the log at `path` kept beside it, by name."""
    log = Path(path)
    try:
        names = os.listdir(log.parent)
    except OSError:
        return []
    return sorted(
        str(log.parent / name)
        for name in names
        if (parsed := parse_quarantine_name(name)) is not None and parsed[0] == log.name
    )


def opened_from_loaded(path: str, kind: str, loaded: Loaded, data: bytes | None = None) -> Opened:
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
    elif loaded.torn and data is not None:
        records = records_in_tail(data, loaded.committed_bytes)
        tail["completeRecords"] = tail_records_json(records)
        tail["completeRecordsSummary"] = describe_tail_records(records)
    closers = tuple(loaded.closers)
    return Opened(path, kind, loaded.header, tuple(stored), closers, tail, dict(loaded.normalized))


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
    closers = tuple(repair.closers)
    normalized = dict(stored.normalized)
    return Opened(path, SQLITE, stored.header, tuple(prefix), closers, tail, normalized)


def session_ids(path: str, kind: str, *, session: str | None) -> list[str | None]:
    """The sessions stored in one file: `[session]` for JSONL (None: the header's own id),
    the listed (or the one requested) sessions of a SQLite database."""
    if kind == SQLITE:
        return list(sqlite_sessions(path, session=session))
    return [session]


def open_log(
    path: str,
    kind: str,
    *,
    session: str | None,
    now: int,
    normalize_legacy: bool = True,
    max_decoded_bytes: int | None = None,
) -> Opened:
    """Load one stored session; raises the kernel's `KernelError`s or `OSError`; writes nothing.

    Older v0 shapes are normalized in memory unless `normalize_legacy` is false.
    `max_decoded_bytes` caps a Zstandard log's plaintext (`load_jsonl_zstd`;
    None: its default).
    """
    if kind == SQLITE:
        if session is None:
            raise SessionNotFound("a SQLite database needs a session id")
        stored = inspect_sqlite(path, session=session, now=now, normalize_legacy=normalize_legacy)
        return opened_from_stored(path, stored)
    data = read_regular(path)
    with paused_collector():
        if kind == ZSTD:
            loaded = load_jsonl_zstd(
                data,
                session_id=session,
                now=now,
                normalize_legacy=normalize_legacy,
                max_decoded_bytes=max_decoded_bytes,
            )
        else:
            loaded = load_jsonl(
                data, session_id=session, now=now, normalize_legacy=normalize_legacy
            )
    return opened_from_loaded(path, kind, loaded, data)


def open_logs(
    path: str,
    kind: str,
    *,
    session: str | None,
    now: int,
    normalize_legacy: bool = True,
    max_decoded_bytes: int | None = None,
) -> Iterator[Opened]:
    """Load every stored session of one file (one for JSONL; all or `session` for SQLite)."""
    for sid in session_ids(path, kind, session=session):
        yield open_log(
            path,
            kind,
            session=sid,
            now=now,
            normalize_legacy=normalize_legacy,
            max_decoded_bytes=max_decoded_bytes,
        )


def open_readable(
    path: str,
    kind: str,
    *,
    session: str | None,
    now: int,
    normalize_legacy: bool = True,
    max_decoded_bytes: int | None = None,
) -> Iterator[Opened | UnreadableSession]:
    """Like `open_logs`, but every session of a database is read on its own.

    For a database without `session`, a session whose header or rows cannot be
    read (a `KernelError`) is an `UnreadableSession` in its place, in natural
    id order (s2 before s10),
    and the others are read as usual. Otherwise this raises as `open_logs` does.
    """
    if kind != SQLITE or session is not None:
        yield from open_logs(
            path,
            kind,
            session=session,
            now=now,
            normalize_legacy=normalize_legacy,
            max_decoded_bytes=max_decoded_bytes,
        )
        return
    listing = sqlite_listing(path)
    places: list[tuple[str, UnreadableSession | None]] = [
        *((header.id, None) for header in listing.headers),
        *((item.location, item) for item in listing.unreadable),
    ]
    for sid, unreadable in sorted(places, key=lambda place: natural_key(place[0])):
        if unreadable is not None:
            yield unreadable
            continue
        try:
            opened = open_log(path, kind, session=sid, now=now, normalize_legacy=normalize_legacy)
        except KernelError as exc:
            yield UnreadableSession(sid, exc)
            continue
        yield opened
