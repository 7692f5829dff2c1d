"""The load pipeline (docs/format/persistence.md §5), and the one choice of the path through it.

Every layout (plain JSONL, Zstandard JSONL, SQLite rows) scans its stored records
into a `RawScan` and hands it to `plan_scan`, the one function that decides
between the typed plan (`kernel.storage.typed.lines`), which may only accept, and the exact
pipeline (`plan_load`), which decides and names the error. When the typed path
declines, the layout's exact scan reads the records again (`scan_lines` over
the bytes in hand, or the `exact_scan` a layout gives `plan_scan`): measured,
reading a line again costs less than turning its typed event into a wire dict.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, Final

import attrs
from pyrsistent import PMap, pmap

from kernel.admission.payloads import check_legacy, check_message_shape
from kernel.errors import CorruptLog, KernelError, UnknownEventType, UnsupportedFormat
from kernel.folds.closers import wire_closers
from kernel.log import SessionLog
from kernel.storage.scan import scan_records
from kernel.storage.sqlite_rows import Row, RowScan, row_lines, scan_rows
from kernel.storage.typed.lines import (
    Declined,
    TypedScan,
    plan_decoded_events,
    plan_events,
    scan_events,
    scan_row_lines,
)
from kernel.values.events import LEGACY_TYPES, REQUEST_HEADER, SURFACE_TYPES, Event, SessionHeader
from kernel.values.json import raw, summary, view
from kernel.wire.codec import event_from_wire, event_to_wire, header_from_json
from kernel.wire.legacy import normalize_legacy

__all__ = (
    "WIRE",
    "TYPED",
    "DECODED",
    "TornFrame",
    "Loaded",
    "RawScan",
    "scan_lines",
    "scan_stored_rows",
    "decoded_rows_scan",
    "exact_wire",
    "as_wire_scan",
    "plan_scan",
    "plan_load",
    "loaded_result",
    "events_of_records",
    "option_flag",
)


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
class Loaded:
    """A loaded log: the admitted header and the balanced events (`prefix + closers`).

    `events` never holds an end-seed marker (the constructor of a live session
    adds it). From the typed load path it is a `kernel.folds.surface.AdmittedEvents`,
    a tuple that carries the surface the load planned, so the surface folds over it
    do not fold again. `torn` is `committed_bytes < total_bytes`; the other tail fields
    are as in `Scan`. `normalized` counts the stored events read in an older v0
    shape and rewritten in memory, by shape (`kernel.wire.legacy.LEGACY_SHAPES`;
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


WIRE: Final = "wire"
"""`RawScan.kind`: plain wire dicts the kernel owns (the exact scan, `scan_records`)."""
TYPED: Final = "typed"
"""`RawScan.kind`: events admitted one by one by their typed decode (`scan_events`)."""
DECODED: Final = "decoded"
"""`RawScan.kind`: events decoded from storage but not yet admitted (SQLite's row codec)."""


@attrs.frozen
class RawScan:
    """A scan before the plan: the header record and the durable prefix, with the facts of
    the tail. `kind` says what `records` holds (`WIRE`, `TYPED` or `DECODED`)."""

    header: dict[str, Any]
    records: list[Any]
    committed_bytes: int
    total_bytes: int
    dropped_records: int = 0
    torn_reason: str | None = None
    torn_frame_start: int | None = None
    recovered_from: int = 0
    kind: str = WIRE


# -- the scan: typed while it can, then exact ----------------------------------------------------


def exact_wire(event: Event) -> dict[str, Any]:
    """The wire dict the exact scan reads for a stored event (its payload container, not a copy)."""
    wire = event_to_wire(event)
    wire["data"] = raw(event.data)
    return wire


def scan_lines(
    buf: bytes,
    start: int,
    records: list[Any],
    *,
    typed: bool,
    first_line: int,
    label: str,
    ranged: bool = True,
) -> tuple[TypedScan, bool]:
    """The record scan of docs/format/persistence.md §3.2 of the lines of `buf` from
    `start`: `(scan_records' answer, whether `records` are all typed events)`.

    With `typed`, the typed scanner reads the lines; when it leaves one to the
    exact scanner, the exact scanner reads them all again from `start`, and the
    events `records` held before this call become wire dicts. Reading a line
    again costs less than turning its typed event into a wire dict (measured:
    see the record "one load dispatcher"). Without `typed`, `records` holds
    wire dicts and the exact scanner reads everything.
    """
    base = len(records)
    if typed:
        scanned = scan_events(
            buf, start, records, first_line=first_line, label=label, ranged=ranged
        )
        if not isinstance(scanned, Declined):
            return scanned, True
        records[:] = map(exact_wire, records[:base])
    exact = scan_records(buf, start, records, first_line=first_line, label=label, ranged=ranged)
    return exact, False


def scan_stored_rows(rows: Sequence[Sequence[Any]]) -> tuple[RowScan, str]:
    """The durable prefix of a SQLite session's rows (docs/format/persistence.md §7.5), and
    the `RawScan.kind` of its events.

    By the typed scan of the rows spelled as lines (`TYPED`) when it reads every
    row, else by the row codec (`DECODED`: a torn tail, a row not plainly well
    formed, an event that breaks a per-event rule).
    """
    lines = row_lines(rows)
    events = None if lines is None else scan_row_lines(lines)
    if events is not None:
        return RowScan(tuple(events)), TYPED
    return scan_rows([Row(*r) for r in rows]), DECODED


def decoded_rows_scan(raw_scan: RawScan, rows: Sequence[Sequence[Any]]) -> RawScan:
    """`raw_scan` of a session's rows read again by the row codec (`DECODED`): the exact
    scan a `TYPED` row scan falls back to when its plan declines."""
    return attrs.evolve(
        raw_scan, records=list(scan_rows([Row(*r) for r in rows]).events), kind=DECODED
    )


def as_wire_scan(raw_scan: RawScan) -> RawScan:
    """`raw_scan` with its records as the exact pipeline's wire dicts."""
    if raw_scan.kind == WIRE:
        return raw_scan
    return attrs.evolve(raw_scan, records=list(map(exact_wire, raw_scan.records)), kind=WIRE)


def plan_scan(
    raw_scan: RawScan,
    exact_scan: Callable[[], RawScan],
    *,
    session_id: str | None,
    known_types: Collection[str],
    normalize: bool = True,
) -> Loaded:
    """Plan a stored log by the typed path when it answers, else by the exact pipeline.

    The one place that chooses, for every layout. `raw_scan` is the layout's
    first scan; a `TYPED` or `DECODED` one is planned as it is, and answers only
    when it is sure to give what `plan_load` gives. When it declines,
    `exact_scan()` reads the stored records again by the layout's exact scan
    (for a `TYPED` scan: cheaper than converting its events, and a Zstandard
    log's plaintext need not be kept meanwhile), a `DECODED` one's events
    become wire dicts, and `plan_load` decides and names the error.
    """
    while raw_scan.kind != WIRE:
        plan = plan_events if raw_scan.kind == TYPED else plan_decoded_events
        planned = plan(
            raw_scan.header,
            raw_scan.records,
            session_id=session_id,
            known_types=known_types,
            normalize=normalize,
        )
        if planned is not None:
            return _loaded(raw_scan, *planned)
        raw_scan = exact_scan() if raw_scan.kind == TYPED else as_wire_scan(raw_scan)
    return loaded_result(
        raw_scan, session_id=session_id, known_types=known_types, normalize=normalize
    )


# -- the load pipeline (docs/format/persistence.md §5) ---------------------------------------------


def _corrupt(exc: KernelError, what: str) -> CorruptLog:
    return CorruptLog(f"{what}: {exc}", index=exc.index, seq=exc.seq, rule=exc.rule)


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
        log = SessionLog._restore_parsed([*records, *closers], header=admitted)
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
            recovered = events_of_records(raw_scan.records[raw_scan.recovered_from :])
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


def events_of_records(records: Iterable[dict[str, Any]]) -> tuple[Event, ...]:
    """Events built from scanned wire dicts (an invalid envelope is `CorruptLog`)."""
    out = []
    for index, obj in enumerate(records):
        try:
            out.append(event_from_wire(obj, f"stored event at index {index}", lossless=False))
        except KernelError as exc:
            raise CorruptLog(
                f"stored event at index {index} is not a valid event: {exc}", index=index
            ) from exc
    return tuple(out)


def option_flag(value: Any, name: str) -> bool:
    """A boolean option, or a named `KernelError` (never a truthy string taken for True)."""
    if type(value) is not bool:
        raise KernelError(f"{name} must be True or False, got {summary(value)}")
    return value
