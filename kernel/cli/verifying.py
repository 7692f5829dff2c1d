"""`session-kernel verify`: admission, invariants, repairability and tool pairing of many logs.

The checks run through `kernel.corpus`: one check per file (per session of a
SQLite database) on an executor — here, a process pool (`--jobs`) or Dask
(`--scheduler`, `--dask local`); `--report` writes the columnar report and
`--minimize` shrinks each failing log. A log's status is
the worst thing found: `invalid` (corrupt, inadmissible, or a failed check),
`unsupported`, `error` (the kernel raised something other than a KernelError),
`timeout` (no verdict within `--timeout` seconds), else `torn` (a torn tail,
tolerated and removed by repair), `repairable` (an interrupted final turn that
the closers repair cleanly), or `ok`. Findings (a closed last turn with a tool
call unanswered) leave a log passing, unless `--strict`.
"""

from __future__ import annotations

import errno
import functools
import multiprocessing
import os
import re
import sys
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from pathlib import Path
from typing import Any, Final

from rich.console import Console, Group
from rich.progress import Progress
from rich.table import Table
from rich.text import Text

from kernel import corpus
from kernel.cli import DEFAULT_VERIFY_TIMEOUT, exits
from kernel.cli.output import (
    error_line,
    print_json,
    printable,
    printable_doc,
    stderr_console,
    stdout_console,
    table,
    text,
)
from kernel.cli.progress import PROGRESS_DELAY, byte_columns, delayed_progress
from kernel.cli.sources import DIRECTORY, discover, natural_key, open_log, session_ids
from kernel.corpus import check as corpus_check

__all__ = (
    "STATUSES",
    "PROGRESS_THRESHOLD",
    "verify_opened",
    "verify_file",
    "unreadable_result",
    "summarize",
    "exit_status",
    "choose_executor",
    "minimized_folder",
    "minimize_failures",
    "run_verify",
)

STATUSES: Final = (
    "ok",
    "repairable",
    "torn",
    "invalid",
    "unreadable",
    "unsupported",
    "error",
    "timeout",
)
"""Every status a log can get, in the order the summary lists them (see `exit_status`)."""

_LISTED_WHEN_FOUND: Final = frozenset({"timeout"})
"""Statuses the summary counts only when a log has them (a run without keeps its shape)."""

_PASSING: Final = frozenset({"ok", "repairable", "torn"})

PROGRESS_THRESHOLD: Final = 10
"""With at least this many files the progress bar (on a terminal) is drawn at once; with
fewer, once the run has taken `PROGRESS_DELAY` seconds (one large file included)."""

_DETAIL_ROWS: Final = 20
"""Rows listed per passing-but-reported status (torn, repairable) in the table output."""


verify_opened = corpus_check.verify_opened
_failure = corpus_check.failure_entry
unreadable_result = corpus_check.unreadable_entry


def verify_file(path: str, kind: str, now: int) -> list[dict[str, Any]]:
    """Verify every session stored in one file; never raises for a bad or unreadable log.

    The worker of `run_verify`: a top-level function returning plain values,
    so it can run in another process. Each session of a database is verified
    on its own, so one bad session does not hide the others.
    """
    try:
        sessions = session_ids(path, kind, session=None)
    except Exception as exc:  # the file itself is unreadable: one failed entry for it
        return [_failure(path, kind, None, exc)]
    results: list[dict[str, Any]] = []
    for session in sessions:
        try:
            results.append(verify_opened(open_log(path, kind, session=session, now=now)))
        except Exception as exc:  # a verdict on this log; the others are still verified
            results.append(_failure(path, kind, session, exc))
    return results


def summarize(results: Sequence[dict[str, Any]]) -> dict[str, int]:
    """How many logs got each status (zeros included, but `timeout` only when found)."""
    counts = Counter(result["status"] for result in results)
    return {
        "logs": len(results),
        **{
            status: counts[status]
            for status in STATUSES
            if counts[status] or status not in _LISTED_WHEN_FOUND
        },
    }


def exit_status(summary: dict[str, int]) -> int:
    """The exit status of a verify run (see `kernel.cli.exits`): the worst status found,
    `error` or `timeout` before `invalid` before `unreadable` before `unsupported`."""
    if summary["error"] or summary.get("timeout"):
        return exits.INTERNAL
    if summary["invalid"]:
        return exits.INVALID
    if summary["unreadable"]:
        return exits.USAGE
    if summary["unsupported"]:
        return exits.UNSUPPORTED
    return exits.OK


def _pool(workers: int) -> Executor:
    # spawn, not fork: the progress bar's refresh thread may hold a lock at fork time
    context = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(max_workers=workers, mp_context=context)


def choose_executor(
    tasks: int,
    *,
    jobs: int,
    scheduler: str | None = None,
    dask_local: bool = False,
    log_timeout: float | None = None,
) -> corpus.Executor:
    """The executor of a run: Dask when asked, else a process pool for `jobs > 1`, else here.

    `log_timeout` (seconds, None for no limit) bounds each log's wait for its verdict.
    """
    if scheduler is not None or dask_local:
        workers = jobs if jobs > 1 else os.cpu_count() or 1
        return corpus.Dask(address=scheduler, workers=workers, log_timeout=log_timeout)
    if jobs == 1 or tasks < 2:
        return corpus.InProcess(log_timeout=log_timeout)
    return corpus.ProcessPool(jobs, pool=_pool, log_timeout=log_timeout)


def _name(path: str, kind: str | None, session: str | None) -> str:
    """A log as the table names it: a directory with a trailing separator, a session in [ ]."""
    if kind == DIRECTORY:
        return f"{path}{os.sep}"
    if kind == "sqlite" and session is not None:
        return f"{path} [{session}]"
    return path


def _timeout_line(result: corpus.CorpusResult) -> str:
    """The line that names a log with no verdict in time, and the worker it waited on."""
    name = _name(result.path, result.format, result.session)
    return f"session-kernel: {printable(name)}: timeout: {printable(result.message or '')}"


def _verify_all(
    files: Sequence[tuple[str, str]],
    now: int,
    progress: Progress | None,
    *,
    jobs: int,
    scheduler: str | None,
    dask_local: bool,
    strict: bool = False,
    log_timeout: float | None = None,
    normalize_legacy: bool = True,
    max_decoded_bytes: int | None = None,
) -> list[corpus.CorpusResult]:
    tasks, results = corpus.plan_tasks(files)
    executor = choose_executor(
        len(tasks),
        jobs=jobs,
        scheduler=scheduler,
        dask_local=dask_local,
        log_timeout=log_timeout,
    )
    weights = _task_bytes(tasks)
    total = sum(weights.values())
    bar = (
        None if progress is None else progress.add_task(_described_run(0, len(tasks)), total=total)
    )
    check = functools.partial(
        corpus.check_task,
        now=now,
        strict=strict,
        normalize_legacy=normalize_legacy,
        max_decoded_bytes=max_decoded_bytes,
    )
    late = done = 0
    for task, found in executor.run(tasks, check):
        done += 1
        results.extend(found)
        for result in found:
            if result.status != "timeout":
                continue
            late += 1
            if progress is None:
                sys.stderr.write(_timeout_line(result) + "\n")
                sys.stderr.flush()
            else:
                progress.console.print(Text(_timeout_line(result)), soft_wrap=True)
        if progress is not None and bar is not None:
            description = _described_run(done, len(tasks), late)
            progress.update(bar, advance=weights.get(task, 1), description=description)
    return results


def _described_run(done: int, tasks: int, late: int = 0) -> str:
    """The progress bar's words: logs verified so far, and how many timed out."""
    timed_out = f", {late} timed out" if late else ""
    return f"verifying {done}/{tasks} log(s){timed_out}"


def _task_bytes(tasks: Sequence[corpus.Task]) -> dict[corpus.Task, int]:
    """The bytes each task reads, for the bar's rate and time left: a JSONL file's size,
    a database's size shared among its sessions (at least 1 each)."""
    shares = Counter(task.path for task in tasks)
    sizes: dict[str, int] = {}
    for path in shares:
        try:
            sizes[path] = os.stat(path).st_size
        except OSError:
            sizes[path] = 0
    return {task: max(sizes[task.path] // shares[task.path], 1) for task in tasks}


def _described(problems: Sequence[dict[str, Any]]) -> str:
    first = problems[0]
    where = f"seq {first['seq']}: " if first.get("seq") is not None else ""
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{first['check']}: {where}{first['message']}{more}"


def _reason(result: dict[str, Any]) -> Text:
    status = result["status"]
    if result["problems"]:
        return text(_described(result["problems"]))
    parts: list[str] = []
    tail = result["tail"] or {}
    if tail.get("torn"):
        parts.append(f"torn tail: {tail.get('reason')}")
    if result["closers"]:
        parts.append(f"interrupted final turn: {len(result['closers'])} closer(s)")
    if result.get("findings"):
        parts.append(f"finding: {_described(result['findings'])}")
    return text("; ".join(parts) if parts else status)


_STYLE: Final = {
    "ok": "green",
    "repairable": "cyan",
    "torn": "yellow",
    "invalid": "bold red",
    "unreadable": "bold yellow",
    "unsupported": "magenta",
    "error": "bold red",
    "timeout": "bold magenta",
}

_MEANING: Final = {
    "ok": "loads, invariants hold, tool calls paired",
    "repairable": "interrupted final turn; the closers repair it cleanly",
    "torn": "torn tail after the last turn/end; repair truncates it",
    "invalid": "corrupt, inadmissible, or a check failed",
    "unreadable": "could not be read: missing, no permission, not a regular file",
    "unsupported": "a format this reader does not support",
    "error": "internal error (kernel bug)",
    "timeout": "no verdict within --timeout seconds; the worker is named",
}


def render(results: Sequence[dict[str, Any]], summary: dict[str, int]) -> Group:
    """The summary table, then one row per log that is not plainly ok (all text `printable`)."""
    results = printable_doc(results)
    unreadable = summary["unreadable"]
    title = f"Verified {summary['logs'] - unreadable} log(s)"
    if unreadable:
        title += f"; {unreadable} path(s) could not be read"
    parts: list[Any] = [
        table(
            title,
            ("status", "logs", "meaning"),
            [
                [text(status, _STYLE[status]), summary.get(status, 0), _MEANING[status]]
                for status in STATUSES
                if summary.get(status) or status in ("ok", "invalid")
            ],
        )
    ]
    rows: list[list[Any]] = []
    shown: Counter[str] = Counter()
    noted = normalized = 0
    for result in results:
        status = result["status"]
        noted += bool(result.get("findings"))
        normalized += bool(result.get("normalized"))
        if status == "ok" and not result.get("findings"):
            continue
        shown[status] += 1
        if status in _PASSING and shown[status] > _DETAIL_ROWS:
            continue
        name = _name(result["path"], result["format"], result["session"])
        rows.append([text(status, _STYLE[status]), name, _reason(result)])
    if rows:
        parts.append(table("Logs needing attention", ("status", "log", "why"), rows))
    hidden = {s: n - _DETAIL_ROWS for s, n in shown.items() if s in _PASSING and n > _DETAIL_ROWS}
    for status, count in sorted(hidden.items()):
        parts.append(Text(f"… and {count} more {status} log(s); --json lists them all", "dim"))
    if noted:
        parts.append(Text(f"{noted} passing log(s) with findings; --strict fails them", "dim"))
    if normalized:
        parts.append(
            Text(
                f"{normalized} log(s) hold older v0 shapes, read normalized in memory; "
                "--strict-shapes refuses them",
                "dim",
            )
        )
    return Group(*parts)


def _check_writable(report: str, *, minimize: bool) -> None:
    """Refuse a report that cannot be written before any log is verified."""
    corpus.report_format(report)
    if Path(report).is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a report file", report)
    if not minimize:
        return
    folder = minimized_folder(report)
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(folder))


def _writable_parent(report: str) -> None:
    parent = Path(report).parent
    if not parent.is_dir():
        raise FileNotFoundError(errno.ENOENT, "no such directory for the report", str(parent))
    if not os.access(parent, os.W_OK):
        raise PermissionError(errno.EACCES, "cannot write the report there", str(parent))


def minimized_folder(report: str) -> Path:
    """Where `--minimize` writes: `out.parquet` -> `out.minimized/` beside it."""
    target = Path(report)
    return target.with_name(f"{target.stem}.minimized")


def _safe_name(result: corpus.CorpusResult) -> str:
    name = Path(result.path).name
    for suffix in (".jsonl.zstd", ".jsonl"):
        name = name.removesuffix(suffix)
    if result.format == "sqlite" and result.session is not None:
        name = f"{name}.{result.session}"
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)[:120] or "log"


def minimize_failures(
    results: Sequence[corpus.CorpusResult],
    folder: Path,
    now: int,
    *,
    max_decoded_bytes: int | None = None,
) -> list[dict[str, Any]]:
    """Shrink every invalid log that loads to a 1-minimal counterexample; one JSONL each.

    A log that does not load (corrupt, inadmissible) has nothing to shrink and
    is left out. Returns one entry per written file: log, failure, sizes, file.
    """
    out: list[dict[str, Any]] = []
    used: set[str] = set()
    for result in results:
        if result.status != "invalid" or result.check in (None, "read", "admission"):
            continue
        try:
            shrunk = corpus.minimize_log(
                result.path,
                result.format or "jsonl",
                session=result.session,
                now=now,
                max_decoded_bytes=max_decoded_bytes,
            )
        except Exception:  # the log changed under us, or shrinking hit a kernel bug: skip it
            shrunk = None
        if shrunk is None:
            continue
        name = _safe_name(result)
        stem, n = name, 1
        while name in used:
            n += 1
            name = f"{stem}-{n}"
        used.add(name)
        folder.mkdir(exist_ok=True)
        target = folder / f"{name}.min.jsonl"
        target.write_bytes(shrunk.data)
        out.append(
            {
                "path": result.path,
                "session": result.session,
                "check": shrunk.key[0],
                "rule": shrunk.key[1],
                "eventsBefore": shrunk.before,
                "eventsAfter": shrunk.after,
                "file": str(target),
            }
        )
    return out


def _render_minimized(entries: Sequence[dict[str, Any]]) -> Table:
    rows = [
        [
            e["path"],
            f"{e['check']}: {e['rule']}",
            f"{e['eventsBefore']} → {e['eventsAfter']}",
            e["file"],
        ]
        for e in printable_doc(list(entries))
    ]
    return table("Minimal counterexamples", ("log", "fails", "events", "written to"), rows)


def run_verify(
    paths: Sequence[str],
    *,
    jobs: int,
    as_json: bool,
    now: int,
    exclude: Sequence[str] = (),
    hidden: bool = False,
    scheduler: str | None = None,
    dask_local: bool = False,
    report: str | None = None,
    minimize: bool = False,
    strict: bool = False,
    timeout: float | None = DEFAULT_VERIFY_TIMEOUT,
    normalize_legacy: bool = True,
    max_decoded_bytes: int | None = None,
) -> int:
    """Verify every log under `paths`; print the report; return the exit status.

    `exclude` and `hidden` choose what a directory walk passes over (see
    `sources.discover`); paths named in `paths` are always taken. `scheduler`
    (a Dask address) or `dask_local` run the checks on Dask; `report` also
    writes the table of `kernel.corpus.report`, and `minimize` one minimal
    counterexample per failing log in `minimized_folder(report)`. `strict`
    fails a log on a finding; `timeout` (seconds, None for no limit) is how
    long a log may take before it is reported `timeout` (one line on stderr
    names it and its worker). With `normalize_legacy` false, older v0 shapes
    fail a log instead of being read normalized (`--strict-shapes`).
    `max_decoded_bytes` caps a Zstandard log's plaintext (`--max-decoded-bytes`).
    """
    if minimize and report is None:
        error_line("--minimize writes beside the report: give --report FILE")
        return exits.USAGE
    try:
        if report is not None:
            _check_writable(report, minimize=minimize)
            _writable_parent(report)
            corpus.report.pyarrow_module()  # refuse now, not after the whole run
        return _run(
            paths,
            jobs=jobs,
            as_json=as_json,
            now=now,
            exclude=exclude,
            hidden=hidden,
            scheduler=scheduler,
            dask_local=dask_local,
            report=report,
            minimize=minimize,
            strict=strict,
            timeout=timeout,
            normalize_legacy=normalize_legacy,
            max_decoded_bytes=max_decoded_bytes,
        )
    except (corpus.ClusterUnavailable, corpus.ReportUnavailable) as exc:
        error_line(str(exc))
        return exits.USAGE


def _run(
    paths: Sequence[str],
    *,
    jobs: int,
    as_json: bool,
    now: int,
    exclude: Sequence[str],
    hidden: bool,
    scheduler: str | None,
    dask_local: bool,
    report: str | None,
    minimize: bool,
    strict: bool,
    timeout: float | None,
    normalize_legacy: bool,
    max_decoded_bytes: int | None,
) -> int:
    found = discover(paths, exclude=exclude, hidden=hidden)
    if not found.logs and not found.unreadable:
        raise FileNotFoundError(2, "no logs found (*.jsonl, *.jsonl.zstd, SQLite)", " ".join(paths))
    files = list(found.logs)
    err: Console = stderr_console()
    options: dict[str, Any] = {
        "jobs": jobs,
        "scheduler": scheduler,
        "dask_local": dask_local,
        "strict": strict,
        "log_timeout": timeout,
        "normalize_legacy": normalize_legacy,
        "max_decoded_bytes": max_decoded_bytes,
    }
    delay = 0.0 if len(files) >= PROGRESS_THRESHOLD else PROGRESS_DELAY
    with delayed_progress(err, byte_columns(), delay=delay) as progress:
        records = _verify_all(files, now, progress, **options)
    records.extend(
        corpus.check.result_of(unreadable_result(item), size=None, seconds=0.0)
        for item in found.unreadable
    )
    records.sort(key=lambda r: (natural_key(r.path), natural_key(r.session or "")))
    minimized: list[dict[str, Any]] = []
    if report is not None:
        if minimize:
            minimized = minimize_failures(
                records, minimized_folder(report), now, max_decoded_bytes=max_decoded_bytes
            )
        corpus.write_report(records, report)
    results = [dict(r.detail) for r in records]
    summary = summarize(results)
    status = exit_status(summary)
    if as_json:
        document: dict[str, Any] = {"summary": summary, "exitStatus": status, "logs": results}
        if minimize:
            document["minimized"] = minimized
        print_json(document)
    else:
        shown: Any = render(results, summary)
        if minimize:
            shown = Group(shown, _render_minimized(minimized))
        stdout_console().print(shown)
    return status
