"""pytest plugin of the kit (entry point `pytest11`): store fixtures and a profile option.

Installed with session-kernel, loaded by pytest, and inert unless used: it adds the
option `--session-kernel-profile={ci,deep}` (registers the kit's profiles as
`session-kernel-ci` / `session-kernel-deep` and loads the one named; without the
option no Hypothesis setting changes) and the fixtures `jsonl_store`,
`sqlite_store` and `session_store_factory`. It imports nothing of the kernel or of
Hypothesis until a fixture or the option is used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from kernel.store import JsonlStore, SqliteStore

# The pytest hooks below are found by name; the public names are the fixtures and the prefix.
__all__ = ("PROFILE_PREFIX", "jsonl_store", "sqlite_store", "session_store_factory")

PROFILE_PREFIX = "session-kernel-"
"""Prefix of the profile names the plugin registers (a suite's own `ci` stays its own)."""

_OPTION = "--session-kernel-profile"


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add `--session-kernel-profile`."""
    group = parser.getgroup("session-kernel", "session-kernel property kit")
    group.addoption(
        _OPTION,
        action="store",
        dest="session_kernel_profile",
        choices=("ci", "deep"),
        default=None,
        help="load the kit's Hypothesis profile `ci` (50 examples, derandomized) or "
        "`deep` (5,000 examples) for this run; default: leave Hypothesis settings alone",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register and load the profile `--session-kernel-profile` names, if given."""
    name = config.getoption("session_kernel_profile", default=None)
    if name is None:
        return
    from hypothesis import settings

    from properties.profiles import register_profiles

    register_profiles(prefix=PROFILE_PREFIX)
    settings.load_profile(PROFILE_PREFIX + name)


def pytest_report_header(config: pytest.Config) -> str | None:
    """Say which kit profile is loaded, when the option chose one."""
    name = config.getoption("session_kernel_profile", default=None)
    return None if name is None else f"session-kernel: hypothesis profile {PROFILE_PREFIX}{name}"


@pytest.fixture
def jsonl_store(tmp_path: Path) -> JsonlStore:
    """A `JsonlStore` rooted in a fresh temporary directory."""
    from kernel.store import JsonlStore

    return JsonlStore(tmp_path / "jsonl-store")


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SqliteStore]:
    """A `SqliteStore` on a fresh temporary database file; closed after the test."""
    from kernel.store import SqliteStore

    store = SqliteStore(tmp_path / "sessions.sqlite")
    try:
        yield store
    finally:
        store.close()


@pytest.fixture(scope="session")
def session_store_factory(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., Any]]:
    """`make(kind="jsonl", **options)`: a new, empty store in its own temporary directory.

    Session-scoped, so `@given` tests may use it (Hypothesis refuses function-scoped
    fixtures, which every example would share): call it once per example. `kind`
    is `"jsonl"`, `"jsonl.zstd"` or `"sqlite"`; options go to the store's
    constructor. SQLite stores are closed at the end of the session.
    """
    from kernel.store import JsonlStore, SqliteStore

    opened: list[SqliteStore] = []

    def make(kind: str = "jsonl", **options: Any) -> JsonlStore | SqliteStore:
        root = tmp_path_factory.mktemp("session-store")
        if kind == "jsonl":
            return JsonlStore(root, **options)
        if kind == "jsonl.zstd":
            return JsonlStore(root, zstd=True, **options)
        if kind == "sqlite":
            store = SqliteStore(root / "sessions.sqlite", **options)
            opened.append(store)
            return store
        raise ValueError(f"unknown store kind {kind!r} (jsonl, jsonl.zstd or sqlite)")

    try:
        yield make
    finally:
        for store in opened:
            store.close()
