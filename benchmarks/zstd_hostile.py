"""Benchmark: the scan time of nested Zstandard frames, and the peak memory of large RLE bombs.

    python3 benchmarks/zstd_hostile.py                  # 125 KB nested frames; 1 and 8 MiB bombs
    python3 benchmarks/zstd_hostile.py --nested-kb 31 62 125 250 --repeat 5
    python3 benchmarks/zstd_hostile.py --nested-kb --bomb-mib 8 --address-space 1024

Nested frames. A header frame, then a torn frame whose bytes are frame magics
one after another, 9 bytes apart: each starts a frame whose raw block holds
the next magic, so every one of them reads on to the end of the file. Before
a torn frame is truncated, the scan must prove that no complete frame follows
it, from every magic (docs/rfc/implemented/bug-fix/2026-12-01-zstd-damage-is-corruption.md).
A second file makes every one of those frames complete, with a wrong
checksum, behind a torn frame of its own. The table shows the best of
`--repeat` scans (`scan_jsonl_zstd`), the time per KB and the outcome; a
linear scan keeps the time per KB flat as the file grows.

RLE bombs. A header frame, then one frame that declares no content size and
holds RLE blocks of 4 bytes, each 128 KiB of zeros (32,768 to 1), with the
window a `zstd` writer gives it (2 MiB) and the largest libzstd decodes by
default (128 MiB). Each is loaded with `load_jsonl_zstd` under the default
`max_decoded_bytes` in a fresh process, which reports its peak resident set
(`VmHWM`, Linux) before and after the load, and the outcome. With
`--address-space MiB` each is loaded again under that limit on the address
space (RLIMIT_AS), and so is a 32 KiB bomb of 1 GiB under a cap of 2 GiB,
which lets its plaintext be kept: memory runs out, and the outcome must be
`LimitExceeded` (docs/rfc/implemented/bug-fix/2026-12-01-zstd-linear-scan-and-bounded-memory.md).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lean import status_bytes

from kernel import KernelError, SessionHeader
from kernel.storage.jsonl import header_line
from kernel.storage.zstd import (
    ZSTD_MAGIC,
    encode_zstd_frame,
    frame_end,
    load_jsonl_zstd,
    scan_jsonl_zstd,
)

MIB = 1 << 20
MAGIC = ZSTD_MAGIC.to_bytes(4, "little")
HEADER_FRAME = encode_zstd_frame(header_line(SessionHeader(id="hostile", created_at=0)) + b"\n")
RAW_6 = (6 << 3).to_bytes(3, "little")  # a raw block of 6 bytes, not the last
LAST_EMPTY = (1).to_bytes(3, "little")  # an empty raw block, the last


def nested_frames(size: int) -> bytes:
    """About `size` bytes: the header frame, then 9-byte units (magic, descriptor, window, block).

    The block of each unit is raw and holds the next unit's first 6 bytes, so
    from every magic the block headers chain on, 9 bytes at a time, past the end
    of the file: every unit starts a torn frame, the first one included.
    """
    unit = MAGIC + bytes([0x00, 0x00]) + RAW_6  # no checksum; a 1 KiB window
    return HEADER_FRAME + unit * ((size - len(HEADER_FRAME)) // len(unit))


def nested_complete_frames(size: int) -> bytes:
    """About `size` bytes (at most 128 KiB): units that all start complete frames, checksum wrong.

    The units announce a checksum, and a last block and a checksum close their
    chain, so every magic starts a complete frame that fails only its checksum.
    In front of them a frame with a 128 KiB window steps over the units 1,539
    bytes at a time (its blocks are the units' window byte and block header read
    as a 1,536-byte raw block) and runs past the end: the torn frame.
    """
    unit = MAGIC + bytes([0x04, 0x00]) + RAW_6
    torn = MAGIC + bytes([0x00, 0x38]) + (5 << 3).to_bytes(3, "little")  # lands on a window byte
    count = (min(size, 128 * 1024) - len(HEADER_FRAME) - len(torn) - 17) // len(unit)
    while True:
        data = HEADER_FRAME + torn + unit * count + bytes(6) + LAST_EMPTY + bytes(4)
        if frame_end(data, len(HEADER_FRAME)) is None:
            return data
        count -= 1  # the torn frame's last step landed inside the file: one unit fewer


def rle_bomb(size: int, window_log: int) -> bytes:
    """About `size` bytes: the header frame, then one frame of 128 KiB RLE blocks of zeros."""
    block = ((128 * 1024) << 3 | 1 << 1).to_bytes(3, "little") + b"\x00"
    last = ((128 * 1024) << 3 | 1 << 1 | 1).to_bytes(3, "little") + b"\x00"
    head = MAGIC + bytes([0x00, (window_log - 10) << 3])  # no content size, no checksum
    count = (size - len(HEADER_FRAME) - len(head)) // len(block)
    return HEADER_FRAME + head + block * (count - 1) + last


def outcome(read: Any) -> str:
    """What a read did: its result, or the class and the start of the message of its error."""
    try:
        result = read()
    except (KernelError, MemoryError) as exc:
        return f"{type(exc).__name__}: {str(exc)[:150]}"
    return f"torn={result.torn}" if hasattr(result, "torn") else "loaded"


def time_nested(sizes: Sequence[int], repeat: int) -> None:
    print("nested frames: best scan_jsonl_zstd of", repeat)
    print(f"{'file':22} {'bytes':>9} {'magics':>7} {'time':>10} {'per KB':>9}  outcome")
    for kb in sizes:
        for name, build in (("torn, all torn", nested_frames), ("torn, all complete", None)):
            if build is None:
                if kb * 1000 > 128 * 1024:
                    continue
                build = nested_complete_frames
            data = build(kb * 1000)
            best = float("inf")
            for _ in range(repeat):
                start = time.perf_counter()
                result = outcome(lambda: scan_jsonl_zstd(data))  # noqa: B023
                best = min(best, time.perf_counter() - start)
            print(
                f"{name:22} {len(data):>9,} {data.count(MAGIC) - 1:>7,} {best * 1000:>8.1f}ms "
                f"{best * 1e6 / (len(data) / 1000):>7.1f}us  {result}"
            )


def child(args: argparse.Namespace) -> None:
    """One bomb, one load, in this fresh process: print the figures as one JSON line."""
    data = rle_bomb(args.child_bytes, args.window_log)
    if args.address_space:
        limit = args.address_space * MIB
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    before = status_bytes("VmHWM")
    start = time.perf_counter()
    result = outcome(lambda: load_jsonl_zstd(data, now=0, max_decoded_bytes=args.cap))
    seconds = time.perf_counter() - start
    figures = {"before": before, "peak": status_bytes("VmHWM"), "seconds": seconds}
    print(json.dumps({**figures, "bytes": len(data), "outcome": result}))


def load_in_child(size: int, window_log: int, cap: int | None, address_space: int | None) -> str:
    """One row of the bomb table: a fresh process loads one bomb."""
    command = [sys.executable, __file__, "--child-bytes", str(size)]
    command += ["--window-log", str(window_log)]
    if cap is not None:
        command += ["--cap", str(cap)]
    if address_space:
        command += ["--address-space", str(address_space)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return f"the child failed (exit {done.returncode}): {done.stderr.strip()[-300:]}"
    report = json.loads(done.stdout.splitlines()[-1])
    return (
        f"{report['bytes']:>10,} {report['seconds']:>7.2f}s {report['before'] / MIB:>6.0f}MiB "
        f"{report['peak'] / MIB:>6.0f}MiB  {report['outcome']}"
    )


def measure_bombs(sizes: Sequence[int], address_space: int | None) -> None:
    print("\nRLE bombs: one load_jsonl_zstd in a fresh process; peak resident set (VmHWM)")
    print(f"{'bomb, window, cap':34} {'bytes':>10} {'time':>8} {'before':>8} {'peak':>8}  outcome")
    limits = [None, address_space] if address_space else [None]
    for limit in limits:
        where = f", {limit} MiB of address space" if limit else ""
        for mib in sizes:
            for window_log in (21, 27):
                label = f"{mib} MiB, 2^{window_log}, default{where}"
                print(f"{label:34} {load_in_child(mib * MIB, window_log, None, limit)}")
    if address_space:
        label = f"1 GiB in 32 KiB, 2^21, 2 GiB, {address_space} MiB of address space"
        print(f"{label}\n{'':34} {load_in_child(32 * 1024, 21, 2 << 30, address_space)}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nested-kb", type=int, nargs="*", default=[125], help="nested file sizes")
    parser.add_argument("--repeat", type=int, default=3, help="nested scans timed; the best kept")
    parser.add_argument("--bomb-mib", type=int, nargs="*", default=[1, 8], help="bomb file sizes")
    parser.add_argument("--address-space", type=int, help="also load under RLIMIT_AS, in MiB")
    parser.add_argument("--child-bytes", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--window-log", type=int, default=21, help=argparse.SUPPRESS)
    parser.add_argument("--cap", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_bytes:
        child(args)
        return
    if args.nested_kb:
        time_nested(args.nested_kb, args.repeat)
    if args.bomb_mib:
        measure_bombs(args.bomb_mib, args.address_space)


if __name__ == "__main__":
    main()
