"""Benchmarks of Tables 9.3-9.4 (TORS Tables 8-9) at the papers' scale: one repeat for three
models on a pinterest-20-shaped catalogue (N = 9,916, M = 55,187; item sizes 100 and 500, adaptive
sizes by chapter 8's rule, 1,000 / 5,000 / 10,000 users, 1,000 users + 100 items), with the
chapter's former loop body (dense estimators, one repeat after another, every column of a repeat
in turn, user samples through ``metric_curve``) beside ``itemsampling.catalogue.user_against_item``
(grid estimators, one column over a block of repeats so that the estimators' cached kernels are
reused, user samples as rank histograms times the table of F(R)).

Global ranks: three Beta(a, 1.2) rank models (a = 0.25, 0.3, 0.35) as in ``bench_ch08.py``; the
cost depends on N, M and the sizes, not on the models. One BLAS thread, as in the chapter.

Run with ``make bench`` (or ``pytest benchmarks/bench_ch09.py --benchmark-only``).
"""

import warnings

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from itemsampling.catalogue import scaled_sizes, user_against_item
from itemsampling.estimators import estimate_metrics
from itemsampling.metrics import metric_curve
from itemsampling.sampling import adaptive_sample_ranks, sample_ranks

N, M = 9_916, 55_187
KS = list(range(1, 51))
METRICS = ["recall", "ndcg"]
ITEM_SIZES, USER_COUNTS, COMBINED = [100, 500], [1_000, 5_000, 10_000], 1_000
N0, NMAX, _ = scaled_sizes(N)


def _ranks(seed=0):
    g = np.random.default_rng(seed)
    return {f"m{j}": np.minimum(N, 1 + np.floor((N - 1) * g.beta(a, 1.2, size=M))).astype(np.int64)
            for j, a in enumerate((0.25, 0.3, 0.35))}


def former_repeat(ranks, rep=0, seed=0):
    """The chapter's former loop body for one repeat of every model (dense estimators)."""
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, R in enumerate(ranks.values()):
            g = np.random.default_rng([seed, 3, i, rep])
            for n in ITEM_SIZES:
                estimate_metrics(sample_ranks(R, N, n, rng=g), N, n, METRICS, KS, ["mn_mes"], eta=0.01)
            ra, sa = adaptive_sample_ranks(R, N, N0, NMAX, rng=g)
            estimate_metrics(ra, N, sa, METRICS, KS, ["mle"])
            for m in USER_COUNTS:
                idx = g.choice(M, size=m, replace=False)
                out[(i, m)] = [metric_curve(R[idx], met, KS) for met in METRICS]
            idx = g.choice(M, size=COMBINED, replace=False)
            estimate_metrics(sample_ranks(R[idx], N, 100, rng=g), N, 100, METRICS, KS, ["mn_mes"], eta=0.01)
    return out


def new_repeats(ranks, n_repeats, grid=True):
    return user_against_item(ranks, N, ITEM_SIZES, N0, NMAX, USER_COUNTS, COMBINED, n_repeats, KS, METRICS,
                             rng=0, grid=grid)


def test_former_repeat(benchmark):
    """One repeat, three models: the chapter's former loop (dense estimators)."""
    ranks = _ranks()
    with threadpool_limits(1, "blas"):
        benchmark.pedantic(former_repeat, args=(ranks,), rounds=1, iterations=1)
    benchmark.extra_info.update({"N": N, "M": M, "n0": N0, "n_max": NMAX})


@pytest.mark.parametrize("n_repeats", [1, 10])
def test_user_against_item(benchmark, n_repeats):
    """``n_repeats`` repeats, three models, through user_against_item (divide by n_repeats for the
    time per repeat: kernels are computed once per block of repeats)."""
    ranks = _ranks()
    out = benchmark.pedantic(new_repeats, args=(ranks, n_repeats), rounds=1, iterations=1)
    benchmark.extra_info.update({"N": N, "M": M, "n_repeats": n_repeats})
    assert all(np.isfinite(v).all() for o in out.values() for e in o["errors"].values() for v in e.values())


def test_user_columns_agree_with_metric_curve():
    """The histogram route gives the user-sampling errors of metric_curve on the same draws."""
    ranks = {"m": _ranks()["m1"]}
    out = user_against_item(ranks, N, [100], N0, NMAX, [1_000], 100, 2, KS, METRICS, rng=3)
    R = ranks["m"]
    for j in range(2):
        g = np.random.default_rng([3, 0, j, 3])
        sub = R[g.choice(M, size=1_000, replace=False)]
        for met in METRICS:
            truth = metric_curve(R, met, KS)
            exp = 100 * np.mean(np.abs(metric_curve(sub, met, KS) - truth) / truth)
            assert out["m"]["errors"][met]["user 1,000"][j] == pytest.approx(exp, rel=1e-10)
