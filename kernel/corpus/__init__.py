"""Corpus verification: one pure per-log check, run in-process, on a process pool or on Dask.

An I/O shell like `kernel.store`: it reads logs (never writes one), and every
verdict comes from the pure kernel. `verify_corpus` yields one `CorpusResult`
per log as checks complete (an executor's `log_timeout` bounds each log's
wait); `write_report` writes them as a Parquet or CSV table;
`minimize_log` shrinks a failing log to a 1-minimal counterexample.
Dask and pyarrow are optional extras, imported only when used.
"""

from __future__ import annotations

from kernel.corpus.check import (
    UNANSWERED_CALL,
    CorpusResult,
    Task,
    check_bytes,
    check_task,
    plan_tasks,
    problem_rule,
    unanswered_call_findings,
)
from kernel.corpus.executors import (
    Bounded,
    ClusterUnavailable,
    Dask,
    Executor,
    InProcess,
    ProcessPool,
)
from kernel.corpus.minimize import (
    Minimized,
    ddmin,
    failure_keys,
    minimize_events,
    minimize_log,
    shortest_failing_prefix,
)
from kernel.corpus.report import (
    COLUMNS,
    PANDAS_DTYPES,
    REPORT_VERSION,
    TIMING_COLUMNS,
    ReportUnavailable,
    report_format,
    report_row,
    report_text,
    text_from_report,
    write_report,
)
from kernel.corpus.verify import verify_corpus, verify_tasks

__all__ = (
    "CorpusResult",
    "Task",
    "check_bytes",
    "check_task",
    "plan_tasks",
    "problem_rule",
    "unanswered_call_findings",
    "UNANSWERED_CALL",
    "Executor",
    "InProcess",
    "ProcessPool",
    "Dask",
    "Bounded",
    "ClusterUnavailable",
    "verify_corpus",
    "verify_tasks",
    "REPORT_VERSION",
    "COLUMNS",
    "PANDAS_DTYPES",
    "TIMING_COLUMNS",
    "ReportUnavailable",
    "report_format",
    "report_row",
    "report_text",
    "text_from_report",
    "write_report",
    "Minimized",
    "failure_keys",
    "minimize_log",
    "minimize_events",
    "shortest_failing_prefix",
    "ddmin",
)
