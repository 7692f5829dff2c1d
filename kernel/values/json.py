"""Lossless JSON values: admit (validate + snapshot), freeze, thaw, compare.

Frozen values are read-only views (`FrozenObject`, `FrozenArray`) over plain
dicts and lists that the kernel alone owns: a snapshot it copied from a caller,
or the output of its own JSON parser. Wrapping is O(1); children are wrapped
on first access and the wrapper is memoised, so `obj["message"] is
obj["message"]`. Never hand a view's raw container to a caller: `thaw` copies.
See docs/rfc/implemented/architecture/2026-11-29-event-model.md.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol, Union, overload

import msgspec

from kernel.errors import NotLosslessJson

__all__ = (
    "MAX_SAFE_INTEGER",
    "FrozenObject",
    "FrozenArray",
    "JsonValue",
    "admit_json",
    "admit_plain",
    "freeze",
    "view",
    "lazy_view",
    "members",
    "object_member",
    "known_lossless",
    "checked_as",
    "LazySource",
    "thaw",
    "raw",
    "json_equal",
    "safe_int",
    "is_number",
    "summary",
    "canonical_text",
)

MAX_SAFE_INTEGER = 2**53 - 1

JsonValue = Union[None, bool, int, float, str, "FrozenObject", "FrozenArray"]
"""A frozen JSON value as the kernel hands it out."""


def is_number(value: object) -> bool:
    """True for an `int` or `float`, never for a `bool`."""
    t = type(value)
    return t is int or t is float


def safe_int(value: object) -> int | None:
    """The value as an `int` if it is a safe integer (integral floats count), else None.

    >>> safe_int(3.0), safe_int(True), safe_int(2**53)
    (3, None, None)
    """
    t = type(value)
    if t is int:
        v: int = value  # type: ignore[assignment]
        return v if -MAX_SAFE_INTEGER <= v <= MAX_SAFE_INTEGER else None
    if t is float:
        f: float = value  # type: ignore[assignment]
        if math.isfinite(f) and f.is_integer() and -MAX_SAFE_INTEGER <= f <= MAX_SAFE_INTEGER:
            return int(f)
    return None


def _view(value: Any, lossless: bool) -> Any:
    t = type(value)
    if t is dict:
        return FrozenObject._own(value, lossless)
    if t is list:
        return FrozenArray._own(value, lossless)
    return value


if TYPE_CHECKING:
    _MappingMethods = Mapping[str, Any]
    _SequenceMethods = Sequence[Any]
else:

    class _MappingMethods:
        """The mixin methods of `Mapping` (the views are registered as one, not derived).

        Deriving from the ABC would give the struct class the ABC's Python-level
        metaclass, and every construction would take CPython's slow call path:
        about 0.07 µs more per view, a tenth of the cost of loading an event.
        """

        __slots__ = ()
        keys = Mapping.keys
        items = Mapping.items
        values = Mapping.values
        __reversed__ = None  # as `Mapping`: not reversible

    class _SequenceMethods:
        """The mixin methods of `Sequence` (see `_MappingMethods`)."""

        __slots__ = ()
        index = Sequence.index
        count = Sequence.count
        __contains__ = Sequence.__contains__
        __reversed__ = Sequence.__reversed__


class _FrozenView(msgspec.Struct, gc=False, eq=False):
    """What both views share: the owned container, memoised child views, a cached hash.

    A msgspec struct the cyclic collector does not track (a view never refers back
    to anything that holds it), so a load of a million events leaves the collector
    nothing to rescan. `_value` is the container, or while the view is lazy
    (`lazy_view`) a `LazySource` that builds it on the first read of `_raw`.
    `_lossless` is None only during the public constructor, which admits its value.
    `_checked_as` names the event type whose payload rules the value was found to
    satisfy when it was loaded (`checked_as`). `_member` is the number of the value
    among those its lazy source holds (a chunk row holds one per member event), so
    one source serves many views without an object per view.
    """

    _value: Any = None
    _lossless: bool = None  # type: ignore[assignment]
    _kids: Any = None
    _hash: int | None = None
    _checked_as: str | None = None
    _member: int = 0

    def __post_init__(self) -> None:
        if self._lossless is None:
            self._admit()

    def _admit(self) -> None:
        raise NotImplementedError

    @property
    def _raw(self) -> Any:
        """The owned container (built now if the view is lazy). Never hand it out."""
        value = self._value
        if type(value) is not dict and type(value) is not list:
            value = self._value = value.build(self._member)
        return value

    @classmethod
    def _own(cls, raw_container: Any, lossless: bool) -> Any:
        return cls(raw_container, lossless)

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = _hash_key(self._raw)
        return self._hash

    def __repr__(self) -> str:
        try:
            return f"{type(self).__name__}({self._raw!r})"
        except RecursionError:
            return f"{type(self).__name__}({summary(self._raw)})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self._raw, self._lossless))


class FrozenObject(_FrozenView, _MappingMethods):
    """A read-only JSON object; iteration keeps the member order it was built with.

    `FrozenObject(value)` admits a mapping (a caller's copy is taken).
    """

    __hash__ = _FrozenView.__hash__  # defining __eq__ would otherwise unset it

    def _admit(self) -> None:
        admitted = admit_json({} if self._value is None else self._value)
        if type(admitted) is not dict:
            raise NotLosslessJson("FrozenObject needs a JSON object")
        self._value = admitted
        self._lossless = True

    def __getitem__(self, key: str) -> Any:
        value = self._raw[key]
        t = type(value)
        if t is dict or t is list:
            kids = self._kids
            if kids is None:
                kids = self._kids = {}
            kid = kids.get(key)
            if kid is None:
                kid = kids[key] = _view(value, self._lossless)
            return kid
        return value

    def get(self, key: str, default: Any = None) -> Any:
        container = self._raw
        if key not in container:
            return default
        value = container[key]
        t = type(value)
        return self[key] if t is dict or t is list else value

    def __contains__(self, key: object) -> bool:
        return key in self._raw

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __eq__(self, other: object) -> bool:
        if type(other) is FrozenObject:
            return self is other or _same_raw(self._raw, other._raw)
        if issubclass(type(other), Mapping):
            return _same_raw(self._raw, thaw(other))
        return NotImplemented


class FrozenArray(_FrozenView, _SequenceMethods):
    """A read-only JSON array. `FrozenArray(value)` admits a sequence (a copy is taken)."""

    __hash__ = _FrozenView.__hash__  # defining __eq__ would otherwise unset it

    def _admit(self) -> None:
        value = [] if self._value is None else self._value
        admitted = admit_json(list(value) if type(value) is tuple else value)
        if type(admitted) is not list:
            raise NotLosslessJson("FrozenArray needs a JSON array")
        self._value = admitted
        self._lossless = True

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> FrozenArray: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return FrozenArray._own(self._raw[index], self._lossless)
        value = self._raw[index]
        t = type(value)
        if t is dict or t is list:
            if index < 0:
                index += len(self._raw)
            kids = self._kids
            if kids is None:
                kids = self._kids = {}
            kid = kids.get(index)
            if kid is None:
                kid = kids[index] = _view(value, self._lossless)
            return kid
        return value

    def __len__(self) -> int:
        return len(self._raw)

    def __iter__(self) -> Iterator[Any]:
        for i in range(len(self._raw)):
            yield self[i]

    def __eq__(self, other: object) -> bool:
        if type(other) is FrozenArray:
            return self is other or _same_raw(self._raw, other._raw)
        if issubclass(type(other), (list, tuple)):
            return _same_raw(self._raw, thaw(other))
        return NotImplemented


def _same_raw(a: Any, b: Any) -> bool:
    """`a == b` on plain JSON containers, at any depth and from any call-stack depth.

    The C comparison recurses; past the recursion limit the same comparison
    runs again with an explicit stack (Python's `==` semantics: 1 == 1.0 == True).
    """
    try:
        return bool(a == b)
    except RecursionError:
        pass
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        tx, ty = type(x), type(y)
        if tx is dict and ty is dict:
            if len(x) != len(y):
                return False
            for key, value in x.items():
                if key not in y:
                    return False
                stack.append((value, y[key]))
        elif tx is list and ty is list:
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif tx is dict or tx is list or ty is dict or ty is list or x != y:
            return False
    return True


Mapping.register(FrozenObject)
Sequence.register(FrozenArray)

_SPLIT_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def canonical_text(text: str) -> str:
    r"""`text` with each high surrogate that directly precedes a low one joined with it.

    Strings in the format are UTF-16 (JavaScript's): a high surrogate followed
    by a low one *is* the astral character they encode, and JSON text (the
    JSONL writer, any reader) cannot tell the two spellings apart. The joined
    one is canonical, so a string reads back exactly as it was stored. Lone
    surrogates are kept. A non-string is returned as it is.

    >>> canonical_text("a\ud83d\ude42") == "a\U0001f642"
    True
    >>> canonical_text("\ude42\ud83d") == "\ude42\ud83d"  # low, then high: two lone halves
    True
    """
    if type(text) is not str or text.isascii() or _SPLIT_PAIR.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def summary(value: Any, limit: int = 120) -> str:
    """A repr-like description of a JSON value, cut at about `limit` characters; iterative.

    For messages about untrusted values: no depth or size makes it recurse or grow.

    >>> summary({"a": [1, "x" * 200]}, limit=20)
    "{'a': [1, 'xxxxxxxxx…"
    """
    parts: list[str] = []
    size = 0
    # Items: (True, text to emit) or (False, value to describe); popped from the end.
    stack: list[tuple[bool, Any]] = [(False, value)]
    while stack and size <= limit:
        is_text, item = stack.pop()
        t = type(item)
        if is_text:
            text = item
        elif t is FrozenObject or t is FrozenArray:
            stack.append((False, item._raw))
            continue
        elif t is dict or t is list or t is tuple:
            text = "{" if t is dict else "["
            stack.append((True, "}" if t is dict else "]"))
            pairs = list(item.items()) if t is dict else [(None, child) for child in item]
            for index in range(len(pairs) - 1, -1, -1):
                key, child = pairs[index]
                stack.append((False, child))
                if t is dict:
                    stack += [(True, ": "), (False, key)]
                if index:
                    stack.append((True, ", "))
        else:
            text = _scalar_repr(item, limit - size + 1)
        parts.append(text)
        size += len(text)
    out = "".join(parts)
    return out if not stack and size <= limit else out[:limit] + "…"


def _scalar_repr(value: Any, budget: int) -> str:
    if type(value) is str and len(value) > budget:
        return repr(value[:budget])
    if type(value) is int and value.bit_length() > 4 * budget:
        return f"<int of {value.bit_length()} bits>"
    try:
        return repr(value)
    except Exception:  # a hostile object's repr must not turn a rejection into a crash
        return f"<{type(value).__name__} object>"


def _rebuild(raw_value: Any, lossless: bool) -> Any:
    return _view(raw_value, lossless)


def _hash_key(value: Any) -> int:
    """A hash consistent with `==` on the raw containers: member order ignored, 1 == 1.0 == True.

    Computed bottom-up without recursion: a container is hashed once the hashes of
    its members are on `hashes`, which is when `pending` is back to the length it had
    when the container was opened. An open container costs two list slots.
    """
    hashes: list[int] = []
    pending: list[Any] = [value]
    opened: list[Any] = []  # the containers whose members are being hashed, innermost last
    marks: list[int] = []  # the length of `pending` when each was opened
    while True:
        while opened and len(pending) == marks[-1]:
            item = opened.pop()
            marks.pop()
            start = len(hashes) - len(item)
            members = hashes[start:]
            del hashes[start:]
            if type(item) is dict:
                hashes.append(hash(frozenset(zip(item, members, strict=True))))
            else:
                hashes.append(hash(("list", *members)))
        if not pending:
            return hashes[0]
        item = pending.pop()
        t = type(item)
        if t is dict:
            opened.append(item)
            marks.append(len(pending))
            pending.extend(reversed(item.values()))
        elif t is list or t is tuple:
            opened.append(item)
            marks.append(len(pending))
            pending.extend(reversed(item))
        else:
            hashes.append(hash(item))


class LazySource(Protocol):
    """What a lazy view is built from: `build(member)` returns the container of value
    number `member` (0 for a source of one value); `lossless` is true when `build`
    found (or the source knows) the values to be lossless JSON."""

    @property
    def lossless(self) -> bool:
        """True when the value `build` makes (or made) is known to be lossless JSON."""

    def build(self, member: int) -> Any:
        """A plain `dict` or `list` the kernel owns; must not fail (checked beforehand)."""

    # A source may also offer `members(keys) -> Mapping | None`: the top-level members
    # `keys` of the object it builds, read without building it, or None (see `members`).
    # A loader's source of an event payload that names its turn may also carry what it
    # read of it on the way: `turn`, `step` (0 when it has none) and, for a `tool/call`
    # or `tool/result` payload, `call_id` (the call it makes or answers, for the type
    # the view's `checked_as` names). The invariant tracker reads them
    # (`kernel.folds.invariants`).


def lazy_view(
    kind: type[FrozenObject] | type[FrozenArray],
    source: LazySource,
    lossless: bool,
    checked_as: str | None = None,
    member: int = 0,
) -> Any:
    """A frozen object or array whose container `source.build(member)` makes on first read.

    `build` must return a `dict` (for `FrozenObject`) or a `list` that the kernel
    owns, and must not fail: the caller has checked the source already. Reading
    the view, comparing, hashing or pickling it builds the container, once;
    `lossless` says whether it holds admitted lossless JSON (as for `view`),
    `checked_as` the event type whose payload rules it is known to satisfy. A
    source that is a `msgspec.Struct(gc=False)` keeps the collector's work flat.
    """
    return kind(source, lossless, None, None, checked_as, member)


def checked_as(value: Any) -> str | None:
    """The event type whose payload rules (R3, R10-R12) the kernel found `value` to satisfy.

    Set on the payloads the typed load path checked; None for every other value.
    A fact about an immutable value, so admission may rely on it. An
    `assistant/message` payload is marked only when its content is not empty, so
    a marked one projects to its message (docs/format/folds.md §2) unread.
    """
    t = type(value)
    if t is not FrozenObject and t is not FrozenArray:
        return None
    result: str | None = value._checked_as
    return result


def known_lossless(value: Any) -> bool:
    """Whether `value` is a frozen view known to hold lossless JSON (R1), without a walk.

    A lazy view not built yet asks its source, which may know without building the
    value. False means "not known", not "lossy": `admit_json` decides that.
    """
    t = type(value)
    if t is not FrozenObject and t is not FrozenArray:
        return False
    if value._lossless:
        return True
    source = value._value
    if type(source) is not dict and type(source) is not list and source.lossless:
        value._lossless = True  # a fact about the value, cached like its hash
        return True
    return False


def view(value: Any, *, lossless: bool = False) -> Any:
    """Wrap a plain value the kernel owns (e.g. parser output) without copying it.

    Only for containers nobody else holds: the view does not copy.
    """
    return _view(value, lossless)


def raw(value: Any) -> Any:
    """The plain container behind a frozen value (the value itself otherwise). Do not mutate."""
    t = type(value)
    if t is FrozenObject or t is FrozenArray:
        return value._raw
    return value


def members(value: Any, keys: frozenset[str]) -> Any:
    """A mapping that agrees with the object `value` on `keys`, read without building it
    when its lazy source can tell (`members(keys)` on the source); otherwise `raw(value)`.

    For folds that read a few top-level scalars of many payloads (turn, step, call id).
    """
    if type(value) is FrozenObject:
        source = value._value
        if type(source) is not dict:
            peek = getattr(source, "members", None)
            if peek is not None:
                found = peek(keys)
                if found is not None:
                    return found
        return value._raw
    return raw(value)


class _MemberSource(msgspec.Struct, gc=False):
    """The lazy source of an object member read before its parent was built.

    Holds the parent's source, not the parent, so no reference cycle forms
    (these structs are not tracked by the collector).
    """

    parent: Any
    key: str
    parent_member: int

    @property
    def lossless(self) -> bool:
        result: bool = self.parent.lossless
        return result

    def build(self, member: int) -> Any:
        return self.parent.build(self.parent_member)[self.key]


def object_member(value: FrozenObject, key: str) -> Any:
    """`value[key]` for a member known to be a JSON object, without building a lazy `value`.

    The member view is the one `value[key]` returns from then on; it is built from
    the parent's source when first read. For folds that hand on a part of a payload
    (the message of a `tool/result`) without reading it.
    """
    source = value._value
    if type(source) is dict:
        return value[key]
    kids = value._kids
    if kids is None:
        kids = value._kids = {}
    kid = kids.get(key)
    if kid is None:
        kid = kids[key] = FrozenObject(
            _MemberSource(source, key, value._member), value._lossless, None, None, None
        )
    return kid


def freeze(value: Any) -> Any:
    """Admit a JSON value (R1) and return its frozen form.

    >>> freeze({"a": [1, 2]})["a"]
    FrozenArray([1, 2])
    """
    return _view(admit_json(value), True)


# -- admission: one iterative pass that validates and copies ------------------------------------

_SCALARS = (str, type(None), bool)


_PATH_ENDS: Final = 8
"""Path steps named at each end of a deep path in an error; the ones between are counted."""


def path_text(path: Sequence[Any]) -> str:
    """A path into a JSON value, as in errors: `['a'][0]`, bounded for deep paths.

    Keys are spelled with their surrogate pairs joined (`canonical_text`), as admitted.

    >>> path_text(["a", 0])
    "['a'][0]"
    >>> path_text(["k", 0] * 20)
    "['k'][0]['k'][0]['k'][0]['k'][0] ... 24 more ... ['k'][0]['k'][0]['k'][0]['k'][0]"
    """
    if len(path) <= 2 * _PATH_ENDS:
        return "".join(f"[{summary(canonical_text(key))}]" for key in path) or "value"
    head = "".join(f"[{summary(canonical_text(key))}]" for key in path[:_PATH_ENDS])
    tail = "".join(f"[{summary(canonical_text(key))}]" for key in path[-_PATH_ENDS:])
    return f"{head} ... {len(path) - 2 * _PATH_ENDS} more ... {tail}"


def _reject(detail: str, path: list[Any]) -> NotLosslessJson:
    # The path holds raw keys and indices; it is spelled out only when something is wrong.
    return NotLosslessJson(f"{path_text(path)}: {detail}")


def _check_scalar(value: Any, path: list[Any]) -> Any:
    t = type(value)
    if t is str:
        return canonical_text(value)
    if t is bool or value is None:
        return value
    if t is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
        raise _reject(f"integer {summary(value)} is beyond ±(2**53 - 1)", path)
    if t is float:
        if not math.isfinite(value):
            raise _reject(f"{value!r} has no JSON spelling", path)
        if value == 0.0 and math.copysign(1.0, value) < 0:
            raise _reject("-0.0 loses its sign in JSON", path)
        return value
    raise _reject(f"{t.__name__} is not a plain JSON type", path)


def admit_json(value: Any) -> Any:
    """Validate `value` as lossless JSON and return a private plain copy of it.

    Frozen views are accepted like the plain values they stand for; an already
    admitted view is shared, not copied. Iterative: depth is bounded by memory.
    Raises `NotLosslessJson` naming the path of the first bad value.
    """
    t = type(value)
    if t is not dict and t is not list and t is not FrozenObject and t is not FrozenArray:
        return _check_scalar(value, [])
    if t is FrozenObject or t is FrozenArray:
        if known_lossless(value):
            return value._raw
        value = value._raw
    copy = _plain_copy(value, 0)
    return _admitted_container(value) if copy is _UNSURE else copy


def admit_plain(value: dict[str, Any] | list[Any]) -> dict[str, Any] | list[Any] | None:
    """`admit_json(value)` of a plain container in the common shape, or None where
    `admit_json` must decide (and may refuse).

    The common shape is a few levels of dicts and lists of ASCII strings, safe
    integers, booleans and nulls; for a caller that falls back to `admit_json`
    when the answer is None.

    >>> admit_plain({"turn": 1, "text": "hi"})
    {'turn': 1, 'text': 'hi'}
    >>> admit_plain({"x": 1.5}) is None
    True
    """
    copy = _plain_copy(value, 0)
    return None if copy is _UNSURE else copy


_CONTAINERS: Final = frozenset({dict, list, FrozenObject, FrozenArray})
_UNSURE: Final = object()
_PLAIN_DEPTH: Final = 16


def _plain_copy(value: dict[str, Any] | list[Any], depth: int) -> Any:
    """`admit_json`'s copy of a value it admits as it is, or `_UNSURE`.

    The common payload, a few levels of dicts and lists of ASCII strings, safe
    integers, booleans and nulls, is copied by recursion, which costs a third of the
    general walk. Anything else (a deeper container, which may be a cycle, a float,
    a view, a string that may need joining, a value to refuse) answers `_UNSURE`
    and the general walk decides, from the start. The container is copied whole
    first and only its containers are replaced, by their copies.
    """
    if depth > _PLAIN_DEPTH:
        return _UNSURE
    if type(value) is dict:
        copy: Any = value.copy()
        for key, child in copy.items():
            if type(key) is not str or not key.isascii():
                return _UNSURE
            kind = type(child)
            if kind is str:
                if not child.isascii():
                    return _UNSURE
            elif kind is dict or kind is list:
                child = _plain_copy(child, depth + 1)
                if child is _UNSURE:
                    return _UNSURE
                copy[key] = child
            elif kind is int:
                if not -MAX_SAFE_INTEGER <= child <= MAX_SAFE_INTEGER:
                    return _UNSURE
            elif kind is not bool and child is not None:
                return _UNSURE
        return copy
    copy = list(value)
    # The dict loop's checks again, in line: no member costs a call, and one loop over a
    # dict's items or a list's indices (keys checked apart) made `event_from_json` 5% slower.
    for index, child in enumerate(copy):
        kind = type(child)
        if kind is str:
            if not child.isascii():
                return _UNSURE
        elif kind is dict or kind is list:
            child = _plain_copy(child, depth + 1)
            if child is _UNSURE:
                return _UNSURE
            copy[index] = child
        elif kind is int:
            if not -MAX_SAFE_INTEGER <= child <= MAX_SAFE_INTEGER:
                return _UNSURE
        elif kind is not bool and child is not None:
            return _UNSURE
    return copy


def _admitted_container(value: dict[str, Any] | list[Any]) -> Any:
    """`admit_json` of a plain container: depth first, in member order, one frame per open
    container.

    A frame is the copy being filled and how far: the next index of a list (copied
    whole when opened, so at its exact size, then patched) or the items iterator of
    a dict (filled member by member). Cycles are caught without a set of the open
    containers (see `_on_a_cycle`), so an open list costs three list slots and its copy.
    """
    path: list[Any] = []  # the keys from `value` down to the container being filled
    copies: list[Any] = []
    states: list[Any] = []
    marks: list[Any] = []  # the open containers at depths 0, 1, 2, 4, 8, ...
    container: Any = value
    copy: Any = None
    key: Any = None
    while True:
        # Open `container` (placed at `key` of `copy` unless it is the root).
        depth = len(copies)
        if marks and container is marks[-1]:
            raise _on_a_cycle(value, path)
        new: Any = {} if type(container) is dict else list(container)
        if depth:
            copy[key] = new
        else:
            root = new
        copies.append(new)
        states.append(iter(container.items()) if type(new) is dict else 0)
        if depth & (depth - 1) == 0:
            marks.append(container)
        # Fill the innermost copy until a member is a container to open, or all are done.
        while copies:
            copy, state = copies[-1], states[-1]
            ct: Any = None
            if type(state) is int:
                for key in range(state, len(copy)):
                    child = copy[key]
                    ct = type(child)
                    if ct is str:
                        if not child.isascii():
                            copy[key] = canonical_text(child)
                    elif ct is int:
                        if not -MAX_SAFE_INTEGER <= child <= MAX_SAFE_INTEGER:
                            _check_scalar(child, [*path, key])
                    elif ct in _CONTAINERS:
                        states[-1] = key + 1
                        break
                    elif ct is not bool and child is not None:
                        copy[key] = _check_scalar(child, [*path, key])
                    ct = None
            else:
                for member, child in state:
                    key = member
                    if type(key) is not str:
                        raise _reject(f"object key {summary(key)} is not a str", path)
                    if not key.isascii():
                        key = canonical_text(key)
                        if key in copy:  # keys are unique: only a joined pair can collide
                            raise _reject(
                                f"object key {summary(member)} equals another key once its "
                                "surrogate pair is joined",
                                path,
                            )
                    ct = type(child)
                    if ct is str:
                        copy[key] = child if child.isascii() else canonical_text(child)
                    elif (
                        (ct is int and -MAX_SAFE_INTEGER <= child <= MAX_SAFE_INTEGER)
                        or ct is bool
                        or child is None
                    ):
                        copy[key] = child
                    elif ct in _CONTAINERS:
                        break
                    else:
                        copy[key] = _check_scalar(child, [*path, member])
                    ct = None
            if ct is None:  # the copy is complete: close it
                depth = len(copies) - 1
                copies.pop()
                states.pop()
                if depth & (depth - 1) == 0:
                    marks.pop()
                if depth:
                    path.pop()
                continue
            if (ct is FrozenObject or ct is FrozenArray) and child._lossless:
                copy[key] = child._raw  # already admitted: shared
                continue
            container = child._raw if ct is FrozenObject or ct is FrozenArray else child
            path.append(key if type(copy) is list else member)
            break
        else:
            return root


def _on_a_cycle(value: Any, path: list[Any]) -> NotLosslessJson:
    """The error for a cycle found on `path`: at its first container that is also above it.

    A walk that keeps no set of the open containers finds a cycle late. It follows
    the repeating path until it opens the container open at the largest power-of-two
    depth above it (Brent's method), before the path is four times as deep as where
    it starts to repeat or as its period. The path from `value` is walked again here
    to name the first repeated container, as a walk that kept them all would have.
    """
    seen = {id(value)}
    node: Any = value
    for depth, key in enumerate(path):
        node = node[key]
        if type(node) is FrozenObject or type(node) is FrozenArray:
            node = node._raw
        if id(node) in seen:
            return _reject("a container contains itself (cycle)", path[: depth + 1])
        seen.add(id(node))
    raise AssertionError("the walk found no cycle on its path")


# -- thaw and strict equality -------------------------------------------------------------------


_THAWED: Final = frozenset({dict, list, tuple, FrozenObject, FrozenArray})
"""The member types `thaw` copies (any other value is kept as it is)."""


def thaw(value: Any) -> Any:
    """A plain, caller-owned deep copy of a JSON value (frozen or plain); iterative.

    A plain value that contains itself is not JSON: `NotLosslessJson`, not a loop.
    Walked as `admit_json` walks (one frame per open container, lists copied whole
    and patched, a cycle caught by Brent's method), so depth costs little beyond the copy.
    """
    t = type(value)
    if t is FrozenObject or t is FrozenArray:
        value = value._raw
        t = type(value)
    if t is not dict and t is not list and t is not tuple and not issubclass(t, Mapping):
        return value
    copies: list[Any] = []
    states: list[Any] = []
    marks: list[Any] = []  # the open containers at depths 0, 1, 2, 4, 8, ...
    container: Any = value
    copy: Any = None
    key: Any = None
    while True:
        # Open `container` (placed at `key` of `copy` unless it is the root).
        depth = len(copies)
        if marks and container is marks[-1]:
            raise NotLosslessJson("value: a container contains itself (cycle)")
        is_list = type(container) is list or type(container) is tuple
        new: Any = list(container) if is_list else {}
        if depth:
            copy[key] = new
        else:
            root = new
        copies.append(new)
        states.append(0 if is_list else iter(container.items()))
        if depth & (depth - 1) == 0:
            marks.append(container)
        # Fill the innermost copy until a member is a container to open, or all are done.
        while copies:
            copy, state = copies[-1], states[-1]
            child: Any = None
            found = False
            if type(state) is int:
                for key in range(state, len(copy)):
                    if type(copy[key]) in _THAWED:
                        states[-1] = key + 1
                        child, found = copy[key], True
                        break
            else:
                for key, child in state:
                    if type(child) in _THAWED:
                        found = True
                        break
                    copy[key] = child
            if not found:  # the copy is complete: close it
                depth = len(copies) - 1
                copies.pop()
                states.pop()
                if depth & (depth - 1) == 0:
                    marks.pop()
                continue
            ct = type(child)
            container = child._raw if ct is FrozenObject or ct is FrozenArray else child
            break
        else:
            return root


def json_equal(a: Any, b: Any) -> bool:
    r"""Structural JSON equality (docs/format/events.md §1.4): numbers by value, never a bool.

    Strings compare as the format's UTF-16 strings: a split surrogate pair equals
    the character it encodes, in values and in object keys.

    >>> json_equal({"a": 1.0}, {"a": 1}), json_equal([True], [1])
    (True, False)
    >>> json_equal({"\ud83d\ude42": "\ud83d\ude42"}, {"\U0001f642": "\U0001f642"})
    True
    """
    stack: list[tuple[Any, Any]] = [(a, b)]
    while stack:
        x, y = stack.pop()
        x, y = raw(x), raw(y)
        tx, ty = type(x), type(y)
        if tx is dict or issubclass(tx, Mapping):
            if not (ty is dict or issubclass(ty, Mapping)) or len(x) != len(y):
                return False
            for k, v in x.items():
                if k not in y:
                    break
                stack.append((v, y[k]))
            else:
                continue
            pairs = _members_by_joined_key(x, y)
            if pairs is None:
                return False
            stack.extend(pairs)
        elif tx is list or tx is tuple:
            if not (ty is list or ty is tuple) or len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif tx is bool or ty is bool:
            if tx is not ty or x != y:
                return False
        elif (tx is int or tx is float) and (ty is int or ty is float):
            if x != y:
                return False
        elif tx is not ty or (x != y and (tx is not str or canonical_text(x) != canonical_text(y))):
            return False
    return True


def _members_by_joined_key(
    x: Mapping[str, Any], y: Mapping[str, Any]
) -> list[tuple[Any, Any]] | None:
    """The value pairs of two objects matched by key with split pairs joined; None if unmatched.

    An object two of whose keys join to one has no JSON spelling (a duplicate key)
    and equals nothing but itself, which the identical-key path above handles.
    """
    joined_x = {canonical_text(k): v for k, v in x.items()}
    joined_y = {canonical_text(k): v for k, v in y.items()}
    if len(joined_x) != len(x) or len(joined_y) != len(y) or joined_x.keys() != joined_y.keys():
        return None
    return [(v, joined_y[k]) for k, v in joined_x.items()]
