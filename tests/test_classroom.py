"""The teacher's path through nbgrader, on two chapters whose exercises are cheap (3 and 4): the
teacher notebooks (digest check for the student, the chapter's independent check between
nbgrader's hidden-test markers) go through ``nbgrader generate_assignment``; the release hands out
no hidden test and no expected value; a student submits one right answer, one wrong and leaves the
rest blank; ``nbgrader autograde`` restores the hidden tests and scores one point for the right
answer only. The notebooks hold the chapters' exercise sections (the part graded), so the
autograder does not execute the chapters' simulations."""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import nbformat  # noqa: E402
import numpy as np  # noqa: E402

from itemsampling.exercises import (  # noqa: E402
    BEGIN_HIDDEN_TESTS, END_HIDDEN_TESTS, answer_name, classroom_notebook, exercise_digests, exercise_start,
    read_notebook, recorded_checks, run_exercises,
)

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CHAPTERS = {"ch03": ROOT / "notebooks" / "03-models-and-rank-distributions.md",
            "ch04": ROOT / "notebooks" / "04-mapping-functions.md"}
ASSIGNMENT = "classroom"
RIGHT, WRONG = 1, 2            # exercise C.1 answered right, C.2 wrong, the others left blank


def _exercise_section(nb):
    section = copy.deepcopy(nb)
    section.cells = section.cells[exercise_start(nb):]
    return section


def _solutions(nb) -> dict:
    """The teacher's answers, from running the exercise section with its solutions."""
    answers = {}

    def keep(name, value):
        answers[name] = value
        return value

    run_exercises(nb, "teacher", answers=keep)
    return answers


def _literal(value) -> str:
    value = np.asarray(value).tolist() if isinstance(value, np.ndarray) or np.ndim(value) else value
    return repr(float(value)) if isinstance(value, (float, np.floating)) else json.dumps(value)


def _nbgrader(*args, root):
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    res = subprocess.run([str(BIN / "nbgrader"), *args, f"--CourseDirectory.root={root}",
                          f"--CourseDirectory.db_url=sqlite:///{root / 'gradebook.db'}"],
                         cwd=root, capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res


def test_nbgrader_generate_submit_autograde(tmp_path):
    from nbgrader.api import Gradebook

    assert (BIN / "nbgrader").exists(), "nbgrader must be installed in the test environment"
    (tmp_path / "nbgrader_config.py").write_text(
        'c = get_config()\nc.ClearSolutions.code_stub = {"python": ""}\n'
        'c.ClearSolutions.text_stub = "Your explanation here."\n')
    source = tmp_path / "source" / ASSIGNMENT
    source.mkdir(parents=True)
    solutions, expected = {}, {}
    for name, path in CHAPTERS.items():
        section = _exercise_section(read_notebook(path))
        digests = exercise_digests(section)
        expected.update({label: v["expected"] for label, v in recorded_checks().items() if label in digests})
        solutions[name] = _solutions(section)
        teacher = classroom_notebook(section, "teacher", {}, digests=digests)
        hidden = [c.source for c in teacher.cells if "check" in c.metadata.get("tags", [])]
        assert len(hidden) == len(digests) and all(BEGIN_HIDDEN_TESTS in h and "expected=" in h for h in hidden)
        nbformat.write(teacher, source / f"{name}.ipynb")

    _nbgrader("generate_assignment", ASSIGNMENT, root=tmp_path)
    # the release: digest checks only, nothing of the independent checks or the solutions
    for name in CHAPTERS:
        released = nbformat.read(tmp_path / "release" / ASSIGNMENT / f"{name}.ipynb", as_version=4)
        text = "\n".join(c.source for c in released.cells)
        for gone in ("HIDDEN TESTS", "BEGIN SOLUTION", "expected=", "check(\""):
            assert gone not in text, gone
        checks = [c.source for c in released.cells if c.metadata.get("nbgrader", {}).get("grade")
                  and c.cell_type == "code"]
        assert checks and all(c.startswith("from itemsampling.exercises import check_digest") for c in checks)

        # a student's submission: exercise 1 right, exercise 2 wrong (10 % off), the rest blank
        nn = name[2:]
        right, wrong = answer_name(f"ex-{nn}-{RIGHT}"), answer_name(f"ex-{nn}-{WRONG}")
        for cell in released.cells:
            gid = cell.metadata.get("nbgrader", {}).get("grade_id", "")
            if gid == f"ex-{nn}-{RIGHT}-answer":
                cell.source = f"{right} = {_literal(solutions[name][right])}"
            elif gid == f"ex-{nn}-{WRONG}-answer":
                cell.source = f"{wrong} = {_literal(np.asarray(solutions[name][wrong]) * 1.1)}"
        submitted = tmp_path / "submitted" / "student1" / ASSIGNMENT
        submitted.mkdir(parents=True, exist_ok=True)
        nbformat.write(released, submitted / f"{name}.ipynb")

    _nbgrader("autograde", ASSIGNMENT, root=tmp_path)
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        for name in CHAPTERS:
            nn = name[2:]
            labels = [lab for lab in expected if lab.startswith(f"ex-{nn}-")]
            scores = {lab: gb.find_grade(f"{lab}-check", name, ASSIGNMENT, "student1").score for lab in labels}
            assert scores == {lab: (1.0 if lab == f"ex-{nn}-{RIGHT}" else 0.0) for lab in labels}, scores
            assert gb.find_submission_notebook(name, ASSIGNMENT, "student1").score == 1.0
    # the graded notebook ran the restored independent check: the hidden test is back, and it
    # said "correct" for the right answer and failed the wrong one
    graded = nbformat.read(tmp_path / "autograded" / "student1" / ASSIGNMENT / "ch03.ipynb", as_version=4)
    cells = {c.metadata["nbgrader"]["grade_id"]: c for c in graded.cells if "nbgrader" in c.metadata}
    right_cell, wrong_cell = cells[f"ex-03-{RIGHT}-check"], cells[f"ex-03-{WRONG}-check"]
    assert BEGIN_HIDDEN_TESTS in right_cell.source and END_HIDDEN_TESTS in right_cell.source
    out = "".join(o.get("text", "") for o in right_cell.outputs)
    assert out.count("Exercise 3.1: correct.") == 2, out     # the digest check and the hidden check
    assert any(o.get("ename") == "WrongAnswer" for o in wrong_cell.outputs)
    blank = cells["ex-03-3-check"]
    assert any(o.get("ename") == "NotAnswered" for o in blank.outputs)
