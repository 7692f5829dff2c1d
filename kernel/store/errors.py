"""Store-level rejections, all `KernelError`s, beside the kernel's own families.

Damage to stored data is the kernel's `CorruptLog`; a database or layout this
reader will not touch is `UnsupportedFormat` (`ForeignStore`); everything here
is about how the store is used (unknown id, id taken, a concurrent writer).
"""

from __future__ import annotations

from kernel.errors import KernelError, UnsupportedFormat

__all__ = (
    "StoreError",
    "SessionNotFound",
    "SessionExists",
    "StoreLayoutError",
    "StaleRepair",
    "LiveSessionOpen",
    "ForeignStore",
)


class StoreError(KernelError):
    """Base of the store's own rejections."""


class SessionNotFound(StoreError, LookupError):
    """No materialized (or created) session has this id."""


class SessionExists(StoreError):
    """`create` of an id that already has stored data (or is already created)."""


class StoreLayoutError(StoreError):
    """The JSONL root breaks the layout rules of docs/format/persistence.md §2.2."""


class StaleRepair(StoreError):
    """The stored log changed between planning a repair and committing it (§6.3)."""


class LiveSessionOpen(StoreError):
    """A session owned by a live writer has an open turn; it must not be crash-repaired."""


class ForeignStore(UnsupportedFormat):
    """A database this reader refuses to open (docs/format/persistence.md §7.1 opening rules)."""
