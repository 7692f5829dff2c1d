"""`SessionLog`: an admitted log plus its incrementally maintained folds.

An immutable value: `append` returns a new log and leaves this one as it was,
so a rejected event changes nothing (R13). Each append costs O(log n)
(persistent vectors; a replacement rewrites only the surface slots and derived
messages it shadows). The same fold steps build a log from a seed or a
restored prefix.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Literal, overload

import attrs
from pyrsistent import PVector

from kernel.admission.admit import admit_wire_event, admitted_as_it_is, check_loadable
from kernel.admission.envelope import check_surface_marker
from kernel.admission.payloads import check_legacy_reason, check_legacy_type, check_payload
from kernel.errors import (
    InvalidEnvelope,
    KernelError,
    NotLosslessJson,
    ProvenanceError,
    SurfaceError,
    SurfaceMarkerError,
)
from kernel.folds.messages import MessageHistory, history_of, step_messages
from kernel.folds.request_header import fold_request_header, step_request_header
from kernel.folds.surface import (
    AdmittedEvents,
    SurfaceState,
    is_plain_append,
    surface_state_over,
)
from kernel.values.events import (
    APPEND,
    ASSISTANT_MESSAGE,
    DEFAULT_KNOWN_TYPES,
    END_SEED,
    REQUEST_HEADER,
    ROW_TAGS,
    SURFACE_TYPES,
    Append,
    Event,
    Replace,
    SessionHeader,
    known_type_set,
)
from kernel.values.json import (
    FrozenArray,
    FrozenObject,
    admit_json,
    canonical_text,
    safe_int,
    summary,
    view,
)
from kernel.values.payloads import (
    AssistantChunkData,
    AssistantMessageData,
    EndSeedData,
    ExtensionEventType,
    RequestContextData,
    RequestHeaderData,
    StepData,
    TodoWriteData,
    ToolCallData,
    ToolResultData,
    TurnEndData,
    TurnStartData,
    UserMessage,
)
from kernel.values.vectors import vector
from kernel.wire.codec import (
    event_to_wire,
    header_from_json,
    header_to_json,
    interned_order,
    iter_events,
    parse_source_seqs,
    parse_surface_op,
    row_tag_message,
)

__all__ = ("SessionLog",)


def _admit_header(header: SessionHeader | Mapping[str, Any] | None) -> SessionHeader | None:
    if header is None:
        return None
    if type(header) is SessionHeader:
        # docs/format/admission.md §6: SessionHeader does not check its fields
        header_to_json(header)
        return header
    return header_from_json(header)


def _admit_surface_op(op: Any, where: str) -> Any:
    """R1 on a caller-given surface op: `APPEND`/`Replace` pass, a wire spelling is snapshotted."""
    if op is None or type(op) is Append or type(op) is Replace:  # type(): never what op claims
        return op
    try:
        return admit_json(op)
    except NotLosslessJson as exc:
        raise NotLosslessJson(
            f"{where}: surface metadata is not lossless JSON: {exc} (R1)"
        ) from None


def _parse_surface_op(op: Any, where: str) -> Any:
    """R5 (value) and R6 on an admitted caller surface op."""
    if type(op) is Append:
        return APPEND
    if type(op) is Replace:
        start, end = safe_int(op.start), safe_int(op.end)
        if start is None or end is None or start < 0 or end < 0:
            raise SurfaceMarkerError(f"{where}: invalid replace surfaceOp {summary(op)} (R6)")
        return Replace(start, end)
    return parse_surface_op(op, where)


def _caller_sources(sources: Any, where: str) -> Any:
    if sources is None:
        return None
    try:
        wire = admit_json(list(sources) if type(sources) is tuple else sources)
    except NotLosslessJson as exc:
        raise NotLosslessJson(
            f"{where}: surface metadata is not lossless JSON: {exc} (R1)"
        ) from None
    return wire  # parsed by the surface plan, in R7's order


@attrs.frozen(eq=False)
class SessionLog:
    """An admitted session log and its folds: surface, derived messages, request header.

    Build with `SessionLog.empty()`, `SessionLog.seed(events, now=...)` or
    `SessionLog.restore(events)`; grow with `append`.

    >>> log = SessionLog.empty().append("turn/start", {"turn": 1}, time=0)
    >>> [e.type for e in log.events], log.surface.nodes
    (['turn/start'], pvector([]))
    """

    events: PVector[Event] = attrs.field(factory=vector)
    surface: SurfaceState = attrs.field(factory=SurfaceState)
    # The derived history: None until first read (seed, restore and append leave it
    # so), then kept incrementally by the appends that follow.
    history: MessageHistory | None = attrs.field(default=None, repr=False)
    request_header: Any = None
    header: SessionHeader | None = None
    first_live_seq: int = 0
    # The types a reader with the same configuration accepts without `ignorable`
    # (docs/format/persistence.md §5): append and seed refuse any other, so that what
    # this log admits, a store and its loader keep.
    known_types: frozenset[str] = DEFAULT_KNOWN_TYPES

    def __len__(self) -> int:
        return len(self.events)

    @property
    def messages(self) -> PVector[Any]:
        """The derived message history (docs/format/folds.md §2.2): built on first read, kept."""
        history = self.history
        if history is None:
            history = history_of(self.surface, self.events)
            object.__setattr__(self, "history", history)  # a cache: the value is determined
        return history.dense()

    @property
    def next_seq(self) -> int:
        return len(self.events)

    # -- construction -----------------------------------------------------------------------

    @classmethod
    def empty(
        cls,
        *,
        header: SessionHeader | Mapping[str, Any] | None = None,
        known_types: Collection[str] = DEFAULT_KNOWN_TYPES,
    ) -> SessionLog:
        """A fresh log with no events (no end-seed marker).

        `known_types` is the vocabulary appends may use without `ignorable: true`:
        the loader's (`DEFAULT_KNOWN_TYPES`) unless the stores are given another.
        """
        return cls(header=_admit_header(header), known_types=known_type_set(known_types))

    @classmethod
    def seed(
        cls,
        events: Iterable[Event | Mapping[str, Any]],
        *,
        header: SessionHeader | Mapping[str, Any] | None = None,
        now: int,
        known_types: Collection[str] = DEFAULT_KNOWN_TYPES,
    ) -> SessionLog:
        """Admit a seed (docs/format/admission.md §3.2, §5); append the end-seed marker at `now`.

        No marker is added when the seed already ends with one. Events may be
        `Event`s or wire objects; errors carry the seed `index`. An event whose
        type is not in `known_types` must be `ignorable` (as for `empty`).
        """
        known = known_type_set(known_types)
        log = cls._admit_all(
            events, _admit_header(header), lossless_check=True, label="seed", known_types=known
        )
        if len(log.events) and log.events[-1].type == END_SEED:
            return log
        return log.append(END_SEED, {}, time=now)

    @classmethod
    def restore(
        cls,
        events: Iterable[Event | Mapping[str, Any]],
        *,
        header: SessionHeader | Mapping[str, Any] | None = None,
        known_types: Collection[str] = DEFAULT_KNOWN_TYPES,
    ) -> SessionLog:
        """Admit events decoded from storage (restore path: R1 is not re-run, no marker).

        Their types are not checked against `known_types`: the loader that read them
        has done so with its own. The log's later appends are.

        The events a load returns (`AdmittedEvents`) were admitted whole by the load,
        closers included: they are taken as they are, and only the surface and header
        states a log appends from are rebuilt (from the load's surface events and
        header positions), to the log the general path builds.
        """
        if type(events) is AdmittedEvents:
            return cls._of_admitted(events, _admit_header(header), known_type_set(known_types))
        return cls._admit_all(
            events,
            _admit_header(header),
            lossless_check=False,
            label="stored",
            known_types=known_type_set(known_types),
            check_known=False,
        )

    @classmethod
    def _of_admitted(
        cls, events: AdmittedEvents, header: SessionHeader | None, known_types: frozenset[str]
    ) -> SessionLog:
        """`restore` of a load's own events: every rule held when the load admitted them."""
        # The fold reads the snapshots the load found and builds the last alone; it raises
        # what stepping each would (a reshaped header holding -0.0 fails R1 here).
        request_header = fold_request_header(events)
        # A comprehension: on 3.11 it finds them in two thirds of the time `map` takes.
        on_surface = [at for at, event in enumerate(events) if event.type in SURFACE_TYPES]
        return cls(
            events=vector(events),
            surface=surface_state_over(events, on_surface),
            request_header=request_header,
            header=header,
            first_live_seq=len(events),
            known_types=known_types,
        )

    @classmethod
    def _restore_parsed(
        cls, records: Iterable[Event | Mapping[str, Any]], *, header: SessionHeader
    ) -> SessionLog:
        """`restore` of wire dicts the kernel's JSON reader built (a load's scan), which
        nobody else holds: their payloads are wrapped as they are, not walked or copied."""
        return cls._admit_all(
            records,
            _admit_header(header),
            lossless_check=False,
            label="stored",
            known_types=DEFAULT_KNOWN_TYPES,
            check_known=False,
            parsed=True,
        )

    @classmethod
    def _admit_all(
        cls,
        events: Iterable[Event | Mapping[str, Any]],
        header: SessionHeader | None,
        *,
        lossless_check: bool,
        label: str,
        known_types: frozenset[str],
        check_known: bool = True,
        parsed: bool = False,
    ) -> SessionLog:
        admitted: list[Event] = []
        surface = SurfaceState.mutable()  # only the last state is kept
        appended: list[int] = []  # plain appends admitted, not yet applied to `surface`
        request_header: Any = None
        lookup = admitted.__getitem__
        vetted: set[str] = set()
        for index, item in enumerate(iter_events(events)):
            if type(item) is Event and admitted_as_it_is(item, index, lossless_check, vetted):
                if check_known and (
                    item.type == ASSISTANT_MESSAGE
                    or (item.type not in known_types and not item.ignorable)
                ):
                    where = f"{label} event at index {index}"
                    check_loadable(item.type, item.data, item.ignorable, known_types, where, index)
                op, sources = item.surface_op, item.source_event_seqs
                if op is APPEND and is_plain_append(item.type, index, sources):
                    appended.append(index)  # no rule to check: applied with its run
                elif op is not None:
                    if appended:
                        surface = surface.extended(appended)
                        appended.clear()
                    # `where` is spelled only for an error: a failing plan has changed
                    # nothing, so it is run again with it.
                    try:
                        surface = surface.plan(item.type, index, op, sources, item.data, lookup, "")
                    except KernelError:
                        where = f"{label} event at index {index}"
                        try:
                            surface.plan(item.type, index, op, sources, item.data, lookup, where)
                        except KernelError as exc:
                            _locate(exc, index)
                            raise
                        raise AssertionError("a surface plan failed once only") from None
                admitted.append(item)
                if item.type == REQUEST_HEADER:
                    request_header = step_request_header(request_header, item)
                continue
            where = f"{label} event at index {index}"
            try:
                if type(item) is Event:
                    wire: Any = event_to_wire(item, where)
                    order = item.wire_order
                else:
                    wire = item
                    order = None
                plain, event_type, seq, time, ignorable, op, sources = admit_wire_event(
                    wire, index, lossless_check=lossless_check, where=where, parsed=parsed
                )
                if check_known:
                    check_loadable(event_type, plain["data"], ignorable, known_types, where, index)
                data = plain["data"]
                if op is not None:
                    if appended:
                        surface = surface.extended(appended)
                        appended.clear()
                    surface = surface.plan(event_type, seq, op, sources, data, lookup, where)
                data_type = builtin_type(data)
                if data_type is dict:
                    data = FrozenObject._own(data, lossless_check)
                elif data_type is list:
                    data = FrozenArray._own(data, lossless_check)
                event = Event(
                    event_type,
                    seq,
                    time,
                    data,
                    op,
                    None if sources is None else parse_source_seqs(sources, where),
                    ignorable,
                    order if order is not None else interned_order(plain),
                )
                admitted.append(event)
                if event_type == REQUEST_HEADER:
                    request_header = step_request_header(request_header, event)
            except KernelError as exc:
                _locate(exc, index)
                raise
        return cls(
            events=vector(admitted),
            surface=surface.extended(appended).persistent(),
            request_header=request_header,
            header=header,
            first_live_seq=len(admitted),
            known_types=known_types,
        )

    # -- the append path --------------------------------------------------------------------

    @overload
    def append(
        self,
        type: Literal["turn/start"],
        data: TurnStartData,
        *,
        time: int,
        surface_op: None = None,
        source_event_seqs: None = None,
        ignorable: bool = False,
    ) -> SessionLog: ...
    @overload
    def append(
        self,
        type: Literal["turn/end"],
        data: TurnEndData,
        *,
        time: int,
        surface_op: None = None,
        source_event_seqs: None = None,
        ignorable: bool = False,
    ) -> SessionLog: ...
    @overload
    def append(
        self,
        type: Literal["step/start"],
        data: StepData,
        *,
        time: int,
        surface_op: None = None,
        source_event_seqs: None = None,
        ignorable: bool = False,
    ) -> SessionLog: ...
    @overload
    def append(
        self,
        type: Literal["step/end"],
        data: StepData,
        *,
        time: int,
        surface_op: None = None,
        source_event_seqs: None = None,
        ignorable: bool = False,
    ) -> SessionLog: ...
    @overload
    def append(
        self,
        type: Literal["user/message"],
        data: UserMessage,
        *,
        time: int,
        surface_op: Any,
        source_event_seqs: Sequence[int] | None = None,
        ignorable: bool = False,
    ) -> SessionLog: ...
    @overload
    def append(
        self,
        type: Literal["assistant/chunk"],
        data: AssistantChunkData,
        *,
        time: int,
        surface_op: None = None,
        source_event_seqs: None = None,
        ignorable: bool = False,
    ) -> SessionLog: ...
    @overload
    def append(
        self,
        type: Literal["assistant/message"],
        data: AssistantMessageData,
        *,
        time: int,
        surface_op: Any,
        source_event_seqs: Sequence[int] | None = None,
        ignorable: bool = False,
    ) -> SessionLog: ...
    @overload
    def append(
        self,
        type: Literal["tool/call"],
        data: ToolCallData,
        *,
        time: int,
        surface_op: None = None,
        source_event_seqs: None = None,
        ignorable: bool = False,
    ) -> SessionLog: ...
    @overload
    def append(
        self,
        type: Literal["tool/result"],
        data: ToolResultData,
        *,
        time: int,
        surface_op: Any,
        source_event_seqs: Sequence[int] | None = None,
        ignorable: bool = False,
    ) -> SessionLog: ...
    @overload
    def append(
        self,
        type: Literal["todo/write"],
        data: TodoWriteData,
        *,
        time: int,
        surface_op: None = None,
        source_event_seqs: None = None,
        ignorable: bool = False,
    ) -> SessionLog: ...
    @overload
    def append(
        self,
        type: Literal["request/header"],
        data: RequestHeaderData,
        *,
        time: int,
        surface_op: None = None,
        source_event_seqs: None = None,
        ignorable: bool = False,
    ) -> SessionLog: ...
    @overload
    def append(
        self,
        type: Literal["request/context"],
        data: RequestContextData,
        *,
        time: int,
        surface_op: None = None,
        source_event_seqs: None = None,
        ignorable: bool = False,
    ) -> SessionLog: ...
    @overload
    def append(
        self,
        type: Literal["session/end-seed"],
        data: EndSeedData,
        *,
        time: int,
        surface_op: None = None,
        source_event_seqs: None = None,
        ignorable: bool = False,
    ) -> SessionLog: ...
    @overload
    def append(
        self,
        type: ExtensionEventType,
        data: Any,
        *,
        time: int,
        surface_op: None = None,
        source_event_seqs: None = None,
        ignorable: bool = False,
    ) -> SessionLog: ...

    @overload
    def append(
        self,
        type: str,
        data: Any,
        *,
        time: int,
        surface_op: Any = None,
        source_event_seqs: Sequence[int] | None = None,
        ignorable: bool,
    ) -> SessionLog: ...

    def append(
        self,
        type: str,
        data: Any,
        *,
        time: int,
        surface_op: Any = None,
        source_event_seqs: Sequence[int] | None = None,
        ignorable: bool = False,
    ) -> SessionLog:
        """Admit one live event (docs/format/admission.md §3.1) and return the longer log.

        The kernel assigns `seq`; `time` is the caller's clock reading (epoch ms).
        `surface_op` is `APPEND`, a `Replace`, or their wire spelling.

        Typed by overloads (docs/guide.md, "Typed payloads"): a core type takes
        its `kernel.values.payloads` TypedDict, and a surface type requires
        `surface_op`; a default extension type takes any JSON. Any other type,
        or one known only at run time (a `str`), must spell out `ignorable=`,
        so that mypy rejects a misspelled core type. The run-time behaviour
        is the same for every form.
        """
        event_type = canonical_text(type)  # a split surrogate pair is the character it encodes
        seq = len(self.events)
        if builtin_type(event_type) is not str or not event_type:
            raise InvalidEnvelope(
                f"appended event (seq {seq}): type must be a non-empty string (R2)", seq=seq
            )
        where = f"appended {event_type} event (seq {seq})"
        if event_type in ROW_TAGS:
            raise InvalidEnvelope(row_tag_message(where, event_type), seq=seq)
        stamp = safe_int(time)
        if stamp is None:
            raise InvalidEnvelope(
                f"{where}: time must be a safe integer, got {summary(time)} (R2)", seq=seq
            )
        if builtin_type(ignorable) is not bool:  # `"yes"` or `1` once read as false
            raise InvalidEnvelope(
                f"{where}: ignorable must be a bool, got {summary(ignorable)} (R2)", seq=seq
            )
        try:
            check_legacy_type(event_type, where)
            try:
                plain = admit_json(data)
            except NotLosslessJson as exc:
                raise NotLosslessJson(
                    f"{where}: {event_type} carries data that is not lossless JSON: {exc} (R1)"
                ) from None
            check_legacy_reason(event_type, plain, where)
            op_wire = _admit_surface_op(surface_op, where)
            sources = _caller_sources(source_event_seqs, where)
            check_payload(event_type, plain, where)
            check_loadable(event_type, plain, ignorable is True, self.known_types, where)
            check_surface_marker(event_type, op_wire is not None, sources is not None, where)
            op = None if op_wire is None else _parse_surface_op(op_wire, where)
            after = self.surface.plan(
                event_type, seq, op, sources, plain, self.events.__getitem__, where
            )
        except KernelError as exc:
            if exc.seq is None:
                exc.seq = seq
            raise
        event = Event(
            type=event_type,
            seq=seq,
            time=stamp,
            data=view(plain, lossless=True) if builtin_type(plain) in (dict, list) else plain,
            surface_op=op,
            source_event_seqs=None if sources is None else parse_source_seqs(sources, where),
            ignorable=ignorable is True,
        )
        events = self.events.append(event)
        return SessionLog(
            events=events,
            surface=after,
            history=(
                None
                if self.history is None
                else step_messages(self.history, self.surface, after, event, events.__getitem__)
            ),
            request_header=step_request_header(self.request_header, event),
            header=self.header,
            first_live_seq=self.first_live_seq,
            known_types=self.known_types,
        )


builtin_type = type  # `append` takes a parameter named `type`, as the public contract spells it


def _locate(exc: KernelError, index: int) -> None:
    """Give a seed or restore error its input `index`, and a surface-rule error its `seq`.

    Surface rules (R5-R9) run after R4, so the event's seq is its index.
    """
    if exc.index is None:
        exc.index = index
    if exc.seq is None and isinstance(exc, (SurfaceError, ProvenanceError)):
        exc.seq = index
