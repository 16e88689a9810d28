"""Chapter 11 (correcting popularity-sampled evaluations) at small parameters, its recorded numbers
checked against independent computations."""

import dataclasses
import itertools
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from itemsampling.candidates import item_popularity, make_recommender
from itemsampling.data import DATASETS, item_counts, leave_last_out, load_simulation, simulate
from itemsampling.estimators import estimate_metric
from itemsampling.estimators.weighted import draw_weighted_decoys, rank_masks
from itemsampling.run import run_notebook

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "11-popularity-sampled-evaluations.md"
PARAMS = {
    "dataset": "sim-ml100k",
    "models": ["popular", "itemknn"],
    "sample_size": 50,
    "k": 10,
    "n_boot": 20,
    "valid_draws": 2,
    "coverage_repeats": 3,
    "sweep_dataset": "sim-ml100k",
    "sweep_zipfs": [0.0, 1.0],
    "sweep_model": "popular",
    "sweep_datasets": 2,
    "sweep_draws": 1,
    "seed": 3,
}
NAME = {"popular": "Popular", "itemknn": "ItemKNN"}
STRATS = ["uniform", "popularity", "popularity, w/o repl."]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_notebook(NOTEBOOK, PARAMS, out=tmp_path_factory.mktemp("ch11"), progress=False)["results"]


@pytest.fixture(scope="module")
def replay():
    """The chapter's data rebuilt from its seeds: full-ranking masks and the decoy draws."""
    seed, n = PARAMS["seed"], PARAMS["sample_size"]
    sim = load_simulation(PARAMS["dataset"])
    N = sim.config.n_items
    train, test = leave_last_out(sim.observed, rng=np.random.default_rng([seed, 1]))
    pop = item_popularity(train, N)
    out = {}
    for i, m in enumerate(PARAMS["models"]):
        model = make_recommender(m, truth=sim.truth, rng=np.random.default_rng([seed, 2, i])).fit(train, n_items=N)
        above, excluded = rank_masks(model, train, test, rng=np.random.default_rng([seed, 3, i]))
        # tie-free bounds on the rank: strictly higher scores, and higher-or-equal scores
        S = model.score(test["user"].to_numpy())
        t = S[np.arange(len(test)), test["item"].to_numpy()][:, None]
        pool = ~excluded
        out[(m, "bounds")] = (1 + ((S > t) & pool).sum(axis=1), 1 + ((S >= t) & pool).sum(axis=1))
        out[(m, "truth")] = (above, excluded)
        for j, (strat, wts, repl) in enumerate([("uniform", np.ones(N), True), ("popularity", pop, True),
                                               ("popularity, w/o repl.", pop, False)]):
            out[(m, strat)] = draw_weighted_decoys(above, excluded, wts, n - 1, replacement=repl,
                                                   rng=np.random.default_rng([seed, 4, i, j]))
    return out


def _ndcg(R, k):
    R = np.asarray(R, dtype=float)
    return float(np.mean(np.where(R <= k, 1.0 / np.log2(R + 1), 0.0)))


def test_enumeration(results):
    p = np.random.default_rng([PARAMS["seed"], 0]).dirichlet(np.full(6, 0.7))
    A = [0, 2, 3]
    # plain Python over all 6^3 ordered draws with replacement
    ys, ws = [], []
    for d in itertools.product(range(6), repeat=3):
        ws.append(p[d[0]] * p[d[1]] * p[d[2]])
        ys.append(sum(1 / p[i] for i in d if i in A) / 3)
    ws, ys = np.array(ws), np.array(ys)
    mean = ws @ ys
    assert results["ch11_enum_true"] == 3
    assert results["ch11_enum_mean_wr"] == pytest.approx(3.0, abs=1e-12) == pytest.approx(mean)
    assert results["ch11_enum_var_wr"] == pytest.approx(ws @ (ys - mean) ** 2, rel=1e-10)
    assert results["ch11_enum_var_formula"] == pytest.approx(ws @ (ys - mean) ** 2, rel=1e-10)
    assert results["ch11_enum_var_hat_mean"] == pytest.approx(results["ch11_enum_var_wr"], rel=1e-10)
    assert results["ch11_enum_mean_dr"] == pytest.approx(3.0, abs=1e-12)
    assert abs(results["ch11_enum_mean_naive_wor"] - 3.0) > 1e-3


def test_validation_table(results, replay):
    n, k = PARAMS["sample_size"], PARAMS["k"]
    tab = results["ch11_table"]
    assert set(tab) == {f"{NAME[m]}/{s}" for m in PARAMS["models"] for s in STRATS}
    for m in PARAMS["models"]:
        R_opt, R_pess = replay[(m, "bounds")]
        above, excluded = replay[(m, "truth")]
        N_bar = int(round(float((above.shape[1] - excluded.sum(axis=1) + 1).mean())))
        for s in STRATS:
            row = tab[f"{NAME[m]}/{s}"]
            # the exact value lies between the tie-pessimistic and tie-optimistic full rankings
            assert _ndcg(R_pess, k) - 1e-12 <= row["exact"] <= _ndcg(R_opt, k) + 1e-12
            p, a = replay[(m, s)]
            r = 1 + a.sum(axis=1)
            assert row["sampled (uncorrected)"] == pytest.approx(_ndcg(r, k), rel=1e-12)
            assert row["MLE (uniform kernel)"] == pytest.approx(estimate_metric(r, N_bar, n, "ndcg", k, "mle"), rel=1e-9)
            assert 0 <= row["weighted correction"] <= 1
    pop_rows = [f"{NAME[m]}/{s}" for m in PARAMS["models"] for s in STRATS[1:]]
    errs = results["ch11_rel_err_per_draw"]
    naive = [c for c in tab[pop_rows[0]] if "uniform kernel" in c]
    better = 0
    for r in pop_rows:
        for c in tab[r]:
            if c != "exact":   # the first draw is the table's value
                assert len(errs[f"{r}/{c}"]) == PARAMS["valid_draws"]
                assert errs[f"{r}/{c}"][0] == pytest.approx(100 * (tab[r][c] / tab[r]["exact"] - 1), rel=1e-9)
        best = min(naive, key=lambda c: abs(np.mean(errs[f"{r}/{c}"])))
        w, b_ = np.abs(errs[f"{r}/weighted correction"]), np.abs(errs[f"{r}/{best}"])
        t = stats.ttest_rel(w, b_)
        better += bool(t.pvalue < 0.05 and np.mean(w - b_) < 0)
    assert results["ch11_n_better"] == better
    assert results["ch11_n_pop_rows"] == len(pop_rows)
    # the headline of the chapter: on popularity decoys the correction beats the uniform kernel
    assert results["ch11_med_weighted_pop"] < results["ch11_med_naive_pop"]


def test_bounds_coverage_sweep_cli(results, replay):
    for row in results["ch11_bounds"].values():
        assert row["lower bound"] <= row["uniform kernel"] + 1e-9 <= row["upper bound"] + 2e-9
    # Table 11.2 shows the mean estimate over the draws: exact x (1 + mean relative error)
    errs = results["ch11_rel_err_per_draw"]
    for key, row in results["ch11_table_mean"].items():
        for c, v in row.items():
            if c != "exact":
                assert v == pytest.approx(row["exact"] * (1 + np.mean(errs[f"{key}/{c}"]) / 100), rel=1e-9)
    reps = PARAMS["coverage_repeats"]
    hits = results["ch11_coverage_hits"]
    assert set(hits) == {NAME[m] for m in PARAMS["models"]}
    for name, h in hits.items():
        assert len(h) == reps and set(h) <= {0.0, 1.0}
        # per model, no pooling: the coverage is the model's own share, its lowest compatible value the exact
        # one-sided 95% binomial (Clopper-Pearson) bound
        assert results["ch11_coverage"][name] == pytest.approx(np.mean(h), abs=1e-12)
        k_ = int(sum(h))
        low = 0.0 if k_ == 0 else stats.beta.ppf(0.05, k_, reps - k_ + 1)
        assert results["ch11_coverage_lowest"][name] == pytest.approx(low, abs=1e-12)
        if k_ == reps:  # all covered: the bound is 0.05 ** (1 / reps)
            assert low == pytest.approx(0.05 ** (1 / reps), rel=1e-9)
        # the verdict: an exact two-sided binomial test against 95 %, its p value summed by hand
        pmf = [stats.binom.pmf(j, reps, 0.95) for j in range(reps + 1)]
        p_exact = min(1.0, sum(q for q in pmf if q <= pmf[k_] * (1 + 1e-7)))
        v = results["ch11_coverage_verdict"][name]
        assert v["p"] == pytest.approx(p_exact, rel=1e-6)
        assert v["decided"] == (p_exact <= 0.05)
    assert "ch11_coverage_all" not in results
    assert results["ch11_cov_users"] == len(replay[(PARAMS["models"][0], "truth")][0])
    # the Gini index of the dial's datasets (seeds base.seed + d), recomputed from the definition; a point's is their mean
    base = DATASETS[PARAMS["sweep_dataset"]]
    ginis = []
    for z in PARAMS["sweep_zipfs"]:
        g_ = []
        for d in range(PARAMS["sweep_datasets"]):
            cfg = dataclasses.replace(base, zipf=z, seed=base.seed + d)
            x = np.sort(item_counts(simulate(cfg).observed, base.n_items).astype(float))
            i = np.arange(1, x.size + 1)
            g_.append((2 * i - x.size - 1) @ x / (x.size * x.sum()))
        ginis.append(np.mean(g_))
    np.testing.assert_allclose(results["ch11_sweep_gini"], sorted(ginis), rtol=1e-9)
    pts = results["ch11_sweep_points"]
    for z in PARAMS["sweep_zipfs"]:
        pt = pts[f"{z}/weighted correction"]
        assert len(pt["per_dataset"]) == PARAMS["sweep_datasets"]
        x = np.array(pt["per_dataset"])
        h = stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size)
        np.testing.assert_allclose([pt["mean"], pt["low"], pt["high"]], [x.mean(), x.mean() - h, x.mean() + h], rtol=1e-9)
    assert results["ch11_cli_status"] == 0
    assert results["ch11_cli_estimate"] == pytest.approx(results["ch11_cli_api_estimate"], rel=1e-12)
    # issue 40, defect 32: the command's "uniform kernel" is Table 11.3's mean-pool column of the same model
    last = NAME[PARAMS["models"][-1]]
    assert results["ch11_cli_uniform"] == pytest.approx(results["ch11_bounds"][last]["uniform kernel, mean pool"],
                                                        rel=1e-9)
    assert results["ch11_uniform_pool_last"] == results["ch11_bounds"][last]["uniform kernel, mean pool"]
    assert results["ch11_uniform_mle_last"] == results["ch11_table"][f"{last}/popularity"]["MLE (uniform kernel)"]
    p, _ = replay[(PARAMS["models"][-1], "popularity")]
    assert results["ch11_cli_rows"] == p.size == p.shape[0] * (PARAMS["sample_size"] - 1)


def test_the_default_interval_below_the_rule_is_reported(results):
    # K = 10 is below the rule 2 N / (n - 1) at these parameters: the chapter says the default interval is the
    # identification bounds and counts their coverage in the same repeats as the bootstrap's
    N = load_simulation(PARAMS["dataset"]).config.n_items
    hits = results["ch11_default_bounds_hits"]
    assert set(hits) == set(NAME.values())
    assert all(0 <= v <= PARAMS["coverage_repeats"] for v in hits.values())
    text = results["ch11_default_bounds_text"]
    assert "is below the resolution rule" in text and "not this bootstrap but the identification bounds" in text
    import re

    # N is the largest pool (the catalogue less the user's training items), at most the catalogue
    N_pool = int(re.search(r"N = ([\d,]+) the cut-off", text).group(1).replace(",", ""))
    assert PARAMS["sample_size"] < N_pool <= N
    assert f"2N/(n−1) = {2 * N_pool / (PARAMS['sample_size'] - 1):,.0f}," in text
    # the ranks-only bounds keep their own sentence (a glue key of its own)
    assert results["ch11_bounds_text"] != text
