"""The kit's public surface: six public modules, every public name on the API page, docstrings
that never send a reader into an internal module, and strategies that check their arguments
when they are built.

A bad argument must raise Hypothesis's `InvalidArgument` from the strategy call itself, which
draws nothing, with a message that starts with the argument's name.
"""

from __future__ import annotations

import ast
import inspect
import re
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

import properties
from properties import exhaustive, laws, machine, profiles, pytest_plugin
from properties import strategies as gen

ROOT = Path(__file__).resolve().parents[2]
API_PAGE = ROOT / "docs" / "api" / "properties.md"
GUIDE = ROOT / "docs" / "properties.md"
FORMAT = ROOT / "docs" / "format" / "properties.md"

PUBLIC: dict[str, ModuleType] = {
    "strategies": gen,
    "laws": laws,
    "machine": machine,
    "exhaustive": exhaustive,
    "profiles": profiles,
    "pytest_plugin": pytest_plugin,
}
ENTRY_POINT_MODULE = "types"
"""Internal, but without an underscore: installed `hypothesis` entry points name it."""

# `properties.<module>` or `properties.laws.<module>` written in prose (not `properties.md`).
_MODULE_REFERENCE = re.compile(r"(?<![\w/.])properties\.(?P<module>\w+)(?:\.(?P<sub>\w+))?")


def _private_references(text: str) -> list[str]:
    found = []
    for m in _MODULE_REFERENCE.finditer(text):
        module, sub = m.group("module"), m.group("sub") or ""
        if module == "md":
            continue
        if module not in PUBLIC or (module == "laws" and sub.startswith("_")):
            found.append(m.group(0))
    return found


def _public_names() -> Iterator[tuple[str, str]]:
    for module_name, module in PUBLIC.items():
        for name in module.__all__:
            yield module_name, name


# -- the modules ---------------------------------------------------------------------------------


def test_every_module_is_public_or_internal_by_name() -> None:
    root = Path(properties.__file__).parent
    modules = {
        p.relative_to(root).with_suffix("").as_posix().replace("/__init__", "")
        for p in root.rglob("*.py")
    } - {"__init__"}
    internal = {m for m in modules if m.rsplit("/", 1)[-1].startswith("_")}
    assert modules - internal == {*PUBLIC, ENTRY_POINT_MODULE}
    assert "laws/_storage" in internal and "_loop" in internal


def test_the_package_docstring_names_every_public_module() -> None:
    doc = properties.__doc__ or ""
    for name in PUBLIC:
        assert f"`properties.{name}`" in doc, name
    assert _private_references(doc) == ["properties.types"]


def test_every_public_name_resolves_and_the_lists_have_no_duplicates() -> None:
    for module_name, module in PUBLIC.items():
        assert len(set(module.__all__)) == len(module.__all__), module_name
        for name in module.__all__:
            assert hasattr(module, name), f"properties.{module_name}.{name}"


# -- the API page --------------------------------------------------------------------------------

_DIRECTIVE = re.compile(r"^::: properties\.(?P<module>\w+)\.(?P<name>\w+)$", re.M)


def test_the_api_page_documents_exactly_the_public_names() -> None:
    text = API_PAGE.read_text(encoding="utf-8")
    documented = [(m.group("module"), m.group("name")) for m in _DIRECTIVE.finditer(text)]
    assert len(documented) == len(set(documented)), "a name is documented twice"
    public = set(_public_names())
    assert set(documented) - public == set(), "documented but not public"
    assert public - set(documented) == set(), "public but not on docs/api/properties.md"


# -- docstrings ----------------------------------------------------------------------------------


def _definitions() -> dict[str, list[str]]:
    """The docstrings of every top-level definition in the kit's source, by name: a function's
    or class's (with its methods'), or the string after an assignment."""
    found: dict[str, list[str]] = {}
    for path in Path(properties.__file__).parent.rglob("*.py"):
        body = ast.parse(path.read_text(encoding="utf-8")).body
        for node, after in zip(body, [*body[1:], None], strict=True):
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                docs = [ast.get_docstring(node) or ""]
                if isinstance(node, ast.ClassDef):
                    docs += [
                        ast.get_docstring(member) or ""
                        for member in node.body
                        if isinstance(member, ast.FunctionDef)
                    ]
                found.setdefault(node.name, []).extend(docs)
                continue
            target: ast.expr | None = None
            if isinstance(node, ast.AnnAssign):
                target = node.target
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
            if (
                isinstance(target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                found.setdefault(target.id, []).append(after.value.value)
    return found


def _public_docstrings() -> Iterator[tuple[str, str]]:
    definitions = _definitions()
    for module_name, module in PUBLIC.items():
        yield f"properties.{module_name}", module.__doc__ or ""
        for name in module.__all__:
            for doc in definitions.get(name, []):
                yield f"properties.{module_name}.{name}", doc


def test_public_docstrings_name_no_internal_module() -> None:
    checked = list(_public_docstrings())
    where = {name for name, _ in checked}
    assert {"properties.laws.as_events", "properties.strategies.DEFECTS"} <= where
    assert "properties.pytest_plugin.jsonl_store" in where
    offending = [(name, refs) for name, doc in checked if (refs := _private_references(doc))]
    assert offending == []


def test_the_guide_and_the_api_page_name_no_internal_module() -> None:
    for page in (GUIDE, API_PAGE):
        text = page.read_text(encoding="utf-8")
        refs = [r for r in _private_references(text) if r != "properties.types"]
        assert refs == [], f"{page.name} cites {refs}"


def test_the_format_reference_names_only_public_strategies() -> None:
    named: set[str] = set()
    for paragraph in FORMAT.read_text(encoding="utf-8").split("\n\n"):
        if paragraph.startswith(("*Strategies:*", "*Strategy:*")):
            # strategy names are lower case; `k` is the cut of a crash prefix
            named.update(re.findall(r"`([a-z]\w+)`", paragraph))
    assert len(named) >= 10 and named <= set(gen.__all__), named - set(gen.__all__)


def test_a_law_violation_prints_under_its_public_module() -> None:
    shown = traceback.format_exception_only(laws.LawViolation("P30 example"))
    assert shown == ["properties.laws.LawViolation: P30 example\n"]


# -- strategies check their arguments when built ---------------------------------------------

_BAD: list[tuple[Callable[..., Any], dict[str, Any], str]] = [
    (gen.json_strings, {"max_size": -1}, "max_size"),
    (gen.json_strings, {"max_size": "12"}, "max_size"),
    (gen.json_strings, {"max_size": True}, "max_size"),
    (gen.json_values, {"max_leaves": 0}, "max_leaves"),
    (gen.json_values, {"max_leaves": 2.5}, "max_leaves"),
    (gen.json_containers, {"max_leaves": -3}, "max_leaves"),
    (gen.json_scalars, {"strings": "abc"}, "strings"),
    (gen.bad_json, {"labels": ("no such defect",)}, "labels"),
    (gen.bad_json, {"labels": ()}, "labels"),
    (gen.bad_json, {"labels": "nan"}, "labels"),
    (gen.bad_json, {"labels": [1]}, "labels"),
    (gen.session_headers, {"session_id": 7}, "session_id"),
    (gen.loop_logs, {"max_actions": -1}, "max_actions"),
    (gen.loop_logs, {"max_actions": 2.0}, "max_actions"),
    (gen.loop_logs, {"max_steps": -1}, "max_steps"),
    (gen.loop_logs, {"max_calls": "3"}, "max_calls"),
    (gen.loop_logs, {"min_actions": -1}, "min_actions"),
    (gen.loop_logs, {"min_actions": 5, "max_actions": 3}, "min_actions"),
    (gen.loop_logs, {"min_steps": None}, "min_steps"),
    (gen.loop_logs, {"min_steps": 4, "max_steps": 3}, "min_steps"),
    (gen.loop_logs, {"rich": "yes"}, "rich"),
    (gen.loop_logs, {"shape": "dhs"}, "shape"),
    (gen.loop_logs, {"shape": None}, "shape"),
    (gen.loop_events, {"max_actions": -1}, "max_actions"),
    (gen.loop_events, {"shape": "DSH"}, "shape"),
    (gen.crash_prefixes, {"min_actions": 7}, "min_actions"),
    (gen.crash_prefixes, {"shape": "strict"}, "shape"),
    (gen.byte_crashes, {"max_calls": -2}, "max_calls"),
    (gen.session_logs, {"rich": 1}, "rich"),
    (gen.interleavings, {"max_messages": -1}, "max_messages"),
    (gen.interleavings, {"max_noise": "10"}, "max_noise"),
    (gen.chunk_batches, {"max_size": -1}, "max_size"),
    (gen.mutation_cases, {"labels": ("no such rule",)}, "labels"),
    (gen.mutation_cases, {"labels": []}, "labels"),
    (gen.mutation_cases, {"logs": 42}, "logs"),
    (gen.mutation_cases, {"shape": "any shape"}, "shape"),
    (gen.rewrite_cases, {"change": "no such field"}, "change"),
    (gen.rewrite_cases, {"shape": 0}, "shape"),
    (gen.legacy_insertions, {"label": "no such event"}, "label"),
    (gen.legacy_insertions, {"shape": "x"}, "shape"),
    (gen.perturbations, {"kind": "no such edit"}, "kind"),
    (gen.perturbations, {"shape": "x"}, "shape"),
]


@pytest.mark.parametrize(
    ("strategy", "kwargs", "argument"),
    _BAD,
    ids=[f"{f.__name__}-{'-'.join(f'{k}={v!r}' for k, v in kw.items())}" for f, kw, _ in _BAD],
)
def test_a_bad_argument_is_refused_when_the_strategy_is_built(
    strategy: Callable[..., Any], kwargs: dict[str, Any], argument: str
) -> None:
    with pytest.raises(InvalidArgument, match=rf"^{argument}="):
        strategy(**kwargs)  # builds only: nothing is drawn


def _strategy_functions() -> Iterator[tuple[str, Callable[..., Any]]]:
    for name in gen.__all__:
        value = getattr(gen, name)
        if inspect.isfunction(value):
            yield name, value


def test_every_strategy_argument_has_a_refused_case() -> None:
    refused: dict[str, set[str]] = {}
    for strategy, kwargs, _ in _BAD:
        refused.setdefault(strategy.__name__, set()).update(kwargs)
    missing = []
    for name, function in _strategy_functions():
        for parameter in inspect.signature(function).parameters.values():
            if parameter.kind is parameter.VAR_KEYWORD:
                if not refused.get(name):
                    missing.append(f"{name}(**{parameter.name})")
            elif parameter.name not in refused.get(name, set()):
                missing.append(f"{name}({parameter.name}=)")
    assert missing == []


def test_the_loop_options_cover_every_loop_logs_argument() -> None:
    options = set(inspect.signature(gen.loop_logs).parameters)
    refused = {k for f, kwargs, _ in _BAD if f is gen.loop_logs for k in kwargs}
    assert options == refused


@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_the_smallest_valid_arguments_build_and_draw(data: st.DataObject) -> None:
    assert data.draw(gen.loop_logs(max_actions=0)).events == ()
    log = data.draw(gen.loop_logs(min_actions=1, max_actions=1, max_steps=0, max_calls=0))
    assert len(log.script.actions) == 1 and log.shape == "dsh"
    assert data.draw(gen.chunk_batches(max_size=0)) == []
    assert data.draw(gen.json_strings(max_size=0)) is not None
    assert data.draw(gen.interleavings(max_messages=0, max_noise=0)).mixed == ()
    assert data.draw(gen.bad_json(labels=["nan"])).label == "nan"
    assert data.draw(gen.mutation_cases(labels=["R5 invalid surfaceOp string"])).mutation.label
    assert data.draw(gen.session_headers(session_id=""))["id"] == ""


def test_exhaustive_family_refuses_an_unknown_size_or_shape_when_called() -> None:
    with pytest.raises(ValueError, match=r"^size='huge' must be one of"):
        exhaustive.family("huge")
    with pytest.raises(ValueError, match=r"^shape='any' must be one of"):
        exhaustive.family("tiny", shape="any")  # type: ignore[arg-type]


def test_share_of_examples_refuses_a_zero_divisor() -> None:
    with pytest.raises(InvalidArgument, match=r"^divisor=0 "):
        profiles.share_of_examples(0)
    with pytest.raises(InvalidArgument, match=r"^minimum=0 "):
        profiles.share_of_examples(2, minimum=0)
