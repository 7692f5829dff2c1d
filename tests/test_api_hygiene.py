"""Only `KernelError` comes out of the public API.

A rejection describes the untrusted value with `summary`, never `repr`, so a value
nested thousands deep or one whose `repr` raises cannot turn it into a crash. Then
integers past Python's 4,300-digit limit on int-to-text conversion, and wrong types
at the API, including `Event`s whose fields were set to anything (msgspec checks no
field types) and arguments whose `__class__` claims a class they are not. Then the
fuzz: every public entry point (the pure functions, the stores and a live session,
the payload builders, the projections), fed junk; nothing but a `KernelError` may
come out.

The decisions are in docs/rfc/implemented/bug-fix/2026-12-01-only-kernel-errors-escape.md
and docs/rfc/implemented/bug-fix/2026-12-06-an-argument-is-what-its-type-says.md.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import pickle
import re
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import kernel
from kernel import (
    APPEND,
    CorruptLog,
    Event,
    ForkError,
    HeaderWriterState,
    InvalidEnvelope,
    KernelError,
    MalformedChunkRow,
    NotLosslessJson,
    ProvenanceError,
    Replace,
    RequestHeaderShapeError,
    SessionHeader,
    SessionHeaderError,
    SessionLog,
    SurfaceMarkerError,
    UnsupportedFormat,
    projections,
)
from kernel.folds.pairing import is_safe_compaction_range
from kernel.store.batch import check_batch
from kernel.store.jsonl import JsonlStore
from kernel.store.live import open_session
from kernel.store.sqlite import SqliteStore
from kernel.values import builders
from kernel.values.json import json_equal
from kernel.wire.codec import check_event

HEADER = {"version": 0, "id": "s", "createdAt": 1}
HEADER_LINE = b'{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}\n'
HUGE = 10**5_000
"""An int whose decimal text is past Python's 4,300-digit conversion limit."""


def deep(depth: int = 3_000) -> Any:
    """A list nested `depth` levels: `repr` of it raises RecursionError."""
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


DEEP = deep()
DEEP_TEXT = b"[" * 3_000 + b"]" * 3_000


class Unprintable:
    """An object whose `repr`, `str` and `format` all raise."""

    def __repr__(self) -> str:
        raise RuntimeError("repr of an Unprintable")

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        raise RuntimeError("format of an Unprintable")


class ClaimsInt:
    """A value whose `__class__` says `int` (only `type()` tells the truth), and which
    refuses to be compared."""

    __class__ = property(lambda self: int)

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("compared a ClaimsInt")

    __lt__ = __le__ = __gt__ = __ge__ = __eq__
    __hash__ = object.__hash__


class ClaimsBool(ClaimsInt):
    """A value whose `__class__` says `bool`."""

    __class__ = property(lambda self: bool)


class ClaimsStr(ClaimsInt):
    """A value whose `__class__` says `str`."""

    __class__ = property(lambda self: str)


def claiming(cls: type, items: tuple[Any, ...] | None = None) -> Any:
    """An object whose `__class__` says `cls` and that has none of its behaviour; iterable
    over `items` when they are given. Passed as a whole argument, it must be taken for
    what `type()` says it is (Hypothesis shows how it was built, not its repr)."""
    namespace: dict[str, Any] = {"__class__": property(lambda self: cls)}
    if items is not None:
        namespace["__iter__"] = lambda self: iter(items)
    return type(f"Claims{cls.__name__}", (), namespace)()


CLAIMED = (tuple, list, dict, str, bytes, int, SessionLog, Event, SessionHeader, Replace)
"""The classes a whole argument may claim in the fuzz below: each is one the kernel asks of
some argument."""


def tampered(event: Event, **fields: Any) -> Event:
    """A copy of `event` with fields set to anything, past every check (the member-descriptor
    trick: msgspec structs are frozen only against `setattr`)."""
    copy = msgspec.structs.replace(event)
    for name, value in fields.items():
        Event.__dict__[name].__set__(copy, value)
    return copy


USER = {"id": "u", "role": "user", "content": [], "source": {"kind": "user"}}


def call_message(call_id: Any) -> dict[str, Any]:
    block = {"type": "tool-call", "id": call_id, "name": "ls", "arguments": "{}"}
    source = {"kind": "model", "provider": "p", "model": "m"}
    message = {"id": "a", "role": "assistant", "content": [block], "source": source}
    return {"turn": 1, "step": 1, "message": message}


def line(**fields: Any) -> bytes:
    """One stored event line from fields given as JSON text."""
    parts = [f'"{key}":{value.decode()}' for key, value in fields.items()]
    return ("{" + ",".join(parts) + "}\n").encode()


TURN_START = b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}\n'
STEP_START = b'{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}\n'
TURN_END = b'{"type":"turn/end","seq":3,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}\n'


# -- messages describe untrusted values without repr --------------------------------------------


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"seq": DEEP}, InvalidEnvelope),
        ({"time": DEEP}, InvalidEnvelope),
        ({"type": "user/message", "data": USER, "surfaceOp": DEEP}, SurfaceMarkerError),
        (
            {"type": "user/message", "data": USER, "surfaceOp": {"op": "replace", "start": DEEP}},
            SurfaceMarkerError,
        ),
        (
            {
                "type": "user/message",
                "data": USER,
                "surfaceOp": "append",
                "sourceEventSeqs": [DEEP],
            },
            ProvenanceError,
        ),
        ({DEEP_TEXT.decode(): 1}, InvalidEnvelope),
    ],
)
def test_event_from_json_describes_deep_values(fields: dict[str, Any], error: type) -> None:
    wire = {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}, **fields}
    with pytest.raises(error) as info:
        kernel.event_from_json(wire)
    assert len(str(info.value)) < 600


@pytest.mark.parametrize("key", ["version", "id", "createdAt", "cwd"])
def test_header_from_json_describes_deep_values(key: str) -> None:
    with pytest.raises(SessionHeaderError):
        kernel.header_from_json({**HEADER, key: DEEP})


def test_header_from_json_describes_a_deep_session_id() -> None:
    with pytest.raises(SessionHeaderError, match="H4"):
        kernel.header_from_json(HEADER, session_id=DEEP)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [DEEP, Unprintable()], ids=["deep", "unprintable"])
@pytest.mark.parametrize("key", ["seq", "time"])
def test_seed_and_restore_describe_the_bad_value(key: str, value: Any) -> None:
    wire = {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}, key: value}
    with pytest.raises(InvalidEnvelope) as info:
        SessionLog.restore([wire])
    assert info.value.index == 0
    if value is DEEP:  # seed runs R1 first: an Unprintable is not JSON
        with pytest.raises(InvalidEnvelope):
            SessionLog.seed([wire], now=0)


def test_restore_describes_a_deep_request_header_reason() -> None:
    header = {"config": {"provider": "p", "model": "m"}}
    data = {"header": header, "reason": DEEP}
    with pytest.raises(RequestHeaderShapeError, match="R11e"):
        SessionLog.restore([{"type": "request/header", "seq": 0, "time": 0, "data": data}])


@pytest.mark.parametrize("time", [DEEP, Unprintable()], ids=["deep", "unprintable"])
def test_append_describes_a_bad_time(time: Any) -> None:
    with pytest.raises(InvalidEnvelope, match="time must be a safe integer"):
        SessionLog.empty().append("x/y", {}, time=time)


@pytest.mark.parametrize("ignorable", ["yes", 1, 0, None, DEEP, Unprintable()])
def test_append_refuses_an_ignorable_that_is_not_a_bool(ignorable: Any) -> None:
    # `"yes"` and `1` were read as false: an unknown type then failed R14a, "nor ignorable".
    with pytest.raises(InvalidEnvelope, match=r"ignorable must be a bool, got .*\(R2\)"):
        SessionLog.empty().append("acme/note", {}, time=0, ignorable=ignorable)
    with pytest.raises(InvalidEnvelope, match=r"ignorable must be a bool"):
        SessionLog.empty().append("turn/start", {"turn": 1}, time=0, ignorable=ignorable)


def test_append_describes_a_bad_replace() -> None:
    with pytest.raises(SurfaceMarkerError, match="R6"):
        SessionLog.empty().append(
            "user/message", USER, time=0, surface_op=Replace(DEEP, 0), source_event_seqs=[0]
        )


@pytest.mark.parametrize(
    "row",
    [
        {"type": "text-chunks", "seq0": DEEP, "time0": 0, "data": {}},
        {"type": "text-chunks", "seq0": 0, "time0": Unprintable(), "data": {}},
        {
            "type": "text-chunks",
            "seq0": 0,
            "time0": 0,
            "data": {"turn": 1, "step": 1, "index": 0, "dt": [0], "texts": ["a", DEEP]},
        },
        {
            "type": "text-chunks",
            "seq0": 0,
            "time0": 0,
            "data": {"turn": 1, "step": 1, "index": 0, "dt": [DEEP], "texts": ["a", "b"]},
        },
        {"type": "text-chunks", 1: 2, "seq0": 0, "time0": 0},
        {"type": "text-chunks", "seq0": 0, "time0": 0, "data": {1: 2, "turn": 1}},
    ],
)
def test_expand_storage_records_describes_a_bad_row(row: dict[Any, Any]) -> None:
    with pytest.raises(MalformedChunkRow) as info:
        kernel.expand_storage_records([row])
    assert info.value.index == 0


def test_fork_prefix_describes_a_deep_boundary() -> None:
    with pytest.raises(ForkError, match="must be a non-negative safe integer"):
        kernel.fork_prefix([Event("x/y", 0, 0, {})], DEEP)


def test_compaction_range_describes_a_bad_endpoint() -> None:
    log = SessionLog.empty().append("user/message", USER, time=0, surface_op=APPEND).events
    for endpoint in (DEEP, Unprintable(), True):
        with pytest.raises(KernelError, match="not found on the surface"):
            is_safe_compaction_range(log, endpoint, 0)
    assert is_safe_compaction_range(log, 0, 0.0)


@pytest.mark.parametrize(
    "stored",
    [
        line(type=b'"todo/write"', seq=b"0", time=DEEP_TEXT, data=b"{}"),
        b'{"type":"text-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,'
        b'"dt":[1],"texts":["a",' + DEEP_TEXT + b"]}}\n",
        b'{"type":"text-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,'
        b'"dt":[' + DEEP_TEXT + b'],"texts":["a","b"]}}\n',
    ],
    ids=["time", "chunk-row text", "chunk-row dt"],
)
def test_load_describes_deep_values_in_committed_records(stored: bytes) -> None:
    data = HEADER_LINE + stored + TURN_END.replace(b'"seq":3', b'"seq":1')
    with pytest.raises(CorruptLog):
        kernel.load_jsonl(data, now=0)
    with contextlib.suppress(CorruptLog):
        kernel.scan_jsonl(data)


def test_load_describes_a_deep_tool_call_id() -> None:
    call = (
        b'{"type":"assistant/message","seq":2,"time":1,"data":{"turn":1,"step":1,"message":'
        b'{"id":"a","role":"assistant","source":{"kind":"model","provider":"p","model":"m"},'
        b'"content":[{"type":"tool-call","id":' + DEEP_TEXT + b'}]}},"surfaceOp":"append"}\n'
    )
    with pytest.raises(CorruptLog, match="tool-call block id"):
        kernel.load_jsonl(HEADER_LINE + TURN_START + STEP_START + call, now=0)


def test_load_describes_a_deep_unknown_type() -> None:
    data = HEADER_LINE + line(type=DEEP_TEXT, seq=b"0", time=b"1", data=b"{}")
    with pytest.raises(UnsupportedFormat):
        kernel.load_jsonl(data, now=0)


def _packed_store(path: Path) -> None:
    events = [
        Event("turn/start", 0, 1, {"turn": 1}),
        Event("step/start", 1, 1, {"turn": 1, "step": 1}),
    ]
    for seq in (2, 3, 4):
        chunk = {"type": "text-delta", "index": 0, "text": "x"}
        events.append(Event("assistant/chunk", seq, 1, {"turn": 1, "step": 1, "chunk": chunk}))
    events += [
        Event("step/end", 5, 1, {"turn": 1, "step": 1}),
        Event("turn/end", 6, 1, {"turn": 1, "reason": {"kind": "completed"}}),
    ]
    with SqliteStore(path) as store:
        store.create(HEADER)
        store.append("s", events)


@pytest.mark.parametrize(
    "data",
    [
        '{"turn":1,"step":1,"index":0,"dt":[0,0],"texts":["a","b",' + DEEP_TEXT.decode() + "]}",
        '{"turn":1,"step":1,"index":0,"dt":[0,' + DEEP_TEXT.decode() + '],"texts":["a","b","c"]}',
    ],
    ids=["text", "dt"],
)
def test_sqlite_describes_a_tampered_packed_row(tmp_path: Path, data: str) -> None:
    path = tmp_path / "s.db"
    _packed_store(path)
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        assert conn.execute("UPDATE events SET data = ? WHERE ignorable = 0", (data,)).rowcount
    with SqliteStore(path) as store:
        with pytest.raises(CorruptLog):
            store.inspect("s")
        with pytest.raises(CorruptLog):
            store.load("s", now=0)


# -- integers past the int-to-text limit --------------------------------------------------------


def test_a_header_version_of_5001_digits_is_a_foreign_version() -> None:
    data = HEADER_LINE.replace(b'"version":0', b'"version":' + b"1" * 5_001)
    with pytest.raises(UnsupportedFormat):
        kernel.load_jsonl(data, now=0)
    with pytest.raises(UnsupportedFormat):
        kernel.scan_jsonl(data)


@pytest.mark.parametrize("literal", [b"1" * 5_001, b"1e400", b"-0.0"], ids=["5001", "1e400", "-0"])
def test_a_committed_top_level_number_beyond_a_double_is_taken_as_parsed(
    literal: bytes,
) -> None:
    # docs/format/admission.md §3.2: restore takes numbers as parsed, the data of an event included.
    stored = line(type=b'"todo/write"', seq=b"0", time=b"1", data=literal)
    data = HEADER_LINE + stored + TURN_END.replace(b'"seq":3', b'"seq":1')
    assert json_equal(kernel.load_jsonl(data, now=0).events[0].data, float(literal))


def test_keys_of_5000_digits_are_written_and_compared() -> None:
    key = "1" * 5_000
    log = SessionLog.empty().append("todo/write", {key: 1, "0": 2}, time=0)
    written = kernel.write_jsonl(HEADER, log.events)
    assert kernel.load_jsonl(written, now=0).events[0].data[key] == 1
    tool = {"name": "t", "description": "", "parameters": {key: 1}}
    header = {"config": {"provider": "p", "model": "m"}, "tools": [tool]}
    assert kernel.headers_equal(header, header)


def test_an_event_holding_a_huge_int_is_reported_not_formatted() -> None:
    event = Event("turn/start", 0, 0, {"turn": 1})
    for bad in (tampered(event, seq=HUGE), tampered(event, seq=-HUGE)):
        with pytest.raises(KernelError):
            kernel.fold_surface([bad])
        with pytest.raises(InvalidEnvelope):
            kernel.event_to_json(bad)
        with pytest.raises(InvalidEnvelope):
            kernel.interrupted_turn_closers([bad])
    assert kernel.event_to_json(tampered(event, time=HUGE))["time"] == HUGE


@pytest.mark.parametrize(
    "admit",
    [
        kernel.freeze,
        lambda n: kernel.event_from_json({"type": "x/y", "seq": n, "time": 0, "data": None}),
        lambda n: kernel.header_from_json({**HEADER, "version": n}),
        lambda n: kernel.canonical_header({"config": {"maxTokens": n}}),
    ],
    ids=["freeze", "event_from_json", "header_from_json", "canonical_header"],
)
def test_admitting_a_huge_int_is_not_lossless_json(admit: Callable[[int], Any]) -> None:
    with pytest.raises(KernelError):
        admit(HUGE)


def test_append_with_a_huge_time_is_an_invalid_envelope() -> None:
    with pytest.raises(InvalidEnvelope):
        SessionLog.empty().append("x/y", {}, time=HUGE)


# -- wrong types at the API ---------------------------------------------------------------------

EVENT_FOLDS: dict[str, Callable[[Any], Any]] = {
    "fold_surface": kernel.fold_surface,
    "derive_messages": kernel.derive_messages,
    "tool_pairing_cuts": kernel.tool_pairing_cuts,
    "fold_request_header": kernel.fold_request_header,
    "fold_request_context": kernel.fold_request_context,
    "fold_todos": kernel.fold_todos,
    "fork_prefix": kernel.fork_prefix,
    "last_end_seed": kernel.last_end_seed,
    "interrupted_turn_closers": kernel.interrupted_turn_closers,
    "pack_chunk_rows": kernel.pack_chunk_rows,
    "expand_storage_records": kernel.expand_storage_records,
    "write_jsonl": lambda events: kernel.write_jsonl(HEADER, events),
    "write_jsonl unpacked": lambda events: kernel.write_jsonl(HEADER, events, pack_chunks=False),
    "seed": lambda events: SessionLog.seed(events, now=0),
    "restore": SessionLog.restore,
}


@pytest.mark.parametrize(
    # expand_storage_records passes a stored value that is not a row through, null included
    # (docs/format/events.md §7.5): it is the loader that refuses it (test_storage_passthrough.py).
    "name",
    sorted(set(EVENT_FOLDS) - {"expand_storage_records"}),
)
def test_an_item_that_is_not_an_event_names_its_index(name: str) -> None:
    fold = EVENT_FOLDS[name]
    first = Event("turn/start", 0, 0, {"turn": 1})
    with pytest.raises(KernelError) as info:
        fold([first, None])
    assert info.value.index == 1, info.value


@pytest.mark.parametrize(
    "name",
    [n for n in sorted(EVENT_FOLDS)],
)
def test_events_that_are_not_iterable_are_a_kernel_error(name: str) -> None:
    with pytest.raises(KernelError):
        EVENT_FOLDS[name](None)


@pytest.mark.parametrize("claimed", [tuple, list, SessionLog], ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", sorted(EVENT_FOLDS))
def test_events_that_claim_a_class_are_taken_for_what_they_are(name: str, claimed: type) -> None:
    fold = EVENT_FOLDS[name]
    with pytest.raises(InvalidEnvelope, match="events must be an iterable of Event"):
        fold(claiming(claimed))
    liar = claiming(claimed, POOL[:6])  # iterable, so taken as the iterable it is
    try:
        expected: Any = fold(list(POOL[:6]))
    except KernelError as error:
        with pytest.raises(type(error)) as info:
            fold(liar)
        assert str(info.value) == str(error)
    else:
        assert compared(fold(liar)) == compared(expected)


def compared(answer: Any) -> Any:
    """What to compare of an answer: a `SessionLog` compares by identity, so its fields."""
    return attrs.asdict(answer, recurse=False) if type(answer) is SessionLog else answer


BAD_FIELDS: list[tuple[str, Any, type[KernelError]]] = [
    ("type", None, InvalidEnvelope),
    ("type", ["turn/start"], InvalidEnvelope),
    ("seq", None, InvalidEnvelope),
    ("seq", -1, InvalidEnvelope),
    ("seq", Unprintable(), InvalidEnvelope),
    ("time", "1", InvalidEnvelope),
    ("time", ClaimsInt(), InvalidEnvelope),
    ("seq", ClaimsInt(), InvalidEnvelope),
    ("ignorable", ClaimsBool(), InvalidEnvelope),
    ("type", ClaimsStr(), InvalidEnvelope),
    ("time", math.inf, InvalidEnvelope),
    ("ignorable", 1, InvalidEnvelope),
    ("data", object(), NotLosslessJson),
    ("data", {"turn": 1}, NotLosslessJson),  # a plain dict: not frozen, so not the kernel's own
    ("surface_op", "append", SurfaceMarkerError),
    ("surface_op", Replace(-1, 0), SurfaceMarkerError),
    ("surface_op", Replace(DEEP, 0), SurfaceMarkerError),
    ("source_event_seqs", [0], ProvenanceError),
    ("source_event_seqs", ("0",), ProvenanceError),
]


@pytest.mark.parametrize(
    ("field", "value", "error"),
    BAD_FIELDS,
    ids=[f"{field}-{type(value).__name__}" for field, value, _ in BAD_FIELDS],  # no repr
)
def test_an_event_field_of_the_wrong_type_raises_that_fields_error(
    field: str, value: Any, error: type[KernelError]
) -> None:
    event = tampered(Event("turn/start", 0, 0, {"turn": 1}), **{field: value})
    with pytest.raises(error):
        check_event(event)
    with pytest.raises(error):
        kernel.event_to_json(event)
    with pytest.raises(error) as info:
        kernel.pack_chunk_rows([Event("x/y", 0, 0, None), event])
    assert info.value.index == 1
    for fold in EVENT_FOLDS.values():
        with contextlib.suppress(KernelError):
            fold([event])


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("seq", ClaimsInt()),
        ("time", ClaimsInt()),
        ("ignorable", ClaimsBool()),
        ("type", ClaimsStr()),
    ],
    ids=["seq", "time", "ignorable", "type"],
)
def test_seed_and_restore_refuse_a_field_that_claims_its_type(field: str, value: Any) -> None:
    event = tampered(Event("turn/start", 0, 0, {"turn": 1}), **{field: value})
    with pytest.raises(InvalidEnvelope):
        SessionLog.seed([event], header=HEADER, now=0)
    with pytest.raises(InvalidEnvelope):
        SessionLog.restore([event], header=HEADER)


def test_seed_refuses_an_event_with_a_wire_spelled_surface_op() -> None:
    event = Event("user/message", 0, 0, USER, surface_op="append")  # type: ignore[arg-type]
    with pytest.raises(SurfaceMarkerError) as info:
        SessionLog.seed([event], now=0)
    assert info.value.index == 0
    with pytest.raises(SurfaceMarkerError):
        kernel.fold_surface([event])


def test_check_invariants_refuses_an_event_without_a_seq() -> None:
    with pytest.raises(InvalidEnvelope):
        kernel.check_invariants([Event("turn/start", None, 0, {"turn": 1})])  # type: ignore[arg-type]


@pytest.mark.slow
def test_restore_admits_only_what_a_json_parser_gives() -> None:
    for data in ({1: 2}, {"a": (1, 2)}, {"a": [Unprintable()]}, [math.nan]):
        with pytest.raises(NotLosslessJson) as info:
            SessionLog.restore([{"type": "x/y", "seq": 0, "time": 0, "data": data}])
        assert info.value.index == 0
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    with pytest.raises(NotLosslessJson, match="cycle"):
        SessionLog.restore([{"type": "x/y", "seq": 0, "time": 0, "data": cyclic}])
    # Numbers are taken as parsed (docs/format/admission.md §3.2), and the caller's containers are
    # copied.
    data: dict[str, Any] = {"n": [-0.0, math.inf, 2**60], "deep": deep(20_000)}
    log = SessionLog.restore([{"type": "todo/write", "seq": 0, "time": 0, "data": data}])
    data["n"].append(1)
    assert len(log.events[0].data["n"]) == 3
    assert kernel.load_jsonl(kernel.write_jsonl(HEADER, log.events), now=0).events


@pytest.mark.parametrize("data", [object(), {"turn": 1}], ids=["object", "plain dict"])
def test_restore_refuses_an_event_whose_data_is_not_frozen_json(data: Any) -> None:
    event = tampered(Event("x/y", 0, 0, {}), data=data)
    with pytest.raises(NotLosslessJson):
        SessionLog.restore([event])


def test_a_pickled_append_still_appends() -> None:
    event = pickle.loads(pickle.dumps(Event("user/message", 0, 0, USER, APPEND)))
    assert kernel.fold_surface([event]).nodes == (0,)
    assert kernel.derive_messages([event]) == (USER,)
    assert kernel.event_to_json(event)["surfaceOp"] == "append"


def test_headers_and_header_writer_arguments_are_checked() -> None:
    for header in (None, HEADER, SessionHeader(id=Unprintable(), created_at=0)):  # type: ignore[arg-type]
        with pytest.raises(SessionHeaderError):
            kernel.header_to_json(header)  # type: ignore[arg-type]
    with pytest.raises(KernelError):
        kernel.write_jsonl(SessionHeader(id=Unprintable(), created_at=0), ())  # type: ignore[arg-type]
    h = {"config": {"provider": "p", "model": "m"}}
    for state, declared, generation in [
        (None, False, 0),
        (HeaderWriterState(anchored=Unprintable()), False, 0),  # type: ignore[arg-type]
        (HeaderWriterState(), Unprintable(), 0),
        (HeaderWriterState(), False, -1),
        (HeaderWriterState(), False, HUGE),
    ]:
        with pytest.raises(KernelError):
            kernel.header_event(state, h, baseline=None, declared=declared, generation=generation)  # type: ignore[arg-type]


def test_an_event_with_citations_that_are_not_a_sequence_is_refused() -> None:
    with pytest.raises(ProvenanceError):
        Event("user/message", 0, 0, USER, APPEND, 5)  # type: ignore[arg-type]


# -- the fuzz: every public entry point, fed junk -----------------------------------------------

_POOL_LOG = (
    SessionLog.empty()
    .append("turn/start", {"turn": 1}, time=1)
    .append(
        "request/header",
        {"header": {"config": {"provider": "p", "model": "m"}}, "reason": "initial"},
        time=1,
    )
    .append("user/message", USER, time=1, surface_op=APPEND)
    .append("step/start", {"turn": 1, "step": 1}, time=2)
)
for _k in range(3):
    _POOL_LOG = _POOL_LOG.append(
        "assistant/chunk",
        {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": str(_k)}},
        time=3 + _k,
    )
_POOL_LOG = (
    _POOL_LOG.append("assistant/message", call_message("c1"), time=7, surface_op=APPEND)
    .append(
        "tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "ls", "arguments": "{}"}, time=7
    )
    .append("request/context", {"provider": "p", "model": "m"}, time=8)
    .append("todo/write", {"todos": [{"content": "x"}]}, time=8)
)
POOL: tuple[Event, ...] = tuple(_POOL_LOG.events)
"""An admitted log of most event types, cut inside an open step with a call waiting."""


def huge(sign: int = 1) -> int:
    """`HUGE` or `-HUGE`, as a strategy builds it (Hypothesis shows `huge(1)`, not the digits)."""
    return sign * HUGE


def long_digits() -> str:
    return "1" * 5_000


# Values whose repr raises or recurses are made by `st.builds`, so Hypothesis reports how it
# built them instead of calling repr.
junk_scalars = (
    st.sampled_from(
        [
            *(None, True, False, 0, 1, -1, 1.5, -0.0, math.inf, -math.inf, math.nan, 2**53),
            *("", "append", "turn/start", "user/message", "\ud800"),
        ]
    )
    | st.builds(huge, st.sampled_from([1, -1]))
    | st.builds(long_digits)
    | st.builds(Unprintable)
    | st.builds(claiming, st.sampled_from(CLAIMED))
    | st.builds(claiming, st.sampled_from(CLAIMED), st.just(POOL[:3]))
    | st.integers()
    | st.text(max_size=4)
)
junk_keys = (
    st.sampled_from(["type", "seq", "data", "x", "1" * 30, ""])
    | st.integers()
    | st.none()
    | st.builds(Unprintable)
)


def _junk_containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    # A named function: Hypothesis reads a multi-line lambda's source as not using `inner`.
    return (
        st.lists(inner, max_size=3)
        | st.tuples(inner)
        | st.dictionaries(junk_keys, inner, max_size=3)
        | st.builds(Replace, inner, inner)
        | st.builds(kernel.freeze, st.just({"a": [1]}))
    )


junk: st.SearchStrategy[Any] = st.recursive(
    junk_scalars | st.builds(deep) | st.builds(dict, k=st.builds(deep)),
    _junk_containers,
    max_leaves=6,
)
EVENT_FIELDS = ("type", "seq", "time", "data", "surface_op", "source_event_seqs", "ignorable")
claims = st.sampled_from([ClaimsInt, ClaimsBool, ClaimsStr]).map(lambda claim: claim())
"""A field value whose `__class__` names the type the field holds (an event's fields are
checked with `type()`)."""


@st.composite
def events(draw: st.DrawFn) -> Any:
    """A pool event, sometimes with one field set to junk; sometimes junk itself."""
    if draw(st.integers(0, 9)) == 0:
        return draw(junk)
    event = draw(st.sampled_from(POOL))
    if draw(st.booleans()):
        event = tampered(event, **{draw(st.sampled_from(EVENT_FIELDS)): draw(junk | claims)})
    return event


@st.composite
def event_lists(draw: st.DrawFn) -> Any:
    """Mostly a prefix of the pool with some events changed; sometimes junk."""
    shape = draw(st.integers(0, 9))
    if shape == 0:
        return draw(junk)
    if shape == 1:
        return draw(st.lists(events(), max_size=4))
    log: list[Any] = list(POOL[: draw(st.integers(0, len(POOL)))])
    for _ in range(draw(st.integers(0, 2))):
        if log:
            log[draw(st.integers(0, len(log) - 1))] = draw(events())
    return log


_SCALAR_VALUE = rb'-?\d+(?:\.\d+)?|"(?:[^"\\]|\\.)*"|true|false|null'
JUNK_TOKENS = [
    DEEP_TEXT,
    b"1" * 5_001,
    b"-" + b"9" * 5_001,
    b"1e400",
    b"-0",
    b"0.5",
    b'"x"',
    b"null",
    b"{}",
    b"[1]",
]


@st.composite
def stored_logs(draw: st.DrawFn) -> bytes:
    """JSONL written from the pool, one scalar in one line replaced by a junk token."""
    prefix = POOL[: draw(st.integers(0, len(POOL)))]
    lines = kernel.write_jsonl(HEADER, prefix).split(b"\n")[:-1]
    if draw(st.booleans()):
        lines.append(TURN_END.rstrip(b"\n").replace(b'"seq":3', b'"seq":%d' % len(prefix)))
    at = draw(st.integers(0, len(lines) - 1))
    key = draw(
        st.sampled_from(
            [b"version", b"type", b"seq", b"seq0", b"time", b"turn", b"id", b"text", b"dt"]
        )
    )
    token = draw(st.sampled_from(JUNK_TOKENS))
    pattern = re.compile(b'("' + key + b'":)(' + _SCALAR_VALUE + b"|\\[[^\\]]*\\])")
    lines[at] = pattern.sub(lambda m: m.group(1) + token, lines[at], count=1)
    return b"\n".join(lines) + b"\n"


@st.composite
def zstd_logs(draw: st.DrawFn) -> bytes:
    """A Zstandard log written from a pool prefix, cut short or with one byte changed."""
    data = kernel.write_jsonl_zstd(HEADER, POOL[: draw(st.integers(0, len(POOL)))])
    at = draw(st.integers(0, len(data) - 1))
    if draw(st.booleans()):
        return data[:at]
    return data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1 :]


RESPONSE_KEYS = ("id", "type", "role", "content", "choices", "message", "delta", "index")
responses = st.dictionaries(st.sampled_from(RESPONSE_KEYS), junk, max_size=4) | junk
"""A provider's response or stream item: some of the keys it has, holding junk; or junk."""
response_places = st.fixed_dictionaries(
    {"turn": st.just(1) | junk, "step": st.just(1) | junk, "message_id": st.just("m") | junk},
    optional={"provider": junk},
)
histories = st.builds(lambda log: tuple(kernel.derive_messages(log)), st.just(POOL)) | junk
"""The derived messages of the pool's log, or junk."""


def in_a_store(d: st.DataObject, act: Callable[[Any], object]) -> None:
    """`act` on a store of either kind, in a directory of its own, holding session `s`
    (`POOL[:4]`)."""
    with tempfile.TemporaryDirectory() as root:
        jsonl = d.draw(st.booleans(), label="jsonl")
        store = JsonlStore(root) if jsonl else SqliteStore(Path(root) / "s.db")
        try:
            store.create(HEADER)
            store.append("s", POOL[:4])
            act(store)
        finally:
            if not jsonl:
                store.close()


BUILDER_ARGUMENTS: dict[str, Any] = {
    "role": "user",
    "turn": 1,
    "step": 1,
    "index": 0,
    "text": "t",
    "attachment_id": "a",
    "media_type": "image/png",
    "bytes": 1,
    "width": 1,
    "height": 1,
    "id": "i",
    "name": "n",
    "arguments": "{}",
    "tool_call_id": "c",
    "content": "x",
    "provider": "p",
    "model": "m",
    "call_id": "c",
    "reason": {"kind": "completed"},
    "chunk": {"type": "text-delta", "index": 0, "text": "t"},
    "message": {"id": "m", "role": "assistant", "content": []},
    "todos": [],
    "description": "d",
    "parameters": {},
    "header": {"config": {"provider": "p", "model": "m"}},
    "original": {"turn": 1, "step": 1, "message": {}},
}
"""A plausible value for each argument of the payload builders."""


def a_builder_call(d: st.DataObject) -> object:
    """One payload builder, each of its arguments plausible or junk."""
    name = d.draw(st.sampled_from(builders.__all__), label="builder")
    build = getattr(builders, name)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for param in inspect.signature(build).parameters.values():
        plausible = BUILDER_ARGUMENTS.get(param.name, param.default)
        value = d.draw(st.just(plausible) | junk, label=param.name)
        if param.kind is param.POSITIONAL_OR_KEYWORD:
            args.append(value)
        else:
            kwargs[param.name] = value
    return build(*args, **kwargs)


session_ids = st.just("s") | st.just("t") | junk
batches = st.builds(lambda n: POOL[4 : 4 + n], st.integers(0, 6)) | event_lists()
"""The pool's events after the four a store holds (the next batch), or any event list."""
ENTRY_POINTS: dict[str, Callable[[st.DataObject], object]] = {
    "Event": lambda d: Event(*(d.draw(junk) for _ in EVENT_FIELDS)),
    "event_from_json": lambda d: kernel.event_from_json(
        d.draw(
            st.dictionaries(
                st.sampled_from(
                    ["type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs", "ignorable"]
                ),
                junk,
            )
            | junk
        )
    ),
    "event_to_json": lambda d: kernel.event_to_json(d.draw(events())),
    "header_from_json": lambda d: kernel.header_from_json(
        d.draw(
            st.fixed_dictionaries(
                {}, optional={k: junk for k in ("version", "id", "createdAt", "cwd", "seedLength")}
            )
            | junk
        ),
        session_id=d.draw(st.none() | junk),
    ),
    "header_to_json": lambda d: kernel.header_to_json(
        SessionHeader(d.draw(junk), d.draw(junk), 0, d.draw(junk))
    ),
    "SessionLog.seed": lambda d: SessionLog.seed(
        d.draw(event_lists()), header=d.draw(st.none() | junk), now=0
    ),
    "SessionLog.restore": lambda d: SessionLog.restore(
        d.draw(event_lists()), header=d.draw(st.none() | junk)
    ),
    "SessionLog.empty": lambda d: SessionLog.empty(header=d.draw(junk)),
    "SessionLog.append": lambda d: SessionLog.restore(POOL).append(
        d.draw(junk | st.sampled_from(["user/message", "tool/result", "turn/end"])),
        d.draw(junk),
        time=d.draw(st.just(0) | junk),
        surface_op=d.draw(st.none() | junk),
        source_event_seqs=d.draw(st.none() | junk),
        ignorable=d.draw(junk),
    ),
    "check_batch": lambda d: check_batch(  # next_seq is the store's own count
        d.draw(event_lists()), d.draw(st.none() | st.integers(0, 20))
    ),
    "fold_surface": lambda d: kernel.fold_surface(d.draw(event_lists())),
    "project_message": lambda d: kernel.project_message(d.draw(events())),
    "derive_messages": lambda d: kernel.derive_messages(d.draw(event_lists())),
    "canonical_header": lambda d: kernel.canonical_header(d.draw(junk)),
    "headers_equal": lambda d: kernel.headers_equal(d.draw(junk), d.draw(junk)),
    "fold_request_header": lambda d: kernel.fold_request_header(
        d.draw(event_lists()), d.draw(st.none() | junk)
    ),
    "header_event": lambda d: kernel.header_event(
        d.draw(st.just(HeaderWriterState()) | junk),
        d.draw(junk),
        baseline=d.draw(junk),
        declared=d.draw(junk),
        generation=d.draw(junk),
    ),
    "tool_pairing_cuts": lambda d: kernel.tool_pairing_cuts(d.draw(event_lists())),
    "check_invariants": lambda d: kernel.check_invariants(d.draw(event_lists())),
    "interrupted_turn_closers": lambda d: kernel.interrupted_turn_closers(d.draw(event_lists())),
    "pack_chunk_rows": lambda d: kernel.pack_chunk_rows(d.draw(event_lists())),
    "expand_storage_records": lambda d: kernel.expand_storage_records(
        d.draw(event_lists() | st.lists(junk))
    ),
    "scan_jsonl": lambda d: kernel.scan_jsonl(d.draw(stored_logs())),
    "load_jsonl": lambda d: kernel.load_jsonl(d.draw(stored_logs()), now=0),
    "write_jsonl": lambda d: kernel.write_jsonl(
        d.draw(st.just(HEADER) | junk), d.draw(event_lists()), pack_chunks=d.draw(st.booleans())
    ),
    "scan_jsonl_zstd": lambda d: kernel.scan_jsonl_zstd(d.draw(zstd_logs())),
    "load_jsonl_zstd": lambda d: kernel.load_jsonl_zstd(d.draw(zstd_logs()), now=0),
    "write_jsonl_zstd": lambda d: kernel.write_jsonl_zstd(HEADER, d.draw(event_lists())),
    "fold_request_context": lambda d: kernel.fold_request_context(d.draw(event_lists())),
    "fold_todos": lambda d: kernel.fold_todos(d.draw(event_lists())),
    "fork_prefix": lambda d: kernel.fork_prefix(d.draw(event_lists()), d.draw(st.none() | junk)),
    "last_end_seed": lambda d: kernel.last_end_seed(d.draw(event_lists())),
    "store.create": lambda d: in_a_store(
        d,
        lambda store: store.create(
            d.draw(st.builds(lambda i: {**HEADER, "id": i}, session_ids) | junk)
        ),
    ),
    "store.append": lambda d: in_a_store(
        d, lambda store: store.append(d.draw(session_ids), d.draw(batches))
    ),
    "store.load": lambda d: in_a_store(
        d,
        lambda store: store.load(
            d.draw(session_ids),
            now=d.draw(st.just(9) | junk),
            adopt_live=d.draw(st.booleans() | junk),
        ),
    ),
    "store.inspect": lambda d: in_a_store(
        d, lambda store: store.inspect(d.draw(session_ids), now=d.draw(st.just(9) | junk))
    ),
    "store.read_from": lambda d: in_a_store(
        d, lambda store: store.read_from(d.draw(session_ids), d.draw(st.integers(0, 6) | junk))
    ),
    "open_session": lambda d: in_a_store(
        d,
        lambda store: open_session(
            store,
            d.draw(session_ids),
            header=d.draw(st.none() | st.just({**HEADER, "id": "t"}) | junk),
            now=d.draw(st.just(9) | junk),
        ),
    ),
    "LiveSession.append": lambda d: in_a_store(
        d,
        lambda store: open_session(store, "s", now=9).append(
            d.draw(junk | st.sampled_from(["step/start", "assistant/chunk", "tool/result"])),
            d.draw(junk),
            time=d.draw(st.just(9) | junk),
            surface_op=d.draw(st.none() | junk),
            source_event_seqs=d.draw(st.none() | junk),
            ignorable=d.draw(st.just(False) | junk),
        ),
    ),
    "LiveSession.request_header": lambda d: in_a_store(
        d,
        lambda store: open_session(store, "s", now=9).request_header(
            d.draw(junk), time=d.draw(st.just(9) | junk), declared=d.draw(st.booleans() | junk)
        ),
    ),
    "payload builders": a_builder_call,
    "acp_content": lambda d: projections.acp_content(d.draw(junk)),
    "acp_updates": lambda d: projections.acp_updates(
        d.draw(event_lists()),
        session_id=d.draw(st.just("s") | junk),
        view=d.draw(st.sampled_from(["transcript", "surface"]) | junk),
    ),
    "AcpState.step": lambda d: d.draw(
        st.sampled_from([projections.AcpState.live, projections.AcpState.replay])
    )(d.draw(st.just("s") | junk)).step(d.draw(events())),
    "anthropic_request": lambda d: projections.anthropic_request(
        d.draw(event_lists()),
        images=d.draw(st.none() | junk),
        max_tokens=d.draw(st.just(4096) | junk),
    ),
    "openai_request": lambda d: projections.openai_request(
        d.draw(event_lists()), images=d.draw(st.none() | junk)
    ),
    "anthropic_response_events": lambda d: projections.anthropic_response_events(
        d.draw(responses), **d.draw(response_places)
    ),
    "openai_response_events": lambda d: projections.openai_response_events(
        d.draw(responses), **d.draw(response_places)
    ),
    "anthropic_stream_events": lambda d: projections.anthropic_stream_events(
        d.draw(st.lists(responses, max_size=4) | junk), **d.draw(response_places)
    ),
    "openai_stream_events": lambda d: projections.openai_stream_events(
        d.draw(st.lists(responses, max_size=4) | junk), **d.draw(response_places)
    ),
    "paired_history": lambda d: projections.paired_history(d.draw(histories)),
    "anthropic_tool_ids": lambda d: projections.anthropic_tool_ids(d.draw(histories)),
    "openai_tool_ids": lambda d: projections.openai_tool_ids(d.draw(histories)),
    "tool_kind": lambda d: projections.tool_kind(d.draw(junk)),
    "freeze": lambda d: kernel.freeze(d.draw(junk)),
    "thaw": lambda d: kernel.thaw(d.draw(junk)),
    "FrozenObject": lambda d: kernel.FrozenObject(d.draw(junk)),
    "FrozenArray": lambda d: kernel.FrozenArray(d.draw(junk)),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
@given(data=st.data())
def test_every_public_entry_point_raises_only_kernel_errors(name: str, data: st.DataObject) -> None:
    with contextlib.suppress(KernelError):
        ENTRY_POINTS[name](data)


def test_the_fuzz_covers_every_public_function_that_takes_events_or_json() -> None:
    records = {"APPEND", "Cut", "HeaderWriterState", "Loaded", "Replace", "Replacement", "Scan"}
    records |= {
        "SessionHeader",
        "SurfaceFold",
        "Violation",
        "TOOL_NOT_STARTED",
        "TOOL_OUTCOME_UNKNOWN",
    }
    errors = {
        name
        for name in kernel.__all__
        if isinstance(getattr(kernel, name), type) and issubclass(getattr(kernel, name), Exception)
    }
    covered = {name.split(".")[0] for name in ENTRY_POINTS}
    assert set(kernel.__all__) - records - errors <= covered


# -- arguments and conditions at the edges are named, never a raw exception ---------------------


class _RaisingStr(str):
    """A caller's str subclass whose comparisons raise."""

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("compared")

    __hash__ = str.__hash__


def test_store_constructors_name_a_bad_argument(tmp_path: Path) -> None:
    from kernel.store import JsonlStore, SqliteStore, StoreError

    (tmp_path / "a-directory").mkdir()
    attempts: list[tuple[Callable[[], Any], str]] = [
        (lambda: JsonlStore(5), "JsonlStore root must be a non-empty path"),  # type: ignore[arg-type]
        (lambda: SqliteStore(None), "SqliteStore path must be a non-empty path"),  # type: ignore[arg-type]
        (lambda: SqliteStore(tmp_path / "a-directory"), "a directory, not a database file"),
        (
            lambda: SqliteStore(tmp_path / "a-directory", read_only=True),
            "a directory, not a database file",
        ),
        (lambda: JsonlStore(tmp_path, known_types=5), "known_types must be a collection"),  # type: ignore[arg-type]
        (lambda: SqliteStore(tmp_path / "k.db", known_types=[1]), "known_types must be"),  # type: ignore[list-item]
    ]
    for attempt, message in attempts:
        with pytest.raises(KernelError, match=message):
            attempt()
    with pytest.raises(StoreError):
        SqliteStore(tmp_path / "missing-dir" / "x.db")


class _FspathOfAnInt:
    def __fspath__(self) -> Any:
        return 5


CLAIMING_ARGUMENTS: dict[str, tuple[Callable[[], object], type[KernelError]]] = {
    "JsonlStore root": (
        lambda: JsonlStore(claiming(str)),
        KernelError,
    ),
    "SqliteStore path": (lambda: SqliteStore(claiming(Path)), KernelError),
    "a path whose __fspath__ is an int": (lambda: SqliteStore(_FspathOfAnInt()), KernelError),
    "append surface_op": (
        lambda: SessionLog.empty().append("x/y", {}, time=0, surface_op=claiming(Replace)),
        NotLosslessJson,
    ),
    "canonical_header": (lambda: kernel.canonical_header(claiming(dict)), RequestHeaderShapeError),
    "headers_equal": (lambda: kernel.headers_equal(claiming(dict), {}), RequestHeaderShapeError),
    "load_jsonl": (lambda: kernel.load_jsonl(claiming(bytearray), now=0), CorruptLog),
    "tool_kind": (lambda: projections.tool_kind(claiming(str)), projections.ProjectionError),
    "openai_stream_events": (
        lambda: projections.openai_stream_events(claiming(list), turn=1, step=1, message_id="m"),
        KernelError,
    ),
    "openai_tool_ids": (lambda: projections.openai_tool_ids(claiming(tuple)), KernelError),
    "paired_history": (lambda: projections.paired_history(claiming(list)), KernelError),
}


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
@pytest.mark.parametrize("value", [Unprintable(), DEEP, HUGE], ids=["unprintable", "deep", "huge"])
def test_a_store_describes_a_bad_session_id_or_seq(tmp_path: Path, kind: str, value: Any) -> None:
    store = JsonlStore(tmp_path) if kind == "jsonl" else SqliteStore(tmp_path / "s.db")
    store.create(HEADER)
    store.append("s", POOL[:1])
    with pytest.raises(KernelError):
        store.read_from("s", value)
    with pytest.raises(KernelError):
        store.load(value, now=2)
    with pytest.raises(KernelError):
        open_session(store, value, now=2)
    with pytest.raises(KernelError):
        store.append(value, POOL[:1])
    with pytest.raises(KernelError):
        store.create({**HEADER, "id": value})
    if isinstance(store, SqliteStore):
        store.close()


@pytest.mark.parametrize(
    "value", [Unprintable(), DEEP, HUGE, None], ids=["unprintable", "deep", "huge", "none"]
)
def test_message_id_refuses_what_it_cannot_spell(value: Any) -> None:
    for arguments in ({"turn": value, "step": 1}, {"turn": 1, "step": 1, "index": value}):
        with pytest.raises(kernel.MessageShapeError, match="message_id takes"):
            builders.message_id("tool", **arguments)
    with pytest.raises(kernel.MessageShapeError, match="message_id takes"):
        builders.message_id(value, turn=1, step=1)


@pytest.mark.parametrize("content", [5, None, claiming(list)], ids=["int", "none", "claims"])
def test_a_builder_leaves_content_that_is_no_list_to_admission(content: Any) -> None:
    log = SessionLog.empty().append("turn/start", {"turn": 1}, time=0)
    assert builders.user_message(id="u", content=content)["content"] is content
    block = builders.tool_result_message(id="r", call_id="c", content=content)["content"][0]
    assert block["content"] is content
    with pytest.raises((kernel.MessageShapeError, NotLosslessJson), match=r"R10|R1"):
        log.append("user/message", builders.user_message(id="u", content=content), time=1)
    assert builders.todo_write(todos=content)["todos"] is content


@pytest.mark.parametrize("name", sorted(CLAIMING_ARGUMENTS))
def test_an_argument_that_claims_a_class_is_refused(name: str) -> None:
    call, error = CLAIMING_ARGUMENTS[name]
    with pytest.raises(error):
        call()


@pytest.mark.parametrize(
    "batch",
    [
        claiming(tuple),
        [claiming(Event)],
        [tampered(POOL[0], type=ClaimsStr())],
        [tampered(POOL[2], surface_op=claiming(Replace))],
        [tampered(POOL[2], surface_op=Replace(ClaimsInt(), 0))],
        [tampered(POOL[2], surface_op=Unprintable())],
        [tampered(POOL[2], surface_op=Replace(DEEP, 0))],
        [tampered(POOL[2], surface_op=Replace(HUGE, 0))],
    ],
    ids=["batch", "event", "type", "surface_op", "replace_start", "unprintable", "deep", "huge"],
)
@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_a_store_refuses_a_batch_it_cannot_take(tmp_path: Path, kind: str, batch: Any) -> None:
    store = JsonlStore(tmp_path) if kind == "jsonl" else SqliteStore(tmp_path / "s.db")
    store.create(HEADER)
    with pytest.raises(KernelError):
        store.append("s", batch)
    store.append("s", POOL[:1])  # the refused batch left nothing behind
    assert store.load("s", now=2).events[0] == POOL[0]
    if isinstance(store, SqliteStore):
        store.close()


def test_load_jsonl_names_a_bad_known_types_argument() -> None:
    data = kernel.write_jsonl(HEADER, [Event("turn/start", 0, 1, {"turn": 1})])
    with pytest.raises(KernelError, match="known_types must be a collection"):
        kernel.load_jsonl(data, now=0, known_types=5)  # type: ignore[arg-type]
    framed = kernel.write_jsonl_zstd(HEADER, [Event("turn/start", 0, 1, {"turn": 1})])
    with pytest.raises(KernelError, match="known_types must be a collection"):
        kernel.load_jsonl_zstd(framed, now=0, known_types=5)  # type: ignore[arg-type]
    with pytest.raises(KernelError, match="max_decoded_bytes must be an int >= 0"):
        kernel.load_jsonl_zstd(framed, now=0, max_decoded_bytes=-1)


def test_a_full_database_is_a_store_error(tmp_path: Path) -> None:
    from kernel.store import SqliteStore, StoreError

    with SqliteStore(tmp_path / "s.db") as store:
        store.create(HEADER)
        store.append("s", [Event("turn/start", 0, 1, {"turn": 1})])
        pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
        store._conn.execute(f"PRAGMA max_page_count = {pages}")  # the disk is full from now on
        big = [Event("session/title", seq, 2, {"title": "x" * 4000}) for seq in range(1, 40)]
        with pytest.raises(StoreError, match="could not be written"):
            store.append("s", big)
        assert len(store.load("s", now=3).events) == 2  # what was committed, and its closer


@pytest.mark.parametrize("order", [True, [["x"]], (_RaisingStr("type"),), 5])
def test_an_event_with_a_bad_wire_order_is_refused_when_written(order: Any) -> None:
    event = Event("turn/start", 0, 1, {"turn": 1}, wire_order=order)
    with pytest.raises(InvalidEnvelope, match=r"wire_order must be a tuple .* \(R2\)"):
        kernel.write_jsonl(HEADER, [event])
    with pytest.raises(InvalidEnvelope, match="wire_order"):
        kernel.event_to_json(event)


def test_envelope_keys_whose_comparison_raises_are_refused() -> None:
    wire = {_RaisingStr("type"): "turn/start", "seq": 0, "time": 0, "data": {"turn": 1}}
    with pytest.raises(InvalidEnvelope, match=r"envelope keys must be plain strings \(R2\)"):
        SessionLog.restore([wire])
    with pytest.raises(KernelError):
        SessionLog.seed([wire], now=1)
    with pytest.raises(KernelError):
        kernel.event_from_json(wire)


@pytest.mark.slow
@pytest.mark.parametrize("depth", [10, 50_000])
def test_an_error_inside_a_deep_value_has_a_bounded_message(depth: int) -> None:
    value: Any = float("nan")
    for _ in range(depth):
        value = {"k": [value]}
    with pytest.raises(NotLosslessJson) as caught:
        SessionLog.empty().append("turn/start", {"turn": 1, "x": value}, time=0)
    message = str(caught.value)
    assert len(message) < 600, len(message)
    assert "nan has no JSON spelling (R1)" in message
    if depth > 8:
        assert f"... {2 * depth + 1 - 16} more ..." in message  # the steps left out are counted
