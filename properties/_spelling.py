"""An independent spelling of JSON text as JavaScript's `JSON.stringify` writes it, and a
reading of it as `JSON.parse` reads its numbers.

The byte-exact writer law (P43a) compares the kernel's `write_jsonl` with this
module, written straight from docs/format/persistence.md §2.4 and sharing no code with
`kernel.wire.jsontext`. Slow and recursive on purpose: it is an oracle, not a codec.
Internal to the kit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ("stringify", "spell_number", "spell_string", "js_keys", "header_line", "js_parse")

_SHORT = {
    0x08: "\\b",
    0x09: "\\t",
    0x0A: "\\n",
    0x0C: "\\f",
    0x0D: "\\r",
    0x22: '\\"',
    0x5C: "\\\\",
}
_MAX_SAFE = 2**53 - 1


def spell_string(text: str) -> str:
    """A JSON string literal: short escapes, `\\u00xx` controls, lone surrogates `\\udxxx`."""
    out = ['"']
    i = 0
    while i < len(text):
        c = ord(text[i])
        if c in _SHORT:
            out.append(_SHORT[c])
        elif c < 0x20:
            out.append(f"\\u{c:04x}")
        elif 0xD800 <= c <= 0xDBFF and i + 1 < len(text) and 0xDC00 <= ord(text[i + 1]) <= 0xDFFF:
            low = ord(text[i + 1])
            out.append(chr(0x10000 + ((c - 0xD800) << 10) + (low - 0xDC00)))
            i += 1
        elif 0xD800 <= c <= 0xDFFF:
            out.append(f"\\u{c:04x}")
        else:
            out.append(text[i])
        i += 1
    out.append('"')
    return "".join(out)


def spell_number(value: int | float) -> str:
    """ECMAScript Number::toString, per the table of docs/format/persistence.md §2.4."""
    if type(value) is int and -_MAX_SAFE <= value <= _MAX_SAFE:
        return str(value)
    x = float(value)
    if x == 0:
        return "0"
    if x < 0:
        return "-" + spell_number(-x)
    mantissa, _, exp = repr(x).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = whole + frac
    n = len(whole) + (int(exp) if exp else 0)
    lead = len(digits) - len(digits.lstrip("0"))
    digits = digits.lstrip("0")
    n -= lead
    d = digits.rstrip("0")
    k = len(d)
    if k <= n <= 21:
        return d + "0" * (n - k)
    if 0 < n <= 21:
        return d[:n] + "." + d[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + d
    e = n - 1
    return d[0] + ("." + d[1:] if k > 1 else "") + "e" + ("+" if e >= 0 else "-") + str(abs(e))


def _is_index(key: str) -> bool:
    if not key or not key.isascii() or not key.isdigit():
        return False
    return (key == "0" or key[0] != "0") and int(key) <= 2**32 - 2


def js_keys(obj: Mapping[str, Any]) -> list[str]:
    """JavaScript enumeration order: array-index keys ascending, then insertion order."""
    keys = list(obj)
    return sorted((k for k in keys if _is_index(k)), key=int) + [
        k for k in keys if not _is_index(k)
    ]


def stringify(value: Any) -> str:
    """Compact `JSON.stringify` text of a JSON value (any Mapping/Sequence)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) in (int, float):
        return spell_number(value)
    if isinstance(value, str):
        return spell_string(value)
    if isinstance(value, Mapping):
        return (
            "{"
            + ",".join(spell_string(k) + ":" + stringify(value[k]) for k in js_keys(value))
            + "}"
        )
    if isinstance(value, Sequence):
        return "[" + ",".join(stringify(v) for v in value) + "]"
    raise TypeError(f"{type(value).__name__} is not JSON")


def header_line(header: Mapping[str, Any]) -> str:
    """The JSONL header line of an in-memory header record (docs/format/events.md §2.2 key
    order)."""
    line: dict[str, Any] = {"type": "session", "version": 0, "id": header["id"]}
    line["createdAt"] = header["createdAt"]
    for key in ("cwd", "parentSession", "seedLength", "origin"):
        if key in header:
            line[key] = header[key]
    line["delegationDepth"] = header.get("delegationDepth", 0)
    if "agentPreset" in header:
        line["agentPreset"] = header["agentPreset"]
    return stringify(line)


def _js_integer(literal: str) -> int | float:
    value = int(literal)
    return value if -_MAX_SAFE <= value <= _MAX_SAFE else float(literal)


def js_parse(text: str | bytes) -> Any:
    """JSON text read as `JSON.parse` reads it: numbers are doubles, so an integer literal
    beyond ±(2**53 - 1) is the nearest double (Python's `json` keeps it an exact int, which
    then differs from the double `JSON.stringify` spelled that way).

    >>> js_parse("38404956155902950") == 3.840495615590295e16
    True
    """
    return json.loads(text, parse_int=_js_integer)
