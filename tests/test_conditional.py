"""Interval targets of estimate_metric: "population" (user bootstrap) and "test-users"
(parametric bootstrap of the item sampling, estimators/conditional.py)."""

import numpy as np
import pytest

from itemsampling.estimators import estimate_metric, estimate_metrics, estimate_rank_distribution
from itemsampling.estimators.conditional import (
    TARGETS, _user_metric_values, adaptive_ladder, check_target, conditional_metrics, posterior_metric_moments,
    rank_posterior,
)
from itemsampling.estimators.grid import pool_metric_matrix
from itemsampling.kernel import kernel
from itemsampling.sampling import adaptive_sample_ranks, sample_ranks


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
    with pytest.raises(ValueError, match=r"needs the sizes of adaptive sampling \(n0 \* 2\*\*j: 10, 20, 40, ...\), "
                                         "got size 12"):
        estimate_metric(r, 50, np.array([10, 10, 12, 12]), "recall", 20, "mle", ci=0.95, target="test-users")


def test_adaptive_ladder_is_read_from_the_sizes_and_checked():
    assert adaptive_ladder(np.array([10, 40, 20, 10]), np.array([3, 1, 5, 4])).tolist() == [10, 20, 40]
    with pytest.raises(ValueError, match="got size 30"):
        adaptive_ladder(np.array([10, 30, 20, 10]), np.array([3, 2, 5, 4]))
    with pytest.raises(ValueError, match="user 1 ranks first in a set of 20 < 40"):
        adaptive_ladder(np.array([10, 20, 40]), np.array([3, 1, 1]))


def test_user_metric_values_are_the_pool_metric_matrix_read_per_user():
    """Each user's F_{N_u}(R_u(R)) computed elementwise equals the pool matrix's entry (every metric,
    AUC's pool-dependent formula included)."""
    g = np.random.default_rng(12)
    N, pools = 500, np.array([500, 420, 77, 300])
    R = g.integers(1, N + 1, (3, 40))
    users = g.integers(0, pools.size, 40)
    for metrics, ks in ((["recall", "ndcg", "precision"], [5, None]), (["auc"], [None])):
        got = _user_metric_values(metrics, ks, N, R, pools[users][None, :])
        F = pool_metric_matrix(metrics, ks, N, pools)  # (N, m, k, G)
        np.testing.assert_allclose(got, F[R - 1, :, :, users[None, :]], rtol=0, atol=1e-15)
        assert np.ptp(got) > 0


@pytest.mark.parametrize("with_pools", [False, True])
def test_adaptive_test_users_intervals_cover_by_an_exact_binomial_test(with_pools):
    """Adaptive sampling (TORS Algorithm 1), the interval policy's identified rows for the test users'
    own metric (the parametric bootstrap rerunning the design on R*, widened by the bias margin):
    coverage of T = (1/M) sum_u F(R_u) over simulated studies, with and without per-user pools, is
    not below 95 % by an exact binomial test (one-sided, alpha = 0.01, per row)."""
    from scipy import stats

    N, M, studies = 1000, 400, 30
    R = np.arange(1, N + 1)
    P = R ** -0.7
    P /= P.sum()
    g = np.random.default_rng(13 + with_pools)
    cover = np.zeros((2, 2), dtype=int)
    for _ in range(studies):
        pools = N - g.integers(0, 100, M) if with_pools else N
        Ru = np.minimum(g.choice(R, M, p=P), pools)
        r, n = adaptive_sample_ranks(Ru, N, 10, 320, rng=g)
        e = estimate_metrics(r, pools, n, ["recall", "ndcg"], [10, 50], ["mle"], ci=0.95, n_boot=40, rng=g,
                             target="test-users")["mle"]
        for i, m in enumerate(("recall", "ndcg")):
            assert list(e[m].interval) == ["bootstrap+margin"] * 2 and all(e[m].identified)
            for j, K in enumerate((10, 50)):
                T = np.mean((Ru <= K) * (1.0 if m == "recall" else 1 / np.log2(Ru + 1)))
                cover[i, j] += e[m].low[j] <= T <= e[m].high[j]
    for c in cover.ravel():
        assert stats.binomtest(int(c), studies, 0.95, alternative="less").pvalue > 0.01, cover


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


def test_a_user_sample_gets_an_interval_for_every_test_user():
    """test_users = M_test > M: the interval is for all M_test test users' metric. Full ranking of a user
    sample (no item sampling): z s sqrt((1 - f)/M) about the plain mean, checked by hand, and its coverage
    of the M_test users' Recall@10 by an exact binomial test (two-sided, 400 studies); without test_users
    the same data give width 0 (the M users' metric is known). Refusals name the argument."""
    from scipy import stats

    N, Mt, m, studies = 1000, 2000, 500, 400
    R = np.arange(1, N + 1)
    P = R ** -0.7
    P /= P.sum()
    g = np.random.default_rng(21)
    cover = 0
    for s in range(studies):
        Ru = g.choice(R, Mt, p=P)
        sub = Ru[g.choice(Mt, m, replace=False)]
        e = estimate_metric(sub, N, N, "recall", 10, "mle", ci=0.95, target="test-users", test_users=Mt)
        cover += e.low <= np.mean(Ru <= 10) <= e.high
        if s == 0:
            F = (sub <= 10).astype(float)
            half = stats.norm.ppf(0.975) * np.std(F, ddof=1) * np.sqrt((1 - m / Mt) / m)
            assert (e.estimate - e.low, e.high - e.estimate) == (pytest.approx(half), pytest.approx(half))
            own = estimate_metric(sub, N, N, "recall", 10, "mle", ci=0.95, target="test-users")
            assert own.low == own.high == own.estimate == pytest.approx(F.mean())
            same = estimate_metric(sub, N, N, "recall", 10, "mle", ci=0.95, target="test-users", test_users=m)
            assert same.low == same.high
    assert stats.binomtest(cover, studies, 0.95).pvalue > 0.01, cover / studies
    for bad in (m - 1, 0, 2.5, "2000", True):
        with pytest.raises(ValueError, match="test_users"):
            estimate_metric(sub, N, N, "recall", 10, "mle", ci=0.95, target="test-users", test_users=bad)


def test_user_sampling_half_widths_under_the_fit_and_bounds_widened():
    """Item-sampled user sample: s^2 = P F^2 - (P F)^2 under the data's MLE (recall: p(1 - p) of the MLE's
    recall), added in quadrature; below the rule the identification bounds widen by it at both ends."""
    from itemsampling.estimators import user_sampling_half_widths

    g = np.random.default_rng(22)
    N, n, Mt = 500, 50, 3000
    R = np.arange(1, N + 1)
    P = R ** -0.7
    P /= P.sum()
    r = sample_ranks(g.choice(R, 600, p=P), N, n, rng=g)
    u = user_sampling_half_widths(r, N, n, ["recall"], [25], 0.95, Mt)["recall"]
    p = float(estimate_metric(r, N, n, "recall", 25, "mle"))
    assert u[0] == pytest.approx(1.959964 * np.sqrt(p * (1 - p) * (1 - 600 / Mt) / 600), rel=1e-3)
    own = estimate_metric(r, N, n, "recall", [5, 25], "mle", ci=0.95, n_boot=30, rng=1, target="test-users")
    all_ = estimate_metric(r, N, n, "recall", [5, 25], "mle", ci=0.95, n_boot=30, rng=1, target="test-users",
                           test_users=Mt)
    assert list(all_.interval) == ["bounds", "bootstrap+margin"]
    u5 = user_sampling_half_widths(r, N, n, ["recall"], [5], 0.95, Mt)["recall"][0]
    assert all_.low[0] == pytest.approx(max(own.low[0] - u5, 0.0)) and all_.high[0] == pytest.approx(own.high[0] + u5)
    assert all_.high[1] - all_.low[1] > own.high[1] - own.low[1]


def test_user_sampling_half_widths_count_the_users_not_their_rows():
    """Several rows (test items) per user: the users are the sampled units and the metric is a ratio of user
    totals. Full ranking: the ratio estimator's s^2 checked by hand on five users; the coverage of all test
    users' Recall@10 (the mean over their rows) by an exact binomial test, 400 studies, with rows of one
    user strongly correlated (where treating the rows as users undercovers, also tested). Item-sampled:
    the cluster formula with one row per user equals P F^2 - (P F)^2 under the MLE to O(1/M), and the rows'
    posterior moments equal Bayes' rule done by hand."""
    from scipy import stats

    from itemsampling.estimators import user_sampling_half_widths
    from itemsampling.estimators.policy import _cluster_variance, _row_posterior_moments

    # five users, 1-3 rows each, Recall@2 of a full ranking (N = n = 6): T_u and k_u by hand
    r = np.array([1, 3, 2, 2, 5, 1, 6, 1, 1])
    users = np.array([7, 7, 8, 8, 8, 9, 10, 11, 11])
    F = (r <= 2).astype(float)
    T, k = np.array([1.0, 2.0, 1.0, 0.0, 2.0]), np.array([2.0, 3.0, 1.0, 1.0, 2.0])
    mu = T.sum() / k.sum()
    s2 = np.sum((T - mu * k) ** 2) / 4 / k.mean() ** 2
    assert _cluster_variance(F, np.zeros_like(F), np.unique(users, return_inverse=True)[1]) == pytest.approx(s2)
    u = user_sampling_half_widths(r, 6, 6, ["recall"], [2], 0.95, 20, users=users)["recall"][0]
    assert u == pytest.approx(stats.norm.ppf(0.975) * np.sqrt(s2 * (1 - 5 / 20) / 5))
    # one row per user (ids all distinct): the formula of the rows
    one = user_sampling_half_widths(r, 6, 6, ["recall"], [2], 0.95, 40, users=np.arange(9))["recall"][0]
    assert one == pytest.approx(stats.norm.ppf(0.975) * np.std(F, ddof=1) * np.sqrt((1 - 9 / 40) / 9))

    # coverage with correlated rows: each user's 4 rows share its rank level
    N, Mt, m, rows, studies = 1000, 2000, 300, 4, 400
    g = np.random.default_rng(31)
    cover = cover_rows = 0
    for _ in range(studies):
        level = g.beta(0.4, 3.0, Mt)
        R = np.clip(1 + (N * np.clip(level[:, None] + 0.02 * g.standard_normal((Mt, rows)), 0, 1)).astype(int), 1, N)
        truth = np.mean(R <= 10)
        pick = g.choice(Mt, m, replace=False)
        sub, ids = R[pick].reshape(-1), np.repeat(pick, rows)
        est = np.mean(sub <= 10)
        h = user_sampling_half_widths(sub, N, N, ["recall"], [10], 0.95, Mt, users=ids)["recall"][0]
        cover += abs(est - truth) <= h
        h_rows = user_sampling_half_widths(sub, N, N, ["recall"], [10], 0.95, Mt * rows)["recall"][0]
        cover_rows += abs(est - truth) <= h_rows
    assert stats.binomtest(cover, studies, 0.95).pvalue > 0.01, cover / studies
    assert stats.binomtest(cover_rows, studies, 0.95, alternative="less").pvalue < 0.01, cover_rows / studies

    # item-sampled: posterior moments by hand, and the one-row case against P F^2 - (P F)^2
    N, n = 300, 30
    R = np.arange(1, N + 1)
    P = R ** -0.7
    P /= P.sum()
    rs = sample_ranks(g.choice(R, 800, p=P), N, n, rng=g)
    Fk = (R <= 20).astype(float)
    mean, var = _row_posterior_moments(P, Fk, N, n, rs[:5], True)
    for i in range(5):
        lik = stats.binom.pmf(rs[i] - 1, n - 1, (R - 1) / (N - 1))
        post = P * lik / np.sum(P * lik)
        assert mean[i] == pytest.approx(post @ Fk, rel=1e-9)
        assert var[i] == pytest.approx(post @ Fk ** 2 - (post @ Fk) ** 2, rel=1e-9)
    Phat = np.asarray(estimate_rank_distribution(rs, N, n, "mle"))
    Phat = Phat / Phat.sum()
    mean, var = _row_posterior_moments(Phat, Fk, N, n, rs, True)
    assert _cluster_variance(mean, var, np.arange(rs.size)) == pytest.approx(
        Phat @ Fk ** 2 - (Phat @ Fk) ** 2, rel=5e-3)
