"""A loaded log's events carry the surface the load planned: every fold over them answers
exactly as it answers over the same events in a plain tuple or list."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel import (
    check_invariants,
    derive_messages,
    fold_request_header,
    fold_surface,
    interrupted_turn_closers,
    load_jsonl,
    load_jsonl_zstd,
    tool_pairing_cuts,
    write_jsonl,
    write_jsonl_zstd,
)
from kernel.folds.surface import AdmittedEvents, SurfaceFold
from kernel.values.events import LoadedEvents, SessionHeader
from kernel.values.json import thaw
from properties import strategies as gen
from properties.laws import as_events

HEADER = SessionHeader(id="sess-1", created_at=1)
START = {"config": {"provider": "p", "model": "m"}}


def answers(events: Any) -> tuple[Any, ...]:
    """Every fold's answer over `events`, an error as its type and message."""

    def outcome(fold: Any) -> Any:
        try:
            return fold(events)
        except Exception as exc:  # the same error either way is part of the answer
            return (type(exc).__name__, str(exc))

    return tuple(
        outcome(fold)
        for fold in (
            fold_surface,
            lambda e: [thaw(m) for m in derive_messages(e)],
            tool_pairing_cuts,
            fold_request_header,
            lambda e: fold_request_header(e, START),
            interrupted_turn_closers,
            check_invariants,
        )
    )


def loaded(events: Any, *, pack: bool, zstd: bool) -> Any:
    if zstd:
        return load_jsonl_zstd(write_jsonl_zstd(HEADER, events), now=0).events
    return load_jsonl(write_jsonl(HEADER, events, pack_chunks=pack), now=0).events


@given(gen.crash_prefixes(rich=True, max_actions=5, shape="any"), st.booleans(), st.booleans())
def test_the_folds_over_loaded_events_answer_as_over_a_plain_tuple(
    case: Any, pack: bool, zstd: bool
) -> None:
    events = loaded(case.events, pack=pack, zstd=zstd)
    assert type(events) is AdmittedEvents  # the typed path admitted it: the memo is in use
    assert events.request_headers == _positions_of(events, "request/header")
    assert answers(events) == answers(tuple(events)) == answers(list(events))
    assert interrupted_turn_closers(tuple(events)) == ()  # the load closed its last turn


@given(gen.loop_logs(rich=True, max_actions=4, shape="any"))
def test_the_surface_a_load_keeps_is_the_fold_of_its_events(log: Any) -> None:
    events = loaded(as_events(log), pack=True, zstd=False)
    assert events.surface == fold_surface(list(events))
    assert events.request_headers == _positions_of(events, "request/header")


def test_admitted_events_are_a_frozen_tuple_that_slices_copies_and_pickles_as_one() -> None:
    fold = SurfaceFold((), ())
    events = AdmittedEvents([], fold)
    assert events == () and isinstance(events, tuple) and events.surface is fold
    assert events.request_headers == () and isinstance(events, LoadedEvents)
    with pytest.raises(AttributeError):
        events.surface = fold  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del events.surface
    loaded_events = load_jsonl(
        write_jsonl(HEADER, load_jsonl(_example("clean-run.jsonl"), now=0).events), now=0
    ).events
    assert type(loaded_events) is AdmittedEvents
    assert type(loaded_events[1:]) is tuple and type(loaded_events[:]) is tuple
    back = pickle.loads(pickle.dumps(loaded_events))
    assert type(back) is tuple and back == loaded_events


def _positions_of(events: tuple[Any, ...], event_type: str) -> tuple[int, ...]:
    return tuple(at for at, event in enumerate(events) if event.type == event_type)


def _example(name: str) -> bytes:
    from pathlib import Path

    return (Path(__file__).resolve().parents[2] / "examples" / name).read_bytes()
