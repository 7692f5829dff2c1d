"""The payload of every core event type, and the shapes they embed, as `TypedDict`s.

Static types only: at run time a payload is the plain `dict` it always was, and
admission (R10-R12) stays the one place its rules are checked. The keys are the
wire's (camelCase), so a payload written by hand and one built by
`kernel.values.builders` are the same value. Open sets (content blocks, message
sources, turn-end reasons, stream chunks) are typed by their known members; an
extension member goes through the untyped form of `SessionLog.append`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

__all__ = (
    "JsonValue",
    "JsonObject",
    "CoreEventType",
    "ExtensionEventType",
    "TextBlock",
    "ReasoningBlock",
    "ImageDimensions",
    "ImageAttachment",
    "ImageBlock",
    "ToolCallBlock",
    "ToolResultBlock",
    "ContentBlock",
    "UserSource",
    "SnapshotSection",
    "PluginSource",
    "ModelSource",
    "ToolSource",
    "UserMessage",
    "AssistantMessage",
    "ToolResultMessage",
    "TokenUsage",
    "LlmFailure",
    "CancelCause",
    "HookCancelCause",
    "BareTurnEndReason",
    "AbortedTurnEndReason",
    "ErrorTurnEndReason",
    "TurnEndReason",
    "FinishReason",
    "FailedFinishReason",
    "ReplayEnvelope",
    "BlockStartChunk",
    "TextDeltaChunk",
    "ReasoningDeltaChunk",
    "ToolCallDeltaChunk",
    "BlockEndChunk",
    "UsageChunk",
    "FinishChunk",
    "StreamChunk",
    "LlmCallConfig",
    "AdapterDefaults",
    "ToolSchema",
    "EpochHeader",
    "TodoItem",
    "ToolError",
    "TurnStartData",
    "TurnEndData",
    "StepData",
    "AssistantChunkData",
    "AssistantMessageData",
    "ToolCallData",
    "ToolResultData",
    "TodoWriteData",
    "RequestHeaderData",
    "RequestContextData",
    "EndSeedData",
)

JsonValue: TypeAlias = Any
"""Any lossless JSON value; admission checks it (R1), the type does not."""

JsonObject: TypeAlias = Mapping[str, Any]
"""Any JSON object (a `dict`, or a frozen object read from a log)."""

CoreEventType: TypeAlias = Literal[
    "turn/start",
    "turn/end",
    "step/start",
    "step/end",
    "user/message",
    "assistant/chunk",
    "assistant/message",
    "tool/call",
    "tool/result",
    "todo/write",
    "request/header",
    "request/context",
    "session/end-seed",
]
"""The core event types (docs/format/events.md §6.1): `CORE_TYPES` as a type."""

ExtensionEventType: TypeAlias = Literal[
    "agent-preset/selected",
    "agent/inbox/spliced",
    "approval/asked",
    "approval/decided",
    "approval/policy",
    "command/done",
    "command/run",
    "compaction/end",
    "compaction/prune",
    "compaction/start",
    "compaction/summary",
    "feedback/record",
    "goal/change",
    "hook/invoked",
    "hook/result",
    "llm/retry",
    "llm/retry-started",
    "permission/preset",
    "plan/mode",
    "sandbox/mode",
    "schedule/change",
    "session/title",
    "session/title-llm-request",
    "subagent/descriptor",
    "team/member",
    "team/message/delivered",
    "team/message/queued",
    "team/task",
    "tool-workflow/agent-end",
    "tool-workflow/agent-start",
    "tool-workflow/run-end",
    "tool-workflow/run-start",
    "tool/code-dispatch",
    "tool/code-dispatch-start",
    "web/deepseek-search-llm-request",
]
"""The default known extension types (docs/format/events.md §6.2); their payloads are opaque."""

# -- content blocks (docs/format/events.md §4.3) ------------------------------------------------


class TextBlock(TypedDict):
    type: Literal["text"]
    text: str


class ReasoningBlock(TypedDict):
    type: Literal["reasoning"]
    text: str


class ImageDimensions(TypedDict):
    width: int
    height: int


class ImageAttachment(TypedDict):
    """An `ImageAttachmentRef`: a content-addressed reference, never a path."""

    attachmentId: str
    mediaType: Literal["image/png", "image/jpeg", "image/webp", "image/gif"]
    bytes: int
    width: int
    height: int
    name: NotRequired[str]
    originalDimensions: NotRequired[ImageDimensions]


class ImageBlock(TypedDict):
    type: Literal["image"]
    attachment: ImageAttachment


class ToolCallBlock(TypedDict):
    """A tool call; `arguments` is the raw JSON text the model produced."""

    type: Literal["tool-call"]
    id: str
    name: str
    arguments: str


class ToolResultBlock(TypedDict):
    type: Literal["tool-result"]
    toolCallId: str
    content: Sequence[ContentBlock]
    isError: NotRequired[bool]


ContentBlock: TypeAlias = TextBlock | ReasoningBlock | ImageBlock | ToolCallBlock | ToolResultBlock
"""A content block of a known type."""

# -- messages (docs/format/events.md §4.1, §4.2) ------------------------------------------------


class UserSource(TypedDict):
    kind: Literal["user"]


class SnapshotSection(TypedDict):
    name: str
    text: str


class PluginSource(TypedDict):
    """Context a named producer injected; `form` says what kind (presentation only)."""

    kind: Literal["plugin"]
    plugin: str
    form: NotRequired[Literal["instructions", "catalog", "relay", "recall", "snapshot", "notice"]]
    sections: NotRequired[Sequence[SnapshotSection]]
    summary: NotRequired[str]


class ModelSource(TypedDict):
    kind: Literal["model"]
    provider: str
    model: str
    replayState: NotRequired[JsonValue]


class ToolSource(TypedDict):
    kind: Literal["tool"]
    callId: str


class UserMessage(TypedDict):
    """A user message; it is the whole payload of a `user/message` event."""

    id: str
    role: Literal["user"]
    content: Sequence[ContentBlock]
    source: UserSource | PluginSource


class AssistantMessage(TypedDict):
    id: str
    role: Literal["assistant"]
    content: Sequence[ContentBlock]
    source: ModelSource


class ToolResultMessage(TypedDict):
    """A tool-result message: exactly one `tool-result` block, answering `source.callId`."""

    id: str
    role: Literal["user"]
    content: Sequence[ToolResultBlock]
    source: ToolSource


# -- usage, failures, reasons, stream chunks (docs/format/events.md §4.4, §4.5, §4.8) ----------


class TokenUsage(TypedDict):
    """Token counts of one step; they are disjoint (`inputTokens` excludes cached input)."""

    inputTokens: int
    outputTokens: int
    cacheReadTokens: NotRequired[int]
    cacheWriteTokens: NotRequired[int]
    reasoningTokens: NotRequired[int]


class LlmFailure(TypedDict):
    message: str
    code: str
    status: NotRequired[int]
    providerRetryAfterMs: NotRequired[int]
    requestId: NotRequired[str]


class CancelCause(TypedDict):
    kind: Literal["user", "parent", "disposed", "legacy"]


class HookCancelCause(TypedDict):
    kind: Literal["hook"]
    reason: str


class BareTurnEndReason(TypedDict):
    """`interrupted` is written by crash repair only; a live loop never writes it."""

    kind: Literal["completed", "blocked", "max-tokens", "interrupted"]


class AbortedTurnEndReason(TypedDict):
    kind: Literal["aborted"]
    reason: CancelCause | HookCancelCause


class ErrorTurnEndReason(TypedDict):
    kind: Literal["error"]
    error: LlmFailure


TurnEndReason: TypeAlias = BareTurnEndReason | AbortedTurnEndReason | ErrorTurnEndReason


class FinishReason(TypedDict):
    kind: Literal["stop", "tool-calls", "max-tokens"]


class FailedFinishReason(TypedDict):
    kind: Literal["aborted", "error"]
    failure: LlmFailure


class ReplayEnvelope(TypedDict):
    response: JsonValue
    blocks: NotRequired[Sequence[JsonValue]]


class BlockStartChunk(TypedDict):
    type: Literal["block-start"]
    index: int
    blockType: str


class TextDeltaChunk(TypedDict):
    type: Literal["text-delta"]
    index: int
    text: str


class ReasoningDeltaChunk(TypedDict):
    type: Literal["reasoning-delta"]
    index: int
    text: str


class ToolCallDeltaChunk(TypedDict):
    type: Literal["tool-call-delta"]
    index: int
    id: str
    name: NotRequired[str]
    argumentsDelta: str


class BlockEndChunk(TypedDict):
    type: Literal["block-end"]
    index: int
    block: ContentBlock


class UsageChunk(TypedDict):
    type: Literal["usage"]
    usage: TokenUsage


class FinishChunk(TypedDict):
    type: Literal["finish"]
    reason: FinishReason | FailedFinishReason
    replayState: NotRequired[ReplayEnvelope]


StreamChunk: TypeAlias = (
    BlockStartChunk
    | TextDeltaChunk
    | ReasoningDeltaChunk
    | ToolCallDeltaChunk
    | BlockEndChunk
    | UsageChunk
    | FinishChunk
)

# -- request header pieces (docs/format/events.md §4.6, §4.7) -----------------------------------


class LlmCallConfig(TypedDict):
    provider: str
    model: str
    reasoningEffort: NotRequired[str]
    temperature: NotRequired[float]
    maxTokens: NotRequired[int]
    stop: NotRequired[Sequence[str]]


class AdapterDefaults(TypedDict, total=False):
    """Which config fields the adapter filled in; each marker is the literal `true`."""

    reasoningEffort: Literal[True]
    maxTokens: Literal[True]


class ToolSchema(TypedDict):
    name: str
    description: str
    parameters: JsonObject


class EpochHeader(TypedDict):
    """Everything in a model request except the messages."""

    config: LlmCallConfig
    adapterDefaults: NotRequired[AdapterDefaults]
    system: NotRequired[str]
    tools: NotRequired[Sequence[ToolSchema]]


class TodoItem(TypedDict):
    content: str
    status: Literal["pending", "in_progress", "completed"]


class ToolError(TypedDict):
    """A tool result's internal failure identity, e.g. `TOOL_NOT_STARTED`."""

    name: str
    code: str


# -- the payloads of the core event types (docs/format/events.md §5) ----------------------------


class TurnStartData(TypedDict):
    turn: int


class TurnEndData(TypedDict):
    turn: int
    reason: TurnEndReason


class StepData(TypedDict):
    """The payload of `step/start` and of `step/end`."""

    turn: int
    step: int


class AssistantChunkData(TypedDict):
    turn: int
    step: int
    chunk: StreamChunk


class AssistantMessageData(TypedDict):
    turn: int
    step: int
    message: AssistantMessage
    usage: NotRequired[TokenUsage]
    interrupted: NotRequired[Literal[True]]


class ToolCallData(TypedDict):
    turn: int
    step: int
    callId: str
    name: str
    arguments: str


class ToolResultData(TypedDict):
    turn: int
    step: int
    message: ToolResultMessage
    error: NotRequired[ToolError]
    meta: NotRequired[JsonValue]


class TodoWriteData(TypedDict):
    todos: Sequence[TodoItem]


class RequestHeaderData(TypedDict):
    header: EpochHeader
    reason: Literal["initial", "resume", "change", "series"]
    startsSeries: NotRequired[Literal[True]]


class RequestContextData(TypedDict):
    provider: str
    model: str
    contextWindow: NotRequired[int]


class EndSeedData(TypedDict):
    """`{}`: only the session constructor writes a `session/end-seed`."""
