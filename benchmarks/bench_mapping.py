"""Benchmarks of itemsampling.mapping (run with `make bench`; never part of `make test`)."""

import numpy as np

from itemsampling.mapping import beta_mapping, fit_beta, oracle_mapping, sample_beta_ranks, winner_agreement
from itemsampling.sampling import sample_ranks

N_ML20M, N_BOOKX = 20720, 139331


def test_bench_beta_mapping_n1000(benchmark):
    k = np.arange(1, 1001)
    f = benchmark(beta_mapping, k, N_ML20M, 1000, 0.5)
    assert f[-1] == np.float64(N_ML20M) or abs(f[-1] - N_ML20M) < 1e-6 * N_ML20M


def test_bench_beta_mapping_n10000_bookx(benchmark):
    k = np.arange(1, 10001)
    f = benchmark(beta_mapping, k, N_BOOKX, 10000, 0.3)
    assert abs(f[-1] - N_BOOKX) < 1e-6 * N_BOOKX


def test_bench_fit_beta_100k_users(benchmark):
    r = sample_ranks(sample_beta_ranks(0.3, N_ML20M, 100_000, rng=0), N_ML20M, 1000, rng=1)
    a = benchmark(fit_beta, r, N_ML20M, 1000)
    assert 0.2 < a < 0.5


def test_bench_oracle_mapping(benchmark):
    R = sample_beta_ranks(0.3, 3706, 6040, rng=0)
    f = benchmark(oracle_mapping, R, 3706, 100)
    assert f.shape == (100,)


def test_bench_winner_agreement_100_repeats(benchmark):
    ranks = {m: sample_beta_ranks(a, 3706, 6040, rng=i) for i, (m, a) in enumerate([("A", 0.3), ("B", 0.35), ("C", 0.4)])}
    pos = {"beta@0.5": beta_mapping([1, 2], 3706, 1000, 0.5)}
    out = benchmark.pedantic(winner_agreement, args=(ranks, 3706, 1000, [1, 2], pos),
                             kwargs={"n_repeats": 100, "rng": 0}, rounds=3, iterations=1)
    assert 0 <= out["beta@0.5"][1] <= 100
