"""Every Python snippet of docs/properties.md runs as written.

A fenced `python` block whose first line is `# file: NAME` is a file of the example
project: all of them are written to one temporary directory and pytest runs it. Every
other `python` block is a script, run there with `python3`. Blocks in other languages
(`sh`, `text`) are not run; tests/kit/test_properties_wheel.py does the walkthrough's
shell steps in a fresh virtualenv.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "properties.md"

_FENCE = re.compile(r"^```(?P<lang>[a-z]*)\n(?P<body>.*?)^```$", re.M | re.S)
_FILE = re.compile(r"^# file: (?P<name>[\w.]+)\n")

__all__ = ("snippets", "project_files", "scripts")


def snippets(text: str) -> list[tuple[str, str]]:
    """`(language, body)` of every fenced block, in order."""
    return [(m.group("lang"), m.group("body")) for m in _FENCE.finditer(text)]


def project_files(text: str) -> dict[str, str]:
    """The `# file: NAME` Python blocks, by file name."""
    files: dict[str, str] = {}
    for lang, body in snippets(text):
        if lang == "python" and (m := _FILE.match(body)):
            assert m.group("name") not in files, f"{m.group('name')} is given twice"
            files[m.group("name")] = body
    return files


def scripts(text: str) -> list[str]:
    """The other Python blocks."""
    return [body for lang, body in snippets(text) if lang == "python" and not _FILE.match(body)]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HYPOTHESIS_"))}
    env.pop("PYTHONPATH", None)
    return env


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("docs-project")
    for name, body in project_files(DOC.read_text(encoding="utf-8")).items():
        (where / name).write_text(body, encoding="utf-8")
    return where


def test_the_doc_has_a_project_and_scripts() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert {"conftest.py", "test_research.py", "test_machine.py"} <= set(project_files(text))
    assert len(scripts(text)) >= 3
    assert {lang for lang, _ in snippets(text)} <= {"python", "sh", "text"}


@pytest.mark.slow
def test_the_example_project_passes(project: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(project)],
        cwd=project,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    tests = sum(body.count("\ndef test_") for body in project_files(DOC.read_text()).values())
    passed = re.search(r"\b(\d+) passed\b", result.stdout)
    assert passed is not None and int(passed.group(1)) > tests, result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(scripts(DOC.read_text(encoding="utf-8")))))
def test_script_runs(index: int, project: Path) -> None:
    body = scripts(DOC.read_text(encoding="utf-8"))[index]
    result = subprocess.run(
        [sys.executable, "-c", body],
        cwd=project,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
    )
    assert result.returncode == 0, f"snippet {index}:\n{body}\n{result.stderr}"
    for expected in re.findall(r"print\(.*\)  # (.+)$", body, re.M):
        shown = expected.split(":", 1)[0] if expected.startswith("[") else expected
        if "..." not in shown:
            assert shown.strip() in result.stdout, (shown, result.stdout)
