"""Chapter 9 on a RecBole atomic file of fewer than 1,000 users, written by the test, through the
runner: the chapter reads it with ``load_interactions``, states the data (name, users, items,
interactions, SHA-256) and reduces the user counts above the data's M by its stated rule."""

from pathlib import Path

import numpy as np
import pytest
from movielens_folder import write_recbole

from itemsampling.data import load_interactions
from itemsampling.experiments import data_statement, describe_dataset, load_global_ranks
from itemsampling.run import run_notebook

ROOT = Path(__file__).resolve().parents[1] / "notebooks"
MODELS = ["ease", "popular"]
# test_users and boot_users stay at their defaults (1,000), above the file's 300 users
CH09 = {"models": MODELS, "boot_model": "ease", "n_repeats": 2, "n_jobs": 1, "max_k": 10,
        "coverage_ms": [30], "coverage_ps": [0.1], "boot_studies": 2, "n_boot": 10,
        "test_boot": 10, "compare_draws": 2, "seed": 1}


def test_chapter_9_runs_on_a_recbole_file(tmp_path, monkeypatch):
    folder = write_recbole(tmp_path / "rb", n_users=300, n_items=400)
    inter = folder / "ml-small.inter"
    monkeypatch.setenv("ITEMSAMPLING_CACHE", str(tmp_path / "cache"))
    payload = run_notebook(ROOT / "09-user-sampling.md", {**CH09, "dataset": str(inter)}, tmp_path / "09",
                           progress=False)
    res = payload["results"]
    df = load_interactions(inter)
    assert df.attrs["n_users"] == 300 < 1000
    assert res["ch09_data"] == describe_dataset(str(inter))
    assert res["ch09_data"] == f"the RecBole atomic file `ml-small.inter` in `{folder.resolve()}`"
    statement = res["ch09_data_statement"]
    assert statement == data_statement(str(inter))
    assert f"300 users, {df.attrs['n_items']:,} items, {len(df):,} interactions" in statement
    assert df.attrs["source"]["files"][0]["sha256"] in statement
    files = payload["datasets"]["dataset"]["files"]
    assert [f["name"] for f in files] == ["ml-small.inter"] and files[0]["sha256"] in statement
    # the user counts above M = 300 test users are reduced to M, and the page says so
    gr = load_global_ranks(str(inter), MODELS, rng=1, progress=False)
    assert gr.n_users == 300 and res["ch09_M"] == 300
    assert res["ch09_reduced_sizes"] == {"test_users": [1000, 300], "boot_users": [1000, 300]}
    assert res["ch09_reduced_text"] == ("With only *M* = 300 test users here, `test_users` is reduced from 1,000 to "
                                        "300 and `boot_users` is reduced from 1,000 to 300 (a user count above *M* "
                                        "becomes *M*).")
    assert res["ch09_test_users"] == 300 and res["ch09_boot_users"] == 300
    for m in MODELS:
        assert res["ch09_table_recall10"][m] == pytest.approx(np.mean(gr[m] <= 10), rel=1e-12)
