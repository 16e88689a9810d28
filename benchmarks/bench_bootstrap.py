"""Benchmarks of the user bootstrap (estimators/bootstrap.py) at MovieLens-1M scale
(N = 3,706 items, M = 6,040 users, n = 100), 200 replicates, against the straightforward loop of
200 ``estimate_metric`` calls on resampled users.

Global ranks: theta = (R - 1)/(N - 1) ~ Beta(0.35, 1.2), as in bench_distribution.py. Run with
``make bench`` (or ``pytest benchmarks/bench_bootstrap.py --benchmark-only``).
"""

import numpy as np
import pytest

from itemsampling.estimators import estimate_metric
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
