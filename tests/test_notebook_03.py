"""Chapter 3 through the runner at small parameters (sim-ml100k); recorded numbers checked against
independent computations."""

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from itemsampling import experiments as E
from itemsampling.data import dataset_summary, load_dataset
from itemsampling.metrics import evaluate, metric_curve
from itemsampling.ranking import sampled_ranks_explicit
from itemsampling.run import run_notebook
from itemsampling.sampling import sampled_metric_moments

NB = Path(__file__).resolve().parents[1] / "notebooks" / "03-models-and-rank-distributions.md"
DS = "sim-ml100k"
REPEATS = 20
MODELS = ["X", "Y", "Z"]
LABELS = {"Recall@10": ("recall", 10), "NDCG@10": ("ndcg", 10), "AP": ("ap", None), "AP@10": ("ap", 10),
          "AUC": ("auc", None)}
CURVE_MODELS = ["X", "Y", "Z", "popular"]

pytestmark = pytest.mark.notebook


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("ch03")
    params = {"dataset": DS, "n_repeats": REPEATS, "curve_models": CURVE_MODELS,
              "cost_models": ["X", "Z"], "seed": 0}
    return run_notebook(NB, params, out, progress=False)["results"]


@pytest.fixture(scope="module")
def ranks():
    return E.load_global_ranks(DS, ["X", "Y", "Z", "popular"], rng=0, progress=False)


def test_parameters_and_data(results):
    assert results["dataset"] == DS and results["n_repeats"] == REPEATS and results["sample_size"] == 101
    s = dataset_summary(load_dataset(DS))
    assert results["data_summary"]["interactions"] == s["interactions"]
    assert results["data_summary"]["gini"] == pytest.approx(s["gini"])
    assert results["n_items"] == 1682 and results["n_users"] == 943


def test_rank_profiles(results, ranks):
    for m in MODELS:
        R, P = ranks[m], ranks.pool_sizes
        prof = results["rank_profile"][m]
        assert prof["top 10"] == int(np.sum(R <= 10))
        assert prof["top 100"] == int(np.sum(R <= 100))
        assert prof["bottom half of the pool"] == int(np.sum(R > P / 2))
        assert results["recall10_full"][m] == pytest.approx(np.mean(R <= 10))


def _expected_sampled(R, P, metric, k, n=101):
    """Exact E[T^S] with per-user pools, sampling without replacement (the chapter's setting)."""
    total = 0.0
    sq = 0.0
    for N_u in np.unique(P):
        sel = P == N_u
        mean, sd = sampled_metric_moments(R[sel], int(N_u), n, metric, k, replacement=False)
        total += mean * sel.sum()
        sq += (sd * sel.sum()) ** 2  # Var of the group mean times its size squared
    return total / R.size, np.sqrt(sq) / R.size


def test_table3_against_the_kernel(results, ranks):
    t3 = results["table3"]
    for m in MODELS:
        for label, (metric, k) in LABELS.items():
            row = t3[f"{m}|{label}"]
            R, P = ranks[m], ranks.pool_sizes
            if metric == "auc":
                exact = np.mean((P - R) / (P - 1))
            else:
                exact = evaluate(R, metric, k, ranks.n_items)
            assert row["ours exact"] == pytest.approx(100 * exact)
            mean, sd = _expected_sampled(R, P, metric, k)
            assert row["ours E[sampled]"] == pytest.approx(100 * mean, rel=1e-9)
            assert E.expected_sampled_by_pool(R, P, 101, metric, k) == pytest.approx((mean, sd), rel=1e-9)
            # Monte Carlo mean within 4 standard errors; std within 50% of the exact one
            assert abs(row["ours sampled"] - 100 * mean) < 4 * 100 * sd / np.sqrt(REPEATS) + 1e-9
            assert row["ours std"] == pytest.approx(100 * sd, rel=0.5)
            if metric == "recall":  # sampling inflates top-heavy metrics
                assert row["ours sampled"] > 3 * row["ours exact"]


def test_monte_carlo_check_and_its_rerun(results):
    # every recommender is drawn again with another seed; the exact expectations (Eq. 16) hold, so the
    # fresh means sit within a few standard errors of them
    assert results["ch03_mc_rerun_max_z"] < 4
    assert 0 <= results["ch03_mc_rejected"] <= 15
    text = results["ch03_mc_text"]
    assert f"over {REPEATS} repeats" in text
    if results["ch03_mc_rejected"]:
        assert "share its draws" in text and "Drawn again" in text
    # counts read as words at the ends of the scale: no "at most 0 %" / "at least 100 %"
    for key in ("ch03_flip_share_text", "ch03_auc_text"):
        assert "at most 0 %" not in results[key] and "at least 100 %" not in results[key]


def test_table4_consistent_with_expectations(results, ranks):
    """Where the expected sampled metrics of a pair differ by many standard deviations, the sampled
    order is the same in (almost) every repeat: 0% or 100% correct according to whether the
    expected order agrees with the exact one."""
    t4 = results["table4"]
    P = ranks.pool_sizes
    for a, b in (("X", "Y"), ("X", "Z"), ("Y", "Z")):
        for label, (metric, k) in LABELS.items():
            ma, sa = _expected_sampled(ranks[a], P, metric, k)
            mb, sb = _expected_sampled(ranks[b], P, metric, k)
            if metric == "auc":
                ea, eb = np.mean((P - ranks[a]) / (P - 1)), np.mean((P - ranks[b]) / (P - 1))
            else:
                ea, eb = evaluate(ranks[a], metric, k), evaluate(ranks[b], metric, k)
            got = t4[f"{a} vs {b}|{label}"]
            if abs(ma - mb) > 6 * np.hypot(sa, sb):
                assert got == (100.0 if np.sign(ma - mb) == np.sign(ea - eb) else 0.0)
            assert 0 <= got <= 100
    # AUC is consistent: every pair right in every repeat
    assert all(t4[f"{p}|AUC"] == 100.0 for p in ("X vs Y", "X vs Z", "Y vs Z"))


def test_cost_and_explicit_sampling(results):
    cost = results["cost"]
    assert set(cost) == {"X", "Z"}
    # the explicit-decoy draw, redone: refit the models and score the same decoys (same seed)
    train, test, fitted, _ = E.fit_models(DS, ["X", "Z"], 0)
    for m, c in cost.items():
        r = sampled_ranks_explicit(fitted[m], train, test, 101, rng=0, replacement=False)
        assert c["explicit sampled Recall@10"] == pytest.approx(np.mean(r <= 10), abs=1e-12)
    # one explicit-decoy draw agrees with the kernel Monte Carlo mean (z-score of one draw)
    assert results["explicit_vs_kernel_max_abs_z"] < 4.5


def test_curve_kendall_tau_recomputed(results, ranks):
    """The global-vs-sampled order check, recomputed with scipy's Kendall tau on the same draws
    (the chapter draws one sampled rank vector per curve model, in order, from default_rng(seed))."""
    gen = np.random.default_rng(0)
    P = ranks.pool_sizes
    curves = {m: metric_curve(E.sample_pool_ranks(ranks[m], P, 101, gen, False), "recall", np.arange(1, 102), 101)
              for m in CURVE_MODELS}
    taus = results["curve_kendall_tau"]
    assert sorted(int(k) for k in taus) == [1, 5, 10, 20, 50]
    for k, tau in taus.items():
        k = int(k)
        K = int(round(k * ranks.n_items / 101))
        g = [np.mean(ranks[m] <= K) for m in CURVE_MODELS]
        s = [curves[m][k - 1] for m in CURVE_MODELS]
        assert tau == pytest.approx(stats.kendalltau(g, s).statistic, abs=1e-12)
    # Li et al.'s observation: the sampled curve keeps the global order of the models
    assert min(taus.values()) >= 0.6
