"""Hypothesis settings profiles: `ci` (bounded, derandomized) and `deep` (100x examples).

Select one with `pytest --hypothesis-profile=deep` or `HYPOTHESIS_PROFILE=deep`.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

__all__ = ("CI_EXAMPLES", "register_profiles", "share_of_examples")

CI_EXAMPLES = 50
"""Examples per property under the `ci` profile; `deep` runs 100 times as many."""

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]


def register_profiles() -> None:
    """Register `ci` and `deep` and load the one `HYPOTHESIS_PROFILE` names (default `ci`)."""
    settings.register_profile(
        "ci",
        max_examples=CI_EXAMPLES,
        deadline=None,
        derandomize=True,
        print_blob=True,
        suppress_health_check=_SLOW_OK,
    )
    settings.register_profile(
        "deep",
        max_examples=CI_EXAMPLES * 100,
        deadline=None,
        derandomize=False,
        print_blob=True,
        suppress_health_check=_SLOW_OK,
    )
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def share_of_examples(divisor: int, *, minimum: int = 3) -> settings:
    """Settings giving a test `1/divisor` of the current profile's examples (at least `minimum`).

    For tests parametrized over many labels (one rule broken each): every label is
    exercised on every run, and the whole test still costs about one property's budget.
    """
    current = settings.default
    budget = current.max_examples if current is not None else CI_EXAMPLES
    return settings(max_examples=max(minimum, budget // divisor))
