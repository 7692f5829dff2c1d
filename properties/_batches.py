"""G-batch: storage batches of chunk events for the chunk-row laws (P7, P42, P43).

Internal to the kit: `properties.strategies` re-exports `chunk_batches` and `chunk_rows`.
Seqs are contiguous from 0; chunks come from all seven variants with indices
0-2, call ids from a tiny set (so runs form often) and names present or absent;
`turn`/`step` are drawn from {0, 1}; most times sit in a realistic window and a
fifth of them anywhere in the safe range. Occasional non-chunk events and
off-whitelist chunks (extra keys, non-string text, a fractional time, surface
metadata on a chunk) must be stored verbatim.
"""

from __future__ import annotations

from typing import Any

import attrs
from hypothesis import strategies as st

from properties._json_values import MAX_SAFE
from properties._shapes import Wire
from properties._validation import check_size

__all__ = ("BatchItem", "chunk_batches", "batch_items", "build_batch", "chunk_rows")

_IDS = ("c1", "c2")
_NAMES = ("read", "ls")


@attrs.frozen
class BatchItem:
    """One drawn record: `variant` picks the shape, the rest parameterizes it."""

    variant: str
    index: int
    turn: int
    step: int
    text: str
    call_id: str
    name: str | None
    gap: int
    wild_time: int | None


def _chunk(item: BatchItem) -> dict[str, Any] | None:
    v = item.variant
    if v in ("text", "reasoning"):
        kind = "text-delta" if v == "text" else "reasoning-delta"
        return {"type": kind, "index": item.index, "text": item.text}
    if v == "tool":
        chunk: dict[str, Any] = {"type": "tool-call-delta", "index": item.index, "id": item.call_id}
        if item.name is not None:
            chunk["name"] = item.name
        chunk["argumentsDelta"] = item.text
        return chunk
    if v == "block-start":
        return {"type": "block-start", "index": item.index, "blockType": "text"}
    if v == "block-end":
        return {
            "type": "block-end",
            "index": item.index,
            "block": {"type": "text", "text": item.text},
        }
    if v == "usage":
        return {"type": "usage", "usage": {"inputTokens": 3, "outputTokens": 4}}
    if v == "finish":
        return {"type": "finish", "reason": {"kind": "stop"}}
    if v == "extra-key":
        return {"type": "text-delta", "index": item.index, "text": item.text, "x": 1}
    if v == "non-string-text":
        return {"type": "text-delta", "index": item.index, "text": 7}
    return None


def build_batch(items: list[BatchItem], *, start_time: int = 1_760_000_000_000) -> list[Wire]:
    """Interpret drawn items into a batch of wire records with seqs 0, 1, 2, …"""
    out: list[Wire] = []
    time = start_time
    for seq, item in enumerate(items):
        time = item.wild_time if item.wild_time is not None else time + item.gap
        event_time: int | float = time
        v = item.variant
        if v == "todo":
            out.append(
                {"type": "todo/write", "seq": seq, "time": event_time, "data": {"todos": []}}
            )
            continue
        if v == "fractional-time":
            event_time = time % 2**40 + 0.5  # exactly representable, never integral
            v = "text"
        chunk = _chunk(attrs.evolve(item, variant=v))
        event: Wire = {
            "type": "assistant/chunk",
            "seq": seq,
            "time": event_time,
            "data": {"turn": item.turn, "step": item.step, "chunk": chunk},
        }
        if v == "surface-meta":
            event["data"]["chunk"] = {"type": "text-delta", "index": item.index, "text": item.text}
            event["surfaceOp"] = "append"
        out.append(event)
    return out


_VARIANTS = (
    ["text"] * 6
    + ["reasoning"] * 3
    + ["tool"] * 6
    + ["block-start", "block-end", "usage", "finish"]
    + ["todo", "extra-key", "non-string-text", "fractional-time", "surface-meta"]
)


def batch_items() -> st.SearchStrategy[BatchItem]:
    """One drawn record of a G-batch."""
    return st.builds(
        BatchItem,
        variant=st.sampled_from(_VARIANTS),
        index=st.integers(0, 2),
        turn=st.integers(0, 1),
        step=st.integers(0, 1),
        text=st.sampled_from(["", "a", "He", "llo", "é🙂", '"}', "\ud800"]),
        call_id=st.sampled_from(_IDS),
        name=st.none() | st.sampled_from(_NAMES),
        gap=st.integers(-5, 20),
        wild_time=st.one_of(
            st.none(), st.none(), st.none(), st.none(), st.integers(-MAX_SAFE, MAX_SAFE)
        ),
    )


def chunk_batches(*, max_size: int = 24) -> st.SearchStrategy[list[Wire]]:
    """G-batch: lists of wire records with contiguous seqs from 0.

    Args:
        max_size: the most records in a batch, an int of at least 0.

    Raises:
        InvalidArgument: when built with a bad `max_size`.
    """
    check_size("max_size", max_size)
    runs = st.lists(
        st.tuples(batch_items(), st.integers(1, 5)),
        max_size=max(1, max_size // 3),
    )

    def expand(drawn: list[tuple[BatchItem, int]]) -> list[Wire]:
        items: list[BatchItem] = []
        for item, repeat in drawn:
            items.extend([item] * repeat)
        return build_batch(items[:max_size])

    return runs.map(expand)


def chunk_rows() -> st.SearchStrategy[dict[str, Any]]:
    """Valid packed chunk rows (docs/format/events.md §7.1), as plain dicts in writer member
    order."""
    members = st.lists(st.sampled_from(["a", "", "é", "\ud800"]), min_size=1, max_size=5)

    def text_row(tag: str, seq0: int, time0: int, texts: list[str], idx: int) -> dict[str, Any]:
        dt = [1] * (len(texts) - 1)
        return {
            "type": tag,
            "seq0": seq0,
            "time0": time0,
            "data": {"turn": 1, "step": 1, "index": idx, "dt": dt, "texts": texts},
        }

    def tool_row(seq0: int, time0: int, args: list[str], name: str | None) -> dict[str, Any]:
        data: dict[str, Any] = {"turn": 1, "step": 1, "index": 0, "dt": [2] * (len(args) - 1)}
        data["id"] = "c1"
        if name is not None:
            data["name"] = name
        data["args"] = args
        return {"type": "tool-call-chunks", "seq0": seq0, "time0": time0, "data": data}

    seq0 = st.integers(0, 1000)
    time0 = st.integers(-1000, 10**13)
    return st.one_of(
        st.builds(
            text_row,
            st.sampled_from(["text-chunks", "reasoning-chunks"]),
            seq0,
            time0,
            members,
            st.integers(0, 2),
        ),
        st.builds(tool_row, seq0, time0, members, st.none() | st.just("read")),
    )
