"""Request context and todo folds, and the request-context writer rule (docs/format/folds.md §3.5,
§4)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from kernel.errors import EventShapeError
from kernel.folds.context import (
    RequestContextState,
    TodosState,
    context_event,
    fold_request_context,
    fold_todos,
)
from kernel.values.events import REQUEST_CONTEXT, TODO_WRITE, Event
from kernel.values.json import FrozenObject

ROUTE = {"provider": "deepseek", "model": "deepseek-chat", "contextWindow": 128000}


def ev(seq: int, kind: str, data: Any) -> Event:
    return Event(kind, seq, seq * 10, data)


# -- §3.5 fold ---------------------------------------------------------------------------------


def test_context_3_5_fold_is_none_without_a_record() -> None:
    assert fold_request_context([]) is None
    assert fold_request_context([ev(0, "turn/start", {"turn": 1})]) is None


def test_context_3_5_fold_latest_record_wins() -> None:
    other = {"provider": "p", "model": "m"}
    log = [
        ev(0, REQUEST_CONTEXT, ROUTE),
        ev(1, "turn/start", {"turn": 1}),
        ev(2, REQUEST_CONTEXT, other),
    ]
    assert fold_request_context(log) == other
    assert fold_request_context(log) is log[2].data
    assert fold_request_context(iter(log[:2])) == ROUTE


def test_context_3_5_fold_equals_the_step() -> None:
    log = [ev(0, REQUEST_CONTEXT, ROUTE), ev(1, TODO_WRITE, {"todos": []})]
    state = RequestContextState()
    for event in log:
        state = state.step(event)
    assert state.context == fold_request_context(log)


# -- §3.5 writer rule --------------------------------------------------------------------------


def test_context_3_5_first_route_is_always_logged() -> None:
    data = context_event(None, ROUTE)
    assert isinstance(data, FrozenObject)
    assert data == ROUTE


def test_context_3_5_same_route_is_not_logged_again() -> None:
    assert context_event(ROUTE, dict(ROUTE)) is None
    assert context_event(ROUTE, {**ROUTE, "contextWindow": 128000.0}) is None


@pytest.mark.parametrize(
    ("field", "value"), [("provider", "other"), ("model", "other"), ("contextWindow", 64000)]
)
def test_context_3_5_changed_field_is_logged(field: str, value: Any) -> None:
    changed = {**ROUTE, field: value}
    assert context_event(ROUTE, changed) == changed


def test_context_3_5_route_without_window_clears_an_older_window() -> None:
    no_window = {"provider": ROUTE["provider"], "model": ROUTE["model"]}
    assert context_event(ROUTE, no_window) == no_window
    assert context_event(no_window, ROUTE) == ROUTE
    assert context_event(no_window, dict(no_window)) is None


def test_context_3_5_accepts_frozen_previous() -> None:
    log = [ev(0, REQUEST_CONTEXT, ROUTE)]
    assert context_event(fold_request_context(log), ROUTE) is None


@pytest.mark.parametrize(("previous", "ctx"), [(None, None), (None, ["p", "m"]), ("route", ROUTE)])
def test_context_3_5_non_object_route_is_a_shape_error(previous: Any, ctx: Any) -> None:
    with pytest.raises(EventShapeError):
        context_event(previous, ctx)


# -- §4 todos ----------------------------------------------------------------------------------


def test_todos_4_none_without_a_write() -> None:
    assert fold_todos([ev(0, "turn/start", {"turn": 1})]) is None


def test_todos_4_latest_write_wins() -> None:
    first = [{"content": "a", "status": "pending"}]
    second = [{"content": "a", "status": "completed"}, {"content": "b", "status": "pending"}]
    log = [
        ev(0, TODO_WRITE, {"todos": first}),
        ev(1, "x/y", {}),
        ev(2, TODO_WRITE, {"todos": second}),
    ]
    assert fold_todos(log) == second
    assert fold_todos(log[:2]) == first


def test_todos_4_unchecked_payloads_leave_no_list() -> None:
    # admission does not check todo/write payloads; the latest write still wins
    todos = [{"content": "a", "status": "pending"}]
    for data in (None, {}, ["a"]):
        assert fold_todos([ev(0, TODO_WRITE, {"todos": todos}), ev(1, TODO_WRITE, data)]) is None
    state = TodosState().step(ev(0, TODO_WRITE, {"todos": todos}))
    assert state.todos == todos


# -- P27 context writer ------------------------------------------------------------------------

routes = st.fixed_dictionaries(
    {"provider": st.sampled_from(["p", "q"]), "model": st.sampled_from(["m", "n"])},
    optional={"contextWindow": st.sampled_from([8000, 8000.0, 128000])},
)


@given(st.lists(routes, max_size=12))
def test_p27_context_is_logged_iff_the_route_changed(resolved: list[dict[str, Any]]) -> None:
    log: list[Event] = []
    last: dict[str, Any] | None = None
    for route in resolved:
        data = context_event(fold_request_context(log), route)
        note(f"route {route!r} -> {data!r}")
        changed = last is None or (
            (route["provider"], route["model"], route.get("contextWindow"))
            != (last["provider"], last["model"], last.get("contextWindow"))
        )
        assert (data is not None) == changed, "context_event disagrees with the §3.5 rule"
        if data is not None:
            log.append(ev(len(log), REQUEST_CONTEXT, data))
            last = route
        assert fold_request_context(log) == last
