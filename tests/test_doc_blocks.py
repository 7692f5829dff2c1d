"""Every code block of README.md and docs/ runs as written, and so does every docstring example.

The pages are README.md and docs/**/*.md, except the design records in docs/rfc/ (history, not
instructions). A page's ```python and ```pycon blocks run in page order in one namespace, so a
block may use what an earlier block of the same page defined. The working directory is a fresh
temporary directory holding a copy of examples/: a block reads `examples/NAME` as it would from
the repository's root, and what it writes stays there. A block whose first line starts with
`>>>` (and every ```pycon block) is a doctest, whose output must match; a `# file: NAME` block
is also written to NAME, for the blocks after it.

A block that cannot run standalone has `<!-- not run: REASON -->` on the line before its fence.
`NOT_RUN` lists each one, so a new one fails here until it is listed; it is still compiled. A
page in `KNOWN_FAILING` is a strict xfail, so it fails again once it runs, until it leaves.

Shell blocks are not run. Each `session-kernel ...` command in them must parse with the real
parser (`kernel.cli.build_parser()`); one that only reads shipped examples (`inspect`, `verify`
with one job and no cluster, `export`, or `repair --dry-run`, on paths under examples/, no
report) also runs in-process on the copy, and must exit 0 with output and leave the copy
unchanged.

The `>>>` examples in the docstrings of every module under kernel/ and properties/ run with
doctest, one test per module.
"""

from __future__ import annotations

import argparse
import doctest
import importlib
import re
import shlex
import shutil
import sys
import types
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import attrs
import pytest
from hypothesis import settings

from kernel.cli import build_parser, main

__all__ = (
    "Block",
    "Command",
    "blocks",
    "commands",
    "docstring_modules",
    "pages",
    "parse",
    "reads_examples_only",
    "run_blocks",
    "run_docstring_examples",
)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

PYTHON = ("python", "pycon")
SHELL = ("sh", "bash", "shell", "console")
KNOWN_LANGUAGES = frozenset({*PYTHON, *SHELL, "json", "text", ""})
"""Every fence language the pages may use; a new one must be classified here first."""

NOT_RUN: tuple[tuple[str, str], ...] = (
    (
        "docs/architecture.md",
        "an excerpt of kernel/folds/request_header.py, which runs in the suite",
    ),
    ("docs/guide.md", "reads sessions.parquet, the report the verify command above writes"),
)
"""`(page, reason)` of every block marked `<!-- not run: REASON -->`, in page order."""

PYTHON_PAGES = frozenset(
    {
        "README.md",
        "docs/format/admission.md",
        "docs/format/events.md",
        "docs/format/folds.md",
        "docs/format/persistence.md",
        "docs/guide.md",
        "docs/projections.md",
        "docs/properties.md",
    }
)
"""The pages that hold Python blocks that run: a page that loses them all, or an extractor that
stops finding them, fails here."""

KNOWN_FAILING: dict[str, str] = {}
"""Pages whose blocks fail today, by reason: a strict xfail, so a fixed page fails until its
entry goes."""

SLOW_PAGES = frozenset({"docs/properties.md"})
"""Pages whose blocks take 0.8 s or more (the exhaustive crash checker, Hypothesis runs)."""

SLOW_MODULES = frozenset({"properties.exhaustive"})
"""Modules whose docstring examples take 0.8 s or more (an exhaustive crash check)."""

_FENCE = re.compile(
    r"^(?P<indent>[ ]*)(?P<fence>`{3,})(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^[ ]*(?P=fence)[ ]*$",
    re.M | re.S,
)
_NOT_RUN_MARK = re.compile(r"^[ ]*<!-- not run: (?P<reason>\S[^\n]*?) -->[ ]*$")
_FILE = re.compile(r"^# file: (?P<name>[\w.]+)\n")
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&"})


@attrs.frozen
class Block:
    """One fenced block of a page: `line` is its opening fence's, from 1; `body` is unindented."""

    page: str
    line: int
    lang: str
    body: str
    not_run: str | None = None


@attrs.frozen
class Command:
    """One `session-kernel` command line of a shell block: the arguments after the program name."""

    page: str
    line: int
    argv: tuple[str, ...]


def blocks(text: str, page: str) -> list[Block]:
    """Every fenced block of a Markdown text, in order, with its `<!-- not run: -->` reason."""
    lines = text.splitlines()
    found = []
    for match in _FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        indent = len(match.group("indent"))
        body = "".join(
            row[indent:] if row.startswith(" " * indent) else row.lstrip(" ")
            for row in match.group("body").splitlines(keepends=True)
        )
        mark = _NOT_RUN_MARK.match(lines[line - 2]) if line >= 2 else None
        reason = mark.group("reason") if mark else None
        found.append(Block(page, line, match.group("lang"), body, reason))
    return found


def pages() -> list[str]:
    """README.md and every page under docs/ outside docs/rfc/, as paths from the root."""
    docs = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md"))
    return ["README.md", *(p for p in docs if not p.startswith("docs/rfc/"))]


def _page_blocks(page: str) -> list[Block]:
    return blocks((ROOT / page).read_text(encoding="utf-8"), page)


def _is_doctest(block: Block) -> bool:
    return block.lang == "pycon" or block.body.lstrip().startswith(">>>")


def _run_doctest(block: Block, namespace: dict[str, Any]) -> None:
    name = f"{block.page}:{block.line}"
    parser = doctest.DocTestParser()
    test = parser.get_doctest(block.body, namespace, name, str(ROOT / block.page), block.line)
    assert test.examples, f"{name}: a doctest block without a >>> example"
    report: list[str] = []
    runner = doctest.DocTestRunner()
    runner.run(test, out=report.append, clear_globs=False)
    namespace.update(test.globs)  # the next block sees what this one defined
    if runner.failures:
        raise AssertionError("".join(report))


def _compile(block: Block, filename: str) -> None:
    """Compile a block without running it: a marked block still has to be valid Python."""
    if not _is_doctest(block):
        compile(block.body, filename, "exec")
        return
    for example in doctest.DocTestParser().get_examples(block.body, filename):
        compile(example.source, filename, "single")


def run_blocks(page_blocks: Sequence[Block], where: Path) -> dict[str, Any]:
    """Run the Python blocks in order in one fresh namespace; returns the namespace.

    `where` receives the `# file: NAME` blocks; the caller sets the working directory. A
    failing block raises, with a note naming its page and line; marked blocks only compile.
    """
    module = types.ModuleType(f"docs_page_{id(page_blocks)}")
    namespace = module.__dict__
    sys.modules[module.__name__] = module
    try:
        for block in page_blocks:
            if block.lang not in PYTHON:
                continue
            filename = str(ROOT / block.page)
            if block.not_run is not None:
                _compile(block, filename)
                continue
            if file := _FILE.match(block.body):
                (where / file.group("name")).write_text(block.body, encoding="utf-8")
            try:
                if _is_doctest(block):
                    _run_doctest(block, namespace)
                else:
                    # Padded, so a traceback shows the Markdown file's own line numbers.
                    exec(compile("\n" * block.line + block.body, filename, "exec"), namespace)
            except Exception as exc:
                exc.add_note(f"in the block of {block.page} at line {block.line}")
                raise
    finally:
        del sys.modules[module.__name__]
    return namespace


def commands(page_blocks: Sequence[Block]) -> list[Command]:
    """Every `session-kernel` command in the shell blocks, redirections left out."""
    found = []
    for block in page_blocks:
        if block.lang not in SHELL:
            continue
        for line, row in _command_lines(block):
            lexer = shlex.shlex(row, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            segment: list[str] = []
            for word in [*lexer, ";"]:
                if word not in _SEPARATORS:
                    segment.append(word)
                    continue
                words = [w for i, w in enumerate(segment) if not _redirected(segment, i)]
                if words[:1] == ["session-kernel"]:
                    found.append(Command(block.page, line, tuple(words[1:])))
                segment = []
    return found


def _command_lines(block: Block) -> Iterator[tuple[int, str]]:
    """The shell block's lines, each with its Markdown line; a line ending in `\\` continues."""
    pending, start = "", 0
    for line, row in enumerate(block.body.splitlines(), start=block.line + 1):
        start = start if pending else line
        if row.endswith("\\"):
            pending += row[:-1] + " "
            continue
        yield start, pending + row
        pending = ""


def _redirected(words: Sequence[str], index: int) -> bool:
    """Whether `words[index]` is a redirection operator or its target."""

    def operator(word: str) -> bool:
        return word[:1] in ("<", ">")

    return operator(words[index]) or (index > 0 and operator(words[index - 1]))


def parse(argv: Sequence[str]) -> argparse.Namespace | None:
    """The command line as the real parser reads it, or None when it refuses it."""
    try:
        return build_parser().parse_args(list(argv))
    except SystemExit:
        return None


def reads_examples_only(argv: Sequence[str]) -> bool:
    """Whether a command only reads shipped examples: cheap to run, and it writes nothing."""
    args = parse(argv)
    if args is None or not argv:
        return False
    if argv[0] not in ("inspect", "verify", "export"):
        if argv[0] != "repair" or not args.dry_run or args.undo:
            return False
    if getattr(args, "jobs", 1) != 1 or getattr(args, "report", None) is not None:
        return False
    if getattr(args, "dask", None) is not None or getattr(args, "scheduler", None) is not None:
        return False
    paths = getattr(args, "paths", None) or [args.log]
    return all(PurePosixPath(path).parts[:1] == ("examples",) for path in paths)


def docstring_modules() -> list[str]:
    """Every module under kernel/ and properties/ whose source holds a `>>>` example."""
    names = []
    for package in ("kernel", "properties"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if ">>>" in path.read_text(encoding="utf-8"):
                parts = path.relative_to(ROOT).with_suffix("").parts
                names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def run_docstring_examples(module: types.ModuleType) -> int:
    """Run the docstring examples (`>>>`) of a module; returns how many ran, raises if one fails."""
    tests = [test for test in doctest.DocTestFinder().find(module) if test.examples]
    report: list[str] = []
    runner = doctest.DocTestRunner()
    for test in tests:
        runner.run(test, out=report.append)
    if runner.failures:
        raise AssertionError("".join(report))
    return runner.tries


@pytest.fixture
def where(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh working directory holding a copy of examples/; the Hypothesis profile kept."""
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    profile = settings.get_current_profile_name()
    yield tmp_path
    settings.load_profile(profile)  # a page may load a profile of its own


def _page_param(page: str) -> Any:
    marks: list[pytest.MarkDecorator] = []
    if page in SLOW_PAGES:
        marks.append(pytest.mark.slow)
    if page in KNOWN_FAILING:
        marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_FAILING[page]))
    return pytest.param(page, marks=marks, id=page)


# -- the extractor and the runners, on small texts -------------------------------------------

_FAKE_PAGE = """\
# A page

```python
x = 1
```

1. In a list:

   ```python
   y = x + 1
   ```

<!-- not run: needs a network -->
```python
import nowhere
```

````text
```python
not a block of its own
```
````

```pycon
>>> x + y
3
```

```sh
session-kernel inspect examples/clean-run.jsonl && session-kernel verify -j 2 logs/ > out.json
python3 -m pip install .  # session-kernel verify not/a/command
```
"""


def test_the_extractor_finds_fences_indented_blocks_and_markers() -> None:
    found = blocks(_FAKE_PAGE, "fake.md")
    assert [(b.line, b.lang, b.not_run) for b in found] == [
        (3, "python", None),
        (9, "python", None),
        (14, "python", "needs a network"),
        (18, "text", None),
        (24, "pycon", None),
        (29, "sh", None),
    ]
    assert found[1].body == "y = x + 1\n"
    assert found[3].body == "```python\nnot a block of its own\n```\n"


def test_blocks_share_one_namespace_and_a_marked_block_only_compiles(where: Path) -> None:
    namespace = run_blocks(blocks(_FAKE_PAGE, "fake.md"), where)
    assert (namespace["x"], namespace["y"]) == (1, 2)
    with pytest.raises(SyntaxError):
        run_blocks([Block("fake.md", 1, "python", "1 +\n", "a reason")], where)
    run_blocks([Block("fake.md", 1, "pycon", ">>> import nowhere\n", "a reason")], where)
    with pytest.raises(SyntaxError):
        run_blocks([Block("fake.md", 1, "pycon", ">>> 1 +\n", "a reason")], where)


def test_a_failing_block_fails_naming_its_page_and_line(where: Path) -> None:
    failing = [Block("fake.md", 3, "python", "x = 1\n"), Block("fake.md", 7, "python", "1 / 0\n")]
    with pytest.raises(ZeroDivisionError) as caught:
        run_blocks(failing, where)
    assert "in the block of fake.md at line 7" in (caught.value.__notes__ or [])
    assert caught.traceback[-1].lineno + 1 == 8  # the Markdown line of `1 / 0`


def test_a_doctest_block_with_other_output_fails(where: Path) -> None:
    with pytest.raises(AssertionError, match="Expected:\n    3\nGot:\n    2"):
        run_blocks([Block("fake.md", 1, "python", ">>> 1 + 1\n3\n")], where)
    with pytest.raises(AssertionError, match="without a >>> example"):
        run_blocks([Block("fake.md", 1, "pycon", "1 + 1\n")], where)


def test_a_file_block_is_written_for_the_blocks_after_it(
    where: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = [
        Block("fake.md", 1, "python", "# file: doc_blocks_helper.py\nVALUE = 7\n"),
        Block("fake.md", 5, "python", "from doc_blocks_helper import VALUE\n"),
    ]
    monkeypatch.syspath_prepend(str(where))
    monkeypatch.delitem(sys.modules, "doc_blocks_helper", raising=False)
    assert run_blocks(page, where)["VALUE"] == 7
    assert (where / "doc_blocks_helper.py").read_text(encoding="utf-8").endswith("VALUE = 7\n")


def test_commands_are_cut_at_separators_and_redirections() -> None:
    found = commands(blocks(_FAKE_PAGE, "fake.md"))
    assert [(c.line, c.argv) for c in found] == [
        (30, ("inspect", "examples/clean-run.jsonl")),
        (30, ("verify", "-j", "2", "logs/")),
    ]
    assert parse(found[1].argv) is not None
    assert parse(("verify", "--jobz", "2", "logs/")) is None
    assert reads_examples_only(found[0].argv)
    assert not reads_examples_only(found[1].argv)
    assert not reads_examples_only(("repair", "examples/clean-run.jsonl"))
    assert not reads_examples_only(("verify", "--dask", "local", "examples/"))
    assert reads_examples_only(("repair", "--dry-run", "examples/clean-run.jsonl"))


def test_a_failing_docstring_example_fails() -> None:
    module = types.ModuleType("fake_module")
    exec('def f():\n    """\n    >>> 1 + 1\n    3\n    """\n', module.__dict__)
    with pytest.raises(AssertionError, match="Failed example"):
        run_docstring_examples(module)


# -- the pages -------------------------------------------------------------------------------


def test_the_pages_are_readme_and_docs_outside_the_design_records() -> None:
    found = pages()
    assert {"README.md", "docs/guide.md", "docs/cli.md", "docs/format/folds.md"} <= set(found)
    assert not [page for page in found if page.startswith("docs/rfc/")]


def test_every_fence_has_a_known_language() -> None:
    unknown = [
        f"{b.page}:{b.line}: ```{b.lang}"
        for page in pages()
        for b in _page_blocks(page)
        if b.lang not in KNOWN_LANGUAGES
    ]
    assert not unknown, "classify these languages in KNOWN_LANGUAGES:\n" + "\n".join(unknown)


def test_the_pages_with_python_blocks_are_the_expected_ones() -> None:
    counts = {
        page: sum(b.lang in PYTHON and b.not_run is None for b in _page_blocks(page))
        for page in pages()
    }
    assert {page for page, count in counts.items() if count} == PYTHON_PAGES
    assert sum(counts.values()) >= 30


def test_the_blocks_not_run_are_the_listed_few_and_each_marker_marks_one() -> None:
    marked = [
        (b.page, b.not_run) for page in pages() for b in _page_blocks(page) if b.not_run is not None
    ]
    assert marked == list(NOT_RUN)
    markers = {
        page: (ROOT / page).read_text(encoding="utf-8").count("<!-- not run") for page in pages()
    }
    for page, count in markers.items():
        python = [b for b in _page_blocks(page) if b.not_run is not None and b.lang in PYTHON]
        assert count == len(python), f"{page}: a not-run marker that marks no Python block"


@pytest.mark.parametrize("page", [_page_param(page) for page in sorted(PYTHON_PAGES)])
def test_the_python_blocks_of_a_page_run_as_written(page: str, where: Path) -> None:
    page_blocks = _page_blocks(page)
    assert any(b.lang in PYTHON and b.not_run is None for b in page_blocks)
    run_blocks(page_blocks, where)


# -- the command lines -----------------------------------------------------------------------


def _all_commands() -> list[Command]:
    return [command for page in pages() for command in commands(_page_blocks(page))]


def test_every_command_line_in_the_docs_parses() -> None:
    found = _all_commands()
    pages_with_commands = {command.page for command in found}
    assert {"README.md", "docs/cli.md", "docs/guide.md"} <= pages_with_commands
    refused = [f"{c.page}:{c.line}: {shlex.join(c.argv)}" for c in found if parse(c.argv) is None]
    assert not refused, "the parser refuses:\n" + "\n".join(refused)


def test_the_commands_that_read_the_examples_run_and_exit_0(
    where: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runnable = [command for command in _all_commands() if reads_examples_only(command.argv)]
    assert {command.argv[0] for command in runnable} == {"inspect", "verify", "export", "repair"}
    failed = []
    for command in runnable:
        status = main(list(command.argv))
        out, err = capsys.readouterr()
        if status != 0 or not out.strip():
            failed.append(f"{command.page}:{command.line}: exit {status}\n{err}")
    assert not failed, "\n".join(failed)
    for path in EXAMPLES.iterdir():
        assert (where / "examples" / path.name).read_bytes() == path.read_bytes(), path.name


# -- the docstrings --------------------------------------------------------------------------


def test_the_modules_with_docstring_examples_are_found() -> None:
    found = docstring_modules()
    assert {"kernel.values.json", "kernel.folds.request_header", "properties.exhaustive"} <= set(
        found
    )
    assert len(found) >= 25


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=[pytest.mark.slow] if name in SLOW_MODULES else [])
        for name in docstring_modules()
    ],
)
def test_the_docstring_examples_of_a_module_run(name: str, where: Path) -> None:
    assert run_docstring_examples(importlib.import_module(name)) > 0, f"{name}: no example ran"
