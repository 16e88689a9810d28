"""Exercises of every chapter: each check passes with its solution, says "not answered yet" on the
blank student version, and fails on a wrong answer without revealing the expected value; every
check is hidden in the book and asks for the precision its exercise states; the student and
teacher notebooks of `make exercises` (plain Markdown, glued values filled in, "Exercise C.k");
nbgrader's own assignment generation on one chapter."""

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
    NOT_ANSWERED, NotAnswered, WrongAnswer, chapter_namespace, check, classroom_notebook, digits_tolerance,
    exercise_start, exercise_title, glue_values, myst_markup, plain_markdown, read_notebook, reader_notebook,
    DIGEST_GLUE_PREFIX, answer_digest, check_digest, digest_check_source, glued_digests, recorded_checks,
    run_exercises, stub_source,
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
           "max_size": 80, "fixed_size": 40, "n_repeats": 3, "max_k": 20, "winner_ks": [5, 10], "seed": 4,
           # the catalogue-scale sections at the notebook test's small sizes too
           "catalogues": ["sim-ml100k"], "catalogue_models": ["popular", "svd8"], "catalogue_fixed_sizes": [40],
           "catalogue_max_size": 160, "catalogue_repeats": 2, "absolute_repeats": 2, "nm_items": [200, 400],
           "nm_users": [300, 600], "nm_fixed_users": 300, "nm_fixed_items": 400, "nm_repeats": 2,
           "nm_sizes": [10, 80, 40], "n_jobs": 1},
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
    assert "Exercise 0.1: correct" in capsys.readouterr().out
    for blank in (None, ...):
        assert check("ex-0-2", blank, expected=1.0) is False
        assert f"Exercise 0.2: {NOT_ANSWERED}" in capsys.readouterr().out
    for answer, expected in ((0.31, 0.3), ([1.0, 2.0], [1.0, 2.0, 3.0]), ("B", "A"), (True, False),
                             ("0.3", 0.3), ([1.0, np.nan], [1.0, 2.0])):
        with pytest.raises(WrongAnswer, match="Exercise 0.3: not right yet"):
            check("ex-0-3", answer, expected=expected)
    assert issubclass(WrongAnswer, AssertionError)


def test_exercise_title_is_chapter_dot_number():
    assert exercise_title("ex-10-2") == "Exercise 10.2"
    assert exercise_title("ex-01-4") == "Exercise 1.4"
    assert exercise_title("ex-11-13") == "Exercise 11.13"
    assert exercise_title("my-label") == "my-label"


def test_wrong_answer_reveals_no_expected_value():
    """The message says right / wrong, too high / too low and a coarse relative distance, never
    the value (the issue's example: expected 0.1642..., got 0.2)."""
    expected = 0.16421537
    for answer, words in ((0.2, "too high, between 10% and 50% off"), (0.1, "too low, between 10% and 50% off"),
                          (0.166, "too high, between 1% and 10% off"), (0.1645, "too high, less than 1% off"),
                          (1.0, "more than 50% off")):
        with pytest.raises(WrongAnswer) as err:
            check("ex-2-1", answer, expected=expected, rtol=1e-9)
        message = str(err.value)
        assert words in message, message
        for shown in ("0.164", "0.1642", "np.float64", "expected", repr(expected)):
            assert shown not in message, message
    with pytest.raises(WrongAnswer) as err:
        check("ex-2-2", [0.5, 0.9], expected=np.array([0.4871, 0.9]), digits=3)
    assert "0.487" not in str(err.value) and "worst entry" in str(err.value)
    assert "3 significant digits" in str(err.value)
    with pytest.raises(WrongAnswer) as err:
        check("ex-2-3", "C", expected="A")
    assert "'A'" not in str(err.value) and "A" not in str(err.value).split(":", 1)[1]


def test_digits_accepts_what_rounds_right_and_nothing_else(capsys):
    # 0.16421537 to 3 significant digits is 0.164: 0.164 and 0.1644 are right, 0.165 and 0.163 are not
    for good in (0.164, 0.1644, 0.16421537, 0.1638):
        assert check("ex-3-1", good, expected=0.16421537, digits=3) is True
    for bad in (0.165, 0.163, 0.16):
        with pytest.raises(WrongAnswer, match="3 significant digits"):
            check("ex-3-1", bad, expected=0.16421537, digits=3)
    # per entry, on its own magnitude: 1234.5 and 0.001234 to 3 digits
    assert check("ex-3-2", [1230.0, 0.00123], expected=[1234.4, 0.0012344], digits=3) is True
    with pytest.raises(WrongAnswer):
        check("ex-3-2", [1240.0, 0.00123], expected=[1234.4, 0.0012344], digits=3)
    assert check("ex-3-3", 0.0, expected=0.0, digits=3) is True       # a zero must be exact
    with pytest.raises(WrongAnswer):
        check("ex-3-3", 1e-9, expected=0.0, digits=3)
    np.testing.assert_allclose(digits_tolerance([0.16421537, 1234.4, 7.0], 3), [5e-4, 5.0, 5e-3], rtol=1e-6)
    for bad in (0, 16, 2.0, True, "3"):
        with pytest.raises(ValueError, match="digits"):
            digits_tolerance(1.0, bad)


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

_RUNS: dict = {}


def _chapter_run(chapter):
    """A chapter's exercise section run once with its solutions (cached for the tests below): the
    namespace it needs, the check results, the solutions' answers and the checks' digests and
    expected values."""
    if chapter not in _RUNS:
        nb = read_notebook(chapter)
        namespace = _namespace(chapter, nb)
        answers: dict = {}

        def keep(name, value):
            answers[name] = value
            return value

        solved = run_exercises(nb, "teacher", answers=keep, namespace=namespace)
        checks = {label: value for label, value in recorded_checks().items() if label in solved}
        _RUNS[chapter] = {"nb": nb, "namespace": namespace, "solved": solved, "answers": answers, "checks": checks}
    return _RUNS[chapter]


def _glue_placeholders(nb) -> dict:
    """A stand-in for an executed chapter's glued values (tests that need the notebook's code, not
    its numbers): every glued name of its Markdown, valued 1."""
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    names = {m.split(":")[0] for m in re.findall(r"\{glue(?::\w+)?\}`([^`]+)`", text)}
    return {name: {"text/plain": "1", "text/markdown": "1"} for name in names}


def _student(chapter, version="student"):
    run = _chapter_run(chapter)
    digests = {label: value["spec"] for label, value in run["checks"].items()}
    return classroom_notebook(run["nb"], version, _glue_placeholders(run["nb"]), digests=digests)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem[:2])
def test_chapter_exercises(chapter, capsys, monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    run = _chapter_run(chapter)
    nb, namespace, solved = run["nb"], run["namespace"], run["solved"]
    nn = chapter.stem[:2]
    labels = _labels(nb)
    assert len(labels) >= 3, f"{chapter.name}: fewer than three exercises"
    assert labels == [f"ex-{nn}-{k}" for k in range(1, len(labels) + 1)]
    if nn <= "07":
        assert "{exercise}" in "\n".join(c.source for c in nb.cells)
    assert solved and set(solved) <= set(labels)
    assert all(v is True for v in solved.values()), solved
    capsys.readouterr()
    blank = run_exercises(nb, "student", namespace=namespace)
    assert blank == {label: False for label in solved}
    out = capsys.readouterr().out
    for label in solved:
        assert f"{exercise_title(label)}: {NOT_ANSWERED}" in out
    wrong = run_exercises(nb, "teacher", answers=_perturb, raise_wrong=False, namespace=namespace)
    assert set(wrong) == set(solved)
    assert all(isinstance(v, WrongAnswer) for v in wrong.values()), wrong
    assert set(run["checks"]) == set(solved), "every check keeps a digest"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem[:2])
def test_student_notebook_tells_right_from_wrong(chapter, capsys, monkeypatch):
    """The chapter's student notebook (digest checks, no expected value) with the teacher's
    solutions filled in says "correct" for every exercise; with one perturbed answer per exercise
    it says "not right yet" for each; blank, "not answered yet". The teacher notebook (digest
    check, then the hidden independent check) passes its own solutions."""
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    run = _chapter_run(chapter)
    student, namespace, answers = _student(chapter), run["namespace"], run["answers"]
    checks = [c.source for c in student.cells if "check" in c.metadata.get("tags", [])]
    assert checks and all("check_digest(" in c and "expected=" not in c for c in checks)
    right = run_exercises(student, "student", answers=answers, namespace=namespace)
    assert right == run["solved"]
    wrong = run_exercises(student, "student", answers=lambda name, _: _perturb(name, answers[name]),
                          raise_wrong=False, namespace=namespace)
    assert set(wrong) == set(run["solved"])
    assert all(isinstance(v, WrongAnswer) for v in wrong.values()), wrong
    for label, err in wrong.items():
        assert str(err).startswith(f"{exercise_title(label)}: not right yet"), err
    capsys.readouterr()
    assert run_exercises(student, "student", namespace=namespace) == {label: False for label in run["solved"]}
    assert capsys.readouterr().out.count(NOT_ANSWERED) == len(run["solved"])
    # the teacher's check cell (digest, then the hidden independent check), on the same answers
    teacher = _student(chapter, "teacher")
    assert run_exercises(teacher, "student", answers=answers, namespace=namespace) == run["solved"]


_NUMBER = re.compile(r"(?<![\w.])(\d[\d_]*\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)(?![\w.])")


def _significant(literal: str) -> int:
    """Significant digits written in a numeric literal (``3_706``: 4, ``0.0500``: 3, ``100``: 1)."""
    mantissa = re.split(r"[eE]", literal.replace("_", ""))[0]
    digits = mantissa.replace(".", "").lstrip("0")
    if "." not in mantissa:
        digits = digits.rstrip("0")
    return max(len(digits), 1)


def _taught_numbers(nb, label) -> list:
    """The numbers the student is given in prose: the chapter's text before its exercises and the
    exercise's own text (``3{,}706``, ``0.2``), as ``(literal, value)``."""
    start = exercise_start(nb)
    text = "\n".join(c.source for c in nb.cells[:start] if c.cell_type == "markdown")
    section = "\n".join(c.source for c in nb.cells[start:] if c.cell_type == "markdown")
    m = re.search(r"```\{exercise\}[^\n]*\n:label:\s*" + re.escape(label) + r"\n(.*?)\n```", section, re.S)
    text = (text + "\n" + (m.group(1) if m else "")).replace("{,}", "").replace(",", "")
    return [(x, float(x)) for x in re.findall(r"(?<![\w.])\d+(?:\.\d+)?", text)]


def _round_number(e, spec) -> bool:
    """Whether ``e`` at the check's precision has a single significant digit (200, 0.6, 1)."""
    from itemsampling.exercises import _sig_round

    if e == 0:
        return True
    m = _sig_round(e, spec.get("digits") or 15)[0]
    return len(str(abs(m)).rstrip("0")) <= 1


def _shows(literals, e, spec):
    """The literals that show the number ``e`` at the check's precision."""
    from itemsampling.exercises import _sig_round

    if spec.get("exact"):
        return [lit for lit, v in literals if v == e]
    d = spec["digits"]
    need = len(str(abs(_sig_round(e, d)[0])).rstrip("0"))
    return [lit for lit, v in literals if v != 0 and _significant(lit) >= need and _sig_round(v, d) == _sig_round(abs(e), d)]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem[:2])
def test_student_notebook_hands_out_no_expected_value(chapter):
    """Every code cell of the student notebook: no ``expected=``, no call of ``check`` (the
    teacher's check), no hidden-test markers, no outputs, every check cell just the digest check;
    and no numeric literal that shows an exercise's expected value at its stated precision (a
    literal with at least the digits the rounded value needs and the same rounding). Aside: a value
    the chapter's prose teaches or the exercise's text gives (Exercise 2.1 asks to recall the bound
    the chapter evaluates), a value that rounds to one significant digit (200, 0.6: too common in
    code to tell a leak from a coincidence; the structural checks above cover them), and strings /
    booleans, which the exercise names as its options."""
    from itemsampling.exercises import digest_check_source

    run = _chapter_run(chapter)
    student = _student(chapter)
    code = [c for c in student.cells if c.cell_type == "code"]
    for cell in code:
        assert "expected=" not in cell.source, cell.source
        assert not re.search(r"(?<![\w.])check\(", cell.source), cell.source
        assert "HIDDEN TESTS" not in cell.source and "BEGIN SOLUTION" not in cell.source
        assert not cell.get("outputs"), cell.source
        if "check" in cell.metadata.get("tags", []):
            label = re.search(r'check_digest\("(ex-[\w-]+)"', cell.source).group(1)
            assert cell.source == digest_check_source(label, run["checks"][label]["spec"])
    literals = [(lit, float(lit.replace("_", ""))) for c in code for lit in _NUMBER.findall(c.source)]
    shown = []
    for label, value in run["checks"].items():
        spec, expected = value["spec"], value["expected"]
        if "digits" not in spec and not spec.get("exact"):
            continue    # a string or a boolean: one of the options the exercise names
        taught = _taught_numbers(run["nb"], label)
        for e in np.asarray(expected, dtype=float).ravel():
            if not np.isfinite(e) or _round_number(e, spec) or _shows(taught, e, spec):
                continue
            shown += [(label, float(e), hit) for hit in _shows(literals, e, spec)]
    assert not shown, f"expected values in the student notebook's code: {shown}"


_CHECK_CELL = re.compile(r"```\{code-cell\} ipython3\n:tags: \[([^\]]*)\]\n(.*?)```", re.S)
_EXERCISE_TEXT = re.compile(r"```\{exercise\}\n:label: (\S+)\n(.*?)\n```", re.S)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem[:2])
def test_checks_are_hidden_and_ask_the_stated_precision(chapter):
    """Every check cell is hidden in the book (``remove-input``: its expected-value computation
    would sit right under the hidden solution); a check of a number asks for significant digits
    (``digits=d``), exactly (``rtol=0``, an integer), or compares a string / boolean, never a
    machine-precision ``rtol``; and the exercise's text states the digits it asks for."""
    text = chapter.read_text()
    section = text[EXERCISES_AT(text):]
    statements = {label: " ".join(body.split()) for label, body in _EXERCISE_TEXT.findall(section)}
    checks = [(tags, body) for tags, body in _CHECK_CELL.findall(section) if "check" in tags.split(", ")]
    assert checks, chapter.name
    for tags, body in checks:
        label = re.search(r"""check\(\s*["'](ex-[\w-]+)["']""", body).group(1)
        assert "remove-input" in tags.split(", "), f"{label}: check cell not tagged remove-input"
        call = body[body.index(f'check("{label}"'):]
        rtol = re.search(r"rtol=([^,)\s]+)", call)
        assert rtol is None or float(rtol.group(1)) == 0, f"{label}: rtol={rtol.group(1)}; ask for digits= instead"
        digits = re.search(r"digits=(\d+)", call)
        if digits:
            assert label in statements, f"{label}: no exercise text"
            assert f"{digits.group(1)} significant digits" in statements[label], \
                f"{label}: the exercise does not say '{digits.group(1)} significant digits'"


def EXERCISES_AT(text):
    m = re.search(r"^## Exercises\s*$", text, re.M)
    assert m, "no '## Exercises' section"
    return m.start()


# --- student and teacher notebooks ---------------------------------------------------------------

@pytest.fixture(scope="module")
def ch1_executed(tmp_path_factory):
    """Chapter 1 executed at small parameters (its glued values are what the classroom notebooks
    show)."""
    from itemsampling.run import run_notebook

    out = tmp_path_factory.mktemp("ch01-executed")
    run_notebook(CH1, {"n_repeats": 20}, out, progress=False, html=False)
    return out / f"{CH1.stem}.ipynb"


def _no_myst(nb, where):
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            left = myst_markup(cell.source)
            assert not left, f"{where}: MyST left in a Markdown cell: {left[:5]}"


def test_classroom_notebooks_of_chapter_1(ch1_executed):
    nb = read_notebook(CH1)
    glue = glue_values(ch1_executed)
    solutions = [c.source for c in nb.cells if "solution" in c.metadata.get("tags", [])]
    student, teacher = classroom_notebook(nb, "student", glue), classroom_notebook(nb, "teacher", glue)
    s_text = "\n".join(c.source for c in student.cells)
    t_text = "\n".join(c.source for c in teacher.cells)
    for version, text in (("student", s_text), ("teacher", t_text)):
        assert "{exercise}" not in text and "{solution-start}" not in text and "{solution-end}" not in text
        assert "**Exercise 1.1.**" in text and "ex-01-1." not in text
        assert "{glue" not in text and "{cite" not in text
    for version in (student, teacher):
        _no_myst(version, "chapter 1")
    assert "**Solution to Exercise 1.1.**" in t_text
    for sol in solutions:
        assert sol.strip() not in s_text and sol.strip() in t_text
    assert "BEGIN SOLUTION" not in s_text and "Solution to" not in s_text
    assert "The target is first when none of the 99 decoys" in t_text   # the solution's prose
    assert "The target is first when none of the 99 decoys" not in s_text
    # the glued values of this run are in the text: the chapter glues n_decoys (99 at N = 10,000)
    # and the number of repeats it ran with
    source = CH1.read_text()
    glued_names = set(re.findall(r"\{glue:(?:text|md)\}`([\w]+)", source))
    assert glued_names and glued_names <= set(glue)
    for name in ("n_decoys",):
        if name in glue:
            assert glue[name]["text/plain"] in s_text
    # citations as author-year text
    assert "Krichene and Rendle" in s_text
    stubs = [c.source for c in student.cells if "solution" in c.metadata.get("tags", [])]
    assert stubs[:4] == [f"answer_01_{k} = ...  # your answer" for k in range(1, 5)]
    for version in (student, teacher):
        grade_ids = [c.metadata["nbgrader"]["grade_id"] for c in version.cells if "nbgrader" in c.metadata]
        assert len(grade_ids) == len(set(grade_ids))
        checks = [c for c in version.cells if "check" in c.metadata.get("tags", [])]
        assert all(c.metadata["nbgrader"]["grade"] and c.metadata["nbgrader"]["locked"] for c in checks)
    # the chapter's own cells are all there, in order; its check cells check the glued digests
    # (the teacher's keep the independent check as nbgrader hidden tests)
    assert [c.source for c in student.cells if c.cell_type == "code"
            and not set(c.metadata.get("tags", [])) & {"solution", "check"}] == \
        [c.source for c in nb.cells if c.cell_type == "code" and not set(c.metadata.get("tags", [])) & {"solution", "check"}]
    digests = glued_digests(glue)
    assert sorted(digests) == [f"ex-01-{k}" for k in range(1, 5)]
    originals = [c.source for c in nb.cells if "check" in c.metadata.get("tags", [])]
    for version in (student, teacher):
        checks = [c.source for c in version.cells if "check" in c.metadata.get("tags", [])]
        assert [c.split("\n### BEGIN HIDDEN TESTS")[0] for c in checks] == \
            [digest_check_source(f"ex-01-{k}", digests[f"ex-01-{k}"]) for k in range(1, 5)]
        if version is teacher:
            assert [c.split("### BEGIN HIDDEN TESTS\n")[1] for c in checks] == \
                [o.rstrip() + "\n### END HIDDEN TESTS" for o in originals]
        else:
            assert not any("expected=" in c or "HIDDEN" in c for c in checks)


def test_classroom_notebook_refuses_a_missing_glued_value(ch1_executed):
    with pytest.raises(ValueError, match="no glued"):
        classroom_notebook(read_notebook(CH1), "student", {})
    # an executed chapter whose checks glued no digest (executed before they did)
    glue = {k: v for k, v in glue_values(ch1_executed).items() if not k.startswith(DIGEST_GLUE_PREFIX + "ex-01-3")}
    with pytest.raises(ValueError, match="no digest of ex-01-3"):
        classroom_notebook(read_notebook(CH1), "teacher", glue)


# --- digests ------------------------------------------------------------------------------------

def test_digest_hides_the_value_and_tells_right_from_wrong(capsys, monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    digest = answer_digest("ex-3-1", 0.16421537, digits=3)
    assert re.fullmatch(r"[0-9a-f]{16}", digest)
    # salted by the label, the entry and the precision: equal values do not give equal digests
    assert digest != answer_digest("ex-3-2", 0.16421537, digits=3) != answer_digest("ex-3-1", 0.16421537, digits=4)
    assert answer_digest("ex-3-1", 0.1642, digits=3) == digest          # only the rounding counts
    # the digest is SHA-256 of the label, the entry and the value rounded to 3 digits (164e-3)
    import hashlib

    assert digest == hashlib.sha256(b"itemsampling-exercise|ex-3-1|0|164e-3").hexdigest()[:16]
    # right to 3 digits passes; one unit of the last digit off the rounded value passes too; beyond fails
    for good in (0.164, 0.1644, 0.16421537, 0.1638, 0.163, 0.165):
        assert check_digest("ex-3-1", good, digest, digits=3) is True
    for bad in (0.1655, 0.1625, 0.16, 0.0164, 1.64, -0.164, "0.164", [0.164]):
        with pytest.raises(WrongAnswer, match="Exercise 3.1: not right yet") as err:
            check_digest("ex-3-1", bad, digest, digits=3)
        assert "164" not in str(err.value)
    # a right answer across a decade boundary: 0.09996 rounds to 0.100, whose last digit's unit is
    # 0.001 (so 0.0990 to 0.101 pass, 0.0989 and 0.102 do not)
    near = answer_digest("ex-3-1", 0.09996, digits=3)
    for good in (0.09996, 0.1, 0.0999, 0.10004, 0.0991, 0.101):
        assert check_digest("ex-3-1", good, near, digits=3) is True
    for bad in (0.0989, 0.1011):
        with pytest.raises(WrongAnswer):
            check_digest("ex-3-1", bad, near, digits=3)
    # arrays entry by entry, shape checked, the wrong entries named; exact integers; text; booleans
    pair = answer_digest("ex-3-3", [1234.4, np.inf], digits=3)
    assert isinstance(pair, list) and len(pair) == 2
    assert check_digest("ex-3-3", np.array([1230.0, np.inf]), pair, digits=3) is True
    with pytest.raises(WrongAnswer, match=r"1 of its 2 entries \(index 1\)"):
        check_digest("ex-3-3", [1234.0, 5.0], pair, digits=3)
    with pytest.raises(WrongAnswer, match=r"asks for shape \(2,\)"):
        check_digest("ex-3-3", [1234.0], pair, digits=3)
    exact = answer_digest("ex-9-1", 3_461, exact=True)
    assert check_digest("ex-9-1", 3_461, exact, exact=True) and check_digest("ex-9-1", 3461.0, exact, exact=True)
    with pytest.raises(WrongAnswer, match="exact value"):
        check_digest("ex-9-1", 3_462, exact, exact=True)
    assert check_digest("ex-1-4", "C", answer_digest("ex-1-4", "C")) is True
    assert check_digest("ex-2-4", np.True_, answer_digest("ex-2-4", True)) is True
    for bad in ("A", "c", True):
        with pytest.raises(WrongAnswer):
            check_digest("ex-1-4", bad, answer_digest("ex-1-4", "C"))
    capsys.readouterr()
    assert check_digest("ex-3-1", None, digest, digits=3) is False
    assert NOT_ANSWERED in capsys.readouterr().out
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    with pytest.raises(NotAnswered):
        check_digest("ex-3-1", ..., digest, digits=3)
    for bad in ({"digits": 0}, {"digits": 3, "exact": True}, {}):
        with pytest.raises(ValueError):
            answer_digest("ex-3-1", 0.5, **bad)


def test_check_keeps_the_digest_at_the_checks_precision(capsys):
    """``check`` keeps the digest of its expected value: ``digits`` as asked, ``rtol=0`` exact,
    another ``rtol`` as the digits it keeps; the student's cell is built from it."""
    check("ex-7-1", 0.16421537, expected=0.16421537, digits=3)
    check("ex-7-2", 3_461, expected=3_461, rtol=0)
    check("ex-7-3", 2.0, expected=2.0, rtol=1e-4)
    check("ex-7-4", "B", expected="B")
    specs = {k: v["spec"] for k, v in recorded_checks().items() if k.startswith("ex-7-")}
    assert specs == {"ex-7-1": {"digest": answer_digest("ex-7-1", 0.16421537, digits=3), "digits": 3},
                     "ex-7-2": {"digest": answer_digest("ex-7-2", 3_461, exact=True), "exact": True},
                     "ex-7-3": {"digest": answer_digest("ex-7-3", 2.0, digits=4), "digits": 4},
                     "ex-7-4": {"digest": answer_digest("ex-7-4", "B")}}
    assert digest_check_source("ex-7-2", specs["ex-7-2"]) == (
        'from itemsampling.exercises import check_digest\n\n'
        f'check_digest("ex-7-2", globals().get("answer_7_2"), "{specs["ex-7-2"]["digest"]}", exact=True);')
    assert recorded_checks()["ex-7-1"]["expected"] == 0.16421537
    # as glued by a notebook kernel: a JSON string, read back by glued_digests
    glue = {DIGEST_GLUE_PREFIX + "ex-7-1": {"text/plain": repr(json.dumps(specs["ex-7-1"]))}, "other": {"text/plain": "1"}}
    assert glued_digests(glue) == {"ex-7-1": specs["ex-7-1"]}


def test_plain_markdown_roles():
    glue = {"n": {"text/plain": "1234.5678"}, "who": {"text/markdown": "model `bpr` ({cite:t}`krichene2020sampled`)"}}
    text = plain_markdown(
        "(sec-x)=\n# Title\n\nN = {glue:text}`n:,.1f`, {glue:md}`who`; {cite:p}`krichene2020sampled`; "
        "see {ref}`ex-10-2`, {ref}`the section <sec-x>`, {doc}`the API <../book/api>`, {numref}`Figure %s <fig-a>` "
        "and {math}`x^2`.", glue)
    assert text.startswith("# Title")
    assert "N = 1,234.6," in text
    assert "model `bpr` (Krichene and Rendle (2020))" in text
    assert "(Krichene and Rendle, 2020)" in text
    assert "Exercise 10.2" in text and "the section" in text and "the API" in text and "$x^2$" in text
    assert myst_markup(text) == []
    assert myst_markup("a {glue:md}`x` b\n```{note}\nhi\n```\n:::{figure} a.png\n:::") == [
        "{glue:md}`x`", "```{note}", ":::{figure}"]


def test_plain_markdown_blocks():
    """Admonitions and dropdowns (the chapters' findings boxes and collapsed blocks) read as plain Markdown:
    the title in bold, the options dropped, the body kept with its roles filled in, nested blocks too."""
    glue = {"x": {"text/plain": "0.25"}}
    text = plain_markdown("Before.\n\n````{admonition} Why: P(R) is not identified\n:class: dropdown\n:name: why\n"
                          "Body {glue:text}`x`.\n\n```{note}\nInner.\n```\n````\n\n:::{dropdown} More\nHidden.\n:::\n"
                          "After.", glue)
    assert myst_markup(text) == []
    assert "**Why: P(R) is not identified**\n\nBody 0.25." in text and ":class:" not in text
    assert "**Note**\n\nInner." in text and "**More**\n\nHidden." in text
    assert text.startswith("Before.") and text.rstrip().endswith("After.")


def test_glue_values_from_myst_nb_and_from_papermill(tmp_path):
    """Both places an executed chapter keeps its glued values: MyST-NB's ``.glue.json`` (data
    already without the prefix) and an executed notebook's outputs (prefixed mime types)."""
    prefix = "application/papermill.record/"
    (tmp_path / "a.glue.json").write_text(json.dumps({"k": {
        "output_type": "display_data", "metadata": {"scrapbook": {"name": "k", "mime_prefix": prefix}},
        "data": {"text/plain": "7"}}}))
    assert glue_values(tmp_path / "a.glue.json") == {"k": {"text/plain": "7"}}
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("glue")
    cell.outputs = [nbformat.v4.new_output("display_data", data={prefix + "text/markdown": "**x**"},
                                           metadata={"scrapbook": {"name": "m", "mime_prefix": prefix}})]
    nb.cells = [cell]
    nbformat.write(nb, tmp_path / "b.ipynb")
    assert glue_values(tmp_path / "b.ipynb") == {"m": {"text/markdown": "**x**"}}
    with pytest.raises(ValueError, match="does not exist"):
        glue_values(tmp_path / "missing.ipynb")


def test_reader_notebook_is_plain_markdown(ch1_executed):
    """The notebook a reader downloads from the book: the executed chapter, its Markdown plain."""
    executed = nbformat.read(ch1_executed, as_version=4)
    assert any(myst_markup(c.source) for c in executed.cells if c.cell_type == "markdown")
    reader = reader_notebook(executed, glue_values(ch1_executed))
    _no_myst(reader, "reader notebook")
    text = "\n".join(c.source for c in reader.cells if c.cell_type == "markdown")
    assert "**Exercise 1.2.**" in text and "**Solution to Exercise 1.2.**" in text
    assert [c.outputs for c in reader.cells if c.cell_type == "code"] == \
        [c.outputs for c in executed.cells if c.cell_type == "code"]


def test_classroom_notebook_rejects_unknown_version():
    with pytest.raises(ValueError, match="student' or 'teacher"):
        classroom_notebook(read_notebook(CH1), "grader")


def test_make_exercises_writes_student_and_teacher(tmp_path, ch1_executed):
    out = tmp_path / "ex"
    res = subprocess.run([sys.executable, str(ROOT / "tools" / "make_exercises.py"), str(CH1), "--out", str(out),
                          "--executed", str(ch1_executed.parent), "--zip", str(tmp_path / "all.zip")],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    for version in ("student", "teacher"):
        nb = nbformat.read(out / version / f"{CH1.stem}.ipynb", as_version=4)
        nbformat.validate(nb)
        _no_myst(nb, version)
        grade_ids = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if "nbgrader" in c.metadata]
        assert grade_ids and len(grade_ids) == len(set(grade_ids)), version
        if version == "student":
            assert "BEGIN SOLUTION" not in "\n".join(c.source for c in nb.cells)
            assert "expected=" not in "\n".join(c.source for c in nb.cells)
        checks = [c.source for c in nb.cells if "check" in c.metadata.get("tags", [])]
        assert len(checks) == 4 and all(c.startswith("from itemsampling.exercises import check_digest") for c in checks)
        assert all(("### BEGIN HIDDEN TESTS" in c) == (version == "teacher") for c in checks)
    import zipfile

    with zipfile.ZipFile(tmp_path / "all.zip") as z:
        assert z.namelist() == [f"itemsampling-exercises/{CH1.stem}.ipynb"]
    # a chapter with no executed version is refused under --no-run, naming where it looked
    res = subprocess.run([sys.executable, str(ROOT / "tools" / "make_exercises.py"), str(CH1), "--out", str(out),
                          "--executed", str(tmp_path / "nothing"), "--no-run"], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 1 and "no executed version" in res.stderr, res.stderr
    # so is one executed before its checks glued their digests
    stale = nbformat.read(ch1_executed, as_version=4)
    for cell in stale.cells:
        cell.outputs = [o for o in cell.get("outputs", []) if not o.get("metadata", {}).get("scrapbook", {})
                        .get("name", "").startswith(DIGEST_GLUE_PREFIX)]
    (tmp_path / "stale").mkdir()
    nbformat.write(stale, tmp_path / "stale" / ch1_executed.name)
    res = subprocess.run([sys.executable, str(ROOT / "tools" / "make_exercises.py"), str(CH1), "--out", str(out),
                          "--executed", str(tmp_path / "stale"), "--no-run"], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 1 and "digests of its checks" in res.stderr, res.stderr


def test_student_notebook_runs_and_says_not_answered(tmp_path, ch1_executed):
    """The student notebook of chapter 1 executes from top to bottom (small parameters) and its
    checks print "not answered yet" rather than a traceback."""
    import papermill as pm

    nb = classroom_notebook(read_notebook(CH1), "student", glue_values(ch1_executed))
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
        assert any(f"{exercise_title(label)}: {NOT_ANSWERED}" in t for t in texts), label


def test_nbgrader_generate_assignment(tmp_path, ch1_executed):
    """nbgrader's own assignment generation on chapter 1's teacher notebook: the release has
    no solution left, a stub per answer, and its checks say "not answered yet"."""
    nbgrader = BIN / "nbgrader"
    assert nbgrader.exists(), "nbgrader must be installed in the test environment"
    source = tmp_path / "source" / "ch01"
    source.mkdir(parents=True)
    nb = read_notebook(CH1)
    nbformat.write(classroom_notebook(nb, "teacher", glue_values(ch1_executed)), source / "ch01.ipynb")
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
