"""The session header rules H1-H12 (docs/format/admission.md §6), the shape of a JSONL
header line and the refusal of a foreign format version."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from kernel.errors import (
    NotLosslessJson,
    SessionHeaderError,
    UnsupportedFormat,
)
from kernel.values.events import (
    SessionHeader,
)
from kernel.values.json import (
    FrozenObject,
    admit_json,
    is_number,
    safe_int,
    summary,
)
from kernel.values.pathtext import is_absolute_path
from kernel.wire.jsontext import encode_json_bytes, format_number

__all__ = ("admit_header",)


def _non_negative(value: Any) -> int | None:
    v = safe_int(value)
    return v if v is not None and v >= 0 else None


def admit_header(obj: Any, *, session_id: str | None = None) -> SessionHeader:
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
    if type(header_id) is not str:
        what = "is missing" if "id" not in obj else f"must be a string, got {summary(header_id)}"
        raise SessionHeaderError(f"session header id {what} (H4)")
    if session_id is not None and header_id != session_id:
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


# -- the header line of a JSONL log, and the format version (docs/format/persistence.md §3.1, §4)


def _negative_zero(value: Any) -> bool:
    return type(value) is float and value == 0.0 and math.copysign(1.0, value) < 0


def header_count(value: Any) -> int | None:
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


def header_line_problem(value: Any) -> str | None:
    """What makes a parsed header line no session header (docs/format/persistence.md §3.1),
    or None; its fields are admitted by `admit_header` at load."""
    if type(value) is not dict:
        return "it is not a JSON object"
    if value.get("type") != "session":
        return 'type is not "session"'
    if not is_number(value.get("version")):
        return "version is not a number"
    if type(value.get("id")) is not str:
        return "id is not a string"
    if header_count(value.get("createdAt")) is None:
        return "createdAt is not a non-negative safe integer"
    if header_count(value.get("delegationDepth")) is None:
        return "delegationDepth is missing or not a non-negative safe integer"
    if "origin" in value and value["origin"] != "subagent":
        return 'origin is not "subagent"'
    if "agentPreset" in value and type(value["agentPreset"]) is not str:
        return "agentPreset is not a string"
    return None
