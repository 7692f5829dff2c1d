"""Surface fold: P14-P17 (docs/format/properties.md §4), and the slot structure against a list
model."""

import copy
import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel import SessionLog, derive_messages, fold_surface
from kernel.errors import ReplaceRangeError
from kernel.folds.surface import SurfaceState
from properties import _shapes as shapes
from properties import laws
from properties import strategies as gen
from properties._model import SurfaceModel, messages_of
from properties._report import check
from properties.laws._common import append_wire, messages_plain, same_json
from properties.strategies import LoopLog

_LOGS = st.one_of(gen.loop_logs(shape="any"), gen.interleavings().map(lambda i: i.mixed))


@given(_LOGS)
def test_p14_incremental_equals_complete(log: object) -> None:
    laws.law_incremental_surface(log)


@given(_LOGS)
def test_p15_node_sanity(log: object) -> None:
    laws.law_surface_nodes_sane(log)


@given(_LOGS)
def test_p16_node_count(log: object) -> None:
    laws.law_surface_node_count(log)


@given(gen.loop_logs(shape="any"), st.integers(0, 200))
def test_p17_windowed_fold(log: LoopLog, base: int) -> None:
    laws.law_windowed_fold(log, base % (len(log.events) + 1))


@given(gen.interleavings(), st.integers(0, 200))
def test_p17_windowed_fold_over_arbitrary_replacements(case: object, base: int) -> None:
    mixed = case.mixed  # type: ignore[attr-defined]
    laws.law_windowed_fold(mixed, base % (len(mixed) + 1))


# -- slots against a list model (design record 2026-12-01-linear-surface-and-history) ---------

_KINDS = ("user", "assistant", "empty", "result", "noise", "rewrite", *["replace"] * 3)
_OPS = st.lists(
    st.tuples(
        st.sampled_from(_KINDS),
        st.integers(0, 40),  # a: which endpoint / target
        st.integers(0, 40),  # b: the other endpoint
        st.sampled_from(("user", "assistant", "empty")),  # what a replace event is
        st.sampled_from(("nodes", "chain", "any")),  # where a replace's endpoints come from
        st.booleans(),  # read nodes and messages after this step
    ),
    min_size=24,
    max_size=80,
)


def _event(kind: str, seq: int, **surface: Any) -> dict[str, Any]:
    if kind == "user":
        data = shapes.user_message(f"u{seq}", f"text {seq}")
        return shapes.envelope("user/message", seq, seq, data, **surface)
    if kind in ("assistant", "empty"):
        content = [] if kind == "empty" else [{"type": "text", "text": f"answer {seq}"}]
        data = shapes.assistant_data(1, 1, shapes.assistant_message(f"a{seq}", content))
        return shapes.envelope("assistant/message", seq, seq, data, **surface)
    message = shapes.tool_result_message(f"r{seq}", f"c{seq}", [{"type": "text", "text": "out"}])
    data = shapes.tool_result_data(1, 1, message)
    return shapes.envelope("tool/result", seq, seq, data, **surface)


def _endpoints(
    ends: str, a: int, b: int, nodes: list[int], model: SurfaceModel, seq: int
) -> tuple[int, int]:
    """`any`: two seqs (stale, off-surface or unknown ones too); `nodes`: two current nodes in
    either order; `chain`: a short range from a current replacement node, which makes the
    replaces that reuse a slot whose successor slot is already empty."""
    if ends == "any" or not nodes:
        return a % (seq + 2), b % (seq + 2)
    if ends == "nodes":
        return nodes[a % len(nodes)], nodes[b % len(nodes)]
    replaced = [r[0] for r in model.replacements if r[0] in nodes] or nodes
    start = replaced[a % len(replaced)]
    i = nodes.index(start)
    return start, nodes[min(len(nodes) - 1, i + b % 4)]


def _check_slots(state: SurfaceState, law: str, wire: list[dict[str, Any]]) -> None:
    """From every current node, one step (past an emptied slot's jump) reaches the next node."""
    slots = list(state.slots)
    live = [x for x, seq in enumerate(slots) if seq >= 0]
    for x, following in itertools.pairwise([*live, len(slots)]):
        step = x + 1
        if step < len(slots) and slots[step] < 0:
            step = ~slots[step]
        check(step == following, law, f"slot {x} steps to {step}, not {following}", log=wire)
        check(state.slot_of[slots[x]] == x, law, f"slot_of[{slots[x]}] is not {x}", log=wire)


def _agrees(log: SessionLog, model: SurfaceModel, wire: list[dict[str, Any]], law: str) -> None:
    expected = messages_of(wire)
    check(
        list(log.surface.nodes) == model.nodes
        and log.surface.replace_generation == model.generation,
        law,
        "the surface differs from the list model",
        log=wire,
        kernel=list(log.surface.nodes),
        model=model.nodes,
    )
    check(
        len(log.messages) == len(expected) and same_json(messages_plain(log.messages), expected),
        law,
        "the derived history differs from the list model",
        log=wire,
        kernel=list(log.messages),
        model=expected,
    )
    _check_slots(log.surface, law, wire)


@pytest.mark.slow
@given(_OPS)
def test_incremental_surface_and_history_equal_a_list_model(ops: list[Any]) -> None:
    """Appends, replaces (valid, stale, reversed) and rewrites, with or without reading the
    folds between steps: the kept surface and history are the list model's, and a replace
    the model refuses is refused with the model's R8 reason."""
    law = "slots = list model"
    log, model, wire = SessionLog.empty(), SurfaceModel(), []
    for kind, a, b, by, ends, look in ops:
        seq = len(wire)
        if kind == "noise":
            event = shapes.envelope("todo/write", seq, seq, {"todos": []})
        elif kind == "rewrite":
            targets = [s for s in model.nodes if wire[s]["type"] == "tool/result"]
            if not targets:
                continue
            target = targets[a % len(targets)]
            data = copy.deepcopy(wire[target]["data"])
            data["message"]["content"][0]["content"] = [{"type": "text", "text": f"cut {seq}"}]
            op = shapes.replace_op(target, target)
            event = shapes.envelope("tool/result", seq, seq, data, surface_op=op, sources=[target])
        elif kind == "replace":
            nodes = model.nodes
            start, end = _endpoints(ends, a, b, nodes, model, seq)
            if start not in nodes or end not in nodes or nodes.index(start) > nodes.index(end):
                reason = (
                    f"start seq {start} not found"
                    if start not in nodes
                    else f"end seq {end} not found"
                    if end not in nodes
                    else f"start {start} is after end {end}"
                )
                refused = _event(by, seq, surface_op=shapes.replace_op(start, end), sources=[])
                with pytest.raises(ReplaceRangeError) as caught:
                    append_wire(log, refused)
                check(reason in str(caught.value), law, f"refused for {caught.value}, not {reason}")
                continue
            shadowed = nodes[nodes.index(start) : nodes.index(end) + 1]
            op = shapes.replace_op(start, end)
            event = _event(by, seq, surface_op=op, sources=shadowed)
        else:
            event = _event(kind, seq, surface_op="append")
        log = append_wire(log, event)
        wire.append(event)
        model.step(event)
        if look:
            _agrees(log, model, wire, law)
    _agrees(log, model, wire, law)
    _agrees(SessionLog.restore(wire), model, wire, law)
    fold = fold_surface(log.events)
    check(
        [(r.seq, r.start, r.end, r.shadowed_seqs) for r in fold.replacements] == model.replacements,
        law,
        "fold_surface's replacements differ from the list model",
        log=wire,
    )
    check(same_json(messages_plain(derive_messages(log.events)), messages_of(wire)), law, "")
