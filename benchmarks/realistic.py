"""A seeded generator of realistic session logs (wire dicts) for benchmarks.

Shaped like a model loop's output: turns of a user prompt and 1-4 steps, each
step a request header when it changes, a streamed answer (text and tool-call
delta runs that pack into chunk rows), the assistant message citing its chunks,
tool calls and results; now and then a compaction between turns. Deterministic
for a given seed; no Hypothesis, so it scales to millions of events.

Two orders (`shape`): `"loose"`, the log the reference was measured on (the prompt
written between `turn/start` and the first `step/start`, a compaction one replacing
`user/message`), and `"dsh"`, DSH's agent-loop order (docs/format/properties.md): the
first step claims the prompt right after its `step/start`, and a compaction is four
records back to back, `compaction/start`, `compaction/summary`, the checkpoint
`user/message` citing `[start, summary, *shadowed]`, `compaction/end`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

__all__ = ("SHAPES", "LogWriter", "realistic_log", "write_step")

SHAPES = ("loose", "dsh")

WORDS = (
    "the file list shows three modules and a test suite that covers the parser and "
    "the writer so the next step reads the config then runs the build"
).split()

TOOLS = [
    {"name": n, "description": f"{n} tool", "parameters": {"type": "object", "properties": {}}}
    for n in ("ls", "read", "grep", "edit")
]


class LogWriter:
    """Builds wire events in order, tracking the surface (`nodes`) as the surface fold does."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.events: list[dict[str, Any]] = []
        self.time = 1_760_000_000_000
        self.nodes: list[int] = []

    def add(self, event_type: str, data: Any, **envelope: Any) -> int:
        seq = len(self.events)
        self.time += self.rng.randint(0, 40)
        event = {"type": event_type, "seq": seq, "time": self.time, "data": data, **envelope}
        self.events.append(event)
        if "surfaceOp" in envelope:
            op = envelope["surfaceOp"]
            if op == "append":
                self.nodes.append(seq)
            else:
                i, j = self.nodes.index(op["start"]), self.nodes.index(op["end"])
                self.nodes[i : j + 1] = [seq]
        return seq

    def compact(
        self,
        shadowed: list[int],
        mid: str,
        text: str,
        *,
        cites: list[int] | None = None,
        compaction_id: str | None = None,
    ) -> int:
        """A compaction summary (`user/message`) replacing the nodes `shadowed`, citing
        `cites` (the shadowed nodes by default); a DSH checkpoint names its `compaction_id`."""
        source = {"kind": "plugin", "plugin": "compact"}
        if compaction_id is not None:
            source["compactionId"] = compaction_id
        summary = {
            "id": mid,
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "source": source,
        }
        return self.add(
            "user/message",
            summary,
            surfaceOp={"op": "replace", "start": shadowed[0], "end": shadowed[-1]},
            sourceEventSeqs=shadowed if cites is None else cites,
        )

    def compact_transaction(self, shadowed: list[int], turn: int, text: str) -> int:
        """A compaction as DSH's loop writes it: start, summary, checkpoint and end.

        `turn` is the last turn (compactions run between turns); the id is the start's
        seq, unique in the log. Returns the checkpoint's seq.
        """
        compaction_id = f"compaction-{len(self.events)}"
        start = self.add("compaction/start", {"compactionId": compaction_id, "turn": turn})
        summary = self.add(
            "compaction/summary",
            {
                "compactionId": compaction_id,
                "summary": [{"type": "text", "text": text}],
                "shadowedRange": {"start": shadowed[0], "end": shadowed[-1]},
                "shadowedSeqs": list(shadowed),
                "shadowedTokenCount": 40 * len(shadowed),
                "provider": "deepseek",
                "model": "deepseek-chat",
            },
        )
        seq = self.compact(
            shadowed,
            f"checkpoint-{compaction_id}",
            text,
            cites=[start, summary, *shadowed],
            compaction_id=compaction_id,
        )
        self.add("compaction/end", {"compactionId": compaction_id, "turn": turn})
        return seq

    def text(self, n: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(n))


def write_step(
    w: LogWriter,
    turn: int,
    step: int,
    header_state: dict[str, Any],
    *,
    answer_words: tuple[int, int] = (5, 40),
    call_counts: tuple[int, ...] = (0, 0, 1, 1, 2),
    piece_chars: int = 4,
    on_start: Callable[[int, int], None] | None = None,
) -> None:
    """One model step: header if changed, streamed answer, its message, tool calls and results.

    `answer_words` bounds the number of text-delta chunks of the answer; the
    step makes one of `call_counts` tool calls (none from step 4 on), each
    streamed in argument pieces of `piece_chars`; `on_start` is called with
    `(turn, step)` just after the `step/start` event (the step is open and
    every earlier tool call is answered).
    """
    rng = w.rng
    w.add("step/start", {"turn": turn, "step": step})
    if on_start is not None:
        on_start(turn, step)
    tools = TOOLS[: 2 + (turn // 7) % 3]
    header = {
        "config": {"provider": "deepseek", "model": "deepseek-chat"},
        "system": "You help.",
        "tools": tools,
    }
    if header_state.get("header") != header:
        reason = "initial" if "header" not in header_state else "change"
        w.add("request/header", {"header": header, "reason": reason})
        header_state["header"] = header
    chunks: list[int] = []
    content: list[dict[str, Any]] = []
    words = [w.text(1) + " " for _ in range(rng.randint(*answer_words))]
    chunks.append(
        w.add(
            "assistant/chunk",
            {
                "turn": turn,
                "step": step,
                "chunk": {"type": "block-start", "index": 0, "blockType": "text"},
            },
        )
    )
    for word in words:
        chunks.append(
            w.add(
                "assistant/chunk",
                {
                    "turn": turn,
                    "step": step,
                    "chunk": {"type": "text-delta", "index": 0, "text": word},
                },
            )
        )
    text = "".join(words)
    chunks.append(
        w.add(
            "assistant/chunk",
            {
                "turn": turn,
                "step": step,
                "chunk": {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
            },
        )
    )
    content.append({"type": "text", "text": text})
    calls = rng.choice(call_counts) if step < 4 else 0
    for k in range(calls):
        call_id = f"call-{turn}-{step}-{k}"
        name = rng.choice(tools)["name"]
        args = '{"path": "src/' + w.text(1) + '.py"}'
        pieces = [args[i : i + piece_chars] for i in range(0, len(args), piece_chars)]
        index = k + 1
        chunks.append(
            w.add(
                "assistant/chunk",
                {
                    "turn": turn,
                    "step": step,
                    "chunk": {
                        "type": "tool-call-delta",
                        "index": index,
                        "id": call_id,
                        "name": name,
                        "argumentsDelta": pieces[0],
                    },
                },
            )
        )
        for piece in pieces[1:]:
            chunks.append(
                w.add(
                    "assistant/chunk",
                    {
                        "turn": turn,
                        "step": step,
                        "chunk": {
                            "type": "tool-call-delta",
                            "index": index,
                            "id": call_id,
                            "argumentsDelta": piece,
                        },
                    },
                )
            )
        content.append({"type": "tool-call", "id": call_id, "name": name, "arguments": args})
    chunks.append(
        w.add(
            "assistant/chunk",
            {
                "turn": turn,
                "step": step,
                "chunk": {"type": "finish", "reason": {"kind": "tool-calls" if calls else "stop"}},
            },
        )
    )
    message = {
        "id": f"a-{turn}-{step}",
        "role": "assistant",
        "content": content,
        "source": {"kind": "model", "provider": "deepseek", "model": "deepseek-chat"},
    }
    w.add(
        "assistant/message",
        {
            "turn": turn,
            "step": step,
            "message": message,
            "usage": {"inputTokens": rng.randint(100, 9000), "outputTokens": len(chunks)},
        },
        sourceEventSeqs=chunks,
        surfaceOp="append",
    )
    for block in content[1:]:
        call_seq = w.add(
            "tool/call",
            {
                "turn": turn,
                "step": step,
                "callId": block["id"],
                "name": block["name"],
                "arguments": block["arguments"],
            },
        )
        output = [{"type": "text", "text": w.text(rng.randint(5, 60))}]
        result = {
            "id": f"r-{block['id']}",
            "role": "user",
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": block["id"],
                    "content": output,
                    "isError": False,
                }
            ],
            "source": {"kind": "tool", "callId": block["id"]},
        }
        w.add(
            "tool/result",
            {"turn": turn, "step": step, "message": result},
            sourceEventSeqs=[call_seq],
            surfaceOp="append",
        )
    w.add("step/end", {"turn": turn, "step": step})


def realistic_log(n_events: int, seed: int = 0, *, shape: str = "loose") -> list[dict[str, Any]]:
    """At least `n_events` wire events of whole turns (the last turn is closed), in the
    order `shape` names (`SHAPES`)."""
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {SHAPES}, not {shape!r}")
    dsh = shape == "dsh"
    w = LogWriter(seed)
    header_state: dict[str, Any] = {}
    turn = 0
    while len(w.events) < n_events:
        turn += 1
        if turn % 40 == 0 and len(w.nodes) > 2:
            # Between turns every call is answered, so the whole surface is a balanced range.
            if dsh:
                w.compact_transaction(list(w.nodes), turn - 1, w.text(30))
            else:
                w.compact(list(w.nodes), f"summary-{turn}", w.text(30))
        w.add("turn/start", {"turn": turn})
        prompt = {
            "id": f"u-{turn}",
            "role": "user",
            "content": [{"type": "text", "text": w.text(12)}],
            "source": {"kind": "user"},
        }

        def claim(turn: int, step: int, prompt: dict[str, Any] = prompt) -> None:
            if step == 1:  # the first step claims the user's message
                w.add("user/message", prompt, surfaceOp="append")

        if not dsh:
            w.add("user/message", prompt, surfaceOp="append")
        for step in range(1, w.rng.randint(1, 4) + 1):
            write_step(w, turn, step, header_state, on_start=claim if dsh else None)
        if turn % 5 == 0:
            w.add("todo/write", {"todos": [{"content": w.text(4), "status": "pending"}]})
        w.add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    return w.events
