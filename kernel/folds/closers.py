"""Crash-repair closers (docs/format/folds.md §7): synthetic events closing a crashed turn.

One forward scan keeps the open turn, the open step and the calls still waiting
for a result; the closers answer those calls, end the step and end the turn as
`interrupted`. Deterministic: closers reuse the last event's time and fixed
texts. The scan reads the log, not the surface, and never a clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from operator import countOf
from typing import Any, Final

from kernel.errors import EventShapeError, InvalidEnvelope, KernelError, MessageShapeError
from kernel.folds.surface import AdmittedEvents
from kernel.values.events import (
    APPEND,
    ASSISTANT_MESSAGE,
    CLOSER_ORDER,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    Event,
)
from kernel.values.json import MAX_SAFE_INTEGER, raw, safe_int, summary, view
from kernel.wire.codec import check_event, iter_events

__all__ = (
    "TOOL_NOT_STARTED",
    "TOOL_OUTCOME_UNKNOWN",
    "TOOL_NOT_STARTED_ERROR",
    "TOOL_OUTCOME_UNKNOWN_ERROR",
    "TOOL_NOT_STARTED_TEXT",
    "TOOL_OUTCOME_UNKNOWN_TEXT",
    "interrupted_turn_closers",
    "wire_closers",
)

TOOL_NOT_STARTED: Final = "TOOL_NOT_STARTED"
"""Error code of a synthetic result for a call that was never recorded as started."""
TOOL_OUTCOME_UNKNOWN: Final = "TOOL_OUTCOME_UNKNOWN"
"""Error code of a synthetic result for a call recorded as started whose result was lost."""
TOOL_NOT_STARTED_ERROR: Final = "ToolNotStartedError"
TOOL_OUTCOME_UNKNOWN_ERROR: Final = "ToolOutcomeUnknownError"

TOOL_NOT_STARTED_TEXT: Final = (
    "This tool call never ran. The session was interrupted before the runtime recorded "
    "that the call had started, so as far as the session record shows it was not executed "
    "and produced no result and no side effects. If you still need its result, it is "
    "reasonable to issue the call again."
)
TOOL_OUTCOME_UNKNOWN_TEXT: Final = (
    "The outcome of this tool call is unknown. The runtime recorded that the call started, "
    "but the session was interrupted before its result was saved, so it may have completed, "
    "partly completed, or not run at all. Decide by what the tool does: re-running it is "
    "safe only if it is read-only or idempotent. If it may have side effects (writing or "
    "deleting files, running commands, sending messages, changing any external state), do "
    "not repeat it blindly: first check the current state, or ask the user, and only then "
    "decide whether to run it again."
)

_TURN_BOUNDARIES: Final = frozenset({TURN_START, TURN_END})
_WATCHED: Final = frozenset(
    {TURN_START, TURN_END, STEP_START, STEP_END, ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT}
)


def _where(index: int, seq: Any) -> str:
    return f"event at index {index} (seq {summary(seq)})"


def _field(data: Any, key: str, index: int, seq: Any, event_type: str) -> Any:
    """`data[key]` of a payload the scan must read; EventShapeError when it is not there."""
    if type(data) is not dict:
        raise EventShapeError(
            f"{_where(index, seq)}: {event_type} data must be an object, so the closer scan "
            f"cannot read its {key}",
            index=index,
        )
    if key not in data:
        raise EventShapeError(f"{_where(index, seq)}: {event_type} data has no {key}", index=index)
    return data[key]


def _message_part(
    value: Any, expected: type, what: str, index: int, seq: Any, event_type: str
) -> Any:
    if type(value) is not expected:
        raise MessageShapeError(
            f"{_where(index, seq)}: {event_type} has no {what}, so the closer scan cannot read it",
            index=index,
        )
    return value


def _message(data: Any, index: int, seq: Any, event_type: str) -> dict[str, Any]:
    """The embedded message of an assistant/message or tool/result (MessageShapeError if none)."""
    message = data.get("message") if type(data) is dict else None
    result: dict[str, Any] = _message_part(message, dict, "message object", index, seq, event_type)
    return result


def _positive(value: Any, index: int, what: str) -> int:
    v = safe_int(value)
    if v is None or v < 1:
        raise EventShapeError(
            f"event at index {index}: {what} {summary(value)} is not a positive safe integer, "
            "so the turn cannot be closed (R12)",
            index=index,
        )
    return v


def _scan(items: Iterable[tuple[Any, Any, Any, Any]], start: int = 0) -> tuple[Event, ...]:
    """Closers from `(type, seq, time, data)` items in log order (docs/format/folds.md §7.1-§7.2).

    `start` is the log index of the first item (for messages). Payloads are read
    only for the event types the scan watches.
    """
    open_turn: Any = None
    turn_at = -1
    open_step: Any = None
    step_at = -1
    # call id -> [id value, step, call_seq, index of the assistant message]; insertion-ordered.
    pending: dict[Any, list[Any]] = {}
    last: tuple[int, Any, Any] | None = None
    index = -1
    for index, (event_type, seq, time, data) in enumerate(items, start):
        last = (index, seq, time)
        if type(event_type) is not str or event_type not in _WATCHED:
            continue
        data = raw(data)
        if event_type == TURN_START:
            open_turn = _field(data, "turn", index, seq, event_type)
            turn_at = index
            open_step = None
            pending = {}
        elif event_type == TURN_END:
            open_turn = None
            open_step = None
            pending = {}
        elif event_type == STEP_START:
            open_step = _field(data, "step", index, seq, event_type)
            step_at = index
        elif event_type == STEP_END:
            open_step = None
            pending = {}
        elif event_type == ASSISTANT_MESSAGE:
            message = _message(data, index, seq, event_type)
            content = _message_part(
                message.get("content"), list, "content array", index, seq, event_type
            )
            for block in content:
                if type(block) is dict and block.get("type") == "tool-call":
                    step = _field(data, "step", index, seq, event_type)
                    call_id = block.get("id")
                    # Only string ids can be answered; any other id is its own entry.
                    key = call_id if type(call_id) is str else object()
                    pending[key] = [call_id, step, None, index]
        elif event_type == TOOL_CALL:
            call_id = _field(data, "callId", index, seq, event_type)
            entry = pending.get(call_id) if type(call_id) is str else None
            if entry is not None:
                call_seq = safe_int(seq)
                if call_seq is None or call_seq < 0:
                    raise InvalidEnvelope(
                        f"{_where(index, seq)}: seq is not a non-negative safe integer",
                        index=index,
                    )
                entry[2] = call_seq
        else:  # TOOL_RESULT
            message = _message(data, index, seq, event_type)
            source = _message_part(
                message.get("source"), dict, "source object", index, seq, event_type
            )
            if "callId" not in source:
                raise MessageShapeError(
                    f"{_where(index, seq)}: tool/result source has no callId", index=index
                )
            call_id = source["callId"]
            if type(call_id) is str:
                pending.pop(call_id, None)
    if last is None or open_turn is None:
        return ()
    return _closers(last, _positive(open_turn, turn_at, "turn"), open_step, step_at, pending)


def _closers(
    last: tuple[int, Any, Any],
    turn: int,
    open_step: Any,
    step_at: int,
    pending: dict[Any, list[Any]],
) -> tuple[Event, ...]:
    """The closers of docs/format/folds.md §7.2 after the last event `(index, seq, time)`."""
    last_index, last_seq, last_time = last
    base = safe_int(last_seq)
    time = safe_int(last_time)
    if base is None or base < 0 or time is None:
        raise InvalidEnvelope(
            f"{_where(last_index, last_seq)}: the last event needs a safe-integer seq and time "
            f"(time {summary(last_time)}) for the closers to follow it",
            index=last_index,
        )
    count = len(pending) + (open_step is not None) + 1
    if base + count > MAX_SAFE_INTEGER:
        raise InvalidEnvelope(
            f"{_where(last_index, last_seq)}: closer seqs would pass 2**53 - 1", index=last_index
        )
    out: list[Event] = []
    seq = base + 1
    for call_id, step, call_seq, at in pending.values():
        if type(call_id) is not str or not call_id:
            raise MessageShapeError(
                f"event at index {at}: tool-call block id {summary(call_id)} is not a non-empty "
                "string, so its interrupted call cannot be answered (R10f)",
                index=at,
            )
        started = call_seq is not None
        text = TOOL_OUTCOME_UNKNOWN_TEXT if started else TOOL_NOT_STARTED_TEXT
        message = {
            "id": f"interrupted-tool-result-{call_id}-{seq}",
            "role": "user",
            "source": {"kind": "tool", "callId": call_id},
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": call_id,
                    "isError": True,
                    "content": [{"type": "text", "text": text}],
                }
            ],
        }
        error = (
            {"name": TOOL_OUTCOME_UNKNOWN_ERROR, "code": TOOL_OUTCOME_UNKNOWN}
            if started
            else {"name": TOOL_NOT_STARTED_ERROR, "code": TOOL_NOT_STARTED}
        )
        data = {
            "turn": turn,
            "step": _positive(step, at, "step"),
            "message": message,
            "error": error,
        }
        out.append(
            Event(
                type=TOOL_RESULT,
                seq=seq,
                time=time,
                data=view(data, lossless=True),
                surface_op=APPEND,
                source_event_seqs=(call_seq,) if started else None,
                wire_order=CLOSER_ORDER,
            )
        )
        seq += 1
    if open_step is not None:
        step_data = {"turn": turn, "step": _positive(open_step, step_at, "step")}
        out.append(
            Event(STEP_END, seq, time, view(step_data, lossless=True), wire_order=CLOSER_ORDER)
        )
        seq += 1
    end_data = {"turn": turn, "reason": {"kind": "interrupted"}}
    out.append(Event(TURN_END, seq, time, view(end_data, lossless=True), wire_order=CLOSER_ORDER))
    return tuple(out)


def _events(events: Iterable[Event]) -> Sequence[Event]:
    """`events` as a sequence (a plain tuple or list as it is), each item an `Event`."""
    log = events if type(events) is tuple or type(events) is list else list(iter_events(events))
    if countOf(map(type, log), Event) == len(log):  # the common case, counted in C
        return log
    for index, event in enumerate(log):
        if type(event) is not Event:
            raise InvalidEnvelope(
                f"item at index {index} is a {type(event).__name__}, not an Event", index=index
            )
    return log


def _checked(log: Sequence[Event], index: int) -> Event:
    """`log[index]` through `check_event`, naming its index when it is ill-typed."""
    event = log[index]
    try:
        return check_event(event, "event", index)
    except KernelError:
        # The index is spelled only for an error: the check is pure, so run it again with it.
        return check_event(event, f"event at index {index}", index)


def _scan_start(log: Sequence[Event]) -> int | None:
    """Where the closer scan must start: the index of the last `turn/start` or `turn/end`
    (0 when there is none); None when the scan from there is sure to find nothing.

    The scan's state is reset at a boundary, so scanning from it gives what scanning the
    whole log gives, and the payloads of earlier turns are never read. When no turn is
    open there (a `turn/end`, or no boundary at all) and no event after it is one the
    scan reads a payload of, the scan could only answer `()`. The events read here,
    which are the ones the scan reads, are checked (`check_event`), last first; a log
    with no boundary and no watched type is answered from its types alone.
    """
    if _never_in_a_turn(log):
        return None
    watched = False
    for index in range(len(log) - 1, -1, -1):
        event_type = _checked(log, index).type
        if event_type in _TURN_BOUNDARIES:
            return index if watched or event_type == TURN_START else None
        watched = watched or event_type in _WATCHED
    return 0 if watched else None


def _never_in_a_turn(log: Sequence[Event]) -> bool:
    """True when every type is a non-empty string and none is one the scan watches.

    Then no turn was ever open and the closers are `()`, whatever else the events
    hold. The pass runs from the end and stops at the last boundary, so a log with
    turns pays for its last turn only. Each distinct type is judged once, where it is
    first read from the end; anything odd there (an unhashable type, a string
    subclass) answers False, and the checked walk names it.
    """
    # One pass that judges a type only when it is new: a log holds a few distinct
    # types, so most events cost one lookup in a small set (about 60% of a loop back
    # to the last boundary followed by a set comprehension, on CPython 3.11).
    seen: set[str] = set()
    try:
        for event in reversed(log):
            kind = event.type
            if kind not in seen:
                if kind.__class__ is not str or not kind or kind in _WATCHED:
                    return False
                seen.add(kind)
    except Exception:
        return False
    return True


def interrupted_turn_closers(events: Iterable[Event]) -> tuple[Event, ...]:
    """The events that close the last turn if a crash left it open (docs/format/folds.md §7).

    Empty when the log is empty or its last turn is closed. Otherwise: an error
    `tool/result` for each call of the open turn still waiting for its result
    (`TOOL_OUTCOME_UNKNOWN` when a `tool/call` recorded its start, else
    `TOOL_NOT_STARTED`), a `step/end` when a step is open, and a `turn/end`
    with reason `{"kind": "interrupted"}`; seqs continue the log and every
    closer takes the last event's time. The scan starts at the last turn boundary
    (it resets its state there), so it reads the payloads of the last turn only.

    Raises:
        EventShapeError: an event of the last turn lacks a field the scan reads (R12).
        MessageShapeError: a message of the last turn lacks what the scan reads (R10).

    >>> log = [Event("turn/start", 0, 0, {"turn": 1}),
    ...        Event("step/start", 1, 10, {"turn": 1, "step": 1})]
    >>> [(e.type, e.seq, e.time) for e in interrupted_turn_closers(log)]
    [('step/end', 2, 10), ('turn/end', 3, 10)]
    """
    if type(events) is AdmittedEvents:
        return ()  # a loader closed its last turn
    log = _events(events)
    start = _scan_start(log)
    if start is None:
        return ()
    return _scan(((e.type, e.seq, e.time, e.data) for e in log[start:]), start)


def wire_closers(records: Iterable[Mapping[str, Any]]) -> tuple[Event, ...]:
    """`interrupted_turn_closers` over plain wire event dicts not yet admitted (a load prefix).

    The loader computes closers before restore admission (docs/format/persistence.md §5), so
    the records may still break envelope or payload rules; anything the scan
    cannot read raises a `KernelError`, never a `KeyError` or `TypeError`.
    """
    return _scan((r.get("type"), r.get("seq"), r.get("time"), r.get("data")) for r in records)
