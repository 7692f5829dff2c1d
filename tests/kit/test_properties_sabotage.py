"""The laws have teeth: each fails when the kernel function it checks is sabotaged.

Every test gives a law a subtly wrong version of one function, as an `Implementation`
(or, for the functions a law does not take as one, by patching the law's module),
and runs the law on a fixed log from the exhaustive family.
"""

from collections.abc import Callable
from typing import Any

import pytest

from kernel import derive_messages, fold_surface, interrupted_turn_closers
from kernel.values.events import Event
from properties import laws
from properties.exhaustive import family
from properties.laws import Implementation, LawViolation
from properties.laws import _header as header_laws
from properties.laws import _seeds as seed_laws
from properties.strategies import LoopLog

_LOGS = list(family("tiny"))
_RICH = max(_LOGS, key=lambda log: len(log.attempts) + len(log.events))


def _crash_prefix(log: LoopLog) -> tuple[Event, ...]:
    """The longest prefix of `log` that ends inside a step with an unanswered call."""
    events = log.kernel_events()
    for k in range(len(events), 0, -1):
        if events[k - 1].type == "tool/call":
            return events[:k]
    raise AssertionError("the family has no call")


def _drop_last(f: Callable[..., Any]) -> Callable[..., Any]:
    def broken(*args: Any, **kwargs: Any) -> Any:
        out = f(*args, **kwargs)
        return out[:-1]

    return broken


def test_p19_catches_a_derivation_that_drops_a_message() -> None:
    broken = Implementation(derive_messages=_drop_last(derive_messages))
    with pytest.raises(LawViolation, match="P19"):
        laws.law_projection(_RICH, implementation=broken)


def test_p21_catches_a_history_missing_a_result() -> None:
    def without_results(events: Any) -> Any:
        return tuple(
            m for m in derive_messages(events) if m["content"][0].get("type") != "tool-result"
        )

    with pytest.raises(LawViolation, match="P21"):
        laws.law_loop_tool_pairing(
            _RICH, implementation=Implementation(derive_messages=without_results)
        )


def test_p15_catches_a_surface_that_loses_a_node() -> None:
    def broken(events: Any, base: int = 0) -> Any:
        fold = fold_surface(events, base)
        return type(fold)(fold.nodes[:-1], fold.replacements)

    with pytest.raises(LawViolation, match="P15"):
        laws.law_surface_nodes_sane(_RICH, implementation=Implementation(fold_surface=broken))


def test_p30_catches_closers_that_do_nothing() -> None:
    broken = Implementation(interrupted_turn_closers=lambda events: ())
    with pytest.raises(LawViolation, match="P30"):
        laws.law_crash_prefix_repairs(_crash_prefix(_RICH), implementation=broken)


def test_p34_catches_closers_without_synthetic_results() -> None:
    def broken(events: Any) -> Any:
        return tuple(e for e in interrupted_turn_closers(events) if e.type != "tool/result")

    with pytest.raises(LawViolation, match="P34"):
        laws.law_synthetic_results(
            _crash_prefix(_RICH), implementation=Implementation(interrupted_turn_closers=broken)
        )


def test_a_patched_module_name_does_not_reach_the_laws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only `implementation=` chooses what a law checks: patching a name changes nothing."""
    import kernel

    monkeypatch.setattr(kernel, "interrupted_turn_closers", lambda events: ())
    laws.law_crash_prefix_repairs(_crash_prefix(_RICH))


def test_p25_catches_a_writer_that_never_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    original = header_laws.header_event  # type: ignore[attr-defined]

    def broken(state: Any, header: Any, **kwargs: Any) -> Any:
        return None, original(state, header, **kwargs)[1]

    monkeypatch.setattr(header_laws, "header_event", broken)
    with pytest.raises(LawViolation, match="P25"):
        laws.law_writer_rules(_RICH)


def test_p45_catches_a_fork_inside_an_open_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_turn_check(events: Any, boundary: Any = None) -> Any:
        return tuple(events) if boundary is None else tuple(events)[: boundary + 1]

    monkeypatch.setattr(seed_laws, "fork_prefix", no_turn_check)
    with pytest.raises(LawViolation, match="P45"):
        laws.law_fork_prefix(_RICH)
