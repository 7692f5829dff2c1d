"""Benchmark: load time against the number of surface replacements.

    python3 benchmarks/replacements.py                  # N = 1000 and 8000
    python3 benchmarks/replacements.py --sizes 1000 2000 4000

Each log is N `user/message` appends followed by N replacements, in one of
two shapes: `rewrite` replaces each appended node by itself, front to back (a
one-node replace in the middle of the surface), and `compact` replaces the
first two current nodes with one summary, so the surface shrinks to a single
node (a range replace whose endpoints are a replacement and an original). For
each log: `SessionLog.restore` of the wire dicts, `fold_surface` and
`derive_messages` over the restored events, and one replace appended to the
restored log. Best of `--repeat` runs. Total work should grow linearly in N.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from kernel import Replace, SessionLog, derive_messages, fold_surface


def message(seq: int) -> dict[str, Any]:
    return {
        "id": f"m{seq}",
        "role": "user",
        "content": [{"type": "text", "text": f"message {seq}"}],
        "source": {"kind": "user"},
    }


def wire_log(n: int, shape: str) -> list[dict[str, Any]]:
    """N appends, then N replacements of the given shape (wire dicts)."""
    events: list[dict[str, Any]] = [
        {"type": "user/message", "seq": s, "time": s, "data": message(s), "surfaceOp": "append"}
        for s in range(n)
    ]
    front = 0  # compact: the current first node
    for k in range(n if shape == "rewrite" else n - 1):
        seq = n + k
        if shape == "rewrite":
            start = end = k
            cited = [k]
        else:
            start, end = front, k + 1
            cited = [front, k + 1]
            front = seq
        events.append(
            {
                "type": "user/message",
                "seq": seq,
                "time": seq,
                "data": message(seq),
                "surfaceOp": {"op": "replace", "start": start, "end": end},
                "sourceEventSeqs": cited,
            }
        )
    return events


def best_of(repeat: int, work: Callable[[], Any]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def run(n: int, shape: str, repeat: int) -> dict[str, float]:
    wire = wire_log(n, shape)
    log = SessionLog.restore(wire)
    events = tuple(log.events)
    last = log.surface.nodes[-1]

    def one_replace() -> None:
        log.append(
            "user/message",
            message(len(events)),
            time=0,
            surface_op=Replace(last, last),
            source_event_seqs=[last],
        )

    return {
        "restore": best_of(repeat, lambda: SessionLog.restore(wire)),
        "fold_surface": best_of(repeat, lambda: fold_surface(events)),
        "derive_messages": best_of(repeat, lambda: derive_messages(events)),
        "replace us": best_of(repeat, one_replace) * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 8_000])
    parser.add_argument("--shapes", nargs="+", default=["rewrite", "compact"])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    columns = ("restore s", "fold_surface s", "derive s", "replace us")
    print(f"{'shape':<9}{'N':>7}" + "".join(f"{c:>16}" for c in columns))
    for shape in args.shapes:
        for n in args.sizes:
            f = run(n, shape, args.repeat)
            print(f"{shape:<9}{n:>7}" + "".join(f"{v:>16.3f}" for v in f.values()))


if __name__ == "__main__":
    main()
