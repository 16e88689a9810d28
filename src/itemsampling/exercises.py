"""Exercises: check cells, and the student and teacher notebooks of the chapters.

Every exercise with an answer has a solution cell that assigns ``answer_<chapter>_<n>`` and, right
after it, a check cell::

    from itemsampling.exercises import check
    check("ex-08-1", globals().get("answer_08_1"), expected=<independent computation>, digits=3)

tagged ``check`` and ``remove-input`` (the book hides the computation of the expected value).
Each ``check`` also keeps a digest of its expected value at the exercise's precision
(:func:`answer_digest`) and, in a notebook kernel, glues it as ``exercise_digest_<label>``; the
student notebooks check answers against these digests (:func:`check_digest`) and carry no
computation of an expected value.
``check`` compares the reader's answer with the expected value, to the precision the exercise
states ("Give it to 3 significant digits."), and says clearly whether it is right, naming the
exercise as the book does ("Exercise 8.1"); a wrong answer is told too high / too low and
roughly how far, never the expected value. An unanswered exercise (``None`` or ``...``) prints a "not answered yet" message and returns
``False`` without raising, so a student notebook runs on; a wrong answer raises
:class:`WrongAnswer` (an ``AssertionError``), so a book whose solution drifted from its check fails
to build, and a grader counts it as failed.

A chapter's exercise section (from its ``## Exercises`` heading to the end) runs on its own:
:func:`run_exercises` executes just those cells, with the solutions or with the student's blanks.
:func:`classroom_notebook` turns a chapter into its student notebook (solution cells replaced by
``answer_NN_k = ...  # your answer``, solution prose dropped) or its teacher notebook (solutions
between nbgrader's ``### BEGIN SOLUTION`` / ``### END SOLUTION`` markers); both carry nbgrader's
cell metadata. ``make exercises`` (``tools/make_exercises.py``) writes them for every chapter.
Their Markdown is plain (:func:`plain_markdown`): glued values from the executed chapter
(:func:`glue_values`), citations and cross-references as text; :func:`reader_notebook` does the
same for the executed notebook the book offers for download.
"""

from __future__ import annotations

import ast
import json
import numbers
import os
import re
from pathlib import Path

import numpy as np

from ._glue import glue

__all__ = ["check", "exercise_title", "digits_tolerance", "plain_markdown", "myst_markup", "glue_values", "reader_notebook",
           "WrongAnswer", "NotAnswered", "NOT_ANSWERED", "run_exercises", "classroom_notebook",
           "write_classroom_notebooks", "executed_chapter", "chapter_namespace", "read_notebook", "exercise_start",
           "stub_source", "answer_names", "answer_name", "author_year_label", "answer_digest", "check_digest",
           "digest_check_source", "exercise_digests", "glued_digests", "recorded_checks", "check_labels",
           "DIGEST_GLUE_PREFIX"]

NOT_ANSWERED = "not answered yet"


class WrongAnswer(AssertionError):
    """The reader's answer differs from the independent computation."""


class NotAnswered(AssertionError):
    """Raised instead of printing "not answered yet" when nbgrader grades or validates a notebook
    (it sets ``NBGRADER_EXECUTION``): a blank answer must score no points."""


def _is_blank(answer) -> bool:
    return answer is None or answer is Ellipsis


_LABEL_PARTS = re.compile(r"^ex-(\d+)-(\d+)$")


def _not_answered(title: str) -> bool:
    """What :func:`check` and :func:`check_digest` say of a blank answer: a message and ``False``
    (under nbgrader, :class:`NotAnswered`, so the autograder scores the cell 0)."""
    message = f"{title}: {NOT_ANSWERED} - assign your answer in the cell above and run this cell again."
    if os.environ.get("NBGRADER_EXECUTION"):
        raise NotAnswered(message)
    print(message)
    return False


def exercise_title(label: str) -> str:
    """The reader's name of an exercise: ``"ex-10-2"`` is ``"Exercise 10.2"`` (chapter.number, as
    the book numbers it); any other label is returned as it is."""
    m = _LABEL_PARTS.match(str(label))
    return f"Exercise {int(m.group(1))}.{int(m.group(2))}" if m else str(label)


def digits_tolerance(expected, digits: int) -> np.ndarray:
    """The absolute tolerance of an answer asked "to ``digits`` significant digits": half a unit in
    the last asked digit of each expected value, ``0.5 * 10**(floor(log10|e|) - digits + 1)`` (for
    0.1642 to 3 digits: 0.0005, so 0.164 is right and 0.165 is not); 0 where ``e`` is 0."""
    if isinstance(digits, bool) or not isinstance(digits, numbers.Integral) or not 1 <= digits <= 15:
        raise ValueError(f"digits must be an integer from 1 to 15, got {digits!r}")
    e = np.abs(np.asarray(expected, dtype=np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        exponent = np.floor(np.log10(np.where(e > 0, e, 1.0)))
    tol = 0.5 * 10.0 ** (exponent - int(digits) + 1)
    return np.where(e > 0, tol * (1 + 1e-9), 0.0)


def _how_far(answer: np.ndarray, expected: np.ndarray) -> str:
    """How far a numeric answer is from the expected value, in coarse relative terms (never the
    value itself)."""
    if answer.shape != expected.shape:
        return (f"your answer has {answer.size} value(s) of shape {answer.shape}; the exercise asks "
                f"for shape {expected.shape}")
    if not np.all(np.isfinite(answer) | ~np.isfinite(expected)):
        return "your answer holds NaN or infinite values"
    with np.errstate(all="ignore"):
        rel = np.abs(answer - expected) / np.abs(expected)
    rel = rel[np.isfinite(rel)]
    if rel.size == 0:
        return "your answer differs"
    worst = float(rel.max())
    if worst < 0.01:
        band = "less than 1% off"
    elif worst < 0.1:
        band = "between 1% and 10% off"
    elif worst < 0.5:
        band = "between 10% and 50% off"
    else:
        band = "more than 50% off"
    if answer.size == 1:
        side = "too high" if float(answer.ravel()[0]) > float(expected.ravel()[0]) else "too low"
        return f"your answer is {side}, {band}"
    return f"your answer is {band} in its worst entry (relative)"


def check(label: str, answer, expected, rtol: float = 1e-6, atol: float = 0.0, digits: int | None = None) -> bool:
    """Compare ``answer`` with ``expected`` (numbers and arrays within ``rtol``/``atol``; strings,
    booleans and other objects by equality). ``digits`` asks for that many significant digits
    instead (each number within :func:`digits_tolerance`, ``rtol`` unused); the exercise's text
    states the same precision ("Give it to 3 significant digits.").

    Returns ``True`` when right, ``False`` when not answered (under nbgrader's autograder, which
    sets ``NBGRADER_EXECUTION``, it raises :class:`NotAnswered` instead, so a blank scores no
    points); raises :class:`WrongAnswer` when wrong. Messages name the exercise as the book does
    ("Exercise 8.1") and never reveal the expected value: a wrong number is said to be too high or
    too low and roughly by how much, in relative terms.

    Whatever the answer, the digest of ``expected`` at the check's precision is kept
    (:func:`recorded_checks`; ``digits``, exact for ``rtol=0``, else the digits ``rtol`` keeps) and,
    in a notebook kernel, glued as ``exercise_digest_<label>``: the student notebook's check
    (:func:`check_digest`) is written from it."""
    title = exercise_title(label)
    _record_check(label, expected, rtol, digits)
    if _is_blank(answer):
        return _not_answered(title)
    hint = ""
    if isinstance(expected, (str, bool, np.bool_)) or not isinstance(
            expected, (numbers.Number, np.ndarray, list, tuple)):
        ok = answer == expected
        ok = bool(ok) if isinstance(ok, (bool, np.bool_)) else False
    elif isinstance(answer, (str, bytes)):
        ok, hint = False, "a number is expected, not text"
    else:
        try:
            a = np.asarray(answer, dtype=np.float64)
            e = np.asarray(expected, dtype=np.float64)
        except (TypeError, ValueError):
            ok, hint = False, "a number (or an array of numbers) is expected"
        else:
            if a.shape != e.shape:
                ok = False
            elif digits is not None:
                with np.errstate(invalid="ignore"):
                    ok = bool(np.all((np.abs(a - e) <= digits_tolerance(e, digits) + atol) | (a == e)))
            else:
                ok = bool(np.all(np.isclose(a, e, rtol=rtol, atol=atol)))
            if not ok:
                hint = _how_far(a, e)
    if not ok:
        wanted = f" (the exercise asks for {digits} significant digits)" if digits is not None else ""
        raise WrongAnswer(f"{title}: not right yet" + (f" - {hint}" if hint else "") + wanted + ".")
    print(f"{title}: correct.")
    return True


# --- digests: the student's check, without the expected value ------------------------------------

DIGEST_GLUE_PREFIX = "exercise_digest_"
_DIGEST_SALT = "itemsampling-exercise"
_DIGEST_HEX = 16                     # 64 bits of SHA-256 per entry
_CHECKS: dict = {}                   # label -> {"spec": ..., "expected": ...} of the checks run here


def _sig_round(value: float, digits: int) -> tuple[int, int]:
    """``value`` (finite, non-zero) rounded to ``digits`` significant digits as ``(m, x)`` with
    ``value ~ m * 10**x`` and ``10**(digits-1) <= |m| < 10**digits`` (halves away from zero)."""
    a = abs(float(value))
    x = int(np.floor(np.log10(a))) - digits + 1
    for _ in range(3):   # log10 may be off by one at a power of ten
        scaled = a * 10.0 ** (-x) if x < 0 else a / 10.0 ** x
        m = int(np.floor(scaled + 0.5))
        if m >= 10 ** digits:
            x += 1
        elif m < 10 ** (digits - 1):
            x -= 1
        else:
            break
    return (m if value > 0 else -m), x


def _number_token(value: float, digits: int | None) -> str:
    value = float(value)
    if not np.isfinite(value):
        return "nan" if np.isnan(value) else ("inf" if value > 0 else "-inf")
    if value == 0:
        return "0"
    if digits is None:    # exact
        return str(int(value)) if value.is_integer() and abs(value) < 2.0 ** 63 else repr(value)
    m, x = _sig_round(value, digits)
    return f"{m}e{x}"


def _number_tokens(value: float, digits: int | None) -> list[str]:
    """The tokens an answer may match. Exactly: its own. At ``digits``: every ``digits``-digit
    number ``m * 10**y`` within one unit of its last digit of the answer, ``|a - m 10^y| <= 10^y``
    (at 3 digits, 0.1638 matches 0.163 and 0.164, and 0.100 matches 0.0999, 0.100 and 0.101). An answer
    right to the stated precision, ``|a - e| <= 10^y / 2``, lies within one unit of the expected
    value rounded, whichever side of a rounding boundary either falls on."""
    value = float(value)
    if digits is None or not np.isfinite(value) or value == 0:
        return [_number_token(value, digits)]
    sign, a = (1 if value > 0 else -1), abs(value)
    _, x = _sig_round(a, digits)
    tokens = []
    for y in (x - 1, x, x + 1):
        scaled = a * 10.0 ** (-y) if y < 0 else a / 10.0 ** y
        low, high = int(np.ceil(scaled - 1 - 1e-9)), int(np.floor(scaled + 1 + 1e-9))
        tokens += [f"{sign * m}e{y}" for m in range(max(low, 10 ** (digits - 1)), min(high, 10 ** digits - 1) + 1)]
    return tokens


def _object_token(value) -> str:
    if isinstance(value, str):
        return "s:" + value
    if isinstance(value, (bool, np.bool_)):
        return f"b:{bool(value)}"
    return "r:" + repr(value)


def _hash(label: str, index: int, token: str) -> str:
    import hashlib

    return hashlib.sha256(f"{_DIGEST_SALT}|{label}|{index}|{token}".encode()).hexdigest()[:_DIGEST_HEX]


def _is_object(expected) -> bool:
    """Compared by equality (strings, booleans, other objects), as :func:`check` does."""
    return isinstance(expected, (str, bool, np.bool_)) or not isinstance(
        expected, (numbers.Number, np.ndarray, list, tuple))


def answer_digest(label: str, expected, *, digits: int | None = None, exact: bool = False):
    """The digest of an exercise's expected value, what the student notebook checks an answer
    against (:func:`check_digest`): per entry, the first 16 hex digits of SHA-256 of
    ``"itemsampling-exercise|<label>|<entry>|<token>"``, where the token is the entry rounded to
    ``digits`` significant digits (``"164e-3"`` for 0.16421 at 3 digits), the exact number
    (``exact=True``: ``"3706"``), or, for a string or boolean, the value itself. A string for a
    single value, a nested list of the array's shape for an array.

    The label salts it, so one exercise's digest says nothing about another's. It hides the value
    from a reader, not from a search: a number asked to 3 significant digits is one of about ten
    thousand candidates per decade, found by trying them all in well under a second."""
    if _is_object(expected):
        if digits is not None or exact:
            raise ValueError(f"digits / exact apply to numbers, not to {type(expected).__name__}")
        return _hash(label, 0, _object_token(expected))
    if digits is not None:
        digits_tolerance(1.0, digits)   # validates digits
        if exact:
            raise ValueError("give either digits or exact=True, not both")
    elif not exact:
        raise ValueError("a number's digest needs digits=d or exact=True")
    e = np.asarray(expected, dtype=np.float64)
    flat = [_hash(label, i, _number_token(v, digits)) for i, v in enumerate(e.ravel())]
    if e.ndim == 0:
        return flat[0]
    return np.array(flat, dtype=object).reshape(e.shape).tolist()


def _digest_precision(expected, rtol: float, digits: int | None) -> dict:
    """How :func:`check`'s comparison carries over to the digest: ``digits`` as asked; ``rtol=0``
    exact; another ``rtol`` as the significant digits it keeps, ``floor(-log10 rtol)``."""
    if _is_object(expected):
        return {}
    if digits is not None:
        return {"digits": int(digits)}
    if rtol == 0:
        return {"exact": True}
    return {"digits": int(np.clip(np.floor(-np.log10(rtol)), 1, 15))}


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:   # pragma: no cover - IPython is a dependency of the notebooks
        return False
    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


def _record_check(label: str, expected, rtol: float, digits: int | None) -> None:
    """Keep the digest of a check's expected value (:func:`recorded_checks`) and, in a notebook
    kernel (the book's execution, ``python -m itemsampling.run``), glue it silently as
    ``exercise_digest_<label>``: the student notebooks are written from the glued values."""
    try:
        precision = _digest_precision(expected, rtol, digits)
        spec = {"digest": answer_digest(label, expected, **precision), **precision}
    except (TypeError, ValueError):
        return   # an expected value with no digest (an arbitrary object): nothing to hand out
    _CHECKS[label] = {"spec": spec, "expected": expected}
    if _in_kernel():
        glue(DIGEST_GLUE_PREFIX + label, json.dumps(spec), display=False)


def recorded_checks() -> dict:
    """``{label: {"spec": digest spec, "expected": value}}`` of the checks run in this process
    (the spec is what :func:`check_digest` takes: ``digest`` and ``digits`` or ``exact``)."""
    return {k: dict(v) for k, v in _CHECKS.items()}


def glued_digests(glue: dict) -> dict:
    """``{label: digest spec}`` from the glued values of an executed chapter (:func:`glue_values`)."""
    out = {}
    for name, value in (glue or {}).items():
        if name.startswith(DIGEST_GLUE_PREFIX) and "text/plain" in value:
            out[name[len(DIGEST_GLUE_PREFIX):]] = json.loads(ast.literal_eval(value["text/plain"]))
    return out


def check_digest(label: str, answer, digest, *, digits: int | None = None, exact: bool = False) -> bool:
    """The student notebook's check: is ``answer`` right, judged against the digest of the expected
    value (:func:`answer_digest`) instead of the value itself?

    A number is rounded to ``digits`` significant digits (or taken exactly, ``exact=True``), and
    its rounding or a neighbour of its last digit must give the digest: every answer within the
    exercise's stated precision passes, and so may one up to one and a half units of the last
    digit away (the price of not knowing on which side of a rounding boundary the expected value
    lies). An array is checked entry by entry and its shape must match. A string or a boolean must
    equal the expected one. Says, and returns, what :func:`check` does: ``True`` right, ``False``
    not answered (under nbgrader: :class:`NotAnswered`), :class:`WrongAnswer` wrong, naming the
    entries that are not right; it cannot tell how far off a wrong answer is."""
    title = exercise_title(label)
    if _is_blank(answer):
        return _not_answered(title)
    if digits is not None:
        digits_tolerance(1.0, digits)   # validates digits
    hint, wanted = "", ""
    if digits is None and not exact:
        ok = isinstance(digest, str) and _hash(label, 0, _object_token(answer)) == digest
    else:
        wanted = (f" (the exercise asks for {digits} significant digits)" if digits is not None
                  else " (the exercise asks for the exact value)")
        expected_shape = np.shape(np.array(digest, dtype=object))
        ok = False
        if isinstance(answer, (str, bytes)):
            hint = "a number is expected, not text"
        else:
            try:
                a = np.asarray(answer, dtype=np.float64)
            except (TypeError, ValueError):
                a = None
                hint = "a number (or an array of numbers) is expected"
            if a is not None and a.shape != expected_shape:
                hint = (f"your answer has {a.size} value(s) of shape {a.shape}; the exercise asks "
                        f"for shape {expected_shape}")
            elif a is not None:
                flat = np.array(digest, dtype=object).ravel()
                wrong = [i for i, v in enumerate(a.ravel())
                         if not any(_hash(label, i, t) == flat[i] for t in _number_tokens(v, digits))]
                ok = not wrong
                if wrong and a.size > 1:
                    where = [str(np.unravel_index(i, a.shape)) if a.ndim > 1 else str(i) for i in wrong]
                    hint = (f"{len(wrong)} of its {a.size} entries (index {', '.join(where[:10])}"
                            f"{', ...' if len(where) > 10 else ''})")
    if not ok:
        raise WrongAnswer(f"{title}: not right yet" + (f" - {hint}" if hint else "") + wanted + ".")
    print(f"{title}: correct.")
    return True


# --- exercise sections of the chapters: extraction, student and teacher notebooks -----------------

SOLUTION_TAG = "solution"
CHECK_TAG = "check"
EXERCISES_HEADING = re.compile(r"^##\s+Exercises\s*$", re.M)
_ANSWER = re.compile(r"^[ \t]*(answer_\d+_\d+)\s*(?:[-+*/]?=)(?!=)", re.M)
_LABEL_IN_CHECK = re.compile(r"""\bcheck(?:_digest)?\(\s*["'](ex-[\w-]+)["']""")
_EXERCISE = re.compile(r"```\{exercise\}[^\n]*\n:label:\s*(\S+)\n(.*?)\n```", re.S)
_SOLUTION_START = re.compile(r"```\{solution-start\}\s*(\S+)\n(?::[^\n]*\n)*```\n?")
_SOLUTION_END = re.compile(r"```\{solution-end\}\s*\n```\n?")
BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN_TESTS, END_HIDDEN_TESTS = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


def answer_name(label: str) -> str:
    """The variable an exercise's answer is assigned to: ``"ex-09-1"`` -> ``"answer_09_1"``."""
    m = _LABEL_PARTS.match(str(label))
    if m is None:
        raise ValueError(f"label must look like 'ex-NN-k', got {label!r}")
    return f"answer_{m.group(1)}_{m.group(2)}"


def digest_check_source(label: str, spec: dict) -> str:
    """The student's check cell: ``check_digest`` of the answer against ``spec`` (``digest`` and
    ``digits`` or ``exact``, as :func:`recorded_checks` / :func:`glued_digests` give it)."""
    if not isinstance(spec, dict) or "digest" not in spec:
        raise ValueError(f"spec of {label} must be a dict with a 'digest', got {spec!r}")
    args = [json.dumps(label), f'globals().get("{answer_name(label)}")', json.dumps(spec["digest"])]
    if spec.get("digits") is not None:
        args.append(f"digits={int(spec['digits'])}")
    if spec.get("exact"):
        args.append("exact=True")
    return ("from itemsampling.exercises import check_digest\n\n"
            f"check_digest({', '.join(args)});")


def answer_names(source: str) -> list[str]:
    """The ``answer_NN_k`` names a solution cell assigns, in order of first assignment."""
    names: list[str] = []
    for name in _ANSWER.findall(source):
        if name not in names:
            names.append(name)
    return names


def stub_source(source: str) -> str:
    """The student's stub for a solution cell: ``answer_NN_k = ...  # your answer`` for every
    answer the solution assigns (an open-ended solution without an answer gets a comment)."""
    names = answer_names(source)
    if not names:
        return "# your work here"
    return "\n".join(f"{name} = ...  # your answer" for name in names)


def read_notebook(path):
    """A chapter's MyST source (or an ``.ipynb``) as an nbformat notebook."""
    import jupytext

    path = Path(path)
    if not path.exists():
        raise ValueError(f"notebook {path} does not exist")
    return jupytext.read(path)


def _tags(cell) -> list:
    return list(cell.get("metadata", {}).get("tags", []))


def exercise_start(nb) -> int:
    """Index of the markdown cell holding the chapter's ``## Exercises`` heading."""
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and EXERCISES_HEADING.search(cell.source):
            return i
    raise ValueError("the notebook has no '## Exercises' section")


_DIRECTIVES = re.compile("|".join(f"(?P<{name}>{rx.pattern})" for name, rx in (
    ("exercise", _EXERCISE), ("start", _SOLUTION_START), ("end", _SOLUTION_END))), re.S)


def _exercise_markdown(source: str, teacher: bool, inside: bool):
    """MyST exercise directives as plain Markdown that Jupyter renders, split into segments
    ``(text, is_solution)``. ``inside`` says whether the cell starts inside a solution (between
    ``{solution-start}`` and ``{solution-end}``); the student version drops what is inside.
    Returns the segments, whether the cell ends inside a solution, and the label of the last
    exercise it states."""
    segments, pos, label, current = [], 0, None, []

    def flush(is_solution):
        text = re.sub(r"\n{3,}", "\n\n", "".join(current)).strip("\n")
        if text.strip() and (teacher or not is_solution):
            segments.append((text, is_solution))
        current.clear()

    for m in _DIRECTIVES.finditer(source):
        current.append(source[pos:m.start()])
        if m.group("exercise"):
            found = _EXERCISE.match(m.group(0))
            label = found.group(1)
            current.append(f"**{exercise_title(label)}.** {found.group(2).strip()}")
        elif m.group("start"):
            flush(inside)
            inside = True
            if teacher:
                current.append(f"**Solution to {exercise_title(_SOLUTION_START.match(m.group(0)).group(1))}.**\n\n")
        else:
            flush(inside)
            inside = False
        pos = m.end()
    current.append(source[pos:])
    flush(inside)
    return segments, inside, label


# --- MyST markup as plain Markdown (notebooks read outside the book) ------------------------------

_REPO = Path(__file__).resolve().parents[2]
MYST_ROLE = re.compile(r"\{([a-zA-Z][\w:+-]*)\}`([^`]*)`")
MYST_DIRECTIVE = re.compile(r"^[ \t]*(?:`{3,}|~{3,}|:{3,})[ \t]*\{[\w:+-]+\}", re.M)
MYST_TARGET = re.compile(r"^\([\w:.+-]+\)=[ \t]*\n", re.M)
_TITLED = re.compile(r"^(.*?)\s*<([^<>]+)>\s*$", re.S)


def glue_values(executed) -> dict:
    """The glued values of an executed chapter, ``{name: {mime type: value}}``: from the
    ``<page>.glue.json`` MyST-NB writes beside the executed notebook in ``_build/jupyter_execute``,
    or from the glue outputs of an executed ``.ipynb`` (papermill's, ``python -m itemsampling.run``'s).
    ``executed`` is either file (for a ``.ipynb``, a ``.glue.json`` beside it is preferred)."""
    import json

    import nbformat

    executed = Path(executed)
    glue_json = executed.with_name(executed.name.removesuffix(".ipynb") + ".glue.json") \
        if executed.suffix == ".ipynb" else executed
    if glue_json.is_file():
        data = json.loads(glue_json.read_text())
        return {k: _unprefixed(v) for k, v in data.items()}
    if executed.suffix != ".ipynb" or not executed.is_file():
        raise ValueError(f"executed chapter {executed} does not exist (build the book, or run the chapter "
                         f"with python -m itemsampling.run)")
    nb = nbformat.read(executed, as_version=4)
    out = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            meta = output.get("metadata", {}).get("scrapbook")
            if meta:
                out[meta["name"]] = _unprefixed(output)
    return out


def _unprefixed(output) -> dict:
    prefix = output.get("metadata", {}).get("scrapbook", {}).get("mime_prefix", "")
    return {k.removeprefix(prefix) if prefix else k: v for k, v in output.get("data", {}).items()}


def author_year_label(entry) -> str:
    """"Krichene and Rendle, 2020"; "Li et al., 2024" for three or more authors (a pybtex entry).
    The book's reference list (``handout``'s pybtex style) and the plain-Markdown citations of
    the hand-out notebooks use it."""
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


def _bibliography() -> dict:
    """``{key: (who, year)}`` for the book's references (``book/references.bib``)."""
    from pybtex.database import parse_file

    bib = _REPO / "book" / "references.bib"
    if not bib.is_file():
        return {}
    out = {}
    for key, entry in parse_file(str(bib)).entries.items():
        who, _, year = author_year_label(entry).rpartition(", ")
        out[key] = (who, year)
    return out


def _titles() -> dict:
    """``{label or document path: title}`` from the book's MyST sources: ``(label)=`` targets
    above headings, exercise labels, and each page's first heading (for ``{doc}``)."""
    out: dict = {}
    for folder in ("notebooks", "book"):
        for path in sorted((_REPO / folder).glob("*.md")):
            text = path.read_text(errors="replace")
            first = re.search(r"^#\s+(.+)$", text, re.M)
            if first:
                out[f"{folder}/{path.stem}"] = first.group(1).strip()
            for m in re.finditer(r"^\(([\w:.+-]+)\)=[ \t]*\n+#+\s+(.+)$", text, re.M):
                out[m.group(1)] = m.group(2).strip()
            for label in re.findall(r"^:label:\s*(ex-\d+-\d+)\s*$", text, re.M):
                out[label] = exercise_title(label)
    return out


def _cite(kind: str, keys: str, bib: dict) -> str:
    items = [k.strip() for k in keys.split(",") if k.strip()]
    if kind in ("cite:t", "cite:ts", "cite:author"):
        return "; ".join(f"{bib[k][0]} ({bib[k][1]})" if k in bib else k for k in items)
    return "(" + "; ".join(f"{bib[k][0]}, {bib[k][1]}" if k in bib else k for k in items) + ")"


def _glue_text(name: str, glue: dict, kind: str) -> str:
    from myst_nb.core.variables import format_plain_text

    if kind == "glue:md":
        key, _, _fmt = name.partition(":")
        key = key if key in glue else name
        if key not in glue or "text/markdown" not in glue[key]:
            raise ValueError(f"no glued Markdown value {key!r} in the executed chapter")
        return glue[key]["text/markdown"]
    key, _, spec = name.partition(":")
    if key not in glue or "text/plain" not in glue[key]:
        raise ValueError(f"no glued value {key!r} in the executed chapter")
    return format_plain_text(glue[key]["text/plain"], spec)


def plain_markdown(source: str, glue: dict | None = None, *, titles: dict | None = None,
                   bibliography: dict | None = None) -> str:
    """A Markdown cell's MyST markup as plain Markdown that Jupyter shows as meant: ``{glue:text}``
    / ``{glue:md}`` / ``{glue}`` roles replaced by the glued values (``glue``, from
    :func:`glue_values`; a missing value raises ``ValueError``), ``{cite:p}`` / ``{cite:t}`` by
    "(Krichene and Rendle, 2020)" / "Krichene and Rendle (2020)", ``{ref}`` / ``{numref}`` /
    ``{doc}`` / ``{eq}`` by their text (or the target's title: "Exercise 10.2", a heading), ``{math}``
    by ``$...$``, any other role by its content; ``(label)=`` targets are dropped; admonitions and
    dropdowns (``{admonition} Title`` with ``:class: dropdown``, ``{note}``, ...) become their title in
    bold followed by their body."""
    glue = glue or {}
    titles = _titles() if titles is None else titles
    bib = _bibliography() if bibliography is None else bibliography

    def role(m):
        kind, content = m.group(1), m.group(2)
        if kind in ("glue", "glue:any", "glue:text", "glue:md"):
            value = _glue_text(content, glue, "glue:md" if kind == "glue:md" else "glue:text")
            if kind == "glue:md":
                value = plain_markdown(value, glue, titles=titles, bibliography=bib)
            return value
        if kind.startswith("cite"):
            return _cite(kind, content, bib)
        if kind == "math":
            return f"${content}$"
        if kind in ("ref", "numref", "doc", "eq", "term", "any", "download"):
            titled = _TITLED.match(content)
            if titled:
                return titled.group(1).strip()
            target = content.strip()
            if kind == "eq":
                return f"({target})"
            key = target.lstrip("./").removeprefix("../") if kind == "doc" else target
            for candidate in (key, f"book/{key}", f"notebooks/{key}"):
                if candidate in titles:
                    return titles[candidate]
            return target
        return content

    return MYST_TARGET.sub("", MYST_ROLE.sub(role, _plain_blocks(source)))


#: MyST's prose blocks (admonitions, dropdowns) that read as plain Markdown outside the book: the title in
#: bold, the options (``:class: dropdown``) dropped, the body kept (:func:`plain_markdown`)
_BLOCK_NAMES = ("admonition", "dropdown", "note", "tip", "hint", "important", "warning", "caution", "attention",
                "danger", "error", "seealso")
MYST_BLOCK = re.compile(r"^[ \t]*(?P<fence>`{3,}|:{3,})[ \t]*\{(?P<name>" + "|".join(_BLOCK_NAMES)
                        + r")\}[ \t]*(?P<title>[^\n]*)\n(?P<opts>(?:[ \t]*:[\w-]+:[^\n]*\n)*)(?P<body>.*?)^[ \t]*(?P=fence)"
                          r"[ \t]*$", re.M | re.S)


def _plain_blocks(source: str) -> str:
    """MyST admonition and dropdown blocks as plain Markdown (innermost first: a block inside a block)."""
    def block(m):
        title = m.group("title").strip()
        if not title and m.group("name") not in ("admonition", "dropdown"):
            title = m.group("name").capitalize()
        body = m.group("body").strip("\n")
        return (f"**{title}**\n\n{body}" if title else body) + "\n"

    for _ in range(10):
        new = MYST_BLOCK.sub(block, source)
        if new == source:
            break
        source = new
    return source


def myst_markup(text: str) -> list[str]:
    """The MyST roles and directives left in ``text`` (empty when it reads as plain Markdown)."""
    return [m.group(0) for m in MYST_ROLE.finditer(text)] + [m.group(0).strip() for m in MYST_DIRECTIVE.finditer(text)]


def reader_notebook(nb, glue: dict | None = None):
    """The notebook a reader downloads: the executed chapter with its Markdown as plain Markdown
    (exercise directives as "**Exercise C.k.**" with their solutions below "**Solution to ...**",
    glued values filled in, citations and cross-references as text). A new notebook."""
    import copy

    out = copy.deepcopy(nb)
    titles, bib = _titles(), _bibliography()
    inside = False
    for cell in out.cells:
        if cell.cell_type != "markdown":
            continue
        segments, inside, _ = _exercise_markdown(cell.source, True, inside)
        text = "\n\n".join(t for t, _ in segments)
        cell.source = plain_markdown(text, glue, titles=titles, bibliography=bib)
    out.metadata.pop("jupytext", None)
    return out


def _nbgrader(grade_id: str, *, solution: bool, grade: bool, locked: bool, points: int | None = None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return meta


def classroom_notebook(nb, version: str, glue: dict | None = None, digests: dict | None = None):
    """The ``"student"`` or ``"teacher"`` notebook of a chapter (a new notebook; ``nb`` is left as
    it is).

    Both turn the exercise directives into plain Markdown and carry nbgrader's cell metadata: a
    solution cell is an nbgrader solution cell (``grade_id`` ``<label>-answer``), a check cell an
    autograded test cell worth one point (``<label>-check``, locked). The teacher version keeps
    each solution between nbgrader's ``### BEGIN SOLUTION`` / ``### END SOLUTION`` markers, after
    the student's stub, so nbgrader's own ``generate_assignment`` turns it into the student
    version. The student version replaces every solution cell by its stub
    (``answer_NN_k = ...  # your answer``), on which the check cell prints "not answered yet".

    No check cell hands out its expected value: in both versions it checks the answer against the
    digest of the expected value (:func:`check_digest`, :func:`digest_check_source`), taken from
    ``digests`` (``{label: spec}``, e.g. :func:`exercise_digests`) or else from the glued
    ``exercise_digest_<label>`` of the executed chapter (a missing one raises ``ValueError``). The
    teacher version keeps the chapter's independent check below it, between nbgrader's
    ``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS``: ``nbgrader generate_assignment`` strips
    it from the release and ``nbgrader autograde`` puts it back, so a graded answer passes both.

    Markdown reads as plain Markdown (:func:`plain_markdown`): exercises are titled as in the book
    ("**Exercise 8.1.**"), glued values come from ``glue`` (:func:`glue_values` of the executed
    chapter; a glued name it lacks raises ``ValueError``), citations and cross-references are text.
    """
    import copy

    import nbformat

    if version not in ("student", "teacher"):
        raise ValueError(f"version must be 'student' or 'teacher', got {version!r}")
    teacher = version == "teacher"
    digests = {**glued_digests(glue), **(digests or {})}
    out = copy.deepcopy(nb)
    cells = []
    label, inside = None, False
    titles, bib = _titles(), _bibliography()
    for cell in out.cells:
        tags = _tags(cell)
        if cell.cell_type == "markdown":
            segments, inside_after, stated = _exercise_markdown(cell.source, teacher, inside)
            label = stated or label
            inside = inside_after
            for text, is_solution in segments:
                text = plain_markdown(text, glue, titles=titles, bibliography=bib)
                md = nbformat.v4.new_markdown_cell(text)
                if is_solution:
                    md.source = f"{BEGIN_SOLUTION}\n{text}\n{END_SOLUTION}"
                    # nbgrader: a markdown answer is a manually graded answer
                    md.metadata["nbgrader"] = _nbgrader(f"{label or 'exercise'}-explanation", solution=True,
                                                        grade=True, locked=False, points=0)
                cells.append(md)
            continue
        elif SOLUTION_TAG in tags:
            names = answer_names(cell.source)
            owner = f"ex-{names[0][len('answer_'):].replace('_', '-')}" if names else label
            gid = f"{owner or 'exercise'}-answer"
            stub = stub_source(cell.source)
            if teacher:
                cell.source = f"{stub}\n{BEGIN_SOLUTION}\n{cell.source.rstrip()}\n{END_SOLUTION}"
            else:
                cell.source = stub
                cell.outputs = []
                cell.execution_count = None
            cell.metadata["nbgrader"] = _nbgrader(gid, solution=True, grade=False, locked=False)
        elif inside and not teacher:
            continue  # any other cell of a solution is part of the solution
        elif CHECK_TAG in tags:
            m = _LABEL_IN_CHECK.search(cell.source)
            if m is None:
                raise ValueError(f"check cell without a check('ex-...') call:\n{cell.source}")
            checked_label = m.group(1)
            if checked_label not in digests:
                raise ValueError(f"no digest of {checked_label} in the executed chapter (glued as "
                                 f"{DIGEST_GLUE_PREFIX}{checked_label} when its check runs: rebuild the book "
                                 f"or rerun the chapter)")
            student_check = digest_check_source(checked_label, digests[checked_label])
            cell.source = (f"{student_check}\n{BEGIN_HIDDEN_TESTS}\n{cell.source.rstrip()}\n{END_HIDDEN_TESTS}"
                           if teacher else student_check)
            cell.outputs = []
            cell.execution_count = None
            gid = f"{checked_label}-check"
            cell.metadata["nbgrader"] = _nbgrader(gid, solution=False, grade=True, locked=True, points=1)
        cells.append(cell)
    # an explanation earns the exercise's point where no check cell grades it (open-ended exercises)
    checked = {c.metadata["nbgrader"]["grade_id"][:-len("-check")] for c in cells
               if c.metadata.get("nbgrader", {}).get("grade_id", "").endswith("-check")}
    for c in cells:
        gid = c.metadata.get("nbgrader", {}).get("grade_id", "")
        if gid.endswith("-explanation") and gid[:-len("-explanation")] not in checked:
            c.metadata["nbgrader"]["points"] = 1
    out.cells = cells
    out.metadata.pop("jupytext", None)
    out.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return out


def _run_cell(source: str, namespace: dict):
    """Execute a cell's source like a notebook does: the value of a last bare expression is
    returned. IPython magics are not supported."""
    tree = ast.parse(source)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, "<exercise cell>", "exec"), namespace)
    if last is not None:
        return eval(compile(ast.Expression(last.value), "<exercise cell>", "eval"), namespace)
    return None


def chapter_namespace(notebook, parameters: dict | None = None) -> dict:
    """Execute a chapter's cells *before* its exercise section in a fresh namespace and return
    it, with ``parameters`` overriding names of the cell tagged ``parameters`` (as papermill
    does). For chapters whose exercises use the chapter's variables: pass the result to
    :func:`run_exercises` as ``namespace``. Run it with a non-interactive matplotlib backend."""
    nb = read_notebook(notebook) if not hasattr(notebook, "cells") else notebook
    start = exercise_start(nb)
    parameters = dict(parameters or {})
    namespace: dict = {"__name__": "__chapter__"}
    seen_parameters = False
    for cell in nb.cells[:start]:
        if cell.cell_type != "code":
            continue
        _run_cell(cell.source, namespace)
        if "parameters" in _tags(cell):
            seen_parameters = True
            unknown = sorted(set(parameters) - set(namespace))
            if unknown:
                raise ValueError(f"unknown parameter(s) {unknown}")
            namespace.update(parameters)
    if parameters and not seen_parameters:
        raise ValueError("the notebook has no cell tagged 'parameters'")
    return namespace


def run_exercises(notebook, version: str = "teacher", answers=None, raise_wrong: bool = True,
                  namespace: dict | None = None) -> dict:
    """Execute only a chapter's exercise section (from its ``## Exercises`` heading on) and return
    ``{label: result of its check cell}`` (``True`` right, ``False`` not answered; a wrong answer
    raises :class:`WrongAnswer`).

    An exercise section that is self-contained (its first code cell imports what it needs) runs
    in seconds without executing the chapter; one that uses the chapter's variables needs the
    ``namespace`` of :func:`chapter_namespace` (a copy is used, so one namespace serves several
    runs). ``version="student"`` runs
    the stubs in place of the solutions; ``answers`` replaces answers after every solution (or
    stub) cell that assigns them: a dict ``{"answer_NN_k": value}``, or a function
    ``(name, value) -> new value`` (e.g. to show that a perturbed answer fails its check). With
    ``raise_wrong=False`` a wrong answer does not stop the run: its check's result is the
    :class:`WrongAnswer` raised.
    """
    if version not in ("student", "teacher"):
        raise ValueError(f"version must be 'student' or 'teacher', got {version!r}")
    nb = read_notebook(notebook) if not hasattr(notebook, "cells") else notebook
    start = exercise_start(nb)
    namespace = dict(namespace) if namespace is not None else {"__name__": "__exercises__"}
    results: dict = {}
    for cell in nb.cells[start:]:
        if cell.cell_type != "code":
            continue
        tags = _tags(cell)
        if SOLUTION_TAG in tags:
            _run_cell(cell.source if version == "teacher" else stub_source(cell.source), namespace)
            for name in answer_names(cell.source):
                if callable(answers):
                    namespace[name] = answers(name, namespace.get(name))
                elif answers and name in answers:
                    namespace[name] = answers[name]
            continue
        try:
            value = _run_cell(cell.source, namespace)
        except WrongAnswer as wrong:
            if raise_wrong or CHECK_TAG not in tags:
                raise
            value = wrong
        if CHECK_TAG in tags:
            m = _LABEL_IN_CHECK.search(cell.source)
            if m is None:
                raise ValueError(f"check cell without a check('ex-...') call:\n{cell.source}")
            results[m.group(1)] = value
    return results


def check_labels(nb) -> list[str]:
    """The labels of a notebook's check cells, in order."""
    nb = read_notebook(nb) if not hasattr(nb, "cells") else nb
    out = []
    for cell in nb.cells:
        if cell.cell_type == "code" and CHECK_TAG in _tags(cell):
            m = _LABEL_IN_CHECK.search(cell.source)
            if m is not None:
                out.append(m.group(1))
    return out


def exercise_digests(notebook, namespace: dict | None = None) -> dict:
    """``{label: digest spec}`` of a chapter's checks, by executing its exercise section with the
    solutions (:func:`run_exercises`; ``namespace`` as there): what a chapter executed by the book
    glues, for where no executed chapter is at hand (tests, a teacher's own parameters)."""
    nb = read_notebook(notebook) if not hasattr(notebook, "cells") else notebook
    labels = check_labels(nb)
    for label in labels:
        _CHECKS.pop(label, None)
    run_exercises(nb, "teacher", namespace=namespace)
    missing = [label for label in labels if label not in _CHECKS]
    if missing:
        raise ValueError(f"the checks of {missing} recorded no digest")
    return {label: _CHECKS[label]["spec"] for label in labels}


def executed_chapter(chapter, executed_dir) -> Path | None:
    """The executed version of ``chapter`` in ``executed_dir`` (the ``.glue.json`` MyST-NB writes
    in ``_build/jupyter_execute/notebooks``, or an executed ``<stem>.ipynb``), or ``None``."""
    executed_dir = Path(executed_dir)
    stem = Path(chapter).stem
    for candidate in (executed_dir / f"{stem}.glue.json", executed_dir / f"{stem}.ipynb",
                      executed_dir / stem / f"{stem}.ipynb"):
        if candidate.is_file():
            return candidate
    return None


def write_classroom_notebooks(notebooks, out_dir, executed=None, versions=("student", "teacher")) -> list[Path]:
    """Write ``<out_dir>/student/<chapter>.ipynb`` and ``<out_dir>/teacher/<chapter>.ipynb`` for
    every MyST chapter in ``notebooks`` (what ``make exercises`` runs), with the glued values of the
    executed chapter found in ``executed`` (a folder, see :func:`executed_chapter`; a chapter that
    glues values and has no executed version there raises ``ValueError``). Returns the paths."""
    import nbformat

    out_dir = Path(out_dir)
    if isinstance(versions, str) or not set(versions) <= {"student", "teacher"} or not versions:
        raise ValueError(f"versions must be a non-empty list of 'student' / 'teacher', got {versions!r}")
    written = []
    for path in notebooks:
        path = Path(path)
        nb = read_notebook(path)
        exercise_start(nb)  # every chapter must have its exercise section
        found = executed_chapter(path, executed) if executed is not None else None
        glue = glue_values(found) if found is not None else {}
        for version in versions:
            target = out_dir / version / f"{path.stem}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                notebook = classroom_notebook(nb, version, glue)
            except ValueError as err:
                where = f"executed version {found}" if found else f"no executed version in {executed}"
                raise ValueError(f"{path.name}: {err} ({where})") from None
            nbformat.write(notebook, target)
            written.append(target)
    return written
