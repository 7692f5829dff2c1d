"""The surface and history after many replacements: right, and at a cost linear in the log.

Loading was once quadratic in surface replacements. These tests pin the slot
structure of docs/rfc/implemented/architecture/2026-12-01-linear-surface-and-history.md
against a plain list model after thousands of replacements, and count the work the
folds do (executed lines, not time) to show it grows with the log, not with the
number of replacements times the surface.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest
from pyrsistent import pvector

import kernel.folds.messages
import kernel.folds.surface
from kernel import APPEND, Event, Replace, SessionLog, derive_messages, fold_surface
from kernel.errors import ProvenanceError, ReplaceRangeError
from kernel.folds.surface import Replacement, SurfaceState, surface_state_of
from properties._model import messages_of, surface_of
from properties.laws._common import messages_plain, same_json

N = 2000


def user(seq: int, **surface_fields: Any) -> dict[str, Any]:
    data = {
        "id": f"u{seq}",
        "role": "user",
        "content": [{"type": "text", "text": f"message {seq}"}],
        "source": {"kind": "user"},
    }
    return {"type": "user/message", "seq": seq, "time": seq, "data": data, **surface_fields}


def empty_assistant(seq: int) -> dict[str, Any]:
    message = {
        "id": f"a{seq}",
        "role": "assistant",
        "content": [],
        "source": {"kind": "model", "provider": "p", "model": "m"},
    }
    data = {"turn": 1, "step": 1, "message": message}
    event = {"type": "assistant/message", "seq": seq, "time": seq, "data": data}
    return {**event, "surfaceOp": "append"}


def replacing(log: list[dict[str, Any]], nodes: list[int], i: int, j: int) -> None:
    """Append to `log` a user message replacing `nodes[i..j]`, and apply it to `nodes`."""
    seq = len(log)
    op = {"op": "replace", "start": nodes[i], "end": nodes[j]}
    log.append(user(seq, surfaceOp=op, sourceEventSeqs=nodes[i : j + 1]))
    nodes[i : j + 1] = [seq]


def many_replacements(n: int, shape: str) -> list[dict[str, Any]]:
    """`n` appends (every fifth an empty assistant message), then `n` replacements.

    `rewrite`: each original node by itself, front to back. `compact`: the first two
    nodes by one. `nested`: one more append, then everything from the first node to it,
    so each replace starts at a slot whose next slot is already empty. `random`: seeded
    ranges of one to five nodes anywhere.
    """
    log = [empty_assistant(s) if s % 5 == 4 else user(s, surfaceOp="append") for s in range(n)]
    nodes = list(range(n))
    rng = random.Random(n)
    for k in range(n):
        if shape == "rewrite":
            replacing(log, nodes, k, k)
        elif shape == "compact" and len(nodes) > 1:
            replacing(log, nodes, 0, 1)
        elif shape == "nested":
            log.append(user(len(log), surfaceOp="append"))
            nodes.append(len(log) - 1)
            replacing(log, nodes, 0, len(nodes) - 1)
        elif shape == "random":
            i = rng.randrange(len(nodes))
            replacing(log, nodes, i, min(len(nodes) - 1, i + rng.randrange(5)))
    return log


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["rewrite", "compact", "nested", "random"])
def test_many_replacements_match_a_list_model(shape: str) -> None:
    wire = many_replacements(N, shape)
    model = surface_of(wire)
    expected = messages_of(wire)
    restored = SessionLog.restore(wire)
    assert list(restored.surface.nodes) == model.nodes
    assert restored.surface.replace_generation == model.generation > N // 2
    assert len(restored.messages) == len(expected)
    assert same_json(messages_plain(restored.messages), expected)
    fold = fold_surface(restored.events)
    assert list(fold.nodes) == model.nodes
    # the complete pass reaches the very state restore's admission pass does, and does
    # when events the surface does not take come last
    assert surface_state_of(restored.events) == restored.surface
    wire.append({"type": "turn/start", "seq": len(wire), "time": 0, "data": {"turn": 1}})
    restored = SessionLog.restore(wire)
    assert surface_state_of(restored.events) == restored.surface
    assert [(r.seq, r.start, r.end, r.shadowed_seqs) for r in fold.replacements] == [
        (seq, start, end, tuple(shadowed)) for seq, start, end, shadowed in model.replacements
    ]
    assert same_json(messages_plain(derive_messages(restored.events)), expected)


def test_live_appends_and_reads_agree_with_restore() -> None:
    """Appending one by one, reading the folds now and then, ends where restore does."""
    wire = many_replacements(300, "random")
    log = SessionLog.empty()
    for k, event in enumerate(wire):
        log = log.append(
            event["type"],
            event["data"],
            time=event["time"],
            surface_op=event.get("surfaceOp"),
            source_event_seqs=event.get("sourceEventSeqs"),
        )
        if k % 7 == 0:
            assert list(log.surface.nodes) == surface_of(wire[: k + 1]).nodes
            assert same_json(messages_plain(log.messages), messages_of(wire[: k + 1]))
    restored = SessionLog.restore(wire)
    assert list(log.surface.nodes) == list(restored.surface.nodes)
    assert log.messages == restored.messages


def test_r8_seqs_off_the_surface_after_slot_reuse() -> None:
    """A replace writes its seq into its start node's slot: the old start, the other shadowed
    nodes, non-surface events and unknown seqs are all not found (R8)."""
    log = SessionLog.empty()
    for seq in range(3):
        log = log.append("user/message", user(seq)["data"], time=seq, surface_op=APPEND)
    log = log.append("turn/start", {"turn": 1}, time=3)
    log = log.append(
        "user/message", user(4)["data"], time=4, surface_op=Replace(0, 1), source_event_seqs=[0, 1]
    )
    assert tuple(log.surface.nodes) == (4, 2)
    for start, end, reason in [
        (0, 2, "start seq 0 not found"),
        (1, 2, "start seq 1 not found"),
        (4, 1, "end seq 1 not found"),
        (3, 2, "start seq 3 not found"),
        (4, 99, "end seq 99 not found"),
        (2, 4, "start 2 is after end 4"),
    ]:
        with pytest.raises(ReplaceRangeError, match=reason):
            log.append(
                "user/message",
                user(5)["data"],
                time=5,
                surface_op=Replace(start, end),
                source_event_seqs=[0, 1, 2, 3, 4],
            )
    assert tuple(log.surface.nodes) == (4, 2)


def test_one_node_rewrites_are_checked_as_ranges_are() -> None:
    """A replace whose start is its end takes a shorter path (no walk): it finds the same
    node, asks the same citations and names the same errors as a range does."""
    log = SessionLog.empty().append("turn/start", {"turn": 1}, time=0)
    for seq in range(1, 4):  # seqs 1-3 in slots 0-2
        log = log.append("user/message", user(seq)["data"], time=seq, surface_op=APPEND)
    with pytest.raises(ProvenanceError, match=r"missing \[2\] \(R7f\)"):
        log.append(
            "user/message", user(4)["data"], time=4, surface_op=Replace(2, 2), source_event_seqs=[1]
        )

    def lookup(seq: int) -> Event:
        return log.events[seq]

    not_an_int: Any = 2.0
    state = log.surface
    for mutable in (False, True):
        if mutable:
            state = SurfaceState.mutable().extended([1, 2, 3])
        with pytest.raises(ReplaceRangeError, match=r"end seq 2\.0 not found"):
            state.plan("user/message", 4, Replace(2, not_an_int), (2,), None, lookup, "w")
        after = state.plan("user/message", 4, Replace(2, 2), (1, 2), None, lookup, "w").persistent()
        assert tuple(after.nodes) == (1, 4, 3)
        assert after.replacements == pvector([Replacement(4, 2, 2, (2,))])


def executed_lines(work: Callable[[Any], object], argument: Any) -> int:
    """Lines run in kernel/folds/surface.py and kernel/folds/messages.py by `work(argument)`."""
    files = {kernel.folds.surface.__file__, kernel.folds.messages.__file__}
    count = 0

    def count_lines(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return count_lines

    def calls(frame: FrameType, event: str, arg: object) -> Any:
        return count_lines if frame.f_code.co_filename in files else None

    previous = sys.gettrace()
    sys.settrace(calls)
    try:
        work(argument)
    finally:
        sys.settrace(previous)
    return count


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["rewrite", "compact", "nested", "random"])
def test_fold_work_is_linear_in_the_log(shape: str) -> None:
    """Restore, fold_surface and derive_messages execute a bounded number of lines per
    replacement, whatever the log's length. (The old restore's count per replacement grew
    with N, about 5,000 at N = 1,000, as it rebuilt the history after each one.)"""
    folds: dict[str, Callable[[Any], object]] = {
        "restore": SessionLog.restore,
        "fold_surface": fold_surface,
        "derive_messages": derive_messages,
    }
    lines: dict[str, list[float]] = {name: [] for name in folds}
    for n in (N // 2, N):
        wire = many_replacements(n, shape)
        events = SessionLog.restore(wire).events
        for name, fold in folds.items():
            lines[name].append(executed_lines(fold, wire if name == "restore" else events) / n)
    for name, (half, full) in lines.items():
        assert full <= 300, f"{name}: {full:.0f} lines per replacement"
        assert full <= 1.1 * half, f"{name}: {half:.0f} lines per replacement, then {full:.0f}"


def test_a_state_is_equal_hashed_and_shown_by_its_three_vectors_not_its_node_cache() -> None:
    log = SessionLog.empty().append("user/message", user(0)["data"], time=0, surface_op=APPEND)
    state = log.surface
    plain = SurfaceState(state.slots, state.slot_of, state.replacements)  # no cache
    assert state.nodes == pvector([0]) and state._nodes is not None
    assert plain._nodes is None
    assert state == plain and state.__ne__(plain) is False and hash(state) == hash(plain)
    assert (
        repr(state)
        == repr(plain)
        == ("SurfaceState(slots=pvector([0]), slot_of=pvector([0]), replacements=pvector([]))")
    )
    assert state != SurfaceState() and state.__eq__(state.to_fold()) is NotImplemented
    with pytest.raises(AttributeError):
        state.slots = pvector()  # type: ignore[misc]
