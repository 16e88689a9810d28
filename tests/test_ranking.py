"""Tests of itemsampling.ranking: global ranks against brute force (ties included), pools, and
explicit decoy sampling against the kernel."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from itemsampling import models as M
from itemsampling.kernel import kernel_row
from itemsampling.ranking import global_ranks, pool_sizes, sampled_ranks_explicit


class Fixed(M.Recommender):
    """Scores from a given matrix (for brute-force checks)."""

    def __init__(self, S):
        self.S = np.asarray(S, dtype=float)

    def _fit(self, X):
        pass

    def _score(self, users):
        return self.S[users]


def _df(pairs):
    return pd.DataFrame(pairs, columns=["user", "item"]).astype("int64")


def _random_case(seed, n_users=25, n_items=12, levels=4):
    g = np.random.default_rng(seed)
    S = g.integers(0, levels, size=(n_users, n_items)).astype(float)  # many ties
    X = g.random((n_users, n_items)) < 0.3
    targets = g.integers(0, n_items, size=n_users)
    X[np.arange(n_users), targets] = False
    X[np.arange(n_users), (targets + 1) % n_items] = True  # at least one training item
    u, i = np.nonzero(X)
    train = _df(list(zip(u, i)))
    train.attrs.update(n_users=n_users, n_items=n_items)
    test = _df(list(zip(np.arange(n_users), targets)))
    return S, X, train, test


def test_global_ranks_brute_force_without_ties():
    g = np.random.default_rng(0)
    S = g.random((10, 9))
    _, X, train, test = _random_case(1, 10, 9)
    model = Fixed(S).fit(train)
    for exclude in (True, False):
        R = global_ranks(model, train, test, exclude_train=exclude, rng=0, batch_size=3)
        for u, t in zip(test.user, test.item):
            pool = [j for j in range(9) if not (exclude and X[u, j] and j != t)]
            order = sorted(pool, key=lambda j: -S[u, j])
            assert R[u] == order.index(t) + 1


def test_global_ranks_ties_are_uniform():
    """With ties, R = 1 + (#greater) + Uniform{0..#tied others}: check the range on every row and
    the distribution over seeds with a chi-square test."""
    S, X, train, test = _random_case(2)
    model = Fixed(S).fit(train)
    draws = np.array([global_ranks(model, train, test, rng=s) for s in range(300)])
    counts_ok = 0
    for u, t in zip(test.user, test.item):
        pool = [j for j in range(S.shape[1]) if not (X[u, j] and j != t)]
        gt = sum(S[u, j] > S[u, t] for j in pool)
        eq = sum(S[u, j] == S[u, t] for j in pool if j != t)
        r = draws[:, u]
        assert r.min() >= gt + 1 and r.max() <= gt + 1 + eq
        if eq >= 2:
            obs = np.bincount(r - gt - 1, minlength=eq + 1)
            p = stats.chisquare(obs).pvalue
            counts_ok += p > 1e-3
            assert p > 1e-4
    assert counts_ok > 0


def test_pool_sizes_and_return_pool():
    S, X, train, test = _random_case(3)
    model = Fixed(S).fit(train)
    R, P = global_ranks(model, train, test, rng=0, return_pool=True)
    assert np.array_equal(P, S.shape[1] - X.sum(axis=1))  # the target is never in X here
    assert np.array_equal(P, pool_sizes(train, test, S.shape[1]))
    assert np.all((1 <= R) & (R <= P))
    _, P2 = global_ranks(model, train, test, exclude_train=False, rng=0, return_pool=True)
    assert np.all(P2 == S.shape[1])


def test_target_in_train_stays_in_pool():
    S = np.array([[0.9, 0.5, 0.1, 0.7]])
    train = _df([(0, 0), (0, 2)])
    test = _df([(0, 2)])  # the target also appears in train
    m = Fixed(S).fit(train, n_items=4, n_users=1)
    R, P = global_ranks(m, train, test, return_pool=True)
    # pool: items 1, 2, 3 (item 0 removed); scores 0.5, 0.1, 0.7 -> target ranks 3rd of 3
    assert R.tolist() == [3] and P.tolist() == [3]


def test_multiple_test_rows_per_user_and_alignment():
    S = np.array([[0.1, 0.2, 0.3, 0.4, 0.5]])
    train = _df([(0, 4)])
    test = _df([(0, 0), (0, 3), (0, 1)])
    m = Fixed(S).fit(train, n_items=5, n_users=1)
    assert global_ranks(m, train, test).tolist() == [4, 1, 3]


def test_errors():
    S, X, train, test = _random_case(4)
    with pytest.raises(ValueError, match="not fitted"):
        global_ranks(Fixed(S), train, test)
    m = Fixed(S).fit(train)
    with pytest.raises(ValueError, match="no training interactions"):
        global_ranks(m, train[train.user != 0], test)
    bad = test.copy()
    bad.loc[0, "item"] = 99
    with pytest.raises(ValueError, match="catalog"):
        global_ranks(m, train, bad)
    with pytest.raises(ValueError, match="test must not be empty"):
        global_ranks(m, train, test.iloc[:0])
    with pytest.raises(ValueError, match="model must be"):
        global_ranks("popular", train, test)
    S2 = S.copy()
    S2[0, 0] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        global_ranks(Fixed(S2).fit(train), train, test)


def test_real_model_on_small_simulation():
    from itemsampling.data import SimulationConfig, leave_last_out, simulate

    sim = simulate(SimulationConfig(n_users=200, n_items=150, n_features=8, beta=0.05, zipf=0.5,
                                    true_profile_mean=80.0, profile_median=15.0, min_profile=5, seed=7))
    train, test = leave_last_out(sim.observed, rng=0)
    m = M.Popular().fit(train)
    R, P = global_ranks(m, train, test, rng=0, return_pool=True)
    # brute force for popularity scores
    X = M.interaction_matrix(train, 200, 150).toarray() > 0
    pop = X.sum(axis=0)
    for u, t, r in zip(test.user, test.item, R):
        pool = np.flatnonzero(~X[u] | (np.arange(150) == t))
        gt = np.sum(pop[pool] > pop[t])
        eq = np.sum(pop[pool] == pop[t]) - 1
        assert gt + 1 <= r <= gt + 1 + eq


def test_explicit_sampling_matches_kernel():
    """Drawing n-1 decoys from the pool and ranking the target has the distribution
    Binomial(n-1, (R-1)/(N_u-1)) + 1 (with replacement) / the hypergeometric (without)."""
    N = 40
    S = np.tile(np.arange(N, 0, -1, dtype=float), (1, 1))  # item j has rank j+1, no ties
    train = _df([(0, 0), (0, 1)])  # pool: items 2..39 (N_u = 38)
    test = _df([(0, 12)])  # rank among the pool: 11
    m = Fixed(S).fit(train, n_items=N, n_users=1)
    R, P = global_ranks(m, train, test, return_pool=True)
    assert R[0] == 11 and P[0] == 38
    n, reps = 6, 3000
    big_train = pd.concat([train.assign(user=u) for u in range(reps)])
    big_test = pd.concat([test.assign(user=u) for u in range(reps)])
    mm = Fixed(np.tile(S, (reps, 1))).fit(big_train, n_items=N, n_users=reps)
    for replacement in (True, False):
        r = sampled_ranks_explicit(mm, big_train, big_test, n, rng=1, replacement=replacement)
        expect = kernel_row(int(R[0]), int(P[0]), n, replacement)
        obs = np.bincount(r - 1, minlength=n)
        assert stats.chisquare(obs, expect * reps).pvalue > 1e-4
