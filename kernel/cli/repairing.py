"""`session-kernel repair`: commit crash repair through the store, once.

The store plans the repair from the stored bytes with the pure load pipeline
(truncate the torn tail, append the interrupted turn's closers) and commits it
durably; `--dry-run` asks for the plan only. A repaired log plans nothing, so a
second run reports that there is nothing to do, unless the log keeps what no
repair changes (a closed turn with an unanswered call, `verify`'s finding).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from rich.console import Group
from rich.text import Text

from kernel.cli import analysis, exits
from kernel.cli.output import (
    key_values,
    print_json,
    printable_doc,
    stderr_console,
    stdout_console,
    table,
    text,
)
from kernel.cli.progress import delayed_progress, file_size, step_columns
from kernel.cli.sources import SQLITE, log_file, open_log, tail_records_json
from kernel.cli.sqlite import repair_sqlite
from kernel.corpus.check import unanswered_call_findings
from kernel.storage.quarantine import (
    decode_row_quarantine,
    describe_tail_records,
    parse_quarantine_name,
)
from kernel.store.jsonl import repair_file, undo_repair
from kernel.store.results import RepairReport
from kernel.store.sqlite import SqliteStore
from kernel.values.events import Event

__all__ = ("repair_document", "run_repair", "run_undo", "render")


def repair_document(
    report: RepairReport, *, dry_run: bool, findings: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    """The JSON description of one repair (planned or committed).

    `findings` are `verify`'s findings on the log as the repair leaves it (an
    `unanswered-call`): what the log still holds that no repair of the kernel
    changes.
    """
    return {
        "location": report.location,
        "dryRun": dry_run,
        "needed": report.needed,
        "committed": report.committed,
        "torn": report.torn,
        "tornFromSeq": report.torn_from_seq,
        "truncateTo": report.truncate_to,
        "removedBytes": report.removed_bytes,
        "droppedRecords": report.dropped_records,
        "tornReason": report.torn_reason,
        "recoveredEvents": len(report.recovered),
        "closers": analysis.closers(report.closers),
        "completeRecords": tail_records_json(report.tail_records),
        "completeRecordsSummary": (
            describe_tail_records(report.tail_records) if report.tail_records else None
        ),
        "quarantine": report.quarantine,
        "findings": list(findings),
    }


_LEFT_AS_IS: Final = (
    "a closed turn cannot be re-closed, so repair leaves it; verify --strict fails on it"
)
"""What a repair says of an `unanswered-call` finding: why it stays, and what fails on it."""


def render(doc: dict[str, Any]) -> Group:
    """What a repair did (or, with --dry-run, would do), in words and a closer table."""
    doc = printable_doc(doc)
    verb_cut, verb_add = (
        ("would truncate", "would append") if doc["dryRun"] else ("truncated", "appended")
    )
    title = Text.assemble(("repair ", "bold"), (doc["location"], "bold cyan"))
    if doc["dryRun"]:
        title.append("  (dry run: nothing written)", style="yellow")
    if not doc["needed"] and doc["findings"]:
        lines = [
            title,
            Text("no repair the kernel can make: no torn tail, and the last turn is closed"),
        ]
        for finding in doc["findings"]:
            where = f"seq {finding['seq']}: {finding['message']}"
            lines.append(text(f"but the log has an unanswered call at {where}", "yellow"))
        lines.append(text(_LEFT_AS_IS, "yellow"))
        return Group(*lines)
    if not doc["needed"]:
        return Group(title, Text("nothing to repair: the log is balanced and has no torn tail"))
    pairs: list[tuple[str, Any]] = []
    if doc["torn"]:
        if doc["truncateTo"] is not None:
            pairs.append(
                (
                    "torn tail",
                    f"{verb_cut} {doc['removedBytes']} byte(s): file cut back to byte "
                    f"{doc['truncateTo']}",
                )
            )
        else:
            verb_delete = "would delete" if doc["dryRun"] else "deleted"
            pairs.append(("torn tail", f"{verb_delete} rows from seq {doc['tornFromSeq']} on"))
        pairs.append(("records dropped", doc["droppedRecords"]))
        pairs.append(("why", doc["tornReason"]))
        if doc["completeRecordsSummary"]:
            pairs.append(("what it held", doc["completeRecordsSummary"]))
        if doc["quarantine"]:
            pairs.append(("kept in", f"{doc['quarantine']} (undo: repair --undo FILE)"))
        if doc["recoveredEvents"]:
            pairs.append(
                ("recovered", f"{doc['recoveredEvents']} event(s) from the torn frame rewritten")
            )
    else:
        pairs.append(("torn tail", "none"))
    pairs.append(("closers", f"{verb_add} {len(doc['closers'])}"))
    for finding in doc["findings"]:
        where = f"seq {finding['seq']}: {finding['message']}"
        pairs.append(("unanswered call", f"{where}; {_LEFT_AS_IS}"))
    parts: list[Any] = [title, key_values("Repair", pairs)]
    if doc["closers"]:
        parts.append(
            table(
                "Closers",
                ("seq", "type", "call id", "error code"),
                [
                    [c["seq"], c["type"], c.get("callId"), c.get("errorCode")]
                    for c in doc["closers"]
                ],
            )
        )
    if not doc["dryRun"] and doc["committed"]:
        parts.append(text("committed durably", "green"))
    return Group(*parts)


def _reports(
    path: str,
    kind: str,
    session: str | None,
    dry_run: bool,
    now: int,
    strict_tail: bool,
    normalize_legacy: bool,
    cap: int | None,
) -> list[tuple[RepairReport, tuple[Event, ...]]]:
    """Each session's repair report, and its events as the repair leaves them."""
    if kind == SQLITE:
        stored = repair_sqlite(
            path, session=session, dry_run=dry_run, now=now, normalize_legacy=normalize_legacy
        )
        return [(one.repair, one.events) for one in stored]
    read = functools.partial(
        open_log, path, kind, now=now, normalize_legacy=normalize_legacy, max_decoded_bytes=cap
    )
    if session is not None:
        read(session=session)  # CorruptLog when the file holds another id
    report = repair_file(
        path,
        now=now,
        dry_run=dry_run,
        strict_tail=strict_tail,
        normalize_legacy=normalize_legacy,
        max_decoded_bytes=cap,
    )
    # Read again: the repaired log, or (dry run) the stored one with the closers it would get.
    left = read(session=None)
    return [(report, (*left.stored, *left.closers))]


def run_repair(
    path: str,
    *,
    session: str | None,
    dry_run: bool,
    as_json: bool,
    now: int,
    strict_tail: bool = False,
    normalize_legacy: bool = True,
    max_decoded_bytes: int | None = None,
) -> int:
    """Repair one log file (every session of a SQLite database unless `session` is given).

    `path` may be a `JsonlStore` root when `session` names a session in it.
    `max_decoded_bytes` caps a Zstandard log's plaintext (None: the default cap).
    """
    path, kind = log_file(path, session=session, command="repair")
    # A log of a million events takes seconds to read and plan: say so on a terminal.
    with delayed_progress(stderr_console(), step_columns()) as progress:
        if progress is not None:
            doing = "planning the repair of" if dry_run else "repairing"
            progress.add_task(f"{doing} {path}{file_size(path)}")
        reports = _reports(
            path, kind, session, dry_run, now, strict_tail, normalize_legacy, max_decoded_bytes
        )
        docs = [
            repair_document(r, dry_run=dry_run, findings=unanswered_call_findings(events))
            for r, events in reports
        ]
    if as_json:
        print_json(docs[0] if len(docs) == 1 and kind != SQLITE else docs)
        return exits.OK
    console = stdout_console()
    for doc in docs:
        console.print(render(doc))
    return exits.OK


def _undo(quarantine: str, max_decoded_bytes: int | None) -> str:
    """Undo through the layout the quarantine belongs to; the log (or database) restored."""
    source = Path(quarantine)
    parsed = parse_quarantine_name(source.name)
    if parsed is not None and decode_row_quarantine(source.read_bytes()) is not None:
        database = source.with_name(parsed[0])
        with SqliteStore(database) as store:
            session = store.undo_repair(source)
        return f"{database} (session {session})"
    return str(undo_repair(quarantine, max_decoded_bytes=max_decoded_bytes))


def run_undo(quarantine: str, *, as_json: bool, max_decoded_bytes: int | None = None) -> int:
    """Put back the bytes a repair kept in `quarantine`: the log is as it was before it."""
    log = _undo(quarantine, max_decoded_bytes)
    if as_json:
        print_json({"restored": str(log), "quarantine": quarantine})
        return exits.OK
    stdout_console().print(
        Group(
            Text.assemble(("undo ", "bold"), (str(log), "bold cyan")),
            text(f"restored the bytes its repair removed, from {quarantine}", "green"),
        )
    )
    return exits.OK
