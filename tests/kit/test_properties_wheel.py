"""The kit as a user outside this repository gets it: built wheel, fresh virtualenv, own project.

One test, about a minute (a virtualenv, one `pip install` from the package index, a
wheel build, a pytest run): it creates a throwaway project in a temporary directory,
installs `session-kernel[properties]` from the wheel built from this checkout, and
runs the walkthrough project of docs/properties.md there — `st.from_type(SessionLog)`,
shipped laws, the plugin's store fixtures, and a test that the user's own Hypothesis
settings stay theirs unless `--session-kernel-profile` asks for the kit's.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from test_properties_docs import DOC, project_files

ROOT = Path(__file__).resolve().parents[2]

_WALKTHROUGH = ("conftest.py", "test_research.py")


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    result = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=env, timeout=900)
    assert result.returncode == 0, f"{' '.join(args)}\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.mark.slow
def test_the_walkthrough_runs_from_the_wheel_in_a_fresh_virtualenv(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    work = tmp_path_factory.mktemp("kit-user")
    assert ROOT not in work.parents
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HYPOTHESIS_"))}
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    venv = work / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], work, env)
    python = str(venv / "bin" / "python")

    # One install from the index: the build backend (so the wheel builds without an
    # isolated build environment of its own), the kit's dependencies, pytest.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    backend = project["build-system"]["requires"]
    needed = [*backend, *project["project"]["dependencies"]]
    needed += project["project"]["optional-dependencies"]["properties"]
    _run([python, "-m", "pip", "install", "-q", *needed, "pytest"], work, env)

    dist = work / "dist"
    build = ["wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist), str(ROOT)]
    _run([python, "-m", "pip", *build], work, env)
    (wheel,) = dist.glob("session_kernel-*.whl")
    _run([python, "-m", "pip", "install", "-q", f"{wheel}[properties]"], work, env)

    user = work / "my-research"
    user.mkdir()
    files = project_files(DOC.read_text(encoding="utf-8"))
    for name in _WALKTHROUGH:
        (user / name).write_text(files[name], encoding="utf-8")

    where = _run(
        [python, "-c", "import kernel, properties; print(kernel.__file__, properties.__file__)"],
        user,
        env,
    )
    assert str(venv) in where and str(ROOT) not in where, where

    out = _run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider"], user, env)
    tests = files["test_research.py"].count("\ndef test_")
    assert re.search(rf"\b{tests} passed\b", out), out
    assert "session-kernel: hypothesis profile" not in out

    kit_profile = ["--session-kernel-profile=ci"]
    out = _run([python, "-m", "pytest", "-p", "no:cacheprovider", *kit_profile], user, env)
    assert re.search(rf"\b{tests} passed\b", out), out
    assert "session-kernel: hypothesis profile session-kernel-ci" in out
