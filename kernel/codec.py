"""Wire codec: events and session headers to and from their camelCase JSON objects.

The envelope checks here (R2, the surfaceOp shape of R5/R6, the element
checks of R7) are shared with admission, which calls them in the order
docs/format/admission.md §3 fixes. `event_from_json` runs them standalone. `check_event`
is the same rules for an `Event` a caller hands in: msgspec does not check
field types, so an `Event` may hold anything until it is checked.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

from kernel.errors import (
    InvalidEnvelope,
    KernelError,
    NotLosslessJson,
    ProvenanceError,
    SessionHeaderError,
    SurfaceMarkerError,
)
from kernel.events import (
    APPEND,
    LIVE_ORDER,
    ROW_TAGS,
    Append,
    Event,
    Replace,
    SessionHeader,
    wire_order_of,
)
from kernel.json import (
    MAX_SAFE_INTEGER,
    FrozenArray,
    FrozenObject,
    admit_json,
    raw,
    safe_int,
    summary,
    thaw,
    view,
)
from kernel.pathtext import is_absolute_path

__all__ = (
    "event_from_json",
    "event_to_json",
    "event_to_wire",
    "header_from_json",
    "header_to_json",
    "check_envelope",
    "row_tag_message",
    "parse_surface_op",
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

ENVELOPE_KEYS = frozenset(
    {"type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs", "ignorable"}
)

_ORDERS: dict[tuple[str, ...], tuple[str, ...]] = {LIVE_ORDER: LIVE_ORDER}


def interned_order(obj: Mapping[str, Any]) -> tuple[str, ...]:
    """The member order of a wire object, shared with every other event of that order."""
    order = tuple(obj)
    return _ORDERS.setdefault(order, order) if len(_ORDERS) < 256 else order


def row_tag_message(where: str, event_type: str) -> str:
    """The R2 refusal of an event typed like a chunk row, which no stored record could hold."""
    return (
        f"{where}: type {summary(event_type)} is a chunk-row tag; a stored record with it is read "
        "as a packed row, never as an event (R2)"
    )


def check_envelope(obj: Any, where: str) -> tuple[str, int, int, bool]:
    """R2: return `(type, seq, time, ignorable)` of a wire event, seq/time normalized to int."""
    if type(obj) is not dict and not isinstance(obj, Mapping):
        raise InvalidEnvelope(f"{where}: an event must be a JSON object (R2)")
    try:
        unknown_keys = not obj.keys() <= ENVELOPE_KEYS
    except Exception:  # a key whose comparison raises (a caller's str subclass)
        raise InvalidEnvelope(f"{where}: envelope keys must be plain strings (R2)") from None
    if unknown_keys:
        extra = [k for k in obj if type(k) is not str or k not in ENVELOPE_KEYS]
        raise InvalidEnvelope(f"{where}: unknown envelope keys {summary(extra)} (R2)")
    event_type = obj.get("type")
    if type(event_type) is not str or not event_type:
        raise InvalidEnvelope(f"{where}: type must be a non-empty string (R2)")
    if event_type in ROW_TAGS:
        raise InvalidEnvelope(row_tag_message(where, event_type))
    seq = obj.get("seq")
    if type(seq) is not int or seq > MAX_SAFE_INTEGER:
        seq = safe_int(seq)
    if seq is None or seq < 0:
        raise InvalidEnvelope(
            f"{where}: seq must be a non-negative safe integer, got {summary(obj.get('seq'))} (R2)"
        )
    time = obj.get("time")
    if type(time) is not int or not -MAX_SAFE_INTEGER <= time <= MAX_SAFE_INTEGER:
        time = safe_int(time)
    if time is None:
        raise InvalidEnvelope(
            f"{where}: time must be a safe integer, got {summary(obj.get('time'))} (R2)"
        )
    if "data" not in obj:
        raise InvalidEnvelope(f"{where}: data is required (null is allowed) (R2)")
    ignorable = False
    if "ignorable" in obj:
        if obj["ignorable"] is not True:
            raise InvalidEnvelope(f"{where}: ignorable may only be true (R2)")
        ignorable = True
    return event_type, seq, time, ignorable


def parse_surface_op(value: Any, where: str) -> Any:
    """R5 (value) and R6: `APPEND` or a `Replace` from a wire `surfaceOp`."""
    if value == "append" and type(value) is str:
        return APPEND
    if not isinstance(value, Mapping):
        raise SurfaceMarkerError(f"{where}: invalid surfaceOp {summary(value)} (R5)")
    if set(value) != {"op", "start", "end"} or value["op"] != "replace":
        raise SurfaceMarkerError(f"{where}: invalid replace surfaceOp {summary(value)} (R6)")
    start, end = safe_int(value["start"]), safe_int(value["end"])
    if start is None or end is None or start < 0 or end < 0:
        raise SurfaceMarkerError(f"{where}: invalid replace surfaceOp {summary(value)} (R6)")
    return Replace(start, end)


def parse_source_seqs(value: Any, where: str) -> tuple[int, ...]:
    """R7a and R7c: the citations as a tuple of non-negative ints."""
    if type(value) not in (list, tuple, FrozenArray):
        raise ProvenanceError(f"{where}: sourceEventSeqs must be an array (R7a)")
    items = raw(value)
    if all(type(s) is int for s in items) and (
        not items or (min(items) >= 0 and max(items) <= MAX_SAFE_INTEGER)
    ):
        return tuple(items)
    seqs = []
    for item in items:
        s = safe_int(item)
        if s is None or s < 0:
            raise ProvenanceError(
                f"{where}: sourceEventSeqs element {summary(item)} is not a non-negative "
                "safe int (R7c)"
            )
        seqs.append(s)
    return tuple(seqs)


def has_ranges(cited: Any) -> bool:
    """Whether a stored `sourceEventSeqs` uses ranges (docs/format/persistence.md §2.5)."""
    return type(cited) is list and list in map(type, cited)


def expand_ranges(cited: list[Any], seq: Any) -> list[int] | str:
    """A stored ranged `sourceEventSeqs` expanded (docs/format/persistence.md §2.5), or why not.

    Each element is a seq or a `[start, end]` pair (`start <= end`); the expansion
    must be strictly increasing and at most the event's own `seq` long, which bounds
    the work before any range is expanded. The reason names rule R7c.

    >>> expand_ranges([[5, 7], 9, 11, 12], 20)
    [5, 6, 7, 9, 11, 12]
    >>> expand_ranges([[7, 5]], 20)
    'sourceEventSeqs range [7, 5] runs backwards (R7c)'
    """
    budget = safe_int(seq)
    if budget is None or budget < 0:
        return f"sourceEventSeqs with ranges need the event's seq, got {summary(seq)} (R7c)"
    out: list[int] = []
    last = -1
    for item in cited:
        if type(item) is list:
            if len(item) != 2:
                return f"sourceEventSeqs element {summary(item)} is not a [start, end] range (R7c)"
            start, end = safe_int(item[0]), safe_int(item[1])
            if start is None or end is None or start < 0:
                return (
                    f"sourceEventSeqs range {summary(item)} does not hold two non-negative "
                    "safe ints (R7c)"
                )
            if start > end:
                return f"sourceEventSeqs range {summary(item)} runs backwards (R7c)"
        else:
            start = end = safe_int(item)
            if start is None or start < 0:
                return (
                    f"sourceEventSeqs element {summary(item)} is not a non-negative safe int (R7c)"
                )
        assert end is not None  # both ends were checked above
        if start <= last:
            return (
                f"sourceEventSeqs with ranges must expand to a strictly increasing list; "
                f"{start} follows {last} (R7c)"
            )
        if len(out) + (end - start + 1) > budget:
            return (
                f"sourceEventSeqs expands to more citations than the event's seq ({budget}) (R7c)"
            )
        out.extend(range(start, end + 1))
        last = end
    return out


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

    >>> event_from_json({"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}}).seq
    0
    """
    admitted = admit_json(obj)
    if type(admitted) is not dict:
        raise InvalidEnvelope("an event must be a JSON object (R2)")
    return event_from_wire(admitted, "event", lossless=True)


def _surface_op_wire(op: Any) -> Any:
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
        present["surfaceOp"] = _surface_op_wire(event.surface_op)
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
    if (
        type(event_type) is str
        and event_type
        and type(seq) is int
        and 0 <= seq <= MAX_SAFE_INTEGER
        and type(time) is int
        and -MAX_SAFE_INTEGER <= time <= MAX_SAFE_INTEGER
        and item.surface_op is None
        and item.source_event_seqs is None
        and type(item.ignorable) is bool
        and type(item.data) in EVENT_DATA_TYPES
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
    sources = event.source_event_seqs
    if sources is not None:
        if type(sources) is not tuple:
            raise ProvenanceError(f"{where}: source_event_seqs must be a tuple (R7a)", seq=seq)
        for source in sources:
            if type(source) is not int or not 0 <= source <= MAX_SAFE_INTEGER:
                raise ProvenanceError(
                    f"{where}: source_event_seqs element {summary(source)} is not a "
                    "non-negative safe integer (R7c)",
                    seq=seq,
                )


def event_sequence(events: Iterable[Event]) -> Sequence[Event]:
    """`events` as a sequence: itself when it is one, else a list of its items.

    Raises `InvalidEnvelope` when `events` is not iterable. The items are not checked.
    """
    if isinstance(events, Sequence):
        return events
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


def _non_negative(value: Any) -> int | None:
    v = safe_int(value)
    return v if v is not None and v >= 0 else None


def header_from_json(obj: Any, *, session_id: str | None = None) -> SessionHeader:
    """Admit an in-memory header record (docs/format/admission.md §6, H1-H12), minus unknown keys.

    `session_id`, when given, must equal the header's `id` (H4).
    """
    if type(obj) is not FrozenObject:
        try:
            obj = admit_json(obj)
        except NotLosslessJson as exc:
            raise SessionHeaderError(f"session header is not lossless JSON: {exc} (H1)") from exc
    if not isinstance(obj, Mapping):
        raise SessionHeaderError("session header must be a JSON object (H2)")
    if not (obj.get("version") == 0 and type(obj.get("version")) in (int, float)):
        raise SessionHeaderError(
            f"session header version must be 0, got {summary(obj.get('version'))} (H3)"
        )
    header_id = obj.get("id")
    if type(header_id) is not str or (session_id is not None and header_id != session_id):
        raise SessionHeaderError(
            f"session header id {summary(header_id)} does not match session "
            f"{summary(session_id)} (H4)"
        )
    created_at = _non_negative(obj.get("createdAt"))
    if created_at is None:
        raise SessionHeaderError(
            f"createdAt must be a non-negative safe integer, got {summary(obj.get('createdAt'))} "
            "(H5)"
        )
    cwd = obj.get("cwd")
    if "cwd" in obj:
        if type(cwd) is not str:
            raise SessionHeaderError("cwd must be a string (H6)")
        if not is_absolute_path(cwd):
            raise SessionHeaderError(f"cwd {summary(cwd)} is not an absolute path (H7)")
    parent = obj.get("parentSession")
    if "parentSession" in obj and type(parent) is not str:
        raise SessionHeaderError("parentSession must be a string (H8)")
    seed_length = _non_negative(obj.get("seedLength"))
    if "seedLength" in obj and seed_length is None:
        raise SessionHeaderError("seedLength must be a non-negative safe integer (H9)")
    origin = obj.get("origin")
    if "origin" in obj and origin != "subagent":
        raise SessionHeaderError('origin must be "subagent" (H10)')
    depth = _non_negative(obj.get("delegationDepth"))
    if "delegationDepth" in obj and depth is None:
        raise SessionHeaderError("delegationDepth must be a non-negative safe integer (H11)")
    preset = obj.get("agentPreset")
    if "agentPreset" in obj and type(preset) is not str:
        raise SessionHeaderError("agentPreset must be a string (H12)")
    return SessionHeader(
        id=header_id,
        created_at=created_at,
        version=0,
        cwd=cwd,
        parent_session=parent,
        seed_length=seed_length,
        origin=origin,
        delegation_depth=depth,
        agent_preset=preset,
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
