"""JSONL session files (docs/format/persistence.md §2, §6.1, §6.2): one file per session.

A thin shell over the pure core: the bytes to write come from `kernel.storage.jsonl`
and `kernel.storage.zstd`, and so does every decision (the durable prefix, the torn
tail, the closers). This module only opens, reads, writes, fsyncs, links and
truncates. Committed bytes are never rewritten; a repair truncates only a torn
tail, holding an exclusive `flock` on the file (appends take it too), and keeps
what it removes in a quarantine file beside the log, durably, before it truncates
(§6.5); `undo_repair` puts the original bytes back.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from kernel.errors import CorruptLog, KernelError, SeqMismatch, SessionHeaderError
from kernel.storage.jsonl import (
    Loaded,
    encode_records,
    load_jsonl,
    option_flag,
    scan_jsonl,
    write_jsonl,
    write_records,
)
from kernel.storage.quarantine import (
    describe_tail_records,
    parse_quarantine_name,
    quarantine_matches,
    records_in_tail,
    restored_bytes,
)
from kernel.storage.zstd import (
    ZSTD_MAGIC,
    check_max_decoded_bytes,
    encode_zstd_frame,
    frame_end,
    load_jsonl_zstd,
    scan_jsonl_zstd,
    write_jsonl_zstd,
)
from kernel.store import files
from kernel.store.batch import (
    admit_stored_header,
    canonical_text,
    check_batch,
    check_replacements,
    needs_stored_surface,
)
from kernel.store.collector import paused_collector
from kernel.store.errors import (
    LiveSessionOpen,
    SessionExists,
    SessionNotFound,
    StoreError,
    StoreLayoutError,
)
from kernel.store.files import store_path, write_new_file, write_quarantine
from kernel.store.paths import (
    PLAIN_NAME,
    ZSTD_NAME,
    checked_session_id,
    project_dir_name,
    session_dir_name,
)
from kernel.store.results import (
    RepairReport,
    SessionListing,
    StoredSession,
    UnreadableSession,
)
from kernel.values.events import DEFAULT_KNOWN_TYPES, Event, SessionHeader, known_type_set
from kernel.values.json import safe_int, summary
from kernel.wire.codec import header_from_json
from kernel.wire.legacy import normalize_events

__all__ = ("JsonlStore", "inspect_file", "repair_file", "undo_repair", "is_zstd_log")

_MAGIC: Final = ZSTD_MAGIC.to_bytes(4, "little")
_READ_CHUNK: Final = 1 << 16
_DIR_MODE: Final = 0o700


# -- small I/O helpers --------------------------------------------------------------------------


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    parts = []
    while chunk := os.read(fd, 1 << 20):
        parts.append(chunk)
    return b"".join(parts)


def _open_inside(root: Path, path: Path, flags: int) -> int:
    """Open `path`, a file below `root`, following no symbolic link below `root`.

    Each directory between the root and the file is opened with `O_NOFOLLOW`
    relative to the one before it, and so is the file: a store reads and writes
    only inside its root, whatever links are planted in it (the root itself
    may be a link). A link is a `StoreLayoutError`.
    """
    parts = path.relative_to(root).parts
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            inner = os.open(
                part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
            )
            os.close(fd)
            fd = inner
        return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise StoreLayoutError(
                f"{path}: a symbolic link inside the store; a store follows no link below its root"
            ) from None
        raise
    finally:
        os.close(fd)


def _read_inside(root: Path, path: Path) -> bytes:
    fd = _open_inside(root, path, os.O_RDONLY)
    try:
        return _read_all(fd)
    finally:
        os.close(fd)


def _refuse_links(root: Path, directory: Path) -> None:
    """Refuse to create or write into `directory` through a link below `root`."""
    probe = root
    for part in directory.relative_to(root).parts:
        probe = probe / part
        if probe.is_symlink():
            raise StoreLayoutError(
                f"{probe}: a symbolic link inside the store; a store follows no link below its root"
            )


def _make_dirs(path: Path) -> None:
    """Create `path` and missing parents owner-only, fsyncing each new entry's parent."""
    missing = []
    probe = path
    while not probe.is_dir():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, _DIR_MODE)
        except FileExistsError:
            if not directory.is_dir():
                raise
            continue
        files.fsync_dir(directory.parent)


def _append_durably(fd: int, payload: bytes) -> None:
    """Write `payload` at the end of an append-mode file and fsync; roll back on failure.

    A failed write or fsync truncates the file back to its previous size (and
    fsyncs) before re-raising, so a retried batch cannot leave duplicate seqs.
    When the rollback fails too, both errors are raised as one ExceptionGroup.
    """
    size = os.fstat(fd).st_size
    try:
        files.write_all(fd, payload)
        os.fsync(fd)
    except Exception as failure:
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        except Exception as rollback_failure:
            raise ExceptionGroup(
                f"append failed and the rollback to {size} bytes failed too; "
                "the file may end in a partial batch (a torn tail the next load repairs)",
                [failure, rollback_failure],
            ) from None
        raise


def is_zstd_log(data: bytes) -> bool:
    """Whether stored bytes are Zstandard-framed (they start with the frame magic)."""
    return data[:4] == _MAGIC


# -- the pure pipeline, by layout ---------------------------------------------------------------


def _load_bytes(
    data: bytes,
    *,
    zstd: bool,
    session_id: str | None,
    now: int,
    known_types: Collection[str],
    normalize: bool = True,
    max_decoded_bytes: int | None = None,
) -> Loaded:
    with paused_collector():
        if zstd:
            return load_jsonl_zstd(
                data,
                session_id=session_id,
                now=now,
                known_types=known_types,
                normalize_legacy=normalize,
                max_decoded_bytes=max_decoded_bytes,
            )
        return load_jsonl(
            data,
            session_id=session_id,
            now=now,
            known_types=known_types,
            normalize_legacy=normalize,
        )


def _report(location: str, loaded: Loaded, data: bytes, *, zstd: bool) -> RepairReport:
    recovered = loaded.torn_frame.recovered if loaded.torn_frame is not None else ()
    prefix_length = len(loaded.events) - len(loaded.closers)
    # A torn Zstandard frame's readable records are `recovered` and written back.
    tail = records_in_tail(data, loaded.committed_bytes) if loaded.torn and not zstd else ()
    return RepairReport(
        location=location,
        torn=loaded.torn,
        torn_from_seq=prefix_length if loaded.torn else None,
        truncate_to=loaded.committed_bytes if loaded.torn else None,
        removed_bytes=loaded.total_bytes - loaded.committed_bytes,
        dropped_records=loaded.dropped_records,
        torn_reason=loaded.torn_reason,
        recovered=recovered if loaded.torn else (),
        closers=loaded.closers,
        tail_records=tail,
    )


def _refuse_intact_tail(report: RepairReport) -> None:
    """The strict-tail option (Decision 14): intact records after damage are refused, not cut."""
    if any(record.terminated for record in report.tail_records):
        raise CorruptLog(
            f"{report.location}: {describe_tail_records(report.tail_records)}; "
            "refused to repair (strict tail: damage is followed by complete records)"
        )


def _repair_payload(
    loaded: Loaded, *, zstd: bool, pack_chunks: bool, ranged_sources: bool = False
) -> bytes:
    """The bytes a repair appends after truncating: closers (and, for Zstandard, the recovered)."""
    if zstd:
        events = (*(loaded.torn_frame.recovered if loaded.torn_frame else ()), *loaded.closers)
        records = bytearray()
        write_records(records, events, pack_chunks=pack_chunks, ranged_sources=ranged_sources)
        return encode_zstd_frame(records) if records else b""
    return encode_records(loaded.closers, pack_chunks=pack_chunks, ranged_sources=ranged_sources)


def _commit_repair(
    fd: int,
    path: Path,
    data: bytes,
    loaded: Loaded,
    *,
    zstd: bool,
    pack_chunks: bool,
    ranged_sources: bool = False,
) -> Path | None:
    """§6.1 / §6.2 / §6.5 on an open, locked file: quarantine the torn tail, truncate to
    the committed end, append the closers, fsync each step; returns the quarantine."""
    quarantine = None
    if loaded.torn:
        quarantine = write_quarantine(path, loaded.committed_bytes, data[loaded.committed_bytes :])
        os.ftruncate(fd, loaded.committed_bytes)
        os.fsync(fd)
    payload = _repair_payload(
        loaded, zstd=zstd, pack_chunks=pack_chunks, ranged_sources=ranged_sources
    )
    if payload:
        os.lseek(fd, 0, os.SEEK_END)
        _append_durably(fd, payload)
    return quarantine


def _converged(
    data: bytes,
    zstd: bool,
    session_id: str | None,
    now: int,
    known: Collection[str],
    normalize: bool = True,
    max_decoded_bytes: int | None = None,
) -> Loaded:
    """Re-plan after a committed repair: nothing may be left to do
    (docs/format/persistence.md §5)."""
    again = _load_bytes(
        data,
        zstd=zstd,
        session_id=session_id,
        now=now,
        known_types=known,
        normalize=normalize,
        max_decoded_bytes=max_decoded_bytes,
    )
    if again.torn or again.closers:
        raise CorruptLog(
            "the committed repair did not converge: the re-read log still needs repair "
            f"(torn={again.torn}, closers={len(again.closers)})"
        )
    return again


# -- single files (the CLI repairs arbitrary paths) ---------------------------------------------


def inspect_file(
    path: str | os.PathLike[str],
    *,
    session_id: str | None = None,
    now: int = 0,
    known_types: Collection[str] = DEFAULT_KNOWN_TYPES,
    normalize_legacy: bool = True,
    max_decoded_bytes: int | None = None,
) -> StoredSession:
    """The balanced view of one JSONL log file (plain or Zstandard, by its first bytes).

    Writes nothing; `repair` describes what `repair_file` would commit.
    `session_id` defaults to the header's own id. `normalize_legacy` and
    `max_decoded_bytes` are `load_jsonl_zstd`'s.
    """
    file = Path(path)
    data = files.read_file(file)
    zstd = is_zstd_log(data)
    loaded = _load_bytes(
        data,
        zstd=zstd,
        session_id=session_id,
        now=now,
        known_types=known_types,
        normalize=normalize_legacy,
        max_decoded_bytes=max_decoded_bytes,
    )
    report = _report(str(file), loaded, data, zstd=zstd)
    return StoredSession(loaded.header, loaded.events, report, loaded.normalized)


def repair_file(
    path: str | os.PathLike[str],
    *,
    now: int,
    dry_run: bool = False,
    pack_chunks: bool = True,
    known_types: Collection[str] = DEFAULT_KNOWN_TYPES,
    strict_tail: bool = False,
    normalize_legacy: bool = True,
    max_decoded_bytes: int | None = None,
    ranged_sources: bool = False,
) -> RepairReport:
    """Commit the crash repair of one JSONL log file (§6.1 / §6.2), exactly once.

    Keeps a torn tail in a quarantine file beside the log (§6.5; the report's
    `quarantine`), truncates it and appends the closers (for Zstandard, the
    events recovered from the torn frame first, in one new frame), then re-reads
    the file and checks nothing is left to repair. With `dry_run` nothing is
    written. The report's `committed` says whether anything was written. With
    `strict_tail`, a torn tail that holds complete records after damage is
    refused (`CorruptLog`) instead of repaired. `normalize_legacy` and
    `max_decoded_bytes` are `load_jsonl_zstd`'s; the stored bytes of an older
    shape are never rewritten, only the closers are appended. `ranged_sources`
    spells the `sourceEventSeqs` of what the repair writes with ranges (§2.5).
    """
    file = Path(path)
    ranged = option_flag(ranged_sources, "ranged_sources")
    fd = os.open(file, (os.O_RDONLY if dry_run else os.O_RDWR) | os.O_CLOEXEC)
    try:
        if not dry_run:
            fcntl.flock(fd, fcntl.LOCK_EX)
        data = _read_all(fd)
        zstd = is_zstd_log(data)
        loaded = _load_bytes(
            data,
            zstd=zstd,
            session_id=None,
            now=now,
            known_types=known_types,
            normalize=normalize_legacy,
            max_decoded_bytes=max_decoded_bytes,
        )
        report = _report(str(file), loaded, data, zstd=zstd)
        if strict_tail:
            _refuse_intact_tail(report)
        if dry_run or not report.needed:
            return report
        quarantine = _commit_repair(
            fd, file, data, loaded, zstd=zstd, pack_chunks=pack_chunks, ranged_sources=ranged
        )
    finally:
        os.close(fd)
    _converged(
        files.read_file(file), zstd, None, now, known_types, normalize_legacy, max_decoded_bytes
    )
    return attrs.evolve(
        report, committed=True, quarantine=None if quarantine is None else str(quarantine)
    )


def undo_repair(
    quarantine: str | os.PathLike[str],
    *,
    known_types: Collection[str] = DEFAULT_KNOWN_TYPES,
    max_decoded_bytes: int | None = None,
) -> Path:
    """Put back the bytes a repair removed: the log is again exactly as it was before it.

    `quarantine` is the file a repair kept beside the log (`RepairReport.quarantine`).
    Refused (`CorruptLog`) when its content does not match its name, or when the log
    has changed since the repair beyond the closers that repair appended, since
    undoing it then would drop later events. The log is truncated to the
    quarantine's offset, the quarantined bytes appended and fsynced, and the
    quarantine removed. Returns the log's path. `max_decoded_bytes` is
    `load_jsonl_zstd`'s, for both reads of a Zstandard log.
    """
    cap = check_max_decoded_bytes(max_decoded_bytes)
    source = Path(quarantine)
    parsed = parse_quarantine_name(source.name)
    if parsed is None:
        raise StoreError(f"{source}: not a quarantine file name (<log>.torn-<offset>-<hash>)")
    log_name, offset, _ = parsed
    removed = files.read_file(source)
    if not quarantine_matches(source.name, removed):
        raise CorruptLog(f"{source}: its content does not match the hash in its name")
    log = source.with_name(log_name)
    fd = os.open(log, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        current = _read_all(fd)
        original = restored_bytes(current, offset, removed)
        zstd = is_zstd_log(original)
        read = functools.partial(
            _load_bytes,
            zstd=zstd,
            session_id=None,
            now=0,
            known_types=known_types,
            max_decoded_bytes=cap,
        )
        before, after = read(original), read(current)
        if after.events != before.events:
            raise CorruptLog(
                f"{log}: the log holds {len(after.events)} events where its repair left "
                f"{len(before.events)}: it changed after the repair, and undoing it would "
                "drop what was appended since"
            )
        os.ftruncate(fd, offset)
        os.fsync(fd)
        os.lseek(fd, 0, os.SEEK_END)
        files.write_all(fd, removed)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.unlink(source)
    files.fsync_dir(log.parent)
    return log


# -- the store ----------------------------------------------------------------------------------


@attrs.define
class _Tail:
    """What an append needs to know about a file it wrote last: its size and next seq."""

    path: Path
    size: int
    next_seq: int


def _is_log_name(name: str) -> bool:
    return name.endswith((".jsonl", ".jsonl.zstd"))


def _flat_layout(entry: Path) -> StoreLayoutError:
    return StoreLayoutError(
        f"{entry}: a log file directly inside a project directory (the obsolete flat layout)"
    )


def _stored_header(record: Any) -> SessionHeader:
    try:
        return header_from_json(record)
    except SessionHeaderError as exc:
        raise CorruptLog(f"stored session header is invalid: {exc}") from exc


class JsonlStore:
    """Sessions as JSONL files under `root` (docs/format/persistence.md §2.2 layout).

    `zstd` selects `session.jsonl.zstd` files (a root holds one encoding only);
    `pack_chunks=False` writes delta chunks unpacked (diagnostics);
    `ranged_sources=True` spells the `sourceEventSeqs` of every record it writes
    (appends and repairs) with DSH 0.1.2's ranges (§2.5), which older readers
    refuse; by default they are plain, byte for byte as before;
    `known_types` is the vocabulary the loader accepts without `ignorable`;
    `strict_tail` refuses to repair a torn tail that holds complete records
    after damage (Decision 14), where by default they are cut and quarantined;
    `normalize_legacy=False` refuses older v0 shapes instead of rewriting them in
    memory (Appendix A); `max_decoded_bytes` caps a Zstandard log's plaintext as
    `load_jsonl_zstd` does (None: its default cap).
    A session lives in `<root>/<project dir>/<session dir>/`, the session
    directory named by `session_dir_name(id)` (long ids are shortened with a
    hash); ids are taken in their canonical spelling (`canonical_text`).

    Not safe to share between threads; separate processes may share a root
    (appends and repairs lock the file), but only one should write a session.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        zstd: bool = False,
        pack_chunks: bool = True,
        known_types: Collection[str] = DEFAULT_KNOWN_TYPES,
        strict_tail: bool = False,
        normalize_legacy: bool = True,
        max_decoded_bytes: int | None = None,
        ranged_sources: bool = False,
    ) -> None:
        self.root = Path(store_path(root, "JsonlStore root"))
        self.normalize_legacy = option_flag(normalize_legacy, "normalize_legacy")
        self.max_decoded_bytes: int | None = check_max_decoded_bytes(max_decoded_bytes)
        self.zstd = zstd
        self.strict_tail = strict_tail
        self.pack_chunks = pack_chunks
        self.ranged_sources = option_flag(ranged_sources, "ranged_sources")
        self.known_types = known_type_set(known_types)
        self._name = ZSTD_NAME if zstd else PLAIN_NAME
        self._other_name = PLAIN_NAME if zstd else ZSTD_NAME
        self._pending: dict[str, SessionHeader] = {}
        self._paths: dict[str, Path] = {}
        self._tails: dict[str, _Tail] = {}

    # -- locating ---------------------------------------------------------------------------

    def _locate(self, session_id: str) -> Path | None:
        """The file of a materialized session, found under any project directory."""
        cached = self._paths.get(checked_session_id(session_id))
        if cached is not None and cached.is_file():
            return cached
        segment = session_dir_name(session_id)
        if not self.root.is_dir():
            return None
        hits = []
        with os.scandir(self.root) as entries:
            for entry in entries:
                if not entry.is_dir(follow_symlinks=False):
                    continue
                directory = Path(entry.path) / segment
                if (directory / self._other_name).exists():
                    raise StoreLayoutError(
                        f"{directory / self._other_name}: this root is configured for "
                        f"{self._name} files (one encoding per root)"
                    )
                if (directory / self._name).is_file():
                    hits.append(directory / self._name)
        if len(hits) > 1:
            raise StoreLayoutError(
                f"session {session_id!r} is stored under {len(hits)} project directories: "
                + ", ".join(str(h) for h in sorted(hits))
            )
        if not hits:
            return None
        self._paths[session_id] = hits[0]
        return hits[0]

    def _path_of(self, session_id: str) -> Path:
        path = self._locate(session_id)
        if path is None:
            raise SessionNotFound(f"no stored session {session_id!r} under {self.root}")
        return path

    def path_of(self, session_id: str) -> Path:
        """The file a materialized session is stored in (SessionNotFound otherwise)."""
        return self._path_of(canonical_text(session_id))

    def _check_location(self, path: Path, header: SessionHeader) -> None:
        """The header's `id` and `cwd` must map to where the file was found (§2.2)."""
        expected = (project_dir_name(header.cwd), session_dir_name(header.id))
        found = (path.parent.parent.name, path.parent.name)
        if found != expected:
            raise CorruptLog(
                f"{path}: the header (id {header.id!r}, cwd {header.cwd!r}) belongs at "
                f"{expected[0]}/{expected[1]}, not {found[0]}/{found[1]}"
            )

    # -- create and append ------------------------------------------------------------------

    def create(self, header: SessionHeader | Mapping[str, Any]) -> SessionHeader:
        """Register a new session; nothing is written until its first non-empty append.

        Raises `SessionHeaderError` for an invalid header and `SessionExists`
        when the id is already stored or already created in this store.
        """
        admitted = admit_stored_header(header)
        if admitted.id in self._pending or self._locate(admitted.id) is not None:
            raise SessionExists(f"session {admitted.id!r} already exists under {self.root}")
        self._pending[admitted.id] = admitted
        return admitted

    def append(self, session_id: str, events: Iterable[Event]) -> None:
        """Append one batch durably (fsynced when this returns); an empty batch is a no-op.

        The batch must continue the stored log (`SeqMismatch`); retired
        vocabulary is refused (`LegacyFormat`), and so is whatever this store's
        loader would refuse or could not repair (Decision 15): a payload of the
        wrong shape (R10-R12), surface metadata or citations an event may not
        carry (R5-R7), a replace its surface would not take (R7f-R9: a batch
        holding a replace reads the stored log to judge it), a type outside
        `known_types` that is not ignorable, an unanswerable tool call (R14).
        The first non-empty append of a created session materializes its file.
        """
        self._append(session_id, events, planned=False)

    def _append_planned(self, session_id: str, events: Iterable[Event]) -> None:
        """`append` of a batch that a `SessionLog` continuing the stored log admitted (a
        live session's commit): its replacements were planned over the stored surface, so
        the stored log is not read again to judge them."""
        self._append(session_id, events, planned=True)

    def _append(self, session_id: str, events: Iterable[Event], *, planned: bool) -> None:
        session_id = canonical_text(checked_session_id(session_id))
        batch = check_batch(events, known_types=self.known_types)
        pending = self._pending.get(session_id)
        if pending is not None:
            if self._locate(session_id) is not None:
                del self._pending[session_id]
                raise SessionExists(f"session {session_id!r} was materialized by another writer")
            if batch:
                self._materialize(pending, batch)
            return
        path = self._path_of(session_id)
        if batch:
            self._append_file(session_id, path, batch, planned)

    def _encode(self, batch: tuple[Event, ...]) -> bytes:
        if not self.zstd:
            return encode_records(
                batch, pack_chunks=self.pack_chunks, ranged_sources=self.ranged_sources
            )
        records = bytearray()
        write_records(
            records, batch, pack_chunks=self.pack_chunks, ranged_sources=self.ranged_sources
        )
        return encode_zstd_frame(records)

    def _materialize(self, header: SessionHeader, batch: tuple[Event, ...]) -> None:
        """§2.3: header and first batch become visible together, or not at all."""
        if batch[0].seq != 0:
            raise SeqMismatch(
                f"session {header.id!r}: the first batch starts at seq {batch[0].seq}; expected 0",
                seq=batch[0].seq,
            )
        if needs_stored_surface(batch):
            check_replacements((), batch)
        write = write_jsonl_zstd if self.zstd else write_jsonl
        data = write(
            header, batch, pack_chunks=self.pack_chunks, ranged_sources=self.ranged_sources
        )
        directory = self.root / project_dir_name(header.cwd) / session_dir_name(header.id)
        _refuse_links(self.root, directory)
        _make_dirs(directory)
        final = directory / self._name
        if not write_new_file(final, data):
            raise SessionExists(f"session {header.id!r} was materialized concurrently")
        del self._pending[header.id]
        self._paths[header.id] = final
        self._tails[header.id] = _Tail(final, len(data), batch[-1].seq + 1)

    def _scan_tail(self, session_id: str, path: Path) -> int:
        """The next seq of a stored file; refuses a file that ends in a torn tail."""
        data = _read_inside(self.root, path)
        if self.zstd:
            scan = scan_jsonl_zstd(data, max_decoded_bytes=self.max_decoded_bytes)
        else:
            scan = scan_jsonl(data)
        if scan.header.get("id") != session_id:
            raise CorruptLog(f"{path}: the header names session {scan.header.get('id')!r}")
        if scan.torn:
            raise CorruptLog(
                f"{path}: invalid physical tail ({scan.torn_reason}); load the session to "
                "commit its repair before appending"
            )
        self._tails[session_id] = _Tail(path, len(data), len(scan.events))
        return len(scan.events)

    def _append_file(
        self, session_id: str, path: Path, batch: tuple[Event, ...], planned: bool
    ) -> None:
        fd = _open_inside(self.root, path, os.O_WRONLY | os.O_APPEND)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            tail = self._tails.get(session_id)
            if tail is not None and tail.path == path and tail.size == size:
                next_seq = tail.next_seq
            else:
                next_seq = self._scan_tail(session_id, path)
            if batch[0].seq != next_seq:
                raise SeqMismatch(
                    f"session {session_id!r}: batch starts at seq {batch[0].seq}, "
                    f"but the stored log continues at {next_seq} (R4)",
                    seq=batch[0].seq,
                )
            if not planned and needs_stored_surface(batch):
                check_replacements(self._stored_events(session_id, path, next_seq), batch)
            payload = self._encode(batch)
            self._tails.pop(session_id, None)
            _append_durably(fd, payload)
            self._tails[session_id] = _Tail(path, size + len(payload), batch[-1].seq + 1)
        finally:
            os.close(fd)

    def _stored_events(self, session_id: str, path: Path, next_seq: int) -> Sequence[Event]:
        """The events of a stored file as its loader reads them, without closers: what a
        replace in the next batch is judged against (`check_replacements`)."""
        loaded = self._plan(session_id, path, _read_inside(self.root, path), 0)
        stored = len(loaded.events) - len(loaded.closers)
        if loaded.torn or stored != next_seq:
            raise CorruptLog(
                f"{path}: the log its loader reads ends at seq {stored - 1}, not {next_seq - 1}; "
                "load the session to commit its repair before appending"
            )
        return loaded.events[:stored]

    # -- reading ----------------------------------------------------------------------------

    def _plan(self, session_id: str, path: Path, data: bytes, now: int) -> Loaded:
        loaded = _load_bytes(
            data,
            zstd=self.zstd,
            session_id=session_id,
            now=now,
            known_types=self.known_types,
            normalize=self.normalize_legacy,
            max_decoded_bytes=self.max_decoded_bytes,
        )
        self._check_location(path, loaded.header)
        return loaded

    def inspect(self, session_id: str, *, now: int = 0) -> StoredSession:
        """The balanced view `(header, prefix + closers)`, computed in memory; writes nothing."""
        session_id = canonical_text(checked_session_id(session_id))
        path = self._path_of(session_id)
        data = _read_inside(self.root, path)
        loaded = self._plan(session_id, path, data, now)
        report = _report(str(path), loaded, data, zstd=self.zstd)
        return StoredSession(loaded.header, loaded.events, report, loaded.normalized)

    def load(self, session_id: str, *, now: int, adopt_live: bool = False) -> StoredSession:
        """Like `inspect`, then commit any needed repair durably, once, and re-read.

        With `adopt_live` (the session is still owned by a live writer, e.g.
        after a hot reload) a torn tail is truncated but closers are never
        appended: an open last turn raises `LiveSessionOpen` instead. A torn tail
        is kept in a quarantine file beside the log before it is cut (§6.5; the
        report's `quarantine`); with the store's `strict_tail`, one that holds
        complete records after damage is refused (`CorruptLog`) instead.
        """
        session_id = canonical_text(checked_session_id(session_id))
        path = self._path_of(session_id)
        fd = _open_inside(self.root, path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            data = _read_all(fd)
            loaded = self._plan(session_id, path, data, now)
            report = _report(str(path), loaded, data, zstd=self.zstd)
            if self.strict_tail:
                _refuse_intact_tail(report)
            if adopt_live and loaded.closers:
                raise LiveSessionOpen(
                    f"session {session_id!r} is owned by a live writer and its last turn is open"
                )
            if not report.needed:
                return StoredSession(loaded.header, loaded.events, report, loaded.normalized)
            self._tails.pop(session_id, None)
            quarantine = _commit_repair(
                fd,
                path,
                data,
                loaded,
                zstd=self.zstd,
                pack_chunks=self.pack_chunks,
                ranged_sources=self.ranged_sources,
            )
        finally:
            os.close(fd)
        again = _converged(
            _read_inside(self.root, path),
            self.zstd,
            session_id,
            now,
            self.known_types,
            self.normalize_legacy,
            self.max_decoded_bytes,
        )
        kept = None if quarantine is None else str(quarantine)
        report = attrs.evolve(report, committed=True, quarantine=kept)
        return StoredSession(again.header, again.events, report, again.normalized)

    def read_from(self, session_id: str, from_seq: int) -> tuple[Event, ...]:
        """Stored events with `seq >= from_seq` from the valid prefix: no repair, no closers."""
        start = safe_int(from_seq)
        if start is None or start < 0 or type(from_seq) is bool:
            raise StoreError(
                f"from_seq must be a non-negative safe integer, got {summary(from_seq)}"
            )
        session_id = canonical_text(checked_session_id(session_id))
        path = self._path_of(session_id)
        data = _read_inside(self.root, path)
        if self.zstd:
            scan = scan_jsonl_zstd(data, max_decoded_bytes=self.max_decoded_bytes)
        else:
            scan = scan_jsonl(data)
        if scan.header.get("id") != session_id:
            raise CorruptLog(f"{path}: the header names session {scan.header.get('id')!r}")
        events = scan.events
        if self.normalize_legacy:
            # A.5: an older shape may need facts from before the suffix.
            events, _ = normalize_events(events, session_id=session_id)
        return events[start:]

    def list(self) -> tuple[SessionHeader, ...]:
        """Headers of materialized sessions (sorted by id), read without parsing whole logs.

        All or nothing: the listing fails on the first session it cannot read,
        with the error reading it raises. That is `StoreLayoutError` for a file
        of the other encoding, a log file directly inside a project directory
        (the obsolete flat layout) or one id under two project directories;
        `CorruptLog` (naming the file) for a header that is damaged or does not
        map to its path; `UnsupportedFormat` for a foreign format version. To
        list past a damaged session, use `list_readable()`.
        """
        if not self.root.is_dir():
            return ()
        found: dict[str, tuple[Path, SessionHeader]] = {}
        for project in sorted(p for p in self.root.iterdir() if p.is_dir()):
            for entry in sorted(project.iterdir()):
                if not entry.is_dir():
                    if _is_log_name(entry.name):
                        raise _flat_layout(entry)
                    continue
                path = self._session_file(entry)
                if path is None:
                    continue
                header = self._checked_header(path)
                if header.id in found:
                    raise StoreLayoutError(
                        f"session {header.id!r} is stored twice: {found[header.id][0]} and {path}"
                    )
                found[header.id] = (path, header)
        return tuple(found[k][1] for k in sorted(found))

    def list_readable(self) -> SessionListing:
        """Every header `list()` would return, going past the sessions it cannot read.

        Reads what `list()` reads, each session file's first line (or first
        frame), and the same rules make a session unreadable; each such session
        is one `UnreadableSession` instead of the error, named by its path below
        the root, and the walk goes on. A project directory that is a symbolic
        link or cannot be listed is one entry (its sessions are unknown), and an
        id stored under two project directories is one entry per place. Nothing
        is opened through a link below the root, and nothing is written.
        """
        if not self.root.is_dir():
            return SessionListing(())
        places: dict[str, list[tuple[str, Path, SessionHeader]]] = {}
        unreadable: list[UnreadableSession] = []
        for project in sorted(p for p in self.root.iterdir() if p.is_dir()):
            try:
                if project.is_symlink():
                    raise StoreLayoutError(
                        f"{project}: a symbolic link inside the store; "
                        "a store follows no link below its root"
                    )
                entries = sorted(project.iterdir())
            except (StoreLayoutError, OSError) as exc:
                unreadable.append(UnreadableSession(project.name, exc))
                continue
            for entry in entries:
                location = f"{project.name}/{entry.name}"
                try:
                    if not entry.is_dir():
                        if _is_log_name(entry.name):
                            raise _flat_layout(entry)
                        continue
                    path = self._session_file(entry)
                    if path is None:
                        continue
                    header = self._checked_header(path)
                except (KernelError, OSError) as exc:
                    unreadable.append(UnreadableSession(location, exc))
                    continue
                places.setdefault(header.id, []).append((location, path, header))
        headers = []
        for session_id in sorted(places):
            found = places[session_id]
            if len(found) == 1:
                headers.append(found[0][2])
                continue
            twice = StoreLayoutError(
                f"session {session_id!r} is stored under {len(found)} project directories: "
                + ", ".join(str(path) for _, path, _ in found)
            )
            unreadable.extend(UnreadableSession(location, twice) for location, _, _ in found)
        unreadable.sort(key=lambda item: item.location)
        return SessionListing(tuple(headers), tuple(unreadable))

    def _session_file(self, directory: Path) -> Path | None:
        """The session file of a session directory, or None when it holds none.

        A file of the other encoding is `StoreLayoutError`: a root holds one.
        """
        if (directory / self._other_name).exists():
            raise StoreLayoutError(
                f"{directory / self._other_name}: this root is configured for "
                f"{self._name} files (one encoding per root)"
            )
        path = directory / self._name
        return path if path.is_file() else None

    def read_header(self, path: str | os.PathLike[str]) -> SessionHeader:
        """The stored header of one session file of this store, checked against its place.

        `path` is a session file as a walk of the root finds it:
        `<root>/<project dir>/<session dir>/session.jsonl` (`session.jsonl.zstd`
        for a Zstandard store). Only its first line (or first frame) is read,
        through no symbolic link below the root, and nothing is written. This is
        what `list()` and `list_readable()` read of each session. Raises
        `StoreLayoutError` for a path that is not a session file's place in this
        store or is reached through a link, `CorruptLog` (naming the file) for a
        damaged header or one whose `id` and `cwd` belong elsewhere (§2.2), and
        `UnsupportedFormat` for a foreign format version.
        """
        file = Path(path)
        try:
            inside = Path(os.path.abspath(file)).relative_to(os.path.abspath(self.root))
        except ValueError:
            inside = None
        if inside is None or len(inside.parts) != 3 or inside.name != self._name:
            raise StoreLayoutError(
                f"{file}: not a session file of the store {self.root} "
                f"(<root>/<project dir>/<session dir>/{self._name})"
            )
        return self._checked_header(self.root / inside)

    def _checked_header(self, path: Path) -> SessionHeader:
        """`_read_header`, then the location rule; damage is named by its file."""
        try:
            header = self._read_header(path)
        except CorruptLog as exc:
            raise CorruptLog(f"{path}: {exc}", index=exc.index, seq=exc.seq) from exc
        self._check_location(path, header)
        return header

    def _read_header(self, path: Path) -> SessionHeader:
        """The header of a log file, reading only its first line (or first frame).

        Each read asks for as many bytes as are buffered already, so a header of
        any size costs a number of reads and frame walks logarithmic in its size
        and bytes read linear in it.
        """
        buffer = bytearray()
        cap = self.max_decoded_bytes
        with os.fdopen(_open_inside(self.root, path, os.O_RDONLY), "rb") as f:
            while True:
                searched = len(buffer)
                chunk = f.read(max(_READ_CHUNK, searched))
                buffer += chunk
                if self.zstd:
                    end = frame_end(bytes(buffer), 0) if buffer else None
                    if end is not None:
                        scan = scan_jsonl_zstd(bytes(buffer[:end]), max_decoded_bytes=cap)
                        break
                else:
                    newline = buffer.find(b"\n", searched)
                    if newline != -1:
                        scan = scan_jsonl(bytes(buffer[: newline + 1]))
                        break
                if not chunk:
                    data = bytes(buffer)
                    if self.zstd:
                        scan = scan_jsonl_zstd(data, max_decoded_bytes=cap)
                    else:
                        scan = scan_jsonl(data)
                    break
        return _stored_header(scan.header)

    def __repr__(self) -> str:
        return f"JsonlStore({str(self.root)!r}, zstd={self.zstd})"
