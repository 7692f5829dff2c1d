"""session-kernel: a pure-functional kernel for agent session event logs.

The names below are the public API contract (docs/architecture.md); code
outside this package relies on them. Everything else is internal.
"""

from kernel.errors import *  # noqa: F403
from kernel.errors import __all__ as _error_names
from kernel.folds.closers import TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN, interrupted_turn_closers
from kernel.folds.context import fold_request_context, fold_todos
from kernel.folds.invariants import Violation, check_invariants
from kernel.folds.messages import derive_messages, project_message
from kernel.folds.pairing import Cut, tool_pairing_cuts
from kernel.folds.request_header import (
    HeaderWriterState,
    canonical_header,
    fold_request_header,
    header_event,
    headers_equal,
)
from kernel.folds.seeds import fork_prefix, last_end_seed
from kernel.folds.surface import Replacement, SurfaceFold, fold_surface
from kernel.log import SessionLog
from kernel.storage.jsonl import Loaded, Scan, load_jsonl, scan_jsonl, write_jsonl
from kernel.storage.zstd import load_jsonl_zstd, scan_jsonl_zstd, write_jsonl_zstd
from kernel.values.events import APPEND, Event, Replace, SessionHeader
from kernel.values.json import FrozenArray, FrozenObject, freeze, thaw
from kernel.wire.chunks import expand_storage_records, pack_chunk_rows
from kernel.wire.codec import event_from_json, event_to_json, header_from_json, header_to_json

__all__ = (
    "APPEND",
    "TOOL_NOT_STARTED",
    "TOOL_OUTCOME_UNKNOWN",
    "Cut",
    "Event",
    "FrozenArray",
    "FrozenObject",
    "HeaderWriterState",
    "Loaded",
    "Replace",
    "Replacement",
    "Scan",
    "SessionHeader",
    "SessionLog",
    "SurfaceFold",
    "Violation",
    "canonical_header",
    "check_invariants",
    "derive_messages",
    "event_from_json",
    "event_to_json",
    "expand_storage_records",
    "fold_request_context",
    "fold_request_header",
    "fold_surface",
    "fold_todos",
    "fork_prefix",
    "freeze",
    "header_event",
    "header_from_json",
    "header_to_json",
    "headers_equal",
    "interrupted_turn_closers",
    "last_end_seed",
    "load_jsonl",
    "load_jsonl_zstd",
    "pack_chunk_rows",
    "project_message",
    "scan_jsonl",
    "scan_jsonl_zstd",
    "thaw",
    "tool_pairing_cuts",
    "write_jsonl",
    "write_jsonl_zstd",
    *_error_names,
)
