"""What the command reports about one log, computed from the kernel's folds; no I/O here.

Every function takes admitted events (and what the durable scan found) and
returns plain JSON values: the `--json` documents are exactly these values, and
the `rich` tables are drawn from them, so the two outputs can never disagree.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Final

from kernel.errors import KernelError
from kernel.folds.closers import interrupted_turn_closers
from kernel.folds.invariants import check_invariants
from kernel.folds.messages import project_message
from kernel.folds.pairing import tool_pairing_cuts
from kernel.folds.request_header import fold_request_header
from kernel.folds.surface import fold_surface
from kernel.log import SessionLog
from kernel.values.events import STEP_START, TURN_END, TURN_START, Event

__all__ = (
    "PREVIEW_CHARS",
    "Json",
    "event_counts",
    "turns",
    "surface",
    "messages",
    "message_preview",
    "request_header",
    "closers",
    "provider_pairing_problems",
    "repaired_log_problems",
    "inspection",
    "last_events",
)

PREVIEW_CHARS: Final = 60
"""Text previews are cut to this many characters."""

Json = dict[str, Any]
"""A plain JSON object as printed by `--json`."""


def _get(value: Any, key: str) -> Any:
    """`value[key]` for a JSON object, else None (reports never fail on an odd payload)."""
    return value.get(key) if isinstance(value, Mapping) else None


def _blocks(message: Any) -> Sequence[Any]:
    content = _get(message, "content")
    if isinstance(content, Sequence) and not isinstance(content, str):
        return content
    return ()


def _cut(text: str, limit: int = PREVIEW_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def event_counts(events: Sequence[Event]) -> Json:
    """The number of events of each type, most frequent first (ties by name)."""
    counts = Counter(event.type for event in events)
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def turns(events: Sequence[Event]) -> list[Json]:
    """One entry per `turn/start`: its seqs, step count, end reason, and whether it is open.

    Only the last turn of a log can be open: an unclosed turn followed by
    another `turn/start` breaks a relational invariant, and is reported so.
    """
    out: list[Json] = []
    current: Json | None = None
    for event in events:
        if event.type == TURN_START:
            current = {
                "turn": _get(event.data, "turn"),
                "startSeq": event.seq,
                "endSeq": None,
                "steps": 0,
                "reason": None,
                "open": True,
            }
            out.append(current)
        elif event.type == STEP_START and current is not None and current["open"]:
            current["steps"] += 1
        elif event.type == TURN_END and current is not None and current["open"]:
            reason = _get(event.data, "reason")
            kind = _get(reason, "kind")
            current.update(endSeq=event.seq, reason=kind if isinstance(kind, str) else None)
            current["open"] = False
    return out


def surface(events: Sequence[Event]) -> Json:
    """The surface nodes and every replacement folded into them (docs/format/folds.md §1)."""
    fold = fold_surface(events)
    return {
        "nodes": list(fold.nodes),
        "replacements": [
            {
                "seq": r.seq,
                "start": r.start,
                "end": r.end,
                "shadowed": list(r.shadowed_seqs),
            }
            for r in fold.replacements
        ],
    }


def message_preview(message: Any) -> list[Json]:
    """A short description of each content block: text previews, call and result ids."""
    out: list[Json] = []
    for block in _blocks(message):
        kind = _get(block, "type")
        item: Json = {"type": kind if isinstance(kind, str) else None}
        if kind in ("text", "reasoning"):
            text = _get(block, "text")
            if isinstance(text, str):
                item["chars"] = len(text)
                item["preview"] = _cut(text)
        elif kind == "tool-call":
            item["id"] = _get(block, "id")
            item["name"] = _get(block, "name")
        elif kind == "tool-result":
            item["toolCallId"] = _get(block, "toolCallId")
            item["isError"] = _get(block, "isError") is True
        out.append(item)
    return out


def messages(events: Sequence[Event]) -> list[Json]:
    """The derived history (docs/format/folds.md §2.2): a preview per message, with its seq."""
    out: list[Json] = []
    for seq in fold_surface(events).nodes:
        message = project_message(events[seq])
        if message is None:
            continue
        out.append(
            {
                "seq": seq,
                "role": _get(message, "role"),
                "id": _get(message, "id"),
                "content": message_preview(message),
            }
        )
    return out


def request_header(header: Any) -> Json | None:
    """The request header in force, summarized: provider, model, tool count, prompt length."""
    if header is None:
        return None
    config = _get(header, "config")
    tools = _get(header, "tools")
    system = _get(header, "system")
    return {
        "provider": _get(config, "provider"),
        "model": _get(config, "model"),
        "tools": len(tools) if isinstance(tools, Sequence) and not isinstance(tools, str) else 0,
        "systemPromptLength": len(system) if isinstance(system, str) else 0,
    }


def closers(events: Sequence[Event]) -> list[Json]:
    """The closers crash repair appends (docs/format/folds.md §7): type, seq, a result's call."""
    out: list[Json] = []
    for event in events:
        item: Json = {"type": event.type, "seq": event.seq}
        message = _get(event.data, "message")
        call_id = _get(_get(message, "source"), "callId")
        if call_id is not None:
            item["callId"] = call_id
            item["errorCode"] = _get(_get(event.data, "error"), "code")
        out.append(item)
    return out


def provider_pairing_problems(history: Sequence[Any]) -> list[str]:
    """Why a provider would refuse this message history; empty when every call is answered.

    Every `tool-call` block of an assistant message must be answered by a
    `tool-result` block before the next assistant message, and every result
    must answer a call that is waiting. Calls still open at the end of the
    history are not a problem here: the last turn may have ended with an error
    before its results (docs/format/folds.md §6.3 accepts that), and crash repair answers
    the calls of an interrupted step.
    """
    problems: list[str] = []
    pending: dict[Any, int] = {}

    def unanswered(where: str) -> None:
        ids = ", ".join(str(call_id) for call_id in pending)
        problems.append(f"tool call(s) {ids} not answered before {where}")
        pending.clear()

    for index, message in enumerate(history):
        if _get(message, "role") == "assistant":
            if pending:
                unanswered(f"assistant message {_get(message, 'id')!s} (message {index})")
            for block in _blocks(message):
                if _get(block, "type") == "tool-call":
                    pending[_get(block, "id")] = index
            continue
        for block in _blocks(message):
            if _get(block, "type") != "tool-result":
                continue
            call_id = _get(block, "toolCallId")
            if call_id in pending:
                del pending[call_id]
            else:
                problems.append(
                    f"tool result for {call_id!s} (message {index}) answers no waiting call"
                )
    return problems


def repaired_log_problems(
    stored: Sequence[Event], added: Sequence[Event], header: Any = None
) -> list[Json]:
    """Every check `verify` runs on a loaded log, as `{check, seq?, rule?, message}` items.

    `stored` is the durable prefix, `added` the closers a repair appends. Checks:
    the relational invariants of the stored log; restore admission, invariants
    and closer idempotence of the repaired log; provider pairing of its history
    and the tool-pairing fold over its surface.
    """
    problems: list[Json] = [
        {"check": "invariants", "seq": v.seq, "rule": v.rule, "message": v.message}
        for v in check_invariants(stored)
    ]
    repaired = (*stored, *added)
    try:
        restored = SessionLog.restore(repaired, header=header)
    except KernelError as exc:
        problems.append({"check": "repair", "message": f"{type(exc).__name__}: {exc}"})
        return problems
    if added:
        problems.extend(
            {"check": "repair", "seq": v.seq, "rule": v.rule, "message": v.message}
            for v in check_invariants(repaired)
            if v.seq >= len(stored)
        )
    try:
        again = interrupted_turn_closers(repaired)
    except KernelError as exc:
        problems.append({"check": "repair", "message": f"{type(exc).__name__}: {exc}"})
    else:
        if again:
            problems.append(
                {"check": "repair", "message": f"repaired log still needs {len(again)} closer(s)"}
            )
    problems.extend(
        {"check": "pairing", "message": text}
        for text in provider_pairing_problems(tuple(restored.messages))
    )
    try:
        tool_pairing_cuts(repaired)
    except KernelError as exc:
        problems.append({"check": "pairing", "message": f"{type(exc).__name__}: {exc}"})
    return problems


def inspection(header: Json | None, stored: Sequence[Event], added: Sequence[Event]) -> Json:
    """The event-level part of `inspect`: counts, turns, surface, messages, header, closers."""
    turn_list = turns(stored)
    return {
        "header": header,
        "events": {"total": len(stored), "byType": event_counts(stored)},
        "turns": turn_list,
        "lastTurnOpen": bool(turn_list) and turn_list[-1]["open"],
        "surface": surface(stored),
        "messages": messages(stored),
        "requestHeader": request_header(fold_request_header(stored)),
        "repair": {"closers": closers(added)},
    }


def _event_detail(event: Event) -> str | None:
    """What names one event in a list: its message's role and id, else its turn, step, call."""
    message = project_message(event)
    if message is not None:
        parts = [_get(message, "role"), _get(message, "id")]
        call = _get(_get(message, "source"), "callId")
        if call is not None:
            parts.append(f"(call {call})")
    else:
        data = event.data
        parts = [
            f"{key} {_get(data, key)}" for key in ("turn", "step") if _get(data, key) is not None
        ]
        call = _get(data, "callId")
        if call is not None:
            parts.append(f"call {call}")
    return " ".join(str(part) for part in parts if part is not None) or None


def last_events(events: Sequence[Event], count: int) -> list[Json]:
    """The last `count` events, each as its seq, type and what names it (`inspect --tail`)."""
    start = max(len(events) - count, 0)
    return [
        {"seq": event.seq, "type": event.type, "detail": _event_detail(event)}
        for event in events[start:]
    ]
