"""Every verdict the book prints is decided by its own numbers: a verdict word (matches, holds,
reproduced, contradicted, wins, beats, never, always, consistently, honest) may appear in a
chapter's prose only inside glued text (``{glue:md}`...```, produced by the verdict functions of
``itemsampling.book``), in a quotation of a paper ("..." or a ``>`` block quote), in code, maths
or a cell, or as one of the deliberate exceptions listed below with their reason."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "notebooks").glob("*.md"))
WORDS = ("matches", "holds", "reproduced", "contradicted", "wins", "beats", "never", "always", "consistently",
         "honest")
_WORD = re.compile(r"\b(" + "|".join(WORDS) + r")\b", re.IGNORECASE)

# page -> [(a piece of the line that holds the word, why it is not a verdict)]
EXCEPTIONS = {
    "03-models-and-rank-distributions.md": [
        ("a split that holds out one item per user",
         "'holds out' names the split (the held-out item), it is not a verdict"),
    ],
}

def _blank(match: re.Match) -> str:
    """Replace a span by blanks, keeping its line breaks (line numbers stay right)."""
    return re.sub(r"[^\n]", " ", match.group(0))


def prose(text: str) -> str:
    """The prose of a MyST notebook with everything that is not typed prose blanked out: the front
    matter, code cells and code / maths blocks, option lines of directives, maths, inline code and
    roles (glued values and sentences among them), HTML comments, block quotes and "quotations"."""
    lines = text.split("\n")
    out = []
    fence = None
    in_front = bool(lines) and lines[0].strip() == "---"
    in_math = False
    for i, line in enumerate(lines):
        s = line.strip()
        if in_front:
            out.append("")
            if i > 0 and s == "---":
                in_front = False
            continue
        if fence is not None:
            out.append("")
            if s.startswith(fence) and not s.strip(fence[0]):
                fence = None
            continue
        m = re.match(r"^(`{3,}|~{3,})\s*(\{([^}]*)\})?\s*(\S*)", s)
        if m:
            out.append("")
            kind = m.group(3)
            if kind is None or kind.strip() in ("code-cell", "math", "code", "code-block"):
                fence = m.group(1)    # a cell or a code / maths block: skipped to its closing fence
            continue                  # a prose directive (note, exercise, figure...): its body is prose
        if s == "$$" or (s.startswith("$$") and not (s.endswith("$$") and len(s) > 2)):
            in_math = not in_math
            out.append("")
            continue
        if in_math or s.startswith(">") or re.match(r"^:[\w-]+:", s):
            out.append("")
            continue
        out.append(line)
    body = "\n".join(out)
    for pattern in (r"<!--.*?-->", r"\$\$.*?\$\$", r"(?<!\\)\$[^$\n]+\$", r"\{[\w:-]+\}`[^`]*`", r"`[^`\n]*`",
                    r"“[^”]{0,400}”", r'"[^"]{0,400}"'):
        body = re.sub(pattern, _blank, body, flags=re.DOTALL)
    return body


def verdict_words(text: str) -> list[tuple[int, str, str]]:
    """(line number, word, the line) for every verdict word in the typed prose of ``text``."""
    lines = text.split("\n")
    return [(no, m.group(1), lines[no - 1].strip())
            for no, line in enumerate(prose(text).split("\n"), start=1) for m in _WORD.finditer(line)]


def test_scanner_finds_typed_verdicts_and_skips_the_rest():
    page = "\n".join([
        "---", "title: holds", "---", "# A page",
        "Ours matches the paper.",                                      # typed: found
        "{glue:md}`ch_verdict` and {glue:text}`x_matches:.3f` beside `beats()`.",
        "The paper says \"the new estimators always win\", and “never” too.",
        "> Quoted: the method consistently beats the baseline.",
        "```{code-cell} ipython3", "record_text('v', 'A beats B')", "```",
        "$$", "\\text{never}", "$$", "where $x$ always $y$ holds",     # both words are typed
        "```{note}", ":class: holds", "Every draw wins.", "```",        # a note's body is prose
        "<!-- a comment that never shows -->",
    ])
    found = [(no, w) for no, w, _ in verdict_words(page)]
    assert found == [(5, "matches"), (15, "always"), (15, "holds"), (18, "wins")]


@pytest.mark.parametrize("page", [pytest.param(p, id=p.stem[:5]) for p in PAGES])
def test_no_typed_verdict_words(page):
    allowed = EXCEPTIONS.get(page.name, [])
    used = set()
    bad = []
    for no, word, line in verdict_words(page.read_text()):
        hit = [k for k, (piece, _) in enumerate(allowed) if piece in line]
        if hit:
            used.update(hit)
        else:
            bad.append(f"{page.name}:{no}: '{word}' in: {line[:160]}")
    assert not bad, ("verdict words typed in prose (glue a verdict from itemsampling.book, quote the paper, or "
                     "list the line in EXCEPTIONS with its reason):\n" + "\n".join(bad))
    stale = [piece for k, (piece, _) in enumerate(allowed) if k not in used]
    assert not stale, f"exceptions that no longer match a line of {page.name}: {stale}"


def test_exceptions_name_real_pages_with_reasons():
    names = {p.name for p in PAGES}
    assert PAGES and set(EXCEPTIONS) <= names
    assert all(piece and len(reason) > 20 for items in EXCEPTIONS.values() for piece, reason in items)
