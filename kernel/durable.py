"""JSONL bytes to a durable prefix and back: header line, records, torn tail.

The layout is docs/format/persistence.md §2-§5. The rule to keep in mind:
damage is tolerated only after the last real `turn/end` (a torn tail,
removed by repair); the same damage before it is corruption. Everything here
takes and returns bytes: no file I/O, no clock. Zstandard framing lives in
`kernel.frames` and reuses the scanner below.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Final

import attrs
from pyrsistent import PMap, pmap

from kernel.admission import check_legacy, check_message_shape
from kernel.chunks import pack_chunk_rows
from kernel.codec import (
    event_from_wire,
    event_to_wire,
    header_from_json,
    header_to_json,
    iter_events,
    ranged_spelling,
)
from kernel.errors import (
    CorruptLog,
    KernelError,
    UnknownEventType,
    UnsupportedFormat,
)
from kernel.events import (
    DEFAULT_KNOWN_TYPES,
    LEGACY_TYPES,
    REQUEST_HEADER,
    SURFACE_TYPES,
    Event,
    SessionHeader,
    known_type_set,
)
from kernel.fastload import plan_events, scan_events
from kernel.json import FrozenObject, is_number, safe_int, summary, view
from kernel.jsontext import encode_json_bytes, format_number, parse_json_keeping_negative_zero
from kernel.legacy import normalize_legacy
from kernel.log import SessionLog
from kernel.records import scan_records
from kernel.repair import wire_closers

__all__ = (
    "Scan",
    "Loaded",
    "TornFrame",
    "RawScan",
    "scan_jsonl",
    "load_jsonl",
    "write_jsonl",
    "encode_records",
    "header_line",
    "parse_header_line",
    "scan_records",
    "plan_load",
    "scan_result",
    "refuse_version",
    "loaded_result",
    "load_scanned",
    "RecordScanner",
    "as_stored_bytes",
    "option_flag",
)

_RETIRED_HEADER_KEYS: Final = ("sandboxMode", "approvalPolicy")
_OPTIONAL_HEADER_KEYS: Final = ("cwd", "parentSession", "seedLength", "origin")


@attrs.frozen
class TornFrame:
    """A Zstandard frame the data ends inside (docs/format/persistence.md §8 step 6).

    `truncate_to` is the frame's start offset (repair truncates there);
    `recovered` are the complete, contiguous events decoded from its readable
    part, which repair rewrites as a new frame together with the closers.
    """

    truncate_to: int
    recovered: tuple[Event, ...] = ()


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


@attrs.frozen
class Loaded:
    """A loaded log: the admitted header and the balanced events (`prefix + closers`).

    `events` never holds an end-seed marker (the constructor of a live session
    adds it). `torn` is `committed_bytes < total_bytes`; the other tail fields
    are as in `Scan`. `normalized` counts the stored events read in an older v0
    shape and rewritten in memory, by shape (`kernel.legacy.LEGACY_SHAPES`;
    docs/format/persistence.md Appendix A); the stored bytes are unchanged.
    """

    header: SessionHeader
    events: tuple[Event, ...]
    closers: tuple[Event, ...]
    committed_bytes: int
    total_bytes: int
    torn: bool
    dropped_records: int = 0
    torn_reason: str | None = None
    torn_frame: TornFrame | None = None
    normalized: PMap[str, int] = attrs.field(factory=pmap)


@attrs.frozen
class RawScan:
    """A scan before admission: its records are the plain wire dicts the kernel owns (the
    exact scan, `scan_records`), or events whose shapes their typed decode checked
    (`kernel.fastload.scan_events`)."""

    header: dict[str, Any]
    records: list[Any]
    committed_bytes: int
    total_bytes: int
    dropped_records: int = 0
    torn_reason: str | None = None
    torn_frame_start: int | None = None
    recovered_from: int = 0


# -- the header line (docs/format/events.md §2.2, docs/format/persistence.md §3.1) -----------------


def _negative_zero(value: Any) -> bool:
    return type(value) is float and value == 0.0 and math.copysign(1.0, value) < 0


def _header_count(value: Any) -> int | None:
    """A non-negative safe integer that is not negative zero, else None."""
    if _negative_zero(value):
        return None
    v = safe_int(value)
    return v if v is not None and v >= 0 else None


def _spell_version(version: Any) -> str:
    if type(version) is float and not math.isfinite(version):
        return "Infinity" if version > 0 else "-Infinity"
    return format_number(version)


def _spell_id(value: Any) -> str:
    if type(value) is str:
        return value
    if value is None:
        return "(unknown)"
    try:
        return encode_json_bytes(value).decode("utf-8")
    except (TypeError, ValueError):
        return summary(value)


def refuse_version(session_id: Any, version: Any) -> UnsupportedFormat:
    """The direction-aware refusal of a non-zero format version (docs/format/persistence.md §4)."""
    session = _spell_id(session_id)
    spelled = _spell_version(version)
    if version > 0:
        return UnsupportedFormat(
            f"session {session}: the log was written in format v{spelled} by a newer writer; "
            "this reader only reads v0; upgrade the reader to open it"
        )
    return UnsupportedFormat(
        f"session {session}: the log uses format v{spelled}, older than the supported v0, "
        "and no upgrade path exists"
    )


def _header_shape_problem(value: Any) -> str | None:
    if type(value) is not dict:
        return "it is not a JSON object"
    if value.get("type") != "session":
        return 'type is not "session"'
    if not is_number(value.get("version")):
        return "version is not a number"
    if type(value.get("id")) is not str:
        return "id is not a string"
    if _header_count(value.get("createdAt")) is None:
        return "createdAt is not a non-negative safe integer"
    if _header_count(value.get("delegationDepth")) is None:
        return "delegationDepth is missing or not a non-negative safe integer"
    if "origin" in value and value["origin"] != "subagent":
        return 'origin is not "subagent"'
    if "agentPreset" in value and type(value["agentPreset"]) is not str:
        return "agentPreset is not a string"
    return None


def parse_header_line(line: bytes) -> dict[str, Any]:
    """The in-memory header record of a header line (without its newline), per §3.1 steps 2-6.

    Version first: a numeric `version` other than 0 is `UnsupportedFormat`;
    anything else wrong is `CorruptLog`. Only the shape checks of docs/format/events.md
    §2.2 run here; `cwd` and the other fields are admitted at load.
    """
    try:
        value = parse_json_keeping_negative_zero(line)
    except ValueError as exc:
        raise CorruptLog(f"header line is not valid JSON: {exc}") from None
    if type(value) is dict:
        version = value.get("version")
        if is_number(version) and version != 0:
            raise refuse_version(value.get("id"), version)
    problem = _header_shape_problem(value)
    if problem is not None:
        raise CorruptLog(f"first line is not a session header: {problem}")
    for key in _RETIRED_HEADER_KEYS:
        if key in value:
            raise CorruptLog(f"first line is not a session header: retired key {key!r}")
    record: dict[str, Any] = {
        "version": 0,
        "id": value["id"],
        "createdAt": _header_count(value["createdAt"]),
    }
    for key in _OPTIONAL_HEADER_KEYS:
        if key in value:
            record[key] = value[key]
    record["delegationDepth"] = _header_count(value["delegationDepth"])
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


RecordScanner = Callable[..., "tuple[int, int, str | None] | None"]
"""`scan_records` (wire dicts) or `scan_events` (typed events; None when it declines)."""


def _scan_plain(data: bytes, scan: RecordScanner = scan_records) -> RawScan | None:
    header_end = data.find(b"\n")
    if header_end == -1:
        raise CorruptLog("empty or header-less log: no complete header line")
    header = parse_header_line(data[:header_end])
    records: list[Any] = []
    scanned = scan(data, header_end + 1, records, first_line=2)
    if scanned is None:
        return None
    committed, dropped, reason = scanned
    return RawScan(
        header=header,
        records=records,
        committed_bytes=committed,
        total_bytes=len(data),
        dropped_records=dropped,
        torn_reason=reason,
    )


def as_stored_bytes(data: Any) -> bytes:
    """The stored log as `bytes` (a bytearray or memoryview is copied); CorruptLog otherwise."""
    if type(data) is bytes:
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise CorruptLog(f"a stored log must be bytes, got {type(data).__name__}")


def _events_of(records: Iterable[dict[str, Any]]) -> tuple[Event, ...]:
    out = []
    for index, obj in enumerate(records):
        try:
            out.append(event_from_wire(obj, f"stored event at index {index}", lossless=False))
        except KernelError as exc:
            raise CorruptLog(
                f"stored event at index {index} is not a valid event: {exc}", index=index
            ) from exc
    return tuple(out)


def scan_result(raw_scan: RawScan) -> Scan:
    """The public `Scan` of a raw scan: events built (an invalid envelope is `CorruptLog`)."""
    events = _events_of(raw_scan.records)
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

    Raises `UnsupportedFormat` for a foreign version and `CorruptLog` for
    damage inside committed history (or a stored event whose envelope is
    invalid, since `Scan.events` holds built `Event`s).
    """
    raw_scan = _scan_plain(as_stored_bytes(data))
    assert raw_scan is not None  # the exact scan always answers
    return scan_result(raw_scan)


# -- the load pipeline (docs/format/persistence.md §5) ---------------------------------------------


def _corrupt(exc: KernelError, what: str) -> CorruptLog:
    return CorruptLog(f"{what}: {exc}", index=exc.index, seq=exc.seq)


def _refuse_legacy_events(records: list[Any]) -> None:
    """R3 over every stored record (docs/format/persistence.md §5)."""
    for index, obj in enumerate(records):
        event_type = obj.get("type")
        if event_type.__class__ is str and (
            event_type in LEGACY_TYPES or event_type == REQUEST_HEADER
        ):
            _at(index, check_legacy, obj, f"stored event at index {index}")


def plan_load(
    raw_scan: RawScan,
    *,
    session_id: str | None,
    known_types: Collection[str],
    normalize: bool = True,
) -> tuple[SessionHeader, tuple[Event, ...], tuple[Event, ...], PMap[str, int]]:
    """`plan_load` of docs/format/persistence.md §5 over a raw scan:
    `(header, prefix + closers, closers, normalized counts)`.

    Order: identity, R3 over every event, the older-shape normalization of
    Appendix A (when `normalize`), R10 over every event, the unknown-type rule
    (`UnknownEventType`, passed through), closers, then header admission and
    restore admission. Every other failure is re-raised as `CorruptLog` with the
    specific error as its cause. (The version was refused by the scan already.)
    """
    header, records = raw_scan.header, raw_scan.records
    counts: PMap[str, int] = pmap()
    try:
        if session_id is not None and header["id"] != session_id:
            raise CorruptLog(
                f"identity mismatch: the stored header names session {summary(header['id'])}, "
                f"not {summary(session_id)}"
            )
        if normalize:
            _refuse_legacy_events(records)  # R3 ranks before a malformed older shape
            normalized = normalize_legacy(records, session_id=header["id"])
            records, counts = normalized.records, normalized.counts
        # One pass for three rules whose failures rank R3, then R10, then unknown type
        # (§5): a legacy event fails at once; the others are kept until the pass ends.
        shape_error: KernelError | None = None
        unknown: tuple[int, Any] | None = None
        for index, obj in enumerate(records):
            event_type = obj.get("type")
            if event_type.__class__ is not str:
                if unknown is None and obj.get("ignorable") is not True:
                    unknown = (index, event_type)
                continue
            if event_type in LEGACY_TYPES or event_type == REQUEST_HEADER:
                _at(index, check_legacy, obj, f"stored event at index {index}")
            if event_type in SURFACE_TYPES:
                if shape_error is None:
                    try:
                        _at(
                            index,
                            check_message_shape,
                            event_type,
                            obj.get("data"),
                            f"stored event at index {index}",
                        )
                    except KernelError as exc:
                        shape_error = exc
            elif (
                unknown is None
                and event_type not in known_types
                and obj.get("ignorable") is not True
            ):
                unknown = (index, event_type)
        if shape_error is not None:
            raise shape_error
    except UnsupportedFormat:
        raise
    except KernelError as exc:
        raise _corrupt(exc, "stored log fails load checks") from exc
    if unknown is not None:
        index, event_type = unknown
        raise UnknownEventType(
            f"event type {summary(event_type)} at seq {index} is unknown to this reader and not "
            "ignorable, so the log cannot be interpreted",
            index=index,
            seq=index,
        )
    try:
        closers = wire_closers(records)
        admitted = header_from_json(view(dict(header)), session_id=session_id)
        log = SessionLog.restore([*records, *closers], header=admitted)
    except UnsupportedFormat:
        raise
    except KernelError as exc:
        raise _corrupt(exc, "stored log fails restore admission") from exc
    events = tuple(log.events)
    return admitted, events, events[len(records) :], counts


def _at(index: int, check: Any, *args: Any) -> None:
    try:
        check(*args)
    except KernelError as exc:
        if exc.index is None:
            exc.index = index
        if exc.seq is None:
            exc.seq = index
        raise


def load_scanned(
    scan_with: Callable[[RecordScanner], RawScan | None],
    *,
    session_id: str | None,
    known_types: Collection[str],
    normalize: bool = True,
) -> Loaded:
    """Load a stored log by the typed path, or by the exact pipeline when that one declines.

    `scan_with(scanner)` scans the log's records with the given record scanner.
    The typed path (`kernel.fastload`) answers only when it is sure to give what
    the exact one gives (it declines any older v0 shape when `normalize`);
    otherwise `plan_load` runs and names the error.
    """
    typed = scan_with(scan_events)
    if typed is not None:
        planned = plan_events(
            typed.header,
            typed.records,
            session_id=session_id,
            known_types=known_types,
            normalize=normalize,
        )
        if planned is not None:
            return _loaded(typed, *planned)
    exact = scan_with(scan_records)
    assert exact is not None  # the exact scan always answers
    return loaded_result(exact, session_id=session_id, known_types=known_types, normalize=normalize)


def loaded_result(
    raw_scan: RawScan,
    *,
    session_id: str | None,
    known_types: Collection[str],
    normalize: bool = True,
) -> Loaded:
    """Run `plan_load` over a raw scan and package the `Loaded` view."""
    planned = plan_load(
        raw_scan, session_id=session_id, known_types=known_types, normalize=normalize
    )
    return _loaded(raw_scan, *planned)


def _loaded(
    raw_scan: RawScan,
    header: SessionHeader,
    events: tuple[Event, ...],
    closers: tuple[Event, ...],
    normalized: PMap[str, int] | None = None,
) -> Loaded:
    torn_frame = None
    if raw_scan.torn_frame_start is not None:
        recovered = events[raw_scan.recovered_from : len(raw_scan.records)]
        if normalized:
            # A repair writes these back: as they were stored, not as normalized.
            recovered = _events_of(raw_scan.records[raw_scan.recovered_from :])
        torn_frame = TornFrame(raw_scan.torn_frame_start, recovered)
    return Loaded(
        header=header,
        events=events,
        closers=closers,
        committed_bytes=raw_scan.committed_bytes,
        total_bytes=raw_scan.total_bytes,
        torn=raw_scan.committed_bytes < raw_scan.total_bytes,
        dropped_records=raw_scan.dropped_records,
        torn_reason=raw_scan.torn_reason,
        torn_frame=torn_frame,
        normalized=normalized if normalized is not None else pmap(),
    )


def load_jsonl(
    data: bytes,
    *,
    session_id: str | None = None,
    now: int,
    known_types: Collection[str] = DEFAULT_KNOWN_TYPES,
    normalize_legacy: bool = True,
) -> Loaded:
    """Scan and plan a plain JSONL log (docs/format/persistence.md §3, §5): the balanced view.

    `session_id` defaults to the header's own id. `now` is accepted for
    symmetry with `SessionLog.seed`; the loader appends no end-seed marker, so
    it is not read. Older v0 shapes are rewritten in memory
    (`Loaded.normalized`; Appendix A) unless `normalize_legacy` is false, which
    refuses them as the current rules do. Raises `UnsupportedFormat` (foreign
    version, unknown required event type) or `CorruptLog` (everything else).
    """
    stored = as_stored_bytes(data)
    known = known_type_set(known_types)
    return load_scanned(
        lambda scan: _scan_plain(stored, scan),
        session_id=session_id,
        known_types=known,
        normalize=option_flag(normalize_legacy, "normalize_legacy"),
    )


def option_flag(value: Any, name: str) -> bool:
    """A boolean option, or a named `KernelError` (never a truthy string taken for True)."""
    if type(value) is not bool:
        raise KernelError(f"{name} must be True or False, got {summary(value)}")
    return value


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
    if pack_chunks:
        records: tuple[Any, ...] = pack_chunk_rows(events)
    else:
        records = tuple(iter_events(events))
    parts = []
    for index, record in enumerate(records):
        if type(record) is Event:
            wire = event_to_wire(record)
            if ranged_sources and record.source_event_seqs:
                wire["sourceEventSeqs"] = ranged_spelling(record.source_event_seqs)
            parts.append(encode_json_bytes(wire))
        elif type(record) is FrozenObject:
            parts.append(encode_json_bytes(record))
        else:
            raise KernelError(f"encode_records: item {index} is not an Event", index=index)
    if not parts:
        return b""
    parts.append(b"")
    return b"\n".join(parts)


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
    storage record followed by a newline. `ranged_sources` spells citations with
    ranges, as DSH's writers from 0.1.2 on do (§2.5); the default is the plain
    spelling every v0 reader reads.
    """
    records = encode_records(events, pack_chunks=pack_chunks, ranged_sources=ranged_sources)
    return header_line(header) + b"\n" + records
