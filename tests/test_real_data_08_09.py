"""Chapters 8 and 9 on real-format data: each runs through the runner on a MovieLens folder and on
an NCF-style split the test writes (300 users), records the folder's provenance (files, sizes,
digests) and says on the page which data it ran on; the sizes follow the chapters' rules from the
data's N and M, and the chapters' models are the folder's own global ranks."""

from pathlib import Path

import numpy as np
import pytest
from movielens_folder import write_movielens, write_ncf

from itemsampling.catalogue import initial_size_rule, scaled_sizes, user_table_sizes
from itemsampling.experiments import describe_dataset, load_global_ranks
from itemsampling.models import EASE
from itemsampling.run import run_notebook

ROOT = Path(__file__).resolve().parents[1] / "notebooks"
MODELS = ["ease", "popular"]
CH08 = {"models": MODELS, "n_repeats": 2, "max_k": 10, "winner_ks": [5], "seed": 1, "n_jobs": 1,
        "catalogues": ["sim-ml100k"], "catalogue_models": ["popular"], "catalogue_fixed_sizes": [40],
        "catalogue_max_size": 160, "catalogue_repeats": 2, "absolute_repeats": 2,
        "nm_items": [200, 400], "nm_users": [300], "nm_fixed_users": 300, "nm_fixed_items": 400,
        "nm_sizes": [10, 80, 40], "nm_draws": 2, "nm_repeats": 2}
CH09 = {"models": MODELS, "boot_model": "ease", "n_repeats": 2, "n_jobs": 1, "max_k": 10,
        "coverage_ms": [30], "coverage_ps": [0.1], "boot_users": 100, "boot_studies": 2, "n_boot": 10,
        "test_boot": 10, "test_users": 100, "compare_draws": 2, "seed": 1}


def _folder(root: Path, kind: str) -> Path:
    return write_movielens(root / "ml", "ratings.dat") if kind == "movielens" else write_ncf(root / "ncf")


@pytest.fixture(scope="module", params=["movielens", "ncf"])
def runs(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"real-{request.param}")
    folder = _folder(root, request.param)
    mp = pytest.MonkeyPatch()
    mp.setenv("ITEMSAMPLING_CACHE", str(root / "cache"))
    try:
        out = {nb: run_notebook(ROOT / f"{nb}.md", {**params, "dataset": str(folder)}, root / nb, progress=False)
               for nb, params in (("08-adaptive-sampling", CH08), ("09-user-sampling", CH09))}
        gr = load_global_ranks(str(folder), MODELS, rng=1, progress=False)
        yield request.param, folder, out, gr
    finally:
        mp.undo()


def _provenance(payload, kind):
    ds = payload["datasets"]["dataset"]
    names = [f["name"] for f in ds["files"]]
    assert ds["kind"] == "folder"
    if kind == "movielens":
        assert names == ["ratings.dat"]
    else:
        assert names == ["ml-small.train.rating", "ml-small.test.rating", "ml-small.test.negative"]
    assert all(f["bytes"] > 0 and len(f["sha256"]) == 64 for f in ds["files"])


def test_chapter_8_runs_on_the_folder(runs):
    kind, folder, out, gr = runs
    payload = out["08-adaptive-sampling"]
    _provenance(payload, kind)
    res = payload["results"]
    assert res["ch08_data"] == describe_dataset(str(folder))
    assert ("NCF split" in res["ch08_data"]) == (kind == "ncf")
    assert res["ch08_n_items"] == gr.n_items and res["ch08_models"] == MODELS
    for m in MODELS:
        assert np.array_equal(res["ch08_global_ranks"][m], gr[m])
    # the sizes follow the size rule from the data's N
    assert (res["ch08_initial_size"], res["ch08_max_size"], res["ch08_fixed_size"]) == scaled_sizes(gr.n_items)
    assert res["ch08_max_size"] == 16 * res["ch08_initial_size"]


def test_chapter_9_runs_on_the_folder(runs):
    kind, folder, out, gr = runs
    payload = out["09-user-sampling"]
    _provenance(payload, kind)
    res = payload["results"]
    assert res["ch09_data"] == describe_dataset(str(folder))
    # Tables 9.3-9.4 run on the given data, with TORS's sizes as shares of its N and M
    N, M = gr.n_items, gr.n_users
    assert (res["ch09_table_N"], res["ch09_table_M"]) == (N, M)
    sizes = res["ch09_table_sizes"]
    items, users = user_table_sizes(N, M)
    assert sizes["item_sizes"] == items and sizes["user_counts"] == users and sizes["combined_users"] == users[0]
    n_max = scaled_sizes(N)[1]
    assert (sizes["initial_size"], sizes["max_size"]) == (initial_size_rule(n_max), n_max)
    assert set(res["ch09_table_means"]) == set(MODELS)
    # the user-sampling truth is the folder's own global ranks: Recall@10 of each model
    for m in MODELS:
        assert res["ch09_table_recall10"][m] == pytest.approx(np.mean(gr[m] <= 10), rel=1e-12)
    assert res["ch09_boot_truth"] == pytest.approx(np.mean(gr["ease"] <= 10), rel=1e-12)
    assert "TORS print no rows" in res["ch09_table_source_text"]


def test_chapter_8_replaces_dense_item_models_above_dense_max_items(tmp_path, monkeypatch):
    """Above `dense_max_items` items EASE (a dense N x N matrix) is replaced by UserKNN, and the page says so, and
    item-kNN (a sparse top-k similarity) runs;
    the repeats rule keeps TORS's 100 on this small catalogue, and the page says this run sets its own."""
    folder = _folder(tmp_path, "movielens")
    monkeypatch.setenv("ITEMSAMPLING_CACHE", str(tmp_path / "cache"))
    out = run_notebook(ROOT / "08-adaptive-sampling.md", {**CH08, "models": ["ease", "itemknn", "popular"],
                                                          "dataset": str(folder), "dense_max_items": 100},
                       tmp_path / "08", progress=False)
    res = out["results"]
    N = load_global_ranks(str(folder), ["popular"], rng=1, progress=False).n_items
    assert N > 100
    # item-kNN (k = 50) keeps a sparse top-k similarity: dense_max_items does not limit it
    assert res["ch08_model_replacements"] == {"ease": "userknn"}
    assert res["ch08_models"] == ["userknn", "itemknn", "popular"]
    assert res["ch08_model_replacement_text"].startswith(
        f"At this catalogue size (*N* = {N:,}) ease needs {EASE().item_matrix_bytes(N) / 1e6:,.0f} MB for one dense "
        "*N* × *N* matrix and a block of its columns, and *N* is above the 100 items (`dense_max_items`)")
    assert res["ch08_model_replacement_text"].endswith("and is replaced by userknn (the rule of chapter 8's "
                                                       "TORS-shaped catalogues).")
    assert res["ch08_rule_repeats"] == 100 and res["ch08_n_repeats"] == 2
    assert res["ch08_repeats_rule_text"].endswith("This run sets its own, 2.")
