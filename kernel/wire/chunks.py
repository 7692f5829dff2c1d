"""Packed chunk rows (docs/format/events.md §7): a run of delta chunks as one record, and back.

A row is storage only: expanding a packed row yields exactly the events that
were packed. Rows are handed out as read-only `FrozenObject`s whose member
order is the writer's order of §7.1 (it is part of the byte-exact JSONL
output); expansion checks every bound of §7.6 in exact integer arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import pairwise
from operator import attrgetter
from typing import Any, Final, NamedTuple, cast, overload

from kernel.errors import KernelError, MalformedChunkRow, ProvenanceError
from kernel.values.events import (
    ASSISTANT_CHUNK,
    REASONING_CHUNKS,
    ROW_TAGS,
    TEXT_CHUNKS,
    TOOL_CALL_CHUNKS,
    Event,
    LoadedEvents,
)
from kernel.values.json import MAX_SAFE_INTEGER, FrozenObject, raw, safe_int, summary, view
from kernel.wire.codec import check_event, expand_ranges, has_ranges, iter_events
from kernel.wire.jsontext import encode_json_bytes

__all__ = (
    "TEXT_CHUNKS",
    "REASONING_CHUNKS",
    "TOOL_CALL_CHUNKS",
    "ROW_TAGS",
    "MIN_RUN",
    "StorageRecord",
    "is_chunk_row",
    "pack_chunk_rows",
    "expand_chunk_row",
    "expand_storage_records",
    "expand_row_wire",
    "LoadedRow",
    "loaded_row",
    "is_plain_chunk",
)

MIN_RUN: Final = 3
"""A run shorter than this is stored as its individual events (§7.3)."""

StorageRecord = Event | FrozenObject
"""One stored record: a scalar event, or a chunk row `{type, seq0, time0, data}`."""

_TEXT_DELTA: Final = "text-delta"
_REASONING_DELTA: Final = "reasoning-delta"
_TOOL_CALL_DELTA: Final = "tool-call-delta"
_TAG_OF: Final = {
    _TEXT_DELTA: TEXT_CHUNKS,
    _REASONING_DELTA: REASONING_CHUNKS,
    _TOOL_CALL_DELTA: TOOL_CALL_CHUNKS,
}
_DELTA_OF: Final = {tag: delta for delta, tag in _TAG_OF.items()}
_TEXT_ROW_KEYS: Final = frozenset({"turn", "step", "index", "dt", "texts"})
_TOOL_ROW_KEYS: Final = frozenset({"turn", "step", "index", "id", "dt", "args"})
_NAMED_TOOL_ROW_KEYS: Final = _TOOL_ROW_KEYS | {"name"}
_ROW_ENVELOPE_KEYS: Final = frozenset({"type", "seq0", "time0", "data"})


def _number(value: Any) -> bool:
    t = type(value)
    return t is int or t is float


def _lossless_number(value: Any) -> bool:
    """True when a number survives a double round trip unchanged (no -0.0, inf, big int)."""
    if type(value) is int:
        return -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER
    if type(value) is float:
        return math.isfinite(value) and (value != 0.0 or math.copysign(1.0, value) > 0)
    return False


def is_chunk_row(value: Any) -> bool:
    """True for an object whose `type` is one of the three row tags (docs/format/events.md §7.5)."""
    if not issubclass(type(value), Mapping):
        return False
    tag = value.get("type")
    return type(tag) is str and tag in ROW_TAGS


# -- packing ------------------------------------------------------------------------------------

# A member is `(seq, time, run_key, text)`; two eligible events continue one run when their
# keys are equal, their seqs adjacent and their time gap a safe integer (§7.3).
_Member = tuple[int, int, tuple[Any, ...], str]


_WIRE_KEYS: Final = frozenset({"type", "seq", "time", "data"})


def _event_member(event: Event) -> _Member | None:
    """The packing facts of an eligible `Event` (§7.2), or None when it must stay scalar.

    A loaded chunk whose payload was not read yet has its facts read off its lazy
    source, so packing a loaded log again builds no payload: `chunk_member(k)` gives
    the key and text `_member` finds in the payload the source builds, False for a
    chunk that never packs, or None when the source cannot tell (the payload is read).
    """
    if event.surface_op is not None or event.source_event_seqs is not None or event.ignorable:
        return None
    data = event.data
    if type(data) is FrozenObject and type(event.type) is str and event.type == ASSISTANT_CHUNK:
        source = data._value
        if type(source) is not dict:
            facts = getattr(source, "chunk_member", None)
            if facts is not None:
                seq, time = safe_int(event.seq), safe_int(event.time)
                if seq is None or seq < 0 or time is None:
                    return None
                found = facts(data._member)
                if found is False:
                    return None
                if found is not None:
                    return seq, time, found[0], found[1]
    return _member(event.type, event.seq, event.time, data)


def _wire_member(record: Mapping[str, Any]) -> _Member | None:
    """The packing facts of an eligible wire object (§7.2): exactly `{type, seq, time, data}`.

    Nothing is validated: a wire object of any other shape, or holding values
    that are not plain JSON, is simply not eligible and is stored verbatim.
    """
    obj = raw(record)
    if type(obj) is not dict or len(obj) != 4 or obj.keys() != _WIRE_KEYS:
        return None
    return _member(obj["type"], obj["seq"], obj["time"], obj["data"])


def _member(event_type: Any, seq: Any, time: Any, data: Any) -> _Member | None:
    """The facts of an eligible envelope's fields (§7.2, rules 1 and 3-5), or None."""
    if type(event_type) is not str or event_type != ASSISTANT_CHUNK:
        return None
    seq, time = safe_int(seq), safe_int(time)
    if seq is None or seq < 0 or time is None:
        return None
    data = raw(data)
    if type(data) is not dict or len(data) != 3:
        return None
    chunk = raw(data.get("chunk"))
    turn, step = data.get("turn"), data.get("step")
    if type(chunk) is not dict or not _number(turn) or not _number(step):
        return None
    kind, index = chunk.get("type"), chunk.get("index")
    if not _number(index):
        return None
    if kind in (_TEXT_DELTA, _REASONING_DELTA):
        text = chunk.get("text")
        if len(chunk) != 3 or type(text) is not str:
            return None
        return seq, time, (kind, turn, step, index), text
    if kind == _TOOL_CALL_DELTA:
        call_id, args = chunk.get("id"), chunk.get("argumentsDelta")
        if type(call_id) is not str or type(args) is not str:
            return None
        if len(chunk) == 4:
            return seq, time, (kind, turn, step, index, call_id, False, None), args
        name = chunk.get("name")
        if len(chunk) == 5 and type(name) is str:
            return seq, time, (kind, turn, step, index, call_id, True, name), args
    return None


def _row(members: list[_Member]) -> FrozenObject:
    """The chunk row of a run, members in order, keys in the writer's order (§7.1)."""
    seq0, time0, key, _ = members[0]
    dt = [members[k][1] - members[k - 1][1] for k in range(1, len(members))]
    return _row_of(seq0, time0, key, dt, [m[3] for m in members])


def _row_of(
    seq0: int, time0: int, key: tuple[Any, ...], dt: list[int], texts: list[str]
) -> FrozenObject:
    kind, turn, step, index = key[0], key[1], key[2], key[3]
    data: dict[str, Any]
    if kind == _TOOL_CALL_DELTA:
        data = {"turn": turn, "step": step, "index": index, "dt": dt, "id": key[4]}
        if key[5]:
            data["name"] = key[6]
        data["args"] = texts
    else:
        data = {"turn": turn, "step": step, "index": index, "dt": dt, "texts": texts}
    row = {"type": _TAG_OF[kind], "seq0": seq0, "time0": time0, "data": data}
    lossless = _lossless_number(turn) and _lossless_number(step) and _lossless_number(index)
    result: FrozenObject = view(row, lossless=lossless)
    return result


def _data_size(members: list[_Member]) -> int:
    return len(encode_json_bytes(raw(_row(members))["data"]))


def _emit_bounded(
    run: list[tuple[Event | Mapping[str, Any], _Member]],
    out: list[StorageRecord | Mapping[str, Any]],
    max_members: int | None,
    max_data_bytes: int | None,
) -> None:
    """Cut a closed run into rows of 3..max_members members and at most max_data_bytes (§7.4)."""
    offset = 0
    cap = len(run) if max_members is None else max_members
    while len(run) - offset >= MIN_RUN:
        n = min(len(run) - offset, cap)
        members = [m for _, m in run[offset : offset + n]]
        if max_data_bytes is None or _data_size(members) <= max_data_bytes:
            out.append(_row(members))
            offset += n
            continue
        low, high, best = MIN_RUN, n - 1, 0  # largest m in [3, n-1] whose row fits
        while low <= high:
            mid = (low + high) // 2
            if _data_size(members[:mid]) <= max_data_bytes:
                best, low = mid, mid + 1
            else:
                high = mid - 1
        if best:
            out.append(_row(members[:best]))
            offset += best
        else:
            out.append(run[offset][0])
            offset += 1
    out.extend(event for event, _ in run[offset:])


@overload
def pack_chunk_rows(
    events: Iterable[Event],
    *,
    max_members: int | None = None,
    max_data_bytes: int | None = None,
) -> tuple[StorageRecord, ...]: ...


@overload
def pack_chunk_rows(
    events: Iterable[Event | Mapping[str, Any]],
    *,
    max_members: int | None = None,
    max_data_bytes: int | None = None,
) -> tuple[StorageRecord | Mapping[str, Any], ...]: ...


def pack_chunk_rows(
    events: Iterable[Event | Mapping[str, Any]],
    *,
    max_members: int | None = None,
    max_data_bytes: int | None = None,
) -> tuple[StorageRecord | Mapping[str, Any], ...]:
    """The storage records of a batch: runs of 3+ delta chunks become rows
    (docs/format/events.md §7).

    Each item is an `Event` or a wire object (a mapping spelled as on disk).
    Every event that does not pack (§7.2: any other type or shape, surface
    metadata, a fractional `time`, ...) is returned verbatim, the very object
    given; a row is a `FrozenObject` `{type, seq0, time0, data}`. Wire objects
    are not validated: one that is not exactly eligible is simply stored as it
    is. Without bounds this is the JSONL writer's packing; the SQLite layout
    passes `max_members=1024` and `max_data_bytes=1 << 20`
    (docs/format/persistence.md §7.4). Packing is stateless per call: a run
    split across two batches packs independently in each. An `Event` item must
    have fields of their types (`check_event` says which not); an item that is
    neither an `Event` nor a mapping is `InvalidEnvelope`.

    >>> e = [Event("assistant/chunk", s, 10 * s, {"turn": 1, "step": 1,
    ...       "chunk": {"type": "text-delta", "index": 0, "text": t}}) for s, t in enumerate("abc")]
    >>> dict(pack_chunk_rows(e)[0])["seq0"], len(pack_chunk_rows(e))
    (0, 1)
    """
    if max_members is not None and (type(max_members) is not int or max_members < MIN_RUN):
        raise KernelError(
            f"max_members must be an int of at least {MIN_RUN}, got {summary(max_members)}"
        )
    if max_data_bytes is not None and (type(max_data_bytes) is not int or max_data_bytes < 0):
        raise KernelError(
            f"max_data_bytes must be a non-negative int, got {summary(max_data_bytes)}"
        )
    bounded = max_members is not None or max_data_bytes is not None
    log: Sequence[Any] = (
        cast("Sequence[Any]", events)
        if issubclass(type(events), (tuple, list))  # type(): a value may claim any __class__
        else tuple(iter_events(events))
    )
    out: list[StorageRecord | Mapping[str, Any]] = []
    run: list[tuple[Event | Mapping[str, Any], _Member]] = []

    def close_run() -> None:
        if len(run) < MIN_RUN:
            out.extend(event for event, _ in run)
        elif bounded:
            _emit_bounded(run, out, max_members, max_data_bytes)
        else:
            out.append(_row([m for _, m in run]))
        run.clear()

    loaded = issubclass(type(log), LoadedEvents)  # the loader's own events are well typed
    # The facts last read, by index: `_stands_alone` reads the item after a loaded row,
    # which the loop then reads again (a stored line's facts cost a decode).
    last_read: list[Any] = [-1, None]

    def facts(index: int) -> tuple[Event | Mapping[str, Any], _Member | None]:
        if index == last_read[0]:
            found: tuple[Event | Mapping[str, Any], _Member | None] = last_read[1]
            return found
        item = log[index]
        if issubclass(type(item), Mapping):
            found = item, _wire_member(item)
        else:
            event = item if loaded else _checked(item, index)
            found = event, _event_member(event)
        last_read[0], last_read[1] = index, found
        return found

    index, size = 0, len(log)
    while index < size:
        item = log[index]
        if type(item) is Event:
            kind = item.type
            if kind is ASSISTANT_CHUNK:
                row = None if bounded else loaded_row(log, index)
                if row is not None and _stands_alone(row, run, facts, index + row[0], size):
                    close_run()
                    out.append(_row_of(*row[1:]))
                    index += row[0]
                    continue
            elif type(kind) is str and kind != ASSISTANT_CHUNK:  # never packs (§7.2)
                out_of_run = item if loaded else _checked(item, index)
                if run:
                    close_run()
                out.append(out_of_run)
                index += 1
                continue
        event, member = facts(index)
        index += 1
        if member is None:
            close_run()
            out.append(event)
            continue
        if run and not _continues(run[-1][1], member):
            close_run()
        run.append((event, member))
    close_run()
    return tuple(out)


def _checked(item: Any, index: int) -> Event:
    """`check_event` of item `index`, its name spelled only for an error (spelling it costs
    a third of the check)."""
    try:
        return check_event(item, index=index)
    except KernelError:
        return check_event(item, f"pack_chunk_rows: item {index}", index)


def _continues(last: _Member, member: _Member) -> bool:
    """Whether `member` extends a run that ends with `last` (§7.3)."""
    gap = member[1] - last[1]
    return (
        member[2] == last[2]
        and member[0] == last[0] + 1
        and -MAX_SAFE_INTEGER <= gap <= MAX_SAFE_INTEGER
    )


_TIME: Final = attrgetter("time")


class LoadedRow(NamedTuple):
    """A chunk row a run of loaded members packs into, read off the row they were loaded
    from: their number, then the fields `_row_of` writes."""

    members: int
    seq0: int
    time0: int
    key: tuple[Any, ...]
    dt: list[int]
    texts: list[str]


def loaded_row(log: Sequence[Any], start: int) -> LoadedRow | None:
    """The row whose members `log[start:]` begins with, every one unchanged, or None.

    A chunk row a load read is the lazy payload source of its members
    (`chunk_run()` gives their run key and texts, as `chunk_member(k)` gives each).
    When the events from `start` on are its members 0, 1, ... in order, with the
    seqs, times and envelope fields packing needs (§7.2), the row they pack into is
    known without reading a member: this is `pack_chunk_rows`' answer for them
    whenever they form a run of their own. `log[start]` is an `Event` typed
    `assistant/chunk` (the caller looked). In a loader's own tuple (`LoadedEvents`)
    the members are the loader's, so only their times are read; in any other
    sequence each member is checked to be the loaded one, field by field.
    """
    first = log[start]
    data = first.data
    if type(data) is not FrozenObject or data._member != 0:
        return None
    source = data._value
    chunk_run = getattr(source, "chunk_run", None)
    if chunk_run is None:
        return None
    key, texts = chunk_run()
    size = len(texts)
    seq0 = first.seq
    if (
        size < MIN_RUN
        or start + size > len(log)
        or type(seq0) is not int
        or not 0 <= seq0 <= MAX_SAFE_INTEGER - size + 1
    ):
        return None
    if issubclass(type(log), LoadedEvents):  # the loader's own events: the members stand unchanged
        return _row_read(seq0, key, texts, list(map(_TIME, log[start : start + size])))
    members = log[start : start + size]
    for k, event in enumerate(members):
        data = event.data
        if not (
            type(event) is Event
            and type(data) is FrozenObject
            and data._value is source
            and data._member == k
            and event.seq == seq0 + k
            and is_plain_chunk(event)
        ):
            return None
    return _row_read(seq0, key, texts, list(map(_TIME, members)))


def is_plain_chunk(event: Event) -> bool:
    """Whether `event` is an `assistant/chunk` with a safe integer seq and time, no marker,
    no citations and not ignorable: an envelope a chunk-row member has (§7.4).

    >>> is_plain_chunk(Event("assistant/chunk", 3, 10, {}))
    True
    """
    seq, time, kind = event.seq, event.time, event.type
    return (
        (kind is ASSISTANT_CHUNK or (type(kind) is str and kind == ASSISTANT_CHUNK))
        and type(seq) is int
        and 0 <= seq <= MAX_SAFE_INTEGER
        and type(time) is int
        and -MAX_SAFE_INTEGER <= time <= MAX_SAFE_INTEGER
        and event.surface_op is None
        and event.source_event_seqs is None
        and event.ignorable is False
    )


def _row_read(
    seq0: int, key: tuple[Any, ...], texts: list[str], times: list[int]
) -> LoadedRow | None:
    dt = [b - a for a, b in pairwise(times)]
    if min(dt) < -MAX_SAFE_INTEGER or max(dt) > MAX_SAFE_INTEGER:
        return None
    return LoadedRow(len(texts), seq0, times[0], key, dt, list(texts))


def _stands_alone(
    row: LoadedRow,
    run: list[tuple[Event | Mapping[str, Any], _Member]],
    facts: Callable[[int], tuple[Event | Mapping[str, Any], _Member | None]],
    after: int,
    size: int,
) -> bool:
    """Whether a loaded row's members are a whole run: the run before them does not
    continue into them, nor they into the item after them (`facts` keeps what it read of
    that item for the loop; an item that cannot be read is left to the member-by-member
    path to report)."""
    members, seq0, time0, key, dt, _ = row
    if run and _continues(run[-1][1], (seq0, time0, key, "")):
        return False
    if after == size:
        return True
    try:
        _, member = facts(after)
    except KernelError:
        return False
    last = (seq0 + members - 1, time0 + sum(dt), key, "")
    return member is None or not _continues(last, member)


# -- expansion ----------------------------------------------------------------------------------


def _malformed(where: str, detail: str) -> MalformedChunkRow:
    return MalformedChunkRow(f"{where}: malformed chunk row: {detail} (docs/format/events.md §7.6)")


def expand_row_wire(value: Any, where: str = "chunk row") -> tuple[list[dict[str, Any]], bool]:
    """Validate a row-tagged object (§7.6) and expand it into plain wire event dicts (§7.4).

    Returns the member dicts (fresh containers, keys in §7.4 order) and whether
    their values are lossless JSON. Raises `MalformedChunkRow`.
    """
    row = raw(value)
    if type(row) is not dict and issubclass(type(row), Mapping):
        row = dict(row)
    if type(row) is not dict:
        raise _malformed(where, "not an object")
    tag = row.get("type")
    if type(tag) is not str or tag not in ROW_TAGS:
        raise _malformed(where, f"type {summary(tag)} is not a chunk-row tag")
    if len(row) != 4 or not row.keys() <= _ROW_ENVELOPE_KEYS:
        raise _malformed(
            where, f"envelope keys {summary(list(row))} are not exactly type, seq0, time0, data"
        )
    seq0 = safe_int(row["seq0"])
    if seq0 is None or seq0 < 0:
        raise _malformed(where, f"seq0 {summary(row['seq0'])} is not a non-negative safe integer")
    time0 = safe_int(row["time0"])
    if time0 is None:
        raise _malformed(where, f"time0 {summary(row['time0'])} is not a safe integer")
    data = raw(row["data"])
    if type(data) is not dict and issubclass(type(data), Mapping):
        data = dict(data)
    if type(data) is not dict:
        raise _malformed(where, "data is not an object")
    keys = data.keys()
    if tag == TOOL_CALL_CHUNKS:
        if keys != _TOOL_ROW_KEYS and keys != _NAMED_TOOL_ROW_KEYS:
            raise _malformed(
                where, f"tool-call row data keys {summary(list(data))} are not allowed"
            )
        call_id = data["id"]
        if type(call_id) is not str:
            raise _malformed(where, "id is not a string")
        named = "name" in data
        name = data.get("name")
        if named and type(name) is not str:
            raise _malformed(where, "name is not a string")
        members = raw(data["args"])
        members_key = "args"
    else:
        if keys != _TEXT_ROW_KEYS:
            raise _malformed(where, f"{tag} data keys {summary(list(data))} are not allowed")
        members = raw(data["texts"])
        members_key = "texts"
    turn, step, index = data["turn"], data["step"], data["index"]
    if not (_number(turn) and _number(step) and _number(index)):
        raise _malformed(where, "turn, step and index must be numbers")
    if type(members) is tuple:
        members = list(members)
    if type(members) is not list or not members:
        raise _malformed(where, f"{members_key} is not a non-empty array")
    for text in members:
        if type(text) is not str:
            raise _malformed(where, f"{members_key} holds a non-string {summary(text)}")
    dt = raw(data["dt"])
    if type(dt) is tuple:
        dt = list(dt)
    if type(dt) is not list:
        raise _malformed(where, "dt is not an array")
    gaps: list[int] = []
    for gap in dt:
        g = safe_int(gap)
        if g is None:
            raise _malformed(where, f"dt holds {summary(gap)}, not a safe integer")
        gaps.append(g)
    n = len(members)
    if len(gaps) != n - 1:
        raise _malformed(where, f"dt has {len(gaps)} gaps for {n} members (needs {n - 1})")
    if seq0 + n - 1 > MAX_SAFE_INTEGER:
        raise _malformed(where, f"last member seq {seq0 + n - 1} is beyond 2**53 - 1")
    times = [time0]
    time = time0
    for g in gaps:
        time += g
        if not -MAX_SAFE_INTEGER <= time <= MAX_SAFE_INTEGER:
            raise _malformed(where, f"member time {time} leaves the safe-integer range")
        times.append(time)
    kind = _DELTA_OF[tag]
    out: list[dict[str, Any]] = []
    if tag == TOOL_CALL_CHUNKS:
        for k, text in enumerate(members):
            chunk: dict[str, Any] = {"type": kind, "index": index, "id": call_id}
            if named:
                chunk["name"] = name
            chunk["argumentsDelta"] = text
            out.append(
                {
                    "type": ASSISTANT_CHUNK,
                    "seq": seq0 + k,
                    "time": times[k],
                    "data": {"turn": turn, "step": step, "chunk": chunk},
                }
            )
    else:
        for k, text in enumerate(members):
            out.append(
                {
                    "type": ASSISTANT_CHUNK,
                    "seq": seq0 + k,
                    "time": times[k],
                    "data": {
                        "turn": turn,
                        "step": step,
                        "chunk": {"type": kind, "index": index, "text": text},
                    },
                }
            )
    lossless = _lossless_number(turn) and _lossless_number(step) and _lossless_number(index)
    return out, lossless


def expand_chunk_row(value: Any, where: str = "chunk row") -> tuple[Event, ...]:
    """The events a chunk row packs (docs/format/events.md §7.4); `MalformedChunkRow` if invalid.

    >>> data = {"turn": 2, "step": 1, "index": 0, "dt": [4, -1], "texts": ["He", "llo", "!"]}
    >>> row = {"type": "text-chunks", "seq0": 12, "time0": 5000, "data": data}
    >>> [(e.seq, e.time, e.data["chunk"]["text"]) for e in expand_chunk_row(row)]
    [(12, 5000, 'He'), (13, 5004, 'llo'), (14, 5003, '!')]
    """
    wires, lossless = expand_row_wire(value, where)
    return tuple(
        Event(
            type=ASSISTANT_CHUNK,
            seq=w["seq"],
            time=w["time"],
            data=view(w["data"], lossless=lossless),
        )
        for w in wires
    )


def expand_storage_records(records: Iterable[Any]) -> tuple[Any, ...]:
    """Decode stored records (docs/format/events.md §7.5): expand chunk rows, pass the rest.

    A row-tagged object (`type` one of `ROW_TAGS`) is validated and expanded
    into its member `Event`s, `MalformedChunkRow` when it is not valid (§7.6:
    never reinterpreted as an event). Every other stored value (an object
    without a row tag or with an unknown tag, a string, a number, null, an
    array) is passed through unchanged, the very object given, as one event
    that is not yet validated: R1, the envelope rules and seq contiguity are
    the loader's later checks (`event_from_json`, `SessionLog.restore`), not
    the decoder's. An `Event` passes through once `check_event` accepts its
    field types. A record whose `sourceEventSeqs` uses the ranged spelling of
    docs/format/persistence.md §2.5 is passed as a plain copy with the list
    expanded (`ProvenanceError`, R7c, for a malformed one).

    >>> row = {"type": "text-chunks", "seq0": 1, "time0": 5,
    ...        "data": {"turn": 1, "step": 1, "index": 0, "dt": [1], "texts": ["a", "b"]}}
    >>> [getattr(r, "seq", r) for r in expand_storage_records(["x", row, None])]
    ['x', 1, 2, None]
    """
    out: list[Any] = []
    for index, record in enumerate(iter_events(records)):
        where = f"storage record {index}"
        try:
            if type(record) is Event:
                out.append(check_event(record, where))
            elif is_chunk_row(record):
                out.extend(expand_chunk_row(record, where))
            else:
                out.append(_with_ranges_expanded(record, where))
        except KernelError as exc:
            if exc.index is None:
                exc.index = index
            raise
    return tuple(out)


def _with_ranges_expanded(record: Any, where: str) -> Any:
    """`record` itself, or a plain copy whose ranged `sourceEventSeqs` is expanded."""
    plain = raw(record)
    if type(plain) is not dict:
        return record
    cited = raw(plain.get("sourceEventSeqs"))
    if type(cited) is not list or not has_ranges(cited):
        return record
    expanded = expand_ranges([raw(item) for item in cited], plain.get("seq"))
    if type(expanded) is str:
        raise ProvenanceError(f"{where}: {expanded}")
    return {**plain, "sourceEventSeqs": expanded}
