"""Admission rules R1-R13 on the append, seed and restore paths (docs/format/admission.md)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kernel import APPEND, Replace, SessionLog
from kernel.errors import (
    EventShapeError,
    InvalidEnvelope,
    KernelError,
    LegacyFormat,
    MessageShapeError,
    NotLosslessJson,
    ProvenanceError,
    ReplaceRangeError,
    RequestHeaderShapeError,
    SeqMismatch,
    SessionHeaderError,
    SurfaceMarkerError,
    ToolResultRewriteError,
    UnknownEventType,
)

U: dict[str, Any] = {"id": "u", "role": "user", "content": [], "source": {"kind": "user"}}
H: dict[str, Any] = {"config": {"provider": "p", "model": "m"}}


def user(seq: int, text: str = "x", **extra: Any) -> dict[str, Any]:
    data = {
        "id": f"u{seq}",
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }
    return {"type": "user/message", "seq": seq, "time": seq, "data": data, **extra}


def assistant_data(*calls: str, content: list[Any] | None = None) -> dict[str, Any]:
    blocks = (
        content
        if content is not None
        else [{"type": "tool-call", "id": c, "name": "ls", "arguments": "{}"} for c in calls]
    )
    return {
        "turn": 1,
        "step": 1,
        "message": {
            "id": "a",
            "role": "assistant",
            "content": blocks,
            "source": {"kind": "model", "provider": "p", "model": "m"},
        },
    }


def result_data(call_id: str = "c", text: str = "out", **extra: Any) -> dict[str, Any]:
    return {
        "turn": 1,
        "step": 1,
        "message": {
            "id": f"r-{call_id}",
            "role": "user",
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": call_id,
                    "content": [{"type": "text", "text": text}],
                    "isError": False,
                }
            ],
            "source": {"kind": "tool", "callId": call_id},
        },
        **extra,
    }


def header_event(seq: int = 0, **data: Any) -> dict[str, Any]:
    body = {"header": copy.deepcopy(H), "reason": "initial", **data}
    return {"type": "request/header", "seq": seq, "time": 1, "data": body}


def seed(*events: dict[str, Any]) -> SessionLog:
    return SessionLog.seed(list(events), now=100)


def seed_error(*events: dict[str, Any]) -> KernelError:
    with pytest.raises(KernelError) as info:
        seed(*events)
    return info.value


# -- docs/format/admission.md §9: the rejection table, one row each --------------------------------

REJECTIONS: list[tuple[str, dict[str, Any], type[KernelError] | None]] = [
    (
        "extra envelope key",
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}, "extra": True},
        InvalidEnvelope,
    ),
    ("missing data", {"type": "turn/start", "seq": 0, "time": 1}, InvalidEnvelope),
    (
        "ignorable false",
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}, "ignorable": False},
        InvalidEnvelope,
    ),
    (
        "ignorable unknown type",
        {"type": "x/y", "seq": 0, "time": 1, "data": None, "ignorable": True},
        None,
    ),
    ("unknown type on seed", {"type": "x/y", "seq": 0, "time": 1, "data": None}, UnknownEventType),
    ("empty type", {"type": "", "seq": 0, "time": 1, "data": None}, InvalidEnvelope),
    (
        "time beyond 2**53 is R1 before R2",
        {"type": "turn/start", "seq": 0, "time": 9007199254740992, "data": {"turn": 1}},
        NotLosslessJson,
    ),
    ("negative time", {"type": "turn/start", "seq": 0, "time": -5, "data": {"turn": 1}}, None),
    ("integral floats", {"type": "turn/start", "seq": 0.0, "time": 1.0, "data": {"turn": 1}}, None),
    (
        "chunk with null data",
        {"type": "assistant/chunk", "seq": 0, "time": 1, "data": None},
        EventShapeError,
    ),
    ("todo with null data", {"type": "todo/write", "seq": 0, "time": 1, "data": None}, None),
    ("mode/set", {"type": "mode/set", "seq": 0, "time": 1, "data": {}}, LegacyFormat),
    ("seq 1 first", {"type": "turn/start", "seq": 1, "time": 1, "data": {"turn": 1}}, SeqMismatch),
    (
        "surfaceOp on turn/start",
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}, "surfaceOp": "append"},
        SurfaceMarkerError,
    ),
    (
        "user without marker",
        {"type": "user/message", "seq": 0, "time": 1, "data": U},
        SurfaceMarkerError,
    ),
    (
        "invalid surfaceOp string",
        {"type": "user/message", "seq": 0, "time": 1, "data": U, "surfaceOp": "invalid"},
        SurfaceMarkerError,
    ),
    (
        "negative replace start",
        {
            "type": "user/message",
            "seq": 0,
            "time": 1,
            "data": U,
            "surfaceOp": {"op": "replace", "start": -1, "end": 0},
        },
        SurfaceMarkerError,
    ),
    (
        "empty citations on user",
        {
            "type": "user/message",
            "seq": 0,
            "time": 1,
            "data": U,
            "surfaceOp": "append",
            "sourceEventSeqs": [],
        },
        ProvenanceError,
    ),
    (
        "self citation",
        {
            "type": "user/message",
            "seq": 0,
            "time": 1,
            "data": U,
            "surfaceOp": "append",
            "sourceEventSeqs": [0],
        },
        ProvenanceError,
    ),
    (
        "empty citations on assistant",
        {
            "type": "assistant/message",
            "seq": 0,
            "time": 1,
            "data": assistant_data(content=[{"type": "text", "text": "hi"}]),
            "surfaceOp": "append",
            "sourceEventSeqs": [],
        },
        None,
    ),
    (
        "header-delta",
        {"type": "request/header-delta", "seq": 0, "time": 1, "data": {}},
        LegacyFormat,
    ),
    ("fallback reason", header_event(reason="fallback"), LegacyFormat),
    (
        "header without provider",
        {
            "type": "request/header",
            "seq": 0,
            "time": 1,
            "data": {"header": {"config": {"model": "m"}}, "reason": "initial"},
        },
        RequestHeaderShapeError,
    ),
    (
        "empty reasoningEffort",
        {
            "type": "request/header",
            "seq": 0,
            "time": 1,
            "data": {
                "header": {"config": {"provider": "p", "model": "m", "reasoningEffort": ""}},
                "reason": "initial",
            },
        },
        RequestHeaderShapeError,
    ),
    (
        "maxTokens marker without maxTokens",
        {
            "type": "request/header",
            "seq": 0,
            "time": 1,
            "data": {
                "header": {
                    "config": {"provider": "p", "model": "m"},
                    "adapterDefaults": {"maxTokens": True},
                },
                "reason": "initial",
            },
        },
        RequestHeaderShapeError,
    ),
    (
        "startsSeries on series",
        header_event(reason="series", startsSeries=True),
        RequestHeaderShapeError,
    ),
    ("bogus reason", header_event(reason="bogus"), RequestHeaderShapeError),
    (
        "extra header key",
        {
            "type": "request/header",
            "seq": 0,
            "time": 1,
            "data": {
                "header": {"config": {"provider": "p", "model": "m"}, "note": "x"},
                "reason": "initial",
            },
        },
        RequestHeaderShapeError,
    ),
    (
        "empty adapterDefaults",
        {
            "type": "request/header",
            "seq": 0,
            "time": 1,
            "data": {
                "header": {"config": {"provider": "p", "model": "m"}, "adapterDefaults": {}},
                "reason": "initial",
            },
        },
        None,
    ),
    (
        "user message with assistant role",
        {
            "type": "user/message",
            "seq": 0,
            "time": 1,
            "surfaceOp": "append",
            "data": {"id": "u", "role": "assistant", "content": [], "source": {"kind": "user"}},
        },
        MessageShapeError,
    ),
    (
        "mismatched tool call ids",
        {
            "type": "tool/result",
            "seq": 0,
            "time": 1,
            "surfaceOp": "append",
            "data": {
                "turn": 1,
                "step": 1,
                "message": {
                    "id": "t",
                    "role": "user",
                    "content": [{"type": "tool-result", "toolCallId": "c", "content": []}],
                    "source": {"kind": "tool", "callId": "other"},
                },
            },
        },
        MessageShapeError,
    ),
]


@pytest.mark.parametrize(
    ("event", "expected"), [(e, x) for _, e, x in REJECTIONS], ids=[n for n, _, _ in REJECTIONS]
)
def test_rejection_table_single_event_seeds(
    event: dict[str, Any], expected: type[KernelError] | None
) -> None:
    if expected is None:
        log = seed(event)
        assert log.events[0].seq == 0 and log.events[-1].type == "session/end-seed"
    else:
        error = seed_error(event)
        assert type(error) is expected
        assert error.index == 0
        assert "seed event at index 0" in str(error)


def test_integral_floats_are_normalized_to_int() -> None:
    event = seed({"type": "turn/start", "seq": 0.0, "time": 1.0, "data": {"turn": 1}}).events[0]
    assert (type(event.seq), type(event.time)) == (int, int)


def test_r8_replace_start_not_on_surface() -> None:
    bad = user(1, surfaceOp={"op": "replace", "start": 42, "end": 0}, sourceEventSeqs=[0])
    assert type(seed_error(user(0, surfaceOp="append"), bad)) is ReplaceRangeError


def test_r7f_replace_must_cite_every_shadowed_node() -> None:
    error = seed_error(
        user(0, surfaceOp="append"),
        user(1, surfaceOp="append"),
        user(2, surfaceOp={"op": "replace", "start": 0, "end": 1}, sourceEventSeqs=[0]),
    )
    assert type(error) is ProvenanceError and "missing [1]" in str(error) and error.index == 2


def test_r9_tool_result_replace_must_rewrite_exactly_one_node() -> None:
    error = seed_error(
        user(0, surfaceOp="append"),
        user(1, surfaceOp="append"),
        {
            "type": "tool/result",
            "seq": 2,
            "time": 2,
            "data": result_data(),
            "surfaceOp": {"op": "replace", "start": 0, "end": 1},
            "sourceEventSeqs": [0, 1],
        },
    )
    assert type(error) is ToolResultRewriteError


def test_r9_tool_result_replace_must_target_a_tool_result() -> None:
    error = seed_error(
        user(0, surfaceOp="append"),
        {
            "type": "tool/result",
            "seq": 1,
            "time": 2,
            "data": result_data(),
            "surfaceOp": {"op": "replace", "start": 0, "end": 0},
            "sourceEventSeqs": [0],
        },
    )
    assert type(error) is ToolResultRewriteError


def _result(seq: int, data: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "tool/result", "seq": seq, "time": seq, "data": data, **extra}


def test_r9_rewrite_may_not_change_call_identity() -> None:
    error = seed_error(
        _result(0, result_data("original"), surfaceOp="append"),
        _result(
            1,
            result_data("changed"),
            surfaceOp={"op": "replace", "start": 0, "end": 0},
            sourceEventSeqs=[0],
        ),
    )
    assert type(error) is ToolResultRewriteError


# -- docs/format/folds.md §1.9 H: the content rewrite rule in detail -------------------------------


def test_r9_content_only_rewrite_is_accepted() -> None:
    log = seed(
        _result(0, result_data(text="<40 KB>"), surfaceOp="append"),
        _result(
            1,
            result_data(text="[output pruned]"),
            surfaceOp={"op": "replace", "start": 0, "end": 0},
            sourceEventSeqs=[0],
        ),
    )
    assert tuple(log.surface.nodes) == (1,)


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.update(turn=2),
        lambda d: d.update(step=2),
        lambda d: d.update(error={"name": "E", "code": "X"}),
        lambda d: d.update(meta={"tags": ["b"]}),
        lambda d: d["message"].update(id="other"),
        lambda d: d["message"]["content"][0].update(isError=True),
        lambda d: d["message"].update(extra=1),
    ],
    ids=["turn", "step", "error", "meta", "message-id", "isError", "extra-key"],
)
def test_r9_rewrite_changing_anything_but_content_is_rejected(change: Any) -> None:
    original = result_data(meta={"tags": ["a"]})
    rewritten = result_data(text="pruned", meta={"tags": ["a"]})
    change(rewritten)
    error = seed_error(
        _result(0, original, surfaceOp="append"),
        _result(
            1, rewritten, surfaceOp={"op": "replace", "start": 0, "end": 0}, sourceEventSeqs=[0]
        ),
    )
    assert type(error) is ToolResultRewriteError


def test_r9_meta_with_other_key_order_is_the_same_value() -> None:
    log = seed(
        _result(0, result_data(meta={"a": 1, "b": 2}), surfaceOp="append"),
        _result(
            1,
            result_data(text="pruned", meta={"b": 2, "a": 1}),
            surfaceOp={"op": "replace", "start": 0, "end": 0},
            sourceEventSeqs=[0],
        ),
    )
    assert tuple(log.surface.nodes) == (1,)


def test_r9_second_rewrite_compares_with_the_first_rewrite() -> None:
    first = result_data(text="pruned once")
    log = seed(
        _result(0, result_data(), surfaceOp="append"),
        _result(1, first, surfaceOp={"op": "replace", "start": 0, "end": 0}, sourceEventSeqs=[0]),
        _result(
            2,
            result_data(text="pruned twice"),
            surfaceOp={"op": "replace", "start": 1, "end": 1},
            sourceEventSeqs=[1],
        ),
    )
    assert tuple(log.surface.nodes) == (2,)


# -- R2 envelope details --------------------------------------------------------------------------


@pytest.mark.parametrize("seq", ["0", 0.5, -1, True, None])
def test_r2_seq_must_be_a_non_negative_safe_integer(seq: Any) -> None:
    error = seed_error({"type": "turn/start", "seq": seq, "time": 1, "data": {"turn": 1}})
    assert type(error) is InvalidEnvelope


@pytest.mark.parametrize("time", ["1", 0.5, True, None])
def test_r2_time_must_be_a_safe_integer(time: Any) -> None:
    error = seed_error({"type": "turn/start", "seq": 0, "time": time, "data": {"turn": 1}})
    assert type(error) is InvalidEnvelope


@pytest.mark.parametrize("event", [[1], "x", None, 3])
def test_r2_event_must_be_an_object(event: Any) -> None:
    with pytest.raises(InvalidEnvelope):
        SessionLog.seed([event], now=0)


def test_r2_present_null_data_is_fine() -> None:
    assert seed({"type": "session/title", "seq": 0, "time": 0, "data": None}).events[0].data is None


# -- R1 --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [float("nan"), float("inf"), -0.0, 2**53, (1, 2), {1: "a"}, b"x", {1, 2}],
    ids=["nan", "inf", "neg-zero", "2**53", "tuple", "int-key", "bytes", "set"],
)
def test_r1_lossy_values_are_rejected_on_every_path(value: Any) -> None:
    with pytest.raises(NotLosslessJson):
        SessionLog.empty().append("session/title", {"v": value}, time=0)
    with pytest.raises(NotLosslessJson):
        SessionLog.seed([{"type": "x/y", "seq": 0, "time": 0, "data": {"v": value}}], now=0)


def test_r1_is_not_rerun_on_restore() -> None:
    log = SessionLog.restore([{"type": "x/y", "seq": 0, "time": 0, "data": {"v": -0.0}}])
    assert len(log) == 1


def test_r1_restore_still_checks_shapes_reading_turn() -> None:
    with pytest.raises(EventShapeError):
        SessionLog.restore([{"type": "turn/start", "seq": 0, "time": 0, "data": {"turn": -0.0}}])


def test_r1_restore_time_negative_zero_is_zero() -> None:
    log = SessionLog.restore([{"type": "turn/start", "seq": 0, "time": -0.0, "data": {"turn": 1}}])
    assert log.events[0].time == 0


# -- R3 order: retired vocabulary before other defects --------------------------------------------


def test_r3_fallback_is_reported_before_a_broken_envelope() -> None:
    event = header_event(reason="fallback")
    event["extra"] = 1
    assert type(seed_error(event)) is LegacyFormat


def test_r3_legacy_type_on_append_is_reported_before_r1() -> None:
    with pytest.raises(LegacyFormat):
        SessionLog.empty().append("mode/set", {"v": float("nan")}, time=0)


def test_r3_fallback_rejected_on_append() -> None:
    with pytest.raises(LegacyFormat):
        SessionLog.empty().append("request/header", {"header": H, "reason": "fallback"}, time=0)


# -- R5/R6 -----------------------------------------------------------------------------------------


def test_r5_present_null_surface_op_on_non_surface_type() -> None:
    event = {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}, "surfaceOp": None}
    assert type(seed_error(event)) is SurfaceMarkerError


def test_r5_source_event_seqs_on_non_surface_type() -> None:
    event = {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}, "sourceEventSeqs": [0]}
    assert type(seed_error(event)) is SurfaceMarkerError


@pytest.mark.parametrize(
    "op",
    [
        {"op": "replace", "start": 0},
        {"op": "replace", "start": 0, "end": 0, "note": "x"},
        {"op": "splice", "start": 0, "end": 0},
        None,
        3,
        ["append"],
        True,
    ],
)
def test_r6_invalid_replace_ops(op: Any) -> None:
    assert type(seed_error(user(0, surfaceOp=op))) is SurfaceMarkerError


# -- R7 element checks -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sources", "rule"),
    [
        ("0", "R7a"),
        (None, "R7a"),
        (["0"], "R7c"),
        ([0.5], "R7c"),
        ([-1], "R7c"),
        ([True], "R7c"),
        ([None], "R7c"),
        ([0, 0], "R7d"),
        ([5], "R7e"),
    ],
)
def test_r7_citation_rules(sources: Any, rule: str) -> None:
    error = seed_error(
        user(0, surfaceOp="append"), user(1, surfaceOp="append", sourceEventSeqs=sources)
    )
    assert type(error) is ProvenanceError and rule in str(error)


def test_r7_citations_may_name_any_earlier_seq() -> None:
    log = seed(
        {"type": "turn/start", "seq": 0, "time": 0, "data": {"turn": 1}},
        user(1, surfaceOp="append", sourceEventSeqs=[0]),
    )
    assert log.events[1].source_event_seqs == (0,)


def test_r8_order_by_surface_position_not_by_seq() -> None:
    log = seed(
        user(0, surfaceOp="append"),
        user(1, surfaceOp="append"),
        user(2, surfaceOp={"op": "replace", "start": 0, "end": 0}, sourceEventSeqs=[0]),
        user(3, surfaceOp={"op": "replace", "start": 2, "end": 1}, sourceEventSeqs=[2, 1]),
    )
    assert tuple(log.surface.nodes) == (3,)


def test_r8_reversed_range_is_rejected() -> None:
    error = seed_error(
        user(0, surfaceOp="append"),
        user(1, surfaceOp="append"),
        user(2, surfaceOp={"op": "replace", "start": 1, "end": 0}, sourceEventSeqs=[0, 1]),
    )
    assert type(error) is ReplaceRangeError


def test_r8_is_checked_before_r7_on_a_replace() -> None:
    error = seed_error(
        user(0, surfaceOp="append"),
        user(1, surfaceOp={"op": "replace", "start": 7, "end": 0}, sourceEventSeqs="bad"),
    )
    assert type(error) is ReplaceRangeError


# -- R10 -------------------------------------------------------------------------------------------


def _assistant(data: Any) -> dict[str, Any]:
    return {"type": "assistant/message", "seq": 0, "time": 0, "data": data, "surfaceOp": "append"}


@pytest.mark.parametrize(
    ("mutate", "rule"),
    [
        (lambda d: d.update(message=None), "R10a"),
        (lambda d: d["message"].update(id=""), "R10a"),
        (lambda d: d["message"].update(role="user"), "R10b"),
        (lambda d: d["message"].update(source={"kind": ""}), "R10c"),
        (lambda d: d["message"].update(content={}), "R10d"),
        (lambda d: d["message"]["source"].update(kind="user"), "R10e"),
        (lambda d: d["message"]["source"].pop("provider"), "R10e"),
    ],
)
def test_r10_assistant_message_shapes(mutate: Any, rule: str) -> None:
    data = assistant_data("c")
    mutate(data)
    error = seed_error(_assistant(data))
    assert type(error) is MessageShapeError and rule in str(error)


@pytest.mark.parametrize(
    ("mutate", "rule"),
    [
        (lambda d: d["message"]["source"].update(kind="user"), "R10f"),
        (lambda d: d["message"]["source"].update(callId=""), "R10f"),
        (lambda d: d["message"].update(content=[]), "R10g"),
        (lambda d: d["message"]["content"].append({"type": "text", "text": "x"}), "R10g"),
        (lambda d: d["message"]["content"][0].update(type="text"), "R10g"),
        (lambda d: d["message"]["content"][0].update(content="x"), "R10g"),
        (lambda d: d["message"]["content"][0].update(toolCallId="z"), "R10h"),
    ],
)
def test_r10_tool_result_shapes(mutate: Any, rule: str) -> None:
    data = result_data("c")
    mutate(data)
    error = seed_error(_result(0, data, surfaceOp="append"))
    assert type(error) is MessageShapeError and rule in str(error)


def test_r10_runs_on_append_too() -> None:
    with pytest.raises(MessageShapeError):
        SessionLog.empty().append("user/message", {"id": "u"}, time=0, surface_op=APPEND)


# -- R11 -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "rule"),
    [
        (
            {"header": {"config": {"provider": "p", "model": "m"}}, "reason": "initial", "x": 1},
            "R11d",
        ),
        ({"header": {"config": {"provider": "p", "model": "m"}}}, "R11e"),
        (
            {
                "header": {"config": {"provider": "p", "model": "m"}},
                "reason": "change",
                "startsSeries": False,
            },
            "R11f",
        ),
        (
            {
                "header": {"config": {"provider": "p", "model": "m", "temperature": "1"}},
                "reason": "initial",
            },
            "R11g",
        ),
        (
            {
                "header": {"config": {"provider": "p", "model": "m", "maxTokens": True}},
                "reason": "initial",
            },
            "R11g",
        ),
        (
            {
                "header": {"config": {"provider": "p", "model": "m", "stop": [1]}},
                "reason": "initial",
            },
            "R11g",
        ),
        (
            {
                "header": {"config": {"provider": "p", "model": "m"}, "system": None},
                "reason": "initial",
            },
            "R11h",
        ),
        (
            {
                "header": {"config": {"provider": "p", "model": "m"}, "tools": [{"name": "x"}]},
                "reason": "initial",
            },
            "R11h",
        ),
        (
            {
                "header": {
                    "config": {"provider": "p", "model": "m"},
                    "adapterDefaults": {"maxTokens": False},
                },
                "reason": "initial",
            },
            "R11c",
        ),
        (
            {
                "header": {
                    "config": {"provider": "p", "model": "m"},
                    "adapterDefaults": {"other": True},
                },
                "reason": "initial",
            },
            "R11c",
        ),
        (None, "R11a"),
    ],
)
def test_r11_request_header_shapes(data: Any, rule: str) -> None:
    with pytest.raises(RequestHeaderShapeError, match=rule):
        SessionLog.empty().append("request/header", data, time=0)


def test_r11_starts_series_on_change_is_accepted() -> None:
    data = {"header": H, "reason": "change", "startsSeries": True}
    assert len(SessionLog.empty().append("request/header", data, time=0)) == 1


# -- R12 -------------------------------------------------------------------------------------------

VALID_PAYLOADS: list[tuple[str, Any]] = [
    ("turn/start", {"turn": 1}),
    ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    ("turn/end", {"turn": 1, "reason": {"kind": "aborted", "reason": {"kind": "user"}}}),
    (
        "turn/end",
        {
            "turn": 1,
            "reason": {"kind": "error", "error": {"message": "m", "code": "X", "status": 500}},
        },
    ),
    ("turn/end", {"turn": 1, "reason": {"kind": "future-kind", "anything": [1]}}),
    ("step/start", {"turn": 1, "step": 2}),
    (
        "assistant/chunk",
        {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "x"}},
    ),
    ("tool/call", {"turn": 1, "step": 1, "callId": "c", "name": "ls", "arguments": "{}"}),
    ("request/context", {"provider": "p", "model": "m", "contextWindow": 1000}),
    ("request/context", {"provider": "p", "model": "m"}),
]


@pytest.mark.parametrize(("event_type", "data"), VALID_PAYLOADS)
def test_r12_valid_core_payloads_are_accepted(event_type: str, data: Any) -> None:
    assert len(SessionLog.empty().append(event_type, data, time=0)) == 1


INVALID_PAYLOADS: list[tuple[str, Any]] = [
    ("turn/start", {"turn": 0}),
    ("turn/start", {"turn": 1, "x": 1}),
    ("turn/start", {"turn": True}),
    ("turn/end", {"turn": 1}),
    ("turn/end", {"turn": 1, "reason": {"kind": "completed", "extra": 1}}),
    ("turn/end", {"turn": 1, "reason": {"kind": "aborted"}}),
    ("turn/end", {"turn": 1, "reason": {"kind": "error", "error": {"message": "m"}}}),
    ("turn/end", {"turn": 1, "reason": {"kind": ""}}),
    ("step/end", None),
    ("step/start", {"turn": 1, "step": 1.5}),
    ("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"index": 0}}),
    ("tool/call", {"turn": 1, "step": 1, "callId": "c", "name": "ls", "arguments": "{}", "x": 1}),
    ("tool/call", {"turn": 1, "step": 1, "callId": "", "name": "ls", "arguments": "{}"}),
    ("request/context", {"provider": "p"}),
    ("request/context", {"provider": "p", "model": "m", "contextWindow": "big"}),
]


@pytest.mark.parametrize(("event_type", "data"), INVALID_PAYLOADS)
def test_r12_invalid_core_payloads_are_rejected(event_type: str, data: Any) -> None:
    with pytest.raises(EventShapeError):
        SessionLog.empty().append(event_type, data, time=0)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.update(usage={"inputTokens": 1}),
        lambda d: d.update(usage={"inputTokens": 1, "outputTokens": 2, "cacheReadTokens": "x"}),
        lambda d: d.update(interrupted=False),
        lambda d: d.update(extra=1),
        lambda d: d.update(turn=0),
    ],
)
def test_r12_assistant_message_payload(mutate: Any) -> None:
    data = assistant_data(content=[{"type": "text", "text": "hi"}])
    mutate(data)
    with pytest.raises(EventShapeError):
        SessionLog.empty().append("assistant/message", data, time=0, surface_op=APPEND)


def test_r12_tool_result_error_must_be_name_and_code() -> None:
    with pytest.raises(EventShapeError):
        SessionLog.empty().append(
            "tool/result", result_data(error={"name": "E"}), time=0, surface_op=APPEND
        )


# -- append path specifics -------------------------------------------------------------------------


@pytest.mark.parametrize("time", [True, 0.5, 2**53, "1", None])
def test_append_time_must_be_a_safe_integer(time: Any) -> None:
    with pytest.raises(InvalidEnvelope):
        SessionLog.empty().append("turn/start", {"turn": 1}, time=time)


@pytest.mark.parametrize("event_type", ["", None, 3])
def test_append_type_must_be_a_non_empty_string(event_type: Any) -> None:
    with pytest.raises(InvalidEnvelope):
        SessionLog.empty().append(event_type, {}, time=0)


def test_append_assigns_contiguous_seqs_and_normalizes_time() -> None:
    log = SessionLog.empty()
    for i in range(3):
        log = log.append("x/y", None, time=float(i), ignorable=True)
    assert [(e.seq, e.time, type(e.time)) for e in log.events] == [(i, i, int) for i in range(3)]


def test_append_accepts_wire_spelling_of_surface_ops() -> None:
    log = SessionLog.empty().append("user/message", U, time=0, surface_op="append")
    log = log.append(
        "user/message",
        {**U, "id": "v"},
        time=1,
        surface_op={"op": "replace", "start": 0, "end": 0},
        source_event_seqs=(0,),
    )
    assert tuple(log.surface.nodes) == (1,) and log.events[1].surface_op == Replace(0, 0)


def test_append_ignorable_sets_the_envelope_flag() -> None:
    log = SessionLog.empty().append("x/y", {}, time=0, ignorable=True)
    assert log.events[0].ignorable is True


# -- R13 atomicity ---------------------------------------------------------------------------------


def test_r13_rejected_append_changes_nothing() -> None:
    log = SessionLog.empty().append("user/message", U, time=0, surface_op=APPEND)
    before = (tuple(log.events), tuple(log.surface.nodes), tuple(log.messages), log.request_header)
    with pytest.raises(ReplaceRangeError):
        log.append("user/message", U, time=1, surface_op=Replace(5, 5), source_event_seqs=[0])
    assert (
        tuple(log.events),
        tuple(log.surface.nodes),
        tuple(log.messages),
        log.request_header,
    ) == before
    after = log.append("user/message", U, time=1, surface_op=APPEND)
    assert after.events[1].seq == 1


def test_r13_snapshot_isolation_of_caller_objects() -> None:
    data = {
        "id": "u",
        "role": "user",
        "content": [{"type": "text", "text": "a"}],
        "source": {"kind": "user"},
    }
    sources = [0]
    log = SessionLog.empty().append("user/message", U, time=0, surface_op=APPEND)
    log = log.append("user/message", data, time=1, surface_op=APPEND, source_event_seqs=sources)
    data["content"][0]["text"] = "mutated"
    sources.append(99)
    assert log.events[1].data["content"][0]["text"] == "a"
    assert log.events[1].source_event_seqs == (0,)


def test_r13_failed_seed_produces_no_log_and_names_the_index() -> None:
    error = seed_error(
        user(0, surfaceOp="append"),
        {"type": "turn/start", "seq": 5, "time": 0, "data": {"turn": 1}},
    )
    assert type(error) is SeqMismatch and error.index == 1


# -- §5 end-seed marker ----------------------------------------------------------------------------


def _types(log: SessionLog) -> list[tuple[str, int]]:
    return [(e.type, e.seq) for e in log.events]


TS = {"type": "turn/start", "seq": 0, "time": 0, "data": {"turn": 1}}


def test_end_seed_table() -> None:
    assert _types(SessionLog.empty()) == []
    assert _types(SessionLog.seed([], now=7)) == [("session/end-seed", 0)]
    te = {
        "type": "turn/end",
        "seq": 1,
        "time": 0,
        "data": {"turn": 1, "reason": {"kind": "completed"}},
    }
    closed = SessionLog.seed([TS, te], now=7)
    assert _types(closed) == [("turn/start", 0), ("turn/end", 1), ("session/end-seed", 2)]
    assert closed.first_live_seq == 2 and closed.events[2].time == 7
    marked = {"type": "session/end-seed", "seq": 2, "time": 0, "data": {}}
    again = SessionLog.seed([TS, te, marked], now=7)
    assert len(again) == 3 and again.first_live_seq == 3
    open_turn = SessionLog.seed([TS], now=7)
    assert _types(open_turn) == [("turn/start", 0), ("session/end-seed", 1)]
    middle = SessionLog.seed([{**marked, "seq": 0}, {**TS, "seq": 1}], now=7)
    assert _types(middle)[-1] == ("session/end-seed", 2) and middle.first_live_seq == 2


def test_reseeding_a_seeded_log_adds_nothing() -> None:
    once = SessionLog.seed([TS], now=1)
    twice = SessionLog.seed(once.events, now=2)
    assert tuple(twice.events) == tuple(once.events)


# -- §6 session header -----------------------------------------------------------------------------

GOOD_HEADER = {"version": 0, "id": "s", "createdAt": 5}


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ({"x": float("nan")}, "H1"),
        ({"version": 1}, "H3"),
        ({"createdAt": "123"}, "H5"),
        ({"createdAt": 1.5}, "H5"),
        ({"createdAt": -1}, "H5"),
        ({"cwd": 3}, "H6"),
        ({"cwd": "relative/dir"}, "H7"),
        ({"parentSession": 1}, "H8"),
        ({"seedLength": -1}, "H9"),
        ({"origin": "user"}, "H10"),
        ({"delegationDepth": 0.5}, "H11"),
        ({"agentPreset": None}, "H12"),
    ],
)
def test_session_header_rules(change: dict[str, Any], rule: str) -> None:
    with pytest.raises(SessionHeaderError, match=rule):
        SessionLog.empty(header={**GOOD_HEADER, **change})


def test_session_header_h2_and_h4() -> None:
    from kernel import header_from_json

    with pytest.raises(SessionHeaderError, match="H2"):
        header_from_json([1])
    with pytest.raises(SessionHeaderError, match=r"id 's' does not match session 'other' \(H4\)"):
        header_from_json(GOOD_HEADER, session_id="other")
    without_id = {key: value for key, value in GOOD_HEADER.items() if key != "id"}
    with pytest.raises(SessionHeaderError, match=r"^session header id is missing \(H4\)$"):
        header_from_json(without_id)
    for bad in (5, None, ["s"]):
        with pytest.raises(SessionHeaderError, match=r"id must be a string, got .* \(H4\)"):
            header_from_json({**GOOD_HEADER, "id": bad})


def test_session_header_unknown_keys_are_dropped() -> None:
    log = SessionLog.empty(header={**GOOD_HEADER, "cwd": "/tmp", "future": 1})
    assert log.header is not None and log.header.cwd == "/tmp" and log.header.created_at == 5


def test_regression_unhashable_type_is_an_invalid_envelope() -> None:
    # Found by test_seed_and_restore_raise_only_kernel_errors: a list `type` reached a set look-up.
    for build in (SessionLog.restore, lambda e: SessionLog.seed(e, now=0)):
        with pytest.raises(InvalidEnvelope):
            build([{"type": [], "seq": 0, "time": 0, "data": None}])


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        ({"surfaceOp": "invalid"}, SurfaceMarkerError),  # R6
        ({"surfaceOp": {"op": "replace", "start": -1, "end": 0}}, SurfaceMarkerError),  # R6
        ({"surfaceOp": "append", "sourceEventSeqs": "0"}, ProvenanceError),  # R7a
        ({"surfaceOp": "append", "sourceEventSeqs": [-1]}, ProvenanceError),  # R7c
        ({}, SurfaceMarkerError),  # R5: a surface type without an op
    ],
)
@pytest.mark.parametrize("path", ["seed", "restore"])
def test_surface_rule_errors_carry_the_seq_on_seed_and_restore(
    extra: dict[str, Any], error: type[KernelError], path: str
) -> None:
    # docs/format/admission.md §2: errors from the surface rules carry the event's seq,
    # on every path, beside the input index.
    events = [user(0, surfaceOp="append"), user(1, **extra)]
    build = SessionLog.seed if path == "seed" else SessionLog.restore
    with pytest.raises(error) as info:
        build(events, now=5) if path == "seed" else build(events)
    assert (info.value.index, info.value.seq) == (1, 1)
