r"""Item sampling: drawing sampled ranks, and the exact moments of sampled metrics.

Given global ranks :math:`R_u` of :math:`M` users, a sampled evaluation draws :math:`n-1` decoys
for each user and records the target's rank :math:`r_u \in 1..n` in the sampled set. The sampled
rank follows the kernel :math:`P(r \mid R)` of :mod:`itemsampling.kernel`; decoys are drawn
independently for every user.
"""

from __future__ import annotations

import numpy as np

from ._validation import as_rng, check_bool, check_int, check_ranks, check_sizes
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
    F = metric_function(metric, k, sample_size)
    values = F(np.arange(1, sample_size + 1))
    uniq, inverse, P = _unique_rows(R, n_items, sample_size, replacement)
    mean_u = P @ values
    var_u = np.maximum(P @ values**2 - mean_u**2, 0.0)
    counts = np.bincount(inverse, minlength=uniq.size)
    M = R.size
    mean = float(np.dot(counts, mean_u) / M)
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
        \mathbb E[T^S_{Recall@K}] = \frac1M \sum_u p_u,\qquad
        \mathrm{Var}[T^S_{Recall@K}] = \frac1{M^2}\sum_u p_u(1-p_u),\qquad
        p_u = \Pr(r_u \le K \mid R_u).

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
    t = float(t)
    if not np.isfinite(t) or t <= 0:
        raise ValueError(f"t must be a positive finite number, got {t}")
    return float(min(1.0, 2.0 * np.exp(-2.0 * n_users * t * t)))


def one_decoy_line(metric: str, k: int | None, n_items: int) -> tuple[float, float]:
    r"""Slope and intercept of :math:`\mathbb E[F(r)\mid R]` in :math:`R` when :math:`n = 2`
    (one decoy; Krichene & Rendle 2020, Sec. 4.4.4):

    .. math::
        \mathbb E[F(r)\mid R] = F(2) + \frac{N-R}{N-1}\bigl(F(1)-F(2)\bigr)
        = \underbrace{-\frac{F(1)-F(2)}{N-1}}_{\text{slope}}\,R
          + \underbrace{\frac{N F(1) - F(2)}{N-1}}_{\text{intercept}} .

    The same for both kernels: with one decoy there is nothing to replace.
    """
    n_items = check_int(n_items, "n_items", low=2)
    F = metric_function(metric, k, 2)
    f1, f2 = (float(v) for v in F(np.array([1, 2])))
    return -(f1 - f2) / (n_items - 1.0), (n_items * f1 - f2) / (n_items - 1.0)
