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


def best_of(repeat: int, work: Callable[[], Any]) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def decode_all(data: bytes) -> list[Any]:
    return [orjson.loads(line) for line in data.split(b"\n") if line]


def append_cost(log: SessionLog, count: int = 2000) -> float:
    """Mean seconds per append of a user message at the log's current length."""
    message = {
        "id": "bench",
        "role": "user",
        "content": [{"type": "text", "text": "hi"}],
        "source": {"kind": "user"},
    }
    samples = []
    for _ in range(5):
        current = log
        start = time.perf_counter()
        for i in range(count):
            current = current.append("user/message", message, time=i, surface_op=APPEND)
        samples.append((time.perf_counter() - start) / count)
    return statistics.median(samples)


def run(size: int, repeat: int) -> dict[str, float]:
    wire = realistic_log(size, seed=size)
    header = SessionHeader(id=f"bench-{size}", created_at=1_760_000_000_000, cwd="/bench")
    events = SessionLog.restore(wire).events
    data = write_jsonl(header, events)
    scan = scan_jsonl(data)
    stored = scan.events
    log = SessionLog.restore(stored)
    figures = {
        "events": float(len(stored)),
        "MB": len(data) / 1e6,
        "decode": best_of(repeat, lambda: decode_all(data)),
        "scan_jsonl": best_of(repeat, lambda: scan_jsonl(data)),
        "restore admission": best_of(repeat, lambda: SessionLog.restore(stored)),
        "fold_surface": best_of(repeat, lambda: fold_surface(stored)),
        "derive_messages": best_of(repeat, lambda: derive_messages(stored)),
        "fold_request_header": best_of(repeat, lambda: fold_request_header(stored)),
        "tool_pairing_cuts": best_of(repeat, lambda: tool_pairing_cuts(stored)),
        "check_invariants": best_of(repeat, lambda: check_invariants(stored)),
        "closers": best_of(repeat, lambda: interrupted_turn_closers(stored)),
        "load_jsonl (whole)": best_of(repeat, lambda: load_jsonl(data, now=0)),
        "append us": append_cost(log) * 1e6,
    }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    small = run(1_000, args.repeat)
    print(f"append at ~1k events: {small['append us']:.1f} us")
    for size in args.sizes:
        figures = run(size, 1 if size >= 1_000_000 else args.repeat)
        decode = figures["decode"]
        print(
            f"\n{int(figures['events'])} events, {figures['MB']:.1f} MB JSONL (packed chunk rows)"
        )
        print(f"  {'measure':<22}{'seconds':>10}{'x decode':>10}")
        for name, value in figures.items():
            if name in ("events", "MB", "append us"):
                continue
            print(f"  {name:<22}{value:>10.3f}{value / decode:>10.2f}")
        print(f"  append at {int(figures['events'])} events: {figures['append us']:.1f} us")


if __name__ == "__main__":
    main()
