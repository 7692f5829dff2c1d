"""Where a JSONL session lives under a store root (docs/format/persistence.md §2.2).

Pure string functions: `project_key` (lossy, for humans) names the project
directory, `encode_segment` (injective, so ids never escape the root or collide)
encodes an id, and `session_dir_name` names the session directory: the
encoded id, or, when that is longer than a file name may be, a readable prefix
plus a SHA-256 of the whole encoding. All walk UTF-16 code units, as the
compatible writer does, so non-BMP characters and lone surrogates encode unit
by unit. Existing names must never change: stored logs are found by them.
"""

from __future__ import annotations

import hashlib
from typing import Final

from kernel.store.errors import StoreError
from kernel.values.json import summary

__all__ = (
    "NO_CWD_DIR",
    "PLAIN_NAME",
    "ZSTD_NAME",
    "project_key",
    "project_dir_name",
    "encode_segment",
    "session_dir_name",
    "checked_session_id",
    "MAX_NAME_BYTES",
)

NO_CWD_DIR: Final = "_no-cwd"
PLAIN_NAME: Final = "session.jsonl"
ZSTD_NAME: Final = "session.jsonl.zstd"

_KEPT: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_SEPARATORS: Final = frozenset(b"/\\:")
_MAX_SLUG: Final = 251

MAX_NAME_BYTES: Final = 255
"""The longest file name (in bytes) the common file systems accept (NAME_MAX)."""
_HASH_MARK: Final = "~~"
_HASH_HEX: Final = 64
_HASHED_PREFIX: Final = MAX_NAME_BYTES - len(_HASH_MARK) - _HASH_HEX


def _code_units(text: str) -> list[int]:
    data = text.encode("utf-16-le", "surrogatepass")
    return [data[i] | (data[i + 1] << 8) for i in range(0, len(data), 2)]


def _escape(unit: int) -> str:
    return f"~{unit:04X}"


def project_key(cwd: str) -> str:
    """The project directory name of a working directory (lossy; for humans).

    >>> project_key("/projects/my demo")
    '--projects-my~0020demo--'
    """
    parts: list[str] = []
    after_separator = False
    for unit in _code_units(cwd):
        if unit in _SEPARATORS:
            if not after_separator:
                parts.append("-")
            after_separator = True
            continue
        after_separator = False
        parts.append(chr(unit) if unit in _KEPT else _escape(unit))
    slug = "".join(parts).lstrip("-") or "root"
    return f"--{slug[:_MAX_SLUG]}--"


def project_dir_name(cwd: str | None) -> str:
    """`_no-cwd` for a header without `cwd`, else `project_key(cwd)`."""
    return NO_CWD_DIR if cwd is None else project_key(cwd)


def checked_session_id(session_id: object) -> str:
    """`session_id` itself when it is a non-empty string, else the `StoreError` naming it.

    >>> checked_session_id("demo")
    'demo'
    """
    if type(session_id) is not str or not session_id:
        raise StoreError(f"a session id must be a non-empty string, got {summary(session_id)}")
    return session_id


def _segment_pieces(session_id: str) -> list[str]:
    checked_session_id(session_id)
    if session_id == ".":
        return ["~002E"]
    if session_id == "..":
        return ["~002E", "~002E"]
    return [chr(u) if u in _KEPT else _escape(u) for u in _code_units(session_id)]


def encode_segment(session_id: str) -> str:
    """The encoding of an id: injective, never `.`/`..`, never a separator.

    >>> encode_segment("a/b~c"), encode_segment("..")
    ('a~002Fb~007Ec', '~002E~002E')
    """
    return "".join(_segment_pieces(session_id))


def session_dir_name(session_id: str) -> str:
    """The session directory name of an id: `encode_segment(id)` when it fits a file name.

    An encoding longer than `MAX_NAME_BYTES` (255; it is ASCII) cannot be a
    directory name, so it is shortened: its longest prefix of at most 189
    characters that does not split a `~XXXX` escape, then `~~`, then the
    lower-case hex SHA-256 of the whole encoding. `encode_segment` never writes
    `~~`, so a shortened name never equals an unshortened one, and two ids
    share a name only if SHA-256 collides. The name depends on the id alone
    (no salt, no process state), so every process finds the same directory.

    >>> session_dir_name("demo")
    'demo'
    >>> name = session_dir_name("x" * 300)
    >>> len(name), name[:3], name[189:191]
    (255, 'xxx', '~~')
    """
    pieces = _segment_pieces(session_id)
    segment = "".join(pieces)
    if len(segment) <= MAX_NAME_BYTES:
        return segment
    prefix: list[str] = []
    size = 0
    for piece in pieces:
        if size + len(piece) > _HASHED_PREFIX:
            break
        prefix.append(piece)
        size += len(piece)
    digest = hashlib.sha256(segment.encode("ascii")).hexdigest()
    return "".join(prefix) + _HASH_MARK + digest
