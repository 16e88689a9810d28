r"""What sampling does to a rank: tools for the Sampling Theorem chapter.

This module holds the pieces chapter 2 needs beyond the core kernel and sampling modules:

* synthetic **global rank distributions** :math:`\tilde P(R)` over :math:`R = 1..N` (a
  CDF-discretised Beta(a, b) model after Li et al. 2020, Sec. 3.2; a truncated geometric model;
  mixtures) and a coupled inverse-CDF sampler of users' global ranks;
* the **population form** of the expected sampled Recall curve,
  :math:`\mathbb E[T^S_{Recall@K}] = \sum_R \tilde P(R)\,\Pr(r \le K \mid R)` (TORS Eq. 14,
  right-hand side; Li et al. 2020, Eq. 4), computed from a rank distribution rather than from a
  list of users;
* **dominance** and **crossings** of two Recall curves (TORS Theorem 3.1; Li et al. 2020,
  Theorem 2.1);
* the **total variation distance** between the with- and without-replacement kernels and a
  coupling bound on it;
* the exact distribution of the sampled hit ratio as a **Poisson binomial** (TORS Eq. 13) and
  the exact probability of a deviation :math:`|T^S - \mathbb E T^S| \ge t`, to set beside
  Hoeffding's bound (TORS Sec. 3.3);
* a Monte Carlo simulator of sampled Recall curves (for checks of TORS Eq. 14-15).

Every kernel value comes from :mod:`itemsampling.kernel`, every metric value from
:mod:`itemsampling.metrics` and every sampled rank from :mod:`itemsampling.sampling`.
"""

from __future__ import annotations

import numbers

import numpy as np
from scipy import stats
from scipy.special import betainc

from ._validation import (as_float_array, as_rng, check_bool, check_int, check_probability_vector, check_ranks,
                          check_memory, check_real, check_sizes)
from .kernel import kernel, kernel_cdf
from .metrics import metric_curve
from .sampling import sample_ranks

__all__ = [
    "beta_rank_cdf",
    "beta_rank_distribution",
    "geometric_rank_distribution",
    "mixture_rank_distribution",
    "sample_global_ranks",
    "recall_curve",
    "expected_sampled_recall_curve",
    "dominates",
    "crossings",
    "kernel_tv_distance",
    "repeat_probability",
    "poisson_binomial_pmf",
    "deviation_probability",
    "deviation_radius",
    "hoeffding_radius",
    "simulate_sampled_recall_curves",
    "standard_errors_from",
]


def _check_positive(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    value = float(value)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number (> 0), got {value}")
    return value


def _check_pmf(rank_pmf, name: str = "rank_pmf") -> np.ndarray:
    p = check_probability_vector(rank_pmf, name)
    if p.size < 2:
        raise ValueError(f"{name} must cover N >= 2 ranks, got length {p.size}")
    return p


def _check_ks(ks, high: int) -> np.ndarray:
    if ks is None:
        return np.arange(1, high + 1, dtype=np.int64)
    ks = np.atleast_1d(np.asarray(ks))
    if ks.size == 0:
        raise ValueError("ks must not be empty")
    return np.array([check_int(k, "k", low=1, high=high) for k in ks], dtype=np.int64)


# --------------------------------------------------------------------------------------------
# Synthetic global rank distributions
# --------------------------------------------------------------------------------------------

def beta_rank_cdf(K, n_items: int, a: float, b: float = 1.0) -> np.ndarray:
    r"""CDF of the book's discretised Beta(a, b) global rank model at the cut-offs ``K``:

    .. math::
        \Pr(\mathcal R \le K) = I_{x_K}(a, b),\qquad x_K = \frac{K-1}{N-1},\quad K = 1..N,

    where :math:`I_x(a, b)` is the regularised incomplete Beta function (the Beta CDF). For
    ``b = 1`` it is :math:`\bigl(\frac{K-1}{N-1}\bigr)^a`. This is the model of Li et al. 2020
    (Sec. 3.2, Eq. 14) and TORS (Appendix B): the rank :math:`R` is placed at
    :math:`x = (R-1)/(N-1)` on :math:`[0, 1]` and :math:`x` follows Beta(a, 1), density
    :math:`a x^{a-1}`; the left side :math:`\mathcal L_k` of TORS Appendix B is this CDF at
    :math:`K = f(k)`. The papers use the density; the book discretises through the CDF so that
    the masses are exact, sum to 1 and stay finite when :math:`a < 1` (a "CDF-discretised
    Beta(a, 1), after Li et al."). Rank 1 has probability 0 under this model. It is the only
    implementation of the model in the package: :func:`beta_rank_distribution`,
    :func:`itemsampling.mapping.beta_rank_cdf` and :func:`itemsampling.mapping.sample_beta_ranks`
    all call it.
    """
    n_items = check_int(n_items, "n_items", low=2)
    a = _check_positive(a, "a")
    b = _check_positive(b, "b")
    K = check_ranks(K, "K", high=n_items).astype(np.float64)
    x = (K - 1.0) / (n_items - 1.0)
    if b == 1.0:
        return x ** a
    out = betainc(a, b, x)
    out[K == n_items] = 1.0
    return out


def beta_rank_distribution(n_items: int, a: float, b: float = 1.0) -> np.ndarray:
    r"""CDF-discretised Beta(a, b) global rank distribution over :math:`R = 1..N` (after Li et al.
    2020, Sec. 3.2):

    .. math::
        \tilde P(R) = I_{(R-1)/(N-1)}(a, b) - I_{(R-2)/(N-1)}(a, b),\qquad \tilde P(1) = 0,

    the increments of :func:`beta_rank_cdf`. The global Recall curve is then exactly
    :math:`T_{Recall@K} = I_{(K-1)/(N-1)}(a, b)`; for ``b = 1`` it is
    :math:`\bigl(\frac{K-1}{N-1}\bigr)^a`. Li et al. 2020 report fitted :math:`a` between 0.24 and
    0.41 on real data (their Table 2). A smaller ``a`` puts more users at the top: for ``b = 1``,
    :math:`a_1 < a_2` gives a Recall curve that dominates.

    Parameters
    ----------
    n_items : int
        Catalog size :math:`N \ge 2`.
    a, b : float
        Positive shape parameters.

    Returns
    -------
    ndarray of shape ``(N,)``: entry ``R - 1`` is :math:`\tilde P(R)`.
    """
    n_items = check_int(n_items, "n_items", low=2)
    check_memory(32.0 * n_items, f"a rank distribution over {n_items} items", "n_items")
    cdf = np.concatenate([[0.0], beta_rank_cdf(np.arange(1, n_items + 1), n_items, a, b)])
    cdf[-1] = 1.0
    return np.maximum(np.diff(cdf), 0.0)


def geometric_rank_distribution(n_items: int, q: float) -> np.ndarray:
    r"""Truncated geometric global rank distribution over :math:`R = 1..N`:

    .. math::
        \tilde P(R) = \frac{q (1-q)^{R-1}}{1 - (1-q)^N},\qquad 0 < q < 1,

    a recommender that puts a fraction :math:`\approx q` of users at rank 1 and whose Recall
    curve rises fast and saturates (used in the chapter's crossing example). Computed in log
    space (``log1p``/``expm1``), so large :math:`N` and small :math:`q` are exact.
    """
    n_items = check_int(n_items, "n_items", low=2)
    check_memory(32.0 * n_items, f"a rank distribution over {n_items} items", "n_items")
    q = _check_positive(q, "q")
    if q >= 1:
        raise ValueError(f"q must lie in (0, 1), got {q}")
    R = np.arange(n_items, dtype=np.float64)  # R - 1
    log1mq = np.log1p(-q)
    log_norm = np.log(-np.expm1(n_items * log1mq))
    return np.exp(np.log(q) + R * log1mq - log_norm)


def mixture_rank_distribution(rank_pmfs, weights) -> np.ndarray:
    r"""Mixture :math:`\tilde P(R) = \sum_j w_j \tilde P_j(R)` of rank distributions over the same
    catalog. ``rank_pmfs`` is a sequence (or 2-d array) of distributions of equal length;
    ``weights`` a probability vector of matching length."""
    pmfs = [_check_pmf(p, f"rank_pmfs[{j}]") for j, p in enumerate(rank_pmfs)]
    if not pmfs:
        raise ValueError("rank_pmfs must hold at least one distribution")
    sizes = {p.size for p in pmfs}
    if len(sizes) != 1:
        raise ValueError(f"rank_pmfs must all have the same length N, got lengths {sorted(sizes)}")
    w = check_probability_vector(weights, "weights", length=len(pmfs))
    out = np.tensordot(w, np.vstack(pmfs), axes=1)
    return out / out.sum()


def sample_global_ranks(rank_pmf, n_users: int, rng=None) -> np.ndarray:
    r"""Draw ``n_users`` global ranks from :math:`\tilde P(R)` by inversion of its CDF.

    One uniform number per user is mapped to the smallest :math:`R` with
    :math:`\Pr(\mathcal R \le R) > u`. Inversion gives a *coupling*: two distributions sampled
    with the same seed use the same uniforms, so if :math:`\tilde P_1` dominates
    :math:`\tilde P_2` (its CDF is everywhere at least as large) then every user's rank under
    :math:`\tilde P_1` is at most the rank under :math:`\tilde P_2`, and the *empirical* Recall
    curves dominate as well. Ranks of zero probability are never drawn.

    Returns an int64 array of ranks in ``1..N``.
    """
    p = _check_pmf(rank_pmf)
    n_users = check_int(n_users, "n_users", low=1)
    check_memory(24.0 * n_users, f"{n_users} global ranks", "n_users")
    gen = as_rng(rng)
    cdf = np.cumsum(p)
    cdf /= cdf[-1]
    u = gen.random(n_users)
    return np.searchsorted(cdf, u, side="right").astype(np.int64) + 1


def recall_curve(rank_pmf, ks=None) -> np.ndarray:
    r"""Global Recall curve of a rank distribution, :math:`T_{Recall@K} = \sum_{R \le K}
    \tilde P(R)`, the CDF of the rank (TORS Eq. 11 and 16; Li et al. 2020, Eq. 1 and 7).
    ``ks`` defaults to :math:`K = 1..N`."""
    p = _check_pmf(rank_pmf)
    ks = _check_ks(ks, p.size)
    return np.minimum(np.cumsum(p)[ks - 1], 1.0)


def expected_sampled_recall_curve(rank_pmf, n_items: int, sample_size: int, ks=None,
                                  replacement: bool = True, chunk_size: int = 2048) -> np.ndarray:
    r"""Expected sampled Recall curve of a global rank distribution (TORS Eq. 14, right-hand
    side; Li et al. 2020, Eq. 4):

    .. math::
        \mathbb E[T^S_{Recall@K}] = \sum_{R=1}^{N} \tilde P(R)\,\Pr(r \le K \mid R),\qquad
        K = 1..n,

    with :math:`\Pr(r \le K \mid R)` from :func:`itemsampling.kernel.kernel_cdf`. For the
    empirical distribution of a list of users this equals the mean returned by
    :func:`itemsampling.sampling.shr_moments`.

    Parameters
    ----------
    rank_pmf : array of shape ``(N,)``, or ``(n_models, N)`` for several distributions at once
        (the kernel is then built once for all of them).
    n_items, sample_size : int
        :math:`N` and :math:`n`.
    ks : array of int, optional
        Cut-offs in ``1..n``; default all.
    replacement : bool
        Binomial or hypergeometric kernel.
    chunk_size : int
        Kernel rows are built ``chunk_size`` ranks at a time (only ranks with positive mass), so
        memory stays bounded for large :math:`N` and :math:`n`.

    Returns
    -------
    ndarray of shape ``(len(ks),)``, or ``(n_models, len(ks))`` for a 2-d ``rank_pmf``.
    """
    n_items, sample_size = check_sizes(n_items, sample_size)
    arr = as_float_array(rank_pmf, "rank_pmf")
    single = arr.ndim == 1
    if arr.ndim not in (1, 2):
        raise ValueError(f"rank_pmf must be 1-d or 2-d, got shape {arr.shape}")
    P = np.atleast_2d(arr)
    P = np.vstack([_check_pmf(row, "rank_pmf" if single else f"rank_pmf[{i}]") for i, row in enumerate(P)])
    if P.shape[1] != n_items:
        raise ValueError(f"rank_pmf must have length n_items = {n_items}, got {P.shape[1]}")
    ks = _check_ks(ks, sample_size)
    chunk_size = check_int(chunk_size, "chunk_size", low=1)
    support = np.flatnonzero(np.any(P > 0, axis=0)) + 1
    out = np.zeros((P.shape[0], ks.size))
    for start in range(0, support.size, chunk_size):
        R = support[start:start + chunk_size]
        cdf = kernel_cdf(n_items, sample_size, replacement, R)[:, ks - 1]
        out += P[:, R - 1] @ cdf
    out = np.minimum(out, 1.0)
    return out[0] if single else out


# --------------------------------------------------------------------------------------------
# Dominance of curves
# --------------------------------------------------------------------------------------------

def _check_curves(curve_a, curve_b):
    a = np.asarray(curve_a, dtype=np.float64)
    b = np.asarray(curve_b, dtype=np.float64)
    if a.ndim != 1 or a.size == 0:
        raise ValueError("curve_a must be a non-empty 1-d array")
    if b.shape != a.shape:
        raise ValueError(f"curve_b must have the shape of curve_a {a.shape}, got {b.shape}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("curve_a and curve_b must not contain NaN or infinite values")
    return a, b


def _check_atol(atol) -> float:
    return check_real(atol, "atol", low=0.0)


_ROUNDOFF = 1e-12  # relative round-off below which two curve values count as equal in crossings()


def dominates(curve_a, curve_b, atol: float = 0.0) -> bool:
    r"""Whether ``curve_a`` dominates ``curve_b``: :math:`a_K \ge b_K - \text{atol}` at every
    cut-off :math:`K` (the hypothesis and the conclusion of the Sampling Theorem, TORS
    Theorem 3.1; Li et al. 2020, Theorem 2.1)."""
    a, b = _check_curves(curve_a, curve_b)
    return bool(np.all(a >= b - _check_atol(atol)))


def crossings(curve_a, curve_b, atol: float = 0.0) -> np.ndarray:
    r"""The 1-based positions :math:`K` at which :math:`a_K - b_K` changes sign.

    Differences with :math:`|a_K - b_K| \le \text{atol} + 10^{-12}\max(|a_K|, |b_K|)` count as
    ties and are skipped (the relative :math:`10^{-12}` absorbs round-off, e.g. at :math:`K = n`,
    where two expected sampled Recall curves both equal 1 up to the last bits); a position is
    reported when the sign of the difference there is opposite to the sign at the last non-tied
    position before it. An empty array means one curve dominates the other (up to ``atol``).
    """
    a, b = _check_curves(curve_a, curve_b)
    d = a - b
    atol = _check_atol(atol)
    tie = atol + _ROUNDOFF * np.maximum(np.abs(a), np.abs(b))
    idx = np.flatnonzero(np.abs(d) > tie)
    if idx.size < 2:
        return np.zeros(0, dtype=np.int64)
    s = np.sign(d[idx])
    change = np.flatnonzero(s[1:] != s[:-1]) + 1
    return idx[change].astype(np.int64) + 1


# --------------------------------------------------------------------------------------------
# With vs without replacement
# --------------------------------------------------------------------------------------------

#: the largest number of kernel entries (ranks x sample size) :func:`kernel_tv_distance` computes
TV_MAX_ENTRIES = 5e8


def kernel_tv_distance(n_items: int, sample_size: int, global_ranks=None) -> np.ndarray:
    r"""Total variation distance between the binomial (with replacement) and hypergeometric
    (without replacement) kernels, row by row:

    .. math::
        \mathrm{TV}(R) = \tfrac12 \sum_{r=1}^{n}
        \bigl| P_{\mathrm{bin}}(r \mid R) - P_{\mathrm{hyp}}(r \mid R) \bigr|

    (kernels of Li et al. 2020, Sec. 2.2; TORS Eq. 5). Because a sampled Recall@K, or any
    metric with values in [0, 1], is a function of :math:`r`, the two kernels' expectations of it
    differ by at most :math:`\mathrm{TV}(R)` for every user. ``global_ranks`` defaults to all
    :math:`R = 1..N` (an :math:`N \times n` computation; pass a grid for very large :math:`N`).
    More than :data:`TV_MAX_ENTRIES` kernel entries (ranks times :math:`n`) are refused with a
    ``ValueError`` naming the argument to reduce.
    """
    n_items, sample_size = check_sizes(n_items, sample_size)
    rows = n_items if global_ranks is None else int(np.size(global_ranks))
    if float(rows) * sample_size > TV_MAX_ENTRIES:
        raise ValueError(f"the TV distance over {rows} global ranks x sample_size = {sample_size} needs "
                         f"{float(rows) * sample_size:.3g} kernel entries (more than {TV_MAX_ENTRIES:.0e}, minutes "
                         "of work); reduce " + ("n_items or pass global_ranks (a grid of ranks)" if global_ranks is None
                                                else "global_ranks (a coarser grid)") + " or sample_size")
    if global_ranks is None:
        R = np.arange(1, n_items + 1, dtype=np.int64)
    else:
        R = check_ranks(global_ranks, "global_ranks", high=n_items)
    out = np.empty(R.size)
    step = max(1, 4_000_000 // sample_size)
    for start in range(0, R.size, step):
        rows = R[start:start + step]
        pb = kernel(n_items, sample_size, True, rows)
        ph = kernel(n_items, sample_size, False, rows)
        out[start:start + step] = 0.5 * np.abs(pb - ph).sum(axis=1)
    return out


def repeat_probability(n_items: int, sample_size: int) -> float:
    r"""Probability that :math:`m = n-1` decoys drawn *with* replacement from the :math:`N-1`
    non-target items contain a repeated item:

    .. math::
        \rho = 1 - \prod_{i=1}^{m-1}\Bigl(1 - \frac{i}{N-1}\Bigr) \;\le\; \frac{m(m-1)}{2(N-1)} .

    It bounds the kernels' total variation distance: conditioned on no repeat, decoys drawn with
    replacement are a uniform sample without replacement, so
    :math:`P_{\mathrm{bin}} = (1-\rho) P_{\mathrm{hyp}} + \rho Q` for some distribution
    :math:`Q`, hence :math:`\mathrm{TV}(R) \le \rho` for every :math:`R`. Computed in log space:
    the sum :math:`\sum_i \log(1 - i/(N-1))` term by term (in blocks) for up to
    :data:`REPEAT_EXACT_TERMS` terms; beyond, by the Euler-Maclaurin formula with its integral in
    closed form (the summand is smooth and its derivatives are :math:`O((N-m)^{-j})`), and as exactly
    1 once :math:`m(m-1)/(2(N-1))`, a lower bound of :math:`-\log(1-\rho)`, exceeds 745. Any size up
    to :math:`N = 10^{12}` and beyond costs constant memory.
    """
    n_items, sample_size = check_sizes(n_items, sample_size)
    m = sample_size - 1
    a = n_items - 1.0
    if m * (m - 1) / (2.0 * a) > 745.0:  # -log(1 - rho) >= sum i/a: 1 - rho underflows
        return 1.0
    if m - 1 <= REPEAT_EXACT_TERMS:
        total = 0.0
        for lo in range(1, m, 1 << 20):
            i = np.arange(lo, min(m, lo + (1 << 20)), dtype=np.float64)
            total += float(np.sum(np.log1p(-i / a)))
        return float(-np.expm1(total))
    return float(-np.expm1(_log1p_sum_euler_maclaurin(m - 1, a)))


#: :func:`repeat_probability` sums up to this many terms one by one, and uses Euler-Maclaurin beyond
REPEAT_EXACT_TERMS = 10**7


def _log1p_sum_euler_maclaurin(b: int, a: float) -> float:
    r""":math:`\sum_{i=1}^{b}\log(1 - i/a)` for :math:`b < a` by Euler-Maclaurin: the integral
    :math:`\int_1^b \log(1-x/a)\,dx = a\,[g(b/a) - g(1/a)]` with
    :math:`g(u) = -(1-u)\log(1-u) - u = -\sum_{j\ge2} u^j/(j(j-1))` (the series for small
    :math:`u`, where the closed form would cancel), plus the end corrections
    :math:`(f(1)+f(b))/2 + (f^{(1)}(b)-f^{(1)}(1))/12 - (f^{(3)}(b)-f^{(3)}(1))/720` with
    :math:`f^{(1)}(x) = -1/(a-x)` and :math:`f^{(3)}(x) = -2/(a-x)^3`."""
    def g(u: float) -> float:
        if u < 1e-2:
            return -sum(u ** j / (j * (j - 1)) for j in range(2, 14))
        return float(-(1.0 - u) * np.log1p(-u) - u)

    def f(x: float) -> float:
        return float(np.log1p(-x / a))

    def d1(x: float) -> float:
        return -1.0 / (a - x)

    def d3(x: float) -> float:
        return -2.0 / (a - x) ** 3

    return (a * (g(b / a) - g(1.0 / a)) + 0.5 * (f(1.0) + f(float(b)))
            + (d1(float(b)) - d1(1.0)) / 12.0 - (d3(float(b)) - d3(1.0)) / 720.0)


# --------------------------------------------------------------------------------------------
# The sampled hit ratio as a Poisson binomial
# --------------------------------------------------------------------------------------------

def _check_probs(probs) -> np.ndarray:
    p = as_float_array(probs, "probs")
    if p.ndim == 0:
        p = p.reshape(1)
    if p.ndim != 1 or p.size == 0:
        raise ValueError("probs must be a non-empty 1-d array of probabilities")
    if not np.all(np.isfinite(p)):
        raise ValueError("probs must not contain NaN or infinite values")
    if np.any(p < 0) or np.any(p > 1):
        raise ValueError(f"probs must lie in [0, 1], got values in [{p.min()}, {p.max()}]")
    return p


def _trim(offset: int, arr: np.ndarray):
    nz = np.flatnonzero(arr)
    if nz.size == 0:  # cannot happen for a pmf, kept for safety
        return offset, arr[:1]
    return offset + int(nz[0]), arr[nz[0]:nz[-1] + 1]


def poisson_binomial_pmf(probs) -> np.ndarray:
    r"""Exact distribution of :math:`S = \sum_u Z_u`, :math:`Z_u \sim \mathrm{Bernoulli}(p_u)`
    independent (the Poisson binomial of TORS Eq. 13 and Li et al. 2020, Eq. 3; then
    :math:`T^S_{Recall@K} = S/M`).

    Users with equal :math:`p_u` (in the sampled hit ratio: users with equal global rank) form a
    binomial block; the blocks' pmfs are convolved pairwise in a balanced tree by direct
    convolution (``numpy.convolve``). Every entry is a sum of non-negative products, so each
    probability keeps full *relative* precision, deep tails included (an FFT convolution would
    leave an absolute noise floor near 1e-15, hiding the tail probabilities this chapter needs).
    Each partial pmf is stored only over its non-zero range (entries below the smallest double
    are exactly 0 and stay 0), so the cost follows the spread of :math:`S` rather than :math:`M`.

    Returns an array of length :math:`M + 1`: entry ``s`` is :math:`\Pr(S = s)`.
    """
    p = _check_probs(probs)
    M = p.size
    uniq, counts = np.unique(p, return_counts=True)
    # all binomial blocks in one vectorised call
    j = np.arange(counts.sum() + counts.size) - np.repeat(np.cumsum(counts + 1) - (counts + 1), counts + 1)
    flat = stats.binom.pmf(j, np.repeat(counts, counts + 1), np.repeat(uniq, counts + 1))
    pieces = [_trim(0, block) for block in np.split(flat, np.cumsum(counts + 1)[:-1])]
    while len(pieces) > 1:
        nxt = [_trim(pieces[i][0] + pieces[i + 1][0], np.convolve(pieces[i][1], pieces[i + 1][1]))
               for i in range(0, len(pieces) - 1, 2)]
        if len(pieces) % 2:
            nxt.append(pieces[-1])
        pieces = nxt
    offset, arr = pieces[0]
    pmf = np.zeros(M + 1)
    pmf[offset:offset + arr.size] = arr
    return pmf / pmf.sum()


def deviation_probability(probs, t: float, method: str = "exact", pmf=None) -> float:
    r"""Probability that the mean of independent Bernoulli(:math:`p_u`) variables deviates from
    its expectation by at least ``t``:
    :math:`\Pr\bigl(|T^S - \mathbb E T^S| \ge t\bigr)` with :math:`T^S = \frac1M\sum_u Z_u`.

    This is the quantity Hoeffding's bound :math:`2\exp(-2Mt^2)` controls (TORS Sec. 3.3; Li et
    al. 2020, Sec. 2.4; :func:`itemsampling.sampling.hoeffding_bound`).

    method : ``"exact"`` sums the Poisson binomial pmf (:func:`poisson_binomial_pmf`) over
        :math:`|s/M - \mu| \ge t`; ``"normal"`` is the central-limit approximation
        :math:`2\,\bar\Phi\bigl(t/\sigma\bigr)` with the exact variance
        :math:`\sigma^2 = \frac1{M^2}\sum_u p_u(1-p_u)` (TORS Eq. 15).
    pmf : optional, ``poisson_binomial_pmf(probs)`` computed beforehand, to share the work
        between several calls.
    """
    p = _check_probs(probs)
    t = check_real(t, "t", low=0.0, low_open=True)
    if method not in ("exact", "normal"):
        raise ValueError(f"method must be 'exact' or 'normal', got {method!r}")
    M = p.size
    mu = p.sum()
    if method == "normal":
        sd = np.sqrt(np.sum(p * (1 - p))) / M
        if sd == 0:
            return 0.0
        return float(min(1.0, 2.0 * stats.norm.sf(t / sd)))
    pmf = _pmf_for(p, pmf)
    s = np.arange(M + 1, dtype=np.float64)
    tol = 1e-9 * max(1.0, M * t)
    far = np.abs(s - mu) >= M * t - tol
    return float(min(1.0, pmf[far].sum()))


def _pmf_for(p: np.ndarray, pmf) -> np.ndarray:
    if pmf is None:
        return poisson_binomial_pmf(p)
    arr = as_float_array(pmf, "pmf")
    if arr.shape != (p.size + 1,):
        raise ValueError(f"pmf must be the Poisson binomial pmf of probs: {p.size + 1} finite "
                         f"non-negative values summing to 1, got shape {arr.shape}")
    # finite, non-negative and summing to 1 (a vector that is not a distribution gives a plausible
    # but meaningless tail probability)
    return check_probability_vector(arr, "pmf")


def deviation_radius(probs, delta: float, pmf=None) -> float:
    r"""The smallest deviation :math:`t` (among the values :math:`|s/M - \mu|` the mean can take)
    with :math:`\Pr(|T^S - \mathbb E T^S| \ge t) \le \delta`, from the exact Poisson binomial
    distribution (:func:`poisson_binomial_pmf`; pass it as ``pmf`` to reuse it). Compare with
    :func:`hoeffding_radius`, the :math:`t` at which Hoeffding's bound equals :math:`\delta`."""
    p = _check_probs(probs)
    delta = check_real(delta, "delta", low=0.0, high=1.0, low_open=True, high_open=True)
    M = p.size
    pmf = _pmf_for(p, pmf)
    dev = np.abs(np.arange(M + 1) - p.sum()) / M
    order = np.argsort(-dev, kind="stable")
    dev_sorted = dev[order]
    tail = np.cumsum(pmf[order])
    # the tail at t = dev_sorted[j] includes every value with the same deviation
    last_of_tie = np.r_[dev_sorted[1:] != dev_sorted[:-1], True]
    ok = np.flatnonzero((tail <= delta) & last_of_tie)
    if ok.size == 0:
        return float(dev_sorted[0])
    return float(dev_sorted[ok[-1]])


def hoeffding_radius(n_users: int, delta: float) -> float:
    r"""The deviation :math:`t = \sqrt{\ln(2/\delta) / (2M)}` at which Hoeffding's bound
    :math:`2\exp(-2Mt^2)` (TORS Sec. 3.3; :func:`itemsampling.sampling.hoeffding_bound`)
    equals :math:`\delta`: with probability at least :math:`1-\delta` the sampled hit ratio of
    :math:`M` users lies within :math:`t` of its expectation, whatever the users' ranks."""
    n_users = check_int(n_users, "n_users", low=1)
    delta = check_real(delta, "delta", low=0.0, high=1.0, low_open=True, high_open=True)
    return float(np.sqrt(np.log(2.0 / delta) / (2.0 * n_users)))


# --------------------------------------------------------------------------------------------
# Monte Carlo
# --------------------------------------------------------------------------------------------

def simulate_sampled_recall_curves(global_ranks, n_items: int, sample_size: int, n_repeats: int,
                                   ks=None, rng=None, replacement: bool = True,
                                   progress: bool = False) -> np.ndarray:
    r"""Monte Carlo sampled Recall curves: ``n_repeats`` independent sampled evaluations of the
    same users, each drawing fresh decoys (:func:`itemsampling.sampling.sample_ranks`) and
    computing :math:`T^S_{Recall@K}` (:func:`itemsampling.metrics.metric_curve` on the sampled
    ranks, :math:`K \in` ``ks``).

    Returns an array of shape ``(n_repeats, len(ks))``; its column means and variances estimate
    TORS Eq. 14 and 15. ``progress=True`` shows a tqdm bar.
    """
    n_items, sample_size = check_sizes(n_items, sample_size)
    R = check_ranks(global_ranks, "global_ranks", high=n_items)
    n_repeats = check_int(n_repeats, "n_repeats", low=1)
    ks = _check_ks(ks, sample_size)
    progress = check_bool(progress, "progress")
    check_memory(8.0 * n_repeats * (len(ks) + 2 * R.size), f"{n_repeats} repeats of sampled Recall curves",
                 "n_repeats")
    gen = as_rng(rng)
    out = np.empty((n_repeats, ks.size))
    it = range(n_repeats)
    if progress:
        # the text bar writes to stderr: the terminal of a rerun shows it, the book drops a cell's
        # stderr (tqdm.auto would display a widget whose text form stays on the page, frozen at 0 %)
        from tqdm import tqdm

        it = tqdm(it, desc="sampled evaluations", leave=False)
    for i in it:
        r = sample_ranks(R, n_items, sample_size, gen, replacement)
        out[i] = metric_curve(r, "recall", ks, n_items=sample_size)
    return out


def standard_errors_from(samples, exact_mean, exact_var) -> np.ndarray:
    r"""Distance of Monte Carlo means from exact means in standard errors:
    :math:`z_K = (\bar x_K - \mu_K) / \sqrt{\sigma^2_K / B}` for ``samples`` of shape
    ``(B, len(mu))``. Columns with zero exact variance give 0 when the Monte Carlo mean equals
    the exact mean and raise otherwise (a deterministic quantity cannot deviate)."""
    x = np.asarray(samples, dtype=np.float64)
    mu = np.atleast_1d(np.asarray(exact_mean, dtype=np.float64))
    var = np.atleast_1d(np.asarray(exact_var, dtype=np.float64))
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] != mu.size or var.shape != mu.shape:
        raise ValueError(f"samples must have shape (n_repeats, {mu.size}) matching exact_mean and "
                         f"exact_var, got {x.shape}, {mu.shape}, {var.shape}")
    if np.any(var < 0) or not np.all(np.isfinite(var)) or not np.all(np.isfinite(x)):
        raise ValueError("exact_var must be finite and >= 0, and samples finite")
    diff = x.mean(axis=0) - mu
    se = np.sqrt(var / x.shape[0])
    zero = se == 0
    if np.any(np.abs(diff[zero]) > 1e-12):
        raise ValueError("a column with zero exact variance has a Monte Carlo mean off its exact mean")
    z = np.zeros_like(diff)
    z[~zero] = diff[~zero] / se[~zero]
    return z
