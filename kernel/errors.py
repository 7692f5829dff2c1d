"""Every rejection the kernel makes: `KernelError` and one subclass per family of rule.

Callers catch a family (`except SurfaceError`), tests assert the exact class.
Messages name the event (seed index or seq) and the rule; the class and the
`index`/`seq`/`rule` attributes are the contract, the wording is not.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = (
    "KernelError",
    "SessionLogError",
    "NotLosslessJson",
    "InvalidEnvelope",
    "LegacyFormat",
    "SeqMismatch",
    "SurfaceError",
    "SurfaceMarkerError",
    "ReplaceRangeError",
    "ToolResultRewriteError",
    "ProvenanceError",
    "ShapeError",
    "MessageShapeError",
    "RequestHeaderShapeError",
    "EventShapeError",
    "SessionHeaderError",
    "InvariantViolation",
    "MalformedChunkRow",
    "CorruptLog",
    "UnsupportedFormat",
    "UnknownEventType",
    "LimitExceeded",
    "ToolPairingError",
    "ForkError",
)

_CITED_RULE: Final = re.compile(r"\((R[0-9]+[a-z]?|H[0-9]+|A\.[0-9])\)")


def _rule_cited(message: str) -> str | None:
    """The rule id a message cites first as `(R7d)`, `(H7)` or `(A.2)`, or None.

    >>> _rule_cited("stored event at index 3: sourceEventSeqs must be earlier (R7d)")
    'R7d'
    """
    match = _CITED_RULE.search(message)
    return None if match is None else match.group(1)


class KernelError(ValueError):
    """Base of every error the kernel raises on bad input.

    `index` is the zero-based position of the offending input event (seed,
    restore), `seq` the offending event's seq, when known. `rule` is the id of
    the rule broken (`"R7d"`, `"H7"`, `"A.2"`; docs/format/admission.md), given
    or else the first one the message cites, None when it names none; an error
    that wraps another (a `CorruptLog` from a load) carries its cause's.
    """

    def __init__(
        self,
        message: str,
        *,
        index: int | None = None,
        seq: int | None = None,
        rule: str | None = None,
    ):
        super().__init__(message)
        self.index = index
        self.seq = seq
        self.rule = rule if rule is not None else _rule_cited(message)


SessionLogError = KernelError
"""The spec's name for the base class."""


class NotLosslessJson(KernelError):
    """R1: a value outside the lossless-JSON domain (docs/format/events.md §1)."""


class InvalidEnvelope(KernelError):
    """R2: the event envelope (type, seq, time, data, ignorable) is malformed."""


class LegacyFormat(KernelError):
    """R3: retired vocabulary (`request/header-delta`, `mode/set`, reason `fallback`)."""


class SeqMismatch(KernelError):
    """R4: seqs are not contiguous from 0 (or from a window's base)."""


class SurfaceError(KernelError):
    """Family of surface rules R5, R6, R8, R9."""


class SurfaceMarkerError(SurfaceError):
    """R5/R6: surface eligibility or the replace-op shape."""


class ReplaceRangeError(SurfaceError):
    """R8: a replace endpoint is not on the current surface, or the range is reversed."""


class ToolResultRewriteError(SurfaceError):
    """R9: a tool/result replacement that does more than rewrite one result's content."""


class ProvenanceError(KernelError):
    """R7: `sourceEventSeqs` malformed, not earlier, or not covering the shadowed nodes."""


class ShapeError(KernelError):
    """Family of payload-shape rules R10, R11, R12."""


class MessageShapeError(ShapeError):
    """R10: an embedded message has the wrong shape."""


class RequestHeaderShapeError(ShapeError):
    """R11: a `request/header` payload (or a header given to a utility) is malformed."""


class EventShapeError(ShapeError):
    """R12: a core event's payload has the wrong structure."""


class SessionHeaderError(KernelError):
    """docs/format/admission.md §6: the session header record is invalid."""


class InvariantViolation(KernelError):
    """docs/format/folds.md §6: a relational invariant (turn/step enclosure, call pairing) fails."""


class MalformedChunkRow(KernelError):
    """docs/format/events.md §7.6: a packed chunk row that cannot be expanded."""


class CorruptLog(KernelError):
    """Stored data is damaged inside the committed region, or fails restore admission."""


class UnsupportedFormat(KernelError):
    """Nothing is damaged, but this reader cannot interpret the log (foreign version).

    Deliberately not a `CorruptLog`.
    """


class UnknownEventType(UnsupportedFormat):
    """A stored event type outside the known vocabulary without `ignorable: true`."""


class LimitExceeded(KernelError):
    """A configurable resource limit stops the read (e.g. `max_decoded_bytes`).

    Nothing is known to be damaged: a caller that trusts the input can pass a
    larger limit and read it. Deliberately neither a `CorruptLog` nor an
    `UnsupportedFormat`. `limit` is the limit that was exceeded, `offset` the
    byte offset (in the stored log) of the frame or record where it was.
    """

    def __init__(self, message: str, *, limit: int, offset: int | None = None):
        super().__init__(message)
        self.limit = limit
        self.offset = offset


class ToolPairingError(KernelError):
    """docs/format/folds.md §5: the surface has a result with no call, or a query names no node."""


class ForkError(KernelError):
    """docs/format/folds.md §8: a fork boundary is invalid (`code` says why)."""

    INVALID_BOUNDARY = "INVALID_BOUNDARY"
    OPEN_TURN = "OPEN_TURN"

    def __init__(self, message: str, *, code: str):
        super().__init__(message)
        self.code = code
