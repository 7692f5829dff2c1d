"""The derived history as a provider sees it: turns of model output and their tool answers.

Providers accept a tool call only when its answer comes right after the message
that made it. `paired_history` groups the derived messages so: after an assistant
message with calls come exactly its results, in call order, then any other user
messages that arrived meanwhile (a notice injected between two results moves after
them). A history that cannot be grouped so — a call never answered before the
next assistant message or the end, a result no pending call asked for — raises
`ToolPairingError`: repair the log first (`interrupted_turn_closers`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from kernel.errors import MessageShapeError, ToolPairingError
from kernel.projections.blocks import call_of, result_of
from kernel.values.json import raw, summary

__all__ = ("UserEntry", "AssistantEntry", "ResultEntry", "Entry", "paired_history")


@attrs.frozen
class UserEntry:
    """A user message that is not a tool result: its raw content blocks."""

    content: Sequence[Any]


@attrs.frozen
class AssistantEntry:
    """An assistant message: its raw content blocks and the calls among them, in order."""

    content: Sequence[Any]
    calls: tuple[tuple[str, str, str], ...]


@attrs.frozen
class ResultEntry:
    """The answer to one call: its id, the nested result blocks, and whether it failed."""

    call_id: str
    content: Sequence[Any]
    is_error: bool


Entry = UserEntry | AssistantEntry | ResultEntry


def _is_result(message: Any) -> bool:
    source = message.get("source")
    return type(source) is dict and source.get("kind") == "tool" and _has_result_block(message)


def _has_result_block(message: Any) -> bool:
    content = message["content"]
    return (
        len(content) == 1
        and type(content[0]) is dict
        and content[0].get("type") == "tool-result"
        and type(content[0].get("toolCallId")) is str
        and type(content[0].get("content")) is list
    )


def paired_history(messages: Iterable[Any]) -> tuple[Entry, ...]:
    """The derived messages as entries, each call's answer right after its message.

    Raises `ToolPairingError` naming the call or result that cannot be paired.
    """
    out: list[Entry] = []
    pending: list[int] = []  # indexes of the last assistant message's unanswered calls
    answers: dict[int, ResultEntry] = {}  # by index into the calls of that message
    deferred: list[UserEntry] = []
    calls: tuple[tuple[str, str, str], ...] = ()

    def flush() -> None:
        if pending:
            call_id = calls[pending[0]][0]
            raise ToolPairingError(
                f"tool call {summary(call_id)} has no result before the next assistant message or "
                "the end of the history (repair the log first)"
            )
        out.extend(answers[i] for i in range(len(calls)))
        out.extend(deferred)
        answers.clear()
        deferred.clear()

    try:
        items = iter(messages)
    except TypeError:
        raise MessageShapeError(
            f"the messages are not an iterable of derived messages: {summary(messages)} (R10)"
        ) from None
    for index, message in enumerate(items):
        message = raw(message)
        if (
            type(message) is not dict
            or message.get("role") not in ("user", "assistant")
            or type(message.get("content")) is not list
        ):
            raise MessageShapeError(
                f"message {index} is not a derived message: {summary(message)} (R10)"
            )
        if message["role"] == "assistant":
            flush()
            calls = tuple([c for b in message["content"] if (c := call_of(b)) is not None])
            pending = list(range(len(calls)))
            out.append(AssistantEntry(message["content"], calls))
            continue
        if _is_result(message):
            call_id, content, is_error = result_of(message)
            slot = next((i for i in pending if calls[i][0] == call_id), None)
            if slot is None:
                raise ToolPairingError(
                    f"tool result for {summary(call_id)} answers no pending call of the assistant "
                    "message before it"
                )
            pending.remove(slot)
            answers[slot] = ResultEntry(call_id, content, is_error)
            continue
        entry = UserEntry(message["content"])
        if calls and (pending or answers):
            deferred.append(entry)
        else:
            out.append(entry)
    flush()
    return tuple(out)
