"""Readable failure messages: a law that fails names itself and shows the log, one event per line.

Internal to the kit; `properties.laws` re-exports `LawViolation`. Laws raise it (an
`AssertionError`) through `violated`, so pytest shows the message and Hypothesis shrinks
on it like any assertion.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

from kernel.values.events import Event
from kernel.values.json import thaw
from kernel.wire.codec import event_to_json

__all__ = ("LawViolation", "violated", "format_log", "format_value", "check", "pretty_as_repr")


class LawViolation(AssertionError):
    """A property of the catalog does not hold for a generated input."""

    # A failure prints the class by its module: show the public one, `properties.laws`.
    __module__ = "properties.laws"


def format_value(value: Any, *, limit: int = 400) -> str:
    """Compact JSON text of a value (frozen or plain), ASCII-escaped, cut at `limit` characters."""
    if isinstance(value, Event):
        value = event_to_json(value)
    try:
        text = json.dumps(thaw(value), ensure_ascii=True, separators=(",", ":"), default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _seq_of(event: Mapping[str, Any] | Event) -> Any:
    return event.seq if isinstance(event, Event) else event.get("seq")


def format_log(
    events: Iterable[Mapping[str, Any] | Event], *, limit: int = 1000, mark: int | None = None
) -> str:
    """One event per line, prefixed with its index; the event whose seq is `mark` gets `>>`.

    An event longer than `limit` characters is cut (`...`): shrunk examples fit whole.

    >>> print(format_log([{"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}}],
    ...                  mark=0))
    >>[0] {"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}
    """
    lines = [
        f"{'>>' if mark is not None and _seq_of(e) == mark else '  '}[{i}] "
        f"{format_value(e, limit=limit)}"
        for i, e in enumerate(events)
    ]
    return "\n".join(lines) if lines else "  (empty log)"


def violated(
    law: str,
    detail: str,
    *,
    log: Iterable[Mapping[str, Any] | Event] | None = None,
    seq: int | None = None,
    **values: Any,
) -> NoReturn:
    """Raise `LawViolation` naming the law, what broke, the first offending `seq` (when the law
    knows it; marked `>>` in the log), the values involved and the log, one event per line."""
    __tracebackhide__ = True  # pytest shows the law's line, not this helper
    parts = [f"{law}: {detail}"]
    if seq is not None:
        parts.append(f"  first offending seq: {seq}")
    for name, value in values.items():
        parts.append(f"  {name} = {format_value(value, limit=2000)}")
    if log is not None:
        parts.append("log:")
        parts.append(format_log(log, mark=seq))
    raise LawViolation("\n".join(parts))


def check(
    condition: bool,
    law: str,
    detail: str,
    *,
    log: Iterable[Mapping[str, Any] | Event] | None = None,
    seq: int | None = None,
    **values: Any,
) -> None:
    """`violated(...)` unless `condition` holds."""
    __tracebackhide__ = True
    if not condition:
        violated(law, detail, log=log, seq=seq, **values)


def pretty_as_repr(self: object, p: Any, cycle: bool) -> None:
    """A `_repr_pretty_` that prints `repr(self)`: Hypothesis then shows a generated value as
    its events rather than as the strategy calls that built it (`interpret(LoopScript(...))`)."""
    p.text(repr(self))
