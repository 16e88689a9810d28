"""The interval of method="auto" that keeps its coverage: the identification bounds (a hand-checked linear
program, the truth inside them, their shrinking with M, their refusals), the rule that gives each cut-off its kind
of interval, and the coverage on a small grid of the validation (both targets, exact binomial test)."""

import numpy as np
import pytest
from scipy import stats

from itemsampling.book import holm
from itemsampling.estimators import estimate_metric
from itemsampling.estimators.auto import RESOLVED, coverage_study, interval_plan
from itemsampling.estimators.bounds import clopper_pearson, cut_points, identification_bounds, lp_bounds
from itemsampling.estimators.grid import cached_kernel
from itemsampling.mapping import beta_rank_cdf, sample_beta_ranks
from itemsampling.metrics import metric_function
from itemsampling.sampling import sample_ranks

pytestmark = pytest.mark.filterwarnings("ignore::itemsampling._validation.ResolutionWarning")


def test_lp_hand_computed():
    # N = 3, n = 2 with replacement: Pr(r = 1 | R) = 1, 1/2, 0, so Q = Pr(r <= 1) = P1 + P2/2. With Q in
    # [0.7, 0.8]: Recall@1 = P1 ranges over [2 * 0.7 - 1, 0.8] (all mass on ranks 1-2, or on ranks 1 and 3),
    # Recall@2 = P1 + P2 over [0.7, 1] (P2 = 0 and P1 = 0.7; or P3 = 0).
    A = np.cumsum(cached_kernel(3, 2, True), axis=1)[:, :1]
    assert A[:, 0] == pytest.approx([1.0, 0.5, 0.0])
    R = np.arange(1, 4)
    assert lp_bounds(metric_function("recall", 1, 3)(R), A, np.array([0.7]), np.array([0.8])) == pytest.approx((0.4, 0.8))
    assert lp_bounds(metric_function("recall", 2, 3)(R), A, np.array([0.7]), np.array([0.8])) == pytest.approx((0.7, 1.0))
    # the same through the data: one cut point, the Clopper-Pearson interval at the level itself
    r = np.array([1] * 75 + [2] * 25)
    b = identification_bounds(r, 3, 2, "recall", [1, 2], ci=0.9, cuts=[1])
    lo, hi = clopper_pearson(75, 100, 0.9)
    assert (float(lo), float(hi)) == pytest.approx((stats.beta.ppf(0.05, 75, 26), stats.beta.ppf(0.95, 76, 25)))
    assert b.low["recall"] == pytest.approx([max(0.0, 2 * lo - 1), lo], abs=1e-7)
    assert b.high["recall"] == pytest.approx([hi, 1.0], abs=1e-7)


def test_column_generation_agrees_with_the_full_lp():
    from scipy import optimize

    N, n = 600, 25
    g = np.random.default_rng(0)
    r = sample_ranks(sample_beta_ranks(0.5, N, 3000, rng=g), N, n, rng=g)
    cuts = cut_points(N, n, [10])
    A = np.cumsum(cached_kernel(N, n, True), axis=1)[:, cuts - 1]
    lo, hi = clopper_pearson([(r <= c).sum() for c in cuts], r.size, 1 - 0.05 / cuts.size)
    for metric, k in (("ndcg", 10), ("recall", 50), ("ap", 5)):
        F = metric_function(metric, k, N)(np.arange(1, N + 1))
        full = [s * optimize.linprog(s * F, A_ub=np.vstack([A.T, -A.T]), b_ub=np.concatenate([hi, -lo]),
                                     A_eq=np.ones((1, N)), b_eq=[1.0], bounds=(0, None), method="highs").fun
                for s in (1.0, -1.0)]
        assert lp_bounds(F, A, lo, hi) == pytest.approx(full, abs=1e-8)


def test_cut_points():
    # dyadic ranks below n, and where the kernel's mean maps K = 10: 1 + 9 * 49 / 249 = 2.77 -> 2 and 3
    assert list(cut_points(250, 50, [10])) == [1, 2, 3, 4, 8, 16, 32]
    assert list(cut_points(250, 50, [None])) == [1, 2, 4, 8, 16, 32]


def _beta_truth(a, N, metric, k):
    P = np.diff(np.concatenate([[0.0], beta_rank_cdf(np.arange(1, N + 1), N, a)]))
    return float(P @ metric_function(metric, k, N)(np.arange(1, N + 1)))


def test_bounds_contain_truth_and_shrink():
    N, n, a = 200, 20, 0.5
    widths = []
    for M in (2000, 50000):
        g = np.random.default_rng(M)
        r = sample_ranks(sample_beta_ranks(a, N, M, rng=g), N, n, rng=g)
        b = identification_bounds(r, N, n, ["recall", "ndcg"], [5, 50], ci=0.95)
        for m in ("recall", "ndcg"):
            for j, k in enumerate((5, 50)):
                assert b.low[m][j] <= _beta_truth(a, N, m, k) <= b.high[m][j]
        widths.append(b.high["recall"] - b.low["recall"])
    # more users: narrower bounds at every cut-off (at K = 50, five kernel widths, by more than a quarter); they do
    # not shrink to a point: the kernel's spread around K leaves the mass free to move across it
    assert np.all(widths[1] < widths[0]) and widths[1][1] < 0.75 * widths[0][1]
    # below the resolution the range stays wide however many users: P(R) is not identified there
    assert widths[1][0] > 0.1


def test_bounds_refuse_bad_input():
    r = np.array([1, 2, 3])
    with pytest.raises(ValueError, match="n_items"):
        identification_bounds(r, [100, 90], 10, "recall", 5)
    with pytest.raises(ValueError, match="replacement"):
        identification_bounds(r, [100, 90, 80], 10, "recall", 5, replacement=False)
    with pytest.raises(ValueError, match="sample_size.*user 0 ranks first"):
        identification_bounds(r, 100, [10, 10, 20], "recall", 5, sizes_design="adaptive")
    with pytest.raises(ValueError, match="grid"):
        identification_bounds(r, 100, 10, "recall", 5, grid="yes")
    with pytest.raises(ValueError, match="ci"):
        identification_bounds(r, 100, 10, "recall", 5, ci=1.5)
    with pytest.raises(ValueError, match="cuts"):
        identification_bounds(r, 100, 10, "recall", 5, cuts=[0, 3])
    with pytest.raises(ValueError, match="interval"):
        estimate_metric(r, 100, 10, "recall", 5, "auto", ci=0.9, interval="wide")
    with pytest.raises(ValueError, match="repeats"):
        coverage_study(repeats=0)


def test_auto_kept_interval_kinds_and_determinism():
    N, n, M = 400, 40, 1500
    g = np.random.default_rng(3)
    r = sample_ranks(sample_beta_ranks(0.4, N, M, rng=g), N, n, rng=g)
    # K = 10 is below RESOLVED kernel widths (2 x 400/39 = 20.5), K = 40 above
    assert {k: v[0] for k, v in interval_plan(N, n, [10, 40]).items()} == {10: "bounds", 40: "bootstrap+margin"}
    kw = dict(ci=0.9, n_boot=20, n_sim=3)
    e = estimate_metric(r, N, n, "ndcg", [10, 40], "auto", rng=2, **kw)
    assert list(e.interval) == ["bounds", "bootstrap+margin"]
    b = identification_bounds(r, N, n, "ndcg", [10], ci=0.9)
    assert (e.low[0], e.high[0], e.margin[0]) == pytest.approx((b.low["ndcg"][0], b.high["ndcg"][0], 0.0))
    # above the resolution: the bootstrap widened by the chosen estimator's margin, as interval="bootstrap", widen
    w = estimate_metric(r, N, n, "ndcg", [10, 40], "auto", rng=2, interval="bootstrap", widen=True, **kw)
    assert e.margin[1] == pytest.approx(e.selection.margin("ndcg", 40)) and e.margin[1] > 0
    assert (e.low[1], e.high[1]) == pytest.approx((w.low[1], w.high[1]))
    assert e.width == pytest.approx(e.high - e.low)
    rec = e.selection.to_dict()["choices"]["ndcg@10"]["interval"]
    assert rec["kind"] == "bounds" and rec["width"] == pytest.approx(e.width[0]) and "identification" in rec["why"]
    # the same bounds for the test users' own metric; deterministic given rng
    t = estimate_metric(r, N, n, "ndcg", [10, 40], "auto", rng=2, target="test-users", **kw)
    assert (t.low[0], t.high[0]) == (e.low[0], e.high[0])
    again = estimate_metric(r, N, n, "ndcg", [10, 40], "auto", rng=2, **kw)
    assert np.array_equal(again.low, e.low) and np.array_equal(again.high, e.high)
    # per-user catalogue sizes and sample sizes take the bounds too (estimators.bounds)
    assert interval_plan(N, n, [10], pools=np.full(M, N))[10][0] == "bounds"
    assert interval_plan(N, np.array([40, 80]), [10])[10][0] == "bounds"
    assert RESOLVED == 2.0


def test_coverage_small_grid():
    # the bounds cells of the validation grid at N/(n-1) = 5 and 50 (K = 10), both targets, two rank models:
    # no row's coverage at nominal 0.95 is below 0.90 by the exact binomial test (Holm), and for each target and
    # metric, pooled over the cells (independent data sets), the exact 95 % lower bound on the coverage is above 0.90
    kw = dict(models=("0.3", "step"), items=(250, 2450), users=(500,), ks=(10,), today=False, truth_users=200_000)
    rows = coverage_study(repeats=25, seed=1, **kw)
    assert len(rows) == 2 * 2 * 2 * 2 and all(row["kind"] == "bounds" for row in rows)
    assert not holm([row["p_below"] for row in rows]).any()
    for target in ("population", "test-users"):
        for metric in ("recall", "ndcg"):
            mine = [row for row in rows if row["target"] == target and row["metric"] == metric]
            hits, total = sum(row["hits"] for row in mine), sum(row["repeats"] for row in mine)
            assert total == 100 and stats.beta.ppf(0.05, hits, total - hits + 1) > 0.90
    for row in rows:
        assert row["se"] == pytest.approx(np.sqrt(row["coverage"] * (1 - row["coverage"]) / 25))
        assert row["p_below"] == pytest.approx(stats.binom.cdf(row["hits"], 25, 0.90))
        assert row["lower"] == pytest.approx(stats.beta.ppf(0.05, row["hits"], 26 - row["hits"]) if row["hits"] else 0)
    # deterministic given the seed (each data set from its own seed: the first repeats agree with a shorter run)
    short = coverage_study(repeats=25, seed=1, **{**kw, "items": (250,), "models": ("0.3",)})
    assert short == [row for row in rows if row["model"] == "0.3" and row["N"] == 250]


def _poisson_binomial_pmf(p):
    pmf = np.array([1.0])
    for q in p:
        pmf = np.convolve(pmf, [1.0 - q, q])
    return pmf


def test_clopper_pearson_covers_a_poisson_binomial_mean():
    # the test-users target (bounds module docstring, Hoeffding 1956): given the users' global ranks the count of
    # sampled ranks <= r_j is Poisson-binomial; the exact probability that the Clopper-Pearson interval covers its
    # mean p-bar is at least the level (less (1 - level)^2 / 4 at the edges), for very unequal p_u too
    M, level = 120, 0.9
    lo, hi = clopper_pearson(np.arange(M + 1), M, level)
    g = np.random.default_rng(0)
    cases = [g.beta(0.3, 0.3, M), g.beta(2.0, 5.0, M), np.r_[np.zeros(M // 2), np.ones(M // 2) * 0.9],
             np.r_[np.full(M - 3, 1e-4), [0.3, 0.2, 0.1]], np.full(M, 0.004)]
    for p in cases:
        pmf, pbar = _poisson_binomial_pmf(p), p.mean()
        cover = pmf[(lo <= pbar) & (pbar <= hi)].sum()
        assert cover >= level - (1 - level) ** 2 / 4, (pbar, cover)
