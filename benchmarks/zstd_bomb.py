"""Benchmark: the time and memory the default decoded-size cap takes to refuse a Zstandard bomb.

    python3 benchmarks/zstd_bomb.py                     # the audit's bomb: 1.5 GiB in 48 KB
    python3 benchmarks/zstd_bomb.py --mib 256 --repeat 5 --ratio-events 100000

Builds a `.jsonl.zstd` log of a header frame and one frame of `--mib` MiB of
zeros, compressed 1 MiB at a time (the bomb is never held whole), twice: once
declaring its content size in the frame header (as the `zstd` tool and the
kernel's writer do) and once not (a streaming writer's frame, which only
decoding can size). Each is loaded with `load_jsonl_zstd` under the default
`max_decoded_bytes`; the table shows the best of `--repeat` refusals, the
`tracemalloc` peak and the resident-set growth (`VmHWM`, Linux) of one
refusal. Then it prints the compression ratios of the benchmark logs as the
kernel writes them, in one frame and in one frame per 20-event append: the
figures behind the default cap
(docs/rfc/implemented/feature/2026-12-01-zstd-decoded-size-cap.md).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lean import status_bytes
from logs import adversarial_log, compaction_heavy_log
from realistic import realistic_log

from kernel import LimitExceeded, SessionHeader, event_from_json, write_jsonl, write_jsonl_zstd
from kernel.storage.jsonl import encode_records, header_line
from kernel.storage.zstd import default_max_decoded_bytes, encode_zstd_frame, load_jsonl_zstd

MIB = 1 << 20
HEADER = SessionHeader(id="bomb", created_at=0)


def zeros_frame(size: int, *, declare: bool) -> bytes:
    """One checksummed frame of `size` zero bytes, compressed 1 MiB at a time."""
    compressor = zstandard.ZstdCompressor(level=3, write_checksum=True, write_content_size=declare)
    stream = compressor.compressobj(size=size if declare else -1)
    zeros = bytes(MIB)
    parts = [stream.compress(zeros[: min(MIB, size - done)]) for done in range(0, size, MIB)]
    return b"".join(parts) + stream.flush()


def bomb_log(size: int, *, declare: bool) -> bytes:
    """A header frame, then the bomb: what an attacker would leave in a session directory."""
    return encode_zstd_frame(header_line(HEADER) + b"\n") + zeros_frame(size, declare=declare)


def _refuse(data: bytes) -> str:
    """Load `data` under the default cap; the refusal's message (anything else is a failure)."""
    try:
        load_jsonl_zstd(data, now=0)
    except LimitExceeded as exc:
        return str(exc)
    raise SystemExit("the bomb loaded: the default cap did not refuse it")


def measure_refusal(data: bytes, repeat: int) -> dict[str, Any]:
    """Best time of `repeat` refusals, then the memory of one (resident set, then tracemalloc)."""
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        message = _refuse(data)
        times.append(time.perf_counter() - start)
    gc.collect()
    before = status_bytes("VmRSS")
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")  # restart VmHWM from the current size
    _refuse(data)
    rss_peak = max(status_bytes("VmHWM") - before, 0)
    tracemalloc.start()
    _refuse(data)
    traced_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"seconds": min(times), "rss": rss_peak, "traced": traced_peak, "message": message}


def _ratios(events: list[Any], batch: int = 20) -> tuple[int, float, float]:
    """Plain size, and its ratio to the one-frame and the one-frame-per-`batch` zstd sizes."""
    plain = len(write_jsonl(HEADER, events))
    one = len(write_jsonl_zstd(HEADER, events))
    appended = len(write_jsonl_zstd(HEADER, events[:batch])) + sum(
        len(encode_zstd_frame(encode_records(events[k : k + batch])))
        for k in range(batch, len(events), batch)
    )
    return plain, plain / one, plain / appended


def print_ratios(size: int) -> None:
    logs: dict[str, Callable[[], list[dict[str, Any]]]] = {
        f"realistic {size:,}": lambda: realistic_log(size, 0),
        f"compaction-heavy {size:,}": lambda: compaction_heavy_log(size, 3),
        f"adversarial {size // 2:,}+{size // 2:,}": lambda: adversarial_log(size // 2),
    }
    print("\nplaintext / stored size of the benchmark logs (the default cap allows 1000)")
    print(f"{'log':32} {'plain bytes':>13} {'one frame':>10} {'20-event frames':>16}")
    for name, build in logs.items():
        plain, one, appended = _ratios([event_from_json(w) for w in build()])
        print(f"{name:32} {plain:>13,} {one:>9.1f}x {appended:>15.1f}x")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--mib", type=int, default=1536, help="the bomb's plaintext, in MiB")
    parser.add_argument("--repeat", type=int, default=3, help="refusals timed; the best is kept")
    parser.add_argument(
        "--ratio-events", type=int, default=20_000, help="events per ratio log (0: skip)"
    )
    args = parser.parse_args(argv)
    size = args.mib * MIB
    print(f"bomb: {size:,} zero bytes in one frame; default max_decoded_bytes")
    print(
        f"{'frame header':20} {'stored':>9} {'ratio':>8} {'cap':>14} {'time':>9} "
        f"{'RSS peak':>10} {'traced peak':>12}"
    )
    for declare in (True, False):
        data = bomb_log(size, declare=declare)
        figures = measure_refusal(data, args.repeat)
        label = "declares its size" if declare else "no content size"
        print(
            f"{label:20} {len(data):>9,} {size / len(data):>7,.0f}x "
            f"{default_max_decoded_bytes(len(data)):>14,} {figures['seconds'] * 1000:>7.1f}ms "
            f"{figures['rss'] / MIB:>8.1f}MiB {figures['traced'] / MIB:>10.2f}MiB"
        )
        print(f"  {figures['message']}")
    if args.ratio_events:
        print_ratios(args.ratio_events)


if __name__ == "__main__":
    main()
