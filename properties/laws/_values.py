"""Laws on lossless JSON and snapshots (docs/format/properties.md §3: P8, P9, P10)."""

from __future__ import annotations

import copy
import json
from typing import Any

from kernel.errors import KernelError, NotLosslessJson
from kernel.log import SessionLog
from kernel.values.json import freeze, json_equal, thaw
from kernel.wire.codec import event_to_json, header_from_json
from kernel.wire.jsontext import encode_json_bytes, parse_json
from properties._json_values import BadJson
from properties._report import check, violated
from properties.laws._common import append_wire, as_wire, same_json

__all__ = (
    "law_lossless_json_accepted",
    "law_deep_json_accepted",
    "law_lossy_json_rejected",
    "law_snapshot_isolation",
)

_HEADER = {"version": 0, "id": "sess-1", "createdAt": 1}


def law_lossless_json_accepted(value: Any) -> None:
    """P8: every G-json value is admitted (freeze, append, seed, header) and round-trips as JSON."""
    law = "P8 lossless JSON accepted"
    frozen = freeze(value)
    check(json_equal(thaw(frozen), value), law, "thaw(freeze(v)) differs from v", v=value)
    text = json.dumps(value)
    check(same_json(json.loads(text), value), law, "json.loads(json.dumps(v)) differs", v=value)
    check(
        same_json(parse_json(encode_json_bytes(value)), value),
        law,
        "kernel JSON text (encode_json_bytes / parse_json) does not round-trip",
        v=value,
    )
    log = SessionLog.empty().append("x-app/value", value, time=0, ignorable=True)
    check(json_equal(thaw(log.events[0].data), value), law, "appended data changed", v=value)
    seeded = SessionLog.seed(
        [{"type": "x-app/value", "seq": 0, "time": 0, "data": value, "ignorable": True}], now=1
    )
    check(json_equal(thaw(seeded.events[0].data), value), law, "seeded data changed", v=value)
    header = header_from_json({**_HEADER, "x-extension": value})
    check(header.id == "sess-1", law, "header with an extra lossless key rejected", v=value)


def law_deep_json_accepted(value: Any) -> None:
    """P8 (deep values): a very deep chain is admitted by append and seed without RecursionError."""
    law = "P8 lossless JSON accepted (deep)"
    try:
        log = SessionLog.empty().append("x-app/deep", value, time=0, ignorable=True)
        SessionLog.seed(
            [{"type": "x-app/deep", "seq": 0, "time": 0, "data": value, "ignorable": True}],
            now=0,
        )
        check(json_equal(log.events[0].data, value), law, "deep value changed on append")
    except RecursionError:
        violated(law, "admission hit the recursion limit (the validator must be iterative)")


def _raises_lossless(action: Any) -> BaseException | None:
    try:
        action()
    except NotLosslessJson as exc:
        return exc
    except KernelError as exc:
        cause = exc.__cause__ or exc.__context__
        return exc if isinstance(cause, NotLosslessJson) else _wrong(exc)
    except Exception as exc:
        return _wrong(exc)
    return None


class _Wrong(Exception):
    def __init__(self, exc: BaseException) -> None:
        super().__init__(f"{type(exc).__name__}: {exc}")
        self.exc = exc


def _wrong(exc: BaseException) -> BaseException:
    return _Wrong(exc)


def law_lossy_json_rejected(bad: BadJson) -> None:
    """P9: a value with one defect raises `NotLosslessJson` on append, on seed, and in a header.

    A header may report it as a `SessionHeaderError` whose cause is `NotLosslessJson`
    (docs/format/admission.md §6 files H1 under `SessionHeaderError`; docs/format/properties.md P9
    names `NotLosslessJson`): either reading is accepted, anything else is not.
    """
    law = f"P9 lossy JSON rejected [{bad.label}]"
    paths = {
        "freeze": lambda: freeze(bad.value),
        "append": lambda: SessionLog.empty().append(
            "x-app/value", bad.value, time=0, ignorable=True
        ),
        "seed": lambda: SessionLog.seed(
            [{"type": "x-app/value", "seq": 0, "time": 0, "data": bad.value, "ignorable": True}],
            now=0,
        ),
        "header": lambda: SessionLog.empty(header={**_HEADER, "x-extension": bad.value}),
    }
    for path, action in paths.items():
        outcome = _raises_lossless(action)
        if outcome is None:
            violated(law, f"{path} accepted a value with defect {bad.label!r}")
        if isinstance(outcome, _Wrong):
            violated(law, f"{path} raised {outcome} instead of NotLosslessJson")
        if path != "header":
            check(
                isinstance(outcome, NotLosslessJson),
                law,
                f"{path} raised {type(outcome).__name__}, not NotLosslessJson",
            )


def _scribble(value: Any) -> None:
    """Mutate every container inside a caller-owned value, in place."""
    stack = [value]
    seen: set[int] = set()
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, dict):
            for key in list(v):
                child = v[key]
                if isinstance(child, (dict, list)):
                    stack.append(child)
                else:
                    v[key] = "scribbled"
            v["scribbled"] = True
        elif isinstance(v, list):
            for i, child in enumerate(v):
                if isinstance(child, (dict, list)):
                    stack.append(child)
                else:
                    v[i] = "scribbled"
            v.append("scribbled")


def law_snapshot_isolation(log: Any) -> None:
    """P10: mutating the caller's `data`, `surfaceOp`, `sourceEventSeqs` (append, seed) or
    header object after admission does not change the stored log."""
    law = "P10 snapshot isolation"
    wire = as_wire(log)
    caller = copy.deepcopy(wire)
    session = SessionLog.empty(header=dict(_HEADER, cwd="/w"))
    for event in caller:
        session = append_wire(session, event)
    before = [event_to_json(e) for e in session.events]
    header_before = session.header
    for event in caller:
        _scribble(event)
    after = [event_to_json(e) for e in session.events]
    if before != after:
        violated(law, "appended events changed after the caller mutated its objects", log=wire)
    seed_input = copy.deepcopy(wire)
    header_input: dict[str, Any] = dict(_HEADER, cwd="/w")
    seeded = SessionLog.seed(seed_input, header=header_input, now=5)
    seeded_before = [event_to_json(e) for e in seeded.events]
    _scribble(seed_input)
    header_input["id"] = "changed"
    header_input["cwd"] = "/elsewhere"
    check(
        [event_to_json(e) for e in seeded.events] == seeded_before,
        law,
        "seeded events changed after the caller mutated the seed",
        log=wire,
    )
    check(
        seeded.header == header_from_json(dict(_HEADER, cwd="/w"))
        and session.header == header_before,
        law,
        "session header changed after the caller mutated its header object",
    )
