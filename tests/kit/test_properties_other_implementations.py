"""The laws judge another implementation or store by what it answers, not by how it is built.

A researcher points the laws at their own functions (`Implementation`) and their own store
(any object with `create`, `append`, `inspect` and `load`). Each case here once failed a
correct implementation, crashed on a correct store, or let an implementation's own error
escape unreported.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kernel import SessionLog, derive_messages, interrupted_turn_closers, thaw
from kernel.values.events import Event
from properties import laws
from properties.exhaustive import family
from properties.laws import Implementation, LawViolation

_LOGS = list(family("tiny"))
_RICH = max(_LOGS, key=lambda log: len(log.attempts) + len(log.events))
HEADER = {"version": 0, "id": "s", "createdAt": 0, "delegationDepth": 0}


def _own_messages(events: Any) -> list[Any]:
    """A correct history built as plain dicts, not the kernel's shared objects."""
    return [thaw(m) for m in derive_messages(events)]


def test_p19_passes_a_correct_history_made_of_its_own_objects() -> None:
    for log in _LOGS:
        laws.law_projection(log, implementation=Implementation(derive_messages=_own_messages))


def test_p19_shows_both_histories_when_a_message_differs() -> None:
    def renamed(events: Any) -> list[Any]:
        messages = _own_messages(events)
        if messages:
            messages[-1]["id"] = "not-stored"
        return messages

    with pytest.raises(LawViolation, match="P19") as caught:
        laws.law_projection(_RICH, implementation=Implementation(derive_messages=renamed))
    report = str(caught.value)
    assert "derived = " in report and "projected = " in report and "not-stored" in report


class DictStore:
    """A store of the storage contract that keeps headers as wire dicts and reports no repair."""

    def __init__(self) -> None:
        self.header: dict[str, Any] = {}
        self.events: list[Event] = []

    def create(self, header: Any) -> None:
        self.header, self.events = dict(header), []

    def append(self, session_id: str, events: Any) -> None:
        self.events += list(events)

    def inspect(self, session_id: str, *, now: int = 0) -> Any:
        closers = interrupted_turn_closers(tuple(self.events))
        return SimpleNamespace(header=self.header, events=[*self.events, *closers])

    def load(self, session_id: str, *, now: int) -> Any:
        loaded = self.inspect(session_id, now=now)
        self.events = list(loaded.events)  # the repair, committed once
        return loaded


def _closed_turn() -> tuple[Event, ...]:
    log = SessionLog.empty().append("turn/start", {"turn": 1}, time=1)
    return log.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}}, time=2).events


def test_p36_and_p39_take_a_store_whose_header_is_a_dict_and_that_reports_no_repair() -> None:
    laws.law_storage_round_trip(DictStore(), HEADER, _closed_turn(), [1])
    open_turn = SessionLog.empty().append("turn/start", {"turn": 1}, time=1).events
    laws.law_repair_once(DictStore(), HEADER, open_turn)


def test_p36_still_names_a_header_the_store_changed() -> None:
    class Renaming(DictStore):
        def create(self, header: Any) -> None:
            super().create({**header, "cwd": "/elsewhere"})

    with pytest.raises(LawViolation, match=r"P36 .*loaded header differs"):
        laws.law_storage_round_trip(Renaming(), HEADER, _closed_turn(), [])


def test_p28_reports_a_fail_fast_checker_that_raises_something_else() -> None:
    def crashing(events: Any) -> None:
        raise ValueError("the checker broke")

    broken = Implementation(check_invariants_strict=crashing)
    with pytest.raises(LawViolation, match=r"P28 .*raised ValueError: the checker broke"):
        laws.law_loop_logs_well_formed(_RICH, implementation=broken)
    with pytest.raises(LawViolation, match=r"P28a .*raised ValueError"):
        laws.law_all_violations(_RICH, implementation=broken)
