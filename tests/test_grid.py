"""Tests of the grid estimators (itemsampling.estimators.grid): the grid, the per-cell kernel against
exact cell averages, agreement with the dense estimators, metrics from cell masses, and a run at
N = 10^7 under a memory limit that the dense kernel cannot fit in."""

import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from itemsampling.estimators import corrected as C
from itemsampling.estimators import distribution as D
from itemsampling.estimators import estimate_metrics, metric_from_distribution
from itemsampling.estimators import grid as G
from itemsampling.kernel import kernel
from itemsampling.sampling import sample_ranks

N, n, M = 20_000, 100, 6_000
KS = list(range(1, 101))
METRICS = ["recall", "ndcg", "ap"]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    R = np.minimum(N, 1 + np.floor((N - 1) * rng.beta(0.35, 1.2, size=M))).astype(np.int64)
    return R, sample_ranks(R, N, n, rng=1)


# ----------------------------------------------------------------------------- the grid
def test_grid_partitions_the_ranks():
    g = G.rank_grid(10**7, 1000, breaks=[10, 5000, 123_457])
    assert g.lo[0] == 1 and g.hi[-1] == 10**7
    np.testing.assert_array_equal(g.lo[1:], g.hi[:-1] + 1)
    assert np.all(g.widths[:1024] == 1) and g.widths[-1] == 1  # exact top ranks and last rank
    assert np.all(g.widths >= 1) and g.n_cells < 2500  # about top + log + pi * s * sqrt(n) cells
    for b in (10, 5000, 123_457):
        assert b in set(g.hi.tolist())  # a cell ends at every break
    # widths never exceed rel_width * first rank nor (N - 1) sigma_theta / s
    theta = (g.lo - 1.0) / (10**7 - 1.0)
    sig = np.sqrt((theta * (1 - theta) + 1 / 999) / 999)
    wide = g.widths > 1
    assert np.all(g.widths[wide] <= np.maximum(1, np.minimum(g.lo[wide] / 32, (10**7 - 1) * sig[wide] / 8)) + 1e-9)
    np.testing.assert_array_equal(g.cell_of([1, 1024, 1025, 10**7]), [0, 1023, 1024, g.n_cells - 1])


def test_grid_is_exact_for_small_catalogues():
    g = G.rank_grid(3706, 100)
    assert g.exact and g.n_cells == 3706
    assert not G.rank_grid(3706, 100, exact=False, top=16).exact
    assert G.rank_grid(10**6, 100, exact=True).n_cells == 10**6


def test_grid_validation():
    with pytest.raises(ValueError, match="sample_size"):
        G.rank_grid(100, 200)
    with pytest.raises(ValueError, match="resolution"):
        G.rank_grid(1000, 10, resolution=0)
    with pytest.raises(ValueError, match="rel_width"):
        G.rank_grid(1000, 10, rel_width=2)
    with pytest.raises(ValueError, match="breaks"):
        G.rank_grid(1000, 10, breaks=[0])
    with pytest.raises(ValueError, match="exact"):
        G.rank_grid(1000, 10, exact="yes")
    with pytest.raises(ValueError, match="grid"):
        G.grid_kernel("grid", 10)
    with pytest.raises(ValueError, match="n_items"):
        G.grid_fit_rank_distribution([1, 2], 2000, 10, "mle", grid=G.rank_grid(1000, 10))
    with pytest.raises(ValueError, match="method"):
        G.grid_fit_rank_distribution([1, 2], 1000, 10, "bv")
    with pytest.raises(ValueError, match="gamma"):
        G.grid_estimate_metrics([1, 2], 1000, 10, "recall", 5, "bv", gamma=0.0)
    with pytest.raises(ValueError, match="unknown parameter"):
        G.grid_estimate_metrics([1, 2], 1000, 10, "recall", 5, "mle", eta=0.1)
    with pytest.raises(ValueError, match="k"):
        G.grid_estimate_metrics([1, 2], 1000, 10, "recall", 1001, "mle")


# ----------------------------------------------------------------------------- kernel per cell
@pytest.mark.parametrize("N_, n_, replacement", [(20_000, 100, True), (20_000, 100, False), (5_000, 500, True),
                                                 (30_000, 300, False)])
def test_grid_kernel_equals_exact_cell_averages(N_, n_, replacement):
    g = G.rank_grid(N_, n_, exact=False, top=64)
    assert g.widths.max() > 10
    Kbar = G.grid_kernel(g, n_, replacement)
    K = kernel(N_, n_, replacement)
    exact = np.add.reduceat(K, g.lo - 1, axis=0) / g.widths[:, None]
    np.testing.assert_allclose(Kbar.sum(axis=1), 1.0, atol=1e-12)
    # the stated Euler-Maclaurin bound on the column totals: sum_c |c| |error| <= m / (3 (N - 1))
    col_err = np.abs((Kbar - exact) * g.widths[:, None]).sum(axis=0)
    assert col_err.max() <= (n_ - 1) / (3.0 * (N_ - 1))
    assert np.max(np.abs(Kbar - exact)) < 1e-7
    np.testing.assert_array_equal(Kbar[:64], K[:64])  # width-1 cells are kernel rows


# ----------------------------------------------------------------------------- metrics from masses
def test_grid_metric_equals_brute_force_on_an_uneven_grid():
    N_ = 50_000
    g = G.rank_grid(N_, 20, exact=False, top=10)
    rng = np.random.default_rng(3)
    w = rng.dirichlet(np.ones(g.n_cells))
    P = g.expand(w)
    np.testing.assert_allclose(g.masses(P), w, rtol=1e-12)
    for metric in ("recall", "precision", "ndcg", "ap"):
        ks = [1, 7, 10, 11, 333, 4096, 4097, 12_345, N_]  # cut-offs inside wide cells are split
        np.testing.assert_allclose(G.grid_metric(w, g, metric, ks), metric_from_distribution(P, metric, ks),
                                   rtol=1e-11, atol=1e-15)
    for metric in ("ndcg", "ap", "auc"):
        assert G.grid_metric(w, g, metric, None) == pytest.approx(metric_from_distribution(P, metric, None), rel=1e-11)


def test_ndcg_partial_sums_beyond_the_table():
    x = np.array([4097, 10_000, 123_456, 1_000_000])
    direct = np.cumsum(1.0 / np.log2(np.arange(1, 1_000_001) + 1.0))[x - 1]
    np.testing.assert_allclose(G._ndcg_cumsum(x), direct, rtol=1e-13)


# ----------------------------------------------------------------------------- agreement with dense
def test_exact_grid_reproduces_the_dense_estimators(data):
    _, r = data
    Nx, nx = 3706, 100
    rx = np.minimum(r, nx)
    g = G.rank_grid(Nx, nx)
    assert g.exact
    for method, kw in (("mle", {}), ("mle", {"solver": "cnm"}), ("mes", {"eta": 0.01})):
        dense = D.fit_rank_distribution(rx, Nx, nx, method, **kw)
        grid = G.grid_fit_rank_distribution(rx, Nx, nx, method, grid=g, **kw)
        np.testing.assert_allclose(grid.distribution, dense.distribution, atol=1e-12)
        assert grid.iterations == dense.iterations


def test_grid_agrees_with_dense_far_below_statistical_error(data):
    R, r = data
    meths = ["mes", "bv", "mn", "mn_weighted", "mn_mes", "bv_mes", "mnw_mes"]
    dense = estimate_metrics(r, N, n, METRICS, KS, meths, gamma=0.1)
    grid = G.grid_estimate_metrics(r, N, n, METRICS, KS, meths, gamma=0.1)
    assert G.rank_grid(N, n, breaks=KS).n_cells < N / 10
    # the estimators' statistical error: spread of grid MES over fresh decoy draws
    g = G.rank_grid(N, n, breaks=KS)
    reps = [G.grid_metric(G.grid_fit_rank_distribution(sample_ranks(R, N, n, rng=100 + s), N, n, "mes", grid=g)
                          .distribution, g, "recall", KS) for s in range(5)]
    sd = np.std(reps, axis=0, ddof=1)
    tol = 5e-5  # the stated tolerance; the nearly unregularised MNW systems come closest to it
    assert 10 * tol < sd.min()
    for m in meths:
        for metric in METRICS:
            diff = np.max(np.abs(np.asarray(dense[m][metric]) - grid[m][metric]))
            assert diff < (1e-6 if m in ("mes", "bv", "mn", "mn_mes", "bv_mes") else tol), (m, metric, diff)


def test_grid_em_follows_the_dense_em_pass_for_pass(data):
    _, r = data
    g = G.rank_grid(N, n, breaks=KS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", D.ConvergenceWarning)
        dense = D.fit_rank_distribution(r, N, n, "mle", tol=1e-15, max_iter=300)
        grid = G.grid_fit_rank_distribution(r, N, n, "mle", grid=g, tol=1e-15, max_iter=300)
    for metric in METRICS:
        diff = np.abs(metric_from_distribution(dense.distribution, metric, KS) - G.grid_metric(grid.distribution, g,
                                                                                             metric, KS))
        assert diff.max() < 1e-5
    assert grid.objective == pytest.approx(dense.objective, abs=1e-5)


def test_grid_cnm_is_certified_and_close_to_the_dense_mle(data):
    _, r = data
    g = G.rank_grid(N, n)
    dense = D.fit_rank_distribution(r, N, n, "mle", solver="cnm")
    grid = G.grid_fit_rank_distribution(r, N, n, "mle", grid=g, solver="cnm")
    assert grid.stopped_by_tol and grid.gap <= 1e-9
    # the grid restricts P to be uniform within cells: its optimum is at most the dense one, and close
    assert grid.objective <= dense.objective + 1e-9
    assert dense.objective - grid.objective < 1e-4
    # the grid's KKT gap, read on the dense kernel, stays small
    P = g.expand(grid.distribution)
    assert D.kkt_gap(P, D.sampled_rank_histogram(r, n), D.cached_kernel(N, n)) < 1e-3


def test_mes_entropy_counts_cell_widths():
    # no data weight to speak of: MES maximises entropy over ranks, i.e. P uniform over 1..N, so
    # cell masses proportional to the widths (an entropy over cells would make them equal)
    g = G.rank_grid(20_000, 50, exact=False, top=8)
    fit = G.grid_fit_rank_distribution(np.arange(1, 51), 20_000, 50, "mes", grid=g, eta=1e6, eta_scaling="aaai")
    np.testing.assert_allclose(fit.distribution, g.widths / 20_000, rtol=1e-4)


# ----------------------------------------------------------------------------- N = 10^7 in bounded memory
def test_estimators_run_at_ten_million_items_under_a_memory_limit():
    code = textwrap.dedent("""
        import resource, numpy as np
        limit = 3 * 2**30
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        from itemsampling.estimators import grid as G, distribution as D
        from itemsampling.sampling import sample_ranks
        N, n = 10**7, 1000
        try:
            D.cached_kernel(N, n)
            print("dense fitted")
        except MemoryError:
            print("dense MemoryError")
        except ValueError as exc:  # the size guard refuses it before allocating
            print("dense", "MemoryError" if "memory" in str(exc) else "ValueError")
        rng = np.random.default_rng(0)
        R = np.minimum(N, 1 + np.floor((N - 1) * rng.beta(0.35, 1.2, size=100_000))).astype(np.int64)
        r = sample_ranks(R, N, n, rng=1)
        out = G.grid_estimate_metrics(r, N, n, "recall", [10, 1000, 100_000], ["mle", "mes", "bv", "mn_mle"])
        true = [np.mean(R <= k) for k in (10, 1000, 100_000)]
        print("true", *true)
        for m, v in out.items():
            print(m, *v["recall"])
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    lines = dict((ln.split()[0], ln.split()[1:]) for ln in res.stdout.splitlines())
    assert "dense" in lines and lines["dense"] == ["MemoryError"]
    true = np.array(lines["true"], dtype=float)
    for m in ("mle", "mes", "mn_mle"):
        est = np.array(lines[m], dtype=float)
        # Recall@100000 (10 kernel widths N/n) is well identified: within 0.02 of the truth
        assert abs(est[2] - true[2]) < 0.02, (m, est, true)
        assert np.all(np.diff(est) >= 0) and np.all((est >= 0) & (est <= 1))


# ----------------------------------------------------------------------------- routing and per-user sizes
def test_estimate_metric_routes_to_the_grid(data, monkeypatch):
    from itemsampling.estimators import estimate_metric

    _, r = data
    ref = G.grid_estimate_metrics(r, N, n, "ndcg", [5, 50], ["mes", "bv_mes", "mn"], gamma=0.2)
    for meth, kw in (("mes", {}), ("bv_mes", {"gamma": 0.2}), ("mn", {})):
        np.testing.assert_array_equal(estimate_metric(r, N, n, "ndcg", [5, 50], meth, grid=True, **kw),
                                      ref[meth]["ndcg"])
    multi = estimate_metrics(r, N, n, ["ndcg"], [5, 50], ["mes", "bv_mes", "mn", "sampled"], gamma=0.2, grid=True)
    for meth in ("mes", "bv_mes", "mn"):
        np.testing.assert_array_equal(multi[meth]["ndcg"], ref[meth]["ndcg"])
    # default: dense below the size threshold (results unchanged), the grid above it
    monkeypatch.setattr(G, "AUTO_GRID_BYTES", 8 * N * n)
    dense = estimate_metric(r, N, n, "ndcg", [5, 50], "mes")
    np.testing.assert_array_equal(dense, estimate_metric(r, N, n, "ndcg", [5, 50], "mes", grid=False))
    assert not np.array_equal(dense, ref["mes"]["ndcg"])
    monkeypatch.setattr(G, "AUTO_GRID_BYTES", 8 * N * n - 1)
    np.testing.assert_array_equal(estimate_metric(r, N, n, "ndcg", [5, 50], "mes"), ref["mes"]["ndcg"])
    with pytest.raises(ValueError, match="cls"):
        estimate_metric(r, N, n, "ndcg", 5, "cls", grid=True)
    with pytest.raises(ValueError, match="grid"):
        estimate_metric(r, N, n, "ndcg", 5, "mes", grid=G.rank_grid(N + 1, n))


def test_per_user_sample_sizes_on_the_grid(data):
    R, _ = data
    rng = np.random.default_rng(5)
    sizes = rng.choice([50, 100, 200], size=R.size)
    r = np.concatenate([sample_ranks(R[sizes == s], N, int(s), rng=int(s)) for s in (50, 100, 200)])
    sizes = np.concatenate([sizes[sizes == s] for s in (50, 100, 200)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", D.ConvergenceWarning)
        dense = D.fit_rank_distribution(r, N, sizes, "mle", tol=1e-15, max_iter=200)
        grid = G.grid_fit_rank_distribution(r, N, sizes, "mle", tol=1e-15, max_iter=200)
    g = grid.grid
    assert g.n_cells < N / 5
    for metric in METRICS:
        diff = np.abs(metric_from_distribution(dense.distribution, metric, KS) - G.grid_metric(grid.distribution, g,
                                                                                             metric, KS))
        assert diff.max() < 1e-5
    with pytest.raises(ValueError, match="per-user sample sizes"):
        G.grid_fit_rank_distribution(r, N, sizes, "mes")
    from itemsampling.estimators import estimate_metric
    with pytest.raises(ValueError, match="per-user"):
        estimate_metric(r, N, sizes, "recall", 10, "bv", gamma=0.1, grid=True)
    est = estimate_metric(r, N, sizes, "recall", [10, 100], "mle", grid=True)
    assert np.all((est > 0) & (est < 1))


def test_mes_newton_cg_agrees_with_the_direct_newton(data, monkeypatch):
    """Beyond _MES_DIRECT observed ranks the MES dual takes inexact Newton steps by conjugate
    gradients on Hessian-vector products; both paths reach the same optimum."""
    _, r = data
    g = G.rank_grid(N, n)
    direct = G.grid_fit_rank_distribution(r, N, n, "mes", grid=g)
    monkeypatch.setattr(D, "_MES_DIRECT", 10)
    cg = G.grid_fit_rank_distribution(r, N, n, "mes", grid=g)
    assert direct.stopped_by_tol and cg.stopped_by_tol
    np.testing.assert_allclose(cg.distribution, direct.distribution, atol=1e-9)
    assert cg.objective == pytest.approx(direct.objective, abs=1e-12)


@pytest.mark.parametrize("method, kw", [("bv", {"gamma": 0.1}), ("mn", {"n_users": 10**5}),
                                        ("mn_weighted", {"n_users": 10**5})])
def test_banded_solve_equals_the_dense_solve(method, kw):
    N_, n_ = 20_000, 2_000
    grid = G.rank_grid(N_, n_, breaks=[1, 5, 10, 20, 50, 100])
    ks = [1, 5, 10, 20, 50, 100, 1000, N_]
    dense = G.grid_corrected_metrics(["recall", "ndcg"], ks, grid, n_, method, solver="dense", **kw)
    banded = G.grid_corrected_metrics(["recall", "ndcg"], ks, grid, n_, method, solver="banded", **kw)
    if method == "bv":  # n >= 1000 and a band below n / 2: "auto" takes the banded solve
        auto = G.grid_corrected_metrics(["recall", "ndcg"], ks, grid, n_, method, **kw)
        np.testing.assert_array_equal(auto, banded)
    scale = np.max(np.abs(dense), axis=0)
    assert np.all(scale > 0)
    assert np.max(np.abs(banded - dense) / scale) < 1e-9
    # Recall@N is 1 at every global rank and x = 1 solves both systems exactly (kernel rows sum to 1)
    np.testing.assert_allclose(banded[:, 0, -1], 1.0, rtol=0, atol=1e-8)


def test_band_storage_holds_the_gram_matrix_and_decouples_rows():
    N_, n_ = 3000, 300
    grid = G.rank_grid(N_, n_, top=64)
    K = G.grid_kernel(grid, n_, True)
    w = np.random.default_rng(3).uniform(0.5, 2.0, grid.n_cells)
    bands = D._row_bands(K, block=G._BAND_BLOCK)
    u = max(hi - lo for _, _, lo, hi in bands)
    S = G._gram_band_rows(K, w, bands, u)
    full = K.T @ (w[:, None] * K)
    for d in range(u + 1):
        np.testing.assert_allclose(S[:n_ - d, d], np.diagonal(full, d), rtol=1e-12, atol=1e-14 * full.max())
        np.testing.assert_array_equal(S[n_ - d:, d], 0.0)  # padding
    # beyond the band the Gram matrix is negligible (every product dropped is below 1e-30 relative)
    i, j = np.triu_indices(n_, u + 1)
    assert np.max(np.abs(full[i, j])) <= 1e-25 * full.max()
    # rows decoupled by _drop_band_rows solve exactly the subsystem without them
    S[:, 0] += 1e-3
    full = full + 1e-3 * np.eye(n_)
    drop = np.array([0, 7, 150, n_ - 1])
    ok = np.setdiff1d(np.arange(n_), drop)
    rhs = np.random.default_rng(4).normal(size=(n_, 2))
    C._drop_band_rows(S, drop)
    x = C._solve_spd_banded(S, np.where(np.isin(np.arange(n_), drop)[:, None], 0.0, rhs), "test")
    y = np.linalg.solve(full[np.ix_(ok, ok)], rhs[ok])
    np.testing.assert_allclose(x[ok], y, rtol=1e-8, atol=1e-10 * np.abs(y).max())
    np.testing.assert_array_equal(x[drop], 0.0)


def test_banded_solve_refuses_singular_systems_and_bad_solver():
    S = np.array([[1.0, 1.0], [1.0, 0.0]])  # G = [[1, 1], [1, 1]]: singular
    with pytest.raises(ValueError, match="singular"):
        C._solve_spd_banded(S, np.ones(2), "test")
    with pytest.raises(ValueError, match="sampled rank r = 2"):
        C._solve_spd_banded(np.array([[1.0, 0.0], [0.0, 0.0]]), np.ones(2), "test")
    grid = G.rank_grid(500, 50)
    with pytest.raises(ValueError, match="solver must be"):
        G.grid_corrected_metrics(["recall"], [10], grid, 50, "bv", gamma=0.1, solver="sparse")


def test_running_sums_split_the_cell_holding_a_cut_off():
    """The BV / MN right-hand sides on cells, K^T W F_k, read by running sums over the kernel's row
    blocks, with the cell holding a cut-off k contributing its ranks up to k only, equal the direct
    product with the cell means of F_k (the cell sums of grid_metric)."""
    N_, n_ = 30_000, 200
    g = G.rank_grid(N_, n_)  # no breaks: these cut-offs fall inside wide cells
    ks = [1500, 2001, 5000, 12345, 29_999, None]
    cells = [int(np.searchsorted(g.lo, k, side="right")) - 1 for k in ks[:-1]]
    assert sum(g.lo[c] < k < g.hi[c] for c, k in zip(cells, ks[:-1])) >= 3
    p = np.random.default_rng(3).dirichlet(np.ones(g.n_cells))
    names = ["recall", "precision", "ndcg", "ap"]
    T = C._Targets(names, ks, N_, g)
    rhs = T.kernel_rhs(N_, n_, True, p)
    K = G.grid_kernel(g, n_)
    direct = np.column_stack([K.T @ (p * G._cell_metric_sums(g, name, k) / g.widths) for name, k in T.pairs])
    scale = np.max(np.abs(direct), axis=0)
    assert np.all(scale > 0)
    assert np.max(np.abs(rhs - direct) / scale) < 1e-12
