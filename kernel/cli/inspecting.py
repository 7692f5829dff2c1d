"""`session-kernel inspect`: everything the kernel derives from one stored log.

Writes nothing. The report of each session is `analysis.inspection` plus where
it came from and its torn-tail facts; `--json` prints the reports, `--jsonl`
streams them one record a line (`json_records`), otherwise they are drawn as
tables, a summary unless a `View` asks for more. A database session that cannot
be read has an entry naming its error instead, and the others are still inspected.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Final

import attrs
from rich.console import Console, Group
from rich.progress import Progress, TaskID
from rich.text import Text

from kernel.cli import analysis, exits
from kernel.cli.output import (
    error_line,
    key_values,
    print_json,
    print_json_lines,
    printable_doc,
    seq_ranges,
    stderr_console,
    stdout_console,
    table,
    text,
)
from kernel.cli.paging import CommandPager, pager_command, use_pager
from kernel.cli.progress import delayed_progress, file_size, step_columns
from kernel.cli.sources import (
    JSONL,
    SQLITE,
    Opened,
    describe_os_error,
    kind_of,
    log_file,
    open_readable,
    quarantines_beside,
)
from kernel.errors import UnsupportedFormat
from kernel.store.results import UnreadableSession

__all__ = (
    "LAST_TURNS",
    "TAIL_EVENTS",
    "View",
    "SUMMARY",
    "FULL",
    "report",
    "json_records",
    "run_inspect",
    "render",
    "kind_of_path",
)

LAST_TURNS: Final = 5
"""Turns the summary lists: the last ones."""

TAIL_EVENTS: Final = 20
"""Events `--tail` lists: the last ones stored."""


@attrs.frozen
class View:
    """How much of an inspect report the tables show.

    `turns` and `messages` are how many of the last turns and derived messages
    are listed (None: all of them); `surface` lists the surface's seqs and every
    replacement; `tail` lists the last `TAIL_EVENTS` stored events and every
    complete record a torn tail holds.
    """

    turns: int | None = LAST_TURNS
    messages: int | None = 0
    surface: bool = False
    tail: bool = False


SUMMARY: Final = View()
"""The default tables: counts, the last turns, repair and tail."""

FULL: Final = View(turns=None, messages=None, surface=True, tail=True)
"""Every section in full (`--all`)."""


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


def _last(items: Sequence[Any], count: int | None) -> tuple[int, Sequence[Any]]:
    """The index of the first item shown and the last `count` items (None: all)."""
    start = 0 if count is None else max(len(items) - count, 0)
    return start, items[start:]


def _shown(what: str, shown: int, total: int, option: str) -> str:
    if shown >= total:
        return f"{what} ({total:,})"
    return f"{what} (last {shown:,} of {total:,}; {option} shows more)"


def _turns_table(turns: Sequence[dict[str, Any]], count: int | None) -> Any:
    _, shown = _last(turns, count)
    title = _shown("Turns", len(shown), len(turns), "--turns")
    return table(title, ("turn", "start", "end", "steps", "end reason", "state"), _turn_rows(shown))


def _messages_table(messages: Sequence[dict[str, Any]], count: int | None) -> Any:
    start, shown = _last(messages, count)
    title = _shown("Messages", len(shown), len(messages), "--messages N")
    return table(
        title,
        ("#", "seq", "role", "id", "content"),
        [
            [start + i, m["seq"], m["role"], m["id"], _content(m["content"])]
            for i, m in enumerate(shown)
        ],
    )


def _surface_parts(doc: dict[str, Any], view: View) -> list[Any]:
    surface = doc["surface"]
    pairs: list[tuple[str, Any]] = [("nodes", len(surface["nodes"]))]
    if view.surface:
        pairs.append(("seqs", seq_ranges(surface["nodes"])))
    pairs.append(("replacements", len(surface["replacements"])))
    pairs.append(("derived messages", len(doc["messages"])))
    parts: list[Any] = [key_values("Surface", pairs)]
    if view.surface and surface["replacements"]:
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
    if view.messages != 0:
        parts.append(_messages_table(doc["messages"], view.messages))
    return parts


def _tail_parts(doc: dict[str, Any]) -> list[Any]:
    """`--tail`: the last stored events, and every complete record a torn tail holds."""
    parts: list[Any] = []
    last = doc.get("lastEvents")
    if last is not None:
        total = doc["events"]["total"]
        title = f"Last events ({total})"
        if len(last) < total:
            title = f"Last events (the last {len(last):,} of {total:,})"
        parts.append(
            table(
                title, ("seq", "type", "what"), [[e["seq"], e["type"], e["detail"]] for e in last]
            )
        )
    records = doc["tail"].get("completeRecords")
    if records:
        parts.append(
            table(
                "Complete records in the torn tail",
                ("seq", "type", "bytes", "newline", "events"),
                [
                    [r["seq"], r["type"], f"{r['start']}-{r['end']}", r["terminated"], r["events"]]
                    for r in records
                ],
            )
        )
    return parts


def render(doc: dict[str, Any], view: View = FULL) -> Group:
    """The tables of one inspect report (every string from the log made `printable`).

    `view` chooses how much is shown: every section in full by default, the
    summary with `SUMMARY`.
    """
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
    parts.append(_turns_table(doc["turns"], view.turns))
    parts.extend(_surface_parts(doc, view))
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
    if view.tail:
        parts.extend(_tail_parts(doc))
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


_SECTIONS: Final = ("events", "turns", "surface", "messages", "requestHeader", "repair", "tail")
"""The JSON Lines records of one session, in order, after its `session` record."""


def json_records(doc: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """One inspect report as JSON Lines records: one object per turn, replacement, message.

    Every record has `record` (its kind) and `session`. In order: `session`
    (source, header, normalized), `events` (total, byType), one `turn` per turn,
    `surface` (nodes), one `replacement` per replacement, one `message` per
    derived message (with its `index`), `requestHeader`, `repair` (with
    `lastTurnOpen`), `tail`. A database session that cannot be read is one
    `error` record (source, error). The members are the `--json` report's.
    """
    session = doc["source"]["session"]
    if "error" in doc:
        yield {
            "record": "error",
            "session": session,
            "source": doc["source"],
            "error": doc["error"],
        }
        return
    yield {
        "record": "session",
        "session": session,
        "source": doc["source"],
        "header": doc["header"],
        "normalized": doc["normalized"],
    }
    yield {"record": "events", "session": session, **doc["events"]}
    for turn in doc["turns"]:
        yield {"record": "turn", "session": session, **turn}
    surface = doc["surface"]
    yield {"record": "surface", "session": session, "nodes": surface["nodes"]}
    for replacement in surface["replacements"]:
        yield {"record": "replacement", "session": session, **replacement}
    for index, message in enumerate(doc["messages"]):
        yield {"record": "message", "session": session, "index": index, **message}
    yield {"record": "requestHeader", "session": session, "requestHeader": doc["requestHeader"]}
    yield {
        "record": "repair",
        "session": session,
        "lastTurnOpen": doc["lastTurnOpen"],
        **doc["repair"],
    }
    yield {"record": "tail", "session": session, **doc["tail"]}


def _note(progress: Progress | None, task: TaskID | None, description: str) -> None:
    if progress is not None and task is not None:
        progress.update(task, description=description)


def _drawn(console: Console, part: Any, *, first: bool) -> str:
    """One session's tables as the console draws them (a rule before all but the first)."""
    with console.capture() as captured:
        if not first:
            console.rule()
        console.print(part)
    return captured.get()


def _show(drawn: Sequence[str], *, no_pager: bool) -> None:
    """Write the tables; through the pager when stdout is a terminal (`kernel.cli.paging`)."""
    command = pager_command(os.environ)
    if command is not None and use_pager(sys.stdout, no_pager=no_pager, environ=os.environ):
        CommandPager(command, os.environ).show("".join(drawn))
        return
    for chunk in drawn:
        sys.stdout.write(chunk)
    sys.stdout.flush()


def run_inspect(
    path: str,
    *,
    session: str | None,
    as_json: bool,
    now: int,
    normalize_legacy: bool = True,
    max_decoded_bytes: int | None = None,
    view: View = SUMMARY,
    as_jsonl: bool = False,
    no_pager: bool = False,
) -> int:
    """Inspect one log file (every session of a SQLite database unless `session` is given).

    `path` may be a `JsonlStore` root when `session` names a session in it. A
    session of a database that cannot be read is reported in its place and on
    stderr, the others are inspected, and the exit status is the one that
    session alone would give. `max_decoded_bytes` caps a Zstandard log's
    plaintext. The tables show `view`; `as_jsonl` streams JSON Lines
    (`json_records`) instead, and `no_pager` never pages the tables.
    """
    named = path
    path, kind = log_file(path, session=session, command="inspect")
    found = open_readable(
        path,
        kind,
        session=session,
        now=now,
        normalize_legacy=normalize_legacy,
        max_decoded_bytes=max_decoded_bytes,
    )
    reports: list[dict[str, Any]] = []
    console = stdout_console()
    drawn: list[str] = []
    failures: list[UnreadableSession] = []
    # A JSON Lines stream to a terminal shows its own progress; a bar would break its lines.
    quiet = as_jsonl and sys.stdout.isatty()
    shown = nullcontext(None) if quiet else delayed_progress(stderr_console(), step_columns())
    with shown as progress:
        task = None if progress is None else progress.add_task(f"loading {named}{file_size(path)}")
        for item in found:
            if isinstance(item, UnreadableSession):
                failures.append(item)
                doc = _unreadable_report(path, item)
            else:
                _note(progress, task, f"deriving the report of session {item.session}")
                doc = report(item)
                if view.tail and not (as_json or as_jsonl):
                    doc["lastEvents"] = analysis.last_events(item.stored, TAIL_EVENTS)
            if as_jsonl:
                print_json_lines(json_records(doc))
            elif not as_json:
                _note(progress, task, f"drawing session {doc['source']['session']}")
                part = _render_unreadable(doc) if "error" in doc else render(doc, view)
                drawn.append(_drawn(console, part, first=not drawn))
            else:
                reports.append(doc)
            _note(progress, task, f"loading {named}: the next session")
    if as_json:
        print_json(reports[0] if len(reports) == 1 and kind != SQLITE else reports)
    elif not as_jsonl:
        if not drawn:
            drawn.append(
                _drawn(console, Text("no sessions in this database", "yellow"), first=True)
            )
        _show(drawn, no_pager=no_pager)
    for item in failures:
        cause = _cause(item.error)
        error_line(f"{path}: session {item.location}: {cause['errorClass']}: {cause['message']}")
    return _exit_status(failures)


def kind_of_path(path: str, command: str = "inspect") -> str:
    """The kind of an explicitly named file: by name or magic bytes, else plain JSONL.

    A directory is refused (`IsADirectoryError`), in the words of `command`.
    """
    target = Path(path)
    if target.is_dir():
        raise IsADirectoryError(21, f"is a directory ({command} takes one log file)", path)
    return kind_of(target) or JSONL
