"""Exhaustive crash prefixes: every event cut and every byte cut of a bounded family (P30-P35, P37).

The family size follows `PROPERTIES_EXHAUSTIVE` (`tiny`, `small`, `full`); by default
`tiny` under the `ci` Hypothesis profile and `small` under `deep`.
"""

import os

import pytest

from properties.exhaustive import SIZES, family, run


def _size() -> str:
    default = "small" if os.environ.get("HYPOTHESIS_PROFILE") == "deep" else "tiny"
    size = os.environ.get("PROPERTIES_EXHAUSTIVE", default)
    assert size in SIZES, f"PROPERTIES_EXHAUSTIVE must be one of {SIZES}, not {size!r}"
    return size


@pytest.mark.slow
def test_every_event_cut_and_byte_cut_repairs() -> None:
    report = run(family(_size()))
    assert report.logs >= 7 and report.byte_cuts > report.prefixes > report.logs
