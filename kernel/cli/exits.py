"""The exit statuses of `session-kernel`, one per kind of outcome, shared by every command.

0    success; for `verify`, every log verifies (a torn tail, or an interrupted
     final turn that repairs cleanly, still counts as success)
1    a log is invalid: corrupt (`CorruptLog`), inadmissible, or (`verify`) it
     breaks a relational invariant, fails repair or provider tool pairing
2    usage: bad arguments, a path that does not exist, no logs found; for
     `inspect`/`repair` also a log that cannot be read (`verify` counts an
     unreadable log as invalid)
3    a log is in a format this reader does not support (`UnsupportedFormat`),
     and none is invalid
4    internal error: the kernel raised something other than a `KernelError`
     (a bug, not a verdict on the log)
130  interrupted (Ctrl-C)
"""

from __future__ import annotations

from typing import Final

__all__ = ("OK", "INVALID", "USAGE", "UNSUPPORTED", "INTERNAL", "INTERRUPTED", "EPILOG")

OK: Final = 0
INVALID: Final = 1
USAGE: Final = 2
UNSUPPORTED: Final = 3
INTERNAL: Final = 4
INTERRUPTED: Final = 130

EPILOG: Final = """\
exit status:
  0    success (verify: every log verifies; a torn tail or an interrupted
       final turn that repairs cleanly still counts as success)
  1    a log is invalid: corrupt, inadmissible, or (verify) it breaks a
       relational invariant, fails repair, or fails provider tool pairing
  2    usage error: bad arguments, missing path, no logs found, or
       (inspect/repair) the log cannot be read
  3    a log uses a format this reader does not support (and none is invalid)
  4    internal error (a kernel bug, not a verdict on the log)
  130  interrupted
"""
