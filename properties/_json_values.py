"""G-json and G-bad-json: lossless JSON values, and values with exactly one labelled defect.

Internal to the kit: the public names are re-exported by `properties.strategies`.
Values are plain `dict`/`list`/scalars, as a caller would hand them to the
kernel. A bad value is a `BadJson(label, value)`: the label names the single
defect (docs/format/events.md §1.2), so a failing law can say which rule was missed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import attrs
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from properties._validation import check_labels, check_size

__all__ = (
    "MAX_SAFE",
    "BadJson",
    "DEFECTS",
    "json_scalars",
    "json_strings",
    "json_keys",
    "json_values",
    "json_containers",
    "deep_chains",
    "payload_values",
    "bad_json",
    "js_numbers",
    "array_index_objects",
)

MAX_SAFE = 2**53 - 1

_SURROGATES = st.integers(0xD800, 0xDFFF).map(chr)
_CONTROLS = st.integers(0, 0x1F).map(chr)
_NON_BMP = st.integers(0x10000, 0x10FFFF).map(chr)


def json_strings(*, max_size: int = 12) -> st.SearchStrategy[str]:
    """Text with ASCII, non-BMP characters, control characters and lone surrogates.

    Args:
        max_size: the text is joined from at most `max(1, max_size // 3)` pieces of up to
            four characters each. An int of at least 0.

    Raises:
        InvalidArgument: when built with a bad `max_size`.
    """
    check_size("max_size", max_size)
    pieces = st.one_of(
        st.text(alphabet='abcxyz 019"\\/é', max_size=4),
        st.text(max_size=3),
        _NON_BMP,
        _CONTROLS,
        _SURROGATES,
        st.sampled_from(["\u2028", "\u2029", "\x7f", "\ud83d\ude42", "🙂"]),
    )
    return st.lists(pieces, max_size=max(1, max_size // 3)).map("".join)


def json_keys() -> st.SearchStrategy[str]:
    """Object keys: words, array-index keys (`"2"`, `"10"`), near-indices (`"01"`, `"-1"`)."""
    return st.one_of(
        st.sampled_from(["a", "b", "id", "type", "x y", ""]),
        st.sampled_from(["0", "2", "10", "4294967294", "4294967295", "01", "-1", "1.5"]),
        json_strings(max_size=4),
    )


def js_numbers() -> st.SearchStrategy[int | float]:
    """Numbers whose ECMAScript spelling is interesting (docs/format/persistence.md §2.4)."""
    return st.one_of(
        st.sampled_from(
            [0, 1, -1, MAX_SAFE, -MAX_SAFE, 3.0, 2.5, 1e16, 1e20, 1e21, 1e-6, 1e-7, 1.5e300]
        ),
        st.sampled_from([123.456, 0.1, -2.5e-8, 5e-324, 1.7976931348623157e308, 100.0]),
    )


def _finite_float(x: float) -> float:
    return 0.0 if x == 0 else x


def json_scalars(*, strings: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[Any]:
    """`None`, booleans, safe integers, finite floats other than -0.0, and text.

    Args:
        strings: the strategy for the text; default: `json_strings()`.

    Raises:
        InvalidArgument: when built with a `strings` that is not a strategy.
    """
    if strings is not None and not isinstance(strings, st.SearchStrategy):
        raise InvalidArgument(f"strings={strings!r} must be a strategy of str or None")
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-MAX_SAFE, MAX_SAFE),
        st.floats(allow_nan=False, allow_infinity=False).map(_finite_float),
        js_numbers(),
        strings if strings is not None else json_strings(),
    )


def _utf16(item: tuple[str, Any]) -> bytes:
    """A member's key as JavaScript holds it (UTF-16): a surrogate pair and the character
    it encodes are the same key, so one object may hold only one of them."""
    return item[0].encode("utf-16-le", "surrogatepass")


def _objects(
    values: st.SearchStrategy[Any],
    *,
    keys: st.SearchStrategy[str] | None = None,
    min_size: int = 0,
    max_size: int = 4,
) -> st.SearchStrategy[dict[str, Any]]:
    r"""Objects of `keys` (`json_keys` by default) to `values`, no two keys the same string
    once read as UTF-16 (`st.dictionaries` would give `{"🙂": 1, "\ud83d\ude42": 2}`, which
    is no JSON object: admission refuses it)."""
    members = st.tuples(json_keys() if keys is None else keys, values)
    return st.lists(members, min_size=min_size, max_size=max_size, unique_by=_utf16).map(dict)


def json_values(*, max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """G-json: nested objects/arrays (depth up to about 6) over `json_scalars`.

    Args:
        max_leaves: the most scalars in one value (`st.recursive`'s bound), at least 1.

    Raises:
        InvalidArgument: when built with a bad `max_leaves`.
    """
    check_size("max_leaves", max_leaves, minimum=1)
    return st.recursive(
        json_scalars(),
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            _objects(children),
        ),
        max_leaves=max_leaves,
    )


def json_containers(*, max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """G-json values that are objects or arrays.

    Args:
        max_leaves: as for `json_values`, per member (at least 1).

    Raises:
        InvalidArgument: when built with a bad `max_leaves`.
    """
    check_size("max_leaves", max_leaves, minimum=1)
    return st.one_of(
        st.lists(json_values(max_leaves=max_leaves), max_size=4),
        _objects(json_values(max_leaves=max_leaves)),
    )


def array_index_objects() -> st.SearchStrategy[dict[str, Any]]:
    """Objects mixing array-index keys and ordinary keys in arbitrary insertion order."""
    keys = st.lists(
        st.sampled_from(["b", "10", "a", "2", "0", "01", "z", "4294967295", "7"]),
        unique=True,
        min_size=1,
        max_size=6,
    )
    return keys.flatmap(
        lambda ks: st.tuples(*[json_scalars() for _ in ks]).map(
            lambda vs: dict(zip(ks, vs, strict=True))
        )
    )


def _chain(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def deep_chains() -> st.SearchStrategy[list[Any]]:
    """A very deep chain of single-element lists (iterative validators must accept it).

    Hypothesis's printer recurses, so a test that fails on such a value reports a
    `RecursionError` from the printer instead of the falsifying example: assert with a
    message that describes the value (its depth, say) to see the failure itself.
    """
    return st.integers(2_000, 5_000).map(_chain)


def _object_chain(depth: int, leaf: Any) -> dict[str, Any]:
    value: Any = leaf
    for level in range(depth):
        value = {"k": value} if level % 2 else {"k": [value, level]}
    result: dict[str, Any] = value if type(value) is dict else {"k": value}
    return result


def payload_values() -> st.SearchStrategy[Any]:
    """Payloads that stress a reader: deep, wide, long text, lone surrogates, extreme numbers.

    Every value is lossless JSON, so a writer stores it and a reader must give it back:
    chains 1,000-4,000 levels deep (past the C parsers' nesting limits), arrays of a few
    hundred scalars, strings of thousands of characters with surrogates and controls, and
    numbers at the edges of the double range. As with `deep_chains`, Hypothesis cannot
    print a falsifying example that is one of the deep chains.
    """
    extreme_numbers = st.sampled_from(
        [MAX_SAFE, -MAX_SAFE, 1.7976931348623157e308, -5e-324, 1e21, 9007199254740992.0]
    )
    long_text = st.lists(json_strings(max_size=24), min_size=50, max_size=200).map("".join)
    return st.one_of(
        json_values(max_leaves=20),
        st.builds(_object_chain, st.integers(1_000, 4_000), json_scalars()),
        st.lists(st.one_of(json_scalars(), extreme_numbers), min_size=100, max_size=400),
        _objects(long_text, min_size=1, max_size=3),
        st.builds(_object_chain, st.integers(900, 1_200), _SURROGATES),
    )


# -- G-bad-json -----------------------------------------------------------------------------------


@attrs.frozen
class BadJson:
    """A value with exactly one defect: `label` names it (a key of `DEFECTS`), `value` holds it."""

    label: str
    value: Any = attrs.field(repr=False)

    def __repr__(self) -> str:
        return f"BadJson({self.label!r})"


class _Dict(dict[str, Any]):
    pass


class _List(list[Any]):
    pass


class _Str(str):
    pass


class _Int(int):
    pass


class _Opaque:
    def __repr__(self) -> str:
        return "<opaque object>"


def _cycle_dict() -> Any:
    d: dict[str, Any] = {"a": 1}
    d["self"] = d
    return d


def _cycle_list() -> Any:
    items: list[Any] = [1]
    items.append([items])
    return items


DEFECTS: dict[str, Callable[[], Any]] = {
    "nan": lambda: math.nan,
    "inf": lambda: math.inf,
    "-inf": lambda: -math.inf,
    "-0.0": lambda: -0.0,
    "2**53": lambda: 2**53,
    "-(2**53)": lambda: -(2**53),
    "huge-int": lambda: 10**30,
    "tuple": lambda: (1, "a"),
    "set": lambda: {1, 2},
    "frozenset": lambda: frozenset({1}),
    "bytes": lambda: b"abc",
    "bytearray": lambda: bytearray(b"x"),
    "decimal": lambda: Decimal("1.5"),
    "int-key": lambda: {1: "a"},
    "none-key": lambda: {None: "a"},
    "tuple-key": lambda: {(1, 2): "a"},
    "dict-cycle": _cycle_dict,
    "list-cycle": _cycle_list,
    "dict-subclass": lambda: _Dict(a=1),
    "list-subclass": lambda: _List([1]),
    "str-subclass": lambda: _Str("s"),
    "int-subclass": lambda: _Int(3),
    "object": _Opaque,
}
"""Every defect G-bad-json injects, by the label `bad_json(labels=...)` takes; each value makes
one (docs/format/events.md §1.2)."""


@attrs.frozen
class _Wrap:
    kind: str  # "list" or "dict"
    key: str
    position: int
    siblings: tuple[Any, ...]


def _embed(defect: Any, wraps: list[_Wrap]) -> Any:
    value = defect
    for w in wraps:
        siblings = list(w.siblings)
        if w.kind == "list":
            siblings.insert(min(w.position, len(siblings)), value)
            value = siblings
        else:
            obj = {f"k{i}": s for i, s in enumerate(siblings)}
            obj[w.key] = value
            value = obj
    return value


def bad_json(*, labels: Sequence[str] | None = None) -> st.SearchStrategy[BadJson]:
    """G-bad-json: a G-json value with one defect from `DEFECTS` injected at a random depth.

    Args:
        labels: the defects to draw from, as a list or tuple of `DEFECTS` keys (default: all).

    Raises:
        InvalidArgument: when built with `labels` that is empty, not a list or tuple, or names
            an unknown defect.
    """
    names = sorted(DEFECTS) if labels is None else list(check_labels("labels", labels, DEFECTS))
    wrap = st.builds(
        _Wrap,
        kind=st.sampled_from(["list", "dict"]),
        key=st.sampled_from(["bad", "data", "0"]),
        position=st.integers(0, 3),
        siblings=st.lists(json_values(max_leaves=3), max_size=2).map(tuple),
    )
    return st.builds(
        lambda label, wraps: BadJson(label, _embed(DEFECTS[label](), wraps)),
        st.sampled_from(names),
        st.lists(wrap, max_size=4),
    )
