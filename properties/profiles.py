"""Hypothesis settings profiles: `ci` (bounded, derandomized) and `deep` (100x examples).

The library registers profiles and never loads one: the test suite that uses the
kit decides (its conftest calls `settings.load_profile`, or pytest runs with
`--hypothesis-profile=...` / `--session-kernel-profile=...`). Loading a profile
switches Hypothesis's defaults for the whole test session. `fast_settings` is what
both profiles build on, for a suite's own profile.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, Phase, settings

from properties._validation import check_size

__all__ = ("CI_EXAMPLES", "PROFILES", "fast_settings", "register_profiles", "share_of_examples")

CI_EXAMPLES = 50
"""Examples per property under the `ci` profile; `deep` runs 100 times as many."""

_SLOW_OK = (HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much)

_NO_EXPLAIN = tuple(p for p in Phase if p is not Phase.explain)
"""Every phase but `explain`: on a model-loop log it re-runs the law once per varied span of
the shrunk example, which took 5 to 25 times as long as finding and shrinking the failure
(docs/properties.md, "Readable, fast counterexamples")."""

_FAST: dict[str, object] = {
    "deadline": None,
    "suppress_health_check": _SLOW_OK,
    "phases": _NO_EXPLAIN,
}
"""What makes a law's failure quick to report: no `explain` phase, no deadline, slow draws."""

PROFILES: dict[str, dict[str, object]] = {
    "ci": {"max_examples": CI_EXAMPLES, "derandomize": True, "print_blob": True, **_FAST},
    "deep": {"max_examples": CI_EXAMPLES * 100, "derandomize": False, "print_blob": True, **_FAST},
}
"""The settings of each profile, by short name: `ci` runs `CI_EXAMPLES` examples derandomized,
`deep` 100 times as many at random; both without a deadline, the `explain` phase or the
health checks that slow or filtered G-loop draws would trip."""


def fast_settings(**overrides: Any) -> settings:
    """Hypothesis's default settings without the `explain` phase, the deadline and the slow-draw
    health checks; `overrides` (any `settings` argument) win.

    The parent for a suite's own profile, so a failing law shrinks and reports in about a
    second instead of explaining its example for tens (docs/properties.md, "Readable, fast
    counterexamples"): `settings.register_profile("mine", fast_settings(max_examples=25))`.

    >>> Phase.explain in fast_settings().phases, fast_settings(max_examples=7).max_examples
    (False, 7)
    """
    return settings(settings.get_profile("default"), **{**_FAST, **overrides})


def register_profiles(*, prefix: str = "") -> tuple[str, ...]:
    """Register `ci` and `deep` (named `prefix + "ci"`, `prefix + "deep"`); load neither.

    Returns the registered names. A prefix keeps a suite's own `ci` profile
    untouched (the pytest plugin registers `session-kernel-ci` and
    `session-kernel-deep`). So does it Hypothesis's: with the environment variable
    `CI` set, Hypothesis has already loaded its built-in profile named `ci`, and a
    profile registered again under the name in force takes effect at once, so
    `register_profiles()` without a prefix then switches the session to the kit's
    `ci` settings.

    >>> register_profiles(prefix="doc-")
    ('doc-ci', 'doc-deep')
    """
    names = []
    for short, values in PROFILES.items():
        settings.register_profile(prefix + short, **values)  # type: ignore[arg-type]
        names.append(prefix + short)
    return tuple(names)


def share_of_examples(divisor: int, *, minimum: int = 3) -> settings:
    """Settings giving a test `1/divisor` of the current profile's examples (at least `minimum`).

    For tests parametrized over many labels (one rule broken each): every label is
    exercised on every run, and the whole test still costs about one property's budget.
    Raises `InvalidArgument` unless `divisor` and `minimum` are ints of at least 1.
    """
    check_size("divisor", divisor, minimum=1)
    check_size("minimum", minimum, minimum=1)
    current = settings.default
    budget = current.max_examples if current is not None else CI_EXAMPLES
    return settings(max_examples=max(minimum, budget // divisor))
