"""Writing a loaded log gives the bytes of the exact writer (docs/format/persistence.md §2.4).

The writer reads a loaded chunk row's members off the row and spells records from
orjson's text when that text holds no shape orjson and `JSON.stringify` spell apart.
The reference here is the exact writer: every payload built, every record spelled
by the exact encoder `encode_json`. Lines respelled by another writer (spaces,
escapes, floats, reordered or duplicate keys) must come out as the exact writer
spells them, not as they were read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import msgspec
import pytest
import zstandard
from hypothesis import given, note
from hypothesis import strategies as st

from kernel import APPEND, Event, Replace, SessionLog, event_from_json, event_to_json
from kernel.errors import KernelError
from kernel.storage.jsonl import encode_records, header_line, load_jsonl, write_jsonl
from kernel.storage.zstd import write_jsonl_zstd
from kernel.values.events import SessionHeader
from kernel.values.json import FrozenObject
from kernel.wire.chunks import pack_chunk_rows
from kernel.wire.codec import event_to_wire, ranged_spelling
from kernel.wire.jsontext import _escape_lone_surrogates, encode_json, encode_record_bytes
from properties import strategies as gen
from properties.laws import as_events

HEADER = {"version": 0, "id": "sess-1", "createdAt": 1, "delegationDepth": 0}


def _exact_text(value: Any) -> bytes:
    text = encode_json(value)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _escape_lone_surrogates(text).encode("utf-8")


def _exact_writer(header: Any, events: Iterable[Event], *, pack_chunks: bool) -> bytes:
    """The bytes of the writer with every payload built and every record spelled exactly."""
    built = [event_from_json(event_to_json(e)) for e in events]
    records = pack_chunk_rows(built) if pack_chunks else built
    parts = [header_line(header)]
    for record in records:
        parts.append(_exact_text(event_to_wire(record) if type(record) is Event else record))
    return b"\n".join(parts) + b"\n"


def _same(header: Any, events: tuple[Event, ...], pack: bool) -> None:
    written = write_jsonl(header, events, pack_chunks=pack)
    expected = _exact_writer(header, events, pack_chunks=pack)
    if written != expected:
        note("\n".join(repr(e) for e in events))
    assert written == expected, "writing loaded events is not the exact writer's bytes"


def _zstd_text(data: bytes) -> bytes:
    with zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True) as reader:
        text: bytes = reader.read()
    return text


@given(gen.loop_logs(rich=True, max_actions=5, shape="any"), st.booleans())
def test_rewriting_a_loaded_log_is_the_exact_writers_bytes(log: Any, pack: bool) -> None:
    loaded = load_jsonl(write_jsonl(HEADER, as_events(log), pack_chunks=pack), now=0)
    _same(loaded.header, loaded.events, pack)
    _same(loaded.header, loaded.events, not pack)


@given(gen.loop_logs(rich=True, max_actions=4, shape="any"), st.booleans())
def test_zstd_rewrite_of_a_loaded_log_is_the_exact_writers_text(log: Any, pack: bool) -> None:
    stored = write_jsonl_zstd(HEADER, as_events(log), pack_chunks=pack)
    loaded = load_jsonl(write_jsonl(HEADER, as_events(log), pack_chunks=pack), now=0)
    assert _zstd_text(stored) == _exact_writer(HEADER, as_events(log), pack_chunks=pack)
    rewritten = write_jsonl_zstd(loaded.header, loaded.events, pack_chunks=pack)
    assert _zstd_text(rewritten) == _exact_writer(loaded.header, loaded.events, pack_chunks=pack)


@given(
    gen.loop_logs(rich=True, max_actions=5, shape="any"),
    st.booleans(),
    st.integers(0, 10**6),
    st.integers(-3, 3),
)
def test_loaded_events_mixed_with_built_and_changed_ones(
    log: Any, pack: bool, cut: int, shift: int
) -> None:
    loaded = load_jsonl(write_jsonl(HEADER, as_events(log), pack_chunks=True), now=0)
    events = loaded.events
    k = cut % (len(events) + 1)
    built = tuple(event_from_json(event_to_json(e)) for e in events[k:])
    _same(loaded.header, events[:k] + built, pack)
    # A loaded event changed by a copy keeps its stored source but not its fields.
    changed = tuple(
        msgspec.structs.replace(e, time=e.time + shift) if i % 3 == k % 3 else e
        for i, e in enumerate(events)
    )
    _same(loaded.header, changed, pack)
    renumbered = tuple(msgspec.structs.replace(e, seq=e.seq + 1) for e in events[k:])
    _same(loaded.header, events[:k] + renumbered, pack)


def _other_fields(event: Event, k: int) -> Event:
    """A copy of `event` with one envelope field changed."""
    choice = k % 7
    if choice == 5:
        return msgspec.structs.replace(event, time=event.time + 1)
    if choice == 6:
        return msgspec.structs.replace(event, seq=event.seq + 1)
    if choice == 0:
        return msgspec.structs.replace(event, ignorable=not event.ignorable)
    if choice == 1:
        return msgspec.structs.replace(event, surface_op=None if event.surface_op else APPEND)
    if choice == 2:
        sources = event.source_event_seqs
        return msgspec.structs.replace(event, source_event_seqs=(*(sources or ()), event.seq + 7))
    if choice == 3:
        op = event.surface_op
        if isinstance(op, Replace):
            return msgspec.structs.replace(event, surface_op=Replace(op.start, op.end + 1))
        return msgspec.structs.replace(event, source_event_seqs=None)
    return msgspec.structs.replace(event, type=event.type + "-x")


@pytest.mark.parametrize("field", range(7))
@given(gen.loop_logs(rich=True, max_actions=5, shape="any"), st.booleans(), st.booleans())
def test_loaded_events_copied_with_other_fields_are_written_from_their_fields(
    field: int, log: Any, stored_packed: bool, pack: bool
) -> None:
    """A copy keeps the loaded event's stored line (its lazy payload and member order);
    every field the line also spells must still be written from the copy."""
    loaded = load_jsonl(write_jsonl(HEADER, as_events(log), pack_chunks=stored_packed), now=0)
    events = loaded.events
    _same(loaded.header, tuple(_other_fields(e, field) for e in events), pack)
    _same(loaded.header, tuple(_other_fields(e, field) for e in events[::2]), pack)


@given(gen.loop_logs(rich=True, max_actions=4, shape="any"), st.booleans())
def test_seeded_and_appended_events_after_loaded_ones(log: Any, pack: bool) -> None:
    loaded = load_jsonl(write_jsonl(HEADER, as_events(log)), now=0)
    seeded = SessionLog.seed(loaded.events, now=10**12)
    appended = seeded.append(
        "user/message",
        {
            "id": "m-late",
            "role": "user",
            "content": [{"type": "text", "text": 'then 1.5 / 0.25, \\ "q"'}],
            "source": {"kind": "user"},
        },
        time=10**12 + 1,
        surface_op=APPEND,
    )
    _same(loaded.header, tuple(appended.events), pack)


def _envelope(line: bytes, change: Callable[[dict[str, Any]], dict[str, Any]]) -> bytes:
    """`line` with its envelope changed (a chunk row is left as it is)."""
    wire = json.loads(line)
    if "seq" not in wire:
        return line
    return json.dumps(change(wire), separators=(",", ":")).encode()  # ASCII: surrogates too


def _reorder_marker(wire: dict[str, Any]) -> dict[str, Any]:
    op = wire.get("surfaceOp")
    if isinstance(op, dict):
        wire["surfaceOp"] = dict(reversed(op.items()))
    return wire


def _ranged_citations(wire: dict[str, Any]) -> dict[str, Any]:
    if wire.get("sourceEventSeqs"):
        wire["sourceEventSeqs"] = ranged_spelling(wire["sourceEventSeqs"])
    return wire


def _in_payload(line: bytes, member: bytes) -> bytes:
    """`line` with one more payload member (a line whose payload is an object)."""
    return line.replace(b'"data":{', b'"data":{' + member + b",", 1)


_RESPELLINGS: dict[str, Callable[[bytes], bytes]] = {
    "spaces": lambda line: line.replace(b'":', b'": ').replace(b",", b", "),
    "escaped slash": lambda line: line.replace(b"/", b"\\/"),
    "unicode escape": lambda line: line.replace(b'"type":"', b'"type":"\\u0061', 1),
    "upper-case escape": lambda line: line.replace(b"\\n", b"\\u000A"),
    "keys reordered": lambda line: json.dumps(
        dict(reversed(json.loads(line).items())), separators=(",", ":")
    ).encode(),
    "float payload": lambda line: _in_payload(line, b'"zz":1.0'),
    "exponent payload": lambda line: _in_payload(line, b'"zz":1e2'),
    "negative zero": lambda line: _in_payload(line, b'"zz":-0'),
    "big integer": lambda line: _in_payload(line, b'"zz":12345678901234567890'),
    "index keys": lambda line: _in_payload(line, b'"zz":{"b":1,"7":2,"0":3}'),
    "duplicate payload key": lambda line: _in_payload(line, b'"zz":1,"zz":2'),
    "ascii escape": lambda line: line.replace(b"e", b"\\u0065"),
    "marker members reordered": lambda line: _envelope(line, _reorder_marker),
    "ranged citations": lambda line: _envelope(line, _ranged_citations),
    "nothing": lambda line: line,
}


@pytest.mark.parametrize("respelling", sorted(_RESPELLINGS))
@given(
    log=gen.loop_logs(rich=True, max_actions=3, shape="any"),
    pick=st.integers(0, 10**6),
    pack=st.booleans(),
)
def test_respelled_lines_are_written_as_the_exact_writer_spells_them(
    respelling: str, log: Any, pick: int, pack: bool
) -> None:
    lines = write_jsonl(HEADER, as_events(log), pack_chunks=pack).split(b"\n")
    if len(lines) < 3:
        return
    k = 1 + pick % (len(lines) - 2)
    lines[k] = _RESPELLINGS[respelling](lines[k])
    try:
        loaded = load_jsonl(b"\n".join(lines), now=0)
    except KernelError:
        return  # a respelling the rules refuse (a payload member no rule allows)
    _same(loaded.header, loaded.events, pack)


_ENVELOPE_RESPELLINGS = ("marker members reordered", "ranged citations", "keys reordered")


@pytest.mark.parametrize("respelling", _ENVELOPE_RESPELLINGS)
@given(log=gen.loop_logs(rich=True, max_actions=5, shape="any"), pack=st.booleans())
def test_every_line_respelled_in_its_envelope_is_written_as_the_exact_writer_spells_it(
    respelling: str, log: Any, pack: bool
) -> None:
    lines = write_jsonl(HEADER, as_events(log), pack_chunks=pack).split(b"\n")
    respell = _RESPELLINGS[respelling]
    loaded = load_jsonl(b"\n".join([lines[0], *map(respell, lines[1:-1]), b""]), now=0)
    _same(loaded.header, loaded.events, pack)


def test_index_keys_and_floats_are_spelled_as_json_stringify_does() -> None:
    value = {"b": 1, "10": [1.0, 1e21, 1e-7, 2**53, 0.5], "a": "1.5 and 0e0"}
    assert (
        encode_record_bytes(value)
        == b'{"10":[1,1e+21,1e-7,9007199254740992,0.5],"b":1,"a":"1.5 and 0e0"}'
    )


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"x": 1.0}, b'{"x":1}'),
        ({"x": 1e16}, b'{"x":10000000000000000}'),
        ({"x": 1.5e-7}, b'{"x":1.5e-7}'),
        ({"x": 2**53 + 1}, b'{"x":9007199254740992}'),
        ({"a": 2, "10": 1}, b'{"10":1,"a":2}'),
        ({"x": "1.5e3", "y": 7}, b'{"x":"1.5e3","y":7}'),
    ],
)
def test_each_shape_orjson_spells_otherwise_is_found_alone(value: Any, text: bytes) -> None:
    # One shape a value: a float (with `.` or `e`), an unsafe integer, an index key; the
    # same letters inside a string only send the value the long way, to the same text.
    assert encode_record_bytes(value) == text


def test_a_header_object_and_a_session_header_write_alike() -> None:
    header = SessionHeader(id="sess-1", created_at=1)
    assert write_jsonl(header, ()) == write_jsonl(HEADER, ())


def _chunky_log() -> tuple[Event, ...]:
    """A turn whose step streams two text runs and a tool call's arguments, every
    delta distinct, so a member written in the wrong place shows."""
    wire: list[dict[str, Any]] = [
        {"type": "turn/start", "data": {"turn": 1}},
        {"type": "step/start", "data": {"turn": 1, "step": 1}},
    ]
    for index, texts in ((0, "abcde"), (1, "fghi")):
        for text in texts:
            chunk = {"type": "text-delta", "index": index, "text": text}
            wire.append({"type": "assistant/chunk", "data": {"turn": 1, "step": 1, "chunk": chunk}})
    for text in ('{"p', 'ath"', ':"x', '"}'):
        chunk = {"type": "tool-call-delta", "index": 2, "id": "c1", "argumentsDelta": text}
        wire.append({"type": "assistant/chunk", "data": {"turn": 1, "step": 1, "chunk": chunk}})
    wire += [
        {"type": "step/end", "data": {"turn": 1, "step": 1}},
        {"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}},
    ]
    return tuple(
        event_from_json({"type": w["type"], "seq": seq, "time": 100 + 7 * seq, "data": w["data"]})
        for seq, w in enumerate(wire)
    )


def _row_members(events: tuple[Event, ...]) -> list[int]:
    """The indices of the second member of every loaded chunk row in `events`."""
    return [
        i
        for i, e in enumerate(events)
        if type(e.data) is FrozenObject
        and e.data._member == 1
        and hasattr(e.data._value, "chunk_run")
    ]


@pytest.mark.parametrize(
    "change",
    [
        "seq",
        "payloads swapped",
        "type",
        "surface_op",
        "source_event_seqs",
        "ignorable",
        "wire order",
        "data rebuilt",
        "another row's member",
        "equal row",
    ],
)
@pytest.mark.parametrize("pack", [True, False])
def test_a_loaded_row_with_a_member_changed_is_packed_from_its_members(
    change: str, pack: bool
) -> None:
    """A stored row is written as read only while its members are all there, unchanged
    and in order; any change to one member is packed from the members' fields."""
    loaded = load_jsonl(write_jsonl(HEADER, _chunky_log()), now=0)
    other = load_jsonl(write_jsonl(HEADER, _chunky_log()), now=0).events
    rows = _row_members(loaded.events)
    assert len(rows) == 3
    events = list(loaded.events)
    for n, i in enumerate(rows):
        second, third = events[i], events[i + 1]
        if change == "seq":
            events[i] = msgspec.structs.replace(second, seq=second.seq + 10**6)
        elif change == "payloads swapped":
            events[i] = msgspec.structs.replace(second, data=third.data)
            events[i + 1] = msgspec.structs.replace(third, data=second.data)
        elif change == "type":
            events[i] = msgspec.structs.replace(second, type="assistant/chunk-x")
        elif change == "data rebuilt":
            events[i] = event_from_json(event_to_json(second))
        elif change in ("surface_op", "source_event_seqs", "ignorable"):
            value = {"surface_op": APPEND, "source_event_seqs": (0,), "ignorable": True}[change]
            events[i] = msgspec.structs.replace(second, **{change: value})
        elif change == "wire order":
            events[i] = msgspec.structs.replace(second, wire_order=("seq", "type", "data", "time"))
        elif change == "another row's member":
            events[i] = msgspec.structs.replace(second, data=loaded.events[rows[n - 1]].data)
        else:  # the same member of an equal row another load read: packs alike
            events[i] = other[i]
    _same(loaded.header, tuple(events), pack)
    assert write_jsonl(loaded.header, loaded.events) == write_jsonl(HEADER, _chunky_log())


@pytest.mark.parametrize("cut", range(17))
def test_a_run_stored_across_two_batches_is_written_as_one_row(cut: int) -> None:
    """Packing is per batch (a run split by a batch boundary is stored as two rows or
    as a row and single chunks); writing the loaded log packs the whole run again."""
    events = _chunky_log()
    stored = write_jsonl(HEADER, events[:cut]) + encode_records(events[cut:])
    loaded = load_jsonl(stored, now=0)
    _same(loaded.header, loaded.events, True)
    assert write_jsonl(loaded.header, loaded.events) == write_jsonl(HEADER, events)


def test_a_row_member_orjson_refuses_is_spelled_by_the_exact_writer() -> None:
    """A text orjson cannot write (a lone surrogate; a load never makes one, msgspec
    refuses it) falls to the exact encoder, which escapes it."""
    from kernel.storage.typed.schema import _TextRow, _TextRowData
    from kernel.values.events import ASSISTANT_CHUNK

    row = _TextRow(
        seq0=0,
        time0=5,
        data=_TextRowData(turn=1, step=1, index=0, dt=[1, 1], texts=["a", "\ud800", "b"]),
    )
    events = tuple(
        Event(
            ASSISTANT_CHUNK,
            k,
            5 + k,
            FrozenObject(row, True, None, None, ASSISTANT_CHUNK, k),
            wire_order=("type", "seq", "time", "data"),
        )
        for k in range(3)
    )
    written = write_jsonl(HEADER, events, pack_chunks=False)
    assert b'"text":"\\ud800"' in written
    assert written == _exact_writer(HEADER, events, pack_chunks=False)
