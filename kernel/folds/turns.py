"""Turn position: which turn and step are open, and the numbers the next ones carry.

A writer numbers its next `turn/start` and `step/start` from this fold. On a
well-formed log the numbers are the ones the invariants expect (`turn-number`,
`step-number`, docs/format/folds.md §6); only the boundary events move it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Final

import attrs

from kernel.values.events import STEP_END, STEP_START, TURN_END, TURN_START, Event

__all__ = ("TurnPosition", "fold_turn_position")

_BOUNDARIES: Final = frozenset({TURN_START, TURN_END, STEP_START, STEP_END})


def _number(event: Event, key: str) -> int | None:
    data = event.data
    value = data.get(key) if hasattr(data, "get") else None
    return value if type(value) is int and value > 0 else None


@attrs.frozen
class TurnPosition:
    """Where a log stands after some prefix: its open turn and step, and what comes next.

    `next_turn` is one more than the last `turn/start`'s number (1 for a log with
    none); `next_step` is one more than the open turn's last `step/start` (1 when
    no turn is open, or the open turn has no step yet).

    >>> from kernel.values.events import Event
    >>> fold_turn_position([Event("turn/start", 0, 0, {"turn": 1}),
    ...                     Event("step/start", 1, 0, {"turn": 1, "step": 1})])
    TurnPosition(open_turn=1, open_step=1, next_turn=2, next_step=2)
    """

    open_turn: int | None = None
    open_step: int | None = None
    next_turn: int = 1
    next_step: int = 1

    def step(self, event: Event) -> TurnPosition:
        """The position after one more event; a payload without its number changes nothing."""
        kind = event.type
        if kind not in _BOUNDARIES:
            return self
        if kind == TURN_START:
            turn = _number(event, "turn")
            if turn is None:
                return self
            return TurnPosition(open_turn=turn, next_turn=turn + 1)
        if kind == TURN_END:
            return TurnPosition(next_turn=self.next_turn)
        step = _number(event, "step")
        if kind == STEP_START:
            if step is None:
                return self
            return attrs.evolve(self, open_step=step, next_step=step + 1)
        return attrs.evolve(self, open_step=None)


def fold_turn_position(events: Iterable[Event]) -> TurnPosition:
    """Fold a whole log; equal to stepping `TurnPosition()` through it."""
    return functools.reduce(TurnPosition.step, events, TurnPosition())
