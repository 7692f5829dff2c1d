"""Corpus verification: one per-log check on three executors, the report, bad input.

A corpus of ~200 generated logs (benchmarks/corpus.py: clean, cut mid-turn,
torn, corrupted, breaking an invariant, Zstandard, and one SQLite database of
four sessions) is verified in-process, on a process pool and on a real Dask
`LocalCluster` of two worker processes; the three reports must agree row for
row, timing aside. Every expected status is known from how the log was made.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from corpus import KINDS, generate_corpus  # noqa: E402
from test_cli import (  # noqa: E402
    Builder,
    clean_log,
    deny_reading,
    header,
    run,
    run_main,
    unanswered_at_end_log,
)

from kernel import corpus  # noqa: E402
from kernel.cli import verifying  # noqa: E402
from kernel.cli.sources import discover  # noqa: E402
from kernel.corpus import (  # noqa: E402
    COLUMNS,
    PANDAS_DTYPES,
    REPORT_VERSION,
    CorpusResult,
    Dask,
    InProcess,
    ProcessPool,
    Task,
    check_bytes,
    check_task,
    report_row,
    report_text,
    text_from_report,
    verify_corpus,
    verify_tasks,
    write_report,
)
from kernel.storage.jsonl import write_jsonl  # noqa: E402

LOGS = 198
"""JSONL logs in the generated corpus (33 of each kind), besides the SQLite database."""
SESSIONS = 4
NOW = 1_770_000_000_000

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def snapshot(root: Path) -> dict[str, str]:
    """A digest of every file under `root`: what verifying must never change."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def corpus_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_corpus(tmp_path_factory.mktemp("corpus"), LOGS, events=24, sessions=SESSIONS)


@pytest.fixture(scope="module")
def files(corpus_root: Path) -> tuple[tuple[str, str], ...]:
    return discover([str(corpus_root)]).logs


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address="127.0.0.1:0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as dask_client,
    ):
        yield dask_client


def ordered(rows: Any) -> list[CorpusResult]:
    return sorted(rows, key=lambda r: (r.path, r.session or ""))


@pytest.fixture(scope="module")
def reference(files: tuple[tuple[str, str], ...]) -> list[CorpusResult]:
    return ordered(verify_tasks(files, executor=InProcess(), now=NOW))


@pytest.mark.slow
def test_in_process_report_has_one_row_per_log_with_the_status_it_was_made_with(
    reference: list[CorpusResult],
) -> None:
    assert len(reference) == LOGS + SESSIONS
    assert len({(r.path, r.session) for r in reference}) == len(reference)
    by_kind: dict[str, Counter[str]] = {}
    for row in reference:
        name = Path(row.path).name
        kind = "sqlite" if row.format == "sqlite" else KINDS[int(name[1:6]) % len(KINDS)]
        by_kind.setdefault(kind, Counter())[row.status] += 1
    per_kind = LOGS // len(KINDS)
    assert by_kind["ok"] == {"ok": per_kind}
    assert by_kind["zstd"] == {"ok": per_kind}
    assert by_kind["repairable"] == {"repairable": per_kind}
    assert by_kind["torn"] == {"torn": per_kind}
    assert by_kind["corrupt"] == {"invalid": per_kind}
    assert by_kind["invariant"] == {"invalid": per_kind}
    assert by_kind["sqlite"] == {"ok": SESSIONS - 1, "repairable": 1}
    corrupt = [r for r in reference if r.status == "invalid" and r.check == "admission"]
    assert {r.rules for r in corrupt} == {("CorruptLog",)}
    broken = [r for r in reference if r.check == "invariants"]
    assert len(broken) == per_kind
    assert all(r.rules[0] in ("step-number", "turn-number") for r in broken)
    assert all(r.first_seq is not None and r.closers == 0 for r in broken)
    torn = [r for r in reference if r.status == "torn"]
    assert {r.torn_bytes for r in torn} == {len(b'{"type":"assistant/chunk","seq":')}
    database = [r for r in reference if r.format == "sqlite"]
    size = Path(database[0].path).stat().st_size
    assert {(r.bytes, r.torn_bytes, r.torn_records) for r in database} == {(size, None, 0)}
    assert [r.session for r in database] == [f"db-{k}" for k in range(SESSIONS)]


def test_the_check_of_a_file_is_the_check_of_its_bytes(reference: list[CorpusResult]) -> None:
    for row in reference:
        if row.format in ("jsonl", "jsonl.zstd"):
            data = Path(row.path).read_bytes()
            assert check_bytes(data, path=row.path, kind=row.format, now=NOW) == row


@pytest.fixture(scope="module")
def pool_rows(files: tuple[tuple[str, str], ...]) -> list[CorpusResult]:
    return ordered(verify_tasks(files, executor=ProcessPool(2), now=NOW))


@pytest.fixture(scope="module")
def dask_rows(files: tuple[tuple[str, str], ...], client: Any) -> list[CorpusResult]:
    return ordered(verify_tasks(files, executor=Dask(client=client, batch=1), now=NOW))


@pytest.mark.slow
def test_process_pool_report_equals_in_process_row_for_row(
    pool_rows: list[CorpusResult], reference: list[CorpusResult]
) -> None:
    assert pool_rows == reference


@pytest.mark.slow
def test_dask_local_cluster_report_equals_in_process_row_for_row(
    dask_rows: list[CorpusResult], reference: list[CorpusResult]
) -> None:
    assert dask_rows == reference


@pytest.mark.slow
def test_dask_tasks_of_several_logs_give_the_same_rows(
    files: tuple[tuple[str, str], ...], reference: list[CorpusResult], client: Any
) -> None:
    batched = ordered(verify_tasks(files, executor=Dask(client=client, batch=7), now=NOW))
    assert batched == reference


@pytest.mark.slow
def test_reports_written_from_each_executor_are_equal_but_for_timing(
    tmp_path: Path,
    reference: list[CorpusResult],
    pool_rows: list[CorpusResult],
    dask_rows: list[CorpusResult],
) -> None:
    import pandas as pd

    frames = []
    for name, rows in (("here", reference), ("pool", pool_rows), ("dask", dask_rows)):
        write_report(rows, tmp_path / f"{name}.parquet")
        frame = pd.read_parquet(tmp_path / f"{name}.parquet", dtype_backend="numpy_nullable")
        assert frame["load_seconds"].notna().all()
        frames.append(frame.drop(columns=["load_seconds"]))
    assert len(frames[0]) == LOGS + SESSIONS
    pd.testing.assert_frame_equal(frames[0], frames[1])
    pd.testing.assert_frame_equal(frames[0], frames[2])


@pytest.mark.slow
def test_a_worker_killed_mid_run_reruns_its_tasks_and_every_log_is_reported_once(
    files: tuple[tuple[str, str], ...], reference: list[CorpusResult], client: Any
) -> None:
    address, victim = sorted(client.run(os.getpid).items())[0]
    executor = Dask(client=client, in_flight=8, batch=2)
    rows: list[CorpusResult] = []
    lost = 0
    for row in verify_tasks(files, executor=executor, now=NOW):
        rows.append(row)
        if len(rows) == 10:
            # running, or done with the result still held there: lost with the worker
            held = {*client.processing()[address], *client.has_what()[address]}
            lost = len(held)
            os.kill(victim, signal.SIGKILL)
    assert lost > 0  # the worker held tasks or results when it died
    assert len(rows) == len(reference)
    assert ordered(rows) == reference  # complete, no duplicates, nothing marked error
    client.wait_for_workers(2, timeout=30)
    assert victim not in client.run(os.getpid).values()  # the worker really died mid-run


POOL_WINDOW = 100
"""Tasks in a window of the process pools below: the corpus's 202 tasks make three windows."""
HELD = 50
"""The position of the first task of the first window that `held_check` holds: past the
first chunk sent to a worker (16 tasks at most), so the first 10 rows come without it."""


def held_check(
    check: Callable[[Task], tuple[CorpusResult, ...]], gate: str, held: frozenset[Task], task: Task
) -> tuple[CorpusResult, ...]:
    """`check`; a task of `held` first waits for the file `gate/open` (or for the process
    that made its worker to end), and meanwhile names itself in `gate/held-PID`, PID its
    worker's."""
    opened = Path(gate, "open")
    if task in held and not opened.exists():
        parent = os.getppid()
        note = Path(gate, f".held-{os.getpid()}")
        note.write_text(json.dumps([task.path, task.kind, task.session]))
        note.replace(Path(gate, f"held-{os.getpid()}"))
        while not opened.exists() and os.getppid() == parent:
            time.sleep(0.01)
    return check(task)


class NoticingLate(ProcessPoolExecutor):
    """A process pool that notices a dead worker late: once `dead` is set, what it is sent
    fails with `BrokenProcessPool`, and its other workers are stopped, as in a pool that
    notices only after the sending."""

    dead = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if not self.dead:
            return super().submit(fn, *args, **kwargs)
        for worker in self._processes.values():  # private: the worker processes
            worker.kill()
        future: Future[Any] = Future()
        future.set_exception(BrokenProcessPool("a process of the pool was terminated abruptly"))
        return future


class PoolRun:
    """A `ProcessPool(2, window=POOL_WINDOW)` executor that records its run: the pools it
    made (`pool_class`), its tasks in order, and each `(pools made by then, task, results)`
    it yielded. With a `gate`, its workers hold the tasks of the first window from the
    `HELD`th on until the file `gate/open` exists (`held_check`)."""

    def __init__(
        self,
        retries: int,
        gate: Path | None = None,
        pool_class: type[ProcessPoolExecutor] = ProcessPoolExecutor,
    ) -> None:
        self.executor = ProcessPool(2, window=POOL_WINDOW, retries=retries, pool=self.pool)
        self.gate = gate
        self.pool_class = pool_class
        self.made: list[ProcessPoolExecutor] = []
        self.tasks: list[Task] = []
        self.done: list[tuple[int, Task, tuple[CorpusResult, ...]]] = []

    def pool(self, workers: int) -> ProcessPoolExecutor:
        self.made.append(self.pool_class(workers, mp_context=multiprocessing.get_context("spawn")))
        return self.made[-1]

    def run(
        self, tasks: Iterable[Task], check: Callable[[Task], tuple[CorpusResult, ...]]
    ) -> Iterator[tuple[Task, tuple[CorpusResult, ...]]]:
        self.tasks = list(tasks)
        if self.gate is not None:
            held = frozenset(self.tasks[HELD:POOL_WINDOW])
            check = functools.partial(held_check, check, str(self.gate), held)
        for task, found in self.executor.run(self.tasks, check):
            self.done.append((len(self.made), task, found))
            yield task, found


def a_held_worker(gate: Path) -> tuple[int, Task]:
    """The pid of a worker `held_check` holds, and the task it holds it on."""
    deadline = time.monotonic() + 60
    while not (notes := sorted(gate.glob("held-*"))):
        assert time.monotonic() < deadline, "no worker came to a held task"
        time.sleep(0.01)
    return int(notes[0].name.removeprefix("held-")), Task(*json.loads(notes[0].read_text()))


def kill_a_pool_worker_mid_run(
    files: tuple[tuple[str, str], ...], retries: int, gate: Path
) -> tuple[PoolRun, list[CorpusResult], int]:
    """Verify on a process pool, SIGKILL one of its workers after 10 rows: the run, its
    rows, and the position of the task the worker was running.

    The worker is killed running a task of the first window that `held_check` holds, so
    that window is in flight at the kill, whatever the load: that task is not reported.
    """
    run = PoolRun(retries, gate)
    rows: list[CorpusResult] = []
    held: Task | None = None
    try:
        for row in verify_tasks(files, executor=run, now=NOW):
            rows.append(row)
            if len(rows) == 10:
                pid, held = a_held_worker(gate)
                os.kill(pid, signal.SIGKILL)
                (gate / "open").touch()
    finally:
        (gate / "open").touch()  # no worker is left waiting when the run fails
    assert held is not None
    return run, rows, run.tasks.index(held)


@pytest.mark.slow
def test_a_pool_worker_killed_mid_run_reruns_its_window_with_a_retry(
    files: tuple[tuple[str, str], ...], reference: list[CorpusResult], tmp_path: Path
) -> None:
    run, rows, held = kill_a_pool_worker_mid_run(files, retries=1, gate=tmp_path)
    assert len(run.made) == 2
    first = [task for pools, task, _ in run.done if pools == 1]
    assert 10 <= len(first) <= held < POOL_WINDOW  # the window in flight broke
    assert [task for _, task, _ in run.done] == run.tasks  # each once: the rest by the new pool
    assert ordered(rows) == reference  # complete, no duplicates, nothing marked error


@pytest.mark.slow
def test_a_pool_worker_killed_without_retries_marks_its_window_error_once(
    files: tuple[tuple[str, str], ...], reference: list[CorpusResult], tmp_path: Path
) -> None:
    assert "error" not in {r.status for r in reference}
    run, rows, held = kill_a_pool_worker_mid_run(files, retries=0, gate=tmp_path)
    assert len(run.made) == 2  # the windows after the broken one still run, in a new pool
    assert [task for _, task, _ in run.done] == run.tasks  # each task once
    assert len(rows) == len(reference)
    assert len({(r.path, r.session) for r in rows}) == len(rows)
    failed = [at for at, (_, _, found) in enumerate(run.done) if found[0].status == "error"]
    reported = failed[0]  # what the window in flight reported before it broke, the kill's 10 too
    assert 10 <= reported <= held < POOL_WINDOW
    assert failed == list(range(reported, POOL_WINDOW))  # the rest of that window, only
    for at in failed:
        task, (row,) = run.done[at][1:]
        assert (row.path, row.session, row.status) == (task.path, task.session, "error")
        assert row.rules == ("BrokenProcessPool",)
    expected = {(r.path, r.session): r for r in reference}
    assert all(expected[(r.path, r.session)] == r for r in rows if r.status != "error")


@pytest.mark.slow
def test_a_pool_worker_dead_before_a_window_is_sent_makes_no_task_a_suspect(
    files: tuple[tuple[str, str], ...], reference: list[CorpusResult]
) -> None:
    """Regression: a worker that died once the window in flight had reported everything,
    noticed by the pool only after the next window was sent, broke that window: none of
    its tasks had run in the dead worker, yet each was reported `error`."""
    run = PoolRun(retries=0, pool_class=NoticingLate)
    rows: list[CorpusResult] = []
    for row in verify_tasks(files, executor=run, now=NOW):
        rows.append(row)
        if len(rows) == POOL_WINDOW:  # the first window all reported: nothing in flight
            assert len(run.done) == POOL_WINDOW  # a row a task
            pool = run.made[0]
            worker = next(iter(pool._processes.values()))  # private: the worker processes
            os.kill(worker.pid, signal.SIGKILL)
            assert multiprocessing.connection.wait([worker.sentinel], timeout=60)  # dead
            pool.dead = True
    assert len(run.made) == 2  # the next window ran in a new pool
    assert [task for _, task, _ in run.done] == run.tasks  # each task once
    assert ordered(rows) == reference  # nothing marked error


_IDLE_KILL = """
import multiprocessing.connection, os, signal, sys
from kernel.corpus import executors
from kernel.corpus.check import Task

def check(task):
    return (task.path,)

if __name__ == "__main__":
    made = []
    def pool(workers):
        made.append(executors._spawn_pool(workers))
        return made[-1]
    for trial in range(6):
        tasks = [Task(f"t{i}", "jsonl") for i in range(40)]
        run = executors.ProcessPool(2, pool=pool).run(tasks, check)
        assert [next(run) for _ in tasks] == [(t, (t.path,)) for t in tasks]
        victim = list(made[-1]._processes.values())[trial % 2]  # private: the workers
        os.kill(victim.pid, signal.SIGKILL)  # idle: every task has reported
        assert multiprocessing.connection.wait([victim.sentinel], timeout=60)
        assert list(run) == []  # the run ends: its pool shuts down
"""


@pytest.mark.slow
def test_a_pool_worker_dead_after_the_last_window_does_not_hold_up_the_end(
    tmp_path: Path,
) -> None:
    """Regression: a worker killed while it waited for work, once every task had reported,
    may hold the lock of the queue the others take their stop signal from; the pool's
    shutdown then waited for them forever, and the run never ended. Whichever of the two
    idle workers holds the lock, the run must end (the script is bounded, not timed)."""
    script = tmp_path / "idle_kill.py"
    script.write_text(_IDLE_KILL)
    subprocess.run([sys.executable, str(script)], check=True, timeout=300)


def poison_check(task: Task) -> tuple[CorpusResult, ...]:
    """Kills the worker running it on a file named `poison*`; else the real check."""
    if Path(task.path).name.startswith("poison"):
        os._exit(1)
    return check_task(task, NOW)


@pytest.mark.slow
def test_a_task_that_kills_its_workers_is_reported_error_and_the_rest_once(
    tmp_path: Path,
) -> None:
    import cloudpickle
    import dask
    from distributed import Client, LocalCluster

    root = generate_corpus(tmp_path, 6, events=12, sessions=1)
    (root / "poison.jsonl").write_bytes(b"")
    files = discover([str(root)]).logs
    tasks, _ = corpus.plan_tasks(files)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        with (
            dask.config.set({"distributed.scheduler.allowed-failures": 0}),
            LocalCluster(
                n_workers=1,
                threads_per_worker=1,
                processes=True,
                dashboard_address="127.0.0.1:0",
                silence_logs=logging.CRITICAL,
            ) as cluster,
            Client(cluster) as dask_client,
        ):
            executor = Dask(client=dask_client, in_flight=1, batch=1)  # the poison runs alone
            done = list(executor.run(tasks, poison_check))
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert sorted(done_tasks := [task for task, _ in done], key=repr) == sorted(tasks, key=repr)
    assert len(done_tasks) == len(set(done_tasks))
    rows = {row.path: row for _, found in done for row in found if row.format != "sqlite"}
    poison = rows.pop(str(root / "poison.jsonl"))
    assert poison.status == "error" and poison.rules == ("KilledWorker",)
    assert "error" not in {row.status for row in rows.values()}
    assert len(rows) == 6


def missing_kernel_check(task: Task) -> tuple[CorpusResult, ...]:
    """What a worker without session-kernel installed does with a task."""
    raise ModuleNotFoundError("No module named 'kernel'")


def test_a_worker_that_cannot_run_the_check_ends_the_run_with_one_clear_error(
    files: tuple[tuple[str, str], ...], client: Any
) -> None:
    import cloudpickle

    tasks, _ = corpus.plan_tasks(files[:3])
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        with pytest.raises(corpus.ClusterUnavailable) as caught:
            list(Dask(client=client).run(tasks, missing_kernel_check))
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert str(caught.value) == (
        "a Dask task failed on a worker: ModuleNotFoundError: No module named 'kernel' "
        "(is session-kernel installed on every worker?)"
    )


def test_verify_corpus_yields_unreadable_paths_and_every_log_once(corpus_root: Path) -> None:
    gone = corpus_root / "no-such-dir"
    rows = list(verify_corpus([str(corpus_root), str(gone)], now=NOW))
    assert len(rows) == LOGS + SESSIONS + 1
    (missing,) = [r for r in rows if r.status == "unreadable"]
    assert missing.path == str(gone) and missing.check == "read"
    assert missing.message is not None and missing.message.startswith("FileNotFoundError")


# -- the report ----------------------------------------------------------------------------------


def test_parquet_report_round_trips_through_pandas_with_the_documented_dtypes(
    tmp_path: Path, reference: list[CorpusResult]
) -> None:
    import pandas as pd
    import pyarrow.parquet as pq

    target = tmp_path / "report.parquet"
    assert write_report(reference, target) == len(reference)

    frame = pd.read_parquet(target, dtype_backend="numpy_nullable")
    assert list(frame.columns) == [name for name, _ in COLUMNS]
    assert {name: str(dtype) for name, dtype in frame.dtypes.items()} == PANDAS_DTYPES
    metadata = pq.read_schema(target).metadata
    assert metadata[b"session-kernel.report.version"] == str(REPORT_VERSION).encode()
    expected = [report_row(r) for r in reference]
    got = [
        {k: (list(v) if k == "rules" else None if pd.isna(v) else v) for k, v in row.items()}
        for row in frame.to_dict("records")
    ]
    assert got == expected
    assert any(len(row["rules"]) > 1 for row in got) and any(not row["rules"] for row in got)
    assert list(tmp_path.iterdir()) == [target]  # no temporary file left behind


def test_csv_report_reads_back_with_the_same_dtypes_and_values(
    tmp_path: Path, reference: list[CorpusResult]
) -> None:
    import pandas as pd

    write_report(reference, tmp_path / "report.csv")
    write_report(reference, tmp_path / "report.parquet")
    from_csv = pd.read_csv(tmp_path / "report.csv", dtype=PANDAS_DTYPES)
    from_parquet = pd.read_parquet(tmp_path / "report.parquet", dtype_backend="numpy_nullable")
    assert {name: str(dtype) for name, dtype in from_csv.dtypes.items()} == PANDAS_DTYPES
    pd.testing.assert_frame_equal(
        from_csv.drop(columns=["load_seconds", "rules"]),
        from_parquet.drop(columns=["load_seconds", "rules"]),
    )
    joined = [",".join(rules) for rules in from_parquet["rules"]]
    assert list(from_csv["rules"].fillna("")) == joined  # CSV: the list joined by commas


def test_an_empty_report_still_has_the_schema(tmp_path: Path) -> None:
    import pandas as pd

    write_report([], tmp_path / "empty.parquet")
    frame = pd.read_parquet(tmp_path / "empty.parquet", dtype_backend="numpy_nullable")
    assert len(frame) == 0 and list(frame.columns) == [name for name, _ in COLUMNS]


# -- the command ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_verify_writes_the_report_and_keeps_its_json_output(
    tmp_path: Path, corpus_root: Path, reference: list[CorpusResult]
) -> None:
    import pandas as pd

    before = snapshot(corpus_root)
    report = tmp_path / "out.parquet"
    proc = run("verify", "--jobs", "2", "--json", "--report", report, corpus_root)
    assert proc.returncode == 1  # corrupt and invariant-breaking logs are invalid
    frame = pd.read_parquet(report, dtype_backend="numpy_nullable")
    assert len(frame) == LOGS + SESSIONS
    assert Counter(frame["status"]) == Counter(r.status for r in reference)
    assert snapshot(corpus_root) == before
    document = json.loads(proc.stdout)
    assert set(document) == {"summary", "exitStatus", "logs"}
    assert [log["path"] for log in document["logs"]] == list(frame["path"])


@pytest.mark.slow
def test_verify_on_a_local_dask_cluster_writes_the_in_process_report(
    tmp_path: Path, corpus_root: Path, reference: list[CorpusResult]
) -> None:
    import pandas as pd

    write_report(reference, tmp_path / "here.csv")
    before = snapshot(corpus_root)
    dask = run(
        "verify", "--dask", "local", "-j", "2", "--report", tmp_path / "dask.csv", corpus_root
    )
    assert dask.returncode == 1 and dask.stderr == ""
    assert "Verified 202 log(s)" in dask.stdout
    assert snapshot(corpus_root) == before  # the workers wrote nothing beside the logs
    frames = [
        pd.read_csv(tmp_path / name, dtype=PANDAS_DTYPES).drop(columns=["load_seconds"])
        for name in ("here.csv", "dask.csv")
    ]
    pd.testing.assert_frame_equal(*frames)


@pytest.mark.slow
def test_an_unreachable_scheduler_is_one_line_exit_2_and_writes_nothing(
    tmp_path: Path,
    corpus_root: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(verifying.corpus, "Dask", functools.partial(Dask, timeout=1))
    before = snapshot(corpus_root)
    report = tmp_path / "r.parquet"
    start = time.monotonic()
    code, out, err = run_main(
        capsys, "verify", "--scheduler", "tcp://127.0.0.1:9", "--report", report, corpus_root
    )
    assert code == 2
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith("session-kernel: cannot reach the Dask scheduler tcp://127.0.0.1:9")
    assert time.monotonic() - start < 20
    assert not report.exists() and list(tmp_path.iterdir()) == []
    assert snapshot(corpus_root) == before


def test_unreadable_logs_are_rows_of_the_report_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = generate_corpus(tmp_path / "logs", 6, events=12, sessions=1)
    locked = next(root.rglob("s00000.jsonl"))  # the corrupt and invariant-breaking logs go
    for bad in (*root.rglob("s00003.jsonl"), *root.rglob("s00004.jsonl")):
        bad.unlink()
    deny_reading(monkeypatch, locked)
    report = tmp_path / "r.csv"
    code, _, err = run_main(capsys, "verify", "--json", "--report", report, root)
    assert code == 2 and err == ""
    import pandas as pd

    frame = pd.read_csv(report, dtype=PANDAS_DTYPES)
    row = frame[frame["path"] == str(locked)].iloc[0]
    assert row["status"] == "unreadable" and row["check"] == "read"
    assert row["message"] == "PermissionError: Permission denied"


def test_a_directory_that_vanishes_mid_run_gives_unreadable_rows_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = generate_corpus(tmp_path / "logs", 12, events=12, sessions=1)
    doomed = root / "group-0"
    doomed_logs = {str(p) for p in doomed.rglob("*.jsonl*")}
    real = verifying.discover

    def discover_then_vanish(*args: Any, **kwargs: Any) -> Any:
        found = real(*args, **kwargs)
        shutil.rmtree(doomed)  # after the walk, before any check
        return found

    monkeypatch.setattr(verifying, "discover", discover_then_vanish)
    report = tmp_path / "r.parquet"
    code, out, err = run_main(capsys, "verify", "--json", "--report", report, root)
    assert err == ""
    assert code == 1  # the corrupt logs elsewhere still decide
    logs = {log["path"]: log for log in json.loads(out)["logs"]}
    assert doomed_logs and all(logs[p]["status"] == "unreadable" for p in doomed_logs)
    assert all(
        logs[p]["problems"][0]["message"].startswith("FileNotFoundError") for p in doomed_logs
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--report", "{tmp}/missing/r.parquet"), "missing: no such directory for the report"),
        (("--report", "{tmp}/r.xlsx"), "a report is named *.parquet or *.csv"),
        (("--report", "{tmp}/dir.parquet"), "dir.parquet: is a directory, not a report file"),
        (("--minimize",), "--minimize writes beside the report: give --report FILE"),
    ],
)
def test_a_bad_report_is_refused_before_any_log_is_read(
    tmp_path: Path,
    corpus_root: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str, ...],
    message: str,
) -> None:
    def no_checks(*a: Any, **k: Any) -> Any:
        raise AssertionError("a log was verified")

    monkeypatch.setattr(verifying, "_verify_all", no_checks)
    (tmp_path / "dir.parquet").mkdir()
    given = [a.format(tmp=tmp_path) for a in args]
    code, out, err = run_main(capsys, "verify", *given, corpus_root)
    assert code == 2 and out == ""
    (line,) = err.splitlines()
    assert line.startswith("session-kernel: ") and line.endswith(message)


def test_import_kernel_imports_neither_dask_nor_pyarrow() -> None:
    code = (
        "import sys, kernel, kernel.corpus, kernel.cli.verifying; "
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('dask', 'distributed', 'pyarrow', 'pandas')]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# -- a run always ends: per-log timeouts, silent workers ------------------------------------------

STUCK_SECONDS = 30
"""How long a stuck check sleeps: far past any timeout below (its thread is abandoned)."""


def stuck_check(task: Task) -> tuple[CorpusResult, ...]:
    """Never returns in time on a file named `stuck*`; else the real check."""
    if Path(task.path).name.startswith("stuck"):
        time.sleep(STUCK_SECONDS)
    return check_task(task, NOW)


def freezing_check(task: Task) -> tuple[CorpusResult, ...]:
    """Freezes the whole worker process on a file named `poison*`: the regular expression
    backtracks for hours holding the GIL, so no thread of the worker runs, nor its
    event loop. Else the real check."""
    if Path(task.path).name.startswith("poison"):
        import re

        re.fullmatch(r"(a+)+b", "a" * 64)
    return check_task(task, NOW)


def check_each(tasks: list[Task]) -> int:
    """Check every task here (a warm-up: the first check in a process imports much)."""
    return sum(len(check_task(task, NOW)) for task in tasks)


def small_corpus(root: Path, *extra: str) -> list[Task]:
    """Six generated logs and a one-session database, plus a clean log under each `extra` name."""
    generate_corpus(root, 6, events=12, sessions=1)
    clean = next(root.rglob("s00001.jsonl")).read_bytes()  # s00001: a clean log (KINDS)
    for name in extra:
        (root / name).write_bytes(clean)
    tasks, _ = corpus.plan_tasks(discover([str(root)]).logs)
    return tasks


def by_path(done: Any) -> dict[str, CorpusResult]:
    rows = [row for _, found in done for row in found]
    assert len({(r.path, r.session) for r in rows}) == len(rows)  # each log once
    return {row.path: row for row in rows}


@pytest.mark.parametrize(
    ("where", "seconds"),
    [
        ("in-process", 0.2),
        # a fresh worker's first checks import modules: time enough for those
        pytest.param("process pool", 1.0, marks=pytest.mark.slow),
        pytest.param("dask", 1.0, marks=pytest.mark.slow),
    ],
)
def test_a_log_that_outlasts_its_timeout_is_reported_timeout_and_the_run_ends(
    tmp_path: Path, request: pytest.FixtureRequest, where: str, seconds: float
) -> None:
    import cloudpickle

    tasks = small_corpus(tmp_path, "stuck.jsonl")
    executor: corpus.Executor
    if where == "in-process":
        executor = InProcess(log_timeout=seconds)
    elif where == "process pool":
        executor = ProcessPool(2, log_timeout=seconds)
    else:
        dask_client = request.getfixturevalue("client")
        executor = Dask(client=dask_client, batch=3, log_timeout=seconds)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        if where == "dask":
            dask_client.run(check_each, tasks)  # on every worker: the first check imports much
        done = list(executor.run(tasks, stuck_check))
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])

    assert sorted((task for task, _ in done), key=repr) == sorted(tasks, key=repr)
    rows = by_path(done)
    late = rows.pop(str(tmp_path / "stuck.jsonl"))
    assert (late.status, late.check, late.rules) == ("timeout", "timeout", ("timeout",))
    (problem,) = late.detail["problems"]
    worker = problem["worker"]
    assert late.message == (
        f"no verdict within {seconds:g} s; the check was left running (worker {worker})"
    )
    if where == "dask":
        assert worker.startswith("tcp://")
    else:
        assert worker.startswith("pid ") and (worker.startswith(f"pid {os.getpid()} ")) == (
            where == "in-process"
        )
    expected = by_path((task, check_task(task, NOW)) for task in tasks if task.path in rows)
    assert rows == expected  # every other log checked as ever


@pytest.mark.slow
def test_a_dask_worker_that_stops_answering_is_given_up_and_the_run_ends(tmp_path: Path) -> None:
    import cloudpickle
    from distributed import Client, LocalCluster

    tasks = small_corpus(tmp_path, "poison.jsonl")
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        with (
            LocalCluster(
                n_workers=2,
                threads_per_worker=1,
                processes=True,
                dashboard_address="127.0.0.1:0",
                silence_logs=logging.CRITICAL,
            ) as cluster,
            Client(cluster) as dask_client,
        ):
            pids = dask_client.run(os.getpid)
            dask_client.run(check_each, tasks)  # on every worker: the first check imports much
            executor = Dask(client=dask_client, batch=1, log_timeout=0.2, grace=3)
            try:
                done = list(executor.run(tasks, freezing_check))
            finally:
                for pid in pids.values():  # the frozen worker would not even answer `close`
                    os.kill(pid, signal.SIGKILL)
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])

    assert sorted((task for task, _ in done), key=repr) == sorted(tasks, key=repr)
    rows = by_path(done)
    late = {path: row for path, row in rows.items() if row.status == "timeout"}
    poison = late[str(tmp_path / "poison.jsonl")]
    worker = poison.detail["problems"][0]["worker"]
    assert worker in pids
    assert all(row.detail["problems"][0]["worker"] == worker for row in late.values())
    assert all("given up" in str(row.message) for row in late.values())
    expected = by_path((task, check_task(task, NOW)) for task in tasks if task.path not in late)
    assert {p: r for p, r in rows.items() if p not in late} == expected


@pytest.mark.slow
def test_a_scheduler_without_workers_ends_the_run_with_one_clear_error(tmp_path: Path) -> None:
    from distributed import Client, LocalCluster

    tasks = small_corpus(tmp_path)
    with (
        LocalCluster(
            n_workers=0, dashboard_address="127.0.0.1:0", silence_logs=logging.CRITICAL
        ) as cluster,
        Client(cluster) as dask_client,
        pytest.raises(corpus.ClusterUnavailable) as caught,
    ):
        list(Dask(client=dask_client, timeout=0.5, log_timeout=5).run(tasks, stuck_check))
    address = cluster.scheduler_address
    assert str(caught.value) == f"the Dask scheduler {address} has no workers (waited 0.5 s)"


# -- the report: file modes, text that is not UTF-8 ----------------------------------------------


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o027, 0o640)])
def test_a_report_is_created_with_the_mode_the_umask_gives(
    tmp_path: Path, reference: list[CorpusResult], umask: int, mode: int, suffix: str
) -> None:
    target = tmp_path / f"report{suffix}"
    before = os.umask(umask)
    try:
        write_report(reference[:5], target)
    finally:
        os.umask(before)
    assert target.stat().st_mode & 0o777 == mode
    assert list(tmp_path.iterdir()) == [target]


ESCAPE_PIECES = ("\\", "u", "d", "c", "8", "f", "0", "a", "é", "\udcff", "\ud800", "\udfff")
"""Pieces that make up surrogates, backslashes and text that looks like their escapes."""


@pytest.mark.slow
@given(st.text(st.sampled_from(ESCAPE_PIECES)) | st.text())
def test_report_text_is_utf8_and_gives_back_exactly_the_value_it_was_written_from(
    value: str,
) -> None:
    cell = report_text(value)
    cell.encode("utf-8")  # a Parquet or CSV string cell
    assert text_from_report(cell) == value
    if cell != value:
        assert any(0xD800 <= ord(c) <= 0xDFFF for c in value) or "\\ud" in value


def test_report_text_leaves_valid_paths_alone_windows_ones_included() -> None:
    for path in ("logs/a.jsonl", "C:\\Users\\me\\a.jsonl", "\\\\fs\\share\\x", "é/ü.jsonl"):
        assert report_text(path) == path
    assert report_text("logs/\udcff.jsonl") == "logs/\\udcff.jsonl"  # as --json spells it


# -- findings: a closed last turn with a call no result answers ----------------------------------


def verdict(b: Builder) -> CorpusResult:
    return check_bytes(write_jsonl(header("t"), b.events), path="t.jsonl", kind="jsonl", now=NOW)


def test_an_unanswered_call_at_the_end_is_a_finding_not_a_problem() -> None:
    b, asked = unanswered_at_end_log()

    result = verdict(b)

    assert result.status == "ok" and result.check is None
    assert result.rules == ("unanswered-call",) and result.first_seq == asked
    (finding,) = result.detail["findings"]
    assert finding["seq"] == asked and finding["rule"] == corpus.UNANSWERED_CALL
    strict = check_bytes(
        write_jsonl(header("t"), b.events), path="t.jsonl", kind="jsonl", now=NOW, strict=True
    )
    assert strict.status == "invalid" and strict.check == "pairing"
    assert strict.detail["problems"] == [finding] and strict.detail["findings"] == []


def test_an_interrupted_turn_whose_closers_answer_its_calls_has_no_finding() -> None:
    b = Builder()
    b.turn(1, [[]])
    b.add("turn/start", {"turn": 2})
    b.user("u2", "go")
    b.add("step/start", {"turn": 2, "step": 1})
    b.assistant(2, 1, "a2-1", "on it", ["k1"])

    result = verdict(b)

    assert result.status == "repairable" and result.detail["findings"] == []


def test_a_call_unanswered_before_a_later_assistant_message_is_only_a_problem() -> None:
    b = Builder()
    b.add("turn/start", {"turn": 1})
    b.user("u1", "go")
    b.add("step/start", {"turn": 1, "step": 1})
    b.assistant(1, 1, "a1", "calling", ["lost"])
    b.add("step/end", {"turn": 1, "step": 1})
    b.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    b.turn(2, [[]])

    result = verdict(b)

    assert result.status == "invalid" and result.rules == ("unanswered-call",)
    assert result.check == "pairing" and result.detail["findings"] == []


def test_unanswered_call_findings_are_empty_for_a_surface_that_ends_balanced() -> None:
    assert corpus.unanswered_call_findings(clean_log().events) == []
    assert corpus.unanswered_call_findings([]) == []
