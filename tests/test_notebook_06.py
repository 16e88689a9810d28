"""Chapter 6 (Jin et al. 2021) at small parameters, its recorded numbers checked against
independent computations through the public API."""

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from itemsampling.estimators import estimate_metric, estimate_metrics, estimate_rank_distribution
from itemsampling.estimators.distribution import fit_rank_distribution
from itemsampling.experiments import load_global_ranks
from itemsampling.metrics import evaluate
from itemsampling.run import run_notebook
from itemsampling.sampling import sample_ranks

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "06-learning-rank-distribution.md"
PARAMS = {
    "dataset": "sim-ml100k",
    "models": ["ease", "popular"],
    "figure_models": ["ease"],
    "n_repeats": 2,
    "ks": [1, 10],
    "growth_model": "ease",
    "growth_sizes": [100, 400],
    "growth_repeats": 1,
    "max_rank_plot": 50,
    "tol_model": "ease",
    "tol_repeats": 2,
    "scale_items": 200_000,
    "scale_sample_size": 200,
    "scale_users": 20_000,
    "eta_models": ["ease", "popular"],
    "eta_sizes": [50, 200],
    "eta_grid": [1e-5, 1e-4, 1e-3],
    "eta_repeats": 2,
    "seed": 3,
}
LABEL = {"recall": "Recall", "ndcg": "NDCG", "ap": "AP"}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_notebook(NOTEBOOK, PARAMS, out=tmp_path_factory.mktemp("ch06"), progress=False)["results"]


def test_exact_metrics(results):
    ranks = load_global_ranks(PARAMS["dataset"], models=PARAMS["models"], rng=PARAMS["seed"])
    assert results["ch06_N"] == ranks.n_items
    for m in PARAMS["models"]:
        for met, lab in LABEL.items():
            assert results["ch06_exact_at10"][m][lab] == pytest.approx(evaluate(ranks[m], met, 10), abs=1e-12)


def test_estimates_match_estimate_metric(results):
    """Repeat j of model i samples with default_rng([seed, i, j]); the chapter's mean estimates
    must equal estimate_metric on the same sampled ranks."""
    ranks = load_global_ranks(PARAMS["dataset"], models=PARAMS["models"], rng=PARAMS["seed"])
    N, n = ranks.n_items, 100
    cases = {"MLE": ("mle", {}), "MES": ("mes", {"eta": 0.001, "eta_scaling": "quadratic"}), "BV 0.1": ("bv", {"gamma": 0.1}),
             "WMLE": ("wmle", {"weight": "ndcg", "C": 10}), "MLE*": ("mle", {"solver": "cnm"}), "CLS": ("cls", {})}
    for i, m in enumerate(PARAMS["models"]):
        samples = [sample_ranks(ranks[m], N, n, rng=np.random.default_rng([PARAMS["seed"], i, j]))
                   for j in range(PARAMS["n_repeats"])]
        for label, (method, kw) in cases.items():
            for met, lab in LABEL.items():
                vals = [estimate_metric(r, N, n, met, 10, method, **kw) for r in samples]
                assert results["ch06_mean_at10"][m][label][lab] == pytest.approx(np.mean(vals), abs=1e-8), (m, label, lab)
                assert results["ch06_std_at10"][m][label][lab] == pytest.approx(np.std(vals, ddof=1), abs=1e-8)


def test_comparison_table_relative_bias(results):
    """The comparison with Jin et al. Table 2: our relative bias is (mean - exact) / exact of the
    recorded estimates, for every paper model we ran (here EASE), every metric and method."""
    rb = results["ch06_rel_bias_at10"]
    assert {k.split("/")[0] for k in rb} == {"ease"}
    assert {k.split("/")[2] for k in rb} == {"CLS", "BV 0.1", "BV 0.01", "MLE", "WMLE", "MES"}
    for key, v in rb.items():
        m, lab, meth = key.split("/")
        ex = results["ch06_exact_at10"][m][lab]
        assert v == pytest.approx(100 * (results["ch06_mean_at10"][m][meth][lab] - ex) / ex, rel=1e-10)


def test_winner_counts_recomputed_from_estimates(results):
    """Counts of correct winners recomputed from the recorded per-repeat estimates and exact values."""
    wc = results["ch06_winner_counts"]
    assert set(wc) == {f"{k}/{lab}" for k in PARAMS["ks"] for lab in LABEL.values()}
    models = PARAMS["models"]
    for key, counts in wc.items():
        truth = max(models, key=lambda m: results["ch06_exact"][m][key])
        for meth, count in counts.items():
            est = np.array([results["ch06_estimates"][m][meth][key] for m in models])  # models x repeats
            picked = [models[i] for i in np.argmax(est, axis=0)]
            assert count == sum(p == truth for p in picked), (key, meth)
    # and the per-repeat estimates are those of estimate_metric (first repeat, K = 1, CLS and MLE)
    ranks = load_global_ranks(PARAMS["dataset"], models=models, rng=PARAMS["seed"])
    r = sample_ranks(ranks["popular"], ranks.n_items, 100, rng=np.random.default_rng([PARAMS["seed"], 1, 0]))
    for meth, (method, kw) in {"CLS": ("cls", {}), "MLE": ("mle", {})}.items():
        assert results["ch06_estimates"]["popular"][meth]["1/NDCG"][0] == pytest.approx(
            estimate_metric(r, ranks.n_items, 100, "ndcg", 1, method, **kw), abs=1e-12)


def test_growth_curve_and_error_recomputed(results):
    """Figure 6.3's averaged MLE curve and its mean absolute error, recomputed."""
    ranks = load_global_ranks(PARAMS["dataset"], models=[PARAMS["growth_model"]], rng=PARAMS["seed"])
    R, N = ranks[PARAMS["growth_model"]], ranks.n_items
    n_s = PARAMS["growth_sizes"][0]
    P = np.zeros(N)
    for j in range(PARAMS["growth_repeats"]):
        r = sample_ranks(R, N, n_s, rng=np.random.default_rng([PARAMS["seed"], 1000 + n_s, j]))
        P += estimate_rank_distribution(r, N, n_s, "mle", tol=1e-6) / PARAMS["growth_repeats"]
    K = PARAMS["max_rank_plot"]   # every plotted cut-off (issue 47, defect 18)
    curve = np.array(results["ch06_growth_curves"][str(n_s)]["MLE"])
    np.testing.assert_allclose(curve, np.cumsum(P)[:K], atol=1e-10)
    truth = np.cumsum(np.bincount(R, minlength=N + 1)[1:] / R.size)[:K]
    mae = results["ch06_growth_mae"][str(n_s)]
    assert set(mae) == {"MLE", "MES", "BV 0.1", "MES, a = η fixed"}
    for meth, v in mae.items():
        c = np.array(results["ch06_growth_curves"][str(n_s)][meth])
        assert v == pytest.approx(np.mean(np.abs(c - truth)), abs=1e-12)


def test_mes_weight_consistent_across_sample_sizes(results):
    """Figure 6.3's MES curves: the chapter's weight a = eta (100/n)^2 and Jin et al.'s a = eta held
    fixed, recomputed; the fixed weight's error grows with n by far more than the consistent one's."""
    ranks = load_global_ranks(PARAMS["dataset"], models=[PARAMS["growth_model"]], rng=PARAMS["seed"])
    R, N = ranks[PARAMS["growth_model"]], ranks.n_items
    K = PARAMS["max_rank_plot"]
    for n_s in PARAMS["growth_sizes"]:
        r = sample_ranks(R, N, n_s, rng=np.random.default_rng([PARAMS["seed"], 1000 + n_s, 0]))
        for label, kw in (("MES", {"eta_scaling": "quadratic"}), ("MES, a = η fixed", {"eta_scaling": "aaai"})):
            P = estimate_rank_distribution(r, N, n_s, "mes", eta=0.001, **kw)
            np.testing.assert_allclose(results["ch06_growth_curves"][str(n_s)][label], np.cumsum(P)[:K], atol=1e-8)
    lo, hi = (str(x) for x in PARAMS["growth_sizes"])
    mae = results["ch06_growth_mae"]
    assert results["ch06_growth_mes_fixed_ratio"] == pytest.approx(mae[hi]["MES, a = η fixed"] / mae[lo]["MES, a = η fixed"])
    assert results["ch06_growth_mes_ratio"] == pytest.approx(mae[hi]["MES"] / mae[lo]["MES"])
    assert results["ch06_growth_mes_fixed_ratio"] > 2 * results["ch06_growth_mes_ratio"]
    assert results["ch06_mes_a"] == pytest.approx(0.001)   # n = 100: Jin et al.'s a = eta


def test_paper_quotes_transcribed(results):
    """The numbers the prose quotes from Jin et al. 2021, hand-computed from its Tables 2 and 4."""
    assert results["ch06_paper_ease_recall"] == pytest.approx(0.3477)
    assert results["ch06_paper_itemknn_recall"] == pytest.approx(0.4272)
    # WMLE on EASE and itemKNN (Table 2): itemKNN AP 13.21 / 13.89 - 1, EASE Recall 36.30 / 34.77 - 1
    assert results["ch06_paper_wmle_bias_lo"] == pytest.approx(100 * (13.21 / 13.89 - 1))
    assert results["ch06_paper_wmle_bias_hi"] == pytest.approx(100 * (36.30 / 34.77 - 1))
    # itemKNN Recall: 41.71 / 40.02 - 1 is the largest WMLE-MLE gap of the three paper models
    assert results["ch06_paper_wmle_vs_mle"] == pytest.approx(100 * (41.71 / 40.02 - 1))
    # Table 4, K <= 10: CLS is never right, BV 0.1 is right 21-41 times
    assert results["ch06_paper_worst_small_k"] == "CLS" and results["ch06_paper_worst_small_k_hi"] == 0
    assert (results["ch06_paper_bv01_small_k_lo"], results["ch06_paper_bv01_small_k_hi"]) == (21, 41)
    assert results["ch06_paper_bv01_iknn_under"] == pytest.approx(100 * (1 - 34.26 / 42.72))
    assert results["ch06_paper_bv01_ease_bias"] == pytest.approx(100 * (36.83 / 34.77 - 1))
    assert (results["ch06_paper_dist_win_lo"], results["ch06_paper_dist_win_hi"]) == (45, 61)


def test_curve_errors_recomputed(results):
    """The relative errors of the averaged Recall@K curves quoted in the prose."""
    ranks = load_global_ranks(PARAMS["dataset"], models=PARAMS["figure_models"], rng=PARAMS["seed"])
    m = PARAMS["figure_models"][0]
    R, N = ranks[m], ranks.n_items
    i = PARAMS["models"].index(m)
    P = np.zeros(N)
    for j in range(PARAMS["n_repeats"]):
        r = sample_ranks(R, N, 100, rng=np.random.default_rng([PARAMS["seed"], i, j]))
        P += estimate_rank_distribution(r, N, 100, "mes", eta=0.001, eta_scaling="quadratic") / PARAMS["n_repeats"]
    truth = np.cumsum(np.bincount(R, minlength=N + 1)[1:] / R.size)
    for k, v in results["ch06_curve_rel_error"]["MES"][m].items():
        assert v == pytest.approx(100 * (np.cumsum(P)[int(k) - 1] / truth[int(k) - 1] - 1), abs=1e-6)


def test_tolerance_table(results):
    """EM's answer depends on tol; CNM is certified. Draw 1 of the table recomputed."""
    tab = results["ch06_tol_table"]
    ranks = load_global_ranks(PARAMS["dataset"], models=[PARAMS["tol_model"]], rng=PARAMS["seed"])
    N = ranks.n_items
    r = sample_ranks(ranks[PARAMS["tol_model"]], N, 100, rng=np.random.default_rng([PARAMS["seed"], 2000, 0]))
    for label, kw in (("EM (tol 1e-06)", {"tol": 1e-6}), ("CNM (exact MLE)", {"solver": "cnm"})):
        fit = fit_rank_distribution(r, N, 100, "mle", **kw)
        assert tab[label]["iterations, draw 1"] == fit.iterations
        assert tab[label]["KKT gap, draw 1"] == pytest.approx(fit.gap, rel=1e-9)
        assert tab[label]["Recall@10, draw 1"] == pytest.approx(100 * np.cumsum(fit.distribution)[9], abs=1e-9)
    assert tab["CNM (exact MLE)"]["max KKT gap"] <= 1e-9
    its = [tab[f"EM (tol {t})"]["iterations, draw 1"] for t in ("1e-05", "1e-06", "1e-07", "1e-08")]
    assert its == sorted(its)
    gaps = [tab[f"EM (tol {t})"]["KKT gap, draw 1"] for t in ("1e-05", "1e-06", "1e-07", "1e-08")]
    assert gaps[-1] < gaps[0] and min(gaps) > tab["CNM (exact MLE)"]["KKT gap, draw 1"]


def test_wmle_synthetic_check(results):
    """On ranks shaped like the paper's ml-1m (exact Recall@10 0.348-0.427), the printed WMLE is far
    above the truth for every C, while MLE is close."""
    for row in results["ch06_wmle_synthetic"].values():
        assert 0.3 < row["exact"] < 0.5
        assert abs(row["MLE (EM, tol 1e-6)"] - row["exact"]) < 0.1
        for C in (1, 10, 100):
            assert row[f"WMLE, C = {C}"] > 1.4 * row["exact"]


def test_at_scale_section_recomputed(results):
    """The "At scale" table: grid estimates recomputed through grid_estimate_metrics on the same
    synthetic ranks, the exact values, and the grid-against-dense agreement."""
    from itemsampling.estimators import estimate_metrics
    from itemsampling.estimators.grid import grid_estimate_metrics, rank_grid
    from itemsampling.mapping import sample_beta_ranks

    N, n, M, a = PARAMS["scale_items"], PARAMS["scale_sample_size"], PARAMS["scale_users"], 0.3
    rng = np.random.default_rng([PARAMS["seed"], 4000])
    R = sample_beta_ranks(a, N, M, rng=rng)
    r = sample_ranks(R, N, n, rng=rng)
    rec = results["ch06_scale_estimates"]
    ks = [10, N // n, 10 * N // n]
    assert (results["ch06_scale_K1"], results["ch06_scale_K2"]) == (ks[1], ks[2])
    assert results["ch06_scale_cells"] == rank_grid(N, n, breaks=ks).n_cells
    for label, meth in {"MLE": "mle", "MES": "mes", "BV 0.1": "bv", "MN": "mn", "BV_MES": "bv_mes"}.items():
        out = grid_estimate_metrics(r, N, n, "recall", ks, meth, gamma=0.1)[meth]["recall"]
        for j, k in enumerate(ks):
            assert rec[label][f"Recall@{k:,}"] == pytest.approx(100 * out[j], abs=1e-9), (label, k)
    for k in ks:
        assert rec["exact"][f"Recall@{k:,}"] == pytest.approx(100 * evaluate(R, "recall", k), abs=1e-12)
    rel = max(abs(rec[lab][f"Recall@{k:,}"] / rec["exact"][f"Recall@{k:,}"] - 1)
              for lab in ("MLE", "MES", "BV 0.1", "BV_MES") for k in ks[1:])
    assert results["ch06_scale_relerr_wide"] == pytest.approx(100 * rel, rel=1e-9)
    # the recorded agreement is recomputed, and it is far below the estimators' spread
    Nc = 20_000
    Rc = sample_beta_ranks(a, Nc, 6040, rng=np.random.default_rng([PARAMS["seed"], 4001]))
    rc = sample_ranks(Rc, Nc, 100, rng=np.random.default_rng([PARAMS["seed"], 4002]))
    ks = list(range(1, 101))
    kw = dict(gamma=0.1, eta=0.001, eta_scaling="aaai")
    g = estimate_metrics(rc, Nc, 100, list(LABEL), ks, ["mes", "bv", "mn", "bv_mes"], grid=True, **kw)
    d = estimate_metrics(rc, Nc, 100, list(LABEL), ks, ["mes", "bv", "mn", "bv_mes"], grid=False, **kw)
    diff = max(float(np.max(np.abs(np.asarray(g[m][x]) - d[m][x]))) for m in g for x in LABEL)
    assert results["ch06_scale_check_diff"] == pytest.approx(diff, rel=1e-6)
    assert diff < 1e-5


def test_variance_claim_and_share_at_rank_one(results):
    """The share of users at sampled rank 1 recomputed from the chapter's seeds, and the
    new-vs-BV variance verdict consistent with its pair counts."""
    ranks = load_global_ranks(PARAMS["dataset"], models=PARAMS["models"], rng=PARAMS["seed"])
    N = ranks.n_items
    shares = [np.mean(sample_ranks(ranks[m], N, 100, rng=np.random.default_rng([PARAMS["seed"], i, j])) == 1)
              for i, m in enumerate(PARAMS["models"]) for j in range(PARAMS["n_repeats"])]
    assert results["ch06_share_r1"] == pytest.approx(np.mean(shares), rel=1e-12)
    pairs, hi, lo = results["ch06_var_pairs"], results["ch06_var_higher"], results["ch06_var_lower"]
    assert pairs > 0 and hi + lo <= pairs
    expected = "holds here" if hi == pairs else "does not hold here" if lo == pairs else "holds here only in part"
    assert results["ch06_var_verdict"] == expected


def _holm_signs(diffs, ses, reps):
    """Signs of the differences Holm's step-down rejects at 5 % (t test, reps - 1 degrees of freedom
    below 30 repeats, normal from 30), by hand."""
    def p(d, s):
        if s == 0:
            return 1.0 if d == 0 else 0.0
        return 2 * (stats.t.sf(abs(d / s), reps - 1) if reps < 30 else stats.norm.sf(abs(d / s)))
    pv = [p(d, s) for d, s in zip(diffs, ses)]
    signs = [0] * len(pv)
    for k, i in enumerate(sorted(range(len(pv)), key=lambda i: pv[i])):
        if pv[i] > 0.05 / (len(pv) - k):
            break
        signs[i] = int(np.sign(diffs[i]))
    return signs


def test_winner_order_and_bv_gap_recomputed(results):
    """The findings box's winner order: totals from the per-repeat estimates, neighbours told apart by a
    paired t test over the repeats with Holm; and BV 0.1's estimated gap between the two leaders."""
    models, R = PARAMS["models"], PARAMS["n_repeats"]
    keys = list(results["ch06_winner_counts"])
    per = {}
    for key in keys:
        truth = max(models, key=lambda m: results["ch06_exact"][m][key])
        for meth in results["ch06_winner_counts"][key]:
            est = np.array([results["ch06_estimates"][m][meth][key] for m in models])
            hit = np.array(models)[np.argmax(est, axis=0)] == truth
            per[meth] = per.get(meth, 0) + hit.astype(int)
    totals = results["ch06_winner_totals"]
    assert totals == {meth: int(v.sum()) for meth, v in per.items()}
    # the page's column order (CLS, BV by gamma, then the distribution methods) breaks ties, as in the notebook
    order = sorted(["CLS", "BV 0.1", "BV 0.01", "MLE", "MLE*", "WMLE", "MES"], key=lambda meth: -totals[meth])
    steps = [per[a] - per[b] for a, b in zip(order, order[1:])]
    want = _holm_signs([d.mean() for d in steps], [d.std(ddof=1) / np.sqrt(R) for d in steps], R)
    assert results["ch06_winner_order_strict"] == want
    assert results["ch06_winner_order"].startswith(f"{order[0]} {totals[order[0]]} ")
    assert f"out of {len(keys) * R:,}" in results["ch06_winner_order"]
    lead, second = results["ch06_lead"], results["ch06_second"]
    a = 100 * np.array(results["ch06_estimates"][lead]["BV 0.1"]["10/Recall"])
    b = 100 * np.array(results["ch06_estimates"][second]["BV 0.1"]["10/Recall"])
    gap = results["ch06_bv01_gap"]
    assert gap["exact"] == pytest.approx(100 * (results["ch06_exact"][lead]["10/Recall"]
                                                - results["ch06_exact"][second]["10/Recall"]), abs=1e-10)
    assert gap["bv01"] == pytest.approx(a.mean() - b.mean(), abs=1e-10)
    assert gap["se"] == pytest.approx(np.hypot(a.std(ddof=1), b.std(ddof=1)) / np.sqrt(R), abs=1e-10)


def test_no_verdict_from_a_non_rejection(results):
    """Defect 10 of issue 40: not rejecting an exponent is reported as such, never as 'favours'."""
    for key in ("ch06_eta_intro_text", "ch06_eta_slope_text", "ch06_find_eta"):
        assert "favour" not in results[key]
    assert "cannot tell it apart" in results["ch06_eta_intro_text"] or "rejects the exponents" in results["ch06_eta_intro_text"]
    assert "none" not in results["ch06_var_text"].split()


def _parabola_vertex(x, y):
    """Vertex of the parabola through three points (Lagrange form, unequal spacing)."""
    (x0, x1, x2), (y0, y1, y2) = x, y
    num = (x1 - x0) ** 2 * (y1 - y2) - (x1 - x2) ** 2 * (y1 - y0)
    den = (x1 - x0) * (y1 - y2) - (x1 - x2) * (y1 - y0)
    return x1 - 0.5 * num / den


def test_eta_rule_table_recomputed(results):
    """Table 6.2b: for every model and sample size, MES on the page's seeds at every grid weight and
    at each scaling's weight, through estimate_metric; the best error, the best weight (parabola
    vertex), the excess of each rule, the share at r = 1 and the fitted exponent follow from them."""
    ranks = load_global_ranks(PARAMS["dataset"], models=PARAMS["eta_models"], rng=PARAMS["seed"])
    N, grid, J = ranks.n_items, sorted(PARAMS["eta_grid"]), PARAMS["eta_repeats"]
    table = results["ch06_eta_table"]
    assert len(table) == results["ch06_eta_cells"] == len(PARAMS["eta_models"]) * len(PARAMS["eta_sizes"])
    best_log = {}
    for n in PARAMS["eta_sizes"]:
        rules = {"η(100/n)²": 0.001 * (100 / n) ** 2, "η/n": 0.001 / n, "η fixed": 0.001}
        for i, m in enumerate(PARAMS["eta_models"]):
            ex = np.array([evaluate(ranks[m], met, 10) for met in LABEL])
            samples = [sample_ranks(ranks[m], N, n, rng=np.random.default_rng([PARAMS["seed"], 5000, n, i, j]))
                       for j in range(J)]

            def err(a):
                fits = [estimate_metrics(r, N, n, list(LABEL), 10, ["mes"], eta=a, eta_scaling="aaai")["mes"]
                        for r in samples]
                e = np.array([[f[met] for met in LABEL] for f in fits]) - ex
                return float(np.mean(np.sqrt(np.mean(e ** 2, axis=0)) / ex))

            curve = np.array([err(a) for a in grid])
            row = table[f"{m}/{n}"]
            assert row["best err. (%)"] == pytest.approx(100 * curve.min(), rel=1e-8)
            for lab, a in rules.items():
                assert row[lab] == pytest.approx(100 * (err(a) / curve.min() - 1), rel=1e-6, abs=1e-8), (m, n, lab)
            k = int(np.argmin(curve))
            x = np.log10(grid)
            want = x[k] if k in (0, len(grid) - 1) else _parabola_vertex(x[k - 1:k + 2], curve[k - 1:k + 2])
            assert row["best a"] == pytest.approx(want, abs=1e-9)
            assert x[0] <= row["best a"] <= x[-1]
            assert row["r = 1 (%)"] == pytest.approx(100 * np.mean([np.mean(r == 1) for r in samples]), rel=1e-12)
            best_log[m] = best_log.get(m, []) + [row["best a"]]
    lx = np.log10(PARAMS["eta_sizes"])
    for m, ys in best_log.items():
        assert results["ch06_eta_slopes"][m]["slope"] == pytest.approx(np.polyfit(lx, ys, 1)[0], abs=1e-9)
    assert results["ch06_eta_slope_mean"] == pytest.approx(np.mean([v["slope"] for v in results["ch06_eta_slopes"].values()]))
    # a cost counts where a t test (eta_repeats - 1 degrees of freedom) on the excess rejects, Holm over a
    # rule's cells (a k-of-m count without Holm would count chance rejections)
    for lab, key in (("η(100/n)²", "quadratic"), ("η/n", "tors"), ("η fixed", "aaai")):
        exc = [row[lab] for row in table.values()]
        se = [row[lab + " se"] for row in table.values()]
        assert results[f"ch06_eta_cost_{key}"] == _holm_signs(exc, se, J).count(1)
    # the eta each scaling needs: log10 a* (mean over models) minus log10 of the scaling's factor at n
    factor = {"quadratic": lambda n: (100 / n) ** 2, "tors": lambda n: 1 / n, "aaai": lambda n: 1.0}
    for key, f in factor.items():
        need = [np.mean([table[f"{m}/{n}"]["best a"] for m in PARAMS["eta_models"]]) - np.log10(f(n))
                for n in PARAMS["eta_sizes"]]
        assert results["ch06_eta_implied"][key]["lo"] == pytest.approx(10 ** min(need), rel=1e-9)
        assert results["ch06_eta_implied"][key]["spread_dec"] == pytest.approx(max(need) - min(need), abs=1e-9)


def test_findings_box_sentences(results):
    """Issue 47: the box's bias line gives the mean absolute bias over the cells and their range (defect 20),
    the winner line tests the leader against every other estimator and calls the row count untested
    (defect 22), the entropy line says how many cells the Holm test finds a cost in (P5), and the scale
    line gives the top cut-off's ratios (defect 19)."""
    models = PARAMS["models"]
    est, ex = results["ch06_estimates"], results["ch06_exact"]
    for meth in ("MLE", "MES", "BV 0.1", "CLS"):
        cells = [100 * (np.mean(est[m][meth][f"10/{lab}"]) / ex[m][f"10/{lab}"] - 1)
                 for m in models for lab in LABEL.values() if ex[m][f"10/{lab}"] > 0]
        assert (f"{meth} {np.mean(np.abs(cells)):.1f} ± " in results["ch06_find_bias"]
                and f"(cells from {min(cells):+.0f}% to {max(cells):+.0f}%)" in results["ch06_find_bias"])
    totals = results["ch06_winner_totals"]
    box = results["ch06_find_winner"]
    top = max(totals.values())   # a tie for the most: the page's column order names one of them
    assert any(box.startswith(f"{meth} has the most correct winners, {top} of ") for meth in totals if totals[meth] == top)
    assert "Holm-corrected over the 6 others" in box and "(a count, not tested)" in box
    costs = [results[f"ch06_eta_cost_{k}"] for k in ("quadratic", "tors", "aaai")]
    cells = results["ch06_eta_cells"]
    if not any(costs):
        assert f"finds a cost in none of them for any rule, so {PARAMS['eta_repeats']} repeats cannot rank" \
            in results["ch06_find_eta"]
    else:
        assert all(f"in {c} of {cells}" in results["ch06_find_eta"] for c in costs)
    assert "times it (below one kernel width" in results["ch06_find_scale"]
    rows = {k: v for k, v in results["ch06_scale_estimates"].items() if k not in ("exact", "MN")}
    k0 = "Recall@10"   # the smallest cut-off of the scale table
    top = [row[k0] / results["ch06_scale_estimates"]["exact"][k0] for row in rows.values()]
    assert f"return {min(top):.3f} to {max(top):.3f} times it" in results["ch06_find_scale"]


def test_spread_order_tested_pair_by_pair(results):
    """Issue 47, defect 17: the order of the mean standard deviations of Recall@10 is decided pair by pair
    (t test on adjacent means, standard error sd / sqrt(2 (R - 1)) / sqrt(models), Holm), never typed."""
    models, R = PARAMS["models"], PARAMS["n_repeats"]
    sds = {meth: np.mean([results["ch06_std_at10"][m][meth]["Recall"] for m in models])
           for meth in results["ch06_std_at10"][models[0]]}
    order = sorted(sds, key=sds.get)
    ses = {k: v / np.sqrt(2 * (R - 1)) / np.sqrt(len(models)) for k, v in sds.items()}
    want = _holm_signs([sds[a] - sds[b] for a, b in zip(order, order[1:])],
                       [np.hypot(ses[a], ses[b]) for a, b in zip(order, order[1:])], R)
    seq = order[0] + "".join(f" {'<' if w else '='} {b}" for w, b in zip(want, order[1:]))
    assert results["ch06_spread_order"].startswith(seq + " (adjacent pairs by a t test")
