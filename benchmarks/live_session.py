"""Benchmark: what a durable commit costs per event, one event per commit against batched.

    python3 benchmarks/live_session.py
    python3 benchmarks/live_session.py --single 500 --events 20000 --batch 200 --repeat 5

For each layout (plain JSONL, Zstandard JSONL, SQLite) a `LiveSession` opened with
`open_session` appends `step/start`/`step/end` pairs inside one turn: first
`--single` events each committed by its own `append` call (an fsync, or a SQLite
commit, per event), then `--events` events in `batch()` blocks of `--batch`
(one commit per block). The table shows the best of `--repeat` runs in
microseconds per event; the sessions live in a temporary directory (`--dir`
to choose its file system: the figures are the disk's fsync latency).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernel.store import JsonlStore, LiveSession, SqliteStore, open_session
from kernel.store.live import SessionStore
from kernel.values.builders import step_end, step_start, turn_start

LAYOUTS: dict[str, Callable[[Path], SessionStore]] = {
    "jsonl": lambda where: JsonlStore(where / "plain"),
    "jsonl-zstd": lambda where: JsonlStore(where / "zstd", zstd=True),
    "sqlite": lambda where: SqliteStore(where / "sessions.db"),
}


def _session(store: SessionStore, name: str) -> LiveSession:
    header = {"version": 0, "id": name, "createdAt": 0, "cwd": "/bench"}
    session = open_session(store, name, header=header, now=0)
    session.append("turn/start", turn_start(turn=session.next_turn), time=0)
    return session


def _pair(session: LiveSession) -> None:
    step = session.next_step
    session.append("step/start", step_start(turn=1, step=step), time=1)
    session.append("step/end", step_end(turn=1, step=step), time=1)


def per_event(store: SessionStore, name: str, events: int) -> float:
    """Seconds per event when each append commits."""
    session = _session(store, name)
    start = time.perf_counter()
    for _ in range(events // 2):
        _pair(session)
    return (time.perf_counter() - start) / (events // 2 * 2)


def batched(store: SessionStore, name: str, events: int, batch: int) -> float:
    """Seconds per event when `batch` appends commit together."""
    session = _session(store, name)
    start = time.perf_counter()
    for _ in range(events // batch):
        with session.batch():
            for _ in range(batch // 2):
                _pair(session)
    return (time.perf_counter() - start) / (events // batch * (batch // 2) * 2)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--single", type=int, default=200, help="events committed one by one")
    parser.add_argument("--events", type=int, default=10_000, help="events committed in batches")
    parser.add_argument("--batch", type=int, default=100, help="events per batch (even)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where the sessions are written")
    args = parser.parse_args(argv)
    print(f"{'layout':<11} {'per event µs':>13} {'batched µs':>11} {'ratio':>7}")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for layout, make in LAYOUTS.items():
            single, many = [], []
            for run in range(args.repeat):
                where = Path(tmp) / f"{layout}-{run}"
                where.mkdir()
                store = make(where)
                single.append(per_event(store, "single", args.single))
                many.append(batched(store, "batched", args.events, args.batch))
            one, each = min(single) * 1e6, min(many) * 1e6
            print(f"{layout:<11} {one:>13.1f} {each:>11.1f} {one / each:>6.0f}x")


if __name__ == "__main__":
    main()
