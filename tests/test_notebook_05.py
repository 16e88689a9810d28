"""Chapter 5 through the runner at small parameters; recorded numbers checked independently
(closed forms with scipy's binomial, the sampling module, and relations the derivation implies)."""

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from itemsampling.metrics import evaluate
from itemsampling.run import run_notebook
from itemsampling.sampling import expected_sampled_metric, sampled_metric_moments

NB = Path(__file__).resolve().parents[1] / "notebooks" / "05-correcting-sampled-metrics.md"
N, n, REPS = 3706, 101, 30


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("ch05")
    params = {"dataset": "synthetic", "synthetic_users": 800, "n_repeats": REPS, "gammas": [1.0, 0.1],
              "fig4_items": 2000, "fig4_sample_size": 31, "fig4_gammas": [1.0, 0.1],
              "decoy_grid": [10, 100], "seed": 3}
    return run_notebook(NB, params, out, progress=False)["results"]


def test_exact_metrics(results):
    assert results["n_items"] == N and results["sample_size"] == n and results["n_repeats"] == REPS
    for m, R in results["global_ranks"].items():
        R = np.array(R)
        assert len(R) == 800
        ex = results["exact"][m]
        assert ex["Recall@10"] == pytest.approx(np.mean(R <= 10))
        assert ex["AP"] == pytest.approx(np.mean(1 / R))
        assert ex["AUC"] == pytest.approx(evaluate(R, "auc", None, n_items=N))


def test_sampled_column_against_the_sampling_module(results):
    for m, R in results["global_ranks"].items():
        for label, (metric, k) in {"Recall@10": ("recall", 10), "AP": ("ap", None)}.items():
            mean, sd = sampled_metric_moments(R, N, n, metric, k)
            assert results["table3_expected"]["sampled"][label][m] == pytest.approx(mean, rel=1e-10)
            # Monte Carlo mean over REPS draws within 4 standard errors
            assert abs(results["table3_mean"]["sampled"][label][m] - mean) < 4 * sd / np.sqrt(REPS)


def test_bv1_is_the_posterior_mean(results):
    # Eq. 26 with a uniform prior, from scipy's binomial pmf: x_r = sum_R P(r|R) F(R) / sum_R P(r|R)
    R_all = np.arange(1, N + 1)
    P = stats.binom.pmf(np.arange(n)[None, :], n - 1, ((R_all - 1) / (N - 1))[:, None])
    x = (P * (R_all <= 10)[:, None]).sum(0) / P.sum(0)
    for m, R in results["global_ranks"].items():
        R = np.array(R)
        expected = np.mean(stats.binom.pmf(np.arange(n)[None, :], n - 1, ((R - 1) / (N - 1))[:, None]) @ x)
        assert results["table3_expected"]["BV 1"]["Recall@10"][m] == pytest.approx(expected, rel=1e-8)
    # the illustration: corrected AP with gamma = 1, N = 2000, n = 31
    N4, n4 = 2000, 31
    R4 = np.arange(1, N4 + 1)
    P4 = stats.binom.pmf(np.arange(n4)[None, :], n4 - 1, ((R4 - 1) / (N4 - 1))[:, None])
    np.testing.assert_allclose(results["fig4_bv1_ap"], ((P4 / R4[:, None]).sum(0) / P4.sum(0))[:5], rtol=1e-8)


def test_rank_estimate_collapses_top10_metrics(results):
    # (N - 1)/(n - 1) = 37 > 10: only r = 1 maps into the top 10, where Recall@10 = NDCG@10 = 1
    re = results["table3_mean"]["rank estimate"]
    for m in results["global_ranks"]:
        assert re["Recall@10"][m] == pytest.approx(re["NDCG@10"][m], abs=1e-15)


def test_auc_is_unbiased_and_pairs_counted(results):
    for m, R in results["global_ranks"].items():
        assert results["table3_expected"]["sampled"]["AUC"][m] == pytest.approx(results["exact"][m]["AUC"], abs=1e-9)
    counts = results["table4_correct"]
    assert len(counts) == 3 * 4 * 5  # pairs x metrics x methods (sampled, RE, CLS, BV 1, BV 0.1)
    assert all(0 <= c <= REPS for c in counts.values())


def test_fig6_uncorrected_is_expected_sampled_recall(results):
    for m, R in results["global_ranks"].items():
        got = results["fig6_expected_recall"][m]["uncorrected"]
        ref = [expected_sampled_metric(R, N, d + 1, "recall", 10) for d in (10, 100)]
        np.testing.assert_allclose(got, ref, rtol=1e-10)
    assert set(results["fig6_first_correct"]) == {"uncorrected", "BV 0.1"}
