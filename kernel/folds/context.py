"""Latest-wins folds besides the header (docs/format/folds.md §3.5, §4): request context, todos.

Each fold is a state, a step and a reduce; only its own event type changes the state.
`context_event` is the writer rule that decides whether a route change is worth a
`request/context` event; it never looks at the request header.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any, Final

import attrs

from kernel.errors import EventShapeError
from kernel.values.events import REQUEST_CONTEXT, TODO_WRITE, Event
from kernel.values.json import FrozenObject, freeze, json_equal
from kernel.wire.codec import event_sequence, ill_typed_events_reported

__all__ = (
    "RequestContextState",
    "fold_request_context",
    "context_event",
    "TodosState",
    "fold_todos",
)

_ABSENT: Final = object()
_ROUTE_FIELDS: Final = ("provider", "model", "contextWindow")


@attrs.frozen
class RequestContextState:
    """The route in force after a prefix: the data of the last `request/context`, or None."""

    context: Any = None

    def step(self, event: Event) -> RequestContextState:
        """The state after one more event; only `request/context` events change it."""
        if event.type != REQUEST_CONTEXT:
            return self
        return RequestContextState(event.data)


def fold_request_context(events: Iterable[Event]) -> Any:
    """The data of the last `request/context` event, or None when there is none (§3.5).

    Events are checked as `fold_surface` checks them (only when one cannot be read).
    """
    log = event_sequence(events)
    with ill_typed_events_reported(log):
        return functools.reduce(RequestContextState.step, log, RequestContextState()).context


def _same(a: Any, b: Any) -> bool:
    """Absent equals only absent; present values compare as JSON (numbers by value)."""
    if a is _ABSENT or b is _ABSENT:
        return a is b
    return json_equal(a, b)


def context_event(previous: Any, ctx: Any) -> FrozenObject | None:
    """The `request/context` data to append before a request, or None (docs/format/folds.md §3.5).

    `previous` is `fold_request_context(log)`; `ctx` the resolved route
    `{provider, model, contextWindow?}`. Appends iff there is no previous record or
    `provider`, `model` or `contextWindow` differs (absent differs from present, so a
    route without a window clears an older one; numbers compare by value).

    >>> route = {"provider": "p", "model": "m", "contextWindow": 8}
    >>> context_event(None, route)["model"], context_event(route, {**route})
    ('m', None)
    """
    if not isinstance(ctx, Mapping):
        raise EventShapeError("request context: the route must be a JSON object (R12)")
    if previous is not None and not isinstance(previous, Mapping):
        raise EventShapeError("request context: the previous record must be a JSON object (R12)")
    if previous is not None and all(
        _same(previous.get(key, _ABSENT), ctx.get(key, _ABSENT)) for key in _ROUTE_FIELDS
    ):
        return None
    data: FrozenObject = freeze(ctx)
    return data


@attrs.frozen
class TodosState:
    """The todo list after a prefix: `data.todos` of the last `todo/write`, or None."""

    todos: Any = None

    def step(self, event: Event) -> TodosState:
        """The state after one more event; only `todo/write` events change it.

        Admission does not check `todo/write` payloads, so a write whose data is not
        an object with `todos` leaves no list (None): the latest write still wins.
        """
        if event.type != TODO_WRITE:
            return self
        data = event.data
        return TodosState(data.get("todos") if isinstance(data, Mapping) else None)


def fold_todos(events: Iterable[Event]) -> Any:
    """`data.todos` of the last `todo/write` event, or None when there is none
    (docs/format/folds.md §4).

    Events are checked as `fold_surface` checks them (only when one cannot be read).
    """
    log = event_sequence(events)
    with ill_typed_events_reported(log):
        return functools.reduce(TodosState.step, log, TodosState()).todos
