"""Chapter 10 (Ihemelandu & Ekstrand 2023) at small parameters, its recorded numbers checked against
independent computations."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import rankdata

from itemsampling.candidates import item_popularity, make_recommender, split_holdout, target_ranks
from itemsampling.data import DATASETS, gini, item_counts, leave_last_out, load_simulation, simulate
from itemsampling.estimators import estimate_metric
from itemsampling.metrics import evaluate
from itemsampling.run import run_notebook

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "10-candidate-sets.md"
PARAMS = {
    "dataset": "sim-ml100k",
    "table1_datasets": ["sim-ml100k"],
    "models": ["random", "popular", "itemknn"],
    "decoy_sizes": [10, 50, 5000],
    "figure2_sizes": [10, 50],
    "truth_models": ["popular", "oracle"],
    "truth_decoys": 50,
    "truth_k": 20,
    "truth_repeats": 1,
    "kernel_models": ["popular"],
    "kernel_sample_size": 50,
    "sweep_zipfs": [0.0, 1.0],
    "sweep_models": ["popular", "itemknn"],
    "sweep_decoys": 50,
    "seed": 4,
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_notebook(NOTEBOOK, PARAMS, out=tmp_path_factory.mktemp("ch10"), progress=False)["results"]


@pytest.fixture(scope="module")
def split():
    """The split of decoy_experiment: the first of four streams spawned from the seed."""
    sim = load_simulation(PARAMS["dataset"])
    s_split = np.random.SeedSequence(PARAMS["seed"]).spawn(4)[0]
    return split_holdout(sim.observed, 0.2, rng=np.random.default_rng(s_split))


def test_table1_gini(results):
    sim = load_simulation("sim-ml100k")
    assert results["ch10_table1_gini"]["sim-ml100k"] == pytest.approx(gini(item_counts(sim.observed, 1682)), abs=1e-12)
    # against the definition as a mean absolute difference
    x = item_counts(sim.truth, 1682).astype(float)
    mad = np.abs(x[:, None] - x[None, :]).sum() / (2 * x.size ** 2 * x.mean())
    assert results["ch10_table1_gini_truth"]["sim-ml100k"] == pytest.approx(mad, rel=1e-9)
    assert results["ch10_gini_paper_ml100k"] == 0.6290


def test_oversized_decoys_skipped(results):
    assert "5000" in results["ch10_dropped"]
    assert results["ch10_sizes_kept"] == "10, 50"


def test_full_set_ndcg_by_brute_force(results, split):
    """ItemKNN's nDCG@10 on the full candidate set, from a direct per-user ranking."""
    model = make_recommender("itemknn").fit(split.train, n_items=split.n_items, n_users=split.n_users)
    S = model.score(split.users)
    vals = []
    for b, u in enumerate(split.users):
        s = S[b].copy()
        s[split.train_matrix[u].indices] = -np.inf
        top = np.argsort(-s, kind="stable")[:10]
        rel = set(split.test_matrix[u].indices)
        dcg = sum(1 / np.log2(i + 2) for i, it in enumerate(top) if it in rel)
        vals.append(dcg / sum(1 / np.log2(i + 2) for i in range(min(len(rel), 10))))
    assert results["ch10_ndcg"]["itemknn"]["full"] == pytest.approx(np.mean(vals), abs=2e-3)
    # more uniform decoys can only lower a metric in expectation: 10 decoys above 50 above full
    nd = results["ch10_ndcg"]["itemknn"]
    assert nd["uniform 10"] > nd["uniform 50"] > nd["full"]


def test_reference_popularity_score(results, split):
    pr = rankdata(item_popularity(split.train, split.n_items), method="average")
    per_user = [pr[split.test_matrix[u].indices].mean() for u in split.users]
    assert results["ch10_ref_popularity_score"] == pytest.approx(np.mean(per_user), rel=1e-12)
    ps = results["ch10_popularity_score_full"]
    assert ps["popular"] > results["ch10_ref_popularity_score"] > ps["random"]
    assert "popular" in results["ch10_prone"] and "random" not in results["ch10_prone"]


def test_truth_experiment(results):
    assert results["ch10_oracle_best_truth"] is True
    for met in ("ndcg", "rr"):
        assert results["ch10_truth_M_truth"][f"{met}/oracle"] == pytest.approx(1.0)
        for m in PARAMS["truth_models"]:
            assert results["ch10_truth_M_truth"][f"{met}/{m}"] <= results["ch10_truth_M_truth"][f"{met}/oracle"]
            for s in ("full", "uniform", "popularity"):
                assert results["ch10_truth_bias"][f"{met}/{m}/{s}"] == pytest.approx(
                    results["ch10_truth_M_obs"][f"{met}/{m}/{s}"] - results["ch10_truth_M_truth"][f"{met}/{m}"], abs=1e-12)
    assert results["ch10_truth_decoys"] == 50


def test_kernel_study_recomputed(results):
    sim = load_simulation(PARAMS["dataset"])
    seed, n, N = PARAMS["seed"], PARAMS["kernel_sample_size"], 1682
    train, test = leave_last_out(sim.observed, rng=np.random.default_rng([seed, 1]))
    model = make_recommender("popular").fit(train, n_items=N)
    for j, strat in enumerate(["uniform", "popularity"]):
        R, r = target_ranks(model, train, test, n, strat, rng=np.random.default_rng([seed, 3, 0, j]))
        row = results["ch10_kernel_table"][f"Popular/{strat}"]
        assert row["exact"] == pytest.approx(evaluate(R, "ndcg", 10), abs=1e-12)
        assert row["MLE"] == pytest.approx(estimate_metric(r, N, n, "ndcg", 10, "mle", replacement=False), abs=1e-12)
        assert row["BV 0.01"] == pytest.approx(
            estimate_metric(r, N, n, "ndcg", 10, "bv", gamma=0.01, replacement=False), abs=1e-12)
    assert results["ch10_kernel_median_abs_err_popularity"] > results["ch10_kernel_median_abs_err_uniform"]


def test_gini_sweep_values(results):
    want = sorted(gini(item_counts(simulate(dataclasses.replace(DATASETS["sim-ml100k"], zipf=z)).observed, 1682))
                  for z in PARAMS["sweep_zipfs"])
    np.testing.assert_allclose(results["ch10_sweep_gini"], want, rtol=1e-12)
    assert set(results["ch10_sweep_ratio"]) == {"full", "uniform", "popularity"}


def test_runtime_recorded(results):
    assert results["ch10_runtime_s"] > 0
    assert set(results["ch10_seconds"]) == {"decoys", "truth", "sweep"}
