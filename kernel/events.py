"""The event model: `Event`, `SessionHeader`, the surface operations and the type names.

One `Event` class for every type; the payload is frozen JSON (`kernel.json`).
An event remembers the member order of the envelope it was read from so the
JSONL writer can reproduce it byte for byte (persistence.md §2.4).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import attrs

from kernel.json import FrozenArray, FrozenObject, freeze

__all__ = (
    "APPEND",
    "Append",
    "Replace",
    "SurfaceOp",
    "Event",
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
    "LIVE_ORDER",
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
"""Extension types a DeepSeek Harness log may hold; their payloads are opaque (events.md §6.2)."""

DEFAULT_KNOWN_TYPES: Final = CORE_TYPES | EXTENSION_TYPES

LEGACY_TYPES: Final = frozenset({"request/header-delta", "mode/set"})

# Envelope member orders the kernel writes (events.md §3).
LIVE_ORDER: Final = ("type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp", "ignorable")
CLOSER_ORDER: Final = ("type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs", "ignorable")


@attrs.frozen(repr=False)
class Append:
    """The `"append"` surface operation; use the singleton `APPEND`."""

    def __repr__(self) -> str:
        return "APPEND"


APPEND: Final = Append()


@attrs.frozen
class Replace:
    """Replace the current surface nodes from `start` through `end` (by surface position)."""

    start: int
    end: int


SurfaceOp = Append | Replace


def _frozen_data(value: Any) -> Any:
    t = type(value)
    if t is FrozenObject or t is FrozenArray or value is None or t is str or t is bool:
        return value
    return freeze(value)


def _seq_tuple(value: Sequence[int] | None) -> tuple[int, ...] | None:
    return None if value is None else tuple(value)


@attrs.frozen(slots=True)
class Event:
    """One immutable log event.

    `data` is frozen JSON (plain values given here are admitted and frozen);
    `surface_op` is `APPEND`, a `Replace` or None; `source_event_seqs` is the
    envelope's `sourceEventSeqs` (None when absent). `wire_order` is the
    envelope member order to write (not part of equality).
    """

    type: str
    seq: int
    time: int
    data: Any = attrs.field(default=None, converter=_frozen_data)
    surface_op: Append | Replace | None = None
    source_event_seqs: tuple[int, ...] | None = attrs.field(default=None, converter=_seq_tuple)
    ignorable: bool = False
    wire_order: tuple[str, ...] = attrs.field(default=LIVE_ORDER, eq=False, repr=False)


@attrs.frozen(slots=True)
class SessionHeader:
    """The session header record kept beside the log (events.md §2.1); never an event."""

    id: str
    created_at: int
    version: int = 0
    cwd: str | None = None
    parent_session: str | None = None
    seed_length: int | None = None
    origin: str | None = None
    delegation_depth: int | None = None
    agent_preset: str | None = None
