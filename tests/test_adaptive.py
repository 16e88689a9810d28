"""Adaptive item sampling (TORS Algorithm 1, Eq. 44) and the MLE with per-user sample sizes
(TORS Eq. 43, Appendix H): exact stopping probabilities, the equal-size reduction to chapter 6's
EM, monotone EM, KKT-certified CNM, a straightforward per-user EM built from scipy's pmf, recovery
of a known P(R), and refusals."""

import warnings

import numpy as np
import pytest
from scipy import stats
from scipy.special import comb

from itemsampling import estimators as est
from itemsampling.estimators.distribution import (
    ConvergenceWarning, cached_kernel, em_step, fit_rank_distribution, kernel_blocks, kernel_columns, kkt_gap,
    mixture_log_likelihood, mle_cnm_blocks, mle_em, mle_em_blocks, sampled_rank_histogram, sampled_rank_table,
    stack_blocks,
)
from itemsampling.metrics import metric_function
from itemsampling.sampling import adaptive_sample_ranks, adaptive_sampling_cost, adaptive_sizes, sample_ranks


# ------------------------------------------------------------------------------------------------
# the sampler
# ------------------------------------------------------------------------------------------------
def _joint_pmf(R, N, ladder, replacement):
    """Exact P(n_u = n_j, r_u = r | R) for Algorithm 1, cell by cell from first principles:
    the probability that the first n_{j-1} - 1 decoys all rank below the target, times the law of
    the extra decoys (the first stage has n_0 - 1 decoys and no condition)."""
    out = {}
    for j, n in enumerate(ladder):
        prev = 0 if j == 0 else ladder[j - 1]
        drawn = max(prev - 1, 0)  # decoys drawn before this stage, all below the target
        extra = n - 1 - drawn
        if replacement:
            theta = (R - 1) / (N - 1)
            reach = (1 - theta) ** drawn
            law = stats.binom(extra, theta)
        else:
            reach = comb(N - R, drawn, exact=True) / comb(N - 1, drawn, exact=True)
            law = stats.hypergeom(N - 1 - drawn, R - 1, extra)
        last = j == len(ladder) - 1
        for above in range(0 if last else 1, extra + 1):
            p = reach * law.pmf(above)
            if p > 0:
                out[(n, above + 1)] = p
    return out


@pytest.mark.parametrize("replacement", [True, False])
@pytest.mark.parametrize("R", [1, 3, 40])
def test_sampler_joint_distribution_matches_exact(R, replacement):
    N, n0, nmax, M = 400, 10, 80, 200_000
    ladder = [10, 20, 40, 80]
    r, s = adaptive_sample_ranks(np.full(M, R), N, n0, nmax, rng=11, replacement=replacement)
    pmf = _joint_pmf(R, N, ladder, replacement)
    assert sum(pmf.values()) == pytest.approx(1.0, abs=1e-12)
    cells, counts = np.unique(np.stack([s, r]), axis=1, return_counts=True)
    seen = {(int(a), int(b)): int(c) for a, b, c in zip(cells[0], cells[1], counts)}
    assert set(seen) <= set(pmf)  # no impossible (size, rank) pair ever drawn
    for cell, p in pmf.items():
        # each cell's count is Binomial(M, p): within 5 standard errors (plus 1 for tiny p)
        assert abs(seen.get(cell, 0) - M * p) <= 5 * np.sqrt(M * p * (1 - p)) + 1, (cell, seen.get(cell, 0), M * p)
    # the share of users stopping at each size, against its exact probability
    for n in ladder:
        p = sum(v for (size, _), v in pmf.items() if size == n)
        assert abs(np.mean(s == n) - p) <= 5 * np.sqrt(p * (1 - p) / M) + 1e-9


@pytest.mark.parametrize("replacement", [True, False])
def test_rank_one_users_end_at_max_size_with_rank_one(replacement):
    N = 500
    R = np.array([1] * 50 + [2, 250, 500] * 50)
    r, s = adaptive_sample_ranks(R, N, 5, 320, rng=3, replacement=replacement)
    assert np.all(s[:50] == 320) and np.all(r[:50] == 1)
    assert np.all((r >= 1) & (r <= s)) and set(np.unique(s)) <= {5, 10, 20, 40, 80, 160, 320}
    assert not np.any((r == 1) & (s < 320))  # rank 1 below the terminal size would have doubled
    assert np.all(r[R == 500] == s[R == 500])  # the last item ranks last in every set


def test_sampler_first_stage_is_sample_ranks_and_reproducible():
    R = np.random.default_rng(0).integers(1, 1001, 3000)
    a = adaptive_sample_ranks(R, 1000, 20, 20, rng=5)
    np.testing.assert_array_equal(a[0], sample_ranks(R, 1000, 20, rng=5))  # max_size = initial_size
    np.testing.assert_array_equal(a[1], 20)
    b1, b2 = adaptive_sample_ranks(R, 1000, 20, 640, rng=7), adaptive_sample_ranks(R, 1000, 20, 640, rng=7)
    np.testing.assert_array_equal(b1[0], b2[0])
    np.testing.assert_array_equal(b1[1], b2[1])


def test_sampler_refuses_bad_input():
    R = np.array([1, 2, 3])
    with pytest.raises(ValueError, match="max_size must be initial_size"):
        adaptive_sample_ranks(R, 25815, 500, 3200)
    with pytest.raises(ValueError, match="max_size"):
        adaptive_sample_ranks(R, 1000, 100, 1600)  # > N
    with pytest.raises(ValueError, match="max_size"):
        adaptive_sample_ranks(R, 1000, 100, 50)  # < initial_size
    with pytest.raises(ValueError, match="initial_size"):
        adaptive_sample_ranks(R, 1000, 1, 8)
    with pytest.raises(ValueError, match="global_ranks"):
        adaptive_sample_ranks([0, 2], 1000, 10, 40)
    with pytest.raises(ValueError, match="global_ranks"):
        adaptive_sample_ranks([5, 1001], 1000, 10, 40)
    with pytest.raises(ValueError, match="replacement"):
        adaptive_sample_ranks(R, 1000, 10, 40, replacement="no")
    with pytest.raises(ValueError, match="rng"):
        adaptive_sample_ranks(R, 1000, 10, 40, rng="seed")
    np.testing.assert_array_equal(adaptive_sizes(100, 3200, 3706), [100, 200, 400, 800, 1600, 3200])


# ------------------------------------------------------------------------------------------------
# sampling cost (TORS Eq. 44)
# ------------------------------------------------------------------------------------------------
def test_sampling_cost_hand_computed():
    # ladder 100, 200, 400; six users stop at 100, two at 200, two reach 400 (one still at rank 1)
    r = np.array([2, 5, 9, 3, 4, 7, 2, 3, 3, 1])
    s = np.array([100] * 6 + [200] * 2 + [400] * 2)
    c = adaptive_sampling_cost(r, s, 100, 400)
    np.testing.assert_array_equal(c.users, [6, 2, 2])
    np.testing.assert_array_equal(c.resolved, [6, 2, 1])
    np.testing.assert_array_equal(c.entering, [10, 4, 2])
    # C_0 = M n_0 / m_0; C_1 = 4 (200 - 100) / 2; C_2 = 2 (400 - 200) / 1
    np.testing.assert_allclose(c.cost, [10 * 100 / 6, 200.0, 400.0])
    assert c.mean_size == pytest.approx(180.0)
    assert c.suggested_max_size == 400  # growth 1.2 then 2.0, never above 3
    assert adaptive_sampling_cost(r, s, 100, 400, max_growth=1.5).suggested_max_size == 200
    none = adaptive_sampling_cost(np.array([2, 1]), np.array([100, 200]), 100, 200)
    assert np.isinf(none.cost[1]) and none.suggested_max_size == 100
    with pytest.raises(ValueError, match="rank 1 below max_size"):
        adaptive_sampling_cost(np.array([1, 2]), np.array([100, 200]), 100, 400)
    with pytest.raises(ValueError, match="ladder"):
        adaptive_sampling_cost(np.array([2, 2]), np.array([100, 300]), 100, 400)
    with pytest.raises(ValueError, match="max_growth"):
        adaptive_sampling_cost(r, s, 100, 400, max_growth=1.0)
    with pytest.raises(ValueError, match="same length"):
        adaptive_sampling_cost(r[:-1], s, 100, 400)


# ------------------------------------------------------------------------------------------------
# the sufficient statistic and the kernel columns
# ------------------------------------------------------------------------------------------------
def test_sampled_rank_table_hand_computed():
    sizes, ranks, counts = sampled_rank_table([1, 3, 3, 2, 1, 3], [10, 10, 10, 20, 20, 20])
    np.testing.assert_array_equal(sizes, [10, 10, 20, 20, 20])
    np.testing.assert_array_equal(ranks, [1, 3, 1, 2, 3])
    np.testing.assert_array_equal(counts, [1, 2, 1, 1, 1])
    sizes, ranks, counts = sampled_rank_table([2, 2, 5], 7)  # one size for every user
    np.testing.assert_array_equal(sizes, [7, 7]) and np.testing.assert_array_equal(counts, [2, 1])
    with pytest.raises(ValueError, match="user 1 has rank 12"):
        sampled_rank_table([1, 12], [10, 10 + 1])
    with pytest.raises(ValueError, match="one size per user"):
        sampled_rank_table([1, 2, 3], [10, 20])


@pytest.mark.parametrize("replacement", [True, False])
def test_kernel_columns_match_scipy(replacement):
    N, n = 300, 37
    ranks = np.array([1, 2, 19, 37])
    R = np.arange(1, N + 1)
    if replacement:
        ref = stats.binom.pmf(ranks[None, :] - 1, n - 1, ((R - 1) / (N - 1))[:, None])
    else:
        ref = stats.hypergeom.pmf(ranks[None, :] - 1, N - 1, (R - 1)[:, None], n - 1)
    got = kernel_columns(N, n, ranks, replacement)
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-30 * ref.max(axis=0).max())
    sub = ref[[4, 89]]  # entries below 1e-30 of the column maximum over the support are dropped
    np.testing.assert_allclose(kernel_columns(N, n, ranks, replacement, support=[5, 90]), sub, rtol=1e-9,
                               atol=1e-30 * sub.max())


# ------------------------------------------------------------------------------------------------
# adaptive EM and CNM
# ------------------------------------------------------------------------------------------------
def _per_user_em(r, s, N, iterations):
    """Straightforward per-user EM of TORS Appendix H (Eq. 61-62): the full N x M matrix of
    P(r_u | R; n_u) from scipy's binomial pmf, no grouping."""
    R = np.arange(1, N + 1)
    L = stats.binom.pmf(r[None, :] - 1, s[None, :] - 1, ((R - 1) / (N - 1))[:, None])
    pi = np.full(N, 1.0 / N)
    for _ in range(iterations):
        phi = pi[:, None] * L
        phi /= phi.sum(axis=0, keepdims=True)  # posterior of each user, Eq. 61
        pi = phi.mean(axis=1)  # Eq. 62
    return pi


@pytest.fixture(scope="module")
def adaptive_draw():
    N = 600
    g = np.random.default_rng(2)
    P = np.arange(1, N + 1) ** -0.9
    R = g.choice(np.arange(1, N + 1), size=3000, p=P / P.sum())
    r, s = adaptive_sample_ranks(R, N, 20, 160, rng=g)
    assert len(np.unique(s)) >= 3
    return N, r, s


def test_adaptive_em_equals_per_user_em(adaptive_draw):
    N, r, s = adaptive_draw
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit = fit_rank_distribution(r, N, s, "mle", max_iter=40)
    assert fit.iterations == 40
    np.testing.assert_allclose(fit.distribution, _per_user_em(r, s, N, 40), rtol=0, atol=1e-12)


def test_adaptive_em_with_equal_sizes_is_chapter_6_em():
    N, n = 500, 40
    R = np.random.default_rng(4).integers(1, N + 1, 2000)
    r = sample_ranks(R, N, n, rng=4)
    ref = mle_em(sampled_rank_histogram(r, n), cached_kernel(N, n, True))
    sizes, ranks, counts = sampled_rank_table(r, np.full(r.size, n))
    blk = mle_em_blocks([(kernel_columns(N, n, ranks), counts)])
    assert blk.iterations == ref.iterations
    np.testing.assert_allclose(blk.distribution, ref.distribution, rtol=0, atol=1e-12)
    # an all-equal size array takes the fixed-size path: bit-identical to the int call
    a = est.estimate_rank_distribution(r, N, np.full(r.size, n), "mle")
    np.testing.assert_array_equal(a, est.estimate_rank_distribution(r, N, n, "mle"))


def test_em_never_decreases_likelihood_and_cnm_is_kkt_certified(adaptive_draw):
    N, r, s = adaptive_draw
    K, c = stack_blocks(kernel_blocks(N, *sampled_rank_table(r, s)))
    pi = np.full(N, 1.0 / N)
    lls = [mixture_log_likelihood(pi, c, K)]
    for _ in range(60):
        pi = em_step(pi, c, K)
        lls.append(mixture_log_likelihood(pi, c, K))
    assert np.all(np.diff(lls) >= -1e-13)
    assert lls[-1] > lls[0]
    cnm = fit_rank_distribution(r, N, s, "mle", solver="cnm")
    assert cnm.stopped_by_tol and cnm.gap <= 1e-9
    # the certificate recomputed from an independent kernel (scipy pmf, one column per user)
    R = np.arange(1, N + 1)
    L = stats.binom.pmf(r[None, :] - 1, s[None, :] - 1, ((R - 1) / (N - 1))[:, None])
    q = cnm.distribution @ L
    g = L @ (1.0 / q) / r.size
    assert g.max() - 1 <= 1e-8
    assert kkt_gap(cnm.distribution, c, K) <= 1e-9
    # the exact MLE is at least as likely as any EM iterate
    assert mixture_log_likelihood(cnm.distribution, c, K) >= lls[-1] - 1e-12
    assert mle_cnm_blocks(kernel_blocks(N, *sampled_rank_table(r, s))).gap <= 1e-9


def test_adaptive_mle_recovers_recall_better_than_fixed_size():
    """Ranks drawn from a known P(R): adaptive MLE recovers Recall@K, K = 1..50, within a tolerance
    4 / sqrt(M) that shrinks as M grows, and better than fixed-size MLE at the initial size."""
    N, K = 2000, np.arange(1, 51)
    P = np.arange(1, N + 1) ** -0.8
    P /= P.sum()
    truth = np.cumsum(P)[:50]
    g = np.random.default_rng(0)
    errors = {}
    for M in (1000, 16000):
        ea, ef = [], []
        for _ in range(4):
            R = g.choice(np.arange(1, N + 1), size=M, p=P)
            r, s = adaptive_sample_ranks(R, N, 50, 800, g)
            a = est.estimate_metric(r, N, s, "recall", K, "mle")
            f = est.estimate_metric(sample_ranks(R, N, 50, g), N, 50, "recall", K, "mle")
            ea.append(np.mean(np.abs(a - truth) / truth))
            ef.append(np.mean(np.abs(f - truth) / truth))
        errors[M] = (np.mean(ea), np.mean(ef))
        assert np.mean(ea) < 4 / np.sqrt(M), (M, errors[M])
    assert errors[16000][0] < errors[16000][1]
    assert errors[16000][0] < errors[1000][0]


# ------------------------------------------------------------------------------------------------
# estimate_metric routing
# ------------------------------------------------------------------------------------------------
def test_sampled_metric_with_per_user_sizes(adaptive_draw):
    N, r, s = adaptive_draw
    for metric, k in (("recall", 5), ("ndcg", 10), ("auc", None)):
        direct = np.mean([float(metric_function(metric, k, int(n))(np.array([x]))[0]) for x, n in zip(r, s)])
        assert est.estimate_metric(r, N, s, metric, k, "sampled") == pytest.approx(direct, rel=1e-12)


def test_estimate_metric_mle_with_per_user_sizes(adaptive_draw):
    N, r, s = adaptive_draw
    P = est.estimate_rank_distribution(r, N, s, "mle", solver="cnm")
    got = est.estimate_metric(r, N, s, "ndcg", [5, 10], "mle", solver="cnm")
    R = np.arange(1, N + 1)
    np.testing.assert_allclose(got, [P @ ((R <= k) / np.log2(R + 1)) for k in (5, 10)], rtol=1e-12)
    both = est.estimate_metrics(r, N, s, ["recall", "ndcg"], 10, ["mle", "sampled"], mle={"solver": "cnm"})
    assert both["mle"]["ndcg"] == pytest.approx(got[1], rel=1e-12)


def test_other_methods_refuse_unequal_sizes(adaptive_draw):
    N, r, s = adaptive_draw
    for method in ("bv", "mn", "rank_estimate", "mes", "wmle", "bv_mle", "mn_mle"):
        with pytest.raises(ValueError, match="per-user sample sizes.*'sampled' or 'mle'"):
            est.estimate_metric(r, N, s, "recall", 10, method)
    with pytest.raises(ValueError, match="per-user sample sizes.*'mle'"):
        est.estimate_rank_distribution(r, N, s, "mes")
    with pytest.raises(ValueError, match="user .* has rank"):
        est.estimate_metric(np.array([5, 1]), N, np.array([4, 8]), "recall", 1, "mle")
    with pytest.raises(ValueError, match="one size per user"):
        est.estimate_metric(r, N, s[:-1], "recall", 10, "mle")
    with pytest.raises(ValueError, match="sample_size"):
        est.estimate_metric(r, N, np.where(s == s.max(), N + 1, s), "recall", 10, "mle")
    with pytest.raises(ValueError, match="unknown parameter"):
        est.estimate_rank_distribution(r, N, s, "mle", eta=0.1)
