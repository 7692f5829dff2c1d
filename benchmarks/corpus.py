"""Benchmark: logs verified per second in-process, on a process pool and on a Dask LocalCluster.

    python3 benchmarks/corpus.py                    # 400 logs, 2 workers
    python3 benchmarks/corpus.py --logs 1000 --workers 2 --events 60

One generated corpus (`generate_corpus`: realistic logs, some cut mid-turn,
torn, corrupted or breaking an invariant, plus one SQLite database of several
sessions) is verified with `kernel.corpus.verify_tasks` on each executor; the
time covers the checks only (the executors' start-up is timed separately).
The Dask per-log overhead is (Dask time - in-process time / workers) per log:
what scheduling, serialising and shipping each task adds to the check itself.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import multiprocessing
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from realistic import realistic_log

from kernel.cli.sources import discover
from kernel.corpus import Dask, Executor, InProcess, ProcessPool, verify_tasks
from kernel.storage.jsonl import write_jsonl
from kernel.storage.zstd import write_jsonl_zstd
from kernel.store.sqlite import SqliteStore
from kernel.values.events import Event
from kernel.wire.codec import event_from_json

__all__ = ("KINDS", "generate_corpus", "session_header", "main")

T0 = 1_760_000_000_000
TORN_RECORD = b'{"type":"assistant/chunk","seq":'
KINDS = ("ok", "repairable", "torn", "corrupt", "invariant", "zstd")
"""What the generator makes, in rotation: log `i` is of kind `KINDS[i % len(KINDS)]`."""


def session_header(session: str) -> dict[str, Any]:
    """The header of a generated session."""
    return {"version": 0, "id": session, "createdAt": T0, "cwd": "/projects/corpus"}


def _events(rng: random.Random, n: int, seed: int) -> list[Event]:
    """A realistic log of whole turns, at least `n // 2` to `n` events (seeded by `rng`)."""
    return [event_from_json(wire) for wire in realistic_log(rng.randint(n // 2, n), seed)]


def _break_step_number(events: list[Event]) -> list[Event]:
    """Renumber the first step/start of a turn's second step as step 3: `step-number` fails."""
    out = list(events)
    for i, event in enumerate(out):
        if event.type == "step/start" and event.data["step"] == 2:
            data = {"turn": event.data["turn"], "step": 3}
            out[i] = Event(event.type, event.seq, event.time, data)
            return out
    first = next(i for i, e in enumerate(out) if e.type == "turn/start")
    out[first] = Event("turn/start", out[first].seq, out[first].time, {"turn": 2})
    return out


def _log_bytes(kind: str, i: int, events: list[Event], rng: random.Random) -> bytes:
    head = session_header(f"s{i}")
    if kind == "repairable":
        cut = rng.randint(2, len(events) - 2)
        while events[cut - 1].type == "turn/end":
            cut -= 1
        return write_jsonl(head, events[:cut])
    if kind == "torn":
        return write_jsonl(head, events) + TORN_RECORD
    if kind == "corrupt":
        lines = write_jsonl(head, events).split(b"\n")
        lines[len(lines) // 3] = b'{"type": "user/message", "seq": oops}'
        return b"\n".join(lines)
    if kind == "invariant":
        return write_jsonl(head, _break_step_number(events))
    if kind == "zstd":
        return write_jsonl_zstd(head, events)
    return write_jsonl(head, events)


def generate_corpus(root: Path, count: int, *, events: int = 40, sessions: int = 4) -> Path:
    """`count` generated JSONL logs under `root` (nested folders) and one SQLite database.

    Deterministic. The database `sessions.db` holds `sessions` sessions (the
    last cut mid-turn). Returns `root`.
    """
    for i in range(count):
        rng = random.Random(i)
        kind = KINDS[i % len(KINDS)]
        data = _log_bytes(kind, i, _events(rng, events, i), rng)
        folder = root / f"group-{i % 5}" / ("deep" if i % 2 else "")
        folder.mkdir(parents=True, exist_ok=True)
        name = f"s{i:05}.jsonl.zstd" if kind == "zstd" else f"s{i:05}.jsonl"
        (folder / name).write_bytes(data)
    with SqliteStore(root / "sessions.db") as store:
        for k in range(sessions):
            rng = random.Random(10_000 + k)
            log = _events(rng, events, 10_000 + k)
            if k == sessions - 1:
                log = log[: len(log) - 3]
            store.create(session_header(f"db-{k}"))
            store.append(f"db-{k}", log)
    return root


def _timed(executor: Executor, files: Any, now: int) -> tuple[float, int]:
    start = time.perf_counter()
    rows = sum(1 for _ in verify_tasks(files, executor=executor, now=now))
    return time.perf_counter() - start, rows


@contextlib.contextmanager
def _executors(workers: int) -> Iterator[list[tuple[str, Executor]]]:
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address="127.0.0.1:0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
        ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool,
    ):
        yield [
            ("in-process", InProcess()),
            (
                f"process pool ({workers} workers)",
                ProcessPool(workers, pool=lambda _: contextlib.nullcontext(pool)),
            ),
            (f"Dask LocalCluster ({workers} workers), 1 log/task", Dask(client=client, batch=1)),
            (f"Dask LocalCluster ({workers} workers), 8 logs/task", Dask(client=client)),
        ]


def main(argv: list[str] | None = None) -> int:
    """Generate a corpus, verify it on each executor, print logs/s and the Dask overhead."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logs", type=int, default=400)
    parser.add_argument("--events", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = generate_corpus(Path(tmp), args.logs, events=args.events)
        files = discover([str(root)]).logs
        now = T0
        base = None
        sizes = [len(_events(random.Random(i), args.events, i)) for i in range(args.logs)]
        print(
            f"{args.logs} logs + 1 SQLite database; events per log "
            f"{min(sizes)}-{max(sizes)}, mean {sum(sizes) / len(sizes):.0f}"
        )
        started = time.perf_counter()
        with _executors(args.workers) as executors:
            print(f"start-up of the pool and the cluster: {time.perf_counter() - started:.2f} s")
            for name, executor in executors:
                _timed(executor, files, now)  # warm: imports in the workers, caches
                seconds, rows = min(_timed(executor, files, now) for _ in range(args.repeat))
                if base is None:
                    base = seconds / rows
                line = f"{name:46} {rows / seconds:7.0f} logs/s  {seconds / rows * 1e3:6.2f} ms/log"
                if "Dask" in name:
                    overhead = seconds / rows - base / args.workers
                    line += f"  overhead {overhead * 1e3:.2f} ms/log"
                print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
