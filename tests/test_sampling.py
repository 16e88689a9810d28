"""Sampled ranks and the exact moments of sampled metrics: Monte Carlo vs analytic, AUC unbiasedness,
Krichene & Rendle Table 2 and closed forms (Eq. 18-19)."""

import numpy as np
import pytest
from scipy import stats

from itemsampling.metrics import evaluate
from itemsampling.sampling import (
    expected_metric_given_rank, expected_sampled_metric, hoeffding_bound, one_decoy_line, sample_ranks,
    sampled_metric_moments, shr_moments,
)

TOY = {"A": [100] * 5, "B": [40, 40, 8437, 9266, 4482], "C": [212, 2, 743, 5342, 1548]}
TABLE2 = {  # Krichene & Rendle 2020 Table 2 (99 decoys, 1000 repetitions): AUC, AP, NDCG, Recall@10
    "A": (0.990, 0.630, 0.724, 1.000),
    "B": (0.555, 0.336, 0.444, 0.400),
    "C": (0.843, 0.325, 0.460, 0.567),
}
METRICS = [("auc", None), ("ap", None), ("ndcg", None), ("recall", 10)]


@pytest.mark.parametrize("name", list(TOY))
def test_table2_within_001_of_exact_expectation(name):
    exact = [expected_sampled_metric(TOY[name], 10_000, 100, m, k) for m, k in METRICS]
    np.testing.assert_allclose(exact, TABLE2[name], atol=0.01)


@pytest.mark.parametrize("replacement", [True, False])
def test_monte_carlo_within_4_standard_errors(replacement):
    rng = np.random.default_rng(12345)
    N, n, reps = 10_000, 100, 4000
    R = np.array(TOY["C"])
    draws = np.stack([sample_ranks(R, N, n, rng, replacement) for _ in range(reps)])
    for m, k in METRICS:
        mean, sd = sampled_metric_moments(R, N, n, m, k, replacement)
        vals = np.array([evaluate(d, m, k, n_items=n) for d in draws])
        se = sd / np.sqrt(reps)
        assert abs(vals.mean() - mean) < 4 * se + 1e-12, (m, vals.mean(), mean, se)
        assert vals.std(ddof=1) == pytest.approx(sd, rel=0.1)


def test_sample_ranks_distribution_matches_kernel():
    # chi-square goodness of fit of explicit-draw ranks vs the binomial kernel, N = 50, n = 6
    rng = np.random.default_rng(0)
    R = np.full(60_000, 20)
    r = sample_ranks(R, 50, 6, rng)
    counts = np.bincount(r, minlength=7)[1:]
    expected = stats.binom.pmf(np.arange(6), 5, 19 / 49) * R.size
    assert stats.chisquare(counts, expected).pvalue > 1e-3


def test_sample_ranks_matches_explicit_decoys():
    # simulate literally: draw n-1 decoys from the N-1 other items and count those above
    rng = np.random.default_rng(7)
    N, n, R, reps = 40, 8, 13, 20_000
    decoys = rng.integers(0, N - 1, size=(reps, n - 1))  # indices into the N-1 others; first R-1 are above
    explicit = 1 + (decoys < R - 1).sum(axis=1)
    fast = sample_ranks(np.full(reps, R), N, n, rng=8)
    # two-sample comparison of the distributions
    a = np.bincount(explicit, minlength=n + 1)[1:]
    b = np.bincount(fast, minlength=n + 1)[1:]
    keep = (a + b) > 0
    assert stats.chi2_contingency(np.vstack([a[keep], b[keep]]))[1] > 1e-3


def test_sample_ranks_range_and_reproducible():
    R = np.arange(1, 1001)
    a = sample_ranks(R, 1000, 50, rng=1)
    b = sample_ranks(R, 1000, 50, rng=1)
    np.testing.assert_array_equal(a, b)
    assert a.min() >= 1 and a.max() <= 50
    assert sample_ranks([1], 1000, 50, rng=3)[0] == 1
    assert sample_ranks([1000], 1000, 50, rng=3)[0] == 50
    c = sample_ranks(R, 1000, 50, rng=1, replacement=False)
    assert c.min() >= 1 and c.max() <= 50


@pytest.mark.parametrize("replacement", [True, False])
def test_auc_is_unbiased_under_sampling(replacement):
    # Krichene & Rendle Sec. 4.4.1: E[sampled AUC] = exact AUC for every n
    rng = np.random.default_rng(2)
    N = 3000
    R = rng.integers(1, N + 1, size=200)
    exact = evaluate(R, "auc", n_items=N)
    for n in (2, 3, 10, 100, 1000, N):
        assert expected_sampled_metric(R, N, n, "auc", replacement=replacement) == pytest.approx(exact, abs=1e-10)


def test_closed_forms_recall_and_ap():
    N, n = 10_000, 100
    R = np.array([1, 2, 40, 500, 9999])
    p = (R - 1) / (N - 1)
    # Eq. 18: expected sampled Recall@k is the binomial CDF at k - 1
    ours = expected_metric_given_rank(R, N, n, "recall", k=10)
    np.testing.assert_allclose(ours, stats.binom.cdf(9, n - 1, p), atol=1e-12)
    # Eq. 19: expected sampled AP (untruncated) = (1 - (1 - p)^n) / (p n), and 1 at R = 1
    ap = expected_metric_given_rank(R, N, n, "ap")
    ref = np.where(p > 0, (1 - (1 - p) ** n) / np.where(p > 0, p * n, 1), 1.0)
    np.testing.assert_allclose(ap, ref, rtol=1e-10)


def test_one_decoy_limit_is_affine():
    # Sec. 4.4.4: with n = 2 every expected metric is affine in R with slope (F(2)-F(1))/(N-1)
    N = 1000
    R = np.arange(1, N + 1)
    for m in ("ap", "ndcg", "auc"):
        e = expected_metric_given_rank(R, N, 2, m)
        slopes = np.diff(e)
        np.testing.assert_allclose(slopes, slopes[0], atol=1e-13)
    e = expected_metric_given_rank(R, N, 2, "ap")
    assert np.diff(e)[0] == pytest.approx((0.5 - 1.0) / (N - 1))
    for m, k in (("ap", None), ("ndcg", None), ("auc", None), ("recall", 1)):
        slope, intercept = one_decoy_line(m, k, N)
        np.testing.assert_allclose(expected_metric_given_rank(R, N, 2, m, k), slope * R + intercept, atol=1e-12)
    # Recall@k, k >= 2, is constant: useless
    np.testing.assert_allclose(expected_metric_given_rank(R, N, 2, "recall", k=2), 1.0)


def test_shr_moments_poisson_binomial():
    rng = np.random.default_rng(5)
    N, n = 2000, 50
    R = rng.integers(1, N + 1, size=300)
    mean, var = shr_moments(R, N, n, ks=[1, 5, 10])
    for i, k in enumerate([1, 5, 10]):
        p = stats.binom.cdf(k - 1, n - 1, (R - 1) / (N - 1))
        assert mean[i] == pytest.approx(p.mean())
        assert var[i] == pytest.approx(np.sum(p * (1 - p)) / R.size**2)
        m2, sd = sampled_metric_moments(R, N, n, "recall", k)
        assert m2 == pytest.approx(mean[i]) and sd**2 == pytest.approx(var[i])


def test_hoeffding_tors_example():
    # TORS Sec. 3.3: M = 30,000, t = 0.01 gives about 0.005
    assert hoeffding_bound(30_000, 0.01) == pytest.approx(2 * np.exp(-6))
    assert round(hoeffding_bound(30_000, 0.01), 3) == 0.005


@pytest.mark.parametrize("call,msg", [
    (lambda: sample_ranks([1, 2], 10, 1), "sample_size"),
    (lambda: sample_ranks([1, 2], 10, 11), "sample_size"),
    (lambda: sample_ranks([0], 10, 5), "global_ranks"),
    (lambda: sample_ranks([], 10, 5), "empty"),
    (lambda: sample_ranks([1], 10, 5, rng="x"), "rng"),
    (lambda: expected_sampled_metric([1], 10, 5, "nope"), "metric"),
    (lambda: expected_sampled_metric([1], 10, 5, "recall", k=0), "k"),
    (lambda: shr_moments([1], 10, 5, ks=[6]), "k"),
    (lambda: hoeffding_bound(0, 0.1), "n_users"),
    (lambda: hoeffding_bound(10, -1), "t"),
])
def test_bad_input(call, msg):
    with pytest.raises(ValueError, match=msg):
        call()


def test_moments_stay_within_the_metric_range():
    """A kernel row summing to 1 + eps once gave Recall@3 = 1.0000000000000002 (target at R = 96 of
    395 with n = 3: every sampled rank is within the cut-off); a mean of values stays in their range."""
    mean, sd = sampled_metric_moments(np.array([96]), 395, 3, "recall", 3, True)
    assert mean == 1.0 and sd == 0.0
    mean, _ = sampled_metric_moments(np.arange(1, 396), 395, 3, "recall", 3, True)
    assert mean == 1.0
