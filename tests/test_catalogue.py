"""itemsampling.catalogue: the catalogue-scale split, ranks and Table-5 summaries against
independent computations."""

import numpy as np
import pytest

from itemsampling import catalogue as C
from itemsampling.data import leave_last_out, load_dataset


@pytest.fixture(autouse=True)
def _tmp_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ITEMSAMPLING_CACHE", str(tmp_path / "cache"))


def test_split_is_leave_last_out():
    X, users, targets = C.catalogue_split("sim-ml100k")
    train, test = leave_last_out(load_dataset("sim-ml100k"), rng=0)  # timestamps are distinct per user
    assert np.array_equal(test["user"].to_numpy(), users)
    assert np.array_equal(test["item"].to_numpy(), targets)
    assert X.nnz == len(train)
    assert np.array_equal(np.diff(X.indptr), np.bincount(train["user"], minlength=X.shape[0]))


def test_svd_and_popular_ranks_brute_force():
    X, _, targets = C.catalogue_split("sim-ml100k")
    out = C.catalogue_ranks("sim-ml100k", models=["svd8", "popular"], rng=3)
    dense = X.toarray() > 0
    # PureSVD: rebuild the scores from the same item factors, mask training items, count those above
    V = C._item_factors(X, 8, np.random.default_rng(np.random.SeedSequence([3, sum(map(ord, "svd8"))])))
    S = (X @ V) @ V.T
    M = X.shape[0]
    t = S[np.arange(M), targets]
    mask = dense.copy()
    mask[np.arange(M), targets] = False
    S[mask] = -np.inf
    expect = 1 + np.sum(S > t[:, None], axis=1)
    assert np.array_equal(out["ranks"]["svd8"], expect)
    assert np.array_equal(out["pools"], X.shape[1] - mask.sum(axis=1))
    # popular: the rank lies between 1 + (items strictly more popular) and that plus the ties
    pop = dense.sum(axis=0)
    P = np.where(mask, -1, pop[None, :])
    tp = pop[targets]
    lo = 1 + np.sum(P > tp[:, None], axis=1)
    hi = lo + np.sum(P == tp[:, None], axis=1) - 1
    r = out["ranks"]["popular"]
    assert np.all((lo <= r) & (r <= hi)) and np.any(hi > lo)
    # cached: a second call reads the same ranks
    again = C.catalogue_ranks("sim-ml100k", models=["popular"], rng=3)
    assert np.array_equal(again["ranks"]["popular"], r)


def test_bad_input():
    with pytest.raises(ValueError, match="model must be 'popular' or 'svd<d>'"):
        C.catalogue_ranks("sim-ml100k", models=["ease"])
    with pytest.raises(ValueError, match="dataset must be one of"):
        C.catalogue_ranks("ml-1m")
    with pytest.raises(ValueError, match="without repeats"):
        C.catalogue_ranks("sim-ml100k", models=["popular", "popular"])


def test_relative_error_and_table5_row_by_hand():
    assert C.relative_error([[0.2, 0.3], [0.1, 0.6]], [0.1, 0.0]).tolist() == pytest.approx([100.0, 0.0])
    run = {"adaptive": np.array([1.0, 2.0, 3.0]), "mean_size": np.array([10.0, 20.0, 30.0]),
           "fixed": {"BV_MES": np.array([4.0, 5.0, 6.0]), "BV_MLE": np.array([2.0, 3.5, 3.0]),
                     "MN_MES": np.array([9.0, 9.0, 9.0]), "MN_MLE": np.array([8.0, 8.0, 8.0])}}
    row = C.table5_row(run)
    assert row["best_fixed_name"] == "BV_MLE" and row["best_fixed"] == pytest.approx(8.5 / 3)
    d = np.array([-1.0, -1.5, 0.0])
    assert row["se_paired"] == pytest.approx(d.std(ddof=1) / np.sqrt(3))
    assert row["difference"] == pytest.approx(d.mean())
    assert row["verdict"] == ("wins" if d.mean() < -2 * row["se_paired"] else "tie")
    assert row["average_size"] == 20.0


def test_initial_size_rule():
    # TORS's n_max = 3,200 with K_max = 50 on the three TORS-shaped catalogues
    assert C.initial_size_rule(9_916, 3_200) == 100   # N / 50 = 198
    assert C.initial_size_rule(25_815, 3_200) == 400  # N / 50 = 516
    assert C.initial_size_rule(20_720, 3_200) == 400  # N / 50 = 414
    assert C.initial_size_rule(3_706, 3_200) == 50    # N / 50 = 74
    for N, top in ((3_706, 3_200), (1_682, 160), (50_000, 3_000)):
        n0 = C.initial_size_rule(N, top)
        assert top % n0 == 0 and ((top // n0) & (top // n0 - 1)) == 0  # n_max = n0 * 2^t
        assert n0 <= N // 50 or n0 % 2 == 1 or n0 // 2 < 2
        assert 2 * n0 > N // 50 or n0 == top
    with pytest.raises(ValueError, match="max_size must be"):
        C.initial_size_rule(100, 200)


def test_scaled_sizes_rule():
    frac = np.mean([500 / 9_916, 500 / 25_815, 1_000 / 20_720])
    for N in (3_706, 9_916, 20_720, 25_815, 1_000):
        n0, n_max, n = C.scaled_sizes(N)
        assert n_max == 8 * n0 and n0 <= N // 50 and n_max <= N
        assert n0 == min(round(0.124 * N / 8), N // 50)
        assert n == round(frac * N)
    assert C.scaled_sizes(25_815) == (400, 3_200, 1_016)  # yelp: TORS's own n_max = 3,200
    assert C.scaled_sizes(3_706) == (57, 456, 146)         # sim-ml1m
    assert C.scaled_sizes(10)[:2] == (2, 8)
    with pytest.raises(ValueError, match="max_k must be"):
        C.scaled_sizes(100, 0)


def test_adaptive_against_fixed_reproducible_and_parallel():
    g = np.random.default_rng(0)
    N = 300
    ranks = {"a": 1 + np.floor((N - 1) * g.beta(0.3, 1.2, size=400)).astype(np.int64),
             "b": 1 + np.floor((N - 1) * g.beta(0.5, 1.2, size=400)).astype(np.int64)}
    ks = np.arange(1, 11)
    one = C.adaptive_against_fixed(ranks, N, 5, 40, 20, 3, ks, rng=5)
    two = C.adaptive_against_fixed(ranks, N, 5, 40, 20, 3, ks, rng=5, n_jobs=2)
    for m in ranks:
        assert np.array_equal(one[m]["adaptive"], two[m]["adaptive"])
        assert all(np.array_equal(one[m]["fixed"][k], two[m]["fixed"][k]) for k in C.TABLE5_FIXED)
        assert np.all((5 <= one[m]["mean_size"]) & (one[m]["mean_size"] <= 40))
    # repeat j of model i is the draw of seed [5, i, j]: recompute model b's second repeat
    ad, fx, size = C._one_table5_repeat(ranks["b"], N, 5, 40, 20, ks, [5, 1, 1], 0.01, 0.01, None)
    from itemsampling.metrics import metric_curve

    truth = metric_curve(ranks["b"], "recall", ks, n_items=N)
    assert one["b"]["adaptive"][1] == pytest.approx(C.relative_error([ad], truth)[0], rel=1e-12)
    assert one["b"]["mean_size"][1] == size
