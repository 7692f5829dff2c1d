"""Documentation gates: design-record placement and index, code-cited doc paths, Markdown links.

Each gate is a function of a repository root that returns a list of problems
(empty when the tree is clean), so the tests can run it on this repository
and also prove, on small fake trees, that it fails when it should. The rules
are described in docs/rfc/README.md.
"""

from __future__ import annotations

import ast
import datetime
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

LIFECYCLES = ("proposed", "implemented", "rejected", "archived")
CLASSES = ("feature", "bug-fix", "simplification", "architecture", "process", "testing")
REQUIRED_SECTIONS = ("Problem", "Decision", "Alternatives considered", "Consequences")

INDEX_BEGIN = "<!-- rfc-index:begin -->"
INDEX_END = "<!-- rfc-index:end -->"

_RECORD_NAME = re.compile(r"^(\d{4}-\d{2}-\d{2})-([a-z0-9]+(?:-[a-z0-9]+)*)\.md$")
_LIFECYCLE_HEADING = re.compile(r"^## (\S+)$")
_CLASS_HEADING = re.compile(r"^### (\S+)$")
_ENTRY = re.compile(r"^- \[(?P<title>[^\]]+)\]\((?P<path>[^)\s]+)\)$")
_STATUS = re.compile(r"^Status: (\S+)")
_DOC_PATH = re.compile(r"docs/[A-Za-z0-9_./{}-]*")
_MD_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


# -- gate 1: every record sits at a valid path and has the record shape -------------------------


def misplaced_records(root: Path) -> list[str]:
    """Problems with files under docs/rfc/: bad paths, and records without the required shape."""
    rfc = root / "docs" / "rfc"
    problems: list[str] = []
    if not rfc.is_dir():
        return [f"{rfc.relative_to(root)}: missing directory"]
    for path in sorted(p for p in rfc.rglob("*") if p.is_file()):
        rel = path.relative_to(rfc)
        if rel.as_posix() == "README.md":
            continue
        shown = f"docs/rfc/{rel.as_posix()}"
        reason = _path_problem(rel.parts)
        if reason is not None:
            problems.append(f"{shown}: {reason}")
            continue
        problems.extend(f"{shown}: {p}" for p in _shape_problems(path, rel.parts[0]))
    return problems


def _path_problem(parts: tuple[str, ...]) -> str | None:
    if len(parts) != 3:
        return "not at docs/rfc/{lifecycle}/{class}/YYYY-MM-DD-slug.md"
    lifecycle, klass, name = parts
    if lifecycle not in LIFECYCLES:
        return f"unknown lifecycle folder {lifecycle!r} (expected one of {', '.join(LIFECYCLES)})"
    if klass not in CLASSES:
        return f"unknown class folder {klass!r} (expected one of {', '.join(CLASSES)})"
    match = _RECORD_NAME.match(name)
    if match is None:
        return f"file name {name!r} is not YYYY-MM-DD-slug.md"
    try:
        datetime.date.fromisoformat(match.group(1))
    except ValueError:
        return f"{match.group(1)!r} is not a calendar date"
    return None


def _shape_problems(path: Path, lifecycle: str) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    problems: list[str] = []
    if not lines or not lines[0].startswith("# "):
        problems.append("first line is not a '# Title' heading")
    statuses = [m.group(1) for line in lines if (m := _STATUS.match(line))]
    if not statuses:
        problems.append("no 'Status:' line")
    elif statuses[0].rstrip(".,;:—") != lifecycle:
        problems.append(f"status {statuses[0]!r} disagrees with lifecycle folder {lifecycle!r}")
    headings = {line[3:].strip() for line in lines if line.startswith("## ")}
    problems.extend(
        f"missing section '## {section}'"
        for section in REQUIRED_SECTIONS
        if section not in headings
    )
    return problems


# -- gate 2: the index lists every record under the matching headings, and nothing else --------


def index_problems(root: Path) -> list[str]:
    """Problems with the index in docs/rfc/README.md against the records on disk."""
    rfc = root / "docs" / "rfc"
    readme = rfc / "README.md"
    if not readme.is_file():
        return ["docs/rfc/README.md: missing"]
    lines = readme.read_text(encoding="utf-8").splitlines()
    try:
        begin = lines.index(INDEX_BEGIN)
        end = lines.index(INDEX_END, begin + 1)
    except ValueError:
        return [f"docs/rfc/README.md: index markers {INDEX_BEGIN} ... {INDEX_END} not found"]
    problems: list[str] = []
    listed: dict[str, int] = {}
    lifecycle: str | None = None
    klass: str | None = None
    seen_lifecycles: set[str] = set()
    seen_classes: set[str] = set()
    for number in range(begin + 1, end):
        line = lines[number]
        where = f"docs/rfc/README.md:{number + 1}"
        if not line.strip():
            continue
        if m := _LIFECYCLE_HEADING.match(line):
            name = m.group(1)
            lifecycle, klass, seen_classes = name.lower(), None, set()
            if lifecycle not in LIFECYCLES or name != lifecycle.capitalize():
                problems.append(f"{where}: unknown lifecycle heading {line!r}")
            elif lifecycle in seen_lifecycles:
                problems.append(f"{where}: lifecycle heading {line!r} repeated")
            seen_lifecycles.add(lifecycle)
        elif m := _CLASS_HEADING.match(line):
            klass = m.group(1)
            if lifecycle is None:
                problems.append(f"{where}: class heading {line!r} outside a lifecycle heading")
            if klass not in CLASSES:
                problems.append(f"{where}: unknown class heading {line!r}")
            elif klass in seen_classes:
                problems.append(f"{where}: class heading {line!r} repeated")
            seen_classes.add(klass)
        elif m := _ENTRY.match(line):
            target = m.group("path")
            if lifecycle is None or klass is None:
                problems.append(
                    f"{where}: entry {target} is not under a lifecycle and class heading"
                )
            elif not target.startswith(f"{lifecycle}/{klass}/"):
                problems.append(
                    f"{where}: entry {target} is listed under {lifecycle}/{klass}, "
                    "which does not match its path"
                )
            if target in listed:
                problems.append(f"{where}: entry {target} repeats line {listed[target]}")
            listed.setdefault(target, number + 1)
            if not (rfc / target).is_file():
                problems.append(f"{where}: entry {target} names a file that does not exist")
        else:
            problems.append(f"{where}: not a heading, entry or blank line: {line!r}")
    for path in sorted(p for p in rfc.rglob("*.md") if p.is_file()):
        rel = path.relative_to(rfc).as_posix()
        if rel != "README.md" and rel not in listed:
            problems.append(f"docs/rfc/{rel}: not listed in the index")
    return problems


# -- gate 3: docs/... paths cited in comments and docstrings exist ----------------------------


def _comments_and_docstrings(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment and every string-literal statement (docstrings)."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            yield node.lineno, node.value.value


def dangling_doc_references(
    root: Path, packages: tuple[str, ...] = ("kernel", "properties")
) -> list[str]:
    """`docs/...` paths cited in comments or docstrings under `packages` that do not exist.

    A path ending in `/` must be a directory; any other path must be a file.
    A `#fragment` is ignored, and trailing sentence punctuation is not part of
    the path.
    """
    problems: list[str] = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            source = path.read_text(encoding="utf-8")
            for line, text in _comments_and_docstrings(source):
                for cited in _DOC_PATH.findall(text):
                    cited = cited.split("{", 1)[0].rstrip(".,;:")
                    target = root / cited
                    exists = target.is_dir() if cited.endswith("/") else target.is_file()
                    if not exists:
                        shown = path.relative_to(root).as_posix()
                        problems.append(f"{shown}:{line}: cites {cited}, which does not exist")
    return problems


# -- gate 4: relative links in the Markdown docs resolve --------------------------------------


def broken_markdown_links(root: Path) -> list[str]:
    """Relative links in README.md, docs/**/*.md and examples/*.md whose target is missing."""
    files = [
        root / "README.md",
        *sorted((root / "docs").rglob("*.md")),
        *sorted((root / "examples").glob("*.md")),
    ]
    problems: list[str] = []
    for path in files:
        if not path.is_file():
            continue
        in_code = False
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if line.lstrip().startswith("```"):
                in_code = not in_code
                continue
            if in_code:
                continue
            for target in _MD_LINK.findall(re.sub(r"`[^`]*`", "", line)):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                    continue
                file_part = target.split("#", 1)[0]
                if not (path.parent / file_part).exists():
                    shown = path.relative_to(root).as_posix()
                    problems.append(f"{shown}:{number}: link to {target} does not resolve")
    return problems


# -- the gates on this repository -------------------------------------------------------------


def test_every_design_record_sits_at_a_classified_path_with_the_record_shape() -> None:
    assert misplaced_records(ROOT) == []


def test_rfc_index_lists_every_record_under_its_lifecycle_and_class() -> None:
    assert index_problems(ROOT) == []


def test_docs_paths_cited_in_kernel_and_properties_exist() -> None:
    assert dangling_doc_references(ROOT) == []


def test_markdown_links_in_readme_and_docs_resolve() -> None:
    assert broken_markdown_links(ROOT) == []


# -- the gates fail on broken trees -----------------------------------------------------------

_RECORD = """# A record

Status: {lifecycle} — for the test.

## Problem
## Decision
## Alternatives considered
## Consequences
"""


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _index(*entries: str) -> str:
    return "# Design records\n\n" + "\n".join([INDEX_BEGIN, "", *entries, "", INDEX_END]) + "\n"


def _good_tree(root: Path) -> None:
    _write(
        root,
        "docs/rfc/implemented/process/2026-11-29-a.md",
        _RECORD.format(lifecycle="implemented"),
    )
    _write(
        root, "docs/rfc/rejected/feature/2026-11-30-b-c.md", _RECORD.format(lifecycle="rejected")
    )
    _write(
        root,
        "docs/rfc/README.md",
        _index(
            "## Implemented",
            "### process",
            "- [a](implemented/process/2026-11-29-a.md)",
            "## Rejected",
            "### feature",
            "- [b c](rejected/feature/2026-11-30-b-c.md)",
        ),
    )
    _write(root, "docs/guide.md", "# Guide\n\nSee [the records](rfc/README.md).\n")
    _write(
        root, "kernel/mod.py", '"""See docs/guide.md."""\n\n# and docs/rfc/ for records\nX = 1\n'
    )


def test_gates_accept_a_clean_fake_tree(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    assert misplaced_records(tmp_path) == []
    assert index_problems(tmp_path) == []
    assert dangling_doc_references(tmp_path, ("kernel",)) == []
    assert broken_markdown_links(tmp_path) == []


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        ("docs/rfc/shipped/process/2026-11-29-x.md", "unknown lifecycle folder 'shipped'"),
        ("docs/rfc/implemented/refactor/2026-11-29-x.md", "unknown class folder 'refactor'"),
        ("docs/rfc/implemented/2026-11-29-x.md", "not at docs/rfc/{lifecycle}/{class}/"),
        ("docs/rfc/implemented/process/extra/2026-11-29-x.md", "not at docs/rfc/{lifecycle}/"),
        ("docs/rfc/implemented/process/x.md", "is not YYYY-MM-DD-slug.md"),
        ("docs/rfc/implemented/process/2026-11-29-Bad_Slug.md", "is not YYYY-MM-DD-slug.md"),
        ("docs/rfc/implemented/process/2026-02-30-x.md", "is not a calendar date"),
        ("docs/rfc/implemented/process/2026-11-29-x.txt", "is not YYYY-MM-DD-slug.md"),
    ],
)
def test_placement_gate_fails_on_a_misplaced_record(
    tmp_path: Path, rel: str, expected: str
) -> None:
    _good_tree(tmp_path)
    _write(tmp_path, rel, _RECORD.format(lifecycle=rel.split("/")[2]))
    problems = misplaced_records(tmp_path)
    assert len(problems) == 1, problems
    assert problems[0].startswith(rel + ":") and expected in problems[0]


def test_placement_gate_fails_when_status_disagrees_with_folder(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    _write(
        tmp_path,
        "docs/rfc/rejected/feature/2026-11-30-b-c.md",
        _RECORD.format(lifecycle="proposed"),
    )
    assert misplaced_records(tmp_path) == [
        "docs/rfc/rejected/feature/2026-11-30-b-c.md: "
        "status 'proposed' disagrees with lifecycle folder 'rejected'"
    ]


def test_placement_gate_fails_on_a_record_without_its_sections(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    text = _RECORD.format(lifecycle="implemented").replace("## Alternatives considered\n", "")
    _write(tmp_path, "docs/rfc/implemented/process/2026-11-29-a.md", text)
    assert misplaced_records(tmp_path) == [
        "docs/rfc/implemented/process/2026-11-29-a.md: missing section '## Alternatives considered'"
    ]


def test_index_gate_fails_on_a_record_missing_from_the_index(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    _write(
        tmp_path,
        "docs/rfc/proposed/testing/2026-12-01-new.md",
        _RECORD.format(lifecycle="proposed"),
    )
    assert misplaced_records(tmp_path) == []
    assert index_problems(tmp_path) == [
        "docs/rfc/proposed/testing/2026-12-01-new.md: not listed in the index"
    ]


def test_index_gate_fails_on_an_entry_under_the_wrong_headings(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    readme = tmp_path / "docs/rfc/README.md"
    text = readme.read_text(encoding="utf-8").replace("### feature", "### bug-fix")
    readme.write_text(text, encoding="utf-8")
    problems = index_problems(tmp_path)
    assert len(problems) == 1, problems
    assert "listed under rejected/bug-fix, which does not match its path" in problems[0]


def test_index_gate_fails_on_an_entry_whose_file_does_not_exist(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    (tmp_path / "docs/rfc/implemented/process/2026-11-29-a.md").unlink()
    assert index_problems(tmp_path) == [
        "docs/rfc/README.md:7: entry implemented/process/2026-11-29-a.md "
        "names a file that does not exist"
    ]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("## Shipped", "unknown lifecycle heading"),
        ("## implemented", "unknown lifecycle heading"),
        ("### refactor", "unknown class heading"),
        ("some prose", "not a heading, entry or blank line"),
        ("- [a](implemented/process/2026-11-29-a.md)", "repeats line 7"),
    ],
)
def test_index_gate_fails_on_a_malformed_index_line(
    tmp_path: Path, line: str, expected: str
) -> None:
    _good_tree(tmp_path)
    readme = tmp_path / "docs/rfc/README.md"
    text = readme.read_text(encoding="utf-8").replace(INDEX_END, f"{line}\n{INDEX_END}")
    readme.write_text(text, encoding="utf-8")
    assert any(expected in problem for problem in index_problems(tmp_path)), index_problems(
        tmp_path
    )


def test_index_gate_fails_without_index_markers(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    (tmp_path / "docs/rfc/README.md").write_text("# Design records\n", encoding="utf-8")
    assert len(index_problems(tmp_path)) == 1


def test_reference_gate_fails_on_a_dangling_docstring_reference(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    _write(tmp_path, "kernel/other.py", '"""Rules: see docs/rules.md."""\n')
    assert dangling_doc_references(tmp_path, ("kernel",)) == [
        "kernel/other.py:1: cites docs/rules.md, which does not exist"
    ]


def test_reference_gate_fails_on_a_dangling_comment_reference(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    _write(tmp_path, "kernel/other.py", "X = 1\n\n\n# moved to docs/rfc/implemented/x/old.md#why\n")
    assert dangling_doc_references(tmp_path, ("kernel",)) == [
        "kernel/other.py:4: cites docs/rfc/implemented/x/old.md, which does not exist"
    ]


def test_reference_gate_ignores_paths_outside_comments_and_docstrings(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    _write(tmp_path, "kernel/other.py", 'MESSAGE = "see docs/nowhere.md"\n')
    assert dangling_doc_references(tmp_path, ("kernel",)) == []


def test_reference_gate_fails_on_a_cited_directory_that_is_missing(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    _write(tmp_path, "kernel/other.py", 'def f() -> None:\n    """See docs/vectors/."""\n')
    assert dangling_doc_references(tmp_path, ("kernel",)) == [
        "kernel/other.py:2: cites docs/vectors/, which does not exist"
    ]


def test_link_gate_fails_on_a_broken_relative_link(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    _write(
        tmp_path, "docs/guide.md", "# Guide\n\n[cli](cli.md#inspect), [web](https://x.org/a.md)\n"
    )
    assert broken_markdown_links(tmp_path) == [
        "docs/guide.md:3: link to cli.md#inspect does not resolve"
    ]


def test_link_gate_ignores_links_inside_code(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    _write(tmp_path, "docs/guide.md", "# Guide\n\n`[x](nope.md)`\n\n```\n[y](nope.md)\n```\n")
    assert broken_markdown_links(tmp_path) == []
