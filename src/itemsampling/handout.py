"""Sphinx extension for handing the book out (listed in ``_config.yml``'s ``extra_extensions``).

* **Executed notebooks for download.** Every chapter page offers its executed ``.ipynb`` in the
  theme's download menu. sphinx-book-theme adds the ``.ipynb`` entry for a MyST notebook only
  when a launch service (Binder, JupyterHub, ...) is configured; the book has none, so this
  extension copies the notebook that MyST-NB executed (``_build/jupyter_execute/<page>.ipynb``)
  next to the page's source in ``_sources/`` and sets the ``ipynb_source`` the theme reads.
* **One citation style.** The text cites author-year (``bibtex_reference_style: author_year``);
  the pybtex style ``authoryear`` registered here labels the reference list the same way,
  "[Krichene and Rendle, 2020]", instead of numbers.
"""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["setup", "author_year_label"]


def author_year_label(entry) -> str:
    """"Krichene and Rendle, 2020"; "Li et al., 2024" for three or more authors."""
    persons = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [" ".join(p.last_names) or " ".join(p.first_names) for p in persons]
    names = [n.replace("{", "").replace("}", "") for n in names]
    if not names:
        who = entry.fields.get("title", entry.key)
    elif len(names) == 1:
        who = names[0]
    elif len(names) == 2:
        who = f"{names[0]} and {names[1]}"
    else:
        who = f"{names[0]} et al."
    year = entry.fields.get("year", "n.d.")
    return f"{who}, {year}"


def _register_pybtex_style() -> None:
    import pybtex.plugin
    from pybtex.style.formatting.plain import Style as PlainStyle
    from pybtex.style.labels import BaseLabelStyle
    from pybtex.style.sorting.author_year_title import SortingStyle

    class AuthorYearLabelStyle(BaseLabelStyle):
        def format_labels(self, sorted_entries):
            # equal labels get a, b, ... after the year ("Li et al., 2020a"), as author-year styles do
            entries = list(sorted_entries)
            labels = [author_year_label(entry) for entry in entries]
            counts = {label: labels.count(label) for label in labels}
            seen: dict = {}
            for label in labels:
                if counts[label] > 1:
                    seen[label] = seen.get(label, 0) + 1
                    yield f"{label}{chr(ord('a') + seen[label] - 1)}"
                else:
                    yield label

    class AuthorYearStyle(PlainStyle):
        default_label_style = AuthorYearLabelStyle
        default_sorting_style = SortingStyle

    try:
        pybtex.plugin.find_plugin("pybtex.style.formatting", "authoryear")
    except pybtex.plugin.PluginNotFound:
        pybtex.plugin.register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle)


def _offer_ipynb(app, pagename, templatename, context, doctree) -> None:
    if doctree is None:
        return
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if not executed.exists():
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(executed, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


def setup(app):
    _register_pybtex_style()
    # before sphinx-book-theme builds its header buttons (priority 501)
    app.connect("html-page-context", _offer_ipynb, priority=400)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
