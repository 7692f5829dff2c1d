"""The typed load path gives exactly what the exact pipeline gives, or leaves the answer to it.

`load_jsonl` and `load_jsonl_zstd` try `kernel.storage.typed.lines` first. Whatever bytes they
are given, the result must be the one the exact pipeline (`plan_load` over
`scan_records`) produces: the same events (payloads, wire member order), closers
and torn-tail fields, or the same error class and message. These tests compare the
two on clean, damaged, respelled and rule-breaking logs, and check that the typed
path really answers for the logs a writer produces (else the comparison would be
vacuous).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from kernel.storage.jsonl import _scan_plain, encode_records, load_jsonl, loaded_result, write_jsonl
from kernel.storage.load import TYPED
from kernel.storage.typed.lines import plan_events
from kernel.storage.zstd import encode_zstd_frame, load_jsonl_zstd, scan_frames, write_jsonl_zstd
from kernel.values.events import DEFAULT_KNOWN_TYPES, wire_order_of
from kernel.values.json import thaw
from kernel.wire.codec import event_to_wire
from kernel.wire.jsontext import encode_json_bytes, parse_json
from properties import strategies as gen
from properties.laws import as_events
from properties.profiles import share_of_examples
from properties.strategies import MUTATIONS

HEADER = {"version": 0, "id": "sess-1", "createdAt": 1, "delegationDepth": 0}


def _outcome(load: Callable[[], Any]) -> tuple[Any, ...]:
    try:
        loaded = load()
    except Exception as exc:  # the class and words must match too
        return ("error", type(exc).__name__, str(exc))
    events = [
        (repr(thaw(event_to_wire(e))), repr(thaw(e.data)), wire_order_of(e)) for e in loaded.events
    ]
    closers = [e.seq for e in loaded.closers]
    tail = (loaded.committed_bytes, loaded.total_bytes, loaded.torn, loaded.dropped_records)
    frame = loaded.torn_frame
    torn_frame = None if frame is None else (frame.truncate_to, [e.seq for e in frame.recovered])
    return ("ok", events, closers, tail, loaded.torn_reason, torn_frame, loaded.header)


def _exact_plain(data: bytes) -> Any:
    scan = _scan_plain(data)
    assert scan is not None
    return loaded_result(scan, session_id=None, known_types=DEFAULT_KNOWN_TYPES)


def _exact_zstd(data: bytes) -> Any:
    scan = scan_frames(data)
    assert scan is not None
    return loaded_result(scan, session_id=None, known_types=DEFAULT_KNOWN_TYPES)


def _typed_answers(data: bytes) -> bool:
    scan = _scan_plain(data, typed=True)
    if scan.kind != TYPED:
        return False
    planned = plan_events(
        scan.header, scan.records, session_id=None, known_types=DEFAULT_KNOWN_TYPES
    )
    return planned is not None


def _same_plain(data: bytes) -> None:
    typed, exact = _outcome(lambda: load_jsonl(data, now=0)), _outcome(lambda: _exact_plain(data))
    if typed != exact:
        note(data.decode("utf-8", "replace"))
    assert typed == exact


def _turn_end(seq: int) -> dict[str, Any]:
    """The wire `turn/end` that completes turn 1 at `seq`."""
    return {
        "type": "turn/end",
        "seq": seq,
        "time": 3,
        "data": {"turn": 1, "reason": {"kind": "completed"}},
    }


def _lines(wires: list[dict[str, Any]]) -> bytes:
    head = write_jsonl(HEADER, ())
    return head + b"".join(encode_json_bytes(w) + b"\n" for w in wires)


# -- logs as a writer produces them ---------------------------------------------------------------


@pytest.mark.slow
@given(gen.loop_logs(rich=True, max_actions=5, shape="any"), st.booleans())
def test_written_logs_load_by_the_typed_path_with_the_exact_result(log: Any, pack: bool) -> None:
    data = write_jsonl(HEADER, as_events(log), pack_chunks=pack)
    assert _typed_answers(data), "the typed path declined a log the writer produced"
    _same_plain(data)


@given(
    gen.loop_logs(rich=True, max_actions=4, shape="any"),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
)
def test_zstd_logs_and_torn_frames_agree(log: Any, split: int, cut: int) -> None:
    events = as_events(log)
    k = split % (len(events) + 1)
    data = write_jsonl_zstd(HEADER, events[:k])
    rest = encode_records(events[k:])
    if rest:
        data += encode_zstd_frame(rest)
    data = data[: len(data) - cut % 40] if cut % 3 == 0 else data
    typed = _outcome(lambda: load_jsonl_zstd(data, now=0))
    assert typed == _outcome(lambda: _exact_zstd(data))


@pytest.mark.slow
@given(gen.crash_prefixes(rich=True, max_actions=4, shape="any"), st.integers(0, 10**6))
def test_byte_cuts_are_torn_tails_on_the_typed_path(case: tuple[Any, int], cut: int) -> None:
    log, _ = case
    data = write_jsonl(HEADER, as_events(log))
    head_end = data.index(b"\n") + 1
    cut_at = head_end + cut % (len(data) - head_end + 1)
    _same_plain(data[:cut_at])


@given(gen.interleavings())
def test_noise_and_extension_events_agree(case: Any) -> None:
    _same_plain(_lines(list(case.mixed)))


# -- logs that break a rule, or are spelled unusually ---------------------------------------------


@given(gen.mutation_cases(shape="any"))
def test_a_stored_rule_violation_gets_the_exact_error(case: Any) -> None:
    # The candidate breaks one admission rule; stored, it must fail (or tear) exactly as the
    # exact pipeline says, never be accepted by the typed path.
    _same_plain(_lines([*case.prefix, case.mutation.event]))
    if case.valid_next is not None:
        _same_plain(_lines([*case.prefix, case.valid_next]))


@pytest.mark.slow
@pytest.mark.parametrize("label", sorted(MUTATIONS))
@share_of_examples(4, minimum=2)
@given(data=st.data())
def test_the_typed_schema_and_the_rule_functions_agree_on_every_rule(
    label: str, data: st.DataObject
) -> None:
    # The msgspec schema and the hand-written checks state the same shapes twice; one
    # generated breach of each catalogued rule shows they still agree (no derivation).
    case = data.draw(gen.mutation_cases(labels=[label], shape="any"))
    _same_plain(_lines([*case.prefix, case.mutation.event]))
    if case.valid_next is not None:
        _same_plain(_lines([*case.prefix, case.valid_next]))


_RESPELLINGS: dict[str, Callable[[bytes], bytes]] = {
    "float seq": lambda line: line.replace(b',"time":', b'.0,"time":', 1),
    "spaces": lambda line: line.replace(b'":', b'": ').replace(b",", b", "),
    "escaped slash": lambda line: line.replace(b"/", b"\\/", 1),
    "keys reordered": lambda line: encode_json_bytes(dict(reversed(json.loads(line).items()))),
    "duplicate data": lambda line: line[:-1] + b',"data":{"turn":9}}',
    "duplicate seq": lambda line: line[:-1] + b',"seq":0}',
    "trailing space": lambda line: line + b"  \r",
    "deep extra": lambda line: line[:-1] + b',"x":' + b"[" * 1100 + b"]" * 1100 + b"}",
    "lone surrogate": lambda line: line.replace(b'"type":"', b'"type":"\\ud800', 1),
    "big number": lambda line: line.replace(b'"seq":', b'"seq":1' + b"0" * 30 + b"+", 1),
    "unknown type": lambda line: line.replace(b'"type":"', b'"type":"x-', 1),
    "ignorable": lambda line: line[:-1] + b',"ignorable":true}',
    "null data": lambda line: line.replace(b'"data":', b'"data":null,"_":', 1),
    "not an object": lambda line: b"[" + line + b"]",
    "nothing": lambda line: line,
}


@pytest.mark.slow
@pytest.mark.parametrize("respelling", sorted(_RESPELLINGS))
@given(log=gen.loop_logs(rich=True, max_actions=3, shape="any"), pick=st.integers(0, 10**6))
def test_unusual_spellings_agree(respelling: str, log: Any, pick: int) -> None:
    data = write_jsonl(HEADER, as_events(log))
    lines = data.split(b"\n")
    if len(lines) < 3:
        return
    k = 1 + pick % (len(lines) - 2)
    lines[k] = _RESPELLINGS[respelling](lines[k])
    _same_plain(b"\n".join(lines))


@pytest.mark.slow
@given(gen.loop_logs(max_actions=3, shape="any"), st.integers(0, 10**6), st.integers(0, 7))
def test_flipped_bits_agree(log: Any, at: int, bit: int) -> None:
    data = bytearray(write_jsonl(HEADER, as_events(log)))
    head_end = data.index(b"\n") + 1
    if head_end == len(data):
        return
    data[head_end + at % (len(data) - head_end)] ^= 1 << bit
    _same_plain(bytes(data))


def test_a_custom_vocabulary_and_an_identity_mismatch_leave_the_answer_to_the_exact_path() -> None:
    wires = [
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
        {"type": "session/title", "seq": 1, "time": 2, "data": {"title": "t"}},
    ]
    data = _lines(wires)
    with pytest.raises(Exception) as typed:
        load_jsonl(data, now=0, known_types={"turn/start", "turn/end"})
    assert type(typed.value).__name__ == "UnknownEventType"
    with pytest.raises(Exception) as wrong:
        load_jsonl(data, now=0, session_id="other")
    assert type(wrong.value).__name__ == "CorruptLog"


@given(gen.loop_logs(rich=True, max_actions=4, shape="any"), st.booleans())
def test_seeding_loaded_events_equals_seeding_their_wire_form(log: Any, pack: bool) -> None:
    # Loaded events are kept as they are by seed and restore (their payloads checked and
    # known lossless when loaded); the result must be what admitting their wire form gives.
    from kernel.log import SessionLog
    from kernel.wire.codec import event_to_json

    loaded = load_jsonl(write_jsonl(HEADER, as_events(log), pack_chunks=pack), now=0)
    for build in (
        lambda events: SessionLog.seed(events, now=7),
        lambda events: SessionLog.restore(events),
    ):
        kept = build(loaded.events)
        rebuilt = build([event_to_json(e) for e in loaded.events])
        assert tuple(kept.events) == tuple(rebuilt.events)
        assert [wire_order_of(e) for e in kept.events] == [wire_order_of(e) for e in rebuilt.events]
        assert tuple(kept.surface.nodes) == tuple(rebuilt.surface.nodes)
        assert [thaw(m) for m in kept.messages] == [thaw(m) for m in rebuilt.messages]
        assert kept.request_header == rebuilt.request_header


@given(gen.loop_logs(rich=True, max_actions=5, shape="any"), st.booleans())
def test_restoring_a_loads_events_builds_the_log_restoring_any_copy_builds(
    log: Any, pack: bool
) -> None:
    # `restore` takes a load's own events (`AdmittedEvents`) without admitting each again;
    # every field of the log must be what admitting a copy of them gives, the surface's
    # slots and seq index included (later appends read them), and so must the next append.
    from kernel.folds.surface import AdmittedEvents
    from kernel.log import SessionLog
    from kernel.values.events import APPEND

    loaded = load_jsonl(write_jsonl(HEADER, as_events(log), pack_chunks=pack), now=0)
    assert type(loaded.events) is AdmittedEvents  # else this compares the general path twice
    kept = SessionLog.restore(
        loaded.events, header=loaded.header, known_types={*DEFAULT_KNOWN_TYPES, "x/y"}
    )
    copied = SessionLog.restore(
        tuple(loaded.events), header=loaded.header, known_types={*DEFAULT_KNOWN_TYPES, "x/y"}
    )
    assert all(a is b for a, b in zip(kept.events, copied.events, strict=True))
    assert kept.surface == copied.surface
    assert (kept.request_header, kept.header) == (copied.request_header, copied.header)
    assert (kept.first_live_seq, kept.known_types) == (copied.first_live_seq, copied.known_types)
    message = {"id": "u", "role": "user", "content": [], "source": {"kind": "user"}}
    slots = list(kept.surface.slots)
    after = [
        built.append("user/message", message, time=9, surface_op=APPEND) for built in (kept, copied)
    ]
    assert after[0].surface == after[1].surface
    assert list(kept.surface.slots) == slots  # a restored log is a value: appends leave it
    assert [thaw(m) for m in after[0].messages] == [thaw(m) for m in after[1].messages]


def test_restoring_a_loads_events_raises_what_admitting_them_raises() -> None:
    # The load does not fold the request headers; a header that canonicalizes into a copy
    # holding -0.0 (a spelling no writer makes) fails R1 when restored, through a load's
    # events as through a copy of them.
    from kernel.errors import NotLosslessJson
    from kernel.folds.surface import AdmittedEvents
    from kernel.log import SessionLog

    line = (
        b'{"type":"request/header","seq":0,"time":1,"data":{"header":{"config":'
        b'{"provider":"p","model":"m","temperature":-0.0},"system":"","tools":[]},'
        b'"reason":"initial"}}\n'
    )
    loaded = load_jsonl(write_jsonl(HEADER, ()) + line, now=0)
    assert type(loaded.events) is AdmittedEvents
    errors = []
    for events in (loaded.events, tuple(loaded.events)):
        with pytest.raises(NotLosslessJson) as raised:
            SessionLog.restore(events)
        errors.append((str(raised.value), raised.value.seq, raised.value.index))
    assert errors[0] == errors[1]


_NUMBER_TEXTS = st.one_of(
    st.sampled_from(["-0.0", "-0e3", "-0E-2", "1e400", "-1e-400", "1" * 400, "-2e-323"]),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers(-(10**30), 10**30).map(str),
    st.from_regex(r"-?(0|[1-9][0-9]{0,3})(\.[0-9]{1,4})?([eE][-+]?[0-9]{1,4})?", fullmatch=True),
)


@given(st.lists(_NUMBER_TEXTS, max_size=6), gen.json_strings(max_size=12))
def test_a_line_called_lossless_holds_only_lossless_numbers(numbers: list[str], text: str) -> None:
    # Seed shares a loaded payload without walking it when its line has no spelling of a
    # number that parses outside lossless JSON (kernel.storage.typed.lines._no_lossy_number).
    from kernel.errors import NotLosslessJson
    from kernel.storage.typed.lines import _no_lossy_number
    from kernel.values.json import admit_json
    from kernel.wire.jsontext import parse_json

    line = b'{"data":[' + b",".join(n.encode() for n in numbers) + b"],"
    line += b'"text":' + encode_json_bytes(text) + b"}"
    if _no_lossy_number(line):
        try:
            admit_json(parse_json(line))
        except NotLosslessJson as exc:
            raise AssertionError(f"{line!r} was called lossless: {exc}") from None


@pytest.mark.parametrize("text", ["rewrite-166", "page1234", "see e100", "the1000"])
def test_words_that_end_in_e_before_digits_are_not_taken_for_exponents(text: str) -> None:
    # Regression: ids such as `rewrite-166` read as an exponent of three digits, so
    # every such payload was walked again by seed (a quarter of its time on a log of
    # 10,000 replacements).
    from kernel.storage.typed.lines import _no_lossy_number

    assert _no_lossy_number(b'{"data":{"id":' + encode_json_bytes(text) + b',"n":[1e2,-5]}}')
    assert not _no_lossy_number(b'{"data":{"id":' + encode_json_bytes(text) + b',"n":[1e400]}}')


_PEEK_VALUES = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([1.0, -0.5, 1e300, None, True, "", "call-1", [1], {"a": 1}]),
    gen.json_strings(max_size=6),
)


@given(
    st.lists(
        st.tuples(st.sampled_from(["turn", "step", "callId", "chunk"]), _PEEK_VALUES),
        max_size=6,
    ),
    st.sets(st.sampled_from(["turn", "step", "callId", "text"]), min_size=1),
)
def test_peeked_members_agree_with_the_built_payload(
    pairs: list[tuple[str, Any]], keys: set[str]
) -> None:
    # The invariant tracker reads turn, step and callId of a loaded payload without
    # building it (kernel.values.json.members); whatever a stored line answers must be what
    # the full reader finds, duplicate members (the last one counts) and big integers
    # included; a line it cannot answer for is built instead.
    from kernel.storage.typed.lines import _peek_line

    members = b",".join(encode_json_bytes(k) + b":" + encode_json_bytes(v) for k, v in pairs)
    line = b'{"type":"x","seq":0,"time":0,"data":{' + members + b"}}"
    built = parse_json(line)["data"]
    peeked = _peek_line(line, frozenset(keys))
    if peeked is not None:
        assert {k: peeked.get(k, "absent") for k in keys} == {
            k: built.get(k, "absent") for k in keys
        }
        for key in keys:
            assert type(peeked.get(key)) is type(built.get(key))


@given(
    log=gen.loop_logs(rich=True, max_actions=4, shape="any"),
    pack=st.booleans(),
    first=st.sampled_from([b"", b'"turn":7,', b'"step":5,', b'"callId":"z",']),
    pick=st.integers(0, 10**6),
)
def test_what_a_load_keeps_of_a_stepped_payload_is_what_the_payload_says(
    log: Any, pack: bool, first: bytes, pick: int
) -> None:
    # A stored line of a type that names its turn keeps the turn, step and call id its
    # typed decode read (the invariant tracker reads them instead of the line). They must
    # be what the built payload says, when a member is spelled twice too (the last one
    # counts, as in the full reader).
    from kernel.errors import KernelError
    from kernel.storage.typed.lines import _SteppedLine
    from kernel.values.json import FrozenObject

    lines = write_jsonl(HEADER, as_events(log), pack_chunks=pack).split(b"\n")
    k = 1 + pick % max(1, len(lines) - 2)
    lines[k] = lines[k].replace(b'"data":{', b'"data":{' + first, 1)
    try:
        loaded = load_jsonl(b"\n".join(lines), now=0)
    except KernelError:
        return
    for event in loaded.events:
        data = event.data
        if type(data) is not FrozenObject or not isinstance(data._value, _SteppedLine):
            continue
        kept = data._value
        facts = (kept.turn, kept.step, getattr(kept, "call_id", None))
        built = thaw(data)
        if event.type == "tool/call":
            call = built["callId"]
        elif event.type == "tool/result":
            call = built["message"]["source"]["callId"]
        else:
            call = None
        assert facts == (built["turn"], built.get("step", 0), call), event
        assert data._checked_as in (event.type, None)


def test_the_lines_of_each_turn_keep_that_turn() -> None:
    # Consecutive lines of one turn share the int the first one kept; a line of the next
    # turn keeps its own.
    from kernel.storage.typed.lines import _SteppedLine

    wires: list[dict[str, Any]] = []
    for turn in (1, 2, 300, 301):
        for kind, data in (
            ("turn/start", {"turn": turn}),
            ("step/start", {"turn": turn, "step": 1}),
            ("step/end", {"turn": turn, "step": 1}),
            ("turn/end", {"turn": turn, "reason": {"kind": "completed"}}),
        ):
            wires.append({"type": kind, "seq": len(wires), "time": 1, "data": data})
    loaded = load_jsonl(_lines(wires), now=0)
    kept = [e.data._value for e in loaded.events]
    assert all(isinstance(source, _SteppedLine) for source in kept)
    assert [source.turn for source in kept] == [w["data"]["turn"] for w in wires]
    assert len({id(source.turn) for source in kept[8:12]}) == 1  # turn 300: one int object


def test_invariants_of_a_loaded_log_read_row_members_without_building_them() -> None:
    from kernel.folds.invariants import check_invariants
    from kernel.log import SessionLog

    events = [
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
        {"type": "step/start", "seq": 1, "time": 1, "data": {"turn": 1, "step": 1}},
    ]
    events += [
        {
            "type": "assistant/chunk",
            "seq": 2 + "abc".index(k),
            "time": 2,
            "data": {
                "turn": 1,
                "step": 1,
                "chunk": {"type": "text-delta", "index": 0, "text": "a"},
            },
        }
        for k in "abc"
    ]
    events += [
        {"type": "step/end", "seq": 5, "time": 3, "data": {"turn": 1, "step": 2}},
        _turn_end(6),
    ]
    log = SessionLog.seed(events, now=4)
    loaded = load_jsonl(write_jsonl(HEADER, log.events, pack_chunks=True), now=0)
    lazy = [type(e.data._value) is not dict for e in loaded.events]
    assert sum(lazy) >= 6  # the chunks, the step boundaries, turn/start, the marker
    found = check_invariants(loaded.events)
    assert [(v.seq, v.rule) for v in found] == [(5, "step-end-mismatch")]
    # The tracker built nothing: what was lazy is lazy still.
    assert [type(e.data._value) is not dict for e in loaded.events] == lazy


def test_a_loaded_tool_result_projects_its_message_unread_and_the_same_view_after() -> None:
    import pickle

    from kernel.folds.messages import derive_messages, project_message
    from kernel.log import SessionLog
    from kernel.values.json import FrozenObject

    events = [
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
        {"type": "step/start", "seq": 1, "time": 1, "data": {"turn": 1, "step": 1}},
        {
            "type": "tool/result",
            "seq": 2,
            "time": 2,
            "surfaceOp": "append",
            "data": {
                "turn": 1,
                "step": 1,
                "message": {
                    "id": "r1",
                    "role": "user",
                    "content": [
                        {
                            "type": "tool-result",
                            "toolCallId": "c1",
                            "content": [{"type": "text", "text": "out"}],
                        }
                    ],
                    "source": {"kind": "tool", "callId": "c1"},
                },
            },
        },
        {"type": "step/end", "seq": 3, "time": 3, "data": {"turn": 1, "step": 1}},
        _turn_end(4),
    ]
    log = SessionLog.seed(events, now=3)
    loaded = load_jsonl(write_jsonl(HEADER, log.events), now=0)
    result = loaded.events[2]
    assert type(result.data._value) is not dict
    message = project_message(result)
    assert type(message) is FrozenObject and type(result.data._value) is not dict
    assert message is project_message(result) is result.data["message"]
    assert thaw(message) == events[2]["data"]["message"]  # type: ignore[index]
    assert pickle.loads(pickle.dumps(message)) == message and hash(message) == hash(
        FrozenObject(thaw(message))
    )
    assert [thaw(m) for m in derive_messages(loaded.events)] == [
        thaw(m) for m in derive_messages(log.events)
    ]


def _assistant(seq: int, step: int, content: list[Any]) -> dict[str, Any]:
    return {
        "type": "assistant/message",
        "seq": seq,
        "time": 2,
        "surfaceOp": "append",
        "data": {
            "turn": 1,
            "step": step,
            "message": {
                "id": f"a{seq}",
                "role": "assistant",
                "content": content,
                "source": {"kind": "model", "provider": "p", "model": "m"},
            },
        },
    }


def test_loaded_assistant_messages_project_unread_and_an_empty_one_to_nothing() -> None:
    from kernel.folds.messages import derive_messages
    from kernel.log import SessionLog
    from kernel.values.json import checked_as

    text = [{"type": "text", "text": "hi"}]
    events = [
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
        {"type": "step/start", "seq": 1, "time": 1, "data": {"turn": 1, "step": 1}},
        _assistant(2, 1, []),
        {"type": "step/end", "seq": 3, "time": 3, "data": {"turn": 1, "step": 1}},
        {"type": "step/start", "seq": 4, "time": 3, "data": {"turn": 1, "step": 2}},
        _assistant(5, 2, text),
        {"type": "step/end", "seq": 6, "time": 3, "data": {"turn": 1, "step": 2}},
        _turn_end(7),
    ]
    log = SessionLog.seed(events, now=3)
    loaded = load_jsonl(write_jsonl(HEADER, log.events), now=0)
    empty, full = loaded.events[2], loaded.events[5]
    # Only the message with content is marked as checked; the empty one is left to the rules.
    assert checked_as(empty.data) is None and checked_as(full.data) == "assistant/message"
    messages = derive_messages(loaded.events)
    assert [thaw(m) for m in messages] == [events[5]["data"]["message"]]  # type: ignore[index]
    assert type(full.data._value) is not dict  # handed on unread
    assert messages[0] is full.data["message"]
    assert [thaw(m) for m in messages] == [thaw(m) for m in derive_messages(log.events)]
    assert SessionLog.seed(loaded.events, now=4).events[:8] == log.events[:8]


@pytest.mark.parametrize(
    "reason",
    [
        {"kind": "completed"},
        {"kind": "blocked"},
        {"kind": "max-tokens"},
        {"kind": "interrupted"},
        {"kind": "completed", "extra": 1},
        {"kind": "aborted"},
        {"kind": "error", "error": {"message": "m", "code": "c"}},
        {"kind": ""},
        {"kind": "vendor/thing", "x": [1]},
    ],
)
def test_turn_end_reasons_read_off_their_bytes_agree_with_the_rule(reason: Any) -> None:
    from kernel.admission.payloads import turn_end_reason_ok
    from kernel.storage.typed.schema import CROSS_CHECKS, decode_line

    line = json.dumps(
        {"type": "turn/end", "seq": 3, "time": 1, "data": {"turn": 1, "reason": reason}},
        separators=(",", ":"),
    ).encode()
    assert CROSS_CHECKS["turn/end"](decode_line(line).data) is turn_end_reason_ok(reason)  # type: ignore[union-attr]


def test_the_plan_leaves_the_scanned_list_as_it_was() -> None:
    """The closers join the scan's list for the surface plan only (a torn frame's recovered
    events are read off that list after planning)."""
    from kernel.log import SessionLog

    events = [
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
        {"type": "step/start", "seq": 1, "time": 1, "data": {"turn": 1, "step": 1}},
    ]
    log = SessionLog.seed(events, now=2)
    data = write_jsonl(HEADER, log.events)
    header = json.loads(data.split(b"\n", 1)[0])
    scanned = list(load_jsonl(data, now=0).events[: len(log.events)])
    before = list(scanned)
    planned = plan_events(header, scanned, session_id=None, known_types=DEFAULT_KNOWN_TYPES)
    assert planned is not None
    _, everything, closers = planned
    assert closers and everything == (*before, *closers)
    assert scanned == before
