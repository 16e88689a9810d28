"""Benchmarks of one chapter-8 repeat per catalogue: TORS Table 5's work for five models
(adaptive sampling + adaptive MLE, and a fixed-size sample with BV_MES, BV_MLE, MN_MES, MN_MLE),
with today's dense estimators beside the catalogue-scale grid estimators the chapter now uses
(``itemsampling.catalogue.adaptive_against_fixed(..., grid=True)``), and the chapter's former
loop body (which also ran the initial-size MLE, plain MLE and the equal-budget sample) for
reference.

Catalogues (N, M) as TORS Table 2 and sim-ml1m; sizes as the chapter: n_max = 3,200, fixed
n = 500 / 500 / 1,000 (500 on sim-ml1m), n_0 by ``initial_size_rule`` (n_max / 16). Global ranks:
five Beta(a, 1.2) rank models (a = 0.25 ... 0.45) as in ``bench_adaptive.py``; the cost depends
on N, M and the sizes, not on the models. One BLAS thread, as in the chapter.

``test_table5_one_repeat`` and ``test_table5_row`` time Table 8.5 as the chapter runs it (one model,
the grid estimators; a row is 100 repeats in two worker processes).

Run with ``make bench`` (or ``pytest benchmarks/bench_ch08.py --benchmark-only``).
"""

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from itemsampling import estimators as est
from itemsampling.catalogue import adaptive_against_fixed, initial_size_rule
from itemsampling.sampling import adaptive_sample_ranks, sample_ranks

CATALOGUES = {  # N, M, fixed n
    "sim-ml1m": (3_706, 6_040, 500),
    "sim-pinterest20": (9_916, 55_187, 500),
    "sim-yelp": (25_815, 25_677, 500),
    "sim-ml20m": (20_720, 136_677, 1_000),
}
N_MAX, KS = 3_200, np.arange(1, 51)
METRICS = ["recall", "ndcg", "ap"]
FIXED = ["bv_mes", "bv_mle", "mn_mes", "mn_mle", "mle"]


def _ranks(N, M, seed=0):
    g = np.random.default_rng(seed)
    return {f"m{j}": np.minimum(N, 1 + np.floor((N - 1) * g.beta(a, 1.2, size=M))).astype(np.int64)
            for j, a in enumerate((0.25, 0.3, 0.35, 0.4, 0.45))}


def former_loop_body(ranks, N, n0, nfix, rng):
    """The chapter's loop body before the catalogue section (one repeat, every model): initial-size
    MLE, adaptive sampling + adaptive MLE on three metrics, and fixed-size and equal-budget samples
    with five estimators each, all dense."""
    for R in ranks.values():
        r0 = sample_ranks(R, N, n0, rng)
        est.estimate_metric(r0, N, n0, "recall", KS, "mle")
        ra, sa = adaptive_sample_ranks(R, N, n0, N_MAX, rng)
        est.estimate_metrics(ra, N, sa, METRICS, KS, "mle")
        for n in (nfix, int(round(sa.mean()))):
            r = sample_ranks(R, N, n, rng)
            est.estimate_metrics(r, N, n, METRICS, KS, FIXED, gamma=0.01, eta=0.01)


def table5_repeat(ranks, N, n0, nfix, grid):
    with threadpool_limits(1, "blas"):
        return adaptive_against_fixed(ranks, N, n0, N_MAX, nfix, 1, KS, rng=1, grid=grid)


@pytest.mark.parametrize("catalogue", list(CATALOGUES))
@pytest.mark.parametrize("grid", [False, True], ids=["dense", "grid"])
def test_table5_repeat(benchmark, catalogue, grid):
    """One repeat of Table 5's work for five models: dense estimators (today) or the grid."""
    N, M, nfix = CATALOGUES[catalogue]
    ranks = _ranks(N, M)
    n0 = initial_size_rule(N_MAX)
    out = benchmark.pedantic(table5_repeat, args=(ranks, N, n0, nfix, grid), rounds=1, iterations=1)
    benchmark.extra_info.update({"N": N, "M": M, "n0": n0, "fixed_n": nfix})
    assert set(out) == set(ranks) and all(np.isfinite(o["adaptive"]).all() for o in out.values())


def test_grid_agrees_with_dense():
    """The two paths give the same relative errors (same draws): the grid is exact below N = 8,192
    and agrees to about 1e-8 above."""
    N, M, nfix = 9_916, 6_040, 500
    ranks = {"m": _ranks(N, M)["m2"]}
    a = table5_repeat(ranks, N, 100, nfix, False)["m"]
    b = table5_repeat(ranks, N, 100, nfix, True)["m"]
    assert np.allclose(a["adaptive"], b["adaptive"], rtol=1e-5)
    for lab in a["fixed"]:
        assert np.allclose(a["fixed"][lab], b["fixed"][lab], rtol=1e-5)


@pytest.mark.parametrize("catalogue", ["sim-ml1m", "sim-yelp"])
def test_former_loop_body(benchmark, catalogue):
    """The chapter's former loop body, one repeat of five models (dense)."""
    N, M, nfix = CATALOGUES[catalogue]
    ranks = _ranks(N, M)
    n0 = initial_size_rule(N_MAX) if catalogue != "sim-ml1m" else 100

    def run():
        with threadpool_limits(1, "blas"):
            former_loop_body(ranks, N, n0, nfix, np.random.default_rng(1))

    benchmark.pedantic(run, rounds=1, iterations=1)


# ---------------------------------------------------------------------------------------------
# Table 8.5 as the chapter runs it: one model, the catalogue-scale grid, TORS's sizes
# ---------------------------------------------------------------------------------------------
TORS_CATALOGUES = ("sim-pinterest20", "sim-yelp", "sim-ml20m")


def _one_model(catalogue):
    N, M, nfix = CATALOGUES[catalogue]
    return N, nfix, {"m": _ranks(N, M)["m3"]}  # Beta(0.4, 1.2) ranks


@pytest.mark.parametrize("catalogue", TORS_CATALOGUES)
def test_table5_one_repeat(benchmark, catalogue):
    """One repeat of one Table 8.5 row (adaptive sampling + adaptive MLE, a fixed-size sample with
    BV_MES, BV_MLE, MN_MES, MN_MLE), grid estimators, in this process, after a first repeat has
    filled the kernel caches (as in every repeat of the chapter but the first of each worker)."""
    N, nfix, ranks = _one_model(catalogue)
    n0 = initial_size_rule(N_MAX)

    def run(j):
        with threadpool_limits(1, "blas"):
            return adaptive_against_fixed(ranks, N, n0, N_MAX, nfix, 1, KS, rng=j, grid=True)

    run(0)
    out = benchmark.pedantic(run, args=(1,), rounds=3, iterations=1)
    benchmark.extra_info.update({"N": N, "fixed_n": nfix, "n0": n0, "n_max": N_MAX})
    assert np.isfinite(out["m"]["adaptive"]).all()


@pytest.mark.parametrize("catalogue", TORS_CATALOGUES)
def test_table5_row(benchmark, catalogue):
    """A whole Table 8.5 row as the chapter runs it: one model, 100 repeats, two worker processes."""
    N, nfix, ranks = _one_model(catalogue)
    n0 = initial_size_rule(N_MAX)
    out = benchmark.pedantic(adaptive_against_fixed, args=(ranks, N, n0, N_MAX, nfix, 100, KS),
                             kwargs={"rng": 0, "grid": True, "n_jobs": 2}, rounds=1, iterations=1)
    benchmark.extra_info.update({"N": N, "fixed_n": nfix, "repeats": 100, "n_jobs": 2})
    assert out["m"]["adaptive"].shape == (100,)


# ---------------------------------------------------------------------------------------------
# the chapter's two other slow cells: the main loop's estimates (estimate_draws) and the N-versus-M
# experiment (adaptive_against_fixed at TORS's absolute sizes on Beta ranks)
# ---------------------------------------------------------------------------------------------
def test_estimate_draw(benchmark):
    """One draw of the chapter's main loop (``estimate_draws``, one model) at the size rule of sim-ml1m
    (N = 3,706, n_0 = 29, n_max = 464, n = 146): initial MLE, adaptive MLE and the five fixed-size
    estimators of three metrics on two samples, dense, after a first draw has filled the caches."""
    from itemsampling.catalogue import estimate_draws, scaled_sizes

    N, M = 3_706, 6_040
    n0, n_max, nfix = scaled_sizes(N)
    R = _ranks(N, M)["m3"]
    g = np.random.default_rng(0)

    def draw():
        ra, sa = adaptive_sample_ranks(R, N, n0, n_max, g)
        return ((sample_ranks(R, N, n0, g), n0), (ra, sa),
                [(sample_ranks(R, N, n, g), n) for n in (nfix, int(round(sa.mean())))])

    estimate_draws([draw()], N, KS, METRICS, FIXED)
    out = benchmark.pedantic(estimate_draws, args=([draw()], N, KS, METRICS, FIXED), rounds=3, iterations=1)
    assert np.isfinite(out[0]["initial"]).all()


@pytest.mark.parametrize("N,M", [(3_706, 6_040), (9_916, 6_040), (25_815, 6_040), (9_916, 55_187)])
def test_nm_point_repeat(benchmark, N, M):
    """One repeat of one point of the N-versus-M experiment (TORS's absolute sizes 200, 3,200, 500; grid
    estimators), after a first repeat has filled the caches."""
    ranks = {"beta": _ranks(N, M)["m3"]}

    def run(j):
        with threadpool_limits(1, "blas"):
            return adaptive_against_fixed(ranks, N, 200, N_MAX, 500, 1, KS, rng=j, grid=True)

    run(0)
    out = benchmark.pedantic(run, args=(1,), rounds=3, iterations=1)
    assert np.isfinite(out["beta"]["adaptive"]).all()
