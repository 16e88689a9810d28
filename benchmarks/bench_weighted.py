"""Benchmarks of the weighted-decoy correction (Chapter 11): the point estimate of
``estimate_metric_weighted`` for M = 10^5 users with n - 1 = 99 popularity-weighted decoys each
(target: <= 2 s), beside the straightforward implementation that loops over users (per-user
Horvitz-Thompson terms in Python and one likelihood column per user instead of one per count of
decoys above the target), run at M = 10^4 because it is slow.

Data: a catalogue of N = 3,706 items with Zipf(1) popularity; decoys drawn with replacement with
p proportional to popularity; a decoy lies above the target with probability
q_u (p / p_max)^0.5, q_u ~ Beta(0.5, 3) per user (a popularity-prone model).
Run with ``make bench`` (or ``pytest benchmarks/bench_weighted.py --benchmark-only``).
"""

import numpy as np
import pytest
from scipy.stats import binom

from itemsampling.estimators import estimate_metric_weighted
from itemsampling.estimators import weighted as W
from itemsampling.estimators.distribution import _mle_em_impl

N, n = 3706, 100


def _data(M, seed=0):
    rng = np.random.default_rng(seed)
    w = 1.0 / np.arange(1, N)
    prob = w / w.sum()
    items = np.minimum(np.searchsorted(np.cumsum(prob), rng.random((M, n - 1))), N - 2)
    p = prob[items]
    q = rng.beta(0.5, 3.0, size=(M, 1))
    a = rng.random((M, n - 1)) < q * np.sqrt(p / prob.max())
    return p, a


def loop_estimate(p, a, n_items, metric, k):
    """The same estimate, user by user: Python loops for the per-user terms, a likelihood column
    per user (no grouping by count), EM on the M columns, then the same ratio-curve fit."""
    M, m = p.shape
    y = np.empty(M)
    c = np.empty(M, dtype=np.int64)
    for u in range(M):
        s, cu = 0.0, 0
        for j in range(m):
            if a[u, j]:
                s += 1.0 / p[u, j]
                cu += 1
        y[u], c[u] = s / m, cu
    prob = W._Problem(p, a, n_items, "with_replacement", False)
    K = np.empty((prob.grid.size, M))
    for u in range(M):
        K[:, u] = binom.pmf(c[u], m, prob.grid)
    P = _mle_em_impl(np.ones(M), K, tol=1e-6, max_iter=10_000).distribution
    _, R, _ = prob.finish(P, np.ones(M))
    return float(prob.value(P, R, metric, [k])[0])


@pytest.fixture(scope="module")
def big():
    return _data(100_000)


@pytest.fixture(scope="module")
def small():
    return _data(10_000, seed=1)


def test_point_estimate_1e5_users(benchmark, big):
    p, a = big
    est = benchmark(estimate_metric_weighted, p, a, N, "ndcg", 10)
    assert 0 < est < 1


def test_point_estimate_1e4_users(benchmark, small):
    p, a = small
    benchmark(estimate_metric_weighted, p, a, N, "ndcg", 10)


def test_per_user_loop_1e4_users(benchmark, small):
    p, a = small
    est = benchmark.pedantic(loop_estimate, args=(p, a, N, "ndcg", 10), rounds=1, iterations=1)
    assert est == pytest.approx(estimate_metric_weighted(p, a, N, "ndcg", 10), rel=1e-5)


# the default interval below the rule (weighted_bounds) beside the bootstrap it replaces there, both for
# NDCG and Recall at K = 10, 20, 50 (target: the bounds no slower than the bootstrap)
KS = [10, 20, 50]


def _bounds(p, a, design="with_replacement"):
    return W.weighted_bounds(p, a, N, ["ndcg", "recall"], KS, 0.95, design=design)


def _bootstrap(p, a):
    return [estimate_metric_weighted(p, a, N, m, KS, ci=0.95, n_boot=200, rng=0, interval="bootstrap")
            for m in ("ndcg", "recall")]


def test_bounds_1e5_users(benchmark, big):
    p, a = big
    b = benchmark.pedantic(_bounds, args=(p, a), rounds=3, iterations=1)
    assert np.all(b.high["ndcg"] >= b.low["ndcg"])


def test_bounds_successive_1e4_users(benchmark, small):
    p, a = small  # drawn with replacement: the successive kernel's bounds are then only looser, and as costly
    benchmark.pedantic(_bounds, args=(p, a, "successive"), rounds=3, iterations=1)


def test_bootstrap_1e4_users(benchmark, small):
    p, a = small
    benchmark.pedantic(_bootstrap, args=(p, a), rounds=1, iterations=1)


def test_bounds_1e4_users(benchmark, small):
    p, a = small
    benchmark.pedantic(_bounds, args=(p, a), rounds=3, iterations=1)
