"""The record scan (docs/format/persistence.md §3.2): where the durable prefix of records ends.

Records are read in order while each is a JSON object with the next seq (a chunk
row counts for its members). The first record that is not ends the prefix: the
rest is a torn tail, unless a real `turn/end` follows, which makes the damage
corruption. The exact scan builds wire dicts; `kernel.storage.typed.lines` builds events
with the same decisions, sharing the helpers below for the words and the tail.
"""

from __future__ import annotations

from typing import Any

from kernel.errors import CorruptLog, MalformedChunkRow
from kernel.values.events import TURN_END
from kernel.values.json import summary
from kernel.wire.chunks import ROW_TAGS, expand_row_wire
from kernel.wire.codec import expand_ranges, has_ranges
from kernel.wire.jsontext import parse_json

__all__ = ("scan_records", "read_record", "row_gap", "seq_gap", "close_scan")


def scan_records(
    buf: bytes,
    start: int,
    records: list[dict[str, Any]],
    *,
    first_line: int,
    label: str = "line",
    ranged: bool = True,
) -> tuple[int, int, str | None]:
    """Scan the records of `buf` from offset `start`, extending `records` with the prefix.

    Seqs continue from `len(records)`. Returns `(committed, dropped, reason)`:
    the offset just past the last record kept, how many lines (a final line
    without its newline included) were not kept, and why the tail was cut
    (None when nothing was). Raises `CorruptLog` when damage precedes a record
    holding a real `turn/end`. `first_line` numbers the first line for messages.
    With `ranged` (JSONL records, not SQLite rows) a ranged `sourceEventSeqs` is
    expanded (docs/format/persistence.md §2.5), and a malformed one is damage.
    """
    find = buf.find
    expected = len(records)
    committed = start
    issue: str | None = None
    pos = start
    line_no = first_line - 1
    kept_lines = 0
    while True:
        nl = find(b"\n", pos)
        if nl == -1:
            break
        line = buf[pos:nl]
        end = nl + 1
        pos = end
        line_no += 1
        wires, issue = read_record(line, expected, label, line_no, ranged=ranged)
        if issue is not None:
            break
        records.extend(wires)
        expected += len(wires)
        committed = end
        kept_lines += 1
    return close_scan(buf, pos, line_no, committed, kept_lines, issue, first_line, label)


def read_record(
    line: bytes,
    expected: int,
    label: str,
    line_no: int,
    *,
    ranged: bool = True,
    deep: bool = False,
) -> tuple[list[dict[str, Any]], str | None]:
    """The wire events of one stored record that continues the prefix at seq `expected`,
    or why it ends the prefix: `([], reason)` for an unparsable or non-object record, a
    malformed chunk row or a seq gap (`seq_gap` raises `CorruptLog` for a `turn/end`).
    `deep` is `parse_json`'s: the line likely nests past orjson's limit."""
    try:
        value = parse_json(line, deep=deep)
    except ValueError as exc:
        return [], f"unparsable record at {label} {line_no}: {exc}"
    if type(value) is not dict:
        return [], f"record at {label} {line_no} is not a JSON object"
    tag = value.get("type")
    if tag.__class__ is str and tag in ROW_TAGS:
        try:
            members, _ = expand_row_wire(value, f"{label} {line_no}")
        except MalformedChunkRow as exc:
            return [], str(exc)
        if members[0]["seq"] != expected:
            return [], row_gap(label, line_no, members[0]["seq"], expected)
        return members, None
    seq = value.get("seq")
    cited = value.get("sourceEventSeqs")
    if ranged and type(cited) is list and has_ranges(cited):
        expanded = expand_ranges(cited, seq)
        if type(expanded) is str:
            return [], f"record at {label} {line_no} (seq {summary(seq)}): {expanded}"
        value["sourceEventSeqs"] = expanded
    if (seq.__class__ is int or seq.__class__ is float) and seq == expected:
        return [value], None
    return [], seq_gap(label, line_no, seq, expected, tag)


def row_gap(label: str, line_no: int, seq0: int, expected: int) -> str:
    """Why a chunk row whose first member is not the next seq ends the durable prefix."""
    return f"seq gap at {label} {line_no}: chunk row starts at seq {seq0}, expected {expected}"


def seq_gap(label: str, line_no: int, seq: Any, expected: int, event_type: Any) -> str:
    """Why a record out of sequence ends the durable prefix; CorruptLog for a `turn/end`."""
    issue = f"seq gap at {label} {line_no}: found seq {summary(seq)}, expected {expected}"
    if event_type == TURN_END:
        raise CorruptLog(f"{issue}, in a turn/end record (inside committed history)")
    return issue


def close_scan(
    buf: bytes,
    pos: int,
    line_no: int,
    committed: int,
    kept_lines: int,
    issue: str | None,
    first_line: int,
    label: str,
) -> tuple[int, int, str | None]:
    """Finish a record scan whose durable prefix ends before `pos` (see `scan_records`).

    After damage (`issue`), every later line is read only to refuse a real
    `turn/end` there: the damage would then be inside committed history.
    """
    find = buf.find
    while issue is not None:
        nl = find(b"\n", pos)
        if nl == -1:
            break
        line = buf[pos:nl]
        pos = nl + 1
        line_no += 1
        try:
            value = parse_json(line)
        except ValueError:
            continue
        if type(value) is dict and value.get("type") == TURN_END:
            raise CorruptLog(
                f"{issue}; a turn/end follows at {label} {line_no}, so the damage is "
                "inside committed history"
            )
    total_lines = line_no - first_line + 1 + (pos < len(buf))
    if issue is None and pos < len(buf):
        issue = f"{label} {line_no + 1} has no final newline (an incomplete write)"
    return committed, total_lines - kept_lines, issue
