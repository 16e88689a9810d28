"""Tests of itemsampling.data: simulator statistics, loaders on format-exact files, splits, Gini."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import zipfile

import numpy as np
import pandas as pd
import pytest

from itemsampling import data as D


@pytest.fixture(autouse=True)
def _tmp_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ITEMSAMPLING_CACHE", str(tmp_path / "cache"))


SMALL = D.SimulationConfig(n_users=300, n_items=400, n_features=10, beta=0.05, zipf=0.5,
                           true_profile_mean=150.0, profile_median=25.0, profile_sigma=0.8,
                           min_profile=5, seed=3)


# ---------------------------------------------------------------------------------------------
# Gini
# ---------------------------------------------------------------------------------------------
def test_gini_hand_cases():
    assert D.gini([5, 5, 5, 5]) == pytest.approx(0.0)
    # one item has everything: (n - 1) / n
    assert D.gini([0, 0, 0, 10]) == pytest.approx(0.75)
    # [1, 2, 3]: sum (2i - n - 1) x_(i) = -2*1 + 0*2 + 2*3 = 4; / (3 * 6) = 2/9
    assert D.gini([3, 1, 2]) == pytest.approx(2 / 9)


def test_gini_matches_mean_absolute_difference():
    # G = sum_ij |x_i - x_j| / (2 n^2 mean)
    x = np.random.default_rng(0).pareto(1.5, size=200)
    G = np.abs(x[:, None] - x[None, :]).sum() / (2 * x.size**2 * x.mean())
    assert D.gini(x) == pytest.approx(G, rel=1e-12)


@pytest.mark.parametrize("bad", [[], [1, -1], [np.nan, 1], [0, 0]])
def test_gini_refuses_bad_input(bad):
    with pytest.raises(ValueError, match="values"):
        D.gini(bad)


# ---------------------------------------------------------------------------------------------
# simulator
# ---------------------------------------------------------------------------------------------
def test_simulator_statistics_follow_the_parameters():
    sim = D.simulate(SMALL)
    obs, truth = sim.observed, sim.truth
    assert list(obs.columns) == D.COLUMNS
    # every observed pair is a true preference; no duplicates
    t = set(zip(truth.user, truth.item))
    assert all((u, i) in t for u, i in zip(obs.user, obs.item))
    assert not obs.duplicated(["user", "item"]).any() and not truth.duplicated().any()
    # ids within range, catalog size recorded
    assert obs.user.max() < SMALL.n_users and obs.item.max() < SMALL.n_items
    assert D.n_items_of(obs) == SMALL.n_items and D.n_users_of(obs) == SMALL.n_users
    # observed profile sizes are capped at the true profile
    prof = np.bincount(obs.user, minlength=SMALL.n_users)
    tprof = np.bincount(truth.user, minlength=SMALL.n_users)
    assert np.all(prof <= tprof)
    assert np.all(prof[prof < tprof] >= SMALL.min_profile)
    # true profile sizes: de-duplicated Poisson(lambda) draws, so at most ~lambda + 5 sd
    assert tprof.max() <= SMALL.true_profile_mean + 5 * np.sqrt(SMALL.true_profile_mean)
    # timestamps are distinct within a user
    assert not obs.duplicated(["user", "timestamp"]).any()


def test_profile_sizes_follow_the_lognormal_target():
    # spread-out features and a large true profile: no user's target is capped, so the observed
    # sizes are exactly min_profile + floor(LogNormal(log m, sigma))
    cfg = dataclasses.replace(SMALL, n_users=2000, beta=1.0, zipf=0.0, true_profile_mean=300.0,
                              profile_median=25.0, profile_sigma=0.5)
    sim = D.simulate(cfg)
    prof = np.bincount(sim.observed.user, minlength=cfg.n_users)
    tprof = np.bincount(sim.truth.user, minlength=cfg.n_users)
    assert np.all(prof < tprof)
    x = np.log(prof - cfg.min_profile + 0.5)  # floor() shifts by ~0.5 on average
    # log sizes ~ Normal(log m, sigma): mean within 3 standard errors, sd within 10%
    assert abs(x.mean() - np.log(cfg.profile_median)) < 3 * cfg.profile_sigma / np.sqrt(x.size) + 0.01
    assert x.std() == pytest.approx(cfg.profile_sigma, rel=0.1)
    # the true profile: n_u ~ Poisson(300) draws, de-duplicated, so E|truth_u| <= 300 and close
    # to the expected number of distinct items
    assert tprof.mean() < 300


def test_popularity_observation_skews_popularity():
    pop = D.simulate(SMALL)
    uni = D.simulate(dataclasses.replace(SMALL, observation="uniform"))
    flat = D.simulate(dataclasses.replace(SMALL, zipf=0.0, observation="uniform"))
    g_pop = D.gini(D.item_counts(pop.observed))
    g_uni = D.gini(D.item_counts(uni.observed))
    g_flat = D.gini(D.item_counts(flat.observed))
    assert g_pop > g_uni > g_flat  # popularity sampling and the Zipf base both add skew
    # observing with probability ~ popularity: observed items are more popular among true
    # preferences than uniformly observed ones
    tp = np.bincount(pop.truth.item, minlength=SMALL.n_items)
    assert tp[pop.observed.item].mean() > tp[uni.observed.item].mean()


def test_simulator_is_deterministic_and_validates():
    a, b = D.simulate(SMALL), D.simulate(SMALL)
    pd.testing.assert_frame_equal(a.observed, b.observed)
    with pytest.raises(ValueError, match="observation"):
        D.simulate(dataclasses.replace(SMALL, observation="clicks"))
    with pytest.raises(ValueError, match="alpha"):
        D.simulate(dataclasses.replace(SMALL, alpha=0.0))
    with pytest.raises(ValueError, match="n_items"):
        D.simulate(dataclasses.replace(SMALL, n_items=1))


def test_sim_ml100k_shape_and_cache(tmp_path):
    df = D.load_dataset("sim-ml100k")
    s = D.dataset_summary(df)
    assert s["users"] == 943 and s["items"] == 1682
    assert 90_000 <= s["interactions"] <= 110_000
    assert 0.55 <= s["gini"] <= 0.70  # ML-100K: 0.6290 (Ihemelandu & Ekstrand, Table I)
    assert s["profile_min"] >= 20
    files = list((tmp_path / "cache" / "datasets").glob("sim-ml100k-*.npz"))
    assert len(files) == 1 and not list((tmp_path / "cache" / "datasets").glob(".*tmp"))
    again = D.load_dataset("sim-ml100k")  # from the cache
    pd.testing.assert_frame_equal(df, again)
    truth = D.load_truth("sim-ml100k")
    assert len(truth) > len(df)


def test_corrupt_cache_is_regenerated(tmp_path):
    df = D.load_dataset("sim-ml100k")
    (f,) = (tmp_path / "cache" / "datasets").glob("sim-ml100k-*.npz")
    f.write_bytes(f.read_bytes()[:100])  # truncated file
    with pytest.warns(D.CacheWarning, match="unreadable"):
        pd.testing.assert_frame_equal(D.load_dataset("sim-ml100k"), df)
    # a complete file whose ids were edited (no valid checksum): detected and regenerated too
    z = dict(np.load(f))
    z["item"] = np.zeros_like(z["item"])
    np.savez(f, **z)
    with pytest.warns(D.CacheWarning, match="checksum"):
        pd.testing.assert_frame_equal(D.load_dataset("sim-ml100k"), df)


def test_unknown_dataset():
    with pytest.raises(ValueError, match="dataset must be one of"):
        D.load_dataset("ml-1m")


# ---------------------------------------------------------------------------------------------
# splits
# ---------------------------------------------------------------------------------------------
def _frame(rows):
    return pd.DataFrame(rows, columns=D.COLUMNS).astype({"user": "int64", "item": "int64", "timestamp": "int64"})


def test_leave_last_out_by_time_and_ties():
    df = _frame([(0, 0, 1, 10), (0, 1, 1, 30), (0, 2, 1, 20),
                 (1, 3, 1, 5), (1, 4, 1, 9), (1, 5, 1, 9)])
    train, test = D.leave_last_out(df, rng=0)
    assert test.user.tolist() == [0, 1]
    assert test.item.iat[0] == 1
    assert test.item.iat[1] in (4, 5)
    assert len(train) == 4 and set(train.item) | set(test.item) == set(range(6))
    # the tie is broken at random: both outcomes occur over seeds, about half each
    picks = [D.leave_last_out(df, rng=s)[1].item.iat[1] for s in range(200)]
    assert 70 < sum(p == 4 for p in picks) < 130


def test_leave_last_out_errors():
    with pytest.raises(ValueError, match=">= 2 interactions"):
        D.leave_last_out(_frame([(0, 0, 1, 1), (0, 1, 1, 2), (1, 2, 1, 3)]))
    with pytest.raises(ValueError, match="missing column"):
        D.leave_last_out(pd.DataFrame({"user": [0], "item": [0]}))
    with pytest.raises(ValueError, match="integer ids"):
        D.leave_last_out(pd.DataFrame({"user": [0.5, 1.0], "item": [0, 1], "timestamp": [0, 1]}))


def test_holdout_fraction():
    df = D.simulate(SMALL).observed
    train, test = D.holdout_fraction(df, 0.2, rng=0)
    prof = np.bincount(df.user)
    got = np.bincount(test.user, minlength=prof.size)
    expect = np.clip(np.rint(0.2 * prof), 1, prof - 1)
    assert np.array_equal(got, expect)
    assert len(train) + len(test) == len(df)
    merged = pd.concat([train, test])
    assert not merged.duplicated(["user", "item"]).any()
    with pytest.raises(ValueError, match="fraction"):
        D.holdout_fraction(df, 1.5)


# ---------------------------------------------------------------------------------------------
# loaders on format-exact files
# ---------------------------------------------------------------------------------------------
def test_load_movielens_100k(tmp_path):
    d = tmp_path / "ml-100k"
    d.mkdir()
    (d / "u.data").write_text("196\t242\t3\t881250949\n186\t302\t3\t891717742\n22\t377\t1\t878887116\n196\t302\t5\t881250950\n")
    df = D.load_movielens(tmp_path)
    assert list(df.columns) == D.COLUMNS
    assert df.attrs["n_users"] == 3 and df.attrs["n_items"] == 3
    assert df.attrs["user_ids"].tolist() == [22, 186, 196]
    assert df.attrs["item_ids"].tolist() == [242, 302, 377]
    orig = set(zip(df.attrs["user_ids"][df.user], df.attrs["item_ids"][df.item], df.rating))
    assert orig == {(196, 242, 3.0), (186, 302, 3.0), (22, 377, 1.0), (196, 302, 5.0)}


def test_load_movielens_1m_and_csv(tmp_path):
    f = tmp_path / "ratings.dat"
    f.write_text("1::1193::5::978300760\n1::661::3::978302109\n2::1357::5::978298709\n")
    df = D.load_movielens(f)
    assert len(df) == 3 and df.attrs["n_items"] == 3 and df.timestamp.max() == 978302109
    c = tmp_path / "csv" / "ml-25m"
    c.mkdir(parents=True)
    (c / "ratings.csv").write_text("userId,movieId,rating,timestamp\n1,296,5.0,1147880044\n1,306,3.5,1147868817\n3,296,4.0,1439472215\n")
    df = D.load_movielens(tmp_path / "csv")
    assert df.rating.tolist() == [3.5, 5.0, 4.0]  # sorted by user, then time
    assert df.attrs["user_ids"].tolist() == [1, 3]


@pytest.mark.parametrize("content, match", [
    ("196\t242\t3\n", "line 1 has 3 field"),
    ("196\t242\t3\t881250949\n186\tx\t3\t891717742\n", "line 2, field 2 \\(item\\) is not an integer"),
    ("196\t242\t3\t881250949\n186\t302\t3\t8917", None),  # complete last row without newline: read, warned
    ("196\t242\t3\t881250949\n186\t302\t", "truncated"),
    ("", "no data rows"),
])
def test_load_movielens_malformed(tmp_path, content, match):
    (tmp_path / "u.data").write_text(content)
    if match is None:
        with pytest.warns(UserWarning, match=r"u\.data: the file does not end with a newline, so its last line 2 "):
            assert len(D.load_movielens(tmp_path)) == 2
    else:
        with pytest.raises(ValueError, match=match):
            D.load_movielens(tmp_path)


def test_load_movielens_missing_and_bad_header(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        D.load_movielens(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="no MovieLens ratings file"):
        D.load_movielens(tmp_path)
    (tmp_path / "ratings.csv").write_text("user,item,rating,ts\n1,2,3,4\n")
    with pytest.raises(ValueError, match="header"):
        D.load_movielens(tmp_path)


def _write_ncf(tmp_path, neg_line=None):
    (tmp_path / "ml-1m.train.rating").write_text("0\t32\t4\t978824330\n0\t34\t4\t978824330\n1\t5\t3\t978300001\n")
    (tmp_path / "ml-1m.test.rating").write_text("0\t25\t5\t978824351\n1\t7\t4\t978300002\n")
    lines = ["(0,25)\t1064\t174\t2791", "(1,7)\t3\t4\t9"]
    if neg_line is not None:
        lines[1] = neg_line
    (tmp_path / "ml-1m.test.negative").write_text("\n".join(lines) + "\n")


def test_load_ncf(tmp_path):
    _write_ncf(tmp_path)
    train, test, neg = D.load_ncf(tmp_path, "ml-1m")
    assert list(train.columns) == D.COLUMNS and len(train) == 3 and len(test) == 2
    assert neg.tolist() == [[1064, 174, 2791], [3, 4, 9]]
    assert train.attrs["n_items"] == 2792
    t2, _, _ = D.load_ncf(tmp_path / "ml-1m")  # prefix form
    pd.testing.assert_frame_equal(train, t2)


@pytest.mark.parametrize("line, match", [("(1,7)\t3\t4", "2 decoys, expected 3"),
                                         ("(1,8)\t3\t4\t9", "is for \\(1,8\\)"),
                                         ("1,7\t3\t4\t9", "must start with"),
                                         ("(1,7)\t3\tx\t9", "line 2, field 3 \\(decoy\\) is not an integer"),
                                         ("(1,7)\t3\t-4\t9", "line 2, field 3 \\(decoy\\) must be a non-negative"),
                                         ("(1,7)\t3\t7\t9", "line 2, field 3 \\(decoy\\) equals the test item 7"),
                                         ("(1,7)\t3\t4\t5", "line 2, field 4 \\(decoy\\) is item 5, which user 1 has")])
def test_load_ncf_malformed(tmp_path, line, match):
    _write_ncf(tmp_path, line)
    with pytest.raises(ValueError, match=match):
        D.load_ncf(tmp_path, "ml-1m")


@pytest.mark.parametrize("which, content, match", [
    ("train", "0\t32\t4\t978824330\n-1\t34\t4\t978824330\n", "train.rating: line 2, field 1 \\(user\\) must be a non-negative"),
    ("train", "0\t32\tnan\t978824330\n", "train.rating: line 1, field 3 \\(rating\\) must be a finite number"),
    ("test", "0\t25\t5\t978824351\n1\t-7\t4\t978300002\n", "test.rating: line 2, field 2 \\(item\\) must be a non-negative"),
])
def test_load_ncf_bad_rating_files(tmp_path, which, content, match):
    _write_ncf(tmp_path)
    (tmp_path / f"ml-1m.{which}.rating").write_text(content)
    with pytest.raises(ValueError, match=match):
        D.load_ncf(tmp_path, "ml-1m")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN"])
def test_load_movielens_refuses_non_finite_ratings(tmp_path, value):
    (tmp_path / "u.data").write_text(f"196\t242\t3\t881250949\n186\t302\t{value}\t891717742\n")
    with pytest.raises(ValueError, match=f"u.data: line 2, field 3 \\(rating\\) must be a finite number, got '{value}'"):
        D.load_movielens(tmp_path)
    (tmp_path / "u.data").unlink()
    (tmp_path / "ratings.csv").write_text(f"userId,movieId,rating,timestamp\n1,296,{value},1147880044\n")
    with pytest.raises(ValueError, match="ratings.csv: line 2, field 3 \\(rating\\) must be a finite number"):
        D.load_movielens(tmp_path)


def test_load_ncf_missing(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        D.load_ncf(tmp_path, "pinterest-20")


def test_fetch_verifies_checksum_offline(tmp_path, monkeypatch):
    """The fetch command with a local 'server': a good archive is unpacked, a bad one refused."""
    import urllib.request

    src = tmp_path / "src"
    src.mkdir()
    arch = src / "ml-100k.zip"
    with zipfile.ZipFile(arch, "w") as zf:
        zf.writestr("ml-100k/u.data", "1\t2\t3\t4\n2\t2\t5\t6\n")
    good = hashlib.md5(arch.read_bytes()).hexdigest()
    monkeypatch.setitem(D.MOVIELENS_ARCHIVES, "ml-100k", (arch.as_uri(), good))
    out = D.fetch_movielens("ml-100k", tmp_path / "raw", progress=False)
    assert len(D.load_movielens(out)) == 2
    monkeypatch.setitem(D.MOVIELENS_ARCHIVES, "ml-100k", (arch.as_uri(), "0" * 32))
    (tmp_path / "raw2").mkdir()
    with pytest.raises(ValueError, match="checksum mismatch"):
        D.fetch_movielens("ml-100k", tmp_path / "raw2", progress=False)
    assert not any(p.name.endswith(".zip") for p in (tmp_path / "raw2").iterdir())
    assert urllib.request  # the module is importable offline
    with pytest.raises(ValueError, match="release must be one of"):
        D.fetch_movielens("ml-5m", tmp_path)


def test_atomic_write_leaves_nothing_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "x.npz"

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        D.atomic_save_npz(target, a=np.arange(3))
    assert list(tmp_path.iterdir()) == []


def test_fast_and_strict_parsers_agree(tmp_path):
    g = np.random.default_rng(0)
    rows = np.column_stack([g.integers(1, 50, 500), g.integers(1, 900, 500), g.integers(1, 6, 500),
                            g.integers(9e8, 1e9, 500)])
    text = "".join(f"{a}::{b}::{c}::{d}\n" for a, b, c, d in rows)
    fast = D._parse_fast(text, "::", 0, 4, "iifi")
    assert fast is not None
    for col, ref in zip(fast, rows.T):
        assert np.array_equal(col, ref)
    # a float in an integer column makes the fast parser give up (the strict one reports it)
    assert D._parse_fast(text + "1::2.5::3::4\n", "::", 0, 4, "iifi") is None
    assert D._parse_fast(text + "1::2::3\n", "::", 0, 4, "iifi") is None


# ---------------------------------------------------------------------------------------------
# TORS-shaped catalogues (Li et al. 2024, Table 2)
# ---------------------------------------------------------------------------------------------
TORS_TABLE2 = {  # users, items, interactions as printed in TORS Table 2
    "sim-pinterest20": (55_187, 9_916, 1_463_581),
    "sim-yelp": (25_677, 25_815, 696_865),
    "sim-ml20m": (136_677, 20_720, 9_990_682),
}


@pytest.mark.parametrize("name", ["sim-pinterest20", "sim-yelp"])
def test_tors_shaped_datasets_built_at_full_size(name, tmp_path):
    """The two smaller catalogues are generated at full size (a second or two each): exactly the
    users, items and interactions of TORS Table 2, no duplicate pair, every item observed."""
    users, items, interactions = TORS_TABLE2[name]
    df = D.load_dataset(name)
    assert df["user"].nunique() == users and D.n_users_of(df) == users
    assert df["item"].nunique() == items and D.n_items_of(df) == items
    assert len(df) == interactions and not df.duplicated(["user", "item"]).any()
    assert np.bincount(df["user"]).min() >= D.DATASETS[name].min_profile
    assert np.all(np.diff(df["user"].to_numpy()) >= 0)
    assert np.all(df.groupby("user")["timestamp"].diff().dropna() > 0)
    # cached, keyed on the configuration; the truth is the observed pairs
    files = list((tmp_path / "cache" / "datasets").glob(f"{name}-*.npz"))
    assert len(files) == 1
    pd.testing.assert_frame_equal(D.load_dataset(name), df)
    truth = D.load_truth(name)
    assert len(truth) == interactions
    assert set(zip(truth["user"][:1000], truth["item"][:1000])) <= set(zip(df["user"], df["item"]))
    s = D.dataset_summary(df)
    assert 0.5 <= s["gini"] <= 0.8  # the long-tailed popularity stated in data/README.md


def test_tors_shaped_ml20m_shape():
    """sim-ml20m (ten million interactions) is not generated here: its configuration is Table 2's,
    and its profile sizes, which fix the interaction count, are computed at full size (exact sum,
    within bounds); the generator's exactness is checked on a scaled copy of the configuration."""
    users, items, interactions = TORS_TABLE2["sim-ml20m"]
    c = D.DATASETS["sim-ml20m"]
    assert (c.n_users, c.n_items, c.n_interactions) == (users, items, interactions)
    from itemsampling.data.simulator import _profile_sizes

    size = _profile_sizes(c.validate(), np.random.default_rng(c.seed))
    assert size.size == users and int(size.sum()) == interactions
    assert size.min() >= c.min_profile and size.max() <= int(c.max_profile_share * items)
    small = dataclasses.replace(c, n_users=users // 50, n_interactions=interactions // 50, n_items=items // 10)
    df = D.simulate_shaped(small).observed
    assert df["user"].nunique() == small.n_users and df["item"].nunique() == small.n_items
    assert len(df) == small.n_interactions and not df.duplicated(["user", "item"]).any()


def test_shaped_config_validates():
    with pytest.raises(ValueError, match="n_interactions must be"):
        D.ShapedConfig(n_users=10, n_items=100, n_interactions=50).validate()  # < 10 users x 20
    with pytest.raises(ValueError, match="max_profile_share"):
        D.ShapedConfig(n_users=10, n_items=100, n_interactions=300, max_profile_share=0.0).validate()
    with pytest.raises(ValueError, match="zipf"):
        D.ShapedConfig(n_users=10, n_items=100, n_interactions=300, zipf=-1.0).validate()
    with pytest.raises(ValueError, match="config must be a ShapedConfig"):
        D.simulate_shaped(SMALL)
    # deterministic given the seed, and exactly the requested shape on a tiny catalogue
    tiny = D.ShapedConfig(n_users=40, n_items=120, n_interactions=1_000, min_profile=5, seed=7)
    a, b = D.simulate_shaped(tiny).observed, D.simulate_shaped(tiny).observed
    pd.testing.assert_frame_equal(a, b)
    assert len(a) == 1_000 and a["item"].nunique() == 120 and a["user"].nunique() == 40
