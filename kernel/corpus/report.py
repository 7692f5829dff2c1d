"""The columnar report: one row per log, written as Apache Parquet or CSV with `pyarrow`.

The schema is versioned (`REPORT_VERSION`, stored in the Parquet metadata
under `session-kernel.report.version`): a column is only ever added at the
end, and a change of meaning or type bumps the version. `pyarrow` is imported
when a report is written, never by `import kernel`. A report is written to a
temporary file beside its target and renamed into place, so a failed run
leaves no half-written report.
"""

from __future__ import annotations

import os
import tempfile
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
    "report_row",
    "write_report",
    "ReportUnavailable",
    "pyarrow_module",
)

REPORT_VERSION: Final = 1
"""The version of the report schema below."""

COLUMNS: Final = (
    ("path", "string"),
    ("session", "string"),
    ("format", "string"),
    ("status", "string"),
    ("events", "int64"),
    ("bytes", "int64"),
    ("check", "string"),
    ("rules", "string"),
    ("first_seq", "int64"),
    ("torn_bytes", "int64"),
    ("torn_records", "int64"),
    ("closers", "int64"),
    ("message", "string"),
    ("load_seconds", "float64"),
)
"""Every column, in order, with its Arrow type (all nullable but `path` and `status`)."""

PANDAS_DTYPES: Final = {
    name: {"string": "string", "int64": "Int64", "float64": "Float64"}[kind]
    for name, kind in COLUMNS
}
"""The pandas dtypes of the columns, read with `dtype_backend="numpy_nullable"`."""

TIMING_COLUMNS: Final = ("load_seconds",)
"""Columns that differ from run to run; every other column is a function of the corpus."""

REPORT_FORMATS: Final = {".parquet": "parquet", ".csv": "csv"}

_BATCH_ROWS: Final = 65536


class ReportUnavailable(Exception):
    """A report was asked for, but `pyarrow` is not installed or the name has no known suffix."""


def report_format(path: str | Path) -> str:
    """`parquet` or `csv` from the report's file name; raises `ReportUnavailable` otherwise."""
    suffix = Path(path).suffix.lower()
    if suffix not in REPORT_FORMATS:
        raise ReportUnavailable(f"{path}: a report is named *.parquet or *.csv")
    return REPORT_FORMATS[suffix]


def report_row(result: CorpusResult) -> dict[str, Any]:
    """One record as a report row: `rules` joined by commas, nothing else changed."""
    return {
        "path": result.path,
        "session": result.session,
        "format": result.format,
        "status": result.status,
        "events": result.events,
        "bytes": result.bytes,
        "check": result.check,
        "rules": ",".join(result.rules) if result.rules else None,
        "first_seq": result.first_seq,
        "torn_bytes": result.torn_bytes,
        "torn_records": result.torn_records,
        "closers": result.closers,
        "message": result.message,
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


def _schema(pa: Any) -> Any:
    types = {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64()}
    fields = [
        pa.field(name, types[kind], nullable=name not in ("path", "status"))
        for name, kind in COLUMNS
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

    schema = _schema(pa)
    target = Path(path)
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
    except OSError as exc:  # name the report, not the temporary file
        raise type(exc)(exc.errno, exc.strerror, str(target)) from None
    os.close(fd)
    rows = 0
    try:
        writer: Any = (
            pq.ParquetWriter(temp, schema) if kind == "parquet" else pacsv.CSVWriter(temp, schema)
        )
        try:
            for chunk in _chunks(results):
                batch = pa.RecordBatch.from_pylist([report_row(r) for r in chunk], schema=schema)
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
