"""Surface fold: P14-P17 (properties.md §4)."""

from hypothesis import given
from hypothesis import strategies as st

from properties import laws
from properties import strategies as gen
from properties.loop import LoopLog

_LOGS = st.one_of(gen.loop_logs(), gen.interleavings().map(lambda i: i.mixed))


@given(_LOGS)
def test_p14_incremental_equals_complete(log: object) -> None:
    laws.law_incremental_surface(log)


@given(_LOGS)
def test_p15_node_sanity(log: object) -> None:
    laws.law_surface_nodes_sane(log)


@given(_LOGS)
def test_p16_node_count(log: object) -> None:
    laws.law_surface_node_count(log)


@given(gen.loop_logs(), st.integers(0, 200))
def test_p17_windowed_fold(log: LoopLog, base: int) -> None:
    laws.law_windowed_fold(log, base % (len(log.events) + 1))


@given(gen.interleavings(), st.integers(0, 200))
def test_p17_windowed_fold_over_arbitrary_replacements(case: object, base: int) -> None:
    mixed = case.mixed  # type: ignore[attr-defined]
    laws.law_windowed_fold(mixed, base % (len(mixed) + 1))
