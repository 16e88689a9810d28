"""Property tests (hypothesis): invariants of the kernel and of sampled metrics for random sizes."""

import numpy as np
from hypothesis import given, settings, strategies as st

from itemsampling.kernel import kernel
from itemsampling.metrics import evaluate
from itemsampling.sampling import expected_metric_given_rank, expected_sampled_metric


@st.composite
def sizes_and_ranks(draw):
    N = draw(st.integers(2, 3000))
    n = draw(st.integers(2, min(N, 300)))
    R = draw(st.lists(st.integers(1, N), min_size=1, max_size=30))
    return N, n, np.array(R)


@settings(max_examples=60, deadline=None)
@given(sizes_and_ranks(), st.booleans())
def test_kernel_rows_are_distributions_with_linear_mean(case, replacement):
    N, n, R = case
    P = kernel(N, n, replacement, R)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-9)
    np.testing.assert_allclose(P @ np.arange(1, n + 1), 1 + (n - 1) * (R - 1) / (N - 1), rtol=1e-9, atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(sizes_and_ranks(), st.booleans())
def test_sampled_auc_unbiased(case, replacement):
    N, n, R = case
    assert abs(expected_sampled_metric(R, N, n, "auc", replacement=replacement) - evaluate(R, "auc", n_items=N)) < 1e-9


@settings(max_examples=40, deadline=None)
@given(sizes_and_ranks(), st.integers(1, 50), st.booleans())
def test_expected_sampled_recall_decreases_in_R(case, k, replacement):
    # a better global rank never lowers the expected sampled recall (stochastic monotonicity)
    N, n, _ = case
    k = min(k, n)
    Rs = np.arange(1, N + 1)
    e = expected_metric_given_rank(Rs, N, n, "recall", k, replacement)
    assert np.all(np.diff(e) <= 1e-10)
    if not replacement:
        # without replacement r <= R always, so E[1[r <= k] | R] >= 1[R <= k]; with replacement a
        # decoy above the target can be drawn repeatedly and this fails for small R
        assert np.all(e + 1e-10 >= (Rs <= k))


# =============================================================================================
# The public API under random valid and invalid input (hypothesis). Valid input gives results
# in range; invalid input gives ValueError/TypeError naming the argument, never a silent result
# or a raw internal exception. ``COVERED`` lists the public functions exercised here.
# =============================================================================================
import re  # noqa: E402

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from itemsampling import experiments as E  # noqa: E402
from itemsampling import kernel as KN  # noqa: E402
from itemsampling import mapping as MP  # noqa: E402
from itemsampling import metrics as ME  # noqa: E402
from itemsampling import sampling as S  # noqa: E402
from itemsampling import theory as T  # noqa: E402
from itemsampling.data import gini, holdout_fraction, leave_last_out  # noqa: E402
from itemsampling.estimators import corrected as C  # noqa: E402
from itemsampling.estimators import distribution as DI  # noqa: E402
from itemsampling.estimators import estimate_metric, estimate_metrics, metric_from_distribution  # noqa: E402

METRICS = st.sampled_from([("recall", 5), ("ndcg", 10), ("ap", 3), ("rr", None), ("precision", 4), ("auc", None)])


@st.composite
def small_case(draw, max_n_items=400):
    N = draw(st.integers(2, max_n_items))
    n = draw(st.integers(2, min(N, 40)))
    R = np.array(draw(st.lists(st.integers(1, N), min_size=1, max_size=25)))
    return N, n, R


@settings(max_examples=40, deadline=None)
@given(small_case(), st.booleans(), st.integers(0, 2**32 - 1))
def test_sample_ranks_in_range_and_reproducible(case, replacement, seed):
    N, n, R = case
    r = S.sample_ranks(R, N, n, rng=seed, replacement=replacement)
    assert r.dtype == np.int64 and r.shape == R.shape and r.min() >= 1 and r.max() <= n
    np.testing.assert_array_equal(r, S.sample_ranks(R, N, n, rng=seed, replacement=replacement))
    assert np.all(r <= R) or replacement  # without replacement r <= R


@settings(max_examples=40, deadline=None)
@given(small_case(), METRICS, st.booleans())
def test_metric_values_and_expectations_in_range(case, metric, replacement):
    N, n, R = case
    name, k = metric
    k = None if k is None else min(k, n)
    v = ME.metric_values(R, name, k, N)
    assert np.all((v >= 0) & (v <= 1 + 1e-12))
    assert 0 <= ME.evaluate(R, name, k, N) <= 1 + 1e-12
    e = S.expected_metric_given_rank(R, N, n, name, k, replacement)
    assert np.all((e >= -1e-12) & (e <= 1 + 1e-12))
    mean, sd = S.sampled_metric_moments(R, N, n, name, k, replacement)
    assert -1e-12 <= mean <= 1 + 1e-12 and sd >= 0
    assert mean == pytest.approx(S.expected_sampled_metric(R, N, n, name, k, replacement=replacement), abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(small_case(), st.booleans())
def test_kernel_cdf_and_log_kernel(case, replacement):
    N, n, R = case
    cdf = KN.kernel_cdf(N, n, replacement, R)
    assert np.all(np.diff(cdf, axis=1) >= -1e-12) and np.all(cdf[:, -1] == 1.0) and np.all(cdf >= 0)
    lk = KN.log_kernel(N, n, replacement, R)
    np.testing.assert_allclose(np.exp(lk).sum(axis=1), 1.0, atol=1e-9)
    np.testing.assert_allclose(KN.kernel_row(int(R[0]), N, n, replacement), np.exp(lk[0]), atol=1e-12)
    th = KN.theta(R, N)
    assert np.all((th >= 0) & (th <= 1))


@settings(max_examples=20, deadline=None)
@given(small_case(max_n_items=200), st.sampled_from(["sampled", "rank_estimate", "mle", "mes", "cls"]),
       st.integers(0, 1000))
def test_estimates_in_range(case, method, seed):
    N, n, R = case
    r = S.sample_ranks(R, N, n, rng=seed)
    est = estimate_metric(r, N, n, "recall", min(5, n), method)
    assert np.isfinite(est)
    if method in ("sampled", "mle", "mes"):  # a metric of a distribution, or of sampled ranks
        assert -1e-9 <= est <= 1 + 1e-9
    both = estimate_metrics(r, N, n, ["recall"], min(5, n), [method])
    assert both[method]["recall"] == pytest.approx(est, rel=1e-9, abs=1e-12)


@settings(max_examples=25, deadline=None)
@given(small_case(max_n_items=200), st.sampled_from(["mle", "mes", "bv"]), st.integers(0, 1000))
def test_rank_distributions_are_distributions(case, method, seed):
    N, n, R = case
    r = S.sample_ranks(R, N, n, rng=seed)
    kw = {"gamma": 0.5} if method == "bv" else {}
    P = DI.estimate_rank_distribution(r, N, n, method, **kw)
    assert P.shape == (N,) and np.all(P >= 0) and P.sum() == pytest.approx(1.0, abs=1e-9)
    assert 0 <= metric_from_distribution(P, "ndcg", 10) <= 1 + 1e-9


@settings(max_examples=30, deadline=None)
@given(small_case(max_n_items=300), st.sampled_from([("recall", 5), ("ndcg", 10), ("ap", None)]))
def test_corrected_metrics_cls_monotone_and_rank_estimate_in_range(case, metric):
    N, n, R = case
    x = C.corrected_metric(metric[0], metric[1], N, n, "cls")
    assert np.all(np.isfinite(x)) and np.all(np.diff(x) <= 1e-9)
    re_ = C.rank_estimate(np.arange(1, n + 1), N, n)
    assert re_[0] == 1 and re_[-1] == N and np.all(np.diff(re_) >= 0)
    mean, sd = C.corrected_moments(R, N, x)
    assert np.isfinite(mean) and sd >= 0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=50))
def test_projection_and_gini(values):
    p = DI.project_to_simplex(values)
    assert np.all(p >= 0) and p.sum() == pytest.approx(1.0, abs=1e-9)
    x = np.abs(np.asarray(values))
    if x.sum() > 0:
        g = gini(x)
        assert -1e-12 <= g <= 1 - 1 / x.size + 1e-12


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 5000), st.floats(0.05, 5.0), st.floats(1e-4, 0.9))
def test_theory_distributions(N, a, q):
    for P in (T.beta_rank_distribution(N, a), T.geometric_rank_distribution(N, q)):
        assert P.shape == (N,) and np.all(P >= 0) and P.sum() == pytest.approx(1.0, abs=1e-9)
    curve = T.recall_curve(T.beta_rank_distribution(N, a), ks=[1, N])
    assert curve[-1] == pytest.approx(1.0) and np.all(np.diff(curve) >= -1e-12)


@settings(max_examples=30, deadline=None)
@given(small_case(max_n_items=2000), st.sampled_from(["linear", "bound", "beta"]))
def test_mappings_map_into_the_catalog(case, kind):
    N, n, _ = case
    ks = np.arange(1, n + 1)
    f = MP.mapping(kind, ks, N, n, a=0.5 if kind == "beta" else None)
    # the bound map is not clipped as printed: f(n) may pass N by about (N - 1) / (2(n - 1))
    top = N + ((N - 1) / (2 * (n - 1)) + 1 if kind == "bound" else 0)
    assert np.all(np.isfinite(f)) and np.all(f >= 1 - 1e-9) and np.all(f <= top + 1e-9)
    assert np.all(np.diff(f) >= -1e-9)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 30)), min_size=1, max_size=60), st.integers(0, 99))
def test_splits_partition_the_interactions(pairs, seed):
    df = pd.DataFrame(pairs, columns=["user", "item"]).drop_duplicates()
    counts = df["user"].value_counts()
    df = df[df["user"].isin(counts[counts >= 2].index)].reset_index(drop=True)
    if df.empty:
        return
    df["rating"] = 1.0
    df["timestamp"] = np.arange(len(df), dtype=np.int64) % 3
    for train, test in (leave_last_out(df, rng=seed), holdout_fraction(df, 0.3, rng=seed)):
        assert len(train) + len(test) == len(df)
        both = pd.concat([train, test])[["user", "item"]].sort_values(["user", "item"]).to_numpy()
        np.testing.assert_array_equal(both, df[["user", "item"]].sort_values(["user", "item"]).to_numpy())
        assert set(test["user"]) <= set(train["user"])


@settings(max_examples=30, deadline=None)
@given(small_case(max_n_items=500), st.booleans(), st.integers(0, 1000))
def test_pool_ranks_in_range(case, replacement, seed):
    N, n, R = case
    pools = np.maximum(R, np.full(R.size, N))
    r = E.sample_pool_ranks(R, pools, n, rng=seed, replacement=replacement)
    assert r.min() >= 1 and r.max() <= n
    mean, sd = E.expected_sampled_by_pool(R, pools, n, "recall", min(3, n), replacement)
    assert 0 <= mean <= 1 and sd >= 0


# --- invalid input -----------------------------------------------------------------------------
NOT_INT = st.one_of(st.floats(allow_nan=True).filter(lambda x: not float(x).is_integer() if np.isfinite(x) else True),
                    st.text(max_size=3), st.none(), st.booleans(), st.just([1, 2]))
NOT_BOOL = st.one_of(st.text(max_size=5), st.integers(-2, 2), st.none(), st.floats(allow_nan=False), st.just([True]))
BAD_RANKS = st.one_of(
    st.lists(st.integers(-5, 0), min_size=1, max_size=5),                       # below 1
    st.lists(st.integers(10**6, 10**7), min_size=1, max_size=5),                # above N
    st.lists(st.floats(1.1, 9.9).filter(lambda x: not x.is_integer()), min_size=1, max_size=5),
    st.just([]), st.just([[1, 2], [3, 4]]), st.just(["a", "b"]), st.just([1.0, np.nan]))
BAD_PROBS = st.one_of(st.lists(st.floats(0.3, 1.0), min_size=10, max_size=10),          # sums > 1
                      st.just([-0.1] + [1.1 / 9] * 9), st.just(["x"] * 10), st.just([np.nan] * 10),
                      st.just("0.1"))
BAD_METRIC = st.one_of(st.text(max_size=6).filter(lambda s: s.lower() not in
                                                  {"recall", "hr", "ndcg", "ap", "rr", "auc", "precision",
                                                   "map", "mrr", "hit", "hits"}),
                       st.none(), st.integers())

K50 = KN.kernel(50, 10)
BASE_R = np.array([1, 3, 7, 20])
INVALID = [
    # (function, valid kwargs, argument, strategy of invalid values, pattern the message must hold)
    (KN.kernel, dict(n_items=50, sample_size=10), "n_items", NOT_INT, "n_items"),
    (KN.kernel, dict(n_items=50, sample_size=10), "sample_size", st.integers(-3, 1) | NOT_INT, "sample_size"),
    (KN.kernel, dict(n_items=50, sample_size=10), "replacement", NOT_BOOL, "replacement"),
    (KN.kernel, dict(n_items=50, sample_size=10, global_ranks=BASE_R), "global_ranks", BAD_RANKS, "global_ranks"),
    (KN.kernel_cdf, dict(n_items=50, sample_size=10), "replacement", NOT_BOOL, "replacement"),
    (KN.theta, dict(global_ranks=BASE_R, n_items=50), "global_ranks", BAD_RANKS, "global_ranks"),
    (S.sample_ranks, dict(global_ranks=BASE_R, n_items=50, sample_size=10, rng=0), "rng",
     st.one_of(st.floats(allow_nan=True), st.text(max_size=3), st.booleans(), st.integers(-10, -1)), "rng"),
    (S.sample_ranks, dict(global_ranks=BASE_R, n_items=50, sample_size=10, rng=0), "replacement", NOT_BOOL, "replacement"),
    (S.sample_ranks, dict(global_ranks=BASE_R, n_items=50, sample_size=10, rng=0), "global_ranks", BAD_RANKS, "global_ranks"),
    (S.expected_sampled_metric, dict(global_ranks=BASE_R, n_items=50, sample_size=10, metric="recall", k=5),
     "metric", BAD_METRIC, "metric"),
    (S.expected_sampled_metric, dict(global_ranks=BASE_R, n_items=50, sample_size=10, metric="recall", k=5),
     "k", st.integers(-5, 0) | NOT_INT.filter(lambda v: v is not None), "k"),
    (ME.evaluate, dict(ranks=BASE_R, metric="ndcg", k=5, n_items=50), "ranks", BAD_RANKS, "ranks"),
    (ME.metric_curve, dict(ranks=BASE_R, metric="recall", ks=[1, 5], n_items=50), "n_items",
     NOT_INT.filter(lambda v: v is not None), "n_items"),
    (estimate_metric, dict(sampled_ranks=[1, 2, 3], n_items=50, sample_size=10, metric="recall", k=5,
                           method="sampled"), "sampled_ranks", BAD_RANKS, "sampled_ranks"),
    (estimate_metric, dict(sampled_ranks=[1, 2, 3], n_items=50, sample_size=10, metric="recall", k=5,
                           method="bv", gamma=0.1), "gamma",
     st.one_of(st.floats(1.01, 1e9), st.floats(-1e9, -0.01), st.text(max_size=3), st.just(np.nan)), "gamma"),
    (estimate_metric, dict(sampled_ranks=[1, 2, 3], n_items=50, sample_size=10, metric="recall", k=5,
                           method="sampled"), "method", st.text(max_size=8).filter(lambda s: s not in
                                                                                  ("sampled", "mle", "mes", "cls", "bv", "mn", "wmle")), "method"),
    (estimate_metrics, dict(sampled_ranks=[1, 2, 3], n_items=50, sample_size=10, metrics="recall", k=5,
                            methods=["mes"]), "eta", st.one_of(st.floats(-1e3, 0.0), st.text(max_size=3)), "eta"),
    (C.corrected_metric, dict(metric="recall", k=5, n_items=50, sample_size=10, method="cls"), "prior",
     st.sampled_from([[0.02] * 49, ["x"] * 50, [np.nan] * 50, [0.03] * 50, [-0.02] + [1.02 / 49] * 49, "uniform"]),
     "prior"),
    (C.corrected_metric, dict(metric="recall", k=5, n_items=50, sample_size=10, method="cls"), "replacement",
     NOT_BOOL, "replacement"),
    (C.corrected_estimate, dict(sampled_ranks=[1, 2], corrected=np.linspace(1, 0, 10)), "corrected",
     st.one_of(st.just("x"), st.just([1.0]), st.just([np.nan] * 10)), "corrected"),
    (DI.mes_dual, dict(p_tilde=np.full(10, 0.1), K=K50, a=0.1), "p_tilde", BAD_PROBS, "p_tilde"),
    (DI.mes_dual, dict(p_tilde=np.full(10, 0.1), K=K50, a=0.1), "a",
     st.one_of(st.floats(-10, 0), st.text(max_size=2), st.none(), st.just(np.inf)), "a"),
    (DI.mes_dual, dict(p_tilde=np.full(10, 0.1), K=K50, a=0.1), "max_iter", st.integers(-5, 0) | NOT_INT, "max_iter"),
    (DI.bv_rank_distribution, dict(p_tilde=np.full(10, 0.1), n_items=50, sample_size=10), "project", NOT_BOOL, "project"),
    (DI.bv_rank_distribution, dict(p_tilde=np.full(10, 0.1), n_items=50, sample_size=10), "p_tilde", BAD_PROBS, "p_tilde"),
    (DI.project_to_simplex, dict(v=[0.2, 0.5]), "v", st.one_of(st.just([]), st.just("x"), st.just([np.nan]),
                                                                 st.floats(), st.just([[1.0]])), "v"),
    (T.beta_rank_distribution, dict(n_items=50, a=0.5), "a", st.one_of(st.floats(-10, 0), st.text(max_size=2)), "a"),
    (T.deviation_radius, dict(probs=[0.1, 0.5], delta=0.1), "delta",
     st.one_of(st.floats(1.0, 1e9), st.floats(-1e9, 0.0), st.text(max_size=2), st.none()), "delta"),
    (T.poisson_binomial_pmf, dict(probs=[0.1, 0.5]), "probs",
     st.one_of(st.just("x"), st.just([1.5]), st.just([-0.1]), st.just([]), st.just([np.nan])), "probs"),
    (MP.sample_beta_ranks, dict(a=0.5, n_items=50, size=5, rng=0), "size", st.integers(-5, 0) | NOT_INT, "size"),
    (MP.hit_ratio_at, dict(global_ranks=BASE_R, n_items=50, positions=[1, 2]), "positions",
     st.one_of(st.just([]), st.just(["x"]), st.just([np.inf]), st.just([[1, 2]])), "positions"),
    (gini, dict(values=[1, 2, 3]), "values", st.one_of(st.just("abc"), st.just([-1, 2]), st.just([]),
                                                       st.just([0, 0]), st.just([np.nan, 1])), "values"),
    (E.sample_pool_ranks, dict(global_ranks=BASE_R, pool_sizes=np.full(4, 50), sample_size=10, rng=0),
     "pool_sizes", st.one_of(st.just(np.full(4, 50.5)), st.just(np.full(3, 50)), st.just(np.full(4, 1)),
                             st.just(["a"] * 4)), "pool_sizes"),
    (E.sample_pool_ranks, dict(global_ranks=BASE_R, pool_sizes=np.full(4, 50), sample_size=10, rng=0),
     "replacement", NOT_BOOL, "replacement"),
]
COVERED = sorted({f"{f.__module__}.{f.__name__}" for f, *_ in INVALID} | {
    "itemsampling.sampling.expected_metric_given_rank", "itemsampling.sampling.sampled_metric_moments",
    "itemsampling.metrics.metric_values", "itemsampling.kernel.log_kernel", "itemsampling.kernel.kernel_row",
    "itemsampling.estimators.distribution.estimate_rank_distribution",
    "itemsampling.estimators.metric_from_distribution", "itemsampling.estimators.corrected.rank_estimate",
    "itemsampling.estimators.corrected.corrected_moments", "itemsampling.theory.geometric_rank_distribution",
    "itemsampling.theory.recall_curve", "itemsampling.mapping.mapping", "itemsampling.data.frames.leave_last_out",
    "itemsampling.data.frames.holdout_fraction", "itemsampling.experiments.expected_sampled_by_pool"})


def test_covered_names_are_public_functions():
    import importlib

    for qual in COVERED:
        mod, name = qual.rsplit(".", 1)
        assert not name.startswith("_") and callable(getattr(importlib.import_module(mod), name)), qual
    assert len(COVERED) >= 30


@pytest.mark.parametrize("case", INVALID, ids=[f"{c[0].__name__}-{c[2]}" for c in INVALID])
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_invalid_input_is_refused_naming_the_argument(case, data):
    fn, base, arg, strategy, pattern = case
    bad = data.draw(strategy, label=arg)
    kw = dict(base, **{arg: bad})
    with pytest.raises((ValueError, TypeError)) as exc:
        fn(**kw)
    assert re.search(pattern, str(exc.value)), f"{fn.__name__}({arg}={bad!r}): {exc.value}"


# =============================================================================================
# The low-level EM helpers (issue 19): valid mixing distributions and kernels give results with
# the invariants of the MLE; a mixing distribution or kernel that is negative, NaN or not
# normalised is refused naming the argument, never turned into a number.
# =============================================================================================
@st.composite
def em_case(draw):
    N = draw(st.integers(2, 60))
    n = draw(st.integers(2, min(N, 12)))
    K = KN.kernel(N, n, draw(st.booleans()))
    w = np.array(draw(st.lists(st.floats(0.01, 1.0), min_size=N, max_size=N)))
    counts = np.array(draw(st.lists(st.integers(0, 20), min_size=n, max_size=n)), dtype=float)
    counts[draw(st.integers(0, n - 1))] += 1  # a positive total
    return w / w.sum(), counts, K


EM_HELPERS = {
    "mixture_log_likelihood": lambda pi, c, K: DI.mixture_log_likelihood(pi, c, K),
    "likelihood_gradient": lambda pi, c, K: DI.likelihood_gradient(pi, c, K),
    "kkt_gap": lambda pi, c, K: DI.kkt_gap(pi, c, K),
    "em_step": lambda pi, c, K: DI.em_step(pi, c, K),
    "mle_em": lambda pi, c, K: DI.mle_em(c, K, pi0=pi, max_iter=5),
}


@settings(max_examples=40, deadline=None)
@given(em_case())
def test_em_helpers_on_valid_input(case):
    pi, c, K = case
    ll = DI.mixture_log_likelihood(pi, c, K)
    assert np.isfinite(ll) and ll <= 1e-12  # a mean of logs of probabilities
    g = DI.likelihood_gradient(pi, c, K)
    assert abs(pi @ g - 1.0) < 1e-9  # sum_R pi_R g_R = sum_r c_r = 1
    assert DI.kkt_gap(pi, c, K) >= -1e-9  # max_R g_R >= the pi-average of g, which is 1
    new = DI.em_step(pi, c, K)
    assert np.all(new >= 0) and abs(new.sum() - 1.0) < 1e-12
    assert DI.mixture_log_likelihood(new, c, K) >= ll - 1e-10  # EM never decreases the likelihood


def _corrupt(kind, pi, K):
    pi, K = pi.copy(), K.copy()
    if kind == "pi-negative":
        pi[0] -= 1.0
        pi[-1] += 1.0
    elif kind == "pi-nan":
        pi[0] = np.nan
    elif kind == "pi-not-normalised":
        pi *= 1.5
    elif kind == "K-negative":
        K[0, 0] = -0.25
    elif kind == "K-nan":
        K[-1, -1] = np.nan
    return pi, K


@pytest.mark.parametrize("helper", sorted(EM_HELPERS))
@settings(max_examples=15, deadline=None)
@given(em_case(), st.sampled_from(["pi-negative", "pi-nan", "pi-not-normalised", "K-negative", "K-nan"]))
def test_em_helpers_refuse_bad_distributions_and_kernels(helper, case, kind):
    pi, c, K = case
    bad_pi, bad_K = _corrupt(kind, pi, K)
    name = "pi0" if helper == "mle_em" and kind.startswith("pi") else kind.split("-")[0]
    with pytest.raises(ValueError, match=rf"^{name} must"):
        EM_HELPERS[helper](bad_pi, c, bad_K)
