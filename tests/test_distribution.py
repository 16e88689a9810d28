"""Tests of the global rank-distribution estimators (Jin et al. 2021; TORS Sec. 4)."""

import warnings

import numpy as np
import pytest

from itemsampling.estimators import distribution as D
from itemsampling.kernel import kernel
from itemsampling.sampling import sample_ranks


def _long_tail(N, alpha=0.8):
    R = np.arange(1, N + 1)
    P = R ** -alpha
    return P / P.sum()


def _draw(N, n, M, seed, alpha=0.8):
    rng = np.random.default_rng(seed)
    R = rng.choice(np.arange(1, N + 1), size=M, p=_long_tail(N, alpha))
    return R, sample_ranks(R, N, n, rng=rng)


# ----------------------------------------------------------------------------- inputs
def test_histogram_hand_case():
    c = D.sampled_rank_histogram([1, 1, 3, 2, 1, 3], 4)
    np.testing.assert_array_equal(c, [3.0, 1.0, 2.0, 0.0])


def test_wmle_weights_hand_values():
    w_ap = D.wmle_weights(20, "ap", C=10)
    assert w_ap[4] == pytest.approx(10 / 5)  # F_AP(5/10) = 2
    w_nd = D.wmle_weights(20, "ndcg", C=10)
    assert w_nd[9] == pytest.approx(1.0)  # F_NDCG(10/10) = 1/log2(2)
    assert w_nd[0] == pytest.approx(1 / np.log2(1.1))
    assert np.all(np.diff(w_ap) < 0) and np.all(np.diff(w_nd) < 0)


def test_mes_scale():
    assert D.mes_scale(0.01, 100, "tors") == pytest.approx(1e-4)
    assert D.mes_scale(0.001, 100, "aaai") == pytest.approx(1e-3)


# ----------------------------------------------------------------------------- MLE
def test_mle_closed_form_when_kernel_is_invertible():
    # N = n = 3: K = [[1,0,0],[1/4,1/2,1/4],[0,0,1]], so q = K^T pi is solved exactly by
    # pi = (0.1, 0.8, 0.1) for P~ = (0.3, 0.4, 0.3): the MLE (q = P~ is the unconstrained optimum).
    K = kernel(3, 3)
    np.testing.assert_allclose(K, [[1, 0, 0], [0.25, 0.5, 0.25], [0, 0, 1]], atol=1e-15)
    counts = np.array([3.0, 4.0, 3.0])
    cnm = D.mle_cnm(counts, K, tol=1e-12)
    np.testing.assert_allclose(cnm.distribution, [0.1, 0.8, 0.1], atol=1e-9)
    em = D.mle_em(counts, K, tol=1e-15, max_iter=100_000)
    np.testing.assert_allclose(em.distribution, [0.1, 0.8, 0.1], atol=1e-6)
    r = np.repeat([1, 2, 3], [3, 4, 3])
    for solver in ("em", "cnm"):
        P = D.estimate_rank_distribution(r, 3, 3, "mle", solver=solver, tol=1e-13, max_iter=200_000)
        np.testing.assert_allclose(P, [0.1, 0.8, 0.1], atol=1e-5)


def test_em_never_decreases_log_likelihood():
    N, n = 400, 30
    _, r = _draw(N, n, 3000, seed=1)
    K = D.cached_kernel(N, n)
    c = D.sampled_rank_histogram(r, n)
    for counts in (c, c * D.wmle_weights(n, "ap", 10)):  # MLE and WMLE
        p = np.full(N, 1.0 / N)
        lls = [D.mixture_log_likelihood(p, counts, K)]
        for _ in range(300):
            p = D.em_step(p, counts, K)
            lls.append(D.mixture_log_likelihood(p, counts, K))
        diffs = np.diff(lls)
        assert diffs.min() >= -1e-12 * abs(lls[-1])
        assert lls[-1] > lls[0] + 0.1  # and it does climb


def test_cnm_satisfies_kkt_and_certificate():
    N, n = 2000, 100
    _, r = _draw(N, n, 5000, seed=2)
    K = D.cached_kernel(N, n)
    c = D.sampled_rank_histogram(r, n)
    res = D.mle_cnm(c, K, tol=1e-10)
    assert res.stopped_by_tol and res.gap <= 1e-10
    g = D.likelihood_gradient(res.distribution, c, K)
    assert g.max() <= 1 + 1e-10  # g_R <= 1 everywhere
    support = res.distribution > 0
    np.testing.assert_allclose(g[support], 1.0, atol=1e-6)  # equality on the support
    # the certificate l* - l(pi) <= max g - 1 holds for other candidates
    for pi in (np.full(N, 1.0 / N), _long_tail(N, 0.5)):
        gap = D.kkt_gap(pi, c, K)
        assert res.objective - D.mixture_log_likelihood(pi, c, K) <= gap + 1e-12
        assert gap > 0


def test_fast_solver_agrees_with_long_em():
    # small enough for EM to converge: same optimum value, same fitted sampled-rank distribution
    N, n = 80, 20
    _, r = _draw(N, n, 4000, seed=3)
    K = D.cached_kernel(N, n)
    c = D.sampled_rank_histogram(r, n)
    cnm = D.mle_cnm(c, K, tol=1e-12)
    em = D.mle_em(c, K, tol=1e-10, max_iter=100_000)  # ~34,000 EM passes
    assert em.stopped_by_tol
    assert em.objective <= cnm.objective + 1e-12  # CNM is optimal
    assert cnm.objective - em.objective < 2e-5  # EM creeps up to the same value ...
    assert cnm.objective - em.objective <= D.kkt_gap(em.distribution, c, K) + 1e-12  # ... as certified
    np.testing.assert_allclose(K.T @ em.distribution, K.T @ cnm.distribution, atol=2e-4)  # same q
    assert D.kkt_gap(em.distribution, c, K) < 1e-4


def test_em_warns_when_not_converged():
    N, n = 300, 20
    _, r = _draw(N, n, 1000, seed=4)
    with pytest.warns(D.ConvergenceWarning):
        D.estimate_rank_distribution(r, N, n, "mle", solver="em", tol=1e-15, max_iter=3)
    with pytest.warns(D.ConvergenceWarning):
        D.estimate_rank_distribution(r, N, n, "mle", solver="cnm", tol=1e-15, max_iter=1)


# ----------------------------------------------------------------------------- MES
def test_mes_dual_matches_direct_cvxpy_solve():
    N, n = 150, 15
    _, r = _draw(N, n, 2000, seed=5)
    K = D.cached_kernel(N, n)
    c = D.sampled_rank_histogram(r, n)
    pt = c / c.sum()
    for a in (1e-3, 1e-4):
        dual = D.mes_dual(pt, K, a, tol=1e-11)
        direct = D.mes_cvxpy(pt, K, a)
        assert dual.stopped_by_tol
        assert abs(dual.objective - direct.objective) < 1e-7
        assert dual.objective >= direct.objective - 1e-9  # the dual solution is (at least) as good
        np.testing.assert_allclose(np.cumsum(dual.distribution), np.cumsum(direct.distribution), atol=2e-3)
    # and through the public entry point
    P1 = D.estimate_rank_distribution(r, N, n, "mes", eta=0.01, solver="dual")
    P2 = D.estimate_rank_distribution(r, N, n, "mes", eta=0.01, solver="cvxpy")
    np.testing.assert_allclose(np.cumsum(P1), np.cumsum(P2), atol=2e-3)


def test_mes_eta_scaling_is_eta_over_n():
    N, n = 200, 20
    _, r = _draw(N, n, 1000, seed=6)
    P1 = D.estimate_rank_distribution(r, N, n, "mes", eta=0.01, eta_scaling="tors")
    P2 = D.estimate_rank_distribution(r, N, n, "mes", eta=0.01 / n, eta_scaling="aaai")
    np.testing.assert_allclose(P1, P2, atol=1e-10)


@pytest.mark.parametrize("n", [20, 100, 250])
def test_mes_quadratic_scaling_is_jins_weight_at_n_100(n):
    assert D.mes_scale(0.001, n, "quadratic") == pytest.approx(0.001 * (100 / n) ** 2, rel=1e-15)
    assert D.mes_scale(0.001, 100, "quadratic") == D.mes_scale(0.001, 100, "aaai")
    N = 400
    _, r = _draw(N, n, 1000, seed=7)
    P1 = D.estimate_rank_distribution(r, N, n, "mes", eta=0.01, eta_scaling="quadratic")
    P2 = D.estimate_rank_distribution(r, N, n, "mes", eta=0.01 * (100 / n) ** 2, eta_scaling="aaai")
    np.testing.assert_allclose(P1, P2, atol=1e-10)


# ----------------------------------------------------------------------------- every estimate
@pytest.mark.parametrize("replacement", [True, False])
@pytest.mark.parametrize("method,params", [
    ("mle", {}), ("mle", {"solver": "cnm"}), ("wmle", {"weight": "ap", "C": 5}), ("wmle", {}),
    ("mes", {}), ("mes", {"eta": 0.01, "eta_scaling": "aaai"}), ("bv", {"gamma": 0.1}),
    ("bv", {"gamma": 0.01}),
])
def test_every_estimate_is_a_distribution(method, params, replacement):
    N, n = 500, 40
    _, r = _draw(N, n, 2000, seed=7)
    P = D.estimate_rank_distribution(r, N, n, method, replacement=replacement, **params)
    assert P.shape == (N,)
    assert np.all(np.isfinite(P)) and P.min() >= 0
    assert P.sum() == pytest.approx(1.0, abs=1e-10)


def test_bv_baseline_is_differenced_bv_recall():
    from itemsampling.estimators.corrected import corrected_metric

    N, n = 300, 30
    _, r = _draw(N, n, 1500, seed=8)
    pt = D.sampled_rank_histogram(r, n) / len(r)
    raw = D.estimate_rank_distribution(r, N, n, "bv", gamma=0.1, project=False)
    assert raw.sum() == pytest.approx(1.0, abs=1e-9)  # Recall@N corrects to 1
    for K_ in (1, 7, 50):
        recall_bv = pt @ corrected_metric("recall", K_, N, n, "bv", gamma=0.1)
        assert raw[:K_].sum() == pytest.approx(recall_bv, abs=1e-9)
    proj = D.project_to_simplex(raw)
    # the projection is the closest point of the simplex: no simplex vertex is closer
    assert np.linalg.norm(proj - raw) <= np.linalg.norm(np.eye(N)[0] - raw) + 1e-12


def test_project_to_simplex_hand_case():
    np.testing.assert_allclose(D.project_to_simplex([0.5, 0.5, -0.2]), [0.5, 0.5, 0.0])
    np.testing.assert_allclose(D.project_to_simplex([2.0, 0.0]), [1.0, 0.0])
    np.testing.assert_allclose(D.project_to_simplex([0.6, 0.6]), [0.5, 0.5])


# ----------------------------------------------------------------------------- recovery
@pytest.mark.parametrize("method", ["mle", "mes"])
def test_recall_curve_recovered_within_shrinking_tolerance(method):
    """Ranks drawn from a known long-tailed P(R) (N = 1000, n = 100). Max error of Recall@K,
    K = 1..50, against the users' true Recall@K, averaged over 3 draws; the tolerance
    0.01 + 1.5 / sqrt(M) shrinks with M (about 3x the observed error at every M). The floor
    0.01 is loose enough that the default, early-stopped EM (tol 1e-6, not the exact MLE) passes:
    this test checks recovery, not optimality; optimality is checked by
    test_long_em_approaches_cnm_at_moderate_scale."""
    N, n = 1000, 100
    errors = []
    for M in (1_000, 10_000, 100_000):
        errs = []
        for seed in range(3):
            R, r = _draw(N, n, M, seed=100 + seed)
            P = D.estimate_rank_distribution(r, N, n, method)
            true = np.cumsum(np.bincount(R, minlength=N + 1)[1:51]) / M
            errs.append(np.max(np.abs(np.cumsum(P)[:50] - true)))
        err = float(np.mean(errs))
        assert err <= 0.01 + 1.5 / np.sqrt(M), (M, err)
        errors.append(err)
    assert errors[-1] < errors[0]


def test_long_em_approaches_cnm_at_moderate_scale():
    """The chapter's scale (N = 3706, n = 100, M = 4000): CNM meets the KKT conditions; EM's
    log-likelihood rises towards CNM's from below and its certified gap falls as it iterates, so
    the default EM (tol 1e-6) is an early-stopped, not an exact, MLE."""
    N, n = 3706, 100
    _, r = _draw(N, n, 4000, seed=11)
    K = D.cached_kernel(N, n)
    c = D.sampled_rank_histogram(r, n)
    cnm = D.mle_cnm(c, K, tol=1e-9)
    assert cnm.stopped_by_tol and cnm.gap <= 1e-9
    g = D.likelihood_gradient(cnm.distribution, c, K)
    assert g.max() <= 1 + 1e-9
    np.testing.assert_allclose(g[cnm.distribution > 0], 1.0, atol=1e-5)
    lls, gaps, iters = [], [], []
    for tol in (1e-5, 1e-6, 1e-7, 1e-8):
        em = D.mle_em(c, K, tol=tol, max_iter=50_000)
        assert em.stopped_by_tol
        # the gap field is the certificate, recomputed here
        assert em.gap == pytest.approx(D.kkt_gap(em.distribution, c, K), rel=1e-9, abs=1e-15)
        assert em.objective <= cnm.objective + 1e-12  # from below
        assert cnm.objective - em.objective <= em.gap + 1e-12  # certified
        lls.append(em.objective)
        gaps.append(em.gap)
        iters.append(em.iterations)
    assert np.all(np.diff(iters) > 0)
    assert np.all(np.diff(lls) > 0)  # longer EM, higher log-likelihood ...
    assert np.all(np.diff(gaps) < 0)  # ... and a smaller certified gap
    # approaching CNM's value (observed: the shortfall shrinks about 7x from tol 1e-5 to 1e-8)
    assert cnm.objective - lls[-1] < 0.25 * (cnm.objective - lls[0])
    assert gaps[1] > 1e-4  # the default stops well short of the optimum


def test_converged_mle_is_sparse():
    """The exactly converged MLE is a discrete distribution with few atoms (fewer than n)."""
    N, n = 1000, 100
    _, r = _draw(N, n, 20_000, seed=9)
    P = D.estimate_rank_distribution(r, N, n, "mle", solver="cnm")
    assert 0 < np.count_nonzero(P) < n


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("kwargs,match", [
    ({"sampled_ranks": [0, 1, 2]}, "sampled_ranks"),
    ({"sampled_ranks": [1, 2, 11]}, "sampled_ranks"),
    ({"sampled_ranks": [1.5, 2]}, "sampled_ranks"),
    ({"sampled_ranks": []}, "sampled_ranks"),
    ({"n_items": 5}, "sample_size"),
    ({"method": "median"}, "method"),
    ({"method": "mes", "eta": 0.0}, "eta"),
    ({"method": "mes", "eta": -1.0}, "eta"),
    ({"method": "mes", "eta": float("nan")}, "eta"),
    ({"method": "mes", "eta_scaling": "other"}, "eta_scaling"),
    ({"method": "wmle", "C": 0.5}, "C"),
    ({"method": "wmle", "weight": "recall"}, "weight"),
    ({"method": "mle", "tol": 0.0}, "tol"),
    ({"method": "mle", "solver": "newton"}, "solver"),
    ({"method": "mes", "solver": "em"}, "solver"),
    ({"method": "mle", "eta": 0.1}, "unknown parameter"),
    ({"method": "bv", "gamma": 1.5}, "gamma"),
    ({"method": "bv", "prior": np.full(50, 0.5)}, "prior"),
    ({"replacement": "yes"}, "replacement"),
])
def test_bad_input_refused(kwargs, match):
    args = {"sampled_ranks": [1, 2, 3, 10], "n_items": 50, "sample_size": 10, "method": "mle"}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        D.estimate_rank_distribution(**args)


def test_public_reexport():
    from itemsampling.estimators import estimate_rank_distribution

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        P = estimate_rank_distribution([1, 1, 2, 5], 40, 5, "mle")
    assert P.shape == (40,) and P.sum() == pytest.approx(1.0)


def test_em_all_observed_loop_equals_the_masked_loop():
    """EM's loop without masks (every column observed) runs the updates and the stopping rule of the
    masked loop: the same fit as with one unobserved column appended (weight 0), for a single fit (dot)
    and a batch, to rounding, with the same passes; and the same refusal of a zero-probability rank."""
    from itemsampling.estimators.distribution import _em

    rng = np.random.default_rng(5)
    N, J = 300, 40
    K = rng.random((N, J)) ** 4
    K /= K.sum(axis=1, keepdims=True) * 1.5
    for B, dot in ((1, True), (3, False)):
        c = rng.random((B, J)) + 0.1
        c /= c.sum(axis=1, keepdims=True)
        fast = _em(c, K, np.full((B, N), 1.0 / N), 1e-7, 5000, dot=dot)
        cz = np.hstack([c, np.zeros((B, 1))])
        Kz = np.hstack([K, rng.random((N, 1))])
        masked = _em(cz, Kz, np.full((B, N), 1.0 / N), 1e-7, 5000, dot=dot)
        np.testing.assert_allclose(fast[0], masked[0], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(fast[2], masked[2], rtol=1e-12)
        assert np.array_equal(fast[3], masked[3]) and fast[4].all() and masked[4].all()
        assert 5 < fast[3].min() < 5000  # the loop ran and stopped by the rule
    K0 = K.copy()
    K0[:, 0] = 0.0
    with pytest.raises(ValueError, match="zero probability"):
        _em(np.full((1, J), 1.0 / J), K0, np.full((1, N), 1.0 / N), 1e-9, 50)


@pytest.mark.parametrize("unobserved", [0, 7])
def test_single_fit_em_loop_equals_the_batch_loop_bit_for_bit(unobserved):
    """A single fit's EM (``_em_one``, the default for mle_em) does the batch loop's arithmetic: the same
    estimates, q, log-likelihood and passes, bit for bit, with every column observed and with unobserved
    ones (masked), on the sparse products too (a banded binomial kernel of more than 200,000 entries)."""
    from itemsampling.estimators.distribution import _em
    from itemsampling.estimators.grid import cached_kernel

    rng = np.random.default_rng(11)
    for N, n in ((300, 40), (3000, 400)):
        K = np.asarray(cached_kernel(N, n))
        c = rng.random((1, n)) + 0.05
        c[0, rng.choice(n, unobserved, replace=False)] = 0.0
        c /= c.sum()
        lean = _em(c, K, np.full((1, N), 1.0 / N), 1e-8, 20_000, dot=True)
        batch = _em(c, K, np.full((1, N), 1.0 / N), 1e-8, 20_000, dot=True, lean=False)
        for a, b in zip(lean, batch):
            assert np.array_equal(a, b)
        assert 5 < lean[3][0] < 20_000 and lean[4][0]
        short = _em(c, K, np.full((1, N), 1.0 / N), 1e-14, 3, dot=True)  # the cap: not converged, 3 passes
        assert short[3][0] == 3 and not short[4][0]
        assert np.array_equal(short[0], _em(c, K, np.full((1, N), 1.0 / N), 1e-14, 3, dot=True, lean=False)[0])
