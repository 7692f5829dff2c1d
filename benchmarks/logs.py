"""Seeded benchmark logs that stress surface replacements: compaction-heavy and adversarial.

Both are wire dicts, deterministic for a seed, and valid by construction: every
replace names two current surface nodes on balanced cuts (docs/format/folds.md §5), on a
`user/message` or `assistant/message`, and cites every node it shadows (R7f,
R8). Keep that when changing them: `SessionLog.restore` must admit the result
and `check_invariants` must return `()` (tests/test_benchmarks_smoke.py checks).
"""

from __future__ import annotations

import itertools
from typing import Any, Final

from realistic import LogWriter, write_step

__all__ = (
    "COMPACTION_RATE",
    "adversarial_log",
    "balanced_cuts",
    "compaction_heavy_log",
    "count_replacements",
)

COMPACTION_RATE: Final = 950
"""Default replacements per 100,000 events of the compaction-heavy log (the issue asks >= 900)."""


def count_replacements(wire: list[dict[str, Any]]) -> int:
    """How many events of a wire log carry a replace `surfaceOp`."""
    return sum(1 for event in wire if type(event.get("surfaceOp")) is dict)


def _call_balance(event: dict[str, Any]) -> int:
    """The node's change to the count of outstanding tool calls (docs/format/folds.md §5.1)."""
    if event["type"] == "assistant/message":
        return sum(
            1 for block in event["data"]["message"]["content"] if block["type"] == "tool-call"
        )
    if event["type"] == "tool/result":
        return -1
    return 0


def balanced_cuts(events: list[dict[str, Any]], nodes: list[int]) -> list[int]:
    """The positions `p` (0..len(nodes)) whose cut, before node `p`, has no call outstanding."""
    cuts = [0]
    outstanding = 0
    for position, seq in enumerate(nodes, start=1):
        outstanding += _call_balance(events[seq])
        if outstanding == 0:
            cuts.append(position)
    return cuts


def _pick_range(w: LogWriter) -> tuple[int, int] | None:
    """Surface positions `(i, j)`, inclusive, of a balanced range to replace; None if none."""
    rng = w.rng
    cuts = balanced_cuts(w.events, w.nodes)
    if len(cuts) < 2:
        return None
    if rng.random() < 0.6:
        # A rewrite of one node that sits between two balanced cuts.
        singles = [c for c, d in itertools.pairwise(cuts) if d == c + 1]
        if singles:
            i = rng.choice(singles)
            return i, i
    k = rng.randrange(len(cuts) - 1)
    last = min(k + rng.randint(1, 3), len(cuts) - 1)
    return cuts[k], cuts[last] - 1


def _summary_text(w: LogWriter, shadowed: int) -> str:
    return w.text(8 + min(shadowed, 40))


def _replace_with_user_summary(w: LogWriter) -> bool:
    """Between turns: a compaction summary (`user/message`) over a balanced range."""
    picked = _pick_range(w)
    if picked is None:
        return False
    i, j = picked
    shadowed = w.nodes[i : j + 1]
    w.compact(shadowed, f"summary-{len(w.events)}", _summary_text(w, len(shadowed)))
    return True


def _replace_with_assistant_summary(w: LogWriter, turn: int, step: int) -> bool:
    """At the start of a step: an `assistant/message` that rewrites a balanced range."""
    picked = _pick_range(w)
    if picked is None:
        return False
    i, j = picked
    shadowed = w.nodes[i : j + 1]
    message = {
        "id": f"rewrite-{len(w.events)}",
        "role": "assistant",
        "content": [{"type": "text", "text": _summary_text(w, len(shadowed))}],
        "source": {"kind": "model", "provider": "deepseek", "model": "deepseek-chat"},
    }
    w.add(
        "assistant/message",
        {"turn": turn, "step": step, "message": message},
        surfaceOp={"op": "replace", "start": shadowed[0], "end": shadowed[-1]},
        sourceEventSeqs=shadowed,
    )
    return True


def compaction_heavy_log(
    n_events: int, seed: int = 0, *, replacements_per_100k: int = COMPACTION_RATE
) -> list[dict[str, Any]]:
    """At least `n_events` wire events of whole turns, with frequent surface replacements.

    Turns as in `realistic_log` but with short answers and one to three tool
    calls a step (about 60% of events are `assistant/chunk`), and
    `replacements_per_100k` replacements per 100,000 events, kept on schedule
    as the log grows: summaries (`user/message`) between turns and rewrites
    (`assistant/message`) at the start of a step, each over one node (six in
    ten) or a run of one to three balanced segments anywhere on the surface.
    Nothing compacts the whole history, so the surface keeps growing (about
    14,000 nodes at 100,000 events): the costly case for work per replacement
    that grows with the surface.
    """
    w = LogWriter(seed)
    header_state: dict[str, Any] = {}
    made = 0

    def due() -> bool:
        return made * 100_000 < len(w.events) * replacements_per_100k

    def on_start(turn: int, step: int) -> None:
        nonlocal made
        if due() and w.rng.random() < 0.5 and _replace_with_assistant_summary(w, turn, step):
            made += 1

    turn = 0
    while len(w.events) < n_events:
        turn += 1
        while due() and _replace_with_user_summary(w):
            made += 1
        w.add("turn/start", {"turn": turn})
        prompt = {
            "id": f"u-{turn}",
            "role": "user",
            "content": [{"type": "text", "text": w.text(12)}],
            "source": {"kind": "user"},
        }
        w.add("user/message", prompt, surfaceOp="append")
        for step in range(1, w.rng.randint(1, 4) + 1):
            write_step(
                w,
                turn,
                step,
                header_state,
                answer_words=(2, 9),
                call_counts=(1, 2, 2, 3),
                piece_chars=12,
                on_start=on_start,
            )
        if turn % 5 == 0:
            w.add("todo/write", {"todos": [{"content": w.text(4), "status": "pending"}]})
        w.add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    return w.events


def adversarial_log(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """`n` user-message appends, then `n` replacements anywhere on the surface.

    Each replacement is a `user/message` over a random current node, or (one
    time in ten) a range of two or three, so the surface stays near `n` nodes
    long: the worst case for a surface kept as a list or rebuilt per replace.
    """
    w = LogWriter(seed)
    rng = w.rng
    for i in range(n):
        message = {
            "id": f"u-{i}",
            "role": "user",
            "content": [{"type": "text", "text": w.text(6)}],
            "source": {"kind": "user"},
        }
        w.add("user/message", message, surfaceOp="append")
    for k in range(n):
        width = rng.choice((2, 3)) if rng.random() < 0.1 else 1
        width = min(width, len(w.nodes))
        i = rng.randrange(len(w.nodes) - width + 1)
        w.compact(w.nodes[i : i + width], f"r-{k}", w.text(6))
    return w.events
