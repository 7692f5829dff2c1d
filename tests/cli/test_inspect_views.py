"""`inspect`'s summary and views, JSON Lines, the pager, progress, help epilogs, names.

Logs are built with `test_cli.Builder`, so every expected turn, message and seq is
known from how the log was made.
"""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from test_cli import TORN_RECORD, Builder, header, run_main

from kernel.cli import build_parser, exits, inspecting, verifying
from kernel.cli.output import json_line
from kernel.cli.paging import pager_command, use_pager
from kernel.cli.sources import natural_key
from kernel.storage.jsonl import write_jsonl
from kernel.store import JsonlStore, SqliteStore


def many_turns(count: int) -> Builder:
    """`count` closed turns of one step each: turn n has messages u{n} and a{n}-1."""
    b = Builder()
    for turn in range(1, count + 1):
        b.turn(turn, [[]])
    return b


def write_log(path: Path, b: Builder, session: str = "views", tail: bytes = b"") -> Path:
    path.write_bytes(write_jsonl(header(session), b.events) + tail)
    return path


def flat(out: str) -> str:
    """The output with every run of whitespace one space (titles wrap at the width)."""
    return " ".join(out.split())


def turn_rows(out: str) -> list[int]:
    """The turn numbers of the Turns table's rows, in order."""
    section = out.split("Turns", 1)[1].split("Surface", 1)[0]
    rows = [line.strip("│┃ ").split("│")[0].strip() for line in section.splitlines()]
    return [int(cell) for cell in rows if cell.isdigit()]


# -- summary and views ---------------------------------------------------------------------------


def test_summary_lists_the_last_turns_and_turns_lists_every_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = write_log(tmp_path / "long.jsonl", many_turns(8))

    code, out, _ = run_main(capsys, "inspect", log)
    assert code == 0
    assert turn_rows(out) == [4, 5, 6, 7, 8]
    assert "Turns (last 5 of 8; --turns shows more)" in flat(out)
    assert "Messages (" not in out  # the summary counts messages, lists none
    assert "derived messages" in out
    for heading in ("Events (", "Repair", "Tail"):
        assert heading in out

    code, out, _ = run_main(capsys, "inspect", "--turns", log)
    assert code == 0
    assert turn_rows(out) == list(range(1, 9))
    assert "Turns (8)" in out


def test_messages_n_lists_the_last_n_derived_messages_with_their_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = write_log(tmp_path / "long.jsonl", many_turns(4))  # 8 messages: u1, a1-1, ... a4-1

    code, out, _ = run_main(capsys, "inspect", "--messages", "3", log)
    assert code == 0
    assert "Messages (last 3 of 8; --messages N shows more)" in flat(out)
    table = out.split("Messages (", 1)[1]
    assert [m for m in ("a3-1", "u4", "a4-1") if m in table] == ["a3-1", "u4", "a4-1"]
    assert "u3" not in table and "a1-1" not in table
    assert "│ 5 " in table and "│ 7 " in table  # indexes count from the first message

    code, out, _ = run_main(capsys, "inspect", "--messages", "all", log)
    assert "Messages (8)" in out and "u1" in out

    with pytest.raises(SystemExit) as refused:
        build_parser().parse_args(["inspect", "--messages", "-1", str(log)])
    assert refused.value.code == exits.USAGE


def test_tail_lists_the_last_events_and_the_torn_tail_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b = many_turns(4)
    log = write_log(tmp_path / "torn.jsonl", b, tail=TORN_RECORD)
    last = b.events[-1].seq

    code, out, _ = run_main(capsys, "inspect", log)
    assert code == 0 and "Last events" not in out

    code, out, _ = run_main(capsys, "inspect", "--tail", log)
    assert code == 0
    section = out.split(f"Last events (the last 20 of {last + 1})", 1)[1]
    seqs = [int(line.split("│")[1]) for line in section.splitlines() if line.startswith("│")]
    assert seqs[:20] == list(range(last - 19, last + 1))
    assert "turn/end" in section and "user u4" in section

    # a torn tail that holds a complete record (its newline lost) lists that record
    data = write_jsonl(header("views"), b.events)
    (tmp_path / "kept.jsonl").write_bytes(data[:-1])
    code, out, _ = run_main(capsys, "inspect", "--tail", tmp_path / "kept.jsonl")
    assert code == 0
    records = flat(out).split("Complete records in the torn tail", 1)[1]
    assert f"│ {last} │ turn/end │" in records


def test_json_is_the_whole_report_whatever_the_view(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = write_log(tmp_path / "long.jsonl", many_turns(7))
    _, plain, _ = run_main(capsys, "inspect", "--json", log)
    _, viewed, _ = run_main(capsys, "inspect", "--json", "--turns", "--messages", "1", log)
    assert json.loads(plain) == json.loads(viewed)
    assert len(json.loads(plain)["turns"]) == 7


# -- JSON Lines ----------------------------------------------------------------------------------


def reassembled(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The `--json` report rebuilt from one session's JSON Lines records."""
    doc: dict[str, Any] = {"turns": [], "messages": []}
    replacements: list[dict[str, Any]] = []
    for record in records:
        kind = record.pop("record")
        record.pop("session")
        if kind == "session":
            doc.update(record)
        elif kind == "events":
            doc["events"] = record
        elif kind == "turn":
            doc["turns"].append(record)
        elif kind == "surface":
            doc["surface"] = {**record, "replacements": replacements}
        elif kind == "replacement":
            replacements.append(record)
        elif kind == "message":
            assert record.pop("index") == len(doc["messages"])
            doc["messages"].append(record)
        elif kind == "requestHeader":
            doc["requestHeader"] = record["requestHeader"]
        elif kind == "repair":
            doc["lastTurnOpen"] = record.pop("lastTurnOpen")
            doc["repair"] = record
        elif kind == "tail":
            doc["tail"] = record
        else:
            raise AssertionError(f"unknown record {kind!r}")
    return doc


def test_jsonl_is_one_object_per_line_and_holds_the_json_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b = many_turns(3)
    b.add("turn/start", {"turn": 4})
    log = write_log(tmp_path / "open.jsonl", b, tail=TORN_RECORD)

    code, out, _ = run_main(capsys, "inspect", "--jsonl", log)
    assert code == 0 and out.endswith("\n")
    records = [json.loads(line) for line in out.splitlines()]  # each line parses alone
    assert all(isinstance(r, dict) and r["session"] == "views" for r in records)
    kinds = [r["record"] for r in records]
    assert kinds == [
        "session",
        "events",
        *["turn"] * 4,
        "surface",
        *["message"] * 6,
        "requestHeader",
        "repair",
        "tail",
    ]
    _, whole, _ = run_main(capsys, "inspect", "--json", log)
    assert reassembled(records) == json.loads(whole)


def test_jsonl_of_a_database_gives_each_session_its_records_in_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "sessions.db"
    with SqliteStore(db) as store:
        for sid in ("s10", "s2"):
            store.create(header(sid))
            store.append(sid, many_turns(1).events)
    code, out, _ = run_main(capsys, "inspect", "--jsonl", db)
    assert code == 0
    records = [json.loads(line) for line in out.splitlines()]
    order = [r["session"] for r in records if r["record"] == "session"]
    assert order == ["s2", "s10"]
    firsts = [i for i, r in enumerate(records) if r["record"] == "session"]
    assert all(r["session"] == "s2" for r in records[: firsts[1]])


def test_json_and_jsonl_are_exclusive() -> None:
    with pytest.raises(SystemExit) as refused:
        build_parser().parse_args(["inspect", "--json", "--jsonl", "a.jsonl"])
    assert refused.value.code == exits.USAGE


def test_json_line_writes_what_orjson_refuses_on_one_line() -> None:
    deep: Any = "leaf"
    for _ in range(300):
        deep = [deep]
    line = json_line({"text": "lone \ud800 half", "deep": deep, "c1": "\x9b"})
    assert line.count(b"\n") == 1 and line.endswith(b"\n")
    assert b"\\ud800" in line and b"\\u009b" in line
    parsed = json.loads(line)
    assert parsed["text"] == "lone \ud800 half"


# -- the pager -----------------------------------------------------------------------------------


def test_pager_is_used_only_on_a_terminal_and_never_when_refused() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert use_pager(Tty(), no_pager=False, environ={}) is True
    assert use_pager(io.StringIO(), no_pager=False, environ={}) is False
    assert use_pager(Tty(), no_pager=True, environ={}) is False
    assert use_pager(Tty(), no_pager=False, environ={"PAGER": ""}) is False
    assert pager_command({}) == "less"
    assert pager_command({"PAGER": "most -s"}) == "most -s"


def pager_env(tmp_path: Path) -> tuple[dict[str, str], Path]:
    marker = tmp_path / "paged.txt"
    env = {**os.environ, "PAGER": f"cat > {marker}", "PYTHONPATH": os.pathsep.join(sys.path)}
    return env, marker


def test_no_pager_when_stdout_is_not_a_terminal(tmp_path: Path) -> None:
    log = write_log(tmp_path / "a.jsonl", many_turns(2))
    env, marker = pager_env(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "kernel.cli", "inspect", str(log)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0 and "Turns (2)" in proc.stdout
    assert not marker.exists()


def inspect_on_a_terminal(log: Path, env: dict[str, str], *extra: str) -> int:
    """Run `inspect` with stdout on a pseudo-terminal; returns the exit status."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kernel.cli", "inspect", *extra, str(log)],
            stdout=follower,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        os.close(follower)
        while True:  # drain the terminal so the command never blocks on it
            try:
                if not os.read(leader, 65536):
                    break
            except OSError:
                break
        return proc.wait(timeout=120)
    finally:
        os.close(leader)


def test_the_pager_gets_the_tables_when_stdout_is_a_terminal(tmp_path: Path) -> None:
    log = write_log(tmp_path / "a.jsonl", many_turns(2))
    env, marker = pager_env(tmp_path)
    assert inspect_on_a_terminal(log, env) == 0
    assert "Turns (2)" in marker.read_text()
    marker.unlink()
    assert inspect_on_a_terminal(log, env, "--no-pager") == 0
    assert not marker.exists()
    assert inspect_on_a_terminal(log, env, "--json") == 0  # JSON is never paged
    assert not marker.exists()


# -- progress ------------------------------------------------------------------------------------


def terminal_console(buffer: io.StringIO) -> Console:
    return Console(file=buffer, force_terminal=True, width=120, highlight=False)


def test_verify_draws_a_bar_with_rate_and_eta_for_one_file_on_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    log = write_log(tmp_path / "a.jsonl", many_turns(2))
    drawn = io.StringIO()
    monkeypatch.setattr(verifying, "stderr_console", lambda: terminal_console(drawn))
    monkeypatch.setattr(verifying, "PROGRESS_DELAY", 0.0)
    code, _, _ = run_main(capsys, "verify", log)
    assert code == 0
    frames = drawn.getvalue()
    assert "verifying" in frames and "1/1 log(s)" in frames
    assert "2.0/2.0 kB" in frames and "eta" in frames  # bytes done, total, time left


def test_no_progress_off_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    log = write_log(tmp_path / "a.jsonl", many_turns(2))
    drawn = io.StringIO()
    plain = Console(file=drawn, force_terminal=False)
    monkeypatch.setattr(verifying, "stderr_console", lambda: plain)
    monkeypatch.setattr(verifying, "PROGRESS_DELAY", 0.0)
    monkeypatch.setattr(inspecting, "stderr_console", lambda: plain)
    assert run_main(capsys, "verify", log)[0] == 0
    assert run_main(capsys, "inspect", log)[0] == 0
    assert drawn.getvalue() == ""


def test_inspect_shows_what_it_is_doing_on_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from kernel.cli import progress

    log = write_log(tmp_path / "a.jsonl", many_turns(2))
    drawn = io.StringIO()
    monkeypatch.setattr(inspecting, "stderr_console", lambda: terminal_console(drawn))
    real = progress.delayed_progress
    monkeypatch.setattr(
        inspecting, "delayed_progress", lambda console, columns: real(console, columns, delay=0)
    )
    code, out, _ = run_main(capsys, "inspect", log)
    assert code == 0 and "Turns (2)" in out
    assert "loading" in drawn.getvalue() or "deriving" in drawn.getvalue()


@pytest.mark.parametrize(
    ("command", "doing"),
    [
        (("repair",), "repairing"),
        (("repair", "--dry-run"), "planning the repair of"),
        (("export", "--format", "openai"), "reading"),
    ],
)
def test_repair_and_export_show_what_they_are_doing_on_a_terminal_only(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: tuple[str, ...],
    doing: str,
) -> None:
    from kernel.cli import exporting, progress, repairing

    module = repairing if command[0] == "repair" else exporting
    real = progress.delayed_progress
    monkeypatch.setattr(
        module, "delayed_progress", lambda console, columns: real(console, columns, delay=0)
    )
    for terminal in (False, True):
        log = write_log(tmp_path / f"{terminal}.jsonl", many_turns(2))
        drawn = io.StringIO()
        console = terminal_console(drawn) if terminal else Console(file=drawn)
        monkeypatch.setattr(module, "stderr_console", lambda console=console: console)
        code, out, _ = run_main(capsys, command[0], log, *command[1:])
        assert code == 0 and out
        assert (f"{doing} {log}" in drawn.getvalue()) is terminal, drawn.getvalue()


# -- help, names and order -----------------------------------------------------------------------


@pytest.mark.parametrize("command", ["inspect", "verify", "repair", "export", "acp-serve"])
def test_each_command_help_has_its_own_exit_statuses(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    shown = capsys.readouterr().out
    epilog = exits.EPILOGS[command]
    assert " ".join(epilog.split()) in " ".join(shown.split())
    verify_only = ("--timeout", "--report", "Dask", "every log verifies")
    if command == "verify":
        assert all(phrase in epilog for phrase in verify_only)
    else:
        assert not any(phrase in shown for phrase in verify_only), shown
    if command == "acp-serve":
        assert "  1  " not in epilog and "  3  " not in epilog


def test_top_level_help_names_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    description = capsys.readouterr().out.split("commands:", 1)[0]
    for command in ("inspect", "verify", "repair", "export", "acp-serve"):
        assert command.split("-")[0] in description.replace("Inspect", "inspect"), command


def jsonl_store(root: Path) -> JsonlStore:
    store = JsonlStore(root)
    for sid, turns in (("alpha", 2), ("beta", 3)):
        store.create(header(sid))
        store.append(sid, many_turns(turns).events)
    return store


def test_session_names_a_session_in_a_jsonl_store_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "store"
    store = jsonl_store(root)
    code, out, _ = run_main(capsys, "inspect", "--json", root, "--session", "beta")
    assert code == 0
    doc = json.loads(out)
    assert doc["source"] == {
        "path": str(store.path_of("beta")),
        "format": "jsonl",
        "session": "beta",
    }
    assert len(doc["turns"]) == 3

    code, out, _ = run_main(capsys, "export", root, "--session", "alpha", "--format", "acp")
    assert code == 0 and json.loads(out)
    code, out, _ = run_main(capsys, "repair", "--dry-run", "--json", root, "--session", "alpha")
    assert code == 0 and json.loads(out)["location"] == str(store.path_of("alpha"))

    code, _, err = run_main(capsys, "inspect", root, "--session", "gamma")
    assert code == exits.INVALID and "SessionNotFound" in err


@pytest.mark.parametrize("command", ["inspect", "repair", "export"])
def test_a_directory_without_session_names_the_command_that_refused_it(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "store"
    jsonl_store(root)
    extra = ["--format", "acp"] if command == "export" else []
    code, _, err = run_main(capsys, command, root, *extra)
    assert code == exits.USAGE
    assert f"{command} takes one log file, or a JsonlStore root with --session ID" in err


def test_session_in_a_zstd_jsonl_store_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "zstore"
    store = JsonlStore(root, zstd=True)
    store.create(header("zeta"))
    store.append("zeta", many_turns(2).events)
    code, out, _ = run_main(capsys, "inspect", "--json", root, "--session", "zeta")
    assert code == 0 and json.loads(out)["source"]["format"] == "jsonl.zstd"


def test_a_session_file_that_is_a_link_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "store"
    store = jsonl_store(root)
    target = store.path_of("alpha")
    moved = tmp_path / "elsewhere.jsonl"
    target.rename(moved)
    target.symlink_to(moved)
    code, _, err = run_main(capsys, "inspect", root, "--session", "alpha")
    assert code == exits.INVALID and "StoreLayoutError" in err


def test_natural_key_orders_digit_runs_by_value() -> None:
    names = ["log10", "log2", "log1", "log02", "a", "log"]
    assert sorted(names, key=natural_key) == ["a", "log", "log1", "log02", "log2", "log10"]


def test_verify_lists_logs_in_natural_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for n in (1, 10, 2, 11):
        write_log(tmp_path / f"log{n}.jsonl", many_turns(1), session=f"s{n}")
    code, out, _ = run_main(capsys, "verify", "--json", tmp_path)
    assert code == 0
    names = [Path(entry["path"]).name for entry in json.loads(out)["logs"]]
    assert names == ["log1.jsonl", "log2.jsonl", "log10.jsonl", "log11.jsonl"]


def test_inspect_lists_database_sessions_in_natural_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "sessions.db"
    with SqliteStore(db) as store:
        for sid in ("s10", "s1", "s2"):
            store.create(header(sid))
            store.append(sid, many_turns(1).events)
    code, out, _ = run_main(capsys, "inspect", "--json", db)
    assert code == 0
    assert [doc["source"]["session"] for doc in json.loads(out)] == ["s1", "s2", "s10"]


def test_counts_are_spelled_with_thousands_separators() -> None:
    # As docs/cli.md shows them: "Turns (last 5 of 1,204; --turns shows more)".
    from kernel.cli.inspecting import _shown

    assert _shown("Turns", 5, 11227, "--turns") == "Turns (last 5 of 11,227; --turns shows more)"
    assert _shown("Messages", 1204, 1204, "--messages N") == "Messages (1,204)"
