"""Ranged `sourceEventSeqs` in stored JSONL records (docs/format/persistence.md §2.5, Decision 13).

DSH's v0 writers from 0.1.2 on spell a strictly increasing citation list with runs of three
or more as `[first, last]`. Every reader of stored JSONL records expands them, on the typed
path and the exact one alike; in memory the list is always expanded; the default writer
keeps the plain spelling, and `ranged_sources=True` writes DSH's.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from kernel import expand_storage_records, load_jsonl, scan_jsonl, write_jsonl
from kernel.errors import CorruptLog, KernelError, ProvenanceError
from kernel.storage.jsonl import _scan_plain, encode_records, loaded_result
from kernel.storage.load import TYPED
from kernel.storage.typed.lines import plan_events
from kernel.storage.zstd import encode_zstd_frame, load_jsonl_zstd, write_jsonl_zstd
from kernel.store import JsonlStore, repair_file
from kernel.values.events import DEFAULT_KNOWN_TYPES
from kernel.values.json import thaw
from kernel.wire.codec import event_to_wire, expand_ranges, ranged_spelling
from properties import strategies as gen
from properties.laws import as_events

HEADER = {"version": 0, "id": "s", "createdAt": 1, "delegationDepth": 0}


def _events_of(loaded: Any) -> list[Any]:
    return [thaw(event_to_wire(e)) for e in loaded.events]


def _exact(data: bytes) -> Any:
    scan = _scan_plain(data)
    assert scan is not None
    return loaded_result(scan, session_id=None, known_types=DEFAULT_KNOWN_TYPES)


def _typed(data: bytes) -> Any:
    scan = _scan_plain(data, typed=True)
    assert scan.kind == TYPED
    return plan_events(scan.header, scan.records, session_id=None, known_types=DEFAULT_KNOWN_TYPES)


# -- the spelling ---------------------------------------------------------------------------------


@given(st.lists(st.integers(0, 60), max_size=30).map(lambda xs: sorted(set(xs))))
def test_the_ranged_spelling_expands_back_to_the_list(seqs: list[int]) -> None:
    spelled = ranged_spelling(seqs)
    assert expand_ranges(spelled, 61) == seqs
    assert all(type(x) is int or x[1] - x[0] >= 2 for x in spelled)  # runs of three or more


def test_a_list_that_is_not_strictly_increasing_is_written_verbatim() -> None:
    assert ranged_spelling([5, 6, 7, 7]) == [5, 6, 7, 7]
    assert ranged_spelling([9, 5, 6, 7]) == [9, 5, 6, 7]


# -- every reader reads both spellings alike --------------------------------------------------


@pytest.mark.slow
@given(gen.loop_logs(rich=True, max_actions=5), st.booleans())
def test_a_ranged_log_loads_equal_to_its_plain_twin(log: Any, pack: bool) -> None:
    events = as_events(log)
    plain = write_jsonl(HEADER, events, pack_chunks=pack)
    ranged = write_jsonl(HEADER, events, pack_chunks=pack, ranged_sources=True)
    expected = _events_of(load_jsonl(plain, now=0))
    assert _events_of(load_jsonl(ranged, now=0)) == expected
    assert _events_of(_exact(ranged)) == expected
    typed = _typed(ranged)
    if typed is not None:  # the typed path may leave a log to the exact one, never differ
        assert [thaw(event_to_wire(e)) for e in typed[1]] == expected
    assert [thaw(event_to_wire(e)) for e in scan_jsonl(ranged).events] == [
        thaw(event_to_wire(e)) for e in scan_jsonl(plain).events
    ]
    framed = write_jsonl_zstd(HEADER, events, pack_chunks=pack, ranged_sources=True)
    assert _events_of(load_jsonl_zstd(framed, now=0)) == expected


@given(gen.loop_logs(rich=True, max_actions=5))
def test_writing_a_ranged_log_read_back_is_byte_stable(log: Any) -> None:
    events = as_events(log)
    ranged = write_jsonl(HEADER, events, ranged_sources=True)
    loaded = load_jsonl(ranged, now=0)
    stored = loaded.events[: len(loaded.events) - len(loaded.closers)]
    assert write_jsonl(HEADER, stored, ranged_sources=True) == ranged
    assert write_jsonl(HEADER, stored) == write_jsonl(HEADER, events)  # the default: plain


def test_a_store_loads_and_reads_a_ranged_file(tmp_path: Any) -> None:
    citing = _citing_log()
    store = JsonlStore(tmp_path / "root")
    store.create(HEADER)
    store.append("s", list(citing))
    path = store.path_of("s")
    plain = store.load("s", now=0).events
    path.write_bytes(write_jsonl(HEADER, citing, ranged_sources=True))
    assert b"[[" in path.read_bytes()
    fresh = JsonlStore(tmp_path / "root")
    assert fresh.load("s", now=0).events == plain
    assert fresh.read_from("s", 0) == tuple(plain)  # the repair's closers are stored now


@pytest.mark.slow
@given(gen.loop_logs(rich=True, max_actions=5))
def test_writing_a_ranged_zstd_log_read_back_is_byte_stable(log: Any) -> None:
    events = as_events(log)
    ranged = write_jsonl_zstd(HEADER, events, ranged_sources=True)
    loaded = load_jsonl_zstd(ranged, now=0)
    stored = loaded.events[: len(loaded.events) - len(loaded.closers)]
    assert write_jsonl_zstd(HEADER, stored, ranged_sources=True) == ranged
    plain = write_jsonl_zstd(HEADER, events)  # the default: plain, as it always was
    assert write_jsonl_zstd(HEADER, stored) == plain
    assert plain == encode_zstd_frame(write_jsonl(HEADER, ())) + (
        encode_zstd_frame(encode_records(events)) if events else b""
    )


def test_both_writers_spell_a_run_of_citations_as_a_range() -> None:
    citing = _citing_log()
    for ranged in (False, True):
        plain_text = write_jsonl(HEADER, citing, ranged_sources=ranged)
        framed = _plaintext(write_jsonl_zstd(HEADER, citing, ranged_sources=ranged))
        assert framed == plain_text
        assert (b'"sourceEventSeqs":[[0,4]]' in plain_text) is ranged


def _plaintext(data: bytes) -> bytes:
    """The records of a Zstandard-framed log, every frame decompressed."""
    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
    return bytes(reader.read())


def _store_bytes(store: JsonlStore) -> bytes:
    data = store.path_of("s").read_bytes()
    return _plaintext(data) if store.zstd else data


@pytest.mark.parametrize("zstd", [False, True], ids=["plain", "zstd"])
def test_a_ranged_store_appends_loads_and_repairs_as_a_plain_one(tmp_path: Any, zstd: bool) -> None:
    citing = _citing_log()  # an open turn whose messages cite runs of earlier events
    batches = (citing[:3], citing[3:])
    stores = {}
    for ranged in (False, True):
        store = JsonlStore(tmp_path / f"ranged-{ranged}", zstd=zstd, ranged_sources=ranged)
        store.create(HEADER)
        for batch in batches:
            store.append("s", list(batch))
        stores[ranged] = store
    plain, ranged_store = stores[False], stores[True]
    assert b"[[" not in _store_bytes(plain) and b"[[" in _store_bytes(ranged_store)
    assert ranged_store.read_from("s", 0) == plain.read_from("s", 0) == citing

    # written ranged, read back, written ranged again: the same bytes
    again = JsonlStore(tmp_path / "again", zstd=zstd, ranged_sources=True)
    again.create(HEADER)
    for batch in batches:
        again.append("s", list(ranged_store.read_from("s", batch[0].seq)[: len(batch)]))
    assert again.path_of("s").read_bytes() == ranged_store.path_of("s").read_bytes()

    if zstd:  # a torn last frame: the repair writes its recovered events back
        for store in stores.values():
            path = store.path_of("s")
            path.write_bytes(path.read_bytes()[:-4])  # the checksum is gone
    repaired = {ranged: store.load("s", now=9) for ranged, store in stores.items()}
    assert repaired[True].events == repaired[False].events
    assert repaired[True].repair.committed and repaired[True].repair.closers
    assert len(repaired[True].repair.recovered) == (len(batches[1]) if zstd else 0)
    ranged_text = _store_bytes(ranged_store)
    assert ranged_text.count(b"[[") == write_jsonl(HEADER, citing, ranged_sources=True).count(b"[[")
    assert b"[[" not in _store_bytes(plain)
    assert not ranged_store.load("s", now=9).repair.needed


def test_repair_file_writes_the_recovered_events_of_a_torn_frame_ranged(tmp_path: Any) -> None:
    citing = _citing_log()
    data = write_jsonl_zstd(HEADER, citing[:3]) + encode_zstd_frame(encode_records(citing[3:]))
    path = tmp_path / "session.jsonl.zstd"
    path.write_bytes(data[:-4])  # the last frame torn: its records are recovered
    report = repair_file(path, now=9, ranged_sources=True)
    assert report.committed and report.recovered == citing[3:]
    assert b'"sourceEventSeqs":[[0,4]]' in _plaintext(path.read_bytes())
    assert (
        load_jsonl_zstd(path.read_bytes(), now=9).events
        == load_jsonl_zstd(write_jsonl_zstd(HEADER, (*citing, *report.closers)), now=9).events
    )
    with pytest.raises(KernelError, match="ranged_sources must be True or False"):
        repair_file(path, now=9, ranged_sources="yes")  # type: ignore[arg-type]
    with pytest.raises(KernelError, match="ranged_sources must be True or False"):
        JsonlStore(tmp_path / "root", ranged_sources=1)  # type: ignore[arg-type]


def test_expand_storage_records_expands_ranges_and_names_a_malformed_one() -> None:
    record = {"type": "user/message", "seq": 9, "time": 0, "data": {}, "sourceEventSeqs": [[1, 3]]}
    (expanded,) = expand_storage_records([record])
    assert expanded["sourceEventSeqs"] == [1, 2, 3] and record["sourceEventSeqs"] == [[1, 3]]
    with pytest.raises(ProvenanceError, match=r"runs backwards \(R7c\)"):
        expand_storage_records([{**record, "sourceEventSeqs": [[3, 1]]}])


# -- malformed ranges are damage named R7c, placed by §3.2 ------------------------------------

_TURN = b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}\n'
_STEP = b'{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}\n'
_END = b'{"type":"turn/end","seq":3,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}\n'


def _citing(sources: str) -> bytes:
    return (
        '{"type":"user/message","seq":2,"time":1,"data":{"id":"u2","role":"user","source":'
        '{"kind":"user"},"content":[]},"sourceEventSeqs":' + sources + ',"surfaceOp":"append"}\n'
    ).encode()


@pytest.mark.parametrize(
    ("sources", "why"),
    [
        ("[[1,0]]", "runs backwards"),
        ("[[0,1,1]]", "is not a [start, end] range"),
        ("[[0]]", "is not a [start, end] range"),
        ("[1,[0,1]]", "strictly increasing"),
        ("[[0,1],[1,1]]", "strictly increasing"),
        ("[[0,5]]", "more citations than the event's seq"),
        ("[[0.5,1]]", "two non-negative safe ints"),
        ("[[[0],1]]", "two non-negative safe ints"),
        ("[[-1,1]]", "two non-negative safe ints"),
        ('[[0,"1"]]', "two non-negative safe ints"),
    ],
)
def test_a_malformed_range_is_damage_on_both_paths(sources: str, why: str) -> None:
    head = write_jsonl(HEADER, ())
    open_turn = head + _TURN + _STEP + _citing(sources)
    for load in (lambda d: load_jsonl(d, now=0), _exact):
        torn = load(open_turn)
        assert torn.torn and why in torn.torn_reason and "(R7c)" in torn.torn_reason
        with pytest.raises(CorruptLog, match=r"\(R7c\).*turn/end follows"):
            load(open_turn + _END)


def test_a_cut_inside_a_range_is_a_torn_tail() -> None:
    data = write_jsonl(HEADER, ()) + _TURN + _STEP + _citing("[[0,1]]")
    at = data.rindex(b"[[0,1]]") + 3
    loaded = load_jsonl(data[:at], now=0)
    assert loaded.torn and loaded.committed_bytes == len(data) - len(_citing("[[0,1]]"))


def _citing_log() -> tuple[Any, ...]:
    from kernel import APPEND, SessionLog

    log = SessionLog.empty().append("turn/start", {"turn": 1}, time=1)
    log = log.append("step/start", {"turn": 1, "step": 1}, time=1)
    for i in range(5):
        log = log.append(
            "user/message",
            {"id": f"u{i}", "role": "user", "source": {"kind": "user"}, "content": []},
            time=1,
            surface_op=APPEND,
            source_event_seqs=list(range(i + 2)),
        )
    return tuple(log.events)


def test_the_command_reads_a_ranged_log_as_its_plain_twin(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from kernel.cli import main

    citing = _citing_log()
    docs = []
    for name, ranged in (("plain.jsonl", False), ("ranged.jsonl", True)):
        path = tmp_path / name
        path.write_bytes(write_jsonl(HEADER, citing, ranged_sources=ranged))
        assert (b"[[" in path.read_bytes()) is ranged
        assert main(["inspect", "--json", str(path)]) == 0
        doc = json.loads(capsys.readouterr().out)
        del doc["source"], doc["tail"]  # the path, and byte offsets of a shorter spelling
        docs.append(doc)
        assert main(["verify", str(path)]) == 0
        capsys.readouterr()
    assert docs[0] == docs[1]


def test_a_ranged_log_moved_into_sqlite_loads_as_its_plain_twin(tmp_path: Any) -> None:
    from kernel.store import SqliteStore

    citing = _citing_log()
    loaded = load_jsonl(write_jsonl(HEADER, citing, ranged_sources=True), now=0)
    store = SqliteStore(tmp_path / "s.db")
    store.create(HEADER)
    store.append("s", loaded.events)
    plain = load_jsonl(write_jsonl(HEADER, citing), now=0)
    assert store.load("s", now=0).events == plain.events
