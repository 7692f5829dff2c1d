"""Zstandard-framed JSONL (docs/format/persistence.md §8): a frame scan, then the JSONL scanner.

Frames are located by parsing their headers and block headers, never by
decompressing. Complete frames are checksummed, so any damage inside them is
corruption. A frame the data seems to end inside is *torn* (repair truncates
there) only if it is the last thing in the file: a damaged size field in a
committed frame looks just like a torn tail, so before truncating the scan
checks that no complete, checksum-verified frame follows it (see
docs/rfc/implemented/bug-fix/2026-12-01-zstd-damage-is-corruption.md).
That check walks block headers from every later frame magic; walks that meet
share what lies ahead, so it reads each block header about once.
Every decoded byte counts against a cap on the plaintext of one scan
(`max_decoded_bytes`), and plaintext is kept only once the cap is known to
hold all of it, so a bomb is refused before it takes memory
(docs/rfc/implemented/feature/2026-12-01-zstd-decoded-size-cap.md,
docs/rfc/implemented/bug-fix/2026-12-01-zstd-linear-scan-and-bounded-memory.md).
The `zstandard` package only decompresses and compresses.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any, Final, NamedTuple

import zstandard

from kernel.errors import CorruptLog, KernelError, LimitExceeded
from kernel.storage.jsonl import (
    Scan,
    as_stored_bytes,
    header_line,
    parse_header_line,
    scan_result,
    write_records,
)
from kernel.storage.load import TYPED, WIRE, Loaded, RawScan, option_flag, plan_scan, scan_lines
from kernel.values.events import DEFAULT_KNOWN_TYPES, Event, SessionHeader, known_type_set
from kernel.values.json import summary

__all__ = (
    "ZSTD_MAGIC",
    "ZSTD_LEVEL",
    "MAX_DECODED_FLOOR",
    "MAX_DECODED_RATIO",
    "MAX_DECODED_CEILING",
    "default_max_decoded_bytes",
    "check_max_decoded_bytes",
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
_RLE_BLOCK: Final = 1
_COMPRESSED_BLOCK: Final = 2
_RESERVED_BLOCK: Final = 3
_CHAIN_STRIDE: Final = 8
_RECENT_MAX: Final = 4096
MAX_DECODED_FLOOR: Final = 64 * 1024 * 1024
"""The default `max_decoded_bytes` never refuses a log whose plaintext is at most 64 MiB."""
MAX_DECODED_RATIO: Final = 1000
"""... nor one whose plaintext is at most 1000 times its stored (compressed) size ..."""
MAX_DECODED_CEILING: Final = 256 * 1024 * 1024
"""... as long as the plaintext is at most 256 MiB: past that, only a caller's own cap reads it."""


def default_max_decoded_bytes(compressed_size: int) -> int:
    """The default cap on the plaintext one scan of a `.jsonl.zstd` log may decode.

    `MAX_DECODED_RATIO` (1000) times the stored size, at least `MAX_DECODED_FLOOR`
    (64 MiB) and at most `MAX_DECODED_CEILING` (256 MiB). The benchmark's session
    logs compress 2.7-9.8x, far below the ratio, and 256 MiB is about 3.4 million
    events of a realistic session. A decompression bomb (zstd reaches about
    32,000x) is refused after at most the cap's worth of decoding, and a scan
    never holds more plaintext than the cap, whatever the file's size
    (docs/rfc/implemented/bug-fix/2026-12-01-zstd-linear-scan-and-bounded-memory.md).

    >>> default_max_decoded_bytes(48_000) == 64 * 2**20  # the audit's 48 KB bomb: 1.5 GiB
    True
    >>> default_max_decoded_bytes(100_000)
    100000000
    >>> default_max_decoded_bytes(10**6) == 256 * 2**20
    True
    """
    return min(max(MAX_DECODED_FLOOR, MAX_DECODED_RATIO * compressed_size), MAX_DECODED_CEILING)


class _Header(NamedTuple):
    """What a frame header says about the blocks that follow it."""

    content_size: int | None
    block_max: int
    checksum: bool
    blocks_at: int


class _Frame(NamedTuple):
    """What the structural scan learns about the frame at some offset.

    `end` is None when the data ends inside the frame. `content_size` is the
    size the header declares (None when it declares none).
    """

    end: int | None
    content_size: int | None


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


def _header_size(descriptor: int) -> int:
    """The bytes from a frame's magic number to its first block header, by its descriptor."""
    single_segment = descriptor & 0x20
    content_size_bytes = _CONTENT_SIZE_BYTES[descriptor >> 6] or (1 if single_segment else 0)
    return 5 + (0 if single_segment else 1) + _DICT_ID_SIZES[descriptor & 0x03] + content_size_bytes


def _frame_header(data: bytes, start: int) -> _Header | None:
    """The header of the frame at `start`; None when the data ends inside it.

    Raises `CorruptLog` when the bytes are not a frame header.
    """
    total = len(data)
    if not data.startswith(_MAGIC_BYTES, start):
        head = data[start : start + 4]
        if len(head) < 4 and _MAGIC_BYTES.startswith(head):
            return None
        raise CorruptLog(f"no Zstandard frame at byte {start}: bad magic number {head.hex()}")
    if start + 4 >= total:
        return None
    descriptor = data[start + 4]
    if descriptor & 0x18:
        raise CorruptLog(
            f"Zstandard frame at byte {start}: reserved bits set in frame header descriptor "
            f"0x{descriptor:02x}"
        )
    blocks_at = start + _header_size(descriptor)
    if blocks_at > total:
        return None
    content_size_bytes = _CONTENT_SIZE_BYTES[descriptor >> 6] or (descriptor & 0x20) >> 5
    content_size = None
    if content_size_bytes:
        content_size = int.from_bytes(data[blocks_at - content_size_bytes : blocks_at], "little")
        content_size += 256 if content_size_bytes == 2 else 0
    if descriptor & 0x20:  # single segment: the window is the content size (RFC 8878 §3.1.1.1.2)
        window = content_size or 0
    else:
        exponent, mantissa = data[start + 5] >> 3, data[start + 5] & 0x07
        window = (1 << (10 + exponent)) + (1 << (7 + exponent)) * mantissa
    block_max = min(window, _BLOCK_SIZE_MAX)
    return _Header(content_size, block_max, bool(descriptor & 0x04), blocks_at)


def _blocks(data: bytes, start: int, header: _Header) -> Iterator[tuple[int, int, bool]]:
    """The complete blocks of the frame at `start`: (end offset, most plaintext, last block?).

    Stops after the last block, or where the data ends inside a block header
    or a block. The most plaintext a block can decode to is its size for a raw
    or RLE block and the frame's maximum block size for a compressed one.
    Raises `CorruptLog` for a reserved block type or a block too large.
    """
    total = len(data)
    block_max = header.block_max
    pos = header.blocks_at
    while pos + 3 <= total:
        block = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
        block_type = (block >> 1) & 0x03
        if block_type == _RESERVED_BLOCK:
            raise CorruptLog(f"Zstandard frame at byte {start}: reserved block type at {pos}")
        size = block >> 3
        if size > block_max:
            raise CorruptLog(
                f"Zstandard frame at byte {start}: block at byte {pos} declares {size} "
                f"bytes, more than the frame's maximum block size {block_max}"
            )
        pos += 3 + (1 if block_type == _RLE_BLOCK else size)
        if pos > total:
            return
        yield pos, block_max if block_type == _COMPRESSED_BLOCK else size, bool(block & 0x01)
        if block & 0x01:
            return


def _parse_frame(data: bytes, start: int) -> _Frame:
    """`frame_end`, with the declared content size."""
    header = _frame_header(data, start)
    if header is None:
        return _Frame(None, None)
    end = None
    count = 0
    for block_end, _, last in _blocks(data, start, header):
        count += 1
        if last:
            end = block_end + (4 if header.checksum else 0)
    if end is None or end > len(data):
        return _Frame(None, header.content_size)
    if header.content_size is not None and header.content_size > count * header.block_max:
        raise CorruptLog(
            f"Zstandard frame at byte {start} declares {header.content_size} bytes of content, "
            f"more than its {count} block(s) of at most {header.block_max} bytes can hold"
        )
    return _Frame(end, header.content_size)


def _cuts(data: bytes, start: int) -> Iterator[int]:
    """Where to cut the frame at `start` to feed a streaming decoder: no piece yields over 128 KiB.

    Consecutive blocks share a piece while together they can decode to at most
    128 KiB (a piece holds at least one block). The last piece of a complete
    frame ends at its end, past the checksum; a frame the data ends inside is
    fed up to the end of the data. The frame's structure must be checked first
    (`_parse_frame`).
    """
    header = _frame_header(data, start)
    if header is None:
        yield len(data)
        return
    at = header.blocks_at
    pending = 0  # the most plaintext of the blocks since the last cut
    for end, most, last in _blocks(data, start, header):
        if pending + most > _BLOCK_SIZE_MAX:
            yield at
            pending = 0
        pending += most
        at = end
        if last and end + (4 if header.checksum else 0) <= len(data):
            yield end + (4 if header.checksum else 0)
            return
    if pending:
        yield at
    yield len(data)


_NO_END: Final = (-1, 0, 0)


class _BlockChains:
    """Where a walk of block headers that starts at some offset ends, remembered across walks.

    The walk from a block header is fixed by the bytes alone: it ends at a last
    block (its end), or at a reserved block type or the end of the data (no
    end, -1). Walks from two frame magics that land on the same header go on
    together, so every `_CHAIN_STRIDE`-th header of a long walk is remembered
    with where its walk ends, how many blocks it has and its largest block: a
    later walk that joins reads at most that many headers again, and memory
    stays one entry per `_CHAIN_STRIDE` headers. The headers of the last short
    walks are kept a while too: nested frames start on them. The frame's own
    rules (its maximum block size, checksum and content size) are checked on
    those figures by the caller.
    """

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.known: dict[int, tuple[int, int, int]] = {}
        self.recent: dict[int, tuple[int, int, int]] = {}

    def walk(self, start: int) -> tuple[int, int, int]:
        """`(end or -1, blocks, largest block size)` of the walk from the block header at `start`.

        A walk that meets a remembered header or ends within `_CHAIN_STRIDE`
        blocks leaves its headers in `recent` only; a longer one is walked
        again from `start`, remembering.
        """
        answer = self.recent.get(start)
        if answer is not None:
            return answer
        data, total, known, stride = self.data, len(self.data), self.known, _CHAIN_STRIDE
        path: list[int] = []  # header offsets and block sizes, while the walk is short
        marks: list[int] | None = None  # every stride-th header, once remembering
        counts: list[int] = []  # the blocks walked before each mark
        largest: list[int] = []  # the largest block from each mark to the next
        pos, blocks, biggest = start, 0, 0
        while True:
            tail = known.get(pos)
            if tail is not None:
                break
            if blocks % stride == 0:
                if marks is not None:
                    if marks:
                        largest.append(biggest)
                    marks.append(pos)
                    counts.append(blocks)
                    biggest = 0
                elif blocks:
                    marks, pos, blocks, biggest = [], start, 0, 0
                    continue
            if pos + 3 > total:
                tail = _NO_END
                break
            block = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
            block_type = (block >> 1) & 0x03
            size = block >> 3
            end = pos + 3 + (1 if block_type == _RLE_BLOCK else size)
            if block_type == _RESERVED_BLOCK or end > total:
                tail = _NO_END
                break
            if marks is None:
                path += (pos, size)
            blocks += 1
            if size > biggest:
                biggest = size
            if block & 0x01:
                tail = (end, 0, 0)
                break
            pos = end
        end, after, most = tail
        if marks is None:
            return self._keep_recent(path, tail)
        largest.append(biggest)
        for mark, before, big in zip(
            reversed(marks), reversed(counts), reversed(largest), strict=True
        ):
            most = max(most, big)
            known[mark] = (end, blocks + after - before, most)
        return known[start]

    def _keep_recent(self, path: list[int], tail: tuple[int, int, int]) -> tuple[int, int, int]:
        """Keep the figures of each header of a short walk in `recent` (`path`: offsets, sizes)."""
        recent = self.recent
        if len(recent) > _RECENT_MAX:
            recent.clear()
        end, blocks, most = tail
        for index in range(len(path) - 2, -1, -2):
            blocks += 1
            most = max(most, path[index + 1])
            recent[path[index]] = (end, blocks, most)
        return end, blocks, most


def _complete_end(data: bytes, start: int, chains: _BlockChains) -> int | None:
    """The end of the frame at `start` if it is complete, else None (as `frame_end` says).

    Equal to `frame_end` with CorruptLog read as None, but the block headers
    are walked through `chains`, and the rest of the header is read only when
    the walk ends at a last block.
    """
    if start + 4 >= len(data) or data[start + 4] & 0x18:
        return None
    end, blocks, largest = chains.walk(start + _header_size(data[start + 4]))
    if end < 0:
        return None
    try:
        header = _frame_header(data, start)
    except CorruptLog:
        return None
    if header is None or largest > header.block_max:
        return None
    end += 4 if header.checksum else 0
    if end > len(data):
        return None
    if header.content_size is not None and header.content_size > blocks * header.block_max:
        return None
    return end


def check_max_decoded_bytes(value: Any) -> Any:
    """`value` if it is a valid `max_decoded_bytes` (an int >= 0, or None), else `KernelError`.

    >>> check_max_decoded_bytes(1 << 20)
    1048576
    """
    if value is None or (type(value) is int and value >= 0):
        return value
    raise KernelError(f"max_decoded_bytes must be an int >= 0 or None, got {summary(value)}")


class _Budget:
    """The plaintext one scan has decoded, against its cap (`max_decoded_bytes`).

    The only state of a scan: every decoded byte is counted, those of
    candidate frames checked after a torn frame included, so a scan never
    decodes more than `limit` bytes in all. A frame is counted before its
    plaintext is kept, by its declared content size or by decoding it once
    without keeping anything: the plaintext of a frame refused here is never
    kept.
    """

    def __init__(self, stored_size: int, max_decoded_bytes: int | None) -> None:
        if max_decoded_bytes is None:
            self.limit = default_max_decoded_bytes(stored_size)
            self.source = (
                f"the default: {MAX_DECODED_RATIO} times the {stored_size:,}-byte log, at least "
                f"{MAX_DECODED_FLOOR:,} and at most {MAX_DECODED_CEILING:,} bytes"
            )
        else:
            self.limit = check_max_decoded_bytes(max_decoded_bytes)
            self.source = "as given"
        self.spent = 0

    def _refuse(self, start: int, what: str) -> LimitExceeded:
        return LimitExceeded(
            f"Zstandard frame at byte {start}: {what} of {self.limit:,} decoded bytes per scan "
            f"(max_decoded_bytes, {self.source}); if the log is trusted, read it with a larger "
            f"max_decoded_bytes",
            limit=self.limit,
            offset=start,
        )

    def out_of_memory(self) -> LimitExceeded:
        """The error for a read that could not get memory for what the cap allows."""
        return LimitExceeded(
            f"Zstandard log: out of memory within the cap of {self.limit:,} decoded bytes per "
            f"scan (max_decoded_bytes, {self.source}); read it with a smaller "
            f"max_decoded_bytes, or with more memory",
            limit=self.limit,
        )

    def declare(self, frames: Iterable[tuple[int, int | None]]) -> None:
        """Refuse before decoding when the frames' declared content sizes alone pass the cap."""
        total = self.spent
        for start, content_size in frames:
            total += content_size or 0
            if total > self.limit:
                raise self._refuse(
                    start, f"the frames up to this one declare {total:,} bytes, past the cap"
                )

    def spend(self, size: int, start: int) -> None:
        self.spent += size
        if self.spent > self.limit:
            raise self._refuse(start, "decoding it passes the cap")


def _stream(
    data: bytes, start: int, take: Callable[[int], None], out: list[bytes] | None
) -> zstandard.ZstdDecompressionObj:
    """Feed the frame at `start` to a fresh streaming decoder, one piece per `_cuts`.

    No piece yields more than 128 KiB; `take` sees the size of each (it raises
    to stop the decoding), and the plaintext is appended to `out` (None drops
    it). Returns the decoder (for `eof`, `unused_data`). Raises `ZstdError`.
    """
    decoder = zstandard.ZstdDecompressor().decompressobj()
    view = memoryview(data)
    at = start
    for cut in _cuts(data, start):
        piece: bytes = decoder.decompress(view[at:cut])
        at = cut
        if piece:
            take(len(piece))
            if out is not None:
                out.append(piece)
    return decoder


def _count(data: bytes, start: int, budget: _Budget) -> int:
    """Decode one complete frame without keeping it, checksum verified: its plaintext size.

    Every byte is spent from `budget`; CorruptLog on any failure.
    """
    before = budget.spent
    try:
        decoder = _stream(data, start, lambda size: budget.spend(size, start), None)
    except zstandard.ZstdError as exc:
        raise CorruptLog(f"Zstandard frame at byte {start} does not decode: {exc}") from exc
    if not decoder.eof or decoder.unused_data:
        raise CorruptLog(f"Zstandard frame at byte {start} does not decode as exactly one frame")
    return budget.spent - before


def _plaintext(
    decoder: zstandard.ZstdDecompressor, data: bytes, start: int, end: int, size: int
) -> bytes:
    """The plaintext of the complete frame `data[start:end]`, already counted as `size` bytes.

    One call decodes it into exactly `size` bytes (no decoder window, no
    pieces to join); a frame that decodes to another size, fails its checksum
    or is not exactly one frame is CorruptLog.
    """
    try:
        text: bytes = decoder.decompress(
            memoryview(data)[start:end], max_output_size=max(size, 1), allow_extra_data=False
        )
    except zstandard.ZstdError as exc:
        raise CorruptLog(f"Zstandard frame at byte {start} does not decode: {exc}") from exc
    if len(text) != size:
        raise CorruptLog(
            f"Zstandard frame at byte {start} decodes to {len(text):,} bytes, not {size:,}"
        )
    return text


def _complete_frame_after(data: bytes, start: int, budget: _Budget) -> int | None:
    """The offset of the first complete, checksum-verified frame after `start`, if any.

    Every later occurrence of the magic number is a candidate; its block
    headers are walked through one `_BlockChains`, so the search reads each
    header about once. A candidate that is complete is decoded (its plaintext
    spent from `budget`). Together those candidates may span at most the bytes
    from `start` to the end: a committed frame that follows damage decodes at
    the first try, and a crash leaves compressed bytes, which hold a complete
    frame only by chance, so frames that overlap one another past that are
    `CorruptLog`, never decoded one by one.
    """
    chains = _BlockChains(data)
    room = len(data) - start
    at = data.find(_MAGIC_BYTES, start + 1)
    while at != -1:
        end = _complete_end(data, at, chains)
        if end is not None:
            room -= end - at
            if room < 0:
                raise CorruptLog(
                    f"Zstandard frame at byte {start} reads as incomplete, but complete frames "
                    f"that overlap one another follow it (one at byte {at}): damage, not a torn "
                    f"tail"
                )
            try:
                _count(data, at, budget)
                return at
            except CorruptLog:
                pass
        at = data.find(_MAGIC_BYTES, at + 1)
    return None


def _torn_plaintext(data: bytes, start: int, declared: int | None, budget: _Budget) -> bytes:
    """The readable plaintext of the frame at `start`, which the data seems to end inside.

    A torn frame is a writer's interrupted last append, so its bytes run to the
    end of the file and nothing follows it (appends onto a torn tail are
    refused). If a complete frame that decodes and passes its checksum starts
    anywhere after `start`, the frame was committed and a damaged header or
    block-size field only makes it look unfinished: `CorruptLog`, never a
    truncation. Otherwise as much plaintext as a streaming decoder yields,
    spent from `budget` (nothing when it fails: docs/format/persistence.md §8
    step 6 tolerates a damaged last frame, since a crash can leave one and
    nothing committed follows it). Unless the cap holds the content size the
    frame `declared`, it is decoded once without keeping anything, to count it.
    """
    later = _complete_frame_after(data, start, budget)
    if later is not None:
        raise CorruptLog(
            f"Zstandard frame at byte {start} reads as incomplete, but a complete frame follows "
            f"at byte {later}: damage inside committed frames, not a torn tail"
        )

    def spend(size: int) -> None:
        budget.spend(size, start)

    if declared is not None and budget.spent + declared <= budget.limit:
        return _streamed(data, start, spend, keep=True) or b""
    before = budget.spent
    if _streamed(data, start, spend, keep=False) is None:
        return b""
    left = budget.spent - before

    def within(size: int) -> None:
        nonlocal left
        left -= size
        if left < 0:  # the decoder is deterministic: the count holds
            raise CorruptLog(f"Zstandard frame at byte {start} decodes past its counted size")

    return _streamed(data, start, within, keep=True) or b""


def _streamed(data: bytes, start: int, take: Callable[[int], None], *, keep: bool) -> bytes | None:
    """What a streaming decoder yields for the frame at `start` (b"" unless `keep`).

    None when the decoder fails.
    """
    pieces: list[bytes] | None = [] if keep else None
    try:
        _stream(data, start, take, pieces)
    except zstandard.ZstdError:
        return None
    return b"".join(pieces or ())


class _Frames:
    """The complete frames of a log, in flat arrays: a few bytes each, however many there are.

    `sizes[i]` is the plaintext size of frame `i`: the declared content size,
    -1 while it has none, then the size counted by decoding it.
    """

    def __init__(self) -> None:
        self.starts: array[int] = array("q")
        self.sizes: array[int] = array("q")
        self.end = 0

    def add(self, start: int, frame: _Frame) -> None:
        assert frame.end is not None
        self.starts.append(start)
        self.sizes.append(-1 if frame.content_size is None else frame.content_size)
        self.end = frame.end

    def __len__(self) -> int:
        return len(self.starts)

    def bounds(self, index: int) -> tuple[int, int]:
        """The start and end of frame `index`."""
        after = index + 1
        return self.starts[index], self.starts[after] if after < len(self.starts) else self.end

    def declared(self) -> Iterator[tuple[int, int | None]]:
        for start, size in zip(self.starts, self.sizes, strict=True):
            yield start, None if size < 0 else size


def _scan_frames(data: bytes, budget: _Budget, typed: bool) -> RawScan:
    """`scan_frames` itself: find the frames, count every one, then keep and scan the plaintext."""
    total = len(data)
    frames = _Frames()
    torn_start = None
    partial = b""
    pos = 0
    while pos < total:
        frame = _parse_frame(data, pos)
        if frame.end is None:
            torn_start = pos
            partial = _torn_plaintext(data, pos, frame.content_size, budget)
            break
        frames.add(pos, frame)
        pos = frame.end
    if not frames:
        raise CorruptLog("empty or header-less log: no complete Zstandard frame")
    budget.declare(frames.declared())
    for index, start in enumerate(frames.starts):
        if frames.sizes[index] < 0:
            frames.sizes[index] = _count(data, start, budget)
        else:
            budget.spend(frames.sizes[index], start)
    decoder = zstandard.ZstdDecompressor()
    header_text = _plaintext(decoder, data, *frames.bounds(0), frames.sizes[0])
    if header_text.count(b"\n") != 1 or not header_text.endswith(b"\n"):
        raise CorruptLog("the first Zstandard frame must hold exactly the header line")
    header = parse_header_line(header_text[:-1])
    pieces = [
        _plaintext(decoder, data, *frames.bounds(index), frames.sizes[index])
        for index in range(1, len(frames))
    ]
    body = b"".join(pieces)
    del pieces
    records: list[Any] = []
    scanned, typed = scan_lines(body, 0, records, typed=typed, first_line=1, label="record")
    del body
    reason = scanned[2]
    if reason is not None:  # a reason is given for every byte outside the kept records
        raise CorruptLog(f"damage inside complete (checksummed) Zstandard frames: {reason}")
    if torn_start is None:
        return RawScan(
            header=header,
            records=records,
            committed_bytes=total,
            total_bytes=total,
            kind=TYPED if typed else WIRE,
        )
    recovered_from = len(records)
    scanned, typed = scan_lines(
        partial, 0, records, typed=typed, first_line=1, label="torn-frame record"
    )
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
        kind=TYPED if typed else WIRE,
    )


def scan_frames(
    data: bytes, *, typed: bool = False, max_decoded_bytes: int | None = None
) -> RawScan:
    """The raw scan of a `.jsonl.zstd` log (docs/format/persistence.md §8 reading steps 1-6).

    The frames are decompressed once; their records are read by the typed scanner
    while it can when `typed` (`kernel.storage.load.scan_lines`), else by the exact one.
    `max_decoded_bytes` caps the plaintext this scan decodes
    (None: `default_max_decoded_bytes(len(data))`); past it, or when the
    frames' declared content sizes already pass it, `LimitExceeded`. So is a
    scan that runs out of memory: a `MemoryError` never escapes.
    """
    budget = _Budget(len(data), max_decoded_bytes)
    try:
        return _scan_frames(data, budget, typed)
    except MemoryError:
        pass  # raised below, once the handler has dropped the plaintext the traceback holds
    raise budget.out_of_memory()


def scan_jsonl_zstd(data: bytes, *, max_decoded_bytes: int | None = None) -> Scan:
    """Scan a Zstandard-framed JSONL log: header frame, durable prefix, torn last frame.

    `committed_bytes` is the start of the torn frame (or the whole length);
    `torn_frame` carries the truncation offset and the events recovered from
    the torn frame's readable part (they end `events`).

    `max_decoded_bytes` caps the plaintext decoded (header line, complete and
    torn frames): None takes `default_max_decoded_bytes(len(data))`, 1000 times
    the stored size, at least 64 MiB and at most 256 MiB. A log past the cap, or
    whose frames declare more, raises `LimitExceeded` (naming the cap and the
    frame's offset) before any plaintext is kept; pass a larger value for a
    trusted log. Running out of memory is `LimitExceeded` too.

    Raises:
        LimitExceeded: the plaintext passes `max_decoded_bytes`, or memory runs out.
        UnsupportedFormat: a foreign format version.
        CorruptLog: damage inside committed history (a complete frame is checksummed, so
            any damage inside one is corruption).
    """
    stored = as_stored_bytes(data)
    try:
        return scan_result(scan_frames(stored, typed=True, max_decoded_bytes=max_decoded_bytes))
    except MemoryError:
        pass  # raised below, once the handler has dropped what the traceback holds
    raise _Budget(len(stored), max_decoded_bytes).out_of_memory()


def load_jsonl_zstd(
    data: bytes,
    *,
    session_id: str | None = None,
    now: int,
    known_types: Collection[str] = DEFAULT_KNOWN_TYPES,
    max_decoded_bytes: int | None = None,
    normalize_legacy: bool = True,
) -> Loaded:
    """`load_jsonl` for a Zstandard-framed log (recovered torn-frame events included).

    Older v0 shapes are normalized as `load_jsonl` does, unless `normalize_legacy`
    is false.

    `max_decoded_bytes` caps the plaintext as in `scan_jsonl_zstd` (`LimitExceeded`
    past it; None is the default cap). The cap applies to each scan: when the typed
    plan declines, the exact pipeline decompresses the frames again (their plaintext
    is not kept meanwhile) with the whole cap. Running out of memory is
    `LimitExceeded` too.

    Raises:
        LimitExceeded: the plaintext passes `max_decoded_bytes`, or memory runs out.
        UnsupportedFormat: as `load_jsonl`.
        CorruptLog: as `load_jsonl`.
    """
    stored = as_stored_bytes(data)
    normalize = option_flag(normalize_legacy, "normalize_legacy")
    try:
        return plan_scan(
            scan_frames(stored, typed=True, max_decoded_bytes=max_decoded_bytes),
            lambda: scan_frames(stored, max_decoded_bytes=max_decoded_bytes),
            session_id=session_id,
            known_types=known_type_set(known_types),
            normalize=normalize,
        )
    except MemoryError:
        pass  # raised below, once the handler has dropped what the traceback holds
    raise _Budget(len(stored), max_decoded_bytes).out_of_memory()


def encode_zstd_frame(records: bytes | bytearray) -> bytes:
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
    ranged_sources: bool = False,
) -> bytes:
    """A new `.jsonl.zstd` log: frame 1 holds the header line alone, frame 2 the first batch.

    With no events only the header frame is written. `ranged_sources` spells
    citations with ranges, as `write_jsonl` does (docs/format/persistence.md §2.5);
    the default is the plain spelling every v0 reader reads.
    """
    out = encode_zstd_frame(header_line(header) + b"\n")
    batch = bytearray()  # compressed as it is: the plain text is not copied into a `bytes`
    write_records(batch, events, pack_chunks=pack_chunks, ranged_sources=ranged_sources)
    if batch:
        out += encode_zstd_frame(batch)
    return out
