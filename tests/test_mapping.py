"""Tests of itemsampling.mapping: the mapping functions of Li et al. 2020 and TORS Sec. 3."""

import math

import numpy as np
import pytest
from scipy.special import beta as beta_fn
from scipy.special import comb

from itemsampling.kernel import kernel
from itemsampling.mapping import (
    alignment_errors,
    beta_log_increments,
    beta_mapping,
    beta_mapping_closed_form,
    beta_rank_cdf,
    beta_mapping_printed_product,
    uniform_mapping,
    bound_mapping,
    fit_beta,
    hit_ratio_at,
    linear_mapping,
    mapping,
    oracle_mapping,
    round_position,
    sample_beta_ranks,
    winner_agreement,
)
from itemsampling.sampling import sample_ranks, shr_moments

# TORS (Li et al. 2024) Table 3, n = 1,000: f(K) for K = 1, 2 printed for each dataset and map.
TORS_TABLE3 = {
    # dataset: (N, {map: (f(1), f(2))})
    "pinterest-20": (9916, {"linear": (1, 11), "bound": (5, 15), "beta0.5": (9, 19), "beta1": (11, 21)}),
    "yelp": (25815, {"linear": (1, 27), "bound": (13, 39), "beta0.5": (21, 47), "beta1": (27, 53)}),
    "ml-20m": (20720, {"linear": (1, 22), "bound": (10, 31), "beta0.5": (17, 38), "beta1": (22, 42)}),
}

GRID_N = [2, 7, 50, 3706, 20720, 139331]
GRID_n = [2, 3, 10, 100, 1000]
GRID_a = [0.05, 0.2, 0.5, 1.0, 2.0, 5.0]


def _grid():
    for N in GRID_N:
        for n in GRID_n:
            if n <= N:
                yield N, n


# ----------------------------------------------------------------------------- paper values
@pytest.mark.parametrize("dataset", list(TORS_TABLE3))
def test_tors_table3_reproduced_exactly(dataset):
    N, printed = TORS_TABLE3[dataset]
    ks = [1, 2]
    ours = {
        "linear": round_position(mapping("linear", ks, N, 1000)),
        "bound": mapping("bound", ks, N, 1000).astype(int),  # already floored (Eq. 22)
        "beta0.5": round_position(mapping("beta", ks, N, 1000, a=0.5)),
        "beta1": round_position(mapping("beta", ks, N, 1000, a=1.0)),
    }
    for name, values in printed.items():
        assert tuple(int(v) for v in ours[name]) == values, (dataset, name)


def test_bound_is_floor_not_round():
    # pinterest-20 K = 1: (1/2) * 9915/999 + 1/2 = 5.46 -> 5 (floor), and ml-20m K = 1: 10.87 -> 10.
    assert bound_mapping(1, 9916, 1000)[0] == 5.0
    assert bound_mapping(1, 20720, 1000)[0] == 10.0
    assert int(round_position(0.5 * 20719 / 999 + 0.5)) == 11  # rounding would have printed 11


# ----------------------------------------------------------------------------- closed forms
def test_linear_hand_values():
    # (k - 1)/(n - 1) * (N - 1) + 1 with N = 101, n = 11: 1, 11, ..., 101.
    np.testing.assert_allclose(linear_mapping(np.arange(1, 12), 101, 11), np.arange(1, 102, 10))


def test_bound_hand_values():
    # N = 101, n = 11: floor((k - 1/2) * 10 + 1/2) = 10k - 5 + 0 -> 5, 15, ..., 105 (exceeds N at k = n).
    np.testing.assert_array_equal(bound_mapping(np.arange(1, 12), 101, 11), 10 * np.arange(1, 12) - 5 + 0)
    # the bound map is the midpoint of the Hoeffding limits of TORS Eq. 21 (t cancels)
    N, n, t = 3706, 100, 3.7
    k = np.arange(1, n + 1)
    lower = (k - t) * (N - 1) / (n - 1) + 1
    upper = (k + t - 1) * (N - 1) / (n - 1)
    np.testing.assert_array_equal(bound_mapping(k, N, n), np.floor((lower + upper) / 2))


@pytest.mark.parametrize("N,n", list(_grid()))
def test_beta1_is_uniform_linear_map(N, n):
    # TORS Eq. 56: f(k; 1) = k (N - 1)/n + 1
    k = np.arange(1, n + 1)
    np.testing.assert_allclose(beta_mapping(k, N, n, 1.0), k * (N - 1) / n + 1, rtol=1e-11)


@pytest.mark.parametrize("a", GRID_a)
@pytest.mark.parametrize("N,n", list(_grid()))
def test_last_point_is_N(N, n, a):
    # Lemma C.1: f(n; a) = N for every a
    assert beta_mapping(n, N, n, a)[0] == pytest.approx(N, rel=1e-10)


@pytest.mark.parametrize("a", GRID_a)
def test_recurrence_matches_closed_form(a):
    for N, n in _grid():
        k = np.arange(1, n + 1)
        np.testing.assert_allclose(beta_mapping(k, N, n, a), beta_mapping_closed_form(k, N, n, a), rtol=1e-9)


@pytest.mark.parametrize("a", [0.3, 0.5, 0.8, 1.0, 1.7])
def test_recurrence_matches_literal_eq16(a):
    # Li et al. 2020 Eq. 16-17 evaluated literally in floating point (fine at these sizes)
    N, n = 3706, 100
    f = [(N - 1) * (a * beta_fn(a, n)) ** (1 / a) + 1]
    for k in range(1, n):
        f.append((a * (N - 1) ** a * comb(n - 1, k) * beta_fn(a + k, n - k) + (f[-1] - 1) ** a) ** (1 / a) + 1)
    np.testing.assert_allclose(beta_mapping(np.arange(1, n + 1), N, n, a), f, rtol=1e-9)


def test_printed_product_form_breaks_lemma_c1():
    # SEED-NOTES item 1: TORS Eq. 24/54 print a product; it does not end at N, the sum does.
    N, n, a = 3706, 100, 0.5
    f = (N - 1) * (a * beta_fn(a, n)) ** (1 / a) + 1
    for k in range(1, n):
        f = (a * (N - 1) ** a * comb(n - 1, k) * beta_fn(a + k, n - k) * (f - 1) ** a) ** (1 / a) + 1
    assert abs(f - N) > 1000
    assert beta_mapping(n, N, n, a)[0] == pytest.approx(N)


def test_log_space_survives_small_a_and_large_n():
    # plain floats underflow: a (N-1)^a B(a, n) ** (1/a) with a = 0.01 gives 0 or inf
    f = beta_mapping(np.arange(1, 5001), 200000, 5000, 0.01)
    assert np.all(np.isfinite(f)) and np.all(f >= 1)
    assert f[-1] == pytest.approx(200000, rel=1e-9)
    inc = beta_log_increments(200000, 5000, 0.01)
    assert np.all(np.isfinite(inc))


# ----------------------------------------------------------------------------- monotonicity
@pytest.mark.parametrize("kind,a", [("linear", None), ("bound", None), ("beta", 0.05), ("beta", 0.5),
                                    ("beta", 1.0), ("beta", 3.0)])
def test_increasing_in_k(kind, a):
    for N, n in _grid():
        f = mapping(kind, np.arange(1, n + 1), N, n, a)
        assert np.all(np.diff(f) > 0), (kind, a, N, n)


def test_increasing_in_a():
    # SEED-NOTES item 15: f(k; a) increases with a for k < n (and equals N at k = n)
    a_grid = np.array([0.05, 0.1, 0.2, 0.3, 0.5, 0.8, 1.0, 1.5, 3.0])
    for N, n in _grid():
        if n < 3:
            continue
        k = np.arange(1, n)
        F = np.array([beta_mapping(k, N, n, a) for a in a_grid])
        assert np.all(np.diff(F, axis=0) > 0), (N, n)


def test_beta_close_to_linear_for_large_k():
    # Li et al. 2020 Fig. 4: the relative difference from f(k; 1) shrinks as k grows
    N, n = 3706, 100
    k = np.arange(1, n + 1)
    for a in (0.2, 0.6, 0.8):
        rel = np.abs(beta_mapping(k, N, n, a) - beta_mapping(k, N, n, 1.0)) / beta_mapping(k, N, n, 1.0)
        assert rel[0] > 0.2 if a == 0.2 else rel[0] > 0.05
        assert rel[49] < 0.1 * rel[0]
        assert np.all(np.diff(rel) <= 1e-12)


# ----------------------------------------------------------------------------- Beta rank model and fit
def test_sample_beta_ranks_follow_model_cdf():
    N, a, M = 1000, 0.4, 200000
    R = sample_beta_ranks(a, N, M, rng=3)
    K = np.array([2, 5, 20, 100, 500, 999])
    emp = np.array([np.mean(R <= x) for x in K])
    p = beta_rank_cdf(K, N, a)
    se = np.sqrt(p * (1 - p) / M)
    assert np.all(np.abs(emp - p) < 5 * se)


def _population_fixed_point(N, n, a, a0=0.5):
    """Eq. 19 with M -> infinity: a = -1 / E[ln x(r; a)], r drawn from the Beta(a,1) rank model."""
    W = np.diff(np.concatenate([[0.0], beta_rank_cdf(np.arange(1, N + 1), N, a)]))
    p_r = W @ kernel(N, n, True)  # P(r) = sum_R W_R P(r | R)
    b = a0
    for _ in range(500):
        lx = np.log(beta_mapping(np.arange(1, n + 1), N, n, b) - 1) - np.log(N - 1)
        lx = np.minimum(lx, 0.0)
        new = -1.0 / float(p_r @ lx)
        if abs(new - b) < 1e-12:
            break
        b = new
    return b, p_r


@pytest.mark.parametrize("a", [0.3, 0.5, 1.0])
def test_fit_beta_agrees_with_population_fixed_point(a):
    # Monte Carlo fit vs the exact M -> infinity fixed point, within 4 standard errors (delta method)
    N, n, M = 3706, 100, 40000
    star, _ = _population_fixed_point(N, n, a)
    r = sample_ranks(sample_beta_ranks(a, N, M, rng=11), N, n, rng=12)
    est = fit_beta(r, N, n)
    lx = np.minimum(np.log(beta_mapping(r, N, n, est) - 1) - np.log(N - 1), 0.0)
    se = est**2 * lx.std() / math.sqrt(M)
    assert abs(est - star) < 4 * se, (est, star, se)


@pytest.mark.parametrize("a", [0.5, 0.8, 1.0])
def test_fit_beta_recovers_a(a):
    # Stated tolerance: |a_hat - a| < 0.05 for a in [0.5, 1] with N = 20,720 and n = 1,000
    # (the estimator is biased upwards for small a and small n; see fit_beta's docstring).
    N, n, M = 20720, 1000, 20000
    r = sample_ranks(sample_beta_ranks(a, N, M, rng=21), N, n, rng=22)
    assert abs(fit_beta(r, N, n) - a) < 0.05
    assert abs(fit_beta(r, N, n, a0=1.0) - fit_beta(r, N, n, a0=0.2)) < 1e-8  # same fixed point


def test_fit_beta_is_a_fixed_point_of_eq19():
    N, n = 3706, 100
    r = sample_ranks(sample_beta_ranks(0.4, N, 5000, rng=1), N, n, rng=2)
    a = fit_beta(r, N, n)
    rhs = -r.size / np.sum(np.log((beta_mapping(r, N, n, a) - 1) / (N - 1)))
    assert rhs == pytest.approx(a, rel=1e-8)


def test_fit_beta_bias_small_a_small_n():
    # The documented bias: for a = 0.2 at n = 100 the fit is above a (f(r) is the top of the interval).
    N, n = 3706, 100
    star, _ = _population_fixed_point(N, n, 0.2)
    assert star > 0.25


# ----------------------------------------------------------------------------- oracle and evaluation
def test_oracle_is_identity_without_sampling_loss():
    # n = N without replacement: r = R, so E[SHR@k] = HR@k and f*(k) = k
    N = 40
    R = np.random.default_rng(0).permutation(np.repeat(np.arange(1, N + 1), 3))
    np.testing.assert_array_equal(oracle_mapping(R, N, N, replacement=False), np.arange(1, N + 1))


def test_oracle_minimises_the_gap():
    N, n = 500, 20
    R = sample_beta_ranks(0.5, N, 3000, rng=4)
    f = oracle_mapping(R, N, n)
    target, _ = shr_moments(R, N, n)
    hr = np.array([np.mean(R <= K) for K in range(1, N + 1)])
    for k in range(n):
        gap = np.abs(hr - target[k])
        assert abs(hr[f[k] - 1] - target[k]) == pytest.approx(gap.min(), abs=1e-15)
        assert f[k] == np.flatnonzero(np.isclose(gap, gap.min(), rtol=0, atol=1e-15))[0] + 1


def test_oracle_close_to_beta_map_under_beta_model():
    # Independent methods: on ranks from the Beta(a,1) model the oracle and f(k; a) agree within 10%
    N, n, a = 3706, 100, 0.3
    R = sample_beta_ranks(a, N, 60000, rng=5)
    k = np.array([1, 2, 5, 10, 20, 50])
    rel = np.abs(oracle_mapping(R, N, n, k) - beta_mapping(k, N, n, a)) / beta_mapping(k, N, n, a)
    assert np.all(rel < 0.1), rel


def test_hit_ratio_at_hand_values():
    R = [1, 2, 2, 5]
    out = hit_ratio_at(R, 10, [0.6, 1.49, 1.5, 4.7, 12.0])  # -> K = 1, 1, 2, 5, 10
    np.testing.assert_allclose(out, [0.25, 0.25, 0.75, 1.0, 1.0])


def test_alignment_errors_hand_values():
    s = np.array([0.1, 0.2, 0.4, 0.5] + [0.5] * 8)
    g = np.array([0.2, 0.1, 0.4, 0.6] + [0.5] * 8)
    e = alignment_errors(s, g)
    assert e["abs"] == pytest.approx(0.3 / 12)
    assert e["rel"] == pytest.approx((1.0 + 0.5 + 0 + 0.2) / 12)
    assert e["abs@1"] == pytest.approx(0.1) and e["rel@1"] == pytest.approx(1.0)
    assert e["abs@2-10"] == pytest.approx(0.2 / 9)
    assert e["rel@2-10"] == pytest.approx(0.7 / 9)


def test_winner_agreement_linear_fails_where_beta_succeeds():
    # A: every user at global rank 2; B: half at rank 1, half at rank N.
    # HR@1: A 0, B 0.5 -> B wins globally at f(1) = 1 (linear), but sampled SHR@1 of A is
    # (1 - 1/(N-1))^(n-1) ~ 0.9 > 0.5, so the sampled winner is A. At f(1; 1) ~ N/n both are right.
    N, n = 1000, 100
    ranks = {"A": np.full(400, 2), "B": np.repeat([1, N], 200)}
    pos = {"linear": linear_mapping([1], N, n), "beta@1": beta_mapping([1], N, n, 1.0)}
    out = winner_agreement(ranks, N, n, [1], pos, n_repeats=50, rng=0)
    assert out["linear"][1] == 0 and out["beta@1"][1] == 50
    assert out["_global_winner"]["linear"][1] == "B" and out["_global_winner"]["beta@1"][1] == "A"
    again = winner_agreement(ranks, N, n, [1], pos, n_repeats=50, rng=0)
    assert again == out


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("call,match", [
    (lambda: mapping("beta", 0, 100, 10, a=0.5), "k must lie in 1..10"),
    (lambda: mapping("linear", 11, 100, 10), "k must lie in 1..10"),
    (lambda: mapping("bound", [1, 2.5], 100, 10), "k must hold integers"),
    (lambda: mapping("beta", 1, 100, 10, a=0), "a must be a positive"),
    (lambda: mapping("beta", 1, 100, 10, a=-0.3), "a must be a positive"),
    (lambda: mapping("beta", 1, 100, 10, a=float("nan")), "a must be a positive"),
    (lambda: mapping("beta", 1, 100, 10), "a is required"),
    (lambda: mapping("linear", 1, 100, 10, a=0.5), "only used by kind='beta'"),
    (lambda: mapping("cubic", 1, 100, 10), "kind must be one of"),
    (lambda: mapping("linear", 1, 10, 100), "sample_size must be <= 10"),
    (lambda: mapping("linear", 1, 1, 1), "n_items must be >= 2"),
    (lambda: fit_beta([10, 10, 10], 100, 10), "a is unbounded"),
    (lambda: fit_beta([1, 11], 100, 10), "sampled_ranks must lie in 1..10"),
    (lambda: fit_beta([1, 2], 100, 10, a0=0), "a must be a positive"),
    (lambda: sample_beta_ranks(-1, 100, 5), "a must be a positive"),
    (lambda: alignment_errors([0.0, 0.5], [0.1, 0.5]), "sampled_hr must lie in"),
    (lambda: oracle_mapping([1, 200], 100, 10), "global_ranks must lie in 1..100"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()



# ----------------------------------------------------------------------------- uniform map and the misprint
def test_uniform_mapping_is_beta_at_one():
    N, n = 3706, 100
    k = np.arange(1, n + 1)
    np.testing.assert_allclose(uniform_mapping(k, N, n), k * (N - 1) / n + 1, rtol=0)
    np.testing.assert_allclose(uniform_mapping(k, N, n), beta_mapping(k, N, n, 1.0), rtol=1e-12)
    np.testing.assert_allclose(uniform_mapping(k, N, n), beta_mapping_closed_form(k, N, n, 1.0), rtol=1e-12)
    assert uniform_mapping(n, N, n)[0] == pytest.approx(N, rel=1e-15)


def test_printed_product_by_hand_and_misses_lemma_c1():
    from scipy.special import beta as B, comb
    N, n, a = 3706, 100, 0.5
    f1 = (N - 1) * (a * B(a, n)) ** (1 / a) + 1
    f2 = (a * (N - 1) ** a * comb(n - 1, 1) * B(a + 1, n - 1) * (f1 - 1) ** a) ** (1 / a) + 1
    np.testing.assert_allclose(beta_mapping_printed_product([1, 2], N, n, a), [f1, f2], rtol=1e-10)
    # same start as the sum form, but it does not end at N (TORS Lemma C.1)
    assert beta_mapping_printed_product(1, N, n, a)[0] == pytest.approx(beta_mapping(1, N, n, a)[0], rel=1e-12)
    assert abs(beta_mapping_printed_product(n, N, n, a)[0] - N) > 0.5 * N
