"""A live session over a store: open or resume, append, batch, commit (kernel/store/live.py).

Each test runs on the three layouts: plain JSONL, Zstandard JSONL and SQLite. The
crash tests run a writer in a child process that SIGKILLs itself between two
batches, with a tool call open; the session it leaves is then resumed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kernel import APPEND, event_to_json
from kernel.errors import InvalidEnvelope, KernelError, SeqMismatch
from kernel.folds.invariants import check_invariants
from kernel.store import (
    JsonlStore,
    LiveSession,
    SessionNotFound,
    SqliteStore,
    StoreError,
    open_session,
)
from kernel.store.live import SessionStore
from kernel.values.builders import (
    message_id,
    model_message,
    step_end,
    step_start,
    text_block,
    tool_call,
    tool_call_block,
    tool_result,
    turn_end,
    turn_start,
    user_message,
)

LAYOUTS = ("plain", "zstd", "sqlite")
SESSION = "live"
HEADER = {"version": 0, "id": SESSION, "createdAt": 1, "cwd": "/projects/live"}
REQUEST = {"config": {"provider": "deepseek", "model": "deepseek-chat"}}
HERE = Path(__file__).resolve().parent


def make_store(layout: str, where: Path) -> SessionStore:
    """A fresh store object over `where` (the same data each call)."""
    if layout == "sqlite":
        return SqliteStore(where / "sessions.db")
    return JsonlStore(where / "root", zstd=layout == "zstd")


def stored_events(layout: str, where: Path) -> list[dict[str, Any]]:
    """The stored log as a fresh store reads it without repairing (closers included)."""
    store = make_store(layout, where)
    return [event_to_json(e) for e in store.inspect(SESSION).events]  # type: ignore[attr-defined]


def first_step(session: LiveSession, turn: int, *, at: int) -> None:
    """Turn `turn`'s first step up to its tool call, committed as one batch."""
    with session.batch():
        session.append("turn/start", turn_start(turn=turn), time=at)
        session.append("step/start", step_start(turn=turn, step=session.next_step), time=at)
        text = user_message(id=f"u{turn}", content=f"prompt {turn}")
        session.append("user/message", text, time=at, surface_op=APPEND)
        session.request_header(REQUEST, time=at)
        call = tool_call_block(id=f"c{turn}", name="ls", arguments="{}")
        reply = model_message(
            id=message_id("assistant", turn=turn, step=1),
            content=[call],
            provider="deepseek",
            model="deepseek-chat",
        )
        message = {"turn": turn, "step": 1, "message": reply}
        session.append("assistant/message", message, time=at, surface_op=APPEND)
        data = tool_call(turn=turn, step=1, call_id=f"c{turn}", name="ls", arguments="{}")
        session.append("tool/call", data, time=at)


def finish_turn(session: LiveSession, turn: int, *, at: int) -> None:
    """The tool result as one batch, then a text step committed event by event."""
    call_seq = session.log.events[-1].seq
    with session.batch():
        result = tool_result(
            turn=turn, step=1, id=f"r{turn}", call_id=f"c{turn}", content="a.txt", is_error=False
        )
        session.append(
            "tool/result", result, time=at, surface_op=APPEND, source_event_seqs=[call_seq]
        )
        session.append("step/end", step_end(turn=turn, step=1), time=at)
    step = session.next_step
    session.append("step/start", step_start(turn=turn, step=step), time=at)
    session.request_header(REQUEST, time=at)
    reply = model_message(
        id=message_id("assistant", turn=turn, step=step),
        content=[text_block("done")],
        provider="deepseek",
        model="deepseek-chat",
    )
    session.append(
        "assistant/message",
        {"turn": turn, "step": step, "message": reply},
        time=at,
        surface_op=APPEND,
    )
    session.append("step/end", step_end(turn=turn, step=step), time=at)
    session.append("turn/end", turn_end(turn=turn, reason={"kind": "completed"}), time=at)


def whole_turn(session: LiveSession, *, at: int) -> int:
    turn = session.next_turn
    first_step(session, turn, at=at)
    finish_turn(session, turn, at=at)
    return turn


def header_reasons(session: LiveSession) -> list[str]:
    return [e.data["reason"] for e in session.log.events if e.type == "request/header"]


# -- open and resume ----------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_open_creates_an_absent_session_and_commits_each_call(tmp_path: Path, layout: str) -> None:
    session = open_session(make_store(layout, tmp_path), SESSION, header=HEADER, now=1)
    assert session.repair is None and len(session.log) == 0 and session.next_turn == 1
    session.append("turn/start", turn_start(turn=1), time=2)
    # Committed by the call: a fresh store object reads it.
    assert [e["type"] for e in stored_events(layout, tmp_path)][:1] == ["turn/start"]
    assert (session.open_turn, session.next_turn, session.next_step) == (1, 2, 1)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_open_of_an_absent_session_without_a_header_is_session_not_found(
    tmp_path: Path, layout: str
) -> None:
    with pytest.raises(SessionNotFound):
        open_session(make_store(layout, tmp_path), SESSION, now=1)


def test_open_refuses_a_header_naming_another_session(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="names session 'other'"):
        open_session(
            make_store("plain", tmp_path), SESSION, header={**HEADER, "id": "other"}, now=1
        )


@pytest.mark.parametrize("layout", LAYOUTS)
def test_resume_writes_the_end_seed_marker_with_the_first_batch_only(
    tmp_path: Path, layout: str
) -> None:
    session = open_session(make_store(layout, tmp_path), SESSION, header=HEADER, now=1)
    whole_turn(session, at=2)
    stored = stored_events(layout, tmp_path)
    # Opening (a stored header wins over the one given) and appending nothing writes nothing.
    for _ in range(2):
        resumed = open_session(make_store(layout, tmp_path), SESSION, header=HEADER, now=5)
        assert not resumed.repair.needed  # type: ignore[union-attr]
        assert resumed.log.header.created_at == 1  # type: ignore[union-attr]
        assert stored_events(layout, tmp_path) == stored
        assert (resumed.next_turn, resumed.next_step, resumed.open_turn) == (2, 1, None)
    assert whole_turn(resumed, at=6) == 2
    types = [e["type"] for e in stored_events(layout, tmp_path)]
    assert types[len(stored)] == "session/end-seed" and types.count("session/end-seed") == 1
    assert stored_events(layout, tmp_path)[len(stored)]["time"] == 5
    assert [event_to_json(e) for e in resumed.log.events] == stored_events(layout, tmp_path)
    assert check_invariants(resumed.log.events) == ()


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("now", [None, 1.5, "5", True, 2**53, float("nan")])
def test_open_refuses_a_now_that_is_no_event_time_before_reading_the_store(
    tmp_path: Path, layout: str, now: Any
) -> None:
    # `now=None` once opened the session without its end-seed marker; `1.5` failed only at
    # the first append, naming an event the caller never appended.
    session = open_session(make_store(layout, tmp_path), SESSION, header=HEADER, now=1)
    first_step(session, 1, at=2)  # a turn left open: a load would append its closers
    stored = stored_events(layout, tmp_path)
    for header in (HEADER, None):
        with pytest.raises(InvalidEnvelope, match=r"open_session: now must be a safe integer"):
            open_session(make_store(layout, tmp_path), SESSION, header=header, now=now)
    assert stored_events(layout, tmp_path) == stored  # nothing repaired
    (tmp_path / "new").mkdir()
    with pytest.raises(InvalidEnvelope, match=r"now must be a safe integer"):
        open_session(make_store(layout, tmp_path / "new"), SESSION, header=HEADER, now=now)


def test_a_log_that_ends_seeded_gets_no_second_marker(tmp_path: Path) -> None:
    from kernel import SessionLog

    store = make_store("plain", tmp_path)
    seed = SessionLog.seed([], header=HEADER, now=1)
    store.create(HEADER)
    store.append(SESSION, seed.events)
    session = open_session(make_store("plain", tmp_path), SESSION, now=2)
    session.append("turn/start", turn_start(turn=session.next_turn), time=3)
    assert [e["type"] for e in stored_events("plain", tmp_path)][:2] == [
        "session/end-seed",
        "turn/start",
    ]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_header_writer_logs_initial_then_one_resume_then_nothing_redundant(
    tmp_path: Path, layout: str
) -> None:
    session = open_session(make_store(layout, tmp_path), SESSION, header=HEADER, now=1)
    whole_turn(session, at=2)
    assert header_reasons(session) == ["initial"]
    resumed = open_session(make_store(layout, tmp_path), SESSION, now=3)
    whole_turn(resumed, at=4)
    whole_turn(resumed, at=5)
    # A new writer instance logs `resume` once; later requests inherit it.
    assert header_reasons(resumed) == ["initial", "resume"]
    changed = {"config": {"provider": "deepseek", "model": "deepseek-reasoner"}}
    resumed.append("turn/start", turn_start(turn=resumed.next_turn), time=6)
    resumed.append("step/start", step_start(turn=4, step=1), time=6)
    event = resumed.request_header(changed, time=6)
    assert event is not None and event.data["reason"] == "change"
    assert resumed.request_header(changed, time=6) is None
    assert resumed.request_header(changed, time=6, declared=True) is not None


# -- crash and resume ---------------------------------------------------------------------------

WRITER = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
import test_live_session as t
from kernel import event_to_json
import orjson

layout, where, crash_turn = sys.argv[2], sys.argv[3], int(sys.argv[4])
session = t.open_session(t.make_store(layout, t.Path(where)), t.SESSION, header=t.HEADER, now=1)
reported = 0


def report():
    global reported
    for event in session.log.events[reported:]:
        sys.stdout.buffer.write(orjson.dumps(event_to_json(event)) + b"\n")
    sys.stdout.flush()
    reported = len(session.log)


for turn in range(1, crash_turn + 1):
    t.first_step(session, turn, at=10 + turn)
    report()
    if turn == crash_turn:
        os.kill(os.getpid(), signal.SIGKILL)  # between two batches: the tool call is open
    t.finish_turn(session, turn, at=10 + turn)
    report()
"""


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL")
@pytest.mark.parametrize("layout", LAYOUTS)
def test_resume_after_a_sigkilled_writer_closes_the_turn_once(tmp_path: Path, layout: str) -> None:
    import orjson

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(
        [sys.executable, "-c", WRITER, str(HERE), layout, str(tmp_path), "3"],
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    acknowledged = [orjson.loads(line) for line in proc.stdout.splitlines()]
    assert acknowledged[-1]["type"] == "tool/call"

    resumed = open_session(make_store(layout, tmp_path), SESSION, now=100)
    repair = resumed.repair
    assert repair is not None and repair.committed
    assert [e.type for e in repair.closers] == ["tool/result", "step/end", "turn/end"]
    events = [event_to_json(e) for e in resumed.log.events]
    assert events[: len(acknowledged)] == acknowledged  # every acknowledged event kept
    assert events == stored_events(layout, tmp_path)
    assert (resumed.next_turn, resumed.next_step, resumed.open_turn) == (4, 1, None)

    again = open_session(make_store(layout, tmp_path), SESSION, now=200)
    assert again.repair is not None and not again.repair.needed
    assert [event_to_json(e) for e in again.log.events] == events  # the repair was not redone

    assert whole_turn(again, at=300) == 4
    assert check_invariants(again.log.events) == ()
    assert [e["type"] for e in stored_events(layout, tmp_path)].count("session/end-seed") == 1
    assert header_reasons(again) == ["initial", "resume"]


# -- batches, failures, concurrent writers ------------------------------------------------------


class CountingStore:
    """A store that counts its appends (a `SessionStore` over a real one)."""

    def __init__(self, store: Any) -> None:
        self.inner = store
        self.appends: list[int] = []
        self.known_types = store.known_types

    def create(self, header: Any) -> Any:
        return self.inner.create(header)

    def load(self, session_id: str, *, now: int, adopt_live: bool = False) -> Any:
        return self.inner.load(session_id, now=now, adopt_live=adopt_live)

    def append(self, session_id: str, events: Any) -> None:
        events = tuple(events)
        self.inner.append(session_id, events)
        self.appends.append(len(events))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_batch_is_one_store_append_and_the_default_is_one_per_call(
    tmp_path: Path, layout: str
) -> None:
    store = CountingStore(make_store(layout, tmp_path))
    session = open_session(store, SESSION, header=HEADER, now=1)
    first_step(session, 1, at=2)
    assert store.appends == [6]
    finish_turn(session, 1, at=3)
    assert store.appends == [6, 2, 1, 1, 1, 1]  # the header of step 2 is inherited
    assert len(session.log) == sum(store.appends)


def test_a_batch_on_an_existing_file_is_one_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = open_session(make_store("plain", tmp_path), SESSION, header=HEADER, now=1)
    session.append("turn/start", turn_start(turn=1), time=2)
    calls: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    with session.batch():
        for step in (1, 2, 3):
            session.append("step/start", step_start(turn=1, step=step), time=3)
            session.append("step/end", step_end(turn=1, step=step), time=3)
    assert len(calls) == 1


@pytest.mark.parametrize("layout", LAYOUTS)
def test_an_exception_in_a_batch_drops_it_and_the_writer_decision(
    tmp_path: Path, layout: str
) -> None:
    session = open_session(make_store(layout, tmp_path), SESSION, header=HEADER, now=1)
    session.append("turn/start", turn_start(turn=1), time=2)
    before = stored_events(layout, tmp_path)
    with pytest.raises(RuntimeError), session.batch():
        session.append("step/start", step_start(turn=1, step=1), time=3)
        assert session.request_header(REQUEST, time=3) is not None
        assert session.in_batch and len(session.log) == 3
        raise RuntimeError("the model call failed")
    assert len(session.log) == 1 and session.next_step == 1 and not session.in_batch
    assert stored_events(layout, tmp_path) == before
    session.append("step/start", step_start(turn=1, step=1), time=4)
    event = session.request_header(REQUEST, time=4)  # the dropped decision is made again
    assert event is not None and event.data["reason"] == "initial"


def fail_the_commit(layout: str, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make the next store commit fail after it has started writing; returns a call log."""
    failures: list[int] = []
    if layout == "sqlite":
        real_bump = SqliteStore._bump_revision

        def failing_bump(self: SqliteStore, session_id: str) -> None:
            real_bump(self, session_id)
            if not failures:
                failures.append(1)
                raise OSError("disk full (injected)")

        monkeypatch.setattr(SqliteStore, "_bump_revision", failing_bump)
    else:
        real_fsync = os.fsync

        def failing_fsync(fd: int) -> None:
            if not failures:
                failures.append(fd)
                raise OSError("disk full (injected)")
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", failing_fsync)
    return failures


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_failed_commit_leaves_the_log_as_the_store_has_it(
    tmp_path: Path, layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = open_session(make_store(layout, tmp_path), SESSION, header=HEADER, now=1)
    whole_turn(session, at=2)
    session = open_session(make_store(layout, tmp_path), SESSION, now=3)
    acknowledged = session.log
    failures = fail_the_commit(layout, monkeypatch)
    with pytest.raises(OSError, match="injected"):
        first_step(session, 2, at=4)
    assert failures
    assert session.log is acknowledged and session.next_turn == 2
    assert [event_to_json(e) for e in session.log.events] == stored_events(layout, tmp_path)
    # Rolled back by the store: the batch may be retried, marker and `resume` header included.
    first_step(session, 2, at=5)
    finish_turn(session, 2, at=5)
    assert [event_to_json(e) for e in session.log.events] == stored_events(layout, tmp_path)
    assert header_reasons(session) == ["initial", "resume"]
    assert [e.type for e in session.log.events].count("session/end-seed") == 1


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_second_writer_gets_seq_mismatch(tmp_path: Path, layout: str) -> None:
    first = open_session(make_store(layout, tmp_path), SESSION, header=HEADER, now=1)
    whole_turn(first, at=2)
    one = open_session(make_store(layout, tmp_path), SESSION, now=3)
    two = open_session(make_store(layout, tmp_path), SESSION, now=3)
    one.append("turn/start", turn_start(turn=2), time=4)
    before = two.log
    with pytest.raises(SeqMismatch):
        two.append("turn/start", turn_start(turn=2), time=4)
    assert two.log is before and two.next_turn == 2
    with pytest.raises(SeqMismatch), two.batch():
        two.append("turn/start", turn_start(turn=2), time=5)
    assert two.log is before


def test_a_rejected_event_in_a_batch_changes_nothing(tmp_path: Path) -> None:
    session = open_session(make_store("plain", tmp_path), SESSION, header=HEADER, now=1)
    with session.batch():
        session.append("turn/start", turn_start(turn=1), time=2)
        with pytest.raises(KernelError):
            session.append("user/message", {"id": "u1"}, time=3, ignorable=False)  # R5
        session.append("step/start", step_start(turn=1, step=1), time=3)
    assert [e["type"] for e in stored_events("plain", tmp_path)][:2] == [
        "turn/start",
        "step/start",
    ]


def test_batches_do_not_nest(tmp_path: Path) -> None:
    session = open_session(make_store("plain", tmp_path), SESSION, header=HEADER, now=1)
    with session.batch():
        session.append("turn/start", turn_start(turn=1), time=2)
        with pytest.raises(StoreError, match="already open"), session.batch():
            pass
    assert len(session.log) == 1 and not session.in_batch


def test_the_commit_benchmark_prints_one_row_per_layout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sys.path.insert(0, str(HERE.parents[1] / "benchmarks"))
    try:
        import live_session
    finally:
        sys.path.remove(str(HERE.parents[1] / "benchmarks"))
    live_session.main(
        ["--single", "4", "--events", "8", "--batch", "4", "--repeat", "1", "--dir", str(tmp_path)]
    )
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [row.split()[0] for row in rows] == ["jsonl", "jsonl-zstd", "sqlite"]
