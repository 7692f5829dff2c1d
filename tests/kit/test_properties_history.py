"""Derived history: P1, P2, P5, P6, P19, P20, P21 (docs/format/properties.md §2, §5)."""

from hypothesis import given
from hypothesis import strategies as st

from properties import laws
from properties import strategies as gen
from properties.strategies import Interleaving, LoopLog

_LOGS = st.one_of(gen.loop_logs(shape="any"), gen.interleavings().map(lambda i: i.mixed))


@given(_LOGS)
def test_p1_deterministic_derivation(log: object) -> None:
    laws.law_deterministic_derivation(log)


@given(_LOGS)
def test_p2_contiguous_sequence(log: object) -> None:
    laws.law_contiguous_sequence(log)


@given(gen.interleavings())
def test_p5_non_message_events_never_change_history(case: Interleaving) -> None:
    laws.law_noise_never_changes_history(case.messages, case.mixed)


@given(gen.loop_logs(shape="any"))
def test_p6_derived_messages_are_safe_to_hand_out(log: LoopLog) -> None:
    laws.law_derived_messages_are_safe(log)


@given(_LOGS)
def test_p19_projection(log: object) -> None:
    laws.law_projection(log)


@given(_LOGS)
def test_p20_cache_equivalence(log: object) -> None:
    laws.law_message_cache(log)


@given(gen.loop_logs(shape="any"))
def test_p21_tool_pairing_in_loop_logs(log: LoopLog) -> None:
    laws.law_loop_tool_pairing(log)
