"""Storage shells over the pure core: JSONL files and SQLite (docs/format/persistence.md).

The only package besides `kernel.cli` that does I/O. Both stores offer the same
operations (`create`, `append`, `inspect`, `load`, `read_from`, `list`, and
`list_readable`, which lists past a damaged session) with the same semantics;
every decision they act on comes from the pure core. `open_session` opens or
resumes a stored session as a `LiveSession` that appends and commits batches.
"""

from kernel.store.errors import (
    ForeignStore,
    LiveSessionOpen,
    SessionExists,
    SessionNotFound,
    StaleRepair,
    StoreError,
    StoreLayoutError,
)
from kernel.store.jsonl import JsonlStore, inspect_file, is_zstd_log, repair_file
from kernel.store.live import LiveSession, SessionStore, open_session
from kernel.store.paths import encode_segment, project_dir_name, project_key, session_dir_name
from kernel.store.results import RepairReport, SessionListing, StoredSession, UnreadableSession
from kernel.store.sqlite import APPLICATION_ID, USER_VERSION, SqliteStore

__all__ = (
    "JsonlStore",
    "SqliteStore",
    "LiveSession",
    "SessionStore",
    "open_session",
    "StoredSession",
    "RepairReport",
    "SessionListing",
    "UnreadableSession",
    "inspect_file",
    "repair_file",
    "is_zstd_log",
    "project_key",
    "project_dir_name",
    "encode_segment",
    "session_dir_name",
    "APPLICATION_ID",
    "USER_VERSION",
    "StoreError",
    "SessionNotFound",
    "SessionExists",
    "StoreLayoutError",
    "StaleRepair",
    "LiveSessionOpen",
    "ForeignStore",
)
