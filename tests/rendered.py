"""Reading the rendered HTML page of a rerun (``python -m itemsampling.run`` writes it): the prose
and captions a reader sees, without code cells and tables."""

from __future__ import annotations

import html
import re
from pathlib import Path


def rendered_prose(page) -> str:
    """The text of the page's article outside code cells, tables and the page chrome, with tags
    removed, entities decoded and white space collapsed (inline math stays as ``\\(N\\)``)."""
    text = Path(page).read_text(encoding="utf-8")
    m = re.search(r"<article[^>]*>(.*)</article>", text, re.S)
    body = m.group(1) if m else text
    body = re.sub(r'<div class="cell_input.*?</div>\s*</div>\s*</div>', " ", body, flags=re.S)
    body = re.sub(r"<pre.*?</pre>", " ", body, flags=re.S)
    body = re.sub(r"<table.*?</table>", " ", body, flags=re.S)
    body = re.sub(r"<[^>]+>", " ", body)
    return re.sub(r"\s+", " ", html.unescape(body))
