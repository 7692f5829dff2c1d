"""Helpers the laws share: normalizing a log given as wire dicts or `Event`s, building sessions.

Internal to the kit; `properties.laws` re-exports `as_events` and `as_wire`. A law
accepts a log as any sequence of kernel `Event`s or plain wire dicts, which these
convert. `append_all` builds a session the way a live writer does, one `append` per event.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from kernel.log import SessionLog
from kernel.values.events import Event
from kernel.values.json import json_equal, thaw
from kernel.wire.codec import event_from_json, event_to_json

__all__ = (
    "LogLike",
    "as_events",
    "as_wire",
    "append_wire",
    "append_all",
    "strict_text",
    "same_json",
    "messages_plain",
    "error_named",
)

LogLike = Sequence[Event] | Sequence[Mapping[str, Any]]
"""A log: kernel events or wire objects (anything with `.events` is unwrapped first)."""


def _unwrap(log: Any) -> Sequence[Any]:
    events = getattr(log, "events", log)
    return list(events)


def as_events(log: Any) -> tuple[Event, ...]:
    """The log as kernel `Event`s; wire objects go through `event_from_json`.

    `log` is a sequence of `Event`s or wire dicts, or anything with an `.events` attribute
    holding one (a `LoopLog`, a `CrashPrefix`, a `SessionLog`).

    >>> [event.type for event in as_events([{"type": "turn/start", "seq": 0, "time": 1,
    ...                                      "data": {"turn": 1}}])]
    ['turn/start']
    """
    return tuple(e if isinstance(e, Event) else event_from_json(e) for e in _unwrap(log))


def as_wire(log: Any) -> list[dict[str, Any]]:
    """The log (as for `as_events`) as caller-owned plain wire dicts."""
    return [event_to_json(e) if isinstance(e, Event) else thaw(e) for e in _unwrap(log)]


def append_wire(log: SessionLog, event: Mapping[str, Any]) -> SessionLog:
    """`log.append` of one wire event (its `seq` is ignored: the kernel assigns it)."""
    return log.append(
        event["type"],
        event.get("data"),
        time=event["time"],
        surface_op=event.get("surfaceOp"),
        source_event_seqs=event.get("sourceEventSeqs"),
        ignorable=event.get("ignorable", False) is True,
    )


def append_all(
    events: Sequence[Mapping[str, Any]], start: SessionLog | None = None
) -> list[SessionLog]:
    """The session after each append of `events` (index i: after i + 1 events)."""
    log = start if start is not None else SessionLog.empty()
    out = []
    for event in events:
        log = append_wire(log, event)
        out.append(log)
    return out


def strict_text(value: Any) -> str:
    """A type-strict, order-preserving text of a JSON value (1 and 1.0 differ, keys in order)."""
    return json.dumps(thaw(value), ensure_ascii=True, separators=(",", ":"), allow_nan=True)


def same_json(a: Any, b: Any) -> bool:
    """Structural JSON equality (docs/format/events.md §1.4) of frozen or plain values."""
    return json_equal(thaw(a), thaw(b))


def messages_plain(messages: Sequence[Any]) -> list[Any]:
    """Derived messages as plain values."""
    return [thaw(m) for m in messages]


def error_named(exc: BaseException, name: str) -> bool:
    """Whether `exc` is an instance of the kernel error class called `name`."""
    return any(cls.__name__ == name for cls in type(exc).__mro__)
