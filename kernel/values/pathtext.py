"""Path text judged the same on every host: what header rule H7 calls an absolute path.

A session header's `cwd` is data written on one machine and read on another,
so whether it is absolute is a property of the text alone, never of the host
reading it (`os.path.isabs` answers differently on Linux and on Windows). The
definition lives in docs/format/admission.md (rule H7); the decision and the
forms considered are in the design record
docs/rfc/implemented/bug-fix/2026-12-01-host-independent-absolute-paths.md.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ("is_absolute_path",)

_DRIVE: Final = re.compile(r"[A-Za-z]:[\\/]")
_UNC: Final = re.compile(r"\\\\[^\\/]+[\\/][^\\/]")


def is_absolute_path(text: str) -> bool:
    """Whether `text` is an absolute path on some host, read without asking this one.

    Absolute: a POSIX path starting with `/` (`//server/share` included); a
    Windows drive path `X:\\...` or `X:/...` with an ASCII letter `X`; a UNC path
    `\\\\server\\share...` whose server and share names are non-empty (either
    separator after the server name). The Win32 namespaces `\\\\?\\...` and
    `\\\\.\\...` have that shape and count when a second component follows.
    Not absolute: the empty string, relative paths (`a/b`, `./a`), `~` paths,
    a drive-relative `C:foo` or bare `C:`, a root-relative `\\a` (it names a
    different directory on each drive), `\\\\server` without a share.

    >>> [is_absolute_path(p) for p in ("/srv", "C:\\\\w", "d:/w", "\\\\\\\\fs\\\\home")]
    [True, True, True, True]
    >>> [is_absolute_path(p) for p in ("", "a/b", "~/w", "C:w", "\\\\w", "\\\\\\\\fs")]
    [False, False, False, False, False, False]
    """
    if text.startswith("/"):
        return True
    return _DRIVE.match(text) is not None or _UNC.match(text) is not None
