"""A repair destroys no byte (docs/format/persistence.md §6.5, Decisions 14 and 16).

Before a repair cuts a torn tail it keeps the removed bytes in a quarantine file beside
the log; the log's first `offset` bytes and the quarantine are the original bytes, and
`undo_repair` puts them back. The diagnosis names every complete record the removed
bytes hold, and a strict store refuses to cut intact records after damage.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from kernel import SessionLog, write_jsonl
from kernel.cli import main
from kernel.errors import CorruptLog
from kernel.storage.quarantine import (
    TailRecord,
    decode_row_quarantine,
    describe_tail_records,
    parse_quarantine_name,
    records_in_tail,
    restored_bytes,
)
from kernel.storage.zstd import write_jsonl_zstd
from kernel.store import JsonlStore, SqliteStore
from kernel.store.jsonl import inspect_file, repair_file, undo_repair
from kernel.values.events import APPEND

HEADER = {"version": 0, "id": "s", "createdAt": 1}
ROOT_TESTS = Path(__file__).resolve().parents[1]


def _message(i: int) -> dict[str, object]:
    return {
        "id": f"u{i}",
        "role": "user",
        "source": {"kind": "user"},
        "content": [{"type": "text", "text": f"message {i}"}],
    }


def _open_turn(messages: int = 4) -> SessionLog:
    log = SessionLog.empty().append("turn/start", {"turn": 1}, time=1)
    log = log.append("step/start", {"turn": 1, "step": 1}, time=2)
    for i in range(messages):
        log = log.append("user/message", _message(i), time=3 + i, surface_op=APPEND)
    return log


def _turn_end_line(seq: int) -> bytes:
    return (
        b'{"type":"turn/end","seq":%d,"time":99,"data":{"turn":1,"reason":{"kind":"completed"}}}'
        % seq
    )


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _quarantines(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if parse_quarantine_name(p.name))


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _assert_recoverable(log: Path, original: bytes) -> None:
    """The original bytes are the log itself, or its kept prefix plus the quarantine."""
    current = log.read_bytes()
    kept = _quarantines(log.parent)
    if not kept:  # nothing was removed: at most the closers were appended
        assert current.startswith(original)
        return
    assert len(kept) == 1, kept
    _, offset, _ = parse_quarantine_name(kept[0].name)  # type: ignore[misc]
    assert restored_bytes(current, offset, kept[0].read_bytes()) == original


# -- the diagnosis ------------------------------------------------------------------------------


def test_a_final_record_that_lacks_only_its_newline_is_named() -> None:
    prefix = write_jsonl(HEADER, _open_turn(1).events)
    data = prefix + _turn_end_line(3)
    records = records_in_tail(data, len(prefix))
    assert records == (TailRecord(3, "turn/end", len(prefix), len(data), terminated=False),)
    assert describe_tail_records(records) == (
        f"the torn tail holds 1 complete record: turn/end, seq 3, bytes {len(prefix)}-"
        f"{len(data)} (lacks its newline)"
    )


def test_a_record_glued_onto_an_interrupted_write_is_found_at_its_own_offset() -> None:
    prefix = write_jsonl(HEADER, _open_turn(1).events)
    interrupted = b'{"type":"user/message","seq":3,"ti'
    data = prefix + interrupted + _turn_end_line(3) + b"\n"
    (record,) = records_in_tail(data, len(prefix))
    assert (record.type, record.seq, record.terminated) == ("turn/end", 3, True)
    assert record.start == len(prefix) + len(interrupted) and record.end == len(data)


def test_intact_records_after_damage_are_counted_with_their_seq_range(tmp_path: Path) -> None:
    data = write_jsonl(HEADER, _open_turn(6).events)
    lines = _lines(data)
    lines[3] = lines[3][:-5] + b"#####"  # damage the record of seq 2, keep every later one
    damaged = b"\n".join(lines)
    session = inspect_file(_write(tmp_path / "log.jsonl", damaged))
    records = session.repair.tail_records
    assert [r.seq for r in records] == [3, 4, 5, 6, 7]
    assert all(r.terminated for r in records)
    assert "5 complete records spanning seqs 3-7" in describe_tail_records(records)
    assert (tmp_path / "log.jsonl").read_bytes() == damaged  # inspect writes nothing


# -- repair keeps what it removes; undo puts it back --------------------------------------------


@pytest.mark.parametrize("shape", ["unterminated", "glued", "damage-then-intact"])
def test_repair_quarantines_the_torn_tail_and_undo_restores_the_exact_bytes(
    tmp_path: Path, shape: str
) -> None:
    events = _open_turn(4).events
    prefix = write_jsonl(HEADER, events)
    if shape == "unterminated":
        original = prefix + _turn_end_line(len(events))
    elif shape == "glued":
        original = prefix + b'{"type":"user/mes' + _turn_end_line(len(events)) + b"\n"
    else:
        lines = _lines(prefix)
        lines[2] = b"not json"
        original = b"\n".join(lines)
    log = _write(tmp_path / "session.jsonl", original)
    report = repair_file(log, now=1)
    assert report.committed and report.quarantine is not None
    kept = Path(report.quarantine)
    name, offset, _ = parse_quarantine_name(kept.name)  # type: ignore[misc]
    assert (name, offset) == ("session.jsonl", report.truncate_to)
    assert kept.read_bytes() == original[offset:]
    assert report.tail_records == records_in_tail(original, offset)
    _assert_recoverable(log, original)
    assert not repair_file(log, now=2).needed  # repaired once
    assert undo_repair(kept) == log
    assert log.read_bytes() == original
    assert _quarantines(tmp_path) == []


def test_zstd_repair_quarantines_the_torn_frame(tmp_path: Path) -> None:
    events = _open_turn(4).events
    original = write_jsonl_zstd(HEADER, events)[:-7]  # the last frame torn
    log = _write(tmp_path / "session.jsonl.zstd", original)
    report = repair_file(log, now=1)
    assert report.torn and report.quarantine is not None
    _assert_recoverable(log, original)
    undo_repair(report.quarantine)
    assert log.read_bytes() == original


def test_a_store_load_names_its_quarantine(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "root")
    store.create(HEADER)
    events = list(_open_turn(3).events)
    store.append("s", events)
    path = store.path_of("s")
    original = path.read_bytes() + b'{"type":"turn/e'
    path.write_bytes(original)
    assert store.inspect("s").repair.quarantine is None  # nothing written yet
    loaded = store.load("s", now=1)
    assert loaded.repair.quarantine is not None
    _assert_recoverable(path, original)


def test_undo_is_refused_once_the_log_has_grown_past_its_repair(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "root")
    store.create(HEADER)
    events = list(_open_turn(3).events)
    store.append("s", events)
    path = store.path_of("s")
    path.write_bytes(path.read_bytes() + b"torn")
    loaded = store.load("s", now=1)
    store.append(
        "s",
        [SessionLog.restore(loaded.events).append("turn/start", {"turn": 2}, time=9).events[-1]],
    )
    before = path.read_bytes()
    with pytest.raises(CorruptLog, match="changed after the repair"):
        undo_repair(loaded.repair.quarantine)  # type: ignore[arg-type]
    assert path.read_bytes() == before


def test_undo_refuses_a_quarantine_whose_bytes_do_not_match_its_name(tmp_path: Path) -> None:
    original = write_jsonl(HEADER, _open_turn(2).events) + b"torn"
    log = _write(tmp_path / "session.jsonl", original)
    report = repair_file(log, now=1)
    kept = Path(report.quarantine)  # type: ignore[arg-type]
    kept.write_bytes(b"other")
    repaired = log.read_bytes()
    with pytest.raises(CorruptLog, match="does not match the hash"):
        undo_repair(kept)
    assert log.read_bytes() == repaired


# -- strict tail: refuse instead of cutting intact records --------------------------------------


def test_a_strict_tail_refuses_to_cut_intact_records_after_damage(tmp_path: Path) -> None:
    lines = _lines(write_jsonl(HEADER, _open_turn(5).events))
    lines[3] = b"{damaged"
    original = b"\n".join(lines)
    log = _write(tmp_path / "session.jsonl", original)
    with pytest.raises(CorruptLog, match=r"complete records spanning seqs 3-6.*strict tail"):
        repair_file(log, now=1, strict_tail=True)
    assert log.read_bytes() == original and _quarantines(tmp_path) == []
    # A torn final record alone is an ordinary crash: strict or not, it is repaired.
    cut = _write(tmp_path / "cut.jsonl", write_jsonl(HEADER, _open_turn(1).events) + b'{"ty')
    assert repair_file(cut, now=1, strict_tail=True).committed


def test_a_strict_store_refuses_the_load(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "root", strict_tail=True)
    store.create(HEADER)
    store.append("s", list(_open_turn(5).events))
    path = store.path_of("s")
    lines = _lines(path.read_bytes())
    lines[3] = b"{damaged"
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(CorruptLog, match="strict tail"):
        store.load("s", now=1)
    assert len(JsonlStore(tmp_path / "root").load("s", now=1).events) == 4  # prefix + closers


# -- the command line ---------------------------------------------------------------------------


def _main(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, Any]:
    code = main([str(arg) for arg in args])
    out = capsys.readouterr().out
    return code, json.loads(out) if "--json" in map(str, args) else out


def test_the_command_names_the_quarantine_and_undoes_the_repair(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = write_jsonl(HEADER, _open_turn(2).events)
    original = prefix + _turn_end_line(4)
    log = _write(tmp_path / "session.jsonl", original)
    code, inspected = _main(capsys, "inspect", log, "--json")
    assert code == 0
    (only,) = inspected if isinstance(inspected, list) else [inspected]
    assert only["tail"]["completeRecords"] == [
        {
            "seq": 4,
            "type": "turn/end",
            "start": len(prefix),
            "end": len(original),
            "terminated": False,
            "events": 1,
        }
    ]
    code, repaired = _main(capsys, "repair", log, "--json")
    assert code == 0 and [repaired["quarantine"]] == [str(p) for p in _quarantines(tmp_path)]
    assert "lacks its newline" in repaired["completeRecordsSummary"]
    code, out = _main(capsys, "inspect", log)
    assert "quarantined by a repair" in out
    code, undone = _main(capsys, "repair", "--undo", repaired["quarantine"], "--json")
    assert code == 0 and undone["restored"] == str(log)
    assert log.read_bytes() == original


def test_the_command_refuses_a_strict_tail_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _lines(write_jsonl(HEADER, _open_turn(5).events))
    lines[3] = b"{damaged"
    original = b"\n".join(lines)
    log = _write(tmp_path / "session.jsonl", original)
    code = main(["repair", str(log), "--strict-tail"])
    captured = capsys.readouterr()
    assert code == 1 and "strict tail" in captured.err + captured.out
    assert log.read_bytes() == original and _quarantines(tmp_path) == []


# -- SIGKILL at every syscall of a repair -------------------------------------------------------

_REPAIR_UNDER_KILL = r"""
import os, signal, sys
log, kill_at, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
from kernel.store.jsonl import repair_file, undo_repair
calls = 0
def counted(real):
    def call(*args, **kwargs):
        global calls
        calls += 1
        if calls == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args, **kwargs)
    return call
for name in ("write", "fsync", "ftruncate", "link", "unlink", "open", "close"):
    setattr(os, name, counted(getattr(os, name)))
if mode == "repair":
    repair_file(log, now=1)
else:
    undo_repair(mode)
print("done", calls)
"""


def _run(log: Path, kill_at: int, mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _REPAIR_UNDER_KILL, str(log), str(kill_at), mode],
        capture_output=True,
        text=True,
        cwd=ROOT_TESTS.parent,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL")
@pytest.mark.parametrize("zstd", [False, True], ids=["plain", "zstd"])
def test_the_original_bytes_survive_a_kill_at_every_syscall_of_repair_and_undo(
    tmp_path: Path, zstd: bool
) -> None:
    events = _open_turn(4).events
    if zstd:
        original = write_jsonl_zstd(HEADER, events)[:-7]
        name = "session.jsonl.zstd"
    else:
        original = write_jsonl(HEADER, events) + _turn_end_line(len(events))
        name = "session.jsonl"
    kill_at = 1
    while True:
        work = tmp_path / f"k{kill_at}"
        work.mkdir()
        log = _write(work / name, original)
        result = _run(log, kill_at, "repair")
        finished = result.returncode == 0
        assert finished or result.returncode == -signal.SIGKILL, result.stderr
        _assert_recoverable(log, original)
        # After any kill, the next repair completes, and undoing it gives the original back.
        report = repair_file(log, now=1)
        kept = report.quarantine or next(iter(_quarantines(work)), None)
        if kept is not None:
            undo_repair(kept)
        assert log.read_bytes() == original, kill_at
        if finished:
            break
        kill_at += 1
    assert kill_at > 5  # the repair made several syscalls, each one a kill point
    # And undo itself, killed at each of its syscalls, never loses the quarantined bytes.
    kill_at = 1
    while True:
        work = tmp_path / f"u{kill_at}"
        work.mkdir()
        log = _write(work / name, original)
        report = repair_file(log, now=1)
        kept = Path(report.quarantine)  # type: ignore[arg-type]
        result = _run(log, kill_at, str(kept))
        assert result.returncode in (0, -signal.SIGKILL), result.stderr
        if result.returncode == 0:
            assert log.read_bytes() == original
            break
        if kept.exists():  # killed before the quarantine was removed: it can be undone again
            _assert_recoverable(log, original)
            undo_repair(kept)
        assert log.read_bytes() == original, kill_at
        kill_at += 1


# -- SQLite: the removed rows are kept beside the database --------------------------------------


def _all_rows(path: Path) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(
            "SELECT session_id, seq, typeof(data), CAST(data AS BLOB), type, time, "
            "source_event_seqs, surface_op, ignorable FROM events ORDER BY session_id, seq"
        ).fetchall()


def _damaged_database(tmp_path: Path) -> tuple[Path, list[tuple[object, ...]]]:
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        store.create(HEADER)
        store.append("s", list(_open_turn(5).events))
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("UPDATE events SET data = '{bad' WHERE seq = 4")  # torn rows from seq 4
    return path, _all_rows(path)


def test_sqlite_repair_keeps_the_removed_rows_and_undo_restores_them(tmp_path: Path) -> None:
    path, original = _damaged_database(tmp_path)
    with SqliteStore(path) as store:
        report = store.load("s", now=1).repair
        assert report.torn and report.torn_from_seq == 4 and report.quarantine is not None
        kept = Path(report.quarantine)
        rows = decode_row_quarantine(kept.read_bytes()).rows  # type: ignore[union-attr]
        assert [cells[0] for cells in rows] == [("integer", 4), ("integer", 5), ("integer", 6)]
        assert kept.parent == tmp_path and parse_quarantine_name(kept.name)[:2] == ("s.db", 4)  # type: ignore[index]
        assert _all_rows(path) != original
        assert store.undo_repair(kept) == "s"
    assert _all_rows(path) == original
    assert not kept.exists()
    with SqliteStore(path) as store:  # repaired again: the same rows kept again
        again = store.load("s", now=1).repair
    assert again.torn_from_seq == 4 and again.quarantine is not None
    assert decode_row_quarantine(Path(again.quarantine).read_bytes()).rows == rows  # type: ignore[union-attr]


def test_sqlite_undo_is_refused_once_the_session_moved_on(tmp_path: Path) -> None:
    path, _ = _damaged_database(tmp_path)
    with SqliteStore(path) as store:
        loaded = store.load("s", now=1)
        more = SessionLog.restore(loaded.events).append("turn/start", {"turn": 2}, time=9)
        store.append("s", [more.events[-1]])
        before = _all_rows(path)
        with pytest.raises(CorruptLog, match="changed after its repair"):
            store.undo_repair(loaded.repair.quarantine)  # type: ignore[arg-type]
    assert _all_rows(path) == before


def test_sqlite_rows_are_kept_before_the_repair_transaction_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, original = _damaged_database(tmp_path)

    def fail(self: SqliteStore, session_id: str) -> None:
        raise OSError("disk gone")

    with SqliteStore(path) as store:
        monkeypatch.setattr(SqliteStore, "_bump_revision", fail)
        with pytest.raises(OSError):
            store.load("s", now=1)
        monkeypatch.undo()
        assert _all_rows(path) == original  # rolled back, and the quarantine is already there
        (kept,) = _quarantines(tmp_path)
        assert store.load("s", now=1).repair.quarantine == str(kept)


def test_the_command_undoes_a_sqlite_repair(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, original = _damaged_database(tmp_path)
    code, repaired = _main(capsys, "repair", path, "--json")
    assert code == 0
    (report,) = repaired
    code, undone = _main(capsys, "repair", "--undo", report["quarantine"], "--json")
    assert code == 0 and undone["restored"] == f"{path} (session s)"
    assert _all_rows(path) == original


@pytest.mark.slow
@pytest.mark.parametrize("zstd", [False, True], ids=["plain", "zstd"])
def test_every_byte_cut_repairs_and_undoes_to_the_exact_bytes(tmp_path: Path, zstd: bool) -> None:
    events = _open_turn(3).events
    whole = write_jsonl_zstd(HEADER, events) if zstd else write_jsonl(HEADER, events)
    header_end = len(write_jsonl_zstd(HEADER, ()) if zstd else write_jsonl(HEADER, ()))
    name = "session.jsonl.zstd" if zstd else "session.jsonl"
    undone = 0
    for cut in range(header_end, len(whole) + 1):
        original = whole[:cut]
        log = _write(tmp_path / name, original)
        report = repair_file(log, now=1)
        _assert_recoverable(log, original)
        if report.quarantine is not None:
            undo_repair(report.quarantine)
            undone += 1
            assert log.read_bytes() == original, cut
        else:
            assert not report.torn and log.read_bytes().startswith(original), cut
        for kept in _quarantines(tmp_path):
            kept.unlink()
    assert undone > len(whole) - header_end - 10  # nearly every cut tore a record or frame
