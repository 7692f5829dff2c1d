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
from itertools import islice
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
    LoadedEvents,
    Replace,
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
_POSITIONED: Final = frozenset(
    {TURN_START, TURN_END, STEP_START, STEP_END, ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT}
)
"""The types besides chunks whose transition reads the payload (a result's only when appended)."""


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


def _answered_call(source: dict[str, Any]) -> Any:
    """The call id a built `tool/result` payload answers (None where it names none)."""
    message = source.get("message")
    if message.__class__ is dict and (tool := message.get("source")).__class__ is dict:
        return tool.get("callId")
    return None


def _lazy_position(source: Any) -> tuple[Any, Any]:
    """The turn and step a lazy payload source names, read without building the payload
    (`members`), or (None, None) when it cannot tell."""
    try:
        found = source.members(_POSITION)
    except AttributeError:  # a source that cannot answer a few members
        return None, None
    if found is None:
        return None, None
    return found.get("turn"), found.get("step")


def _violations(log: Sequence[Event]) -> Iterator[tuple[Violation, ...]]:
    """The tracker folded over `log`: the violations of each event that has any.

    `InvariantState.step` is the rule. This loop takes itself, on local variables, the
    transition of an event that fails nothing when what the event names can be read
    without building its payload: from the facts a loader kept on the payload's
    source (`turn`, `step`, `call_id`; `kernel.values.json.LazySource`) or from a
    built payload. Every other event goes through `step` from the state the loop
    kept, so each answer is `step`'s. The members of one chunk row share their
    source: once one is passed over, the rest are on their seqs alone, and in a
    loader's own tuple (`LoadedEvents`, where a row stands whole with consecutive
    seqs) the row is passed over at once.
    """
    last, open_turn, open_step, next_turn, next_step = -1, None, None, 1, 1
    pending: set[str] = set()
    loaded = issubclass(type(log), LoadedEvents)
    nothing = object()
    passed: object = nothing  # the payload source of the last chunk passed over since a step
    chunk, frozen_object, result = ASSISTANT_CHUNK, FrozenObject, TOOL_RESULT
    events = iter(log)
    for event in events:
        seq, kind = event.seq, event.type
        if seq.__class__ is int and seq > last:
            data = event.data
            if kind == chunk:
                if data.__class__ is frozen_object:
                    source = data._value
                    if source is passed:  # `passed` is a source only while a step is open
                        last = seq
                        continue
                    run = None
                    if source.__class__ is dict:
                        turn, step = source.get("turn"), source.get("step")
                    elif (turn := getattr(source, "turn", None)) is not None:
                        step = source.step  # the facts a loader kept of a stored chunk
                    else:
                        turn, step = _lazy_position(source)
                        if loaded and data._member == 0:
                            run = getattr(source, "chunk_run", None)  # a row's first member
                    if (
                        turn == open_turn
                        and step == open_step
                        and open_step is not None
                        and turn.__class__ is int
                        and step.__class__ is int
                    ):
                        last, passed = seq, source
                        if run is not None and (skipped := len(run()[1]) - 1) > 0:
                            next(islice(events, skipped, skipped), None)  # its other members
                            last += skipped
                        continue
            elif kind in _POSITIONED:
                passed = nothing
                op = event.surface_op
                if kind == result and op.__class__ is Replace:
                    if open_turn is not None:
                        last = seq
                        continue
                elif data.__class__ is frozen_object and (kind != result or op is APPEND):
                    source = data._value
                    if source.__class__ is dict:
                        turn, step = source.get("turn"), source.get("step")
                        call = source.get("callId") if kind != result else _answered_call(source)
                    elif data._checked_as == kind and hasattr(source, "turn"):
                        # the facts a loader kept, read for this type (a call id is made
                        # by a call and answered by a result)
                        turn, step = source.turn, source.step
                        call = getattr(source, "call_id", None)
                    else:
                        turn = step = call = None
                    if turn.__class__ is not int:
                        pass
                    elif kind == TURN_START:
                        if open_turn is None and turn == next_turn:
                            last, open_turn, next_step = seq, turn, 1
                            continue
                    elif kind == TURN_END:
                        if turn == open_turn and open_step is None:
                            last, open_turn, next_turn = seq, None, next_turn + 1
                            continue
                    elif step.__class__ is not int or turn != open_turn:
                        pass
                    elif kind == STEP_START:
                        if open_step is None and step == next_step:
                            last, open_step = seq, step
                            continue
                    elif step != open_step:
                        pass
                    elif kind == STEP_END:
                        last, open_step, next_step = seq, None, next_step + 1
                        pending.clear()
                        continue
                    elif kind == TOOL_CALL:
                        if call.__class__ is str and call:
                            last = seq
                            pending.add(call)
                            continue
                    elif kind == result:
                        if call.__class__ is str and call in pending:
                            last = seq
                            pending.remove(call)
                            continue
                    else:  # an assistant message
                        last = seq
                        continue
            elif kind not in _IN_TURN or open_turn is not None:
                passed = nothing
                last = seq
                continue
        passed = nothing
        state = InvariantState(last, open_turn, open_step, next_turn, next_step, frozenset(pending))
        state, found = state.step(event)
        last, open_turn, open_step = state.last_seq, state.open_turn, state.open_step
        next_turn, next_step, pending = state.next_turn, state.next_step, set(state.pending_calls)
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
