"""The `session-kernel` command through its real entry point (`python -m kernel.cli`).

Logs are built in `tmp_path` with the kernel's own `SessionLog` and written with
`write_jsonl` / `write_jsonl_zstd`, so every expected number below is known from
how the log was made, not read back from the command under test.
"""

from __future__ import annotations

import errno
import io
import json
import os
import random
import sqlite3
import subprocess
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import pytest

from kernel.folds.closers import TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN
from kernel.log import SessionLog
from kernel.storage.jsonl import write_jsonl
from kernel.storage.zstd import encode_zstd_frame, write_jsonl_zstd
from kernel.store.sqlite import SqliteStore
from kernel.values.events import APPEND, Event, Replace

MODEL = {"kind": "model", "provider": "deepseek", "model": "deepseek-chat"}
SYSTEM = "You are a test assistant."
REQUEST_HEADER = {
    "header": {
        "config": {"provider": "deepseek", "model": "deepseek-chat"},
        "system": SYSTEM,
        "tools": [
            {"name": "ls", "description": "List files", "parameters": {"type": "object"}},
            {"name": "read", "description": "Read a file", "parameters": {"type": "object"}},
        ],
    },
    "reason": "initial",
}
TORN_RECORD = b'{"type":"assistant/chunk","seq":'


def header(session_id: str) -> dict[str, Any]:
    return {"version": 0, "id": session_id, "createdAt": 1_760_000_000_000, "cwd": "/projects/x"}


def run(
    *args: str | Path, timeout: float = 120, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """One run of the real command; a traceback on stderr always fails the test."""
    proc = subprocess.run(
        [sys.executable, "-m", "kernel.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def run_json(*args: str | Path, timeout: float = 120, cwd: Path | None = None) -> tuple[int, Any]:
    proc = run(*args, "--json", timeout=timeout, cwd=cwd)
    return proc.returncode, json.loads(proc.stdout)


class Builder:
    """Appends through `SessionLog.append` (full admission) with a ticking clock."""

    def __init__(self) -> None:
        self.log = SessionLog.empty()
        self.clock = 1_760_000_000_000

    def add(self, type_: str, data: Any, **kwargs: Any) -> int:
        self.clock += 1
        self.log = self.log.append(type_, data, time=self.clock, **kwargs)
        return self.log.next_seq - 1

    @property
    def events(self) -> list[Event]:
        return list(self.log.events)

    def user(self, mid: str, text: str, **kwargs: Any) -> int:
        source = {"kind": "user"}
        data = {"id": mid, "role": "user", "content": [{"type": "text", "text": text}]}
        if "surface_op" not in kwargs:
            kwargs["surface_op"] = APPEND
        return self.add("user/message", {**data, "source": source}, **kwargs)

    def assistant(self, turn: int, step: int, mid: str, text: str, calls: Sequence[str]) -> int:
        content: list[Any] = [{"type": "text", "text": text}]
        content += [{"type": "tool-call", "id": c, "name": "ls", "arguments": "{}"} for c in calls]
        message = {"id": mid, "role": "assistant", "content": content, "source": MODEL}
        data = {"turn": turn, "step": step, "message": message}
        return self.add("assistant/message", data, surface_op=APPEND)

    def call(self, turn: int, step: int, call_id: str) -> int:
        data = {"turn": turn, "step": step, "callId": call_id, "name": "ls", "arguments": "{}"}
        return self.add("tool/call", data)

    def result(self, turn: int, step: int, call_id: str, call_seq: int, text: str = "ok") -> int:
        block = {
            "type": "tool-result",
            "toolCallId": call_id,
            "content": [{"type": "text", "text": text}],
            "isError": False,
        }
        message = {
            "id": f"r-{call_id}",
            "role": "user",
            "content": [block],
            "source": {"kind": "tool", "callId": call_id},
        }
        data = {"turn": turn, "step": step, "message": message}
        return self.add("tool/result", data, surface_op=APPEND, source_event_seqs=[call_seq])

    def step(self, turn: int, step: int, calls: Sequence[str], *, chunks: int = 0) -> None:
        self.add("step/start", {"turn": turn, "step": step})
        if turn == 1 and step == 1:
            self.add("request/header", REQUEST_HEADER)
        for k in range(chunks):
            chunk = {"type": "text-delta", "index": 0, "text": f"w{k} "}
            self.add("assistant/chunk", {"turn": turn, "step": step, "chunk": chunk})
        self.assistant(turn, step, f"a{turn}-{step}", f"answer {turn}.{step}", calls)
        for c in calls:
            self.result(turn, step, c, self.call(turn, step, c))
        self.add("step/end", {"turn": turn, "step": step})

    def turn(self, turn: int, steps: Sequence[Sequence[str]], *, chunks: int = 0) -> None:
        self.add("turn/start", {"turn": turn})
        self.user(f"u{turn}", f"question {turn}")
        for number, calls in enumerate(steps, start=1):
            self.step(turn, number, calls, chunks=chunks)
        self.add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def clean_log() -> Builder:
    """Two turns, three steps, one tool call, some streamed chunks."""
    b = Builder()
    b.turn(1, [["c1"], []], chunks=3)
    b.turn(2, [[]], chunks=2)
    return b


def compaction_log() -> tuple[Builder, int, list[int]]:
    """Turn 1 with a call; turn 2 opens with a summary replacing all of turn 1's surface."""
    b = Builder()
    b.turn(1, [["c1"], []])
    shadowed = list(b.log.surface.nodes)
    b.add("turn/start", {"turn": 2})
    summary = {
        "id": "sum-1",
        "role": "user",
        "content": [{"type": "text", "text": "Summary: the user listed files."}],
        "source": {"kind": "plugin", "plugin": "compact"},
    }
    replace_seq = b.add(
        "user/message",
        summary,
        surface_op=Replace(shadowed[0], shadowed[-1]),
        source_event_seqs=shadowed,
    )
    b.user("u2", "and now?")
    b.step(2, 1, [])
    b.add("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    return b, replace_seq, shadowed


def crash_log() -> Builder:
    """A closed turn, then turn 2 cut off after an assistant message with two calls,
    of which only the first was recorded as started (`tool/call`)."""
    b = Builder()
    b.turn(1, [[]])
    b.add("turn/start", {"turn": 2})
    b.user("u2", "do two things")
    b.add("step/start", {"turn": 2, "step": 1})
    b.assistant(2, 1, "a2-1", "on it", ["k1", "k2"])
    b.call(2, 1, "k1")
    return b


# -- inspect -------------------------------------------------------------------------------------


def test_version_names_the_command() -> None:
    proc = run("--version")
    assert proc.returncode == 0
    assert proc.stdout.startswith("session-kernel ")


def test_inspect_clean_log_json_counts_turns_messages_and_header(tmp_path: Path) -> None:
    b = clean_log()
    path = tmp_path / "clean.jsonl"
    data = write_jsonl(header("clean"), b.events)
    path.write_bytes(data)

    code, doc = run_json("inspect", path)

    assert code == 0
    assert doc["source"] == {"path": str(path), "format": "jsonl", "session": "clean"}
    assert doc["header"]["id"] == "clean" and doc["header"]["cwd"] == "/projects/x"
    assert doc["events"]["total"] == len(b.events)
    expected_counts: dict[str, int] = {}
    for event in b.events:
        expected_counts[event.type] = expected_counts.get(event.type, 0) + 1
    assert doc["events"]["byType"] == expected_counts
    assert doc["events"]["byType"]["assistant/chunk"] == 3 * 2 + 2
    assert [(t["turn"], t["steps"], t["reason"], t["open"]) for t in doc["turns"]] == [
        (1, 2, "completed", False),
        (2, 1, "completed", False),
    ]
    assert doc["lastTurnOpen"] is False
    assert doc["surface"]["nodes"] == list(b.log.surface.nodes)
    assert doc["surface"]["replacements"] == []
    roles = [(m["role"], m["id"]) for m in doc["messages"]]
    assert roles == [
        ("user", "u1"),
        ("assistant", "a1-1"),
        ("user", "r-c1"),
        ("assistant", "a1-2"),
        ("user", "u2"),
        ("assistant", "a2-1"),
    ]
    call = doc["messages"][1]["content"][1]
    assert call == {"type": "tool-call", "id": "c1", "name": "ls"}
    result = doc["messages"][2]["content"][0]
    assert result == {"type": "tool-result", "toolCallId": "c1", "isError": False}
    assert doc["requestHeader"] == {
        "provider": "deepseek",
        "model": "deepseek-chat",
        "tools": 2,
        "systemPromptLength": len(SYSTEM),
    }
    assert doc["repair"] == {"closers": [], "needed": False}
    assert doc["tail"]["torn"] is False
    assert doc["tail"]["committedBytes"] == doc["tail"]["totalBytes"] == len(data)


def test_inspect_all_tables_show_every_section(tmp_path: Path) -> None:
    path = tmp_path / "clean.jsonl"
    path.write_bytes(write_jsonl(header("clean"), clean_log().events))

    proc = run("inspect", "--all", path)

    assert proc.returncode == 0, proc.stderr
    for heading in ("Header", "Events (", "Turns", "Surface", "Messages (6)"):
        assert heading in proc.stdout
    for heading in ("Request header in force", "Repair", "Tail"):
        assert heading in proc.stdout
    assert "deepseek / deepseek-chat" in proc.stdout
    assert "call ls (c1)" in proc.stdout
    assert "open" not in proc.stdout.split("Turns", 1)[1].split("Surface", 1)[0]


@pytest.mark.slow
def test_inspect_compaction_log_lists_the_replacement_and_summary_first(tmp_path: Path) -> None:
    b, replace_seq, shadowed = compaction_log()
    path = tmp_path / "compaction.jsonl"
    path.write_bytes(write_jsonl(header("compact"), b.events))

    code, doc = run_json("inspect", path)

    assert code == 0
    assert doc["surface"]["replacements"] == [
        {"seq": replace_seq, "start": shadowed[0], "end": shadowed[-1], "shadowed": shadowed}
    ]
    assert doc["surface"]["nodes"][0] == replace_seq
    assert not set(shadowed) & set(doc["surface"]["nodes"])
    assert [m["id"] for m in doc["messages"]] == ["sum-1", "u2", "a2-1"]
    assert doc["messages"][0]["content"][0]["preview"] == "Summary: the user listed files."

    text = run("inspect", "--all", path).stdout
    assert "Replacements" in text and "sum-1" in text


@pytest.mark.slow
def test_inspect_crash_log_reports_torn_tail_open_turn_and_closers(tmp_path: Path) -> None:
    b = crash_log()
    committed = write_jsonl(header("crash"), b.events)
    path = tmp_path / "crash.jsonl"
    path.write_bytes(committed + TORN_RECORD)
    last = len(b.events)

    code, doc = run_json("inspect", path)

    assert code == 0
    assert doc["lastTurnOpen"] is True
    assert doc["turns"][-1] == {
        "turn": 2,
        "startSeq": doc["turns"][-1]["startSeq"],
        "endSeq": None,
        "steps": 1,
        "reason": None,
        "open": True,
    }
    assert doc["repair"]["closers"] == [
        {"type": "tool/result", "seq": last, "callId": "k1", "errorCode": TOOL_OUTCOME_UNKNOWN},
        {"type": "tool/result", "seq": last + 1, "callId": "k2", "errorCode": TOOL_NOT_STARTED},
        {"type": "step/end", "seq": last + 2},
        {"type": "turn/end", "seq": last + 3},
    ]
    assert doc["repair"]["needed"] is True
    assert doc["repair"]["truncateTo"] == len(committed)
    assert doc["repair"]["truncateBytes"] == len(TORN_RECORD)
    tail = doc["tail"]
    assert tail["torn"] is True
    assert tail["committedBytes"] == len(committed)
    assert tail["totalBytes"] == len(committed) + len(TORN_RECORD)
    assert tail["droppedRecords"] == 1
    assert "newline" in tail["reason"]
    # the stored prefix, not the repaired log, is what is counted and derived
    assert doc["events"]["total"] == last
    assert doc["messages"][-1]["content"][1:] == [
        {"type": "tool-call", "id": "k1", "name": "ls"},
        {"type": "tool-call", "id": "k2", "name": "ls"},
    ]

    text = run("inspect", path).stdout
    for fragment in ("the last turn is open", TOOL_OUTCOME_UNKNOWN, TOOL_NOT_STARTED, "why"):
        assert fragment in text


@pytest.mark.slow
def test_inspect_zstd_log_derives_what_the_plain_log_does(tmp_path: Path) -> None:
    b, _, _ = compaction_log()
    plain, framed = tmp_path / "a.jsonl", tmp_path / "a.jsonl.zstd"
    plain.write_bytes(write_jsonl(header("z"), b.events))
    framed.write_bytes(write_jsonl_zstd(header("z"), b.events))

    _, from_plain = run_json("inspect", plain)
    code, from_framed = run_json("inspect", framed)

    assert code == 0
    assert from_framed["source"]["format"] == "jsonl.zstd"
    for key in ("header", "events", "turns", "surface", "messages", "requestHeader", "repair"):
        assert from_framed[key] == from_plain[key], key


def test_inspect_markup_in_log_text_is_printed_verbatim(tmp_path: Path) -> None:
    b = Builder()
    b.add("turn/start", {"turn": 1})
    b.user("u1", "[bold]not markup[/bold]")
    b.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    path = tmp_path / "markup.jsonl"
    path.write_bytes(write_jsonl(header("m"), b.events))

    assert "[bold]not markup[/bold]" in run("inspect", "--messages", "1", path).stdout


# -- errors on bad input -------------------------------------------------------------------------


def corrupt_copy(tmp_path: Path, name: str) -> Path:
    """A clean log whose second record is damaged: a real turn/end follows, so it is corrupt."""
    lines = write_jsonl(header(name), clean_log().events).split(b"\n")
    lines[2] = b"{not json"
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(b"\n".join(lines))
    return path


def test_corrupt_log_is_one_line_naming_the_error_class(tmp_path: Path) -> None:
    path = corrupt_copy(tmp_path, "bad")

    proc = run("inspect", path)

    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "CorruptLog" in lines[0] and str(path) in lines[0]


@pytest.mark.slow
def test_foreign_version_exits_3_and_missing_file_exits_2(tmp_path: Path) -> None:
    future = tmp_path / "future.jsonl"
    future.write_bytes(b'{"type":"session","version":2,"id":"f","createdAt":0}\n')

    proc = run("inspect", future)
    assert proc.returncode == 3
    assert "UnsupportedFormat" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1

    missing = run("inspect", tmp_path / "nope.jsonl")
    assert missing.returncode == 2 and "nope.jsonl" in missing.stderr

    assert run("verify", tmp_path / "nothing-here").returncode == 2


# -- verify --------------------------------------------------------------------------------------


def generated_corpus(root: Path, count: int) -> dict[str, int]:
    """`count` generated logs in nested directories; returns the statuses they must get.

    Every third log is cut at a random event (an open turn unless the cut lands
    just after a turn/end), every fifth ends in a torn record.
    """
    expected = {"ok": 0, "repairable": 0, "torn": 0}
    for i in range(count):
        rng = random.Random(i)
        b = Builder()
        for turn in range(1, rng.randint(1, 3) + 1):
            steps = [
                [f"c{turn}-{s}-{k}" for k in range(rng.randint(0, 2))]
                for s in range(rng.randint(1, 3))
            ]
            b.turn(turn, steps, chunks=rng.randint(0, 3))
        events = b.events
        if i % 3 == 1:
            events = events[: rng.randint(1, len(events) - 1)]
        torn = i % 5 == 2
        data = write_jsonl(header(f"s{i}"), events) + (TORN_RECORD if torn else b"")
        folder = root / f"group-{i % 7}" / ("deep" if i % 2 else "")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"s{i}.jsonl").write_bytes(data)
        if torn:
            expected["torn"] += 1
        elif events[-1].type != "turn/end":
            expected["repairable"] += 1
        else:
            expected["ok"] += 1
    return expected


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    root = tmp_path_factory.mktemp("corpus")
    (root / "notes.txt").write_text("not a log, skipped\n")
    return root, generated_corpus(root, 300)


@pytest.mark.slow
def test_verify_generated_corpus_in_parallel_summarizes_and_exits_0(
    corpus: tuple[Path, dict[str, int]],
) -> None:
    root, expected = corpus

    code, report = run_json("verify", "--jobs", "2", root)

    assert code == 0
    assert report["exitStatus"] == 0
    assert report["summary"] == {
        "logs": 300,
        **expected,
        "invalid": 0,
        "unreadable": 0,
        "unsupported": 0,
        "error": 0,
    }
    assert expected["repairable"] > 20 and expected["torn"] > 20 and expected["ok"] > 100
    by_status: dict[str, list[Any]] = {}
    for log in report["logs"]:
        by_status.setdefault(log["status"], []).append(log)
    for log in by_status["repairable"]:
        assert log["closers"][-1]["type"] == "turn/end" and not log["tail"]["torn"]
    for log in by_status["torn"]:
        assert log["tail"]["totalBytes"] - log["tail"]["committedBytes"] == len(TORN_RECORD)
    assert all(log["problems"] == [] for log in report["logs"])


@pytest.mark.slow
def test_verify_table_output_matches_the_json_summary(
    corpus: tuple[Path, dict[str, int]],
) -> None:
    root, expected = corpus

    proc = run("verify", root)

    assert proc.returncode == 0, proc.stderr
    assert "Verified 300 log(s)" in proc.stdout
    rows = {
        cells[0]: int(cells[1])
        for line in proc.stdout.splitlines()
        if len(cells := [c.strip() for c in line.strip("│┃").split("│")]) >= 3
        and cells[0] in expected
        and cells[1].isdigit()
    }
    assert rows == expected
    assert "interrupted final turn" in proc.stdout


@pytest.mark.slow
def test_verify_exits_1_on_corruption_and_names_the_log(
    corpus: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    root, _ = corpus
    bad = corrupt_copy(tmp_path, "bad")

    code, report = run_json("verify", root, bad)

    assert code == 1 and report["exitStatus"] == 1
    assert report["summary"]["invalid"] == 1 and report["summary"]["logs"] == 301
    (invalid,) = [log for log in report["logs"] if log["status"] == "invalid"]
    assert invalid["path"] == str(bad)
    assert invalid["problems"][0]["check"] == "admission"
    assert invalid["problems"][0]["message"].startswith("CorruptLog:")

    proc = run("verify", bad)
    assert proc.returncode == 1 and "CorruptLog" in proc.stdout


def test_verify_reports_relational_invariant_violations(tmp_path: Path) -> None:
    b = Builder()
    b.turn(1, [[]])
    b.add("turn/start", {"turn": 3})  # admissible, but turns must be numbered 1, 2, 3, ...
    b.add("turn/end", {"turn": 3, "reason": {"kind": "completed"}})
    path = tmp_path / "skip.jsonl"
    path.write_bytes(write_jsonl(header("skip"), b.events))

    code, report = run_json("verify", path)

    assert code == 1
    (log,) = report["logs"]
    assert log["status"] == "invalid"
    assert [(p["check"], p["seq"]) for p in log["problems"]] == [("invariants", len(b.events) - 2)]


def test_verify_reports_a_call_left_unanswered_before_the_next_assistant_message(
    tmp_path: Path,
) -> None:
    b = Builder()
    b.add("turn/start", {"turn": 1})
    b.user("u1", "go")
    b.add("step/start", {"turn": 1, "step": 1})
    b.assistant(1, 1, "a1", "calling", ["lost"])
    b.add("step/end", {"turn": 1, "step": 1})  # a step may end with a call unanswered (§6)
    error = {"message": "tool crashed", "code": "E"}
    b.add("turn/end", {"turn": 1, "reason": {"kind": "error", "error": error}})
    alone = tmp_path / "alone.jsonl"
    alone.write_bytes(write_jsonl(header("alone"), b.events))
    b.turn(2, [[]])
    followed = tmp_path / "followed.jsonl"
    followed.write_bytes(write_jsonl(header("followed"), b.events))

    code, report = run_json("verify", alone, followed)

    assert code == 1
    status = {log["session"]: log for log in report["logs"]}
    assert status["alone"]["status"] == "ok"
    assert status["followed"]["status"] == "invalid"
    (problem,) = status["followed"]["problems"]
    assert problem["check"] == "pairing" and "lost" in problem["message"]


# -- repair --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_repair_dry_run_writes_nothing_then_repair_twice_does_nothing_the_second_time(
    tmp_path: Path,
) -> None:
    b = crash_log()
    committed = write_jsonl(header("crash"), b.events)
    path = tmp_path / "crash.jsonl"
    path.write_bytes(committed + TORN_RECORD)
    before = path.read_bytes()
    last = len(b.events)

    code, plan = run_json("repair", "--dry-run", path)
    assert code == 0
    assert path.read_bytes() == before
    assert plan["dryRun"] is True and plan["committed"] is False and plan["needed"] is True
    assert plan["truncateTo"] == len(committed) and plan["removedBytes"] == len(TORN_RECORD)
    assert [c["seq"] for c in plan["closers"]] == [last, last + 1, last + 2, last + 3]
    text = run("repair", "--dry-run", path).stdout
    assert "would truncate" in text and "nothing written" in text
    assert path.read_bytes() == before

    first = run("repair", path)
    assert first.returncode == 0, first.stderr
    assert f"truncated {len(TORN_RECORD)} byte(s)" in first.stdout
    assert "appended 4" in first.stdout
    repaired = path.read_bytes()
    assert repaired.startswith(committed) and len(repaired.splitlines()) == last + 1 + 4

    code, again = run_json("repair", path)
    assert code == 0
    assert again["needed"] is False and again["committed"] is False and again["closers"] == []
    assert "nothing to repair" in run("repair", path).stdout
    assert path.read_bytes() == repaired


@pytest.mark.slow
def test_repair_zstd_log_rewrites_a_torn_frame_once(tmp_path: Path) -> None:
    b = crash_log()
    data = write_jsonl_zstd(header("zc"), b.events)
    path = tmp_path / "crash.jsonl.zstd"
    frame = encode_zstd_frame(TORN_RECORD + b"\n")
    path.write_bytes(data + frame[: len(frame) - 3])  # a frame cut short: the torn tail
    last = len(b.events)

    code, done = run_json("repair", path)

    assert code == 0
    assert done["committed"] is True and done["torn"] is True
    assert done["truncateTo"] == len(data)
    assert [c["seq"] for c in done["closers"]] == [last, last + 1, last + 2, last + 3]
    repaired = path.read_bytes()
    code, again = run_json("repair", path)
    assert code == 0 and again["needed"] is False
    assert path.read_bytes() == repaired


def test_repair_refuses_a_corrupt_log_without_writing(tmp_path: Path) -> None:
    path = corrupt_copy(tmp_path, "bad")
    before = path.read_bytes()

    proc = run("repair", path)

    assert proc.returncode == 1 and "CorruptLog" in proc.stderr
    assert path.read_bytes() == before


# -- SQLite --------------------------------------------------------------------------------------


def sqlite_db(path: Path) -> int:
    """A database with a clean session `alpha` and a crashed session `beta` whose last
    stored row is undecodable (a torn tail); returns beta's stored prefix length."""
    with SqliteStore(path) as store:
        store.create(header("alpha"))
        store.append("alpha", clean_log().events)
        store.create(header("beta"))
        events = crash_log().events
        store.append("beta", events)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(
            "INSERT INTO events (session_id, seq, type, time, data) "
            "VALUES ('beta', ?, 'assistant/chunk', 1, '{not json')",
            (len(events),),
        )
    conn.close()
    return len(events)


@pytest.mark.slow
def test_sqlite_inspect_verify_and_repair_every_session(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    prefix = sqlite_db(db)

    code, docs = run_json("inspect", db)
    assert code == 0
    assert [d["source"]["session"] for d in docs] == ["alpha", "beta"]
    alpha, beta = docs
    assert alpha["tail"]["torn"] is False and alpha["repair"]["closers"] == []
    assert beta["tail"]["torn"] is True and beta["tail"]["tornFromSeq"] == prefix
    assert beta["tail"]["droppedRecords"] == 1
    assert beta["repair"]["deleteFromSeq"] == prefix
    assert [c["seq"] for c in beta["repair"]["closers"]] == [prefix + i for i in range(4)]
    code, only = run_json("inspect", db, "--session", "alpha")
    assert code == 0 and [d["source"]["session"] for d in only] == ["alpha"]
    assert run("inspect", db, "--session", "nope").returncode == 1

    code, report = run_json("verify", tmp_path)
    assert code == 0
    assert {(log["session"], log["status"]) for log in report["logs"]} == {
        ("alpha", "ok"),
        ("beta", "torn"),
    }

    code, plan = run_json("repair", "--dry-run", db)
    assert code == 0 and [p["needed"] for p in plan] == [False, True]

    code, done = run_json(
        "repair", db
    )  # finds the torn rows still there: the dry run wrote nothing
    assert code == 0
    assert [(d["needed"], d["committed"]) for d in done] == [(False, False), (True, True)]
    assert done[1]["tornFromSeq"] == prefix and len(done[1]["closers"]) == 4
    code, again = run_json("repair", db)
    assert code == 0 and [d["needed"] for d in again] == [False, False]
    code, report = run_json("verify", db)
    assert code == 0 and [log["status"] for log in report["logs"]] == ["ok", "ok"]


@pytest.mark.parametrize("unwritable", ["database", "directory"])
def test_repair_of_a_database_it_may_not_write_is_a_usage_error_as_for_jsonl(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    unwritable: str,
) -> None:
    # Once exit status 1 ("a log is invalid") with the store's "cannot be opened".
    from kernel.cli import sqlite as cli_sqlite

    db = tmp_path / "sessions.db"
    sqlite_db(db)
    before = db.read_bytes()
    denied = str(db) if unwritable == "database" else str(tmp_path)
    real = os.access
    monkeypatch.setattr(
        cli_sqlite.os,
        "access",
        lambda where, mode, **kw: where != denied and real(where, mode, **kw),
    )
    code, out, err = run_main(capsys, "repair", db)
    assert (code, out) == (2, "")
    assert err == (
        f"session-kernel: {db}: cannot write the database, or its journal beside it, to repair it\n"
    )
    assert db.read_bytes() == before
    assert run_main(capsys, "repair", "--dry-run", db)[0] == 0  # a plan writes nothing


def test_verify_refuses_a_foreign_sqlite_database_without_writing_to_it(tmp_path: Path) -> None:
    foreign = tmp_path / "cache.db"
    conn = sqlite3.connect(foreign)
    conn.execute("VACUUM")  # a valid, empty database: the store would create its schema here
    conn.close()
    before = foreign.read_bytes()
    assert before.startswith(b"SQLite format 3\x00")

    code, report = run_json("verify", tmp_path)

    assert code == 3
    (log,) = report["logs"]
    assert log["status"] == "unsupported" and "ForeignStore" in log["problems"][0]["message"]
    assert foreign.read_bytes() == before


def test_verify_calls_a_truncated_or_page_damaged_database_invalid(tmp_path: Path) -> None:
    # A truncated database used to be "unsupported", a page-damaged one "invalid".
    good = tmp_path / "good.db"
    sqlite_db(good)
    data = good.read_bytes()
    page = int.from_bytes(data[16:18], "big")
    (tmp_path / "truncated.db").write_bytes(data[: page + page // 2])
    damaged = bytearray(data)
    damaged[page : page + 64] = b"\xff" * 64
    (tmp_path / "damaged.db").write_bytes(bytes(damaged))
    good.unlink()

    code, report = run_json("verify", tmp_path)

    assert code == 1
    assert {log["status"] for log in report["logs"]} == {"invalid"}
    assert sorted(Path(log["path"]).name for log in report["logs"]) == [
        "damaged.db",
        "truncated.db",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["damaged.db", "truncated.db"]


def test_a_damaged_sqlite_header_hides_no_other_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "sessions.db"
    prefix = sqlite_db(db)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE sessions SET cwd = 'relative/dir' WHERE id = 'alpha'")
    conn.close()

    code, out, _ = run_main(capsys, "verify", "--json", db)
    assert code == 1
    logs = {log["session"]: log for log in json.loads(out)["logs"]}
    assert (logs["alpha"]["status"], logs["beta"]["status"]) == ("invalid", "torn")
    assert "H7" in logs["alpha"]["problems"][0]["message"]

    before = db.read_bytes()
    code, _, err = run_main(capsys, "repair", db)  # every session: every header read first
    assert code == 1 and "CorruptLog" in err and "'alpha'" in err
    assert db.read_bytes() == before
    code, out, _ = run_main(capsys, "repair", "--json", db, "--session", "beta")
    assert code == 0
    (done,) = json.loads(out)
    assert done["committed"] is True and done["tornFromSeq"] == prefix


@pytest.mark.parametrize(
    ("damage", "error", "status"),
    [
        ("UPDATE sessions SET cwd = 'relative/dir' WHERE id = 'alpha'", "CorruptLog", 1),
        ("UPDATE sessions SET version = 3 WHERE id = 'alpha'", "UnsupportedFormat", 3),
        ("UPDATE events SET data = '{x' WHERE session_id = 'alpha' AND seq = 1", "CorruptLog", 1),
    ],
    ids=["bad-header", "foreign-version", "damaged-rows"],
)
def test_inspect_of_a_database_reports_an_unreadable_session_and_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str, error: str, status: int
) -> None:
    db = tmp_path / "sessions.db"
    prefix = sqlite_db(db)
    with sqlite3.connect(db) as conn:
        conn.execute(damage)
    conn.close()

    code, out, err = run_main(capsys, "inspect", "--json", db)
    assert code == status
    alpha, beta = json.loads(out)
    assert alpha["source"] == {"path": str(db), "format": "sqlite", "session": "alpha"}
    assert alpha["error"]["errorClass"] == error and alpha["error"]["message"]
    assert beta["source"]["session"] == "beta" and beta["tail"]["tornFromSeq"] == prefix
    assert f"sessions.db: session alpha: {error}: " in err

    code, out, err = run_main(capsys, "inspect", db)
    assert code == status
    assert f"cannot be read: {error}" in out and "session beta" in out and "Closers" in out
    assert f"session alpha: {error}" in err
    code, out, err = run_main(capsys, "inspect", db, "--session", "alpha")
    assert (code, out) == (status, "") and error in err  # one session asked for: it alone


def _shrink_default_cap(monkeypatch: pytest.MonkeyPatch, limit: int) -> None:
    """Make the default `max_decoded_bytes` `limit`: a small log stands in for one past 256 MiB."""
    from kernel.storage import zstd as frames

    monkeypatch.setattr(frames, "MAX_DECODED_FLOOR", limit)
    monkeypatch.setattr(frames, "MAX_DECODED_CEILING", limit)


@pytest.mark.parametrize(
    "command",
    [
        ("inspect",),
        ("verify",),
        ("export", "--format", "acp"),
        ("repair", "--dry-run"),
        ("repair",),
    ],
    ids=["inspect", "verify", "export", "repair-dry-run", "repair"],
)
def test_max_decoded_bytes_reads_a_zstd_log_past_the_default_cap(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: tuple[str, ...],
) -> None:
    log = tmp_path / "crash.jsonl.zstd"
    log.write_bytes(write_jsonl_zstd(header("z"), crash_log().events))
    before = log.read_bytes()
    code, out, err = run_main(capsys, *command, log, "--max-decoded-bytes", "16")
    assert (code, log.read_bytes()) == (1, before)
    assert "LimitExceeded" in err + out and "max_decoded_bytes" in err + out
    if command[0] != "verify":  # a one-line error names the option (verify reports the log)
        assert err.rstrip().endswith("(the command's --max-decoded-bytes N)")

    _shrink_default_cap(monkeypatch, 64)
    code, out, err = run_main(capsys, *command, log)
    assert (code, log.read_bytes()) == (1, before)
    assert "LimitExceeded" in err + out
    code, out, err = run_main(capsys, *command, log, "--max-decoded-bytes", "1000000")
    assert code == 0, err + out
    assert "LimitExceeded" not in err + out


def test_max_decoded_bytes_undoes_a_zstd_repair_past_the_default_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    events = crash_log().events
    torn = encode_zstd_frame(TORN_RECORD + b"\n")[:-4]  # its checksum missing: a torn frame
    log = tmp_path / "crash.jsonl.zstd"
    log.write_bytes(write_jsonl_zstd(header("z"), events) + torn)
    original = log.read_bytes()
    _shrink_default_cap(monkeypatch, 64)
    code, out, err = run_main(capsys, "repair", "--json", log, "--max-decoded-bytes", "1000000")
    assert code == 0, err
    quarantine = json.loads(out)["quarantine"]
    assert quarantine is not None and log.read_bytes() != original
    code, _, err = run_main(capsys, "repair", "--undo", quarantine)
    assert code == 1 and "LimitExceeded" in err
    code, _, err = run_main(
        capsys, "repair", "--undo", quarantine, "--max-decoded-bytes", "1000000"
    )
    assert code == 0, err
    assert log.read_bytes() == original


@pytest.mark.parametrize("value", ["0", "-5", "1.5", "lots"])
def test_max_decoded_bytes_must_be_a_positive_whole_number(
    capsys: pytest.CaptureFixture[str], value: str
) -> None:
    from kernel.cli import main

    for command in (
        ["inspect", "a.jsonl.zstd"],
        ["verify", "logs"],
        ["repair", "a.jsonl.zstd"],
        ["export", "a.jsonl.zstd", "--format", "acp"],
        ["acp-serve", "store"],
    ):
        with pytest.raises(SystemExit) as stopped:
            main([*command, f"--max-decoded-bytes={value}"])
        assert stopped.value.code == 2
        assert "argument --max-decoded-bytes: " in capsys.readouterr().err


def test_acp_serve_passes_max_decoded_bytes_to_the_server(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("acp")
    from kernel.cli import acp_serving, main

    seen: list[tuple[str, dict[str, Any]]] = []

    def recorded(store: str, **options: Any) -> int:
        seen.append((store, options))
        return 0

    monkeypatch.setattr(acp_serving, "run_acp_serve", recorded)
    assert main(["acp-serve", str(tmp_path), "--max-decoded-bytes", "123"]) == 0
    ((store, options),) = seen
    assert (store, options["max_decoded_bytes"]) == (str(tmp_path), 123)


def test_verify_reports_a_non_kernel_exception_as_an_internal_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In-process: a kernel bug cannot be provoked through bad input, so one is simulated.
    from kernel.cli import exits, verifying

    path = tmp_path / "clean.jsonl"
    path.write_bytes(write_jsonl(header("clean"), clean_log().events))

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise TypeError("simulated kernel bug")

    monkeypatch.setattr(verifying, "open_log", broken)
    (result,) = verifying.verify_file(str(path), "jsonl", 0)

    assert result["status"] == "error"
    assert result["problems"][0]["message"] == "TypeError: simulated kernel bug"
    assert verifying.exit_status(verifying.summarize([result])) == exits.INTERNAL


# -- reliability: never a traceback, every unreadable path counted -------------------------------

CONTROLS = frozenset(chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))) - {"\n", "\t"}
"""What must never reach a terminal raw: C0 controls but newline and tab, DEL, C1 controls."""


def raw_controls(output: str) -> set[str]:
    return {c for c in output if c in CONTROLS}


def run_main(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    """One in-process run of `main` (for tests that patch the I/O under it)."""
    from kernel.cli import main

    code = main([str(arg) for arg in args])
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return code, out, err


def deny_reading(monkeypatch: pytest.MonkeyPatch, *paths: Path) -> None:
    """Opening or listing `paths` raises PermissionError, as `chmod 000` would.

    Simulated, because the tests may run as root, whom `chmod` does not stop:
    `os.open`, `io.open` (under `Path.open`) and `os.scandir` (under `os.walk`)
    are patched to refuse exactly these paths; `stat` still works, as it does
    on a real unreadable file.
    """
    denied = {os.fspath(path) for path in paths}

    def refuse(target: Any) -> None:
        if isinstance(target, (str, os.PathLike)) and os.fspath(target) in denied:
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(target))

    real_open, real_io_open, real_scandir = os.open, io.open, os.scandir

    def os_open(path: Any, *args: Any, **kwargs: Any) -> int:
        refuse(path)
        return real_open(path, *args, **kwargs)

    def io_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        refuse(file)
        return real_io_open(file, *args, **kwargs)

    def scandir(path: Any = ".") -> Any:
        refuse(path)
        return real_scandir(path)

    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(io, "open", io_open)
    monkeypatch.setattr(os, "scandir", scandir)


def write_clean(path: Path, session: str = "clean") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(write_jsonl(header(session), clean_log().events))
    return path


# An unexpected error is one line naming the log, exit 4; verify carries on


def test_unexpected_exception_is_one_line_naming_the_log_exit_4(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # In-process: a kernel bug cannot be provoked through bad input, so one is simulated.
    from kernel.cli import inspecting

    path = write_clean(tmp_path / "clean.jsonl")

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise TypeError("simulated kernel bug")

    monkeypatch.setattr(inspecting, "report", broken)
    code, out, err = run_main(capsys, "inspect", path)

    assert code == 4
    assert out == ""
    (line,) = err.splitlines()
    assert str(path) in line and "internal error: TypeError: simulated kernel bug" in line


def test_verify_carries_on_when_a_worker_process_dies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # In-process: the pool reports the first file, then breaks as it does when a worker is killed.
    from kernel.cli import verifying

    paths = [write_clean(tmp_path / f"s{i}.jsonl", f"s{i}") for i in range(3)]

    class DyingPool:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def __enter__(self) -> DyingPool:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def map(self, fn: Any, *iterables: Any, chunksize: int = 1) -> Iterator[Any]:
            first = next(zip(*iterables, strict=True))
            yield fn(*first)
            raise BrokenProcessPool("a worker process terminated abruptly")

    monkeypatch.setattr(verifying, "ProcessPoolExecutor", DyingPool)
    code, out, _ = run_main(capsys, "verify", "--jobs", "2", "--json", *paths)

    assert code == 4
    report = json.loads(out)
    assert [log["status"] for log in report["logs"]] == ["ok", "error", "error"]
    assert report["logs"][1]["problems"][0]["message"].startswith("BrokenProcessPool:")


@pytest.mark.slow
def test_file_names_that_are_not_utf8_are_reported_escaped(tmp_path: Path) -> None:
    write_clean(tmp_path / "clean.jsonl")
    odd = tmp_path / os.fsdecode(b"bad-\xff.jsonl")
    corrupt_copy(tmp_path, "bad").rename(odd)

    code, report = run_json("verify", tmp_path)

    assert code == 1
    assert [log["status"] for log in report["logs"]] == ["invalid", "ok"]
    assert report["logs"][0]["path"] == str(odd)  # `\udcff`: the byte, recoverable by fsencode
    table_run = run("verify", ".", cwd=tmp_path)  # relative: a short path, not wrapped
    assert table_run.returncode == 1 and "bad-\\xff.jsonl" in table_run.stdout


@pytest.mark.slow
def test_inspect_json_writes_a_lone_surrogate_in_log_text_as_its_escape(tmp_path: Path) -> None:
    b = Builder()
    b.add("turn/start", {"turn": 1})
    b.user("u1", "lone \ud800 half")
    b.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    path = tmp_path / "lone.jsonl"
    path.write_bytes(write_jsonl(header("lone"), b.events))

    code, doc = run_json("inspect", path)

    assert code == 0
    assert doc["messages"][0]["content"][0]["preview"] == "lone \ud800 half"
    proc = run("inspect", "--messages", "all", path)
    assert proc.returncode == 0 and "lone \\ud800 half" in proc.stdout


# Unreadable directories and files are counted and reported; the rest is verified


def test_verify_reports_an_unreadable_subdirectory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_clean(tmp_path / "a.jsonl")
    locked = tmp_path / "locked"
    write_clean(locked / "b.jsonl")
    deny_reading(monkeypatch, locked)
    monkeypatch.setenv("COLUMNS", "300")  # long paths on one line

    code, out, _ = run_main(capsys, "verify", "--json", tmp_path)

    assert code == 2
    report = json.loads(out)
    assert report["exitStatus"] == 2
    assert report["summary"]["logs"] == 2
    assert report["summary"]["ok"] == 1 and report["summary"]["unreadable"] == 1
    unreadable = report["logs"][1]
    assert unreadable["path"] == str(locked) and unreadable["format"] == "directory"
    assert unreadable["status"] == "unreadable"
    assert unreadable["problems"] == [
        {"check": "read", "message": "PermissionError: Permission denied"}
    ]

    code, out, _ = run_main(capsys, "verify", tmp_path)
    assert code == 2
    assert "Verified 1 log(s); 1 path(s) could not be read" in out
    assert f"{locked}{os.sep}" in out


def test_verify_checks_every_named_file_when_one_cannot_be_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = write_clean(tmp_path / "first.jsonl")
    locked = write_clean(tmp_path / "locked.jsonl")
    last = write_clean(tmp_path / "last.jsonl")
    deny_reading(monkeypatch, locked)

    code, out, _ = run_main(capsys, "verify", "--json", first, locked, last)

    assert code == 2
    report = json.loads(out)
    assert {log["path"]: log["status"] for log in report["logs"]} == {
        str(first): "ok",
        str(locked): "unreadable",
        str(last): "ok",
    }


@pytest.mark.slow
def test_verify_counts_dangling_links_and_fifos_named_like_logs(tmp_path: Path) -> None:
    # Real file-system objects that cannot be read, even by root.
    write_clean(tmp_path / "tree" / "good.jsonl")
    (tmp_path / "tree" / "gone.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    os.mkfifo(tmp_path / "tree" / "pipe.jsonl")
    (tmp_path / "tree" / "notes.fifo").symlink_to(tmp_path / "nowhere")  # not a log: passed over
    named_gone = tmp_path / "named-gone.jsonl"
    named_gone.symlink_to(tmp_path / "nowhere.jsonl")
    bad = corrupt_copy(tmp_path, "bad")

    code, report = run_json("verify", named_gone, tmp_path / "tree", bad, timeout=60)

    assert code == 1  # invalid outranks unreadable
    statuses = {Path(log["path"]).name: log["status"] for log in report["logs"]}
    assert statuses == {
        "named-gone.jsonl": "unreadable",
        "gone.jsonl": "unreadable",
        "pipe.jsonl": "unreadable",
        "good.jsonl": "ok",
        "bad.jsonl": "invalid",
    }
    reasons = {Path(log["path"]).name: log["problems"] for log in report["logs"]}
    assert reasons["pipe.jsonl"] == [
        {"check": "read", "message": "NotRegularFile: not a regular file (a FIFO)"}
    ]
    assert reasons["gone.jsonl"][0]["message"].startswith("FileNotFoundError:")
    assert report["summary"]["unreadable"] == 3 and report["summary"]["logs"] == 5

    code, report = run_json("verify", named_gone, tmp_path / "tree", timeout=60)
    assert code == 2  # nothing invalid: the unreadable paths decide


# Control characters from a log are escaped in everything printed


@pytest.mark.slow
def test_inspect_escapes_terminal_control_sequences_from_the_log(tmp_path: Path) -> None:
    title, clear, csi = "\x1b]0;PWNED\x07", "\x1b[2J", "\x9b31m"
    b = Builder()
    b.add("turn/start", {"turn": 1})
    b.user(f"u1{clear}", f"hello {title} world {csi}red\rover")
    b.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    head = {**header(f"s{title}"), "cwd": f"/x{clear}\r"}
    path = tmp_path / "escapes.jsonl"
    path.write_bytes(write_jsonl(head, b.events))

    proc = run("inspect", "--all", path)

    assert proc.returncode == 0
    assert raw_controls(proc.stdout) == set()
    for shown in ("s\\x1b]0;PWNED\\x07", "/x\\x1b[2J\\r", "u1\\x1b[2J", "\\x9b31mred over"):
        assert shown in proc.stdout, shown

    code, doc = run_json("inspect", path)
    assert code == 0
    assert raw_controls(run("inspect", "--json", path).stdout) == set()
    assert doc["header"]["id"] == f"s{title}"  # JSON escapes say exactly what the log holds
    assert doc["messages"][0]["content"][0]["preview"] == f"hello {title} world {csi}red over"


@pytest.mark.slow
def test_error_lines_and_verify_tables_escape_control_characters(tmp_path: Path) -> None:
    future = tmp_path / "future.jsonl"
    future.write_text(
        json.dumps({"type": "session", "version": 2, "id": "f\x1b]0;PWNED\x07", "createdAt": 0})
        + "\n"
    )

    proc = run("inspect", future)
    assert proc.returncode == 3
    assert raw_controls(proc.stderr) == set() and "f\\x1b]0;PWNED\\x07" in proc.stderr

    proc = run("verify", tmp_path)
    assert proc.returncode == 3
    assert raw_controls(proc.stdout) == set() and "f\\x1b]0;PWNED\\x07" in proc.stdout


# Non-regular files are refused, hidden directories passed over, --exclude


@pytest.mark.slow
def test_inspect_and_repair_refuse_a_fifo_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)

    for args in (("inspect", fifo), ("repair", fifo), ("repair", "--dry-run", fifo)):
        proc = run(*args, timeout=30)
        assert proc.returncode == 2, args
        assert proc.stderr == f"session-kernel: {fifo}: not a regular file (a FIFO)\n"

    code, report = run_json("verify", fifo, timeout=30)
    assert code == 2 and report["logs"][0]["status"] == "unreadable"


@pytest.mark.slow
def test_verify_passes_over_hidden_directories_and_files_unless_asked(tmp_path: Path) -> None:
    write_clean(tmp_path / "a.jsonl")
    (tmp_path / ".mypy_cache").mkdir()
    corrupt_copy(tmp_path / ".mypy_cache", "cached")
    (tmp_path / ".#a.jsonl").symlink_to("user@host.1234")  # an editor's lock: a dangling link

    code, report = run_json("verify", ".", cwd=tmp_path)
    assert code == 0
    assert [log["path"] for log in report["logs"]] == ["a.jsonl"]

    code, report = run_json("verify", "--hidden", ".", cwd=tmp_path)
    assert code == 1
    assert {log["path"]: log["status"] for log in report["logs"]} == {
        ".#a.jsonl": "unreadable",
        ".mypy_cache/cached.jsonl": "invalid",
        "a.jsonl": "ok",
    }

    code, report = run_json("verify", ".mypy_cache", cwd=tmp_path)  # named: always taken
    assert code == 1 and report["summary"]["invalid"] == 1


@pytest.mark.slow
def test_verify_exclude_passes_over_matching_names_and_paths(tmp_path: Path) -> None:
    write_clean(tmp_path / "keep" / "a.jsonl")
    corrupt_copy(tmp_path / "keep", "old.bak")
    (tmp_path / "archive").mkdir()
    corrupt_copy(tmp_path / "archive", "x")
    (tmp_path / "nested" / "deep").mkdir(parents=True)
    corrupt_copy(tmp_path / "nested" / "deep", "y")

    code, report = run_json("verify", tmp_path)
    assert code == 1 and report["summary"]["invalid"] == 3

    code, report = run_json(
        "verify",
        "--exclude",
        "archive",
        "--exclude",
        "*.bak.jsonl",
        "--exclude",
        "*/nested/deep",
        tmp_path,
    )
    assert code == 0
    assert [log["path"] for log in report["logs"]] == [str(tmp_path / "keep" / "a.jsonl")]


# verify: a closed last turn with a call no result answers is a finding; --strict fails it


def unanswered_at_end_log() -> tuple[Builder, int]:
    """Turn 1 in full; turn 2's assistant message calls `k1` and `k2`, only `k1` is
    answered, and the turn ends (with an error) all the same. Returns the message's seq."""
    b = Builder()
    b.turn(1, [["c1"], []])
    b.add("turn/start", {"turn": 2})
    b.user("u2", "do two things")
    b.add("step/start", {"turn": 2, "step": 1})
    asked = b.assistant(2, 1, "a2-1", "on it", ["k1", "k2"])
    b.result(2, 1, "k1", b.call(2, 1, "k1"))
    b.add("step/end", {"turn": 2, "step": 1})
    error = {"message": "tool runner lost", "code": "E"}
    b.add("turn/end", {"turn": 2, "reason": {"kind": "error", "error": error}})
    return b, asked


def test_verify_names_a_call_left_unanswered_when_the_last_turn_closed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "300")  # the reason on one line
    b, asked = unanswered_at_end_log()
    path = tmp_path / "open-call.jsonl"
    path.write_bytes(write_jsonl(header("open-call"), b.events))

    code, out, _ = run_main(capsys, "verify", "--json", path)

    assert code == 0
    (log,) = json.loads(out)["logs"]
    assert log["status"] == "ok" and log["problems"] == []
    (finding,) = log["findings"]
    assert (finding["check"], finding["seq"], finding["rule"]) == (
        "pairing",
        asked,
        "unanswered-call",
    )
    assert "k2" in finding["message"] and "k1" not in finding["message"]
    code, out, _ = run_main(capsys, "verify", path)
    assert code == 0 and "--strict fails them" in out
    assert f"finding: pairing: seq {asked}: tool call(s) k2 never answered" in out
    code, _, err = run_main(capsys, "export", path, "--format", "openai")
    assert code == 1 and "ToolPairingError" in err  # the history the finding warns of


def test_verify_strict_fails_a_log_on_its_unanswered_call_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b, asked = unanswered_at_end_log()
    path = tmp_path / "open-call.jsonl"
    path.write_bytes(write_jsonl(header("open-call"), b.events))
    clean = write_clean(tmp_path / "clean.jsonl")

    code, out, _ = run_main(capsys, "verify", "--strict", "--json", path, clean)

    assert code == 1
    document = json.loads(out)
    assert document["summary"]["invalid"] == 1 and document["summary"]["ok"] == 1
    logs = {log["session"]: log for log in document["logs"]}
    assert logs["clean"]["status"] == "ok"
    assert logs["open-call"]["status"] == "invalid" and logs["open-call"]["findings"] == []
    (problem,) = logs["open-call"]["problems"]
    assert (problem["check"], problem["seq"], problem["rule"]) == (
        "pairing",
        asked,
        "unanswered-call",
    )


def test_verify_report_rules_column_holds_the_unanswered_call_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pandas as pd

    from kernel.corpus import PANDAS_DTYPES

    b, asked = unanswered_at_end_log()
    path = tmp_path / "logs" / "open-call.jsonl"
    path.parent.mkdir()
    path.write_bytes(write_jsonl(header("open-call"), b.events))
    for strict, check, status in ((False, None, "ok"), (True, "pairing", "invalid")):
        report = tmp_path / f"strict-{strict}.csv"
        flags = ["--strict"] if strict else []
        run_main(capsys, "verify", *flags, "--report", report, path)
        (row,) = pd.read_csv(report, dtype=PANDAS_DTYPES).to_dict("records")
        assert (row["status"], row["rules"], row["first_seq"]) == (status, "unanswered-call", asked)
        assert (None if pd.isna(row["check"]) else row["check"]) == check


def test_repair_names_the_unanswered_call_it_cannot_repair(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "300")  # each sentence on one line
    b, asked = unanswered_at_end_log()
    path = tmp_path / "open-call.jsonl"
    path.write_bytes(write_jsonl(header("open-call"), b.events))
    before = path.read_bytes()

    code, out, _ = run_main(capsys, "repair", path)
    assert code == 0 and path.read_bytes() == before
    assert "nothing to repair" not in out
    assert "no repair the kernel can make" in out
    assert f"unanswered call at seq {asked}: tool call(s) k2 never answered" in out
    assert "a closed turn cannot be re-closed" in out and "verify --strict" in out
    code, out, _ = run_main(capsys, "repair", "--json", path)
    document = json.loads(out)
    assert code == 0 and document["needed"] is False
    assert [(f["seq"], f["rule"]) for f in document["findings"]] == [(asked, "unanswered-call")]

    clean = write_clean(tmp_path / "clean.jsonl")  # a balanced log: nothing to say
    code, out, _ = run_main(capsys, "repair", clean)
    assert code == 0 and "nothing to repair" in out and "unanswered" not in out
    code, out, _ = run_main(capsys, "repair", "--json", clean)
    assert json.loads(out)["findings"] == []


def test_repair_of_a_torn_tail_names_the_unanswered_call_it_leaves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b, asked = unanswered_at_end_log()
    path = tmp_path / "open-call.jsonl"
    path.write_bytes(write_jsonl(header("open-call"), b.events) + TORN_RECORD)
    for args in (("--dry-run",), ()):
        code, out, _ = run_main(capsys, "repair", "--json", *args, path)
        document = json.loads(out)
        assert code == 0 and document["torn"] is True and document["closers"] == []
        assert [(f["seq"], f["rule"]) for f in document["findings"]] == [(asked, "unanswered-call")]
    assert path.read_bytes() == write_jsonl(header("open-call"), b.events)
    db = tmp_path / "sessions.db"
    with SqliteStore(db) as store:
        store.create(header("open-call"))
        store.append("open-call", b.events)
        store.create(header("clean"))
        store.append("clean", clean_log().events)
    code, out, _ = run_main(capsys, "repair", "--json", db)
    by_session = {d["location"].rsplit("#", 1)[1]: d["findings"] for d in json.loads(out)}
    assert code == 0 and by_session["clean"] == []
    assert [f["seq"] for f in by_session["open-call"]] == [asked]


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_verify_report_keeps_a_file_name_that_is_not_utf8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from kernel.corpus import text_from_report

    logs = tmp_path / "logs"
    write_clean(logs / "clean.jsonl")
    odd = logs / os.fsdecode(b"bad-\xff\\udcff.jsonl")  # the byte 0xff, then text like its escape
    corrupt_copy(logs, "bad").rename(odd)
    report = tmp_path / f"r{suffix}"

    code, out, err = run_main(capsys, "verify", "--json", "--report", report, logs)

    assert code == 1 and err == ""
    read = pq.read_table if suffix == ".parquet" else pacsv.read_csv
    cells = read(report).column("path").to_pylist()
    assert [json.loads(out)["logs"][i]["path"] for i in range(2)] == [
        str(odd),
        str(logs / "clean.jsonl"),
    ]
    assert cells[0] == str(logs / "bad-\\udcff\\\\udcff.jsonl")  # as --json spells the byte
    assert [os.fsencode(text_from_report(cell)) for cell in cells] == [
        os.fsencode(odd),
        os.fsencode(logs / "clean.jsonl"),
    ]


# verify: a log that takes too long is reported `timeout`, named on stderr, and the run ends


def test_verify_timeout_reports_a_stuck_log_names_its_worker_and_finishes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # In-process: a check that never returns for one file stands in for a stuck worker.
    import threading

    import pandas as pd

    from kernel import corpus
    from kernel.corpus import PANDAS_DTYPES

    clean = write_clean(tmp_path / "logs" / "clean.jsonl")
    stuck = write_clean(tmp_path / "logs" / "stuck.jsonl", "stuck")
    release = threading.Event()
    real = corpus.check_task

    def never_returns_for_stuck(task: Any, now: int, **kwargs: Any) -> Any:
        if task.path == str(stuck):
            release.wait(60)
        return real(task, now, **kwargs)

    monkeypatch.setattr(corpus, "check_task", never_returns_for_stuck)
    report = tmp_path / "r.csv"
    try:
        code, out, err = run_main(
            capsys, "verify", "--timeout", "0.2", "--json", "--report", report, tmp_path / "logs"
        )
    finally:
        release.set()

    assert code == 4
    document = json.loads(out)
    assert document["summary"]["timeout"] == 1 and document["summary"]["ok"] == 1
    logs = {log["path"]: log for log in document["logs"]}
    assert logs[str(clean)]["status"] == "ok"
    assert logs[str(stuck)]["status"] == "timeout"
    (problem,) = logs[str(stuck)]["problems"]
    assert problem["check"] == "timeout" and problem["worker"].startswith(f"pid {os.getpid()} ")
    (line,) = err.splitlines()
    assert line.startswith(f"session-kernel: {stuck}: timeout: no verdict within 0.2 s")
    assert problem["worker"] in line
    frame = pd.read_csv(report, dtype=PANDAS_DTYPES)
    assert list(frame["status"]) == ["ok", "timeout"]
    assert list(frame["rules"].fillna("")) == ["", "timeout"]


def test_verify_summary_lists_timeout_only_when_a_log_timed_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_main(capsys, "verify", "--json", write_clean(tmp_path / "a.jsonl"))
    assert code == 0
    assert "timeout" not in json.loads(out)["summary"]


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "soon"])
def test_verify_refuses_a_timeout_that_is_not_a_number_of_seconds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        run_main(capsys, "verify", "--timeout", value, tmp_path)
    assert exited.value.code == 2
    assert "--timeout" in capsys.readouterr().err
