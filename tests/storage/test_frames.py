"""Zstandard-framed JSONL (docs/format/persistence.md §8, §6.2): the structural frame scan, torn
frames, corruption inside complete frames, round trips, crash cuts at or after the header frame, bit
flips anywhere (damage followed by complete frames is corruption, never a torn tail), the search
for such frames (linear in the file), and the cap on decoded plaintext that stops a decompression
bomb before its plaintext is kept."""

from __future__ import annotations

import hashlib
import itertools
import subprocess
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import wire_records
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.errors import CorruptLog, KernelError, LimitExceeded, UnsupportedFormat
from kernel.folds.closers import interrupted_turn_closers
from kernel.storage.jsonl import (
    encode_records,
    header_line,
    load_jsonl,
    scan_jsonl,
    write_jsonl,
    write_records,
)
from kernel.storage.zstd import (
    MAX_DECODED_CEILING,
    MAX_DECODED_FLOOR,
    MAX_DECODED_RATIO,
    ZSTD_MAGIC,
    default_max_decoded_bytes,
    encode_zstd_frame,
    frame_end,
    load_jsonl_zstd,
    scan_frames,
    scan_jsonl_zstd,
    write_jsonl_zstd,
)
from kernel.values.events import APPEND, Event, SessionHeader
from kernel.wire.codec import event_to_wire
from kernel.wire.jsontext import encode_json_bytes

HEADER = SessionHeader(id="z", created_at=1)
HEADER_FRAME = encode_zstd_frame(header_line(HEADER) + b"\n")


def T(seq: int, turn: int = 1) -> bytes:
    return wire_records.T(seq, turn) + b"\n"


def E(seq: int, turn: int = 1) -> bytes:
    return wire_records.E(seq, turn) + b"\n"


def S(seq: int) -> bytes:
    return wire_records.S(seq) + b"\n"


def frames_of(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(data):
        end = frame_end(data, pos)
        assert end is not None
        out.append(data[pos:end])
        pos = end
    return out


def plaintext(frame: bytes) -> bytes:
    decoded: bytes = zstandard.ZstdDecompressor().decompressobj().decompress(frame)
    return decoded


def pseudo_random(size: int) -> bytes:
    out = b""
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(counter.to_bytes(8, "little")).digest()
        counter += 1
    return out[:size]


# -- step 1: the structural frame scan ----------------------------------------------------------

SAMPLES = {
    "empty": b"",
    "short text": b"hello\n",
    "rle": b"a" * 300_000,
    "raw": pseudo_random(20_000),
    "mixed": (b"line of text\n" * 5000) + pseudo_random(3000),
}
PARAMS = [
    {"level": 1, "write_checksum": True},
    {"level": 19, "write_checksum": False},
    {"level": 3, "write_checksum": True, "write_content_size": False},
    {"level": -5, "write_checksum": True},
]


@pytest.mark.parametrize("sample", sorted(SAMPLES))
@pytest.mark.parametrize("params", PARAMS, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
def test_p8_frame_end_finds_every_frame_boundary(sample: str, params: dict[str, Any]) -> None:
    frame = zstandard.ZstdCompressor(**params).compress(SAMPLES[sample])
    assert frame_end(frame, 0) == len(frame)
    doubled = frame + HEADER_FRAME
    assert frame_end(doubled, 0) == len(frame)
    assert frame_end(doubled, len(frame)) == len(doubled)
    step = max(1, len(frame) // 400)
    for cut in [*range(1, len(frame), step), len(frame) - 1]:
        assert frame_end(frame[:cut], 0) is None, cut


def test_p8_frame_end_uses_block_headers_including_rle_blocks() -> None:
    frame = zstandard.ZstdCompressor(level=3, write_checksum=True).compress(b"a" * 300_000)
    assert len(frame) < 100 and frame_end(frame, 0) == len(frame)
    assert frame[:4] == ZSTD_MAGIC.to_bytes(4, "little")


def test_p8_bad_magic_is_corrupt_and_a_partial_magic_is_torn() -> None:
    with pytest.raises(CorruptLog, match="magic"):
        frame_end(b"\x00" + HEADER_FRAME, 0)
    with pytest.raises(CorruptLog, match="magic"):
        frame_end(b"\x28\xb5\x00", 0)
    assert frame_end(b"\x28\xb5\x2f", 0) is None
    assert frame_end(HEADER_FRAME[:4], 0) is None


@pytest.mark.parametrize("bit", [0x08, 0x10])
def test_p8_reserved_descriptor_bits_are_corrupt(bit: int) -> None:
    damaged = bytearray(HEADER_FRAME)
    damaged[4] |= bit
    with pytest.raises(CorruptLog, match="reserved"):
        frame_end(bytes(damaged), 0)


def test_p8_reserved_block_type_is_corrupt() -> None:
    frame = zstandard.ZstdCompressor(level=3, write_content_size=False).compress(b"x" * 10)
    descriptor = frame[4]
    assert descriptor & 0x20 == 0  # not single-segment: a window byte follows
    block_at = 4 + 1 + 1
    damaged = bytearray(frame)
    damaged[block_at] |= 0b110  # block type 3
    with pytest.raises(CorruptLog, match="reserved block"):
        frame_end(bytes(damaged), 0)


# -- writing ------------------------------------------------------------------------------------


def chunk(seq: int, text: str) -> Event:
    return Event(
        "assistant/chunk",
        seq,
        seq,
        {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": text}},
    )


def small_log() -> list[Event]:
    return [
        Event("turn/start", 0, 0, {"turn": 1}),
        Event("step/start", 1, 1, {"turn": 1, "step": 1}),
        *[chunk(k, str(k)) for k in range(2, 7)],
        Event("step/end", 7, 7, {"turn": 1, "step": 1}),
        Event("turn/end", 8, 8, {"turn": 1, "reason": {"kind": "completed"}}),
    ]


def test_p8_write_puts_the_header_line_alone_in_frame_1_and_the_batch_in_frame_2() -> None:
    events = small_log()
    data = write_jsonl_zstd(HEADER, events)
    frames = frames_of(data)
    assert len(frames) == 2
    assert plaintext(frames[0]) == header_line(HEADER) + b"\n"
    assert plaintext(frames[1]) == encode_records(events)
    assert all(f[4] & 0x04 for f in frames), "content checksums are on"
    assert frames_of(write_jsonl_zstd(HEADER, [])) == [HEADER_FRAME]
    unpacked = frames_of(write_jsonl_zstd(HEADER, events, pack_chunks=False))[1]
    assert plaintext(unpacked) == encode_records(events, pack_chunks=False)


def test_write_records_adds_what_encode_records_returns_after_what_the_buffer_holds() -> None:
    events = small_log()
    for pack in (True, False):
        out = bytearray(b"before\n")
        write_records(out, events, pack_chunks=pack)
        assert out == b"before\n" + encode_records(events, pack_chunks=pack)
    empty = bytearray(b"x")
    write_records(empty, [])
    assert empty == b"x"
    # A frame of the buffer is the frame of its bytes (the writer compresses the buffer).
    assert encode_zstd_frame(bytearray(encode_records(events))) == encode_zstd_frame(
        encode_records(events)
    )


def test_p8_round_trip_plain_and_packed() -> None:
    events = small_log()
    for pack in (True, False):
        data = write_jsonl_zstd(HEADER, events, pack_chunks=pack)
        scan = scan_jsonl_zstd(data)
        assert scan.events == tuple(events) and not scan.torn and scan.torn_frame is None
        assert scan.committed_bytes == scan.total_bytes == len(data)
        loaded = load_jsonl_zstd(data, now=0, session_id="z")
        assert loaded.events == tuple(events) and loaded.header == SessionHeader(
            id="z", created_at=1, delegation_depth=0
        )


def test_p8_append_frames_extend_the_log() -> None:
    data = write_jsonl_zstd(HEADER, [Event("turn/start", 0, 0, {"turn": 1})])
    data += encode_zstd_frame(E(1)) + encode_zstd_frame(T(2, 2) + E(3, 2))
    assert [e.seq for e in scan_jsonl_zstd(data).events] == [0, 1, 2, 3]
    assert len(frames_of(data)) == 4


# -- steps 2-5: corruption ----------------------------------------------------------------------


def test_p8_no_complete_frame_is_corrupt() -> None:
    for data in (b"", HEADER_FRAME[:-1], HEADER_FRAME[:3]):
        with pytest.raises(CorruptLog):
            scan_jsonl_zstd(data)


def test_p8_header_frame_must_hold_exactly_the_header_line() -> None:
    line = header_line(HEADER)
    for text in (line, line + b"\n" + T(0), line + b"\n\n", b"\n" + line + b"\n"):
        with pytest.raises(CorruptLog):
            scan_jsonl_zstd(encode_zstd_frame(text))
    future = line.replace(b'"version":0', b'"version":1') + b"\n"
    with pytest.raises(UnsupportedFormat):
        scan_jsonl_zstd(encode_zstd_frame(future) + encode_zstd_frame(T(0)))


def test_p8_only_the_header_frame_is_an_empty_log() -> None:
    scan = scan_jsonl_zstd(HEADER_FRAME)
    assert scan.events == () and not scan.torn and scan.committed_bytes == len(HEADER_FRAME)


@pytest.mark.parametrize(
    "body",
    [
        T(0) + E(1) + b"{garbage\n",
        T(0) + E(1) + S(9),
        T(0) + E(1)[:-1],
        T(0) + b"\n",
        T(0) + b"42\n",
    ],
    ids=[
        "unparsable after turn/end",
        "gap after turn/end",
        "no final newline",
        "blank line",
        "non-object",
    ],
)
def test_p8_any_damage_inside_complete_frames_is_corrupt(body: bytes) -> None:
    with pytest.raises(CorruptLog, match="complete"):
        scan_jsonl_zstd(HEADER_FRAME + encode_zstd_frame(body))


def test_p8_damaged_payload_or_checksum_of_a_complete_frame_is_corrupt() -> None:
    body = encode_zstd_frame(T(0) + E(1) + T(2, 2) + E(3, 2))
    for position in (len(body) - 1, len(body) - 6):
        damaged = bytearray(body)
        damaged[position] ^= 0x41
        with pytest.raises(CorruptLog):
            scan_jsonl_zstd(HEADER_FRAME + bytes(damaged))


def test_p8_trailing_bytes_that_are_not_a_frame_are_corrupt() -> None:
    with pytest.raises(CorruptLog, match="magic"):
        scan_jsonl_zstd(HEADER_FRAME + encode_zstd_frame(T(0)) + b"\x00\x01\x02\x03\x04")


def test_p8_a_record_may_span_two_complete_frames() -> None:
    line = T(0)
    data = HEADER_FRAME + encode_zstd_frame(line[:10]) + encode_zstd_frame(line[10:])
    assert [e.seq for e in scan_jsonl_zstd(data).events] == [0]


# -- step 6 and §6.2: torn frames ---------------------------------------------------------------


def test_p8_a_torn_last_frame_recovers_its_readable_records() -> None:
    committed = HEADER_FRAME + encode_zstd_frame(T(0) + E(1))
    last = encode_zstd_frame(T(2, 2) + S(3) + b'{"type":"todo/write","seq":4,"time":4,"data":{}}\n')
    data = committed + last[:-2]  # checksum cut: every content byte is readable
    scan = scan_jsonl_zstd(data)
    assert scan.torn and scan.committed_bytes == len(committed)
    assert scan.torn_frame is not None and scan.torn_frame.truncate_to == len(committed)
    assert [e.seq for e in scan.torn_frame.recovered] == [2, 3, 4]
    assert [e.seq for e in scan.events] == [0, 1, 2, 3, 4]
    loaded = load_jsonl_zstd(data, now=0)
    assert [e.type for e in loaded.closers] == ["step/end", "turn/end"]
    assert loaded.torn and loaded.torn_frame == scan.torn_frame.__class__(
        len(committed), loaded.events[2:5]
    )
    repaired = data[: loaded.committed_bytes] + encode_zstd_frame(
        encode_records([*loaded.torn_frame.recovered, *loaded.closers])
    )
    again = load_jsonl_zstd(repaired, now=0)
    assert again.events == loaded.events and again.closers == () and not again.torn


def test_p8_a_torn_frame_cut_mid_block_recovers_complete_blocks_only() -> None:
    lines = b"".join(
        b'{"type":"todo/write","seq":%d,"time":0,"data":{"r":"%s"}}\n'
        % (seq, pseudo_random(40).hex().encode())
        for seq in range(1, 3000)
    )
    frame = zstandard.ZstdCompressor(level=1, write_checksum=True).compress(T(0) + lines)
    data = HEADER_FRAME + frame[: len(frame) // 2]
    scan = scan_jsonl_zstd(data)
    assert scan.torn_frame is not None and scan.torn_frame.truncate_to == len(HEADER_FRAME)
    recovered = [e.seq for e in scan.torn_frame.recovered]
    assert recovered == list(range(len(recovered))) and 0 < len(recovered) < 3000
    assert scan.dropped_records >= 0 and "incomplete" in str(scan.torn_reason)


def test_p8_a_torn_frame_that_does_not_decode_recovers_nothing() -> None:
    frame = bytearray(encode_zstd_frame(T(0) + S(1)))
    frame[-8] ^= 0xFF
    scan = scan_jsonl_zstd(HEADER_FRAME + bytes(frame[:-1]))
    assert scan.events == () and scan.torn_frame is not None
    assert scan.torn_frame.recovered == ()


def test_p8_damage_then_a_turn_end_inside_the_torn_frame_is_corrupt() -> None:
    torn = encode_zstd_frame(T(0) + b"{garbage\n" + E(1))[:-1]
    with pytest.raises(CorruptLog):
        scan_jsonl_zstd(HEADER_FRAME + torn)


def test_p8_plain_loader_refuses_zstd_bytes() -> None:
    with pytest.raises(CorruptLog):
        load_jsonl(write_jsonl_zstd(HEADER, small_log()), now=0)


# -- P37 for Zstandard: every cut at or after the header frame ----------------------------------


@st.composite
def framed_logs(draw: st.DrawFn) -> list[list[Event]]:
    """A small well-formed log split into append batches (one frame each)."""
    events: list[Event] = []

    def add(event_type: str, data: Any, **envelope: Any) -> None:
        events.append(Event(event_type, len(events), 100 + len(events), data, **envelope))

    for turn in range(1, draw(st.integers(1, 2)) + 1):
        add("turn/start", {"turn": turn})
        for step in range(1, draw(st.integers(0, 2)) + 1):
            add("step/start", {"turn": turn, "step": step})
            for k in range(draw(st.integers(0, 5))):
                add(
                    "assistant/chunk",
                    {
                        "turn": turn,
                        "step": step,
                        "chunk": {"type": "text-delta", "index": 0, "text": f"t{k}"},
                    },
                )
            call = f"c{turn}{step}"
            has_call = draw(st.booleans())
            add(
                "assistant/message",
                {
                    "turn": turn,
                    "step": step,
                    "message": {
                        "id": f"a{len(events)}",
                        "role": "assistant",
                        "source": {"kind": "model", "provider": "p", "model": "m"},
                        "content": [
                            {"type": "tool-call", "id": call, "name": "ls", "arguments": "{}"}
                        ]
                        if has_call
                        else [],
                    },
                },
                surface_op=APPEND,
            )
            if has_call:
                add(
                    "tool/call",
                    {"turn": turn, "step": step, "callId": call, "name": "ls", "arguments": "{}"},
                )
                add(
                    "tool/result",
                    {
                        "turn": turn,
                        "step": step,
                        "message": {
                            "id": f"r{len(events)}",
                            "role": "user",
                            "source": {"kind": "tool", "callId": call},
                            "content": [{"type": "tool-result", "toolCallId": call, "content": []}],
                        },
                    },
                    surface_op=APPEND,
                    source_event_seqs=(len(events) - 1,),
                )
            add("step/end", {"turn": turn, "step": step})
        add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    cuts = sorted(draw(st.sets(st.integers(1, len(events) - 1), max_size=3)))
    bounds = [0, *cuts, len(events)]
    return [events[a:b] for a, b in itertools.pairwise(bounds)]


def shown(events: Any) -> str:
    return "\n".join(encode_json_bytes(event_to_wire(e)).decode() for e in events)


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(framed_logs(), st.booleans())
def test_p37_zstd_every_cut_at_or_after_the_header_frame_loads(
    batches: list[list[Event]], pack: bool
) -> None:
    events = [e for batch in batches for e in batch]
    data = write_jsonl_zstd(HEADER, batches[0], pack_chunks=pack)
    for batch in batches[1:]:
        data += encode_zstd_frame(encode_records(batch, pack_chunks=pack))
    starts = [0]
    for batch in batches:
        starts.append(starts[-1] + len(batch))
    frame_starts = [0]
    while frame_starts[-1] < len(data):
        end = frame_end(data, frame_starts[-1])
        assert end is not None
        frame_starts.append(end)
    header_end = frame_starts[1]
    for cut in range(len(data) + 1):
        piece = data[:cut]
        if cut < header_end:
            with pytest.raises(CorruptLog):
                load_jsonl_zstd(piece, now=0)
            continue
        try:
            loaded = load_jsonl_zstd(piece, now=0)
        except KernelError as exc:  # pragma: no cover - the message shows the log
            raise AssertionError(f"cut at {cut} failed: {exc!r}\n{shown(events)}") from exc
        complete = max(i for i, s in enumerate(frame_starts) if s <= cut)
        safe = starts[complete - 1]  # events in frames that are complete at this cut
        n = len(loaded.events) - len(loaded.closers)
        assert safe <= n <= len(events), f"cut {cut}"
        assert loaded.events[:n] == tuple(events[:n]), f"cut {cut}\n{shown(events)}"
        assert loaded.closers == interrupted_turn_closers(events[:n])
        torn = cut > frame_starts[complete]
        assert loaded.torn == torn and (loaded.torn_frame is not None) == torn
        assert loaded.committed_bytes == frame_starts[complete]
        if loaded.torn_frame is not None:
            assert loaded.torn_frame.recovered == tuple(events[safe:n])


# -- damage followed by complete frames is corruption, never a torn tail ------------------------


def turn_batches(words: list[int], *, open_tail: bool) -> list[list[Event]]:
    """One completed turn per entry of `words`, appended in two batches as a runtime does.

    The first batch opens the turn and its step and streams `words[i]` text chunks; the
    second closes both. With `open_tail` a last batch opens one more turn and step and
    never closes them (the log of a live session, or of one that crashed).
    """
    events: list[Event] = []

    def add(event_type: str, data: Any) -> Event:
        events.append(Event(event_type, len(events), len(events), data))
        return events[-1]

    batches: list[list[Event]] = []
    for turn, count in enumerate(words, 1):
        first = [add("turn/start", {"turn": turn}), add("step/start", {"turn": turn, "step": 1})]
        for k in range(count):
            text = f"word {k * 7919 % 1000} of turn {turn} "
            chunk_data = {"type": "text-delta", "index": 0, "text": text}
            first.append(add("assistant/chunk", {"turn": turn, "step": 1, "chunk": chunk_data}))
        step_end = add("step/end", {"turn": turn, "step": 1})
        turn_end = add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        batches += [first, [step_end, turn_end]]
    if open_tail:
        turn = len(words) + 1
        batches.append(
            [add("turn/start", {"turn": turn}), add("step/start", {"turn": turn, "step": 1})]
        )
    return batches


def framed(batches: list[list[Event]]) -> bytes:
    """The `.jsonl.zstd` bytes a store writes: materialization, then one frame per append."""
    data = write_jsonl_zstd(HEADER, batches[0])
    for batch in batches[1:]:
        data += encode_zstd_frame(encode_records(batch))
    return data


def frame_starts(data: bytes) -> list[int]:
    """The start of every frame of `data`, and its length last."""
    starts = [0]
    while starts[-1] < len(data):
        end = frame_end(data, starts[-1])
        assert end is not None
        starts.append(end)
    return starts


def first_block_header(frame: bytes, start: int) -> int:
    """The offset of the first block header of the frame at `start` (RFC 8878 §3.1.1)."""
    descriptor = frame[start + 4]
    single_segment = bool(descriptor & 0x20)
    content_size_bytes = (1 if single_segment else 0, 2, 4, 8)[descriptor >> 6]
    window_bytes = 0 if single_segment else 1
    return start + 5 + window_bytes + (0, 1, 2, 4)[descriptor & 0x03] + content_size_bytes


def last_turn_end(events: list[Event]) -> int:
    return max(i for i, e in enumerate(events) if e.type == "turn/end")


def test_p8_a_flipped_block_size_bit_in_an_early_frame_is_corrupt_not_a_torn_tail() -> None:
    """One bit in the block-size field of a committed frame made the scan run past the end
    of the file; the log loaded as torn right after frame 1 and repair deleted every later
    frame (a 44-frame, 334-event log kept 18 events)."""
    batches = turn_batches([400, 3, 3, 3], open_tail=True)
    data = framed(batches)
    starts = frame_starts(data)
    at = first_block_header(data, starts[1])  # the first batch, written at materialization
    header = int.from_bytes(data[at : at + 3], "little")
    larger = (  # a clear block-size bit set: the block seems to run on
        data[:at] + (header | 1 << bit).to_bytes(3, "little") + data[at + 3 :]
        for bit in range(3, 24)
        if not header >> bit & 1
    )
    damaged = next(d for d in larger if frame_end(d, starts[1]) is None)
    # The structural scan alone cannot tell this from a crash mid-append: it ends inside frame 1.
    assert frame_end(damaged, starts[1]) is None
    message = f"frame at byte {starts[1]} .* complete frame follows at byte {starts[2]}"
    with pytest.raises(CorruptLog, match=message):
        load_jsonl_zstd(damaged, now=0)
    with pytest.raises(CorruptLog, match=message):
        scan_jsonl_zstd(damaged)


def test_p8_a_block_larger_than_the_frame_allows_is_corrupt() -> None:
    """A block may not exceed the smaller of the window size and 128 KiB; in a single-segment
    frame (as the kernel writes them) the window is the frame's content size."""
    content = T(0) + E(1)
    frame = encode_zstd_frame(content)
    at = first_block_header(frame, 0)
    header = int.from_bytes(frame[at : at + 3], "little")
    for size_bit in (len(content).bit_length(), 20):  # just past the content size; past 128 KiB
        assert not header >> (3 + size_bit) & 1
        damaged = (
            frame[:at] + (header | 1 << (3 + size_bit)).to_bytes(3, "little") + frame[at + 3 :]
        )
        with pytest.raises(CorruptLog, match=f"block at byte {at} declares .* maximum block size"):
            frame_end(damaged, 0)
        with pytest.raises(CorruptLog, match=f"block at byte {at + len(HEADER_FRAME)} declares"):
            scan_jsonl_zstd(HEADER_FRAME + damaged)


def test_p8_a_block_size_made_smaller_ends_the_frame_early_and_is_corrupt() -> None:
    """The scan then ends the frame inside its own bytes, and what follows is no frame:
    corruption, even when the log also ends in a torn frame."""
    data = framed(turn_batches([5, 5], open_tail=True))
    starts = frame_starts(data)
    at = first_block_header(data, starts[2])
    header = int.from_bytes(data[at : at + 3], "little")
    lowest_size_bit = (header >> 3 & -(header >> 3)) << 3
    damaged = data[:at] + (header ^ lowest_size_bit).to_bytes(3, "little") + data[at + 3 :]
    end = frame_end(damaged, starts[2])
    assert end is not None and end < starts[3]
    for torn in (damaged, damaged[:-3]):
        with pytest.raises(CorruptLog, match=f"no Zstandard frame at byte {end}"):
            load_jsonl_zstd(torn, now=0)


def flipped(data: bytes, position: int, bit: int) -> bytes:
    damaged = bytearray(data)
    damaged[position] ^= 1 << bit
    return bytes(damaged)


@pytest.mark.slow
def test_p8_every_flipped_bit_is_corrupt_or_keeps_every_committed_turn() -> None:
    """Flip each bit of a multi-frame log in turn. Every flip either raises CorruptLog or
    loads every event up to the last turn/end unchanged: no committed event is dropped. The
    last frame holds only an open turn, so a flip there may read as a torn tail."""
    batches = turn_batches([4, 2, 3], open_tail=True)
    events = [e for batch in batches for e in batch]
    data = framed(batches)
    keep = last_turn_end(events) + 1
    torn_flips = 0
    for position in range(len(data)):
        for bit in range(8):
            try:
                loaded = load_jsonl_zstd(flipped(data, position, bit), now=0)
            except CorruptLog:
                continue
            n = len(loaded.events) - len(loaded.closers)
            where = f"bit {bit} of byte {position}"
            assert n >= keep, f"{where}: kept {n} of {keep} committed events\n{shown(events)}"
            assert loaded.events[:n] == tuple(events[:n]), f"{where}: events changed"
            torn_flips += loaded.torn
    assert torn_flips > 0  # flips in the open last frame are torn tails, not errors


@pytest.mark.slow
def test_p8_a_flip_that_hides_the_end_of_the_last_frame_loses_at_most_that_frame() -> None:
    """When the last frame holds the last turn/end, a flipped block-size bit that only makes
    it look unfinished cannot be told from a crash during that append (nothing follows it):
    it reads as a torn tail. Every earlier frame's events are kept; nothing else is lost."""
    batches = turn_batches([4, 2, 3], open_tail=False)
    events = [e for batch in batches for e in batch]
    data = framed(batches)
    starts = frame_starts(data)
    before_last = len(events) - len(batches[-1])
    for position in range(len(data)):
        for bit in range(8):
            try:
                loaded = load_jsonl_zstd(flipped(data, position, bit), now=0)
            except CorruptLog:
                continue
            n = len(loaded.events) - len(loaded.closers)
            where = f"bit {bit} of byte {position}"
            assert loaded.events[:n] == tuple(events[:n]), f"{where}: events changed"
            if n < len(events):
                assert position >= starts[-2] and n >= before_last, where
                assert loaded.torn and loaded.committed_bytes == starts[-2], where


@pytest.mark.slow
def test_p3_every_flipped_bit_before_the_last_turn_end_is_corrupt_or_harmless() -> None:
    """The same sweep for plain JSONL (docs/format/persistence.md §3.2), which has no checksums: a
    flip may change a value undetectably, but damage followed by a real turn/end is never
    repaired away, and no record before the damage is ever dropped."""
    batches = turn_batches([3, 2], open_tail=True)
    events = [e for batch in batches for e in batch]
    data = write_jsonl(HEADER, events)
    line_starts = [0, *(i + 1 for i, byte in enumerate(data) if byte == 0x0A)]
    events_before = [len(scan_jsonl(data[:start]).events) if start else 0 for start in line_starts]
    keep = last_turn_end(events) + 1
    torn_flips = 0
    for position in range(len(data)):
        line = data.count(b"\n", 0, position)  # 0 is the header line
        touched = line + 1 + (data[position] == 0x0A)  # a flipped newline fuses two lines
        rest = data[line_starts[min(touched, len(line_starts) - 1)] :]
        turn_end_follows = touched < len(line_starts) - 1 and b'"type":"turn/end"' in rest
        for bit in range(8):
            try:
                loaded = load_jsonl(flipped(data, position, bit), now=0)
            except (CorruptLog, UnsupportedFormat):
                continue
            n = len(loaded.events) - len(loaded.closers)
            where = f"bit {bit} of byte {position} (line {line + 1})"
            assert n >= events_before[line], f"{where}: a record before the damage was dropped"
            assert loaded.events[: events_before[line]] == tuple(events[: events_before[line]])
            if turn_end_follows:
                assert n >= keep, f"{where}: damage before a turn/end was repaired away"
            torn_flips += loaded.torn
    assert torn_flips > 0  # flips in the open last turn are torn tails, not errors


# -- the search after a torn frame: each block header read about once --------------------------

MAGIC = ZSTD_MAGIC.to_bytes(4, "little")
RAW_6 = (6 << 3).to_bytes(3, "little")  # a raw block of 6 bytes, not the last


def nested_torn_frames(units: int) -> bytes:
    """The header frame, then `units` frame magics 9 bytes apart, each the start of a torn frame.

    Each unit is a magic, a descriptor (no checksum), a 1 KiB window and a raw
    block holding the next unit's first 6 bytes, so from every magic the block
    headers chain on to the end of the file and no frame is complete.
    """
    return HEADER_FRAME + (MAGIC + b"\x00\x00" + RAW_6) * units


class CountedBytes(bytes):
    """Bytes that count how often the scan reads a byte or a slice of them."""

    reads = 0

    def __getitem__(self, key: Any) -> Any:
        type(self).reads += 1
        return super().__getitem__(key)


def reads_to_scan(data: bytes) -> int:
    CountedBytes.reads = 0
    raw = scan_frames(CountedBytes(data))
    assert raw is not None and raw.torn_frame_start == len(HEADER_FRAME)
    return CountedBytes.reads


def test_p8_the_search_after_a_torn_frame_reads_each_block_header_about_once() -> None:
    """Nested frame magics: every one starts a frame whose blocks run to the end of the file.
    Walking from each magic alone reads about n**2 / 2 block headers for n magics (a 125 KB
    file took 24 s); walks that meet share what lies ahead, so four times the magics cost
    about four times the reads."""
    small, large = reads_to_scan(nested_torn_frames(1000)), reads_to_scan(nested_torn_frames(4000))
    assert small >= 1000  # every magic is looked at
    assert large < 6 * small, f"{small:,} reads for 1,000 magics, {large:,} for 4,000"


def test_p8_nested_torn_frames_read_as_one_torn_tail() -> None:
    data = nested_torn_frames(14_000)  # 126 KB: the audit's file
    scan = scan_jsonl_zstd(data)
    assert scan.events == () and scan.torn_frame is not None
    assert scan.torn_frame.truncate_to == scan.committed_bytes == len(HEADER_FRAME)
    assert scan.total_bytes == len(data) and scan.torn_frame.recovered == ()


def nested_complete_frames(units: int) -> bytes:
    """`units` complete frames that overlap and fail only their checksum, behind a torn frame.

    The units announce a checksum; a last block and 4 checksum bytes close their
    chain. The frame in front has a 128 KiB window: its first block lands on the
    first unit's window byte, which with that unit's block header reads as a
    1,536-byte raw block, so it steps over the units 1,539 bytes at a time and
    runs past the end.
    """
    torn = MAGIC + b"\x00\x38" + (5 << 3).to_bytes(3, "little")
    units_bytes = (MAGIC + b"\x04\x00" + RAW_6) * units
    return HEADER_FRAME + torn + units_bytes + bytes(6) + (1).to_bytes(3, "little") + bytes(4)


def test_p8_complete_frames_that_overlap_after_a_torn_frame_are_corrupt() -> None:
    """Frames that read as complete are decoded one by one only while together they span no
    more than the bytes after the torn frame: a committed frame that follows damage decodes
    at the first try, and a crash leaves no complete frame behind it, let alone two that
    overlap."""
    data = nested_complete_frames(300)
    start = len(HEADER_FRAME)
    assert frame_end(data, start) is None
    magics = [at for at in range(start + 1, len(data)) if data.startswith(MAGIC, at)]
    assert all(frame_end(data, at) == len(data) for at in magics)
    with pytest.raises(CorruptLog, match=f"frame at byte {start} .* overlap one another"):
        scan_jsonl_zstd(data)


def first_complete_frame_after(data: bytes, start: int) -> int | str | None:
    """The rule, read from the magic at every offset after `start` in turn (n**2 / 2 reads)."""
    room = len(data) - start
    for at in range(start + 1, len(data)):
        if not data.startswith(MAGIC, at):
            continue
        try:
            end = frame_end(data, at)
        except CorruptLog:
            continue
        if end is None:
            continue
        room -= end - at
        if room < 0:
            return "overlap"
        decoder = zstandard.ZstdDecompressor().decompressobj()
        try:
            decoder.decompress(data[at:end])
        except zstandard.ZstdError:
            continue
        if decoder.eof and not decoder.unused_data:
            return at
    return None


BLOCK_PIECES = st.sampled_from(
    [
        MAGIC,
        *(bytes([d]) for d in (0x00, 0x04, 0x20, 0x24, 0x60, 0xA4, 0x08)),  # descriptors
        *(bytes([w]) for w in (0x00, 0x10, 0x38)),  # windows: 1, 4 and 128 KiB
        *(
            ((size << 3) | kind << 1 | last).to_bytes(3, "little")
            for size in (0, 1, 2, 6, 9, 40, 2000)
            for kind in (0, 1, 3)
            for last in (0, 1)
        ),
        bytes(3),
        bytes(4),
        MAGIC + b"\x00\x00" + RAW_6,
        encode_zstd_frame(T(0)),
        encode_zstd_frame(T(0))[:-1],
        flipped(encode_zstd_frame(T(0)), 12, 0),
    ]
)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.lists(BLOCK_PIECES, max_size=60))
def test_p8_the_search_after_a_torn_frame_agrees_with_trying_every_magic(
    pieces: list[bytes],
) -> None:
    """The shared walks find the same first complete, decodable frame after a torn one as
    trying every later magic on its own, and the same overlap."""
    committed = HEADER_FRAME + encode_zstd_frame(T(0))
    payload = b"".join(pieces)
    torn = MAGIC + b"\x00\x38" + ((len(payload) + 1) << 3).to_bytes(3, "little")
    data = committed + torn + payload  # a raw block running past the end: a torn frame
    expected = first_complete_frame_after(data, len(committed))
    try:
        scan = scan_jsonl_zstd(data)
    except CorruptLog as exc:
        if expected == "overlap":
            assert "overlap one another" in str(exc)
        else:
            assert f"a complete frame follows at byte {expected}" in str(exc), str(exc)
        return
    assert expected is None and scan.torn_frame is not None
    assert scan.torn_frame.truncate_to == len(committed)


# -- the cap on decoded plaintext: a decompression bomb is refused ------------------------------

MIB = 1 << 20


def zeros_frame(size: int, *, declare: bool) -> bytes:
    """A checksummed frame of `size` zero bytes, compressed 1 MiB at a time (never all held).

    With `declare` the header states the content size; without, it does not (a streaming
    writer's frame), so only decoding can tell how large it is.
    """
    compressor = zstandard.ZstdCompressor(level=3, write_checksum=True, write_content_size=declare)
    stream = compressor.compressobj(size=size if declare else -1)
    zeros = bytes(MIB)
    parts = [stream.compress(zeros[: min(MIB, size - done)]) for done in range(0, size, MIB)]
    return b"".join(parts) + stream.flush()


@contextmanager
def peak_memory() -> Iterator[Callable[[], int]]:
    """The peak of traced allocations inside the block (call the yielded function after it)."""
    tracemalloc.start()
    peak = 0
    try:
        yield lambda: peak
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()


def decoded_size(data: bytes) -> int:
    """The plaintext a scan of `data` decodes: every complete frame, then the torn one's part."""
    starts = [0]
    while starts[-1] < len(data) and frame_end(data, starts[-1]) is not None:
        end = frame_end(data, starts[-1])
        assert end is not None
        starts.append(end)
    size = sum(len(plaintext(data[a:b])) for a, b in itertools.pairwise(starts))
    if starts[-1] < len(data):
        size += len(plaintext(data[starts[-1] :]))
    return size


def test_p8_a_zstd_bomb_is_refused_once_its_plaintext_passes_the_cap() -> None:
    """64 MiB of zeros in a 2 KB frame that does not declare its size: decoding is streamed
    and stops at the cap, so memory stays far below the bomb's size (it used to be decoded
    whole, and a 48 KB file took 1.5 GiB)."""
    bomb = zeros_frame(64 * MIB, declare=False)
    assert len(bomb) * MAX_DECODED_RATIO < 64 * MIB
    data = HEADER_FRAME + bomb
    for read in (
        lambda: load_jsonl_zstd(data, now=0, max_decoded_bytes=MIB),
        lambda: scan_jsonl_zstd(data, max_decoded_bytes=MIB),
    ):
        with peak_memory() as peak, pytest.raises(LimitExceeded) as refused:
            read()
        assert peak() < 4 * MIB, f"peak {peak():,} bytes"
        error = refused.value
        assert error.limit == MIB and error.offset == len(HEADER_FRAME)
        assert f"frame at byte {len(HEADER_FRAME)}" in str(error)
        assert "1,048,576" in str(error) and "larger max_decoded_bytes" in str(error)
        assert not isinstance(error, CorruptLog)


def test_p8_the_default_cap_refuses_a_bomb_that_does_not_declare_its_size() -> None:
    """Past 64 MiB a log must not expand more than 1000 times: the same bomb, one byte larger
    than the floor, fails under the default cap after decoding at most the cap."""
    data = HEADER_FRAME + zeros_frame(64 * MIB + 1, declare=False)
    assert default_max_decoded_bytes(len(data)) == MAX_DECODED_FLOOR
    with peak_memory() as peak, pytest.raises(LimitExceeded, match="default") as refused:
        load_jsonl_zstd(data, now=0)
    assert refused.value.limit == MAX_DECODED_FLOOR
    assert peak() < MAX_DECODED_FLOOR + 4 * MIB, f"peak {peak():,} bytes"


def test_p8_a_frame_declaring_more_than_the_cap_fails_before_decoding() -> None:
    bomb = zeros_frame(64 * MIB + 1, declare=True)
    data = HEADER_FRAME + encode_zstd_frame(T(0)) + bomb
    at = len(data) - len(bomb)
    with peak_memory() as peak, pytest.raises(LimitExceeded, match="declare") as refused:
        load_jsonl_zstd(data, now=0)
    assert refused.value.offset == at and f"frame at byte {at}" in str(refused.value)
    assert peak() < MIB, f"peak {peak():,} bytes: the frame was decoded"


def test_p8_a_torn_bomb_is_refused_too() -> None:
    """A torn last frame is decoded as far as it goes, under the same cap."""
    committed = HEADER_FRAME + encode_zstd_frame(T(0) + E(1))
    data = committed + zeros_frame(64 * MIB, declare=False)[:-3]
    with peak_memory() as peak, pytest.raises(LimitExceeded) as refused:
        scan_jsonl_zstd(data, max_decoded_bytes=MIB)
    assert refused.value.offset == len(committed) and peak() < 4 * MIB


def test_p8_a_log_exactly_at_the_cap_loads_and_one_byte_less_is_refused() -> None:
    """The cap counts every decoded byte: the header line, complete frames, a torn frame."""
    batches = turn_batches([40, 3, 3], open_tail=True)
    whole = framed(batches)
    assert decoded_size(whole[:-2]) == decoded_size(whole)  # a checksum cut: all is readable
    for data in (whole, whole[:-2]):
        size = decoded_size(data)
        loaded = load_jsonl_zstd(data, now=0, max_decoded_bytes=size)
        assert loaded == load_jsonl_zstd(data, now=0) and loaded.torn == (data != whole)
        assert scan_jsonl_zstd(data, max_decoded_bytes=size) == scan_jsonl_zstd(data)
        with pytest.raises(LimitExceeded, match=f"{size - 1:,}"):
            load_jsonl_zstd(data, now=0, max_decoded_bytes=size - 1)
        with pytest.raises(LimitExceeded, match=f"{size - 1:,}"):
            scan_jsonl_zstd(data, max_decoded_bytes=size - 1)


def test_p8_the_cap_applies_to_each_scan_of_a_load() -> None:
    """The typed path declines this log (a `turn/start` with a member too many) after
    decoding it; the exact pipeline scans again with the whole cap and names the real error."""
    body = b'{"type":"turn/start","seq":0,"time":0,"data":{"turn":1,"extra":{"kind":"u"}}}\n'
    data = HEADER_FRAME + encode_zstd_frame(body)
    with pytest.raises(CorruptLog, match="R12"):
        load_jsonl_zstd(data, now=0, max_decoded_bytes=decoded_size(data))


def test_p8_a_content_size_larger_than_the_blocks_can_hold_is_corrupt() -> None:
    """A flipped high bit of a committed frame's content size must read as damage (CorruptLog),
    not as a frame too large to read (LimitExceeded): a frame of n blocks holds at most
    n * 128 KiB."""
    content = pseudo_random(70_000).hex().encode()[:70_000]
    frame = encode_zstd_frame(content)
    assert frame[4] >> 6 == 2 and frame[4] & 0x20  # single segment, a 4-byte content size
    damaged = frame[:8] + bytes([frame[8] | 0x80]) + frame[9:]
    message = r"declares \d+ bytes of content, more than its 1 block\(s\)"
    with pytest.raises(CorruptLog, match=message):
        frame_end(damaged, 0)
    with pytest.raises(CorruptLog, match=message):
        load_jsonl_zstd(HEADER_FRAME + damaged, now=0)


def test_p8_the_default_cap_is_1000_times_the_stored_size_between_64_and_256_mib() -> None:
    assert (MAX_DECODED_FLOOR, MAX_DECODED_RATIO, MAX_DECODED_CEILING) == (
        64 * MIB,
        1000,
        256 * MIB,
    )
    assert default_max_decoded_bytes(0) == default_max_decoded_bytes(65_536) == 64 * MIB
    assert default_max_decoded_bytes(100_000) == 10**8
    assert default_max_decoded_bytes(10**6) == default_max_decoded_bytes(10**10) == 256 * MIB
    # The audit's bomb, 48 KB that decode to 1.5 GiB, is past it; a log 20 times compressed
    # (real session logs: 2-10 times) is inside it up to 256 MiB of plaintext.
    assert default_max_decoded_bytes(49_174) < 3 << 29
    assert all(default_max_decoded_bytes(n) > 20 * n for n in (1, 10**4, 10**7))


@pytest.mark.parametrize("value", [-1, 1.5, True, "1"])
def test_p8_max_decoded_bytes_must_be_a_non_negative_int(value: Any) -> None:
    with pytest.raises(ValueError, match="max_decoded_bytes"):
        scan_jsonl_zstd(HEADER_FRAME, max_decoded_bytes=value)


def test_p8_a_bomb_is_refused_before_any_of_its_plaintext_is_kept() -> None:
    """A frame that declares no content size is decoded once, keeping nothing, to count it
    before its plaintext is kept: a bomb past the cap costs the cap in decoding, not in memory
    (it used to be kept up to the cap, 1 GiB for a 1 MiB file under the old default)."""
    committed = HEADER_FRAME + encode_zstd_frame(T(0) + E(1))
    bomb = zeros_frame(64 * MIB, declare=False)
    for data, at in (
        (HEADER_FRAME + bomb, len(HEADER_FRAME)),
        (committed + bomb[:-3], len(committed)),
    ):
        with peak_memory() as peak, pytest.raises(LimitExceeded) as refused:
            load_jsonl_zstd(data, now=0, max_decoded_bytes=32 * MIB)
        assert refused.value.offset == at and refused.value.limit == 32 * MIB
        assert peak() < MIB, f"peak {peak():,} bytes"


def test_p8_frames_that_declare_no_content_size_load_under_the_same_cap() -> None:
    """Counted by a first decoding, then decoded again and kept: the same events, and the cap
    counts each byte once."""
    batches = turn_batches([40, 3, 3], open_tail=True)
    compressor = zstandard.ZstdCompressor(level=3, write_checksum=True, write_content_size=False)
    texts = [header_line(HEADER) + b"\n", *(encode_records(batch) for batch in batches)]
    whole = b"".join(compressor.compress(text) for text in texts)
    assert all(frame[4] >> 6 == 0 and not frame[4] & 0x20 for frame in frames_of(whole))
    events = load_jsonl_zstd(framed(batches), now=0).events
    for data in (whole, whole[:-2]):
        size = decoded_size(data)
        loaded = load_jsonl_zstd(data, now=0, max_decoded_bytes=size)
        assert loaded.events == events and loaded.torn == (data != whole)
        with pytest.raises(LimitExceeded, match=f"{size - 1:,}"):
            load_jsonl_zstd(data, now=0, max_decoded_bytes=size - 1)


OUT_OF_MEMORY = """
import resource
from kernel.storage.jsonl import header_line
from kernel.errors import LimitExceeded
from kernel.values.events import SessionHeader
from kernel.storage.zstd import encode_zstd_frame, load_jsonl_zstd

block = ((128 * 1024) << 3 | 2).to_bytes(3, "little") + b"\\0"  # RLE: 128 KiB of zeros
last = ((128 * 1024) << 3 | 3).to_bytes(3, "little") + b"\\0"
data = encode_zstd_frame(header_line(SessionHeader(id="z", created_at=1)) + b"\\n")
data += bytes.fromhex("28b52ffd0058") + block * 4095 + last  # 512 MiB, no content size
resource.setrlimit(resource.RLIMIT_AS, (256 << 20, 256 << 20))
try:
    load_jsonl_zstd(data, now=0, max_decoded_bytes=1 << 30)
except LimitExceeded as exc:
    print(f"LimitExceeded {exc.limit}: {exc}")
"""


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS bounds the address space on Linux")
def test_p8_a_read_that_runs_out_of_memory_is_limit_exceeded() -> None:
    """512 MiB of zeros in a 16 KiB frame, read with a cap of 1 GiB in a process limited to
    256 MiB of address space: the plaintext fits the cap but not the memory. That is
    LimitExceeded naming the cap, never a MemoryError."""
    done = subprocess.run(
        [sys.executable, "-c", OUT_OF_MEMORY], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"LimitExceeded {1 << 30}: "), done.stdout
    assert "out of memory" in done.stdout and "1,073,741,824" in done.stdout
