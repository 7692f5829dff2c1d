"""Laws on request headers and request context (docs/format/properties.md §6: P22-P27)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernel.folds.context import context_event, fold_request_context
from kernel.folds.request_header import (
    HeaderWriterState,
    canonical_header,
    header_event,
    headers_equal,
)
from kernel.values.json import json_equal, thaw
from properties._headers import apply_change
from properties._loop import LoopLog
from properties._model import canonical, equal_headers
from properties._report import check, violated
from properties.laws._common import append_all, as_events, as_wire, same_json
from properties.laws._implementation import KERNEL, Implementation

__all__ = (
    "law_canonical_idempotent",
    "law_header_equality",
    "law_header_fold_composes",
    "law_writer_rules",
    "law_request_reconstruction",
    "law_context_writer",
)

_ORDER = ("config", "adapterDefaults", "system", "tools")


def law_canonical_idempotent(header: Mapping[str, Any]) -> None:
    """P22: canonicalizing twice (`kernel.canonical_header`) is canonicalizing once, which keeps
    a subset of `header`'s keys with equal values (in the order config, adapterDefaults, system,
    tools)."""
    law = "P22 canonicalization is idempotent and only removes"
    once = canonical_header(header)
    twice = canonical_header(once)
    check(
        json_equal(once, twice) and list(once) == list(twice),
        law,
        "not idempotent",
        h=header,
        once=once,
        twice=twice,
    )
    for key in once:
        check(key in header, law, f"canonical form adds key {key!r}", h=header, canonical=once)
        check(json_equal(once[key], header[key]), law, f"canonical form changes {key!r}", h=header)
    keys = list(once)
    check(keys == [k for k in _ORDER if k in keys], law, f"canonical key order is {keys}", h=header)
    check(
        json_equal(thaw(once), canonical(header)),
        law,
        "canonical_header disagrees with the reference model",
        h=header,
        kernel=once,
        model=canonical(header),
    )


def law_header_equality(
    a: Mapping[str, Any], b: Mapping[str, Any], change: str | None = None
) -> None:
    """P23: `headers_equal` is reflexive and symmetric on canonical headers; adding empty
    `system`/`tools`/`adapterDefaults` keeps equality; `change` (a `HEADER_CHANGES` edit)
    breaks it."""
    law = "P23 equality"
    ca, cb = canonical_header(a), canonical_header(b)
    check(headers_equal(ca, ca), law, "not reflexive", h=ca)
    ab, ba = headers_equal(ca, cb), headers_equal(cb, ca)
    check(ab == ba, law, f"not symmetric ({ab} vs {ba})", a=ca, b=cb)
    model = equal_headers(thaw(ca), thaw(cb))
    check(ab == model, law, f"headers_equal says {ab}, the reference model {model}", a=ca, b=cb)
    padded = {"system": "", "tools": [], "adapterDefaults": {}, **thaw(a)}
    check(
        headers_equal(ca, canonical_header(padded)),
        law,
        "adding empty system/tools/adapterDefaults changed equality",
        h=a,
    )
    if change is not None:
        edited = apply_change(thaw(ca), change)
        if edited is not None:
            check(
                not headers_equal(ca, canonical_header(edited)),
                law,
                f"headers still equal after change {change!r}",
                before=ca,
                after=edited,
            )


def law_header_fold_composes(log: Any, *, implementation: Implementation = KERNEL) -> None:
    """P24: `fold(L) == fold(L[k:], start=fold(L[:k]))` for every k; the fold is the canonical
    header of the last `request/header` (None without one)."""
    law = "P24 fold composition"
    events = as_events(log)
    whole = implementation.fold_request_header(events)
    last = [e for e in events if e.type == "request/header"]
    if last:
        check(
            json_equal(whole, canonical_header(last[-1].data["header"])),
            law,
            "the fold is not the canonical header of the last snapshot",
            log=as_wire(log),
            fold=whole,
            canonical_last=canonical_header(last[-1].data["header"]),
        )
    else:
        check(
            whole is None, law, "a log without request/header folds to non-None", log=as_wire(log)
        )
    for k in range(len(events) + 1):
        composed = implementation.fold_request_header(
            events[k:], start=implementation.fold_request_header(events[:k])
        )
        check(
            (whole is None and composed is None) or json_equal(composed, whole),
            law,
            f"folding from the prefix fold at k={k} differs",
            log=as_wire(log),
            whole=whole,
            composed=composed,
        )


def _attach_generations(log: LoopLog, *, implementation: Implementation = KERNEL) -> dict[int, int]:
    events = as_events(log)
    gens = {0: 0}
    for instance, at in enumerate(log.seeds, start=1):
        gens[instance] = implementation.fold_surface(events[:at]).replace_generation
    return gens


def law_writer_rules(log: LoopLog, *, implementation: Implementation = KERNEL) -> None:
    """P25: replaying the simulated writer through `header_event`: each instance's first request
    logs exactly one `initial`/`resume` (`initial` iff the log had none); later requests log
    `change` iff the header differs from the fold, with `startsSeries` exactly when declared or a
    replacement preceded; `series` exactly when unchanged and declared/replaced; else nothing."""
    law = "P25 writer rules"
    wire = list(log.events)
    events = as_events(log)
    gens = _attach_generations(log, implementation=implementation)
    states: dict[int, HeaderWriterState] = {}
    previous_generation: dict[int, int] = {}
    for attempt in log.attempts:
        prefix = events[: attempt.at]
        baseline = implementation.fold_request_header(prefix)
        generation = implementation.fold_surface(prefix).replace_generation
        state = states.get(attempt.instance, HeaderWriterState.attach(gens[attempt.instance]))
        data, states[attempt.instance] = header_event(
            state,
            attempt.header,
            baseline=baseline,
            declared=attempt.declared,
            generation=generation,
        )
        where = f"attempt at seq {attempt.at} (instance {attempt.instance})"
        decision = None if data is None else {k: thaw(v) for k, v in data.items() if k != "header"}
        replaced = generation != previous_generation.get(attempt.instance, generation)
        starts_series = attempt.declared or replaced
        if attempt.first_of_instance:
            expected: dict[str, Any] | None = {
                "reason": "resume" if baseline is not None else "initial"
            }
        elif baseline is None or not equal_headers(thaw(baseline), canonical(attempt.header)):
            expected = {"reason": "change", **({"startsSeries": True} if starts_series else {})}
        elif starts_series:
            expected = {"reason": "series"}
        else:
            expected = None
        previous_generation[attempt.instance] = generation
        check(
            decision == expected,
            law,
            f"{where}: header_event decided {decision}, the rules say {expected}",
            log=wire[: attempt.dispatch_at],
            header=attempt.header,
            declared=attempt.declared,
        )
        if data is not None:
            check(
                json_equal(data["header"], canonical(attempt.header)),
                law,
                f"{where}: the snapshot is not the canonical header used",
            )
        logged = wire[attempt.at] if attempt.decision is not None else None
        check(
            (logged is None) == (data is None)
            and (logged is None or same_json(logged["data"], data)),
            law,
            f"{where}: the log's writer and header_event disagree",
            log=wire[: attempt.dispatch_at],
            logged=logged,
            decided=data,
        )
        if attempt.retry:
            check(not attempt.declared, law, f"{where}: a retry carried a declaration")


def law_request_reconstruction(log: LoopLog, *, implementation: Implementation = KERNEL) -> None:
    """P26: at every simulated dispatch, the header fold equals the header used and
    `derive_messages` equals the messages sent (the session's incremental history too)."""
    law = "P26 reconstruction"
    wire = list(log.events)
    events = as_events(log)
    sessions = append_all(wire)
    for attempt in log.attempts:
        prefix = events[: attempt.dispatch_at]
        folded = implementation.fold_request_header(prefix)
        check(
            folded is not None
            and equal_headers(thaw(folded), canonical(attempt.header))
            and headers_equal(folded, canonical_header(attempt.header)),
            law,
            f"dispatch at seq {attempt.dispatch_at}: the header fold is not the header used",
            log=wire[: attempt.dispatch_at],
            folded=folded,
            used=attempt.header,
        )
        derived = implementation.derive_messages(prefix)
        check(
            same_json(list(derived), list(attempt.messages)),
            law,
            f"dispatch at seq {attempt.dispatch_at}: derive_messages differs from what was sent",
            log=wire[: attempt.dispatch_at],
            derived=list(derived),
            sent=list(attempt.messages),
        )
        if attempt.dispatch_at:
            session = sessions[attempt.dispatch_at - 1]
            check(
                same_json(list(session.messages), list(attempt.messages))
                and json_equal(session.request_header, folded),
                law,
                f"dispatch at seq {attempt.dispatch_at}: the session's incremental folds differ",
                log=wire[: attempt.dispatch_at],
            )


_ROUTE = ("provider", "model", "contextWindow")


def law_context_writer(log: LoopLog) -> None:
    """P27: a `request/context` is appended iff provider, model or window differs from the
    previous record (absent vs present counts); the fold equals the last record."""
    law = "P27 context writer"
    wire = list(log.events)
    events = as_events(log)
    for attempt in log.attempts:
        at = attempt.dispatch_at - (1 if attempt.context_appended else 0)
        previous = fold_request_context(events[:at])
        decided = context_event(previous, attempt.context)
        differs = previous is None or any(
            (k in previous) != (k in attempt.context)
            or (k in previous and not json_equal(previous[k], attempt.context[k]))
            for k in _ROUTE
        )
        check(
            (decided is not None) == differs == attempt.context_appended,
            law,
            f"seq {at}: context_event appended={decided is not None}, rule says {differs}, "
            f"log says {attempt.context_appended}",
            log=wire[: attempt.dispatch_at],
            previous=previous,
            route=attempt.context,
        )
        if decided is not None:
            check(json_equal(decided, attempt.context), law, "context_event data is not the route")
        folded = fold_request_context(events[: attempt.dispatch_at])
        if not json_equal(folded, attempt.context):
            violated(
                law,
                f"dispatch at seq {attempt.dispatch_at}: the context fold is not the last record",
                log=wire[: attempt.dispatch_at],
                folded=folded,
            )
