"""Chapter 5 through the runner at small parameters; recorded numbers checked independently
(closed forms with scipy's binomial, the sampling module, and relations the derivation implies)."""

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from itemsampling import estimators as est
from itemsampling.metrics import evaluate
from itemsampling.run import run_notebook
from itemsampling.sampling import expected_sampled_metric, sampled_metric_moments

NB = Path(__file__).resolve().parents[1] / "notebooks" / "05-correcting-sampled-metrics.md"
N, n, REPS = 3706, 101, 30
GRID = [5, 20, 100, 400]
METRICS = {"Recall@10": ("recall", 10), "NDCG@10": ("ndcg", 10), "AP": ("ap", None), "AUC": ("auc", None)}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("ch05")
    # gammas in an order other than the paper's: the paper column must follow the names
    params = {"dataset": "synthetic", "synthetic_users": 800, "n_repeats": REPS, "gammas": [0.1, 1.0],
              "fig4_items": 2000, "fig4_sample_size": 31, "fig4_gammas": [1.0, 0.1],
              "decoy_grid": GRID, "seed": 3}
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
    assert len(counts) == 3 * 4 * 5  # pairs x metrics x methods (sampled, RE, CLS, BV 0.1, BV 1)
    # recount from the recorded per-repeat estimates and the exact metrics
    per = results["table3_per_repeat"]
    for key, c in counts.items():
        pair, label, name = key.split("|")
        a, b = pair.split(" vs ")
        truth = np.sign(results["exact"][a][label] - results["exact"][b][label])
        diff = np.array(per[name][label][a]) - np.array(per[name][label][b])
        assert len(diff) == REPS
        assert c == int(np.sum(np.sign(diff) == truth))


def test_table4_paper_column_follows_the_method_names(results):
    # Krichene & Rendle, Table 4, X vs Y, Recall: sampled 0, RE 31, CLS 31, BV 1: 11, BV 0.1: 93
    paper = results["table4_paper"]
    assert paper["X vs Y|Recall@10|BV 0.1"] == 93 and paper["X vs Y|Recall@10|BV 1"] == 11
    assert paper["X vs Y|Recall@10|CLS"] == 31 and paper["X vs Z|AP|BV 1"] == 61
    assert not any("BV 0.01" in key for key in paper)  # not among the chosen gammas
    # the Y vs Z rows with a missing printed cell: only the first column is shown
    assert {k for k in paper if k.startswith("Y vs Z|NDCG@10")} == {"Y vs Z|NDCG@10|sampled"}


def test_corrected_means_match_exact_moments(results):
    """Monte Carlo means over REPS draws of CLS and BV agree with the exact expectation over the
    decoy draws (corrected_moments) within 4 standard errors."""
    methods = {"CLS": ("cls", {}), "BV 0.1": ("bv", {"gamma": 0.1}), "BV 1": ("bv", {"gamma": 1.0})}
    vectors = {(name, label): est.corrected_metric(metric, k, N, n, method, **kw)
               for label, (metric, k) in METRICS.items() for name, (method, kw) in methods.items()}
    for m, R in results["global_ranks"].items():
        for label in METRICS:
            for name in methods:
                mean, sd = est.corrected_moments(R, N, vectors[(name, label)], True)
                assert results["table3_expected"][name][label][m] == pytest.approx(mean, rel=1e-9, abs=1e-15)
                got = results["table3_mean"][name][label][m]
                assert abs(got - mean) < 4 * sd / np.sqrt(REPS) + 1e-12
                assert np.mean(results["table3_per_repeat"][name][label][m]) == pytest.approx(got, rel=1e-12)


def _first_correct(curves, exact, names):
    """Smallest grid value from which on the order of `names` by `curves` equals the exact order."""
    truth = tuple(sorted(names, key=lambda m: -exact[m]))
    ok = [tuple(sorted(names, key=lambda m: -curves[m][i])) == truth for i in range(len(GRID))]
    return next((GRID[i] for i in range(len(GRID)) if all(ok[i:])), -1)


def test_fig6_uncorrected_is_expected_sampled_recall(results):
    assert results["fig6_grid"] == GRID
    for m, R in results["global_ranks"].items():
        got = results["fig6_expected_recall"][m]["uncorrected"]
        ref = [expected_sampled_metric(R, N, d + 1, "recall", 10) for d in GRID]
        np.testing.assert_allclose(got, ref, rtol=1e-10)
    assert set(results["fig6_first_correct"]) == {"uncorrected", "BV 0.1"}


def test_fig6_first_correct_recomputed(results):
    ranks = {m: np.array(R) for m, R in results["global_ranks"].items()}
    exact = {m: np.mean(R <= 10) for m, R in ranks.items()}
    unc, bv = {}, {}
    for m, R in ranks.items():
        unc[m] = [expected_sampled_metric(R, N, d + 1, "recall", 10) for d in GRID]
        bv[m] = []
        for d in GRID:  # E[x_r | R] from scipy's binomial pmf, averaged over the users
            x = est.corrected_metric("recall", 10, N, d + 1, "bv", gamma=0.1)
            P = stats.binom.pmf(np.arange(d + 1)[None, :], d, ((R - 1) / (N - 1))[:, None])
            bv[m].append(float(np.mean(P @ x)))
        np.testing.assert_allclose(results["fig6_expected_recall"][m]["BV 0.1"], bv[m], rtol=1e-8)
    models = list(ranks)
    assert results["fig6_first_correct"]["uncorrected"] == _first_correct(unc, exact, models)
    assert results["fig6_first_correct"]["BV 0.1"] == _first_correct(bv, exact, models)
    assert results["ch05_first_correct_uncorrected"] == _first_correct(unc, exact, models)
    assert results["ch05_first_correct_bv"] == _first_correct(bv, exact, models)
    assert results["fig6_first_correct_pair"]["BV 0.1"] == _first_correct(bv, exact, ["X", "Y"])
    assert results["fig6_first_correct_pair"]["uncorrected"] == _first_correct(unc, exact, ["X", "Y"])
