"""JSON text: the byte-exact writer and the strict reader of persistence.md §2.4 and §3.1.

`encode_json` spells a value exactly as JavaScript's `JSON.stringify` does
(member order, number spelling, string escapes), because the JSONL writer must
reproduce the compatible writer byte for byte. `parse_json` accepts exactly
RFC 8259 JSON in strict UTF-8. Both are iterative: depth is bounded by memory.
"""

from __future__ import annotations

import json as _stdlib_json
import re
from json.encoder import encode_basestring as _encode_basestring
from typing import Any

import orjson

from kernel.json import MAX_SAFE_INTEGER, FrozenArray, FrozenObject

__all__ = (
    "encode_json",
    "encode_json_bytes",
    "format_number",
    "js_member_order",
    "is_array_index",
    "parse_json",
    "parse_json_keeping_negative_zero",
)

_MAX_ARRAY_INDEX = 2**32 - 2
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_DIGITS_AS_ZERO = bytes.maketrans(b"0123456789", b"0000000000")
_SIXTEEN_DIGITS = b"0" * 16
"""Any integer beyond ±(2**53 - 1) is spelled with 16 or more digits in a row; mapping every
digit to 0 and searching for sixteen 0s finds such a run in two C loops (a regex is 8x slower)."""


def is_array_index(key: str) -> bool:
    """True for a canonical array-index key: decimal 0 .. 2**32 - 2 without leading zeros."""
    return (
        key.isascii()
        and key.isdigit()
        and (key == "0" or key[0] != "0")
        and int(key) <= _MAX_ARRAY_INDEX
    )


def js_member_order(obj: dict[str, Any]) -> list[str]:
    """Keys in JavaScript enumeration order: array indices ascending, then insertion order."""
    keys = list(obj)
    if not any(k and "0" <= k[0] <= "9" and is_array_index(k) for k in keys):
        return keys
    indices = sorted((k for k in keys if is_array_index(k)), key=int)
    return indices + [k for k in keys if not is_array_index(k)]


def format_number(value: int | float) -> str:
    """ECMAScript Number::toString of a JSON number (persistence.md §2.4).

    >>> [format_number(x) for x in (3.0, 1e16, 1e-7, 1e21, 123.456, -0.0)]
    ['3', '10000000000000000', '1e-7', '1e+21', '123.456', '0']
    """
    if type(value) is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return str(value)
    try:
        x = float(value)
    except OverflowError:
        return (
            "null"  # beyond any double: JavaScript would hold Infinity, which stringifies as null
        )
    if x != x or x in (float("inf"), float("-inf")):
        return "null"
    if x == 0:
        return "0"
    if x < 0:
        return "-" + format_number(-x)
    text = repr(x)
    mantissa, _, exp_text = text.partition("e")
    exponent = int(exp_text) if exp_text else 0
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    n = len(whole) + exponent
    stripped = digits.lstrip("0")
    n -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + digits
    e = n - 1
    head = digits[0] + ("." + digits[1:] if k > 1 else "")
    return f"{head}e{'+' if e >= 0 else '-'}{abs(e)}"


def _scalar_text(value: Any) -> str | None:
    t = type(value)
    if t is str:
        return _encode_basestring(value)
    if value is None:
        return "null"
    if t is bool:
        return "true" if value else "false"
    if t is int or t is float:
        return format_number(value)
    return None


def encode_json(value: Any) -> str:
    """The compact `JSON.stringify` text of a JSON value (frozen or plain).

    >>> encode_json({"b": 1, "10": 2.50, "a": [3.0, "é\\x07"]})
    '{"10":2.5,"b":1,"a":[3,"é\\\\u0007"]}'
    """
    parts: list[str] = []
    # Stack items: (is_text, payload). Text is emitted as is; anything else is a value.
    stack: list[tuple[bool, Any]] = [(False, value)]
    while stack:
        is_text, item = stack.pop()
        if is_text:
            parts.append(item)
            continue
        text = _scalar_text(item)
        if text is not None:
            parts.append(text)
            continue
        t = type(item)
        if t is FrozenObject or t is FrozenArray:
            item = item._raw
            t = type(item)
        if t is dict:
            if not item:
                parts.append("{}")
                continue
            keys = js_member_order(item)
            stack.append((True, "}"))
            for i in range(len(keys) - 1, -1, -1):
                key = keys[i]
                prefix = ("{" if i == 0 else ",") + _encode_basestring(key) + ":"
                child = item[key]
                child_text = _scalar_text(child)
                if child_text is not None:
                    stack.append((True, prefix + child_text))
                else:
                    stack.append((False, child))
                    stack.append((True, prefix))
        elif t is list or t is tuple:
            if not item:
                parts.append("[]")
                continue
            stack.append((True, "]"))
            for i in range(len(item) - 1, -1, -1):
                prefix = "[" if i == 0 else ","
                child = item[i]
                child_text = _scalar_text(child)
                if child_text is not None:
                    stack.append((True, prefix + child_text))
                else:
                    stack.append((False, child))
                    stack.append((True, prefix))
        else:
            raise TypeError(f"{t.__name__} is not a JSON value")
    return "".join(parts)


def _escape_lone_surrogates(text: str) -> str:
    # Re-pair adjacent high/low halves first: a pair is written as the character it encodes.
    paired = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", paired)


def encode_json_bytes(value: Any) -> bytes:
    """`encode_json` as UTF-8 bytes, lone surrogates escaped in lower-case hex."""
    text = encode_json(value)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _escape_lone_surrogates(text).encode("utf-8")


def _refuse_constant(token: str) -> Any:
    raise ValueError(f"{token} is not JSON")


def _unsafe_ints_as_doubles(value: Any) -> Any:
    """Read integers beyond ±(2**53 - 1) as the doubles a JSON reader with IEEE numbers gets."""
    t = type(value)
    if t is int:
        return value if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER else _to_double(value)
    if t is not dict and t is not list:
        return value
    stack = [value]
    while stack:
        container = stack.pop()
        pairs = container.items() if type(container) is dict else enumerate(container)
        for key, item in pairs:
            t = type(item)
            if t is int:
                if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                    container[key] = _to_double(item)
            elif t is dict or t is list:
                stack.append(item)
    return value


def _to_double(value: int) -> float:
    try:
        return float(value)
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


def parse_json(data: bytes | str) -> Any:
    """Parse one strict RFC 8259 JSON text (strict UTF-8); raises ValueError.

    Numbers read as a JavaScript reader reads them: an integer beyond
    ±(2**53 - 1) becomes the nearest double, a literal beyond any double an
    infinity. orjson reads almost everything; the standard library reads what
    orjson refuses but JSON allows (lone-surrogate escapes, `1e400`).
    """
    raw_bytes = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        try:
            value = _stdlib_json.loads(text, parse_constant=_refuse_constant)
        except RecursionError:
            raise ValueError("JSON nesting deeper than this reader supports") from None
    if _SIXTEEN_DIGITS in raw_bytes.translate(_DIGITS_AS_ZERO):
        value = _unsafe_ints_as_doubles(value)
    return value


def _int_keeping_negative_zero(token: str) -> int | float:
    return -0.0 if token == "-0" else int(token)


def parse_json_keeping_negative_zero(data: bytes | str) -> Any:
    """Like `parse_json`, but the token `-0` reads as the float -0.0 (header checks need it)."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    try:
        return _stdlib_json.loads(
            text, parse_constant=_refuse_constant, parse_int=_int_keeping_negative_zero
        )
    except RecursionError:
        raise ValueError("JSON nesting deeper than this reader supports") from None
