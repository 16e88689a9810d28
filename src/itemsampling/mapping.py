r"""Mapping functions: aligning the sampled hit ratio with the global one.

Li et al. (2020) and TORS (Li et al. 2024, Sec. 3) observe that the sampled top-:math:`k` hit
ratio (Recall) :math:`SHR@k = T^S_{Recall@k}` approximates the *global* hit ratio at a different
cut-off, :math:`SHR@k \approx HR@f(k)`, for a mapping :math:`f: \{1..n\} \to [1, N]` with
:math:`f(1) < f(2) < \dots < f(n)`. The sampled curve "samples" the global curve at the
locations :math:`f(k)`. This module computes the mappings of the papers:

* ``linear`` -- the baseline, TORS Eq. 18 / Li et al. 2020 Eq. 9;
* ``bound``  -- the Hoeffding boundary map, TORS Eq. 22 / Li et al. 2020 Eq. 13 (floored);
* ``beta``   -- the Beta(:math:`a`, 1) map, Li et al. 2020 Eq. 15-17 / TORS Eq. 53 and 55, with
  the *sum* form of the recurrence (TORS Eq. 24 and 54 misprint it as a product,
  :func:`beta_mapping_printed_product`);

the algorithm-specific parameter :math:`a` fitted from sampled ranks (``Beta@P``, Li et al. 2020
Eq. 19; :func:`fit_beta`), the oracle :math:`f(k)` that needs the global ranks
(:func:`oracle_mapping`), and the evaluation tools of Li et al. 2020 Sec. 5 and TORS Sec. 8.2
(:func:`hit_ratio_at`, :func:`alignment_errors`, :func:`winner_agreement`).

Notation (book convention): :math:`N` = ``n_items``, :math:`n` = ``sample_size`` (sampled set
*including* the target), :math:`k` = sampled cut-off in :math:`1..n`, :math:`R` global rank,
:math:`r` sampled rank.
"""

from __future__ import annotations

import numbers

import numpy as np
from scipy.special import betaln, gammaln

from ._validation import as_float_array, as_rng, check_int, check_memory, check_ranks, check_real, check_sizes
from .metrics import metric_curve
from .sampling import sample_ranks, shr_moments
from . import theory as _theory

__all__ = [
    "MAPPING_KINDS",
    "mapping",
    "linear_mapping",
    "bound_mapping",
    "beta_mapping",
    "beta_mapping_closed_form",
    "beta_mapping_printed_product",
    "uniform_mapping",
    "beta_log_increments",
    "beta_rank_cdf",
    "sample_beta_ranks",
    "fit_beta",
    "oracle_mapping",
    "hit_ratio_at",
    "round_position",
    "alignment_errors",
    "winner_agreement",
]

MAPPING_KINDS = ("linear", "bound", "beta")


# ----------------------------------------------------------------------------- validation
def _check_a(a) -> float:
    if a is None or isinstance(a, bool) or not isinstance(a, (numbers.Real, np.floating, np.integer)):
        raise ValueError(f"a must be a positive finite number (a > 0), got {a!r}")
    a = float(a)
    if not np.isfinite(a) or a <= 0:
        raise ValueError(f"a must be a positive finite number (a > 0), got {a}")
    return a


def _check_ks(k, sample_size: int) -> np.ndarray:
    """Cut-offs ``k`` as an int64 array (scalar -> shape (1,)), each in ``1..sample_size``."""
    arr = np.asarray(k)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"k must be an integer or a non-empty 1-d array of integers in 1..{sample_size}")
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise ValueError(f"k must hold integers in 1..{sample_size}, got dtype {arr.dtype}")
    if arr.dtype.kind == "f" and not (np.all(np.isfinite(arr)) and np.all(arr == np.floor(arr))):
        raise ValueError(f"k must hold integers in 1..{sample_size}")
    arr = arr.astype(np.int64)
    if arr.min() < 1 or arr.max() > sample_size:
        bad = arr.min() if arr.min() < 1 else arr.max()
        raise ValueError(f"k must lie in 1..{sample_size} (the sample size n), got {bad}")
    return arr


# ----------------------------------------------------------------------------- the maps
def linear_mapping(k, n_items: int, sample_size: int) -> np.ndarray:
    r"""Baseline ("linear") map, TORS Eq. 18 / Li et al. 2020 Eq. 9:

    .. math:: f(k) = \frac{k-1}{n-1}(N-1) + 1 .

    It replaces :math:`\Pr(r_u \le k)` by the indicator :math:`\delta(\mathbb E[r_u] \le k)`, with
    :math:`\mathbb E[r_u] = 1 + (n-1)\frac{R_u-1}{N-1}` under sampling with replacement, and solves
    for :math:`R_u`. Real-valued; :math:`f(1) = 1` and :math:`f(n) = N`.
    """
    n_items, sample_size = check_sizes(n_items, sample_size)
    ks = _check_ks(k, sample_size).astype(np.float64)
    return (ks - 1.0) / (sample_size - 1.0) * (n_items - 1.0) + 1.0


def bound_mapping(k, n_items: int, sample_size: int) -> np.ndarray:
    r"""Boundary-condition ("bound") map, TORS Eq. 22 / Li et al. 2020 Eq. 13, floored as printed:

    .. math:: f(k) = \Bigl\lfloor \bigl(k - \tfrac12\bigr)\frac{N-1}{n-1} + \tfrac12 \Bigr\rfloor ,

    the midpoint of the Hoeffding lower and upper limits
    :math:`f^{l}(k) = (k-t)\frac{N-1}{n-1} + 1` and :math:`f^{u}(k) = (k+t-1)\frac{N-1}{n-1}`
    (TORS Eq. 21; the :math:`t` cancels). Returned as float values that are whole numbers. As
    printed it is not clipped: :math:`f(n)` may exceed :math:`N` by about
    :math:`\frac{N-1}{2(n-1)}` (:func:`hit_ratio_at` clips positions to :math:`1..N`).
    """
    n_items, sample_size = check_sizes(n_items, sample_size)
    ks = _check_ks(k, sample_size).astype(np.float64)
    return np.floor((ks - 0.5) * (n_items - 1.0) / (sample_size - 1.0) + 0.5)


def beta_log_increments(n_items: int, sample_size: int, a: float) -> np.ndarray:
    r"""Logs of the increments of the Beta recurrence, :math:`j = 0..n-1`
    (Li et al. 2020 Eq. 15 / TORS Eq. 53, with :math:`j = 0` giving Eq. 17 / TORS Eq. 55):

    .. math:: \log\Bigl[a (N-1)^a \binom{n-1}{j} \mathcal B(a+j, n-j)\Bigr] ,

    so that :math:`[f(k;a)-1]^a = \sum_{j=0}^{k-1} a (N-1)^a \binom{n-1}{j}\mathcal B(a+j, n-j)`.
    Computed with ``gammaln`` and ``betaln``.
    """
    n_items, sample_size = check_sizes(n_items, sample_size)
    a = _check_a(a)
    check_memory(5 * 8.0 * sample_size, f"the {sample_size} increments of the Beta recurrence", "sample_size")
    j = np.arange(sample_size, dtype=np.float64)
    log_comb = gammaln(sample_size) - gammaln(j + 1.0) - gammaln(sample_size - j)
    return np.log(a) + a * np.log(n_items - 1.0) + log_comb + betaln(a + j, sample_size - j)


def _beta_log_g(n_items: int, sample_size: int, a: float) -> np.ndarray:
    r""":math:`\log(f(k;a) - 1)` for :math:`k = 1..n` by the recurrence, in log space."""
    inc = beta_log_increments(n_items, sample_size, a)
    return np.logaddexp.accumulate(inc) / a


def _log_gamma_ratio(z, a: float) -> np.ndarray:
    r""":math:`\ln\Gamma(z+a) - \ln\Gamma(z)` for :math:`z \ge 1`, accurate at any size: the
    difference of ``gammaln`` values for small :math:`z`, and for large :math:`z` (where the two
    ``gammaln`` values, about :math:`z\ln z`, would cancel to a few digits at :math:`z = 10^{12}`) the
    asymptotic series :math:`a\ln z + \sum_{j\ge1}(-1)^{j+1}\frac{B_{j+1}(a)-B_{j+1}(0)}{j(j+1)z^j}`
    (Bernoulli polynomials), of which the terms :math:`j \le 3` are kept."""
    z = np.asarray(z, dtype=np.float64)
    big = z >= 1e3 * max(1.0, a * a)
    out = np.empty_like(z)
    zs = z[~big]
    out[~big] = gammaln(zs + a) - gammaln(zs)
    zb = z[big]
    out[big] = (a * np.log(zb) + a * (a - 1) / (2 * zb) - a * (a - 1) * (2 * a - 1) / (12 * zb * zb)
                + a * a * (a - 1) ** 2 / (12 * zb ** 3))
    return out


#: above this sample size :func:`beta_mapping` evaluates the recurrence's telescoped closed form at the
#: requested ``k`` only (the recurrence itself would need memory and time linear in ``n``)
BETA_RECURRENCE_MAX = 1 << 22


def beta_mapping(k, n_items: int, sample_size: int, a: float) -> np.ndarray:
    r"""Beta(:math:`a`, 1) map :math:`f(k; a)` (Li et al. 2020 Eq. 16-17; TORS Eq. 53 and 55).

    Model the global rank distribution by a discretised Beta(:math:`a`, 1) density,
    :math:`\tilde P(R) = a\,x^{a-1}/(N-1)` with :math:`x = (R-1)/(N-1)`, and ask that the expected
    sampled hit ratio equal the global one, :math:`HR@f(k) = \mathbb E[SHR@k]` (TORS Eq. 23).
    Under this model :math:`HR@f \approx [(f-1)/(N-1)]^a` and, sampling with replacement,
    :math:`\mathbb E[SHR@k+1] - \mathbb E[SHR@k] \approx a\binom{n-1}{k}\mathcal B(a+k, n-k)`.
    Matching the increments gives the recurrence with a **sum** (TORS Eq. 24 and 54 print a
    product; :func:`beta_mapping_printed_product`)

    .. math::
        \begin{aligned}
        f(k+1;a) &= \Bigl[a(N-1)^a\tbinom{n-1}{k}\mathcal B(a+k,n-k) + (f(k;a)-1)^a\Bigr]^{1/a} + 1,\\
        f(1;a) &= (N-1)\,[a\,\mathcal B(a,n)]^{1/a} + 1 .
        \end{aligned}

    Unrolled, :math:`(f(k;a)-1)^a` is the cumulative sum of :func:`beta_log_increments`; it is
    evaluated with a cumulative log-sum-exp, so nothing underflows for small :math:`a` or large
    :math:`n`. Properties (checked in the tests): :math:`f(n;a) = N` (Lemma C.1),
    :math:`f(k;1) = k(N-1)/n + 1` (TORS Eq. 56, :func:`uniform_mapping`), increasing in
    :math:`k`, and increasing in :math:`a` (numerically; Li et al. 2020 Remedy #3 states it, and
    also the opposite inequality). See also :func:`beta_mapping_closed_form`.

    For :math:`n >` :data:`BETA_RECURRENCE_MAX` (about 4 million) the recurrence is not unrolled:
    its telescoped closed form (:func:`beta_mapping_closed_form`, equal to it to rounding, checked in
    the tests) is evaluated at the requested ``k`` only, so any :math:`N, n` up to :math:`10^{12}`
    and beyond costs memory and time in ``len(k)`` alone.
    """
    n_items, sample_size = check_sizes(n_items, sample_size)
    a = _check_a(a)
    ks = _check_ks(k, sample_size)
    if sample_size > BETA_RECURRENCE_MAX:
        return beta_mapping_closed_form(ks, n_items, sample_size, a)
    return np.exp(_beta_log_g(n_items, sample_size, a)[ks - 1]) + 1.0


def beta_mapping_closed_form(k, n_items: int, sample_size: int, a: float) -> np.ndarray:
    r"""Closed form of the Beta map (our derivation; an independent check of :func:`beta_mapping`).

    Since :math:`\binom{n-1}{j}\mathcal B(a+j, n-j) = \frac{\Gamma(n)}{\Gamma(n+a)}
    \frac{\Gamma(a+j)}{\Gamma(j+1)}` and :math:`\sum_{j=0}^{k-1}\frac{\Gamma(a+j)}{\Gamma(j+1)} =
    \frac{\Gamma(a+k)}{a\,\Gamma(k)}` (induction on :math:`k`), the recurrence telescopes to

    .. math:: f(k;a) = (N-1)\Bigl[\frac{\Gamma(n)\,\Gamma(k+a)}{\Gamma(n+a)\,\Gamma(k)}\Bigr]^{1/a} + 1 .

    With :math:`a = 1` this is TORS Eq. 56, :math:`k(N-1)/n + 1`; with :math:`k = n` it is
    :math:`N` (Lemma C.1). The two ratios of Gamma functions are evaluated by an asymptotic
    series for large arguments (``_log_gamma_ratio``), accurate for :math:`n` and :math:`k` up to
    :math:`10^{12}` and beyond; the result is clipped to :math:`N` (rounding only).
    """
    n_items, sample_size = check_sizes(n_items, sample_size)
    a = _check_a(a)
    ks = _check_ks(k, sample_size).astype(np.float64)
    log_ratio = _log_gamma_ratio(ks, a) - _log_gamma_ratio(np.array([float(sample_size)]), a)
    return np.minimum((n_items - 1.0) * np.exp(log_ratio / a) + 1.0, float(n_items))


def uniform_mapping(k, n_items: int, sample_size: int) -> np.ndarray:
    r"""The uniform map, the Beta map at :math:`a = 1` (TORS Eq. 56; Li et al. 2020 Sec. 3.2):

    .. math:: f(k; 1) = k\,\frac{N-1}{n} + 1 .

    Real-valued; :math:`f(n;1) = N`. Equal to :func:`beta_mapping` and
    :func:`beta_mapping_closed_form` with ``a = 1`` (checked in the tests)."""
    n_items, sample_size = check_sizes(n_items, sample_size)
    ks = _check_ks(k, sample_size).astype(np.float64)
    return ks * (n_items - 1.0) / sample_size + 1.0


def beta_mapping_printed_product(k, n_items: int, sample_size: int, a: float) -> np.ndarray:
    r"""The Beta recurrence **as misprinted** in TORS Eq. 24 and Eq. 54, with a product:

    .. math::
        \begin{aligned}
        f(k+1;a) &= \Bigl[a(N-1)^a\tbinom{n-1}{k}\mathcal B(a+k,n-k)\,(f(k;a)-1)^a\Bigr]^{1/a} + 1,\\
        f(1;a) &= (N-1)\,[a\,\mathcal B(a,n)]^{1/a} + 1 .
        \end{aligned}

    Provided only to show the misprint: the derivation (TORS Eq. 53) and Li et al. 2020 Eq. 16
    add the increment (:func:`beta_mapping`), and only the sum satisfies :math:`f(n;a) = N`
    (TORS Lemma C.1). Computed in log space from :func:`beta_log_increments`:
    :math:`\ln g_{k+1} = (\ln \mathrm{inc}_k + a \ln g_k)/a` with :math:`g = f - 1`.
    """
    n_items, sample_size = check_sizes(n_items, sample_size)
    a = _check_a(a)
    ks = _check_ks(k, sample_size)
    if sample_size > BETA_RECURRENCE_MAX:
        raise ValueError(f"sample_size must be <= {BETA_RECURRENCE_MAX} for the misprinted recurrence (evaluated "
                         f"term by term, with no closed form), got {sample_size}")
    inc = beta_log_increments(n_items, sample_size, a)
    log_g = np.empty(sample_size)
    log_g[0] = inc[0] / a
    for j in range(1, sample_size):
        log_g[j] = (inc[j] + a * log_g[j - 1]) / a
    return np.exp(log_g[ks - 1]) + 1.0


def mapping(kind: str, k, n_items: int, sample_size: int, a: float | None = None) -> np.ndarray:
    r"""Real-valued :math:`f(k)` for the mapping ``kind``.

    Parameters
    ----------
    kind : {"linear", "bound", "beta"}
        ``linear``: TORS Eq. 18 (:func:`linear_mapping`); ``bound``: TORS Eq. 22, floored as
        printed (:func:`bound_mapping`); ``beta``: the Beta(:math:`a`, 1) map of Li et al. 2020
        Eq. 16-17 (:func:`beta_mapping`), which needs ``a``.
    k : int or array of int in ``1..sample_size``.
    n_items, sample_size : :math:`N` and :math:`n` with :math:`2 \le n \le N`.
    a : float > 0, required for ``beta`` and refused otherwise.

    Returns
    -------
    float64 array of the same length as ``k`` (length 1 for a scalar ``k``).
    """
    if not isinstance(kind, str) or kind.lower() not in MAPPING_KINDS:
        raise ValueError(f"kind must be one of {MAPPING_KINDS}, got {kind!r}")
    kind = kind.lower()
    if kind == "beta":
        if a is None:
            raise ValueError("a is required for kind='beta' (a > 0)")
        return beta_mapping(k, n_items, sample_size, a)
    if a is not None:
        raise ValueError(f"a is only used by kind='beta', got a={a!r} for kind={kind!r}")
    if kind == "linear":
        return linear_mapping(k, n_items, sample_size)
    return bound_mapping(k, n_items, sample_size)


# ----------------------------------------------------------------------------- Beta rank model
def beta_rank_cdf(K, n_items: int, a: float) -> np.ndarray:
    r"""CDF of the CDF-discretised Beta(:math:`a`, 1) rank model, :math:`\Pr(R \le K) =
    \bigl(\frac{K-1}{N-1}\bigr)^a` for :math:`K = 1..N` -- the left side :math:`\mathcal L_k`
    of TORS Appendix B (after Li et al. 2020 Sec. 3.2, Eq. 14) with :math:`f(k) = K`. Delegates
    to :func:`itemsampling.theory.beta_rank_cdf`, the package's one implementation of the model."""
    return _theory.beta_rank_cdf(K, n_items, _check_a(a), 1.0)


def sample_beta_ranks(a: float, n_items: int, size: int, rng=None) -> np.ndarray:
    r"""Draw global ranks from the CDF-discretised Beta(:math:`a`, 1) model (after Li et al. 2020
    Sec. 3.2), :math:`\Pr(R \le K) = \bigl(\frac{K-1}{N-1}\bigr)^a` (:func:`beta_rank_cdf`), by
    inversion of that CDF (:func:`itemsampling.theory.sample_global_ranks` on
    :func:`itemsampling.theory.beta_rank_distribution`). Returns ``size`` int64 ranks in
    ``2..N`` (``R = 1`` has probability 0 under the model)."""
    a = _check_a(a)
    n_items = check_int(n_items, "n_items", low=2)
    size = check_int(size, "size", low=1)
    check_memory(16.0 * n_items + 24.0 * size, f"{size} Beta ranks over {n_items} items", "size or n_items")
    return _theory.sample_global_ranks(_theory.beta_rank_distribution(n_items, a), size, rng)


def fit_beta(sampled_ranks, n_items: int, sample_size: int, a0: float = 0.5, tol: float = 1e-10,
             max_iter: int = 1000) -> float:
    r"""Algorithm-specific Beta parameter (``Beta@P``), Li et al. 2020 Eq. 19.

    Treat :math:`f(r_u; a)` as the global rank of user :math:`u` and maximise the Beta(:math:`a`, 1)
    likelihood :math:`\prod_u a\,x_u^{a-1}` with :math:`x_u = (f(r_u;a)-1)/(N-1)`; the stationary
    point gives the fixed-point iteration

    .. math:: a^{(i+1)} = \frac{-M}{\sum_{u=1}^M \ln\frac{f(r_u; a^{(i)}) - 1}{N-1}} ,

    started at ``a0`` (the paper suggests 0.5 or 1) and run until the relative change is below
    ``tol``. The log is taken in log space, :math:`\ln\frac{f(r;a)-1}{N-1} = \ln g(r) - \ln(N-1)`
    with :math:`\ln g` from the recurrence, so :math:`f(r_u;a) = 1` never produces
    :math:`\log 0` (:math:`f(1;a) > 1` for every :math:`a > 0`). When every
    :math:`r_u = n` the sum is 0 and :math:`a` is unbounded: refused with a ``ValueError``.
    ``RuntimeError`` if the iteration has not converged after ``max_iter`` steps.

    The estimate is biased upwards when :math:`a` is small and :math:`n` is small: all users with
    sampled rank :math:`r` are put at the top end :math:`f(r)` of their interval.
    """
    n_items, sample_size = check_sizes(n_items, sample_size)
    r = check_ranks(sampled_ranks, "sampled_ranks", high=sample_size)
    a = _check_a(a0)
    tol = check_real(tol, "tol", low=0.0, low_open=True)
    max_iter = check_int(max_iter, "max_iter", low=1)
    check_memory(5 * 8.0 * sample_size, f"the Beta fit over {sample_size} sampled ranks", "sample_size")
    counts = np.bincount(r, minlength=sample_size + 1)[1:]
    if counts[:-1].sum() == 0:
        raise ValueError(f"sampled_ranks are all equal to sample_size={sample_size}; the Beta "
                         "parameter a is unbounded (Li et al. 2020 Eq. 19 divides by 0)")
    M = r.size
    log_nm1 = np.log(n_items - 1.0)
    for _ in range(max_iter):
        log_x = _beta_log_g(n_items, sample_size, a) - log_nm1  # ln((f(k;a)-1)/(N-1)), k=1..n
        log_x = np.minimum(log_x, 0.0)  # f(n;a) = N up to rounding: ln 1 = 0
        s = float(np.dot(counts, log_x))
        new = -M / s
        if abs(new - a) <= tol * a:
            return float(new)
        a = new
    raise RuntimeError(f"fit_beta did not converge in {max_iter} iterations (last a = {a})")


# ----------------------------------------------------------------------------- oracle and evaluation
def round_position(f) -> np.ndarray:
    r"""The book's rounding of a real position :math:`f(k)` to a global cut-off: nearest integer,
    halves up (:math:`\lfloor f + 1/2 \rfloor`). With it the linear and Beta maps reproduce
    TORS Table 3; the bound map is already an integer."""
    f = as_float_array(f, "positions")
    if not np.all(np.isfinite(f)):
        raise ValueError("positions must be finite")
    return np.floor(f + 0.5).astype(np.int64)


def hit_ratio_at(global_ranks, n_items: int, positions) -> np.ndarray:
    r"""Global hit ratio :math:`HR@f = \frac1M\sum_u \delta(R_u \le f)` at the (real) positions
    ``positions``, rounded with :func:`round_position` and clipped to :math:`1..N` (a bound-map
    position above :math:`N` reads :math:`HR@N = 1`). TORS Eq. 3/11 via
    :func:`itemsampling.metrics.metric_curve`."""
    n_items = check_int(n_items, "n_items", low=2)
    R = check_ranks(global_ranks, "global_ranks", high=n_items)
    pos = np.atleast_1d(as_float_array(positions, "positions"))
    if pos.ndim != 1 or pos.size == 0:
        raise ValueError(f"positions must be a non-empty 1-d array of positions, got shape {pos.shape}")
    K = np.clip(round_position(pos), 1, n_items)
    return metric_curve(R, "recall", K, n_items)


def oracle_mapping(global_ranks, n_items: int, sample_size: int, ks=None,
                   replacement: bool = True) -> np.ndarray:
    r"""The best integer map when the global ranks are known (Li et al. 2020 Sec. 3 and
    TORS Sec. 3.4, both under "Approximation Requirements"):

    .. math:: f^\star(k) = \arg\min_{K \in 1..N} \bigl| HR@K - \mathbb E[SHR@k] \bigr| ,

    with :math:`\mathbb E[SHR@k] = \frac1M\sum_u \Pr(r_u \le k \mid R_u)` computed exactly
    (TORS Eq. 14; :func:`itemsampling.sampling.shr_moments`). :math:`HR@K` is a step function;
    among ties the smallest :math:`K` is returned. Specific to one model (one set of ranks).

    Returns an int64 array over ``ks`` (default :math:`k = 1..n`).
    """
    n_items, sample_size = check_sizes(n_items, sample_size)
    check_memory(24.0 * n_items, f"hit ratios over {n_items} items", "n_items")
    R = check_ranks(global_ranks, "global_ranks", high=n_items)
    ks = np.arange(1, sample_size + 1) if ks is None else _check_ks(ks, sample_size)
    target, _ = shr_moments(R, n_items, sample_size, ks, replacement)
    hr = np.cumsum(np.bincount(R, minlength=n_items + 1)[1:]) / R.size  # HR@K, K = 1..N
    hi = np.clip(np.searchsorted(hr, target, side="left"), 0, n_items - 1)
    lo = np.clip(hi - 1, 0, n_items - 1)
    pick = np.where(np.abs(hr[lo] - target) <= np.abs(hr[hi] - target), lo, hi)
    # smallest K with the same HR value (the first K of a flat step)
    first = np.searchsorted(hr, hr[pick], side="left")
    return first.astype(np.int64) + 1


def alignment_errors(sampled_hr, global_hr_at_f) -> dict:
    r"""Error summary of Li et al. 2020 Table 7 between the sampled curve :math:`SHR@k`
    (:math:`k = 1..n`) and the global curve read at the mapped positions :math:`HR@f(k)`:

    * ``abs`` :math:`= \frac1n\sum_{k=1}^n |HR@f(k) - SHR@k|`,
      ``rel`` :math:`= \frac1n\sum_k |HR@f(k) - SHR@k| / SHR@k`;
    * ``abs@1``, ``rel@1``: the same at :math:`k = 1`;
    * ``abs@2-10``, ``rel@2-10``: averages over :math:`k = 2..10` (or up to :math:`n`).

    Every :math:`SHR@k` must be positive (a relative error against 0 is undefined); otherwise a
    ``ValueError`` is raised.
    """
    s = np.asarray(sampled_hr, dtype=np.float64)
    g = np.asarray(global_hr_at_f, dtype=np.float64)
    if s.ndim != 1 or s.size < 2 or g.shape != s.shape:
        raise ValueError("sampled_hr and global_hr_at_f must be 1-d arrays over k = 1..n of equal length >= 2")
    if not (np.all(np.isfinite(s)) and np.all(np.isfinite(g))):
        raise ValueError("sampled_hr and global_hr_at_f must be finite")
    if np.any(s <= 0) or np.any(s > 1) or np.any(g < 0) or np.any(g > 1):
        raise ValueError("sampled_hr must lie in (0, 1] and global_hr_at_f in [0, 1]")
    err = np.abs(g - s)
    rel = err / s
    top = slice(1, min(10, s.size))
    return {"abs": float(err.mean()), "rel": float(rel.mean()),
            "abs@1": float(err[0]), "rel@1": float(rel[0]),
            "abs@2-10": float(err[top].mean()), "rel@2-10": float(rel[top].mean())}


def winner_agreement(global_ranks_by_model: dict, n_items: int, sample_size: int, ks, positions,
                     n_repeats: int = 100, rng=None, replacement: bool = True) -> dict:
    r"""Winner prediction of TORS Table 3 / Li et al. 2020 Table 3.

    For each repeat, draw one set of sampled ranks per model
    (:func:`itemsampling.sampling.sample_ranks`) and find the model with the best sampled
    :math:`SHR@k`; the global winner is the model with the best :math:`HR@f(k)`
    (:func:`hit_ratio_at`, ties to the first model). Count the repeats in which the two agree.

    Parameters
    ----------
    global_ranks_by_model : dict model name -> global ranks (1..N).
    ks : cut-offs in ``1..n``.
    positions : dict ``mapping name -> array of f(k) aligned with ks``.

    Returns
    -------
    dict ``mapping name -> {k: count}`` with counts in ``0..n_repeats``, plus the key
    ``"_global_winner"`` (``mapping -> {k: model}``).
    """
    n_items, sample_size = check_sizes(n_items, sample_size)
    if not isinstance(global_ranks_by_model, dict) or len(global_ranks_by_model) < 2:
        raise ValueError("global_ranks_by_model must be a dict of at least two models")
    names = list(global_ranks_by_model)
    ranks = {m: check_ranks(global_ranks_by_model[m], f"global_ranks_by_model[{m!r}]", high=n_items)
             for m in names}
    ks = _check_ks(ks, sample_size)
    if not isinstance(positions, dict) or not positions:
        raise ValueError("positions must be a non-empty dict mapping name -> array of f(k) aligned with ks, "
                         f"got {type(positions).__name__} {positions!r:.60}")
    n_repeats = check_int(n_repeats, "n_repeats", low=1)
    gen = as_rng(rng)
    winners = {}
    for name, pos in positions.items():
        pos = as_float_array(pos, f"positions[{name!r}]")
        if pos.shape != ks.shape:
            raise ValueError(f"positions[{name!r}] must have one f(k) per k ({ks.size}), got shape {pos.shape}")
        hr = np.array([hit_ratio_at(ranks[m], n_items, pos) for m in names])  # models x ks
        winners[name] = np.argmax(hr, axis=0)
    sampled_best = np.empty((n_repeats, ks.size), dtype=np.int64)
    for rep in range(n_repeats):
        shr = np.array([metric_curve(sample_ranks(ranks[m], n_items, sample_size, gen, replacement),
                                     "recall", ks, sample_size) for m in names])
        sampled_best[rep] = np.argmax(shr, axis=0)
    out = {name: {int(k): int(np.sum(sampled_best[:, i] == w[i])) for i, k in enumerate(ks)}
           for name, w in winners.items()}
    out["_global_winner"] = {name: {int(k): names[w[i]] for i, k in enumerate(ks)} for name, w in winners.items()}
    return out

