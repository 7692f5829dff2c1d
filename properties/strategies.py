"""The kit's Hypothesis strategies (docs/format/properties.md §1), and the values they draw.

G-json and G-bad-json (`json_values`, `bad_json`), single events, G-loop
(`loop_logs`, `loop_events`), G-crash (`crash_prefixes`, `byte_crashes`), G-noise
(`interleavings`), G-batch (`chunk_batches`, `chunk_rows`), headers, and the labelled
admission mutations and perturbations. Every strategy checks its arguments when it is
built and raises Hypothesis's `InvalidArgument` naming the bad one. Logs are plain wire
dicts; `LoopLog.kernel_events()` or `properties.laws.as_events` gives kernel `Event`s.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from kernel.log import SessionLog
from kernel.values.events import APPEND, TURN_END, TURN_START, USER_MESSAGE, Event
from kernel.wire.codec import event_from_json
from properties import _shapes as shapes
from properties._batches import chunk_batches, chunk_rows
from properties._headers import request_headers
from properties._json_values import (
    DEFECTS,
    BadJson,
    array_index_objects,
    bad_json,
    deep_chains,
    js_numbers,
    json_containers,
    json_scalars,
    json_strings,
    json_values,
    payload_values,
)
from properties._loop import (
    LOOP_SHAPES,
    CrashPrefix,
    LoopLog,
    LoopShape,
    ShapeChoice,
    crash_prefixes,
    loop_events,
    loop_logs,
    plain_text,
    session_headers,
)
from properties._mutations import (
    LEGACY_EVENTS,
    MUTATIONS,
    PERTURBATIONS,
    REWRITE_FIELDS,
    LegacyInsertion,
    Mutation,
    MutationCase,
    Perturbation,
    RewriteCase,
    legacy_insertions,
    mutation_cases,
    perturbations,
    rewrite_cases,
)
from properties._noise import Interleaving, interleavings
from properties.types import WireEvent, register_type_strategies, session_logs

__all__ = (
    # G-json, G-bad-json
    "json_values",
    "json_scalars",
    "json_strings",
    "json_containers",
    "deep_chains",
    "js_numbers",
    "array_index_objects",
    "payload_values",
    "bad_json",
    "BadJson",
    "DEFECTS",
    # events, headers and whole logs
    "single_events",
    "single_kernel_events",
    "WireEvent",
    "session_headers",
    "request_headers",
    "session_logs",
    "payload_logs",
    # G-loop, G-crash
    "loop_logs",
    "loop_events",
    "LoopLog",
    "LOOP_SHAPES",
    "LoopShape",
    "ShapeChoice",
    "crash_prefixes",
    "CrashPrefix",
    "byte_crashes",
    # G-noise, G-batch
    "interleavings",
    "Interleaving",
    "chunk_batches",
    "chunk_rows",
    # labelled mutations and perturbations
    "mutation_cases",
    "MutationCase",
    "Mutation",
    "MUTATIONS",
    "rewrite_cases",
    "RewriteCase",
    "REWRITE_FIELDS",
    "legacy_insertions",
    "LegacyInsertion",
    "LEGACY_EVENTS",
    "perturbations",
    "Perturbation",
    "PERTURBATIONS",
)


def _user(text: str) -> dict[str, Any]:
    return shapes.envelope(
        "user/message", 0, 1, shapes.user_message("u0", text), surface_op="append"
    )


def single_events() -> st.SearchStrategy[dict[str, Any]]:
    """One valid wire event that admission accepts as the first event of a log (seq 0)."""
    text = plain_text()
    call = shapes.tool_call_data(1, 1, "c1", "ls", "{}")
    return st.one_of(
        st.builds(_user, text),
        st.builds(
            lambda t: shapes.envelope(
                "assistant/message",
                0,
                1,
                shapes.assistant_data(
                    1, 1, shapes.assistant_message("a0", [{"type": "text", "text": t}])
                ),
                surface_op="append",
                sources=[],
            ),
            text,
        ),
        st.builds(
            lambda t, err: shapes.envelope(
                "tool/result",
                0,
                1,
                shapes.tool_result_data(
                    1,
                    1,
                    shapes.tool_result_message(
                        "r0", "c1", [{"type": "text", "text": t}], is_error=err
                    ),
                ),
                surface_op="append",
            ),
            text,
            st.booleans(),
        ),
        st.just(shapes.envelope("turn/start", 0, 1, {"turn": 1})),
        st.just(shapes.envelope("step/start", 0, 1, {"turn": 1, "step": 1})),
        st.just(shapes.envelope("tool/call", 0, 1, call)),
        st.builds(
            lambda r: shapes.envelope("turn/end", 0, 1, {"turn": 1, "reason": r}),
            st.sampled_from(shapes.turn_end_reasons()),
        ),
        st.builds(lambda v: shapes.envelope("todo/write", 0, 1, v), json_values(max_leaves=4)),
        st.builds(
            lambda k, v, ig: shapes.envelope(k, 0, 1, v, ignorable=ig),
            st.sampled_from(shapes.KNOWN_EXTENSIONS),
            json_values(max_leaves=4),
            st.booleans(),
        ),
        # A type outside the vocabulary must say it is ignorable, or neither a seed nor a
        # load takes it (R14a).
        st.builds(
            lambda k, v: shapes.envelope(k, 0, 1, v, ignorable=True),
            st.sampled_from(shapes.IGNORABLE_EXTENSIONS),
            json_values(max_leaves=4),
        ),
        st.just(
            shapes.envelope(
                "request/header",
                0,
                1,
                {"header": {"config": {"provider": "p", "model": "m"}}, "reason": "initial"},
            )
        ),
        st.just(shapes.envelope("request/context", 0, 1, {"provider": "p", "model": "m"})),
        st.just(shapes.envelope("session/end-seed", 0, 1, {})),
    )


def byte_crashes(**kwargs: Any) -> st.SearchStrategy[tuple[dict[str, Any], LoopLog, int]]:
    """G-crash on bytes: `(header, log, cut)`; cut `write_jsonl(header, log)` after its header
    line at `header_end + cut % (len(data) - header_end + 1)` (as `law_truncation_tolerance`
    does). `kwargs` are the arguments of `loop_logs`, checked the same way."""
    return st.tuples(session_headers(), loop_logs(**kwargs), st.integers(0, 10**6))


def single_kernel_events() -> st.SearchStrategy[Event]:
    """`single_events` decoded as kernel `Event`s."""
    return single_events().map(event_from_json)


def _payload_log(payloads: list[Any], texts: list[str]) -> tuple[Event, ...]:
    log = SessionLog.empty().append(TURN_START, {"turn": 1}, time=1)
    for index, (payload, text) in enumerate(zip(payloads, texts, strict=False)):
        message = shapes.user_message(f"u{index}", text)
        # An extra message key is valid but not in the typed payload: the untyped form.
        log = log.append(
            USER_MESSAGE, {**message, "meta": payload}, time=2, surface_op=APPEND, ignorable=False
        )
        log = log.append("session/title", payload, time=3)
        log = log.append("todo/write", {"todos": payload}, time=4)
    return tuple(log.append(TURN_END, {"turn": 1, "reason": {"kind": "completed"}}, time=5).events)


def payload_logs() -> st.SearchStrategy[tuple[Event, ...]]:
    """Admitted one-turn logs whose user messages, extension and todo events carry
    `payload_values` (deep, wide, long, surrogate-bearing, extreme numbers): what a writer
    accepts, for write -> read laws."""
    return st.builds(
        _payload_log,
        st.lists(payload_values(), min_size=1, max_size=3),
        st.lists(json_strings(max_size=40), min_size=3, max_size=3),
    )


# `st.from_type` works even where Hypothesis's entry points are off (HYPOTHESIS_NO_PLUGINS).
register_type_strategies()
