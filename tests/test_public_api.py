"""The public API contract of ARCHITECTURE.md: names importable from `kernel`, record fields."""

from __future__ import annotations

import pickle

import attrs
import msgspec
import pytest

import kernel

CONTRACT_NAMES = """
Event APPEND Replace SessionHeader event_from_json event_to_json header_from_json header_to_json
SessionLog fold_surface SurfaceFold Replacement project_message derive_messages canonical_header
headers_equal fold_request_header header_event tool_pairing_cuts Cut check_invariants Violation
interrupted_turn_closers TOOL_NOT_STARTED TOOL_OUTCOME_UNKNOWN pack_chunk_rows
expand_storage_records scan_jsonl Scan load_jsonl Loaded write_jsonl KernelError
""".split()

RECORD_FIELDS = {
    "Event": ("type", "seq", "time", "data", "surface_op", "source_event_seqs", "ignorable"),
    "SurfaceFold": ("nodes", "replacements"),
    "Replacement": ("seq", "start", "end", "shadowed_seqs"),
    "Cut": ("seq", "before", "after"),
    "Violation": ("seq", "rule", "message"),
    "Scan": ("header", "events", "committed_bytes", "total_bytes"),
    "Loaded": ("header", "events", "closers", "committed_bytes", "total_bytes", "torn"),
}


@pytest.mark.parametrize("name", CONTRACT_NAMES)
def test_contract_name_is_exported(name: str) -> None:
    assert name in kernel.__all__
    assert getattr(kernel, name) is not None


@pytest.mark.parametrize(("name", "fields"), RECORD_FIELDS.items())
def test_contract_records_are_frozen_with_their_fields(name: str, fields: tuple[str, ...]) -> None:
    # Event is a msgspec Struct (docs/rfc/implemented/architecture/2026-12-01-typed-load-path.md);
    # the small records are attrs classes.
    cls = getattr(kernel, name)
    if name == "Event":
        assert issubclass(cls, msgspec.Struct) and cls.__struct_config__.frozen
        names = [f.name for f in msgspec.structs.fields(cls)]
    else:
        assert attrs.has(cls)
        names = [f.name for f in attrs.fields(cls)]
    assert names[: len(fields)] == list(fields)
    assert cls.__setattr__ is not object.__setattr__, f"{name} must be frozen"


def test_event_keeps_its_value_contract() -> None:
    # Equality, hashing, pickling and immutability as the attrs Event had them: the wire
    # order is not part of equality, plain data is frozen, citations become a tuple.
    event = kernel.Event("turn/start", 0, 5, {"turn": 1}, source_event_seqs=[1])
    twin = kernel.Event("turn/start", 0, 5, kernel.freeze({"turn": 1}), None, (1,), False, ("x",))
    assert event == twin and hash(event) == hash(twin) and event.source_event_seqs == (1,)
    assert type(event.data) is kernel.FrozenObject
    assert pickle.loads(pickle.dumps(event)) == event
    assert event != msgspec.structs.replace(event, time=6)
    assert msgspec.structs.replace(event, data={"turn": 2}).data == {"turn": 2}
    with pytest.raises(AttributeError):
        event.seq = 1  # type: ignore[misc]
    with pytest.raises(kernel.NotLosslessJson):
        kernel.Event("x", 0, 0, {"bad": float("nan")})
    assert "wire_order" not in repr(event)


def test_every_error_is_a_value_error() -> None:
    for name in kernel.__all__:
        value = getattr(kernel, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, kernel.KernelError) and issubclass(value, ValueError)


def test_session_log_surface_of_the_contract() -> None:
    log = kernel.SessionLog.seed([], now=1).append("turn/start", {"turn": 1}, time=2)
    assert [e.seq for e in log.events] == [0, 1]
    assert tuple(log.surface.nodes) == () and tuple(log.messages) == ()
    assert log.request_header is None
    assert kernel.SessionLog.empty().events == []
