"""Laws check the implementation they are given: a researcher's closer, fold or checker.

A law called with `implementation=` checks those functions, the state machine checks them
through `SessionLogMachine.against`, and a broken user-supplied closer is found and reported
as events: the law's message shows the repaired log one wire event per line, and Hypothesis's
note shows the shrunk `CrashPrefix` the same way.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import Phase, given, settings
from hypothesis.stateful import run_state_machine_as_test

from kernel import (
    Event,
    check_invariants,
    derive_messages,
    fold_surface,
    interrupted_turn_closers,
)
from properties import laws
from properties import strategies as gen
from properties.exhaustive import family
from properties.laws import KERNEL, Implementation, LawViolation
from properties.machine import SessionLogMachine
from properties.profiles import PROFILES, fast_settings

_WIRE_LINE = re.compile(r'^(>>)?\s*\[\d+\] \{"type":"[a-z/-]+","seq":\d+,', re.M)


def forgets_the_turn_end(events: Any) -> tuple[Event, ...]:
    """A user's closer with a bug: it never closes the open turn."""
    return tuple(e for e in interrupted_turn_closers(events) if e.type != "turn/end")


BROKEN = Implementation(interrupted_turn_closers=forgets_the_turn_end)


def test_the_default_implementation_is_the_kernels() -> None:
    assert Implementation() == KERNEL
    assert KERNEL.interrupted_turn_closers is interrupted_turn_closers
    assert KERNEL.fold_surface is fold_surface
    assert KERNEL.derive_messages is derive_messages
    assert KERNEL.check_invariants is check_invariants
    assert BROKEN.fold_surface is fold_surface, "a field left out stays the kernel's"


def test_a_broken_user_closer_is_found_and_reported_as_events() -> None:
    tried: list[gen.CrashPrefix] = []

    @fast_settings(max_examples=200, database=None, derandomize=True)
    @given(gen.crash_prefixes())
    def test_my_closers(case: gen.CrashPrefix) -> None:
        tried.append(case)
        laws.law_crash_prefix_repairs(case.events, implementation=BROKEN)

    with pytest.raises(LawViolation) as caught:
        test_my_closers()
    message = str(caught.value)
    assert message.startswith("P30 every crash prefix repairs to a valid log: ")
    assert "still has an open turn" in message
    shrunk = tried[-1]
    assert shrunk.k <= 3, message
    # The law's log: the repaired prefix, one wire event per line, the offending one marked.
    shown = _WIRE_LINE.findall(message)
    assert len(shown) == shrunk.k + len(forgets_the_turn_end(shrunk.events)), message
    assert ">>" in shown
    # Hypothesis's falsifying example: the CrashPrefix as its events, not strategy calls.
    notes = "\n".join(getattr(caught.value, "__notes__", []))
    assert f"CrashPrefix({shrunk.k} of {len(shrunk.log.events)} events)" in notes, notes
    assert len(_WIRE_LINE.findall(notes)) == shrunk.k, notes
    # The same examples pass against the kernel's closer: the failure is the user's.
    for case in tried:
        laws.law_crash_prefix_repairs(case.events)


def test_every_repair_law_takes_the_implementation() -> None:
    """Each closer law, given the broken closer on a prefix inside an open step, fails."""
    log = max(family("tiny"), key=len)
    events = log.kernel_events()
    k = max(i for i in range(1, len(events) + 1) if events[i - 1].type == "step/start")
    prefix = events[:k]
    for law in (
        laws.law_crash_prefix_repairs,
        laws.law_repair_append_only,
        laws.law_closer_emptiness,
    ):
        law(prefix)
        with pytest.raises(LawViolation):
            law(prefix, implementation=BROKEN)


def test_the_machine_checks_the_implementation_it_is_given() -> None:
    machine = SessionLogMachine.against(BROKEN)
    assert machine.implementation is BROKEN and SessionLogMachine.implementation is KERNEL
    quick = settings(
        max_examples=60,
        stateful_step_count=12,
        database=None,
        derandomize=True,
        deadline=None,
        phases=(Phase.generate,),
    )
    with pytest.raises(LawViolation, match="machine: reload"):
        run_state_machine_as_test(machine, settings=quick)


def test_crash_prefixes_are_kernel_events() -> None:
    log = max(family("tiny"), key=len)
    case = gen.CrashPrefix(log, len(log) - 1)
    assert all(isinstance(e, Event) for e in case.events)
    assert check_invariants(case.events) == ()
    assert interrupted_turn_closers(case.events) == interrupted_turn_closers(
        log.kernel_events()[: case.k]
    )
    assert case.wire() == list(log.events[: case.k])


def test_fast_settings_leave_out_explain_and_let_the_caller_override() -> None:
    before = settings.default
    fast = fast_settings(max_examples=25)
    assert settings.default is before
    assert Phase.explain not in fast.phases and Phase.shrink in fast.phases
    assert (fast.max_examples, fast.deadline) == (25, None)
    assert fast_settings(phases=list(Phase)).phases == tuple(Phase)
    for profile in PROFILES.values():
        assert profile["phases"] == fast.phases
