"""Zstandard-framed JSONL (persistence.md §8): a structural frame scan, then the JSONL scanner.

Frames are located by parsing their headers and block headers, never by
decompressing. Complete frames are checksummed, so any damage inside them is
corruption. A frame the data seems to end inside is *torn* (repair truncates
there) only if it is the last thing in the file: a damaged size field in a
committed frame looks just like a torn tail, so before truncating the scan
checks that no complete, checksum-verified frame follows it (see
docs/rfc/implemented/bug-fix/2026-12-01-zstd-damage-is-corruption.md).
The `zstandard` package only decompresses and compresses.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any, Final

import zstandard

from kernel.durable import (
    Loaded,
    RawScan,
    RecordScanner,
    Scan,
    as_stored_bytes,
    encode_records,
    header_line,
    load_scanned,
    parse_header_line,
    scan_result,
)
from kernel.errors import CorruptLog
from kernel.events import DEFAULT_KNOWN_TYPES, Event, SessionHeader
from kernel.records import scan_records

__all__ = (
    "ZSTD_MAGIC",
    "ZSTD_LEVEL",
    "frame_end",
    "scan_frames",
    "scan_jsonl_zstd",
    "load_jsonl_zstd",
    "write_jsonl_zstd",
    "encode_zstd_frame",
)

ZSTD_MAGIC: Final = 0xFD2FB528
"""The Zstandard frame magic number (stored little-endian)."""
ZSTD_LEVEL: Final = 3
_MAGIC_BYTES: Final = ZSTD_MAGIC.to_bytes(4, "little")
_DICT_ID_SIZES: Final = (0, 1, 2, 4)
_CONTENT_SIZE_BYTES: Final = (0, 2, 4, 8)
_BLOCK_SIZE_MAX: Final = 128 * 1024
_RESERVED_BLOCK: Final = 3
_RLE_BLOCK: Final = 1


def frame_end(data: bytes, start: int) -> int | None:
    """The offset just past the frame that starts at `start`; None when the data ends inside it.

    Parses the magic number, the frame header descriptor (its reserved and
    unused bits `0x18` must be clear), the window, dictionary-id and content
    size fields, the block headers (type 3 is reserved; an RLE block carries
    one payload byte; no block may exceed the frame's maximum block size,
    the smaller of its window size and 128 KiB) and the optional 4-byte
    checksum. Raises `CorruptLog` when the bytes are not a frame. A None is
    only a claim about these bytes: the caller decides whether the frame is
    really torn (`scan_frames`).
    """
    total = len(data)
    head = data[start : start + 4]
    if head != _MAGIC_BYTES:
        if len(head) < 4 and _MAGIC_BYTES.startswith(head):
            return None
        raise CorruptLog(f"no Zstandard frame at byte {start}: bad magic number {head.hex()}")
    pos = start + 4
    if pos >= total:
        return None
    descriptor = data[pos]
    pos += 1
    if descriptor & 0x18:
        raise CorruptLog(
            f"Zstandard frame at byte {start}: reserved bits set in frame header descriptor "
            f"0x{descriptor:02x}"
        )
    single_segment = bool(descriptor & 0x20)
    window_at = pos
    pos += (0 if single_segment else 1) + _DICT_ID_SIZES[descriptor & 0x03]
    content_size_bytes = _CONTENT_SIZE_BYTES[descriptor >> 6] or (1 if single_segment else 0)
    if pos + content_size_bytes > total:
        return None
    if single_segment:  # the window is the content size (RFC 8878 §3.1.1.1.2)
        window = int.from_bytes(data[pos : pos + content_size_bytes], "little")
        window += 256 if content_size_bytes == 2 else 0
    else:
        exponent, mantissa = data[window_at] >> 3, data[window_at] & 0x07
        window = (1 << (10 + exponent)) + (1 << (7 + exponent)) * mantissa
    block_max = min(window, _BLOCK_SIZE_MAX)
    pos += content_size_bytes
    while True:
        if pos + 3 > total:
            return None
        block = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
        block_type = (block >> 1) & 0x03
        if block_type == _RESERVED_BLOCK:
            raise CorruptLog(f"Zstandard frame at byte {start}: reserved block type at {pos}")
        if block >> 3 > block_max:
            raise CorruptLog(
                f"Zstandard frame at byte {start}: block at byte {pos} declares {block >> 3} "
                f"bytes, more than the frame's maximum block size {block_max}"
            )
        pos += 3 + (1 if block_type == _RLE_BLOCK else block >> 3)
        if block & 0x01:
            break
    if descriptor & 0x04:
        pos += 4
    return pos if pos <= total else None


def _decompress(frame: bytes, start: int) -> bytes:
    """One complete frame's plaintext; its checksum verified (CorruptLog on any failure)."""
    decoder = zstandard.ZstdDecompressor().decompressobj()
    try:
        plain: bytes = decoder.decompress(frame)
    except zstandard.ZstdError as exc:
        raise CorruptLog(f"Zstandard frame at byte {start} does not decode: {exc}") from exc
    if not decoder.eof or decoder.unused_data:
        raise CorruptLog(f"Zstandard frame at byte {start} does not decode as exactly one frame")
    return plain


def _complete_frame_after(data: bytes, start: int) -> int | None:
    """The offset of the first complete, checksum-verified frame after `start`, if any."""
    at = data.find(_MAGIC_BYTES, start + 1)
    while at != -1:
        try:
            end = frame_end(data, at)
            if end is not None:
                _decompress(data[at:end], at)
                return at
        except CorruptLog:
            pass
        at = data.find(_MAGIC_BYTES, at + 1)
    return None


def _torn_plaintext(data: bytes, start: int) -> bytes:
    """The readable plaintext of the frame at `start`, which the data seems to end inside.

    A torn frame is a writer's interrupted last append, so its bytes run to the
    end of the file and nothing follows it (appends onto a torn tail are
    refused). If a complete frame that decodes and passes its checksum starts
    anywhere after `start`, the frame was committed and a damaged header or
    block-size field only makes it look unfinished: `CorruptLog`, never a
    truncation. Otherwise as much plaintext as a streaming decoder yields
    (nothing when it fails: persistence.md §8 step 6 tolerates a damaged last
    frame, since a crash can leave one and nothing committed follows it).
    """
    later = _complete_frame_after(data, start)
    if later is not None:
        raise CorruptLog(
            f"Zstandard frame at byte {start} reads as incomplete, but a complete frame follows "
            f"at byte {later}: damage inside committed frames, not a torn tail"
        )
    decoder = zstandard.ZstdDecompressor().decompressobj()
    try:
        plain: bytes = decoder.decompress(data[start:])
    except zstandard.ZstdError:
        return b""
    return plain


def scan_frames(data: bytes, scan: RecordScanner = scan_records) -> RawScan | None:
    """The raw scan of a `.jsonl.zstd` log (persistence.md §8 reading steps 1-6).

    `scan` reads the records of the frames' plaintext (see `RecordScanner`); None
    when it declines.
    """
    total = len(data)
    frames: list[tuple[int, int]] = []
    torn_start: int | None = None
    pos = 0
    while pos < total:
        end = frame_end(data, pos)
        if end is None:
            torn_start = pos
            break
        frames.append((pos, end))
        pos = end
    partial = b"" if torn_start is None else _torn_plaintext(data, torn_start)
    if not frames:
        raise CorruptLog("empty or header-less log: no complete Zstandard frame")
    plaintexts = [_decompress(data[s:e], s) for s, e in frames]
    header_text = plaintexts[0]
    if header_text.count(b"\n") != 1 or not header_text.endswith(b"\n"):
        raise CorruptLog("the first Zstandard frame must hold exactly the header line")
    header = parse_header_line(header_text[:-1])
    body = b"".join(plaintexts[1:])
    records: list[Any] = []
    scanned = scan(body, 0, records, first_line=1, label="record")
    if scanned is None:
        return None
    reason = scanned[2]
    if reason is not None:  # a reason is given for every byte outside the kept records
        raise CorruptLog(f"damage inside complete (checksummed) Zstandard frames: {reason}")
    if torn_start is None:
        return RawScan(header=header, records=records, committed_bytes=total, total_bytes=total)
    recovered_from = len(records)
    scanned = scan(partial, 0, records, first_line=1, label="torn-frame record")
    if scanned is None:
        return None
    _, dropped, tail_reason = scanned
    why = f"Zstandard frame at byte {torn_start} is incomplete"
    if tail_reason is not None:
        why = f"{why}; {tail_reason}"
    return RawScan(
        header=header,
        records=records,
        committed_bytes=torn_start,
        total_bytes=total,
        dropped_records=dropped,
        torn_reason=why,
        torn_frame_start=torn_start,
        recovered_from=recovered_from,
    )


def scan_jsonl_zstd(data: bytes) -> Scan:
    """Scan a Zstandard-framed JSONL log: header frame, durable prefix, torn last frame.

    `committed_bytes` is the start of the torn frame (or the whole length);
    `torn_frame` carries the truncation offset and the events recovered from
    the torn frame's readable part (they end `events`).
    """
    raw_scan = scan_frames(as_stored_bytes(data))
    assert raw_scan is not None  # the exact scan always answers
    return scan_result(raw_scan)


def load_jsonl_zstd(
    data: bytes,
    *,
    session_id: str | None = None,
    now: int,
    known_types: Collection[str] = DEFAULT_KNOWN_TYPES,
) -> Loaded:
    """`load_jsonl` for a Zstandard-framed log (recovered torn-frame events included)."""
    stored = as_stored_bytes(data)
    return load_scanned(
        lambda scan: scan_frames(stored, scan), session_id=session_id, known_types=known_types
    )


def encode_zstd_frame(records: bytes) -> bytes:
    """One Zstandard frame (checksum on) holding `records`: an append batch or a repair."""
    compressor = zstandard.ZstdCompressor(
        level=ZSTD_LEVEL, write_checksum=True, write_content_size=True
    )
    frame: bytes = compressor.compress(records)
    return frame


def write_jsonl_zstd(
    header: SessionHeader | Mapping[str, Any],
    events: Iterable[Event],
    *,
    pack_chunks: bool = True,
) -> bytes:
    """A new `.jsonl.zstd` log: frame 1 holds the header line alone, frame 2 the first batch.

    With no events only the header frame is written.
    """
    out = encode_zstd_frame(header_line(header) + b"\n")
    batch = encode_records(events, pack_chunks=pack_chunks)
    if batch:
        out += encode_zstd_frame(batch)
    return out
