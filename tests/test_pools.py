"""Per-user catalogue sizes N_u (``n_items`` one size per user): the model of
``itemsampling.estimators.distribution`` ("Per-user catalogue sizes"), the estimators, the user
bootstrap, the test-users target and the ``estimate`` command's ``n_items`` column."""

import json
import re
import warnings

import numpy as np
import pytest

from itemsampling.cli import main as cli_main
from itemsampling.estimators import (POOL_METHODS, compare_estimates, estimate_metric, estimate_metrics,
                                     estimate_rank_distribution)
from itemsampling.estimators.bootstrap import _pair_table, _Replicator, bootstrap_models
from itemsampling.estimators.distribution import (check_n_items, fit_rank_distribution, pool_metric_matrix,
                                                  pool_rank_map)
from itemsampling.metrics import metric_function
from itemsampling.sampling import sample_ranks

pytestmark = pytest.mark.filterwarnings("ignore::itemsampling._validation.ResolutionWarning")


def simulate(seed, N=1000, M=2000, n=100, a=0.5, b=4.0, low=0.6):
    """Users with pools N_u uniform in [low N, N], rank fraction ~ Beta(a, b) scaled to each pool
    (R_u = 1 + floor(t N_u), the CDF-discretised Beta model), sampled ranks drawn in each pool."""
    rng = np.random.default_rng(seed)
    pools = rng.integers(int(low * N), N + 1, size=M)
    R = np.minimum(1 + np.floor(rng.beta(a, b, size=M) * pools).astype(np.int64), pools)
    r = np.empty(M, dtype=np.int64)
    for g in np.unique(pools):
        sel = pools == g
        r[sel] = sample_ranks(R[sel], int(g), n, rng=rng)
    return pools, R, r


def truth(pools, R, metric, k):
    """The full-ranking metric of the users, each ranked in its own pool."""
    return sum(metric_function(metric, k, int(g))(R[pools == g]).sum() for g in np.unique(pools)) / R.size


# ------------------------------------------------------------------------------ the model
def test_pool_rank_map_hand_computed_and_invariants():
    # N = 5, N_u = 3: t = 0, 1/4, 1/2, 3/4, 1 -> 1 + round(2 t) with halves up = 1, 2, 2, 3, 3
    assert pool_rank_map(5, 3).tolist() == [1, 2, 2, 3, 3]
    assert pool_rank_map(7, 7).tolist() == list(range(1, 8))  # identity for the largest pool
    m = pool_rank_map(3706, 2000)
    assert m[0] == 1 and m[-1] == 2000 and np.all(np.diff(m) >= 0)
    assert np.array_equal(np.unique(m), np.arange(1, 2001))  # every rank of the pool is reached
    # within half a step of the rank fraction
    t = np.arange(3706) / 3705
    assert np.max(np.abs((m - 1) / 1999 - t)) <= 0.5 / 1999 + 1e-15


def test_pool_metric_matrix_is_the_metric_in_each_pool():
    F = pool_metric_matrix(["recall", "ndcg"], [10], 50, [50, 20])
    assert F.shape == (50, 2, 1, 2)
    assert np.allclose(F[:, 1, 0, 1], metric_function("ndcg", 10, 20)(pool_rank_map(50, 20)))
    assert np.array_equal(F[:, 0, 0, 0], (np.arange(1, 51) <= 10).astype(float))
    assert np.array_equal(F[:, 0, 0, 1], (pool_rank_map(50, 20) <= 10).astype(float))
    auc = pool_metric_matrix(["auc"], [None], 50, [20])[:, 0, 0, 0]
    assert np.allclose(auc, (20 - pool_rank_map(50, 20)) / 19.0)


def test_fit_is_free_of_the_pools_with_replacement():
    pools, _, r = simulate(0, M=500)
    for method in ("mle", "mes"):
        a = estimate_rank_distribution(r, pools, 100, method)
        b = estimate_rank_distribution(r, int(pools.max()), 100, method)
        assert np.array_equal(a, b)
    assert fit_rank_distribution(r, pools, 100, "mle").distribution.shape == (int(pools.max()),)


# ------------------------------------------------------------------------------ equal pools = one N
@pytest.mark.parametrize("method", ["sampled", "rank_estimate", "cls", "bv", "mn", "mn_weighted", "mle", "wmle",
                                    "mes", "bv_mle", "bv_mes", "mn_mle", "mn_mes", "mnw_mle", "mnw_mes"])
def test_equal_pools_reproduce_the_int_path(method):
    rng = np.random.default_rng(1)
    r = rng.integers(1, 51, size=300)
    kw = {"gamma": 0.1} if method.startswith("bv") else {}
    a = estimate_metrics(r, np.full(300, 400), 50, ["ndcg", "recall"], [5, 20], [method], **kw)[method]
    b = estimate_metrics(r, 400, 50, ["ndcg", "recall"], [5, 20], [method], **kw)[method]
    for m in a:
        assert np.array_equal(a[m], b[m])


def test_the_pool_code_path_reproduces_the_int_path_where_the_pools_agree():
    # one user in a pool one item smaller sends every estimator down the pool code; the top ranks
    # of both pools coincide (R_u(R) = R for R <= 20 here), so NDCG@20 is the one-N value to
    # rounding, and rank_estimate moves by at most that user's share 1/M
    pools, _, r = simulate(2, M=1000)
    N = int(pools.max())
    almost = np.full(r.size, N)
    almost[0] = N - 1
    assert np.array_equal(pool_rank_map(N, N - 1)[:20], np.arange(1, 21))
    for method in ("mle", "bv_mle", "mn", "mes", "rank_estimate"):
        kw = {"gamma": 0.1} if method.startswith("bv") else {}
        a = estimate_metric(r, almost, 100, "ndcg", 20, method, **kw)
        b = estimate_metric(r, N, 100, "ndcg", 20, method, **kw)
        assert abs(a - b) <= (1.0 / r.size if method == "rank_estimate" else 1e-12), (method, a, b)


def test_pools_with_per_user_sample_sizes():
    # adaptive sampling (per-user n_u) and per-user N_u together: MLE on the (n_u, r_u) table, the
    # metric in each user's pool; equal pools give the one-N result, and each pool must hold n_u
    pools, _, r = simulate(4, M=500, n=100)
    sizes = np.where(np.arange(r.size) % 2 == 0, 100, 200)
    r2 = np.where(sizes == 200, 2 * r - 1, r)
    assert estimate_metric(r2, np.full(r.size, 1000), sizes, "recall", 50, "mle") == \
        estimate_metric(r2, 1000, sizes, "recall", 50, "mle")
    P = estimate_rank_distribution(r2, int(pools.max()), sizes, "mle")
    N = int(pools.max())
    direct = np.mean([P @ metric_function("recall", 50, int(g))(pool_rank_map(N, int(g))) for g in pools])
    assert estimate_metric(r2, pools, sizes, "recall", 50, "mle") == pytest.approx(direct, rel=1e-12)
    small = pools.copy()
    small[1] = 150  # user 1 has n_u = 200
    with pytest.raises(ValueError, match=r"n_items must be >= sample_size.*user 1"):
        estimate_metric(r2, small, sizes, "recall", 50, "mle")


def test_equal_pools_reproduce_the_int_path_with_intervals():
    rng = np.random.default_rng(3)
    r = rng.integers(1, 31, size=200)
    for target in ("population", "test-users"):
        a = estimate_metric(r, np.full(200, 300), 30, "recall", 10, "mle", ci=0.9, n_boot=20, rng=4, target=target)
        b = estimate_metric(r, 300, 30, "recall", 10, "mle", ci=0.9, n_boot=20, rng=4, target=target)
        assert (a.estimate, a.low, a.high) == (b.estimate, b.low, b.high)


# ------------------------------------------------------------------------------ against the truth
def test_per_user_sizes_recover_the_truth_and_one_guessed_n_does_not():
    """Over 8 simulated data sets the per-user estimate's mean error is within 3 Monte Carlo
    standard errors of 0 for MLE, BV_MLE and MES, while N = the largest pool is biased by more
    than 3 standard errors and has the larger root mean square error."""
    metric, k, methods = "recall", 50, ["mle", "bv_mle", "mes"]
    err = {"pools": [], "max": []}
    for seed in range(8):
        pools, R, r = simulate(seed)
        T = truth(pools, R, metric, k)
        for label, N in (("pools", pools), ("max", int(pools.max()))):
            est = estimate_metrics(r, N, 100, [metric], k, methods, gamma=0.1)
            err[label].append([est[m][metric] - T for m in methods])
    e, g = np.array(err["pools"]), np.array(err["max"])
    se = e.std(axis=0, ddof=1) / np.sqrt(len(e))
    assert np.all(np.abs(e.mean(axis=0)) <= 3 * se), (e.mean(axis=0), se)
    se_g = g.std(axis=0, ddof=1) / np.sqrt(len(g))
    assert np.all(np.abs(g.mean(axis=0)) > 3 * se_g), (g.mean(axis=0), se_g)
    assert np.all(np.sqrt((e ** 2).mean(axis=0)) < np.sqrt((g ** 2).mean(axis=0)))


def test_rank_estimate_uses_each_users_own_pool():
    # Krichene & Rendle Eq. 20 per user: F(floor(1 + (N_u - 1)(r - 1)/(n - 1)))
    pools = np.array([100, 100, 60, 60, 80])
    r = np.array([1, 5, 5, 10, 10])
    R_hat = 1 + ((pools - 1) * (r - 1)) // 9
    expected = np.mean([metric_function("ndcg", 20, int(g))(np.array([x]))[0] for g, x in zip(pools, R_hat)])
    assert estimate_metric(r, pools, 10, "ndcg", 20, "rank_estimate") == pytest.approx(expected, abs=1e-15)


def test_mle_metric_is_the_pool_weighted_sum():
    pools, _, r = simulate(5, M=400)
    P = estimate_rank_distribution(r, int(pools.max()), 100, "mle")
    N = int(pools.max())
    direct = np.mean([P @ metric_function("ndcg", 10, int(g))(pool_rank_map(N, int(g))) for g in pools])
    assert estimate_metric(r, pools, 100, "ndcg", 10, "mle") == pytest.approx(direct, rel=1e-12)


# ------------------------------------------------------------------------------ bootstrap and compare
def test_bootstrap_replicates_are_the_estimator_on_the_resampled_users():
    pools, _, r = simulate(6, M=600)
    ps, pr, cnt, _, pp = _pair_table(r, 100, pools)
    C = np.random.default_rng(7).multinomial(r.size, cnt / r.size, size=3).astype(float)
    for method in ("mle", "bv_mle", "mn", "mes", "rank_estimate", "sampled"):
        kw = {"gamma": 0.1} if method.startswith("bv") else {}
        reps = _Replicator(int(pools.max()), 100, ps, pr, C, ["recall", "ndcg"], [10], 1, pp).replicates(method, kw)
        for b in range(3):
            c = C[b].astype(np.int64)
            est = estimate_metrics(np.repeat(pr, c), np.repeat(pp, c), 100, ["recall", "ndcg"], [10], [method],
                                   **kw)[method]
            assert reps[b, 0, 0] == pytest.approx(est["recall"][0], abs=1e-12)
            assert reps[b, 1, 0] == pytest.approx(est["ndcg"][0], abs=1e-12)


def test_compare_and_bootstrap_models_with_pools():
    pools, _, r = simulate(8, M=800)
    rb = np.maximum(1, r - 3)  # model B ranks every target a little higher
    c = compare_estimates(r, rb, pools, 100, "ndcg", 20, "mle", n_boot=50, rng=0)
    assert c.estimate_a == pytest.approx(estimate_metric(r, pools, 100, "ndcg", 20, "mle"))
    assert c.low < c.difference < c.high and c.high < 0
    res = bootstrap_models({"A": r, "B": rb}, pools, 100, ["ndcg"], 20, "mle", n_boot=50, rng=0, paired=True)
    assert res.estimates["A"]["ndcg"].estimate == pytest.approx(c.estimate_a)
    assert res.comparisons[("A", "B")]["ndcg"].high < 0


def test_test_users_interval_covers_with_pools():
    """The test-users interval (parametric bootstrap, per-user pools) covers the users' own metric
    in at least 8 of 10 simulated data sets (nominal 95 %: 8 or more with probability 0.99)."""
    covered = 0
    for seed in range(10):
        pools, R, r = simulate(20 + seed, N=500, M=600)
        e = estimate_metric(r, pools, 100, "recall", 25, "mle", ci=0.95, n_boot=30, rng=seed, target="test-users")
        covered += e.low <= truth(pools, R, "recall", 25) <= e.high
    assert covered >= 8


# ------------------------------------------------------------------------------ validation
def test_bad_n_items_are_refused_naming_the_argument():
    r = np.array([1, 2, 3])
    with pytest.raises(ValueError, match=r"n_items .*one catalogue size per user \(3"):
        estimate_metric(r, [50, 60], 10, "recall", 5, "mle")
    with pytest.raises(ValueError, match=r"n_items must be >= sample_size.*user 1"):
        estimate_metric(r, [50, 8, 60], 10, "recall", 5, "mle")
    with pytest.raises(ValueError, match=r"n_items"):
        estimate_metric(r, [50, 1.5, 60], 10, "recall", 5, "mle")
    for bad, shown in (([1, 5, 6], "1 (user 0)"), ([5, 2.5, 6], "2.5 (user 1)"), ([5, 6, np.nan], "nan (user 2)")):
        with pytest.raises(ValueError, match=r"n_items must hold one integer catalogue size >= 2 per user, got "
                                             + re.escape(shown)):
            check_n_items(bad)
    with pytest.raises(ValueError, match=r"n_items must hold one integer catalogue size >= 2 per user, got dtype"):
        check_n_items([True, False])
    with pytest.raises(ValueError, match=r"n_items must be an int or a 1-d array"):
        estimate_metric(r, [[50, 60, 70]], 10, "recall", 5, "mle")
    with pytest.raises(ValueError, match=r"method 'cls' needs one n_items.*accepted by methods"):
        estimate_metric(r, [50, 60, 70], 10, "recall", 5, "cls")
    assert "cls" not in POOL_METHODS and "mle" in POOL_METHODS
    with pytest.raises(ValueError, match=r"n_items.*need replacement=True"):
        estimate_metric(r, [50, 60, 70], 10, "recall", 5, "mle", replacement=False)
    # on the grid, per-user pools are taken by MLE, WMLE and MES (the same value as the dense path) ...
    assert estimate_metric(r, [50, 60, 70], 10, "recall", 5, "mle", grid=True) == pytest.approx(
        estimate_metric(r, [50, 60, 70], 10, "recall", 5, "mle"), rel=1e-9)
    # ... and refused, naming the methods that take them, by the others
    with pytest.raises(ValueError, match=r"per-user n_items.*supported on the grid by methods.*not by 'bv'"):
        estimate_metric(r, [50, 60, 70], 10, "recall", 5, "bv", gamma=0.1, grid=True)
    with pytest.raises(ValueError, match=r"sampled_ranks must lie in 1..10, got 11"):
        estimate_metric([1, 2, 11], [50, 60, 70], 10, "recall", 5, "mle")


# ------------------------------------------------------------------------------ the estimate command
def _write(tmp_path, rows, header="user,model,rank,n_items"):
    p = tmp_path / "ranks.csv"
    p.write_text(header + "\n" + "\n".join(",".join(map(str, row)) for row in rows) + "\n")
    return p


def test_cli_reads_the_n_items_column(tmp_path, capsys):
    pools, _, r = simulate(9, M=300, n=50)
    rb = np.maximum(1, r - 2)
    rows = [(f"u{u}", "A", r[u], pools[u]) for u in range(r.size)] + \
           [(f"u{u}", "B", rb[u], pools[u]) for u in range(r.size)]
    p = _write(tmp_path, rows)
    assert cli_main(["estimate", str(p), "--sample-size", "50", "--metric", "ndcg", "--k", "20", "--n-boot", "20",
                     "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_items"] == "per-user"
    assert out["models"]["A"]["n_items"]["max"] == int(pools.max())
    est = {row["model"]: row["estimate"] for row in out["estimates"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert est["A"] == pytest.approx(estimate_metric(r, pools, 50, "ndcg", 20, "mle"), rel=1e-12)
        assert est["B"] == pytest.approx(estimate_metric(rb, pools, 50, "ndcg", 20, "mle"), rel=1e-12)


def test_cli_n_items_rules_and_bad_values(tmp_path, capsys):
    p = _write(tmp_path, [("u1", "A", 3, 100), ("u2", "A", 5, 80)])
    assert cli_main(["estimate", str(p), "--sample-size", "10", "--n-items", "100", "--quiet"]) == 2
    assert "n_items' and --n-items was given too; give one of them" in capsys.readouterr().err
    q = _write(tmp_path, [("u1", "A", 3), ("u2", "A", 5)], header="user,model,rank")
    assert cli_main(["estimate", str(q), "--sample-size", "10", "--quiet"]) == 2
    assert "--n-items is required" in capsys.readouterr().err
    p = _write(tmp_path, [("u1", "A", 3, 100), ("u2", "A", 5, 8)])
    assert cli_main(["estimate", str(p), "--sample-size", "10", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{p}, line 3, column 'n_items': 8 is out of range" in err and "must lie in 10..2^62" in err
    p = _write(tmp_path, [("u1", "A", 3, "x"), ("u2", "A", 5, 80)])
    assert cli_main(["estimate", str(p), "--sample-size", "10", "--quiet"]) == 2
    assert f"{p}, line 2, column 'n_items': 'x' is not a number" in capsys.readouterr().err
    p = _write(tmp_path, [("u1", "A", 3, 100, 20), ("u2", "A", 5, 30, 40)], header="user,model,rank,n_items,sample_size")
    assert cli_main(["estimate", str(p), "--quiet"]) == 2
    assert f"{p}, line 3, column 'sample_size': 40 is out of range" in capsys.readouterr().err
    p = _write(tmp_path, [("u1", "A", 3, 100), ("u2", "A", 5, 80)])
    assert cli_main(["estimate", str(p), "--sample-size", "10", "--method", "cls", "--quiet"]) == 2
    assert "per-user catalogue sizes" in capsys.readouterr().err
