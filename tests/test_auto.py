"""method="auto": the choice per metric@K by the plausibility-weighted error over the smooth fits of P(R)
that the data do not reject (a chi-square test; the nonparametric fits as the recorded fallback), the exact errors of
the fixed corrections, its determinism, its record (reasons, errors, tests, skipped candidates), the
refusal of one method's options, the bias margin, and the entry points that take it."""

import numpy as np
import pytest

import itemsampling.estimators.auto as auto_mod
from itemsampling.estimators import (
    AutoEstimate, bootstrap_metric, bootstrap_models, compare_estimates, estimate_metric, estimate_metrics,
)
from itemsampling.estimators.auto import (
    CANDIDATES, FALLBACK_FITS, GAMMA, SMOOTH_FITS, beta_fit, beta_mixture_fit, goodness_of_fit, select_estimators,
)
from itemsampling.mapping import sample_beta_ranks
from itemsampling.metrics import evaluate
from itemsampling.sampling import sample_ranks

pytestmark = pytest.mark.filterwarnings("ignore::itemsampling._validation.ResolutionWarning")

N, n, M = 400, 40, 1500


@pytest.fixture(scope="module")
def data():
    g = np.random.default_rng(3)
    R = sample_beta_ranks(0.4, N, M, rng=g)
    return R, sample_ranks(R, N, n, rng=g)


@pytest.fixture(scope="module")
def auto_est(data):
    return estimate_metric(data[1], N, n, "ndcg", [10, 40], "auto", rng=5, n_sim=4)


def test_record_reasons_errors_and_estimates(data, auto_est):
    _, r = data
    e = auto_est
    assert isinstance(e, AutoEstimate) and e.method == "auto"
    sel = e.selection
    assert sel.candidates == CANDIDATES and sel.n_sim == 4
    # Beta data: the Beta fit is not rejected, and only the smooth fits the test keeps are used
    assert sel.plausibility["beta"]["kept"] and sel.fallback == ""
    assert sel.fits == tuple(f for f in SMOOTH_FITS if sel.plausibility[f]["kept"])
    for j, k in enumerate([10, 40]):
        c = e.chosen[j]
        assert sel.chosen[("ndcg", k)] == c
        assert sel.reason[("ndcg", k)].startswith(f"{c}: smallest plausibility-weighted RMSE")
        errs = sel.rmse[("ndcg", k)]
        assessed = set(CANDIDATES) - ({"cls"} if ("ndcg", k) in sel.screened else set())
        assert set(errs) == assessed and all(set(v) == set(sel.fits) for v in errs.values())
        # the score: the root of the Akaike-weighted mean squared error over the kept fits
        w = {f: sel.plausibility[f]["weight"] for f in sel.fits}
        assert sum(w.values()) == pytest.approx(1.0)
        aic = {f: sel.plausibility[f]["aic"] for f in sel.fits}
        for f in sel.fits:
            assert w[f] / max(w.values()) == pytest.approx(np.exp(-(aic[f] - min(aic.values())) / 2))
        score = {cand: np.sqrt(sum(w[f] * v[f] ** 2 for f in sel.fits)) for cand, v in errs.items()}
        assert score == pytest.approx(sel.score[("ndcg", k)])
        assert score[c] == min(score.values())
        # the estimate is the chosen estimator's own, as the explicit method gives it
        own = estimate_metric(r, N, n, "ndcg", k, c, **({"gamma": GAMMA} if c == "bv" else {}))
        assert e.estimate[j] == pytest.approx(own, rel=1e-12, abs=1e-15)
        assert np.isnan(e.low[j]) and np.isnan(e.high[j])
    d = sel.to_dict()
    assert set(d["choices"]) == {"ndcg@10", "ndcg@40"}


def test_deterministic_given_rng(data, auto_est):
    again = estimate_metric(data[1], N, n, "ndcg", [10, 40], "auto", rng=5, n_sim=4)
    assert list(again.chosen) == list(auto_est.chosen)
    assert again.selection.rmse == auto_est.selection.rmse
    assert np.array_equal(again.estimate, auto_est.estimate)


@pytest.mark.parametrize("opt", [{"gamma": 0.1}, {"eta": 0.01}, {"gamma": 0.1, "eta": 0.01}])
def test_refuses_method_options(data, opt):
    with pytest.raises(ValueError, match="belong to one method") as err:
        estimate_metric(data[1], N, n, "ndcg", 10, "auto", **opt)
    assert all(name in str(err.value) for name in opt)
    with pytest.raises(ValueError, match="belong to one method"):
        estimate_metrics(data[1], N, n, ["ndcg"], 10, ["auto", "mle"], **opt)


def test_widen_only_with_auto(data):
    with pytest.raises(ValueError, match="widen is an option of method .auto. only"):
        estimate_metric(data[1], N, n, "ndcg", 10, "mle", widen=True)


def test_failing_candidate_is_skipped_and_recorded(data, monkeypatch):
    real = auto_mod._estimate

    def failing(r, N_, n_, metrics, ks, method, *a, **kw):
        if method == "mes":
            raise ValueError("MES did not converge (test)")
        return real(r, N_, n_, metrics, ks, method, *a, **kw)

    monkeypatch.setattr(auto_mod, "_estimate", failing)
    sel = select_estimators(data[1], N, n, ["recall"], [10], rng=0, n_sim=3, candidates=("mle", "mes", "cls"))
    assert "mes" not in sel.candidates and "mes" in sel.skipped
    assert "MES did not converge (test)" in sel.skipped["mes"]
    assert sel.chosen[("recall", 10)] in sel.candidates


def test_input_restricts_the_candidates(data):
    R, r = data
    g = np.random.default_rng(1)
    sizes = np.where(np.arange(M) % 2 == 0, 20, n)
    r2 = np.where(sizes == 20, sample_ranks(R, N, 20, rng=g), r)
    e = estimate_metric(r2, N, sizes, "recall", 10, "auto", rng=0)
    assert e.chosen == "mle" and e.selection.candidates == ("mle",)
    assert "per-user sample sizes" in e.selection.reason[("recall", 10)]
    assert e.estimate == pytest.approx(estimate_metric(r2, N, sizes, "recall", 10, "mle"))
    pools = np.where(np.arange(M) % 2 == 0, N - 50, N)
    rp = np.minimum(r, n)
    e = estimate_metric(rp, pools, n, "recall", 10, "auto", rng=0, n_sim=3)
    assert "cls" not in e.selection.candidates and "CLS left out" in e.selection.restricted


def _cell(N_, n_, M_, a, metric, k, reps, candidates):
    """Realised RMSE of each candidate against the users' own metric over ``reps`` data sets drawn
    from the Beta(a) rank model, and auto's pick on each."""
    err = {c: [] for c in candidates}
    picks = []
    for j in range(reps):
        g = np.random.default_rng([j, N_, n_, M_])
        R = sample_beta_ranks(a, N_, M_, rng=g)
        r = sample_ranks(R, N_, n_, rng=g)
        sel = select_estimators(r, N_, n_, [metric], [k], rng=j, candidates=candidates)
        truth = evaluate(R, metric, k)
        for c in candidates:
            err[c].append(sel.estimates[(metric, k)][c] - truth)
        picks.append(sel.chosen[(metric, k)])
    return {c: float(np.sqrt(np.mean(np.square(e)))) for c, e in err.items()}, picks


def test_selection_cls_where_cls_wins():
    """A flat rank model (a = 0.6), one kernel width N/(n-1) = 50 above the cut-off and few users
    (M = 500): the learnt distribution invents the top of the ranking (MLE errs about 100 %), CLS's
    uniform-prior bias is the smaller error, and auto sees it in every data set (validation grid:
    CLS picked in 20 of 20)."""
    rmse, picks = _cell(2450, 50, 500, 0.6, "recall", 10, 4, ("mle", "cls"))
    assert rmse["cls"] < 0.5 * rmse["mle"]
    assert picks == ["cls"] * 4


def test_selection_mle_where_mle_wins():
    """Many users (M = 20,000), a steep rank model and K = 20 above one kernel width (4.1): CLS's
    uniform-prior bias dominates, MLE is nine times more accurate, and auto picks it every time."""
    rmse, picks = _cell(200, 50, 20000, 0.15, "recall", 20, 4, ("mle", "cls"))
    assert rmse["mle"] < 0.25 * rmse["cls"]  # realised: 0.0049 against 0.044
    assert picks == ["mle"] * 4


def test_beta_fit_recovers_the_beta_model():
    from itemsampling.mapping import beta_rank_cdf

    g = np.random.default_rng(0)
    R = sample_beta_ranks(0.4, 2000, 40000, rng=g)
    r = sample_ranks(R, 2000, 50, rng=g)
    P = beta_fit(r, 2000, 50)
    cdf = np.cumsum(P)
    K = np.array([5, 20, 100, 500])
    # Pr(R <= K) of the fitted model against the true Beta(0.4, 1) model, at 40,000 users
    assert np.allclose(cdf[K - 1], beta_rank_cdf(K, 2000, 0.4), atol=0.01)


def test_intervals_entry_points_agree(data):
    _, r = data
    # the chosen estimator's own interval (interval="bootstrap"); the kept one: tests/test_auto_coverage.py
    one = estimate_metric(r, N, n, "recall", 10, "auto", ci=0.9, n_boot=20, rng=2, n_sim=3, interval="bootstrap")
    same = bootstrap_metric(r, N, n, "recall", 10, "auto", ci=0.9, n_boot=20, rng=2, n_sim=3, interval="bootstrap")
    assert (one.estimate, one.low, one.high, one.chosen) == (same.estimate, same.low, same.high, same.chosen)
    assert one.low <= one.estimate <= one.high and one.confidence == 0.9 and one.n_boot == 20
    wide = estimate_metric(r, N, n, "recall", 10, "auto", ci=0.9, n_boot=20, rng=2, n_sim=3, widen=True,
                           interval="bootstrap")
    assert wide.widened and wide.margin == pytest.approx(wide.selection.margin("recall", 10)) and wide.margin > 0
    assert wide.low == pytest.approx(one.low - wide.margin) and wide.high == pytest.approx(one.high + wide.margin)
    test = estimate_metric(r, N, n, "recall", 10, "auto", ci=0.9, n_boot=20, rng=2, n_sim=3, target="test-users",
                           interval="bootstrap")
    assert test.chosen == one.chosen and test.estimate == one.estimate and test.low < test.high


def test_models_and_comparison(data):
    R, r = data
    rb = sample_ranks(R, N, n, rng=9)  # the same users, another draw of decoys: a paired second model
    res = bootstrap_models({"A": r, "B": rb}, N, n, ["recall"], [10], "auto", ci=0.9, n_boot=20, rng=1, n_sim=3)
    a, b = res.estimates["A"]["recall"], res.estimates["B"]["recall"]
    assert list(a.chosen) == list(b.chosen)  # one estimator per metric@K for every model
    c = res.comparisons[("A", "B")]["recall"]
    assert c.method == "auto" and c.difference[0] == pytest.approx(a.estimate[0] - b.estimate[0])
    cmp = compare_estimates(r, rb, N, n, "recall", 10, "auto", ci=0.9, n_boot=20, rng=1, n_sim=3)
    assert cmp.low <= cmp.difference <= cmp.high


def test_command_method_auto(tmp_path, capsys):
    import json

    import pandas as pd

    from itemsampling.cli import main

    R, r = _beta_users(0.4, 300, 400, 30, seed=4)
    rb = sample_ranks(R, 300, 30, rng=5)
    path = tmp_path / "ranks.csv"
    pd.DataFrame({"user": np.tile(np.arange(400), 2), "model": np.repeat(["A", "B"], 400),
                  "rank": np.concatenate([r, rb])}).to_csv(path, index=False)
    args = ["estimate", str(path), "--n-items", "300", "--sample-size", "30", "--metric", "recall", "--k", "10", "50",
            "--n-boot", "20", "--quiet", "--method", "auto"]
    assert main(args + ["--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["method"] == "auto" and set(res["selection"]) == {"A", "B"}
    for row in res["estimates"]:
        assert row["chosen"] in CANDIDATES and row["reason"].startswith(row["chosen"] + ":")
        assert row["low"] <= row["estimate"] <= row["high"]
        # the kept interval (N/(n-1) = 10.3): the identification bounds at K = 10, the bootstrap with its margin at 50
        assert row["interval"] == {10: "bounds", 50: "bootstrap+margin"}[row["k"]]
        assert row["interval_width"] == pytest.approx(row["high"] - row["low"]) and row["interval_reason"]
        assert (row["bias_margin"] > 0) == (row["k"] == 50)
    sel = res["selection"]["A"][0]["choices"]["recall@10"]
    assert sel["interval"]["kind"] == "bounds"
    chosen = {(row["model"], row["k"]): row["chosen"] for row in res["estimates"]}
    assert all(chosen[("A", k)] == chosen[("B", k)] for k in (10, 50))  # one estimator for the comparison
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "method auto chose" in text and text.count("smallest predicted RMSE, worst case over the 2 models") == 4
    assert "intervals of method auto" in text and text.count(": bounds, width") == 2
    assert main(args + ["--gamma", "0.2"]) == 2
    assert "--gamma" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # argparse's own refusal, naming the option and its choices
        main(args[:-2] + ["--interval", "wide"])
    assert "--interval" in capsys.readouterr().err


def _beta_users(a, N_, M_, n_, seed):
    g = np.random.default_rng(seed)
    R = sample_beta_ranks(a, N_, M_, rng=g)
    return R, sample_ranks(R, N_, n_, rng=g)


def test_goodness_of_fit_hand_computed():
    # expected 30, 10, 10 and observed 40, 5, 5: X2 = 100/30 + 25/10 + 25/10, df = 2, p = exp(-X2/2)
    x2, df, p = goodness_of_fit([40, 5, 5], [0.6, 0.2, 0.2], 0)
    assert x2 == pytest.approx(100 / 30 + 5.0) and df == 2 and p == pytest.approx(np.exp(-x2 / 2))
    # pooling: expected 18, 1, 1 -> the last two (2 < 5) join the first cell: one cell, no degree of freedom
    assert goodness_of_fit([20, 0, 0], [0.9, 0.05, 0.05], 0) == (0.0, 0, 1.0)
    # expected 10, 2, 3, 5 -> cells (10), (2 + 3 = 5), (5): observed 12, 0 + 6, 2
    x2, df, _ = goodness_of_fit([12, 0, 6, 2], [0.5, 0.1, 0.15, 0.25], 1)
    assert x2 == pytest.approx(4 / 10 + 1 / 5 + 9 / 5) and df == 1


def test_linear_errors_exact_against_simulation():
    """The fixed corrections' bias and RMSE in closed form agree with a direct simulation."""
    N_, n_, M_ = 300, 20, 150
    P = auto_mod._beta_masses(0.5, 2.0, N_, None, 0.5)
    P = P / P.sum()
    rmse, bias = auto_mod._linear_exact(P, N_, n_, ["ndcg", "recall"], [5, 30], "bv", {"gamma": GAMMA}, True, M_)
    Fh = auto_mod._linear_vectors(N_, n_, ["ndcg", "recall"], [5, 30], "bv", {"gamma": GAMMA}, None)
    g = np.random.default_rng(0)
    err = []
    for _ in range(3000):
        R = 1 + g.choice(N_, size=M_, p=P)
        r = sample_ranks(R, N_, n_, rng=g)
        h = np.bincount(r, minlength=n_ + 1)[1:]
        est = np.einsum("r,rmk->mk", h, Fh) / M_
        err.append(est - np.array([[evaluate(R, m, k) for k in [5, 30]] for m in ["ndcg", "recall"]]))
    err = np.array(err)
    assert np.allclose(np.sqrt(np.mean(err ** 2, axis=0)), rmse, rtol=0.05)
    assert np.allclose(err.mean(axis=0), bias, atol=4 * err.std(axis=0).max() / np.sqrt(3000))


def _step_users(N_, M_, n_, seed):
    g = np.random.default_rng(seed)
    top = g.random(M_) < 0.4
    R = np.where(top, g.integers(1, N_ // 50 + 1, M_), sample_beta_ranks(0.6, N_, M_, rng=g))
    return R, sample_ranks(R, N_, n_, rng=g)


def test_step_model_rejects_one_beta_keeps_the_mixture():
    _, r = _step_users(2000, 5000, 50, 0)
    sel = select_estimators(r, 2000, 50, ["recall"], [10], rng=0, n_sim=3)
    assert not sel.plausibility["beta"]["kept"] and sel.plausibility["beta"]["p"] < 1e-6
    assert sel.plausibility["beta2"]["kept"] and sel.fits == ("beta2",)
    P = beta_mixture_fit(r, 2000, 50)
    assert P.shape == (2000,) and P.sum() == pytest.approx(1.0)
    assert P[:40].sum() == pytest.approx(0.4 + 0.6 * (40 / 2000) ** 0.6, abs=0.1)  # the step's mass


def test_fallback_to_nonparametric_fits_is_recorded(data, monkeypatch):
    monkeypatch.setattr(auto_mod, "GOF_LEVEL", 1.0 + 1e-9)  # every smooth fit rejected
    sel = select_estimators(data[1], N, n, ["recall"], [10], rng=0, n_sim=3)
    assert sel.fits == FALLBACK_FITS and "every smooth fit was rejected" in sel.fallback
    assert "fallback" in sel.reason[("recall", 10)] and sel.to_dict()["fallback"] == sel.fallback


def test_cls_screened_by_bv(data, monkeypatch):
    """CLS (seconds per metric@K at N in the thousands) is assessed only where BV's score is within
    CLS_SCREEN times the best; the screening is recorded, and assessed CLS is scored as the others."""
    monkeypatch.setattr(auto_mod, "CLS_SCREEN", 0.0)
    sel = select_estimators(data[1], N, n, ["recall", "ndcg"], [10], rng=0, n_sim=3)
    assert set(sel.screened) == {("recall", 10), ("ndcg", 10)}
    assert all("cls" not in sel.rmse[mk] and sel.chosen[mk] != "cls" for mk in sel.chosen)
    assert all("cls not assessed" in sel.reason[mk] for mk in sel.chosen)
    monkeypatch.setattr(auto_mod, "CLS_SCREEN", np.inf)
    again = select_estimators(data[1], N, n, ["recall", "ndcg"], [10], rng=0, n_sim=3)
    assert not again.screened and all(set(again.rmse[mk]) == set(CANDIDATES) for mk in again.chosen)
    for mk in again.chosen:  # the same draws: the other candidates' errors are unchanged
        assert all(again.rmse[mk][c] == sel.rmse[mk][c] for c in ("mle", "bv"))
        assert again.estimates[mk]["cls"] == pytest.approx(estimate_metric(data[1], N, n, mk[0], mk[1], "cls"))


def test_bias_margins_of_a_fixed_method(data):
    """bias_margins (the margin interval="kept" adds above the rule for every method): BV's is the largest
    absolute bias under the kept fits that the full selection computes for BV among the candidates (closed
    forms of the kernel: no simulation noise); MLE's is positive and reproducible from its seed; methods
    outside MARGIN_METHODS, options of their own and inputs a method cannot take give none."""
    from itemsampling.estimators.auto import MARGIN_METHODS, bias_margins

    r = data[1]
    ks = [25, 40]  # above the rule 2 x 400/39 = 20.5
    sel = select_estimators(r, N, n, ["recall", "ndcg"], ks, rng=0, n_sim=3, candidates=("mle", "bv"))
    bv = bias_margins(r, N, n, ["recall", "ndcg"], ks, "bv", {"gamma": 0.1}, rng=0)
    assert set(bv) == {(m, k) for m in ("recall", "ndcg") for k in ks}
    for mk, v in bv.items():
        assert v == pytest.approx(max(abs(b) for b in sel.bias[mk]["bv"].values()), rel=1e-9, abs=1e-12)
        assert v > 0
    mle = bias_margins(r, N, n, ["recall"], [25], "mle", {}, rng=3)
    assert mle[("recall", 25)] > 0 and mle == bias_margins(r, N, n, ["recall"], [25], "mle", {}, rng=3)
    assert "mle" in MARGIN_METHODS and "wmle" not in MARGIN_METHODS
    assert bias_margins(r, N, n, ["recall"], [25], "wmle", {}, rng=0) == {}
    assert bias_margins(r, N, n, ["recall"], [25], "bv", {"gamma": 0.5}, rng=0) == {}
    assert bias_margins(r, N, n, ["recall"], [25], "mes", {"eta": 0.5}, rng=0) == {}
    pools = np.full(r.size, N)
    pools[::2] = N - 20
    assert bias_margins(r, pools, n, ["recall"], [25], "cls", {}, rng=0) == {}
    sizes = np.where(np.arange(r.size) % 2 == 0, n, 2 * n)  # per-user sample sizes: MLE alone takes them
    assert bias_margins(r, N, sizes, ["recall"], [25], "mes", {}, rng=0) == {}
