"""Laws on the derived message history (docs/format/properties.md §2, §5: P1, P2, P5, P6,
P19-P21)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from kernel.folds.messages import project_message
from kernel.values.json import thaw
from kernel.wire.codec import event_to_json
from properties._model import messages_of
from properties._report import check, format_value, violated
from properties.laws._common import append_all, as_events, as_wire, messages_plain, same_json
from properties.laws._implementation import KERNEL, Implementation

__all__ = (
    "law_deterministic_derivation",
    "law_contiguous_sequence",
    "law_noise_never_changes_history",
    "law_derived_messages_are_safe",
    "law_projection",
    "law_message_cache",
    "law_loop_tool_pairing",
    "tool_pairing_problem",
)


def law_deterministic_derivation(log: Any, *, implementation: Implementation = KERNEL) -> None:
    """P1: `derive_messages` of a log built by appends, called twice, returns equal lists."""
    law = "P1 deterministic derivation"
    wire = as_wire(log)
    sessions = append_all(wire)
    events = sessions[-1].events if sessions else ()
    first, second = implementation.derive_messages(events), implementation.derive_messages(events)
    check(
        same_json(list(first), list(second)) and len(first) == len(second),
        law,
        "two derivations of the same log differ",
        log=wire,
        first=list(first),
        second=list(second),
    )
    if sessions:
        if not same_json(list(sessions[-1].messages), list(first)):
            violated(
                law,
                "the session's messages differ from derive_messages(log)",
                log=wire,
                session_messages=messages_plain(sessions[-1].messages),
                derived=messages_plain(first),
            )


def law_contiguous_sequence(log: Any) -> None:
    """P2: after any successful appends, `log[i].seq == i` and the next seq is `len(log)`."""
    law = "P2 contiguous sequence"
    wire = as_wire(log)
    for n, session in enumerate(append_all(wire), start=1):
        seqs = [e.seq for e in session.events]
        check(seqs == list(range(n)), law, f"seqs after {n} appends are {seqs}", log=wire)
        check(session.next_seq == n, law, f"next seq after {n} appends is {session.next_seq}")


def law_noise_never_changes_history(
    messages: Any, mixed: Any, *, implementation: Implementation = KERNEL
) -> None:
    """P5: interleaving non-message events with message events never changes `derive_messages`."""
    law = "P5 non-message events never change history"
    alone = implementation.derive_messages(as_events(messages))
    together = implementation.derive_messages(as_events(mixed))
    check(
        same_json(list(alone), list(together)),
        law,
        "derived history differs once noise is interleaved",
        log=as_wire(mixed),
        alone=list(alone),
        interleaved=list(together),
    )
    sessions = append_all(as_wire(mixed))
    if sessions:
        if not same_json(list(sessions[-1].messages), list(alone)):
            violated(
                law,
                "the incremental history of the interleaved log differs",
                log=as_wire(mixed),
                incremental=messages_plain(sessions[-1].messages),
                alone=messages_plain(alone),
            )


def _mutations(message: Any) -> list[Any]:
    content = message.get("content") if isinstance(message, Mapping) else None
    attempts: list[Any] = [
        lambda: message.__setitem__("role", "system"),
        lambda: message.__delitem__("id"),
        lambda: message.update({"x": 1}),
        lambda: message.clear(),
        lambda: message.pop("content"),
    ]
    if content is not None:
        attempts += [
            lambda: content.append({"type": "text", "text": "x"}),
            lambda: content.__setitem__(0, None),
            lambda: content.__delitem__(0),
            lambda: content.clear(),
            lambda: content.extend([1]),
            lambda: content.sort(),
        ]
        if len(content) and isinstance(content[0], Mapping):
            block: Any = content[0]
            attempts.append(lambda: block.__setitem__("type", "mutated"))
    return attempts


def law_derived_messages_are_safe(log: Any, *, implementation: Implementation = KERNEL) -> None:
    """P6: derived messages have role user/assistant; mutating them fails or has no effect."""
    law = "P6 derived messages are safe to hand out"
    wire = as_wire(log)
    sessions = append_all(wire)
    if not sessions:
        return
    session = sessions[-1]
    before = [event_to_json(e) for e in session.events]
    for source in (implementation.derive_messages(session.events), session.messages):
        for message in source:
            check(
                message.get("role") in ("user", "assistant"),
                law,
                f"derived message has role {message.get('role')!r}",
                message=message,
            )
            for attempt in _mutations(message):
                with contextlib.suppress(Exception):  # refusing is the expected outcome
                    attempt()
    after = [event_to_json(e) for e in session.events]
    if before != after:
        violated(law, "mutating derived messages changed the stored log", log=wire)


def law_projection(log: Any, *, implementation: Implementation = KERNEL) -> None:
    """P19: history = projected surface nodes; no empty assistant; each is a stored message."""
    law = "P19 projection"
    events = as_events(log)
    wire = as_wire(log)
    nodes = implementation.fold_surface(events).nodes
    projected = [m for s in nodes if (m := project_message(events[s])) is not None]
    derived = list(implementation.derive_messages(events))
    if not (
        len(derived) == len(projected)
        and all(same_json(a, b) for a, b in zip(derived, projected, strict=False))
    ):
        violated(
            law,
            "derive_messages is not the projected surface nodes",
            log=wire,
            derived=messages_plain(derived),
            projected=messages_plain(projected),
        )
    if implementation.derive_messages is KERNEL.derive_messages:
        # The kernel's own history shares the messages its events hold; another
        # implementation may build equal ones.
        check(
            all(a is b for a, b in zip(derived, projected, strict=True)),
            law,
            "the kernel's derive_messages copies messages its events hold instead of sharing them",
            log=wire,
        )
    stored_ids = set()
    for e in events:
        m = project_message(e)
        if m is not None:
            stored_ids.add(m["id"])
    for m in derived:
        if m.get("role") == "assistant":
            check(
                len(m["content"]) > 0,
                law,
                "an empty-content assistant message was derived",
                log=wire,
            )
        check(m["id"] in stored_ids, law, f"derived message {m['id']!r} is not stored", log=wire)
    expected = messages_of(wire)
    check(
        same_json(messages_plain(derived), expected),
        law,
        "derive_messages disagrees with the reference model",
        log=wire,
        kernel=list(derived),
        model=expected,
    )


def law_message_cache(log: Any, *, implementation: Implementation = KERNEL) -> None:
    """P20: the incremental history equals the from-scratch derivation after every append,
    across replacements; a history already handed out never grows."""
    law = "P20 cache equivalence"
    wire = as_wire(log)
    handed_out: list[tuple[Any, int]] = []
    for n, session in enumerate(append_all(wire), start=1):
        cached = session.messages
        check(
            same_json(list(cached), list(implementation.derive_messages(session.events))),
            law,
            f"after {n} appends the cached history differs from derive_messages",
            log=wire[:n],
            cached=list(cached),
        )
        handed_out.append((cached, len(cached)))
        for earlier, length in handed_out:
            check(
                len(earlier) == length,
                law,
                "a history handed out earlier changed length",
                log=wire[:n],
            )


def tool_pairing_problem(messages: Sequence[Any]) -> str | None:
    """Why a history breaks the P21 pairing condition, or None when it holds."""
    calls: list[str] = []
    answered: dict[str, int] = {}
    for position, message in enumerate(messages):
        content = message.get("content") or []
        if message.get("role") == "assistant":
            missing = [c for c in calls if answered.get(c, 0) != 1]
            if missing:
                return f"message {position}: calls {missing} not answered exactly once before it"
            calls = [
                b["id"] for b in content if isinstance(b, Mapping) and b.get("type") == "tool-call"
            ]
            answered = {}
            continue
        for block in content:
            if isinstance(block, Mapping) and block.get("type") == "tool-result":
                call_id = block.get("toolCallId")
                if call_id not in calls:
                    return (
                        f"message {position}: result for {call_id!r} answers no call of the "
                        "nearest assistant message"
                    )
                answered[call_id] = answered.get(call_id, 0) + 1
                if answered[call_id] > 1:
                    return f"message {position}: call {call_id!r} answered twice"
    missing = [c for c in calls if answered.get(c, 0) != 1]
    return f"calls {missing} of the last assistant message are never answered" if missing else None


def law_loop_tool_pairing(log: Any, *, implementation: Implementation = KERNEL) -> None:
    """P21: in a loop log's history every tool call is answered exactly once before the next
    assistant message, and every result answers a call of the nearest assistant message."""
    law = "P21 tool pairing in loop logs"
    messages = implementation.derive_messages(as_events(log))
    problem = tool_pairing_problem(messages)
    if problem is not None:
        violated(
            law,
            problem,
            log=as_wire(log),
            history="\n".join(format_value(thaw(m)) for m in messages),
        )
