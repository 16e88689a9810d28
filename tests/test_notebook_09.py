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
    "table_dataset": "sim-ml100k",
    "table_models": ["svd8", "popular"],
    "paper_models": ["ease", "als"],
    "n_repeats": 3,
    "item_sizes": [100],
    "user_counts": [50, 200],
    "combined_users": 200,
    "adaptive_initial": None,
    "adaptive_max": None,
    "n_jobs": 1,
    "max_k": 10,
    "coverage_ms": [30, 300],
    "coverage_ps": [0.01, 0.3],
    "boot_model": "ease",
    "boot_users": 300,
    "boot_studies": 3,
    "n_boot": 20,
    "test_boot": 15,
    "test_users": 300,
    "compare_draws": 4,
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


def _holm(p, alpha=0.05):
    p = np.asarray(p, dtype=float)
    out = np.zeros(p.size, dtype=bool)
    for k, i in enumerate(np.argsort(p, kind="stable")):
        if p[i] > alpha / (p.size - k):
            break
        out[i] = True
    return out


def _t_p(d, se, n):
    """Two-sided p of d / se with t_{n-1} below 30 repeats, the normal from 30 on (the book's rule)."""
    z = abs(d) / se
    return 2 * (stats.t.sf(z, n - 1) if n < 30 else stats.norm.sf(z))


def test_bonferroni_multiple(results):
    z = stats.norm.isf
    assert results["ch09_bonf_pairs"] == pytest.approx((z(0.05 / 90) / z(0.025)) ** 2, rel=1e-12)
    assert results["ch09_bonf_models"] == pytest.approx((z(0.05 / 20) / z(0.025)) ** 2, rel=1e-12)
    assert 2.7 < results["ch09_bonf_pairs"] < 2.8 and 2.0 < results["ch09_bonf_models"] < 2.1
    assert results["ch09_m01_all_pairs"] / results["ch09_m01_two"] == pytest.approx(results["ch09_bonf_pairs"], rel=1e-3)


def test_coverage_is_the_binomial_coverage(results):
    """The coverage of each interval is exactly sum_q Binom(q) 1[p in CI(q)], and the glued texts say
    what it says, printed so that rounding cannot flip the comparison with the level."""
    from itemsampling.users import confidence_interval

    cov = results["ch09_coverage"]
    for meth, grid in cov.items():
        for i, m in enumerate(PARAMS["coverage_ms"]):
            for j, p in enumerate(PARAMS["coverage_ps"]):
                exact = sum(stats.binom.pmf(q, m, p) for q in range(m + 1)
                            if (lambda ci: ci[0] <= p <= ci[1])(confidence_interval(np.r_[np.ones(q), np.zeros(m - q)],
                                                                                    0.95, meth)))
                assert grid[i][j] == pytest.approx(exact, rel=1e-9, abs=1e-12), (meth, m, p)
    assert results["ch09_wald_min"] < 0.8  # p = 0.01, m = 30: Wald collapses at Q = 0
    assert results["ch09_wald_cov_text"].startswith("falls below the nominal 0.95")
    cp = results["ch09_cp_min"]
    assert cp >= 0.95 and results["ch09_cp_cov_text"].startswith("stays at or above")
    wl = results["ch09_wilson_min"]
    assert ("approximately correct" in results["ch09_wilson_text"]) == (wl < 0.95)


@pytest.fixture(scope="module")
def table_ranks():
    from itemsampling.catalogue import catalogue_ranks

    return catalogue_ranks(PARAMS["table_dataset"], models=PARAMS["table_models"], rng=PARAMS["seed"])


def test_user_sampling_errors_recomputed(results, table_ranks):
    """Tables 9.3-9.4 run on the table dataset with the parameters' user counts and chapter 8's size
    rule; the user-sampling errors of every repeat are recomputed with metric_curve from the draws
    that itemsampling.catalogue.user_against_item documents, and the item-sampling errors with
    estimate_metrics on the grid."""
    from itemsampling.catalogue import initial_size_rule, scaled_sizes
    from itemsampling.estimators import estimate_metrics

    N = table_ranks["n_items"]
    sizes = results["ch09_table_sizes"]
    assert results["ch09_table_N"] == N and results["ch09_table_M"] == len(table_ranks["pools"])
    assert sizes["user_counts"] == PARAMS["user_counts"] and sizes["combined_users"] == PARAMS["combined_users"]
    n_max = scaled_sizes(N)[1]  # sim-ml100k is not TORS-shaped: 12.4% of N, n_0 = n_max / 16
    assert (sizes["initial_size"], sizes["max_size"]) == (initial_size_rule(n_max), n_max) == scaled_sizes(N)[:2]
    KS = list(range(1, PARAMS["max_k"] + 1))
    seed, n_rep = PARAMS["seed"], PARAMS["n_repeats"]
    per_rep = results["ch09_table_per_repeat"]
    for i, mod in enumerate(PARAMS["table_models"]):
        R = table_ranks["ranks"][mod]
        truth = metric_curve(R, "recall", KS)
        for j in range(n_rep):
            g = np.random.default_rng([seed, i, j, len(PARAMS["item_sizes"]) + 2])
            for m in PARAMS["user_counts"]:
                sub = R[g.choice(R.size, size=m, replace=False)]
                exp = 100 * np.mean(np.abs(metric_curve(sub, "recall", KS) - truth) / truth)
                assert per_rep[mod]["recall"][f"user {m:,}"][j] == pytest.approx(exp, rel=1e-9), (mod, m, j)
        r = sample_ranks(R, N, 100, rng=np.random.default_rng([seed, i, 0, 0]))
        with pytest.warns(Warning):  # cut-offs below one kernel width
            est = estimate_metrics(r, N, 100, ["recall"], KS, ["mn_mes"], eta=0.01, grid=True)["mn_mes"]["recall"]
        assert per_rep[mod]["recall"]["item 100"][0] == pytest.approx(
            100 * np.mean(np.abs(est - truth) / truth), rel=1e-9)
        got = results["ch09_table_means"][mod]["recall"]
        assert got["user 200"] == pytest.approx(np.mean(per_rep[mod]["recall"]["user 200"]))
    # Eq. 46: four times the users, about half the error (the mean over the repeats and models)
    ratio = np.mean([results["ch09_table_means"][mod]["recall"]["user 50"] / results["ch09_table_means"][mod]["recall"]["user 200"]
                     for mod in PARAMS["table_models"]])
    M = len(table_ranks["pools"])
    assert results["ch09_ratio_pred"] == pytest.approx(np.sqrt((1 / 50 - 1 / M) / (1 / 200 - 1 / M)))
    assert 1.3 < ratio < 4.0


def test_table_judgements_are_computed(results, table_ranks):
    """The counts glued into the prose of Tables 9.3-9.4 follow from the recorded per-repeat errors:
    Eq. 46's prediction recomputed from the per-user metric values, decided at two standard errors."""
    M = len(table_ranks["pools"])
    KS = list(range(1, PARAMS["max_k"] + 1))
    per_rep, n_rep = results["ch09_table_per_repeat"], PARAMS["n_repeats"]
    ps, cells = [], 0
    for mod in PARAMS["table_models"]:
        R = table_ranks["ranks"][mod]
        for met in ("recall", "ndcg"):
            vals = [metric_values(R, met, k) for k in KS]
            for m in PARAMS["user_counts"]:
                pred = 100 * np.mean([np.sqrt(2 / np.pi) * v.std() * np.sqrt((1 - m / M) / m) / v.mean() for v in vals])
                e = np.asarray(per_rep[mod][met][f"user {m:,}"])
                ps.append(_t_p(e.mean() - pred, e.std(ddof=1) / np.sqrt(n_rep), n_rep))
                cells += 1
    within = int(np.sum(~_holm(ps)))
    assert results["ch09_eq46_cells"] == cells and results["ch09_eq46_within"] == within
    assert results["ch09_eq46_differ"] == cells - within
    # adaptive MLE against the largest user count, row by row: t tests, Holm over the rows
    ds, ps = [], []
    for mod in PARAMS["table_models"]:
        for met in ("recall", "ndcg"):
            a = np.asarray(per_rep[mod][met]["adaptive MLE"])
            b = np.asarray(per_rep[mod][met]["user 200"])
            d, se = a.mean() - b.mean(), np.hypot(a.std(ddof=1), b.std(ddof=1)) / np.sqrt(n_rep)
            ds.append(d)
            ps.append(_t_p(d, se, n_rep))
    expect = ["smaller" if r and d < 0 else "larger" if r else "tie" for d, r in zip(ds, _holm(ps))]
    assert results["ch09_pattern"]["adaptive MLE < user 200"]["ours"] == expect


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


def test_shared_decoy_comparison(results, ranks):
    """Table 9.6: the decoys redrawn with ranking.shared_decoy_ranks from the refitted pair (the
    chapter's streams), BV's estimates recomputed with estimate_metric, its exact expectation with the
    kernel of each user's pool, the width ratios and the glued verdicts from the recorded numbers."""
    from itemsampling.estimators import estimate_metric
    from itemsampling.estimators.corrected import corrected_metric
    from itemsampling.experiments import fit_models
    from itemsampling.kernel import kernel_row
    from itemsampling.ranking import shared_decoy_ranks

    seed, (a, b) = PARAMS["seed"], PARAMS["models"]
    cmp = results["ch09_compare"]
    assert set(cmp) == {f"{e}/{d}/{p}" for e, d in (("BV 0.1", "independent"), ("BV 0.1", "shared"), ("MLE", "shared"))
                        for p in ("paired", "unpaired")}
    for key, row in cmp.items():
        assert row["low"] <= row["A - B"] <= row["high"]
        assert row["A - B"] == pytest.approx(row[a] - row[b], abs=1e-12)
        est, dec, _ = key.split("/")
        un = cmp[f"{est}/{dec}/unpaired"]
        assert row["width ratio"] == pytest.approx((row["high"] - row["low"]) / (un["high"] - un["low"]))
        assert row["A - B"] == un["A - B"]
    assert results["ch09_compare_width_ratio"] == cmp["BV 0.1/independent/paired"]["width ratio"]
    assert results["ch09_compare_width_ratio_shared"] == cmp["BV 0.1/shared/paired"]["width ratio"]
    users = np.random.default_rng([seed, 4]).choice(ranks.n_users, size=PARAMS["test_users"], replace=False)
    train, test, fitted, _ = fit_models(PARAMS["dataset"], [a, b], rng=seed)
    rows = test.iloc[users]
    N, n = ranks.n_items, 100
    D = PARAMS["compare_draws"]  # Table 9.6 shows the first of D draws of each design
    shared, glob, pools = shared_decoy_ranks({a: fitted[a], b: fitted[b]}, train, rows, n, repeats=D,
                                             rng=np.random.default_rng([seed, 8]), return_global=True)
    shared = {m: r[0] for m, r in shared.items()}
    indep = {m: shared_decoy_ranks({m: fitted[m]}, train, rows, n, repeats=D, rng=np.random.default_rng([seed, s]))[m][0]
             for m, s in ((a, 5), (b, 6))}
    for dec, rs in (("shared", shared), ("independent", indep)):
        for m in (a, b):
            with pytest.warns(Warning):  # K = 10 below one kernel width
                bv = estimate_metric(rs[m], N, n, "recall", 10, "bv", gamma=0.1)
            assert cmp[f"BV 0.1/{dec}/paired"][m] == pytest.approx(bv, rel=1e-12)
    assert results["ch09_compare_same_R"] == sum(int(np.sum(glob[m] == ranks[m][users])) for m in (a, b))
    assert np.array_equal(pools, ranks.pool_sizes[users])  # the pool of the chapter's global ranks
    assert results["ch09_pool_share"] == pytest.approx(np.median(pools) / N)
    truth = {m: float(np.mean(ranks[m][users] <= 10)) for m in (a, b)}
    assert results["ch09_compare_true"] == pytest.approx(truth[a] - truth[b])
    Fh = corrected_metric("recall", 10, N, n, "bv", gamma=0.1)
    for m, key in ((a, "ch09_ebv_a"), (b, "ch09_ebv_b")):
        exact = np.mean([kernel_row(int(r), int(p), n, True) @ Fh for r, p in zip(glob[m], pools)])
        assert results[key] == pytest.approx(exact, rel=1e-9)
    bias = results["ch09_bias"]
    assert bias["BV 0.1, exact expectation"]["A - B"] == pytest.approx(results["ch09_ebv_a"] - results["ch09_ebv_b"])
    for lab, key in (("BV 0.1", "bv"), ("MLE", "mle")):
        row = bias[f"{lab}, mean of {D} draws"]
        assert row["A - B"] == pytest.approx(row[a] - row[b]) == pytest.approx(results[f"ch09_{key}_mean_diff"])
        assert row["se of the mean"] == pytest.approx(row["sd over draws"] / np.sqrt(D))
        assert row["RMSE"] ** 2 == pytest.approx(row["sd over draws"] ** 2 * (D - 1) / D
                                                 + (row["A - B"] - results["ch09_compare_true"]) ** 2)
    gap = results["ch09_ratio_ind"] - results["ch09_ratio_sh"]
    gap_se = np.hypot(results["ch09_ratio_ind_se"], results["ch09_ratio_sh_se"])
    p_gap = _t_p(gap, gap_se, D)  # Welch's standard error, t with D - 1 degrees of freedom
    assert results["ch09_ratio_verdict"].startswith("the ratio with independent decoys and with shared ones cannot"
                                                    if p_gap >= 0.05 else "pairing removes more" if gap > 0
                                                    else "pairing removes less")
    assert (results["ch09_rmse_verdict"] == "higher than") == (results["ch09_mle_rmse"] > results["ch09_bv_rmse"])
    assert results["ch09_bv_z_sh"] == pytest.approx(abs(cmp["BV 0.1/shared/paired"]["A - B"] - results["ch09_ebv_diff"])
                                                    / results["ch09_bv_sd_sh"])


def test_cost_table(results, table_ranks):
    cost = results["ch09_cost"]
    N, M = table_ranks["n_items"], len(table_ranks["pools"])
    assert cost["scores computed"]["full evaluation"] == N * M
    assert cost["scores computed"]["item 100"] == 100 * M
    assert cost["scores computed"]["user 50"] == 50 * N
    # the break-even population: users that reach adaptive MLE's error by Eq. 46 (c^2 from the largest
    # user count's measured error), times N over the adaptive average size
    err = cost["error (%)"]
    c2 = err["user 200"] ** 2 / (1 / 200 - 1 / M)
    m_ad = c2 / err["adaptive MLE"] ** 2
    assert results["ch09_break_even_ad_users"] == pytest.approx(m_ad, rel=1e-9)
    assert results["ch09_break_even_ad"] == pytest.approx(m_ad * N / cost["items per user"]["adaptive MLE"], rel=1e-9)
    above = results["ch09_break_even_ad"] > M
    assert ("only for more than" in results["ch09_break_even_text"]) == above


def test_typed_judgements_are_computed(results):
    """The coverage judgements glued into the prose follow from the recorded numbers."""
    gap = max(0.95 - c for row in results["ch09_coverage"]["wilson"] for c in row)
    assert results["ch09_wilson_gap"] == pytest.approx(gap)
    tab = results["ch09_boot_table"]
    S = PARAMS["boot_studies"]
    p = {k: stats.binomtest(int(round(row["coverage"] * S)), S, 0.95).pvalue for k, row in tab.items()}
    rej = dict(zip(p, _holm(list(p.values()))))
    assert results["ch09_boot_cov_p"] == pytest.approx(p, rel=1e-9)
    honest = [k.replace(" / ", " (") + ")" for k in tab if not rej[k]]
    assert set(results["ch09_boot_honest"].split(", ")) == (set(honest) if honest else {"none"})


def test_a_model_beyond_the_memory_budget_is_replaced_and_the_page_says_so(tmp_path, monkeypatch):
    """On a data folder of N = 2,689 items EASE's dense N x N matrix and a block of its columns need 69 MB: with a
    60 MB budget the chapter runs UserKNN in its place (chapter 8's rule, candidates.replace_models), its bootstrap
    study on it, and says so on the page; the ranks are the folder's own under UserKNN."""
    from movielens_folder import write_movielens
    from rendered import rendered_prose

    from itemsampling.experiments import load_interactions
    from itemsampling.models import EASE

    path = write_movielens(tmp_path / "ml-data", "u.data", n_users=200, n_items=5000)
    N = load_interactions(str(path)).attrs["n_items"]
    need = EASE().item_matrix_bytes(N)
    assert N == 2689 and need == 8 * N ** 2 + 24 * N * 169 > 60_000_000  # EASE beyond the budget; Popular has none
    monkeypatch.setenv("ITEMSAMPLING_MEMORY_LIMIT", str(60_000_000))
    monkeypatch.setenv("ITEMSAMPLING_CACHE", str(tmp_path / "cache"))
    params = {"dataset": str(path), "models": ["ease", "popular"], "boot_model": "ease", "n_repeats": 2, "n_jobs": 1,
              "max_k": 10, "coverage_ms": [30], "coverage_ps": [0.1], "boot_users": 100, "boot_studies": 2,
              "n_boot": 10, "test_boot": 10, "test_users": 100, "compare_draws": 2, "seed": 1}
    out = run_notebook(NOTEBOOK, params, tmp_path / "out", progress=False, html=True)
    res = out["results"]
    assert res["ch09_model_replacements"] == {"ease": "userknn"}
    assert res["ch09_models"] == ["userknn", "popular"]
    gr = load_global_ranks(str(path), ["userknn"], rng=1, progress=False)
    assert res["ch09_boot_truth"] == pytest.approx(np.mean(gr["userknn"] <= 10), rel=1e-12)
    prose = rendered_prose(tmp_path / "out" / out["html"])
    assert f"ease needs {need / 1e6:,.0f} MB for one dense" in prose and "replaced by userknn" in prose
    assert "memory budget of 60 MB" in prose
