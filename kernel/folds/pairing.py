"""Tool-pairing balance over the surface (docs/format/folds.md §5): where a compaction may cut.

A surface of N nodes has N + 1 cuts; a cut is balanced when no assistant tool call
before it is still waiting for its result. Counting is by number, not by call id,
and the node's type decides its delta, whether it was appended or is a replacement.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import islice, repeat
from operator import countOf, methodcaller
from typing import Any, Final

import attrs

from kernel.errors import MessageShapeError, ToolPairingError
from kernel.folds.surface import surface_fold_of
from kernel.values.events import ASSISTANT_MESSAGE, TOOL_RESULT, Event
from kernel.values.json import FrozenObject, raw, safe_int, summary
from kernel.wire.codec import event_sequence, ill_typed_events_reported

__all__ = (
    "Cut",
    "balanced_cuts",
    "tool_pairing_cuts",
    "is_safe_compaction_range",
)


@attrs.frozen
class Cut:
    """One surface node and whether the cuts just before and just after it are balanced."""

    seq: int
    before: bool
    after: bool


_BLOCK_TYPE: Final = methodcaller("get", "type")
_SET_SEQ, _SET_BEFORE, _SET_AFTER = (
    Cut.__dict__[name].__set__ for name in ("seq", "before", "after")
)


def _cuts(nodes: Sequence[int], balanced: Sequence[bool]) -> tuple[Cut, ...]:
    """`Cut(seq, balanced[i], balanced[i + 1])` for the node `seq` at each position `i`.

    Built field by field in C, which gives what the constructor gives (`Cut` has no
    validator, converter or post-init) at half its cost: a frozen attrs class sets
    each field through `object.__setattr__` from Python, some 6,500 instructions a
    record against 3,000 here, and a log has one record per surface node.
    """
    cuts = list(map(object.__new__, repeat(Cut, len(nodes))))
    # Each setter returns None, so `any` runs it over every record.
    any(map(_SET_SEQ, cuts, nodes))
    any(map(_SET_BEFORE, cuts, balanced))
    any(map(_SET_AFTER, cuts, islice(balanced, 1, None)))
    return tuple(cuts)


def _call_count(event: Event) -> int:
    """The number of `tool-call` blocks in an assistant message (R10 shape checked first)."""
    data = event.data
    if type(data) is FrozenObject:
        source = data._value
        if source.__class__ is not dict:  # a lazy payload: its source may count unbuilt
            try:
                counted = source.count_blocks("tool-call")
            except AttributeError:  # a source that cannot count
                counted = None
            if counted is not None:
                return int(counted)
        # The plain containers behind a frozen payload hold only JSON values, so an object
        # is a dict, and reading them directly skips a view per member read.
        message = raw(data).get("message")
        content = message.get("content") if type(message) is dict else None
    else:
        message = data.get("message") if isinstance(data, Mapping) else None
        content = raw(message.get("content")) if isinstance(message, Mapping) else None
    if type(content) is not list:
        raise MessageShapeError(
            f"event seq {event.seq}: assistant/message must hold a message with a "
            "content array (R10)",
            seq=event.seq,
        )
    try:
        return countOf(map(_BLOCK_TYPE, content), "tool-call")  # every block an object
    except AttributeError:  # a block that is not an object (R10 refuses one) counts no call
        return sum(
            1
            for block in content
            if isinstance(block, Mapping) and block.get("type") == "tool-call"
        )


def balanced_cuts(events: Sequence[Event], nodes: Iterable[int]) -> tuple[bool, ...]:
    """Whether each of the `len(nodes) + 1` cuts of a surface is balanced
    (docs/format/folds.md §5.1).

    `events` is the whole log (indexed by seq), `nodes` its surface in order. Raises
    `ToolPairingError` for a node with no matching event, or a `tool/result` that
    no earlier call on the surface is waiting for.
    """
    cuts = [True]
    outstanding = 0
    for seq in nodes:
        if not 0 <= seq < len(events) or events[seq].seq != seq:
            raise ToolPairingError(f"surface seq {seq} has no matching event (§5.1)", seq=seq)
        event = events[seq]
        if event.type == ASSISTANT_MESSAGE:
            outstanding += _call_count(event)
        elif event.type == TOOL_RESULT:
            outstanding -= 1
            if outstanding < 0:
                raise ToolPairingError(
                    f"event seq {seq}: tool/result has no matching tool-call on the surface (§5.1)",
                    seq=seq,
                )
        cuts.append(outstanding == 0)
    return tuple(cuts)


def tool_pairing_cuts(events: Iterable[Event]) -> tuple[Cut, ...]:
    """One `Cut` per surface node of `events`, in surface order (docs/format/folds.md §5.1).

    Folds the surface (its errors propagate), then counts calls and results along
    it. Works on any prefix: after an unanswered call the cuts stay unbalanced to
    the end of the surface. An empty surface gives `()`. Events are checked as
    `fold_surface` checks them (only when one cannot be read).

    >>> from kernel.values.events import Event, APPEND
    >>> msg = {"id": "u", "role": "user", "content": [], "source": {"kind": "user"}}
    >>> tool_pairing_cuts([Event("user/message", 0, 1, msg, APPEND)])
    (Cut(seq=0, before=True, after=True),)
    """
    log = event_sequence(events)
    with ill_typed_events_reported(log):
        nodes = surface_fold_of(log).nodes
        cuts = balanced_cuts(log, nodes)
    return _cuts(nodes, cuts)


def _position(nodes: Sequence[int], seq: Any, end: str) -> int:
    at = safe_int(seq)
    if at is not None and at in nodes:
        return nodes.index(at)
    raise ToolPairingError(f"range {end} seq {summary(seq)} not found on the surface (§5.1)")


def is_safe_compaction_range(events: Iterable[Event], start: int, end: int) -> bool:
    """Whether replacing the surface range from seq `start` through seq `end` keeps pairs whole.

    True iff the cut before `start` and the cut after `end` are balanced (and `start`
    does not sit after `end` on the surface). Raises `ToolPairingError` when either
    seq is not on the surface (never was, or shadowed).
    """
    log = event_sequence(events)
    with ill_typed_events_reported(log):
        nodes = surface_fold_of(log).nodes
        i, j = _position(nodes, start, "start"), _position(nodes, end, "end")
        cuts = balanced_cuts(log, nodes)
    return i <= j and cuts[i] and cuts[j + 1]
