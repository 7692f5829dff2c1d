"""R7a and R7c: the elements of `sourceEventSeqs`, and their ranged spelling in stored records.

The one parse of a citation list (docs/format/admission.md §4, R7; the ranged
spelling of docs/format/persistence.md §2.5). The rules that need the log's
surface (R7b, R7d-f) run in the surface fold (`kernel.surface`).
"""

from __future__ import annotations

from typing import Any

from kernel.errors import (
    ProvenanceError,
)
from kernel.json import (
    MAX_SAFE_INTEGER,
    FrozenArray,
    raw,
    safe_int,
    summary,
)

__all__ = (
    "parse_source_seqs",
    "has_ranges",
    "expand_ranges",
)


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
