"""Exercises of every chapter: each check passes with its solution, says "not answered yet" on the
blank student version, and fails on a wrong answer; the student and teacher notebooks of
`make exercises`; nbgrader's own assignment generation on one chapter."""

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import nbformat  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from itemsampling.exercises import (  # noqa: E402
    NOT_ANSWERED, NotAnswered, WrongAnswer, chapter_namespace, check, classroom_notebook, exercise_start,
    read_notebook, run_exercises, stub_source,
)

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.md"))
CH1 = ROOT / "notebooks" / "01-sampled-metrics-inconsistent.md"
BIN = Path(sys.executable).parent


def _perturb(name, value):
    """A wrong answer of the same kind as the solution's."""
    if isinstance(value, (bool, np.bool_)):
        return not value
    if isinstance(value, str):
        return value + "?"
    a = np.asarray(value, dtype=float)
    wrong = np.where(np.isfinite(a), a * 1.1 + 1.0, a)   # infinite entries (e.g. a cost) stay
    if not np.isfinite(a).any():
        wrong = np.zeros_like(a)
    return wrong


def _labels(nb):
    """The exercise labels: from the ``{exercise}`` directives, else from the check cells."""
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    labels = re.findall(r"```\{exercise\}[^\n]*\n:label:\s*(\S+)", text)
    return labels or re.findall(r"""check\(\s*["'](ex-[\w-]+)["']""", "\n".join(c.source for c in nb.cells))


# Chapters whose exercise section uses the chapter's variables run the chapter's cells first, at
# the small parameters of their notebook test.
CHAPTER_PARAMS = {
    "08": {"dataset": "synthetic", "synthetic_items": 400, "synthetic_users": 1500, "initial_size": 10,
           "max_size": 80, "fixed_size": 40, "n_repeats": 3, "max_k": 20, "winner_ks": [5, 10], "seed": 4},
}


def _namespace(chapter, nb):
    """None for a self-contained exercise section, else the chapter's namespace at small size."""
    start = exercise_start(nb)
    code = "\n".join(c.source for c in nb.cells[start:] if c.cell_type == "code")
    try:
        run_exercises(nb, "student")
        return None
    except NameError:
        pass
    nn = chapter.stem[:2]
    params = CHAPTER_PARAMS.get(nn)
    if params is None:
        try:
            params = importlib.import_module(f"test_notebook_{nn}").PARAMS
        except (ImportError, AttributeError):
            params = {}
    assert code
    return chapter_namespace(nb, params)


# --- check -------------------------------------------------------------------------------------

def test_check_right_blank_wrong(capsys, monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    assert check("ex-0-1", 0.1 + 0.2, expected=0.3) is True
    assert check("ex-0-1", [1.0, 2.0], expected=np.array([1.0, 2.0 + 1e-9]), rtol=1e-6) is True
    assert check("ex-0-1", "A", expected="A") is True
    assert "correct" in capsys.readouterr().out
    for blank in (None, ...):
        assert check("ex-0-2", blank, expected=1.0) is False
        assert NOT_ANSWERED in capsys.readouterr().out
    for answer, expected in ((0.31, 0.3), ([1.0, 2.0], [1.0, 2.0, 3.0]), ("B", "A"), (True, False),
                             ("0.3", 0.3), ([1.0, np.nan], [1.0, 2.0])):
        with pytest.raises(WrongAnswer, match="ex-0-3"):
            check("ex-0-3", answer, expected=expected)
    assert issubclass(WrongAnswer, AssertionError)


def test_check_blank_fails_under_nbgrader(monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    with pytest.raises(NotAnswered, match=NOT_ANSWERED):
        check("ex-0-4", None, expected=1.0)
    assert check("ex-0-4", 1.0, expected=1.0) is True


def test_stub_source():
    assert stub_source("x = 1\nanswer_03_2 = x\nanswer_03_2 += 1\n") == "answer_03_2 = ...  # your answer"
    assert stub_source("answer_01_1 = 1\nanswer_01_2 = 2") == ("answer_01_1 = ...  # your answer\n"
                                                              "answer_01_2 = ...  # your answer")
    assert stub_source("print(1)") == "# your work here"


# --- every chapter -----------------------------------------------------------------------------

@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem[:2])
def test_chapter_exercises(chapter, capsys, monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    nb = read_notebook(chapter)
    nn = chapter.stem[:2]
    labels = _labels(nb)
    assert len(labels) >= 3, f"{chapter.name}: fewer than three exercises"
    assert labels == [f"ex-{nn}-{k}" for k in range(1, len(labels) + 1)]
    if nn <= "07":
        assert "{exercise}" in "\n".join(c.source for c in nb.cells)
    namespace = _namespace(chapter, nb)
    solved = run_exercises(nb, "teacher", namespace=namespace)
    assert solved and set(solved) <= set(labels)
    assert all(v is True for v in solved.values()), solved
    capsys.readouterr()
    blank = run_exercises(nb, "student", namespace=namespace)
    assert blank == {label: False for label in solved}
    out = capsys.readouterr().out
    for label in solved:
        assert f"{label}: {NOT_ANSWERED}" in out
    wrong = run_exercises(nb, "teacher", answers=_perturb, raise_wrong=False, namespace=namespace)
    assert set(wrong) == set(solved)
    assert all(isinstance(v, WrongAnswer) for v in wrong.values()), wrong


# --- student and teacher notebooks ---------------------------------------------------------------

def test_classroom_notebooks_of_chapter_1():
    nb = read_notebook(CH1)
    solutions = [c.source for c in nb.cells if "solution" in c.metadata.get("tags", [])]
    student, teacher = classroom_notebook(nb, "student"), classroom_notebook(nb, "teacher")
    s_text = "\n".join(c.source for c in student.cells)
    t_text = "\n".join(c.source for c in teacher.cells)
    for text in (s_text, t_text):
        assert "{exercise}" not in text and "{solution-start}" not in text and "{solution-end}" not in text
        assert "**Exercise ex-01-1.**" in text
    for sol in solutions:
        assert sol.strip() not in s_text and sol.strip() in t_text
    assert "BEGIN SOLUTION" not in s_text and "Solution to" not in s_text
    assert "The target is first when none of the 99 decoys" in t_text   # the solution's prose
    assert "The target is first when none of the 99 decoys" not in s_text
    stubs = [c.source for c in student.cells if "solution" in c.metadata.get("tags", [])]
    assert stubs[:4] == [f"answer_01_{k} = ...  # your answer" for k in range(1, 5)]
    for version in (student, teacher):
        grade_ids = [c.metadata["nbgrader"]["grade_id"] for c in version.cells if "nbgrader" in c.metadata]
        assert len(grade_ids) == len(set(grade_ids))
        checks = [c for c in version.cells if "check" in c.metadata.get("tags", [])]
        assert all(c.metadata["nbgrader"]["grade"] and c.metadata["nbgrader"]["locked"] for c in checks)
    # the chapter's own cells are all there, in order
    assert [c.source for c in student.cells if c.cell_type == "code"
            and not set(c.metadata.get("tags", [])) & {"solution"}] == \
        [c.source for c in nb.cells if c.cell_type == "code" and "solution" not in c.metadata.get("tags", [])]


def test_classroom_notebook_rejects_unknown_version():
    with pytest.raises(ValueError, match="student' or 'teacher"):
        classroom_notebook(read_notebook(CH1), "grader")


def test_make_exercises_writes_student_and_teacher(tmp_path):
    res = subprocess.run([sys.executable, str(ROOT / "tools" / "make_exercises.py"), "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    for chapter in CHAPTERS:
        for version in ("student", "teacher"):
            nb = nbformat.read(tmp_path / version / f"{chapter.stem}.ipynb", as_version=4)
            nbformat.validate(nb)
            grade_ids = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if "nbgrader" in c.metadata]
            assert grade_ids and len(grade_ids) == len(set(grade_ids)), (chapter.name, version)
            if version == "student":
                assert "BEGIN SOLUTION" not in "\n".join(c.source for c in nb.cells)


def test_student_notebook_runs_and_says_not_answered(tmp_path):
    """The student notebook of chapter 1 executes from top to bottom (small parameters) and its
    checks print "not answered yet" rather than a traceback."""
    import papermill as pm

    nb = classroom_notebook(read_notebook(CH1), "student")
    source = tmp_path / "student.ipynb"
    nbformat.write(nb, source)
    pm.execute_notebook(str(source), str(tmp_path / "out.ipynb"), parameters={"n_repeats": 20},
                        kernel_name="python3", progress_bar=False, cwd=str(tmp_path))
    out = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    texts = [o.get("text", "") for c in out.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not any(o.get("output_type") == "error" for c in out.cells if c.cell_type == "code"
                   for o in c.get("outputs", []))
    labels = _labels(read_notebook(CH1))
    checked = [lab for lab in labels if any(f'check("{lab}"' in c.source for c in nb.cells)]
    for label in checked:
        assert any(f"{label}: {NOT_ANSWERED}" in t for t in texts), label


def test_nbgrader_generate_assignment(tmp_path):
    """nbgrader's own assignment generation on chapter 1's teacher notebook: the release has
    no solution left, a stub per answer, and its checks say "not answered yet"."""
    nbgrader = BIN / "nbgrader"
    assert nbgrader.exists(), "nbgrader must be installed in the test environment"
    source = tmp_path / "source" / "ch01"
    source.mkdir(parents=True)
    nb = read_notebook(CH1)
    nbformat.write(classroom_notebook(nb, "teacher"), source / "ch01.ipynb")
    (tmp_path / "nbgrader_config.py").write_text(
        'c = get_config()\nc.ClearSolutions.code_stub = {"python": ""}\n'
        'c.ClearSolutions.text_stub = "Your explanation here."\n')
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    res = subprocess.run([str(nbgrader), "generate_assignment", "ch01", f"--CourseDirectory.root={tmp_path}",
                          f"--CourseDirectory.db_url=sqlite:///{tmp_path / 'gradebook.db'}"],
                         cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    release = tmp_path / "release" / "ch01" / "ch01.ipynb"
    assert res.returncode == 0 and release.exists(), res.stdout[-3000:] + res.stderr[-3000:]
    released = nbformat.read(release, as_version=4)
    text = "\n".join(c.source for c in released.cells)
    assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
    for cell in nb.cells:
        if "solution" in cell.metadata.get("tags", []):
            assert cell.source.strip() not in text
    meta = [c.metadata["nbgrader"] for c in released.cells if "nbgrader" in c.metadata]
    assert any(m["grade_id"] == "ex-01-1-check" and m["grade"] and m["locked"] for m in meta)
    assert all("checksum" in m for m in meta if m.get("grade") or m.get("locked"))
    assert run_exercises(released, "teacher") == {f"ex-01-{k}": False for k in range(1, 5)}
    json.dumps(meta)  # plain JSON metadata
