"""`st.from_type` for the kernel's public types, registered through Hypothesis's entry point.

Hypothesis calls `_hypothesis_setup_hook` when it is imported (the `hypothesis`
entry-point group in pyproject.toml), so `st.from_type(Event)`,
`st.from_type(SessionHeader)`, `st.from_type(SessionLog)` and
`st.from_type(WireEvent)` draw valid values in any suite that has the kit
installed. The strategies are deferred: nothing of `properties` but this module is
imported until one is drawn. Falsifying examples print a `SessionLog` as its
events, one wire line each. (`st.from_type(LoopLog)` works once `properties.strategies`
is imported.)

Internal to the kit: the module keeps its name because installed entry points name it,
and `properties.strategies` re-exports its public names (`WireEvent`, `session_logs`).
The hook runs inside `import hypothesis`, where an exception would break every
suite in the environment: if the kernel cannot be imported, it warns and
registers nothing.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, TypedDict

from hypothesis import strategies as st

if TYPE_CHECKING:
    from kernel.log import SessionLog
    from kernel.values.events import Event, SessionHeader

__all__ = (
    "WireEvent",
    "register_printers",
    "register_type_strategies",
    "session_logs",
    "_hypothesis_setup_hook",
)


class WireEvent(TypedDict, total=False):
    """An event as it is on the wire (camelCase keys); `st.from_type` draws valid ones."""

    type: str
    seq: int
    time: int
    data: Any
    surfaceOp: Any
    sourceEventSeqs: list[int]
    ignorable: bool


def _headers() -> st.SearchStrategy[SessionHeader]:
    from kernel.wire.codec import header_from_json
    from properties._loop import session_headers

    ids = st.sampled_from(["sess-1", "s", "2026-12-01T05-00-00-abc"])
    return ids.flatmap(lambda i: session_headers(session_id=i)).map(header_from_json)


def session_logs(**kwargs: Any) -> st.SearchStrategy[SessionLog]:
    """Admitted `SessionLog`s: a G-loop log (`loop_logs(**kwargs)`) restored under a valid header.

    What `st.from_type(SessionLog)` draws, with the options of `loop_logs`, checked the same
    way. The value's repr shows its events one wire line each (what a failing test prints).
    """
    from kernel.log import SessionLog
    from properties._loop import loop_logs

    logs, headers = loop_logs(**kwargs), _headers()

    @st.composite
    def build(draw: st.DrawFn) -> SessionLog:
        # A composite, not `st.builds`: Hypothesis then prints the value (its events), not
        # the calls that made it.
        return SessionLog.restore(draw(logs).events, header=draw(headers))

    return build()


def _print_log(log: SessionLog, p: Any, cycle: bool) -> None:
    from kernel.wire.codec import header_to_json
    from properties._report import format_log, format_value

    header = "no header" if log.header is None else format_value(header_to_json(log.header))
    p.text(f"SessionLog({len(log.events)} events, {header})\n{format_log(log.events)}")


def _print_event(event: Event, p: Any, cycle: bool) -> None:
    from properties._report import format_value

    p.text(f"Event({format_value(event)})")


def register_printers() -> None:
    """Make Hypothesis print a `SessionLog` as its events (one wire line each) and an `Event`
    as its wire JSON, in falsifying examples. Does nothing if Hypothesis moved its printer."""
    try:
        from hypothesis.vendor.pretty import for_type_by_name
    except ImportError:  # pragma: no cover - depends on the Hypothesis version
        return
    for_type_by_name("kernel.log", "SessionLog", _print_log)
    for_type_by_name("kernel.values.events", "Event", _print_event)


def register_type_strategies() -> None:
    """Register the strategies `st.from_type` uses for the kernel's types (idempotent)."""
    from kernel.log import SessionLog
    from kernel.values.events import Event, SessionHeader

    def events() -> st.SearchStrategy[Any]:
        from properties.strategies import single_kernel_events

        return single_kernel_events()

    def wire() -> st.SearchStrategy[Any]:
        from properties.strategies import single_events

        return single_events()

    st.register_type_strategy(Event, st.deferred(events))
    st.register_type_strategy(SessionHeader, st.deferred(_headers))
    st.register_type_strategy(SessionLog, st.deferred(session_logs))
    st.register_type_strategy(WireEvent, st.deferred(wire))


def _hypothesis_setup_hook() -> None:
    """Entry point Hypothesis calls on import (`[project.entry-points.hypothesis]`)."""
    try:
        register_type_strategies()
    except ImportError as exc:  # pragma: no cover - a broken installation
        warnings.warn(
            f"session-kernel: st.from_type is not set up for the kernel's types ({exc})",
            stacklevel=2,
        )
        return
    register_printers()
