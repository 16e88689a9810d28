"""Chapter 9 on a RecBole atomic file of fewer than 1,000 users, written by the test, through the
runner: the chapter reads it with ``load_interactions``, states the data (name, users, items,
interactions, SHA-256) and reduces the user counts above the data's M by its stated rule. The same
run on a user-line split (its split kept) and on a CSV table whose columns are named with
``-p user_column`` / ``-p item_column``."""

from pathlib import Path

import numpy as np
import pytest
import pandas as pd
from movielens_folder import interactions, write_recbole, write_user_lines

from itemsampling.experiments import data_statement, dataset_source, describe_dataset, load_global_ranks
from itemsampling.experiments import load_interactions as load_dataset_interactions
from itemsampling.run import run_notebook

ROOT = Path(__file__).resolve().parents[1] / "notebooks"
MODELS = ["ease", "popular"]
# test_users and boot_users stay at their defaults (1,000), above the file's 300 users
CH09 = {"models": MODELS, "boot_model": "ease", "n_repeats": 2, "n_jobs": 1, "max_k": 10,
        "coverage_ms": [30], "coverage_ps": [0.1], "boot_studies": 2, "n_boot": 10,
        "test_boot": 10, "compare_draws": 2, "seed": 1}


def _data(kind: str, root: Path):
    """(dataset path, extra parameters, expected description) of a 300-user dataset in a format."""
    if kind == "recbole":
        folder = write_recbole(root / "rb", n_users=300, n_items=400)
        return folder / "ml-small.inter", {}, f"the RecBole atomic file `ml-small.inter` in `{folder.resolve()}`"
    if kind == "user-lines":
        folder = write_user_lines(root / "ul", n_users=300, n_items=400)
        return folder, {}, f"the user-line split `train.txt` + `test.txt` in `{folder.resolve()}`"
    u, i, _, t = interactions(n_users=300, n_items=400)
    root.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"who": u, "what": i, "when": t}).to_csv(root / "log.csv", index=False)
    return (root / "log.csv", {"user_column": "who", "item_column": "what"},
            f"the interactions table `log.csv` in `{root.resolve()}` (user column `who`, item column `what`)")


@pytest.mark.parametrize("kind", ["recbole", "user-lines", "table"])
def test_chapter_9_runs_on_each_format(kind, tmp_path, monkeypatch):
    path, extra, described = _data(kind, tmp_path / "data")
    monkeypatch.setenv("ITEMSAMPLING_CACHE", str(tmp_path / "cache"))
    payload = run_notebook(ROOT / "09-user-sampling.md", {**CH09, **extra, "dataset": str(path)}, tmp_path / "09",
                           progress=False)
    res = payload["results"]
    key = dataset_source(str(path), extra.get("user_column"), extra.get("item_column"))
    df = load_dataset_interactions(key)
    assert df.attrs["n_users"] == 300 < 1000
    assert res["ch09_data"] == describe_dataset(key) == described
    statement = res["ch09_data_statement"]
    assert statement == data_statement(key)
    assert f"300 users, {df.attrs['n_items']:,} items, {len(df):,} interactions" in statement
    files = payload["datasets"]["dataset"]["files"]
    assert [f["name"] for f in files] == [f["name"] for f in df.attrs["source"]["files"]]
    assert all(f["sha256"] in statement for f in files)
    assert ("its own train/test split, which the chapter's split keeps" in statement) == (kind == "user-lines")
    # the user counts above M = 300 test users are reduced to M, and the page says so
    gr = load_global_ranks(key, MODELS, rng=1, progress=False)
    assert gr.n_users == 300 and res["ch09_M"] == 300
    assert res["ch09_reduced_sizes"] == {"test_users": [1000, 300], "boot_users": [1000, 300]}
    assert res["ch09_reduced_text"] == ("With only *M* = 300 test users here, `test_users` is reduced from 1,000 to "
                                        "300 and `boot_users` is reduced from 1,000 to 300 (a user count above *M* "
                                        "becomes *M*).")
    assert res["ch09_test_users"] == 300 and res["ch09_boot_users"] == 300
    for m in MODELS:
        assert res["ch09_table_recall10"][m] == pytest.approx(np.mean(gr[m] <= 10), rel=1e-12)
