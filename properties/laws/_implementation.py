"""The implementation a law checks: the kernel's folds unless the caller passes its own.

A law calls the folds it checks through an `Implementation`, never through a module
name, so `law(case, implementation=Implementation(interrupted_turn_closers=mine))`
checks `mine` against the catalogue and patching a module changes nothing. A field
left out stays the kernel's function; the reference model the laws compare with
(`properties/_model.py`) is never replaced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from kernel.folds.closers import interrupted_turn_closers
from kernel.folds.invariants import Violation, check_invariants, check_invariants_strict
from kernel.folds.messages import derive_messages
from kernel.folds.request_header import fold_request_header
from kernel.folds.surface import SurfaceFold, fold_surface
from kernel.values.events import Event

__all__ = ("Implementation", "KERNEL")


@attrs.frozen(kw_only=True)
class Implementation:
    """The functions under test, named and typed as the kernel's; each defaults to the kernel's.

    Attributes:
        interrupted_turn_closers: the closers of a crash prefix (P30-P35, P37-P39).
        fold_surface: the complete surface fold, `(events, base=0)` (P14-P17, P19, P24-P25).
        derive_messages: the message history of a log (P1, P3, P5, P6, P19-P21, P26, P30,
            P41, P45).
        check_invariants: every relational violation, in log order (P28-P30).
        check_invariants_strict: raise `InvariantViolation` for the first one (P28-P29).
        fold_request_header: the request-header fold, `(events, start=None)` (P24-P26).

    >>> broken = Implementation(interrupted_turn_closers=lambda events: ())
    >>> broken.fold_surface is KERNEL.fold_surface
    True
    """

    interrupted_turn_closers: Callable[[Sequence[Event]], Sequence[Event]] = (
        interrupted_turn_closers
    )
    fold_surface: Callable[..., SurfaceFold] = fold_surface
    derive_messages: Callable[[Sequence[Event]], Sequence[Any]] = derive_messages
    check_invariants: Callable[[Sequence[Event]], Sequence[Violation]] = check_invariants
    check_invariants_strict: Callable[[Sequence[Event]], None] = check_invariants_strict
    fold_request_header: Callable[..., Any] = fold_request_header

    def closers(self, events: Iterable[Event]) -> tuple[Event, ...]:
        """`interrupted_turn_closers` of `events`, as a tuple whatever sequence it returns."""
        return tuple(self.interrupted_turn_closers(tuple(events)))


KERNEL = Implementation()
"""The kernel's own functions: what every law checks when no implementation is given."""
