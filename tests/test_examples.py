"""The example logs in examples/ load as documented, and are the exact bytes the writer produces.

Each example is checked through the public pipeline (`load_jsonl`), so a
change in the wire format or in load semantics that the examples no longer
follow fails here, and the prose in docs/guide.md and docs/cli.md about them
stays true.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from kernel import (
    TOOL_NOT_STARTED,
    TOOL_OUTCOME_UNKNOWN,
    SessionLog,
    check_invariants,
    derive_messages,
    fold_request_header,
    fold_surface,
    interrupted_turn_closers,
    load_jsonl,
    load_jsonl_zstd,
    thaw,
    tool_pairing_cuts,
    write_jsonl,
)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NOW = 1760000999000


def _read(name: str) -> bytes:
    return (EXAMPLES / name).read_bytes()


def _ids(messages: Any) -> list[str]:
    return [m["id"] for m in messages]


@pytest.mark.parametrize("name", ["clean-run.jsonl", "compaction.jsonl"])
def test_complete_examples_load_without_repair_and_are_the_writers_exact_bytes(name: str) -> None:
    data = _read(name)
    loaded = load_jsonl(data, now=NOW)
    assert not loaded.torn
    assert loaded.closers == ()
    assert loaded.committed_bytes == loaded.total_bytes == len(data)
    assert [e.seq for e in loaded.events] == list(range(len(loaded.events)))
    assert check_invariants(loaded.events) == ()
    assert write_jsonl(loaded.header, loaded.events) == data


def test_clean_run_is_the_spec_one_turn_log_plus_a_second_turn() -> None:
    data = _read("clean-run.jsonl")
    spec_turn = data.split(b"\n")[:18]  # the header line and the one-turn log, seqs 0-16
    loaded = load_jsonl(data, now=NOW)
    assert len(loaded.events) == 30
    assert write_jsonl(loaded.header, loaded.events[:17]).split(b"\n")[:18] == spec_turn
    assert [e.type for e in loaded.events].count("turn/end") == 2
    assert fold_surface(loaded.events).nodes == (2, 9, 11, 14, 19, 27)
    assert _ids(derive_messages(loaded.events)) == ["m-u1", "m-a1", "m-r1", "m-a2", "m-u2", "m-a3"]
    # the second turn's three text deltas are stored as one packed row
    assert data.count(b'"type":"text-chunks"') == 1
    unpacked = write_jsonl(loaded.header, loaded.events, pack_chunks=False)
    assert unpacked.count(b"\n") == data.count(b"\n") + 2
    assert load_jsonl(unpacked, now=NOW).events == loaded.events
    # turn 2 inherits the snapshot of turn 1: one request/header in the whole log
    assert [e.type for e in loaded.events].count("request/header") == 1


def test_compaction_replaces_a_balanced_range_and_rewrites_one_result() -> None:
    loaded = load_jsonl(_read("compaction.jsonl"), now=NOW)
    fold = fold_surface(loaded.events)
    assert [(r.seq, r.start, r.end, r.shadowed_seqs) for r in fold.replacements] == [
        (27, 18, 18, (18,)),
        (28, 2, 10, (2, 5, 7, 10)),
    ]
    assert fold.nodes == (28, 15, 16, 27, 21, 26, 30)
    messages = derive_messages(loaded.events)
    assert _ids(messages) == ["m-s1", "m-u2", "m-a3", "m-r2", "m-a4", "m-u3", "m-a5"]
    pruned = thaw(messages[3])["content"][0]["content"]
    assert pruned == [{"type": "text", "text": "[output pruned by compaction]"}]
    # the summary's range started and ended on balanced cuts before it was replaced
    before = load_jsonl(_read("compaction.jsonl"), now=NOW).events[:28]
    cuts = {c.seq: c for c in tool_pairing_cuts(before)}
    assert cuts[2].before and cuts[10].after
    assert all(c.before and c.after for c in tool_pairing_cuts(loaded.events)[-3:])
    # the first request after the replacement starts a new series with the same header
    headers = [e for e in loaded.events if e.type == "request/header"]
    assert [h.data["reason"] for h in headers] == ["initial", "series"]
    assert thaw(headers[0].data["header"]) == thaw(headers[1].data["header"])
    assert fold_request_header(loaded.events) == headers[0].data["header"]


def test_crash_example_loads_with_a_torn_tail_and_closes_the_interrupted_turn() -> None:
    data = _read("crash-torn-tail.jsonl")
    assert not data.endswith(b"\n")
    loaded = load_jsonl(data, now=NOW)
    assert loaded.torn
    assert loaded.committed_bytes == data.rindex(b"\n") + 1
    assert loaded.total_bytes == len(data)

    stored = loaded.events[: len(loaded.events) - len(loaded.closers)]
    assert [e.seq for e in stored] == list(range(13))
    assert write_jsonl(loaded.header, stored) == data[: loaded.committed_bytes]
    last = stored[-1]
    assert (last.type, last.data["callId"]) == ("tool/call", "c1")

    closers = loaded.closers
    assert [(e.seq, e.type) for e in closers] == [
        (13, "tool/result"),
        (14, "tool/result"),
        (15, "step/end"),
        (16, "turn/end"),
    ]
    assert all(e.time == last.time for e in closers)
    unknown, not_started, step_end, turn_end = closers
    assert unknown.data["error"]["code"] == TOOL_OUTCOME_UNKNOWN
    assert unknown.data["message"]["source"]["callId"] == "c1"
    assert unknown.source_event_seqs == (last.seq,)
    assert not_started.data["error"]["code"] == TOOL_NOT_STARTED
    assert not_started.data["message"]["source"]["callId"] == "c2"
    assert not_started.source_event_seqs is None
    assert [r.data["message"]["id"] for r in (unknown, not_started)] == [
        "interrupted-tool-result-c1-13",
        "interrupted-tool-result-c2-14",
    ]
    assert thaw(step_end.data) == {"turn": 2, "step": 1}
    assert thaw(turn_end.data) == {"turn": 2, "reason": {"kind": "interrupted"}}

    assert interrupted_turn_closers(stored) == closers
    assert interrupted_turn_closers(loaded.events) == ()
    assert check_invariants(loaded.events) == ()
    assert _ids(derive_messages(loaded.events))[-3:] == [
        "m-a2",
        "interrupted-tool-result-c1-13",
        "interrupted-tool-result-c2-14",
    ]
    assert tool_pairing_cuts(loaded.events)[-1].after


def test_repaired_crash_example_resumes_as_a_live_session() -> None:
    loaded = load_jsonl(_read("crash-torn-tail.jsonl"), now=NOW)
    log = SessionLog.seed(loaded.events, header=loaded.header, now=NOW)
    assert log.events[-1].type == "session/end-seed"
    assert len(log.events) == len(loaded.events) + 1
    log = log.append("turn/start", {"turn": 3}, time=NOW + 1)
    assert check_invariants(log.events) == ()
    assert tuple(log.messages) == derive_messages(loaded.events)


def test_zstd_crash_example_tears_inside_its_last_frame_and_loads_like_the_plain_one() -> None:
    data = _read("crash-torn-tail.jsonl.zstd")
    loaded = load_jsonl_zstd(data, now=NOW)
    plain = load_jsonl(_read("crash-torn-tail.jsonl"), now=NOW)
    assert loaded.torn
    assert loaded.total_bytes == len(data)
    assert 0 < loaded.committed_bytes < len(data)
    assert data[loaded.committed_bytes : loaded.committed_bytes + 4] == b"\x28\xb5\x2f\xfd"
    assert loaded.header == plain.header
    assert loaded.events == plain.events
    assert loaded.closers == plain.closers


# -- the code shown in README.md and docs/guide.md runs as shown ------------------------------

ROOT = EXAMPLES.parent


def _python_blocks(doc: str) -> list[str]:
    text = (ROOT / doc).read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def _block(doc: str, marker: str) -> str:
    found = [block for block in _python_blocks(doc) if marker in block]
    assert len(found) == 1, f"{doc}: expected one python block containing {marker!r}"
    return found[0]


def test_readme_api_tour_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    namespace: dict[str, Any] = {}
    exec(_block("README.md", "load_jsonl("), namespace)
    log = namespace["log"]
    assert log.events[-1].type == "turn/start"
    assert check_invariants(log.events) == ()


def test_guide_crash_repair_snippet_prints_the_closers(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    exec(_block("docs/guide.md", "crash-torn-tail.jsonl"), {})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("True ")
    assert [line.split()[1] for line in lines[1:]] == [
        "tool/result",
        "tool/result",
        "step/end",
        "turn/end",
    ]


def _fake_model() -> tuple[Any, list[list[str]]]:
    """A model that asks for one `ls` call on its first request, then answers in text."""
    seen: list[list[str]] = []
    source = {"kind": "model", "provider": "deepseek", "model": "deepseek-chat"}

    def call_model(header: Any, messages: list[dict[str, Any]]) -> dict[str, Any]:
        assert header["config"]["model"] == "deepseek-chat"
        seen.append([m["id"] for m in messages])
        if len(seen) == 1:
            call = {"type": "tool-call", "id": "c1", "name": "ls", "arguments": "{}"}
            return {"id": "a1", "role": "assistant", "content": [call], "source": source}
        text = {"type": "text", "text": "one file"}
        return {"id": f"a{len(seen)}", "role": "assistant", "content": [text], "source": source}

    return call_model, seen


def test_guide_writer_loop_and_store_run_as_shown(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    ns: dict[str, Any] = {}
    exec(_block("docs/guide.md", "def run_turn("), ns)
    exec(_block("docs/guide.md", 'JsonlStore("sessions/")'), ns)
    header = {
        "config": {"provider": "deepseek", "model": "deepseek-chat"},
        "tools": [{"name": "ls", "description": "List files", "parameters": {"type": "object"}}],
    }
    call_model, seen = _fake_model()
    log, writer = ns["log"], ns["writer"]
    for turn in (1, 2):
        log, writer = ns["run_turn"](
            log,
            writer,
            turn,
            "list the files",
            header,
            call_model,
            lambda n, a: "a.txt",
            ns["persist"],
        )
    assert check_invariants(log.events) == ()
    assert seen == [["u-1"], ["u-1", "a1", "r-c1"], ["u-1", "a1", "r-c1", "a2", "u-2"]]
    reasons = [e.data["reason"] for e in log.events if e.type == "request/header"]
    assert reasons == ["initial"]
    assert derive_messages(log.events) == tuple(log.messages)

    # The resume: a live session over the same store, one more turn through it.
    ns["request_header"] = header
    exec(_block("docs/guide.md", 'open_session(store, "demo", now=now())'), ns)
    live = ns["session"].log
    assert tuple(live.events[: len(log.events)]) == tuple(log.events)
    assert live.events[len(log.events)].type == "session/end-seed"
    reread = ns["store"].inspect("demo")
    assert reread.events == tuple(live.events)
    assert not reread.repair.needed
    assert check_invariants(reread.events) == ()
