"""The front matter every MyST notebook of the book starts with (used by tests that write notebooks)."""

MYST_HEADER = """\
---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
"""
