"""The one interval policy (itemsampling.estimators.policy): the rule, its application by the API and the
command, the comparisons it decides, the tables of every design read by `estimate` at its defaults, the
coverage of the identified adaptive intervals, and the checks of every interval argument."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import special, stats

from itemsampling.cli import main
from itemsampling.estimators import (
    apply_interval_policy, difference_interval, estimate_metric, estimate_metrics, identification_bounds,
    interval_policy, is_full_ranking,
)
from itemsampling.metrics import metric_function
from itemsampling.sampling import adaptive_sample_ranks, sample_ranks


def _run(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _beta(N, a, b=2.0):
    R = np.arange(1, N + 1)
    return np.diff(special.betainc(a, b, np.r_[0.0, R / N]))


def _table(design, M=400, N=300, seed=0, models=(("A", 0.25), ("B", 0.6)), n=40, n0=8, nmax=128):
    """A table as itemsampling.evaluation.sampled_ranks writes it (model, user, item, rank, sample_size,
    n_items), built directly: per-user pools, the same users for every model."""
    g = np.random.default_rng(seed)
    pools = N - g.integers(0, N // 5, size=M)
    frames, truth = [], {}
    for name, a in models:
        t = g.beta(a, 2.0, size=M)
        R = 1 + np.floor(t * (pools - 1)).astype(np.int64)
        theta = (R - 1) / (pools - 1)
        if design == "full":
            r, s = R, pools
        elif design == "fixed":
            r, s = 1 + g.binomial(n - 1, theta), np.full(M, n)
        else:  # TORS Algorithm 1 with replacement, each user in its own pool
            r, s = 1 + g.binomial(n0 - 1, theta), np.full(M, n0)
            size = n0
            while size < nmax:
                act = np.flatnonzero(r == 1)
                r[act] = 1 + g.binomial(size, theta[act])
                size *= 2
                s[act] = size
        frames.append(pd.DataFrame({"model": name, "user": np.arange(M), "item": 0, "rank": r, "sample_size": s,
                                    "n_items": pools}))
        truth[name] = R
    return pd.concat(frames, ignore_index=True), truth


# ---------------------------------------------------------------------------------------------
# the rule
# ---------------------------------------------------------------------------------------------
def test_interval_policy_is_a_rule_of_the_design():
    # N = 400, n = 40: the rule K >= 2 x 400/39 = 20.5
    rules = interval_policy(400, 40, [10, 30, None], "mle")
    assert [rules[k].kind for k in (10, 30, None)] == ["bounds", "bootstrap+margin", "bootstrap+margin"]
    assert [rules[k].identified for k in (10, 30, None)] == [False, True, True]
    assert not rules[10].needs_bootstrap and rules[30].needs_bootstrap
    # a full ranking (sample_size == n_items, per user too): the plain mean, identified at every K
    pools = np.array([300, 280, 290])
    assert is_full_ranking(pools, pools.copy()) and not is_full_ranking(pools, np.array([300, 280, 100]))
    full = interval_policy(pools, pools, [1, 10], "bv")
    assert {r.kind for r in full.values()} == {"full"} and all(r.identified for r in full.values())
    # the uncorrected metric and the bootstrap on request: the bootstrap, identification as the rule says
    assert interval_policy(400, 40, [10], "sampled")[10].kind == "bootstrap"
    b = interval_policy(400, 40, [10, 30], "mle", "bootstrap")
    assert [b[k].kind for k in (10, 30)] == ["bootstrap", "bootstrap"] and not b[10].identified
    # per-user sizes (adaptive): the largest n_u counts
    ad = interval_policy(400, np.array([10, 20, 160]), [4, 10], "mle")
    assert ad[4].kind == "bounds" and ad[10].kind == "bootstrap+margin"  # 2 x 400/159 = 5.03
    with pytest.raises(ValueError, match="interval"):
        interval_policy(400, 40, [10], "mle", "wide")


def test_difference_interval_decides_whenever_it_excludes_zero():
    a = {"low": 0.30, "high": 0.40, "interval": "bounds", "identified": False}
    b = {"low": 0.05, "high": 0.20, "interval": "bounds", "identified": False}
    d = difference_interval(a, b, np.nan, np.nan, 0.95)
    assert (d["low"], d["high"]) == pytest.approx((0.10, 0.35)) and d["decides"]
    assert d["level"] == pytest.approx(0.90) and d["interval"] == "bounds"
    d = difference_interval(a, {**b, "high": 0.31}, np.nan, np.nan, 0.95)
    assert d["low"] == pytest.approx(-0.01) and not d["decides"]
    # both identified with margins: the bootstrap of the difference widened by the two margins, at ci
    m1 = {"low": 0.3, "high": 0.4, "interval": "bootstrap+margin", "bias_margin": 0.01, "identified": True}
    m2 = {"low": 0.2, "high": 0.3, "interval": "bootstrap+margin", "bias_margin": 0.02, "identified": True}
    d = difference_interval(m1, m2, 0.02, 0.12, 0.95)
    assert (d["low"], d["high"], d["level"]) == pytest.approx((-0.01, 0.15, 0.95)) and not d["decides"]
    d = difference_interval(m1, m2, 0.05, 0.12, 0.95)
    assert d["low"] == pytest.approx(0.02) and d["decides"] and d["interval"] == "bootstrap+margin"
    # a plain bootstrap below the rule (asked for) does not cover the bias: it never decides
    p1 = {"low": 0.3, "high": 0.4, "interval": "bootstrap", "identified": False}
    assert not difference_interval(p1, p1, 0.05, 0.12, 0.95)["decides"]


# ---------------------------------------------------------------------------------------------
# the API
# ---------------------------------------------------------------------------------------------
def test_full_ranking_is_the_plain_mean_with_the_user_bootstrap():
    t, truth = _table("full", M=300)
    d = t[t.model == "A"]
    e = estimate_metrics(d["rank"].to_numpy(), d.n_items.to_numpy(), d.sample_size.to_numpy(), ["recall", "ndcg"],
                         [5, 20], ["mle", "bv"], ci=0.9, n_boot=40, rng=0, gamma=0.1)
    R = truth["A"]
    for meth in ("mle", "bv"):
        for m in ("recall", "ndcg"):
            x = e[meth][m]
            exact = [np.mean(metric_function(m, k, 300)(R)) for k in (5, 20)]
            np.testing.assert_allclose(x.estimate, exact, rtol=1e-12)
            assert list(x.interval) == ["full", "full"] and all(x.identified)
            assert np.all(x.low <= x.estimate) and np.all(x.estimate <= x.high) and np.all(x.high > x.low)


def test_adaptive_pools_get_the_margin_and_the_bounds():
    t, _ = _table("adaptive", M=400)
    d = t[t.model == "A"]
    r, pools, n = d["rank"].to_numpy(), d.n_items.to_numpy(), d.sample_size.to_numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e = estimate_metric(r, pools, n, "recall", [2, 10, 20], "mle", ci=0.9, n_boot=30, rng=2)
        plain = estimate_metric(r, pools, n, "recall", [10, 20], "mle", ci=0.9, n_boot=30, rng=2,
                                interval="bootstrap")
        b = identification_bounds(r, pools, n, ["recall"], [2], 0.9)
    # the rule: K >= 2 x max N_u / (n_max - 1) = 2 x 300/127 = 4.7
    assert list(e.interval) == ["bounds", "bootstrap+margin", "bootstrap+margin"]
    assert list(e.identified) == [False, True, True]
    assert (e.low[0], e.high[0]) == pytest.approx((b.low["recall"][0], b.high["recall"][0]))
    assert np.all(e.margin[1:] > 0) and e.margin[0] == 0
    # the margin widens the estimator's own bootstrap at both ends (the same replicates)
    np.testing.assert_allclose(e.low[1:], plain.low - e.margin[1:], atol=1e-12)
    np.testing.assert_allclose(e.high[1:], plain.high + e.margin[1:], atol=1e-12)
    assert not np.any(e.impossible)


def test_apply_interval_policy_is_what_the_api_returns():
    g = np.random.default_rng(3)
    N, n, M = 400, 40, 600
    R = 1 + g.choice(N, size=M, p=_beta(N, 0.4))
    r = sample_ranks(R, N, n, rng=g)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e = estimate_metric(r, N, n, "ndcg", [10, 30], "mle", ci=0.9, n_boot=30, rng=1, interval="bootstrap")
        kept = estimate_metric(r, N, n, "ndcg", [10, 30], "mle", ci=0.9, n_boot=30, rng=1)
        again = apply_interval_policy({"mle": {"ndcg": e}}, r, N, n, [10, 30], 0.9, rng=1)["mle"]["ndcg"]
    np.testing.assert_allclose([again.low, again.high], [kept.low, kept.high], atol=1e-12)
    assert list(again.interval) == list(kept.interval) == ["bounds", "bootstrap+margin"]


def test_an_impossible_point_estimate_is_flagged():
    g = np.random.default_rng(5)
    N, n, M = 300, 20, 500
    R = 1 + g.choice(N, size=M, p=_beta(N, 0.3))
    r = sample_ranks(R, N, n, rng=g)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e = estimate_metric(r, N, n, "recall", 10, "bv", ci=0.95, n_boot=20, rng=0, gamma=0.0)
        w = estimate_metric(r, N, n, "recall", 10, "wmle", ci=0.95, n_boot=20, rng=0)
        ok = estimate_metric(r, N, n, "recall", 10, "mle", ci=0.95, n_boot=20, rng=0)
    # BV with gamma = 0 (least squares) below the rule: a recall above 1 (outside the metric's range too)
    assert e.interval == "bounds" and e.estimate > 1 and e.impossible is True
    # WMLE's extrapolation: a recall no rank distribution the data allow gives
    assert w.interval == "bounds" and w.estimate > w.high and w.impossible is True
    assert ok.impossible is False and ok.low <= ok.estimate <= ok.high


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, None, "20"])
def test_n_boot_is_checked_whether_or_not_a_bootstrap_runs(bad):
    r = np.array([1, 2, 3, 5, 8, 1, 2])
    # every cut-off below the rule (no bootstrap runs), and no ci at all: n_boot is still checked
    for ci in (0.95, None):
        with pytest.raises(ValueError, match="n_boot"):
            estimate_metric(r, 1000, 10, "recall", 5, "mle", ci=ci, n_boot=bad)
        with pytest.raises(ValueError, match="n_boot"):
            estimate_metrics(r, 1000, 10, ["recall"], 5, ["mle"], ci=ci, n_boot=bad)


@pytest.mark.parametrize("bad", [[0.95], 1.0, 0, "0.95", True, float("nan")])
def test_ci_is_refused_naming_it(bad):
    r = np.array([1, 2, 3, 5, 8, 1, 2])
    with pytest.raises(ValueError, match="ci must be a confidence level"):
        estimate_metric(r, 1000, 10, "recall", 5, "mle", ci=bad)
    with pytest.raises(ValueError, match="rng"):
        estimate_metric(r, 1000, 10, "recall", 5, "mle", rng=-3)
    with pytest.raises(ValueError, match="target"):
        estimate_metric(r, 1000, 10, "recall", 5, "mle", target="users")


# ---------------------------------------------------------------------------------------------
# the command: every design's table at the defaults
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("design", ["full", "fixed", "adaptive"])
def test_every_design_round_trips_through_estimate_defaults(design, tmp_path, capsys):
    t, truth = _table(design, M=300)
    path = tmp_path / f"{design}.csv"
    t.to_csv(path, index=False)
    code, out, err = _run(["estimate", path, "--k", 2, 10, 20, "--n-boot", 20, "--json", "--quiet"], capsys)
    assert code == 0, err
    res = json.loads(out)
    assert res["design"] == design
    rows = {(x["model"], x["metric"], x["k"]): x for x in res["estimates"]}
    for x in rows.values():
        assert x["low"] <= x["high"] and x["design"] == design and "impossible" not in x
    if design == "full":  # the plain mean, identified, the user bootstrap
        for (m, metric, k), x in rows.items():
            assert x["interval"] == "full" and x["identified"] is True and x["bias_margin"] == 0
            assert x["estimate"] == pytest.approx(np.mean(metric_function(metric, k, 300)(truth[m])), rel=1e-12)
    elif design == "fixed":  # 2 x 300/39 = 15.4: K = 2, 10 bounds, K = 20 the margin
        assert {x["interval"] for (_, _, k), x in rows.items() if k < 15} == {"bounds"}
        assert {x["interval"] for (_, _, k), x in rows.items() if k == 20} == {"bootstrap+margin"}
    else:  # 2 x 300/127 = 4.7: K = 2 bounds, K = 10, 20 the margin
        assert {x["interval"] for (_, _, k), x in rows.items() if k == 2} == {"bounds"}
        assert all(x["interval"] == "bootstrap+margin" and x["bias_margin"] > 0 and x["identified"]
                   for (_, _, k), x in rows.items() if k >= 10)
    for c in res["comparisons"]:
        assert c["paired"] is True and c["level"] in (0.95, pytest.approx(0.90))
        if c["p_value"] is None:
            assert isinstance(c["p_value_reason"], str) and c["p_value_reason"]
        else:
            assert c["interval"] == "bootstrap" and 0 <= c["p_value"] <= 1
    code, text, err = _run(["estimate", path, "--k", 2, 10, 20, "--n-boot", 20, "--quiet"], capsys)
    assert code == 0, err
    assert "grid" not in text + err  # no message names an option the command does not have
    assert ("full ranking" in text) == (design == "full")
    assert ("adaptive sampling" in text.splitlines()[0]) == (design == "adaptive")


def test_bounds_that_exclude_zero_decide_the_comparison(tmp_path, capsys):
    # fixed n = 20 in N = 300: the rule K >= 31.5, so K = 10 is not identified; A's targets sit at the
    # top, B's at the bottom: the two bounds do not overlap
    g = np.random.default_rng(8)
    M, N, n = 500, 300, 20
    RA = 1 + g.choice(N, size=M, p=_beta(N, 0.1, 5.0))
    RB = N - g.choice(N // 3, size=M)
    t = pd.concat([pd.DataFrame({"model": m, "user": np.arange(M), "rank": sample_ranks(R, N, n, rng=g)})
                   for m, R in (("A", RA), ("B", RB))])
    path = tmp_path / "far.csv"
    t.to_csv(path, index=False)
    code, out, err = _run(["estimate", path, "--n-items", N, "--sample-size", n, "--metric", "recall", "--k", 10,
                           "--n-boot", 20, "--json", "--quiet"], capsys)
    assert code == 0, err
    res = json.loads(out)
    (c,) = res["comparisons"]
    ra, rb = ({x["model"]: x for x in res["estimates"]}[m] for m in "AB")
    assert ra["interval"] == rb["interval"] == "bounds" and not c["identified"]
    assert (c["low"], c["high"]) == pytest.approx((ra["low"] - rb["high"], ra["high"] - rb["low"]))
    assert c["low"] > 0 and c["told_apart"] and c["verdict"] == "A > B (at 90%)"
    assert c["level"] == pytest.approx(0.90) and c["p_value"] is None and "level" in c["p_value_reason"]
    code, text, _ = _run(["estimate", path, "--n-items", N, "--sample-size", n, "--metric", "recall", "--k", 10,
                          "--n-boot", 20, "--quiet"], capsys)
    assert "A > B (at 90%)" in text and "at least 90%" in text and "decided below the resolution rule" in text


def test_the_command_flags_an_impossible_estimate(tmp_path, capsys):
    g = np.random.default_rng(5)
    N, n, M = 300, 20, 500
    R = 1 + g.choice(N, size=M, p=_beta(N, 0.3))
    path = tmp_path / "r.csv"
    pd.DataFrame({"rank": sample_ranks(R, N, n, rng=g)}).to_csv(path, index=False)
    code, out, err = _run(["estimate", path, "--n-items", N, "--sample-size", n, "--metric", "recall",
                           "--method", "bv", "--gamma", 0, "--n-boot", 20, "--quiet"], capsys)
    assert code == 0, err
    assert "(!)" in out and "lies outside its identification bounds" in out


# ---------------------------------------------------------------------------------------------
# coverage of the identified adaptive intervals (exact binomial test)
# ---------------------------------------------------------------------------------------------
def test_identified_adaptive_intervals_cover():
    """Adaptive sampling (TORS Algorithm 1, n_0 = 8 to n_max = 128) in N = 300 items, M = 400 users from a
    Beta(0.3, 2) rank model: the default 90 % intervals of Recall and NDCG at K = 10 and 20 (identified:
    K >= 2 x 300/127 = 4.7) against the population metric, over 40 data sets. The exact one-sided
    binomial test of coverage >= 0.90 must not reject at the 1 % level, while the plain bootstrap
    (interval="bootstrap") is measured beside it."""
    N, M, reps, ci = 300, 400, 40, 0.9
    P = _beta(N, 0.3)
    R_all = np.arange(1, N + 1)
    ks = [10, 20]
    truth = {m: np.array([P @ metric_function(m, k, N)(R_all) for k in ks]) for m in ("recall", "ndcg")}
    hits = total = 0
    for s in range(reps):
        g = np.random.default_rng(100 + s)
        R = 1 + g.choice(N, size=M, p=P)
        r, n = adaptive_sample_ranks(R, N, 8, 128, rng=g)
        out = estimate_metrics(r, N, n, ["recall", "ndcg"], ks, ["mle"], ci=ci, n_boot=30, rng=s)["mle"]
        for m, e in out.items():
            assert list(e.interval) == ["bootstrap+margin"] * 2
            hits += int(np.sum((e.low <= truth[m]) & (truth[m] <= e.high)))
            total += len(ks)
    p = stats.binomtest(hits, total, ci, alternative="less").pvalue
    assert p > 0.01, f"coverage {hits}/{total} is significantly below {ci}"
    assert hits / total > 0.85
