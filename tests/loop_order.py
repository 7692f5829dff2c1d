"""DSH's agent-loop order, checked on wire events (docs/format/properties.md, G-loop).

DSH writes a turn's surface events only after its first `step/start` (a step claims
the user's messages), each `tool/call` right before its `tool/result`, and a
compaction as four records back to back. Used by the kit's loop-order tests and by
the benchmark smoke test, whose DSH-shaped realistic log must keep the same order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from properties._model import SURFACE_TYPES, SurfaceModel
from properties._shapes import Wire

__all__ = ("dsh_order_problems",)


def _transaction(
    events: Sequence[Wire],
    k: int,
    surface: SurfaceModel,
    turn: int,
    ids: set[Any],
    bad: Callable[[int, str], None],
) -> int:
    """Check the compaction starting at `events[k]`; fold it into `surface`; the next index."""
    start = events[k]
    cid = start["data"].get("compactionId") if isinstance(start["data"], dict) else None
    if start["data"] != {"compactionId": cid, "turn": turn} or not isinstance(cid, str):
        bad(k, f"compaction/start data is not {{compactionId, turn: {turn}}}")
    if cid in ids:
        bad(k, f"compactionId {cid!r} is used twice")
    ids.add(cid)
    surface.step(start)
    rest = events[k + 1 : k + 4]
    if rest and rest[0]["type"] == "compaction/end":
        if rest[0]["data"].get("compactionId") != cid or "error" not in rest[0]["data"]:
            bad(k + 1, "a compaction/end right after its start must be the failure, with an error")
        return k + 2
    types = tuple(e["type"] for e in rest)
    if types != ("compaction/summary", "user/message", "compaction/end"):
        bad(k, f"compaction/start is followed by {types}, not summary, checkpoint and end")
        return k + 1
    summary, checkpoint, end = rest
    op = checkpoint.get("surfaceOp")
    if not isinstance(op, dict):
        bad(k + 2, "the checkpoint does not replace")
        return k + 1
    nodes = surface.nodes
    shadowed = nodes[nodes.index(op["start"]) : nodes.index(op["end"]) + 1]
    expected_summary = {
        "compactionId": cid,
        "shadowedRange": {"start": op["start"], "end": op["end"]},
        "shadowedSeqs": shadowed,
    }
    if {key: summary["data"].get(key) for key in expected_summary} != expected_summary:
        bad(k + 1, f"the summary does not name the compaction and the shadowed nodes {shadowed}")
    if not {"summary", "shadowedTokenCount", "provider", "model"} <= summary["data"].keys():
        bad(k + 1, "the summary lacks summary, shadowedTokenCount, provider or model")
    if checkpoint.get("sourceEventSeqs") != [start["seq"], summary["seq"], *shadowed]:
        bad(k + 2, "the checkpoint does not cite [start, summary, *shadowed seqs]")
    if checkpoint["data"]["source"] != {"kind": "plugin", "plugin": "compact", "compactionId": cid}:
        bad(k + 2, "the checkpoint's source is not the compact plugin with the compactionId")
    if end["data"] != {"compactionId": cid, "turn": turn}:
        bad(k + 3, f"compaction/end data is not {{compactionId, turn: {turn}}}")
    for event in rest:
        surface.step(event)
    return k + 4


def dsh_order_problems(events: Sequence[Wire]) -> list[str]:
    """Where a complete log departs from DSH's loop order, one line per departure."""
    problems: list[str] = []

    def bad(k: int, what: str) -> None:
        problems.append(f"seq {k}: {what}")

    surface = SurfaceModel()
    ids: set[Any] = set()
    open_turn: int | None = None
    last_turn = 0
    stepped = in_step = claiming = False
    k = 0
    while k < len(events):
        e = events[k]
        t, data = e["type"], e["data"]
        if t.startswith("compaction/"):
            if t != "compaction/start":
                bad(k, f"{t} outside a compaction transaction")
            elif in_step or (open_turn is not None and not stepped):
                bad(k, "a compaction inside a step or before the turn's first step/start")
            if t == "compaction/start":
                k = _transaction(events, k, surface, last_turn, ids, bad)
                claiming = False
                continue
        elif t == "turn/start":
            open_turn, last_turn, stepped = data["turn"], data["turn"], False
        elif t == "turn/end":
            open_turn = None
        elif t == "step/start":
            stepped = in_step = True
        elif t == "step/end":
            in_step = False
        elif t in SURFACE_TYPES:
            if open_turn is None:
                bad(k, f"{t} outside a turn (only a compaction's checkpoint may be)")
            elif not stepped:
                bad(k, f"{t} before the turn's first step/start")
            if t == "user/message" and not (claiming and e["surfaceOp"] == "append"):
                bad(k, "a user/message that a step did not claim right after its step/start")
            if t == "tool/result" and e["surfaceOp"] == "append":
                before = events[k - 1] if k else None
                call = data["message"]["source"]["callId"]
                if (
                    before is None
                    or before["type"] != "tool/call"
                    or before["data"]["callId"] != call
                ):
                    bad(k, "a tool/result that does not come right after its tool/call")
        elif t == "tool/call":
            after = events[k + 1] if k + 1 < len(events) else None
            if after is None or after["type"] != "tool/result":
                bad(k, "a tool/call that its tool/result does not follow")
        claiming = t == "step/start" or (claiming and t == "user/message")
        surface.step(e)
        k += 1
    return problems
