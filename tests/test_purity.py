"""The pure core imports nothing that does I/O, reads a clock, draws randomness or asks the host.

The pure core is every module under kernel/ outside the I/O shells, which are
kernel/store/ (files and SQLite), kernel/cli/ (the command) and kernel/corpus/
(corpus runs). No other module is an exception today: kernel/storage/jsonl.py and
kernel/storage/zstd.py take and return bytes,
kernel/storage/sqlite_rows.py builds SQLite rows as values, and kernel/values/pathtext.py decides H7
from the text alone. docs/architecture.md lists the same split. The check reads
each file with `ast`, so it holds without importing anything.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SHELLS = ("kernel/store", "kernel/cli", "kernel/corpus")
"""Packages under kernel/ that do I/O on purpose, and which the pure core must not import."""

IMPURE_MODULES = frozenset(
    {
        # the ones the pure-core rule names
        "os",
        "io",
        "sys",
        "time",
        "pathlib",
        "subprocess",
        "socket",
        "tempfile",
        "shutil",
        "random",
        "datetime",
        # the same families: files, processes, the network, clocks, entropy, host facts
        "asyncio",
        "ctypes",
        "fcntl",
        "fileinput",
        "glob",
        "http",
        "importlib",
        "locale",
        "logging",
        "mmap",
        "multiprocessing",
        "platform",
        "secrets",
        "select",
        "selectors",
        "signal",
        "sqlite3",
        "ssl",
        "threading",
        "urllib",
        "uuid",
        "zoneinfo",
    }
)

IMPURE_BUILTINS = frozenset({"open", "print", "input", "breakpoint", "__import__", "exec", "eval"})


def pure_core_modules(root: Path) -> list[Path]:
    """Every kernel/**/*.py outside the shells."""
    return sorted(
        path
        for path in (root / "kernel").rglob("*.py")
        if not path.relative_to(root).as_posix().startswith(SHELLS)
    )


def _is_shell(module: str) -> bool:
    packages = [shell.replace("/", ".") for shell in SHELLS]
    return any(module == p or module.startswith(p + ".") for p in packages)


def impurities(path: Path, root: Path) -> list[str]:
    """Each import of an I/O module or shell package, and each call of an I/O builtin."""
    shown = path.relative_to(root).as_posix()
    problems: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        for name in names:
            if name.split(".")[0] in IMPURE_MODULES:
                problems.append(f"{shown}:{node.lineno}: imports {name}")
                break
            if _is_shell(name):
                problems.append(f"{shown}:{node.lineno}: imports the I/O shell {name}")
                break
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in IMPURE_BUILTINS
        ):
            problems.append(f"{shown}:{node.lineno}: calls {node.func.id}()")
    return problems


def test_the_pure_core_has_the_modules_it_should() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in pure_core_modules(ROOT)}
    assert {"kernel/wire/codec.py", "kernel/values/pathtext.py", "kernel/storage/jsonl.py"} <= names
    assert {"kernel/admission/admit.py", "kernel/projections/acp.py"} <= names
    assert not any(name.startswith(SHELLS) for name in names)


@pytest.mark.parametrize(
    "module", [p.relative_to(ROOT).as_posix() for p in pure_core_modules(ROOT)]
)
def test_no_pure_core_module_imports_io_clock_randomness_or_the_host(module: str) -> None:
    assert impurities(ROOT / module, ROOT) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import os\n", "imports os"),
        ("import os.path as p\n", "imports os.path"),
        ("from pathlib import Path\n", "imports pathlib"),
        ("def f() -> None:\n    import time\n", "imports time"),
        ("from datetime import datetime\n", "imports datetime"),
        ("import random, json\n", "imports random"),
        ("from kernel.store import JsonlStore\n", "imports the I/O shell kernel.store"),
        ("from kernel import cli\n", "imports the I/O shell kernel.cli"),
        ("X = open('f').read()\n", "calls open()"),
    ],
)
def test_the_purity_check_fails_on_an_impure_module(
    tmp_path: Path, source: str, expected: str
) -> None:
    module = tmp_path / "kernel" / "bad.py"
    module.parent.mkdir()
    module.write_text(source, encoding="utf-8")
    problems = impurities(module, tmp_path)
    assert len(problems) == 1 and expected in problems[0], problems


def test_the_purity_check_accepts_pure_imports(tmp_path: Path) -> None:
    module = tmp_path / "kernel" / "good.py"
    module.parent.mkdir()
    module.write_text(
        "import math, re\nfrom kernel.values.json import freeze\nfrom kernel import events\n",
        encoding="utf-8",
    )
    assert impurities(module, tmp_path) == []
