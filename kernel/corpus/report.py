"""The columnar report: one row per log, written as Apache Parquet or CSV with `pyarrow`.

The schema is versioned (`REPORT_VERSION`, stored in the Parquet metadata
under `session-kernel.report.version`): a column is only ever added at the
end, and a change of meaning or type bumps the version. `rules` is a list in
Parquet and the same list joined by commas in CSV. `pyarrow` is imported
when a report is written, never by `import kernel`. A report is written to a
temporary file beside its target (with the mode the umask gives a new file)
and renamed into place, so a failed run leaves no half-written report. Text
cells are UTF-8; a file name that is not keeps its bytes (`report_text`).
"""

from __future__ import annotations

import errno
import os
import re
import secrets
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final

from kernel.corpus.check import CorpusResult

__all__ = (
    "REPORT_VERSION",
    "COLUMNS",
    "PANDAS_DTYPES",
    "TIMING_COLUMNS",
    "REPORT_FORMATS",
    "report_format",
    "report_text",
    "text_from_report",
    "report_row",
    "write_report",
    "ReportUnavailable",
    "pyarrow_module",
)

REPORT_VERSION: Final = 2
"""The version of the report schema below.

Version 2 made `rules` a list of strings in Parquet, empty when nothing
failed; in version 1 it was one comma-joined string, null when empty. A CSV
report is the same in both versions.
"""

COLUMNS: Final = (
    ("path", "string"),
    ("session", "string"),
    ("format", "string"),
    ("status", "string"),
    ("events", "int64"),
    ("bytes", "int64"),
    ("check", "string"),
    ("rules", "list<string>"),
    ("first_seq", "int64"),
    ("torn_bytes", "int64"),
    ("torn_records", "int64"),
    ("closers", "int64"),
    ("message", "string"),
    ("load_seconds", "float64"),
)
"""Every column, in order, with its Arrow type in Parquet.

Every column is nullable but `path`, `status` and `rules`. In CSV, `rules` is
a string: the rule ids joined by commas (a rule id holds no comma), empty
when there are none.
"""

_PANDAS_DTYPE: Final = {
    "string": "string",
    "int64": "Int64",
    "float64": "Float64",
    "list<string>": "object",
}

PANDAS_DTYPES: Final = {name: _PANDAS_DTYPE[arrow] for name, arrow in COLUMNS}
"""The pandas dtypes of a Parquet report read with `dtype_backend="numpy_nullable"`.

`rules` is `object`: each cell a NumPy array of `str`. `pd.read_csv(FILE,
dtype=PANDAS_DTYPES)` gives a CSV report the same dtypes, its `rules` cells
the comma-joined text (missing when empty): `.str.split(",")` makes them lists.
"""

TIMING_COLUMNS: Final = ("load_seconds",)
"""Columns that differ from run to run; every other column is a function of the corpus."""

REPORT_FORMATS: Final = {".parquet": "parquet", ".csv": "csv"}

_BATCH_ROWS: Final = 65536

_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_ESCAPE_LIKE: Final = re.compile(r"\\ud[89a-f][0-9a-f]{2}")
"""What marks an escaped cell: the escape of a lone surrogate, `\\udcff`."""
_TOKEN: Final = re.compile(r"\\\\|\\u(d[89a-f][0-9a-f]{2})")


class ReportUnavailable(Exception):
    """A report was asked for, but `pyarrow` is not installed or the name has no known suffix."""


def report_format(path: str | Path) -> str:
    """`parquet` or `csv` from the report's file name; raises `ReportUnavailable` otherwise."""
    suffix = Path(path).suffix.lower()
    if suffix not in REPORT_FORMATS:
        raise ReportUnavailable(f"{path}: a report is named *.parquet or *.csv")
    return REPORT_FORMATS[suffix]


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return "\\\\" if char == "\\" else f"\\u{ord(char):04x}"


def report_text(value: str) -> str:
    """`value` as a report cell: unchanged, unless it holds a lone surrogate.

    A file name that is not UTF-8 holds one per undecodable byte (Python's
    `surrogateescape`), and so may log text; UTF-8 cannot. Such a value is
    written as `--json` writes it: each surrogate as its escape (`\\udcff`
    for the byte 0xff) and each backslash doubled. A value that merely looks
    escaped (it holds the text `\\udcff`) is written the same way, so
    `text_from_report` can always tell the two apart.

    >>> report_text("logs/caf\\udce9.jsonl"), report_text("C:\\\\logs\\\\a.jsonl")
    ('logs/caf\\\\udce9.jsonl', 'C:\\\\logs\\\\a.jsonl')
    """
    if _SURROGATE.search(value) is None and _ESCAPE_LIKE.search(value) is None:
        return value
    return re.sub(r"[\\\ud800-\udfff]", _escape, value)


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    return "\\" if code is None else chr(int(code, 16))


def text_from_report(cell: str) -> str:
    """The value a report cell was written from (`report_text` undone).

    For a path, `os.fsencode` of the result gives the file name's bytes.

    >>> import os
    >>> os.fsencode(text_from_report("logs/caf\\\\udce9.jsonl"))
    b'logs/caf\\xe9.jsonl'
    """
    if _ESCAPE_LIKE.search(cell) is None:
        return cell
    return _TOKEN.sub(_unescape, cell)


def _cell(value: str | None) -> str | None:
    return None if value is None else report_text(value)


def report_row(result: CorpusResult) -> dict[str, Any]:
    """One record as a Parquet report row: `rules` a list, text cells in `report_text`."""
    return {
        "path": report_text(result.path),
        "session": _cell(result.session),
        "format": _cell(result.format),
        "status": report_text(result.status),
        "events": result.events,
        "bytes": result.bytes,
        "check": _cell(result.check),
        "rules": [report_text(rule) for rule in result.rules],
        "first_seq": result.first_seq,
        "torn_bytes": result.torn_bytes,
        "torn_records": result.torn_records,
        "closers": result.closers,
        "message": _cell(result.message),
        "load_seconds": result.load_seconds,
    }


def pyarrow_module() -> Any:
    """`pyarrow`, or `ReportUnavailable` naming the extra to install."""
    try:
        import pyarrow
    except ImportError:
        raise ReportUnavailable(
            "writing a report needs pyarrow: pip install 'session-kernel[report]'"
        ) from None
    return pyarrow


def _csv_row(row: dict[str, Any]) -> dict[str, Any]:
    """A Parquet report row as a CSV row: `rules` joined by commas, None when empty."""
    return {**row, "rules": ",".join(row["rules"]) or None}


def _schema(pa: Any, kind: str) -> Any:
    """The Arrow schema of a `parquet` or `csv` report (CSV has no list type)."""
    types = {
        "string": pa.string(),
        "int64": pa.int64(),
        "float64": pa.float64(),
        "list<string>": pa.list_(pa.string()) if kind == "parquet" else pa.string(),
    }
    required = ("path", "status", "rules") if kind == "parquet" else ("path", "status")
    fields = [
        pa.field(name, types[arrow], nullable=name not in required) for name, arrow in COLUMNS
    ]
    return pa.schema(fields, metadata={"session-kernel.report.version": str(REPORT_VERSION)})


def _chunks(rows: Iterable[CorpusResult]) -> Iterable[Sequence[CorpusResult]]:
    chunk: list[CorpusResult] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == _BATCH_ROWS:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def write_report(results: Iterable[CorpusResult], path: str | Path) -> int:
    """Write one row per result to `path` (`.parquet` or `.csv`); returns the number of rows.

    Rows are written in the order given, in batches, so a report of millions
    of logs never holds more than one batch of Arrow data.
    """
    kind = report_format(path)
    pa = pyarrow_module()
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    schema = _schema(pa, kind)
    as_row = report_row if kind == "parquet" else lambda r: _csv_row(report_row(r))
    target = Path(path)
    try:
        temp = _new_file(target)
    except OSError as exc:  # name the report, not the temporary file
        raise type(exc)(exc.errno, exc.strerror, str(target)) from None
    rows = 0
    try:
        writer: Any = (
            pq.ParquetWriter(temp, schema) if kind == "parquet" else pacsv.CSVWriter(temp, schema)
        )
        try:
            for chunk in _chunks(results):
                batch = pa.RecordBatch.from_pylist([as_row(r) for r in chunk], schema=schema)
                writer.write_batch(batch)
                rows += len(chunk)
            if rows == 0 and kind == "parquet":
                writer.write_table(schema.empty_table())
        finally:
            writer.close()
        try:
            os.replace(temp, target)
        except OSError as exc:
            raise type(exc)(exc.errno, exc.strerror, str(target)) from None
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return rows


def _new_file(target: Path) -> str:
    """Create an empty temporary file beside `target`, as `open` would: mode 0o666 less the umask.

    (`tempfile.mkstemp` would make it owner-only whatever the umask.)
    """
    for _ in range(100):
        temp = str(target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return temp
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(target))
