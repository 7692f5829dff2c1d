"""What a repair removes, kept (docs/format/persistence.md §6.5): names and diagnosis.

Pure. A repair that truncates a torn tail first keeps the removed bytes in a
quarantine file beside the log, named after the offset they were cut at and a
hash of their contents (`quarantine_name`), so the original bytes are always the
log's first `offset` bytes followed by the quarantine. `records_in_tail` says
what complete, decodable records the removed bytes still hold (a final record
that lacks only its newline; intact records after damage; a whole record glued
onto an interrupted write), so a user can decide what to do with them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any, Final

import attrs

from kernel.errors import KernelError
from kernel.values.events import ROW_TAGS
from kernel.wire.chunks import expand_row_wire
from kernel.wire.codec import check_envelope
from kernel.wire.jsontext import parse_json

__all__ = (
    "TailRecord",
    "quarantine_name",
    "parse_quarantine_name",
    "quarantine_matches",
    "records_in_tail",
    "describe_tail_records",
    "restored_bytes",
    "RowQuarantine",
    "encode_row_quarantine",
    "decode_row_quarantine",
)

_DIGEST_HEX: Final = 16
_NAME: Final = re.compile(r"^(?P<log>.+)\.torn-(?P<offset>\d+)-(?P<digest>[0-9a-f]{16})$")
_RECORD_START: Final = b'{"type":'


def _digest(removed: bytes) -> str:
    return hashlib.sha256(removed).hexdigest()[:_DIGEST_HEX]


def quarantine_name(log_name: str, offset: int, removed: bytes) -> str:
    """The quarantine file name for `removed`, the bytes of `log_name` from `offset` on.

    >>> quarantine_name("session.jsonl", 120, b'{"ty')
    'session.jsonl.torn-120-9800e0460b652e6d'
    """
    return f"{log_name}.torn-{offset}-{_digest(removed)}"


def parse_quarantine_name(name: str) -> tuple[str, int, str] | None:
    """`(log name, offset, digest)` of a quarantine file name, or None if it is not one.

    >>> parse_quarantine_name("session.jsonl.torn-120-6f10ac84d9e1f48a")
    ('session.jsonl', 120, '6f10ac84d9e1f48a')
    """
    match = _NAME.match(name)
    if match is None:
        return None
    return match["log"], int(match["offset"]), match["digest"]


def quarantine_matches(name: str, removed: bytes) -> bool:
    """Whether `removed` is the content the quarantine file `name` was written with."""
    parsed = parse_quarantine_name(name)
    return parsed is not None and parsed[2] == _digest(removed)


@attrs.frozen
class TailRecord:
    """A complete, decodable record inside the bytes a repair removes.

    `start` and `end` are byte offsets in the log (end exclusive, the newline
    included when there is one); `terminated` says whether the record ends in
    its newline. A packed chunk row is one record whose `seq` is its first
    member's and whose `count` is its number of members.
    """

    seq: int
    type: str
    start: int
    end: int
    terminated: bool
    count: int = 1


def _decoded(text: bytes) -> tuple[int, str, int] | None:
    """`(seq, type, events)` of one stored record that decodes, else None."""
    try:
        value = parse_json(text)
    except ValueError:
        return None
    if type(value) is not dict:
        return None
    tag = value.get("type")
    try:
        if type(tag) is str and tag in ROW_TAGS:
            members, _ = expand_row_wire(value, "torn tail")
            return members[0]["seq"], tag, len(members)
        event_type, seq, _, _ = check_envelope(value, "torn tail")
    except KernelError:
        return None
    return seq, event_type, 1


def records_in_tail(data: bytes, committed: int) -> tuple[TailRecord, ...]:
    """The complete, decodable records in `data[committed:]`, the bytes a repair removes.

    Each line (and a last one without its newline) is read whole; a line that does
    not decode is searched for a record glued onto it (an interrupted write
    followed by a whole append on the same line), taken from the last `{"type":`
    from which the rest of the line decodes.

    >>> tail = b'{"type":"turn/end","seq":4,"time":9,"data":{"turn":1}}'
    >>> records_in_tail(b"header\\n" + tail, 7)[0].type
    'turn/end'
    """
    found: list[TailRecord] = []
    pos = committed
    size = len(data)
    while pos < size:
        newline = data.find(b"\n", pos)
        end = size if newline == -1 else newline + 1
        line = data[pos : end - 1] if newline != -1 else data[pos:end]
        record = _record_in_line(line, pos, end, terminated=newline != -1)
        if record is not None:
            found.append(record)
        pos = end
    return tuple(found)


def _record_in_line(line: bytes, start: int, end: int, *, terminated: bool) -> TailRecord | None:
    decoded = _decoded(line) if line.strip() else None
    offset = 0
    if decoded is None:
        at = line.rfind(_RECORD_START)
        while at > 0:  # the whole line (at 0) did not decode already
            decoded = _decoded(line[at:])
            if decoded is not None:
                offset = at
                break
            at = line.rfind(_RECORD_START, 0, at)
    if decoded is None:
        return None
    seq, event_type, count = decoded
    return TailRecord(seq, event_type, start + offset, end, terminated, count)


def describe_tail_records(records: tuple[TailRecord, ...], *, limit: int = 3) -> str:
    """One line naming the complete records a torn tail holds, for reports and the CLI.

    >>> describe_tail_records((TailRecord(29, "turn/end", 100, 160, False),))
    'the torn tail holds 1 complete record: turn/end, seq 29, bytes 100-160 (lacks its newline)'
    """
    if not records:
        return "the torn tail holds no complete record"
    parts = []
    for record in records[:limit]:
        seqs = f"seq {record.seq}"
        if record.count > 1:
            seqs = f"seqs {record.seq}-{record.seq + record.count - 1}"
        note = "" if record.terminated else " (lacks its newline)"
        parts.append(f"{record.type}, {seqs}, bytes {record.start}-{record.end}{note}")
    more = f"; and {len(records) - limit} more" if len(records) > limit else ""
    noun = "record" if len(records) == 1 else "records"
    events = sum(r.count for r in records)
    counted = f"{len(records)} complete {noun}"
    if events != len(records):
        counted += f" ({events} events)"
    first = min(r.seq for r in records)
    last = max(r.seq + r.count - 1 for r in records)
    span = f" spanning seqs {first}-{last}" if len(records) > 1 else ""
    return f"the torn tail holds {counted}{span}: " + "; ".join(parts) + more


def restored_bytes(kept: bytes, offset: int, removed: bytes) -> bytes:
    """The original log: its first `offset` bytes as kept, then the quarantined bytes."""
    if len(kept) < offset:
        raise KernelError(
            f"the log is {len(kept)} bytes, shorter than the quarantine offset {offset}: "
            "it was truncated after the repair"
        )
    return kept[:offset] + removed


# -- SQLite: removed rows, as a file beside the database -----------------------------------------

_ROW_KIND: Final = "sqlite-rows"
_BYTES_CLASSES: Final = frozenset({"text", "blob"})
_CLASSES: Final = frozenset({"integer", "real", "null"}) | _BYTES_CLASSES


@attrs.frozen
class RowQuarantine:
    """The rows a SQLite repair removed from one session, exactly as stored.

    `rows` hold each column as `(storage class, value)`, the class as SQLite's
    `typeof` names it; text and blob values are their bytes. `revision` is the
    session's revision the repair found (the repair makes it `revision + 1`).
    """

    session_id: str
    revision: int
    torn_from: int
    rows: tuple[tuple[tuple[str, Any], ...], ...]


def encode_row_quarantine(quarantine: RowQuarantine) -> bytes:
    """JSON lines: a header object, then one array of `[class, value]` pairs per row.

    Text and blob bytes are written in base64, so the file is ASCII and exact.

    >>> q = RowQuarantine("s", 3, 7, ((("integer", 7), ("text", b"x")),))
    >>> decode_row_quarantine(encode_row_quarantine(q)) == q
    True
    """
    head = {
        "quarantine": _ROW_KIND,
        "session": quarantine.session_id,
        "revision": quarantine.revision,
        "tornFromSeq": quarantine.torn_from,
    }
    lines = [json.dumps(head, separators=(",", ":"))]
    for row in quarantine.rows:
        cells = [
            [kind, base64.b64encode(value).decode("ascii") if kind in _BYTES_CLASSES else value]
            for kind, value in row
        ]
        lines.append(json.dumps(cells, separators=(",", ":")))
    return ("\n".join(lines) + "\n").encode("ascii")


def decode_row_quarantine(data: bytes) -> RowQuarantine | None:
    """The rows of a SQLite quarantine file, or None if `data` is not one."""
    try:
        first, *rest = data.decode("ascii").splitlines()
        head = json.loads(first)
        if type(head) is not dict or head.get("quarantine") != _ROW_KIND:
            return None
        rows = []
        for line in rest:
            cells = json.loads(line)
            row = []
            for kind, value in cells:
                if kind not in _CLASSES:
                    return None
                row.append((kind, base64.b64decode(value) if kind in _BYTES_CLASSES else value))
            rows.append(tuple(row))
        session, revision, torn_from = head["session"], head["revision"], head["tornFromSeq"]
    except (UnicodeDecodeError, ValueError, KeyError, TypeError):
        return None
    if type(session) is not str or type(revision) is not int or type(torn_from) is not int:
        return None
    return RowQuarantine(session, revision, torn_from, tuple(rows))
