"""SQLite session databases for the command, through `kernel.store.sqlite.SqliteStore`.

The store creates its schema in a pristine database when it opens one; the
command must never write while inspecting or verifying, so a database is first
probed read-only and refused (`ForeignStore`) unless it already carries the
session schema's identity. SQLite's own errors become one-line `StoreError`s.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from kernel.store.errors import SessionNotFound, StoreError
from kernel.store.results import SessionListing, StoredSession
from kernel.store.sqlite import SqliteStore

__all__ = ("sqlite_sessions", "sqlite_listing", "inspect_sqlite", "repair_sqlite")


def _probe(path: str) -> None:
    """Refuse, without writing, a database that does not already hold the session schema.

    A read-only store is the probe: it refuses a foreign database (`ForeignStore`),
    reports a damaged one as `CorruptLog`, reads one in a read-only directory, and
    leaves no `-wal`/`-shm` behind.
    """
    try:
        SqliteStore(path, read_only=True).close()
    except sqlite3.Error as exc:
        raise StoreError(f"SQLite error: {exc}") from None


def _refuse_unwritable(path: str) -> None:
    """An `OSError` (the command's exit status 2, as for a JSONL log) when this process may
    not write the database or create its journal beside it: a read-only place, not a bad log.
    """
    directory = os.path.dirname(os.path.abspath(path))
    for where in (path, directory):
        if not os.access(where, os.W_OK, effective_ids=os.access in os.supports_effective_ids):
            raise PermissionError(
                errno.EACCES,
                "cannot write the database, or its journal beside it, to repair it",
                path,
            )


@contextmanager
def _store(
    path: str, *, read_only: bool = True, normalize_legacy: bool = True
) -> Iterator[SqliteStore]:
    try:
        if not read_only:
            _probe(path)  # a writable store would create its schema in a pristine file
            _refuse_unwritable(path)
        store = SqliteStore(path, read_only=read_only, normalize_legacy=normalize_legacy)
    except sqlite3.Error as exc:
        raise StoreError(f"SQLite error: {exc}") from None
    try:
        yield store
    except sqlite3.Error as exc:
        raise StoreError(f"SQLite error: {exc}") from None
    finally:
        store.close()


def sqlite_sessions(path: str, *, session: str | None) -> list[str]:
    """The ids of the sessions stored in a database (sorted), or `[session]` if it is stored.

    No header is decoded: a session whose header is damaged is listed, and reading
    it names the damage, so one damaged session hides no other.
    """
    with _store(path) as store:
        ids = list(store.session_ids())
    if session is None:
        return ids
    if session not in ids:
        raise SessionNotFound(f"no stored session {session!r} in this database")
    return [session]


def sqlite_listing(path: str) -> SessionListing:
    """The headers of a database's sessions, and the sessions whose header cannot be read.

    Reads the `sessions` rows only (`SqliteStore.list_readable()`), no event row.
    """
    with _store(path) as store:
        return store.list_readable()


def inspect_sqlite(
    path: str, *, session: str, now: int, normalize_legacy: bool = True
) -> StoredSession:
    """The balanced view of one stored session and the repair a load would commit; no writes."""
    with _store(path, normalize_legacy=normalize_legacy) as store:
        return store.inspect(session, now=now)


def repair_sqlite(
    path: str, *, session: str | None, dry_run: bool, now: int, normalize_legacy: bool = True
) -> list[StoredSession]:
    """Commit (or with `dry_run` only plan) the repair of one or every stored session.

    Each session comes back as the store's load (or, with `dry_run`, its inspect)
    returns it: its `repair` report, and its events as the repair leaves them.
    Repairing every session first reads every header (`SqliteStore.list()`), so a
    damaged one stops the command before any session is written; `session` repairs
    one session whatever the others hold.
    """
    ids = sqlite_sessions(path, session=session)
    sessions: list[StoredSession] = []
    with _store(path, read_only=dry_run, normalize_legacy=normalize_legacy) as store:
        if session is None and not dry_run:
            store.list()
        for sid in ids:
            if dry_run:
                sessions.append(store.inspect(sid, now=now))
            else:
                sessions.append(store.load(sid, now=now))
    return sessions
