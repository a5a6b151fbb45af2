"""Every relative link in README.md and docs/*.md names a file that exists, and
an anchor names a heading of that file (as GitHub makes heading anchors)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.M)


def _prose(text: str) -> str:
    """The text without fenced code blocks and code spans (which hold brackets that are no links)."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        slug = _slug(heading)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links(page: Path) -> list[str]:
    return [t for t in LINK.findall(_prose(page.read_text(encoding="utf-8")))
            if not re.match(r"[a-z][a-z0-9+.-]*:", t)]  # http:, https:, mailto: …


def test_the_pages_are_found_and_hold_links():
    assert (ROOT / "README.md") in PAGES and len(PAGES) > 5
    assert len(links(ROOT / "README.md")) > 10


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path):
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with anchor #{anchor} in {dest.name}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_slugs_are_githubs():
    assert _slug("Column lineage from Spark plans (`fll.spark`)") == "column-lineage-from-spark-plans-fllspark"
    assert _slug("Governance: classification tags that follow lineage, and lineage diffs") == \
        "governance-classification-tags-that-follow-lineage-and-lineage-diffs"
    assert _slug("The `fll` command line") == "the-fll-command-line"


def test_a_broken_link_is_found(tmp_path: Path):
    page = tmp_path / "p.md"
    page.write_text("# Top\n\nsee [x](missing.md), [y](#top), [z](#nowhere), `[no](link.md)`\n"
                    "```\n[nor](this.md)\n```\n", encoding="utf-8")
    assert links(page) == ["missing.md", "#top", "#nowhere"]
    assert anchors(page) == {"top"}
