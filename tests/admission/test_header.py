"""Request header: canonical form, equality, fold and writer decision (docs/format/folds.md §3)."""

from __future__ import annotations

import copy
import functools
from typing import Any

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from kernel.errors import NotLosslessJson, RequestHeaderShapeError
from kernel.folds.request_header import (
    HeaderWriterState,
    RequestHeaderState,
    call_config_equals,
    canonical_header,
    fold_request_header,
    header_event,
    headers_equal,
    ordered_json_equal,
    step_request_header,
)
from kernel.folds.surface import fold_surface
from kernel.log import SessionLog
from kernel.storage.jsonl import load_jsonl, write_jsonl
from kernel.values.events import APPEND, REQUEST_HEADER, Event, Replace
from kernel.values.json import FrozenObject, freeze, json_equal, thaw

C = {"provider": "p", "model": "m"}
T = {"name": "ls", "description": "List files", "parameters": {"type": "object"}}
T2 = {"name": "cat", "description": "Print a file", "parameters": {"type": "object"}}


def header_event_at(seq: int, header: Any, reason: str = "initial", **extra: Any) -> Event:
    return Event(REQUEST_HEADER, seq, seq * 10, {"header": header, "reason": reason, **extra})


def noise(seq: int) -> Event:
    return Event("session/title", seq, seq * 10, {"title": f"t{seq}"})


# -- §3.1 canonical form: the table -------------------------------------------------------------


def test_canonical_3_1_empty_pieces_are_dropped() -> None:
    h = {"config": C, "adapterDefaults": {}, "system": "", "tools": []}
    assert canonical_header(h) == {"config": C}


def test_canonical_3_1_canonical_header_is_unchanged() -> None:
    h = {"config": C, "adapterDefaults": {"maxTokens": True}, "system": "s", "tools": [T]}
    assert canonical_header(h) == h


def test_canonical_3_1_extra_keys_are_dropped() -> None:
    assert canonical_header({"config": C, "system": "s", "extra": 1}) == {
        "config": C,
        "system": "s",
    }


def test_canonical_3_1_false_markers_drop_adapter_defaults() -> None:
    h = {
        "config": C,
        "adapterDefaults": {"reasoningEffort": False, "maxTokens": False},
        "tools": [T],
    }
    assert canonical_header(h) == {"config": C, "tools": [T]}


def test_canonical_3_1_one_true_marker_keeps_adapter_defaults_whole() -> None:
    h = {"config": C, "adapterDefaults": {"reasoningEffort": False, "maxTokens": True}}
    assert canonical_header(h) == h


def test_canonical_3_1_config_is_never_rewritten() -> None:
    h = {"config": {"provider": "p", "model": "m", "stop": [], "topP": 0.9}}
    assert canonical_header(h) == h


def test_canonical_3_1_no_config_in_no_config_out() -> None:
    assert canonical_header({"system": "s", "tools": [T]}) == {"system": "s", "tools": [T]}


@pytest.mark.parametrize("key", ["system", "tools"])
def test_canonical_3_1_null_system_or_tools_is_a_shape_error(key: str) -> None:
    with pytest.raises(RequestHeaderShapeError):
        canonical_header({"config": C, key: None})


# -- §3.1 canonical form: the prose -------------------------------------------------------------


def test_canonical_3_1_marker_must_be_literal_true() -> None:
    for defaults in ({"maxTokens": 1}, {"reasoningEffort": "true"}, None, [True], "x"):
        assert canonical_header({"config": C, "adapterDefaults": defaults}) == {"config": C}


def test_canonical_3_1_kept_adapter_defaults_keep_other_entries() -> None:
    h = {"config": C, "adapterDefaults": {"maxTokens": True, "temperature": True}}
    assert canonical_header(h)["adapterDefaults"] == {"maxTokens": True, "temperature": True}


def test_canonical_3_1_config_is_copied_whatever_it_holds() -> None:
    assert canonical_header({"config": None}) == {"config": None}
    assert canonical_header({"config": [1, 2]}) == {"config": [1, 2]}


def test_canonical_3_1_key_order_is_config_adapter_defaults_system_tools() -> None:
    h = {"tools": [T], "system": "s", "adapterDefaults": {"maxTokens": True}, "config": C}
    assert list(canonical_header(h)) == ["config", "adapterDefaults", "system", "tools"]


@pytest.mark.parametrize(
    "bad",
    [{"config": C, "system": 5}, {"config": C, "tools": {"0": T}}, {"config": C, "tools": "x"}],
)
def test_canonical_3_1_system_must_be_string_and_tools_an_array(bad: dict[str, Any]) -> None:
    with pytest.raises(RequestHeaderShapeError):
        canonical_header(bad)


@pytest.mark.parametrize("bad", [None, [], "header", 3])
def test_canonical_3_1_non_object_header_is_a_shape_error(bad: Any) -> None:
    with pytest.raises(RequestHeaderShapeError):
        canonical_header(bad)


def test_canonical_3_1_returns_frozen_and_leaves_input_alone() -> None:
    h = {"config": {"provider": "p", "model": "m"}, "system": "", "tools": [T]}
    before = copy.deepcopy(h)
    out = canonical_header(h)
    assert isinstance(out, FrozenObject)
    h["config"]["model"] = "changed"  # the result is a snapshot, not a view of the caller's dict
    assert out["config"]["model"] == "m"
    h["config"]["model"] = "m"
    assert h == before


def test_canonical_3_1_accepts_frozen_input_and_keeps_canonical_identity() -> None:
    frozen = freeze({"config": C, "tools": [T]})
    assert canonical_header(frozen) is frozen
    assert canonical_header(freeze({"config": C, "system": ""})) == {"config": C}


# -- §3.2 equality: the non-canonical table ----------------------------------------------------


def test_equality_tools_empty_equals_absent() -> None:
    assert headers_equal({"config": C, "tools": []}, {"config": C})


def test_equality_tools_null_equals_absent() -> None:
    assert headers_equal({"config": C, "tools": None}, {"config": C})


def test_equality_system_empty_differs_from_absent() -> None:
    assert not headers_equal({"config": C, "system": ""}, {"config": C})


def test_equality_system_null_differs_from_absent() -> None:
    assert not headers_equal({"config": C, "system": None}, {"config": C})


def test_equality_system_null_equals_null() -> None:
    assert headers_equal({"config": C, "system": None}, {"config": C, "system": None})


def test_equality_adapter_defaults_empty_equals_absent() -> None:
    assert headers_equal({"config": C, "adapterDefaults": {}}, {"config": C})


def test_equality_adapter_defaults_false_marker_differs_from_absent() -> None:
    assert not headers_equal({"config": C, "adapterDefaults": {"maxTokens": False}}, {"config": C})


def test_equality_adapter_defaults_true_marker_differs_from_absent() -> None:
    assert not headers_equal({"config": C, "adapterDefaults": {"maxTokens": True}}, {"config": C})


def test_equality_stop_empty_differs_from_absent() -> None:
    assert not headers_equal({"config": {**C, "stop": []}}, {"config": C})


def test_equality_temperature_numbers_by_value() -> None:
    assert headers_equal({"config": {**C, "temperature": 1.0}}, {"config": {**C, "temperature": 1}})


def test_equality_unknown_config_keys_are_ignored() -> None:
    assert headers_equal({"config": {**C, "topP": 0.1}}, {"config": C})


def test_equality_tool_schema_numbers_by_value() -> None:
    a = {**T, "parameters": {"type": "number", "maximum": 1.0}}
    b = {**T, "parameters": {"type": "number", "maximum": 1}}
    assert headers_equal({"config": C, "tools": [a]}, {"config": C, "tools": [b]})


def test_equality_tool_schema_negative_zero_equals_zero() -> None:
    a = {**T, "parameters": {"type": "number", "minimum": -0.0}}
    b = {**T, "parameters": {"type": "number", "minimum": 0}}
    assert headers_equal({"config": C, "tools": [a]}, {"config": C, "tools": [b]})


def test_equality_tool_member_order_matters() -> None:
    reordered = {"parameters": T["parameters"], "name": T["name"], "description": T["description"]}
    assert not headers_equal({"config": C, "tools": [reordered]}, {"config": C, "tools": [T]})


def test_equality_tool_order_matters() -> None:
    assert not headers_equal({"config": C, "tools": [T, T2]}, {"config": C, "tools": [T2, T]})


# -- §3.2 equality: the prose ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"system": "s"}, {"config": C}),
        ({"config": C}, {"config": None}),
        ({"config": "p/m"}, {"config": C}),
        ([], {"config": C}),
    ],
)
def test_equality_config_object_required_on_both_sides(a: Any, b: Any) -> None:
    with pytest.raises(RequestHeaderShapeError):
        headers_equal(a, b)
    with pytest.raises(RequestHeaderShapeError):
        headers_equal(b, a)


def test_equality_stops_present_on_both_sides_must_be_arrays() -> None:
    with pytest.raises(RequestHeaderShapeError):
        headers_equal({"config": {**C, "stop": "x"}}, {"config": {**C, "stop": ["x"]}})
    # exactly one side carrying an odd stop is simply a difference
    assert not headers_equal({"config": {**C, "stop": "x"}}, {"config": C})


def test_equality_tools_that_are_not_an_array_are_a_shape_error() -> None:
    with pytest.raises(RequestHeaderShapeError):
        headers_equal({"config": C, "tools": {"0": T}}, {"config": C})


def test_equality_adapter_marker_lookup_treats_null_as_absent() -> None:
    assert headers_equal({"config": C, "adapterDefaults": None}, {"config": C})
    assert headers_equal(
        {"config": C, "adapterDefaults": {"maxTokens": True, "x": 1}},
        {"config": C, "adapterDefaults": {"maxTokens": True}},
    )
    assert not headers_equal(
        {"config": C, "adapterDefaults": {"reasoningEffort": True}},
        {"config": C, "adapterDefaults": {"maxTokens": True}},
    )


def test_equality_accepts_frozen_and_plain_alike() -> None:
    h = {"config": {**C, "stop": ["a"]}, "system": "s", "tools": [T]}
    assert headers_equal(freeze(h), h)
    assert headers_equal(h, freeze(h))


@pytest.mark.parametrize(
    ("field", "a", "b", "equal"),
    [
        ("provider", "p", "q", False),
        ("model", "m", "n", False),
        ("reasoningEffort", "high", "low", False),
        ("maxTokens", 100, 100.0, True),
        ("maxTokens", 100, 101, False),
        ("temperature", 1, True, False),
        ("temperature", 0.5, "0.5", False),
        ("stop", ["a", "b"], ["a", "b"], True),
        ("stop", ["a", "b"], ["b", "a"], False),
        ("stop", ["a"], ["a", "b"], False),
    ],
)
def test_call_config_equals_3_2_fields(field: str, a: Any, b: Any, equal: bool) -> None:
    base = {"provider": "p", "model": "m"}
    assert call_config_equals({**base, field: a}, {**base, field: b}) is equal
    assert call_config_equals({**base, field: b}, {**base, field: a}) is equal


def test_call_config_equals_3_2_absent_differs_from_any_value() -> None:
    for field in ("provider", "model", "reasoningEffort", "temperature", "maxTokens", "stop"):
        assert not call_config_equals(
            {**C, field: None}, {k: v for k, v in C.items() if k != field}
        )


def test_call_config_equals_3_2_requires_objects() -> None:
    with pytest.raises(RequestHeaderShapeError):
        call_config_equals(None, C)


def test_ordered_json_equal_array_index_keys_enumerate_first() -> None:
    # JSON.stringify spells both {"10":..,"2":..,"b":..}: index keys ascending, then insertion order
    assert ordered_json_equal({"b": 0, "10": 1, "2": 2}, {"2": 2, "10": 1, "b": 0})
    assert not ordered_json_equal({"b": 0, "a": 1}, {"a": 1, "b": 0})
    assert not ordered_json_equal({"01": 0, "b": 1}, {"b": 1, "01": 0})  # "01" is no index


def test_ordered_json_equal_scalars() -> None:
    assert ordered_json_equal([1, 2.0, None, "x", True], [1.0, 2, None, "x", True])
    assert not ordered_json_equal([True], [1])
    assert not ordered_json_equal([0], [False])
    assert not ordered_json_equal(["1"], [1])
    assert not ordered_json_equal([None], [{}])
    assert not ordered_json_equal([1, 2], [1, 2, 3])


def test_ordered_json_equal_is_iterative() -> None:
    deep_a: Any = 1
    deep_b: Any = 1.0
    for _ in range(20_000):
        deep_a, deep_b = [deep_a], [deep_b]
    assert ordered_json_equal(deep_a, deep_b)


def test_ordered_json_equal_rejects_non_json_values() -> None:
    with pytest.raises(RequestHeaderShapeError):
        ordered_json_equal({"a": {1, 2}}, {"a": {1, 2}})


# -- §3.3 fold ---------------------------------------------------------------------------------


def test_fold_3_3_no_snapshot_gives_none() -> None:
    assert fold_request_header([]) is None
    assert fold_request_header([noise(0), noise(1)]) is None


def test_fold_3_3_latest_snapshot_wins_canonicalized() -> None:
    log = [
        header_event_at(0, {"config": C, "system": "one"}),
        noise(1),
        header_event_at(2, {"config": C, "system": "", "tools": []}, "change", startsSeries=True),
        noise(3),
    ]
    assert fold_request_header(log) == {"config": C}


def test_fold_3_3_start_is_returned_as_given_when_no_snapshot() -> None:
    start = {"config": C, "tools": []}
    assert fold_request_header([noise(0)], start=start) == {"config": C, "tools": []}
    frozen_start = freeze(start)
    assert fold_request_header([], start=frozen_start) is frozen_start


def test_fold_3_3_snapshot_replaces_start() -> None:
    log = [header_event_at(0, {"config": C, "tools": [T]})]
    assert fold_request_header(log, start={"config": {"provider": "x", "model": "y"}}) == {
        "config": C,
        "tools": [T],
    }


def test_fold_3_3_takes_any_iterable_and_equals_the_step() -> None:
    log = [
        header_event_at(0, {"config": C}),
        noise(1),
        header_event_at(2, {"config": C, "system": "s"}),
    ]
    assert fold_request_header(iter(log)) == fold_request_header(log)
    state = RequestHeaderState()
    value = None
    for event in log:
        state = state.step(event)
        value = step_request_header(value, event)
        assert state.header == value
    assert value == {"config": C, "system": "s"}


@pytest.mark.parametrize(
    "data",
    [None, {}, {"reason": "initial"}, {"header": None}, {"header": {"config": C, "tools": None}}],
)
def test_fold_3_3_malformed_snapshot_names_its_seq(data: Any) -> None:
    log = [noise(0), Event(REQUEST_HEADER, 1, 10, data)]
    with pytest.raises(RequestHeaderShapeError) as caught:
        fold_request_header(log)
    assert caught.value.seq == 1
    assert "seq 1" in str(caught.value)


def test_fold_3_3_an_earlier_malformed_snapshot_raises_though_a_later_one_wins() -> None:
    log = [header_event_at(0, {"config": C, "system": None}), header_event_at(1, {"config": C})]
    with pytest.raises(RequestHeaderShapeError) as caught:
        fold_request_header(log)
    assert caught.value.seq == 0


def test_fold_3_3_a_malformed_snapshot_is_reported_before_a_later_item_that_is_no_event() -> None:
    log = [header_event_at(0, {"config": C, "tools": None}), None]
    with pytest.raises(RequestHeaderShapeError) as caught:
        fold_request_header(log)  # type: ignore[list-item]
    assert caught.value.seq == 0


STORED_HEADER = {"version": 0, "id": "s", "createdAt": 1}
H_A = {"config": C, "system": "one", "tools": [T]}
H_B = {"config": C, "system": "two"}


def loaded(events: list[Event]) -> tuple[Event, ...]:
    """The events as a load reads them back: payloads unread, checked by the typed load path."""
    return load_jsonl(write_jsonl(STORED_HEADER, events), now=0).events


def test_fold_3_3_a_loaded_series_folds_to_its_last_snapshot_without_reading_the_others() -> None:
    log = [
        header_event_at(0, H_A),
        noise(1),
        header_event_at(2, H_B, "change", startsSeries=True),
        header_event_at(3, H_B, "series"),  # equal to the snapshot before it
        noise(4),
        header_event_at(5, H_A, "resume"),  # equal to the first
    ]
    events = loaded(log)
    stepped = functools.reduce(RequestHeaderState.step, loaded(log), RequestHeaderState())
    assert fold_request_header(events) == stepped.header == canonical_header(H_A)
    built = [type(e.data._value) is dict for e in events if e.type == REQUEST_HEADER]
    assert built == [False, False, False, True]
    assert fold_request_header(events[:4]) == canonical_header(H_B)


def test_fold_3_3_a_resume_after_a_seed_is_the_header_in_force() -> None:
    prefix = loaded([header_event_at(0, H_A), noise(1), header_event_at(2, H_B, "change")])
    seeded = SessionLog.seed(prefix, now=100)
    resumed = seeded.append(REQUEST_HEADER, {"header": H_B, "reason": "resume"}, time=200)
    assert fold_request_header(seeded.events) == seeded.request_header == canonical_header(H_B)
    assert fold_request_header(resumed.events) == resumed.request_header == canonical_header(H_B)
    assert fold_request_header(resumed.events[3:], start=fold_request_header(prefix)) == H_B


def test_fold_3_3_a_loaded_snapshot_that_cannot_be_copied_fails_where_the_step_fails() -> None:
    # A load does not run R1 again, so a stored header may hold -0.0. Its canonical form drops
    # the empty system and is a copy, which -0.0 cannot enter: the fold fails there, as the
    # step does, though a later snapshot would win.
    lossy = b'{"header":{"config":{"provider":"p","model":"m","temperature":-0.0},"system":""}'
    lines = [
        write_jsonl(STORED_HEADER, []),
        b'{"type":"request/header","seq":0,"time":0,"data":' + lossy + b',"reason":"initial"}}\n',
        b'{"type":"request/header","seq":1,"time":0,"data":{"header":{"config":{"provider":"p",'
        b'"model":"m"}},"reason":"change"}}\n',
    ]
    events = load_jsonl(b"".join(lines), now=0).events
    with pytest.raises(NotLosslessJson) as folded:
        fold_request_header(events)
    with pytest.raises(NotLosslessJson) as stepped:
        step_request_header(None, load_jsonl(b"".join(lines), now=0).events[0])
    assert str(folded.value) == str(stepped.value)
    assert fold_request_header(events[1:]) == {"config": C}


# -- §3.4 / §3.7 writer decision ---------------------------------------------------------------


H1 = {"config": C, "system": "be brief", "tools": [T]}
H2 = {"config": C, "system": "be brief", "tools": [T, T2]}
H3 = {"config": C, "system": "be thorough", "tools": [T, T2]}


class Session:
    """A tiny log the writer tests append to; generation comes from the real surface fold."""

    def __init__(self, events: list[Event] | None = None) -> None:
        self.events: list[Event] = list(events or [])

    def add(self, kind: str, data: Any, op: Any = None, sources: Any = None) -> None:
        seq = len(self.events)
        self.events.append(Event(kind, seq, seq * 10, data, op, sources))

    def user(self, text: str) -> None:
        self.add("user/message", _user_msg(len(self.events), text), APPEND)

    def compact(self, start: int, end: int) -> None:
        self.add(
            "user/message",
            _user_msg(len(self.events), "summary"),
            Replace(start, end),
            list(range(start, end + 1)),
        )

    @property
    def generation(self) -> int:
        return len(fold_surface(self.events).replacements)

    def attempt(
        self, writer: HeaderWriterState, header: Any, *, declared: bool = False
    ) -> tuple[Any, HeaderWriterState]:
        data, writer = header_event(
            writer,
            header,
            baseline=fold_request_header(self.events),
            declared=declared,
            generation=self.generation,
        )
        if data is not None:
            self.add(REQUEST_HEADER, data)
        return data, writer


def _user_msg(seq: int, text: str) -> dict[str, Any]:
    return {
        "id": f"u{seq}",
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }


def test_writer_3_7_example_writers_a_and_b() -> None:
    log = Session()
    a = HeaderWriterState.attach(log.generation)
    assert a == HeaderWriterState(anchored=False, generation_at_last_request=0)

    log.user("t1")
    data, a = log.attempt(a, H1)  # t1 s1: first request
    assert data == {"header": H1, "reason": "initial"}
    data, a = log.attempt(a, H1)  # t1 s2
    assert data is None
    data, a = log.attempt(a, H1)  # t1 s2 retry
    assert data is None
    assert fold_request_header(log.events) == H1

    log.user("t2")
    log.compact(0, 2)  # a compaction replaces a range -> generation 1
    assert log.generation == 1
    data, a = log.attempt(a, H1)  # t2 s1
    assert data == {"header": H1, "reason": "series"}
    data, a = log.attempt(a, H2)  # t2 s2: tool list changed
    assert data == {"header": H2, "reason": "change"}
    assert fold_request_header(log.events) == H2
    data, a = log.attempt(a, H3, declared=True)  # t3 s1: declared, system prompt changed
    assert data == {"header": H3, "reason": "change", "startsSeries": True}
    assert list(data) == ["header", "reason", "startsSeries"]
    data, a = log.attempt(a, H3)  # t3 s1 retry: declaration not repeated
    assert data is None
    assert fold_request_header(log.events) == H3

    b = HeaderWriterState.attach(log.generation)  # process restarts; B attaches at generation 1
    data, b = log.attempt(b, H3)  # t4 s1
    assert data == {"header": H3, "reason": "resume"}
    assert fold_request_header(log.events) == H3
    reasons = [e.data["reason"] for e in log.events if e.type == REQUEST_HEADER]
    assert reasons == ["initial", "series", "change", "change", "resume"]


def test_writer_3_4_first_request_with_header_in_log_is_resume_even_if_identical() -> None:
    data, state = header_event(
        HeaderWriterState(), H1, baseline=canonical_header(H1), declared=True, generation=4
    )
    assert data == {"header": H1, "reason": "resume"}
    assert state == HeaderWriterState(anchored=True, generation_at_last_request=4)


def test_writer_3_4_first_request_never_starts_series() -> None:
    data, _ = header_event(HeaderWriterState(), H1, baseline=None, declared=True, generation=3)
    assert data == {"header": H1, "reason": "initial"}


def test_writer_3_4_change_without_declaration_or_replacement_has_no_starts_series() -> None:
    state = HeaderWriterState(anchored=True, generation_at_last_request=2)
    data, _ = header_event(state, H2, baseline=H1, declared=False, generation=2)
    assert data == {"header": H2, "reason": "change"}


def test_writer_3_4_change_after_replacement_starts_series() -> None:
    state = HeaderWriterState(anchored=True, generation_at_last_request=2)
    data, _ = header_event(state, H2, baseline=H1, declared=False, generation=3)
    assert data == {"header": H2, "reason": "change", "startsSeries": True}


def test_writer_3_4_identical_header_declared_new_series_is_series() -> None:
    state = HeaderWriterState(anchored=True, generation_at_last_request=0)
    data, _ = header_event(state, H1, baseline=H1, declared=True, generation=0)
    assert data == {"header": H1, "reason": "series"}


def test_writer_3_4_replacement_before_attachment_does_not_count() -> None:
    log = Session()
    log.user("x")
    log.compact(0, 0)
    first = HeaderWriterState.attach(log.generation)
    data, first = log.attempt(first, H1)
    assert data == {"header": H1, "reason": "initial"}
    data, first = log.attempt(first, H1)
    assert data is None
    later = HeaderWriterState.attach(log.generation)
    data, later = log.attempt(later, H1)
    assert data == {"header": H1, "reason": "resume"}
    data, later = log.attempt(later, H1)
    assert data is None


def test_writer_3_4_anchored_without_baseline_is_change() -> None:
    state = HeaderWriterState(anchored=True, generation_at_last_request=0)
    data, _ = header_event(state, H1, baseline=None, declared=False, generation=0)
    assert data == {"header": H1, "reason": "change"}


def test_writer_3_4_generation_is_captured_even_when_nothing_is_appended() -> None:
    state = HeaderWriterState(anchored=True, generation_at_last_request=0)
    data, state = header_event(state, H1, baseline=H1, declared=False, generation=0)
    assert data is None and state.generation_at_last_request == 0
    data, state = header_event(state, H1, baseline=H1, declared=False, generation=1)
    assert data == {"header": H1, "reason": "series"}
    data, state = header_event(state, H1, baseline=H1, declared=False, generation=1)
    assert data is None


def test_writer_3_4_logs_the_canonical_header_and_compares_canonically() -> None:
    noisy = {"config": C, "system": "be brief", "tools": [T], "adapterDefaults": {}, "x": 1}
    data, state = header_event(
        HeaderWriterState(), noisy, baseline=None, declared=False, generation=0
    )
    assert data is not None and data["header"] == H1
    assert list(data["header"]) == ["config", "system", "tools"]
    baseline = {**H1, "tools": [T], "system": "be brief", "adapterDefaults": {"maxTokens": False}}
    data, _ = header_event(state, noisy, baseline=baseline, declared=False, generation=0)
    assert data is None


def test_writer_3_4_result_is_frozen_and_inputs_untouched() -> None:
    header = copy.deepcopy(H1)
    data, _ = header_event(HeaderWriterState(), header, baseline=None, declared=False, generation=0)
    assert isinstance(data, FrozenObject)
    assert header == H1


def test_writer_3_4_header_without_config_is_a_shape_error() -> None:
    with pytest.raises(RequestHeaderShapeError):
        header_event(
            HeaderWriterState(), {"system": "s"}, baseline=None, declared=False, generation=0
        )


# -- properties P22, P23, P24 ------------------------------------------------------------------

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53) + 1, 2**53 - 1),
    st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f != 0 or str(f) == "0.0"),
    st.text(max_size=4),
)
json_values = st.recursive(
    json_scalars,
    lambda kids: (
        st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=3), kids, max_size=3)
    ),
    max_leaves=8,
)
tool_schemas = st.builds(
    lambda name, desc, params: {"name": name, "description": desc, "parameters": params},
    st.text(max_size=4),
    st.text(max_size=4),
    st.dictionaries(
        st.sampled_from(["type", "maximum", "1", "0", "items"]), json_values, max_size=3
    ),
)
configs = st.fixed_dictionaries(
    {"provider": st.sampled_from(["p", "q"]), "model": st.sampled_from(["m", "n"])},
    optional={
        "reasoningEffort": st.sampled_from(["low", "high"]),
        "temperature": st.sampled_from([0, 0.5, 1, 1.0]),
        "maxTokens": st.sampled_from([100, 200.0]),
        "stop": st.lists(st.sampled_from(["a", "b", "\n"]), max_size=2),
        "topP": json_values,
    },
)
adapter_defaults = st.one_of(
    st.none(),
    st.dictionaries(
        st.sampled_from(["reasoningEffort", "maxTokens", "temperature"]),
        st.one_of(st.booleans(), json_scalars),
        max_size=3,
    ),
)
headers = st.fixed_dictionaries(
    {},
    optional={
        "config": configs,
        "adapterDefaults": adapter_defaults,
        "system": st.text(max_size=4),
        "tools": st.lists(tool_schemas, max_size=3),
        "extra": json_values,
    },
)
canonical_headers = headers.filter(lambda h: "config" in h).map(canonical_header)


@given(headers)
def test_p22_canonicalization_is_idempotent_and_only_removes(h: dict[str, Any]) -> None:
    once = canonical_header(h)
    note(f"header: {h!r}\ncanonical: {once!r}")
    assert canonical_header(once) == once, "canonical(canonical(h)) != canonical(h)"
    assert set(once) <= set(h), "canonicalization added a key"
    for key in once:
        assert json_equal(once[key], h[key]), f"canonicalization changed the value of {key}"
    defaults = h.get("adapterDefaults")
    kept = {
        "config": "config" in h,
        "adapterDefaults": isinstance(defaults, dict)
        and True in (defaults.get("reasoningEffort"), defaults.get("maxTokens")),
        "system": bool(h.get("system")),
        "tools": bool(h.get("tools")),
    }
    assert list(once) == [k for k, keep in kept.items() if keep], "§3.1 kept the wrong keys"


@pytest.mark.slow
@given(canonical_headers, canonical_headers)
def test_p23_equality_is_reflexive_and_symmetric(a: Any, b: Any) -> None:
    note(f"a: {a!r}\nb: {b!r}")
    assert headers_equal(a, a)
    assert headers_equal(a, thaw(a)), "a plain copy is not equal to its frozen original"
    assert headers_equal(a, b) == headers_equal(b, a), "header equality is not symmetric"


@given(headers.filter(lambda h: "config" in h))
def test_p23_empty_pieces_do_not_matter(h: dict[str, Any]) -> None:
    padded = {**h}
    for key, empty in (("system", ""), ("tools", []), ("adapterDefaults", {})):
        padded.setdefault(key, empty)
    assert headers_equal(canonical_header(h), canonical_header(padded))


def _perturbations(h: Any) -> list[tuple[str, dict[str, Any]]]:
    """One-field changes of a canonical header, each of which must break equality."""
    plain = thaw(h)
    config = plain["config"]
    out: list[tuple[str, dict[str, Any]]] = []
    for field, value in (
        ("provider", "other"),
        ("model", "other"),
        ("reasoningEffort", "medium"),
        ("temperature", 0.25),
        ("maxTokens", 7),
        ("stop", ["zz"]),
    ):
        out.append((f"config.{field} changed", {**plain, "config": {**config, field: value}}))
        if field in config:
            dropped = {k: v for k, v in config.items() if k != field}
            out.append((f"config.{field} removed", {**plain, "config": dropped}))
    for marker in ("reasoningEffort", "maxTokens"):
        defaults = dict(plain.get("adapterDefaults") or {})
        if defaults.get(marker) is True:
            defaults.pop(marker)
        else:
            defaults[marker] = True
        out.append((f"marker {marker} flipped", {**plain, "adapterDefaults": defaults}))
    out.append(("system changed", {**plain, "system": plain.get("system", "") + "!"}))
    tools = plain.get("tools", [])
    out.append(("tool added", {**plain, "tools": [*tools, T]}))
    for i, tool in enumerate(tools):
        renamed = {**tool, "name": tool["name"] + "x"}
        out.append(
            (f"tool {i} renamed", {**plain, "tools": [*tools[:i], renamed, *tools[i + 1 :]]})
        )
        reordered = dict(reversed(tool.items()))
        out.append(
            (
                f"tool {i} members reversed",
                {**plain, "tools": [*tools[:i], reordered, *tools[i + 1 :]]},
            )
        )
        for j in range(i + 1, len(tools)):
            if not ordered_json_equal(tools[i], tools[j]):
                swapped = list(tools)
                swapped[i], swapped[j] = swapped[j], swapped[i]
                out.append((f"tools {i} and {j} swapped", {**plain, "tools": swapped}))
    return out


@given(canonical_headers)
def test_p23_perturbing_any_field_breaks_equality(h: Any) -> None:
    for what, changed in _perturbations(h):
        changed_canonical = canonical_header(changed)
        note(f"{what}: {changed_canonical!r}")
        assert not headers_equal(h, changed_canonical), f"{what} went unnoticed"
        assert not headers_equal(changed_canonical, h), f"{what} went unnoticed (swapped sides)"


@st.composite
def header_logs(draw: st.DrawFn) -> list[Event]:
    events: list[Event] = []
    for seq in range(draw(st.integers(0, 8))):
        if draw(st.booleans()):
            h = draw(headers.filter(lambda h: "config" in h))
            events.append(header_event_at(seq, h, draw(st.sampled_from(["initial", "change"]))))
        else:
            events.append(noise(seq))
    return events


@pytest.mark.slow
@given(header_logs())
def test_p24_fold_composes_at_every_split(log: list[Event]) -> None:
    whole = fold_request_header(log)
    note("log:\n" + "\n".join(repr(e) for e in log))
    snapshots = [e for e in log if e.type == REQUEST_HEADER]
    expected = canonical_header(snapshots[-1].data["header"]) if snapshots else None
    assert whole == expected, "the fold is not the canonical last snapshot"
    for k in range(len(log) + 1):
        resumed = fold_request_header(log[k:], start=fold_request_header(log[:k]))
        assert resumed == whole, f"fold(L[{k}:], start=fold(L[:{k}])) != fold(L)"
