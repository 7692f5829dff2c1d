"""Laws on seeds, end-seed markers and forks (docs/format/properties.md §2, §3, §10: P3, P4, P12,
P44, P45)."""

from __future__ import annotations

from typing import Any

from kernel.errors import ForkError, KernelError
from kernel.folds.seeds import fork_prefix, last_end_seed
from kernel.log import SessionLog
from kernel.wire.codec import event_to_json
from properties._report import check, violated
from properties.laws._common import append_all, as_events, as_wire, messages_plain, same_json
from properties.laws._implementation import KERNEL, Implementation

__all__ = (
    "law_replay_from_seed",
    "law_reseed_idempotent",
    "law_seed_equals_append",
    "law_end_seed_position",
    "law_fork_prefix",
)


def _json(events: Any) -> list[dict[str, Any]]:
    return [event_to_json(e) for e in events]


def law_replay_from_seed(
    log: Any, now: int = 1_770_000_000_000, *, implementation: Implementation = KERNEL
) -> None:
    """P3: S2 = seed(S1.log): S1's log is a prefix; one marker is added unless S1 already ended
    in one; derived messages are equal; `first_live_seq == len(S1.log)`."""
    law = "P3 replay from seed"
    wire = as_wire(log)
    sessions = append_all(wire)
    s1 = sessions[-1] if sessions else SessionLog.empty()
    s2 = SessionLog.seed(s1.events, now=now)
    n = len(s1.events)
    check(
        _json(s2.events[:n]) == _json(s1.events), law, "S1's log is not a prefix of S2's", log=wire
    )
    ends_marked = n > 0 and s1.events[-1].type == "session/end-seed"
    expected_len = n if ends_marked else n + 1
    check(
        len(s2.events) == expected_len,
        law,
        f"S2 has {len(s2.events)} events, expected {expected_len}",
        log=_json(s2.events),
    )
    if not ends_marked:
        marker = event_to_json(s2.events[-1])
        check(
            marker == {"type": "session/end-seed", "seq": n, "time": now, "data": {}},
            law,
            "the added marker is not {type: session/end-seed, seq: len, time: now, data: {}}",
            marker=marker,
        )
    check(
        same_json(
            list(implementation.derive_messages(s2.events)),
            list(implementation.derive_messages(s1.events)),
        )
        and same_json(list(s2.messages), list(s1.messages)),
        law,
        "derived messages differ after replay",
        log=wire,
    )
    check(
        s2.first_live_seq == n,
        law,
        f"first_live_seq is {s2.first_live_seq}, expected {n}",
        log=wire,
    )


def law_reseed_idempotent(log: Any, now: int = 1, later: int = 2) -> None:
    """P4: `seed(seed(L).log).log == seed(L).log` (an untouched session does not grow)."""
    law = "P4 re-seeding is idempotent"
    once = SessionLog.seed(as_wire(log), now=now)
    twice = SessionLog.seed(once.events, now=later)
    check(
        _json(twice.events) == _json(once.events),
        law,
        "re-seeding a seeded log changed it",
        log=_json(twice.events),
    )


def law_seed_equals_append(log: Any, now: int = 1) -> None:
    """P12: seeding with L gives the same surface, generation, messages and header fold as
    appending L's events one by one."""
    law = "P12 seed equals append"
    wire = as_wire(log)
    seeded = SessionLog.seed(wire, now=now)
    sessions = append_all(wire)
    appended = sessions[-1] if sessions else SessionLog.empty()
    check(
        _json(seeded.events[: len(wire)]) == _json(appended.events),
        law,
        "seeded and appended events differ",
        log=wire,
    )
    check(
        list(seeded.surface.nodes) == list(appended.surface.nodes)
        and seeded.surface.replace_generation == appended.surface.replace_generation,
        law,
        "surface state differs between seed and appends",
        log=wire,
        seeded=list(seeded.surface.nodes),
        appended=list(appended.surface.nodes),
    )
    check(
        same_json(list(seeded.messages), list(appended.messages)),
        law,
        "derived messages differ between seed and appends",
        log=wire,
    )
    check(
        same_json(seeded.request_header, appended.request_header),
        law,
        "request header fold differs between seed and appends",
        log=wire,
    )


def law_end_seed_position(log: Any, now: int = 1) -> None:
    """P44: after seeding with S, `last_end_seed == len(S)`, or `len(S) - 1` when S ended in
    a marker."""
    law = "P44 end-seed position"
    wire = as_wire(log)
    seeded = SessionLog.seed(wire, now=now)
    ends_marked = bool(wire) and wire[-1]["type"] == "session/end-seed"
    expected = len(wire) - 1 if ends_marked else len(wire)
    got = last_end_seed(seeded.events)
    check(got == expected, law, f"last_end_seed is {got}, expected {expected}", log=wire)


def _inside_open_turn(wire: list[dict[str, Any]], boundary: int) -> bool:
    for e in reversed(wire[: boundary + 1]):
        if e["type"] == "turn/end":
            return False
        if e["type"] == "turn/start":
            return True
    return False


def law_fork_prefix(log: Any, now: int = 1, *, implementation: Implementation = KERNEL) -> None:
    """P45: at every boundary outside an open turn `fork_prefix(L, b) == L[:b+1]` and the child
    derives the same messages; inside an open turn it raises `ForkError(OPEN_TURN)`."""
    law = "P45 fork prefix"
    wire = as_wire(log)
    events = as_events(log)
    for b in range(len(events)):
        if _inside_open_turn(wire, b):
            try:
                fork_prefix(events, b)
            except ForkError as exc:
                check(
                    exc.code == ForkError.OPEN_TURN, law, f"boundary {b}: code {exc.code}", log=wire
                )
                continue
            except KernelError as exc:
                violated(law, f"boundary {b} inside an open turn raised {exc!r}", log=wire)
            violated(law, f"boundary {b} inside an open turn was accepted", log=wire)
        prefix = fork_prefix(events, b)
        check(
            _json(prefix) == wire[: b + 1],
            law,
            f"fork_prefix(L, {b}) is not L[:{b + 1}]",
            log=wire,
        )
        child = SessionLog.seed(prefix, now=now)
        parent = list(implementation.derive_messages(events[: b + 1]))
        if not same_json(list(child.messages), parent):
            violated(
                law,
                f"the child forked at {b} derives different messages",
                log=wire,
                child=messages_plain(child.messages),
                parent=messages_plain(parent),
            )
    if events:
        last = len(events) - 1
        if not _inside_open_turn(wire, last):
            check(
                _json(fork_prefix(events)) == wire,
                law,
                "fork_prefix(L) without a boundary is not the whole log",
                log=wire,
            )
    else:
        check(fork_prefix(events) == (), law, "fork_prefix([]) is not empty")
