"""G-loop's loop shapes: DSH's agent-loop order by default, the kit's earlier order on request.

DSH writes a turn's surface events only after its first `step/start` (a step claims
the user's messages), each `tool/call` right before its `tool/result`, and a
compaction as four records back to back. `dsh_order_problems` checks that order
on wire events; the kernel must admit both shapes (P28 here, every law elsewhere).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest
from hypothesis import Phase, find, given, settings
from hypothesis.errors import InvalidArgument
from loop_order import dsh_order_problems

from kernel import SessionLog
from properties import laws
from properties import strategies as gen
from properties._loop import (
    CallSpec,
    CompactAction,
    LoopScript,
    ReplySpec,
    StepSpec,
    TurnAction,
    UserAction,
    interpret,
    loop_scripts,
)
from properties._report import format_log
from properties._shapes import Wire
from properties.exhaustive import family
from properties.strategies import LOOP_SHAPES, LoopLog, LoopShape


def _assert_dsh_order(log: LoopLog) -> None:
    problems = dsh_order_problems(log.events)
    assert not problems, (
        "not in DSH's loop order:\n" + "\n".join(problems) + "\nlog:\n" + format_log(log.events)
    )


def _claims(log: LoopLog) -> tuple[int, int, int]:
    """(user messages written, steps with their own input, messages sent before a later step)."""
    written = sum(
        e["type"] == "user/message" and e["data"]["source"] == {"kind": "user"} for e in log.events
    )
    actions = log.script.actions
    inputs = sum(
        step.user_input is not None
        for action in actions
        if isinstance(action, TurnAction)
        for step in action.steps
    )
    stepped_after = [
        any(isinstance(later, TurnAction) and later.steps for later in actions[i + 1 :])
        for i in range(len(actions))
    ]
    sent = sum(isinstance(a, UserAction) and stepped_after[i] for i, a in enumerate(actions))
    return written, inputs, sent


# -- the property -------------------------------------------------------------------------------


@given(gen.loop_logs())
def test_default_loop_logs_follow_dsh_loop_order(log: LoopLog) -> None:
    assert log.script.shape == "dsh"
    _assert_dsh_order(log)
    # A message sent between turns is written once, by the next step; with no step after it, never.
    written, inputs, sent = _claims(log)
    assert written == inputs + sent, f"{written} user messages, {inputs} + {sent} expected"
    laws.law_loop_logs_well_formed(log)  # P28: and the kernel admits them


@settings(max_examples=5)
@given(gen.crash_prefixes(), loop_scripts())
def test_crash_prefixes_and_scripts_default_to_dsh_order(case: Any, script: LoopScript) -> None:
    assert case.log.script.shape == "dsh" and script.shape == "dsh"
    _assert_dsh_order(case.log)


def _features(log: LoopLog) -> set[str]:
    """Which kinds of compaction, and whether a message sent before a step, a log holds."""
    found: set[str] = set()
    open_turn = False
    for e in log.events:
        if e["type"] in ("turn/start", "turn/end"):
            open_turn = e["type"] == "turn/start"
        elif e["type"] == "compaction/end":
            found.add("failed" if "error" in e["data"] else "in turn" if open_turn else "between")
    if _claims(log)[2]:
        found.add("claimed")
    return found


def _drawn(condition: Callable[[LoopLog], bool], **options: Any) -> LoopLog:
    """The first generated log that meets `condition` (not shrunk: only its existence counts)."""
    fast = settings(max_examples=1000, phases=[Phase.generate], database=None)
    return find(gen.loop_logs(max_actions=8, **options), condition, settings=fast)


def test_dsh_logs_draw_every_kind_of_compaction_and_claimed_messages() -> None:
    # A property over logs that lack what it checks passes vacuously: the generator must draw
    # in-turn, between-turn and failed compactions, and messages a later step claims.
    seen: set[str] = set()

    def all_seen(log: LoopLog) -> bool:
        seen.update(_features(log))
        return seen >= {"in turn", "between", "failed", "claimed"}

    _drawn(all_seen, min_actions=4)


def test_any_shape_draws_both_shapes() -> None:
    shapes = {_drawn(lambda log: log.script.shape == "loose", shape="any").script.shape}
    shapes.add(_drawn(lambda log: log.script.shape == "dsh", shape="any").script.shape)
    assert shapes == set(LOOP_SHAPES)


def test_an_unknown_shape_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="shape='dhs' must be one of 'dsh', 'loose', 'any'"):
        loop_scripts(shape="dhs")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'shape' must be in"):
        attrs.evolve(_script(), shape="dhs")  # type: ignore[arg-type]


# -- one script in both orders --------------------------------------------------------------


def _script() -> LoopScript:
    """A message between turns, a step with two calls (scheduled call, call, result, result
    with a notice between), then a bracketed compaction of the first message. The step's
    failed compaction is written in DSH order only."""
    calls = (CallSpec("ls", "{}", "a", False, False), CallSpec("read", "{}", "b", False, False))
    step = StepSpec(
        user_input="go",
        header=0,
        declared=False,
        retry_header=None,
        window=False,
        reply=ReplySpec("text", "", None, calls, stream=0, pieces=1, usage=False),
        schedule=(0, 0, 0, 0),
        injections=(1,),
        todo=False,
        compact=CompactAction(start=0, end=0, extra=None, bracket=False, failed=True),
    )
    actions = (
        UserAction("hi"),
        TurnAction(steps=(step,), reason=0, rewrite=None, rewrite_text=""),
        CompactAction(start=0, end=0, extra=None, bracket=True),
    )
    return LoopScript(start_time=1000, ticks=(1,), actions=actions, shape="loose")


def _outline(log: LoopLog) -> list[tuple[Any, ...]]:
    """Each event's type, surface operation and citations."""
    return [(e["type"], e.get("surfaceOp"), e.get("sourceEventSeqs")) for e in log.events]


def test_the_loose_shape_keeps_the_kits_earlier_order() -> None:
    log = interpret(_script())
    replace = {"op": "replace", "start": 0, "end": 0}
    assert _outline(log) == [
        ("user/message", "append", None),  # before the turn
        ("turn/start", None, None),
        ("step/start", None, None),
        ("user/message", "append", None),
        ("request/header", None, None),
        ("request/context", None, None),
        ("assistant/message", "append", []),
        ("tool/call", None, None),
        ("tool/call", None, None),
        ("user/message", "append", None),  # a notice between the calls and their results
        ("tool/result", "append", [7]),
        ("tool/result", "append", [8]),
        ("step/end", None, None),
        ("turn/end", None, None),
        ("compaction/start", None, None),
        ("user/message", replace, [0]),
        ("compaction/end", None, None),
    ]
    assert log.events[14]["data"] == {"range": [0, 0]} and log.events[16]["data"] == {}
    assert dsh_order_problems(log.events) == [
        "seq 0: user/message outside a turn (only a compaction's checkpoint may be)",
        "seq 0: a user/message that a step did not claim right after its step/start",
        "seq 7: a tool/call that its tool/result does not follow",
        "seq 8: a tool/call that its tool/result does not follow",
        "seq 9: a user/message that a step did not claim right after its step/start",
        "seq 10: a tool/result that does not come right after its tool/call",
        "seq 11: a tool/result that does not come right after its tool/call",
        "seq 14: compaction/start data is not {compactionId, turn: 1}",
        "seq 14: compaction/start is followed by ('user/message', 'compaction/end'), not "
        "summary, checkpoint and end",
        "seq 15: user/message outside a turn (only a compaction's checkpoint may be)",
        "seq 15: a user/message that a step did not claim right after its step/start",
        "seq 16: compaction/end outside a compaction transaction",
    ]


def test_the_dsh_shape_writes_the_same_script_in_loop_order() -> None:
    log = interpret(attrs.evolve(_script(), shape="dsh"))
    replace = {"op": "replace", "start": 2, "end": 2}
    assert _outline(log) == [
        ("turn/start", None, None),
        ("step/start", None, None),
        ("user/message", "append", None),  # the message sent before the turn, claimed
        ("user/message", "append", None),
        ("request/header", None, None),
        ("request/context", None, None),
        ("assistant/message", "append", []),
        ("tool/call", None, None),
        ("tool/result", "append", [7]),
        ("tool/call", None, None),
        ("tool/result", "append", [9]),
        ("step/end", None, None),
        ("compaction/start", None, None),  # the step's compaction, failed
        ("compaction/end", None, None),
        ("turn/end", None, None),
        ("compaction/start", None, None),
        ("compaction/summary", None, None),
        ("user/message", replace, [15, 16, 2]),
        ("compaction/end", None, None),
    ]
    failed_end = log.events[13]["data"]
    assert failed_end["compactionId"] == "k12" and failed_end["turn"] == 1 and failed_end["error"]
    assert log.events[16]["data"] == {
        "compactionId": "k15",
        "summary": [{"type": "text", "text": "summary of 1 messages"}],
        "shadowedRange": {"start": 2, "end": 2},
        "shadowedSeqs": [2],
        "shadowedTokenCount": 10,
        "provider": "deepseek",
        "model": "deepseek-chat",
    }
    assert dsh_order_problems(log.events) == []
    SessionLog.restore(log.kernel_events(), header={"version": 0, "id": "s", "createdAt": 0})


def test_a_dsh_checkpoint_cites_seqs_out_of_order_and_the_kernel_admits_it() -> None:
    # R7 asks for distinct, earlier seqs covering the shadowed nodes; not for increasing ones.
    log = interpret(attrs.evolve(_script(), shape="dsh"))
    checkpoint = log.events[17]
    assert checkpoint["sourceEventSeqs"] != sorted(checkpoint["sourceEventSeqs"])
    restored = SessionLog.restore(
        log.kernel_events(), header={"version": 0, "id": "s", "createdAt": 0}
    )
    assert restored.events[17].source_event_seqs == (15, 16, 2)


def _dsh_example() -> list[Wire]:
    return interpret(attrs.evolve(_script(), shape="dsh")).wire()


def _reuse_first_id(events: list[Wire]) -> None:
    for k in (15, 16, 18):
        events[k]["data"]["compactionId"] = "k12"
    events[17]["data"]["source"]["compactionId"] = "k12"


def _claim_late(events: list[Wire]) -> None:
    events[3], events[4] = events[4], events[3]


def _message_first(events: list[Wire]) -> None:
    events[1], events[2] = events[2], events[1]


def _sorted_citations(events: list[Wire]) -> None:
    events[17]["sourceEventSeqs"].sort()


def _summary_names_nothing(events: list[Wire]) -> None:
    events[16]["data"]["shadowedSeqs"] = []


def _end_before_checkpoint(events: list[Wire]) -> None:
    events[17], events[18] = events[18], events[17]


def _results_after_both_calls(events: list[Wire]) -> None:
    events[8], events[9] = events[9], events[8]


_DEPARTURES: dict[str, tuple[Callable[[list[Wire]], None], str]] = {
    "an id used twice": (_reuse_first_id, "seq 15: compactionId 'k12' is used twice"),
    "a message claimed late": (
        _claim_late,
        "seq 4: a user/message that a step did not claim right after its step/start",
    ),
    "a message before the first step": (
        _message_first,
        "seq 1: user/message before the turn's first step/start",
    ),
    "sorted citations": (
        _sorted_citations,
        "seq 17: the checkpoint does not cite [start, summary, *shadowed seqs]",
    ),
    "a summary naming no node": (
        _summary_names_nothing,
        "seq 16: the summary does not name the compaction and the shadowed nodes [2]",
    ),
    "the end before the checkpoint": (
        _end_before_checkpoint,
        "seq 15: compaction/start is followed by ('compaction/summary', 'compaction/end', "
        "'user/message'), not summary, checkpoint and end",
    ),
    "two calls, then two results": (
        _results_after_both_calls,
        "seq 7: a tool/call that its tool/result does not follow",
    ),
}


@pytest.mark.parametrize("label", sorted(_DEPARTURES))
def test_the_order_check_names_each_departure(label: str) -> None:
    edit, expected = _DEPARTURES[label]
    events = _dsh_example()
    edit(events)
    assert expected in dsh_order_problems(events)


@pytest.mark.parametrize("shape", LOOP_SHAPES)
def test_the_exhaustive_family_takes_a_shape(shape: LoopShape) -> None:
    logs = list(family("tiny", shape=shape))
    assert logs and {log.script.shape for log in logs} == {shape}
    if shape == "dsh":
        for log in logs:
            _assert_dsh_order(log)
    else:
        assert any(dsh_order_problems(log.events) for log in logs)
