"""Popularity-weighted decoys (Chapter 11): unbiasedness of the per-user estimates by exhaustive
enumeration, the closed-form variance, agreement with the uniform estimators when every
probability is equal, recovery of a known metric, the ranks-only bounds, the decoy draws, and bad
input refused naming the argument."""

import itertools

import numpy as np
import pytest

from itemsampling.estimators import MetricEstimate, estimate_metric, estimate_metric_weighted
from itemsampling.estimators.weighted import (check_decoys, draw_weighted_decoys, fit_weighted, horvitz_thompson,
                                              ht_variance, ht_variance_exact, rank_only_bounds, read_weighted_file)
from itemsampling.metrics import evaluate

P6 = np.array([0.31, 0.05, 0.22, 0.02, 0.28, 0.12])   # six non-target items, sums to 1


def _enumerate_with_replacement(p, m):
    draws = np.array(list(itertools.product(range(p.size), repeat=m)))
    return draws, p[draws].prod(axis=1)


def _enumerate_successive(p, m):
    perms = np.array(list(itertools.permutations(range(p.size), m)))
    prob = np.ones(len(perms))
    left = np.ones(len(perms))
    for j in range(m):
        prob *= p[perms[:, j]] / left
        left -= p[perms[:, j]]
    return perms, prob


@pytest.mark.parametrize("above", [[0, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0], [0, 1, 0, 1, 0, 0], [1, 1, 1, 0, 1, 1],
                                   [1, 1, 1, 1, 1, 1]])
def test_unbiased_with_replacement_by_enumeration(above):
    A = np.array(above, dtype=bool)
    draws, prob = _enumerate_with_replacement(P6, 3)
    assert prob.sum() == pytest.approx(1.0, abs=1e-12)
    Y = horvitz_thompson(P6[draws], A[draws])
    mean = prob @ Y
    assert mean == pytest.approx(A.sum(), abs=1e-12)
    # the closed-form variance, and the unbiased variance estimate, against the enumeration
    var = prob @ (Y - mean) ** 2
    assert ht_variance_exact(P6, A, 3) == pytest.approx(var, abs=1e-10)
    assert prob @ ht_variance(P6[draws], A[draws]) == pytest.approx(var, abs=1e-10)
    # hand-computed form of the variance: (sum_A 1/p - |A|^2) / (n - 1)
    assert var == pytest.approx((np.sum(1 / P6[A]) - A.sum() ** 2) / 3, abs=1e-10)


@pytest.mark.parametrize("above", [[1, 0, 0, 0, 0, 0], [0, 1, 0, 1, 0, 0], [1, 1, 0, 0, 1, 1]])
def test_des_raj_unbiased_without_replacement(above):
    A = np.array(above, dtype=bool)
    perms, prob = _enumerate_successive(P6, 4)
    assert prob.sum() == pytest.approx(1.0, abs=1e-12)
    dr = prob @ horvitz_thompson(P6[perms], A[perms], design="successive")
    assert dr == pytest.approx(A.sum(), abs=1e-12)
    # the with-replacement formula is biased under successive sampling of a large share
    naive = prob @ horvitz_thompson(P6[perms], A[perms])
    assert abs(naive - A.sum()) > 1e-3
    # the variance estimate of Des Raj's mean is unbiased too
    Y = horvitz_thompson(P6[perms], A[perms], design="successive")
    var = prob @ (Y - dr) ** 2
    assert prob @ ht_variance(P6[perms], A[perms], design="successive") == pytest.approx(var, abs=1e-10)


def test_equal_probabilities_reduce_to_the_rank_estimate_and_the_uniform_mle():
    rng = np.random.default_rng(0)
    N, n, M = 40, 10, 3000
    R = np.minimum(1 + rng.geometric(0.08, M), N)
    above = np.arange(N)[None, :] < R[:, None]
    above[:, 0] = False
    above = np.roll(above, -1, axis=1)          # items 0..R-2 above, the target is item N-1
    excluded = np.zeros((M, N), dtype=bool)
    excluded[:, N - 1] = True
    p, a = draw_weighted_decoys(above, excluded, np.ones(N), n - 1, rng=1)
    assert np.all(p == 1 / (N - 1))
    r = 1 + a.sum(axis=1)
    # Horvitz-Thompson = the rank estimate (N - 1)(r - 1)/(n - 1)
    np.testing.assert_allclose(horvitz_thompson(p, a), (N - 1) * (r - 1) / (n - 1), rtol=1e-12)
    for metric, k in [("ndcg", 5), ("recall", 10), ("ap", 3)]:
        ref = estimate_metric(r, N, n, metric, k, "mle")
        for method in ("ratio", "uniform"):
            assert estimate_metric_weighted(p, a, N, metric, k, method=method) == pytest.approx(ref, rel=1e-8)
        assert estimate_metric_weighted(p, a, N, metric, k, method="sampled") == pytest.approx(
            estimate_metric(r, N, n, metric, k, "sampled"), rel=1e-12)


def _popularity_model(noise, M=6000, N=800, seed=1, fixed_target=False):
    """Scores = log popularity + Gumbel noise (a popularity-prone model); targets drawn by popularity
    (or, with ``fixed_target``, the same middle item for every user, so every pool is the same)."""
    rng = np.random.default_rng(seed)
    w = 1.0 / np.arange(1, N + 1)
    tgt = np.full(M, N // 2) if fixed_target else rng.choice(N, M, p=w / w.sum())
    S = np.log(w)[None, :] + noise * rng.gumbel(size=(M, N))
    S[np.arange(M), tgt] += 2.0
    above = S > S[np.arange(M), tgt][:, None]
    excluded = np.zeros_like(above)
    excluded[np.arange(M), tgt] = True
    above &= ~excluded
    return above, excluded, w


def test_correction_recovers_a_known_metric_where_the_uniform_kernel_fails():
    above, excluded, w = _popularity_model(0.5)
    R = 1 + above.sum(axis=1)
    N = above.shape[1]
    p, a = draw_weighted_decoys(above, excluded, w, 49, rng=2)
    # the per-user estimate is unbiased on average over users (law of large numbers)
    Y = horvitz_thompson(p, a)
    se = Y.std(ddof=1) / np.sqrt(Y.size)
    assert abs(Y.mean() - (R - 1).mean()) < 4 * se
    truth = evaluate(R, "ndcg", 10)
    corrected = estimate_metric_weighted(p, a, N, "ndcg", 10)
    naive = estimate_metric_weighted(p, a, N, "ndcg", 10, method="uniform")
    assert abs(corrected / truth - 1) < 0.15
    assert naive / truth - 1 < -0.25            # the uniform kernel reads popular decoys as bad ranks
    # the package's uniform-kernel MLE on the sampled ranks fails the same way
    assert estimate_metric(1 + a.sum(axis=1), N, 50, "ndcg", 10, "mle") / truth - 1 < -0.25
    fit = fit_weighted(p, a, N)
    P = fit.rank_distribution()
    assert P.sum() == pytest.approx(1.0, abs=1e-9) and np.all(P >= 0)
    assert P @ np.where(np.arange(1, N + 1) <= 10, 1 / np.log2(np.arange(2, N + 2)), 0) == pytest.approx(corrected, rel=1e-6)


def test_bootstrap_interval_and_sequence_of_cutoffs():
    above, excluded, w = _popularity_model(0.5, M=2000)
    p, a = draw_weighted_decoys(above, excluded, w, 49, rng=3)
    N = above.shape[1]
    e = estimate_metric_weighted(p, a, N, "ndcg", 10, ci=0.9, n_boot=40, rng=0)
    assert isinstance(e, MetricEstimate) and e.method == "ratio" and e.n_boot == 40 and e.confidence == 0.9
    assert e.estimate == pytest.approx(estimate_metric_weighted(p, a, N, "ndcg", 10))
    assert e.low < e.high and e.low <= e.estimate * 1.05 and e.high >= e.estimate * 0.95
    # reproducible from its seed
    assert estimate_metric_weighted(p, a, N, "ndcg", 10, ci=0.9, n_boot=40, rng=0) == e
    seq = estimate_metric_weighted(p, a, N, "recall", [5, 10, 20])
    assert seq.shape == (3,) and np.all(np.diff(seq) >= 0)
    assert seq[1] == pytest.approx(estimate_metric_weighted(p, a, N, "recall", 10))
    es = estimate_metric_weighted(p, a, N, "recall", 10, method="sampled", ci=0.95, n_boot=50, rng=1)
    assert es.low <= es.estimate <= es.high


def test_rank_only_bounds_bracket_the_truth():
    above, excluded, w = _popularity_model(1.0, M=6000, N=400, fixed_target=True)
    N = above.shape[1]
    R = 1 + above.sum(axis=1)
    p, a = draw_weighted_decoys(above, excluded, w, 49, rng=4)
    # one catalogue: every user's pool is every item but the (same) target
    lo, mid, hi = rank_only_bounds(1 + a.sum(axis=1), np.delete(w, N // 2), 50, "recall", 10)
    assert 0 <= lo <= mid <= hi <= 1
    assert lo <= evaluate(R, "recall", 10) <= hi
    assert mid == pytest.approx(estimate_metric_weighted(p, a, N, "recall", 10, method="uniform"), rel=0.05)


def test_draws_follow_the_probabilities():
    M, N = 4000, 5
    w = np.array([1.0, 2.0, 3.0, 4.0, 0.0])
    above = np.zeros((M, N), dtype=bool)
    above[:, 1] = True
    excluded = np.zeros((M, N), dtype=bool)
    excluded[:, 0] = True                        # the target
    p, a = draw_weighted_decoys(above, excluded, w, 3, rng=5)
    assert set(np.round(np.unique(p), 12)) == {round(2 / 9, 12), round(3 / 9, 12), round(4 / 9, 12)}
    assert a.mean() == pytest.approx(2 / 9, abs=0.01)       # item 1 is drawn with probability 2/9
    p2, a2 = draw_weighted_decoys(above, excluded, w, 3, replacement=False, rng=6)
    # without replacement every row holds three distinct items: the probabilities of items 1..3
    assert np.allclose(np.sort(p2, axis=1), [2 / 9, 3 / 9, 4 / 9])
    assert a2.mean() == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="n_decoys must be <= 3"):
        draw_weighted_decoys(above, excluded, w, 4, replacement=False)


@pytest.mark.parametrize("probs, above, fragment", [
    ([[0.1, 0.0]], [[True, False]], "decoy_probs must hold probabilities in \\(0, 1\\]"),
    ([[0.1, 1.2]], [[True, False]], "decoy_probs must hold probabilities in \\(0, 1\\]"),
    ([[0.1, -0.2]], [[True, False]], "decoy_probs must hold probabilities in \\(0, 1\\]"),
    ([[0.1, np.nan]], [[True, False]], "decoy_probs must hold probabilities in \\(0, 1\\]"),
    ([[0.1, 0.2], [0.3]], [[True, False], [True]], "decoy_probs must be a rectangular"),
    ([[0.1, 0.2]], [[True, False], [True]], "decoy_above must be a rectangular"),
    ([[0.1, 0.2]], [[True, False, True]], "decoy_above must have the shape of decoy_probs"),
    ([[0.1, 0.2]], [[0.5, 1.0]], "decoy_above must be boolean"),
    ([[0.1, 0.2]], [[2, 0]], "decoy_above must be boolean"),
    ([[0.1, 0.2]], [["yes", "no"]], "decoy_above must be boolean"),
    ([0.1, 0.2], [True, False], "decoy_probs must be a 2-d array"),
    ("0.1", [[True]], "decoy_probs must be a 2-d array"),
])
def test_bad_input_names_the_argument(probs, above, fragment):
    with pytest.raises(ValueError, match=fragment):
        check_decoys(probs, above)
    with pytest.raises(ValueError, match=fragment):
        estimate_metric_weighted(probs, above, 100, "ndcg", 10)


def test_bad_options():
    p, a = np.full((3, 2), 0.1), np.array([[1, 0], [0, 0], [1, 1]])
    assert check_decoys(p, a)[1].dtype == bool               # 0/1 integers are boolean flags
    with pytest.raises(ValueError, match="method must be one of"):
        estimate_metric_weighted(p, a, 100, "ndcg", 10, method="mle")
    with pytest.raises(ValueError, match="design must be one of"):
        horvitz_thompson(p, a, design="poisson")
    with pytest.raises(ValueError, match="n_items must be"):
        estimate_metric_weighted(p, a, 1, "ndcg", 10)
    with pytest.raises(ValueError, match="ci must be"):
        estimate_metric_weighted(p, a, 100, "ndcg", 10, ci=1.5)
    with pytest.raises(ValueError, match="at least 2 decoys"):
        ht_variance([[0.1]], [[True]])


def test_read_weighted_file(tmp_path):
    f = tmp_path / "w.csv"
    f.write_text("user,prob,above\nb,0.1,1\nb,0.2,0\na,0.3,true\na,0.4,false\n")
    users, p, a = read_weighted_file(f)
    assert list(users) == ["b", "a"]
    np.testing.assert_allclose(p, [[0.1, 0.2], [0.3, 0.4]])
    np.testing.assert_array_equal(a, [[True, False], [True, False]])
    bad = {"user,prob,above\nb,0.1,1\nb,1.5,0\n": "line 3, column 'prob'",
           "user,prob,above\nb,0.1,1\nb,0.2,maybe\n": "line 3, column 'above'",
           "user,prob,above\nb,0.1,1\nb,0.2,0\na,0.3,1\na,0.1,0\nc,0.3,1\n": "line 6, column 'user': user 'c' has 1",
           "user,prob\nb,0.1\n": "missing column 'above'"}
    for text, fragment in bad.items():
        f.write_text(text)
        with pytest.raises(ValueError, match=fragment):
            read_weighted_file(f)
