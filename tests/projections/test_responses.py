"""Responses into events: provider responses, built with the SDKs' own types, as log events.

Every input is an SDK object (`ChatCompletion`, `ChatCompletionChunk`, `Message`, the
Messages stream events) validated and then dumped, as a runtime would hold it. The laws:
the events admit; appended to a log, `openai_request` / `anthropic_request` send back the
assistant message the provider returned; a streamed response gives the message the same
response gives unstreamed, and its deltas join to its `block-end` blocks.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("openai")
pytest.importorskip("anthropic")

import itertools

from anthropic.types import Message, RawMessageStreamEvent
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from pydantic import TypeAdapter

from kernel import APPEND, MessageShapeError, SessionLog
from kernel.projections import (
    AnthropicStream,
    OpenAIStream,
    ResponseEvents,
    anthropic_request,
    anthropic_response_events,
    anthropic_stream_events,
    openai_request,
    openai_response_events,
    openai_stream_events,
)
from kernel.values.builders import request_header, tool_result, user_message

STREAM_EVENT = TypeAdapter(RawMessageStreamEvent)
IDS = dict(turn=1, step=1, message_id="a-1")

Call = tuple[str, str, str]  # id, name, arguments


# -- responses built with the SDKs' types ---------------------------------------------------------


def _pieces(text: str, cuts: Sequence[int]) -> list[str]:
    """`text` cut at `cuts` (positions modulo its length), every piece non-empty."""
    points = sorted({c % len(text) for c in cuts if len(text) > 1} - {0})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def _openai(
    text: str | None,
    calls: Sequence[Call] = (),
    *,
    reasoning: str | None = None,
    finish: str = "stop",
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in calls
        ]
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "deepseek-chat",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }
    return ChatCompletion.model_validate(body).model_dump()


def _openai_chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "deepseek-chat",
        "choices": choices,
        **extra,
    }
    return ChatCompletionChunk.model_validate(body).model_dump()


def _openai_stream(
    text: str | None,
    calls: Sequence[Call] = (),
    *,
    reasoning: str | None = None,
    finish: str = "stop",
    usage: dict[str, Any] | None = None,
    cuts: Sequence[int] = (3, 7),
) -> list[dict[str, Any]]:
    out = [_openai_chunk({"role": "assistant", "content": ""})]
    for piece in _pieces(reasoning, cuts) if reasoning else []:
        out.append(_openai_chunk({"reasoning_content": piece}))
    for piece in _pieces(text, cuts) if text else []:
        out.append(_openai_chunk({"content": piece}))
    for slot, (call_id, name, arguments) in enumerate(calls):
        pieces = _pieces(arguments, cuts) if arguments else [""]
        first = {"index": slot, "id": call_id, "type": "function"}
        first["function"] = {"name": name, "arguments": pieces[0]}
        out.append(_openai_chunk({"tool_calls": [first]}))
        for piece in pieces[1:]:
            more = {"index": slot, "function": {"arguments": piece}}
            out.append(_openai_chunk({"tool_calls": [more]}))
    out.append(_openai_chunk({}, finish))
    if usage is not None:
        out.append(_openai_chunk(None, usage=usage))  # type: ignore[arg-type]
    return out


def _anthropic(
    blocks: Sequence[dict[str, Any]], *, stop: str = "end_turn", usage: dict[str, Any] | None = None
) -> dict[str, Any]:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": list(blocks),
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 10, "output_tokens": 5},
    }
    return Message.model_validate(body).model_dump()


def _anthropic_stream(
    blocks: Sequence[dict[str, Any]],
    *,
    stop: str = "end_turn",
    usage: dict[str, Any] | None = None,
    cuts: Sequence[int] = (3, 7),
    spaced: bool = False,
) -> list[dict[str, Any]]:
    usage = usage or {"input_tokens": 10, "output_tokens": 5}
    start_usage = {**usage, "output_tokens": 1}
    message = {**_anthropic([], usage=start_usage), "stop_reason": None}
    raw: list[dict[str, Any]] = [{"type": "message_start", "message": message}]
    for index, block in enumerate(blocks):
        kind = block["type"]
        if kind == "text":
            raw.append(_started(index, {"type": "text", "text": ""}))
            raw += [
                _delta(index, {"type": "text_delta", "text": p}) for p in _cut(block["text"], cuts)
            ]
        elif kind == "thinking":
            raw.append(_started(index, {"type": "thinking", "thinking": "", "signature": ""}))
            deltas = [
                {"type": "thinking_delta", "thinking": p} for p in _cut(block["thinking"], cuts)
            ]
            deltas += [
                {"type": "signature_delta", "signature": p} for p in _cut(block["signature"], cuts)
            ]
            raw += [_delta(index, d) for d in deltas]
        elif kind == "tool_use":
            raw.append(_started(index, {**block, "input": {}}))
            text = json.dumps(
                block["input"],
                ensure_ascii=False,
                separators=(", ", ": ") if spaced else (",", ":"),
            )
            text = "" if block["input"] == {} else text
            raw += [
                _delta(index, {"type": "input_json_delta", "partial_json": p})
                for p in _cut(text, cuts)
            ]
        else:
            raw.append(_started(index, block))
        raw.append({"type": "content_block_stop", "index": index})
    delta = {"stop_reason": stop, "stop_sequence": None}
    raw.append(
        {
            "type": "message_delta",
            "delta": delta,
            "usage": {"output_tokens": usage["output_tokens"]},
        }
    )
    raw.append({"type": "message_stop"})
    return [STREAM_EVENT.validate_python(e).model_dump() for e in raw]


def _cut(text: str, cuts: Sequence[int]) -> list[str]:
    return _pieces(text, cuts) if text else []


def _started(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


# -- the events in a log --------------------------------------------------------------------------


def _log(out: ResponseEvents, *, streamed: bool) -> SessionLog:
    """A one-step log: prompt, header, the response's events, then an answer to every call."""
    header = {"config": {"provider": "p", "model": "m"}, "system": "be brief"}
    log = SessionLog.empty().append("turn/start", {"turn": 1}, time=1)
    log = log.append("step/start", {"turn": 1, "step": 1}, time=2)
    log = log.append(
        "user/message", user_message(id="u-1", content="go"), time=3, surface_op=APPEND
    )
    log = log.append("request/header", request_header(header=header, reason="initial"), time=4)
    seqs = []
    for chunk in out.chunks:
        log = log.append("assistant/chunk", chunk, time=5)
        seqs.append(log.events[-1].seq)
    log = log.append(
        "assistant/message",
        out.message,
        time=6,
        surface_op=APPEND,
        source_event_seqs=seqs if streamed else None,
    )
    for n, block in enumerate(out.message["message"]["content"]):
        if block["type"] == "tool-call":
            result = tool_result(turn=1, step=1, id=f"r-{n}", call_id=block["id"], content="ok")
            log = log.append("tool/result", result, time=7, surface_op=APPEND)
    return log


def _openai_sent(log: SessionLog) -> dict[str, Any]:
    assistant = [m for m in openai_request(log)["messages"] if m["role"] == "assistant"]
    assert len(assistant) == 1
    return assistant[0]


def _openai_returned(response: dict[str, Any]) -> dict[str, Any]:
    """The provider's message as a request would carry it: role, content, function calls."""
    message = response["choices"][0]["message"]
    out = {"role": "assistant", "content": message["content"] or None}
    if message["tool_calls"]:
        out["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": dict(c["function"])}
            for c in message["tool_calls"]
        ]
    return out


def _anthropic_sent(log: SessionLog) -> list[dict[str, Any]]:
    turns = [m for m in anthropic_request(log)["messages"] if m["role"] == "assistant"]
    assert len(turns) <= 1
    return turns[0]["content"] if turns else []


def _anthropic_returned(response: dict[str, Any]) -> list[dict[str, Any]]:
    """What a request sends back of the response: non-blank text and tool uses."""
    out = []
    for block in response["content"]:
        if block["type"] == "text" and block["text"].strip():
            out.append({"type": "text", "text": block["text"]})
        elif block["type"] == "tool_use":
            out.append({k: block[k] for k in ("type", "id", "name", "input")})
    return out


def _chunk_law(out: ResponseEvents) -> None:
    """Each block's deltas join to its `block-end` block, and those blocks are the message."""
    chunks = [c["chunk"] for c in out.chunks]
    ends = {c["index"]: c["block"] for c in chunks if c["type"] == "block-end"}
    assert [ends[i] for i in sorted(ends)] == list(out.message["message"]["content"])
    for index, block in ends.items():
        deltas = [c for c in chunks if c.get("index") == index and c["type"].endswith("-delta")]
        joined = "".join(c.get("text", c.get("argumentsDelta", "")) for c in deltas)
        assert joined == block.get("text", block.get("arguments")), (index, deltas, block)
    assert chunks[-1]["type"] == "finish"
    assert [c["type"] for c in chunks].count("finish") == 1


# -- generated content ----------------------------------------------------------------------------

texts = st.one_of(st.none(), st.text(max_size=40))
json_objects = st.dictionaries(
    st.text(max_size=6),
    st.one_of(st.integers(-(2**40), 2**40), st.text(max_size=8), st.booleans(), st.none()),
    max_size=4,
)
call_ids = st.from_regex(r"call_[A-Za-z0-9]{1,12}", fullmatch=True)
names = st.from_regex(r"[a-z][a-z_]{0,10}", fullmatch=True)
cut_lists = st.lists(st.integers(0, 100), max_size=6)


@st.composite
def openai_calls(draw: st.DrawFn) -> list[Call]:
    n = draw(st.integers(0, 3))
    ids = draw(st.lists(call_ids, min_size=n, max_size=n, unique=True))
    arguments = st.one_of(json_objects.map(json.dumps), st.text(max_size=20))
    return [(i, draw(names), draw(arguments)) for i in ids]


@given(texts, texts, openai_calls(), cut_lists)
def test_law_openai_response_round_trips_through_the_request_body(
    text: str | None, reasoning: str | None, calls: list[Call], cuts: list[int]
) -> None:
    if not text and not calls:
        text = "x"  # a message with nothing to send is left out of every body
    response = _openai(text, calls, reasoning=reasoning, finish="tool_calls" if calls else "stop")
    out = openai_response_events(response, **IDS, provider="deepseek")
    assert _openai_sent(_log(out, streamed=False)) == _openai_returned(response)
    streamed = openai_stream_events(
        _openai_stream(
            text, calls, reasoning=reasoning, cuts=cuts, finish="tool_calls" if calls else "stop"
        ),
        **IDS,
        provider="deepseek",
    )
    assert streamed.message == out.message, "the stream must give the unstreamed message"
    assert streamed.finish == out.finish
    _chunk_law(streamed)
    assert _openai_sent(_log(streamed, streamed=True)) == _openai_returned(response)


@st.composite
def anthropic_blocks(draw: st.DrawFn) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if draw(st.booleans()):
        blocks.append(
            {"type": "thinking", "thinking": draw(st.text(max_size=20)), "signature": "c2ln"}
        )
    ids = draw(
        st.lists(st.from_regex(r"toolu_[A-Za-z0-9]{1,12}", fullmatch=True), max_size=3, unique=True)
    )
    for kind in draw(st.lists(st.sampled_from(["text", "tool_use"]), min_size=1, max_size=4)):
        if kind == "text":
            blocks.append({"type": "text", "text": draw(st.text(max_size=30))})
        elif ids:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": ids.pop(),
                    "name": draw(names),
                    "input": draw(json_objects),
                }
            )
    return blocks


@given(anthropic_blocks(), cut_lists)
def test_law_anthropic_response_round_trips_through_the_request_body(
    blocks: list[dict[str, Any]], cuts: list[int]
) -> None:
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    response = _anthropic(blocks, stop=stop)
    out = anthropic_response_events(response, **IDS)
    assert _anthropic_sent(_log(out, streamed=False)) == _anthropic_returned(response)
    streamed = anthropic_stream_events(_anthropic_stream(blocks, stop=stop, cuts=cuts), **IDS)
    assert streamed.message == out.message, "the stream must give the unstreamed message"
    assert streamed.finish == out.finish
    _chunk_law(streamed)
    assert _anthropic_sent(_log(streamed, streamed=True)) == _anthropic_returned(response)


# -- examples -------------------------------------------------------------------------------------


def test_openai_usage_is_disjoint_cached_prompt_tokens_are_cache_reads() -> None:
    usage = {
        "prompt_tokens": 900,
        "completion_tokens": 40,
        "total_tokens": 940,
        "prompt_tokens_details": {"cached_tokens": 600},
        "completion_tokens_details": {"reasoning_tokens": 25},
    }
    out = openai_response_events(_openai("hi", usage=usage), **IDS)
    expected = {
        "inputTokens": 300,
        "outputTokens": 40,
        "cacheReadTokens": 600,
        "reasoningTokens": 25,
    }
    assert out.message["usage"] == expected
    streamed = openai_stream_events(_openai_stream("hi", usage=usage), **IDS)
    assert streamed.message["usage"] == expected
    assert streamed.chunks[-2]["chunk"] == {"type": "usage", "usage": expected}
    deepseek = {
        "prompt_tokens": 90,
        "completion_tokens": 4,
        "total_tokens": 94,
        "prompt_cache_hit_tokens": 64,
    }
    usage_ds = openai_response_events(_openai("hi", usage=deepseek), **IDS).message["usage"]
    assert usage_ds == {"inputTokens": 26, "outputTokens": 4, "cacheReadTokens": 64}


def test_openai_message_source_and_deepseek_reasoning() -> None:
    out = openai_response_events(_openai("4", reasoning="2+2"), **IDS, provider="deepseek")
    assert out.message["message"] == {
        "id": "a-1",
        "role": "assistant",
        "content": [{"type": "reasoning", "text": "2+2"}, {"type": "text", "text": "4"}],
        "source": {"kind": "model", "provider": "deepseek", "model": "deepseek-chat"},
    }
    assert "usage" not in out.message
    assert _openai_sent(_log(out, streamed=False)) == {"role": "assistant", "content": "4"}


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        ("stop", {"kind": "stop"}),
        ("tool_calls", {"kind": "tool-calls"}),
        ("length", {"kind": "max-tokens"}),
        ("content_filter", {"kind": "error", "code": "CONTENT_FILTER"}),
    ],
)
def test_openai_finish_reasons_map_to_kernel_finish_kinds(
    reason: str, kind: dict[str, str]
) -> None:
    calls = [("call_1", "ls", "{}")] if reason == "tool_calls" else []
    for out in (
        openai_response_events(_openai("x", calls, finish=reason), **IDS),
        openai_stream_events(_openai_stream("x", calls, finish=reason), **IDS),
    ):
        assert out.finish["kind"] == kind["kind"]
        if "code" in kind:
            assert out.finish["failure"]["code"] == kind["code"]  # type: ignore[typeddict-item]


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("tool_use", "tool-calls"),
        ("max_tokens", "max-tokens"),
        ("refusal", "error"),
    ],
)
def test_anthropic_stop_reasons_map_to_kernel_finish_kinds(reason: str, kind: str) -> None:
    blocks = [{"type": "text", "text": "x"}]
    assert anthropic_response_events(_anthropic(blocks, stop=reason), **IDS).finish["kind"] == kind
    assert (
        anthropic_stream_events(_anthropic_stream(blocks, stop=reason), **IDS).finish["kind"]
        == kind
    )


def test_anthropic_usage_and_thinking_signatures_kept_in_replay_state() -> None:
    usage = {
        "input_tokens": 12,
        "output_tokens": 30,
        "cache_read_input_tokens": 800,
        "cache_creation_input_tokens": 50,
    }
    blocks = [
        {"type": "thinking", "thinking": "look first", "signature": "c2lnbmF0dXJl"},
        {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"},
        {"type": "text", "text": "Reading."},
        {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.md"}},
    ]
    out = anthropic_response_events(_anthropic(blocks, stop="tool_use", usage=usage), **IDS)
    message = out.message["message"]
    assert message["content"] == [
        {"type": "reasoning", "text": "look first"},
        {"type": "text", "text": "Reading."},
        {"type": "tool-call", "id": "toolu_1", "name": "read", "arguments": '{"path":"a.md"}'},
    ]
    assert message["source"]["replayState"] == {"thinking": blocks[:2]}
    assert out.message["usage"] == {
        "inputTokens": 12,
        "outputTokens": 30,
        "cacheReadTokens": 800,
        "cacheWriteTokens": 50,
    }
    streamed = anthropic_stream_events(
        _anthropic_stream(blocks, stop="tool_use", usage=usage), **IDS
    )
    assert streamed.message == out.message


def test_anthropic_streamed_arguments_keep_the_model_spacing_and_parse_to_the_input() -> None:
    blocks = [
        {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.md", "n": 2}}
    ]
    out = anthropic_stream_events(_anthropic_stream(blocks, stop="tool_use", spaced=True), **IDS)
    arguments = out.message["message"]["content"][0]["arguments"]  # type: ignore[typeddict-item]
    assert arguments == '{"path": "a.md", "n": 2}'
    assert json.loads(arguments) == blocks[0]["input"]
    _chunk_law(out)


def test_anthropic_arguments_keep_the_member_order_of_the_input() -> None:
    blocks = [{"type": "tool_use", "id": "toolu_0", "name": "a", "input": {"": 0, "0": None}}]
    for out in (
        anthropic_response_events(_anthropic(blocks, stop="tool_use"), **IDS),
        anthropic_stream_events(_anthropic_stream(blocks, stop="tool_use", cuts=()), **IDS),
    ):
        arguments = out.message["message"]["content"][0]["arguments"]  # type: ignore[typeddict-item]
        assert arguments == '{"":0,"0":null}'


def test_a_call_without_input_deltas_streams_its_start_input() -> None:
    blocks = [{"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}}]
    out = anthropic_stream_events(_anthropic_stream(blocks, stop="tool_use"), **IDS)
    deltas = [c["chunk"] for c in out.chunks if c["chunk"]["type"] == "tool-call-delta"]
    assert deltas == [
        {
            "type": "tool-call-delta",
            "index": 0,
            "id": "toolu_1",
            "name": "ls",
            "argumentsDelta": "{}",
        }
    ]
    _chunk_law(out)


def test_stream_fold_returns_each_chunks_payloads_as_it_arrives() -> None:
    chunks = _openai_stream("Hello", [("call_1", "ls", '{"a":1}')], cuts=(2,), finish="tool_calls")
    state = OpenAIStream.start(**IDS)
    sent = []
    for chunk in chunks:
        state, out = state.step(chunk)
        sent.append([c["chunk"]["type"] for c in out])
    assert sent == [
        [],
        ["block-start", "text-delta"],
        ["text-delta"],
        ["block-start", "tool-call-delta"],
        ["tool-call-delta"],
        [],
    ]
    closing = state.close()
    assert [c["chunk"]["type"] for c in closing.chunks] == ["block-end", "block-end", "finish"]
    assert closing.message == openai_stream_events(chunks, **IDS).message


def test_anthropic_fold_ends_each_block_at_its_stop() -> None:
    events = _anthropic_stream([{"type": "text", "text": "Hi"}], cuts=())
    state = AnthropicStream.start(**IDS)
    sent = []
    for event in events:
        state, out = state.step(event)
        sent.append([c["chunk"]["type"] for c in out])
    assert sent == [[], [], ["block-start", "text-delta"], ["block-end"], [], []]
    assert [c["chunk"]["type"] for c in state.close().chunks] == ["usage", "finish"]


def _two_choices() -> dict[str, Any]:
    body = _openai("x")
    body["choices"].append({**body["choices"][0], "index": 1})
    return body


def _audio() -> dict[str, Any]:
    body = _openai("x")
    body["choices"][0]["message"]["audio"] = {
        "id": "a",
        "data": "",
        "expires_at": 1,
        "transcript": "",
    }
    return body


OPENAI_MALFORMED = {
    "not a mapping": [1, 2],
    "no choices": {**_openai("x"), "choices": []},
    "two choices": _two_choices(),
    "no model": {**_openai("x"), "model": ""},
    "audio": _audio(),
    "count not an integer": _openai(
        "x", usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    )
    | {"usage": {"prompt_tokens": "1", "completion_tokens": 1}},
    "no finish reason": {
        **_openai("x"),
        "choices": [{**_openai("x")["choices"][0], "finish_reason": None}],
    },
    "call without id": _openai(None, [("call_1", "ls", "{}")]) | {},
}
OPENAI_MALFORMED["call without id"]["choices"][0]["message"]["tool_calls"][0]["id"] = None


@pytest.mark.parametrize("case", sorted(OPENAI_MALFORMED))
def test_malformed_openai_responses_are_message_shape_errors(case: str) -> None:
    with pytest.raises(MessageShapeError, match="openai response"):
        openai_response_events(OPENAI_MALFORMED[case], **IDS)


def test_an_sdk_object_is_refused_with_a_hint() -> None:
    response = ChatCompletion.model_validate(_openai("x"))
    with pytest.raises(MessageShapeError, match="model_dump"):
        openai_response_events(response, **IDS)  # type: ignore[arg-type]


def test_malformed_streams_are_message_shape_errors() -> None:
    no_finish = _openai_stream("x")[:-1]
    with pytest.raises(MessageShapeError, match="ended before"):
        openai_stream_events(no_finish, **IDS)
    nameless = _openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]})
    with pytest.raises(MessageShapeError, match="without its id and name"):
        openai_stream_events([nameless], **IDS)
    cut = _anthropic_stream([{"type": "text", "text": "x"}])[:-1]
    with pytest.raises(MessageShapeError, match="message_stop"):
        anthropic_stream_events(cut, **IDS)
    early = _anthropic_stream([{"type": "text", "text": "x"}])[1:]
    with pytest.raises(MessageShapeError, match="before message_start"):
        anthropic_stream_events(early, **IDS)
    text = _anthropic_stream([{"type": "text", "text": "x"}])
    wrong = [*text[:2], _delta(0, {"type": "input_json_delta", "partial_json": "{"}), *text[2:]]
    with pytest.raises(MessageShapeError, match="input_json_delta"):
        anthropic_stream_events(wrong, **IDS)


def test_anthropic_blocks_the_message_cannot_keep_are_refused() -> None:
    server = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
    with pytest.raises(MessageShapeError, match="server_tool_use"):
        anthropic_response_events(_anthropic([server]), **IDS)
    cited = _anthropic([{"type": "text", "text": "x"}])
    cited["content"][0]["citations"] = [{"type": "char_location"}]
    with pytest.raises(MessageShapeError, match="citations"):
        anthropic_response_events(cited, **IDS)
    with pytest.raises(MessageShapeError, match="not 'assistant'"):
        anthropic_response_events({**_anthropic([]), "role": "user"}, **IDS)
