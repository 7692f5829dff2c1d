"""ACP replay: a log as the `session/update` notifications of the Agent Client Protocol.

One fold, two modes. `AcpState.replay(...)` is what `session/load` sends: one chunk
per message block, stream chunks ignored. `AcpState.live(...)` is what a live agent
sends as each event is appended: stream deltas as they arrive, then at the
authoritative `assistant/message` only the part of each block not streamed yet.
Notifications are plain JSON in the wire shape `{"sessionId", "update"}`; the
mapping tables and the reasons are in docs/projections.md.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal

import attrs
from pyrsistent import PVector, pvector

from kernel.admission.payloads import check_payload
from kernel.log import SessionLog
from kernel.projections.blocks import (
    ProjectionError,
    admitted,
    call_of,
    degraded_text,
    image_ref,
    parsed_arguments,
    result_of,
    text_of,
    well_formed,
)
from kernel.values.events import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    END_SEED,
    REQUEST_CONTEXT,
    REQUEST_HEADER,
    STEP_END,
    STEP_START,
    TODO_WRITE,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Event,
)
from kernel.values.json import canonical_text, raw, safe_int, summary, thaw
from kernel.wire.codec import check_event

__all__ = (
    "Notification",
    "AcpState",
    "acp_updates",
    "acp_content",
    "tool_kind",
    "TOOL_KINDS",
)

Notification = dict[str, Any]
"""One `session/update` params object: `{"sessionId": ..., "update": {...}}`."""

View = Literal["transcript", "surface"]

SESSION_TITLE: Final = "session/title"
"""The extension event whose `data.title` becomes a `session_info_update`."""

TOOL_KINDS: Final[Mapping[str, str]] = {
    **dict.fromkeys(("read", "read_file", "cat", "view"), "read"),
    **dict.fromkeys(("write", "edit", "write_file", "edit_file", "apply_patch"), "edit"),
    **dict.fromkeys(("delete", "rm", "remove"), "delete"),
    **dict.fromkeys(("move", "mv", "rename"), "move"),
    **dict.fromkeys(("ls", "list", "glob", "grep", "search", "find"), "search"),
    **dict.fromkeys(("bash", "shell", "exec", "run", "command", "terminal"), "execute"),
    **dict.fromkeys(("fetch", "web_fetch", "http", "curl"), "fetch"),
    "think": "think",
}
"""ACP tool kinds of common tool names (exact, case-insensitive); any other name is `other`."""

_SILENT: Final = frozenset({TURN_START, TURN_END, STEP_END, REQUEST_HEADER, END_SEED})
"""Types no notification is ever sent for (and no state reads)."""
_REPLAYED: Final = frozenset(
    {USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT, TOOL_CALL, TODO_WRITE, REQUEST_CONTEXT}
    | {SESSION_TITLE}
)
"""Types a replay step sends for or remembers; it passes every other event unchanged."""
_CHECKED: Final = frozenset(
    {USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT, TOOL_CALL, REQUEST_CONTEXT}
)
"""Types whose payload `step` reads by key: their shape is checked first."""
_PLAN_STATUSES: Final = frozenset({"pending", "in_progress", "completed"})
_USAGE_KEYS: Final = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")


def tool_kind(name: str) -> str:
    """The ACP `ToolKind` shown for a tool name (`TOOL_KINDS`, else `other`)."""
    if type(name) is not str:
        raise ProjectionError(f"a tool name must be a string, not {summary(name)}")
    return TOOL_KINDS.get(name.lower(), "other")


def acp_content(block: Any) -> dict[str, Any]:
    """One log content block as an ACP `ContentBlock`.

    `text` stays text; a well-formed `image` becomes a `resource_link` to its
    attachment (the log holds a reference, not the bytes an ACP image needs);
    anything else is a text block holding the block's compact JSON. Its strings are
    well-formed (`well_formed`).

    >>> acp_content({"type": "text", "text": "hi"})
    {'type': 'text', 'text': 'hi'}
    """
    return well_formed(_content_block(block))


def _content_block(block: Any) -> dict[str, Any]:
    text = text_of(block)
    if text is not None:
        return {"type": "text", "text": text}
    ref = image_ref(block)
    if ref is not None:
        return {
            "type": "resource_link",
            "name": ref.get("name", ref["attachmentId"]),
            "uri": ref["attachmentId"],
            "mimeType": ref["mediaType"],
            "size": ref["bytes"],
        }
    return {"type": "text", "text": degraded_text(block)}


def _note(session_id: str, update: dict[str, Any]) -> Notification:
    return {"sessionId": session_id, "update": update}


def _chunk(kind: str, content: dict[str, Any], message_id: str | None) -> dict[str, Any]:
    update: dict[str, Any] = {"sessionUpdate": kind, "content": content}
    if message_id is not None:
        update["messageId"] = message_id
    return update


def _user_updates(message: Any) -> list[dict[str, Any]]:
    message = raw(message)
    mid = message["id"]
    return [
        _chunk("user_message_chunk", content, mid)
        for block in message["content"]
        if (content := _content_block(block)).get("text") != ""
    ]


def _tool_call(block: Any) -> dict[str, Any] | None:
    call = call_of(block)
    if call is None:
        return None
    call_id, name, arguments = call
    ok, value = parsed_arguments(arguments)
    update = {
        "sessionUpdate": "tool_call",
        "toolCallId": call_id,
        "title": name,
        "kind": tool_kind(name),
        "status": "pending",
    }
    if not ok or value is not None:  # JSON `null` arguments: no input (the SDK drops nulls)
        update["rawInput"] = value if ok else arguments
    return update


def _consume(left: str, text: str) -> tuple[str, str]:
    """What of `text` is still to send after `left` was streamed: `(unsent, still left)`."""
    if left.startswith(text):
        return "", left[len(text) :]
    if text.startswith(left):
        return text[len(left) :], ""
    return text, ""


def _assistant_updates(message: Any, said: str, thought: str) -> list[dict[str, Any]]:
    """The updates of an assistant message, less the text and reasoning already streamed."""
    message = raw(message)
    mid = message["id"]
    out: list[dict[str, Any]] = []
    for block in message["content"]:
        text = text_of(block)
        if text is not None:
            unsent, said = _consume(said, text)
            if unsent:
                out.append(_chunk("agent_message_chunk", {"type": "text", "text": unsent}, mid))
            continue
        reasoning = text_of(block, "reasoning")
        if reasoning is not None:
            unsent, thought = _consume(thought, reasoning)
            if unsent:
                content = {"type": "text", "text": unsent}
                out.append(_chunk("agent_thought_chunk", content, mid))
            continue
        call = _tool_call(block)
        if call is not None:
            out.append(call)
            continue
        out.append(_chunk("agent_message_chunk", _content_block(block), mid))
    return out


def _result_update(event: Event) -> dict[str, Any]:
    data = raw(event.data)
    call_id, content, is_error = result_of(data["message"])
    error = data.get("error")
    update: dict[str, Any] = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": call_id,
        "status": "failed" if is_error or error is not None else "completed",
        "content": [
            {"type": "content", "content": c}
            for block in content
            if (c := _content_block(block)).get("text") != ""
        ],
    }
    if type(error) is dict:
        update["rawOutput"] = {"error": thaw(error)}
    return update


def _message_updates(event: Event) -> list[dict[str, Any]]:
    """The updates of one surface-type event in replay (nothing was streamed)."""
    if event.type == USER_MESSAGE:
        return _user_updates(event.data)
    if event.type == TOOL_RESULT:
        return [_result_update(event)]
    return _assistant_updates(raw(event.data)["message"], "", "")


def _plan(data: Any) -> dict[str, Any]:
    data = raw(data)
    todos = data.get("todos") if type(data) is dict else data
    if todos is None:
        items: list[Any] = []
    elif type(todos) is list:
        items = todos
    else:
        items = [todos]
    entries = []
    for item in items:
        content = item.get("content") if type(item) is dict else None
        status = item.get("status") if type(item) is dict else None
        if type(content) is str and status in _PLAN_STATUSES:
            entries.append({"content": content, "priority": "medium", "status": status})
        else:
            entries.append(
                {"content": degraded_text(item), "priority": "medium", "status": "pending"}
            )
    return {"sessionUpdate": "plan", "entries": entries}


def _tokens(usage: Any) -> int | None:
    """Tokens in context after a response: the usage counts summed (None if one is bad)."""
    usage = raw(usage)
    if type(usage) is not dict:
        return None
    total = 0
    for key in _USAGE_KEYS:
        if key in usage:
            count = safe_int(usage[key])
            if count is None or count < 0:
                return None
            total += count
    return total


def _session_id(value: Any) -> str:
    if type(value) is not str:
        raise ProjectionError(f"an ACP session id must be a string, not {summary(value)}")
    return value


@attrs.frozen
class AcpState:
    """What the ACP fold knows after a prefix: the mode, the context window in force,
    and the text and reasoning streamed in the open step (live mode only)."""

    session_id: str
    is_live: bool = False
    window: int | None = None
    said: PVector[str] = attrs.field(factory=pvector)
    thought: PVector[str] = attrs.field(factory=pvector)

    @classmethod
    def replay(cls, session_id: str) -> AcpState:
        """The state before the first event of a `session/load` replay."""
        return cls(_session_id(session_id))

    @classmethod
    def live(cls, session_id: str) -> AcpState:
        """The state before the first event a live agent appends."""
        return cls(_session_id(session_id), is_live=True)

    def step(self, event: Event) -> tuple[AcpState, tuple[Notification, ...]]:
        """The state after one more event, and the notifications sent for it.

        The event is one a log admitted (`log.events[-1]` after `log.append`); its
        field types and, for the types read here, its payload shape (R10, R12) are
        checked first, so a malformed event raises `KernelError`, nothing else.
        The notifications' strings are well-formed (`well_formed`).
        """
        event = check_event(event)
        if event.type in _CHECKED:
            check_payload(event.type, event.data, f"event seq {event.seq}")
        state, notes = self._advance(event)
        return state, well_formed(notes)

    def _advance(self, event: Event) -> tuple[AcpState, tuple[Notification, ...]]:
        """`step` of an event known to be admitted."""
        if event.type in _SILENT:
            return self, ()
        if event.type == ASSISTANT_CHUNK and not self.is_live:
            return self, ()
        updates, state = self._updates(event)
        if not updates:
            return state, ()
        sid = self.session_id
        return state, tuple([_note(sid, u) for u in updates])

    def _updates(self, event: Event) -> tuple[list[dict[str, Any]], AcpState]:
        kind = event.type
        if kind == ASSISTANT_CHUNK:
            return self._chunk(event)
        if kind == ASSISTANT_MESSAGE:
            data = raw(event.data)
            # Joined as admission joins a message's text: a pair split between two
            # chunks is the one character the message holds.
            said = canonical_text("".join(self.said))
            thought = canonical_text("".join(self.thought))
            updates = _assistant_updates(data["message"], said, thought)
            used = _tokens(data.get("usage")) if self.window is not None else None
            if used is not None:
                updates.append({"sessionUpdate": "usage_update", "used": used, "size": self.window})
            state = self if not self.said and not self.thought else self._fresh()
            return updates, state
        if kind in (USER_MESSAGE, TOOL_RESULT):
            return _message_updates(event), self
        if kind == TOOL_CALL:
            call_id = raw(event.data)["callId"]
            return [
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": call_id,
                    "status": "in_progress",
                }
            ], self
        if kind == TODO_WRITE:
            return [_plan(event.data)], self
        if kind == REQUEST_CONTEXT:
            window = safe_int(raw(event.data).get("contextWindow"))
            window = window if window is not None and window >= 0 else None
            return [], self if window == self.window else attrs.evolve(self, window=window)
        if kind == STEP_START:
            return [], self if not self.said and not self.thought else self._fresh()
        if kind == SESSION_TITLE:
            data = raw(event.data)
            title = data.get("title") if type(data) is dict else None
            if type(title) is str:
                return [{"sessionUpdate": "session_info_update", "title": title}], self
        return [], self

    def _fresh(self) -> AcpState:
        return attrs.evolve(self, said=pvector(), thought=pvector())

    def _chunk(self, event: Event) -> tuple[list[dict[str, Any]], AcpState]:
        if not self.is_live:
            return [], self
        data = raw(event.data)
        chunk = data.get("chunk") if type(data) is dict else None
        kind = chunk.get("type") if type(chunk) is dict else None
        text = chunk.get("text") if type(chunk) is dict else None
        if type(text) is not str or not text:
            return [], self
        if kind == "text-delta":
            update = _chunk("agent_message_chunk", {"type": "text", "text": text}, None)
            return [update], attrs.evolve(self, said=self.said.append(text))
        if kind == "reasoning-delta":
            update = _chunk("agent_thought_chunk", {"type": "text", "text": text}, None)
            return [update], attrs.evolve(self, thought=self.thought.append(text))
        return [], self


def acp_updates(
    events: Iterable[Event] | SessionLog,
    *,
    session_id: str,
    view: View = "transcript",
) -> tuple[Notification, ...]:
    """The `session/update` notifications that replay a log on `session/load`.

    `view="transcript"`: every event's notifications in log order (`AcpState.replay`
    stepped through the log): messages shadowed by a compaction included, plans,
    usage and title updates too. `view="surface"`: the model-visible history only,
    the surface nodes in surface order. The log is admitted first (restore path);
    a log admission refuses raises its `KernelError` and nothing is projected.
    Every string is well-formed: a lone surrogate of the log is sent as U+FFFD.

    >>> from kernel import SessionLog, APPEND
    >>> log = SessionLog.empty().append("user/message", {"id": "u1", "role": "user",
    ...     "content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}},
    ...     time=0, surface_op=APPEND)
    >>> acp_updates(log.events, session_id="s")[0]["update"]["sessionUpdate"]
    'user_message_chunk'
    """
    session_id = _session_id(session_id)
    if view != "transcript" and view != "surface":
        raise ProjectionError(
            f"acp_updates: view must be 'transcript' or 'surface', not {summary(view)}"
        )
    log = admitted(events)
    if view == "surface":
        sid = session_id
        return well_formed(
            tuple(
                _note(sid, update)
                for seq in log.surface.nodes
                for update in _message_updates(log.events[seq])
            )
        )
    out: list[Notification] = []

    def step(state: AcpState, event: Event) -> AcpState:
        state, notes = state._advance(event)
        out.extend(notes)
        return state

    # Every other type is an identity step of a replay: skip it without a call.
    replayed = [e for e in log.events if e.type in _REPLAYED]
    functools.reduce(step, replayed, AcpState.replay(session_id))
    return well_formed(tuple(out))
