"""A chapter on real-format data: chapter 7 run on a MovieLens folder the test writes (a
``ratings.dat`` of 300 users), with another sample size; its numbers are checked against the
folder's own global ranks, and its rendered page against the run's data, n, gamma and K range."""

from pathlib import Path

import numpy as np
import pytest
from movielens_folder import write_movielens
from rendered import rendered_prose

from itemsampling.experiments import load_global_ranks
from itemsampling.metrics import metric_curve
from itemsampling.run import run_notebook

NB = Path(__file__).resolve().parents[1] / "notebooks" / "07-bv-vs-mn.md"
MODELS = ["ease", "popular", "userknn"]
PARAMS = {"models": MODELS, "sample_size": 30, "n_repeats": 2, "max_k": 10, "winner_ks": [5],
          "user_grid": [100, 1_000], "gamma": 0.1, "seed": 1}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("real")
    folder = write_movielens(root / "ml-small-data", "ratings.dat")
    mp = pytest.MonkeyPatch()
    mp.setenv("ITEMSAMPLING_CACHE", str(root / "cache"))
    try:
        payload = run_notebook(NB, {**PARAMS, "dataset": str(folder)}, root / "out", progress=False, html=True)
        yield folder, root / "out", payload
    finally:
        mp.undo()


def test_chapter_uses_the_folder(run, monkeypatch):
    folder, _, payload = run
    res = payload["results"]
    monkeypatch.setenv("ITEMSAMPLING_CACHE", str(Path(folder).parent / "cache"))
    gr = load_global_ranks(str(folder), MODELS, rng=PARAMS["seed"], progress=False)
    assert res["ch07_n_items"] == gr.n_items and res["ch07_sample_size"] == 30
    assert res["ch07_models"] == MODELS
    for m in MODELS:
        assert np.array_equal(res["ch07_global_ranks"][m], gr[m])
        assert len(res["ch07_sampled_ranks_first_repeat"][m]) == gr.n_users == 300
        # the relative error of the first repeat's MLE estimate, recomputed from the recorded estimate
        truth = metric_curve(gr[m], "recall", np.arange(1, 11), n_items=gr.n_items)
        est = np.array(res["ch07_estimates_recall_first_repeat"][m]["MLE"])
        keep = truth > 0
        expected = 100 * np.mean(np.abs(est[keep] - truth[keep]) / truth[keep])
        assert res["ch07_rel_error_per_repeat"][m]["MLE"][0] == pytest.approx(expected, rel=1e-9)
    ds = payload["datasets"]["dataset"]
    assert ds["kind"] == "folder" and [f["name"] for f in ds["files"]] == ["ratings.dat"]
    assert payload["parameters"]["sample_size"] == 30 and payload["parameters"]["eta"] == 0.01  # a default


def test_rendered_page_states_the_data_and_the_run_values(run):
    folder, out, payload = run
    prose = rendered_prose(out / payload["html"])
    assert "glue:" not in prose
    assert f"the MovieLens file ratings.dat in {folder.resolve() / 'ml-small'}" in prose
    assert "3 recommenders (ease, popular, userknn) trained on the MovieLens file ratings.dat" in prose
    # Figure 7.1's caption and the Table 7.3 section carry the run's n, gamma and K range
    assert "uniform prior, \\(n\\) = 30 (left)" in prose and "\\(\\gamma\\) = 0.1 (right)" in prose
    assert "\\(n\\) = 30 , uniform decoys with replacement" in prose or "\\(n\\) = 30, uniform decoys with replacement" in prose
    assert "\\(K = 1..\\) 10" in prose
    assert "\\(n\\) = 100 (left)" not in prose and "sim-ml1m" not in prose
    assert "simulated data and their rank distributions" not in prose
