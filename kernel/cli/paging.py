"""Showing long table output through a pager, as git does, only on a terminal.

The pager is `$PAGER`, run by the shell, else `less`; `LESS` defaults to `FRX`
(quit at once when the output fits one screen, keep colours, leave the text on
the screen). Output that does not go to a terminal is never paged.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from typing import IO, Final

from rich.pager import Pager

__all__ = ("DEFAULT_PAGER", "DEFAULT_LESS", "pager_command", "use_pager", "CommandPager")

DEFAULT_PAGER: Final = "less"
DEFAULT_LESS: Final = "FRX"

_NOT_FOUND: Final = 127
"""The shell's exit status for a command it cannot find."""


def pager_command(environ: Mapping[str, str]) -> str | None:
    """The pager to run: `$PAGER`, else `less`; None when `PAGER` is set empty (no pager)."""
    command = environ.get("PAGER")
    if command is None:
        return DEFAULT_PAGER
    return command if command.strip() else None


def use_pager(stream: IO[str], *, no_pager: bool, environ: Mapping[str, str]) -> bool:
    """Whether table output to `stream` goes through the pager: a terminal, not refused."""
    if no_pager or pager_command(environ) is None:
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class CommandPager(Pager):
    """`rich`'s pager interface over a shell command; prints directly if it cannot run."""

    def __init__(self, command: str, environ: Mapping[str, str]) -> None:
        self.command = command
        self.environ = dict(environ)
        self.environ.setdefault("LESS", DEFAULT_LESS)

    def show(self, content: str) -> None:
        data = content.encode("utf-8", "surrogateescape")
        try:
            proc = subprocess.Popen(
                self.command, shell=True, stdin=subprocess.PIPE, env=self.environ
            )
        except OSError:
            self._direct(data)
            return
        assert proc.stdin is not None
        try:
            proc.stdin.write(data)
            proc.stdin.close()
        except BrokenPipeError:  # the reader quit before the end: that is fine
            pass
        if proc.wait() == _NOT_FOUND:
            self._direct(data)

    @staticmethod
    def _direct(data: bytes) -> None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()

    def __repr__(self) -> str:
        return f"CommandPager({self.command!r})"
