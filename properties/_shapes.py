"""Builders for the wire shapes of docs/format/events.md §3-§5, as plain dicts in writer member
order.

Every generator builds its events here, so one place knows the envelope order a
live append writes (`type, seq, time, data, sourceEventSeqs?, surfaceOp?,
ignorable?`) and the message shapes R10 checks. Internal to the kit.
"""

from __future__ import annotations

from typing import Any

__all__ = (
    "Wire",
    "envelope",
    "replace_op",
    "user_message",
    "assistant_message",
    "tool_result_message",
    "assistant_data",
    "tool_result_data",
    "tool_call_data",
    "chunk_data",
    "checkpoint_message",
    "compaction_start_data",
    "compaction_summary_data",
    "compaction_end_data",
    "turn_end_reasons",
    "END_SEED_DATA",
    "KNOWN_EXTENSIONS",
    "IGNORABLE_EXTENSIONS",
)

Wire = dict[str, Any]
"""A plain wire event (or any JSON object)."""

END_SEED_DATA: dict[str, Any] = {}

KNOWN_EXTENSIONS = (
    "session/title",
    "hook/invoked",
    "llm/retry",
    "approval/asked",
    "compaction/start",
    "compaction/end",
    "goal/change",
)
"""Extension types in the default known vocabulary (docs/format/events.md §6.2) the generators
use."""

IGNORABLE_EXTENSIONS = ("x-telemetry/tick", "acme/note")
"""Unknown types the generators only emit with `ignorable: true`."""


def replace_op(start: int, end: int) -> dict[str, Any]:
    """The wire replace operation `{op, start, end}`."""
    return {"op": "replace", "start": start, "end": end}


def envelope(
    type_: str,
    seq: int,
    time: int,
    data: Any,
    *,
    surface_op: Any = None,
    sources: list[int] | None = None,
    ignorable: bool = False,
) -> Wire:
    """A wire event in live-append member order; `surface_op` is `"append"` or a replace dict."""
    event: Wire = {"type": type_, "seq": seq, "time": time, "data": data}
    if sources is not None:
        event["sourceEventSeqs"] = list(sources)
    if surface_op is not None:
        event["surfaceOp"] = surface_op
    if ignorable:
        event["ignorable"] = True
    return event


def user_message(mid: str, text: str, *, kind: str = "user") -> dict[str, Any]:
    """A user message (`user/message` data); a `plugin` kind gets a `plugin` name."""
    source: dict[str, Any] = {"kind": kind}
    if kind == "plugin":
        source["plugin"] = "compact"
    return {
        "id": mid,
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": source,
    }


def assistant_message(
    mid: str, content: list[Any], *, provider: str = "deepseek", model: str = "deepseek-chat"
) -> dict[str, Any]:
    """An assistant message with a model source."""
    return {
        "id": mid,
        "role": "assistant",
        "content": content,
        "source": {"kind": "model", "provider": provider, "model": model},
    }


def tool_result_message(
    mid: str, call_id: str, content: list[Any], *, is_error: bool | None = False
) -> dict[str, Any]:
    """A tool-result message: one `tool-result` block answering `call_id`."""
    block: dict[str, Any] = {"type": "tool-result", "toolCallId": call_id, "content": content}
    if is_error is not None:
        block["isError"] = is_error
    return {
        "id": mid,
        "role": "user",
        "content": [block],
        "source": {"kind": "tool", "callId": call_id},
    }


def assistant_data(
    turn: int,
    step: int,
    message: dict[str, Any],
    *,
    usage: dict[str, Any] | None = None,
    interrupted: bool = False,
) -> dict[str, Any]:
    """`assistant/message` data."""
    data: dict[str, Any] = {"turn": turn, "step": step, "message": message}
    if usage is not None:
        data["usage"] = usage
    if interrupted:
        data["interrupted"] = True
    return data


def tool_result_data(
    turn: int,
    step: int,
    message: dict[str, Any],
    *,
    error: dict[str, Any] | None = None,
    meta: Any = None,
    with_meta: bool = False,
) -> dict[str, Any]:
    """`tool/result` data."""
    data: dict[str, Any] = {"turn": turn, "step": step, "message": message}
    if error is not None:
        data["error"] = error
    if with_meta:
        data["meta"] = meta
    return data


def tool_call_data(turn: int, step: int, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """`tool/call` data."""
    return {"turn": turn, "step": step, "callId": call_id, "name": name, "arguments": arguments}


def chunk_data(turn: int, step: int, chunk: dict[str, Any]) -> dict[str, Any]:
    """`assistant/chunk` data."""
    return {"turn": turn, "step": step, "chunk": chunk}


def checkpoint_message(mid: str, text: str, compaction_id: str) -> dict[str, Any]:
    """The replacing `user/message` of a DSH compaction (its checkpoint)."""
    message = user_message(mid, text, kind="plugin")
    message["source"]["compactionId"] = compaction_id
    return message


def compaction_start_data(compaction_id: str, turn: int) -> dict[str, Any]:
    """`compaction/start` data, as DSH writes it."""
    return {"compactionId": compaction_id, "turn": turn}


def compaction_summary_data(
    compaction_id: str,
    summary: list[Any],
    shadowed: list[int],
    *,
    provider: str,
    model: str,
) -> dict[str, Any]:
    """`compaction/summary` data for the shadowed nodes `shadowed` (in surface order)."""
    return {
        "compactionId": compaction_id,
        "summary": summary,
        "shadowedRange": {"start": shadowed[0], "end": shadowed[-1]},
        "shadowedSeqs": list(shadowed),
        "shadowedTokenCount": 10 * len(shadowed),
        "provider": provider,
        "model": model,
    }


def compaction_end_data(
    compaction_id: str, turn: int, *, error: dict[str, Any] | None = None
) -> dict[str, Any]:
    """`compaction/end` data; `error` only when the compaction failed."""
    data: dict[str, Any] = {"compactionId": compaction_id, "turn": turn}
    if error is not None:
        data["error"] = error
    return data


def turn_end_reasons() -> tuple[dict[str, Any], ...]:
    """One `turn/end` reason of every kind a live loop writes (never `interrupted`)."""
    return (
        {"kind": "completed"},
        {"kind": "aborted", "reason": {"kind": "user"}},
        {"kind": "blocked"},
        {"kind": "error", "error": {"message": "overloaded", "code": "E_OVERLOAD"}},
        {"kind": "max-tokens"},
        {"kind": "aborted", "reason": {"kind": "hook", "reason": "policy"}},
        {"kind": "x-custom", "detail": 1},
        {"kind": "error", "error": {"message": "m", "code": "c", "status": 503}},
    )
