"""Admitting one event (docs/format/admission.md §3): R14, and the seed/restore pipeline.

`admit_wire_event` is the seed/restore pipeline for one event; the append
pipeline lives in `SessionLog.append`, built from the same rule functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kernel.admission.envelope import (
    are_safe_seqs,
    check_envelope,
    check_surface_marker,
    is_safe_seq,
    parse_surface_op,
)
from kernel.admission.payloads import (
    _nonempty_str,
    check_legacy_reason,
    check_legacy_type,
    check_payload,
)
from kernel.admission.provenance import PRESENT_NULL
from kernel.errors import (
    InvalidEnvelope,
    KernelError,
    MessageShapeError,
    NotLosslessJson,
    SeqMismatch,
    UnknownEventType,
)
from kernel.values.events import (
    APPEND,
    ASSISTANT_MESSAGE,
    LEGACY_TYPES,
    REQUEST_HEADER,
    ROW_TAGS,
    SURFACE_TYPES,
    Event,
    Replace,
)
from kernel.values.json import (
    MAX_SAFE_INTEGER,
    FrozenArray,
    FrozenObject,
    admit_json,
    canonical_text,
    known_lossless,
    raw,
    summary,
)
from kernel.wire.codec import EVENT_DATA_TYPES

__all__ = (
    "check_loadable",
    "WireEvent",
    "admit_parsed",
    "admit_wire_event",
    "admitted_as_it_is",
)

# -- R14: what the API admits, a reader with the same known types loads --------------------------


def check_loadable(
    event_type: str,
    data: Any,
    ignorable: bool,
    known_types: frozenset[str],
    where: str,
    index: int | None = None,
) -> None:
    """R14 on append and seed: refuse what a store would acknowledge and its loader refuse.

    R14a: a type outside `known_types` must be ignorable, or the loader refuses the
    log (`UnknownEventType`). R14b: every tool-call block of an `assistant/message`
    has a non-empty string `id`, or a crash inside its step leaves a call the closers
    cannot answer (`MessageShapeError`). The restore path takes what a loader gave.
    """
    if not ignorable and event_type not in known_types:
        raise UnknownEventType(
            f"{where}: event type {summary(event_type)} is neither a known type nor "
            "ignorable, so a reader with the same known types would refuse the log (R14a)",
            index=index,
            seq=index,
        )
    if event_type != ASSISTANT_MESSAGE:
        return
    data = raw(data)
    message = raw(data.get("message")) if type(data) is dict else None
    content = raw(message.get("content")) if type(message) is dict else None
    for block in content if type(content) is list else ():
        block = raw(block)
        if type(block) is dict and block.get("type") == "tool-call":
            call_id = raw(block.get("id"))
            if not _nonempty_str(call_id):
                raise MessageShapeError(
                    f"{where}: assistant/message tool-call block id {summary(call_id)} is not "
                    "a non-empty string, so a crash before its result could not be closed (R14b)",
                    index=index,
                )


# -- restore: values as a JSON parser gives them ------------------------------------------------

_PARSED_SCALARS = frozenset({str, bool, type(None), int, float})


def admit_parsed(value: Any, where: str) -> Any:
    """What restore admits in place of R1: a value a JSON parser can give, copied.

    Restore takes numbers as parsed (docs/format/admission.md §3.2: `-0.0`, infinities and
    integers of any size stay), but a value no parser gives (a key that is not a
    string, a tuple, a cycle, NaN, any other object) is `NotLosslessJson`: the
    writer could not spell it. Returns a private copy of plain containers (the
    caller keeps theirs); frozen views inside are the kernel's own and are
    shared. Iterative: depth is bounded by memory.

    >>> admit_parsed({"n": -0.0, "x": [float("inf")]}, "event")
    {'n': -0.0, 'x': [inf]}
    """
    t = type(value)
    if t is FrozenObject or t is FrozenArray:
        return value._raw
    if t is not dict and t is not list:
        return _parsed_scalar(value, where)
    copy = _parsed_copy(value, 0)
    return _walked_copy(value, where) if copy is None else copy


_PARSED_DEPTH: Final = 16


def _parsed_copy(value: dict[str, Any] | list[Any], depth: int) -> Any:
    """`admit_parsed`'s copy of a value a parser gives, by recursion, or None.

    The common payload (a few levels of dicts and lists of strings, numbers, booleans
    and nulls, no NaN) is copied by recursion, as `kernel.values.json.admit_plain`
    copies for R1, at about a third of the cost of the walk. Anything else (deeper, so
    perhaps a cycle; a frozen view; a value to refuse) answers None, and the walk
    decides from the start.
    """
    if depth > _PARSED_DEPTH:
        return None
    if type(value) is dict:
        copy: Any = value.copy()
        for key, child in copy.items():
            if type(key) is not str:
                return None
            kind = type(child)
            if kind is dict or kind is list:
                child = _parsed_copy(child, depth + 1)
                if child is None:
                    return None
                copy[key] = child
            elif kind is float:
                if child != child:  # NaN is not equal to itself
                    return None
            elif kind not in _PARSED_SCALARS:
                return None
        return copy
    copy = list(value)
    for index, child in enumerate(copy):
        kind = type(child)
        if kind is dict or kind is list:
            child = _parsed_copy(child, depth + 1)
            if child is None:
                return None
            copy[index] = child
        elif kind is float:
            if child != child:
                return None
        elif kind not in _PARSED_SCALARS:
            return None
    return copy


def _walked_copy(value: dict[str, Any] | list[Any], where: str) -> Any:
    """`admit_parsed` of a container, by the general walk."""
    # Walked as `admit_json` walks: one frame per open container (the copy, and the next
    # index of a list copied whole, or the items iterator of a dict filled member by
    # member); a cycle is caught by Brent's method, against the open containers at
    # depths 0, 1, 2, 4, 8, ...
    copies: list[Any] = []
    states: list[Any] = []
    marks: list[Any] = []
    container: Any = value
    copy: Any = None
    key: Any = None
    while True:
        depth = len(copies)
        if marks and container is marks[-1]:
            raise NotLosslessJson(f"{where}: data contains itself (a cycle) (R1)")
        new: Any = {} if type(container) is dict else list(container)
        if depth:
            copy[key] = new
        else:
            root = new
        copies.append(new)
        states.append(iter(container.items()) if type(new) is dict else 0)
        if depth & (depth - 1) == 0:
            marks.append(container)
        while copies:
            copy, state = copies[-1], states[-1]
            child: Any = None
            if type(state) is int:
                for key in range(state, len(copy)):
                    child = copy[key]
                    ct = type(child)
                    if ct is dict or ct is list:
                        states[-1] = key + 1
                        break
                    if ct is FrozenObject or ct is FrozenArray:
                        copy[key] = child._raw
                    elif ct is not str and ct is not int:
                        _parsed_scalar(child, where)
                    child = None
            else:
                for key, child in state:
                    if type(key) is not str:
                        raise NotLosslessJson(
                            f"{where}: data has the object key {summary(key)}, not a string (R1)"
                        )
                    ct = type(child)
                    if ct is dict or ct is list:
                        break
                    if ct is FrozenObject or ct is FrozenArray:
                        copy[key] = child._raw
                    else:
                        copy[key] = (
                            child if ct is str or ct is int else _parsed_scalar(child, where)
                        )
                    child = None
            if child is None:  # the copy is complete: close it
                depth = len(copies) - 1
                copies.pop()
                states.pop()
                if depth & (depth - 1) == 0:
                    marks.pop()
                continue
            container = child
            break
        else:
            return root


def _parsed_scalar(value: Any, where: str) -> Any:
    if type(value) not in _PARSED_SCALARS:
        raise NotLosslessJson(
            f"{where}: data holds a {type(value).__name__}, which is not a JSON value (R1)"
        )
    if value != value:
        raise NotLosslessJson(f"{where}: data holds NaN, which no JSON text spells (R1)")
    return value


# -- the seed/restore pipeline ------------------------------------------------------------------

WireEvent = Mapping[str, Any]

_LEGACY_OR_HEADER = frozenset({"request/header-delta", "mode/set", REQUEST_HEADER})


def admit_wire_event(
    obj: Any, index: int, *, lossless_check: bool, where: str, parsed: bool = False
) -> tuple[dict[str, Any], str, int, int, bool, Any, Any]:
    """Admission §3.2 steps 1-5 and R5/R6 for one wire event.

    Returns `(plain, type, seq, time, ignorable, op, sources)` for the surface
    plan (R7-R9), which needs the log's state. `plain` is the kernel-owned dict:
    a copy made by R1 when `lossless_check`; else `obj` itself, or when its `data`
    is a plain container, `obj` with a copy of it made by `admit_parsed`. With
    `parsed`, `obj` is a wire dict the kernel's own JSON reader built (or one
    made of such parts), which gives nothing `admit_parsed` refuses and which
    nobody else holds: it is taken as it is, neither walked nor copied.
    """
    if lossless_check:
        try:
            plain = admit_json(obj)
        except NotLosslessJson as exc:
            raise NotLosslessJson(f"{where} is not lossless JSON: {exc} (R1)") from None
    elif type(obj) is FrozenObject:
        plain = obj._raw  # the kernel's own: admitted, or its parser's output
    else:
        plain = obj
        if type(obj) is dict and not parsed:
            for key in obj:
                if type(key) is not str:  # a parser gives only str keys
                    raise InvalidEnvelope(f"{where}: envelope keys must be plain strings (R2)")
            data = obj.get("data")
            if type(data) is dict or type(data) is list:
                plain = {**obj, "data": admit_parsed(data, where)}
    if type(plain) is dict:
        event_type_value = plain.get("type")
        if type(event_type_value) is str and event_type_value in _LEGACY_OR_HEADER:
            check_legacy_type(event_type_value, where)
            check_legacy_reason(event_type_value, plain.get("data"), where)
    event_type, seq, time, ignorable = check_envelope(plain, where)
    data = plain["data"]
    check_payload(event_type, data, where)
    if seq != index:
        raise SeqMismatch(f"{where}: seq {seq} is not contiguous; expected {index} (R4)")
    op_present = "surfaceOp" in plain
    sources_present = "sourceEventSeqs" in plain
    check_surface_marker(event_type, op_present, sources_present, where)
    op = parse_surface_op(plain["surfaceOp"], where) if op_present else None
    sources: Any = None
    if sources_present:
        sources = plain["sourceEventSeqs"]
        if sources is None:
            sources = PRESENT_NULL
        elif type(sources) is FrozenArray:
            sources = sources._raw
    return plain, event_type, seq, time, ignorable, op, sources


# -- an `Event` kept as it is ---------------------------------------------------------------------


def _vetted_type(event_type: Any, lossless_check: bool) -> bool:
    """Whether an event type is spelled as admission keeps it (R2, R3, canonical text)."""
    return (
        type(event_type) is str
        and bool(event_type)
        and event_type not in LEGACY_TYPES
        and event_type not in ROW_TAGS
        and (event_type.isascii() or not lossless_check or canonical_text(event_type) == event_type)
    )


def admitted_as_it_is(item: Event, index: int, lossless_check: bool, vetted: set[str]) -> bool:
    """Whether an `Event` passes R1-R6 and R10-R12 exactly as it is, so it can be kept.

    Only accepts: an event with any unusual field (a float seq, a wire-spelled surface
    op, a citation list) or any broken rule is left to `admit_wire_event`, which
    normalizes it or names the error. A payload that is a frozen view already known
    to be lossless (R1) is shared, not walked; one the typed load path checked for
    this event type (R3, R10-R12) is not checked again. `vetted` holds the event
    types already found well spelled in this construction.
    """
    event_type, seq, time = item.type, item.seq, item.time
    op, data = item.surface_op, item.data
    # `type()`, not `__class__`: a caller's value may claim any class.
    if type(event_type) is not str or event_type not in vetted:
        if not _vetted_type(event_type, lossless_check):
            return False
        vetted.add(event_type)
    if not (
        type(seq) is int
        and seq == index
        and type(time) is int
        and -MAX_SAFE_INTEGER <= time <= MAX_SAFE_INTEGER
        and type(item.ignorable) is bool
    ):
        return False
    if event_type in SURFACE_TYPES:
        sources = item.source_event_seqs
        if not (
            op is APPEND or (type(op) is Replace and is_safe_seq(op.start) and is_safe_seq(op.end))
        ) or not (sources is None or are_safe_seqs(sources)):
            return False  # R5-R7 errors are named by `admit_wire_event`
    elif op is not None or item.source_event_seqs is not None:
        return False
    data_type = type(data)
    if data_type is FrozenObject or data_type is FrozenArray:
        if lossless_check and not known_lossless(data):
            return False  # walked and copied by `admit_wire_event`, as any caller's value
        if data._checked_as == event_type:  # the typed load path checked it already
            return True
    elif data_type in EVENT_DATA_TYPES:
        if lossless_check:
            try:
                admit_json(data)  # a scalar
            except KernelError:
                return False
    else:
        return False
    # A failure sends the event to `admit_wire_event`, which names it: no `where` here.
    try:
        if event_type == REQUEST_HEADER:
            check_legacy_reason(event_type, data, "")
        check_payload(event_type, data, "")
    except KernelError:
        return False
    return True
