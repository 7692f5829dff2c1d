"""Laws on relational invariants (docs/format/properties.md §7: P28, P28a, P29)."""

from __future__ import annotations

from typing import Any

from kernel.errors import InvariantViolation
from properties._model import violations_of
from properties._mutations import Perturbation
from properties._report import check, violated
from properties.laws._common import as_events, as_wire
from properties.laws._implementation import KERNEL, Implementation

__all__ = ("law_loop_logs_well_formed", "law_all_violations", "law_perturbations_caught")


def law_loop_logs_well_formed(log: Any, *, implementation: Implementation = KERNEL) -> None:
    """P28: every G-loop log passes `check_invariants` (and the fail-fast checker)."""
    law = "P28 loop logs are well-formed"
    events = as_events(log)
    found = implementation.check_invariants(events)
    check(
        not found,
        law,
        f"violations {list(found)}",
        log=as_wire(log),
        seq=found[0].seq if found else None,
    )
    raised = _fail_fast(implementation, events, law, as_wire(log))
    if raised is not None:
        violated(law, f"the fail-fast checker raised {raised}", log=as_wire(log), seq=raised.seq)


def _fail_fast(
    implementation: Implementation, events: Any, law: str, log: Any
) -> InvariantViolation | None:
    """What the fail-fast checker raises for `events`: its `InvariantViolation`, or None when it
    accepts them. Any other exception is a violation of `law`, reported as one."""
    try:
        implementation.check_invariants_strict(events)
    except InvariantViolation as exc:
        return exc
    except Exception as exc:  # the implementation under test is judged, not trusted
        violated(
            law,
            f"the fail-fast checker raised {type(exc).__name__}: {exc}, not InvariantViolation",
            log=log,
        )
    return None


def law_all_violations(log: Any, *, implementation: Implementation = KERNEL) -> None:
    """P28a: `check_invariants` returns one violation per failed condition, in log order (the
    reference tracker's list); empty iff the fail-fast checker accepts; its first element is the
    fail-fast checker's violation."""
    law = "P28a all violations"
    events = as_events(log)
    wire = as_wire(log)
    found = implementation.check_invariants(events)
    got = [(v.seq, v.rule) for v in found]
    expected = [(v.seq, v.condition) for v in violations_of(wire)]
    check(
        got == expected,
        law,
        "violations differ from the reference tracker",
        log=wire,
        seq=_first_seq(got, expected),
        kernel=got,
        model=expected,
    )
    seqs = [v.seq for v in found]
    check(seqs == sorted(seqs), law, f"violations are not in log order: {seqs}", log=wire)
    raised = _fail_fast(implementation, events, law, wire)
    if raised is not None:
        check(
            bool(found), law, "the fail-fast checker raised but check_invariants is empty", log=wire
        )
        check(
            raised.seq == found[0].seq,
            law,
            f"fail-fast seq {raised.seq} != first violation {found[0]}",
            log=wire,
        )
        return
    check(not found, law, f"the fail-fast checker accepted a log with violations {got}", log=wire)


def law_perturbations_caught(p: Perturbation, *, implementation: Implementation = KERNEL) -> None:
    """P29: a perturbed loop log (turn/step renumbered, a step/end or turn/end deleted, a header
    moved out of its turn) makes the checker raise `InvariantViolation`."""
    law = f"P29 perturbations are caught [{p.kind}]"
    events = as_events(p.events)
    edited = _first_edit(p)
    check(
        bool(implementation.check_invariants(events)),
        law,
        "check_invariants found nothing (the edited event is marked)",
        log=list(p.events),
        seq=edited,
    )
    if _fail_fast(implementation, events, law, list(p.events)) is not None:
        return
    violated(
        law,
        "the fail-fast checker did not raise InvariantViolation (the edited event is marked)",
        log=list(p.events),
        seq=edited,
    )


def _first_seq(got: list[tuple[int, str]], expected: list[tuple[int, str]]) -> int | None:
    """The seq of the first entry where two violation lists differ."""
    for a, b in zip([*got, None], [*expected, None], strict=False):
        if a != b:
            return min(x[0] for x in (a, b) if x is not None)
    return None


def _first_edit(p: Perturbation) -> int | None:
    """The seq of the first event of `p.events` that differs from `p.original` (by type and
    data: seqs shift after a deletion or an insertion)."""
    for before, after in zip(p.original, p.events, strict=False):
        if (before["type"], before["data"]) != (after["type"], after["data"]):
            return int(after["seq"])
    return None
