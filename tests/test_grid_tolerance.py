"""The default estimate (the grid above ``AUTO_GRID_BYTES``) pinned against the dense estimator it
replaced, by a stated tolerance: ``estimate_metrics`` at its defaults against ``grid=False`` for MLE,
WMLE and MES, fixed and adaptive sample sizes (TORS Sec. 6), with and without per-user pools, and the
user bootstrap on both paths, at a size where the auto rule takes the grid and the dense estimator runs in
well under a second.

The tolerance (:func:`assert_pinned`): at every cut-off :math:`K \\ge 2N/(n-1)` (the resolution
rule, :func:`itemsampling.kernel.resolves`) the estimates agree to a relative ``RTOL`` = 2e-4; at every
cut-off, resolved or not, to an absolute ``ATOL`` = 3e-4. Measured on these data: at most 6.6e-5
relative (MLE with pools) and 3.0e-5 absolute. Below the rule the metric is not determined by the data
(chapter 6) and the two EMs, stopped by the same relative-change rule after a different number of
passes (the grid's likelihood is a different function), differ by what the stopping rule leaves: up to
1.6e-4 (NDCG@10 on a draw at N = 20,000), hence the looser absolute bound. The bootstrap's percentile
ends (10 replicates, each EM stopped on its own) get ``RTOL_BOOT`` = 1e-3 (measured 4.3e-4). The
statistical error of these estimates is about 1e-2 (M = 4,000 users). ``test_a_wrong_grid_fails``
checks that the tolerance has power: three defects of the grid (the kernel of a wide cell read at its
first rank; a grid of 2 cells per kernel width instead of 8, 1.1e-3 relative off; the MES entropy over
cells instead of ranks) each break it.
"""

import warnings

import numpy as np
import pytest

from itemsampling.estimators import distribution as D
from itemsampling.estimators import estimate_metrics
from itemsampling.estimators import grid as G
from itemsampling.estimators.bootstrap import bootstrap_metrics
from itemsampling.kernel import resolves
from itemsampling.sampling import adaptive_sample_ranks, sample_ranks

N, n, M = 12_000, 100, 4_000
N0, NMAX = 25, 400
KS = [1, 10, 100, 300, 1000, 5000]
METRICS = ["recall", "ndcg"]
RTOL, ATOL = 2e-4, 3e-4
RTOL_BOOT = 1e-3


def _ranks(rng, sizes):
    return np.minimum(sizes, 1 + np.floor((sizes - 1) * rng.beta(0.35, 1.2, size=M))).astype(np.int64)


@pytest.fixture(scope="module")
def data():
    """Sampled ranks of four designs: one N or per-user pools (N_u = N - |train_u|, |train_u| in
    0..100), fixed n = 100 or adaptive n_0 = 25 .. n_max = 400, drawn in each user's own pool."""
    rng = np.random.default_rng(0)
    R = _ranks(rng, np.full(M, N))
    out = {("one", "fixed"): (sample_ranks(R, N, n, rng=1), n, N)}
    ra, sa = adaptive_sample_ranks(R, N, N0, NMAX, rng=2)
    out[("one", "adaptive")] = (ra, sa, N)
    Nu = N - rng.integers(0, 101, size=M)
    Ru = _ranks(rng, Nu)
    rp, rpa, spa = (np.empty(M, dtype=np.int64) for _ in range(3))
    for g in np.unique(Nu):
        sel = np.flatnonzero(Nu == g)
        rp[sel] = sample_ranks(Ru[sel], int(g), n, rng=rng)
        rpa[sel], spa[sel] = adaptive_sample_ranks(Ru[sel], int(g), N0, NMAX, rng=rng)
    out[("pools", "fixed")] = (rp, n, Nu)
    out[("pools", "adaptive")] = (rpa, spa, Nu)
    return out


@pytest.fixture
def default_takes_the_grid():
    """The auto rule takes the grid at these sizes by itself (their dense kernel is 9.6 MB, above
    ``AUTO_GRID_BYTES`` = 1 MiB, and the grid is coarser than the ranks at N = 12,000)."""
    assert 8 * N * n > G.AUTO_GRID_BYTES
    assert not G.rank_grid(N, n).exact


def assert_pinned(got, ref, sizes, what="", rtol=RTOL):
    """``got`` (metric -> estimates over KS) within the module's tolerance of ``ref``."""
    nmax = int(np.max(sizes))
    resolved = np.array([resolves(N, nmax, k) for k in KS])
    assert resolved.any() and not resolved.all()  # both kinds of cut-off are checked
    for m in METRICS:
        a, b = np.asarray(got[m], dtype=float), np.asarray(ref[m], dtype=float)
        assert np.all(np.abs(a - b) <= ATOL), (what, m, np.abs(a - b))
        rel = np.abs(a - b)[resolved] / np.abs(b[resolved])
        assert np.all(rel <= rtol), (what, m, rel)


def _estimates(r, sizes, n_items, method, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the resolution note below the rule; EM's convergence warnings
        return estimate_metrics(r, n_items, sizes, METRICS, KS, [method], **kw)[method]


CASES = [("one", "fixed", "mle"), ("one", "fixed", "wmle"), ("one", "fixed", "mes"), ("one", "adaptive", "mle"),
         ("pools", "fixed", "mle"), ("pools", "fixed", "wmle"), ("pools", "fixed", "mes"),
         ("pools", "adaptive", "mle")]


@pytest.mark.parametrize("pools, design, method", CASES)
def test_default_grid_is_pinned_to_the_dense_estimator(data, default_takes_the_grid, pools, design, method):
    r, sizes, n_items = data[(pools, design)]
    grid = _estimates(r, sizes, n_items, method, grid=True)
    dense = _estimates(r, sizes, n_items, method, grid=False)
    assert_pinned(grid, dense, sizes, (pools, design, method))
    default = _estimates(r, sizes, n_items, method)
    # the default is the grid (the rule takes it here, with one N or per-user pools), not the dense estimator
    for m in METRICS:
        np.testing.assert_array_equal(default[m], grid[m])
    assert any(not np.array_equal(default[m], dense[m]) for m in METRICS)


def test_default_bootstrap_on_the_grid_is_pinned_to_the_dense_bootstrap(data, default_takes_the_grid):
    """The user bootstrap on the grid (each replicate's estimator itself) against the dense one (the
    batched EM) on the same replicates: the percentile interval's ends within the same tolerance."""
    r, sizes, n_items = data[("one", "fixed")]
    kw = dict(ci=0.9, n_boot=10, rng=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        grid = bootstrap_metrics(r, n_items, sizes, METRICS, KS, ["mle"], **kw)["mle"]
        dense = bootstrap_metrics(r, n_items, sizes, METRICS, KS, ["mle"], grid=False, **kw)["mle"]
    for end in ("estimate", "low", "high"):
        assert_pinned({m: getattr(grid[m], end) for m in METRICS}, {m: getattr(dense[m], end) for m in METRICS},
                      sizes, end, rtol=RTOL if end == "estimate" else RTOL_BOOT)
    assert not np.array_equal(grid["recall"].low, dense["recall"].low)


@pytest.mark.parametrize("design, method", [("fixed", "mle"), ("fixed", "wmle"), ("adaptive", "mle")])
def test_batched_grid_replicates_are_the_grid_estimate_on_the_resampled_users(data, design, method):
    """The bootstrap's replicates of MLE / WMLE on a grid (one batched EM over the cells) are the grid
    estimator itself on each replicate's users (``grid=True``), to EM's rounding."""
    from itemsampling.estimators import bootstrap as B

    r, sizes, n_items = data[("one", design)]
    ps, pr, counts, _ = B._pair_table(r, sizes)
    C = B._draw_counts(counts, 3, np.random.default_rng(7))
    rep = B._Replicator(N, sizes, ps, pr, C, METRICS, KS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reps = rep.replicates(method, {"grid": True})
        for b in range(3):
            ub = rep._sizes(b)
            direct = estimate_metrics(rep._ranks(b), n_items, ub, METRICS, KS, [method], grid=True)[method]
            for i, m in enumerate(METRICS):
                np.testing.assert_allclose(reps[b, i], direct[m], rtol=1e-7, atol=1e-10)


# ------------------------------------------------------------------------------------- the tolerance's power
def _left_point_kernel(lo, hi, N_, n_, c0, c1):
    """A wrong grid kernel: every rank of a wide cell given the kernel of the cell's first rank."""
    from itemsampling.kernel import kernel

    return kernel(N_, n_, True, lo)[:, c0:c1] * (hi - lo + 1)[:, None]


_RANK_GRID = G.rank_grid


def _coarse_grid(n_items, sample_size, **kw):
    """A grid too coarse for the kernel: 2 cells per kernel width instead of 8."""
    return _RANK_GRID(n_items, sample_size, resolution=2.0, **kw)


@pytest.mark.parametrize("defect, method", [("left-point kernel", "mle"), ("coarse grid", "mle"),
                                            ("entropy over cells", "mes")])
def test_a_wrong_grid_fails(data, default_takes_the_grid, monkeypatch, defect, method):
    r, sizes, n_items = data[("one", "fixed")]
    dense = _estimates(r, sizes, n_items, method, grid=False)
    G._grid_kernel_cached.cache_clear()
    G._banded_kernel.cache_clear()
    if defect == "left-point kernel":
        monkeypatch.setattr(G, "_binomial_cell_sums", _left_point_kernel)
    elif defect == "coarse grid":
        monkeypatch.setattr(G, "rank_grid", _coarse_grid)
    else:  # the dual's multiplicities dropped: entropy over cells, not over global ranks
        orig = D._mes_dual_impl

        def cells_entropy(*args, widths=None, **kw):
            return orig(*args, widths=None if widths is None else np.ones_like(widths), **kw)

        monkeypatch.setattr(D, "_mes_dual_impl", cells_entropy)
    try:
        wrong = _estimates(r, sizes, n_items, method)
    finally:
        G._grid_kernel_cached.cache_clear()
        G._banded_kernel.cache_clear()
    with pytest.raises(AssertionError):
        assert_pinned(wrong, dense, sizes, defect)


@pytest.mark.parametrize("metric", ["recall", "precision"])
def test_pool_weighted_recall_by_thresholds_is_the_sum_over_pools(metric):
    """Recall@K / Precision@K with per-user pools (one threshold per pool, O(N + G)) against the brute
    force: the metric in each pool on the common grid (pool_metric_matrix without weights), weighted."""
    rng = np.random.default_rng(4)
    for N_ in (50, 3_706, 20_000):
        pools = np.unique(np.concatenate([[2, 3, N_], rng.integers(2, N_ + 1, size=200)]))
        w = rng.random(pools.size)
        w /= w.sum()
        for k in (1, 7, 1_000, N_):
            fast = G.pool_metric_matrix([metric], [k], N_, pools, weights=w)[:, 0, 0]
            brute = G.pool_metric_matrix([metric], [k], N_, pools)[:, 0, 0, :] @ w
            np.testing.assert_allclose(fast, brute, rtol=1e-12, atol=1e-15)
