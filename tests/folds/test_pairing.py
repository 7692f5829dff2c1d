"""Tool-pairing balance over the surface (docs/format/folds.md §5)."""

from __future__ import annotations

import itertools
from typing import Any

import attrs
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from kernel.errors import MessageShapeError, ReplaceRangeError, ToolPairingError
from kernel.folds.pairing import Cut, balanced_cuts, is_safe_compaction_range, tool_pairing_cuts
from kernel.folds.surface import fold_surface
from kernel.values.events import APPEND, Event, Replace
from properties import strategies as gen
from properties.laws import as_events


class Log:
    """Builds a log with contiguous seqs; each helper returns the seq it used."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(self, kind: str, data: Any, op: Any = None, sources: Any = None) -> int:
        seq = len(self.events)
        self.events.append(Event(kind, seq, seq * 10, data, op, sources))
        return seq

    def user(self, text: str = "hi", op: Any = APPEND, sources: Any = None) -> int:
        msg = {
            "id": f"u{len(self.events)}",
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "user"},
        }
        return self.add("user/message", msg, op, sources)

    def assistant(self, *calls: str, text: str = "ok") -> int:
        content: list[Any] = [{"type": "text", "text": text}]
        content += [{"type": "tool-call", "id": c, "name": "ls", "arguments": "{}"} for c in calls]
        msg = {
            "id": f"a{len(self.events)}",
            "role": "assistant",
            "content": content,
            "source": {"kind": "model", "provider": "p", "model": "m"},
        }
        return self.add("assistant/message", {"turn": 1, "step": 1, "message": msg}, APPEND)

    def result(self, call: str, text: str = "out", op: Any = APPEND, sources: Any = None) -> int:
        block = {
            "type": "tool-result",
            "toolCallId": call,
            "content": [{"type": "text", "text": text}],
        }
        msg = {
            "id": f"r-{call}",
            "role": "user",
            "content": [block],
            "source": {"kind": "tool", "callId": call},
        }
        return self.add("tool/result", {"turn": 1, "step": 1, "message": msg}, op, sources)

    def noise(self) -> int:
        return self.add("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "usage"}})


def cut_flags(events: list[Event]) -> list[bool]:
    cuts = tool_pairing_cuts(events)
    return [True] + [c.after for c in cuts] if cuts else [True]


# -- §5.3 examples -----------------------------------------------------------------------------


def test_pairing_5_3_example_user_call_result() -> None:
    log = Log()
    log.user()
    log.assistant("c1")
    log.result("c1")
    assert tool_pairing_cuts(log.events) == (
        Cut(0, before=True, after=True),
        Cut(1, before=True, after=False),
        Cut(2, before=False, after=True),
    )
    assert balanced_cuts(log.events, fold_surface(log.events).nodes) == (True, True, False, True)


def test_pairing_5_3_two_calls_two_results() -> None:
    log = Log()
    log.assistant("c1", "c2")
    log.result("c1")
    log.result("c2")
    assert [c.after for c in tool_pairing_cuts(log.events)] == [False, False, True]


# -- §5.1 definition and notes -----------------------------------------------------------------


def test_pairing_5_1_empty_surface_has_no_cuts() -> None:
    assert tool_pairing_cuts([]) == ()
    log = Log()
    log.noise()
    assert tool_pairing_cuts(log.events) == ()
    assert balanced_cuts(log.events, ()) == (True,)


def test_pairing_5_1_result_without_a_call_raises() -> None:
    log = Log()
    log.user()
    log.result("ghost")
    with pytest.raises(ToolPairingError) as caught:
        tool_pairing_cuts(log.events)
    assert caught.value.seq == 1


def test_pairing_5_1_counts_by_number_not_by_id() -> None:
    log = Log()
    log.assistant("c1")
    log.result("someone-else")
    assert [c.after for c in tool_pairing_cuts(log.events)] == [False, True]


def test_pairing_5_1_notice_inside_an_open_call_is_unbalanced_on_both_sides() -> None:
    log = Log()
    log.assistant("c1")
    notice = log.user("background notice")
    log.result("c1")
    cut = tool_pairing_cuts(log.events)[1]
    assert cut == Cut(notice, before=False, after=False)


def test_pairing_5_1_crash_prefix_stays_unbalanced_to_the_end() -> None:
    log = Log()
    log.user()
    log.assistant("c1", "c2")
    log.noise()
    log.user("injected")
    log.result("c1")
    assert [c.after for c in tool_pairing_cuts(log.events)] == [True, False, False, False]


def test_pairing_5_1_summary_replacement_counts_zero() -> None:
    log = Log()
    log.user()
    log.assistant("c1")
    log.result("c1")
    log.user("after")
    summary = log.user("summary", Replace(0, 2), [0, 1, 2])
    assert fold_surface(log.events).nodes == (summary, 3)
    assert tool_pairing_cuts(log.events) == (Cut(summary, True, True), Cut(3, True, True))


def test_pairing_5_1_summary_that_shadows_a_call_removes_it_from_the_count() -> None:
    log = Log()
    log.assistant("c1")
    summary = log.user("summary", Replace(0, 0), [0])
    log.user()
    assert [c.after for c in tool_pairing_cuts(log.events)] == [True, True]
    assert tool_pairing_cuts(log.events)[0].seq == summary


def test_pairing_5_1_tool_result_rewrite_still_counts_minus_one() -> None:
    log = Log()
    log.assistant("c1")
    log.result("c1", "<40 KB>")
    pruned = log.result("c1", "[output pruned]", Replace(1, 1), [1])
    assert tool_pairing_cuts(log.events) == (Cut(0, True, False), Cut(pruned, False, True))


def test_pairing_5_1_surface_errors_propagate() -> None:
    log = Log()
    log.user()
    log.user("bad", Replace(1, 0), [0])
    with pytest.raises(ReplaceRangeError):
        tool_pairing_cuts(log.events)


def test_pairing_5_1_node_without_matching_event_raises() -> None:
    log = Log()
    log.user()
    with pytest.raises(ToolPairingError):
        balanced_cuts(log.events, (0, 1))
    with pytest.raises(ToolPairingError):
        balanced_cuts(log.events, (-1,))
    shifted = [Event("user/message", 5, 0, log.events[0].data, APPEND)]
    with pytest.raises(ToolPairingError):
        balanced_cuts(shifted, (0,))


def test_pairing_5_1_assistant_without_content_array_is_a_message_shape_error() -> None:
    log = Log()
    log.add("assistant/message", {"turn": 1, "step": 1, "message": {"content": "x"}}, APPEND)
    with pytest.raises(MessageShapeError) as caught:
        tool_pairing_cuts(log.events)
    assert caught.value.seq == 0


@pytest.mark.parametrize("message", ["x", None, ["content"]])
def test_pairing_5_1_assistant_without_message_object_is_a_message_shape_error(
    message: Any,
) -> None:
    log = Log()
    log.add("assistant/message", {"turn": 1, "step": 1, "message": message}, APPEND)
    with pytest.raises(MessageShapeError) as caught:
        tool_pairing_cuts(log.events)
    assert caught.value.seq == 0


def test_pairing_5_1_a_block_that_is_not_an_object_counts_no_call() -> None:
    log = Log()
    log.user()
    call = {"type": "tool-call", "id": "c1", "name": "ls", "arguments": "{}"}
    content = ["x", {"type": "text", "text": "ok"}, call]
    message = {"id": "a", "role": "assistant", "content": content, "source": {"kind": "user"}}
    log.add("assistant/message", {"turn": 1, "step": 1, "message": message}, APPEND)
    log.result("c1")
    assert cut_flags(log.events) == [True, True, False, True]


def test_pairing_5_1_a_loaded_log_has_the_cuts_of_its_events() -> None:
    from kernel.storage.jsonl import load_jsonl, write_jsonl

    log = Log()
    log.user()
    log.assistant("c1", "c2")
    log.result("c1")
    log.result("c2")
    log.assistant()
    stored = write_jsonl({"version": 0, "id": "s", "createdAt": 1}, log.events)
    loaded = load_jsonl(stored, now=0).events
    assert tool_pairing_cuts(loaded) == tool_pairing_cuts(log.events)
    assert cut_flags(log.events) == [True, True, False, False, True, True]


def test_pairing_5_1_cuts_are_the_records_their_constructor_builds() -> None:
    # The cuts are built field by field, which equals the constructor only while it does
    # nothing else: no validator, converter or post-init.
    assert all(f.validator is None and f.converter is None for f in attrs.fields(Cut))
    assert not hasattr(Cut, "__attrs_post_init__")
    log = Log()
    log.user()
    log.assistant("c1")
    log.result("c1")
    cuts = tool_pairing_cuts(log.events)
    expected = (Cut(0, True, True), Cut(1, True, False), Cut(2, False, True))
    assert cuts == expected
    assert [(repr(c), hash(c)) for c in cuts] == [(repr(c), hash(c)) for c in expected]
    assert all(type(c) is Cut for c in cuts)


def test_pairing_5_1_takes_any_iterable() -> None:
    log = Log()
    log.user()
    log.assistant("c1")
    assert tool_pairing_cuts(iter(log.events)) == tool_pairing_cuts(log.events)


def test_pairing_5_1_compaction_range_safety() -> None:
    log = Log()
    log.user()  # 0
    log.assistant("c1")  # 1
    log.result("c1")  # 2
    log.user()  # 3
    assert is_safe_compaction_range(log.events, 0, 2)
    assert is_safe_compaction_range(log.events, 1, 3)
    assert is_safe_compaction_range(log.events, 3, 3)
    assert not is_safe_compaction_range(log.events, 0, 1)  # splits c1 from its result
    assert not is_safe_compaction_range(log.events, 2, 3)
    assert not is_safe_compaction_range(log.events, 3, 0)  # start after end: not a range


def test_pairing_5_1_compaction_range_endpoints_must_be_on_the_surface() -> None:
    log = Log()
    log.user()
    log.user()
    log.user("summary", Replace(0, 0), [0])
    with pytest.raises(ToolPairingError):
        is_safe_compaction_range(log.events, 0, 1)  # 0 is shadowed
    with pytest.raises(ToolPairingError):
        is_safe_compaction_range(log.events, 1, 9)  # 9 never was
    with pytest.raises(ToolPairingError):
        is_safe_compaction_range([], 0, 0)


# -- properties --------------------------------------------------------------------------------


@st.composite
def chat_logs(draw: st.DrawFn) -> list[Event]:
    """Assistant messages with calls, answered in any order, with notices and noise mixed in."""
    log = Log()
    ids = iter(f"c{i}" for i in range(1000))
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.booleans()):
            log.user()
        calls = [next(ids) for _ in range(draw(st.integers(0, 3)))]
        log.assistant(*calls)
        for call in draw(st.permutations(calls)):
            if draw(st.integers(0, 3)) == 0:
                log.user("notice")
            log.noise()
            log.result(call)
    return log.events


def _reference_cuts(events: list[Event]) -> list[bool]:
    """Cuts by call id (the logs above answer each call exactly once)."""
    open_ids: set[str] = set()
    cuts = [True]
    for seq in fold_surface(events).nodes:
        event = events[seq]
        if event.type == "assistant/message":
            content = event.data["message"]["content"]
            open_ids |= {b["id"] for b in content if b["type"] == "tool-call"}
        elif event.type == "tool/result":
            open_ids.discard(event.data["message"]["source"]["callId"])
        cuts.append(not open_ids)
    return cuts


@given(chat_logs())
def test_pairing_every_crash_prefix_agrees_with_an_id_based_count(events: list[Event]) -> None:
    note("log:\n" + "\n".join(repr(e) for e in events))
    for k in range(len(events) + 1):
        prefix = events[:k]
        cuts = tool_pairing_cuts(prefix)
        assert [c.seq for c in cuts] == list(fold_surface(prefix).nodes)
        assert cut_flags(prefix) == _reference_cuts(prefix), f"cuts of the prefix of {k} events"
        for before, after in itertools.pairwise(cuts):
            assert before.after == after.before, "adjacent nodes disagree on their shared cut"
    if events:
        assert tool_pairing_cuts(events)[-1].after, "a fully answered log must end balanced"


@given(chat_logs(), st.data())
def test_pairing_safe_compaction_keeps_the_log_pairable(events: list[Event], data: Any) -> None:
    nodes = fold_surface(events).nodes
    if not nodes:
        return
    i = data.draw(st.integers(0, len(nodes) - 1))
    j = data.draw(st.integers(i, len(nodes) - 1))
    safe = is_safe_compaction_range(events, nodes[i], nodes[j])
    cuts = tool_pairing_cuts(events)
    assert safe == (cuts[i].before and cuts[j].after)
    compacted = Log()
    compacted.events = list(events)
    compacted.user("summary", Replace(nodes[i], nodes[j]), list(nodes[i : j + 1]))
    if safe:
        after = tool_pairing_cuts(compacted.events)
        assert after[-1].after, "a safe compaction left a call unanswered"


# -- counting calls on a stored line ------------------------------------------------------------


@given(gen.loop_logs(rich=True, max_actions=5, shape="any"), st.booleans())
def test_a_stored_message_counts_its_calls_as_its_built_payload_does(log: Any, pack: bool) -> None:
    from kernel.folds.pairing import _call_count
    from kernel.storage.jsonl import load_jsonl, write_jsonl
    from kernel.storage.typed.lines import _StoredLine
    from kernel.values.json import thaw

    header = {"version": 0, "id": "s", "createdAt": 1}
    stored = write_jsonl(header, as_events(log), pack_chunks=pack)
    for event in load_jsonl(stored, now=0).events:
        if event.type == "assistant/message":
            # A line the typed path declined (a lone surrogate, say) is loaded built.
            source = event.data._value
            counted = _call_count(event)
            content = thaw(event.data)["message"]["content"]
            expected = sum(1 for b in content if b.get("type") == "tool-call")
            assert counted == expected
            if type(source) is _StoredLine:
                assert source.count_blocks("tool-call") == expected


@pytest.mark.parametrize(
    "content",
    [
        b'[{"type":"text","type":"tool-call"},{"type":"tool-call"}]',  # the last member wins
        b'[{"type":"tool\\u002dcall"},{"text":"tool-call"},{"type":"tool-calls"}]',
        b"[]",
    ],
)
def test_a_stored_line_counts_calls_as_the_exact_reader_reads_them(content: bytes) -> None:
    from kernel.storage.typed.lines import _StoredLine
    from kernel.wire.jsontext import parse_json

    line = b'{"type":"assistant/message","data":{"message":{"content":' + content + b"}}}"
    blocks = parse_json(line)["data"]["message"]["content"]
    expected = sum(1 for b in blocks if b.get("type") == "tool-call")
    assert _StoredLine(line).count_blocks("tool-call") == expected
