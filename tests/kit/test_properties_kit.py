"""The kit as a Hypothesis extension: profiles, `st.from_type`, the pytest plugin,
readable counterexamples, and the seeded bugs of benchmarks/shrinking.py.

Suites that use the plugin run in a pytest subprocess (`pytester`), so their Hypothesis
settings never leak into this session.
"""

from __future__ import annotations

import sys
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, example, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from kernel import (
    Event,
    SessionHeader,
    SessionLog,
    check_invariants,
    event_from_json,
    event_to_json,
    header_from_json,
    header_to_json,
    interrupted_turn_closers,
)
from kernel.store import JsonlStore, SqliteStore
from kernel.values.json import json_equal
from properties import laws
from properties._mutations import perturb
from properties.exhaustive import family
from properties.laws import Implementation, LawViolation, as_events
from properties.profiles import PROFILES, register_profiles
from properties.strategies import (
    CrashPrefix,
    LoopLog,
    Perturbation,
    WireEvent,
    crash_prefixes,
    single_events,
)

pytest_plugins = ("pytester",)

PROFILE_PHASES = PROFILES["ci"]["phases"]

ROOT = Path(__file__).resolve().parents[2]


# -- profiles: registered, never loaded ------------------------------------------------------


def test_register_profiles_registers_and_loads_nothing() -> None:
    before = settings.default
    names = register_profiles(prefix="kit-test-")
    assert names == ("kit-test-ci", "kit-test-deep")
    assert settings.default is before
    ci, deep = settings.get_profile("kit-test-ci"), settings.get_profile("kit-test-deep")
    assert (ci.max_examples, ci.derandomize) == (50, True)
    assert (deep.max_examples, deep.derandomize) == (5000, False)
    assert Phase.explain not in ci.phases and Phase.shrink in ci.phases
    assert set(PROFILES) == {"ci", "deep"}


def test_entry_points_are_declared_and_load() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    hook = project["entry-points"]["hypothesis"]["session-kernel"]
    plugin = project["entry-points"]["pytest11"]["session-kernel"]
    assert hook == "properties.types:_hypothesis_setup_hook"
    assert plugin == "properties.pytest_plugin"
    assert project["optional-dependencies"]["properties"] == ["hypothesis>=6.100"]
    assert (ROOT / "properties" / "py.typed").is_file()
    installed = {e.value for e in metadata.entry_points(group="hypothesis")}
    assert hook in installed, "reinstall the project: its entry points are not in the metadata"
    assert callable(metadata.EntryPoint("h", hook, "hypothesis").load())


# -- st.from_type ------------------------------------------------------------------------------


@given(st.from_type(Event))
def test_from_type_event_is_admitted_as_a_first_event(event: Event) -> None:
    assert isinstance(event, Event)
    log = SessionLog.seed([event], now=event.time)
    assert log.events[0] == event


@pytest.mark.slow
@given(st.from_type(SessionHeader))
def test_from_type_session_header_is_valid(header: SessionHeader) -> None:
    assert header.version == 0 and 0 <= header.created_at < 2**53
    assert header_from_json(header_to_json(header)) == header


def test_single_events_of_a_type_outside_the_vocabulary_are_ignorable() -> None:
    # Neither a seed nor a load takes an unknown type that is not ignorable (R14a).
    known = SessionLog.empty().known_types
    with pytest.raises(NoSuchExample):
        find(single_events(), lambda w: w["type"] not in known and not w.get("ignorable"))


@example(wire={"type": "todo/write", "seq": 0, "time": 1, "data": "\ud83d\ude42"})
@given(st.from_type(WireEvent))
def test_from_type_wire_event_round_trips(wire: dict[str, Any]) -> None:
    # As JSON, where a split surrogate pair is the character it encodes: admission
    # stores the joined spelling (docs/format/events.md §1.1).
    assert json_equal(event_to_json(event_from_json(wire)), wire)


@settings(max_examples=20)
@given(st.from_type(SessionLog))
def test_from_type_session_log_is_admitted_and_well_formed(log: SessionLog) -> None:
    assert isinstance(log, SessionLog) and log.header is not None
    assert check_invariants(log.events) == ()
    again = SessionLog.restore(log.events, header=log.header)
    assert list(again.messages) == list(log.messages)


@settings(max_examples=10)
@given(st.from_type(LoopLog), st.from_type(CrashPrefix))
def test_from_type_loop_log_and_crash_prefix(log: LoopLog, case: CrashPrefix) -> None:
    laws.law_loop_logs_well_formed(log)
    laws.law_crash_prefix_repairs(case.events)
    whole, k = case
    assert case.events == whole.kernel_events()[:k]
    assert case.wire() == list(whole.events[:k])
    assert interrupted_turn_closers(case.events) == interrupted_turn_closers(case.events)


# -- readable counterexamples ----------------------------------------------------------------


def test_values_print_as_their_events() -> None:
    from hypothesis.vendor.pretty import pretty

    log = max(family("tiny"), key=len)
    shown = pretty(log)
    assert shown.startswith(f"LoopLog({len(log)} events)\n  [0] {{")
    assert shown.count("\n") == len(log)
    session = SessionLog.restore(log.events, header={"version": 0, "id": "s", "createdAt": 0})
    text = pretty(session)
    assert text.startswith(f'SessionLog({len(log)} events, {{"version":0,"id":"s"')
    assert text.count("\n") == len(log)
    assert pretty(CrashPrefix(log, 2)).startswith(f"CrashPrefix(2 of {len(log)} events)\n")


def test_a_violation_names_the_law_and_marks_the_first_offending_seq() -> None:
    log = max(family("tiny"), key=len)
    p = next(
        Perturbation("step number", log.events, tuple(edited))
        for pick in range(20)
        if (edited := perturb(log.events, "step number", pick)) is not None
    )
    laws.law_perturbations_caught(p)
    with pytest.raises(LawViolation) as caught:
        laws.law_perturbations_caught(
            _duplicate(log), implementation=_shrinking_benchmark().DUPLICATES_KEPT
        )
    text = str(caught.value)
    lines = text.splitlines()
    assert lines[0].startswith("P29 perturbations are caught [duplicate tool/result]")
    seq = int(lines[1].removeprefix("  first offending seq: "))
    marked = [line for line in lines if line.startswith(">>")]
    assert len(marked) == 1 and f'"seq":{seq},' in marked[0] and "-again" in marked[0]


def _duplicate(log: LoopLog) -> Perturbation:
    edited = perturb(log.events, "duplicate tool/result", 0)
    assert edited is not None
    return Perturbation("duplicate tool/result", log.events, tuple(edited))


def test_p29_duplicate_result_is_caught_and_the_seeded_bug_is_not() -> None:
    log = max(family("tiny"), key=len)
    p = _duplicate(log)
    laws.law_perturbations_caught(p)
    laws.law_all_violations(p.events)
    assert _shrinking_benchmark().DUPLICATES_KEPT.check_invariants(as_events(p.events)) == ()


# -- the pytest plugin ------------------------------------------------------------------------

_USER_CONFTEST = """
from hypothesis import settings

settings.register_profile("ci", max_examples=7)
settings.load_profile("ci")
"""


@pytest.mark.slow
def test_plugin_leaves_the_users_settings_alone(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(_USER_CONFTEST)
    pytester.makepyfile(
        test_user="""
        from hypothesis import settings

        def test_settings_are_the_users():
            assert settings.default.max_examples == 7
            assert settings.get_profile("ci").max_examples == 7
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "session-kernel: hypothesis profile" not in result.stdout.str()


@pytest.mark.slow
def test_plugin_option_loads_the_kits_profile(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(_USER_CONFTEST)
    pytester.makepyfile(
        test_user="""
        from hypothesis import Phase, settings

        def test_profile_is_the_kits():
            assert settings.default.max_examples == 50
            assert settings.default.derandomize
            assert Phase.explain not in settings.default.phases
            assert settings.get_profile("ci").max_examples == 7
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--session-kernel-profile=ci")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["session-kernel: hypothesis profile session-kernel-ci"])


def test_store_fixtures(jsonl_store: JsonlStore, sqlite_store: SqliteStore) -> None:
    log = max(family("tiny"), key=len)
    for store in (jsonl_store, sqlite_store):
        laws.law_storage_round_trip(store, {"version": 0, "id": "s", "createdAt": 0}, log, [3])


@settings(max_examples=5)
@given(log=st.from_type(SessionLog), kind=st.sampled_from(["jsonl", "jsonl.zstd", "sqlite"]))
def test_store_factory_gives_a_fresh_store_per_example(
    session_store_factory: Any, log: SessionLog, kind: str
) -> None:
    store = session_store_factory(kind)
    assert store.list() == ()
    assert log.header is not None
    laws.law_storage_round_trip(store, header_to_json(log.header), log.events, [2])


@pytest.mark.slow
def test_falsifying_example_prints_as_events() -> None:
    broken = Implementation(interrupted_turn_closers=lambda e: interrupted_turn_closers(e)[:-1])

    tried: list[CrashPrefix] = []

    @settings(database=None, derandomize=True, max_examples=200, phases=PROFILE_PHASES)
    @given(crash_prefixes())
    def test_repair(case: CrashPrefix) -> None:
        tried.append(case)
        laws.law_crash_prefix_repairs(case.events, implementation=broken)

    with pytest.raises(LawViolation) as caught:
        test_repair()
    # Hypothesis replays the shrunk example last and prints it in a note. Its heading is
    # Hypothesis's own wording and changes between releases; what the kit controls is how
    # the example prints: as its events, not as the strategy calls that built it.
    shrunk = tried[-1]
    notes = "\n".join(getattr(caught.value, "__notes__", []))
    assert repr(shrunk) in notes, notes
    assert repr(shrunk).startswith(f"CrashPrefix({shrunk.k} of {len(shrunk.log.events)} events)")
    assert "interpret(" not in notes and "LoopScript(" not in notes
    assert shrunk.k <= 5, notes
    assert str(caught.value).startswith("P30 every crash prefix repairs to a valid log")
    assert "first offending seq: " in str(caught.value)


def test_plugin_module_imports_nothing_heavy() -> None:
    code = (
        "import sys, properties.pytest_plugin; "
        "print(sorted(m for m in ('hypothesis', 'kernel.store') if m in sys.modules))"
    )
    import subprocess

    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


@pytest.mark.slow
def test_strategies_module_registers_types_without_the_entry_point() -> None:
    code = (
        "from hypothesis import strategies as st; import properties.strategies; "
        "from kernel import SessionLog; "
        "print(type(st.from_type(SessionLog).example()).__name__)"
    )
    import os
    import subprocess

    env = {**os.environ, "HYPOTHESIS_NO_PLUGINS": "1"}
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    assert out.strip() == "SessionLog"


def _shrinking_benchmark() -> Any:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import shrinking
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return shrinking


@pytest.mark.slow
@pytest.mark.parametrize("index", range(3))
def test_seeded_bugs_are_caught_and_shrink_to_a_handful_of_events(index: int) -> None:
    """The benchmark's bugs under seed 0: caught, and shrunk to at most 13 events (a turn with
    one call and its duplicated result is 10; the other two shrink to 1 and, in DSH's loop
    order, 12: a step's message and reply, then a compaction's four records). No time is
    asserted: benchmarks/shrinking.py measures that."""
    bench = _shrinking_benchmark()
    bug = bench.BUGS[index]
    run = bench.measure(bug, 0)
    assert run.find is not None, f"{bug.name}: not caught"
    assert run.events is not None and run.events <= 13, (bug.name, run.events, run.report)
