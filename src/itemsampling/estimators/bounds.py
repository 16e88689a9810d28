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
   :func:`~.grid.cached_kernel`, or the distribution function directly), the bounds are

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

The inputs readers have
-----------------------
* **Per-user catalogue sizes** (pools, ``n_items`` an array :math:`N_u`): the model of
  :mod:`.distribution` ("Per-user catalogue sizes"): the users' rank fractions :math:`t = (R-1)/(N-1)`
  share one distribution on the grid of the largest pool :math:`N`, and the user's metric is :math:`F`
  at the rank in the user's own pool, :math:`R_u(R)` (:func:`~.grid.pool_rank_map`). With replacement
  the kernel depends on :math:`t` alone, so the sampled-rank law is the one-:math:`N` law on that grid,
  the band is built exactly as above, and the metric is the linear :math:`\sum_R P(R)\bar F(R)`,
  :math:`\bar F(R) = \frac1M \sum_u F_{N_u}(R_u(R))`. Both coverage arguments go through unchanged (the
  users are still independent draws, each with the same law of :math:`r_u`). Pools need
  ``replacement=True``, as every pool estimator (without replacement the kernel involves :math:`N_u`).
* **Per-user sample sizes** (adaptive sampling, TORS Algorithm 1; :func:`itemsampling.sampling.
  adaptive_sample_ranks`): the sizes seen are stages of one ladder of nested sets
  :math:`n_0 < n_1 < \dots < n_S` (TORS's doubling from the smallest size seen where the sizes fit it, so
  that a stage no user stopped at still counts; otherwise the sizes seen); a user at stage :math:`s` was ranked first at every earlier stage (so a rank 1
  below the largest size is refused: such data did not come from the algorithm). Reaching stage
  :math:`s` means the first :math:`n_{s-1} - 1` decoys all rank below the target. The band is on the
  events :math:`G_{s,c} = \{\text{the user reaches stage } s \text{ and ranks at most } c \text{ there}\}`
  (a user who went further ranked 1 at :math:`s`), counted from the data as the users past stage
  :math:`s` plus those stopped at :math:`s` with :math:`r_u \le c`, at the cut points :func:`cut_points`
  of each stage's size; given :math:`R`, with :math:`\theta = (R-1)/(N-1)`, :math:`m = n_{s-1}`,

  .. math:: \Pr(G_{s,c}\mid R) = (1-\theta)^{m-1}\,\Pr(\mathrm{Bin}(n_s - m, \theta) \le c - 1)

  with replacement (the extra :math:`n_s - m` decoys), and the hypergeometric analogue without (the
  first :math:`m - 1` decoys from the :math:`N - R` items below the target, the extra ones from the
  items not drawn yet). Each user's outcome is an independent draw of the same process, so the counts
  are binomial and the band and both coverage arguments hold as for one size.
* **The rank grid** (:math:`N` to :math:`10^7`): the LP's columns are cells of ranks instead of single
  ranks (one-rank cells up to :data:`DENSE_TOP`, then cells of relative width :data:`CELL_WIDTH`, with
  every cut-off :math:`K` and :math:`K+1` a cell's first rank). The bounds stay *outer* bounds with no
  assumption on :math:`P` inside a cell: every :math:`\Pr(G_j\mid R)` and every :math:`F(R)` is
  non-increasing in :math:`R` (more decoys outrank a worse target; every metric falls with the rank), so
  a cell's mass :math:`P_c` contributes to :math:`(PA)_j` between :math:`P_c A_j(\text{last})` and
  :math:`P_c A_j(\text{first})`, and to the metric between :math:`P_c F(\text{last})` and
  :math:`P_c F(\text{first})`. The LP over cells with :math:`\sum_c P_c A_j(\text{first}) \ge \ell_j`,
  :math:`\sum_c P_c A_j(\text{last}) \le h_j` admits the cell masses of every feasible :math:`P`, and
  minimising :math:`\sum_c P_c F(\text{last})` (maximising :math:`\sum_c P_c F(\text{first})`) gives a
  lower (upper) bound no tighter than the exact one: the coverage only grows. The dense kernel is never
  built: :math:`\Pr(G_j\mid R)` comes from the binomial (hypergeometric) distribution function at the
  cut points, :math:`O(\text{columns}\times J)` memory. ``grid=None`` uses one-rank columns up to
  :data:`DENSE_MAX` items and cells above; ``True`` always cells, ``False`` never.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from .._validation import check_bool, check_int, check_memory, check_ranks
from ..metrics import canonical_metric, metric_function
from .grid import RankGrid, check_sampled_ranks, pool_ranks

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


#: ``grid=None``: one-rank LP columns up to this many items, cells of ranks above (module docstring).
DENSE_MAX = 200_000
#: The cells' layout: one-rank cells for ranks up to ``DENSE_TOP``, then cells of relative width
#: ``CELL_WIDTH`` (about :math:`\ln(N/\text{DENSE\_TOP})/\text{CELL\_WIDTH}` cells: 78,000 at :math:`N = 10^7`).
DENSE_TOP = 4096
CELL_WIDTH = 1e-4


def _lp_min(c, A, lo, hi, start, A_last=None, c_cols=None) -> float:
    r""":math:`\min_P c\cdot P` over :math:`P \ge 0`, :math:`\sum P = 1`, :math:`\ell \le P A \le h` by
    column generation: the LP on the columns (ranks) in ``start``, then every rank whose reduced cost
    under the restricted LP's duals is negative joins, until none is (then the restricted optimum is the
    full one: LP duality); the full LP if that takes more than 30 rounds. Exact either way. With
    ``A_last`` (cells of ranks, module docstring): :math:`P A \ge \ell` on ``A`` (each cell's first rank)
    and :math:`P A_{last} \le h` on ``A_last`` (its last)."""
    N = c.size
    A_hi = A if A_last is None else A_last
    J = lo.size
    cols = np.zeros(N, dtype=bool)
    cols[start] = True
    for _ in range(30):
        idx = np.flatnonzero(cols)
        res = optimize.linprog(c[idx], A_ub=np.vstack([A_hi[idx].T, -A[idx].T]), b_ub=np.concatenate([hi, -lo]),
                               A_eq=np.ones((1, idx.size)), b_eq=[1.0], bounds=(0, None), method="highs",
                               options={"presolve": False})  # small LPs: presolve costs more than it saves
        if res.status == 2:  # infeasible on these columns: widen to all of them
            break
        if res.status != 0:
            raise ValueError(f"the identification bounds' linear program failed: {res.message}")
        y = res.ineqlin.marginals  # <= 0 for the <= rows
        red = c - A_hi @ y[:J] + A @ y[J:] - res.eqlin.marginals[0]
        new = (red < -1e-10 * max(1.0, float(np.abs(c).max()))) & ~cols
        if not new.any():
            return float(res.fun)
        cols |= new
    res = optimize.linprog(c, A_ub=np.vstack([A_hi.T, -A.T]), b_ub=np.concatenate([hi, -lo]), A_eq=np.ones((1, N)),
                           b_eq=[1.0], bounds=(0, None), method="highs")
    if res.status != 0:
        raise ValueError(f"the identification bounds' linear program failed: {res.message}")
    return float(res.fun)


def _start(N: int) -> np.ndarray:
    return np.unique(np.concatenate([np.arange(min(N, 64)), np.linspace(0, N - 1, 200).astype(np.int64)]))


def lp_bounds(F, A, lo, hi) -> tuple:
    r"""``(min, max)`` of :math:`F\cdot P` over :math:`P \ge 0`, :math:`\sum P = 1`, :math:`\ell \le P A \le h`
    (``A``: N x J; HiGHS, by column generation from the top 64 ranks and about 200 spread over the rest,
    :func:`_lp_min`). Raises ``ValueError`` if the band admits no distribution (it always admits the
    truth's; an empty one means the band missed)."""
    F = np.asarray(F, np.float64)
    A = np.asarray(A, np.float64)
    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    start = _start(F.size)
    low = _lp_min(F, A, lo, hi, start)
    high = -_lp_min(-F, A, lo, hi, start)
    return float(min(low, high)), float(max(low, high))


def cell_lp_bounds(F_first, F_last, A_first, A_last, lo, hi) -> tuple:
    r"""The outer bounds over cells of ranks (module docstring, "The rank grid"): ``(min, max)`` with the
    lower bound :math:`\min \sum_c P_c F_c(\text{last})` and the upper :math:`\max \sum_c P_c
    F_c(\text{first})`, both over :math:`P \ge 0`, :math:`\sum P = 1`, :math:`P A_{first} \ge \ell`,
    :math:`P A_{last} \le h`. One-rank cells (``first == last``) give :func:`lp_bounds` exactly."""
    Ff, Fl = np.asarray(F_first, np.float64), np.asarray(F_last, np.float64)
    Af, Al = np.asarray(A_first, np.float64), np.asarray(A_last, np.float64)
    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    start = _start(Ff.size)
    low = _lp_min(Fl, Af, lo, hi, start, A_last=Al)
    high = -_lp_min(-Ff, Af, lo, hi, start, A_last=Al)
    return float(low), float(max(low, high))


def _cells(N: int, ks, dense: bool) -> tuple:
    """The LP's columns: ``(first, last)`` rank of each cell (module docstring, "The rank grid")."""
    if dense:
        R = np.arange(1, N + 1, dtype=np.int64)
        return R, R
    top = min(N, DENSE_TOP)
    firsts = [np.arange(1, top + 1, dtype=np.int64)]
    if N > top:
        steps = int(np.ceil(np.log(N / top) / np.log1p(CELL_WIDTH)))
        firsts.append(np.unique(np.round(top * np.exp(np.arange(1, steps + 1) * np.log1p(CELL_WIDTH))).astype(np.int64)))
    extra = [int(x) for kk in ks if kk is not None for x in (kk, kk + 1)]
    first = np.unique(np.concatenate(firsts + [np.array(extra, dtype=np.int64)]))
    first = first[(first >= 1) & (first <= N)]
    last = np.append(first[1:] - 1, N)
    return first, last


def _stage_probabilities(R, N: int, prev: int, size: int, cuts, replacement: bool) -> np.ndarray:
    r""":math:`\Pr(G_{s,c}\mid R)` (module docstring, "Per-user sample sizes") for the ranks ``R``, a stage
    of ``size`` items reached after one of ``prev`` items (``prev`` = 1: the first stage), at the cut
    points ``cuts`` (ranks at most ``c``): an array ``(len(R), len(cuts))``."""
    R = np.asarray(R, np.float64)[:, None]
    c = np.asarray(cuts, np.float64)[None, :]
    extra = size - prev
    if replacement:
        theta = (R - 1.0) / (N - 1.0)
        reach = np.power(1.0 - theta, prev - 1) if prev > 1 else 1.0
        return reach * stats.binom.cdf(c - 1, extra, theta)
    # without replacement: the first prev - 1 decoys from the N - R items below the target, the extra ones
    # from the N - prev items not drawn yet, R - 1 of which outrank it
    reach = stats.hypergeom.pmf(0, N - 1, R - 1, prev - 1) if prev > 1 else np.ones_like(R)
    # a stage is unreachable when fewer than prev - 1 items rank below the target (reach 0; the
    # distribution function there is undefined and is not needed)
    ok = np.broadcast_to(reach > 0, R.shape)
    cdf = stats.hypergeom.cdf(c - 1, N - prev, np.where(ok, R - 1, 0), extra)
    return np.where(ok, reach * cdf, 0.0)


def _pool_metric(metric, k, N: int, R, pools, weights) -> np.ndarray:
    r""":math:`\bar F(R) = \sum_g w_g F_{N_g}(R_g(R))` at the ranks ``R`` of the largest pool's grid
    (:func:`~.grid.pool_rank_map`'s map, on any ranks). A metric with a cut-off that does not involve the
    catalogue size is zero wherever even the smallest pool maps past :math:`K`: only the rows before are
    evaluated (a handful), so thousands of distinct pools cost no more than one."""
    R = np.asarray(R, np.int64)
    pools = np.asarray(pools, np.int64)
    w = np.asarray(weights, np.float64)

    def rank_in(pool, rows):
        return pool_ranks(N, rows, pool)

    out = np.zeros(R.size)
    own_n = metric == "auc" or (metric == "precision" and k is None)
    if not own_n and k is not None:
        rows = np.flatnonzero(rank_in(int(pools.min()), R) <= k)
        if rows.size:
            F = metric_function(metric, k, N)(rank_in(pools[None, :], R[rows][:, None]))
            out[rows] = F @ w
        return out
    for Ng, wg in zip(pools, w):
        out += wg * metric_function(metric, k, int(Ng))(rank_in(int(Ng), R))
    return out


def _metric_bounds(metrics, ks, seq, N, pools, first, last, dense, A_first, A_last, lo, hi) -> tuple:
    """``(low, high)``: each metric@K's LP bounds on the band ``[lo, hi]`` (one-rank columns with
    :func:`lp_bounds`, cells with :func:`cell_lp_bounds`), the metric averaged over the pools when given."""
    if pools is not None:
        distinct, counts = np.unique(pools, return_counts=True)
        weights = counts / counts.sum()
    low, high = {}, {}
    for met in metrics:
        ls, hs = [], []
        for kk in ks:
            if pools is None:
                Ff = metric_function(met, kk, N)(first)
                Fl = Ff if dense else metric_function(met, kk, N)(last)
            else:
                Ff = _pool_metric(met, kk, N, first, distinct, weights)
                Fl = Ff if dense else _pool_metric(met, kk, N, last, distinct, weights)
            a, b = (lp_bounds(Ff, A_first, lo, hi) if dense else cell_lp_bounds(Ff, Fl, A_first, A_last, lo, hi))
            ls.append(a)
            hs.append(b)
        low[met] = np.array(ls) if seq else ls[0]
        high[met] = np.array(hs) if seq else hs[0]
    return low, high


def _fixed_sizes_bounds(r, nu, N, pools, sizes, stage_cuts, metrics, ks, seq, ci, replacement, dense, first, last):
    r"""Per-user sizes fixed by the design (``sizes_design="fixed"``): in each group of users of one size
    :math:`m` the counts :math:`\#\{u: n_u = m, r_u \le c\}` are Binomial(:math:`M_m`, :math:`(P A_m)_c`),
    the exact band of each group at the Bonferroni level over all groups' cut points, and one LP over the
    shared :math:`P` (the pools' metric as in the one-size case)."""
    J = int(sum(c.size for c in stage_cuts))
    los, his, S, A_first, A_last = [], [], [], [], []
    for m, cs in zip(sizes, stage_cuts):
        here = r[nu == m]
        counts = np.array([int((here <= c).sum()) for c in cs])
        lo, hi = clopper_pearson(counts, here.size, 1.0 - (1.0 - float(ci)) / J)
        los.append(lo)
        his.append(hi)
        S.append(counts)
        A_first.append(_stage_probabilities(first, N, 1, m, cs, replacement))
        A_last.append(A_first[-1] if dense else _stage_probabilities(last, N, 1, m, cs, replacement))
    lo, hi, S = np.concatenate(los), np.concatenate(his), np.concatenate(S)
    A_first, A_last = np.hstack(A_first), np.hstack(A_last)
    low, high = _metric_bounds(metrics, ks, seq, N, pools, first, last, dense, A_first, A_last, lo, hi)
    return BoundsResult(low, high, np.concatenate(stage_cuts), lo, hi, S, float(ci))


def identification_bounds(sampled_ranks, n_items, sample_size, metrics, k, ci: float = 0.95, replacement=True,
                          cuts=None, grid=None, sizes_design=None) -> BoundsResult:
    r"""The range of each metric@K over every rank distribution whose sampled-rank law lies in a
    simultaneous exact ``ci`` band around the observed one (module docstring): an interval that covers
    the population metric with probability at least ``ci`` (all metrics and cut-offs at once), and the
    test users' own metric too (Hoeffding 1956).

    Parameters
    ----------
    sampled_ranks : one rank in 1..n (1..n_u) per user.
    n_items : N, or one catalogue size (pool) :math:`N_u` per user (module docstring, "The inputs readers
        have"; with ``replacement=True``).
    sample_size : n, or one size :math:`n_u` per user from adaptive sampling (TORS Algorithm 1: the sizes
        are the stages of one ladder of nested sets, a rank 1 only at the largest size).
    metrics : a metric name or a list; ``k`` a cut-off or a list (``None`` for AUC).
    ci : the simultaneous level, in (0, 1).
    replacement : the kernel (decoys with or without replacement).
    cuts : optional sampled ranks in 1..n-1 to use as cut points instead of :func:`cut_points` (one sample
        size only).
    sizes_design : with per-user sizes, ``"adaptive"`` (TORS Algorithm 1, above) or ``"fixed"`` (each user's
        size fixed by the design, independent of the ranks: the band is built in each group of users of one
        size, whose counts are binomial, and all groups' events constrain the one :math:`P`); ``None``
        (default): adaptive unless a user ranks first below the largest size, which Algorithm 1 never leaves.
    grid : ``None`` (one-rank LP columns up to :data:`DENSE_MAX` items, cells of ranks above), ``True``
        (cells), ``False`` (one-rank columns); a :class:`~.grid.RankGrid` counts as ``True`` (the bounds
        use their own cells, whose outer bounds need no assumption inside a cell).
    """
    replacement = check_bool(replacement, "replacement")
    if isinstance(ci, bool) or not isinstance(ci, (int, float, np.floating)) or not 0.0 < float(ci) < 1.0:
        raise ValueError(f"ci must be a confidence level strictly between 0 and 1 (e.g. 0.95), got {ci!r}")
    if np.ndim(n_items) > 0:
        pools = np.asarray(n_items)
        if pools.ndim != 1 or pools.size == 0:
            raise ValueError(f"n_items must be an int or one catalogue size per user, got shape {pools.shape}")
        pools = check_ranks(pools, "n_items")
        if pools.min() < 2:
            raise ValueError(f"n_items must hold catalogue sizes >= 2, got {int(pools.min())}")
        if not replacement:
            raise ValueError("replacement must be True with per-user catalogue sizes (n_items an array): without "
                             "replacement the kernel involves each user's pool")
        N = int(pools.max())
    else:
        pools = None
        N = check_int(n_items, "n_items", low=2)
    if pools is not None and pools.size != np.size(sampled_ranks):
        raise ValueError(f"n_items must be an int or have one catalogue size per user ({np.size(sampled_ranks)}), "
                         f"got length {pools.size}")
    if pools is not None and np.ndim(sample_size) == 0:
        n0 = check_int(sample_size, "sample_size", low=2)
        if n0 > int(pools.min()):
            raise ValueError(f"sample_size must not exceed any user's catalogue size (n_items); the smallest is "
                             f"{int(pools.min())}, got {n0}")
    r, n = check_sampled_ranks(sampled_ranks, N, sample_size)
    if pools is not None and not isinstance(n, int) and np.any(n > pools):
        u = int(np.flatnonzero(n > pools)[0])
        raise ValueError(f"sample_size must not exceed the user's catalogue size (n_items): user {u} has "
                         f"sample_size {int(n[u])} and n_items {int(pools[u])}")
    if grid is not None and not isinstance(grid, (bool, np.bool_, RankGrid)):
        raise ValueError(f"grid must be None, True, False or a RankGrid, got {grid!r}")
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    metrics = [canonical_metric(m) for m in metrics]
    seq = np.ndim(k) > 0
    ks = list(np.atleast_1d(np.asarray(k, dtype=object))) if seq else [k]
    if seq and not ks:
        raise ValueError("k must not be an empty sequence")
    for kk in ks:
        if kk is not None:
            check_int(kk, "k", low=1, high=N)
    # the stages: one size, or the ladder of adaptive sampling
    sizes = [n] if isinstance(n, int) else sorted(int(x) for x in np.unique(n))
    nu = np.full(r.size, n, dtype=np.int64) if isinstance(n, int) else n
    if sizes_design not in (None, "adaptive", "fixed"):
        raise ValueError(f"sizes_design must be None, 'adaptive' or 'fixed', got {sizes_design!r}")
    adaptive = False
    if len(sizes) > 1:
        bad = (r == 1) & (nu < sizes[-1])
        adaptive = sizes_design == "adaptive" or (sizes_design is None and not bad.any())
        if adaptive and bad.any():
            u = int(np.flatnonzero(bad)[0])
            raise ValueError(f"sample_size: per-user sizes must come from adaptive sampling (TORS Algorithm 1: the set "
                             f"grows while the target ranks first), but user {u} ranks first at sample_size "
                             f"{int(nu[u])} < the largest size {sizes[-1]}")
    if cuts is not None:
        if len(sizes) > 1:
            raise ValueError("cuts must be None with per-user sample sizes (each stage has its own cut points)")
        cuts = np.unique(np.asarray(cuts, dtype=np.int64))
        if cuts.size == 0 or cuts.min() < 1 or cuts.max() > n - 1:
            raise ValueError(f"cuts must be sampled ranks in 1..{n - 1} (n - 1), got {cuts!r}")
        stage_cuts = [cuts]
    else:
        stage_cuts = [cut_points(N, m, ks) for m in sizes]
    J = int(sum(c.size for c in stage_cuts))
    if grid is None:
        dense = N <= DENSE_MAX
    else:
        dense = not isinstance(grid, RankGrid) and not bool(grid)
    first, last = _cells(N, ks, dense)
    check_memory(8.0 * first.size * 2 * (J + 2), f"the bounds' columns ({first.size} ranks or cells x {J} cut points)",
                 "n_items")
    if len(sizes) > 1 and not adaptive:
        return _fixed_sizes_bounds(r, nu, N, pools, sizes, stage_cuts, metrics, ks, seq, ci, replacement, dense,
                                   first, last)
    # counts of the events G_{s,c}: users past stage s, plus those stopped at s with rank <= c
    S, A_first, A_last = [], [], []
    # the ladder the sets grew along: TORS's doubling from the smallest size where the sizes fit it (a stage
    # no user stopped at still sets how many decoys the next one had), else the sizes seen
    ladder = sizes
    if len(sizes) > 1 and all(m % sizes[0] == 0 and ((m // sizes[0]) & (m // sizes[0] - 1)) == 0 for m in sizes):
        ladder = [sizes[0] << j for j in range((sizes[-1] // sizes[0]).bit_length())]
    before = {m: (ladder[ladder.index(m) - 1] if ladder.index(m) else 1) for m in sizes}
    for m, cs in zip(sizes, stage_cuts):
        prev = before[m]
        past = int((nu > m).sum())
        here = r[nu == m]
        S.extend(past + int((here <= c).sum()) for c in cs)
        A_first.append(_stage_probabilities(first, N, prev, m, cs, replacement))
        A_last.append(A_first[-1] if dense else _stage_probabilities(last, N, prev, m, cs, replacement))
    S = np.array(S, dtype=np.int64)
    A_first, A_last = np.hstack(A_first), np.hstack(A_last)
    M = r.size
    lo, hi = clopper_pearson(S, M, 1.0 - (1.0 - float(ci)) / J)
    low, high = _metric_bounds(metrics, ks, seq, N, pools, first, last, dense, A_first, A_last, lo, hi)
    return BoundsResult(low, high, np.concatenate(stage_cuts), lo, hi, S, float(ci))
