"""The loaders of the formats researchers publish (user-line splits, count-prefixed user lines,
RecBole atomic files, interactions tables) and the dispatcher ``load_interactions``: every test
writes its own small files; values are checked against the hand-written contents."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from movielens_folder import interactions, write_movielens, write_recbole, write_user_lines

from itemsampling.data import (FORMATS, detect_format, given_split, load_count_lines, load_interactions,
                               load_movielens, load_recbole, load_table, load_user_lines)

SRC = Path(__file__).resolve().parents[1] / "src"


def _sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_user_lines_hand_case_and_the_kept_split(tmp_path):
    (tmp_path / "train.txt").write_text("10 7 3\n4 3\n")
    (tmp_path / "test.txt").write_text("10 9\n4 7 9\n")
    df = load_interactions(tmp_path)
    # users 4, 10 -> 0, 1; items 3, 7, 9 -> 0, 1, 2
    assert df.attrs["user_ids"].tolist() == [4, 10] and df.attrs["item_ids"].tolist() == [3, 7, 9]
    rows = sorted(zip(df.user, df.item, df.attrs["held_out"]))
    assert rows == [(0, 0, False), (0, 1, True), (0, 2, True), (1, 0, False), (1, 1, False), (1, 2, True)]
    assert df.rating.tolist() == [1.0] * 6 and df.timestamp.tolist() == [0] * 6
    assert list(df.columns) == ["user", "item", "rating", "timestamp"]
    src = df.attrs["source"]
    assert src["format"] == "user-lines"
    assert [f["name"] for f in src["files"]] == ["train.txt", "test.txt"]
    assert src["files"][1]["sha256"] == _sha(tmp_path / "test.txt")
    assert src["files"][0]["bytes"] == len(b"10 7 3\n4 3\n")
    train, test = given_split(df)
    assert sorted(zip(train.user, train.item)) == [(0, 0), (1, 0), (1, 1)]
    assert sorted(zip(test.user, test.item)) == [(0, 1), (0, 2), (1, 2)]
    assert train.attrs["n_items"] == test.attrs["n_items"] == 3 and "held_out" not in train.attrs
    # train.txt alone: no split
    assert given_split(load_user_lines(tmp_path / "train.txt")) is None
    assert load_interactions(tmp_path / "train.txt").attrs["source"]["files"][1]["name"] == "test.txt"


def test_user_lines_bad_token_names_file_line_field(tmp_path):
    (tmp_path / "train.txt").write_text("0 1 2\n1 x 3\n")
    with pytest.raises(ValueError, match=r"train.txt: line 2, field 2 \(an item id\) must be an integer"):
        load_interactions(tmp_path)


def test_count_lines_hand_case(tmp_path):
    f = tmp_path / "users.dat"
    f.write_text("2 5 7\n0\n1 5\n")
    df = load_count_lines(f)
    assert df.attrs["user_ids"].tolist() == [0, 2]  # line 2 (user 1) has no items
    assert sorted(zip(df.user, df.item)) == [(0, 0), (0, 1), (1, 0)]
    assert load_interactions(tmp_path).attrs["source"] == {"format": "count-lines", "files": [
        {"path": str(f.resolve()), "name": "users.dat", "bytes": f.stat().st_size, "sha256": _sha(f)}]}
    f.write_text("2 5 7\n3 1 2\n")
    with pytest.raises(ValueError, match=r"users.dat: line 2 starts with the count 3 but lists 2 item"):
        load_count_lines(f)


def test_recbole_hand_case_with_tokens(tmp_path):
    f = tmp_path / "toy.inter"
    f.write_text("user_id:token\titem_id:token\trating:float\ttimestamp:float\n"
                 "u2\tb\t4.0\t20\nu1\ta\t3.5\t10\nu2\ta\t5\t5\n")
    df = load_interactions(f)
    assert df.attrs["user_ids"].tolist() == ["u1", "u2"] and df.attrs["item_ids"].tolist() == ["a", "b"]
    # sorted by user then timestamp
    assert df[["user", "item", "rating", "timestamp"]].values.tolist() == [[0, 0, 3.5, 10], [1, 0, 5.0, 5],
                                                                           [1, 1, 4.0, 20]]
    assert df.attrs["source"]["format"] == "recbole"
    assert df.attrs["source"]["columns"]["user"] == "user_id:token"
    assert detect_format(tmp_path) == ("recbole", [f])
    # another column as the user, named with or without its type
    (tmp_path / "toy.inter").write_text("session:token\tuser_id:token\titem_id:token\ns1\tu1\ta\ns2\tu1\tb\n")
    assert load_recbole(f, user_column="session").attrs["n_users"] == 2
    assert load_interactions(f, user_column="session:token").attrs["n_users"] == 2
    assert load_interactions(f).attrs["n_users"] == 1
    f.write_text("user_id:token\titem_id:id\nu1\ta\n")
    with pytest.raises(ValueError, match=r"line 1, field 2 is 'item_id:id'; a RecBole header field is 'name:type'"):
        load_recbole(f)


def test_tables_csv_tsv_parquet_and_named_columns(tmp_path):
    frame = pd.DataFrame({"uid": [7, 7, 9], "track": ["x", "y", "x"], "stars": [1, 2, 3]})
    frame.to_csv(tmp_path / "a.csv", index=False)
    frame.to_csv(tmp_path / "b.tsv", index=False, sep="\t")
    frame.to_parquet(tmp_path / "c.parquet")
    for name in ("a.csv", "b.tsv", "c.parquet"):
        df = load_interactions(tmp_path / name, item_column="track")
        assert df.attrs["user_ids"].tolist() == [7, 9] and df.attrs["item_ids"].tolist() == ["x", "y"]
        assert sorted(zip(df.user, df.item, df.rating)) == [(0, 0, 1.0), (0, 1, 2.0), (1, 0, 3.0)], name
        assert df.attrs["source"]["files"][0]["sha256"] == _sha(tmp_path / name)
        with pytest.raises(ValueError, match=r"has no item column .*its columns are \['uid', 'track', 'stars'\]"
                                             r".*item_column"):
            load_interactions(tmp_path / name)
        with pytest.raises(ValueError, match=r"user_column 'who' is not a column of .*its columns are"):
            load_table(tmp_path / name, user_column="who", item_column="track")
    # headerless rows: user item [rating [timestamp]]
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "pairs.dat").write_text("1\t8\t5\n1\t9\t4\n3\t8\t2\n")
    df = load_interactions(tmp_path / "h")
    assert sorted(zip(df.user, df.item, df.rating)) == [(0, 0, 5.0), (0, 1, 4.0), (1, 0, 2.0)]
    (tmp_path / "e.csv").write_text("user,item\n1,\n")
    with pytest.raises(ValueError, match=r"e.csv: line 2, column 'item' is empty"):
        load_interactions(tmp_path / "e.csv")


def test_the_same_frame_as_load_movielens(tmp_path):
    """The same interactions as a MovieLens u.data, a CSV table and a RecBole file give one frame."""
    ml = load_movielens(write_movielens(tmp_path / "ml", "u.data", n_users=40, n_items=60))
    u, i, r, t = interactions(n_users=40, n_items=60)
    pd.DataFrame({"user": u, "item": i, "rating": r, "timestamp": t}).to_csv(tmp_path / "t.csv", index=False)
    tables = [load_interactions(tmp_path / "t.csv"),
              load_interactions(write_recbole(tmp_path / "rb", n_users=40, n_items=60)),
              load_interactions(tmp_path / "ml")]
    for df in tables:
        pd.testing.assert_frame_equal(df[["user", "item", "rating", "timestamp"]], ml)
        assert np.array_equal(df.attrs["user_ids"], ml.attrs["user_ids"])
        assert np.array_equal(df.attrs["item_ids"], ml.attrs["item_ids"])
        assert len(df.attrs["source"]["files"][0]["sha256"]) == 64


def test_dispatcher_formats_and_refusal(tmp_path):
    write_user_lines(tmp_path / "ul", n_users=30, n_items=80)
    assert detect_format(tmp_path / "ul")[0] == "user-lines"
    df = load_interactions(tmp_path / "ul")
    assert int(df.attrs["held_out"].sum()) == 60  # two test items per user
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "notes.txt").write_bytes(b"\x00\x01binary")
    for path in (tmp_path / "bad", tmp_path / "bad" / "notes.txt"):
        with pytest.raises(ValueError) as err:
            load_interactions(path)
        msg = str(err.value)
        assert msg.startswith(f"cannot read {path} as interactions; the formats known are:")
        assert all(f in msg for f in FORMATS)
    with pytest.raises(ValueError, match=r"does not exist; the formats known are"):
        load_interactions(tmp_path / "nowhere")
    with pytest.raises(ValueError, match=r"user_column only applies to a table or a RecBole file; a "
                                         r"user-line split has no columns to name"):
        load_interactions(tmp_path / "ul", user_column="user")
    with pytest.raises(ValueError, match=r"user_column must be a column name"):
        load_interactions(tmp_path / "ul", user_column=3)


def test_summary_command_with_named_columns(tmp_path):
    pd.DataFrame({"who": [1, 1, 2, 2], "what": [5, 6, 5, 7]}).to_csv(tmp_path / "x.csv", index=False)
    cmd = [sys.executable, "-m", "itemsampling.data", "summary", str(tmp_path / "x.csv"),
           "--user-column", "who", "--item-column", "what"]
    out = subprocess.run(cmd, capture_output=True, text=True, env={"PYTHONPATH": str(SRC), "PATH": ""})
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert (res["users"], res["items"], res["interactions"], res["format"]) == (2, 3, 4, "table")
    assert res["files"][0]["sha256"] == _sha(tmp_path / "x.csv")
    out = subprocess.run(cmd[:5], capture_output=True, text=True, env={"PYTHONPATH": str(SRC), "PATH": ""})
    assert out.returncode == 1 and out.stderr.startswith("error: ") and "--user-column" in out.stderr
    assert out.stderr.count("\n") == 1


# ---------------------------------------------------------------------------------------------
# the chapters' dataset parameter (itemsampling.experiments)
# ---------------------------------------------------------------------------------------------
def test_experiments_keep_a_given_user_line_split(tmp_path):
    from itemsampling import experiments as E

    (tmp_path / "train.txt").write_text("0 1 2\n1 2 3\n2 1\n")
    (tmp_path / "test.txt").write_text("0 3 4\n1 4\n3 2\n")  # user 3 has no training item
    assert E.has_given_split(str(tmp_path)) and not E.has_given_split("sim-ml100k")
    train, test = E.load_split(str(tmp_path), rng=0)
    ids = train.attrs["item_ids"]
    assert sorted(zip(train.user, ids[train.item])) == [(0, 1), (0, 2), (1, 2), (1, 3), (2, 1)]
    # one held-out item per test user with a training item: user 0 gets 3 or 4, user 1 gets 4
    held = dict(zip(test.user.tolist(), ids[test.item].tolist()))
    assert set(held) == {0, 1} and held[0] in (3, 4) and held[1] == 4
    assert test.attrs["dropped_users"] == 1 and test.attrs["held_out_rows"] == 4
    # the draw follows the seed: over seeds both of user 0's test items are chosen
    firsts = {int(ids[E.load_split(str(tmp_path), rng=r)[1].item.iat[0]]) for r in range(12)}
    assert firsts == {3, 4}
    text = E.data_statement(str(tmp_path))
    assert text.startswith(f"Data: the user-line split `train.txt` + `test.txt` in `{tmp_path.resolve()}`, "
                           "4 users, 4 items, 9 interactions; SHA-256 `train.txt` `" + _sha(tmp_path / "train.txt"))
    assert "its own train/test split, which the chapter's split keeps" in text


def test_experiments_named_columns_and_formats(tmp_path):
    from itemsampling import experiments as E

    u, i, r, t = interactions(n_users=30, n_items=80)
    pd.DataFrame({"who": u, "what": i, "ts": t}).to_csv(tmp_path / "x.csv", index=False)
    with pytest.raises(ValueError, match=r"has no user column"):
        E.load_split(str(tmp_path / "x.csv"))
    ds = E.dataset_source(str(tmp_path / "x.csv"), "who", "what")
    assert isinstance(ds, E.DataSource) and ds == str((tmp_path / "x.csv").resolve())
    train, test = E.load_split(ds, rng=0)
    assert len(test) == 30 and len(train) + len(test) == u.size
    # leave-last-out on the timestamps: each user's held-out item is their latest
    last = pd.DataFrame({"u": u, "i": i, "t": t}).sort_values("t").groupby("u").i.last()
    assert test.attrs["item_ids"][test.item].tolist() == last.tolist()
    assert E.describe_dataset(ds) == (f"the interactions table `x.csv` in `{tmp_path.resolve()}` "
                                      "(user column `who`, item column `what`)")
    assert E.dataset_fingerprint(ds)["columns"] == ["who", "what"]
    import pickle

    assert pickle.loads(pickle.dumps(ds)).user_column == "who"
    assert E.dataset_source("sim-ml100k") == "sim-ml100k"
    with pytest.raises(ValueError, match=r"dataset 'sim-ml100k' is simulated"):
        E.dataset_source("sim-ml100k", "who")
    write_recbole(tmp_path / "rb", n_users=30, n_items=80)
    assert E.describe_dataset(str(tmp_path / "rb")) == f"the RecBole atomic file `ml-small.inter` in `{tmp_path / 'rb'}`"
    assert [f.name for f in E.dataset_files(str(tmp_path / "rb"))] == ["ml-small.inter"]


def test_splits_of_a_frame_with_a_given_split_drop_its_row_flags(tmp_path):
    from itemsampling.data import holdout_fraction, leave_last_out

    (tmp_path / "train.txt").write_text("0 1 2 3\n1 2 3\n")
    (tmp_path / "test.txt").write_text("0 4\n1 1\n")
    df = load_interactions(tmp_path)
    assert df.attrs["held_out"].tolist() == [False, False, False, True, False, False, True]
    for train, test in (leave_last_out(df, rng=0), holdout_fraction(df, 0.5, rng=0)):
        assert "held_out" not in train.attrs and "held_out" not in test.attrs
        assert train.attrs["n_items"] == 4 and len(train) + len(test) == 7


def test_headerless_rows_told_from_user_lines(tmp_path):
    """Rows of equal width whose first field repeats are a table; one line per user (each user
    once, every user with two items here) are user lines."""
    (tmp_path / "a.txt").write_text("".join(f"{u} {100 + u} {200 + u}\n" for u in range(30)))
    (tmp_path / "b.txt").write_text("".join(f"{u // 2} {u} 5\n" for u in range(30)))
    assert detect_format(tmp_path / "a.txt")[0] == "user-lines"
    assert load_interactions(tmp_path / "a.txt").attrs["n_items"] == 60
    assert detect_format(tmp_path / "b.txt")[0] == "table"
    df = load_interactions(tmp_path / "b.txt")
    assert (df.attrs["n_users"], df.attrs["n_items"], df.rating.tolist()) == (15, 30, [5.0] * 30)


def test_drop_short_users_keeps_ids_attrs_and_split_flags():
    from itemsampling.data import drop_short_users

    df = pd.DataFrame({"user": [0, 0, 2, 3, 3, 3, 5], "item": [1, 2, 1, 0, 1, 2, 4]})
    df.attrs.update({"n_users": 7, "n_items": 6, "name": "x",
                     "held_out": np.array([0, 1, 0, 0, 0, 1, 0], dtype=bool)})
    out, dropped = drop_short_users(df, 2)
    assert dropped == 2  # users 2 and 5; user 1, 4 and 6 have no row and do not count
    assert out["user"].tolist() == [0, 0, 3, 3, 3] and out["item"].tolist() == [1, 2, 0, 1, 2]
    assert out.attrs["n_users"] == 7 and out.attrs["n_items"] == 6 and out.attrs["name"] == "x"
    assert out.attrs["held_out"].tolist() == [False, True, False, False, True]
    assert df.attrs["held_out"].size == 7  # the input is left as it was
    same, none = drop_short_users(out, 2)
    assert none == 0 and same is out
    assert drop_short_users(df, 3)[0]["user"].tolist() == [3, 3, 3]
    with pytest.raises(ValueError, match="min_interactions"):
        drop_short_users(df, 0)
    with pytest.raises(ValueError, match="interactions"):
        drop_short_users(df[["item"]], 2)


def test_sample_users_keeps_whole_users():
    from itemsampling.data import sample_users

    df = pd.DataFrame({"user": [0, 0, 2, 3, 3, 3, 5], "item": [1, 2, 1, 0, 1, 2, 4]})
    df.attrs.update({"n_users": 7, "n_items": 6, "held_out": np.array([0, 1, 0, 0, 0, 1, 0], dtype=bool)})
    out = sample_users(df, 2, rng=0)
    users = sorted(set(out["user"]))
    assert len(users) == 2 and set(users) <= {0, 2, 3, 5}
    assert len(out) == int(df["user"].isin(users).sum())  # every row of a chosen user, none of the others
    assert out.attrs["held_out"].tolist() == df.attrs["held_out"][df["user"].isin(users).to_numpy()].tolist()
    assert out.attrs["n_users"] == 7 and out.attrs["n_items"] == 6
    assert sample_users(df, 4) is df and sample_users(df, 10) is df
    again = sample_users(df, 2, rng=0)
    assert again["user"].tolist() == out["user"].tolist()  # reproducible from rng
    with pytest.raises(ValueError, match="n_users"):
        sample_users(df, 0)
