"""Readable failure messages: a law that fails names itself and shows the log, one event per line.

Laws raise `LawViolation` (an `AssertionError`) through `violated`, so pytest
shows the message and Hypothesis shrinks on it like any assertion.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

from kernel.codec import event_to_json
from kernel.events import Event
from kernel.json import thaw

__all__ = ("LawViolation", "violated", "format_log", "format_value", "check")


class LawViolation(AssertionError):
    """A property of the catalog does not hold for a generated input."""


def format_value(value: Any, *, limit: int = 400) -> str:
    """Compact JSON text of a value (frozen or plain), ASCII-escaped, cut at `limit` characters."""
    if isinstance(value, Event):
        value = event_to_json(value)
    try:
        text = json.dumps(thaw(value), ensure_ascii=True, separators=(",", ":"), default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def format_log(events: Iterable[Mapping[str, Any] | Event], *, limit: int = 400) -> str:
    """One event per line, prefixed with its index."""
    lines = [f"  [{i}] {format_value(e, limit=limit)}" for i, e in enumerate(events)]
    return "\n".join(lines) if lines else "  (empty log)"


def violated(
    law: str,
    detail: str,
    *,
    log: Iterable[Mapping[str, Any] | Event] | None = None,
    **values: Any,
) -> NoReturn:
    """Raise `LawViolation` naming the law, what broke, the values involved and the log."""
    parts = [f"{law}: {detail}"]
    for name, value in values.items():
        parts.append(f"  {name} = {format_value(value, limit=2000)}")
    if log is not None:
        parts.append("log:")
        parts.append(format_log(log))
    raise LawViolation("\n".join(parts))


def check(
    condition: bool,
    law: str,
    detail: str,
    *,
    log: Iterable[Mapping[str, Any] | Event] | None = None,
    **values: Any,
) -> None:
    """`violated(...)` unless `condition` holds."""
    if not condition:
        violated(law, detail, log=log, **values)
