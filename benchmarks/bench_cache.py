"""Cost of verified caches: reading a checksummed ``.npz`` the size of the sim-ml1m dataset cache
(1M observed + 5.5M true-preference pairs, int32) against a plain ``np.load`` (the unverified
reader it replaces), and the experiment cache key over 8 models x 6,040 users (content
fingerprints of ranks, pools and estimators) against the old ``stable_hash(ranks.tolist())``.
Run with `make bench`."""

from __future__ import annotations

import numpy as np
import pytest

from itemsampling.data.cache import atomic_save_npz, load_npz, stable_hash
from itemsampling.experiments import DEFAULT_MODELS, GlobalRanks, experiment_key, uncorrected


@pytest.fixture(scope="module")
def dataset_file(tmp_path_factory):
    g = np.random.default_rng(0)
    arrays = {"user": g.integers(0, 6040, 1_000_000, dtype=np.int32), "item": g.integers(0, 3706, 1_000_000, dtype=np.int32),
              "timestamp": g.integers(0, 2**31, 1_000_000), "truth_user": g.integers(0, 6040, 5_500_000, dtype=np.int32),
              "truth_item": g.integers(0, 3706, 5_500_000, dtype=np.int32)}
    path = tmp_path_factory.mktemp("cache") / "sim.npz"
    atomic_save_npz(path, cache_key="k", **arrays)
    return path


def test_bench_verified_load(benchmark, dataset_file):
    z = benchmark(load_npz, dataset_file, "k")
    assert z is not None and z["truth_user"].size == 5_500_000


def test_bench_plain_load(benchmark, dataset_file):
    def plain():
        with np.load(dataset_file) as z:
            return {k: z[k] for k in z.files}

    assert benchmark(plain)["user"].size == 1_000_000


@pytest.fixture(scope="module")
def ranks():
    g = np.random.default_rng(0)
    m = 6040
    return GlobalRanks({name: g.integers(1, 3000, m) for name in DEFAULT_MODELS}, 3706, g.integers(3000, 3706, m),
                       np.arange(m), g.integers(0, 3706, m), "sim-ml1m", True, 0)


def test_bench_experiment_key(benchmark, ranks):
    key = benchmark(experiment_key, ranks, [100], [("recall", 10)], {"sampled": uncorrected}, 0, True, "user")
    assert len(key) == 16


def test_bench_old_ranks_digest(benchmark, ranks):
    benchmark(lambda: [stable_hash(ranks[m].tolist()) for m in ranks])
