"""R7: `sourceEventSeqs`, its elements, its ranged spelling in stored records, what it must cite.

The one parse of a citation list and every R7 check (docs/format/admission.md §4;
the ranged spelling of docs/format/persistence.md §2.5). The surface fold
(`kernel.folds.surface`) passes the nodes a replacement shadows, for R7f.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import lt
from typing import Any, Final

from kernel.errors import (
    ProvenanceError,
)
from kernel.values.events import ASSISTANT_MESSAGE
from kernel.values.json import (
    MAX_SAFE_INTEGER,
    FrozenArray,
    raw,
    safe_int,
    summary,
)

__all__ = (
    "PRESENT_NULL",
    "parse_source_seqs",
    "check_cited_tuple",
    "cites_earlier_in_order",
    "check_citations",
    "has_ranges",
    "expand_ranges",
)

PRESENT_NULL: Final = object()
"""Stands for a wire `sourceEventSeqs` key that is present with the value null."""


def parse_source_seqs(value: Any, where: str) -> tuple[int, ...]:
    """R7a and R7c: the citations as a tuple of non-negative ints."""
    if type(value) not in (list, tuple, FrozenArray):
        raise ProvenanceError(f"{where}: sourceEventSeqs must be an array (R7a)")
    items = raw(value)
    if all(type(s) is int for s in items) and (
        not items or (min(items) >= 0 and max(items) <= MAX_SAFE_INTEGER)
    ):
        return tuple(items)
    seqs = []
    for item in items:
        s = safe_int(item)
        if s is None or s < 0:
            raise ProvenanceError(
                f"{where}: sourceEventSeqs element {summary(item)} is not a non-negative "
                "safe int (R7c)"
            )
        seqs.append(s)
    return tuple(seqs)


def has_ranges(cited: Any) -> bool:
    """Whether a stored `sourceEventSeqs` uses ranges (docs/format/persistence.md §2.5)."""
    return type(cited) is list and list in map(type, cited)


def expand_ranges(cited: list[Any], seq: Any) -> list[int] | str:
    """A stored ranged `sourceEventSeqs` expanded (docs/format/persistence.md §2.5), or why not.

    Each element is a seq or a `[start, end]` pair (`start <= end`); the expansion
    must be strictly increasing and at most the event's own `seq` long, which bounds
    the work before any range is expanded. The reason names rule R7c.

    >>> expand_ranges([[5, 7], 9, 11, 12], 20)
    [5, 6, 7, 9, 11, 12]
    >>> expand_ranges([[7, 5]], 20)
    'sourceEventSeqs range [7, 5] runs backwards (R7c)'
    """
    budget = safe_int(seq)
    if budget is None or budget < 0:
        return f"sourceEventSeqs with ranges need the event's seq, got {summary(seq)} (R7c)"
    out: list[int] = []
    last = -1
    for item in cited:
        if type(item) is list:
            if len(item) != 2:
                return f"sourceEventSeqs element {summary(item)} is not a [start, end] range (R7c)"
            start, end = safe_int(item[0]), safe_int(item[1])
            if start is None or end is None or start < 0:
                return (
                    f"sourceEventSeqs range {summary(item)} does not hold two non-negative "
                    "safe ints (R7c)"
                )
            if start > end:
                return f"sourceEventSeqs range {summary(item)} runs backwards (R7c)"
        else:
            start = end = safe_int(item)
            if start is None or start < 0:
                return (
                    f"sourceEventSeqs element {summary(item)} is not a non-negative safe int (R7c)"
                )
        assert end is not None  # both ends were checked above
        if start <= last:
            return (
                f"sourceEventSeqs with ranges must expand to a strictly increasing list; "
                f"{start} follows {last} (R7c)"
            )
        if len(out) + (end - start + 1) > budget:
            return (
                f"sourceEventSeqs expands to more citations than the event's seq ({budget}) (R7c)"
            )
        out.extend(range(start, end + 1))
        last = end
    return out


def check_cited_tuple(sources: Any, where: str, seq: int | None = None) -> None:
    """R7a and R7c of an `Event` citation field: None, or a tuple of non-negative safe ints."""
    if sources is None:
        return
    if type(sources) is not tuple:
        raise ProvenanceError(f"{where}: source_event_seqs must be a tuple (R7a)", seq=seq)
    for source in sources:
        if type(source) is not int or not 0 <= source <= MAX_SAFE_INTEGER:
            raise ProvenanceError(
                f"{where}: source_event_seqs element {summary(source)} is not a "
                "non-negative safe integer (R7c)",
                seq=seq,
            )


def cites_earlier_in_order(seq: int, sources: Any) -> bool:
    """Whether `sources` is a non-empty tuple of seqs before `seq`, increasing (so none
    twice): R7a-e hold for it, without the general check."""
    return (
        type(sources) is tuple
        and bool(sources)
        and sources[-1] < seq
        and (len(sources) == 1 or all(map(lt, sources, sources[1:])))
    )


def check_citations(
    event_type: str, seq: int, sources: Any, shadowed: Sequence[int], where: str
) -> None:
    """R7a-f of a surface event citing `sources` (a tuple, a wire array, None or
    `PRESENT_NULL`), `shadowed` the nodes its replacement shadows (empty for an append)."""
    if cites_earlier_in_order(seq, sources) and (
        not shadowed
        or (shadowed[0] in sources if len(shadowed) == 1 else set(sources).issuperset(shadowed))
    ):
        return  # the common citations, covering every shadowed node
    if sources is None:
        if shadowed:
            raise ProvenanceError(
                f"{where}: sourceEventSeqs must include every shadowed node; "
                f"missing {list(shadowed)} (R7f)",
                seq=seq,
            )
        return
    if sources is PRESENT_NULL:
        raise ProvenanceError(f"{where}: sourceEventSeqs must be an array (R7a)", seq=seq)
    cited = sources if type(sources) is tuple else parse_source_seqs(sources, where)
    if not cited and event_type != ASSISTANT_MESSAGE:
        raise ProvenanceError(
            f"{where}: sourceEventSeqs must not be empty except on assistant/message (R7b)",
            seq=seq,
        )
    cited_set = set(cited)
    if len(cited_set) != len(cited):
        raise ProvenanceError(
            f"{where}: sourceEventSeqs must not contain duplicates (R7d)", seq=seq
        )
    if cited and max(cited) >= seq:
        later = next(s for s in cited if s >= seq)
        raise ProvenanceError(
            f"{where}: sourceEventSeqs must reference earlier events; {later} >= {seq} (R7e)",
            seq=seq,
        )
    missing = [s for s in shadowed if s not in cited_set]
    if missing:
        raise ProvenanceError(
            f"{where}: sourceEventSeqs must include every shadowed node; missing {missing} (R7f)",
            seq=seq,
        )
