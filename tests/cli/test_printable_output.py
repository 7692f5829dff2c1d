"""Every value a log admits prints: deep nesting and lone surrogates, in JSON and projections.

Admitted values nest without limit and strings may hold lone surrogates
(docs/format/events.md §1). The command's JSON writer (`json_document`) prints
any such document as valid UTF-8 JSON, laid out as orjson lays out the rest; the
projections return well-formed strings only (a lone surrogate becomes U+FFFD),
because the provider SDKs encode a body as UTF-8 and cannot send one
(docs/projections.md, "Strings and nesting").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from kernel import APPEND, SessionLog, write_jsonl
from kernel.cli import main
from kernel.cli.output import json_document
from kernel.projections import (
    AcpState,
    acp_content,
    acp_updates,
    anthropic_request,
    openai_request,
    openai_tool_ids,
    paired_history,
)
from kernel.projections.blocks import degraded_text, well_formed
from kernel.values.json import json_equal
from kernel.wire.jsontext import encode_json, parse_json

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

LONE = "\ud800"
"""A lone high surrogate: admitted in log text, not encodable as UTF-8."""


def _deep(levels: int, leaf: Any = "bottom") -> Any:
    """`{"a": {"a": ... leaf}}`, `levels` objects deep, built without recursion."""
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


def _header(session_id: str) -> dict[str, Any]:
    return {"version": 0, "id": session_id, "createdAt": 1_760_000_000_000, "cwd": "/p"}


class _Log:
    """Appends through `SessionLog.append` (full admission) with a ticking clock."""

    def __init__(self, session_id: str) -> None:
        self.log = SessionLog.empty(header=_header(session_id))
        self.clock = 1_760_000_000_000

    def add(self, type_: str, data: Any, **kwargs: Any) -> None:
        self.clock += 1
        self.log = self.log.append(type_, data, time=self.clock, **kwargs)

    def user(self, message_id: str, *content: Any) -> None:
        message = {"id": message_id, "role": "user", "content": list(content)}
        self.add("user/message", {**message, "source": {"kind": "user"}}, surface_op=APPEND)

    def assistant(self, message_id: str, *content: Any) -> None:
        source = {"kind": "model", "provider": "p", "model": "m"}
        message = {"id": message_id, "role": "assistant", "content": list(content)}
        data = {"turn": 1, "step": 1, "message": {**message, "source": source}}
        self.add("assistant/message", data, surface_op=APPEND)

    def result(self, message_id: str, call_id: str, text: str) -> None:
        block = {"type": "tool-result", "toolCallId": call_id, "content": [_text(text)]}
        source = {"kind": "tool", "callId": call_id}
        message = {"id": message_id, "role": "user", "content": [block], "source": source}
        self.add("tool/result", {"turn": 1, "step": 1, "message": message}, surface_op=APPEND)

    def write(self, path: Path) -> Path:
        path.write_bytes(write_jsonl(self.log.header, self.log.events))
        return path


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"type": "tool-call", "id": call_id, "name": name, "arguments": arguments}


def _hostile_log(levels: int, half: str = LONE) -> SessionLog:
    """One turn whose text, ids, names, keys and values hold `half` (a lone surrogate),
    and whose tool arguments, tool schema and an extension block nest `levels` deep."""
    b = _Log("hostile")
    b.add("turn/start", {"turn": 1})
    b.add("step/start", {"turn": 1, "step": 1})
    tools = [{"name": "t", "description": f"d{half}", "parameters": _deep(levels)}]
    config = {"provider": "p", "model": "m", "stop": [f"s{half}"]}
    header = {"config": config, "system": f"sys{half}", "tools": tools}
    b.add("request/header", {"header": header, "reason": "initial"})
    b.user("u1", _text(f"lone {half} half"), {"type": "x-ext", "v": _deep(levels, half)})
    arguments = encode_json({f"k{half}": _deep(levels, f"v{half}")})
    b.assistant("a1", _text(f"ok{half}"), _call(f"c1{half}", f"t{half}", arguments))
    b.add(
        "tool/call", {"turn": 1, "step": 1, "callId": f"c1{half}", "name": "t", "arguments": "{}"}
    )
    b.result("r1", f"c1{half}", f"done {half}")
    b.add("step/end", {"turn": 1, "step": 1})
    b.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    return b.log


def _run(capsysbinary: pytest.CaptureFixture[bytes], *args: str | Path) -> tuple[int, bytes]:
    code = main([str(arg) for arg in args])
    out, err = capsysbinary.readouterr()
    assert b"Traceback" not in err, err
    return code, out


def _strings(value: Any) -> list[str]:
    """Every string of a JSON value, keys included (iterative)."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is str:
            found.append(item)
        elif type(item) is dict:
            found.extend(item)
            stack.extend(item.values())
        elif type(item) in (list, tuple):
            stack.extend(item)
    return found


# -- the command's JSON writer ------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["acp", "openai", "anthropic"])
@pytest.mark.parametrize(
    ("levels", "half"),
    [(300, ""), (1500, LONE)],
    ids=["past orjson's 254 levels", "past the recursion limit, with lone surrogates"],
)
def test_export_prints_deep_values_and_lone_surrogates_as_json_that_parses_back(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes], fmt: str, levels: int, half: str
) -> None:
    log = _hostile_log(levels, half)
    path = _Log.write(_as_builder(log), tmp_path / "hostile.jsonl")
    expected: Any = {
        "acp": lambda: list(acp_updates(log, session_id="hostile")),
        "openai": lambda: openai_request(log),
        "anthropic": lambda: anthropic_request(log),
    }[fmt]()

    code, out = _run(capsysbinary, "export", path, "--format", fmt)

    assert code == 0
    out.decode("utf-8")  # strict: every byte sequence is UTF-8
    assert json_equal(parse_json(out), expected)


def _as_builder(log: SessionLog) -> _Log:
    builder = _Log("unused")
    builder.log = log
    return builder


def test_inspect_json_prints_a_deep_tool_call_id_exactly(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    # Blocks are not validated past the message level: a tool-call block in a user
    # message may carry any id, and inspect previews it as it is.
    b = _Log("ids")
    b.add("turn/start", {"turn": 1})
    deep_id = _deep(3000, LONE)
    b.user("u1", {"type": "tool-call", "id": deep_id, "name": f"n{LONE}"})
    b.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    path = b.write(tmp_path / "ids.jsonl")

    code, out = _run(capsysbinary, "inspect", "--json", path)

    assert code == 0
    block = parse_json(out)["messages"][0]["content"][0]
    assert json_equal(block["id"], deep_id)
    assert block["name"] == f"n{LONE}"  # inspect is lossless: the escape reads back as the half
    assert b'"n\\ud800"' in out


def test_a_refused_document_is_laid_out_as_orjson_lays_out_the_rest() -> None:
    document = {"a": [1, 2.5, {"b": None, "": []}], "c": {}, "d": [True, "é\u009b\x7f"]}
    with_half = {**document, "s": f"x{LONE}y"}
    placeholder = {**document, "s": "x\u0001y"}

    assert json_document(document) == orjson.dumps(
        document, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE
    ).replace(b"\xc2\x9b", b"\\u009b").replace(b"\x7f", b"\\u007f")
    assert json_document(with_half) == json_document(placeholder).replace(b"\\u0001", b"\\ud800")


def test_lone_surrogates_are_lower_case_escapes_and_split_pairs_are_joined() -> None:
    out = json_document({"lone": f"a{LONE}", "low": "\udfff", "pair": "\ud83d\ude00"})

    assert b'"a\\ud800"' in out and b'"\\udfff"' in out
    assert '"😀"'.encode() in out  # a high then a low half is the character they encode
    assert parse_json(out) == {"lone": f"a{LONE}", "low": "\udfff", "pair": "😀"}


def test_a_deep_document_prints_in_size_linear_in_its_depth() -> None:
    # Indenting every level would write 2 * depth spaces on each of `depth` lines:
    # 100 MB here; levels past the 200th are compact.
    document = _deep(10_000, LONE)

    out = json_document(document)

    assert json_equal(parse_json(out), document)
    assert len(out) < 2 * len(encode_json(document)) + 200 * 200 * 2


def test_a_document_that_holds_itself_is_an_error_not_a_hang() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(TypeError):
        json_document({"loop": loop})


# -- projections: well-formed strings -----------------------------------------------------------


def test_projections_send_a_lone_surrogate_as_u_fffd_everywhere() -> None:
    log = _hostile_log(3)
    outputs = {
        "acp transcript": acp_updates(log, session_id=f"s{LONE}"),
        "acp surface": acp_updates(log, session_id="s", view="surface"),
        "openai": openai_request(log),
        "anthropic": anthropic_request(log),
    }
    for name, output in outputs.items():
        strings = _strings(output)
        for text in strings:
            text.encode("utf-8")  # raises UnicodeEncodeError on a surrogate
        assert any("\ufffd" in text for text in strings), name
    notes = outputs["acp transcript"]
    assert notes[0]["sessionId"] == "s\ufffd"
    call = next(n["update"] for n in notes if n["update"]["sessionUpdate"] == "tool_call")
    assert call["toolCallId"] == "c1\ufffd" and call["title"] == "t\ufffd"
    assert call["rawInput"] == {"k\ufffd": _deep(3, "v\ufffd")}
    openai = outputs["openai"]
    assert openai["messages"][0] == {"role": "system", "content": "sys\ufffd"}
    assert openai["stop"] == ["s\ufffd"]
    assert openai["tools"][0]["function"]["description"] == "d\ufffd"


def test_a_degraded_block_keeps_a_lone_surrogate_as_its_escape() -> None:
    block = {"type": "x-ext", "v": f"half {LONE}"}

    text = degraded_text(block)

    assert text == '{"type":"x-ext","v":"half \\ud800"}'
    assert parse_json(text) == block
    assert acp_content(block) == {"type": "text", "text": text}


def test_openai_ids_that_differ_only_in_lone_surrogates_stay_distinct() -> None:
    b = _Log("ids")
    b.add("turn/start", {"turn": 1})
    b.add("step/start", {"turn": 1, "step": 1})
    config = {"provider": "p", "model": "m"}
    b.add("request/header", {"header": {"config": config}, "reason": "initial"})
    b.user("u1", _text("go"))
    calls = ("c\ud800", "c\udc00", "c\ufffd")
    b.assistant("a1", *(_call(c, "t", "{}") for c in calls))
    for index, call_id in enumerate(calls):
        b.result(f"r{index}", call_id, "ok")
    b.add("step/end", {"turn": 1, "step": 1})
    b.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})

    body = openai_request(b.log)

    sent = [c["id"] for c in body["messages"][1]["tool_calls"]]
    answered = [m["tool_call_id"] for m in body["messages"][2:]]
    assert sent == answered == ["c\ufffd_2", "c\ufffd_3", "c\ufffd"]
    assert openai_tool_ids(paired_history(b.log.messages))["c\ufffd"] == "c\ufffd"


def test_live_step_sends_a_stream_chunk_with_a_lone_surrogate_as_u_fffd() -> None:
    b = _Log("live")
    b.add("turn/start", {"turn": 1})
    b.add("step/start", {"turn": 1, "step": 1})
    b.add("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "text": LONE}})
    state = AcpState.live("live")
    sent: list[Any] = []
    for event in b.log.events:
        state, notes = state.step(event)
        sent.extend(notes)
    assert [n["update"]["content"]["text"] for n in sent] == ["\ufffd"]


def test_live_stream_that_splits_a_pair_between_chunks_is_not_sent_again() -> None:
    # Each chunk holds one half alone; the message holds the character they make.
    b = _Log("split")
    b.add("turn/start", {"turn": 1})
    b.add("step/start", {"turn": 1, "step": 1})
    for text in ("ab\ud83d", "\ude00c"):
        chunk = {"type": "text-delta", "text": text}
        b.add("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk})
    b.assistant("a1", _text("ab\U0001f600c"))
    state = AcpState.live("split")
    sent: list[Any] = []
    for event in b.log.events:
        state, notes = state.step(event)
        sent.extend(notes)
    assert [n["update"]["content"]["text"] for n in sent] == ["ab\ufffd", "\ufffdc"]


def test_two_keys_that_differ_only_in_lone_surrogates_keep_the_later_member() -> None:
    value = {chr(0xD800): 1, chr(0xDC00): 2, "k": 3}  # literals would read as one key to ruff
    assert well_formed(value) == {"\ufffd": 2, "k": 3}
    assert list(well_formed(value)) == ["\ufffd", "k"]  # at the first member's place


def test_well_formed_mends_a_value_nested_past_orjsons_limit() -> None:
    value = (_deep(5000, f"x{LONE}"), {"fine": "yes"})

    mended = well_formed(value)

    assert type(mended) is tuple
    assert json_equal(mended, (_deep(5000, "x\ufffd"), {"fine": "yes"}))
    assert mended[1] is value[1]  # a part that needs nothing is shared, not copied


@pytest.mark.parametrize("name", ["compaction.jsonl", "crash-torn-tail.jsonl"])
def test_well_formed_outputs_of_ordinary_logs_are_returned_as_they_are(name: str) -> None:
    from kernel import load_jsonl

    events = load_jsonl((EXAMPLES / name).read_bytes(), now=0).events
    outputs: Sequence[Any] = (
        acp_updates(events, session_id="s"),
        openai_request(events),
        anthropic_request(events),
    )
    for output in outputs:
        assert well_formed(output) is output


@pytest.mark.slow
def test_the_provider_sdks_send_the_bodies_of_a_log_holding_lone_surrogates() -> None:
    # The OpenAI and Anthropic clients encode a body as UTF-8 JSON (ensure_ascii off):
    # a lone surrogate raises UnicodeEncodeError before anything is sent.
    openai = pytest.importorskip("openai")
    anthropic = pytest.importorskip("anthropic")
    httpx = pytest.importorskip("httpx2")
    sent: list[bytes] = []

    def answer(request: Any) -> Any:
        sent.append(request.content)
        return httpx.Response(400, json={"error": {"type": "invalid", "message": "stop"}})

    log = _hostile_log(3)
    http = httpx.Client(transport=httpx.MockTransport(answer))
    bodies = (openai_request(log), anthropic_request(log))
    clients = (
        openai.OpenAI(api_key="k", base_url="http://test", http_client=http, max_retries=0),
        anthropic.Anthropic(api_key="k", base_url="http://test", http_client=http, max_retries=0),
    )
    with pytest.raises(openai.BadRequestError):
        clients[0].chat.completions.create(**bodies[0])
    with pytest.raises(anthropic.BadRequestError):
        clients[1].messages.create(**bodies[1])
    assert [json.loads(content) for content in sent] == list(bodies)
