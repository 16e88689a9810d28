"""estimate_metric / estimate_metrics: every method against its definition, cut-off vectors,
recovery of Recall@K on ranks drawn from a known P(R), and refused input."""

import numpy as np
import pytest

from itemsampling.estimators import (
    METHODS, corrected_estimate, corrected_metric, estimate_metric, estimate_metrics,
    estimate_rank_distribution, metric_from_distribution,
)
from itemsampling.metrics import evaluate, metric_curve
from itemsampling.sampling import sample_ranks

N, n = 1000, 50


def _ranks(M, seed=0, N=N):
    """Global ranks from a known, top-heavy P(R): a geometric head plus a uniform tail."""
    rng = np.random.default_rng(seed)
    head = 1 + rng.geometric(1 / 60, size=M)
    tail = rng.integers(1, N + 1, size=M)
    R = np.where(rng.random(M) < 0.7, np.minimum(head, N), tail)
    return R


@pytest.fixture(scope="module")
def sampled():
    R = _ranks(3000)
    return R, sample_ranks(R, N, n, rng=1)


def test_sampled_is_the_uncorrected_metric(sampled):
    _, r = sampled
    for metric, k in [("recall", 10), ("ndcg", 5), ("ap", None), ("auc", None)]:
        est = estimate_metric(r, N, n, metric, k, "sampled")
        assert est == pytest.approx(evaluate(r, metric, k, n_items=n))


@pytest.mark.parametrize("method,kw", [("rank_estimate", {}), ("cls", {}), ("bv", {"gamma": 0.1}),
                                       ("mn", {}), ("mn_weighted", {})])
def test_corrected_methods_apply_the_corrected_vector(sampled, method, kw):
    _, r = sampled
    extra = {"n_users": r.size} if method.startswith("mn") else {}
    Fh = corrected_metric("ndcg", 10, N, n, method, **kw, **extra)
    est = estimate_metric(r, N, n, "ndcg", 10, method, **kw)
    assert est == pytest.approx(np.mean(Fh[r - 1]), rel=1e-12)
    assert est == pytest.approx(corrected_estimate(r, Fh), rel=1e-12)


@pytest.mark.parametrize("method,kw", [("sampled", {}), ("rank_estimate", {}), ("bv", {"gamma": 0.01}),
                                       ("mn", {}), ("cls", {})])
def test_sequence_of_cutoffs_equals_single_calls(sampled, method, kw):
    _, r = sampled
    ks = [1, 3, 10] if method == "cls" else list(range(1, 21))
    vec = estimate_metric(r, N, n, "recall", ks, method, **kw)
    assert isinstance(vec, np.ndarray) and vec.shape == (len(ks),)
    single = [estimate_metric(r, N, n, "recall", k, method, **kw) for k in ks]
    np.testing.assert_allclose(vec, single, rtol=1e-12)


def test_mn_uses_the_number_of_users(sampled):
    _, r = sampled
    a = estimate_metric(r, N, n, "recall", 10, "mn")
    b = estimate_metric(r, N, n, "recall", 10, "mn", n_users=r.size)
    c = estimate_metric(r, N, n, "recall", 10, "mn", n_users=10 * r.size)
    assert a == b and a != c


@pytest.mark.parametrize("M", [2_000, 50_000])
def test_mn_with_the_true_prior_recovers_recall_curve(M):
    # MN with the true P(R) as prior: its error on Recall@K, K = 1..50, comes from the decoy draws
    # only, and its standard deviation falls like 1/sqrt(M); we allow 4 / sqrt(M) in absolute
    # terms on every K (the Recall values lie in [0.02, 0.6])
    R = _ranks(M, seed=M)
    p = np.bincount(R, minlength=N + 1)[1:] / M
    r = sample_ranks(R, N, n, rng=M + 1)
    ks = np.arange(1, 51)
    est = estimate_metric(r, N, n, "recall", ks, "mn", prior=p)
    true = metric_curve(R, "recall", ks, n_items=N)
    assert np.max(np.abs(est - true)) < 4 / np.sqrt(M)


def test_metric_from_distribution():
    P = np.array([0.5, 0.25, 0.25, 0.0])
    assert metric_from_distribution(P, "recall", 2) == pytest.approx(0.75)
    assert metric_from_distribution(P, "ap", None) == pytest.approx(0.5 + 0.125 + 0.25 / 3)
    np.testing.assert_allclose(metric_from_distribution(P, "recall", [1, 2, 3]), [0.5, 0.75, 1.0])
    with pytest.raises(ValueError, match="non-negative"):
        metric_from_distribution([0.5, -0.5, 1.0], "recall", 1)


# --- rank-distribution methods (need estimators.distribution) ---------------------------------
def test_distribution_methods_read_the_metric_off_p_hat(sampled):
    _, r = sampled
    ks = [1, 5, 10, 20]
    for method, kw in [("mle", {}), ("mes", {"eta": 0.01})]:
        P = estimate_rank_distribution(r, N, n, method, **kw)
        assert P.shape == (N,) and np.all(P >= 0) and P.sum() == pytest.approx(1.0)
        est = estimate_metric(r, N, n, "ndcg", ks, method, **kw)
        np.testing.assert_allclose(est, metric_from_distribution(P, "ndcg", ks), rtol=1e-10)
        # the combinations use the prior learnt from the same ranks
        bv = estimate_metric(r, N, n, "ndcg", ks, "bv_" + method, gamma=0.01, **kw)
        Fh = np.column_stack([corrected_metric("ndcg", k, N, n, "bv", prior=P, gamma=0.01) for k in ks])
        np.testing.assert_allclose(bv, corrected_estimate(r, Fh), rtol=1e-8)
        mn = estimate_metric(r, N, n, "ndcg", ks, "mn_" + method, **kw)
        Fh = np.column_stack([corrected_metric("ndcg", k, N, n, "mn", prior=P, n_users=r.size) for k in ks])
        np.testing.assert_allclose(mn, corrected_estimate(r, Fh), rtol=1e-8)


def test_estimate_metrics_agrees_with_estimate_metric(sampled):
    _, r = sampled
    ks = [1, 5, 10]
    methods = ["sampled", "rank_estimate", "bv", "mle", "bv_mle", "mn_mle"]
    out = estimate_metrics(r, N, n, ["recall", "ap"], ks, methods, gamma=0.1)
    for meth in methods:
        for metric in ("recall", "ap"):
            kw = {"gamma": 0.1} if meth in ("bv", "bv_mle") else {}
            np.testing.assert_allclose(out[meth][metric], estimate_metric(r, N, n, metric, ks, meth, **kw),
                                       rtol=1e-8)


@pytest.mark.parametrize("M", [1_000, 30_000])
def test_mn_mle_recovers_recall_curve_with_shrinking_tolerance(M):
    # TORS Sec. 8.3 on synthetic ranks from a known P(R): MN_MLE (prior learnt by MLE from the same
    # sampled ranks) against the exact Recall@K, K = 1..50. With 49 decoys among 1,000 items P(R)
    # is only partly identified, so the error has a small floor; beyond it, it falls like 1/sqrt(M).
    # Tolerances: mean absolute error < 0.005 + 2/sqrt(M), largest < 0.01 + 4/sqrt(M)
    # (0.068 / 0.136 at M = 1,000; 0.017 / 0.033 at M = 30,000).
    R = _ranks(M, seed=3 * M)
    r = sample_ranks(R, N, n, rng=3 * M + 1)
    ks = np.arange(1, 51)
    est = estimate_metric(r, N, n, "recall", ks, "mn_mle")
    true = metric_curve(R, "recall", ks, n_items=N)
    err = np.abs(est - true)
    assert err.mean() < 0.005 + 2 / np.sqrt(M)
    assert err.max() < 0.01 + 4 / np.sqrt(M)


# --- refused input ----------------------------------------------------------------------------
def test_bad_input_is_refused(sampled):
    _, r = sampled
    with pytest.raises(ValueError, match="sampled_ranks"):
        estimate_metric(np.r_[r, n + 1], N, n, "recall", 10, "bv", gamma=0.1)
    with pytest.raises(ValueError, match="sampled_ranks"):
        estimate_metric(np.r_[r, 0], N, n, "recall", 10, "sampled")
    with pytest.raises(ValueError, match="sampled_ranks"):
        estimate_metric([], N, n, "recall", 10, "sampled")
    with pytest.raises(ValueError, match="sampled_ranks"):
        estimate_metric([1.5, 2], N, n, "recall", 10, "sampled")
    with pytest.raises(ValueError, match="sample_size"):
        estimate_metric(r, 40, n, "recall", 10, "sampled")
    with pytest.raises(ValueError, match="method"):
        estimate_metric(r, N, n, "recall", 10, "guess")
    with pytest.raises(ValueError, match="metric"):
        estimate_metric(r, N, n, "f1", 10, "bv", gamma=0.1)
    for g in (-1, 2, np.nan):
        with pytest.raises(ValueError, match="gamma"):
            estimate_metric(r, N, n, "recall", 10, "bv", gamma=g)
    with pytest.raises(ValueError, match="gamma"):
        estimate_metric(r, N, n, "recall", 10, "bv")
    with pytest.raises(ValueError, match="prior"):
        estimate_metric(r, N, n, "recall", 10, "mn", prior=np.full(N, 2.0 / N))
    with pytest.raises(ValueError, match="prior"):
        estimate_metric(r, N, n, "recall", 10, "bv", gamma=0.1, prior=-np.full(N, 1.0 / N))
    with pytest.raises(ValueError, match="k"):
        estimate_metric(r, N, n, "recall", [], "sampled")
    with pytest.raises(ValueError, match="k"):
        estimate_metric(r, N, n, "recall", [5, 0], "bv", gamma=0.1)
    with pytest.raises(ValueError, match="parameter"):
        estimate_metric(r, N, n, "recall", 10, "bv", gamma=0.1, eta=0.01)
    assert set(METHODS) >= {"sampled", "rank_estimate", "cls", "bv", "mle", "wmle", "mes", "bv_mle",
                            "bv_mes", "mn_mle", "mn_mes"}


def test_estimate_metrics_routes_method_specific_options(sampled):
    _, r = sampled
    out = estimate_metrics(r, N, n, "recall", [1, 10], ["mle", "mes", "mn_mes"], eta=0.05,
                           mle={"solver": "em"})
    np.testing.assert_allclose(out["mle"]["recall"], estimate_metric(r, N, n, "recall", [1, 10], "mle", solver="em"))
    np.testing.assert_allclose(out["mes"]["recall"], estimate_metric(r, N, n, "recall", [1, 10], "mes", eta=0.05))
    np.testing.assert_allclose(out["mn_mes"]["recall"],
                               estimate_metric(r, N, n, "recall", [1, 10], "mn_mes", eta=0.05), rtol=1e-10)
