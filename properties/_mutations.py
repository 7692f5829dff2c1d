"""Single-rule admission mutations (P11-P13, P18) and structural perturbations (P29).

Internal to the kit: `properties.strategies` re-exports the strategies, the cases they draw
and the label catalogs (`MUTATIONS`, `REWRITE_FIELDS`, `LEGACY_EVENTS`, `PERTURBATIONS`).
A `Mutation` is a candidate next event for a valid prefix that breaks exactly
one admission rule, labelled by that rule and the error class admission must
raise. Perturbations edit a well-formed log so that exactly one relational
invariant fails; `relocate` renumbers seqs and every reference after an edit.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from types import EllipsisType
from typing import Any

import attrs
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from properties import _shapes as shapes
from properties._loop import LoopLog, ShapeChoice, check_shape, loop_logs
from properties._model import surface_of
from properties._report import pretty_as_repr
from properties._shapes import Wire
from properties._validation import check_choice, check_labels

__all__ = (
    "Mutation",
    "MutationCase",
    "MUTATIONS",
    "REWRITE_FIELDS",
    "applicable",
    "mutate",
    "mutation_cases",
    "rewrite_cases",
    "RewriteCase",
    "relocate",
    "insert_event",
    "LEGACY_EVENTS",
    "legacy_insertions",
    "LegacyInsertion",
    "Perturbation",
    "perturbations",
    "perturb",
    "PERTURBATIONS",
)


@attrs.frozen
class Mutation:
    """A candidate next event that breaks one admission rule.

    `label` is its key in `MUTATIONS`, `error` the name of the `KernelError` class admission
    must raise, `event` the candidate as a wire dict (`seq == len(prefix)`).
    """

    label: str
    error: str
    event: Wire


@attrs.frozen(repr=False)
class MutationCase:
    """A valid prefix, a rejected candidate, and the valid event that really came next.

    `prefix` is wire dicts, `mutation` a `Mutation`, `valid_next` the log's next event (None
    when the prefix is the whole log).
    """

    prefix: tuple[Wire, ...]
    mutation: Mutation
    valid_next: Wire | None

    _repr_pretty_ = pretty_as_repr

    def __repr__(self) -> str:
        from properties._report import format_log, format_value

        return (
            f"MutationCase({self.mutation.label} -> {self.mutation.error})\n"
            f" candidate: {format_value(self.mutation.event)}\n prefix:\n{format_log(self.prefix)}"
        )


def _user(seq: int, **envelope: Any) -> Wire:
    event = shapes.envelope("user/message", seq, 1, shapes.user_message(f"m{seq}", "x"))
    event.update(envelope)
    return event


def _nodes(prefix: Sequence[Wire]) -> list[int]:
    return surface_of(prefix).nodes


def _result_nodes(prefix: Sequence[Wire]) -> list[int]:
    return [s for s in _nodes(prefix) if prefix[s]["type"] == "tool/result"]


def _header(reason: str = "initial", **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"header": {"config": {"provider": "p", "model": "m"}}, "reason": reason}
    data.update(extra)
    return data


_Maker = Callable[[Sequence[Wire], int], Wire | None]


def _simple(type_: str, data: Any, **env: Any) -> _Maker:
    def make(prefix: Sequence[Wire], pick: int) -> Wire:
        event = shapes.envelope(type_, len(prefix), 1, copy.deepcopy(data))
        event.update(copy.deepcopy(env))
        return event

    return make


def _user_with(**env: Any) -> _Maker:
    def make(prefix: Sequence[Wire], pick: int) -> Wire:
        return _user(len(prefix), **copy.deepcopy(env))

    return make


def _self_citation(prefix: Sequence[Wire], pick: int) -> Wire:
    n = len(prefix)
    cited = [pick % (n + 1), n][-(1 + pick % 2) :]
    if cited == [n, n]:  # a duplicate breaks R7d, which is checked first
        cited = [n]
    return _user(n, surfaceOp="append", sourceEventSeqs=cited)


def _duplicate_citation(prefix: Sequence[Wire], pick: int) -> Wire | None:
    if not prefix:
        return None
    s = pick % len(prefix)
    return _user(len(prefix), surfaceOp="append", sourceEventSeqs=[s, s])


def _missing_coverage(prefix: Sequence[Wire], pick: int) -> Wire | None:
    nodes = _nodes(prefix)
    if len(nodes) < 2:
        return None
    i = pick % (len(nodes) - 1)
    shadowed = nodes[i : i + 2]
    return _user(
        len(prefix),
        surfaceOp=shapes.replace_op(shadowed[0], shadowed[1]),
        sourceEventSeqs=[shadowed[pick % 2]],
    )


def _endpoint_off_surface(prefix: Sequence[Wire], pick: int) -> Wire | None:
    nodes = set(_nodes(prefix))
    off = [s for s in range(len(prefix)) if s not in nodes] + [len(prefix) + 3]
    bad = off[pick % len(off)]
    nodes_list = _nodes(prefix)
    good = nodes_list[0] if nodes_list else bad
    start, end = (bad, good) if pick % 2 == 0 else (good, bad)
    cites = sorted({s for s in (start, end) if s < len(prefix)}) or None
    event = _user(len(prefix), surfaceOp=shapes.replace_op(start, end))
    if cites is not None:
        event["sourceEventSeqs"] = cites
    return event


def _reversed_range(prefix: Sequence[Wire], pick: int) -> Wire | None:
    nodes = _nodes(prefix)
    if len(nodes) < 2:
        return None
    i = pick % (len(nodes) - 1)
    a, b = nodes[i], nodes[i + 1]
    return _user(len(prefix), surfaceOp=shapes.replace_op(b, a), sourceEventSeqs=[a, b])


def _rewrite_wrong_target(prefix: Sequence[Wire], pick: int) -> Wire | None:
    nodes = [s for s in _nodes(prefix) if prefix[s]["type"] != "tool/result"]
    if not nodes:
        return None
    target = nodes[pick % len(nodes)]
    message = shapes.tool_result_message("r", "c1", [{"type": "text", "text": "x"}])
    return shapes.envelope(
        "tool/result",
        len(prefix),
        1,
        shapes.tool_result_data(1, 1, message),
        surface_op=shapes.replace_op(target, target),
        sources=[target],
    )


def _rewrite_two_nodes(prefix: Sequence[Wire], pick: int) -> Wire | None:
    nodes = _nodes(prefix)
    results = [i for i in range(len(nodes) - 1) if prefix[nodes[i]]["type"] == "tool/result"]
    if not results:
        return None
    i = results[pick % len(results)]
    target = prefix[nodes[i]]
    return shapes.envelope(
        "tool/result",
        len(prefix),
        1,
        copy.deepcopy(target["data"]),
        surface_op=shapes.replace_op(nodes[i], nodes[i + 1]),
        sources=[nodes[i], nodes[i + 1]],
    )


REWRITE_FIELDS: dict[str, str] = {
    "turn": "ToolResultRewriteError",
    "step": "ToolResultRewriteError",
    "message.id": "ToolResultRewriteError",
    "callId": "ToolResultRewriteError",
    "isError": "ToolResultRewriteError",
    "error": "ToolResultRewriteError",
    "meta": "ToolResultRewriteError",
    "block extra key": "ToolResultRewriteError",
    "message extra key": "ToolResultRewriteError",
    "source extra key": "ToolResultRewriteError",
    "role": "MessageShapeError",
    "toolCallId alone": "MessageShapeError",
    "data extra key": "EventShapeError",
}
"""Every field P18 changes in a tool-result rewrite (the `change` of `rewrite_cases`), and the
error admission must raise.

Changing `role`, or `toolCallId` without `source.callId`, also breaks R10, and
an extra key beside `turn, step, message, error, meta` breaks R12; both run
before the surface plan (docs/format/admission.md §3.1), so those are `MessageShapeError` /
`EventShapeError`. Changing the call id consistently on both sides is R9.
"""


def _change_field(data: dict[str, Any], field: str) -> None:
    message = data["message"]
    block = message["content"][0]
    if field == "turn":
        data["turn"] += 1
    elif field == "step":
        data["step"] += 1
    elif field == "message.id":
        message["id"] += "-x"
    elif field == "role":
        message["role"] = "assistant"
    elif field == "callId":
        message["source"]["callId"] += "-x"
        block["toolCallId"] = message["source"]["callId"]
    elif field == "toolCallId alone":
        block["toolCallId"] += "-x"
    elif field == "message extra key":
        message["x-extension"] = 1
    elif field == "source extra key":
        message["source"]["x-extension"] = 1
    elif field == "isError":
        block["isError"] = not block.get("isError", False)
    elif field == "error":
        data["error"] = (
            {"name": "Other", "code": "E_OTHER"}
            if "error" not in data
            else {"name": "n", "code": "zz"}
        )
    elif field == "meta":
        data["meta"] = {"tags": ["b"]} if data.get("meta") != {"tags": ["b"]} else {"tags": ["c"]}
    elif field == "block extra key":
        block["x-extension"] = 1
    else:
        data["x-extension"] = 1


def rewrite_of(target: Wire, seq: int, *, change: str | None) -> Wire:
    """A content rewrite of `target` (a current tool/result), optionally also changing `change`."""
    data = copy.deepcopy(target["data"])
    data["message"]["content"][0]["content"] = [{"type": "text", "text": "[pruned]"}]
    if change is not None:
        _change_field(data, change)
    return shapes.envelope(
        "tool/result",
        seq,
        1,
        data,
        surface_op=shapes.replace_op(target["seq"], target["seq"]),
        sources=[target["seq"]],
    )


def _rewrite_field(prefix: Sequence[Wire], pick: int) -> Wire | None:
    results = _result_nodes(prefix)
    if not results:
        return None
    target = prefix[results[pick % len(results)]]
    fields = [f for f, error in REWRITE_FIELDS.items() if error == "ToolResultRewriteError"]
    return rewrite_of(target, len(prefix), change=fields[(pick // 7) % len(fields)])


def _tool_result(call: str, src_call: str) -> Any:
    message = shapes.tool_result_message("r", call, [])
    message["source"]["callId"] = src_call
    return shapes.tool_result_data(1, 1, message)


MUTATIONS: dict[str, tuple[str, _Maker]] = {
    "R1 NaN in data": ("NotLosslessJson", _simple("todo/write", {"todos": [math.nan]})),
    "R1 -0.0 in data": ("NotLosslessJson", _simple("x-app/thing", {"v": -0.0})),
    "R1 2**53 in data": ("NotLosslessJson", _simple("x-app/thing", [2**53])),
    "R3 request/header-delta": ("LegacyFormat", _simple("request/header-delta", {})),
    "R3 mode/set": ("LegacyFormat", _simple("mode/set", {"mode": "plan"})),
    "R3 fallback reason": ("LegacyFormat", _simple("request/header", _header("fallback"))),
    "R5 surfaceOp on non-surface type": (
        "SurfaceMarkerError",
        _simple("todo/write", {"todos": []}, surfaceOp="append"),
    ),
    "R5 sourceEventSeqs on non-surface type": (
        "SurfaceMarkerError",
        _simple("turn/start", {"turn": 1}, sourceEventSeqs=[]),
    ),
    "R5 surface type without surfaceOp": ("SurfaceMarkerError", _user_with()),
    "R5 invalid surfaceOp string": ("SurfaceMarkerError", _user_with(surfaceOp="prepend")),
    "R6 negative replace start": (
        "SurfaceMarkerError",
        _user_with(surfaceOp={"op": "replace", "start": -1, "end": 0}),
    ),
    "R6 replace without end": (
        "SurfaceMarkerError",
        _user_with(surfaceOp={"op": "replace", "start": 0}),
    ),
    "R6 replace with extra key": (
        "SurfaceMarkerError",
        _user_with(surfaceOp={"op": "replace", "start": 0, "end": 0, "note": "x"}),
    ),
    "R6 splice op": (
        "SurfaceMarkerError",
        _user_with(surfaceOp={"op": "splice", "start": 0, "end": 0}),
    ),
    "R7b empty citations on user/message": (
        "ProvenanceError",
        _user_with(surfaceOp="append", sourceEventSeqs=[]),
    ),
    "R7c non-integer citation": (
        "ProvenanceError",
        _user_with(surfaceOp="append", sourceEventSeqs=["0"]),
    ),
    "R7c negative citation": (
        "ProvenanceError",
        _user_with(surfaceOp="append", sourceEventSeqs=[-1]),
    ),
    "R7d duplicate citation": ("ProvenanceError", _duplicate_citation),
    "R7e self or future citation": ("ProvenanceError", _self_citation),
    "R7f replace missing a shadowed node": ("ProvenanceError", _missing_coverage),
    "R8 endpoint not on surface": ("ReplaceRangeError", _endpoint_off_surface),
    "R8 reversed range": ("ReplaceRangeError", _reversed_range),
    "R9 rewrite of a non-result node": ("ToolResultRewriteError", _rewrite_wrong_target),
    "R9 rewrite of two nodes": ("ToolResultRewriteError", _rewrite_two_nodes),
    "R9 rewrite changing more than content": ("ToolResultRewriteError", _rewrite_field),
    "R10 user message without id": (
        "MessageShapeError",
        _simple(
            "user/message",
            {"role": "user", "content": [], "source": {"kind": "user"}},
            surfaceOp="append",
        ),
    ),
    "R10 user message with assistant role": (
        "MessageShapeError",
        _simple(
            "user/message",
            {"id": "u", "role": "assistant", "content": [], "source": {"kind": "user"}},
            surfaceOp="append",
        ),
    ),
    "R10 assistant without model source": (
        "MessageShapeError",
        _simple(
            "assistant/message",
            {
                "turn": 1,
                "step": 1,
                "message": {
                    "id": "a",
                    "role": "assistant",
                    "content": [],
                    "source": {"kind": "user"},
                },
            },
            surfaceOp="append",
        ),
    ),
    "R10 mismatched tool call ids": (
        "MessageShapeError",
        _simple("tool/result", _tool_result("c", "other"), surfaceOp="append"),
    ),
    "R11a header without provider": (
        "RequestHeaderShapeError",
        _simple("request/header", {"header": {"config": {"model": "m"}}, "reason": "initial"}),
    ),
    "R11d extra header key": (
        "RequestHeaderShapeError",
        _simple(
            "request/header",
            {
                "header": {"config": {"provider": "p", "model": "m"}, "note": "x"},
                "reason": "initial",
            },
        ),
    ),
    "R11e bogus reason": ("RequestHeaderShapeError", _simple("request/header", _header("bogus"))),
    "R11f startsSeries on series": (
        "RequestHeaderShapeError",
        _simple("request/header", _header("series", startsSeries=True)),
    ),
    "R12 turn 0": ("EventShapeError", _simple("turn/start", {"turn": 0})),
    "R12 step/end extra key": (
        "EventShapeError",
        _simple("step/end", {"turn": 1, "step": 1, "x": 1}),
    ),
    "R12 chunk data null": ("EventShapeError", _simple("assistant/chunk", None)),
    "R12 tool/call extra key": (
        "EventShapeError",
        _simple(
            "tool/call",
            {"turn": 1, "step": 1, "callId": "c", "name": "n", "arguments": "{}", "x": 1},
        ),
    ),
    "R12 context without model": ("EventShapeError", _simple("request/context", {"provider": "p"})),
    "R12 unknown turn/end shape": (
        "EventShapeError",
        _simple("turn/end", {"turn": 1, "reason": {"kind": "completed", "why": "x"}}),
    ),
}
"""Every mutation, by label: the error class admission must raise, and how to build it.

The keys are the labels `mutation_cases(labels=...)` takes; each starts with the rule it breaks.
"""


def applicable(prefix: Sequence[Wire]) -> list[str]:
    """The labels whose mutation can be built on this prefix."""
    return [label for label, (_, make) in MUTATIONS.items() if make(prefix, 0) is not None]


def mutate(prefix: Sequence[Wire], label: str, pick: int) -> Mutation | None:
    """The mutation `label` on `prefix`, or None when it does not apply."""
    error, make = MUTATIONS[label]
    event = make(prefix, pick)
    return None if event is None else Mutation(label, error, event)


def mutation_cases(
    *,
    labels: Sequence[str] | None = None,
    logs: st.SearchStrategy[LoopLog] | None = None,
    shape: ShapeChoice = "dsh",
) -> st.SearchStrategy[MutationCase]:
    """A G-loop prefix, a single-rule mutation of its next event, and the real next event.

    The cut is drawn among the prefixes the chosen mutation applies to.

    Args:
        labels: the rules broken, as a list or tuple of `MUTATIONS` keys (default: all).
        logs: a strategy of `LoopLog`s to cut the prefixes from, instead of G-loop logs.
        shape: the loop shape of the G-loop logs (`LOOP_SHAPES`, or `"any"`).

    Raises:
        InvalidArgument: when built with `labels` that is empty, not a list or tuple, or names
            an unknown mutation; a `logs` that is not a strategy; or an unknown `shape`.
    """
    check_shape(shape)
    if logs is not None and not isinstance(logs, st.SearchStrategy):
        raise InvalidArgument(f"logs={logs!r} must be a strategy of LoopLogs or None")
    if labels is not None:
        labels = check_labels("labels", labels, MUTATIONS)
    source = (
        logs
        if logs is not None
        else loop_logs(max_actions=4, min_actions=1, min_steps=1, shape=shape)
    )
    names = list(labels) if labels is not None else sorted(MUTATIONS)

    def build(log: LoopLog, cut: int, which: int, pick: int) -> MutationCase | None:
        label = names[which % len(names)]
        cuts = [k for k in range(len(log.events) + 1) if mutate(log.events[:k], label, pick)]
        if not cuts:
            return None
        k = cuts[cut % len(cuts)]
        mutation = mutate(log.events[:k], label, pick)
        assert mutation is not None
        valid_next = log.events[k] if k < len(log.events) else None
        return MutationCase(log.events[:k], mutation, valid_next)

    cases = st.builds(
        build, source, st.integers(0, 10**6), st.integers(0, 10**3), st.integers(0, 10**3)
    )
    return cases.filter(lambda c: c is not None)  # type: ignore[return-value]


@attrs.frozen(repr=False)
class RewriteCase:
    """P18 input: a log prefix ending on a valid state and a rewrite of one current result.

    `target` is the seq of the rewritten `tool/result`, `change` the `REWRITE_FIELDS` key also
    changed (None: content only); `event()` builds the rewrite.
    """

    prefix: tuple[Wire, ...]
    target: int
    change: str | None

    def event(self) -> Wire:
        """The rewrite event (content changed, plus `change` when not None)."""
        return rewrite_of(self.prefix[self.target], len(self.prefix), change=self.change)

    _repr_pretty_ = pretty_as_repr

    def __repr__(self) -> str:
        from properties._report import format_log

        return f"RewriteCase(target={self.target}, change={self.change})\n{format_log(self.prefix)}"


def rewrite_cases(
    change: str | EllipsisType | None = ..., *, shape: ShapeChoice = "dsh"
) -> st.SearchStrategy[RewriteCase]:
    """A G-loop log with at least one tool/result node, and a rewrite of one of them that changes
    its content and, unless `change` is None, one more field.

    Args:
        change: a key of `REWRITE_FIELDS`, or None for a content-only rewrite; default: drawn
            from None and every key.
        shape: the loop shape of the G-loop logs (`LOOP_SHAPES`, or `"any"`).

    Raises:
        InvalidArgument: when built with an unknown `change` or `shape`.
    """
    check_shape(shape)
    changes: st.SearchStrategy[str | None]
    if isinstance(change, EllipsisType):
        changes = st.none() | st.sampled_from(sorted(REWRITE_FIELDS))
    else:
        if change is not None:
            check_choice("change", change, sorted(REWRITE_FIELDS))
        changes = st.just(change)

    def build(log: LoopLog, pick: int, change: str | None) -> RewriteCase | None:
        results = _result_nodes(log.events)
        if not results:
            return None
        return RewriteCase(log.events, results[pick % len(results)], change)

    cases = st.builds(
        build,
        loop_logs(max_actions=3, min_actions=1, min_steps=1, max_calls=2, shape=shape),
        st.integers(0, 100),
        changes,
    )
    return cases.filter(lambda c: c is not None)  # type: ignore[return-value]


# -- renumbering edits --------------------------------------------------------------------------


def relocate(events: Sequence[Wire | None], originals: Sequence[int | None]) -> list[Wire]:
    """Renumber edited events: `originals[i]` is the old seq of new event `i` (None: inserted).

    Seqs become positions, and citations and replace endpoints follow the
    events they named (citations of removed events are dropped).
    """
    new_of = {old: new for new, old in enumerate(originals) if old is not None}
    out: list[Wire] = []
    for new, event in enumerate(events):
        assert event is not None
        e = copy.deepcopy(event)
        e["seq"] = new
        if originals[new] is not None:
            if isinstance(e.get("sourceEventSeqs"), list):
                e["sourceEventSeqs"] = [new_of[s] for s in e["sourceEventSeqs"] if s in new_of]
            op = e.get("surfaceOp")
            if isinstance(op, dict) and op.get("start") in new_of and op.get("end") in new_of:
                e["surfaceOp"] = shapes.replace_op(new_of[op["start"]], new_of[op["end"]])
        out.append(e)
    return out


def insert_event(events: Sequence[Wire], k: int, new: Wire) -> list[Wire]:
    """`events` with `new` inserted at position `k`, everything renumbered."""
    seqs: list[int | None] = [e["seq"] for e in events]
    merged: list[Wire | None] = [*events[:k], new, *events[k:]]
    return relocate(merged, [*seqs[:k], None, *seqs[k:]])


LEGACY_EVENTS: dict[str, Wire] = {
    "request/header-delta": shapes.envelope("request/header-delta", 0, 1, {"delta": {}}),
    "mode/set": shapes.envelope("mode/set", 0, 1, {"mode": "plan"}),
    "fallback header": shapes.envelope("request/header", 0, 1, _header("fallback")),
}
"""The retired vocabulary of docs/format/events.md §6.3, one event each, by the label
`legacy_insertions(label=...)` takes."""


@attrs.frozen(repr=False)
class LegacyInsertion:
    """P13 input: a G-loop log (`events`) with the legacy event `label` inserted at `position`."""

    label: str
    position: int
    events: tuple[Wire, ...]

    _repr_pretty_ = pretty_as_repr

    def __repr__(self) -> str:
        from properties._report import format_log

        return f"LegacyInsertion({self.label} at {self.position})\n{format_log(self.events)}"


def legacy_insertions(
    label: str | None = None, *, shape: ShapeChoice = "dsh"
) -> st.SearchStrategy[LegacyInsertion]:
    """A G-loop log with one event of retired vocabulary inserted: a `request/header-delta`, a
    `mode/set` or a fallback header.

    Args:
        label: the key of `LEGACY_EVENTS` to insert; default: drawn.
        shape: the loop shape of the G-loop logs (`LOOP_SHAPES`, or `"any"`).

    Raises:
        InvalidArgument: when built with an unknown `label` or `shape`.
    """
    check_shape(shape)
    if label is not None:
        check_choice("label", label, sorted(LEGACY_EVENTS))

    def build(log: LoopLog, label: str, at: int) -> LegacyInsertion:
        k = at % (len(log.events) + 1)
        return LegacyInsertion(label, k, tuple(insert_event(log.events, k, LEGACY_EVENTS[label])))

    labels = st.sampled_from(sorted(LEGACY_EVENTS)) if label is None else st.just(label)
    return st.builds(build, loop_logs(max_actions=4, shape=shape), labels, st.integers(0, 500))


# -- P29 perturbations --------------------------------------------------------------------------


@attrs.frozen(repr=False)
class Perturbation:
    """A well-formed log (`original`) edited so one relational invariant breaks (`events`).

    `kind` is the edit, one of `PERTURBATIONS`.
    """

    kind: str
    original: tuple[Wire, ...]
    events: tuple[Wire, ...]

    _repr_pretty_ = pretty_as_repr

    def __repr__(self) -> str:
        from properties._report import format_log

        return f"Perturbation({self.kind})\n{format_log(self.events)}"


_STEP_SCOPED = ("step/start", "step/end", "assistant/chunk", "assistant/message", "tool/call")


def perturb(events: Sequence[Wire], kind: str, pick: int) -> list[Wire] | None:
    """Apply perturbation `kind` (see `PERTURBATIONS`) to a well-formed log, or None."""
    ev = [copy.deepcopy(e) for e in events]
    seqs: list[int | None] = [e["seq"] for e in ev]

    def choose(pred: Callable[[Wire], bool]) -> int | None:
        idx = [i for i, e in enumerate(ev) if pred(e)]
        return idx[pick % len(idx)] if idx else None

    if kind in ("turn/start number", "turn/end number"):
        i = choose(lambda e: e["type"] == kind.split()[0])
        if i is None:
            return None
        ev[i]["data"]["turn"] += 1 + pick % 2
        return ev
    if kind == "step number":
        i = choose(
            lambda e: (
                e["type"] in _STEP_SCOPED
                or (e["type"] == "tool/result" and e.get("surfaceOp") == "append")
            )
        )
        if i is None:
            return None
        ev[i]["data"]["step"] += 1
        return ev
    if kind in ("delete step/end", "delete turn/end"):
        # A turn/end is only missed when another turn follows (an open last turn is a crash prefix).
        later_start = [any(f["type"] == "turn/start" for f in ev[i + 1 :]) for i in range(len(ev))]
        i = choose(
            lambda e: (
                e["type"] == kind.split()[1]
                and (kind == "delete step/end" or later_start[e["seq"]])
            )
        )
        if i is None:
            return None
        return relocate(ev[:i] + ev[i + 1 :], seqs[:i] + seqs[i + 1 :])
    if kind == "duplicate tool/result":
        # The same call answered twice: a copy (new message id) right after the result.
        i = choose(lambda e: e["type"] == "tool/result" and e.get("surfaceOp") == "append")
        if i is None:
            return None
        copied = copy.deepcopy(ev[i])
        copied["data"]["message"]["id"] += "-again"
        return relocate(
            [*ev[: i + 1], copied, *ev[i + 1 :]], [*seqs[: i + 1], None, *seqs[i + 1 :]]
        )
    if kind == "move request/header out of its turn":
        i = choose(lambda e: e["type"] == "request/header")
        if i is None:
            return None
        j = next(k for k in range(i, len(ev)) if ev[k]["type"] == "turn/end")
        order = [*range(i), *range(i + 1, j + 1), i, *range(j + 1, len(ev))]
        return relocate([ev[k] for k in order], [seqs[k] for k in order])
    raise ValueError(kind)


PERTURBATIONS = (
    "turn/start number",
    "turn/end number",
    "step number",
    "delete step/end",
    "delete turn/end",
    "move request/header out of its turn",
    "duplicate tool/result",
)
"""The edits `perturbations(kind=...)` takes; each breaks one relational invariant (P29)."""


def perturbations(
    kind: str | None = None, *, shape: ShapeChoice = "dsh"
) -> st.SearchStrategy[Perturbation]:
    """P29 input: one perturbation of a G-loop log, which breaks one relational invariant.

    Args:
        kind: the perturbation, one of `PERTURBATIONS`; default: drawn.
        shape: the loop shape of the G-loop logs (`LOOP_SHAPES`, or `"any"`).

    Raises:
        InvalidArgument: when built with an unknown `kind` or `shape`.
    """
    check_shape(shape)
    if kind is not None:
        check_choice("kind", kind, PERTURBATIONS)

    def build(log: LoopLog, kind: str, pick: int) -> Perturbation | None:
        edited = perturb(log.events, kind, pick)
        return None if edited is None else Perturbation(kind, log.events, tuple(edited))

    kinds = st.sampled_from(PERTURBATIONS) if kind is None else st.just(kind)
    # Two turns only where the edit needs them (a deleted turn/end must have a turn after it):
    # fewer forced actions, shorter shrunk examples.
    two_turns = kind is None or kind == "delete turn/end"
    logs = loop_logs(max_actions=4, min_actions=2 if two_turns else 1, min_steps=1, shape=shape)
    cases = st.builds(build, logs, kinds, st.integers(0, 100))
    return cases.filter(lambda p: p is not None)  # type: ignore[return-value]
