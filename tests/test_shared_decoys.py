"""Tests of itemsampling.ranking.shared_decoy_ranks: one uniform decoy list per test row scored by
every model. A hand-computed case (the joint law of two models' ranks on shared decoys), each
model's margin against the kernel P(r | R) with the user's pool (the law of sample_ranks /
experiments.sample_pool_ranks), agreement with global_ranks, reproducibility and bad input."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from scipy import stats

from itemsampling import models as M
from itemsampling.experiments import sample_pool_ranks
from itemsampling.kernel import kernel_row
from itemsampling.ranking import global_ranks, pool_sizes, shared_decoy_ranks
from test_ranking import Fixed, _df  # the brute-force scorer and frame helper of the ranking tests


# one user, 6 items; item 0 is a training item, the target is item 1 (score 5 for both models).
# pool: items 1..5 (N_u = 5); candidate decoys: items 2, 3, 4, 5.
#   model A scores items 2..5 as 6, 7, 1, 2: items 2 and 3 are above the target, R_A = 3;
#   model B scores them 8, 1, 2, 3: only item 2 is above, R_B = 2.
S_A = [[9.0, 5.0, 6.0, 7.0, 1.0, 2.0]]
S_B = [[9.0, 5.0, 8.0, 1.0, 2.0, 3.0]]
ABOVE_A, ABOVE_B, DECOYS = {2, 3}, {2}, [2, 3, 4, 5]


def _hand_case():
    train = _df([(0, 0)])
    test = _df([(0, 1)])
    mods = {"A": Fixed(S_A).fit(train, n_items=6, n_users=1), "B": Fixed(S_B).fit(train, n_items=6, n_users=1)}
    return mods, train, test


def test_hand_computed_whole_pool_gives_the_global_ranks():
    """n = N_u without replacement: the decoys are the whole pool, so r = R for every model."""
    mods, train, test = _hand_case()
    s, g, p = shared_decoy_ranks(mods, train, test, 5, rng=0, replacement=False, return_global=True)
    assert s["A"].tolist() == [3] and s["B"].tolist() == [2]
    assert g["A"].tolist() == [3] and g["B"].tolist() == [2] and p.tolist() == [5]


@pytest.mark.parametrize("replacement", [True, False])
def test_hand_computed_joint_law_of_shared_decoys(replacement):
    """n = 3: the joint law of (r_A, r_B) enumerated by hand over the decoy lists (ordered pairs of
    the 4 candidates with replacement, 2-subsets without); it is not the product of the margins."""
    lists = ([(x, y) for x in DECOYS for y in DECOYS] if replacement else list(combinations(DECOYS, 2)))
    joint = {}
    for d in lists:
        key = (1 + sum(x in ABOVE_A for x in d), 1 + sum(x in ABOVE_B for x in d))
        joint[key] = joint.get(key, 0) + 1 / len(lists)
    if not replacement:  # by hand: {2,3}: (3,2); {2,4},{2,5}: (2,2); {3,4},{3,5}: (2,1); {4,5}: (1,1)
        assert joint == pytest.approx({(3, 2): 1 / 6, (2, 2): 2 / 6, (2, 1): 2 / 6, (1, 1): 1 / 6})
    mods, train, test = _hand_case()
    reps = 6000
    s = shared_decoy_ranks(mods, train, test, 3, rng=1, replacement=replacement, repeats=reps)
    assert s["A"].shape == s["B"].shape == (reps, 1)
    obs = {}
    for a, b in zip(s["A"][:, 0], s["B"][:, 0]):
        obs[(int(a), int(b))] = obs.get((int(a), int(b)), 0) + 1
    assert set(obs) <= set(joint)  # no impossible pair ever drawn
    keys = sorted(joint)
    assert stats.chisquare([obs.get(k, 0) for k in keys], [joint[k] * reps for k in keys]).pvalue > 1e-4
    # the product of the margins (independent decoys) is rejected
    ma = {a: sum(v for (x, _), v in joint.items() if x == a) for a in (1, 2, 3)}
    mb = {b: sum(v for (_, y), v in joint.items() if y == b) for b in (1, 2, 3)}
    prod = [ma[a] * mb[b] * reps for a in (1, 2, 3) for b in (1, 2, 3) if ma[a] * mb[b] > 0]
    got = [obs.get((a, b), 0) for a in (1, 2, 3) for b in (1, 2, 3) if ma[a] * mb[b] > 0]
    assert stats.chisquare(got, prod).pvalue < 1e-10


def _small_simulation():
    from itemsampling.data import SimulationConfig, leave_last_out, simulate

    sim = simulate(SimulationConfig(n_users=120, n_items=90, n_features=6, beta=0.05, zipf=0.5,
                                    true_profile_mean=40.0, profile_median=12.0, min_profile=5, seed=3))
    train, test = leave_last_out(sim.observed, rng=0)
    mods = {"ease": M.EASE(lam=50.0).fit(train), "popular": M.Popular().fit(train)}
    return mods, train, test


@pytest.mark.parametrize("replacement", [True, False])
def test_margins_are_the_pool_kernel(replacement):
    """Each model's sampled ranks, given the global ranks it returns (the same tie-break), follow
    P(r | R_u) with the user's pool N_u as catalogue: the histogram over users and repeats matches
    sum_u kernel_row(R_u, N_u, n) (chi-square), every user's mean matches (n-1)(R_u-1)/(N_u-1)
    (the binomial and hypergeometric mean), and the histogram agrees with sample_pool_ranks draws.
    Popular has many ties, EASE none."""
    mods, train, test = _small_simulation()
    n, reps = 8, 400
    s, g, pools = shared_decoy_ranks(mods, train, test, n, rng=5, replacement=replacement, repeats=reps,
                                     return_global=True, batch_size=37)
    assert np.array_equal(pools, pool_sizes(train, test, 90))
    for name in mods:
        R = g[name]
        assert np.all((1 <= R) & (R <= pools))
        expect = sum(kernel_row(int(r), int(p), n, replacement) for r, p in zip(R, pools)) * reps
        obs = np.bincount(s[name].ravel() - 1, minlength=n)
        assert stats.chisquare(obs, expect).pvalue > 1e-4, name
        mean = (n - 1) * (R - 1) / (pools - 1)
        var = np.array([kernel_row(int(r), int(p), n, replacement) @ np.arange(n) ** 2
                        for r, p in zip(R, pools)]) - mean ** 2
        z = (s[name].mean(axis=0) - 1 - mean) / np.sqrt(np.maximum(var, 1e-12) / reps)
        assert np.all(np.abs(z[var > 0]) < 5), name
        assert np.array_equal(s[name][:, var == 0].min(axis=0), mean[var == 0] + 1)  # R = 1 or R = N_u
        ind = np.stack([sample_pool_ranks(R, pools, n, rng=np.random.default_rng([9, i]), replacement=replacement)
                        for i in range(reps)])
        table = np.stack([obs, np.bincount(ind.ravel() - 1, minlength=n)])
        table = table[:, table.sum(axis=0) > 0]
        assert stats.chi2_contingency(table)[1] > 1e-4, name
    # EASE has continuous scores: its global ranks are those of global_ranks, whatever the tie seed
    assert np.array_equal(g["ease"], global_ranks(mods["ease"], train, test, rng=123))


def test_shared_decoys_correlate_the_models():
    """Two models on the same decoys: a model compared with itself has identical sampled ranks on
    shared decoys; two calls (independent decoys) do not."""
    mods, train, test = _small_simulation()
    twin = {"a": mods["ease"], "b": mods["ease"]}
    s = shared_decoy_ranks(twin, train, test, 10, rng=0)
    assert np.array_equal(s["a"], s["b"])
    s1 = shared_decoy_ranks({"a": mods["ease"]}, train, test, 10, rng=1)["a"]
    s2 = shared_decoy_ranks({"b": mods["ease"]}, train, test, 10, rng=2)["b"]
    assert not np.array_equal(s1, s2)


def test_reproducible_from_rng():
    mods, train, test = _small_simulation()
    a = shared_decoy_ranks(mods, train, test, 10, rng=7)
    b = shared_decoy_ranks(mods, train, test, 10, rng=np.random.default_rng(7))
    c = shared_decoy_ranks(mods, train, test, 10, rng=8)
    for name in mods:
        assert a[name].dtype == np.int64 and a[name].shape == (len(test),)
        assert np.array_equal(a[name], b[name])
        assert np.all((1 <= a[name]) & (a[name] <= 10))
    assert any(not np.array_equal(a[k], c[k]) for k in mods)
    one = shared_decoy_ranks(mods, train, test, 10, rng=7, repeats=1)
    assert all(np.array_equal(one[k][0], a[k]) for k in mods)


def test_bad_input_is_named():
    mods, train, test = _small_simulation()
    with pytest.raises(ValueError, match="models must be a non-empty mapping"):
        shared_decoy_ranks({}, train, test, 10)
    with pytest.raises(ValueError, match="models must be a non-empty mapping"):
        shared_decoy_ranks([mods["ease"]], train, test, 10)
    with pytest.raises(ValueError, match="not fitted"):
        shared_decoy_ranks({"x": M.Popular()}, train, test, 10)
    with pytest.raises(ValueError, match="sample_size"):
        shared_decoy_ranks(mods, train, test, 1)
    with pytest.raises(ValueError, match="sample_size must be <= every row's pool"):
        shared_decoy_ranks(mods, train, test, int(pool_sizes(train, test, 90).min()) + 1)
    with pytest.raises(ValueError, match="repeats"):
        shared_decoy_ranks(mods, train, test, 10, repeats=0)
    with pytest.raises(ValueError, match="replacement"):
        shared_decoy_ranks(mods, train, test, 10, replacement="no")
    with pytest.raises(ValueError, match="batch_size"):
        shared_decoy_ranks(mods, train, test, 10, batch_size=0)
    other = M.Popular().fit(train, n_items=95)
    with pytest.raises(ValueError, match="share one catalogue"):
        shared_decoy_ranks({"ease": mods["ease"], "other": other}, train, test, 10)
