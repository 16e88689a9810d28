"""Chapter 9 (TORS Sec. 7) at small parameters, its recorded numbers checked against independent
computations through the public API."""

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from itemsampling.experiments import load_global_ranks
from itemsampling.metrics import metric_curve, metric_values
from itemsampling.run import run_notebook
from itemsampling.sampling import sample_ranks

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "09-user-sampling.md"
PARAMS = {
    "dataset": "sim-ml100k",
    "models": ["ease", "popular"],
    "n_repeats": 2,
    "item_sizes": [100],
    "user_counts": [50, 200],
    "combined_users": 200,
    "adaptive_initial": 100,
    "adaptive_max": 400,
    "max_k": 10,
    "coverage_ms": [30, 300],
    "coverage_ps": [0.01, 0.3],
    "coverage_sims": 400,
    "boot_model": "ease",
    "boot_users": 300,
    "boot_studies": 3,
    "n_boot": 20,
    "test_boot": 15,
    "test_users": 300,
    "seed": 2,
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_notebook(NOTEBOOK, PARAMS, out=tmp_path_factory.mktemp("ch09"), progress=False)["results"]


@pytest.fixture(scope="module")
def ranks():
    return load_global_ranks(PARAMS["dataset"], models=PARAMS["models"], rng=PARAMS["seed"])


def test_worked_sample_sizes(results):
    # TORS Eq. 47 printed values, and Eq. 52 doubling
    assert results["ch09_m03_nearest"] == 1067 and results["ch09_m01"] == 9604 and results["ch09_m03"] == 1068
    z = stats.norm.ppf(0.975)
    assert results["ch09_m01_two"] == int(np.ceil(2 * 0.25 * (z / 0.01) ** 2))
    z45 = stats.norm.ppf(1 - 0.05 / 45 / 2)
    assert results["ch09_m01_all_pairs"] == int(np.ceil(2 * 0.25 * (z45 / 0.01) ** 2))


def test_coverage_is_the_binomial_coverage(results):
    """The simulated coverage of each interval is close to its exact coverage sum_q Binom(q) 1[p in CI(q)]."""
    from itemsampling.users import confidence_interval

    cov = results["ch09_coverage"]
    se = lambda c: np.sqrt(c * (1 - c) / PARAMS["coverage_sims"])  # noqa: E731
    for meth, grid in cov.items():
        for i, m in enumerate(PARAMS["coverage_ms"]):
            for j, p in enumerate(PARAMS["coverage_ps"]):
                exact = sum(stats.binom.pmf(q, m, p) for q in range(m + 1)
                            if (lambda ci: ci[0] <= p <= ci[1])(confidence_interval(np.r_[np.ones(q), np.zeros(m - q)],
                                                                                    0.95, meth)))
                assert abs(grid[i][j] - exact) <= 4 * se(exact) + 1e-9, (meth, m, p)
    assert results["ch09_wald_min"] < 0.8  # p = 0.01, m = 30: Wald collapses at Q = 0


def test_user_sampling_errors_recomputed(results, ranks):
    """Repeat `rep` of model i draws its users with default_rng([seed, 3, i, rep]) after the item
    samples; the recorded mean relative errors of user sampling are recomputed here."""
    from itemsampling.sampling import adaptive_sample_ranks
    from itemsampling.estimators import estimate_metrics

    N, M = ranks.n_items, ranks.n_users
    KS = list(range(1, PARAMS["max_k"] + 1))
    for i, mod in enumerate(PARAMS["models"]):
        R = ranks[mod]
        truth = metric_curve(R, "recall", KS)
        errs = {m: [] for m in PARAMS["user_counts"]}
        item = []
        for rep in range(PARAMS["n_repeats"]):
            g = np.random.default_rng([PARAMS["seed"], 3, i, rep])
            r = sample_ranks(R, N, 100, rng=g)
            est = estimate_metrics(r, N, 100, ["recall", "ndcg"], KS, ["mn_mes"], eta=0.01)["mn_mes"]["recall"]
            item.append(100 * np.mean(np.abs(est - truth) / truth))
            adaptive_sample_ranks(R, N, PARAMS["adaptive_initial"], PARAMS["adaptive_max"], rng=g)
            for m in PARAMS["user_counts"]:
                idx = g.choice(M, size=m, replace=False)
                errs[m].append(100 * np.mean(np.abs(metric_curve(R[idx], "recall", KS) - truth) / truth))
        got = results["ch09_table_means"][mod]["recall"]
        assert got["item 100"] == pytest.approx(np.mean(item), rel=1e-9)
        for m in PARAMS["user_counts"]:
            assert got[f"user {m:,}"] == pytest.approx(np.mean(errs[m]), rel=1e-9), (mod, m)


def test_tests_and_adjustments(results, ranks):
    M = ranks.n_users
    users = np.random.default_rng([PARAMS["seed"], 4]).choice(M, size=PARAMS["test_users"], replace=False)
    a, b = PARAMS["models"]
    xa = metric_values(ranks[a][users], "ndcg", 10)
    xb = metric_values(ranks[b][users], "ndcg", 10)
    rec = results["ch09_tests"][f"{a} - {b}/ndcg@10/paired-t"]
    assert rec["p"] == pytest.approx(stats.ttest_1samp(xa - xb, 0.0).pvalue, rel=1e-9)
    assert rec["difference"] == pytest.approx(xa.mean() - xb.mean(), rel=1e-12)
    # one pair only: Holm and Bonferroni leave the p-value unchanged
    assert rec["holm"] == pytest.approx(rec["p"]) and rec["bonferroni"] == pytest.approx(rec["p"])
    ya = (ranks[a][users] <= 10).astype(float)
    yb = (ranks[b][users] <= 10).astype(float)
    table = [[ya.sum(), ya.size - ya.sum()], [yb.sum(), yb.size - yb.sum()]]
    assert results["ch09_tests"][f"{a} - {b}/recall@10/z"]["p"] == pytest.approx(
        stats.chi2_contingency(table, correction=False)[1], rel=1e-8)


def test_bootstrap_study_and_comparison(results, ranks):
    tab = results["ch09_boot_table"]
    assert set(tab) == {"sampled / population", "BV 0.1 / population", "MLE / population",
                        "Wilson (all items) / population", "BV 0.1 / test-users",
                        "MLE / test-users"}
    S = PARAMS["boot_studies"]
    for row in tab.values():
        v = row["coverage"]
        assert 0 <= v <= 1 and (v * S) == pytest.approx(round(v * S))
        assert row["MC se"] == pytest.approx(np.sqrt(max(v * (1 - v), 0.95 * 0.05) / S))
    assert results["ch09_boot_truth"] == pytest.approx(np.mean(ranks["ease"] <= 10))
    assert results["ch09_mle_width_ratio"] == pytest.approx(
        tab["MLE / test-users"]["mean width"] / tab["MLE / population"]["mean width"])
    cmp = results["ch09_compare"]
    for key in ("paired", "unpaired"):
        assert cmp["low"][key] <= cmp["difference"][key] <= cmp["high"][key]
    assert cmp["difference"]["paired"] == cmp["difference"]["unpaired"]
    assert results["ch09_compare_width_ratio"] == pytest.approx(
        (cmp["high"]["paired"] - cmp["low"]["paired"]) / (cmp["high"]["unpaired"] - cmp["low"]["unpaired"]))


def test_cost_table(results, ranks):
    cost = results["ch09_cost"]
    N, M = ranks.n_items, ranks.n_users
    assert cost["scores computed"]["full evaluation"] == N * M
    assert cost["scores computed"]["item 100"] == 100 * M
    assert cost["scores computed"]["user 50"] == 50 * N


def test_typed_judgements_are_computed(results):
    """The coverage judgements glued into the prose follow from the recorded numbers."""
    gap = max(0.95 - c for row in results["ch09_coverage"]["wilson"] for c in row)
    assert results["ch09_wilson_gap"] == pytest.approx(gap)
    tab = results["ch09_boot_table"]
    honest = [k.replace(" / ", " (") + ")" for k, row in tab.items() if abs(row["coverage"] - 0.95) <= 2 * row["MC se"]]
    assert set(results["ch09_boot_honest"].split(", ")) == (set(honest) if honest else {"none"})
