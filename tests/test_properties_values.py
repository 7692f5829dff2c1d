"""Lossless JSON and snapshots: P8, P9, P10 (docs/format/properties.md §3)."""

from typing import Any

from hypothesis import given

from properties import laws
from properties import strategies as gen
from properties.json_values import BadJson
from properties.loop import LoopLog


@given(gen.json_values())
def test_p8_lossless_json_accepted(value: Any) -> None:
    laws.law_lossless_json_accepted(value)


@given(gen.deep_chains())
def test_p8_deep_json_accepted_without_recursion(value: Any) -> None:
    laws.law_deep_json_accepted(value)


@given(gen.bad_json())
def test_p9_lossy_json_rejected(bad: BadJson) -> None:
    laws.law_lossy_json_rejected(bad)


@given(gen.loop_logs(max_actions=3))
def test_p10_snapshot_isolation(log: LoopLog) -> None:
    laws.law_snapshot_isolation(log)
