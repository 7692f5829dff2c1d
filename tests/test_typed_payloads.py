"""`mypy --strict` rejects a misspelled core event type or payload key, and passes good spelling.

Three small modules are type-checked in one `mypy.api.run` against this checkout: each
misspelling must be reported on its own line with the error code expected, and the
correctly spelled module must be clean.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

ROOT = Path(__file__).resolve().parent.parent

PRELUDE = """\
from kernel import APPEND, SessionLog
from kernel.values.builders import tool_call, turn_start, user_message
from kernel.values.payloads import ToolCallData

log = SessionLog.empty()
prompt = user_message(id="u1", content="hi")
good_call: ToolCallData = {"turn": 1, "step": 1, "callId": "c1", "name": "ls", "arguments": ""}
"""
"""Each module's first lines; its checked lines follow, numbered from 1 after these."""

GOOD = """\
log.append("turn/start", turn_start(turn=1), time=0)
log.append("user/message", prompt, time=1, surface_op=APPEND)
log.append("tool/call", {"turn": 1, "step": 1, "callId": "c", "name": "", "arguments": ""}, time=2)
log.append("tool/call", good_call, time=2)
log.append("session/title", {"title": "any JSON"}, time=3)
log.append("x-app/note", {"any": "JSON"}, time=4, ignorable=True)
"""

BAD_TYPE = """\
log.append("user/mesage", prompt, time=1, surface_op=APPEND)
log.append("turn/strat", turn_start(turn=1), time=0)
"""

BAD_KEY = """\
log.append("tool/call", {"turn": 1, "step": 1, "callid": "c", "name": "", "arguments": ""}, time=2)
data: ToolCallData = {"turn": 1, "step": 1, "callid": "c1", "name": "ls", "arguments": ""}
call = tool_call(turn=1, step=1, callid="c1", name="ls", arguments="")
log.append("user/message", prompt, time=1)
"""

BAD_LIVE = """\
from kernel.store import LiveSession
def use(session: LiveSession) -> None:
    session.append("turn/strat", turn_start(turn=1), time=0)
    session.append("tool/call", {"turn": 1, "step": 1, "callid": "", "name": ""}, time=2)
    session.append("turn/start", turn_start(turn=1), time=0)
"""

NO_VARIANT = 'No overload variant of "append" of "SessionLog" matches'
NO_LIVE_VARIANT = 'No overload variant of "append" of "LiveSession" matches'

EXPECTED: dict[str, list[tuple[int, str, str]]] = {
    "good.py": [],
    "bad_type.py": [(1, "call-overload", NO_VARIANT), (2, "call-overload", NO_VARIANT)],
    "bad_key.py": [
        (1, "call-overload", NO_VARIANT),
        (2, "typeddict-item", 'Missing key "callId" for TypedDict "ToolCallData"'),
        (2, "typeddict-unknown-key", 'Extra key "callid" for TypedDict "ToolCallData"'),
        (3, "call-arg", 'Unexpected keyword argument "callid" for "tool_call"'),
        (4, "call-overload", NO_VARIANT),  # a surface type without surface_op
    ],
    "bad_live.py": [(3, "call-overload", NO_LIVE_VARIANT), (4, "call-overload", NO_LIVE_VARIANT)],
}
"""Per module: (line after the prelude, error code, message prefix) of every error, in order."""


@pytest.mark.slow
def test_mypy_strict_rejects_misspelled_event_types_and_payload_keys(tmp_path: Path) -> None:
    for name, body in (
        ("good.py", GOOD),
        ("bad_type.py", BAD_TYPE),
        ("bad_key.py", BAD_KEY),
        ("bad_live.py", BAD_LIVE),
    ):
        (tmp_path / name).write_text(PRELUDE + body)
    config = tmp_path / "mypy.ini"
    config.write_text(f"[mypy]\nmypy_path = {ROOT}\n")
    # mypy raises the interpreter's recursion limit for good; put it back so that no
    # later test in this process runs under another limit.
    limit = sys.getrecursionlimit()
    try:
        stdout, stderr, _status = mypy_api.run(
            [
                "--strict",
                "--config-file",
                str(config),
                "--cache-dir",
                str(tmp_path / "cache"),
                "--no-error-summary",
                "--hide-error-context",
                "--show-error-codes",
                *(str(tmp_path / name) for name in EXPECTED),
            ]
        )
    finally:
        sys.setrecursionlimit(limit)
    assert stderr == ""
    errors = re.findall(r"^(.*?\.py):(\d+): error: (.*)  \[([\w-]+)\]$", stdout, re.MULTILINE)
    offset = PRELUDE.count("\n")
    found: dict[str, list[tuple[int, str, str]]] = {name: [] for name in EXPECTED}
    for path, line, message, code in errors:
        found.setdefault(Path(path).name, []).append((int(line) - offset, code, message))
    for name, expected in EXPECTED.items():
        got = found[name]
        assert [(line, code) for line, code, _ in got] == [
            (line, code) for line, code, _ in expected
        ], f"{name}:\n{stdout}"
        for (_, _, message), (_, _, prefix) in zip(got, expected, strict=True):
            assert message.startswith(prefix), f"{name}:\n{stdout}"
