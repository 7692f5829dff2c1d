"""The pure SQLite row codec (docs/format/persistence.md §7.3-§7.5): varints, columns, rows, row
scan."""

from __future__ import annotations

import random

import attrs
import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from kernel.errors import CorruptLog, KernelError, MalformedChunkRow
from kernel.storage.sqlite_rows import (
    COMPRESS_THRESHOLD,
    MAX_ROW_DATA_BYTES,
    MAX_ROW_MEMBERS,
    Row,
    UndecodableText,
    decode_data,
    decode_row,
    decode_source_seqs,
    decode_text,
    decode_varint,
    encode_data,
    encode_rows,
    encode_source_seqs,
    encode_text,
    encode_varint,
    event_row,
    row_lines,
    scan_rows,
)
from kernel.storage.typed.lines import plan_events, scan_row_lines
from kernel.values.events import APPEND, DEFAULT_KNOWN_TYPES, Event, Replace
from kernel.values.json import MAX_SAFE_INTEGER, thaw
from kernel.wire.chunks import pack_chunk_rows
from kernel.wire.codec import event_to_wire

# -- varints (§7.3) -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "spelled"),
    [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"), (16384, "808001")],
)
def test_varint_is_unsigned_leb128(value: int, spelled: str) -> None:
    assert encode_varint(value).hex() == spelled
    assert decode_varint(bytes.fromhex(spelled), 0) == (value, len(spelled) // 2)


@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_varint_round_trip(value: int) -> None:
    blob = encode_varint(value)
    assert len(blob) <= 9
    assert decode_varint(blob, 0) == (value, len(blob))


def test_source_seqs_zigzag_example() -> None:
    # 5, then +(-2) -> zig-zag 3, then +7 -> zig-zag 14
    assert encode_source_seqs([5, 3, 10]) == bytes([5, 3, 14])
    assert decode_source_seqs(bytes([5, 3, 14])) == (5, 3, 10)


def test_source_seqs_empty_list_is_empty_blob() -> None:
    assert encode_source_seqs([]) == b""
    assert decode_source_seqs(b"") == ()


@given(st.lists(st.integers(min_value=0, max_value=MAX_SAFE_INTEGER), max_size=20))
def test_source_seqs_round_trip(seqs: list[int]) -> None:
    assert decode_source_seqs(encode_source_seqs(seqs)) == tuple(seqs)


def test_source_seqs_extremes_round_trip() -> None:
    seqs = [MAX_SAFE_INTEGER, 0, MAX_SAFE_INTEGER, MAX_SAFE_INTEGER]
    assert decode_source_seqs(encode_source_seqs(seqs)) == tuple(seqs)


_REJECTIONS = {
    "truncated varint": bytes([0x80]),
    "truncated later varint": bytes([0x05, 0xFF]),
    "non-canonical varint": bytes([0x80, 0x00]),
    "non-canonical long varint": bytes([0x85, 0x80, 0x00]),
    "varint longer than nine bytes": bytes([0x80] * 9 + [0x01]),
    "first value above 2**53 - 1": encode_varint(2**53),
    "nine-byte first value": bytes([0x80] * 8 + [0x01]),
    "zig-zag above 2 * (2**53 - 1)": bytes([0x00]) + encode_varint(2 * MAX_SAFE_INTEGER + 1),
    "decoded seq below 0": bytes([0x00, 0x01]),
    "decoded seq above 2**53 - 1": encode_varint(MAX_SAFE_INTEGER) + bytes([0x02]),
}


@pytest.mark.parametrize("blob", list(_REJECTIONS.values()), ids=list(_REJECTIONS))
def test_source_seqs_decode_rejections(blob: bytes) -> None:
    with pytest.raises(CorruptLog):
        decode_source_seqs(blob)


def test_source_seqs_rejection_messages_name_the_rule() -> None:
    def message(blob: bytes) -> str:
        with pytest.raises(CorruptLog) as info:
            decode_source_seqs(blob)
        return str(info.value)

    assert "truncated" in message(_REJECTIONS["truncated varint"])
    assert "non-canonical" in message(_REJECTIONS["non-canonical varint"])
    assert "longer than nine" in message(_REJECTIONS["varint longer than nine bytes"])
    assert "first value" in message(_REJECTIONS["first value above 2**53 - 1"])
    assert "zig-zag" in message(_REJECTIONS["zig-zag above 2 * (2**53 - 1)"])
    assert "outside" in message(_REJECTIONS["decoded seq below 0"])
    assert "outside" in message(_REJECTIONS["decoded seq above 2**53 - 1"])


def test_zero_byte_alone_is_canonical() -> None:
    assert decode_source_seqs(b"\x00\x00") == (0, 0)


def test_largest_zigzag_is_accepted_when_the_seq_stays_in_range() -> None:
    blob = encode_varint(MAX_SAFE_INTEGER) + encode_varint(2 * MAX_SAFE_INTEGER - 1)
    assert decode_source_seqs(blob) == (MAX_SAFE_INTEGER, 0)


# -- the data column (§7.3) ---------------------------------------------------------------------


def test_small_data_is_text() -> None:
    assert encode_data({"a": [1, 2.5, "é"]}) == '{"a":[1,2.5,"é"]}'


def test_data_below_threshold_is_never_compressed() -> None:
    value = "x" * (COMPRESS_THRESHOLD - 3)  # JSON text is exactly 4095 bytes
    encoded = encode_data(value)
    assert isinstance(encoded, str)
    assert len(encoded.encode()) == COMPRESS_THRESHOLD - 1


def test_data_at_threshold_compresses_when_smaller() -> None:
    value = "x" * (COMPRESS_THRESHOLD - 2)  # exactly 4096 bytes
    encoded = encode_data(value)
    assert isinstance(encoded, bytes)
    assert len(encoded) < COMPRESS_THRESHOLD
    assert decode_data(encoded) == value


class _FixedSizeCompressor:
    """Stands in for Zstandard: its output is exactly `ratio` times the input length."""

    def __init__(self, ratio: float) -> None:
        self.ratio = ratio

    def compress(self, data: bytes) -> bytes:
        return b"\0" * int(len(data) * self.ratio)


@pytest.mark.parametrize(("ratio", "stored"), [(1.0, str), (1.5, str), (0.999, bytes)])
def test_compressed_blob_only_when_strictly_smaller(
    monkeypatch: pytest.MonkeyPatch, ratio: float, stored: type
) -> None:
    monkeypatch.setattr("kernel.storage.sqlite_rows._COMPRESSOR", _FixedSizeCompressor(ratio))
    assert type(encode_data("w" * 5000)) is stored


def test_lone_surrogates_survive_the_text_column() -> None:
    value = {"t": "a\ud800b\udc00 🙂"}
    encoded = encode_data(value)
    assert isinstance(encoded, str)
    assert "\\ud800" in encoded
    encoded.encode("utf-8")  # valid UTF-8 for SQLite TEXT
    assert decode_data(encoded) == value


@pytest.mark.parametrize(
    "text", ["plain", "naïve 🙂", "\ud800", "a\udc00b", "\ude42\ud83d", "\ud83d"]
)
def test_text_columns_hold_every_canonical_string(text: str) -> None:
    # UTF-8 as is; a lone surrogate as its generalized UTF-8 (WTF-8) bytes.
    bound = encode_text(text)
    assert bound is text or bound == text.encode("utf-8", "surrogatepass")
    raw = bound if isinstance(bound, bytes) else bound.encode("utf-8")
    assert decode_text(raw) == text
    assert encode_text(None) is None


def test_text_that_is_not_utf8_is_undecodable_and_rows_refuse_it() -> None:
    assert decode_text(b"\xed\xa0\xbd\xed\xb9\x82") == "\U0001f642"  # a pair: joined
    bad = decode_text(b'{"\xff"}')
    assert bad == UndecodableText(b'{"\xff"}')
    with pytest.raises(CorruptLog, match="not UTF-8"):
        decode_data(bad)
    with pytest.raises(CorruptLog, match="type column"):
        decode_row(Row(seq=0, type=bad, time=0, data="{}"))


@pytest.mark.parametrize(
    "bad",
    [
        zstandard.ZstdCompressor().compress(b'{"a":1}') + b"junk",
        zstandard.ZstdCompressor().compress(b'{"a":1}' * 100)[:-3],
        zstandard.ZstdCompressor().compress(b'"\xff\xfe"'),
        zstandard.ZstdCompressor().compress(b"{not json"),
        b"not a frame at all",
        42,
        1.5,
    ],
    ids=["trailing", "truncated", "bad-utf8", "bad-json", "no-frame", "int", "float"],
)
def test_decode_data_rejections(bad: object) -> None:
    with pytest.raises(KernelError):
        decode_data(bad)


def test_decode_data_refuses_nan_tokens() -> None:
    with pytest.raises(ValueError):
        decode_data('{"a":NaN}')


def test_decode_data_cap_is_checked_before_parsing() -> None:
    big = "[" + ",".join(["1"] * 600_000) + "]"  # 1.2 MB of JSON text
    with pytest.raises(CorruptLog, match="cap"):
        decode_data(big, cap=MAX_ROW_DATA_BYTES)
    blob = zstandard.ZstdCompressor().compress(big.encode())
    with pytest.raises(CorruptLog, match="cap"):
        decode_data(blob, cap=MAX_ROW_DATA_BYTES)
    unsized = zstandard.ZstdCompressor(write_content_size=False).compress(big.encode())
    with pytest.raises(CorruptLog, match="cap"):
        decode_data(unsized, cap=MAX_ROW_DATA_BYTES)
    assert len(decode_data(blob)) == 600_000


# -- rows ---------------------------------------------------------------------------------------


def _chunk(seq: int, text: str, *, time: int | None = None) -> Event:
    data = {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": text}}
    return Event("assistant/chunk", seq, seq * 10 if time is None else time, data)


def _turn_start(seq: int) -> Event:
    return Event("turn/start", seq, seq * 10, {"turn": 1})


def _turn_end(seq: int) -> Event:
    return Event("turn/end", seq, seq * 10, {"turn": 1, "reason": {"kind": "completed"}})


def _message(seq: int, op: object, sources: tuple[int, ...] | None) -> Event:
    message = {
        "id": f"m{seq}",
        "role": "user",
        "content": [{"type": "text", "text": "hi"}],
        "source": {"kind": "user"},
    }
    return Event("user/message", seq, 5, message, surface_op=op, source_event_seqs=sources)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "event",
    [
        _turn_start(0),
        _message(3, APPEND, None),
        _message(3, APPEND, (0, 2, 1)),
        _message(4, Replace(1, 2), (1, 2)),
        Event("x/ext", 7, -5, None, ignorable=True),
        Event("x/ext", 7, 5, [1, {"10": 1, "2": 2}]),
        Event("assistant/message", 9, 1, {"big": "y" * 10_000}, surface_op=APPEND,
              source_event_seqs=()),
    ],
    ids=["plain", "append", "cites", "replace", "ignorable", "array-data", "compressed"],
)  # fmt: skip
def test_scalar_row_round_trip(event: Event) -> None:
    row = event_row(event)
    assert row.ignorable in (None, 1)
    assert decode_row(row) == (event,)


def test_scalar_row_columns() -> None:
    row = event_row(_message(4, Replace(1, 2), (1, 2)))
    assert row.surface_op == '{"op":"replace","start":1,"end":2}'
    assert row.source_event_seqs == bytes([1, 2])
    assert row.ignorable is None
    assert event_row(_message(3, APPEND, None)).surface_op == '"append"'
    assert event_row(_message(3, APPEND, None)).source_event_seqs is None
    assert event_row(Event("x/ext", 7, 5, None, ignorable=True)).ignorable == 1
    assert isinstance(event_row(Event("x", 1, 1, {"big": "y" * 10_000})).data, bytes)


def test_packed_row_round_trip_and_sentinel() -> None:
    events = [_chunk(s, f"t{s}") for s in range(5)]
    rows = encode_rows(pack_chunk_rows(events))
    assert len(rows) == 1
    (row,) = rows
    assert (row.type, row.seq, row.time, row.ignorable) == ("text-chunks", 0, 0, 0)
    assert row.source_event_seqs is None and row.surface_op is None
    assert decode_row(row) == tuple(events)


def test_packing_bounds_members_to_1024() -> None:
    events = [_chunk(s, "ab") for s in range(2500)]
    records = pack_chunk_rows(
        events, max_members=MAX_ROW_MEMBERS, max_data_bytes=MAX_ROW_DATA_BYTES
    )
    rows = encode_rows(records)
    sizes = [len(decode_row(r)) for r in rows]
    assert sizes == [1024, 1024, 452]
    assert [e for r in rows for e in decode_row(r)] == events


def test_packing_bounds_data_to_one_mebibyte() -> None:
    text = "z" * 300_000
    events = [_chunk(s, text) for s in range(10)]
    records = pack_chunk_rows(
        events, max_members=MAX_ROW_MEMBERS, max_data_bytes=MAX_ROW_DATA_BYTES
    )
    rows = encode_rows(records)
    for row in rows:
        if row.ignorable == 0:
            assert len(decode_data(row.data)["texts"]) >= 3
            plain = row.data if isinstance(row.data, str) else zstandard.decompress(row.data)
            assert len(plain if isinstance(plain, bytes) else plain.encode()) <= MAX_ROW_DATA_BYTES
    assert [e for r in rows for e in decode_row(r)] == events


def _packed(**changes: object) -> Row:
    row = encode_rows(pack_chunk_rows([_chunk(s, "t") for s in range(4)]))[0]
    fields = {
        "seq": row.seq,
        "type": row.type,
        "time": row.time,
        "data": row.data,
        "source_event_seqs": row.source_event_seqs,
        "surface_op": row.surface_op,
        "ignorable": row.ignorable,
    }
    fields.update(changes)
    return Row(**fields)


_MALFORMED = [
    (_packed(type="assistant/chunk"), MalformedChunkRow),
    (_packed(surface_op='"append"'), MalformedChunkRow),
    (_packed(source_event_seqs=b""), MalformedChunkRow),
    (_packed(data='{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a","b"]}'), MalformedChunkRow),
    (_packed(data='{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a"]}'), MalformedChunkRow),
    (_packed(data='{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"]}'), MalformedChunkRow),
    (
        _packed(data='{"turn":1,"step":1,"index":0,"dt":[1,1],"texts":["a","b",3]}'),
        MalformedChunkRow,
    ),
    (_packed(data="[1]"), MalformedChunkRow),
    (_packed(data="{oops"), CorruptLog),
    (_packed(ignorable=2), CorruptLog),
    (_packed(ignorable=True), CorruptLog),
    (Row(0, "text-chunks", 0, "{}", None, None, None), MalformedChunkRow),
    (Row(0, "turn/start", 0, '{"turn":1}', 7, None, None), CorruptLog),
    (Row(0, "turn/start", 0, '{"turn":1}', b"\x80", None, None), CorruptLog),
    (Row(0, "user/message", 0, "{}", None, "{bad", None), CorruptLog),
    (Row(0, "user/message", 0, "{}", None, '"prepend"', None), KernelError),
    (Row(0, "", 0, "{}", None, None, None), KernelError),
]
_MALFORMED_IDS = [
        "sentinel-on-event-type", "packed-surface-op", "packed-sources", "two-members",
        "one-member", "one-member-no-dt", "non-string-member", "data-not-object", "bad-json",
        "ignorable-2", "ignorable-bool", "tag-on-scalar-row", "sources-not-blob",
        "sources-truncated", "surface-op-bad-json", "surface-op-unknown", "empty-type",
]  # fmt: skip


@pytest.mark.parametrize(("row", "error"), _MALFORMED, ids=_MALFORMED_IDS)
def test_malformed_rows(row: Row, error: type[Exception]) -> None:
    with pytest.raises(error):
        decode_row(row)


def test_packed_row_member_count_above_1024_is_malformed() -> None:
    records = pack_chunk_rows([_chunk(s, "a") for s in range(1025)])
    (row,) = encode_rows(records)
    with pytest.raises(MalformedChunkRow, match="1025"):
        decode_row(row)


def test_packed_row_data_over_one_mebibyte_is_malformed() -> None:
    records = pack_chunk_rows([_chunk(s, "q" * 400_000) for s in range(3)])
    (row,) = encode_rows(records)
    with pytest.raises(CorruptLog, match="cap"):
        decode_row(row)


# -- scan_rows (§7.5) ---------------------------------------------------------------------------


def _garbage(seq: int) -> Row:
    return Row(seq, "turn/start", 0, "{garbage", None, None, None)


def test_scan_clean_rows() -> None:
    rows = [event_row(_turn_start(0)), event_row(_turn_end(1))]
    scan = scan_rows(rows)
    assert scan.events == (_turn_start(0), _turn_end(1))
    assert scan.torn_from is None and scan.dropped_rows == 0


def test_scan_damage_after_last_turn_end_is_a_torn_tail() -> None:
    rows = [
        event_row(_turn_start(0)),
        event_row(_turn_end(1)),
        _garbage(2),
        event_row(_chunk(3, "x")),
    ]
    scan = scan_rows(rows)
    assert scan.events == (_turn_start(0), _turn_end(1))
    assert (scan.torn_from, scan.dropped_rows) == (2, 2)
    assert scan.reason is not None


def test_scan_damage_before_a_turn_end_is_corruption() -> None:
    rows = [event_row(_turn_start(0)), _garbage(1), event_row(_turn_end(2))]
    with pytest.raises(CorruptLog, match="committed"):
        scan_rows(rows)


def test_scan_gap_before_a_turn_end_is_corruption() -> None:
    rows = [event_row(_turn_start(0)), event_row(_turn_end(2))]
    with pytest.raises(CorruptLog):
        scan_rows(rows)


def test_scan_packed_row_with_a_gap_is_dropped_whole() -> None:
    packed = encode_rows(pack_chunk_rows([_chunk(s, "t") for s in range(3, 7)]))
    rows = [event_row(_turn_start(0)), event_row(_turn_end(1)), *packed]
    scan = scan_rows(rows)
    assert len(scan.events) == 2 and scan.torn_from == 3


def test_scan_open_turn_tail_without_turn_end() -> None:
    rows = [event_row(_turn_start(0)), event_row(_chunk(1, "a")), _garbage(2)]
    scan = scan_rows(rows)
    assert [e.seq for e in scan.events] == [0, 1] and scan.torn_from == 2


def test_scan_with_base() -> None:
    rows = [event_row(_chunk(5, "a")), event_row(_chunk(6, "b"))]
    assert len(scan_rows(rows, base=5).events) == 2
    assert scan_rows(rows).torn_from == 5


@given(st.randoms(use_true_random=False), st.integers(min_value=0, max_value=30))
def test_scan_of_encoded_rows_returns_the_events(rng: random.Random, extra: int) -> None:
    events: list[Event] = [_turn_start(0)]
    for _ in range(extra):
        seq = len(events)
        events.append(
            _chunk(seq, rng.choice(["a", "b", "c"]))
            if rng.random() < 0.7
            else Event("x/ext", seq, rng.randint(-5, 5), {"n": rng.random()}, ignorable=True)
        )
    events.append(_turn_end(len(events)))
    rows = encode_rows(pack_chunk_rows(events, max_members=4, max_data_bytes=200))
    assert scan_rows(rows).events == tuple(events)


# -- rows as lines (the typed load path of a SQLite session) ------------------------------------

_RECORD = {"version": 0, "id": "s-1", "createdAt": 1}


def _columns(row: Row) -> tuple[object, ...]:
    return attrs.astuple(row, recurse=False)


def _typed(rows: list[Row]) -> tuple[Event, ...] | None:
    """The stored events the typed path plans for `rows`, or None when it leaves them."""
    lines = row_lines([_columns(r) for r in rows])
    if lines is None:
        return None
    events = scan_row_lines(lines)
    if events is None:
        return None
    planned = plan_events(_RECORD, events, session_id=None, known_types=DEFAULT_KNOWN_TYPES)
    if planned is None:
        return None
    _, events, closers = planned
    return events[: len(events) - len(closers)]


_GOOD_ROWS = [
    [event_row(_turn_start(0)), event_row(_turn_end(1))],
    [event_row(_turn_start(0)), event_row(_message(1, APPEND, (0,))), event_row(_turn_end(2))],
    [
        event_row(_turn_start(0)),
        *encode_rows(pack_chunk_rows([_chunk(s, "t") for s in range(1, 6)])),
    ],
    [event_row(Event("x/ext", 0, -5, None, ignorable=True))],
    [event_row(Event("x/ext", 0, 5, [1, {"10": 1, "2": 2}], ignorable=True))],
    [event_row(Event("x/ext", 0, 1, {"big": "y" * 10_000, "é": "ü"}, ignorable=True))],
]


@pytest.mark.parametrize(
    "rows", _GOOD_ROWS, ids=["plain", "cites", "packed", "null", "array", "zstd"]
)
def test_rows_read_as_lines_give_the_events_the_row_codec_gives(rows: list[Row]) -> None:
    typed = _typed(rows)
    exact = scan_rows(rows).events
    assert typed == exact
    assert [list(event_to_wire(e)) for e in typed] == [list(event_to_wire(e)) for e in exact]
    assert [thaw(e.data) for e in typed] == [thaw(e.data) for e in exact]


_ODD_ROWS = [
    *(row for row, _ in _MALFORMED),
    Row(0, "turn/start", 0, '{"turn":1,"note":"\ud800"}', None, None, None),
    Row(0, "turn/start", 0, '{"turn":1}', UndecodableText(b"\xff"), None, None),
    Row(0, "turn/start", 1.0, '{"turn":1}', None, None, None),
    Row(True, "turn/start", 1, '{"turn":1}', None, None, None),
    Row(0, "turn/start", 1, '{"turn":1}', None, None, 1.0),
    Row(0, "turn/st\u00e4rt", 1, '{"turn":1}', None, None, None),
    Row(0, "user/message", 1, "{}", None, '"append" "append"', None),
]


@pytest.mark.parametrize("row", _ODD_ROWS)
def test_rows_read_as_lines_never_accept_what_the_row_codec_would_not_give(row: Row) -> None:
    # The typed path may leave any row to the row codec; what it accepts, the codec gives.
    rows = [row, event_row(_turn_end(1)), event_row(_turn_end(2))]  # committed: no torn tail
    typed = _typed(rows)
    try:
        exact = scan_rows(rows).events
    except KernelError:
        assert typed is None
        return
    assert typed is None or typed == exact


@pytest.mark.parametrize(
    "data",
    ['{"id":"m"},"surfaceOp":"append"', '{"turn":1} {"turn":2}', '{"turn":1}]', ""],
    ids=["adds-a-member", "two-values", "stray-bracket", "empty"],
)
def test_a_data_text_that_is_not_one_json_value_is_never_spliced(data: str) -> None:
    # Spliced into a line as it is, it could add members the row does not have.
    assert row_lines([(0, "turn/start", 0, data, None, None, None)]) is None
    assert row_lines([(0, "turn/start", 0, '{"turn":1}', None, data, None)]) is None


def test_packed_rows_outside_the_member_bounds_are_left_to_the_row_codec() -> None:
    over = encode_rows(pack_chunk_rows([_chunk(s, "a") for s in range(1025)]))
    assert _typed(list(over)) is None
    two = Row(
        0,
        "text-chunks",
        0,
        '{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a","b"]}',
        None,
        None,
        0,
    )
    assert _typed([two]) is None
    exactly = encode_rows(pack_chunk_rows([_chunk(s, "a") for s in range(1024)]))
    assert _typed(list(exactly)) == scan_rows(list(exactly)).events
