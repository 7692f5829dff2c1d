"""Projections: ACP replay and provider request bodies, checked by the ecosystems' types.

Every notification built from a generated log (crash prefixes included, after repair)
must validate against `acp.schema.SessionNotification` and come back unchanged from
it; every OpenAI body against the `openai` package's Chat Completions params, every
Anthropic body against `anthropic`'s Messages params (pydantic `TypeAdapter`, lazily
validated iterables consumed, output compared with input so nothing is ignored).
Then the laws: tool pairing of bodies, live-streamed text equals replayed text, and
no partial projection of a log admission refuses.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("acp")
pytest.importorskip("openai")
pytest.importorskip("anthropic")

from acp.schema import SessionNotification
from acp.utils import serialize_params
from anthropic.types.message_create_params import (
    MessageCreateParamsNonStreaming,
)
from openai.types.chat.completion_create_params import (
    CompletionCreateParamsNonStreaming,
)
from pydantic import BaseModel, TypeAdapter

from kernel import (
    APPEND,
    Event,
    KernelError,
    SessionLog,
    ToolPairingError,
    event_from_json,
    interrupted_turn_closers,
)
from kernel.projections import (
    AcpState,
    ProjectionError,
    acp_updates,
    anthropic_request,
    anthropic_tool_ids,
    openai_request,
    paired_history,
)
from properties._report import format_log
from properties.strategies import LoopLog, loop_logs, mutation_cases

OPENAI = TypeAdapter(CompletionCreateParamsNonStreaming)
ANTHROPIC = TypeAdapter(MessageCreateParamsNonStreaming)

IMAGE = {
    "type": "image",
    "attachment": {
        "attachmentId": "sha256:ab12",
        "mediaType": "image/png",
        "bytes": 2048,
        "width": 64,
        "height": 32,
        "name": "plot.png",
    },
}
EXTRA_BLOCKS: tuple[Any, ...] = (
    IMAGE,
    {"type": "image", "attachment": {"attachmentId": "sha256:cd", "mediaType": "image/bmp"}},
    {"type": "citation", "url": "https://example.com", "n": [1, 2.5, None]},
    {"type": "text", "text": 7},
    {"type": "reasoning", "text": "a thought inside a user message"},
    "a bare string block",
    {"type": "text", "text": "  "},
    {"type": "text", "text": "é \x1b \ud800 lone"},
)


# -- generated logs -----------------------------------------------------------------------------


def _decorate(wire: list[dict[str, Any]], picks: Sequence[int]) -> list[dict[str, Any]]:
    """Add image, extension and odd blocks to user messages and tool results (not assistant
    messages, whose text the stream chunks must agree with)."""
    out = copy.deepcopy(wire)
    if not picks:
        return out
    k = 0
    for event in out:
        block = copy.deepcopy(EXTRA_BLOCKS[picks[k % len(picks)] % len(EXTRA_BLOCKS)])
        if event["type"] == "user/message":
            event["data"]["content"].append(block)
            k += 1
        elif event["type"] == "tool/result":
            event["data"]["message"]["content"][0]["content"].append(block)
            k += 1
    return out


@st.composite
def repaired_logs(draw: st.DrawFn, *, rich: bool = False) -> tuple[Event, ...]:
    """A G-loop log, decorated, cut at a crash point, and closed by its closers."""
    log: LoopLog = draw(loop_logs(max_actions=5, rich=rich, shape="any"))
    picks = draw(st.lists(st.integers(0, 50), max_size=4))
    wire = _decorate(list(log.events), picks)
    cut = draw(st.integers(0, len(wire)))
    events = tuple(event_from_json(e) for e in wire[:cut])
    return events + interrupted_turn_closers(events)


def _shown(events: Sequence[Event]) -> str:
    from kernel import event_to_json

    return format_log([event_to_json(e) for e in events])


def _materialized(value: Any) -> Any:
    """A validated value with its lazy iterables consumed (which validates them) and
    models dumped as they were given."""
    if isinstance(value, BaseModel):
        return _materialized(value.model_dump(exclude_unset=True))
    if isinstance(value, Mapping):
        return {k: _materialized(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, Iterator)) or type(value).__name__ == "ValidatorIterator":
        return [_materialized(v) for v in value]
    return value


def _acp_valid(note: dict[str, Any]) -> None:
    model = SessionNotification.model_validate(note)
    back = model.model_dump(by_alias=True, exclude_unset=True)
    assert back == note, f"the ACP schema changed a notification:\n{note}\n{back}"
    wire = serialize_params(model)  # what the SDK's agent connection sends
    assert wire == note, f"the SDK would send another notification:\n{note}\n{wire}"


def _openai_valid(body: dict[str, Any]) -> None:
    back = _materialized(OPENAI.validate_python(body))
    assert back == body, f"openai's params type changed the body:\n{body}\n{back}"


def _anthropic_valid(body: dict[str, Any]) -> None:
    back = _materialized(ANTHROPIC.validate_python(body))
    assert back == body, f"anthropic's params type changed the body:\n{body}\n{back}"


def _has_header(events: Sequence[Event]) -> bool:
    return any(e.type == "request/header" for e in events)


# -- the ecosystems' types ----------------------------------------------------------------------


@pytest.mark.slow
@given(repaired_logs())
def test_every_acp_notification_validates_against_the_sdk_schema(events: tuple[Event, ...]) -> None:
    notes = acp_updates(events, session_id="sess-1")
    notes += acp_updates(events, session_id="sess-1", view="surface")
    state = AcpState.live("sess-1")
    for event in events:
        state, live = state.step(event)
        notes += live
    for note in notes:
        _acp_valid(note)


@pytest.mark.slow
@given(repaired_logs(rich=True))
def test_acp_notifications_of_rich_text_logs_validate(events: tuple[Event, ...]) -> None:
    for note in acp_updates(events, session_id="s"):
        _acp_valid(note)


@pytest.mark.slow
@given(repaired_logs())
def test_every_openai_body_validates_against_the_sdk_params(events: tuple[Event, ...]) -> None:
    if not _has_header(events):
        with pytest.raises(ProjectionError):
            openai_request(events)
        return
    _openai_valid(openai_request(events))
    _openai_valid(openai_request(events, images={"sha256:ab12": "https://x.test/p.png"}))


@pytest.mark.slow
@given(repaired_logs())
def test_every_anthropic_body_validates_against_the_sdk_params(
    events: tuple[Event, ...],
) -> None:
    if not _has_header(events):
        with pytest.raises(ProjectionError):
            anthropic_request(events)
        return
    _anthropic_valid(anthropic_request(events))
    _anthropic_valid(
        anthropic_request(events, images={"sha256:ab12": "data:image/png;base64,AA=="})
    )


# -- laws ---------------------------------------------------------------------------------------


def _openai_pairing(body: dict[str, Any]) -> None:
    messages = body["messages"]
    i = 0
    while i < len(messages):
        message = messages[i]
        assert message["role"] != "tool", f"message {i} answers no call: {message}"
        ids = [c["id"] for c in message.get("tool_calls", ())]
        answers = messages[i + 1 : i + 1 + len(ids)]
        assert [m.get("tool_call_id") for m in answers] == ids, (
            f"the calls of message {i} are not answered in order right after it"
        )
        i += 1 + len(ids)


def _anthropic_pairing(body: dict[str, Any]) -> None:
    messages = body["messages"]
    for i, message in enumerate(messages):
        if i:
            assert message["role"] != messages[i - 1]["role"], "two turns of one role in a row"
        uses = [b["id"] for b in message["content"] if b["type"] == "tool_use"]
        results = [b["tool_use_id"] for b in message["content"] if b["type"] == "tool_result"]
        if message["role"] == "assistant":
            assert not results
            if uses:
                following = messages[i + 1]["content"] if i + 1 < len(messages) else []
                answered = [b.get("tool_use_id") for b in following[: len(uses)]]
                assert answered == uses, f"the tool_use blocks of message {i} are not answered"
        else:
            previous = messages[i - 1]["content"] if i else []
            asked = [b["id"] for b in previous if b["type"] == "tool_use"]
            assert results == asked, f"message {i} has results its predecessor did not ask for"
            kinds = [b["type"] == "tool_result" for b in message["content"]]
            assert kinds == sorted(kinds, reverse=True), "text before a tool_result"


@pytest.mark.slow
@given(repaired_logs())
def test_law_bodies_of_a_repaired_log_pair_every_tool_call(events: tuple[Event, ...]) -> None:
    if not _has_header(events):
        return
    _openai_pairing(openai_request(events))
    _anthropic_pairing(anthropic_request(events))


@st.composite
def unrepaired_prefixes(draw: st.DrawFn) -> tuple[Event, ...]:
    """A G-loop log cut at a crash point, without its closers."""
    log: LoopLog = draw(loop_logs(max_actions=5, shape="any"))
    cut = draw(st.integers(0, len(log.events)))
    return tuple(event_from_json(e) for e in log.events[:cut])


@pytest.mark.slow
@given(unrepaired_prefixes())
def test_law_an_open_step_is_refused_never_sent_unpaired(events: tuple[Event, ...]) -> None:
    if not _has_header(events):
        return
    builders = ((openai_request, _openai_pairing), (anthropic_request, _anthropic_pairing))
    for build, paired in builders:
        try:
            body = build(events)
        except ToolPairingError:
            assert interrupted_turn_closers(events), "refused a history that needs no repair"
            continue
        paired(body)


def _texts(notes: Sequence[dict[str, Any]], kind: str) -> str:
    return "".join(
        n["update"]["content"].get("text", "")
        for n in notes
        if n["update"]["sessionUpdate"] == kind and n["update"]["content"]["type"] == "text"
    )


@pytest.mark.slow
@given(repaired_logs())
def test_law_text_streamed_live_equals_the_text_replayed(events: tuple[Event, ...]) -> None:
    live, replay = AcpState.live("s"), AcpState.replay("s")
    streamed: list[dict[str, Any]] = []
    for event in events:
        live, live_notes = live.step(event)
        replay, replay_notes = replay.step(event)
        if event.type == "step/start":
            streamed = []
        streamed += live_notes
        if event.type == "assistant/message":
            for kind in ("agent_message_chunk", "agent_thought_chunk"):
                assert _texts(streamed, kind) == _texts(replay_notes, kind), (
                    f"step ending at seq {event.seq}: live {kind} text differs from the replay\n"
                    + _shown(events)
                )
        elif event.type != "assistant/chunk":
            assert live_notes == replay_notes, f"seq {event.seq}: live and replay differ"


@pytest.mark.slow
@given(repaired_logs())
def test_law_transcript_is_the_replay_step_folded(events: tuple[Event, ...]) -> None:
    state, folded = AcpState.replay("s"), []
    for event in events:
        state, notes = state.step(event)
        folded += notes
    assert acp_updates(events, session_id="s") == tuple(folded)


@given(mutation_cases())
def test_a_log_admission_refuses_gives_kernel_error_and_no_projection(case: Any) -> None:
    wire = [*case.prefix, case.mutation.event]
    try:
        events = [event_from_json(e) for e in wire]
    except KernelError:
        return  # refused while decoding, before any projection could start
    for project in (
        lambda: acp_updates(events, session_id="s"),
        lambda: acp_updates(events, session_id="s", view="surface"),
        lambda: openai_request(events),
        lambda: anthropic_request(events),
    ):
        with pytest.raises(KernelError):
            project()


# -- examples -----------------------------------------------------------------------------------


def _user(log: SessionLog, text: str, *content: Any) -> SessionLog:
    message = {
        "id": f"u{len(log.events)}",
        "role": "user",
        "content": [{"type": "text", "text": text}, *content],
        "source": {"kind": "user"},
    }
    return log.append("user/message", message, time=1, surface_op=APPEND)


def _assistant(log: SessionLog, *content: Any) -> SessionLog:
    message = {
        "id": f"a{len(log.events)}",
        "role": "assistant",
        "content": list(content),
        "source": {"kind": "model", "provider": "p", "model": "m"},
    }
    data = {"turn": 1, "step": 1, "message": message}
    return log.append("assistant/message", data, time=1, surface_op=APPEND)


def _turn(*, calls: Sequence[str] = ("c.1", "c_1")) -> SessionLog:
    log = SessionLog.empty().append("turn/start", {"turn": 1}, time=1)
    log = log.append("step/start", {"turn": 1, "step": 1}, time=1)
    log = _user(log, "go")
    header = {"config": {"provider": "p", "model": "m", "maxTokens": 100}, "system": "s"}
    log = log.append("request/header", {"header": header, "reason": "initial"}, time=1)
    blocks = [{"type": "tool-call", "id": c, "name": "read", "arguments": "{}"} for c in calls]
    return _assistant(log, {"type": "reasoning", "text": "hm"}, *blocks)


def test_closer_results_are_failed_updates_carrying_code_and_text() -> None:
    log = _turn()
    log = log.append(
        "tool/call",
        {"turn": 1, "step": 1, "callId": "c.1", "name": "read", "arguments": "{}"},
        time=2,
    )
    events = (*log.events, *interrupted_turn_closers(log.events))
    notes = [n["update"] for n in acp_updates(events, session_id="s")]
    failed = [u for u in notes if u.get("status") == "failed"]
    assert [u["toolCallId"] for u in failed] == ["c.1", "c_1"]
    assert [u["rawOutput"]["error"]["code"] for u in failed] == [
        "TOOL_OUTCOME_UNKNOWN",
        "TOOL_NOT_STARTED",
    ]
    assert all(u["content"][0]["content"]["text"] for u in failed)


def test_compaction_transcript_keeps_shadowed_messages_surface_does_not() -> None:
    log = _user(SessionLog.empty(), "first")
    log = _user(log, "second")
    summary = {
        "id": "s1",
        "role": "user",
        "content": [{"type": "text", "text": "summary"}],
        "source": {"kind": "plugin", "plugin": "compactor"},
    }
    log = log.append(
        "user/message",
        summary,
        time=2,
        surface_op={"op": "replace", "start": 0, "end": 0},
        source_event_seqs=[0],
    )

    def texts(view: Any) -> list[str]:
        notes = acp_updates(log.events, session_id="s", view=view)
        return [n["update"]["content"]["text"] for n in notes]

    assert texts("transcript") == ["first", "second", "summary"]
    assert texts("surface") == ["summary", "second"]


def test_images_and_extension_blocks_map_by_the_stated_rule() -> None:
    extension = {"type": "citation", "url": "u"}
    log = _user(SessionLog.empty(), "look", IMAGE, extension)
    log = log.append(
        "request/header",
        {"header": {"config": {"provider": "p", "model": "m"}}, "reason": "initial"},
        time=1,
    )
    contents = [n["update"]["content"] for n in acp_updates(log.events, session_id="s")]
    assert contents[1] == {
        "type": "resource_link",
        "name": "plot.png",
        "uri": "sha256:ab12",
        "mimeType": "image/png",
        "size": 2048,
    }
    assert contents[2] == {"type": "text", "text": '{"type":"citation","url":"u"}'}
    body = openai_request(log.events, images={"sha256:ab12": "https://x.test/a.png"})
    assert body["messages"][0]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "https://x.test/a.png"},
    }
    unresolved = openai_request(log.events)["messages"][0]["content"][1]
    assert unresolved["type"] == "text" and "sha256:ab12" in unresolved["text"]
    anthropic = anthropic_request(log.events, images={"sha256:ab12": "data:image/png;base64,AA=="})
    assert anthropic["messages"][0]["content"][1]["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": "AA==",
    }


def test_reasoning_is_never_sent_back_to_a_provider() -> None:
    log = _turn(calls=())
    log = _assistant(log, {"type": "reasoning", "text": "only thinking"})
    for body in (openai_request(log.events), anthropic_request(log.events)):
        assert "only thinking" not in str(body)
        assert "hm" not in str(body["messages"])


def test_unanswered_call_is_a_tool_pairing_error_until_repaired() -> None:
    log = _turn()
    with pytest.raises(ToolPairingError):
        openai_request(log.events)
    with pytest.raises(ToolPairingError):
        anthropic_request(log.events)
    repaired = (*log.events, *interrupted_turn_closers(log.events))
    assert [m["role"] for m in openai_request(repaired)["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
    ]


def test_a_notice_between_two_results_moves_after_them() -> None:
    log = _turn(calls=("a", "b"))

    def result(log: SessionLog, call: str) -> SessionLog:
        message = {
            "id": f"r{call}",
            "role": "user",
            "content": [{"type": "tool-result", "toolCallId": call, "content": []}],
            "source": {"kind": "tool", "callId": call},
        }
        data = {"turn": 1, "step": 1, "message": message}
        return log.append("tool/result", data, time=3, surface_op=APPEND)

    log = _user(result(log, "b"), "notice")
    log = result(log, "a")
    roles = [(m["role"], m.get("tool_call_id")) for m in openai_request(log.events)["messages"]]
    assert roles[-3:] == [("tool", "a"), ("tool", "b"), ("user", None)]
    last = anthropic_request(log.events)["messages"][-1]["content"]
    assert [b["type"] for b in last] == ["tool_result", "tool_result", "text"]


def test_anthropic_tool_ids_are_rewritten_one_to_one() -> None:
    history = paired_history(
        [
            {
                "id": "a",
                "role": "assistant",
                "content": [
                    {"type": "tool-call", "id": i, "name": "n", "arguments": "{}"}
                    for i in ("c.1", "c_1", "c_1_2", "c 1")
                ],
                "source": {"kind": "model"},
            }
        ]
        + [
            {
                "id": f"r{i}",
                "role": "user",
                "content": [{"type": "tool-result", "toolCallId": i, "content": []}],
                "source": {"kind": "tool", "callId": i},
            }
            for i in ("c.1", "c_1", "c_1_2", "c 1")
        ]
    )
    ids = anthropic_tool_ids(history)
    assert ids["c_1"] == "c_1" and ids["c_1_2"] == "c_1_2"
    assert len(set(ids.values())) == 4
    assert all(v.replace("_", "").replace("-", "").isalnum() for v in ids.values())


def test_no_header_in_force_is_a_projection_error() -> None:
    log = _user(SessionLog.empty(), "hi")
    with pytest.raises(ProjectionError):
        openai_request(log.events)
    with pytest.raises(ProjectionError):
        acp_updates(log.events, session_id="s", view="everything")  # type: ignore[arg-type]


def test_header_settings_reach_both_bodies() -> None:
    log = SessionLog.empty().append("turn/start", {"turn": 1}, time=1)
    config = {
        "provider": "p",
        "model": "m",
        "temperature": 0.5,
        "maxTokens": 77,
        "stop": ["END"],
        "reasoningEffort": "high",
    }
    log = log.append("request/header", {"header": {"config": config}, "reason": "initial"}, time=1)
    log = _user(log, "hi")
    openai = openai_request(log.events)
    assert (openai["temperature"], openai["max_tokens"], openai["stop"]) == (0.5, 77, ["END"])
    assert openai["reasoning_effort"] == "high"
    anthropic = anthropic_request(log.events)
    assert (anthropic["max_tokens"], anthropic["stop_sequences"]) == (77, ["END"])
    assert anthropic["output_config"] == {"effort": "high"}
    # Found by the validation property: anthropic's Messages params have no temperature.
    assert "temperature" not in anthropic


def test_core_import_loads_no_sdk() -> None:
    code = (
        "import sys, kernel, kernel.projections\n"
        "bad = [m for m in ('acp', 'openai', 'anthropic', 'pydantic') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_projections_import_only_the_core_and_the_standard_library() -> None:
    import ast
    from pathlib import Path

    import kernel.projections

    root = Path(kernel.projections.__file__).parent
    allowed_third_party = {"attrs", "pyrsistent", "orjson"}  # runtime dependencies of the core
    forbidden = {"os", "io", "sys", "time", "pathlib"}
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                assert top not in forbidden, f"{path.name} imports {name}"
                assert (
                    top in ("kernel", "__future__")
                    or top in allowed_third_party
                    or top in sys.stdlib_module_names
                ), f"{path.name} imports {name}"
                assert not name.startswith("kernel.store") and not name.startswith("kernel.cli")


def test_live_mode_sends_only_what_the_stream_did_not() -> None:
    log = SessionLog.empty().append("turn/start", {"turn": 1}, time=1)
    log = log.append("step/start", {"turn": 1, "step": 1}, time=1)
    for text in ("Hel", ""):
        chunk = {"type": "text-delta", "index": 0, "text": text}
        log = log.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk}, time=1)
    log = _assistant(log, {"type": "text", "text": "Hello"}, {"type": "text", "text": "!"})
    state, sent = AcpState.live("s"), []
    for event in log.events:
        state, notes = state.step(event)
        sent += [n["update"]["content"]["text"] for n in notes]
    assert sent == ["Hel", "lo", "!"]
    replayed = [n["update"]["content"]["text"] for n in acp_updates(log.events, session_id="s")]
    assert replayed == ["Hello", "!"]


def test_todos_usage_and_title_map_to_plan_usage_and_session_info() -> None:
    log = SessionLog.empty().append("turn/start", {"turn": 1}, time=1)
    route = {"provider": "p", "model": "m", "contextWindow": 1000}
    log = log.append("request/context", route, time=1)
    todos = [{"content": "check", "status": "in_progress"}, {"content": 3}]
    log = log.append("todo/write", {"todos": todos}, time=1)
    log = log.append("session/title", {"title": "Flaky tests"}, time=1)
    message = {
        "id": "a1",
        "role": "assistant",
        "content": [{"type": "text", "text": "ok"}],
        "source": {"kind": "model", "provider": "p", "model": "m"},
    }
    data = {
        "turn": 1,
        "step": 1,
        "message": message,
        "usage": {"inputTokens": 90, "outputTokens": 10},
    }
    log = log.append("assistant/message", data, time=1, surface_op=APPEND)
    updates = [n["update"] for n in acp_updates(log.events, session_id="s")]
    assert updates[0] == {
        "sessionUpdate": "plan",
        "entries": [
            {"content": "check", "priority": "medium", "status": "in_progress"},
            {"content": '{"content":3}', "priority": "medium", "status": "pending"},
        ],
    }
    assert updates[1] == {"sessionUpdate": "session_info_update", "title": "Flaky tests"}
    assert updates[-1] == {"sessionUpdate": "usage_update", "used": 100, "size": 1000}
    surface = [
        n["update"]["sessionUpdate"] for n in acp_updates(log, session_id="s", view="surface")
    ]
    assert surface == ["agent_message_chunk"]


def test_arguments_that_are_not_json_stay_raw() -> None:
    log = _turn(calls=())
    call = {"type": "tool-call", "id": "c1", "name": "bash", "arguments": "not json"}
    log = _assistant(log, call)
    tool_call = next(
        n["update"] for n in acp_updates(log.events, session_id="s") if "toolCallId" in n["update"]
    )
    assert (tool_call["kind"], tool_call["rawInput"]) == ("execute", "not json")
    repaired = (*log.events, *interrupted_turn_closers(log.events))
    use = anthropic_request(repaired)["messages"][1]["content"][0]
    assert use["input"] == {"arguments": "not json"}
    assert openai_request(repaired)["messages"][2]["tool_calls"][0]["function"]["arguments"] == (
        "not json"
    )


JUNK: tuple[Any, ...] = (None, 5, "x", [None], [{"type": 1}], {"a": 1}, [[]], b"\xff")


def test_only_kernel_errors_come_out_of_the_projections() -> None:
    log = _turn(calls=())
    good = tuple(log.events)
    calls: list[Any] = []
    for junk in JUNK:
        calls += [
            lambda j=junk: acp_updates(j, session_id="s"),
            lambda j=junk: acp_updates(good, session_id=j if not isinstance(j, str) else 0),
            lambda j=junk: acp_updates(good, session_id="s", view=j),
            lambda j=junk: openai_request(j),
            lambda j=junk: openai_request(good, images=j if j is not None else {"a": 1}),
            lambda j=junk: anthropic_request(good, max_tokens=j if j != 5 else 0),
            lambda j=junk: paired_history(j if isinstance(j, list) else [j]),
            lambda j=junk: AcpState.live("s").step(j),
        ]
    broken = Event("tool/result", 0, 1, {"message": {"content": 3}}, APPEND)
    calls.append(lambda: AcpState.replay("s").step(broken))
    for call in calls:
        with pytest.raises(KernelError):
            call()
