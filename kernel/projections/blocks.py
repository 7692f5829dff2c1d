"""What every projection shares: the admitted log, reading blocks, and the one degrade rule.

A projection never trusts a block's shape (the kernel validates only the message
level, docs/format/events.md §4.3): a block is mapped when its shape is exactly the
one a target understands, and otherwise *degraded* to text holding its compact JSON
(`degraded_text`), never dropped. Reads go through `raw` (plain containers, never
mutated); everything a projection returns is freshly built plain JSON, its strings
well-formed Unicode (`well_formed`: a lone surrogate becomes U+FFFD).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final, TypeVar, cast

import orjson

from kernel.errors import KernelError
from kernel.log import SessionLog
from kernel.values.events import Event
from kernel.values.json import admit_json, raw, safe_int
from kernel.wire.jsontext import encode_json_bytes, parse_json

__all__ = (
    "ProjectionError",
    "IMAGE_MEDIA_TYPES",
    "admitted",
    "degraded_text",
    "text_of",
    "image_ref",
    "parsed_arguments",
    "call_of",
    "result_of",
    "well_formed",
    "well_formed_text",
)

T = TypeVar("T")

IMAGE_MEDIA_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/webp", "image/gif"})
"""The media types an image attachment may have (docs/format/events.md §4.3)."""

_SURROGATE: Final = re.compile("[\ud800-\udfff]")

_CHECKED_LEVELS: Final = 3
"""`well_formed` asks orjson about each container this near the top of an output that
needs mending, and shares those that need nothing (a notification, a message)."""


class ProjectionError(KernelError):
    """A log that admission accepts cannot be projected to the target (e.g. no request
    header is in force, so there is no model to address)."""


def admitted(events: Iterable[Event] | SessionLog) -> SessionLog:
    """The log admitted whole on the restore path (R2-R12); a `SessionLog` is taken as it is.

    Raises the `KernelError` of the first event admission refuses, before anything is
    projected: a projection is of a whole admitted log or of nothing.
    """
    if issubclass(type(events), SessionLog):  # type(): a value may claim any __class__
        return cast(SessionLog, events)
    return SessionLog.restore(cast("Iterable[Event]", events))


def degraded_text(block: Any) -> str:
    """The text a block no target can carry becomes: its compact JSON (member order kept).

    Spelled as `JSON.stringify` spells it, so a lone surrogate is its escape and the
    text parses back to the block exactly.

    >>> degraded_text({"type": "citation", "url": "https://example.com"})
    '{"type":"citation","url":"https://example.com"}'
    >>> degraded_text({"type": "x", "half": "\\ud800"})
    '{"type":"x","half":"\\\\ud800"}'
    """
    return encode_json_bytes(block).decode("utf-8")


def well_formed_text(text: str) -> str:
    """`text` as well-formed Unicode: a surrogate pair joined into the character it
    encodes, each lone surrogate replaced by U+FFFD (as a UTF-8 encoder that replaces
    errors does).

    >>> well_formed_text("a\\ud800b\\ud83d\\ude00") == "a\\ufffdb\\U0001f600"
    True
    """
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def well_formed(value: T) -> T:
    """A projection's output with every string (object keys too) `well_formed_text`.

    What an SDK can send: the OpenAI and Anthropic clients encode a body as UTF-8
    JSON and raise `UnicodeEncodeError` on a lone surrogate. `value` itself when
    no string needs it, else a plain copy, built iteratively, that shares the
    parts of the first `_CHECKED_LEVELS` levels that need nothing; two keys of
    one object that differ only in lone surrogates become one, holding the later
    member's value.
    """
    if _all_well_formed(value):
        return value
    return _mended(value)  # type: ignore[no-any-return]


def _all_well_formed(value: Any) -> bool:
    """True when orjson writes `value`: then every string in it is well-formed (orjson
    refuses any surrogate). False also for nesting past orjson's limit of 254 levels."""
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        return False
    return True


def _mended(value: Any) -> Any:
    """`value` copied with every string `well_formed_text`; tuples stay tuples, frozen
    views become plain."""
    value = raw(value)
    if type(value) is str:
        return well_formed_text(value)
    if type(value) not in (dict, list, tuple):
        return value
    root: list[Any] = [None]
    # Each item: (source, destination container, slot, level); tuples are filled as lists.
    stack: list[tuple[Any, Any, Any, int]] = [(value, root, 0, 0)]
    tuples: list[tuple[Any, Any, list[Any]]] = []  # (parent, slot, list), innermost last
    while stack:
        src, parent, slot, level = stack.pop()
        src = raw(src)
        kind = type(src)
        if kind is str:
            parent[slot] = well_formed_text(src)
        elif kind not in (dict, list, tuple) or (
            0 < level <= _CHECKED_LEVELS and _all_well_formed(src)
        ):
            parent[slot] = src
        elif kind is dict:
            merged = {(well_formed_text(k) if type(k) is str else k): v for k, v in src.items()}
            dst: dict[Any, Any] = dict.fromkeys(merged)
            parent[slot] = dst
            stack.extend((v, dst, k, level + 1) for k, v in merged.items())
        else:
            items: list[Any] = [None] * len(src)
            parent[slot] = items
            if kind is tuple:
                tuples.append((parent, slot, items))
            stack.extend((v, items, i, level + 1) for i, v in enumerate(src))
    for parent, slot, items in reversed(tuples):
        parent[slot] = tuple(items)
    return root[0]


def text_of(block: Any, kind: str = "text") -> str | None:
    """The text of a `{type: kind, text: string}` block, else None."""
    block = raw(block)
    if type(block) is dict and block.get("type") == kind:
        text = block.get("text")
        if type(text) is str:
            return text
    return None


def image_ref(block: Any) -> dict[str, Any] | None:
    """The attachment of an `image` block whose `ImageAttachmentRef` is well formed, else None.

    Returns a fresh `{attachmentId, mediaType, bytes, name?}`; width and height are
    checked (positive integers) but not returned.
    """
    block = raw(block)
    if type(block) is not dict or block.get("type") != "image":
        return None
    ref = block.get("attachment")
    if type(ref) is not dict:
        return None
    attachment, media, size = ref.get("attachmentId"), ref.get("mediaType"), ref.get("bytes")
    name = ref.get("name", None)
    size_int = safe_int(size)
    width, height = safe_int(ref.get("width")), safe_int(ref.get("height"))
    if (
        type(attachment) is not str
        or not attachment
        or media not in IMAGE_MEDIA_TYPES
        or size_int is None
        or size_int < 0
        or width is None
        or width < 1
        or height is None
        or height < 1
        or (name is not None and type(name) is not str)
    ):
        return None
    out: dict[str, Any] = {"attachmentId": attachment, "mediaType": media, "bytes": size_int}
    if name is not None:
        out["name"] = name
    return out


def parsed_arguments(arguments: str) -> tuple[bool, Any]:
    """`(True, value)` when the raw arguments text is one lossless JSON value, else
    `(False, None)` (not JSON, or a number JSON cannot carry back, such as `1e400`)."""
    try:
        value = parse_json(arguments)
        return True, admit_json(value)
    except (ValueError, KernelError):
        return False, None


def call_of(block: Any) -> tuple[str, str, str] | None:
    """`(id, name, arguments)` of a well-formed `tool-call` block, else None."""
    block = raw(block)
    if type(block) is not dict or block.get("type") != "tool-call":
        return None
    call_id, name, arguments = block.get("id"), block.get("name"), block.get("arguments")
    if type(call_id) is str and call_id and type(name) is str and type(arguments) is str:
        return call_id, name, arguments
    return None


def result_of(message: Any) -> tuple[str, list[Any], bool]:
    """`(callId, nested content, isError)` of a tool-result message (shape checked by R10)."""
    block = raw(message)["content"][0]
    return block["toolCallId"], block["content"], block.get("isError") is True
