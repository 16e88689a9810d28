r"""User sampling: how many users to evaluate, how sure a metric is, and whether model A beats B.

TORS Sec. 7 (Li et al. 2024) treats the users of a test set as a sample from the user population:
the per-user values :math:`x_u = F(R_u)` are i.i.d. with mean :math:`\mathbb E[F(R)]` and the
metric :math:`T = \frac1m\sum_u x_u` is its sample mean. For Recall@K, :math:`x_u =
\delta(R_u \le K)` is Bernoulli(:math:`p_K`) and :math:`mT \sim \mathrm{Binomial}(m, p_K)`
(TORS Eq. 45); NDCG@K and AP@K are bounded in [0, 1].

* :func:`sample_size` -- users needed for a margin of error (Eq. 46-47), for the difference of two
  models (Eq. 52), with a Bonferroni correction for several simultaneous statements (Sec. 7.2);
* :func:`confidence_interval` -- Wald (what Eq. 46 inverts), Wilson, Clopper-Pearson, Student t,
  Hoeffding (Eq. 48) and the percentile bootstrap for the mean of per-user values;
* :func:`compare_models` -- the two-sample z-test for proportions (Eq. 49-51), Welch's two-sample
  t-test (Sec. 7.2, for NDCG / AP) and the paired tests that match the usual design where both
  models are scored on the *same* users: paired t, sign test and Wilcoxon signed-rank
  (Gunawardana & Shani 2009, cited in TORS Sec. 7);
* :func:`multiple_comparisons` -- Bonferroni and Holm (1979) adjusted p-values;
* :func:`bonferroni_factor` -- the factor by which the Bonferroni correction multiplies Eq. 46's
  sample size; :func:`interval_coverage` -- the exact coverage of an interval for a proportion
  (binomial sums, no simulation); :func:`break_even_users` -- the population size above which user
  sampling costs fewer scores than item sampling at the same error (TORS Sec. 8.6).

The distributions (normal, t, binomial, beta, Wilcoxon) are scipy's.
"""

from __future__ import annotations

import math
import numbers
import sys
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ._validation import as_rng, check_int, check_memory, check_open_unit

_BOOT_BLOCK = 1 << 22  # multinomial counts drawn per block of bootstrap replicates (32 MiB of int64)

__all__ = [
    "INTERVAL_METHODS",
    "TESTS",
    "TestResult",
    "MultipleComparison",
    "critical_value",
    "sample_size",
    "hoeffding_margin",
    "confidence_interval",
    "compare_models",
    "multiple_comparisons",
    "bonferroni_factor",
    "interval_coverage",
    "break_even_users",
]

#: Methods of :func:`confidence_interval`.
INTERVAL_METHODS = ("wilson", "wald", "clopper-pearson", "t", "hoeffding", "bootstrap")
#: Tests of :func:`compare_models`.
TESTS = ("z", "t", "paired-t", "sign", "wilcoxon")
_ALTERNATIVES = ("two-sided", "greater", "less")




def critical_value(confidence: float = 0.95) -> float:
    r"""The two-sided normal critical value :math:`z_{\alpha/2} = \Phi^{-1}(1 - \alpha/2)`,
    :math:`\alpha = 1 -` ``confidence`` (1.959964 at 95%)."""
    c = check_open_unit(confidence, "confidence", "a confidence level")
    # the upper tail alpha/2 through isf: 1 - alpha/2 rounds to 1.0 (and ppf to inf) for alpha below 2.2e-16
    return float(stats.norm.isf((1.0 - c) / 2.0))


def sample_size(margin, confidence: float = 0.95, p: float = 0.5, n_models: int = 1,
                comparison: bool = False, rounding: str = "up") -> int:
    r"""Users needed so that a Recall-type metric (a proportion) is known to within ``margin``.

    One model (TORS Eq. 46): :math:`m = p(1-p)\,(z_{\alpha/2}/e)^2`; the difference of two models
    scored on independent samples of :math:`m` users each (Eq. 51-52):
    :math:`m = 2p(1-p)\,(z_{\alpha/2}/e)^2`. ``p = 0.5`` maximises :math:`p(1-p)` and gives the
    worst case. With ``n_models`` > 1 statements that must hold *simultaneously* (``n_models``
    intervals, or ``n_models`` differences with ``comparison=True``; all pairs of :math:`k` models
    are :math:`k(k-1)/2` differences) the Bonferroni inequality (TORS Sec. 7.2) asks each at level
    :math:`1 - \alpha/` ``n_models``, i.e. :math:`z_{\alpha/(2\,n_{models})}`.

    ``rounding="up"`` (default) returns :math:`\lceil m\rceil`, the smallest integer that meets the
    margin; ``"nearest"`` rounds to the nearest integer as TORS Eq. 47 does ("≈ 1067" for
    :math:`m = 1067.07` at :math:`e = 0.03`, 95%; rounding up gives 1,068; both give 9,604 at
    :math:`e = 0.01`).

    The count is exact integer arithmetic on a float :math:`m`: a margin so small that :math:`m`
    exceeds the largest float (below about 1e-154 at 95%), or an ``n_models`` so large that its
    level underflows (beyond about 1e300), is refused with a ``ValueError`` naming the argument.
    """
    e = check_open_unit(margin, "margin", "a margin of error")
    c = check_open_unit(confidence, "confidence", "a confidence level")
    p = check_open_unit(p, "p", "a proportion")
    k = check_int(n_models, "n_models", low=1, int64=False)  # a count in Python arithmetic only
    if not isinstance(comparison, (bool, np.bool_)):
        raise ValueError(f"comparison must be True or False, got {comparison!r}")
    if rounding not in ("up", "nearest"):
        raise ValueError(f"rounding must be 'up' or 'nearest', got {rounding!r}")
    # z_{alpha/(2k)} from the upper tail (isf, and alpha/(2k) through logs): 1 - alpha/(2k) rounds to 1
    # beyond k ~ 1e16, and a k beyond 1e308 does not convert to a float
    z = float(stats.norm.isf(math.exp(math.log((1.0 - c) / 2.0) - math.log(k))))
    if not math.isfinite(z):
        raise ValueError(f"n_models = 1e{math.log10(k):.0f} makes the Bonferroni level (1 - confidence) / n_models underflow "
                         "to 0; n_models must be below about 1e300")
    spread = (2.0 if comparison else 1.0) * p * (1.0 - p)
    if math.log(spread) + 2.0 * (math.log(z) - math.log(e)) >= math.log(sys.float_info.max):
        raise ValueError(f"margin must be at least {z * math.sqrt(spread / sys.float_info.max):.1e} here (a "
                         f"smaller margin needs more users than a float can count), got {e!r}")
    m = (2.0 if comparison else 1.0) * p * (1.0 - p) * (z / e) ** 2
    if rounding == "nearest":
        return max(1, int(math.floor(m + 0.5)))
    return max(1, int(math.ceil(m * (1.0 - 1e-12))))


def hoeffding_margin(n_users: int, confidence: float = 0.95, value_range: float = 1.0) -> float:
    r"""Half-width :math:`t` at which Hoeffding's bound (TORS Eq. 48),
    :math:`\Pr(|\bar x - \mathbb E x| \ge t) \le 2\exp(-2mt^2/(b-a)^2)`, equals
    :math:`\alpha = 1 -` ``confidence``: :math:`t = (b-a)\sqrt{\ln(2/\alpha)/(2m)}`, for per-user
    values in an interval of length ``value_range`` = :math:`b - a` (1 for Recall, NDCG and AP)."""
    m = check_int(n_users, "n_users", low=1)
    c = check_open_unit(confidence, "confidence", "a confidence level")
    if isinstance(value_range, bool) or not isinstance(value_range, (numbers.Real, np.floating)) \
            or not np.isfinite(value_range) or value_range <= 0:
        raise ValueError(f"value_range must be a positive finite number, got {value_range!r}")
    return float(value_range) * math.sqrt(math.log(2.0 / (1.0 - c)) / (2.0 * m))


def _check_values(values, name: str = "values") -> np.ndarray:
    x = np.asarray(values)
    if x.dtype.kind == "b":
        x = x.astype(np.float64)
    if x.dtype.kind not in "iuf":
        raise ValueError(f"{name} must be a 1-d array of per-user metric values, got dtype {x.dtype}")
    x = x.astype(np.float64)
    if x.ndim != 1:
        raise ValueError(f"{name} must be a 1-d array of per-user metric values, got shape {x.shape}")
    if x.size == 0:
        raise ValueError(f"{name} must not be empty")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} must not contain NaN or infinite values")
    return x


def _binary(x: np.ndarray, name: str, method: str) -> int:
    if not np.all((x == 0) | (x == 1)):
        raise ValueError(f"method {method!r} needs 0/1 {name} (Recall@K / HR@K per user); use 't', "
                         "'hoeffding' or 'bootstrap' for bounded real values such as NDCG or AP")
    return int(x.sum())


def confidence_interval(values, confidence: float = 0.95, method: str = "wilson", rng=None,
                        n_boot: int = 2000) -> tuple[float, float]:
    r"""Confidence interval for the population mean of per-user metric values.

    Parameters
    ----------
    values : 1-d array
        One value per evaluated user: 0/1 for Recall@K / HR@K, values in [0, 1] for NDCG@K, AP@K.
    confidence : float in (0, 1)
    method : str
        For 0/1 values (:math:`\hat p = Q/m`, TORS Eq. 45):

        * ``"wilson"`` (default) -- the score interval (Wilson 1927), inverting the normal test
          with the *null* variance; it never leaves [0, 1] and keeps close to the nominal coverage
          even for small :math:`m\hat p` (scipy ``binomtest(...).proportion_ci("wilson")``);
        * ``"wald"`` -- :math:`\hat p \pm z_{\alpha/2}\sqrt{\hat p(1-\hat p)/m}` (the interval that
          TORS Eq. 46 inverts, clipped to [0, 1]); it collapses to a point at :math:`\hat p = 0`
          or 1 and under-covers when :math:`m p` is small;
        * ``"clopper-pearson"`` -- the exact interval from the binomial tails (beta quantiles),
          conservative (scipy ``proportion_ci("exact")``).

        For any bounded values:

        * ``"t"`` -- :math:`\bar x \pm t_{m-1,\alpha/2}\, s/\sqrt m` (the central limit theorem
          TORS Sec. 7.1 mentions); mean and standard deviation are computed on the values scaled
          by their largest magnitude, so values near the float limit (``[1e308] * 3``) give their
          exact interval (here the point 1e308), and an interval whose ends exceed the float range
          is refused with a ``ValueError``;
        * ``"hoeffding"`` -- :math:`\bar x \pm t` from Eq. 48 (:func:`hoeffding_margin`), valid for
          every :math:`m` for values in [0, 1], clipped to [0, 1];
        * ``"bootstrap"`` -- the percentile interval of ``n_boot`` resampled means (``rng``).

    Returns
    -------
    (low, high) : tuple of float
    """
    x = _check_values(values)
    c = check_open_unit(confidence, "confidence", "a confidence level")
    if not isinstance(method, str) or method not in INTERVAL_METHODS:
        raise ValueError(f"method must be one of {INTERVAL_METHODS}, got {method!r}")
    m = x.size
    if method in ("wilson", "wald", "clopper-pearson"):
        q = _binary(x, "values", method)
        if method == "wald":
            p = q / m
            h = critical_value(c) * math.sqrt(p * (1.0 - p) / m)
            return max(0.0, p - h), min(1.0, p + h)
        ci = stats.binomtest(q, m).proportion_ci(confidence_level=c,
                                                 method="wilson" if method == "wilson" else "exact")
        return float(ci.low), float(ci.high)
    if method == "t":
        if m < 2:
            raise ValueError("method 't' needs at least 2 values")
        with np.errstate(over="ignore", invalid="ignore"):
            mean, sd, scale = float(x.mean()), float(x.std(ddof=1)), 1.0
        if not (math.isfinite(mean) and math.isfinite(sd)):  # sums of values near the float limit overflow
            scale = float(np.abs(x).max())
            mean, sd = float((x / scale).mean()), float((x / scale).std(ddof=1))
        h = float(stats.t.isf((1.0 - c) / 2.0, m - 1)) * sd / math.sqrt(m)
        with np.errstate(over="ignore"):
            low, high = (mean - h) * scale, (mean + h) * scale
        if not (math.isfinite(low) and math.isfinite(high)):
            raise ValueError("values are so large that the 't' interval's ends exceed the float range "
                             f"(about ±{sys.float_info.max:.1e}); rescale the values")
        return low, high
    if method == "hoeffding":
        if x.min() < 0 or x.max() > 1:
            raise ValueError("method 'hoeffding' needs values in [0, 1] (TORS Eq. 48)")
        mean = float(x.mean())
        h = hoeffding_margin(m, c)
        return max(0.0, mean - h), min(1.0, mean + h)
    n_boot = check_int(n_boot, "n_boot", low=10)
    gen = as_rng(rng)
    vals, counts = np.unique(x, return_counts=True)
    # the draws are made in blocks of at most _BOOT_BLOCK replicates; the means (8 bytes each) and one
    # block of counts are checked against the memory budget before anything is allocated
    block = max(1, min(n_boot, _BOOT_BLOCK // max(vals.size, 1)))
    check_memory(8.0 * n_boot + 8.0 * block * vals.size, f"the bootstrap's {n_boot:,} resampled means", "n_boot")
    # values so large that a sum of m of them overflows: the means are taken on the values scaled by
    # their largest magnitude (as the 't' interval does)
    big = float(np.abs(vals).max())
    scale = big if big > sys.float_info.max / (2.0 * m) else 1.0
    means = np.empty(n_boot)
    for start in range(0, n_boot, block):
        stop = min(n_boot, start + block)
        means[start:stop] = gen.multinomial(m, counts / m, size=stop - start) @ (vals / scale) / m
    lo, hi = np.quantile(means, [(1.0 - c) / 2.0, 1.0 - (1.0 - c) / 2.0])
    return float(lo) * scale, float(hi) * scale


@dataclass(frozen=True)
class TestResult:
    """Outcome of :func:`compare_models`.

    * ``statistic`` (float): z, t, number of users where A wins (sign), or Wilcoxon's W+ (sum of
      the ranks of the positive differences).
    * ``p_value`` (float).
    * ``difference`` (float): mean of A minus mean of B.
    * ``test``, ``alternative`` (str).
    * ``n_users`` (int): users in the test (for the sign test: users where A and B differ).
    """

    __test__ = False  # not a pytest class

    statistic: float
    p_value: float
    difference: float
    test: str
    alternative: str
    n_users: int


def compare_models(per_user_a, per_user_b, test: str = "paired-t", alternative: str = "two-sided") -> TestResult:
    r"""Is model A better than model B? A test on per-user metric values.

    Parameters
    ----------
    per_user_a, per_user_b : 1-d arrays
        Per-user values of the metric for models A and B. The paired tests need the *same*
        users in the same order (equal lengths); the two-sample tests accept independent samples.
    test : str
        * ``"z"`` -- two-sample z-test for proportions (TORS Eq. 49, with the pooled proportion
          :math:`\bar p = (Q_A + Q_B)/(m_A + m_B)`:
          :math:`z = (\hat p_A - \hat p_B)/\sqrt{\bar p\bar q(1/m_A + 1/m_B)}`, which is Eq. 49 for
          :math:`m_A = m_B = m`); 0/1 values;
        * ``"t"`` -- Welch's two-sample t-test (TORS Sec. 7.2 for NDCG / AP; unequal variances);
        * ``"paired-t"`` (default) -- the t-test on the per-user differences :math:`x_u^A - x_u^B`;
        * ``"sign"`` -- binomial test on the number of users where A beats B among those where they
          differ (Gunawardana & Shani 2009);
        * ``"wilcoxon"`` -- Wilcoxon signed-rank test on the non-zero differences.

        A test whose statistic is undefined on the data (zero standard error: every per-user
        difference the same for ``"paired-t"``, both samples constant for ``"t"``, all values equal
        for ``"z"``; no differing user for ``"sign"`` / ``"wilcoxon"``) is refused with a
        ``ValueError``, never a t of ±inf or NaN.
    alternative : {"two-sided", "greater", "less"}
        ``"greater"``: A's mean is larger; ``"less"``: smaller (TORS Eq. 50 is ``"less"``).

    Returns
    -------
    TestResult
    """
    a = _check_values(per_user_a, "per_user_a")
    b = _check_values(per_user_b, "per_user_b")
    if not isinstance(test, str) or test not in TESTS:
        raise ValueError(f"test must be one of {TESTS}, got {test!r}")
    if not isinstance(alternative, str) or alternative not in _ALTERNATIVES:
        raise ValueError(f"alternative must be one of {_ALTERNATIVES}, got {alternative!r}")
    diff = float(a.mean() - b.mean())
    if test in ("paired-t", "sign", "wilcoxon") and a.size != b.size:
        raise ValueError(f"test {test!r} pairs users: per_user_a and per_user_b must have the same length "
                         f"(one value per user), got {a.size} and {b.size}")
    if test == "z":
        qa, qb = _binary(a, "per_user_a", "z"), _binary(b, "per_user_b", "z")
        ma, mb = a.size, b.size
        pbar = (qa + qb) / (ma + mb)
        se = math.sqrt(pbar * (1.0 - pbar) * (1.0 / ma + 1.0 / mb))
        if se == 0.0:
            raise ValueError("the z-test is undefined when every value in per_user_a and per_user_b is equal")
        z = (qa / ma - qb / mb) / se
        if alternative == "two-sided":
            p = 2.0 * float(stats.norm.sf(abs(z)))
        elif alternative == "greater":
            p = float(stats.norm.sf(z))
        else:
            p = float(stats.norm.cdf(z))
        return TestResult(float(z), p, diff, test, alternative, ma + mb)
    if test == "t":
        if a.size < 2 or b.size < 2:
            raise ValueError("test 't' needs at least 2 values in per_user_a and in per_user_b")
        if np.all(a == a[0]) and np.all(b == b[0]):
            raise ValueError("test 't' (Welch) is undefined when per_user_a and per_user_b both have zero "
                             "variance (every value in each sample is the same): its standard error is 0")
        res = stats.ttest_ind(a, b, equal_var=False, alternative=alternative)
        return TestResult(float(res.statistic), float(res.pvalue), diff, test, alternative, a.size + b.size)
    d = a - b
    if test == "paired-t":
        if d.size < 2:
            raise ValueError("test 'paired-t' needs at least 2 users")
        if np.all(d == d[0]):
            raise ValueError("test 'paired-t' is undefined when every per-user difference is the same")
        res = stats.ttest_rel(a, b, alternative=alternative)
        return TestResult(float(res.statistic), float(res.pvalue), diff, test, alternative, d.size)
    nz = d[d != 0]
    if nz.size == 0:
        raise ValueError(f"test {test!r} is undefined when per_user_a equals per_user_b for every user")
    if test == "sign":
        wins = int(np.sum(nz > 0))
        res = stats.binomtest(wins, nz.size, 0.5, alternative=alternative)
        return TestResult(float(wins), float(res.pvalue), diff, test, alternative, int(nz.size))
    res = stats.wilcoxon(nz, alternative=alternative)
    return TestResult(float(res.statistic), float(res.pvalue), diff, test, alternative, int(nz.size))


@dataclass(frozen=True)
class MultipleComparison:
    """Outcome of :func:`multiple_comparisons`: adjusted p-values and which hypotheses are rejected
    at family-wise error rate ``alpha``."""

    p_adjusted: np.ndarray
    reject: np.ndarray
    method: str
    alpha: float


def multiple_comparisons(p_values, method: str = "holm", alpha: float = 0.05) -> MultipleComparison:
    r"""Control the family-wise error rate of :math:`k` tests (TORS Sec. 7.2).

    * ``"bonferroni"``: :math:`\tilde p_i = \min(1, k\,p_i)`;
    * ``"holm"`` (Holm 1979, step-down, uniformly more powerful): with the p-values sorted,
      :math:`p_{(1)} \le \dots \le p_{(k)}`,
      :math:`\tilde p_{(i)} = \min\bigl(1, \max_{j \le i} (k - j + 1)\,p_{(j)}\bigr)`.

    Hypothesis :math:`i` is rejected when :math:`\tilde p_i \le \alpha`.
    """
    p = np.asarray(p_values, dtype=np.float64) if not isinstance(p_values, str) else None
    if p is None or p.ndim != 1 or p.size == 0:
        raise ValueError("p_values must be a non-empty 1-d array of p-values")
    if not np.all(np.isfinite(p)) or np.any(p < 0) or np.any(p > 1):
        raise ValueError("p_values must lie in [0, 1] (no NaN)")
    if method not in ("bonferroni", "holm"):
        raise ValueError(f"method must be 'bonferroni' or 'holm', got {method!r}")
    alpha = check_open_unit(alpha, "alpha", "a significance level")
    k = p.size
    if method == "bonferroni":
        adj = np.minimum(1.0, k * p)
    else:
        order = np.argsort(p, kind="stable")
        steps = (k - np.arange(k)) * p[order]
        adj_sorted = np.minimum(1.0, np.maximum.accumulate(steps))
        adj = np.empty(k)
        adj[order] = adj_sorted
    return MultipleComparison(adj, adj <= alpha, method, alpha)


def bonferroni_factor(n_statements: int, confidence: float = 0.95) -> float:
    r"""The factor :math:`(z_{\alpha/(2k)}/z_{\alpha/2})^2` by which the Bonferroni correction for
    :math:`k` = ``n_statements`` simultaneous statements multiplies the sample size of Eq. 46 / 52
    (TORS Sec. 7.2: "This will lead the sample size to be multiplied"). It grows like
    :math:`\log k` (since :math:`z_{\beta}^2 \approx 2\ln(1/\beta)` for small :math:`\beta`): 1 at
    :math:`k = 1`, about 2.05 at :math:`k = 10` and 2.77 at :math:`k = 45` for 95%. It is the ratio of
    the unrounded sizes; :func:`sample_size` rounds each up."""
    k = check_int(n_statements, "n_statements", low=1)
    c = check_open_unit(confidence, "confidence", "a confidence level")
    z1 = float(stats.norm.ppf(1.0 - (1.0 - c) / 2.0))
    zk = float(-stats.norm.ppf((1.0 - c) / (2.0 * k)))  # the upper quantile, accurate for tiny tails
    return (zk / z1) ** 2


def interval_coverage(n_users: int, p, confidence: float = 0.95, method: str = "wilson") -> np.ndarray:
    r"""Exact coverage of an interval for a proportion on :math:`m` = ``n_users`` 0/1 values:
    :math:`\Pr_p(\mathrm{low}(Q) \le p \le \mathrm{high}(Q)) = \sum_{q=0}^m \binom mq p^q(1-p)^{m-q}\,
    \delta(\mathrm{low}(q) \le p \le \mathrm{high}(q))`, :math:`Q \sim \mathrm{Binomial}(m, p)` (TORS Eq.
    45), since each of these intervals depends on a sample only through its number of hits
    :math:`Q`. ``method``: ``"wald"``, ``"wilson"``, ``"clopper-pearson"`` or ``"hoeffding"``
    (:func:`confidence_interval`). ``p``: a proportion in (0, 1) or an array of them; returns an
    array of the shape of ``p``. No simulation, so no Monte Carlo error: a coverage of 0.9495 is
    below 0.95."""
    m = check_int(n_users, "n_users", low=1)
    c = check_open_unit(confidence, "confidence", "a confidence level")
    if method not in ("wald", "wilson", "clopper-pearson", "hoeffding"):
        raise ValueError(f"method must be one of ('wald', 'wilson', 'clopper-pearson', 'hoeffding'), got {method!r}")
    pp = np.asarray(p, dtype=np.float64)
    if pp.size == 0 or not np.all(np.isfinite(pp)) or pp.min() <= 0 or pp.max() >= 1:
        raise ValueError(f"p must be proportions in the open interval (0, 1), got {p!r}")
    check_memory(8 * (m + 1) * (pp.size + 2), "the binomial table of interval_coverage", "n_users")
    bounds = np.array([confidence_interval(np.r_[np.ones(q), np.zeros(m - q)], c, method) for q in range(m + 1)])
    q = np.arange(m + 1)
    flat = pp.ravel()
    pmf = stats.binom.pmf(q[None, :], m, flat[:, None])  # one row per p
    inside = (bounds[None, :, 0] <= flat[:, None]) & (flat[:, None] <= bounds[None, :, 1])
    return np.sum(pmf * inside, axis=1).reshape(pp.shape)


def break_even_users(users_needed, n_items, items_per_user) -> float:
    r"""The number of users :math:`M^*` above which user sampling is the cheaper design (TORS Sec.
    8.6): user sampling scores :math:`m` users against all :math:`N` items (:math:`mN` scores), item
    sampling every user against :math:`n` items on average (:math:`Mn`), so at equal error user
    sampling costs less when :math:`M > M^* = mN/n`, with :math:`m` = ``users_needed`` the users that
    reach item sampling's error (Eq. 46, which does not depend on :math:`M`), :math:`N` =
    ``n_items`` and :math:`n` = ``items_per_user``."""
    m = float(users_needed)
    N = float(n_items)
    n = float(items_per_user)
    for name, v in (("users_needed", m), ("n_items", N), ("items_per_user", n)):
        if not math.isfinite(v) or v <= 0:
            raise ValueError(f"{name} must be a positive number, got {v!r}")
    return m * N / n
