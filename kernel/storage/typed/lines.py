"""The typed load path: stored lines to admitted events at about the cost of decoding them.

Each line is decoded once against the typed envelopes of `kernel.storage.typed.schema`,
which check the per-event rules in C; events keep their payload undecoded
(`kernel.values.json.lazy_view`) and chunk-row members are built on first read. Only
the rules that need the log's state run here in Python: seq contiguity and the
torn tail, the surface plan (R7-R9) and the closers.

The one thing to know before changing it: this path may only *accept*. Whenever
it meets a line the schema does not cover, or any rule fails, it answers None
and the caller runs the exact pipeline (`kernel.storage.load.plan_load`), which
decides and names the error. A torn tail is handled here, since it is no error.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from itertools import accumulate, chain, compress, count, repeat
from operator import attrgetter, countOf
from typing import Any, Final, NamedTuple

import msgspec
import orjson
from msgspec import UNSET, UnsetType

from kernel.admission.admit import admit_wire_event, admitted_as_it_is
from kernel.admission.envelope import are_safe_seqs, is_safe_seq
from kernel.admission.provenance import PRESENT_NULL
from kernel.errors import KernelError
from kernel.folds.closers import interrupted_turn_closers
from kernel.folds.surface import AdmittedEvents, positions_of_type, surface_fold_over
from kernel.storage.scan import close_scan, read_record, row_gap, seq_gap
from kernel.storage.sqlite_rows import RowLines
from kernel.storage.typed.schema import (
    CALL_IDS,
    CROSS_CHECKS,
    DECODE_ERRORS,
    ENVELOPE_TYPES,
    STEPPED_TYPES,
    ChunkRow,
    OtherEnvelope,
    ToolCallRow,
    decode_ascii_line,
    decode_line,
    decode_other,
    delta_facts,
)
from kernel.values.events import (
    APPEND,
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    REQUEST_HEADER,
    SURFACE_TYPES,
    Append,
    Event,
    Replace,
    SessionHeader,
)
from kernel.values.json import MAX_SAFE_INTEGER, FrozenArray, FrozenObject, lazy_view, view
from kernel.wire.chunks import is_plain_chunk, loaded_row
from kernel.wire.codec import (
    event_to_wire,
    header_from_json,
    interned_order,
    parse_source_seqs,
    surface_op_wire,
)
from kernel.wire.jsontext import parse_json, parse_json_shaped
from kernel.wire.legacy import STEERING_MESSAGE, may_need_normalizing

__all__ = (
    "TypedScan",
    "Declined",
    "scan_events",
    "plan_events",
    "plan_decoded_events",
    "scan_row_lines",
    "loaded_wire",
    "loaded_member_lines",
)

_MEMBER_ORDER: Final = ("type", "seq", "time", "data")
_KEYS_DECODER: Final = msgspec.json.Decoder(dict[str, msgspec.Raw])
_OPEN_OBJECT, _OPEN_ARRAY = ord("{"), ord("[")
_LONG_LITERAL: Final = b"0" * 300


def _number_shapes() -> bytes:
    """A translation table: every digit to `0`, `E` to `e` (signs are deleted as well)."""
    table = bytearray(range(256))
    table[ord("0") : ord("9") + 1] = b"0" * 10
    table[ord("E")] = ord("e")
    return bytes(table)


_NUMBER_SHAPES: Final = _number_shapes()

TypedScan = tuple[int, int, "str | None"]
"""`(committed, dropped, reason)`, as `kernel.storage.scan.scan_records` returns them."""


class Declined(NamedTuple):
    """Where `scan_events` left the lines to the exact scan: the line's offset and number.

    The events before it are complete and admitted; the exact scan continues here.
    """

    offset: int
    line_no: int


def _no_lossy_number(line: bytes) -> bool:
    """True when no number of `line` can parse to a value outside lossless JSON.

    Parsing leaves one kind of defect only: a negative zero, or a double that
    overflows to an infinity (or underflows to -0.0), which needs an exponent of
    three digits or a literal of hundreds of digits. Digits are mapped to `0`,
    `E` to `e`, and signs deleted, so one search finds any such exponent (a
    number's exponent always follows a digit: `0e000`, which words and ids such
    as `rewrite-166` do not spell). Deleting can only join characters that were
    apart, so the answer errs one way: False when unsure (the same bytes inside
    a string, or joined by the deletion), and the value is then walked instead.
    """
    # `find`, not `in` (see `kernel.wire.jsontext._spelled_alike`).
    if line.find(b"-0") >= 0 and (
        line.find(b"-0.") >= 0 or line.find(b"-0e") >= 0 or line.find(b"-0E") >= 0
    ):
        return False
    shapes = line.translate(_NUMBER_SHAPES, b"+-")
    return not (
        shapes.find(b"0e000") >= 0 or (len(shapes) >= 300 and shapes.find(_LONG_LITERAL) >= 0)
    )


class _PeekedData(msgspec.Struct, gc=False):
    """The top-level scalars folds read most (turn, step, call id); other members skipped."""

    turn: int | UnsetType = UNSET
    step: int | UnsetType = UNSET
    callId: str | UnsetType = UNSET


class _PeekedLine(msgspec.Struct, gc=False):
    data: _PeekedData


_PEEK_DECODER: Final = msgspec.json.Decoder(_PeekedLine)


class _BlockType(msgspec.Struct, gc=False):
    type: Any = None


class _BlockTypes(msgspec.Struct, gc=False):
    content: list[_BlockType]


class _MessageBlockTypes(msgspec.Struct, gc=False):
    message: _BlockTypes


class _BlockTypesLine(msgspec.Struct, gc=False):
    """The `type` of each content block of a message payload; every other member skipped."""

    data: _MessageBlockTypes


_BLOCK_TYPES_DECODER: Final = msgspec.json.Decoder(_BlockTypesLine)
_TYPE: Final = attrgetter("type")
_ON_SURFACE: Final = SURFACE_TYPES.__contains__
_PEEKABLE: Final = frozenset({"turn", "step", "callId"})


def _peek_line(line: bytes, keys: frozenset[str]) -> dict[str, Any] | None:
    """`keys` of a stored line's payload, decoded without building the payload.

    None (build it) for a key not peekable, a member of another type, or an integer
    the full reader would turn into a double (past 2**53).
    """
    if not keys <= _PEEKABLE:
        return None
    try:
        data = _PEEK_DECODER.decode(line).data
    except DECODE_ERRORS:
        return None
    found: dict[str, Any] = {}
    for key in keys:
        value = getattr(data, key)
        if value is UNSET:
            continue
        if type(value) is int and not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return None
        found[key] = value
    return found


class _StoredLine(msgspec.Struct, gc=False):
    """An event line whose payload and envelope member order are read when first needed.

    The source of the event's lazy `data` and its `wire_order`: `build` parses the
    line as the exact pipeline does and keeps the member order; `lossless` looks at
    the line's numbers only when asked (seeding asks; the view caches a yes, see
    `kernel.values.json.known_lossless`).
    """

    line: bytes
    order: tuple[str, ...] | None = None

    @property
    def lossless(self) -> bool:
        return _no_lossy_number(self.line)

    def build(self, member: int) -> Any:
        value = parse_json(self.line)
        if self.order is None:
            self.order = interned_order(value)
        return value["data"]

    def members(self, keys: frozenset[str]) -> dict[str, Any] | None:
        return _peek_line(self.line, keys)

    def count_blocks(self, block_type: str) -> int | None:
        """How many content blocks of the payload's `message` have `type` `block_type`, read
        without building the payload; None when the line does not decode to that shape."""
        try:
            blocks = _BLOCK_TYPES_DECODER.decode(self.line).data.message.content
        except DECODE_ERRORS:
            return None
        return countOf(map(_TYPE, blocks), block_type)

    def chunk_member(self, member: int) -> tuple[tuple[Any, ...], str] | bool | None:
        """The packing facts of the delta chunk this line stores, False for a chunk that is
        no delta, None when unsure (see `delta_facts`)."""
        return delta_facts(self.line)

    def keys(self) -> tuple[str, ...]:
        if self.order is None:
            self.order = interned_order(_KEYS_DECODER.decode(self.line))
        return self.order


class _SteppedLine(_StoredLine):
    """A `_StoredLine` of an event that names its turn (and step), with what the typed decode
    of the line read on the way: `turn` and `step` (0 for a payload without one).

    The invariant fold reads them (`kernel.values.json.LazySource`) instead of the line.
    """

    turn: int = 0
    step: int = 0


class _CallLine(_SteppedLine):
    """A `_SteppedLine` of a `tool/call` or `tool/result`, with its `call_id`: the call the
    payload makes or answers. A result shares its call's string."""

    call_id: str = ""


_ENVELOPE_KINDS: Final = {
    cls: (
        tag,
        CROSS_CHECKS.get(tag),
        tag in STEPPED_TYPES,
        CALL_IDS.get(tag),
        tag in SURFACE_TYPES,
        cls.__annotations__.get("data") is msgspec.Raw or tag == ASSISTANT_MESSAGE,
    )
    for cls, tag in ENVELOPE_TYPES.items()
}
"""What the scan does with a line of each typed envelope class, read once: its event type,
its cross check (`CROSS_CHECKS`, or None), whether the line keeps its payload's turn and
step (`STEPPED_TYPES`) and how it reads the call id (`CALL_IDS`, or None), whether the type
may touch the surface, and whether `_payload_view` makes the payload's view (an opaque
payload or an assistant message)."""


def loaded_wire(event: Event) -> tuple[dict[str, Any], tuple[bytes, bytes | None] | None] | None:
    """The wire object of an event a load read and nobody changed, parsed afresh from
    what the load kept, and the line it was parsed from with its shapes (for
    `kernel.wire.jsontext.encode_record_bytes`); None for any other event.

    The caller owns the dict, and the event's lazy payload stays unbuilt: a writer
    that spells a loaded log again reads each line once and keeps nothing. The
    object is the one `event_to_wire` gives once the payload is built (same
    members, values and member order), so both spell the same bytes. An event
    whose fields differ from what its line says (a copy made with other fields),
    or whose line spells its citations with ranges, is left to `event_to_wire`.
    """
    data = event.data
    if data.__class__ is not FrozenObject:
        return None
    source = data._value
    if isinstance(source, _StoredLine):
        return _line_wire(event, source) if event.wire_order is source else None
    if isinstance(source, (ChunkRow, ToolCallRow)):
        return _member_wire(event, source, data._member)
    return None


def loaded_member_lines(records: Sequence[Any], start: int) -> list[bytes] | None:
    """The exact lines of the events of one whole loaded chunk row, written one by one
    (unpacked), when `records[start:]` begins with them unchanged (`loaded_row`); else None.

    Each line is orjson's text of the member's wire object, unchecked: it holds safe
    integers (the seqs and times `loaded_row` checked, the turn, step and index the
    load checked), strings and fixed keys, which orjson spells as `JSON.stringify`
    does. A lone surrogate, which orjson refuses, gives None.
    """
    row = loaded_row(records, start)
    if row is None:
        return None
    members = records[start : start + row.members]
    if any(event.wire_order != _MEMBER_ORDER for event in members):
        return None
    source = members[0].data._value
    try:
        return [
            orjson.dumps(
                {"type": ASSISTANT_CHUNK, "seq": event.seq, "time": event.time, "data": build(k)}
            )
            for k, event, build in zip(count(), members, repeat(source.build))
        ]
    except orjson.JSONEncodeError:
        return None


def _line_wire(
    event: Event, source: _StoredLine
) -> tuple[dict[str, Any], tuple[bytes, bytes | None]] | None:
    if type(event.ignorable) is not bool:
        return None
    line = source.line
    try:
        wire, shapes = parse_json_shaped(line)
    except ValueError:
        return None
    members = 4
    op, sources = event.surface_op, event.source_event_seqs
    if op is not None:
        if not (
            type(op) is Append
            or (type(op) is Replace and is_safe_seq(op.start) and is_safe_seq(op.end))
        ):
            return None
        written = surface_op_wire(op)
        if wire.get("surfaceOp") != written:
            return None
        wire["surfaceOp"] = written  # the writer's member order, whatever the line's
        members += 1
    if sources is not None:
        # The line's list as it is (a ranged one reads differently from the tuple): the
        # writer spells it afresh (`kernel.storage.jsonl.encode_records`).
        if not are_safe_seqs(sources) or wire.get("sourceEventSeqs") != list(sources):
            return None
        members += 1
    if event.ignorable:
        if wire.get("ignorable") is not True:
            return None
        members += 1
    event_type, seq, time = event.type, event.seq, event.time
    if (
        len(wire) == members
        and "data" in wire
        and type(event_type) is str
        and event_type == wire.get("type")
        and type(seq) is int
        and type(wire.get("seq")) is int
        and seq == wire["seq"]
        and type(time) is int
        and type(wire.get("time")) is int
        and time == wire["time"]
    ):
        return wire, (line, shapes)
    return None


def _member_wire(
    event: Event, source: ChunkRow | ToolCallRow, member: int
) -> tuple[dict[str, Any], None] | None:
    if is_plain_chunk(event) and (
        event.wire_order is _MEMBER_ORDER or event.wire_order == _MEMBER_ORDER
    ):
        data = source.build(member)
        return {"type": ASSISTANT_CHUNK, "seq": event.seq, "time": event.time, "data": data}, None
    return None


def _safe_positive(value: Any) -> bool:
    return type(value) is int and 0 < value <= MAX_SAFE_INTEGER


def _row_members(row: ChunkRow | ToolCallRow) -> list[Event] | None:
    """The events of a chunk row (docs/format/events.md §7.4), or None when a rule might refuse it.

    The row must also admit: turn and step positive safe integers (R12), the index a
    safe integer (so its value reads the same in every reader).
    """
    data = row.data
    texts = data.texts if type(data).__name__ == "_TextRowData" else data.args  # type: ignore[union-attr]
    n = len(texts)
    seq0, dt = row.seq0, data.dt
    if (
        len(dt) != n - 1
        or seq0 + n - 1 > MAX_SAFE_INTEGER
        or not (_safe_positive(data.turn) and _safe_positive(data.step))
        or type(data.index) is not int
        or not -MAX_SAFE_INTEGER <= data.index <= MAX_SAFE_INTEGER
    ):
        return None
    times = list(accumulate(dt, initial=row.time0))
    if n > 1 and not (min(times) >= -MAX_SAFE_INTEGER and max(times) <= MAX_SAFE_INTEGER):
        return None
    del data.dt  # the row stays as its members' payload source; the times are in the events
    order = _MEMBER_ORDER
    # Member payloads are built from the row on first read (`lazy_view(FrozenObject, row,
    # True, ASSISTANT_CHUNK, k)` without the call); the values checked above are lossless.
    return [
        Event(
            ASSISTANT_CHUNK,
            seq0 + k,
            times[k],
            FrozenObject(row, True, None, None, ASSISTANT_CHUNK, k),
            None,
            None,
            False,
            order,
        )
        for k in range(n)
    ]


# -- one event line ---------------------------------------------------------------------------


def _payload_view(stored: _StoredLine, event_type: str, payload: Any) -> Any:
    """The lazy `data` of a line whose payload is opaque (`Raw`) or an assistant message."""
    if type(payload) is msgspec.Raw:  # a type whose payload no rule constrains
        first = memoryview(payload)[0]
        if first == _OPEN_OBJECT:
            return lazy_view(FrozenObject, stored, False, event_type)
        if first == _OPEN_ARRAY:
            return lazy_view(FrozenArray, stored, False, event_type)
        return view(stored.build(0))
    # A checked assistant message is one that projects to its message (`checked_as`):
    # an empty one is left unmarked.
    return lazy_view(FrozenObject, stored, False, event_type if payload.message.content else None)


# -- the scan -----------------------------------------------------------------------------------


def _admitted_one_by_one(wires: list[dict[str, Any]], index: int) -> list[Event] | None:
    """Events for wire dicts the typed schema refused, by the exact per-event rules (R2-R6,
    R10-R12); None when a rule fails or a citation is null, so the exact path decides."""
    out = []
    for wire in wires:
        try:
            plain, event_type, seq, time, ignorable, op, sources = admit_wire_event(
                wire, index, lossless_check=False, where="stored event", parsed=True
            )
            if sources is PRESENT_NULL:
                return None
            cited = None if sources is None else parse_source_seqs(sources, "stored event")
        except KernelError:
            return None
        order = tuple(plain)
        data = view(plain["data"])
        out.append(Event(event_type, seq, time, data, op, cited, ignorable, order))
        index += 1
    return out


def scan_events(
    buf: bytes,
    start: int,
    events: list[Event],
    *,
    first_line: int,
    label: str = "line",
    ranged: bool = True,
) -> TypedScan | Declined:
    """`kernel.storage.scan.scan_records` that builds admitted events, each line decoded once.

    Extends `events` with the durable prefix and returns what `scan_records`
    would. A line the typed schema refuses is read as the exact scan reads it
    and admitted by the exact per-event rules. Returns `Declined` at the first
    line whose event breaks one of those rules, with `events` holding the lines
    before it (the exact scan goes on from there and names the error); raises
    `CorruptLog` as `scan_records` does.
    """
    find = buf.find
    expected = len(events)
    issue: str | None = None
    pos = start
    line_no = first_line - 1
    kind_of = _ENVELOPE_KINDS.get
    # What the stepped lines keep is shared where it repeats: the turn of the line before
    # (a turn past 256 is an int object of its own) and a call id already kept (a
    # result's is its call's), so a line keeps pointers, not copies.
    last_turn = 0
    call_ids: dict[str, str] = {}
    while True:
        nl = find(b"\n", pos)
        if nl == -1:
            break
        line = buf[pos:nl]
        line_start = pos
        pos = nl + 1
        line_no += 1
        try:
            wire: Any = decode_ascii_line(line) if line.isascii() else decode_line(line)
        except DECODE_ERRORS:
            try:
                wire, deep = decode_other(line), False
            except RecursionError:  # nested deeper than msgspec reads from here
                wire, deep = None, True
        kind = kind_of(type(wire))
        if kind is None:
            if wire is None:  # as the exact scan reads it
                wires, issue = read_record(line, expected, label, line_no, ranged=ranged, deep=deep)
                if issue is not None:
                    break
                admitted = _admitted_one_by_one(wires, expected)
                if admitted is None:
                    return Declined(line_start, line_no)
                events.extend(admitted)
                expected += len(admitted)
                continue
            if type(wire) is not OtherEnvelope:  # a chunk row
                members = _row_members(wire)
                if members is None:
                    return Declined(line_start, line_no)
                if wire.seq0 != expected:
                    issue = row_gap(label, line_no, wire.seq0, expected)
                    break
                events.extend(members)
                expected += len(members)
                continue
            kind = (wire.type, None, False, None, False, True)  # a type no rule knows
        event_type, check, stepped, call_of, on_surface, viewed = kind
        # One event line: its payload and member order stay unread (`_StoredLine`).
        seq = wire.seq
        if seq != expected:
            issue = seq_gap(label, line_no, seq, expected, event_type)
            break
        payload = wire.data
        if check is not None and not check(payload):
            return Declined(line_start, line_no)
        if stepped:
            turn = payload.turn
            if turn == last_turn:
                turn = last_turn
            else:
                last_turn = turn
            if call_of is None:
                stored: _StoredLine = _SteppedLine(line, None, turn, payload.step)
            else:
                call = call_of(payload)
                stored = _CallLine(line, None, turn, payload.step, call_ids.setdefault(call, call))
        else:
            stored = _StoredLine(line)
        if viewed:
            data = _payload_view(stored, event_type, payload)
        else:  # `lazy_view(FrozenObject, stored, False, event_type)`, without the call
            data = FrozenObject(stored, False, None, None, event_type)
        ignorable = wire.ignorable is True
        if on_surface:
            op_wire = wire.surfaceOp
            op = APPEND if op_wire == "append" else Replace(op_wire.start, op_wire.end)
            cited = wire.sourceEventSeqs
            sources = None if cited is UNSET else tuple(cited)
            event = Event(event_type, seq, wire.time, data, op, sources, ignorable, stored)
        else:
            event = Event(event_type, seq, wire.time, data, None, None, ignorable, stored)
        events.append(event)
        expected += 1
    # Every line read was kept, but the one an issue stopped at.
    if issue is None:
        committed, kept_lines = pos, line_no - first_line + 1
    else:
        committed, kept_lines = line_start, line_no - first_line
    return close_scan(buf, pos, line_no, committed, kept_lines, issue, first_line, label)


# -- the plan -----------------------------------------------------------------------------------


def plan_events(
    header: dict[str, Any],
    events: list[Event],
    *,
    session_id: str | None,
    known_types: Collection[str],
    normalize: bool = True,
) -> tuple[SessionHeader, tuple[Event, ...], tuple[Event, ...]] | None:
    """`plan_load` over a typed scan: `(header, prefix + closers, closers)`, or None.

    None whenever the exact pipeline might answer differently: an identity
    mismatch, a type outside `known_types`, an older v0 shape to normalize
    (when `normalize`), a closer or header or surface rule that fails. The
    events were admitted shape by shape by their typed decode, which refuses
    every older shape but a `steering/message` (and a disposed `turn/end`,
    which `kernel.storage.typed.schema` leaves to the exact pipeline).
    """
    if session_id is not None and header["id"] != session_id:
        return None
    types = [event.type for event in events]  # on 3.11 faster than `map` over `attrgetter`
    present = set(types)
    if normalize and STEERING_MESSAGE in present:
        return None
    unknown = present.difference(known_types)
    if unknown and any(e.type in unknown and not e.ignorable for e in events):
        return None  # the unknown-type rule refuses the log
    try:
        closers = interrupted_turn_closers(events)
        admitted = header_from_json(view(dict(header)), session_id=session_id)
        for index, closer in enumerate(closers, len(events)):
            admit_wire_event(event_to_wire(closer), index, lossless_check=False, where="closer")
        # R7-R9, the surface plan. Every event was admitted on its own (R5 included), so
        # only the surface-eligible ones can touch the surface. The closers are put on the
        # scan's list for the plan only: a copy of every event would be young while the plan
        # allocates, and each collection of the young generation would walk all of it.
        size = len(events)
        on_surface = bytes(map(_ON_SURFACE, chain(types, map(_TYPE, closers))))
        headers = positions_of_type(types, REQUEST_HEADER)  # a closer is never a request/header
        del types  # a pointer an event: not kept while the plan allocates
        events += closers
        try:
            surface = surface_fold_over(events, compress(count(), on_surface))
            result = AdmittedEvents(events, surface, headers)
        finally:
            del events[size:]
    except KernelError:
        return None
    return admitted, result, closers


def plan_decoded_events(
    header: dict[str, Any],
    events: list[Event],
    *,
    session_id: str | None,
    known_types: Collection[str],
    normalize: bool = True,
) -> tuple[SessionHeader, tuple[Event, ...], tuple[Event, ...]] | None:
    """`plan_events` for events decoded from storage but not admitted one by one (the rows
    of a SQLite store): each must pass the per-event rules as it is, or the answer is None.

    The rules are the ones `SessionLog` applies to an `Event` it is given
    (R1-R6, R10-R12); the wire dicts the exact pipeline would build are never made.
    With `normalize`, an event Appendix A might rewrite is left to the exact pipeline.
    """
    vetted: set[str] = set()
    for index, event in enumerate(events):
        if not admitted_as_it_is(event, index, False, vetted):
            return None
        if normalize and may_need_normalizing(event):
            return None
    return plan_events(
        header, events, session_id=session_id, known_types=known_types, normalize=normalize
    )


def scan_row_lines(rows: RowLines) -> list[Event] | None:
    """The stored events of a SQLite session's rows spelled as lines
    (`kernel.storage.sqlite_rows.row_lines`), each line decoded once; or None.

    None whenever the row codec's scan (`kernel.storage.sqlite_rows.scan_rows`) might read the rows
    differently: a line the typed scan refuses or cuts (a torn tail is the exact
    scan's to find), a packed row with too few or too many members, or an event
    that breaks a per-event rule.
    """
    events: list[Event] = []
    try:
        scan = scan_events(rows.lines, 0, events, first_line=1, label="row", ranged=False)
    except KernelError:
        return None
    if isinstance(scan, Declined) or scan[0] != len(rows.lines) or scan[2] is not None:
        return None
    if not rows.member_counts_fit(len(events)):
        return None
    return events
