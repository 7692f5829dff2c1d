"""Process-kill tests: a writer subprocess appends a realistic log and is SIGKILLed mid-way.

The writer prints each batch's last seq after `append` returns (the batch is
durable then). After the kill, a fresh store loads the session: every event the
writer reported is present, the stored prefix is exactly the log it wrote, the
repaired log is balanced (its last turn is closed, the invariants hold), and a
second load finds nothing to repair. Kill points are drawn from seeded RNGs: an
external SIGKILL after a number of reported batches plus a random delay, or a
self-inflicted SIGKILL inside an append (after a partial write for JSONL,
before COMMIT for SQLite).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from storelogs import realistic_log, split_batches

from kernel.folds.invariants import check_invariants
from kernel.store import JsonlStore, SessionNotFound, SqliteStore

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL"),
]

TESTS_DIR = Path(__file__).resolve().parents[1]
SESSION = "crash"
TURNS = 6
KILLS_PER_MODE = 3
LAYOUT_SEEDS = {"plain": 1000, "zstd": 2000, "sqlite": 3000}

WRITER = r'''
"""Crash-test writer: append a realistic log batch by batch, report each durable seq."""
import os
import random
import signal
import sys

tests_dir, layout, target, seed, mode, kill_at = sys.argv[1:]
sys.path.insert(0, tests_dir)

from storelogs import realistic_log, split_batches  # noqa: E402

import kernel.store.files as files_module  # noqa: E402
from kernel.store import JsonlStore, SqliteStore  # noqa: E402

rng = random.Random(int(seed))
events = realistic_log(rng, int(os.environ["CRASH_TURNS"]))
pack = rng.random() < 0.7
batches = list(split_batches(events, rng))
kill_at = int(kill_at)
calls = 0


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


if mode == "self" and layout == "sqlite":
    real_bump = SqliteStore._bump_revision

    def bump_then_die(self, session_id):
        global calls
        real_bump(self, session_id)
        calls += 1
        if calls == kill_at:
            die()  # inside the transaction, before COMMIT

    SqliteStore._bump_revision = bump_then_die
elif mode == "self":
    real_write_all = files_module.write_all

    def write_part_then_die(fd, data):
        global calls
        calls += 1
        if calls == kill_at:
            cut = rng.randrange(len(data))
            real_write_all(fd, data[:cut])
            os.fsync(fd)
            die()  # a torn batch (or a half-written temporary file)
        real_write_all(fd, data)

    files_module.write_all = write_part_then_die

if layout == "sqlite":
    store = SqliteStore(target, pack_chunks=pack)
else:
    store = JsonlStore(target, zstd=layout == "zstd", pack_chunks=pack)
store.create({"version": 0, "id": "crash", "createdAt": 1, "cwd": "/work/demo"})
for batch in batches:
    store.append("crash", batch)
    print(batch[-1].seq, flush=True)
print("done", flush=True)
'''


def _plan(seed: int) -> tuple[list[Any], int]:
    """The events and the number of batches the writer will produce for `seed`."""
    rng = random.Random(seed)
    events = realistic_log(rng, TURNS)
    rng.random()
    return events, len(list(split_batches(events, rng)))


def _store(layout: str, target: Path) -> JsonlStore | SqliteStore:
    if layout == "sqlite":
        return SqliteStore(target)
    return JsonlStore(target, zstd=layout == "zstd")


def _snapshot(layout: str, target: Path) -> Any:
    """Everything a read-only operation must leave unchanged."""
    if layout == "sqlite":
        with SqliteStore(target) as store:
            conn = store._conn
            return (
                conn.execute("SELECT * FROM sessions").fetchall(),
                conn.execute("SELECT * FROM events ORDER BY session_id, seq").fetchall(),
            )
    return {str(p): p.read_bytes() for p in sorted(target.rglob("*")) if p.is_file()}


def _run_writer(
    tmp_path: Path, layout: str, target: Path, seed: int, mode: str, kill_at: int, delay: float
) -> tuple[list[int], bool]:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = {**os.environ, "CRASH_TURNS": str(TURNS)}
    args = [sys.executable, str(script), str(TESTS_DIR), layout, str(target), str(seed)]
    proc = subprocess.Popen(
        [*args, mode, str(kill_at)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        if mode == "external":
            while len(lines) < kill_at:
                line = proc.stdout.readline()
                if not line:
                    break
                lines.append(line.strip())
            time.sleep(delay)
            proc.send_signal(signal.SIGKILL)
        rest, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines.extend(rest.split())
    finished = "done" in lines
    if not finished:
        assert proc.returncode == -signal.SIGKILL, f"writer failed: {err}"
    return [int(x) for x in lines if x.isdigit()], finished


def _verify(layout: str, target: Path, events: list[Any], reported: list[int]) -> None:
    last_reported = reported[-1] if reported else -1
    before = _snapshot(layout, target) if target.exists() else None
    store = _store(layout, target)
    try:
        try:
            inspected = store.inspect(SESSION)
        except SessionNotFound:
            assert not reported, "a reported batch is missing: the session was never materialized"
            return
        assert _snapshot(layout, target) == before, "inspect wrote something"
        loaded = store.load(SESSION, now=0)
        assert loaded.events == inspected.events
        closers = loaded.repair.closers
        kept = len(loaded.events) - len(closers)
        assert kept > last_reported, f"committed seq {last_reported} lost (kept {kept} events)"
        assert loaded.events[:kept] == tuple(events[:kept]), "the stored prefix differs"
        assert loaded.events[-1].type == "turn/end", "the repaired log has an open turn"
        assert check_invariants(loaded.events) == ()
        again = store.load(SESSION, now=0)
        assert not again.repair.needed, "a second load found something to repair"
        assert again.events == loaded.events
    finally:
        if isinstance(store, SqliteStore):
            store.close()
    after = _store(layout, target)
    try:
        assert after.load(SESSION, now=0).events == loaded.events
    finally:
        if isinstance(after, SqliteStore):
            after.close()


@pytest.mark.parametrize("layout", ["plain", "zstd", "sqlite"])
@pytest.mark.parametrize("mode", ["external", "self"])
@pytest.mark.parametrize("k", range(KILLS_PER_MODE))
def test_sigkilled_writer_loses_nothing_it_reported(
    tmp_path: Path, layout: str, mode: str, k: int
) -> None:
    rng = random.Random(LAYOUT_SEEDS[layout] + (0 if mode == "external" else 100) + k)
    seed = rng.randrange(2**32)
    events, batches = _plan(seed)
    kill_at = rng.randint(0, batches) if mode == "external" else rng.randint(1, batches)
    target = tmp_path / ("s.db" if layout == "sqlite" else "root")
    reported, finished = _run_writer(
        tmp_path, layout, target, seed, mode, kill_at, rng.uniform(0, 0.004)
    )
    if mode == "self":
        assert not finished and len(reported) == kill_at - 1
    _verify(layout, target, events, reported)
    if finished:
        assert reported[-1] == len(events) - 1


@pytest.mark.parametrize("layout", ["plain", "zstd", "sqlite"])
def test_kill_inside_the_first_append_leaves_no_session(tmp_path: Path, layout: str) -> None:
    """Killed while materializing: header and first batch appear together or not at all."""
    seed = 77
    events, _ = _plan(seed)
    target = tmp_path / ("s.db" if layout == "sqlite" else "root")
    reported, finished = _run_writer(tmp_path, layout, target, seed, "self", 1, 0.0)
    assert reported == [] and not finished
    store = _store(layout, target)
    try:
        assert store.list() == ()
        with pytest.raises(SessionNotFound):
            store.inspect(SESSION)
        store.create({"version": 0, "id": SESSION, "createdAt": 1, "cwd": "/work/demo"})
        store.append(SESSION, events)
        assert store.load(SESSION, now=0).events == tuple(events)
    finally:
        if isinstance(store, SqliteStore):
            store.close()
    if layout != "sqlite":
        leftovers = [p.name for p in target.rglob("*.tmp")]
        assert len(leftovers) == 1, "the half-written temporary file should be the only trace"
