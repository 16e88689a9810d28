"""Speed of the package core at yelp scale (N = 25,815, n = 500, M = 25,677). Run with `make bench`."""

import numpy as np
import pytest

from itemsampling.kernel import kernel, log_kernel
from itemsampling.sampling import expected_sampled_metric, sample_ranks, shr_moments

N, n, M = 25_815, 500, 25_677


@pytest.fixture(scope="module")
def global_ranks():
    rng = np.random.default_rng(0)
    # long-tailed ranks: a discretised Beta(0.3, 1) rank model
    return np.minimum(N, 1 + np.floor(N * rng.beta(0.3, 1.0, size=M))).astype(np.int64)


@pytest.mark.parametrize("replacement", [True, False])
def test_bench_kernel_matrix(benchmark, replacement):
    P = benchmark(kernel, N, n, replacement)
    assert P.shape == (N, n)


def test_bench_log_kernel_binomial(benchmark):
    benchmark(log_kernel, N, n, True)


@pytest.mark.parametrize("replacement", [True, False])
def test_bench_sample_ranks(benchmark, global_ranks, replacement):
    r = benchmark(sample_ranks, global_ranks, N, n, 1, replacement)
    assert r.max() <= n


def test_bench_expected_sampled_ndcg(benchmark, global_ranks):
    benchmark(expected_sampled_metric, global_ranks, N, n, "ndcg", 10)


def test_bench_shr_moments_all_k(benchmark, global_ranks):
    benchmark(shr_moments, global_ranks, N, n)
