"""Typed wire envelopes: the shape rules of a stored line, checked in C by one msgspec decode.

One `msgspec` struct per event type (a tagged union on `type`) and per chunk-row
tag. Decoding a line against the union checks R2, R5, R6, the element rules of R7,
R10, R11 and R12 and the chunk-row shape of docs/format/events.md §7.6 without building the
payload. The schema is deliberately *at least as strict* as the exact rule
functions of `kernel.admission`: whatever it refuses goes to those functions, which
decide and name the error. Rules that relate two fields are in `CROSS_CHECKS`.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Annotated, Any, ClassVar, Final, Literal, Union

import msgspec
from msgspec import UNSET, Meta, Raw, Struct, UnsetType

from kernel.admission.payloads import turn_end_reason_ok
from kernel.values.events import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    CORE_TYPES,
    DEFAULT_KNOWN_TYPES,
    LEGACY_TYPES,
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
from kernel.values.json import MAX_SAFE_INTEGER
from kernel.wire.chunks import ROW_TAGS
from kernel.wire.jsontext import parse_json

__all__ = (
    "Envelope",
    "ChunkRow",
    "ToolCallRow",
    "ReplaceOp",
    "decode_line",
    "decode_other",
    "OtherEnvelope",
    "CROSS_CHECKS",
    "ENVELOPE_TYPES",
    "decode_ascii_line",
    "DECODE_ERRORS",
    "delta_facts",
    "STEPPED_TYPES",
    "CALL_IDS",
)

SeqInt = Annotated[int, Meta(ge=0, le=MAX_SAFE_INTEGER)]
SafeInt = Annotated[int, Meta(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER)]
PositiveInt = Annotated[int, Meta(ge=1, le=MAX_SAFE_INTEGER)]
Text = Annotated[str, Meta(min_length=1)]
Number = int | float

DECODE_ERRORS: Final = (
    msgspec.DecodeError,
    msgspec.ValidationError,
    RecursionError,
    UnicodeDecodeError,
)
"""What a typed decode raises on a line it does not accept (deep values recurse in C)."""


class _Shape(Struct, kw_only=True, gc=False):
    """Payload parts: extra members allowed (the rules only constrain the named ones)."""


class _Exact(Struct, kw_only=True, gc=False, forbid_unknown_fields=True):
    """Payload parts with an exact key set."""


# -- payloads ---------------------------------------------------------------------------------


class _TurnData(_Exact):
    turn: PositiveInt
    step: ClassVar[int] = 0  # it has none (`STEPPED_TYPES`)


class _StepData(_Exact):
    turn: PositiveInt
    step: PositiveInt


class _TurnEndData(_Exact):
    turn: PositiveInt
    reason: Raw  # the per-kind rules are checked by `turn_end_reason_ok`
    step: ClassVar[int] = 0  # it has none (`STEPPED_TYPES`)


class _ChunkBody(_Shape):
    type: Text


class _ChunkData(_Exact):
    turn: PositiveInt
    step: PositiveInt
    chunk: _ChunkBody


class _Source(_Shape):
    kind: Text


class _UserMessage(_Shape):
    id: Text
    role: Literal["user"]
    source: _Source
    content: list[Raw]


class _ModelSource(_Shape):
    kind: Literal["model"]
    provider: Text
    model: Text


class _Block(_Shape):
    type: Any = UNSET
    id: Any = UNSET


class _AssistantMessage(_Shape):
    id: Text
    role: Literal["assistant"]
    source: _ModelSource
    content: list[_Block]


class _AssistantData(_Exact):
    turn: PositiveInt
    step: PositiveInt
    message: _AssistantMessage
    usage: dict[str, Number] | UnsetType = UNSET
    interrupted: Literal[True] | UnsetType = UNSET


class _ToolSource(_Shape):
    kind: Literal["tool"]
    callId: Text


class _ResultBlock(_Shape):
    type: Literal["tool-result"]
    content: list[Raw]
    toolCallId: Any = UNSET


class _ResultMessage(_Shape):
    id: Text
    role: Literal["user"]
    source: _ToolSource
    content: Annotated[list[_ResultBlock], Meta(min_length=1, max_length=1)]


class _ResultError(_Exact):
    name: str
    code: str


class _ResultData(_Exact):
    turn: PositiveInt
    step: PositiveInt
    message: _ResultMessage
    error: _ResultError | UnsetType = UNSET
    meta: Raw | UnsetType = UNSET


class _CallData(_Exact):
    turn: PositiveInt
    step: PositiveInt
    callId: Text
    name: str
    arguments: str


class _ContextData(_Exact):
    provider: Text
    model: Text
    contextWindow: Number | UnsetType = UNSET


class _Config(_Shape):
    provider: Text
    model: Text
    reasoningEffort: Text | UnsetType = UNSET
    temperature: Number | UnsetType = UNSET
    maxTokens: Number | UnsetType = UNSET
    stop: list[str] | UnsetType = UNSET


class _Markers(_Exact):
    reasoningEffort: Literal[True] | UnsetType = UNSET
    maxTokens: Literal[True] | UnsetType = UNSET


class _ToolSchema(_Shape):
    name: str
    description: str
    parameters: dict[str, Raw]


class _RequestHeader(_Exact):
    config: _Config
    adapterDefaults: _Markers | UnsetType = UNSET
    system: str | UnsetType = UNSET
    tools: list[_ToolSchema] | UnsetType = UNSET


class _HeaderData(_Exact):
    header: _RequestHeader
    reason: Literal["initial", "resume", "change", "series"]
    startsSeries: Literal[True] | UnsetType = UNSET


# -- envelopes --------------------------------------------------------------------------------


class ReplaceOp(_Exact):
    """A wire `{"op": "replace", "start", "end"}` (R6)."""

    op: Literal["replace"]
    start: SeqInt
    end: SeqInt


class Envelope(Struct, kw_only=True, gc=False, forbid_unknown_fields=True, tag_field="type"):
    """A stored event line; `type` is the tag (`type(envelope).__struct_config__.tag`)."""

    seq: SeqInt
    time: SafeInt
    ignorable: Literal[True] | UnsetType = UNSET


class _SurfaceEnvelope(Envelope, kw_only=True):
    surfaceOp: Literal["append"] | ReplaceOp
    sourceEventSeqs: list[SeqInt] | UnsetType = UNSET


def _envelope(tag: str, data: Any, base: type[Envelope] = Envelope) -> type[Envelope]:
    namespace = {"__annotations__": {"data": data}, "__module__": __name__}
    cls: type[Envelope] = type(f"Wire[{tag}]", (base,), namespace, tag=tag, kw_only=True)
    return cls


_CORE_PAYLOADS: Final[dict[str, Any]] = {
    TURN_START: _TurnData,
    TURN_END: _TurnEndData,
    STEP_START: _StepData,
    STEP_END: _StepData,
    ASSISTANT_CHUNK: _ChunkData,
    TOOL_CALL: _CallData,
    REQUEST_HEADER: _HeaderData,
    REQUEST_CONTEXT: _ContextData,
}
_SURFACE_PAYLOADS: Final[dict[str, Any]] = {
    USER_MESSAGE: _UserMessage,
    ASSISTANT_MESSAGE: _AssistantData,
    TOOL_RESULT: _ResultData,
}
STEPPED_TYPES: Final = frozenset(
    {
        TURN_START,
        TURN_END,
        STEP_START,
        STEP_END,
        ASSISTANT_CHUNK,
        ASSISTANT_MESSAGE,
        TOOL_CALL,
        TOOL_RESULT,
    }
)
"""The types whose typed payload names its turn: it answers `turn` and `step` (0 when it
has none), so a load keeps them beside the line (`kernel.storage.typed.lines`)."""
assert all(
    hasattr(payload, "step")
    for tag, payload in {**_CORE_PAYLOADS, **_SURFACE_PAYLOADS}.items()
    if tag in STEPPED_TYPES
)

CALL_IDS: Final[dict[str, Callable[[Any], str]]] = {
    TOOL_CALL: attrgetter("callId"),
    TOOL_RESULT: attrgetter("message.source.callId"),
}
"""The call id in a typed payload of each type that names one: the call a `tool/call`
makes, the call a `tool/result` answers."""

_ENVELOPES: Final = (
    [_envelope(tag, payload) for tag, payload in _CORE_PAYLOADS.items()]
    + [_envelope(tag, payload, _SurfaceEnvelope) for tag, payload in _SURFACE_PAYLOADS.items()]
    # Types whose payload no rule constrains: any JSON value.
    + [
        _envelope(tag, Raw)
        for tag in sorted(DEFAULT_KNOWN_TYPES)
        if tag not in _CORE_PAYLOADS and tag not in _SURFACE_PAYLOADS
    ]
)
assert {cls.__struct_config__.tag for cls in _ENVELOPES} >= CORE_TYPES


# -- chunk rows (docs/format/events.md §7.1, §7.6) -------------------------------------------------


class _TextRowData(_Exact):
    turn: Number
    step: Number
    index: Number
    dt: list[SafeInt]
    texts: Annotated[list[str], Meta(min_length=1)]


class _ToolRowData(_Exact):
    turn: Number
    step: Number
    index: Number
    dt: list[SafeInt]
    id: str
    args: Annotated[list[str], Meta(min_length=1)]
    name: str | UnsetType = UNSET


_POSITION: Final = frozenset({"turn", "step"})


class ChunkRow(Struct, kw_only=True, gc=False, forbid_unknown_fields=True, tag_field="type"):
    """A stored `text-chunks` or `reasoning-chunks` row.

    Once the load path has checked it, a row is the lazy source (`kernel.values.json.LazySource`)
    of its member events' payloads: `build(k)` is the payload of member `k`
    (docs/format/events.md §7.4).
    """

    seq0: SeqInt
    time0: SafeInt
    data: _TextRowData

    kind: ClassVar[str]
    lossless: ClassVar[bool] = True  # read only once the load path checked the numbers

    def build(self, member: int) -> dict[str, Any]:
        data = self.data
        chunk = {"type": self.kind, "index": data.index, "text": data.texts[member]}
        return {"turn": data.turn, "step": data.step, "chunk": chunk}

    def members(self, keys: frozenset[str]) -> dict[str, Any] | None:
        data = self.data
        return {"turn": data.turn, "step": data.step} if keys <= _POSITION else None

    def chunk_member(self, member: int) -> tuple[tuple[Any, ...], str]:
        """The run key and text `kernel.wire.chunks` packs member `member` by, as it
        would read them from `build(member)` (docs/format/events.md §7.2)."""
        data = self.data
        return (self.kind, data.turn, data.step, data.index), data.texts[member]

    def chunk_run(self) -> tuple[tuple[Any, ...], list[str]]:
        """The run key all members share and their texts in order (`chunk_member` of each)."""
        data = self.data
        return (self.kind, data.turn, data.step, data.index), data.texts


# -- the packing facts of one stored delta chunk (docs/format/events.md §7.2) ----------------------


class _TextDelta(_Exact, tag_field="type", tag="text-delta"):
    index: SafeInt
    text: str


class _ReasoningDelta(_TextDelta, tag="reasoning-delta"):
    pass


class _ToolCallDelta(_Exact, tag_field="type", tag="tool-call-delta"):
    index: SafeInt
    id: str
    argumentsDelta: str
    name: str | UnsetType = UNSET


class _DeltaData(_Exact):
    turn: SafeInt
    step: SafeInt
    chunk: _TextDelta | _ReasoningDelta | _ToolCallDelta


class _DeltaLine(_Shape):
    data: _DeltaData


class _KindBody(_Shape):
    type: str


class _KindData(_Shape):
    chunk: _KindBody


class _KindLine(_Shape):
    data: _KindData


_DELTA_DECODER: Final = msgspec.json.Decoder(_DeltaLine)
_KIND_DECODER: Final = msgspec.json.Decoder(_KindLine)
_DELTA_KINDS: Final = frozenset({"text-delta", "reasoning-delta", "tool-call-delta"})


def delta_facts(line: bytes) -> tuple[tuple[Any, ...], str] | bool | None:
    """The run key and text `kernel.wire.chunks` packs a stored `assistant/chunk` line by,
    read without building its payload. False when its chunk is no delta (it never
    packs); None when that cannot be told this way (the caller reads the payload).

    The key is the one `kernel.wire.chunks` builds from the parsed payload: the same
    numbers (safe integers, read alike by every reader), the same strings (a lone
    surrogate, which msgspec refuses, gives None). A delta with any other member, or
    a number that is not a safe integer, gives None.
    """
    try:
        if _KIND_DECODER.decode(line).data.chunk.type not in _DELTA_KINDS:
            return False
        data = _DELTA_DECODER.decode(line).data
    except DECODE_ERRORS:
        return None
    chunk = data.chunk
    if isinstance(chunk, _TextDelta):
        kind = "text-delta" if type(chunk) is _TextDelta else "reasoning-delta"
        return (kind, data.turn, data.step, chunk.index), chunk.text
    named = chunk.name is not UNSET
    name = chunk.name if named else None
    key = ("tool-call-delta", data.turn, data.step, chunk.index, chunk.id, named, name)
    return key, chunk.argumentsDelta


class _TextRow(ChunkRow, tag="text-chunks"):
    kind = "text-delta"


class _ReasoningRow(ChunkRow, tag="reasoning-chunks"):
    kind = "reasoning-delta"


class ToolCallRow(Struct, kw_only=True, gc=False, forbid_unknown_fields=True, tag_field="type"):
    """A stored `tool-call-chunks` row; like `ChunkRow`, the lazy source of its members'
    payloads once checked."""

    seq0: SeqInt
    time0: SafeInt
    data: _ToolRowData

    lossless: ClassVar[bool] = True  # read only once the load path checked the numbers

    def build(self, member: int) -> dict[str, Any]:
        data = self.data
        chunk: dict[str, Any] = {"type": "tool-call-delta", "index": data.index, "id": data.id}
        if data.name is not UNSET:
            chunk["name"] = data.name
        chunk["argumentsDelta"] = data.args[member]
        return {"turn": data.turn, "step": data.step, "chunk": chunk}

    members = ChunkRow.members

    def chunk_member(self, member: int) -> tuple[tuple[Any, ...], str]:
        """The run key and text `kernel.wire.chunks` packs member `member` by (see
        `ChunkRow.chunk_member`)."""
        data = self.data
        named = data.name is not UNSET
        name = data.name if named else None
        key = ("tool-call-delta", data.turn, data.step, data.index, data.id, named, name)
        return key, data.args[member]

    def chunk_run(self) -> tuple[tuple[Any, ...], list[str]]:
        """The run key all members share and their arguments deltas in order (see
        `ChunkRow.chunk_run`)."""
        return self.chunk_member(0)[0], self.data.args


class _ToolCallRow(ToolCallRow, tag="tool-call-chunks"):
    pass


_DECODER: Final = msgspec.json.Decoder(Union[(_TextRow, _ReasoningRow, _ToolCallRow, *_ENVELOPES)])

ENVELOPE_TYPES: Final[dict[type, str]] = {cls: str(cls.__struct_config__.tag) for cls in _ENVELOPES}
"""The event type of each typed envelope class `decode_line` gives (chunk rows are not events)."""

decode_ascii_line: Final[Callable[[bytes], Any]] = _DECODER.decode
"""`decode_line` for a line known to be ASCII (nothing to check of its UTF-8)."""


def decode_line(line: bytes) -> Envelope | ChunkRow | ToolCallRow:
    """The typed envelope of one stored line.

    Raises one of `DECODE_ERRORS` when the line is not one the schema accepts:
    not JSON, an unknown or legacy type, a shape the rules refuse, or simply a
    spelling the schema does not cover (`1.0` for a seq); the exact rules decide.
    """
    if not line.isascii():
        # msgspec checks the UTF-8 of the strings it decodes, not of those it skips.
        line.decode("utf-8")
    result: Envelope | ChunkRow | ToolCallRow = _DECODER.decode(line)
    return result


class OtherEnvelope(Struct, kw_only=True, gc=False, forbid_unknown_fields=True):
    """A stored event line of a type outside the default vocabulary (its payload is opaque)."""

    type: Text
    seq: SeqInt
    time: SafeInt
    data: Raw
    ignorable: Literal[True] | UnsetType = UNSET


_OTHER_DECODER: Final = msgspec.json.Decoder(OtherEnvelope)
_NOT_OTHER: Final = DEFAULT_KNOWN_TYPES | LEGACY_TYPES | ROW_TAGS


def decode_other(line: bytes) -> OtherEnvelope | None:
    """The envelope of a line whose type no rule knows (an extension from elsewhere), or None.

    For lines `decode_line` refused: None unless the line is exactly such an event
    (a known, legacy or chunk-row type, or any other defect, is the rules' business).
    `RecursionError` passes: the line nests deeper than msgspec reads from here.
    """
    try:
        if not line.isascii():
            line.decode("utf-8")
        envelope = _OTHER_DECODER.decode(line)
    except RecursionError:
        raise
    except DECODE_ERRORS:
        return None
    return None if envelope.type in _NOT_OTHER else envelope


def _result_ids_match(data: _ResultData) -> bool:
    message = data.message
    return bool(message.content[0].toolCallId == message.source.callId)


def _usage_complete(data: _AssistantData) -> bool:
    usage = data.usage
    return usage is UNSET or ("inputTokens" in usage and "outputTokens" in usage)


def _header_consistent(data: _HeaderData) -> bool:
    markers, config = data.header.adapterDefaults, data.header.config
    if markers is not UNSET and (
        (markers.reasoningEffort is True and config.reasoningEffort is UNSET)
        or (markers.maxTokens is True and config.maxTokens is UNSET)
    ):
        return False
    return data.startsSeries is UNSET or data.reason == "change"


_BARE_KINDS: Final = ("completed", "blocked", "max-tokens", "interrupted")  # R12: `kind` alone
_BARE_REASON_TEXTS: Final = frozenset(b'{"kind":"%s"}' % kind.encode() for kind in _BARE_KINDS)


def _reason_valid(data: _TurnEndData) -> bool:
    text = bytes(data.reason)
    # The common reasons, spelled as the writer spells them, are valid without parsing.
    if text in _BARE_REASON_TEXTS:
        return True
    reason = parse_json(text)
    # `disposed` is an older v0 reason that normalization rewrites (persistence.md A.2):
    # the exact pipeline decides, with or without normalization.
    return turn_end_reason_ok(reason) and reason["kind"] != "disposed"


CROSS_CHECKS: Final[dict[str, Callable[[Any], bool]]] = {
    TOOL_RESULT: _result_ids_match,
    ASSISTANT_MESSAGE: _usage_complete,
    REQUEST_HEADER: _header_consistent,
    TURN_END: _reason_valid,
}
"""Per event type, the rules that relate two fields of its typed payload, which the schema
cannot state: R10h (result ids), R11c (markers need their config value), R11f
(`startsSeries` only with `change`), the R12 usage keys and the per-kind `turn/end`
reasons. A type not listed has none."""
