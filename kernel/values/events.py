"""The event model: `Event`, `SessionHeader`, the surface operations and the type names.

One `Event` class for every type; the payload is frozen JSON (`kernel.values.json`).
An event remembers the member order of the envelope it was read from so the
JSONL writer can reproduce it byte for byte (docs/format/persistence.md §2.4).
"""

from __future__ import annotations

import contextlib
from typing import Any, Final, Protocol

import attrs
import msgspec

from kernel.errors import KernelError, ProvenanceError
from kernel.values.json import FrozenArray, FrozenObject, freeze, summary

__all__ = (
    "APPEND",
    "Append",
    "Replace",
    "SurfaceOp",
    "Event",
    "LoadedEvents",
    "SessionHeader",
    "TURN_START",
    "TURN_END",
    "STEP_START",
    "STEP_END",
    "USER_MESSAGE",
    "ASSISTANT_CHUNK",
    "ASSISTANT_MESSAGE",
    "TOOL_CALL",
    "TOOL_RESULT",
    "TODO_WRITE",
    "REQUEST_HEADER",
    "REQUEST_CONTEXT",
    "END_SEED",
    "SURFACE_TYPES",
    "CORE_TYPES",
    "EXTENSION_TYPES",
    "DEFAULT_KNOWN_TYPES",
    "LEGACY_TYPES",
    "ROW_TAGS",
    "TEXT_CHUNKS",
    "REASONING_CHUNKS",
    "TOOL_CALL_CHUNKS",
    "known_type_set",
    "LIVE_ORDER",
    "LazyOrder",
    "wire_order_of",
    "CLOSER_ORDER",
)

TURN_START: Final = "turn/start"
TURN_END: Final = "turn/end"
STEP_START: Final = "step/start"
STEP_END: Final = "step/end"
USER_MESSAGE: Final = "user/message"
ASSISTANT_CHUNK: Final = "assistant/chunk"
ASSISTANT_MESSAGE: Final = "assistant/message"
TOOL_CALL: Final = "tool/call"
TOOL_RESULT: Final = "tool/result"
TODO_WRITE: Final = "todo/write"
REQUEST_HEADER: Final = "request/header"
REQUEST_CONTEXT: Final = "request/context"
END_SEED: Final = "session/end-seed"

SURFACE_TYPES: Final = frozenset({USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT})

CORE_TYPES: Final = frozenset(
    {
        TURN_START,
        TURN_END,
        STEP_START,
        STEP_END,
        USER_MESSAGE,
        ASSISTANT_CHUNK,
        ASSISTANT_MESSAGE,
        TOOL_CALL,
        TOOL_RESULT,
        TODO_WRITE,
        REQUEST_HEADER,
        REQUEST_CONTEXT,
        END_SEED,
    }
)

EXTENSION_TYPES: Final = frozenset(
    """
    agent-preset/selected agent/inbox/spliced approval/asked approval/decided approval/policy
    command/done command/run compaction/end compaction/prune compaction/start compaction/summary
    feedback/record goal/change hook/invoked hook/result llm/retry llm/retry-started
    permission/preset plan/mode sandbox/mode schedule/change session/title
    session/title-llm-request subagent/descriptor team/member team/message/delivered
    team/message/queued team/task tool-workflow/agent-end tool-workflow/agent-start
    tool-workflow/run-end tool-workflow/run-start tool/code-dispatch tool/code-dispatch-start
    web/deepseek-search-llm-request
    """.split()
)
"""Extension types a DeepSeek Harness log may hold; their payloads are opaque
(docs/format/events.md §6.2)."""

DEFAULT_KNOWN_TYPES: Final[frozenset[str]] = CORE_TYPES | EXTENSION_TYPES

LEGACY_TYPES: Final = frozenset({"request/header-delta", "mode/set"})


def known_type_set(known_types: Any) -> frozenset[str]:
    """`known_types` as a frozenset of event type strings; a KernelError names a bad one.

    >>> known_type_set(["acme/note"]) == frozenset({"acme/note"})
    True
    """
    types: frozenset[str] | None = None
    if not isinstance(known_types, str):
        with contextlib.suppress(TypeError):
            types = frozenset(known_types)
    if types is None or not all(type(t) is str for t in types):
        raise KernelError(
            f"known_types must be a collection of event type strings, not {summary(known_types)}"
        )
    return types


# The `type` tags of packed chunk rows (docs/format/events.md §7.5). A stored record
# with one of these is read as a row, never as an event, so no event may carry one (R2).
TEXT_CHUNKS: Final = "text-chunks"
REASONING_CHUNKS: Final = "reasoning-chunks"
TOOL_CALL_CHUNKS: Final = "tool-call-chunks"
ROW_TAGS: Final = frozenset({TEXT_CHUNKS, REASONING_CHUNKS, TOOL_CALL_CHUNKS})

# Envelope member orders the kernel writes (docs/format/events.md §3).
LIVE_ORDER: Final = ("type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp", "ignorable")
CLOSER_ORDER: Final = ("type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs", "ignorable")


@attrs.frozen(repr=False)
class Append:
    """The `"append"` surface operation; use the singleton `APPEND`."""

    def __repr__(self) -> str:
        return "APPEND"

    def __reduce__(self) -> str:
        return "APPEND"  # unpickled, it is the singleton again


APPEND: Final = Append()


@attrs.frozen
class Replace:
    """Replace the current surface nodes from `start` through `end` (by surface position)."""

    start: int
    end: int


SurfaceOp = Append | Replace


_ALREADY_FROZEN: Final = frozenset({FrozenObject, FrozenArray, str, bool, type(None), int, float})
"""Data kept as given: frozen views, and scalars (numbers as parsed; R1 is admission's)."""


class Event(msgspec.Struct, frozen=True, gc=False):
    """One immutable log event.

    `data` is frozen JSON (plain values given here are admitted and frozen);
    `surface_op` is `APPEND`, a `Replace` or None; `source_event_seqs` is the
    envelope's `sourceEventSeqs` (None when absent). `wire_order` is the
    envelope member order to write (not part of equality, hash or repr): a
    tuple, or for an event loaded from storage a `LazyOrder` that reads it off
    the stored line when first needed (`wire_order_of`).

    A msgspec `Struct`, not an attrs class: a load builds one per event, and
    this is the cheapest immutable record to build (see
    docs/rfc/implemented/architecture/2026-12-01-typed-load-path.md). Derive a
    changed copy with `msgspec.structs.replace(event, seq=...)`. Events are not
    tracked by the cyclic collector: nothing they hold refers back to them.

    >>> Event("turn/start", 0, 1, {"turn": 1}).data["turn"]
    1
    """

    type: str
    seq: int
    time: int
    data: Any = None
    surface_op: Append | Replace | None = None
    source_event_seqs: tuple[int, ...] | None = None
    ignorable: bool = False
    wire_order: tuple[str, ...] | LazyOrder = LIVE_ORDER

    def __post_init__(self) -> None:
        if type(self.data) not in _ALREADY_FROZEN:
            _set_data(self, freeze(self.data))
        sources = self.source_event_seqs
        if sources is not None and type(sources) is not tuple:
            try:
                _set_sources(self, tuple(sources))
            except TypeError:
                raise ProvenanceError(
                    "source_event_seqs must be a sequence of seqs (R7a)"
                ) from None

    def _key(self) -> tuple[Any, ...]:
        return (
            self.type,
            self.seq,
            self.time,
            self.data,
            self.surface_op,
            self.source_event_seqs,
            self.ignorable,
        )

    def __eq__(self, other: object) -> bool:
        if type(other) is not Event:
            return NotImplemented
        return self is other or self._key() == other._key()

    def __ne__(self, other: object) -> bool:
        if type(other) is not Event:
            return NotImplemented
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"Event(type={self.type!r}, seq={self.seq!r}, time={self.time!r}, "
            f"data={self.data!r}, surface_op={self.surface_op!r}, "
            f"source_event_seqs={self.source_event_seqs!r}, ignorable={self.ignorable!r})"
        )


class LoadedEvents(tuple[Event, ...]):
    """Events exactly as a loader built them from stored records, in the loader's order.

    A marker for the loader's own tuple (`kernel.folds.surface.AdmittedEvents` derives
    from it): every event is the one the loader made, so the members of a stored
    chunk row stand together, in order, unchanged and with consecutive seqs. The
    writer packs them again without looking at each (`kernel.wire.chunks.loaded_row`),
    and the invariant tracker passes over them at once (`kernel.folds.invariants`).
    Nothing but a loader makes one; a slice or a copy is a plain tuple.
    """

    __slots__ = ()


class LazyOrder(Protocol):
    """An envelope member order not read yet: `keys()` reads it (once) from where it is."""

    def keys(self) -> tuple[str, ...]:
        """The member order of the stored envelope."""


def wire_order_of(event: Event) -> tuple[str, ...]:
    """The envelope member order to write `event` with."""
    order = event.wire_order
    return order if type(order) is tuple else order.keys()  # type: ignore[union-attr]


_set_data = Event.__dict__["data"].__set__
_set_sources = Event.__dict__["source_event_seqs"].__set__


@attrs.frozen(slots=True)
class SessionHeader:
    """The session header record beside the log (docs/format/events.md §2.1); never an event."""

    id: str
    created_at: int
    version: int = 0
    cwd: str | None = None
    parent_session: str | None = None
    seed_length: int | None = None
    origin: str | None = None
    delegation_depth: int | None = None
    agent_preset: str | None = None
