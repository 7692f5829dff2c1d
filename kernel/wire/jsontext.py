"""JSON text: the byte-exact writer and strict reader (docs/format/persistence.md §2.4, §3.1).

`encode_json` spells a value exactly as JavaScript's `JSON.stringify` does
(member order, number spelling, string escapes), because the JSONL writer must
reproduce the compatible writer byte for byte. `parse_json` accepts exactly
RFC 8259 JSON in strict UTF-8. Both are iterative: depth is bounded by memory.
"""

from __future__ import annotations

import re
from array import array
from itertools import repeat
from json.encoder import encode_basestring as _encode_basestring
from typing import Any

import orjson

from kernel.errors import NotLosslessJson
from kernel.values.json import MAX_SAFE_INTEGER, FrozenArray, FrozenObject

__all__ = (
    "encode_json",
    "encode_json_bytes",
    "encode_record_bytes",
    "format_number",
    "js_member_order",
    "is_array_index",
    "parse_json",
    "parse_json_shaped",
    "parse_json_keeping_negative_zero",
    "read_json_text",
)

_MAX_ARRAY_INDEX = 2**32 - 2
_MAX_ARRAY_INDEX_DIGITS = len(str(_MAX_ARRAY_INDEX))
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_DIGITS_AS_ZERO = bytes.maketrans(b"0123456789.e", b"0000000000\0\0")
"""A text's shapes: every digit read as `0`, and `.` and `e` as NUL (which JSON text never
holds raw), so a digit followed by either, as in every float orjson writes, is one search."""
_SIXTEEN_DIGITS = b"0" * 16
"""Any integer beyond ±(2**53 - 1) is spelled with 16 or more digits in a row; mapping every
digit to 0 and searching for sixteen 0s finds such a run in two C loops (a regex is 8x slower)."""
_FLOAT_SHAPE = b"0\0"
_INDEX_KEY_END = b'0":'
_ZERO, _QUOTE, _KEY_OPENERS = ord("0"), ord('"'), b"{,"


def is_array_index(key: str) -> bool:
    """True for a canonical array-index key: decimal 0 .. 2**32 - 2 without leading zeros."""
    return (
        len(key) <= _MAX_ARRAY_INDEX_DIGITS  # also keeps `int` off Python's 4,300-digit limit
        and key.isascii()
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
    """ECMAScript Number::toString of a JSON number (docs/format/persistence.md §2.4).

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

    `NotLosslessJson` for what JSON cannot spell (a key that is not a string, an
    object that is not a JSON value); numbers beyond a double are spelled `null`.

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
            if any(type(key) is not str for key in item):
                raise NotLosslessJson("an object key that is not a string has no spelling (R1)")
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
            raise NotLosslessJson(f"a {t.__name__} is not a JSON value, so it has no spelling (R1)")
    return "".join(parts)


def _escape_lone_surrogates(text: str) -> str:
    # Re-pair adjacent high/low halves first: a pair is written as the character it encodes.
    paired = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", paired)


def encode_json_bytes(value: Any) -> bytes:
    """`encode_json` as UTF-8 bytes, lone surrogates escaped in lower-case hex.

    orjson writes every value whose spelling it shares with `JSON.stringify`
    (see `_orjson_spells_it`); the exact encoder writes the rest.
    """
    if _orjson_spells_it(value):
        try:
            return orjson.dumps(value, default=_container_of)
        except orjson.JSONEncodeError:
            pass  # lone surrogates, or nesting past orjson's limit
    text = encode_json(value)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _escape_lone_surrogates(text).encode("utf-8")


_PLAIN_ONLY = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
)


def encode_record_bytes(value: Any, read_from: tuple[bytes, bytes | None] | None = None) -> bytes:
    """`encode_json_bytes` of a value that holds JSON values only (an admitted event's wire
    object, a chunk row), found from orjson's bytes instead of a walk of the value.

    orjson spells strings, booleans, null and integers as `JSON.stringify` does; it
    differs only on floats (always written with a `.` or an `e`), integers beyond
    ±(2**53 - 1) (sixteen digits or more) and array-index keys (which JavaScript lists
    first). When orjson's text holds none of those shapes, digits read as `0`
    (`_spelled_alike`), it is the text; otherwise, or when orjson refuses the value,
    `encode_json_bytes` decides. The shapes may also occur inside strings, so the
    test errs one way only: towards the walk. `read_from` is the text the value was
    parsed from and its shapes (`parse_json_shaped`): when orjson writes that very
    text again, its shapes are not computed a second time.
    """
    try:
        text = orjson.dumps(value, default=_container_of, option=_PLAIN_ONLY)
    except orjson.JSONEncodeError:
        return encode_json_bytes(value)
    shapes = read_from[1] if read_from is not None and text == read_from[0] else None
    if _spelled_alike(text, shapes) or _orjson_spells_it(value):
        return text
    return encode_json_bytes(value)


def _spelled_alike(text: bytes, shapes: bytes | None = None) -> bool:
    """True when orjson's `text` has no float, no integer of 16+ digits and no all-digit key.

    `shapes`, when the caller has it, is `text` read through `_DIGITS_AS_ZERO` and known
    to hold no run of sixteen digits (`parse_json_shaped` looked for one).
    """
    # `find`, not `in`: `bytes.__contains__` first tries its argument as an int and
    # formats the TypeError it then clears, which costs more than the search.
    if shapes is None:
        shapes = text.translate(_DIGITS_AS_ZERO)
        if shapes.find(_SIXTEEN_DIGITS) >= 0:
            return False
    if shapes.find(_FLOAT_SHAPE) >= 0:
        return False
    at = shapes.find(_INDEX_KEY_END)
    return at < 0 or not _has_index_key(shapes, at)


def _has_index_key(shapes: bytes, at: int) -> bool:
    """Whether `shapes` holds a member whose key is all digits (`{"00":` or `,"0":`), from
    the first `0":` on, at `at`.

    Each `0":` is followed back over its zeros (a key is short, and `"seq0":` or
    `"time0":` stop at the first letter), where a regex would try every byte.
    """
    while at >= 0:
        start = at
        while start > 0 and shapes[start - 1] == _ZERO:
            start -= 1
        if start >= 2 and shapes[start - 1] == _QUOTE and shapes[start - 2] in _KEY_OPENERS:
            return True
        at = shapes.find(_INDEX_KEY_END, at + 3)
    return False


def _container_of(view: Any) -> Any:
    if type(view) is FrozenObject or type(view) is FrozenArray:
        return view._raw
    raise TypeError(f"{type(view).__name__} is not a JSON value")


_FLOAT_SPELLINGS: dict[float, bool] = {}


def _orjson_spells_it(value: Any) -> bool:
    """Whether orjson writes `value` byte for byte as `JSON.stringify` does.

    It does for strings (same escapes), booleans, null, safe integers, objects
    without array-index keys (JavaScript would list those first) and most
    floats; not for integral floats (`1.0` against `1`), some exponents, or
    anything that is not a plain JSON value. Iterative; one look at each node.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        t = type(item)
        if t is str or t is bool or item is None:
            continue
        if t is int:
            if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                return False
        elif t is float:
            same = _FLOAT_SPELLINGS.get(item)
            if same is None:
                same = orjson.dumps(item) == format_number(item).encode()
                if len(_FLOAT_SPELLINGS) < 4096:
                    _FLOAT_SPELLINGS[item] = same
            if not same:
                return False
        else:
            if t is FrozenObject or t is FrozenArray:
                item = item._raw
                t = type(item)
            if t is dict:
                for key in item:
                    if type(key) is not str or (
                        key and "0" <= key[0] <= "9" and is_array_index(key)
                    ):
                        return False
                stack.extend(item.values())
            elif t is list or t is tuple:
                stack.extend(item)
            else:
                return False
    return True


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


def parse_json(data: bytes | str, *, deep: bool = False) -> Any:
    """Parse one strict RFC 8259 JSON text (strict UTF-8); raises ValueError.

    Numbers read as a JavaScript reader reads them: an integer beyond
    ±(2**53 - 1) becomes the nearest double, a literal beyond any double an
    infinity. orjson reads almost everything; `read_json_text` reads what
    orjson refuses but JSON allows (nesting past 1,024 levels, lone-surrogate
    escapes, `1e400`), at any depth and from any call-stack depth. Both give
    the same value for a text both read. `deep` says the text is likely to
    nest past orjson's limit (a typed decode ran out of recursion on it), so
    orjson is not tried: it would take about 12 bytes per byte of text first.
    """
    raw_bytes = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    try:
        if deep:
            raise orjson.JSONDecodeError("nested too deep for orjson", "", 0)
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        value = read_json_text(data.decode("utf-8") if isinstance(data, bytes) else data)
    if raw_bytes.translate(_DIGITS_AS_ZERO).find(_SIXTEEN_DIGITS) >= 0:  # see `_spelled_alike`
        value = _unsafe_ints_as_doubles(value)
    return value


def parse_json_shaped(data: bytes) -> tuple[Any, bytes | None]:
    """`parse_json(data)`, and `data` with every digit read as `0` (what `encode_record_bytes`
    looks for in a text: one pass over the bytes serves both), or None in its place when
    `data` holds a run of sixteen digits (the shapes then say no; see `_spelled_alike`)."""
    shapes = data.translate(_DIGITS_AS_ZERO)
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        value = parse_json(data)
        return value, None if shapes.find(_SIXTEEN_DIGITS) >= 0 else shapes
    if shapes.find(_SIXTEEN_DIGITS) >= 0:
        return _unsafe_ints_as_doubles(value), None
    return value, shapes


def parse_json_keeping_negative_zero(data: bytes | str) -> Any:
    """Like `parse_json`, but the token `-0` reads as the float -0.0 (header checks need it)."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    return _unsafe_ints_as_doubles(read_json_text(text, negative_zero=True))


# -- the exact reader -----------------------------------------------------------------------------

_SPACE = re.compile(r"[ \t\n\r]*")
_ARRAY_OPENS = re.compile(r"\[+")
_ARRAY_CLOSES = re.compile(r"\]+")
_NUMBER = re.compile(r"(-?(?:0|[1-9][0-9]*))(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_PLAIN_RUN = re.compile(r'[^"\\\x00-\x1f]*')
_PLAIN_KEY = re.compile(r'"([^"\\\x00-\x1f]*)"[ \t\n\r]*:[ \t\n\r]*')
_SPACES = frozenset(" \t\n\r")
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}
_LITERALS = (("true", True), ("false", False), ("null", None))
_MAX_INT_DIGITS = 16
"""An integer token of more digits is beyond ±(2**53 - 1): read it as a double directly, which
also keeps Python's limit on int-from-text conversion (4,300 digits) out of the way."""


def _fail(detail: str, pos: int) -> ValueError:
    return ValueError(f"{detail} at char {pos}")


def _read_string(text: str, pos: int) -> tuple[str, int]:
    """The string whose opening quote is at `pos - 1`, and the offset past its closing quote."""
    parts: list[str] = []
    while True:
        run = _PLAIN_RUN.match(text, pos)
        assert run is not None  # the pattern matches the empty string
        parts.append(run.group())
        pos = run.end()
        if pos >= len(text):
            raise _fail("unterminated string", pos)
        char = text[pos]
        if char == '"':
            return "".join(parts), pos + 1
        if char != "\\":
            raise _fail("control character in string", pos)
        escape = text[pos + 1 : pos + 2]
        if escape in _ESCAPES:
            parts.append(_ESCAPES[escape])
            pos += 2
            continue
        if escape != "u" or not _HEX4.fullmatch(text, pos + 2, pos + 6):
            raise _fail("invalid escape", pos)
        code = int(text[pos + 2 : pos + 6], 16)
        pos += 6
        if 0xD800 <= code < 0xDC00 and text.startswith("\\u", pos):
            low = text[pos + 2 : pos + 6]
            if _HEX4.fullmatch(low) and 0xDC00 <= int(low, 16) < 0xE000:
                code = 0x10000 + ((code - 0xD800) << 10) + (int(low, 16) - 0xDC00)
                pos += 6
        parts.append(chr(code))


def _read_scalar(text: str, pos: int, negative_zero: bool) -> tuple[Any, int]:
    """A string, number or literal starting at `pos`, and the offset just past it."""
    char = text[pos : pos + 1]
    if char == '"':
        return _read_string(text, pos + 1)
    for word, value in _LITERALS:
        if text.startswith(word, pos):
            return value, pos + len(word)
    number = _NUMBER.match(text, pos)
    if number is None:
        raise _fail("expected a JSON value", pos)
    token = number.group()
    whole, fraction, exponent = number.groups()
    if fraction or exponent or len(whole.lstrip("-")) > _MAX_INT_DIGITS:
        return float(token), number.end()
    if negative_zero and token == "-0":
        return -0.0, number.end()
    return int(token), number.end()


def read_json_text(text: str, *, negative_zero: bool = False) -> Any:
    """Parse strict JSON text without recursion: depth is bounded by memory alone.

    The exact reader behind `parse_json` (orjson is the fast one): lone
    surrogate escapes read as lone surrogates, a pair as the character it
    encodes, numbers beyond any double as infinities, a duplicate key keeps
    its first position and its last value. `negative_zero` reads the token
    `-0` as -0.0. Raises ValueError naming the offset of the first error.

    A container is built when it closes, at its exact size, from the values
    read since it opened; an open container costs one machine integer. So a
    value nested n deep costs its own containers and 8n bytes besides.

    >>> read_json_text('{"a": [1, 2.5, "\\ud800"]}')
    {'a': [1, 2.5, '\\ud800']}
    """
    space = _SPACE.match
    # `values`: the finished members of the open containers, in order (an object's as
    # key, value, key, value). `frames`: one entry per open container, innermost last:
    # where its members start in `values`, shifted left once, plus 1 for an object.
    values: list[Any] = []
    frames = array("q")
    pos = space(text, 0).end()  # type: ignore[union-attr]
    while True:
        # A value starts at `pos`.
        char = text[pos : pos + 1]
        value: Any
        if char == "[":
            run_end = _ARRAY_OPENS.match(text, pos).end()  # type: ignore[union-attr]
            frames.extend(array("q", (len(values) << 1,)) * (run_end - pos))
            pos = space(text, run_end).end()  # type: ignore[union-attr]
            if text[pos : pos + 1] != "]":
                continue
            frames.pop()
            value, pos = [], pos + 1
        elif char == "{":
            pos += 1
            if text[pos : pos + 1] in _SPACES:
                pos = space(text, pos).end()  # type: ignore[union-attr]
            if text[pos : pos + 1] == "}":
                value, pos = {}, pos + 1
            else:
                frames.append(len(values) << 1 | 1)
                pos = _member_key(text, pos, values)
                continue
        else:
            value, pos = _read_scalar(text, pos, negative_zero)
        # A value has ended just before `pos`: close the containers it completes.
        while frames:
            char = text[pos : pos + 1]
            if char in _SPACES:  # (a regex call costs more than this test)
                pos = space(text, pos).end()  # type: ignore[union-attr]
                char = text[pos : pos + 1]
            frame = frames[-1]
            if char == ",":
                values.append(value)
                pos += 1
                if text[pos : pos + 1] in _SPACES:
                    pos = space(text, pos).end()  # type: ignore[union-attr]
                if frame & 1:
                    pos = _member_key(text, pos, values)
                break
            start = frame >> 1
            if frame & 1:
                if char != "}":
                    raise _fail("expected ',' or the end of the container", pos)
                pos += 1
                frames.pop()
                if start == len(values) - 1:  # one member: its key is the last value
                    value = {values.pop(): value}
                else:
                    values.append(value)
                    members = values[start:]
                    del values[start:]
                    value = dict(zip(members[::2], members[1::2], strict=True))
                continue
            if char != "]":
                raise _fail("expected ',' or the end of the container", pos)
            if start == len(values):
                # The open arrays equal to this one each hold this value alone (an object
                # would hold a key): a run of `]` closes them in one step.
                same = 1
                while same < len(frames) and frames[-1 - same] == frame:
                    same += 1
                run = _ARRAY_CLOSES.match(text, pos, pos + same)
                closes = run.end() - pos  # type: ignore[union-attr]
                del frames[-closes:]  # first: the frames' memory is free for the arrays
                for _ in repeat(None, closes):
                    value = [value]
                pos += closes
                continue
            values.append(value)
            value = values[start:]
            del values[start:]
            pos += 1
            frames.pop()
        else:
            pos = space(text, pos).end()  # type: ignore[union-attr]
            if pos != len(text):
                raise _fail("extra data after the JSON value", pos)
            return value


def _member_key(text: str, pos: int, values: list[Any]) -> int:
    """Read `"key" :` at `pos` onto `values`; the offset of the member's value."""
    plain = _PLAIN_KEY.match(text, pos)
    if plain is not None:  # a key without escapes: one match reads it, its colon and spaces
        values.append(plain.group(1))
        return plain.end()
    if text[pos : pos + 1] != '"':
        raise _fail("expected a string key", pos)
    key, pos = _read_string(text, pos + 1)
    pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
    if text[pos : pos + 1] != ":":
        raise _fail("expected ':' after an object key", pos)
    values.append(key)
    return _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
