"""`verify_corpus`: find every log under some paths and check each one on an executor.

Discovery and task planning run here, in the caller's process (they only
list directories and SQLite sessions); the checks run wherever the executor
puts them. Paths must name the same files on every worker: a remote Dask
cluster needs the corpus on a file system its workers share.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator, Sequence

from kernel.cli.sources import discover
from kernel.corpus.check import CorpusResult, check_task, plan_tasks, result_of, unreadable_entry
from kernel.corpus.executors import Executor, InProcess

__all__ = ("verify_corpus", "verify_tasks")


def verify_tasks(
    files: Sequence[tuple[str, str]], *, executor: Executor, now: int, strict: bool = False
) -> Iterator[CorpusResult]:
    """Check `(path, kind)` files on `executor`, yielding one record per log as it completes.

    `strict` fails a log on a finding too (`check_task`).
    """
    tasks, failed = plan_tasks(files)
    yield from failed
    check = functools.partial(check_task, now=now, strict=strict)
    for _, results in executor.run(tasks, check):
        yield from results


def verify_corpus(
    paths: Sequence[str],
    *,
    executor: Executor | None = None,
    now: int | None = None,
    exclude: Sequence[str] = (),
    hidden: bool = False,
    strict: bool = False,
) -> Iterator[CorpusResult]:
    """Verify every log under `paths`, yielding one `CorpusResult` per log as it completes.

    Directories are searched as `session-kernel verify` searches them
    (`exclude`, `hidden`); a path that cannot be read yields an `unreadable`
    record. `executor` defaults to `InProcess()` (give it a `log_timeout` to
    bound each log's wait); `now` (milliseconds, the time closers carry)
    defaults to the clock; `strict` fails a log on a finding too. Each log is
    yielded exactly once, in completion order: sort by `(path, session)` for a
    stable report.

    >>> from kernel.corpus import ProcessPool
    >>> rows = verify_corpus(["examples"], executor=ProcessPool(2))  # doctest: +SKIP
    """
    when = int(time.time() * 1000) if now is None else now
    found = discover(paths, exclude=exclude, hidden=hidden)
    for item in found.unreadable:
        yield result_of(unreadable_entry(item), size=None, seconds=0.0)
    yield from verify_tasks(found.logs, executor=executor or InProcess(), now=when, strict=strict)
