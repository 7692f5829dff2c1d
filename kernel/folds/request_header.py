"""Request headers (docs/format/folds.md §3): canonical form, equality, fold, the writer rule.

Compare headers only in canonical form. `headers_equal` is public, so its answer on
non-canonical input is part of the contract and follows §3.2 literally (its tables are
the tests). The writer decision is pure: the caller keeps the `HeaderWriterState`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, cast

import attrs

from kernel.errors import KernelError, RequestHeaderShapeError
from kernel.folds.surface import AdmittedEvents
from kernel.values.events import REQUEST_HEADER, Event
from kernel.values.json import (
    MAX_SAFE_INTEGER,
    FrozenArray,
    FrozenObject,
    canonical_text,
    checked_as,
    freeze,
    json_equal,
    known_lossless,
    raw,
    summary,
)
from kernel.wire.codec import event_sequence, ill_typed_events_reported
from kernel.wire.jsontext import js_member_order

__all__ = (
    "canonical_header",
    "headers_equal",
    "call_config_equals",
    "ordered_json_equal",
    "RequestHeaderState",
    "step_request_header",
    "fold_request_header",
    "HeaderWriterState",
    "header_event",
)

_ABSENT: Final = object()
"""Stands for a key that is not there (absent differs from every value, null included)."""

_CONFIG_FIELDS: Final = ("provider", "model", "reasoningEffort", "temperature", "maxTokens")
_MARKERS: Final = ("reasoningEffort", "maxTokens")


def _is_array(value: Any) -> bool:
    return type(value) is list or type(value) is FrozenArray


def _same(a: Any, b: Any) -> bool:
    """Absent equals only absent; present values compare as JSON (numbers by value)."""
    if a is _ABSENT or b is _ABSENT:
        return a is b
    return json_equal(a, b)


# -- canonical form (§3.1) ----------------------------------------------------------------------


def _canonical(header: Any, where: str, seq: int | None = None) -> FrozenObject:
    if not issubclass(type(header), Mapping):
        raise RequestHeaderShapeError(
            f"{where}: a request header must be a JSON object (R11)", seq=seq
        )
    out: dict[str, Any] = {}
    if "config" in header:
        out["config"] = header["config"]
    defaults = header.get("adapterDefaults")
    if issubclass(type(defaults), Mapping) and any(defaults.get(m) is True for m in _MARKERS):
        out["adapterDefaults"] = defaults
    if "system" in header:
        system = header["system"]
        if type(system) is not str:
            raise RequestHeaderShapeError(
                f"{where}: header system must be a string, not {_kind_name(system)} (R11h)",
                seq=seq,
            )
        if system:
            out["system"] = system
    if "tools" in header:
        tools = header["tools"]
        if not _is_array(tools):
            raise RequestHeaderShapeError(
                f"{where}: header tools must be an array, not {_kind_name(tools)} (R11h)",
                seq=seq,
            )
        if tools:
            out["tools"] = tools
    if type(header) is FrozenObject and list(out) == list(header):
        return header  # already canonical: nothing dropped, same member order
    frozen: FrozenObject = freeze(out)
    return frozen


def canonical_header(header: Any) -> FrozenObject:
    """The canonical form of a request header (docs/format/folds.md §3.1); never validates.

    Keeps `config` as given, `adapterDefaults` whole iff it holds a literal `true`
    marker, and non-empty `system` / `tools`; drops every other key.

    Args:
        header: a request header object (plain or frozen JSON).

    Returns:
        The canonical header, frozen.

    Raises:
        RequestHeaderShapeError: `system` is present and not a string, or `tools` is
            present and not an array (null included).

    >>> canonical_header({"config": {"provider": "p", "model": "m"}, "system": "", "x": 1})
    FrozenObject({'config': {'provider': 'p', 'model': 'm'}})
    """
    return _canonical(header, "header")


# -- equality (§3.2) ----------------------------------------------------------------------------


def _kind_name(value: Any) -> str:
    value = raw(value)
    if value is None:
        return "null"
    if issubclass(type(value), Mapping):
        return "an object"
    if type(value) is list:
        return "an array"
    return type(value).__name__


def _stops_comparable(a: Mapping[str, Any], b: Mapping[str, Any], where: str) -> None:
    if "stop" in a and "stop" in b and not (_is_array(a["stop"]) and _is_array(b["stop"])):
        raise RequestHeaderShapeError(f"{where}: config.stop must be an array on both sides (R11g)")


def _configs_equal(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    for key in _CONFIG_FIELDS:
        if not _same(a.get(key, _ABSENT), b.get(key, _ABSENT)):
            return False
    stop_a, stop_b = a.get("stop", _ABSENT), b.get("stop", _ABSENT)
    if stop_a is _ABSENT or stop_b is _ABSENT:
        return stop_a is stop_b  # `stop: []` differs from no `stop`
    return len(stop_a) == len(stop_b) and all(map(json_equal, stop_a, stop_b))


def call_config_equals(a: Any, b: Any) -> bool:
    """Whether two call configs request the same call (docs/format/folds.md §3.2).

    Compares `provider`, `model`, `reasoningEffort`, `temperature`, `maxTokens`
    (absent equals only absent; numbers by value) and `stop` (both absent, or both
    arrays with equal elements); other keys are ignored. Raises
    `RequestHeaderShapeError` when a config is not an object, or both carry a
    `stop` that is not an array.

    >>> call_config_equals({"provider": "p", "temperature": 1.0, "topP": 0.1},
    ...                    {"provider": "p", "temperature": 1})
    True
    """
    if not issubclass(type(a), Mapping) or not issubclass(type(b), Mapping):
        raise RequestHeaderShapeError("call config: both configs must be JSON objects (R11a)")
    _stops_comparable(a, b, "call config")
    return _configs_equal(a, b)


def _marker(header: Mapping[str, Any], name: str) -> Any:
    defaults = header.get("adapterDefaults")
    if issubclass(type(defaults), Mapping):
        return cast("Mapping[str, Any]", defaults).get(name, _ABSENT)
    return _ABSENT  # absent, null, or not an object: nothing is stored under the name


def _tool_list(header: Mapping[str, Any], side: str) -> Any:
    tools = header.get("tools")
    if tools is None:
        return ()  # an absent or null list counts as []
    if not _is_array(tools):
        raise RequestHeaderShapeError(
            f"header {side}: tools must be an array, not {_kind_name(tools)} (R11h)"
        )
    return tools


def _config_of(header: Any, side: str) -> Mapping[str, Any]:
    if not issubclass(type(header), Mapping):
        raise RequestHeaderShapeError(f"header {side}: a request header must be a JSON object")
    config = header.get("config")
    if not issubclass(type(config), Mapping):
        raise RequestHeaderShapeError(f"header {side}: config must be a JSON object (R11a)")
    return cast("Mapping[str, Any]", config)


def headers_equal(a: Any, b: Any) -> bool:
    """Whether two **canonical** headers describe the same request envelope
    (docs/format/folds.md §3.2).

    Does not canonicalize: on other input it answers §3.2 read literally
    (`tools: []` equals no `tools`, `system: ""` does not equal no `system`).
    Tools compare position by position with `ordered_json_equal`.

    Raises:
        RequestHeaderShapeError: either side lacks a `config` object, both configs
            carry a non-array `stop`, or `tools` is neither absent, null nor an array.

    >>> c = {"provider": "p", "model": "m"}
    >>> headers_equal({"config": c, "tools": []}, {"config": c})
    True
    """
    config_a, config_b = _config_of(a, "a"), _config_of(b, "b")
    _stops_comparable(config_a, config_b, "header config")
    tools_a, tools_b = _tool_list(a, "a"), _tool_list(b, "b")
    return (
        _configs_equal(config_a, config_b)
        and all(_same(_marker(a, m), _marker(b, m)) for m in _MARKERS)
        and _same(a.get("system", _ABSENT), b.get("system", _ABSENT))
        and len(tools_a) == len(tools_b)
        and all(map(ordered_json_equal, tools_a, tools_b))
    )


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    t = type(value)
    if t is str:
        return "string"
    if t is bool:
        return "boolean"
    if t is int or t is float:
        return "number"
    if t is list:
        return "array"
    if issubclass(type(value), Mapping):
        return "object"
    raise RequestHeaderShapeError(f"tool schema: {t.__name__} is not a JSON value")


def _enumeration_order(obj: Mapping[Any, Any]) -> list[str]:
    if not all(type(k) is str for k in obj):
        raise RequestHeaderShapeError("tool schema: object keys must be strings")
    return js_member_order(obj if type(obj) is dict else dict(obj))


def ordered_json_equal(a: Any, b: Any) -> bool:
    """Whether `JSON.stringify` would spell two JSON values alike, numbers aside.

    Objects need the same keys in the same JavaScript enumeration order (array-index
    keys ascending first, then insertion order); numbers compare by value; a boolean
    never equals a number; strings compare as UTF-16 (a split surrogate pair is the
    character it encodes). Iterative, so depth is bounded by memory.

    >>> ordered_json_equal({"a": 1, "b": [1.0]}, {"a": 1.0, "b": [1]})
    True
    >>> ordered_json_equal({"a": 1, "b": 2}, {"b": 2, "a": 1})
    False
    """
    stack: list[tuple[Any, Any]] = [(a, b)]
    while stack:
        x, y = stack.pop()
        x, y = raw(x), raw(y)
        kind = _json_kind(x)
        if kind != _json_kind(y):
            return False
        if kind == "object":
            keys_x, keys_y = _enumeration_order(x), _enumeration_order(y)
            if keys_x != keys_y and list(map(canonical_text, keys_x)) != list(
                map(canonical_text, keys_y)
            ):
                return False
            stack.extend((x[kx], y[ky]) for kx, ky in zip(keys_x, keys_y, strict=True))
        elif kind == "array":
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif x != y and (kind != "string" or canonical_text(x) != canonical_text(y)):
            return False
    return True


# -- fold (§3.3) --------------------------------------------------------------------------------


def _snapshot(event: Event) -> FrozenObject:
    where = f"event seq {event.seq}"
    data = event.data
    if not issubclass(type(data), Mapping) or "header" not in data:
        raise RequestHeaderShapeError(
            f"{where}: request/header data must be an object with a header (R11a)", seq=event.seq
        )
    return _canonical(data["header"], where, event.seq)


def step_request_header(header: Any, event: Event) -> Any:
    """The header in force after one more event: its canonical snapshot, else `header`.

    The step on the bare value, as `SessionLog` keeps it; `RequestHeaderState.step` wraps it.
    """
    if event.type == REQUEST_HEADER:
        return _snapshot(event)
    return header


@attrs.frozen
class RequestHeaderState:
    """The header in force after a prefix: the canonical latest snapshot, or the start value."""

    header: Any = None

    def step(self, event: Event) -> RequestHeaderState:
        """The state after one more event; only `request/header` events change it."""
        if event.type == REQUEST_HEADER:
            return RequestHeaderState(_snapshot(event))
        return self


def _snapshot_cannot_fail(event: Event) -> bool:
    """Whether `_snapshot(event)` is sure to succeed, known without reading the payload.

    True for a payload the typed load path checked as a `request/header` (R11: an
    object holding a header object whose `system` is a string and `tools` an array,
    so no shape error) whose numbers are known lossless: the copy `_canonical` makes
    of a header it reshapes then shares the payload's containers, so it cannot raise
    `NotLosslessJson` either. A loaded payload is not known lossless until asked (the
    restore path does not run R1, and `-0.0` in a reshaped header does fail).
    """
    data = event.data
    return checked_as(data) == REQUEST_HEADER and known_lossless(data)


def _snapshots(log: Sequence[Event]) -> list[Event]:
    """The `request/header` events of `log`, in order: for a loaded log, at the positions
    its load found (`AdmittedEvents.request_headers`), else by reading every event."""
    if type(log) is AdmittedEvents:
        return [log[at] for at in log.request_headers]
    return [event for event in log if event.type == REQUEST_HEADER]


def fold_request_header(events: Iterable[Event], start: Any = None) -> Any:
    """The canonical header of the last `request/header`, else `start` as given
    (docs/format/folds.md §3.3).

    `reason` and `startsSeries` do not matter. Folding a suffix from the fold of the
    prefix equals folding the whole log. Events are checked as `fold_surface` checks
    them (only when one cannot be read).

    Args:
        events: the log, or a suffix of it.
        start: the fold of the prefix before `events` (None for a whole log).

    Returns:
        The canonical header in force, frozen; None when there is no snapshot and no
        `start`.

    Raises:
        RequestHeaderShapeError: a snapshot breaks R11 (§3.1).

    Equal to stepping `RequestHeaderState(start)` through the log, errors included,
    but only the last snapshot is built: an earlier one is canonicalized only to
    raise what the step would raise there, and not even read when it cannot fail
    (`_snapshot_cannot_fail`).
    """
    initial = start if start is None or type(start) is FrozenObject else freeze(start)
    log = event_sequence(events)
    with ill_typed_events_reported(log):
        try:
            snapshots = _snapshots(log)
        except Exception:
            # An item that cannot be read: stepping decides which error comes first.
            state = functools.reduce(RequestHeaderState.step, log, RequestHeaderState(initial))
            return state.header
        if not snapshots:
            return initial
        for event in snapshots[:-1]:
            if not _snapshot_cannot_fail(event):
                _snapshot(event)  # for the error it raises, as the step would
        return _snapshot(snapshots[-1])


# -- writer decision (§3.4) ---------------------------------------------------------------------


@attrs.frozen
class HeaderWriterState:
    """What one writer instance (a process, a resume, a fork) remembers between requests.

    `anchored`: this instance has logged a header. `generation_at_last_request`: the
    surface `replace_generation` after its previous request decision (or at attachment).
    """

    anchored: bool = False
    generation_at_last_request: int = 0

    @classmethod
    def attach(cls, generation: int) -> HeaderWriterState:
        """A new writer instance attaching to a log whose surface is at `generation`."""
        return cls(anchored=False, generation_at_last_request=generation)


def header_event(
    state: HeaderWriterState,
    header: Any,
    *,
    baseline: Any,
    declared: bool,
    generation: int,
) -> tuple[FrozenObject | None, HeaderWriterState]:
    """Decide, before a request attempt, whether to log a `request/header`
    (docs/format/folds.md §3.4).

    Args:
        state: the writer's state after the previous decision (`HeaderWriterState()`
            for a new or resumed writer).
        header: the header the request will use (canonicalized here).
        baseline: the current `fold_request_header(log)`, None when the log has none.
        declared: whether the caller declared a new message series (first attempt of
            a step only).
        generation: the surface's `replace_generation` now.

    Returns:
        The event data to append (`{"header", "reason", "startsSeries"?}`, frozen) or
        None, and the new state.

    >>> h = {"config": {"provider": "p", "model": "m"}}
    >>> data, s = header_event(HeaderWriterState(), h, baseline=None, declared=False, generation=0)
    >>> data["reason"], header_event(s, h, baseline=h, declared=False, generation=0)[0]
    ('initial', None)
    """
    if (
        type(state) is not HeaderWriterState
        or type(state.anchored) is not bool
        or type(state.generation_at_last_request) is not int
    ):
        raise KernelError(
            "header_event: state must be a HeaderWriterState of a bool and an int, "
            f"not {summary(state)}"
        )
    if type(declared) is not bool:
        raise KernelError(f"header_event: declared must be a bool, not {summary(declared)}")
    if type(generation) is not int or not 0 <= generation <= MAX_SAFE_INTEGER:
        raise KernelError(
            "header_event: generation must be a non-negative safe integer, "
            f"not {summary(generation)}"
        )
    canonical = canonical_header(header)
    _config_of(canonical, "to log")
    starts_series = declared or generation != state.generation_at_last_request
    decision: dict[str, Any] | None
    if not state.anchored:
        decision = {"reason": "initial" if baseline is None else "resume"}
    elif baseline is None or not headers_equal(canonical_header(baseline), canonical):
        decision = {"reason": "change"}
        if starts_series:
            decision["startsSeries"] = True
    elif starts_series:
        decision = {"reason": "series"}
    else:
        decision = None
    after = HeaderWriterState(anchored=True, generation_at_last_request=generation)
    if decision is None:
        return None, after
    data: FrozenObject = freeze({"header": canonical, **decision})
    return data, after
