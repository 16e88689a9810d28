"""Benchmarks of itemsampling.estimators.corrected at yelp scale (TORS Table 2: N = 25,815 items,
M = 25,677 users, n = 500). Run with `make bench`; never part of `make test`.

Target (issue 5): BV and MN under 1 second at this scale. "cold" includes building the banded
kernel cache for (N, n); "warm" is every later call with the same (N, n), e.g. every repeat of an
experiment, where only the prior changes.
"""

import numpy as np

from itemsampling.estimators import corrected as C
from itemsampling.estimators import corrected_metric, corrected_metrics, estimate_metric
from itemsampling.sampling import sample_ranks

N, n, M = 25_815, 500, 25_677
KS = np.arange(1, 51)


def _prior():
    rng = np.random.default_rng(0)
    R = np.minimum(N, 1 + rng.geometric(1 / 800, size=M))
    p = np.bincount(R, minlength=N + 1)[1:] + 1e-3  # dense, like an MES estimate
    return p / p.sum()


def _clear():
    C._banded_kernel.cache_clear()
    C._prior_free.cache_clear()


def test_bench_banded_kernel_cold(benchmark):
    def run():
        _clear()
        return C._banded_kernel(N, n, True)
    blocks = benchmark.pedantic(run, rounds=3, iterations=1)
    assert blocks[-1][1] == N


def test_bench_bv_uniform_cold(benchmark):
    def run():
        _clear()
        return corrected_metric("recall", 10, N, n, "bv", gamma=0.01)
    x = benchmark.pedantic(run, rounds=3, iterations=1)
    assert np.all(np.isfinite(x))


def test_bench_bv_uniform_warm(benchmark):
    corrected_metric("recall", 10, N, n, "bv", gamma=0.01)
    x = benchmark(corrected_metric, "recall", 10, N, n, "bv", gamma=0.01)
    assert np.all(np.isfinite(x))


def test_bench_bv_dense_prior_warm_50_cutoffs(benchmark):
    p = _prior()
    C._banded_kernel(N, n, True)
    x = benchmark(corrected_metrics, "recall", KS, N, n, "bv", prior=p, gamma=0.01)
    assert x.shape == (n, 50)


def test_bench_mn_dense_prior_warm(benchmark):
    p = _prior()
    C._prior_free(N, n, True)
    x = benchmark(corrected_metric, "recall", 10, N, n, "mn", prior=p, n_users=M)
    assert np.all(np.isfinite(x))


def test_bench_mn_dense_prior_warm_50_cutoffs(benchmark):
    p = _prior()
    C._prior_free(N, n, True)
    x = benchmark(corrected_metrics, "recall", KS, N, n, "mn", prior=p, n_users=M)
    assert x.shape == (n, 50)


def test_bench_mn_dense_prior_cold(benchmark):
    p = _prior()

    def run():
        _clear()
        return corrected_metric("recall", 10, N, n, "mn", prior=p, n_users=M)
    x = benchmark.pedantic(run, rounds=3, iterations=1)
    assert np.all(np.isfinite(x))


def test_bench_estimate_metric_mn_known_prior_50_cutoffs(benchmark):
    p = _prior()
    R = np.minimum(N, 1 + np.random.default_rng(1).geometric(1 / 800, size=M))
    r = sample_ranks(R, N, n, rng=2)
    C._prior_free(N, n, True)
    est = benchmark(estimate_metric, r, N, n, "recall", KS, "mn", prior=p)
    assert est.shape == (50,)


def test_bench_bv_uniform_2048_cutoffs(benchmark):
    # the right-hand sides for Recall@K, K = 1..2048 (one chunk of the BV rank-distribution
    # baseline, TORS Eq. 28) by running sums over global ranks
    C._prior_free(N, n, True)
    ks = np.arange(1, 2049)
    x = benchmark(corrected_metrics, "recall", ks, N, n, "bv", gamma=0.1)
    assert x.shape == (n, 2048)
