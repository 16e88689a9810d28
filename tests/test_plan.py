"""itemsampling.plan: user-sampling sizes against TORS Eq. 46-47, the error quantile by hand,
predicted half-widths against errors realised by running the designs, the choice rules, a pilot's
plausible fits (the worst case over them, the fallback, pairs of fits with two pilots, a known truth
where the single MLE fit understates), and one `error:` line with exit code 2 for bad input."""

import math

import numpy as np
import pytest
from scipy import stats

from itemsampling import users
from itemsampling.cli import main
from itemsampling.estimators import estimate_metric
from itemsampling.estimators.auto import SMOOTH_FITS, AutoSelection, draw_validation_ranks, plausible_fits
from itemsampling.metrics import metric_function
from itemsampling.plan import (
    _user_half_width, _users_for_margin, beta_rank_distribution, format_plan, normal_error_quantile, pilot_resolves,
    plan_evaluation, resolving_pilot_size, worst_case_users,
)
from itemsampling.sampling import sample_ranks

N, M = 400, 600
Z95 = stats.norm.ppf(0.975)


def test_user_sampling_size_is_tors_eq_46_47_for_a_large_population():
    # p = 0.5 (sd 0.5): TORS Eq. 47's 1,067 users (1,068 rounding up) at e = 0.03, 9,604 at 0.01
    assert _users_for_margin(0.5, 10**12, Z95, 0.03) == users.sample_size(0.03) == 1068
    assert _users_for_margin(0.5, 10**12, Z95, 0.01) == users.sample_size(0.01) == 9604
    # the population target: no finite-population correction (TORS Eq. 46 as it stands), capped at M
    assert _users_for_margin(0.5, 5551, Z95, 0.01, "population") == 5551
    assert _users_for_margin(0.5, 20000, Z95, 0.01, "population") == 9604
    assert _user_half_width(0.4, 1000, 1000, Z95, "population") == pytest.approx(Z95 * 0.4 / math.sqrt(1000))
    # the finite-population correction: all M users give 0, and m meets the margin, m - 1 does not
    assert _user_half_width(0.4, 1000, 1000, Z95) == 0.0
    m = _users_for_margin(0.4, 1000, Z95, 0.03)
    assert _user_half_width(0.4, m, 1000, Z95) <= 0.03 < _user_half_width(0.4, m - 1, 1000, Z95)
    assert m < users.sample_size(0.03, p=0.5 - math.sqrt(0.25 - 0.16))  # fewer than the infinite-population m


def test_normal_error_quantile_by_hand():
    assert normal_error_quantile(0.0, 4.0, 0.95) == pytest.approx(2 * Z95, rel=1e-9)
    h = normal_error_quantile(0.3, 0.04, 0.9)
    p = stats.norm.cdf((h - 0.3) / 0.2) - stats.norm.cdf((-h - 0.3) / 0.2)
    assert p == pytest.approx(0.9, abs=1e-9)
    assert normal_error_quantile(0.25, 0.0, 0.95) == 0.25


def test_beta_rank_distribution():
    P = beta_rank_distribution(1000, 0.5, 3.0)
    assert P.shape == (1000,) and P.sum() == pytest.approx(1.0) and np.all(P >= 0)
    mean_fraction = float(P @ (np.arange(1000) + 0.5)) / 1000  # midpoints of the rank cells
    assert mean_fraction == pytest.approx(0.5 / 3.5, abs=2e-3)


def _realised(P, design, n_runs, seed, method="mle", metric="recall", k=10, target="test-users"):
    """Run a design n_runs times on one simulated set of M users (target "test-users": the error about their
    own metric) or on a fresh set each run (target "population": about the metric under P, exact); 95%
    quantile of |error|."""
    rng = np.random.default_rng(seed)
    R = 1 + rng.choice(N, size=M, p=P)
    F = metric_function(metric, k, N)
    T = float(F(R).mean()) if target == "test-users" else float(F(np.arange(1, N + 1)) @ P)
    errs = []
    for _ in range(n_runs):
        if target == "population":
            R = 1 + rng.choice(N, size=M, p=P)
        if design.design == "full ranking":
            errs.append(float(F(R).mean()) - T)
            continue
        if design.design == "user sampling":
            errs.append(float(F(rng.choice(R, size=design.users, replace=False)).mean()) - T)
            continue
        Ru = R if design.users == M else rng.choice(R, size=design.users, replace=False)
        r = sample_ranks(Ru, N, design.sample_size, rng=rng)
        kw = {"gamma": 0.1} if method == "bv" else {}
        errs.append(estimate_metric(r, N, design.sample_size, metric, k, method, **kw) - T)
    return float(np.quantile(np.abs(errs), 0.95))


@pytest.mark.parametrize("target", ["test-users", "population"])
def test_predicted_half_widths_match_realised_errors(target):
    """The plan's half-widths for user sampling, item sampling and user + item sampling (and, for the
    population, full ranking) against the 95% quantile of the errors of 150 runs of each design on
    users drawn from the same rank distribution, about the target's metric; agreement within 30% (the
    Monte Carlo error of a 95% quantile from 150 runs is about 10%, of the plan's own 40 simulated runs
    about 15%)."""
    prior = (0.5, 3.0)
    plan = plan_evaluation(N, M, "recall", 10, margin=0.05, rng=0, prior=prior, sizes=(50,), estimators=("mle",),
                           adaptive=(25, 50), n_sim=40, target=target)
    assert plan.target == target
    P = beta_rank_distribution(N, *prior)
    picked = {}
    kinds = ("user sampling", "item sampling", "user + item sampling") + (("full ranking",) if target == "population"
                                                                          else ())
    for d in plan.designs:
        key = (d.design, d.users)
        if d.design in kinds and key not in picked:
            picked[key] = d
    assert {k[0] for k in picked} == set(kinds)
    for i, d in enumerate(picked.values()):
        real = _realised(P, d, 150, seed=10 + i, target=target)
        assert d.half_width == pytest.approx(real, rel=0.3), (d.label, d.half_width, real)
    full = plan.designs[0]
    if target == "test-users":
        assert full.half_width == 0.0
    else:  # the M users' own sampling error: z sd / sqrt(M), sd the simulated users' per-user spread
        assert full.half_width == pytest.approx(Z95 * plan.user_sd / math.sqrt(M), rel=1e-12)


def test_choice_rules_and_reproducibility():
    kw = dict(rng=3, sizes=(20, 50), estimators=("mle", "bv"), adaptive=(20, 40), n_sim=10, target="test-users")
    a = plan_evaluation(N, M, "ndcg", 10, margin=0.04, **kw)
    b = plan_evaluation(N, M, "ndcg", 10, margin=0.04, **kw)
    assert [d.half_width for d in a.designs] == [d.half_width for d in b.designs]
    meeting = [d for d in a.designs if d.half_width <= 0.04]
    assert a.chosen in meeting and a.chosen.cost == min(d.cost for d in meeting)
    assert a.designs[0].design == "full ranking" and a.designs[0].half_width == 0 and a.designs[0].cost == M * N
    assert {d.design for d in a.designs} == {"full ranking", "user sampling", "item sampling",
                                             "adaptive item sampling", "user + item sampling",
                                             "user + adaptive sampling"}
    item = [d for d in a.designs if d.design == "item sampling"]
    assert {(d.sample_size, d.estimator) for d in item} == {(20, "mle"), (20, "bv"), (50, "mle"), (50, "bv")}
    assert all(d.cost == M * d.sample_size for d in item)
    budget = 40 * M
    c = plan_evaluation(N, M, "ndcg", 10, budget=budget, **kw)
    within = [d for d in c.designs if d.cost <= budget]
    assert c.chosen.cost <= budget and c.chosen.half_width == min(d.half_width for d in within)
    assert "Chosen:" in format_plan(c)


def test_compare_plans_the_difference():
    plan = plan_evaluation(N, M, "recall", 10, margin=0.05, rng=1, prior=(0.5, 3.0), compare=(1.0, 3.0),
                           sizes=(50,), estimators=("mle",), adaptive=(25, 50), n_sim=10)
    PA, PB = beta_rank_distribution(N, 0.5, 3.0), beta_rank_distribution(N, 1.0, 3.0)
    F = metric_function("recall", 10, N)(np.arange(1, N + 1))
    assert plan.compare and plan.truth == pytest.approx(PA @ F - PB @ F, abs=0.05)
    assert plan.designs[0].cost == 2 * M * N  # both models rank everything


def test_pilot_ranks_give_the_rank_distribution():
    rng = np.random.default_rng(0)
    P = beta_rank_distribution(N, 0.5, 3.0)
    r = sample_ranks(1 + rng.choice(N, size=3000, p=P), N, 100, rng=1)
    plan = plan_evaluation(N, M, "recall", 10, margin=0.05, pilot=r, sample_size=100, rng=0, sizes=(50,),
                           estimators=("mle",), adaptive=(25, 50), n_sim=5, pilot_fits="mle")
    assert "pilot of 3,000 users at n = 100 (MLE of P(R))" in plan.source
    assert plan.fits == {"A": ["mle"]} and plan.fit_tests == {}
    assert all(d.half_widths == {"mle": d.half_width} for d in plan.designs)
    # the simulated users' metric is a draw of M users from the pilot's MLE P(R): within 4 standard
    # errors of that distribution's Recall@10 (the MLE estimate of the pilot)
    mle = estimate_metric(r, N, 100, "recall", 10, "mle")
    assert abs(plan.truth - mle) <= 4 * plan.user_sd / math.sqrt(M)
    assert abs(mle - float(P @ metric_function("recall", 10, N)(np.arange(1, N + 1)))) < 0.06


@pytest.mark.parametrize("extra,message", [
    (["--margin", "0"], "margin must be"),
    (["--margin", "-0.1"], "margin must be"),
    (["--budget", "10"], "budget must be at least"),
    (["--margin", "0.05", "--k", "5000"], "k must be"),
    ([], "give --margin"),
])
def test_bad_input_is_one_error_line_and_exit_code_2(capsys, extra, message):
    argv = ["plan", "--n-items", str(N), "--n-users", str(M), "--sizes", "20", "--estimators", "mle",
            "--n-sim", "5", *extra]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], err


def test_plan_prints_the_resolution_note_once_under_the_plan():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "itemsampling", "plan", "--n-items", "1000", "--n-users", "400",
                           "--margin", "0.05", "--n-sim", "5", "--sizes", "20", "50"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr and "plan.py" not in proc.stderr  # no Python warning line
    assert proc.stdout.count("Note: ") == 1
    note = proc.stdout.split("Note: ")[1]
    assert note.startswith("cut-off K = 10 is below the resolution rule K >= 2 N/(n-1) = ")
    assert proc.stdout.rstrip().endswith(note.rstrip())  # under the plan
    proc = subprocess.run([sys.executable, "-m", "itemsampling", "plan", "--n-items", "1000", "--n-users", "400",
                           "--margin", "0.05", "--n-sim", "5", "--sizes", "20", "50", "--json"],
                          capture_output=True, text=True, timeout=600)
    import json

    assert json.loads(proc.stdout)["notes"] == [note.strip()]
    proc = subprocess.run([sys.executable, "-m", "itemsampling", "plan", "--n-items", "1000", "--n-users", "400",
                           "--margin", "0.05", "--seed", "-1"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2 and "argument --seed: must be a non-negative integer, got '-1'" in proc.stderr


def _pilot(model, n_items, users, n, seed):
    """Sampled ranks of a pilot of ``users`` users from a validation rank model, and their global ranks."""
    g = np.random.default_rng(seed)
    R = draw_validation_ranks(model, n_items, users, g)
    return R, sample_ranks(R, n_items, n, rng=g)


def test_pilot_half_width_is_the_worst_case_over_the_plausible_fits(tmp_path, capsys):
    """A pilot: every design is simulated under each smooth fit the pilot does not reject (auto's
    plausible_fits), each fit's population drawn from it, each fit's user-sampling half-width the
    closed form with that fit's per-user sd, the design's half-width the largest; recorded per fit,
    in to_dict, in the printed plan and in --json; one seed, one plan."""
    Ni, Mi = 1000, 600
    _, r = _pilot("0.6", Ni, 300, 50, 2)
    kw = dict(margin=0.05, pilot=r, sample_size=50, sizes=(20,), estimators=("mle", "bv"), adaptive=(20, 40), n_sim=5,
              target="test-users")
    plan = plan_evaluation(Ni, Mi, "recall", 10, rng=5, **kw)
    sel = AutoSelection([], [], ())
    fits = plausible_fits(r, Ni, 50, True, None, sel)
    assert plan.fits == {"A": list(fits)} and len(fits) >= 2 and plan.fallback == {"A": ""}
    assert list(fits) == [f for f in SMOOTH_FITS if plan.fit_tests["A"][f]["kept"]]
    F = metric_function("recall", 10, Ni)(np.arange(1, Ni + 1))
    for f, P in fits.items():  # each fit's simulated users: M draws from that fit
        assert abs(plan.truths[f] - P @ F) <= 4 * plan.user_sds[f] / math.sqrt(Mi), f
    assert plan.truth == plan.truths[list(fits)[0]]
    for d in plan.designs:
        assert set(d.half_widths) == set(fits)
        assert d.half_width == max(d.half_widths.values()) and all(d.half_width >= h for h in d.half_widths.values())
        if d.design != "full ranking" and d.worst_case is None:
            assert d.half_widths[d.fit] == d.half_width
        if d.design == "user sampling" and d.worst_case is None:
            for f in fits:
                assert d.half_widths[f] == pytest.approx(_user_half_width(plan.user_sds[f], d.users, Mi, Z95), rel=1e-12)
        if d.worst_case is not None and d.design == "user sampling":  # the pilot (n = 50) does not resolve K = 10
            assert d.fit is None and set(d.half_widths.values()) == {_user_half_width(0.5, d.users, Mi, Z95)}
    item = {d.estimator: d for d in plan.designs if d.design == "item sampling"}
    assert len(set(item["mle"].half_widths.values())) == len(fits)  # a simulation per fit, not one copied
    again = plan_evaluation(Ni, Mi, "recall", 10, rng=5, **kw)
    assert [d.half_widths for d in again.designs] == [d.half_widths for d in plan.designs]
    out = plan.to_dict()
    assert out["fits"] == {"A": list(fits)} and out["designs"][1]["half_widths"] == plan.designs[1].half_widths
    assert out["designs"][1]["fit"] == plan.designs[1].fit
    text = format_plan(plan)
    assert f"fits of P(R) simulated under (A: {', '.join(fits)})" in text and "worst under" in text
    # the command: --pilot with --json carries the same records
    path = tmp_path / "pilot.csv"
    path.write_text("rank\n" + "\n".join(map(str, r)) + "\n")
    argv = ["plan", "--n-items", str(Ni), "--n-users", str(Mi), "--pilot", str(path), "--sample-size", "50",
            "--margin", "0.05", "--sizes", "20", "--estimators", "mle", "bv", "--n-sim", "5", "--seed", "5", "--json"]
    assert main(argv) == 0
    import json

    got = json.loads(capsys.readouterr().out)
    assert got["fits"] == {"A": list(fits)} and set(got["fit_tests"]["A"]) == set(plan.fit_tests["A"])
    assert all(x["half_width"] == max(x["half_widths"].values()) for x in got["designs"])
    with pytest.raises(ValueError, match="pilot_fits must be one of"):
        plan_evaluation(Ni, Mi, "recall", 10, rng=5, pilot_fits="beta", **kw)


def test_known_truth_where_the_single_mle_fit_understates_and_the_worst_case_does_not():
    """Beta a = 0.6, N/(n-1) = 111 (n = 10): BV's bias lies inside one kernel width. Planned from a pilot
    of 300 of the 600 users, BV's predicted half-width under the single MLE fit is below the realised
    95% error by more than 25% (the fit reproduces itself there), the worst case over the plausible
    fits is not below it. The realised error is mostly BV's bias (a 95% quantile of 40 runs)."""
    Ni, Mi, n = 1000, 600, 10
    R, pilot = _pilot("0.6", Ni, Mi, 50, 1)
    pilot = pilot[:300]
    kw = dict(margin=0.05, pilot=pilot, sample_size=50, rng=0, sizes=(n,), estimators=("bv",), adaptive=(n, n),
              n_sim=5)
    robust = [d for d in plan_evaluation(Ni, Mi, "recall", 10, **kw).designs if d.design == "item sampling"][0]
    single = [d for d in plan_evaluation(Ni, Mi, "recall", 10, pilot_fits="mle", **kw).designs
              if d.design == "item sampling"][0]
    g = np.random.default_rng(7)
    T = float(metric_function("recall", 10, Ni)(R).mean())
    err = [estimate_metric(sample_ranks(R, Ni, n, rng=g), Ni, n, "recall", 10, "bv", gamma=0.1) - T for _ in range(40)]
    real = float(np.quantile(np.abs(err), 0.95))
    assert single.half_width < real / 1.25, (single.half_width, real)
    assert robust.half_width >= real, (robust.half_width, real)


def test_every_smooth_fit_rejected_falls_back_and_two_pilots_give_every_pair_of_fits():
    """Model B's pilot piles 400 of 500 users on one sampled rank, which no rank distribution gives (at
    most about 18% of the users share a sampled rank at n = 20): every smooth fit is rejected and the
    nonparametric MLE and MES fits are used (recorded); with model A's smooth fits the difference's
    half-width is the worst case over every pair of fits."""
    Ni, Mi, n = 500, 400, 20
    _, ra = _pilot("0.3", Ni, 300, n, 3)
    rb = np.r_[np.full(400, 10), np.repeat(np.arange(1, n + 1), 5)]
    plan = plan_evaluation(Ni, Mi, "ndcg", 10, margin=0.05, pilot=ra, compare=rb, sample_size=n, rng=1, sizes=(20,),
                           estimators=("mle",), adaptive=(20, 20), n_sim=5)
    assert plan.fits["B"] == ["mle", "mes"] and "rejected" in plan.fallback["B"] and plan.fallback["A"] == ""
    assert not any(t["kept"] for t in plan.fit_tests["B"].values()) and len(plan.fit_tests["B"]) == len(SMOOTH_FITS)
    assert "nonparametric fits, every smooth fit rejected: mle, mes" in plan.source
    pairs = {f"A:{a}, B:{b}" for a in plan.fits["A"] for b in plan.fits["B"]}
    assert len(pairs) == 2 * len(plan.fits["A"]) >= 4 and set(plan.truths) == pairs
    for d in plan.designs:
        assert set(d.half_widths) == pairs and d.half_width == max(d.half_widths.values())
    assert "(fallback: every smooth fit rejected)" in format_plan(plan)


def test_resolving_pilot_size_is_the_smallest_n0_with_k_at_least_resolved_kernel_widths():
    # RESOLVED = 2: N = 2,000, K = 10 needs n0 - 1 >= 400; N = 1,000, K = 10 needs 200; K = 7 needs 286 (285.7)
    assert resolving_pilot_size(2000, 10) == 401 and resolving_pilot_size(1000, 10) == 201
    assert resolving_pilot_size(1000, 7) == 287
    for N_, k in ((2000, 10), (1000, 7), (3706, 20)):
        n0 = resolving_pilot_size(N_, k)
        assert pilot_resolves(N_, n0, k) and not pilot_resolves(N_, n0 - 1, k)
    assert pilot_resolves(1000, 2, None)  # the whole list


def test_a_pilot_below_the_resolution_identifies_only_designs_that_do_not_rest_on_it(tmp_path, capsys):
    """N = 1,000, a pilot at n = 50 resolves K >= 2 N/49 = 40.8, not K = 10: the designs whose prediction rests
    on P(R) at the top are listed with their half-width but not identified; full ranking and user sampling
    sized by the worst-case variance 1/4 are identified, and the cheapest meeting the margin is chosen (the
    worst-case size of TORS Eq. 47 with the finite-population correction); the note names the pilot size that
    resolves K (201); a budget below the identified designs chooses nothing; the single-fit plan (the plan
    before) and a prior are unaffected; with compare one unresolved pilot is enough (variance 1/2, Eq. 52); the
    chosen design's sampled_ranks call is printed."""
    Ni, Mi = 1000, 600
    _, r = _pilot("0.6", Ni, 300, 50, 2)
    kw = dict(pilot=r, sample_size=50, rng=5, sizes=(20,), estimators=("bv",), adaptive=(20, 20), n_sim=5,
              target="test-users")
    plan = plan_evaluation(Ni, Mi, "recall", 10, margin=0.2, **kw)
    m = worst_case_users("recall", 10, Mi, 0.2, target="test-users")
    assert m == _users_for_margin(0.5, Mi, Z95, 0.2) and 2 <= m < Mi // 16
    worst = [d for d in plan.designs if d.worst_case is not None and d.design == "user sampling"]
    assert sorted(d.users for d in worst) == sorted({m, Mi // 16, Mi // 4, Mi // 2})
    for d in worst:
        assert d.design == "user sampling" and d.worst_case == "variance <= 0.25" and d.identified
        assert d.half_width == _user_half_width(0.5, d.users, Mi, Z95) and d.cost == d.users * Ni
    assert [d.identified for d in plan.designs] == [d.design == "full ranking" or d.worst_case is not None
                                                    for d in plan.designs]
    assert plan.chosen.worst_case is not None and plan.chosen.users == m
    assert "n >= 201 (1 + 2 N/K)" in plan.unresolved and "= 40.8, and K = 10" in plan.unresolved
    assert plan.to_dict()["designs"][1]["identified"] is False and plan.to_dict()["unresolved"] == plan.unresolved
    text = format_plan(plan)
    assert text.count("Not identified: ") == 1 and "(not identified)" in text
    assert (f"Chosen: user sampling, {m} users fully ranked (worst case: variance <= 0.25) (the cheapest design the "
            "pilot identifies meeting the margin 0.2).") in text
    assert (f'Run it with itemsampling.evaluation: table = sampled_ranks(score, users, targets, exclude=exclude, '
            f'n_items=1000, design="full", n_users={m}, rng=seed).') in text
    single = plan_evaluation(Ni, Mi, "recall", 10, margin=0.2, pilot_fits="mle", **kw)
    assert single.unresolved == "" and single.chosen.design != "full ranking"
    assert not any(d.worst_case for d in single.designs)
    below = plan_evaluation(Ni, Mi, "recall", 10, budget=m * Ni - 1, **kw)
    assert below.chosen is None and "No design the pilot identifies fits within" in format_plan(below)
    prior = plan_evaluation(Ni, Mi, "recall", 10, margin=0.2, rng=5, prior=(0.6, 3.0), sizes=(20,),
                            estimators=("bv",), adaptive=(20, 20), n_sim=5, target="test-users")
    assert prior.unresolved == "" and all(d.identified for d in prior.designs)
    both = plan_evaluation(Ni, Mi, "recall", 10, margin=0.2, compare=(1.0, 3.0), **kw)
    m2 = _users_for_margin(math.sqrt(0.5), Mi, Z95, 0.2)
    assert both.unresolved == plan.unresolved.replace("0.25", "0.5") and both.chosen.worst_case == "variance <= 0.5"
    wc = [d for d in both.designs if d.design == "user sampling" and d.worst_case is not None and d.half_width <= 0.2]
    assert min(d.users for d in wc) == m2 == worst_case_users("recall", 10, Mi, 0.2, compare=True, target="test-users")
    # the population's metric (estimate's default interval): user sampling without the finite-population
    # correction (TORS Eq. 46-47: ceil(1.96^2 / 4 / 0.2^2) = 25 users) and full ranking's own user error by the
    # same worst case, z 0.5 / sqrt(M), identified
    pop = plan_evaluation(Ni, Mi, "recall", 10, margin=0.2, **{**kw, "target": "population"})
    mp = worst_case_users("recall", 10, Mi, 0.2)
    assert mp == math.ceil(Z95**2 * 0.25 / 0.2**2) == 25 and mp > m
    assert pop.chosen.worst_case is not None and pop.chosen.users == mp
    assert pop.designs[0].half_width == pytest.approx(Z95 * 0.5 / math.sqrt(Mi), rel=1e-12)
    assert pop.designs[0].identified and pop.designs[0].worst_case == "variance <= 0.25"
    for d in pop.designs:
        if d.design == "user sampling" and d.worst_case is not None:
            assert d.half_width == pytest.approx(Z95 * 0.5 / math.sqrt(d.users), rel=1e-12)
    assert min(d.cost for d in wc) == 2 * m2 * Ni
    # the cheapest identified design: here the resolving fixed size n = 201 on a worst-case user sample
    assert both.chosen == min([d for d in both.designs if d.identified and d.half_width <= 0.2],
                              key=lambda d: (d.cost, d.half_width))
    path = tmp_path / "pilot.csv"
    path.write_text("rank\n" + "\n".join(map(str, r)) + "\n")
    assert main(["plan", "--n-items", str(Ni), "--n-users", str(Mi), "--pilot", str(path), "--sample-size", "50",
                 "--margin", "0.2", "--sizes", "20", "--estimators", "bv", "--n-sim", "5", "--seed", "5"]) == 0
    out = capsys.readouterr().out
    # the command searches the adaptive ladders that resolve K (no --adaptive option): the API's plan, the same call
    cli_plan = plan_evaluation(Ni, Mi, "recall", 10, margin=0.2, pilot=r, sample_size=50, rng=5, sizes=(20,),
                               estimators=("bv",), n_sim=5)
    assert cli_plan.chosen.identified and cli_plan.chosen.cost < pop.chosen.cost  # cheaper than worst-case users
    assert out.count("Not identified: ") == 1 and f"table = {cli_plan.chosen.call}" in out
    assert f"user sampling, {mp} users fully ranked (worst case: variance <= 0.25)" in out  # still listed
    assert "95% half-widths for the metric of the population the users come from" in out  # the default target


def test_adaptive_designs_are_judged_at_their_own_resolution():
    """From the pilot at n = 50 (not resolving K = 10 at N = 1,000), an adaptive design with n_max = 320
    resolves K (2 N/319 = 6.3 <= 10) and is identified, one with n_max = 160 (12.6 > 10) is not; a margin
    only the adaptive design and full ranking meet chooses the adaptive one, with its call."""
    Ni, Mi = 1000, 600
    _, r = _pilot("0.6", Ni, 300, 50, 2)
    kw = dict(pilot=r, sample_size=50, rng=5, sizes=(20,), estimators=("bv",), n_sim=5)
    for nmax, identified in ((160, False), (320, True)):
        plan = plan_evaluation(Ni, Mi, "recall", 10, margin=0.2, adaptive=(20, nmax), **kw)
        ad, = [d for d in plan.designs if d.design == "adaptive item sampling"]
        assert ad.identified is identified and ad.sample_size == nmax
        assert ad.call == ('sampled_ranks(score, users, targets, exclude=exclude, n_items=1000, design="adaptive", '
                           f'initial_size=20, max_size={nmax}, rng=seed)')
    ad, = [d for d in plan.designs if d.design == "adaptive item sampling"]
    cheaper = [d for d in plan.designs if d.identified and d.half_width <= 0.2 and d.cost < ad.cost]
    assert plan.chosen == min([d for d in plan.designs if d.identified and d.half_width <= 0.2],
                              key=lambda d: (d.cost, d.half_width))
    assert (plan.chosen == ad) == (not cheaper)


def test_every_design_names_its_sampled_ranks_call():
    """Full ranking, user sampling, item sampling, adaptive and user + item sampling each carry the
    sampled_ranks call that runs them (design, sizes, n_users)."""
    plan = plan_evaluation(N, M, "recall", 10, margin=0.05, rng=0, sizes=(20, 50), estimators=("bv",),
                           adaptive=(20, 40), n_sim=5)
    calls = {d.design: set() for d in plan.designs}
    for d in plan.designs:
        calls[d.design].add(d.call)
        assert d.call.startswith("sampled_ranks(score, users, targets, exclude=exclude, n_items=400, ")
        want = {"full ranking": 'design="full")', "user sampling": f'design="full", n_users={d.users}, rng=seed)',
                "item sampling": f'design="fixed", sample_size={d.sample_size}, rng=seed)',
                "adaptive item sampling": 'design="adaptive", initial_size=20, max_size=40, rng=seed)',
                "user + item sampling": f'design="fixed", sample_size={d.sample_size}, n_users={d.users}, rng=seed)'}
        assert d.call.endswith(want[d.design]), d.call
    assert set(calls) == {"full ranking", "user sampling", "item sampling", "adaptive item sampling",
                          "user + item sampling"}
    assert all(x["call"] == d.call for x, d in zip(plan.to_dict()["designs"], plan.designs))


def test_worst_case_user_sampling_size_against_a_simulation():
    """The worst-case user-sampling size meets the margin whatever the rank distribution. Recall (variance
    <= 1/4, TORS Eq. 47 with the finite-population correction): 1,068 users of an infinite population at
    e = 0.03 (Eq. 47's 1,067.07 rounded up), and in a population of M = 4,000 users half of whom hit (the
    worst case, p = 1/2) m users drawn without replacement hold the mean within e in 95% of 20,000
    simulated draws (binomial test), more where p = 0.1. NDCG (Hoeffding, Eq. 48): ceil(ln(40) / (2 e^2)) =
    2,050 at e = 0.03 for an infinite population; the m of M = 4,000 (users drawn without replacement) hold
    the mean of a two-point and of a spread population within e in at least 95% of the draws."""
    from itemsampling.plan import worst_case_user_bound

    assert worst_case_users("recall", 10, 10**12, 0.03) == 1068 == users.sample_size(0.03)
    assert worst_case_users("hr", 10, 10**12, 0.01) == 9604
    assert worst_case_users("ndcg", 10, 10**12, 0.03) == math.ceil(math.log(40) / (2 * 0.03**2)) == 2050
    assert worst_case_user_bound("precision", 5) == ("variance", 0.1)
    assert worst_case_user_bound("ap", 5, compare=True) == ("hoeffding", 2.0)
    g = np.random.default_rng(0)
    Mp, e, reps = 4000, 0.03, 20_000
    m = worst_case_users("recall", 10, Mp, e, target="test-users")
    assert m == _users_for_margin(0.5, Mp, Z95, e) and 800 < m < 1068
    assert worst_case_users("recall", 10, Mp, e) == 1068  # the population's metric: Eq. 47 as it stands
    for p, exact in ((0.5, True), (0.1, False)):
        good = int(p * Mp)
        hits = g.hypergeometric(good, Mp - good, m, size=reps)  # users who hit among m drawn without replacement
        covered = int(np.sum(np.abs(hits / m - good / Mp) <= e))
        if exact:  # the worst case: the size is what Eq. 47 promises, not more
            assert stats.binomtest(covered, reps, 0.95).pvalue > 1e-3, covered / reps
        else:
            assert covered / reps > 0.99
    # fewer users at p = 1/2 miss: m / 2 users cover clearly less than 95%
    hits = g.hypergeometric(Mp // 2, Mp // 2, m // 2, size=reps)
    assert np.mean(np.abs(hits / (m // 2) - 0.5) <= e) < 0.9
    mh = worst_case_users("ndcg", 10, Mp, e, target="test-users")
    assert mh == min(2050, Mp)
    two_point = np.r_[np.ones(Mp // 2), np.zeros(Mp // 2)]
    spread = 1.0 / np.log2(1 + g.integers(1, 40, Mp))  # NDCG-like values in (0, 1]
    for values in (two_point, spread):
        T = values.mean()
        means = np.array([values[g.choice(Mp, mh, replace=False)].mean() for _ in range(2000)])
        covered = int(np.sum(np.abs(means - T) <= e))
        assert stats.binomtest(covered, 2000, 0.95, alternative="less").pvalue > 1e-3


def test_a_pilot_that_resolves_the_cut_off_plans_as_before():
    """N = 1,000, a pilot at n = 250 resolves K = 10 (2 N/249 = 8.0): every design identified and the
    choice is the rule's without the mark, the cheapest design meeting the margin."""
    Ni, Mi = 1000, 600
    _, r = _pilot("0.6", Ni, 300, 250, 2)
    plan = plan_evaluation(Ni, Mi, "recall", 10, margin=0.2, pilot=r, sample_size=250, rng=5, sizes=(20,),
                           estimators=("bv",), adaptive=(20, 20), n_sim=5)
    assert plan.unresolved == "" and all(d.identified for d in plan.designs)
    meet = [d for d in plan.designs if d.half_width <= 0.2]
    assert plan.chosen == min(meet, key=lambda d: (d.cost, d.half_width)) and plan.chosen.design != "full ranking"
    assert "Not identified" not in format_plan(plan)


def test_pilot_and_interval_share_one_resolution_rule():
    """The plan's pilot rule and method auto's interval rule are one rule (itemsampling.kernel.resolves):
    at N = 1,000, n = 101 two kernel widths are K = 20; K = 19 is below, K = 20 and AUC (k=None) resolved."""
    from itemsampling import kernel
    from itemsampling.estimators import auto
    from itemsampling.plan import pilot_resolves, resolving_pilot_size

    assert auto.RESOLVED is kernel.RESOLVED == 2.0
    kinds = auto.interval_plan(1000, 101, [19, 20, None])
    assert [kinds[k][0] for k in (19, 20, None)] == ["bounds", "bootstrap+margin", "bootstrap+margin"]
    assert [pilot_resolves(1000, 101, k) for k in (19, 20, None)] == [False, True, True]
    assert resolving_pilot_size(1000, 20) == 101  # 1 + 2 * 1000 / 20


def test_the_resolution_rule_refuses_bad_sizes_naming_them():
    from itemsampling.kernel import resolves

    with pytest.raises(ValueError, match="sample_size"):
        resolves(100, 1, 10)
    with pytest.raises(ValueError, match="n_items"):
        resolves(1, 10, 1)
    with pytest.raises(ValueError, match="k"):
        resolves(100, 10, 0)
    # per-user sizes: the largest, 12, resolves K >= 2 * 100 / 11 = 18.2
    assert resolves(100, np.array([5, 12]), 18) is False and resolves(100, np.array([5, 12]), 19) is True


def test_expected_adaptive_size_by_hand_and_against_the_sampled_cost():
    """E n_u = n0 + sum_j (n_j - n_{j-1}) P(r = 1 at n_{j-1}), (1 - theta_R)^(n - 1) with replacement: by hand
    on tiny cases, and against the item scorings sampled_ranks counts for an adaptive design on a model whose
    global ranks are known (mean over 4,000 rows within 4 standard errors)."""
    from itemsampling.evaluation import sampled_ranks
    from itemsampling.plan import expected_adaptive_size

    assert expected_adaptive_size([1.0, 0, 0, 0, 0], 5, 2, 4) == 4.0  # R = 1 always ranks first: n_max
    assert expected_adaptive_size([0, 0, 0, 0, 1.0], 5, 2, 4) == 2.0  # R = N never does: n0
    # uniform R on 1..5, ladder 2 -> 4: 2 + 2 * mean(1 - (R - 1)/4) = 3
    assert expected_adaptive_size(np.full(5, 0.2), 5, 2, 4) == pytest.approx(3.0, rel=1e-12)
    # two doublings: 2 + 2 (3/4) + 4 (3/4)^3
    P = np.zeros(9)
    P[2] = 1.0  # R = 3 of N = 9: theta = 1/4
    assert expected_adaptive_size(P, 9, 2, 8) == pytest.approx(2 + 2 * 0.75 + 4 * 0.75 ** 3, rel=1e-12)
    with pytest.raises(ValueError, match="rank_distribution"):
        expected_adaptive_size([0.5, 0.6], 2, 2, 2)
    Ni, Mi = 2000, 4000
    g = np.random.default_rng(4)
    R = 1 + g.choice(Ni, size=Mi, p=beta_rank_distribution(Ni, 0.4, 3.0))
    # a model that ranks item j of user u at global rank R_u for the target: scores = -(position), target at R_u - 1
    order = np.argsort(g.random((Mi, Ni)), axis=1)
    pos = np.empty_like(order)
    np.put_along_axis(pos, order, np.arange(Ni)[None, :], axis=1)
    targets = order[np.arange(Mi), R - 1]

    def score(users, items):
        return -pos[users[:, None], items].astype(float)

    tab = sampled_ranks(score, np.arange(Mi), targets, n_items=Ni, design="adaptive", initial_size=25, max_size=800,
                        rng=1)
    full = sampled_ranks(score, np.arange(Mi), targets, n_items=Ni, design="full")
    assert np.array_equal(full["rank"].to_numpy(), R)
    P_emp = np.bincount(R - 1, minlength=Ni) / Mi
    want = expected_adaptive_size(P_emp, Ni, 25, 800)
    sizes = tab["sample_size"].to_numpy()
    assert tab.attrs["scorings"] == sizes.sum()
    assert abs(sizes.mean() - want) <= 4 * sizes.std(ddof=1) / math.sqrt(Mi), (sizes.mean(), want)


def test_resolving_ladders_end_at_the_first_size_that_resolves_k():
    from itemsampling.kernel import resolves
    from itemsampling.plan import resolving_ladders

    N_ = 1000  # K = 10 needs n >= 201
    ladders = resolving_ladders(N_, 10, sizes=(20, 50, 300))
    assert (20, 320) in ladders and (50, 400) in ladders and all(n0 < 201 for n0, _ in ladders)
    assert (101, 202) in ladders and (51, 204) in ladders and (13, 208) in ladders  # ceil(201 / 2^j)
    for n0, nmax in ladders:
        ratio = nmax // n0
        assert nmax == n0 * ratio and ratio & (ratio - 1) == 0 and ratio >= 2
        assert resolves(N_, nmax, 10) and not resolves(N_, nmax // 2, 10)
    assert all(nmax <= 250 for _, nmax in resolving_ladders(N_, 10, sizes=(20,), cap=250))
    assert resolving_ladders(N_, 10, cap=150) == [] and resolving_ladders(N_, None) == []


def test_below_the_pilot_resolution_the_plan_chooses_a_cheap_identified_adaptive_design():
    """N = 4,000, M = 6,000, a pilot at n = 50 (resolves K >= 163): Recall@10 at margin 0.03 is met by an identified
    design cheaper than worst-case user sampling: an adaptive ladder whose n_max resolves K = 10 (n_max >= 801),
    alone or on a user sample sized by the worst case; its call runs it; the resolving fixed size is listed as skipped
    with its cost; design_kwargs gives the call's arguments."""
    from itemsampling.plan import design_kwargs

    Ni, Mi = 4000, 6000
    R, r = _pilot("0.4", Ni, Mi, 50, 6)
    plan = plan_evaluation(Ni, Mi, "recall", 10, margin=0.03, pilot=r[:1000], sample_size=50, rng=2, sizes=(50,),
                           estimators=("mle",), n_sim=5)
    c = plan.chosen
    assert c.identified and c.design in ("adaptive item sampling", "user + adaptive sampling") and c.half_width <= 0.03
    assert c.sample_size >= 801
    worst = min(d.cost for d in plan.designs if d.worst_case is not None and d.design == "user sampling"
                and d.half_width <= 0.03)
    assert c.cost < worst
    assert [x["sample_size"] for x in plan.skipped] == [801] and plan.skipped[0]["cost"] == Mi * 801
    assert "(not simulated: " in format_plan(plan)
    kw = design_kwargs(c)
    assert kw["design"] == "adaptive" and kw["initial_size"] == c.initial_size and kw["max_size"] == c.sample_size
    assert ("n_users" in kw) == (c.design == "user + adaptive sampling")
    for key, v in kw.items():
        assert (f'{key}="{v}"' if isinstance(v, str) else f"{key}={v}") in c.call
    # every listed design below the rule is marked, every resolving one identified
    for d in plan.designs:
        if d.design in ("item sampling", "adaptive item sampling", "user + item sampling", "user + adaptive sampling"):
            from itemsampling.kernel import resolves
            assert d.identified == resolves(Ni, d.sample_size, 10), d.label
