r"""Item sampling: drawing sampled ranks, and the exact moments of sampled metrics.

Given global ranks :math:`R_u` of :math:`M` users, a sampled evaluation draws :math:`n-1` decoys
for each user and records the target's rank :math:`r_u \in 1..n` in the sampled set. The sampled
rank follows the kernel :math:`P(r \mid R)` of :mod:`itemsampling.kernel`; decoys are drawn
independently for every user.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validation import as_rng, check_bool, check_int, check_memory, check_ranks, check_real, check_sizes
from .kernel import kernel, kernel_cdf
from .metrics import metric_function

__all__ = [
    "sample_ranks",
    "expected_metric_given_rank",
    "expected_sampled_metric",
    "sampled_metric_moments",
    "shr_moments",
    "hoeffding_bound",
    "one_decoy_line",
    "adaptive_sizes",
    "adaptive_sample_ranks",
    "SamplingCost",
    "adaptive_sampling_cost",
]


def sample_ranks(global_ranks, n_items: int, sample_size: int, rng=None, replacement: bool = True) -> np.ndarray:
    r"""Draw one sampled rank per user: :math:`r_u = 1 + X_u` with

    * :math:`X_u \sim \mathrm{Binomial}(n-1, (R_u-1)/(N-1))` with replacement
      (Krichene & Rendle 2020, Sec. 4.3; TORS Eq. 5), or
    * :math:`X_u \sim \mathrm{Hypergeometric}(N-1, R_u-1, n-1)` without replacement.

    Exact: the draw is distributed as ranking the target among ``n - 1`` explicitly drawn uniform
    decoys; vectorised over users.

    Returns an int64 array of sampled ranks in ``1..sample_size`` aligned with ``global_ranks``.
    """
    n_items, sample_size = check_sizes(n_items, sample_size)
    R = check_ranks(global_ranks, "global_ranks", high=n_items)
    gen = as_rng(rng)
    if check_bool(replacement, "replacement"):
        x = gen.binomial(sample_size - 1, (R - 1) / (n_items - 1))
    else:
        x = gen.hypergeometric(R - 1, n_items - R, sample_size - 1)
    return x.astype(np.int64) + 1


def _check_row_memory(R, sample_size):
    """Refuse, before any allocation of length ``n``, kernel rows that do not fit in memory (one row
    per distinct global rank, each of length ``n``, and its temporaries)."""
    rows = np.unique(R).size
    check_memory(8.0 * sample_size * (4 * rows + 3), f"{rows} kernel row(s) of length sample_size = {sample_size}",
                 "sample_size (or the number of distinct global_ranks)")


def _unique_rows(R, n_items, sample_size, replacement):
    uniq, inverse = np.unique(R, return_inverse=True)
    return uniq, inverse, kernel(n_items, sample_size, replacement, uniq)


def expected_metric_given_rank(global_ranks, n_items: int, sample_size: int, metric: str,
                               k: int | None = None, replacement: bool = True) -> np.ndarray:
    r""":math:`\mathbb E[F(r) \mid R] = \sum_{r=1}^{n} P(r \mid R) F(r)` for each given global rank
    (Krichene & Rendle 2020, Eq. 16; their Fig. 3 plots it against :math:`R`). For AUC the sampled
    metric uses :math:`n` in place of :math:`N`."""
    n_items, sample_size = check_sizes(n_items, sample_size)
    R = check_ranks(global_ranks, "global_ranks", high=n_items)
    _check_row_memory(R, sample_size)
    F = metric_function(metric, k, sample_size)
    values = F(np.arange(1, sample_size + 1))
    uniq, inverse, P = _unique_rows(R, n_items, sample_size, replacement)
    return (P @ values)[inverse]


def sampled_metric_moments(global_ranks, n_items: int, sample_size: int, metric: str,
                           k: int | None = None, replacement: bool = True) -> tuple[float, float]:
    r"""Exact mean and standard deviation of the sampled metric :math:`T^S = \frac1M\sum_u F(r_u)`
    over the decoy draws, for fixed global ranks.

    Generalises Krichene & Rendle 2020, Eq. 16-19 and TORS Eq. 14-15 to every metric:

    .. math::
        \mathbb E[T^S] = \frac1M \sum_u \mathbb E[F(r_u)\mid R_u],\qquad
        \mathrm{Var}[T^S] = \frac1{M^2} \sum_u \mathrm{Var}[F(r_u)\mid R_u],

    since users draw their decoys independently.
    """
    n_items, sample_size = check_sizes(n_items, sample_size)
    R = check_ranks(global_ranks, "global_ranks", high=n_items)
    _check_row_memory(R, sample_size)
    F = metric_function(metric, k, sample_size)
    values = F(np.arange(1, sample_size + 1))
    uniq, inverse, P = _unique_rows(R, n_items, sample_size, replacement)
    # a mean of the values lies within their range: clip the rounding of the sums (a row of P summing to
    # 1 + eps put Recall at 1.0000000000000002)
    mean_u = P @ values
    var_u = np.maximum(P @ values**2 - mean_u**2, 0.0)
    mean_u = np.clip(mean_u, values.min(), values.max())
    counts = np.bincount(inverse, minlength=uniq.size)
    M = R.size
    mean = float(np.clip(np.dot(counts, mean_u) / M, values.min(), values.max()))
    var = float(np.dot(counts, var_u) / M**2)
    return mean, float(np.sqrt(var))


def expected_sampled_metric(global_ranks, n_items: int, sample_size: int, metric: str,
                            k: int | None = None, replacement: bool = True) -> float:
    r"""Exact expectation, over decoy draws, of the sampled metric averaged over users
    (Krichene & Rendle 2020, Eq. 16; Recall: Eq. 18; AP: Eq. 19; TORS Eq. 14).

    ``sample_size`` is :math:`n`, the sampled-set size including the target (:math:`n-1` decoys).
    """
    return sampled_metric_moments(global_ranks, n_items, sample_size, metric, k, replacement)[0]


def shr_moments(global_ranks, n_items: int, sample_size: int, ks=None, replacement: bool = True):
    r"""Mean and variance of the sampled hit ratio :math:`T^S_{Recall@K}` as a Poisson binomial
    (TORS Eq. 13-15):

    .. math::
        \begin{aligned}
        \mathbb E[T^S_{Recall@K}] &= \frac1M \sum_u p_u,\qquad
        \mathrm{Var}[T^S_{Recall@K}] = \frac1{M^2}\sum_u p_u(1-p_u),\\
        p_u &= \Pr(r_u \le K \mid R_u).
        \end{aligned}

    Parameters
    ----------
    ks : int or array of int, optional
        Cut-offs in ``1..n``; default all ``K = 1..n``.

    Returns
    -------
    (mean, var) : arrays over ``ks``.
    """
    n_items, sample_size = check_sizes(n_items, sample_size)
    R = check_ranks(global_ranks, "global_ranks", high=n_items)
    if ks is None:
        ks = np.arange(1, sample_size + 1)
    ks = np.atleast_1d(np.asarray(ks))
    ks = np.array([check_int(x, "k", low=1, high=sample_size) for x in ks], dtype=np.int64)
    uniq, inverse = np.unique(R, return_inverse=True)
    cdf = kernel_cdf(n_items, sample_size, replacement, uniq)[:, ks - 1]  # p_u by group
    counts = np.bincount(inverse, minlength=uniq.size)
    M = R.size
    mean = counts @ cdf / M
    var = counts @ (cdf * (1.0 - cdf)) / M**2
    return mean, var


def hoeffding_bound(n_users: int, t: float) -> float:
    r"""Hoeffding's bound :math:`\Pr(|T^S - \mathbb E T^S| \ge t) \le 2\exp(-2Mt^2)` for a mean of
    :math:`M` independent variables in :math:`[0,1]` (TORS Sec. 3.3, after Eq. 17)."""
    n_users = check_int(n_users, "n_users", low=1)
    t = check_real(t, "t", low=0.0, low_open=True)
    return float(min(1.0, 2.0 * np.exp(-2.0 * n_users * t * t)))


def one_decoy_line(metric: str, k: int | None, n_items: int) -> tuple[float, float]:
    r"""Slope and intercept of :math:`\mathbb E[F(r)\mid R]` in :math:`R` when :math:`n = 2`
    (one decoy; Krichene & Rendle 2020, Sec. 4.4.4):

    .. math::
        \begin{aligned}
        \mathbb E[F(r)\mid R] &= F(2) + \frac{N-R}{N-1}\bigl(F(1)-F(2)\bigr)\\
        &= \underbrace{-\frac{F(1)-F(2)}{N-1}}_{\text{slope}}\,R
          + \underbrace{\frac{N F(1) - F(2)}{N-1}}_{\text{intercept}} .
        \end{aligned}

    The same for both kernels: with one decoy there is nothing to replace.
    """
    n_items = check_int(n_items, "n_items", low=2)
    F = metric_function(metric, k, 2)
    f1, f2 = (float(v) for v in F(np.array([1, 2])))
    return -(f1 - f2) / (n_items - 1.0), (n_items * f1 - f2) / (n_items - 1.0)


# ---------------------------------------------------------------------------------------------
# adaptive item sampling (TORS Sec. 6)
# ---------------------------------------------------------------------------------------------
def adaptive_sizes(initial_size: int, max_size: int, n_items: int) -> np.ndarray:
    r"""The ladder of sampled-set sizes :math:`n_j = 2^j n_0`, :math:`j = 0..t`, of TORS Algorithm 1,
    :math:`n_t = n_{max}`. Refuses :math:`n_0 < 2`, :math:`n_{max} > N` and an :math:`n_{max}` that
    is not :math:`n_0 2^t` for some :math:`t \ge 0`."""
    n_items = check_int(n_items, "n_items", low=2)
    initial_size = check_int(initial_size, "initial_size", low=2, high=n_items)
    max_size = check_int(max_size, "max_size", low=initial_size, high=n_items)
    ratio, rem = divmod(max_size, initial_size)
    if rem or ratio & (ratio - 1):
        raise ValueError(f"max_size must be initial_size * 2**j (initial_size = {initial_size}: "
                         f"{', '.join(str(initial_size << j) for j in range(4))}, ...), got {max_size}")
    return initial_size * (1 << np.arange(ratio.bit_length(), dtype=np.int64))


def adaptive_sample_ranks(global_ranks, n_items: int, initial_size: int, max_size: int, rng=None,
                          replacement: bool = True) -> tuple[np.ndarray, np.ndarray]:
    r"""Adaptive item sampling, TORS Algorithm 1 (Sec. 6.1), exact and vectorised over users.

    Every user starts with a sampled set of :math:`n_0` = ``initial_size`` items (the target and
    :math:`n_0 - 1` uniform decoys). While the target ranks first in its set (:math:`r_u = 1`) and
    the set is smaller than :math:`n_{max}` = ``max_size``, the set doubles: :math:`n_u` *extra*
    decoys are drawn ("sampling extra :math:`n_u` items", Algorithm 1 line 5) and added to those
    already drawn, so :math:`n_u \to 2 n_u` (TORS Algorithm 1, lines 4-6: :math:`n_0` counts the target).

    Since all earlier decoys rank below the target (:math:`r_u = 1`), the new rank is one plus the
    number of *extra* decoys that outrank it:

    * with replacement, :math:`r_u - 1 \sim \mathrm{Binomial}(n_u, \theta_R)`,
      :math:`\theta_R = (R-1)/(N-1)`, for the :math:`n_u` extra decoys;
    * without replacement, the extra decoys come from the items not drawn yet, of which
      :math:`R - 1` outrank the target and :math:`N - R - (n_u - 1)` do not:
      :math:`r_u - 1 \sim \mathrm{Hypergeometric}(R-1, N-R-(n_u-1), n_u)`.

    Each stage costs one vectorised draw for the users still active; there are
    :math:`\log_2(n_{max}/n_0) + 1` stages. The stopping rule depends only on :math:`r_u`, so a
    user's likelihood is the fixed-size kernel :math:`P(r_u \mid R; n_u)` up to a factor free of
    :math:`R` (TORS Eq. 43; :func:`itemsampling.estimators.distribution.fit_rank_distribution`).

    Parameters
    ----------
    global_ranks : array of int in ``1..n_items``
    n_items : int, :math:`N`
    initial_size : int, :math:`n_0 \ge 2`, target included
    max_size : int, :math:`n_{max} = n_0 2^t \le N`
    rng : seed or Generator
    replacement : bool

    Returns
    -------
    (sampled_ranks, sample_sizes) : two int64 arrays of length :math:`M`, :math:`r_u \in 1..n_u`.
    """
    n_items = check_int(n_items, "n_items", low=2)
    ladder = adaptive_sizes(initial_size, max_size, n_items)
    R = check_ranks(global_ranks, "global_ranks", high=n_items)
    check_bool(replacement, "replacement")
    gen = as_rng(rng)
    ranks = sample_ranks(R, n_items, int(ladder[0]), gen, bool(replacement))
    sizes = np.full(R.size, ladder[0], dtype=np.int64)
    active = np.flatnonzero(ranks == 1)
    for size in ladder[1:]:
        if active.size == 0:
            break
        extra = int(size // 2)  # n_u extra decoys double the set from n_u to 2 n_u
        Ra = R[active]
        if replacement:
            above = gen.binomial(extra, (Ra - 1) / (n_items - 1))
        else:  # the n_u - 1 decoys drawn so far all rank below the target
            above = gen.hypergeometric(Ra - 1, n_items - Ra - (extra - 1), extra)
        ranks[active] = above + 1
        sizes[active] = size
        active = active[above == 0]
    return ranks, sizes


@dataclass
class SamplingCost:
    r"""The sampling cost of an adaptive run, TORS Eq. 44 (:func:`adaptive_sampling_cost`).

    Arrays over the ladder :math:`n_j = 2^j n_0`, :math:`j = 0..t`:

    * ``sizes``: :math:`n_j`.
    * ``users``: :math:`m_j`, the users whose final set size is :math:`n_j`.
    * ``resolved``: the users at size :math:`n_j` whose target no longer ranks first
      (:math:`r_u > 1`); equal to ``users`` except at the terminal size.
    * ``entering``: :math:`M - \sum_{p<j} m_p`, the users who reach size :math:`n_j`.
    * ``cost``: :math:`C_j`: sampled items per resolved user; ``inf`` where no user is resolved.
    * ``mean_size``: the average set size :math:`\frac1M\sum_u n_u`.
    * ``suggested_max_size``: the terminal size the costs suggest (see :func:`adaptive_sampling_cost`).
    """

    sizes: np.ndarray
    users: np.ndarray
    resolved: np.ndarray
    entering: np.ndarray
    cost: np.ndarray
    mean_size: float
    suggested_max_size: int


def adaptive_sampling_cost(sampled_ranks, sample_sizes, initial_size: int, max_size: int,
                           max_growth: float = 3.0) -> SamplingCost:
    r"""Sampling efficiency of adaptive item sampling, TORS Eq. 44 (Sec. 6.3, Fig. 9).

    With :math:`m_j` users ending at size :math:`n_j`, the items sampled at step :math:`j` are
    :math:`n_j - n_{j-1}` for each of the :math:`M - \sum_{p<j} m_p` users who reach it, and

    .. math::
        C_0 = \frac{M\,n_0}{m_0},\qquad
        C_j = \frac{(M - \sum_{p=0}^{j-1} m_p)(n_j - n_{j-1})}{m_j}\quad (j \ge 1)

    is the number of sampled items spent per user whose target leaves rank 1 at that step.
    TORS define :math:`C_j` for :math:`j \ne t`; at the terminal size we divide by the users
    actually resolved there (:math:`r_u > 1`), so that :math:`C_t` is the same quantity.

    TORS choose :math:`n_{max}` by eye where :math:`C_j` "increases fast" (12.4% of :math:`N` on
    yelp; "10% ~ 15%" as a default). We make the rule explicit. The increment
    :math:`n_j - n_{j-1}` is :math:`n_0` for :math:`j = 1` (as for :math:`C_0`) and doubles from
    step to step from :math:`j = 2` on, so with :math:`s_j` the share of the entering users resolved
    at step :math:`j`, :math:`C_1 / C_0 = s_0 / s_1` and :math:`C_j / C_{j-1} = 2 s_{j-1} / s_j` for
    :math:`j \ge 2`: from :math:`j = 2` on, :math:`C_j` doubles from step to step as long as the
    same share is resolved. The suggested terminal size is the last :math:`n_j` before the first
    step whose cost grows more than ``max_growth`` times, or :math:`n_{max}` if none does; with the
    default 3 that is a resolved share falling by more than a third from one step to the next for
    :math:`j \ge 2`, and to less than a third at :math:`j = 1`.

    Parameters
    ----------
    sampled_ranks, sample_sizes : the output of :func:`adaptive_sample_ranks`.
    initial_size, max_size : the :math:`n_0` and :math:`n_{max}` of that run.
    max_growth : float > 1.
    """
    ladder = adaptive_sizes(initial_size, max_size, check_int(max_size, "max_size", low=2))
    n_u = check_ranks(sample_sizes, "sample_sizes", high=int(ladder[-1]))
    r = check_ranks(sampled_ranks, "sampled_ranks")
    if r.size != n_u.size:
        raise ValueError(f"sampled_ranks and sample_sizes must have the same length, got {r.size} and {n_u.size}")
    if np.any(r > n_u):
        raise ValueError("sampled_ranks must lie in 1..sample_sizes for every user")
    if not np.all(np.isin(n_u, ladder)):
        bad = n_u[~np.isin(n_u, ladder)][0]
        raise ValueError(f"sample_sizes must lie on the ladder {ladder.tolist()}, got {bad}")
    if np.any((r == 1) & (n_u < ladder[-1])):
        raise ValueError("a user with sampled rank 1 below max_size: not the output of adaptive sampling")
    g = float(max_growth) if isinstance(max_growth, (int, float, np.floating, np.integer)) and not isinstance(max_growth, bool) else np.nan
    if not np.isfinite(g) or g <= 1:
        raise ValueError(f"max_growth must be a finite number > 1, got {max_growth!r}")
    M = r.size
    idx = np.searchsorted(ladder, n_u)
    users = np.bincount(idx, minlength=ladder.size)
    resolved = np.bincount(idx[r > 1], minlength=ladder.size)
    entering = M - np.concatenate([[0], np.cumsum(users)[:-1]])
    step = np.diff(np.concatenate([[0], ladder]))  # n_0, then n_j - n_{j-1}
    with np.errstate(divide="ignore", invalid="ignore"):
        cost = np.where(resolved > 0, entering * step / np.maximum(resolved, 1), np.inf)
    cost = cost.astype(np.float64)
    suggested = int(ladder[-1])
    for j in range(1, ladder.size):
        if not cost[j] <= g * cost[j - 1]:
            suggested = int(ladder[j - 1])
            break
    return SamplingCost(ladder, users, resolved, entering, cost, float(n_u.mean()), suggested)
