"""Identification bounds on the inputs readers have: per-user catalogue sizes (pools), per-user sample
sizes (adaptive sampling) and cells of ranks (catalogue scale), each against a brute-force linear program
on tiny cases, the adaptive event probabilities against brute-force enumeration and against the package's
simulator, and the coverage on a small grid by an exact binomial test."""

from __future__ import annotations

import itertools
from math import comb

import numpy as np
import pytest
from scipy import optimize, stats

from itemsampling.estimators.bounds import (
    _stage_probabilities, clopper_pearson, cut_points, identification_bounds,
)
from itemsampling.metrics import metric_function
from itemsampling.sampling import adaptive_sample_ranks, sample_ranks


def _brute_lp(F, A, lo, hi):
    N = F.size
    out = []
    for s in (1.0, -1.0):
        res = optimize.linprog(s * F, A_ub=np.vstack([A.T, -A.T]), b_ub=np.concatenate([hi, -lo]),
                               A_eq=np.ones((1, N)), b_eq=[1.0], bounds=(0, None), method="highs")
        assert res.status == 0
        out.append(s * res.fun)
    return tuple(out)


def _pool_rank(R, N, Nu):
    """The rank in a pool of Nu items of rank R on the largest pool's grid: 1 + round((R-1)(Nu-1)/(N-1)),
    halves up, written out with fractions."""
    from fractions import Fraction
    x = Fraction((R - 1) * (Nu - 1), N - 1)
    return 1 + int(x + Fraction(1, 2)) if x.denominator != 2 else 1 + int(x + Fraction(1, 2))


def test_pools_against_brute_force_lp():
    # N_u in {7, 8, 9}, n = 3, with replacement: the kernel row of R on the 9-item grid is Binomial(2, (R-1)/8)
    N, n = 9, 3
    g = np.random.default_rng(1)
    pools = g.choice([7, 8, 9], size=400)
    R = np.array([g.integers(1, Nu + 1) for Nu in pools])  # rank in the user's own pool
    t = (R - 1) / (pools - 1)
    r = 1 + g.binomial(n - 1, t)
    cuts = [1, 2]
    A = np.array([[sum(comb(n - 1, j) * ((RR - 1) / (N - 1)) ** j * (1 - (RR - 1) / (N - 1)) ** (n - 1 - j)
                       for j in range(c)) for c in cuts] for RR in range(1, N + 1)])
    S = [(r <= c).sum() for c in cuts]
    lo, hi = clopper_pearson(S, r.size, 1 - 0.1 / len(cuts))
    for metric, k in (("recall", 1), ("recall", 3), ("ndcg", 2), ("auc", None)):
        Fbar = np.array([np.mean([metric_function(metric, k, int(Nu))(np.array([_pool_rank(RR, N, int(Nu))]))[0]
                                  for Nu in pools]) for RR in range(1, N + 1)])
        b = identification_bounds(r, pools, n, metric, k, ci=0.9, cuts=cuts)
        assert (b.low[metric], b.high[metric]) == pytest.approx(_brute_lp(Fbar, A, lo, hi), abs=1e-7)
    # equal pools give exactly the one-N bounds
    one = identification_bounds(r, np.full(r.size, N), n, "ndcg", [1, 2], ci=0.9)
    ref = identification_bounds(r, N, n, "ndcg", [1, 2], ci=0.9)
    np.testing.assert_allclose(one.low["ndcg"], ref.low["ndcg"], atol=1e-9)
    np.testing.assert_allclose(one.high["ndcg"], ref.high["ndcg"], atol=1e-9)


def _adaptive_event_brute(R, N, ladder, s, c, replacement):
    """Pr(reach stage s and rank <= c there | R) by enumerating the decoy draws of TORS Algorithm 1 (nested
    sets: stage j holds the first ladder[j] - 1 decoys)."""
    m = ladder[s] - 1
    others = [i for i in range(1, N + 1) if i != R]
    total = 0.0
    if replacement:
        for seq in itertools.product(others, repeat=m):
            above = [x < R for x in seq]
            prev = ladder[s - 1] - 1 if s else 0
            if not any(above[:prev]) and 1 + sum(above) <= c:
                total += (1 / (N - 1)) ** m
    else:
        perms = list(itertools.permutations(others, m))
        for seq in perms:
            above = [x < R for x in seq]
            prev = ladder[s - 1] - 1 if s else 0
            if not any(above[:prev]) and 1 + sum(above) <= c:
                total += 1 / len(perms)
    return total


@pytest.mark.parametrize("replacement", [True, False])
def test_adaptive_event_probabilities_by_enumeration(replacement):
    N, ladder = 7, [2, 4]
    for s, size in enumerate(ladder):
        prev = ladder[s - 1] if s else 1
        for c in range(1, size + 1):
            got = _stage_probabilities(np.arange(1, N + 1), N, prev, size, [c], replacement)[:, 0]
            want = [_adaptive_event_brute(R, N, ladder, s, c, replacement) for R in range(1, N + 1)]
            np.testing.assert_allclose(got, want, atol=1e-12)


def test_adaptive_event_probabilities_against_the_simulator():
    # the package's simulator of Algorithm 1 and the closed form agree on the frequency of each event
    N, n0, nmax, M = 300, 10, 40, 200_000
    g = np.random.default_rng(5)
    R = g.integers(1, 31, size=M)
    r, n = adaptive_sample_ranks(R, N, n0, nmax, rng=g)
    ladder = [10, 20, 40]
    for s, size in enumerate(ladder):
        prev = ladder[s - 1] if s else 1
        for c in (1, 2, 3):
            hit = (n > size) | ((n == size) & (r <= c))
            p = _stage_probabilities(np.arange(1, 31), N, prev, size, [c], True)[:, 0]
            expected = p[R - 1].sum()
            z = (hit.sum() - expected) / np.sqrt(np.sum(p[R - 1] * (1 - p[R - 1])))
            assert abs(z) < 4.0, (size, c, z)


def test_adaptive_against_brute_force_lp_and_refusals():
    N, ladder = 12, [3, 6]
    g = np.random.default_rng(2)
    R = g.integers(1, N + 1, size=3000)
    r, n = adaptive_sample_ranks(R, N, 3, 6, rng=g)
    b = identification_bounds(r, N, n, ["recall", "ndcg"], [1, 4], ci=0.9)
    cuts = [cut_points(N, m, [1, 4]) for m in ladder]
    A = np.hstack([_stage_probabilities(np.arange(1, N + 1), N, p, m, cs, True)
                   for p, m, cs in zip([1, 3], ladder, cuts)])
    S = np.concatenate([[int((n > m).sum() + ((n == m) & (r <= c)).sum()) for c in cs] for m, cs in zip(ladder, cuts)])
    lo, hi = clopper_pearson(S, r.size, 1 - 0.1 / S.size)
    for metric in ("recall", "ndcg"):
        for j, k in enumerate((1, 4)):
            F = metric_function(metric, k, N)(np.arange(1, N + 1))
            assert (b.low[metric][j], b.high[metric][j]) == pytest.approx(_brute_lp(F, A, lo, hi), abs=1e-7)
    # a stage no user stopped at (sizes {3, 12} of the ladder 3, 6, 12): ranks 1 and N only, so every user
    # stops at once (rank 3 of 3) or goes to the end; the bounds hold the truth
    R2 = np.where(g.random(500) < 0.3, 1, N)
    r2, n2 = adaptive_sample_ranks(R2, N, 3, 12, rng=g)
    assert set(np.unique(n2)) == {3, 12}
    b2 = identification_bounds(r2, N, n2, "recall", 1)
    assert b2.low["recall"] <= (R2 == 1).mean() <= b2.high["recall"]
    with pytest.raises(ValueError, match="user 1 ranks first at sample_size 3"):
        identification_bounds(np.array([2, 1, 3]), N, np.array([3, 3, 6]), "recall", 4, sizes_design="adaptive")
    with pytest.raises(ValueError, match="sizes_design"):
        identification_bounds(np.array([2, 1, 3]), N, np.array([3, 3, 6]), "recall", 4, sizes_design="yes")


def test_fixed_per_user_sizes_against_brute_force_lp():
    """Sizes fixed by the design (half the users n = 4, half n = 8, drawn independently of the ranks): one
    exact band per group, one LP; a rank 1 at the smaller size makes the default read them as fixed."""
    N = 10
    g = np.random.default_rng(9)
    R = g.integers(1, N + 1, size=2000)
    nu = np.where(np.arange(R.size) % 2 == 0, 4, 8)
    r = 1 + g.binomial(nu - 1, (R - 1) / (N - 1))
    assert np.any((r == 1) & (nu == 4))
    b = identification_bounds(r, N, nu, "recall", 2, ci=0.9)
    cuts = [cut_points(N, m, [2]) for m in (4, 8)]
    A = np.hstack([_stage_probabilities(np.arange(1, N + 1), N, 1, m, cs, True) for m, cs in zip((4, 8), cuts)])
    los, his = [], []
    for m, cs in zip((4, 8), cuts):
        here = r[nu == m]
        lo, hi = clopper_pearson([(here <= c).sum() for c in cs], here.size, 1 - 0.1 / sum(c.size for c in cuts))
        los.append(lo)
        his.append(hi)
    F = metric_function("recall", 2, N)(np.arange(1, N + 1))
    want = _brute_lp(F, A, np.concatenate(los), np.concatenate(his))
    assert (b.low["recall"], b.high["recall"]) == pytest.approx(want, abs=1e-7)
    assert b.low["recall"] <= (R <= 2).mean() <= b.high["recall"]


def test_cells_are_outer_and_close_to_the_exact_bounds():
    N, n = 20_000, 100
    g = np.random.default_rng(4)
    R = np.minimum(N, 1 + np.floor(N * g.beta(0.4, 1.0, size=5000)).astype(int))
    r = sample_ranks(R, N, n, rng=g)
    ks = [50, 400, 2000]
    exact = identification_bounds(r, N, n, ["recall", "ndcg"], ks, grid=False)
    cells = identification_bounds(r, N, n, ["recall", "ndcg"], ks, grid=True)
    for m in ("recall", "ndcg"):
        assert np.all(cells.low[m] <= exact.low[m] + 1e-6) and np.all(cells.high[m] >= exact.high[m] - 1e-6)  # LP tolerance
        np.testing.assert_allclose(cells.low[m], exact.low[m], atol=0.01)
        np.testing.assert_allclose(cells.high[m], exact.high[m], atol=0.01)


def test_catalogue_scale_bounds_cover_the_truth():
    N, n, M = 10**7, 1000, 20_000
    g = np.random.default_rng(6)
    R = np.minimum(N, 1 + np.floor(N * g.beta(0.3, 1.0, size=M)).astype(np.int64))
    r = sample_ranks(R, N, n, rng=g)
    b = identification_bounds(r, N, n, "recall", [5000, 100_000])
    truth = np.array([(R <= 5000).mean(), (R <= 100_000).mean()])
    assert np.all(b.low["recall"] <= truth) and np.all(truth <= b.high["recall"])
    assert b.high["recall"][1] - b.low["recall"][1] < 0.2  # ten kernel widths: informative


@pytest.mark.parametrize("design", ["pools", "adaptive"])
def test_coverage_on_a_small_grid(design):
    """Both targets' coverage over 150 data sets, with an exact one-sided binomial test of coverage >= 0.95
    (level 0.01): a conservative interval passes; one that missed in more than about 13 % would fail."""
    N, n, M, reps = 150, 15, 400, 150
    g = np.random.default_rng(7 if design == "pools" else 8)
    covered = {"population": 0, "test-users": 0}
    for _ in range(reps):
        a = g.uniform(0.3, 0.8)
        if design == "pools":
            pools = g.integers(120, N + 1, size=M)
            R = np.minimum(pools, 1 + np.floor(pools * g.beta(a, 1.0, size=M)).astype(int))
            r = 1 + g.binomial(n - 1, (R - 1) / (pools - 1))
            b = identification_bounds(r, pools, n, "recall", 5, ci=0.95)
            # the population metric: the law of the rank fraction, each user's own pool
            u = g.beta(a, 1.0, size=400_000)
            pp = g.integers(120, N + 1, size=u.size)
            truth_pop = np.mean(np.minimum(pp, 1 + np.floor(pp * u)) <= 5)
        else:
            R = np.minimum(N, 1 + np.floor(N * g.beta(a, 1.0, size=M)).astype(int))
            r, nn = adaptive_sample_ranks(R, N, n, 4 * n - 4 * n % n, rng=g)
            b = identification_bounds(r, N, nn, "recall", 5, ci=0.95)
            truth_pop = stats.beta.cdf(5 / N, a, 1.0)  # Pr(1 + floor(N U) <= 5) = Pr(U < 5/N)
        covered["test-users"] += b.low["recall"] <= (R <= 5).mean() <= b.high["recall"]
        covered["population"] += b.low["recall"] <= truth_pop <= b.high["recall"]
    for target, c in covered.items():
        p = stats.binomtest(c, reps, 0.95, alternative="less").pvalue
        assert p > 0.01, (target, c)


def test_the_default_interval_below_and_above_the_rule():
    """estimate_metric(s) with ci: below the rule (K < 2 N/(n-1)) every method's interval is exactly the
    identification bounds and the row is not identified; above it, exactly the bootstrap's interval
    widened at both ends by the method's bias margin; interval="bootstrap" keeps the bootstrap below the
    rule too, still marked not identified."""
    import warnings

    from itemsampling.estimators import estimate_metric, estimate_metrics
    from itemsampling.estimators.auto import bias_margins
    from itemsampling.estimators.bootstrap import bootstrap_metric

    N, n, M = 400, 40, 800  # the rule: K >= 2 x 400/39 = 20.5
    g = np.random.default_rng(11)
    R = np.minimum(N, 1 + np.floor(N * g.beta(0.4, 1.0, size=M)).astype(int))
    r = sample_ranks(R, N, n, rng=g)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e = estimate_metric(r, N, n, "ndcg", [10, 30], "mle", ci=0.9, n_boot=30, rng=1)
        b = identification_bounds(r, N, n, ["ndcg"], 10, ci=0.9)
        boot = bootstrap_metric(r, N, n, "ndcg", [30], "mle", ci=0.9, n_boot=30, rng=1)
        margin = bias_margins(r, N, n, ["ndcg"], [30], "mle", {}, rng=np.random.default_rng(1))[("ndcg", 30)]
        assert list(e.identified) == [False, True] and list(e.interval) == ["bounds", "bootstrap+margin"]
        assert (e.low[0], e.high[0]) == pytest.approx((b.low["ndcg"], b.high["ndcg"]), abs=1e-12)
        assert margin > 0
        assert (e.low[1], e.high[1]) == pytest.approx((boot.low[0] - margin, boot.high[0] + margin), abs=1e-12)
        # a method with options of its own: its margin simulated under the data's MLE fit (estimators.policy)
        w = estimate_metric(r, N, n, "ndcg", 30, "mes", ci=0.9, n_boot=30, rng=1, eta=0.5)
        assert w.interval == "bootstrap+margin" and w.identified is True and w.margin > 0
        assert e.estimate[0] == pytest.approx(estimate_metric(r, N, n, "ndcg", 10, "mle"))
        # every method shares the one set of bounds below the rule
        both = estimate_metrics(r, N, n, ["ndcg"], 10, ["bv", "cls"], ci=0.9, n_boot=30, rng=1, gamma=0.1)
        for meth in ("bv", "cls"):
            assert both[meth]["ndcg"].interval == "bounds" and both[meth]["ndcg"].identified is False
            assert (both[meth]["ndcg"].low, both[meth]["ndcg"].high) == pytest.approx((b.low["ndcg"], b.high["ndcg"]))
        # the estimator's own bootstrap on request, still not identified
        eb = estimate_metric(r, N, n, "ndcg", 10, "mle", ci=0.9, n_boot=30, rng=1, interval="bootstrap")
        ref = bootstrap_metric(r, N, n, "ndcg", 10, "mle", ci=0.9, n_boot=30, rng=1)
        assert eb.interval == "bootstrap" and eb.identified is False and (eb.low, eb.high) == (ref.low, ref.high)
        assert "not identified" in repr(e.__class__(e.estimate[0], e.low[0], e.high[0], 0.9, 30, "mle", False, "bounds"))
        with pytest.raises(ValueError, match="interval"):
            estimate_metric(r, N, n, "ndcg", 10, "mle", ci=0.9, interval="wide")
