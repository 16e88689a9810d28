r"""The sampling kernel :math:`P(r \mid R)`: distribution of the sampled rank given the global rank.

A target item sits at global rank :math:`R` among :math:`N` items. We draw :math:`n-1` decoys
uniformly from the :math:`N-1` other items and rank the target within the :math:`n` sampled
items. Of the :math:`N-1` candidate decoys, exactly :math:`R-1` outrank the target, so the number
of decoys ranked above it, :math:`r-1`, follows

* **with replacement** (Krichene & Rendle 2020, Sec. 4.3 and Eq. 15; Li et al. 2020, Eq. 6;
  TORS Eq. 5):

  .. math:: r - 1 \sim \mathrm{Binomial}\bigl(n-1,\ \theta_R\bigr),\qquad \theta_R = \frac{R-1}{N-1};

* **without replacement** (Krichene & Rendle 2020, Sec. 4.4; Li et al. 2020, Sec. 2.2):

  .. math:: r - 1 \sim \mathrm{Hypergeometric}\bigl(N-1,\ R-1,\ n-1\bigr),

  i.e. population :math:`N-1`, :math:`R-1` successes, :math:`n-1` draws.

Both are computed in log space with ``gammaln`` (plain pmf values underflow for large
:math:`n` and :math:`N`). The kernel matrix has one row per global rank :math:`R = 1..N` and one
column per sampled rank :math:`r = 1..n`; every row sums to 1.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln, logsumexp

from ._validation import check_bool, check_int, check_memory, check_ranks, check_sizes

__all__ = ["log_kernel", "kernel", "kernel_row", "kernel_cdf", "theta", "RESOLVED", "resolves", "resolution_limit"]

#: A cut-off :math:`K` counts as *resolved* by sampled ranks at size :math:`n` when
#: :math:`K \ge` ``RESOLVED`` :math:`\times N/(n-1)`, two kernel widths (the kernel spreads global rank
#: :math:`R` over sampled ranks about :math:`(R-1)(n-1)/(N-1)`, one sampled rank per :math:`N/(n-1)` global
#: ranks; the multiple was set by the coverage study of :mod:`itemsampling.estimators.auto`, "The interval").
#: The rule of ``method="auto"``'s interval and of a plan's pilot (:func:`itemsampling.plan.pilot_resolves`).
RESOLVED = 2.0


def resolves(n_items: int, sample_size, k, multiple: float = RESOLVED) -> bool:
    r"""Whether sampled ranks at size :math:`n` (the largest, with per-user sizes) resolve the cut-off
    :math:`K`: :math:`K \ge c\,N/(n-1)`, :math:`c` = ``multiple`` (default :data:`RESOLVED`); ``k=None``
    (a metric over the whole list) counts as resolved. A rule of the design, not of the data."""
    N = check_int(n_items, "n_items", low=2)
    n = check_int(int(np.max(sample_size)), "sample_size", low=2)
    return k is None or check_int(k, "k", low=1) >= resolution_limit(N, n, multiple)


def resolution_limit(n_items: int, sample_size: int, multiple: float = RESOLVED) -> float:
    r"""The smallest cut-off :func:`resolves` accepts, :math:`c\,N/(n-1)`, for checked ints
    :math:`N \ge n \ge 2` (one threshold for many cut-offs: the estimate path checks 50 per call)."""
    return multiple * n_items / (sample_size - 1)


def theta(global_ranks, n_items: int) -> np.ndarray:
    r""":math:`\theta_R = (R-1)/(N-1)`, the chance that one uniform decoy outranks the target
    (Krichene & Rendle 2020, Eq. 15)."""
    n_items = check_int(n_items, "n_items", low=2)
    R = check_ranks(global_ranks, "global_ranks", high=n_items).astype(np.float64)
    return (R - 1.0) / (n_items - 1.0)


def _log_binomial(R: np.ndarray, n_items: int, sample_size: int) -> np.ndarray:
    m = sample_size - 1  # number of decoys
    j = np.arange(sample_size, dtype=np.float64)  # r - 1 = 0..n-1
    p = (R.astype(np.float64) - 1.0) / (n_items - 1.0)
    log_comb = gammaln(m + 1.0) - gammaln(j + 1.0) - gammaln(m - j + 1.0)
    # log p and log(1 - p) with the endpoints p = 0 (R = 1) and p = 1 (R = N) set aside: an outer
    # product is much cheaper than elementwise xlogy on an N x n grid.
    interior = (p > 0) & (p < 1)
    log_p = np.log(np.where(interior, p, 0.5))
    log_q = np.log1p(-np.where(interior, p, 0.5))
    out = np.multiply.outer(log_p, j)
    out += np.multiply.outer(log_q, m - j)
    out += log_comb
    if not interior.all():
        edge = np.full(sample_size, -np.inf)
        out[p <= 0] = np.where(j == 0, 0.0, edge)
        out[p >= 1] = np.where(j == m, 0.0, edge)
    return out


def _log_hypergeometric(R: np.ndarray, n_items: int, sample_size: int) -> np.ndarray:
    m = sample_size - 1  # draws
    pop = n_items - 1
    good = R.astype(np.float64) - 1.0  # items above the target
    bad = n_items - R.astype(np.float64)  # items below the target
    j = np.arange(sample_size, dtype=np.float64)
    # log C(good, j) + log C(bad, m - j) - log C(pop, m); only two gammaln calls are N x n,
    # the row terms (length N) and the column terms (length n) are broadcast.
    row = gammaln(good + 1.0) + gammaln(bad + 1.0)
    col = -gammaln(j + 1.0) - gammaln(m - j + 1.0) - (gammaln(pop + 1.0) - gammaln(m + 1.0) - gammaln(pop - m + 1.0))
    a = np.subtract.outer(good, j)  # good - j
    b = np.add.outer(bad - m, j)  # bad - (m - j)
    valid = (a >= 0) & (b >= 0)
    np.maximum(a, 0.0, out=a)
    np.maximum(b, 0.0, out=b)
    out = gammaln(a + 1.0)
    out += gammaln(b + 1.0)
    np.negative(out, out=out)
    out += row[:, None]
    out += col[None, :]
    out[~valid] = -np.inf
    return out


def log_kernel(n_items: int, sample_size: int, replacement: bool = True, global_ranks=None) -> np.ndarray:
    r"""Log sampling kernel :math:`\log P(r \mid R)`.

    Parameters
    ----------
    n_items : int
        Catalog size :math:`N \ge 2`.
    sample_size : int
        Sampled-set size :math:`n` including the target, :math:`2 \le n \le N`.
    replacement : bool
        Binomial kernel (with replacement) or hypergeometric kernel (without).
    global_ranks : array of int, optional
        Rows to compute; defaults to all :math:`R = 1..N`.

    Returns
    -------
    ndarray of shape ``(len(global_ranks), n)`` (or ``(N, n)``): entry ``[i, r-1]`` is
    :math:`\log P(r \mid R_i)`; ``-inf`` where the probability is exactly zero.
    """
    n_items, sample_size = check_sizes(n_items, sample_size)
    replacement = check_bool(replacement, "replacement")
    rows = n_items if global_ranks is None else int(np.size(global_ranks))
    # the result and up to three temporaries of the same shape (float64)
    check_memory(4.0 * 8 * rows * sample_size, f"the {rows} x {sample_size} sampling kernel",
                 "n_items or sample_size" if global_ranks is None else "global_ranks or sample_size")
    if global_ranks is None:
        R = np.arange(1, n_items + 1, dtype=np.int64)
    else:
        R = check_ranks(global_ranks, "global_ranks", high=n_items)
    if replacement:
        return _log_binomial(R, n_items, sample_size)
    out = _log_hypergeometric(R, n_items, sample_size)
    # Renormalise each row in log space: removes the ~1e-12 rounding of the large gammaln terms,
    # so that rows sum to 1 to machine precision and no probability exceeds 1.
    out -= logsumexp(out, axis=1, keepdims=True)
    return out


def kernel(n_items: int, sample_size: int, replacement: bool = True, global_ranks=None) -> np.ndarray:
    r"""Sampling kernel matrix :math:`A_{R,r} = P(r \mid R)` (TORS Eq. 10 with unit prior;
    Krichene & Rendle Eq. 16). Rows sum to 1. See :func:`log_kernel` for the arguments."""
    return np.exp(log_kernel(n_items, sample_size, replacement, global_ranks))


def kernel_row(global_rank: int, n_items: int, sample_size: int, replacement: bool = True) -> np.ndarray:
    r"""The distribution :math:`P(r \mid R)` over :math:`r = 1..n` for a single global rank."""
    if np.ndim(global_rank) != 0:
        raise ValueError(f"global_rank must be a single rank, got shape {np.shape(global_rank)}")
    return kernel(n_items, sample_size, replacement, np.array([global_rank]))[0]


def kernel_cdf(n_items: int, sample_size: int, replacement: bool = True, global_ranks=None) -> np.ndarray:
    r""":math:`\Pr(r \le k \mid R)` for :math:`k = 1..n`, computed by cumulative log-sum-exp
    (Krichene & Rendle Eq. 18: the expected sampled Recall@k is this CDF)."""
    logk = log_kernel(n_items, sample_size, replacement, global_ranks)
    out = np.minimum(np.exp(np.logaddexp.accumulate(logk, axis=1)), 1.0)
    out[:, -1] = 1.0  # Pr(r <= n) = 1 exactly (round-off would leave 1 - 1e-14)
    return out


def log_normaliser_check(n_items: int, sample_size: int, replacement: bool = True) -> float:
    """Largest deviation of a kernel row's total from 1, in log space (used by the tests)."""
    lk = log_kernel(n_items, sample_size, replacement)
    return float(np.max(np.abs(logsumexp(lk, axis=1))))
