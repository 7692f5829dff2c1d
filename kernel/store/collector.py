"""Pause Python's cyclic garbage collector around bulk loads.

A load builds hundreds of thousands of small acyclic objects; the cyclic
collector would rescan them again and again while they are being built and
roughly doubles the load time (docs/architecture.md, Benchmarks). The pure
core never touches process-wide state, so the I/O shells (stores, CLI) do it.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ("paused_collector",)


@contextlib.contextmanager
def paused_collector() -> Iterator[None]:
    """Disable the cyclic collector inside the block; restore the caller's setting after."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
