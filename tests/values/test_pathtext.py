"""H7 on every host: an absolute `cwd` is decided from the text alone (kernel.values.pathtext)."""

from __future__ import annotations

import ntpath
import os
import posixpath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel import SessionHeaderError, header_from_json
from kernel.values.pathtext import is_absolute_path

ABSOLUTE = [
    # POSIX
    "/",
    "/home/u/project",
    "/a b/ü",
    "//server/share",
    "//",
    # Windows drive, either separator, either case, any ASCII letter
    "C:\\",
    "C:\\Users\\u",
    "c:/users/u",
    "z:\\",
    "A:/",
    "C:\\a/b",
    # UNC, and the Win32 namespaces that share its shape
    "\\\\server\\share",
    "\\\\server\\share\\dir",
    "\\\\server/share",
    "\\\\192.168.0.1\\c$",
    "\\\\?\\C:\\very\\long",
    "\\\\?\\UNC\\server\\share",
    "\\\\.\\pipe\\name",
]

NOT_ABSOLUTE = [
    "",
    # relative
    "a",
    "a/b",
    "a\\b",
    "./a",
    ".",
    "..",
    "..\\a",
    # home-relative: expanded by a shell, not a path
    "~",
    "~/project",
    "~user/project",
    # drive-relative and drive-less
    "C:",
    "C:foo",
    "C:foo\\bar",
    "1:\\a",
    ":\\a",
    "é:\\a",
    "CC:\\a",
    # root-relative on the current drive
    "\\",
    "\\a\\b",
    # incomplete UNC
    "\\\\",
    "\\\\server",
    "\\\\server\\",
    "\\\\\\share",
    "\\\\?\\",
    # leading whitespace or a URL is not a path
    " /a",
    "\t/a",
    "file:///a",
]


@pytest.mark.parametrize("text", ABSOLUTE)
def test_h7_absolute_paths(text: str) -> None:
    assert is_absolute_path(text)


@pytest.mark.parametrize("text", NOT_ABSOLUTE)
def test_h7_paths_that_are_not_absolute(text: str) -> None:
    assert not is_absolute_path(text)


@pytest.mark.parametrize("flavour", [posixpath, ntpath], ids=["posix host", "windows host"])
def test_h7_the_same_header_admits_on_every_host(
    monkeypatch: pytest.MonkeyPatch, flavour: object
) -> None:
    monkeypatch.setattr(os, "path", flavour)
    for cwd in ("/home/u", "C:\\Users\\u", "d:/w", "\\\\fs\\home"):
        header = header_from_json({"version": 0, "id": "s", "createdAt": 0, "cwd": cwd})
        assert header.cwd == cwd
    for cwd in ("", "rel/dir", "~/w", "C:w", "\\w"):
        with pytest.raises(SessionHeaderError, match="H7"):
            header_from_json({"version": 0, "id": "s", "createdAt": 0, "cwd": cwd})


_ABSOLUTE_PREFIXES = ["/", "//", "C:\\", "c:/", "\\\\srv\\share", "\\\\?\\C:\\", "\\\\.\\pipe\\"]
_OTHER_PREFIXES = ["", "~", "~user/", ".", "./", "..\\", "C:", "\\", "\\\\srv", "a/", " /"]
_ANY = st.text()
_NO_SEPARATOR = st.text().filter(lambda s: not any(c in s for c in "/\\:"))


@given(st.sampled_from(_ABSOLUTE_PREFIXES), _ANY)
def test_h7_an_absolute_prefix_makes_any_path_absolute(prefix: str, rest: str) -> None:
    assert is_absolute_path(prefix + rest), f"{prefix + rest!r} starts like an absolute path"


@given(st.sampled_from(_OTHER_PREFIXES), _NO_SEPARATOR)
def test_h7_no_separator_after_a_relative_start_keeps_it_relative(prefix: str, rest: str) -> None:
    assert not is_absolute_path(prefix + rest), f"{prefix + rest!r} names no root"


@given(_ANY)
def test_h7_agrees_with_posix_on_paths_without_backslash_or_drive(text: str) -> None:
    # On text a Windows reader could not take for a drive or UNC path, the rule is POSIX's.
    if "\\" not in text and not (len(text) > 1 and text[1] == ":"):
        assert is_absolute_path(text) == posixpath.isabs(text)
