"""The surface fold and derived history: docs/format/folds.md §1.9 examples A-H and §2.4."""

from __future__ import annotations

from typing import Any

import pytest

from kernel import (
    APPEND,
    Event,
    Replace,
    Replacement,
    SessionLog,
    derive_messages,
    fold_surface,
    project_message,
)
from kernel.errors import ProvenanceError, ReplaceRangeError, SeqMismatch, SurfaceMarkerError


def msg(i: int, text: str = "t") -> dict[str, Any]:
    return {
        "id": f"u{i}",
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }


def u(seq: int, op: Any = APPEND, sources: list[int] | None = None, text: str = "t") -> Event:
    return Event("user/message", seq, seq + 1, msg(seq, text), op, sources)


def assistant(seq: int, content: list[Any], op: Any = APPEND, **extra: Any) -> Event:
    data = {
        "turn": 1,
        "step": 1,
        "message": {
            "id": f"a{seq}",
            "role": "assistant",
            "content": content,
            "source": {"kind": "model", "provider": "p", "model": "m"},
        },
        **extra,
    }
    return Event("assistant/message", seq, seq, data, op)


def test_example_a_append_only() -> None:
    events = [
        Event("turn/start", 0, 0, {"turn": 1}),
        u(1),
        assistant(2, [{"type": "text", "text": "hi"}]),
        Event("turn/end", 3, 3, {"turn": 1, "reason": {"kind": "completed"}}),
    ]
    fold = fold_surface(events)
    assert fold.nodes == (1, 2) and fold.replacements == ()


def test_example_b_range_replace() -> None:
    fold = fold_surface([u(0), u(1), u(2), u(3, Replace(0, 1), [0, 1])])
    assert fold.nodes == (3, 2)
    assert fold.replacements == (Replacement(seq=3, start=0, end=1, shadowed_seqs=(0, 1)),)
    assert fold.replace_generation == 1


def test_example_c_middle_replace() -> None:
    assert fold_surface([u(0), u(1), u(2), u(3, Replace(1, 1), [1])]).nodes == (0, 3, 2)


def test_example_d_non_monotonic_endpoints() -> None:
    fold = fold_surface([u(0), u(1), u(2, Replace(0, 0), [0]), u(3, Replace(2, 1), [2, 1])])
    assert fold.nodes == (3,)
    assert fold.replacements == (
        Replacement(2, 0, 0, (0,)),
        Replacement(3, 2, 1, (2, 1)),
    )


def test_example_e_reversed_range() -> None:
    with pytest.raises(ReplaceRangeError):
        fold_surface([u(0), u(1), u(2, Replace(1, 0), [0, 1])])


def test_example_f_stale_endpoint() -> None:
    with pytest.raises(ReplaceRangeError, match="start seq 0 not found"):
        fold_surface([u(0), u(1), u(2), u(3, Replace(0, 1), [0, 1]), u(4, Replace(0, 3), [0, 3])])


def test_example_g_incomplete_coverage() -> None:
    with pytest.raises(ProvenanceError, match=r"missing \[1\]"):
        fold_surface([u(0), u(1), u(2, Replace(0, 1), [0])])


def test_example_h_tool_result_content_rewrite() -> None:
    def result(seq: int, text: str, op: Any, sources: list[int]) -> Event:
        block = {
            "type": "tool-result",
            "toolCallId": "c1",
            "content": [{"type": "text", "text": text}],
            "isError": False,
        }
        message = {
            "id": "r1",
            "role": "user",
            "content": [block],
            "source": {"kind": "tool", "callId": "c1"},
        }
        return Event(
            "tool/result", seq, seq, {"turn": 1, "step": 1, "message": message}, op, sources
        )

    events = [Event("x/y", i, i, None) for i in range(5)]
    events += [result(5, "<40 KB of output>", APPEND, [4])]
    events += [Event("x/y", i, i, None) for i in range(6, 9)]
    events += [result(9, "[output pruned]", Replace(5, 5), [5])]
    fold = fold_surface(events)
    assert fold.nodes == (9,)
    assert derive_messages(events)[0]["content"][0]["content"][0]["text"] == "[output pruned]"


def test_fold_requires_contiguous_seqs() -> None:
    with pytest.raises(SeqMismatch):
        fold_surface([u(0), u(2)])


@pytest.mark.parametrize(
    ("events", "index"),
    [([u(0), u(1), u(3)], 2), ([u(0), Event("x/y", 2, 0, None), u(2)], 1), ([u(1)], 0)],
    ids=["surface event", "other event", "first event"],
)
def test_fold_r4_a_gap_anywhere_is_named_at_its_index(events: list[Event], index: int) -> None:
    with pytest.raises(SeqMismatch) as caught:
        fold_surface(events)
    assert caught.value.index == index


def test_fold_r4_a_surface_error_before_a_gap_is_the_one_raised() -> None:
    marked = Event("turn/start", 1, 0, {"turn": 1}, APPEND)  # R5: not surface-eligible
    with pytest.raises(SurfaceMarkerError):
        fold_surface([u(0), marked, u(7)])
    with pytest.raises(SeqMismatch):
        fold_surface([u(0), u(7), marked])


def test_fold_rejects_surface_metadata_on_other_types() -> None:
    with pytest.raises(SurfaceMarkerError):
        fold_surface([Event("turn/start", 0, 0, {"turn": 1}, APPEND)])


def test_windowed_fold_starts_from_an_empty_surface() -> None:
    events = [u(0), u(1), u(2), u(3, Replace(1, 2), [1, 2])]
    assert fold_surface(events[1:], base=1).nodes == (3,)
    with pytest.raises(ReplaceRangeError):
        fold_surface([u(0), u(1), u(2, Replace(0, 1), [0, 1])][1:], base=1)


# -- §2.4 derived history ---------------------------------------------------------------------


def test_empty_assistant_occupies_a_node_but_yields_no_message() -> None:
    events = [
        Event("turn/start", 0, 0, {"turn": 1}),
        Event("step/start", 1, 1, {"turn": 1, "step": 1}),
        assistant(2, [], usage={"inputTokens": 3, "outputTokens": 0}),
        Event("step/end", 3, 3, {"turn": 1, "step": 1}),
        Event("turn/end", 4, 4, {"turn": 1, "reason": {"kind": "completed"}}),
    ]
    assert fold_surface(events).nodes == (2,)
    assert derive_messages(events) == ()


def test_replaced_range_shows_the_replacement() -> None:
    events = [
        u(0, text="original"),
        assistant(1, [{"type": "text", "text": "compacted"}], Replace(0, 0)),
    ]
    events[1] = Event("assistant/message", 1, 1, events[1].data, Replace(0, 0), (0,))
    (only,) = derive_messages(events)
    assert only["content"][0]["text"] == "compacted"


def test_noise_never_projects() -> None:
    events = [
        Event("turn/start", 0, 0, {"turn": 1}),
        Event("assistant/chunk", 1, 1, {"turn": 1, "step": 1, "chunk": {"type": "x"}}),
        Event("assistant/chunk", 2, 2, {"turn": 1, "step": 1, "chunk": {"type": "x"}}),
        u(3),
        assistant(4, [{"type": "text", "text": "a"}]),
        Event("turn/end", 5, 5, {"turn": 1, "reason": {"kind": "completed"}}),
    ]
    assert len(derive_messages(events)) == 2


def test_derived_message_is_the_object_inside_the_event() -> None:
    event = assistant(0, [{"type": "text", "text": "a"}])
    assert project_message(event) is event.data["message"]
    assert derive_messages([event])[0] is event.data["message"]


def test_derived_messages_cannot_be_mutated() -> None:
    log = SessionLog.empty().append("user/message", msg(0), time=0, surface_op=APPEND)
    message = log.messages[0]
    with pytest.raises(TypeError):
        message["id"] = "changed"  # type: ignore[index]
    with pytest.raises((TypeError, AttributeError)):
        message["content"].append(1)  # type: ignore[attr-defined]
    assert log.events[0].data["id"] == "u0"


def test_incremental_messages_are_fresh_values_that_never_grow() -> None:
    log = SessionLog.empty().append("user/message", msg(0), time=0, surface_op=APPEND)
    handed_out = log.messages
    longer = log.append("user/message", msg(1), time=1, surface_op=APPEND)
    assert len(handed_out) == 1 and len(longer.messages) == 2
    compacted = longer.append(
        "user/message", msg(2), time=2, surface_op=Replace(0, 1), source_event_seqs=[0, 1]
    )
    assert [m["id"] for m in compacted.messages] == ["u2"]
    assert tuple(compacted.messages) == derive_messages(compacted.events)
