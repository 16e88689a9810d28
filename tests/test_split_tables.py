"""Splits given as tables (issue 46 item 3): a folder of headerless train.tsv + test.tsv ('user item count',
LightGCN's Last.fm layout), RecBole's benchmark split NAME.{train,valid,test}.inter, CSV tables with a
header and a validation file; the split kept (the test rows held out, one id index over the files), the
validation rows joining training or dropped, `data summary` reporting it, the chapters' split keeping it,
and ambiguous layouts refused."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from itemsampling.data import detect_format, given_split, load_interactions, load_split

SRC = Path(__file__).resolve().parents[1] / "src"


def _lastfm(folder: Path) -> Path:
    folder.mkdir()
    (folder / "train.tsv").write_text("2\t10\t5\n2\t11\t1\n7\t10\t3\n7\t12\t2\n9\t13\t4\n")
    (folder / "test.tsv").write_text("2\t12\t1\n7\t13\t6\n")
    return folder


def test_two_headerless_tables_keep_their_split(tmp_path):
    folder = _lastfm(tmp_path / "lastfm")
    kind, files = detect_format(folder)
    assert kind == "split" and [f.name for f in files] == ["train.tsv", "test.tsv"]
    df = load_interactions(folder)
    uids, iids = df.attrs["user_ids"], df.attrs["item_ids"]
    assert uids.tolist() == [2, 7, 9] and iids.tolist() == [10, 11, 12, 13]  # one index over both files
    train, test = given_split(df)
    assert sorted(zip(uids[train.user], iids[train.item], train.rating)) == [
        (2, 10, 5.0), (2, 11, 1.0), (7, 10, 3.0), (7, 12, 2.0), (9, 13, 4.0)]
    assert sorted(zip(uids[test.user], iids[test.item], test.rating)) == [(2, 12, 1.0), (7, 13, 6.0)]
    assert df.attrs["split"] == {"train_rows": 5, "test_rows": 2, "validation": "none"}
    assert df.attrs["source"]["format"] == "table-split"
    assert [f["role"] for f in df.attrs["source"]["files"]] == ["train", "test"]


def _recbole(folder: Path) -> Path:
    folder.mkdir()
    head = "user_id:token\titem_id:token\trating:float\ttimestamp:float\n"
    (folder / "ml.train.inter").write_text(head + "u1\ta\t4\t10\nu1\tb\t3\t11\nu2\ta\t5\t12\nu3\tc\t1\t13\n")
    (folder / "ml.valid.inter").write_text(head + "u1\tc\t2\t14\nu2\tb\t4\t15\n")
    (folder / "ml.test.inter").write_text(head + "u1\td\t5\t16\nu2\tc\t3\t17\nu3\ta\t2\t18\n")
    return folder


@pytest.mark.parametrize("validation", ["train", "drop"])
def test_recbole_benchmark_split_with_validation(tmp_path, validation):
    folder = _recbole(tmp_path / "rb")
    kind, files = detect_format(folder)
    assert kind == "split" and [f.name for f in files] == ["ml.train.inter", "ml.valid.inter", "ml.test.inter"]
    df = load_interactions(folder, validation=validation)
    uids, iids = df.attrs["user_ids"], df.attrs["item_ids"]
    train, test = given_split(df)
    pairs = sorted(zip(uids[train.user], iids[train.item]))
    base = [("u1", "a"), ("u1", "b"), ("u2", "a"), ("u3", "c")]
    assert pairs == (sorted(base + [("u1", "c"), ("u2", "b")]) if validation == "train" else base)
    assert sorted(zip(uids[test.user], iids[test.item], test.timestamp)) == [("u1", "d", 16), ("u2", "c", 17),
                                                                           ("u3", "a", 18)]
    assert df.attrs["split"] == {"train_rows": 4, "valid_rows": 2, "test_rows": 3,
                                 "validation": "joined training" if validation == "train" else "dropped"}
    assert df.attrs["source"]["format"] == "recbole-split"


def test_csv_tables_with_a_header_and_the_summary_command(tmp_path):
    folder = tmp_path / "csv"
    folder.mkdir()
    pd.DataFrame({"user_id": [1, 1, 2, 2, 3], "item_id": [5, 6, 5, 7, 6]}).to_csv(folder / "train.csv", index=False)
    pd.DataFrame({"user_id": [1], "item_id": [7]}).to_csv(folder / "validation.csv", index=False)
    pd.DataFrame({"user_id": [2, 3], "item_id": [6, 7]}).to_csv(folder / "test.csv", index=False)
    (folder / "README.md").write_text("not data")
    df = load_split(folder / "train.csv", folder / "test.csv", folder / "validation.csv", validation="drop")
    assert len(df) == 7 and int(df.attrs["held_out"].sum()) == 2
    cmd = [sys.executable, "-m", "itemsampling.data", "summary", str(folder)]
    for extra, valid in (([], "joined training"), (["--validation", "drop"], "dropped")):
        out = subprocess.run(cmd + extra, capture_output=True, text=True, env={"PYTHONPATH": str(SRC), "PATH": ""})
        assert out.returncode == 0, out.stderr
        res = json.loads(out.stdout)
        assert res["format"] == "table-split" and res["held_out"] == 2
        assert res["split"] == {"train_rows": 5, "valid_rows": 1, "test_rows": 2, "validation": valid}
        assert res["interactions"] == (8 if valid == "joined training" else 7)


def test_the_chapters_split_keeps_a_split_given_as_tables(tmp_path):
    from itemsampling import experiments as E

    folder = _lastfm(tmp_path / "lastfm")
    assert E.has_given_split(str(folder))
    train, test = E.load_split(str(folder), rng=0)
    ids = train.attrs["item_ids"]
    held = dict(zip(train.attrs["user_ids"][test.user], ids[test.item]))
    assert held == {2: 12, 7: 13} and len(train) == 5
    assert "the split given as tables `train.tsv` + `test.tsv`" in E.describe_dataset(str(folder))


def test_ambiguous_or_bad_split_layouts_are_refused(tmp_path):
    two = tmp_path / "two"
    _lastfm(two)
    (two / "train.csv").write_text("user,item\n1,2\n")
    (two / "test.csv").write_text("user,item\n1,3\n")
    with pytest.raises(ValueError, match=r"holds several splits .*pass the folder of one"):
        load_interactions(two)
    both = _recbole(tmp_path / "both")
    (both / "ml.inter").write_text((both / "ml.train.inter").read_text())
    with pytest.raises(ValueError, match="holds both the whole file ml.inter and the split"):
        load_interactions(both)
    twice = tmp_path / "twice"
    twice.mkdir()
    for name in ("train.tsv", "training.tsv", "test.tsv"):
        (twice / name).write_text("1\t2\n")
    with pytest.raises(ValueError, match=r"holds two train tables \['train.tsv', 'training.tsv'\]"):
        load_interactions(twice)
    only = tmp_path / "only"
    only.mkdir()
    (only / "train.csv").write_text("user,item\n1,2\n1,3\n")
    (only / "other.csv").write_text("user,item\n1,2\n2,3\n")
    with pytest.raises(ValueError, match="holds several data files .* and none of the known layouts"):
        load_interactions(only)
    with pytest.raises(ValueError, match=r"validation must be one of \('train', 'drop'\)"):
        load_interactions(_lastfm(tmp_path / "v"), validation="test")
    bad = _lastfm(tmp_path / "bad")
    (bad / "test.tsv").write_text("2\t12\t1\n7\t13\tx\n")
    with pytest.raises(ValueError, match=r"test.tsv: line 2, column 'rating' must be a finite number"):
        load_interactions(bad)
    assert np.array_equal(load_interactions(_lastfm(tmp_path / "ok")).attrs["held_out"].nonzero()[0].size, 2)
