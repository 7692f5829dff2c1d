"""Sessions in one SQLite database (docs/format/persistence.md §7, §6.3): `sqlite3`, WAL, STRICT.

A thin shell: rows are encoded and decoded by the pure `kernel.storage.sqlite_rows`, the
load pipeline and closers come from `kernel.storage.jsonl`. This module only runs
the transactions: opening rules (§7.1), the append transaction (§7.6) and the
repair transaction (§6.3), each `BEGIN IMMEDIATE` and schema-checked, so a
concurrent writer makes the later one fail instead of overwriting. Every
TEXT parameter is bound as `CAST(? AS TEXT)` (lone surrogates, `encode_text`),
and SQLite's "malformed" becomes `CorruptLog` wherever it is raised.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import attrs
from pyrsistent import PMap, pmap

from kernel.admission.header import refuse_version
from kernel.errors import (
    CorruptLog,
    KernelError,
    SeqMismatch,
    SessionHeaderError,
)
from kernel.storage.load import (
    RawScan,
    decoded_rows_scan,
    option_flag,
    plan_scan,
    scan_stored_rows,
)
from kernel.storage.quarantine import (
    RowQuarantine,
    decode_row_quarantine,
    encode_row_quarantine,
    quarantine_matches,
)
from kernel.storage.sqlite_rows import (
    MAX_ROW_DATA_BYTES,
    MAX_ROW_MEMBERS,
    Row,
    RowScan,
    UndecodableText,
    decode_row,
    decode_text,
    encode_rows,
    encode_text,
    event_row,
)
from kernel.store.batch import (
    admit_stored_header,
    canonical_text,
    check_batch,
    check_replacements,
    needs_stored_surface,
)
from kernel.store.collector import paused_collector
from kernel.store.errors import (
    ForeignStore,
    LiveSessionOpen,
    SessionExists,
    SessionNotFound,
    StaleRepair,
    StoreError,
)
from kernel.store.files import fsync_dir, store_path, write_quarantine
from kernel.store.paths import checked_session_id
from kernel.store.results import (
    RepairReport,
    SessionListing,
    StoredSession,
    UnreadableSession,
)
from kernel.values.events import DEFAULT_KNOWN_TYPES, Event, SessionHeader, known_type_set
from kernel.values.json import safe_int, summary
from kernel.wire.chunks import pack_chunk_rows
from kernel.wire.codec import header_from_json
from kernel.wire.legacy import normalize_events

__all__ = ("APPLICATION_ID", "USER_VERSION", "SCHEMA", "SqliteStore")

APPLICATION_ID: Final = 0x44534850
"""`PRAGMA application_id` of a session database (ASCII "DSHP")."""
USER_VERSION: Final = 17
"""`PRAGMA user_version`: the physical schema version (unrelated to the format version 0)."""

SCHEMA: Final = (
    """CREATE TABLE persistence_state (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    store_id TEXT NOT NULL
) STRICT""",
    """CREATE TABLE sessions (
    id TEXT PRIMARY KEY NOT NULL CHECK (length(id) > 0),
    version INTEGER NOT NULL,
    created_at INTEGER NOT NULL CHECK (created_at >= 0),
    cwd TEXT,
    parent_session TEXT,
    seed_length INTEGER CHECK (seed_length >= 0),
    origin TEXT CHECK (origin = 'subagent'),
    delegation_depth INTEGER CHECK (delegation_depth >= 0),
    agent_preset TEXT,
    incarnation TEXT NOT NULL,
    revision INTEGER NOT NULL CHECK (revision >= 0)
) STRICT""",
    """CREATE TABLE events (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    time INTEGER NOT NULL,
    data ANY NOT NULL,
    source_event_seqs ANY,
    surface_op TEXT,
    ignorable INTEGER CHECK (ignorable IN (0, 1)),
    PRIMARY KEY (session_id, seq)
) STRICT""",
)
"""The tables of §7.2, created in one transaction on a pristine database."""

_TABLES: Final = ("persistence_state", "sessions", "events")
_ROW_COLUMN_NAMES: Final = (
    "seq",
    "type",
    "time",
    "data",
    "source_event_seqs",
    "surface_op",
    "ignorable",
)
_ROW_COLUMNS: Final = ", ".join(_ROW_COLUMN_NAMES)
_SESSION_COLUMNS: Final = (
    "id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, "
    "agent_preset, incarnation, revision"
)
_MAX_ATTEMPTS: Final = 8
_SIDECARS: Final = ("-wal", "-shm")
_UNWRITABLE: Final = frozenset((sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR))
"""Primary result codes of a write the disk refused: a full disk, an I/O error."""
_UNOPENABLE: Final = frozenset((sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN))
"""Primary result codes of a `mode=ro` reader that cannot create or open the WAL index."""


def _primary_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if type(code) is int else None


def _damage(path: str, exc: sqlite3.DatabaseError) -> CorruptLog:
    return CorruptLog(f"{path}: the database file is damaged ({exc})")


@contextmanager
def _damage_is_corruption(path: str) -> Iterator[None]:
    """SQLite's SQLITE_CORRUPT ("database disk image is malformed") as `CorruptLog`.

    A truncated file and a damaged page are both damage to stored data
    (docs/format/persistence.md's corruption family), wherever SQLite notices it: at
    opening, or on the page a query happens to read.
    """
    try:
        yield
    except sqlite3.DatabaseError as exc:
        code = _primary_code(exc)
        if code == sqlite3.SQLITE_CORRUPT:
            raise _damage(path, exc) from exc
        if code in _UNWRITABLE:
            raise StoreError(f"{path}: the database could not be written ({exc})") from exc
        raise


def _holds_data(path: str) -> bool:
    """Whether a file exists and is not empty (a -wal or -journal with content)."""
    try:
        return os.path.getsize(path) > 0
    except OSError:
        return False


def _release_sidecars(path: str) -> None:
    """Let SQLite delete the empty -wal/-shm files a `mode=ro` reader had to create.

    A WAL database's last connection checkpoints and deletes them on close,
    but only a connection that can take the write lock: a `mode=ro` one never
    does, so they were left behind. A plain connection that reads the schema
    cookie and closes does it, and SQLite's own locking keeps it safe: while
    any other connection is open the files stay. Only an empty write-ahead log
    is released this way (checkpointing it writes nothing); one that holds a
    writer's frames is left for that writer. Best effort: errors are ignored.
    """
    if not any(os.path.exists(path + suffix) for suffix in _SIDECARS):
        return
    if _holds_data(path + "-wal"):
        return
    try:
        conn = sqlite3.connect(
            Path(path).resolve().as_uri() + "?mode=rw", uri=True, timeout=0, isolation_level=None
        )
        try:
            conn.execute("PRAGMA schema_version").fetchone()
        finally:
            conn.close()
    except (sqlite3.Error, OSError):
        pass


def _expected_structure() -> dict[str, Any]:
    """The schema facts `_check_schema` compares, taken from a fresh in-memory database."""
    conn = sqlite3.connect(":memory:")
    try:
        for statement in SCHEMA:
            conn.execute(statement)
        return _structure(conn)
    finally:
        conn.close()


def _structure(conn: sqlite3.Connection) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for table in _TABLES:
        listed = conn.execute(
            "SELECT type, strict FROM pragma_table_list WHERE schema = 'main' AND name = ?",
            (table,),
        ).fetchall()
        columns = conn.execute(
            'SELECT name, type, "notnull", pk FROM pragma_table_xinfo(?)', (table,)
        ).fetchall()
        keys = conn.execute(
            'SELECT "table", "from", "to", on_delete FROM pragma_foreign_key_list(?)', (table,)
        ).fetchall()
        facts[table] = (listed, columns, keys)
    return facts


_EXPECTED: dict[str, Any] | None = None


def _expected() -> dict[str, Any]:
    global _EXPECTED
    if _EXPECTED is None:
        _EXPECTED = _expected_structure()
    return _EXPECTED


def _header_record(row: Sequence[Any]) -> dict[str, Any]:
    """The in-memory header record of a `sessions` row; a foreign version is refused first."""
    session_id, version = row[0], row[1]
    if any(type(value) is UndecodableText for value in row):
        raise CorruptLog(f"session {session_id!r}: a sessions column holds TEXT that is not UTF-8")
    if type(version) is not int:
        raise CorruptLog(f"session {session_id}: stored version {version!r} is not a number")
    if version != 0:
        raise refuse_version(session_id, version)
    record: dict[str, Any] = {"version": 0, "id": session_id, "createdAt": row[2]}
    for key, value in zip(
        ("cwd", "parentSession", "seedLength", "origin", "delegationDepth", "agentPreset"),
        row[3:9],
        strict=True,
    ):
        if value is not None:
            record[key] = value
    return record


def _header_of(row: Sequence[Any]) -> SessionHeader:
    try:
        return header_from_json(_header_record(row), session_id=row[0])
    except SessionHeaderError as exc:
        raise CorruptLog(f"session {row[0]!r}: stored header is invalid: {exc}") from exc


def _header_columns(header: SessionHeader) -> tuple[Any, ...]:
    return (
        encode_text(header.id),
        header.version,
        header.created_at,
        encode_text(header.cwd),
        encode_text(header.parent_session),
        header.seed_length,
        encode_text(header.origin),
        header.delegation_depth,
        encode_text(header.agent_preset),
    )


_INSERT_SESSION: Final = (
    f"INSERT INTO sessions ({_SESSION_COLUMNS}) VALUES (CAST(? AS TEXT), ?, ?, CAST(? AS TEXT), "
    "CAST(? AS TEXT), ?, CAST(? AS TEXT), ?, CAST(? AS TEXT), ?, 0)"
)
_INSERT_ROW: Final = (
    f"INSERT INTO events (session_id, {_ROW_COLUMNS}) "
    "VALUES (CAST(? AS TEXT), ?, CAST(? AS TEXT), ?, ?, ?, ?, ?)"
)


class _Restart(Exception):
    """The session changed between planning and committing a repair: plan again."""


@attrs.frozen
class _Plan:
    header: SessionHeader
    events: tuple[Event, ...]
    closers: tuple[Event, ...]
    scan: RowScan
    revision: int
    normalized: PMap[str, int] = attrs.field(factory=pmap)


class SqliteStore:
    """Sessions in a SQLite database at `path` (docs/format/persistence.md §7).

    Opening a pristine (empty) database creates the schema; any other database
    must carry `application_id` 0x44534850 and `user_version` 17, else
    `ForeignStore`. `pack_chunks=False` stores every delta chunk as its own
    row; `known_types` is the vocabulary the loader accepts without `ignorable`.
    One connection per store: not for sharing between threads; several
    processes may share a database (transactions are `BEGIN IMMEDIATE`).

    `read_only=True` never writes (for `inspect`, `read_from`, `list`): the
    database must already hold the session schema. One that no connection holds
    (no `-wal` or `-shm` beside it, no rollback journal with data) is read
    `immutable=1`, opening the file read-only and creating nothing; otherwise it
    is opened `mode=ro` beside the writer's files.
    Where no WAL index (`-shm`) can be created, e.g. in a read-only
    directory, and no write-ahead log holds data, it is read `immutable=1`
    (`immutable` is then true); a write-ahead log with data there is
    refused (`StoreError`), since
    reading without it would lose committed transactions. Closing the store
    leaves no `-wal`/`-shm` file behind that it had to create. A damaged
    database (truncated, a malformed page) is `CorruptLog` wherever it shows.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        pack_chunks: bool = True,
        known_types: Collection[str] = DEFAULT_KNOWN_TYPES,
        timeout: float = 30.0,
        read_only: bool = False,
        normalize_legacy: bool = True,
    ) -> None:
        self.path = store_path(path, "SqliteStore path")
        self.pack_chunks = pack_chunks
        self.known_types = known_type_set(known_types)
        self.normalize_legacy = option_flag(normalize_legacy, "normalize_legacy")
        self.read_only = read_only
        self.immutable = False
        self._pending: dict[str, SessionHeader] = {}
        if os.path.isdir(self.path):
            raise StoreError(f"{self.path}: a directory, not a database file")
        if not read_only:
            try:
                self._connect(lambda: sqlite3.connect(self.path, timeout=timeout))
            except sqlite3.OperationalError as exc:
                raise StoreError(f"{self.path}: the database cannot be opened ({exc})") from None
            return
        # Not even a journal-mode switch: inspecting a database must leave its bytes alone.
        uri = Path(self.path).resolve().as_uri() + "?mode=ro"
        if os.path.isfile(self.path) and not self._journal_beside():
            # No connection holds the database (a WAL one keeps its -wal and -shm while
            # open), and no journal holds data: the file alone is the database, read as
            # it is, creating and writing nothing.
            self.immutable = True
            self._connect(lambda: sqlite3.connect(uri + "&immutable=1", uri=True))
            return
        try:
            self._connect(lambda: sqlite3.connect(uri, uri=True, timeout=timeout))
        except sqlite3.OperationalError as exc:
            _release_sidecars(self.path)
            if _primary_code(exc) not in _UNOPENABLE or not os.path.isfile(self.path):
                raise
            # No WAL index can be had here (a read-only directory, say): read the file alone.
            self._refuse_unread_journal(exc)
            self.immutable = True
            self._connect(lambda: sqlite3.connect(uri + "&immutable=1", uri=True))
        except BaseException:
            _release_sidecars(self.path)
            raise

    def _connect(self, connect: Callable[[], sqlite3.Connection]) -> None:
        """Open `self._conn` by the rules of §7.1, reading TEXT as `decode_text` does."""
        self._conn = conn = connect()
        conn.isolation_level = None
        conn.text_factory = decode_text
        try:
            self._open()
        except BaseException:
            conn.close()
            raise

    def _journal_beside(self) -> bool:
        """Whether a -wal or -shm file, or a rollback journal with data, sits beside the file."""
        return any(os.path.exists(self.path + s) for s in _SIDECARS) or _holds_data(
            self.path + "-journal"
        )

    def _refuse_unread_journal(self, cause: sqlite3.OperationalError) -> None:
        """`immutable=1` reads the database file alone: refuse when a journal holds data."""
        for suffix, what in (("-wal", "write-ahead log"), ("-journal", "rollback journal")):
            if _holds_data(self.path + suffix):
                raise StoreError(
                    f"{self.path}: the {what} {self.path}{suffix} holds data, but a read-only "
                    f"reader cannot use it here ({cause}); reading the database without it "
                    "would miss committed transactions (open it where the -shm index can be "
                    "created, or let a writer checkpoint it)"
                ) from cause

    def _refuse_if_read_only(self) -> None:
        if self.read_only:
            raise StoreError(f"{self.path}: opened read-only; this operation writes")

    # -- opening (§7.1) ---------------------------------------------------------------------

    def _identity(self) -> tuple[int, int, int]:
        conn = self._conn
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        user_version = conn.execute("PRAGMA user_version").fetchone()[0]
        objects = conn.execute(
            "SELECT count(*) FROM sqlite_schema WHERE name NOT LIKE 'sqlite!_%' ESCAPE '!'"
        ).fetchone()[0]
        return app_id, user_version, objects

    def _refuse_identity(self, app_id: int, user_version: int, objects: int) -> None:
        if user_version == 0:
            if app_id != 0 or objects:
                raise ForeignStore(
                    f"{self.path}: not a session database (user_version 0 with application_id "
                    f"{app_id:#x} and {objects} schema objects); refusing to touch it"
                )
        elif user_version != USER_VERSION:
            raise ForeignStore(
                f"{self.path}: physical schema version {user_version} is not {USER_VERSION}; "
                "this reader does not migrate"
            )
        elif app_id != APPLICATION_ID:
            raise ForeignStore(
                f"{self.path}: application_id {app_id:#x} is not {APPLICATION_ID:#x}; "
                "not a session database"
            )

    def _open(self) -> None:
        conn = self._conn
        try:
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA trusted_schema = OFF")
            identity = self._identity()
        except sqlite3.OperationalError:
            raise  # locked, unreadable, ...: an I/O condition, not a foreign file
        except sqlite3.DatabaseError as exc:
            if _primary_code(exc) == sqlite3.SQLITE_CORRUPT:
                raise _damage(self.path, exc) from exc  # a SQLite file, truncated or damaged
            raise ForeignStore(f"{self.path}: not a SQLite database ({exc})") from exc
        with _damage_is_corruption(self.path):
            self._open_checked(identity)

    def _open_checked(self, identity: tuple[int, int, int]) -> None:
        conn = self._conn
        self._refuse_identity(*identity)
        if self.read_only:
            if identity[1] != USER_VERSION:
                raise ForeignStore(f"{self.path}: holds no session schema; nothing to read")
            with self._transaction(immediate=False):
                self._check_schema()
            return
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        if identity[1] == 0:
            with self._transaction():
                app_id, user_version, objects = self._identity()
                if (app_id, user_version, objects) == (0, 0, 0):
                    for statement in SCHEMA:
                        conn.execute(statement)
                    conn.execute(
                        "INSERT INTO persistence_state (singleton, store_id) VALUES (1, ?)",
                        (str(uuid.uuid4()),),
                    )
                    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                    conn.execute(f"PRAGMA user_version = {USER_VERSION}")
        with self._transaction(immediate=False):
            self._check_schema()

    def _check_schema(self) -> None:
        """Re-validate identity and tables (run inside every transaction)."""
        identity = self._identity()
        self._refuse_identity(*identity)
        if identity[1] != USER_VERSION:
            raise ForeignStore(f"{self.path}: the session schema is missing")
        if _structure(self._conn) != _expected():
            raise CorruptLog(f"{self.path}: the session tables do not match schema {USER_VERSION}")
        state = self._conn.execute("SELECT singleton, store_id FROM persistence_state").fetchall()
        if len(state) != 1 or state[0][0] != 1:
            raise CorruptLog(f"{self.path}: persistence_state must hold exactly one row")

    @contextmanager
    def _transaction(self, *, immediate: bool = True) -> Iterator[sqlite3.Connection]:
        conn = self._conn
        with _damage_is_corruption(self.path):
            conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @property
    def store_id(self) -> str:
        """The random UUID identifying this database."""
        with self._transaction(immediate=False) as conn:
            value: str = conn.execute("SELECT store_id FROM persistence_state").fetchone()[0]
        return value

    def close(self) -> None:
        """Close the connection; a read-only store also releases the -wal/-shm it created."""
        self._conn.close()
        if self.read_only and not self.immutable:
            _release_sidecars(self.path)

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r})"

    # -- reading rows -----------------------------------------------------------------------

    def _session_row(self, session_id: str) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self._conn.execute(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = CAST(? AS TEXT)",
            (encode_text(session_id),),
        ).fetchone()
        return row

    def _rows(self, session_id: str) -> list[tuple[Any, ...]]:
        """The session's rows as the database gives them (`Row` fields, in order)."""
        query = f"SELECT {_ROW_COLUMNS} FROM events WHERE session_id = CAST(? AS TEXT) ORDER BY seq"
        parameters = (encode_text(session_id),)
        conn = self._conn
        # TEXT decoded in C first (a Python call per value is a twentieth of a load); a
        # value that is not UTF-8 fails that fetch, and `decode_text` then reads each one.
        conn.text_factory = str
        try:
            rows: list[tuple[Any, ...]] = conn.execute(query, parameters).fetchall()
            return rows
        except sqlite3.OperationalError:
            pass
        finally:
            conn.text_factory = decode_text
        return conn.execute(query, parameters).fetchall()

    def _location(self, session_id: str) -> str:
        return f"sqlite:{self.path}#{session_id}"

    def _read(self, session_id: str) -> tuple[tuple[Any, ...], list[tuple[Any, ...]]]:
        with self._transaction(immediate=False):
            self._check_schema()
            session = self._session_row(session_id)
            if session is None:
                raise SessionNotFound(f"no stored session {session_id!r} in {self.path}")
            return session, self._rows(session_id)

    def _plan(self, session: tuple[Any, ...], rows: list[tuple[Any, ...]]) -> _Plan:
        """§5 over the rows: version first, then the row scan, then the load pipeline
        (`kernel.storage.load.scan_stored_rows` and `plan_scan`, which choose the path)."""
        record = _header_record(session)
        with paused_collector():
            scan, kind = scan_stored_rows(rows)
            raw_scan = RawScan(
                header=record,
                records=list(scan.events),
                committed_bytes=0,
                total_bytes=0,
                kind=kind,
            )
            loaded = plan_scan(
                raw_scan,
                lambda: decoded_rows_scan(raw_scan, rows),
                session_id=session[0],
                known_types=self.known_types,
                normalize=self.normalize_legacy,
            )
        return _Plan(
            loaded.header, loaded.events, loaded.closers, scan, session[10], loaded.normalized
        )

    def _report(self, session_id: str, plan: _Plan, *, committed: bool) -> RepairReport:
        scan = plan.scan
        return RepairReport(
            location=self._location(session_id),
            torn=scan.torn_from is not None,
            torn_from_seq=scan.torn_from,
            dropped_records=scan.dropped_rows,
            torn_reason=scan.reason,
            closers=plan.closers,
            committed=committed,
        )

    # -- create and append (§1, §7.6) -------------------------------------------------------

    def create(self, header: SessionHeader | Mapping[str, Any]) -> SessionHeader:
        """Register a new session; nothing is written until its first non-empty append."""
        self._refuse_if_read_only()
        admitted = admit_stored_header(header)
        with self._transaction(immediate=False):
            stored = self._session_row(admitted.id)
        if admitted.id in self._pending or stored is not None:
            raise SessionExists(f"session {admitted.id!r} already exists in {self.path}")
        self._pending[admitted.id] = admitted
        return admitted

    def _records(self, batch: tuple[Event, ...]) -> Sequence[Any]:
        if not self.pack_chunks:
            return batch
        return pack_chunk_rows(
            batch, max_members=MAX_ROW_MEMBERS, max_data_bytes=MAX_ROW_DATA_BYTES
        )

    def _insert(self, session_id: str, rows: Iterable[Row]) -> None:
        key = encode_text(session_id)
        self._conn.executemany(
            _INSERT_ROW,
            (
                (
                    key,
                    r.seq,
                    encode_text(r.type),
                    r.time,
                    r.data,
                    r.source_event_seqs,
                    r.surface_op,
                    r.ignorable,
                )
                for r in rows
            ),
        )

    def _bump_revision(self, session_id: str) -> None:
        self._conn.execute(
            "UPDATE sessions SET revision = revision + 1 WHERE id = CAST(? AS TEXT)",
            (encode_text(session_id),),
        )

    def _next_seq(self, session_id: str) -> int:
        """The seq after the logical last event, decoded from the physical tail row."""
        tail = self._conn.execute(
            f"SELECT {_ROW_COLUMNS} FROM events WHERE session_id = CAST(? AS TEXT) "
            "ORDER BY seq DESC LIMIT 1",
            (encode_text(session_id),),
        ).fetchone()
        if tail is None:
            return 0
        try:
            events = decode_row(Row(*tail))
        except KernelError as exc:
            raise CorruptLog(
                f"session {session_id!r}: invalid physical tail at seq {tail[0]} ({exc}); "
                "load the session to commit its repair before appending"
            ) from exc
        return events[-1].seq + 1

    def append(self, session_id: str, events: Iterable[Event]) -> None:
        """Append one batch in one `BEGIN IMMEDIATE` transaction (§7.6); durable on return.

        The batch must continue the stored log (`SeqMismatch`, also when a
        concurrent writer got there first); retired vocabulary is refused, and
        so is whatever this store's loader would refuse or could not repair
        (Decision 15; see `JsonlStore.append`: a batch holding a replace reads
        the stored rows to judge it). An empty batch is a no-op. The first
        non-empty append of a created session inserts its `sessions` row.
        """
        self._append(session_id, events, planned=False)

    def _append_planned(self, session_id: str, events: Iterable[Event]) -> None:
        """`append` of a batch that a `SessionLog` continuing the stored log admitted (a
        live session's commit): its replacements were planned over the stored surface, so
        the stored rows are not read again to judge them."""
        self._append(session_id, events, planned=True)

    def _append(self, session_id: str, events: Iterable[Event], *, planned: bool) -> None:
        self._refuse_if_read_only()
        session_id = canonical_text(checked_session_id(session_id))
        batch = check_batch(events, known_types=self.known_types)
        if not batch:
            if session_id not in self._pending:
                self._read(session_id)
            return
        rows = encode_rows(self._records(batch))
        with self._transaction():
            self._check_schema()
            stored = self._session_row(session_id)
            pending = self._pending.get(session_id)
            if stored is None:
                if pending is None:
                    raise SessionNotFound(f"no stored session {session_id!r} in {self.path}")
                next_seq = 0
            elif pending is not None:
                raise SessionExists(f"session {session_id!r} was materialized by another writer")
            else:
                next_seq = self._next_seq(session_id)
            if batch[0].seq != next_seq:
                raise SeqMismatch(
                    f"session {session_id!r}: batch starts at seq {batch[0].seq}, "
                    f"but the stored log continues at {next_seq} (R4)",
                    seq=batch[0].seq,
                )
            if not planned and needs_stored_surface(batch):
                check_replacements(
                    () if stored is None else self._stored_events(session_id, stored, next_seq),
                    batch,
                )
            if stored is None and pending is not None:
                self._conn.execute(_INSERT_SESSION, (*_header_columns(pending), str(uuid.uuid4())))
            try:
                self._insert(session_id, rows)
            except sqlite3.IntegrityError as exc:
                raise SeqMismatch(
                    f"session {session_id!r}: seq {batch[0].seq} is already stored ({exc})",
                    seq=batch[0].seq,
                ) from exc
            self._bump_revision(session_id)
        self._pending.pop(session_id, None)

    def _stored_events(
        self, session_id: str, session: tuple[Any, ...], next_seq: int
    ) -> Sequence[Event]:
        """The stored events as the loader reads them, without closers, inside the append's
        transaction: what a replace in the batch is judged against (`check_replacements`)."""
        plan = self._plan(session, self._rows(session_id))
        stored = len(plan.events) - len(plan.closers)
        if plan.scan.torn_from is not None or stored != next_seq:
            raise CorruptLog(
                f"session {session_id!r}: the log its loader reads ends at seq {stored - 1}, "
                f"not {next_seq - 1}; load the session to commit its repair before appending"
            )
        return plan.events[:stored]

    # -- inspect, load, read_from, list -----------------------------------------------------

    def inspect(self, session_id: str, *, now: int = 0) -> StoredSession:
        """The balanced view `(header, prefix + closers)`, computed in memory; writes nothing."""
        session_id = canonical_text(checked_session_id(session_id))
        plan = self._plan(*self._read(session_id))
        report = self._report(session_id, plan, committed=False)
        return StoredSession(plan.header, plan.events, report, plan.normalized)

    def load(self, session_id: str, *, now: int, adopt_live: bool = False) -> StoredSession:
        """Like `inspect`, then commit any needed repair (§6.3) once, and re-read.

        With `adopt_live` (the session is still owned by a live writer) a torn
        tail is removed but closers are never appended: an open last turn
        raises `LiveSessionOpen`. A session that changes while the repair is
        planned is planned again; one that keeps changing raises `StaleRepair`.
        """
        self._refuse_if_read_only()
        session_id = canonical_text(checked_session_id(session_id))
        for _ in range(_MAX_ATTEMPTS):
            plan = self._plan(*self._read(session_id))
            report = self._report(session_id, plan, committed=False)
            if adopt_live and plan.closers:
                raise LiveSessionOpen(
                    f"session {session_id!r} is owned by a live writer and its last turn is open"
                )
            if not report.needed:
                return StoredSession(plan.header, plan.events, report, plan.normalized)
            try:
                quarantine = self._commit_repair(session_id, plan)
            except _Restart:
                continue
            again = self._plan(*self._read(session_id))
            if again.closers or again.scan.torn_from is not None:
                raise CorruptLog(f"session {session_id!r}: the committed repair did not converge")
            kept = None if quarantine is None else str(quarantine)
            report = attrs.evolve(report, committed=True, quarantine=kept)
            return StoredSession(again.header, again.events, report, again.normalized)
        raise StaleRepair(f"session {session_id!r} kept changing while its repair was planned")

    def _exact_rows(
        self, session_id: str, from_seq: int
    ) -> tuple[tuple[tuple[str, Any], ...], ...]:
        """The session's rows from `from_seq` on, each column as (storage class, value)."""
        cells = ", ".join(
            f"typeof({c}), CASE WHEN typeof({c}) IN ('text', 'blob') THEN CAST({c} AS BLOB) "
            f"ELSE {c} END"
            for c in _ROW_COLUMN_NAMES
        )
        fetched = self._conn.execute(
            f"SELECT {cells} FROM events WHERE session_id = CAST(? AS TEXT) AND seq >= ? "
            "ORDER BY seq",
            (encode_text(session_id), from_seq),
        ).fetchall()
        return tuple(tuple(zip(row[0::2], row[1::2], strict=True)) for row in fetched)

    def _quarantine(self, session_id: str, revision: int, torn_from: int) -> Path:
        rows = self._exact_rows(session_id, torn_from)
        kept = RowQuarantine(session_id, revision, torn_from, rows)
        return write_quarantine(Path(self.path), torn_from, encode_row_quarantine(kept))

    def undo_repair(self, quarantine: str | os.PathLike[str]) -> str:
        """Put back the rows a repair removed and kept in `quarantine` (§6.5); the session id.

        Refused (`CorruptLog`) when the file does not match the hash in its name, or
        when the session changed after the repair (its revision moved on: undoing
        would drop what was appended since). In one transaction the repair's closers
        are deleted, the rows reinserted exactly as stored, and the revision bumped;
        then the quarantine is removed.
        """
        self._refuse_if_read_only()
        source = Path(quarantine)
        data = source.read_bytes()
        kept = decode_row_quarantine(data)
        if kept is None or not quarantine_matches(source.name, data):
            raise CorruptLog(f"{source.name}: not an intact SQLite quarantine file")
        session_id = kept.session_id
        with self._transaction() as conn:
            self._check_schema()
            session = self._session_row(session_id)
            if session is None:
                raise SessionNotFound(f"no stored session {session_id!r} in {self.path}")
            if session[10] != kept.revision + 1:
                raise CorruptLog(
                    f"session {session_id!r} changed after its repair (revision {session[10]}, "
                    f"the repair left {kept.revision + 1}): undoing it would drop what was "
                    "appended since"
                )
            conn.execute(
                "DELETE FROM events WHERE session_id = CAST(? AS TEXT) AND seq >= ?",
                (encode_text(session_id), kept.torn_from),
            )
            key = encode_text(session_id)
            for row in kept.rows:
                places = ", ".join("CAST(? AS TEXT)" if kind == "text" else "?" for kind, _ in row)
                conn.execute(
                    f"INSERT INTO events (session_id, {_ROW_COLUMNS}) "
                    f"VALUES (CAST(? AS TEXT), {places})",
                    (key, *(value for _, value in row)),
                )
            self._bump_revision(session_id)
        source.unlink()
        fsync_dir(source.parent)
        return session_id

    def _commit_repair(self, session_id: str, plan: _Plan) -> Path | None:
        """The repair transaction of §6.3; returns the quarantine of the removed rows."""
        quarantine = None
        with self._transaction() as conn:
            self._check_schema()
            session = self._session_row(session_id)
            if session is None or session[10] != plan.revision:
                raise _Restart
            current, _ = scan_stored_rows(self._rows(session_id))
            planned = plan.scan.torn_from
            if planned is not None and current.torn_from != planned:
                raise StaleRepair(
                    f"session {session_id!r}: stale repair (torn tail planned at seq {planned}, "
                    f"found at {current.torn_from})"
                )
            if planned is None and current.torn_from is not None:
                raise StaleRepair(
                    f"session {session_id!r}: repair omitted the current torn tail "
                    f"(at seq {current.torn_from})"
                )
            if planned is not None:
                # Kept beside the database, durably, before the rows go (§6.5).
                quarantine = self._quarantine(session_id, plan.revision, planned)
                conn.execute(
                    "DELETE FROM events WHERE session_id = CAST(? AS TEXT) AND seq >= ?",
                    (encode_text(session_id), planned),
                )
            if plan.closers:
                if plan.closers[0].seq != len(current.events):
                    raise StaleRepair(
                        f"session {session_id!r}: stale repair (closers start at seq "
                        f"{plan.closers[0].seq}, the stored log continues at "
                        f"{len(current.events)})"
                    )
                self._insert(session_id, (event_row(e) for e in plan.closers))
            self._bump_revision(session_id)
        return quarantine

    def read_from(self, session_id: str, from_seq: int) -> tuple[Event, ...]:
        """Stored events with `seq >= from_seq` from the valid prefix: no repair, no closers."""
        start = safe_int(from_seq)
        if start is None or start < 0 or type(from_seq) is bool:
            raise StoreError(
                f"from_seq must be a non-negative safe integer, got {summary(from_seq)}"
            )
        session_id = canonical_text(checked_session_id(session_id))
        _, rows = self._read(session_id)
        with paused_collector():
            events = scan_stored_rows(rows)[0].events
            if self.normalize_legacy:
                # A.5: an older shape may need facts from before the suffix.
                events, _ = normalize_events(events, session_id=session_id)
            return events[start:]

    def list(self) -> tuple[SessionHeader, ...]:
        """Headers of materialized sessions, sorted by id (no event rows are read).

        All or nothing, as `JsonlStore.list()`: the listing fails on the first
        session whose stored header cannot be read, with the error loading it
        would raise, naming the session: `CorruptLog` for a damaged header,
        `UnsupportedFormat` for a foreign format version. To list past a
        damaged session, use `list_readable()`.
        """
        with self._transaction(immediate=False) as conn:
            self._check_schema()
            sessions = conn.execute(
                f"SELECT {_SESSION_COLUMNS} FROM sessions ORDER BY id"
            ).fetchall()
        return tuple(_header_of(s) for s in sessions)

    def list_readable(self) -> SessionListing:
        """Every header `list()` would return, going past the sessions it cannot read.

        Reads the `sessions` rows only, as `list()` does, never an event row: a
        session whose header `list()` would fail on is one `UnreadableSession`
        named by its id, with that error, and the others are listed. A session
        whose event rows are damaged is listed; its `inspect` or `load` names the
        damage. An id whose TEXT is not UTF-8 is named by its bytes, each byte
        that is not UTF-8 as a lone surrogate (`surrogateescape`), with a
        `CorruptLog`.
        """
        with self._transaction(immediate=False) as conn:
            self._check_schema()
            sessions = conn.execute(
                f"SELECT {_SESSION_COLUMNS} FROM sessions ORDER BY id"
            ).fetchall()
        headers: list[SessionHeader] = []
        unreadable: list[UnreadableSession] = []
        for row in sessions:
            session_id = row[0]
            if type(session_id) is UndecodableText:
                name = session_id.raw.decode("utf-8", "surrogateescape")
                damage = CorruptLog(f"{self.path}: a stored session id is not UTF-8 TEXT")
                unreadable.append(UnreadableSession(name, damage))
                continue
            try:
                headers.append(_header_of(row))
            except KernelError as exc:
                unreadable.append(UnreadableSession(session_id, exc))
        unreadable.sort(key=lambda item: item.location)
        return SessionListing(tuple(headers), tuple(unreadable))

    def session_ids(self) -> tuple[str, ...]:
        """The ids of the materialized sessions, in `list()`'s order, decoding no header.

        Only the `id` column is read, so a session whose other header columns are
        damaged, or of a foreign format version, is listed all the same: reading
        it (`inspect`, `load`) names its damage, and one damaged session hides no
        other. An id whose stored TEXT is not UTF-8 is named by no string; it is
        `CorruptLog`.
        """
        with self._transaction(immediate=False) as conn:
            self._check_schema()
            ids = [row[0] for row in conn.execute("SELECT id FROM sessions ORDER BY id")]
        for session_id in ids:
            if type(session_id) is not str:
                raise CorruptLog(f"{self.path}: a stored session id is not UTF-8 TEXT")
        return tuple(ids)
