"""Cost of ``method="auto"`` beside MLE, as the command runs it: N = 3,706, n = 100, M = 6,040 (the
MovieLens-1M shape), 2 models x 9 metric@K (Recall, NDCG, AP at K = 1, 5, 10) with 200 bootstrap
replicates. The target of issue 29 is auto at most 3x MLE. The selection fits four smooth P(R) (a few
hundred likelihood evaluations on a coarse grid each), computes the fixed corrections' errors in closed
form and simulates MLE under each kept fit (N_SIM histograms, one batched EM); CLS is assessed only
where BV is within CLS_SCREEN of the best (one bounded least squares per metric@K costs seconds here).
Also a small-grid call (N = 10^7) to show it runs at catalogue scale. Run with `make bench` (or pytest benchmarks/bench_auto.py --benchmark-only)."""

import numpy as np
import pytest

from itemsampling.estimators import bootstrap_models, estimate_metric
from itemsampling.estimators.grid import rank_grid
from itemsampling.mapping import sample_beta_ranks
from itemsampling.sampling import sample_ranks

N, n, M = 3706, 100, 6040
METRICS, KS = ["recall", "ndcg", "ap"], [1, 5, 10]


@pytest.fixture(scope="module")
def ranks():
    g = np.random.default_rng(0)
    return {m: sample_ranks(sample_beta_ranks(a, N, M, rng=g), N, n, rng=g) for m, a in [("A", 0.3), ("B", 0.35)]}


@pytest.mark.filterwarnings("ignore::itemsampling._validation.ResolutionWarning")
@pytest.mark.parametrize("method,kw", [("mle", {}), ("auto", {}), ("auto", {"n_sim": 6})],
                         ids=["mle", "auto", "auto-6sims"])
def test_bench_two_models_nine_cutoffs(benchmark, ranks, method, kw):
    res = benchmark.pedantic(bootstrap_models, args=(ranks, N, n, METRICS, KS, method), kwargs={"rng": 0, **kw},
                             rounds=1, iterations=1)
    assert set(res.estimates) == {"A", "B"}


@pytest.mark.filterwarnings("ignore::itemsampling._validation.ResolutionWarning")
def test_bench_auto_on_a_grid(benchmark):
    big = 10_000_000
    g = np.random.default_rng(1)
    R = 1 + np.floor(big * g.beta(0.3, 1.0, 20_000)).astype(np.int64)
    r = sample_ranks(np.minimum(R, big), big, 200, rng=g)
    grid = rank_grid(big, 200, resolution=2.0, top=128)
    e = benchmark.pedantic(estimate_metric, args=(r, big, 200, "recall", [100, 1000], "auto"),
                           kwargs={"rng": 0, "grid": grid, "n_sim": 4}, rounds=1, iterations=1)
    assert "cls" not in e.selection.candidates and "fit bv" in e.selection.skipped
