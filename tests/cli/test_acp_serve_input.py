"""`session-kernel acp-serve` under hostile input: every request gets exactly one answer.

Most tests run `serve()` in this process on regular files or pipes (fast, and the open
calls can be watched); the slow ones spawn the real command over pipes and check what
only a process shows: it never exits early, writes nothing to stderr, keeps its memory
flat under an endless line, and ends quietly when the client stops reading.
"""

from __future__ import annotations

import asyncio
import builtins
import collections
import json
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("acp")

from kernel import load_jsonl
from kernel.cli import acp_serving
from kernel.cli.acp_serving import CANNOT_READ, NOT_FOUND, READ_ONLY, serve
from kernel.cli.acp_stdio import (
    INVALID_REQUEST,
    MAX_BATCH,
    MAX_DEPTH,
    MAX_LINE_BYTES,
    OVERLONG,
    PARSE_ERROR,
    LineFramer,
)
from kernel.projections import acp_updates
from kernel.store import JsonlStore, SqliteStore

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
COMPACTION = EXAMPLES / "compaction.jsonl"
CRASH = EXAMPLES / "crash-torn-tail.jsonl"
METHOD_NOT_FOUND = -32601


def _request(request_id: Any, method: str, params: Any = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


def _initialize(request_id: Any) -> bytes:
    return _request(request_id, "initialize", {"protocolVersion": 1})


def _load(request_id: Any, session_id: str) -> bytes:
    return _request(
        request_id, "session/load", {"sessionId": session_id, "cwd": "/", "mcpServers": []}
    )


def _list(request_id: Any) -> bytes:
    return _request(request_id, "session/list", {})


def _store(root: Path, *sources: Path) -> JsonlStore:
    store = JsonlStore(root)
    for path in sources:
        loaded = load_jsonl(path.read_bytes(), now=0)
        store.create(loaded.header)
        store.append(loaded.header.id, loaded.events[: len(loaded.events) - len(loaded.closers)])
    return store


def _serve_raw(tmp_path: Path, store: Path | str, data: bytes, **options: Any) -> bytes:
    """Run `serve()` with stdin and stdout on regular files; the bytes it wrote."""
    requests = tmp_path / "requests.jsonl"
    answers = tmp_path / "answers.jsonl"
    requests.write_bytes(data)
    input_fd = os.open(requests, os.O_RDONLY)
    output_fd = os.open(answers, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        asyncio.run(serve(str(store), input_fd=input_fd, output_fd=output_fd, **options))
    finally:
        os.close(input_fd)
        os.close(output_fd)
    return answers.read_bytes()


def _serve_files(tmp_path: Path, store: Path | str, data: bytes, **options: Any) -> list[Any]:
    """Run `serve()` with stdin and stdout on regular files; the answers, in order."""
    return [json.loads(line) for line in _serve_raw(tmp_path, store, data, **options).splitlines()]


def _answers_by_id(answers: list[Any]) -> dict[Any, list[Any]]:
    by_id: dict[Any, list[Any]] = collections.defaultdict(list)
    for answer in answers:
        for one in answer if isinstance(answer, list) else [answer]:
            if "id" in one:
                by_id[one["id"]].append(one)
    return by_id


def _code(answer: dict[str, Any]) -> int | None:
    return answer["error"]["code"] if "error" in answer else None


@pytest.fixture
def quiet(caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> Iterator[None]:
    """The test fails if the server logs a warning or writes to stderr."""
    caplog.set_level(logging.WARNING)
    yield
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert capsys.readouterr().err == ""


# -- framing ------------------------------------------------------------------------------------


def test_framer_splits_lines_across_chunks_and_keeps_an_unterminated_last_line() -> None:
    framer = LineFramer(10)
    assert framer.feed(b"ab") == []
    assert framer.feed(b"c\nde\n\nf") == [b"abc", b"de", b""]
    assert framer.feed(b"g") == []
    assert framer.end() == [b"fg"]
    assert framer.end() == []


def test_framer_accepts_a_line_of_exactly_its_cap_and_refuses_one_byte_more() -> None:
    framer = LineFramer(4)
    assert framer.feed(b"1234\n12345\nok\n") == [b"1234", OVERLONG, b"ok"]


def test_framer_reports_an_overlong_line_once_and_drops_it_up_to_its_newline() -> None:
    framer = LineFramer(8)
    items = [item for _ in range(1000) for item in framer.feed(b"x" * 7)]
    assert items == [OVERLONG], "one marker, as soon as the cap is passed"
    assert framer.feed(b"xx\nnext\n") == [b"next"]
    assert framer.feed(b"y" * 9) == [OVERLONG]
    assert framer.end() == [], "an overlong last line leaves nothing behind"


# -- single lines -------------------------------------------------------------------------------


def test_a_line_that_is_not_a_request_object_gets_one_invalid_request_answer(
    tmp_path: Path, quiet: None
) -> None:
    probes = [
        (b"[]", None),
        (b"5", None),
        (b'"x"', None),
        (b"true", None),
        (b"null", None),
        (b"{}", None),
        (b'{"id":3}', 3),
        (b'{"jsonrpc":"2.0","id":"r"}', "r"),
        (b'{"jsonrpc":"1.0","id":5,"method":"initialize"}', 5),
        (b'{"id":6,"method":"initialize","params":{"protocolVersion":1}}', 6),
        (b'{"jsonrpc":"2.0","id":7,"method":7}', 7),
        (b'{"jsonrpc":"2.0","id":[8],"method":"initialize"}', None),
        (b'{"jsonrpc":"2.0","id":true,"method":"initialize"}', None),
        (b'{"jsonrpc":"2.0","id":9,"method":"initialize","params":3}', 9),
        (b'{"jsonrpc":"2.0","method":"session/cancel","params":"x"}', None),
    ]
    data = b"\n".join([line for line, _ in probes] + [_initialize("last")]) + b"\n"
    answers = _serve_files(tmp_path, COMPACTION, data)
    assert len(answers) == len(probes) + 1
    refused = [(a["id"], _code(a)) for a in answers if a["id"] != "last"]
    assert sorted(refused, key=repr) == sorted(
        [(answer_id, INVALID_REQUEST) for _, answer_id in probes], key=repr
    )
    assert answers[-1]["id"] == "last" and "result" in answers[-1], "still serving"


def test_a_line_that_is_not_json_gets_a_parse_error_with_a_null_id(
    tmp_path: Path, quiet: None
) -> None:
    probes = [
        b"{bad",
        b'{"jsonrpc":"2.0","id":1,"method":"initialize"',
        b"\xff\xfe{}",
        b"\xef\xbb\xbf{}",
        b'{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":NaN}}',
        b'{"jsonrpc":"2.0","id":1e999,"method":"initialize"}',
        b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"initialize"}',
        b"{} {}",
    ]
    data = b"\n".join([*probes, _initialize("last")]) + b"\n"
    answers = _serve_files(tmp_path, COMPACTION, data)
    assert [(a["id"], _code(a)) for a in answers[:-1]] == [(None, PARSE_ERROR)] * len(probes)
    assert answers[-1]["id"] == "last" and "result" in answers[-1]


def test_blank_lines_and_responses_get_no_answer(tmp_path: Path, quiet: None) -> None:
    data = b"\n  \n\r\n" + b'{"jsonrpc":"2.0","id":4,"result":{}}\n' + _initialize(5) + b"\n"
    assert [a["id"] for a in _serve_files(tmp_path, COMPACTION, data)] == [5]


def _nested(depth: int) -> Any:
    """A message `depth` levels deep: the request object, its params, `_meta`, then lists."""
    value: Any = 1
    for _ in range(depth - 3):
        value = [value]
    params = {"protocolVersion": 1, "_meta": {"deep": value}}
    return {"jsonrpc": "2.0", "id": depth, "method": "initialize", "params": params}


def test_nesting_past_the_depth_limit_is_a_parse_error_and_up_to_it_is_served(
    tmp_path: Path, quiet: None
) -> None:
    far_past = b"[" * 100_000 + b"]" * 100_000
    lines = [json.dumps(_nested(MAX_DEPTH)).encode(), json.dumps(_nested(MAX_DEPTH + 1)).encode()]
    answers = _serve_files(tmp_path, COMPACTION, b"\n".join([*lines, far_past, b""]))
    by_id = _answers_by_id(answers)
    assert "result" in by_id[MAX_DEPTH][0]
    assert [_code(a) for a in by_id[None]] == [PARSE_ERROR, PARSE_ERROR]
    assert len(answers) == 3


def test_a_line_past_the_cap_gets_one_answer_and_the_next_line_is_served(
    tmp_path: Path, quiet: None
) -> None:
    cap = 1024
    exact = _initialize("exact")
    exact = exact[:-1] + b" " * (cap - len(exact)) + b"}"
    overlong = _initialize("overlong")[:-1] + b" " * (64 * cap) + b"}"
    data = b"\n".join([exact, overlong, _initialize("after"), overlong[: cap + 1]])
    answers = _serve_files(tmp_path, COMPACTION, data, max_line_bytes=cap)
    assert len(exact) == cap
    assert sorted(((a["id"], _code(a)) for a in answers), key=repr) == [
        ("after", None),
        ("exact", None),
        (None, INVALID_REQUEST),
        (None, INVALID_REQUEST),
    ]
    assert [a["error"]["data"] for a in answers if a["id"] is None] == [{"maxLineBytes": cap}] * 2


# -- batches ------------------------------------------------------------------------------------


def test_a_batch_is_answered_with_one_array_in_json_rpc_batch_rules(
    tmp_path: Path, quiet: None
) -> None:
    batch = [
        json.loads(_initialize("a")),
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "x"}},
        1,
        {"jsonrpc": "2.0", "id": "r", "result": {}},
        json.loads(_request("b", "no/such/method", {})),
        json.loads(_initialize("a")),
    ]
    only_notifications = [{"jsonrpc": "2.0", "method": "session/cancel", "params": {}}]
    too_long = [json.loads(_initialize(n)) for n in range(MAX_BATCH + 1)]
    lines = [json.dumps(b).encode() for b in (batch, only_notifications, [], too_long)]
    answers = _serve_files(tmp_path, COMPACTION, b"\n".join([*lines, _initialize("last"), b""]))
    arrays = [a for a in answers if isinstance(a, list)]
    assert len(arrays) == 1 and len(answers) == 4
    assert sorted(((a["id"], _code(a)) for a in arrays[0]), key=repr) == sorted(
        [("a", None), ("a", None), (None, INVALID_REQUEST), ("b", METHOD_NOT_FOUND)], key=repr
    )
    singles = [(a["id"], _code(a)) for a in answers if not isinstance(a, list)]
    assert sorted(singles, key=repr) == sorted(
        [(None, INVALID_REQUEST), (None, INVALID_REQUEST), ("last", None)], key=repr
    )


# -- bursts -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_every_request_of_a_burst_is_answered_exactly_once_before_the_server_ends(
    tmp_path: Path, quiet: None
) -> None:
    _store(tmp_path / "store", COMPACTION, CRASH)
    lines, expected = [], {}
    for n in range(600):
        kind = n % 6
        if kind == 0:
            lines.append(_load(n, "compaction-demo"))
        elif kind == 1:
            lines.append(_list(n))
        elif kind == 2:
            lines.append(_load(n, "no-such-session"))
        elif kind == 3:
            lines.append(_request(n, "session/prompt", {"sessionId": "x", "prompt": []}))
        elif kind == 4:
            lines.append(json.dumps([json.loads(_initialize(n)), 7]).encode())
        else:
            lines.append(_initialize(n)[:-1])  # cut short: its id cannot be read
        if kind != 5:
            expected[n] = [None, None, NOT_FOUND, READ_ONLY, None][kind]
    answers = _serve_files(tmp_path, tmp_path / "store", b"\n".join(lines) + b"\n")
    by_id = _answers_by_id(answers)
    assert {n: [_code(a) for a in by_id[n]] for n in expected} == {
        n: [code] for n, code in expected.items()
    }
    assert set(by_id) == {*expected, None}
    assert len(by_id[None]) == 200, "each batch's bad member and each cut line: one answer"
    loaded = load_jsonl(COMPACTION.read_bytes(), now=0)
    replay = acp_updates(loaded.events, session_id="compaction-demo")
    updates = [a for a in answers if not isinstance(a, list) and "method" in a]
    assert len(updates) == 100 * len(replay)


# -- what the agent answers ---------------------------------------------------------------------


def test_read_only_refusals_carry_a_server_error_code(tmp_path: Path, quiet: None) -> None:
    assert -32099 <= READ_ONLY <= -32000
    refused = {
        "session/new": {"cwd": "/", "mcpServers": []},
        "session/prompt": {"sessionId": "compaction-demo", "prompt": []},
        "session/fork": {"sessionId": "compaction-demo", "cwd": "/"},
        "session/resume": {"sessionId": "compaction-demo", "cwd": "/"},
        "session/set_mode": {"sessionId": "compaction-demo", "modeId": "m"},
        "session/set_config_option": {
            "sessionId": "compaction-demo",
            "configId": "c",
            "value": "v",
        },
    }
    data = b"\n".join(_request(m, m, p) for m, p in refused.items()) + b"\n"
    answers = _serve_files(tmp_path, COMPACTION, data)
    assert {a["id"]: (_code(a), a["error"]["data"]["method"]) for a in answers} == {
        m: (READ_ONLY, m) for m in refused
    }


def test_answers_never_name_the_store_path(tmp_path: Path, quiet: None) -> None:
    root = tmp_path / "store"
    crash_dir = _store(root, COMPACTION, CRASH).path_of("crash-demo").parent
    (root / "--elsewhere--").mkdir()
    crash_dir.rename(root / "--elsewhere--" / crash_dir.name)  # its header says otherwise
    data = b"\n".join([_load(1, "crash-demo"), _load(2, "nobody"), _list(3), b""])
    answers = _serve_files(tmp_path, root, data)
    missing_file = _serve_files(tmp_path, tmp_path / "gone" / "x.jsonl", _list(4) + b"\n")
    text = json.dumps([answers, missing_file])
    assert str(tmp_path) not in text and os.path.realpath(tmp_path) not in text
    by_id = _answers_by_id(answers + missing_file)
    misplaced = by_id[1][0]["error"]
    assert misplaced["code"] == CANNOT_READ
    assert "'crash-demo'" in misplaced["message"]
    assert "--elsewhere--/crash-demo/session.jsonl: the header" in misplaced["message"]
    assert (_code(by_id[2][0]), _code(by_id[4][0])) == (NOT_FOUND, NOT_FOUND)
    assert "x.jsonl" in by_id[4][0]["error"]["message"]
    skipped = by_id[3][0]["result"]["_meta"]["skippedSessions"]
    assert [(s["location"], s["errorClass"]) for s in skipped] == [
        ("--elsewhere--/crash-demo", "CorruptLog")
    ]


def test_list_skips_and_reports_a_bad_header_and_a_flat_layout_log(
    tmp_path: Path, quiet: None
) -> None:
    root = tmp_path / "store"
    _store(root, COMPACTION, CRASH)
    bad = root / "--somewhere--" / "bad-header"
    bad.mkdir(parents=True)
    (bad / "session.jsonl").write_bytes(b'{"type":"session","version":0}\n')
    shutil.copy(COMPACTION, root / "--somewhere--" / "flat.jsonl")
    data = b"\n".join([_list(1), _load(2, "crash-demo"), b""])
    answers = _serve_files(tmp_path, root, data)
    by_id = _answers_by_id(answers)
    listed = by_id[1][0]["result"]
    assert sorted(s["sessionId"] for s in listed["sessions"]) == ["compaction-demo", "crash-demo"]
    assert [(s["location"], s["errorClass"]) for s in listed["_meta"]["skippedSessions"]] == [
        ("--somewhere--/bad-header", "CorruptLog"),  # sorted by location
        ("--somewhere--/flat.jsonl", "StoreLayoutError"),
    ]
    assert by_id[2][0]["result"] == {}


def test_list_of_a_database_skips_and_reports_a_session_with_a_damaged_header(
    tmp_path: Path, quiet: None
) -> None:
    database = tmp_path / "sessions.db"
    with SqliteStore(database) as store:
        for source in (COMPACTION, CRASH):
            loaded = load_jsonl(source.read_bytes(), now=0)
            store.create(loaded.header)
            stored = loaded.events[: len(loaded.events) - len(loaded.closers)]
            store.append(loaded.header.id, stored)
    with closing(sqlite3.connect(database)) as conn, conn:
        conn.execute("UPDATE sessions SET version = 7 WHERE id = 'crash-demo'")
    data = b"\n".join([_list(1), _load(2, "compaction-demo"), b""])
    by_id = _answers_by_id(_serve_files(tmp_path, database, data))
    listed = by_id[1][0]["result"]
    assert [s["sessionId"] for s in listed["sessions"]] == ["compaction-demo"]
    assert [(s["location"], s["errorClass"]) for s in listed["_meta"]["skippedSessions"]] == [
        ("crash-demo", "UnsupportedFormat")
    ]
    assert by_id[2][0]["result"] == {}


def test_list_of_a_database_reads_headers_only_and_load_names_damaged_rows(
    tmp_path: Path, quiet: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = tmp_path / "sessions.db"
    with SqliteStore(database) as store:
        for source in (COMPACTION, CRASH):
            loaded = load_jsonl(source.read_bytes(), now=0)
            store.create(loaded.header)
            store.append(
                loaded.header.id, loaded.events[: len(loaded.events) - len(loaded.closers)]
            )
    with closing(sqlite3.connect(database)) as conn, conn:
        conn.execute(  # before the closed turn's turn/end: damage, not a torn tail
            "UPDATE events SET data = '{garbage' WHERE session_id = 'crash-demo' AND seq = 1"
        )
    inspected: list[str] = []
    inspect = SqliteStore.inspect

    def counted(self: SqliteStore, session_id: str, **kwargs: Any) -> Any:
        inspected.append(session_id)
        return inspect(self, session_id, **kwargs)

    monkeypatch.setattr(SqliteStore, "inspect", counted)
    (listed,) = _serve_files(tmp_path, database, _list(1) + b"\n")
    assert inspected == []  # no session was read to list it
    assert listed["result"] == {
        "sessions": [
            {"sessionId": "compaction-demo", "cwd": "/projects/demo"},
            {"sessionId": "crash-demo", "cwd": "/projects/demo"},
        ]
    }
    (loaded,) = _serve_files(tmp_path, database, _load(2, "crash-demo") + b"\n")
    assert (_code(loaded), loaded["error"]["data"]) == (CANNOT_READ, {"errorClass": "CorruptLog"})


def _zstd_store(root: Path) -> Path:
    """A Zstandard store holding the compaction example; the path of its session file."""
    store = JsonlStore(root, zstd=True)
    loaded = load_jsonl(COMPACTION.read_bytes(), now=0)
    store.create(loaded.header)
    store.append(loaded.header.id, loaded.events)
    return store.path_of(loaded.header.id)


def test_max_decoded_bytes_caps_what_acp_serve_reads_of_a_zstd_log(
    tmp_path: Path, quiet: None
) -> None:
    root = tmp_path / "store"
    log = _zstd_store(root)
    data = b"\n".join([_list(1), _load(2, "compaction-demo"), b""])
    for served in (root, log):
        capped = _answers_by_id(_serve_files(tmp_path, served, data, max_decoded_bytes=16))
        listed = capped[1][0]["result"]
        assert listed["sessions"] == []
        assert [s["errorClass"] for s in listed["_meta"]["skippedSessions"]] == ["LimitExceeded"]
        assert (_code(capped[2][0]), capped[2][0]["error"]["data"]) == (
            CANNOT_READ,
            {"errorClass": "LimitExceeded"},
        )
        roomy = _answers_by_id(_serve_files(tmp_path, served, data, max_decoded_bytes=1 << 24))
        assert [s["sessionId"] for s in roomy[1][0]["result"]["sessions"]] == ["compaction-demo"]
        assert roomy[2][0]["result"] == {}


def test_a_list_of_a_healthy_store_carries_no_skipped_entries(tmp_path: Path, quiet: None) -> None:
    _store(tmp_path / "store", COMPACTION)
    (answer,) = _serve_files(tmp_path, tmp_path / "store", _list(1) + b"\n")
    assert answer["result"] == {
        "sessions": [{"sessionId": "compaction-demo", "cwd": "/projects/demo"}]
    }


def _linked_out_store(tmp_path: Path) -> tuple[Path, Path]:
    """A store whose session directory, session file and a project directory link outside."""
    root, outside = tmp_path / "store", tmp_path / "outside"
    store = _store(root, COMPACTION, CRASH)
    outside.mkdir()
    crash_dir = store.path_of("crash-demo").parent
    shutil.move(crash_dir, outside / "crash-dir")
    crash_dir.symlink_to(outside / "crash-dir")
    compaction = store.path_of("compaction-demo")
    shutil.move(compaction, outside / "compaction.jsonl")
    compaction.symlink_to(outside / "compaction.jsonl")
    _store(outside / "other-root", COMPACTION)
    (root / "--linked-project--").symlink_to(outside / "other-root" / "--projects-demo--")
    return root, outside


def test_reads_open_no_file_that_a_link_in_the_store_points_to(
    tmp_path: Path, quiet: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, outside = _linked_out_store(tmp_path)
    forbidden = {(s.st_dev, s.st_ino) for s in map(os.stat, outside.rglob("*"))}
    opened: list[tuple[int, int]] = []
    real_open, real_builtin_open = os.open, builtins.open

    def watched_open(*args: Any, **kwargs: Any) -> int:
        fd = real_open(*args, **kwargs)
        status = os.fstat(fd)
        opened.append((status.st_dev, status.st_ino))
        return fd

    def watched_builtin_open(*args: Any, **kwargs: Any) -> Any:
        handle = real_builtin_open(*args, **kwargs)
        status = os.fstat(handle.fileno())
        opened.append((status.st_dev, status.st_ino))
        return handle

    monkeypatch.setattr(os, "open", watched_open)
    monkeypatch.setattr(builtins, "open", watched_builtin_open)
    data = b"\n".join([_list(1), _load(2, "crash-demo"), _load(3, "compaction-demo"), b""])
    answers = _serve_files(tmp_path, root, data)
    monkeypatch.undo()
    assert opened, "the watch sees the server's opens"
    assert not forbidden & set(opened), "a file outside the store was opened"
    by_id = _answers_by_id(answers)
    assert by_id[1][0]["result"]["sessions"] == []
    skipped = by_id[1][0]["result"]["_meta"]["skippedSessions"]
    assert {(s["location"], s["errorClass"]) for s in skipped} == {
        ("--linked-project--", "StoreLayoutError"),
        ("--projects-demo--/compaction-demo", "StoreLayoutError"),
        ("--projects-demo--/crash-demo", "StoreLayoutError"),
    }
    for request_id in (2, 3):
        (answer,) = by_id[request_id]
        assert (_code(answer), answer["error"]["data"]) == (
            CANNOT_READ,
            {"errorClass": "StoreLayoutError"},
        )
    assert not [a for a in answers if a.get("method") == "session/update"]


# -- concurrency --------------------------------------------------------------------------------


class _Pipes:
    """`serve()` on a thread of this process, spoken to over two pipes."""

    def __init__(self, store: str) -> None:
        self._in_r, self._in_w = os.pipe()
        self._out_r, self._out_w = os.pipe()
        self._reader = os.fdopen(self._out_r, "rb")
        self._server = threading.Thread(
            target=asyncio.run,
            args=(serve(store, input_fd=self._in_r, output_fd=self._out_w),),
        )
        self._server.start()

    def send(self, line: bytes) -> None:
        os.write(self._in_w, line + b"\n")

    def next_answer(self) -> Any:
        """The next message that is not a `session/update`."""
        while True:
            message = json.loads(self._reader.readline())
            if message.get("method") != "session/update":
                return message

    def close(self) -> None:
        os.close(self._in_w)
        rest = threading.Thread(target=self._reader.read)
        rest.start()
        self._server.join()
        for fd in (self._in_r, self._out_w):
            os.close(fd)
        rest.join()
        self._reader.close()


def test_a_slow_replay_does_not_hold_up_other_requests(
    tmp_path: Path, quiet: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _store(tmp_path / "store", COMPACTION)
    released = threading.Event()
    balanced = acp_serving.StoreReader.balanced

    def held_back(self: acp_serving.StoreReader, session_id: str) -> Any:
        released.wait(timeout=10)  # only a safety net: the test sets it
        return balanced(self, session_id)

    monkeypatch.setattr(acp_serving.StoreReader, "balanced", held_back)
    server = _Pipes(str(tmp_path / "store"))
    try:
        server.send(_load("load", "compaction-demo"))
        server.send(_initialize("initialize"))
        server.send(_list("list"))
        first, second = server.next_answer(), server.next_answer()
        released.set()
        third = server.next_answer()
    finally:
        released.set()
        server.close()
    assert {first["id"], second["id"]} == {"initialize", "list"}
    assert third == {"jsonrpc": "2.0", "id": "load", "result": {}}


# -- the real process ---------------------------------------------------------------------------


def _command() -> list[str]:
    script = shutil.which("session-kernel")
    return [script] if script else [sys.executable, "-m", "kernel.cli"]


@pytest.mark.slow
def test_the_server_process_answers_every_probe_and_writes_nothing_to_stderr() -> None:
    probes = [
        b"[]",
        b"5",
        b'"x"',
        b"true",
        b"null",
        b"{bad",
        b"\xff\xfe",
        b"[" * 200_000 + b"]" * 200_000,
        b'{"jsonrpc":"2.0","id":"big","method":"initialize","params":{"p":"'
        + b"a" * (MAX_LINE_BYTES + 1)
        + b'"}}',
        json.dumps([json.loads(_initialize("in-batch")), 1]).encode(),
        b'{"jsonrpc":"2.0","method":"no/such/notification"}',
    ]
    burst = [_initialize(n) if n % 2 else _list(n) for n in range(300)]
    data = b"\n".join([_initialize("first"), *probes, *burst, _load("load", "compaction-demo")])
    done = subprocess.run(
        [*_command(), "acp-serve", str(COMPACTION)],
        input=data + b"\n",
        capture_output=True,
        timeout=120,
    )
    assert (done.returncode, done.stderr) == (0, b"")
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    by_id = _answers_by_id(answers)
    assert {k: len(v) for k, v in by_id.items() if k is not None} == {
        k: 1 for k in ["first", "in-batch", "load", *range(300)]
    }
    assert len(by_id[None]) == 10, "the batch's bad member and nine bad lines"
    assert all("result" in by_id[k][0] for k in ["first", "in-batch", "load", *range(300)])


def _peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM line")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmHWM from /proc")
def test_an_endless_line_is_discarded_without_being_held_in_memory() -> None:
    process = subprocess.Popen(
        [*_command(), "acp-serve", str(COMPACTION)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        chunk = b"a" * (1 << 20)
        for _ in range(256):
            process.stdin.write(chunk)
        process.stdin.write(b"\n" + _initialize("after") + b"\n")
        process.stdin.flush()
        overlong = json.loads(process.stdout.readline())
        after = json.loads(process.stdout.readline())
        peak = _peak_rss_kib(process.pid)
        process.stdin.close()
        assert process.wait(timeout=60) == 0
    finally:
        process.kill()
    assert (overlong["id"], _code(overlong)) == (None, INVALID_REQUEST)
    assert after["id"] == "after" and "result" in after
    assert peak < 128 * 1024, f"peak RSS {peak} KiB after a 256 MiB line"


@pytest.mark.slow
def test_stdin_and_stdout_may_be_regular_files(tmp_path: Path) -> None:
    requests, answers = tmp_path / "requests.jsonl", tmp_path / "answers.jsonl"
    requests.write_bytes(_initialize(1) + b"\n" + _load(2, "crash-demo") + b"\n")
    with requests.open("rb") as stdin, answers.open("wb") as stdout:
        done = subprocess.run(
            [*_command(), "acp-serve", str(CRASH)],
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    assert (done.returncode, done.stderr) == (0, b"")
    written = [json.loads(line) for line in answers.read_bytes().splitlines()]
    loaded = load_jsonl(CRASH.read_bytes(), now=0)
    replay = acp_updates(loaded.events, session_id="crash-demo")
    assert [m["params"] for m in written if m.get("method") == "session/update"] == list(replay)
    assert [m["id"] for m in written if "id" in m] == [1, 2]


@pytest.mark.slow
def test_the_server_ends_quietly_when_the_client_stops_reading() -> None:
    process = subprocess.Popen(
        [*_command(), "acp-serve", str(COMPACTION)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdout.close()
    try:
        process.stdin.write(b"\n".join(_load(n, "compaction-demo") for n in range(50)) + b"\n")
        process.stdin.close()
    except BrokenPipeError:
        pass  # the server may be gone already: that is what this test expects
    assert process.stderr is not None
    assert process.wait(timeout=60) == 0
    assert process.stderr.read() == b""
    process.stderr.close()


@pytest.mark.parametrize("levels", [300, 1_500])
def test_a_replay_with_deeply_nested_tool_arguments_is_served(
    tmp_path: Path, levels: int, quiet: None
) -> None:
    from kernel import APPEND, SessionLog, write_jsonl
    from kernel.values.json import json_equal
    from kernel.wire.jsontext import encode_json, parse_json

    deep: Any = "bottom"
    for _ in range(levels):
        deep = {"a": deep}
    header = {"version": 0, "id": "deep", "createdAt": 1, "cwd": "/p"}
    source = {"kind": "model", "provider": "p", "model": "m"}
    call = {"type": "tool-call", "id": "c1", "name": "t", "arguments": encode_json(deep)}
    message = {"id": "a1", "role": "assistant", "content": [call], "source": source}
    log = SessionLog.empty(header=header).append("turn/start", {"turn": 1}, time=1)
    log = log.append("step/start", {"turn": 1, "step": 1}, time=2)
    log = log.append(
        "assistant/message", {"turn": 1, "step": 1, "message": message}, time=3, surface_op=APPEND
    )
    (tmp_path / "deep.jsonl").write_bytes(write_jsonl(header, log.events))
    store = _store(tmp_path / "store", tmp_path / "deep.jsonl")
    out = _serve_raw(tmp_path, store.root, _initialize(1) + b"\n" + _load(2, "deep") + b"\n")
    answers = [parse_json(line) for line in out.splitlines()]  # deeper than `json.loads` reads
    assert not any(_code(a) for a in answers if "id" in a)
    calls = [
        a["params"]["update"]
        for a in answers
        if a.get("method") == "session/update"
        and a["params"]["update"].get("sessionUpdate") == "tool_call"
    ]
    assert calls and json_equal(calls[0]["rawInput"], deep)  # iterative: no recursion limit


@pytest.mark.slow
def test_a_store_that_does_not_exist_yet_is_served_with_one_line_on_stderr(
    tmp_path: Path,
) -> None:
    # Each request reads the store afresh, so serving it is right; a typo should still show.
    missing = tmp_path / "typo"
    done = subprocess.run(
        [*_command(), "acp-serve", str(missing)],
        input=_initialize(1) + b"\n" + _list(2) + b"\n",
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0
    assert done.stderr.decode() == (
        f"session-kernel: acp-serve: {missing}: no such store yet; "
        "requests answer 'not found' until it exists\n"
    )
    answers = _answers_by_id([json.loads(line) for line in done.stdout.splitlines()])
    assert "result" in answers[1][0] and _code(answers[2][0]) == -32002
