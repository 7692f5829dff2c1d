"""`session-kernel export` and `session-kernel acp-serve`, end to end.

The ACP test is the SDK's own client spawning `session-kernel acp-serve` as a real
subprocess over stdio: it lists the store, loads a session with a compaction and
one cut by a crash, and must receive exactly `acp_updates(...)` on the wire; a
missing session, a damaged store and a prompt get protocol errors, and the agent
keeps serving after each.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("acp")

from acp import PROTOCOL_VERSION, RequestError, text_block
from acp.connection import StreamDirection, StreamEvent
from acp.stdio import spawn_agent_process

from kernel import load_jsonl
from kernel.cli.acp_serving import CANNOT_READ, NOT_FOUND, READ_ONLY
from kernel.projections import acp_updates, anthropic_request, openai_request
from kernel.store import JsonlStore, SqliteStore

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
COMPACTION = EXAMPLES / "compaction.jsonl"
CRASH = EXAMPLES / "crash-torn-tail.jsonl"


def _command() -> list[str]:
    script = shutil.which("session-kernel")
    return [script] if script else [sys.executable, "-m", "kernel.cli"]


def _stored(path: Path) -> tuple[Any, tuple[Any, ...], tuple[Any, ...]]:
    """Header, stored prefix and balanced events (prefix + closers) of an example log."""
    loaded = load_jsonl(path.read_bytes(), now=0)
    prefix = loaded.events[: len(loaded.events) - len(loaded.closers)]
    return loaded.header, tuple(prefix), tuple(loaded.events)


def _jsonl_store(root: Path) -> dict[str, tuple[Any, ...]]:
    """A JSONL store holding both examples (the crash one still open, and ending in a torn
    record as a crash leaves it); -> balanced events."""
    store = JsonlStore(root)
    expected = {}
    for path in (COMPACTION, CRASH):
        header, prefix, balanced = _stored(path)
        store.create(header)
        store.append(header.id, prefix)
        expected[header.id] = balanced
    with store.path_of("crash-demo").open("ab") as torn:
        torn.write(b'{"type":"tool/result","seq":14,"time":17600')
    return expected


def _run(command: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=120)


class _Client:
    """The smallest ACP client: it accepts updates (the wire is read by an observer)."""

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None


async def _serve(store: str, script: Any) -> Any:
    received: list[dict[str, Any]] = []

    def observe(event: StreamEvent) -> None:
        message = event.message
        if event.direction == StreamDirection.INCOMING and message.get("method") == (
            "session/update"
        ):
            received.append(message["params"])

    command = _command()
    async with spawn_agent_process(
        _Client(), command[0], *command[1:], "acp-serve", store, observers=[observe]
    ) as (conn, _process):
        return await asyncio.wait_for(script(conn, received), timeout=120)


@pytest.mark.slow
def test_acp_serve_replays_stored_sessions_exactly_and_survives_errors(tmp_path: Path) -> None:
    root = tmp_path / "store"
    expected = _jsonl_store(root)

    async def script(conn: Any, received: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
        out["load"] = init.agent_capabilities.load_session
        out["listed"] = sorted(s.session_id for s in (await conn.list_sessions()).sessions)
        for sid in sorted(expected):
            received.clear()
            await conn.load_session(cwd="/", session_id=sid, mcp_servers=[])
            await asyncio.sleep(0.05)
            out[sid] = list(received)
        errors = []
        for call in (
            conn.load_session(cwd="/", session_id="no-such-session", mcp_servers=[]),
            conn.prompt(session_id="compaction-demo", prompt=[text_block("hi")]),
            conn.new_session(cwd="/"),
        ):
            try:
                await call
                errors.append(None)
            except RequestError as exc:
                errors.append((exc.code, str(exc)))
        out["errors"] = errors
        received.clear()
        await conn.load_session(cwd="/", session_id="crash-demo", mcp_servers=[])
        await asyncio.sleep(0.05)
        out["again"] = list(received)
        return out

    out = asyncio.run(_serve(str(root), script))
    assert out["load"] is True
    assert out["listed"] == sorted(expected)
    for sid, events in expected.items():
        assert out[sid] == list(acp_updates(events, session_id=sid)), f"replay of {sid}"
    crash_statuses = [u["update"].get("status") for u in out["crash-demo"]]
    assert crash_statuses.count("failed") == 2, "the crash's closers replay as failed calls"
    assert [e[0] if e else None for e in out["errors"]] == [NOT_FOUND, READ_ONLY, READ_ONLY]
    assert "read-only" in out["errors"][1][1]
    assert out["again"] == out["crash-demo"], "the agent kept serving after the errors"


@pytest.mark.slow
def test_acp_serve_answers_a_damaged_or_missing_store_with_a_protocol_error(
    tmp_path: Path,
) -> None:
    damaged = tmp_path / "damaged.jsonl"
    lines = COMPACTION.read_bytes().split(b"\n")
    lines[3] = b"{not json"
    damaged.write_bytes(b"\n".join(lines))
    sqlite = tmp_path / "sessions.db"
    store = SqliteStore(sqlite)
    header, prefix, balanced = _stored(CRASH)
    store.create(header)
    store.append(header.id, prefix)
    store.close()

    async def script(conn: Any, received: list[dict[str, Any]]) -> Any:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        try:
            await conn.load_session(cwd="/", session_id="compaction-demo", mcp_servers=[])
        except RequestError as exc:
            return exc.code, str(exc)
        return None

    code, message = asyncio.run(_serve(str(damaged), script))
    assert code == CANNOT_READ and "CorruptLog" in message

    async def missing(conn: Any, received: list[dict[str, Any]]) -> Any:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        codes = []
        for _ in range(2):
            try:
                await conn.list_sessions()
                codes.append(None)
            except RequestError as exc:
                codes.append(exc.code)
        return codes

    assert asyncio.run(_serve(str(tmp_path / "nowhere" / "x.jsonl"), missing)) == [
        NOT_FOUND,
        NOT_FOUND,
    ]

    async def from_sqlite(conn: Any, received: list[dict[str, Any]]) -> Any:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        await conn.load_session(cwd="/", session_id=header.id, mcp_servers=[])
        await asyncio.sleep(0.05)
        return list(received)

    assert asyncio.run(_serve(str(sqlite), from_sqlite)) == list(
        acp_updates(balanced, session_id=header.id)
    )


@pytest.mark.slow
def test_export_prints_each_projection_of_the_balanced_log() -> None:
    command = _command()
    _header, _prefix, balanced = _stored(CRASH)
    for fmt, expected in (
        ("acp", list(acp_updates(balanced, session_id="crash-demo"))),
        ("openai", openai_request(balanced)),
        ("anthropic", anthropic_request(balanced)),
    ):
        done = _run(command, "export", str(CRASH), "--format", fmt)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == expected
    surface = _run(command, "export", str(COMPACTION), "--format", "acp", "--view", "surface")
    first = json.loads(surface.stdout)[0]["update"]
    assert first["sessionUpdate"] == "user_message_chunk"
    assert first["content"]["text"].startswith("Summary of earlier conversation")


@pytest.mark.slow
def test_export_exit_statuses(tmp_path: Path) -> None:
    command = _command()
    for fmt in ("openai", "anthropic"):  # --view was once ignored with a request body
        viewed = _run(command, "export", str(CRASH), "--format", fmt, "--view", "surface")
        assert viewed.returncode == 2 and viewed.stdout == ""
        assert f"--view applies to --format acp only, not {fmt}" in viewed.stderr
    missing = _run(command, "export", str(tmp_path / "none.jsonl"), "--format", "openai")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    headerless = tmp_path / "headerless.jsonl"
    headerless.write_text(
        '{"type":"session","version":0,"id":"h","createdAt":1,"delegationDepth":0}\n'
        '{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}\n'
    )
    done = _run(command, "export", str(headerless), "--format", "openai")
    assert done.returncode == 1 and "ProjectionError" in done.stderr
    bad = _run(command, "export", str(CRASH), "--format", "yaml")
    assert bad.returncode == 2
    database = tmp_path / "two.db"
    store = SqliteStore(database)
    for path in (COMPACTION, CRASH):
        header, prefix, _balanced = _stored(path)
        store.create(header)
        store.append(header.id, prefix)
    store.close()
    ambiguous = _run(command, "export", str(database), "--format", "openai")
    assert ambiguous.returncode == 2 and "--session" in ambiguous.stderr
    chosen = _run(command, "export", str(database), "--format", "openai", "--session", "crash-demo")
    assert json.loads(chosen.stdout) == openai_request(_stored(CRASH)[2])
