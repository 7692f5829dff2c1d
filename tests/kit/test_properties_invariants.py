"""Relational invariants: P28, P28a, P29 (docs/format/properties.md §7)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from properties import laws
from properties import strategies as gen
from properties.profiles import share_of_examples
from properties.strategies import PERTURBATIONS, LoopLog, Perturbation


@given(gen.loop_logs(shape="any"))
def test_p28_loop_logs_are_well_formed(log: LoopLog) -> None:
    laws.law_loop_logs_well_formed(log)


@given(
    st.one_of(
        gen.loop_logs(shape="any"),
        gen.perturbations(shape="any").map(lambda p: p.events),
        gen.interleavings().map(lambda i: i.mixed),
    )
)
def test_p28a_all_violations(log: object) -> None:
    laws.law_all_violations(log)


@pytest.mark.slow
@pytest.mark.parametrize("kind", PERTURBATIONS)
@share_of_examples(4, minimum=4)
@given(data=st.data())
def test_p29_perturbations_are_caught(kind: str, data: st.DataObject) -> None:
    p: Perturbation = data.draw(gen.perturbations(kind, shape="any"))
    laws.law_perturbations_caught(p)
