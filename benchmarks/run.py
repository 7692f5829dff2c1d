"""Benchmark: each fold and the whole load as a ratio to the orjson decode of the same bytes.

    python3 benchmarks/run.py                 # 10k and 100k events
    python3 benchmarks/run.py --sizes 10000 100000 1000000

For each size: build a realistic log (benchmarks/realistic.py), write it with
`write_jsonl` (packed chunk rows, as stored), then time in one run: the orjson
decode of those bytes (every line), the scan, restore admission, each fold,
the closers, the whole `load_jsonl`; and the cost of one `append` on a log of
1k events and on the largest log. Best of `--repeat` runs; the garbage
collector stays on, as in an embedding application.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from realistic import realistic_log

from kernel import (
    APPEND,
    SessionHeader,
    SessionLog,
    check_invariants,
    derive_messages,
    fold_request_header,
    fold_surface,
    interrupted_turn_closers,
    load_jsonl,
    scan_jsonl,
    tool_pairing_cuts,
    write_jsonl,
)


def best_of(repeat: int, work: Callable[[], Any], *, paused: bool = False) -> float:
    """Best wall time of `repeat` runs; `paused` turns the cyclic collector off, as stores do."""
    times = []
    for _ in range(repeat):
        gc.collect()
        if paused:
            gc.disable()
        start = time.perf_counter()
        try:
            work()
        finally:
            times.append(time.perf_counter() - start)
            gc.enable()
    return min(times)


def decode_all(data: bytes) -> list[Any]:
    return [orjson.loads(line) for line in data.split(b"\n") if line]


def append_cost(log: SessionLog, count: int = 2000, *, paused: bool = False) -> float:
    """Median seconds per append of a user message at the log's current length."""
    message = {
        "id": "bench",
        "role": "user",
        "content": [{"type": "text", "text": "hi"}],
        "source": {"kind": "user"},
    }
    samples = []
    for _ in range(5):
        current = log
        if paused:
            gc.disable()
        start = time.perf_counter()
        for i in range(count):
            current = current.append("user/message", message, time=i, surface_op=APPEND)
        samples.append((time.perf_counter() - start) / count)
        gc.enable()
    return statistics.median(samples)


def run(size: int, repeat: int) -> dict[str, float]:
    wire = realistic_log(size, seed=size)
    header = SessionHeader(id=f"bench-{size}", created_at=1_760_000_000_000, cwd="/bench")
    events = SessionLog.restore(wire).events
    data = write_jsonl(header, events)
    scan = scan_jsonl(data)
    stored = scan.events
    log = SessionLog.restore(stored)
    measures: dict[str, Callable[[], Any]] = {
        "decode": lambda: decode_all(data),
        "scan_jsonl": lambda: scan_jsonl(data),
        "restore admission": lambda: SessionLog.restore(stored),
        "fold_surface": lambda: fold_surface(stored),
        "derive_messages": lambda: derive_messages(stored),
        "fold_request_header": lambda: fold_request_header(stored),
        "tool_pairing_cuts": lambda: tool_pairing_cuts(stored),
        "check_invariants": lambda: check_invariants(stored),
        "closers": lambda: interrupted_turn_closers(stored),
        "load_jsonl (whole)": lambda: load_jsonl(data, now=0),
    }
    figures: dict[str, tuple[float, float]] = {
        name: (best_of(repeat, work), best_of(repeat, work, paused=True))
        for name, work in measures.items()
    }
    figures["append us"] = (append_cost(log) * 1e6, append_cost(log, paused=True) * 1e6)
    figures["size"] = (float(len(stored)), len(data) / 1e6)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    small = run(1_000, args.repeat)
    print(
        "append at ~1k events: {:.1f} us (collector on), {:.1f} us (paused)".format(
            *small["append us"]
        )
    )
    for size in args.sizes:
        figures = run(size, 1 if size >= 1_000_000 else args.repeat)
        events, megabytes = figures.pop("size")
        append_on, append_off = figures.pop("append us")
        decode_on, decode_off = figures["decode"]
        print(f"\n{int(events)} events, {megabytes:.1f} MB JSONL (packed chunk rows)")
        print(
            f"  {'measure':<22}{'s (gc on)':>11}{'x decode':>10}{'s (paused)':>12}{'x decode':>10}"
        )
        for name, (on, off) in figures.items():
            ratios = f"{on / decode_on:>10.2f}{off:>12.3f}{off / decode_off:>10.2f}"
            print(f"  {name:<22}{on:>11.3f}{ratios}")
        where = f"append at {int(events)} events"
        print(f"  {where}: {append_on:.1f} us (on), {append_off:.1f} us (paused)")


if __name__ == "__main__":
    main()
