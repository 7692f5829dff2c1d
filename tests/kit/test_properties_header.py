"""Request header and context: P22-P27 (docs/format/properties.md §6)."""

from typing import Any

import pytest
from hypothesis import given

from properties import laws
from properties import strategies as gen
from properties.laws import HEADER_CHANGES
from properties.profiles import share_of_examples
from properties.strategies import LoopLog


@given(gen.request_headers())
def test_p22_canonicalization_is_idempotent(header: dict[str, Any]) -> None:
    laws.law_canonical_idempotent(header)


@pytest.mark.parametrize("change", sorted(HEADER_CHANGES))
@share_of_examples(5, minimum=4)
@given(a=gen.request_headers(), b=gen.request_headers())
def test_p23_equality(change: str, a: dict[str, Any], b: dict[str, Any]) -> None:
    laws.law_header_equality(a, b, change)


@pytest.mark.slow
@given(gen.loop_logs(shape="any"))
def test_p24_fold_composition(log: LoopLog) -> None:
    laws.law_header_fold_composes(log)


@pytest.mark.slow
@given(gen.loop_logs(max_actions=8, min_actions=3, min_steps=1, shape="any"))
def test_p25_writer_rules(log: LoopLog) -> None:
    laws.law_writer_rules(log)


@pytest.mark.slow
@given(gen.loop_logs(max_actions=8, min_actions=3, min_steps=1, shape="any"))
def test_p26_reconstruction(log: LoopLog) -> None:
    laws.law_request_reconstruction(log)


@given(gen.loop_logs(max_actions=8, min_actions=3, min_steps=1, shape="any"))
def test_p27_context_writer(log: LoopLog) -> None:
    laws.law_context_writer(log)
