"""Message projection and the derived history (docs/format/folds.md §2).

A derived message is the frozen object held inside its event, never a copy:
`project_message(e) is project_message(e)`. The history `SessionLog` keeps
(`MessageHistory`) is stored by surface slot (kernel/folds/surface.py), so a replace
rewrites the slots it shadowed and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
from pyrsistent import PVector

from kernel.errors import MessageShapeError
from kernel.folds.surface import SurfaceState, surface_fold_of
from kernel.values.events import ASSISTANT_MESSAGE, TOOL_RESULT, USER_MESSAGE, Event
from kernel.values.json import FrozenObject, object_member, raw
from kernel.values.vectors import vector
from kernel.wire.codec import check_event, event_sequence, ill_typed_events_reported

__all__ = (
    "project_message",
    "derive_messages",
    "step_messages",
    "history_of",
    "MessageHistory",
)


def project_message(event: Event) -> Any:
    """The model-visible message an event contributes, or None.

    `user/message` gives its data; `assistant/message` its message unless the
    content is empty; `tool/result` its message; every other type None. The
    event's field types are checked first (`check_event`).
    """
    return _project(check_event(event))


def _project(event: Event) -> Any:
    """`project_message` of an event whose field types are known to be right."""
    event_type = event.type
    data = event.data
    if type(data) is FrozenObject and data._checked_as == event_type:
        # The typed load path checked the shape (R10): the message can be handed on
        # unread. (It marks an assistant message only when its content is not empty.)
        if event_type == USER_MESSAGE:
            return data
        if event_type in (TOOL_RESULT, ASSISTANT_MESSAGE):
            return object_member(data, "message")
    if event_type == USER_MESSAGE:
        if type(raw(event.data)) is not dict:
            raise MessageShapeError(f"event seq {event.seq}: user/message data is not an object")
        return event.data
    if event_type != ASSISTANT_MESSAGE and event_type != TOOL_RESULT:
        return None
    data = raw(event.data)
    message = data.get("message") if type(data) is dict else None
    if type(message) is not dict or type(message.get("content")) is not list:
        raise MessageShapeError(
            f"event seq {event.seq}: {event_type} lacks a message with a content array (R10)"
        )
    if event_type == ASSISTANT_MESSAGE and not message["content"]:
        return None
    return event.data["message"]


@attrs.frozen
class MessageHistory:
    """The derived history as `SessionLog` keeps it: by surface slot (`SurfaceState`).

    `slots[x]` is the message of the node in surface slot x, or None when the
    slot is empty or its node projects to nothing (an empty assistant message).
    An append adds a slot, a replace rewrites only the slots it shadowed; the
    dense vector (`SessionLog.messages`) is built on first use after a replace,
    then extended by appends.
    """

    slots: PVector[Any] = attrs.field(factory=vector)
    # the dense vector, once built
    _dense: PVector[Any] | None = attrs.field(default=None, eq=False, repr=False, alias="_dense")

    def dense(self) -> PVector[Any]:
        """The messages in surface order, as a persistent vector (built once, then shared)."""
        dense = self._dense
        if dense is None:
            dense = vector([m for m in self.slots if m is not None])
            object.__setattr__(self, "_dense", dense)
        return dense

    def appended(self, message: Any) -> MessageHistory:
        """The history after an appended surface node whose projection is `message`."""
        dense = self._dense
        if message is not None and dense is not None:
            dense = dense.append(message)
        return MessageHistory(self.slots.append(message), dense)

    def replaced(self, slots: Sequence[int], message: Any) -> MessageHistory:
        """The history after a replace that shadowed `slots` and put `message` in the first."""
        rewritten = self.slots
        for x in slots[1:]:
            rewritten = rewritten.set(x, None)
        return MessageHistory(rewritten.set(slots[0], message))


def step_messages(
    messages: MessageHistory,
    before: SurfaceState,
    after: SurfaceState,
    event: Event,
    lookup: Callable[[int], Event],
) -> MessageHistory:
    """The derived history after one more event, given the surface before and after it.

    An append adds the event's projection; a replace rewrites the slots it
    shadowed. `lookup` is not read (the history holds what it needs).
    """
    if after is before:
        return messages
    if after.replace_generation == before.replace_generation:
        return messages.appended(_project(event))
    shadowed = after.replacements[-1].shadowed_seqs
    return messages.replaced([before.slot_of[s] for s in shadowed], _project(event))


def history_of(surface: SurfaceState, events: Sequence[Event]) -> MessageHistory:
    """The history of an admitted log, by slot, from its surface state (one pass)."""
    listed = events.tolist() if isinstance(events, PVector) else events  # indexed in C
    return MessageHistory(
        vector([None if seq < 0 else _project(listed[seq]) for seq in surface.slots])
    )


def derive_messages(events: Iterable[Event]) -> tuple[Any, ...]:
    """The message history a model request carries: projected surface nodes, in order.

    Events are checked as `fold_surface` checks them (only when one cannot be read).
    """
    log = event_sequence(events)
    with ill_typed_events_reported(log):
        nodes = surface_fold_of(log).nodes
        return tuple([m for seq in nodes if (m := _project(log[seq])) is not None])
