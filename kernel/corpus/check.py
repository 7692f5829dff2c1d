"""The per-log check: one stored log in, one `CorpusResult` out.

`check_bytes` is the whole verdict on one JSONL (or Zstandard JSONL) log given
its bytes: pure apart from the timing column. `check_task` is its I/O shell for
one unit of work (a file, or one session of a SQLite database), run by every
executor; it never raises for a bad or unreadable log, so a worker always
returns one record per log it was given. A verdict holds problems (the log
fails) and findings (it passes, but something in it is worth knowing; strict
verification fails them too).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from kernel.cli import analysis
from kernel.cli.sources import (
    SQLITE,
    ZSTD,
    Opened,
    Unreadable,
    describe_os_error,
    open_log,
    opened_from_loaded,
    session_ids,
)
from kernel.errors import KernelError, UnsupportedFormat
from kernel.folds.messages import project_message
from kernel.folds.pairing import tool_pairing_cuts
from kernel.storage.jsonl import load_jsonl
from kernel.storage.zstd import load_jsonl_zstd
from kernel.store.collector import paused_collector
from kernel.values.events import ASSISTANT_MESSAGE, TURN_END, Event

__all__ = (
    "CorpusResult",
    "Task",
    "UNANSWERED_CALL",
    "verify_opened",
    "unanswered_call_findings",
    "failure_entry",
    "unreadable_entry",
    "timeout_entry",
    "problem_rule",
    "result_of",
    "check_opened",
    "check_bytes",
    "check_task",
    "plan_tasks",
)

_CLASS_PREFIX: Final = re.compile(r"^([A-Z][A-Za-z0-9]*): ")

UNANSWERED_CALL: Final = "unanswered-call"
"""The rule id of a tool call no result answers: before the next assistant message (a
pairing problem), or when the log ends (a finding of `unanswered_call_findings`)."""


@attrs.frozen
class Task:
    """One unit of work: a JSONL file, or one session of a SQLite database.

    `session` is None for a JSONL file (the header's own id), and for a
    database whose sessions could not be listed (the task then reports the file).
    """

    path: str
    kind: str
    session: str | None = None


@attrs.frozen
class CorpusResult:
    """The verdict on one log: one row of the report (schema: docs/cli.md, "The report").

    `rules` holds the rule id of every problem, then of every finding
    (`problem_rule`), in order, without repeats; `first_seq` the smallest
    seq a problem or finding names; `check` the first failing check;
    `message` the first problem in words (else the first finding);
    `torn_bytes` the bytes after the committed region of a JSONL log (None for
    SQLite); `closers` how many events repair appends (None when the log did
    not load). `load_seconds` is the only timing field and takes no part in
    equality. `detail` is the log's entry in `verify --json` (plain JSON).
    """

    path: str
    session: str | None
    format: str | None
    status: str
    events: int | None
    bytes: int | None
    check: str | None
    rules: tuple[str, ...]
    first_seq: int | None
    torn_bytes: int | None
    torn_records: int | None
    closers: int | None
    message: str | None
    load_seconds: float = attrs.field(eq=False, default=0.0)
    detail: Mapping[str, Any] = attrs.field(factory=dict, hash=False, repr=False)


def verify_opened(opened: Opened, *, strict: bool = False) -> dict[str, Any]:
    """The `verify --json` entry of one loaded session: status, facts, problems and findings.

    With `strict`, a finding is a problem too: it is listed with the problems
    (after them) and the log is `invalid`.
    """
    problems = analysis.repaired_log_problems(opened.stored, opened.closers, opened.header)
    findings = unanswered_call_findings((*opened.stored, *opened.closers))
    if strict:
        problems, findings = [*problems, *findings], []
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
        "findings": findings,
        "normalized": dict(opened.normalized),
    }


def _member(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, Mapping) else None


def _blocks(message: Any, kind: str) -> list[Any]:
    content = _member(message, "content")
    if not isinstance(content, Sequence) or isinstance(content, str):
        return []
    return [block for block in content if _member(block, "type") == kind]


def unanswered_call_findings(events: Sequence[Event]) -> list[dict[str, Any]]:
    """The tool calls a log ends with unanswered, as one `unanswered-call` finding (or none).

    `events` is the repaired log (stored events, then their closers). A turn
    may end before its calls are answered, so such a log is well formed; but
    no provider accepts its history (`export` refuses it, `ToolPairingError`).
    The tool-pairing fold says whether the surface ends balanced; when it does
    not, the finding names the last assistant message on the surface (its
    seq) and those of its calls no later result answers. Calls left open
    before a later assistant message are a pairing problem instead, and a
    surface the fold refuses is reported by the pairing check: neither is a
    finding.
    """
    try:
        cuts = tool_pairing_cuts(events)
    except KernelError:
        return []
    if not cuts or cuts[-1].after:
        return []
    nodes = [cut.seq for cut in cuts]
    last = next(
        (at for at in reversed(range(len(nodes))) if _is_assistant(events, nodes[at])), None
    )
    if last is None:
        return []
    try:
        calls = [
            _member(b, "id") for b in _blocks(project_message(events[nodes[last]]), "tool-call")
        ]
        answered = {
            _member(block, "toolCallId")
            for seq in nodes[last + 1 :]
            for block in _blocks(project_message(events[seq]), "tool-result")
        }
    except KernelError:
        return []
    unanswered = [call for call in calls if call not in answered]
    if not unanswered:
        return []
    seq = nodes[last]
    end = next((e.seq for e in events[seq + 1 :] if e.type == TURN_END), None)
    ended = f"the turn ended at seq {end}" if end is not None else "the log ends"
    ids = ", ".join(str(call) for call in unanswered)
    return [
        {
            "check": "pairing",
            "seq": seq,
            "rule": UNANSWERED_CALL,
            "message": f"tool call(s) {ids} never answered: {ended} without a result "
            "(no provider accepts this history)",
        }
    ]


def _is_assistant(events: Sequence[Event], seq: int) -> bool:
    return events[seq].type == ASSISTANT_MESSAGE


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
        "findings": [],
    }


def failure_entry(
    path: str, kind: str | None, session: str | None, exc: BaseException
) -> dict[str, Any]:
    """The entry of a log that could not be verified: unreadable, unsupported, invalid or error."""
    if isinstance(exc, OSError):
        return _entry(path, kind, session, "unreadable", "read", describe_os_error(exc))
    if isinstance(exc, UnsupportedFormat):
        status = "unsupported"
    elif isinstance(exc, KernelError):
        status = "invalid"
    else:
        status = "error"
    entry = _entry(path, kind, session, status, "admission", f"{type(exc).__name__}: {exc}")
    rule = getattr(exc, "rule", None) if isinstance(exc, KernelError) else None
    if type(rule) is str:
        entry["problems"][0]["rule"] = rule
    return entry


def unreadable_entry(item: Unreadable) -> dict[str, Any]:
    """The entry of a path the search could not read: status `unreadable`, check `read`."""
    return _entry(item.path, item.format, None, "unreadable", "read", item.reason)


def timeout_entry(
    path: str, kind: str | None, session: str | None, *, seconds: float, worker: str, why: str
) -> dict[str, Any]:
    """The entry of a log with no verdict in time: status and check `timeout`.

    `worker` names where the check ran (or was sent), `why` what happened there.
    """
    entry = _entry(path, kind, session, "timeout", "timeout", f"{why} (worker {worker})")
    entry["problems"][0]["worker"] = worker
    entry["problems"][0]["seconds"] = seconds
    return entry


def problem_rule(problem: Mapping[str, Any]) -> str:
    """The rule id of one problem: its invariant rule, else a stable label.

    Invariant problems and admission failures carry their rule id
    (`kernel.folds.invariants.RULES`, `KernelError.rule`). Others are labelled by the
    error class that reported them (`SeqMismatch`, `CorruptLog`), or for
    provider pairing by what is wrong (`unanswered-call`, `orphan-result`), else
    by their check.
    """
    rule = problem.get("rule")
    if isinstance(rule, str):
        return rule
    message = str(problem.get("message", ""))
    match = _CLASS_PREFIX.match(message)
    if match is not None:
        return match.group(1)
    if "not answered before" in message:
        return UNANSWERED_CALL
    if "answers no waiting call" in message:
        return "orphan-result"
    if "still needs" in message:
        return "closers-not-idempotent"
    return str(problem.get("check", "unknown"))


def _size(path: str) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def result_of(entry: Mapping[str, Any], *, size: int | None, seconds: float) -> CorpusResult:
    """The report row of one `verify --json` entry."""
    problems: Sequence[Mapping[str, Any]] = entry["problems"]
    findings: Sequence[Mapping[str, Any]] = entry.get("findings", ())
    noted = (*problems, *findings)
    rules = tuple(dict.fromkeys(problem_rule(p) for p in noted))
    seqs = [p["seq"] for p in noted if isinstance(p.get("seq"), int)]
    tail = entry["tail"]
    torn_bytes: int | None = None
    torn_records: int | None = None
    if isinstance(tail, Mapping):
        if "totalBytes" in tail:
            torn_bytes = int(tail["totalBytes"]) - int(tail["committedBytes"])
        torn_records = int(tail.get("droppedRecords") or 0)
    loaded = entry["events"] is not None
    return CorpusResult(
        path=entry["path"],
        session=entry["session"],
        format=entry["format"],
        status=entry["status"],
        events=entry["events"],
        bytes=size,
        check=problems[0]["check"] if problems else None,
        rules=rules,
        first_seq=min(seqs) if seqs else None,
        torn_bytes=torn_bytes,
        torn_records=torn_records,
        closers=len(entry["closers"]) if loaded else None,
        message=str(noted[0]["message"]) if noted else None,
        load_seconds=seconds,
        detail=entry,
    )


def check_opened(
    opened: Opened, *, size: int | None, seconds: float = 0.0, strict: bool = False
) -> CorpusResult:
    """The report row of one loaded session."""
    return result_of(verify_opened(opened, strict=strict), size=size, seconds=seconds)


def check_bytes(
    data: bytes, *, path: str, kind: str, now: int, strict: bool = False
) -> CorpusResult:
    """Verify one JSONL (`kind` "jsonl") or Zstandard JSONL ("jsonl.zstd") log from its bytes.

    Writes nothing and reads no file; `now` is the time the closers carry;
    `strict` fails findings too. `load_seconds` is the time taken.
    """
    start = time.perf_counter()
    try:
        load = load_jsonl_zstd if kind == ZSTD else load_jsonl
        with paused_collector():
            loaded = load(data, session_id=None, now=now)
        entry = verify_opened(opened_from_loaded(path, kind, loaded, data), strict=strict)
    except Exception as exc:  # a verdict on this log, never an escape
        entry = failure_entry(path, kind, None, exc)
    return result_of(entry, size=len(data), seconds=time.perf_counter() - start)


def check_task(
    task: Task,
    now: int,
    *,
    strict: bool = False,
    normalize_legacy: bool = True,
    max_decoded_bytes: int | None = None,
) -> tuple[CorpusResult, ...]:
    """Verify one unit of work; never raises for a bad or unreadable log.

    A top-level function of plain values, so a process pool or a Dask worker
    can run it. A SQLite task without a session verifies every session of the
    database (or reports the file when its sessions cannot be listed).
    `strict` fails findings too; `normalize_legacy=False` refuses older v0 shapes;
    `max_decoded_bytes` caps a Zstandard log's plaintext (None: the default cap).
    """
    if task.kind == SQLITE and task.session is None:
        try:
            sessions = session_ids(task.path, task.kind, session=None)
        except Exception as exc:
            return (
                result_of(failure_entry(task.path, task.kind, None, exc), size=None, seconds=0),
            )
        return tuple(
            r
            for sid in sessions
            for r in check_task(
                Task(task.path, task.kind, sid),
                now,
                strict=strict,
                normalize_legacy=normalize_legacy,
                max_decoded_bytes=max_decoded_bytes,
            )
        )
    start = time.perf_counter()
    try:
        opened = open_log(
            task.path,
            task.kind,
            session=task.session,
            now=now,
            normalize_legacy=normalize_legacy,
            max_decoded_bytes=max_decoded_bytes,
        )
        entry = verify_opened(opened, strict=strict)
    except Exception as exc:  # a verdict on this log; the others are still verified
        entry = failure_entry(task.path, task.kind, task.session, exc)
    seconds = time.perf_counter() - start
    return (result_of(entry, size=_size(task.path), seconds=seconds),)


def plan_tasks(files: Sequence[tuple[str, str]]) -> tuple[list[Task], list[CorpusResult]]:
    """Split `(path, kind)` files into tasks: one per JSONL file, one per SQLite session.

    Listing a database's sessions reads it (read-only); a database that cannot
    be listed gives its failure row at once, in the second list.
    """
    tasks: list[Task] = []
    failed: list[CorpusResult] = []
    for path, kind in files:
        if kind != SQLITE:
            tasks.append(Task(path, kind))
            continue
        try:
            sessions = session_ids(path, kind, session=None)
        except Exception as exc:
            failed.append(result_of(failure_entry(path, kind, None, exc), size=None, seconds=0))
            continue
        tasks.extend(Task(path, kind, sid) for sid in sessions)
    return tasks, failed
