"""The front page claims only what the book contains: its chapter list and the table of contents
name the same chapters, and every chapter it names exists."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _toc_files():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = []
    for part in toc.get("parts", []):
        for ch in part.get("chapters", []):
            files.append(ch["file"])
    return files


def test_intro_chapter_list_matches_the_toc():
    intro = (ROOT / "book" / "intro.md").read_text()
    section = intro.split("## What the chapters contain", 1)[1].split("\n## ", 1)[0]
    linked = re.findall(r"\]\(\.\./(notebooks/[^)#]+)\.md\)", section)
    chapters = [f for f in _toc_files() if re.match(r"notebooks/\d\d-", f)]  # numbered chapters; the guide is front matter
    assert linked == chapters, "book/intro.md's chapter list and _toc.yml disagree"
    for f in linked:
        assert (ROOT / f"{f}.md").exists()
        number = int(Path(f).name[:2])
        title = (ROOT / f"{f}.md").read_text().split("\n# ", 1)[1].splitlines()[0]
        assert title.startswith(f"{number}. ")
        assert f"[Chapter {number}](../{f}.md)" in section


def test_intro_points_readers_to_every_guide():
    """Both guides of the table of contents are named where the front page tells readers where to go:
    in "Who it is for" and in "How to read it", each by its own title."""
    intro = (ROOT / "book" / "intro.md").read_text()
    guides = [f for f in _toc_files() if f.startswith("notebooks/guide-")]
    assert len(guides) == 2
    for heading in ("## Who it is for", "## How to read it"):
        section = intro.split(heading, 1)[1].split("\n## ", 1)[0]
        for f in guides:
            title = (ROOT / f"{f}.md").read_text().split("\n# ", 1)[1].splitlines()[0]
            assert f"[{title}](../{f}.md)" in re.sub(r"\s+", " ", section), (heading, f)
