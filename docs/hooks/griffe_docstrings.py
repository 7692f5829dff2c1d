"""A Griffe extension for the API reference: doctests render as code, citations as links.

The kernel's docstrings put `>>>` examples straight into the text, as
`python -m doctest` reads them; Griffe's Google-style parser only treats them
as code inside an `Examples:` section, so Markdown would read `[True, False]`
as a link. And they cite the format as text (`docs/format/admission.md §3.2`,
`R7f`), which the site can turn into links. Before a docstring is parsed,
this extension fences every bare doctest block (a `>>>` line up to the next
blank line) as `pycon`, and links each citation of a format document (to the
numbered heading when a section is given) and each rule, property or
generator id that has an anchor under docs/format/. Links are relative to a
page in docs/api/, the only pages that render docstrings.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import griffe
from markdown.extensions.toc import slugify

__all__ = ("DocstringLinks", "fence_doctests", "link_citations")

FORMAT = Path(__file__).resolve().parent.parent / "format"
PREFIX = "../format/"

_CITATION = re.compile(r"docs/format/(?P<doc>[a-z]+)\.md(?: §(?P<section>\d+(?:\.\d+)*))?")
_ID = re.compile(r"(?<![\w/#-])(?:[RHP]\d+[a-z]?|G-[a-z]+(?:-[a-z]+)*)(?!\w)")
_PROTECTED = re.compile(r"`[^`\n]*`|\[[^\]\n]*\]\([^)\n]*\)")
_ANCHOR = re.compile(r"<a\s+id=\"([^\"]+)\"")
_HEADING = re.compile(r"^#{1,6}\s+(?P<number>\d+(?:\.\d+)*)\.?\s+(?P<title>.*?)\s*#*\s*$")


@cache
def _targets() -> tuple[dict[str, str], dict[tuple[str, str], str]]:
    """Id -> document that anchors it, and (document, section number) -> heading id."""
    ids: dict[str, str] = {}
    sections: dict[tuple[str, str], str] = {}
    for path in sorted(FORMAT.glob("*.md")):
        in_code = False
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.lstrip().startswith("```"):
                in_code = not in_code
            if in_code:
                continue
            for anchor in _ANCHOR.findall(line):
                ids.setdefault(anchor, path.name)
            if m := _HEADING.match(line):
                title = re.sub(r"<[^>]+>|`", "", f"{m.group('number')} {m.group('title')}")
                sections.setdefault((path.stem, m.group("number")), slugify(title, "-"))
    return ids, sections


def _link(match: re.Match[str]) -> str:
    ids, sections = _targets()
    text = match.group(0)
    if text.startswith("docs/format/"):
        doc, section = match.group("doc"), match.group("section")
        if not (FORMAT / f"{doc}.md").is_file():
            return text
        slug = sections.get((doc, section)) if section else None
        return f"[{text}]({PREFIX}{doc}.md{'#' + slug if slug else ''})"
    document = ids.get(text.lower())
    return f"[{text}]({PREFIX}{document}#{text.lower()})" if document else text


def link_citations(text: str) -> str:
    """Link format citations and ids in prose (not inside code spans or existing links)."""
    out: list[str] = []
    position = 0
    for protected in _PROTECTED.finditer(text):
        out.append(_link_plain(text[position : protected.start()]))
        out.append(protected.group(0))
        position = protected.end()
    out.append(_link_plain(text[position:]))
    return "".join(out)


def _link_plain(text: str) -> str:
    linked = _CITATION.sub(_link, text)
    parts = re.split(r"(\[[^\]\n]*\]\([^)\n]*\))", linked)
    return "".join(p if p.startswith("[") else _ID.sub(_link, p) for p in parts)


def fence_doctests(text: str) -> str:
    """`text` with each bare doctest block fenced as `pycon`, and its prose linked."""
    out: list[str] = []
    prose: list[str] = []
    in_fence = in_doctest = False

    def flush() -> None:
        if prose:
            out.append(link_citations("\n".join(prose)))
            prose.clear()

    for line in text.split("\n"):
        stripped = line.strip()
        if in_doctest and not stripped:
            out.append("```")
            in_doctest = False
        elif not in_doctest and stripped.startswith("```"):
            flush()
            in_fence = not in_fence
            out.append(line)
            continue
        elif not in_doctest and not in_fence and stripped.startswith(">>>"):
            flush()
            out.append("```pycon")
            in_doctest = True
        if in_doctest or in_fence:
            out.append(line)
        else:
            prose.append(line)
    flush()
    if in_doctest:
        out.append("```")
    return "\n".join(out)


class DocstringLinks(griffe.Extension):
    """Fence doctest blocks and link format citations in every docstring Griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(obj.docstring.value)
