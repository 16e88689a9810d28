"""Speed of the data pipeline on sim-ml1m (6,040 users, 3,706 items, ~1M interactions): generating
the dataset, fitting every default model, global ranks (full ranking) and sampled ranking with
100 explicit decoys. Budget (issue 3): generation + fitting every default model < 2 minutes on
2 cores. Run with `make bench`; every model is fit once per round (`pedantic`, rounds=1)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from itemsampling.data import DATASETS, leave_last_out, simulate
from itemsampling.experiments import DEFAULT_MODELS, make_model
from itemsampling.ranking import global_ranks, sampled_ranks_explicit

DS = "sim-ml1m"


@pytest.fixture(scope="module")
def split():
    sim = simulate(DATASETS[DS])
    return leave_last_out(sim.observed, rng=0)


def test_bench_generate_sim_ml1m(benchmark):
    sim = benchmark.pedantic(simulate, args=(DATASETS[DS],), rounds=1, iterations=1)
    assert len(sim.observed) > 900_000


def test_bench_leave_last_out(benchmark, split):
    train, test = split
    df = __import__("pandas").concat([train, test])
    benchmark.pedantic(leave_last_out, args=(df,), kwargs={"rng": 0}, rounds=3, iterations=1)


@pytest.mark.parametrize("name", DEFAULT_MODELS)
def test_bench_fit(benchmark, split, name):
    train, _ = split
    model = benchmark.pedantic(lambda: make_model(name, 0, DS).fit(train), rounds=1, iterations=1)
    assert model.fitted_


@pytest.mark.parametrize("name", ["X", "Y", "Z", "ease"])
def test_bench_global_ranks(benchmark, split, name):
    train, test = split
    model = make_model(name, 0, DS).fit(train)
    R = benchmark.pedantic(global_ranks, args=(model, train, test), kwargs={"rng": 0}, rounds=1, iterations=1)
    assert R.size == len(test)


@pytest.mark.parametrize("name", ["X", "Y", "Z", "ease"])
def test_bench_sampled_ranks_100(benchmark, split, name):
    train, test = split
    model = make_model(name, 0, DS).fit(train)
    r = benchmark.pedantic(sampled_ranks_explicit, args=(model, train, test, 100), kwargs={"rng": 0},
                           rounds=1, iterations=1)
    assert r.max() <= 100


def test_bench_generate_and_fit_all(benchmark):
    """The budget: generate sim-ml1m and fit every default model, in one go (< 120 s)."""

    def run():
        t = time.perf_counter()
        train, _ = leave_last_out(simulate(DATASETS[DS]).observed, rng=0)
        for name in DEFAULT_MODELS:
            make_model(name, 0, DS).fit(train)
        return time.perf_counter() - t

    seconds = benchmark.pedantic(run, rounds=1, iterations=1)
    assert np.isfinite(seconds)
