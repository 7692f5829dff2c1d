"""Provider responses into events: the inverse of `openai_request` and `anthropic_request`.

A Chat Completions or Messages response becomes the `assistant/message` payload a
runtime appends (text, reasoning, tool calls with their argument text, usage), and a
streamed one becomes `assistant/chunk` payloads and then that message. Responses are
plain JSON (an SDK object's `model_dump()`), and their shape is checked before
anything is read: a malformed one raises `MessageShapeError`, never a `KeyError`. Ids
and times come from the caller. The rules shared by both paths (which text becomes a
block, and in what order) live in `_Assembly`, so a streamed response gives the message
the same response gives unstreamed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, NoReturn, cast

import attrs
from pyrsistent import PMap, PVector, pmap, pvector

from kernel.errors import MessageShapeError
from kernel.values.builders import (
    assistant_chunk,
    assistant_message,
    model_message,
    reasoning_block,
    text_block,
    tool_call_block,
)
from kernel.values.json import summary
from kernel.values.payloads import (
    AssistantChunkData,
    AssistantMessageData,
    ContentBlock,
    FailedFinishReason,
    FinishReason,
    StreamChunk,
    TokenUsage,
    ToolCallDeltaChunk,
)

__all__ = (
    "ResponseEvents",
    "OpenAIStream",
    "AnthropicStream",
    "openai_response_events",
    "openai_stream_events",
    "anthropic_response_events",
    "anthropic_stream_events",
)

Finish = FinishReason | FailedFinishReason
Chunks = tuple[AssistantChunkData, ...]
_NONE: Final[Chunks] = ()


@attrs.frozen
class ResponseEvents:
    """The payloads one provider response appends, in order, and how the model stopped.

    `chunks` are `assistant/chunk` payloads (none for a response that was not
    streamed; from `close()`, only those the stream had not yet returned), then
    `message` is the `assistant/message` payload. `finish` is the kernel's finish
    reason (`stop`, `tool-calls`, `max-tokens`, or `error` with the provider's
    reason as its code): what a runtime reads to run the calls or end the turn.
    """

    chunks: Chunks
    message: AssistantMessageData
    finish: Finish


# -- reading plain JSON ---------------------------------------------------------------------------


def _fail(who: str, path: str, problem: str) -> NoReturn:
    raise MessageShapeError(f"{who}: {path} {problem}")


def _object(value: Any, who: str, path: str) -> Mapping[str, Any]:
    if not issubclass(type(value), Mapping) or not all(type(k) is str for k in value):
        hint = " (pass the SDK object's model_dump())" if hasattr(value, "model_dump") else ""
        _fail(who, path, f"is not a JSON object: {summary(value)}{hint}")
    return cast("Mapping[str, Any]", value)


def _array(value: Any, who: str, path: str) -> Sequence[Any]:
    if type(value) not in (list, tuple):
        _fail(who, path, f"is not an array: {summary(value)}")
    return value  # type: ignore[no-any-return]


def _string(value: Any, who: str, path: str, *, empty: bool = True) -> str:
    if type(value) is not str or (not empty and not value):
        _fail(who, path, f"is not a {'' if empty else 'non-empty '}string: {summary(value)}")
    return value


def _maybe_string(value: Any, who: str, path: str) -> str | None:
    return None if value is None else _string(value, who, path)


def _count(value: Any, who: str, path: str) -> int:
    if type(value) is not int or value < 0:
        _fail(who, path, f"is not a non-negative integer: {summary(value)}")
    return value


def _maybe_count(value: Any, who: str, path: str) -> int | None:
    return None if value is None else _count(value, who, path)


def _absent(obj: Mapping[str, Any], keys: Iterable[str], who: str, path: str) -> None:
    """Refuse what the kernel's message cannot carry (audio, legacy function calls, ...)."""
    for key in keys:
        if obj.get(key) is not None:
            _fail(
                who, f"{path}.{key}", f"is set: {summary(obj[key])}, which this mapping cannot keep"
            )


_CODE_CHAR: Final = re.compile(r"[^A-Za-z0-9]")


def _failed(reason: str, who: str) -> FailedFinishReason:
    code = _CODE_CHAR.sub("_", reason).upper() or "UNKNOWN"
    return {
        "kind": "error",
        "failure": {"message": f"{who}: the model stopped with {reason!r}", "code": code},
    }


def _compact(value: Any) -> str:
    """A tool input object as argument text: compact JSON, members in the model's order.

    Not `JSON.stringify`'s spelling, which moves integer-like keys (`"0"`) first.
    """
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


# -- the message both paths assemble --------------------------------------------------------------


@attrs.frozen
class _Block:
    """One block being assembled: its kind, the text pieces so far, a call's identity."""

    kind: str  # "text", "reasoning" or "tool-call"
    pieces: PVector[str] = attrs.field(factory=pvector)
    id: str = ""
    name: str = ""
    fallback: str = ""  # a call's arguments when no delta came (Anthropic's start input)
    named: bool = False  # a delta has carried the call's name
    ended: bool = False

    def built(self) -> ContentBlock:
        text = "".join(self.pieces)
        if self.kind == "tool-call":
            return tool_call_block(id=self.id, name=self.name, arguments=text or self.fallback)
        return text_block(text) if self.kind == "text" else reasoning_block(text)


@attrs.frozen
class _Assembly:
    """The message of one response so far, and the stream chunks that built it.

    Text and reasoning with no characters make no block; a call is a block from its
    start. Blocks are numbered (the chunks' `index`) in the order they open, which is
    the order of the message's content.
    """

    turn: int
    step: int
    message_id: str
    provider: str
    who: str
    model: str | None = None
    blocks: PVector[_Block] = attrs.field(factory=pvector)
    usage: TokenUsage | None = None
    finish: Finish | None = None
    replay: PVector[Any] = attrs.field(factory=pvector)

    def _chunk(self, chunk: StreamChunk) -> AssistantChunkData:
        return assistant_chunk(turn=self.turn, step=self.step, chunk=chunk)

    def opened(self, block: _Block) -> tuple[_Assembly, int, AssistantChunkData]:
        index = len(self.blocks)
        start = self._chunk({"type": "block-start", "index": index, "blockType": block.kind})
        return attrs.evolve(self, blocks=self.blocks.append(block)), index, start

    def extended(self, index: int, text: str) -> tuple[_Assembly, Chunks]:
        """Add `text` to block `index`; a call's first delta carries its name even when empty."""
        block = self.blocks[index]
        chunk: StreamChunk
        if block.kind == "text":
            if not text:
                return self, ()
            chunk = {"type": "text-delta", "index": index, "text": text}
        elif block.kind == "reasoning":
            if not text:
                return self, ()
            chunk = {"type": "reasoning-delta", "index": index, "text": text}
        elif text or not block.named:
            call: ToolCallDeltaChunk = {
                "type": "tool-call-delta",
                "index": index,
                "id": block.id,
                "argumentsDelta": text,
            }
            if not block.named:
                call = {
                    "type": "tool-call-delta",
                    "index": index,
                    "id": block.id,
                    "name": block.name,
                    "argumentsDelta": text,
                }
            chunk = call
        else:
            return self, ()
        pieces = block.pieces.append(text) if text else block.pieces
        blocks = self.blocks.set(index, attrs.evolve(block, pieces=pieces, named=True))
        return attrs.evolve(self, blocks=blocks), (self._chunk(chunk),)

    def ended(self, index: int) -> tuple[_Assembly, Chunks]:
        """`block-end` for block `index` (after a call's start input, when no delta came)."""
        state, out = self, _NONE
        block = self.blocks[index]
        if block.kind == "tool-call" and not block.pieces and (block.fallback or not block.named):
            state, out = state.extended(index, block.fallback)
            block = state.blocks[index]
        end = self._chunk({"type": "block-end", "index": index, "block": block.built()})
        blocks = state.blocks.set(index, attrs.evolve(block, ended=True))
        return attrs.evolve(state, blocks=blocks), (*out, end)

    def message(self) -> AssistantMessageData:
        if self.model is None:
            _fail(self.who, "the response", "names no model")
        built = model_message(
            id=self.message_id,
            content=[b.built() for b in self.blocks],
            provider=self.provider,
            model=self.model,
            replay_state={"thinking": list(self.replay)} if self.replay else None,
        )
        return assistant_message(turn=self.turn, step=self.step, message=built, usage=self.usage)

    def closed(self) -> ResponseEvents:
        """The chunks that end the stream (open blocks' ends, usage, finish) and the message."""
        if self.finish is None:
            _fail(self.who, "the stream", "ended before the model said why it stopped")
        state: _Assembly = self
        out: list[AssistantChunkData] = []
        for index, block in enumerate(self.blocks):
            if not block.ended:
                state, ends = state.ended(index)
                out.extend(ends)
        if state.usage is not None:
            out.append(self._chunk({"type": "usage", "usage": state.usage}))
        out.append(self._chunk({"type": "finish", "reason": self.finish}))
        return ResponseEvents(tuple(out), state.message(), self.finish)

    def unstreamed(self) -> ResponseEvents:
        if self.finish is None:
            _fail(self.who, "the response", "does not say why the model stopped")
        return ResponseEvents((), self.message(), self.finish)


def _text_blocks(assembly: _Assembly, kind: str, text: str) -> _Assembly:
    """A non-streamed response's text or reasoning as one block (none when it is empty)."""
    if not text:
        return assembly
    state, index, _ = assembly.opened(_Block(kind))
    return state.extended(index, text)[0]


def _call_block(assembly: _Assembly, call_id: str, name: str, arguments: str) -> _Assembly:
    state, _, _ = assembly.opened(_Block("tool-call", id=call_id, name=name, fallback=arguments))
    return state


# -- OpenAI Chat Completions ----------------------------------------------------------------------

_OPENAI_FINISH: Final[Mapping[str, FinishReason]] = {
    "stop": {"kind": "stop"},
    "tool_calls": {"kind": "tool-calls"},
    "function_call": {"kind": "tool-calls"},
    "length": {"kind": "max-tokens"},
}

_OPENAI_UNKEPT: Final = ("audio", "function_call")


def _openai_finish(value: Any, who: str, path: str) -> Finish:
    reason = _string(value, who, path, empty=False)
    known = _OPENAI_FINISH.get(reason)
    return {"kind": known["kind"]} if known is not None else _failed(reason, who)


def _openai_usage(value: Any, who: str) -> TokenUsage:
    """Disjoint counts: `prompt_tokens` less its cached part, which is `cacheReadTokens`."""
    usage = _object(value, who, "usage")
    prompt = _count(usage.get("prompt_tokens"), who, "usage.prompt_tokens")
    output = _count(usage.get("completion_tokens"), who, "usage.completion_tokens")
    details = usage.get("prompt_tokens_details")
    cached = None
    if details is not None:
        details = _object(details, who, "usage.prompt_tokens_details")
        cached = _maybe_count(
            details.get("cached_tokens"), who, "usage.prompt_tokens_details.cached_tokens"
        )
    if cached is None:  # DeepSeek's spelling
        cached = _maybe_count(
            usage.get("prompt_cache_hit_tokens"), who, "usage.prompt_cache_hit_tokens"
        )
    if cached is not None and cached > prompt:
        _fail(who, "usage", f"counts {cached} cached of {prompt} prompt tokens")
    out: TokenUsage = {"inputTokens": prompt - (cached or 0), "outputTokens": output}
    if cached is not None:
        out["cacheReadTokens"] = cached
    completion = usage.get("completion_tokens_details")
    if completion is not None:
        completion = _object(completion, who, "usage.completion_tokens_details")
        reasoning = _maybe_count(
            completion.get("reasoning_tokens"),
            who,
            "usage.completion_tokens_details.reasoning_tokens",
        )
        if reasoning is not None:
            out["reasoningTokens"] = reasoning
    return out


def _only_choice(
    body: Mapping[str, Any], who: str, choices_key: str = "choices"
) -> Mapping[str, Any] | None:
    choices = _array(body.get(choices_key), who, choices_key)
    if not choices:
        return None
    if len(choices) > 1:
        _fail(who, choices_key, f"holds {len(choices)} choices; one response is one message (n=1)")
    choice = _object(choices[0], who, "choices[0]")
    if choice.get("index") != 0 or type(choice.get("index")) is not int:
        _fail(who, "choices[0].index", f"is {summary(choice.get('index'))}, not 0")
    return choice


def openai_response_events(
    response: Mapping[str, Any],
    *,
    turn: int,
    step: int,
    message_id: str,
    provider: str = "openai",
) -> ResponseEvents:
    """The `assistant/message` a Chat Completions response appends (`chat.completion`).

    `response` is the response body as JSON (`ChatCompletion.model_dump()`); `provider`
    is the message's `source.provider` (e.g. `"deepseek"` for its compatible API), and
    `source.model` is the response's `model`. The content is the reasoning
    (`reasoning_content`, DeepSeek's field), the text, the refusal text, then the
    function calls with their argument text as the model wrote it; empty text makes no
    block. Raises `MessageShapeError` for a malformed response, several choices, or
    what the message cannot keep (audio, a legacy `function_call`, a custom tool call).
    """
    who = "openai response"
    body = _object(response, who, "response")
    choice = _only_choice(body, who)
    if choice is None:
        _fail(who, "choices", "is empty")
    message = _object(choice.get("message"), who, "choices[0].message")
    _absent(message, _OPENAI_UNKEPT, who, "choices[0].message")
    state = _Assembly(
        turn, step, message_id, provider, who, _string(body.get("model"), who, "model", empty=False)
    )
    for key, kind in (("reasoning_content", "reasoning"), ("content", "text"), ("refusal", "text")):
        text = _maybe_string(message.get(key), who, f"choices[0].message.{key}")
        state = _text_blocks(state, kind, text or "")
    calls = message.get("tool_calls")
    for n, call in enumerate(
        () if calls is None else _array(calls, who, "choices[0].message.tool_calls")
    ):
        path = f"choices[0].message.tool_calls[{n}]"
        call = _object(call, who, path)
        if call.get("type") != "function":
            _fail(
                who, f"{path}.type", f"is {summary(call.get('type'))}: only function calls are kept"
            )
        function = _object(call.get("function"), who, f"{path}.function")
        state = _call_block(
            state,
            _string(call.get("id"), who, f"{path}.id", empty=False),
            _string(function.get("name"), who, f"{path}.function.name", empty=False),
            _string(function.get("arguments"), who, f"{path}.function.arguments"),
        )
    usage = body.get("usage")
    return attrs.evolve(
        state,
        usage=None if usage is None else _openai_usage(usage, who),
        finish=_openai_finish(choice.get("finish_reason"), who, "choices[0].finish_reason"),
    ).unstreamed()


@attrs.frozen
class OpenAIStream:
    """The fold of a streamed Chat Completions response (`chat.completion.chunk`s).

    `step(chunk)` returns the next state and the `assistant/chunk` payloads to append
    for that chunk: a `block-start` when a block opens, then its deltas. `close()`,
    after the last chunk, returns the ending chunks (each block's `block-end`, `usage`
    when a chunk carried it, `finish`) and the message, which equals what
    `openai_response_events` gives for the same response unstreamed (its blocks in the
    order the stream opened them). `openai_stream_events` is this fold, reduced.
    """

    assembly: _Assembly
    keys: PMap[Any, int] = attrs.field(
        factory=pmap
    )  # "reasoning", "content", "refusal" or call index -> block

    @classmethod
    def start(
        cls, *, turn: int, step: int, message_id: str, provider: str = "openai"
    ) -> OpenAIStream:
        """The state before the first chunk; the arguments are `openai_response_events`'."""
        return cls(_Assembly(turn, step, message_id, provider, "openai stream"))

    def _text(self, key: str, kind: str, text: str) -> tuple[OpenAIStream, Chunks]:
        if not text:
            return self, ()
        state, start = self.assembly, _NONE
        index = self.keys.get(key)
        if index is None:
            state, index, opened = state.opened(_Block(kind))
            start = (opened,)
        state, out = state.extended(index, text)
        return OpenAIStream(state, self.keys.set(key, index)), (*start, *out)

    def _call(self, delta: Any, path: str) -> tuple[OpenAIStream, Chunks]:
        who = self.assembly.who
        call = _object(delta, who, path)
        if call.get("type") not in (None, "function"):
            _fail(
                who, f"{path}.type", f"is {summary(call.get('type'))}: only function calls are kept"
            )
        slot = _count(call.get("index"), who, f"{path}.index")
        function = call.get("function")
        function = {} if function is None else _object(function, who, f"{path}.function")
        call_id = _maybe_string(call.get("id"), who, f"{path}.id")
        name = _maybe_string(function.get("name"), who, f"{path}.function.name")
        arguments = (
            _maybe_string(function.get("arguments"), who, f"{path}.function.arguments") or ""
        )
        state, start = self.assembly, _NONE
        index = self.keys.get(slot)
        if index is None:
            if not call_id or not name:
                _fail(who, path, f"starts call {slot} without its id and name")
            state, index, opened = state.opened(_Block("tool-call", id=call_id, name=name))
            start = (opened,)
        else:
            block = state.blocks[index]
            if (call_id and call_id != block.id) or (name and name != block.name):
                _fail(
                    who, path, f"renames call {slot} ({summary(block.id)}, {summary(block.name)})"
                )
        state, out = state.extended(index, arguments)
        return OpenAIStream(state, self.keys.set(slot, index)), (*start, *out)

    def step(self, chunk: Mapping[str, Any]) -> tuple[OpenAIStream, Chunks]:
        """The state after one more chunk, and the payloads to append for it."""
        who = self.assembly.who
        body = _object(chunk, who, "chunk")
        model = _string(body.get("model"), who, "chunk.model", empty=False)
        assembly = (
            self.assembly
            if self.assembly.model is not None
            else attrs.evolve(self.assembly, model=model)
        )
        if body.get("usage") is not None:
            assembly = attrs.evolve(assembly, usage=_openai_usage(body["usage"], who))
        state = OpenAIStream(assembly, self.keys)
        out: list[AssistantChunkData] = []
        choice = _only_choice(body, who)
        if choice is None:
            return state, ()
        delta = _object(choice.get("delta"), who, "choices[0].delta")
        _absent(delta, _OPENAI_UNKEPT, who, "choices[0].delta")
        for key, kind in (
            ("reasoning_content", "reasoning"),
            ("content", "text"),
            ("refusal", "text"),
        ):
            text = _maybe_string(delta.get(key), who, f"choices[0].delta.{key}")
            state, more = state._text(key, kind, text or "")
            out.extend(more)
        calls = delta.get("tool_calls")
        for n, call in enumerate(
            () if calls is None else _array(calls, who, "choices[0].delta.tool_calls")
        ):
            state, more = state._call(call, f"choices[0].delta.tool_calls[{n}]")
            out.extend(more)
        if choice.get("finish_reason") is not None:
            finish = _openai_finish(choice["finish_reason"], who, "choices[0].finish_reason")
            state = OpenAIStream(attrs.evolve(state.assembly, finish=finish), state.keys)
        return state, tuple(out)

    def close(self) -> ResponseEvents:
        """The stream's ending chunks and its message; raises when no chunk said why it stopped."""
        return self.assembly.closed()


def _stream_events(state: OpenAIStream | AnthropicStream, chunks: Iterable[Any]) -> ResponseEvents:
    """A stream fold reduced: every chunk each step returned, then what `close()` adds."""
    out: list[AssistantChunkData] = []
    try:
        items = iter(chunks)
    except TypeError:
        _fail(state.assembly.who, "the stream", f"is not an iterable of objects: {summary(chunks)}")
    for chunk in items:
        state, more = state.step(chunk)
        out.extend(more)
    closing = state.close()
    return attrs.evolve(closing, chunks=(*out, *closing.chunks))


def openai_stream_events(
    chunks: Iterable[Mapping[str, Any]],
    *,
    turn: int,
    step: int,
    message_id: str,
    provider: str = "openai",
) -> ResponseEvents:
    """Every `assistant/chunk` payload of a streamed Chat Completions response, then its message.

    `chunks` are the stream's `chat.completion.chunk` bodies
    (`ChatCompletionChunk.model_dump()`), the usage chunk of `include_usage`
    included. `OpenAIStream` stepped through them, then closed.
    """
    return _stream_events(
        OpenAIStream.start(turn=turn, step=step, message_id=message_id, provider=provider), chunks
    )


# -- Anthropic Messages ---------------------------------------------------------------------------

_ANTHROPIC_FINISH: Final[Mapping[str, FinishReason]] = {
    "end_turn": {"kind": "stop"},
    "stop_sequence": {"kind": "stop"},
    "tool_use": {"kind": "tool-calls"},
    "max_tokens": {"kind": "max-tokens"},
    "model_context_window_exceeded": {"kind": "max-tokens"},
}


def _anthropic_finish(value: Any, who: str, path: str) -> Finish:
    reason = _string(value, who, path, empty=False)
    known = _ANTHROPIC_FINISH.get(reason)
    return {"kind": known["kind"]} if known is not None else _failed(reason, who)


def _anthropic_usage(usage: Mapping[str, Any], who: str, path: str) -> TokenUsage:
    """Messages counts are disjoint already: input excludes both cache counts."""
    out: TokenUsage = {
        "inputTokens": _count(usage.get("input_tokens"), who, f"{path}.input_tokens"),
        "outputTokens": _count(usage.get("output_tokens"), who, f"{path}.output_tokens"),
    }
    read = _maybe_count(
        usage.get("cache_read_input_tokens"), who, f"{path}.cache_read_input_tokens"
    )
    write = _maybe_count(
        usage.get("cache_creation_input_tokens"), who, f"{path}.cache_creation_input_tokens"
    )
    if read is not None:
        out["cacheReadTokens"] = read
    if write is not None:
        out["cacheWriteTokens"] = write
    return out


def _no_citations(block: Mapping[str, Any], who: str, path: str) -> None:
    if block.get("citations"):
        _fail(who, f"{path}.citations", "are set, and a text block cannot keep them")


def anthropic_response_events(
    response: Mapping[str, Any],
    *,
    turn: int,
    step: int,
    message_id: str,
    provider: str = "anthropic",
) -> ResponseEvents:
    """The `assistant/message` a Messages response appends.

    `response` is the `Message` as JSON (`Message.model_dump()`). `text` blocks become
    text, `thinking` blocks reasoning, `tool_use` blocks calls whose arguments are the
    input as compact JSON; a block with empty text makes none. Thinking signatures and
    `redacted_thinking` blocks, which only the provider can read, are kept in the
    message's `source.replayState` as `{"thinking": [block, ...]}`. Raises
    `MessageShapeError` for a malformed response or a block the message cannot keep
    (server tools, citations).
    """
    who = "anthropic response"
    body = _object(response, who, "response")
    if body.get("role") != "assistant":
        _fail(who, "role", f"is {summary(body.get('role'))}, not 'assistant'")
    state = _Assembly(
        turn, step, message_id, provider, who, _string(body.get("model"), who, "model", empty=False)
    )
    for n, item in enumerate(_array(body.get("content"), who, "content")):
        path = f"content[{n}]"
        block = _object(item, who, path)
        kind = block.get("type")
        if kind == "text":
            _no_citations(block, who, path)
            state = _text_blocks(state, "text", _string(block.get("text"), who, f"{path}.text"))
        elif kind == "thinking":
            text = _string(block.get("thinking"), who, f"{path}.thinking")
            signature = _string(block.get("signature"), who, f"{path}.signature")
            state = _text_blocks(state, "reasoning", text)
            kept = {"type": "thinking", "thinking": text, "signature": signature}
            state = attrs.evolve(state, replay=state.replay.append(kept))
        elif kind == "redacted_thinking":
            kept = {
                "type": "redacted_thinking",
                "data": _string(block.get("data"), who, f"{path}.data"),
            }
            state = attrs.evolve(state, replay=state.replay.append(kept))
        elif kind == "tool_use":
            state = _call_block(
                state,
                _string(block.get("id"), who, f"{path}.id", empty=False),
                _string(block.get("name"), who, f"{path}.name", empty=False),
                _compact(_object(block.get("input"), who, f"{path}.input")),
            )
        else:
            _fail(who, f"{path}.type", f"is {summary(kind)}, a block this mapping cannot keep")
    usage = _anthropic_usage(_object(body.get("usage"), who, "usage"), who, "usage")
    finish = _anthropic_finish(body.get("stop_reason"), who, "stop_reason")
    return attrs.evolve(state, usage=usage, finish=finish).unstreamed()


@attrs.frozen
class AnthropicStream:
    """The fold of a streamed Messages response (its server-sent events, as JSON).

    The same protocol as `OpenAIStream`: `step(event)` returns the next state and the
    `assistant/chunk` payloads to append (`block-end` at each `content_block_stop`),
    and `close()` after `message_stop` the ending chunks (`usage`, `finish`) and the
    message `anthropic_response_events` gives for the same response unstreamed. A
    call's arguments are its `input_json_delta` text as the model wrote it, so they
    may differ in spacing from the compact JSON of the unstreamed input; they parse
    to the same value.
    """

    assembly: _Assembly
    kinds: PMap[int, str] = attrs.field(
        factory=pmap
    )  # provider block index -> its type, once started
    keys: PMap[int, int] = attrs.field(
        factory=pmap
    )  # provider block index -> kernel block, once one opened
    signatures: PMap[int, str] = attrs.field(factory=pmap)
    usage: PMap[str, Any] | None = None  # message_start's usage, updated by message_delta
    stopped: bool = False

    @classmethod
    def start(
        cls, *, turn: int, step: int, message_id: str, provider: str = "anthropic"
    ) -> AnthropicStream:
        """The state before the first event; the arguments are `anthropic_response_events`'."""
        return cls(_Assembly(turn, step, message_id, provider, "anthropic stream"))

    def _text(self, slot: int, kind: str, text: str) -> tuple[AnthropicStream, Chunks]:
        if not text:
            return self, ()
        state, start = self.assembly, _NONE
        index = self.keys.get(slot)
        if index is None:
            state, index, opened = state.opened(_Block(kind))
            start = (opened,)
        state, out = state.extended(index, text)
        return attrs.evolve(self, assembly=state, keys=self.keys.set(slot, index)), (*start, *out)

    def _started(self, event: Mapping[str, Any]) -> tuple[AnthropicStream, Chunks]:
        who = self.assembly.who
        slot = _count(event.get("index"), who, "content_block_start.index")
        if slot in self.kinds:
            _fail(who, "content_block_start", f"starts block {slot} twice")
        block = _object(event.get("content_block"), who, "content_block_start.content_block")
        kind = _string(block.get("type"), who, f"content_block_start[{slot}].type")
        state = attrs.evolve(self, kinds=self.kinds.set(slot, kind))
        path = f"content_block_start[{slot}]"
        if kind == "text":
            _no_citations(block, who, path)
            return state._text(slot, "text", _string(block.get("text"), who, f"{path}.text"))
        if kind == "thinking":
            signature = _string(block.get("signature"), who, f"{path}.signature")
            state = attrs.evolve(state, signatures=state.signatures.set(slot, signature))
            return state._text(
                slot, "reasoning", _string(block.get("thinking"), who, f"{path}.thinking")
            )
        if kind == "redacted_thinking":
            kept = {
                "type": "redacted_thinking",
                "data": _string(block.get("data"), who, f"{path}.data"),
            }
            return attrs.evolve(
                state,
                assembly=attrs.evolve(state.assembly, replay=state.assembly.replay.append(kept)),
            ), ()
        if kind == "tool_use":
            call = _Block(
                "tool-call",
                id=_string(block.get("id"), who, f"{path}.id", empty=False),
                name=_string(block.get("name"), who, f"{path}.name", empty=False),
                fallback=_compact(_object(block.get("input"), who, f"{path}.input")),
            )
            assembly, index, opened = state.assembly.opened(call)
            return attrs.evolve(state, assembly=assembly, keys=state.keys.set(slot, index)), (
                opened,
            )
        _fail(who, f"{path}.type", f"is {summary(kind)}, a block this mapping cannot keep")

    def _delta(self, event: Mapping[str, Any]) -> tuple[AnthropicStream, Chunks]:
        who = self.assembly.who
        slot = _count(event.get("index"), who, "content_block_delta.index")
        delta = _object(event.get("delta"), who, "content_block_delta.delta")
        kind, dtype = self.kinds.get(slot), delta.get("type")
        path = f"content_block_delta[{slot}].delta"
        if kind == "text" and dtype == "text_delta":
            return self._text(slot, "text", _string(delta.get("text"), who, f"{path}.text"))
        if kind == "thinking" and dtype == "thinking_delta":
            return self._text(
                slot, "reasoning", _string(delta.get("thinking"), who, f"{path}.thinking")
            )
        if kind == "thinking" and dtype == "signature_delta":
            signature = self.signatures[slot] + _string(
                delta.get("signature"), who, f"{path}.signature"
            )
            return attrs.evolve(self, signatures=self.signatures.set(slot, signature)), ()
        if kind == "tool_use" and dtype == "input_json_delta":
            partial = _string(delta.get("partial_json"), who, f"{path}.partial_json")
            assembly, out = self.assembly.extended(self.keys[slot], partial)
            return attrs.evolve(self, assembly=assembly), out
        _fail(who, path, f"is a {summary(dtype)} for block {slot} of type {summary(kind)}")

    def _stopped_block(self, event: Mapping[str, Any]) -> tuple[AnthropicStream, Chunks]:
        who = self.assembly.who
        slot = _count(event.get("index"), who, "content_block_stop.index")
        if slot not in self.kinds:
            _fail(who, "content_block_stop", f"stops block {slot}, which never started")
        assembly, out = self.assembly, _NONE
        index = self.keys.get(slot)
        if index is not None and not assembly.blocks[index].ended:
            assembly, out = assembly.ended(index)
        if self.kinds[slot] == "thinking":
            text = "".join(assembly.blocks[index].pieces) if index is not None else ""
            kept = {"type": "thinking", "thinking": text, "signature": self.signatures[slot]}
            assembly = attrs.evolve(assembly, replay=assembly.replay.append(kept))
        return attrs.evolve(self, assembly=assembly), out

    def step(self, event: Mapping[str, Any]) -> tuple[AnthropicStream, Chunks]:
        """The state after one more stream event, and the payloads to append for it."""
        who = self.assembly.who
        body = _object(event, who, "event")
        kind = body.get("type")
        if kind == "ping":
            return self, ()
        if kind == "error":
            _fail(who, "the stream", f"reports an error: {summary(body.get('error'))}")
        if self.stopped:
            _fail(who, f"event {summary(kind)}", "follows message_stop")
        if kind == "message_start":
            if self.usage is not None:
                _fail(who, "message_start", "comes twice")
            message = _object(body.get("message"), who, "message_start.message")
            if _array(message.get("content"), who, "message_start.message.content"):
                _fail(who, "message_start.message.content", "is not empty")
            model = _string(message.get("model"), who, "message_start.message.model", empty=False)
            usage = _object(message.get("usage"), who, "message_start.message.usage")
            return attrs.evolve(
                self, assembly=attrs.evolve(self.assembly, model=model), usage=pmap(usage)
            ), ()
        if self.usage is None:
            _fail(who, f"event {summary(kind)}", "comes before message_start")
        if kind == "content_block_start":
            return self._started(body)
        if kind == "content_block_delta":
            return self._delta(body)
        if kind == "content_block_stop":
            return self._stopped_block(body)
        if kind == "message_delta":
            delta = _object(body.get("delta"), who, "message_delta.delta")
            state = self
            if delta.get("stop_reason") is not None:
                finish = _anthropic_finish(
                    delta["stop_reason"], who, "message_delta.delta.stop_reason"
                )
                state = attrs.evolve(state, assembly=attrs.evolve(state.assembly, finish=finish))
            if body.get("usage") is not None:
                counts = _object(body["usage"], who, "message_delta.usage")
                merged = self.usage.update({k: v for k, v in counts.items() if v is not None})
                state = attrs.evolve(state, usage=merged)
            return state, ()
        if kind == "message_stop":
            usage = _anthropic_usage(self.usage, who, "usage")
            return attrs.evolve(
                self, assembly=attrs.evolve(self.assembly, usage=usage), stopped=True
            ), ()
        _fail(who, "event type", f"{summary(kind)} is not a Messages stream event")

    def close(self) -> ResponseEvents:
        """The stream's ending chunks and its message; raises before `message_stop`."""
        if not self.stopped:
            _fail(self.assembly.who, "the stream", "ended before message_stop")
        return self.assembly.closed()


def anthropic_stream_events(
    events: Iterable[Mapping[str, Any]],
    *,
    turn: int,
    step: int,
    message_id: str,
    provider: str = "anthropic",
) -> ResponseEvents:
    """Every `assistant/chunk` payload of a streamed Messages response, then its message.

    `events` are the stream's events as JSON (`RawMessageStreamEvent` dumps, from
    `message_start` to `message_stop`; `ping` is skipped). `AnthropicStream` stepped
    through them, then closed.
    """
    return _stream_events(
        AnthropicStream.start(turn=turn, step=step, message_id=message_id, provider=provider),
        events,
    )
