"""Benchmark: how fast a seeded kernel bug is found and shrunk, and how small the example ends.

    python3 benchmarks/shrinking.py                # 5 seeds per bug
    python3 benchmarks/shrinking.py --seeds 10 --show

Three bugs are seeded, each given to the law as a broken `Implementation`:

* "drop a closer": `interrupted_turn_closers` loses its last closer (caught by P30
  on G-crash prefixes);
* "reorder a replace": `fold_surface` puts each replacement node at the end of the
  surface instead of where the range was (caught by P15 on G-loop logs);
* "accept a duplicate call id": the invariant checker steps a tracker that keeps
  answered calls pending, so a second `tool/result` for the same call id is accepted
  (caught by P29 on the "duplicate tool/result" perturbation).

For each bug and seed: the time to the first failing example (generation only),
the time to find and shrink it, and the number of events in the final (shrunk)
example. Not a timed test: figures go to docs/properties.md.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, Final

import msgspec
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.reporting import with_reporter

from kernel.errors import InvariantViolation
from kernel.folds.closers import interrupted_turn_closers
from kernel.folds.invariants import InvariantState, Violation
from kernel.folds.surface import fold_surface
from kernel.values.events import TOOL_RESULT
from properties import laws
from properties import strategies as gen
from properties.laws import Implementation
from properties.strategies import PERTURBATIONS, perturbations

__all__ = ("BUGS", "Bug", "DUPLICATES_KEPT", "measure", "main")


class Bug(msgspec.Struct, frozen=True):
    """A seeded bug: what to patch while it runs (if anything), the generator and the law,
    given the broken implementation, that should catch it."""

    name: str
    seeded: Callable[[], Any]
    strategy: Callable[[], st.SearchStrategy[Any]]
    law: Callable[[Any], None]
    size: Callable[[Any], int]


def _closer_dropped(events: Any) -> Any:
    return interrupted_turn_closers(events)[:-1]


def _replace_reordered(events: Any, base: int = 0) -> Any:
    fold = fold_surface(events, base)
    nodes = list(fold.nodes)
    for r in fold.replacements:
        if r.seq in nodes:
            nodes.remove(r.seq)
            nodes.append(r.seq)
    return type(fold)(tuple(nodes), fold.replacements)


def _duplicates_kept(events: Any) -> tuple[Violation, ...]:
    """`check_invariants` stepping a tracker that keeps the calls pending before a
    `tool/result` pending after it, answered or not."""
    state, found = InvariantState(), []
    for event in events:
        after, violations = state.step(event)
        if event.type == TOOL_RESULT and after.open_step is not None:
            after = msgspec.structs.replace(
                after, pending_calls=after.pending_calls | state.pending_calls
            )
        state = after
        found.extend(violations)
    return tuple(found)


def _duplicates_kept_strict(events: Any) -> None:
    found = _duplicates_kept(events)
    if found:
        raise InvariantViolation(f"event seq {found[0].seq}: {found[0].message}", seq=found[0].seq)


DUPLICATES_KEPT: Final = Implementation(
    check_invariants=_duplicates_kept, check_invariants_strict=_duplicates_kept_strict
)
"""The third seeded bug as an implementation: answered calls stay pending."""


def _prefix_law(case: Any) -> None:
    broken = Implementation(interrupted_turn_closers=_closer_dropped)
    laws.law_crash_prefix_repairs(case.events, implementation=broken)


def _surface_law(log: Any) -> None:
    laws.law_surface_nodes_sane(log, implementation=Implementation(fold_surface=_replace_reordered))


def _duplicates_law(p: Any) -> None:
    laws.law_perturbations_caught(p, implementation=DUPLICATES_KEPT)


def _duplicates() -> st.SearchStrategy[Any]:
    if "duplicate tool/result" not in PERTURBATIONS:
        raise LookupError("no generator draws a duplicate tool/result")
    return perturbations("duplicate tool/result")


BUGS: tuple[Bug, ...] = (
    Bug(
        "drop a closer",
        nullcontext,
        gen.crash_prefixes,
        _prefix_law,
        lambda case: case[1],
    ),
    Bug(
        "reorder a replace",
        nullcontext,
        gen.loop_logs,
        _surface_law,
        len,
    ),
    Bug(
        "accept a duplicate call id",
        nullcontext,
        _duplicates,
        _duplicates_law,
        lambda p: len(p.events),
    ),
)


class Run(msgspec.Struct, frozen=True):
    """One seed's figures: seconds to find, to find and shrink, to find, shrink and explain
    (Hypothesis's default phases; None unless measured), events in the shrunk example."""

    find: float | None
    total: float | None
    events: int | None
    report: str
    explained: float | None = None


def _run(bug: Bug, strategy: st.SearchStrategy[Any], phases: tuple[Phase, ...], at: int) -> Run:
    sizes: list[int] = []
    lines: list[str] = []

    @seed(at)
    @settings(
        database=None,
        max_examples=2000,
        deadline=None,
        phases=phases,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def test(value: Any) -> None:
        try:
            bug.law(value)
        except AssertionError:
            sizes.append(bug.size(value))
            raise

    start = time.perf_counter()
    with bug.seeded(), with_reporter(lines.append):
        try:
            test()
        except (AssertionError, ExceptionGroup) as exc:
            # Several distinct failures (different checks of the law) come as a group.
            elapsed = time.perf_counter() - start
            return Run(elapsed, elapsed, sizes[-1], "\n".join([*lines, str(exc)]))
    return Run(None, None, None, "not caught")


def measure(bug: Bug, at: int, *, explain: bool = False) -> Run:
    """Find (generation only), then find and shrink (and explain), `bug` under seed `at`."""
    try:
        strategy = bug.strategy()
    except LookupError as exc:
        return Run(None, None, None, str(exc))
    found = _run(bug, strategy, (Phase.generate,), at)
    if found.find is None:
        return found
    shrunk = _run(bug, strategy, (Phase.generate, Phase.shrink), at)
    explained = None
    if explain:
        explained = _run(bug, strategy, (Phase.generate, Phase.shrink, Phase.explain), at).total
    return Run(found.find, shrunk.total, shrunk.events, shrunk.report, explained)


def _fmt(values: list[float]) -> str:
    if not values:
        return "-"
    return f"median {statistics.median(values):.2f} s, max {max(values):.2f} s"


def main(argv: list[str] | None = None) -> None:
    """Print one line per bug: find time, find+shrink time, events in the shrunk example."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--show", action="store_true", help="print the first seed's report")
    parser.add_argument(
        "--explain", action="store_true", help="also time Hypothesis's explain phase"
    )
    args = parser.parse_args(argv)
    for bug in BUGS:
        runs = [measure(bug, at, explain=args.explain) for at in range(args.seeds)]
        caught = [r for r in runs if r.find is not None]
        finds = [r.find for r in caught if r.find is not None]
        totals = [r.total for r in caught if r.total is not None]
        events = sorted(r.events for r in caught if r.events is not None)
        explained = [r.explained for r in caught if r.explained is not None]
        print(
            f"{bug.name}: caught {len(caught)}/{len(runs)}; find {_fmt(finds)}; "
            f"find+shrink {_fmt(totals)}; shrunk example events {events}"
            + (f"; find+shrink+explain {_fmt(explained)}" if args.explain else "")
        )
        if args.show:
            print("\n".join("    " + line for line in runs[0].report.splitlines()))


if __name__ == "__main__":
    main()
