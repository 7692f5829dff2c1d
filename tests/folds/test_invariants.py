"""Relational invariants: turn/step enclosure, numbering and call pairing
(docs/format/folds.md §6)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from hypothesis import assume, given, note
from hypothesis import strategies as st

from kernel.errors import (
    EventShapeError,
    InvariantViolation,
    KernelError,
    MessageShapeError,
    SurfaceMarkerError,
)
from kernel.folds.invariants import (
    RULES,
    InvariantState,
    Violation,
    check_invariants,
    check_invariants_strict,
)
from kernel.values.events import APPEND, Event, Replace
from kernel.values.json import thaw, view
from properties import strategies as gen
from properties.laws import as_events


class Log:
    """Builds a log with contiguous seqs; each helper returns the seq it used."""

    def __init__(self, events: list[Event] | None = None) -> None:
        self.events: list[Event] = list(events or [])

    def add(self, kind: str, data: Any, op: Any = None, sources: Any = None) -> int:
        seq = len(self.events)
        self.events.append(Event(kind, seq, seq * 10, data, op, sources))
        return seq

    def turn_start(self, turn: int) -> int:
        return self.add("turn/start", {"turn": turn})

    def turn_end(self, turn: int, kind: str = "completed") -> int:
        reason: dict[str, Any] = {"kind": kind}
        if kind == "error":
            reason["error"] = {"message": "boom", "code": "UNKNOWN"}
        return self.add("turn/end", {"turn": turn, "reason": reason})

    def step_start(self, turn: int, step: int) -> int:
        return self.add("step/start", {"turn": turn, "step": step})

    def step_end(self, turn: int, step: int) -> int:
        return self.add("step/end", {"turn": turn, "step": step})

    def chunk(self, turn: int, step: int) -> int:
        chunk = {"type": "text-delta", "index": 0, "text": "x"}
        return self.add("assistant/chunk", {"turn": turn, "step": step, "chunk": chunk})

    def assistant(self, turn: int, step: int, *calls: str) -> int:
        content: list[Any] = [{"type": "text", "text": "ok"}]
        content += [{"type": "tool-call", "id": c, "name": "ls", "arguments": "{}"} for c in calls]
        msg = {
            "id": f"a{len(self.events)}",
            "role": "assistant",
            "content": content,
            "source": {"kind": "model", "provider": "p", "model": "m"},
        }
        return self.add("assistant/message", {"turn": turn, "step": step, "message": msg}, APPEND)

    def call(self, turn: int, step: int, call_id: str) -> int:
        data = {"turn": turn, "step": step, "callId": call_id, "name": "ls", "arguments": "{}"}
        return self.add("tool/call", data)

    def result(
        self,
        turn: int,
        step: int,
        call_id: str,
        *,
        op: Any = APPEND,
        sources: Any = None,
        is_error: Any = None,
        code: str | None = None,
    ) -> int:
        block: dict[str, Any] = {
            "type": "tool-result",
            "toolCallId": call_id,
            "content": [{"type": "text", "text": "out"}],
        }
        if is_error is not None:
            block["isError"] = is_error
        msg = {
            "id": f"r{len(self.events)}",
            "role": "user",
            "content": [block],
            "source": {"kind": "tool", "callId": call_id},
        }
        data: dict[str, Any] = {"turn": turn, "step": step, "message": msg}
        if code is not None:
            data["error"] = {"name": "ToolNotStartedError", "code": code}
        return self.add("tool/result", data, op, sources)

    def user(self) -> int:
        msg = {
            "id": f"u{len(self.events)}",
            "role": "user",
            "content": [],
            "source": {"kind": "user"},
        }
        return self.add("user/message", msg, APPEND)

    def header(self) -> int:
        return self.add(
            "request/header",
            {"header": {"config": {"provider": "p", "model": "m"}}, "reason": "initial"},
        )

    def context(self) -> int:
        return self.add("request/context", {"provider": "p", "model": "m"})

    def todos(self) -> int:
        return self.add("todo/write", {"todos": []})

    def end_seed(self) -> int:
        return self.add("session/end-seed", {})

    def extension(self) -> int:
        return self.add("session/title", {"title": "t"})


def violations(log: Log) -> list[tuple[int, str]]:
    return [(v.seq, v.rule) for v in check_invariants(log.events)]


def assert_rejected(log: Log, seq: int, *rules: str) -> None:
    """The prefix before `seq` is clean and the event at `seq` fails exactly `rules`, in order."""
    assert check_invariants(log.events[:seq]) == ()
    assert violations(log) == [(seq, rule) for rule in rules]
    with pytest.raises(InvariantViolation) as caught:
        check_invariants_strict(log.events)
    assert caught.value.seq == seq
    assert rules[0] in str(caught.value) and f"seq {seq}" in str(caught.value)


# -- §6.3 accepted -----------------------------------------------------------------------------


def test_invariants_6_3_accepted_example() -> None:
    log = Log()
    log.turn_start(1)
    log.user()
    log.step_start(1, 1)
    log.chunk(1, 1)
    log.assistant(1, 1, "c1")
    log.call(1, 1, "c1")
    log.result(1, 1, "c1", sources=[5])
    log.step_end(1, 1)
    log.turn_end(1)
    assert check_invariants(log.events) == ()
    check_invariants_strict(log.events)


# -- §6.3 rejected, each row by itself after its prefix ----------------------------------------


def test_invariants_6_3_turn_start_while_turn_open() -> None:
    log = Log()
    log.turn_start(1)
    seq = log.turn_start(2)
    # turn 2 is also not next_turn (1): both conditions fail, in the order §6.2 lists them
    assert_rejected(log, seq, "turn-start-while-open", "turn-number")


def test_invariants_6_3_turn_end_does_not_match_open_turn() -> None:
    log = Log()
    log.turn_start(1)
    assert_rejected(log, log.turn_end(2), "turn-end-mismatch")


def test_invariants_6_3_turn_number_gap() -> None:
    log = Log()
    log.turn_start(1)
    log.turn_end(1)
    seq = log.turn_start(3)
    assert_rejected(log, seq, "turn-number")
    assert "expected turn 2" in check_invariants(log.events)[0].message


def test_invariants_6_3_step_start_names_another_turn() -> None:
    log = Log()
    log.turn_start(1)
    assert_rejected(log, log.step_start(2, 1), "step-start-turn")


def test_invariants_6_3_step_start_while_step_open() -> None:
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    seq = log.step_start(1, 2)
    assert_rejected(log, seq, "step-start-while-open", "step-number")
    assert "step 1 still open" in check_invariants(log.events)[0].message


def test_invariants_6_3_turn_end_while_step_open() -> None:
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    assert_rejected(log, log.turn_end(1), "turn-end-open-step")


def test_invariants_6_3_step_number_gap() -> None:
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    log.step_end(1, 1)
    seq = log.step_start(1, 3)
    assert_rejected(log, seq, "step-number")
    assert "expected step 2" in check_invariants(log.events)[0].message


def test_invariants_6_3_chunk_without_open_step() -> None:
    log = Log()
    log.turn_start(1)
    assert_rejected(log, log.chunk(1, 1), "outside-step")


def test_invariants_6_3_result_without_prior_call() -> None:
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    assert_rejected(log, log.result(1, 1, "ghost"), "result-without-call")


def test_invariants_6_3_result_for_call_of_earlier_step() -> None:
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    log.assistant(1, 1, "c1")
    log.call(1, 1, "c1")
    log.step_end(1, 1)
    log.step_start(1, 2)
    assert_rejected(log, log.result(1, 2, "c1"), "result-without-call")


def test_invariants_6_3_request_context_outside_turn() -> None:
    log = Log()
    assert_rejected(log, log.context(), "outside-turn")


def test_invariants_6_3_result_replacement_outside_turn() -> None:
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    log.assistant(1, 1, "c1")
    log.call(1, 1, "c1")
    result = log.result(1, 1, "c1")
    log.step_end(1, 1)
    log.turn_end(1)
    seq = log.result(1, 1, "c1", op=Replace(result, result), sources=[result])
    assert_rejected(log, seq, "outside-turn")


@pytest.mark.parametrize("is_error", [None, False], ids=["isError-absent", "isError-false"])
def test_invariants_6_3_not_started_code_alone_does_not_exempt(is_error: Any) -> None:
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    seq = log.result(1, 1, "x", is_error=is_error, code="TOOL_NOT_STARTED")
    assert_rejected(log, seq, "result-without-call")


# -- §6.3 accepted edge cases ------------------------------------------------------------------


def test_invariants_6_3_user_message_with_no_open_turn() -> None:
    log = Log()
    log.user()
    log.turn_start(1)
    log.turn_end(1)
    log.user()
    assert check_invariants(log.events) == ()


def test_invariants_6_3_extension_event_between_turns() -> None:
    log = Log()
    log.extension()
    log.turn_start(1)
    log.turn_end(1)
    log.extension()
    log.add("x/unknown", None)
    log.turn_start(2)
    assert check_invariants(log.events) == ()


def test_invariants_6_3_not_started_result_is_exempt() -> None:
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    log.result(1, 1, "x", is_error=True, code="TOOL_NOT_STARTED")
    assert check_invariants(log.events) == ()


def test_invariants_6_3_step_may_end_with_a_call_unanswered() -> None:
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    log.assistant(1, 1, "c1")
    log.call(1, 1, "c1")
    log.step_end(1, 1)
    log.turn_end(1, "error")
    assert check_invariants(log.events) == ()


def test_invariants_6_3_end_seed_inside_an_open_turn() -> None:
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    log.end_seed()
    log.step_end(1, 1)
    log.turn_end(1)
    assert check_invariants(log.events) == ()


def test_invariants_6_3_replacement_in_a_later_turn_of_an_earlier_result() -> None:
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    log.assistant(1, 1, "c1")
    log.call(1, 1, "c1")
    result = log.result(1, 1, "c1")
    log.step_end(1, 1)
    log.turn_end(1)
    for turn in (2, 3):
        log.turn_start(turn)
        if turn == 3:
            log.result(1, 1, "c1", op=Replace(result, result), sources=[result])
        log.turn_end(turn)
    assert check_invariants(log.events) == ()


# -- §6.2 checks, transitions and reporting ----------------------------------------------------


def test_invariants_6_2_reporting_continues_with_the_declared_state() -> None:
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    log.turn_end(1)  # step 1 still open: reported, and open_step stays 1
    log.turn_start(2)
    log.step_start(2, 1)  # reports "step 1 still open" too
    assert violations(log) == [(2, "turn-end-open-step"), (4, "step-start-while-open")]
    assert "step 1 still open" in check_invariants(log.events)[1].message


def test_invariants_6_2_seq_must_increase() -> None:
    events = [
        Event("turn/start", 0, 0, {"turn": 1}),
        Event("turn/end", 0, 0, {"turn": 1, "reason": {"kind": "completed"}}),
    ]
    assert [(v.seq, v.rule) for v in check_invariants(events)] == [(0, "seq-order")]


def test_invariants_6_2_steps_restart_at_one_in_each_turn() -> None:
    log = Log()
    for turn in (1, 2):
        log.turn_start(turn)
        for step in (1, 2):
            log.step_start(turn, step)
            log.step_end(turn, step)
        log.turn_end(turn)
    assert check_invariants(log.events) == ()


def test_invariants_6_2_turn_may_have_zero_steps() -> None:
    log = Log()
    log.turn_start(1)
    log.turn_end(1, "blocked")
    assert check_invariants(log.events) == ()


@pytest.mark.parametrize("kind", ["todos", "header", "context"])
def test_invariants_6_2_turn_scoped_events_need_an_open_turn(kind: str) -> None:
    log = Log()
    getattr(log, kind)()
    log.turn_start(1)
    getattr(log, kind)()
    log.turn_end(1)
    assert violations(log) == [(0, "outside-turn")]


@pytest.mark.parametrize(
    ("number", "accepted"),
    [
        *[(1, True), (1.0, True), (2**53 - 1, False)],
        *[(0, None), (-1, None), (2**53, None), (True, None), (1.5, None), ("1", None)],
        (None, None),
    ],
)
def test_invariants_6_2_turn_numbers_are_positive_safe_integers(
    number: Any, accepted: bool | None
) -> None:
    # accepted: the number is read and judged (False: it is not the next turn); None: the
    # payload is malformed (R12) and the tracker cannot read it.
    log = Log()
    log.add("turn/start", {"turn": 1})
    # A view, not an admitted payload: 2**53 is not lossless JSON, and the tracker must still
    # refuse it rather than read it.
    log.events[0] = msgspec.structs.replace(log.events[0], data=view({"turn": number}))
    if accepted is None:
        with pytest.raises(EventShapeError, match=r"turn/start turn must be a positive safe"):
            check_invariants(log.events)
    else:
        assert violations(log) == ([] if accepted else [(0, "turn-number")])


def test_invariants_6_2_step_end_names_the_open_step() -> None:
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    seq = log.step_end(1, 2)
    assert_rejected(log, seq, "step-end-mismatch")
    state = InvariantState()
    for event in log.events:
        state, _ = state.step(event)
    # the transition is applied anyway: pending cleared, step closed, next_step advanced
    assert (state.open_step, state.next_step, state.pending_calls) == (None, 2, frozenset())


def test_invariants_6_2_pending_tracks_tool_calls_not_assistant_blocks() -> None:
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    log.assistant(1, 1, "c1")
    seq = log.result(1, 1, "c1")  # requested, but no tool/call record
    assert_rejected(log, seq, "result-without-call")


def test_invariants_6_2_a_call_is_answered_once() -> None:
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    log.call(1, 1, "c1")
    log.result(1, 1, "c1")
    seq = log.result(1, 1, "c1")
    assert_rejected(log, seq, "result-without-call")


def test_invariants_6_2_one_event_can_fail_several_conditions() -> None:
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    seq = log.result(2, 1, "ghost")
    assert violations(log) == [(seq, "outside-step"), (seq, "result-without-call")]


def test_invariants_6_2_violation_carries_seq_rule_message() -> None:
    log = Log()
    log.turn_start(2)
    (only,) = check_invariants(log.events)
    assert only == Violation(0, "turn-number", only.message)
    assert "expected turn 1" in only.message
    assert all(v.rule in RULES for v in check_invariants(log.events))


@pytest.mark.parametrize(
    ("kind", "data", "error"),
    [
        ("turn/start", {}, EventShapeError),
        ("turn/start", None, EventShapeError),
        ("turn/start", {"turn": "1"}, EventShapeError),
        ("turn/end", {"turn": 0, "reason": {"kind": "completed"}}, EventShapeError),
        ("step/start", {"turn": 1}, EventShapeError),
        ("assistant/chunk", {"turn": 1, "step": True}, EventShapeError),
        ("tool/call", {"turn": 1, "step": 1, "callId": ""}, EventShapeError),
        ("tool/call", {"turn": 1, "step": 1, "callId": 5}, EventShapeError),
        ("tool/call", {"turn": 1, "step": 1, "callId": True}, EventShapeError),
        ("tool/result", {"turn": 1, "step": 1}, MessageShapeError),
        (
            "tool/result",
            {"turn": 1, "step": 1, "message": {"source": {"kind": "tool"}}},
            MessageShapeError,
        ),
    ],
)
def test_invariants_malformed_payload_raises_a_shape_error_naming_the_seq(
    kind: str, data: Any, error: type[Exception]
) -> None:
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    log.add(kind, data, APPEND if kind == "tool/result" else None)
    with pytest.raises(error) as caught:
        check_invariants(log.events)
    assert getattr(caught.value, "seq", None) == 2
    assert "seq 2" in str(caught.value)


@pytest.mark.parametrize(
    ("kind", "carried", "error"),
    [
        ("tool/call", "tool/result", EventShapeError),
        ("tool/result", "tool/call", MessageShapeError),
    ],
)
def test_invariants_a_loaded_payload_in_an_event_of_another_type_is_read_for_that_type(
    kind: str, carried: str, error: type[Exception]
) -> None:
    # A loaded call's payload names its call id at the top; a loaded result's names it in
    # its message's source. Carried by an event of the other type, each payload is read as
    # that type reads it, and lacks what it looks for.
    from kernel.storage.jsonl import load_jsonl, write_jsonl

    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    log.assistant(1, 1, "c1")
    log.call(1, 1, "c1")
    log.result(1, 1, "c1")
    log.step_end(1, 1)
    log.turn_end(1)  # a closed turn: the load builds none of its payloads
    header = {"version": 0, "id": "s", "createdAt": 1}
    loaded = list(load_jsonl(write_jsonl(header, log.events), now=0).events)
    at = next(i for i, e in enumerate(loaded) if e.type == kind)
    source = next(e for e in loaded if e.type == carried)
    loaded[at] = msgspec.structs.replace(loaded[at], data=source.data)
    with pytest.raises(error) as caught:
        check_invariants(loaded)
    with pytest.raises(error) as stepped:
        _stepwise(loaded)
    assert str(caught.value) == str(stepped.value)
    assert caught.value.seq == at  # type: ignore[attr-defined]


def test_invariants_tool_result_without_surface_op_is_a_marker_error() -> None:
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    log.call(1, 1, "c1")
    log.result(1, 1, "c1", op=None)
    with pytest.raises(SurfaceMarkerError):
        check_invariants(log.events)


def test_invariants_accept_any_iterable() -> None:
    log = Log()
    log.turn_start(1)
    log.turn_start(2)
    assert check_invariants(iter(log.events)) == check_invariants(log.events)
    with pytest.raises(InvariantViolation):
        check_invariants_strict(iter(log.events))


# -- generators --------------------------------------------------------------------------------


@st.composite
def loop_logs(draw: st.DrawFn, complete: bool = False) -> list[Event]:
    """Well-formed logs shaped like model-loop output (a light G-loop), maybe crash-cut."""
    log = Log()
    results: list[int] = []
    for turn in range(1, draw(st.integers(0, 3)) + 1):
        for _ in range(draw(st.integers(0, 2))):
            draw(st.sampled_from([log.user, log.extension, log.end_seed]))()
        log.turn_start(turn)
        if draw(st.booleans()):
            log.user()
        for step in range(1, draw(st.integers(0, 3)) + 1):
            log.step_start(turn, step)
            if draw(st.booleans()):
                log.header()
            if draw(st.booleans()):
                log.context()
            for _ in range(draw(st.integers(0, 2))):
                log.chunk(turn, step)
            calls = [f"c{turn}.{step}.{i}" for i in range(draw(st.integers(0, 3)))]
            log.assistant(turn, step, *calls)
            recorded = [c for c in calls if draw(st.integers(0, 4)) > 0]
            call_seqs = {c: log.call(turn, step, c) for c in recorded}
            for c in draw(st.permutations(calls)):
                if draw(st.integers(0, 4)) == 0:
                    log.user()
                if c in call_seqs:
                    results.append(log.result(turn, step, c, sources=[call_seqs[c]]))
                else:
                    log.result(turn, step, c, is_error=True, code="TOOL_NOT_STARTED")
            if draw(st.integers(0, 3)) == 0:
                log.todos()
            if results and draw(st.integers(0, 4)) == 0:
                target = results.pop(draw(st.integers(0, len(results) - 1)))
                old = log.events[target].data
                log.result(
                    old["turn"],
                    old["step"],
                    f"{old['message']['source']['callId']}",
                    op=Replace(target, target),
                    sources=[target],
                )
            log.step_end(turn, step)
        log.turn_end(turn, draw(st.sampled_from(["completed", "error", "blocked", "max-tokens"])))
    if not complete and log.events and draw(st.booleans()):
        return log.events[: draw(st.integers(0, len(log.events)))]
    return log.events


def _renumbered(events: list[Event]) -> list[Event]:
    return [msgspec.structs.replace(e, seq=i) for i, e in enumerate(events)]


def _with_data(event: Event, **changes: Any) -> Event:
    return msgspec.structs.replace(event, data={**event.data, **changes})


_STEP_SCOPED = ("step/start", "step/end", "assistant/chunk", "assistant/message", "tool/call")


def perturbations(events: list[Event]) -> list[tuple[str, Any]]:
    """The P29 perturbations of a complete loop log, as (description, function of new value)."""
    out: list[tuple[str, Any]] = []
    for i, e in enumerate(events):
        if e.type in ("turn/start", "turn/end"):
            out.append((f"turn of {e.type}@{i}", ("turn", i)))
        if e.type in _STEP_SCOPED or (e.type == "tool/result" and e.surface_op == APPEND):
            out.append((f"step of {e.type}@{i}", ("step", i)))
        if e.type == "step/end":
            out.append((f"delete step/end@{i}", ("delete", i)))
        if e.type == "turn/end" and any(x.type == "turn/start" for x in events[i:]):
            out.append((f"delete turn/end@{i}", ("delete", i)))
        if e.type == "request/header":
            out.append((f"move request/header@{i} out of its turn", ("move", i)))
    return out


def apply_perturbation(events: list[Event], how: tuple[str, int], draw: Any) -> list[Event]:
    kind, i = how
    out = list(events)
    if kind in ("turn", "step"):
        old = events[i].data[kind]
        new = draw(st.integers(1, 6).filter(lambda n: n != old), label=f"new {kind}")
        out[i] = _with_data(events[i], **{kind: new})
        return out
    moved = out.pop(i)
    if kind == "delete":
        return _renumbered(out)
    outside = [0] + [j + 1 for j, e in enumerate(out) if e.type == "turn/end"]
    out.insert(draw(st.sampled_from(outside), label="new position"), moved)
    return _renumbered(out)


# -- properties P28, P28a, P29 -----------------------------------------------------------------


def show(events: list[Event]) -> str:
    return "\n".join(f"{e.seq} {e.type} {e.surface_op!r} {e.data!r}" for e in events)


@given(loop_logs())
def test_p28_loop_logs_are_well_formed(events: list[Event]) -> None:
    note("log:\n" + show(events))
    assert check_invariants(events) == (), "a well-formed loop log reported violations"
    check_invariants_strict(events)


@given(loop_logs(complete=True), st.data())
def test_p29_perturbations_are_caught(events: list[Event], data: Any) -> None:
    choices = perturbations(events)
    if not choices:
        return
    what, how = data.draw(st.sampled_from(choices), label="perturbation")
    changed = apply_perturbation(events, how, data.draw)
    note(f"{what}; perturbed log:\n" + show(changed))
    assert check_invariants(changed), f"{what} went unnoticed"
    with pytest.raises(InvariantViolation):
        check_invariants_strict(changed)


def reference_violations(events: list[Event]) -> Iterator[tuple[int, str]]:
    """An independent, literal reading of the docs/format/folds.md §6.2 table, lazily: `(seq, rule)`
    pairs.

    Each failed condition is yielded and the transition applied regardless, as §6.2
    "Reporting" says; taking only the first pair makes it a fail-fast checker.
    """
    last, turn, step, next_turn, next_step = -1, None, None, 1, 1
    pending: set[str] = set()
    for e in events:
        d = e.data
        if e.seq <= last:
            yield e.seq, "seq-order"
        last = e.seq
        if e.type == "turn/start":
            if turn is not None:
                yield e.seq, "turn-start-while-open"
            if d["turn"] != next_turn:
                yield e.seq, "turn-number"
            turn, next_step = d["turn"], 1
        elif e.type == "turn/end":
            if d["turn"] != turn:
                yield e.seq, "turn-end-mismatch"
            if step is not None:
                yield e.seq, "turn-end-open-step"
            turn, next_turn = None, next_turn + 1
        elif e.type == "step/start":
            if d["turn"] != turn:
                yield e.seq, "step-start-turn"
            if step is not None:
                yield e.seq, "step-start-while-open"
            if d["step"] != next_step:
                yield e.seq, "step-number"
            step = d["step"]
        elif e.type == "step/end":
            if turn is None or (d["turn"], d["step"]) != (turn, step):
                yield e.seq, "step-end-mismatch"
            pending, step, next_step = set(), None, next_step + 1
        elif e.type in ("assistant/chunk", "assistant/message", "tool/call") or (
            e.type == "tool/result" and e.surface_op == APPEND
        ):
            if turn is None or (d["turn"], d["step"]) != (turn, step):
                yield e.seq, "outside-step"
            if e.type == "tool/call":
                pending.add(d["callId"])
            if e.type == "tool/result":
                call_id = d["message"]["source"]["callId"]
                block = d["message"]["content"][0]
                exempt = (
                    block.get("isError") is True
                    and (d.get("error") or {}).get("code") == "TOOL_NOT_STARTED"
                )
                if call_id not in pending and not exempt:
                    yield e.seq, "result-without-call"
                pending.discard(call_id)
        elif e.type in ("tool/result", "todo/write", "request/header", "request/context"):
            if turn is None:
                yield e.seq, "outside-turn"


def fail_fast(events: list[Event]) -> tuple[int, str] | None:
    """The first failure only: the reference stops there (it is lazy)."""
    return next(reference_violations(events), None)


@st.composite
def random_logs(draw: st.DrawFn) -> list[Event]:
    """Core-vocabulary events whose numbers mostly follow the log so far: deep, often ill-formed.

    Call ids come from a pool of two, so results meet calls of earlier steps and
    answered calls; results carry every combination of `isError` and error code.
    """
    log = Log()
    turn: int | None = None
    step: int | None = None
    next_turn = next_step = 1

    def number(expected: int | None) -> int:
        if expected is not None and draw(st.sampled_from([True] * 12 + [False])):
            return expected
        return draw(st.integers(1, 3))

    anything = list(range(11))
    for _ in range(draw(st.integers(0, 24))):
        if turn is None:
            likely = [0, 0, 0, 10]
        elif step is None:
            likely = [2, 2, 2, 1, 9, 10]
        else:
            likely = [3, 4, 5, 6, 6, 6, 7, 7, 7, 7, 8, 9]
        kind = draw(st.sampled_from(likely * 24 + anything))
        t = number(next_turn if kind == 0 else turn)
        s = number(next_step if kind == 2 else step)
        call = draw(st.sampled_from(["a", "b"]))
        if kind == 0:
            log.turn_start(t)
            turn, next_step = t, 1
        elif kind == 1:
            log.turn_end(t)
            turn, next_turn = None, next_turn + 1
        elif kind == 2:
            log.step_start(t, s)
            step = s
        elif kind == 3:
            log.step_end(t, s)
            step, next_step = None, next_step + 1
        elif kind == 4:
            log.chunk(t, s)
        elif kind == 5:
            log.assistant(t, s, call)
        elif kind == 6:
            log.call(t, s, call)
        elif kind in (7, 8):
            log.result(
                t,
                s,
                call,
                op=Replace(0, 0) if kind == 8 else APPEND,
                is_error=draw(st.sampled_from([None, True, False])),
                code=draw(st.sampled_from([None, "TOOL_NOT_STARTED", "OTHER"])),
            )
        elif kind == 9:
            draw(st.sampled_from([log.header, log.context, log.todos]))()
        else:
            draw(st.sampled_from([log.user, log.end_seed, log.extension]))()
        if draw(st.sampled_from([False] * 30 + [True])):  # an out-of-order seq
            last = log.events[-1]
            log.events[-1] = msgspec.structs.replace(
                last, seq=max(0, last.seq - draw(st.integers(1, 2)))
            )
    return log.events


@st.composite
def perturbed_logs(draw: st.DrawFn) -> list[Event]:
    events = draw(loop_logs(complete=True))
    choices = perturbations(events)
    if not choices:
        return events
    _, how = draw(st.sampled_from(choices))
    return apply_perturbation(events, how, draw)


@pytest.mark.slow
@given(random_logs())
def test_p28a_all_violations_agree_with_a_fail_fast_checker(events: list[Event]) -> None:
    agrees_with_fail_fast(events)


@given(st.one_of(loop_logs(), perturbed_logs()))
def test_p28a_all_violations_agree_with_a_fail_fast_checker_on_loop_logs(
    events: list[Event],
) -> None:
    agrees_with_fail_fast(events)


def agrees_with_fail_fast(events: list[Event]) -> None:
    """P28a: one violation per failed condition, the first being the fail-fast one."""
    note("log:\n" + show(events))
    found = check_invariants(events)
    first = fail_fast(events)
    assert (found == ()) == (first is None), "check_invariants is empty iff fail-fast accepts"
    if first is not None:
        assert (found[0].seq, found[0].rule) == first, "first violation differs from fail-fast"
        with pytest.raises(InvariantViolation) as caught:
            check_invariants_strict(events)
        assert caught.value.seq == first[0]
    else:
        check_invariants_strict(events)
    assert [(v.seq, v.rule) for v in found] == list(reference_violations(events)), (
        "check_invariants does not report every failed condition in order"
    )
    for k in range(len(events) + 1):
        prefix = check_invariants(events[:k])
        assert found[: len(prefix)] == prefix, f"violations of the first {k} events are no prefix"


def _stepwise(events: list[Event]) -> tuple[Violation, ...]:
    state, found = InvariantState(), []
    for event in events:
        state, violations = state.step(event)
        found.extend(violations)
    return tuple(found)


# Each change takes any value an earlier change may have left: the number changes leave
# a value that is no longer an int as it is.
_CHANGES = {
    "next": lambda n: n + 1 if type(n) is int else n,
    "previous": lambda n: n - 1 if type(n) is int else n,
    "float": lambda n: float(n) if type(n) is int else n,
    "bool": lambda n: True,
    "null": lambda n: None,
    "text": str,
    "huge": lambda n: 2**60,
}


def test_the_changes_to_a_chunk_compose() -> None:
    # Found under the deep profile: `null` then `next` on the same member raised a
    # TypeError in the test itself (None + 1), before the tracker was asked anything.
    for first, then in itertools.product(_CHANGES.values(), repeat=2):
        then(first(3))


@pytest.mark.slow
@given(
    gen.loop_logs(rich=True, max_actions=4, min_actions=1, min_steps=1, shape="any"),
    st.lists(
        st.tuples(
            st.integers(0, 10**6),
            st.sampled_from(["turn", "step"]),
            st.sampled_from(list(_CHANGES)),
        ),
        max_size=3,
    ),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(-2, 2)), max_size=2),
)
def test_check_invariants_is_the_tracker_folded_step_by_step(
    log: Any, changes: list[tuple[int, str, str]], seq_shifts: list[tuple[int, int]]
) -> None:
    # check_invariants passes over quiet chunks without a step; whatever the chunks
    # name (the open step or another, well typed or not) and however seqs run, it
    # must report what stepping the tracker through every event reports.
    events = list(as_events(log))
    chunks = [i for i, e in enumerate(events) if e.type == "assistant/chunk"]
    for pick, key, change in changes:
        if chunks:
            i = chunks[pick % len(chunks)]
            data = thaw(events[i].data)
            data[key] = _CHANGES[change](data[key])
            events[i] = msgspec.structs.replace(events[i], data=view(data))
    for pick, shift in seq_shifts:
        if events:
            i = pick % len(events)
            events[i] = msgspec.structs.replace(events[i], seq=events[i].seq + shift)
    try:
        expected: Any = _stepwise(events)
    except KernelError as exc:
        expected = (type(exc), str(exc))
    try:
        got: Any = check_invariants(events)
    except KernelError as exc:
        got = (type(exc), str(exc))
    assert got == expected


@pytest.mark.parametrize(
    ("turn", "step", "rule"),
    [(2, 1, None), (3, 1, "outside-step"), (2, 2, "outside-step"), (1, 1, "outside-step")],
)
def test_a_chunk_must_name_the_open_step_even_between_quiet_chunks(
    turn: int, step: int, rule: str | None
) -> None:
    log = Log()
    log.turn_start(1)
    log.turn_end(1)
    log.turn_start(2)
    log.step_start(2, 1)
    log.chunk(2, 1)
    odd = log.chunk(turn, step)
    log.chunk(2, 1)
    assert violations(log) == ([] if rule is None else [(odd, rule)])


@given(
    gen.loop_logs(rich=True, max_actions=4, min_actions=1, min_steps=1, shape="any"),
    st.integers(0, 10**6),
    st.booleans(),
)
def test_check_invariants_of_a_loaded_log_is_the_tracker_folded_step_by_step(
    log: Any, pick: int, retag: bool
) -> None:
    # A loaded log's chunk members share their packed row as payload source, and
    # check_invariants passes over the members of a row it has passed over once.
    from kernel.storage.jsonl import load_jsonl, write_jsonl

    events = list(as_events(log))
    chunks = [i for i, e in enumerate(events) if e.type == "assistant/chunk"]
    if retag and chunks:  # one chunk names a step that is not open
        i = chunks[pick % len(chunks)]
        data = thaw(events[i].data)
        data["step"] += 1
        events[i] = msgspec.structs.replace(events[i], data=view(data))
    header = {"version": 0, "id": "s", "createdAt": 1}
    loaded = load_jsonl(write_jsonl(header, events), now=0).events
    assert check_invariants(loaded) == _stepwise(list(loaded))


def _outcome(check: Any, events: Any) -> Any:
    try:
        return check(events)
    except KernelError as exc:
        return (type(exc), str(exc))


def _perturbed(events: list[Event], pick: int, what: str, delta: int) -> None:
    """Change one event in place: a turn or step it names, the call id of a call or a
    result (both ids of a result, so the log still loads), or the event itself, replaced
    by an ignorable extension event at its seq."""
    i = pick % len(events)
    event = events[i]
    if what == "drop":
        events[i] = Event("x/noise", event.seq, event.time, {}, ignorable=True)
        return
    data = thaw(event.data)
    if type(data) is not dict:
        return
    if what in ("turn", "step") and type(data.get(what)) is int:
        data[what] = max(1, data[what] + delta)
    elif what == "callId" and event.type == "tool/call":
        data["callId"] += "x"
    elif what == "callId" and event.type == "tool/result":
        message = data["message"]
        message["source"]["callId"] += "x"
        for block in message["content"]:
            if "toolCallId" in block:
                block["toolCallId"] += "x"
    events[i] = msgspec.structs.replace(event, data=view(data))


@given(
    gen.loop_logs(rich=True, max_actions=4, min_actions=1, min_steps=1, shape="any"),
    st.lists(
        st.tuples(
            st.integers(0, 10**6),
            st.sampled_from(["turn", "step", "callId", "drop"]),
            st.sampled_from([-1, 1]),
        ),
        max_size=3,
    ),
    st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)),
    st.booleans(),
)
def test_check_invariants_of_a_perturbed_loaded_log_is_the_tracker_folded_step_by_step(
    log: Any, changes: list[tuple[int, str, int]], swap: tuple[int, int], pack: bool
) -> None:
    # A loaded log's stepped events answer their turn, step and call id from what the
    # load read, and a loader's own tuple passes over its chunk rows whole. Whatever the
    # events name (boundaries out of order, a call or result with another id, an event
    # missing), check_invariants must answer what stepping the tracker answers: over the
    # loader's tuple, over a copy of it, and with two events' payloads swapped (a
    # payload read for one type, in an event of another).
    from kernel.storage.jsonl import load_jsonl, write_jsonl

    events = list(as_events(log))
    for pick, what, delta in changes if events else ():
        _perturbed(events, pick, what, delta)
    header = {"version": 0, "id": "s", "createdAt": 1}
    try:  # an event replaced that a later replacement names: no log to load
        loaded = load_jsonl(write_jsonl(header, events, pack_chunks=pack), now=0).events
    except KernelError:
        assume(False)
    assume(loaded)
    expected = _outcome(_stepwise, list(loaded))
    assert _outcome(check_invariants, loaded) == expected
    assert _outcome(check_invariants, tuple(loaded)) == expected
    swapped = list(loaded)
    a, b = (pick % len(swapped) for pick in swap)
    swapped[a] = msgspec.structs.replace(swapped[a], data=loaded[b].data)
    swapped[b] = msgspec.structs.replace(swapped[b], data=loaded[a].data)
    assert _outcome(check_invariants, swapped) == _outcome(_stepwise, swapped)


@pytest.mark.parametrize("at", [1, 2, 3])
def test_a_row_member_changed_outside_the_loaders_tuple_is_checked(at: int) -> None:
    # A loader's own tuple passes over a chunk row whole; a list of the same events with
    # one member replaced (a chunk naming a step that is not open) must not be.
    from kernel.storage.jsonl import load_jsonl, write_jsonl

    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    for _ in range(4):
        log.chunk(1, 1)
    log.step_end(1, 1)
    log.turn_end(1)
    header = {"version": 0, "id": "s", "createdAt": 1}
    loaded = load_jsonl(write_jsonl(header, log.events, pack_chunks=True), now=0).events
    assert loaded[2].data._value is loaded[5].data._value  # one row holds the four chunks
    events = list(loaded)
    stray = {"turn": 1, "step": 2, "chunk": {"type": "text-delta", "index": 0, "text": "x"}}
    events[1 + at] = msgspec.structs.replace(events[1 + at], data=stray)
    assert [(v.seq, v.rule) for v in check_invariants(events)] == [(1 + at, "outside-step")]
    assert check_invariants(loaded) == ()


def test_a_payload_shared_by_chunks_of_two_steps_is_checked_in_each() -> None:
    # Passing over a chunk because its payload source is the last one passed over
    # holds only until the next step: the same payload may name a step now closed.
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    log.chunk(1, 1)
    shared = log.events[-1].data
    log.add("assistant/chunk", shared)
    log.step_end(1, 1)
    log.step_start(1, 2)
    stale = log.add("assistant/chunk", shared)
    assert violations(log) == [(stale, "outside-step")]


_PEEKED_KEYS = (
    frozenset({"turn"}),
    frozenset({"turn", "step"}),
    frozenset({"turn", "step", "callId"}),
    frozenset({"message"}),  # no source answers it: the payload is built
)


@given(gen.loop_logs(rich=True, max_actions=4, min_actions=1, min_steps=1, shape="any"))
def test_the_tracker_reads_the_members_kernel_values_json_reads(log: Any) -> None:
    # The tracker asks a payload's lazy source for the members it reads without the
    # general `members` call, and falls back to that call when the source cannot
    # answer; either way it must read what `members` reads, for every kind of source
    # a loaded log holds (stored lines, chunk rows, built payloads, member views).
    from kernel.folds.invariants import _peek
    from kernel.storage.jsonl import load_jsonl, write_jsonl
    from kernel.values.json import FrozenObject, members, object_member

    header = {"version": 0, "id": "s", "createdAt": 1}
    stored = write_jsonl(header, list(as_events(log)))
    for keys in _PEEKED_KEYS:
        peeked = load_jsonl(stored, now=0).events
        general = load_jsonl(stored, now=0).events
        for a, b in zip(peeked, general, strict=True):
            pairs = [(a.data, b.data)]  # `a` is read only by `_peek` (and `object_member`)
            if type(b.data) is FrozenObject and type(b.data.get("message")) is FrozenObject:
                pairs.append((object_member(a.data, "message"), object_member(b.data, "message")))
            for x, y in pairs:
                got, expected = _peek(x, keys), members(y, keys)
                assert type(got) is type(expected)
                if type(expected) is dict:
                    assert {k: got[k] for k in keys if k in got} == {
                        k: expected[k] for k in keys if k in expected
                    }, (a, keys)
