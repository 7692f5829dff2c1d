"""Laws on admission (docs/format/properties.md §3, §4: P11, P12 rejections, P13, P18)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernel.errors import KernelError
from kernel.log import SessionLog
from kernel.wire.codec import event_to_json
from properties._mutations import REWRITE_FIELDS, LegacyInsertion, MutationCase, RewriteCase
from properties._report import check, format_value, violated
from properties.laws._common import append_wire, error_named, same_json

__all__ = (
    "law_rejection_is_atomic",
    "law_seed_rejects_like_append",
    "law_legacy_refused",
    "law_rewrite_rule",
    "state_of",
)


def state_of(log: SessionLog) -> tuple[Any, ...]:
    """Everything R13 says a rejection must leave unchanged, as comparable plain values."""
    return (
        [event_to_json(e) for e in log.events],
        list(log.surface.nodes),
        log.surface.replace_generation,
        [format_value(m, limit=10**9) for m in log.messages],
        format_value(log.request_header, limit=10**9),
    )


def _raised(action: Callable[[], Any]) -> BaseException | None:
    try:
        action()
    except Exception as exc:
        return exc
    return None


def law_rejection_is_atomic(case: MutationCase) -> None:
    """P11: a candidate admission rejects raises the error of the rule it breaks and changes
    nothing; the next valid append behaves as if the rejected one never happened."""
    m = case.mutation
    law = f"P11 atomicity [{m.label}]"
    prefix = list(case.prefix)
    log = SessionLog.restore(prefix)
    before = state_of(log)
    exc = _raised(lambda: append_wire(log, m.event))
    if exc is None:
        violated(
            law, f"append accepted a candidate breaking {m.label}", log=prefix, candidate=m.event
        )
    check(
        isinstance(exc, KernelError) and error_named(exc, m.error),
        law,
        f"append raised {type(exc).__name__}: {exc}; expected {m.error}",
        log=prefix,
        candidate=m.event,
    )
    check(state_of(log) == before, law, "the rejected append changed the log or a fold", log=prefix)
    if case.valid_next is not None:
        after_reject = append_wire(log, case.valid_next)
        fresh = append_wire(SessionLog.restore(prefix), case.valid_next)
        check(
            state_of(after_reject) == state_of(fresh),
            law,
            "the next valid append differs from one on a log that never saw the rejection",
            log=[*prefix, case.valid_next],
        )


def law_seed_rejects_like_append(case: MutationCase) -> None:
    """P12: a seed is rejected iff the append of some prefix event is, with the same category
    and the seed index of the offending event."""
    m = case.mutation
    law = f"P12 seed rejects like append [{m.label}]"
    prefix = list(case.prefix)
    seed_exc = _raised(lambda: SessionLog.seed([*prefix, m.event], now=1))
    append_exc = _raised(lambda: append_wire(SessionLog.restore(prefix), m.event))
    for name, exc in (("seed", seed_exc), ("append", append_exc)):
        check(
            isinstance(exc, KernelError) and error_named(exc, m.error),
            law,
            f"{name} raised {type(exc).__name__}: {exc}; expected {m.error}",
            log=prefix,
            candidate=m.event,
        )
    assert isinstance(seed_exc, KernelError)
    check(
        seed_exc.index == len(prefix),
        law,
        f"seed error index is {seed_exc.index}, expected {len(prefix)}",
        log=prefix,
    )


def law_legacy_refused(case: LegacyInsertion) -> None:
    """P13 (seed, append): a legacy event anywhere makes seed and append fail with
    `LegacyFormat`."""
    law = f"P13 legacy refusal [{case.label} at {case.position}]"
    events = list(case.events)
    exc = _raised(lambda: SessionLog.seed(events, now=1))
    check(
        isinstance(exc, KernelError) and error_named(exc, "LegacyFormat"),
        law,
        f"seed raised {exc!r}, expected LegacyFormat",
        log=events,
    )
    log = SessionLog.empty()
    for i, event in enumerate(events):
        if i == case.position:
            exc = _raised(lambda log=log, event=event: append_wire(log, event))  # type: ignore[misc]
            check(
                isinstance(exc, KernelError) and error_named(exc, "LegacyFormat"),
                law,
                f"append raised {exc!r}, expected LegacyFormat",
                log=events,
            )
            break
        log = append_wire(log, event)


def law_rewrite_rule(case: RewriteCase) -> None:
    """P18: a rewrite of one tool-result node changing only the nested content is accepted;
    changing any other field (or adding a key) is rejected with `ToolResultRewriteError`."""
    law = f"P18 rewrite rule [{case.change or 'content only'}]"
    prefix = list(case.prefix)
    event = case.event()
    builders: tuple[tuple[str, Callable[[], SessionLog]], ...] = (
        ("append", lambda: append_wire(SessionLog.restore(prefix), event)),
        ("seed", lambda: SessionLog.seed([*prefix, event], now=1)),
    )
    for path, build in builders:
        try:
            log = build()
        except KernelError as exc:
            if case.change is None:
                violated(
                    law,
                    f"{path} rejected a content-only rewrite: {exc!r}",
                    log=prefix,
                    rewrite=event,
                )
            expected = REWRITE_FIELDS[case.change]
            check(
                error_named(exc, expected),
                law,
                f"{path} raised {type(exc).__name__}: {exc}; expected {expected}",
                log=prefix,
                rewrite=event,
            )
            continue
        if case.change is not None:
            violated(
                law, f"{path} accepted a rewrite changing {case.change}", log=prefix, rewrite=event
            )
        nodes_before = list(SessionLog.restore(prefix).surface.nodes)
        expected_nodes = [len(prefix) if s == case.target else s for s in nodes_before]
        check(
            list(log.surface.nodes[: len(expected_nodes)]) == expected_nodes,
            law,
            f"{path}: the rewrite did not take its target's place on the surface",
            log=prefix,
            nodes=list(log.surface.nodes),
        )
        check(
            same_json(
                log.events[len(prefix)].data["message"]["content"][0]["content"],
                event["data"]["message"]["content"][0]["content"],
            ),
            law,
            f"{path}: the stored rewrite lost its new content",
        )
