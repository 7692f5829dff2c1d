"""The payload rules (docs/format/admission.md §4): R3, R10, R11 and R12.

Checks read the plain containers behind frozen values (`kernel.values.json.raw`) so
admitting a restored event costs a few dict look-ups, never a walk of its data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kernel.errors import (
    EventShapeError,
    LegacyFormat,
    MessageShapeError,
    RequestHeaderShapeError,
)
from kernel.values.events import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    REQUEST_CONTEXT,
    REQUEST_HEADER,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)
from kernel.values.json import (
    MAX_SAFE_INTEGER,
    is_number,
    raw,
    safe_int,
    summary,
)

__all__ = (
    "HEADER_REASONS",
    "check_legacy_type",
    "check_legacy_reason",
    "check_legacy",
    "check_message_shape",
    "check_request_header",
    "turn_end_reason_ok",
    "check_event_shape",
    "check_payload",
)

HEADER_REASONS = frozenset({"initial", "resume", "change", "series"})


def _nonempty_str(value: Any) -> bool:
    return type(value) is str and value != ""


def _positive(value: Any) -> bool:
    if type(value) is int:
        return 0 < value <= MAX_SAFE_INTEGER
    v = safe_int(value)
    return v is not None and v >= 1


# -- R3 -----------------------------------------------------------------------------------------


def check_legacy_type(event_type: Any, where: str) -> None:
    """R3: retired event types."""
    if type(event_type) is not str:  # not a retired type (R2 refuses it), maybe not even comparable
        return
    if event_type == "request/header-delta":
        raise LegacyFormat(f"{where}: unsupported legacy request/header-delta format (R3)")
    if event_type == "mode/set":
        raise LegacyFormat(f"{where}: unsupported legacy mode/set event (R3)")


def check_legacy_reason(event_type: Any, data: Any, where: str) -> None:
    """R3: a `request/header` with the retired reason `fallback`."""
    data = raw(data)
    if (
        type(event_type) is str
        and event_type == REQUEST_HEADER
        and type(data) is dict
        and data.get("reason") == "fallback"
    ):
        raise LegacyFormat(f"{where}: unsupported legacy request/header reason fallback (R3)")


def check_legacy(obj: Any, where: str) -> None:
    """R3 over a wire event object (or an `Event`)."""
    if issubclass(type(obj), Mapping):
        event_type, data = obj.get("type"), obj.get("data")
    else:
        event_type, data = getattr(obj, "type", None), getattr(obj, "data", None)
    check_legacy_type(event_type, where)
    check_legacy_reason(event_type, data, where)


# -- R10 ----------------------------------------------------------------------------------------


def check_message_shape(event_type: str, data: Any, where: str) -> None:
    """R10 for `user/message`, `assistant/message` and `tool/result`; no-op for other types."""
    data = raw(data)
    if event_type == USER_MESSAGE:
        message, role = data, "user"
    elif event_type in (ASSISTANT_MESSAGE, TOOL_RESULT):
        message = data.get("message") if type(data) is dict else None
        role = "assistant" if event_type == ASSISTANT_MESSAGE else "user"
    else:
        return
    if type(message) is not dict or not _nonempty_str(message.get("id")):
        raise MessageShapeError(f"{where}: {event_type} lacks an identified message (R10a)")
    if message.get("role") != role or type(message.get("role")) is not str:
        raise MessageShapeError(f"{where}: {event_type} message must have role {role!r} (R10b)")
    source = message.get("source")
    if type(source) is not dict or not _nonempty_str(source.get("kind")):
        raise MessageShapeError(f"{where}: {event_type} message has an invalid source (R10c)")
    content = message.get("content")
    if type(content) is not list:
        raise MessageShapeError(f"{where}: {event_type} message has invalid content (R10d)")
    if event_type == ASSISTANT_MESSAGE:
        if (
            source["kind"] != "model"
            or not _nonempty_str(source.get("provider"))
            or not _nonempty_str(source.get("model"))
        ):
            raise MessageShapeError(f"{where}: assistant/message must have a model source (R10e)")
    elif event_type == TOOL_RESULT:
        call_id = source.get("callId")
        if source["kind"] != "tool" or not _nonempty_str(call_id):
            raise MessageShapeError(f"{where}: tool/result must have a tool source (R10f)")
        block = content[0] if len(content) == 1 else None
        if (
            type(block) is not dict
            or block.get("type") != "tool-result"
            or type(block.get("content")) is not list
        ):
            raise MessageShapeError(
                f"{where}: tool/result must contain exactly one tool-result block (R10g)"
            )
        if block.get("toolCallId") != call_id:
            raise MessageShapeError(f"{where}: tool/result has mismatched tool call ids (R10h)")


# -- R11 ----------------------------------------------------------------------------------------

_DATA_KEYS = frozenset({"header", "reason", "startsSeries"})
_HEADER_KEYS = frozenset({"config", "adapterDefaults", "system", "tools"})


def check_request_header(data: Any, where: str) -> None:
    """R11 a-h for the data of a `request/header` event."""
    data = raw(data)
    header = data.get("header") if type(data) is dict else None
    config = header.get("config") if type(header) is dict else None
    if (
        type(config) is not dict
        or not _nonempty_str(config.get("provider"))
        or not _nonempty_str(config.get("model"))
    ):
        raise RequestHeaderShapeError(f"{where}: request/header lacks provider/model (R11a)")
    assert type(data) is dict and type(header) is dict
    if "reasoningEffort" in config and not _nonempty_str(config["reasoningEffort"]):
        raise RequestHeaderShapeError(f"{where}: request/header has invalid reasoningEffort (R11b)")
    if "adapterDefaults" in header:
        markers = header["adapterDefaults"]
        if (
            type(markers) is not dict
            or any(k not in ("reasoningEffort", "maxTokens") for k in markers)
            or any(v is not True for v in markers.values())
            or ("reasoningEffort" in markers and "reasoningEffort" not in config)
            or ("maxTokens" in markers and "maxTokens" not in config)
        ):
            raise RequestHeaderShapeError(
                f"{where}: request/header has invalid adapterDefaults (R11c)"
            )
    extra = [k for k in data if k not in _DATA_KEYS] + [k for k in header if k not in _HEADER_KEYS]
    if extra:
        raise RequestHeaderShapeError(
            f"{where}: request/header has unknown keys {summary(extra)} (R11d)"
        )
    reason = data.get("reason")
    if type(reason) is not str or reason not in HEADER_REASONS:
        raise RequestHeaderShapeError(
            f"{where}: request/header reason {summary(reason)} is not "
            "initial/resume/change/series (R11e)"
        )
    if "startsSeries" in data and (data["startsSeries"] is not True or reason != "change"):
        raise RequestHeaderShapeError(
            f"{where}: startsSeries must be true and only with reason change (R11f)"
        )
    for key in ("temperature", "maxTokens"):
        if key in config and not is_number(config[key]):
            raise RequestHeaderShapeError(f"{where}: config.{key} must be a number (R11g)")
    if "stop" in config and (
        type(config["stop"]) is not list or any(type(s) is not str for s in config["stop"])
    ):
        raise RequestHeaderShapeError(f"{where}: config.stop must be an array of strings (R11g)")
    if "system" in header and type(header["system"]) is not str:
        raise RequestHeaderShapeError(f"{where}: header.system must be a string (R11h)")
    if "tools" in header:
        tools = header["tools"]
        if type(tools) is not list or not all(
            type(t) is dict
            and type(t.get("name")) is str
            and type(t.get("description")) is str
            and type(t.get("parameters")) is dict
            for t in tools
        ):
            raise RequestHeaderShapeError(
                f"{where}: header.tools must be schemas with name, description, parameters (R11h)"
            )


# -- R12 ----------------------------------------------------------------------------------------

_BARE_REASONS = frozenset({"completed", "blocked", "max-tokens", "interrupted"})
_FAILURE_NUMBERS = ("status", "providerRetryAfterMs")


def turn_end_reason_ok(reason: Any) -> bool:
    """R12: a `turn/end` reason has the shape its `kind` requires."""
    if type(reason) is not dict or not _nonempty_str(reason.get("kind")):
        return False
    kind = reason["kind"]
    if kind in _BARE_REASONS:
        return len(reason) == 1
    if kind == "aborted":
        cause = reason.get("reason")
        return reason.keys() == {"kind", "reason"} and (
            type(cause) is dict and _nonempty_str(cause.get("kind"))
        )
    if kind == "error":
        failure = reason.get("error")
        return (
            reason.keys() == {"kind", "error"}
            and type(failure) is dict
            and type(failure.get("message")) is str
            and type(failure.get("code")) is str
            and all(k not in failure or is_number(failure[k]) for k in _FAILURE_NUMBERS)
            and ("requestId" not in failure or type(failure["requestId"]) is str)
        )
    return True  # extension kinds: only `kind` is checked


def _turn_step_ok(data: dict[str, Any]) -> bool:
    turn, step = data.get("turn"), data.get("step")
    if type(turn) is int and type(step) is int:  # the common case, without a call per field
        return 0 < turn <= MAX_SAFE_INTEGER and 0 < step <= MAX_SAFE_INTEGER
    return _positive(turn) and _positive(step)


def _turn_start_problem(data: Any) -> str | None:
    if type(data) is dict and data.keys() == {"turn"} and _positive(data["turn"]):
        return None
    return "data must be exactly {turn} with a positive safe integer turn"


def _turn_end_problem(data: Any) -> str | None:
    if not (type(data) is dict and data.keys() == {"turn", "reason"} and _positive(data["turn"])):
        return "data must be exactly {turn, reason} with a positive safe integer turn"
    if not turn_end_reason_ok(data["reason"]):
        return "reason does not have the shape of its kind"
    return None


def _step_problem(data: Any) -> str | None:
    if type(data) is dict and data.keys() == {"turn", "step"} and _turn_step_ok(data):
        return None
    return "data must be exactly {turn, step}, both positive safe integers"


def _chunk_problem(data: Any) -> str | None:
    # Three keys, all present, is the exact key set {turn, step, chunk}.
    if not (type(data) is dict and len(data) == 3 and "chunk" in data and _turn_step_ok(data)):
        return "data must be exactly {turn, step, chunk} with positive turn and step"
    chunk = data["chunk"]
    if type(chunk) is not dict or not _nonempty_str(chunk.get("type")):
        return "chunk must be an object with a non-empty string type"
    return None


_ASSISTANT_KEYS = frozenset({"turn", "step", "message", "usage", "interrupted"})


def _assistant_message_problem(data: Any) -> str | None:
    if type(data) is not dict or not data.keys() <= _ASSISTANT_KEYS:
        return "data keys must be within {turn, step, message, usage, interrupted}"
    if not _turn_step_ok(data):
        return "turn and step must be positive safe integers"
    if "usage" in data:
        usage = data["usage"]
        if (
            type(usage) is not dict
            or not is_number(usage.get("inputTokens"))
            or not is_number(usage.get("outputTokens"))
            or not all(is_number(v) for v in usage.values())
        ):
            return "usage must be an object of numbers with inputTokens and outputTokens"
    if "interrupted" in data and data["interrupted"] is not True:
        return "interrupted may only be true"
    return None


_CALL_KEYS = frozenset({"turn", "step", "callId", "name", "arguments"})


def _tool_call_problem(data: Any) -> str | None:
    if (
        type(data) is dict
        and data.keys() == _CALL_KEYS
        and _turn_step_ok(data)
        and _nonempty_str(data["callId"])
        and type(data["name"]) is str
        and type(data["arguments"]) is str
    ):
        return None
    return "data must be exactly {turn, step, callId, name, arguments} with valid types"


_RESULT_KEYS = frozenset({"turn", "step", "message", "error", "meta"})


def _tool_result_problem(data: Any) -> str | None:
    if not (type(data) is dict and data.keys() <= _RESULT_KEYS):
        return "data keys must be within {turn, step, message, error, meta}"
    if not _turn_step_ok(data):
        return "turn and step must be positive safe integers"
    if "error" in data:
        error = data["error"]
        if not (
            type(error) is dict
            and error.keys() == {"name", "code"}
            and type(error["name"]) is str
            and type(error["code"]) is str
        ):
            return "error must be exactly {name, code} with string values"
    return None


def _request_context_problem(data: Any) -> str | None:
    if (
        type(data) is dict
        and data.keys() <= {"provider", "model", "contextWindow"}
        and _nonempty_str(data.get("provider"))
        and _nonempty_str(data.get("model"))
        and ("contextWindow" not in data or is_number(data["contextWindow"]))
    ):
        return None
    return "data must be {provider, model, contextWindow?} with valid types"


_SHAPE_PROBLEMS: dict[str, Callable[[Any], str | None]] = {
    TURN_START: _turn_start_problem,
    TURN_END: _turn_end_problem,
    STEP_START: _step_problem,
    STEP_END: _step_problem,
    ASSISTANT_CHUNK: _chunk_problem,
    ASSISTANT_MESSAGE: _assistant_message_problem,
    TOOL_CALL: _tool_call_problem,
    TOOL_RESULT: _tool_result_problem,
    REQUEST_CONTEXT: _request_context_problem,
}
"""R12 per core type: a description of what is wrong, or None. Other types are not checked."""


def check_event_shape(event_type: str, data: Any, where: str) -> None:
    """R12: the structure of core payloads; other types are not checked."""
    problem_of = _SHAPE_PROBLEMS.get(event_type)
    if problem_of is not None:
        problem = problem_of(raw(data))
        if problem is not None:
            raise EventShapeError(f"{where}: {event_type} {problem} (R12)")


_MESSAGE_TYPES = frozenset({USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT})


def check_payload(event_type: str, data: Any, where: str) -> None:
    """R10, R11 and R12 for one event, in that order."""
    data = raw(data)
    if event_type in _MESSAGE_TYPES:
        check_message_shape(event_type, data, where)
    elif event_type == REQUEST_HEADER:
        check_request_header(data, where)
    problem_of = _SHAPE_PROBLEMS.get(event_type)
    if problem_of is not None:
        problem = problem_of(data)
        if problem is not None:
            raise EventShapeError(f"{where}: {event_type} {problem} (R12)")
