"""Every property of the catalog (P1-P45, P28a, P43a, P43b) has a law, and a test calls it."""

import inspect
import re
from pathlib import Path

from properties import laws

_SPEC_IDS = [f"P{n}" for n in range(1, 46)] + ["P28a", "P43a", "P43b"]


def test_every_catalog_property_has_a_law_with_its_number_in_the_docstring() -> None:
    assert sorted(laws.CATALOG) == sorted(_SPEC_IDS)
    for pid, names in laws.CATALOG.items():
        for name in names:
            doc = inspect.getdoc(getattr(laws, name)) or ""
            assert re.search(rf"\b{pid}\b", doc), f"{name} does not name {pid} in its docstring"


def test_every_law_is_called_by_a_property_test() -> None:
    here = Path(__file__).parent
    sources = "\n".join(p.read_text() for p in here.glob("test_properties_*.py"))
    sources += (Path(laws.__file__).parent.parent / "exhaustive.py").read_text()
    missing = [n for names in laws.CATALOG.values() for n in names if f"{n}(" not in sources]
    assert not missing, f"laws no test calls: {missing}"
