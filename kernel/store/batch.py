"""The checks every store runs on an append batch before touching storage (§1).

Pure. A batch is snapshotted (a tuple of immutable `Event`s), each event's
envelope and values are checked (R2, R1), retired vocabulary is refused (R3),
and the seqs must continue the stored log contiguously (R4, `SeqMismatch`).
What the store's own loader would refuse or could not repair is refused here, before
it is acknowledged (Decision 15): a payload of the wrong shape (R10-R12), surface
metadata or citations an append may not carry (R5-R7), a type outside the store's
known types that is not ignorable, a tool-call block whose id the closers could not
answer (R14). A replace is judged against the surface of the log it continues
(R7f, R8, R9): `check_replacements`, which the store runs over the stored events when
`needs_stored_surface` says the batch holds one.
Strings a store files by (ids, header fields, types) are held in their
canonical spelling (`canonical_text`), the one every store reads back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import attrs
import msgspec

from kernel.admission.admit import check_loadable
from kernel.admission.envelope import check_surface_marker
from kernel.admission.payloads import check_legacy, check_payload
from kernel.admission.provenance import check_citations
from kernel.errors import (
    InvalidEnvelope,
    KernelError,
    NotLosslessJson,
    SeqMismatch,
    SessionHeaderError,
    SurfaceMarkerError,
)
from kernel.folds.surface import surface_state_of
from kernel.values.events import DEFAULT_KNOWN_TYPES, Append, Event, Replace, SessionHeader
from kernel.values.json import admit_json, canonical_text, checked_as, safe_int, summary
from kernel.wire.codec import (
    check_envelope,
    event_to_wire,
    header_from_json,
    header_to_json,
    iter_events,
    parse_source_seqs,
)

__all__ = (
    "admit_stored_header",
    "canonical_text",
    "check_batch",
    "check_replacements",
    "needs_stored_surface",
)


def _canonical_type(event: Event) -> Event:
    canonical = canonical_text(event.type)
    if canonical is event.type:
        return event
    return msgspec.structs.replace(event, type=canonical)


def check_batch(
    events: Iterable[Event],
    next_seq: int | None = None,
    *,
    known_types: frozenset[str] = DEFAULT_KNOWN_TYPES,
) -> tuple[Event, ...]:
    """The batch as a tuple, or a KernelError naming the first bad event.

    `next_seq` is the seq the stored log expects next (its length); None checks
    only that the batch is contiguous from its own first seq (the store compares
    that seq with the stored log inside its transaction). `known_types` is the
    vocabulary the store's loader reads without `ignorable`.
    """
    # type(), not isinstance: a caller's value may claim any __class__
    batch = tuple(_canonical_type(e) if type(e) is Event else e for e in iter_events(events))
    if next_seq is None and batch and type(batch[0]) is Event:
        next_seq = batch[0].seq if type(batch[0].seq) is int else 0
    for index, event in enumerate(batch):
        if type(event) is not Event:
            raise InvalidEnvelope(
                f"batch event at index {index}: {type(event).__name__} is not an Event",
                index=index,
            )
        try:
            _check_event(event, f"batch event at index {index}", known_types)
        except KernelError as exc:
            if exc.index is None:
                exc.index = index
            raise
        expected = (next_seq or 0) + index
        if event.seq != expected:
            raise SeqMismatch(
                f"batch event at index {index}: seq {event.seq} is not contiguous; "
                f"expected {expected} (R4)",
                index=index,
                seq=event.seq,
            )
    return batch


def _check_event(event: Event, where: str, known_types: frozenset[str]) -> None:
    """What admission checks of one event without the log: R1-R3, R5-R7 for an append,
    R10-R12 and R14, in the order `SessionLog.append` checks them."""
    check_legacy(event, where)
    try:
        plain = admit_json(event.data)
    except NotLosslessJson as exc:
        raise NotLosslessJson(f"{where}: data {exc} (R1)") from None
    op, sources = event.surface_op, event.source_event_seqs
    if op is not None and type(op) is not Append and type(op) is not Replace:
        raise SurfaceMarkerError(f"{where}: invalid surface_op {summary(op)} (R5)")
    if type(event.ignorable) is not bool:
        raise InvalidEnvelope(f"{where}: ignorable must be a bool (R2)")
    check_envelope(event_to_wire(event), where)
    if checked_as(event.data) != event.type:  # a loaded payload was checked for its type
        check_payload(event.type, plain, where)
    check_loadable(event.type, plain, event.ignorable, known_types, where)
    if type(op) is Replace:
        start, end = safe_int(op.start), safe_int(op.end)
        if start is None or end is None or start < 0 or end < 0:
            raise SurfaceMarkerError(f"{where}: invalid replace surfaceOp {summary(op)} (R6)")
    if sources is not None:
        parse_source_seqs(list(sources), where)
    check_surface_marker(event.type, op is not None, sources is not None, where)
    if type(op) is Append:
        check_citations(event.type, event.seq, sources, (), where)


def needs_stored_surface(batch: Sequence[Event]) -> bool:
    """Whether a checked batch holds a replace, which only the stored surface can judge."""
    return any(type(event.surface_op) is Replace for event in batch)


def check_replacements(stored: Sequence[Event], batch: Sequence[Event]) -> None:
    """R7-R9 of a checked batch planned over the surface of `stored`, the stored log it
    continues (seqs 0 to `len(stored) - 1`, as its loader gave them; `()` for the first
    batch): a replace's range must lie on that surface as the batch's earlier events left
    it, cite every node it shadows, and rewrite a result only in its content.

    Raises the error `SessionLog.append` would, its `index` the batch position.
    """
    state = surface_state_of(stored)
    size = len(stored)

    def lookup(seq: int) -> Event:
        return stored[seq] if seq < size else batch[seq - size]

    for index, event in enumerate(batch):
        op = event.surface_op
        if op is None:
            continue
        try:
            state = state.plan(
                event.type,
                event.seq,
                op,
                event.source_event_seqs,
                event.data,
                lookup,
                f"batch event at index {index}",
            )
        except KernelError as exc:
            if exc.index is None:
                exc.index = index
            raise


_HEADER_TEXTS: Final = ("id", "cwd", "parent_session", "origin", "agent_preset")


def admit_stored_header(header: SessionHeader | Mapping[str, Any]) -> SessionHeader:
    """Admission §6 for a header given to `create`; a store also needs a non-empty id.

    The header's strings are returned in their canonical spelling (`canonical_text`).
    """
    if isinstance(header, SessionHeader):
        header = header_to_json(header)
    admitted = header_from_json(header)
    if not admitted.id:
        raise SessionHeaderError("a stored session needs a non-empty id (H4)")
    changes: dict[str, Any] = {
        name: canonical_text(value)
        for name in _HEADER_TEXTS
        if type(value := getattr(admitted, name)) is str and canonical_text(value) is not value
    }
    return attrs.evolve(admitted, **changes) if changes else admitted
