"""User bootstrap of estimate_metric (estimators/bootstrap.py): replicates equal the estimator on
the resampled users, batched EM equals EM, coverage of the truth on data drawn from a known P(R),
reproducibility, paired comparisons, and refused input."""

import numpy as np
import pytest

from itemsampling.estimators import (
    MetricEstimate, ModelComparison, compare_estimates, estimate_metric, estimate_metrics,
)
from itemsampling.estimators import bootstrap as B
from itemsampling.estimators.distribution import cached_kernel, mle_em, sampled_rank_histogram
from itemsampling.metrics import metric_function
from itemsampling.sampling import sample_ranks
from itemsampling.theory import sample_global_ranks

N, n, M = 300, 30, 400


def _prior(N, scale):
    R = np.arange(1, N + 1)
    P = np.exp(-R / scale)
    return P / P.sum()


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    R = sample_global_ranks(_prior(N, 40.0), M, rng)
    return R, sample_ranks(R, N, n, rng=1)


def _replicator(r, n_boot, seed, metrics=("recall",), ks=(10,)):
    sizes, ranks, counts, _ = B._pair_table(r, n)
    C = B._draw_counts(counts, n_boot, np.random.default_rng(seed))
    return B._Replicator(N, n, sizes, ranks, C, list(metrics), list(ks))


@pytest.mark.parametrize("method,kw", [("sampled", {}), ("rank_estimate", {}), ("cls", {}),
                                       ("bv", {"gamma": 0.1}), ("mn", {}), ("mn_weighted", {}),
                                       ("mle", {}), ("wmle", {}), ("mes", {}), ("bv_mle", {"gamma": 0.1}),
                                       ("mn_mle", {}), ("mnw_mes", {})])
def test_each_replicate_is_the_estimate_on_the_resampled_users(data, method, kw):
    _, r = data
    rep = _replicator(r, 4, seed=5, metrics=("recall", "ndcg"), ks=(5, 20))
    reps = rep.replicates(method, kw)
    assert reps.shape == (4, 2, 2)
    for b in range(4):
        rb = rep._ranks(b)
        assert rb.size == M
        for i, m in enumerate(("recall", "ndcg")):
            direct = estimate_metric(rb, N, n, m, [5, 20], method, **kw)
            np.testing.assert_allclose(reps[b, i], direct, rtol=1e-6, atol=1e-10)


def test_batch_em_equals_em_row_by_row(data):
    _, r = data
    rep = _replicator(r, 3, seed=2)
    K = cached_kernel(N, n)
    Kc = B._kernel_columns(N, rep.pair_sizes, rep.pair_ranks, True)
    P, iters, conv = B.batch_em(rep.C, Kc)
    assert conv.all()
    for b in range(3):
        fit = mle_em(sampled_rank_histogram(rep._ranks(b), n), K)
        np.testing.assert_allclose(P[b], fit.distribution, rtol=1e-7, atol=1e-12)
        assert iters[b] == fit.iterations


def test_interval_contains_the_estimate_and_fields(data):
    _, r = data
    e = estimate_metric(r, N, n, "recall", 10, "bv", gamma=0.1, ci=0.9, n_boot=100, rng=0, interval="bootstrap")
    assert isinstance(e, MetricEstimate)
    assert e.estimate == pytest.approx(estimate_metric(r, N, n, "recall", 10, "bv", gamma=0.1))
    assert e.low < e.estimate < e.high and e.confidence == 0.9 and e.n_boot == 100 and e.method == "bv"
    v = estimate_metric(r, N, n, "ndcg", [5, 10, 20], "mle", ci=0.9, n_boot=50, rng=0)
    assert v.estimate.shape == v.low.shape == v.high.shape == (3,)
    assert np.all(v.low <= v.estimate) and np.all(v.estimate <= v.high)


def test_percentile_interval_of_the_linear_bootstrap_is_the_quantile_of_its_replicates(data):
    # hand computation for "sampled": replicate b is the mean of F over the resampled users
    _, r = data
    rng = np.random.default_rng(11)
    e = estimate_metric(r, N, n, "recall", 10, "sampled", ci=0.8, n_boot=300, rng=11)
    ranks, counts = np.unique(r, return_counts=True)
    C = rng.multinomial(M, counts / M, size=300)
    reps = C @ (ranks <= 10) / M
    assert (e.low, e.high) == pytest.approx(tuple(np.quantile(reps, [0.1, 0.9])), rel=1e-12)


def test_reproducible_with_rng_and_different_seeds_differ(data):
    _, r = data
    kw = dict(ci=0.95, n_boot=40, interval="bootstrap")  # the bootstrap's own interval wherever K lies
    a = estimate_metric(r, N, n, "recall", 10, "mle", rng=3, **kw)
    b = estimate_metric(r, N, n, "recall", 10, "mle", rng=np.random.default_rng(3), **kw)
    c = estimate_metric(r, N, n, "recall", 10, "mle", rng=4, **kw)
    assert (a.low, a.high) == (b.low, b.high)
    assert (a.low, a.high) != (c.low, c.high)


def test_estimate_metrics_with_ci_matches_single_calls(data):
    _, r = data
    out = estimate_metrics(r, N, n, ["recall", "ndcg"], 10, ["sampled", "bv_mle", "mle"], gamma=0.1,
                           ci=0.9, n_boot=30, rng=7)
    for meth in ("sampled", "bv_mle", "mle"):
        for m in ("recall", "ndcg"):
            one = estimate_metric(r, N, n, m, 10, meth, ci=0.9, n_boot=30, rng=7,
                                  **({"gamma": 0.1} if meth == "bv_mle" else {}))
            got = out[meth][m]
            assert (got.estimate, got.low, got.high) == pytest.approx((one.estimate, one.low, one.high), rel=1e-9)


def _coverage(method, kw, N_, n_, M_, K, scale, n_data, seed, level=0.9, n_boot=200):
    P = _prior(N_, scale)
    truth = float(P @ metric_function("recall", K, N_)(np.arange(1, N_ + 1)))
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n_data):
        r = sample_ranks(sample_global_ranks(P, M_, rng), N_, n_, rng=rng)
        e = estimate_metric(r, N_, n_, "recall", K, method, ci=level, n_boot=n_boot, rng=rng, **kw)
        hits += e.low <= truth <= e.high
    return hits / n_data


def test_bv_interval_covers_the_truth_at_the_nominal_rate():
    # BV (gamma = 0.01) at N = 100, n = 50 is unbiased to < 0.001 for Recall@10 (sd 0.04), so its
    # percentile interval should cover the population Recall@10 about 90% of the time. Monte Carlo
    # standard error of a coverage rate over 300 data sets: sqrt(0.9 * 0.1 / 300) = 0.017; we
    # accept 3 standard errors plus 0.02 for the percentile bootstrap's known under-coverage at
    # M = 300 users.
    cov = _coverage("bv", {"gamma": 0.01}, 100, 50, 300, 10, 15.0, 300, seed=1)
    assert abs(cov - 0.9) <= 3 * 0.017 + 0.02


def test_paired_comparison_is_narrower_and_finds_a_real_difference():
    rng = np.random.default_rng(3)
    R = sample_global_ranks(_prior(N, 40.0), 2000, rng)
    Rb = np.minimum(N, R + rng.integers(0, 6, size=R.size))  # B is slightly worse for every user
    ra = sample_ranks(R, N, n, rng=rng)
    rb = sample_ranks(Rb, N, n, rng=rng)
    p = compare_estimates(ra, rb, N, n, "recall", 10, "bv", gamma=0.1, rng=0)
    u = compare_estimates(ra, rb, N, n, "recall", 10, "bv", gamma=0.1, rng=0, paired=False)
    assert isinstance(p, ModelComparison) and p.paired and not u.paired
    assert p.difference == pytest.approx(estimate_metric(ra, N, n, "recall", 10, "bv", gamma=0.1)
                                         - estimate_metric(rb, N, n, "recall", 10, "bv", gamma=0.1))
    assert p.difference == u.difference
    assert p.low <= p.difference <= p.high
    assert (p.high - p.low) < (u.high - u.low)
    # identical models: difference 0, every replicate 0, p-value 1
    same = compare_estimates(ra, ra, N, n, "recall", 10, "mle", n_boot=20, rng=0)
    assert same.difference == 0 and same.low == 0 == same.high and same.p_value == 1.0 and same.zero_inside


def test_bootstrap_p_value_by_hand():
    assert B.bootstrap_p_value(np.array([1.0, 2.0, 3.0, -1.0])) == pytest.approx(2 * 2 / 5)
    assert B.bootstrap_p_value(np.arange(1.0, 100.0)) == pytest.approx(2 / 100)


@pytest.mark.parametrize("kw,match", [
    ({"ci": 1.0}, "ci must be a confidence level in \\(0, 1\\)"),
    ({"ci": 0}, "ci must be a confidence level"),
    ({"ci": "0.95"}, "ci must be a confidence level"),
    ({"ci": float("nan")}, "ci must be a confidence level"),
    ({"ci": True}, "ci must be a confidence level"),
    ({"ci": 0.9, "n_boot": 5}, "n_boot must be >= 10"),
    ({"ci": 0.9, "n_boot": 2.5}, "n_boot must be an integer"),
    ({"ci": 0.9, "rng": "seed"}, "rng must be None"),
])
def test_bad_input_names_the_argument(data, kw, match):
    _, r = data
    with pytest.raises(ValueError, match=match):
        estimate_metric(r, N, n, "recall", 10, "sampled", **kw)


def test_bad_comparison_input(data):
    _, r = data
    with pytest.raises(ValueError, match="sampled_ranks_a has 400 users, sampled_ranks_b has 399"):
        compare_estimates(r, r[:-1], N, n, "recall", 10, "sampled")
    with pytest.raises(ValueError, match="sampled_ranks_b must lie in 1..sample_size"):
        compare_estimates(r, np.full(r.size, n + 1), N, n, "recall", 10, "sampled")
    with pytest.raises(ValueError, match="paired must be True or False"):
        compare_estimates(r, r, N, n, "recall", 10, "sampled", paired="yes")
    with pytest.raises(ValueError, match="per-user sample sizes are supported by methods"):
        sizes = np.where(np.arange(r.size) % 2 == 0, n, 2 * n)
        compare_estimates(r, r, N, sizes, "recall", 10, "bv", gamma=0.1)
    with pytest.raises(ValueError, match="unknown parameter"):
        estimate_metric(r, N, n, "recall", 10, "mle", ci=0.9, n_boot=10, rng=0, etaa=1)


def test_per_user_sizes_resample_each_users_pair_together():
    # a replicate of the sampled AUC with per-user sizes is the mean of (n_u - r_u)/(n_u - 1) over
    # the resampled users, each with its own n_u: check against the users rebuilt from the table
    rng = np.random.default_rng(4)
    R = sample_global_ranks(_prior(N, 40.0), 500, rng)
    sizes = np.where(rng.random(500) < 0.5, n, 2 * n)
    r = np.array([sample_ranks([Ru], N, int(s), rng=rng)[0] for Ru, s in zip(R, sizes)])
    ps, pr, counts, inv = B._pair_table(r, sizes)
    np.testing.assert_array_equal(ps[inv], sizes)
    np.testing.assert_array_equal(pr[inv], r)
    C = B._draw_counts(counts, 5, np.random.default_rng(0))
    rep = B._Replicator(N, sizes, ps, pr, C, ["auc", "recall"], [None])
    reps = rep.replicates("sampled", {})
    for b in range(5):
        rb, sb = rep._ranks(b), rep._sizes(b)
        assert rb.size == sb.size == 500
        assert reps[b, 0, 0] == pytest.approx(np.mean((sb - rb) / (sb - 1)), rel=1e-12)
    with pytest.raises(ValueError, match="per-user sample sizes are supported by methods"):
        rep.replicates("bv", {"gamma": 0.1})


# ---------------------------------------------------------------------------------------------
# shared replicates for several models (bootstrap_models)
# ---------------------------------------------------------------------------------------------
def _three_models(seed=0, M_=400):
    rng = np.random.default_rng(seed)
    R = sample_global_ranks(_prior(N, 40.0), M_, rng)
    Rb = np.minimum(N, R + rng.integers(0, 8, size=R.size))  # B slightly worse for every user
    ra = sample_ranks(R, N, n, rng=rng)
    return {"A": ra, "B": sample_ranks(Rb, N, n, rng=rng), "C": ra.copy()}


def test_shared_replicates_are_joint_and_serve_every_metric_and_comparison():
    ranks = _three_models()
    res = B.bootstrap_models(ranks, N, n, ["recall", "ndcg"], [5, 20], "mle", n_boot=30, rng=1, paired=True)
    assert res.groups == [["A", "B", "C"]] and set(res.comparisons) == {("A", "B"), ("A", "C"), ("B", "C")}
    # A and C hold the same ranks: resampled jointly, every replicate is the same, the difference 0
    np.testing.assert_array_equal(res.replicates["A"], res.replicates["C"])
    same = res.comparisons[("A", "C")]["recall"]
    assert np.all(same.low == 0) and np.all(same.high == 0) and np.all(same.p_value == 1.0)
    # point estimates are estimate_metrics' (unchanged), differences their differences
    for m in ("A", "B"):
        for i, metric in enumerate(("recall", "ndcg")):
            direct = estimate_metric(ranks[m], N, n, metric, [5, 20], "mle")
            np.testing.assert_array_equal(res.estimates[m][metric].estimate, direct)
            lo, hi = B.percentile_interval(res.replicates[m][:, i, :], 0.95)
            np.testing.assert_array_equal(res.estimates[m][metric].low, lo)
            np.testing.assert_array_equal(res.estimates[m][metric].high, hi)
    d = res.replicates["A"][:, 1, :] - res.replicates["B"][:, 1, :]
    c = res.comparisons[("A", "B")]["ndcg"]
    np.testing.assert_array_equal(c.low, B.percentile_interval(d, 0.95)[0])
    np.testing.assert_array_equal(c.p_value, B.bootstrap_p_value(d))
    assert c.paired
    # one seed, one answer, whatever the number of threads
    again = B.bootstrap_models(ranks, N, n, ["recall", "ndcg"], [5, 20], "mle", n_boot=30, rng=1, paired=True,
                               n_jobs=1)
    for m in ranks:
        np.testing.assert_array_equal(again.replicates[m], res.replicates[m])


def test_shared_replicates_are_the_estimator_on_jointly_resampled_users():
    # "sampled" Recall@10 replicate b of each model is the mean of 1{r_u <= 10} over the resampled
    # users; with the joint draw, model A's and B's replicates use the *same* users, so with B's
    # ranks a known function of A's (r_B = min(r_A + 1, n)) the replicate of B is fixed by A's table
    rng = np.random.default_rng(5)
    ra = rng.integers(1, n + 1, size=300)
    rb = np.minimum(ra + 1, n)
    res = B.bootstrap_models({"A": ra, "B": rb}, N, n, ["recall"], [10, 11], "sampled", n_boot=50, rng=2,
                             paired=True)
    # Recall@11 of B = share of resampled users with r_A <= 10 = Recall@10 of A, replicate by replicate
    np.testing.assert_array_equal(res.replicates["B"][:, 0, 1], res.replicates["A"][:, 0, 0])
    # the independent (unpaired) bootstrap breaks that identity
    un = B.bootstrap_models({"A": ra, "B": rb}, N, n, ["recall"], [10, 11], "sampled", n_boot=50, rng=2,
                            paired=False)
    assert un.groups == [["A"], ["B"]] and not un.comparisons[("A", "B")]["recall"].paired
    assert not np.array_equal(un.replicates["B"][:, 0, 1], un.replicates["A"][:, 0, 0])


def test_users_group_models_and_align_them():
    ranks = _three_models(M_=200)
    ids = np.arange(200).astype(str)
    perm = np.random.default_rng(0).permutation(200)
    users = {"A": ids, "B": ids[perm], "C": np.char.add("x", ids)}  # C scored on other users
    ranks_b = {"A": ranks["A"], "B": ranks["B"][perm], "C": ranks["C"]}
    res = B.bootstrap_models(ranks_b, N, n, "recall", 10, "sampled", n_boot=20, rng=0, users=users)
    assert res.groups == [["A", "B"], ["C"]]
    assert res.comparisons[("A", "B")]["recall"].paired and not res.comparisons[("A", "C")]["recall"].paired
    plain = B.bootstrap_models({"A": ranks["A"], "B": ranks["B"]}, N, n, "recall", 10, "sampled", n_boot=20,
                               rng=0, paired=True)
    np.testing.assert_array_equal(res.replicates["B"], plain.replicates["B"])  # shuffled rows realigned
    with pytest.raises(ValueError, match="paired=True needs every model scored on the same users"):
        B.bootstrap_models(ranks_b, N, n, "recall", 10, "sampled", n_boot=20, users=users, paired=True)
    with pytest.raises(ValueError, match="lists a user more than once"):
        B.bootstrap_models({"A": ranks["A"]}, N, n, "recall", 10, "sampled", n_boot=20,
                           users={"A": np.zeros(200, dtype=int)})
    with pytest.raises(ValueError, match="method must be one of"):
        B.bootstrap_models(ranks, N, n, "recall", 10, "mlee")
    with pytest.raises(ValueError, match="n_jobs must be"):
        B.bootstrap_models(ranks, N, n, "recall", 10, "sampled", n_jobs=0)


@pytest.mark.parametrize("method,kw", [("mle", {}), ("bv", {"gamma": 0.1})])
def test_intervals_agree_with_the_separate_bootstraps_within_monte_carlo_error(method, kw):
    """Over 12 seeds, the mean of every interval end from the shared replicates agrees with the
    mean from the separate per-model (bootstrap_metrics) and per-comparison (compare_estimates)
    bootstraps within 4 Monte Carlo standard errors of the difference; a 75 % interval read off
    the same replicates is told apart from the 95 % ones by the same yardstick (the test has power)."""
    ranks = _three_models(seed=3, M_=400)
    # B's sampled rank = A's pushed down by 0-2 places: strongly correlated, so the paired interval
    # of the difference is far narrower than the unpaired one
    ranks["B"] = np.minimum(ranks["A"] + np.random.default_rng(4).integers(0, 3, size=400), n)
    del ranks["C"]
    seeds, ks = range(12), [5, 20]
    new, old, unp = [], [], []
    for s in seeds:
        res = B.bootstrap_models(ranks, N, n, ["ndcg"], ks, method, n_boot=100, rng=s, paired=True, **kw)
        new.append(np.concatenate([res.estimates[m]["ndcg"].low for m in "AB"]
                                  + [res.estimates[m]["ndcg"].high for m in "AB"]
                                  + [res.comparisons[("A", "B")]["ndcg"].low, res.comparisons[("A", "B")]["ndcg"].high]))
        per = [B.bootstrap_metrics(ranks[m], N, n, ["ndcg"], ks, [method], n_boot=100, rng=100 + s, **kw)[method]["ndcg"]
               for m in "AB"]
        cmp = compare_estimates(ranks["A"], ranks["B"], N, n, "ndcg", ks, method, n_boot=100, rng=200 + s, **kw)
        old.append(np.concatenate([per[0].low, per[1].low, per[0].high, per[1].high, cmp.low, cmp.high]))
        q = [np.quantile(res.replicates[m][:, 0, :], [0.125, 0.875], axis=0) for m in "AB"]
        unp.append(np.concatenate([q[0][0], q[1][0], q[0][1], q[1][1]]))
    new, old, unp = np.array(new), np.array(old), np.array(unp)
    S = len(seeds)
    se = np.sqrt(new.var(axis=0, ddof=1) / S + old.var(axis=0, ddof=1) / S)
    gap = np.abs(new.mean(axis=0) - old.mean(axis=0))
    assert np.all(gap <= 4 * se + 1e-12), (gap / se).round(2)
    se_u = np.sqrt(old[:, :8].var(axis=0, ddof=1) / S + unp.var(axis=0, ddof=1) / S)
    live = old[:, :8].mean(axis=0) > 1e-3  # ends pinned at 0 (an estimate at the boundary) cannot move
    assert live.sum() >= 6
    assert np.all((np.abs(old[:, :8].mean(axis=0) - unp.mean(axis=0)) > 4 * se_u)[live])
