"""The Dask backend of itemsampling.experiments.run_experiment: bit-identical to the serial run,
on a local cluster it starts and on an existing one, with the same cache and resume behaviour."""

from __future__ import annotations

import numpy as np
import pytest

from itemsampling import experiments as E
from itemsampling.estimators import estimate_metric

DS = "sim-ml100k"
NAMES = ["X", "popular"]


@pytest.fixture(scope="module")
def gr(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("ITEMSAMPLING_CACHE", str(tmp_path_factory.mktemp("cache")))
    mp.delenv(E.SCHEDULER_ENV, raising=False)
    yield E.load_global_ranks(DS, NAMES, progress=False)
    mp.undo()


def _mes(r, N, n, metric, k):
    return estimate_metric(r, N, n, metric, k, "mes")


KW = dict(sample_sizes=(20, 100), n_repeats=6, rng=7, metrics=(("recall", 10), ("ndcg", 10)),
          estimators={"sampled": E.uncorrected, "mes": _mes}, progress=False)


@pytest.fixture(scope="module")
def serial(gr):
    return E.run_experiment(gr, n_jobs=1, cache=False, backend="local", **KW)


def test_local_dask_cluster_is_bit_identical_to_serial(gr, serial):
    res = E.run_experiment(gr, backend="dask", n_jobs=2, cache=False, **KW)
    assert res.values.shape == (6, 2, 2, 2, 2)
    assert np.array_equal(res.values, serial.values)


def test_existing_cluster_cache_and_resume(gr, serial, tmp_path):
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        addr = cluster.scheduler_address
        first = E.run_experiment(gr, backend="dask", scheduler=addr, cache=tmp_path / "run", **KW)
        assert np.array_equal(first.values, serial.values)
        (path,) = (tmp_path / "run").iterdir()  # one sub-folder per cache key
        files = sorted(path.glob("repeat-*.npz"))
        assert [f.name for f in files] == [f"repeat-{i:05d}.npz" for i in range(6)]
        # an interrupted run: repeats 2 and 4 missing; only they are recomputed
        (path / "repeat-00002.npz").unlink()
        (path / "repeat-00004.npz").unlink()
        stamps = {f.name: f.stat().st_mtime_ns for f in files if f.exists()}
        again = E.run_experiment(gr, backend="dask", scheduler=addr, cache=tmp_path / "run", **KW)
        assert np.array_equal(again.values, serial.values)
        assert all((path / name).stat().st_mtime_ns == t for name, t in stamps.items())
        assert (path / "repeat-00002.npz").exists() and (path / "repeat-00004.npz").exists()
    # the cache does not depend on the backend: a serial run reads it and computes nothing
    stamps = {f.name: f.stat().st_mtime_ns for f in path.glob("repeat-*.npz")}
    cached = E.run_experiment(gr, backend="local", cache=tmp_path / "run", **KW)
    assert np.array_equal(cached.values, serial.values)
    assert {f.name: f.stat().st_mtime_ns for f in path.glob("repeat-*.npz")} == stamps


def test_backend_selection_and_errors(monkeypatch):
    monkeypatch.delenv(E.SCHEDULER_ENV, raising=False)
    assert E._check_backend(None, None) == ("local", None)
    assert E._check_backend("dask", None) == ("dask", None)
    monkeypatch.setenv(E.SCHEDULER_ENV, "tcp://10.0.0.1:8786")  # set by the runner's --scheduler
    assert E._check_backend(None, None) == ("dask", "tcp://10.0.0.1:8786")
    assert E._check_backend("local", None) == ("local", None)
    with pytest.raises(ValueError, match="backend"):
        E._check_backend("spark", None)
    with pytest.raises(ValueError, match="scheduler"):
        E._check_backend("local", "tcp://10.0.0.1:8786")
    with pytest.raises(ValueError, match="scheduler"):
        E._check_backend("dask", "")


def test_runner_passes_the_scheduler_option():
    from itemsampling import run

    _, args = run._parse(["notebooks/06-learning-rank-distribution.md", "--scheduler", "tcp://10.0.0.1:8786"])
    assert args.scheduler == "tcp://10.0.0.1:8786"
    assert run.SCHEDULER_ENV == E.SCHEDULER_ENV
