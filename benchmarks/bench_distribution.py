"""Benchmarks of the rank-distribution estimators at yelp scale (Jin et al. 2021, Table 5:
N = 25,815 items, M = 25,677 users; sampled-set size n = 500 as in TORS).

Global ranks are drawn from a long-tailed distribution: theta = (R - 1)/(N - 1) ~ Beta(0.35, 1.2),
which puts about 7% of users in the top 10 and has a median rank near 3,700, the shape of a
good recommender on real data. Run with ``make bench`` (or
``pytest benchmarks/bench_distribution.py --benchmark-only``).
"""

import numpy as np
import pytest

from itemsampling.estimators import distribution as D
from itemsampling.kernel import kernel
from itemsampling.sampling import sample_ranks

N, n, M = 25_815, 500, 25_677


@pytest.fixture(scope="module")
def yelp():
    rng = np.random.default_rng(0)
    R = np.minimum(N, 1 + np.floor((N - 1) * rng.beta(0.35, 1.2, size=M))).astype(np.int64)
    r = sample_ranks(R, N, n, rng=1)
    counts = D.sampled_rank_histogram(r, n)
    K = D.cached_kernel(N, n)
    return R, r, counts, K


@pytest.fixture(scope="module")
def ml1m():
    n_items, size, users = 3706, 100, 6040
    rng = np.random.default_rng(0)
    R = np.minimum(n_items, 1 + np.floor((n_items - 1) * rng.beta(0.35, 1.2, size=users))).astype(np.int64)
    r = sample_ranks(R, n_items, size, rng=1)
    counts = D.sampled_rank_histogram(r, size)
    return counts, D.cached_kernel(n_items, size)


def test_kernel_yelp(benchmark):
    """The dense kernel P(r | R), N x n, in log space (uncached)."""
    K = benchmark.pedantic(kernel, args=(N, n), rounds=3, iterations=1)
    assert K.shape == (N, n)


def test_mle_converged_cnm_yelp(benchmark, yelp):
    """The exactly converged MLE (certified gap <= 1e-9) by CNM, kernel cached."""
    _, _, counts, K = yelp
    res = benchmark.pedantic(D.mle_cnm, args=(counts, K), rounds=3, iterations=1)
    assert res.stopped_by_tol and res.gap <= 1e-9


def test_mle_converged_cnm_yelp_with_kernel(benchmark, yelp):
    """The converged MLE from the sampled ranks, including computing the kernel (cold cache)."""
    _, r, _, _ = yelp

    def run():
        D.cached_kernel.cache_clear()
        return D.fit_rank_distribution(r, N, n, "mle", solver="cnm")

    res = benchmark.pedantic(run, rounds=2, iterations=1)
    assert res.stopped_by_tol


def test_mle_em_default_yelp(benchmark, yelp):
    """The book's default "mle": EM from uniform stopped at relative log-likelihood change 1e-6 (an
    early-stopped MLE; res.gap is its certified distance from the exact one)."""
    _, _, counts, K = yelp
    res = benchmark.pedantic(D.mle_em, args=(counts, K), rounds=2, iterations=1)
    assert res.stopped_by_tol


def test_mes_dual_yelp(benchmark, yelp):
    """MES (eta = 0.001, entropy weight eta / n) by dual Newton."""
    _, r, counts, K = yelp
    res = benchmark.pedantic(D.mes_dual, args=(counts / counts.sum(), K, D.mes_scale(0.001, n)),
                             rounds=1, iterations=1)
    assert res.stopped_by_tol


def test_mes_dual_ml1m(benchmark, ml1m):
    counts, K = ml1m
    res = benchmark.pedantic(D.mes_dual, args=(counts / counts.sum(), K, D.mes_scale(0.001, 100)),
                             rounds=5, iterations=1)
    assert res.stopped_by_tol


def test_mes_cvxpy_ml1m(benchmark, ml1m):
    """MES by cvxpy + Clarabel at MovieLens-1M scale (N = 3706, n = 100)."""
    counts, K = ml1m
    res = benchmark.pedantic(D.mes_cvxpy, args=(counts / counts.sum(), K, D.mes_scale(0.001, 100)),
                             rounds=1, iterations=1)
    assert np.isclose(res.distribution.sum(), 1.0)
