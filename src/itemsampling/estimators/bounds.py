r"""Identification bounds: the range of a metric over every rank distribution the sampled ranks allow.

Below one kernel width :math:`N/(n-1)` the sampled ranks do not identify the rank distribution
:math:`P(R)` (Chapter 7): many :math:`P` give the same sampled-rank law
:math:`\tilde P(r) = \sum_R P(R) P(r\mid R)` (TORS Eq. 5), and a metric at a cut-off :math:`K` below
the resolution differs between them. Every estimator picks one of them (a fit, a prior), and its
bootstrap interval is centred on that pick: it cannot cover a bias it does not see. The honest
interval is the **range** of the metric :math:`T(P) = \sum_R P(R) F(R)` over all :math:`P` whose
sampled-rank law is within sampling error of the observed one.

Construction (:func:`identification_bounds`)
--------------------------------------------
1. *A simultaneous band for the sampled-rank law.* At cut points :math:`r_1 < \dots < r_J`
   (:func:`cut_points`: the dyadic ranks :math:`1, 2, 4, \dots < n`, and the sampled ranks
   :math:`\lfloor 1 + (K-1)(n-1)/(N-1) \rfloor` and the one after it, where the kernel maps each
   cut-off :math:`K`), the count :math:`S_j = \#\{u: r_u \le r_j\}` is Binomial(:math:`M`,
   :math:`Q_j`), :math:`Q_j = \sum_{r \le r_j} \tilde P(r)`, for users drawn independently from
   the population. The exact (Clopper-Pearson) interval :math:`[\ell_j, h_j]` at level
   :math:`1 - (1 - \text{ci})/J` covers each :math:`Q_j`, so by Bonferroni all :math:`J` together with
   probability at least ``ci``.
2. *Two linear programs.* With :math:`A_{R,j} = \Pr(r \le r_j \mid R)` (the cumulative kernel rows,
   :func:`~.grid.cached_kernel`), the bounds are

   .. math:: \min / \max_P \; \sum_R P(R) F(R) \quad\text{s.t.}\quad \ell_j \le (P A)_j \le h_j,
             \; P \ge 0, \; \textstyle\sum_R P(R) = 1,

   solved by HiGHS (``scipy.optimize.linprog``); one LP pair per metric and cut-off, all on the same band.

**Why it covers the population metric.** Whenever the band covers the true :math:`Q` (probability
:math:`\ge` ``ci``), the true :math:`P` is feasible, so :math:`\min \le T(P) \le \max`; this holds for
every metric and cut-off at once (the band is simultaneous), whatever the rank distribution, the
number of users or the cut-off: coverage :math:`\ge` ``ci`` by construction, with no fit and no
asymptotics.

**Why it covers the test users' own metric.** The test-users metric (``target="test-users"``,
:mod:`.conditional`) is :math:`T(\hat P_M)`, :math:`\hat P_M` the empirical law of the :math:`M` users'
global ranks :math:`R_u`, fixed; the only randomness is the item sampling. Given the :math:`R_u`, the
indicators :math:`1[r_u \le r_j]` are independent Bernoulli with unequal means :math:`p_u =
A_{R_u,j}`: :math:`S_j` is Poisson-binomial with mean :math:`M\bar p`, :math:`\bar p = (\hat P_M A)_j`.
Hoeffding (1956, Theorem 4) shows that its tails are no heavier than those of the Binomial(:math:`M`,
:math:`\bar p`), :math:`B`: :math:`\Pr(S \le c) \le B(c)` for :math:`c \le M\bar p - 1` and
:math:`\Pr(S \le c) \ge B(c)` for :math:`c \ge M\bar p`. The Clopper-Pearson interval at level
:math:`1 - \alpha_j` misses :math:`\bar p` exactly when :math:`S \le c` or :math:`S \ge u`, the critical
values of the binomial with :math:`B(c) \le \alpha_j/2` and :math:`1 - B(u - 1) \le \alpha_j/2`. For
:math:`1/M < \bar p < 1 - 1/M` a binomial puts more than 1/4 at or above its mean and at or below it
(Greenberg & Mohri 2014, and its mirror image), so with :math:`\alpha_j/2 < 1/4` the critical values
satisfy :math:`c \le M\bar p - 1` and :math:`u \ge M\bar p + 1`, where Hoeffding's inequalities apply: each
tail of :math:`S` is at most the binomial's, :math:`\alpha_j/2`. At the edges, :math:`\bar p \le 1/M`: the
lower tail cannot miss (:math:`(1 - \bar p)^M \ge 1/4`), and the upper one, if :math:`u = 1`, has
:math:`\Pr(S \ge 1) \le \sum_u p_u = M\bar p \le -\ln(1 - \alpha_j/2)` (as the binomial's
:math:`1 - (1 - \bar p)^M \le \alpha_j/2`), a level off by about the factor :math:`1 + \alpha_j/4`
(:math:`\bar p \ge 1 - 1/M` the same, mirrored). So the band covers :math:`\hat P_M A` with probability at
least ``ci`` less :math:`(1 - \text{ci})^2/4` (0.0006 at 95 %), :math:`\hat P_M` is then feasible, and the
same bounds are an interval for the test users' own metric. (:func:`itemsampling.estimators.auto.coverage_study`
measures both.)

What it costs. Without a fit's extrapolation the range is as wide as the data leave it. Far below
the resolution it spans much of the metric's range, and that is the truth about such data; but even
at several kernel widths it is several times as wide as a bootstrap interval (at :math:`N = 250`,
:math:`n = 50`, :math:`M = 5{,}000`, Recall@50, ten kernel widths: about 0.2 against 0.03), because the
kernel spreads the users at global rank :math:`K` over several sampled ranks, and a distribution may
move mass across :math:`K` inside that spread without changing the sampled-rank law beyond sampling
error. Hence :mod:`.auto` reports the bounds only below a few kernel widths (its module docstring,
"The interval"; guide, Table G.4c).

Limits. One catalogue size and one sample size for every user (per-user sizes ``n_items`` or
``sample_size`` are refused, naming the argument), and the dense kernel (:math:`N \times n` floats;
``grid`` is refused: the cells of a catalogue-scale grid would restrict :math:`P` to be uniform inside
each cell, which is an assumption the bounds exist to avoid).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from .._validation import check_bool, check_int, check_memory
from ..metrics import canonical_metric, metric_function
from .grid import cached_kernel, check_sampled_ranks

__all__ = ["BoundsResult", "identification_bounds", "cut_points", "clopper_pearson", "lp_bounds"]


@dataclass(frozen=True)
class BoundsResult:
    """The identification bounds of :func:`identification_bounds`.

    Attributes
    ----------
    low, high : dict       metric -> bound (a float, or an array over the cut-offs when ``k`` is a sequence).
    cuts : ndarray         the cut points :math:`r_j` of the band.
    band_low, band_high : ndarray   the simultaneous band on :math:`\\Pr(r \\le r_j)`.
    counts : ndarray       :math:`S_j`, users with sampled rank at most :math:`r_j`.
    confidence : float     the simultaneous level ``ci``.
    """

    low: dict
    high: dict
    cuts: np.ndarray
    band_low: np.ndarray
    band_high: np.ndarray
    counts: np.ndarray
    confidence: float


def clopper_pearson(successes, trials: int, level: float):
    r"""Exact two-sided binomial intervals (Clopper & Pearson 1934) at ``level`` for ``successes``
    out of ``trials``: :math:`\ell = B^{-1}(\alpha/2; S, M - S + 1)`, :math:`h = B^{-1}(1 - \alpha/2;
    S + 1, M - S)` (Beta quantiles; :math:`\ell = 0` at :math:`S = 0`, :math:`h = 1` at :math:`S = M`)."""
    s = np.asarray(successes, np.float64)
    a = 1.0 - float(level)
    with np.errstate(invalid="ignore"):
        lo = np.where(s > 0, stats.beta.ppf(a / 2, np.maximum(s, 1e-12), trials - s + 1), 0.0)
        hi = np.where(s < trials, stats.beta.ppf(1 - a / 2, s + 1, np.maximum(trials - s, 1e-12)), 1.0)
    return np.nan_to_num(lo, nan=0.0), np.nan_to_num(hi, nan=1.0)


def cut_points(n_items: int, sample_size: int, ks=()) -> np.ndarray:
    r"""The cut points of the band (module docstring): the dyadic sampled ranks :math:`1, 2, 4, \dots`
    below :math:`n`, and for each cut-off :math:`K` the sampled rank :math:`\lfloor 1 + (K-1)(n-1)/(N-1)
    \rfloor` where the kernel's mean maps it and the next one (both below :math:`n`)."""
    N = check_int(n_items, "n_items", low=2)
    n = check_int(sample_size, "sample_size", low=2)
    cuts = {int(2 ** i) for i in range(int(np.log2(max(n - 1, 1))) + 1) if 2 ** i < n}
    for k in ks:
        if k is None:
            continue
        c = int(np.floor(1 + (int(k) - 1) * (n - 1) / (N - 1)))
        cuts.update(x for x in (c, c + 1) if 1 <= x < n)
    return np.array(sorted(cuts), dtype=np.int64)


def _lp_min(c, A, lo, hi, start) -> float:
    r""":math:`\min_P c\cdot P` over :math:`P \ge 0`, :math:`\sum P = 1`, :math:`\ell \le P A \le h` by
    column generation: the LP on the columns (ranks) in ``start``, then every rank whose reduced cost
    under the restricted LP's duals is negative joins, until none is (then the restricted optimum is the
    full one: LP duality); the full LP if that takes more than 30 rounds. Exact either way."""
    N = c.size
    cols = np.zeros(N, dtype=bool)
    cols[start] = True
    for _ in range(30):
        idx = np.flatnonzero(cols)
        At = A[idx].T
        res = optimize.linprog(c[idx], A_ub=np.vstack([At, -At]), b_ub=np.concatenate([hi, -lo]),
                               A_eq=np.ones((1, idx.size)), b_eq=[1.0], bounds=(0, None), method="highs",
                               options={"presolve": False})  # small LPs: presolve costs more than it saves
        if res.status == 2:  # infeasible on these columns: widen to all of them
            break
        if res.status != 0:
            raise ValueError(f"the identification bounds' linear program failed: {res.message}")
        y = res.ineqlin.marginals  # <= 0 for the <= rows
        red = c - A @ (y[:lo.size] - y[lo.size:]) - res.eqlin.marginals[0]
        new = (red < -1e-10 * max(1.0, float(np.abs(c).max()))) & ~cols
        if not new.any():
            return float(res.fun)
        cols |= new
    res = optimize.linprog(c, A_ub=np.vstack([A.T, -A.T]), b_ub=np.concatenate([hi, -lo]), A_eq=np.ones((1, N)),
                           b_eq=[1.0], bounds=(0, None), method="highs")
    if res.status != 0:
        raise ValueError(f"the identification bounds' linear program failed: {res.message}")
    return float(res.fun)


def lp_bounds(F, A, lo, hi) -> tuple:
    r"""``(min, max)`` of :math:`F\cdot P` over :math:`P \ge 0`, :math:`\sum P = 1`, :math:`\ell \le P A \le h`
    (``A``: N x J; HiGHS, by column generation from the top 64 ranks and about 200 spread over the rest,
    :func:`_lp_min`). Raises ``ValueError`` if the band admits no distribution (it always admits the
    truth's; an empty one means the band missed)."""
    F = np.asarray(F, np.float64)
    A = np.asarray(A, np.float64)
    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    N = F.size
    start = np.unique(np.concatenate([np.arange(min(N, 64)), np.linspace(0, N - 1, 200).astype(np.int64)]))
    low = _lp_min(F, A, lo, hi, start)
    high = -_lp_min(-F, A, lo, hi, start)
    return float(min(low, high)), float(max(low, high))


def identification_bounds(sampled_ranks, n_items, sample_size, metrics, k, ci: float = 0.95, replacement=True,
                          cuts=None, grid=None) -> BoundsResult:
    r"""The range of each metric@K over every rank distribution whose sampled-rank law lies in a
    simultaneous exact ``ci`` band around the observed one (module docstring): an interval that covers
    the population metric with probability at least ``ci`` (all metrics and cut-offs at once), and the
    test users' own metric too (Hoeffding 1956).

    Parameters
    ----------
    sampled_ranks : one rank in 1..n per user.
    n_items, sample_size : N and n (one of each; per-user sizes are refused).
    metrics : a metric name or a list; ``k`` a cut-off or a list (``None`` for AUC).
    ci : the simultaneous level, in (0, 1).
    replacement : the kernel (decoys with or without replacement).
    cuts : optional sampled ranks in 1..n-1 to use as cut points instead of :func:`cut_points`.
    grid : must be ``None`` or ``False`` (the bounds need the dense kernel; module docstring).
    """
    if np.ndim(n_items) > 0:
        raise ValueError("n_items must be one catalogue size for the identification bounds (per-user catalogue "
                         "sizes are not supported); use an interval of method 'auto' with interval='bootstrap'")
    if np.ndim(sample_size) > 0:
        raise ValueError("sample_size must be one size for the identification bounds (per-user sample sizes are "
                         "not supported); use an interval of method 'auto' with interval='bootstrap'")
    if grid is not None and grid is not False:
        raise ValueError("grid must be None or False for the identification bounds: they need the dense N x n "
                         "kernel (a grid's cells would restrict P(R) inside each cell)")
    N = check_int(n_items, "n_items", low=2)
    r, n = check_sampled_ranks(sampled_ranks, N, sample_size)
    replacement = check_bool(replacement, "replacement")
    if isinstance(ci, bool) or not isinstance(ci, (int, float, np.floating)) or not 0.0 < float(ci) < 1.0:
        raise ValueError(f"ci must be a confidence level strictly between 0 and 1 (e.g. 0.95), got {ci!r}")
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    metrics = [canonical_metric(m) for m in metrics]
    seq = np.ndim(k) > 0
    ks = list(np.atleast_1d(np.asarray(k, dtype=object))) if seq else [k]
    if seq and not ks:
        raise ValueError("k must not be an empty sequence")
    for kk in ks:
        if kk is not None:
            check_int(kk, "k", low=1, high=N)
    if cuts is None:
        cuts = cut_points(N, n, ks)
    else:
        cuts = np.unique(np.asarray(cuts, dtype=np.int64))
        if cuts.size == 0 or cuts.min() < 1 or cuts.max() > n - 1:
            raise ValueError(f"cuts must be sampled ranks in 1..{n - 1} (n - 1), got {cuts!r}")
    check_memory(8.0 * N * (n + 2 * cuts.size), f"the dense kernel and the band's rows ({N} x {n})", "n_items")
    Kd = cached_kernel(N, n, replacement)
    A = np.cumsum(Kd, axis=1)[:, cuts - 1]
    M = r.size
    S = np.array([(r <= c).sum() for c in cuts], dtype=np.int64)
    lo, hi = clopper_pearson(S, M, 1.0 - (1.0 - float(ci)) / cuts.size)
    R = np.arange(1, N + 1)
    low, high = {}, {}
    for m in metrics:
        ls, hs = [], []
        for kk in ks:
            F = metric_function(m, kk, N)(R)
            a, b = lp_bounds(F, A, lo, hi)
            ls.append(a)
            hs.append(b)
        low[m] = np.array(ls) if seq else ls[0]
        high[m] = np.array(hs) if seq else hs[0]
    return BoundsResult(low, high, cuts, lo, hi, S, float(ci))
