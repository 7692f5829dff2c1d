"""Seed boundaries (docs/format/folds.md §8, §9): what a fork inherits, where a seed ended.

A fork may only cut the log outside an open turn; the child's constructor then appends
its own `session/end-seed` marker. The **last** marker in a log is the one that counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from kernel.errors import ForkError
from kernel.values.events import END_SEED, TURN_END, TURN_START, Event
from kernel.values.json import safe_int, summary
from kernel.wire.codec import check_event, event_sequence

__all__ = ("fork_prefix", "last_end_seed")


def fork_prefix(events: Iterable[Event], boundary: Any = None) -> tuple[Event, ...]:
    """The events a child session forked at seq `boundary` inherits: `events[0 .. boundary]`.

    The events of the prefix are checked (`check_event`).

    Args:
        events: the parent's log.
        boundary: the seq of the last inherited event; None means the last event (an
            empty log gives `()`).

    Raises:
        ForkError: `code` `INVALID_BOUNDARY` when the boundary is not a non-negative
            safe integer naming an event of the log, `OPEN_TURN` when it sits inside
            an open turn (the last `turn/start` / `turn/end` up to it is a `turn/start`).

    >>> from kernel.values.events import Event
    >>> log = [Event("turn/start", 0, 0, {"turn": 1}), Event("x/note", 1, 0, {})]
    >>> fork_prefix(log, 1)
    Traceback (most recent call last):
    ...
    kernel.errors.ForkError: fork boundary 1 is inside the turn opened at seq 0
    """
    log = event_sequence(events)
    if boundary is None:
        if not log:
            return ()
        boundary = _checked(log, len(log) - 1).seq
    at = safe_int(boundary)
    if at is None or at < 0:
        raise ForkError(
            f"fork boundary {summary(boundary)} must be a non-negative safe integer",
            code=ForkError.INVALID_BOUNDARY,
        )
    if at >= len(log):
        raise ForkError(
            f"fork boundary {at} does not exist (the log has {len(log)} events)",
            code=ForkError.INVALID_BOUNDARY,
        )
    prefix = tuple([_checked(log, index) for index in range(at + 1)])
    if prefix[at].seq != at:
        raise ForkError(
            f"fork boundary {at}: the event at index {at} has seq {prefix[at].seq}",
            code=ForkError.INVALID_BOUNDARY,
        )
    for index in range(at, -1, -1):
        event = prefix[index]
        if event.type == TURN_END:
            break
        if event.type == TURN_START:
            raise ForkError(
                f"fork boundary {at} is inside the turn opened at seq {event.seq}",
                code=ForkError.OPEN_TURN,
            )
    return prefix


def _checked(log: Sequence[Any], index: int) -> Event:
    return check_event(log[index], f"event at index {index}", index)


def last_end_seed(events: Iterable[Event]) -> int | None:
    """The seq of the last `session/end-seed` marker, or None when the log has none (§9).

    The events read, from the last back to the marker, are checked (`check_event`).

    >>> from kernel.values.events import Event
    >>> last_end_seed([Event("session/end-seed", 0, 0, {}), Event("session/end-seed", 1, 0, {})])
    1
    """
    ordered = event_sequence(events)
    for index in range(len(ordered) - 1, -1, -1):
        event = _checked(ordered, index)
        if event.type == END_SEED:
            return event.seq
    return None
