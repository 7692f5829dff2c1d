"""The JSONL file store (docs/format/persistence.md §1, §2, §6.1, §6.2) and its path encoding
(§2.2)."""

from __future__ import annotations

import os
import random
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import msgspec
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from storelogs import (
    STORE_HEADER,
    T0,
    open_turn_prefix,
    realistic_log,
    seeded_log,
    split_batches,
)

from kernel.errors import (
    CorruptLog,
    InvalidEnvelope,
    LegacyFormat,
    LimitExceeded,
    NotLosslessJson,
    SeqMismatch,
    SessionHeaderError,
    UnknownEventType,
    UnsupportedFormat,
)
from kernel.folds.closers import interrupted_turn_closers
from kernel.storage.jsonl import encode_records, load_jsonl, scan_jsonl, write_jsonl
from kernel.storage.zstd import (
    encode_zstd_frame,
    load_jsonl_zstd,
    scan_jsonl_zstd,
    write_jsonl_zstd,
)
from kernel.store import (
    JsonlStore,
    LiveSessionOpen,
    SessionExists,
    SessionListing,
    SessionNotFound,
    StoreError,
    StoreLayoutError,
    encode_segment,
    inspect_file,
    project_key,
    repair_file,
    session_dir_name,
)
from kernel.values.events import Event, SessionHeader

HEADER = STORE_HEADER
_log = seeded_log
_open_turn_prefix = open_turn_prefix


def _store(tmp_path: Path, zstd: bool, **kwargs: Any) -> JsonlStore:
    return JsonlStore(tmp_path / "root", zstd=zstd, **kwargs)


def _fill(store: JsonlStore, events: list[Event], header: Any = HEADER, seed: int = 0) -> Path:
    store.create(header)
    for batch in split_batches(events, random.Random(seed)):
        store.append(header["id"], batch)
    return store.path_of(header["id"])


def _norm(header: SessionHeader) -> SessionHeader:
    return attrs.evolve(header, delegation_depth=header.delegation_depth or 0)


# -- paths (§2.2) -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cwd", "key"),
    [
        ("/projects/my demo", "--projects-my~0020demo--"),
        ("/a//b\\\\c::d", "--a-b-c-d--"),
        ("C:\\Users\\me", "--C-Users-me--"),
        ("/", "--root--"),
        ("", "--root--"),
        ("/--x", "--x--"),
        ("/a-/b", "--a--b--"),
        ("/é/🙂", "--~00E9-~D83D~DE42--"),
        ("/lone\ud800", "--lone~D800--"),
        ("/x~y.z_w", "--x~007Ey.z_w--"),
    ],
)
def test_project_key_examples(cwd: str, key: str) -> None:
    assert project_key(cwd) == key


def test_project_key_keeps_251_characters() -> None:
    key = project_key("/" + "a" * 400)
    assert key == "--" + "a" * 251 + "--"


@pytest.mark.parametrize(
    ("session_id", "segment"),
    [
        ("abc-_.XYZ09", "abc-_.XYZ09"),
        (".", "~002E"),
        ("..", "~002E~002E"),
        ("...", "..."),
        ("a/b", "a~002Fb"),
        ("~", "~007E"),
        ("\x00", "~0000"),
        ("🙂", "~D83D~DE42"),
        ("\udfff", "~DFFF"),
    ],
)
def test_encode_segment_examples(session_id: str, segment: str) -> None:
    assert encode_segment(session_id) == segment


def test_encode_segment_refuses_an_empty_id() -> None:
    with pytest.raises(StoreError):
        encode_segment("")


@given(st.text(min_size=1), st.text(min_size=1))
def test_encode_segment_is_injective_and_safe(a: str, b: str) -> None:
    ea, eb = encode_segment(a), encode_segment(b)
    assert (ea == eb) == (a == b)
    assert "/" not in ea and "\\" not in ea and "\x00" not in ea
    assert ea not in (".", "..")


# -- P36 round trip -----------------------------------------------------------------------------

_headers = st.fixed_dictionaries(
    {
        "version": st.just(0),
        "id": st.text(min_size=1, max_size=12),
        "createdAt": st.integers(0, 2**53 - 1),
    },
    optional={
        "cwd": st.text(max_size=10).map(lambda s: "/" + s),
        "parentSession": st.text(max_size=5),
        "seedLength": st.integers(0, 99),
        "origin": st.just("subagent"),
        "delegationDepth": st.integers(0, 3),
        "agentPreset": st.text(max_size=5),
    },
)  # fmt: skip


@settings(max_examples=20)
@given(
    header=_headers,
    seed=st.integers(0, 2**16),
    turns=st.integers(1, 4),
    zstd=st.booleans(),
    pack=st.booleans(),
)
def test_p36_round_trip_any_batch_split(
    tmp_path_factory: pytest.TempPathFactory,
    header: dict[str, Any],
    seed: int,
    turns: int,
    zstd: bool,
    pack: bool,
) -> None:
    tmp = tmp_path_factory.mktemp("p36")
    events = _log(seed, turns)
    store = JsonlStore(tmp, zstd=zstd, pack_chunks=pack)
    _fill(store, events, header, seed)
    fresh = JsonlStore(tmp, zstd=zstd)
    loaded = fresh.load(header["id"], now=0)
    assert loaded.events == tuple(events), "loaded events differ from the appended ones"
    assert not loaded.repair.needed
    expected = SessionHeader(
        id=header["id"],
        created_at=header["createdAt"],
        cwd=header.get("cwd"),
        parent_session=header.get("parentSession"),
        seed_length=header.get("seedLength"),
        origin=header.get("origin"),
        delegation_depth=header.get("delegationDepth", 0),
        agent_preset=header.get("agentPreset"),
    )
    assert loaded.header == expected
    assert fresh.list() == (expected,)
    assert fresh.read_from(header["id"], 0) == tuple(events)


@pytest.mark.parametrize("zstd", [False, True], ids=["plain", "zstd"])
def test_bytes_are_exactly_the_writer_output_for_one_batch(tmp_path: Path, zstd: bool) -> None:
    events = _log(2, 2)
    store = _store(tmp_path, zstd)
    store.create(HEADER)
    store.append("s-1", events)
    data = store.path_of("s-1").read_bytes()
    if zstd:
        assert data == write_jsonl_zstd(HEADER, events)
    else:
        assert data == write_jsonl(HEADER, events)


def test_appended_batches_are_the_record_text_of_each_batch(tmp_path: Path) -> None:
    events = _log(2, 2)
    store = _store(tmp_path, False, pack_chunks=False)
    store.create(HEADER)
    store.append("s-1", events[:10])
    store.append("s-1", events[10:])
    expected = write_jsonl(HEADER, events[:10], pack_chunks=False) + encode_records(
        events[10:], pack_chunks=False
    )
    assert store.path_of("s-1").read_bytes() == expected


def test_zstd_file_is_one_frame_per_batch(tmp_path: Path) -> None:
    events = _log(2, 2)
    store = _store(tmp_path, True)
    store.create(HEADER)
    store.append("s-1", events[:10])
    store.append("s-1", events[10:])
    expected = write_jsonl_zstd(HEADER, events[:10]) + encode_zstd_frame(
        encode_records(events[10:])
    )
    assert store.path_of("s-1").read_bytes() == expected


# -- create, lazy materialization, append -------------------------------------------------------


@pytest.mark.parametrize("zstd", [False, True], ids=["plain", "zstd"])
def test_create_writes_nothing_until_the_first_non_empty_append(tmp_path: Path, zstd: bool) -> None:
    store = _store(tmp_path, zstd)
    store.create(HEADER)
    store.append("s-1", [])
    assert not (tmp_path / "root").exists()
    assert store.list() == ()
    with pytest.raises(SessionNotFound):
        store.inspect("s-1")
    store.append("s-1", _log()[:3])
    path = store.path_of("s-1")
    name = "session.jsonl.zstd" if zstd else "session.jsonl"
    assert path == tmp_path / "root" / "--projects-demo--" / "s-1" / name
    assert [p.name for p in path.parent.iterdir()] == [name], "temporary file left behind"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for directory in (path.parent, path.parent.parent, tmp_path / "root"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert [h.id for h in store.list()] == ["s-1"]


def test_no_cwd_goes_to_the_no_cwd_directory(tmp_path: Path) -> None:
    store = _store(tmp_path, False)
    store.create({"version": 0, "id": "..", "createdAt": 1})
    store.append("..", _log()[:2])
    assert store.path_of("..") == tmp_path / "root" / "_no-cwd" / "~002E~002E" / "session.jsonl"


def test_create_refuses_an_existing_or_pending_id(tmp_path: Path) -> None:
    store = _store(tmp_path, False)
    store.create(HEADER)
    with pytest.raises(SessionExists):
        store.create(HEADER)
    store.append("s-1", _log()[:2])
    with pytest.raises(SessionExists):
        _store(tmp_path, False).create({**HEADER, "cwd": "/elsewhere"})


@pytest.mark.parametrize(
    "header",
    [
        {"version": 0, "id": "", "createdAt": 1},
        {"version": 0, "id": "s", "createdAt": -1},
        {"version": 0, "id": "s", "createdAt": 1.5},
        {"version": 0, "id": "s", "createdAt": 2**53},
        {"version": 0, "id": "s", "createdAt": 1, "cwd": "relative"},
        {"version": 1, "id": "s", "createdAt": 1},
        {"version": 0, "id": "s", "createdAt": 1, "meta": float("nan")},
    ],
)
def test_create_refuses_an_invalid_header(tmp_path: Path, header: dict[str, Any]) -> None:
    with pytest.raises(SessionHeaderError):
        _store(tmp_path, False).create(header)


def test_append_to_an_unknown_session(tmp_path: Path) -> None:
    with pytest.raises(SessionNotFound):
        _store(tmp_path, False).append("nope", _log()[:1])
    with pytest.raises(SessionNotFound):
        _store(tmp_path, False).append("nope", [])


@pytest.mark.parametrize("zstd", [False, True], ids=["plain", "zstd"])
def test_append_requires_contiguous_seqs(tmp_path: Path, zstd: bool) -> None:
    events = _log()
    store = _store(tmp_path, zstd)
    store.create(HEADER)
    with pytest.raises(SeqMismatch):
        store.append("s-1", events[1:3])
    store.append("s-1", events[:3])
    before = store.path_of("s-1").read_bytes()
    with pytest.raises(SeqMismatch):
        store.append("s-1", events[4:6])
    with pytest.raises(SeqMismatch):
        store.append("s-1", events[2:5])
    with pytest.raises(SeqMismatch):
        store.append("s-1", [events[3], events[5]])
    with pytest.raises(SeqMismatch):  # another store instance, no cached tail
        _store(tmp_path, zstd).append("s-1", events[:2])
    assert store.path_of("s-1").read_bytes() == before
    _store(tmp_path, zstd).append("s-1", events[3:])
    assert store.load("s-1", now=0).events == tuple(events)


def test_append_refuses_legacy_vocabulary_and_lossy_values(tmp_path: Path) -> None:
    store = _store(tmp_path, False)
    store.create(HEADER)
    store.append("s-1", _log()[:1])
    with pytest.raises(LegacyFormat):
        store.append("s-1", [Event("mode/set", 1, 5, {})])
    header_data = {"header": {"config": {"provider": "p", "model": "m"}}, "reason": "fallback"}
    with pytest.raises(LegacyFormat):
        store.append("s-1", [Event("request/header", 1, 5, header_data)])
    lossy = Event("x/ext", 1, 5, None)
    Event.__dict__["data"].__set__(lossy, {"n": float("inf")})  # forged past __post_init__
    with pytest.raises(NotLosslessJson):
        store.append("s-1", [lossy])
    with pytest.raises(InvalidEnvelope):
        store.append("s-1", [Event("x/ext", -1, 5, None)])
    with pytest.raises(InvalidEnvelope):
        store.append("s-1", [{"type": "x/ext", "seq": 1, "time": 5, "data": None}])  # type: ignore[list-item]
    assert len(store.read_from("s-1", 0)) == 1


def test_unknown_types_are_refused_at_append_and_at_load_unless_ignorable(tmp_path: Path) -> None:
    events = _log(1, 1)
    store = _store(tmp_path, False)
    store.create(HEADER)
    store.append("s-1", events)
    ignorable = Event("vendor/x", len(events), T0, {"k": [1]}, ignorable=True)
    store.append("s-1", [ignorable])
    assert store.load("s-1", now=0).events[-1] == ignorable
    unknown = Event("vendor/y", len(events) + 1, T0, {})
    with pytest.raises(UnknownEventType, match=r"\(R14a\)"):
        store.append("s-1", [unknown])  # what this store's loader would refuse (R14a)
    assert store.load("s-1", now=0).events[-1] == ignorable
    wider = JsonlStore(tmp_path / "root", known_types={"vendor/y", *_known()})
    wider.append("s-1", [unknown])
    assert wider.inspect("s-1").events[-1] == unknown
    with pytest.raises(UnsupportedFormat):
        store.load("s-1", now=0)  # read with fewer known types than it was written with


def _known() -> set[str]:
    from kernel.values.events import DEFAULT_KNOWN_TYPES

    return set(DEFAULT_KNOWN_TYPES)


def test_failed_append_rolls_back_and_can_be_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = _log()
    store = _store(tmp_path, False)
    store.create(HEADER)
    store.append("s-1", events[:5])
    path = store.path_of("s-1")
    before = path.read_bytes()
    real_fsync = os.fsync
    calls = {"n": 0}

    def failing_fsync(fd: int) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError(5, "simulated fsync failure")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="simulated"):
        store.append("s-1", events[5:9])
    assert path.read_bytes() == before, "the failed batch was not rolled back"
    monkeypatch.setattr(os, "fsync", real_fsync)
    store.append("s-1", events[5:])
    assert store.load("s-1", now=0).events == tuple(events)


def test_failed_rollback_raises_both_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = _log()
    store = _store(tmp_path, False)
    store.create(HEADER)
    store.append("s-1", events[:5])

    def failing(*args: object) -> None:
        raise OSError(5, "simulated failure")

    monkeypatch.setattr(os, "fsync", failing)
    monkeypatch.setattr(os, "ftruncate", failing)
    with pytest.raises(ExceptionGroup) as info:
        store.append("s-1", events[5:9])
    assert len(info.value.exceptions) == 2


def test_failed_materialization_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path, False)
    store.create(HEADER)

    def failing_link(*args: object) -> None:
        raise OSError(28, "simulated link failure")

    monkeypatch.setattr(os, "link", failing_link)
    with pytest.raises(OSError, match="simulated"):
        store.append("s-1", _log()[:3])
    monkeypatch.undo()
    assert store.list() == ()
    session_dir = tmp_path / "root" / "--projects-demo--" / "s-1"
    assert list(session_dir.iterdir()) == []
    store.append("s-1", _log()[:3])
    assert len(store.inspect("s-1").events) >= 3


# -- P39 repair once; inspect writes nothing ----------------------------------------------------


def _write_raw(tmp_path: Path, data: bytes, zstd: bool, header: Any = HEADER) -> Path:
    directory = tmp_path / "root" / "--projects-demo--" / encode_segment(header["id"])
    directory.mkdir(parents=True)
    path = directory / ("session.jsonl.zstd" if zstd else "session.jsonl")
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("zstd", [False, True], ids=["plain", "zstd"])
@pytest.mark.parametrize("torn", [False, True], ids=["open-turn", "open-turn+torn"])
def test_p39_load_commits_the_repair_exactly_once(tmp_path: Path, zstd: bool, torn: bool) -> None:
    events = _log(5, 3)
    prefix = _open_turn_prefix(events)
    closers = interrupted_turn_closers(prefix)
    assert [c.type for c in closers] == ["tool/result", "step/end", "turn/end"]
    if zstd:
        data = write_jsonl_zstd(HEADER, prefix[:20]) + encode_zstd_frame(
            encode_records(prefix[20:])
        )
        tail = encode_zstd_frame(encode_records(events[len(prefix) : len(prefix) + 3]))[:-7]
    else:
        data = write_jsonl(HEADER, prefix)
        tail = encode_records(events[len(prefix) : len(prefix) + 1])[:-9]
    path = _write_raw(tmp_path, data + (tail if torn else b""), zstd)
    store = _store(tmp_path, zstd)
    original = path.read_bytes()
    mtime = path.stat().st_mtime_ns

    inspected = store.inspect("s-1")
    assert inspected.events == (*prefix, *closers)
    assert inspected.repair.closers == closers and not inspected.repair.committed
    assert inspected.repair.torn == torn
    assert path.read_bytes() == original and path.stat().st_mtime_ns == mtime

    first = store.load("s-1", now=0)
    assert first.events == inspected.events
    assert first.repair.committed and first.repair.closers == closers
    repaired = path.read_bytes()
    if zstd:
        assert repaired.endswith(encode_zstd_frame(encode_records(closers)))
        assert scan_jsonl_zstd(repaired).events == (*prefix, *closers)
    else:
        assert repaired == data + encode_records(closers)

    second = store.load("s-1", now=0)
    assert second.events == first.events
    assert not second.repair.needed and not second.repair.committed
    assert path.read_bytes() == repaired
    assert store.inspect("s-1").events == first.events


def test_zstd_repair_rewrites_the_recovered_events_of_a_torn_frame(tmp_path: Path) -> None:
    events = _log(5, 3)
    prefix = _open_turn_prefix(events)
    head, rest = prefix[:10], prefix[10:]
    frame = encode_zstd_frame(encode_records(rest))
    data = write_jsonl_zstd(HEADER, head) + frame[:-4]  # checksum missing: the frame is torn
    path = _write_raw(tmp_path, data, True)
    report = repair_file(path, now=0, dry_run=True)
    assert report.torn and not report.committed
    assert report.truncate_to == len(write_jsonl_zstd(HEADER, head))
    assert report.recovered == tuple(rest)
    assert path.read_bytes() == data
    report = repair_file(path, now=0)
    assert report.committed
    closers = interrupted_turn_closers(prefix)
    expected = write_jsonl_zstd(HEADER, head) + encode_zstd_frame(encode_records((*rest, *closers)))
    assert path.read_bytes() == expected
    assert not repair_file(path, now=0).needed


def test_closed_log_with_torn_tail_is_only_truncated(tmp_path: Path) -> None:
    events = _log(3, 2)
    data = write_jsonl(HEADER, events)
    path = _write_raw(tmp_path, data + b'{"type":"turn/start","seq":', False)
    loaded = _store(tmp_path, False).load("s-1", now=0)
    assert loaded.events == tuple(events)
    assert loaded.repair.torn and loaded.repair.closers == ()
    assert loaded.repair.truncate_to == len(data) and loaded.repair.removed_bytes == 27
    assert path.read_bytes() == data


def test_adopting_a_live_session_never_appends_closers(tmp_path: Path) -> None:
    events = _log(5, 3)
    prefix = _open_turn_prefix(events)
    data = write_jsonl(HEADER, prefix) + b"{torn"
    path = _write_raw(tmp_path, data, False)
    store = _store(tmp_path, False)
    with pytest.raises(LiveSessionOpen):
        store.load("s-1", now=0, adopt_live=True)
    assert path.read_bytes() == data
    closed = write_jsonl(HEADER, events)
    path.write_bytes(closed + b"{torn")
    adopted = store.load("s-1", now=0, adopt_live=True)
    assert adopted.events == tuple(events) and adopted.repair.committed
    assert path.read_bytes() == closed


def test_append_after_a_crash_requires_the_repair_first(tmp_path: Path) -> None:
    events = _log(3, 2)
    store = _store(tmp_path, False)
    path = _fill(store, events[:-3])
    with path.open("ab") as f:
        f.write(b'{"type":"assistant/chunk","se')
    with pytest.raises(CorruptLog, match="invalid physical tail"):
        _store(tmp_path, False).append("s-1", events[-3:])
    with pytest.raises(CorruptLog, match="invalid physical tail"):
        store.append("s-1", events[-3:])  # the cached tail no longer matches the file size
    store.load("s-1", now=0)
    n = len(store.read_from("s-1", 0))
    tail = [msgspec.structs.replace(e, seq=n + i) for i, e in enumerate(events[:2])]
    store.append("s-1", tail)
    assert store.read_from("s-1", n) == tuple(tail)


# -- P37 truncation tolerance -------------------------------------------------------------------


def _check_truncated(data: bytes, stored: tuple[Event, ...], zstd: bool) -> None:
    """The pure half of P37: the load succeeds with a prefix of `stored` plus its closers."""
    load = load_jsonl_zstd if zstd else load_jsonl
    loaded = load(data, now=0)
    prefix_len = len(loaded.events) - len(loaded.closers)
    assert loaded.events[:prefix_len] == stored[:prefix_len], "not a prefix of the stored events"
    assert loaded.closers == interrupted_turn_closers(stored[:prefix_len])


def _check_truncated_file(path: Path, data: bytes, stored: tuple[Event, ...], zstd: bool) -> None:
    """P37 on disk: repair the truncated file; it then parses with no torn tail, once."""
    path.write_bytes(data)
    report = repair_file(path, now=0)
    view = inspect_file(path)
    prefix_len = len(view.events) - len(report.closers)
    assert view.events[:prefix_len] == stored[:prefix_len], "not a prefix of the stored events"
    assert view.events[prefix_len:] == interrupted_turn_closers(stored[:prefix_len])
    assert not view.repair.needed, "the file still needs repair after repair_file"
    scan = scan_jsonl_zstd(path.read_bytes()) if zstd else scan_jsonl(path.read_bytes())
    assert not scan.torn


def _offsets(full: bytes, start: int, rng: random.Random, sample: int) -> list[int]:
    """Every offset near a record boundary plus a seeded sample of the others."""
    ends = [i + 1 for i, b in enumerate(full) if b == 0x0A]
    near = {o + d for o in ends for d in (-2, -1, 0, 1)}
    near |= set(rng.sample(range(start, len(full) + 1), sample))
    return sorted(o for o in near if start <= o <= len(full))


@pytest.mark.slow
def test_p37_plain_truncation_at_many_offsets(tmp_path: Path) -> None:
    events = tuple(realistic_log(random.Random(9), 2, big_every=3))
    full = write_jsonl(HEADER, events)
    header_end = full.index(b"\n") + 1
    rng = random.Random(37)
    offsets = _offsets(full, header_end, rng, 600)
    for offset in offsets:
        _check_truncated(full[:offset], events, False)
    path = _write_raw(tmp_path, full, False)
    for offset in [*sorted(rng.sample(offsets, 50)), header_end, len(full)]:
        _check_truncated_file(path, full[:offset], events, False)


def test_p37_zstd_truncation_at_offsets_after_the_header_frame(tmp_path: Path) -> None:
    events = tuple(realistic_log(random.Random(9), 2, big_every=3))
    batches = [events[:15], events[15:40], events[40:]]
    full = write_jsonl_zstd(HEADER, batches[0])
    header_frame = len(write_jsonl_zstd(HEADER, []))
    for batch in batches[1:]:
        full += encode_zstd_frame(encode_records(batch))
    rng = random.Random(38)
    offsets = sorted({header_frame, len(full), *rng.sample(range(header_frame, len(full)), 600)})
    for offset in offsets:
        _check_truncated(full[:offset], events, True)
    path = _write_raw(tmp_path, full, True)
    for offset in [*sorted(rng.sample(offsets, 50)), header_frame, len(full)]:
        _check_truncated_file(path, full[:offset], events, True)


# -- P38 committed damage -----------------------------------------------------------------------


def test_p38_damage_before_the_last_turn_end_is_fatal(tmp_path: Path) -> None:
    events = _log(4, 2)
    lines = write_jsonl(HEADER, events, pack_chunks=False).split(b"\n")
    last_end = max(i for i, line in enumerate(lines) if b'"turn/end"' in line)
    damaged = b"\n".join([*lines[:5], b"garbage", *lines[6:]])
    path = _write_raw(tmp_path, damaged, False)
    with pytest.raises(CorruptLog):
        _store(tmp_path, False).load("s-1", now=0)
    assert path.read_bytes() == damaged
    deleted = b"\n".join([*lines[:5], *lines[6:]])
    path.write_bytes(deleted)
    with pytest.raises(CorruptLog):
        _store(tmp_path, False).load("s-1", now=0)
    after = b"\n".join([*lines[: last_end + 1], b"garbage", *lines[last_end + 1 :]])
    path.write_bytes(after)
    loaded = _store(tmp_path, False).load("s-1", now=0)
    assert loaded.events == tuple(events)


# -- read_from, list, layout rules --------------------------------------------------------------


def test_read_from(tmp_path: Path) -> None:
    events = _log(6, 2)
    store = _store(tmp_path, False)
    path = _fill(store, events[:-2])
    with path.open("ab") as f:
        f.write(b"{torn")
    before = path.read_bytes()
    assert store.read_from("s-1", 0) == tuple(events[:-2])
    assert store.read_from("s-1", 7) == tuple(events[7:-2])
    assert store.read_from("s-1", 7.0) == tuple(events[7:-2])  # type: ignore[arg-type]
    assert store.read_from("s-1", 10_000) == ()
    for bad in (-1, True, 1.5, 2**53, "3"):
        with pytest.raises(StoreError):
            store.read_from("s-1", bad)  # type: ignore[arg-type]
    assert path.read_bytes() == before


def test_list_headers_sorted_by_id(tmp_path: Path) -> None:
    store = _store(tmp_path, True)
    for sid, cwd in (("b", "/p"), ("a", None), ("c", "/q")):
        header = {"version": 0, "id": sid, "createdAt": 3}
        if cwd:
            header["cwd"] = cwd
        store.create(header)
        store.append(sid, _log(1, 1)[:2])
    store.create({"version": 0, "id": "pending", "createdAt": 3})
    assert [h.id for h in JsonlStore(tmp_path / "root", zstd=True).list()] == ["a", "b", "c"]
    with pytest.raises(StoreLayoutError):
        JsonlStore(tmp_path / "root").list()
    with pytest.raises(StoreLayoutError):
        JsonlStore(tmp_path / "root").inspect("a")


def test_list_refuses_the_flat_layout(tmp_path: Path) -> None:
    store = _store(tmp_path, False)
    _fill(store, _log(1, 1))
    (tmp_path / "root" / "--projects-demo--" / "old.jsonl").write_bytes(b"")
    with pytest.raises(StoreLayoutError, match="flat"):
        store.list()


def test_one_id_under_two_project_directories_is_an_error(tmp_path: Path) -> None:
    store = _store(tmp_path, False)
    path = _fill(store, _log(1, 1))
    twin = tmp_path / "root" / "--other--" / "s-1"
    twin.mkdir(parents=True)
    (twin / "session.jsonl").write_bytes(write_jsonl({**HEADER, "cwd": "/other"}, _log(1, 1)))
    assert path.exists()
    with pytest.raises(StoreLayoutError):
        _store(tmp_path, False).inspect("s-1")
    with pytest.raises(StoreLayoutError):
        store.list()


def test_header_must_map_to_its_path(tmp_path: Path) -> None:
    data = write_jsonl({**HEADER, "cwd": "/elsewhere"}, _log(1, 1))
    _write_raw(tmp_path, data, False)
    store = _store(tmp_path, False)
    with pytest.raises(CorruptLog, match="belongs at"):
        store.load("s-1", now=0)
    with pytest.raises(CorruptLog):
        store.list()
    other = write_jsonl({**HEADER, "id": "s-2"}, _log(1, 1))
    store.path_of("s-1").write_bytes(other)
    with pytest.raises(CorruptLog):
        _store(tmp_path, False).load("s-1", now=0)


def test_list_reads_only_the_header(tmp_path: Path) -> None:
    store = _store(tmp_path, False)
    path = _fill(store, _log(1, 1))
    with path.open("ab") as f:
        f.write(b"garbage that a full parse would reject\n" * 3 + b'{"type":"turn/end"}\n')
    assert [h.id for h in store.list()] == ["s-1"]
    with pytest.raises(CorruptLog):
        store.inspect("s-1")


@pytest.mark.parametrize("zstd", [False, True], ids=["plain", "zstd"])
def test_read_header_reads_one_session_past_a_damaged_one_that_fails_list(
    tmp_path: Path, zstd: bool
) -> None:
    store = _store(tmp_path, zstd)
    paths = {sid: _fill(store, _log(1, 1), header={**HEADER, "id": sid}) for sid in ("a", "b", "c")}
    listed = store.list()
    assert [store.read_header(paths[h.id]) for h in listed] == list(listed)
    paths["b"].write_bytes(b"not a header\n")
    with pytest.raises(CorruptLog, match=r"b/session\.jsonl"):  # names the damaged file
        store.list()
    with pytest.raises(CorruptLog, match=r"b/session\.jsonl"):
        store.read_header(paths["b"])
    assert [store.read_header(paths[sid]).id for sid in ("a", "c")] == ["a", "c"]
    assert store.read_header(str(paths["a"])).id == "a"  # a str path too


@pytest.mark.parametrize("zstd", [False, True], ids=["plain", "zstd"])
def test_list_readable_lists_past_a_damaged_session_and_names_it(
    tmp_path: Path, zstd: bool
) -> None:
    store = _store(tmp_path, zstd)
    paths = {sid: _fill(store, _log(1, 1), header={**HEADER, "id": sid}) for sid in ("a", "b", "c")}
    assert store.list_readable() == SessionListing(store.list(), ())
    paths["b"].write_bytes(b"not a header\n")
    with pytest.raises(CorruptLog):
        store.list()  # unchanged: all or nothing
    listing = store.list_readable()
    assert [h.id for h in listing.headers] == ["a", "c"]
    (bad,) = listing.unreadable
    assert bad.location == "--projects-demo--/b"
    assert isinstance(bad.error, CorruptLog) and str(paths["b"]) in str(bad.error)


def test_list_readable_reports_each_broken_place_of_the_layout(tmp_path: Path) -> None:
    store = _store(tmp_path, False)
    _fill(store, _log(1, 1), header={**HEADER, "id": "ok"})
    twice = _fill(store, _log(1, 1), header={**HEADER, "id": "twice"})
    root = tmp_path / "root"
    second = JsonlStore(tmp_path / "second")  # the same id with another cwd: another project
    _fill(second, _log(1, 1), header={**HEADER, "id": "twice", "cwd": "/elsewhere"})
    shutil.copytree(tmp_path / "second" / "--elsewhere--", root / "--elsewhere--")
    (root / "--projects-demo--" / "flat.jsonl").write_bytes(twice.read_bytes())
    other = root / "--projects-demo--" / "zstd-one"
    other.mkdir()
    (other / "session.jsonl.zstd").write_bytes(b"")
    outside = tmp_path / "outside"
    _fill(JsonlStore(outside), _log(1, 1), header={**HEADER, "id": "linked"})
    (root / "--linked--").symlink_to(outside / "--projects-demo--")
    (root / "--projects-demo--" / "pending").mkdir()  # no session file: not a session
    listing = store.list_readable()
    assert [h.id for h in listing.headers] == ["ok"]
    assert [(u.location, type(u.error)) for u in listing.unreadable] == [
        ("--elsewhere--/twice", StoreLayoutError),
        ("--linked--", StoreLayoutError),
        ("--projects-demo--/flat.jsonl", StoreLayoutError),
        ("--projects-demo--/twice", StoreLayoutError),
        ("--projects-demo--/zstd-one", StoreLayoutError),
    ]
    messages = [str(u.error) for u in listing.unreadable]
    assert "stored under 2 project directories" in messages[0] == messages[3]
    assert "symbolic link" in messages[1]
    assert "flat layout" in messages[2] and "one encoding per root" in messages[4]
    assert JsonlStore(tmp_path / "no-root").list_readable() == SessionListing(())


def test_a_zstd_store_reads_with_its_own_decoded_size_cap(tmp_path: Path) -> None:
    events = _log(1, 1)
    _fill(_store(tmp_path, True), events[:3])
    tiny = _store(tmp_path, True, max_decoded_bytes=16)  # a new store: no tail cached
    with pytest.raises(LimitExceeded):
        tiny.append("s-1", events[3:])  # the tail scan honours the cap
    (refused,) = tiny.list_readable().unreadable
    assert refused.location == "--projects-demo--/s-1"
    assert isinstance(refused.error, LimitExceeded)
    roomy = _store(tmp_path, True, max_decoded_bytes=1 << 20)
    roomy.append("s-1", events[3:])
    assert [h.id for h in roomy.list_readable().headers] == ["s-1"]
    assert len(roomy.load("s-1", now=0).events) >= len(events)


def test_read_header_checks_the_header_against_the_files_place(tmp_path: Path) -> None:
    store = _store(tmp_path, False)
    path = _fill(store, _log(1, 1))
    moved = tmp_path / "root" / "--elsewhere--" / path.parent.name / path.name
    moved.parent.mkdir(parents=True)
    path.rename(moved)
    with pytest.raises(CorruptLog, match="belongs at --projects-demo--/s-1"):
        store.read_header(moved)
    line = b'{"type":"session","version":2,"id":"s-1","createdAt":1,"delegationDepth":0}\n'
    moved.write_bytes(line)
    with pytest.raises(UnsupportedFormat):
        store.read_header(moved)


def test_read_header_refuses_a_path_that_is_no_session_file_of_the_store(tmp_path: Path) -> None:
    store = _store(tmp_path, False)
    path = _fill(store, _log(1, 1))
    outside = tmp_path / "copy" / "--projects-demo--" / "s-1" / "session.jsonl"
    outside.parent.mkdir(parents=True)
    shutil.copy(path, outside)
    for wrong in (
        outside,  # the same layout under another root
        path.parent,  # the session directory
        path.with_name("session.jsonl.zstd"),  # the other encoding's name
        tmp_path / "root" / "--projects-demo--" / "flat.jsonl",  # the obsolete flat layout
    ):
        with pytest.raises(StoreLayoutError, match="not a session file of the store"):
            store.read_header(wrong)
    linked = tmp_path / "root" / "--projects-demo--" / "s-2"
    linked.mkdir()
    (linked / "session.jsonl").symlink_to(outside)
    with pytest.raises(StoreLayoutError, match="symbolic link"):
        store.read_header(linked / "session.jsonl")


def test_version_refusal_and_header_corruption(tmp_path: Path) -> None:
    line = b'{"type":"session","version":2,"id":"s-1","createdAt":1,"delegationDepth":0}\n'
    _write_raw(tmp_path, line, False)
    store = _store(tmp_path, False)
    with pytest.raises(UnsupportedFormat):
        store.load("s-1", now=0)
    store.path_of("s-1").write_bytes(line.replace(b'"version":2', b'"version":"0"'))
    with pytest.raises(CorruptLog):
        store.load("s-1", now=0)


# -- single files -------------------------------------------------------------------------------


@pytest.mark.parametrize("zstd", [False, True], ids=["plain", "zstd"])
def test_repair_file_dry_run_and_report(tmp_path: Path, zstd: bool) -> None:
    events = _log(5, 3)
    prefix = _open_turn_prefix(events)
    writer = write_jsonl_zstd if zstd else write_jsonl
    data = writer(HEADER, prefix)
    path = tmp_path / "any-name.log"
    path.write_bytes(data)
    dry = repair_file(path, now=0, dry_run=True)
    assert dry.needed and not dry.committed and not dry.torn
    assert dry.closers == interrupted_turn_closers(prefix)
    assert path.read_bytes() == data
    done = repair_file(path, now=0)
    assert done.committed and done.closers == dry.closers
    assert inspect_file(path).events == (*prefix, *dry.closers)
    assert not repair_file(path, now=0).committed


# -- ids whose directory name would be too long -------------------------------------------------


@pytest.mark.parametrize(
    "session_id",
    ["x" * 300, "🙂" * 60, "a/b" * 100, "\ud800" * 52],
    ids=["ascii", "astral", "separators", "lone-surrogates"],
)
@pytest.mark.parametrize("zstd", [False, True], ids=["plain", "zstd"])
def test_an_id_whose_directory_name_would_be_too_long_is_stored(
    tmp_path: Path, zstd: bool, session_id: str
) -> None:
    # An encoded id over 255 bytes used to make `create`/`append` raise OSError (ENAMETOOLONG);
    # every id must map to a directory name the file system accepts.
    assert len(encode_segment(session_id)) > 255
    header = {**HEADER, "id": session_id}
    store = _store(tmp_path, zstd)
    path = _fill(store, _log(1, 1), header)
    name = path.parent.name
    assert name == session_dir_name(session_id) and len(name.encode()) <= 255
    assert "~~" in name and name.startswith(encode_segment(session_id)[:20])
    again = _store(tmp_path, zstd)
    assert [h.id for h in again.list()] == [session_id]
    assert again.load(session_id, now=0).events == tuple(_log(1, 1))
    assert again.path_of(session_id) == path
    with pytest.raises(SessionExists):
        again.create(header)


def test_short_ids_keep_their_directory_names() -> None:
    # Existing logs must still be found: only names over the limit change.
    assert session_dir_name("s-1") == "s-1"
    assert session_dir_name("a" * 255) == "a" * 255
    assert session_dir_name("🙂" * 25) == "~D83D~DE42" * 25  # 250 characters
    assert session_dir_name("a" * 256) != "a" * 256
    with pytest.raises(StoreError):
        session_dir_name("")


@given(st.text(min_size=1, max_size=60))
def test_session_dir_name_is_encode_segment_below_the_limit(session_id: str) -> None:
    segment = encode_segment(session_id)
    assume(len(segment) <= 255)
    assert session_dir_name(session_id) == segment


def test_long_ids_map_to_distinct_names_that_never_collide_with_short_ones() -> None:
    base = "p" * 400
    names = {session_dir_name(base + suffix) for suffix in ("", "a", "b", "~", "🙂")}
    assert len(names) == 5
    assert all(len(n) == 255 and n[:189] == "p" * 189 for n in names)
    # a shortened name holds "~~", which encode_segment never writes
    assert "~~" not in encode_segment("~~" + "x" * 300)
    # the prefix never splits an escape: the characters before "~~" are whole escapes
    name = session_dir_name("é" * 100)
    assert name.split("~~")[0] == "~00E9" * 37


def test_long_id_mapping_is_stable_across_processes(tmp_path: Path) -> None:
    session_id = "stable-" + "é" * 80
    # Pinned: a changed mapping would hide every log stored under the old name.
    assert session_dir_name(session_id) == (
        "stable-" + "~00E9" * 36 + "~~"
        "f9c81e9261718ef8c780a0c6a63e69a02d1965f7842b506316f1afcb9d313741"
    )
    code = (
        "import sys; from kernel.store import JsonlStore, session_dir_name\n"
        "sid = 'stable-' + '\\u00e9' * 80\n"
        "print(session_dir_name(sid)); print(JsonlStore(sys.argv[1]).path_of(sid))\n"
    )
    store = _store(tmp_path, False)
    path = _fill(store, _log(1, 1), {**HEADER, "id": session_id})
    env = {**os.environ, "PYTHONHASHSEED": "random"}
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path / "root")],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        ).stdout.split("\n")
        assert out[:2] == [session_dir_name(session_id), str(path)]


# -- ids given as surrogate pairs ---------------------------------------------------------------


@pytest.mark.parametrize("zstd", [False, True], ids=["plain", "zstd"])
def test_a_surrogate_pair_given_as_two_code_points_is_the_character_it_encodes(
    tmp_path: Path, zstd: bool
) -> None:
    # The writer joins a high+low pair into the astral character, so the stored header
    # named "s-🙂" and loading "s-\ud83d\ude42" failed its identity check (CorruptLog).
    split, joined = "s-\ud83d\ude42", "s-\U0001f642"
    header = {**HEADER, "id": split, "cwd": "/p/\ud83d\ude42"}
    events = _log(1, 1)
    store = _store(tmp_path, zstd)
    created = store.create(header)
    assert (created.id, created.cwd) == (joined, "/p/\U0001f642")
    store.append(split, events[:3])
    store.append(joined, events[3:])
    again = _store(tmp_path, zstd)
    assert [h.id for h in again.list()] == [joined]
    for spelling in (split, joined):
        loaded = again.load(spelling, now=0)
        assert loaded.header == _norm(created) and loaded.events == tuple(events)
        assert again.read_from(spelling, 0) == tuple(events)
    with pytest.raises(SessionExists):
        again.create({**header, "id": joined})


@pytest.mark.parametrize("zstd", [False, True], ids=["plain", "zstd"])
def test_lone_surrogates_in_the_id_cwd_and_type_round_trip(tmp_path: Path, zstd: bool) -> None:
    header = {**HEADER, "id": "s-\ud800", "cwd": "/p/\udc00", "agentPreset": "\udbff"}
    events = _log(1, 1)
    events.append(Event("x/odd\udfff", len(events), T0, {"n": 1}, ignorable=True))
    store = _store(tmp_path, zstd)
    created = _fill(store, events, header) and store.load(header["id"], now=0).header
    assert (created.id, created.cwd, created.agent_preset) == ("s-\ud800", "/p/\udc00", "\udbff")
    assert _store(tmp_path, zstd).load(header["id"], now=0).events == tuple(events)


# -- a store follows no symbolic link below its root --------------------------------------------


def _outside_copy(tmp_path: Path, path: Path) -> Path:
    outside = tmp_path / "outside" / path.name
    outside.parent.mkdir()
    outside.write_bytes(path.read_bytes())
    return outside


@pytest.mark.parametrize("zstd", [False, True], ids=["plain", "zstd"])
@pytest.mark.parametrize("link", ["file", "session-dir"])
def test_a_link_inside_the_store_is_neither_written_nor_read(
    tmp_path: Path, zstd: bool, link: str
) -> None:
    events = _log(1, 1)
    store = _store(tmp_path, zstd)
    path = _fill(store, events[:-2])
    if link == "file":
        outside = _outside_copy(tmp_path, path)
        path.unlink()
        path.symlink_to(outside)
    else:
        outside_dir = tmp_path / "outside"
        path.parent.rename(outside_dir)
        path.parent.symlink_to(outside_dir, target_is_directory=True)
        outside = outside_dir / path.name
    before = outside.read_bytes()
    fresh = _store(tmp_path, zstd)
    for attempt in (
        lambda: fresh.append("s-1", events[-2:-1]),
        lambda: fresh.load("s-1", now=0),
        lambda: fresh.inspect("s-1"),
        lambda: fresh.read_from("s-1", 0),
        lambda: fresh.list(),
    ):
        with pytest.raises(StoreLayoutError, match="symbolic link inside the store"):
            attempt()
    assert outside.read_bytes() == before
    assert sorted(p.name for p in outside.parent.iterdir()) == [outside.name]


def test_a_new_session_is_not_written_through_a_linked_project_directory(tmp_path: Path) -> None:
    store = _store(tmp_path, False)
    store.create(HEADER)
    store.append("s-1", _log(1, 1)[:2])
    project = store.path_of("s-1").parent.parent
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    other = {**HEADER, "id": "s-2"}
    shutil.rmtree(project)
    project.symlink_to(outside, target_is_directory=True)
    store.create(other)
    with pytest.raises(StoreLayoutError, match="symbolic link inside the store"):
        store.append("s-2", _log(1, 1)[:2])
    assert list(outside.iterdir()) == []


def test_listing_reads_a_large_header_in_logarithmically_many_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each read asks for as much as is buffered, so the header frame is walked a number of
    # times logarithmic in its size (it was once walked again after every 64 KiB read).
    import kernel.store.jsonl as jsonl_module

    noise = random.Random(3).choices("abcdefghijklmnopqrstuvwxyz0123456789", k=4 << 20)
    header = {**HEADER, "agentPreset": "".join(noise)}
    store = _store(tmp_path, True)
    store.create(header)
    store.append("s-1", _log(1, 1)[:1])
    walks = []
    real = jsonl_module.frame_end

    def counted(data: bytes, start: int) -> int | None:
        walks.append(len(data))
        return real(data, start)

    monkeypatch.setattr(jsonl_module, "frame_end", counted)
    assert [h.id for h in _store(tmp_path, True).list()] == ["s-1"]
    assert len(walks) <= 8, walks
