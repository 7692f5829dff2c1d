"""Zstandard-framed JSONL (docs/format/persistence.md §8): a frame scan, then the JSONL scanner.

Frames are located by parsing their headers and block headers, never by
decompressing. Complete frames are checksummed, so any damage inside them is
corruption. A frame the data seems to end inside is *torn* (repair truncates
there) only if it is the last thing in the file: a damaged size field in a
committed frame looks just like a torn tail, so before truncating the scan
checks that no complete, checksum-verified frame follows it (see
docs/rfc/implemented/bug-fix/2026-12-01-zstd-damage-is-corruption.md).
Decoding is streamed block by block under a cap on the plaintext of one scan
(`max_decoded_bytes`), so a small file cannot expand without bound
(docs/rfc/implemented/feature/2026-12-01-zstd-decoded-size-cap.md).
The `zstandard` package only decompresses and compresses.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any, Final, NamedTuple

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
from kernel.errors import CorruptLog, LimitExceeded
from kernel.events import DEFAULT_KNOWN_TYPES, Event, SessionHeader
from kernel.records import scan_records

__all__ = (
    "ZSTD_MAGIC",
    "ZSTD_LEVEL",
    "MAX_DECODED_FLOOR",
    "MAX_DECODED_RATIO",
    "default_max_decoded_bytes",
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
MAX_DECODED_FLOOR: Final = 64 * 1024 * 1024
"""The default `max_decoded_bytes` never refuses a log whose plaintext is at most 64 MiB."""
MAX_DECODED_RATIO: Final = 1000
"""... nor one whose plaintext is at most 1000 times its stored (compressed) size."""


def default_max_decoded_bytes(compressed_size: int) -> int:
    """The default cap on the plaintext one scan of a `.jsonl.zstd` log may decode.

    The larger of `MAX_DECODED_FLOOR` (64 MiB) and `MAX_DECODED_RATIO` (1000)
    times the stored size. The benchmark's session logs compress 2.7-9.8x, far
    below it, while a decompression bomb (zstd reaches about 32,000x) is refused
    after at most the cap's worth of decoding
    (docs/rfc/implemented/feature/2026-12-01-zstd-decoded-size-cap.md).

    >>> default_max_decoded_bytes(48_000) == 64 * 2**20  # the audit's 48 KB bomb: 1.5 GiB
    True
    >>> default_max_decoded_bytes(10**6)
    1000000000
    """
    return max(MAX_DECODED_FLOOR, MAX_DECODED_RATIO * compressed_size)


class _Frame(NamedTuple):
    """What the structural scan learns about the frame at some offset.

    `end` is None when the data ends inside the frame. `content_size` is the
    size the header declares (None when it declares none). `cuts` are where the
    decoder is fed: the end of each complete block (the last one moved to the
    frame's end, past the checksum) and, for a torn frame, the end of the data;
    no piece between two cuts holds more than one block, so no feed yields more
    than 128 KiB of plaintext.
    """

    end: int | None
    content_size: int | None
    cuts: list[int]


def frame_end(data: bytes, start: int) -> int | None:
    """The offset just past the frame that starts at `start`; None when the data ends inside it.

    Parses the magic number, the frame header descriptor (its reserved and
    unused bits `0x18` must be clear), the window, dictionary-id and content
    size fields, the block headers (type 3 is reserved; an RLE block carries
    one payload byte; no block may exceed the frame's maximum block size,
    the smaller of its window size and 128 KiB) and the optional 4-byte
    checksum. A complete frame may not declare a content size larger than its
    blocks can hold. Raises `CorruptLog` when the bytes are not a frame. A None
    is only a claim about these bytes: the caller decides whether the frame is
    really torn (`scan_frames`).
    """
    return _parse_frame(data, start).end


def _parse_frame(data: bytes, start: int) -> _Frame:
    """`frame_end`, with the declared content size and the block boundaries."""
    total = len(data)
    torn = _Frame(None, None, [total])
    head = data[start : start + 4]
    if head != _MAGIC_BYTES:
        if len(head) < 4 and _MAGIC_BYTES.startswith(head):
            return torn
        raise CorruptLog(f"no Zstandard frame at byte {start}: bad magic number {head.hex()}")
    pos = start + 4
    if pos >= total:
        return torn
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
        return torn
    content_size = None
    if content_size_bytes:
        content_size = int.from_bytes(data[pos : pos + content_size_bytes], "little")
        content_size += 256 if content_size_bytes == 2 else 0
    if single_segment:  # the window is the content size (RFC 8878 §3.1.1.1.2)
        window = content_size or 0
    else:
        exponent, mantissa = data[window_at] >> 3, data[window_at] & 0x07
        window = (1 << (10 + exponent)) + (1 << (7 + exponent)) * mantissa
    block_max = min(window, _BLOCK_SIZE_MAX)
    pos += content_size_bytes
    cuts: list[int] = []
    while True:
        if pos + 3 > total:
            return torn._replace(cuts=[*cuts, total])
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
        if pos > total:
            return torn._replace(cuts=[*cuts, total])
        cuts.append(pos)
        if block & 0x01:
            break
    if descriptor & 0x04:
        pos += 4
    if pos > total:
        return torn._replace(cuts=[*cuts, total])
    if content_size is not None and content_size > len(cuts) * block_max:
        raise CorruptLog(
            f"Zstandard frame at byte {start} declares {content_size} bytes of content, more "
            f"than its {len(cuts)} block(s) of at most {block_max} bytes can hold"
        )
    cuts[-1] = pos
    return _Frame(pos, content_size, cuts)


class _Budget:
    """The plaintext one scan has decoded, against its cap (`max_decoded_bytes`).

    The only state of a scan: every decoded byte is counted, those of
    candidate frames checked after a torn frame included, so a scan never
    decodes more than `limit` bytes in all.
    """

    def __init__(self, stored_size: int, max_decoded_bytes: int | None) -> None:
        if max_decoded_bytes is None:
            self.limit = default_max_decoded_bytes(stored_size)
            self.source = (
                f"the default, the larger of {MAX_DECODED_FLOOR:,} bytes and "
                f"{MAX_DECODED_RATIO} times the {stored_size:,}-byte log"
            )
        elif type(max_decoded_bytes) is int and max_decoded_bytes >= 0:
            self.limit = max_decoded_bytes
            self.source = "as given"
        else:
            raise ValueError(f"max_decoded_bytes must be an int >= 0, got {max_decoded_bytes!r}")
        self.spent = 0

    def _refuse(self, start: int, what: str) -> LimitExceeded:
        return LimitExceeded(
            f"Zstandard frame at byte {start}: {what} of {self.limit:,} decoded bytes per scan "
            f"(max_decoded_bytes, {self.source}); if the log is trusted, read it with a larger "
            f"max_decoded_bytes",
            limit=self.limit,
            offset=start,
        )

    def declare(self, frames: Iterable[tuple[int, _Frame]]) -> None:
        """Refuse before decoding when the frames' declared content sizes alone pass the cap."""
        total = self.spent
        for start, frame in frames:
            total += frame.content_size or 0
            if total > self.limit:
                raise self._refuse(
                    start, f"the frames up to this one declare {total:,} bytes, past the cap"
                )

    def spend(self, size: int, start: int) -> None:
        self.spent += size
        if self.spent > self.limit:
            raise self._refuse(start, "decoding it passes the cap")


def _decode(
    data: bytes, start: int, cuts: list[int], budget: _Budget, out: list[bytes] | None
) -> zstandard.ZstdDecompressionObj:
    """Feed the frame at `start` to a fresh streaming decoder, one piece per cut.

    Each piece holds at most one block, so no feed yields more than 128 KiB,
    and `budget` refuses as soon as the scan's plaintext passes its cap: a bomb
    is never held in memory. The plaintext is appended to `out` (None drops
    it); returns the decoder (for `eof`, `unused_data`). Raises `ZstdError`.
    """
    decoder = zstandard.ZstdDecompressor().decompressobj()
    view = memoryview(data)
    at = start
    for cut in cuts:
        piece: bytes = decoder.decompress(view[at:cut])
        at = cut
        if piece:
            budget.spend(len(piece), start)
            if out is not None:
                out.append(piece)
    return decoder


def _decompress(
    data: bytes, start: int, frame: _Frame, budget: _Budget, out: list[bytes] | None
) -> None:
    """One complete frame's plaintext onto `out`, checksum verified; CorruptLog on any failure."""
    try:
        decoder = _decode(data, start, frame.cuts, budget, out)
    except zstandard.ZstdError as exc:
        raise CorruptLog(f"Zstandard frame at byte {start} does not decode: {exc}") from exc
    if not decoder.eof or decoder.unused_data:
        raise CorruptLog(f"Zstandard frame at byte {start} does not decode as exactly one frame")


def _complete_frame_after(data: bytes, start: int, budget: _Budget) -> int | None:
    """The offset of the first complete, checksum-verified frame after `start`, if any."""
    at = data.find(_MAGIC_BYTES, start + 1)
    while at != -1:
        try:
            frame = _parse_frame(data, at)
            if frame.end is not None:
                _decompress(data, at, frame, budget, None)
                return at
        except CorruptLog:
            pass
        at = data.find(_MAGIC_BYTES, at + 1)
    return None


def _torn_plaintext(data: bytes, start: int, cuts: list[int], budget: _Budget) -> bytes:
    """The readable plaintext of the frame at `start`, which the data seems to end inside.

    A torn frame is a writer's interrupted last append, so its bytes run to the
    end of the file and nothing follows it (appends onto a torn tail are
    refused). If a complete frame that decodes and passes its checksum starts
    anywhere after `start`, the frame was committed and a damaged header or
    block-size field only makes it look unfinished: `CorruptLog`, never a
    truncation. Otherwise as much plaintext as a streaming decoder yields
    (nothing when it fails: docs/format/persistence.md §8 step 6 tolerates a damaged last
    frame, since a crash can leave one and nothing committed follows it).
    """
    later = _complete_frame_after(data, start, budget)
    if later is not None:
        raise CorruptLog(
            f"Zstandard frame at byte {start} reads as incomplete, but a complete frame follows "
            f"at byte {later}: damage inside committed frames, not a torn tail"
        )
    pieces: list[bytes] = []
    try:
        _decode(data, start, cuts, budget, pieces)
    except zstandard.ZstdError:
        return b""
    return b"".join(pieces)


def scan_frames(
    data: bytes, scan: RecordScanner = scan_records, *, max_decoded_bytes: int | None = None
) -> RawScan | None:
    """The raw scan of a `.jsonl.zstd` log (docs/format/persistence.md §8 reading steps 1-6).

    `scan` reads the records of the frames' plaintext (see `RecordScanner`); None
    when it declines. `max_decoded_bytes` caps the plaintext this scan decodes
    (None: `default_max_decoded_bytes(len(data))`); past it, or when the
    frames' declared content sizes already pass it, `LimitExceeded`.
    """
    budget = _Budget(len(data), max_decoded_bytes)
    total = len(data)
    frames: list[tuple[int, _Frame]] = []
    torn: tuple[int, list[int]] | None = None
    pos = 0
    while pos < total:
        frame = _parse_frame(data, pos)
        if frame.end is None:
            torn = (pos, frame.cuts)
            break
        frames.append((pos, frame))
        pos = frame.end
    torn_start = None if torn is None else torn[0]
    partial = b"" if torn is None else _torn_plaintext(data, *torn, budget)
    if not frames:
        raise CorruptLog("empty or header-less log: no complete Zstandard frame")
    budget.declare(frames)
    header_pieces: list[bytes] = []
    _decompress(data, *frames[0], budget, header_pieces)
    pieces: list[bytes] = []
    for start, frame in frames[1:]:
        _decompress(data, start, frame, budget, pieces)
    header_text = b"".join(header_pieces)
    if header_text.count(b"\n") != 1 or not header_text.endswith(b"\n"):
        raise CorruptLog("the first Zstandard frame must hold exactly the header line")
    header = parse_header_line(header_text[:-1])
    body = b"".join(pieces)
    del pieces
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


def scan_jsonl_zstd(data: bytes, *, max_decoded_bytes: int | None = None) -> Scan:
    """Scan a Zstandard-framed JSONL log: header frame, durable prefix, torn last frame.

    `committed_bytes` is the start of the torn frame (or the whole length);
    `torn_frame` carries the truncation offset and the events recovered from
    the torn frame's readable part (they end `events`).

    `max_decoded_bytes` caps the plaintext decoded (header line, complete and
    torn frames): None takes `default_max_decoded_bytes(len(data))`, the larger
    of 64 MiB and 1000 times the stored size. A log past the cap, or whose
    frames declare more, raises `LimitExceeded` (naming the cap and the frame's
    offset) without holding more than the cap in memory; pass a larger value
    for a trusted log.
    """
    raw_scan = scan_frames(as_stored_bytes(data), max_decoded_bytes=max_decoded_bytes)
    assert raw_scan is not None  # the exact scan always answers
    return scan_result(raw_scan)


def load_jsonl_zstd(
    data: bytes,
    *,
    session_id: str | None = None,
    now: int,
    known_types: Collection[str] = DEFAULT_KNOWN_TYPES,
    max_decoded_bytes: int | None = None,
) -> Loaded:
    """`load_jsonl` for a Zstandard-framed log (recovered torn-frame events included).

    `max_decoded_bytes` caps the plaintext as in `scan_jsonl_zstd` (`LimitExceeded`
    past it; None is the default cap). The cap applies to each scan: when the
    typed path declines and the exact pipeline scans again, it has the whole cap.
    """
    stored = as_stored_bytes(data)
    return load_scanned(
        lambda scan: scan_frames(stored, scan, max_decoded_bytes=max_decoded_bytes),
        session_id=session_id,
        known_types=known_types,
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
