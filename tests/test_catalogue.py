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
    # ... and exactly the brute force's ranks with the same tie-breaking draw (one per chunk of users)
    rng = np.random.default_rng(np.random.SeedSequence([3, sum(map(ord, "popular"))]))
    assert M <= 2048  # one chunk
    assert np.array_equal(r, lo + rng.integers(0, hi - lo + 1))
    # the ranks do not depend on how many users' scores are computed at once
    P8 = np.asarray(X @ V, dtype=np.float32)
    V32 = V.astype(np.float32)
    runs = [C._ranks_from_scores(lambda a, b: P8[a:b] @ V32.T, X, targets, np.random.default_rng(0), chunk=100,
                                 block=block)[0] for block in (7, 100, 256, M)]
    assert all(np.array_equal(runs[0], x) for x in runs[1:])
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
    # TORS's n_max = 3,200: n_0 = 200, below TORS Table 5's smallest average adaptive size on every
    # dataset (pinterest-20 259.77, yelp 288.70, ml-20m 705.76), the largest n_max / 2^t that is
    assert C.initial_size_rule(3_200) == 200
    assert max(n for n in (3_200 >> t for t in range(6)) if n <= 288.70) == 200
    assert C.initial_size_rule(160) == 10 and C.initial_size_rule(48) == 3 and C.initial_size_rule(8) == 2
    for top in (3_200, 160, 48, 3_000, 8):
        n0 = C.initial_size_rule(top)
        assert top % n0 == 0 and ((top // n0) & (top // n0 - 1)) == 0  # n_max = n0 * 2^t
        assert top // n0 == 16 or n0 % 2 == 1 or n0 // 2 < 2
    with pytest.raises(ValueError, match="max_size must be"):
        C.initial_size_rule(1)


def test_scaled_sizes_rule():
    frac = np.mean([500 / 9_916, 500 / 25_815, 1_000 / 20_720])
    for N in (3_706, 9_916, 20_720, 25_815, 1_000):
        n0, n_max, n = C.scaled_sizes(N)
        assert n_max == 16 * n0 == 16 * C.initial_size_rule(n_max) and n_max <= N
        assert n0 == round(0.124 * N / 16)
        assert abs(n_max - 0.124 * N) <= 8  # 12.4% of N up to the rounding of n_0
        assert n == round(frac * N)
    assert C.scaled_sizes(25_815) == (200, 3_200, 1_016)  # yelp: TORS's own n_max = 3,200
    assert C.scaled_sizes(3_706) == (29, 464, 146)         # sim-ml1m
    assert C.scaled_sizes(10)[:2] == (2, 8)
    with pytest.raises(ValueError, match="n_items must be"):
        C.scaled_sizes(1)


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
    # repeat j: the adaptive draw of adaptive_seed(5, R, N, j), the fixed one of the same key ending in 0
    d = C.adaptive_seed(5, ranks["b"], N, 1)[1]
    seeds = ([5, d, 1, 1], [5, d, 1, 0])
    assert seeds[0] == C.adaptive_seed(5, ranks["b"].tolist(), N, 1)  # a digest of the values, not the array object
    assert C.adaptive_seed(5, ranks["b"], N, 1) != C.adaptive_seed(5, ranks["a"], N, 1)
    assert C.adaptive_seed(5, ranks["b"], N, 1) != C.adaptive_seed(5, ranks["b"], N + 1, 1)
    ad, fx, size = C._one_table5_repeat(ranks["b"], N, 5, 40, 20, ks, seeds, 0.01, 0.01, None)
    from itemsampling.metrics import metric_curve

    truth = metric_curve(ranks["b"], "recall", ks, n_items=N)
    assert one["b"]["adaptive"][1] == pytest.approx(C.relative_error([ad], truth)[0], rel=1e-12)
    assert one["b"]["mean_size"][1] == size


@pytest.mark.filterwarnings("ignore:cut-off K")
def test_chapters_8_and_9_draw_the_same_adaptive_samples():
    """Issue 40, defect 26: Table 8.5 (adaptive_against_fixed) and Tables 9.3-9.4 (user_against_item)
    printed different adaptive MLE errors for the same ranks and sizes, from different random draws.
    The adaptive draw is keyed on the ranks, so the two functions give the same errors and sizes,
    whatever the position of the model in their lists."""
    g = np.random.default_rng(3)
    N = 300
    ranks = {"a": 1 + np.floor((N - 1) * g.beta(0.3, 1.2, size=500)).astype(np.int64),
             "b": 1 + np.floor((N - 1) * g.beta(0.5, 1.2, size=500)).astype(np.int64)}
    ks = np.arange(1, 11)
    t5 = C.adaptive_against_fixed(ranks, N, 5, 40, 20, 4, ks, rng=7, grid=False)
    ua = C.user_against_item({"b": ranks["b"], "a": ranks["a"]}, N, [20], 5, 40, [100], 200, 4, ks,
                             metrics=["recall"], rng=7, grid=False)
    for m in ranks:
        assert np.allclose(t5[m]["adaptive"], ua[m]["errors"]["recall"]["adaptive MLE"], rtol=1e-12, atol=0)
        assert np.array_equal(t5[m]["mean_size"], ua[m]["adaptive_size"])
    assert not np.array_equal(t5["a"]["adaptive"], t5["b"]["adaptive"])


def _beta_ranks(N, M, shapes, seed=0):
    g = np.random.default_rng(seed)
    return {f"m{j}": np.minimum(N, 1 + np.floor((N - 1) * g.beta(a, 1.5, size=M))).astype(np.int64)
            for j, a in enumerate(shapes)}


@pytest.mark.filterwarnings("ignore:cut-off K")  # below one kernel width, as in the chapter
def test_user_against_item_is_the_straightforward_loop():
    """Every column recomputed with the documented seeds through the public API: the item-sampling
    columns with estimate_metrics on the same draws, the user samples with metric_curve (not the
    histogram-times-F(R) product the function uses)."""
    from itemsampling.estimators import estimate_metrics
    from itemsampling.metrics import metric_curve
    from itemsampling.sampling import adaptive_sample_ranks, sample_ranks

    N, M, seed = 300, 1500, 7
    ranks = _beta_ranks(N, M, (0.3, 0.6))
    ks = np.arange(1, 11)
    out = C.user_against_item(ranks, N, [20, 40], 5, 40, [100, 400], 200, 3, ks, rng=seed, grid=False)
    both = ["recall", "ndcg"]
    for i, (name, R) in enumerate(ranks.items()):
        truth = {m: metric_curve(R, m, ks) for m in both}
        errs = out[name]["errors"]
        assert list(errs["recall"]) == ["item 20", "item 40", "adaptive MLE", "user 100", "user 400", "user 200 + item 100"]
        for j in range(3):
            for c, n in enumerate([20, 40]):
                r = sample_ranks(R, N, n, np.random.default_rng([seed, i, j, c]))
                est = estimate_metrics(r, N, n, both, ks, ["mn_mes"], eta=0.01, grid=False)["mn_mes"]
                for m in both:
                    assert errs[m][f"item {n}"][j] == pytest.approx(
                        100 * np.mean(np.abs(est[m] - truth[m]) / truth[m]), rel=1e-12)
            g = np.random.default_rng(C.adaptive_seed(seed, R, N, j))  # the draws of adaptive_against_fixed
            ra, sa = adaptive_sample_ranks(R, N, 5, 40, g)
            est = estimate_metrics(ra, N, sa, both, ks, ["mle"], grid=False)["mle"]
            assert errs["ndcg"]["adaptive MLE"][j] == pytest.approx(
                100 * np.mean(np.abs(est["ndcg"] - truth["ndcg"]) / truth["ndcg"]), rel=1e-12)
            assert out[name]["adaptive_size"][j] == pytest.approx(sa.mean())
            g = np.random.default_rng([seed, i, j, 3])
            users = R[g.choice(M, size=200, replace=False)]
            r = sample_ranks(users, N, 100, g)
            est = estimate_metrics(r, N, 100, both, ks, ["mn_mes"], eta=0.01, grid=False)["mn_mes"]
            assert errs["recall"]["user 200 + item 100"][j] == pytest.approx(
                100 * np.mean(np.abs(est["recall"] - truth["recall"]) / truth["recall"]), rel=1e-12)
            g = np.random.default_rng([seed, i, j, 4])
            for m_users in (100, 400):
                sub = R[g.choice(M, size=m_users, replace=False)]
                for m in both:
                    exp = 100 * np.mean(np.abs(metric_curve(sub, m, ks) - truth[m]) / truth[m])
                    assert errs[m][f"user {m_users}"][j] == pytest.approx(exp, rel=1e-10)
    # the same numbers in two worker processes
    two = C.user_against_item(ranks, N, [20, 40], 5, 40, [100, 400], 200, 3, ks, rng=seed, grid=False, n_jobs=2)
    for name in ranks:
        for m in both:
            for c, v in out[name]["errors"][m].items():
                assert np.array_equal(v, two[name]["errors"][m][c]), (name, m, c)


def test_user_sampling_error_follows_eq46():
    """The mean relative error of user sampling over many repeats is Eq. 46's sqrt(2/pi) sd / T
    (normal approximation, finite-population correction) where m p_K is large."""
    from itemsampling.metrics import metric_values

    N, M = 200, 4000
    ranks = _beta_ranks(N, M, (0.15,), seed=3)  # Recall@K between about 0.4 and 0.7 for K = 5..10
    R = ranks["m0"]
    ks = np.arange(5, 11)
    out = C.user_against_item(ranks, N, [20], 4, 32, [200, 800], 100, 150, ks, metrics=["recall"], rng=1)
    errs = out["m0"]["errors"]["recall"]
    for m in (200, 800):
        pred = []
        for k in ks:
            x = metric_values(R, "recall", int(k))
            pred.append(np.sqrt(2 / np.pi) * x.std() * np.sqrt((1 - m / M) / m) / x.mean())
        got, se = errs[f"user {m}"].mean(), errs[f"user {m}"].std(ddof=1) / np.sqrt(150)
        assert abs(got - 100 * np.mean(pred)) <= 3 * se + 0.03 * got, (m, got, 100 * np.mean(pred))
    # four times the users: half the error (Eq. 46 with the finite-population correction)
    ratio = errs["user 200"].mean() / errs["user 800"].mean()
    assert ratio == pytest.approx(np.sqrt((1 / 200 - 1 / M) / (1 / 800 - 1 / M)), rel=0.1)


def test_user_against_item_bad_input():
    ranks = _beta_ranks(100, 300, (0.5,))
    with pytest.raises(ValueError, match="user_counts must be"):
        C.user_against_item(ranks, 100, [20], 4, 32, [301], 100, 2, [1, 2])
    with pytest.raises(ValueError, match="max_size must be"):
        C.user_against_item(ranks, 100, [20], 40, 32, [50], 100, 2, [1, 2])
    with pytest.raises(ValueError, match="ks must be"):
        C.user_against_item(ranks, 100, [20], 4, 32, [50], 100, 2, [])
    with pytest.raises(ValueError, match="n_repeats must be"):
        C.user_against_item(ranks, 100, [20], 4, 32, [50], 100, 0, [1, 2])
    with pytest.raises(ValueError, match=r"global_ranks\['m0'\] must be"):
        C.user_against_item({"m0": np.array([0, 5])}, 100, [20], 4, 32, [1], 1, 2, [1, 2])


@pytest.mark.filterwarnings("ignore:cut-off K")  # below one kernel width, as in the chapter
def test_estimate_draws_is_the_straightforward_loop():
    """Chapter 8's main loop: the estimates of given draws equal the public estimators' on the same
    draws, bit for bit, in this process and in two worker processes."""
    from itemsampling import estimators as est
    from itemsampling.sampling import adaptive_sample_ranks, sample_ranks

    g = np.random.default_rng(4)
    N = 400
    ranks = [1 + np.floor((N - 1) * g.beta(a, 1.2, size=300)).astype(np.int64) for a in (0.3, 0.5)]
    ks, metrics, methods = np.arange(1, 11), ["recall", "ndcg"], ["bv_mes", "mn_mle", "mle"]
    draws = []
    for R in ranks * 2:
        r0 = sample_ranks(R, N, 8, g)
        ra, sa = adaptive_sample_ranks(R, N, 8, 64, g)
        draws.append(((r0, 8), (ra, sa), [(sample_ranks(R, N, n, g), n) for n in (20, int(round(sa.mean())))]))
    one = C.estimate_draws(draws, N, ks, metrics, methods, gamma=0.05, eta=0.01)
    two = C.estimate_draws(draws, N, ks, metrics, methods, gamma=0.05, eta=0.01, n_jobs=2)
    for d, a, b in zip(draws, one, two):
        (r0, n0), (ra, sa), samples = d
        assert np.array_equal(a["initial"], est.estimate_metric(r0, N, n0, "recall", ks, "mle"))
        direct = est.estimate_metrics(ra, N, sa, metrics, ks, "mle")["mle"]
        for m in metrics:
            assert np.array_equal(a["adaptive"][m], direct[m]) and np.array_equal(b["adaptive"][m], direct[m])
        assert len(a["samples"]) == 2 and len(a["seconds"]) == 4 and min(a["seconds"]) >= 0
        for (r, n), got, got2 in zip(samples, a["samples"], b["samples"]):
            direct = est.estimate_metrics(r, N, n, metrics, ks, methods, gamma=0.05, eta=0.01)
            assert all(np.array_equal(got[meth][m], direct[meth][m]) and np.array_equal(got2[meth][m], direct[meth][m])
                       for meth in methods for m in metrics)
        assert np.array_equal(b["initial"], a["initial"])
    with pytest.raises(ValueError, match="n_jobs"):
        C.estimate_draws(draws, N, ks, metrics, methods, n_jobs=0)
    with pytest.raises(ValueError, match="must not be empty"):
        C.estimate_draws(draws, N, ks, [], methods)


def test_repeats_rule():
    """TORS's 100 repeats up to N = 30,000, then 100 (30,000/N)^2 rounded up, at least 30."""
    assert C.REPEATS_REFERENCE_ITEMS == 30_000
    assert C.repeats_rule(3706) == C.repeats_rule(30_000) == 100
    assert C.repeats_rule(14_284) == C.repeats_rule(16_980) == C.repeats_rule(24_915) == 100  # the real catalogues
    assert C.repeats_rule(30_001) == 100  # ceil(99.99...)
    assert C.repeats_rule(40_000) == 57  # ceil(56.25)
    assert C.repeats_rule(60_000) == 30  # ceil(25) raised to the floor of 30
    assert C.repeats_rule(16_980, reference=12_000) == 50  # the old reference: ceil(49.94)
    assert C.repeats_rule(16_980, repeats=20) == 20  # never more than asked
    with pytest.raises(ValueError, match="n_items"):
        C.repeats_rule(1)
