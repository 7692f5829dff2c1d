"""Benchmarks smoke run: the generated logs are admissible and the lean harness runs end to end.

No figure is asserted: this only proves, on tiny logs, that every benchmark
log admits and every measure's worker runs and reports (docs/architecture.md,
"Benchmarks"). The real run is `python3 benchmarks/lean.py`.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
from pathlib import Path

import pytest
from loop_order import dsh_order_problems

from kernel import SessionLog, check_invariants, tool_pairing_cuts

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from lean import MEASURES  # noqa: E402
from logs import adversarial_log, compaction_heavy_log, count_replacements  # noqa: E402
from realistic import SHAPES, realistic_log  # noqa: E402


def _admits(wire: list[dict[str, object]]) -> SessionLog:
    log = SessionLog.restore(wire)
    assert check_invariants(log.events) == ()
    tool_pairing_cuts(log.events)  # raises when a replacement split a call from its results
    return log


@pytest.mark.parametrize("rate", [0, 950, 10_000])
def test_compaction_heavy_log_admits_at_its_replacement_rate(rate: int) -> None:
    wire = compaction_heavy_log(4000, 7, replacements_per_100k=rate)
    _admits(wire)
    assert count_replacements(wire) >= rate * len(wire) // 100_000 - 3
    share = collections.Counter(e["type"] for e in wire)["assistant/chunk"] / len(wire)
    assert 0.5 < share < 0.7


@pytest.mark.slow
def test_compaction_heavy_log_has_900_replacements_per_100k_events_by_default() -> None:
    wire = compaction_heavy_log(20_000, 3)
    assert count_replacements(wire) * 100_000 >= 900 * len(wire)
    _admits(wire)


def test_adversarial_log_is_n_appends_then_n_replacements() -> None:
    wire = adversarial_log(300)
    assert len(wire) == 600 and count_replacements(wire) == 300
    assert all(e["surfaceOp"] == "append" for e in wire[:300])
    log = _admits(wire)
    assert len(log.surface.nodes) > 200


@pytest.mark.parametrize("shape", SHAPES)
def test_realistic_log_admits(shape: str) -> None:
    _admits(realistic_log(5000, 1, shape=shape))


def test_the_dsh_shaped_realistic_log_keeps_dshs_loop_order() -> None:
    wire = realistic_log(5000, 1, shape="dsh")
    assert dsh_order_problems(wire) == []
    kinds = collections.Counter(e["type"] for e in wire)
    assert kinds["compaction/start"] == kinds["compaction/summary"] == kinds["compaction/end"] >= 1
    # The loose order, which the reference was measured on, is not DSH's.
    assert dsh_order_problems(realistic_log(5000, 1))


def test_an_unknown_realistic_shape_is_refused() -> None:
    with pytest.raises(ValueError, match="shape must be one of"):
        realistic_log(10, shape="tidy")


@pytest.mark.slow
def test_lean_harness_runs_every_measure_on_every_log(tmp_path: Path) -> None:
    figures = tmp_path / "figures.json"
    command = [sys.executable, str(BENCHMARKS / "lean.py"), "--sizes", "2000", "--dsh", "5000"]
    command += ["--compaction", "2000", "--adversarial", "100", "--repeat", "1"]
    command += ["--timeout", "600", "--verify", "--json", str(figures)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(figures.read_text(encoding="utf-8"))
    assert [log["name"].split()[0] for log in report["logs"]] == [
        "realistic",
        "dsh-realistic",
        "compaction-heavy",
        "adversarial",
    ]
    rows = [line.strip() for line in done.stdout.splitlines()]
    for log in report["logs"]:
        for measure in MEASURES:
            outcome = log["measures"][measure.name]
            assert outcome["status"] == "ok" and outcome["runs"] == 1, (measure.name, outcome)
        assert log["measures"]["check_invariants"]["samples"][0]["violations"] == 0
    for measure in MEASURES:
        label = "memory:" if measure.name == "memory" else measure.label
        assert sum(row.startswith(label) for row in rows) >= len(report["logs"]), measure.label


@pytest.mark.slow
def test_zstd_bomb_benchmark_refuses_both_bombs(capsys: pytest.CaptureFixture[str]) -> None:
    from zstd_bomb import main

    main(["--mib", "65", "--repeat", "1", "--ratio-events", "300"])
    out = capsys.readouterr().out
    assert "declare" in out and "decoding it passes the cap" in out and "realistic 300" in out


@pytest.mark.slow
def test_zstd_hostile_benchmark_scans_nested_frames_and_refuses_bombs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from zstd_hostile import main

    main(["--nested-kb", "8", "--repeat", "1", "--bomb-mib", "1"])
    out = capsys.readouterr().out
    assert "torn=True" in out and "overlap one another" in out
    assert out.count("LimitExceeded: ") == 2 and "failed" not in out


@pytest.mark.slow
def test_deep_nesting_benchmark_runs_every_measure_on_every_shape(tmp_path: Path) -> None:
    from deep_nesting import MEASURES

    figures = tmp_path / "deep.json"
    command = [sys.executable, str(BENCHMARKS / "deep_nesting.py"), "--depths", "1200"]
    command += ["--shapes", "arrays", "objects", "mixed", "--repeat", "1", "--json", str(figures)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    rows = json.loads(figures.read_text(encoding="utf-8"))
    assert [(row["shape"], row["measure"]) for row in rows] == [
        (shape, measure) for shape in ("arrays", "objects", "mixed") for measure in MEASURES
    ]
    for row in rows:
        assert row["seconds"] > 0 and row["traced_peak"] >= 0, row
        if row["measure"] == "load_error":
            assert row["outcome"].startswith("CorruptLog, message "), row
        elif row["measure"] == "append_error":
            assert row["outcome"].startswith("NotLosslessJson, message "), row
        else:
            assert row["outcome"] == "ok", row
