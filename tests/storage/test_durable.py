"""Plain JSONL (docs/format/persistence.md §2-§5): the header line and version refusal, the scan
table of §3.3, the byte-exact writer of §2.4, the load pipeline of §5, and crash cuts at every
byte."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wire_records import E, S, T

from kernel.errors import (
    CorruptLog,
    EventShapeError,
    InvalidEnvelope,
    KernelError,
    LegacyFormat,
    MalformedChunkRow,
    MessageShapeError,
    SessionHeaderError,
    UnknownEventType,
    UnsupportedFormat,
)
from kernel.folds.closers import interrupted_turn_closers
from kernel.storage.jsonl import (
    Loaded,
    Scan,
    encode_records,
    header_line,
    load_jsonl,
    scan_jsonl,
    write_jsonl,
)
from kernel.values.events import APPEND, CLOSER_ORDER, Event, SessionHeader
from kernel.wire.chunks import pack_chunk_rows
from kernel.wire.codec import event_from_json, event_to_wire
from kernel.wire.jsontext import encode_json_bytes, parse_json

HEADER = b'{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}'


def row(seq0: int, texts: int = 3) -> bytes:
    dt = ",".join(["1"] * (texts - 1)).encode()
    members = ",".join(['"x"'] * texts).encode()
    return (
        b'{"type":"text-chunks","seq0":%d,"time0":0,"data":{"turn":1,"step":1,"index":0,'
        b'"dt":[%s],"texts":[%s]}}' % (seq0, dt, members)
    )


def log_bytes(*records: bytes, final_newline: bool = True, header: bytes = HEADER) -> bytes:
    text = b"\n".join((header, *records))
    return text + b"\n" if final_newline else text


def seqs(result: Scan | Loaded) -> list[int]:
    return [e.seq for e in result.events]


# -- docs/format/persistence.md §3.3: the scan table -----------------------------------------------

PARTIAL = b'{"type":"assistant/chunk","seq":2,"ti'
MALFORMED_ROW = row(1).replace(b'"dt":[1,1]', b'"dt":[1]')

SCAN_TABLE: list[tuple[str, bytes, list[int] | None, int | None]] = [
    # (name, bytes, expected seqs or None for CorruptLog, committed record count)
    ("T0 E1", log_bytes(T(0), E(1)), [0, 1], 2),
    ("T0 S1 partial", log_bytes(T(0), S(1), PARTIAL, final_newline=False), [0, 1], 2),
    ("T0 S2 gap", log_bytes(T(0), S(2)), [0], 1),
    ("T0 S2 E3", log_bytes(T(0), S(2), E(3)), None, None),
    ("not json then E1", log_bytes(b"{not json", E(1)), None, None),
    ("T0 not json", log_bytes(T(0), b"{not json"), [0], 1),
    ("T0 E1 S9", log_bytes(T(0), E(1), S(9)), [0, 1], 2),
    ("T0 not json S1", log_bytes(T(0), b"{not json", S(1)), [0], 1),
    ("E1 first", log_bytes(E(1)), None, None),
    ("T0 malformed row E5", log_bytes(T(0), MALFORMED_ROW, E(5)), None, None),
    ("T0 E1 row gap", log_bytes(T(0), E(1), row(3)), [0, 1], 2),
    ("T0 blank E1", log_bytes(T(0), b"", E(1)), None, None),
    ("T0 E1 blank", log_bytes(T(0), E(1), b""), [0, 1], 2),
    (
        "T0 not json E1 unterminated",
        log_bytes(T(0), b"{not json", E(1), final_newline=False),
        [0],
        1,
    ),
    ("T0 NaN", log_bytes(T(0), b'{"type":"x","seq":1,"time":NaN,"data":1}'), [0], 1),
    ("T0 42", log_bytes(T(0), b"42"), [0], 1),
    ("nothing", log_bytes(), [], 0),
]


@pytest.mark.parametrize(
    ("name", "data", "expected", "kept"), SCAN_TABLE, ids=[r[0] for r in SCAN_TABLE]
)
def test_p3_3_scan_table(
    name: str, data: bytes, expected: list[int] | None, kept: int | None
) -> None:
    if expected is None:
        with pytest.raises(CorruptLog):
            scan_jsonl(data)
        with pytest.raises(CorruptLog):
            load_jsonl(data, now=0)
        return
    assert kept is not None
    scan = scan_jsonl(data)
    assert seqs(scan) == expected
    committed = len(b"\n".join(data.split(b"\n")[: kept + 1])) + 1
    assert scan.committed_bytes == committed
    assert scan.total_bytes == len(data)
    assert scan.torn == (committed < len(data))
    loaded = load_jsonl(data, now=0)
    assert seqs(loaded)[: len(expected)] == expected
    assert loaded.committed_bytes == committed and loaded.torn == scan.torn
    assert loaded.events[len(expected) :] == loaded.closers


def test_p3_3_torn_rows_and_expectations_spelled_out() -> None:
    partial = scan_jsonl(log_bytes(T(0), S(1), PARTIAL, final_newline=False))
    assert partial.torn and partial.dropped_records == 1
    assert partial.torn_reason is not None and "newline" in partial.torn_reason
    gap_row = scan_jsonl(log_bytes(T(0), E(1), row(3)))
    assert gap_row.torn and gap_row.dropped_records == 1 and "seq gap" in str(gap_row.torn_reason)
    assert not scan_jsonl(log_bytes(T(0), E(1))).torn
    loaded = load_jsonl(log_bytes(T(0), S(1), PARTIAL, final_newline=False), now=0)
    assert [(e.type, e.seq, e.time) for e in loaded.closers] == [
        ("step/end", 2, 1),
        ("turn/end", 3, 1),
    ]


def test_p3_3_every_line_ending_crlf_reads_like_lf() -> None:
    lf = log_bytes(T(0), E(1))
    crlf = lf.replace(b"\n", b"\r\n")
    a, b = scan_jsonl(lf), scan_jsonl(crlf)
    assert a.events == b.events and not b.torn
    assert b.committed_bytes == len(crlf) == a.committed_bytes + 3


def test_p3_2_a_packed_row_continues_the_prefix_and_a_turn_end_after_its_damage_is_fatal() -> None:
    good = scan_jsonl(log_bytes(T(0), row(1), E(4)))
    assert seqs(good) == [0, 1, 2, 3, 4]
    with pytest.raises(CorruptLog):
        scan_jsonl(log_bytes(T(0), row(2), E(5)))


def test_p3_2_an_unparsable_turn_end_is_not_real_but_a_gapped_one_is() -> None:
    broken = E(2)[:-3]
    scan = scan_jsonl(log_bytes(T(0), S(1), broken))
    assert seqs(scan) == [0, 1] and scan.torn
    with pytest.raises(CorruptLog):
        scan_jsonl(log_bytes(T(0), S(1), broken, E(3)))
    with pytest.raises(CorruptLog, match="seq gap"):
        scan_jsonl(log_bytes(T(0), S(1), E(2).replace(b'"seq":2', b'"seq":true')))


def test_p3_2_a_boolean_seq_never_matches() -> None:
    boolean = S(1).replace(b'"seq":1', b'"seq":true')
    scan = scan_jsonl(log_bytes(T(0), boolean))
    assert seqs(scan) == [0] and scan.torn
    with pytest.raises(CorruptLog):
        scan_jsonl(log_bytes(T(0), boolean, E(2)))


@pytest.mark.parametrize(
    "inserted",
    [
        b'{"type":"x","seq":1,"time":Infinity,"data":1}',
        b"-Infinity",
        b"NaN",
        b"",
        b"\r",
        b"[1]",
        b"null",
        b'"s"',
        b"\xff\xfe",
        b'{"a":"\xc3"}',
        b"\xef\xbb\xbf{}",
    ],
)
def test_p43b_strict_record_parsing(inserted: bytes) -> None:
    assert seqs(scan_jsonl(log_bytes(T(0), inserted))) == [0]
    assert seqs(scan_jsonl(log_bytes(T(0), inserted, S(1)))) == [0]
    with pytest.raises(CorruptLog):
        scan_jsonl(log_bytes(T(0), inserted, E(1)))


def test_p3_2_lone_surrogate_escapes_and_huge_numbers_parse() -> None:
    data = log_bytes(
        T(0), b'{"type":"todo/write","seq":1,"time":1,"data":{"s":"\\ud800","n":1e400}}', E(2)
    )
    scan = scan_jsonl(data)
    assert scan.events[1].data["s"] == "\ud800"
    assert scan.events[1].data["n"] == float("inf")


# -- docs/format/persistence.md §3.1 and docs/format/events.md §2.2: the header line ---------------


def header_with(**changes: Any) -> bytes:
    obj: dict[str, Any] = {
        "type": "session",
        "version": 0,
        "id": "s",
        "createdAt": 1,
        "delegationDepth": 0,
    }
    for key, value in changes.items():
        if value is _DROP:
            del obj[key]
        else:
            obj[key] = value
    return encode_json_bytes(obj)


_DROP = object()


@pytest.mark.parametrize("data", [b"", HEADER, b"\n", b"{not json\n", b"42\n", b"\xff\n"])
def test_p3_1_empty_headerless_or_unparsable_first_line_is_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptLog):
        scan_jsonl(data)


@pytest.mark.parametrize(
    ("version", "direction"),
    [("1", "newer"), ("0.5", "newer"), ("1e400", "newer"), ("-1", "older"), ("-0.5", "older")],
)
def test_p4_foreign_versions_are_refused_before_any_other_check(
    version: str, direction: str
) -> None:
    for line in (
        HEADER.replace(b'"version":0', b'"version":' + version.encode()),
        b'{"version":' + version.encode() + b',"id":7}',
    ):
        with pytest.raises(UnsupportedFormat, match=direction) as info:
            scan_jsonl(line + b"\n")
        assert not isinstance(info.value, CorruptLog)
    with pytest.raises(UnsupportedFormat, match="session 7"):
        load_jsonl(b'{"version":' + version.encode() + b',"id":7}\n{garbage\n', now=0)


def test_p4_version_message_names_the_session_and_the_version() -> None:
    with pytest.raises(UnsupportedFormat) as info:
        scan_jsonl(HEADER.replace(b'"version":0', b'"version":3') + b"\n")
    assert "session s" in str(info.value) and "v3" in str(info.value)
    assert "v0" in str(info.value)


@pytest.mark.parametrize("version", [b"-0", b"0.0", b"-0.0", b"0e5"])
def test_p3_1_negative_and_float_zero_are_version_0(version: bytes) -> None:
    scan = scan_jsonl(HEADER.replace(b'"version":0', b'"version":' + version) + b"\n")
    assert scan.header["version"] == 0 and scan.events == ()


BAD_HEADERS = {
    "version string": header_with(version="0"),
    "version true": header_with(version=True),
    "version absent": header_with(version=_DROP),
    "not an object": b"[0]",
    "type missing": header_with(type=_DROP),
    "type other": header_with(type="sessions"),
    "id not string": header_with(id=5),
    "createdAt string": header_with(createdAt="1"),
    "createdAt fractional": header_with(createdAt=1.5),
    "createdAt negative": header_with(createdAt=-1),
    "createdAt beyond safe": header_with(createdAt=2**53),
    "createdAt -0": HEADER.replace(b'"createdAt":1', b'"createdAt":-0'),
    "createdAt -0.0": HEADER.replace(b'"createdAt":1', b'"createdAt":-0.0'),
    "delegationDepth missing": header_with(delegationDepth=_DROP),
    "delegationDepth -0": HEADER.replace(b'"delegationDepth":0', b'"delegationDepth":-0'),
    "delegationDepth null": header_with(delegationDepth=None),
    "origin other": header_with(origin="user"),
    "agentPreset number": header_with(agentPreset=3),
    "retired sandboxMode": header_with(sandboxMode="x"),
    "retired approvalPolicy": header_with(approvalPolicy="x"),
}


@pytest.mark.parametrize("name", sorted(BAD_HEADERS))
def test_e2_2_header_line_shape_failures_are_corruption(name: str) -> None:
    with pytest.raises(CorruptLog, match="session header"):
        scan_jsonl(BAD_HEADERS[name] + b"\n" + T(0) + b"\n")


def test_e2_2_header_record_drops_unknown_keys_and_keeps_field_order() -> None:
    line = header_with(
        extra=[1],
        origin="subagent",
        agentPreset="p",
        seedLength=2,
        parentSession="parent",
        cwd="/w",
        createdAt=5.0,
    )
    scan = scan_jsonl(line + b"\n")
    assert list(scan.header) == [
        "version",
        "id",
        "createdAt",
        "cwd",
        "parentSession",
        "seedLength",
        "origin",
        "delegationDepth",
        "agentPreset",
    ]
    assert type(scan.header["createdAt"]) is int
    loaded = load_jsonl(line + b"\n", now=0)
    assert loaded.header == SessionHeader(
        id="s",
        created_at=5,
        cwd="/w",
        parent_session="parent",
        seed_length=2,
        origin="subagent",
        delegation_depth=0,
        agent_preset="p",
    )


@pytest.mark.parametrize("cwd", ["relative/dir", None, 5])
def test_e2_2_cwd_is_checked_only_at_load(cwd: Any) -> None:
    data = header_with(cwd=cwd) + b"\n"
    assert scan_jsonl(data).header["cwd"] == cwd
    with pytest.raises(CorruptLog) as info:
        load_jsonl(data, now=0)
    assert isinstance(info.value.__cause__, SessionHeaderError)


def test_p3_1_crlf_header_line_is_accepted() -> None:
    assert scan_jsonl(HEADER + b"\r\n" + T(0) + b"\r\n").events[0].seq == 0


# -- docs/format/persistence.md §2.1 and §2.4: the byte-exact writer -------------------------------


def test_p2_4_serialization_example() -> None:
    source = (
        '{"type":"user/message","seq":1,"time":5,"data":{"id":"u","role":"user","content":'
        '[{"type":"text","text":"naïve\\u0007 🙂"}],"source":{"kind":"user"},"n":2.50},'
        '"surfaceOp":"append"}'
    )
    expected = (
        '{"type":"user/message","seq":1,"time":5,"data":{"id":"u","role":"user","content":'
        '[{"type":"text","text":"naïve\\u0007 🙂"}],"source":{"kind":"user"},"n":2.5},'
        '"surfaceOp":"append"}'
    )
    event = event_from_json(parse_json(source.encode()))
    assert encode_records([event]) == expected.encode("utf-8") + b"\n"


def test_p2_4_number_table_member_order_and_surrogates() -> None:
    numbers = [3.0, 1e16, 1e20, 123.456, 1e-5, 1e-6, 1e21, 1e-7, 1.5e300, -2.5, 2**53 - 1]
    event = Event(
        "todo/write",
        0,
        0,
        {
            "n": numbers,
            "o": {"b": 1, "10": 2, "a": 3, "2": 4},
            "s": '\ud800x\udc00\t\x1f\x7f\u2028/"\\',
        },
    )
    assert encode_records([event]) == (
        b'{"type":"todo/write","seq":0,"time":0,"data":{"n":[3,10000000000000000,'
        b"100000000000000000000,123.456,0.00001,0.000001,1e+21,1e-7,1.5e+300,-2.5,"
        b'9007199254740991],"o":{"2":4,"10":2,"b":1,"a":3},"s":"\\ud800x\\udc00\\t\\u001f'
        + '\x7f\u2028/\\"\\\\'.encode()
        + b'"}}\n'
    )


def test_p2_4_negative_zero_read_from_storage_is_written_0() -> None:
    data = log_bytes(b'{"type":"todo/write","seq":0,"time":-0,"data":{"z":-0.0}}')
    (event,) = scan_jsonl(data).events
    assert encode_records([event]) == b'{"type":"todo/write","seq":0,"time":0,"data":{"z":0}}\n'


def test_e2_2_header_line_key_order_and_delegation_depth_always_written() -> None:
    full = SessionHeader(
        id="s",
        created_at=5,
        cwd="/p",
        parent_session="p",
        seed_length=3,
        origin="subagent",
        delegation_depth=2,
        agent_preset="a",
    )
    assert header_line(full) == (
        b'{"type":"session","version":0,"id":"s","createdAt":5,"cwd":"/p","parentSession":"p",'
        b'"seedLength":3,"origin":"subagent","delegationDepth":2,"agentPreset":"a"}'
    )
    assert header_line(SessionHeader(id="s", created_at=1)) == HEADER
    assert header_line({"version": 0, "id": "s", "createdAt": 1}) == HEADER
    with pytest.raises(SessionHeaderError):
        header_line({"version": 0, "id": "s", "createdAt": -1})


def test_p2_1_write_with_no_events_is_the_header_line_only() -> None:
    header = SessionHeader(id="s", created_at=1)
    assert write_jsonl(header, []) == HEADER + b"\n"
    assert encode_records([]) == b""


def test_p2_1_a_wrong_event_is_named_before_a_wrong_header() -> None:
    # The writer checks the header first now (it writes it first); the error a caller sees
    # when both are wrong is still the event's, as when the header was spelled last.
    bad_header = {"version": 0, "id": "s", "createdAt": -1}
    with pytest.raises(InvalidEnvelope, match="item 0 is a int, not an Event"):
        write_jsonl(bad_header, [5])  # type: ignore[list-item]
    with pytest.raises(SessionHeaderError):
        write_jsonl(bad_header, [])


def test_p2_1_packing_can_be_disabled() -> None:
    chunks = [
        Event(
            "assistant/chunk",
            k,
            k,
            {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": str(k)}},
        )
        for k in range(4)
    ]
    header = SessionHeader(id="s", created_at=1)
    assert write_jsonl(header, chunks).count(b"\n") == 2
    assert write_jsonl(header, chunks, pack_chunks=False).count(b"\n") == 5
    packed = write_jsonl(header, chunks)
    assert packed == HEADER + b"\n" + encode_json_bytes(pack_chunk_rows(chunks)[0]) + b"\n"


def test_e8_the_one_turn_log_round_trips_byte_for_byte() -> None:
    # The example of docs/format/events.md §8, read from the page itself.
    page = Path(__file__).resolve().parents[2] / "docs" / "format" / "events.md"
    text = page.read_text(encoding="utf-8").split("## 8. A complete one-turn log")[1]
    block = text.split("```json\n")[1].split("```")[0]
    data = block.encode("utf-8")
    loaded = load_jsonl(data, now=0)
    assert loaded.closers == () and not loaded.torn
    assert [e.seq for e in loaded.events] == list(range(len(loaded.events)))
    assert write_jsonl(loaded.header, loaded.events, pack_chunks=False) == data
    packed = write_jsonl(loaded.header, scan_jsonl(data).events)
    assert load_jsonl(packed, now=0).events == loaded.events


def test_encode_records_refuses_non_events() -> None:
    with pytest.raises(KernelError):
        encode_records([{"type": "x"}], pack_chunks=False)  # type: ignore[list-item]


# -- docs/format/persistence.md §5: the load pipeline ----------------------------------------------

USER_OK = (
    b'{"type":"user/message","seq":%d,"time":0,"data":{"id":"u","role":"user",'
    b'"content":[],"source":{"kind":"user"}},"surfaceOp":"append"}'
)
USER_BAD = (
    b'{"type":"user/message","seq":%d,"time":0,"data":{"id":"u","role":"assistant",'
    b'"content":[],"source":{"kind":"user"}},"surfaceOp":"append"}'
)
MODE_SET = b'{"type":"mode/set","seq":%d,"time":0,"data":{}}'
UNKNOWN = b'{"type":"x/y","seq":%d,"time":0,"data":null}'
FALLBACK = (
    b'{"type":"request/header","seq":%d,"time":0,"data":{"header":{"config":'
    b'{"provider":"p","model":"m"}},"reason":"fallback"}}'
)
BAD_TURN = b'{"type":"turn/start","seq":%d,"time":0,"data":null}'


def test_p5_identity_mismatch_is_corruption() -> None:
    data = log_bytes(T(0), E(1))
    assert load_jsonl(data, session_id="s", now=0).header.id == "s"
    with pytest.raises(CorruptLog, match="identity"):
        load_jsonl(data, session_id="other", now=0)
    with pytest.raises(CorruptLog):
        load_jsonl(log_bytes(UNKNOWN % 0), session_id="other", now=0)


@pytest.mark.parametrize(
    "legacy", [MODE_SET, FALLBACK, b'{"type":"request/header-delta","seq":%d,"time":0,"data":{}}']
)
def test_p5_legacy_vocabulary_is_a_corruption_family_load_failure(legacy: bytes) -> None:
    data = log_bytes(T(0), USER_BAD % 1, legacy % 2, E(3))
    with pytest.raises(CorruptLog) as info:
        load_jsonl(data, now=0)
    assert isinstance(info.value.__cause__, LegacyFormat)
    assert info.value.index == 2


def test_p5_message_shape_pass_precedes_the_unknown_type_check() -> None:
    with pytest.raises(CorruptLog) as info:
        load_jsonl(log_bytes(UNKNOWN % 0, USER_BAD % 1), now=0)
    assert isinstance(info.value.__cause__, MessageShapeError)
    assert info.value.index == 1


def test_p5_unknown_type_wins_over_later_restore_failures() -> None:
    with pytest.raises(UnknownEventType) as info:
        load_jsonl(log_bytes(BAD_TURN % 0, USER_OK % 1, UNKNOWN % 2), now=0)
    assert info.value.seq == 2 and "x/y" in str(info.value)
    with pytest.raises(UnsupportedFormat):
        load_jsonl(log_bytes(UNKNOWN % 0, header=header_with(cwd="rel")), now=0)
    with pytest.raises(UnknownEventType):
        load_jsonl(log_bytes(b'{"type":5,"seq":0,"time":0,"data":null}'), now=0)


def test_p5_ignorable_and_configured_types_load() -> None:
    ignorable = b'{"type":"x/y","seq":0,"time":0,"data":null,"ignorable":true}'
    assert load_jsonl(log_bytes(ignorable), now=0).events[0].ignorable
    loaded = load_jsonl(log_bytes(UNKNOWN % 0), now=0, known_types={"x/y"})
    assert loaded.events[0].type == "x/y"
    with pytest.raises(UnknownEventType):
        load_jsonl(log_bytes(T(0)), now=0, known_types={"x/y"})


def test_p5_restore_failures_are_corruption_with_their_cause() -> None:
    cases: list[tuple[bytes, type[KernelError]]] = [
        (log_bytes(BAD_TURN % 0), EventShapeError),
        (log_bytes(T(0), E(1)[:-1] + b',"x":1}'), InvalidEnvelope),
        (log_bytes(T(0), b'{"type":"todo/write","seq":1,"time":1e400,"data":{}}'), InvalidEnvelope),
    ]
    for data, cause in cases:
        with pytest.raises(CorruptLog) as info:
            load_jsonl(data, now=0)
        assert isinstance(info.value.__cause__, cause), data


def test_p5_every_turn_end_is_checked_by_normalization_before_restore() -> None:
    """Appendix A.2 reads every `turn/end` at step 4; without it, restore's R12 decides."""
    data = log_bytes(T(0), b'{"type":"turn/end","seq":1,"time":0,"data":{},"x":1}')
    with pytest.raises(CorruptLog, match=r"\(A\.2\)") as info:
        load_jsonl(data, now=0)
    assert info.value.seq == 1
    with pytest.raises(CorruptLog) as info:
        load_jsonl(data, now=0, normalize_legacy=False)
    assert isinstance(info.value.__cause__, InvalidEnvelope)


def test_p5_an_invalid_envelope_after_the_last_turn_end_is_not_a_torn_tail() -> None:
    data = log_bytes(T(0), E(1), b'{"type":"todo/write","seq":2,"time":0,"data":{},"x":1}')
    with pytest.raises(CorruptLog):
        load_jsonl(data, now=0)
    with pytest.raises(CorruptLog):
        scan_jsonl(data)


def test_p5_loaded_view_is_prefix_plus_closers() -> None:
    data = log_bytes(T(0), S(1), b'{"type":"todo/write","seq":2,"time":7,"data":{}}')
    loaded = load_jsonl(data, now=99)
    assert [e.type for e in loaded.events] == [
        "turn/start",
        "step/start",
        "todo/write",
        "step/end",
        "turn/end",
    ]
    assert loaded.closers == loaded.events[3:]
    assert all(e.time == 7 for e in loaded.closers)
    assert all(e.wire_order == CLOSER_ORDER for e in loaded.closers)
    assert not loaded.torn and loaded.dropped_records == 0 and loaded.torn_reason is None
    repaired = data + encode_records(loaded.closers)
    again = load_jsonl(repaired, now=0)
    assert again.closers == () and again.events == loaded.events


def test_p5_seq_floats_are_read_as_integers() -> None:
    data = log_bytes(b'{"type":"turn/start","seq":0.0,"time":3.0,"data":{"turn":1}}', E(1))
    events = load_jsonl(data, now=0).events
    assert type(events[0].seq) is int and type(events[0].time) is int
    assert seqs(scan_jsonl(data)) == [0, 1]


def test_scan_and_load_refuse_non_bytes() -> None:
    with pytest.raises(CorruptLog):
        scan_jsonl("text")  # type: ignore[arg-type]
    assert scan_jsonl(bytearray(log_bytes(T(0)))).events[0].seq == 0


def test_malformed_row_in_the_tail_reports_why() -> None:
    scan = scan_jsonl(log_bytes(T(0), E(1), MALFORMED_ROW.replace(b":1,", b":2,", 1)))
    assert scan.torn and "malformed chunk row" in str(scan.torn_reason)
    assert MalformedChunkRow.__name__  # the family the scanner folds into a torn tail


# -- generated logs: round trips and crash cuts (P37, P38, P39) ---------------------------------

MODEL = {"kind": "model", "provider": "p", "model": "m"}


@st.composite
def stored_logs(draw: st.DrawFn, max_turns: int = 3) -> list[Event]:
    """Small well-formed logs with delta runs (so rows pack), tool calls and extension events."""
    events: list[Event] = []
    clock = [draw(st.integers(0, 10**12))]

    def add(event_type: str, data: Any, **envelope: Any) -> int:
        clock[0] += draw(st.integers(-3, 40))
        events.append(Event(event_type, len(events), clock[0], data, **envelope))
        return len(events) - 1

    for turn in range(1, draw(st.integers(1, max_turns)) + 1):
        add("turn/start", {"turn": turn})
        for step in range(1, draw(st.integers(0, 2)) + 1):
            add("step/start", {"turn": turn, "step": step})
            if draw(st.booleans()):
                add(
                    "user/message",
                    {
                        "id": f"u{len(events)}",
                        "role": "user",
                        "content": [{"type": "text", "text": draw(st.text(max_size=4))}],
                        "source": {"kind": "user"},
                    },
                    surface_op=APPEND,
                )
            for kind in draw(
                st.lists(
                    st.sampled_from(["text-delta", "reasoning-delta", "tool-call-delta"]),
                    max_size=2,
                )
            ):
                for k in range(draw(st.integers(1, 5))):
                    chunk: dict[str, Any] = {"type": kind, "index": 0}
                    if kind == "tool-call-delta":
                        chunk["id"] = "c"
                        if k == 0:
                            chunk["name"] = "ls"
                        chunk["argumentsDelta"] = draw(st.text(max_size=2))
                    else:
                        chunk["text"] = draw(st.text(max_size=3))
                    add("assistant/chunk", {"turn": turn, "step": step, "chunk": chunk})
            calls = [f"c{turn}-{step}-{i}" for i in range(draw(st.integers(0, 2)))]
            add(
                "assistant/message",
                {
                    "turn": turn,
                    "step": step,
                    "message": {
                        "id": f"a{len(events)}",
                        "role": "assistant",
                        "source": MODEL,
                        "content": [
                            {"type": "tool-call", "id": c, "name": "ls", "arguments": "{}"}
                            for c in calls
                        ],
                    },
                },
                surface_op=APPEND,
            )
            for call_id in calls:
                call_seq = add(
                    "tool/call",
                    {
                        "turn": turn,
                        "step": step,
                        "callId": call_id,
                        "name": "ls",
                        "arguments": "{}",
                    },
                )
                add(
                    "tool/result",
                    {
                        "turn": turn,
                        "step": step,
                        "message": {
                            "id": f"r{len(events)}",
                            "role": "user",
                            "source": {"kind": "tool", "callId": call_id},
                            "content": [
                                {"type": "tool-result", "toolCallId": call_id, "content": []}
                            ],
                        },
                    },
                    surface_op=APPEND,
                    source_event_seqs=(call_seq,),
                )
            add("step/end", {"turn": turn, "step": step})
        add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        if draw(st.booleans()):
            add("session/title", {"title": "t"}, ignorable=True)
    return events


def shown(events: Any) -> str:
    return "\n".join(encode_json_bytes(event_to_wire(e)).decode() for e in events)


def record_ends(data: bytes) -> list[tuple[int, int]]:
    """(end offset just past the newline, events held) of every record line."""
    out = []
    pos = data.index(b"\n") + 1
    while (nl := data.find(b"\n", pos)) != -1:
        value = parse_json(data[pos:nl])
        held = len(value["data"]["dt"]) + 1 if value["type"].endswith("-chunks") else 1
        out.append((nl + 1, held))
        pos = nl + 1
    return out


HEADER_RECORD = SessionHeader(id="gen", created_at=1)


@settings(max_examples=80, deadline=None)
@given(stored_logs(), st.booleans())
def test_round_trip_scan_of_write_is_the_log(events: list[Event], pack: bool) -> None:
    data = write_jsonl(HEADER_RECORD, events, pack_chunks=pack)
    scan = scan_jsonl(data)
    assert scan.events == tuple(events), shown(events)
    assert not scan.torn and scan.committed_bytes == len(data)
    loaded = load_jsonl(data, now=0, session_id="gen")
    assert loaded.events == tuple(events) and loaded.closers == ()
    assert write_jsonl(loaded.header, loaded.events, pack_chunks=pack) == data
    assert write_jsonl(HEADER_RECORD, events, pack_chunks=False).count(b"\n") == len(events) + 1


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(stored_logs(max_turns=2), st.booleans())
def test_p37_every_byte_cut_loads_the_complete_prefix_plus_closers(
    events: list[Event], pack: bool
) -> None:
    data = write_jsonl(HEADER_RECORD, events, pack_chunks=pack)
    header_end = data.index(b"\n") + 1
    ends = record_ends(data)
    repaired_for: set[int] = set()
    for cut in range(len(data) + 1):
        piece = data[:cut]
        if cut < header_end:
            with pytest.raises(CorruptLog):
                load_jsonl(piece, now=0)
            continue
        try:
            loaded = load_jsonl(piece, now=0)
        except KernelError as exc:  # pragma: no cover - the failure message shows the log
            raise AssertionError(f"cut at {cut} failed: {exc!r}\n{shown(events)}") from exc
        kept = sum(held for end, held in ends if end <= cut)
        prefix = tuple(events[:kept])
        assert loaded.events[:kept] == prefix, f"cut {cut}\n{shown(events)}"
        assert loaded.closers == interrupted_turn_closers(prefix)
        assert loaded.events[kept:] == loaded.closers
        committed = max([header_end] + [end for end, _ in ends if end <= cut])
        assert loaded.committed_bytes == committed and loaded.torn == (committed < cut)
        if kept in repaired_for:
            continue
        repaired_for.add(kept)
        repaired = piece[:committed] + encode_records(loaded.closers)  # P39: repair once
        again = load_jsonl(repaired, now=0)
        assert again.events == loaded.events and again.closers == () and not again.torn


@settings(max_examples=60, deadline=None)
@given(stored_logs(), st.data())
def test_p38_committed_damage_is_fatal_and_tail_damage_is_torn(
    events: list[Event], data_strategy: st.DataObject
) -> None:
    data = write_jsonl(HEADER_RECORD, events)
    lines = data.split(b"\n")[:-1]
    records = lines[1:]
    victim = data_strategy.draw(st.integers(0, len(records) - 1))
    garbage = data_strategy.draw(st.sampled_from([b"{garbage", b"", b"[]", b"NaN"]))
    damaged = b"\n".join([lines[0], *records[:victim], garbage, *records[victim + 1 :]]) + b"\n"
    later_turn_end = any(b'"type":"turn/end"' in r for r in records[victim + 1 :])
    before = sum(held for _, held in record_ends(data)[:victim])
    if later_turn_end:
        with pytest.raises(CorruptLog):
            load_jsonl(damaged, now=0)
    else:
        loaded = load_jsonl(damaged, now=0)
        assert loaded.events[:before] == tuple(events[:before]) and loaded.torn
        assert loaded.events[before:] == loaded.closers
