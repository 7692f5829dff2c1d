"""G-noise and message scripts: non-surface events interleaved with surface events (P1, P5).

Internal to the kit: `properties.strategies` re-exports `interleavings` and `Interleaving`.
Message events are drawn as templates that name each other by their position
among the messages, not by seq; `interleave` assigns seqs after merging with
noise, so the same messages can be laid out with and without noise. Relational
invariants do not hold for these logs (G-noise is for derivation only), but
every event passes admission.
"""

from __future__ import annotations

import copy
from typing import Any

import attrs
from hypothesis import strategies as st

from properties import _shapes as shapes
from properties._loop import plain_text
from properties._report import pretty_as_repr
from properties._shapes import Wire
from properties._validation import check_size

__all__ = (
    "NoiseEvent",
    "MessageOp",
    "Template",
    "Interleaving",
    "noise_events",
    "message_ops",
    "templates_of",
    "interleave",
    "interleavings",
)


@attrs.frozen
class NoiseEvent:
    """A non-surface event without a seq."""

    type: str
    data: Any
    ignorable: bool = False


_CHUNKS: tuple[dict[str, Any], ...] = (
    {"type": "block-start", "index": 0, "blockType": "text"},
    {"type": "text-delta", "index": 0, "text": "he"},
    {"type": "reasoning-delta", "index": 1, "text": "hm"},
    {"type": "tool-call-delta", "index": 2, "id": "c1", "name": "ls", "argumentsDelta": "{"},
    {"type": "block-end", "index": 0, "block": {"type": "text", "text": "he"}},
    {"type": "usage", "usage": {"inputTokens": 1, "outputTokens": 2}},
    {"type": "finish", "reason": {"kind": "stop"}},
)


def noise_events() -> st.SearchStrategy[NoiseEvent]:
    """G-noise: `turn/*`, `step/*`, `assistant/chunk`, `todo/write` and extension events."""
    n = st.integers(1, 3)
    return st.one_of(
        st.builds(lambda t: NoiseEvent("turn/start", {"turn": t}), n),
        st.builds(
            lambda t, r: NoiseEvent("turn/end", {"turn": t, "reason": copy.deepcopy(r)}),
            n,
            st.sampled_from(shapes.turn_end_reasons()),
        ),
        st.builds(lambda t, s: NoiseEvent("step/start", {"turn": t, "step": s}), n, n),
        st.builds(lambda t, s: NoiseEvent("step/end", {"turn": t, "step": s}), n, n),
        st.builds(
            lambda t, c: NoiseEvent("assistant/chunk", shapes.chunk_data(t, 1, copy.deepcopy(c))),
            n,
            st.sampled_from(_CHUNKS),
        ),
        st.builds(lambda: NoiseEvent("todo/write", {"todos": []})),
        st.builds(
            lambda k, ig: NoiseEvent(k, {"n": 1}, ig),
            st.sampled_from(shapes.KNOWN_EXTENSIONS),
            st.booleans(),
        ),
        st.builds(
            lambda k: NoiseEvent(k, None, True), st.sampled_from(shapes.IGNORABLE_EXTENSIONS)
        ),
        st.builds(lambda: NoiseEvent("x-app/custom", {"v": 1}, True)),
    )


@attrs.frozen
class MessageOp:
    """A drawn message event: `kind` in user/assistant/empty-assistant/result/replace/rewrite."""

    kind: str
    text: str
    a: int
    b: int


@attrs.frozen
class Template:
    """A surface event whose references are message positions (`m`), not seqs."""

    type: str
    data: Any
    op: str | tuple[int, int]
    sources: tuple[int, ...] | None


def templates_of(ops: list[MessageOp]) -> list[Template]:
    """Interpret message ops against a model surface over message positions."""
    out: list[Template] = []
    nodes: list[int] = []
    for op in ops:
        m = len(out)
        if op.kind == "user":
            out.append(
                Template("user/message", shapes.user_message(f"u{m}", op.text), "append", None)
            )
            nodes.append(m)
        elif op.kind in ("assistant", "empty-assistant"):
            content: list[Any] = (
                [] if op.kind == "empty-assistant" else [{"type": "text", "text": op.text}]
            )
            data = shapes.assistant_data(1, 1, shapes.assistant_message(f"a{m}", content))
            out.append(Template("assistant/message", data, "append", ()))
            nodes.append(m)
        elif op.kind == "result":
            message = shapes.tool_result_message(
                f"r{m}", f"c{op.a}", [{"type": "text", "text": op.text}]
            )
            out.append(
                Template("tool/result", shapes.tool_result_data(1, 1, message), "append", None)
            )
            nodes.append(m)
        elif op.kind == "replace" and nodes:
            i = op.a % len(nodes)
            j = i + op.b % (len(nodes) - i)
            shadowed = tuple(nodes[i : j + 1])
            data = shapes.user_message(f"s{m}", "summary " + op.text, kind="plugin")
            out.append(Template("user/message", data, (nodes[i], nodes[j]), shadowed))
            nodes[i : j + 1] = [m]
        elif op.kind == "rewrite":
            targets = [n for n in nodes if out[n].type == "tool/result"]
            if not targets:
                continue
            target = targets[op.a % len(targets)]
            data = copy.deepcopy(out[target].data)
            data["message"]["content"][0]["content"] = [{"type": "text", "text": "pruned"}]
            out.append(Template("tool/result", data, (target, target), (target,)))
            nodes[nodes.index(target)] = m
    return out


def interleave(
    templates: list[Template], noise: list[NoiseEvent], order: list[bool], *, time: int = 1000
) -> list[Wire]:
    """Merge keeping both relative orders (`order[i]`: True takes the next message); assign seqs."""
    out: list[Wire] = []
    seq_of: dict[int, int] = {}
    ti = ni = 0
    picks = iter(order)
    while ti < len(templates) or ni < len(noise):
        take_message = next(picks, True)
        if ni >= len(noise) or (take_message and ti < len(templates)):
            t = templates[ti]
            seq = len(out)
            seq_of[ti] = seq
            op: Any = "append"
            if isinstance(t.op, tuple):
                op = shapes.replace_op(seq_of[t.op[0]], seq_of[t.op[1]])
            sources = None if t.sources is None else [seq_of[m] for m in t.sources]
            out.append(
                shapes.envelope(
                    t.type, seq, time + seq, copy.deepcopy(t.data), surface_op=op, sources=sources
                )
            )
            ti += 1
        else:
            e = noise[ni]
            seq = len(out)
            out.append(
                shapes.envelope(
                    e.type, seq, time + seq, copy.deepcopy(e.data), ignorable=e.ignorable
                )
            )
            ni += 1
    return out


@attrs.frozen(repr=False)
class Interleaving:
    """The same message events alone (`messages`) and interleaved with noise (`mixed`)."""

    messages: tuple[Wire, ...]
    mixed: tuple[Wire, ...]

    _repr_pretty_ = pretty_as_repr

    def __repr__(self) -> str:
        from properties._report import format_log

        alone, mixed = format_log(self.messages), format_log(self.mixed)
        return f"Interleaving(\n messages:\n{alone}\n mixed:\n{mixed})"


def message_ops() -> st.SearchStrategy[MessageOp]:
    """One drawn message event."""
    return st.builds(
        MessageOp,
        kind=st.sampled_from(
            ["user", "assistant", "empty-assistant", "result", "replace", "rewrite"]
        ),
        text=plain_text(),
        a=st.integers(0, 6),
        b=st.integers(0, 6),
    )


def interleavings(*, max_messages: int = 8, max_noise: int = 10) -> st.SearchStrategy[Interleaving]:
    """P5 input: message events alone and the same events interleaved with G-noise.

    Args:
        max_messages: the most message events, an int of at least 0.
        max_noise: the most noise events interleaved with them, an int of at least 0.

    Raises:
        InvalidArgument: when built with a bad `max_messages` or `max_noise`.
    """
    check_size("max_messages", max_messages)
    check_size("max_noise", max_noise)

    def build(ops: list[MessageOp], noise: list[NoiseEvent], order: list[bool]) -> Interleaving:
        templates = templates_of(ops)
        return Interleaving(
            tuple(interleave(templates, [], [])), tuple(interleave(templates, noise, order))
        )

    return st.builds(
        build,
        st.lists(message_ops(), max_size=max_messages),
        st.lists(noise_events(), max_size=max_noise),
        st.lists(st.booleans(), max_size=max_messages + max_noise),
    )
