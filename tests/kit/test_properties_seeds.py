"""Seeds, end-seed markers and forks: P3, P4, P12, P44, P45 (docs/format/properties.md §2, §3,
§10)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from properties import laws
from properties import strategies as gen
from properties.strategies import LoopLog

_NOW = st.integers(-(2**53) + 1, 2**53 - 1)


@pytest.mark.slow
@given(gen.loop_logs(shape="any"), _NOW)
def test_p3_replay_from_seed(log: LoopLog, now: int) -> None:
    laws.law_replay_from_seed(log, now)


@given(gen.loop_logs(shape="any"), _NOW, _NOW)
def test_p4_reseeding_is_idempotent(log: LoopLog, now: int, later: int) -> None:
    laws.law_reseed_idempotent(log, now, later)


@given(gen.loop_logs(shape="any"))
def test_p12_seed_equals_append(log: LoopLog) -> None:
    laws.law_seed_equals_append(log)


@given(gen.loop_logs(shape="any"), _NOW)
def test_p44_end_seed_position(log: LoopLog, now: int) -> None:
    laws.law_end_seed_position(log, now)


@given(gen.crash_prefixes(max_actions=4, shape="any"))
def test_p44_end_seed_position_after_a_crash_prefix(case: tuple[LoopLog, int]) -> None:
    log, k = case
    laws.law_end_seed_position(log.events[:k])


@given(gen.loop_logs(max_actions=4, shape="any"))
def test_p45_fork_prefix(log: LoopLog) -> None:
    laws.law_fork_prefix(log)
