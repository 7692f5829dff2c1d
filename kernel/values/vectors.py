"""A persistent vector the cyclic collector reads in bounded time: a 32-way trie of tuples.

pyrsistent's C vector visits every element whenever the collector examines it, and a
collection of the young generation examines each vector made since the last one: a
log that appends one event to 100,000 spent most of the append there. Here each
append makes one tuple of at most 32 items, and a tuple of untracked items (events,
ints, strings) is untracked by the collector once it has seen it. `TupleVector` is
registered as a `pyrsistent.PVector`; the rarer edits delegate to pyrsistent's.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Iterator
from itertools import chain, islice
from typing import Any, Final, TypeVar, cast

import msgspec
from pyrsistent import PVector, pvector

__all__ = ("TupleVector", "vector")

T = TypeVar("T")

_BITS: Final = 5
_WIDTH: Final = 1 << _BITS
_MASK: Final = _WIDTH - 1


def vector(items: Iterable[T] = ()) -> PVector[T]:
    """A persistent vector of `items` whose appends stay cheap for the collector.

    >>> v = vector([1, 2]).append(3)
    >>> list(v), v[-1], v == [1, 2, 3]
    ([1, 2, 3], 3, True)
    """
    listed = items if type(items) is list else list(items)
    count = len(listed)
    if not count:
        return cast("PVector[T]", _EMPTY)
    offset = ((count - 1) >> _BITS) << _BITS  # the tail holds the last 1 to 32 items
    nodes: list[Any] = [tuple(listed[i : i + _WIDTH]) for i in range(0, offset, _WIDTH)]
    shift = _BITS
    while len(nodes) > _WIDTH:
        nodes = [tuple(nodes[i : i + _WIDTH]) for i in range(0, len(nodes), _WIDTH)]
        shift += _BITS
    return cast("PVector[T]", TupleVector(count, shift, tuple(nodes), tuple(listed[offset:])))


def _path(level: int, node: tuple[Any, ...]) -> tuple[Any, ...]:
    """`node` under `level // 5` new one-child parents."""
    while level:
        node = (node,)
        level -= _BITS
    return node


def _replaced(node: tuple[Any, ...], at: int, item: Any) -> tuple[Any, ...]:
    return (*node[:at], item, *node[at + 1 :])


def _set(node: tuple[Any, ...], level: int, index: int, item: Any) -> tuple[Any, ...]:
    """`node` (a trie `level` bits deep) with `item` at `index`, the path copied."""
    at = (index >> level) & _MASK
    return _replaced(node, at, item if not level else _set(node[at], level - _BITS, index, item))


def _into(node: tuple[Any, ...], level: int, index: int, leaf: tuple[Any, ...]) -> tuple[Any, ...]:
    """`node` with `leaf` added as the leaf that holds `index`, the path copied."""
    if level == _BITS:
        return (*node, leaf)
    at = (index >> level) & _MASK
    if at < len(node):
        return _replaced(node, at, _into(node[at], level - _BITS, index, leaf))
    return (*node, _path(level - _BITS, leaf))


class TupleVector(msgspec.Struct, frozen=True, gc=False, eq=False):
    """A persistent vector: a trie of tuples of 32 (`_root`, `_shift` bits deep) and a tail.

    The first `len - len(_tail)` items are in the trie, the last 1 to 32 in the tail.
    Appends, reads and `set` are the trie's; other edits (`delete`, `transform`,
    `evolver`...) return pyrsistent's own vector. Equal to a list, tuple or vector of
    equal items, and hashed as pyrsistent's vector of the same items (in O(n)). A
    msgspec struct the collector does not track: the cheapest record to make per append.
    """

    _count: int
    _shift: int
    _root: tuple[Any, ...]
    _tail: tuple[Any, ...]

    # -- reading -----------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._count

    def _leaf(self, index: int) -> tuple[Any, ...]:
        """The tuple of 32 (or the tail) that holds `index` (0 <= index < len)."""
        if index >= self._count - len(self._tail):
            return self._tail
        node = self._root
        level = self._shift
        while level:
            node = node[(index >> level) & _MASK]
            level -= _BITS
        return node

    def __getitem__(self, index: Any) -> Any:
        if type(index) is not int:
            if isinstance(index, slice):
                return vector(self.tolist()[index])
            index = operator.index(index)
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError("vector index out of range")
        return self._leaf(index)[index & _MASK]

    def __iter__(self) -> Iterator[Any]:
        nodes: Iterator[Any] = iter(self._root)
        for _ in range(self._shift // _BITS):
            nodes = chain.from_iterable(nodes)
        return chain(nodes, self._tail)

    def __reversed__(self) -> Iterator[Any]:
        return iter(self.tolist()[::-1])

    def __contains__(self, item: Any) -> bool:
        return any(x is item or x == item for x in self)

    def tolist(self) -> list[Any]:
        """The items as a new list."""
        return list(self)

    def index(self, value: Any, *args: Any) -> int:
        return self.tolist().index(value, *args)

    def count(self, value: Any) -> int:
        return self.tolist().count(value)

    # -- comparing ---------------------------------------------------------------------------

    def _compare(self, other: Any, compare: Callable[[Any, Any], bool]) -> Any:
        if isinstance(other, (TupleVector, PVector, list, tuple)):
            return compare(self.tolist(), list(other))
        return NotImplemented

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if isinstance(other, (TupleVector, PVector, list, tuple)):
            return self._count == len(other) and all(
                a is b or a == b for a, b in zip(self, other, strict=True)
            )
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __lt__(self, other: Any) -> Any:
        return self._compare(other, lambda a, b: a < b)

    def __le__(self, other: Any) -> Any:
        return self._compare(other, lambda a, b: a <= b)

    def __gt__(self, other: Any) -> Any:
        return self._compare(other, lambda a, b: a > b)

    def __ge__(self, other: Any) -> Any:
        return self._compare(other, lambda a, b: a >= b)

    def __hash__(self) -> int:
        return hash(pvector(self))  # what pyrsistent's vector of the same items hashes to

    def __repr__(self) -> str:
        return f"pvector({self.tolist()!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (vector, (self.tolist(),))

    # -- persistent edits --------------------------------------------------------------------

    def append(self, item: Any) -> TupleVector:
        tail = self._tail
        if len(tail) < _WIDTH:
            return TupleVector(self._count + 1, self._shift, self._root, (*tail, item))
        root, shift = self._pushed(tail)
        return TupleVector(self._count + 1, shift, root, (item,))

    def _pushed(self, tail: tuple[Any, ...]) -> tuple[tuple[Any, ...], int]:
        """The root (and its shift) with the full `tail` added as the next leaf."""
        shift = self._shift
        leaves = self._count >> _BITS  # the trie's leaves once `tail` is one of them
        if leaves > 1 << shift:  # the root is full: a new root one level up
            return (self._root, _path(shift, tail)), shift + _BITS
        return _into(self._root, shift, self._count - 1, tail), shift

    def extend(self, items: Iterable[Any]) -> TupleVector:
        added = items if type(items) is list else list(items)
        if len(added) > self._count:  # building anew is cheaper
            return cast(TupleVector, vector(self.tolist() + added))
        grown = self
        at, end = 0, len(added)
        while at < end:  # a leaf at a time: fill the tail, or push it and start the next
            tail = grown._tail
            if len(tail) < _WIDTH:
                part = added[at : at + _WIDTH - len(tail)]
                grown = TupleVector(
                    grown._count + len(part), grown._shift, grown._root, (*tail, *part)
                )
            else:
                part = added[at : at + _WIDTH]
                root, shift = grown._pushed(tail)
                grown = TupleVector(grown._count + len(part), shift, root, tuple(part))
            at += len(part)
        return grown

    def __add__(self, other: Iterable[Any]) -> TupleVector:
        return self.extend(other)

    def __mul__(self, times: int) -> TupleVector:
        return cast(TupleVector, vector(self.tolist() * times))

    __rmul__ = __mul__

    def set(self, index: int, item: Any) -> TupleVector:
        count = self._count
        if index < 0:
            index += count
        if index == count:
            return self.append(item)
        if not 0 <= index < count:
            raise IndexError("vector index out of range")
        offset = count - len(self._tail)
        if index >= offset:
            return TupleVector(
                count, self._shift, self._root, _replaced(self._tail, index - offset, item)
            )
        root = _set(self._root, self._shift, index, item)
        return TupleVector(count, self._shift, root, self._tail)

    def mset(self, *pairs: Any) -> TupleVector:
        if len(pairs) % 2:
            raise TypeError("mset expected an even number of arguments")
        changed = self
        for index, item in zip(islice(pairs, 0, None, 2), islice(pairs, 1, None, 2), strict=True):
            changed = changed.set(index, item)
        return changed

    def delete(self, index: int, stop: int | None = None) -> PVector[Any]:
        vector_ = pvector(self)
        return vector_.delete(index) if stop is None else vector_.delete(index, stop)

    def remove(self, value: Any) -> PVector[Any]:
        return pvector(self).remove(value)

    def transform(self, *transformations: Any) -> PVector[Any]:
        return pvector(self).transform(*transformations)

    def evolver(self) -> Any:
        return pvector(self).evolver()


_EMPTY: Final = TupleVector(0, _BITS, (), ())
PVector.register(TupleVector)
