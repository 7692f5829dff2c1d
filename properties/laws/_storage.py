"""Laws on durable storage (docs/format/properties.md §9: P36-P41, P43a, P43b; P13 on load).

Byte-level laws work on the pure codecs (`write_jsonl`, `load_jsonl`, the
Zstandard variants); `law_storage_round_trip` and `law_repair_once` drive any
store with the `create` / `append` / `inspect` / `load` protocol of
docs/format/persistence.md §1 (JSONL files or SQLite).
"""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from kernel.errors import CorruptLog, KernelError, LegacyFormat, UnsupportedFormat
from kernel.storage.jsonl import encode_records, load_jsonl, scan_jsonl, write_jsonl
from kernel.storage.zstd import frame_end, load_jsonl_zstd, write_jsonl_zstd
from kernel.values.events import Event, SessionHeader
from kernel.values.json import thaw
from kernel.wire.chunks import pack_chunk_rows
from kernel.wire.codec import event_to_json, event_to_wire, header_to_json
from kernel.wire.jsontext import encode_json_bytes
from properties._report import check, violated
from properties._spelling import header_line, js_parse, stringify
from properties.laws._common import as_events, as_wire, same_json
from properties.laws._implementation import KERNEL, Implementation

__all__ = (
    "Store",
    "law_storage_round_trip",
    "law_write_read_at_any_depth",
    "law_truncation_tolerance",
    "law_zstd_truncation_tolerance",
    "law_committed_damage_fatal",
    "law_zstd_damage_fatal",
    "law_repair_once",
    "law_version_refusal",
    "law_unknown_types",
    "law_byte_exact_writer",
    "law_strict_record_parsing",
    "law_crlf_lines",
    "law_legacy_refused_on_load",
    "record_lines",
    "BAD_LINES",
)


class Store(Protocol):
    """The storage contract of docs/format/persistence.md §1 that the store laws drive.

    `inspect` and `load` return an object with `events` (the balanced events) and `header`
    (a `SessionHeader` or its wire object); P39 also reads `repair.needed` from a load's
    result when it has one.
    """

    def create(self, header: Any) -> Any: ...
    def append(self, session_id: str, events: Sequence[Event]) -> None: ...
    def inspect(self, session_id: str, *, now: int = 0) -> Any: ...
    def load(self, session_id: str, *, now: int) -> Any: ...


def _json(events: Sequence[Event]) -> list[dict[str, Any]]:
    return [event_to_json(e) for e in events]


def _header_record(header: SessionHeader | Mapping[str, Any]) -> dict[str, Any]:
    record = header_to_json(header) if isinstance(header, SessionHeader) else dict(header)
    record.setdefault("delegationDepth", 0)
    return record


def law_storage_round_trip(
    store: Store, header: Mapping[str, Any], log: Any, splits: Sequence[int]
) -> None:
    """P36: appending a log in arbitrary batches, then loading, returns exactly the appended
    events and an equal header (`delegationDepth` absent ↔ 0)."""
    law = "P36 storage round trip"
    events = as_events(log)
    store.create(header)
    start = 0
    for size in [*splits, len(events)]:
        batch = events[start : start + max(size, 0)]
        store.append(header["id"], batch)
        start += len(batch)
        if start >= len(events):
            break
    if not events:
        return
    loaded = store.load(header["id"], now=0)
    check(
        same_json(_json(loaded.events), _json(events)) and len(loaded.events) == len(events),
        law,
        "loaded events differ from the appended events",
        log=_json(events),
        loaded=_json(loaded.events),
    )
    check(
        _header_record(loaded.header) == _header_record(header),
        law,
        "loaded header differs",
        stored=header,
        loaded=_header_record(loaded.header),
    )


def _at_call_depth(depth: int, work: Callable[[], Any]) -> Any:
    """Run `work` beneath `depth` extra Python frames, without recursion in this helper."""
    if depth <= 0:
        return work()
    return _at_call_depth(depth - 1, work)


def _record_texts(events: Sequence[Event]) -> list[bytes]:
    return [encode_json_bytes(event_to_wire(e)) for e in events]


def law_write_read_at_any_depth(
    store: Store, header: Mapping[str, Any], events: Sequence[Event], headroom: int
) -> None:
    """Reading accepts everything writing accepts (issue: deep payloads were written, then
    repaired away): the events appended to a store load back with the same JSON text, also
    when `load` is called with only `headroom` Python frames left before the recursion limit.

    Compared as written JSON text, which is canonical (a surrogate pair given as two code
    points and the astral character it encodes are one text), and computed iteratively.
    """
    law = "write -> read at any call-stack depth"
    store.create(header)
    store.append(header["id"], events)
    depth = max(0, sys.getrecursionlimit() - headroom - len(inspect.stack(0)))
    loaded = _at_call_depth(depth, lambda: store.load(header["id"], now=0))
    check(
        len(loaded.events) == len(events) and _record_texts(loaded.events) == _record_texts(events),
        law,
        "loaded events differ from the appended events",
        appended=len(events),
        loaded=len(loaded.events),
        call_depth=depth,
    )


def record_lines(data: bytes) -> list[bytes]:
    """The complete record lines after the header line (without their newlines)."""
    lines = data.split(b"\n")
    return lines[1:-1]


def _members(line: bytes) -> int:
    value = json.loads(line)
    if value.get("type") in ("text-chunks", "reasoning-chunks"):
        return len(value["data"]["texts"])
    if value.get("type") == "tool-call-chunks":
        return len(value["data"]["args"])
    return 1


def _check_balanced_prefix(
    law: str,
    loaded: Any,
    events: Sequence[Event],
    n: int | None,
    *,
    implementation: Implementation = KERNEL,
) -> int:
    """The loaded view is a prefix of `events` plus that prefix's closers; returns its length."""
    kept = len(loaded.events) - len(loaded.closers)
    if n is not None:
        check(
            kept == n,
            law,
            f"load kept {kept} events, the complete records hold {n}",
            log=_json(events),
        )
    check(
        _json(loaded.events[:kept]) == _json(events[:kept]),
        law,
        "the loaded events are not a prefix of the stored events",
        log=_json(events),
    )
    expected = implementation.closers(events[:kept])
    check(
        _json(loaded.closers) == _json(expected),
        law,
        "the closers the loader appended are not the implementation's closers of the prefix",
        log=_json(events[:kept]),
        loaded_closers=_json(loaded.closers),
        closers=_json(expected),
    )
    return kept


def law_truncation_tolerance(
    header: Mapping[str, Any], log: Any, cut: int, *, implementation: Implementation = KERNEL
) -> None:
    """P37 (plain JSONL): truncating the file at any byte after the header line loads the
    prefix of complete records plus its closers; after the repair the file has no torn tail."""
    events = as_events(log)
    data = write_jsonl(header, events)
    header_end = data.index(b"\n") + 1
    cut = header_end + cut % (len(data) - header_end + 1)
    law = f"P37 truncation tolerance (cut at byte {cut} of {len(data)})"
    damaged = data[:cut]
    n = sum(_members(line) for line in damaged[header_end:].split(b"\n")[:-1])
    try:
        loaded = load_jsonl(damaged, now=0)
    except KernelError as exc:
        violated(law, f"load failed: {exc!r}", log=_json(events))
    _check_balanced_prefix(law, loaded, events, n, implementation=implementation)
    repaired = damaged[: loaded.committed_bytes] + encode_records(loaded.closers)
    scan = scan_jsonl(repaired)
    check(not scan.torn, law, "the repaired file still has a torn tail", log=_json(events))
    check(_json(scan.events) == _json(loaded.events), law, "the repaired file reads differently")


def law_zstd_truncation_tolerance(
    header: Mapping[str, Any],
    log: Any,
    split: int,
    cut: int,
    *,
    implementation: Implementation = KERNEL,
) -> None:
    """P37 (Zstandard): truncating at any offset at or after the end of the header frame loads
    a prefix of the stored events plus its closers."""
    from kernel.storage.zstd import encode_zstd_frame

    events = as_events(log)
    k = split % (len(events) + 1)
    data = write_jsonl_zstd(header, events[:k])
    if k < len(events):
        data += encode_zstd_frame(encode_records(events[k:]))
    header_end = frame_end(data, 0)
    assert header_end is not None
    cut = header_end + cut % (len(data) - header_end + 1)
    law = f"P37 Zstandard truncation tolerance (cut at byte {cut} of {len(data)})"
    try:
        loaded = load_jsonl_zstd(data[:cut], now=0)
    except KernelError as exc:
        violated(law, f"load failed: {exc!r}", log=_json(events))
    _check_balanced_prefix(law, loaded, events, None, implementation=implementation)


def _last_turn_end_line(lines: Sequence[bytes]) -> int:
    last = -1
    for i, line in enumerate(lines):
        if json.loads(line).get("type") == "turn/end":
            last = i
    return last


def law_committed_damage_fatal(
    header: Mapping[str, Any],
    log: Any,
    index: int,
    delete: bool,
    *,
    implementation: Implementation = KERNEL,
) -> None:
    """P38 (plain JSONL): garbage in (or deletion of) a complete record before the last stored
    `turn/end` is `CorruptLog`; at or after it, load succeeds with the prefix before the damage."""
    events = as_events(log)
    data = write_jsonl(header, events)
    head, *_ = data.split(b"\n", 1)
    lines = record_lines(data)
    if not lines:
        return
    i = index % len(lines)
    law = f"P38 committed damage ({'deleted' if delete else 'garbage'} record line {i})"
    damaged_lines = [*lines[:i], *([] if delete else [b"{not json"]), *lines[i + 1 :]]
    damaged = b"\n".join([head, *damaged_lines]) + b"\n"
    fatal = i < _last_turn_end_line(lines)
    try:
        loaded = load_jsonl(damaged, now=0)
    except CorruptLog:
        if fatal:
            return
        violated(law, "damage after the last turn/end made the log corrupt", log=_json(events))
    except KernelError as exc:
        violated(law, f"load raised {exc!r}", log=_json(events))
    if fatal:
        violated(law, "damage before the last turn/end was not CorruptLog", log=_json(events))
    n = sum(_members(line) for line in lines[:i])
    _check_balanced_prefix(law, loaded, events, n, implementation=implementation)


def _frames(data: bytes) -> list[tuple[int, int]]:
    out, pos = [], 0
    while pos < len(data):
        end = frame_end(data, pos)
        assert end is not None
        out.append((pos, end))
        pos = end
    return out


def _payload_offsets(data: bytes, start: int) -> list[int]:
    """Offsets of block-content bytes of the frame at `start` (parsed here, per RFC 8878)."""
    fhd = data[start + 4]
    fcs_flag, single, dict_flag = fhd >> 6, (fhd >> 5) & 1, fhd & 3
    pos = start + 5 + (0 if single else 1) + (0, 1, 2, 4)[dict_flag]
    pos += (1 if single else 0, 2, 4, 8)[fcs_flag]
    out: list[int] = []
    while True:
        block = int.from_bytes(data[pos : pos + 3], "little")
        last, kind, size = block & 1, (block >> 1) & 3, block >> 3
        pos += 3
        length = 1 if kind == 1 else size
        out.extend(range(pos, pos + length))
        pos += length
        if last:
            return out


def law_zstd_damage_fatal(
    header: Mapping[str, Any], log: Any, which: int, where: str, pick: int
) -> None:
    """P38 (Zstandard): damage to a complete frame's compressed payload, checksum or magic
    number is `CorruptLog`."""
    events = as_events(log)
    data = bytearray(write_jsonl_zstd(header, events))
    frames = _frames(bytes(data))
    start, end = frames[which % len(frames)]
    if where == "magic":
        offsets = list(range(start, start + 4))
    elif where == "checksum":
        offsets = list(range(end - 4, end))
    else:
        offsets = _payload_offsets(bytes(data), start)
    if not offsets:
        return
    at = offsets[pick % len(offsets)]
    data[at] ^= 0x5A
    law = f"P38 Zstandard damage ({where} byte {at} of frame at {start})"
    try:
        load_jsonl_zstd(bytes(data), now=0)
    except CorruptLog:
        return
    except KernelError as exc:
        violated(law, f"load raised {exc!r}, not CorruptLog", log=_json(events))
    violated(law, "damaged log loaded without error", log=_json(events))


def law_repair_once(
    store: Store,
    header: Mapping[str, Any],
    log: Any,
    corrupt_tail: Callable[[], None] | None = None,
    stored_bytes: Callable[[], bytes] | None = None,
    *,
    implementation: Implementation = KERNEL,
) -> None:
    """P39: `inspect` of a stored crash prefix returns the balanced events and writes nothing;
    `load` commits the repair once (the stored log then ends with the closers); a second load
    commits nothing and returns the same events. `corrupt_tail`, when given, adds a torn tail
    to the stored session before the first look; `stored_bytes`, when given, reads the
    session's raw storage (to see that `inspect` writes nothing)."""
    law = "P39 repair once"
    events = as_events(log)
    if not events:
        return
    session_id = header["id"]
    store.create(header)
    store.append(session_id, events)
    if corrupt_tail is not None:
        corrupt_tail()
    closers = implementation.closers(events)
    expected = [*_json(events), *_json(closers)]
    before = stored_bytes() if stored_bytes is not None else None
    inspected = store.inspect(session_id, now=0)
    again = store.inspect(session_id, now=0)
    check(
        _json(inspected.events) == expected and _json(again.events) == expected,
        law,
        "inspect does not return the balanced events (or changed between calls)",
        log=_json(events),
    )
    if stored_bytes is not None:
        check(stored_bytes() == before, law, "inspect wrote to storage", log=_json(events))
    first = store.load(session_id, now=0)
    check(
        _json(first.events) == expected,
        law,
        "the first load returns other events",
        log=_json(events),
    )
    read_from = getattr(store, "read_from", None)
    if read_from is not None:
        check(
            _json(read_from(session_id, 0)) == expected,
            law,
            "after the repair the stored log does not end with the closers",
            log=_json(events),
        )
    committed = stored_bytes() if stored_bytes is not None else None
    second = store.load(session_id, now=0)
    # The kernel's stores report what a load repaired; a store that keeps no report is
    # judged by its events (and by `stored_bytes` below, when given).
    report = getattr(second, "repair", None)
    check(
        not getattr(report, "needed", False) and _json(second.events) == expected,
        law,
        "the second load repaired again or returned other events",
        log=_json(events),
        report=repr(report),
    )
    if stored_bytes is not None:
        check(
            stored_bytes() == committed, law, "the second load wrote to storage", log=_json(events)
        )


_VERSION_HEADER = '{{"type":"session","version":{v},"id":"s","createdAt":1,"delegationDepth":0}}'


def law_version_refusal(version: str, broken_rest: bool) -> None:
    """P40: a numeric header `version` other than 0 is `UnsupportedFormat` (never `CorruptLog`),
    whatever else is wrong; a non-numeric or absent one is `CorruptLog`; `-0`, `0.0` are 0."""
    law = f"P40 version refusal (version {version})"
    if version == "<absent>":
        line = '{"type":"session","id":"s","createdAt":1,"delegationDepth":0}'
    else:
        line = _VERSION_HEADER.format(v=version)
    if broken_rest:
        line = line.replace('"createdAt":1', '"createdAt":"yesterday"')
    records = '{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}\n'
    if broken_rest:
        records = (
            "{not json\n"
            '{"type":"turn/end","seq":0,"time":1,'
            '"data":{"turn":1,"reason":{"kind":"completed"}}}\n'
        )
    data = (line + "\n" + records).encode()
    try:
        number = json.loads(version) if version != "<absent>" else None
    except ValueError:
        number = None
    numeric = type(number) in (int, float)
    is_zero = numeric and number == 0
    try:
        load_jsonl(data, now=0)
    except UnsupportedFormat as exc:
        check(
            numeric and not is_zero and not isinstance(exc, CorruptLog),
            law,
            f"UnsupportedFormat for a version that is not a non-zero number: {exc!r}",
        )
        return
    except CorruptLog as exc:
        check(
            not numeric or is_zero,
            law,
            f"numeric version {version} reported as CorruptLog: {exc!r}",
        )
        check(is_zero is False or broken_rest, law, f"version {version} (zero) is corrupt: {exc!r}")
        return
    except KernelError as exc:
        violated(law, f"unexpected {exc!r}")
    check(
        is_zero and not broken_rest, law, f"version {version} loaded (broken rest: {broken_rest})"
    )


def law_unknown_types(
    header: Mapping[str, Any],
    log: Any,
    position: int,
    ignorable: bool,
    type_: str = "x-unknown/thing",
    *,
    implementation: Implementation = KERNEL,
) -> None:
    """P41: an event of a type outside the known vocabulary makes load fail with
    `UnsupportedFormat` unless it is `ignorable`, when it is returned verbatim and derivation
    is unchanged."""
    from properties._mutations import insert_event

    law = f"P41 unknown types ({type_}, ignorable={ignorable})"
    wire = as_wire(log)
    k = position % (len(wire) + 1)
    unknown: dict[str, Any] = {"type": type_, "seq": 0, "time": 7, "data": {"opaque": [1, "x"]}}
    if ignorable:
        unknown["ignorable"] = True
    edited = insert_event(wire, k, unknown)
    events = as_events(edited)
    data = write_jsonl(header, events)
    try:
        loaded = load_jsonl(data, now=0)
    except UnsupportedFormat as exc:
        check(not ignorable, law, f"an ignorable unknown event was refused: {exc!r}", log=edited)
        return
    except KernelError as exc:
        violated(law, f"load raised {exc!r}", log=edited)
    check(ignorable, law, "a required unknown event type was accepted", log=edited)
    check(
        _json(loaded.events) == edited and not loaded.closers,
        law,
        "load did not return the stored events verbatim",
        log=edited,
    )
    check(
        same_json(
            list(implementation.derive_messages(loaded.events)),
            list(implementation.derive_messages(as_events(wire))),
        ),
        law,
        "inserting an ignorable event changed derivation",
        log=edited,
    )


def law_byte_exact_writer(header: Mapping[str, Any], log: Any, pack: bool = True) -> None:
    """P43a: `write_jsonl(h, L)` is valid UTF-8, each line parses back to its record, and the
    bytes are the spelling rules of docs/format/persistence.md §2.4 applied to
    `pack_chunk_rows(L)`."""
    law = "P43a byte-exact writer"
    events = as_events(log)
    wire = as_wire(log)
    data = write_jsonl(header, events, pack_chunks=pack)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        violated(law, f"output is not UTF-8: {exc}", log=wire)
    records = pack_chunk_rows(events) if pack else events
    by_seq = {e["seq"]: e for e in wire}
    expected_lines = [header_line(header)]
    for record in records:
        if isinstance(record, Event):
            expected_lines.append(stringify(by_seq[record.seq]))
        else:
            row = thaw(record)
            keys = list(row["data"])
            order = (
                ["turn", "step", "index", "dt", "texts"]
                if row["type"] != "tool-call-chunks"
                else [
                    "turn",
                    "step",
                    "index",
                    "dt",
                    "id",
                    *(["name"] if "name" in row["data"] else []),
                    "args",
                ]
            )
            check(
                list(row) == ["type", "seq0", "time0", "data"] and keys == order,
                law,
                f"row member order {list(row)} / {keys}",
            )
            expected_lines.append(stringify(row))
    expected = "\n".join(expected_lines) + "\n"
    if text != expected:
        got_lines = text.split("\n")
        exp_lines = expected.split("\n")
        first = next(
            (i for i, (a, b) in enumerate(zip(got_lines, exp_lines, strict=False)) if a != b),
            min(len(got_lines), len(exp_lines)),
        )
        violated(
            law,
            f"bytes differ from the spelling rules at line {first}",
            log=wire,
            written=got_lines[first] if first < len(got_lines) else None,
            expected=exp_lines[first] if first < len(exp_lines) else None,
        )
    for line, record in zip(text.split("\n")[1:], records, strict=False):
        parsed = js_parse(line)
        original = by_seq[record.seq] if isinstance(record, Event) else thaw(record)
        check(
            same_json(parsed, original),
            law,
            "a line does not parse back to its record",
            line=line,
        )


BAD_LINES: dict[str, bytes] = {
    "NaN": b'{"type":"x","seq":1,"time":NaN,"data":1}',
    "Infinity": b'{"type":"x","seq":1,"time":1,"data":Infinity}',
    "-Infinity": b'{"type":"x","seq":1,"time":1,"data":-Infinity}',
    "blank": b"",
    "carriage return only": b"\r",
    "array": b"[1,2]",
    "number": b"42",
    "string": b'"turn/end"',
    "null": b"null",
    "invalid UTF-8": b'{"type":"x\xff","seq":1,"time":1,"data":1}',
    "long number": b"1234567890123456.5",
    "lone surrogate string": b'"\\ud800"',
}
"""The lines P43b inserts, by the `kind` `law_strict_record_parsing` takes."""


def _outcome(data: bytes) -> tuple[str, Any]:
    try:
        loaded = load_jsonl(data, now=0)
    except KernelError as exc:
        return type(exc).__name__, None
    return "ok", (_json(loaded.events), loaded.committed_bytes, loaded.torn)


def law_strict_record_parsing(
    header: Mapping[str, Any], log: Any, kind: str, position: int
) -> None:
    """P43b: inserting a line with a bare NaN/Infinity token, a blank line or a non-object JSON
    value behaves exactly like inserting `{not json`. `kind` is a key of `BAD_LINES`; the line
    goes before record `position % (records + 1)`."""
    law = f"P43b strict record parsing ({kind})"
    data = write_jsonl(header, as_events(log))
    head, *_ = data.split(b"\n", 1)
    lines = record_lines(data)
    k = position % (len(lines) + 1)

    def with_line(bad: bytes) -> bytes:
        return b"\n".join([head, *lines[:k], bad, *lines[k:]]) + b"\n"

    got, reference = _outcome(with_line(BAD_LINES[kind])), _outcome(with_line(b"{not json"))
    check(
        got == reference,
        law,
        f"loading with the bad line gives {got[0]}, with '{{not json' {reference[0]}",
        log=as_wire(log),
        position=k,
    )


def law_crlf_lines(header: Mapping[str, Any], log: Any) -> None:
    """P43b (CRLF): converting every `\\n` to `\\r\\n` changes no decoded event and moves
    `committed` by the number of lines before it."""
    law = "P43b CRLF lines"
    data = write_jsonl(header, as_events(log))
    crlf = data.replace(b"\n", b"\r\n")
    a, b = load_jsonl(data, now=0), load_jsonl(crlf, now=0)
    check(
        _json(a.events) == _json(b.events), law, "CRLF changed the decoded events", log=as_wire(log)
    )
    lines = data[: a.committed_bytes].count(b"\n")
    check(
        b.committed_bytes == a.committed_bytes + lines and b.torn == a.torn,
        law,
        f"committed {b.committed_bytes}, expected {a.committed_bytes} + {lines}",
    )


def law_legacy_refused_on_load(header: Mapping[str, Any], case: Any) -> None:
    """P13 (load): a stored log holding retired vocabulary fails to load as a corruption-family
    error caused by `LegacyFormat` (docs/format/admission.md §7)."""
    law = f"P13 legacy refusal on load [{case.label} at {case.position}]"
    wire = list(case.events)
    lines = [header_line(header), *(stringify(e) for e in wire)]
    data = ("\n".join(lines) + "\n").encode("utf-8")
    try:
        load_jsonl(data, now=0)
    except CorruptLog as exc:
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, LegacyFormat):
            cause = cause.__cause__
        check(cause is not None, law, f"CorruptLog not caused by LegacyFormat: {exc!r}", log=wire)
        return
    except KernelError as exc:
        violated(law, f"load raised {exc!r}, not a CorruptLog caused by LegacyFormat", log=wire)
    violated(law, "a log with legacy vocabulary loaded", log=wire)
