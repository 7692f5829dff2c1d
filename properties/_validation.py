"""Argument checks of the kit's strategies, run when a strategy is built, never when it draws.

Each check raises Hypothesis's `InvalidArgument` with a message that starts with the
argument's name and value (`max_actions=-1 must be ...`), as Hypothesis's own strategies do.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from hypothesis.errors import InvalidArgument

__all__ = ("check_bool", "check_choice", "check_labels", "check_order", "check_size")


def check_size(name: str, value: Any, *, minimum: int = 0) -> None:
    """`value` is an `int` (not a `bool`) of at least `minimum`."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgument(f"{name}={value!r} must be an int, not {type(value).__name__}")
    if value < minimum:
        raise InvalidArgument(f"{name}={value!r} must be at least {minimum}")


def check_order(low_name: str, low: int, high_name: str, high: int) -> None:
    """`low <= high` (both already checked with `check_size`)."""
    if low > high:
        raise InvalidArgument(f"{low_name}={low!r} must not exceed {high_name}={high!r}")


def check_bool(name: str, value: Any) -> None:
    """`value` is `True` or `False`."""
    if not isinstance(value, bool):
        raise InvalidArgument(f"{name}={value!r} must be a bool, not {type(value).__name__}")


def check_choice(name: str, value: Any, choices: Iterable[Any]) -> None:
    """`value` is one of `choices`."""
    known = tuple(choices)
    if not any(type(value) is type(c) and value == c for c in known):
        raise InvalidArgument(f"{name}={value!r} must be one of {', '.join(map(repr, known))}")


def check_labels(name: str, value: Any, known: Collection[str]) -> tuple[str, ...]:
    """`value` is a non-empty list or tuple of labels from `known`; returns it as a tuple."""
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise InvalidArgument(
            f"{name}={value!r} must be a list or tuple of labels, not {type(value).__name__}"
        )
    if not value:
        raise InvalidArgument(f"{name}={value!r} must name at least one label")
    unknown = [label for label in value if not isinstance(label, str) or label not in known]
    if unknown:
        raise InvalidArgument(
            f"{name}={value!r}: unknown label(s) {', '.join(map(repr, unknown))}; "
            f"the labels are {', '.join(map(repr, sorted(known)))}"
        )
    return tuple(value)
