"""Message projection and the derived history (folds.md §2).

A derived message is the frozen object held inside its event, never a copy:
`project_message(e) is project_message(e)`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pyrsistent import PVector, pvector

from kernel.errors import MessageShapeError
from kernel.events import ASSISTANT_MESSAGE, TOOL_RESULT, USER_MESSAGE, Event
from kernel.json import raw
from kernel.surface import SurfaceState, fold_surface

__all__ = ("project_message", "derive_messages", "step_messages")


def project_message(event: Event) -> Any:
    """The model-visible message an event contributes, or None.

    `user/message` gives its data; `assistant/message` its message unless the
    content is empty; `tool/result` its message; every other type None.
    """
    event_type = event.type
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


def _project_nodes(nodes: Iterable[int], lookup: Callable[[int], Event]) -> PVector[Any]:
    return pvector(m for seq in nodes if (m := project_message(lookup(seq))) is not None)


def step_messages(
    messages: PVector[Any],
    before: SurfaceState,
    after: SurfaceState,
    event: Event,
    lookup: Callable[[int], Event],
) -> PVector[Any]:
    """The derived history after one more event: extend on append, rebuild on replace."""
    if after is before:
        return messages
    if after.replace_generation == before.replace_generation:
        message = project_message(event)
        return messages if message is None else messages.append(message)
    return _project_nodes(after.nodes, lookup)


def derive_messages(events: Iterable[Event]) -> tuple[Any, ...]:
    """The message history a model request carries: projected surface nodes, in order."""
    log: Sequence[Event] = events if isinstance(events, Sequence) else list(events)
    nodes = fold_surface(log).nodes
    return tuple(_project_nodes(nodes, log.__getitem__))
