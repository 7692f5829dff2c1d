"""Minimal counterexamples: shrink a failing log to a few events that still fail the same way.

A failure is named by its key: the check that failed and the problem's rule
id (`problem_rule`). A candidate log still fails when it loads, and its
verdict holds a problem or a finding with that key (a finding is what a
strict run fails). Shrinking first finds the shortest
failing prefix, then deletes events by delta debugging (ddmin) until no
single event can go: the result is 1-minimal. Deleting events renumbers the
rest (seqs must stay contiguous, admission R4) and remaps what cites a seq —
`sourceEventSeqs` (a citation of a deleted event is dropped) and the ends of
a surface `replace` (a candidate replacing from a deleted event is skipped).
Same idea as Hypothesis's shrinking, applied to logs found in the wild.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import attrs
import msgspec

from kernel.cli.sources import open_log
from kernel.corpus.check import check_bytes, problem_rule
from kernel.storage.jsonl import write_jsonl
from kernel.values.events import Event, Replace, SessionHeader

__all__ = (
    "FailureKey",
    "Minimized",
    "failure_keys",
    "still_fails",
    "renumbered",
    "shortest_failing_prefix",
    "ddmin",
    "minimize_events",
    "minimize_log",
)

FailureKey = tuple[str, str]
"""`(check, rule id)` of one problem."""

_NOT_REACHED: Final = frozenset({"read", "admission"})
"""Checks a candidate must get past: a log that does not load fails nothing we can shrink."""


@attrs.frozen
class Minimized:
    """A shrunk counterexample: the key it fails with, sizes, and the log's bytes (JSONL)."""

    key: FailureKey
    before: int
    after: int
    events: tuple[Event, ...]
    data: bytes
    checks: int


def _noted(detail: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    return (*detail["problems"], *detail.get("findings", ()))


def failure_keys(detail: Mapping[str, Any]) -> tuple[FailureKey, ...]:
    """The `(check, rule)` key of every problem, then every finding, of a `verify --json` entry."""
    return tuple((str(p["check"]), problem_rule(p)) for p in _noted(detail))


def renumbered(events: Sequence[Event], keep: Sequence[int]) -> tuple[Event, ...] | None:
    """The events at indexes `keep` (ascending) with seqs `0..n-1` and their citations remapped.

    None when a kept `replace` starts or ends at a deleted event (no such log exists).
    """
    new_seq = {events[i].seq: n for n, i in enumerate(keep)}
    out: list[Event] = []
    for n, i in enumerate(keep):
        event = events[i]
        op = event.surface_op
        if isinstance(op, Replace):
            if op.start not in new_seq or op.end not in new_seq:
                return None
            op = Replace(new_seq[op.start], new_seq[op.end])
        cited = event.source_event_seqs
        if cited is not None:
            cited = tuple(new_seq[s] for s in cited if s in new_seq)
        out.append(msgspec.structs.replace(event, seq=n, surface_op=op, source_event_seqs=cited))
    return tuple(out)


def still_fails(header: SessionHeader, events: Sequence[Event], key: FailureKey, now: int) -> bool:
    """Whether the log of `events` loads and fails with a problem of key `key`."""
    try:
        data = write_jsonl(header, events)
    except Exception:  # a candidate the writer refuses is no counterexample
        return False
    result = check_bytes(data, path="candidate", kind="jsonl", now=now)
    if result.check in _NOT_REACHED:
        return False
    return key in failure_keys(result.detail)


Test = Callable[[Sequence[int]], bool]


def shortest_failing_prefix(n: int, fails: Test, *, known: int | None = None) -> int:
    """The length of the shortest prefix `[0, k)` of `n` items that fails.

    `known` is a length already known to fail (default `n`). The search is a
    binary search below it, then a walk down while a shorter prefix still fails:
    exact when failing is monotone in the length, as it is for an invariant
    violation (the check is a prefix fold).
    """
    hi = n if known is None else known
    lo = 0  # the empty prefix is taken to pass
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fails(range(mid)):
            hi = mid
        else:
            lo = mid
    while hi > 1 and fails(range(hi - 1)):
        hi -= 1
    return hi


def ddmin(items: Sequence[int], fails: Test) -> tuple[int, ...]:
    """Zeller's ddmin: a 1-minimal failing subsequence of `items` (which must fail).

    Tries removing chunks at growing granularity; when no chunk of size one
    can go, removing any single item makes `fails` false.
    """
    current = tuple(items)
    granularity = 2
    while len(current) >= 2:
        size = -(-len(current) // granularity)
        chunks = [current[k : k + size] for k in range(0, len(current), size)]
        reduced = False
        for k, chunk in enumerate(chunks):
            if len(chunks) > 2 and fails(chunk):
                current, granularity, reduced = chunk, 2, True
                break
            rest = tuple(x for j, c in enumerate(chunks) if j != k for x in c)
            if fails(rest):
                current, granularity, reduced = rest, max(granularity - 1, 2), True
                break
        if reduced:
            continue
        if granularity >= len(current):
            break
        granularity = min(granularity * 2, len(current))
    if len(current) == 1 and fails(()):
        return ()
    return current


def minimize_events(
    header: SessionHeader,
    events: Sequence[Event],
    key: FailureKey,
    *,
    now: int,
    first_seq: int | None = None,
) -> Minimized:
    """Shrink `events` (a stored log failing with `key`) to a 1-minimal failing log.

    `first_seq`, when known, is where the failure is reported: the prefix
    through it is tried first.
    """
    cache: dict[tuple[int, ...], bool] = {}

    def fails(keep: Sequence[int]) -> bool:
        index = tuple(keep)
        if index not in cache:
            candidate = renumbered(events, index)
            cache[index] = candidate is not None and still_fails(header, candidate, key, now)
        return cache[index]

    n = len(events)
    if not fails(range(n)):
        raise ValueError(f"the log does not fail with {key[0]}/{key[1]}")
    known = n
    if first_seq is not None and 0 <= first_seq < n and fails(range(first_seq + 1)):
        known = first_seq + 1
    prefix = shortest_failing_prefix(n, fails, known=known)
    keep = ddmin(range(prefix), fails)
    shrunk = renumbered(events, keep)
    assert shrunk is not None  # ddmin only keeps candidates that exist
    return Minimized(key, n, len(shrunk), shrunk, write_jsonl(header, shrunk), len(cache))


def minimize_log(
    path: str,
    kind: str,
    *,
    session: str | None = None,
    now: int,
    key: FailureKey | None = None,
    max_decoded_bytes: int | None = None,
) -> Minimized | None:
    """Load one stored log and shrink it; None when it does not fail past loading.

    `key` defaults to the first problem found (else the first finding). Reads
    the log; writes nothing. `max_decoded_bytes` caps a Zstandard log's plaintext.
    """
    opened = open_log(path, kind, session=session, now=now, max_decoded_bytes=max_decoded_bytes)
    data = write_jsonl(opened.header, opened.stored)
    result = check_bytes(data, path=path, kind="jsonl", now=now)
    keys = failure_keys(result.detail)
    if result.check in _NOT_REACHED or not keys:
        return None
    target = key or keys[0]
    if target not in keys:
        return None
    seqs = [p.get("seq") for p in _noted(result.detail)]
    first = next(
        (s for s, k in zip(seqs, keys, strict=True) if k == target and isinstance(s, int)), None
    )
    return minimize_events(opened.header, opened.stored, target, now=now, first_seq=first)
