"""Crash-repair closers (docs/format/folds.md §7): examples 1-12 of §7.5 field by field, the
properties of §7.4 (P30-P35) on every crash prefix of generated logs, and malformed input."""

from __future__ import annotations

import math
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.errors import EventShapeError, InvalidEnvelope, KernelError, MessageShapeError
from kernel.folds.closers import (
    TOOL_NOT_STARTED,
    TOOL_NOT_STARTED_TEXT,
    TOOL_OUTCOME_UNKNOWN,
    TOOL_OUTCOME_UNKNOWN_TEXT,
    interrupted_turn_closers,
    wire_closers,
)
from kernel.folds.invariants import check_invariants
from kernel.log import SessionLog
from kernel.values.events import APPEND, CLOSER_ORDER, Event, Replace
from kernel.wire.codec import event_to_json, event_to_wire
from kernel.wire.jsontext import encode_json_bytes

MODEL = {"kind": "model", "provider": "deepseek", "model": "deepseek-chat"}


class Log:
    """A tiny log builder: event `i` gets seq `i` and time `10 * i` (the §7.5 convention)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(self, event_type: str, data: Any, **envelope: Any) -> Log:
        seq = len(self.events)
        self.events.append(Event(event_type, seq, 10 * seq, data, **envelope))
        return self

    def turn(self, turn: int) -> Log:
        return self.add("turn/start", {"turn": turn})

    def end_turn(self, turn: int) -> Log:
        return self.add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})

    def step(self, turn: int, step: int) -> Log:
        return self.add("step/start", {"turn": turn, "step": step})

    def end_step(self, turn: int, step: int) -> Log:
        return self.add("step/end", {"turn": turn, "step": step})

    def assistant(self, turn: int, step: int, *call_ids: str, text: bool = True) -> Log:
        content: list[Any] = [{"type": "text", "text": "working"}] if text else []
        content += [
            {"type": "tool-call", "id": c, "name": "ls", "arguments": "{}"} for c in call_ids
        ]
        message = {
            "id": f"m{len(self.events)}",
            "role": "assistant",
            "content": content,
            "source": MODEL,
        }
        return self.add(
            "assistant/message", {"turn": turn, "step": step, "message": message}, surface_op=APPEND
        )

    def call(self, turn: int, step: int, call_id: str) -> Log:
        return self.add(
            "tool/call",
            {"turn": turn, "step": step, "callId": call_id, "name": "ls", "arguments": "{}"},
        )

    def result(self, turn: int, step: int, call_id: str, **envelope: Any) -> Log:
        message = {
            "id": f"r{len(self.events)}",
            "role": "user",
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": call_id,
                    "content": [{"type": "text", "text": "ok"}],
                    "isError": False,
                }
            ],
            "source": {"kind": "tool", "callId": call_id},
        }
        envelope.setdefault("surface_op", APPEND)
        return self.add("tool/result", {"turn": turn, "step": step, "message": message}, **envelope)

    def user(self, **envelope: Any) -> Log:
        message = {
            "id": f"u{len(self.events)}",
            "role": "user",
            "content": [{"type": "text", "text": "hi"}],
            "source": {"kind": "user"},
        }
        envelope.setdefault("surface_op", APPEND)
        return self.add("user/message", message, **envelope)

    def closers(self) -> list[dict[str, Any]]:
        return [event_to_json(e) for e in interrupted_turn_closers(self.events)]


def result_closer(
    seq: int, time: int, turn: int, step: int, call_id: str, call_seq: int | None
) -> dict[str, Any]:
    """The exact wire object of a synthetic result (docs/format/folds.md §7.2)."""
    started = call_seq is not None
    out: dict[str, Any] = {
        "type": "tool/result",
        "seq": seq,
        "time": time,
        "data": {
            "turn": turn,
            "step": step,
            "message": {
                "id": f"interrupted-tool-result-{call_id}-{seq}",
                "role": "user",
                "source": {"kind": "tool", "callId": call_id},
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": call_id,
                        "isError": True,
                        "content": [
                            {
                                "type": "text",
                                "text": TOOL_OUTCOME_UNKNOWN_TEXT
                                if started
                                else TOOL_NOT_STARTED_TEXT,
                            }
                        ],
                    }
                ],
            },
            "error": {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
            if started
            else {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"},
        },
        "surfaceOp": "append",
    }
    if started:
        out["sourceEventSeqs"] = [call_seq]
    return out


def step_end(seq: int, time: int, turn: int, step: int) -> dict[str, Any]:
    return {"type": "step/end", "seq": seq, "time": time, "data": {"turn": turn, "step": step}}


def turn_end(seq: int, time: int, turn: int) -> dict[str, Any]:
    return {
        "type": "turn/end",
        "seq": seq,
        "time": time,
        "data": {"turn": turn, "reason": {"kind": "interrupted"}},
    }


# -- docs/format/folds.md §7.5 ---------------------------------------------------------------------


def test_closers_example_1_open_turn_no_step() -> None:
    assert Log().turn(1).closers() == [turn_end(1, 0, 1)]


def test_closers_example_2_open_step() -> None:
    assert Log().turn(1).step(1, 1).closers() == [step_end(2, 10, 1, 1), turn_end(3, 10, 1)]


def example_3() -> Log:
    return Log().turn(1).step(1, 1).assistant(1, 1, "c1", "c2").call(1, 1, "c1")


def test_closers_example_3_one_call_recorded_one_not() -> None:
    assert example_3().closers() == [
        result_closer(4, 30, 1, 1, "c1", 3),
        result_closer(5, 30, 1, 1, "c2", None),
        step_end(6, 30, 1, 1),
        turn_end(7, 30, 1),
    ]


def test_closers_example_3_bytes_follow_the_closer_member_order() -> None:
    closers = interrupted_turn_closers(example_3().events)
    assert all(e.wire_order == CLOSER_ORDER for e in closers)
    unknown, not_started = (encode_json_bytes(event_to_wire(e)).decode() for e in closers[:2])
    assert unknown == (
        '{"type":"tool/result","seq":4,"time":30,"data":{"turn":1,"step":1,"message":{"id":'
        '"interrupted-tool-result-c1-4","role":"user","source":{"kind":"tool","callId":"c1"},'
        '"content":[{"type":"tool-result","toolCallId":"c1","isError":true,"content":[{"type":'
        f'"text","text":"{TOOL_OUTCOME_UNKNOWN_TEXT}"}}]}}]}},"error":{{"name":'
        '"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}},"surfaceOp":"append",'
        '"sourceEventSeqs":[3]}'
    )
    assert not_started.endswith(
        '"error":{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}},"surfaceOp":"append"}'
    )
    assert encode_json_bytes(event_to_wire(closers[3])) == (
        b'{"type":"turn/end","seq":7,"time":30,"data":{"turn":1,"reason":{"kind":"interrupted"}}}'
    )


def test_closers_example_3_derived_history_answers_both_calls() -> None:
    log = example_3()
    repaired = SessionLog.restore([*log.events, *interrupted_turn_closers(log.events)])
    ids = [m["id"] for m in repaired.messages]
    assert ids == ["m2", "interrupted-tool-result-c1-4", "interrupted-tool-result-c2-5"]


def test_closers_example_4_answered_calls() -> None:
    log = example_3().result(1, 1, "c1").result(1, 1, "c2")
    assert log.closers() == [step_end(6, 50, 1, 1), turn_end(7, 50, 1)]


def test_closers_example_5_partially_answered() -> None:
    log = Log().turn(1).step(1, 1).assistant(1, 1, "c_a", "c_b").call(1, 1, "c_a")
    log.result(1, 1, "c_a")
    assert log.closers() == [
        result_closer(5, 40, 1, 1, "c_b", None),
        step_end(6, 40, 1, 1),
        turn_end(7, 40, 1),
    ]


def test_closers_example_6_step_already_closed() -> None:
    log = Log().turn(1).step(1, 1).assistant(1, 1, "c1").end_step(1, 1)
    assert log.closers() == [turn_end(4, 30, 1)]


def test_closers_example_7_earlier_turn_untouched() -> None:
    log = Log().turn(1).step(1, 1).assistant(1, 1, "old").end_step(1, 1).end_turn(1)
    log.turn(2).step(2, 1).assistant(2, 1, "new")
    assert log.closers() == [
        result_closer(8, 70, 2, 1, "new", None),
        step_end(9, 70, 2, 1),
        turn_end(10, 70, 2),
    ]


def test_closers_example_8_orphan_tool_call() -> None:
    log = Log().turn(1).step(1, 1).call(1, 1, "orphan")
    assert log.closers() == [step_end(3, 20, 1, 1), turn_end(4, 20, 1)]


def test_closers_example_9_balanced_and_empty_logs() -> None:
    assert Log().turn(1).end_turn(1).closers() == []
    assert interrupted_turn_closers([]) == ()


def test_closers_example_10_trailing_non_turn_events() -> None:
    log = Log().turn(1).step(1, 1).add("session/end-seed", {})
    assert log.closers() == [step_end(3, 20, 1, 1), turn_end(4, 20, 1)]


def test_closers_example_11_replacement_shadows_an_unanswered_call() -> None:
    log = Log().turn(1).step(1, 1).assistant(1, 1, "c1")
    log.user(surface_op=Replace(2, 2), source_event_seqs=(2,))
    assert log.closers() == [
        result_closer(4, 30, 1, 1, "c1", None),
        step_end(5, 30, 1, 1),
        turn_end(6, 30, 1),
    ]


def test_closers_example_12_in_turn_compaction_cut_off() -> None:
    log = Log().turn(1).step(1, 1)
    while len(log.events) < 45:
        log.add("todo/write", {"todos": []})
    log.end_step(1, 1).step(1, 2).end_step(1, 2).add("compaction/start", {"turn": 1})
    assert [e.seq for e in log.events[-2:]] == [47, 48]
    assert log.closers() == [turn_end(49, 480, 1)]


# -- §7.1 details -------------------------------------------------------------------------------


def test_reregistered_call_keeps_its_position_and_resets_its_start() -> None:
    log = Log().turn(1).step(1, 1).assistant(1, 1, "a", "b").call(1, 1, "a")
    log.assistant(1, 1, "a")
    closers = log.closers()
    assert [c["data"]["message"]["source"]["callId"] for c in closers[:2]] == ["a", "b"]
    assert closers[0]["data"]["error"]["code"] == TOOL_NOT_STARTED


def test_a_turn_start_forgets_the_open_step_and_pending_calls_of_an_unclosed_turn() -> None:
    log = Log().turn(1).step(1, 1).assistant(1, 1, "c1").turn(2)
    assert log.closers() == [turn_end(4, 30, 2)]


def test_a_replacement_result_answers_its_call() -> None:
    log = Log().turn(1).step(1, 1).assistant(1, 1, "c1").call(1, 1, "c1").result(1, 1, "c1")
    log.result(1, 1, "c1", surface_op=Replace(4, 4), source_event_seqs=(4,))
    log.assistant(1, 1, "c2").call(1, 1, "c2")
    closers = log.closers()
    assert [c["data"]["message"]["source"]["callId"] for c in closers[:-2]] == ["c2"]
    assert closers[0]["data"]["error"]["code"] == TOOL_OUTCOME_UNKNOWN
    assert closers[0]["sourceEventSeqs"] == [7]


def test_step_of_a_result_is_the_step_of_the_requesting_message() -> None:
    log = Log().turn(3).step(3, 1).assistant(3, 1, "x").step(3, 2)
    assert log.closers() == [
        result_closer(4, 30, 3, 1, "x", None),
        step_end(5, 30, 3, 2),
        turn_end(6, 30, 3),
    ]


def test_the_synthetic_texts_are_distinct_fixed_constants() -> None:
    assert TOOL_NOT_STARTED_TEXT != TOOL_OUTCOME_UNKNOWN_TEXT
    assert "never ran" in TOOL_NOT_STARTED_TEXT and "again" in TOOL_NOT_STARTED_TEXT
    for phrase in ("unknown", "read-only or idempotent", "side effects", "ask the user"):
        assert phrase in TOOL_OUTCOME_UNKNOWN_TEXT
    assert interrupted_turn_closers(example_3().events) == interrupted_turn_closers(
        example_3().events
    )


# -- malformed input: a KernelError, never KeyError/TypeError ------------------------------------

MALFORMED: list[tuple[str, list[Event], type[KernelError]]] = [
    ("turn/start data null", [Event("turn/start", 0, 0, None)], EventShapeError),
    ("turn/start without turn", [Event("turn/start", 0, 0, {"x": 1})], EventShapeError),
    ("step/start data list", Log().turn(1).add("step/start", [1]).events, EventShapeError),
    (
        "step/start without step",
        Log().turn(1).add("step/start", {"turn": 1}).events,
        EventShapeError,
    ),
    (
        "assistant data null",
        Log().turn(1).step(1, 1).add("assistant/message", None, surface_op=APPEND).events,
        MessageShapeError,
    ),
    (
        "assistant message string",
        Log()
        .turn(1)
        .step(1, 1)
        .add("assistant/message", {"turn": 1, "step": 1, "message": "m"}, surface_op=APPEND)
        .events,
        MessageShapeError,
    ),
    (
        "assistant content not array",
        Log()
        .turn(1)
        .step(1, 1)
        .add(
            "assistant/message",
            {"turn": 1, "step": 1, "message": {"content": {}}},
            surface_op=APPEND,
        )
        .events,
        MessageShapeError,
    ),
    (
        "assistant call without step",
        Log()
        .turn(1)
        .step(1, 1)
        .add(
            "assistant/message",
            {"turn": 1, "message": {"content": [{"type": "tool-call", "id": "c"}]}},
            surface_op=APPEND,
        )
        .events,
        EventShapeError,
    ),
    ("tool/call data null", Log().turn(1).add("tool/call", None).events, EventShapeError),
    (
        "tool/call without callId",
        Log().turn(1).add("tool/call", {"turn": 1}).events,
        EventShapeError,
    ),
    (
        "tool/result without message",
        Log().turn(1).add("tool/result", {"turn": 1}, surface_op=APPEND).events,
        MessageShapeError,
    ),
    (
        "tool/result without source",
        Log().turn(1).add("tool/result", {"message": {"content": []}}, surface_op=APPEND).events,
        MessageShapeError,
    ),
    (
        "tool/result source without callId",
        Log()
        .turn(1)
        .add("tool/result", {"message": {"source": {"kind": "tool"}}}, surface_op=APPEND)
        .events,
        MessageShapeError,
    ),
    (
        "unanswerable non-string call id",
        Log()
        .turn(1)
        .step(1, 1)
        .add(
            "assistant/message",
            {"turn": 1, "step": 1, "message": {"content": [{"type": "tool-call", "id": 5}]}},
            surface_op=APPEND,
        )
        .events,
        MessageShapeError,
    ),
    (
        "unanswerable empty call id",
        Log().turn(1).step(1, 1).assistant(1, 1, "").events,
        MessageShapeError,
    ),
    ("open turn with string number", [Event("turn/start", 0, 0, {"turn": "1"})], EventShapeError),
    (
        "open step with zero",
        Log().turn(1).add("step/start", {"turn": 1, "step": 0}).events,
        EventShapeError,
    ),
]


@pytest.mark.parametrize(("name", "events", "error"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_closer_scan_raises_the_matching_admission_error(
    name: str, events: list[Event], error: type[KernelError]
) -> None:
    with pytest.raises(error):
        interrupted_turn_closers(events)


def test_unreadable_ids_in_a_closed_step_need_no_closer() -> None:
    log = (
        Log()
        .turn(1)
        .step(1, 1)
        .add(
            "assistant/message",
            {
                "turn": 1,
                "step": 1,
                "message": {
                    "content": [{"type": "tool-call", "id": {"x": 1}}, {"type": "tool-call"}]
                },
            },
            surface_op=APPEND,
        )
        .end_step(1, 1)
    )
    assert log.closers() == [turn_end(4, 30, 1)]


def test_non_events_are_refused() -> None:
    with pytest.raises(KernelError):
        interrupted_turn_closers([{"type": "turn/start"}])  # type: ignore[list-item]


def test_a_non_event_before_the_last_turn_is_refused_in_a_tuple_a_list_or_an_iterator() -> None:
    # The scan reads only the last turn; the item check covers the whole log.
    turn = [
        Event("turn/start", 1, 0, {"turn": 1}),
        Event("turn/end", 2, 0, {"turn": 1, "reason": {"kind": "completed"}}),
    ]
    for log in ([None, *turn], (None, *turn), iter([None, *turn])):
        with pytest.raises(InvalidEnvelope, match="item at index 0 is a NoneType") as info:
            interrupted_turn_closers(log)  # type: ignore[arg-type]
        assert info.value.index == 0


def user_messages(n: int) -> Log:
    log = Log()
    for i in range(n):
        message = {"id": f"u{i}", "role": "user", "content": [], "source": {"kind": "user"}}
        log.add("user/message", message, surface_op=APPEND)
    return log


def test_closers_a_log_that_never_opened_a_turn_is_answered_from_its_types() -> None:
    log = user_messages(3)
    assert log.closers() == []
    # Only the types are read (the closers answer a turnless log from its types) ...
    log.events[1] = msgspec.structs.replace(log.events[1], time=math.inf)
    assert interrupted_turn_closers(log.events) == ()

    # ... and a type that is not a non-empty string is refused, naming its index.
    class Text(str):
        pass

    for bad in (5, "", ["turn/start"], Text("user/message")):
        log.events[2] = msgspec.structs.replace(log.events[2], type=bad)
        with pytest.raises(InvalidEnvelope, match=r"^event at index 2 \(seq 2\): type ") as caught:
            interrupted_turn_closers(log.events)
        assert caught.value.index == 2


def test_closers_check_every_event_from_the_last_turn_boundary_on() -> None:
    message = {"id": "u3", "role": "user", "content": [], "source": {"kind": "user"}}
    log = user_messages(2).turn(1).add("user/message", message, surface_op=APPEND)
    assert [e.type for e in interrupted_turn_closers(log.events)] == ["turn/end"]
    log.events[3] = msgspec.structs.replace(log.events[3], time=math.inf)
    with pytest.raises(InvalidEnvelope, match=r"^event at index 3 \(seq 3\): time ") as caught:
        interrupted_turn_closers(log.events)
    assert caught.value.index == 3

    # A `str` subclass spelling a boundary is no boundary: it is refused where it stands.
    class Text(str):
        pass

    log.events[3] = msgspec.structs.replace(log.events[3], type=Text("turn/end"), time=1)
    with pytest.raises(InvalidEnvelope) as caught:
        interrupted_turn_closers(log.events)
    assert caught.value.index == 3


def test_closers_a_log_without_turns_still_reads_the_payloads_the_scan_reads() -> None:
    log = user_messages(2).add("step/start", {"turn": 1})
    with pytest.raises(EventShapeError):
        interrupted_turn_closers(log.events)


def test_closers_after_the_last_turn_end_the_payloads_the_scan_reads_are_read() -> None:
    closed = Log().turn(1).end_turn(1)
    assert closed.add("user/message", None, surface_op=APPEND).closers() == []
    with pytest.raises(EventShapeError):
        interrupted_turn_closers(Log().turn(1).end_turn(1).add("step/start", {"turn": 1}).events)


def test_wire_closers_reads_unadmitted_wire_objects() -> None:
    records = [
        {"type": "turn/start", "seq": 0, "time": 5, "data": {"turn": 1}, "extra": 1},
        {"type": 7, "seq": 1, "time": 6, "data": None},
        {"type": ["x"], "seq": 2, "time": 9, "data": None},
    ]
    assert [event_to_json(e) for e in wire_closers(records)] == [turn_end(3, 9, 1)]
    with pytest.raises(KernelError):
        wire_closers([{"type": "turn/start", "seq": 0, "time": "t", "data": {"turn": 1}}])


# -- P30-P35 on every crash prefix of generated logs --------------------------------------------


@st.composite
def loop_logs(draw: st.DrawFn) -> list[Event]:
    """Well-formed logs shaped like model-loop output: every call answered before its step ends."""
    log = Log()
    for turn in range(1, draw(st.integers(1, 3)) + 1):
        log.turn(turn)
        for step in range(1, draw(st.integers(0, 2)) + 1):
            log.step(turn, step)
            if draw(st.booleans()):
                log.user()
            for _ in range(draw(st.integers(0, 3))):
                log.add(
                    "assistant/chunk",
                    {
                        "turn": turn,
                        "step": step,
                        "chunk": {"type": "text-delta", "index": 0, "text": "t"},
                    },
                )
            calls = [f"c{turn}.{step}.{i}" for i in range(draw(st.integers(0, 3)))]
            log.assistant(turn, step, *calls, text=draw(st.booleans()))
            order = draw(st.permutations(calls))
            for call_id in calls:
                log.call(turn, step, call_id)
            for call_id in order:
                call_seq = next(
                    e.seq
                    for e in log.events
                    if e.type == "tool/call" and e.data["callId"] == call_id
                )
                log.result(turn, step, call_id, source_event_seqs=(call_seq,))
            log.end_step(turn, step)
        log.end_turn(turn)
        if draw(st.booleans()):
            log.add("session/title", {"title": "t"}, ignorable=True)
    return log.events


def shown(events: list[Event]) -> str:
    return "\n".join(encode_json_bytes(event_to_wire(e)).decode() for e in events)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(loop_logs())
def test_p30_to_p35_every_crash_prefix_repairs_to_a_valid_log(log: list[Event]) -> None:
    assert check_invariants(log) == (), shown(log)
    for k in range(len(log) + 1):
        prefix = log[:k]
        closers = interrupted_turn_closers(prefix)
        repaired = [*prefix, *closers]
        context = f"prefix of {k} events:\n{shown(prefix)}\nclosers:\n{shown(list(closers))}"
        SessionLog.restore(repaired)  # P30: passes restore admission
        assert check_invariants(repaired) == (), context
        assert interrupted_turn_closers(repaired) == (), context  # P31
        assert [e.seq for e in closers] == list(range(k, k + len(closers))), context  # P32
        assert all(e.time == prefix[-1].time for e in closers), context
        opened = [e for e in prefix if e.type in ("turn/start", "turn/end")]
        turn_open = bool(opened) and opened[-1].type == "turn/start"
        assert bool(closers) == turn_open, context  # P33
        if turn_open:
            assert closers[-1].type == "turn/end"
            assert closers[-1].data == {
                "turn": opened[-1].data["turn"],
                "reason": {"kind": "interrupted"},
            }
            steps = [e for e in prefix if e.type in ("step/start", "step/end", "turn/start")]
            step_closed = len(closers) >= 2 and closers[-2].type == "step/end"
            assert step_closed == (steps[-1].type == "step/start"), context
        assert interrupted_turn_closers(prefix) == closers  # P35
