"""Provider request bodies: the next model request of a log, as exact JSON.

`openai_request` builds an OpenAI-compatible Chat Completions body (the DeepSeek
API's shape) and `anthropic_request` an Anthropic Messages body, both from the
request header in force and the derived history grouped by `paired_history`, so
every tool call is answered right after the message that made it. What each
provider gets for reasoning, images and extension blocks is tabled, with the
reasons, in docs/projections.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from kernel.log import SessionLog
from kernel.projections.blocks import (
    ProjectionError,
    admitted,
    call_of,
    degraded_text,
    image_ref,
    parsed_arguments,
    text_of,
    well_formed,
    well_formed_text,
)
from kernel.projections.history import AssistantEntry, Entry, ResultEntry, paired_history
from kernel.values.events import Event
from kernel.values.json import raw, safe_int, summary, thaw

__all__ = (
    "OPENAI_EFFORTS",
    "ANTHROPIC_EFFORTS",
    "DEFAULT_MAX_TOKENS",
    "openai_request",
    "anthropic_request",
    "anthropic_tool_ids",
    "openai_tool_ids",
)

OPENAI_EFFORTS: Final = frozenset({"none", "minimal", "low", "medium", "high", "xhigh", "max"})
"""`reasoningEffort` values passed on as Chat Completions `reasoning_effort`."""

ANTHROPIC_EFFORTS: Final = frozenset({"low", "medium", "high", "xhigh", "max"})
"""`reasoningEffort` values passed on as Messages `output_config.effort`."""

_ANTHROPIC_ID: Final = re.compile(r"[A-Za-z0-9_-]+")
_ANTHROPIC_ID_CHAR: Final = re.compile(r"[^A-Za-z0-9_-]")

DEFAULT_MAX_TOKENS: Final = 4096
"""Messages requires `max_tokens`; used when the header in force sets no `maxTokens`."""

Images = Mapping[str, str]
"""Attachment id -> URL of the image (`https:` or a `data:` URL) known to the caller."""


def _header_and_history(
    events: Iterable[Event] | SessionLog, images: Images | None, who: str
) -> tuple[Any, tuple[Entry, ...], Images]:
    if images is not None and not (
        issubclass(type(images), Mapping)
        and all(type(k) is str and type(v) is str for k, v in images.items())
    ):
        raise ProjectionError(f"{who}: images must map attachment ids to URL strings")
    log = admitted(events)
    header = log.request_header
    if header is None:
        raise ProjectionError(f"{who}: the log has no request/header, so no model to address")
    return raw(header), paired_history(log.messages), images or {}


def _count(config: dict[str, Any], key: str, who: str) -> int | None:
    if key not in config:
        return None
    value = safe_int(config[key])
    if value is None or value < 1:
        raise ProjectionError(
            f"{who}: config.{key} {summary(config[key])} is not a positive integer"
        )
    return value


def _texts_or_parts(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """One text part is sent as a string (what every compatible server reads); else parts."""
    if len(parts) == 1 and parts[0]["type"] == "text":
        text: str = parts[0]["text"]
        return text
    return parts


# -- OpenAI Chat Completions --------------------------------------------------------------------


def _openai_part(block: Any, images: Images, *, image_ok: bool) -> dict[str, Any] | None:
    """A block as a content part; None for reasoning (never sent back)."""
    text = text_of(block)
    if text is not None:
        return {"type": "text", "text": text}
    if text_of(block, "reasoning") is not None:
        return None
    ref = image_ref(block)
    if ref is not None and image_ok and ref["attachmentId"] in images:
        return {"type": "image_url", "image_url": {"url": images[ref["attachmentId"]]}}
    return {"type": "text", "text": degraded_text(block)}


def _openai_message(entry: Entry, images: Images, ids: Mapping[str, str]) -> dict[str, Any] | None:
    if isinstance(entry, ResultEntry):
        parts = [
            p for b in entry.content if (p := _openai_part(b, images, image_ok=False)) is not None
        ]
        return {
            "role": "tool",
            "tool_call_id": ids[entry.call_id],
            "content": _texts_or_parts(parts) if parts else "",
        }
    if isinstance(entry, AssistantEntry):
        parts = [
            p
            for b in entry.content
            if call_of(b) is None and (p := _openai_part(b, images, image_ok=False)) is not None
        ]
        message: dict[str, Any] = {"role": "assistant"}
        if not parts and not entry.calls:
            return None  # reasoning only: nothing a provider takes back
        message["content"] = _texts_or_parts(parts) if parts else None
        if entry.calls:
            message["tool_calls"] = [
                {"id": ids[i], "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a in entry.calls
            ]
        return message
    parts = [p for b in entry.content if (p := _openai_part(b, images, image_ok=True)) is not None]
    return {"role": "user", "content": _texts_or_parts(parts) if parts else ""}


def openai_request(
    events: Iterable[Event] | SessionLog, *, images: Images | None = None
) -> dict[str, Any]:
    """The OpenAI-compatible Chat Completions body of the log's next request.

    `model`, `messages` (the system prompt first, then the paired history),
    `tools` as functions, and the sampling settings of the header in force.
    `images` maps attachment ids to URLs the caller can vouch for; an image without
    one is sent as the text of its reference. Raises `KernelError`: the log's
    admission error, `ToolPairingError` for a history with an unanswered call (repair
    it first), `ProjectionError` when no header is in force. Every string is
    well-formed: a lone surrogate of the log is sent as U+FFFD, and a tool call id
    holding one is rewritten one-to-one (`openai_tool_ids`).
    """
    header, history, known = _header_and_history(events, images, "openai_request")
    config = header["config"]
    ids = openai_tool_ids(history)
    messages: list[dict[str, Any]] = []
    if header.get("system"):
        messages.append({"role": "system", "content": header["system"]})
    messages.extend(m for e in history if (m := _openai_message(e, known, ids)) is not None)
    body: dict[str, Any] = {"model": config["model"], "messages": messages}
    tools = header.get("tools")
    if tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t["name"],
                    "description": t["description"],
                    "parameters": thaw(t["parameters"]),
                },
            }
            for t in tools
        ]
    _sampling(body, config, "openai_request", "max_tokens", "stop", temperature=True)
    effort = config.get("reasoningEffort")
    if effort in OPENAI_EFFORTS:
        body["reasoning_effort"] = effort
    return well_formed(body)


def _sampling(
    body: dict[str, Any],
    config: dict[str, Any],
    who: str,
    tokens_key: str,
    stop_key: str,
    *,
    temperature: bool,
) -> None:
    if temperature and "temperature" in config:
        body["temperature"] = config["temperature"]
    tokens = _count(config, "maxTokens", who)
    if tokens is not None:
        body[tokens_key] = tokens
    if config.get("stop"):
        body[stop_key] = list(config["stop"])


# -- Anthropic Messages -------------------------------------------------------------------------


def _one_to_one(
    history: Sequence[Entry], accepted: Callable[[str], bool], rewrite: Callable[[str], str]
) -> dict[str, str]:
    """Each tool call id of a history -> itself when `accepted`, else `rewrite(id)`, with
    a `_2`, `_3`, ... suffix until no other id of the history has taken it."""
    try:
        entries = tuple(history)  # once: a generator would be spent by the first pass
    except TypeError:
        raise ProjectionError(
            f"a history must be a sequence of entries: {summary(history)}"
        ) from None
    ids = [c[0] for e in entries if type(e) is AssistantEntry for c in e.calls]
    ids += [e.call_id for e in entries if type(e) is ResultEntry]
    taken = {i for i in ids if accepted(i)}
    mapping = {i: i for i in taken}
    for original in ids:
        if original in mapping:
            continue
        base = rewrite(original)
        candidate, n = base, 1
        while candidate in taken:
            n += 1
            candidate = f"{base}_{n}"
        taken.add(candidate)
        mapping[original] = candidate
    return mapping


def openai_tool_ids(history: Sequence[Entry]) -> dict[str, str]:
    """Each tool call id of a history -> the well-formed id the body sends.

    An id holding a lone surrogate has each replaced by U+FFFD (`well_formed_text`),
    then a `_2`, `_3`, ... suffix until no other id of the history has taken it:
    one-to-one within one body, so calls and results stay paired. Any other id
    stays as it is.
    """
    return _one_to_one(history, lambda i: well_formed_text(i) == i, well_formed_text)


def anthropic_tool_ids(history: Sequence[Entry]) -> dict[str, str]:
    """Each tool call id of a history -> the id Anthropic accepts (`^[a-zA-Z0-9_-]+$`).

    Ids that match stay as they are; any other id has each character outside the
    pattern replaced by `_`, then a `_2`, `_3`, ... suffix until it is taken by no
    other id of the history. One-to-one within one body.
    """
    return _one_to_one(history, _anthropic_id_ok, lambda i: _ANTHROPIC_ID_CHAR.sub("_", i))


def _anthropic_id_ok(text: str) -> bool:
    return _ANTHROPIC_ID.fullmatch(text) is not None


def _anthropic_image(url: str, media_type: str) -> dict[str, Any]:
    prefix = f"data:{media_type};base64,"
    if url.startswith(prefix):
        source = {"type": "base64", "media_type": media_type, "data": url[len(prefix) :]}
        return {"type": "image", "source": source}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _anthropic_block(block: Any, images: Images) -> dict[str, Any] | None:
    """A user, assistant or result block; None for reasoning and blank text (refused)."""
    text = text_of(block)
    if text is not None:
        return None if not text or text.isspace() else {"type": "text", "text": text}
    if text_of(block, "reasoning") is not None:
        return None
    ref = image_ref(block)
    if ref is not None and ref["attachmentId"] in images:
        return _anthropic_image(images[ref["attachmentId"]], ref["mediaType"])
    return {"type": "text", "text": degraded_text(block)}


def _tool_input(arguments: str) -> dict[str, Any]:
    ok, value = parsed_arguments(arguments)
    if ok and type(value) is dict:
        return thaw(value)  # type: ignore[no-any-return]
    return {"arguments": arguments}


def _anthropic_content(
    entry: Entry, images: Images, ids: Mapping[str, str]
) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(entry, ResultEntry):
        nested = [b for x in entry.content if (b := _anthropic_block(x, images)) is not None]
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": ids[entry.call_id]}
        if nested:
            result["content"] = nested
        if entry.is_error:
            result["is_error"] = True
        return "user", [result]
    if isinstance(entry, AssistantEntry):
        blocks: list[dict[str, Any]] = []
        for block in entry.content:
            call = call_of(block)
            if call is not None:
                call_id, name, arguments = call
                use = {"type": "tool_use", "id": ids[call_id], "name": name}
                blocks.append({**use, "input": _tool_input(arguments)})
                continue
            converted = _anthropic_block(block, images)
            if converted is not None:
                blocks.append(converted)
        return "assistant", blocks
    return "user", [b for x in entry.content if (b := _anthropic_block(x, images)) is not None]


def anthropic_request(
    events: Iterable[Event] | SessionLog,
    *,
    images: Images | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
) -> dict[str, Any]:
    """The Anthropic Messages body of the log's next request.

    `model`, `max_tokens` (the header's `maxTokens`, else `max_tokens`), `system`,
    `messages` (the paired history, consecutive turns of one role merged, tool
    results first in their user turn), `tools` with their input schemas, and the
    sampling settings of the header in force. Tool call ids outside Anthropic's
    pattern are rewritten one-to-one (`anthropic_tool_ids`), and every string is
    well-formed (a lone surrogate is sent as U+FFFD). Raises as `openai_request` does.
    """
    if safe_int(max_tokens) is None or max_tokens < 1:
        raise ProjectionError("anthropic_request: max_tokens must be a positive integer")
    header, history, known = _header_and_history(events, images, "anthropic_request")
    config = header["config"]
    ids = anthropic_tool_ids(history)
    messages: list[dict[str, Any]] = []
    for entry in history:
        role, blocks = _anthropic_content(entry, known, ids)
        if not blocks:
            continue
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    body: dict[str, Any] = {"model": config["model"], "max_tokens": max_tokens}
    if header.get("system"):
        body["system"] = header["system"]
    body["messages"] = messages
    tools = header.get("tools")
    if tools:
        body["tools"] = [
            {
                "name": t["name"],
                "description": t["description"],
                "input_schema": thaw(t["parameters"]),
            }
            for t in tools
        ]
    # The Messages params of the anthropic SDK (2.x) have no temperature: it is not sent.
    _sampling(body, config, "anthropic_request", "max_tokens", "stop_sequences", temperature=False)
    effort = config.get("reasoningEffort")
    if effort in ANTHROPIC_EFFORTS:
        body["output_config"] = {"effort": effort}
    return well_formed(body)
