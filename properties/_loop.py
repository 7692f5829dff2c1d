"""G-loop: logs shaped like real model-loop output (docs/format/properties.md §1), and their crash
prefixes.

Internal to the kit: `properties.strategies` re-exports the public names (the
strategies, `LoopLog`, `CrashPrefix`, `LOOP_SHAPES`). Hypothesis draws a short list
of small *actions* (a turn with its steps, a user message, an extension event, a
compaction, a re-seed); `interpret` turns them into wire events deterministically,
tracking the surface, the pairing cuts and the request-header writer with the kit's
independent model of the folds. Shrinking therefore removes whole turns, steps and
calls, and a failure shows a short log.

A script's `shape` fixes the order of the events (`LOOP_SHAPES`): DSH's agent-loop
order by default, or the looser orders v0 also admits. Both must stay valid v0.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

import attrs
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from kernel.values.events import Event
from kernel.wire.codec import event_from_json
from properties import _shapes as shapes
from properties._json_values import array_index_objects, json_strings, json_values
from properties._model import (
    SurfaceModel,
    WriterModel,
    header_fold,
    messages_of,
    pairing_cuts,
)
from properties._report import format_log, pretty_as_repr
from properties._shapes import Wire
from properties._validation import check_bool, check_choice, check_order, check_size

__all__ = (
    "HEADER_POOL",
    "LOOP_SHAPES",
    "LoopShape",
    "ShapeChoice",
    "check_shape",
    "CallSpec",
    "ReplySpec",
    "StepSpec",
    "TurnAction",
    "UserAction",
    "ExtensionAction",
    "CompactAction",
    "ReseedAction",
    "Action",
    "LoopScript",
    "Attempt",
    "LoopLog",
    "CrashPrefix",
    "interpret",
    "loop_scripts",
    "loop_logs",
    "loop_events",
    "crash_prefixes",
    "session_headers",
    "plain_text",
)

_TOOLS = [{"name": "ls", "description": "List files", "parameters": {"type": "object"}}]
_TOOLS_REORDERED = [{"description": "List files", "name": "ls", "parameters": {"type": "object"}}]
_CONFIG = {"provider": "deepseek", "model": "deepseek-chat"}

HEADER_POOL: tuple[dict[str, Any], ...] = (
    {"config": dict(_CONFIG)},
    {"config": dict(_CONFIG), "system": "You are terse."},
    {"config": dict(_CONFIG), "tools": copy.deepcopy(_TOOLS)},
    {
        "config": {
            "provider": "deepseek",
            "model": "deepseek-reasoner",
            "reasoningEffort": "high",
            "maxTokens": 4096,
        },
        "adapterDefaults": {"maxTokens": True},
        "system": "s",
    },
    {"config": {**_CONFIG, "temperature": 1.0, "topP": 0.5}},
    {"config": {**_CONFIG, "temperature": 1}},
    {"config": dict(_CONFIG), "tools": copy.deepcopy(_TOOLS_REORDERED)},
    {"config": {**_CONFIG, "stop": []}},
)
"""Canonical request headers the simulated writer switches between.

Entries 4 and 5 are equal under header equality (unknown config keys ignored,
`1.0 == 1`); 2 and 6 differ only in tool member order (not equal); 0 and 7
differ only by `stop: []` (not equal).
"""


LoopShape = Literal["dsh", "loose"]
"""The order a G-loop log's events are written in (see `LOOP_SHAPES`)."""

LOOP_SHAPES: tuple[LoopShape, ...] = ("dsh", "loose")
"""The loop shapes (docs/properties.md, "Loop shapes" says what each writes).

`"dsh"`, the default, is DSH's agent loop: a step claims the user messages sent
since the previous step right after its `step/start`, each `tool/call` is followed
by its `tool/result`, and a compaction is `compaction/start`, `compaction/summary`,
the checkpoint `user/message` and `compaction/end`, back to back. `"loose"` is the
kit's earlier order: user messages between turns, calls and results interleaved
with notices, and a compaction as a bare replacing `user/message`.
"""

ShapeChoice = LoopShape | Literal["any"]
"""What the strategies' `shape` takes: a loop shape, or `"any"` to draw one per example."""


def check_shape(shape: Any) -> None:
    """Raise `InvalidArgument` unless `shape` is a `ShapeChoice`."""
    check_choice("shape", shape, (*LOOP_SHAPES, "any"))


def plain_text() -> st.SearchStrategy[str]:
    """Short ASCII text (the fast default for generated message text)."""
    return st.text(alphabet="abc xyz.", max_size=8)


# -- actions ------------------------------------------------------------------------------------


@attrs.frozen
class CallSpec:
    """One tool call of an assistant message, and its result."""

    name: str
    arguments: str
    output: str
    is_error: bool
    meta: bool


@attrs.frozen
class ReplySpec:
    """The model's reply in one step.

    `form`: `"text"` (optional text/reasoning plus `calls`), `"empty"` (content
    `[]` with usage) or `"interrupted"` (text only, `interrupted: true`).
    `stream`: 0 no chunks (`sourceEventSeqs: []`), 1 chunks cited, 2 chunks not cited.
    """

    form: str
    text: str
    reasoning: str | None
    calls: tuple[CallSpec, ...]
    stream: int
    pieces: int
    usage: bool


@attrs.frozen
class StepSpec:
    """One step: input, header decision(s), context, stream, message, calls and results.

    `schedule` and `injections` order the calls and results and place system notices
    between them (loose shape only); `compact` is a compaction right after the step's
    `step/end` (DSH shape only).
    """

    user_input: str | None
    header: int
    declared: bool
    retry_header: int | None
    window: bool
    reply: ReplySpec
    schedule: tuple[int, ...]
    injections: tuple[int, ...]
    todo: bool
    compact: CompactAction | None = None


@attrs.frozen
class TurnAction:
    """One turn: `turn/start`, its steps, an optional tool-result rewrite, `turn/end`.

    `restart`: a new writer instance (a process restart: re-seed) runs this turn.
    """

    steps: tuple[StepSpec, ...]
    reason: int
    rewrite: int | None
    rewrite_text: str
    restart: bool = False


@attrs.frozen
class UserAction:
    """A user's message sent between turns.

    Loose shape: a `user/message` written where it is. DSH shape: written by the next
    step that starts, after its `step/start` (never written if no step follows).
    """

    text: str


@attrs.frozen
class ExtensionAction:
    """An extension event between turns (known type, or unknown and ignorable)."""

    kind: int
    unknown: bool
    ignorable: bool
    payload: Any


@attrs.frozen
class CompactAction:
    """A compaction over a balanced surface range, chosen by `start`/`end` picks.

    Loose shape: `extra` adds a citation, `bracket` adds `compaction/start` and
    `compaction/end`. DSH shape: `failed` writes `compaction/start` and
    `compaction/end` with an `error`, and nothing is replaced.
    """

    start: int
    end: int
    extra: int | None
    bracket: bool
    failed: bool = False


@attrs.frozen
class ReseedAction:
    """Construct a new session from the log so far (end-seed marker; new writer instance)."""


Action = TurnAction | UserAction | ExtensionAction | CompactAction | ReseedAction


@attrs.frozen
class LoopScript:
    """What Hypothesis draws: a start time, a clock pattern, the actions and the loop shape."""

    start_time: int
    ticks: tuple[int, ...]
    actions: tuple[Action, ...]
    rich: bool = False
    shape: LoopShape = attrs.field(default="dsh", validator=attrs.validators.in_(LOOP_SHAPES))


@attrs.frozen
class Attempt:
    """One simulated model request attempt (for the writer laws P25-P27).

    `at`: log length when the header decision ran; `dispatch_at`: log length when
    the request was sent; `decision`: the `reason`/`startsSeries` fields appended
    (None when nothing was appended); `messages`: the messages sent.
    """

    at: int
    instance: int
    first_of_instance: bool
    header: dict[str, Any]
    declared: bool
    retry: bool
    generation: int
    decision: dict[str, Any] | None
    context: dict[str, Any]
    context_appended: bool
    dispatch_at: int
    messages: tuple[Any, ...]


@attrs.frozen(repr=False)
class LoopLog:
    """A generated model-loop log: wire events plus the simulated writer's record.

    Attributes:
        events: the wire events, in seq order; do not mutate them (`wire()` copies).
        attempts: every model request the simulated writer made (its header, declaration,
            decision, context and the messages sent), which the writer laws P25-P27 replay.
        seeds: the log lengths at which the writer re-seeded.
        script: the drawn actions the events were interpreted from; `shape` is the part of
            it a test reads.
    """

    events: tuple[Wire, ...]
    attempts: tuple[Attempt, ...]
    seeds: tuple[int, ...]
    script: LoopScript

    @property
    def shape(self) -> LoopShape:
        """The loop shape the events are written in (`"dsh"` or `"loose"`)."""
        return self.script.shape

    def kernel_events(self) -> tuple[Event, ...]:
        """The events decoded with `kernel.event_from_json`."""
        return tuple(event_from_json(e) for e in self.events)

    def wire(self) -> list[Wire]:
        """A caller-owned deep copy of the wire events."""
        return copy.deepcopy(list(self.events))

    def __len__(self) -> int:
        return len(self.events)

    def __repr__(self) -> str:
        return f"LoopLog({len(self.events)} events)\n{format_log(self.events)}"

    _repr_pretty_ = pretty_as_repr


class CrashPrefix(NamedTuple):
    """G-crash input: a G-loop log and a cut `k`; the crash prefix is its first `k` events.

    `events` are kernel `Event`s, what `interrupted_turn_closers` and the other kernel
    functions take; `wire()` gives the same prefix as wire dicts. Unpacks as `(log, k)`;
    prints as the prefix, one wire event per line.
    """

    log: LoopLog
    k: int

    @property
    def events(self) -> tuple[Event, ...]:
        """The crash prefix as kernel `Event`s (the first `k` events of the log)."""
        return tuple(event_from_json(e) for e in self.log.events[: self.k])

    def wire(self) -> list[Wire]:
        """The crash prefix as caller-owned wire dicts."""
        return copy.deepcopy(list(self.log.events[: self.k]))

    def __repr__(self) -> str:
        total = len(self.log.events)
        return f"CrashPrefix({self.k} of {total} events)\n{format_log(self.log.events[: self.k])}"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        pretty_as_repr(self, p, cycle)


# -- interpretation -----------------------------------------------------------------------------


@attrs.define
class _Builder:
    script: LoopScript
    events: list[Wire] = attrs.Factory(list)
    surface: SurfaceModel = attrs.Factory(SurfaceModel)
    writer: WriterModel = attrs.Factory(lambda: WriterModel(generation_at_last_request=0))
    instance: int = 0
    last_context: dict[str, Any] | None = None
    turn: int = 0
    time: int = 0
    attempts: list[Attempt] = attrs.Factory(list)
    seeds: list[int] = attrs.Factory(list)
    queued: list[str] = attrs.Factory(list)

    def emit(
        self,
        type_: str,
        data: Any,
        *,
        surface_op: Any = None,
        sources: list[int] | None = None,
        ignorable: bool = False,
    ) -> int:
        seq = len(self.events)
        ticks = self.script.ticks
        self.time += ticks[seq % len(ticks)] if ticks else 1
        event = shapes.envelope(
            type_,
            seq,
            self.time,
            data,
            surface_op=surface_op,
            sources=sources,
            ignorable=ignorable,
        )
        self.events.append(event)
        self.surface.step(event)
        return seq

    @property
    def next_seq(self) -> int:
        return len(self.events)

    @property
    def dsh(self) -> bool:
        return self.script.shape == "dsh"


def _split(text: str, pieces: int) -> list[str]:
    if pieces <= 1:
        return [text]
    size = max(1, -(-len(text) // pieces))
    parts = [text[i : i + size] for i in range(0, len(text), size)] or [""]
    while len(parts) < pieces:
        parts.append("")
    return parts


def _request(b: _Builder, turn: int, step: StepSpec, header_index: int, retry: bool) -> None:
    header = copy.deepcopy(HEADER_POOL[header_index % len(HEADER_POOL)])
    declared = step.declared and not retry
    at = b.next_seq
    first = not b.writer.anchored
    generation = b.surface.generation
    decision = b.writer.decide(header, header_fold(b.events), declared, generation)
    if decision is not None:
        b.emit("request/header", {"header": copy.deepcopy(header), **decision})
    context: dict[str, Any] = {
        "provider": header["config"]["provider"],
        "model": header["config"]["model"],
    }
    if step.window:
        context["contextWindow"] = 128000
    appended = b.last_context != context
    if appended:
        b.emit("request/context", dict(context))
        b.last_context = context
    b.attempts.append(
        Attempt(
            at=at,
            instance=b.instance,
            first_of_instance=first,
            header=header,
            declared=declared,
            retry=retry,
            generation=generation,
            decision=decision,
            context=dict(context),
            context_appended=appended,
            dispatch_at=b.next_seq,
            messages=tuple(messages_of(b.events)),
        )
    )


def _content(turn: int, step_no: int, reply: ReplySpec) -> list[dict[str, Any]]:
    if reply.form == "empty":
        return []
    blocks: list[dict[str, Any]] = []
    if reply.reasoning is not None:
        reasoning = reply.reasoning
        if reply.form == "interrupted" and not reasoning.strip():
            reasoning = "thinking"
        blocks.append({"type": "reasoning", "text": reasoning})
    text = reply.text
    if reply.form == "interrupted" and not text.strip():
        text = "partial"
    if text or reply.form == "interrupted" or not reply.calls:
        blocks.append({"type": "text", "text": text})
    if reply.form == "text":
        for i, call in enumerate(reply.calls):
            blocks.append(
                {
                    "type": "tool-call",
                    "id": f"c{turn}.{step_no}.{i}",
                    "name": call.name,
                    "arguments": call.arguments,
                }
            )
    return blocks


def _stream(b: _Builder, turn: int, step_no: int, reply: ReplySpec, blocks: list[Any]) -> list[int]:
    seqs: list[int] = []

    def chunk(c: dict[str, Any]) -> None:
        seqs.append(b.emit("assistant/chunk", shapes.chunk_data(turn, step_no, c)))

    for index, block in enumerate(blocks):
        chunk({"type": "block-start", "index": index, "blockType": block["type"]})
        if block["type"] in ("text", "reasoning"):
            kind = "text-delta" if block["type"] == "text" else "reasoning-delta"
            for piece in _split(block["text"], reply.pieces):
                chunk({"type": kind, "index": index, "text": piece})
        else:
            for k, piece in enumerate(_split(block["arguments"], reply.pieces)):
                delta: dict[str, Any] = {
                    "type": "tool-call-delta",
                    "index": index,
                    "id": block["id"],
                }
                if k == 0:
                    delta["name"] = block["name"]
                delta["argumentsDelta"] = piece
                chunk(delta)
        if reply.form != "interrupted":
            chunk({"type": "block-end", "index": index, "block": copy.deepcopy(block)})
    if reply.form == "interrupted":
        return seqs
    if reply.usage:
        chunk({"type": "usage", "usage": {"inputTokens": 10, "outputTokens": len(seqs)}})
    finish = "tool-calls" if any(bl["type"] == "tool-call" for bl in blocks) else "stop"
    chunk({"type": "finish", "reason": {"kind": finish}})
    return seqs


_RICH_META: dict[str, Any] = {"b": 1, "10": 2, "a": 3.0, "2": [1e16, 1e-7, 1e21, 2.5]}


def _tool_result(
    b: _Builder, turn: int, step_no: int, block: dict[str, Any], spec: CallSpec, call_seq: int
) -> None:
    seq = b.next_seq
    message = shapes.tool_result_message(
        f"r{seq}", block["id"], [{"type": "text", "text": spec.output}], is_error=spec.is_error
    )
    error = {"name": "ToolError", "code": "E_TOOL"} if spec.is_error else None
    meta: Any = copy.deepcopy(_RICH_META) if b.script.rich else {"tags": ["a"]}
    data = shapes.tool_result_data(
        turn, step_no, message, error=error, meta=meta, with_meta=spec.meta
    )
    b.emit("tool/result", data, surface_op="append", sources=[call_seq])


def _results(b: _Builder, turn: int, step_no: int, step: StepSpec, blocks: list[Any]) -> None:
    """Loose shape: calls and results in the order `step.schedule` picks, notices between."""
    calls = [bl for bl in blocks if bl["type"] == "tool-call"]
    specs = step.reply.calls
    n = len(calls)
    called: list[int] = []
    call_seq: dict[int, int] = {}
    answered: set[int] = set()
    picks = iter(step.schedule)
    op_index = 0
    while len(answered) < n:
        pending = [i for i in called if i not in answered]
        avail: list[tuple[str, int]] = [("call", len(called))] if len(called) < n else []
        avail += [("result", i) for i in pending]
        kind, i = avail[next(picks, 0) % len(avail)]
        block = calls[i]
        if kind == "call":
            call_seq[i] = b.emit(
                "tool/call",
                shapes.tool_call_data(
                    turn, step_no, block["id"], block["name"], block["arguments"]
                ),
            )
            called.append(i)
        else:
            _tool_result(b, turn, step_no, block, specs[i], call_seq[i])
            answered.add(i)
        if op_index in step.injections and len(called) > len(answered):
            seq = b.next_seq
            b.emit(
                "user/message",
                shapes.user_message(f"n{seq}", "notice", kind="system-notice"),
                surface_op="append",
            )
        op_index += 1


def _results_in_order(
    b: _Builder, turn: int, step_no: int, step: StepSpec, blocks: list[Any]
) -> None:
    """DSH shape: each `tool/call`, then its `tool/result`, in the message's order."""
    calls = [bl for bl in blocks if bl["type"] == "tool-call"]
    # An empty or interrupted reply has no tool-call blocks, whatever calls were drawn.
    for block, spec in zip(calls, step.reply.calls, strict=False):
        call_seq = b.emit(
            "tool/call",
            shapes.tool_call_data(turn, step_no, block["id"], block["name"], block["arguments"]),
        )
        _tool_result(b, turn, step_no, block, spec, call_seq)


def _user(b: _Builder, text: str) -> None:
    seq = b.next_seq
    b.emit("user/message", shapes.user_message(f"u{seq}", text), surface_op="append")


def _step(b: _Builder, turn: int, step_no: int, step: StepSpec) -> None:
    b.emit("step/start", {"turn": turn, "step": step_no})
    if b.dsh:
        # DSH's step claims the messages sent since the previous step.
        for text in b.queued:
            _user(b, text)
        b.queued.clear()
    if step.user_input is not None:
        _user(b, step.user_input)
    _request(b, turn, step, step.header, retry=False)
    if step.retry_header is not None:
        b.emit("llm/retry", {"attempt": 2})
        _request(b, turn, step, step.retry_header, retry=True)
    reply = step.reply
    blocks = _content(turn, step_no, reply)
    chunk_seqs = _stream(b, turn, step_no, reply, blocks) if reply.stream else []
    seq = b.next_seq
    usage = (
        {"inputTokens": 100, "outputTokens": 7} if (reply.usage or reply.form == "empty") else None
    )
    data = shapes.assistant_data(
        turn,
        step_no,
        shapes.assistant_message(f"a{seq}", blocks),
        usage=usage,
        interrupted=reply.form == "interrupted",
    )
    sources = None if reply.stream == 2 else chunk_seqs
    b.emit("assistant/message", data, surface_op="append", sources=sources)
    if step.todo:
        b.emit("todo/write", {"todos": [{"content": "check", "status": "in_progress"}]})
    if b.dsh:
        _results_in_order(b, turn, step_no, step, blocks)
    else:
        _results(b, turn, step_no, step, blocks)
    b.emit("step/end", {"turn": turn, "step": step_no})
    if b.dsh and step.compact is not None:
        _compact(b, step.compact)


def _rewrite(b: _Builder, pick: int, text: str) -> None:
    targets = [s for s in b.surface.nodes if b.events[s]["type"] == "tool/result"]
    if not targets:
        return
    target = targets[pick % len(targets)]
    data = copy.deepcopy(b.events[target]["data"])
    data["message"]["content"][0]["content"] = [{"type": "text", "text": "[pruned] " + text}]
    b.emit("tool/result", data, surface_op=shapes.replace_op(target, target), sources=[target])


def _turn(b: _Builder, action: TurnAction) -> None:
    if action.restart:
        _reseed(b)
    b.turn += 1
    turn = b.turn
    b.emit("turn/start", {"turn": turn})
    for k, step in enumerate(action.steps, start=1):
        _step(b, turn, k, step)
    # In DSH order a turn's surface events follow its first step/start: no step, no rewrite.
    if action.rewrite is not None and (action.steps or not b.dsh):
        _rewrite(b, action.rewrite, action.rewrite_text)
    reasons = shapes.turn_end_reasons()
    b.emit(
        "turn/end", {"turn": turn, "reason": copy.deepcopy(reasons[action.reason % len(reasons)])}
    )


def _compaction_range(b: _Builder, action: CompactAction) -> list[int] | None:
    """The shadowed nodes the picks choose: a surface range between two balanced cuts."""
    nodes = list(b.surface.nodes)
    cuts = pairing_cuts(b.events, nodes)
    starts = [i for i in range(len(nodes)) if cuts[i]]
    if not starts:
        return None
    i = starts[action.start % len(starts)]
    ends = [j for j in range(i, len(nodes)) if cuts[j + 1]]
    if not ends:
        return None
    j = ends[action.end % len(ends)]
    return nodes[i : j + 1]


def _compact(b: _Builder, action: CompactAction) -> None:
    shadowed = _compaction_range(b, action)
    if shadowed is None:
        return
    if b.dsh:
        _compact_transaction(b, action, shadowed)
        return
    sources = list(shadowed)
    seq = b.next_seq + (1 if action.bracket else 0)
    if action.extra is not None:
        extra = action.extra % seq
        if extra not in sources:
            sources.append(extra)
    if action.bracket:
        b.emit("compaction/start", {"range": [shadowed[0], shadowed[-1]]})
    b.emit(
        "user/message",
        shapes.user_message(f"s{seq}", f"summary of {len(shadowed)} messages", kind="plugin"),
        surface_op=shapes.replace_op(shadowed[0], shadowed[-1]),
        sources=sources,
    )
    if action.bracket:
        b.emit("compaction/end", {})


def _compact_transaction(b: _Builder, action: CompactAction, shadowed: list[int]) -> None:
    """DSH shape: start, summary, checkpoint and end, back to back (start and end if failed).

    `turn` is the open turn, or between turns the last one (0 before the first).
    """
    compaction_id = f"k{b.next_seq}"  # a seq: unique in the log, across re-seeds too
    turn = b.turn
    start = b.emit("compaction/start", shapes.compaction_start_data(compaction_id, turn))
    if action.failed:
        error = {"message": "the summary request failed", "code": "E_COMPACT"}
        b.emit("compaction/end", shapes.compaction_end_data(compaction_id, turn, error=error))
        return
    text = f"summary of {len(shadowed)} messages"
    summary = b.emit(
        "compaction/summary",
        shapes.compaction_summary_data(
            compaction_id,
            [{"type": "text", "text": text}],
            shadowed,
            provider=_CONFIG["provider"],
            model=_CONFIG["model"],
        ),
    )
    seq = b.next_seq
    b.emit(
        "user/message",
        shapes.checkpoint_message(f"s{seq}", text, compaction_id),
        surface_op=shapes.replace_op(shadowed[0], shadowed[-1]),
        sources=[start, summary, *shadowed],
    )
    b.emit("compaction/end", shapes.compaction_end_data(compaction_id, turn))


# A lone `compaction/start` or `compaction/end` would be a broken transaction in DSH order.
_DSH_EXTENSIONS = tuple(k for k in shapes.KNOWN_EXTENSIONS if not k.startswith("compaction/"))


def _extension(b: _Builder, action: ExtensionAction) -> None:
    if action.unknown:
        kind = shapes.IGNORABLE_EXTENSIONS[action.kind % len(shapes.IGNORABLE_EXTENSIONS)]
        b.emit(kind, copy.deepcopy(action.payload), ignorable=True)
    else:
        kinds = _DSH_EXTENSIONS if b.dsh else shapes.KNOWN_EXTENSIONS
        kind = kinds[action.kind % len(kinds)]
        b.emit(kind, copy.deepcopy(action.payload), ignorable=action.ignorable)


def _reseed(b: _Builder) -> None:
    b.seeds.append(len(b.events))
    if not b.events or b.events[-1]["type"] != "session/end-seed":
        b.emit("session/end-seed", {})
    b.instance += 1
    b.writer = WriterModel(generation_at_last_request=b.surface.generation)


def interpret(script: LoopScript) -> LoopLog:
    """Turn a script into a log, deterministically, in the order `script.shape` names."""
    b = _Builder(script=script, time=script.start_time)
    for action in script.actions:
        if isinstance(action, TurnAction):
            _turn(b, action)
        elif isinstance(action, UserAction):
            if b.dsh:
                b.queued.append(action.text)  # written by the next step that starts
            else:
                _user(b, action.text)
        elif isinstance(action, ExtensionAction):
            _extension(b, action)
        elif isinstance(action, CompactAction):
            _compact(b, action)
        else:
            _reseed(b)
    return LoopLog(tuple(b.events), tuple(b.attempts), tuple(b.seeds), script)


# -- strategies ---------------------------------------------------------------------------------


def _calls(text: st.SearchStrategy[str]) -> st.SearchStrategy[CallSpec]:
    return st.builds(
        CallSpec,
        name=st.sampled_from(["ls", "read", "write"]),
        arguments=st.sampled_from(["{}", '{"path":"."}', '{"a":[1,2]}', "not json"]),
        output=text,
        is_error=st.booleans(),
        meta=st.booleans(),
    )


def _replies(text: st.SearchStrategy[str], max_calls: int) -> st.SearchStrategy[ReplySpec]:
    return st.builds(
        ReplySpec,
        form=st.sampled_from(["text", "text", "text", "empty", "interrupted"]),
        text=text,
        reasoning=st.none() | text,
        calls=st.lists(_calls(text), max_size=max_calls).map(tuple),
        stream=st.sampled_from([0, 1, 2]),
        pieces=st.integers(1, 5),
        usage=st.booleans(),
    )


def _compactions(shape: LoopShape) -> st.SearchStrategy[CompactAction]:
    dsh = shape == "dsh"
    return st.builds(
        CompactAction,
        start=st.integers(0, 6),
        end=st.integers(0, 6),
        # Each shape draws only the fields it reads, so shrinking never spends a step on the others.
        extra=st.none() if dsh else st.none() | st.integers(0, 50),
        bracket=st.just(False) if dsh else st.booleans(),
        failed=st.sampled_from([False, False, False, True]) if dsh else st.just(False),
    )


def _steps(
    text: st.SearchStrategy[str], max_calls: int, shape: LoopShape
) -> st.SearchStrategy[StepSpec]:
    # Mostly the first header, so that unchanged headers (no event, `series`) are common.
    header = st.sampled_from([0, 0, 0, 0, 0, *range(len(HEADER_POOL))])
    dsh = shape == "dsh"
    none: st.SearchStrategy[CompactAction | None] = st.none()
    return st.builds(
        StepSpec,
        user_input=st.none() | text,
        header=header,
        declared=st.booleans(),
        retry_header=st.none() | header,
        window=st.booleans(),
        reply=_replies(text, max_calls),
        schedule=st.just(()) if dsh else st.lists(st.integers(0, 5), max_size=6).map(tuple),
        injections=st.just(()) if dsh else st.lists(st.integers(0, 5), max_size=2).map(tuple),
        todo=st.booleans(),
        # One step in four compacts after its step/end (DSH's in-turn compaction).
        compact=st.one_of(none, none, none, _compactions(shape)) if dsh else none,
    )


def _actions(
    text: st.SearchStrategy[str],
    max_steps: int,
    max_calls: int,
    payload: st.SearchStrategy[Any],
    min_steps: int,
    shape: LoopShape,
) -> st.SearchStrategy[Action]:
    steps = st.lists(_steps(text, max_calls, shape), min_size=min_steps, max_size=max_steps)
    turn = st.builds(
        TurnAction,
        steps=steps.map(tuple),
        reason=st.integers(0, len(shapes.turn_end_reasons()) - 1),
        rewrite=st.none() | st.integers(0, 5),
        rewrite_text=text,
        restart=st.sampled_from([False, False, False, True]),
    )
    # A user message first: the shrinker moves towards the first branch, and it is the
    # simplest action (one event, or none in DSH order until a step claims it); a turn is
    # drawn three times as often as each other kind.
    return st.one_of(
        st.builds(UserAction, text=text),
        turn,
        turn,
        turn,
        st.builds(
            ExtensionAction,
            kind=st.integers(0, 7),
            unknown=st.booleans(),
            ignorable=st.booleans(),
            payload=payload,
        ),
        _compactions(shape),
        st.just(ReseedAction()),
    )


def loop_scripts(
    *,
    max_actions: int = 6,
    max_steps: int = 3,
    max_calls: int = 3,
    rich: bool = False,
    min_actions: int = 0,
    min_steps: int = 0,
    shape: ShapeChoice = "dsh",
) -> st.SearchStrategy[LoopScript]:
    """Scripts for `interpret`, with the arguments of `loop_logs` (checked here)."""
    for name, value in (
        ("max_actions", max_actions),
        ("max_steps", max_steps),
        ("max_calls", max_calls),
        ("min_actions", min_actions),
        ("min_steps", min_steps),
    ):
        check_size(name, value)
    check_order("min_actions", min_actions, "max_actions", max_actions)
    check_order("min_steps", min_steps, "max_steps", max_steps)
    check_bool("rich", rich)
    check_shape(shape)
    if shape == "any":
        # `one_of` over built strategies, not `flatmap`: a flatmap builds the whole strategy
        # again for every example, which made drawing three times slower. The first branch is
        # the one the shrinker moves towards.
        return st.one_of(
            *(
                loop_scripts(
                    max_actions=max_actions,
                    max_steps=max_steps,
                    max_calls=max_calls,
                    rich=rich,
                    min_actions=min_actions,
                    min_steps=min_steps,
                    shape=drawn,
                )
                for drawn in LOOP_SHAPES
            )
        )
    text = json_strings(max_size=9) if rich else plain_text()
    payload: st.SearchStrategy[Any] = (
        st.one_of(json_values(max_leaves=5), array_index_objects())
        if rich
        else st.one_of(st.none(), st.fixed_dictionaries({"title": plain_text()}))
    )
    return st.builds(
        LoopScript,
        start_time=st.one_of(st.just(1_760_000_000_000), st.integers(-(10**6), 2**52)),
        ticks=st.lists(st.integers(-3, 400), max_size=3).map(tuple),
        actions=st.lists(
            _actions(text, max_steps, max_calls, payload, min_steps, shape),
            min_size=min_actions,
            max_size=max_actions,
        ).map(tuple),
        rich=st.just(rich),
        shape=st.just(shape),
    )


def loop_logs(
    *,
    max_actions: int = 6,
    max_steps: int = 3,
    max_calls: int = 3,
    rich: bool = False,
    min_actions: int = 0,
    min_steps: int = 0,
    shape: ShapeChoice = "dsh",
) -> st.SearchStrategy[LoopLog]:
    """G-loop: valid, well-formed model-loop logs (every turn closed), in DSH's loop order
    unless `shape` says otherwise.

    Args:
        max_actions: the most actions (a turn, a user message between turns, an extension
            event, a compaction, a re-seed) in a log.
        max_steps: the most steps in a turn.
        max_calls: the most tool calls in one assistant message.
        rich: draw G-json text, array-index keys and numbers with tricky spellings instead of
            short ASCII text.
        min_actions: the fewest actions, for longer logs (e.g. several requests for the writer
            laws); at most `max_actions`.
        min_steps: the fewest steps in a turn; at most `max_steps`.
        shape: one of `LOOP_SHAPES`, or `"any"` to draw one per example (shrinking towards
            `"dsh"`).

    Raises:
        InvalidArgument: when built with a size that is not an int of at least 0, a minimum
            above its maximum, a `rich` that is not a bool, or an unknown `shape`.
    """
    return loop_scripts(
        max_actions=max_actions,
        max_steps=max_steps,
        max_calls=max_calls,
        rich=rich,
        min_actions=min_actions,
        min_steps=min_steps,
        shape=shape,
    ).map(interpret)


def loop_events(**kwargs: Any) -> st.SearchStrategy[tuple[Event, ...]]:
    """G-loop logs as kernel `Event`s; `kwargs` are the arguments of `loop_logs`, checked the
    same way."""
    return loop_logs(**kwargs).map(LoopLog.kernel_events)


def crash_prefixes(**kwargs: Any) -> st.SearchStrategy[CrashPrefix]:
    """G-crash: `CrashPrefix(log, k)`, a G-loop log and a cut `0 <= k <= len(log)` (the prefix
    is `log.events[:k]`; it unpacks as `log, k`). `k` shrinks towards the log's end, so a
    shrunk prefix is a short log cut late, not a long log cut early. `kwargs` are the arguments
    of `loop_logs` (`shape` included: DSH order by default), checked the same way."""
    logs = loop_logs(**kwargs)

    @st.composite
    def build(draw: st.DrawFn) -> CrashPrefix:
        log = draw(logs)
        return CrashPrefix(log, len(log.events) - draw(st.integers(0, len(log.events))))

    return build()


def session_headers(*, session_id: str = "sess-1") -> st.SearchStrategy[dict[str, Any]]:
    """Valid in-memory session header records (docs/format/events.md §2.1) as plain dicts.

    Args:
        session_id: the `id` of every header drawn, any str.

    Raises:
        InvalidArgument: when built with a `session_id` that is not a str.
    """
    if not isinstance(session_id, str):
        raise InvalidArgument(
            f"session_id={session_id!r} must be a str, not {type(session_id).__name__}"
        )
    optional = st.fixed_dictionaries(
        {},
        optional={
            "cwd": st.sampled_from(["/work/demo", "/projects/my demo", "/"]),
            "parentSession": st.sampled_from(["parent-1", ""]),
            "seedLength": st.integers(0, 50),
            "origin": st.just("subagent"),
            "delegationDepth": st.integers(0, 3),
            "agentPreset": st.sampled_from(["default", "ré"]),
        },
    )
    return st.builds(
        lambda created, extra: {"version": 0, "id": session_id, "createdAt": created, **extra},
        st.integers(0, 2**53 - 1),
        optional,
    )


def prefix_of(log: LoopLog, k: int) -> Sequence[Wire]:
    """The first `k` events of a generated log."""
    return log.events[:k]


st.register_type_strategy(LoopLog, st.deferred(loop_logs))
st.register_type_strategy(CrashPrefix, st.deferred(crash_prefixes))
