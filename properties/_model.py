"""An independent, deliberately naive model of the folds, used by the generators and laws.

It reads plain wire dicts and never imports kernel code, so a law that compares
the kernel with it compares two implementations of the spec, not one with
itself. It trusts its input (generated logs are valid); it is not a validator.
Internal to the kit: nothing here is public.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

__all__ = (
    "SurfaceModel",
    "surface_of",
    "project",
    "messages_of",
    "pairing_cuts",
    "canonical",
    "equal_headers",
    "ordered_json_equal",
    "WriterModel",
    "header_fold",
    "ModelViolation",
    "violations_of",
    "ScanModel",
    "scan_for_closers",
    "open_turn_of",
    "SURFACE_TYPES",
)

SURFACE_TYPES = frozenset({"user/message", "assistant/message", "tool/result"})


def _plain(value: Any) -> Any:
    """A plain copy of a JSON value given as any Mapping/Sequence (frozen views included)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or (
        isinstance(value, Sequence) and not isinstance(value, (str, bytes))
    ):
        return [_plain(v) for v in value]
    return value


# -- surface ------------------------------------------------------------------------------------


@attrs.define
class SurfaceModel:
    """Surface nodes and replace generation, plus the replacement history
    (docs/format/folds.md §1)."""

    nodes: list[int] = attrs.Factory(list)
    generation: int = 0
    replacements: list[tuple[int, int, int, tuple[int, ...]]] = attrs.Factory(list)

    def step(self, event: Mapping[str, Any]) -> None:
        """Fold one valid wire event."""
        if event["type"] not in SURFACE_TYPES or "surfaceOp" not in event:
            return
        op = event["surfaceOp"]
        if op == "append":
            self.nodes.append(event["seq"])
            return
        i = self.nodes.index(op["start"])
        j = self.nodes.index(op["end"])
        shadowed = tuple(self.nodes[i : j + 1])
        self.nodes[i : j + 1] = [event["seq"]]
        self.generation += 1
        self.replacements.append((event["seq"], op["start"], op["end"], shadowed))


def surface_of(events: Iterable[Mapping[str, Any]]) -> SurfaceModel:
    """The complete surface fold of valid wire events."""
    model = SurfaceModel()
    for event in events:
        model.step(event)
    return model


def project(event: Mapping[str, Any]) -> Any:
    """docs/format/folds.md §2.1 on a wire event: the message, or None."""
    t = event["type"]
    if t == "user/message":
        return event["data"]
    if t == "assistant/message":
        message = event["data"]["message"]
        return message if len(message["content"]) > 0 else None
    if t == "tool/result":
        return event["data"]["message"]
    return None


def messages_of(events: Sequence[Mapping[str, Any]]) -> list[Any]:
    """docs/format/folds.md §2.2: the derived history of valid wire events (plain copies)."""
    out = []
    for seq in surface_of(events).nodes:
        message = project(events[seq])
        if message is not None:
            out.append(_plain(message))
    return out


def pairing_cuts(events: Sequence[Mapping[str, Any]], nodes: Sequence[int]) -> list[bool]:
    """docs/format/folds.md §5.1: the N + 1 cut flags of a surface (assumes a pairable surface)."""
    cuts = [True]
    outstanding = 0
    for seq in nodes:
        event = events[seq]
        if event["type"] == "assistant/message":
            content = event["data"]["message"]["content"]
            outstanding += sum(1 for b in content if b.get("type") == "tool-call")
        elif event["type"] == "tool/result":
            outstanding -= 1
        cuts.append(outstanding == 0)
    return cuts


# -- request header -----------------------------------------------------------------------------


def canonical(header: Mapping[str, Any]) -> dict[str, Any]:
    """docs/format/folds.md §3.1 (valid input only)."""
    out: dict[str, Any] = {}
    if "config" in header:
        out["config"] = _plain(header["config"])
    ad = header.get("adapterDefaults")
    if isinstance(ad, Mapping) and (
        ad.get("reasoningEffort") is True or ad.get("maxTokens") is True
    ):
        out["adapterDefaults"] = _plain(ad)
    if header.get("system"):
        out["system"] = header["system"]
    if header.get("tools"):
        out["tools"] = _plain(header["tools"])
    return out


def _is_index(key: str) -> bool:
    return (
        key.isascii() and key.isdigit() and (key == "0" or key[0] != "0") and int(key) <= 2**32 - 2
    )


def _js_keys(obj: Mapping[str, Any]) -> list[str]:
    keys = list(obj)
    return sorted((k for k in keys if _is_index(k)), key=int) + [
        k for k in keys if not _is_index(k)
    ]


def _is_num(x: Any) -> bool:
    return type(x) in (int, float)


def ordered_json_equal(a: Any, b: Any) -> bool:
    """JSON.stringify equality: same keys in the same JS enumeration order, numbers by value."""
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        if not (isinstance(a, Mapping) and isinstance(b, Mapping)):
            return False
        ka, kb = _js_keys(a), _js_keys(b)
        return ka == kb and all(ordered_json_equal(a[k], b[k]) for k in ka)
    if isinstance(a, (list, tuple, Sequence)) and not isinstance(a, str):
        if isinstance(b, str) or not isinstance(b, (list, tuple, Sequence)):
            return False
        return len(a) == len(b) and all(ordered_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if _is_num(a) and _is_num(b):
        return bool(a == b)
    return type(a) is type(b) and bool(a == b)


_MISSING = object()


def _config_equal(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    for key in ("provider", "model", "reasoningEffort", "temperature", "maxTokens"):
        x, y = a.get(key, _MISSING), b.get(key, _MISSING)
        if (x is _MISSING) != (y is _MISSING):
            return False
        if x is not _MISSING and not ordered_json_equal(x, y):
            return False
    sa, sb = a.get("stop", _MISSING), b.get("stop", _MISSING)
    if (sa is _MISSING) != (sb is _MISSING):
        return False
    return sa is _MISSING or list(sa) == list(sb)


def equal_headers(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """docs/format/folds.md §3.2 `header_equals` over canonical headers."""
    if not _config_equal(a["config"], b["config"]):
        return False
    ada, adb = a.get("adapterDefaults") or {}, b.get("adapterDefaults") or {}
    for key in ("reasoningEffort", "maxTokens"):
        if ada.get(key, _MISSING) != adb.get(key, _MISSING):
            return False
    if a.get("system", _MISSING) != b.get("system", _MISSING):
        return False
    ta, tb = list(a.get("tools") or []), list(b.get("tools") or [])
    return len(ta) == len(tb) and all(ordered_json_equal(x, y) for x, y in zip(ta, tb, strict=True))


def header_fold(events: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """docs/format/folds.md §3.3 without a start value."""
    state: dict[str, Any] | None = None
    for event in events:
        if event["type"] == "request/header":
            state = canonical(event["data"]["header"])
    return state


@attrs.define
class WriterModel:
    """docs/format/folds.md §3.4 writer-instance state and decision."""

    generation_at_last_request: int
    anchored: bool = False

    def decide(
        self,
        header: Mapping[str, Any],
        baseline: Mapping[str, Any] | None,
        declared: bool,
        generation: int,
    ) -> dict[str, Any] | None:
        """The decision fields (`reason`, `startsSeries`) to append, or None."""
        starts_series = declared or generation != self.generation_at_last_request
        decision: dict[str, Any] | None
        if not self.anchored:
            decision = {"reason": "initial" if baseline is None else "resume"}
            self.anchored = True
        elif baseline is None or not equal_headers(baseline, header):
            decision = {"reason": "change"}
            if starts_series:
                decision["startsSeries"] = True
        elif starts_series:
            decision = {"reason": "series"}
        else:
            decision = None
        self.generation_at_last_request = generation
        return decision


# -- relational invariants ----------------------------------------------------------------------


@attrs.frozen
class ModelViolation:
    """One failed condition of docs/format/folds.md §6.2."""

    seq: int
    condition: str


def _names_open_step(data: Any, open_turn: Any, open_step: Any) -> bool:
    return (
        isinstance(data, Mapping)
        and open_turn is not None
        and open_step is not None
        and data.get("turn") == open_turn
        and data.get("step") == open_step
    )


def violations_of(events: Sequence[Mapping[str, Any]]) -> list[ModelViolation]:
    """Every failed condition of docs/format/folds.md §6.2, in log order, transitions applied
    regardless."""
    out: list[ModelViolation] = []
    last_seq = -1
    open_turn: Any = None
    open_step: Any = None
    next_turn, next_step = 1, 1
    pending: set[str] = set()
    for event in events:
        seq, t, data = event["seq"], event["type"], event["data"]

        def bad(condition: str, seq: int = seq) -> None:
            out.append(ModelViolation(seq, condition))

        if seq <= last_seq:
            bad("seq-order")
        last_seq = seq
        if t == "turn/start":
            if open_turn is not None:
                bad("turn-start-while-open")
            if data["turn"] != next_turn:
                bad("turn-number")
            open_turn = data["turn"]
            next_step = 1
        elif t == "turn/end":
            if open_turn != data["turn"]:
                bad("turn-end-mismatch")
            if open_step is not None:
                bad("turn-end-open-step")
            open_turn = None
            next_turn += 1
        elif t == "step/start":
            if open_turn != data["turn"]:
                bad("step-start-turn")
            if open_step is not None:
                bad("step-start-while-open")
            if data["step"] != next_step:
                bad("step-number")
            open_step = data["step"]
        elif t == "step/end":
            if not _names_open_step(data, open_turn, open_step):
                bad("step-end-mismatch")
            pending.clear()
            open_step = None
            next_step += 1
        elif t in ("assistant/chunk", "assistant/message"):
            if not _names_open_step(data, open_turn, open_step):
                bad("outside-step")
        elif t == "tool/call":
            if not _names_open_step(data, open_turn, open_step):
                bad("outside-step")
            pending.add(data["callId"])
        elif t == "tool/result":
            if event.get("surfaceOp") == "append":
                if not _names_open_step(data, open_turn, open_step):
                    bad("outside-step")
                call_id = data["message"]["source"]["callId"]
                block = data["message"]["content"][0]
                error = data.get("error")
                exempt = (
                    block.get("isError") is True
                    and isinstance(error, Mapping)
                    and error.get("code") == "TOOL_NOT_STARTED"
                )
                if call_id not in pending and not exempt:
                    bad("result-without-call")
                pending.discard(call_id)
            elif open_turn is None:
                bad("outside-turn")
        elif t in ("todo/write", "request/header", "request/context") and open_turn is None:
            bad("outside-turn")
    return out


# -- crash repair -------------------------------------------------------------------------------


@attrs.define
class ScanModel:
    """docs/format/folds.md §7.1 scan state after a log."""

    open_turn: Any = None
    open_step: Any = None
    pending: dict[str, tuple[Any, int | None]] = attrs.Factory(dict)


def scan_for_closers(events: Iterable[Mapping[str, Any]]) -> ScanModel:
    """Run the closer scan of docs/format/folds.md §7.1."""
    s = ScanModel()
    for event in events:
        t, data = event["type"], event["data"]
        if t == "turn/start":
            s.open_turn, s.open_step = data["turn"], None
            s.pending.clear()
        elif t == "turn/end":
            s.open_turn, s.open_step = None, None
            s.pending.clear()
        elif t == "step/start":
            s.open_step = data["step"]
        elif t == "step/end":
            s.pending.clear()
            s.open_step = None
        elif t == "assistant/message":
            for block in data["message"]["content"]:
                if isinstance(block, Mapping) and block.get("type") == "tool-call":
                    s.pending[block["id"]] = (data["step"], None)
        elif t == "tool/call":
            if data["callId"] in s.pending:
                s.pending[data["callId"]] = (s.pending[data["callId"]][0], event["seq"])
        elif t == "tool/result":
            s.pending.pop(data["message"]["source"]["callId"], None)
    return s


def open_turn_of(events: Iterable[Mapping[str, Any]]) -> Any:
    """The number of the open turn at the end of `events`, or None."""
    return scan_for_closers(events).open_turn


def is_finite_number(x: Any) -> bool:
    """A JSON number that is finite (helper for laws reading parsed values)."""
    return _is_num(x) and math.isfinite(x)
