"""`event_from_json`'s common shape: a wire dict whose envelope is valid as it is and whose
payload is plain is built without copying the envelope (`_common_event`); every other
object takes the general path. Both must give the same event, or the same error."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel.errors import InvalidEnvelope, KernelError
from kernel.values.events import APPEND, ROW_TAGS, Event
from kernel.values.json import MAX_SAFE_INTEGER, admit_json, admit_plain, thaw
from kernel.wire.codec import _common_event, event_from_json, event_from_wire
from properties import strategies as gen

MAX = MAX_SAFE_INTEGER


class _Key(str):
    """A str subclass: equal to the key it spells, so a lookup finds it; R1 refuses it."""


def _general(obj: Any) -> Event:
    """The general path alone: R1's copy of the whole object, then the envelope rules."""
    admitted = admit_json(obj)
    if type(admitted) is not dict:
        raise InvalidEnvelope("an event must be a JSON object (R2)")
    return event_from_wire(admitted, "event", lossless=True)


def _outcome(build: Any, obj: Any) -> tuple[Any, ...]:
    try:
        event = build(obj)
    except KernelError as exc:
        return ("refused", type(exc), str(exc))
    return (
        "built",
        event,
        event.wire_order,
        type(event.surface_op),
        type(event.data),
        getattr(event.data, "_lossless", None),
    )


def _chunk() -> dict[str, Any]:
    return {
        "type": "assistant/chunk",
        "seq": 7,
        "time": 1760000000871,
        "data": {"turn": 1, "step": 2, "chunk": {"type": "text-delta", "index": 0, "delta": "hi"}},
    }


_TYPES = st.one_of(
    st.sampled_from(["assistant/chunk", "turn/start", "x/y", "", *sorted(ROW_TAGS)]),
    gen.json_strings(max_size=6),
    st.sampled_from([None, 1, True]),
)
_SEQS = st.one_of(
    st.sampled_from([0, 1, MAX, MAX + 1, -1, True, False, 3.0, -0.0, None, "1", 2**64]),
    st.integers(-3, 3),
)
_TIMES = st.one_of(
    st.sampled_from([0, -MAX, MAX, -MAX - 1, MAX + 1, True, 1.5, None, "0"]),
    st.integers(-3, 3),
)
_DATA = st.one_of(
    gen.payload_values(),
    gen.json_values(max_leaves=6),
    st.dictionaries(
        st.sampled_from(["turn", "step", "text", "é", "0"]), gen.json_values(max_leaves=4)
    ),
    gen.bad_json().map(lambda bad: bad.value),
)
_OPTIONAL = {
    "surfaceOp": st.sampled_from(
        ["append", "Append", _Key("append"), None, {"op": "replace", "start": 0, "end": 0}]
    ),
    "ignorable": st.sampled_from([True, False, None]),
    "sourceEventSeqs": st.one_of(
        st.lists(st.integers(0, MAX), max_size=3),
        st.sampled_from(
            [None, [[0, 2]], (1,), [-1], [True], [MAX + 1], [1.0], [1, "2"], [_Key("1")]]
        ),
    ),
    "extra": gen.json_values(max_leaves=2),
}


_PLAIN_DATA = st.dictionaries(
    st.sampled_from(["turn", "step", "id", "text", "chunk"]),
    st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(-MAX, MAX), st.text("abc xyz", max_size=4)),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.sampled_from(["a", "b", "type"]), inner, max_size=3)
        ),
        max_leaves=6,
    ),
    max_size=4,
)
_KEYS = st.sampled_from(["type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs"])
_CHANGES: dict[str, st.SearchStrategy[Any]] = {
    "type": _TYPES,
    "seq": _SEQS,
    "time": _TIMES,
    "data": _DATA,
    **_OPTIONAL,
    "drop": _KEYS,
    "subclass": _KEYS,
}
"""What may change in a common-shape object: a member's value (valid or not), or a member
dropped, or keyed by a str subclass."""


def _changed(obj: dict[Any, Any], what: str, value: Any) -> None:
    if what == "drop":
        obj.pop(value, None)
    elif what == "subclass":
        if value in obj:
            obj[_Key(value)] = obj.pop(value)
    else:
        obj[what] = value


@st.composite
def _near_common(draw: st.DrawFn, what: str) -> Any:
    """A wire object in the common shape with `what` changed, now and then one more change,
    and now and then no dict at all."""
    obj: dict[Any, Any] = {
        "type": draw(st.sampled_from(["assistant/chunk", "turn/start", "x/y"])),
        "seq": draw(st.integers(0, MAX)),
        "time": draw(st.integers(-MAX, MAX)),
        "data": draw(_PLAIN_DATA),
    }
    if draw(st.booleans()):
        obj["surfaceOp"] = "append"
    if draw(st.booleans()):
        obj["sourceEventSeqs"] = draw(st.lists(st.integers(0, MAX), max_size=3))
    _changed(obj, what, draw(_CHANGES[what]))
    if draw(st.integers(0, 3)) == 0:
        more = draw(st.sampled_from(sorted(_CHANGES)))
        _changed(obj, more, draw(_CHANGES[more]))
    return obj if draw(st.integers(0, 9)) else draw(st.sampled_from([[obj], None, "x"]))


@pytest.mark.parametrize("what", sorted(_CHANGES))
@given(data=st.data())
def test_event_from_json_is_the_general_path(what: str, data: st.DataObject) -> None:
    obj = data.draw(_near_common(what))
    assert _outcome(event_from_json, obj) == _outcome(_general, obj)


@given(gen.single_events())
def test_valid_events_are_the_general_paths(wire: dict[str, Any]) -> None:
    assert _outcome(event_from_json, wire) == _outcome(_general, wire)


def test_a_chunk_takes_the_common_shape() -> None:
    wire = _chunk()
    event = _common_event(wire)
    assert event is not None
    assert event == _general(wire)
    assert event.wire_order == ("type", "seq", "time", "data")


def test_an_appended_message_takes_the_common_shape() -> None:
    wire = {
        "type": "user/message",
        "seq": 1,
        "time": 2,
        "data": {"id": "u", "role": "user", "content": [], "source": {"kind": "user"}},
        "surfaceOp": "append",
    }
    event = _common_event(wire)
    assert event is not None and event.surface_op is APPEND
    assert event == _general(wire)


def test_a_cited_message_takes_the_common_shape() -> None:
    wire = _with(surfaceOp="append", sourceEventSeqs=[3, 4, 5])
    event = _common_event(wire)
    assert event is not None and event.source_event_seqs == (3, 4, 5)
    assert _outcome(event_from_json, wire) == _outcome(_general, wire)
    assert event.wire_order == ("type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs")
    wire["sourceEventSeqs"].append(6)
    assert event.source_event_seqs == (3, 4, 5)


def test_the_event_owns_its_payload() -> None:
    wire = _chunk()
    event = event_from_json(wire)
    wire["data"]["chunk"]["delta"] = "changed"
    wire["data"]["turn"] = 9
    wire["type"] = "x/y"
    assert event.type == "assistant/chunk"
    assert thaw(event.data) == _chunk()["data"]


def _with(**changes: Any) -> dict[str, Any]:
    wire = _chunk()
    for key, value in changes.items():
        if value is _DROP:
            del wire[key]
        else:
            wire[key] = value
    return wire


class _ClaimsInt:
    """A value whose `__class__` says `int`: only `type()` tells the truth."""

    __class__ = property(lambda self: int)


_DROP = object()
_KEYED = _chunk()
_KEYED[_Key("time")] = _KEYED.pop("time")

_OTHER_SHAPES = {
    "a str subclass key": _KEYED,
    "no data": _with(data=_DROP),
    "a scalar payload": _with(data=None),
    "an array payload": _with(data=[1]),
    "a float in the payload": _with(data={"turn": 1.5}),
    "a non-ASCII string in the payload": _with(data={"text": "é"}),
    "a lone surrogate in the payload": _with(data={"text": "\ud800"}),
    "an unsafe integer in the payload": _with(data={"turn": MAX + 1}),
    "a tuple in the payload": _with(data={"turn": (1,)}),
    "a str subclass key in the payload": _with(data={_Key("turn"): 1}),
    "a bool seq": _with(seq=True),
    "a seq whose class says int": _with(seq=_ClaimsInt()),
    "a time whose class says int": _with(time=_ClaimsInt()),
    "a float seq": _with(seq=7.0),
    "a negative seq": _with(seq=-1),
    "an unsafe seq": _with(seq=MAX + 1),
    "an unsafe time": _with(time=-MAX - 1),
    "a row tag": _with(type=sorted(ROW_TAGS)[0]),
    "an empty type": _with(type=""),
    "a non-ASCII type": _with(type="é/x"),
    "an unknown key": _with(extra=1),
    "a replace marker": _with(surfaceOp={"op": "replace", "start": 0, "end": 0}),
    "a misspelled marker": _with(surfaceOp="Append"),
    "a str subclass marker": _with(surfaceOp=_Key("append")),
    "citations in a tuple": _with(surfaceOp="append", sourceEventSeqs=(1,)),
    "a negative citation": _with(surfaceOp="append", sourceEventSeqs=[-1]),
    "a bool citation": _with(surfaceOp="append", sourceEventSeqs=[True]),
    "a float citation": _with(surfaceOp="append", sourceEventSeqs=[1.0]),
    "an unsafe citation": _with(surfaceOp="append", sourceEventSeqs=[MAX + 1]),
    "ranged citations": _with(surfaceOp="append", sourceEventSeqs=[[0, 2]]),
    "null citations": _with(surfaceOp="append", sourceEventSeqs=None),
    "a marker, citations and one more member": _with(
        surfaceOp="append", sourceEventSeqs=[1], extra=1
    ),
    "ignorable": _with(ignorable=True),
    "ignorable false": _with(ignorable=False),
}


@pytest.mark.parametrize("wire", list(_OTHER_SHAPES.values()), ids=list(_OTHER_SHAPES))
def test_other_shapes_take_the_general_path(wire: dict[Any, Any]) -> None:
    assert _common_event(wire) is None
    assert _outcome(event_from_json, wire) == _outcome(_general, wire)


def test_admit_plain_answers_only_for_the_common_shape() -> None:
    value = {"a": [1, "x", True, None, {"b": []}]}
    copy = admit_plain(value)
    assert copy == value and copy is not value and copy["a"] is not value["a"]
    assert admit_plain({"a": 1.0}) is None
    assert admit_plain(["é"]) is None
    assert admit_plain([MAX + 1]) is None
