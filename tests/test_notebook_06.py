"""Chapter 6 (Jin et al. 2021) at small parameters, its recorded numbers checked against
independent computations through the public API."""

from pathlib import Path

import numpy as np
import pytest

from itemsampling.estimators import estimate_metric
from itemsampling.experiments import load_global_ranks
from itemsampling.metrics import evaluate
from itemsampling.run import run_notebook
from itemsampling.sampling import sample_ranks

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "06-learning-rank-distribution.md"
PARAMS = {
    "dataset": "sim-ml100k",
    "models": ["ease", "popular"],
    "figure_models": ["ease"],
    "n_repeats": 2,
    "ks": [1, 10],
    "growth_model": "ease",
    "growth_sizes": [50],
    "growth_repeats": 1,
    "max_rank_plot": 50,
    "seed": 3,
}
LABEL = {"recall": "Recall", "ndcg": "NDCG", "ap": "AP"}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_notebook(NOTEBOOK, PARAMS, out=tmp_path_factory.mktemp("ch06"), progress=False)["results"]


def test_exact_metrics(results):
    ranks = load_global_ranks(PARAMS["dataset"], models=PARAMS["models"], rng=PARAMS["seed"])
    assert results["ch06_N"] == ranks.n_items
    for m in PARAMS["models"]:
        for met, lab in LABEL.items():
            assert results["ch06_exact_at10"][m][lab] == pytest.approx(evaluate(ranks[m], met, 10), abs=1e-12)


def test_estimates_match_estimate_metric(results):
    """Repeat j of model i samples with default_rng([seed, i, j]); the chapter's mean estimates
    must equal estimate_metric on the same sampled ranks."""
    ranks = load_global_ranks(PARAMS["dataset"], models=PARAMS["models"], rng=PARAMS["seed"])
    N, n = ranks.n_items, 100
    cases = {"MLE": ("mle", {}), "MES": ("mes", {"eta": 0.001}), "BV 0.1": ("bv", {"gamma": 0.1}),
             "WMLE": ("wmle", {"weight": "ndcg", "C": 10})}
    for i, m in enumerate(PARAMS["models"]):
        samples = [sample_ranks(ranks[m], N, n, rng=np.random.default_rng([PARAMS["seed"], i, j]))
                   for j in range(PARAMS["n_repeats"])]
        for label, (method, kw) in cases.items():
            for met, lab in LABEL.items():
                vals = [estimate_metric(r, N, n, met, 10, method, **kw) for r in samples]
                assert results["ch06_mean_at10"][m][label][lab] == pytest.approx(np.mean(vals), abs=1e-8), (m, label, lab)
                assert results["ch06_std_at10"][m][label][lab] == pytest.approx(np.std(vals, ddof=1), abs=1e-8)


def test_winner_counts_are_counts(results):
    wc = results["ch06_winner_counts"]
    assert set(wc) == {f"{k}/{lab}" for k in PARAMS["ks"] for lab in LABEL.values()}
    for counts in wc.values():
        assert all(0 <= v <= PARAMS["n_repeats"] for v in counts.values())


def test_growth_errors_recorded(results):
    mae = results["ch06_growth_mae"]["50"]
    assert set(mae) == {"MLE", "MES", "BV 0.1"}
    assert all(0 <= v <= 1 for v in mae.values())
