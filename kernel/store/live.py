"""A live session over a store: one call opens or resumes it, then it appends and commits.

`open_session` loads a stored session (committing its crash repair once), seeds it
(docs/format/persistence.md §1: the end-seed marker is written with the lifecycle's
first batch), attaches a new header writer and finds the next turn and step. The
one thing to know before changing it: `LiveSession.log` holds only events the
store has acknowledged, except inside `batch()`, where it also holds that batch's
events until the batch commits (one store append, one fsync) or is dropped.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, Protocol, overload

import attrs

from kernel.errors import InvalidEnvelope
from kernel.folds.request_header import HeaderWriterState, header_event
from kernel.folds.turns import TurnPosition, fold_turn_position
from kernel.log import SessionLog
from kernel.store.batch import admit_stored_header, canonical_text
from kernel.store.errors import SessionNotFound, StoreError
from kernel.store.results import RepairReport, StoredSession
from kernel.values.events import END_SEED, REQUEST_HEADER, Event, SessionHeader
from kernel.values.json import safe_int, summary
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

__all__ = ("LiveSession", "SessionStore", "open_session")


class SessionStore(Protocol):
    """What a live session needs of a store: `JsonlStore` and `SqliteStore` both fit."""

    @property
    def known_types(self) -> frozenset[str]: ...

    def create(self, header: SessionHeader | Mapping[str, Any]) -> SessionHeader: ...

    def append(self, session_id: str, events: Iterable[Event]) -> None: ...

    def load(self, session_id: str, *, now: int, adopt_live: bool = False) -> StoredSession: ...


@attrs.frozen
class _State:
    """What a live session knows at one point: its log, header writer and turn position."""

    log: SessionLog
    writer: HeaderWriterState
    position: TurnPosition


def open_session(
    store: SessionStore,
    session_id: str,
    *,
    header: SessionHeader | Mapping[str, Any] | None = None,
    now: int,
) -> LiveSession:
    """Open a stored session, or create it from `header` when the store has none.

    A stored session is loaded with `store.load`, which commits its crash repair
    (a torn tail cut, closers appended) durably and once; `LiveSession.repair`
    reports it. Its events are restored and, unless they already end with one,
    an end-seed marker at time `now` starts the new lifecycle: it is written
    together with the session's first batch, so opening without appending
    writes nothing beyond the repair. A new header writer attaches (its first
    request logs `resume`). `header` is used only when the session is absent:
    its `id` must be `session_id`; a stored session keeps its stored header.
    An absent session without `header` is `SessionNotFound`, and so is one
    created with `store.create` but never appended (pass its header here
    instead). Nothing is written for a new session until its first append.
    A `now` that is not a safe integer is refused (`InvalidEnvelope`) before the
    store is read.
    """
    session_id = canonical_text(session_id)
    if type(session_id) is not str:
        raise StoreError(f"open_session: session_id must be a string, not {summary(session_id)}")
    if safe_int(now) is None:
        # Checked before anything is read or repaired, and whether or not the log already
        # ends seeded: `now` is the time of an event the session may write.
        raise InvalidEnvelope(
            f"open_session: now must be a safe integer, the end-seed marker's time (R2), "
            f"got {summary(now)}"
        )
    admitted = None if header is None else admit_stored_header(header)
    if admitted is not None and admitted.id != session_id:
        raise StoreError(
            f"open_session: the header names session {admitted.id!r}, not {session_id!r}"
        )
    try:
        stored = store.load(session_id, now=now)
    except SessionNotFound:
        if admitted is None:
            raise
        created = store.create(admitted)
        log = SessionLog.empty(header=created, known_types=store.known_types)
        return LiveSession(store, session_id, log, seed_at=None, repair=None)
    log = SessionLog.restore(stored.events, header=stored.header, known_types=store.known_types)
    ends_seeded = len(log.events) > 0 and log.events[-1].type == END_SEED
    return LiveSession(
        store, session_id, log, seed_at=None if ends_seeded else now, repair=stored.repair
    )


class LiveSession:
    """A session open for writing: its log, its header writer, and the store it commits to.

    Build with `open_session`. `append` admits one event and, outside `batch()`,
    commits it at once (one store append: an fsync, or a SQLite commit). Inside
    `with session.batch():` events are admitted into `log` as they come and
    committed together when the block ends; an exception in the block drops
    them. A commit that fails leaves `log` (and the header writer) as the store
    acknowledged it, and re-raises: `SeqMismatch` when another writer appended
    first (open the session again to continue), or the store's error; after an
    `OSError` the store has rolled the batch back, and it may be retried.
    A rejected event (`KernelError` from admission) changes nothing, inside a
    batch too. Not for sharing between threads.
    """

    def __init__(
        self,
        store: SessionStore,
        session_id: str,
        log: SessionLog,
        *,
        seed_at: int | None,
        repair: RepairReport | None,
    ) -> None:
        self.store = store
        self.session_id = session_id
        #: The repair `open_session` committed (`repair.needed` is false when there was
        #: nothing to do); None for a session it created.
        self.repair = repair
        state = _State(
            log,
            HeaderWriterState.attach(log.surface.replace_generation),
            fold_turn_position(log.events),
        )
        self._committed = state
        self._working = state
        self._seed_at = seed_at  # the end-seed marker's time, until the marker is written
        self._in_batch = False

    def __repr__(self) -> str:
        return f"LiveSession({self.session_id!r}, {len(self.log)} events, {self.store!r})"

    # -- what the session knows -------------------------------------------------------------

    @property
    def log(self) -> SessionLog:
        """The admitted log: what the store acknowledged, plus an open batch's events."""
        return self._working.log

    @property
    def writer(self) -> HeaderWriterState:
        """The header writer's state after its last decision (attached at open)."""
        return self._working.writer

    @property
    def position(self) -> TurnPosition:
        """The log's turn position: open turn and step, and the next numbers."""
        return self._working.position

    @property
    def next_turn(self) -> int:
        """The number the next `turn/start` carries (1 for a session without turns)."""
        return self._working.position.next_turn

    @property
    def next_step(self) -> int:
        """The number the open turn's next `step/start` carries (1 when no turn is open)."""
        return self._working.position.next_step

    @property
    def open_turn(self) -> int | None:
        """The open turn's number, None between turns (always None right after open)."""
        return self._working.position.open_turn

    @property
    def open_step(self) -> int | None:
        """The open step's number, None outside a step."""
        return self._working.position.open_step

    @property
    def in_batch(self) -> bool:
        """Whether a `batch()` block is open."""
        return self._in_batch

    # -- appending --------------------------------------------------------------------------

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
    ) -> Event: ...
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
    ) -> Event: ...
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
    ) -> Event: ...
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
    ) -> Event: ...
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
    ) -> Event: ...
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
    ) -> Event: ...
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
    ) -> Event: ...
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
    ) -> Event: ...
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
    ) -> Event: ...
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
    ) -> Event: ...
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
    ) -> Event: ...
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
    ) -> Event: ...
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
    ) -> Event: ...
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
    ) -> Event: ...

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
    ) -> Event: ...

    def append(
        self,
        type: str,
        data: Any,
        *,
        time: int,
        surface_op: Any = None,
        source_event_seqs: Sequence[int] | None = None,
        ignorable: bool = False,
    ) -> Event:
        """Admit one event as `SessionLog.append` does, commit it unless in a batch; return it.

        Typed by the same overloads as `SessionLog.append`. The event is in `log`
        when this returns; outside a batch it is also durable.
        """
        return self._add(type, data, time, surface_op, source_event_seqs, ignorable, None)

    def request_header(self, header: Any, *, time: int, declared: bool = False) -> Event | None:
        """Apply the writer decision before a request attempt (docs/format/folds.md §3.4).

        Appends (and, outside a batch, commits) the `request/header` event
        `header_event` asks for, and returns it, or returns None when the request
        inherits the header in force. `declared` is true on the first attempt of
        a step that begins a new message series, never on retries.
        """
        state = self._working
        data, writer = header_event(
            state.writer,
            header,
            baseline=state.log.request_header,
            declared=declared,
            generation=state.log.surface.replace_generation,
        )
        if data is None:
            self._working = attrs.evolve(state, writer=writer)
            if not self._in_batch:
                self._committed = attrs.evolve(self._committed, writer=writer)
            return None
        return self._add(REQUEST_HEADER, data, time, None, None, False, writer)

    @contextlib.contextmanager
    def batch(self) -> Iterator[LiveSession]:
        """Collect the block's appends and commit them as one store append (one fsync).

        The events are in `log` as they are admitted; an exception in the block
        drops them all (nothing is written) and propagates. Batches do not nest.
        """
        if self._in_batch:
            raise StoreError(f"session {self.session_id!r}: a batch is already open")
        self._in_batch = True
        try:
            yield self
        except BaseException:
            self._working = self._committed
            raise
        finally:
            self._in_batch = False
        self._commit()

    def _add(
        self,
        event_type: str,
        data: Any,
        time: int,
        surface_op: Any,
        sources: Sequence[int] | None,
        ignorable: bool,
        writer: HeaderWriterState | None,
    ) -> Event:
        state = self._working
        log = state.log
        if self._seed_at is not None and log is self._committed.log:
            # The lifecycle's first event: the end-seed marker goes first (§1).
            log = log.append(END_SEED, {}, time=self._seed_at)
        log = log.append(
            event_type,
            data,
            time=time,
            surface_op=surface_op,
            source_event_seqs=sources,
            ignorable=ignorable,
        )
        event = log.events[-1]
        self._working = _State(
            log,
            state.writer if writer is None else writer,
            state.position.step(event),
        )
        if not self._in_batch:
            self._commit()
        return event

    def _commit(self) -> None:
        """Write what `log` holds beyond the acknowledged log, in one store append."""
        committed, working = self._committed, self._working
        if working.log is committed.log:
            self._committed = working  # a writer decision that logged nothing
            return
        batch = working.log.events[len(committed.log.events) :]
        # The log planned the batch's replacements over the surface it loaded from the
        # store: the kernel's own stores need not read the stored log again to judge them.
        append = getattr(self.store, "_append_planned", None) or self.store.append
        try:
            append(self.session_id, batch)
        except BaseException:
            self._working = committed
            raise
        self._committed = working
        self._seed_at = None
