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

`EPILOG` is the top-level help's summary of them all; each subcommand's help
shows only its own statuses (`EPILOGS`).
"""

from __future__ import annotations

from typing import Final

__all__ = (
    "OK",
    "INVALID",
    "USAGE",
    "UNSUPPORTED",
    "INTERNAL",
    "INTERRUPTED",
    "EPILOG",
    "EPILOGS",
)

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

each command's --help lists the statuses it can give.
"""
"""The top-level help's exit statuses, every command's cases together."""

_LATER_STATUSES: Final = """\
  3    the log uses a format this reader does not support
  4    internal error (a bug, not a verdict on the log)
  130  interrupted
"""

_READ_ERRORS: Final = (
    """\
  2    usage error: bad arguments; LOG cannot be read or is not a regular
       file; or LOG is a directory and no --session ID names a session in it
"""
    + _LATER_STATUSES
)

_REPAIR_ERRORS: Final = (
    """\
  2    usage error: bad arguments; LOG cannot be read or is not a regular
       file; or LOG is a directory and no --session ID names a session in it;
       or LOG, or the directory its quarantine or a database's journal goes
       in, cannot be written
"""
    + _LATER_STATUSES
)
"""`_READ_ERRORS` for a command that writes the log."""

EPILOGS: Final = {
    "inspect": """\
exit status:
  0    the log was inspected (a torn tail or an open last turn is reported,
       not an error)
  1    the log is invalid: corrupt or inadmissible; no stored session has the
       --session ID; or a session of a database cannot be read (the others
       are still shown)
"""
    + _READ_ERRORS,
    "verify": """\
exit status:
  0    every log verifies; a torn tail, or an interrupted final turn that
       repairs cleanly, still counts as success
  1    a log is invalid: corrupt, inadmissible, it breaks a relational
       invariant, fails repair or fails provider tool pairing (--strict: or
       has a finding)
  2    usage error: bad arguments, no logs found, a --report that cannot be
       written, an unreachable or lost Dask cluster; or a path could not be
       read (reported as unreadable) and no log is invalid
  3    a log uses a format this reader does not support, and none is invalid
       or unreadable
  4    internal error (a bug), or a log with no verdict within --timeout
  130  interrupted

the worst status decides: 4, then 1, then 2, then 3.
""",
    "repair": """\
exit status:
  0    repaired, or nothing to repair (also --dry-run; --undo: bytes put back)
  1    the log is invalid: corrupt or inadmissible; no stored session has the
       --session ID; --strict-tail refused its tail; --undo refused a
       quarantine that does not match, or a log changed since its repair
"""
    + _REPAIR_ERRORS,
    "export": """\
exit status:
  0    the projection was printed
  1    the log is invalid (corrupt or inadmissible); no stored session has the
       --session ID; or the session cannot be projected (no request header in
       force for a request body)
"""
    + _READ_ERRORS.replace(
        "bad arguments;", "bad arguments; a database of several sessions\n       without --session;"
    ),
    "acp-serve": """\
exit status:
  0    standard input ended, or the client stopped reading standard output
  2    the ACP SDK is not installed (pip install -c constraints.txt '.[acp]')
  130  interrupted

a request that fails is answered with a JSON-RPC error; it never ends the
command.
""",
}
"""Each subcommand's `--help` epilog: the exit statuses that command can give."""
