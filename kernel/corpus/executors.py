"""Where the per-log check runs: in this process, a process pool, or a Dask cluster.

An executor takes tasks and a picklable check (`Task -> tuple[CorpusResult, ...]`)
and yields `(task, results)` pairs as tasks complete, each task exactly once.
Every executor keeps a bounded number of tasks in flight, so the work held stays flat
however large the corpus. With a `log_timeout`, no log waits longer than that for
its verdict (`Bounded`), and a Dask worker that stops answering is given up: a
run always ends. Dask is imported only when a `Dask` executor runs.
"""

from __future__ import annotations

import collections
import gc
import itertools
import logging
import multiprocessing
import multiprocessing.connection
import os
import queue
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import CancelledError, ProcessPoolExecutor
from concurrent.futures import Executor as FuturesExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Final, Protocol

import attrs

from kernel.corpus.check import CorpusResult, Task, failure_entry, result_of, timeout_entry

__all__ = (
    "Check",
    "Executor",
    "ClusterUnavailable",
    "InProcess",
    "ProcessPool",
    "Dask",
    "Bounded",
    "failed_task",
    "timed_out",
    "worker_name",
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


def timed_out(task: Task, seconds: float, worker: str, why: str) -> tuple[CorpusResult, ...]:
    """The result of a task with no verdict in time: status `timeout`, naming the worker.

    Its size is not read: a file system that stalled the check would stall that too.
    """
    entry = timeout_entry(
        task.path, task.kind, task.session, seconds=seconds, worker=worker, why=why
    )
    return (result_of(entry, size=None, seconds=seconds),)


def worker_name() -> str:
    """Where the calling code runs: its Dask worker's address, else `pid N on HOST`."""
    distributed = sys.modules.get("distributed")  # never imported here: only asked when loaded
    if distributed is not None:
        try:
            return str(distributed.get_worker().address)
        except ValueError:  # not in a Dask worker
            pass
    return f"pid {os.getpid()} on {socket.gethostname()}"


class _Job:
    """One call of a check, run by a helper thread and awaited by the thread that asked."""

    __slots__ = ("check", "task", "done", "result", "error")

    def __init__(self, check: Check, task: Task) -> None:
        self.check = check
        self.task = task
        self.done = threading.Event()
        self.result: tuple[CorpusResult, ...] = ()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.check(self.task)
        except BaseException as exc:  # raised again in the waiting thread
            self.error = exc
        finally:
            self.done.set()


class _Helper:
    """A daemon thread that runs jobs one at a time for the thread that started it."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        thread = threading.Thread(target=self._serve, name="session-kernel-check", daemon=True)
        thread.start()

    def _serve(self) -> None:
        while True:
            self.jobs.get().run()


_helpers = threading.local()
"""Each calling thread's `_Helper` (a Dask worker calls from several threads)."""


@attrs.frozen
class Bounded:
    """A check that waits at most `seconds` for each unit of work, else reports `timeout`.

    The check runs in a helper thread of the process calling this one (a pool
    or Dask worker, or this process), so the caller can stop waiting. A check
    cannot be stopped from outside: one that overruns is left running in its
    daemon thread, which never keeps the process alive, and the next unit gets
    a new helper. The timed-out unit's result names the worker (`worker_name`).
    """

    check: Check
    seconds: float

    def __call__(self, task: Task) -> tuple[CorpusResult, ...]:
        helper: _Helper | None = getattr(_helpers, "helper", None)
        if helper is None:
            helper = _helpers.helper = _Helper()
        job = _Job(self.check, task)
        collecting = gc.isenabled()
        helper.jobs.put(job)
        if job.done.wait(self.seconds):
            if job.error is not None:
                raise job.error
            return job.result
        _helpers.helper = None  # still busy with this job
        if collecting:
            gc.enable()  # the overrunning check may hold the collector paused
        why = f"no verdict within {self.seconds:g} s; the check was left running"
        return timed_out(task, self.seconds, worker_name(), why)


def _bounded(check: Check, seconds: float | None) -> Check:
    return check if seconds is None else Bounded(check, seconds)


@attrs.frozen
class InProcess:
    """Runs every task here, one after the other: the reference executor.

    `log_timeout` (seconds) bounds the wait for each task (`Bounded`).
    """

    log_timeout: float | None = None

    def run(self, tasks: Iterable[Task], check: Check) -> Completed:
        bounded = _bounded(check, self.log_timeout)
        for task in tasks:
            yield task, bounded(task)


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
    task runs again in a new pool. A worker found dead before a window is
    sent (killed while idle, between windows) makes no suspect: that window
    runs in a new pool. Each task is reported exactly once.
    `pool` makes the pool from a worker count (tests substitute their own).
    `log_timeout` (seconds) bounds each task's wait in its worker (`Bounded`).
    """

    workers: int = 2
    window: int = 0
    retries: int = 0
    pool: Callable[[int], FuturesExecutor] = _spawn_pool
    log_timeout: float | None = None

    def run(self, tasks: Iterable[Task], check: Check) -> Completed:
        check = _bounded(check, self.log_timeout)
        todo = list(tasks)
        suspected = [0] * len(todo)
        pending = list(range(len(todo)))
        while pending:
            broken: BrokenProcessPool | None = None
            unreported: list[int] = []
            reported = False
            with self.pool(self.workers) as pool:
                try:
                    for at, part, done in self._windows(pool, todo, pending, check):
                        if isinstance(done, BrokenProcessPool):
                            broken, unreported = done, part
                            pending = pending[at:]
                            break
                        yield todo[part[0]], done
                        reported = True
                    else:
                        return
                finally:
                    _stop_workers(pool)  # then leaving the block waits for nothing
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
            if _lost_a_worker(pool):  # before this window: none of it ran
                yield start, [], BrokenProcessPool("a worker of the pool died between windows")
                return
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


_SHUTDOWN_POLL: Final = 0.2
"""Seconds between two looks at the workers of a pool shutting down (`_stop_workers`)."""


def _stop_workers(pool: FuturesExecutor) -> None:
    """Shut a process pool down so that a worker that died idle cannot hold it up.

    A worker killed while it waits for work may hold the lock of the queue the others
    take their stop signal from, and the pool then waits for them forever (found by
    killing one after the last window had reported). So the pool is told to shut down
    without waiting, and while it stops, a worker that ended with an error (killed, not
    stopped) stops the others, as `_lost_a_worker` does between windows. Any other pool
    is left to its own shutdown.
    """
    processes = getattr(pool, "_processes", None)  # ProcessPoolExecutor's {pid: Process}
    manager = getattr(pool, "_executor_manager_thread", None)  # the thread that stops them
    if not processes or manager is None:
        return
    workers = list(processes.values())
    pool.shutdown(wait=False)
    while manager.is_alive():
        manager.join(_SHUTDOWN_POLL)
        if manager.is_alive() and any(worker.exitcode not in (None, 0) for worker in workers):
            for worker in workers:
                worker.kill()


def _lost_a_worker(pool: FuturesExecutor) -> bool:
    """Whether a worker process of `pool` has died (none is asked to stop during a run);
    if one has, the others are stopped, as the pool stops them once it notices.

    Asked before each window is sent, for the pool notices a dead worker in its own
    thread, when it gets to it: a window sent in between would fail with it, every
    task a suspect, though the worker died before any was sent. The others are
    stopped here because one that died idle may have held the lock of the queue they
    take work from, and a pool shut down before it noticed would wait for them forever.
    """
    processes = getattr(pool, "_processes", None)  # ProcessPoolExecutor's {pid: Process}
    if not processes:  # not a process pool, not started yet, or shut down
        return False
    workers = list(processes.values())
    if not multiprocessing.connection.wait([worker.sentinel for worker in workers], timeout=0):
        return False
    for worker in workers:
        worker.kill()
    return True


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
    (`KilledWorker`). `timeout` bounds the wait for the scheduler, and for a
    first worker when it has none, in seconds.
    `client` is a `distributed.Client` to use (and leave open) instead.

    With `log_timeout` (seconds), each unit runs under `Bounded` on its
    worker, and a Dask task starts no unit once it has run that long (the
    units it did not start are sent again), so a worker that answers returns
    every task within twice `log_timeout`. A worker that holds tasks of the
    run and has answered none for twice `log_timeout` plus `grace` is given
    up: those tasks are cancelled, their units reported `timeout` naming the
    worker, and it gets no more work. With every worker given up, or none
    left, the run ends with `ClusterUnavailable`.
    """

    address: str | None = None
    workers: int = 2
    in_flight: int = 0
    batch: int = 8
    timeout: float = 10.0
    client: Any = None
    log_timeout: float | None = None
    grace: float = 5.0

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

    def _await_workers(self, client: Any) -> None:
        if client.nthreads():
            return
        try:
            client.wait_for_workers(1, timeout=self.timeout)
        except TimeoutError:
            where = self.address or client.scheduler.address
            raise ClusterUnavailable(
                f"the Dask scheduler {where} has no workers (waited {self.timeout:g} s)"
            ) from None

    def _run(self, client: Any, tasks: Iterable[Task], check: Check) -> Completed:
        self._await_workers(client)
        threads = sum(client.nthreads().values()) or 1
        limit = self.in_flight or 16 * threads
        budget = self.log_timeout
        if budget is not None:
            check = Bounded(check, budget)
        watch = None if budget is None else _Watch(2 * budget + self.grace, self.grace)
        batches = _batches(tasks, max(1, self.batch))
        again: collections.deque[tuple[Task, ...]] = collections.deque()
        pending: dict[Any, tuple[Task, ...]] = {}
        finished: queue.SimpleQueue[Any] = queue.SimpleQueue()

        def submit() -> bool:
            part = again.popleft() if again else next(batches, None)
            if part is None:
                return False
            where: dict[str, Any] = {}
            if watch is not None and watch.given_up:
                where = {"workers": watch.allowed(client), "allow_other_workers": False}
            future = client.submit(_check_all, check, part, budget, pure=False, **where)
            pending[future] = part
            future.add_done_callback(finished.put)
            return True

        for _ in range(limit):
            if not submit():
                break
        while pending:
            try:
                future = finished.get(timeout=None if watch is None else watch.tick)
            except queue.Empty:
                future = None
            if future is not None and future in pending:
                part = pending.pop(future)
                collected = self._collect(client, future, part, watch)
                if collected is None:  # checked, but the result is out of reach: again
                    again.append(part)
                else:
                    worker, found = collected
                    if len(found) < len(part):  # out of time: the units not started go again
                        again.append(part[len(found) :])
                    yield from zip(part, found, strict=False)
                    if watch is not None:
                        watch.answered(worker)
                submit()
            if watch is None:
                continue
            for worker, futures in watch.silent(client, pending):
                why = "the worker stopped answering; given up"
                for future in futures:
                    part = pending.pop(future)
                    future.cancel()
                    for task in part:
                        yield task, timed_out(task, watch.stall, worker, why)
            while len(pending) < limit and submit():
                pass

    def _collect(
        self, client: Any, future: Any, part: tuple[Task, ...], watch: _Watch | None
    ) -> tuple[str | None, Sequence[tuple[CorpusResult, ...]]] | None:
        """Where a completed task ran and its results; a lost worker's tasks are `error`.

        With a `watch`, a result held by a worker given up is not asked for, and
        one not handed over within `watch.grace` seconds gives its worker up:
        None then, for the task to be sent again (its logs were checked; their
        verdicts are out of reach).
        """
        from distributed.scheduler import KilledWorker

        try:
            if watch is not None and watch.given_up and watch.held_by_given_up(client, future):
                future.cancel()
                return None
            worker, found = future.result(timeout=None if watch is None else watch.grace)
        except KilledWorker as exc:
            return None, [failed_task(task, exc) for task in part]
        except TimeoutError as exc:
            if watch is None:
                raise ClusterUnavailable(f"the Dask cluster was lost: {exc}") from None
            watch.give_up(_holders(client, future))
            future.cancel()
            return None
        except (CancelledError, OSError) as exc:
            raise ClusterUnavailable(f"the Dask cluster was lost: {exc}") from None
        except Exception as exc:  # the check never raises: the workers' environment does
            raise ClusterUnavailable(
                f"a Dask task failed on a worker: {type(exc).__name__}: {exc} "
                "(is session-kernel installed on every worker?)"
            ) from None
        future.release()
        return str(worker), found


def _holders(client: Any, future: Any) -> set[str]:
    """The workers holding a finished task's result."""
    return {worker for workers in client.who_has([future]).values() for worker in workers}


class _Watch:
    """Which Dask workers hold a run's tasks, and since when each has not answered.

    Asks the scheduler (`Client.processing`) at most once a `tick`. A worker
    that holds tasks of the run and has answered none of them for `stall`
    seconds is silent: given up, and left out of later submissions. `grace`
    is how long a finished task's result may take to arrive.
    """

    def __init__(self, stall: float, grace: float) -> None:
        self.stall = stall
        self.grace = grace
        self.tick = min(1.0, stall / 4)
        self.quiet: dict[str, float] = {}
        self.given_up: set[str] = set()
        self.asked = -self.tick
        self.heard = time.monotonic()

    def answered(self, worker: str | None) -> None:
        """A task came back from `worker` (None: it is not known where it ran)."""
        self.heard = time.monotonic()
        if worker in self.quiet:
            self.quiet[worker] = self.heard

    def give_up(self, workers: Iterable[str]) -> None:
        """Leave `workers` out of later submissions."""
        for worker in workers:
            self.given_up.add(worker)
            self.quiet.pop(worker, None)

    def held_by_given_up(self, client: Any, future: Any) -> bool:
        """Whether a finished task's result is held only by workers given up."""
        holders = _holders(client, future)
        return bool(holders) and holders <= self.given_up

    def allowed(self, client: Any) -> list[str]:
        """The workers that may get work: all but those given up."""
        allowed = sorted(set(client.nthreads()) - self.given_up)
        if not allowed:
            silent = ", ".join(sorted(self.given_up))
            raise ClusterUnavailable(f"every Dask worker stopped answering ({silent})")
        return allowed

    def silent(self, client: Any, pending: Iterable[Any]) -> list[tuple[str, list[Any]]]:
        """The workers given up by now that hold futures of the run, with those futures."""
        now = time.monotonic()
        if now - self.asked < self.tick:
            return []
        self.asked = now
        ours = {future.key: future for future in pending}
        holding = {
            worker: held
            for worker, keys in client.processing().items()
            if (held := [ours[key] for key in keys if key in ours])
        }
        self.quiet = {worker: self.quiet.get(worker, now) for worker in holding}
        self.give_up([w for w, since in self.quiet.items() if now - since > self.stall])
        found = [(worker, held) for worker, held in holding.items() if worker in self.given_up]
        if ours and not holding and now - self.heard > self.stall:
            self._someone_running(client)
        return found

    def _someone_running(self, client: Any) -> None:
        """Raise `ClusterUnavailable` when no worker that is not given up is running."""
        workers = client.scheduler_info()["workers"]
        running = [w for w, info in workers.items() if info.get("status") == "running"]
        if not set(running) - self.given_up:
            raise ClusterUnavailable(
                f"no Dask worker has taken work for {self.stall:g} s (none is running)"
            )


def _check_all(
    check: Check, part: Sequence[Task], budget: float | None
) -> tuple[str, list[tuple[CorpusResult, ...]]]:
    """The body of one Dask task: where it runs, and the check of each unit of work in it.

    With a `budget` (seconds), no unit is started once the task has run that
    long; the units not started are left out, for the caller to send again.
    """
    start = time.monotonic()
    found: list[tuple[CorpusResult, ...]] = []
    for task in part:
        if found and budget is not None and time.monotonic() - start >= budget:
            break
        found.append(check(task))
    return worker_name(), found


def _batches(tasks: Iterable[Task], size: int) -> Iterator[tuple[Task, ...]]:
    it = iter(tasks)
    while part := tuple(itertools.islice(it, size)):
        yield part


def _quiet_dask() -> None:
    """Dask logs warnings (a lost worker, a slow scheduler) on stderr; the command reports."""
    for name in ("distributed", "distributed.client", "distributed.scheduler", "tornado"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
