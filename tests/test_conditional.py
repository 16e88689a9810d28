"""Interval targets of estimate_metric: "population" (user bootstrap) and "test-users"
(parametric bootstrap of the item sampling, estimators/conditional.py)."""

import numpy as np
import pytest

from itemsampling.estimators import estimate_metric, estimate_metrics, estimate_rank_distribution
from itemsampling.estimators.conditional import (
    TARGETS, check_target, conditional_metrics, posterior_metric_moments, rank_posterior,
)
from itemsampling.kernel import kernel
from itemsampling.sampling import sample_ranks


def _population(N, a=0.7):
    R = np.arange(1, N + 1)
    P = R ** -a
    return R, P / P.sum()


def test_target_is_validated():
    r = np.array([1, 2, 3, 5])
    for bad in ("users", "", None, 1, "Population"):
        with pytest.raises(ValueError, match=r"target must be one of \('population', 'test-users'\)"):
            estimate_metric(r, 50, 10, "recall", 5, "mle", ci=0.95, target=bad)
    with pytest.raises(ValueError, match="target must be one of"):
        estimate_metrics(r, 50, 10, ["recall"], 5, ["mle"], ci=0.95, target="all")
    assert TARGETS == ("population", "test-users") and check_target("test-users") == "test-users"
    with pytest.raises(ValueError, match="one sample_size for every user"):
        estimate_metric(r, 50, np.array([10, 10, 12, 12]), "recall", 5, "mle", ci=0.95, target="test-users")


def test_posterior_is_bayes_rule_and_its_mean_is_the_em_estimate():
    N, n = 60, 10
    g = np.random.default_rng(1)
    R, P = _population(N)
    r = sample_ranks(g.choice(R, 400, p=P), N, n, rng=g)
    post = rank_posterior(P, N, np.array([n, n]), np.array([1, 4]))
    K = kernel(N, n)
    for j, rr in enumerate((1, 4)):  # Bayes' rule written out
        np.testing.assert_allclose(post[:, j], P * K[:, rr - 1] / np.sum(P * K[:, rr - 1]), rtol=1e-10)
    # at the EM fixed point the posteriors average to the prior, so E[T | r] is the MLE estimate
    Ph = estimate_rank_distribution(r, N, n, "mle", tol=1e-11, max_iter=100_000)
    mean, var = posterior_metric_moments(r, N, n, Ph, ["recall", "ndcg"], [5, 20])
    for i, m in enumerate(("recall", "ndcg")):
        for j, k in enumerate((5, 20)):
            F = (R <= k) * (1.0 if m == "recall" else 1 / np.log2(R + 1))
            assert mean[i, j] == pytest.approx(float(Ph @ F), rel=1e-3)
    assert np.all(var > 0) and np.all(var < 0.25 / r.size)


def test_every_item_ranked_leaves_no_item_sampling_uncertainty():
    """n = N without replacement: the sampled rank is the global rank, the test-users interval is
    the exact metric with width 0, while the population interval keeps the between-user spread."""
    N = 80
    g = np.random.default_rng(2)
    R, P = _population(N)
    Ru = g.choice(R, 300, p=P)
    r = sample_ranks(Ru, N, N, rng=g, replacement=False)
    np.testing.assert_array_equal(r, Ru)
    t = estimate_metric(r, N, N, "recall", 10, "mle", ci=0.95, n_boot=30, rng=3, target="test-users",
                        replacement=False)
    p = estimate_metric(r, N, N, "recall", 10, "mle", ci=0.95, n_boot=30, rng=3, replacement=False)
    exact = float(np.mean(Ru <= 10))
    assert t.low == pytest.approx(exact, abs=1e-3) and t.high == pytest.approx(exact, abs=1e-3)
    assert p.high - p.low > 0.05  # about 2 * 1.96 * sqrt(T(1-T)/M)


def test_coverage_of_both_targets():
    """Each interval against its own truth on simulated studies (users drawn from a known P):
    "population" must cover the population Recall@K, "test-users" the test users' own Recall@K,
    each within 3 Monte Carlo standard errors of 95%; and with n close to N the test-users
    interval (decoys without replacement) is the narrower one (no between-user variance), so the test cannot pass by making
    both intervals wide."""
    N, n, M, K, studies = 100, 90, 300, 10, 40
    R, P = _population(N)
    pop_truth = float(P[:K].sum())
    g = np.random.default_rng(4)
    cov = {"population": 0, "test-users": 0}
    width = {"population": [], "test-users": []}
    for _ in range(studies):
        Ru = g.choice(R, M, p=P)
        r = sample_ranks(Ru, N, n, rng=g, replacement=False)
        truth = {"population": pop_truth, "test-users": float(np.mean(Ru <= K))}
        for target in cov:
            e = estimate_metric(r, N, n, "recall", K, "mle", ci=0.95, n_boot=40, rng=g, target=target,
                                replacement=False)
            cov[target] += e.low <= truth[target] <= e.high
            width[target].append(e.high - e.low)
    mc = 3 * np.sqrt(0.95 * 0.05 / studies)
    for target, c in cov.items():
        assert abs(c / studies - 0.95) <= mc, (target, c / studies)
    assert np.mean(width["test-users"]) < 0.75 * np.mean(width["population"])


def test_conditional_metrics_shape_and_reproducibility():
    N, n = 200, 50
    g = np.random.default_rng(5)
    R, P = _population(N)
    r = sample_ranks(g.choice(R, 200, p=P), N, n, rng=g)
    a = conditional_metrics(r, N, n, ["recall", "ndcg"], [5, 10], ["mle", "bv", "sampled"], n_boot=20, rng=7,
                            gamma=0.1)
    b = estimate_metrics(r, N, n, ["recall", "ndcg"], [5, 10], ["mle", "bv", "sampled"], ci=0.95, n_boot=20,
                         rng=7, target="test-users", gamma=0.1, interval="bootstrap")
    point = estimate_metrics(r, N, n, ["recall", "ndcg"], [5, 10], ["mle", "bv", "sampled"], gamma=0.1)
    for meth in ("mle", "bv", "sampled"):
        for m in ("recall", "ndcg"):
            np.testing.assert_array_equal(a[meth][m].low, b[meth][m].low)
            np.testing.assert_allclose(a[meth][m].estimate, point[meth][m])
            assert np.all(a[meth][m].low <= a[meth][m].estimate) and np.all(a[meth][m].estimate <= a[meth][m].high)
            assert a[meth][m].n_boot == 20


def test_default_target_is_the_population_bootstrap():
    from itemsampling.estimators.bootstrap import bootstrap_metric

    g = np.random.default_rng(6)
    r = g.integers(1, 21, 150)
    default = estimate_metric(r, 300, 20, "ndcg", 10, "bv", ci=0.9, n_boot=30, rng=8, gamma=0.1, interval="bootstrap")
    boot = bootstrap_metric(r, 300, 20, "ndcg", 10, "bv", ci=0.9, n_boot=30, rng=8, gamma=0.1)
    assert (default.low, default.high) == (boot.low, boot.high)
    # without ci the target changes nothing but is still validated
    assert estimate_metric(r, 300, 20, "ndcg", 10, "bv", target="test-users", gamma=0.1) == default.estimate


def test_joint_call_equals_single_calls_for_every_method():
    """Several metrics and cut-offs in one call give each (metric, k) the interval of its own
    call: the sampled metric's replicate table was once laid out (metric, k, rank) but read as
    (rank, metric, k), mixing metrics with ranks."""
    N, n = 80, 12
    g = np.random.default_rng(4)
    R, P = _population(N)
    r = sample_ranks(g.choice(R, 300, p=P), N, n, rng=g)
    joint = conditional_metrics(r, N, n, ["recall", "ndcg"], [3, 6], ["sampled", "mle"], ci=0.9, n_boot=30, rng=2)
    for meth in ("sampled", "mle"):
        for metric in ("recall", "ndcg"):
            one = conditional_metrics(r, N, n, [metric], [3, 6], [meth], ci=0.9, n_boot=30, rng=2)[meth][metric]
            both = joint[meth][metric]
            np.testing.assert_array_equal(both.estimate, one.estimate)
            np.testing.assert_array_equal(both.low, one.low)
            np.testing.assert_array_equal(both.high, one.high)
    s = joint["sampled"]["recall"]  # the sampled metric's values, not another metric's
    assert np.all((s.low <= s.estimate) & (s.estimate <= s.high))
    assert np.all(np.diff(s.estimate) >= 0)  # Recall@3 <= Recall@6


def test_options_go_to_the_methods_that_use_them():
    """gamma goes to BV_MLE and eta to MES in one call, as in the population bootstrap."""
    N, n = 80, 12
    g = np.random.default_rng(5)
    R, P = _population(N)
    r = sample_ranks(g.choice(R, 300, p=P), N, n, rng=g)
    out = conditional_metrics(r, N, n, ["recall"], 5, ["mes", "bv_mle"], ci=0.9, n_boot=20, rng=1, gamma=0.1,
                              eta=0.01)
    alone = conditional_metrics(r, N, n, ["recall"], 5, ["bv_mle"], ci=0.9, n_boot=20, rng=1, gamma=0.1)
    assert out["bv_mle"]["recall"].estimate == pytest.approx(alone["bv_mle"]["recall"].estimate, rel=1e-12)
    assert out["mes"]["recall"].estimate == pytest.approx(
        estimate_metric(r, N, n, "recall", 5, "mes", eta=0.01), rel=1e-12)
