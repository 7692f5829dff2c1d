"""Reliability regressions: committed data is never lost, whatever it holds or where it is read.

Each test reproduces an item of the reliability audit and failed on the code before its fix.
"""

import inspect
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel.log import SessionLog
from kernel.storage.jsonl import load_jsonl, write_jsonl
from kernel.store.jsonl import JsonlStore
from kernel.store.sqlite import SqliteStore
from kernel.values.events import APPEND, Event
from kernel.values.json import freeze, summary
from kernel.wire.jsontext import parse_json, read_json_text

HEADER = {"version": 0, "id": "s", "createdAt": 1}


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"k": [value]}
    return value


def _beneath(frames: int, work: Callable[[], Any]) -> Any:
    """Run `work` with only about `frames` Python frames left before the recursion limit."""

    def down(n: int) -> Any:
        return work() if n <= 0 else down(n - 1)

    used = len(inspect.stack(0))
    return down(sys.getrecursionlimit() - used - frames)


def _deep_log(*, closed: bool) -> tuple[Event, ...]:
    message = {
        "id": "u1",
        "role": "user",
        "source": {"kind": "user"},
        "content": [{"type": "text", "text": "lone \ud800 half"}],
        "meta": _nested(3_000, "\udfff"),
    }
    log = SessionLog.empty().append("turn/start", {"turn": 1}, time=1)
    log = log.append("user/message", message, time=2, surface_op=APPEND)
    if closed:
        log = log.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}}, time=3)
    return tuple(log.events)


def _store(kind: str, root: Path) -> Any:
    if kind == "sqlite":
        return SqliteStore(root / "s.db")
    return JsonlStore(root, zstd=kind == "zstd")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["jsonl", "zstd", "sqlite"])
@pytest.mark.parametrize("closed", [False, True], ids=["open-turn", "closed-turn"])
def test_a_deep_payload_that_was_written_loads_back(
    kind: str, closed: bool, tmp_path: Path
) -> None:
    # An event nested past 1,000 levels was admitted and fsynced, then the reader's parser
    # refused it: in an open turn the next load called it a torn tail and repair deleted it;
    # before a turn/end the session became CorruptLog.
    events = _deep_log(closed=closed)
    store = _store(kind, tmp_path)
    try:
        store.create(HEADER)
        store.append("s", events)
        loaded = store.load("s", now=10)
        assert not loaded.repair.torn
        assert loaded.events[: len(events)] == events
        for frames in (200, 120):  # the same bytes load however deep the caller's stack is
            again = _beneath(frames, lambda: store.load("s", now=10))
            assert again.events == loaded.events
    finally:
        if kind == "sqlite":
            store.close()


def test_a_lone_surrogate_with_nesting_parses_at_any_call_stack_depth() -> None:
    # Related to deep payloads: with a lone-surrogate escape orjson refuses the line and the
    # stdlib parser recursed, so the same bytes parsed or failed by where `load` was called from.
    line = b'["\\ud800", ' + b"[" * 900 + b"]" * 900 + b"]"
    assert _beneath(60, lambda: parse_json(line))[0] == "\ud800"
    data = write_jsonl(HEADER, _deep_log(closed=True))
    assert len(_beneath(120, lambda: load_jsonl(data, now=0)).events) == 3


@pytest.mark.slow
def test_deep_frozen_values_compare_and_describe_without_recursion() -> None:
    a, b = freeze(_nested(5_000, 1)), freeze(_nested(5_000, 1))
    assert a == b and a is not b
    assert a != freeze(_nested(5_000, 2))
    assert repr(a).startswith("FrozenObject({'k': [{'k': [")
    assert len(summary(_nested(5_000, 1))) <= 121


def test_an_integer_literal_past_python_int_text_limit_reads_as_a_double() -> None:
    # Integers past the int-to-text limit, reader side: a 5,001-digit literal is a number
    # beyond any double (+inf, as `1e400` is), not a reason to call the record unparsable.
    assert parse_json(b"1" * 5_001) == math.inf
    assert parse_json(b"[-" + b"9" * 5_001 + b"]") == [-math.inf]
    line = b'{"type":"todo/write","seq":0,"time":1,"data":{"n":' + b"7" * 5_001 + b"}}\n"
    loaded = load_jsonl(write_jsonl(HEADER, ()) + line, now=0)
    assert not loaded.torn and loaded.events[0].data["n"] == math.inf


_JSONISH = st.text(alphabet='{}[],:"\\/ \t\n\r0123456789.eE+-tfnrulasbu\ud800\ufffd', max_size=40)


_DOCUMENTS = st.recursive(
    st.none() | st.booleans() | st.text() | st.integers() | st.floats(allow_nan=False),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
).map(json.dumps)


@pytest.mark.slow
@given(st.one_of(_JSONISH, _DOCUMENTS))
def test_the_exact_reader_agrees_with_the_standard_library(text: str) -> None:
    # read_json_text is the reader behind parse_json when orjson refuses a text; on every
    # text the standard library reads without constants it must give the same value.
    try:
        expected: Any = json.loads(text, parse_constant=_no_constants, parse_int=_as_js_int)
    except (ValueError, RecursionError):
        with pytest.raises(ValueError):
            read_json_text(text)
        return
    assert repr(read_json_text(text)) == repr(expected)


def _no_constants(token: str) -> Any:
    raise ValueError(token)


def _as_js_int(token: str) -> int | float:
    # Past 16 digits an integer is beyond 2**53 - 1: the exact reader reads it as a double.
    return float(token) if len(token.lstrip("-")) > 16 else int(token)


def test_thawing_a_cyclic_plain_value_is_refused_not_a_loop() -> None:
    # Found by the API audit: thaw's explicit stack followed a cycle forever.
    from kernel.errors import NotLosslessJson
    from kernel.values.json import thaw

    loop: dict[str, Any] = {"a": [1]}
    loop["a"].append(loop)
    with pytest.raises(NotLosslessJson, match="cycle"):
        thaw(loop)
    shared = [1, 2]
    assert thaw({"x": shared, "y": [shared, shared]}) == {"x": [1, 2], "y": [[1, 2], [1, 2]]}


def test_seed_joins_a_split_surrogate_pair_in_an_event_type_as_append_does() -> None:
    # A split pair is the character it encodes; seed and append store it joined.
    split, joined = "x/\ud83d\ude42", "x/\U0001f642"
    seeded = SessionLog.seed([Event(split, 0, 1, {}, ignorable=True)], now=2)
    appended = SessionLog.empty().append(split, {}, time=1, ignorable=True)
    assert seeded.events[0].type == appended.events[0].type == joined
