"""Chapter 1 through the runner at small parameters; recorded numbers checked independently."""

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from itemsampling.run import run_notebook

NB = Path(__file__).resolve().parents[1] / "notebooks" / "01-sampled-metrics-inconsistent.md"


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("ch01")
    params = {"n_repeats": 300, "seed": 11, "decoy_grid": [1, 10, 99, 2000, 5000],
              "curve_sample_sizes": [2, 101], "n_items": 10_000}
    return run_notebook(NB, params, out, progress=False)["results"]


def test_table1(results):
    t1 = results["table1_exact"]
    # independent: closed forms on the toy ranks
    C = np.array([212, 2, 743, 5342, 1548])
    assert t1["C"]["AP"] == pytest.approx(np.mean(1 / C))
    assert t1["C"]["NDCG"] == pytest.approx(np.mean(1 / np.log2(C + 1)))
    assert t1["C"]["AUC"] == pytest.approx(np.mean((10_000 - C) / 9_999))
    assert t1["C"]["Recall@10"] == 0.2
    assert t1["A"]["AP"] == pytest.approx(0.01)


def test_table2_exact_and_paper(results):
    exact = results["table2_exact_mean"]
    # Eq. 18: expected sampled recall@10 is a binomial CDF, averaged over instances
    C = np.array([212, 2, 743, 5342, 1548])
    ref = stats.binom.cdf(9, 99, (C - 1) / 9_999).mean()
    assert exact["C"]["Recall@10"] == pytest.approx(ref, rel=1e-10)
    # Eq. 19: AP closed form
    p = (C - 1) / 9_999
    ap = np.where(p > 0, (1 - (1 - p) ** 100) / np.where(p > 0, 100 * p, 1), 1.0).mean()
    assert exact["C"]["AP"] == pytest.approx(ap, rel=1e-10)
    assert results["table2_max_abs_paper_minus_exact"] < 0.01
    # Monte Carlo means within 3 standard errors of the exact expectations (12 comparisons; the
    # seed is fixed, so this is deterministic)
    assert results["mc_max_abs_z"] < 3
    assert results["n_repeats"] == 300


def test_auc_unbiased_and_orders(results):
    assert results["auc_max_abs_bias"] < 1e-9
    assert results["n_distinct_ap_orders"] >= 2
    assert results["table1_matches_paper"] is True
    # Krichene & Rendle's consistency (Definition 1) for Recall@10, exact order C > A = B: at 2,000
    # decoys B's expected sampled Recall@10 (binomial CDF, Eq. 18) is above C's 0.2, at 5,000 C is ahead
    # of both, so the page's consistency starts at 5,000
    def expected_recall(ranks, decoys):
        return stats.binom.cdf(9, decoys, (np.asarray(ranks) - 1) / 9_999).mean()
    B, C = [40, 40, 8437, 9266, 4482], [212, 2, 743, 5342, 1548]
    assert expected_recall(B, 2000) > expected_recall(C, 2000)
    assert expected_recall(C, 5000) > max(expected_recall(B, 5000), expected_recall([100] * 5, 5000))
    assert results["recall_consistent_from"] == 5000
    # the paper's headline: under 99 decoys A comes first on every metric
    assert all(order.startswith("A >") for order in results["sampled_orders"].values())


def test_parameters_off_the_paper_setting(tmp_path):
    # a reader's own small catalog: no paper columns, no crash, AUC still unbiased
    params = {"ranks": {"X": [1, 5, 20], "Y": [3, 3, 3]}, "n_items": 50, "sample_size": 10, "n_repeats": 50,
              "decoy_grid": [1, 5, 49], "curve_sample_sizes": [2, 10, 50]}
    res = run_notebook(NB, params, tmp_path, progress=False)["results"]
    assert "table2_max_abs_paper_minus_exact" not in res
    assert res["auc_max_abs_bias"] < 1e-9
    assert res["table1_exact"]["X"]["AP"] == pytest.approx(np.mean([1, 1 / 5, 1 / 20]))
