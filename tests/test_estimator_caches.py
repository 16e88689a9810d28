"""The estimators' caches and fast paths (used by chapter 8's Table 8.5 repeats) against the
straightforward computation they replace: equal arrays where the arithmetic is the same, agreement
to 1e-8 relative where only the grouping of a sum changes, and every refusal kept."""

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from itemsampling.estimators import corrected as C
from itemsampling.estimators import distribution as D
from itemsampling.estimators import estimate as E
from itemsampling.estimators import grid as G
from itemsampling.metrics import metric_function


def _blas_threads():
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_single_blas_thread_limits_and_restores():
    before = _blas_threads()
    with G._single_blas_thread():
        assert _blas_threads() and all(t == 1 for t in _blas_threads())
        with G._single_blas_thread():  # nested: still one thread, and the outer limit survives the inner exit
            assert all(t == 1 for t in _blas_threads())
        assert all(t == 1 for t in _blas_threads())
    assert _blas_threads() == before


def test_rank_grid_is_cached_on_every_input():
    N, n = 30_000, 400
    a = G.rank_grid(N, n, breaks=range(1, 51))
    assert G.rank_grid(N, n, breaks=list(range(1, 51))) is a  # same inputs: the same (immutable) grid
    assert not a.lo.flags.writeable and not a.hi.flags.writeable
    fresh = G._rank_grid.__wrapped__(N, n, 8.0, 1024, 1 / 32, tuple(range(1, 51)), None)  # no cache
    assert np.array_equal(a.lo, fresh.lo) and np.array_equal(a.hi, fresh.hi)
    # every input is part of the key: other breaks, resolution, size or exactness give other grids
    b = G.rank_grid(N, n, breaks=[12_345])
    assert 12_345 in b.hi and 12_345 not in a.hi and not np.array_equal(b.lo, a.lo)
    assert G.rank_grid(N, n, resolution=4.0, breaks=range(1, 51)).n_cells < a.n_cells
    assert G.rank_grid(N, 2 * n, breaks=range(1, 51)).n_cells != a.n_cells
    assert G.rank_grid(N, n, exact=True).n_cells == N
    with pytest.raises(ValueError, match="breaks"):  # still validated before the cache
        G.rank_grid(N, n, breaks=[0])


def _grid_prior(N, n, seed=0):
    grid = G.rank_grid(N, n, breaks=range(1, 21))
    g = np.random.default_rng(seed)
    p = g.gamma(0.3, size=grid.n_cells) * grid.widths
    return grid, p / p.sum()


def test_prior_products_and_rhs_equal_the_direct_products():
    N, n = 20_000, 300
    grid, p = _grid_prior(N, n)
    key = G._grid_blocks_key(grid)
    KtDK, _, c = C._weighted_products(N, n, True, p, None, key)
    got_G, got_c = C._prior_products(N, n, True, key, p.tobytes())
    assert np.array_equal(got_G, KtDK) and np.array_equal(got_c, c)
    assert not got_G.flags.writeable
    ks = list(range(1, 21))
    rhs = C._Targets(["recall", "ndcg"], ks, N, grid).kernel_rhs(N, n, True, p)
    assert np.array_equal(C._prior_rhs(("recall", "ndcg"), tuple(ks), N, n, True, key, p.tobytes()), rhs)


def test_shared_prior_products_give_the_uncached_estimates():
    """BV and MN with two learnt priors, in turn: every result equals the one computed with empty
    caches (no stale entry is read for another prior, metric set or method)."""
    N, n = 20_000, 300
    grid, p1 = _grid_prior(N, n, 1)
    _, p2 = _grid_prior(N, n, 2)
    ks = list(range(1, 21))
    runs = [("bv", p1, {"gamma": 0.01}), ("mn", p1, {"n_users": 5000}), ("bv", p2, {"gamma": 0.01}),
            ("mn", p2, {"n_users": 5000}), ("mn", p1, {"n_users": 700})]
    cached = [C._corrected_on_grid(["recall"], ks, grid, n, m, prior=p, **kw) for m, p, kw in runs]
    for (m, p, kw), got in zip(runs, cached):
        C._prior_products.cache_clear()
        C._prior_rhs.cache_clear()
        assert np.array_equal(got, C._corrected_on_grid(["recall"], ks, grid, n, m, prior=p, **kw))
    assert not np.allclose(cached[0], cached[2])  # the two priors differ


def test_banded_choice_and_cached_bands():
    N = 20_000
    grid = G.rank_grid(N, 500)
    assert C._banded_choice(grid, 500, True, "auto") == (False, None, None, 500)  # n < 1000: dense
    banded, K, bands, u = C._banded_choice(grid, 500, True, "banded")
    assert banded and K is G.grid_kernel(grid, 500)
    assert list(bands) == G._row_bands(K, block=C._BAND_BLOCK)
    assert u == max(hi - lo for _, _, lo, hi in bands)


def test_checked_pairs_still_refuse_bad_cut_offs():
    N = 1000
    C._Targets(["recall", "ndcg"], [1, 5], N)  # valid: remembered
    C._Targets(["recall", "ndcg"], [1, 5], N)
    with pytest.raises(ValueError, match="k must be"):
        C._Targets(["recall", "ndcg"], [True, 5], N)  # equal to 1 and hashed alike, but a bool
    with pytest.raises(ValueError, match="k must be"):
        C._Targets(["recall"], [0], N)
    with pytest.raises(ValueError, match="auc"):
        C._Targets(["auc"], [5], N)
    with pytest.raises(ValueError, match="k must be"):
        C._Targets(["recall"], [[5]], N)  # unhashable: checked, never remembered


@pytest.mark.parametrize("metric", ["recall", "ndcg", "ap", "precision", "auc"])
def test_metric_from_distribution_rows_are_the_formula(metric):
    N = 2_000
    g = np.random.default_rng(3)
    P = g.dirichlet(np.full(N, 0.2))
    R = np.arange(1, N + 1)
    ks = [None] if metric == "auc" else [1, 7, 50, None, 2_000]
    expect = np.array([float(P @ metric_function(metric, k, N)(R)) for k in ks])
    for _ in range(2):  # computed, then read from the cache: the same numbers bit for bit
        assert np.array_equal(E.metric_from_distribution(P, metric, ks), expect)
    assert E.metric_from_distribution(P, metric, ks[0]) == expect[0]
    if metric != "auc":
        for bad in ([0], [True], [2.5]):
            with pytest.raises(ValueError, match="k must be"):
                E.metric_from_distribution(P, metric, bad)


@pytest.mark.parametrize("N,n", [(25_815, 500), (3_000, 200)])
def test_mes_hessian_blocks_agree_with_the_former_blocks(monkeypatch, N, n):
    """The MES dual's Hessian on 128-row blocks (fewer products) and on the former 512-row blocks:
    the same fit to 1e-8 relative, both converged."""
    grid = G.rank_grid(N, n, breaks=range(1, 51))
    K = G.grid_kernel(grid, n)
    g = np.random.default_rng(0)
    R = np.minimum(N, 1 + np.floor((N - 1) * g.beta(0.4, 1.2, size=20_000))).astype(np.int64)
    p_tilde = np.bincount(1 + g.binomial(n - 1, (R - 1) / (N - 1)), minlength=n + 1)[1:] / R.size
    a = D.mes_scale(0.01, n)
    new = D._mes_dual_impl(p_tilde, K, a, widths=grid.widths, check=False)
    monkeypatch.setattr(D, "_MES_BAND_ROWS", 512)
    old = D._mes_dual_impl(p_tilde, K, a, widths=grid.widths, check=False)
    assert new.stopped_by_tol and old.stopped_by_tol
    assert np.max(np.abs(new.distribution - old.distribution)) <= 1e-8 * np.max(old.distribution)
