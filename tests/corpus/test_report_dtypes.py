"""The report as pandas, Polars and DuckDB read it: every column's dtype, and `rules` as lists.

A few logs (clean, torn, corrupt, one breaking two rules) are verified and written as a report.
Each reader must give the dtypes of the table in docs/api/corpus.md ("The report's dtypes"),
for this report and for an empty one, and read `rules` back as the lists the check found.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import polars as pl
import pyarrow.parquet as pq
import pytest

from kernel.corpus import (
    COLUMNS,
    PANDAS_DTYPES,
    REPORT_VERSION,
    UNANSWERED_CALL,
    CorpusResult,
    verify_corpus,
    write_report,
)
from kernel.folds.invariants import RULES

ROOT = Path(__file__).resolve().parents[2]
NOW = 1_770_000_000_000

TWO_RULES = ["step-number", "turn-end-mismatch"]

DTYPES: dict[str, tuple[str, bool, str, str, str]] = {
    # column: (Arrow type, nullable, pandas, Polars, DuckDB)
    "path": ("string", False, "string", "String", "VARCHAR"),
    "session": ("string", True, "string", "String", "VARCHAR"),
    "format": ("string", True, "string", "String", "VARCHAR"),
    "status": ("string", False, "string", "String", "VARCHAR"),
    "events": ("int64", True, "Int64", "Int64", "BIGINT"),
    "bytes": ("int64", True, "Int64", "Int64", "BIGINT"),
    "check": ("string", True, "string", "String", "VARCHAR"),
    "rules": ("list<string>", False, "object", "List(String)", "VARCHAR[]"),
    "first_seq": ("int64", True, "Int64", "Int64", "BIGINT"),
    "torn_bytes": ("int64", True, "Int64", "Int64", "BIGINT"),
    "torn_records": ("int64", True, "Int64", "Int64", "BIGINT"),
    "closers": ("int64", True, "Int64", "Int64", "BIGINT"),
    "message": ("string", True, "string", "String", "VARCHAR"),
    "load_seconds": ("float64", True, "Float64", "Float64", "DOUBLE"),
}


def _edit(lines: list[str], seq: int, old: str, new: str) -> None:
    (index,) = [i for i, line in enumerate(lines) if f'"seq":{seq},' in line]
    assert old in lines[index]
    lines[index] = lines[index].replace(old, new)


def two_rule_log() -> str:
    """examples/clean-run.jsonl with turn 1's step 2 numbered 3 and turn 2 ended as turn 3."""
    lines = (ROOT / "examples" / "clean-run.jsonl").read_text().splitlines(keepends=True)
    for seq in (13, 14, 15):
        _edit(lines, seq, '"step":2', '"step":3')
    _edit(lines, 29, '"turn":2', '"turn":3')
    return "".join(lines)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> list[CorpusResult]:
    logs = tmp_path_factory.mktemp("logs")
    shutil.copy(ROOT / "examples" / "clean-run.jsonl", logs / "clean.jsonl")
    shutil.copy(ROOT / "examples" / "crash-torn-tail.jsonl", logs / "torn.jsonl")
    (logs / "corrupt.jsonl").write_text("not a log\n")
    (logs / "two-rules.jsonl").write_text(two_rule_log())
    found = sorted(verify_corpus([str(logs)], now=NOW), key=lambda r: r.path)
    by_name = {Path(r.path).name: (r.status, r.rules) for r in found}
    assert by_name == {
        "clean.jsonl": ("ok", ()),
        "corrupt.jsonl": ("invalid", ("CorruptLog",)),
        "torn.jsonl": ("torn", ()),
        "two-rules.jsonl": ("invalid", tuple(TWO_RULES)),
    }
    return found


@pytest.fixture(scope="module")
def parquet(results: list[CorpusResult], tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("report") / "report.parquet"
    write_report(results, target)
    return target


def expected_rules(results: list[CorpusResult]) -> dict[str, list[str]]:
    return {Path(r.path).name: list(r.rules) for r in results}


def documented_table() -> dict[str, tuple[str, bool, str, str, str]]:
    """The rows of the dtype table in docs/api/corpus.md, as `DTYPES` spells them."""
    page = (ROOT / "docs" / "api" / "corpus.md").read_text(encoding="utf-8")
    start = page.index("<!-- the dtype table")
    rows: dict[str, tuple[str, bool, str, str, str]] = {}
    for line in page[start:].splitlines()[3:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        name, arrow, pandas, polars, duck = (re.sub(r"`([^`]*)`", r"\1", c) for c in cells)
        kind, _, null = arrow.partition(" ")
        rows[name] = (kind, null != "not null", pandas, polars, duck)
    return rows


def test_the_documented_dtype_table_is_the_schema() -> None:
    assert documented_table() == DTYPES
    assert [(name, arrow) for name, (arrow, *_) in DTYPES.items()] == list(COLUMNS)
    assert {name: row[2] for name, row in DTYPES.items()} == PANDAS_DTYPES


@pytest.fixture(params=["logs", "empty"])
def report(request: pytest.FixtureRequest, parquet: Path, tmp_path: Path) -> Path:
    """The report of the logs, and a report of no log: the dtypes come from the schema alone."""
    if request.param == "logs":
        return parquet
    write_report([], tmp_path / "empty.parquet")
    return tmp_path / "empty.parquet"


def test_the_arrow_schema_has_the_documented_types_and_nulls(report: Path) -> None:
    schema = pq.read_schema(report)
    arrow = {"string": "string", "int64": "int64", "double": "float64"}
    got = {
        f.name: (arrow.get(str(f.type), str(f.type)), f.nullable) for f in schema
    }  # pyarrow spells the list `list<element: string>`
    want = {name: (kind, null) for name, (kind, null, *_) in DTYPES.items()}
    assert got == {**want, "rules": ("list<element: string>", False)}


def test_pandas_reads_the_documented_dtypes(report: Path) -> None:
    frame = pd.read_parquet(report, dtype_backend="numpy_nullable")
    assert {name: str(dtype) for name, dtype in frame.dtypes.items()} == {
        name: row[2] for name, row in DTYPES.items()
    }
    arrow = pd.read_parquet(report, dtype_backend="pyarrow")
    assert str(arrow.dtypes["rules"]) == "list<element: string>[pyarrow]"


def test_polars_reads_the_documented_dtypes(report: Path) -> None:
    schema = pl.read_parquet(report).schema
    assert {name: str(dtype) for name, dtype in schema.items()} == {
        name: row[3] for name, row in DTYPES.items()
    }


def test_duckdb_reads_the_documented_types(report: Path) -> None:
    relation = duckdb.sql(f"select * from '{report}'")
    assert dict(zip(relation.columns, map(str, relation.types), strict=True)) == {
        name: row[4] for name, row in DTYPES.items()
    }


def test_rules_is_a_list_in_every_reader_empty_when_nothing_failed(
    parquet: Path, results: list[CorpusResult]
) -> None:
    want = expected_rules(results)
    assert want["two-rules.jsonl"] == TWO_RULES and want["clean.jsonl"] == []

    frame = pd.read_parquet(parquet, dtype_backend="numpy_nullable")
    from_pandas = {Path(p).name: list(r) for p, r in zip(frame.path, frame.rules, strict=True)}
    assert from_pandas == want
    assert all(isinstance(rule, str) for cell in frame.rules for rule in cell)

    table = pl.read_parquet(parquet)
    from_polars = {Path(p).name: r for p, r in table.select("path", "rules").iter_rows()}
    assert from_polars == want

    rows = duckdb.sql(f"select path, rules from '{parquet}'").fetchall()
    assert {Path(p).name: r for p, r in rows} == want


def test_the_documented_rule_queries_work_in_every_reader(parquet: Path) -> None:
    counts = {"CorruptLog": 1, "step-number": 1, "turn-end-mismatch": 1}
    frame = pd.read_parquet(parquet, dtype_backend="numpy_nullable")
    assert frame.explode("rules").groupby("rules").size().to_dict() == counts
    hit = frame[frame.rules.map(lambda rules: "step-number" in rules)]
    assert [Path(p).name for p in hit.path] == ["two-rules.jsonl"]

    table = pl.read_parquet(parquet)
    grouped = table.explode("rules").drop_nulls("rules").group_by("rules").len()
    assert dict(grouped.iter_rows()) == counts
    found = table.filter(pl.col("rules").list.contains("step-number"))
    assert [Path(p).name for p in found["path"]] == ["two-rules.jsonl"]

    query = f"select unnest(rules) as rule, count(*) from '{parquet}' group by rule"
    assert dict(duckdb.sql(query).fetchall()) == counts
    query = f"select path from '{parquet}' where list_contains(rules, 'step-number')"
    assert [Path(p).name for (p,) in duckdb.sql(query).fetchall()] == ["two-rules.jsonl"]


def test_the_schema_version_is_in_the_parquet_metadata(parquet: Path) -> None:
    assert REPORT_VERSION == 2
    metadata = pq.read_schema(parquet).metadata
    assert metadata[b"session-kernel.report.version"] == b"2"
    query = (
        f"select decode(value) from parquet_kv_metadata('{parquet}') "
        "where decode(key) = 'session-kernel.report.version'"
    )
    assert duckdb.sql(query).fetchall() == [("2",)]


def test_a_csv_report_spells_rules_joined_by_commas(
    results: list[CorpusResult], tmp_path: Path
) -> None:
    target = tmp_path / "report.csv"
    write_report(results, target)
    assert '"step-number,turn-end-mismatch"' in target.read_text()
    want = {name: rules or None for name, rules in expected_rules(results).items()}

    frame = pd.read_csv(target, dtype=PANDAS_DTYPES)
    assert {name: str(dtype) for name, dtype in frame.dtypes.items()} == PANDAS_DTYPES
    split: Any = frame.rules.str.split(",")
    from_pandas = {
        Path(p).name: (r if isinstance(r, list) else None)
        for p, r in zip(frame.path, split, strict=True)
    }
    assert from_pandas == want

    table = pl.read_csv(target).select("path", pl.col("rules").str.split(","))
    assert {Path(p).name: r for p, r in table.iter_rows()} == want

    query = f"select path, coalesce(string_split(rules, ','), []) from read_csv('{target}')"
    rows = duckdb.sql(query).fetchall()
    assert {Path(p).name: r for p, r in rows} == {n: r or [] for n, r in want.items()}


def test_no_rule_id_holds_a_comma_so_the_csv_spelling_splits_back() -> None:
    assert not [rule for rule in (*RULES, UNANSWERED_CALL) if "," in rule]
