"""A store acknowledges only what its own loader loads (Decision 15), for every admission rule.

A batch of `Event`s may be made anywhere (`event_from_json`, `Event(...)`), so it may break a
rule `SessionLog.append` would have refused: a payload shape (R10-R12), a surface marker or
citation (R5-R7), a replace range or result rewrite that only the stored surface can judge
(R7f, R8, R9). Each was once fsynced by both stores and then refused by their loader, so the
session could no longer be opened or repaired. Every store now refuses such a batch with
the error admission raises, and writes nothing.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

from kernel import APPEND, Event, Replace, SessionLog, event_from_json
from kernel.errors import (
    EventShapeError,
    KernelError,
    MessageShapeError,
    ProvenanceError,
    ReplaceRangeError,
    RequestHeaderShapeError,
    ToolResultRewriteError,
)
from kernel.store import open_session
from kernel.store.jsonl import JsonlStore
from kernel.store.sqlite import SqliteStore
from properties.strategies import (
    REWRITE_FIELDS,
    MutationCase,
    RewriteCase,
    mutation_cases,
    rewrite_cases,
)

HEADER = {"version": 0, "id": "s", "createdAt": 1, "cwd": "/p"}
STORE_KINDS = ("jsonl", "zstd", "sqlite")


@contextmanager
def _store(kind: str, root: Path) -> Iterator[Any]:
    if kind == "sqlite":
        with SqliteStore(root / "s.db") as store:
            yield store
    else:
        yield JsonlStore(root / kind, zstd=kind == "zstd")


def _stored_bytes(root: Path) -> dict[str, bytes]:
    """Every stored file's bytes but SQLite's shared-memory index (`-shm`), which any
    transaction's reader marks touch and which holds no data."""
    return {
        str(p): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith("-shm")
    }


def _user(seq: int, text: str = "hi") -> Event:
    data = {
        "id": f"u{seq}",
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }
    return Event("user/message", seq, seq, data, APPEND)


def _stored(store: Any) -> list[Event]:
    """A turn with two user messages on the surface (seqs 1 and 2), stored."""
    store.create(HEADER)
    events = [Event("turn/start", 0, 0, {"turn": 1}), _user(1), _user(2)]
    store.append("s", events)
    return events


# -- the cases once acknowledged and then refused on load ----------------------------------------


BAD_NEXT: dict[str, tuple[type[KernelError], str, Event]] = {
    "R12 a turn that is not a number": (
        EventShapeError,
        r"\(R12\)",
        event_from_json({"type": "turn/end", "seq": 3, "time": 3, "data": {"turn": "x"}}),
    ),
    "R10 user content that is a string": (
        MessageShapeError,
        r"\(R10",
        Event(
            "user/message",
            3,
            3,
            {"id": "u", "role": "user", "content": "hi", "source": {"kind": "user"}},
            APPEND,
        ),
    ),
    "R11a a request header without a provider": (
        RequestHeaderShapeError,
        r"\(R11a\)",
        Event("request/header", 3, 3, {"header": {"config": {"model": "m"}}, "reason": "initial"}),
    ),
    "R7e a citation of a later seq": (
        ProvenanceError,
        r"\(R7e\)",
        Event("user/message", 3, 3, _user(3).data, APPEND, (5,)),
    ),
    "R8 a replace start that is not on the surface": (
        ReplaceRangeError,
        r"replace start seq 0 not found in surface \(R8\)",
        Event("user/message", 3, 3, _user(3, "summary").data, Replace(0, 2), (1, 2)),
    ),
    "R8 a reversed range": (
        ReplaceRangeError,
        r"start 2 is after end 1 .*\(R8\)",
        Event("user/message", 3, 3, _user(3, "summary").data, Replace(2, 1), (1, 2)),
    ),
    "R7f a replace that does not cite what it shadows": (
        ProvenanceError,
        r"\(R7f\)",
        Event("user/message", 3, 3, _user(3, "summary").data, Replace(1, 2), (1,)),
    ),
}


@pytest.mark.parametrize("kind", STORE_KINDS)
@pytest.mark.parametrize("case", sorted(BAD_NEXT))
def test_no_store_acknowledges_what_its_loader_refuses(
    tmp_path: Path, kind: str, case: str
) -> None:
    error, message, event = BAD_NEXT[case]
    with _store(kind, tmp_path) as store:
        _stored(store)
        before = _stored_bytes(tmp_path)
        with pytest.raises(error, match=message) as caught:
            store.append("s", [event])
        assert caught.value.index == 0
        assert _stored_bytes(tmp_path) == before
        assert len(store.inspect("s").events) == 4  # the three stored events and a turn/end


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_replace_is_judged_against_the_stored_surface_and_the_batch_before_it(
    tmp_path: Path, kind: str
) -> None:
    summary = _user(4, "summary").data
    with _store(kind, tmp_path) as store:
        _stored(store)
        # Seq 3 joins the surface in the same batch: the replace may end on it.
        store.append(
            "s", [_user(3), Event("user/message", 4, 4, summary, Replace(1, 3), (1, 2, 3))]
        )
        with pytest.raises(ReplaceRangeError, match=r"replace start seq 2 not found") as caught:
            store.append("s", [_user(5), Event("user/message", 6, 6, summary, Replace(2, 5), (2,))])
        assert caught.value.index == 1
        log = SessionLog.restore(store.inspect("s").events)
        assert log.surface.nodes == (4,)


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_replace_in_the_first_batch_is_judged_against_the_batch(
    tmp_path: Path, kind: str
) -> None:
    with _store(kind, tmp_path) as store:
        store.create(HEADER)
        batch = [Event("turn/start", 0, 0, {"turn": 1}), _user(1)]
        bad = Event("user/message", 2, 2, _user(2).data, Replace(0, 1), (1,))
        with pytest.raises(ReplaceRangeError, match=r"\(R8\)"):
            store.append("s", [*batch, bad])
        assert store.list() == ()  # nothing was materialized
        good = Event("user/message", 2, 2, _user(2).data, Replace(1, 1), (1,))
        store.append("s", [*batch, good])
        assert SessionLog.restore(store.inspect("s").events).surface.nodes == (2,)


# -- every single-rule mutation of the kit -------------------------------------------------------


@given(case=mutation_cases())
def test_every_store_refuses_each_mutation_with_admissions_error(case: MutationCase) -> None:
    try:
        candidate = event_from_json(case.mutation.event)
    except KernelError as exc:  # the store never receives it: R1-R3 refuse the value itself
        assert type(exc).__name__ == case.mutation.error
        return
    prefix = [event_from_json(wire) for wire in case.prefix]
    for kind in STORE_KINDS:
        with tempfile.TemporaryDirectory() as name, _store(kind, Path(name)) as store:
            root = Path(name)
            store.create(HEADER)
            if prefix:
                store.append("s", prefix)
            before = _stored_bytes(root)
            with pytest.raises(KernelError) as caught:
                store.append("s", [candidate])
            assert type(caught.value).__name__ == case.mutation.error, (kind, caught.value)
            assert _stored_bytes(root) == before
            if case.valid_next is not None:
                store.append("s", [event_from_json(case.valid_next)])  # the real next event
            if prefix or case.valid_next is not None:
                store.inspect("s")


@given(case=rewrite_cases())
def test_every_store_judges_a_result_rewrite_as_admission_does(case: RewriteCase) -> None:
    # R9 reads the shadowed result itself, which only the stored log holds.
    stored = [event_from_json(wire) for wire in case.prefix]
    rewrite = event_from_json(case.event())
    for kind in STORE_KINDS:
        with tempfile.TemporaryDirectory() as name, _store(kind, Path(name)) as store:
            store.create(HEADER)
            store.append("s", stored)
            if case.change is None:  # a rewrite of the content alone is admitted
                store.append("s", [rewrite])
                assert store.inspect("s").events[len(stored)] == rewrite
                continue
            before = _stored_bytes(Path(name))
            with pytest.raises(KernelError) as caught:
                store.append("s", [rewrite])
            assert type(caught.value).__name__ == REWRITE_FIELDS[case.change], (kind, caught.value)
            assert _stored_bytes(Path(name)) == before


_TOOL_STEP: tuple[dict[str, Any], ...] = (
    {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
    {"type": "step/start", "seq": 1, "time": 2, "data": {"turn": 1, "step": 1}},
    {
        "type": "assistant/message",
        "seq": 2,
        "time": 3,
        "data": {
            "turn": 1,
            "step": 1,
            "message": {
                "id": "a2",
                "role": "assistant",
                "content": [{"type": "tool-call", "id": "c1", "name": "ls", "arguments": "{}"}],
                "source": {"kind": "model", "provider": "deepseek", "model": "deepseek-chat"},
            },
        },
        "surfaceOp": "append",
    },
    {
        "type": "tool/call",
        "seq": 3,
        "time": 4,
        "data": {"turn": 1, "step": 1, "callId": "c1", "name": "ls", "arguments": "{}"},
    },
    {
        "type": "tool/result",
        "seq": 4,
        "time": 5,
        "data": {
            "turn": 1,
            "step": 1,
            "message": {
                "id": "r4",
                "role": "user",
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": "c1",
                        "content": [{"type": "text", "text": "a b"}],
                        "isError": False,
                    }
                ],
                "source": {"kind": "tool", "callId": "c1"},
            },
        },
        "sourceEventSeqs": [3],
        "surfaceOp": "append",
    },
)


@pytest.mark.parametrize("kind", STORE_KINDS)
@pytest.mark.parametrize("change", ["callId", "message.id", None])
def test_a_rewrite_of_a_stored_result_changes_only_its_content(
    tmp_path: Path, kind: str, change: str | None
) -> None:
    rewrite = event_from_json(RewriteCase(_TOOL_STEP, 4, change).event())
    with _store(kind, tmp_path) as store:
        store.create(HEADER)
        store.append("s", [event_from_json(wire) for wire in _TOOL_STEP])
        if change is None:
            store.append("s", [rewrite])
            assert SessionLog.restore(store.inspect("s").events).surface.nodes == (2, 5)
        else:
            with pytest.raises(ToolResultRewriteError, match=r"\(R9\)"):
                store.append("s", [rewrite])


# -- a live session's replacements are planned by its log ---------------------------------------


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_live_sessions_replace_is_not_judged_again_from_the_stored_log(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _store(kind, tmp_path) as store:
        _stored(store)
        session = open_session(store, "s", now=10)
        monkeypatch.setattr(type(store), "_stored_events", _never_read)
        session.append("user/message", _user(0).data, time=11, surface_op=APPEND)
        session.append(
            "user/message",
            _user(0, "summary").data,
            time=12,
            surface_op=Replace(1, 2),
            source_event_seqs=(1, 2),
        )
        monkeypatch.undo()
        assert SessionLog.restore(store.inspect("s").events).surface.nodes == (6, 5)
        with pytest.raises(ReplaceRangeError):  # a plain append of the same is judged
            store.append("s", [Event("user/message", 7, 13, _user(0).data, Replace(1, 2), (1, 2))])


def _never_read(*args: Any) -> Any:
    raise AssertionError("the stored log was read to judge a live session's replace")


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_loaded_payload_is_trusted_only_for_the_type_it_was_checked_as(
    tmp_path: Path, kind: str
) -> None:
    import msgspec

    from kernel import load_jsonl, write_jsonl

    source = SessionLog.empty().append("turn/start", {"turn": 1}, time=0)
    loaded = load_jsonl(write_jsonl(HEADER, source.events), now=0).events
    with _store(kind, tmp_path) as store:
        store.create(HEADER)
        retyped = msgspec.structs.replace(loaded[0], type="turn/end")  # {"turn": 1}, no reason
        with pytest.raises(EventShapeError, match=r"turn/end .*\(R12\)"):
            store.append("s", [retyped])
        store.append("s", [loaded[0]])
        assert store.inspect("s").events[0] == loaded[0]
