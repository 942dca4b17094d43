"""The user's documents: README.md stays short, and every relative link in the docs resolves to a file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README_MAX_BYTES = 20 * 1024

#: ``[text](target)`` and ``![alt](target)``; the target ends at whitespace (a title may follow) or ``)``
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE_CODE = re.compile(r"`[^`]*`")


def documents() -> list[Path]:
    """README.md, CHANGELOG.md, every page under docs/, the README of every scripts folder, and research/notes/."""
    files = [ROOT / "README.md", ROOT / "CHANGELOG.md"]
    files += [ROOT / folder / "README.md" for folder in ("research", "analysis", "benchmarks", "tools")]
    files += sorted((ROOT / "docs").rglob("*.md")) + sorted((ROOT / "research" / "notes").rglob("*.md"))
    return files


def relative_links(text: str) -> list[str]:
    """Link targets of a markdown text that point into the repository (no URL, no bare ``#anchor``).

    Links inside fenced code blocks and inline code are not links, so they are skipped; an ``#anchor`` or
    ``?query`` after a path is dropped.
    """
    out = []
    in_fence = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        for target in _LINK.findall(_INLINE_CODE.sub("", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith("#"):
                continue  # http:, https:, mailto: ... or a link within the same page
            path = target.split("#", 1)[0].split("?", 1)[0]
            if path:
                out.append(path)
    return out


def test_link_parser_finds_relative_targets_and_skips_the_rest():
    text = "\n".join([
        "See [docs](docs/index.md#top), ![fig](figures/a.png \"title\") and [site](https://example.org/x.md).",
        "Same page: [here](#usage); code: `[not](a-link.md)`; mail: [me](mailto:a@b.c).",
        "```",
        "[inside a fence](nowhere.md)",
        "```",
        "[folder](research/) and [up](../README.md)",
    ])
    assert relative_links(text) == ["docs/index.md", "figures/a.png", "research/", "../README.md"]


def test_the_documents_exist():
    missing = [str(p.relative_to(ROOT)) for p in documents() if not p.is_file()]
    assert not missing, f"documents missing: {missing}"
    assert len(documents()) >= 10  # README, CHANGELOG, research/README.md and the docs pages


def test_readme_is_short():
    size = (ROOT / "README.md").stat().st_size
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes; move reference material into docs/"


@pytest.mark.parametrize("doc", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc):
    broken = [t for t in relative_links(doc.read_text(encoding="utf-8")) if not (doc.parent / t).exists()]
    assert not broken, f"{doc.relative_to(ROOT)}: links to missing files: {broken}"


@pytest.mark.parametrize("folder", ["research", "analysis", "benchmarks", "tools"])
def test_every_script_is_listed_in_its_folders_readme(folder):
    text = (ROOT / folder / "README.md").read_text(encoding="utf-8")
    missing = [p.name for p in sorted((ROOT / folder).glob("*.py")) if f"({p.name})" not in text]
    assert not missing, f"{folder}/README.md does not list (as a link) {missing}"
