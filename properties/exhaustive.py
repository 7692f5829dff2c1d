"""Exhaustive crash checking: every event cut and every byte cut of a bounded family of logs.

No Hypothesis: `family(size, shape=...)` enumerates small model-loop logs
deterministically (every combination of a few step shapes, plus compactions,
rewrites and re-seeds between turns), and `check_log` runs the crash laws on every prefix
`L[:k]` (P30-P35) and loads every byte prefix of `write_jsonl(h, L)` and of
its Zstandard twin (P37). A failure raises the law's `LawViolation`.

>>> from itertools import islice
>>> report = run(islice(family("tiny"), 1))  # the first log; run(family("tiny")) checks them all
>>> report.logs == 1 and report.byte_cuts > report.prefixes > 0
True
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any, Final

import attrs

from kernel.errors import KernelError
from kernel.folds.closers import interrupted_turn_closers
from kernel.storage.jsonl import encode_records, load_jsonl, scan_jsonl, write_jsonl
from kernel.storage.zstd import frame_end, load_jsonl_zstd, write_jsonl_zstd
from kernel.values.events import Event
from kernel.wire.codec import event_to_json
from properties._loop import (
    LOOP_SHAPES,
    CallSpec,
    CompactAction,
    ExtensionAction,
    LoopLog,
    LoopScript,
    LoopShape,
    ReplySpec,
    ReseedAction,
    StepSpec,
    TurnAction,
    UserAction,
    interpret,
)
from properties._report import check, violated
from properties.laws._repair import (
    law_closer_emptiness,
    law_closers_deterministic,
    law_crash_prefix_repairs,
    law_repair_append_only,
    law_repair_idempotent,
    law_synthetic_results,
)

__all__ = ("SIZES", "ExhaustiveReport", "family", "check_log", "run")

_HEADER: Final = {"version": 0, "id": "exhaustive", "createdAt": 1, "cwd": "/x"}

SIZES: Final = ("tiny", "small", "full")
"""Family sizes: `tiny` (doctest), `small` (the ci run), `full` (the slow run)."""


def _call(i: int, *, error: bool = False) -> CallSpec:
    return CallSpec(
        name="ls", arguments='{"p":' + str(i) + "}", output=f"out{i}", is_error=error, meta=i == 1
    )


def _step_shapes() -> dict[str, StepSpec]:
    """The step shapes the family combines, by name."""

    def step(reply: ReplySpec, **kw: Any) -> StepSpec:
        base: dict[str, Any] = {
            "user_input": None,
            "header": 0,
            "declared": False,
            "retry_header": None,
            "window": True,
            "reply": reply,
            "schedule": (),
            "injections": (),
            "todo": False,
        }
        base.update(kw)
        return StepSpec(**base)

    return {
        "text": step(
            ReplySpec("text", "hello", None, (), stream=1, pieces=3, usage=True),
            user_input="hi",
            # In DSH order a compaction after the step's step/end (the loose order ignores it).
            compact=CompactAction(start=0, end=9, extra=None, bracket=False),
        ),
        "one call": step(ReplySpec("text", "", None, (_call(0),), stream=1, pieces=4, usage=False)),
        "two calls": step(
            ReplySpec(
                "text",
                "ok",
                "think",
                (_call(0), _call(1, error=True)),
                stream=2,
                pieces=1,
                usage=False,
            ),
            schedule=(0, 0, 1, 0),
            injections=(1,),
            header=2,
            declared=True,
        ),
        "empty": step(
            ReplySpec("empty", "", None, (), stream=0, pieces=1, usage=True), retry_header=1
        ),
        "interrupted": step(
            ReplySpec("interrupted", "part", None, (), stream=1, pieces=2, usage=False),
            todo=True,
            compact=CompactAction(start=0, end=0, extra=None, bracket=False, failed=True),
        ),
    }


def _turns(shapes: list[StepSpec], max_steps: int) -> Iterator[TurnAction]:
    for n in range(max_steps + 1):
        for combo in itertools.product(shapes, repeat=n):
            yield TurnAction(steps=tuple(combo), reason=0, rewrite=None, rewrite_text="")


def _between() -> list[tuple[Any, ...]]:
    return [
        (),
        (UserAction("between"),),
        (CompactAction(start=0, end=0, extra=None, bracket=True),),
        (CompactAction(start=0, end=5, extra=0, bracket=False),),
        (ReseedAction(),),
        (ExtensionAction(kind=0, unknown=True, ignorable=True, payload={"a": 1}),),
    ]


def family(size: str = "small", *, shape: LoopShape = "dsh") -> Iterator[LoopLog]:
    """The bounded family of logs, deterministically, written in the loop order `shape` names.

    Args:
        size: one of `SIZES`.
        shape: one of `properties.strategies.LOOP_SHAPES`.

    Raises:
        ValueError: for an unknown `size` or `shape`, when called (not when iterated).
    """
    if size not in SIZES:
        raise ValueError(f"size={size!r} must be one of {', '.join(map(repr, SIZES))}")
    if shape not in LOOP_SHAPES:
        raise ValueError(f"shape={shape!r} must be one of {', '.join(map(repr, LOOP_SHAPES))}")
    return _family(size, shape)


def _family(size: str, shape: LoopShape) -> Iterator[LoopLog]:
    shapes = list(_step_shapes().values())
    if size == "tiny":
        firsts = [
            TurnAction(steps=(spec,), reason=0, rewrite=None, rewrite_text="") for spec in shapes
        ]
        seconds = [TurnAction(steps=(shapes[1],), reason=1, rewrite=0, rewrite_text="x")]
        betweens = [_between()[2], _between()[4]]
    elif size == "small":
        firsts = list(_turns(shapes, 1))
        seconds = [TurnAction(steps=(shapes[1],), reason=1, rewrite=0, rewrite_text="x")]
        betweens = _between()
    else:
        firsts = list(_turns(shapes, 2))
        seconds = [
            TurnAction(steps=(shapes[1],), reason=1, rewrite=0, rewrite_text="x"),
            TurnAction(steps=(shapes[2], shapes[4]), reason=3, rewrite=None, rewrite_text=""),
        ]
        betweens = _between()
    seen: set[str] = set()
    for first in firsts:
        yield interpret(LoopScript(start_time=1_000, ticks=(1,), actions=(first,), shape=shape))
        if size == "tiny" and first.steps[0] is not shapes[2]:
            continue
        for between, second in itertools.product(betweens, seconds):
            script = LoopScript(
                start_time=1_000, ticks=(1, 2), actions=(first, *between, second), shape=shape
            )
            log = interpret(script)
            key = repr([e["type"] for e in log.events])
            if size != "full" and key in seen:
                continue
            seen.add(key)
            yield log


@attrs.frozen
class ExhaustiveReport:
    """How much was checked."""

    logs: int
    prefixes: int
    byte_cuts: int


def _members(line: bytes) -> int:
    import json

    value = json.loads(line)
    data = value.get("data")
    if value.get("type") in ("text-chunks", "reasoning-chunks"):
        return len(data["texts"])
    if value.get("type") == "tool-call-chunks":
        return len(data["args"])
    return 1


def _json(events: Iterable[Event]) -> list[dict[str, Any]]:
    return [event_to_json(e) for e in events]


def _plain_cuts(events: tuple[Event, ...]) -> int:
    """P37 at every byte offset after the header line of the plain JSONL encoding."""
    data = write_jsonl(_HEADER, events)
    header_end = data.index(b"\n") + 1
    boundaries = [header_end]  # byte offset just past each complete record line
    kept = [0]  # events held by the complete lines up to that boundary
    for record in data[header_end:].split(b"\n")[:-1]:
        boundaries.append(boundaries[-1] + len(record) + 1)
        kept.append(kept[-1] + _members(record))
    expected: dict[int, tuple[tuple[Event, ...], tuple[Event, ...]]] = {}
    for n in set(kept):
        closers = interrupted_turn_closers(events[:n])
        expected[n] = (tuple(events[:n]), closers)
        repaired = data[: boundaries[kept.index(n)]] + encode_records(closers)
        scan = scan_jsonl(repaired)
        check(
            not scan.torn and _json(scan.events) == _json((*events[:n], *closers)),
            "P37 truncation tolerance (exhaustive)",
            f"the file repaired after {n} events reads back differently",
            log=_json(events),
        )
    line = 0
    for cut in range(header_end, len(data) + 1):
        while line + 1 < len(boundaries) and boundaries[line + 1] <= cut:
            line += 1
        try:
            loaded = load_jsonl(data[:cut], now=0)
        except KernelError as exc:
            violated(
                f"P37 truncation tolerance (exhaustive, cut at byte {cut})",
                f"load failed: {exc!r}",
                log=_json(events),
            )
        n = kept[line]
        kept_events = loaded.events[: len(loaded.events) - len(loaded.closers)]
        if not (
            (tuple(kept_events), tuple(loaded.closers)) == expected[n]
            and loaded.committed_bytes == boundaries[line]
            and loaded.torn == (cut != boundaries[line])
        ):
            violated(
                f"P37 truncation tolerance (exhaustive, cut at byte {cut} of {len(data)})",
                f"expected the {n} events of the complete lines plus their closers, committed "
                f"at {boundaries[line]}; got {len(kept_events)} events, committed "
                f"{loaded.committed_bytes}",
                log=_json(events),
                loaded=_json(loaded.events),
            )
    return len(data) + 1 - header_end


def _zstd_cuts(events: tuple[Event, ...]) -> int:
    """P37 (Zstandard) at every byte offset at or after the end of the header frame."""
    data = write_jsonl_zstd(_HEADER, events)
    header_end = frame_end(data, 0)
    assert header_end is not None
    for cut in range(header_end, len(data) + 1):
        law = f"P37 Zstandard truncation tolerance (exhaustive, cut at byte {cut} of {len(data)})"
        try:
            loaded = load_jsonl_zstd(data[:cut], now=0)
        except KernelError as exc:
            violated(law, f"load failed: {exc!r}", log=_json(events))
        n = len(loaded.events) - len(loaded.closers)
        check(
            tuple(loaded.events[:n]) == tuple(events[:n])
            and tuple(loaded.closers) == interrupted_turn_closers(events[:n]),
            law,
            "the loaded events are not a stored prefix plus its closers",
            log=_json(events),
        )
    return len(data) + 1 - header_end


def check_log(log: LoopLog, *, zstd: bool = True) -> tuple[int, int]:
    """Run the crash laws on every event cut and every byte cut; returns (prefixes, byte cuts)."""
    events = log.kernel_events()
    for k in range(len(events) + 1):
        prefix = events[:k]
        law_crash_prefix_repairs(prefix)
        law_repair_idempotent(prefix)
        law_repair_append_only(prefix)
        law_closer_emptiness(prefix)
        law_synthetic_results(prefix)
        law_closers_deterministic(prefix)
    cuts = _plain_cuts(events)
    if zstd:
        cuts += _zstd_cuts(events)
    return len(events) + 1, cuts


def run(logs: Iterable[LoopLog], *, zstd: bool = True) -> ExhaustiveReport:
    """Check every log of a family; raises the first `LawViolation`."""
    count = prefixes = cuts = 0
    for log in logs:
        p, c = check_log(log, zstd=zstd)
        count += 1
        prefixes += p
        cuts += c
    return ExhaustiveReport(count, prefixes, cuts)
