"""Realistic session logs for the store tests (and the crash-test writer subprocess).

`realistic_log(rng, turns)` emits what a model loop writes: turns of steps
with a user message, request headers, streamed chunks (text runs and
tool-call argument runs that pack), assistant messages citing their chunks,
tool calls and results (some large enough to be compressed in SQLite), and a
`turn/end` per turn. Deterministic for a given `random.Random`.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import Any

from kernel.values.events import APPEND, Event

__all__ = (
    "STORE_HEADER",
    "T0",
    "open_turn_prefix",
    "realistic_log",
    "seeded_log",
    "split_batches",
    "turn_end_seqs",
)

T0 = 1_760_000_000_000

_WORDS = ("the", "file", "naïve", "🙂", "list", "a\tb", 'quo"te', "x\\y", "\u2028", "ok")
_TOOLS = ("ls", "read", "grep")


class _Writer:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.events: list[Event] = []
        self.time = T0

    def add(
        self,
        type_: str,
        data: Any,
        *,
        surface: bool = False,
        sources: Sequence[int] | None = None,
    ) -> int:
        self.time += self.rng.randint(0, 40)
        seq = len(self.events)
        self.events.append(
            Event(
                type=type_,
                seq=seq,
                time=self.time,
                data=data,
                surface_op=APPEND if surface else None,
                source_event_seqs=sources,
            )
        )
        return seq

    def text(self, n: int) -> str:
        return " ".join(self.rng.choice(_WORDS) for _ in range(n))


def _model_step(w: _Writer, turn: int, step: int, want_calls: int) -> list[tuple[str, str, str]]:
    """Chunks and the assistant message of one model call; returns the calls it requested."""
    rng = w.rng
    chunk_seqs: list[int] = []

    def chunk(c: dict[str, Any]) -> None:
        chunk_seqs.append(w.add("assistant/chunk", {"turn": turn, "step": step, "chunk": c}))

    content: list[dict[str, Any]] = []
    chunk({"type": "block-start", "index": 0, "blockType": "text"})
    pieces = [w.text(rng.randint(1, 3)) for _ in range(rng.randint(1, 9))]
    for piece in pieces:
        chunk({"type": "text-delta", "index": 0, "text": piece})
    text = "".join(pieces)
    chunk({"type": "block-end", "index": 0, "block": {"type": "text", "text": text}})
    content.append({"type": "text", "text": text})
    calls = []
    for k in range(want_calls):
        index = k + 1
        call_id = f"call-{turn}-{step}-{k}"
        name = rng.choice(_TOOLS)
        args = ['{"pa', 'th":', f'"{w.text(1)}', '"}'][: rng.randint(2, 4)]
        chunk({"type": "block-start", "index": index, "blockType": "tool-call"})
        for j, delta in enumerate(args):
            c = {"type": "tool-call-delta", "index": index, "id": call_id}
            if j == 0:
                c["name"] = name
            c["argumentsDelta"] = delta
            chunk(c)
        arguments = "".join(args)
        block = {"type": "tool-call", "id": call_id, "name": name, "arguments": arguments}
        chunk({"type": "block-end", "index": index, "block": block})
        content.append(block)
        calls.append((call_id, name, arguments))
    chunk({"type": "usage", "usage": {"inputTokens": rng.randint(1, 9999), "outputTokens": 7}})
    chunk({"type": "finish", "reason": {"kind": "tool-calls" if calls else "stop"}})
    message = {
        "id": f"m-a-{turn}-{step}",
        "role": "assistant",
        "content": content,
        "source": {"kind": "model", "provider": "deepseek", "model": "deepseek-chat"},
    }
    w.add(
        "assistant/message",
        {"turn": turn, "step": step, "message": message},
        surface=True,
        sources=chunk_seqs,
    )
    return calls


def realistic_log(rng: random.Random, turns: int, *, big_every: int = 4) -> list[Event]:
    """A closed log of `turns` turns; every `big_every`-th tool result is ~10 KB of text."""
    w = _Writer(rng)
    results = 0
    for turn in range(1, turns + 1):
        w.add("turn/start", {"turn": turn})
        step = 0
        calls_left = rng.randint(0, 3)
        while True:
            step += 1
            w.add("step/start", {"turn": turn, "step": step})
            if step == 1:
                user = {
                    "id": f"m-u-{turn}",
                    "role": "user",
                    "content": [{"type": "text", "text": w.text(rng.randint(1, 6))}],
                    "source": {"kind": "user"},
                }
                w.add("user/message", user, surface=True)
            if turn == 1 and step == 1:
                header = {
                    "config": {"provider": "deepseek", "model": "deepseek-chat"},
                    "system": "You are a helpful assistant.",
                    "tools": [
                        {"name": t, "description": f"{t} tool", "parameters": {"type": "object"}}
                        for t in _TOOLS
                    ],
                }
                w.add("request/header", {"header": header, "reason": "initial"})
                w.add(
                    "request/context",
                    {"provider": "deepseek", "model": "deepseek-chat", "contextWindow": 128000},
                )
            want = min(calls_left, rng.randint(1, 2)) if calls_left else 0
            calls_left -= want
            calls = _model_step(w, turn, step, want)
            for call_id, name, arguments in calls:
                data = {"turn": turn, "step": step, "callId": call_id, "name": name}
                data["arguments"] = arguments
                call_seq = w.add("tool/call", data)
                results += 1
                output = w.text(1500) if results % big_every == 0 else w.text(rng.randint(1, 8))
                result_block = {
                    "type": "tool-result",
                    "toolCallId": call_id,
                    "content": [{"type": "text", "text": output}],
                    "isError": False,
                }
                message = {
                    "id": f"m-r-{call_id}",
                    "role": "user",
                    "content": [result_block],
                    "source": {"kind": "tool", "callId": call_id},
                }
                w.add(
                    "tool/result",
                    {"turn": turn, "step": step, "message": message},
                    surface=True,
                    sources=[call_seq],
                )
            w.add("step/end", {"turn": turn, "step": step})
            if not calls:
                break
        w.add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    return w.events


def split_batches(
    events: Sequence[Event], rng: random.Random, most: int = 12
) -> Iterator[list[Event]]:
    """Contiguous batches of 1..`most` events covering `events` in order."""
    i = 0
    while i < len(events):
        n = rng.randint(1, most)
        yield list(events[i : i + n])
        i += n


def turn_end_seqs(events: Sequence[Event]) -> list[int]:
    return [e.seq for e in events if e.type == "turn/end"]


STORE_HEADER = {"version": 0, "id": "s-1", "createdAt": T0, "cwd": "/projects/demo"}
"""The header both store suites create their session with."""


def seeded_log(seed: int = 1, turns: int = 3) -> list[Event]:
    """`realistic_log` with a fresh `random.Random(seed)`."""
    return realistic_log(random.Random(seed), turns)


def open_turn_prefix(events: list[Event]) -> list[Event]:
    """The log cut inside its last turn, right after a tool/call (an unanswered call)."""
    last_call = max(e.seq for e in events if e.type == "tool/call")
    return events[: last_call + 1]
