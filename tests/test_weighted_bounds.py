"""Identification bounds for popularity-weighted decoys (``weighted_bounds``, the default interval of
``estimate_metric_weighted`` and ``estimate --weighted`` below the resolution rule): the mass curve read
off the draws against the known profile, the bounds against a brute-force linear program over every
set of items above the target on a tiny catalogue, their coverage on a small grid by an exact binomial
test, the default below and above the rule, and the refusals."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import optimize, stats

from itemsampling.candidates import draw_weighted_decoys
from itemsampling.estimators import estimate_metric_weighted
from itemsampling.estimators.bootstrap import MetricEstimate
from itemsampling.estimators.weighted import top_mass_curve, weighted_bounds
from itemsampling.metrics import metric_function

P6 = np.array([0.31, 0.05, 0.22, 0.02, 0.28, 0.12])   # six non-target items, sums to 1


def _model(M, N, noise, seed, zipf=1.0):
    """Users of a popularity-leaning model over one catalogue: (above, excluded, popularity, true ranks)."""
    g = np.random.default_rng(seed)
    w = 1.0 / np.arange(1, N + 1) ** zipf
    scores = np.log(w)[None, :] + noise * g.standard_normal((M, N))
    t = g.integers(0, N, M)
    rows = np.arange(M)
    excluded = np.zeros((M, N), bool)
    excluded[rows, t] = True
    above = (scores > scores[rows, t][:, None]) & ~excluded
    return above, excluded, w, 1 + above.sum(axis=1)


def test_mass_curve_lies_below_the_profile_and_close_to_it():
    N = 2000
    above, excluded, w, _ = _model(3000, N, 1.0, 0)
    p, _ = draw_weighted_decoys(above, excluded, w, 99, rng=1)
    mass, items = top_mass_curve(p)
    assert mass[0] == 0 and items[0] == 0 and np.all(np.diff(mass) >= 0) and np.all(np.diff(items) >= 0)
    # the exact curve of the catalogue less one target: S_m, the mass of the m most popular items
    for m in (1, 5, 10, 50, 200):
        # each user's pool lacks its target: the pooled profile lies between the catalogue's and the
        # catalogue less its most popular item; the curve must not exceed the fewest items that carry S_m
        S_m = np.sort(w)[::-1][:m].sum() / (w.sum() - w.min())
        est = float(np.interp(S_m, mass, items))
        assert est <= m + 1e-9
        assert est >= 0.8 * m - 1
    # without replacement (successive sampling): the inclusion probabilities bound the count of draws, on a
    # flatter catalogue (at Zipf 1 the 98 most popular of 2,000 items hold 63 % of the mass, and the bounds
    # on the inclusion, safe, are loose)
    above6, excluded6, w6, _ = _model(3000, N, 1.0, 0, zipf=0.6)
    ps, _ = draw_weighted_decoys(above6, excluded6, w6, 99, replacement=False, rng=2)
    ms, its = top_mass_curve(ps, design="successive")
    for m in (1, 5, 10, 50, 200):
        S_m = np.sort(w6)[::-1][:m].sum() / (w6.sum() - w6.min())
        est = float(np.interp(S_m, ms, its))
        assert 0.6 * m - 1 <= est <= m + 1e-9
    # the margin: none lowers the curve less
    m0, i0 = top_mass_curve(p, margin=0.0)
    assert np.all(np.interp(mass, m0, i0) >= items - 1e-9)
    with pytest.raises(ValueError, match="margin"):
        top_mass_curve(p, margin=-1)


def _successive_cdf(p, A, d, cuts):
    """Pr(count above <= c - 1) for each cut c, by enumerating every ordered draw of d distinct items with
    successive sampling (each draw in proportion to p among the items not drawn yet)."""
    out = np.zeros(len(cuts))
    for perm in itertools.permutations(range(p.size), d):
        prob, left = 1.0, 1.0
        for i in perm:
            prob *= p[i] / left
            left -= p[i]
        c = sum(i in A for i in perm)
        out += prob * (c <= np.asarray(cuts) - 1)
    return out


def _brute_force(p, d, cuts, lo, hi, metric, k, design="with_replacement"):
    """max / min of the metric over distributions on the 2^6 sets above the target whose law of counts is
    within the band: the sharp bounds with the catalogue's probabilities known."""
    sets = [s for r in range(p.size + 1) for s in itertools.combinations(range(p.size), r)]
    pi = np.array([p[list(s)].sum() for s in sets])
    size = np.array([len(s) for s in sets])
    if design == "with_replacement":
        A = stats.binom.cdf(np.asarray(cuts)[None, :] - 1, d, pi[:, None])
    else:
        A = np.array([_successive_cdf(p, set(s), d, cuts) for s in sets])
    F = metric_function(metric, k, p.size + 1)(1 + size)
    out = []
    for sign in (1.0, -1.0):
        res = optimize.linprog(sign * F, A_ub=np.vstack([A.T, -A.T]), b_ub=np.concatenate([hi, -lo]),
                               A_eq=np.ones((1, len(sets))), b_eq=[1.0], bounds=(0, None), method="highs")
        assert res.status == 0
        out.append(sign * res.fun)
    return out[0], out[1]


@pytest.mark.parametrize("design", ["with_replacement", "successive"])
@pytest.mark.parametrize("metric,k", [("recall", 1), ("recall", 2), ("ndcg", 3), ("hr", 4)])
def test_against_brute_force_lp_on_a_tiny_catalogue(metric, k, design):
    N, d, M = 7, 3, 600
    g = np.random.default_rng(5)
    order = np.argsort(-P6)
    # each user: the top-j items of the catalogue (a popularity model) or a random set, j at random
    prob, abv = np.empty((M, d)), np.empty((M, d), bool)
    for u in range(M):
        j = g.integers(0, 7)
        A = set(order[:j]) if g.random() < 0.6 else set(g.choice(6, j, replace=False))
        draws = g.choice(6, d, p=P6, replace=design == "with_replacement")
        prob[u], abv[u] = P6[draws], [x in A for x in draws]
        if design == "successive":  # the single-draw probabilities, as the file holds them
            prob[u] = P6[draws]
    exact = (np.concatenate([[0.0], np.cumsum(np.sort(P6)[::-1])]), np.arange(7.0))
    b = weighted_bounds(prob, abv, N, metric, k, ci=0.9, curve=exact, design=design)
    low, high = _brute_force(P6, d, b.cuts, b.band_low, b.band_high, metric, k, design)
    # outer bounds: never inside the sharp ones; with replacement the upper one close to it (cells of pi,
    # best ranks); without, the draw-by-draw sandwich of the kernel loosens it
    assert b.high[metric] >= high - 1e-7
    assert b.low[metric] <= low + 1e-7
    if design == "with_replacement":
        assert b.high[metric] <= high + 0.08
    # with the curve read off the draws instead, the bounds still contain the sharp range
    b2 = weighted_bounds(prob, abv, N, metric, k, ci=0.9, design=design)
    assert b2.high[metric] >= high - 1e-7 and b2.low[metric] <= low + 1e-7


@pytest.mark.parametrize("noise,replacement,zipf", [(0.0, True, 1.0), (0.7, True, 1.0), (0.0, False, 0.5)])
def test_coverage_on_a_small_grid(noise, replacement, zipf):
    # 60 data sets of 400 users, 19 decoys, a model that ranks by popularity alone (noise 0: the items above
    # the target are the most popular ones, so the best rank of every mass is the true rank and only the band
    # separates the upper bound from the truth) or leans on it: every metric@K at once (the band is
    # simultaneous) must cover the population value in at least 95 % of them, tested exactly
    N, M, d, reps = 300, 400, 19, 60
    above, excluded, w, R = _model(4000, N, noise, 11, zipf=zipf)
    truth = {(m, k): float(np.mean(metric_function(m, k, N)(R))) for m in ("recall", "ndcg") for k in (5, 10, 20)}
    misses = 0
    for rep in range(reps):
        g = np.random.default_rng([11, rep])
        idx = g.integers(0, R.size, M)
        p, a = draw_weighted_decoys(above[idx], excluded[idx], w, d, replacement=replacement, rng=g)
        b = weighted_bounds(p, a, N, ["recall", "ndcg"], [5, 10, 20], ci=0.95,
                            design="with_replacement" if replacement else "successive")
        ok = all(b.low[m][j] - 1e-9 <= truth[m, k] <= b.high[m][j] + 1e-9
                 for m in ("recall", "ndcg") for j, k in enumerate((5, 10, 20)))
        misses += not ok
    # P(misses >= observed) under a miss rate of 5 %: a test that could come out the other way
    assert stats.binom.sf(misses - 1, reps, 0.05) > 0.01, misses


def test_the_default_interval_below_and_above_the_rule():
    N = 400
    above, excluded, w, _ = _model(1500, N, 1.0, 3)
    p, a = draw_weighted_decoys(above, excluded, w, 49, rng=4)
    # rule K >= 2 N / (n - 1) = 16.3: K = 10 below, K = 20 above
    e = estimate_metric_weighted(p, a, N, "ndcg", [10, 20], ci=0.9, n_boot=30, rng=0)
    assert isinstance(e, MetricEstimate)
    assert list(e.identified) == [False, True] and list(e.interval) == ["bounds", "bootstrap"]
    b = weighted_bounds(p, a, N, "ndcg", [10], ci=0.9)
    assert (e.low[0], e.high[0]) == (b.low["ndcg"][0], b.high["ndcg"][0])
    boot = estimate_metric_weighted(p, a, N, "ndcg", [10, 20], ci=0.9, n_boot=30, rng=0, interval="bootstrap")
    assert (e.low[1], e.high[1]) == (boot.low[1], boot.high[1])
    assert list(boot.interval) == ["bootstrap", "bootstrap"] and list(boot.identified) == [False, True]
    assert e.estimate == pytest.approx(boot.estimate)
    one = estimate_metric_weighted(p, a, N, "recall", 10, ci=0.9, n_boot=30, rng=0)
    assert one.interval == "bounds" and one.identified is False and one.low == 0.0
    assert "not identified" in repr(one)
    # the sampled metric is what the counts identify: always its bootstrap
    s = estimate_metric_weighted(p, a, N, "recall", 10, method="sampled", ci=0.9, n_boot=30, rng=0)
    assert s.interval == "bootstrap" and s.identified is True
    # without replacement: the bounds of that design
    p2, a2 = draw_weighted_decoys(above, excluded, w, 49, replacement=False, rng=4)
    sw = estimate_metric_weighted(p2, a2, N, "recall", 10, ci=0.9, n_boot=30, rng=0, design="successive")
    bs = weighted_bounds(p2, a2, N, "recall", 10, ci=0.9, design="successive")
    assert sw.interval == "bounds" and sw.identified is False and (sw.low, sw.high) == (bs.low["recall"],
                                                                                       bs.high["recall"])
    assert bs.high["recall"] >= weighted_bounds(p2, a2, N, "recall", 10, ci=0.9).high["recall"]


def test_refusals():
    p, a = np.full((5, 3), 0.2), np.zeros((5, 3), bool)
    with pytest.raises(ValueError, match="ci must be"):
        weighted_bounds(p, a, 50, "recall", 10, ci=1.0)
    with pytest.raises(ValueError, match="k must not be an empty"):
        weighted_bounds(p, a, 50, "recall", [])
    with pytest.raises(ValueError, match="curve must be"):
        weighted_bounds(p, a, 50, "recall", 10, curve=([0.5, 1.0], [0.0, 1.0]))
    with pytest.raises(ValueError, match="k"):
        weighted_bounds(p, a, 50, "recall", 51)  # k above N
    with pytest.raises(ValueError, match="interval must be one of"):
        estimate_metric_weighted(p, a, 50, "recall", 10, ci=0.9, interval="bounds")


def test_mass_curve_refusals():
    with pytest.raises(ValueError, match="decoy_probs must be an"):
        top_mass_curve(np.full(5, 0.2))
    with pytest.raises(ValueError, match="design"):
        top_mass_curve(np.full((5, 3), 0.2), design="poisson")
    with pytest.raises(ValueError, match="design"):
        weighted_bounds(np.full((5, 3), 0.2), np.zeros((5, 3), bool), 50, "recall", 10, design="poisson")
