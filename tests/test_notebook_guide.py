"""The guide "Correcting your own evaluation" at small parameters: the command's numbers on the
file the page writes, and one cell of the decision table, recomputed through the public API."""

from pathlib import Path

import numpy as np
import pytest

from itemsampling.estimators import corrected_estimate, corrected_metrics, estimate_metrics
from itemsampling.estimators.bootstrap import bootstrap_models
from itemsampling.mapping import sample_beta_ranks
from itemsampling.metrics import evaluate
from itemsampling.run import run_notebook
from itemsampling.sampling import sample_ranks

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "guide-correcting-your-evaluation.md"
PARAMS = {"n_items": 300, "sample_size": 30, "n_users": 150, "beta_a": {"A": 0.3, "B": 0.6},
          "metrics": ["ndcg", "recall"], "cutoffs": [5, 10], "n_boot": 20,
          "grid_items": [300], "grid_sizes": [30], "grid_users": [150], "grid_a": [0.3, 0.6], "grid_ks": [5, 10],
          "grid_repeats": 2, "seed": 4,
          "plan_items": 300, "plan_users": 200, "plan_margin": 0.05, "plan_sizes": [20], "plan_sim": 5,
          "plan_runs": 10, "cov_studies": 4, "cov_boot": 10,
          "weighted_models": ["popular", "itemknn"], "weighted_draws": 3, "weighted_repeats": 4}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_notebook(NOTEBOOK, PARAMS, out=tmp_path_factory.mktemp("guide"), progress=False)["results"]


def _file_ranks():
    """The example file, regenerated from the page's seeds."""
    out = {}
    for i, (model, a) in enumerate(PARAMS["beta_a"].items()):
        g = np.random.default_rng([PARAMS["seed"], i])
        R = sample_beta_ranks(a, PARAMS["n_items"], PARAMS["n_users"], rng=g)
        out[model] = (R, sample_ranks(R, PARAMS["n_items"], PARAMS["sample_size"], rng=g))
    return out


def test_command_estimates(results):
    N, n = PARAMS["n_items"], PARAMS["sample_size"]
    rows = results["guide_estimates"]
    assert len(rows) == 2 * 2 * 2  # models x metrics x cut-offs
    cover = 0
    files = _file_ranks()
    # the command's bootstrap: one set of replicates per model, models on the same users resampled
    # jointly (bootstrap_models with default_rng([seed, 0]))
    shared = bootstrap_models({m: r for m, (R, r) in files.items()}, N, n, PARAMS["metrics"], PARAMS["cutoffs"],
                              "mle", n_boot=PARAMS["n_boot"], rng=np.random.default_rng([PARAMS["seed"], 0]),
                              paired=True)
    for i, (model, (R, r)) in enumerate(files.items()):
        e = shared.estimates[model]
        for metric in PARAMS["metrics"]:
            mine = [x for x in rows if x["model"] == model and x["metric"] == metric]
            np.testing.assert_allclose([x["estimate"] for x in mine], e[metric].estimate, rtol=1e-10)
            np.testing.assert_allclose([x["low"] for x in mine], e[metric].low, rtol=1e-10)
            np.testing.assert_allclose([x["sampled"] for x in mine],
                                       [evaluate(r, metric, k, n_items=n) for k in PARAMS["cutoffs"]], rtol=1e-12)
            for x in mine:
                cover += x["low"] <= evaluate(R, metric, x["k"]) <= x["high"]
    assert results["guide_n_cover"] == cover and results["guide_n_intervals"] == len(rows)
    comps = results["guide_comparisons"]
    assert len(comps) == 4 and all(c["paired"] for c in comps)
    assert results["guide_n_apart"] == sum(c["low"] > 0 or c["high"] < 0 for c in comps)


def test_decision_cell(results):
    """The grid cells (one per Beta rank model), recomputed: relative RMSE (%) averaged over Recall@K
    and NDCG@K at every K of grid_ks; the counts glued in the prose follow from them."""
    N, n, M = PARAMS["grid_items"][0], PARAMS["grid_sizes"][0], PARAMS["grid_users"][0]
    metrics, ks = ["recall", "ndcg"], PARAMS["grid_ks"]
    bv = corrected_metrics(metrics, ks, N, n, "bv", gamma=0.1)
    bests = []
    for ia, a in enumerate(PARAMS["grid_a"]):
        errs = {"MLE": [], "BV 0.1": [], "sampled": []}
        exact_all = []
        for j in range(PARAMS["grid_repeats"]):
            g = np.random.default_rng([PARAMS["seed"], N, n, M, j, ia])
            R = sample_beta_ranks(a, N, M, rng=g)
            r = sample_ranks(R, N, n, rng=g)
            exact = np.array([evaluate(R, m, k) for m in metrics for k in ks])
            exact_all.append(exact)
            mle = estimate_metrics(r, N, n, metrics, ks, ["mle"])["mle"]
            errs["MLE"].append(np.concatenate([mle[m] for m in metrics]) - exact)
            errs["BV 0.1"].append(np.asarray(corrected_estimate(r, bv.reshape(n, -1))) - exact)
            errs["sampled"].append(np.array([evaluate(r, m, k, n_items=n) for m in metrics for k in ks]) - exact)
        scale = np.mean(exact_all, axis=0)
        cell = results["guide_grid"][f"{a:g}/{N}/{n}/{M}"]
        for name, e in errs.items():
            want = 100 * np.mean(np.sqrt(np.mean(np.array(e) ** 2, axis=0)) / scale)
            assert cell[name] == pytest.approx(want, rel=1e-9), name
        bests.append(min((v, k) for k, v in cell.items() if k != "sampled")[1])
    assert results["guide_cells"] == len(PARAMS["grid_a"])
    assert results["guide_learnt_best"] == sum(b in ("MLE", "MES", "MN_MLE") for b in bests)
    assert results["guide_default_best"] == sum(b == "MLE" for b in bests)
    assert results["guide_settings"] == 1
    assert results["guide_best_same_a"] == int(len(set(bests)) == 1)
    assert 0 <= results["guide_decided"] <= results["guide_cells"]
    assert 0 <= results["guide_best_same_k"] <= results["guide_cells"]
    assert results["guide_best_err_smallM_lo"] == pytest.approx(min(
        min(v for k, v in results["guide_grid"][f"{a:g}/{N}/{n}/{M}"].items() if k != "sampled")
        for a in PARAMS["grid_a"]))


def test_planning_section(results):
    """The plan on the page is plan_evaluation's for the page's parameters; every design of it is in
    the predicted-vs-realised table, and the counts glued in the prose are the table's."""
    from itemsampling.plan import plan_evaluation

    plan = plan_evaluation(PARAMS["plan_items"], PARAMS["plan_users"], "recall", 10, margin=PARAMS["plan_margin"],
                           rng=PARAMS["seed"], prior=(0.5, 3.0), sizes=PARAMS["plan_sizes"], n_sim=PARAMS["plan_sim"])
    table = results["guide_plan_table"]
    assert results["guide_plan_designs"] == len(plan.designs) == len(table)
    want = sorted((d.label, d.half_width) for d in plan.designs)
    got = sorted((row["design"], row["predicted"]) for row in table)
    assert [w[0] for w in want] == [x[0] for x in got]
    np.testing.assert_allclose([w[1] for w in want], [x[1] for x in got], rtol=1e-12)
    verdicts = [row["within 25%"] for row in table]
    assert results["guide_plan_n_within"] == verdicts.count("yes")
    assert results["guide_plan_n_reach"] == verdicts.count("within its interval")
    assert results["guide_plan_n_off"] == verdicts.count("no")
    full = [row for row in table if row["design"].startswith("full ranking")]
    assert full[0]["predicted"] == 0 == full[0]["realised"]


def test_coverage_study_of_both_targets(results):
    """Table G.2b recomputed through the public API from the page's seeds: each target's interval
    against its own truth (population NDCG@10 from 2,000,000 draws; the study's users' own)."""
    from itemsampling.estimators import estimate_metric

    N, n, M = PARAMS["n_items"], PARAMS["sample_size"], PARAMS["n_users"]
    a = PARAMS["beta_a"]["A"]
    g = np.random.default_rng([PARAMS["seed"], 99])
    pop = evaluate(sample_beta_ranks(a, N, 2_000_000, rng=g), "ndcg", 10)
    hits = {"population": 0, "test-users": 0}
    widths = {"population": [], "test-users": []}
    for _ in range(PARAMS["cov_studies"]):
        R = sample_beta_ranks(a, N, M, rng=g)
        r = sample_ranks(R, N, n, rng=g)
        for target in hits:
            e = estimate_metric(r, N, n, "ndcg", 10, "mle", ci=0.95, n_boot=PARAMS["cov_boot"], rng=g, target=target)
            hits[target] += e.low <= (pop if target == "population" else evaluate(R, "ndcg", 10)) <= e.high
            widths[target].append(e.high - e.low)
    assert results["guide_cov_pop"] == hits["population"] / PARAMS["cov_studies"]
    assert results["guide_cov_test"] == hits["test-users"] / PARAMS["cov_studies"]
    assert results["guide_cov_width_ratio"] == pytest.approx(np.mean(widths["test-users"]) / np.mean(widths["population"]))
    assert results["guide_cov_se"] == pytest.approx(np.sqrt(0.95 * 0.05 / PARAMS["cov_studies"]))


def test_convention_1_limits_are_computed(results):
    """Convention 1's limits of the popularity correction: the rows whose whole 95 % t interval of the relative error
    (over the draws) lies beyond the threshold, and each model's coverage by the exact binomial test, recomputed from
    the recorded draws and hits; and the first draw of each row is the weighted correction on the page's seeds."""
    from scipy import stats

    from itemsampling.candidates import draw_weighted_decoys, item_popularity, make_recommender, rank_masks
    from itemsampling.data import leave_last_out, load_simulation
    from itemsampling.estimators import estimate_metric_weighted

    errs = results["guide_weighted_errors"]
    models, draws = ["popular", "itemknn"], 3
    assert sorted(errs) == sorted(f"{m}/{d}" for m in models for d in ("with_replacement", "successive"))
    beyond = 0
    for e in errs.values():
        e = np.asarray(e)
        assert e.size == draws
        h = stats.t.ppf(0.975, draws - 1) * e.std(ddof=1) / np.sqrt(draws)
        beyond += bool(e.mean() - h > 20 or e.mean() + h < -20)
    assert results["guide_weighted_rows_beyond"] == beyond and results["guide_weighted_rows"] == 4
    text = results["guide_weighted_limits"]
    assert f"in {beyond} of 4 rows" in text
    for m in models:
        hits = results["guide_weighted_hits"][m]
        assert len(hits) == 4 and results["guide_weighted_coverage"][m] == np.mean(hits)
        p = stats.binomtest(int(sum(hits)), 4, 0.95).pvalue
        assert f"{m} covers its truth in {int(sum(hits))} of 4 repeats" in text and f"p = {p:.2g}" in text
    # the first draw of the Popular / with-replacement row, replayed from the page's seeds
    seed, n = PARAMS["seed"], PARAMS["sample_size"]
    sim = load_simulation("sim-ml100k")
    N = sim.config.n_items
    train, test = leave_last_out(sim.observed, rng=np.random.default_rng([seed, 11]))
    model = make_recommender("popular", rng=np.random.default_rng([seed, 12, 0])).fit(train, n_items=N)
    above, excl = rank_masks(model, train, test, rng=np.random.default_rng([seed, 13, 0]))
    exact = evaluate(1 + above.sum(axis=1), "ndcg", 10)
    assert results["guide_weighted_exact"]["popular"] == pytest.approx(exact, rel=1e-12)
    N_bar = int(round(float((N - excl.sum(axis=1) + 1).mean())))
    p_, a_ = draw_weighted_decoys(above, excl, item_popularity(train, N), n - 1, replacement=True,
                                  rng=np.random.default_rng([seed, 14, 0, 0, 0]))
    first = 100 * (estimate_metric_weighted(p_, a_, N_bar, "ndcg", 10) / exact - 1)
    assert errs["popular/with_replacement"][0] == pytest.approx(first, rel=1e-9)
