"""Metrics with a set of relevant items per user (Krichene & Rendle 2020, Eq. 2-6): hand-computed
lists, agreement with the single-item forms, agreement between the two entry points, bad input."""

import numpy as np
import pytest

from itemsampling.metrics import metric_values, set_metric_values, topk_metric_values


def _brute(R, metric, k, n):
    """Direct transcription of Eq. 2-6 on one user's set of positions R (list length n)."""
    R = set(R)
    K = n if k is None else k
    prec = lambda i: sum(r <= i for r in R) / i  # noqa: E731
    if metric == "recall":
        return sum(r <= K for r in R) / len(R)
    if metric == "precision":
        return sum(r <= K for r in R) / K
    if metric == "ap":
        return sum(prec(i) for i in range(1, K + 1) if i in R) / min(len(R), K)
    if metric == "ndcg":
        return sum(1 / np.log2(i + 1) for i in range(1, K + 1) if i in R) / sum(
            1 / np.log2(i + 1) for i in range(1, min(len(R), K) + 1))
    if metric == "rr":
        return 1 / min(R) if min(R) <= K else 0.0
    if metric == "auc":
        return sum(r < s for r in R for s in set(range(1, n + 1)) - R) / (len(R) * (n - len(R)))
    raise AssertionError(metric)


def test_hand_computed_two_relevant_items():
    # R = {3, 5} in a list of 10
    v = lambda m, k: set_metric_values([5, 3], [0, 0], m, k=k, n_items=10)[0]  # noqa: E731
    assert v("recall", 10) == pytest.approx(1.0)
    assert v("recall", 4) == pytest.approx(0.5)
    assert v("precision", 10) == pytest.approx(0.2)
    assert v("precision", 4) == pytest.approx(0.25)
    assert v("ap", 10) == pytest.approx((1 / 3 + 2 / 5) / 2)
    assert v("ap", 4) == pytest.approx((1 / 3) / 2)
    assert v("ndcg", 10) == pytest.approx((1 / 2 + 1 / np.log2(6)) / (1 + 1 / np.log2(3)))
    assert v("ndcg", 4) == pytest.approx((1 / 2) / (1 + 1 / np.log2(3)))
    assert v("rr", 10) == pytest.approx(1 / 3)
    assert v("rr", 2) == 0.0
    assert v("auc", None) == pytest.approx(11 / 16)  # pairs (3, >3 irrelevant) 6 + (5, >5) 5 over 2 * 8
    # a perfect list: every metric but precision is 1
    for m in ("recall", "ap", "ndcg", "rr"):
        assert set_metric_values([1, 2, 3], [0, 0, 0], m, k=5)[0] == pytest.approx(1.0)


CASES = [(m, k) for m in ("recall", "precision", "ndcg", "ap", "rr") for k in (None, 1, 3, 7)] + [("auc", None)]


@pytest.mark.parametrize("metric, k", CASES)
def test_random_lists_against_brute_force(metric, k):
    g = np.random.default_rng(1)
    n, M = 12, 40
    ranks, users, sets = [], [], []
    for u in range(M):
        R = g.choice(np.arange(1, n + 1), size=g.integers(1, 6), replace=False)
        ranks += list(R)
        users += [u] * R.size
        sets.append(R)
    perm = g.permutation(len(ranks))  # input order must not matter
    got = set_metric_values(np.array(ranks)[perm], np.array(users)[perm], metric, k=k, n_items=n)
    want = [_brute(R, metric, k, n) for R in sets]
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("metric", ["recall", "precision", "ndcg", "ap", "rr"])
@pytest.mark.parametrize("k", [None, 1, 10])
def test_one_relevant_item_reduces_to_single_item_forms(metric, k):
    R = np.random.default_rng(2).integers(1, 200, size=500)
    single = "ap" if metric == "rr" else metric
    want = metric_values(R, single, k, n_items=200)
    got = set_metric_values(R, np.arange(R.size), metric, k=k, n_items=200)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_auc_single_item_reduces_to_eq7():
    R = np.arange(1, 51)
    np.testing.assert_allclose(set_metric_values(R, np.arange(50), "auc", n_items=50), (50 - R) / 49, rtol=1e-12)


@pytest.mark.parametrize("metric", ["recall", "precision", "ndcg", "ap", "rr"])
def test_topk_lists_agree_with_positions(metric):
    g = np.random.default_rng(3)
    M, K, n = 60, 10, 30
    hits = np.zeros((M, K), dtype=bool)
    ranks, users, nrel = [], [], np.zeros(M, dtype=int)
    for u in range(M):
        R = g.choice(np.arange(1, n + 1), size=g.integers(1, 8), replace=False)
        nrel[u] = R.size
        hits[u, R[R <= K] - 1] = True
        ranks += list(R)
        users += [u] * R.size
    np.testing.assert_allclose(topk_metric_values(hits, nrel, metric),
                               set_metric_values(ranks, users, metric, k=K, n_items=n), rtol=1e-12)


def test_users_without_relevant_items_are_nan():
    v = set_metric_values([1, 2], [0, 2], "ndcg", k=5, n_users=4)
    assert v[0] == 1.0 and np.isnan(v[1]) and np.isnan(v[3])


def test_per_user_list_lengths():
    v = set_metric_values([2, 2], [0, 1], "auc", n_items=[3, 5])
    np.testing.assert_allclose(v, [0.5, 0.75])
    with pytest.raises(ValueError, match="ranks must lie in 1..3"):
        set_metric_values([4], [0], "auc", n_items=[3])
    with pytest.raises(ValueError, match="user 1 has rank 4 > 3"):
        set_metric_values([2, 4], [0, 1], "auc", n_items=[5, 3])


@pytest.mark.parametrize("kwargs, match", [
    ({"ranks": [1, 1], "users": [0, 0], "metric": "ndcg"}, "distinct"),
    ({"ranks": [0], "users": [0], "metric": "ndcg"}, "ranks"),
    ({"ranks": [1, 2], "users": [0], "metric": "ndcg"}, "users"),
    ({"ranks": [1], "users": [-1], "metric": "ndcg"}, "users"),
    ({"ranks": [1], "users": [0], "metric": "dcg"}, "metric"),
    ({"ranks": [1], "users": [0], "metric": "ndcg", "k": 0}, "k"),
    ({"ranks": [1], "users": [0], "metric": "auc"}, "n_items"),
    ({"ranks": [1], "users": [0], "metric": "precision"}, "precision needs k"),
    ({"ranks": [1.5], "users": [0], "metric": "recall"}, "ranks"),
    ({"ranks": [1], "users": [0.0], "metric": "recall"}, "users"),
])
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        set_metric_values(**kwargs)


def test_topk_bad_input():
    with pytest.raises(ValueError, match="hits"):
        topk_metric_values(np.zeros((2, 3)), [1, 1], "ndcg")
    with pytest.raises(ValueError, match="n_relevant"):
        topk_metric_values(np.ones((2, 3), dtype=bool), [1, 1], "ndcg")
    with pytest.raises(ValueError, match="n_relevant"):
        topk_metric_values(np.ones((2, 3), dtype=bool), [3], "ndcg")
    with pytest.raises(ValueError, match="auc"):
        topk_metric_values(np.ones((2, 3), dtype=bool), [3, 3], "auc")
