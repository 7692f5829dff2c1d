"""Relational invariants (docs/format/folds.md §6): turn/step enclosure and numbering, pairing.

Not part of default admission. `check_invariants` reports every failed condition and
then applies the event's transition as if it had passed, so later events are judged
against the state the log itself declares; its first violation is the one a fail-fast
checker reports (`check_invariants_strict`). Rule ids, stable across versions:

- `seq-order` — an event's seq must exceed the previous event's seq
- `turn-start-while-open` — `turn/start` while a turn is still open
- `turn-number` — `turn/start` must number the turn `next_turn` (1, 2, ... without gaps)
- `turn-end-mismatch` — `turn/end` must name the open turn
- `turn-end-open-step` — `turn/end` while a step is still open
- `step-start-turn` — `step/start` must name the open turn
- `step-start-while-open` — `step/start` while a step is still open
- `step-number` — `step/start` must number the step `next_step` (1, 2, ... per turn)
- `step-end-mismatch` — `step/end` must name the open turn and step
- `outside-step` — chunks, assistant messages, tool calls and appended results must
  name the open turn and step
- `result-without-call` — an appended `tool/result` must answer a `tool/call` of the
  open step (crash-repair not-started results are exempt)
- `outside-turn` — `tool/result` replacements, `todo/write`, `request/header` and
  `request/context` need an open turn
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

import attrs
import msgspec

from kernel.errors import (
    EventShapeError,
    InvariantViolation,
    MessageShapeError,
    SurfaceMarkerError,
)
from kernel.values.events import (
    APPEND,
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    REQUEST_CONTEXT,
    REQUEST_HEADER,
    STEP_END,
    STEP_START,
    TODO_WRITE,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    Event,
)
from kernel.values.json import MAX_SAFE_INTEGER, FrozenArray, FrozenObject, members, raw, safe_int
from kernel.wire.codec import event_sequence, ill_typed_events_reported

__all__ = (
    "Violation",
    "InvariantState",
    "check_invariants",
    "check_invariants_strict",
    "RULES",
    "TOOL_NOT_STARTED_CODE",
)

RULES: Final = (
    "seq-order",
    "turn-start-while-open",
    "turn-number",
    "turn-end-mismatch",
    "turn-end-open-step",
    "step-start-turn",
    "step-start-while-open",
    "step-number",
    "step-end-mismatch",
    "outside-step",
    "result-without-call",
    "outside-turn",
)
"""Every rule id a `Violation` may carry, in the order the module docstring explains them."""

TOOL_NOT_STARTED_CODE: Final = "TOOL_NOT_STARTED"
"""`data.error.code` of a crash-repair result for a call that never started
(docs/format/folds.md §7)."""

_IN_STEP: Final = frozenset({ASSISTANT_CHUNK, ASSISTANT_MESSAGE, TOOL_CALL})
_IN_TURN: Final = frozenset({TODO_WRITE, REQUEST_HEADER, REQUEST_CONTEXT})


@attrs.frozen
class Violation:
    """One failed relational condition: the event's seq, the rule id, what was wrong."""

    seq: int
    rule: str
    message: str


# -- reading payloads: shape first, then values -------------------------------------------------


_TURN: Final = frozenset({"turn"})
_POSITION: Final = frozenset({"turn", "step"})
_CALL: Final = frozenset({"turn", "step", "callId"})


def _peek(data: Any, keys: frozenset[str]) -> Any:
    """`kernel.values.json.members(data, keys)`, asking a lazy source first without the call.

    Most payloads a fold reads are lazy and their source answers `members(keys)`; the
    general function's checks cost about as much as the source's answer, and a log has
    one read per event.
    """
    if data.__class__ is FrozenObject:
        source = data._value
        if source.__class__ is dict:
            return source
        try:
            found = source.members(keys)
        except AttributeError:  # a source that cannot answer a few members
            found = None
        if found is not None:
            return found
    return members(data, keys)


def _data(event: Event, keys: frozenset[str] | None = None) -> Mapping[str, Any]:
    """The payload's plain container (read-only here), or EventShapeError if not an object.

    With `keys`, only those members are read: a lazily loaded payload answers them
    without being built (`kernel.values.json.members`).
    """
    data = raw(event.data) if keys is None else _peek(event.data, keys)
    if data.__class__ is not dict:
        raise EventShapeError(
            f"event seq {event.seq}: {event.type} data must be a JSON object (R12)",
            seq=event.seq,
        )
    return data


def _number(event: Event, data: Mapping[str, Any], key: str) -> int:
    value = data.get(key)
    if value.__class__ is int and 0 < value <= MAX_SAFE_INTEGER:
        return value  # the common case, without the call: what `safe_int` answers for it
    value = safe_int(value)
    if value is None or value < 1:
        raise EventShapeError(
            f"event seq {event.seq}: {event.type} {key} must be a positive safe integer (R12)",
            seq=event.seq,
        )
    return value


def _position(event: Event, data: Mapping[str, Any]) -> tuple[int, int]:
    """`data`'s turn and step, as `_number` reads them (turn first), in one call."""
    turn, step = data.get("turn"), data.get("step")
    if (
        turn.__class__ is int
        and step.__class__ is int
        and 0 < turn <= MAX_SAFE_INTEGER
        and 0 < step <= MAX_SAFE_INTEGER
    ):
        return turn, step  # the common case: what `_number` answers for each
    return _number(event, data, "turn"), _number(event, data, "step")


def _call_id(event: Event, data: Mapping[str, Any]) -> str:
    call_id = data.get("callId")
    if type(call_id) is not str or not call_id:
        raise EventShapeError(
            f"event seq {event.seq}: tool/call callId must be a non-empty string (R12)",
            seq=event.seq,
        )
    return call_id


def _result_call_id(event: Event, data: Mapping[str, Any]) -> str:
    message = data.get("message")
    if message.__class__ is dict and (source := message.get("source")).__class__ is dict:
        call_id = source.get("callId")  # the plain containers of a built payload
    else:
        source = message.get("source") if isinstance(message, Mapping) else None
        call_id = source.get("callId") if isinstance(source, Mapping) else None
    if type(call_id) is not str or not call_id:
        raise MessageShapeError(
            f"event seq {event.seq}: tool/result message must have a tool source "
            "with a callId (R10f)",
            seq=event.seq,
        )
    return call_id


def _is_not_started_result(data: Mapping[str, Any]) -> bool:
    """A crash-repair not-started result: block `isError` literally true and that error code."""
    content = data["message"].get("content")
    block = content[0] if _is_array(content) and len(content) > 0 else None
    error = data.get("error")
    return (
        isinstance(block, Mapping)
        and block.get("isError") is True
        and isinstance(error, Mapping)
        and error.get("code") == TOOL_NOT_STARTED_CODE
    )


def _is_array(value: Any) -> bool:
    return type(value) is list or type(value) is FrozenArray


def _where(turn: int | None, step: int | None) -> str:
    if turn is None:
        return "no turn is open"
    if step is None:
        return f"turn {turn} has no open step"
    return f"the open step is turn {turn} step {step}"


def _open_turn_text(open_turn: int | None) -> str:
    return "no turn is open" if open_turn is None else f"open turn is {open_turn}"


# -- the tracker --------------------------------------------------------------------------------


class InvariantState(msgspec.Struct, frozen=True, gc=False):
    """What the invariant tracker knows after a prefix of a log (docs/format/folds.md §6.1).

    A msgspec struct rather than an attrs class: the fold builds one per event,
    and this is the cheapest immutable record to build.
    """

    last_seq: int = -1
    open_turn: int | None = None
    open_step: int | None = None
    next_turn: int = 1
    next_step: int = 1
    pending_calls: frozenset[str] = frozenset()

    def step(self, event: Event) -> tuple[InvariantState, tuple[Violation, ...]]:
        """The state after one more event and the conditions it failed (in §6.2 order).

        The transition is applied whether or not the checks passed. Raises
        `EventShapeError` / `MessageShapeError` when the payload lacks what the
        tracker reads, `SurfaceMarkerError` for a `tool/result` without a surfaceOp.
        """
        seq = event.seq
        found: list[Violation] = []
        if seq <= self.last_seq:
            found.append(
                Violation(seq, "seq-order", f"seq {seq} does not follow seq {self.last_seq}")
            )
        open_turn, open_step = self.open_turn, self.open_step
        next_turn, next_step, pending = self.next_turn, self.next_step, self.pending_calls
        kind = event.type

        # The kinds of most stepped events first; the branches are disjoint.
        if kind in _IN_STEP or (kind == TOOL_RESULT and event.surface_op == APPEND):
            data = _data(
                event, None if kind == TOOL_RESULT else _CALL if kind == TOOL_CALL else _POSITION
            )
            turn, step = _position(event, data)
            if open_turn is None or turn != open_turn or step != open_step:
                found.append(
                    Violation(
                        seq,
                        "outside-step",
                        f"{kind} {turn}.{step} does not name the open step: "
                        + _where(open_turn, open_step),
                    )
                )
            if kind == TOOL_CALL:
                pending = pending | {_call_id(event, data)}
            elif kind == TOOL_RESULT:
                call_id = _result_call_id(event, data)
                if call_id not in pending and not _is_not_started_result(data):
                    found.append(
                        Violation(
                            seq,
                            "result-without-call",
                            f"tool/result {call_id!r}: no prior tool/call in this step",
                        )
                    )
                pending = pending - {call_id}

        elif kind == TURN_START:
            turn = _number(event, _data(event, _TURN), "turn")
            if open_turn is not None:
                found.append(
                    Violation(
                        seq,
                        "turn-start-while-open",
                        f"turn/start {turn}: turn {open_turn} still open",
                    )
                )
            if turn != next_turn:
                found.append(
                    Violation(seq, "turn-number", f"turn/start {turn}: expected turn {next_turn}")
                )
            open_turn, next_step = turn, 1

        elif kind == TURN_END:
            turn = _number(event, _data(event, _TURN), "turn")
            if open_turn != turn:
                found.append(
                    Violation(
                        seq,
                        "turn-end-mismatch",
                        f"turn/end {turn} does not match: " + _open_turn_text(open_turn),
                    )
                )
            if open_step is not None:
                found.append(
                    Violation(
                        seq, "turn-end-open-step", f"turn/end {turn}: step {open_step} still open"
                    )
                )
            open_turn, next_turn = None, next_turn + 1

        elif kind == STEP_START:
            turn, step = _position(event, _data(event, _POSITION))
            if open_turn != turn:
                found.append(
                    Violation(
                        seq,
                        "step-start-turn",
                        f"step/start {turn}.{step}: " + _open_turn_text(open_turn),
                    )
                )
            if open_step is not None:
                found.append(
                    Violation(
                        seq,
                        "step-start-while-open",
                        f"step/start {turn}.{step}: step {open_step} still open",
                    )
                )
            if step != next_step:
                found.append(
                    Violation(
                        seq, "step-number", f"step/start {turn}.{step}: expected step {next_step}"
                    )
                )
            open_step = step

        elif kind == STEP_END:
            turn, step = _position(event, _data(event, _POSITION))
            if open_turn is None or turn != open_turn or step != open_step:
                found.append(
                    Violation(
                        seq,
                        "step-end-mismatch",
                        f"step/end {turn}.{step} does not name the open step: "
                        + _where(open_turn, open_step),
                    )
                )
            pending, open_step, next_step = frozenset(), None, next_step + 1

        elif kind == TOOL_RESULT:
            if event.surface_op is None:
                raise SurfaceMarkerError(
                    f"event seq {seq}: tool/result requires a surfaceOp (R5)",
                    seq=seq,
                )
            if open_turn is None:
                found.append(
                    Violation(seq, "outside-turn", "tool/result replacement outside any open turn")
                )

        elif kind in _IN_TURN and open_turn is None:
            found.append(Violation(seq, "outside-turn", f"{kind} outside any open turn"))

        after = InvariantState(seq, open_turn, open_step, next_turn, next_step, pending)
        return after, tuple(found)


def _violations(log: Sequence[Event]) -> Iterator[tuple[Violation, ...]]:
    """The tracker folded over `log`: the violations of each event that has any.

    A chunk that names the open step and follows the last seq changes nothing but
    `last_seq` and fails nothing, so it is passed over without a step (most of a
    log is chunks); `last_seq` is brought up to date before the next step. The
    members of one packed row share their payload source, and so their turn and
    step: after one member is passed over, the next is passed over on its seq alone.
    """
    state = InvariantState()
    last = -1
    nothing = object()
    passed = nothing  # the payload source of the last chunk passed over since a step
    chunk, frozen_object = ASSISTANT_CHUNK, FrozenObject
    for event in log:
        if event.type == chunk:
            seq = event.seq
            data = event.data
            if seq.__class__ is int and seq > last and data.__class__ is frozen_object:
                source = data._value
                if source is passed:  # `passed` is a source only while a step is open
                    last = seq
                    continue
                open_step = state.open_step
                if open_step is not None:
                    position = _peek(data, _POSITION)
                    if position.__class__ is dict and (
                        (turn := position.get("turn")).__class__ is int
                        and (step := position.get("step")).__class__ is int
                        and turn == state.open_turn
                        and step == open_step
                    ):
                        last = seq
                        passed = source
                        continue
        passed = nothing
        if last != state.last_seq:
            state = msgspec.structs.replace(state, last_seq=last)
        state, found = state.step(event)
        last = state.last_seq
        if found:
            yield found


def check_invariants(events: Iterable[Event]) -> tuple[Violation, ...]:
    """Every relational violation in `events`, in log order; empty iff the log is well formed.

    >>> from kernel.values.events import Event
    >>> check_invariants([Event("turn/start", 0, 0, {"turn": 1}),
    ...                   Event("turn/start", 1, 0, {"turn": 2})])[0].rule
    'turn-start-while-open'
    """
    log = event_sequence(events)
    found: list[Violation] = []
    with ill_typed_events_reported(log):
        for violations in _violations(log):
            found.extend(violations)
    return tuple(found)


def check_invariants_strict(events: Iterable[Event]) -> None:
    """Raise `InvariantViolation` for the first violation `check_invariants` would report."""
    log = event_sequence(events)
    with ill_typed_events_reported(log):
        for violations in _violations(log):
            first = violations[0]
            raise InvariantViolation(
                f"event seq {first.seq}: {first.message} ({first.rule}, docs/format/folds.md §6)",
                seq=first.seq,
            )
