"""Exercises: check cells, and the student and teacher notebooks of the chapters.

Every exercise with an answer has a solution cell that assigns ``answer_<chapter>_<n>`` and, right
after it, a check cell::

    from itemsampling.exercises import check
    check("ex-08-1", globals().get("answer_08_1"), expected=<independent computation>, rtol=1e-6)

``check`` compares the reader's answer with the expected value and says clearly whether it is
right. An unanswered exercise (``None`` or ``...``) prints a "not answered yet" message and returns
``False`` without raising, so a student notebook runs on; a wrong answer raises
:class:`WrongAnswer` (an ``AssertionError``), so a book whose solution drifted from its check fails
to build, and a grader counts it as failed.

A chapter's exercise section (from its ``## Exercises`` heading to the end) runs on its own:
:func:`run_exercises` executes just those cells, with the solutions or with the student's blanks.
:func:`classroom_notebook` turns a chapter into its student notebook (solution cells replaced by
``answer_NN_k = ...  # your answer``, solution prose dropped) or its teacher notebook (solutions
between nbgrader's ``### BEGIN SOLUTION`` / ``### END SOLUTION`` markers); both carry nbgrader's
cell metadata. ``make exercises`` (``tools/make_exercises.py``) writes them for every chapter.
"""

from __future__ import annotations

import ast
import numbers
import os
import re
from pathlib import Path

import numpy as np

__all__ = ["check", "WrongAnswer", "NotAnswered", "NOT_ANSWERED", "run_exercises", "classroom_notebook",
           "write_classroom_notebooks", "chapter_namespace", "read_notebook", "exercise_start", "stub_source", "answer_names"]

NOT_ANSWERED = "not answered yet"


class WrongAnswer(AssertionError):
    """The reader's answer differs from the independent computation."""


class NotAnswered(AssertionError):
    """Raised instead of printing "not answered yet" when nbgrader grades or validates a notebook
    (it sets ``NBGRADER_EXECUTION``): a blank answer must score no points."""


def _is_blank(answer) -> bool:
    return answer is None or answer is Ellipsis


def check(label: str, answer, expected, rtol: float = 1e-6, atol: float = 0.0) -> bool:
    """Compare ``answer`` with ``expected`` (numbers and arrays within ``rtol``/``atol``; strings,
    booleans and other objects by equality). Returns ``True`` when right, ``False`` when not
    answered (under nbgrader's autograder, which sets ``NBGRADER_EXECUTION``, it raises
    :class:`NotAnswered` instead, so a blank scores no points); raises :class:`WrongAnswer` when
    wrong."""
    if _is_blank(answer):
        message = f"{label}: {NOT_ANSWERED} - assign your answer in the cell above and run this cell again."
        if os.environ.get("NBGRADER_EXECUTION"):
            raise NotAnswered(message)
        print(message)
        return False
    if isinstance(expected, (str, bool, np.bool_)) or not isinstance(
            expected, (numbers.Number, np.ndarray, list, tuple)):
        ok = answer == expected
    elif isinstance(answer, (str, bytes)):
        ok = False  # a number written as text is not a number
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


# --- exercise sections of the chapters: extraction, student and teacher notebooks -----------------

SOLUTION_TAG = "solution"
CHECK_TAG = "check"
EXERCISES_HEADING = re.compile(r"^##\s+Exercises\s*$", re.M)
_ANSWER = re.compile(r"^[ \t]*(answer_\d+_\d+)\s*(?:[-+*/]?=)(?!=)", re.M)
_LABEL_IN_CHECK = re.compile(r"""check\(\s*["'](ex-[\w-]+)["']""")
_EXERCISE = re.compile(r"```\{exercise\}[^\n]*\n:label:\s*(\S+)\n(.*?)\n```", re.S)
_SOLUTION_START = re.compile(r"```\{solution-start\}\s*(\S+)\n(?::[^\n]*\n)*```\n?")
_SOLUTION_END = re.compile(r"```\{solution-end\}\s*\n```\n?")
BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"


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
            current.append(f"**Exercise {label}.** {found.group(2).strip()}")
        elif m.group("start"):
            flush(inside)
            inside = True
            if teacher:
                current.append(f"**Solution to {_SOLUTION_START.match(m.group(0)).group(1)}.**\n\n")
        else:
            flush(inside)
            inside = False
        pos = m.end()
    current.append(source[pos:])
    flush(inside)
    return segments, inside, label


def _nbgrader(grade_id: str, *, solution: bool, grade: bool, locked: bool, points: int | None = None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return meta


def classroom_notebook(nb, version: str):
    """The ``"student"`` or ``"teacher"`` notebook of a chapter (a new notebook; ``nb`` is left as
    it is).

    Both turn the exercise directives into plain Markdown and carry nbgrader's cell metadata: a
    solution cell is an nbgrader solution cell (``grade_id`` ``<label>-answer``), a check cell an
    autograded test cell worth one point (``<label>-check``, locked). The teacher version keeps
    each solution between nbgrader's ``### BEGIN SOLUTION`` / ``### END SOLUTION`` markers, after
    the student's stub, so nbgrader's own ``generate_assignment`` turns it into the student
    version. The student version replaces every solution cell by its stub
    (``answer_NN_k = ...  # your answer``), on which the check cell prints "not answered yet".
    """
    import copy

    import nbformat

    if version not in ("student", "teacher"):
        raise ValueError(f"version must be 'student' or 'teacher', got {version!r}")
    teacher = version == "teacher"
    out = copy.deepcopy(nb)
    cells = []
    label, inside = None, False
    for cell in out.cells:
        tags = _tags(cell)
        if cell.cell_type == "markdown":
            segments, inside_after, stated = _exercise_markdown(cell.source, teacher, inside)
            label = stated or label
            inside = inside_after
            for text, is_solution in segments:
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
            gid = f"{m.group(1) if m else label or 'exercise'}-check"
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


def write_classroom_notebooks(notebooks, out_dir) -> list[Path]:
    """Write ``<out_dir>/student/<chapter>.ipynb`` and ``<out_dir>/teacher/<chapter>.ipynb`` for
    every MyST chapter in ``notebooks`` (what ``make exercises`` runs). Returns the paths."""
    import nbformat

    out_dir = Path(out_dir)
    written = []
    for path in notebooks:
        path = Path(path)
        nb = read_notebook(path)
        exercise_start(nb)  # every chapter must have its exercise section
        for version in ("student", "teacher"):
            target = out_dir / version / f"{path.stem}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(classroom_notebook(nb, version), target)
            written.append(target)
    return written
