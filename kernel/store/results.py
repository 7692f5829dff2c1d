"""What the stores hand back: a stored session's balanced view, a repair report, a listing.

Both stores (JSONL files and SQLite) return the same records, so a caller can
switch layouts without changing how it reads a load, a repair or a listing.
"""

from __future__ import annotations

import attrs
from pyrsistent import PMap, pmap

from kernel.errors import KernelError
from kernel.storage.quarantine import TailRecord
from kernel.values.events import Event, SessionHeader

__all__ = ("RepairReport", "StoredSession", "SessionListing", "UnreadableSession")


@attrs.frozen
class RepairReport:
    """A crash repair (docs/format/persistence.md §6): what was removed and what was appended.

    `location` names the file (or `sqlite:<db>#<session id>`). When `torn`, the
    stored log ends in a torn tail: `torn_from_seq` is the first seq not kept
    (the preserved prefix's length), `truncate_to` / `removed_bytes` the byte
    offset a file is cut back to and how many bytes go (None / 0 for SQLite,
    which deletes rows from `torn_from_seq` on), `dropped_records` how many
    stored records or rows were outside the prefix, and `torn_reason` why.
    `recovered` are events read from a torn Zstandard frame that the repair
    writes back; `closers` the interrupted-turn closers appended. `committed`
    is true only when this report describes writes that were made.

    Nothing removed is lost (docs/format/persistence.md §6.5): `tail_records` are
    the complete, decodable records the removed bytes of a plain JSONL log hold,
    and a committed repair names in `quarantine` where it kept what it removed
    (a file beside the log, or `sqlite:<db>#quarantine/<revision>`).
    """

    location: str
    torn: bool = False
    torn_from_seq: int | None = None
    truncate_to: int | None = None
    removed_bytes: int = 0
    dropped_records: int = 0
    torn_reason: str | None = None
    recovered: tuple[Event, ...] = ()
    closers: tuple[Event, ...] = ()
    committed: bool = False
    tail_records: tuple[TailRecord, ...] = ()
    quarantine: str | None = None

    @property
    def needed(self) -> bool:
        """Whether the stored log needs (or needed) a repair at all."""
        return self.torn or bool(self.closers)


@attrs.frozen
class StoredSession:
    """A session read from a store: its header and balanced events (`prefix + closers`).

    From `inspect`, `repair` is the repair a `load` would commit (nothing was
    written); from `load`, it is the repair this load committed (`needed` is
    false when there was nothing to do) and `events` were re-read afterwards.
    The events never hold the end-seed marker a live session adds.
    `normalized` counts, by shape, the stored events read in an older v0 shape
    and rewritten in memory (docs/format/persistence.md Appendix A).
    """

    header: SessionHeader
    events: tuple[Event, ...]
    repair: RepairReport
    normalized: PMap[str, int] = attrs.field(factory=pmap)


@attrs.frozen
class UnreadableSession:
    """A stored session that a listing could not read, and the error reading it raised.

    `location` names it without the store's own path: in a SQLite store the
    session id; in a JSONL store the path below the root, `<project dir>/<session
    dir>` (or the project directory, or a log file directly inside it, when the
    damage is there). `error` is what `list()` would raise for it: a
    `KernelError`, or the `OSError` of a file or directory that cannot be read.
    """

    location: str
    error: KernelError | OSError


@attrs.frozen
class SessionListing:
    """What `list_readable()` found: the headers it read, and the sessions it could not read.

    `headers` are sorted by id, as `list()` returns them; `unreadable` by location.
    """

    headers: tuple[SessionHeader, ...]
    unreadable: tuple[UnreadableSession, ...] = ()
