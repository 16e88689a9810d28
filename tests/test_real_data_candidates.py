"""Chapters 10 and 11 on real-format data: each run through ``itemsampling.run`` with ``-p dataset PATH`` on a
MovieLens folder and on an NCF split the tests write. The numbers that run on the data are checked against
the folder's own interactions, the simulated sections against the calibration the page states, and the
results record the data's provenance (files, sizes, digests) and say it on the page."""

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from movielens_folder import write_movielens, write_ncf
from rendered import rendered_prose

from itemsampling.candidates import make_recommender, rank_masks
from itemsampling.data import drop_short_users, gini, item_counts, leave_last_out
from itemsampling.experiments import describe_dataset, load_interactions
from itemsampling.metrics import evaluate
from itemsampling.models import EASE
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
    """EASE's dense N x N matrix and a block of its columns at the folder's N = 2,984 items need 85 MB: with a 60 MB
    budget (enough for the rest, the dial's simulator included) the chapter replaces it by UserKNN and says so on
    the page, and keeps item-kNN, whose sparse top-k similarity (k = 50) fits."""
    from itemsampling.models import ItemKNN

    path = write_movielens(tmp_path / "ml-data", "u.data", n_users=200, n_items=6000)
    N = load_interactions(str(path)).attrs["n_items"]
    monkeypatch.setenv("ITEMSAMPLING_MEMORY_LIMIT", str(60_000_000))
    need = EASE().item_matrix_bytes(N)
    assert N == 2984 and need == 8 * N ** 2 + 24 * N * 187 > 60_000_000 >= ItemKNN(k=50).item_matrix_bytes(N)
    out = run_notebook(NB11, {**P11, "models": ["popular", "itemknn", "ease"], "dataset": str(path)}, tmp_path / "out",
                       progress=False, html=True)
    res, prose = _check_chapter_11(out, path, tmp_path, ["popular", "itemknn", "userknn"])
    assert res["ch11_model_replacements"] == {"ease": "userknn"}
    assert f"ease needs {need / 1e6:,.0f} MB for one dense" in prose and "replaced by userknn" in prose
    assert "a block of its columns, more than the memory budget of 60 MB" in prose


def _sparse_table(path: Path, n_users: int = 150, n_items: int = 3000, singles: int = 6, seed: int = 0) -> Path:
    """A ``user,item`` CSV of ``n_users`` users, the first ``singles`` with a single interaction and the others with
    5-24 items drawn with Zipf-like popularity from a long catalogue: a simulation calibrated to it (Figure 10.4)
    with few users leaves many of its items without a training interaction, the shape of CiteULike-a."""
    g = np.random.default_rng(seed)
    pop = 1.0 / np.arange(1, n_items + 1) ** 0.5
    pop /= pop.sum()
    rows = []
    for u in range(n_users):
        k = 1 if u < singles else int(g.integers(5, 25))
        rows += [(u, int(i)) for i in g.choice(n_items, size=k, replace=False, p=pop)]
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=["user", "item"]).to_csv(path, index=False)
    return path


def test_chapter_10_caps_the_truth_decoys_at_the_positive_popularity_pool(tmp_path):
    """At the rule's decoy size (1,000 per 3,706 items of the data's catalogue) the popularity-weighted draw of a
    30-user simulation has fewer items of positive training popularity than decoys (the failure of chapter 10 on
    CiteULike-a); the chapter caps the size at the smallest such pool and says so. Users with a single interaction
    are left out, and the page says how many."""
    path = _sparse_table(tmp_path / "data" / "log.csv")
    params = {**{k: v for k, v in P10.items() if k != "truth_decoys"}, "dataset": str(path), "truth_users": 30,
              "models": ["random", "popular", "itemknn", "ease", "userknn"], "sweep_models": ["popular", "ease"],
              "truth_models": ["popular", "itemknn", "ease", "oracle"], "dense_max_items": 100, "max_cells": 120_000}
    out = run_notebook(NB10, params, tmp_path / "out", progress=False, html=True)
    res = out["results"]
    inter = load_interactions(str(path))
    N = inter.attrs["n_items"]
    counts = np.bincount(inter["user"].to_numpy())
    singles = int(np.sum(counts == 1))
    assert singles == 6
    assert res["ch10_dropped_users"] == singles
    # 144 users x N items exceed max_cells: a uniform random sample of max_cells // N users runs
    assert 144 * N > 120_000 and res["ch10_sampled_users"] == [120_000 // N, 144] == [res["ch10_M"], 144]
    asked = int(round(1000 * N / 3706))
    pools = res["ch10_truth_pool_min"]
    assert res["ch10_truth_decoys_asked"] == asked
    assert pools["popularity"] < asked  # the failure shape: the scaled size does not fit the popular pool
    assert res["ch10_truth_decoys"] == min(pools["uniform"], pools["popularity"]) == pools["popularity"]
    prose = rendered_prose(tmp_path / "out" / out["html"])
    assert "glue:" not in prose
    assert (f"{singles:,} of the {inter['user'].nunique():,} users in the data have a single interaction, which no "
            f"split can divide into a training and a held-out part, so they are left out: the chapter runs on the "
            "other 144.") in prose
    assert (f"Every model scores and ranks the 144 × {N:,} user-item matrix for every candidate set and repeat, "
            f"{144 * N / 1e9:,.2f} billion cells, above max_cells = 120,000, so the chapter runs on a uniform random "
            f"sample of {120_000 // N:,} of these users") in prose
    assert (f"This is fewer than the {asked:,} the size rule gives: a decoy size must fit the pool of every test "
            "user in every simulation, and the popularity-weighted draw can only pick items of positive training "
            f"popularity; with 30 simulated users many of the {N:,} items have none, so the smallest such pool (over "
            f"the users and the 2 simulations) holds {pools['popularity']:,} items") in prose
    assert f"; every simulation therefore draws {pools['popularity']:,}." in prose
    # above dense_max_items EASE (a dense N x N matrix) is replaced by UserKNN where UserKNN does not run already, else
    # left out; item-kNN (k = 50, a sparse top-k similarity) is not limited by dense_max_items
    assert res["ch10_truth_model_replacements"] == {"ease": "userknn"}
    assert res["ch10_model_replacements"] == {"ease": "userknn"}  # the three lists merged; the sentence has each
    need = EASE().item_matrix_bytes(N)
    assert res["ch10_replacement_text"] == (
        f"At this catalogue size (*N* = {N:,}) ease needs {need / 1e6:,.0f} MB for one dense *N* × *N* matrix and a "
        "block of its columns, and *N* is above the 100 items (`dense_max_items`) up to which the chapters fit a model "
        "with a dense item-item matrix (one such matrix is 0 MB there, and EASE factorises and inverts it, in a time "
        "that grows as *N*³), and is replaced by userknn in the popularity dial (b), and left out of Figures 10.2-10.3 "
        "(where userknn already runs) (the rule of chapter 8's TORS-shaped catalogues).")
    assert "and is replaced by userknn in the popularity dial (b), and left out of Figures 10.2-10.3" in prose


def test_chapter_11_drops_the_users_leave_last_out_cannot_split(tmp_path):
    """A table with users of a single interaction (Yelp's shape): leave-last-out needs two per user, so the chapter
    leaves them out before the split, and the page says how many."""
    path = _sparse_table(tmp_path / "data" / "log.csv", n_users=300, n_items=400, singles=7, seed=1)
    inter = load_interactions(str(path))
    N = inter.attrs["n_items"]
    out = run_notebook(NB11, {**P11, "dataset": str(path), "max_cells": 250 * N}, tmp_path / "out", progress=False,
                       html=True)
    res = out["results"]
    counts = np.bincount(inter["user"].to_numpy())
    assert int(np.sum(counts == 1)) == 7 == res["ch11_dropped_users"]
    kept, n_dropped = drop_short_users(inter, 2)
    assert n_dropped == 7 and len(kept) == len(inter) - 7
    _, test = leave_last_out(kept, rng=np.random.default_rng([P11["seed"], 1]))
    assert len(test) == 293
    # 293 test users x N items exceed max_cells = 250 N: a uniform random sample of 250 users is evaluated
    assert res["ch11_users_evaluated"] == [250, 293] and res["ch11_cov_users"] == 250
    prose = rendered_prose(tmp_path / "out" / out["html"])
    assert "glue:" not in prose
    assert ("7 of the 300 users in the data have a single interaction, which leave-last-out cannot split into a "
            "training and a held-out item, so they are left out: the evaluation below has 293 users.") in prose
    assert (f"293 × {N:,} = {293 * N / 1e9:,.2f} billion cells for all test users here, above max_cells = "
            f"{250 * N:,}, so it evaluates a uniform random sample of 250 of them") in prose


def test_chapter_11_samples_the_evaluated_users_to_fit_the_memory_budget(tmp_path, monkeypatch):
    """Every model's two M x N masks and a coverage repeat's copies, (2 x models + 4) M N bytes, must fit a quarter
    of the memory budget: with 1,500 users and a 60 MB budget they do not, so the chapter evaluates a uniform random
    sample of the largest size that fits, and says so."""
    path = write_movielens(tmp_path / "ml-data", "u.data", n_users=1500, n_items=2000)
    inter = load_interactions(str(path))
    N = inter.attrs["n_items"]
    monkeypatch.setenv("ITEMSAMPLING_MEMORY_LIMIT", str(60_000_000))
    out = run_notebook(NB11, {**P11, "dataset": str(path)}, tmp_path / "out", progress=False, html=True)
    res = out["results"]
    models = res["ch11_models"]
    assert models == ["popular", "itemknn"]  # item-kNN's sparse top-k similarity (k = 50) fits the budget
    m_fit = 15_000_000 // ((2 * len(models) + 4) * N)
    assert 10 <= m_fit < 1500
    assert res["ch11_users_evaluated"] == [m_fit, 1500] and res["ch11_cov_users"] == m_fit
    prose = rendered_prose(tmp_path / "out" / out["html"])
    assert ("for all 1,500 test users here with the copies of a coverage repeat, more than a quarter of the memory budget "
            "(0.1 GB)") in prose
    assert f"so it evaluates a uniform random sample of {m_fit:,} of them" in prose
