"""The envelope rules (docs/format/admission.md §4): R2, and R5/R6 (which types carry what).

Shared by every path that admits a wire event: `event_from_json`, seed and
restore (`kernel.admission.admit`), and the exact load pipeline.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernel.errors import (
    InvalidEnvelope,
    SurfaceMarkerError,
)
from kernel.values.events import (
    APPEND,
    ROW_TAGS,
    SURFACE_TYPES,
    Replace,
)
from kernel.values.json import (
    MAX_SAFE_INTEGER,
    safe_int,
    summary,
)

__all__ = (
    "ENVELOPE_KEYS",
    "row_tag_message",
    "check_envelope",
    "parse_surface_op",
    "check_surface_marker",
    "is_safe_seq",
    "are_safe_seqs",
)

ENVELOPE_KEYS = frozenset(
    {"type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs", "ignorable"}
)


def is_safe_seq(value: Any) -> bool:
    """Whether `value` is a seq as R2 spells one: a non-negative safe integer."""
    return type(value) is int and 0 <= value <= MAX_SAFE_INTEGER


def are_safe_seqs(values: Any) -> bool:
    """Whether `values` is a tuple of seqs (`is_safe_seq`), checked in C: one pass of `map`,
    then min and max."""
    return type(values) is tuple and (
        not values
        or (
            set(map(type, values)) == {int} and min(values) >= 0 and max(values) <= MAX_SAFE_INTEGER
        )
    )


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


def check_surface_marker(
    event_type: str, op_present: bool, sources_present: bool, where: str
) -> None:
    """R5 presence rules: only surface types carry surface metadata, and they must carry an op."""
    if event_type in SURFACE_TYPES:
        if not op_present:
            raise SurfaceMarkerError(
                f"{where}: {event_type} is surface-eligible and requires a surfaceOp (R5)"
            )
    elif op_present:
        raise SurfaceMarkerError(
            f"{where}: {event_type} is not surface-eligible, cannot carry surfaceOp (R5)"
        )
    elif sources_present:
        raise SurfaceMarkerError(
            f"{where}: {event_type} is not surface-eligible, cannot carry sourceEventSeqs (R5)"
        )
