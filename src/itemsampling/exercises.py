"""Check cells of the book's exercises.

Every exercise with an answer has a solution cell that assigns ``answer_<chapter>_<n>`` and, right
after it, a check cell::

    from itemsampling.exercises import check
    check("ex-08-1", globals().get("answer_08_1"), expected=<independent computation>, rtol=1e-6)

``check`` compares the reader's answer with the expected value and says clearly whether it is
right. An unanswered exercise (``None`` or ``...``) prints a "not answered yet" message and returns
``False`` without raising, so a student notebook runs on; a wrong answer raises
:class:`WrongAnswer` (an ``AssertionError``), so a book whose solution drifted from its check fails
to build, and a grader counts it as failed.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["check", "WrongAnswer", "NOT_ANSWERED"]

NOT_ANSWERED = "not answered yet"


class WrongAnswer(AssertionError):
    """The reader's answer differs from the independent computation."""


def _is_blank(answer) -> bool:
    return answer is None or answer is Ellipsis


def check(label: str, answer, expected, rtol: float = 1e-6, atol: float = 0.0) -> bool:
    """Compare ``answer`` with ``expected`` (numbers and arrays within ``rtol``/``atol``; strings,
    booleans and other objects by equality). Returns ``True`` when right, ``False`` when not
    answered; raises :class:`WrongAnswer` when wrong."""
    if _is_blank(answer):
        print(f"{label}: {NOT_ANSWERED} - assign your answer in the cell above and run this cell again.")
        return False
    if isinstance(expected, (str, bool, np.bool_)) or not isinstance(
            expected, (numbers.Number, np.ndarray, list, tuple)):
        ok = answer == expected
    else:
        try:
            a = np.asarray(answer, dtype=np.float64)
            e = np.asarray(expected, dtype=np.float64)
            ok = a.shape == e.shape and bool(np.all(np.isclose(a, e, rtol=rtol, atol=atol)))
        except (TypeError, ValueError):
            ok = False
    if not ok:
        raise WrongAnswer(f"{label}: not right yet - expected {expected!r}, got {answer!r}")
    print(f"{label}: correct.")
    return True
