"""Caches never return another run's numbers: keys cover every input, files are checksummed and
verified, corrupt files are recomputed with a warning, NaN never comes back from a cache."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

from itemsampling import experiments as E
from itemsampling.data import cache as C
from itemsampling.metrics import evaluate

DS = "sim-ml100k"


@pytest.fixture(autouse=True)
def _tmp_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ITEMSAMPLING_CACHE", str(tmp_path / "cache"))


def _ranks(n_items, pools=None, seed=0, m=400):
    """A GlobalRanks built by hand: ranks spread over the top of a catalog of ``n_items``."""
    g = np.random.default_rng(seed)
    pools = np.full(m, n_items, dtype=np.int64) if pools is None else np.asarray(pools, dtype=np.int64)
    ranks = {"a": g.integers(1, 40, size=m).astype(np.int64), "b": g.integers(1, 400, size=m).astype(np.int64)}
    return E.GlobalRanks(ranks, n_items, pools, np.arange(m), np.zeros(m, dtype=np.int64), "hand", True, 0)


KW = dict(sample_sizes=(50,), n_repeats=4, metrics=(("recall", 10),), progress=False)


def test_cache_key_covers_catalog_size():
    # the same ranks, a catalog ten times larger: a decoy now rarely outranks the target
    small, large = _ranks(1000), _ranks(10_000)
    first = E.run_experiment(small, pool="catalog", **KW)
    again = E.run_experiment(large, pool="catalog", **KW)
    fresh = E.run_experiment(large, pool="catalog", cache=False, **KW)
    np.testing.assert_array_equal(again.values, fresh.values)
    assert abs(again.values.mean() - first.values.mean()) > 0.2  # really different numbers


def test_cache_key_covers_pool_sizes():
    a = _ranks(10_000, pools=np.full(400, 1000))
    b = _ranks(10_000, pools=np.full(400, 10_000))
    E.run_experiment(a, pool="user", **KW)
    again = E.run_experiment(b, pool="user", **KW)
    fresh = E.run_experiment(b, pool="user", cache=False, **KW)
    np.testing.assert_array_equal(again.values, fresh.values)


def test_explicit_cache_folder_keys_sample_size(tmp_path):
    gr = _ranks(2000)
    kw = dict(KW, cache=tmp_path / "mine")
    kw.pop("sample_sizes")
    E.run_experiment(gr, sample_sizes=(10,), **kw)
    got = E.run_experiment(gr, sample_sizes=(50,), **kw)
    fresh = E.run_experiment(gr, sample_sizes=(50,), **dict(kw, cache=False))
    np.testing.assert_array_equal(got.values, fresh.values)
    assert got.sample_sizes == [50]


def test_cache_key_covers_estimator_parameters():
    gr = _ranks(2000)

    def scaled(r, N, n, metric, k, factor):
        return factor * evaluate(r, metric, k, n)

    one = E.run_experiment(gr, estimators={"s": functools.partial(scaled, factor=1.0)}, **KW)
    two = E.run_experiment(gr, estimators={"s": functools.partial(scaled, factor=2.0)}, **KW)
    np.testing.assert_allclose(two.values, 2 * one.values)


def _only_repeat_files(res):
    from pathlib import Path

    return sorted(Path(res.cache_path).glob("repeat-*.npz"))


@pytest.mark.parametrize("damage", ["nan", "half", "plain", "garbage", "other-key"])
def test_corrupt_repeat_file_is_recomputed(damage):
    gr = _ranks(2000)
    res = E.run_experiment(gr, **KW)
    f = _only_repeat_files(res)[1]
    z = np.load(f)
    values = z["values"]
    if damage == "nan":
        bad = values.copy()
        bad[0, 0, 0, 0] = np.nan
        C.atomic_save_npz(f, cache_key=str(z["__cache_key__"]), values=bad)  # valid checksum, NaN inside
    elif damage == "half":
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    elif damage == "plain":  # the same shape without checksum, values edited
        np.savez(f, values=np.ones_like(values))
    elif damage == "garbage":
        f.write_bytes(b"not an npz file")
    else:  # a valid file written under another key
        C.atomic_save_npz(f, cache_key="another run", values=np.ones_like(values))
    with pytest.warns(C.CacheWarning):
        again = E.run_experiment(gr, **KW)
    np.testing.assert_array_equal(again.values, res.values)
    assert np.all(np.isfinite(again.values))
    # the file was rewritten and now verifies
    with warnings.catch_warnings():
        warnings.simplefilter("error", C.CacheWarning)
        np.testing.assert_array_equal(E.run_experiment(gr, **KW).values, res.values)


def test_nan_results_are_never_cached():
    gr = _ranks(2000)
    calls = []

    def sometimes_nan(r, N, n, metric, k):
        calls.append(1)
        return np.nan if len(calls) == 3 else evaluate(r, metric, k, n)

    sometimes_nan.cache_token = "sometimes-nan"
    res = E.run_experiment(gr, estimators={"s": sometimes_nan}, **KW)
    assert np.isnan(res.values).sum() == 1
    assert len(_only_repeat_files(res)) == KW["n_repeats"] - 1  # the NaN repeat is not written


@pytest.mark.parametrize("damage", ["ones", "half"])
def test_corrupt_ranks_cache_is_recomputed(damage):
    ref = E.load_global_ranks(DS, ["popular"], progress=False)
    (f,) = list(C.cache_dir("ranks").rglob("popular-*.npz"))
    z = dict(np.load(f))
    if damage == "ones":
        z["ranks"] = np.ones_like(z["ranks"])
    else:
        z = {k: (v[: v.size // 2] if v.ndim == 1 else v) for k, v in z.items()}
    np.savez(f, **z)
    with pytest.warns(C.CacheWarning):
        again = E.load_global_ranks(DS, ["popular"], progress=False)
    np.testing.assert_array_equal(again["popular"], ref["popular"])
    np.testing.assert_array_equal(again.pool_sizes, ref.pool_sizes)


def test_checksummed_npz_roundtrip_and_tamper(tmp_path):
    f = tmp_path / "x.npz"
    C.atomic_save_npz(f, cache_key="k1", a=np.arange(5), b=np.array([0.5, 1.5]))
    z = C.load_npz(f, cache_key="k1")
    np.testing.assert_array_equal(z["a"], np.arange(5))
    assert set(z) == {"a", "b"}
    with pytest.warns(C.CacheWarning, match="another key"):
        assert C.load_npz(f, cache_key="k2") is None
    raw = bytearray(f.read_bytes())
    i = raw.find(np.array([0.5, 1.5]).tobytes())
    raw[i] ^= 1  # flip one bit of the data
    f.write_bytes(bytes(raw))
    with pytest.warns(C.CacheWarning, match="checksum"):
        assert C.load_npz(f, cache_key="k1") is None
    assert C.load_npz(tmp_path / "absent.npz") is None


def test_fingerprint_distinguishes_content():
    assert C.fingerprint(np.arange(3)) == C.fingerprint(np.arange(3))
    assert C.fingerprint(np.arange(3)) != C.fingerprint(np.arange(3).astype(np.int32))
    assert C.fingerprint({"a": 1, "b": 2}) == C.fingerprint({"b": 2, "a": 1})

    def f(x, c=1):
        return x * c

    assert C.fingerprint(functools.partial(f, c=2)) != C.fingerprint(functools.partial(f, c=3))

    def make(c):
        return lambda x: x * c

    assert C.fingerprint(make(2)) != C.fingerprint(make(3))  # closures are part of the key


def test_dataset_content_fingerprint(tmp_path):
    d = tmp_path / "ml"
    d.mkdir()
    (d / "u.data").write_text("1\t1\t5\t10\n1\t2\t3\t11\n")
    a = E.dataset_fingerprint(d)
    (d / "u.data").write_text("1\t1\t4\t10\n1\t2\t3\t11\n")  # one rating edited
    b = E.dataset_fingerprint(d)
    assert a["path"] == b["path"] and a["files"] == ["u.data"] and a["content"] != b["content"]
    (d / "README").write_text("notes")  # a file that is not read changes nothing
    assert E.dataset_fingerprint(d) == b
    assert E.dataset_fingerprint(DS)["config"]["n_items"] == 1682


def test_ranks_cache_follows_the_content_of_a_real_data_folder(tmp_path):
    from itemsampling.ranking import global_ranks

    d = tmp_path / "ml"
    d.mkdir()

    def write(seed):
        g = np.random.default_rng(seed)
        rows = [f"{u}\t{i}\t4\t{t}" for u in range(1, 31) for t, i in enumerate(g.choice(np.arange(1, 41), 6, replace=False))]
        (d / "u.data").write_text("\n".join(rows) + "\n")

    def fresh():
        train, test = E.load_split(d, 0)
        model = E.make_model("popular", 0, str(d)).fit(train)
        return global_ranks(model, train, test, rng=np.random.default_rng(E._model_seed(0, "ties-popular")))

    write(1)
    first = E.load_global_ranks(d, ["popular"], progress=False)
    np.testing.assert_array_equal(first["popular"], fresh())
    write(2)  # the same folder, other ratings: the cached ranks must not come back
    second = E.load_global_ranks(d, ["popular"], progress=False)
    np.testing.assert_array_equal(second["popular"], fresh())
    assert not np.array_equal(first["popular"], second["popular"])
