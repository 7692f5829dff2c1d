"""`session-kernel export`: one stored session as ACP notifications or a provider request body.

Writes nothing. The session is read as a load would balance it (torn tail dropped,
closers of an interrupted last turn appended in memory), then projected by the pure
`kernel.projections`; the result is printed as one JSON document.
"""

from __future__ import annotations

from typing import Any, Final

from kernel.cli import exits
from kernel.cli.output import error_line, print_json, stderr_console
from kernel.cli.progress import delayed_progress, file_size, step_columns
from kernel.cli.sources import SQLITE, log_file, open_log, session_ids
from kernel.projections import acp_updates, anthropic_request, openai_request

__all__ = ("FORMATS", "VIEWS", "run_export", "export_document")

FORMATS: Final = ("acp", "openai", "anthropic")
VIEWS: Final = ("transcript", "surface")


def export_document(events: Any, *, session_id: str, fmt: str, view: str) -> Any:
    """The projection `fmt` of a balanced log: a list of notifications, or a request body."""
    if fmt == "acp":
        return list(acp_updates(events, session_id=session_id, view=view))  # type: ignore[arg-type]
    if fmt == "openai":
        return openai_request(events)
    return anthropic_request(events)


def run_export(
    path: str,
    *,
    fmt: str,
    session: str | None,
    view: str,
    now: int,
    normalize_legacy: bool = True,
    max_decoded_bytes: int | None = None,
) -> int:
    """Print the projection of one stored session (a database needs `--session` when it
    holds more than one, a `JsonlStore` root always does); `max_decoded_bytes` caps a
    Zstandard log's plaintext."""
    path, kind = log_file(path, session=session, command="export")
    if kind == SQLITE and session is None:
        ids = session_ids(path, kind, session=None)
        if len(ids) != 1:
            error_line(f"{path}: the database holds {len(ids)} sessions; choose one with --session")
            return exits.USAGE
        session = ids[0]
    # Read and project under a spinner (a large log takes seconds); print once it is gone.
    with delayed_progress(stderr_console(), step_columns()) as progress:
        if progress is not None:
            progress.add_task(f"reading {path}{file_size(path)}")
        opened = open_log(
            path,
            kind,
            session=session,
            now=now,
            normalize_legacy=normalize_legacy,
            max_decoded_bytes=max_decoded_bytes,
        )
        events = (*opened.stored, *opened.closers)
        document = export_document(events, session_id=opened.session, fmt=fmt, view=view)
    print_json(document)
    return 0
