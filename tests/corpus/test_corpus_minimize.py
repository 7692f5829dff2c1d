"""Minimal counterexamples: shortest failing prefix, then ddmin, to a 1-minimal log.

One seeded failure per invariant rule a loaded log can break (`seq-order`
cannot be: admission R4 keeps seqs contiguous), each in an otherwise clean
log of three turns. The shrunk log must still fail with the same check and
rule id, hold only a handful of events, and be 1-minimal: removing any one
more event makes it pass or fail differently.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cli import Builder, header, run, run_main, unanswered_at_end_log

from kernel.corpus import failure_keys, minimize_events, minimize_log
from kernel.corpus.check import check_bytes
from kernel.corpus.minimize import ddmin, renumbered, shortest_failing_prefix, still_fails
from kernel.folds.invariants import RULES
from kernel.storage.jsonl import load_jsonl, write_jsonl
from kernel.values.events import APPEND, Event

NOW = 1_770_000_000_000
HANDFUL = 6


def clean_events() -> list[Event]:
    """Three turns: a tool call in turn 1 step 1, two calls in turn 2, chunks in each step."""
    b = Builder()
    b.turn(1, [["c1"], []], chunks=2)
    b.turn(2, [["c2", "c3"]], chunks=1)
    b.turn(3, [[]])
    return b.events


def index_of(events: list[Event], type_: str, **data: Any) -> int:
    return next(
        i
        for i, e in enumerate(events)
        if e.type == type_ and all(e.data.get(k) == v for k, v in data.items())
    )


def edit(events: list[Event], at: int, **changes: Any) -> list[Event]:
    out = list(events)
    data = {**msgspec.structs.asdict(out[at])["data"], **changes}
    out[at] = msgspec.structs.replace(out[at], data=data)
    return out


def delete(events: list[Event], at: int) -> list[Event]:
    shrunk = renumbered(events, [i for i in range(len(events)) if i != at])
    assert shrunk is not None
    return list(shrunk)


def insert(events: list[Event], at: int, new: Event) -> list[Event]:
    """`new` placed before index `at`; later seqs and citations shift by one."""
    placed = [*events[:at], msgspec.structs.replace(new, seq=at), *events[at:]]
    out: list[Event] = []
    for n, event in enumerate(placed):
        cited = event.source_event_seqs
        if cited is not None and n > at:
            cited = tuple(s + 1 if s >= at else s for s in cited)
        out.append(msgspec.structs.replace(event, seq=n, source_event_seqs=cited))
    return out


def result_for(events: list[Event], call_id: str, turn: int, step: int) -> Event:
    """A tool/result answering `call_id` (citing its call) in turn `turn`, step `step`."""
    call = index_of(events, "tool/call", callId=call_id)
    block = {"type": "tool-result", "toolCallId": call_id, "content": [], "isError": False}
    message = {
        "id": f"late-{call_id}",
        "role": "user",
        "content": [block],
        "source": {"kind": "tool", "callId": call_id},
    }
    return Event(
        "tool/result",
        0,
        events[call].time,
        {"turn": turn, "step": step, "message": message},
        surface_op=APPEND,
        source_event_seqs=(events[call].seq,),
    )


def _todo() -> Event:
    return Event("todo/write", 0, 1, {"todos": [{"content": "x", "status": "pending"}]})


SEEDS: dict[str, Callable[[list[Event]], list[Event]]] = {
    "turn-start-while-open": lambda e: insert(
        e, index_of(e, "step/start", turn=1, step=2), Event("turn/start", 0, 1, {"turn": 2})
    ),
    "turn-number": lambda e: edit(e, index_of(e, "turn/start", turn=2), turn=3),
    "turn-end-mismatch": lambda e: edit(e, index_of(e, "turn/end", turn=1), turn=4),
    "turn-end-open-step": lambda e: delete(e, index_of(e, "step/end", turn=2, step=1)),
    "step-start-turn": lambda e: edit(e, index_of(e, "step/start", turn=1, step=2), turn=9),
    "step-start-while-open": lambda e: delete(e, index_of(e, "step/end", turn=1, step=1)),
    "step-number": lambda e: edit(e, index_of(e, "step/start", turn=1, step=2), step=3),
    "step-end-mismatch": lambda e: edit(e, index_of(e, "step/end", turn=1, step=1), step=5),
    "outside-step": lambda e: edit(e, index_of(e, "assistant/chunk", turn=2), step=7),
    "result-without-call": lambda e: insert(
        e, index_of(e, "step/end", turn=1, step=2), result_for(e, "c1", 1, 2)
    ),
    "outside-turn": lambda e: insert(e, index_of(e, "turn/start", turn=2), _todo()),
}


def test_every_rule_a_loaded_log_can_break_is_seeded() -> None:
    assert set(SEEDS) == set(RULES) - {"seq-order"}


def failing_key(events: list[Event]) -> tuple[str, str]:
    result = check_bytes(write_jsonl(header("seeded"), events), path="x", kind="jsonl", now=NOW)
    assert result.status == "invalid", result
    return failure_keys(result.detail)[0]


@pytest.mark.parametrize("rule", sorted(SEEDS))
def test_minimize_shrinks_a_seeded_failure_to_a_handful_of_events_1_minimal(rule: str) -> None:
    events = SEEDS[rule](clean_events())
    key = failing_key(events)
    assert key == ("invariants", rule)
    head = header("seeded")

    shrunk = minimize_events(head, events, key, now=NOW)

    assert shrunk.key == key and shrunk.before == len(events)
    assert shrunk.after == len(shrunk.events) <= HANDFUL, [e.type for e in shrunk.events]
    assert still_fails(head, shrunk.events, key, NOW)
    assert [e.seq for e in shrunk.events] == list(range(shrunk.after))
    for gone in range(shrunk.after):  # 1-minimal
        fewer = renumbered(shrunk.events, [i for i in range(shrunk.after) if i != gone])
        assert fewer is None or not still_fails(head, fewer, key, NOW), (rule, gone)
    again = check_bytes(shrunk.data, path="min", kind="jsonl", now=NOW)
    assert key in failure_keys(again.detail)


def test_minimize_log_reads_the_file_and_refuses_a_log_that_passes(tmp_path: Path) -> None:
    clean = tmp_path / "clean.jsonl"
    clean.write_bytes(write_jsonl(header("clean"), clean_events()))
    assert minimize_log(str(clean), "jsonl", now=NOW) is None
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(write_jsonl(header("bad"), SEEDS["step-number"](clean_events())))
    shrunk = minimize_log(str(bad), "jsonl", now=NOW)
    assert shrunk is not None and shrunk.key == ("invariants", "step-number")
    assert shrunk.after <= HANDFUL


def test_ddmin_finds_a_1_minimal_subset_of_a_known_predicate() -> None:
    def fails(keep: Any) -> bool:
        kept = set(keep)
        return {3, 11, 12} <= kept or {5, 40} <= kept

    found = ddmin(range(50), fails)
    assert fails(found)
    assert all(not fails([x for x in found if x != y]) for y in found)
    assert len(found) == 2 or set(found) == {3, 11, 12}


@pytest.mark.slow
@given(
    st.integers(1, 60).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(st.frozensets(st.integers(0, n - 1), min_size=1, max_size=4), min_size=1),
        )
    )
)
@settings(max_examples=150, deadline=None)
def test_ddmin_result_fails_and_is_1_minimal_for_any_monotone_failure(
    case: tuple[int, list[frozenset[int]]],
) -> None:
    n, causes = case

    def fails(keep: Any) -> bool:
        kept = set(keep)
        return any(cause <= kept for cause in causes)

    found = ddmin(range(n), fails)
    assert fails(found), f"ddmin returned {found}, which passes"
    for y in found:
        fewer = [x for x in found if x != y]
        assert not fails(fewer), f"{found} is not 1-minimal: {fewer} still fails"
    assert list(found) == sorted(found)


def test_shortest_failing_prefix_is_exact_for_a_monotone_failure() -> None:
    assert shortest_failing_prefix(100, lambda keep: len(keep) >= 37) == 37
    assert shortest_failing_prefix(100, lambda keep: len(keep) >= 1) == 1
    assert shortest_failing_prefix(100, lambda keep: len(keep) >= 37, known=60) == 37


def test_renumbered_remaps_citations_and_drops_cited_events_that_went() -> None:
    events = clean_events()
    call = index_of(events, "tool/call", callId="c1")
    result = index_of(events, "tool/result")
    keep = [i for i in range(len(events)) if i != 0]
    shrunk = renumbered(events, keep)
    assert shrunk is not None
    assert shrunk[result - 1].source_event_seqs == (call - 1,)
    without_call = renumbered(events, [i for i in range(len(events)) if i != call])
    assert without_call is not None and without_call[result - 1].source_event_seqs == ()


@pytest.mark.slow
def test_verify_minimize_writes_one_jsonl_per_failing_log_beside_the_report(
    tmp_path: Path,
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    for rule in ("step-number", "outside-turn"):
        (logs / f"{rule}.jsonl").write_bytes(write_jsonl(header(rule), SEEDS[rule](clean_events())))
    (logs / "clean.jsonl").write_bytes(write_jsonl(header("clean"), clean_events()))
    (logs / "corrupt.jsonl").write_bytes(write_jsonl(header("c"), clean_events())[:-40] + b"x\n")
    before = {p.name: p.read_bytes() for p in logs.iterdir()}
    report = tmp_path / "out.parquet"

    proc = run("verify", "--json", "--minimize", "--report", report, logs)

    assert proc.returncode == 1
    document = json.loads(proc.stdout)
    minimized = {Path(m["path"]).name: m for m in document["minimized"]}
    assert set(minimized) == {"step-number.jsonl", "outside-turn.jsonl"}  # corrupt: nothing loads
    for name, entry in minimized.items():
        rule = name.removesuffix(".jsonl")
        assert entry["rule"] == rule and entry["check"] == "invariants"
        assert entry["eventsAfter"] <= HANDFUL < entry["eventsBefore"]
        written = Path(entry["file"])
        assert written.parent == tmp_path / "out.minimized"
        again = check_bytes(written.read_bytes(), path="m", kind="jsonl", now=NOW)
        assert ("invariants", rule) in failure_keys(again.detail)
    assert {p.name: p.read_bytes() for p in logs.iterdir()} == before
    table = run("verify", "--minimize", "--report", tmp_path / "t.csv", logs)
    assert "Minimal counterexamples" in table.stdout and "→" in table.stdout


def test_verify_strict_minimize_shrinks_an_unanswered_call_to_a_handful_of_events_1_minimal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b, _ = unanswered_at_end_log()
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "open-call.jsonl").write_bytes(write_jsonl(header("open-call"), b.events))
    key = ("pairing", "unanswered-call")

    code, out, _ = run_main(
        capsys, "verify", "--strict", "--json", "--minimize", "--report", tmp_path / "r.csv", logs
    )

    assert code == 1
    (entry,) = json.loads(out)["minimized"]
    assert (entry["check"], entry["rule"]) == key
    assert entry["eventsAfter"] <= HANDFUL < entry["eventsBefore"] == len(b.events)
    loaded = load_jsonl(Path(entry["file"]).read_bytes(), session_id=None, now=NOW)
    shrunk = loaded.events[: len(loaded.events) - len(loaded.closers)]
    head = header("open-call")
    assert still_fails(head, shrunk, key, NOW)
    for gone in range(len(shrunk)):  # 1-minimal
        fewer = renumbered(shrunk, [i for i in range(len(shrunk)) if i != gone])
        assert fewer is None or not still_fails(head, fewer, key, NOW), gone
