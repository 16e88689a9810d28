"""Chapter 7 through the runner at small parameters; recorded numbers checked against dense
direct solves of Krichene & Rendle Eq. 25 and TORS Eq. 42 built from scipy's binomial pmf."""

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from itemsampling.estimators import estimate_rank_distribution
from itemsampling.metrics import metric_curve
from itemsampling.run import run_notebook

NB = Path(__file__).resolve().parents[1] / "notebooks" / "07-bv-vs-mn.md"
N, n, USERS, REPS, MAXK = 400, 40, 1200, 3, 20
GRID = [100, 10_000]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("ch07")
    params = {"dataset": "synthetic", "synthetic_items": N, "synthetic_users": USERS, "sample_size": n,
              "n_repeats": REPS, "max_k": MAXK, "winner_ks": [5, 10], "user_grid": GRID, "seed": 5}
    return run_notebook(NB, params, out, progress=False)["results"]


def _kernel():
    R = np.arange(1, N + 1)
    return stats.binom.pmf(np.arange(n)[None, :], n - 1, ((R - 1) / (N - 1))[:, None])


def test_bv_uniform_first_repeat_against_dense_solve(results):
    K = _kernel()
    p = np.full(N, 1 / N)
    ks = np.arange(1, MAXK + 1)
    F = (np.arange(1, N + 1)[:, None] <= ks[None, :]).astype(float)
    g = 0.01
    G = (1 - g) * K.T @ (p[:, None] * K) + g * np.diag(K.T @ p)  # Krichene & Rendle Eq. 25
    X = np.linalg.solve(G, K.T @ (p[:, None] * F))
    for m, r in results["ch07_sampled_ranks_first_repeat"].items():
        r = np.array(r)
        np.testing.assert_allclose(results["ch07_estimates_recall_first_repeat"][m]["BV"], X[r - 1].mean(0),
                                   rtol=1e-7, atol=1e-10)


def test_mn_mes_first_repeat_against_dense_solve(results):
    K = _kernel()
    ks = np.arange(1, MAXK + 1)
    F = (np.arange(1, N + 1)[:, None] <= ks[None, :]).astype(float)
    for m, r in results["ch07_sampled_ranks_first_repeat"].items():
        r = np.array(r)
        P = estimate_rank_distribution(r, N, n, "mes", eta=0.01)
        M = r.size
        G = K.T @ (P[:, None] * K) - K.T @ K / M + np.diag(K.sum(0)) / M  # TORS Eq. 42
        X = np.linalg.solve(G, K.T @ (P[:, None] * F))
        np.testing.assert_allclose(results["ch07_estimates_recall_first_repeat"][m]["MN_MES"], X[r - 1].mean(0),
                                   rtol=1e-6, atol=1e-9)
        mes = results["ch07_estimates_recall_first_repeat"][m]["MES"]
        np.testing.assert_allclose(mes, np.cumsum(P)[:MAXK], rtol=1e-8)


def test_relative_errors_and_truth(results):
    # TORS Sec. 8.3: per repeat, the mean over K of |estimate - truth| / truth, in percent
    for m, R in results["ch07_global_ranks"].items():
        truth = metric_curve(np.array(R), "recall", np.arange(1, MAXK + 1), n_items=N)
        keep = truth > 0
        for label in ("MES", "MLE", "BV", "MN_MES", "MN_MLE"):
            per = results["ch07_rel_error_per_repeat"][m][label]
            assert len(per) == REPS
            assert results["ch07_rel_error_mean"][m][label] == pytest.approx(np.mean(per))
            first = np.array(results["ch07_estimates_recall_first_repeat"][m][label])
            assert per[0] == pytest.approx(100 * np.mean(np.abs(first[keep] - truth[keep]) / truth[keep]), rel=1e-10)


def test_winner_and_top2_counts_recomputed(results):
    """Tables 7.6 and 7.8 recomputed from the recorded per-repeat estimates and the exact curves."""
    names = results["ch07_models"]
    ks = [5, 10]
    truth = {m: {metric: metric_curve(np.array(R), metric, np.arange(1, MAXK + 1), n_items=N)
                 for metric in ("recall", "ndcg", "ap")} for m, R in results["ch07_global_ranks"].items()}
    label = {"recall": "RECALL", "ndcg": "NDCG", "ap": "AP"}
    for metric in ("recall", "ndcg", "ap"):
        for i, k in enumerate(ks):
            exact = {m: truth[m][metric][k - 1] for m in names}
            best = max(names, key=exact.get)
            top2 = set(sorted(names, key=lambda m: -exact[m])[:2])
            wins = results["ch07_winner_counts"][f"{k}|{label[metric]}"]
            tops = results["ch07_top2_counts"][f"{k}|{label[metric]}"]
            for method in wins:
                est = np.array([np.array(results["ch07_estimates_at_winner_ks"][m][method][metric])[:, i] for m in names])
                assert est.shape == (len(names), REPS)
                order = np.argsort(-est, axis=0)
                assert wins[method] == sum(names[order[0, j]] == best for j in range(REPS)), (metric, k, method)
                assert tops[method] == sum({names[order[0, j]], names[order[1, j]]} == top2 for j in range(REPS))


def test_fig71_mn_uniform_equals_bv_gamma_n_over_m(results):
    # at M = 10,000 >= N the published MN with a uniform prior is BV with gamma = N / M; its exact
    # RMSE for the demo model's rank distribution, from a dense solve
    K = _kernel()
    R = np.array(results["ch07_global_ranks"][results["ch07_fig71_demo_model"]])
    P = np.bincount(R, minlength=N + 1)[1:] / R.size
    F = (np.arange(1, N + 1) <= 10).astype(float)
    M = GRID[1]
    g = N / M
    x = np.linalg.solve((1 - g) * K.T @ K / N + g * np.diag(K.sum(0)) / N, K.T @ F / N)
    mu = K @ x
    var = K @ x**2 - mu**2
    rmse = np.sqrt((P @ (mu - F)) ** 2 + P @ var / M)
    assert results["ch07_fig71_rmse"]["MN"][1] == pytest.approx(rmse, rel=1e-6)
    # BV's bias does not depend on M
    b = results["ch07_fig71_bias"]["BV 0.01"]
    assert b[0] == pytest.approx(b[1], rel=1e-12)
    # the prose quantities
    assert results["ch07_n_items"] == N and results["ch07_n_decoys"] == n - 1
    assert results["ch07_resolution"] == pytest.approx(N / (n - 1))
    assert results["ch07_inv_M"] == pytest.approx(1 / USERS)
