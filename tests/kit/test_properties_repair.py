"""Crash repair: P30-P35 over every kind of crash prefix (docs/format/properties.md §8)."""

from hypothesis import given

from properties import laws
from properties import strategies as gen
from properties.strategies import LoopLog

Case = tuple[LoopLog, int]


@given(gen.crash_prefixes(min_actions=1, min_steps=1, shape="any"))
def test_p30_every_crash_prefix_repairs_to_a_valid_log(case: Case) -> None:
    log, k = case
    laws.law_crash_prefix_repairs(log.events[:k])


@given(gen.crash_prefixes(min_actions=1, min_steps=1, shape="any"))
def test_p31_repair_is_idempotent(case: Case) -> None:
    log, k = case
    laws.law_repair_idempotent(log.events[:k])


@given(gen.crash_prefixes(max_actions=4, min_actions=1, min_steps=1, shape="any"))
def test_p31_load_commit_load_writes_once(case: Case) -> None:
    log, k = case
    laws.law_repair_cycle_writes_once(log.events[:k])


@given(gen.crash_prefixes(max_actions=4, min_actions=1, min_steps=1, shape="any"))
def test_p32_repair_is_append_only(case: Case) -> None:
    log, k = case
    laws.law_repair_append_only(log.events[:k])


@given(gen.crash_prefixes(min_actions=1, min_steps=1, shape="any"))
def test_p33_closers_are_empty_iff_the_last_turn_is_closed(case: Case) -> None:
    log, k = case
    laws.law_closer_emptiness(log.events[:k])


@given(gen.crash_prefixes(min_actions=1, min_steps=1, shape="any"))
def test_p34_synthetic_results(case: Case) -> None:
    log, k = case
    laws.law_synthetic_results(log.events[:k])


@given(gen.crash_prefixes(min_actions=1, min_steps=1, shape="any"))
def test_p35_closers_are_deterministic(case: Case) -> None:
    log, k = case
    laws.law_closers_deterministic(log.events[:k])
