"""Benchmarks of the grid estimators (itemsampling.estimators.grid) at catalogue scale, beside the
dense estimators at yelp scale.

Targets (issue 15; 2-core machine): N = 10^7 items, n = 1,000, M = 10^6 users: MLE, MES, BV and MN
each under 5 s and 2 GiB peak; N = 10^6, n = 10^4 under 10 s; sampling 10^6 users' sampled ranks at
N = 10^7 under 1 s. Every estimator call is timed from the sampled ranks with a cold kernel cache
(grid, kernel per cell and fit); ``extra_info["peak_MiB"]`` is the peak of memory allocated during
one call (tracemalloc, which sees numpy's buffers). Global ranks: theta = (R-1)/(N-1) ~ Beta(0.35,
1.2), the long-tailed shape of bench_distribution.py.

``test_grid_solver_1e6_items_1e4_sample`` compares the two solvers of
:func:`itemsampling.estimators.grid.grid_corrected_metrics` on the same system: ``"dense"`` (the
n x n Gram matrix and Cholesky, the straightforward implementation) against ``"banded"`` (the Gram
matrix within its band and a banded Cholesky; what ``"auto"`` picks at this size). MN uses
M = 10^5 users there, so that its Gram matrix does not cancel (with the uniform prior and M = N it
is diagonal).

Run with ``make bench`` or ``pytest benchmarks/bench_scale.py --benchmark-only``.
"""

import tracemalloc
import warnings

import numpy as np
import pytest

from itemsampling.estimators import corrected as C
from itemsampling.estimators import distribution as D
from itemsampling.estimators import estimate_metrics
from itemsampling.estimators import grid as G
from itemsampling.sampling import sample_ranks

KS = [1, 5, 10, 20, 50, 100]


def _ranks(N, M, seed=0):
    rng = np.random.default_rng(seed)
    return np.minimum(N, 1 + np.floor((N - 1) * rng.beta(0.35, 1.2, size=M))).astype(np.int64)


@pytest.fixture(scope="module")
def big():
    N, n, M = 10**7, 1000, 10**6
    R = _ranks(N, M)
    return N, n, R, sample_ranks(R, N, n, rng=1)


@pytest.fixture(scope="module")
def wide():
    N, n, M = 10**6, 10**4, 10**6
    R = _ranks(N, M)
    return N, n, R, sample_ranks(R, N, n, rng=1)


@pytest.fixture(scope="module")
def yelp():
    N, n, M = 25_815, 500, 25_677
    R = _ranks(N, M)
    return N, n, R, sample_ranks(R, N, n, rng=1)


def _grid_call(N, n, r, method):
    def run():
        G._grid_kernel_cached.cache_clear()
        return G.grid_estimate_metrics(r, N, n, ["recall", "ndcg"], KS, method)
    return run


def _peak(fn):
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def test_sample_ranks_1e6_users_1e7_items(benchmark, big):
    N, n, R, _ = big
    r = benchmark.pedantic(sample_ranks, args=(R, N, n), kwargs={"rng": 2}, rounds=3, iterations=1)
    assert r.shape == R.shape and r.max() <= n


@pytest.mark.parametrize("method", ["mle", "mes", "bv", "mn", "bv_mle", "mn_mes"])
def test_grid_1e7_items_1e3_sample(benchmark, big, method):
    N, n, R, r = big
    run = _grid_call(N, n, r, method)
    benchmark.extra_info["peak_MiB"] = round(_peak(run), 1)
    benchmark.extra_info["cells"] = G.rank_grid(N, n, breaks=KS).n_cells
    out = benchmark.pedantic(run, rounds=2, iterations=1)
    est = out[method]["recall"]
    assert np.all(np.diff(est) >= -1e-12) and np.all((est >= -1e-9) & (est <= 1 + 1e-9))


@pytest.mark.parametrize("method", ["mle", "bv", "mn", "mes"])
def test_grid_1e6_items_1e4_sample(benchmark, wide, method):
    N, n, R, r = wide
    run = _grid_call(N, n, r, method)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", D.ConvergenceWarning)
        out = benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info["cells"] = G.rank_grid(N, n, breaks=KS).n_cells
    assert np.all(np.isfinite(out[method]["recall"]))


@pytest.mark.parametrize("method", ["mle", "mes", "bv", "mn"])
@pytest.mark.parametrize("where", ["dense", "grid"])
def test_yelp_dense_against_grid(benchmark, yelp, method, where):
    """Yelp scale (Jin et al. 2021 Table 5 sizes, n = 500): today's dense estimators against the grid
    (1,503 cells instead of 25,815 ranks), from the sampled ranks with cold kernel caches."""
    N, n, R, r = yelp

    def run():
        if where == "grid":
            G._grid_kernel_cached.cache_clear()
            return G.grid_estimate_metrics(r, N, n, ["recall"], KS, method)
        D.cached_kernel.cache_clear()
        C._banded_kernel.cache_clear()
        C._prior_free.cache_clear()
        kw = {"gamma": 0.1} if method == "bv" else {}  # gamma is refused by the methods that do not use it
        return estimate_metrics(r, N, n, ["recall"], KS, method, grid=False, **kw)

    benchmark.extra_info["peak_MiB"] = round(_peak(run), 1)
    out = benchmark.pedantic(run, rounds=1, iterations=1)
    assert np.all(np.isfinite(out[method]["recall"]))


@pytest.mark.parametrize("method, kw", [("bv", {"gamma": 0.1}), ("mn", {"n_users": 10**5})])
@pytest.mark.parametrize("solver", ["dense", "banded"])
def test_grid_solver_1e6_items_1e4_sample(benchmark, method, kw, solver):
    N, n = 10**6, 10**4
    grid = G.rank_grid(N, n, breaks=KS)

    def run():
        G._grid_kernel_cached.cache_clear()
        return G.grid_corrected_metrics(["recall", "ndcg"], KS + [N], grid, n, method, solver=solver, **kw)

    out = benchmark.pedantic(run, rounds=1, iterations=1)
    np.testing.assert_allclose(out[:, 0, -1], 1.0, atol=1e-8)  # Recall@N: x = 1 solves the system
