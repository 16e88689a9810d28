"""Each failure of the reliability issue, reproduced: strict flags, integral integers, options
that are refused rather than dropped, honest convergence reports, BV consistent across gamma,
memory guards that name the argument, and no raw internal exception."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from itemsampling import experiments as E
from itemsampling import kernel as KN
from itemsampling import mapping as MP
from itemsampling import models as MO
from itemsampling import ranking as RK
from itemsampling import sampling as S
from itemsampling import theory as T
from itemsampling._validation import as_rng, check_bool, check_int, check_memory, check_probability_vector
from itemsampling.book import order_string
from itemsampling.data import SimulationConfig, gini, holdout_fraction, item_counts, simulate
from itemsampling.estimators import corrected as C
from itemsampling.estimators import distribution as D
from itemsampling.estimators import estimate_metric, estimate_metrics, metric_from_distribution
from itemsampling.metrics import metric_curve

R = np.array([1, 5, 20, 50])
BAD_FLAGS = ["False", "True", "no", 0, 1, None, 0.0, np.int64(1), [True]]


# --- the validation layer itself ---------------------------------------------------------------
def test_check_bool():
    assert check_bool(True, "f") is True and check_bool(np.False_, "f") is False
    assert check_bool(None, "f", allow_none=True) is None
    for bad in BAD_FLAGS:
        with pytest.raises(ValueError, match=r"f must be True or False, got"):
            check_bool(bad, "f")


def test_integers_must_be_integral():
    assert check_int(3.0, "n") == 3 and check_int(np.int32(4), "n") == 4
    for bad in (3.5, "3", True, np.nan, None):
        with pytest.raises(ValueError, match="n must be an integer"):
            check_int(bad, "n")
    for bad in (3.5, 3.0, True, "1", -1):
        with pytest.raises(ValueError, match="rng must be"):
            as_rng(bad)
    assert as_rng(np.int64(3)).integers(100) == np.random.default_rng(3).integers(100)


def test_check_memory_names_argument_and_size(monkeypatch):
    monkeypatch.setenv("ITEMSAMPLING_MEMORY_LIMIT", str(2**30))
    check_memory(2**29, "a thing", "n_items")
    with pytest.raises(ValueError, match=r"a thing needs 2\.0 GiB of memory but at most 1\.0 GiB .* reduce n_items"):
        check_memory(2**31, "a thing", "n_items")


def test_probability_vectors():
    np.testing.assert_allclose(check_probability_vector([0.25, 0.75], "p"), [0.25, 0.75])
    for bad, msg in (([0.5, 0.6], "sum to 1"), ([-0.5, 1.5], "non-negative"), (["a", "b"], "array of numbers"),
                     ([np.nan, 1], "NaN"), ("0.5", "array of numbers"), ([], "non-empty")):
        with pytest.raises(ValueError, match=f"p must .*{msg}"):
            check_probability_vector(bad, "p")


# --- flags are never read by truthiness ---------------------------------------------------------
FLAG_CALLS = {
    "sample_ranks": lambda v: S.sample_ranks(R, 100, 10, rng=0, replacement=v),
    "kernel": lambda v: KN.kernel(100, 10, v),
    "kernel_cdf": lambda v: KN.kernel_cdf(100, 10, replacement=v),
    "expected_sampled_metric": lambda v: S.expected_sampled_metric(R, 100, 10, "recall", 5, replacement=v),
    "corrected_metric": lambda v: C.corrected_metric("recall", 5, 100, 10, "cls", replacement=v),
    "corrected_moments": lambda v: C.corrected_moments(R, 100, np.linspace(1, 0, 10), replacement=v),
    "bv_rank_distribution.replacement": lambda v: D.bv_rank_distribution(np.full(10, 0.1), 100, 10, replacement=v),
    "bv_rank_distribution.project": lambda v: D.bv_rank_distribution(np.full(10, 0.1), 100, 10, project=v),
    "fit_rank_distribution.project": lambda v: D.fit_rank_distribution([1, 2, 3], 100, 10, "bv", project=v),
    "estimate_rank_distribution": lambda v: D.estimate_rank_distribution([1, 2, 3], 100, 10, "mle", replacement=v),
    "estimate_metric": lambda v: estimate_metric([1, 2, 3], 100, 10, "recall", 5, "rank_estimate", replacement=v),
    "estimate_metrics": lambda v: estimate_metrics([1, 2, 3], 100, 10, "recall", 5, ["cls"], replacement=v),
    "sample_pool_ranks": lambda v: E.sample_pool_ranks(R, np.full(4, 100), 10, rng=0, replacement=v),
    "expected_sampled_by_pool": lambda v: E.expected_sampled_by_pool(R, np.full(4, 100), 10, "recall", 5, replacement=v),
    "oracle_mapping": lambda v: MP.oracle_mapping(R, 100, 10, replacement=v),
    "simulate_sampled_recall_curves": lambda v: T.simulate_sampled_recall_curves(R, 100, 10, 2, progress=v),
    "order_string": lambda v: order_string({"a": 1.0, "b": 2.0}, higher_is_better=v),
    "ALS.use_cg": lambda v: MO.ALS(use_cg=v),
    "popularity_score.normalize": lambda v: _candidates().popularity_score([[0, 1]], np.array([3.0, 1.0, 2.0]),
                                                                           normalize=v),
    "grid_kernel": lambda v: _grid().grid_kernel(_grid().rank_grid(10_000, 10), 10, replacement=v),
}


def _candidates():
    from itemsampling import candidates

    return candidates


def _grid():
    from itemsampling.estimators import grid

    return grid


@pytest.mark.parametrize("name", sorted(FLAG_CALLS))
@pytest.mark.parametrize("bad", ["False", 0, None])
def test_flags_refuse_non_bools(name, bad):
    flag = name.split(".")[-1] if "." in name else None
    with pytest.raises(ValueError, match=f"{flag or ''}.*must be True( or False|, False)"):
        FLAG_CALLS[name](bad)


def test_flags_accept_numpy_bools():
    a = S.sample_ranks(R, 100, 10, rng=0, replacement=np.False_)
    b = S.sample_ranks(R, 100, 10, rng=0, replacement=False)
    np.testing.assert_array_equal(a, b)


def _tiny_split():
    train = pd.DataFrame({"user": [0, 0, 1, 1], "item": [0, 1, 1, 2], "rating": 1.0, "timestamp": 0})
    test = pd.DataFrame({"user": [0, 1], "item": [2, 3], "rating": 1.0, "timestamp": 1})
    for df in (train, test):
        df.attrs["n_items"] = 6
        df.attrs["n_users"] = 2
    return train, test


@pytest.mark.parametrize("call", [
    lambda m, tr, te: RK.global_ranks(m, tr, te, exclude_train="False"),
    lambda m, tr, te: RK.global_ranks(m, tr, te, return_pool="yes"),
    lambda m, tr, te: RK.pool_sizes(tr, te, 6, exclude_train="False"),
    lambda m, tr, te: RK.sampled_ranks_explicit(m, tr, te, 3, rng=0, replacement="False"),
    lambda m, tr, te: RK.sampled_ranks_explicit(m, tr, te, 3, rng=0, exclude_train=1),
    lambda m, tr, te: E.ExplicitSampler({}, tr, te, exclude_train="False"),
])
def test_ranking_flags(call):
    train, test = _tiny_split()
    model = MO.Popular().fit(train)
    with pytest.raises(ValueError, match="(exclude_train|return_pool|replacement) must be True or False"):
        call(model, train, test)


def test_experiment_flags_and_integers():
    gr = E.GlobalRanks({"a": R}, 100, np.full(4, 100), np.arange(4), np.zeros(4, dtype=np.int64), "hand", True, 0)
    kw = dict(n_repeats=2, cache=False, progress=False)
    with pytest.raises(ValueError, match="replacement must be True or False"):
        E.run_experiment(gr, replacement="False", **kw)
    with pytest.raises(ValueError, match="progress must be True or False"):
        E.run_experiment(gr, n_repeats=2, cache=False, progress="no")
    with pytest.raises(ValueError, match="cache must be True, False or a folder"):
        E.run_experiment(gr, n_repeats=2, cache="False", progress=False)
    with pytest.raises(ValueError, match="rng must be a non-negative integer seed"):
        E.run_experiment(gr, rng=3.5, **kw)
    with pytest.raises(ValueError, match="exclude_train must be True or False"):
        E.load_global_ranks("sim-ml100k", ["popular"], exclude_train="False", progress=False)


def test_pool_sizes_and_rng_must_be_integral():
    with pytest.raises(ValueError, match="pool_sizes must hold integer ranks"):
        E.sample_pool_ranks(R, np.array([100, 100.5, 100, 100]), 10, rng=0)
    with pytest.raises(ValueError, match="rng must be"):
        E.sample_pool_ranks(R, np.full(4, 100), 10, rng=3.5)
    with pytest.raises(ValueError, match="global_ranks must lie in 1..pool_sizes"):
        E.sample_pool_ranks(np.array([1, 200]), np.array([100, 100]), 10, rng=0)
    with pytest.raises(ValueError, match="pool_sizes must hold integer ranks"):
        E.expected_sampled_by_pool(R, np.full(4, 100.5), 10, "recall", 5)
    with pytest.raises(ValueError, match="rng must be"):
        S.sample_ranks(R, 100, 10, rng=3.5)


# --- estimate_metrics refuses what estimate_metric refuses --------------------------------------
@pytest.mark.parametrize("methods, kw, match", [
    (["mn"], {"n_user": 50}, r"unknown parameter\(s\) \['n_user'\]"),
    (["bv"], {"gama": 0.1}, r"unknown parameter\(s\) \['gama'\]"),
    (["mle", "mes"], {"gamma": 0.1}, r"\['gamma'\] are not used by any of the methods"),
    (["mle"], {"mes": {"eta": 0.1}}, r"\['mes'\] are not used"),
    (["mes"], {"mes": {"etaa": 0.1}}, r"unknown option\(s\) \['etaa'\] in mes="),
    (["mes"], {"mes": 0.1}, "mes must be a dict of options"),
])
def test_estimate_metrics_refuses_unknown_options(methods, kw, match):
    with pytest.raises(ValueError, match=match):
        estimate_metrics([1, 2, 3, 4], 100, 10, "recall", 5, methods, **kw)


def test_estimate_metrics_routes_valid_options():
    r = [1, 2, 3, 4, 2, 1]
    out = estimate_metrics(r, 100, 10, ["recall"], 5, ["bv", "mes", "mn"], gamma=0.1, eta=0.01, n_users=50)
    assert out["bv"]["recall"] == pytest.approx(estimate_metric(r, 100, 10, "recall", 5, "bv", gamma=0.1))
    assert out["mes"]["recall"] == pytest.approx(estimate_metric(r, 100, 10, "recall", 5, "mes", eta=0.01))
    assert out["mn"]["recall"] == pytest.approx(estimate_metric(r, 100, 10, "recall", 5, "mn", n_users=50))


# --- MES never claims convergence it did not reach ---------------------------------------------
def _pt(n, seed=0, size=500):
    g = np.random.default_rng(seed)
    r = np.minimum(g.geometric(0.3, size=size), n)
    return np.bincount(r, minlength=n + 1)[1:] / size


def test_mes_large_weight_converges_for_real():
    # a = 1e12: the Newton decrement is tiny while the gradient is 0.3; the old code stopped at
    # iteration 1 claiming convergence with that gradient
    K = KN.kernel(1000, 50)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = D.mes_dual(_pt(50), K, 1e12)
    assert res.stopped_by_tol and res.gap <= 1e-10
    # with a huge entropy weight the optimum is (almost) uniform
    np.testing.assert_allclose(res.distribution, 1 / 1000, rtol=1e-6)


def test_mes_iteration_cap_and_stall_are_reported():
    K = KN.kernel(3000, 100)
    with pytest.warns(D.ConvergenceWarning, match="iteration cap max_iter = 3"):
        res = D.mes_dual(_pt(100), K, 1e-4, max_iter=3)
    assert not res.stopped_by_tol and res.gap > 1e-10
    # a = 1e-12 (almost no entropy): the dual is nearly singular and the gradient stalls far from 0
    with pytest.warns(D.ConvergenceWarning, match="not the MES optimum"):
        res = D.mes_dual(_pt(100), K, 1e-12)
    assert not res.stopped_by_tol and res.gap > 1e-3
    # whatever is reported, the gap is the KKT residual of the returned point
    pt = _pt(100)
    obs = pt > 0
    assert res.gap >= 0 and np.isfinite(res.gap) and obs.any()


# --- BV: one rule across gamma -------------------------------------------------------------------
def test_bv_gamma_zero_is_refused_like_tiny_gamma():
    msgs = []
    for g in (0.0, 1e-12, 0):
        with pytest.raises(ValueError, match="numerically singular") as exc:
            C.corrected_metric("recall", 10, 3000, 100, "bv", gamma=g)
        msgs.append(str(exc.value))
    assert "gamma = 0" in msgs[0] and "gamma = 1e-12" in msgs[1]
    # estimate_metric goes through the same rule
    with pytest.raises(ValueError, match="numerically singular"):
        estimate_metric([1, 2, 3], 3000, 100, "recall", 10, "bv", gamma=0.0)


# --- memory guards ------------------------------------------------------------------------------
@pytest.fixture
def limit(monkeypatch):
    monkeypatch.setenv("ITEMSAMPLING_MEMORY_LIMIT", str(16 * 2**30))  # 16 GiB, whatever the machine


def test_kernel_of_impossible_size(limit):
    with pytest.raises(ValueError, match=r"needs 2\.8 PiB of memory .*reduce n_items or sample_size"):
        KN.kernel(10**12, 100)
    # rows for a few global ranks of that catalog need no memory to speak of
    assert KN.kernel(10**12, 100, global_ranks=[1, 10**11]).shape == (2, 100)


@pytest.mark.parametrize("cls", [MO.EASE, MO.ItemKNN])
def test_dense_item_models_on_a_large_catalog(limit, cls):
    train = pd.DataFrame({"user": [0, 1], "item": [0, 99_999], "rating": 1.0, "timestamp": 0})
    with pytest.raises(ValueError, match=r"on 100000 items .*needs .*GiB of memory .*reduce the number of items"):
        cls().fit(train)


def test_simulator_and_theory_guards(limit):
    with pytest.raises(ValueError, match="the simulator needs .* reduce n_users, n_items or true_profile_mean"):
        simulate(SimulationConfig(n_users=40_000, n_items=40_000, true_profile_mean=1e6))
    with pytest.raises(ValueError, match="reduce n_items"):
        T.beta_rank_distribution(10**12, 0.5)
    with pytest.raises(ValueError, match="reduce n_users"):
        T.sample_global_ranks(np.full(10, 0.1), 10**12)
    with pytest.raises(ValueError, match=r"reduce n_items \(or the number of metrics and cut-offs\)"):
        C.corrected_metric("recall", 10, 10**12, 100, "bv", gamma=0.1)
    with pytest.raises(ValueError, match="reduce size or n_items"):
        MP.sample_beta_ranks(0.5, 100, 10**12)


# --- no raw internal exception; the message names the argument ----------------------------------
@pytest.mark.parametrize("call, match", [
    (lambda: D.project_to_simplex([]), "v must be a non-empty"),
    (lambda: D.project_to_simplex(3.0), "v must be a non-empty"),
    (lambda: D.mes_dual(["a"] * 10, KN.kernel(50, 10), 0.1), "p_tilde must be an array of numbers"),
    (lambda: D.mes_dual(np.full(10, 0.1), "K", 0.1), "K must be an array of numbers"),
    (lambda: D.mes_dual(np.full(10, 0.1), KN.kernel(50, 9), 0.1), "p_tilde must have length 9"),
    (lambda: D.mes_objective(np.full(49, 1 / 49), np.full(10, 0.1), KN.kernel(50, 10), 0.1), "pi must have length 50"),
    (lambda: D.bv_rank_distribution("abc", 50, 10), "p_tilde must be an array of numbers"),
    (lambda: C.corrected_metric(5, 5, 50, 10, "cls"), "metric must be a metric name"),
    (lambda: C.corrected_metric("recall", [[1, 2]], 50, 10, "cls"), "ks must be a 1-d sequence"),
    (lambda: C.corrected_estimate([1, 2], "x"), "corrected must be an array of numbers"),
    (lambda: metric_from_distribution("x", "recall", 5), "rank_distribution must be an array of numbers"),
    (lambda: metric_curve(R, "recall", [1, 2], n_items={"a": 1}), "n_items must be an integer"),
    (lambda: MP.hit_ratio_at(R, 100, [[1, 2]]), "positions must be a non-empty 1-d"),
    (lambda: MP.hit_ratio_at(R, 100, ["x"]), "positions must be an array of numbers"),
    (lambda: T.deviation_radius([0.1, 0.5], None), r"delta must lie in \(0, 1\)"),
    (lambda: T.hoeffding_radius(10, "0.1"), r"delta must lie in \(0, 1\)"),
    (lambda: T.poisson_binomial_pmf("x"), "probs must be an array of numbers"),
    (lambda: gini("abc"), "values must be an array of numbers"),
    (lambda: item_counts({"a": 1}), "df must be a pandas DataFrame"),
    (lambda: item_counts(pd.DataFrame({"user": [0], "item": [5]}), n_items=3), "n_items must exceed the largest item id 5"),
    (lambda: holdout_fraction(pd.DataFrame({"user": [0, 0], "item": [0, 1]}), fraction="0.5"), r"fraction must lie in \(0, 1\)"),
    (lambda: RK.pool_sizes(_tiny_split()[0], pd.DataFrame({"user": [0], "item": [99]}), 6),
     r"test items must lie in 0..n_items - 1 = 5, got 99"),
    (lambda: E.run_experiment(E.GlobalRanks({}, 10, np.array([], dtype=np.int64), np.array([]), np.array([]), "x",
                                            True, 0), cache=False, progress=False), "ranks must hold at least one"),
    (lambda: E.exact_metric([], "recall", 5, 100), "global_ranks must not be empty"),
    (lambda: MO.EASE(lam="x"), "lam must be a positive finite number"),
    (lambda: MO.ItemKNN(q=None), "q must be a positive finite number"),
    (lambda: MO.ALS(alpha=np.nan), "alpha must be a positive finite number"),
    (lambda: order_string([1, 2]), "values must be a dict"),
    (lambda: order_string({"a": 1.0}, atol="x"), "atol must be a finite number"),
])
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()
