"""Chapters 10 and 11 on real-format data: each run through ``itemsampling.run`` with ``-p dataset PATH`` on a
MovieLens folder and on an NCF split the tests write. The numbers that run on the data are checked against
the folder's own interactions, the simulated sections against the calibration the page states, and the
results record the data's provenance (files, sizes, digests) and say it on the page."""

import hashlib
from pathlib import Path

import numpy as np
import pytest
from movielens_folder import write_movielens, write_ncf
from rendered import rendered_prose

from itemsampling.candidates import make_recommender, rank_masks
from itemsampling.data import gini, item_counts, leave_last_out
from itemsampling.experiments import describe_dataset, load_interactions
from itemsampling.metrics import evaluate
from itemsampling.run import run_notebook

ROOT = Path(__file__).resolve().parents[1] / "notebooks"
NB10 = ROOT / "10-candidate-sets.md"
NB11 = ROOT / "11-popularity-sampled-evaluations.md"
P10 = {"table1_datasets": ["sim-ml100k"], "models": ["random", "popular", "itemknn"], "decoy_sizes": [10, 50],
       "figure2_sizes": [10, 50], "truth_models": ["popular", "itemknn", "oracle"], "truth_dataset": "sim-ml100k",
       "truth_users": 60, "truth_decoys": 40, "truth_k": 20, "truth_repeats": 2, "n_jobs": 1, "rq1_boot": 100,
       "decoy_repeats": 2, "kernel_models": ["popular"], "kernel_sample_size": 40, "kernel_repeats": 2,
       "sweep_zipfs": [0.0, 1.0], "sweep_models": ["popular", "itemknn"], "sweep_decoys": 40, "sweep_repeats": 2,
       "seed": 2}
P11 = {"models": ["popular", "itemknn"], "sample_size": 40, "k": 10, "n_boot": 20, "valid_draws": 2,
       "coverage_repeats": 2, "sweep_dataset": "sim-ml100k", "sweep_zipfs": [0.0, 1.0], "sweep_model": "popular",
       "sweep_datasets": 2, "sweep_draws": 1, "seed": 1}


@pytest.fixture(scope="module", params=["movielens", "ncf"])
def folder(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    if request.param == "movielens":
        return request.param, write_movielens(root / "ml-data", "ratings.dat", n_users=200, n_items=300)
    return request.param, write_ncf(root / "ncf-data", n_users=200, n_items=300)


def _provenance(payload, folder):
    ds = payload["datasets"]["dataset"]
    assert ds["kind"] == "folder" and ds["path"] == str(Path(folder).resolve())
    for f in ds["files"]:
        path = next(Path(folder).rglob(f["name"]))
        assert f["bytes"] == path.stat().st_size
        assert f["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()


def test_chapter_10_on_a_folder(folder, tmp_path):
    kind, path = folder
    out = run_notebook(NB10, {**P10, "dataset": str(path)}, tmp_path / "out", progress=False, html=True)
    res = out["results"]
    _provenance(out, path)
    inter = load_interactions(str(path))
    N = inter.attrs["n_items"]
    assert res["ch10_simulated"] is False and res["ch10_N"] == N and res["ch10_M"] == inter["user"].nunique()
    assert res["ch10_gini"] == pytest.approx(gini(item_counts(inter, N)), abs=1e-12)
    # the kernel study runs on the folder: its pools are the folder's items outside each user's training set
    train, test = leave_last_out(inter, rng=np.random.default_rng([P10["seed"], 1]))
    seen = train.groupby("user")["item"].apply(set)
    pools = np.array([N - len(seen[u] - {t}) for u, t in zip(test["user"], test["item"])])
    assert res["ch10_kernel_pool_min"] == pools.min() and res["ch10_kernel_pool_max"] == pools.max()
    # the true-preference simulation stays simulated, calibrated to the folder's N and Gini index
    cal = res["ch10_truth_calibration"]
    assert cal["n_items"] == N == res["ch10_truth_N"]
    assert cal["gini_data"] == pytest.approx(res["ch10_gini"], abs=1e-12)
    gaps = {float(z): abs(g - cal["gini_data"]) for z, g in cal["gini_by_zipf"].items()}
    assert cal["zipf"] == min(gaps, key=gaps.get)
    prose = rendered_prose(tmp_path / "out" / out["html"])
    assert "glue:" not in prose
    assert describe_dataset(str(path)).replace("`", "") in prose
    assert "stay simulated" in prose and f"catalogue of {N:,} items" in prose
    assert "sim-ml100k`, the chapter's default dataset; the data here" not in prose


def _check_chapter_11(out, path, tmp_path, models):
    res = out["results"]
    _provenance(out, path)
    inter = load_interactions(str(path))
    N = inter.attrs["n_items"]
    assert res["ch11_simulated"] is False and res["ch11_models"] == models
    # the exact values of Table 11.2 are the folder's own full rankings
    train, test = leave_last_out(inter, rng=np.random.default_rng([P11["seed"], 1]))
    for i, m in enumerate(models):
        model = make_recommender(m, rng=np.random.default_rng([P11["seed"], 2, i])).fit(train, n_items=N)
        above, _ = rank_masks(model, train, test, rng=np.random.default_rng([P11["seed"], 3, i]))
        exact = evaluate(1 + above.sum(axis=1), "ndcg", 10)
        name = {"popular": "Popular", "itemknn": "ItemKNN", "userknn": "UserKNN"}[m]
        assert res["ch11_table"][f"{name}/popularity"]["exact"] == pytest.approx(exact, abs=1e-12)
    assert res["ch11_cov_users"] == len(test)
    assert res["ch11_cli_rows"] == len(test) * (P11["sample_size"] - 1)
    prose = rendered_prose(tmp_path / "out" / out["html"])
    assert "glue:" not in prose
    assert describe_dataset(str(path)).replace("`", "") in prose
    assert "only the popularity dial stays simulated" in prose
    return res, prose


def test_chapter_11_on_an_ncf_split(tmp_path):
    path = write_ncf(tmp_path / "ncf-data", n_users=200, n_items=300)
    out = run_notebook(NB11, {**P11, "dataset": str(path)}, tmp_path / "out", progress=False, html=True)
    res, _ = _check_chapter_11(out, path, tmp_path, P11["models"])
    assert res["ch11_model_replacements"] == {}


def test_chapter_11_on_a_movielens_folder_replaces_a_model_beyond_the_memory_budget(tmp_path, monkeypatch):
    """ItemKNN's four dense N x N matrices at the folder's N = 1,633 items need 85 MB: with a 60 MB budget (enough
    for the rest, the dial's simulator included) the chapter replaces it by UserKNN and says so on the page."""
    path = write_movielens(tmp_path / "ml-data", "u.data", n_users=200, n_items=2000)
    N = load_interactions(str(path)).attrs["n_items"]
    assert N == 1633 and 32 * N ** 2 > 60_000_000
    monkeypatch.setenv("ITEMSAMPLING_MEMORY_LIMIT", str(60_000_000))
    out = run_notebook(NB11, {**P11, "dataset": str(path)}, tmp_path / "out", progress=False, html=True)
    res, prose = _check_chapter_11(out, path, tmp_path, ["popular", "userknn"])
    assert res["ch11_model_replacements"] == {"itemknn": "userknn"}
    assert f"itemknn needs {32 * N ** 2 / 1e6:,.0f} MB of dense" in prose and "replaced by userknn" in prose
