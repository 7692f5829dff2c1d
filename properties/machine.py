"""A Hypothesis state machine over `SessionLog`: append, seed, replace, crash, reload.

After every rule the session's incrementally kept state (surface nodes, replace
generation, derived messages, request header) must equal the complete folds
over its events, and the log must stay well formed. The machine only emits
events a model loop could write; what it may do next is read off the log itself
(the open turn, step and calls), so a crash that cuts the log simply continues
from whatever the prefix says.

Use it from a test module: `TestSessionLog = SessionLogMachine.TestCase`. To check your own
folds, `SessionLogMachine.against(Implementation(...)).TestCase` runs the same machine with
them as the complete folds the incremental state is compared with.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kernel.folds.request_header import HeaderWriterState, header_event
from kernel.log import SessionLog
from kernel.storage.jsonl import load_jsonl, write_jsonl
from kernel.values.json import json_equal, thaw
from kernel.wire.codec import event_to_json
from properties import _shapes as shapes
from properties._loop import HEADER_POOL, plain_text
from properties._model import messages_of, pairing_cuts, surface_of
from properties._report import check, format_log
from properties.laws._implementation import KERNEL, Implementation

__all__ = ("SessionLogMachine",)

_HEADER = {"version": 0, "id": "machine", "createdAt": 0, "cwd": "/m"}


@attrs.define
class _LoopState:
    """What the log says a model loop may do next."""

    turns: int = 0
    open_turn: int | None = None
    open_step: int | None = None
    steps: int = 0
    requested: list[str] = attrs.Factory(list)
    recorded: dict[str, int] = attrs.Factory(dict)
    answered: set[str] = attrs.Factory(set)
    replied: bool = False


def _loop_state(wire: list[dict[str, Any]]) -> _LoopState:
    """Scan wire events for the open turn/step and the open step's calls."""
    s = _LoopState()
    for e in wire:
        t, d = e["type"], e["data"]
        if t == "turn/start":
            s.turns, s.open_turn, s.open_step, s.steps = d["turn"], d["turn"], None, 0
        elif t == "turn/end":
            s.open_turn, s.open_step = None, None
        elif t == "step/start":
            s.open_step, s.steps = d["step"], d["step"]
            s.requested, s.recorded, s.answered, s.replied = [], {}, set(), False
        elif t == "step/end":
            s.open_step = None
        elif t == "assistant/message":
            s.replied = True
            s.requested += [
                b["id"] for b in d["message"]["content"] if b.get("type") == "tool-call"
            ]
        elif t == "tool/call":
            s.recorded[d["callId"]] = e["seq"]
        elif t == "tool/result" and e.get("surfaceOp") == "append":
            s.answered.add(d["message"]["source"]["callId"])
    return s


class SessionLogMachine(RuleBasedStateMachine):
    """Appends, seeds, compactions, rewrites, crashes and reloads against complete folds."""

    implementation: ClassVar[Implementation] = KERNEL
    """The complete folds and closers the machine checks against (`against` picks others)."""

    @classmethod
    def against(cls, implementation: Implementation) -> type[SessionLogMachine]:
        """A subclass of this machine that checks `implementation` instead of the kernel's.

        >>> machine = SessionLogMachine.against(Implementation())
        >>> machine.implementation == KERNEL, issubclass(machine, SessionLogMachine)
        (True, True)
        """
        name = f"{cls.__name__}Against"
        return type(name, (cls,), {"implementation": implementation, "__module__": cls.__module__})

    def __init__(self) -> None:
        super().__init__()
        self.log = SessionLog.empty(header=_HEADER)
        self.writer = HeaderWriterState.attach(0)
        self.time = 1_760_000_000_000
        self.history: list[str] = []

    # -- helpers ------------------------------------------------------------------------------

    def wire(self) -> list[dict[str, Any]]:
        return [event_to_json(e) for e in self.log.events]

    def state(self) -> _LoopState:
        return _loop_state(self.wire())

    def emit(self, type_: str, data: Any, **kw: Any) -> None:
        self.time += 1
        self.log = self.log.append(type_, data, time=self.time, **kw)
        self.history.append(type_)

    def _new_lifecycle(self, events: Any, now: int) -> None:
        self.log = SessionLog.seed(events, header=_HEADER, now=now)
        self.writer = HeaderWriterState.attach(self.log.surface.replace_generation)

    # -- the model loop -----------------------------------------------------------------------

    @precondition(lambda self: self.state().open_turn is None)
    @rule()
    def start_turn(self) -> None:
        self.emit("turn/start", {"turn": self.state().turns + 1})

    @precondition(lambda self: not self.state().requested or self.state().open_step is None)
    @rule(text=plain_text())
    def user_message(self, text: str) -> None:
        seq = self.log.next_seq
        self.emit("user/message", shapes.user_message(f"u{seq}", text), surface_op="append")

    @precondition(
        lambda self: self.state().open_turn is not None and self.state().open_step is None
    )
    @rule(
        user=st.none() | plain_text(),
        pool=st.integers(0, len(HEADER_POOL) - 1),
        declared=st.booleans(),
        calls=st.integers(0, 3),
        text=plain_text(),
        order=st.permutations(range(3)),
    )
    def step(
        self, user: str | None, pool: int, declared: bool, calls: int, text: str, order: list[int]
    ) -> None:
        """One whole step: input, header decision, reply, calls and results (in `order`), end."""
        s = self.state()
        self.emit("step/start", {"turn": s.open_turn, "step": s.steps + 1})
        if user is not None:
            self.user_message(user)
        self.request(pool, declared)
        self.assistant_message(calls, text)
        for _ in range(calls):
            self.tool_call()
        s = self.state()
        for i in order:
            if i < calls:
                call = s.requested[i]
                self._result(call, text)
        self.end_step()

    def request(self, pool: int, declared: bool) -> None:
        data, self.writer = header_event(
            self.writer,
            HEADER_POOL[pool],
            baseline=self.log.request_header,
            declared=declared,
            generation=self.log.surface.replace_generation,
        )
        if data is not None:
            self.emit("request/header", thaw(data))

    def assistant_message(self, calls: int, text: str) -> None:
        s = self.state()
        seq = self.log.next_seq
        content: list[Any] = [{"type": "text", "text": text}] if text or not calls else []
        content += [
            {"type": "tool-call", "id": f"c{seq}.{i}", "name": "ls", "arguments": "{}"}
            for i in range(calls)
        ]
        message = shapes.assistant_message(f"a{seq}", content)
        data = shapes.assistant_data(s.open_turn or 0, s.open_step or 0, message)
        self.emit("assistant/message", data, surface_op="append", source_event_seqs=[])

    def _result(self, call: str, text: str) -> None:
        s = self.state()
        seq = self.log.next_seq
        message = shapes.tool_result_message(f"r{seq}", call, [{"type": "text", "text": text}])
        self.emit(
            "tool/result",
            shapes.tool_result_data(s.open_turn or 0, s.open_step or 0, message),
            surface_op="append",
            source_event_seqs=[s.recorded[call]],
        )

    # -- finishing a step a crash left open ---------------------------------------------------

    @precondition(lambda self: self.state().open_step is not None and not self.state().replied)
    @rule(calls=st.integers(0, 3), text=plain_text())
    def reply(self, calls: int, text: str) -> None:
        self.assistant_message(calls, text)

    @precondition(
        lambda self: (
            any(c not in self.state().recorded for c in self.state().requested)
            and self.state().open_step is not None
        )
    )
    @rule()
    def tool_call(self) -> None:
        s = self.state()
        call = next(c for c in s.requested if c not in s.recorded)
        self.emit(
            "tool/call", shapes.tool_call_data(s.open_turn or 0, s.open_step or 0, call, "ls", "{}")
        )

    @precondition(
        lambda self: (
            any(c not in self.state().answered for c in self.state().recorded)
            and self.state().open_step is not None
        )
    )
    @rule(pick=st.integers(0, 3), text=plain_text())
    def tool_result(self, pick: int, text: str) -> None:
        s = self.state()
        open_calls = [c for c in s.recorded if c not in s.answered]
        self._result(open_calls[pick % len(open_calls)], text)

    @precondition(
        lambda self: (
            self.state().open_step is not None
            and self.state().replied
            and set(self.state().requested) <= self.state().answered
        )
    )
    @rule()
    def end_step(self) -> None:
        s = self.state()
        self.emit("step/end", {"turn": s.open_turn, "step": s.open_step})

    @precondition(
        lambda self: self.state().open_turn is not None and self.state().open_step is None
    )
    @rule()
    def end_turn(self) -> None:
        self.emit("turn/end", {"turn": self.state().open_turn, "reason": {"kind": "completed"}})

    @precondition(lambda self: self.state().open_step is None)
    @rule(kind=st.sampled_from(["session/title", "acme/note"]), ignorable=st.booleans())
    def extension(self, kind: str, ignorable: bool) -> None:
        self.emit(kind, {"title": "t"}, ignorable=ignorable or kind == "acme/note")

    # -- replacements -------------------------------------------------------------------------

    @precondition(lambda self: self.state().open_turn is None and len(self.log.surface.nodes) > 0)
    @rule(start=st.integers(0, 9), end=st.integers(0, 9))
    def compact(self, start: int, end: int) -> None:
        wire = self.wire()
        nodes = list(self.log.surface.nodes)
        cuts = pairing_cuts(wire, nodes)
        starts = [i for i in range(len(nodes)) if cuts[i]]
        i = starts[start % len(starts)]
        ends = [j for j in range(i, len(nodes)) if cuts[j + 1]]
        if not ends:
            return
        j = ends[end % len(ends)]
        seq = self.log.next_seq
        self.emit(
            "user/message",
            shapes.user_message(f"s{seq}", "summary", kind="plugin"),
            surface_op=shapes.replace_op(nodes[i], nodes[j]),
            source_event_seqs=nodes[i : j + 1],
        )

    @precondition(
        lambda self: (
            self.state().open_turn is not None
            and any(self.log.events[s].type == "tool/result" for s in self.log.surface.nodes)
        )
    )
    @rule(pick=st.integers(0, 5))
    def rewrite(self, pick: int) -> None:
        targets = [s for s in self.log.surface.nodes if self.log.events[s].type == "tool/result"]
        target = targets[pick % len(targets)]
        data = thaw(self.log.events[target].data)
        data["message"]["content"][0]["content"] = [{"type": "text", "text": "[pruned]"}]
        self.emit(
            "tool/result",
            data,
            surface_op=shapes.replace_op(target, target),
            source_event_seqs=[target],
        )

    # -- lifecycles: seed, crash, reload ------------------------------------------------------

    @rule(
        kind=st.sampled_from(["reseed", "crash", "torn write", "reload"]),
        cut=st.integers(0, 10**6),
        now=st.integers(0, 10**13),
    )
    def lifecycle(self, kind: str, cut: int, now: int) -> None:
        """End this lifecycle: re-seed, crash (cut after an event), tear a write, or reload."""
        if kind == "reseed" or not self.log.events:
            self.reseed(now)
        elif kind == "crash":
            self.crash(cut)
        elif kind == "torn write":
            self.crash_bytes_and_reload(cut, now)
        else:
            self.reload(now)

    def reseed(self, now: int) -> None:
        before = self.wire()
        self._new_lifecycle(self.log.events, now)
        after = self.wire()
        check(
            after[: len(before)] == before, "machine: reseed", "the seed is not a prefix", log=after
        )
        self.history.append("reseed")

    def crash(self, cut: int) -> None:
        k = cut % (len(self.log.events) + 1)
        self.log = SessionLog.restore(self.log.events[:k], header=_HEADER)
        self.writer = HeaderWriterState.attach(self.log.surface.replace_generation)
        self.history.append(f"crash@{k}")

    def crash_bytes_and_reload(self, cut: int, now: int) -> None:
        data = write_jsonl(_HEADER, self.log.events)
        header_end = data.index(b"\n") + 1
        at = header_end + cut % (len(data) - header_end + 1)
        loaded = load_jsonl(data[:at], now=now)
        kept = len(loaded.events) - len(loaded.closers)
        check(
            [event_to_json(e) for e in loaded.events[:kept]] == self.wire()[:kept],
            "machine: reload after a torn write",
            "the loaded prefix is not a prefix of the log",
            log=self.wire(),
        )
        self._new_lifecycle(loaded.events, now)
        self.history.append(f"torn@{at}+reload")

    def reload(self, now: int) -> None:
        events = self.log.events
        loaded = load_jsonl(write_jsonl(_HEADER, events), now=now)
        expected = [*self.wire(), *(event_to_json(e) for e in self.implementation.closers(events))]
        check(
            [event_to_json(e) for e in loaded.events] == expected,
            "machine: reload",
            "write_jsonl/load_jsonl did not return the log plus its closers",
            log=expected,
        )
        self._new_lifecycle(loaded.events, now)
        self.history.append("reload")

    # -- the invariants -----------------------------------------------------------------------

    @invariant()
    def incremental_state_equals_complete_folds(self) -> None:
        events = self.log.events
        wire = self.wire()
        law = "machine: incremental state equals complete folds"
        where = f"after {self.history[-8:]}"
        impl = self.implementation
        full = impl.fold_surface(events)
        check(
            [e.seq for e in events] == list(range(len(events))),
            law,
            f"{where}: seqs are not contiguous",
            log=wire,
        )
        check(
            list(self.log.surface.nodes) == list(full.nodes) == surface_of(wire).nodes,
            law,
            f"{where}: incremental nodes {list(self.log.surface.nodes)} "
            f"!= complete {list(full.nodes)}",
            log=wire,
        )
        check(
            self.log.surface.replace_generation == len(full.replacements),
            law,
            f"{where}: replace generation differs",
            log=wire,
        )
        check(
            json_equal(thaw(list(self.log.messages)), thaw(list(impl.derive_messages(events))))
            and json_equal(thaw(list(self.log.messages)), messages_of(wire)),
            law,
            f"{where}: cached messages differ from derive_messages",
            log=wire,
        )
        folded = impl.fold_request_header(events)
        check(
            (folded is None and self.log.request_header is None)
            or json_equal(self.log.request_header, folded),
            law,
            f"{where}: request header differs from fold_request_header",
            log=wire,
        )
        found = impl.check_invariants(events)
        check(not found, law, f"{where}: invariants broken: {list(found)}", log=wire)

    def teardown(self) -> None:
        self.history.clear()

    def __repr__(self) -> str:
        return f"SessionLogMachine\n{format_log(self.wire())}"
