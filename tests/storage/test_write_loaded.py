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

from kernel import APPEND, Event, SessionLog, event_from_json, event_to_json
from kernel.errors import KernelError
from kernel.storage.jsonl import header_line, load_jsonl, write_jsonl
from kernel.storage.zstd import write_jsonl_zstd
from kernel.values.events import SessionHeader
from kernel.wire.chunks import pack_chunk_rows
from kernel.wire.codec import event_to_wire
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


def test_index_keys_and_floats_are_spelled_as_json_stringify_does() -> None:
    value = {"b": 1, "10": [1.0, 1e21, 1e-7, 2**53, 0.5], "a": "1.5 and 0e0"}
    assert (
        encode_record_bytes(value)
        == b'{"10":[1,1e+21,1e-7,9007199254740992,0.5],"b":1,"a":"1.5 and 0e0"}'
    )


def test_a_header_object_and_a_session_header_write_alike() -> None:
    header = SessionHeader(id="sess-1", created_at=1)
    assert write_jsonl(header, ()) == write_jsonl(HEADER, ())
