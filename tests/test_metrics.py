"""Metric functions on 1-based ranks: hand-computed values, Table 1 of Krichene & Rendle, bad input."""

import numpy as np
import pytest

from itemsampling.metrics import evaluate, metric_curve, metric_values

TOY = {  # Krichene & Rendle 2020, Table 1 (N = 10,000)
    "A": [100, 100, 100, 100, 100],
    "B": [40, 40, 8437, 9266, 4482],
    "C": [212, 2, 743, 5342, 1548],
}
TABLE1 = {  # printed values: AUC, AP, NDCG, Recall@10
    "A": (0.990, 0.010, 0.150, 0.000),
    "B": (0.555, 0.010, 0.122, 0.000),
    "C": (0.843, 0.101, 0.208, 0.200),
}


@pytest.mark.parametrize("name", list(TOY))
def test_krichene_rendle_table1(name):
    R = TOY[name]
    ours = (evaluate(R, "auc", n_items=10_000), evaluate(R, "ap"), evaluate(R, "ndcg"), evaluate(R, "recall", k=10))
    np.testing.assert_allclose(np.round(ours, 3), TABLE1[name], atol=1e-12)


def test_hand_computed():
    R = [1, 2, 3, 10]
    assert evaluate(R, "recall", k=2) == pytest.approx(0.5)
    assert evaluate(R, "hr", k=3) == pytest.approx(0.75)
    assert evaluate(R, "precision", k=2) == pytest.approx(0.25)
    assert evaluate(R, "ap", k=3) == pytest.approx((1 + 1 / 2 + 1 / 3) / 4)
    assert evaluate(R, "rr") == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 10) / 4)
    assert evaluate(R, "ndcg", k=2) == pytest.approx((1 + 1 / np.log2(3)) / 4)
    assert evaluate(R, "auc", n_items=10) == pytest.approx(np.mean([(10 - r) / 9 for r in R]))
    assert evaluate([1], "ndcg") == 1.0


def test_untruncated_metrics_sum_to_N():
    # SEED-NOTES item 5: sum_R F(R) over 1..N for untruncated recall is N; for ap it is H_N
    N = 50
    R = np.arange(1, N + 1)
    assert metric_values(R, "recall").sum() == N
    assert metric_values(R, "ap").sum() == pytest.approx(np.sum(1 / R))
    assert metric_values(R, "precision", n_items=N).sum() == pytest.approx(1.0)


def test_metric_curve_matches_pointwise():
    rng = np.random.default_rng(3)
    R = rng.integers(1, 200, size=500)
    ks = [1, 5, 10, 50, 199]
    for m in ("recall", "ndcg", "ap", "precision"):
        np.testing.assert_allclose(metric_curve(R, m, ks), [evaluate(R, m, k=k) for k in ks], atol=1e-12)


@pytest.mark.parametrize("call,msg", [
    (lambda: evaluate([], "recall", k=1), "empty"),
    (lambda: evaluate([0, 1], "recall", k=1), "ranks"),
    (lambda: evaluate([1.5], "recall", k=1), "integer"),
    (lambda: evaluate([np.nan], "recall", k=1), "NaN"),
    (lambda: evaluate([1], "recall", k=0), "k must be >= 1"),
    (lambda: evaluate([1], "foo", k=1), "metric must be one of"),
    (lambda: evaluate([1], "auc"), "n_items"),
    (lambda: evaluate([11], "auc", n_items=10), "ranks"),
    (lambda: evaluate([1], "precision"), "precision needs k"),
    (lambda: evaluate([True], "recall", k=1), "integer"),
])
def test_bad_input(call, msg):
    with pytest.raises(ValueError, match=msg):
        call()
