"""`session-kernel verify`: admission, invariants, repairability and tool pairing of many logs.

One worker call verifies one file (every session of a SQLite database) and
returns plain values, so files can be spread over processes. A log's status is
the worst thing found: `invalid` (corrupt, inadmissible, or a failed check),
`unsupported`, `error` (the kernel raised something other than a KernelError),
else `torn` (a torn tail, tolerated and removed by repair), `repairable` (an
interrupted final turn that the closers repair cleanly), or `ok`.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Final

from rich.console import Console, Group
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from kernel.cli import analysis, exits
from kernel.cli.output import (
    print_json,
    printable_doc,
    stderr_console,
    stdout_console,
    table,
    text,
)
from kernel.cli.sources import (
    DIRECTORY,
    Opened,
    Unreadable,
    describe_os_error,
    discover,
    open_log,
    session_ids,
)
from kernel.errors import KernelError, UnsupportedFormat

__all__ = (
    "STATUSES",
    "PROGRESS_THRESHOLD",
    "verify_opened",
    "verify_file",
    "unreadable_result",
    "summarize",
    "exit_status",
    "run_verify",
)

STATUSES: Final = ("ok", "repairable", "torn", "invalid", "unreadable", "unsupported", "error")
"""Every status a log can get, in the order the summary lists them (see `exit_status`)."""

_PASSING: Final = frozenset({"ok", "repairable", "torn"})

PROGRESS_THRESHOLD: Final = 10
"""A progress bar is drawn (on a terminal) when at least this many files are verified."""

_DETAIL_ROWS: Final = 20
"""Rows listed per passing-but-reported status (torn, repairable) in the table output."""


def verify_opened(opened: Opened) -> dict[str, Any]:
    """The verdict on one loaded session: status, facts, and every problem found."""
    problems = analysis.repaired_log_problems(opened.stored, opened.closers, opened.header)
    if problems:
        status = "invalid"
    elif opened.torn:
        status = "torn"
    elif opened.closers:
        status = "repairable"
    else:
        status = "ok"
    return {
        "path": opened.path,
        "format": opened.kind,
        "session": opened.session,
        "status": status,
        "events": len(opened.stored),
        "closers": analysis.closers(opened.closers),
        "tail": opened.tail,
        "problems": problems,
    }


def _entry(
    path: str, kind: str | None, session: str | None, status: str, check: str, message: str
) -> dict[str, Any]:
    return {
        "path": path,
        "format": kind,
        "session": session,
        "status": status,
        "events": None,
        "closers": [],
        "tail": None,
        "problems": [{"check": check, "message": message}],
    }


def _failure(path: str, kind: str, session: str | None, exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, OSError):
        return _entry(path, kind, session, "unreadable", "read", describe_os_error(exc))
    if isinstance(exc, UnsupportedFormat):
        status = "unsupported"
    elif isinstance(exc, KernelError):
        status = "invalid"
    else:
        status = "error"
    return _entry(path, kind, session, status, "admission", f"{type(exc).__name__}: {exc}")


def unreadable_result(item: Unreadable) -> dict[str, Any]:
    """The report entry of a path the search could not read: status `unreadable`, check `read`."""
    return _entry(item.path, item.format, None, "unreadable", "read", item.reason)


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
    """How many logs got each status (every status present, zeros included)."""
    counts = Counter(result["status"] for result in results)
    return {"logs": len(results), **{status: counts[status] for status in STATUSES}}


def exit_status(summary: dict[str, int]) -> int:
    """The exit status of a verify run (see `kernel.cli.exits`): the worst status found,
    `error` before `invalid` before `unreadable` before `unsupported`."""
    if summary["error"]:
        return exits.INTERNAL
    if summary["invalid"]:
        return exits.INVALID
    if summary["unreadable"]:
        return exits.USAGE
    if summary["unsupported"]:
        return exits.UNSUPPORTED
    return exits.OK


def _verify_all(
    files: Sequence[tuple[str, str]], jobs: int, now: int, progress: Progress | None
) -> list[dict[str, Any]]:
    task = None if progress is None else progress.add_task("verifying", total=len(files))
    results: list[dict[str, Any]] = []

    def advance() -> None:
        if progress is not None and task is not None:
            progress.advance(task)

    if jobs == 1 or len(files) < 2:
        for path, kind in files:
            results.extend(verify_file(path, kind, now))
            advance()
        return results
    paths = [path for path, _ in files]
    kinds = [kind for _, kind in files]
    chunk = max(1, min(16, len(files) // (jobs * 4)))
    # spawn, not fork: the progress bar's refresh thread may hold a lock at fork time
    context = multiprocessing.get_context("spawn")
    done = 0
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        try:
            for found in pool.map(verify_file, paths, kinds, [now] * len(files), chunksize=chunk):
                results.extend(found)
                done += 1
                advance()
        except BrokenProcessPool as exc:  # a worker died: what it had not reported is an error
            results.extend(_failure(path, kind, None, exc) for path, kind in files[done:])
    return results


def _reason(result: dict[str, Any]) -> Text:
    status = result["status"]
    if result["problems"]:
        problems = result["problems"]
        first = problems[0]
        where = f"seq {first['seq']}: " if first.get("seq") is not None else ""
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        return text(f"{first['check']}: {where}{first['message']}{more}")
    parts: list[str] = []
    tail = result["tail"] or {}
    if tail.get("torn"):
        parts.append(f"torn tail: {tail.get('reason')}")
    if result["closers"]:
        parts.append(f"interrupted final turn: {len(result['closers'])} closer(s)")
    return text("; ".join(parts) if parts else status)


_STYLE: Final = {
    "ok": "green",
    "repairable": "cyan",
    "torn": "yellow",
    "invalid": "bold red",
    "unreadable": "bold yellow",
    "unsupported": "magenta",
    "error": "bold red",
}

_MEANING: Final = {
    "ok": "loads, invariants hold, tool calls paired",
    "repairable": "interrupted final turn; the closers repair it cleanly",
    "torn": "torn tail after the last turn/end; repair truncates it",
    "invalid": "corrupt, inadmissible, or a check failed",
    "unreadable": "could not be read: missing, no permission, not a regular file",
    "unsupported": "a format this reader does not support",
    "error": "internal error (kernel bug)",
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
                [text(status, _STYLE[status]), summary[status], _MEANING[status]]
                for status in STATUSES
                if summary[status] or status in ("ok", "invalid")
            ],
        )
    ]
    rows: list[list[Any]] = []
    shown: Counter[str] = Counter()
    for result in results:
        status = result["status"]
        if status == "ok":
            continue
        shown[status] += 1
        if status in _PASSING and shown[status] > _DETAIL_ROWS:
            continue
        name = result["path"]
        if result["format"] == DIRECTORY:
            name = f"{name}{os.sep}"
        elif result["format"] == "sqlite" and result["session"] is not None:
            name = f"{name} [{result['session']}]"
        rows.append([text(status, _STYLE[status]), name, _reason(result)])
    if rows:
        parts.append(table("Logs needing attention", ("status", "log", "why"), rows))
    hidden = {s: n - _DETAIL_ROWS for s, n in shown.items() if s in _PASSING and n > _DETAIL_ROWS}
    for status, count in sorted(hidden.items()):
        parts.append(Text(f"… and {count} more {status} log(s); --json lists them all", "dim"))
    return Group(*parts)


def run_verify(
    paths: Sequence[str],
    *,
    jobs: int,
    as_json: bool,
    now: int,
    exclude: Sequence[str] = (),
    hidden: bool = False,
) -> int:
    """Verify every log under `paths`; print the report; return the exit status.

    `exclude` and `hidden` choose what a directory walk passes over (see
    `sources.discover`); paths named in `paths` are always taken.
    """
    found = discover(paths, exclude=exclude, hidden=hidden)
    if not found.logs and not found.unreadable:
        raise FileNotFoundError(2, "no logs found (*.jsonl, *.jsonl.zstd, SQLite)", " ".join(paths))
    files = list(found.logs)
    err: Console = stderr_console()
    show_progress = not as_json and sys.stderr.isatty() and len(files) >= PROGRESS_THRESHOLD
    if show_progress:
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=err, transient=True) as progress:
            results = _verify_all(files, jobs, now, progress)
    else:
        results = _verify_all(files, jobs, now, None)
    results.extend(unreadable_result(item) for item in found.unreadable)
    results.sort(key=lambda r: (r["path"], r["session"] or ""))
    summary = summarize(results)
    status = exit_status(summary)
    if as_json:
        print_json({"summary": summary, "exitStatus": status, "logs": results})
    else:
        stdout_console().print(render(results, summary))
    return status
