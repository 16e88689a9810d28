"""itemsampling.users: TORS Eq. 46-52 sample sizes, interval coverage, tests against scipy's own
functions and hand computations, multiple comparisons, refused input."""

import math

import numpy as np
import pytest
from scipy import stats

from itemsampling.users import (
    compare_models, confidence_interval, critical_value, hoeffding_margin, multiple_comparisons, sample_size,
)


# ------------------------------------------------------------------------------- sample sizes
def test_tors_worked_sample_sizes():
    # TORS Eq. 47: 1.96^2 * 0.5^2 / 0.03^2 ~ 1067 and / 0.01^2 ~ 9604 (95%, p = 0.5)
    assert sample_size(0.03, rounding="nearest") == 1067
    assert sample_size(0.01, rounding="nearest") == 9604
    assert sample_size(0.01) == 9604
    assert sample_size(0.03) == 1068  # 1067.07 rounded up: the smallest m that meets the margin
    m = 1.959963984540054 ** 2 * 0.25 / 0.03 ** 2
    assert sample_size(0.03) == math.ceil(m) and sample_size(0.03, rounding="nearest") == round(m)


def test_two_model_sample_size_doubles_and_bonferroni_raises_z():
    # TORS Eq. 52: twice Eq. 46
    m1 = 0.5 * 0.5 * (critical_value(0.95) / 0.01) ** 2
    assert sample_size(0.01, comparison=True) == math.ceil(2 * m1)
    # Bonferroni over 10 simultaneous intervals: each at 1 - 0.05/10 = 99.5%, z = 2.807
    z = stats.norm.ppf(1 - 0.005 / 2)
    assert z == pytest.approx(2.807034, abs=1e-6)
    assert sample_size(0.02, n_models=10) == math.ceil(0.25 * (z / 0.02) ** 2)
    assert sample_size(0.02, n_models=10) == sample_size(0.02, confidence=0.995)
    # p(1-p) is largest at p = 0.5
    assert sample_size(0.02, p=0.3) == math.ceil(0.21 * (critical_value() / 0.02) ** 2) < sample_size(0.02)


@pytest.mark.parametrize("kw,match", [
    ({"margin": 0.0}, "margin must be a margin of error in \\(0, 1\\)"),
    ({"margin": 1.5}, "margin must be"),
    ({"margin": float("nan")}, "margin must be"),
    ({"margin": 0.03, "confidence": 1.0}, "confidence must be a confidence level in \\(0, 1\\)"),
    ({"margin": 0.03, "confidence": 95}, "confidence must be"),
    ({"margin": 0.03, "p": 0.0}, "p must be a proportion"),
    ({"margin": 0.03, "n_models": 0}, "n_models must be >= 1"),
    ({"margin": 0.03, "comparison": "yes"}, "comparison must be True or False"),
    ({"margin": 0.03, "rounding": "down"}, "rounding must be"),
])
def test_sample_size_bad_input(kw, match):
    with pytest.raises(ValueError, match=match):
        sample_size(**kw)


# ------------------------------------------------------------------------------- intervals
def test_interval_formulas_by_hand():
    x = np.array([1] * 30 + [0] * 70)
    z = critical_value(0.95)
    lo, hi = confidence_interval(x, method="wald")
    assert (lo, hi) == pytest.approx((0.3 - z * math.sqrt(0.21 / 100), 0.3 + z * math.sqrt(0.21 / 100)))
    # Wilson score interval written out
    p, m = 0.3, 100
    centre = (p + z * z / (2 * m)) / (1 + z * z / m)
    half = z / (1 + z * z / m) * math.sqrt(p * (1 - p) / m + z * z / (4 * m * m))
    assert confidence_interval(x) == pytest.approx((centre - half, centre + half), rel=1e-10)
    # Clopper-Pearson from beta quantiles
    assert confidence_interval(x, method="clopper-pearson") == pytest.approx(
        (stats.beta.ppf(0.025, 30, 71), stats.beta.ppf(0.975, 31, 70)), rel=1e-8)
    # Hoeffding, TORS Eq. 48: 2 exp(-2 m t^2) = alpha
    t = hoeffding_margin(100, 0.95)
    assert 2 * math.exp(-2 * 100 * t * t) == pytest.approx(0.05)
    assert confidence_interval(x, method="hoeffding") == pytest.approx((0.3 - t, 0.3 + t))
    # t interval on real values
    y = np.linspace(0, 1, 11) ** 2
    h = stats.t.ppf(0.975, 10) * y.std(ddof=1) / math.sqrt(11)
    assert confidence_interval(y, method="t") == pytest.approx((y.mean() - h, y.mean() + h))
    # TORS Sec. 7.1: t = 0.02 with 10K users gives confidence above 99.9%
    assert 1 - 2 * math.exp(-2 * 10_000 * 0.02 ** 2) > 0.999
    assert hoeffding_margin(10_000, 0.999) < 0.02


def test_wald_collapses_at_zero_and_wilson_does_not():
    x = np.zeros(40)
    assert confidence_interval(x, method="wald") == (0.0, 0.0)
    lo, hi = confidence_interval(x)
    assert lo == pytest.approx(0.0, abs=1e-12) and hi > 0.05


def _coverage(method, p, m, n_data, rng):
    # the interval depends on the sample only through Q: compute it once per distinct Q
    q, counts = np.unique(rng.binomial(m, p, size=n_data), return_counts=True)
    hit = 0
    for qi, c in zip(q, counts):
        lo, hi = confidence_interval(np.r_[np.ones(qi), np.zeros(m - qi)], 0.95, method)
        hit += c * (lo <= p <= hi)
    return hit / n_data


@pytest.mark.parametrize("method", ["wilson", "clopper-pearson"])
def test_coverage_within_monte_carlo_error(method):
    # 2,000 simulated user samples per (p, m): Monte Carlo standard error sqrt(.95 * .05 / 2000)
    # = 0.0049. Wilson's coverage oscillates around 95% with the lattice of binomial outcomes, by
    # about +-1.5% at these m (Brown, Cai & DasGupta 2001, Fig. 4); Clopper-Pearson is never below
    # 95% and exceeds it by up to ~3%. We accept 3 SE plus that lattice allowance.
    rng = np.random.default_rng(0)
    for p, m in [(0.3, 200), (0.1, 100), (0.5, 50)]:
        cov = _coverage(method, p, m, 2000, rng)
        if method == "wilson":
            assert abs(cov - 0.95) <= 3 * 0.0049 + 0.015, (p, m, cov)
        else:
            assert 0.95 - 3 * 0.0049 <= cov <= 0.95 + 3 * 0.0049 + 0.03, (p, m, cov)


def test_wald_under_covers_at_small_p():
    # p = 0.02, m = 50: E[Q] = 1; the Wald interval is [0, 0] whenever Q = 0 (probability 0.364)
    # and too short otherwise; its exact coverage is about 0.64 (Brown, Cai & DasGupta 2001)
    rng = np.random.default_rng(1)
    cov_wald = _coverage("wald", 0.02, 50, 2000, rng)
    cov_wilson = _coverage("wilson", 0.02, 50, 2000, rng)
    exact = sum(stats.binom.pmf(q, 50, 0.02) for q in range(51)
                if confidence_interval(np.r_[np.ones(q), np.zeros(50 - q)], method="wald")[0] <= 0.02
                <= confidence_interval(np.r_[np.ones(q), np.zeros(50 - q)], method="wald")[1])
    assert exact < 0.7
    assert abs(cov_wald - exact) <= 4 * math.sqrt(exact * (1 - exact) / 2000)
    assert cov_wilson > 0.9


def test_bootstrap_interval_is_reproducible_and_close_to_t():
    y = np.random.default_rng(2).beta(0.5, 2.0, size=2000)
    a = confidence_interval(y, method="bootstrap", rng=5)
    assert a == confidence_interval(y, method="bootstrap", rng=5)
    t = confidence_interval(y, method="t")
    assert a == pytest.approx(t, abs=0.004)


@pytest.mark.parametrize("values,kw,match", [
    ([], {}, "values must not be empty"),
    ([0.1, np.nan], {"method": "t"}, "values must not contain NaN"),
    ([0.5, 1.0], {}, "method 'wilson' needs 0/1 values"),
    ([1, 0], {"confidence": 0.0}, "confidence must be a confidence level in \\(0, 1\\)"),
    ([1, 0], {"method": "exact"}, "method must be one of"),
    ([1.5, 0.2], {"method": "hoeffding"}, "needs values in \\[0, 1\\]"),
    ([[1, 0]], {}, "values must be a 1-d array"),
    (["a"], {}, "values must be a 1-d array of per-user metric values"),
])
def test_interval_bad_input(values, kw, match):
    with pytest.raises(ValueError, match=match):
        confidence_interval(values, **kw)


# ------------------------------------------------------------------------------- tests
@pytest.fixture(scope="module")
def pairs():
    rng = np.random.default_rng(3)
    a = (rng.random(500) < 0.32).astype(float)
    b = np.where(rng.random(500) < 0.8, a, (rng.random(500) < 0.28).astype(float))
    na = rng.beta(0.6, 1.5, 500)
    nb = np.clip(na + rng.normal(-0.02, 0.1, 500), 0, 1)
    return a, b, na, nb


def test_z_test_is_the_chi_square_test_of_the_2x2_table(pairs):
    a, b, _, _ = pairs
    r = compare_models(a, b, test="z")
    table = [[a.sum(), a.size - a.sum()], [b.sum(), b.size - b.sum()]]
    chi2, p, _, _ = stats.chi2_contingency(table, correction=False)
    assert r.statistic ** 2 == pytest.approx(chi2, rel=1e-10)
    assert r.p_value == pytest.approx(p, rel=1e-8)
    # TORS Eq. 49 for m_A = m_B = m: z = (p1 - p2) / sqrt(2 pbar qbar / m)
    pbar = (a.mean() + b.mean()) / 2
    assert r.statistic == pytest.approx((a.mean() - b.mean()) / math.sqrt(2 * pbar * (1 - pbar) / a.size))
    one = compare_models(a, b, test="z", alternative="less")
    assert one.p_value == pytest.approx(stats.norm.cdf(r.statistic))


def test_t_tests_agree_with_scipy(pairs):
    _, _, na, nb = pairs
    r = compare_models(na, nb, test="paired-t")
    d = na - nb
    assert r.statistic == pytest.approx(d.mean() / (d.std(ddof=1) / math.sqrt(d.size)))
    assert r.p_value == pytest.approx(stats.ttest_1samp(d, 0.0).pvalue)
    w = compare_models(na, nb, test="t", alternative="greater")
    se = math.sqrt(na.var(ddof=1) / na.size + nb.var(ddof=1) / nb.size)
    assert w.statistic == pytest.approx((na.mean() - nb.mean()) / se)
    assert w.p_value == pytest.approx(stats.ttest_ind(na, nb, equal_var=False, alternative="greater").pvalue)


def test_sign_and_wilcoxon(pairs):
    _, _, na, nb = pairs
    d = na - nb
    s = compare_models(na, nb, test="sign")
    wins, n_nz = int(np.sum(d > 0)), int(np.sum(d != 0))
    tail = sum(math.comb(n_nz, j) for j in range(0, min(wins, n_nz - wins) + 1)) / 2 ** n_nz
    assert s.statistic == wins and s.n_users == n_nz
    assert s.p_value == pytest.approx(min(1.0, 2 * tail), rel=1e-9)
    w = compare_models(na, nb, test="wilcoxon")
    ranks = stats.rankdata(np.abs(d))
    assert w.statistic == pytest.approx(min(ranks[d > 0].sum(), ranks[d < 0].sum()))
    assert w.p_value == pytest.approx(stats.wilcoxon(na, nb).pvalue)
    # the paired design has more power than the two-sample test on the same data
    assert compare_models(na, nb, test="paired-t").p_value < compare_models(na, nb, test="t").p_value


@pytest.mark.parametrize("a,b,kw,match", [
    ([1, 0, 1], [1, 0], {"test": "paired-t"}, "per_user_a and per_user_b must have the same length"),
    ([1, 0, 1], [1, 0], {"test": "wilcoxon"}, "same length"),
    ([1, 0], [1, np.nan], {}, "per_user_b must not contain NaN"),
    ([], [1, 0], {}, "per_user_a must not be empty"),
    ([0.5, 0], [1, 0], {"test": "z"}, "needs 0/1 per_user_a"),
    ([1, 0], [1, 0], {"test": "anova"}, "test must be one of"),
    ([1, 0], [0, 1], {"alternative": "bigger"}, "alternative must be one of"),
    ([1, 0], [1, 0], {"test": "sign"}, "undefined when per_user_a equals per_user_b"),
])
def test_compare_bad_input(a, b, kw, match):
    with pytest.raises(ValueError, match=match):
        compare_models(a, b, **kw)


# ------------------------------------------------------------------------------- many models
def test_bonferroni_and_holm_by_hand():
    p = [0.01, 0.04, 0.03, 0.005]
    bon = multiple_comparisons(p, "bonferroni")
    np.testing.assert_allclose(bon.p_adjusted, [0.04, 0.16, 0.12, 0.02])
    np.testing.assert_array_equal(bon.reject, [True, False, False, True])
    # Holm: sorted 0.005, 0.01, 0.03, 0.04 -> 4*0.005 = 0.02, 3*0.01 = 0.03, 2*0.03 = 0.06,
    # max(0.06, 1*0.04) = 0.06
    holm = multiple_comparisons(p, "holm")
    np.testing.assert_allclose(holm.p_adjusted, [0.03, 0.06, 0.06, 0.02])
    np.testing.assert_array_equal(holm.reject, [True, False, False, True])
    assert np.all(holm.p_adjusted <= bon.p_adjusted)
    np.testing.assert_allclose(multiple_comparisons([0.9, 0.5], "bonferroni").p_adjusted, [1.0, 1.0])


@pytest.mark.parametrize("p,kw,match", [
    ([], {}, "p_values must be a non-empty"),
    ([0.1, 1.2], {}, "p_values must lie in \\[0, 1\\]"),
    ([0.1, np.nan], {}, "p_values must lie in"),
    ([0.1], {"method": "fdr"}, "method must be 'bonferroni' or 'holm'"),
    ([0.1], {"alpha": 0}, "alpha must be a significance level in \\(0, 1\\)"),
])
def test_multiple_comparisons_bad_input(p, kw, match):
    with pytest.raises(ValueError, match=match):
        multiple_comparisons(p, **kw)


def test_bonferroni_factor_is_the_ratio_of_sample_sizes():
    from itemsampling.users import bonferroni_factor

    assert bonferroni_factor(1) == pytest.approx(1.0, rel=1e-12)
    z = stats.norm.isf
    assert bonferroni_factor(10) == pytest.approx((z(0.05 / 20) / z(0.025)) ** 2, rel=1e-12)
    # the unrounded sizes of Eq. 52 for 45 pairs and for one pair: 2 p (1 - p) (z / e)^2 each
    e = 0.01
    m45 = 2 * 0.25 * (z(0.05 / 90) / e) ** 2
    m1 = 2 * 0.25 * (z(0.025) / e) ** 2
    assert bonferroni_factor(45) == pytest.approx(m45 / m1, rel=1e-12)
    assert sample_size(e, n_models=45, comparison=True) == math.ceil(m45)
    # it grows like log k: z_b^2 / (2 ln(1/b)) -> 1 as b -> 0, so factor(k) / ln k tends to 2 / z^2
    ks = np.array([1e3, 1e6, 1e12])
    f = np.array([bonferroni_factor(int(k)) for k in ks])
    assert np.all(np.diff(f / np.log(ks)) < 0) and 2 / 1.96 ** 2 < f[-1] / np.log(ks[-1]) < 1.0
    with pytest.raises(ValueError, match="n_statements"):
        bonferroni_factor(0)


def test_interval_coverage_is_the_binomial_sum():
    from itemsampling.users import interval_coverage

    # m = 1: Wald is the point {0} or {1}, so it never covers a p inside (0, 1)
    assert interval_coverage(1, [0.1, 0.5], method="wald").tolist() == [0.0, 0.0]
    # brute force: every sample of m = 12 users enumerated by its number of hits
    m, p = 12, 0.3
    total = 0.0
    for q in range(m + 1):
        lo, hi = confidence_interval(np.r_[np.ones(q), np.zeros(m - q)], 0.9, "wilson")
        total += math.comb(m, q) * p ** q * (1 - p) ** (m - q) * (lo <= p <= hi)
    assert interval_coverage(m, p, 0.9, "wilson") == pytest.approx(total, rel=1e-12)
    # Clopper-Pearson is exact-conservative: never below the level, for any m and p
    grid = np.linspace(0.01, 0.99, 99)
    for m in (5, 50, 200):
        assert interval_coverage(m, grid, 0.95, "clopper-pearson").min() >= 0.95
    # the case: Wilson at m = 50, p = 0.01 covers 0.911
    assert interval_coverage(50, 0.01, 0.95, "wilson") == pytest.approx(0.9106, abs=5e-4)
    for bad in ({"p": 0.0}, {"p": [0.5, 1.0]}, {"method": "t"}):
        with pytest.raises(ValueError, match="p must|method must"):
            interval_coverage(10, **{"p": 0.5, **bad})


def test_break_even_users():
    from itemsampling.users import break_even_users

    # TORS-sized example of the book: 32,500 users against adaptive item sampling at 2.36% of N
    assert break_even_users(32_500, 9_916, 0.0236 * 9_916) == pytest.approx(32_500 / 0.0236, rel=1e-12)
    assert break_even_users(1_000, 3_000, 100) == 30_000
    with pytest.raises(ValueError, match="items_per_user"):
        break_even_users(10, 100, 0)
