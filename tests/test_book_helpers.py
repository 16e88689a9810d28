"""Helpers for the notebooks: recording values and tie-aware orders."""

import json

import numpy as np
import pytest

from itemsampling import book


def test_order_string_ties_and_strict():
    assert book.order_string({"A": 0.0, "B": 0.0, "C": 0.2}) == "C > A = B"
    assert book.order_string({"A": 1.0, "B": 0.9999999999999998, "C": 1.0}) in ("A = B = C", "A = C = B", "C = A = B")
    assert book.order_string({"A": 3, "B": 1, "C": 2}) == "A > C > B"
    assert book.order_string({"A": 3, "B": 1}, higher_is_better=False) == "B < A"


def test_order_string_bad_input():
    with pytest.raises(ValueError, match="values"):
        book.order_string({})
    with pytest.raises(ValueError, match="atol"):
        book.order_string({"A": 1}, atol=-1)
    with pytest.raises(ValueError, match="not finite"):
        book.order_string({"A": 1.0, "B": np.nan})


def test_record_writes_json(tmp_path, monkeypatch):
    path = tmp_path / "results.json"
    monkeypatch.setenv(book.RESULTS_ENV, str(path))
    book.record("x", np.float64(0.5))
    book.record("arr", np.arange(3))
    book.record("nested", {"a": (1, 2.5), "b": np.int64(4)})
    assert json.loads(path.read_text()) == {"x": 0.5, "arr": [0, 1, 2], "nested": {"a": [1, 2.5], "b": 4}}
    assert book.recorded()["x"] == 0.5


def test_record_refuses_nan_and_bad_names():
    with pytest.raises(ValueError, match="not finite"):
        book.record("bad", float("nan"))
    with pytest.raises(ValueError, match="name"):
        book.record("", 1)
    with pytest.raises(ValueError, match="cannot record"):
        book.record("obj", object())


def test_record_text(tmp_path, monkeypatch):
    path = tmp_path / "results.json"
    monkeypatch.setenv(book.RESULTS_ENV, str(path))
    assert book.record_text("sentence", "A beats *B*") == "A beats *B*"
    assert json.loads(path.read_text()) == {"sentence": "A beats *B*"}
    with pytest.raises(ValueError, match="text must be a string"):
        book.record_text("bad", 3)
    # glued Markdown is not typeset: TeX would be shown as raw dollars, so it is refused (and not recorded)
    for tex in ("at $n_0$ = 100", "Kendall's $\\tau$", "every $(p, m)$ of the figure"):
        with pytest.raises(ValueError, match="holds TeX"):
            book.record_text("tex", tex)
    assert "tex" not in json.loads(path.read_text())
    assert book.record_text("money", "costs $ 5 and $ 6") == "costs $ 5 and $ 6"   # no TeX span


def test_standard_error_by_hand():
    # values 1, 2, 3, 4: sample variance 5/3, se = sqrt(5/3) / 2
    assert book.standard_error([1, 2, 3, 4]) == pytest.approx(np.sqrt(5 / 3) / 2, rel=1e-14)
    with pytest.raises(ValueError, match="at least 2"):
        book.standard_error([1.0])
    with pytest.raises(ValueError, match="finite"):
        book.standard_error([1.0, np.nan])


def test_compare_with_paper_margin():
    # combined se = hypot(0.3, 0.4) = 0.5: a difference of 0.99 matches at z = 2, 1.01 does not
    assert book.compare_with_paper(10.99, 0.3, 10.0, 0.4) == {"diff": pytest.approx(0.99), "se": pytest.approx(0.5),
                                                              "verdict": "matches"}
    assert book.compare_with_paper(11.01, 0.3, 10.0, 0.4)["verdict"] == "above"
    assert book.compare_with_paper(8.99, 0.3, 10.0, 0.4)["verdict"] == "below"
    assert book.compare_with_paper(8.99, 0.3, 10.0, 0.4, z=3)["verdict"] == "matches"
    assert book.compare_with_paper(5.0, 0.0, 5.0)["verdict"] == "matches"  # equal values, no noise
    assert book.compare_with_paper(5.1, 0.0, 5.0)["verdict"] == "above"
    with pytest.raises(ValueError, match="ours_se"):
        book.compare_with_paper(1.0, -0.1, 1.0)
    with pytest.raises(ValueError, match="z"):
        book.compare_with_paper(1.0, 0.1, 1.0, z=0)
    with pytest.raises(ValueError, match="paper"):
        book.compare_with_paper(1.0, 0.1, float("nan"))


def test_paired_difference_against_a_hand_computation():
    rng = np.random.default_rng(1)
    a = rng.normal(size=50)
    b = a - 0.5 + 0.1 * rng.normal(size=50)  # a is larger by about 0.5, paired noise 0.1
    out = book.paired_difference(a, b)
    d = a - b
    assert out["mean"] == pytest.approx(d.mean()) and out["se"] == pytest.approx(d.std(ddof=1) / np.sqrt(50))
    assert out["sign"] == 1 and book.paired_difference(b, a)["sign"] == -1
    # unpaired noise of size 1 and a shift of 0.01: within the noise
    assert book.paired_difference(a + 0.01, a + rng.normal(size=50))["sign"] == 0
    with pytest.raises(ValueError, match="same repeats"):
        book.paired_difference([1, 2, 3], [1, 2])


def test_glue_sends_myst_nb_s_message_without_importing_nbformat(monkeypatch):
    """itemsampling.book.glue (what the chapters, record, record_text and the exercises' checks glue with) sends
    the display message of myst_nb.glue, for each kind of value the chapters glue, shown or not; and gluing
    imports neither nbformat nor jsonschema (in a fresh interpreter: the kernel's cost it saves)."""
    import subprocess
    import sys

    import IPython.display
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import myst_nb.ext.glue
    import pandas as pd
    from IPython.display import Markdown
    from myst_nb import glue as myst_glue

    from itemsampling.book import glue

    sent = {"ours": [], "myst": []}
    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: sent["ours"].append((a, k)))
    monkeypatch.setattr(myst_nb.ext.glue, "ipy_display", lambda *a, **k: sent["myst"].append((a, k)))
    fig, _ = plt.subplots()
    values = [3, 0.125, np.float64(2.5), "text", Markdown("**1,234 items**"), pd.DataFrame({"a": [1, 2]}), fig,
              [1, 2]]
    for value in values:
        for display in (True, False):
            glue("name", value, display=display)
            myst_glue("name", value, display=display)
    plt.close(fig)
    assert len(sent["ours"]) == len(sent["myst"]) == 2 * len(values)
    assert sent["ours"] == sent["myst"]
    assert sent["ours"][3][0][0] == {"application/papermill.record/text/plain": "0.125"}
    assert sent["ours"][3][1] == {"raw": True, "metadata": {"scrapbook": {
        "name": "name", "mime_prefix": "application/papermill.record/"}}}
    code = ("import sys; from itemsampling.book import glue, record_text; glue('x', 1, display=False); "
            "record_text('y', 'a sentence'); print(sorted({'nbformat', 'jsonschema', 'myst_nb'} & set(sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stdout
