"""Benchmarks of per-user catalogue sizes N_u (``n_items`` one size per user) beside one N.

Data: M = 10^5 users, the largest pool N = 3,706 (MovieLens-1M), pools N_u uniform in
[0.6 N, N] (about 1,480 distinct sizes), n = 100, rank fractions ~ Beta(0.5, 4) scaled to each
pool, sampled ranks drawn in each pool (with replacement).

Each benchmark times one call for NDCG and Recall at K = 10, 20 and the methods MLE, BV_MLE
(gamma 0.1) and MES, once with the per-user sizes and once with one N (the largest pool) on the
same sampled ranks: the fit is the same (the likelihood is free of the pools, see
``itemsampling.estimators.distribution``), so the difference is the pool part: the metric matrix
:math:`F_{N_g}(R_g(R))` over the distinct pools (N x 1,480 per metric and cut-off) and, for
BV_MLE, the right-hand sides of every pool against one factorisation. The user bootstrap
(50 replicates, MLE) is timed the same way.

Run with ``make bench`` (or ``pytest benchmarks/bench_pools.py --benchmark-only``).
"""

import warnings

import numpy as np
import pytest

from itemsampling.estimators import estimate_metrics
from itemsampling.estimators.bootstrap import bootstrap_metrics
from itemsampling.sampling import sample_ranks

N, M, n = 3_706, 100_000, 100
METRICS, KS, METHODS = ["ndcg", "recall"], [10, 20], ["mle", "bv_mle", "mes"]


def _data(seed=0):
    rng = np.random.default_rng(seed)
    pools = rng.integers(int(0.6 * N), N + 1, size=M)
    R = np.minimum(1 + np.floor(rng.beta(0.5, 4.0, size=M) * pools).astype(np.int64), pools)
    r = np.empty(M, dtype=np.int64)
    for g in np.unique(pools):
        sel = pools == g
        r[sel] = sample_ranks(R[sel], int(g), n, rng=rng)
    return pools, r


def _estimate(r, n_items):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return estimate_metrics(r, n_items, n, METRICS, KS, METHODS, gamma=0.1)


@pytest.mark.parametrize("which", ["per-user", "one-N"])
def test_estimate_metrics(benchmark, which):
    pools, r = _data()
    arg = pools if which == "per-user" else int(pools.max())
    out = benchmark.pedantic(_estimate, args=(r, arg), rounds=3, iterations=1, warmup_rounds=1)
    benchmark.extra_info["distinct_pools"] = int(np.unique(pools).size)
    assert all(np.all(np.isfinite(out[m][k])) for m in METHODS for k in METRICS)


def _boot(r, n_items):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bootstrap_metrics(r, n_items, n, METRICS, KS, ["mle"], ci=0.95, n_boot=50, rng=0)


@pytest.mark.parametrize("which", ["per-user", "one-N"])
def test_bootstrap_mle(benchmark, which):
    pools, r = _data()
    arg = pools if which == "per-user" else int(pools.max())
    out = benchmark.pedantic(_boot, args=(r, arg), rounds=1, iterations=1)
    e = out["mle"]["ndcg"]
    assert np.all(e.low <= e.estimate) and np.all(e.estimate <= e.high)
