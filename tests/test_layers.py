"""The packages are the layers: a module imports only from its own layer and those below.

The order is ARCHITECTURE.md's, bottom up: errors and values, the wire, admission,
the folds, the log, the storage codecs, the projections, the I/O shells. Read with
`ast`, nothing imported; imports inside functions count too.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LAYERS: dict[str, int] = {
    "errors": 0,
    "values": 0,
    "wire": 1,
    "admission": 2,
    "folds": 3,
    "log": 4,
    "storage": 5,
    "projections": 6,
    "store": 7,
    "corpus": 8,
    "cli": 8,  # the command runs corpus checks, and a corpus run reads logs as the command does
}

ALLOWED_UPWARD = frozenset(
    {
        # The codec builds an `Event` from a wire object by the admission rules.
        ("kernel.wire.codec", "kernel.admission.envelope"),
        ("kernel.wire.codec", "kernel.admission.header"),
        ("kernel.wire.codec", "kernel.admission.provenance"),
    }
)


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.get(parts[1]) if len(parts) > 1 and parts[0] == "kernel" else None


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names if node.module == "kernel")
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def upward_imports() -> set[tuple[str, str]]:
    """Every (module, imported module) pair of kernel/ that reaches a higher layer."""
    upward = set()
    for path in sorted((ROOT / "kernel").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        mine = _layer(module)
        if mine is None:
            continue
        for imported in _imports(path):
            theirs = _layer(imported)
            if theirs is not None and theirs > mine:
                upward.add((module, imported))
    return upward


def test_every_module_of_kernel_is_in_a_layer() -> None:
    top = {p.stem for p in (ROOT / "kernel").iterdir() if p.suffix == ".py" or p.is_dir()}
    assert top - {"__init__", "__pycache__", "py"} <= set(LAYERS)


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    assert upward_imports() == ALLOWED_UPWARD


def test_an_upward_import_is_found(tmp_path: Path) -> None:
    folds = tmp_path / "kernel" / "folds"
    folds.mkdir(parents=True)
    (folds / "x.py").write_text("from kernel.storage.load import plan_scan\n")
    module = "kernel.folds.x"
    assert {
        (module, imported)
        for imported in _imports(folds / "x.py")
        if (_layer(imported) or 0) > (_layer(module) or 0)
    } == {(module, "kernel.storage.load")}
