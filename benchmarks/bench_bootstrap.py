"""Benchmarks of the user bootstrap (estimators/bootstrap.py) at MovieLens-1M scale
(N = 3,706 items, M = 6,040 users, n = 100), 200 replicates, against the straightforward loop of
200 ``estimate_metric`` calls on resampled users.

Global ranks: theta = (R - 1)/(N - 1) ~ Beta(0.35, 1.2), as in bench_distribution.py. Run with
``make bench`` (or ``pytest benchmarks/bench_bootstrap.py --benchmark-only``).
"""

import numpy as np
import pytest

from itemsampling.estimators import bootstrap_metrics, compare_estimates, estimate_metric
from itemsampling.estimators.bootstrap import bootstrap_models
from itemsampling.sampling import sample_ranks

N, n, M, B = 3706, 100, 6040, 200
PARAMS = {"sampled": {}, "bv": {"gamma": 0.1}, "mn": {}, "mle": {}, "mes": {}, "bv_mle": {"gamma": 0.1},
          "mn_mes": {}}


@pytest.fixture(scope="module")
def ml1m():
    rng = np.random.default_rng(0)
    R = np.minimum(N, 1 + np.floor((N - 1) * rng.beta(0.35, 1.2, size=M))).astype(np.int64)
    return sample_ranks(R, N, n, rng=1)


def _loop(r, method, kw):
    """The straightforward bootstrap: resample users, call estimate_metric, 200 times."""
    rng = np.random.default_rng(0)
    reps = [estimate_metric(r[rng.integers(0, r.size, r.size)], N, n, "recall", 10, method, **kw) for _ in range(B)]
    return np.quantile(reps, [0.025, 0.975])


@pytest.mark.parametrize("method", list(PARAMS))
def test_bootstrap_vectorised(benchmark, ml1m, method):
    benchmark.pedantic(estimate_metric, args=(ml1m, N, n, "recall", 10, method),
                       kwargs={"ci": 0.95, "n_boot": B, "rng": 0, **PARAMS[method]}, rounds=1, iterations=1)


@pytest.mark.parametrize("method", ["bv", "mle", "bv_mle"])
def test_bootstrap_loop(benchmark, ml1m, method):
    benchmark.pedantic(_loop, args=(ml1m, method, PARAMS[method]), rounds=1, iterations=1)


# ---------------------------------------------------------------------------------------------
# several models: shared replicates (bootstrap_models) against one bootstrap per model plus one per
# comparison and metric (the calls `python -m itemsampling estimate` made up to version 0.1.0)
# ---------------------------------------------------------------------------------------------

METRICS, KS = ["recall", "ndcg", "ap"], [5, 10, 20]


def _models(n_models):
    """``n_models`` models on the same M users, global ranks Beta(0.30 + 0.03 i, 1.2)."""
    rng = np.random.default_rng(0)
    ranks = {}
    for i in range(n_models):
        R = np.minimum(N, 1 + np.floor((N - 1) * rng.beta(0.3 + 0.03 * i, 1.2, size=M))).astype(np.int64)
        ranks[f"m{i}"] = sample_ranks(R, N, n, rng=i + 1)
    return ranks, {m: np.arange(M) for m in ranks}


def separate_bootstraps(ranks, method):
    """Version 0.1.0's estimate command: one bootstrap per model (all metrics and cut-offs), then
    for every pair one paired compare_estimates per metric, each refitting both models' priors."""
    models = list(ranks)
    for i, m in enumerate(models):
        bootstrap_metrics(ranks[m], N, n, METRICS, KS, [method], n_boot=B, rng=np.random.default_rng([0, i]))
    for i, a in enumerate(models):
        for j in range(i + 1, len(models)):
            for c, metric in enumerate(METRICS):
                compare_estimates(ranks[a], ranks[models[j]], N, n, metric, KS, method, n_boot=B,
                                  rng=np.random.default_rng([0, i, j, c]))


def shared_bootstraps(ranks, users, method):
    return bootstrap_models(ranks, N, n, METRICS, KS, method, n_boot=B, rng=0, users=users)


@pytest.mark.parametrize("method", ["mle", "mes"])
def test_two_models_separate(benchmark, method):
    ranks, _ = _models(2)
    benchmark.pedantic(separate_bootstraps, args=(ranks, method), rounds=1, iterations=1)


@pytest.mark.parametrize("method,n_models", [("mle", 2), ("mes", 2), ("mle", 10)])
def test_models_shared(benchmark, method, n_models):
    ranks, users = _models(n_models)
    res = benchmark.pedantic(shared_bootstraps, args=(ranks, users, method), rounds=1, iterations=1)
    assert len(res.comparisons) == n_models * (n_models - 1) // 2
