"""Corrected metric functions (Krichene & Rendle 2020 Eq. 20-26; TORS Eq. 39-42): hand-computed
cases, closed forms, dense direct solves, cvxpy / stacked least squares, and refused input."""

import cvxpy as cp
import numpy as np
import pytest

from itemsampling.estimators import corrected_estimate, corrected_metric, corrected_metrics
from itemsampling.estimators import corrected as C
from itemsampling.kernel import kernel
from itemsampling.metrics import metric_function


def _F(metric, k, N):
    return metric_function(metric, k, N)(np.arange(1, N + 1))


def _prior(N, seed=0, conc=0.5):
    return np.random.default_rng(seed).dirichlet(np.full(N, conc))


def _weighted_var(z, K, W):
    """sum_{R,r} W[R, r] (z_r - E[z | R])^2 as a convex cvxpy expression."""
    N, n = K.shape
    diff = np.ones((N, 1)) @ cp.reshape(z, (1, n), order="C") - cp.reshape(K @ z, (N, 1), order="C") @ np.ones((1, n))
    return cp.sum(cp.multiply(W, cp.square(diff)))


# --- rank estimate (Eq. 20) -------------------------------------------------------------------
def test_rank_estimate_hand_computed():
    # N = 10,000, n = 101 (100 decoys): r = 1 -> R = 1, r = 2 -> 1 + 9999 // 100 = 100,
    # r = 3 -> 1 + 19998 // 100 = 200, r = 101 -> 10,000
    ap = corrected_metric("ap", None, 10_000, 101, "rank_estimate")
    assert ap[:3] == pytest.approx([1.0, 1 / 100, 1 / 200])
    assert ap[-1] == pytest.approx(1 / 10_000)
    rec = corrected_metric("recall", 10, 10_000, 101, "rank_estimate")
    assert rec[0] == 1.0 and np.all(rec[1:] == 0.0)
    # with 9 decoys among N = 10: the rank estimate is the rank itself
    np.testing.assert_array_equal(corrected_metric("ndcg", 5, 10, 10, "rank_estimate"), _F("ndcg", 5, 10))
    auc = corrected_metric("auc", None, 1000, 11, "rank_estimate")
    r = np.arange(1, 12)
    np.testing.assert_allclose(auc, (1000 - (1 + (999 * (r - 1)) // 10)) / 999)


# --- BV (Eq. 24-26) ---------------------------------------------------------------------------
@pytest.mark.parametrize("replacement", [True, False])
@pytest.mark.parametrize("uniform", [True, False])
def test_bv_gamma_one_is_posterior_mean(replacement, uniform):
    N, n = 300, 12
    p = np.full(N, 1 / N) if uniform else _prior(N, 3)
    K = kernel(N, n, replacement)
    for metric, k in [("recall", 10), ("ap", None), ("ndcg", 20)]:
        F = _F(metric, k, N)
        post = (K * (p * F)[:, None]).sum(0) / (K * p[:, None]).sum(0)  # Eq. 26
        x = corrected_metric(metric, k, N, n, "bv", prior=None if uniform else p, gamma=1.0,
                             replacement=replacement)
        np.testing.assert_allclose(x, post, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("uniform", [True, False])
def test_bv_gamma_zero_satisfies_normal_equations(uniform):
    N, n = 80, 6  # small n: A^T A well conditioned, so the normal equations are a sharp check
    p = np.full(N, 1 / N) if uniform else _prior(N, 5)
    A = np.sqrt(p)[:, None] * kernel(N, n)
    for metric, k in [("recall", 5), ("ap", None)]:
        b = np.sqrt(p) * _F(metric, k, N)
        x = corrected_metric(metric, k, N, n, "bv", prior=None if uniform else p, gamma=0.0)
        grad = A.T @ (A @ x - b)  # Eq. 22: A^T A x = A^T b
        assert np.max(np.abs(grad)) < 1e-13 * max(1.0, np.abs(A.T @ b).max())
        np.testing.assert_allclose(x, np.linalg.solve(A.T @ A, A.T @ b), rtol=1e-8, atol=1e-10)


def test_auc_minimal_bias_is_the_sampled_auc():
    # AUC is affine in R and E[r - 1 | R] = (n-1)(R-1)/(N-1), so (n - r)/(n - 1) is an exactly
    # unbiased correction; K has full column rank, so least squares must return it.
    N, n = 500, 8
    r = np.arange(1, n + 1)
    for method, kw in [("bv", {"gamma": 0.0}), ("cls", {})]:
        x = corrected_metric("auc", None, N, n, method, **kw)
        np.testing.assert_allclose(x, (n - r) / (n - 1), atol=1e-9)


@pytest.mark.parametrize("gamma", [0.5, 0.1, 0.01])
def test_bv_matches_dense_solve_and_cvxpy(gamma):
    N, n = 150, 9
    p = _prior(N, 11)
    K = kernel(N, n)
    F = _F("ndcg", 10, N)
    G = (1 - gamma) * K.T @ (p[:, None] * K) + gamma * np.diag(K.T @ p)  # Eq. 25
    direct = np.linalg.solve(G, K.T @ (p * F))
    x = corrected_metric("ndcg", 10, N, n, "bv", prior=p, gamma=gamma)
    np.testing.assert_allclose(x, direct, rtol=1e-9, atol=1e-12)
    # Eq. 24 minimised directly: sum_R p(R) [(E[x|R] - F(R))^2 + gamma Var[x|R]]
    z = cp.Variable(n)
    obj = p @ cp.square(K @ z - F) + gamma * _weighted_var(z, K, p[:, None] * K)
    cp.Problem(cp.Minimize(obj)).solve(solver=cp.CLARABEL)
    np.testing.assert_allclose(x, z.value, atol=1e-5)


# --- MN (TORS Eq. 42) ------------------------------------------------------------------------
def _mn_stacked_lstsq(K, p, F, M):
    """Minimise TORS Eq. 41 written as one stacked least-squares problem:
    sum_R p(R) (E[x|R] - F(R))^2 + (1/M) sum_R sum_r P(r|R) (x_r - E[x|R])^2."""
    N, n = K.shape
    rows = [np.sqrt(p)[:, None] * K]
    rhs = [np.sqrt(p) * F]
    eye = np.eye(n)
    for R in range(N):
        rows.append(np.sqrt(K[R] / M)[:, None] * (eye - K[R][None, :]))
        rhs.append(np.zeros(n))
    return np.linalg.lstsq(np.vstack(rows), np.concatenate(rhs), rcond=None)[0]


@pytest.mark.parametrize("M", [10, 1000, 100_000])
def test_mn_matches_dense_solve_and_stacked_lstsq(M):
    N, n = 60, 7
    p = _prior(N, 7)
    K = kernel(N, n)
    F = _F("recall", 5, N)
    G = K.T @ np.diag(p) @ K - K.T @ K / M + np.diag(K.sum(0)) / M  # Eq. 42, formed densely
    direct = np.linalg.solve(G, K.T @ np.diag(p) @ F)
    x = corrected_metric("recall", 5, N, n, "mn", prior=p, n_users=M)
    np.testing.assert_allclose(x, direct, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(x, _mn_stacked_lstsq(K, p, F, M), rtol=1e-6, atol=1e-8)


def test_mn_matches_cvxpy():
    N, n, M = 40, 6, 200
    p = _prior(N, 9)
    K = kernel(N, n)
    F = _F("ap", None, N)
    z = cp.Variable(n)
    obj = p @ cp.square(K @ z - F) + _weighted_var(z, K, K / M)
    cp.Problem(cp.Minimize(obj)).solve(solver=cp.CLARABEL)
    x = corrected_metric("ap", None, N, n, "mn", prior=p, n_users=M)
    np.testing.assert_allclose(x, z.value, atol=1e-5)


def test_mn_uniform_prior_is_bv_with_gamma_n_over_m():
    N, n, M = 400, 20, 1600
    x = corrected_metric("ndcg", 10, N, n, "mn", n_users=M)
    y = corrected_metric("ndcg", 10, N, n, "bv", gamma=N / M)
    np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-12)


def test_mn_weighted_minimises_the_exact_variance_objective():
    N, n, M = 50, 6, 300
    p = _prior(N, 2)
    K = kernel(N, n)
    F = _F("recall", 3, N)
    # sum_R p(R) [(E[x|R] - F)^2 + (1/M) Var[x|R]] as stacked least squares
    rows = [np.sqrt(p)[:, None] * K]
    rhs = [np.sqrt(p) * F]
    for R in range(N):
        rows.append(np.sqrt(p[R] * K[R] / M)[:, None] * (np.eye(n) - K[R][None, :]))
        rhs.append(np.zeros(n))
    ref = np.linalg.lstsq(np.vstack(rows), np.concatenate(rhs), rcond=None)[0]
    x = corrected_metric("recall", 3, N, n, "mn_weighted", prior=p, n_users=M)
    np.testing.assert_allclose(x, ref, rtol=1e-6, atol=1e-8)


def test_mn_variance_term_vanishes_as_m_grows():
    # M -> infinity: MN tends to the minimal-bias solution (gamma -> 0) on a well-conditioned case
    N, n = 100, 5
    x_inf = corrected_metric("recall", 10, N, n, "bv", gamma=0.0)
    errs = [np.abs(corrected_metric("recall", 10, N, n, "mn", n_users=M) - x_inf).max()
            for M in (10**3, 10**5, 10**7, 10**9)]
    assert errs[0] > errs[1] > errs[2] > errs[3] and errs[3] < 1e-4
    # the distance shrinks like 1/M once the variance term is small
    assert errs[3] / errs[2] == pytest.approx(0.01, rel=0.05)


# --- CLS (Eq. 21-23 with the order constraint) ------------------------------------------------
@pytest.mark.parametrize("replacement", [True, False])
@pytest.mark.parametrize("metric,k", [("ap", None), ("recall", 10), ("ndcg", 10)])
def test_cls_matches_cvxpy_and_is_monotone(metric, k, replacement):
    N, n = 200, 12
    p = _prior(N, 4, conc=1.0)
    K = kernel(N, n, replacement)  # binomial (with) or hypergeometric (without replacement) kernel
    F = _F(metric, k, N)
    x = corrected_metric(metric, k, N, n, "cls", prior=p, replacement=replacement)
    assert np.all(np.diff(x) <= 1e-12)
    z = cp.Variable(n)
    prob = cp.Problem(cp.Minimize(p @ cp.square(K @ z - F)), [z[:-1] >= z[1:]])
    prob.solve(solver=cp.CLARABEL)
    obj = lambda v: float(p @ (K @ v - F) ** 2)  # noqa: E731
    assert obj(x) <= obj(z.value) + 1e-10
    np.testing.assert_allclose(x, z.value, atol=2e-4)
    # never better than the unconstrained minimal-bias solution
    assert obj(corrected_metric(metric, k, N, n, "bv", prior=p, gamma=0.0, replacement=replacement)) <= obj(x) + 1e-12


# --- vectorised cut-offs and the banded kernel ------------------------------------------------
def test_corrected_metrics_columns_equal_single_calls():
    N, n = 500, 30
    ks = [1, 5, 10, 25]
    for method, kw in [("bv", {"gamma": 0.1}), ("mn", {"n_users": 800}), ("rank_estimate", {}),
                       ("mn", {"n_users": 800, "prior": _prior(N, 1)})]:
        Fh = corrected_metrics("ndcg", ks, N, n, method, **kw)
        for j, k in enumerate(ks):
            np.testing.assert_allclose(Fh[:, j], corrected_metric("ndcg", k, N, n, method, **kw), rtol=1e-12)


def test_banded_products_equal_dense_products():
    N, n = 3000, 150
    K = kernel(N, n)
    w = _prior(N, 8)
    G, rhs, c = C._weighted_products(N, n, True, w, K[:, :3])
    dense = K.T @ (w[:, None] * K)
    # entries dropped by the band are below 1e-30 of their row maximum: relative to the diagonal
    # scaling the solvers use, every entry agrees to rounding (summation order differs)
    scale = np.sqrt(np.outer(np.diag(dense), np.diag(dense)))
    assert np.max(np.abs(G - dense) / scale) < 1e-13
    np.testing.assert_allclose(np.diag(G), np.diag(dense), rtol=1e-13)
    np.testing.assert_allclose(c, K.T @ w, rtol=1e-13)
    np.testing.assert_allclose(rhs, K.T @ (w[:, None] * K[:, :3]), rtol=1e-13, atol=1e-20)
    KtK, colsum = C._prior_free(N, n, True)
    np.testing.assert_allclose(np.diag(KtK), np.diag(K.T @ K), rtol=1e-13)
    assert np.max(np.abs(KtK - K.T @ K) / np.sqrt(np.outer(np.diag(KtK), np.diag(KtK)))) < 1e-13
    np.testing.assert_allclose(colsum, K.sum(0), rtol=1e-13)


def test_corrected_estimate_is_mean_over_users():
    Fh = np.array([1.0, 0.5, 0.25, 0.0])
    r = np.array([1, 1, 2, 4, 3])
    assert corrected_estimate(r, Fh) == pytest.approx((1 + 1 + 0.5 + 0 + 0.25) / 5)
    two = corrected_estimate(np.stack([r, np.ones(5, int)]), Fh)
    np.testing.assert_allclose(two, [(2.75) / 5, 1.0])
    with pytest.raises(ValueError, match="1..4"):
        corrected_estimate([0, 1], Fh)
    with pytest.raises(ValueError, match="1..4"):
        corrected_estimate([5], Fh)


def test_bv_corrected_estimate_is_unbiased_for_auc_and_closer_than_sampled():
    # expected corrected Recall@10 over the decoy draws, with a prior equal to the truth: BV with a
    # small gamma has a much smaller bias than the uncorrected sampled metric
    N, n = 2000, 50
    rng = np.random.default_rng(0)
    R = np.minimum(N, 1 + rng.geometric(0.01, size=3000))
    p = np.bincount(R, minlength=N + 1)[1:] / R.size
    K = kernel(N, n)
    true = np.mean(R <= 10)
    expected = lambda x: float(p @ (K @ x))  # noqa: E731
    sampled = expected(_F("recall", 10, n))
    bv = expected(corrected_metric("recall", 10, N, n, "bv", prior=p, gamma=0.001))
    assert abs(bv - true) < 0.1 * abs(sampled - true)


# --- refused input ---------------------------------------------------------------------------
def test_bad_input_is_refused():
    N, n = 100, 10
    with pytest.raises(ValueError, match="sample_size"):
        corrected_metric("recall", 5, 10, 11, "bv", gamma=0.1)
    with pytest.raises(ValueError, match="method"):
        corrected_metric("recall", 5, N, n, "magic")
    with pytest.raises(ValueError, match="metric"):
        corrected_metric("mystery", 5, N, n, "bv", gamma=0.1)
    for g in (-0.1, 1.5, np.nan, np.inf, "0.1", True):
        with pytest.raises(ValueError, match="gamma"):
            corrected_metric("recall", 5, N, n, "bv", gamma=g)
    with pytest.raises(ValueError, match="gamma"):
        corrected_metric("recall", 5, N, n, "bv")
    with pytest.raises(ValueError, match="n_users"):
        corrected_metric("recall", 5, N, n, "mn")
    with pytest.raises(ValueError, match="n_users"):
        corrected_metric("recall", 5, N, n, "mn", n_users=0)
    p = np.full(N, 1 / N)
    bad = p.copy()
    bad[0], bad[1] = -0.01, bad[1] + 0.01
    with pytest.raises(ValueError, match="prior.*non-negative"):
        corrected_metric("recall", 5, N, n, "bv", prior=bad, gamma=0.1)
    with pytest.raises(ValueError, match="prior.*sum to 1"):
        corrected_metric("recall", 5, N, n, "mn", prior=p * 1.1, n_users=100)
    with pytest.raises(ValueError, match="prior.*length"):
        corrected_metric("recall", 5, N, n, "bv", prior=p[:-1], gamma=0.1)
    with pytest.raises(ValueError, match="prior"):
        corrected_metric("recall", 5, N, n, "cls", prior=np.full(N, np.nan))
    with pytest.raises(ValueError, match="k"):
        corrected_metric("recall", 0, N, n, "bv", gamma=0.1)
    with pytest.raises(ValueError, match="not used"):
        corrected_metric("recall", 5, N, n, "rank_estimate", gamma=0.1)


def test_singular_systems_are_refused():
    # all prior mass on R = 1: every sampled rank but r = 1 has probability 0 (c_r = 0)
    N, n = 100, 10
    point = np.zeros(N)
    point[0] = 1.0
    with pytest.raises(ValueError, match="singular"):
        corrected_metric("recall", 5, N, n, "bv", prior=point, gamma=0.5)
    # N = n = 2: the kernel is the identity, so Var[x | R] = 0 and MN reduces to diag(p)
    with pytest.raises(ValueError, match="singular"):
        corrected_metric("recall", 1, 2, 2, "mn", prior=[1.0, 0.0], n_users=10)
    # gamma = 0 follows the same rule: the rank with c_r = 0 is not determined, so it is refused
    with pytest.raises(ValueError, match="singular: sampled rank r = 2"):
        corrected_metric("recall", 5, N, n, "bv", prior=point, gamma=0.0)


def test_bv_gamma_zero_refused_where_gamma_tiny_is():
    # N = 3000, n = 100, uniform prior: A^T A is numerically singular. gamma = 1e-12 was refused
    # while gamma = 0 returned entries of size 1e10; both are refused now, by one rule
    for g in (0.0, 1e-12):
        with pytest.raises(ValueError, match="numerically singular"):
            corrected_metric("recall", 10, 3000, 100, "bv", gamma=g)
    # where the system is well conditioned gamma = 0 is the gamma -> 0 limit
    x0 = corrected_metric("recall", 10, 100, 5, "bv", gamma=0.0)
    np.testing.assert_allclose(corrected_metric("recall", 10, 100, 5, "bv", gamma=1e-10), x0, rtol=1e-6, atol=1e-8)


# --- exact moments and the MSE terms of TORS Eq. 38-39 ----------------------------------------
def test_corrected_moments_of_the_plain_metric_are_the_sampled_moments():
    from itemsampling.sampling import sampled_metric_moments

    R = [1, 5, 40, 40, 900, 3000]
    N, n = 3706, 101
    for metric, k in [("recall", 10), ("ap", None), ("auc", None)]:
        Fs = metric_function(metric, k, n)(np.arange(1, n + 1))
        np.testing.assert_allclose(C.corrected_moments(R, N, Fs), sampled_metric_moments(R, N, n, metric, k),
                                   rtol=1e-12)


def test_mse_terms_match_monte_carlo():
    from itemsampling.sampling import sample_ranks

    N, n = 500, 20
    rng = np.random.default_rng(4)
    R = np.minimum(N, 1 + rng.geometric(0.02, size=400))
    p = np.bincount(R, minlength=N + 1)[1:] / R.size
    Fh = corrected_metric("recall", 10, N, n, "bv", gamma=0.1)
    terms = C.mse_decomposition(Fh, "recall", 10, N, p, R.size)
    mean, sd = C.corrected_moments(R, N, Fh)
    true = np.mean(R <= 10)
    assert terms["bias"] == pytest.approx(mean - true, abs=1e-12)
    assert terms["variance"] == pytest.approx(sd**2, rel=1e-10)
    reps = 2000
    est = corrected_estimate(sample_ranks(np.tile(R, reps), N, n, rng).reshape(reps, -1), Fh)
    assert abs(np.mean((est - true) ** 2) - terms["mse"]) < 4 * np.std((est - true) ** 2) / np.sqrt(reps)
    assert terms["bias"] ** 2 <= terms["L1"] + 1e-15  # the Jensen step


@pytest.mark.parametrize("method,objective", [("mn", lambda t: t["bound"]),
                                              ("mn_weighted", lambda t: t["L1"] + t["variance"])])
def test_mn_minimises_its_objective(method, objective):
    N, n, M = 300, 15, 500
    p = _prior(N, 12, conc=1.0)
    x = corrected_metric("ndcg", 10, N, n, method, prior=p, n_users=M)
    best = objective(C.mse_decomposition(x, "ndcg", 10, N, p, M))
    rng = np.random.default_rng(0)
    for _ in range(20):
        d = rng.normal(size=n) * 1e-3
        assert objective(C.mse_decomposition(x + d, "ndcg", 10, N, p, M)) >= best - 1e-15


def test_expected_corrected_given_rank_matches_sampling_module():
    from itemsampling.estimators import expected_corrected_given_rank
    from itemsampling.sampling import expected_metric_given_rank

    R = np.array([1, 2, 50, 999, 1000, 2])
    Fs = metric_function("ndcg", 10, 20)(np.arange(1, 21))
    for repl in (True, False):
        np.testing.assert_allclose(expected_corrected_given_rank(R, 1000, Fs, repl),
                                   expected_metric_given_rank(R, 1000, 20, "ndcg", 10, repl), rtol=1e-12)


@pytest.mark.parametrize("method,kw", [("bv", {"gamma": 0.3}), ("bv", {"gamma": 0.001}), ("mn", {"n_users": 50}),
                                       ("mn_weighted", {"n_users": 50})])
def test_true_prior_makes_every_estimator_unbiased(method, kw):
    # 1^T of the normal equations: c^T x = sum_R p(R) F(R) (kernel rows sum to 1), so with the
    # users' own rank distribution as prior the expected estimate equals T exactly
    N, n = 400, 25
    p = _prior(N, 21, conc=0.3)
    for metric, k in [("recall", 10), ("ap", None)]:
        x = corrected_metric(metric, k, N, n, method, prior=p, **kw)
        t = C.mse_decomposition(x, metric, k, N, p, 1000)
        assert abs(t["bias"]) < 1e-12
        assert t["L1"] > 1e-6  # while the per-rank errors are far from zero


@pytest.mark.parametrize("metric", ["recall", "ndcg", "ap", "precision"])
@pytest.mark.parametrize("uniform", [True, False])
def test_many_cutoffs_match_dense_solve(metric, uniform):
    # cut-offs on both sides of the 256-rank block boundaries and beyond N: the running-sum
    # right-hand side must equal K^T D F built densely
    N, n = 700, 30
    K = kernel(N, n)
    p = np.full(N, 1 / N) if uniform else _prior(N, 30, conc=1.0)
    ks = [1, 2, 5, 17, 256, 257, 300, 512, 513, 699, 700, 1000]
    x = corrected_metrics(metric, ks, N, n, "bv", prior=None if uniform else p, gamma=0.1)
    F = np.column_stack([_F(metric, k, N) for k in ks])
    G = 0.9 * K.T @ (p[:, None] * K) + 0.1 * np.diag(K.T @ p)
    np.testing.assert_allclose(x, np.linalg.solve(G, K.T @ (p[:, None] * F)), rtol=1e-10, atol=1e-13)


def test_rank_estimate_of_sampled_ranks():
    from itemsampling.estimators import rank_estimate

    # N = 3706, n = 101 (100 decoys): r = 2 -> floor(1 + 3705/100) = 38; r = 1 -> 1; r = n -> N
    np.testing.assert_array_equal(rank_estimate([1, 2, 101], 3706, 101), [1, 38, 3706])
    with pytest.raises(ValueError, match="sampled_ranks"):
        rank_estimate([0], 3706, 101)
