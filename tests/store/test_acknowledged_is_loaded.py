"""Nothing acknowledged is lost: every store loads every event it acknowledged (Decision 15).

A generated log is driven through a store the way a runtime drives it: batches appended,
the writer killed between batches or in the middle of one (the partial write left on disk,
as a SIGKILL leaves it), the store reopened, the session loaded (repairing it), restored as
a live `SessionLog` and continued, and reseeded. Whatever happens, a final load holds every
event any `append` acknowledged, in order, and a second load finds nothing to repair.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kernel.store.files as files_module
from kernel import Event, SessionLog
from kernel.store import JsonlStore, SqliteStore
from kernel.values.json import json_equal, thaw
from properties import strategies as gen
from properties.strategies import LoopLog

HEADER = {"version": 0, "id": "s", "createdAt": 1}
KINDS = ("jsonl", "jsonl.zstd", "sqlite")


class _Killed(BaseException):
    """The writer process dying: no `except Exception` of the store sees it."""


def _open(kind: str, root: Path) -> Any:
    if kind == "sqlite":
        return SqliteStore(root / "s.db")
    return JsonlStore(root / "store", zstd=kind == "jsonl.zstd")


@contextmanager
def _killed_mid_append(kind: str, keep: int) -> Iterator[None]:
    """The next append dies after writing `keep` bytes of its batch (JSONL), or before its
    COMMIT (SQLite, which then rolls the transaction back as a crash would)."""
    if kind == "sqlite":
        real_bump = SqliteStore._bump_revision

        def die(self: SqliteStore, session_id: str) -> None:
            raise _Killed

        SqliteStore._bump_revision = die  # type: ignore[method-assign]
        try:
            yield
        finally:
            SqliteStore._bump_revision = real_bump  # type: ignore[method-assign]
        return
    real_write = files_module.write_all

    def write_part(fd: int, data: bytes) -> None:
        real_write(fd, data[: min(keep, len(data) - 1)])
        raise _Killed

    files_module.write_all = write_part
    try:
        yield
    finally:
        files_module.write_all = real_write


def _same(a: tuple[Event, ...], b: tuple[Event, ...]) -> bool:
    return len(a) == len(b) and all(
        x.type == y.type and x.seq == y.seq and json_equal(thaw(x.data), thaw(y.data))
        for x, y in zip(a, b, strict=True)
    )


def _batches(events: tuple[Event, ...], sizes: list[int]) -> list[tuple[Event, ...]]:
    out, start = [], 0
    for size in sizes:
        if start >= len(events):
            break
        out.append(events[start : start + size])
        start += size
    if start < len(events):
        out.append(events[start:])
    return out


_ACTIONS = st.sampled_from(["append", "append", "append", "reopen", "kill", "reseed"])


@pytest.mark.slow
@given(
    log=gen.loop_logs(max_actions=4, shape="any"),
    kind=st.sampled_from(KINDS),
    sizes=st.lists(st.integers(1, 6), max_size=12),
    actions=st.lists(_ACTIONS, min_size=1, max_size=12),
    keep=st.integers(0, 400),
)
def test_every_acknowledged_event_is_loaded_after_any_crash(
    log: LoopLog, kind: str, sizes: list[int], actions: list[str], keep: int
) -> None:
    events = SessionLog.restore(log.events).events
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = _open(kind, root)
        store.create(HEADER)
        acknowledged: tuple[Event, ...] = ()
        pending = _batches(tuple(events), sizes)
        live: SessionLog | None = None  # set once a load has repaired the session
        for action in actions:
            if not pending and live is None:
                break
            if action == "reopen":
                store = _reopen(store, kind, root)
                if not acknowledged:
                    store.create(HEADER)  # a created session lives in memory until its append
                continue
            if action == "reseed" and acknowledged:
                loaded = store.load("s", now=10**12)
                acknowledged = loaded.events
                marked = SessionLog.seed(loaded.events, now=10**12)
                store.append("s", marked.events[len(loaded.events) :])
                acknowledged = marked.events
                live, pending = marked, []
                continue
            batch = _next_batch(live, pending)
            if batch is None:
                continue
            if action == "kill":
                with _killed_mid_append(kind, keep), pytest.raises(_Killed):
                    store.append("s", batch)
                store = _reopen(store, kind, root)
                if not acknowledged:
                    break  # the session was never materialized: nothing to load
                loaded = store.load("s", now=10**12)  # repairs the torn tail, closes the turn
                assert _same(loaded.events[: len(acknowledged)], acknowledged)
                acknowledged = loaded.events
                live, pending = SessionLog.restore(loaded.events), []
                continue
            store.append("s", batch)
            acknowledged = (*acknowledged, *batch)
            if live is not None:
                live = SessionLog.restore(acknowledged)
        store = _reopen(store, kind, root)
        if acknowledged:
            final = store.load("s", now=10**12)
            assert _same(final.events[: len(acknowledged)], acknowledged)
            again = store.load("s", now=10**12)
            assert not again.repair.needed
            assert _same(again.events, final.events)
        _close(store)


def _next_batch(
    live: SessionLog | None, pending: list[tuple[Event, ...]]
) -> tuple[Event, ...] | None:
    """The next batch: the generated log's, or, once the session was repaired, a new turn."""
    if live is None:
        return pending.pop(0) if pending else None
    turn = 1 + sum(1 for e in live.events if e.type == "turn/start")
    grown = live.append("turn/start", {"turn": turn}, time=10**12)
    grown = grown.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}}, time=10**12)
    return tuple(grown.events[len(live.events) :])


def _reopen(store: Any, kind: str, root: Path) -> Any:
    _close(store)
    return _open(kind, root)


def _close(store: Any) -> None:
    close: Callable[[], None] | None = getattr(store, "close", None)
    if close is not None:
        close()
