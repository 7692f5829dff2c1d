"""Older v0 shapes, rewritten in memory on load (docs/format/persistence.md Appendix A).

Writers of format version 0 from before message identities stored shapes that
today's rules refuse: a `turn/start` with its `trigger`, older `turn/end`
reasons, the flat `steering/message`, messages without an `id` and `role`.
`normalize_legacy` rewrites them, event by event in log order, into the shapes
of today, as DSH's own reader does; the stored bytes are never touched. It runs
after the R3 refusals and before message-shape admission (R10), and a shape
that claims to be old but is malformed is `CorruptLog` (rule `A.1`-`A.4`).

A message written before identities gets the id `legacy-message:<session>:<seq>`:

>>> records = [{"type": "user/message", "seq": 0, "time": 1,
...             "data": {"content": [], "source": {"kind": "user"}}}]
>>> out = normalize_legacy(records, session_id="s")
>>> out.records[0]["data"]["id"], out.records[0]["data"]["role"], dict(out.counts)
('legacy-message:s:0', 'user', {'user-message-identity': 1})
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs
from pyrsistent import PMap, pmap

from kernel.errors import CorruptLog
from kernel.values.events import (
    ASSISTANT_MESSAGE,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Event,
)
from kernel.values.json import MAX_SAFE_INTEGER, is_number, raw, safe_int, summary
from kernel.wire.codec import event_from_wire, event_to_wire

__all__ = (
    "STEERING_MESSAGE",
    "LEGACY_SHAPES",
    "Normalized",
    "legacy_message_id",
    "may_need_normalizing",
    "normalize_legacy",
    "normalize_events",
)

STEERING_MESSAGE: Final = "steering/message"

LEGACY_SHAPES: Final[Mapping[str, str]] = {
    "turn-start-trigger": "A.1",
    "turn-end-reason": "A.2",
    "steering-message": "A.3",
    "user-message-identity": "A.4",
    "assistant-message-identity": "A.4",
    "tool-result-identity": "A.4",
}
"""The names `Normalized.counts` uses, each with the Appendix A rule that rewrites it."""

_READ_TYPES: Final = frozenset(
    {TURN_START, TURN_END, STEERING_MESSAGE, USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT}
)
_BARE_KINDS: Final = frozenset({"completed", "blocked", "max-tokens", "interrupted"})
_FAILURE_KEYS: Final = frozenset({"message", "code", "status", "providerRetryAfterMs", "requestId"})
_FAILURE_NUMBERS: Final = ("status", "providerRetryAfterMs")


@attrs.frozen
class Normalized:
    """The records after normalization, and how many of each older shape were rewritten.

    `records` is the input list itself when nothing changed (`counts` empty).
    """

    records: list[Any]
    counts: PMap[str, int] = attrs.field(factory=pmap)


def legacy_message_id(session_id: str, seq: int) -> str:
    """The message id Appendix A gives an event at `seq` written before identities.

    >>> legacy_message_id("s", 4)
    'legacy-message:s:4'
    """
    return f"legacy-message:{session_id}:{seq}"


class _Refused(Exception):
    """An old shape that is malformed: the rule and what is wrong."""

    def __init__(self, rule: str, detail: str) -> None:
        super().__init__(rule, detail)
        self.rule, self.detail = rule, detail


def _positive(value: Any) -> bool:
    number = safe_int(value) if type(value) is not bool else None
    return number is not None and 1 <= number <= MAX_SAFE_INTEGER


def _non_negative(value: Any) -> bool:
    number = safe_int(value) if type(value) is not bool else None
    return number is not None and number >= 0


def _is_safe_int(value: Any) -> bool:
    return type(value) is not bool and safe_int(value) is not None


def _turn_start(data: Any) -> dict[str, Any] | None:
    """A.1: `{turn, trigger}` becomes `{turn}`; a `turn/start` without `trigger` is left alone."""
    if type(data) is not dict or "trigger" not in data:
        return None
    trigger = data["trigger"]
    if (
        data.keys() != {"turn", "trigger"}
        or not _positive(data["turn"])
        or type(trigger) is not dict
        or type(trigger.get("kind")) is not str
        or trigger["kind"] == ""
    ):
        raise _Refused(
            "A.1",
            "a turn/start with a trigger must be exactly {turn, trigger}, with a positive safe "
            "integer turn and a trigger object with a non-empty string kind",
        )
    return {"turn": data["turn"]}


def _error_reason(reason: dict[str, Any]) -> dict[str, Any] | None:
    """A.2 for kind `error`: the two older spellings of the failure, or None when current."""
    if "error" in reason:
        return None
    if not _non_negative(reason.get("step")):
        raise _Refused("A.2", "an older error reason needs step, a non-negative safe integer")
    if reason.keys() == {"kind", "step", "failure"}:
        failure = reason["failure"]
        if (
            type(failure) is dict
            and failure.keys() <= _FAILURE_KEYS
            and type(failure.get("message")) is str
            and type(failure.get("code")) is str
            and all(k not in failure or is_number(failure[k]) for k in _FAILURE_NUMBERS)
            and ("requestId" not in failure or type(failure["requestId"]) is str)
        ):
            return {"kind": "error", "error": failure}
    elif reason.keys() <= {"kind", "step", "message", "code"} and "message" in reason:
        code = reason.get("code", "UNKNOWN")
        if type(reason["message"]) is str and type(code) is str:
            return {"kind": "error", "error": {"message": reason["message"], "code": code}}
    raise _Refused(
        "A.2",
        "an older error reason must be exactly {kind, step, failure} with failure "
        "{message, code, status?, providerRetryAfterMs?, requestId?}, or exactly "
        "{kind, step, message, code?} with string message and code",
    )


def _turn_end(data: Any) -> dict[str, Any] | None:
    """A.2, applied to every `turn/end`: the new data, or None when it stays as it is."""
    if type(data) is not dict or data.keys() != {"turn", "reason"} or not _positive(data["turn"]):
        raise _Refused(
            "A.2", "turn/end data must be exactly {turn, reason}, turn a positive safe integer"
        )
    reason = data["reason"]
    if type(reason) is not dict or type(reason.get("kind")) is not str:
        raise _Refused("A.2", "a turn/end reason must be an object with a string kind")
    kind = reason["kind"]
    if kind in _BARE_KINDS:
        if len(reason) != 1:
            raise _Refused("A.2", f"a {kind!r} reason must be exactly {{kind}}")
        return None
    if kind == "aborted":
        if "reason" in reason:
            return None
        if len(reason) != 1:
            raise _Refused("A.2", "an aborted reason without a reason must be exactly {kind}")
        new_reason: dict[str, Any] = {"kind": "aborted", "reason": {"kind": "legacy"}}
    elif kind == "disposed":
        if len(reason) != 1:
            raise _Refused("A.2", "a disposed reason must be exactly {kind}")
        new_reason = {"kind": "aborted", "reason": {"kind": "disposed"}}
    elif kind == "error":
        error = _error_reason(reason)
        if error is None:
            return None
        new_reason = error
    else:
        return None  # an extension kind: R12 checks only its `kind`
    return {"turn": data["turn"], "reason": new_reason}


def _steering(data: Any, message_id: str) -> dict[str, Any]:
    """A.3: the user message a `steering/message` carried."""
    if type(data) is dict:
        keys = data.keys()
        if keys == {"turn", "message"} and _is_safe_int(data["turn"]):
            if type(data["message"]) is dict:
                return data["message"]
        elif keys == {"turn", "content", "source"} and _is_safe_int(data["turn"]):
            return {
                "content": data["content"],
                "source": data["source"],
                "id": message_id,
                "role": "user",
            }
    raise _Refused(
        "A.3",
        "steering/message data must be exactly {turn, message} with a message object, or "
        "exactly {turn, content, source}, turn a safe integer",
    )


def _old_user(data: Any, message_id: str) -> dict[str, Any] | None:
    if (
        type(data) is dict
        and "content" in data
        and "source" in data
        and not ("id" in data or "role" in data or "message" in data)
    ):
        return {**data, "id": message_id, "role": "user"}
    return None


def _old_assistant(data: Any, message_id: str) -> dict[str, Any] | None:
    # A provenance that is not an object is no unambiguous old shape: R10 refuses it.
    if (
        type(data) is not dict
        or "message" in data
        or "content" not in data
        or type(data.get("provenance")) is not dict
    ):
        return None
    source = dict(data["provenance"])
    source["kind"] = "model"
    kept = {k: v for k, v in data.items() if k not in ("content", "provenance")}
    kept["message"] = {
        "id": message_id,
        "role": "assistant",
        "content": data["content"],
        "source": source,
    }
    return kept


def _old_result(data: Any, message_id: str) -> dict[str, Any] | None:
    if (
        type(data) is not dict
        or "message" in data
        or not data.keys() >= {"callId", "content", "isError"}
    ):
        return None
    call_id = data["callId"]
    kept = {k: v for k, v in data.items() if k not in ("callId", "content", "isError")}
    block = {
        "type": "tool-result",
        "toolCallId": call_id,
        "content": data["content"],
        "isError": data["isError"],
    }
    kept["message"] = {
        "id": message_id,
        "role": "user",
        "content": [block],
        "source": {"kind": "tool", "callId": call_id},
    }
    return kept


def _message_id_of(record: Any) -> str | None:
    """The message id of an already normalized stored record, if it has one."""
    if type(record) is not dict or type(record.get("data")) is not dict:
        return None
    data = record["data"]
    message_id = data.get("id") if record.get("type") == USER_MESSAGE else None
    if message_id is None and type(data.get("message")) is dict:
        message_id = data["message"].get("id")
    return message_id if type(message_id) is str else None


def _replaced_id(records: Sequence[Any], record: dict[str, Any], own_id: str) -> str:
    """A.4: a replacing tool result keeps the message id of the event its `start` names."""
    op = record.get("surfaceOp")
    if type(op) is not dict or op.get("op") != "replace":
        return own_id
    start = safe_int(op.get("start")) if type(op.get("start")) is not bool else None
    if start is None or not 0 <= start < len(records):
        return own_id  # the surface rules (R8) name what is wrong with the target
    inherited = _message_id_of(records[start])
    return own_id if inherited is None else inherited


def _rewrite(
    records: Sequence[Any], record: dict[str, Any], session_id: str
) -> tuple[str, dict[str, Any]] | None:
    """The normalized record and the shape's name, or None when it is current."""
    event_type, data = record.get("type"), record.get("data")
    if event_type == TURN_START:
        new_data = _turn_start(data)
        name = "turn-start-trigger"
    elif event_type == TURN_END:
        new_data = _turn_end(data)
        name = "turn-end-reason"
    elif event_type in (STEERING_MESSAGE, USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT):
        own_id = legacy_message_id(session_id, record.get("seq", len(records)))
        if event_type == STEERING_MESSAGE:
            steered = {**record, "type": USER_MESSAGE, "data": _steering(data, own_id)}
            return "steering-message", steered
        if event_type == USER_MESSAGE:
            new_data, name = _old_user(data, own_id), "user-message-identity"
        elif event_type == ASSISTANT_MESSAGE:
            new_data, name = _old_assistant(data, own_id), "assistant-message-identity"
        else:
            new_data = _old_result(data, _replaced_id(records, record, own_id))
            name = "tool-result-identity"
    else:
        return None
    if new_data is None:
        return None
    return name, {**record, "data": new_data}


def normalize_legacy(records: list[Any], *, session_id: str, lenient: bool = False) -> Normalized:
    """Appendix A over stored wire records, in log order; the input is not changed.

    A malformed old shape is `CorruptLog` naming the rule and the record's seq,
    unless `lenient` (a suffix read, which admits nothing): the record is then
    kept as it is, for load to refuse.
    """
    out: list[Any] | None = None
    counts: dict[str, int] = {}
    for index, record in enumerate(records):
        if type(record) is not dict:
            continue
        event_type = record.get("type")
        if event_type.__class__ is not str or event_type not in _READ_TYPES:
            continue
        try:
            rewritten = _rewrite(records if out is None else out, record, session_id)
        except _Refused as refused:
            if lenient:
                continue
            raise CorruptLog(
                f"stored event at seq {index} fails the older-v0-shape rules "
                f"({refused.rule}): {refused.detail}; its data is {summary(record.get('data'))}",
                index=index,
                seq=index,
                rule=refused.rule,
            ) from None
        if rewritten is None:
            continue
        name, new_record = rewritten
        if out is None:
            out = list(records)
        out[index] = new_record
        counts[name] = counts.get(name, 0) + 1
    if out is None:
        return Normalized(records)
    return Normalized(out, pmap(counts))


def may_need_normalizing(event: Event) -> bool:
    """Whether an event the typed load path admitted could be rewritten by Appendix A.

    Every older shape fails the typed decode (or the per-event rules) but two: a
    `steering/message`, whose type is outside the vocabulary, and a `turn/end`
    whose reason is `{kind: "disposed"}`, an extension kind to R12.
    """
    if event.type == STEERING_MESSAGE:
        return True
    if event.type != TURN_END:
        return False
    data = raw(event.data)
    reason = data.get("reason") if type(data) is dict else None
    return type(reason) is dict and reason.get("kind") == "disposed"


def _old_looking(event: Event) -> bool:
    """Whether a scanned event might be an older shape (a cheap test on its top-level keys)."""
    event_type = event.type
    if event_type == STEERING_MESSAGE:
        return True
    data = raw(event.data)
    if type(data) is not dict:
        return False
    if event_type == TURN_START:
        return "trigger" in data
    if event_type == TURN_END:
        reason = data.get("reason")
        return type(reason) is dict and reason.get("kind") in ("aborted", "disposed", "error")
    if event_type == USER_MESSAGE:
        return "id" not in data
    return event_type in (ASSISTANT_MESSAGE, TOOL_RESULT) and "message" not in data


def _wire_sharing_data(event: Event) -> dict[str, Any]:
    """The event's wire dict, its payload the frozen value's own container, not a copy:
    `normalize_legacy` changes nothing it is given, and builds new dicts where it rewrites."""
    wire = event_to_wire(event)
    wire["data"] = raw(event.data)
    return wire


def normalize_events(
    events: Sequence[Event], *, session_id: str
) -> tuple[tuple[Event, ...], PMap[str, int]]:
    """`normalize_legacy` (lenient) over scanned events: the view a suffix read cuts (A.5)."""
    if not any(map(_old_looking, events)):
        return tuple(events), pmap()
    wire = [_wire_sharing_data(e) for e in events]
    normalized = normalize_legacy(wire, session_id=session_id, lenient=True)
    rebuilt = tuple(
        event
        if new is old
        else event_from_wire(new, f"stored event at seq {event.seq}", lossless=False)
        for event, old, new in zip(events, wire, normalized.records, strict=True)
    )
    return rebuilt, normalized.counts
