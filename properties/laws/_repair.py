"""Laws on crash-repair closers (docs/format/properties.md §8: P30-P35).

Each law takes a crash prefix `P` (a G-loop log cut after any event) as wire
dicts or events; `R = P + interrupted_turn_closers(P)` is the repaired log.
"""

from __future__ import annotations

from typing import Any

from kernel.folds.closers import (
    TOOL_NOT_STARTED,
    TOOL_NOT_STARTED_TEXT,
    TOOL_OUTCOME_UNKNOWN,
    TOOL_OUTCOME_UNKNOWN_TEXT,
)
from kernel.log import SessionLog
from kernel.storage.jsonl import encode_records, load_jsonl, write_jsonl
from kernel.values.events import APPEND
from kernel.wire.codec import event_from_json, event_to_json
from properties._model import scan_for_closers
from properties._report import check, violated
from properties.laws._common import as_events, as_wire
from properties.laws._history import tool_pairing_problem
from properties.laws._implementation import KERNEL, Implementation

__all__ = (
    "law_crash_prefix_repairs",
    "law_repair_idempotent",
    "law_repair_cycle_writes_once",
    "law_repair_append_only",
    "law_closer_emptiness",
    "law_synthetic_results",
    "law_closers_deterministic",
)

_HEADER = {"version": 0, "id": "crash", "createdAt": 0}


def law_crash_prefix_repairs(prefix: Any, *, implementation: Implementation = KERNEL) -> None:
    """P30: `R = P + closers(P)` passes restore admission and `check_invariants`, ends with a
    closed turn (or has none), and its history satisfies the P21 pairing condition."""
    law = "P30 every crash prefix repairs to a valid log"
    events = as_events(prefix)
    repaired = (*events, *implementation.closers(events))
    shown = [event_to_json(e) for e in repaired]
    try:
        SessionLog.restore(repaired)
    except Exception as exc:
        violated(
            law,
            f"restore admission rejected the repaired log: {exc!r}",
            log=shown,
            seq=getattr(exc, "seq", None),
        )
    found = implementation.check_invariants(repaired)
    check(
        not found,
        law,
        f"the repaired log breaks invariants: {list(found)}",
        log=shown,
        seq=found[0].seq if found else None,
    )
    if scan_for_closers(shown).open_turn is not None:
        starts = [e["seq"] for e in shown if e["type"] == "turn/start"]
        violated(
            law,
            "the repaired log still has an open turn (its turn/start is marked)",
            log=shown,
            seq=starts[-1] if starts else None,
        )
    problem = tool_pairing_problem(implementation.derive_messages(repaired))
    check(problem is None, law, f"repaired history: {problem}", log=shown)


def law_repair_idempotent(prefix: Any, *, implementation: Implementation = KERNEL) -> None:
    """P31: `closers(R) == ()`."""
    law = "P31 idempotence"
    events = as_events(prefix)
    repaired = (*events, *implementation.closers(events))
    again = implementation.closers(repaired)
    check(
        again == (),
        law,
        f"closers of the repaired log: {[event_to_json(e) for e in again]}",
        log=[event_to_json(e) for e in repaired],
    )


def law_repair_cycle_writes_once(prefix: Any) -> None:
    """P31 (storage): load a stored crash prefix, commit its closers, load again: the second
    load finds nothing to repair and returns the same events."""
    law = "P31 the load/commit/load cycle writes once"
    events = as_events(prefix)
    data = write_jsonl(_HEADER, events)
    first = load_jsonl(data, now=0)
    committed = data[: first.committed_bytes] + encode_records(first.closers)
    second = load_jsonl(committed, now=0)
    check(
        second.closers == () and not second.torn,
        law,
        "the second load still wants to repair",
        log=[event_to_json(e) for e in second.events],
        closers=[event_to_json(e) for e in second.closers],
    )
    check(
        [event_to_json(e) for e in second.events] == [event_to_json(e) for e in first.events],
        law,
        "the second load returns different events",
        log=as_wire(prefix),
    )
    third = load_jsonl(committed + encode_records(second.closers), now=0)
    check(third.events == second.events, law, "a third cycle changed the events")


def law_repair_append_only(prefix: Any, *, implementation: Implementation = KERNEL) -> None:
    """P32: `R[:len(P)] == P`; closer seqs continue P contiguously; each closer's time is
    `P[-1].time`."""
    law = "P32 append-only"
    events = as_events(prefix)
    closers = implementation.closers(events)
    wire = as_wire(prefix)
    for i, closer in enumerate(closers):
        check(closer.seq == len(events) + i, law, f"closer {i} has seq {closer.seq}", log=wire)
        check(closer.time == events[-1].time, law, f"closer {i} has time {closer.time}", log=wire)
    loaded = load_jsonl(write_jsonl(_HEADER, events), now=0)
    check(
        [event_to_json(e) for e in loaded.events[: len(events)]]
        == [event_to_json(e) for e in events],
        law,
        "the loaded repaired log does not start with the stored prefix",
        log=wire,
    )
    check(
        [event_to_json(e) for e in loaded.closers] == [event_to_json(e) for e in closers],
        law,
        "the closers load_jsonl appended differ from the implementation's closers",
        log=wire,
        loaded_closers=[event_to_json(e) for e in loaded.closers],
        closers=[event_to_json(e) for e in closers],
    )


def law_closer_emptiness(prefix: Any, *, implementation: Implementation = KERNEL) -> None:
    """P33: closers are empty iff P is empty or its last `turn/start` is followed by a `turn/end`;
    otherwise the last is `turn/end {turn, reason: interrupted}`, preceded by a `step/end` iff a
    step was open."""
    law = "P33 emptiness"
    events = as_events(prefix)
    wire = as_wire(prefix)
    closers = implementation.closers(events)
    scan = scan_for_closers(wire)
    if scan.open_turn is None:
        check(closers == (), law, "closers for a log with no open turn", log=wire)
        return
    check(bool(closers), law, "no closers for a log with an open turn", log=wire)
    last = event_to_json(closers[-1])
    check(
        last["type"] == "turn/end"
        and last["data"] == {"turn": scan.open_turn, "reason": {"kind": "interrupted"}},
        law,
        "the last closer is not turn/end {turn, interrupted}",
        log=wire,
        last=last,
    )
    step_ends = [e for e in closers if e.type == "step/end"]
    if scan.open_step is None:
        check(not step_ends, law, "a step/end closer although no step was open", log=wire)
    else:
        check(
            len(step_ends) == 1
            and closers[-2].type == "step/end"
            and event_to_json(closers[-2])["data"]
            == {"turn": scan.open_turn, "step": scan.open_step},
            law,
            "the open step is not closed just before the turn/end",
            log=wire,
        )


def law_synthetic_results(prefix: Any, *, implementation: Implementation = KERNEL) -> None:
    """P34: one error result per unanswered call of the open step, in request order;
    `TOOL_OUTCOME_UNKNOWN` citing exactly the `tool/call` record when started, else
    `TOOL_NOT_STARTED` citing nothing; ids `interrupted-tool-result-<callId>-<seq>`."""
    law = "P34 synthetic results"
    events = as_events(prefix)
    wire = as_wire(prefix)
    closers = implementation.closers(events)
    results = [e for e in closers if e.type == "tool/result"]
    scan = scan_for_closers(wire)
    pending = list(scan.pending.items()) if scan.open_turn is not None else []
    check(
        len(results) == len(pending),
        law,
        f"{len(results)} synthetic results for {len(pending)} unanswered calls",
        log=wire,
    )
    for result, (call_id, (step, call_seq)) in zip(results, pending, strict=False):
        r = event_to_json(result)
        message = r["data"]["message"]
        block = message["content"][0]
        started = call_seq is not None
        code = TOOL_OUTCOME_UNKNOWN if started else TOOL_NOT_STARTED
        text = TOOL_OUTCOME_UNKNOWN_TEXT if started else TOOL_NOT_STARTED_TEXT
        expect_ok = (
            message["source"] == {"kind": "tool", "callId": call_id}
            and block["toolCallId"] == call_id
            and block["isError"] is True
            and block["content"] == [{"type": "text", "text": text}]
            and r["data"]["error"]["code"] == code
            and r["data"]["turn"] == scan.open_turn
            and r["data"]["step"] == step
            and message["id"] == f"interrupted-tool-result-{call_id}-{r['seq']}"
            and result.surface_op is APPEND
            and (r.get("sourceEventSeqs") == [call_seq] if started else "sourceEventSeqs" not in r)
        )
        check(expect_ok, law, f"synthetic result for {call_id!r} is wrong", log=wire, result=r)


def law_closers_deterministic(prefix: Any, *, implementation: Implementation = KERNEL) -> None:
    """P35: equal inputs give equal closers (no clock, no hidden state)."""
    law = "P35 determinism"
    events = as_events(prefix)
    rebuilt = tuple(event_from_json(event_to_json(e)) for e in events)
    a, b, c = (
        implementation.closers(events),
        implementation.closers(rebuilt),
        implementation.closers(list(events)),
    )
    text = [[event_to_json(e) for e in x] for x in (a, b, c)]
    check(
        text[0] == text[1] == text[2],
        law,
        "closers differ between equal inputs",
        log=as_wire(prefix),
        of_the_events=text[0],
        of_rebuilt_events=text[1],
        of_a_list=text[2],
    )
