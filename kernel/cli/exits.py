"""The exit statuses of `session-kernel`, one per kind of outcome, shared by every command.

0    success; for `verify`, every log verifies (a torn tail, or an interrupted
     final turn that repairs cleanly, still counts as success)
1    a log is invalid: corrupt (`CorruptLog`), inadmissible, or (`verify`) it
     breaks a relational invariant, fails repair or provider tool pairing
2    usage: bad arguments, no logs found; a path that cannot be read (missing,
     no permission, a dangling link, a directory that cannot be listed) or is
     not a regular file (a FIFO, a device). `inspect`/`repair` stop there;
     `verify` reports it as `unreadable`, verifies everything else, and exits 2
     when nothing is invalid; `verify` refusing a `--report` it cannot write,
     or a Dask scheduler that cannot be reached (nothing written)
3    a log is in a format this reader does not support (`UnsupportedFormat`),
     and none is invalid or unreadable
4    internal error: anything raised that is neither a `KernelError` nor an
     `OSError` (a bug, not a verdict on the log); one line on stderr, never a
     traceback. `verify` gives the log status `error` and carries on; a log
     with no verdict within `--timeout` seconds (status `timeout`) gives 4 too
130  interrupted (Ctrl-C)

For `verify` the worst status found decides: error or timeout (4), then invalid
(1), then unreadable (2), then unsupported (3).
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
  2    usage error: bad arguments or no logs found; or a path cannot be read
       or is not a regular file (verify: reported as unreadable, none invalid);
       verify: a --report that cannot be written, an unreachable scheduler
  3    a log uses a format this reader does not support (and none is invalid
       or unreadable)
  4    internal error (a bug, not a verdict on the log); verify: a log timed out
  130  interrupted
"""
