"""Wire codec: events and session headers to and from their camelCase JSON objects.

The rules it applies live in `kernel.admission` (R2 and the surfaceOp shape of
R5/R6 in `envelope`, the elements of R7 in `provenance`, H1-H12 in `header`);
their names are also importable from here, where the readers of wire objects
have always found them. `event_from_json` runs them standalone. `check_event`
is the same rules for an `Event` a caller hands in: msgspec does not check
field types, so an `Event` may hold anything until it is checked.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, cast

from kernel.admission.envelope import (
    ENVELOPE_KEYS,
    are_safe_seqs,
    check_envelope,
    is_safe_seq,
    parse_surface_op,
    row_tag_message,
)
from kernel.admission.header import admit_header as header_from_json
from kernel.admission.provenance import (
    check_cited_tuple,
    expand_ranges,
    has_ranges,
    parse_source_seqs,
)
from kernel.errors import (
    InvalidEnvelope,
    KernelError,
    NotLosslessJson,
    SessionHeaderError,
    SurfaceMarkerError,
)
from kernel.values.events import (
    APPEND,
    LIVE_ORDER,
    ROW_TAGS,
    Append,
    Event,
    Replace,
    SessionHeader,
    wire_order_of,
)
from kernel.values.json import (
    MAX_SAFE_INTEGER,
    FrozenArray,
    FrozenObject,
    admit_json,
    admit_plain,
    summary,
    thaw,
    view,
)

__all__ = (
    "event_from_json",
    "event_to_json",
    "event_to_wire",
    "header_from_json",
    "header_to_json",
    "check_envelope",
    "row_tag_message",
    "parse_surface_op",
    "surface_op_wire",
    "parse_source_seqs",
    "has_ranges",
    "expand_ranges",
    "ranged_spelling",
    "event_from_wire",
    "ENVELOPE_KEYS",
    "interned_order",
    "EVENT_DATA_TYPES",
    "check_event",
    "check_events",
    "event_sequence",
    "iter_events",
    "ill_typed_events_reported",
)

_ORDERS: dict[tuple[str, ...], tuple[str, ...]] = {LIVE_ORDER: LIVE_ORDER}


def interned_order(obj: Mapping[str, Any]) -> tuple[str, ...]:
    """The member order of a wire object, shared with every other event of that order."""
    order = tuple(obj)
    return _ORDERS.setdefault(order, order) if len(_ORDERS) < 256 else order


def ranged_spelling(seqs: Sequence[int]) -> list[Any]:
    """The ranged spelling of citations (docs/format/persistence.md §2.5).

    Runs of three or more consecutive seqs become `[first, last]`, when the list is
    strictly increasing.

    >>> ranged_spelling([5, 6, 7, 9, 11, 12])
    [[5, 7], 9, 11, 12]
    >>> ranged_spelling([3, 1, 2])
    [3, 1, 2]
    """
    if any(b <= a for a, b in itertools.pairwise(seqs)):
        return list(seqs)  # not strictly increasing: written verbatim
    out: list[Any] = []
    i, n = 0, len(seqs)
    while i < n:
        j = i
        while j + 1 < n and seqs[j + 1] == seqs[j] + 1:
            j += 1
        if j - i >= 2:
            out.append([seqs[i], seqs[j]])
        else:
            out.extend(seqs[i : j + 1])
        i = j + 1
    return out


def event_from_wire(obj: dict[str, Any], where: str, *, lossless: bool) -> Event:
    """Build an `Event` from a plain wire dict the kernel owns (no copy); R2, R5/R6, R7a/c."""
    event_type, seq, time, ignorable = check_envelope(obj, where)
    surface_op = parse_surface_op(obj["surfaceOp"], where) if "surfaceOp" in obj else None
    sources = parse_source_seqs(obj["sourceEventSeqs"], where) if "sourceEventSeqs" in obj else None
    return Event(
        type=event_type,
        seq=seq,
        time=time,
        data=view(obj["data"], lossless=lossless),
        surface_op=surface_op,
        source_event_seqs=sources,
        ignorable=ignorable,
        wire_order=interned_order(obj),
    )


def event_from_json(obj: Any) -> Event:
    """Decode one wire event: R1 over the whole object, then the envelope rules.

    Args:
        obj: a wire event object (plain or frozen JSON), camelCase keys as on disk.

    Returns:
        The `Event`, holding a frozen copy of the object's values.

    Raises:
        NotLosslessJson: a value is not lossless JSON (R1).
        InvalidEnvelope: the envelope's keys or fields break R2.
        SurfaceMarkerError: `surfaceOp` breaks R5/R6.
        ProvenanceError: `sourceEventSeqs` breaks R7.

    >>> event_from_json({"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}}).seq
    0
    """
    event = _common_event(obj)
    if event is not None:
        return event
    admitted = admit_json(obj)
    if type(admitted) is not dict:
        raise InvalidEnvelope("an event must be a JSON object (R2)")
    return event_from_wire(admitted, "event", lossless=True)


def _common_event(obj: Any) -> Event | None:
    """`event_from_json(obj)` of a wire dict in the common shape, or None for any other.

    The common shape: string keys, the four required members valid as they are (an
    ASCII type that is no row tag, safe integer seq and time, a payload object
    `admit_plain` copies) and at most `"surfaceOp": "append"` and a list of seqs as
    `sourceEventSeqs` besides. Nothing in such an envelope can fail R1 or R2, so only
    the payload is copied, where the general path copies the whole object and then
    reads its envelope again. Anything else is left to the general path, which raises
    its own errors.
    """
    if type(obj) is not dict:
        return None
    size = len(obj)
    if size < 4 or size > 6:  # the required members, a marker and citations
        return None
    for key in obj:
        if type(key) is not str:  # `get` finds a str subclass key, which R1 refuses
            return None
    op = sources = None
    if size > 4:
        found = 4
        if "surfaceOp" in obj:
            op = obj["surfaceOp"]
            if type(op) is not str or op != "append":
                return None
            op = APPEND
            found += 1
        if "sourceEventSeqs" in obj:
            cited = obj["sourceEventSeqs"]
            if type(cited) is not list or not are_safe_seqs(sources := tuple(cited)):
                return None
            found += 1
        if found != size:
            return None
    event_type, seq, time, data = obj.get("type"), obj.get("seq"), obj.get("time"), obj.get("data")
    if not (
        type(event_type) is str
        and event_type
        and event_type.isascii()
        and event_type not in ROW_TAGS
        and type(seq) is int
        and 0 <= seq <= MAX_SAFE_INTEGER
        and type(time) is int
        and -MAX_SAFE_INTEGER <= time <= MAX_SAFE_INTEGER
        and type(data) is dict
    ):
        return None
    copy = admit_plain(data)
    if copy is None:
        return None
    return Event(
        event_type, seq, time, FrozenObject(copy, True), op, sources, False, interned_order(obj)
    )


def surface_op_wire(op: Any) -> Any:
    """The wire spelling of a well-typed surface op: `"append"` or the replace object."""
    if type(op) is Append:  # APPEND, or a copy of it that pickling made
        return "append"
    return {"op": "replace", "start": op.start, "end": op.end}


def event_to_wire(event: Event, where: str = "event") -> dict[str, Any]:
    """The wire object with `data` left frozen (for encoding; not for callers to mutate).

    The event is checked first (`check_event`); `where` names it in the error.
    """
    check_event(event, where)
    present: dict[str, Any] = {
        "type": event.type,
        "seq": event.seq,
        "time": event.time,
        "data": event.data,
    }
    if event.surface_op is not None:
        present["surfaceOp"] = surface_op_wire(event.surface_op)
    if event.source_event_seqs is not None:
        present["sourceEventSeqs"] = list(event.source_event_seqs)
    if event.ignorable:
        present["ignorable"] = True
    try:
        out = {key: present[key] for key in wire_order_of(event) if key in present}
    except Exception:  # a caller's Event built with an order that is not a tuple of keys
        raise InvalidEnvelope(
            f"{where} (seq {summary(event.seq)}): wire_order must be a tuple of envelope key "
            f"strings, not {summary(event.wire_order)} (R2)"
        ) from None
    if len(out) != len(present):
        for key, value in present.items():
            out.setdefault(key, value)
    return out


def event_to_json(event: Event) -> dict[str, Any]:
    """The plain wire object of an event (camelCase keys; a fresh, caller-owned copy)."""
    wire = event_to_wire(event)
    wire["data"] = thaw(event.data)
    return wire


# -- events handed in by callers ----------------------------------------------------------------

_NONE: Final = type(None)
EVENT_DATA_TYPES: Final = frozenset({FrozenObject, FrozenArray, str, bool, _NONE, int, float})
"""What `Event.data` may be: a frozen container, or a JSON scalar (numbers as parsed)."""


def check_event(item: Any, where: str = "event", index: int | None = None) -> Event:
    """`item` itself if it is an `Event` whose fields have the types events are built with.

    Otherwise the error for the first wrong field, by the rule its wire spelling
    breaks: `InvalidEnvelope` (not an `Event`; `type` not a non-empty string, `seq`
    not a non-negative safe integer, `time` not a finite number, `ignorable` not a
    bool: R2), `NotLosslessJson` (`data` not JSON: R1), `SurfaceMarkerError`
    (`surface_op` not `APPEND`, a `Replace` of non-negative safe integers or None:
    R5, R6), `ProvenanceError` (`source_event_seqs` not None or a tuple of
    non-negative safe integers: R7a, R7c). `index` is set on the error.

    This is what every function that takes events relies on, not admission: an
    event with a fractional `time` is one a writer stores verbatim (docs/format/events.md
    §7.2), and whether an event fits its log (R2's safe-integer time, R4-R12) is
    for `SessionLog` to decide.

    >>> check_event(Event("turn/start", 0, 1, {"turn": 1})).seq
    0
    """
    if type(item) is not Event:
        raise InvalidEnvelope(f"{where} is a {type(item).__name__}, not an Event (R2)", index=index)
    event_type, seq, time = item.type, item.seq, item.time
    op, sources = item.surface_op, item.source_event_seqs
    if (
        type(event_type) is str
        and event_type
        and type(seq) is int
        and 0 <= seq <= MAX_SAFE_INTEGER
        and type(time) is int
        and -MAX_SAFE_INTEGER <= time <= MAX_SAFE_INTEGER
        and type(item.ignorable) is bool
        and type(item.data) in EVENT_DATA_TYPES
        and (
            op is None
            or type(op) is Append
            or (type(op) is Replace and is_safe_seq(op.start) and is_safe_seq(op.end))
        )
        and (sources is None or are_safe_seqs(sources))
    ):
        return item  # the common case in one expression; the checks below name the field
    try:
        _check_fields(item, f"{where} (seq {summary(seq)})")
    except KernelError as exc:
        exc.index = index
        raise
    return item


def _check_fields(event: Event, where: str) -> None:
    event_type = event.type
    if type(event_type) is not str or not event_type:
        raise InvalidEnvelope(f"{where}: type must be a non-empty string (R2)")
    seq = event.seq
    if type(seq) is not int or not 0 <= seq <= MAX_SAFE_INTEGER:
        raise InvalidEnvelope(f"{where}: seq must be a non-negative safe integer (R2)")
    time = event.time
    if type(time) is not int and (type(time) is not float or not math.isfinite(time)):
        raise InvalidEnvelope(f"{where}: time must be a number, got {summary(time)} (R2)", seq=seq)
    if type(event.ignorable) is not bool:
        raise InvalidEnvelope(f"{where}: ignorable must be a bool (R2)", seq=seq)
    if type(event.data) not in EVENT_DATA_TYPES:
        raise NotLosslessJson(
            f"{where}: data is a {type(event.data).__name__}, not a JSON value (R1)", seq=seq
        )
    op = event.surface_op
    if type(op) is Replace:
        start, end = op.start, op.end
        if not all(type(x) is int and 0 <= x <= MAX_SAFE_INTEGER for x in (start, end)):
            raise SurfaceMarkerError(
                f"{where}: invalid replace surface_op, start {summary(start)} and "
                f"end {summary(end)} must be non-negative safe integers (R6)",
                seq=seq,
            )
    elif op is not None and type(op) is not Append:
        raise SurfaceMarkerError(
            f"{where}: surface_op must be APPEND, a Replace or None, not {summary(op)} (R5)",
            seq=seq,
        )
    check_cited_tuple(event.source_event_seqs, where, seq)


def event_sequence(events: Iterable[Event]) -> Sequence[Event]:
    """`events` as a sequence: itself when it is one, else a list of its items.

    Raises `InvalidEnvelope` when `events` is not iterable. The items are not checked.
    """
    if issubclass(type(events), Sequence):  # type(): a value may claim any __class__
        return cast("Sequence[Event]", events)
    return list(iter_events(events))


def iter_events(events: Iterable[Any]) -> Iterator[Any]:
    """`iter(events)`, or `InvalidEnvelope` when `events` is not iterable (of events or records)."""
    try:
        return iter(events)
    except TypeError:
        raise InvalidEnvelope(
            f"events must be an iterable of Event, not a {type(events).__name__} (R2)"
        ) from None


def check_events(events: Iterable[Any], label: str = "event") -> Iterator[Event]:
    """Each item of `events` through `check_event`, naming its index, as it is reached."""
    for index, item in enumerate(iter_events(events)):
        yield check_event(item, f"{label} at index {index}", index)


@contextlib.contextmanager
def ill_typed_events_reported(events: Sequence[Any]) -> Iterator[None]:
    """Turn a failure inside the block into the `check_event` error of the first bad event.

    For the folds over whole logs, which read events without checking each one
    (the checks would cost as much as the fold; see
    docs/rfc/implemented/bug-fix/2026-12-01-only-kernel-errors-escape.md): when
    the block raises anything but a `KernelError`, the events are checked, and
    the first ill-typed one is reported instead. When all are well typed the
    original exception stands: that is a kernel bug, not bad input.
    """
    try:
        yield
    except KernelError:
        raise
    except Exception:
        error = _first_ill_typed(events)
        if error is None:
            raise
        raise error from None


def _first_ill_typed(events: Sequence[Any]) -> KernelError | None:
    try:
        for _ in check_events(events):
            pass
    except KernelError as exc:
        return exc
    return None


# -- session header -----------------------------------------------------------------------------

_HEADER_FIELDS = (
    ("version", "version"),
    ("id", "id"),
    ("createdAt", "created_at"),
    ("cwd", "cwd"),
    ("parentSession", "parent_session"),
    ("seedLength", "seed_length"),
    ("origin", "origin"),
    ("delegationDepth", "delegation_depth"),
    ("agentPreset", "agent_preset"),
)


def header_to_json(header: SessionHeader) -> dict[str, Any]:
    """The in-memory header record as a plain object (absent fields omitted).

    `SessionHeader` does not check its fields, so the record is admitted before it
    is returned: `SessionHeaderError` when it breaks a rule of docs/format/admission.md §6.
    """
    if type(header) is not SessionHeader:
        raise SessionHeaderError(
            f"a session header must be a SessionHeader, not a {type(header).__name__}"
        )
    out: dict[str, Any] = {}
    for wire_key, attr in _HEADER_FIELDS:
        value = getattr(header, attr)
        if value is not None:
            out[wire_key] = value
    header_from_json(out)
    return out
