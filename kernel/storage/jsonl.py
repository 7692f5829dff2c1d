"""JSONL bytes to a durable prefix and back: header line, records, torn tail.

The layout is docs/format/persistence.md §2-§5. The rule to keep in mind:
damage is tolerated only after the last real `turn/end` (a torn tail,
removed by repair); the same damage before it is corruption. Everything here
takes and returns bytes: no file I/O, no clock. Zstandard framing lives in
`kernel.storage.zstd`; both hand their scans to the one load pipeline of
`kernel.storage.load`, whose `Loaded`, `plan_load` and `loaded_result` are named
here as well.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any, Final, cast

import attrs

from kernel.admission.header import header_count, header_line_problem, refuse_version
from kernel.errors import CorruptLog, KernelError
from kernel.storage.load import (
    TYPED,
    WIRE,
    Loaded,
    RawScan,
    TornFrame,
    events_of_records,
    loaded_result,
    option_flag,
    plan_load,
    plan_scan,
    scan_lines,
)
from kernel.storage.scan import scan_records
from kernel.storage.typed.lines import loaded_member_lines, loaded_wire
from kernel.values.events import (
    ASSISTANT_CHUNK,
    DEFAULT_KNOWN_TYPES,
    Event,
    SessionHeader,
    known_type_set,
)
from kernel.values.json import FrozenObject, is_number, view
from kernel.wire.chunks import pack_chunk_rows
from kernel.wire.codec import (
    event_to_wire,
    header_from_json,
    header_to_json,
    iter_events,
    ranged_spelling,
)
from kernel.wire.jsontext import (
    encode_json_bytes,
    encode_record_bytes,
    parse_json_keeping_negative_zero,
)

__all__ = (
    "Scan",
    "Loaded",
    "TornFrame",
    "RawScan",
    "scan_jsonl",
    "load_jsonl",
    "write_jsonl",
    "encode_records",
    "write_records",
    "header_line",
    "parse_header_line",
    "scan_records",
    "plan_load",
    "scan_result",
    "refuse_version",
    "loaded_result",
    "as_stored_bytes",
    "option_flag",
)

_RETIRED_HEADER_KEYS: Final = ("sandboxMode", "approvalPolicy")
_OPTIONAL_HEADER_KEYS: Final = ("cwd", "parentSession", "seedLength", "origin")


@attrs.frozen
class Scan:
    """The physical scan of a stored log: its header record and durable prefix.

    `header` is the in-memory header record read from line 1 (a `FrozenObject`
    with camelCase keys, unknown keys dropped, not yet admitted: a relative
    `cwd` scans and fails only at load). `events` is the valid contiguous
    prefix; bytes from `committed_bytes` to `total_bytes` are a torn tail that
    repair removes. `dropped_records` counts the stored lines (a final line
    without its newline included) outside the prefix and `torn_reason` says why
    the tail was cut. For Zstandard logs `torn_frame` marks an incomplete last
    frame; its recovered events are the tail of `events`.
    """

    header: FrozenObject
    events: tuple[Event, ...]
    committed_bytes: int
    total_bytes: int
    dropped_records: int = 0
    torn_reason: str | None = None
    torn_frame: TornFrame | None = None

    @property
    def torn(self) -> bool:
        """Whether the stored bytes end in a torn tail."""
        return self.committed_bytes < self.total_bytes


# -- the header line (docs/format/events.md §2.2, docs/format/persistence.md §3.1) -----------------


_OTHER_LAYOUTS: Final = (
    (b"\x28\xb5\x2f\xfd", "a Zstandard frame: read them with load_jsonl_zstd"),
    (b"SQLite format 3\x00", "a SQLite database: open it with kernel.store.SqliteStore"),
)
"""The first bytes of the other stored layouts, named when plain JSONL cannot be read."""


def _layout_hint(data: bytes) -> str:
    """`; the bytes begin with ...` when `data` starts as another layout does, else ``."""
    layout = next((what for magic, what in _OTHER_LAYOUTS if data.startswith(magic)), None)
    return "" if layout is None else f"; the bytes begin with {layout}"


def parse_header_line(line: bytes) -> dict[str, Any]:
    """The in-memory header record of a header line (without its newline), per §3.1 steps 2-6.

    Version first: a numeric `version` other than 0 is `UnsupportedFormat`;
    anything else wrong is `CorruptLog`. Only the shape checks of docs/format/events.md
    §2.2 run here; `cwd` and the other fields are admitted at load.
    """
    try:
        value = parse_json_keeping_negative_zero(line)
    except ValueError as exc:
        raise CorruptLog(f"header line is not valid JSON: {exc}{_layout_hint(line)}") from None
    if type(value) is dict:
        version = value.get("version")
        if is_number(version) and version != 0:
            raise refuse_version(value.get("id"), version)
    problem = header_line_problem(value)
    if problem is not None:
        raise CorruptLog(f"first line is not a session header: {problem}")
    for key in _RETIRED_HEADER_KEYS:
        if key in value:
            raise CorruptLog(f"first line is not a session header: retired key {key!r}")
    record: dict[str, Any] = {
        "version": 0,
        "id": value["id"],
        "createdAt": header_count(value["createdAt"]),
    }
    for key in _OPTIONAL_HEADER_KEYS:
        if key in value:
            record[key] = value[key]
    record["delegationDepth"] = header_count(value["delegationDepth"])
    if "agentPreset" in value:
        record["agentPreset"] = value["agentPreset"]
    return record


def header_line(header: SessionHeader | Mapping[str, Any]) -> bytes:
    """The JSONL header line, without its newline, in the key order of docs/format/events.md §2.2.

    A mapping is admitted first (docs/format/admission.md §6). `delegationDepth` is always
    written (absent means 0).
    """
    if type(header) is SessionHeader:
        # docs/format/admission.md §6: SessionHeader does not check its fields
        header_to_json(header)
    else:
        header = header_from_json(header)
    line: dict[str, Any] = {
        "type": "session",
        "version": header.version,
        "id": header.id,
        "createdAt": header.created_at,
    }
    if header.cwd is not None:
        line["cwd"] = header.cwd
    if header.parent_session is not None:
        line["parentSession"] = header.parent_session
    if header.seed_length is not None:
        line["seedLength"] = header.seed_length
    if header.origin is not None:
        line["origin"] = header.origin
    line["delegationDepth"] = 0 if header.delegation_depth is None else header.delegation_depth
    if header.agent_preset is not None:
        line["agentPreset"] = header.agent_preset
    return encode_json_bytes(line)


def _scan_plain(data: bytes, *, typed: bool = False) -> RawScan:
    """The raw scan of a plain log: by the typed scanner while it can when `typed`
    (`kernel.storage.load.scan_lines`), else by the exact one."""
    header_end = data.find(b"\n")
    if header_end == -1:
        raise CorruptLog(f"empty or header-less log: no complete header line{_layout_hint(data)}")
    header = parse_header_line(data[:header_end])
    records: list[Any] = []
    scanned, all_typed = scan_lines(
        data, header_end + 1, records, typed=typed, first_line=2, label="line"
    )
    committed, dropped, reason = scanned
    return RawScan(
        header=header,
        records=records,
        committed_bytes=committed,
        total_bytes=len(data),
        dropped_records=dropped,
        torn_reason=reason,
        kind=TYPED if all_typed else WIRE,
    )


def as_stored_bytes(data: Any) -> bytes:
    """The stored log as `bytes` (a bytearray or memoryview is copied); CorruptLog otherwise."""
    if type(data) is bytes:
        return data
    if issubclass(type(data), (bytearray, memoryview)):
        return bytes(data)
    raise CorruptLog(f"a stored log must be bytes, got {type(data).__name__}")


def scan_result(raw_scan: RawScan) -> Scan:
    """The public `Scan` of a raw scan: events built (an invalid envelope is `CorruptLog`).

    A `TYPED` scan's events are the scan's own: each passed its typed decode and
    the per-event rules, so its envelope is valid and the event is the one the
    exact scan would build (payloads stay unread until used).
    """
    if raw_scan.kind == TYPED:
        events = tuple(raw_scan.records)
    else:
        events = events_of_records(raw_scan.records)
    torn_frame = None
    if raw_scan.torn_frame_start is not None:
        torn_frame = TornFrame(raw_scan.torn_frame_start, events[raw_scan.recovered_from :])
    return Scan(
        header=view(dict(raw_scan.header)),
        events=events,
        committed_bytes=raw_scan.committed_bytes,
        total_bytes=raw_scan.total_bytes,
        dropped_records=raw_scan.dropped_records,
        torn_reason=raw_scan.torn_reason,
        torn_frame=torn_frame,
    )


def scan_jsonl(data: bytes) -> Scan:
    """Scan a plain JSONL log (docs/format/persistence.md §3): header, durable prefix, torn tail.

    Returns:
        `Scan(header, events, committed_bytes, total_bytes)`: the stored events as
        read, before admission and closers.

    Raises:
        UnsupportedFormat: a foreign format version.
        CorruptLog: damage inside committed history, or a stored event whose envelope
            is invalid (`Scan.events` holds built `Event`s).
    """
    return scan_result(_scan_plain(as_stored_bytes(data), typed=True))


def load_jsonl(
    data: bytes,
    *,
    session_id: str | None = None,
    now: int,
    known_types: Collection[str] = DEFAULT_KNOWN_TYPES,
    normalize_legacy: bool = True,
) -> Loaded:
    """Scan and plan a plain JSONL log (docs/format/persistence.md §3, §5): the balanced view.

    Args:
        data: the file's bytes.
        session_id: the id the header must carry (H4); defaults to the header's own.
        now: accepted for symmetry with `SessionLog.seed`; the loader appends no
            end-seed marker, so it is not read.
        known_types: the event types read without `ignorable` (R14a).
        normalize_legacy: rewrite older v0 shapes in memory (`Loaded.normalized`;
            Appendix A); false refuses them as the current rules do.

    Returns:
        `Loaded`: the header, the stored events plus the closers of an interrupted
        turn, and where the durable prefix ends (`committed_bytes`, `torn`).

    Raises:
        UnsupportedFormat: a foreign format version, or an unknown event type that is
            not `ignorable` (`UnknownEventType`).
        CorruptLog: everything else: damage inside committed history, a stored event
            that fails admission (its rule in `.rule`).
    """
    stored = as_stored_bytes(data)
    known = known_type_set(known_types)
    normalize = option_flag(normalize_legacy, "normalize_legacy")
    return plan_scan(
        _scan_plain(stored, typed=True),
        lambda: _scan_plain(stored),
        session_id=session_id,
        known_types=known,
        normalize=normalize,
    )


# -- writing (docs/format/persistence.md §2.1, §2.4) -----------------------------------------------


def encode_records(
    events: Iterable[Event], *, pack_chunks: bool = True, ranged_sources: bool = False
) -> bytes:
    """The bytes of one append batch: each storage record's exact JSON text and a newline.

    Delta-chunk runs are packed into rows unless `pack_chunks` is false; an
    empty batch is `b""`. With `ranged_sources`, `sourceEventSeqs` are spelled
    with ranges as DSH's writers from 0.1.2 on spell them (§2.5); readers older
    than that refuse them, so the default is the plain spelling.
    """
    out = bytearray()
    write_records(out, events, pack_chunks=pack_chunks, ranged_sources=ranged_sources)
    return bytes(out)


def write_records(
    out: bytearray,
    events: Iterable[Event],
    *,
    pack_chunks: bool = True,
    ranged_sources: bool = False,
) -> None:
    """`encode_records` into `out`: each record's text and its newline, added as made.

    A caller that hands the bytes on to something that reads a buffer (a compressor,
    a file) saves the copy `encode_records` makes to return them as `bytes`.

    No record's text is kept: a list of orjson's texts holds about 4 KB of resident
    memory each, whatever their length (420 MB for the 100,000 lines of a 17 MB log;
    docs/rfc/implemented/architecture/2026-12-06-the-writer-keeps-no-record-text.md).
    """
    if pack_chunks:
        records: tuple[Any, ...] = pack_chunk_rows(events)
    else:  # a tuple as it is: a loader's own (`LoadedEvents`) keeps the type that vouches for it
        records = (
            cast("tuple[Event, ...]", events)
            if issubclass(type(events), tuple)
            else tuple(iter_events(events))
        )
    index, size = 0, len(records)
    while index < size:
        record = records[index]
        if not pack_chunks and type(record) is Event and record.type is ASSISTANT_CHUNK:
            lines = loaded_member_lines(records, index)  # a whole loaded row, unpacked
            if lines is not None:
                out += b"\n".join(lines)
                out += b"\n"
                index += len(lines)
                continue
        out += _record_bytes(record, index, ranged_sources)
        out += b"\n"
        index += 1


def _record_bytes(record: Any, index: int, ranged_sources: bool) -> bytes:
    """The exact text of one storage record (an `Event` or a chunk row)."""
    if type(record) is Event:
        loaded = loaded_wire(record)
        wire, read_from = loaded if loaded is not None else (event_to_wire(record), None)
        if ranged_sources and record.source_event_seqs:
            wire["sourceEventSeqs"] = ranged_spelling(record.source_event_seqs)
            read_from = None
        return encode_record_bytes(wire, read_from)
    if type(record) is FrozenObject:
        return encode_record_bytes(record)
    raise KernelError(f"encode_records: item {index} is not an Event", index=index)


def write_jsonl(
    header: SessionHeader | Mapping[str, Any],
    events: Iterable[Event],
    *,
    pack_chunks: bool = True,
    ranged_sources: bool = False,
) -> bytes:
    """The exact bytes the compatible writer produces for a whole log
    (docs/format/persistence.md §2.1).

    The header line and its newline, then (only when there are events) every
    storage record followed by a newline.

    A codec: it spells the events it is given and checks only what any reader needs
    to read the text back (R1, R2). A log whose events a `SessionLog` or a load
    admitted loads back as written; events made otherwise (`Event(...)`,
    `event_from_json`) may break a rule the loader then refuses them for (a
    payload shape, a replace range): `SessionLog.seed(events, now=...)` checks them
    all first, and the stores refuse them at `append`.

    Args:
        header: the session header (a `SessionHeader` or its wire object).
        events: the log's events, in order.
        pack_chunks: pack runs of delta chunks into chunk rows (docs/format/events.md §7).
        ranged_sources: spell citations with ranges, as DSH's writers from 0.1.2 on do
            (§2.5); the default is the plain spelling every v0 reader reads.

    Raises:
        SessionHeaderError: the header breaks a rule of docs/format/admission.md §6.
        KernelError: an item is not an `Event` or holds a value no reader could read
            back (the subclass names the rule).
    """
    try:
        head = header_line(header)
    except KernelError:
        # A wrong event is named before a wrong header, as when the header was spelled last.
        encode_records(events, pack_chunks=pack_chunks, ranged_sources=ranged_sources)
        raise
    out = bytearray(head)
    out += b"\n"
    write_records(out, events, pack_chunks=pack_chunks, ranged_sources=ranged_sources)
    return bytes(out)
