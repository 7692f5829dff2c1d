"""The payload builders build the wire dicts written by hand, and `append` admits them alike.

The shipped example logs are rebuilt from builder calls alone and must come out
as the very bytes of the files (key order included); each builder is also pinned
against its hand-written dict, and a property checks the same over its arguments.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel import APPEND, MessageShapeError, Replace, SessionLog, event_to_json, write_jsonl
from kernel.values import builders as b
from kernel.values.events import CORE_TYPES, EXTENSION_TYPES
from kernel.values.payloads import CoreEventType, ExtensionEventType, TurnEndReason

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
DEEPSEEK = {"provider": "deepseek", "model": "deepseek-chat"}
LS = b.tool_schema(name="ls", description="List files", parameters={"type": "object"})


def _lines(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (EXAMPLES / name).read_text().splitlines()]


def _same_wire(built: Any, wire: Any) -> None:
    """Equal as values and in member order (the JSONL writer keeps the order it is given)."""
    assert json.dumps(built) == json.dumps(wire)


def test_the_builders_rebuild_clean_run_byte_for_byte() -> None:
    header, *_ = _lines("clean-run.jsonl")
    t0 = 1760000000000
    log = SessionLog.empty(header=header)

    def at(ms: int, event_type: Any, data: Any, **envelope: Any) -> None:
        nonlocal log
        log = log.append(event_type, data, time=t0 + ms, **envelope)

    call = b.tool_call_block(id="c1", name="ls", arguments="{}")
    at(1, "turn/start", b.turn_start(turn=1))
    at(2, "step/start", b.step_start(turn=1, step=1))
    at(3, "user/message", b.user_message(id="m-u1", content="list the files"), surface_op=APPEND)
    at(
        4,
        "request/header",
        b.request_header(header={"config": DEEPSEEK, "tools": [LS]}, reason="initial"),
    )
    at(5, "request/context", b.request_context(**DEEPSEEK, context_window=128000))
    chunks: list[Any] = [
        {"type": "block-start", "index": 0, "blockType": "tool-call"},
        {"type": "tool-call-delta", "index": 0, "id": "c1", "name": "ls", "argumentsDelta": "{}"},
        {"type": "block-end", "index": 0, "block": call},
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]
    for ms, chunk in enumerate(chunks, start=100):
        at(ms, "assistant/chunk", b.assistant_chunk(turn=1, step=1, chunk=chunk))
    reply = b.model_message(id="m-a1", content=[call], **DEEPSEEK)
    at(
        104,
        "assistant/message",
        b.assistant_message(turn=1, step=1, message=reply),
        surface_op=APPEND,
        source_event_seqs=[5, 6, 7, 8],
    )
    at(105, "tool/call", b.tool_call(turn=1, step=1, call_id="c1", name="ls", arguments="{}"))
    result = b.tool_result(turn=1, step=1, id="m-r1", call_id="c1", content="a.txt")
    at(150, "tool/result", result, surface_op=APPEND, source_event_seqs=[10])
    at(151, "step/end", b.step_end(turn=1, step=1))
    at(152, "step/start", b.step_start(turn=1, step=2))
    reply = b.model_message(id="m-a2", content="One file: a.txt", **DEEPSEEK)
    usage: Any = {"inputTokens": 900, "outputTokens": 6}
    at(
        300,
        "assistant/message",
        b.assistant_message(turn=1, step=2, message=reply, usage=usage),
        surface_op=APPEND,
    )
    at(301, "step/end", b.step_end(turn=1, step=2))
    at(302, "turn/end", b.turn_end(turn=1, reason={"kind": "completed"}))

    t0 = 1760000060000
    text = "Yes: a.txt is the only file."
    at(0, "turn/start", b.turn_start(turn=2))
    at(1, "step/start", b.step_start(turn=2, step=1))
    at(
        2,
        "user/message",
        b.user_message(id="m-u2", content="is a.txt the only file?"),
        surface_op=APPEND,
    )
    usage = {"inputTokens": 930, "outputTokens": 9}
    stream: list[tuple[int, Any]] = [
        (400, {"type": "block-start", "index": 0, "blockType": "text"}),
        (401, {"type": "text-delta", "index": 0, "text": "Yes: a.txt"}),
        (404, {"type": "text-delta", "index": 0, "text": " is the only"}),
        (406, {"type": "text-delta", "index": 0, "text": " file."}),
        (407, {"type": "block-end", "index": 0, "block": b.text_block(text)}),
        (408, {"type": "usage", "usage": usage}),
        (409, {"type": "finish", "reason": {"kind": "stop"}}),
    ]
    for ms, chunk in stream:
        at(ms, "assistant/chunk", b.assistant_chunk(turn=2, step=1, chunk=chunk))
    reply = b.model_message(id="m-a3", content=text, **DEEPSEEK)
    at(
        410,
        "assistant/message",
        b.assistant_message(turn=2, step=1, message=reply, usage=usage),
        surface_op=APPEND,
        source_event_seqs=list(range(20, 27)),
    )
    at(411, "step/end", b.step_end(turn=2, step=1))
    at(412, "turn/end", b.turn_end(turn=2, reason={"kind": "completed"}))

    assert write_jsonl(log.header, log.events) == (EXAMPLES / "clean-run.jsonl").read_bytes()


def test_the_builders_rebuild_a_compaction_byte_for_byte() -> None:
    header, *wire = _lines("compaction.jsonl")
    log = SessionLog.seed(wire[:24], header=header, now=0)
    log = SessionLog.restore(log.events[:24], header=header)  # without the end-seed marker
    t0 = 1760000120000
    pruned = b.pruned_tool_result(log.events[18].data, content="[output pruned by compaction]")
    summary = b.compaction_summary(
        id="m-s1",
        text="Summary of earlier conversation: the user asked for the files in /projects/demo; "
        "they are a.txt and notes.md.",
    )
    header_data = b.request_header(header=wire[3]["data"]["header"], reason="series")
    reply = b.model_message(
        id="m-a5",
        content="Start with item 1: it is the first flaky test listed in notes.md.",
        **DEEPSEEK,
    )
    usage: Any = {"inputTokens": 1150, "outputTokens": 17}
    log = (
        log.append("turn/start", b.turn_start(turn=3), time=t0)
        .append("step/start", b.step_start(turn=3, step=1), time=t0 + 1)
        .append(
            "user/message",
            b.user_message(id="m-u3", content="which one should I look at first?"),
            time=t0 + 2,
            surface_op=APPEND,
        )
        .append(
            "tool/result", pruned, time=t0 + 100, surface_op=Replace(18, 18), source_event_seqs=[18]
        )
        .append(
            "user/message",
            summary,
            time=t0 + 101,
            surface_op=Replace(2, 10),
            source_event_seqs=[2, 5, 7, 10],
        )
        .append("request/header", header_data, time=t0 + 102)
        .append(
            "assistant/message",
            b.assistant_message(turn=3, step=1, message=reply, usage=usage),
            time=t0 + 1000,
            surface_op=APPEND,
        )
        .append("step/end", b.step_end(turn=3, step=1), time=t0 + 1001)
        .append("turn/end", b.turn_end(turn=3, reason={"kind": "completed"}), time=t0 + 1002)
    )
    for built, written in zip(log.events[24:], wire[24:], strict=True):
        _same_wire(event_to_json(built), written)
    assert write_jsonl(log.header, log.events) == (EXAMPLES / "compaction.jsonl").read_bytes()


def test_the_blocks_are_the_shapes_of_events_md_4_3() -> None:
    _same_wire(b.reasoning_block("hmm"), {"type": "reasoning", "text": "hmm"})
    image = b.image_block(
        attachment_id="sha256:ab",
        media_type="image/png",
        bytes=10,
        width=2,
        height=3,
        name="a.png",
        original_dimensions={"width": 4, "height": 6},
    )
    _same_wire(
        image,
        {
            "type": "image",
            "attachment": {
                "attachmentId": "sha256:ab",
                "mediaType": "image/png",
                "bytes": 10,
                "width": 2,
                "height": 3,
                "name": "a.png",
                "originalDimensions": {"width": 4, "height": 6},
            },
        },
    )
    bare = b.image_block(
        attachment_id="sha256:cd", media_type="image/gif", bytes=0, width=1, height=1
    )
    assert list(bare["attachment"]) == ["attachmentId", "mediaType", "bytes", "width", "height"]
    nested = b.tool_result_block(tool_call_id="c9", content=[image], is_error=True)
    _same_wire(
        nested, {"type": "tool-result", "toolCallId": "c9", "content": [image], "isError": True}
    )


def test_a_message_with_every_known_block_is_admitted() -> None:
    image = b.image_block(
        attachment_id="sha256:ab", media_type="image/webp", bytes=1, width=1, height=1
    )
    call = b.tool_call_block(id="c1", name="read", arguments='{"path":"a"}')
    reply = b.model_message(
        id="a1",
        content=[b.reasoning_block("look"), b.text_block("reading"), image, call],
        replay_state={"opaque": [1]},
        **DEEPSEEK,
    )
    log = (
        SessionLog.empty()
        .append("turn/start", b.turn_start(turn=1), time=0)
        .append("step/start", b.step_start(turn=1, step=1), time=0)
        .append(
            "user/message",
            b.user_message(id="u1", content=[b.text_block("see"), image]),
            time=0,
            surface_op=APPEND,
        )
        .append(
            "assistant/message",
            b.assistant_message(turn=1, step=1, message=reply),
            time=1,
            surface_op=APPEND,
            source_event_seqs=[],
        )
    )
    assert log.messages[-1]["source"] == {
        **DEEPSEEK,
        "kind": "model",
        "replayState": {"opaque": [1]},
    }
    assert [block["type"] for block in log.messages[-1]["content"]] == [
        "reasoning",
        "text",
        "image",
        "tool-call",
    ]


def test_an_error_result_a_todo_list_and_an_interrupted_message_are_admitted() -> None:
    failed = b.tool_result(
        turn=1,
        step=1,
        id="r1",
        call_id="c1",
        content="boom",
        is_error=True,
        error={"name": "ToolError", "code": "E_TOOL"},
        meta={"exit": 1},
    )
    _same_wire(
        failed,
        {
            "turn": 1,
            "step": 1,
            "message": {
                "id": "r1",
                "role": "user",
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": "c1",
                        "content": [{"type": "text", "text": "boom"}],
                        "isError": True,
                    }
                ],
                "source": {"kind": "tool", "callId": "c1"},
            },
            "error": {"name": "ToolError", "code": "E_TOOL"},
            "meta": {"exit": 1},
        },
    )
    todos = b.todo_write(todos=[{"content": "write tests", "status": "in_progress"}])
    _same_wire(todos, {"todos": [{"content": "write tests", "status": "in_progress"}]})
    partial = b.model_message(id="a1", content="Sur", **DEEPSEEK)
    cut = b.assistant_message(turn=1, step=1, message=partial, interrupted=True)
    assert list(cut) == ["turn", "step", "message", "interrupted"] and cut["interrupted"] is True
    changed = b.request_header(header={"config": DEEPSEEK}, reason="change", starts_series=True)
    _same_wire(changed, {"header": {"config": DEEPSEEK}, "reason": "change", "startsSeries": True})
    aborted: TurnEndReason = {"kind": "aborted", "reason": {"kind": "hook", "reason": "stop"}}
    log = (
        SessionLog.empty()
        .append("turn/start", b.turn_start(turn=1), time=0)
        .append("step/start", b.step_start(turn=1, step=1), time=0)
        .append("assistant/message", cut, time=1, surface_op=APPEND)
        .append(
            "tool/call", b.tool_call(turn=1, step=1, call_id="c1", name="x", arguments=""), time=2
        )
        .append("tool/result", failed, time=3, surface_op=APPEND, source_event_seqs=[3])
        .append("todo/write", todos, time=4)
        .append(
            "request/header",
            b.request_header(header={"config": DEEPSEEK}, reason="initial"),
            time=4,
        )
        .append("step/end", b.step_end(turn=1, step=1), time=5)
        .append("turn/end", b.turn_end(turn=1, reason=aborted), time=6)
    )
    assert [event.type for event in log.events][-3:] == ["request/header", "step/end", "turn/end"]


def test_a_pruned_result_keeps_everything_but_its_content() -> None:
    original = b.tool_result(turn=2, step=1, id="r2", call_id="c2", content="huge", meta=[1])
    pruned = b.pruned_tool_result(original, content="[pruned]")
    assert pruned["message"]["content"][0]["content"] == [b.text_block("[pruned]")]
    assert {**pruned, "message": None} == {**original, "message": None}
    assert original["message"]["content"][0]["content"] == [b.text_block("huge")]  # not changed


def test_pruned_tool_result_refuses_what_is_not_a_tool_result_r10g() -> None:
    with pytest.raises(MessageShapeError, match="R10g"):
        b.pruned_tool_result({"turn": 1}, content="x")


def test_the_typed_vocabularies_are_the_kernels() -> None:
    assert set(CoreEventType.__args__) == CORE_TYPES  # type: ignore[attr-defined]
    assert set(ExtensionEventType.__args__) == EXTENSION_TYPES  # type: ignore[attr-defined]


def test_message_id_is_a_function_of_its_arguments() -> None:
    assert b.message_id("assistant", turn=12, step=3) == "assistant-12.3.0"
    ids = {
        b.message_id(role, turn=t, step=s, index=i)
        for role in ("user", "assistant", "tool")
        for t in (1, 11)
        for s in (1, 11)
        for i in (0, 1)
    }
    assert len(ids) == 24


_TEXT = st.text(max_size=8)
_NAME = st.text(min_size=1, max_size=8)
_POSITIVE = st.integers(1, 2**53 - 1)


@given(
    turn=_POSITIVE,
    step=_POSITIVE,
    prompt=_TEXT,
    ids=st.lists(_NAME, min_size=3, max_size=3, unique=True),
    call=st.tuples(_NAME, _TEXT, _TEXT),
    output=_TEXT,
    is_error=st.booleans(),
    usage=st.none()
    | st.fixed_dictionaries(
        {"inputTokens": st.integers(0, 10**9), "outputTokens": st.integers(0, 10**9)}
    ),
    time=st.integers(-(2**53) + 1, 2**53 - 1),
)
def test_builders_over_their_arguments_build_the_hand_written_step(
    turn: int,
    step: int,
    prompt: str,
    ids: list[str],
    call: tuple[str, str, str],
    output: str,
    is_error: bool,
    usage: Any,
    time: int,
) -> None:
    user_id, reply_id, result_id = ids
    call_id, name, arguments = call
    source = {"kind": "model", "provider": "p", "model": "m"}
    reply: dict[str, Any] = {
        "id": reply_id,
        "role": "assistant",
        "content": [{"type": "tool-call", "id": call_id, "name": name, "arguments": arguments}],
        "source": source,
    }
    by_hand: list[tuple[str, Any, dict[str, Any]]] = [
        ("turn/start", {"turn": turn}, {}),
        ("step/start", {"turn": turn, "step": step}, {}),
        (
            "user/message",
            {
                "id": user_id,
                "role": "user",
                "content": [{"type": "text", "text": prompt}],
                "source": {"kind": "user"},
            },
            {"surface_op": APPEND},
        ),
        (
            "assistant/message",
            {"turn": turn, "step": step, "message": reply}
            | ({} if usage is None else {"usage": usage}),
            {"surface_op": APPEND},
        ),
        (
            "tool/call",
            {"turn": turn, "step": step, "callId": call_id, "name": name, "arguments": arguments},
            {},
        ),
        (
            "tool/result",
            {
                "turn": turn,
                "step": step,
                "message": {
                    "id": result_id,
                    "role": "user",
                    "content": [
                        {
                            "type": "tool-result",
                            "toolCallId": call_id,
                            "content": [{"type": "text", "text": output}],
                            "isError": is_error,
                        }
                    ],
                    "source": {"kind": "tool", "callId": call_id},
                },
            },
            {"surface_op": APPEND, "source_event_seqs": [4]},
        ),
        ("step/end", {"turn": turn, "step": step}, {}),
        ("turn/end", {"turn": turn, "reason": {"kind": "completed"}}, {}),
    ]
    message = b.model_message(
        id=reply_id,
        content=[b.tool_call_block(id=call_id, name=name, arguments=arguments)],
        provider="p",
        model="m",
    )
    built = [
        b.turn_start(turn=turn),
        b.step_start(turn=turn, step=step),
        b.user_message(id=user_id, content=prompt),
        b.assistant_message(turn=turn, step=step, message=message, usage=usage),
        b.tool_call(turn=turn, step=step, call_id=call_id, name=name, arguments=arguments),
        b.tool_result(
            turn=turn, step=step, id=result_id, call_id=call_id, content=output, is_error=is_error
        ),
        b.step_end(turn=turn, step=step),
        b.turn_end(turn=turn, reason={"kind": "completed"}),
    ]
    hand, typed = SessionLog.empty(), SessionLog.empty()
    for (event_type, data, envelope), payload in zip(by_hand, built, strict=True):
        _same_wire(payload, data)
        hand = hand.append(event_type, data, time=time, **envelope)
        typed = typed.append(event_type, payload, time=time, **envelope)
    assert [event_to_json(e) for e in typed.events] == [event_to_json(e) for e in hand.events]
    assert tuple(typed.messages) == tuple(hand.messages)
