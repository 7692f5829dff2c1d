"""Where a JSONL session lives under a store root (persistence.md §2.2).

Pure string functions: `project_key` (lossy, for humans) names the project
directory, `encode_segment` (injective, so ids never escape the root or collide)
names the session directory. Both walk UTF-16 code units, as the compatible
writer does, so non-BMP characters and lone surrogates encode unit by unit.
"""

from __future__ import annotations

from typing import Final

from kernel.store.errors import StoreError

__all__ = (
    "NO_CWD_DIR",
    "PLAIN_NAME",
    "ZSTD_NAME",
    "project_key",
    "project_dir_name",
    "encode_segment",
)

NO_CWD_DIR: Final = "_no-cwd"
PLAIN_NAME: Final = "session.jsonl"
ZSTD_NAME: Final = "session.jsonl.zstd"

_KEPT: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_SEPARATORS: Final = frozenset(b"/\\:")
_MAX_SLUG: Final = 251


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


def encode_segment(session_id: str) -> str:
    """The session directory name of an id: injective, never `.`/`..`, never a separator.

    >>> encode_segment("a/b~c"), encode_segment("..")
    ('a~002Fb~007Ec', '~002E~002E')
    """
    if type(session_id) is not str or not session_id:
        raise StoreError(f"a session id must be a non-empty string, got {session_id!r}")
    if session_id == ".":
        return "~002E"
    if session_id == "..":
        return "~002E~002E"
    return "".join(chr(u) if u in _KEPT else _escape(u) for u in _code_units(session_id))
