"""Packed chunk rows (docs/format/events.md §7): the examples of §7.7, the whitelist and run rules,
every malformed case of §7.6, the SQLite bounds of docs/format/persistence.md §7.4, and the round
trip."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.errors import InvalidEnvelope, KernelError, MalformedChunkRow, NotLosslessJson
from kernel.values.events import APPEND, Event
from kernel.values.json import MAX_SAFE_INTEGER, FrozenObject, thaw
from kernel.wire.chunks import (
    ROW_TAGS,
    expand_chunk_row,
    expand_storage_records,
    is_chunk_row,
    pack_chunk_rows,
)
from kernel.wire.codec import event_from_json, event_to_wire
from kernel.wire.jsontext import encode_json_bytes, parse_json

NAN = float("nan")

MAX = MAX_SAFE_INTEGER


def line(record: Any) -> bytes:
    """The exact JSONL text of one storage record."""
    return encode_json_bytes(event_to_wire(record) if isinstance(record, Event) else record)


def events_of(lines: str) -> list[Event]:
    return [event_from_json(parse_json(text)) for text in lines.strip().splitlines()]


def decoded_events(records: list[Any]) -> tuple[Event, ...]:
    """§7.5 decoding, then the loader's later check: a passed-through value decoded as an event."""
    return tuple(
        r if isinstance(r, Event) else event_from_json(r) for r in expand_storage_records(records)
    )


def text_chunk(seq: int, time: int, text: str, **overrides: Any) -> Event:
    data = {"turn": 2, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": text}}
    data.update(overrides)
    return Event("assistant/chunk", seq, time, data)


def tool_chunk(seq: int, time: int, args: str, name: str | None = None, **chunk: Any) -> Event:
    body: dict[str, Any] = {"type": "tool-call-delta", "index": 1, "id": "c7"}
    if name is not None:
        body["name"] = name
    body["argumentsDelta"] = args
    body.update(chunk)
    return Event("assistant/chunk", seq, time, {"turn": 2, "step": 1, "chunk": body})


# -- docs/format/events.md §7.7 --------------------------------------------------------------------

TEXT_EVENTS = """
{"type":"assistant/chunk","seq":12,"time":5000,"data":{"turn":2,"step":1,"chunk":{"type":"text-delta","index":0,"text":"He"}}}
{"type":"assistant/chunk","seq":13,"time":5004,"data":{"turn":2,"step":1,"chunk":{"type":"text-delta","index":0,"text":"llo"}}}
{"type":"assistant/chunk","seq":14,"time":5003,"data":{"turn":2,"step":1,"chunk":{"type":"text-delta","index":0,"text":"!"}}}
"""
TEXT_ROW = (
    b'{"type":"text-chunks","seq0":12,"time0":5000,"data":{"turn":2,"step":1,"index":0,'
    b'"dt":[4,-1],"texts":["He","llo","!"]}}'
)

TOOL_EVENTS = r"""
{"type":"assistant/chunk","seq":20,"time":7000,"data":{"turn":2,"step":1,"chunk":{"type":"tool-call-delta","index":1,"id":"c7","name":"read","argumentsDelta":"{\"pa"}}}
{"type":"assistant/chunk","seq":21,"time":7002,"data":{"turn":2,"step":1,"chunk":{"type":"tool-call-delta","index":1,"id":"c7","argumentsDelta":"th\":"}}}
{"type":"assistant/chunk","seq":22,"time":7003,"data":{"turn":2,"step":1,"chunk":{"type":"tool-call-delta","index":1,"id":"c7","argumentsDelta":"\"a.md"}}}
{"type":"assistant/chunk","seq":23,"time":7009,"data":{"turn":2,"step":1,"chunk":{"type":"tool-call-delta","index":1,"id":"c7","argumentsDelta":"\"}"}}}
"""
TOOL_PACKED = [
    TOOL_EVENTS.strip().splitlines()[0].encode(),
    rb'{"type":"tool-call-chunks","seq0":21,"time0":7002,"data":{"turn":2,"step":1,"index":1,'
    rb'"dt":[1,6],"id":"c7","args":["th\":","\"a.md","\"}"]}}',
]


def test_s7_7_text_run_packs_into_one_row() -> None:
    records = pack_chunk_rows(events_of(TEXT_EVENTS))
    assert len(records) == 1
    assert isinstance(records[0], FrozenObject)
    assert line(records[0]) == TEXT_ROW
    assert list(records[0]) == ["type", "seq0", "time0", "data"]


def test_s7_7_text_row_expands_to_the_original_events() -> None:
    original = events_of(TEXT_EVENTS)
    expanded = expand_storage_records([parse_json(TEXT_ROW)])
    assert list(expanded) == original
    assert [line(e) for e in expanded] == [t.encode() for t in TEXT_EVENTS.split()]


def test_s7_7_tool_call_first_named_member_stays_scalar_and_dt_precedes_id() -> None:
    original = events_of(TOOL_EVENTS)
    records = pack_chunk_rows(original)
    assert records[0] is original[0]
    assert [line(r) for r in records] == TOOL_PACKED
    assert list(decoded_events([parse_json(b) for b in TOOL_PACKED])) == original


def test_s7_7_all_named_tool_call_members_pack_with_name() -> None:
    events = [
        tool_chunk(20 + k, t, a, name="read")
        for k, (t, a) in enumerate([(7000, '{"pa'), (7002, 'th":'), (7003, '"a.md'), (7009, '"}')])
    ]
    (row,) = pack_chunk_rows(events)
    assert line(row) == (
        b'{"type":"tool-call-chunks","seq0":20,"time0":7000,"data":{"turn":2,"step":1,'
        b'"index":1,"dt":[2,1,6],"id":"c7","name":"read","args":["{\\"pa","th\\":",'
        b'"\\"a.md","\\"}"]}}'
    )
    assert expand_chunk_row(row) == tuple(events)


def test_s7_4_expanded_member_keys_are_in_writer_order() -> None:
    events = [tool_chunk(k, k, "x", name="n") for k in range(3)]
    (row,) = pack_chunk_rows(events)
    member = expand_chunk_row(row)[1]
    assert list(member.data) == ["turn", "step", "chunk"]
    assert list(member.data["chunk"]) == ["type", "index", "id", "name", "argumentsDelta"]


def test_reasoning_deltas_pack_into_reasoning_rows() -> None:
    events = [
        Event(
            "assistant/chunk",
            k,
            10,
            {"turn": 1, "step": 1, "chunk": {"type": "reasoning-delta", "index": 3, "text": "r"}},
        )
        for k in range(3)
    ]
    (row,) = pack_chunk_rows(events)
    assert row["type"] == "reasoning-chunks"
    assert thaw(row["data"]) == {"turn": 1, "step": 1, "index": 3, "dt": [0, 0], "texts": ["r"] * 3}


# -- §7.2 whitelist and §7.3 runs ---------------------------------------------------------------


def run_with(middle: Event) -> list[Event]:
    return [text_chunk(0, 0, "a"), middle, text_chunk(2, 2, "c")]


INELIGIBLE = {
    "surface metadata": Event(
        "assistant/chunk",
        1,
        1,
        {"turn": 2, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "b"}},
        surface_op=APPEND,
    ),
    "citations": Event(
        "assistant/chunk",
        1,
        1,
        {"turn": 2, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "b"}},
        source_event_seqs=(0,),
    ),
    "ignorable": Event(
        "assistant/chunk",
        1,
        1,
        {"turn": 2, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "b"}},
        ignorable=True,
    ),
    "fractional time": Event(
        "assistant/chunk",
        1,
        1.5,  # type: ignore[arg-type]
        {"turn": 2, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "b"}},
    ),
    "extra data key": text_chunk(1, 1, "b", extra=True),
    "string turn": text_chunk(1, 1, "b", turn="2"),
    "boolean step": text_chunk(1, 1, "b", step=True),
    "extra chunk key": Event(
        "assistant/chunk",
        1,
        1,
        {"turn": 2, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "b", "x": 1}},
    ),
    "non-string text": Event(
        "assistant/chunk",
        1,
        1,
        {"turn": 2, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": 5}},
    ),
    "string index": Event(
        "assistant/chunk",
        1,
        1,
        {"turn": 2, "step": 1, "chunk": {"type": "text-delta", "index": "0", "text": "b"}},
    ),
    "block-start": Event(
        "assistant/chunk",
        1,
        1,
        {"turn": 2, "step": 1, "chunk": {"type": "block-start", "index": 0, "blockType": "text"}},
    ),
    "other type": Event("user/chunk", 1, 1, {"turn": 2, "step": 1, "chunk": {}}),
    "null data": Event("assistant/chunk", 1, 1, None),
}


@pytest.mark.parametrize("name", sorted(INELIGIBLE))
def test_s7_2_ineligible_events_are_stored_verbatim(name: str) -> None:
    events = run_with(INELIGIBLE[name])
    assert pack_chunk_rows(events) == tuple(events)


def test_s7_2_tool_call_delta_with_non_string_name_is_ineligible() -> None:
    events = [tool_chunk(k, k, "x", name=5) for k in range(3)]  # type: ignore[arg-type]
    assert pack_chunk_rows(events) == tuple(events)


RUN_BREAKERS = {
    "seq gap": text_chunk(2, 1, "b"),
    "other turn": text_chunk(1, 1, "b", turn=3),
    "other step": text_chunk(1, 1, "b", step=2),
    "other index": Event(
        "assistant/chunk",
        1,
        1,
        {"turn": 2, "step": 1, "chunk": {"type": "text-delta", "index": 1, "text": "b"}},
    ),
    "other kind": Event(
        "assistant/chunk",
        1,
        1,
        {"turn": 2, "step": 1, "chunk": {"type": "reasoning-delta", "index": 0, "text": "b"}},
    ),
}


@pytest.mark.parametrize("name", sorted(RUN_BREAKERS))
def test_s7_3_a_member_that_does_not_continue_closes_the_run(name: str) -> None:
    events = [text_chunk(0, 0, "a"), RUN_BREAKERS[name], text_chunk(2, 2, "c")]
    assert pack_chunk_rows(events) == tuple(events)


def test_s7_3_tool_call_runs_need_the_same_id_and_name() -> None:
    other_id = [tool_chunk(0, 0, "a"), tool_chunk(1, 1, "b", id="c8"), tool_chunk(2, 2, "c")]
    assert pack_chunk_rows(other_id) == tuple(other_id)
    names = [
        tool_chunk(0, 0, "a", name="x"),
        tool_chunk(1, 1, "b", name="y"),
        tool_chunk(2, 2, "c", name="x"),
    ]
    assert pack_chunk_rows(names) == tuple(names)


def test_s7_3_time_gap_beyond_the_safe_range_breaks_the_run() -> None:
    events = [
        text_chunk(0, -MAX, "a"),
        text_chunk(1, MAX, "b"),
        text_chunk(2, MAX, "c"),
        text_chunk(3, MAX - 5, "d"),
    ]
    records = pack_chunk_rows(events)
    assert records[0] is events[0]
    assert thaw(records[1]["data"])["dt"] == [0, -5]
    assert len(records) == 2


def test_s7_3_runs_of_two_stay_scalar_and_numbers_are_copied_as_they_are() -> None:
    two = [text_chunk(0, 0, "a"), text_chunk(1, 1, "b")]
    assert pack_chunk_rows(two) == tuple(two)
    floats = [text_chunk(k, k, "x", turn=2.0) for k in range(3)]
    (row,) = pack_chunk_rows(floats)
    assert type(row["data"]["turn"]) is float


def test_s7_3_packing_is_per_batch_and_mixes_with_scalars() -> None:
    events = (
        [Event("turn/start", 0, 0, {"turn": 2})]
        + [text_chunk(k, k, str(k)) for k in range(1, 6)]
        + [Event("turn/end", 6, 6, {"turn": 2, "reason": {"kind": "completed"}})]
    )
    records = pack_chunk_rows(events)
    assert records[0] is events[0] and records[2] is events[6]
    assert records[1]["seq0"] == 1 and len(records) == 3
    assert pack_chunk_rows(events[:3]) == tuple(events[:3])


def test_pack_refuses_what_is_neither_an_event_nor_a_wire_object() -> None:
    for item in ("turn/start", None, 42, [1]):
        with pytest.raises(KernelError):
            pack_chunk_rows([item])  # type: ignore[list-item]
    wire = {"type": "turn/start"}
    assert pack_chunk_rows([wire])[0] is wire, "an ineligible wire object is stored verbatim"


# -- docs/format/persistence.md §7.4: SQLite bounds ------------------------------------------------


def test_p7_4_member_cap_splits_runs() -> None:
    events = [text_chunk(k, k, "t") for k in range(2050)]
    records = pack_chunk_rows(events, max_members=1024, max_data_bytes=1 << 20)
    rows = [r for r in records if not isinstance(r, Event)]
    assert [len(r["data"]["texts"]) for r in rows] == [1024, 1024]
    assert records[2:] == tuple(events[2048:])
    assert expand_storage_records(records) == tuple(events)


def test_p7_4_data_cap_binary_searches_the_largest_fitting_row() -> None:
    events = [text_chunk(k, k, "x" * 40) for k in range(10)]
    one = len(encode_json_bytes(pack_chunk_rows(events[:5])[0]["data"]))
    records = pack_chunk_rows(events, max_members=1024, max_data_bytes=one)
    sizes = [len(r["data"]["texts"]) if not isinstance(r, Event) else 1 for r in records]
    assert sizes == [5, 5]
    for r in records:
        assert len(encode_json_bytes(r["data"])) <= one
    assert expand_storage_records(records) == tuple(events)


def test_p7_4_a_member_too_big_for_any_row_is_emitted_scalar() -> None:
    events = [text_chunk(0, 0, "y" * 500)] + [text_chunk(k, k, "x") for k in range(1, 5)]
    records = pack_chunk_rows(events, max_data_bytes=200)
    assert records[0] is events[0]
    assert records[1]["seq0"] == 1 and len(records) == 2


def test_p7_4_bad_bounds_are_refused() -> None:
    with pytest.raises(KernelError):
        pack_chunk_rows([], max_members=2)
    with pytest.raises(KernelError):
        pack_chunk_rows([], max_data_bytes=-1)


# -- §7.6 malformed rows ------------------------------------------------------------------------


def good_text_row() -> dict[str, Any]:
    return {
        "type": "text-chunks",
        "seq0": 12,
        "time0": 5000,
        "data": {"turn": 2, "step": 1, "index": 0, "dt": [4, -1], "texts": ["He", "llo", "!"]},
    }


def good_tool_row() -> dict[str, Any]:
    return {
        "type": "tool-call-chunks",
        "seq0": 21,
        "time0": 7002,
        "data": {
            "turn": 2,
            "step": 1,
            "index": 1,
            "dt": [1, 6],
            "id": "c7",
            "name": "read",
            "args": ["a", "b", "c"],
        },
    }


def _set(path: str, value: Any, base: Any = None) -> dict[str, Any]:
    row = good_text_row() if base is None else base
    target = row
    keys = path.split(".")
    for key in keys[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[keys[-1]]
    else:
        target[keys[-1]] = value
    return row


_DELETE = object()

MALFORMED: dict[str, dict[str, Any]] = {
    "envelope extra key": _set("seq", 12),
    "envelope missing time0": _set("time0", _DELETE),
    "envelope missing data": _set("data", _DELETE),
    "seq0 negative": _set("seq0", -1),
    "seq0 fractional": _set("seq0", 1.5),
    "seq0 string": _set("seq0", "12"),
    "seq0 boolean": _set("seq0", True),
    "seq0 beyond safe": _set("seq0", 2**53),
    "time0 fractional": _set("time0", 0.5),
    "time0 infinite": _set("time0", float("inf")),
    "time0 null": _set("time0", None),
    "time0 beyond safe": _set("time0", -(2**53)),
    "data array": _set("data", []),
    "data null": _set("data", None),
    "text data extra key": _set("data.id", "c1"),
    "text data missing dt": _set("data.dt", _DELETE),
    "tool data missing id": _set("data.id", _DELETE, good_tool_row()),
    "tool data with texts": _set("data.texts", ["a"], good_tool_row()),
    "id not a string": _set("data.id", 7, good_tool_row()),
    "name not a string": _set("data.name", None, good_tool_row()),
    "turn not a number": _set("data.turn", "2"),
    "step boolean": _set("data.step", False),
    "index null": _set("data.index", None),
    "members not an array": _set("data.texts", "He"),
    "members empty": _set("data.texts", []),
    "member not a string": _set("data.texts", ["He", 1, "!"]),
    "tool member not a string": _set("data.args", ["a", None, "c"], good_tool_row()),
    "dt not an array": _set("data.dt", 4),
    "dt fractional element": _set("data.dt", [4, 0.5]),
    "dt boolean element": _set("data.dt", [4, True]),
    "dt element beyond safe": _set("data.dt", [4, 2**53]),
    "arity short": _set("data.dt", [4]),
    "arity long": _set("data.dt", [4, 1, 1]),
    "seq range 2**53-2 with three members": _set("seq0", 2**53 - 2),
    "time range overflow": _set("data.dt", [MAX, 1], _set("time0", 0)),
    "time range underflow": _set("data.dt", [-MAX, -1], _set("time0", -5)),
    "time range first sum": _set("data.dt", [1, -2], _set("time0", MAX)),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_s7_6_malformed_rows_raise_and_are_never_read_as_events(name: str) -> None:
    row = MALFORMED[name]
    with pytest.raises(MalformedChunkRow):
        expand_chunk_row(row)
    with pytest.raises(MalformedChunkRow):
        expand_storage_records(
            [{"type": "turn/start", "seq": 0, "time": 0, "data": {"turn": 1}}, row]
        )


def test_s7_6_seq0_two_pow_53_minus_2_row_is_malformed() -> None:
    row = good_text_row()
    row["seq0"] = 2**53 - 2
    with pytest.raises(MalformedChunkRow, match="2\\*\\*53"):
        expand_chunk_row(row)
    row["data"]["texts"], row["data"]["dt"] = ["a", "b"], [1]
    assert [e.seq for e in expand_chunk_row(row)] == [2**53 - 2, 2**53 - 1]


def test_s7_6_single_member_row_at_the_last_safe_seq_is_valid() -> None:
    row = {
        "type": "text-chunks",
        "seq0": 2**53 - 1,
        "time0": 0,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [], "texts": ["z"]},
    }
    (event,) = expand_chunk_row(row)
    assert event.seq == 2**53 - 1 and event.data["chunk"]["text"] == "z"


def test_s7_6_readers_accept_row_keys_in_any_order_and_integral_floats() -> None:
    row = {
        "data": {"texts": ["a", "b"], "dt": [1.0], "index": 0, "step": 1, "turn": 1},
        "time0": 10.0,
        "seq0": 3.0,
        "type": "text-chunks",
    }
    events = expand_chunk_row(row)
    assert [(e.seq, e.time) for e in events] == [(3, 10), (4, 11)]
    assert type(events[0].seq) is int and type(events[1].time) is int


def test_s7_5_decoding_any_stored_record() -> None:
    scalar = Event("turn/start", 0, 0, {"turn": 1})
    row = FrozenObject(good_text_row())
    plain = {"type": "turn/end", "seq": 15, "time": 1, "data": {"turn": 1, "reason": {"kind": "x"}}}
    out = expand_storage_records([scalar, row, plain])
    assert out[0] is scalar and out[-1] is plain
    assert [e.seq for e in out[:-1]] == [0, 12, 13, 14]
    assert is_chunk_row(row) and not is_chunk_row(plain) and not is_chunk_row([1])
    assert {"text-chunks", "reasoning-chunks", "tool-call-chunks"} == ROW_TAGS


def test_s7_5_non_row_records_pass_through_for_the_loader_to_check() -> None:
    # Decoding validates nothing but rows: a record that is not a valid event
    # passes through, and the loader's own check (here event_from_json) refuses it.
    bad = [{"type": "turn/start", "seq": 0}, 42, {"type": "x", "seq": 0, "time": 0, "data": NAN}]
    assert all(a is b for a, b in zip(expand_storage_records(bad), bad, strict=True))
    with pytest.raises(InvalidEnvelope):
        decoded_events(bad[:1])
    with pytest.raises(InvalidEnvelope):
        decoded_events(bad[1:2])
    with pytest.raises(NotLosslessJson):
        decoded_events(bad[2:])


# -- P7: chunk-row round trip -------------------------------------------------------------------

_SMALL = st.integers(0, 1)
_TIMES = st.one_of(
    st.integers(1_760_000_000_000, 1_760_000_000_050),
    st.integers(-MAX, MAX),
)


@st.composite
def chunk_batches(draw: st.DrawFn) -> list[Event]:
    """G-batch: contiguous chunk events of every variant, with occasional off-whitelist ones."""
    events: list[Event] = []
    for seq in range(draw(st.integers(0, 14))):
        kind = draw(
            st.sampled_from(
                [
                    "text-delta",
                    "reasoning-delta",
                    "tool-call-delta",
                    "block-start",
                    "usage",
                    "other",
                    "extra-key",
                ]
            )
        )
        time = draw(_TIMES)
        chunk: dict[str, Any] = {"type": kind, "index": draw(st.integers(0, 2))}
        if kind in ("text-delta", "reasoning-delta"):
            chunk["text"] = draw(st.text(max_size=3))
        elif kind == "tool-call-delta":
            chunk["id"] = draw(st.sampled_from(["c1", "c2"]))
            if draw(st.booleans()):
                chunk["name"] = draw(st.sampled_from(["ls", "cat"]))
            chunk["argumentsDelta"] = draw(st.text(max_size=3))
        elif kind == "extra-key":
            chunk = {"type": "text-delta", "index": 0, "text": "x", "extra": 1}
        elif kind == "usage":
            chunk = {"type": "usage", "usage": {"inputTokens": 1, "outputTokens": 2}}
        data = {"turn": draw(_SMALL), "step": draw(_SMALL), "chunk": chunk}
        if draw(st.integers(0, 20)) == 0:
            events.append(Event("todo/write", seq, time, {"todos": []}))
        else:
            events.append(Event("assistant/chunk", seq, time, data))
    return events


@pytest.mark.slow
@settings(max_examples=300)
@given(chunk_batches())
def test_p7_chunk_row_round_trip_is_exact(batch: list[Event]) -> None:
    records = pack_chunk_rows(batch)
    stored = [parse_json(line(r)) for r in records]
    decoded = decoded_events(stored)
    assert [line(e) for e in decoded] == [line(e) for e in batch], "\n".join(map(repr, batch))
    assert decoded == tuple(batch)
    for record in records:
        if not isinstance(record, Event):
            assert len(record["data"]["dt"]) >= 2


@pytest.mark.slow
@settings(max_examples=200)
@given(chunk_batches(), st.integers(3, 5), st.integers(0, 400))
def test_p7_4_bounded_packing_round_trips_within_bounds(
    batch: list[Event], members: int, data_bytes: int
) -> None:
    records = pack_chunk_rows(batch, max_members=members, max_data_bytes=data_bytes)
    for record in records:
        if not isinstance(record, Event):
            assert 3 <= len(record["data"]["dt"]) + 1 <= members
            assert len(encode_json_bytes(record["data"])) <= data_bytes
    assert decoded_events([parse_json(line(r)) for r in records]) == tuple(batch)
