"""The verdict functions of ``itemsampling.book``: every verdict the book prints is decided by a
test that can fail (t quantiles below 30 repeats, Holm over rows, equivalence only within a stated
margin, saturated cells apart, ties as ties, rounding that cannot flip a comparison)."""

import numpy as np
import pytest
from scipy import stats

from itemsampling import book


def _with_mean_and_se(mean, se, n, seed=0):
    """n values whose mean and standard error (sd / sqrt(n)) are exactly ``mean`` and ``se``."""
    z = np.random.default_rng(seed).normal(size=n)
    z = (z - z.mean()) / (z.std(ddof=1) / np.sqrt(n))
    return mean + se * z


@pytest.mark.parametrize("n", [2, 3, 5, 10, 20, 29])
def test_t_quantile_is_student_t_below_30_repeats(n):
    assert book.t_quantile(n) == pytest.approx(stats.t.ppf(0.975, n - 1), rel=1e-12)
    assert book.t_quantile(n, level=0.9) == pytest.approx(stats.t.ppf(0.95, n - 1), rel=1e-12)


def test_t_quantile_values_and_normal_from_30():
    assert book.t_quantile(10) == pytest.approx(2.2621571628, abs=1e-9)   # t_9, not 2 or 1.96
    assert book.t_quantile(30) == pytest.approx(1.9599639845, abs=1e-9)
    assert book.t_quantile(100) == book.t_quantile(30)
    assert book.t_quantile(29) > book.t_quantile(30)
    with pytest.raises(ValueError, match="n_repeats"):
        book.t_quantile(1)
    with pytest.raises(ValueError, match="level"):
        book.t_quantile(10, level=1.0)


def test_mean_interval_by_hand():
    iv = book.mean_interval([1, 2, 3, 4])
    se = np.sqrt(5 / 3) / 2
    q = stats.t.ppf(0.975, 3)
    assert (iv.mean, iv.n) == (2.5, 4)
    assert iv.se == pytest.approx(se) and iv.q == pytest.approx(q)
    assert (iv.low, iv.high) == (pytest.approx(2.5 - q * se), pytest.approx(2.5 + q * se))
    assert iv.half_width == pytest.approx(q * se)
    with pytest.raises(book.VerdictRefused, match="at least 2"):
        book.mean_interval([1.0])
    with pytest.raises(ValueError, match="finite"):
        book.mean_interval([1.0, np.nan])


def test_compare_means_paired_t_test_against_scipy():
    rng = np.random.default_rng(3)
    b = rng.normal(size=10)
    a = b + 0.5 + 0.2 * rng.normal(size=10)
    v = book.compare_means(a, b, names=("MES", "MLE"))
    assert isinstance(v, book.Verdict)
    assert v.decided and v.direction == 1 and v.n == 10
    assert v.p == pytest.approx(stats.ttest_rel(a, b).pvalue, rel=1e-10)
    assert v.text.startswith("MES is larger than MLE by ") and v.text.endswith("(95 % t interval, 10 repeats)")
    w = book.compare_means(b, a, names=("MLE", "MES"))
    assert w.direction == -1 and w.text.startswith("MLE is smaller than MES by ")
    # the interval printed is the t_9 one: d +- t_9 se
    d = a - b
    lo = d.mean() - stats.t.ppf(0.975, 9) * d.std(ddof=1) / np.sqrt(10)
    assert v.detail["low"] == pytest.approx(lo)


def test_compare_means_uses_t_not_2():
    # t = 2.2 at 10 repeats: "two standard errors" would decide, t_9 = 2.262 does not
    d = _with_mean_and_se(2.2, 1.0, 10)
    v = book.compare_means(d)
    assert not v.decided and v.direction == 0
    assert v.text.startswith("A and zero cannot be told apart at 10 repeats")
    assert book.compare_means(_with_mean_and_se(2.3, 1.0, 10)).decided
    # from 30 repeats on the normal quantile: 2.0 decides
    assert book.compare_means(_with_mean_and_se(2.0, 1.0, 30)).decided


def test_compare_means_one_sample_and_unpaired():
    d = _with_mean_and_se(1.0, 0.1, 10)
    v = book.compare_means(d, names=("the bias", "zero"))
    assert v.decided and v.text.startswith("the bias is larger than zero by 1.00 [")
    assert v.p == pytest.approx(stats.ttest_1samp(d, 0.0).pvalue, rel=1e-10)
    rng = np.random.default_rng(5)
    a, b = rng.normal(1.0, 0.1, 12), rng.normal(0.0, 0.1, 10)
    u = book.compare_means(a, b, paired=False)
    assert u.decided and u.direction == 1 and u.n == 10
    with pytest.raises(ValueError, match="same repeats"):
        book.compare_means(a, b)


def test_equivalence_is_tost_inside_the_margin():
    # mean 0, se 1, 10 repeats: the 90 % t interval is +-1.833 (TOST at 5 %)
    d = _with_mean_and_se(0.0, 1.0, 10)
    eq = book.compare_means(d, margin=2.0)
    assert eq.decided and eq.direction == 0
    assert eq.text.startswith("A and zero are equivalent within ±2") and "10 repeats" in eq.text
    assert eq.detail["tost_high"] == pytest.approx(stats.t.ppf(0.95, 9))
    no = book.compare_means(d, margin=1.8)          # 1.833 > 1.8: not shown equivalent
    assert not no.decided and "cannot be told apart at 10 repeats" in no.text
    assert not book.compare_means(d).decided         # no margin, no "no difference"
    # a shifted mean whose interval reaches past the margin is not equivalent
    assert not book.compare_means(_with_mean_and_se(0.5, 1.0, 10), margin=2.0).decided
    with pytest.raises(ValueError, match="margin"):
        book.compare_means(d, margin=0)


def test_refuses_a_test_that_cannot_fail():
    # the same difference on every repeat: no variance, nothing to test
    with pytest.raises(book.VerdictRefused, match="no variance"):
        book.compare_means([1.0, 2.0, 3.0], [0.5, 1.5, 2.5])
    with pytest.raises(book.VerdictRefused):
        book.compare_means([0.3] * 10)
    # "the range of five biases is positive": a range is >= 0 by construction, 0 is the edge
    ranges = np.random.default_rng(0).uniform(0.5, 0.8, 10)
    with pytest.raises(book.VerdictRefused, match="edge"):
        book.compare_means(ranges, support=(0, None))
    with pytest.raises(book.VerdictRefused, match="at least 2"):
        book.compare_means([1.0], [0.0])
    assert issubclass(book.VerdictRefused, ValueError)
    # a signed statistic whose support straddles 0 is tested
    assert book.compare_means(ranges - 0.2, support=(-1, 1)).decided


def test_compare_with_paper_keeps_old_behaviour_and_adds_t_verdict():
    assert book.compare_with_paper(10.99, 0.3, 10.0, 0.4) == {
        "diff": pytest.approx(0.99), "se": pytest.approx(0.5), "verdict": "matches"}
    # 2.1 combined SE: "matches" at z = 2 is "above"; with 10 repeats (t_9 = 2.26) it cannot be told apart
    old = book.compare_with_paper(11.05, 0.3, 10.0, 0.4)
    assert old["verdict"] == "above"
    new = book.compare_with_paper(11.05, 0.3, 10.0, 0.4, n_repeats=10)
    assert isinstance(new["verdict"], book.Verdict) and not new["verdict"].decided
    assert new["label"] == "matches" and new["q"] == pytest.approx(stats.t.ppf(0.975, 9))
    assert new["text"].startswith("ours and the paper's cannot be told apart at 10 repeats")
    at100 = book.compare_with_paper(11.05, 0.3, 10.0, 0.4, n_repeats=100)
    assert at100["verdict"].decided and at100["text"].startswith("ours is larger than the paper's by 1.05")
    eq = book.compare_with_paper(10.02, 0.05, 10.0, 0.0, n_repeats=100, margin=0.5)
    assert eq["verdict"].decided and "equivalent within ±0.5" in eq["text"]
    with pytest.raises(book.VerdictRefused):
        book.compare_with_paper(5.1, 0.0, 5.0, n_repeats=10)


def test_holm_by_hand():
    # m = 4, alpha 0.05: sorted 0.005 <= 0.05/4, 0.01 <= 0.05/3, 0.03 > 0.05/2 -> stop
    assert book.holm([0.01, 0.04, 0.03, 0.005]).tolist() == [True, False, False, True]
    # step-down: 0.01 <= 0.05/3, 0.02 <= 0.05/2, 0.03 <= 0.05 -> all three (Bonferroni: only the first)
    assert book.holm([0.03, 0.01, 0.02]).tolist() == [True, True, True]
    assert book.holm([0.2, 0.01], alpha=0.01).tolist() == [False, False]
    assert book.holm([]).tolist() == []
    with pytest.raises(ValueError, match="pvalues"):
        book.holm([0.5, 1.5])


def test_count_verdict_text():
    assert book.count_verdict([0.01, 0.04, 0.03, 0.005]) == "2 of 4 rows (Holm-corrected at 5 %)"
    assert book.count_verdict([0.03, 0.01, 0.02], what="models") == "3 of 3 models (Holm-corrected at 5 %)"


def test_match_table_saturated_informative_and_ties():
    ours = np.array([0.0, 100.0, 50.0, 30.0, 41.0, 100.0])
    ours_se = np.array([0.0, 0.0, 2.0, 1.0, 1.0, 0.0])
    paper = np.array([0.0, 100.0, 50.0, 40.0, 40.0, 97.0])
    out = book.match_table(ours, ours_se, paper, n_repeats=10, hi=100)
    assert out["saturated"] == 2 and out["informative"] == 4
    assert out["ties"] == 1 and out["matches"] == 2 and out["differ"] == 2
    assert out["saturated_mask"].tolist() == [True, True, False, False, False, False]
    assert out["differ_mask"].tolist() == [False, False, False, True, False, True]   # 100 +- 0 vs 97 differs
    assert out["text"].startswith("2 of the 4 informative cells cannot be told apart from the paper's and 2 differ")
    assert "2 more cells are saturated (both sides at 0 or both at 100)" in out["text"]
    assert "1 of the informative cells is an exact tie" in out["text"]
    # 2.2 SE at 10 repeats is not a difference (t_9), at 100 repeats it is
    assert book.match_table([42.2], [1.0], [40.0], n_repeats=10)["differ"] == 0
    assert book.match_table([42.2], [1.0], [40.0], n_repeats=100)["differ"] == 1


def test_match_table_holm_over_informative_cells():
    # two cells at p ~ 0.03 each: each alone differs, together (Holm, 2 tests) neither does
    z = stats.norm.isf(0.015)
    assert book.match_table([z], [1.0], [0.0], n_repeats=100)["differ"] == 1
    assert book.match_table([z, z], [1.0, 1.0], [0.0, 0.0], n_repeats=100)["differ"] == 0


@pytest.mark.parametrize("value, threshold, digits, expected", [
    (0.9495, 0.95, 3, "0.9495"),      # "0.950" would read as not below 0.95
    (0.95, 0.95, 3, "0.950"),
    (0.5, 0.95, 3, "0.500"),          # far apart: the digits asked for
    (0.94999, 0.95, 3, "0.94999"),
    (0.95001, 0.95, 2, "0.95001"),
    (0.911, 0.95, 2, "0.91"),
    (-0.0004, 0.0, 3, "−0.0004"),
    (0.23, 0.2, 1, "0.23"),
])
def test_fmt_vs_rounding_cannot_flip(value, threshold, digits, expected):
    s = book.fmt_vs(value, threshold, digits)
    assert s == expected
    r = float(s.replace("−", "-"))
    assert np.sign(r - threshold) == np.sign(value - threshold)


def test_fmt_bound_rounds_outwards():
    assert book.fmt_bound(0.23, 1) == "0.3"      # "at most 0.2 s" would be false
    assert book.fmt_bound(0.2, 1) == "0.2"
    assert book.fmt_bound(0.27, 1, side="lower") == "0.2"
    with pytest.raises(ValueError, match="side"):
        book.fmt_bound(0.2, 1, side="up")


def test_order_verdict_ties_and_strict():
    # four estimators at 12 of 12 on every draw tie; the fifth is below them
    v = book.order_verdict({"RE": 12.0, "CLS": 12.0, "BV 1": 12.0, "MLE": 11.5},
                           {"RE": 0.0, "CLS": 0.0, "BV 1": 0.0, "MLE": 0.1}, 10)
    assert v.detail["sequence"] == "RE = CLS = BV 1 > MLE"
    assert v.text.startswith("RE = CLS = BV 1 > MLE (adjacent pairs by a t test, 10 repeats, Holm-corrected at 5 %")
    assert "cannot be told apart" in v.text
    # mean ranks 2.67 / 2.89 / 3.22 with SE 0.3 over 10 repeats: no order
    w = book.order_verdict([2.67, 2.89, 3.22], [0.3, 0.3, 0.3], 10, higher_is_better=False,
                           names=["MLE", "CLS", "MES"])
    assert w.detail["sequence"] == "MLE = CLS = MES" and not w.decided
    s = book.order_verdict({"X": 3.0, "Y": 2.9, "Z": 1.0}, {"X": 0.1, "Y": 0.1, "Z": 0.1}, 10)
    assert s.detail["sequence"] == "X = Y > Z"
    strict = book.order_verdict({"X": 3.0, "Y": 2.0}, {"X": 0.1, "Y": 0.1}, 10)
    assert strict.text == "X > Y (adjacent pairs by a t test, 10 repeats, Holm-corrected at 5 %)"
    with pytest.raises(ValueError, match="ses"):
        book.order_verdict({"X": 1.0, "Y": 2.0}, {"X": 0.1}, 10)
    with pytest.raises(ValueError, match="at least 2"):
        book.order_verdict({"X": 1.0}, {"X": 0.1}, 10)


def test_p_value_matches_t_and_normal():
    assert book.p_value(2.262157, 10) == pytest.approx(0.05, abs=1e-6)
    assert book.p_value(-1.959964, 30) == pytest.approx(0.05, abs=1e-6)
    assert book.p_value(np.inf, 10) == 0.0 and book.p_value(0.0, 5) == 1.0


def test_variance_p_value_chi_square_by_hand():
    # 11 repeats, 10 degrees of freedom: the 2.5 % and 97.5 % points of chi2_10 are 3.2470 and 20.4832
    assert book.variance_p_value(np.sqrt(20.4832 / 10), 1.0, 11) == pytest.approx(0.05, abs=1e-4)
    assert book.variance_p_value(np.sqrt(3.2470 / 10) * 2.0, 2.0, 11) == pytest.approx(0.05, abs=1e-4)
    # s = sigma: X = 10, P(chi2_10 <= 10) = 0.5595, so p = 2 (1 - 0.5595)
    assert book.variance_p_value(3.0, 3.0, 11) == pytest.approx(2 * stats.chi2.sf(10, 10), rel=1e-12)
    assert book.variance_p_value(3.0, 3.0, 11) == pytest.approx(0.881, abs=1e-3)
    # on normal repeats with the stated sd it rejects about 5 % of the time
    rng = np.random.default_rng(3)
    x = rng.normal(0.0, 2.0, size=(4000, 20))
    share = np.mean([book.variance_p_value(row.std(ddof=1), 2.0, 20) < 0.05 for row in x])
    assert 0.035 < share < 0.065
    assert book.variance_p_value(0.5, 2.0, 200) < 1e-10
    with pytest.raises(book.VerdictRefused, match="exact_sd is 0"):
        book.variance_p_value(0.0, 0.0, 10)
    with pytest.raises(ValueError, match="sd"):
        book.variance_p_value(-1.0, 1.0, 10)
    with pytest.raises(ValueError, match="n_repeats"):
        book.variance_p_value(1.0, 1.0, 1)


def test_holm_signs_by_hand():
    # z = 3, -3, 1 and an exact zero at 100 repeats (normal): p = 0.0027, 0.0027, 0.317, 1
    out = book.holm_signs([3.0, -0.6, 0.1, 0.0], [1.0, 0.2, 0.1, 0.0], 100)
    assert out["p"][:3] == pytest.approx([2 * stats.norm.sf(3), 2 * stats.norm.sf(3), 2 * stats.norm.sf(1)])
    assert out["p"][3] == 1.0
    assert out["sign"].tolist() == [1, -1, 0, 0]
    # the same z at 3 repeats (t_2) is not significant
    assert book.holm_signs([3.0], [1.0], 3)["sign"].tolist() == [0]
    # no variance: a nonzero difference is decided, a zero one is not
    assert book.holm_signs([0.5, 0.0], [0.0, 0.0], 10)["sign"].tolist() == [1, 0]


def test_coverage_verdict_exact_binomial():
    # 6 of 8 at 95 %: P(X <= 6) = 1 - 0.95^8 - 8 0.95^7 0.05 = 0.0572; two-sided (scipy's rule) the same here
    v = book.coverage_verdict(6, 8, what="the population interval")
    assert not v.decided and v.p == pytest.approx(stats.binomtest(6, 8, 0.95).pvalue)
    assert v.text == ("the population interval covers its truth in 6 of 8 studies (0.75), which cannot be told "
                      f"apart from 95 % at 8 studies (exact binomial test, p = {v.p:.2g})")
    w = book.coverage_verdict(75, 100)
    assert w.decided and w.direction == -1 and "below 95 %" in w.text
    assert not book.coverage_verdict(95, 100).decided
    with pytest.raises(ValueError, match="hits"):
        book.coverage_verdict(9, 8)


def test_share_verdict_one_exact_method():
    # 3 of 20 against one half: P(X <= 3) = (1 + 20 + 190 + 1140) / 2^20, the central p twice that
    v = book.share_verdict(3, 20, 0.5, what="the order holds", unit="simulations", null_name="one half")
    assert v.decided and v.direction == -1
    assert v.p == pytest.approx(2 * 1351 / 2 ** 20, rel=1e-12)
    # the Clopper-Pearson ends are beta quantiles: Beta(0.025; 3, 18) and Beta(0.975; 4, 17)
    assert v.detail["low"] == pytest.approx(stats.beta.ppf(0.025, 3, 18), rel=1e-9)
    assert v.detail["high"] == pytest.approx(stats.beta.ppf(0.975, 4, 17), rel=1e-9)
    assert v.text.startswith("the order holds in 3 of 20 simulations (share 0.15, 95 % Clopper-Pearson interval [")
    assert v.text.endswith(f"below one half (exact binomial test, p = {v.p:.2g})")
    # the interval decides, and its test agrees: p < 5 % exactly when the interval excludes the null
    for hits in range(21):
        w = book.share_verdict(hits, 20)
        assert w.decided == (w.p < 0.05) == (not w.detail["low"] <= 0.5 <= w.detail["high"]), hits
    u = book.share_verdict(10, 20, null_name="one half")
    assert not u.decided and u.direction == 0 and u.p == 1.0 and "cannot be told apart from one half at 20" in u.text
    assert book.share_verdict(20, 20).direction == 1  # every repeat: decided, not refused
    with pytest.raises(ValueError, match="hits"):
        book.share_verdict(21, 20)
    with pytest.raises(ValueError, match="null"):
        book.share_verdict(3, 20, 1.0)
