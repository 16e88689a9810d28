"""Folder datasets in the experiment helpers: MovieLens files and NCF splits on disk, side by side
with the simulated names."""

from __future__ import annotations

import numpy as np
import pytest
from movielens_folder import interactions, write_movielens, write_ncf

from itemsampling import experiments as E
from itemsampling.data import load_movielens


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ITEMSAMPLING_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.parametrize("kind", ["ratings.dat", "u.data", "ratings.csv"])
def test_movielens_folder_split_holds_out_each_users_last_event(tmp_path, kind):
    folder = write_movielens(tmp_path / "ml", kind)
    assert E._check_dataset(str(folder)) == str(folder.resolve())
    assert E.dataset_files(folder) == [folder.resolve() / "ml-small" / kind]
    train, test = E.load_split(str(folder), 0)
    u, i, _, t = interactions()
    assert len(test) == 300 and len(train) + len(test) == u.size
    # the held-out item of every user is the one with the largest timestamp (timestamps are distinct)
    df = load_movielens(folder)
    last = df.sort_values(["user", "timestamp"]).groupby("user").tail(1).sort_values("user")
    assert np.array_equal(test["item"].to_numpy(), last["item"].to_numpy())
    assert test.attrs["dropped_users"] == 0
    assert train.attrs["n_items"] == np.unique(i).size
    assert "MovieLens file `" + kind + "`" in E.describe_dataset(folder)


def test_single_interaction_users_are_dropped(tmp_path):
    folder = write_movielens(tmp_path / "ml")
    f = folder / "ml-small" / "ratings.dat"
    f.write_text(f.read_text() + "9001::1::5::978300000\n9002::4::3::978300001\n")
    train, test = E.load_split(str(folder), 0)
    assert len(test) == 300 and test.attrs["dropped_users"] == 2


def test_ncf_folder_uses_its_own_split(tmp_path):
    folder = write_ncf(tmp_path / "ncf")
    train, test = E.load_split(str(folder), 0)
    assert len(test) == 300
    raw = np.loadtxt(folder / "ml-small.test.rating", dtype=np.int64)
    assert np.array_equal(test["item"].to_numpy(), raw[:, 1])
    assert "NCF split `ml-small`" in E.describe_dataset(folder)


def test_global_ranks_on_a_folder_are_cached_and_keyed_on_content(tmp_path, cache):
    folder = write_movielens(tmp_path / "ml")
    gr = E.load_global_ranks(str(folder), ["popular", "random"], progress=False)
    assert gr.n_users == 300 and gr.dataset == str(folder.resolve())
    assert np.all((1 <= gr["popular"]) & (gr["popular"] <= gr.pool_sizes))
    # popularity beats chance on popularity-skewed data
    assert np.median(gr["popular"] / gr.pool_sizes) < np.median(gr["random"] / gr.pool_sizes)
    files = sorted(cache.rglob("*.npz"))
    assert len(files) == 2 and all(str(tmp_path) not in str(f.relative_to(cache)) for f in files)
    again = E.load_global_ranks(folder, ["popular"], progress=False)
    assert np.array_equal(again["popular"], gr["popular"]) and len(sorted(cache.rglob("*.npz"))) == 2
    # other content under the same path is another cache entry, never the old ranks
    f = folder / "ml-small" / "ratings.dat"
    lines = f.read_text().splitlines()
    f.write_text("\n".join(lines[: len(lines) // 2]) + "\n")
    changed = E.load_global_ranks(folder, ["popular"], progress=False)
    assert changed.n_users < 300 and len(sorted(cache.rglob("*.npz"))) == 3


@pytest.mark.parametrize("bad", ["ml-1m", "", 3, None])
def test_bad_dataset_names_the_argument(bad, tmp_path):
    with pytest.raises(ValueError, match="dataset must be one of"):
        E.load_split(bad)


def test_folder_without_ratings_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"cannot read .*empty as interactions; the formats known are: MovieLens"):
        E.load_split(str(tmp_path / "empty"))


def test_oracle_needs_a_simulated_dataset(tmp_path):
    folder = write_movielens(tmp_path / "ml")
    with pytest.raises(ValueError, match="oracle"):
        E.make_model("oracle", 0, str(folder))


def test_load_interactions_of_each_kind(tmp_path):
    u, i, _, _ = interactions()
    ml = E.load_interactions(str(write_movielens(tmp_path / "ml")))
    assert len(ml) == u.size and ml.attrs["n_users"] == 300 and ml.attrs["n_items"] == np.unique(i).size
    ncf = E.load_interactions(str(write_ncf(tmp_path / "ncf")))
    assert len(ncf) == u.size and ncf["user"].nunique() == 300
    assert len(E.load_interactions("sim-ml100k")) > 90_000
