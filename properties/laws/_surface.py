"""Laws on the surface fold (docs/format/properties.md §4: P14-P17)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from kernel.errors import ReplaceRangeError
from kernel.folds.surface import is_surface_event
from properties._model import surface_of
from properties._report import check, violated
from properties.laws._common import append_all, as_events, as_wire
from properties.laws._implementation import KERNEL, Implementation

__all__ = (
    "law_incremental_surface",
    "law_surface_nodes_sane",
    "law_surface_node_count",
    "law_windowed_fold",
)


def law_incremental_surface(log: Any, *, implementation: Implementation = KERNEL) -> None:
    """P14: after every append, the incremental nodes and replace generation equal the
    complete fold."""
    law = "P14 incremental = complete"
    wire = as_wire(log)
    for n, session in enumerate(append_all(wire), start=1):
        full = implementation.fold_surface(session.events)
        check(
            list(session.surface.nodes) == list(full.nodes),
            law,
            f"after {n} appends the incremental nodes differ from fold_surface",
            log=wire[:n],
            incremental=list(session.surface.nodes),
            complete=list(full.nodes),
        )
        check(
            session.surface.replace_generation == len(full.replacements),
            law,
            f"after {n} appends replace_generation is {session.surface.replace_generation}, "
            f"fold_surface has {len(full.replacements)} replacements",
            log=wire[:n],
        )


def law_surface_nodes_sane(log: Any, *, implementation: Implementation = KERNEL) -> None:
    """P15: nodes are distinct surface-event seqs; never-shadowed surface events are nodes;
    every shadowed seq is in exactly one replacement, off the surface, and cited by it."""
    law = "P15 node sanity"
    events = as_events(log)
    wire = as_wire(log)
    fold = implementation.fold_surface(events)
    nodes = list(fold.nodes)
    check(len(set(nodes)) == len(nodes), law, f"duplicate nodes {nodes}", log=wire)
    for s in nodes:
        check(is_surface_event(events[s]), law, f"node {s} is not a surface event", log=wire)
    shadow_count = Counter(s for r in fold.replacements for s in r.shadowed_seqs)
    surface_seqs = {e.seq for e in events if is_surface_event(e)}
    for s in sorted(surface_seqs - set(shadow_count)):
        check(s in nodes, law, f"surface event {s} was never shadowed but is not a node", log=wire)
    for r in fold.replacements:
        cited = set(events[r.seq].source_event_seqs or ())
        for s in r.shadowed_seqs:
            check(
                shadow_count[s] == 1, law, f"seq {s} is shadowed {shadow_count[s]} times", log=wire
            )
            check(s not in nodes, law, f"shadowed seq {s} is still a node", log=wire)
            check(s in cited, law, f"replacement {r.seq} shadows {s} without citing it", log=wire)
    model = surface_of(wire)
    first = next(
        (min(a, b) for a, b in zip(nodes, model.nodes, strict=False) if a != b),
        None,
    )
    check(
        nodes == model.nodes
        and [(r.seq, r.start, r.end, tuple(r.shadowed_seqs)) for r in fold.replacements]
        == model.replacements,
        law,
        "fold_surface disagrees with the reference model (first differing node marked)",
        log=wire,
        seq=first,
        kernel=nodes,
        model=model.nodes,
    )


def law_surface_node_count(log: Any, *, implementation: Implementation = KERNEL) -> None:
    """P16: `len(nodes) == #surface events - sum of len(shadowedSeqs)`."""
    law = "P16 node count"
    events = as_events(log)
    fold = implementation.fold_surface(events)
    surface_events = sum(1 for e in events if is_surface_event(e))
    shadowed = sum(len(r.shadowed_seqs) for r in fold.replacements)
    check(
        len(fold.nodes) == surface_events - shadowed,
        law,
        f"{len(fold.nodes)} nodes, but {surface_events} surface events - {shadowed} shadowed",
        log=as_wire(log),
    )


def law_windowed_fold(log: Any, base: int, *, implementation: Implementation = KERNEL) -> None:
    """P17: when no replacement at or after `base` names a seq before it, the windowed fold is
    the complete fold's nodes from `base` on; when one does, it raises `ReplaceRangeError`."""
    law = f"P17 windowed fold (base {base})"
    events = as_events(log)
    wire = as_wire(log)
    base = min(base, len(events))
    full = implementation.fold_surface(events)
    reaches_back = any(
        r.seq >= base and (r.start < base or r.end < base) for r in full.replacements
    )
    try:
        window = implementation.fold_surface(events[base:], base=base)
    except ReplaceRangeError:
        if reaches_back:
            return
        violated(law, "the windowed fold raised although no replacement reaches back", log=wire)
    if reaches_back:
        violated(law, "a replacement names a seq before the window, but no error", log=wire)
    expected = [s for s in full.nodes if s >= base]
    check(
        list(window.nodes) == expected,
        law,
        "windowed nodes differ from the complete fold's nodes at or after base",
        log=wire,
        window=list(window.nodes),
        expected=expected,
    )
