"""Shrunk counterexamples found by the property catalog, kept as example tests.

Each test names the law that found it; it fails until the kernel is fixed.
"""

from pathlib import Path

from kernel.log import SessionLog
from kernel.storage.jsonl import load_jsonl, write_jsonl
from kernel.store.sqlite import SqliteStore
from kernel.values.json import json_equal
from kernel.wire.jsontext import encode_json_bytes, parse_json


def test_p8_integral_double_beyond_safe_range_survives_the_kernel_text_round_trip() -> None:
    # Found by law_lossless_json_accepted (P8). 3.946668324292787e16 is a finite double,
    # so it is lossless JSON; JSON.stringify spells it "39466683242927870", and every
    # conforming reader (numbers are doubles) reads that back as the same double. Read
    # as a Python int it becomes 39466683242927870 != 39466683242927872.
    value = 3.946668324292787e16
    assert encode_json_bytes(value) == b"39466683242927870"
    assert json_equal(parse_json(encode_json_bytes(value)), value)


def test_p36_a_stored_double_beyond_the_safe_range_loads_unchanged() -> None:
    # The same defect seen through storage (P36 round trip): 2.0**60 is written as
    # 1152921504606847000 and loads as that (unsafe) int, not as 2.0**60.
    log = SessionLog.empty().append("todo/write", {"n": 2.0**60}, time=0)
    data = write_jsonl({"version": 0, "id": "s", "createdAt": 0}, log.events)
    loaded = load_jsonl(data, now=0)
    assert json_equal(loaded.events[0].data, {"n": 2.0**60})


def test_p8_a_top_level_double_with_sixteen_digits_parses() -> None:
    # Found by law_lossless_json_accepted (P8) with value 3.4028236692090828e+38: parse_json
    # of a top-level number spelled with 16+ digits raised TypeError ('float' object is not
    # iterable) from the unsafe-integer pass, which only walked containers.
    assert parse_json(b"1234567890123456.5") == 1234567890123456.5
    assert parse_json(b"3.4028236692090828e+38") == 3.4028236692090828e38


def test_p43b_a_non_object_record_with_sixteen_digits_is_a_torn_tail() -> None:
    # The same defect through the JSONL scanner: a record that is a bare number is an
    # unparsable record (docs/format/persistence.md §3.2), never a TypeError.
    data = (
        b'{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}\n'
        b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}\n'
        b"1234567890123456.5\n"
    )
    loaded = load_jsonl(data, now=0)
    assert loaded.torn
    assert [e.type for e in loaded.events] == ["turn/start", "turn/end"]


def test_p36_sqlite_round_trips_a_top_level_double_with_sixteen_digits(tmp_path: Path) -> None:
    # The same defect through the SQLite `data` column (docs/format/persistence.md §7.3).
    log = SessionLog.empty().append("todo/write", 1234567890123456.5, time=0)
    store = SqliteStore(tmp_path / "s.db")
    try:
        store.create({"version": 0, "id": "a", "createdAt": 0})
        store.append("a", log.events)
        assert store.load("a", now=0).events[0].data == 1234567890123456.5
    finally:
        store.close()


def test_p43a_a_line_with_an_integral_double_beyond_the_safe_range_parses_back() -> None:
    # Found by law_byte_exact_writer (P43a) in the deep profile. The writer rightly spells
    # 3.840495615590295e16 "38404956155902950", as JSON.stringify does; the law read the
    # line back with Python's json, whose int 38404956155902950 is not that double
    # (38404956155902952), where a JavaScript reader gets the double itself.
    from properties import laws

    event = {"type": "session/title", "seq": 0, "time": 1, "data": 3.840495615590295e16}
    laws.law_byte_exact_writer({"version": 0, "id": "sess-1", "createdAt": 0}, [event], False)
