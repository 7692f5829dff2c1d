"""Documentation gates: design records, cited doc paths, format citations and ids, Markdown links.

Each gate is a function of a repository root that returns a list of problems
(empty when the tree is clean), so the tests can run it on this repository
and also prove, on small fake trees, that it fails when it should. The rules
are described in docs/rfc/README.md. This file itself is not scanned for
citations and ids: its fake trees cite sections and rules that do not exist.
"""

from __future__ import annotations

import ast
import datetime
import functools
import io
import re
import tokenize
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

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
_MD_LINK_WITH_TEXT = re.compile(r"\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)\)")

FORMAT_DIR = "docs/format"
SOURCE_TREES = ("kernel", "properties", "tests", "benchmarks", "tools")
_SECTION = r"§\d+(?:\.\d+)*"
_CITATION = re.compile(
    r"(?<![\w./-])(?P<path>[\w.-]+(?:/[\w.-]+)*\.md)"
    rf"(?P<sections>\s*(?:#\s*)?{_SECTION}(?:\s*(?:,|and|or|to|-|\u2013)\s*(?:#\s*)?{_SECTION})*)"
)
_SECTION_NUMBER = re.compile(r"§(\d+(?:\.\d+)*)")
_NUMBERED_HEADING = re.compile(r"^#{1,6}\s+(\d+(?:\.\d+)*)\.?(?:\s|$)")
_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
_RULE_ID = re.compile(r"(?<![\w-])(?:[RHP]\d+[a-z]?|G-[a-z]+(?:-[a-z]+)*)(?![\w])")
_RULE_ANCHOR = re.compile(r"[rhp]\d+[a-z]?|g-[a-z]+(?:-[a-z]+)*")


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


def dangling_doc_references(root: Path, packages: tuple[str, ...] = SOURCE_TREES) -> list[str]:
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


# -- gate 4: relative links in the Markdown docs resolve, to a file and to an anchor in it -----


def _markdown_files(root: Path) -> list[Path]:
    """README.md, every Markdown file under docs/, and examples/*.md."""
    files = [
        root / "README.md",
        *sorted((root / "docs").rglob("*.md")),
        *sorted((root / "examples").glob("*.md")),
    ]
    return [path for path in files if path.is_file()]


def _without_code_blocks(text: str) -> str:
    """`text` with every fenced code block blanked, line numbers kept."""
    lines = text.split("\n")
    in_code = False
    for number, line in enumerate(lines):
        fence = line.lstrip().startswith("```")
        if in_code or fence:
            lines[number] = ""
        if fence:
            in_code = not in_code
    return "\n".join(lines)


def _slug(heading: str) -> str:
    """The id Python-Markdown's toc extension (as MkDocs uses it) gives a heading."""
    text = re.sub(r"<[^>]+>", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text).replace("`", "").replace("*", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(path: Path) -> set[str]:
    """Every fragment a link into `path` may name: explicit anchors and heading ids."""
    text = _without_code_blocks(path.read_text(encoding="utf-8"))
    anchors = set(_ANCHOR.findall(text))
    seen: dict[str, int] = {}
    for line in text.splitlines():
        if m := re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line):
            slug = _slug(m.group(1))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            anchors.add(slug if count == 0 else f"{slug}_{count}")
    return anchors


def _cached_anchors(cache: dict[Path, set[str]], path: Path) -> set[str]:
    key = path.resolve()
    if key not in cache:
        cache[key] = _anchors(path)
    return cache[key]


def broken_markdown_links(root: Path) -> list[str]:
    """Relative links in README.md, docs/**/*.md and examples/*.md that do not resolve.

    The target file must exist; a `#fragment` into a Markdown file must be an
    explicit `<a id>` anchor or a heading of that file; and a link from a page
    under docs/ must stay inside docs/, which is all the site is built from.
    """
    docs = (root / "docs").resolve()
    anchors: dict[Path, set[str]] = {}
    problems: list[str] = []
    for path in _markdown_files(root):
        shown = path.relative_to(root).as_posix()
        lines = _without_code_blocks(path.read_text(encoding="utf-8")).splitlines()
        for number, line in enumerate(lines, start=1):
            for target in _MD_LINK.findall(re.sub(r"`[^`]*`", "", line)):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue
                file_part, _, fragment = target.partition("#")
                linked = (path.parent / file_part) if file_part else path
                if not linked.exists():
                    problems.append(f"{shown}:{number}: link to {target} does not resolve")
                elif docs in path.resolve().parents and docs not in linked.resolve().parents:
                    problems.append(
                        f"{shown}:{number}: link to {target} leaves docs/, "
                        "which the site cannot follow (name the path in backticks instead)"
                    )
                elif (
                    fragment
                    and linked.suffix == ".md"
                    and fragment not in _cached_anchors(anchors, linked)
                ):
                    problems.append(
                        f"{shown}:{number}: link to {target}: no anchor or heading "
                        f"#{fragment} in {linked.name}"
                    )
    return problems


# -- gate 5: `X.md §N` citations name an existing document and a heading numbered N in it ------


def _cited_sources(root: Path) -> list[tuple[Path, str]]:
    """(path, text) of each file whose citations the gates check; Markdown code blocks blanked."""
    sources: list[tuple[Path, str]] = []
    for tree in SOURCE_TREES:
        for path in sorted((root / tree).rglob("*.py")):
            if path.relative_to(root).as_posix() != "tools/checks/test_doc_gates.py":
                sources.append((path, path.read_text(encoding="utf-8")))
    for path in _markdown_files(root):
        sources.append((path, _without_code_blocks(path.read_text(encoding="utf-8"))))
    return sources


@functools.lru_cache(maxsize=64)
def _headings_of(path: Path, mtime_ns: int, size: int) -> frozenset[str]:
    text = _without_code_blocks(path.read_text(encoding="utf-8"))
    return frozenset(
        m.group(1) for line in text.splitlines() if (m := _NUMBERED_HEADING.match(line))
    )


def _numbered_headings(path: Path) -> frozenset[str]:
    """The numbers of `path`'s headings: `## 3. Check order` -> "3", `### 3.2 x` -> "3.2"."""
    stat = path.stat()
    return _headings_of(path.resolve(), stat.st_mtime_ns, stat.st_size)


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _citation_problems(
    root: Path, shown: str, line: int, citation: re.Match[str], document: Path | None
) -> list[str]:
    cited = f"{citation.group('path')} {' '.join(citation.group('sections').split())}"
    if document is None or not document.is_file():
        return [f"{shown}:{line}: cites {cited}, but {citation.group('path')} names no file"]
    headings = _numbered_headings(document)
    where = document.relative_to(root).as_posix() if root in document.parents else document.name
    return [
        f"{shown}:{line}: cites {cited}, but {where} has no heading numbered {number}"
        for number in _SECTION_NUMBER.findall(citation.group("sections"))
        if number not in headings
    ]


def unresolved_section_citations(root: Path) -> list[str]:
    """Citations `path.md §N[.M]` (and `, §K` lists after them) that do not resolve.

    In code and tests the path is relative to the repository root
    (`docs/format/admission.md §3.2`). In Markdown it is relative to the page or
    to the root, or it is the text of a link, whose target names the document
    (`[admission.md §3.2](format/admission.md)`). The document must exist and
    have a heading numbered N (`## 3. Check order`, `### 3.2 ...`).
    """
    problems: list[str] = []
    for path, text in _cited_sources(root):
        shown = path.relative_to(root).as_posix()
        rest = text
        if path.suffix == ".md":
            for link in _MD_LINK_WITH_TEXT.finditer(text):
                target = link.group("target").partition("#")[0]
                if re.match(r"^[a-z][a-z0-9+.-]*:", target) or not target.endswith(".md"):
                    continue
                for citation in _CITATION.finditer(link.group("text")):
                    named = Path(citation.group("path")).name
                    document = path.parent / target if named == Path(target).name else None
                    if document is None:
                        document = _resolve_in_markdown(root, path, citation.group("path"))
                    problems.extend(
                        _citation_problems(
                            root, shown, _line_of(text, link.start()), citation, document
                        )
                    )
                blank = re.sub(r"[^\n]", " ", link.group(0))
                rest = rest[: link.start()] + blank + rest[link.end() :]
        for citation in _CITATION.finditer(rest):
            if path.suffix == ".md":
                document = _resolve_in_markdown(root, path, citation.group("path"))
            else:
                document = root / citation.group("path")
            problems.extend(
                _citation_problems(
                    root, shown, _line_of(rest, citation.start()), citation, document
                )
            )
    return problems


def _resolve_in_markdown(root: Path, page: Path, cited: str) -> Path | None:
    """A path named in a page's text: relative to the page, else to the repository root."""
    for candidate in (page.parent / cited, root / cited):
        if candidate.is_file():
            return candidate.resolve()
    return None


# -- gate 6: every rule, header-rule, property and generator id has one anchor in docs/format/ -


def format_anchors(root: Path) -> tuple[dict[str, list[str]], list[str]]:
    """Explicit anchors under docs/format/ (id -> defining files), and duplicate-anchor problems."""
    defined: dict[str, list[str]] = {}
    problems: list[str] = []
    for path in sorted((root / FORMAT_DIR).rglob("*.md")):
        shown = path.relative_to(root).as_posix()
        ids = _ANCHOR.findall(_without_code_blocks(path.read_text(encoding="utf-8")))
        for anchor in sorted({a for a in ids if ids.count(a) > 1}):
            problems.append(f"{shown}: anchor {anchor!r} defined {ids.count(anchor)} times")
        for anchor in dict.fromkeys(ids):
            defined.setdefault(anchor, []).append(shown)
    for anchor, files in sorted(defined.items()):
        if len(files) > 1 and _RULE_ANCHOR.fullmatch(anchor):
            problems.append(f"anchor {anchor!r} defined in {len(files)} files: {', '.join(files)}")
    return defined, problems


def _invariant_rule_ids(root: Path) -> tuple[str, ...]:
    """The strings of the `RULES` tuple in kernel/folds/invariants.py (read with ast)."""
    path = root / "kernel" / "folds" / "invariants.py"
    if not path.is_file():
        return ()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and target.id == "RULES" and isinstance(value, ast.Tuple):
            return tuple(
                e.value
                for e in value.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)
            )
    return ()


def undefined_rule_ids(root: Path) -> list[str]:
    """Ids (R7f, H7, P28a, G-loop, ...) cited in code, tests or docs with no anchor in docs/format/.

    Each id needs an explicit lower-case anchor (`<a id="r7f"></a>`) at its
    definition, defined once. One problem per file and id, at its first mention.
    The relational-invariant rule ids a `Violation` may carry (`RULES` in
    kernel/folds/invariants.py, such as `seq-order`) need an anchor of the same name.
    """
    defined, problems = format_anchors(root)
    if not (root / FORMAT_DIR).is_dir():
        problems.append(f"{FORMAT_DIR}/: missing directory")
    problems.extend(
        f'kernel/folds/invariants.py: invariant rule id {rule!r} has no anchor <a id="{rule}"> '
        f"in {FORMAT_DIR}/"
        for rule in _invariant_rule_ids(root)
        if rule not in defined
    )
    for path, text in _cited_sources(root):
        shown = path.relative_to(root).as_posix()
        reported: set[str] = set()
        for m in _RULE_ID.finditer(text):
            rule = m.group(0)
            if rule.lower() in defined or rule in reported:
                continue
            reported.add(rule)
            problems.append(
                f"{shown}:{_line_of(text, m.start())}: {rule} has no anchor "
                f'<a id="{rule.lower()}"> in {FORMAT_DIR}/'
            )
    return problems


# -- gate 7: the site's navigation lists every page under docs/, and nothing else -------------

_NAV_ENTRY = re.compile(r"^\s*- (?:[^:#]+: )?(?P<page>[^\s:]+\.md)\s*$")


def site_nav_problems(root: Path) -> list[str]:
    """Pages under docs/ missing from mkdocs.yml's nav, and nav entries naming no page.

    `mkdocs build --strict` refuses both as well; this says which page at test
    time. docs/hooks/ holds build code, not pages. No mkdocs.yml: nothing to check.
    """
    config = root / "mkdocs.yml"
    if not config.is_file():
        return []
    lines = config.read_text(encoding="utf-8").splitlines()
    try:
        start = lines.index("nav:")
    except ValueError:
        return ["mkdocs.yml: no nav"]
    listed: dict[str, int] = {}
    for number, line in enumerate(lines[start + 1 :], start=start + 2):
        if line and not line.startswith(" "):
            break
        if m := _NAV_ENTRY.match(line):
            listed.setdefault(m.group("page"), number)
    docs = root / "docs"
    pages = {
        p.relative_to(docs).as_posix()
        for p in docs.rglob("*.md")
        if p.relative_to(docs).parts[0] != "hooks"
    }
    problems = [
        f"docs/{page}: not in the nav of mkdocs.yml" for page in sorted(pages - listed.keys())
    ]
    problems += [
        f"mkdocs.yml:{number}: nav entry {page} names no page under docs/"
        for page, number in listed.items()
        if page not in pages
    ]
    return problems


# -- the gates on this repository -------------------------------------------------------------


def test_every_design_record_sits_at_a_classified_path_with_the_record_shape() -> None:
    assert misplaced_records(ROOT) == []


def test_rfc_index_lists_every_record_under_its_lifecycle_and_class() -> None:
    assert index_problems(ROOT) == []


@pytest.mark.slow
def test_docs_paths_cited_in_code_and_tests_exist() -> None:
    assert dangling_doc_references(ROOT) == []


def test_markdown_links_in_readme_and_docs_resolve() -> None:
    assert broken_markdown_links(ROOT) == []


def test_format_section_citations_resolve() -> None:
    assert unresolved_section_citations(ROOT) == []


def test_every_cited_rule_property_and_generator_id_has_an_anchor() -> None:
    assert undefined_rule_ids(ROOT) == []


def test_the_site_nav_lists_every_page() -> None:
    assert site_nav_problems(ROOT) == []


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
    _write(
        root,
        "docs/guide.md",
        "# Guide\n\nSee [the records](rfc/README.md), [admission.md §3.2](format/admission.md)"
        " and [R7f](format/admission.md#r7f).\n",
    )
    _write(
        root, "kernel/mod.py", '"""See docs/guide.md."""\n\n# and docs/rfc/ for records\nX = 1\n'
    )
    _write(root, "docs/format/admission.md", _FORMAT_ADMISSION)
    _write(root, "docs/format/properties.md", _FORMAT_PROPERTIES)
    _write(
        root,
        "kernel/rules.py",
        '"""Seeds (docs/format/admission.md §3.2, §4): R7 and R7f; law P1 (G-loop)."""\n\n'
        "# docs/format/admission.md\n# §3 orders the checks\n"
        'MESSAGE = "must include every shadowed node (R7f)"\n',
    )
    _write(root, "tests/test_rules.py", '"""P1 on G-loop logs (docs/format/properties.md §1)."""\n')


_FORMAT_ADMISSION = """# Admission

## 3. Check order

Citations inside code blocks are not checked:

```
folds.md §99 and R42
```

### 3.2 Seed and restore

## 4. The rules

### R7 — citations <a id="r7"></a>

<a id="r7f"></a>**7f** replace only: every shadowed node is cited.
"""

_FORMAT_PROPERTIES = """# Properties

## 1. Generators

<a id="g-loop"></a>G-loop: logs shaped like real model-loop output.

<a id="p1"></a>**P1** history equals the projection (see [R7](admission.md#r7), \
[admission.md §3](admission.md#3-check-order)).
"""


def test_gates_accept_a_clean_fake_tree(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    assert misplaced_records(tmp_path) == []
    assert index_problems(tmp_path) == []
    assert dangling_doc_references(tmp_path) == []
    assert broken_markdown_links(tmp_path) == []
    assert unresolved_section_citations(tmp_path) == []
    assert undefined_rule_ids(tmp_path) == []


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


def test_link_gate_fails_on_a_link_to_a_missing_format_document(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    _write(tmp_path, "README.md", "# Kernel\n\nRules: [the format](docs/format/rules.md).\n")
    assert broken_markdown_links(tmp_path) == [
        "README.md:3: link to docs/format/rules.md does not resolve"
    ]


def test_link_gate_fails_on_a_missing_anchor(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    _write(tmp_path, "docs/cli.md", "# CLI\n\n[R42](format/admission.md#r42), [x](#nowhere)\n")
    assert broken_markdown_links(tmp_path) == [
        "docs/cli.md:3: link to format/admission.md#r42: no anchor or heading #r42 in admission.md",
        "docs/cli.md:3: link to #nowhere: no anchor or heading #nowhere in cli.md",
    ]


def test_link_gate_fails_on_a_link_that_leaves_the_site(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    _write(tmp_path, "kernel/__init__.py", "")
    _write(tmp_path, "docs/cli.md", "# CLI\n\nSee [the code](../kernel/__init__.py).\n")
    problems = broken_markdown_links(tmp_path)
    assert len(problems) == 1 and "leaves docs/" in problems[0], problems


def test_citation_gate_fails_on_an_invented_section(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    _write(tmp_path, "kernel/other.py", '"""Admission (docs/format/admission.md §99)."""\n')
    assert unresolved_section_citations(tmp_path) == [
        "kernel/other.py:1: cites docs/format/admission.md §99, "
        "but docs/format/admission.md has no heading numbered 99"
    ]


def test_citation_gate_checks_every_section_of_a_list(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    _write(tmp_path, "tests/test_x.py", "# docs/format/admission.md §3, §3.7 and\n# §5\nX = 1\n")
    problems = unresolved_section_citations(tmp_path)
    assert [p.rsplit(" ", 1)[1] for p in problems] == ["3.7", "5"], problems


def test_citation_gate_fails_on_a_document_that_does_not_exist(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    _write(tmp_path, "kernel/other.py", "# the order of admission.md §3\nX = 1\n")
    _write(tmp_path, "docs/cli.md", "# CLI\n\nAs [folds.md §1](format/folds.md) says.\n")
    assert unresolved_section_citations(tmp_path) == [
        "kernel/other.py:1: cites admission.md §3, but admission.md names no file",
        "docs/cli.md:3: cites folds.md §1, but folds.md names no file",
    ]


def test_citation_gate_fails_on_an_invented_section_in_a_link(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    _write(tmp_path, "docs/cli.md", "# CLI\n\nSee [admission.md §99](format/admission.md).\n")
    assert unresolved_section_citations(tmp_path) == [
        "docs/cli.md:3: cites admission.md §99, but docs/format/admission.md has no heading "
        "numbered 99"
    ]


def test_id_gate_fails_on_an_unknown_rule(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    _write(tmp_path, "kernel/other.py", 'MESSAGE = "replace end is not on the surface (R42)"\n')
    assert undefined_rule_ids(tmp_path) == [
        'kernel/other.py:1: R42 has no anchor <a id="r42"> in docs/format/'
    ]


def test_id_gate_fails_on_a_missing_property(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    _write(tmp_path, "docs/properties.md", "# Properties\n\n* **P99** does not exist.\n")
    assert undefined_rule_ids(tmp_path) == [
        'docs/properties.md:3: P99 has no anchor <a id="p99"> in docs/format/'
    ]


def test_id_gate_fails_on_header_rules_and_generators_too(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    _write(tmp_path, "tests/test_x.py", "# H7, G-crash and R7f, then H7 again\nX = 1\n")
    assert undefined_rule_ids(tmp_path) == [
        'tests/test_x.py:1: H7 has no anchor <a id="h7"> in docs/format/',
        'tests/test_x.py:1: G-crash has no anchor <a id="g-crash"> in docs/format/',
    ]


def test_id_gate_fails_on_an_id_defined_twice(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    path = tmp_path / "docs/format/properties.md"
    path.write_text(path.read_text(encoding="utf-8") + '\n<a id="r7f"></a>\n', encoding="utf-8")
    assert undefined_rule_ids(tmp_path) == [
        "anchor 'r7f' defined in 2 files: docs/format/admission.md, docs/format/properties.md"
    ]


_MKDOCS = """site_name: x
nav:
  - Home: guide.md
  - Records:
      - rfc/README.md
      - rfc/implemented/process/2026-11-29-a.md
      - rfc/rejected/feature/2026-11-30-b-c.md
  - Format:
      - format/admission.md
      - Properties: format/properties.md
plugins:
  - search
"""


def test_nav_gate_fails_on_a_page_left_out_and_an_entry_without_a_page(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    _write(tmp_path, "mkdocs.yml", _MKDOCS)
    assert site_nav_problems(tmp_path) == []
    _write(tmp_path, "docs/cli.md", "# CLI\n")
    _write(tmp_path, "docs/hooks/x.md", "not a page\n")
    (tmp_path / "docs/format/properties.md").unlink()
    assert site_nav_problems(tmp_path) == [
        "docs/cli.md: not in the nav of mkdocs.yml",
        "mkdocs.yml:10: nav entry format/properties.md names no page under docs/",
    ]


def test_id_gate_fails_on_an_invariant_rule_id_without_an_anchor(tmp_path: Path) -> None:
    _good_tree(tmp_path)
    path = tmp_path / "docs/format/properties.md"
    path.write_text(path.read_text(encoding="utf-8") + '\n<a id="seq-order"></a>\n', "utf-8")
    _write(tmp_path, "kernel/folds/invariants.py", 'RULES: Final = ("seq-order", "turn-numbre")\n')
    assert undefined_rule_ids(tmp_path) == [
        "kernel/folds/invariants.py: invariant rule id 'turn-numbre' has no anchor "
        '<a id="turn-numbre"> in docs/format/'
    ]
