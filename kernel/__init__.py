"""session-kernel: a pure-functional kernel for agent session event logs.

The public API below is a contract (see docs/architecture.md); everything else
is internal.
"""

from kernel.codec import event_from_json, event_to_json, header_from_json, header_to_json
from kernel.errors import *  # noqa: F403
from kernel.errors import __all__ as _error_names
from kernel.events import APPEND, Event, Replace, SessionHeader
from kernel.header import canonical_header, fold_request_header
from kernel.json import FrozenArray, FrozenObject, freeze, thaw
from kernel.log import SessionLog
from kernel.messages import derive_messages, project_message
from kernel.surface import Replacement, SurfaceFold, fold_surface

__all__ = (
    "APPEND",
    "Event",
    "FrozenArray",
    "FrozenObject",
    "Replace",
    "SessionHeader",
    "SessionLog",
    "Replacement",
    "SurfaceFold",
    "canonical_header",
    "derive_messages",
    "fold_request_header",
    "fold_surface",
    "project_message",
    "event_from_json",
    "event_to_json",
    "freeze",
    "header_from_json",
    "header_to_json",
    "thaw",
    *_error_names,
)
