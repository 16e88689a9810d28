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


# ---------------------------------------------------------------------------------------------
# chapter 8's repeats: kernel columns, MES Newton steps and banded BV / MN products reused
# ---------------------------------------------------------------------------------------------
def _adaptive_pairs(seed=0):
    """Distinct (n, r) pairs of an adaptive ladder 200..3,200 (as sampled_rank_table gives them)."""
    g = np.random.default_rng(seed)
    sizes = np.repeat([200, 400, 800, 1600, 3200], 40)
    ranks = np.concatenate([np.sort(g.choice(np.arange(1, s + 1), 40, replace=False))
                            for s in (200, 400, 800, 1600, 3200)])
    return sizes, ranks


def test_cached_kernel_columns_equal_the_columns_computed_at_once():
    """Grid-kernel columns served from the column and block caches, in subsets asked in turn, equal
    the columns computed at once without a cache, bit for bit: each column is the same whatever other
    columns are computed with it (so a process's history of samples cannot change an estimate), and equal
    to 1e-14 relative the former computation (the log kernel as one matrix product, whose grouping of its
    three terms may change with the number of columns), and the columns of the whole grid kernel of
    that size to rounding."""
    N = 25_815
    grid = G.rank_grid(N, 3_200, breaks=range(1, 51))
    G._grid_kernel_cached.cache_clear()
    sizes, ranks = _adaptive_pairs()
    at_once = np.zeros((grid.n_cells, sizes.size))
    for n in np.unique(sizes):
        c = np.flatnonzero(sizes == n)
        at_once[:, c] = G._grid_kernel_columns_of(grid, int(n), ranks[c], True)
    alone = G._grid_kernel_columns_of(grid, 800, ranks[sizes == 800][[7]], True)
    np.testing.assert_array_equal(alone[:, 0], at_once[:, np.flatnonzero(sizes == 800)[7]])
    first = G.grid_kernel_columns(grid, sizes[::3], ranks[::3])  # part of the pairs, then all of them
    both = G.grid_kernel_columns(grid, sizes, ranks)
    np.testing.assert_array_equal(both, at_once)
    np.testing.assert_array_equal(first, both[:, ::3])
    assert G._COLUMN_CACHE and G._wide_block.cache_info().currsize > 0
    one = grid.lo[grid.widths == 1]
    for n in (200, 3_200):  # the elementwise log kernel against the former matrix product
        c = np.flatnonzero(sizes == n)
        args = (N, np.full(c.size, n), ranks[c], one, True)
        np.testing.assert_allclose(G._column_log_kernel(*args, per_column=True), G._column_log_kernel(*args),
                                   rtol=1e-14, atol=1e-12)
    for n in (200, 800):  # the columns of the whole grid kernel of that size
        K = G.grid_kernel(grid, n)
        c = np.flatnonzero(sizes == n)
        np.testing.assert_allclose(both[:, c], K[:, ranks[c] - 1], rtol=1e-12, atol=1e-300)
    G._grid_kernel_cached.cache_clear()  # clears the columns and blocks with the kernels
    assert not G._COLUMN_CACHE and G._wide_block.cache_info().currsize == 0
    with pytest.raises(ValueError, match="ranks in 1..size"):
        G.grid_kernel_columns(grid, [200], [201])


def test_column_cache_is_keyed_on_every_input_and_bounded(monkeypatch):
    """Other grids, sizes and the without-replacement kernel get their own columns; beyond the byte
    budget the least recently used keys are dropped and the answers stay the uncached ones."""
    N = 20_000
    G._grid_kernel_cached.cache_clear()
    a, b = G.rank_grid(N, 400), G.rank_grid(N, 400, breaks=[5_000])
    ranks = np.array([1, 2, 50, 199])
    for grid in (a, b):
        for n, repl in ((400, True), (400, False), (300, True)):
            got = G.grid_kernel_columns(grid, np.full(4, n), ranks, repl)
            np.testing.assert_array_equal(got, G._grid_kernel_columns_of(grid, n, ranks, repl))
    assert len(G._COLUMN_CACHE) == 6
    monkeypatch.setattr(G, "_COLUMN_BUDGET", 1)  # every call keeps only its own (newest) key
    got = G.grid_kernel_columns(a, np.full(4, 200), ranks)
    assert len(G._COLUMN_CACHE) == 1
    np.testing.assert_array_equal(got, G._grid_kernel_columns_of(a, 200, ranks, True))
    G._grid_kernel_cached.cache_clear()


@pytest.mark.parametrize("N,n", [(25_815, 500), (20_720, 1_000)])
def test_mes_pcg_steps_agree_with_the_factorised_newton(monkeypatch, N, n):
    """MES with Newton steps by PCG preconditioned by an earlier Hessian factor (the default from 100
    observed ranks) against the former loop, a fresh factorisation at every step: both converged, the
    same cell masses to 1e-9 of their largest and the same objective to 1e-12; the PCG path is taken."""
    grid = G.rank_grid(N, n, breaks=range(1, 51))
    K = G.grid_kernel(grid, n)
    g = np.random.default_rng(1)
    R = np.minimum(N, 1 + np.floor((N - 1) * g.beta(0.4, 1.2, size=30_000))).astype(np.int64)
    p_tilde = np.bincount(1 + g.binomial(n - 1, (R - 1) / (N - 1)), minlength=n + 1)[1:] / R.size
    a = D.mes_scale(0.01, n)
    calls = []
    orig = D._stale_newton_step

    def counted(*args):
        out = orig(*args)
        calls.append(out[0] is not None)
        return out

    monkeypatch.setattr(D, "_stale_newton_step", counted)
    new = D._mes_dual_impl(p_tilde, K, a, widths=grid.widths, check=False)
    assert calls and sum(calls) >= 2
    monkeypatch.setattr(D, "_MES_PCG_MIN", 10**9)  # the former loop
    old = D._mes_dual_impl(p_tilde, K, a, widths=grid.widths, check=False)
    assert new.stopped_by_tol and old.stopped_by_tol and new.gap <= 1e-10
    assert np.max(np.abs(new.distribution - old.distribution)) <= 1e-9 * np.max(old.distribution)
    assert new.objective == pytest.approx(old.objective, rel=1e-12)


def test_mes_pcg_gives_up_on_a_poor_preconditioner():
    """A factor of an unrelated matrix: PCG does not reach its residual in _MES_PCG_ITER iterations
    and returns None (the loop then factorises afresh); with the Hessian's own factor one iteration
    gives the exact step."""
    from scipy import linalg, sparse

    g = np.random.default_rng(2)
    Ko = g.random((60, 8))
    Ks = sparse.csr_matrix(Ko)
    pi = g.dirichlet(np.ones(60))
    q = Ko.T @ pi
    reg = np.full(8, 1e-3)
    grad = g.standard_normal(8)
    H = Ko.T @ (Ko * pi[:, None]) - np.outer(q, q) + np.diag(reg)
    step, used = D._stale_newton_step(Ko, Ks, pi, q, reg, grad, linalg.cho_factor(H), 1e-3)
    np.testing.assert_allclose(step, -np.linalg.solve(H, grad), rtol=1e-8)
    assert used == 1
    bad = linalg.cho_factor(np.diag(g.random(8) * 1e6 + 1.0))
    step, used = D._stale_newton_step(Ko, Ks, pi, q, reg, grad, bad, 1e-14)
    if step is not None:  # converged anyway: then to its residual
        np.testing.assert_allclose(H @ step, -grad, rtol=1e-6, atol=1e-9)
    assert used <= D._MES_PCG_ITER


@pytest.mark.parametrize("method, kw", [("mn", {"n_users": 7_000}), ("bv", {"gamma": 0.01}),
                                        ("mn_weighted", {"n_users": 7_000})])
def test_shared_band_products_give_the_former_banded_solve(method, kw):
    """The banded BV / MN systems from the cached bands (one per prior, and MN's prior-free band of the
    cell widths) against the former assembly, one band of the weights p - |c|/M for MN: the corrected
    vectors agree to 1e-9 of their scale; two priors in turn read no stale band."""
    N, n = 20_000, 1_000
    grid, p1 = _grid_prior(N, n, 1)
    _, p2 = _grid_prior(N, n, 2)
    ks = list(range(1, 21))
    key = G._grid_blocks_key(grid)
    widths = grid.widths.astype(np.float64)
    K = G.grid_kernel(grid, n)
    bands = C._grid_row_bands(N, n, True, grid.lo.tobytes())
    u = max(hi - lo for _, _, lo, hi in bands)
    for p in (p1, p2, p1):
        got = C._corrected_on_grid(["recall", "ndcg"], ks, grid, n, method, prior=p, solver="banded", **kw)
        kind, g_, M = C._bv_mn_args(method, kw.get("gamma"), kw.get("n_users"))
        c = C._weighted_products(N, n, True, p, None, key, gram=False)[2]
        if kind == "mn":
            S = G._gram_band_rows(K, p - widths / M, bands, u)
            S[:, 0] += C._weighted_products(N, n, True, widths, None, key, gram=False)[2] / M
        else:
            S = (1.0 - g_) * G._gram_band_rows(K, p, bands, u)
            S[:, 0] += g_ * c
        rhs = C._Targets(["recall", "ndcg"], ks, N, grid).kernel_rhs(N, n, True, p)
        former = C._solve_system(S, rhs, c, "former", "zero", True).reshape(got.shape)
        scale = np.max(np.abs(former), axis=0)
        assert np.all(np.abs(got - former) <= 1e-9 * scale)
    band = C._band_products(N, n, True, grid.lo.tobytes(), p1.tobytes())
    assert not band.flags.writeable


def test_mes_pcg_steps_on_the_dense_kernel(monkeypatch):
    """The PCG steps on the dense (cached, read-only) kernel over the global ranks, as chapter 8's main
    loop runs MES (N = 3,706, n = 146): the former loop's fit to 1e-9 of the largest mass, and the sparse
    form of the cached kernel kept beside it (the caller's array itself, not a copy, reaches the loop)."""
    N, n = 3_706, 146
    K = G.cached_kernel(N, n)
    g = np.random.default_rng(5)
    R = np.minimum(N, 1 + np.floor((N - 1) * g.beta(0.4, 1.2, size=6_040))).astype(np.int64)
    p_tilde = np.bincount(1 + g.binomial(n - 1, (R - 1) / (N - 1)), minlength=n + 1)[1:] / R.size
    a = D.mes_scale(0.01, n)
    new = D.mes_dual(p_tilde, K, a)
    assert D._MES_SPARSE_CACHE.get(id(K), (None,))[0] is K
    monkeypatch.setattr(D, "_MES_PCG_MIN", 10**9)
    old = D.mes_dual(p_tilde, K, a)
    assert new.stopped_by_tol and old.stopped_by_tol
    assert np.max(np.abs(new.distribution - old.distribution)) <= 1e-9 * np.max(old.distribution)
