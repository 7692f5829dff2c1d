"""What the API admits, the same reader loads (Decision 15; docs/format/admission.md §4).

Each case was once admitted by `SessionLog.append` or acknowledged by a store, then deleted
or refused by the next load: an event typed like a chunk row (read back as a malformed row,
a torn tail), an unknown type that is not ignorable (`UnknownEventType` on load), and a
tool-call block whose id the closers cannot answer (`CorruptLog` after a crash).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kernel import APPEND, Event, SessionLog, event_from_json, load_jsonl, write_jsonl
from kernel.errors import InvalidEnvelope, KernelError, MessageShapeError, UnknownEventType
from kernel.store.jsonl import JsonlStore
from kernel.store.sqlite import SqliteStore
from kernel.values.events import ROW_TAGS

HEADER = {"version": 0, "id": "s", "createdAt": 1}
ROW_TAG_TYPES = sorted(ROW_TAGS)
TURN = {"turn": 1}


def _stores(tmp_path: Path, **options: Any) -> list[Any]:
    return [
        JsonlStore(tmp_path / "plain", **options),
        JsonlStore(tmp_path / "zstd", zstd=True, **options),
        SqliteStore(tmp_path / "s.db", **options),
    ]


def _stored_bytes(tmp_path: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()}


def _call_message(call_id: Any) -> dict[str, Any]:
    return {
        "turn": 1,
        "step": 1,
        "message": {
            "id": "a1",
            "role": "assistant",
            "source": {"kind": "model", "provider": "p", "model": "m"},
            "content": [{"type": "tool-call", "id": call_id, "name": "ls", "arguments": {}}],
        },
    }


def _open_step_wire(call_id: Any) -> list[dict[str, Any]]:
    """A turn and step opened, then an assistant message with one tool call, as wire objects."""
    return [
        {"type": "turn/start", "seq": 0, "time": 1, "data": TURN},
        {"type": "step/start", "seq": 1, "time": 2, "data": {"turn": 1, "step": 1}},
        {
            "type": "assistant/message",
            "seq": 2,
            "time": 3,
            "data": _call_message(call_id),
            "surfaceOp": "append",
        },
    ]


def _open_step() -> SessionLog:
    log = SessionLog.empty().append("turn/start", TURN, time=1)
    return log.append("step/start", {"turn": 1, "step": 1}, time=2)


# -- R2: no event is typed like a chunk row -----------------------------------------------------


@pytest.mark.parametrize("tag", ROW_TAG_TYPES)
def test_r2_every_admission_path_refuses_a_row_tag_type(tag: str) -> None:
    wire = {"type": tag, "seq": 0, "time": 0, "data": {"x": 1}}
    attempts: list[Callable[[], Any]] = [
        lambda: SessionLog.empty().append(tag, {"x": 1}, time=0),
        lambda: SessionLog.empty().append(tag, {"x": 1}, time=0, ignorable=True),
        lambda: SessionLog.seed([wire], now=1),
        lambda: SessionLog.seed([Event(tag, 0, 0, {"x": 1})], now=1),
        lambda: SessionLog.restore([wire]),
        lambda: SessionLog.restore([Event(tag, 0, 0, {"x": 1})]),
        lambda: event_from_json(wire),
    ]
    for attempt in attempts:
        with pytest.raises(InvalidEnvelope, match=r"is a chunk-row tag.*\(R2\)"):
            attempt()


@pytest.mark.parametrize("tag", ROW_TAG_TYPES)
def test_r2_no_store_acknowledges_a_row_tag_type(tmp_path: Path, tag: str) -> None:
    for store in _stores(tmp_path):
        store.create(HEADER)
        store.append("s", [Event("turn/start", 0, 1, TURN)])
        before = _stored_bytes(tmp_path)
        with pytest.raises(InvalidEnvelope, match=r"\(R2\)"):
            store.append("s", [Event(tag, 1, 2, {"x": 1}, ignorable=True)])
        assert _stored_bytes(tmp_path) == before
        assert [e.type for e in store.load("s", now=3).events] == ["turn/start", "turn/end"]


# -- R14a: a type the reader does not know must be ignorable ------------------------------------


def test_r14a_append_and_seed_refuse_an_unknown_type_that_is_not_ignorable() -> None:
    with pytest.raises(UnknownEventType, match=r"'turn/strat' is neither a known type.*\(R14a\)"):
        SessionLog.empty().append("turn/strat", TURN, time=0)
    with pytest.raises(UnknownEventType, match=r"\(R14a\)") as caught:
        SessionLog.seed(
            [
                {"type": "turn/start", "seq": 0, "time": 0, "data": TURN},
                {"type": "acme/note", "seq": 1, "time": 0, "data": None},
            ],
            now=1,
        )
    assert caught.value.index == 1


def test_r14a_an_ignorable_or_declared_type_is_admitted_and_loads() -> None:
    ignorable = SessionLog.empty().append("acme/note", {"n": 1}, time=0, ignorable=True)
    known = frozenset({"acme/note", "turn/start", "turn/end"})
    declared = SessionLog.empty(known_types=known).append("acme/note", {"n": 1}, time=0)
    assert declared.known_types == known
    assert declared.append("turn/start", TURN, time=1).known_types == known
    for log, known_types in ((ignorable, None), (declared, known)):
        data = write_jsonl(HEADER, log.events)
        options = {} if known_types is None else {"known_types": known_types}
        assert [e.type for e in load_jsonl(data, now=1, **options).events] == ["acme/note"]


def test_r14a_the_log_keeps_its_known_types_through_seed() -> None:
    known = {"acme/note", "session/end-seed"}
    seeded = SessionLog.seed(
        [{"type": "acme/note", "seq": 0, "time": 0, "data": None}], now=1, known_types=known
    )
    assert seeded.known_types == frozenset(known)
    with pytest.raises(UnknownEventType):
        seeded.append("turn/start", TURN, time=2)  # not in this log's vocabulary


def test_r14a_restore_takes_the_types_its_loader_accepted() -> None:
    restored = SessionLog.restore([{"type": "acme/note", "seq": 0, "time": 0, "data": None}])
    assert [e.type for e in restored.events] == ["acme/note"]
    with pytest.raises(UnknownEventType):
        restored.append("acme/note", None, time=1)


def test_r14a_every_store_refuses_what_its_loader_would_refuse(tmp_path: Path) -> None:
    for store in _stores(tmp_path):
        store.create(HEADER)
        before = _stored_bytes(tmp_path)
        with pytest.raises(UnknownEventType, match=r"\(R14a\)"):
            store.append("s", [Event("turn/start", 0, 1, TURN), Event("turn/strat", 1, 2, TURN)])
        assert _stored_bytes(tmp_path) == before


def test_r14a_a_store_with_more_known_types_acknowledges_and_loads_them(tmp_path: Path) -> None:
    known = {"acme/note", "turn/start", "turn/end"}
    for store in _stores(tmp_path, known_types=known):
        store.create(HEADER)
        store.append("s", [Event("acme/note", 0, 1, None)])
        assert [e.type for e in store.load("s", now=2).events] == ["acme/note"]


@pytest.mark.parametrize("bad", [5, None, "turn/start", [1], object()])
def test_known_types_must_be_a_collection_of_strings(bad: Any) -> None:
    with pytest.raises(KernelError, match="known_types must be a collection"):
        SessionLog.empty(known_types=bad)


# -- R14b: every tool call can be answered by the closers ---------------------------------------


@pytest.mark.parametrize("call_id", ["", 5, None, ["c1"]])
def test_r14b_append_and_seed_refuse_a_tool_call_the_closers_cannot_answer(call_id: Any) -> None:
    with pytest.raises(MessageShapeError, match=r"tool-call block id .* \(R14b\)"):
        _open_step().append(
            "assistant/message", _call_message(call_id), time=3, surface_op="append"
        )
    wire = _open_step_wire(call_id)
    with pytest.raises(MessageShapeError, match=r"\(R14b\)") as caught:
        SessionLog.seed(wire, now=4)
    assert caught.value.index == 2


def test_r14b_no_store_acknowledges_an_unanswerable_tool_call(tmp_path: Path) -> None:
    message = Event("assistant/message", 2, 3, _call_message(""), surface_op=APPEND)
    events = [*_open_step().events, message]
    for store in _stores(tmp_path):
        store.create(HEADER)
        with pytest.raises(KernelError, match=r"\(R14b\)"):
            store.append("s", events)


def test_r14b_restore_admits_a_closed_turn_with_such_a_block() -> None:
    # A stored log from another writer whose turn is closed loads as the reference loads it:
    # no closer will ever need the id.
    wire = [
        *_open_step_wire(""),
        {"type": "step/end", "seq": 3, "time": 4, "data": {"turn": 1, "step": 1}},
        {
            "type": "turn/end",
            "seq": 4,
            "time": 5,
            "data": {"turn": 1, "reason": {"kind": "completed"}},
        },
    ]
    assert len(SessionLog.restore(wire)) == 5


def test_a_valid_tool_call_is_admitted_and_closed_after_a_crash(tmp_path: Path) -> None:
    log = _open_step().append("assistant/message", _call_message("c1"), time=3, surface_op="append")
    for store in _stores(tmp_path):
        store.create(HEADER)
        store.append("s", list(log.events))
        loaded = store.load("s", now=9)
        assert [e.type for e in loaded.events[3:]] == ["tool/result", "step/end", "turn/end"]
