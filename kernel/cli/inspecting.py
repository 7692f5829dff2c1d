"""`session-kernel inspect`: everything the kernel derives from one stored log.

Writes nothing. The report of each session is `analysis.inspection` plus where
it came from and its torn-tail facts; `--json` prints the reports, otherwise
they are drawn as tables. A database session that cannot be read has an entry
naming its error instead, and the other sessions are still inspected.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.text import Text

from kernel.cli import analysis, exits
from kernel.cli.output import (
    error_line,
    key_values,
    print_json,
    printable_doc,
    seq_ranges,
    stdout_console,
    table,
    text,
)
from kernel.cli.sources import (
    JSONL,
    SQLITE,
    Opened,
    describe_os_error,
    kind_of,
    open_readable,
    quarantines_beside,
)
from kernel.errors import UnsupportedFormat
from kernel.store.results import UnreadableSession

__all__ = ("report", "run_inspect", "render")


def report(opened: Opened) -> dict[str, Any]:
    """The inspect report of one session: source, header, folds, repair plan, torn tail."""
    body = analysis.inspection(opened.header_json(), opened.stored, opened.closers)
    repair = body["repair"]
    repair["needed"] = opened.torn or bool(opened.closers)
    tail = opened.tail
    if opened.torn and tail.get("committedBytes") is not None:
        repair["truncateTo"] = tail["committedBytes"]
        repair["truncateBytes"] = tail["totalBytes"] - tail["committedBytes"]
    elif opened.torn:
        repair["deleteFromSeq"] = tail.get("tornFromSeq")
    tail = opened.tail
    if opened.kind != SQLITE:
        tail = {**tail, "quarantines": quarantines_beside(opened.path)}
    return {
        "source": {"path": opened.path, "format": opened.kind, "session": opened.session},
        **body,
        "tail": tail,
        "normalized": dict(opened.normalized),
    }


def _content(items: Sequence[dict[str, Any]]) -> Text:
    out = Text()
    for index, item in enumerate(items):
        if index:
            out.append(" | ", style="dim")
        kind = item.get("type")
        if kind in ("text", "reasoning"):
            if kind == "reasoning":
                out.append("reasoning: ", style="dim")
            out.append(str(item.get("preview", "")))
        elif kind == "tool-call":
            out.append("call ", style="cyan")
            out.append(f"{item.get('name')} ({item.get('id')})")
        elif kind == "tool-result":
            out.append("result ", style="cyan")
            out.append(str(item.get("toolCallId")))
            if item.get("isError"):
                out.append(" error", style="red")
        else:
            out.append(f"[{kind}]", style="dim")
    return out


def _turn_rows(turns: Sequence[dict[str, Any]]) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for turn in turns:
        state = text("open", "bold red") if turn["open"] else text("closed", "green")
        rows.append(
            [turn["turn"], turn["startSeq"], turn["endSeq"], turn["steps"], turn["reason"], state]
        )
    return rows


def _tail_pairs(tail: dict[str, Any]) -> list[tuple[str, Any]]:
    kept = (
        [("quarantined by a repair", ", ".join(tail["quarantines"]))]
        if tail.get("quarantines")
        else []
    )
    if not tail.get("torn"):
        return [("torn tail", text("no", "green")), *kept]
    pairs: list[tuple[str, Any]] = [("torn tail", text("yes", "yellow"))]
    labels = (
        ("committedBytes", "committed region ends at byte"),
        ("totalBytes", "total bytes"),
        ("tornFrameStart", "torn frame starts at byte"),
        ("recoveredEvents", "events recovered from torn frame"),
        ("tornFromSeq", "torn rows from seq"),
        ("droppedRecords", "records dropped"),
        ("reason", "why"),
        ("completeRecordsSummary", "what it holds"),
    )
    pairs.extend((label, tail[key]) for key, label in labels if tail.get(key) is not None)
    return [*pairs, *kept]


def _truncation(repair: dict[str, Any]) -> list[tuple[str, Any]]:
    if "truncateTo" in repair:
        cut = f"{repair['truncateBytes']} byte(s), back to byte {repair['truncateTo']}"
        return [("torn tail to truncate", cut)]
    if "deleteFromSeq" in repair:
        return [("torn rows to delete", f"from seq {repair['deleteFromSeq']} on")]
    return []


def render(doc: dict[str, Any]) -> Group:
    """The tables of one inspect report (every string from the log made `printable`)."""
    doc = printable_doc(doc)
    source = doc["source"]
    title = Text.assemble(
        ("session ", "bold"),
        (str(source["session"]), "bold cyan"),
        (f"  {source['path']} ({source['format']})", "dim"),
    )
    parts: list[Any] = [title]
    parts.append(key_values("Header", list((doc["header"] or {}).items())))
    events = doc["events"]
    parts.append(
        table(
            f"Events ({events['total']})",
            ("type", "count"),
            list(events["byType"].items()),
        )
    )
    parts.append(
        table(
            "Turns",
            ("turn", "start", "end", "steps", "end reason", "state"),
            _turn_rows(doc["turns"]),
        )
    )
    surface = doc["surface"]
    parts.append(
        key_values(
            "Surface",
            [("nodes", len(surface["nodes"])), ("seqs", seq_ranges(surface["nodes"]))],
        )
    )
    if surface["replacements"]:
        parts.append(
            table(
                "Replacements",
                ("seq", "start", "end", "shadowed"),
                [
                    [r["seq"], r["start"], r["end"], seq_ranges(r["shadowed"])]
                    for r in surface["replacements"]
                ],
            )
        )
    parts.append(
        table(
            f"Messages ({len(doc['messages'])})",
            ("#", "seq", "role", "id", "content"),
            [
                [i, m["seq"], m["role"], m["id"], _content(m["content"])]
                for i, m in enumerate(doc["messages"])
            ],
        )
    )
    header = doc["requestHeader"]
    parts.append(
        key_values(
            "Request header in force",
            [("none", "no request/header in the log")]
            if header is None
            else [
                ("provider / model", f"{header['provider']} / {header['model']}"),
                ("tools", header["tools"]),
                ("system prompt", f"{header['systemPromptLength']} chars"),
            ],
        )
    )
    repair = doc["repair"]
    open_turn = (
        text("yes: the last turn is open", "bold red") if doc["lastTurnOpen"] else text("no")
    )
    parts.append(
        key_values(
            "Repair",
            [
                ("last turn open", open_turn),
                ("repair needed", repair["needed"]),
                *_truncation(repair),
                ("closers to append", len(repair["closers"])),
            ],
        )
    )
    if repair["closers"]:
        parts.append(
            table(
                "Closers a repair would append",
                ("seq", "type", "call id", "error code"),
                [
                    [c["seq"], c["type"], c.get("callId"), c.get("errorCode")]
                    for c in repair["closers"]
                ],
            )
        )
    parts.append(key_values("Tail", _tail_pairs(doc["tail"])))
    if doc["normalized"]:
        parts.append(normalized_line(doc["normalized"]))
    return Group(*parts)


def normalized_line(counts: dict[str, int]) -> Text:
    """One line: how many older v0 events were read normalized, by shape (Appendix A)."""
    shapes = ", ".join(f"{name} {count}" for name, count in sorted(counts.items()))
    return Text(
        f"normalized {sum(counts.values())} older v0 event(s) in memory ({shapes}); "
        "the stored bytes are unchanged (--strict-shapes refuses them)",
        style="yellow",
    )


def _cause(error: Exception) -> dict[str, str]:
    """The error class and message of a session that could not be read."""
    message = describe_os_error(error) if isinstance(error, OSError) else str(error)
    return {"errorClass": type(error).__name__, "message": message}


def _unreadable_report(path: str, item: UnreadableSession) -> dict[str, Any]:
    """The inspect entry of a session of a database that could not be read."""
    return {
        "source": {"path": path, "format": SQLITE, "session": item.location},
        "error": _cause(item.error),
    }


def _render_unreadable(doc: dict[str, Any]) -> Group:
    doc = printable_doc(doc)
    source, error = doc["source"], doc["error"]
    title = Text.assemble(
        ("session ", "bold"),
        (str(source["session"]), "bold cyan"),
        (f"  {source['path']} ({source['format']})", "dim"),
    )
    cause = Text(f"cannot be read: {error['errorClass']}: {error['message']}", style="bold red")
    return Group(title, cause)


def _exit_status(failures: Sequence[UnreadableSession]) -> int:
    """As for one log: 1 when a session is invalid, else 3 when one is unsupported."""
    if not failures:
        return exits.OK
    if all(isinstance(item.error, UnsupportedFormat) for item in failures):
        return exits.UNSUPPORTED
    return exits.INVALID


def run_inspect(
    path: str,
    *,
    session: str | None,
    as_json: bool,
    now: int,
    normalize_legacy: bool = True,
    max_decoded_bytes: int | None = None,
) -> int:
    """Inspect one log file (every session of a SQLite database unless `session` is given).

    A session of a database that cannot be read is reported in its place and
    on stderr, the others are inspected, and the exit status is the one that
    session alone would give. `max_decoded_bytes` caps a Zstandard log's plaintext.
    """
    kind = kind_of_path(path)
    found = open_readable(
        path,
        kind,
        session=session,
        now=now,
        normalize_legacy=normalize_legacy,
        max_decoded_bytes=max_decoded_bytes,
    )
    reports: list[dict[str, Any]] = []
    failures: list[UnreadableSession] = []
    for item in found:
        if isinstance(item, UnreadableSession):
            failures.append(item)
            reports.append(_unreadable_report(path, item))
        else:
            reports.append(report(item))
    if as_json:
        print_json(reports[0] if len(reports) == 1 and kind != SQLITE else reports)
    else:
        console: Console = stdout_console()
        for index, doc in enumerate(reports):
            if index:
                console.rule()
            console.print(_render_unreadable(doc) if "error" in doc else render(doc))
        if not reports:
            console.print(Text("no sessions in this database", style="yellow"))
    for item in failures:
        cause = _cause(item.error)
        error_line(f"{path}: session {item.location}: {cause['errorClass']}: {cause['message']}")
    return _exit_status(failures)


def kind_of_path(path: str) -> str:
    """The kind of an explicitly named file: by name or magic bytes, else plain JSONL."""
    target = Path(path)
    if target.is_dir():
        raise IsADirectoryError(21, "is a directory (inspect takes one log file)", path)
    return kind_of(target) or JSONL
