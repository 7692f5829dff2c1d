"""Packed chunk rows: P7, P42, P43 (docs/format/properties.md §2, §9)."""

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from properties import laws
from properties import strategies as gen
from properties._batches import BatchItem, build_batch
from properties.laws import ROW_CORRUPTIONS
from properties.profiles import share_of_examples


@pytest.mark.slow
@given(gen.chunk_batches())
def test_p7_chunk_row_round_trip(batch: list[dict[str, Any]]) -> None:
    laws.law_chunk_row_round_trip(batch)


@given(gen.chunk_batches(), st.integers(0, 50), st.integers(3, 6), st.integers(0, 400))
def test_p42_packing_is_batch_local(
    batch: list[dict[str, Any]], split: int, max_members: int, max_bytes: int
) -> None:
    laws.law_packing_batch_local(batch, split)
    laws.law_packing_batch_local(batch, split, max_members, max_bytes)


@pytest.mark.slow
def test_p42_sqlite_bounds_on_a_long_run() -> None:
    item = BatchItem("text", 0, 1, 1, "x" * 700, "c1", None, 1, None)
    laws.law_packing_batch_local(build_batch([item] * 2100), 1000)


@pytest.mark.parametrize("corruption", sorted(ROW_CORRUPTIONS))
@share_of_examples(10, minimum=3)
@given(row=gen.chunk_rows())
def test_p43_chunk_row_validation(corruption: str, row: dict[str, Any]) -> None:
    laws.law_chunk_row_validation(row, corruption)
