"""The SQLite row codec (docs/format/persistence.md §7.3-§7.5): one physical row to and from events.

Pure: the store module only moves `Row` values in and out of the database.
A row is a scalar event or a packed chunk row (`ignorable == 0` is the packed
sentinel). Decoding rejects anything a conforming writer cannot have written;
`scan_rows` decides whether a bad row is a removable torn tail or corruption.
TEXT columns hold any string, lone surrogates included (`encode_text`,
`decode_text`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

import attrs
import msgspec
import orjson
import zstandard

from kernel.admission.provenance import check_cited_tuple
from kernel.errors import CorruptLog, KernelError, MalformedChunkRow, ProvenanceError
from kernel.values.events import TURN_END, Append, Event, Replace
from kernel.values.json import MAX_SAFE_INTEGER, raw, summary
from kernel.wire.chunks import ROW_TAGS, expand_chunk_row
from kernel.wire.codec import event_from_wire
from kernel.wire.jsontext import encode_json_bytes, parse_json

__all__ = (
    "COMPRESS_THRESHOLD",
    "UndecodableText",
    "encode_text",
    "decode_text",
    "ZSTD_LEVEL",
    "MIN_ROW_MEMBERS",
    "MAX_ROW_MEMBERS",
    "MAX_ROW_DATA_BYTES",
    "Row",
    "RowScan",
    "encode_varint",
    "decode_varint",
    "encode_source_seqs",
    "decode_source_seqs",
    "encode_data",
    "decode_data",
    "event_row",
    "chunk_row",
    "encode_rows",
    "decode_row",
    "scan_rows",
    "RowLines",
    "row_lines",
)

COMPRESS_THRESHOLD: Final = 4096
"""`data` text of at least this many UTF-8 bytes is offered to Zstandard."""
ZSTD_LEVEL: Final = 3
MIN_ROW_MEMBERS: Final = 3
MAX_ROW_MEMBERS: Final = 1024
MAX_ROW_DATA_BYTES: Final = 1 << 20
"""A packed row's `data` may hold at most 1 MiB of UTF-8 JSON text (§7.4)."""

_MAX_VARINT_BYTES: Final = 9
_MAX_ZIGZAG: Final = 2 * MAX_SAFE_INTEGER
_FEED: Final = 1024


@attrs.frozen
class Row:
    """One physical `events` row, minus its session id.

    `data` is `str` (JSON text) or `bytes` (Zstandard-compressed JSON text);
    `source_event_seqs` is None or the varint blob; `surface_op` None or JSON
    text; `ignorable` None (required), 1 (`ignorable: true`) or 0 (packed row).
    Values read from a database are typed loosely (`ANY` columns), so the
    decoder checks every field.
    """

    seq: Any
    type: Any
    time: Any
    data: Any
    source_event_seqs: Any = None
    surface_op: Any = None
    ignorable: Any = None


@attrs.frozen
class RowScan:
    """The valid contiguous prefix of a session's rows and the torn tail after it.

    `torn_from` is the seq of the first row not kept (None when every row is
    kept); `dropped_rows` counts the rows from there on and `reason` says why
    the first of them was cut.
    """

    events: tuple[Event, ...]
    torn_from: int | None = None
    dropped_rows: int = 0
    reason: str | None = None


# -- varints ------------------------------------------------------------------------------------


def encode_varint(value: int) -> bytes:
    """Unsigned LEB128.

    >>> encode_varint(300).hex()
    'ac02'
    """
    if type(value) is not int or value < 0:
        raise ProvenanceError(f"a varint encodes a non-negative int, got {summary(value)}")
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def decode_varint(blob: bytes, pos: int) -> tuple[int, int]:
    """Decode one canonical varint at `pos`; return `(value, next_pos)`.

    Rejects (CorruptLog) a truncated varint, a non-canonical one (a continued
    sequence ending in a zero byte) and one longer than nine bytes.
    """
    value = 0
    shift = 0
    start = pos
    while True:
        if pos >= len(blob):
            raise CorruptLog(f"sourceEventSeqs: truncated varint at byte {start}")
        if pos - start >= _MAX_VARINT_BYTES:
            raise CorruptLog(f"sourceEventSeqs: varint at byte {start} is longer than nine bytes")
        byte = blob[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            if byte == 0 and pos - start > 1:
                raise CorruptLog(f"sourceEventSeqs: non-canonical varint at byte {start}")
            return value, pos


def encode_source_seqs(seqs: Sequence[int]) -> bytes:
    """The citation blob: first seq as a varint, then zig-zag varint differences.

    >>> encode_source_seqs([5, 3, 10]).hex()
    '05030e'
    """
    check_cited_tuple(tuple(seqs), "a row's sourceEventSeqs")
    out = bytearray()
    previous: int | None = None
    for seq in seqs:
        if previous is None:
            out += encode_varint(seq)
        else:
            delta = seq - previous
            out += encode_varint(2 * delta if delta >= 0 else -2 * delta - 1)
        previous = seq
    return bytes(out)


def decode_source_seqs(blob: bytes) -> tuple[int, ...]:
    """Decode a citation blob; every rejection of §7.3 raises CorruptLog.

    >>> decode_source_seqs(bytes.fromhex("05030e"))
    (5, 3, 10)
    """
    seqs: list[int] = []
    pos = 0
    while pos < len(blob):
        value, pos = decode_varint(blob, pos)
        if not seqs:
            if value > MAX_SAFE_INTEGER:
                raise CorruptLog(f"sourceEventSeqs: first value {value} exceeds 2**53 - 1")
            seqs.append(value)
            continue
        if value > _MAX_ZIGZAG:
            raise CorruptLog(f"sourceEventSeqs: zig-zag value {value} exceeds 2 * (2**53 - 1)")
        delta = value >> 1 if not value & 1 else -((value + 1) >> 1)
        seq = seqs[-1] + delta
        if not 0 <= seq <= MAX_SAFE_INTEGER:
            raise CorruptLog(f"sourceEventSeqs: decoded seq {seq} is outside [0, 2**53 - 1]")
        seqs.append(seq)
    return tuple(seqs)


# -- TEXT columns -------------------------------------------------------------------------------


@attrs.frozen
class UndecodableText:
    """A TEXT value whose bytes are not UTF-8 (nor a lone surrogate's UTF-8 form).

    `decode_text` hands it out instead of raising, so the row codec can tell
    the damaged row (a torn tail, or corruption) from the rows around it.
    """

    raw: bytes


def encode_text(value: Any) -> Any:
    """A TEXT parameter: a str as is, or its generalized UTF-8 bytes if it holds lone surrogates.

    SQLite TEXT is UTF-8 and the stdlib binding refuses lone surrogates, which
    are legal strings (docs/format/events.md §1.1). Such a string is bound as the bytes
    UTF-8 would give a surrogate code point (WTF-8: `\ud800` is `ED A0 80`),
    and the statement must bind it as `CAST(? AS TEXT)`. Strings are
    canonical (`kernel.store.batch.canonical_text`), so no high-then-low pair
    is ever written this way and the bytes read back as the same string.
    Anything else (None, a valid str) is returned unchanged.
    """
    if type(value) is str and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "surrogatepass")
    return value


def decode_text(raw: bytes) -> str | UndecodableText:
    """The connection's `text_factory`: UTF-8, lone surrogates' UTF-8 forms allowed.

    Bytes that are neither give an `UndecodableText`, which every decoder refuses
    as `CorruptLog` (the stdlib would raise `sqlite3.OperationalError` on the fetch).
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        text = raw.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return UndecodableText(raw)
    # A high-then-low pair in this form was not written by a canonical writer; read it as
    # the character it encodes, as a JSON reader would.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


# -- data column --------------------------------------------------------------------------------

_COMPRESSOR = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
_DECOMPRESSOR = zstandard.ZstdDecompressor()


def encode_data(value: Any) -> str | bytes:
    """The `data` column: JSON text, or its Zstandard frame when that is strictly smaller.

    Only text of at least `COMPRESS_THRESHOLD` UTF-8 bytes is offered to the
    compressor. Lone surrogates are written as `\\udxxx` escapes (SQLite TEXT
    is UTF-8).
    """
    text = encode_json_bytes(value)
    if len(text) >= COMPRESS_THRESHOLD:
        packed = _COMPRESSOR.compress(text)
        if len(packed) < len(text):
            return packed
    return text.decode("utf-8")


def _decompress(blob: bytes, cap: int | None) -> bytes:
    """Exactly one whole Zstandard frame; at most `cap` bytes of output when given."""
    declared = zstandard.frame_content_size(blob)
    if cap is not None and declared > cap:
        raise CorruptLog(f"compressed data declares {declared} bytes, over the {cap}-byte cap")
    stream = _DECOMPRESSOR.decompressobj()
    parts: list[bytes] = []
    size = 0
    for offset in range(0, len(blob), _FEED):
        piece = stream.decompress(blob[offset : offset + _FEED])
        size += len(piece)
        parts.append(piece)
        if cap is not None and size > cap:
            raise CorruptLog(f"compressed data expands beyond the {cap}-byte cap")
        if stream.eof:
            if offset + _FEED < len(blob) or stream.unused_data:
                raise CorruptLog("compressed data has bytes after its frame")
            break
    if not stream.eof:
        raise CorruptLog("compressed data ends inside its frame")
    return b"".join(parts)


def decode_data(value: Any, *, cap: int | None = None) -> Any:
    """Parse a `data` column value (TEXT as is, BLOB decompressed); plain JSON out.

    `cap` bounds the UTF-8 size of the JSON text (checked before parsing).
    """
    try:
        if type(value) is str:
            if cap is not None and len(value) > cap // 4 and len(value.encode("utf-8")) > cap:
                raise CorruptLog(f"data text is over the {cap}-byte cap")
            return parse_json(value)
        if type(value) is bytes:
            text = _decompress(value, cap)
            return parse_json(text.decode("utf-8"))
    except CorruptLog:
        raise
    except (ValueError, UnicodeError, zstandard.ZstdError) as exc:
        raise CorruptLog(f"undecodable data column: {exc}") from exc
    if type(value) is UndecodableText:
        raise CorruptLog("data column holds TEXT that is not UTF-8")
    raise CorruptLog(f"data column holds a {type(value).__name__}, not TEXT or BLOB")


# -- encoding rows ------------------------------------------------------------------------------


def event_row(event: Event) -> Row:
    """The scalar row of one event."""
    op = event.surface_op
    surface_op: str | None = None
    if type(op) is Append:  # APPEND, or a copy of it that pickling made
        surface_op = '"append"'
    elif isinstance(op, Replace):
        surface_op = encode_json_bytes({"op": "replace", "start": op.start, "end": op.end}).decode()
    sources = event.source_event_seqs
    return Row(
        seq=event.seq,
        type=event.type,
        time=event.time,
        data=encode_data(event.data),
        source_event_seqs=None if sources is None else encode_source_seqs(sources),
        surface_op=surface_op,
        ignorable=1 if event.ignorable else None,
    )


def chunk_row(record: Any) -> Row:
    """The packed row of one chunk-row record `{type, seq0, time0, data}`."""
    rec = raw(record)
    return Row(
        seq=rec["seq0"],
        type=rec["type"],
        time=rec["time0"],
        data=encode_data(rec["data"]),
        ignorable=0,
    )


def encode_rows(records: Iterable[Any]) -> tuple[Row, ...]:
    """Rows of a packed batch: `Event`s become scalar rows, chunk-row records packed rows."""
    return tuple(event_row(r) if isinstance(r, Event) else chunk_row(r) for r in records)


# -- decoding rows ------------------------------------------------------------------------------


def _decode_packed(row: Row, where: str) -> tuple[Event, ...]:
    if row.type not in ROW_TAGS:
        raise MalformedChunkRow(f"{where}: packed-row sentinel on type {summary(row.type)}")
    if row.source_event_seqs is not None or row.surface_op is not None:
        raise MalformedChunkRow(f"{where}: a packed row carries surface metadata")
    data = decode_data(row.data, cap=MAX_ROW_DATA_BYTES)
    record = {"type": row.type, "seq0": row.seq, "time0": row.time, "data": data}
    events = expand_chunk_row(record, where)
    if not MIN_ROW_MEMBERS <= len(events) <= MAX_ROW_MEMBERS:
        raise MalformedChunkRow(
            f"{where}: a packed row holds {len(events)} members, outside "
            f"{MIN_ROW_MEMBERS}-{MAX_ROW_MEMBERS}"
        )
    return events


def _decode_scalar(row: Row, where: str) -> Event:
    if row.type in ROW_TAGS:
        raise MalformedChunkRow(f"{where}: chunk-row tag {summary(row.type)} on a scalar row")
    wire: dict[str, Any] = {
        "type": row.type,
        "seq": row.seq,
        "time": row.time,
        "data": decode_data(row.data),
    }
    if row.source_event_seqs is not None:
        if type(row.source_event_seqs) is not bytes:
            raise CorruptLog(f"{where}: sourceEventSeqs column is not a BLOB")
        wire["sourceEventSeqs"] = list(decode_source_seqs(row.source_event_seqs))
    if row.surface_op is not None:
        if type(row.surface_op) is not str:
            raise CorruptLog(f"{where}: surfaceOp column is not TEXT")
        wire["surfaceOp"] = parse_json(row.surface_op)
    if row.ignorable == 1:
        wire["ignorable"] = True
    return event_from_wire(wire, where, lossless=False)


def decode_row(row: Row) -> tuple[Event, ...]:
    """The events one physical row holds; raises a KernelError on any malformed row."""
    seq = row.seq
    where = f"row at seq {seq if type(seq) is int else summary(seq)}"
    if type(row.type) is not str:
        raise CorruptLog(f"{where}: type column holds {summary(row.type)}, not TEXT")
    if row.ignorable is not None and (
        type(row.ignorable) is not int or row.ignorable not in (0, 1)
    ):
        raise CorruptLog(f"{where}: ignorable column holds {summary(row.ignorable)}")
    try:
        if row.ignorable == 0:
            return _decode_packed(row, where)
        return (_decode_scalar(row, where),)
    except KernelError:
        raise
    except (ValueError, UnicodeError, zstandard.ZstdError) as exc:
        raise CorruptLog(f"{where}: undecodable row: {exc}") from exc


def _has_turn_end(events: tuple[Event, ...]) -> bool:
    return any(e.type == TURN_END for e in events)


def scan_rows(rows: Sequence[Row], base: int = 0) -> RowScan:
    """The valid prefix of rows read `ORDER BY seq` (docs/format/persistence.md §7.5).

    A row that fails to decode, or whose events break contiguity, starts a torn
    tail when no later (or the same) row decodes to a `turn/end`; otherwise it
    sits in committed history and the session is corrupt.
    """
    decoded: list[tuple[Event, ...] | KernelError] = []
    last_turn_end = -1
    for i, row in enumerate(rows):
        try:
            events = decode_row(row)
        except KernelError as exc:
            decoded.append(exc)
            continue
        decoded.append(events)
        if _has_turn_end(events):
            last_turn_end = i
    preserved: list[Event] = []
    expected = base
    for i, (row, result) in enumerate(zip(rows, decoded, strict=True)):
        if isinstance(result, KernelError):
            if i <= last_turn_end:
                raise CorruptLog(
                    f"invalid committed physical row at seq {summary(row.seq)}: {result}",
                    seq=_seq(row),
                ) from result
            return RowScan(tuple(preserved), _seq(row), len(rows) - i, str(result))
        if any(e.seq != expected + k for k, e in enumerate(result)):
            if i <= last_turn_end:
                raise CorruptLog(
                    f"seq gap in committed rows at seq {summary(row.seq)} (expected {expected})",
                    seq=_seq(row),
                )
            reason = f"seq gap at row seq {summary(row.seq)} (expected {expected})"
            return RowScan(tuple(preserved), _seq(row), len(rows) - i, reason)
        preserved.extend(result)
        expected += len(result)
    return RowScan(tuple(preserved))


def _seq(row: Row) -> int:
    if type(row.seq) is not int:
        raise CorruptLog(f"row seq {summary(row.seq)} is not an integer")
    return int(row.seq)


# -- rows as stored lines (the typed load path) ------------------------------------------------

_ONE_VALUE: Final = msgspec.json.Decoder(msgspec.Raw)
"""Checks that a text is exactly one JSON value (a `Raw` decode skips it, in C)."""


@attrs.frozen
class RowLines:
    """Rows spelled as the JSONL lines they stand for (`row_lines`).

    `lines` holds one line per row, each ending in a newline: a scalar row as
    an event line, a packed row as a chunk-row line. `packed` lists, for each
    packed row, its position among the rows; `starts` every row's seq.
    """

    lines: bytes
    starts: tuple[int, ...]
    packed: tuple[int, ...]

    def member_counts_fit(self, total: int) -> bool:
        """Whether every packed row holds `MIN_ROW_MEMBERS`-`MAX_ROW_MEMBERS` events, for rows
        whose events were found contiguous and `total` in all."""
        starts = self.starts
        last = len(starts) - 1
        for i in self.packed:
            members = (starts[i + 1] if i < last else total) - starts[i]
            if not MIN_ROW_MEMBERS <= members <= MAX_ROW_MEMBERS:
                return False
        return True


def _one_value(text: Any, cap: int | None) -> bytes | None:
    """The UTF-8 JSON text of a `data` or `surfaceOp` column when it is exactly one JSON value."""
    try:
        if type(text) is str:
            spelled = text.encode("utf-8")  # a lone surrogate refuses: `decode_row` decides
            if cap is not None and len(spelled) > cap:
                return None
        elif type(text) is bytes:
            spelled = _decompress(text, cap)
        else:
            return None
        _ONE_VALUE.decode(spelled)
    except (KernelError, UnicodeError, zstandard.ZstdError, msgspec.DecodeError, RecursionError):
        return None  # a value nested too deep for the C decoder included
    return spelled


def row_lines(rows: Sequence[Sequence[Any]]) -> RowLines | None:
    """Rows `(seq, type, time, data, source_event_seqs, surface_op, ignorable)` as lines, or
    None when a row is not plainly well formed (then `decode_row` decides what it is).

    A line holds each column's value spelled as JSON, members in the order
    `decode_row` gives the wire object, so reading the line gives the event
    `decode_row` gives. The `data` and `surfaceOp` texts are spliced in only
    when each is exactly one JSON value.
    """
    parts: list[bytes] = []
    spelled_types: dict[str, bytes] = {}
    starts: list[int] = []
    packed: list[int] = []
    for position, (seq, event_type, time, data, sources, surface_op, ignorable) in enumerate(rows):
        if type(seq) is not int or type(time) is not int or type(event_type) is not str:
            return None
        spelled_type = spelled_types.get(event_type)
        if spelled_type is None:
            if not event_type.isascii():
                return None
            spelled_type = spelled_types[event_type] = orjson.dumps(event_type)
        starts.append(seq)
        if ignorable == 0 and type(ignorable) is int:
            if event_type not in ROW_TAGS or sources is not None or surface_op is not None:
                return None
            text = _one_value(data, MAX_ROW_DATA_BYTES)
            if text is None:
                return None
            packed.append(position)
            parts += (b'{"type":', spelled_type, b',"seq0":%d,"time0":%d,"data":' % (seq, time))
            parts += (text, b"}\n")
            continue
        if event_type in ROW_TAGS or not (ignorable is None or ignorable == 1):
            return None
        text = _one_value(data, None)
        if text is None:
            return None
        parts += (b'{"type":', spelled_type, b',"seq":%d,"time":%d,"data":' % (seq, time), text)
        if sources is not None:
            if type(sources) is not bytes:
                return None
            try:
                # Joined at once: orjson's own text would hold about 4 KB while kept
                # (docs/rfc/implemented/architecture/2026-12-06-the-writer-keeps-no-record-text.md).
                parts.append(b',"sourceEventSeqs":' + orjson.dumps(decode_source_seqs(sources)))
            except CorruptLog:
                return None
        if surface_op is not None:
            op = _one_value(surface_op, None) if type(surface_op) is str else None
            if op is None:
                return None
            parts += (b',"surfaceOp":', op)
        if ignorable is not None:
            if type(ignorable) is not int:
                return None
            parts.append(b',"ignorable":true')
        parts.append(b"}\n")
    return RowLines(b"".join(parts), tuple(starts), tuple(packed))
