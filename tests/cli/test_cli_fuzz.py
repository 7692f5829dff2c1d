"""Fuzzing the `session-kernel` command with hostile files: only a clean exit comes out.

Every generated file (random bytes; valid JSONL and Zstandard logs that are cut,
flipped, spliced, or given control characters, lone surrogates, deep JSON and
huge numbers; SQLite look-alikes) goes through `inspect`, `inspect --json`,
`verify` (beside a dangling link, a FIFO, a hidden directory and an unreadable
log), `repair --dry-run --json` and `repair`, in-process through `main`. Each
run must end in a documented exit status, with no traceback and no raw control
character on stdout or stderr. Bounded and derandomized under the `ci` profile.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cli import (
    CONTROLS,
    TORN_RECORD,
    clean_log,
    compaction_log,
    crash_log,
    header,
    raw_controls,
)

from kernel.cli import main
from kernel.storage.jsonl import write_jsonl
from kernel.storage.zstd import encode_zstd_frame

EXIT_STATUSES = frozenset({0, 1, 2, 3, 4})
"""The documented exit statuses but 130 (nothing here is interrupted)."""

SQLITE_MAGIC = b"SQLite format 3\x00"

BASE_LOGS: tuple[bytes, ...] = (
    write_jsonl(header("clean"), clean_log().events),
    write_jsonl(header("compact"), compaction_log()[0].events),
    write_jsonl(header("crash"), crash_log().events) + TORN_RECORD,
)
"""Valid logs (the last one crashed mid-turn, with a torn tail) for the mutations to damage."""

HOSTILE_PIECES = (
    "\x1b]0;PWNED\x07",
    "\x1b]0;PWNED\x1b\\",
    "\x1b[2J\x1b[H",
    "\x9b31m",
    "\x00",
    "\r",
    "\x7f",
    "\x08",
    "\ud800",
    "\udcff",
    "[bold]",
    "[/]",
    "\u202e",
    "\n",
    "\t",
)

RAW_NUMBERS = (
    "1e999",
    "-1e999",
    "-0",
    "9007199254740993",
    "1" + "0" * 400,
    "0.1e-400",
    "18446744073709551616",
    "-18446744073709551617",
)

hostile_text = st.lists(
    st.one_of(st.sampled_from(HOSTILE_PIECES), st.characters(exclude_categories=())),
    max_size=12,
).map("".join)
"""Strings with terminal escapes, C0/C1 controls, lone surrogates and rich markup."""


# -- hostile files -------------------------------------------------------------------------------


def _string_paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every string (and every number) leaf of a JSON value."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _string_paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _string_paths(item, (*path, index))
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
        yield path


def _parsed(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None


def _put(value: Any, path: tuple[Any, ...], leaf: Any) -> None:
    for step in path[:-1]:
        value = value[step]
    value[path[-1]] = leaf


@st.composite
def substituted_jsonl(draw: st.DrawFn, *, text_only: bool = False) -> bytes:
    """A valid log whose string and number leaves are partly replaced by hostile values:
    control characters, surrogates, huge or non-finite numbers, deeply nested arrays.

    With `text_only` (and otherwise half the time) the leaf is free text (message
    text, cwd, model, tool description): the log stays admissible, and its hostile
    text reaches the tables."""
    lines = [_parsed(line) for line in draw(st.sampled_from(BASE_LOGS)).splitlines()]
    lines = [line for line in lines if isinstance(line, dict)]  # not the torn record
    raw: dict[str, str] = {}
    for _ in range(draw(st.integers(1, 4))):
        index = draw(st.integers(0, len(lines) - 1))
        leaves = list(_string_paths(lines[index]))
        if not leaves:
            continue
        texts = [leaf for leaf in leaves if leaf[-1] in ("text", "cwd", "model", "description")]
        if text_only and not texts:
            continue
        where = draw(
            st.sampled_from(texts if texts and (text_only or draw(st.booleans())) else leaves)
        )
        kind = "text" if where in texts else draw(st.sampled_from(("text", "number", "deep")))
        if kind == "text":
            _put(lines[index], where, draw(hostile_text))
            continue
        token = f"@@raw{len(raw)}@@"
        if kind == "number":
            raw[token] = draw(st.sampled_from(RAW_NUMBERS))
        else:
            depth = draw(st.sampled_from((3, 200, 1100, 20_000)))
            raw[token] = "[" * depth + "]" * depth
        _put(lines[index], where, token)
    text = "".join(json.dumps(line, ensure_ascii=draw(st.booleans())) + "\n" for line in lines)
    for token, spelled in raw.items():
        text = text.replace(f'"{token}"', spelled)
    return text.encode("utf-8", "surrogatepass")


@st.composite
def damaged(draw: st.DrawFn, data: bytes) -> bytes:
    """`data` cut short, with bytes flipped or inserted, or lines dropped or repeated."""
    for _ in range(draw(st.integers(0, 3))):
        if not data:
            break
        at = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(("cut", "flip", "insert", "drop-line", "repeat-line")))
        if action == "cut":
            data = data[:at]
        elif action == "flip" and at < len(data):
            data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
        elif action == "insert":
            data = data[:at] + draw(st.binary(min_size=1, max_size=16)) + data[at:]
        else:
            lines = data.split(b"\n")
            line = draw(st.integers(0, len(lines) - 1))
            if action == "drop-line":
                del lines[line]
            else:
                lines.insert(line, lines[line])
            data = b"\n".join(lines)
    return data


@st.composite
def zstd_of(draw: st.DrawFn, data: bytes) -> bytes:
    """`data` as Zstandard frames (split at a random point), then possibly damaged."""
    cut = draw(st.integers(0, len(data)))
    framed = b"".join(encode_zstd_frame(part) for part in (data[:cut], data[cut:]) if part)
    return draw(damaged(framed))


@st.composite
def hostile_file(draw: st.DrawFn) -> tuple[str, bytes]:
    """A file name and the bytes of a hostile log."""
    source = draw(st.sampled_from(("random", "jsonl", "zstd", "sqlite", "hostile-text")))
    if source == "random":
        name = draw(st.sampled_from(("log.jsonl", "log.jsonl.zstd", "log")))
        return name, draw(st.binary(max_size=512))
    if source == "sqlite":
        return "log.db", SQLITE_MAGIC + draw(st.binary(max_size=512))
    if source == "hostile-text":
        return "log.jsonl", draw(substituted_jsonl(text_only=True))
    plain = draw(st.one_of(st.sampled_from(BASE_LOGS), substituted_jsonl()))
    if source == "jsonl":
        return draw(st.sampled_from(("log.jsonl", "log"))), draw(damaged(plain))
    return draw(st.sampled_from(("log.jsonl.zstd", "log.jsonl"))), draw(zstd_of(plain))


# -- running the command -------------------------------------------------------------------------


class Blocked(BaseException):
    """A run outlived its alarm (a FIFO read blocks forever); not an `Exception`, so
    `main` cannot turn it into an exit status."""


def _blocked(signum: int, frame: Any) -> None:
    raise Blocked("the command blocked for 20 s")


def run_cli(*args: str | Path) -> tuple[int, str, str]:
    """One in-process run of `main`, stdout and stderr encoded as the interpreter's are."""
    out, err = io.BytesIO(), io.BytesIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    stderr = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", write_through=True)
    previous = signal.signal(signal.SIGALRM, _blocked)
    signal.alarm(20)
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = main([str(arg) for arg in args])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    stdout.flush()
    stderr.flush()
    return code, out.getvalue().decode("utf-8"), err.getvalue().decode("utf-8")


def check_run(args: tuple[str | Path, ...], code: int, out: str, err: str) -> None:
    """The laws of every run: a documented status, no traceback, nothing raw for a terminal."""
    shown = (
        f"session-kernel {' '.join(map(str, args))}\nexit {code}\nstdout:\n{out}\nstderr:\n{err}"
    )
    assert code in EXIT_STATUSES, f"undocumented exit status\n{shown}"
    assert "Traceback" not in err, f"a traceback\n{shown}"
    assert raw_controls(out) == set(), f"raw control characters on stdout\n{shown}"
    assert raw_controls(err) == set(), f"raw control characters on stderr\n{shown}"
    if args[0] != "verify":  # one line naming the log, or nothing
        assert err == "" if code == 0 else len(err.splitlines()) == 1, f"not one line\n{shown}"
    if "--json" in args and (code == 0 or args[0] == "verify"):
        json.loads(out)


@contextlib.contextmanager
def hostile_environment(locked: Path) -> Iterator[None]:
    """No forced colour, and `locked` unreadable: opening it raises PermissionError.

    Simulated by patching `os.open` and `io.open`, because the tests may run
    as root, whom `chmod 000` does not stop.
    """
    real_open, real_io_open = os.open, io.open

    def refuse(target: Any) -> None:
        if isinstance(target, (str, os.PathLike)) and os.fspath(target) == str(locked):
            raise PermissionError(errno.EACCES, "Permission denied", str(locked))

    def os_open(path: Any, *args: Any, **kwargs: Any) -> int:
        refuse(path)
        return real_open(path, *args, **kwargs)

    def io_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        refuse(file)
        return real_io_open(file, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
            patch.delenv(name, raising=False)
        patch.setenv("COLUMNS", "100")
        patch.setattr(os, "open", os_open)
        patch.setattr(io, "open", io_open)
        yield


def hostile_tree(root: Path, name: str, data: bytes) -> tuple[Path, Path]:
    """`root/logs/` holding the file, a dangling link, a FIFO, a hidden directory and a
    copy of the file to be made unreadable; returns the file and that copy."""
    logs = root / "logs"
    (logs / ".cache").mkdir(parents=True)
    target = logs / name
    target.write_bytes(data)
    (logs / ".cache" / "hidden.jsonl").write_bytes(data)
    (logs / "gone.jsonl").symlink_to(root / "nowhere.jsonl")
    os.mkfifo(logs / "pipe.jsonl")
    locked = logs / "locked.jsonl"
    locked.write_bytes(data)
    return target, locked


COMMANDS: tuple[Callable[[Path, Path], tuple[str | Path, ...]], ...] = (
    lambda log, _: ("inspect", log),
    lambda log, _: ("inspect", "--json", log),
    lambda _, logs: ("verify", logs),
    lambda _, logs: ("verify", "--json", "--hidden", logs),
    lambda log, _: ("repair", "--dry-run", "--json", log),
    lambda log, _: ("repair", log),
    lambda log, _: ("inspect", log),
)
"""Run in this order on each file: the last `inspect` sees what `repair` left."""


FUZZ_SETTINGS = settings(max_examples=4 * (settings.default or settings()).max_examples)
"""Four times the profile's examples: a run costs milliseconds (about 5 s in all under `ci`)."""


@pytest.mark.slow
@FUZZ_SETTINGS
@given(hostile_file())
def test_cli_on_hostile_files_exits_cleanly(file: tuple[str, bytes]) -> None:
    name, data = file
    with tempfile.TemporaryDirectory() as scratch:
        log, locked = hostile_tree(Path(scratch), name, data)
        with hostile_environment(locked):
            for command in COMMANDS:
                args = command(log, log.parent)
                check_run(args, *run_cli(*args))
            for args in (
                ("inspect", locked),
                ("verify", "--json", locked, log.parent / "pipe.jsonl"),
            ):
                check_run(args, *run_cli(*args))


def test_fuzz_laws_see_raw_controls() -> None:
    # The law's own check: it would notice an escape sequence, and not newline or tab.
    assert raw_controls("a\x1b[2Jb") == {"\x1b"}
    assert raw_controls("table\n\tcell") == set()
    assert {"\x00", "\x7f", "\x9b"} <= CONTROLS


@pytest.mark.slow
def test_real_entry_point_on_a_hostile_tree(tmp_path: Path) -> None:
    # A few cases through `python -m kernel.cli`, with the interpreter's own stdout and stderr.
    rng = random.Random(9)
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "noise.jsonl").write_bytes(rng.randbytes(300))
    (logs / "noise.jsonl.zstd").write_bytes(encode_zstd_frame(rng.randbytes(300))[:-5])
    (logs / os.fsdecode(b"name-\xff\x1b[2J.jsonl")).write_bytes(BASE_LOGS[2])
    escapes = BASE_LOGS[0].replace(b'"question 1"', b'"\\u001b]0;PWNED\\u0007\\u009b2J"')
    (logs / "escapes.jsonl").write_bytes(escapes)
    (logs / "gone.jsonl").symlink_to(tmp_path / "nowhere")
    os.mkfifo(logs / "pipe.jsonl")
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    for args in (
        ("verify", logs),
        ("verify", "--json", logs),
        ("inspect", logs / "escapes.jsonl"),
        ("inspect", logs / "pipe.jsonl"),
        ("repair", logs / "noise.jsonl"),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "kernel.cli", *map(str, args)],
            capture_output=True,
            timeout=60,
            env=env,
        )
        check_run(args, proc.returncode, proc.stdout.decode(), proc.stderr.decode())
