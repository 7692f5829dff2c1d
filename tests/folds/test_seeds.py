"""Fork prefix selection and seed boundaries (docs/format/folds.md §8, §9)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from kernel.errors import ForkError
from kernel.folds.messages import derive_messages
from kernel.folds.seeds import fork_prefix, last_end_seed
from kernel.log import SessionLog
from kernel.values.events import APPEND, END_SEED, Event


class Log:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(self, kind: str, data: Any, op: Any = None) -> int:
        seq = len(self.events)
        self.events.append(Event(kind, seq, seq * 10, data, op))
        return seq

    def turn(self, n: int, *, close: bool = True) -> None:
        self.add("turn/start", {"turn": n})
        self.user(f"q{n}")
        if close:
            self.add("turn/end", {"turn": n, "reason": {"kind": "completed"}})

    def user(self, text: str = "hi") -> int:
        msg = {
            "id": f"u{len(self.events)}",
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "user"},
        }
        return self.add("user/message", msg, APPEND)

    def extension(self) -> int:
        return self.add("session/title", {"title": "t"})


def closed_then_open() -> Log:
    log = Log()
    log.user("before any turn")  # 0
    log.turn(1)  # 1 turn/start, 2 user, 3 turn/end
    log.extension()  # 4
    log.turn(2, close=False)  # 5 turn/start, 6 user
    return log


# -- §8 fork prefix ----------------------------------------------------------------------------


def test_fork_8_no_boundary_on_an_empty_log_is_empty() -> None:
    assert fork_prefix([]) == ()
    assert fork_prefix(iter([])) == ()


def test_fork_8_no_boundary_takes_the_whole_closed_log() -> None:
    log = Log()
    log.turn(1)
    assert fork_prefix(log.events) == tuple(log.events)


def test_fork_8_no_boundary_on_an_open_turn_is_open_turn() -> None:
    with pytest.raises(ForkError) as caught:
        fork_prefix(closed_then_open().events)
    assert caught.value.code == ForkError.OPEN_TURN


@pytest.mark.parametrize("boundary", [0, 3, 4])
def test_fork_8_boundary_outside_a_turn_is_inclusive_prefix(boundary: int) -> None:
    events = closed_then_open().events
    prefix = fork_prefix(events, boundary)
    assert isinstance(prefix, tuple)
    assert prefix == tuple(events[: boundary + 1])


def test_fork_8_boundary_may_sit_on_a_standalone_extension_event_after_turn_end() -> None:
    events = closed_then_open().events
    assert fork_prefix(events, 4)[-1].type == "session/title"


@pytest.mark.parametrize("boundary", [1, 2, 5, 6])
def test_fork_8_boundary_inside_an_open_turn_is_open_turn(boundary: int) -> None:
    with pytest.raises(ForkError) as caught:
        fork_prefix(closed_then_open().events, boundary)
    assert caught.value.code == ForkError.OPEN_TURN


@pytest.mark.parametrize(
    "boundary", [-1, True, False, 1.5, "3", [0], 2**53, float("nan"), float("inf")]
)
def test_fork_8_boundary_must_be_a_non_negative_safe_integer(boundary: Any) -> None:
    with pytest.raises(ForkError) as caught:
        fork_prefix(closed_then_open().events, boundary)
    assert caught.value.code == ForkError.INVALID_BOUNDARY


def test_fork_8_integral_float_boundary_is_that_integer() -> None:
    events = closed_then_open().events
    assert fork_prefix(events, 3.0) == tuple(events[:4])


@pytest.mark.parametrize("boundary", [7, 100])
def test_fork_8_boundary_must_exist(boundary: int) -> None:
    with pytest.raises(ForkError) as caught:
        fork_prefix(closed_then_open().events, boundary)
    assert caught.value.code == ForkError.INVALID_BOUNDARY
    assert "does not exist" in str(caught.value)


def test_fork_8_boundary_event_must_carry_that_seq() -> None:
    shifted = [Event("session/title", 10 + i, 0, {}) for i in range(3)]
    with pytest.raises(ForkError) as caught:
        fork_prefix(shifted, 1)
    assert caught.value.code == ForkError.INVALID_BOUNDARY
    with pytest.raises(ForkError):
        fork_prefix(shifted)  # the last event's seq (12) is no index of this log


def test_fork_8_takes_any_iterable_and_never_mutates() -> None:
    events = closed_then_open().events
    before = list(events)
    assert fork_prefix(iter(events), 3) == tuple(events[:4])
    assert events == before


# -- §9 seed boundaries ------------------------------------------------------------------------


def test_seed_9_no_marker_is_none() -> None:
    assert last_end_seed([]) is None
    assert last_end_seed(closed_then_open().events) is None


def test_seed_9_the_last_marker_counts() -> None:
    log = Log()
    log.turn(1)
    log.add(END_SEED, {})
    log.turn(2)
    last = log.add(END_SEED, {})
    log.extension()
    assert last_end_seed(log.events) == last
    assert last_end_seed(iter(log.events)) == last


def test_seed_9_marker_payload_is_not_read() -> None:
    log = Log()
    log.add(END_SEED, None)
    assert last_end_seed(log.events) == 0


def test_seed_9_p44_end_seed_position_after_construction() -> None:
    seed = closed_then_open().events[:5]
    log = SessionLog.seed(seed, now=99)
    assert last_end_seed(log.events) == len(seed)
    again = SessionLog.seed(log.events, now=100)
    assert last_end_seed(again.events) == len(log.events) - 1


# -- P45 fork prefix ---------------------------------------------------------------------------


@st.composite
def turn_logs(draw: st.DrawFn) -> list[Event]:
    log = Log()
    for n in range(1, draw(st.integers(0, 4)) + 1):
        for _ in range(draw(st.integers(0, 2))):
            draw(st.sampled_from([log.user, log.extension]))()
        log.turn(n, close=draw(st.integers(0, 3)) > 0)
        if log.events[-1].type != "turn/end":
            break
    return log.events


@given(turn_logs())
def test_p45_fork_prefix_everywhere(events: list[Event]) -> None:
    note("log:\n" + "\n".join(f"{e.seq} {e.type}" for e in events))
    depth = 0
    for boundary, event in enumerate(events):
        if event.type == "turn/start":
            depth = 1
        elif event.type == "turn/end":
            depth = 0
        if depth:
            with pytest.raises(ForkError) as caught:
                fork_prefix(events, boundary)
            assert caught.value.code == ForkError.OPEN_TURN, f"boundary {boundary}"
        else:
            prefix = fork_prefix(events, boundary)
            assert prefix == tuple(events[: boundary + 1]), f"boundary {boundary}"
            child = SessionLog.seed(prefix, now=0)
            assert derive_messages(child.events) == derive_messages(prefix)
