"""`kernel.values.vectors`: the tuple trie behaves as pyrsistent's vector, and the collector
does not walk it."""

from __future__ import annotations

import gc
import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyrsistent import PVector, pvector

from kernel import APPEND, SessionLog
from kernel.values.vectors import TupleVector, vector

# Sizes around the trie's boundaries: a full tail (32), a full root of leaves (32 * 33),
# a root one level deeper (32 * 32 * 33).
BOUNDARIES = (0, 1, 31, 32, 33, 64, 1055, 1056, 1057, 1088, 33791, 33792, 33793, 33824)

OPS = st.one_of(
    st.tuples(st.just("append"), st.integers()),
    st.tuples(st.just("set"), st.integers(-40, 1100), st.integers()),
    st.tuples(st.just("extend"), st.lists(st.integers(), max_size=80)),
)


def apply(v: Any, op: tuple[Any, ...]) -> Any:
    kind = op[0]
    if kind == "append":
        return v.append(op[1])
    if kind == "extend":
        return v.extend(op[1])
    return v.set(op[1], op[2])


def same(ours: Any, theirs: PVector[Any]) -> None:
    """Every read of `ours` answers as pyrsistent's vector `theirs` does."""
    items = theirs.tolist()
    assert type(ours) is TupleVector
    assert len(ours) == len(theirs) and list(ours) == items and ours.tolist() == items
    assert list(reversed(ours)) == items[::-1]
    assert [ours[i] for i in range(-len(items), len(items))] == items + items
    assert ours == theirs and theirs == ours and ours == items and ours == tuple(items)
    assert (ours != theirs) is False and hash(ours) == hash(theirs)
    assert repr(ours) == repr(theirs)
    assert ours[1:-1:2] == items[1:-1:2] and ours[:] == items


@given(st.lists(st.integers(), max_size=200), st.lists(OPS, max_size=60))
def test_a_vector_answers_as_pyrsistents_after_any_edits(items: list[int], ops: list[Any]) -> None:
    ours: Any = vector(items)
    theirs: Any = pvector(items)
    same(ours, theirs)
    for op in ops:
        try:
            expected = apply(theirs, op)
        except IndexError:
            with pytest.raises(IndexError):
                apply(ours, op)
            continue
        ours, theirs = apply(ours, op), expected
        same(ours, theirs)


@pytest.mark.parametrize("size", BOUNDARIES)
def test_extending_across_the_trie_boundaries_gives_the_items_in_order(size: int) -> None:
    for step in (1, 7, 32, 33, 100):
        grown: Any = vector()
        for start in range(0, size, step):
            grown = grown.extend(range(start, min(size, start + step)))
        assert len(grown) == size and list(grown) == list(range(size))
        assert [grown[i] for i in range(0, size, 97)] == list(range(0, size, 97))
        assert list(grown.append("x")) == [*range(size), "x"]


@pytest.mark.parametrize("size", BOUNDARIES)
def test_a_vector_built_whole_equals_one_built_by_appends(size: int) -> None:
    appended: Any = vector()
    for i in range(size):
        appended = appended.append(i)
    whole = vector(range(size))
    assert list(appended) == list(whole) == list(range(size))
    for v in (appended, whole):
        grown = v.append("x").set(size // 2, "y") if size else v.append("x")
        expected = [*range(size), "x"]
        if size:
            expected[size // 2] = "y"
        assert list(grown) == expected and [grown[i] for i in range(size + 1)] == expected


def test_reads_and_edits_outside_the_vector_fail_as_a_sequence_does() -> None:
    v = vector([1, 2, 3])
    for index in (3, -4):
        with pytest.raises(IndexError):
            v[index]
        with pytest.raises(IndexError):
            v.set(index + (1 if index > 0 else 0), 0)
    with pytest.raises(TypeError):
        v["0"]  # type: ignore[call-overload]
    assert v.index(2) == 1 and v.count(3) == 1 and 2 in v and 4 not in v
    assert v < vector([1, 2, 4]) and v <= [1, 2, 3] and v > (1, 2) and v >= pvector([1, 2, 3])
    assert v.__add__([4]) == [1, 2, 3, 4] and v * 2 == [1, 2, 3, 1, 2, 3]
    assert v.mset(0, 9, 2, 8) == [9, 2, 8]
    assert v.delete(0) == [2, 3] and v.remove(2) == [1, 3] and v == [1, 2, 3]
    evolver = v.evolver()
    evolver[0] = 7
    assert evolver.persistent() == [7, 2, 3] and v == [1, 2, 3]


def test_a_vector_is_a_pvector_and_pickles_as_itself() -> None:
    v = vector(range(100))
    assert isinstance(v, PVector)
    back = pickle.loads(pickle.dumps(v))
    assert type(back) is TupleVector and back == v and hash(back) == hash(v)


def test_the_collector_does_not_track_a_vector_or_its_nodes() -> None:
    v = vector(range(5000)).append(5000)
    # A collection untracks a tuple whose items are untracked when it examines it; it may
    # examine a parent before its children, so one level of the trie may wait for the next.
    for _ in range(4):
        gc.collect()
    assert not gc.is_tracked(v)
    nodes: list[Any] = [v._root, v._tail]
    while nodes:
        node = nodes.pop()
        assert not gc.is_tracked(node)
        nodes.extend(child for child in node if type(child) is tuple)


def test_a_log_keeps_its_events_surface_and_history_in_untracked_vectors() -> None:
    """What an append makes for the collector stays bounded: no vector it must walk."""
    user = {"id": "u", "role": "user", "content": [], "source": {"kind": "user"}}
    log = SessionLog.empty()
    for time in range(100):
        log = log.append("user/message", user, time=time, surface_op=APPEND)
    log.messages  # noqa: B018 - builds the dense history
    grown = log.append("user/message", user, time=100, surface_op=APPEND)
    vectors = (
        grown.events,
        grown.surface.slots,
        grown.surface.slot_of,
        grown.surface.replacements,
        grown.surface.nodes,
        grown.messages,
    )
    assert all(type(v) is TupleVector and not gc.is_tracked(v) for v in vectors)
