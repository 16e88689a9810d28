"""The Dask backend of itemsampling.experiments.run_experiment: bit-identical to the serial run,
on a local cluster it starts and on an existing one, with the same cache and resume behaviour."""

from __future__ import annotations

import re

import numpy as np
import pytest

from test_notebook_08 import PARAMS as CH08  # the chapters at their notebook tests' parameters
from test_notebook_10 import PARAMS as CH10

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
        # threads in one process (processes=False) run MES's BLAS beside each other: the last digits may
        # differ from the serial run's, so the check is by tolerance; the cache is read back bit for bit
        assert np.allclose(first.values, serial.values, rtol=1e-10, atol=1e-13)
        (path,) = (tmp_path / "run").iterdir()  # one sub-folder per cache key
        files = sorted(path.glob("repeat-*.npz"))
        assert [f.name for f in files] == [f"repeat-{i:05d}.npz" for i in range(6)]
        # an interrupted run: repeats 2 and 4 missing; only they are recomputed
        (path / "repeat-00002.npz").unlink()
        (path / "repeat-00004.npz").unlink()
        stamps = {f.name: f.stat().st_mtime_ns for f in files if f.exists()}
        again = E.run_experiment(gr, backend="dask", scheduler=addr, cache=tmp_path / "run", **KW)
        assert np.allclose(again.values, serial.values, rtol=1e-10, atol=1e-13)
        assert all((path / name).stat().st_mtime_ns == t for name, t in stamps.items())
        assert (path / "repeat-00002.npz").exists() and (path / "repeat-00004.npz").exists()
    # the cache does not depend on the backend: a serial run reads it and computes nothing
    stamps = {f.name: f.stat().st_mtime_ns for f in path.glob("repeat-*.npz")}
    cached = E.run_experiment(gr, backend="local", cache=tmp_path / "run", **KW)
    assert np.array_equal(cached.values, again.values)  # every repeat read from the cache
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


# --- issue 31, part 4: the other repeated experiments on the cluster ----------------------------
def _catalogue_ranks():
    g = np.random.default_rng(11)
    # two models on N = 300 items, 400 users, ranks skewed to the top as a recommender's are
    return {"good": np.minimum(300, 1 + g.geometric(0.05, 400)), "weak": g.integers(1, 301, 400)}


def _same(a, b):
    """Nested dicts / lists of arrays equal, bit for bit."""
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.fixture(scope="module")
def cluster():
    from distributed import LocalCluster

    # two in-process workers, reachable over tcp (a chapter's kernel, another process, connects too)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp",
                      dashboard_address=None) as c:
        yield c


def test_parallel_map_runs_in_order_on_the_cluster_and_names_an_unreachable_one(cluster, monkeypatch):
    from itemsampling._parallel import cluster_info, parallel_map

    monkeypatch.delenv(E.SCHEDULER_ENV, raising=False)
    args = [(i, i + 1) for i in range(7)]
    assert parallel_map(pow, args) == [i ** (i + 1) for i in range(7)]
    assert parallel_map(pow, args, scheduler=cluster.scheduler_address) == [i ** (i + 1) for i in range(7)]
    monkeypatch.setenv(E.SCHEDULER_ENV, cluster.scheduler_address)  # as the runner sets it
    assert list(parallel_map(pow, args, generator=True)) == [i ** (i + 1) for i in range(7)]
    info = cluster_info(cluster.scheduler_address)
    assert info == {"address": cluster.scheduler_address, "workers": 2, "threads": 2}
    with pytest.raises(ValueError, match="^scheduler must be a Dask scheduler address"):
        parallel_map(pow, args, scheduler=" ")


def test_catalogue_tables_are_the_same_with_and_without_the_cluster(cluster, monkeypatch):
    from itemsampling import catalogue as C

    monkeypatch.delenv(E.SCHEDULER_ENV, raising=False)
    R = _catalogue_ranks()
    t5 = dict(n_items=300, initial_size=10, max_size=80, fixed_size=40, n_repeats=3, ks=[5, 10], rng=3)
    ua = dict(n_items=300, item_sizes=[20, 40], initial_size=10, max_size=80, user_counts=[50, 200],
              combined_users=100, n_repeats=3, ks=[5, 10], metrics=("recall", "ndcg"), combined_size=40, rng=3)
    local_t5 = C.adaptive_against_fixed(R, **t5)
    local_ua = C.user_against_item(R, **ua)
    two_jobs = C.user_against_item(R, n_jobs=2, **ua)  # more blocks of repeats, the same values
    _same(local_ua, two_jobs)
    monkeypatch.setenv(E.SCHEDULER_ENV, cluster.scheduler_address)
    _same(local_t5, C.adaptive_against_fixed(R, **t5))
    _same(local_ua, C.user_against_item(R, **ua))
    _same(local_ua, C.user_against_item(R, n_jobs=2, **ua))
    # the values are real: relative errors in %, finite, and one per repeat
    assert set(local_t5["good"]["fixed"]) == set(C.TABLE5_FIXED)
    assert np.all(np.isfinite(local_t5["good"]["adaptive"]))
    assert local_ua["good"]["errors"]["recall"]["user 200"].shape == (3,)


def test_truth_simulations_are_the_same_with_and_without_the_cluster(cluster, monkeypatch):
    import pandas as pd

    from itemsampling.candidates import truth_experiment
    from itemsampling.data import SimulationConfig

    monkeypatch.delenv(E.SCHEDULER_ENV, raising=False)
    cfg = SimulationConfig(n_users=80, n_items=200, true_profile_mean=100, profile_median=12, seed=2)
    kw = dict(models=("popular", "itemknn", "oracle"), n_decoys=30, k=10, metrics=("ndcg", "rr"), n_repeats=3, rng=5)
    local = truth_experiment(cfg, **kw)
    monkeypatch.setenv(E.SCHEDULER_ENV, cluster.scheduler_address)
    on_cluster = truth_experiment(cfg, **kw)
    pd.testing.assert_frame_equal(local, on_cluster, check_exact=True)
    assert sorted(set(on_cluster["repeat"])) == [0, 1, 2]


def test_missing_distributed_is_an_import_error_with_the_install_hint(monkeypatch):
    import sys

    from itemsampling._parallel import cluster_info, parallel_map

    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    monkeypatch.delenv(E.SCHEDULER_ENV, raising=False)
    for call in (lambda: parallel_map(pow, [(2, 3)], scheduler="tcp://127.0.0.1:1"),
                 lambda: cluster_info("tcp://127.0.0.1:1")):
        with pytest.raises(ImportError, match=r"pip install 'itemsampling\[dask\]'"):
            call()
    assert parallel_map(pow, [(2, 3)]) == [8]  # without a scheduler nothing needs it


# the recorded run times (seconds, minutes, milliseconds, the adaptive loop's share of the time, the
# extrapolated minutes of the paper's 500 simulations)
_TIMED = re.compile(r"second|minute|runtime|_ms$|^ch08_adaptive_share$|^ch10_paper_scale_min$")


def _values(payload):
    return {k: v for k, v in payload["results"].items() if not _TIMED.search(k)}


@pytest.mark.parametrize("chapter, params", [
    ("08-adaptive-sampling.md", CH08),  # the catalogue section too (Table 5 on sim-ml100k)
    ("10-candidate-sets.md", CH10),  # the truth simulations too
])
def test_a_chapter_through_the_scheduler_records_the_local_values(cluster, chapter, params, tmp_path, monkeypatch,
                                                                   chapter_run):
    from pathlib import Path

    from itemsampling.run import run_notebook

    monkeypatch.delenv(E.SCHEDULER_ENV, raising=False)
    nb = Path(__file__).resolve().parents[1] / "notebooks" / chapter
    local = chapter_run(nb, params)  # the notebook test's run, at the same parameters
    remote = run_notebook(nb, params, tmp_path / "dask", progress=False, scheduler=cluster.scheduler_address)
    assert local["scheduler"] is None
    assert remote["scheduler"] == {"address": cluster.scheduler_address, "workers": 2, "threads": 2}
    assert _values(remote) == _values(local) and len(_values(local)) > 20
    if chapter.startswith("08"):  # Table 5 on the TORS-shaped catalogue ran on the cluster
        assert any(k.startswith("ch08_cat") for k in _values(local))
    import json

    assert json.loads((tmp_path / "dask" / "results.json").read_text())["scheduler"]["workers"] == 2
