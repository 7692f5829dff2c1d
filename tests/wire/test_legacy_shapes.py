"""Older v0 shapes, normalized in memory on load (docs/format/persistence.md Appendix A).

Each row of Appendix A's rules is an example: the stored log in the older shape
loads equal to the same log written in today's shape, by both load paths, through
`load_jsonl`, `load_jsonl_zstd`, both stores and the CLI; a malformed older shape is
`CorruptLog`; `normalize_legacy=False` gives today's refusals back; the stored bytes
are never rewritten.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

from kernel import load_jsonl, thaw
from kernel.cli import main
from kernel.errors import CorruptLog, KernelError, UnknownEventType
from kernel.storage.jsonl import _scan_plain, loaded_result, write_jsonl
from kernel.storage.zstd import encode_zstd_frame, load_jsonl_zstd
from kernel.store import JsonlStore, SqliteStore
from kernel.values.events import DEFAULT_KNOWN_TYPES
from kernel.wire.codec import event_to_wire
from kernel.wire.legacy import LEGACY_SHAPES, legacy_message_id, normalize_legacy
from properties import _loop as loop

HEADER: dict[str, Any] = {
    "type": "session",
    "version": 0,
    "id": "s",
    "createdAt": 1,
    "delegationDepth": 0,
}
TEXT = [{"type": "text", "text": "hi"}]
CALL = {"type": "tool-call", "id": "c1", "name": "ls", "arguments": "{}"}
MODEL = {"kind": "model", "provider": "p", "model": "m"}


def _line(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def _log(*records: tuple[Any, ...]) -> bytes:
    """A stored log: `(type, data)` or `(type, data, envelope extras)` per record."""
    lines = [_line(HEADER)]
    for seq, (event_type, data, *extra) in enumerate(records):
        record = {"type": event_type, "seq": seq, "time": 1, "data": data}
        for more in extra:
            record.update(more)
        lines.append(_line(record))
    return b"\n".join(lines) + b"\n"


APPEND = {"surfaceOp": "append"}


def _user(data: dict[str, Any]) -> tuple[Any, ...]:
    return ("user/message", data, APPEND)


def _turn(*inner: tuple[Any, ...], end: Any = None, start: Any = None) -> list[tuple[Any, ...]]:
    """One turn of one step around `inner`; `end`/`start` replace its boundary data."""
    return [
        ("turn/start", start if start is not None else {"turn": 1}),
        ("step/start", {"turn": 1, "step": 1}),
        *inner,
        ("step/end", {"turn": 1, "step": 1}),
        ("turn/end", end if end is not None else {"turn": 1, "reason": {"kind": "completed"}}),
    ]


def _wire(loaded: Any) -> list[Any]:
    return [thaw(event_to_wire(e)) for e in loaded.events]


def _exact(data: bytes, *, normalize: bool = True) -> Any:
    scan = _scan_plain(data)
    assert scan is not None
    return loaded_result(
        scan, session_id=None, known_types=DEFAULT_KNOWN_TYPES, normalize=normalize
    )


def _loads_as(old: bytes, new: bytes, counts: dict[str, int]) -> None:
    """`old` loads, by either path, as `new` does, with `counts` normalized."""
    expected = load_jsonl(new, now=0)
    assert not expected.normalized
    for loaded in (load_jsonl(old, now=0), _exact(old)):
        assert _wire(loaded) == _wire(expected)
        assert dict(loaded.normalized) == counts


HI_USER = {"content": TEXT, "source": {"kind": "user"}}


def _current_user(seq: int) -> dict[str, Any]:
    return {**HI_USER, "id": legacy_message_id("s", seq), "role": "user"}


# -- A.1 turn/start with a trigger -------------------------------------------------------------


def test_a_turn_start_trigger_is_dropped() -> None:
    old = _log(*_turn(start={"turn": 1, "trigger": {"kind": "user"}}))
    _loads_as(old, _log(*_turn()), {"turn-start-trigger": 1})


@pytest.mark.parametrize(
    "data",
    [
        {"turn": 1, "trigger": {"kind": ""}},
        {"turn": 1, "trigger": "user"},
        {"turn": 0, "trigger": {"kind": "user"}},
        {"turn": 1, "trigger": {"kind": "user"}, "extra": 1},
    ],
)
def test_a_malformed_trigger_is_corrupt(data: dict[str, Any]) -> None:
    with pytest.raises(CorruptLog, match=r"A\.1"):
        load_jsonl(_log(*_turn(start=data)), now=0)


# -- A.2 turn/end reasons -----------------------------------------------------------------------


def _end(reason: Any) -> dict[str, Any]:
    return {"turn": 1, "reason": reason}


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ({"kind": "aborted"}, {"kind": "aborted", "reason": {"kind": "legacy"}}),
        ({"kind": "disposed"}, {"kind": "aborted", "reason": {"kind": "disposed"}}),
        (
            {"kind": "error", "step": 1, "failure": {"message": "m", "code": "c", "status": 500}},
            {"kind": "error", "error": {"message": "m", "code": "c", "status": 500}},
        ),
        (
            {"kind": "error", "step": 0, "message": "boom"},
            {"kind": "error", "error": {"message": "boom", "code": "UNKNOWN"}},
        ),
        (
            {"kind": "error", "step": 2, "message": "boom", "code": "E1"},
            {"kind": "error", "error": {"message": "boom", "code": "E1"}},
        ),
    ],
)
def test_an_older_turn_end_reason_is_rewritten(old: Any, new: Any) -> None:
    _loads_as(_log(*_turn(end=_end(old))), _log(*_turn(end=_end(new))), {"turn-end-reason": 1})


@pytest.mark.parametrize(
    "reason",
    [
        {"kind": "completed"},
        {"kind": "aborted", "reason": {"kind": "user"}},
        {"kind": "error", "error": {"message": "m", "code": "c"}},
        {"kind": "acme-paused", "detail": 1},
    ],
)
def test_a_current_or_extension_reason_is_unchanged(reason: Any) -> None:
    data = _log(*_turn(end=_end(reason)))
    _loads_as(data, data, {})


@pytest.mark.parametrize(
    "end",
    [
        _end({"kind": "completed", "extra": 1}),
        _end({"kind": "aborted", "why": "x"}),
        _end({"kind": "disposed", "why": "x"}),
        _end({"kind": "error", "message": "boom"}),  # no step
        _end({"kind": "error", "step": -1, "message": "boom"}),
        _end({"kind": "error", "step": 1, "failure": {"message": "m"}}),
        _end({"kind": "error", "step": 1, "failure": {"message": "m", "code": "c", "x": 1}}),
        _end({"kind": "error", "step": 1, "message": 5}),
        _end({"kind": 7}),
        {"turn": 1, "reason": {"kind": "completed"}, "extra": 1},
    ],
)
def test_a_malformed_turn_end_is_corrupt(end: Any) -> None:
    with pytest.raises(CorruptLog, match=r"A\.2"):
        load_jsonl(_log(*_turn(end=end)), now=0)


def test_a_malformed_turn_end_ranks_before_an_unknown_type() -> None:
    """Normalization runs before the unknown-type rule (docs/format/persistence.md §5)."""
    data = _log(("acme/x", {}), *_turn(end=_end({"kind": "completed", "extra": 1})))
    with pytest.raises(CorruptLog, match=r"A\.2"):
        load_jsonl(data, now=0)
    with pytest.raises(UnknownEventType):
        load_jsonl(data, now=0, normalize_legacy=False)


def test_r3_ranks_before_a_malformed_older_shape() -> None:
    data = _log(*_turn(start={"turn": 1, "trigger": 5}), ("mode/set", {"mode": "x"}))
    with pytest.raises(CorruptLog, match="R3"):
        load_jsonl(data, now=0)


# -- A.3 steering/message ----------------------------------------------------------------------


def test_a_steering_message_with_a_message_becomes_that_user_message() -> None:
    message = {**HI_USER, "id": "m-1", "role": "user"}
    old = _log(*_turn(("steering/message", {"turn": 1, "message": message}, APPEND)))
    new = _log(*_turn(_user(message)))
    _loads_as(old, new, {"steering-message": 1})


def test_a_flat_steering_message_gets_a_legacy_identity() -> None:
    old = _log(*_turn(("steering/message", {"turn": 1, **HI_USER}, APPEND)))
    new = _log(*_turn(_user(_current_user(2))))
    _loads_as(old, new, {"steering-message": 1})


@pytest.mark.parametrize(
    "data",
    [
        "text",
        {"turn": 1, "message": "text"},
        {"turn": 1.5, **HI_USER},
        {"turn": 1, "content": TEXT},
        {"turn": 1, **HI_USER, "extra": 1},
    ],
)
def test_a_malformed_steering_message_is_corrupt(data: Any) -> None:
    with pytest.raises(CorruptLog, match=r"A\.3"):
        load_jsonl(_log(*_turn(("steering/message", data, APPEND))), now=0)


# -- A.4 messages before identities --------------------------------------------------------------


def test_an_old_user_message_gets_its_identity() -> None:
    old = _log(*_turn(_user(HI_USER)))
    _loads_as(old, _log(*_turn(_user(_current_user(2)))), {"user-message-identity": 1})


def _model_step(assistant: dict[str, Any], result: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        ("assistant/message", {"turn": 1, "step": 1, **assistant}, APPEND),
        ("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "ls", "arguments": "{}"}),
        ("tool/result", {"turn": 1, "step": 1, **result}, APPEND),
    ]


OLD_ASSISTANT = {"content": [CALL], "provenance": {"provider": "p", "model": "m"}}
OLD_RESULT = {"callId": "c1", "content": TEXT, "isError": False}


def _new_assistant(seq: int) -> dict[str, Any]:
    message = {"id": legacy_message_id("s", seq), "role": "assistant", "content": [CALL]}
    return {"message": {**message, "source": {"provider": "p", "model": "m", "kind": "model"}}}


def _new_result(message_id: str) -> dict[str, Any]:
    block = {"type": "tool-result", "toolCallId": "c1", "content": TEXT, "isError": False}
    message = {"id": message_id, "role": "user", "content": [block]}
    return {"message": {**message, "source": {"kind": "tool", "callId": "c1"}}}


def test_an_old_assistant_message_and_tool_result_get_their_identities() -> None:
    old = _log(*_turn(*_model_step(OLD_ASSISTANT, OLD_RESULT)))
    new = _log(*_turn(*_model_step(_new_assistant(2), _new_result(legacy_message_id("s", 4)))))
    counts = {"assistant-message-identity": 1, "tool-result-identity": 1}
    _loads_as(old, new, counts)


def test_a_provenance_kind_is_overwritten_in_its_place() -> None:
    assistant = {"content": [], "provenance": {"kind": "x", "provider": "p", "model": "m"}}
    loaded = load_jsonl(
        _log(*_turn(("assistant/message", {"turn": 1, "step": 1, **assistant}, APPEND))), now=0
    )
    source = thaw(loaded.events[2].data)["message"]["source"]
    assert list(source) == ["kind", "provider", "model"] and source["kind"] == "model"


def test_a_replacing_tool_result_keeps_the_identity_of_the_result_it_replaces() -> None:
    rewrite = (
        "tool/result",
        {"turn": 1, "step": 1, **OLD_RESULT},
        {"surfaceOp": {"op": "replace", "start": 4, "end": 4}, "sourceEventSeqs": [4]},
    )
    old = _log(*_turn(*_model_step(OLD_ASSISTANT, OLD_RESULT), rewrite))
    loaded = load_jsonl(old, now=0)
    ids = [thaw(e.data)["message"]["id"] for e in loaded.events if e.type == "tool/result"]
    assert ids == [legacy_message_id("s", 4)] * 2
    assert dict(loaded.normalized) == {
        "assistant-message-identity": 1,
        "tool-result-identity": 2,
    }


@pytest.mark.parametrize(
    "record",
    [
        _user({"content": TEXT, "source": {"kind": "user"}, "role": "user"}),  # role, no id
        ("assistant/message", {"turn": 1, "step": 1, "content": [], "provenance": "p"}, APPEND),
        ("tool/result", {"turn": 1, "step": 1, "callId": "c1", "content": TEXT}, APPEND),
    ],
)
def test_a_current_looking_malformed_message_is_left_to_r10(record: tuple[Any, ...]) -> None:
    data = _log(*_turn(record))
    with pytest.raises(CorruptLog) as caught:
        load_jsonl(data, now=0)
    assert "A.4" not in str(caught.value)


# -- the switch, every reader, the stored bytes -----------------------------------------------

ALL_SHAPES = _log(
    *_turn(
        _user(HI_USER),
        *_model_step(OLD_ASSISTANT, OLD_RESULT),
        ("steering/message", {"turn": 1, **HI_USER}, APPEND),
        start={"turn": 1, "trigger": {"kind": "user"}},
        end=_end({"kind": "disposed"}),
    )
)
ALL_COUNTS = {name: 1 for name in LEGACY_SHAPES}


def test_every_shape_is_named_and_counted() -> None:
    loaded = load_jsonl(ALL_SHAPES, now=0)
    assert dict(loaded.normalized) == ALL_COUNTS
    assert _wire(loaded) == _wire(_exact(ALL_SHAPES))


@pytest.mark.parametrize(
    ("data", "refusal"),
    [
        (_log(*_turn(start={"turn": 1, "trigger": {"kind": "user"}})), CorruptLog),
        (_log(*_turn(_user(HI_USER))), CorruptLog),
        (_log(*_turn(end=_end({"kind": "aborted"}))), CorruptLog),
        (_log(*_turn(("steering/message", {"turn": 1, **HI_USER}, APPEND))), UnknownEventType),
    ],
)
def test_turning_normalization_off_restores_todays_refusals(
    data: bytes, refusal: type[KernelError]
) -> None:
    load_jsonl(data, now=0)
    for load in (
        lambda: load_jsonl(data, now=0, normalize_legacy=False),
        lambda: _exact(data, normalize=False),
    ):
        with pytest.raises(refusal):
            load()


def test_an_ignorable_steering_message_is_kept_verbatim_only_without_normalization() -> None:
    steering = ("steering/message", {"opaque": [1]}, {"ignorable": True})
    data = _log(*_turn(), steering)
    loaded = load_jsonl(data, now=0, normalize_legacy=False)
    assert loaded.events[-1].type == "steering/message" and loaded.events[-1].ignorable
    with pytest.raises(CorruptLog, match=r"A\.3"):
        load_jsonl(data, now=0)


def test_a_disposed_reason_loads_verbatim_without_normalization() -> None:
    data = _log(*_turn(end=_end({"kind": "disposed"})))
    for loaded in (load_jsonl(data, now=0, normalize_legacy=False), _exact(data, normalize=False)):
        assert thaw(loaded.events[-1].data)["reason"] == {"kind": "disposed"}
        assert not loaded.normalized


def test_the_switch_must_be_a_bool() -> None:
    with pytest.raises(KernelError, match="normalize_legacy"):
        load_jsonl(ALL_SHAPES, now=0, normalize_legacy="no")  # type: ignore[arg-type]


def test_zstd_loads_normalize_too() -> None:
    frames = encode_zstd_frame(ALL_SHAPES[: ALL_SHAPES.index(b"\n") + 1])
    frames += encode_zstd_frame(ALL_SHAPES[ALL_SHAPES.index(b"\n") + 1 :])
    loaded = load_jsonl_zstd(frames, now=0)
    assert _wire(loaded) == _wire(load_jsonl(ALL_SHAPES, now=0))
    assert dict(loaded.normalized) == ALL_COUNTS
    with pytest.raises(CorruptLog):
        load_jsonl_zstd(frames, now=0, normalize_legacy=False)


def _stored_at(root: Path, data: bytes, *, zstd: bool = False) -> Path:
    store = JsonlStore(root, zstd=zstd)
    store.create(HEADER)
    store.append("s", load_jsonl(_log(("turn/start", {"turn": 1})), now=0).events[:1])
    path = store.path_of("s")
    if zstd:
        split = data.index(b"\n") + 1
        data = encode_zstd_frame(data[:split]) + encode_zstd_frame(data[split:])
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("zstd", [False, True])
def test_a_store_load_repairs_an_open_legacy_turn_without_rewriting_it(
    tmp_path: Path, zstd: bool
) -> None:
    open_turn = ALL_SHAPES[: ALL_SHAPES.rindex(b'{"type":"step/end"')]
    path = _stored_at(tmp_path, open_turn, zstd=zstd)
    before = path.read_bytes()
    stored = JsonlStore(tmp_path, zstd=zstd).load("s", now=9)
    assert stored.repair.committed and [e.type for e in stored.repair.closers] == [
        "step/end",
        "turn/end",
    ]
    assert path.read_bytes().startswith(before)
    counts = {k: 1 for k in LEGACY_SHAPES if k != "turn-end-reason"}
    assert dict(stored.normalized) == counts
    again = JsonlStore(tmp_path, zstd=zstd).load("s", now=9)
    assert again.events == stored.events and not again.repair.needed
    with pytest.raises(CorruptLog):
        JsonlStore(tmp_path, zstd=zstd, normalize_legacy=False).inspect("s")


def test_read_from_normalizes_over_the_whole_prefix(tmp_path: Path) -> None:
    """A.5: a replacing result in the suffix inherits an identity from before it."""
    rewrite = (
        "tool/result",
        {"turn": 1, "step": 1, **OLD_RESULT},
        {"surfaceOp": {"op": "replace", "start": 4, "end": 4}, "sourceEventSeqs": [4]},
    )
    _stored_at(tmp_path, _log(*_turn(*_model_step(OLD_ASSISTANT, OLD_RESULT), rewrite)))
    store = JsonlStore(tmp_path)
    loaded = store.inspect("s").events
    suffix = store.read_from("s", 5)
    assert suffix == loaded[5:]
    assert thaw(suffix[0].data)["message"]["id"] == legacy_message_id("s", 4)
    raw = JsonlStore(tmp_path, normalize_legacy=False).read_from("s", 5)
    assert "callId" in thaw(raw[0].data)


def _legacy_sqlite(path: Path, log: bytes = ALL_SHAPES) -> SqliteStore:
    """A SQLite session whose rows hold the older shapes (written past the store's admission)."""
    current = load_jsonl(log, now=0).events
    store = SqliteStore(path)
    store.create(HEADER)
    store.append("s", current)
    store.close()
    old = [json.loads(line) for line in log.splitlines()[1:]]
    with sqlite3.connect(path) as conn:
        for record in old:
            conn.execute(
                "UPDATE events SET type = ?, data = ? WHERE session_id = 's' AND seq = ?",
                (record["type"], _line(record["data"]).decode(), record["seq"]),
            )
    return SqliteStore(path)


def test_sqlite_loads_normalize_and_read_from_agrees(tmp_path: Path) -> None:
    store = _legacy_sqlite(tmp_path / "s.db")
    stored = store.load("s", now=0)
    assert dict(stored.normalized) == ALL_COUNTS
    assert [thaw(event_to_wire(e)) for e in stored.events] == _wire(load_jsonl(ALL_SHAPES, now=0))
    assert store.read_from("s", 3) == stored.events[3:]
    with pytest.raises(CorruptLog):
        SqliteStore(tmp_path / "s.db", normalize_legacy=False).inspect("s")


def test_sqlite_rows_with_a_disposed_reason_are_normalized(tmp_path: Path) -> None:
    """The one older shape a stored row's per-event rules admit as it is (R12)."""
    store = _legacy_sqlite(tmp_path / "s.db", _log(*_turn(end=_end({"kind": "disposed"}))))
    stored = store.inspect("s")
    assert thaw(stored.events[-1].data)["reason"] == {
        "kind": "aborted",
        "reason": {"kind": "disposed"},
    }
    assert dict(stored.normalized) == {"turn-end-reason": 1}
    verbatim = SqliteStore(tmp_path / "s.db", normalize_legacy=False).inspect("s")
    assert thaw(verbatim.events[-1].data)["reason"] == {"kind": "disposed"}


def test_the_cli_reports_normalized_events_and_can_refuse_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "legacy.jsonl"
    log.write_bytes(ALL_SHAPES)
    assert main(["inspect", "--json", str(log)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["normalized"] == ALL_COUNTS
    assert main(["inspect", str(log)]) == 0
    assert "older v0" in capsys.readouterr().out
    assert main(["verify", "--json", str(log)]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["logs"][0]["normalized"] == ALL_COUNTS
    assert main(["inspect", "--strict-shapes", str(log)]) != 0
    assert main(["verify", "--strict-shapes", str(log)]) != 0


# -- properties ---------------------------------------------------------------------------------


@given(loop.loop_logs())
def test_normalization_leaves_every_current_log_as_it_is(generated: loop.LoopLog) -> None:
    records = generated.wire()
    normalized = normalize_legacy(records, session_id="s")
    assert normalized.records is records and not normalized.counts


@given(loop.loop_logs())
def test_old_user_messages_load_as_their_current_twins(generated: loop.LoopLog) -> None:
    """Every appended user message spelled without identity loads with the legacy one."""
    current = generated.wire()
    old = generated.wire()
    for before, after in zip(current, old, strict=True):
        if before["type"] == "user/message" and before.get("surfaceOp") == "append":
            before["data"]["id"] = legacy_message_id("s", before["seq"])
            del after["data"]["id"], after["data"]["role"]
    spelled_old = b"\n".join([_line(HEADER), *map(_line, old)]) + b"\n"
    spelled_new = b"\n".join([_line(HEADER), *map(_line, current)]) + b"\n"
    loaded = load_jsonl(spelled_old, now=0)
    assert _wire(loaded) == _wire(load_jsonl(spelled_new, now=0))
    appended = sum(r["type"] == "user/message" and r.get("surfaceOp") == "append" for r in old)
    assert loaded.normalized.get("user-message-identity", 0) == appended


def test_write_jsonl_of_a_normalized_log_spells_todays_shapes() -> None:
    loaded = load_jsonl(ALL_SHAPES, now=0)
    written = write_jsonl(loaded.header, loaded.events)
    again = load_jsonl(written, now=0)
    assert not again.normalized and again.events == loaded.events
