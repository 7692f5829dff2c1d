"""The SQLite store (docs/format/persistence.md §7, §6.3): identity, schema, codec columns,
transactions."""

from __future__ import annotations

import os
import pickle
import random
import shutil
import sqlite3
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storelogs import (
    STORE_HEADER,
    T0,
    open_turn_prefix,
    realistic_log,
    seeded_log,
    split_batches,
)

from kernel.errors import (
    CorruptLog,
    LegacyFormat,
    SeqMismatch,
    SessionHeaderError,
    UnknownEventType,
    UnsupportedFormat,
)
from kernel.folds.closers import interrupted_turn_closers
from kernel.storage.load import scan_stored_rows
from kernel.storage.sqlite_rows import (
    MAX_ROW_DATA_BYTES,
    Row,
    decode_data,
    decode_source_seqs,
    row_lines,
    scan_rows,
)
from kernel.storage.typed.lines import scan_row_lines
from kernel.store import (
    APPLICATION_ID,
    USER_VERSION,
    ForeignStore,
    LiveSessionOpen,
    SessionExists,
    SessionListing,
    SessionNotFound,
    SqliteStore,
    StoreError,
)
from kernel.values.events import DEFAULT_KNOWN_TYPES, Event, SessionHeader
from kernel.values.json import thaw
from kernel.wire.chunks import pack_chunk_rows
from kernel.wire.codec import event_to_wire

HEADER = STORE_HEADER
_log = seeded_log
_open_turn_prefix = open_turn_prefix


def _fill(store: SqliteStore, events: list[Event], header: Any = HEADER, seed: int = 0) -> None:
    store.create(header)
    for batch in split_batches(events, random.Random(seed)):
        store.append(header["id"], batch)


def _raw(path: Path) -> closing[sqlite3.Connection]:
    """An autocommit connection that is closed when its `with` block ends."""
    return closing(sqlite3.connect(path, isolation_level=None))


def _revision(path: Path, session_id: str = "s-1") -> int:
    with _raw(path) as conn:
        value: int = conn.execute(
            "SELECT revision FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()[0]
    return value


def _rows(path: Path, session_id: str = "s-1") -> list[tuple[Any, ...]]:
    with _raw(path) as conn:
        return conn.execute(
            "SELECT * FROM events WHERE session_id = ? ORDER BY seq", (session_id,)
        ).fetchall()


# -- identity and opening rules (§7.1) ----------------------------------------------------------


def test_pristine_database_gets_the_schema(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SqliteStore(path)
    store_id = store.store_id
    uuid.UUID(store_id)
    store.close()
    with _raw(path) as conn:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID == 1146308688
        assert conn.execute("PRAGMA user_version").fetchone()[0] == USER_VERSION == 17
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = conn.execute(
            "SELECT name, strict FROM pragma_table_list WHERE schema = 'main' "
            "AND name NOT LIKE 'sqlite%' ORDER BY name"
        ).fetchall()
        assert tables == [("events", 1), ("persistence_state", 1), ("sessions", 1)]
        assert conn.execute("SELECT singleton FROM persistence_state").fetchall() == [(1,)]
        keys = conn.execute('SELECT "table", on_delete FROM pragma_foreign_key_list("events")')
        assert keys.fetchall() == [("sessions", "CASCADE")]
    again = SqliteStore(path)
    assert again.store_id == store_id, "reopening must not re-initialize"
    assert again._conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert again._conn.execute("PRAGMA trusted_schema").fetchone()[0] == 0
    again.close()


def _make_db(path: Path, *statements: str) -> bytes:
    with _raw(path) as conn:
        for statement in statements:
            conn.execute(statement)
    return path.read_bytes()


@pytest.mark.parametrize(
    "statements",
    [
        ("CREATE TABLE mine (x)",),
        ("PRAGMA application_id = 7",),
        ("PRAGMA user_version = 16",),
        ("PRAGMA user_version = 18",),
        ("PRAGMA user_version = 17",),
        ("PRAGMA user_version = 17", "PRAGMA application_id = 7"),
        ("CREATE TABLE mine (x)", f"PRAGMA application_id = {APPLICATION_ID}"),
    ],
    ids=[
        "user-object",
        "foreign-app-id",
        "older-schema",
        "newer-schema",
        "schema-17-no-app-id",
        "schema-17-wrong-app-id",
        "app-id-but-version-0",
    ],
)
def test_opening_rule_refusals_touch_nothing(tmp_path: Path, statements: tuple[str, ...]) -> None:
    path = tmp_path / "foreign.db"
    before = _make_db(path, *statements)
    with pytest.raises(ForeignStore):
        SqliteStore(path)
    assert path.read_bytes() == before
    assert not (tmp_path / "foreign.db-wal").exists()


def test_a_non_sqlite_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"this is not a database, just some text that is long enough" * 20)
    with pytest.raises(ForeignStore):
        SqliteStore(path)
    assert isinstance(ForeignStore("x"), UnsupportedFormat)
    assert not isinstance(ForeignStore("x"), CorruptLog)


def test_tampered_schema_is_corruption(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    SqliteStore(path).close()
    with _raw(path) as conn:
        conn.execute("ALTER TABLE sessions ADD COLUMN extra TEXT")
    with pytest.raises(CorruptLog, match="schema"):
        SqliteStore(path)
    empty = tmp_path / "e.db"
    _make_db(empty, f"PRAGMA application_id = {APPLICATION_ID}", "PRAGMA user_version = 17")
    with pytest.raises(CorruptLog):
        SqliteStore(empty)


def test_schema_is_revalidated_inside_mutating_transactions(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SqliteStore(path)
    store.create(HEADER)
    with _raw(path) as conn:
        conn.execute("PRAGMA user_version = 18")
    with pytest.raises(ForeignStore):
        store.append("s-1", _log()[:2])
    with _raw(path) as conn:
        conn.execute("PRAGMA user_version = 17")
        conn.execute("DELETE FROM persistence_state")
    with pytest.raises(CorruptLog):
        store.append("s-1", _log()[:2])
    with _raw(path) as conn:
        assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 0


# -- P36 round trip -----------------------------------------------------------------------------

_headers = st.fixed_dictionaries(
    {
        "version": st.just(0),
        "id": st.text(min_size=1, max_size=12),
        "createdAt": st.integers(0, 2**53 - 1),
    },
    optional={
        "cwd": st.text(max_size=10).map(lambda s: "/" + s),
        "parentSession": st.text(max_size=5),
        "seedLength": st.integers(0, 99),
        "origin": st.just("subagent"),
        "delegationDepth": st.integers(0, 3),
        "agentPreset": st.text(max_size=5),
    },
)


@pytest.mark.slow
@settings(max_examples=20)
@given(
    header=_headers,
    seed=st.integers(0, 2**16),
    turns=st.integers(1, 4),
    pack=st.booleans(),
)
def test_p36_round_trip_any_batch_split(
    tmp_path_factory: pytest.TempPathFactory,
    header: dict[str, Any],
    seed: int,
    turns: int,
    pack: bool,
) -> None:
    path = tmp_path_factory.mktemp("p36") / "s.db"
    events = _log(seed, turns)
    with SqliteStore(path, pack_chunks=pack) as store:
        _fill(store, events, header, seed)
    with SqliteStore(path) as fresh:
        loaded = fresh.load(header["id"], now=0)
        assert loaded.events == tuple(events), "loaded events differ from the appended ones"
        assert not loaded.repair.needed
        expected = SessionHeader(
            id=header["id"],
            created_at=header["createdAt"],
            cwd=header.get("cwd"),
            parent_session=header.get("parentSession"),
            seed_length=header.get("seedLength"),
            origin=header.get("origin"),
            delegation_depth=header.get("delegationDepth"),
            agent_preset=header.get("agentPreset"),
        )
        assert loaded.header == expected
        assert attrs.evolve(
            loaded.header, delegation_depth=loaded.header.delegation_depth or 0
        ) == (attrs.evolve(expected, delegation_depth=header.get("delegationDepth", 0)))
        assert fresh.list() == (expected,)
        assert fresh.read_from(header["id"], 0) == tuple(events)
    if pack:
        # Packed rows exactly when the log has a run long enough to pack (seeds with one or
        # two deltas a block have none).
        packable = any(type(r) is not Event for r in pack_chunk_rows(events))
        assert any(r[7] == 0 for r in _rows(path, header["id"])) == packable
    else:
        assert len(_rows(path, header["id"])) == len(events)


def test_delegation_depth_absent_is_null_and_zero_stays_zero(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        store.create({"version": 0, "id": "a", "createdAt": 1})
        store.append("a", _log()[:1])
        store.create({"version": 0, "id": "b", "createdAt": 1, "delegationDepth": 0})
        store.append("b", _log()[:1])
        assert [h.delegation_depth for h in store.list()] == [None, 0]
    with _raw(path) as conn:
        depths = conn.execute("SELECT delegation_depth FROM sessions ORDER BY id").fetchall()
    assert depths == [(None,), (0,)]


# -- column encodings (§7.2, §7.3) --------------------------------------------------------------


def test_rows_use_the_column_encodings(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    events = realistic_log(random.Random(4), 3, big_every=1)
    with SqliteStore(path) as store:
        _fill(store, events)
    rows = _rows(path)
    by_type: dict[str, list[tuple[Any, ...]]] = {}
    for row in rows:
        by_type.setdefault(row[2], []).append(row)
    assert {"text-chunks", "tool-call-chunks"} <= by_type.keys()
    for row in by_type["text-chunks"] + by_type["tool-call-chunks"]:
        assert row[7] == 0 and row[5] is None and row[6] is None
    for row in by_type["assistant/message"]:
        assert row[6] == '"append"' and row[7] is None
        seqs = decode_source_seqs(row[5])
        assert seqs == tuple(events[row[1]].source_event_seqs or ())
    results = by_type["tool/result"]
    assert any(isinstance(r[4], bytes) for r in results), "large data was not compressed"
    for row in results:
        if isinstance(row[4], bytes):
            assert decode_data(row[4]) == events[row[1]].data
        assert decode_source_seqs(row[5]) == events[row[1]].source_event_seqs
    for row in by_type["turn/start"]:
        assert isinstance(row[4], str) and row[5] is None and row[6] is None


def test_packed_rows_are_bounded(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    chunks = [
        Event(
            "assistant/chunk",
            s,
            s,
            {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "x" * 900}},
        )
        for s in range(2100)
    ]
    with SqliteStore(path) as store:
        store.create(HEADER)
        store.append("s-1", chunks)
        assert store.read_from("s-1", 0) == tuple(chunks)
    rows = _rows(path)
    members = [len(decode_data(r[4])["texts"]) for r in rows]
    assert max(members) <= 1024 and min(members) >= 3 and sum(members) == 2100
    for row in rows:
        plain = row[4] if isinstance(row[4], str) else None
        if plain is not None:
            assert len(plain.encode()) <= MAX_ROW_DATA_BYTES


# -- create and append (§1, §7.6) ---------------------------------------------------------------


def test_lazy_materialization(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        store.create(HEADER)
        store.append("s-1", [])
        assert store.list() == ()
        with pytest.raises(SessionNotFound):
            store.inspect("s-1")
        with pytest.raises(SessionExists):
            store.create(HEADER)
        store.append("s-1", _log()[:4])
        assert _revision(path) == 1
        with _raw(path) as conn:
            incarnation = conn.execute("SELECT incarnation FROM sessions").fetchone()[0]
        uuid.UUID(incarnation)
        store.append("s-1", _log()[4:6])
        assert _revision(path) == 2
    with SqliteStore(path) as other, pytest.raises(SessionExists):
        other.create(HEADER)


@pytest.mark.parametrize(
    "header",
    [
        {"version": 0, "id": "", "createdAt": 1},
        {"version": 0, "id": "s", "createdAt": -1},
        {"version": 0, "id": "s", "createdAt": 1, "cwd": "rel/ative"},
        {"version": 0, "id": "s", "createdAt": 1, "origin": "human"},
    ],
)
def test_create_refuses_invalid_headers(tmp_path: Path, header: dict[str, Any]) -> None:
    with SqliteStore(tmp_path / "s.db") as store, pytest.raises(SessionHeaderError):
        store.create(header)


def test_append_checks(tmp_path: Path) -> None:
    events = _log()
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        with pytest.raises(SessionNotFound):
            store.append("nope", events[:1])
        with pytest.raises(SessionNotFound):
            store.append("nope", [])
        store.create(HEADER)
        with pytest.raises(SeqMismatch):
            store.append("s-1", events[1:3])
        store.append("s-1", events[:3])
        with pytest.raises(SeqMismatch):
            store.append("s-1", events[4:6])
        with pytest.raises(SeqMismatch):
            store.append("s-1", [events[3], events[5]])
        with pytest.raises(LegacyFormat):
            store.append("s-1", [Event("request/header-delta", 3, 5, {})])
        assert _revision(path) == 1
        store.append("s-1", events[3:])
        assert store.load("s-1", now=0).events == tuple(events)


def test_a_concurrent_writer_gets_seq_mismatch(tmp_path: Path) -> None:
    events = _log()
    path = tmp_path / "s.db"
    with SqliteStore(path) as first, SqliteStore(path) as second:
        first.create(HEADER)
        first.append("s-1", events[:5])
        second.append("s-1", events[5:9])
        with pytest.raises(SeqMismatch):
            first.append("s-1", events[5:7])
        first.append("s-1", events[9:])
        assert second.inspect("s-1").events == tuple(events)
        second.create({**HEADER, "id": "s-2"})
        first.create({**HEADER, "id": "s-2"})
        first.append("s-2", events[:2])
        with pytest.raises(SessionExists):
            second.append("s-2", events[:2])


def test_unknown_types_are_refused_at_append_and_at_load_unless_ignorable(
    tmp_path: Path,
) -> None:
    events = _log(1, 1)
    unknown = Event("vendor/y", len(events) + 1, T0, {})
    with SqliteStore(tmp_path / "s.db") as store:
        _fill(store, events)
        ignorable = Event("vendor/x", len(events), T0, {"k": 1}, ignorable=True)
        store.append("s-1", [ignorable])
        assert store.load("s-1", now=0).events[-1] == ignorable
        with pytest.raises(UnknownEventType, match=r"\(R14a\)"):
            store.append("s-1", [unknown])  # what this store's loader would refuse (R14a)
        assert store.load("s-1", now=0).events[-1] == ignorable
    known = {"vendor/y", *DEFAULT_KNOWN_TYPES}
    with SqliteStore(tmp_path / "s.db", known_types=known) as wider:
        wider.append("s-1", [unknown])
        assert wider.inspect("s-1").events[-1] == unknown
    with SqliteStore(tmp_path / "s.db") as store, pytest.raises(UnsupportedFormat):
        store.load("s-1", now=0)  # read with fewer known types than it was written with


def test_invalid_physical_tail_aborts_the_append(tmp_path: Path) -> None:
    events = _log(2, 2)
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        _fill(store, events[:-1])
        last = len(events) - 2
        with _raw(path) as conn:
            conn.execute("UPDATE events SET data = '{bad' WHERE seq = ?", (last,))
        with pytest.raises(CorruptLog, match="invalid physical tail"):
            store.append("s-1", events[-1:])


# -- repair (§6.3) and P39 ----------------------------------------------------------------------


def test_p39_load_commits_the_repair_exactly_once(tmp_path: Path) -> None:
    events = _log(5, 3)
    prefix = _open_turn_prefix(events)
    closers = interrupted_turn_closers(prefix)
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        _fill(store, prefix)
        revision, rows = _revision(path), _rows(path)
        inspected = store.inspect("s-1")
        assert inspected.events == (*prefix, *closers)
        assert inspected.repair.closers == closers and not inspected.repair.committed
        assert (_revision(path), _rows(path)) == (revision, rows), "inspect wrote something"
        first = store.load("s-1", now=0)
        assert first.events == inspected.events and first.repair.committed
        assert _revision(path) == revision + 1
        assert [r[1] for r in _rows(path)[-len(closers) :]] == [c.seq for c in closers]
        assert all(r[7] is None for r in _rows(path)[-len(closers) :])
        second = store.load("s-1", now=0)
        assert second.events == first.events and not second.repair.needed
        assert _revision(path) == revision + 1


def _insert_garbage(path: Path, seq: int) -> None:
    with _raw(path) as conn:
        conn.execute(
            "INSERT INTO events VALUES "
            "('s-1', ?, 'assistant/chunk', 0, '{garbage', NULL, NULL, NULL)",
            (seq,),
        )


def test_torn_rows_after_the_last_turn_end_are_deleted(tmp_path: Path) -> None:
    events = _log(5, 2)
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        _fill(store, events)
        _insert_garbage(path, len(events))
        _insert_garbage(path, len(events) + 3)
        inspected = store.inspect("s-1")
        assert inspected.repair.torn and inspected.repair.torn_from_seq == len(events)
        assert inspected.repair.dropped_records == 2 and inspected.repair.closers == ()
        assert store.read_from("s-1", 0) == tuple(events)
        loaded = store.load("s-1", now=0)
        assert loaded.events == tuple(events) and loaded.repair.committed
        assert all(r[1] < len(events) for r in _rows(path))
        assert not store.load("s-1", now=0).repair.needed


def test_torn_rows_and_closers_in_one_transaction(tmp_path: Path) -> None:
    events = _log(5, 3)
    prefix = _open_turn_prefix(events)
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        _fill(store, prefix)
        _insert_garbage(path, len(prefix))
        rows = store._read("s-1")[1]  # the torn tail is the row codec's to find
        assert scan_stored_rows(rows)[0] == scan_rows([Row(*r) for r in rows])
        assert scan_stored_rows(rows)[0].torn_from == len(prefix)
        revision = _revision(path)
        loaded = store.load("s-1", now=0)
        assert loaded.events == (*prefix, *interrupted_turn_closers(prefix))
        assert loaded.repair.torn and loaded.repair.closers
        assert _revision(path) == revision + 1
        assert not store.load("s-1", now=0).repair.needed


def test_damage_before_a_turn_end_is_corruption(tmp_path: Path) -> None:
    events = _log(5, 2)
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        _fill(store, events, seed=3)
        with _raw(path) as conn:
            conn.execute("UPDATE events SET data = '{bad' WHERE seq = 1")
        with pytest.raises(CorruptLog):
            store.load("s-1", now=0)
        with pytest.raises(CorruptLog):
            store.read_from("s-1", 0)


def test_adopting_a_live_session(tmp_path: Path) -> None:
    events = _log(5, 3)
    prefix = _open_turn_prefix(events)
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        _fill(store, prefix)
        revision = _revision(path)
        with pytest.raises(LiveSessionOpen):
            store.load("s-1", now=0, adopt_live=True)
        assert _revision(path) == revision


def test_a_repair_planned_on_a_stale_read_starts_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer closes the turn between plan and commit: the load re-plans, adds nothing."""
    events = _log(5, 3)
    prefix = _open_turn_prefix(events)
    rest = events[len(prefix) :]
    path = tmp_path / "s.db"
    with SqliteStore(path) as store, SqliteStore(path) as other:
        _fill(store, prefix)
        real_commit = SqliteStore._commit_repair
        calls = {"n": 0}

        def racing_commit(self: SqliteStore, session_id: str, plan: Any) -> None:
            calls["n"] += 1
            if calls["n"] == 1:
                other.append(session_id, rest)
            real_commit(self, session_id, plan)

        monkeypatch.setattr(SqliteStore, "_commit_repair", racing_commit)
        loaded = store.load("s-1", now=0)
        assert calls["n"] == 1
        assert loaded.events == tuple(events)
        assert not loaded.repair.needed


# -- version refusal, read_from, list -----------------------------------------------------------


@pytest.mark.parametrize(("version", "word"), [(1, "newer"), (-1, "older")])
def test_foreign_format_version(tmp_path: Path, version: int, word: str) -> None:
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        _fill(store, _log(1, 1))
        with _raw(path) as conn:
            conn.execute("UPDATE sessions SET version = ?", (version,))
            conn.execute("UPDATE events SET data = '{bad' WHERE seq = 0")
        with pytest.raises(UnsupportedFormat, match=word) as info:
            store.load("s-1", now=0)
        assert not isinstance(info.value, CorruptLog)


def test_stored_header_is_admitted(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        _fill(store, _log(1, 1))
        with _raw(path) as conn:
            conn.execute("UPDATE sessions SET cwd = 'relative'")
        with pytest.raises(CorruptLog):
            store.load("s-1", now=0)


def test_read_from(tmp_path: Path) -> None:
    events = _log(6, 2)
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        _fill(store, events)
        assert store.read_from("s-1", 0) == tuple(events)
        assert store.read_from("s-1", 9) == tuple(events[9:])
        assert store.read_from("s-1", len(events)) == ()
        assert store.read_from("s-1", 10**6) == ()
        for bad in (-1, True, 0.5, 2**53, None):
            with pytest.raises(StoreError):
                store.read_from("s-1", bad)  # type: ignore[arg-type]
        with pytest.raises(SessionNotFound):
            store.read_from("nope", 0)


def test_list_is_sorted_and_cascade_deletes(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        for sid in ("b", "a", "c"):
            store.create({"version": 0, "id": sid, "createdAt": 9})
            store.append(sid, _log(1, 1)[:3])
        store.create({"version": 0, "id": "pending", "createdAt": 9})
        assert [h.id for h in store.list()] == ["a", "b", "c"]
        store._conn.execute("DELETE FROM sessions WHERE id = 'b'")
        assert (
            store._conn.execute("SELECT count(*) FROM events WHERE session_id = 'b'").fetchone()[0]
            == 0
        )


@pytest.mark.parametrize(
    ("damage", "error"),
    [
        ("cwd = 'relative/dir'", CorruptLog),  # H7: not an absolute path
        ("cwd = CAST(x'ff' AS TEXT)", CorruptLog),  # TEXT that is not UTF-8
        ("version = 3", UnsupportedFormat),
    ],
)
def test_list_fails_on_a_damaged_header_and_session_ids_lists_past_it(
    tmp_path: Path, damage: str, error: type[Exception]
) -> None:
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        for sid in ("a", "b", "c"):
            _fill(store, _log(1, 1), header={**HEADER, "id": sid})
        assert store.session_ids() == tuple(h.id for h in store.list()) == ("a", "b", "c")
    with _raw(path) as conn:
        conn.execute(f"UPDATE sessions SET {damage} WHERE id = 'b'")
    with SqliteStore(path, read_only=True) as store:
        with pytest.raises(error, match=r"session '?b'?"):  # all or nothing, naming the session
            store.list()
        assert store.session_ids() == ("a", "b", "c")
        assert [store.inspect(sid).header.id for sid in ("a", "c")] == ["a", "c"]
        with pytest.raises(error):
            store.inspect("b")


@pytest.mark.parametrize(
    ("damage", "error"),
    [
        ("cwd = 'relative/dir'", CorruptLog),  # H7: not an absolute path
        ("cwd = CAST(x'ff' AS TEXT)", CorruptLog),  # TEXT that is not UTF-8
        ("version = 3", UnsupportedFormat),
    ],
)
def test_list_readable_lists_past_a_damaged_header_naming_the_session(
    tmp_path: Path, damage: str, error: type[Exception]
) -> None:
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        for sid in ("a", "b", "c"):
            _fill(store, _log(1, 1), header={**HEADER, "id": sid})
        assert store.list_readable() == SessionListing(store.list(), ())
    with _raw(path) as conn:
        conn.execute(f"UPDATE sessions SET {damage} WHERE id = 'b'")
    with SqliteStore(path, read_only=True) as store:
        listing = store.list_readable()
        with pytest.raises(error):
            store.list()  # unchanged: all or nothing
    assert [h.id for h in listing.headers] == ["a", "c"]
    (bad,) = listing.unreadable
    assert bad.location == "b" and type(bad.error) is error


def test_list_readable_reads_no_event_row(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        _fill(store, _log(1, 1))
    _insert_garbage(path, 10**6)  # damaged rows: inspect refuses them, the listing never sees them
    with _raw(path) as conn:
        conn.execute("UPDATE events SET data = '{garbage' WHERE seq = 1")
    with SqliteStore(path, read_only=True) as store:
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        listing = store.list_readable()
        store._conn.set_trace_callback(None)
        with pytest.raises(CorruptLog):
            store.inspect("s-1")
    assert [h.id for h in listing.headers] == ["s-1"] and listing.unreadable == ()
    assert statements and not [sql for sql in statements if "FROM events" in sql]


def test_list_readable_names_an_id_that_is_not_utf8_by_its_bytes(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        for sid in ("a", "b"):
            _fill(store, _log(1, 1), header={**HEADER, "id": sid})
    with _raw(path) as conn:
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute("UPDATE sessions SET id = CAST(x'62ff' AS TEXT) WHERE id = 'b'")
    with SqliteStore(path, read_only=True) as store:
        listing = store.list_readable()
    assert [h.id for h in listing.headers] == ["a"]
    (bad,) = listing.unreadable
    assert bad.location == "b\udcff"
    assert isinstance(bad.error, CorruptLog) and "not UTF-8" in str(bad.error)


def test_session_ids_refuses_an_id_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        _fill(store, _log(1, 1))
    with _raw(path) as conn:
        conn.execute("UPDATE sessions SET id = CAST(x'ff' AS TEXT)")
    with SqliteStore(path, read_only=True) as store, pytest.raises(CorruptLog, match="UTF-8"):
        store.session_ids()


def test_read_only_store_leaves_a_rollback_journal_database_byte_identical(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    full = _log()
    last_step_start = max(e.seq for e in full if e.type == "step/start")
    events = full[: last_step_start + 1]
    with SqliteStore(path) as store:
        _fill(store, events)
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA journal_mode = DELETE")
    before = path.read_bytes()
    with SqliteStore(path, read_only=True) as store:
        seen = store.inspect(HEADER["id"], now=0)
        assert seen.repair.closers, "the open turn would be closed by a load"
        with pytest.raises(StoreError, match="read-only"):
            store.load(HEADER["id"], now=0)
        with pytest.raises(StoreError, match="read-only"):
            store.append(HEADER["id"], [])
    assert path.read_bytes() == before
    assert not (tmp_path / "sessions.db-wal").exists()


def test_read_only_store_refuses_an_empty_database(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()
    with pytest.raises(ForeignStore):
        SqliteStore(path, read_only=True)


# -- text columns hold every string -------------------------------------------------------------

LONE = {
    "version": 0,
    "id": "s-\ud800-lone",
    "createdAt": T0,
    "cwd": "/projects/\udc00demo",
    "parentSession": "p\udbff",
    "agentPreset": "preset\ud83d",
}


def _odd_typed(events: list[Event], odd_type: str) -> list[Event]:
    """The log plus one ignorable event of an unknown type spelled `odd_type`."""
    extra = Event(type=odd_type, seq=len(events), time=T0, data={"n": 1}, ignorable=True)
    return [*events, extra]


def test_lone_surrogates_in_the_id_cwd_header_and_type_columns_round_trip(tmp_path: Path) -> None:
    # SQLite TEXT is UTF-8, and binding a lone surrogate raised UnicodeEncodeError;
    # JsonlStore stores these legal strings, so SqliteStore must too.
    path = tmp_path / "s.db"
    events = _odd_typed(_log(1, 1), "x/odd\udfff")
    with SqliteStore(path) as store:
        created = store.create(LONE)
        store.append(LONE["id"], events)
    with SqliteStore(path) as store:
        assert store.list() == (created,)
        loaded = store.load(LONE["id"], now=0)
        assert loaded.header == created and loaded.header.cwd == LONE["cwd"]
        assert [e.type for e in loaded.events] == [e.type for e in events]
        assert loaded.events == tuple(events)
        assert store.read_from(LONE["id"], len(events) - 1) == (events[-1],)
    with SqliteStore(path, read_only=True) as store:
        assert store.inspect(LONE["id"]).events == tuple(events)
    with _raw(path) as conn:
        assert conn.execute("SELECT typeof(id), typeof(cwd) FROM sessions").fetchall() == [
            ("text", "text")
        ]


def test_a_surrogate_pair_given_as_two_code_points_is_the_character_it_encodes(
    tmp_path: Path,
) -> None:
    # A high surrogate followed by a low one is, in UTF-16 (the format's strings,
    # JavaScript's), the astral character; stores keep the joined spelling only.
    split, joined = "s-\ud83d\ude42", "s-\U0001f642"
    header = {**HEADER, "id": split, "cwd": "/p/\ud83d\ude42"}
    events = _odd_typed(_log(1, 1), "x/\ud83d\ude42")
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        created = store.create(header)
        assert (created.id, created.cwd) == (joined, "/p/\U0001f642")
        with pytest.raises(SessionExists):
            store.create({**header, "id": joined})
        store.append(split, events[:3])
        store.append(joined, events[3:])
    with SqliteStore(path) as store:
        assert [h.id for h in store.list()] == [joined]
        for spelling in (split, joined):
            loaded = store.load(spelling, now=0)
            assert loaded.header == created
            assert loaded.events[-1].type == "x/\U0001f642"
            assert loaded.events[:-1] == tuple(events[:-1])


def test_text_that_is_not_utf8_is_corruption_not_a_sqlite_error(tmp_path: Path) -> None:
    # Python's sqlite3 raised OperationalError("Could not decode to UTF-8") from the fetch.
    path = tmp_path / "s.db"
    events = _log(1, 2)
    with SqliteStore(path) as store:
        _fill(store, events)
    with _raw(path) as conn:
        conn.execute("UPDATE events SET data = CAST(x'7b22ff7d' AS TEXT) WHERE seq = 1")
    with SqliteStore(path) as store, pytest.raises(CorruptLog, match="seq 1"):
        store.inspect(HEADER["id"])
    with _raw(path) as conn:
        conn.execute("UPDATE sessions SET cwd = CAST(x'2fff' AS TEXT)")
    with SqliteStore(path) as store, pytest.raises(CorruptLog):
        store.list()


# -- read-only opening and damage ---------------------------------------------------------------


def _sidecars(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name != path.name)


def _wal_database(directory: Path, events: list[Event] | None = None) -> Path:
    directory.mkdir(exist_ok=True)
    path = directory / "sessions.db"
    with SqliteStore(path) as store:
        _fill(store, _log(1, 2) if events is None else events)
    assert _sidecars(path) == [], "the last connection of a writer removes -wal and -shm"
    return path


def test_read_only_use_leaves_no_wal_or_shm_behind(tmp_path: Path) -> None:
    # A `mode=ro` connection cannot checkpoint, so it left the -wal and -shm files it
    # needed behind, although inspect/verify "write nothing".
    path = _wal_database(tmp_path / "db")
    before = path.read_bytes()
    with SqliteStore(path, read_only=True) as store:
        assert [h.id for h in store.list()] == [HEADER["id"]]
        assert store.inspect(HEADER["id"]).events
        assert store.read_from(HEADER["id"], 0)
    assert _sidecars(path) == []
    assert path.read_bytes() == before
    foreign = tmp_path / "foreign" / "cache.db"
    foreign.parent.mkdir()
    _make_db(foreign, "PRAGMA journal_mode = WAL", "CREATE TABLE t (x)")
    with pytest.raises(ForeignStore):
        SqliteStore(foreign, read_only=True)
    assert _sidecars(foreign) == []


def test_read_only_use_keeps_a_write_ahead_log_that_holds_data(tmp_path: Path) -> None:
    # A writer that is still open (or crashed) owns its -wal: a reader must neither
    # checkpoint it nor delete it, and must see what it holds.
    path = _wal_database(tmp_path / "db")
    writer = SqliteStore(path)
    writer.create({**HEADER, "id": "later"})
    writer.append("later", _log(2, 1))
    try:
        with SqliteStore(path, read_only=True) as store:
            assert [h.id for h in store.list()] == ["later", HEADER["id"]]
        assert (path.parent / "sessions.db-wal").stat().st_size > 0
        writer.append("later", [])
    finally:
        writer.close()
    assert _sidecars(path) == []


def _unprivileged(directory: Path, work: Any) -> Any:
    """Run `work()` with `directory` (and what it holds) read-only for the caller.

    Root ignores permission bits, so as root `work` runs in a forked child that
    first drops to an unprivileged uid; its result comes back pickled.
    """
    directory.chmod(0o555)
    try:
        if os.geteuid() != 0:
            return work()
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports through the pipe
            os.close(reader)
            try:
                os.setgid(65534)
                os.setuid(65534)
                payload = pickle.dumps(("ok", work()))
            except BaseException as exc:
                payload = pickle.dumps(("raised", f"{type(exc).__name__}: {exc}"))
            with os.fdopen(writer, "wb") as out:
                out.write(payload)
            os._exit(0)
        os.close(writer)
        with os.fdopen(reader, "rb") as got:
            status, value = pickle.loads(got.read())
        os.waitpid(pid, 0)
        if status != "ok":
            raise AssertionError(f"unprivileged reader raised {value}")
        return value
    finally:
        directory.chmod(0o755)


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A directory an unprivileged uid can reach (pytest's tmp_path is owner-only)."""
    path = Path(tempfile.mkdtemp(prefix="kernel-ro-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        for p in path.rglob("*"):
            if p.is_dir():
                p.chmod(0o755)
        shutil.rmtree(path)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs POSIX permissions")
def test_read_only_store_reads_a_healthy_database_in_a_read_only_directory(
    shared_tmp: Path,
) -> None:
    # WAL readers need a -shm file; `mode=ro` cannot create one in a read-only directory,
    # so a healthy database was refused. With no write-ahead log to miss, `immutable=1`
    # reads the database file alone.
    path = _wal_database(shared_tmp / "db")
    expected = _log(1, 2)

    def read() -> tuple[int, list[str], bool]:
        with SqliteStore(path, read_only=True) as store:
            seen = store.inspect(HEADER["id"])
            assert [h.id for h in store.list()] == [HEADER["id"]]
        return len(seen.events), _sidecars(path), store.immutable

    assert _unprivileged(path.parent, read) == (len(expected), [], True)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs POSIX permissions")
def test_read_only_directory_with_a_write_ahead_log_but_no_index_is_refused(
    shared_tmp: Path,
) -> None:
    # `immutable=1` ignores the -wal file: it would silently drop committed transactions.
    path = _wal_database(shared_tmp / "db")
    crashed = path.with_name("crashed.db")
    writer = SqliteStore(path)
    writer._conn.execute("PRAGMA wal_autocheckpoint = 0")
    writer.create({**HEADER, "id": "later"})
    writer.append("later", _log(2, 1))
    for suffix in ("", "-wal"):  # what a crash leaves, minus the index
        shutil.copyfile(f"{path}{suffix}", f"{crashed}{suffix}")
    writer.close()
    assert (shared_tmp / "db" / "crashed.db-wal").stat().st_size > 0

    def read() -> str:
        try:
            SqliteStore(crashed, read_only=True).close()
        except StoreError as exc:
            return f"StoreError: {exc}"
        return "opened"

    assert "write-ahead log" in _unprivileged(crashed.parent, read)


def _truncated(path: Path, size: int) -> Path:
    with open(path, "r+b") as f:
        f.truncate(size)
    return path


def _page_damaged(path: Path) -> Path:
    page = 4096
    count = path.stat().st_size // page
    with open(path, "r+b") as f:
        for n in range(1, count):  # every page but the first (the header and the schema)
            f.seek(n * page)
            f.write(b"\x0d\xff\xff\xff\xff\xff\xff\xff")
    return path


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: _truncated(p, 50),
        lambda p: _truncated(p, 4096),
        lambda p: _truncated(p, p.stat().st_size // 2),
        _page_damaged,
    ],
    ids=["truncated-in-header", "truncated-to-one-page", "truncated-half", "pages-damaged"],
)
@pytest.mark.parametrize("read_only", [True, False], ids=["read-only", "read-write"])
def test_a_damaged_database_is_corrupt_however_it_was_damaged(
    tmp_path: Path, damage: Any, read_only: bool
) -> None:
    # A truncated database was ForeignStore ("unsupported") while a page-corrupted one
    # raised sqlite3.DatabaseError (reported "invalid"). Both are damage to stored data:
    # CorruptLog, docs/format/persistence.md's family for it.
    path = damage(_wal_database(tmp_path / "db", _log(1, 6)))
    with pytest.raises(CorruptLog, match="damaged"), SqliteStore(path, read_only=read_only) as s:
        s.inspect(HEADER["id"])


# -- the typed plan of stored rows --------------------------------------------------------------


def _plans(store: SqliteStore, session_id: str) -> tuple[Any, Any, Any]:
    """The typed plans of a stored session (rows spelled as lines; rows decoded to events)
    and the exact one, over the same rows."""
    from kernel.storage.jsonl import RawScan, plan_load
    from kernel.storage.load import exact_wire as _wire
    from kernel.storage.sqlite_rows import Row, row_lines, scan_rows
    from kernel.storage.typed.lines import plan_decoded_events, plan_events, scan_row_lines
    from kernel.store.sqlite import _header_record

    session, rows = store._read(session_id)
    record = _header_record(session)
    lines = row_lines(rows)
    typed = None if lines is None else scan_row_lines(lines)
    from_lines = (
        None
        if typed is None
        else plan_events(record, typed, session_id=session_id, known_types=store.known_types)
    )
    events = list(scan_rows([Row(*r) for r in rows]).events)
    decoded = plan_decoded_events(
        record, events, session_id=session_id, known_types=store.known_types
    )
    records = [_wire(e) for e in events]
    raw_scan = RawScan(header=record, records=records, committed_bytes=0, total_bytes=0)
    try:
        exact: Any = plan_load(raw_scan, session_id=session_id, known_types=store.known_types)
        assert not exact[3]  # nothing in these current-shape logs is normalized
        exact = exact[:3]
    except CorruptLog as exc:
        exact = exc
    return from_lines, decoded, exact


@pytest.mark.slow
@settings(max_examples=10)
@given(seed=st.integers(0, 2**16), turns=st.integers(1, 3), pack=st.booleans(), cut=st.booleans())
def test_stored_rows_are_planned_as_they_are_with_the_exact_result(
    tmp_path_factory: pytest.TempPathFactory, seed: int, turns: int, pack: bool, cut: bool
) -> None:
    events = _log(seed, turns)
    if cut and any(e.type == "tool/call" for e in events):
        events = _open_turn_prefix(events)
    path = tmp_path_factory.mktemp("typed") / "s.db"
    with SqliteStore(path, pack_chunks=pack) as store:
        _fill(store, events, seed=seed)
        from_lines, decoded, exact = _plans(store, "s-1")
        for typed in (from_lines, decoded):
            assert typed is not None, "an admissible stored session left to the exact pipeline"
            header, planned, closers = typed
            assert (header, planned, closers) == exact
            # Written back, both give the same envelopes, members in the same order.
            assert [list(event_to_wire(e)) for e in planned] == [
                list(event_to_wire(e)) for e in exact[1]
            ]
            assert [thaw(e.data) for e in planned] == [thaw(e.data) for e in exact[1]]
        assert store.load("s-1", now=0).events == exact[1]
        # read_from and the repair transaction take the typed scan of the lines, and read
        # what the row codec reads
        rows = store._read("s-1")[1]
        lines = row_lines(rows)
        assert lines is not None and scan_row_lines(lines) is not None
        assert scan_stored_rows(rows)[0] == scan_rows([Row(*r) for r in rows])
        assert store.read_from("s-1", 0) == _codec_read(store, "s-1")
        assert store.read_from("s-1", 3) == _codec_read(store, "s-1")[3:]


def _codec_read(store: SqliteStore, session_id: str) -> tuple[Event, ...]:
    """`read_from(session_id, 0)` as the row codec alone reads it."""
    return scan_rows([Row(*r) for r in store._read(session_id)[1]]).events


def test_a_stored_rule_violation_is_left_to_the_exact_pipeline(tmp_path: Path) -> None:
    events = _log(3, 2)
    first_user = next(e.seq for e in events if e.type == "user/message")
    with SqliteStore(tmp_path / "s.db") as store:
        _fill(store, events)
        with _raw(tmp_path / "s.db") as conn:
            conn.execute(  # a user message that claims the assistant role (R10b)
                'UPDATE events SET data = replace(data, \'"role":"user"\', '
                '\'"role":"assistant"\') WHERE seq = ?',
                (first_user,),
            )
        from_lines, decoded, exact = _plans(store, "s-1")
        assert from_lines is None and decoded is None and isinstance(exact, CorruptLog)
        with pytest.raises(CorruptLog) as info:
            store.load("s-1", now=0)
        assert str(info.value) == str(exact) and "R10b" in str(info.value.__cause__)
        # read_from admits nothing: it reads the rows as the row codec does
        lines = row_lines(store._read("s-1")[1])
        assert lines is not None and scan_row_lines(lines) is None
        assert store.read_from("s-1", 0) == _codec_read(store, "s-1")
        assert len(store.read_from("s-1", 0)) == len(events)


def test_a_read_only_store_creates_and_changes_nothing_beside_a_closed_database(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        _fill(store, _log(1, 1))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.db"]
    before = (path.read_bytes(), path.stat().st_mtime_ns, tmp_path.stat().st_mtime_ns)
    with SqliteStore(path, read_only=True) as store:
        assert store.immutable
        assert sorted(p.name for p in tmp_path.iterdir()) == ["s.db"]  # no -wal, no -shm
        assert store.inspect("s-1").events and store.list()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.db"]
    assert (path.read_bytes(), path.stat().st_mtime_ns, tmp_path.stat().st_mtime_ns) == before


def test_a_read_only_store_reads_beside_an_open_writer(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SqliteStore(path) as writer:
        _fill(writer, _log(1, 1))
        more = Event("session/title", len(_log(1, 1)), T0, {"title": "t"})
        writer.append("s-1", [more])  # committed to the write-ahead log, not yet checkpointed
        with SqliteStore(path, read_only=True) as reader:
            assert not reader.immutable
            assert reader.read_from("s-1", 0)[-1] == more
