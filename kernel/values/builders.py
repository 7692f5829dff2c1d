"""Payload builders: the `data` of each core event type, from keyword arguments.

Each builder returns the plain wire `dict` (keys in the order of
docs/format/events.md) typed as its `kernel.values.payloads` TypedDict, so
`log.append("tool/call", tool_call(...), time=t)` is checked by mypy and
admitted exactly as the hand-written dict is. Builders check nothing
(admission does) and invent nothing: ids and times come from the caller, or
from `message_id`, which is a pure function of its arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeVar

from kernel.errors import MessageShapeError
from kernel.values.json import MAX_SAFE_INTEGER, summary, thaw
from kernel.values.payloads import (
    AssistantChunkData,
    AssistantMessage,
    AssistantMessageData,
    ContentBlock,
    EpochHeader,
    ImageAttachment,
    ImageBlock,
    ImageDimensions,
    JsonObject,
    JsonValue,
    ModelSource,
    PluginSource,
    ReasoningBlock,
    RequestContextData,
    RequestHeaderData,
    StepData,
    StreamChunk,
    TextBlock,
    TodoItem,
    TodoWriteData,
    TokenUsage,
    ToolCallBlock,
    ToolCallData,
    ToolError,
    ToolResultBlock,
    ToolResultData,
    ToolResultMessage,
    ToolSchema,
    TurnEndData,
    TurnEndReason,
    TurnStartData,
    UserMessage,
    UserSource,
)

__all__ = (
    "message_id",
    "text_block",
    "reasoning_block",
    "image_block",
    "tool_call_block",
    "tool_result_block",
    "user_message",
    "model_message",
    "tool_result_message",
    "turn_start",
    "turn_end",
    "step_start",
    "step_end",
    "assistant_chunk",
    "assistant_message",
    "tool_call",
    "tool_result",
    "todo_write",
    "tool_schema",
    "request_header",
    "request_context",
    "compaction_summary",
    "pruned_tool_result",
)

_T = TypeVar("_T")

MediaType = Literal["image/png", "image/jpeg", "image/webp", "image/gif"]


def message_id(
    role: Literal["user", "assistant", "tool"], *, turn: int, step: int, index: int = 0
) -> str:
    """A deterministic message id: `"{role}-{turn}.{step}.{index}"`.

    Unique within a session when each `(role, turn, step, index)` names one
    message (turns are numbered per session, steps per turn; `index` tells
    apart several messages of one role in one step, e.g. tool results).

    >>> message_id("tool", turn=3, step=2, index=1)
    'tool-3.2.1'

    A role that is not a string or a number that is not a safe integer is a
    `MessageShapeError` (the id is spelled from them, so they are not left to admission).
    """
    numbers = (turn, step, index)
    if type(role) is not str or not all(
        type(n) is int and -MAX_SAFE_INTEGER <= n <= MAX_SAFE_INTEGER for n in numbers
    ):
        raise MessageShapeError(
            f"message_id takes a role string and safe integers, got {summary(role)}, "
            f"{summary(turn)}, {summary(step)}, {summary(index)}"
        )
    return f"{role}-{turn}.{step}.{index}"


def _listed(values: Sequence[_T]) -> list[_T]:
    """`values` as a list; what is not iterable is left as it is, for admission to refuse."""
    try:
        return list(values)
    except TypeError:
        return values  # type: ignore[return-value]


def _content(content: str | Sequence[ContentBlock]) -> list[ContentBlock]:
    """A list of blocks; a string is one text block."""
    return [text_block(content)] if isinstance(content, str) else _listed(content)


# -- content blocks -----------------------------------------------------------------------------


def text_block(text: str) -> TextBlock:
    """`{"type": "text", "text": text}`."""
    return {"type": "text", "text": text}


def reasoning_block(text: str) -> ReasoningBlock:
    """`{"type": "reasoning", "text": text}`: the model's visible reasoning."""
    return {"type": "reasoning", "text": text}


def image_block(
    *,
    attachment_id: str,
    media_type: MediaType,
    bytes: int,
    width: int,
    height: int,
    name: str | None = None,
    original_dimensions: ImageDimensions | None = None,
) -> ImageBlock:
    """An image block: a content-addressed attachment reference (`"sha256:…"`), never a path.

    `name` and `original_dimensions` are written only when given.
    """
    attachment: ImageAttachment = {
        "attachmentId": attachment_id,
        "mediaType": media_type,
        "bytes": bytes,
        "width": width,
        "height": height,
    }
    if name is not None:
        attachment["name"] = name
    if original_dimensions is not None:
        attachment["originalDimensions"] = original_dimensions
    return {"type": "image", "attachment": attachment}


def tool_call_block(*, id: str, name: str, arguments: str) -> ToolCallBlock:
    """A tool call the model asked for; `arguments` is its raw JSON text, unparsed."""
    return {"type": "tool-call", "id": id, "name": name, "arguments": arguments}


def tool_result_block(
    *, tool_call_id: str, content: str | Sequence[ContentBlock], is_error: bool = False
) -> ToolResultBlock:
    """The answer to tool call `tool_call_id`; `isError` is always written, as the reference does.

    A string `content` is one text block (so for every builder taking `content`).
    """
    return {
        "type": "tool-result",
        "toolCallId": tool_call_id,
        "content": _content(content),
        "isError": is_error,
    }


# -- messages -----------------------------------------------------------------------------------


def user_message(
    *,
    id: str,
    content: str | Sequence[ContentBlock],
    source: UserSource | PluginSource | None = None,
) -> UserMessage:
    """A user message, which is the whole `user/message` payload (it has no turn or step).

    `source` defaults to `{"kind": "user"}`, a human prompt; injected context
    names its producer with a `plugin` source.

    >>> user_message(id="u1", content="hi")["content"]
    [{'type': 'text', 'text': 'hi'}]
    """
    return {
        "id": id,
        "role": "user",
        "content": _content(content),
        "source": {"kind": "user"} if source is None else source,
    }


def model_message(
    *,
    id: str,
    content: str | Sequence[ContentBlock],
    provider: str,
    model: str,
    replay_state: JsonValue = None,
) -> AssistantMessage:
    """An assistant message from `provider`'s `model`; `replayState` is written unless None."""
    source: ModelSource = {"kind": "model", "provider": provider, "model": model}
    if replay_state is not None:
        source["replayState"] = replay_state
    return {"id": id, "role": "assistant", "content": _content(content), "source": source}


def tool_result_message(
    *, id: str, call_id: str, content: str | Sequence[ContentBlock], is_error: bool = False
) -> ToolResultMessage:
    """The message answering tool call `call_id`: one `tool-result` block and a tool source."""
    return {
        "id": id,
        "role": "user",
        "content": [tool_result_block(tool_call_id=call_id, content=content, is_error=is_error)],
        "source": {"kind": "tool", "callId": call_id},
    }


# -- the payloads of the core event types -------------------------------------------------------


def turn_start(*, turn: int) -> TurnStartData:
    """`turn/start`: opens model-loop run `turn` (numbered from 1 per session)."""
    return {"turn": turn}


def turn_end(*, turn: int, reason: TurnEndReason) -> TurnEndData:
    """`turn/end`: closes turn `turn`; `reason` is e.g. `{"kind": "completed"}`."""
    return {"turn": turn, "reason": reason}


def step_start(*, turn: int, step: int) -> StepData:
    """`step/start`: one model call and the tool runs it asks for (steps from 1 per turn)."""
    return {"turn": turn, "step": step}


def step_end(*, turn: int, step: int) -> StepData:
    """`step/end`: the durable statement that the step finished."""
    return {"turn": turn, "step": step}


def assistant_chunk(*, turn: int, step: int, chunk: StreamChunk) -> AssistantChunkData:
    """`assistant/chunk`: one raw stream record (never projected into messages).

    `chunk` is e.g. `{"type": "text-delta", "index": 0, "text": "He"}`.
    """
    return {"turn": turn, "step": step, "chunk": chunk}


def assistant_message(
    *,
    turn: int,
    step: int,
    message: AssistantMessage,
    usage: TokenUsage | None = None,
    interrupted: bool = False,
) -> AssistantMessageData:
    """`assistant/message`: the step's model output; `usage` when the adapter reported it.

    `interrupted=True` marks a cancelled stream's finalized prefix (written only when true).
    """
    data: AssistantMessageData = {"turn": turn, "step": step, "message": message}
    if usage is not None:
        data["usage"] = usage
    if interrupted:
        data["interrupted"] = True
    return data


def tool_call(*, turn: int, step: int, call_id: str, name: str, arguments: str) -> ToolCallData:
    """`tool/call`: the runtime starts executing one call the assistant message requested."""
    return {"turn": turn, "step": step, "callId": call_id, "name": name, "arguments": arguments}


def tool_result(
    *,
    turn: int,
    step: int,
    id: str,
    call_id: str,
    content: str | Sequence[ContentBlock],
    is_error: bool = False,
    error: ToolError | None = None,
    meta: JsonValue = None,
) -> ToolResultData:
    """`tool/result`: the message answering `call_id`, with `content` as the tool's output.

    `is_error` is what the model sees; `error` (`{name, code}`) is the internal
    failure identity, and `meta` the tool's own opaque data: each written only
    when given.
    """
    data: ToolResultData = {
        "turn": turn,
        "step": step,
        "message": tool_result_message(id=id, call_id=call_id, content=content, is_error=is_error),
    }
    if error is not None:
        data["error"] = error
    if meta is not None:
        data["meta"] = meta
    return data


def todo_write(*, todos: Sequence[TodoItem]) -> TodoWriteData:
    """`todo/write`: the complete todo list (the latest write wins)."""
    return {"todos": _listed(todos)}


def tool_schema(*, name: str, description: str, parameters: JsonObject) -> ToolSchema:
    """A tool offered to the model; `parameters` is a JSON Schema object."""
    return {"name": name, "description": description, "parameters": parameters}


def request_header(
    *,
    header: EpochHeader,
    reason: Literal["initial", "resume", "change", "series"],
    starts_series: bool = False,
) -> RequestHeaderData:
    """`request/header`: a complete header snapshot (write it in canonical form).

    `header_event` decides when one is due and returns this payload itself;
    `starts_series=True` is only valid with reason `change`.
    """
    data: RequestHeaderData = {"header": header, "reason": reason}
    if starts_series:
        data["startsSeries"] = True
    return data


def request_context(
    *, provider: str, model: str, context_window: int | None = None
) -> RequestContextData:
    """`request/context`: the route of the next request; `contextWindow` unless None."""
    data: RequestContextData = {"provider": provider, "model": model}
    if context_window is not None:
        data["contextWindow"] = context_window
    return data


# -- compaction ---------------------------------------------------------------------------------


def compaction_summary(*, id: str, text: str, plugin: str = "compact") -> UserMessage:
    """A summary `user/message` to append with `surface_op=Replace(start, end)`.

    It must cite every surface node it shadows in `source_event_seqs` (R8).
    """
    return user_message(id=id, content=text, source={"kind": "plugin", "plugin": plugin})


def pruned_tool_result(
    original: ToolResultData | JsonObject, *, content: str | Sequence[ContentBlock]
) -> ToolResultData:
    """A `tool/result` that rewrites `original`'s result content, and nothing else (R9).

    `original` is the payload of the result it replaces (a plain or frozen
    `event.data`); append it with `surface_op=Replace(seq, seq)` and
    `source_event_seqs=[seq]`.
    """
    data = thaw(original)
    message = data.get("message") if type(data) is dict else None
    blocks = message.get("content") if type(message) is dict else None
    if type(blocks) is not list or len(blocks) != 1 or type(blocks[0]) is not dict:
        raise MessageShapeError(
            f"pruned_tool_result: {summary(original)} is not a tool/result payload (R10g)"
        )
    blocks[0]["content"] = _content(content)
    result: ToolResultData = data
    return result
