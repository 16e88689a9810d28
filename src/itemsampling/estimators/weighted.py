r"""Correcting evaluations with popularity-weighted (non-uniform) decoys.

Beyond the papers of the book (Chapter 11). User :math:`u`'s target has global rank :math:`R_u`
among the :math:`N` items of its pool; :math:`A_u` is the set of the :math:`R_u - 1` pool items the
model ranks above it. The :math:`n-1` decoys are drawn from the :math:`N-1` non-target items with
single-draw probabilities :math:`p_i` (:math:`\sum_{i \ne t_u} p_i = 1`, e.g. :math:`p_i \propto`
popularity, renormalised over the pool without the target). For each drawn decoy we know
:math:`p_d` and :math:`a_d = 1[d \in A_u]`.

* **Per-user estimate** (:func:`horvitz_thompson`). With replacement, the Hansen-Hurwitz form of
  the Horvitz-Thompson estimator :math:`\widehat Y_u = \frac{1}{n-1}\sum_{j=1}^{n-1} a_{d_j}/p_{d_j}`
  is unbiased for :math:`R_u - 1` (:math:`E[a_d/p_d] = \sum_{i\in A_u} p_i/p_i`), with variance
  :math:`\frac{1}{n-1}\big(\sum_{i\in A_u} 1/p_i - (R_u-1)^2\big)` (:func:`ht_variance_exact`),
  estimated without bias by the sample variance of :math:`a_d/p_d` over :math:`n-1`
  (:func:`ht_variance`). Without replacement (successive sampling, Gumbel-top-k) the inclusion
  probabilities are not :math:`p_i`; ``design="successive"`` uses Des Raj's (1956) unbiased
  estimator for ordered draws, :math:`t_1 = a_1/p_1`,
  :math:`t_j = \sum_{i<j} a_i + a_j (1 - \sum_{i<j} p_i)/p_j`, :math:`\widehat Y = \bar t`.
* **Metric estimate** (:func:`estimate_metric_weighted`). A top-K metric is non-linear in
  :math:`R`, so the distribution of :math:`R` is estimated. The count of decoys above the target,
  :math:`c_u`, is :math:`\mathrm{Binomial}(n-1, \pi_u)` given the *popularity mass above the
  target* :math:`\pi_u = \sum_{i \in A_u} p_i`; the counts identify the distribution of
  :math:`\pi` (its MLE on a grid of :math:`\pi` by the EM of Chapter 6 with this binomial
  kernel), not of :math:`R`. The map :math:`\pi \mapsto R` comes from the decoys' *identities*:
  given :math:`A_u`, the above decoys are draws from :math:`A_u` with probabilities
  :math:`p_i/\pi_u`, so :math:`h_u = (n-1)\widehat Y_u/c_u` (the mean of :math:`1/p_d` over them
  with replacement) has expectation :math:`\rho_u = (R_u-1)/\pi_u`. The *ratio-curve* model
  assumes :math:`\rho` is a function of :math:`\pi` shared by the users, piecewise linear in
  :math:`\log\pi`, fitted by penalised non-negative weighted least squares of the model's
  :math:`E[\rho(\pi)\mid c]` against the mean of :math:`h_u` in each count group
  (:func:`fit_weighted`); :math:`R(\pi) = 1 + \pi\rho(\pi)`. With equal probabilities
  :math:`\rho \equiv N-1` and the estimate is the uniform-kernel MLE of Chapter 6.
* **Bounds below the rule** (:func:`weighted_bounds`): where the cut-off is below
  :func:`itemsampling.kernel.resolves`'s rule the counts do not identify the metric either; the
  range of the metric over every distribution of :math:`\pi` the counts allow, with the fewest items
  that can carry a mass :math:`\pi` (read off the draws) as the best rank, is the interval the
  default reports.
* **Ranks only** (:func:`rank_only_bounds`): without decoy identities the map is not identified;
  the most- and least-popular-first orders of the catalogue (:func:`tilt_curve` with infinite tilt)
  bound the metric.

This module holds the estimators only. The data they take live elsewhere: the masks of the items
above each target and the weighted decoy draws (``rank_masks``, ``draw_weighted_decoys``) in
:mod:`itemsampling.candidates`, beside the other decoy draws; the long file of
``python -m itemsampling estimate FILE --weighted`` (``read_weighted_file``) in
:mod:`itemsampling.inputs`, beside the other file readers, and that command in
:mod:`itemsampling.cli`. The three names still import from here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import binom

from .._validation import as_rng, check_int, check_ranks, check_real
from ..metrics import metric_function
from ..kernel import resolves
from .bootstrap import MetricEstimate, _check_n_boot, batch_em, check_confidence, percentile_interval
from .auto import check_interval
from .bounds import BoundsResult, cell_lp_bounds, clopper_pearson
from .distribution import _mle_em_impl
from .grid import _single_blas_thread

__all__ = [
    "WEIGHTED_METHODS",
    "WeightedFit",
    "check_decoys",
    "horvitz_thompson",
    "ht_variance",
    "ht_variance_exact",
    "tilt_curve",
    "fit_weighted",
    "estimate_metric_weighted",
    "weighted_replicates",
    "bootstrap_weights",
    "rank_only_bounds",
    "top_mass_curve",
    "removed_mass",
    "weighted_bounds",
]

#: Methods of :func:`estimate_metric_weighted`: the ratio-curve correction, the uniform kernel (the
#: uniform-kernel MLE applied to the counts) and the uncorrected metric.
WEIGHTED_METHODS = ("ratio", "uniform", "sampled")
DESIGNS = ("with_replacement", "successive")


# ---------------------------------------------------------------------------------------------
# input
# ---------------------------------------------------------------------------------------------
def check_decoys(decoy_probs, decoy_above):
    """Validate ``decoy_probs`` (float, ``(M, n-1)``, every entry in (0, 1]) and ``decoy_above``
    (boolean or 0/1 integers, same shape); return ``(float64 array, bool array)``. Ragged rows,
    probabilities outside (0, 1], NaN and non-boolean flags are refused with a ``ValueError`` that
    names the argument."""
    arrays = []
    for name, value in (("decoy_probs", decoy_probs), ("decoy_above", decoy_above)):
        if isinstance(value, str):
            raise ValueError(f"{name} must be a 2-d array (M users x n-1 decoys), got a string")
        try:
            a = np.asarray(value)
        except ValueError as exc:
            raise ValueError(f"{name} must be a rectangular 2-d array (M users x n-1 decoys): every row must "
                             f"hold the same number of decoys ({exc})") from None
        if a.dtype == object:
            raise ValueError(f"{name} must be a rectangular 2-d array (M users x n-1 decoys) of numbers: every "
                             "row must hold the same number of decoys")
        if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
            raise ValueError(f"{name} must be a 2-d array (M users x n-1 decoys) with M >= 1 and n-1 >= 1, "
                             f"got shape {a.shape}")
        arrays.append(a)
    p, a = arrays
    if p.dtype.kind not in "fiu" or p.dtype == bool:
        raise ValueError(f"decoy_probs must hold numbers in (0, 1], got dtype {p.dtype}")
    p = p.astype(np.float64)
    if not np.all(np.isfinite(p)):
        raise ValueError("decoy_probs must hold probabilities in (0, 1]; found NaN or infinite values")
    if np.any(p <= 0) or np.any(p > 1):
        bad = p[(p <= 0) | (p > 1)][0]
        raise ValueError(f"decoy_probs must hold probabilities in (0, 1] (a drawn decoy has a positive "
                         f"probability), got {bad!r}")
    if a.shape != p.shape:
        raise ValueError(f"decoy_above must have the shape of decoy_probs {p.shape}, got {a.shape}")
    if a.dtype != bool:
        if a.dtype.kind not in "iu" or np.any((a != 0) & (a != 1)):
            raise ValueError(f"decoy_above must be boolean (True/False or 0/1: did the decoy score above the "
                             f"target?), got dtype {a.dtype}" + (f" with value {a[(a != 0) & (a != 1)][0]!r}"
                                                                  if a.dtype.kind in "iuf" else ""))
        a = a.astype(bool)
    return p, a


def _check_design(design) -> str:
    if not isinstance(design, str) or design not in DESIGNS:
        raise ValueError(f"design must be one of {list(DESIGNS)}, got {design!r}")
    return design


# ---------------------------------------------------------------------------------------------
# per-user estimates
# ---------------------------------------------------------------------------------------------
def _terms(p, a, design):
    """The per-draw terms whose mean is the estimate: ``a/p`` (with replacement) or Des Raj's
    :math:`t_j` (successive sampling)."""
    z = a / p
    if design == "with_replacement":
        return z
    cum_a = np.cumsum(a, axis=1) - a          # sum_{i<j} a_i
    cum_p = np.cumsum(p, axis=1) - p          # sum_{i<j} p_i
    if np.any(cum_p >= 1 - 1e-12):
        raise ValueError("decoy_probs: with design 'successive' the probabilities of the earlier draws of a row "
                         "must sum to less than 1 (single-draw probabilities of distinct items)")
    return cum_a + z * (1.0 - cum_p)


def horvitz_thompson(decoy_probs, decoy_above, design: str = "with_replacement") -> np.ndarray:
    r"""Per-user unbiased estimate of :math:`R_u - 1`, the number of items above the target.

    ``design="with_replacement"``: :math:`\widehat Y_u = \frac1{n-1}\sum_j a_j/p_j`
    (Hansen & Hurwitz 1943; the Horvitz-Thompson sum over the decoys ranked above the target).
    ``design="successive"`` (draws without replacement, each proportional to :math:`p` among the
    remaining items, in draw order; ``decoy_probs`` hold the single-draw probabilities of the first
    draw): Des Raj (1956), :math:`\widehat Y_u = \frac1{n-1}\sum_j t_j`,
    :math:`t_j = \sum_{i<j} a_i + a_j (1-\sum_{i<j} p_i)/p_j`. Both unbiased for every fixed
    :math:`A_u`, provided every item above the target has :math:`p_i > 0`."""
    p, a = check_decoys(decoy_probs, decoy_above)
    return _terms(p, a, _check_design(design)).mean(axis=1)


def ht_variance(decoy_probs, decoy_above, design: str = "with_replacement") -> np.ndarray:
    r"""Unbiased estimate of :math:`\mathrm{Var}[\widehat Y_u]`: the sample variance of the terms
    of :func:`horvitz_thompson` divided by :math:`n-1` (their mean is over :math:`n-1` draws;
    independent with replacement, uncorrelated for Des Raj's :math:`t_j`). Needs :math:`n-1 \ge 2`."""
    p, a = check_decoys(decoy_probs, decoy_above)
    if p.shape[1] < 2:
        raise ValueError("decoy_probs must have at least 2 decoys per row to estimate a variance")
    t = _terms(p, a, _check_design(design))
    return t.var(axis=1, ddof=1) / t.shape[1]


def ht_variance_exact(probs, above, n_decoys: int) -> float:
    r"""Closed-form variance of the with-replacement estimator for one user:
    :math:`\mathrm{Var}[\widehat Y] = \frac{1}{n-1}\big(\sum_{i\in A} 1/p_i - |A|^2\big)`, ``probs``
    the single-draw probabilities of the :math:`N-1` non-target items (summing to 1), ``above``
    their membership of :math:`A`."""
    p = np.asarray(probs, dtype=np.float64)
    a = np.asarray(above)
    if p.ndim != 1 or a.shape != p.shape or a.dtype != bool:
        raise ValueError("probs must be a 1-d array and above a boolean array of the same shape")
    if np.any(p <= 0) or abs(p.sum() - 1) > 1e-9:
        raise ValueError("probs must be positive and sum to 1")
    m = check_int(n_decoys, "n_decoys", low=1)
    return float((np.sum(1.0 / p[a]) - a.sum() ** 2) / m)


# ---------------------------------------------------------------------------------------------
# the popularity-tilt model
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CatalogueProfile:
    """Popularity profile of the non-target catalogue in ``B`` bins of :math:`\\log p`: ``counts``
    (estimated number of items per bin, whole numbers summing to about ``n_items - 1``), ``probs`` (their mean
    single-draw probability) and ``log_probs``."""

    counts: np.ndarray
    probs: np.ndarray
    log_probs: np.ndarray


def _centred(profile):
    w, lp = profile.counts, profile.log_probs
    x = lp - np.average(lp, weights=w)
    mass = w * profile.probs
    return x, w, mass / mass.sum(), w.sum()


def _alpha_table(t, x, w, mass, N1, n_alpha=4001):
    """alpha grid and the increasing pi(alpha), R(alpha) - 1 on it (pi = 0 and 1 appended)."""
    span = 40.0 + abs(t) * np.abs(x).max()
    al = np.linspace(-span, span, n_alpha)
    s = 1.0 / (1.0 + np.exp(-(al[:, None] + t * x[None, :])))
    return (np.concatenate([[-np.inf], al, [np.inf]]), np.concatenate([[0.0], s @ mass, [1.0]]),
            np.concatenate([[0.0], s @ w, [N1]]))


def tilt_curve(pi, tilt, profile: CatalogueProfile, n_alpha: int = 4001) -> np.ndarray:
    r"""The rank :math:`R(\pi)` of a target with popularity mass :math:`\pi` above it under the
    popularity-tilt model with :math:`\beta` = ``tilt``: item :math:`i` lies above the target with
    probability :math:`\sigma(\alpha + \beta x_i)`, :math:`x_i = \log p_i` (centred), so
    :math:`\pi(\alpha) = \sum_b N_b\,p_b\,\sigma(\alpha + \beta x_b)` and
    :math:`R(\alpha) = 1 + \sum_b N_b\,\sigma(\alpha + \beta x_b)`, both increasing in
    :math:`\alpha`; :math:`R(\pi)` is read off by linear interpolation on a fine grid of
    :math:`\alpha` (``n_alpha`` points; :math:`\pi = 0` gives :math:`R = 1`, :math:`\pi = 1` gives
    :math:`N`). ``pi`` is 1-d; ``tilt`` a number or a 1-d array (result ``(len(tilt), len(pi))``);
    ``+inf`` / ``-inf`` order the catalogue from the most / least popular item (the bounds of
    :func:`rank_only_bounds`)."""
    pi = np.asarray(pi, dtype=np.float64)
    tilts = np.atleast_1d(np.asarray(tilt, dtype=np.float64))
    scalar = np.ndim(tilt) == 0
    x, w, mass, N1 = _centred(profile)
    out = np.empty((tilts.size, pi.size))
    for i, t in enumerate(tilts):
        if np.isfinite(t):
            al, cm, cn = _alpha_table(t, x, w, mass, N1, n_alpha)
        else:
            order = np.argsort(-np.sign(t) * x, kind="stable")
            cm = np.concatenate([[0.0], np.cumsum(mass[order])])
            cn = np.concatenate([[0.0], np.cumsum(w[order])])
            cm[-1] = 1.0
        out[i] = 1.0 + np.interp(pi, cm, cn)
    return out[0] if scalar else out


def _pi_grid(n_items: int, p_min: float, n_lin: int = 200, n_geo: int = 240) -> np.ndarray:
    """Support of the distribution of :math:`\\pi`: 0 (the target on top), the lattice
    :math:`j/(N-1)` for :math:`j \\le` ``n_lin`` (so equal probabilities reproduce the uniform
    kernel on ranks 1..n_lin+1 exactly), geometric steps to 1, and geometric steps down to the
    smallest possible positive mass, ``p_min`` (one item, the least popular)."""
    N1 = n_items - 1
    j = np.arange(0, min(N1, n_lin) + 1) / N1
    parts = [j]
    if N1 > n_lin:
        parts.append(np.geomspace(j[-1], 1.0, n_geo))
    if p_min < 1.0 / N1 * (1 - 1e-9):
        parts.append(np.geomspace(p_min, 1.0 / N1, 24))
    g = np.unique(np.concatenate(parts))
    return g[(g == 0) | (g >= p_min * (1 - 1e-9))]


def _count_kernel(grid, n_dec, cols):
    return binom.pmf(cols[None, :], n_dec, grid[:, None])


def _em(counts, K):
    """The MLE of the mixing weights by Chapter 6's EM (Jin et al. 2021 Eq. 20-21) from uniform
    weights on the grid, stopped by the package's rule (relative log-likelihood change 1e-6), as
    ``estimate_metric(..., "mle")`` does: early stopping keeps the estimate smoother than the
    exact NPMLE, whose few support points starve the top ranks."""
    with _single_blas_thread():
        return _mle_em_impl(counts, K, tol=1e-6, max_iter=10_000).distribution


def _interp_metric(R, metric, ks, N):
    """:math:`F` at real-valued ranks, linear between neighbouring integer ranks: (len(ks), ...)."""
    R = np.clip(R, 1.0, N)
    lo = np.floor(R).astype(np.int64)
    fr = R - lo
    hi = np.minimum(lo + 1, N)
    out = []
    for k in ks:
        F = metric_function(metric, k, N)
        out.append((1 - fr) * F(lo) + fr * F(hi))
    return np.array(out)


@dataclass(frozen=True)
class WeightedFit:
    r"""A fitted ratio-curve model: ``pi_grid`` (support of :math:`\pi`), ``pi_weights`` (the NPMLE
    of its distribution), ``ranks`` (:math:`R(\pi)` on the grid, real-valued) and ``groups`` (per
    count :math:`c`: users, mean of :math:`(n-1)\widehat Y_u/c_u`, its standard error, the model's
    value, the knots and the fitted ratios; empty for ``"uniform"``)."""

    pi_grid: np.ndarray
    pi_weights: np.ndarray
    ranks: np.ndarray
    groups: dict
    n_items: int

    def rank_distribution(self) -> np.ndarray:
        r""":math:`\widehat P(R)` over R = 1..N (the mass at a real-valued rank split linearly)."""
        R = np.clip(self.ranks, 1.0, self.n_items)
        lo = np.floor(R).astype(np.int64)
        fr = R - lo
        P = np.bincount(lo - 1, weights=self.pi_weights * (1 - fr), minlength=self.n_items)
        P += np.bincount(np.minimum(lo, self.n_items - 1), weights=self.pi_weights * fr, minlength=self.n_items)
        return P[:self.n_items]


def _hat_basis(x, knots):
    """Piecewise-linear hat functions on ``knots`` evaluated at ``x`` (constant beyond the ends)."""
    xc = np.clip(x, knots[0], knots[-1])
    H = np.zeros((x.size, knots.size))
    if knots.size == 1:
        H[:, 0] = 1.0
        return H
    i = np.clip(np.searchsorted(knots, xc, side="right") - 1, 0, knots.size - 2)
    fr = (xc - knots[i]) / (knots[i + 1] - knots[i])
    H[np.arange(x.size), i] = 1 - fr
    H[np.arange(x.size), i + 1] += fr
    return H


class _Problem:
    """Everything about one data set that does not change under a user bootstrap."""

    def __init__(self, p, a, N, design, uniform, n_knots=10, pools=None):
        self.N = N
        # per-user pool sizes (the uniform kernel's map pi -> R depends on them): distinct sizes and users
        self.pool_values, self.pool_of = (None, None) if pools is None else np.unique(pools, return_inverse=True)
        self.n_dec = p.shape[1]
        self.c = a.sum(axis=1)
        self.cols = np.unique(self.c)
        self.col_of = np.searchsorted(self.cols, self.c)
        self.grid = _pi_grid(N, float(p.min()))
        self.K = _count_kernel(self.grid, self.n_dec, self.cols)
        y = _terms(p, a, design).mean(axis=1)
        pos = self.c > 0
        self.h = np.zeros(p.shape[0])
        self.h[pos] = y[pos] * self.n_dec / self.c[pos]   # estimates (R_u - 1)/pi_u given A_u
        self.uniform = bool(uniform) or np.ptp(p) == 0     # equal probabilities: the ratio is N - 1
        kc = np.unique(np.round(np.geomspace(1, self.n_dec, n_knots)))
        self.knots = np.log(kc / self.n_dec)
        lg = np.log(np.where(self.grid > 0, self.grid, 1.0))
        self.H = _hat_basis(lg, self.knots)
        self.H[self.grid == 0] = 0.0

    def counts(self, w):
        return np.bincount(self.col_of, weights=w, minlength=self.cols.size)

    def moments(self, w):
        """Per count column: users, mean of h and the variance of that mean (count >= 1, >= 2 users)."""
        m = self.counts(w)
        s1 = np.bincount(self.col_of, weights=w * self.h, minlength=self.cols.size)
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = s1 / m
            dev = self.h - mean[self.col_of]                 # two-pass: no cancellation
            s2 = np.bincount(self.col_of, weights=w * dev ** 2, minlength=self.cols.size)
            var = s2 / (m - 1) / m
        ok = (self.cols > 0) & (m >= 2) & (var > 0)
        return m, mean, var, ok

    def fit(self, w):
        """(pi weights, R on the pi grid, groups) for user weights ``w``."""
        return self.finish(_em(self.counts(w), self.K), w)

    def finish(self, P, w):
        if self.uniform:
            return P, 1.0 + (self.N - 1) * self.grid, None
        from scipy.optimize import nnls

        m, mean, var, ok = self.moments(w)
        if not np.any(ok):
            raise ValueError("decoy_above: the ratio curve cannot be fitted: no count of decoys above the target "
                             ">= 1 is shared by two users with different estimates")
        post = P[None, :] * self.K[:, ok].T            # (C_ok, J): posterior of pi given the count
        post /= post.sum(axis=1, keepdims=True)
        X = post @ self.H                              # (C_ok, knots)
        se = np.sqrt(var[ok])
        used = X.sum(axis=0) > 1e-12
        coef = np.zeros(self.knots.size)
        # weighted least squares, plus a smoothness penalty: a jump of the ratio between neighbouring
        # knots costs as much as a residual of one (median) standard error
        Xu = X[:, used] / se[:, None]
        D = np.diff(np.eye(int(used.sum())), axis=0) / np.median(se)
        coef[used] = nnls(np.vstack([Xu, D]), np.concatenate([mean[ok] / se, np.zeros(D.shape[0])]))[0]
        if not np.all(used):  # knots no group informs: the nearest informed knot's value
            iu = np.flatnonzero(used)
            coef = coef[iu[np.abs(np.arange(coef.size)[:, None] - iu[None, :]).argmin(axis=1)]]
        rho = self.H @ coef
        R = np.minimum(np.maximum.accumulate(1.0 + self.grid * rho), self.N)
        groups = {"count": self.cols[ok], "users": m[ok], "mean": mean[ok], "se": np.sqrt(var[ok]),
                  "model": X @ coef, "knots": np.exp(self.knots), "ratio": coef}
        return P, R, groups

    def value(self, P, R, metric, ks, w=None):
        if not (self.uniform and self.pool_values is not None):
            return _interp_metric(R, metric, ks, self.N) @ P
        # uniform kernel, per-user pools: R_u(pi) = 1 + (N_u - 1) pi, averaged over the users' pools
        share = np.bincount(self.pool_of, weights=None if w is None else w, minlength=self.pool_values.size)
        share = share / share.sum()
        return sum(f * (_interp_metric(1.0 + (Nu - 1) * self.grid, metric, ks, self.N) @ P)
                   for Nu, f in zip(self.pool_values, share) if f > 0)


def _prepare(decoy_probs, decoy_above, n_items, design):
    p, a = check_decoys(decoy_probs, decoy_above)
    design = _check_design(design)
    pools = None
    if np.ndim(n_items) == 0:
        N = check_int(n_items, "n_items", low=2)
    else:
        pools = check_ranks(n_items, "n_items")
        if pools.size != p.shape[0]:
            raise ValueError(f"n_items must be one catalogue size or one per user ({p.shape[0]}), got {pools.size}")
        if pools.min() < 2:
            raise ValueError(f"n_items must be >= 2 for every user, got {pools.min()}")
        N = int(pools.max())
        if np.all(pools == N):
            pools = None
    low = p.shape[1] + 1 if design == "successive" else 2
    if pools is not None and pools.min() < low:
        raise ValueError(f"n_items: without replacement every user's pool needs at least the {p.shape[1]} decoys + 1 "
                         f"items, got {pools.min()}")
    if design == "successive" and p.shape[1] > N - 1:
        raise ValueError(f"decoy_probs: without replacement at most n_items - 1 = {N - 1} decoys per user, "
                         f"got {p.shape[1]}")
    return p, a, N, design, pools


def fit_weighted(decoy_probs, decoy_above, n_items: int, design: str = "with_replacement",
                 method: str = "ratio") -> WeightedFit:
    r"""Fit the ratio-curve model (module docstring): the NPMLE of the distribution of the
    popularity mass above the target, :math:`\pi`, from the counts of decoys above the target
    (binomial kernel; Chapter 6's EM from uniform weights on the grid, with its stopping rule), and the ratio
    curve :math:`\rho(\pi) = (R-1)/\pi` (``method="ratio"``: piecewise linear in
    :math:`\log\pi` with knots at :math:`\pi = c/(n-1)` for counts :math:`c` spaced
    geometrically from 1 to :math:`n-1`, constant beyond them, fitted by penalised non-negative
    weighted least squares of :math:`E[\rho(\pi) \mid c]` against the mean of
    :math:`(n-1)\widehat Y_u / c_u` in every count group :math:`c \ge 1` with two or more users;
    ``"uniform"``: :math:`\rho \equiv N-1`, the uniform kernel). :math:`R(\pi) = 1 + \pi\rho(\pi)`,
    made non-decreasing.

    The penalised fit: with :math:`\bar h_c` the group mean, :math:`s_c` its standard error,
    :math:`x_c^\top\beta` the model's value and :math:`\tilde s = \mathrm{median}_c\, s_c`, the knot
    values :math:`\beta \ge 0` minimise
    :math:`\sum_c ((x_c^\top\beta - \bar h_c)/s_c)^2 + \sum_j ((\beta_{j+1} - \beta_j)/\tilde s)^2`
    (``scipy.optimize.nnls`` on the stacked system). The second sum is a first-difference
    smoothness penalty; its weight :math:`1/\tilde s^2` is fixed by a rule, not tuned on the data: a
    jump between neighbouring knots costs as much as a residual of one standard error in a group of
    median precision. Knots that no group informs take the nearest informed knot's value. With
    per-user pools the probabilities differ between users even for uniform decoys
    (:math:`1/(N_u-1)`), so the reduction to the uniform-kernel MLE needs equal probabilities."""
    if method not in ("ratio", "uniform"):
        raise ValueError(f"method must be 'ratio' or 'uniform', got {method!r}")
    p, a, N, design, pools = _prepare(decoy_probs, decoy_above, n_items, design)
    if pools is not None and method == "uniform":
        raise ValueError("n_items: under the uniform kernel each pool size gives its own R(pi); give one n_items to "
                         "fit_weighted(method='uniform'), or use estimate_metric_weighted, which averages over the pools")
    prob = _Problem(p, a, N, design, method == "uniform")
    P, R, groups = prob.fit(np.ones(p.shape[0]))
    return WeightedFit(prob.grid, P, R, groups or {}, N)


def _ks(k):
    seq = np.ndim(k) > 0
    ks = list(np.atleast_1d(np.asarray(k, dtype=object))) if seq else [k]
    return ks, seq


def estimate_metric_weighted(decoy_probs, decoy_above, n_items: int, metric: str, k, method: str = "ratio",
                             ci=None, n_boot: int = 200, rng=None, design: str = "with_replacement",
                             interval: str = "kept"):
    r"""Estimate a global top-K metric from an evaluation with weighted decoys.

    ``decoy_probs`` and ``decoy_above`` are ``(M, n-1)`` arrays: the single-draw probability of each
    drawn decoy (renormalised over the user's pool without the target) and whether it scored above
    the target. ``method``:

    * ``"ratio"`` (default): the ratio-curve correction (:func:`fit_weighted`),
      :math:`\widehat T = \sum_j \widehat P(\pi_j) F(R(\pi_j))`, :math:`F` interpolated linearly
      between integer ranks;
    * ``"uniform"``: :math:`R(\pi) = 1 + (N-1)\pi`, i.e. the uniform-kernel MLE of Chapter 6 (with
      replacement) applied to the sampled ranks :math:`r_u = 1 + c_u` (the naive estimate);
    * ``"sampled"``: the uncorrected sampled metric, :math:`\frac1M\sum_u F_n(1 + c_u)`.

    ``design`` as in :func:`horvitz_thompson` (it enters through the ratio curve). With ``ci`` a
    confidence level in (0, 1) returns a :class:`~itemsampling.estimators.MetricEstimate` from a
    user bootstrap (``n_boot`` replicates, users resampled with their decoys; the distribution of
    :math:`\pi` *and* the ratio curve re-estimated in every replicate; percentile interval). ``k``
    may be a sequence of cut-offs (the fields are then arrays).

    ``n_items`` is one catalogue size :math:`N` or one pool size :math:`N_u` per user (e.g. all
    items but the user's training items). The ratio-curve correction needs no per-user size: each
    user's pool enters through the decoys' probabilities (:math:`p_i` renormalised over the pool)
    and the Horvitz-Thompson estimate of :math:`R_u - 1` they give, so the curve
    :math:`R(\pi)` is already on each user's own rank scale, and :math:`N = \max_u N_u` only
    bounds it. The uniform kernel maps :math:`\pi` to :math:`R_u = 1 + (N_u - 1)\pi` with the
    user's own pool, so ``"uniform"`` averages :math:`F` over the users' pools (re-weighted in
    every bootstrap replicate); ``"sampled"`` does not use :math:`N`.

    ``interval`` (with ``ci``): ``"kept"`` (default) reports, for every cut-off below the resolution
    rule (:func:`itemsampling.kernel.resolves` with :math:`N = \max_u N_u` and :math:`n` = decoys + 1),
    the identification bounds of :func:`weighted_bounds` as the interval, marked ``identified=False``,
    ``interval="bounds"`` (the point estimate stays: there it is the ratio curve's extrapolation, not the
    data's); the bootstrap where the rule holds. ``"bootstrap"``: the bootstrap interval everywhere.
    ``method="sampled"`` always gets the bootstrap (it estimates the sampled metric, which the counts
    identify).
    """
    if not isinstance(method, str) or method not in WEIGHTED_METHODS:
        raise ValueError(f"method must be one of {list(WEIGHTED_METHODS)}, got {method!r}")
    p, a, _, _, _ = _prepare(decoy_probs, decoy_above, n_items, design)
    ks, seq = _ks(k)
    conf = None if ci is None else check_confidence(ci)
    if conf is None:
        est, _ = weighted_replicates(p, a, n_items, metric, k, None, method, design)
        return est if seq else float(est[0])
    kind = check_interval(interval)
    N = int(np.max(n_items))
    ident = [method == "sampled" or resolves(N, p.shape[1] + 1, kk) for kk in ks]
    use_bounds = kind == "kept"
    W = bootstrap_weights(p.shape[0], n_boot, rng)
    if use_bounds and not any(ident):  # every cut-off gets the bounds: no bootstrap to run
        est, _ = weighted_replicates(p, a, n_items, metric, k, None, method, design)
        low, high = np.zeros(len(ks)), np.zeros(len(ks))
    else:
        est, reps = weighted_replicates(p, a, n_items, metric, k, W, method, design)
        low, high = (np.asarray(x, dtype=np.float64) for x in percentile_interval(reps, conf, axis=0))
    kinds = ["bootstrap"] * len(ks)
    below = [j for j, ok in enumerate(ident) if not ok]
    if use_bounds and below:
        b = weighted_bounds(p, a, n_items, metric, [ks[j] for j in below], conf, design=design)
        key = next(iter(b.low))
        for i, j in enumerate(below):
            low[j], high[j], kinds[j] = b.low[key][i], b.high[key][i], "bounds"
    if not seq:
        return MetricEstimate(float(est[0]), float(low[0]), float(high[0]), conf, n_boot, method,
                              identified=bool(ident[0]), interval=kinds[0])
    return MetricEstimate(est, low, high, conf, n_boot, method, identified=np.array(ident),
                          interval=np.array(kinds, dtype=object))


def bootstrap_weights(n_users: int, n_boot: int, rng=None) -> np.ndarray:
    """The user bootstrap's draws: ``(n_boot, n_users)`` float counts, row ``b`` how often each
    user is drawn in replicate ``b`` (multinomial, ``M`` draws with equal probabilities), from
    ``rng``; the draws of :func:`estimate_metric_weighted`."""
    M = check_int(n_users, "n_users", low=1)
    return as_rng(rng).multinomial(M, np.full(M, 1.0 / M), size=_check_n_boot(n_boot)).astype(np.float64)


def weighted_replicates(decoy_probs, decoy_above, n_items, metric: str, k, weights=None, method: str = "ratio",
                        design: str = "with_replacement"):
    r"""The estimate of :func:`estimate_metric_weighted` and its bootstrap replicates for given user
    weights: ``weights`` is ``(B, M)`` (:func:`bootstrap_weights`; rows re-weight the users, each
    with its decoys) or ``None`` for no replicates. Returns ``(estimate, replicates)``, arrays of
    shape ``(len(ks),)`` and ``(B, len(ks))`` (``None`` without weights). Two models scored on the
    same users and re-weighted by the same rows (aligned by user) give *paired* replicates, whose
    differences are the paired bootstrap of their difference."""
    if not isinstance(method, str) or method not in WEIGHTED_METHODS:
        raise ValueError(f"method must be one of {list(WEIGHTED_METHODS)}, got {method!r}")
    p, a, N, design, pools = _prepare(decoy_probs, decoy_above, n_items, design)
    ks, _ = _ks(k)
    for kk in ks:
        metric_function(metric, kk, N)  # validates metric and k
    M, n_dec = p.shape
    W = None
    if weights is not None:
        W = np.asarray(weights, dtype=np.float64)
        if W.ndim != 2 or W.shape[1] != M or not np.all(np.isfinite(W)) or np.any(W < 0) or np.any(W.sum(axis=1) <= 0):
            raise ValueError(f"weights must be a (B, {M}) array of non-negative user weights, each row with a "
                             f"positive sum, got shape {W.shape}")
    c = a.sum(axis=1)
    if method == "sampled":
        Fs = np.array([metric_function(metric, kk, n_dec + 1)(1 + c) for kk in ks])   # (len(ks), M)
        est = Fs.mean(axis=1)
        return est, None if W is None else (W @ Fs.T) / W.sum(axis=1, keepdims=True)
    prob = _Problem(p, a, N, design, method == "uniform", pools=pools)
    P, R, _ = prob.fit(np.ones(M))
    est = prob.value(P, R, metric, ks)
    if W is None:
        return est, None
    with _single_blas_thread():
        Ps = batch_em(np.stack([prob.counts(wb) for wb in W]), prob.K, tol=1e-6, max_iter=10_000)[0]
    reps = np.empty((W.shape[0], len(ks)))
    for b in range(W.shape[0]):
        _, Rb, _ = prob.finish(Ps[b], W[b])
        reps[b] = prob.value(Ps[b], Rb, metric, ks, W[b])
    return est, reps


# ---------------------------------------------------------------------------------------------
# ranks only
# ---------------------------------------------------------------------------------------------
def rank_only_bounds(sampled_ranks, popularity, sample_size: int, metric: str, k):
    r"""Sharp bounds on a metric from sampled ranks alone, when the decoys were drawn with
    replacement with :math:`p_i \propto` ``popularity`` (one weight per non-target item, all
    positive) but their identities are lost. The ranks identify the distribution of the mass
    :math:`\pi` above the target (NPMLE with the binomial kernel), not the map to :math:`R`: any
    increasing map is consistent with them. The most-popular-first order gives every :math:`\pi`
    the smallest rank (upper bound), the least-popular-first order the largest (lower bound).
    Returns ``(low, estimate_with_tilt_0, high)``, the middle value being the uniform-kernel MLE."""
    w = np.asarray(popularity, dtype=np.float64)
    if w.ndim != 1 or w.size < 1 or not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise ValueError("popularity must be a 1-d array of positive finite weights, one per non-target item")
    N = w.size + 1
    n = check_int(sample_size, "sample_size", low=2)
    r = check_ranks(sampled_ranks, "sampled_ranks", high=n)
    ks, seq = _ks(k)
    pr = w / w.sum()
    # the exact profile: every item its own bin
    vals, inv = np.unique(pr, return_inverse=True)
    prof = CatalogueProfile(np.bincount(inv).astype(np.float64), vals, np.log(vals))
    grid = _pi_grid(N, float(pr.min()))
    cols = np.unique(r - 1)
    K = _count_kernel(grid, n - 1, cols)
    P = _em(np.bincount(np.searchsorted(cols, r - 1), minlength=cols.size).astype(np.float64), K)
    out = [(_interp_metric(tilt_curve(grid, t, prof), metric, ks, N) @ P) for t in (-np.inf, 0.0, np.inf)]
    if seq:
        return tuple(out)
    return tuple(float(o[0]) for o in out)


# ---------------------------------------------------------------------------------------------
# bounds below the rule
# ---------------------------------------------------------------------------------------------
#: :func:`weighted_bounds`' cells of :math:`\pi`: geometric from ``PI_FLOOR`` to 1, relative width
#: ``PI_WIDTH`` (about 8,000 cells), plus :math:`\pi = 0` and every point where the best rank passes a cut-off.
PI_FLOOR = 1e-7
PI_WIDTH = 2e-3


def _curve(q, weight_mass, weight_items, M, margin):
    """(mass, items) from the draws' probabilities ``q`` sorted descending and each draw's contribution."""
    xm, xn = weight_mass / M, weight_items / M
    mass = np.cumsum(xm) + margin * np.sqrt(np.cumsum(xm ** 2))
    items = np.cumsum(xn) - margin * np.sqrt(np.cumsum(xn ** 2))
    mass = np.concatenate([[0.0], np.maximum.accumulate(np.minimum(mass, 1.0))])
    items = np.concatenate([[0.0], np.maximum.accumulate(np.maximum(items, 0.0))])
    return mass, items


def top_mass_curve(decoy_probs, margin: float = 3.0, design: str = "with_replacement") -> tuple:
    r"""The fewest items that carry a popularity mass :math:`\pi`, read off the draws themselves.

    :math:`M` users drew :math:`d` decoys each; :math:`q_1 \ge q_2 \ge \dots` are the probabilities of all
    :math:`D = Md` draws. An item of probability :math:`p` is drawn :math:`\lambda(p)` times per user on
    average, so summing :math:`q/\lambda(q)` (:math:`1/\lambda(q)`) over the draws with :math:`q \ge q_j`
    and dividing by :math:`M` estimates without bias the mass (the number) of the items with
    :math:`p_i \ge q_j` (Hansen & Hurwitz 1943): the curve :math:`m \mapsto n`, most popular items first.
    With replacement :math:`\lambda(p) = dp` exactly (mass :math:`j/D`, number
    :math:`\frac1D\sum_{i \le j} 1/q_i`). Without replacement (successive sampling, ``design="successive"``,
    rows in draw order) :math:`\lambda(p)` is the inclusion probability: draw :math:`j` takes the item with
    probability :math:`p/(1 - m_{j-1})` if it is still there, :math:`m_{j-1}` the mass the user's earlier
    draws removed, so :math:`\lambda(p)` lies between :math:`1 - (1-p)^d` and :math:`p\,E[\sum_j 1/(1 -
    m_{j-1})]` (the expectation read off the rows); the mass is summed with the lower :math:`\lambda` and
    the number with the upper, so both err on the safe side. Returns ``(mass, items)``, non-decreasing from ``(0, 0)``: the
    mass raised and the number lowered by ``margin`` standard errors (the root of the summed squared
    contributions over :math:`M`), so that the curve lies below the true one, :math:`L(\pi) = \min\{m:
    S_m \ge \pi\}` (:math:`S_m` the mass of the :math:`m` most popular items), except with a chance of the
    order of the margin's normal tail. The users' probabilities are each renormalised over the user's own
    pool, so the curve is their average: pools that differ by a few items differ little."""
    P = np.asarray(decoy_probs, dtype=np.float64)
    if P.ndim != 2 or P.size == 0:
        raise ValueError(f"decoy_probs must be an (M, n-1) array of probabilities, got shape {P.shape}")
    margin = check_real(margin, "margin", low=0.0)
    design = _check_design(design)
    M, d = P.shape
    q = np.sort(P.ravel())[::-1]
    if design == "with_replacement":
        lam = d * q
        return _curve(q, q / lam, 1.0 / lam, M, margin)
    low = -np.expm1(d * np.log1p(-np.minimum(q, 1.0 - 1e-15)))      # 1 - (1 - q)^d
    # draw j takes the item with probability q / (1 - m_{j-1}), m_{j-1} the mass the user's earlier draws
    # removed (read off the rows, in draw order): the inclusion is at most q times the users' mean of
    # sum_j 1 / (1 - m_{j-1})
    removed = np.cumsum(P, axis=1) - P
    inflate = float(np.mean(np.sum(1.0 / np.maximum(1.0 - removed, 1e-12), axis=1)))
    high = np.maximum(np.minimum(1.0, q * inflate), low)
    return _curve(q, q / low, 1.0 / high, M, margin)


def removed_mass(decoy_probs) -> np.ndarray:
    r""":math:`T_0, \dots, T_{d-1}`: the largest mass the first :math:`j` draws without replacement removed
    in any user's row (``decoy_probs`` in draw order, single-draw probabilities); :math:`T_0 = 0`, each
    below 1. A new user's first :math:`j` draws remove more only with a chance of the order of
    :math:`1/M` at each :math:`j`."""
    P = np.asarray(decoy_probs, dtype=np.float64)
    T = np.max(np.cumsum(P, axis=1) - P, axis=0)
    return np.minimum(T, 1.0 - 1e-9)


def _poisson_binomial_cdf(P, xs) -> np.ndarray:
    """``Pr(sum_j Bernoulli(P[:, j]) <= x)`` for each row of ``P`` and each ``x`` in ``xs``: (rows, len(xs))."""
    rows, d = P.shape
    dist = np.zeros((rows, d + 1))
    dist[:, 0] = 1.0
    for j in range(d):
        pj = P[:, j:j + 1]
        dist[:, 1:] = dist[:, 1:] * (1.0 - pj) + dist[:, :-1] * pj
        dist[:, 0] *= 1.0 - pj[:, 0]
    cdf = np.cumsum(dist, axis=1)
    return np.clip(cdf[:, np.asarray(xs, dtype=np.int64)], 0.0, 1.0)


def weighted_bounds(decoy_probs, decoy_above, n_items, metrics, k, ci: float = 0.95, curve=None,
                    design: str = "with_replacement") -> BoundsResult:
    r"""Identification bounds for popularity-weighted decoys: the range of each metric@K over every
    distribution of the mass above the target, :math:`\pi`, whose law of counts lies in a simultaneous
    exact ``ci`` band around the observed one (the construction of :mod:`.bounds`, on :math:`\pi` instead
    of :math:`R`).

    * *The band*: users are independent, so :math:`\#\{u: c_u \le c_j\}` is binomial, and Clopper-Pearson
      intervals at the Bonferroni level cover all cut points :math:`c_j` together with probability at
      least ``ci`` (cut points: the dyadic sampled ranks, and the sampled rank where each cut-off's
      :math:`\pi` maps and the one after it). With replacement (``design``) the count :math:`c_u` of decoys
      above the target is Binomial(:math:`d`, :math:`\pi_u`) given :math:`\pi_u` (module docstring).
      Without replacement (``"successive"``) draw :math:`j` lands above the target with a probability that
      depends on the earlier draws, :math:`(\pi - m_A)/(1 - m_A - m_B)` (:math:`m_A`, :math:`m_B` the masses
      already drawn above and below it), which lies between :math:`a_j(\pi) = \max(0, (\pi -
      T_{j-1})/(1 - T_{j-1}))` and :math:`b_j(\pi) = \min(1, \pi/(1 - T_{j-1}))` whenever the first
      :math:`j - 1` draws removed at most :math:`T_{j-1}` (:func:`removed_mass`: the most any user's rows
      removed); so :math:`c_u` lies stochastically between the Poisson-binomial counts with success
      probabilities :math:`a_j` and :math:`b_j` (a coupling draw by draw), and :math:`\Pr(c \le c_j \mid
      \pi)` between their distribution functions.
    * *The columns*: cells of :math:`\pi` (:math:`\pi = 0`, geometric cells of relative width
      :data:`PI_WIDTH` from :data:`PI_FLOOR` to 1, and the points where the best rank passes a
      cut-off). :math:`\Pr(c \le c_j \mid \pi)` (and both of its bounds) falls as :math:`\pi` grows, so
      a cell's mass enters the band between its (lower) value at the cell's last and its (upper) value at
      its first :math:`\pi`: the outer LP of :func:`~.bounds.cell_lp_bounds` admits the cell masses of
      every feasible distribution.
    * *The metric*: :math:`R_u - 1 = |A_u|` items carry the mass :math:`\pi_u`, so :math:`R_u \ge 1 +
      L(\pi_u)`, :math:`L` the fewest items that can carry it (:func:`top_mass_curve`, a lower curve);
      every metric falls with the rank, so :math:`F(1 + \lceil L(\pi)\rceil)` at the cell's first
      :math:`\pi` bounds it above. Below, nothing in the draws bounds the rank of a target above a
      small mass: the rarest items are rarely drawn, and any number of them may sit above the target.
      A cell of :math:`\pi > 0` takes the worst rank, :math:`N`; :math:`\pi = 0` is rank 1.

    Whenever the band covers the true law (probability :math:`\ge` ``ci``) and the curve lies below
    :math:`L` (the margin's), the true distribution of :math:`\pi` is feasible and both bounds hold, for
    every metric and cut-off at once; for the test users' own metric too, by Hoeffding's argument of
    :mod:`.bounds`. ``decoy_probs``, ``decoy_above``, ``n_items`` as in :func:`estimate_metric_weighted`
    (the pools give the largest :math:`N`); ``metrics`` a name or a list, ``k`` a cut-off or a list.
    ``curve``: ``(mass, items)``, increasing from ``(0, 0)``, instead of :func:`top_mass_curve` (e.g. the
    exact one of a known pool, :math:`(S_m, m)` for :math:`m = 0, 1, \dots`)."""
    if isinstance(ci, bool) or not isinstance(ci, (int, float, np.floating)) or not 0.0 < float(ci) < 1.0:
        raise ValueError(f"ci must be a confidence level strictly between 0 and 1 (e.g. 0.95), got {ci!r}")
    p, a, N, design, _ = _prepare(decoy_probs, decoy_above, n_items, design)
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    ks, seq = _ks(k)
    if seq and not ks:
        raise ValueError("k must not be an empty sequence")
    for kk in ks:
        if kk is not None:
            check_int(kk, "k", low=1, high=N)
    for met in metrics:
        for kk in ks:
            metric_function(met, kk, N)  # validates metric and k
    d = p.shape[1]
    c = a.sum(axis=1)
    if curve is None:
        mass, items = top_mass_curve(p, design=design)
    else:
        mass, items = (np.asarray(x, dtype=np.float64) for x in curve)
        if (mass.ndim != 1 or mass.shape != items.shape or mass.size < 2 or not np.all(np.isfinite(mass))
                or not np.all(np.isfinite(items)) or mass[0] != 0 or items[0] != 0 or np.any(np.diff(mass) < 0)
                or np.any(np.diff(items) < 0)):
            raise ValueError("curve must be two 1-d arrays (mass, items) of the same length, non-decreasing from "
                             "(0, 0)")
    # the mass each cut-off's best rank allows: L(pi) <= K - 1 up to pi_K
    pi_k = {kk: float(np.interp(kk - 1, items, mass, right=1.0)) for kk in ks if kk is not None}
    cuts = {int(2 ** i) for i in range(int(np.log2(max(d, 1))) + 1) if 2 ** i <= d}
    for v in pi_k.values():
        r = int(np.floor(1 + d * v))
        cuts.update(x for x in (r, r + 1) if 1 <= x <= d)
    cuts = np.array(sorted(cuts), dtype=np.int64)       # sampled ranks r = 1 + c < n
    S = np.array([int((c <= r - 1).sum()) for r in cuts])
    lo, hi = clopper_pearson(S, c.size, 1.0 - (1.0 - float(ci)) / cuts.size)
    steps = int(np.ceil(np.log(1.0 / PI_FLOOR) / np.log1p(PI_WIDTH)))
    edges = np.unique(np.concatenate([PI_FLOOR * np.exp(np.arange(steps + 1) * np.log1p(PI_WIDTH)),
                                      [v for v in pi_k.values() if 0 < v < 1], [1.0]]))
    edges = edges[edges <= 1.0]
    first = np.concatenate([[0.0, 0.0], edges[:-1]])    # cells: pi = 0, (0, floor), then [e_i, e_i+1]
    last = np.concatenate([[0.0], edges])
    if design == "with_replacement":
        A_first = binom.cdf(cuts[None, :] - 1, d, first[:, None])
        A_last = binom.cdf(cuts[None, :] - 1, d, last[:, None])
    else:  # successive sampling: draw j lands above with a chance in [a_j(pi), b_j(pi)] (docstring)
        T = removed_mass(p)
        A_first = _poisson_binomial_cdf(np.maximum(0.0, (first[:, None] - T[None, :]) / (1.0 - T[None, :])), cuts - 1)
        A_last = _poisson_binomial_cdf(np.minimum(1.0, last[:, None] / (1.0 - T[None, :])), cuts - 1)
    best = 1 + np.ceil(np.interp(first, mass, items) - 1e-9).astype(np.int64)
    best = np.clip(best, 1, N)
    worst = np.where(last > 0, N, 1)
    low, high = {}, {}
    for met in metrics:
        ls, hs = [], []
        for kk in ks:
            F = metric_function(met, kk, N)
            lo_b, hi_b = cell_lp_bounds(F(best), F(worst), A_first, A_last, lo, hi)
            ls.append(lo_b)
            hs.append(hi_b)
        low[met] = np.array(ls) if seq else ls[0]
        high[met] = np.array(hs) if seq else hs[0]
    return BoundsResult(low, high, cuts, lo, hi, S, float(ci))


# ---------------------------------------------------------------------------------------------
# the data and file halves, moved out: still importable from here
# ---------------------------------------------------------------------------------------------
#: the names that moved out, and their modules: still importable from here, resolved on first use
#: by name (importlib), so that this module imports neither the data layer nor the file readers
_MOVED = {"rank_masks": "itemsampling.candidates", "draw_weighted_decoys": "itemsampling.candidates",
          "read_weighted_file": "itemsampling.inputs"}


def __getattr__(name):
    """``rank_masks`` and ``draw_weighted_decoys`` live in :mod:`itemsampling.candidates`,
    ``read_weighted_file`` in :mod:`itemsampling.inputs`; importing them from here still works."""
    if name in _MOVED:
        import importlib

        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
