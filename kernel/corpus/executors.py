"""Where the per-log check runs: in this process, a process pool, or a Dask cluster.

An executor takes tasks and a picklable check (`Task -> tuple[CorpusResult, ...]`)
and yields `(task, results)` pairs as tasks complete, each task exactly once.
Every executor keeps a bounded number of tasks in flight, so the work held stays flat
however large the corpus. Dask is imported only when a `Dask` executor runs.
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import CancelledError, ProcessPoolExecutor
from concurrent.futures import Executor as FuturesExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol

import attrs

from kernel.corpus.check import CorpusResult, Task, failure_entry, result_of

__all__ = (
    "Check",
    "Executor",
    "ClusterUnavailable",
    "InProcess",
    "ProcessPool",
    "Dask",
    "failed_task",
)

Check = Callable[[Task], tuple[CorpusResult, ...]]
"""The per-task check an executor runs (a picklable top-level function or partial)."""

Completed = Iterator[tuple[Task, tuple[CorpusResult, ...]]]


class Executor(Protocol):
    """Runs a check over tasks, yielding each task once with its results, as they complete."""

    def run(self, tasks: Iterable[Task], check: Check) -> Completed: ...


class ClusterUnavailable(Exception):
    """The Dask scheduler could not be reached, or the cluster was lost mid-run."""


def failed_task(task: Task, exc: BaseException) -> tuple[CorpusResult, ...]:
    """The result of a task whose worker was lost: status `error`, naming what happened."""
    return (
        result_of(failure_entry(task.path, task.kind, task.session, exc), size=None, seconds=0),
    )


@attrs.frozen
class InProcess:
    """Runs every task here, one after the other: the reference executor."""

    def run(self, tasks: Iterable[Task], check: Check) -> Completed:
        for task in tasks:
            yield task, check(task)


def _spawn_pool(workers: int) -> FuturesExecutor:
    # spawn, not fork: a caller's threads (a progress bar's) may hold a lock at fork time
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))


@attrs.frozen
class ProcessPool:
    """Runs tasks in `workers` processes of one machine (`concurrent.futures`).

    Tasks go to the pool in windows of `window` tasks (`pool.map` with chunks),
    so only one window is ever in flight. When a worker dies (killed, out of
    memory) the pool is broken, and the tasks of the window it had not
    reported are suspects: the one that killed it cannot be told from its
    neighbours. A suspect gets status `error` (`BrokenProcessPool`) once it
    has been a suspect more than `retries` times; every other unreported
    task runs again in a new pool. Each task is reported exactly once.
    `pool` makes the pool from a worker count (tests substitute their own).
    """

    workers: int = 2
    window: int = 0
    retries: int = 0
    pool: Callable[[int], FuturesExecutor] = _spawn_pool

    def run(self, tasks: Iterable[Task], check: Check) -> Completed:
        todo = list(tasks)
        suspected = [0] * len(todo)
        pending = list(range(len(todo)))
        while pending:
            broken: BrokenProcessPool | None = None
            unreported: list[int] = []
            reported = False
            with self.pool(self.workers) as pool:
                for at, part, done in self._windows(pool, todo, pending, check):
                    if isinstance(done, BrokenProcessPool):
                        broken, unreported = done, part
                        pending = pending[at:]
                        break
                    yield todo[part[0]], done
                    reported = True
                else:
                    return
            assert broken is not None  # the loop above broke out on a broken pool
            if not unreported and not reported:  # a pool that breaks at once: no endless loop
                unreported = pending[: self._window()]
            for index in unreported:
                suspected[index] += 1
            for index in pending:
                if suspected[index] > self.retries:
                    yield todo[index], failed_task(todo[index], broken)
            pending = [index for index in pending if suspected[index] <= self.retries]

    def _window(self) -> int:
        return self.window or max(64, self.workers * 64)

    def _windows(
        self, pool: FuturesExecutor, todo: Sequence[Task], pending: Sequence[int], check: Check
    ) -> Iterator[tuple[int, list[int], tuple[CorpusResult, ...] | BrokenProcessPool]]:
        """`(position, [index], results)` per task as reported; on a broken pool one last
        `(position of the first unreported task, its window's unreported indexes, error)`."""
        window = self._window()
        for start in range(0, len(pending), window):
            part = list(pending[start : start + window])
            chunk = max(1, min(16, len(part) // (self.workers * 4)))
            try:
                found = pool.map(check, [todo[i] for i in part], chunksize=chunk)
            except BrokenProcessPool as exc:  # broken before this window: none of it ran
                yield start, [], exc
                return
            done = 0
            try:
                for results in found:
                    yield start + done, [part[done]], results
                    done += 1
            except BrokenProcessPool as exc:
                yield start + done, part[done:], exc
                return


@attrs.frozen
class Dask:
    """Runs tasks on a Dask cluster (`dask.distributed`).

    `address` is a scheduler (`tcp://HOST:PORT`); None starts a `LocalCluster`
    of `workers` single-threaded worker processes for the run. At most
    `in_flight` Dask tasks are submitted at a time (default: sixteen per
    worker thread, enough to hide the round trip to the scheduler), each
    checking `batch` units of work in order: Dask costs milliseconds per
    task, more than checking a small log, so the default of 8 amortises it.
    A worker that dies mid-run loses its tasks; the scheduler runs them again
    elsewhere, and each task is reported once, when its future completes (a
    re-run task checks all of its units again; none was reported before).
    A task that has killed
    `distributed.scheduler.allowed-failures` workers is reported `error`
    (`KilledWorker`). `timeout` bounds the wait for the scheduler, in seconds.
    `client` is a `distributed.Client` to use (and leave open) instead.
    """

    address: str | None = None
    workers: int = 2
    in_flight: int = 0
    batch: int = 8
    timeout: float = 10.0
    client: Any = None

    def run(self, tasks: Iterable[Task], check: Check) -> Completed:
        if self.client is not None:
            yield from self._run(self.client, tasks, check)
            return
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise ClusterUnavailable(
                "Dask is not installed: pip install 'session-kernel[dask]'"
            ) from None
        _quiet_dask()
        cluster: Any = None
        try:
            if self.address is None:
                cluster = LocalCluster(
                    n_workers=self.workers,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address="127.0.0.1:0",
                    silence_logs=logging.CRITICAL,
                )
                client = Client(cluster, timeout=self.timeout)
            else:
                client = Client(self.address, timeout=self.timeout)
        except (OSError, TimeoutError, ValueError) as exc:
            if cluster is not None:
                cluster.close()
            where = self.address or "a local cluster"
            raise ClusterUnavailable(f"cannot reach the Dask scheduler {where}: {exc}") from None
        try:
            yield from self._run(client, tasks, check)
        finally:
            client.close()
            if cluster is not None:
                cluster.close()

    def _run(self, client: Any, tasks: Iterable[Task], check: Check) -> Completed:
        from distributed import as_completed
        from distributed.scheduler import KilledWorker

        threads = sum(client.nthreads().values()) or 1
        limit = self.in_flight or 16 * threads
        batches = _batches(tasks, max(1, self.batch))
        pending: dict[Any, tuple[Task, ...]] = {}
        running = as_completed()

        def submit() -> bool:
            part = next(batches, None)
            if part is None:
                return False
            future = client.submit(_check_all, check, part, pure=False)
            pending[future] = part
            running.add(future)
            return True

        for _ in range(limit):
            if not submit():
                break
        for future in running:
            part = pending.pop(future)
            try:
                found: Sequence[tuple[CorpusResult, ...]] = future.result()
            except KilledWorker as exc:
                found = [failed_task(task, exc) for task in part]
            except (CancelledError, OSError, TimeoutError) as exc:
                raise ClusterUnavailable(f"the Dask cluster was lost: {exc}") from None
            except Exception as exc:  # the check never raises: the workers' environment does
                raise ClusterUnavailable(
                    f"a Dask task failed on a worker: {type(exc).__name__}: {exc} "
                    "(is session-kernel installed on every worker?)"
                ) from None
            future.release()
            yield from zip(part, found, strict=True)
            submit()


def _check_all(check: Check, part: Sequence[Task]) -> list[tuple[CorpusResult, ...]]:
    """The body of one Dask task: the check of each unit of work in it."""
    return [check(task) for task in part]


def _batches(tasks: Iterable[Task], size: int) -> Iterator[tuple[Task, ...]]:
    it = iter(tasks)
    while part := tuple(itertools.islice(it, size)):
        yield part


def _quiet_dask() -> None:
    """Dask logs warnings (a lost worker, a slow scheduler) on stderr; the command reports."""
    for name in ("distributed", "distributed.client", "distributed.scheduler", "tornado"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
