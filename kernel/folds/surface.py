"""The surface fold (docs/format/folds.md §1): the events of the model-visible history, in order.

One state type, `SurfaceState`; the complete fold is its step folded over a log,
and `SessionLog` keeps the same state incrementally. A step returns a new state
or raises; since states are persistent values, a rejected event changes nothing
(R13). (A pass that keeps only its last state steps a `mutable` one in place,
after every check has passed.) Checks run in docs/format/admission.md §3 order:
R5, R6, then R7 (append) or R8, R7, R9 (replace). Nodes live in slots that never
move, so a replace costs what it shadows, not the surface length
(`SurfaceState`; the design record is
docs/rfc/implemented/architecture/2026-12-01-linear-surface-and-history.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from itertools import chain, count, repeat
from operator import attrgetter, sub
from typing import Any, Final, cast

import attrs
import msgspec
from pyrsistent import PVector

from kernel.admission.envelope import check_surface_marker
from kernel.admission.provenance import check_citations, cites_earlier_in_order
from kernel.errors import (
    KernelError,
    ReplaceRangeError,
    SeqMismatch,
    ToolResultRewriteError,
)
from kernel.values.events import (
    REQUEST_HEADER,
    SURFACE_TYPES,
    TOOL_RESULT,
    Append,
    Event,
    LoadedEvents,
    Replace,
)
from kernel.values.json import MAX_SAFE_INTEGER, json_equal, summary, thaw
from kernel.values.vectors import vector
from kernel.wire.codec import event_sequence, ill_typed_events_reported

__all__ = (
    "Replacement",
    "SurfaceFold",
    "AdmittedEvents",
    "positions_of_type",
    "SurfaceState",
    "fold_surface",
    "is_surface_eligible_type",
    "is_surface_event",
    "is_append_surface_event",
    "is_replacement_surface_event",
    "surface_state_of",
    "surface_fold_of",
    "surface_fold_over",
    "surface_state_over",
    "is_plain_append",
)

EventLookup = Callable[[int], Event]


@attrs.frozen
class Replacement:
    """One applied replace: the replacing event's seq, its endpoints, the seqs it shadowed."""

    seq: int
    start: int
    end: int
    shadowed_seqs: tuple[int, ...]


@attrs.frozen
class SurfaceFold:
    """The complete surface fold: current nodes and every replacement in event order."""

    nodes: tuple[int, ...]
    replacements: tuple[Replacement, ...]

    @property
    def replace_generation(self) -> int:
        return len(self.replacements)


_TYPE: Final = attrgetter("type")


class AdmittedEvents(LoadedEvents):
    """The events of a whole log a loader admitted, with the surface it planned on the way.

    A tuple in every other respect. A loader makes one only for a log it admitted
    whole (the load pipeline, docs/format/persistence.md §5) and whose last turn it
    closed, so the folds over it
    answer from what the load computed rather than folding again: the surface folds
    take `surface`, and the closers are `()`. A slice, a copy or any other sequence
    of the same events folds from scratch, to the same answer; a pickled one comes
    back as a plain tuple. `request_headers` holds the positions of its
    `request/header` events (the load finds them in the types it reads anyway), so
    the header fold reads those alone.
    """

    surface: SurfaceFold
    request_headers: tuple[int, ...]

    def __new__(
        cls,
        events: Iterable[Event],
        surface: SurfaceFold,
        request_headers: tuple[int, ...] | None = None,
    ) -> AdmittedEvents:
        admitted = super().__new__(cls, events)
        if request_headers is None:
            request_headers = positions_of_type(tuple(map(_TYPE, admitted)), REQUEST_HEADER)
        object.__setattr__(admitted, "surface", surface)
        object.__setattr__(admitted, "request_headers", request_headers)
        return admitted

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"AdmittedEvents is immutable: cannot set {name}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"AdmittedEvents is immutable: cannot delete {name}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (tuple, (tuple(self),))


def positions_of_type(types: Sequence[str], event_type: str) -> tuple[int, ...]:
    """Where `event_type` is in `types`: `index` from each one found, in C, comparing
    by identity first (the load's types are interned).

    >>> positions_of_type(("a", "b", "a"), "a")
    (0, 2)
    """
    found: list[int] = []
    at = -1
    try:
        while True:
            at = types.index(event_type, at + 1)
            found.append(at)
    except ValueError:
        return tuple(found)


def is_surface_eligible_type(event_type: str) -> bool:
    """`user/message`, `assistant/message` and `tool/result` may carry a surfaceOp."""
    return event_type in SURFACE_TYPES


def is_surface_event(event: Event) -> bool:
    return event.type in SURFACE_TYPES and event.surface_op is not None


def is_append_surface_event(event: Event) -> bool:
    return is_surface_event(event) and type(event.surface_op) is Append


def is_replacement_surface_event(event: Event) -> bool:
    return is_surface_event(event) and isinstance(event.surface_op, Replace)


def _without_result_content(data: Any) -> Any:
    plain = thaw(data)
    with contextlib.suppress(KeyError, IndexError, TypeError):  # R10 rejected other shapes
        plain["message"]["content"][0]["content"] = None
    return plain


def _check_rewrite(
    seq: int, data: Any, shadowed: Sequence[int], lookup: EventLookup, where: str
) -> None:
    """R9: a tool/result replace rewrites exactly one current tool/result, content only."""
    if len(shadowed) != 1:
        raise ToolResultRewriteError(
            f"{where}: tool/result replacement must rewrite exactly one current node, "
            f"not {len(shadowed)} (R9)",
            seq=seq,
        )
    target = lookup(shadowed[0])
    if target.type != TOOL_RESULT:
        raise ToolResultRewriteError(
            f"{where}: tool/result replacement must target a current tool/result, "
            f"seq {target.seq} is {target.type} (R9)",
            seq=seq,
        )
    if not json_equal(_without_result_content(data), _without_result_content(target.data)):
        raise ToolResultRewriteError(
            f"{where}: tool/result replacement of seq {target.seq} may change only content (R9)",
            seq=seq,
        )


class SurfaceState(msgspec.Struct, frozen=True, gc=False):
    """What the surface fold knows after a prefix: nodes, replace generation, replacements.

    Nodes are kept by *slot*, not by position, so a replace moves nothing: an
    appended node takes a new slot at the end; a replace puts its seq in its
    start node's slot and empties the slots of the other nodes it shadows. Slot
    order is surface order, and `nodes` are the seqs in non-empty slots.

    An emptied slot holds `~s`, s being the slot of the next current node when it
    was emptied; a replace always rewrites the slot just after its start that way,
    so one step from a current node (past at most one emptied slot) reaches the
    next current node, and a range is walked in O(its length). `slot_of[seq]` is
    the slot a seq took (-1: none), so R8 finds an endpoint in O(log n). A step
    costs O(shadowed + log n). The vectors are persistent, except in a `mutable`
    state (lists, stepped in place), which a pass that keeps only its last state
    uses (`surface_fold_over`, `SessionLog.seed`).

    A msgspec struct, not an attrs class: every append builds one, and this record
    is built in a seventh of the time (65 against 475 ns). Equality, hash and repr
    are over the three vectors, as before; `_nodes` is a cache.
    """

    slots: PVector[int] = msgspec.field(default_factory=vector)
    slot_of: PVector[int] = msgspec.field(default_factory=vector)
    replacements: PVector[Replacement] = msgspec.field(default_factory=vector)
    # `nodes`, once built: extended by appends, dropped by a replace (rebuilt on use).
    _nodes: PVector[int] | None = None

    # Equality, hash and repr by `_key()`, as `Event` has them; spelled out in the class
    # body, where mypy reads them as this class's own (a shared helper types as another's).
    def _key(self) -> tuple[Any, ...]:
        return (self.slots, self.slot_of, self.replacements)

    def __eq__(self, other: object) -> bool:
        if type(other) is not SurfaceState:
            return NotImplemented
        return self is other or self._key() == other._key()

    def __ne__(self, other: object) -> bool:
        if type(other) is not SurfaceState:
            return NotImplemented
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"SurfaceState(slots={self.slots!r}, slot_of={self.slot_of!r}, "
            f"replacements={self.replacements!r})"
        )

    @property
    def nodes(self) -> PVector[int]:
        """The current surface in model-visible order: the seqs in non-empty slots."""
        nodes = self._nodes
        if nodes is None:
            nodes = vector([seq for seq in self.slots if seq >= 0])
            _set_nodes(self, nodes)
        return nodes

    @property
    def replace_generation(self) -> int:
        return len(self.replacements)

    @classmethod
    def mutable(cls) -> SurfaceState:
        """An empty state over plain lists, for a pass that keeps only its last state.

        Stepping it changes it in place (a step raises before it changes anything);
        `persistent` ends the pass, and only its result is read. New persistent
        vectors at every step would each be walked whole by every collection of the
        young generation, and a list is the cheapest to step.
        """
        return cls(*[cast(Any, []) for _ in range(3)])

    def persistent(self) -> SurfaceState:
        """The persistent state a `mutable` one has reached."""
        slots: Any = self.slots
        if type(slots) is not list:
            return self
        return SurfaceState(vector(slots), vector(self.slot_of), vector(self.replacements))

    def slot(self, seq: int) -> int | None:
        """The slot of `seq` if it is currently on the surface, else None."""
        if isinstance(seq, int) and 0 <= seq < len(self.slot_of):
            slot = self.slot_of[seq]
            if slot >= 0 and self.slots[slot] == seq:
                return slot
        return None

    def _walk(self, i: int, j: int) -> tuple[list[int], tuple[int, ...]]:
        """The non-empty slots from `i` to `j` (both current, `i <= j`), and their seqs."""
        slots = self.slots
        walked = [i]
        x = i
        while x != j:
            x += 1
            if slots[x] < 0:
                x = ~slots[x]
            walked.append(x)
        return walked, tuple([slots[x] for x in walked])

    def plan(
        self,
        event_type: str,
        seq: int,
        op: Any,
        sources: Any,
        data: Any,
        lookup: EventLookup,
        where: str,
    ) -> SurfaceState:
        """The state after one candidate event (R7-R9); the caller has checked R5/R6.

        `op` is None, `APPEND` or a `Replace`; `sources` the citations (a tuple, a
        wire array, None when absent, or `PRESENT_NULL`); `lookup(seq)` returns a
        committed event (R9 reads the shadowed node). Every check runs before the
        state changes, so a failing plan can be run again (a `mutable` state is
        stepped in place).
        """
        if op is None:
            return self
        slots: Any = self.slots  # a PVector, or a list in a `mutable` state
        if type(op) is Append:  # APPEND, or a copy of it that pickling made
            check_citations(event_type, seq, sources, (), where)
            slot = len(slots)
            if type(slots) is list:
                _index(self.slot_of, seq, slot)
                slots.append(seq)
                return self  # changed in place; a mutable state has no `_nodes`
            nodes = self._nodes
            return SurfaceState(
                slots.append(seq),
                _indexed(self.slot_of, seq, slot),
                self.replacements,
                None if nodes is None else nodes.append(seq),
            )
        start, end = op.start, op.end
        i = self.slot(start)
        if i is None:
            raise ReplaceRangeError(
                f"{where}: replace start seq {start} not found in surface (R8)", seq=seq
            )
        if type(end) is int and end == start:  # a one-node rewrite, the common replace
            j = i
            walked: Sequence[int] = (i,)
            shadowed: tuple[int, ...] = (slots[i],)
        else:
            found = self.slot(end)
            if found is None:
                raise ReplaceRangeError(
                    f"{where}: replace end seq {end} not found in surface (R8)", seq=seq
                )
            j = found
            if i > j:
                raise ReplaceRangeError(
                    f"{where}: replace start {start} is after end {end} on the surface (R8)",
                    seq=seq,
                )
            walked, shadowed = self._walk(i, j)
        check_citations(event_type, seq, sources, shadowed, where)
        if event_type == TOOL_RESULT:
            _check_rewrite(seq, data, shadowed, lookup, where)
        mutable = type(slots) is list
        if i == j:
            if mutable:
                slots[i] = seq
            else:
                slots = slots.set(i, seq)
        else:
            writes = {i: seq}
            after = j + 1
            if after < len(slots) and slots[after] < 0:
                after = ~slots[after]
            writes[i + 1] = ~after  # even when it was emptied before, by a replace from i
            for x in walked[1:]:
                writes[x] = ~after
            for x, value in writes.items():
                if mutable:
                    slots[x] = value
                else:
                    slots = slots.set(x, value)
        record = Replacement(seq, start, end, shadowed)
        if mutable:
            _index(self.slot_of, seq, i)
            self.replacements.append(record)
            return self  # its lists changed in place; a mutable state has no `_nodes`
        return SurfaceState(slots, _indexed(self.slot_of, seq, i), self.replacements.append(record))

    def extended(self, seqs: Sequence[int]) -> SurfaceState:
        """The state after appending the nodes `seqs` (increasing, each past every seq the
        state has seen): what stepping each append gives, once its R5 and R7 checks passed."""
        if not seqs:
            return self
        slots: Any = self.slots  # a PVector, or a list in a `mutable` state
        slot_of: Any = self.slot_of
        known = len(slot_of)
        indexed = [-1] * (seqs[-1] + 1 - known)  # seqs that never took a slot read -1
        if len(seqs) == 1:
            indexed[-1] = len(slots)
        else:
            # indexed[seq - known] = len(slots) + offset, for each seq, looped in C
            any(map(indexed.__setitem__, map(sub, seqs, repeat(known)), count(len(slots))))
        if type(slots) is list:
            slots.extend(seqs)
            slot_of.extend(indexed)
            return self  # changed in place; a mutable state has no `_nodes`
        nodes = self._nodes
        return SurfaceState(
            slots.extend(seqs),
            slot_of.extend(indexed),
            self.replacements,
            None if nodes is None else nodes.extend(seqs),
        )

    def step(self, event: Event, lookup: EventLookup) -> SurfaceState:
        """The state after one more (already decoded) event; raises on R5-R9."""
        where = f"event seq {event.seq}"
        check_surface_marker(
            event.type, event.surface_op is not None, event.source_event_seqs is not None, where
        )
        return self.plan(
            event.type,
            event.seq,
            event.surface_op,
            event.source_event_seqs,
            event.data,
            lookup,
            where,
        )

    def to_fold(self) -> SurfaceFold:
        return SurfaceFold(tuple(self.nodes), tuple(self.replacements))


_set_nodes = SurfaceState.__dict__["_nodes"].__set__  # the cache, past the frozen check


def _indexed(slot_of: PVector[int], seq: int, slot: int) -> PVector[int]:
    """`slot_of` with `seq` at `slot`; seqs that never took a slot read -1."""
    gap = seq - len(slot_of)
    if gap < 0:
        return slot_of.set(seq, slot)
    return (slot_of.extend([-1] * gap) if gap else slot_of).append(slot)


def _index(slot_of: Any, seq: int, slot: int) -> None:
    """`_indexed` in place, on a `mutable` state's list."""
    gap = seq - len(slot_of)
    if gap < 0:
        slot_of[seq] = slot
        return
    if gap:
        slot_of.extend([-1] * gap)
    slot_of.append(slot)


def fold_surface(events: Iterable[Event], base: int = 0) -> SurfaceFold:
    """The complete surface of a log, or of a window whose first event has seq `base`.

    Events are not checked one by one (that would cost as much as the fold): one
    the fold cannot read is reported by `kernel.wire.codec.ill_typed_events_reported`,
    as `check_event` would report it.

    Args:
        events: admitted events, in log order.
        base: the seq of the first event when `events` is a window of a longer log.

    Returns:
        `SurfaceFold`: the surface `nodes` (seqs, in order) and the `replacements`.

    Raises:
        SurfaceError: a surface marker, replace range or result rewrite breaks R5-R9.
        ProvenanceError: a citation list breaks R7.
        InvalidEnvelope: an item is not an `Event`, or one the fold reads is ill-typed (R2).

    >>> from kernel.values.events import Event, APPEND
    >>> msg = {"id": "u", "role": "user", "content": [], "source": {"kind": "user"}}
    >>> fold_surface([Event("user/message", 0, 1, msg, APPEND)]).nodes
    (0,)
    """
    window = event_sequence(events)
    with ill_typed_events_reported(window):
        return surface_fold_of(window, base)


def surface_state_of(window: Sequence[Event], base: int = 0) -> SurfaceState:
    """The `SurfaceState` after every event of `window` (its first event has seq `base`).

    Does not check what the events are: use it inside `ill_typed_events_reported`.
    """
    return _surface_pass_of(window, base).persistent()


def surface_fold_of(window: Sequence[Event], base: int = 0) -> SurfaceFold:
    """`surface_state_of(window, base).to_fold()`, for the folds that read only the nodes
    and the replacements: the pass's vectors, among them the seq-to-slot index as long
    as the window, are never made persistent.

    Does not check what the events are: use it inside `ill_typed_events_reported`.
    """
    if type(window) is AdmittedEvents and base == 0:
        return window.surface  # what the load planned: the fold of these very events
    return _fold_of(_surface_pass_of(window, base))


def _fold_of(state: SurfaceState) -> SurfaceFold:
    return SurfaceFold(tuple([seq for seq in state.slots if seq >= 0]), tuple(state.replacements))


def _surface_pass_of(window: Sequence[Event], base: int) -> SurfaceState:
    """`_surface_pass` over the events of `window` the surface rules read, once their seqs
    are checked (R4)."""
    if type(base) is not int or not 0 <= base <= MAX_SAFE_INTEGER:
        raise KernelError(f"base must be a non-negative safe integer, got {summary(base)}")
    gap = False
    try:
        # The positions of the events the surface rules read, in one comprehension (most
        # of a log is passed over); a seq out of place (R4) is only noted here.
        positions = [
            seq - base
            for seq, event in enumerate(window, base)
            if (event.seq != seq and (gap := True))
            or event.surface_op is not None
            or event.source_event_seqs is not None
            or event.type in SURFACE_TYPES
        ]
    except Exception:
        gap = True  # an item that cannot be read
    if gap:
        return _surface_pass_in_order(window, base)
    return _surface_pass(window, positions, base)


def _surface_pass_in_order(window: Sequence[Event], base: int) -> SurfaceState:
    """`_surface_pass_of` one event at a time, raising the first error in log order: a seq
    out of place (R4) after any surface error of an earlier event."""
    candidates: list[int] = []  # positions of the events the surface rules read
    try:
        for index, event in enumerate(window):
            if event.seq != base + index:
                raise SeqMismatch(
                    f"event at index {index}: seq {summary(event.seq)} is not contiguous; "
                    f"expected {base + index} (R4)",
                    index=index,
                    seq=event.seq if type(event.seq) is int else None,
                )
            if (
                event.surface_op is not None
                or event.source_event_seqs is not None
                or event.type in SURFACE_TYPES
            ):
                candidates.append(index)
    except Exception:
        # Rules are checked in log order: an earlier event's surface error comes first.
        _surface_pass(window, candidates, base)
        raise
    return _surface_pass(window, candidates, base)


def surface_fold_over(window: Sequence[Event], positions: Iterable[int]) -> SurfaceFold:
    """The `SurfaceFold` after the events at `positions` (increasing) of a window whose event
    at position i has seq i, the pass's vectors never made persistent: what a load keeps of
    its surface plan (`AdmittedEvents`).

    The caller vouches for the seqs, and that every other event is invisible to the
    surface (not surface-eligible, no `surfaceOp`, no `sourceEventSeqs`): a load that
    has checked each event's shape steps the few surface events, not the whole log.
    """
    return _fold_of(_surface_pass(window, positions, 0))


def surface_state_over(window: Sequence[Event], positions: Iterable[int]) -> SurfaceState:
    """`surface_fold_over`'s pass as a persistent `SurfaceState`, for a log to append to.

    The caller vouches for what `surface_fold_over`'s caller does and more: the events
    were planned once already (a load's own, `AdmittedEvents`), so an append's marker
    and citations (R5, R7) are not checked again; a replace is planned as always.
    """
    return _surface_pass(window, positions, 0, planned=True).persistent()


def _surface_pass(
    window: Sequence[Event], positions: Iterable[int], base: int, *, planned: bool = False
) -> SurfaceState:
    """The state after the events at `positions` of `window` (see `surface_fold_over`): a
    `mutable` state after the pass, or the empty state when there are no positions."""
    state = SurfaceState.mutable()  # only the last state is kept
    slots: list[int] = cast(Any, state.slots)
    slot_of: list[int] = cast(Any, state.slot_of)
    todo = iter(positions)
    first = next(todo, None)
    if first is None:
        return SurfaceState()
    # Every seq from here to the window's end may take a slot: index them all now, and
    # cut the seqs after the last one that did at the end.
    slot_of.extend([-1] * (base + len(window)))

    def lookup(seq: int) -> Event:
        return window[seq - base]

    for event in map(window.__getitem__, chain((first,), todo)):
        op = event.surface_op
        if type(op) is Append:
            # An append's rules (R5, R7a-e) do not read the state.
            seq = event.seq
            if not planned and not is_plain_append(event.type, seq, event.source_event_seqs):
                _check_append(event)
            slot_of[seq] = len(slots)
            slots.append(seq)
        elif type(op) is Replace and event.type in SURFACE_TYPES:  # R5 holds
            # `where` is spelled only for an error: a failing plan has changed nothing,
            # so `step` runs it again, with it.
            try:
                state.plan(
                    event.type, event.seq, op, event.source_event_seqs, event.data, lookup, ""
                )
            except KernelError:
                state.step(event, lookup)
        else:
            state.step(event, lookup)
    del slot_of[max(slots, default=-1) + 1 :]
    return state


def is_plain_append(event_type: str, seq: int, sources: Any) -> bool:
    """Whether an append of `event_type` at `seq` citing `sources` passes R5 and R7a-e.

    True for the common appends, checked without the general rules: an eligible
    type citing nothing, or earlier seqs in increasing order (so none twice).
    False when unsure; `SurfaceState.plan` then names any error.
    """
    return event_type in SURFACE_TYPES and (sources is None or cites_earlier_in_order(seq, sources))


def _check_append(event: Event) -> None:
    """R5 and R7a-e of an append that is not plainly well formed (`is_plain_append`)."""
    where = f"event seq {event.seq}"
    check_surface_marker(event.type, True, event.source_event_seqs is not None, where)
    check_citations(event.type, event.seq, event.source_event_seqs, (), where)
