"""Foundation properties: lossless codec, seed = appends + marker, only KernelError escapes."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel import APPEND, Replace, SessionLog, event_from_json, event_to_json, freeze, thaw
from kernel.errors import KernelError
from kernel.values.json import MAX_SAFE_INTEGER, json_equal

SAFE_INTS = st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
FLOATS = st.floats(allow_nan=False, allow_infinity=False).filter(
    lambda f: not (f == 0 and str(f)[0] == "-")
)
TEXT = st.text(st.characters(codec=None, categories=None), max_size=8)

lossless_json = st.recursive(
    st.none() | st.booleans() | SAFE_INTS | FLOATS | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)

junk_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | TEXT
    | st.binary(max_size=3)
    | st.tuples(st.integers())
    | st.frozensets(st.integers(), max_size=2)
)
junk_json: st.SearchStrategy[Any] = st.recursive(
    junk_scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(TEXT | st.integers() | st.none(), inner, max_size=3)
    ),
    max_leaves=10,
)

EVENT_TYPES = st.sampled_from(
    [
        "turn/start",
        "turn/end",
        "step/start",
        "step/end",
        "user/message",
        "assistant/chunk",
        "assistant/message",
        "tool/call",
        "tool/result",
        "request/header",
        "request/context",
        "todo/write",
        "session/end-seed",
        "x/extension",
        "mode/set",
    ]
)


@st.composite
def wire_events(draw: st.DrawFn) -> dict[str, Any]:
    """Any envelope the codec admits: arbitrary data, surface metadata where allowed."""
    event_type = draw(
        st.sampled_from(["user/message", "tool/result", "assistant/message", "x/y", "turn/start"])
    )
    event: dict[str, Any] = {
        "type": event_type,
        "seq": draw(st.integers(0, MAX_SAFE_INTEGER)),
        "time": draw(SAFE_INTS),
        "data": draw(lossless_json),
    }
    if event_type in ("user/message", "tool/result", "assistant/message"):
        event["surfaceOp"] = draw(
            st.just("append")
            | st.builds(
                lambda s, e: {"op": "replace", "start": s, "end": e},
                st.integers(0, 99),
                st.integers(0, 99),
            )
        )
        if draw(st.booleans()):
            event["sourceEventSeqs"] = draw(st.lists(st.integers(0, 99), max_size=3))
    if draw(st.booleans()):
        event["ignorable"] = True
    keys = list(event)
    order = draw(st.permutations(keys))
    return {k: event[k] for k in order}


@given(wire_events())
def test_codec_round_trip_is_lossless(wire: dict[str, Any]) -> None:
    back = event_to_json(event_from_json(wire))
    assert back == wire and json_equal(back, wire)
    assert list(back) == list(wire), "member order of the envelope is kept"


@given(lossless_json)
def test_freeze_thaw_round_trip(value: Any) -> None:
    assert json_equal(thaw(freeze(value)), value)
    assert thaw(freeze(value)) == value


# -- seed = appends + one marker ---------------------------------------------------------------


def _message(i: int) -> dict[str, Any]:
    return {
        "id": f"m{i}",
        "role": "user",
        "content": [{"type": "text", "text": str(i)}],
        "source": {"kind": "user"},
    }


@st.composite
def appended_logs(draw: st.DrawFn) -> SessionLog:
    """Logs built by appends: messages, noise, and replacements over current nodes."""
    log = SessionLog.empty()
    for _ in range(draw(st.integers(0, 12))):
        action = draw(st.sampled_from(["message", "noise", "replace", "marker"]))
        seq = len(log)
        nodes = list(log.surface.nodes)
        if action == "replace" and nodes:
            i = draw(st.integers(0, len(nodes) - 1))
            j = draw(st.integers(i, len(nodes) - 1))
            log = log.append(
                "user/message",
                _message(seq),
                time=seq,
                surface_op=Replace(nodes[i], nodes[j]),
                source_event_seqs=nodes[i : j + 1],
            )
        elif action == "noise":
            log = log.append("x/noise", {"n": seq}, time=seq, ignorable=True)
        elif action == "marker":
            log = log.append("session/end-seed", {}, time=seq)
        else:
            log = log.append("user/message", _message(seq), time=seq, surface_op=APPEND)
    return log


@given(appended_logs())
def test_seed_of_an_appended_log_adds_exactly_one_marker(log: SessionLog) -> None:
    seeded = SessionLog.seed(log.events, now=10**6)
    ends_with_marker = len(log) > 0 and log.events[-1].type == "session/end-seed"
    assert tuple(seeded.events[: len(log)]) == tuple(log.events)
    assert len(seeded) == len(log) + (0 if ends_with_marker else 1)
    assert tuple(seeded.messages) == tuple(log.messages)
    assert tuple(seeded.surface.nodes) == tuple(log.surface.nodes)
    assert seeded.first_live_seq == len(log)
    reseeded = SessionLog.seed(seeded.events, now=10**7)
    assert tuple(reseeded.events) == tuple(seeded.events)


@given(appended_logs())
def test_seed_from_wire_objects_equals_seed_from_events(log: SessionLog) -> None:
    wire = [event_to_json(e) for e in log.events]
    from_wire = SessionLog.seed(wire, now=0)
    from_events = SessionLog.seed(log.events, now=0)
    assert tuple(from_wire.events) == tuple(from_events.events)


# -- nothing but KernelError escapes ---------------------------------------------------------------


@st.composite
def near_events(draw: st.DrawFn) -> Any:
    """Objects shaped somewhat like events, with junk in arbitrary places."""
    if draw(st.booleans()):
        return draw(junk_json)
    event: dict[Any, Any] = {
        "type": draw(EVENT_TYPES | junk_json),
        "seq": draw(st.just(0) | junk_json),
        "time": draw(st.just(0) | junk_json),
        "data": draw(junk_json),
    }
    for key in ("surfaceOp", "sourceEventSeqs", "ignorable", "extra"):
        if draw(st.booleans()):
            event[key] = draw(junk_json | st.just("append"))
    return event


@given(st.lists(near_events(), max_size=3))
def test_seed_and_restore_raise_only_kernel_errors(events: list[Any]) -> None:
    for build in (lambda: SessionLog.seed(events, now=0), lambda: SessionLog.restore(events)):
        with contextlib.suppress(KernelError):
            build()


@given(EVENT_TYPES | junk_json, junk_json, junk_json, junk_json, junk_json)
def test_append_raises_only_kernel_errors(
    event_type: Any, data: Any, time: Any, op: Any, sources: Any
) -> None:
    base = SessionLog.empty().append("user/message", _message(0), time=0, surface_op=APPEND)
    with contextlib.suppress(KernelError):
        base.append(event_type, data, time=time, surface_op=op, source_event_seqs=sources)


@pytest.mark.slow
def test_twenty_thousand_deep_nesting_is_admitted_without_recursion_error() -> None:
    value: Any = 1
    for _ in range(20_000):
        value = [value]
    log = SessionLog.empty().append("x/deep", {"v": value}, time=0, ignorable=True)
    assert log.events[0].data["v"][0][0][0] is not None
    seeded = SessionLog.seed(
        [{"type": "x/deep", "seq": 0, "time": 0, "data": value, "ignorable": True}], now=1
    )
    assert len(seeded) == 2
    assert json_equal(thaw(seeded.events[0].data), value)
