"""``glue``: MyST-NB's ``myst_nb.glue`` (MyST-NB 1.4.0, ``myst_nb/ext/glue/__init__.py``), the same
display message, without the import that comes with it.

``myst_nb.glue`` imports ``myst_nb.ext.glue``, which imports nbformat, which imports jsonschema, whose
format checkers build 38 Lark grammars of ``rfc3987-syntax`` on import: one to four seconds in every
kernel that glues a value, the first time it does. The chapters glue through this function (and
:func:`itemsampling.book.record`, :func:`~itemsampling.book.record_text` and
:func:`itemsampling.exercises.check` do), so a chapter's kernel does not pay it;
``tests/test_book_helpers.py`` checks that both send the same message for the kinds of value the chapters glue.
"""

from __future__ import annotations

#: the prefix of the MIME types of a value glued with ``display=False`` (``myst_nb.ext.glue.GLUE_PREFIX``)
GLUE_PREFIX = "application/papermill.record/"


def glue(name: str, variable, display: bool = True) -> None:
    """Glue ``variable`` under ``name`` into the executing cell's outputs, for ``{glue:...}`` roles and
    directives: its display data (IPython's formatters), under :data:`GLUE_PREFIX` unless
    ``display``, with the ``scrapbook`` metadata MyST-NB reads, as ``myst_nb.glue`` does."""
    import IPython
    from IPython.display import display as ipy_display

    mimebundle, metadata = IPython.core.formatters.format_display_data(variable)
    mime_prefix = "" if display else GLUE_PREFIX
    metadata["scrapbook"] = dict(name=name, mime_prefix=mime_prefix)
    ipy_display({mime_prefix + k: v for k, v in mimebundle.items()}, raw=True, metadata=metadata)
