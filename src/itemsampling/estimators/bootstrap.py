r"""User-bootstrap intervals for every estimator of :mod:`itemsampling.estimators`.

A global metric estimated from sampled ranks, :math:`\widehat T(r_1, \dots, r_M)`, is a statistic
of the *users* that happened to be evaluated; the user bootstrap (Efron & Tibshirani 1993,
Ch. 13) measures its sampling variability by redrawing :math:`M` users with replacement from the
:math:`M` observed ones, each user's sampled rank (and sampled-set size :math:`n_u`) travelling
together, recomputing the estimate on every replicate, and reading the percentile interval
:math:`[\widehat T^*_{(\alpha/2)}, \widehat T^*_{(1-\alpha/2)}]` off the replicates.

Two rules make the interval honest for the rank-distribution estimators (TORS Sec. 5: the
prior of BV / MN comes from the same sampled ranks it corrects):

* the prior :math:`\widehat P(R)` of ``mle`` / ``wmle`` / ``mes`` and of the combinations
  ``bv_*``, ``mn_*``, ``mnw_*`` is **re-estimated in every replicate** from that replicate's ranks
  (sharing one prior would hide most of the estimator's variance);
* the replicates are exactly what :func:`itemsampling.estimators.estimate_metric` returns on the
  resampled users (the tests check it replicate by replicate).

Speed. Every estimator depends on the users only through the table of distinct
:math:`(n_u, r_u)` pairs and their counts, so a replicate is a multinomial draw of that count
vector (one ``rng.multinomial`` call for all replicates), never a list of :math:`M` users.
Then

* for the estimators that are linear in the histogram (``sampled``, ``rank_estimate``, ``cls``,
  ``bv``, ``mn``, ``mn_weighted``: :math:`\widehat T = \frac1M\sum_r c_r \widehat F(r)`, TORS
  Eq. 6) all replicates are one matrix product :math:`C\widehat F / M`;
* for ``mle`` / ``wmle`` with the EM solver the EM iterations of Jin et al. (2021) Eq. 20-23 run
  on all replicates at once (:func:`batch_em`: a batch of count vectors against one kernel, each
  replicate stopped by the same rule as :func:`~itemsampling.estimators.distribution.mle_em`);
* ``mes`` (the dual Newton solver) and the exact CNM MLE are solved replicate by replicate
  (each takes well under a second at MovieLens-1M scale), and the BV / MN combinations solve
  their :math:`n\times n` system once per replicate with that replicate's prior.

:func:`compare_estimates` bootstraps the difference of two models' estimates: *paired* (the same
users scored by both models, resampled jointly, the design of every experiment in the book) or
unpaired (two independent user samples).

Per-user catalogue sizes (``n_items`` one :math:`N_u` per user; model in :mod:`.distribution`):
each user's :math:`(N_u, n_u, r_u)` triple travels together; the priors are re-fitted on the
replicate's :math:`(n_u, r_u)` counts (the fit is free of the pools) and the metric of every
replicate weights each pool by its resampled share.

What the module holds: the result types (:class:`MetricEstimate`, :class:`ModelComparison`,
:class:`ModelsBootstrap`), the interval and p-value (:func:`percentile_interval`,
:func:`bootstrap_p_value`), the table of distinct pairs and its resampled counts (``_pair_table``,
``_draw_counts``, ``_joint_counts``), the replicate machinery (:func:`batch_em`, also used by
:mod:`.weighted`, and ``_Replicator``, which :mod:`.conditional` reuses for its parametric
replicates) and the entry points :func:`bootstrap_metric`, :func:`bootstrap_metrics`,
:func:`compare_estimates` and :func:`bootstrap_models` (:func:`itemsampling.estimators.estimate_metric`
calls the first two for ``ci=``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from .._validation import as_rng, check_int, check_memory, check_open_unit, check_ranks
from ..metrics import metric_function
from .corrected import CORRECTION_METHODS, corrected_metrics
from .distribution import (
    PER_USER_SIZE_METHODS as _FIT_PER_USER, ConvergenceWarning, _em, check_n_items, estimate_rank_distribution,
    wmle_weights,
)
from .estimate import METHODS, _estimate, _ks, _point_metric, _point_metrics, _route, _split
from .grid import (
    _cell_metric_sums, _single_blas_thread, cached_kernel, check_sampled_ranks, grid_kernel, grid_kernel_columns,
    kernel_columns, pool_metric_matrix, resolve_grid,
)

__all__ = [
    "MetricEstimate",
    "AutoEstimate",
    "ModelComparison",
    "ModelsBootstrap",
    "bootstrap_metric",
    "bootstrap_metrics",
    "compare_estimates",
    "bootstrap_models",
    "batch_em",
    "check_confidence",
    "percentile_interval",
    "bootstrap_p_value",
]

#: Rows of one batched-EM block (the unit of work of a thread; fixed, so results never depend on it).
_EM_BLOCK = 50

#: Methods that accept per-user sample sizes (an array ``sample_size`` with unequal entries).
PER_USER_METHODS = ("sampled",) + _FIT_PER_USER  # = estimators.PER_USER_SIZE_METHODS


@dataclass(frozen=True)
class MetricEstimate:
    """An estimate with its user-bootstrap percentile interval.

    Attributes
    ----------
    estimate : float or ndarray   the estimate on all users (as ``estimate_metric(..., ci=None)``);
                                  an array over the cut-offs when ``k`` is a sequence.
    low, high : float or ndarray  the percentile interval of the bootstrap replicates.
    confidence : float            the nominal level, e.g. 0.95.
    n_boot : int                  number of bootstrap replicates.
    method : str                  the estimator.
    identified : bool or ndarray  whether the sampled ranks resolve the cut-off
                                  (:func:`itemsampling.kernel.resolves`); ``False``: the point estimate is
                                  the estimator's prior's, not the data's, and the interval is the
                                  identification bounds.
    interval : str or ndarray     the kind of interval per cut-off: ``"bounds"`` (the identification
                                  bounds of :mod:`.bounds`, below the rule), ``"bootstrap+margin"``
                                  (method ``"auto"``: widened by the simulated bias margin) or
                                  ``"bootstrap"`` (the estimator's own interval).
    """

    estimate: float | np.ndarray
    low: float | np.ndarray
    high: float | np.ndarray
    confidence: float
    n_boot: int
    method: str
    identified: object = True
    interval: object = "bootstrap"

    def __repr__(self) -> str:
        if np.ndim(self.estimate) == 0:
            if self.interval == "bounds":
                return (f"MetricEstimate({self.method}: {self.estimate:.6g} (not identified: the estimator's prior's), "
                        f"{100 * self.confidence:g}% identification bounds [{self.low:.6g}, {self.high:.6g}])")
            return (f"MetricEstimate({self.method}: {self.estimate:.6g}, {100 * self.confidence:g}% interval "
                    f"[{self.low:.6g}, {self.high:.6g}], n_boot={self.n_boot})")
        return (f"MetricEstimate(method={self.method!r}, estimate={self.estimate!r}, low={self.low!r}, "
                f"high={self.high!r}, confidence={self.confidence}, n_boot={self.n_boot}, "
                f"identified={self.identified!r}, interval={self.interval!r})")


@dataclass(frozen=True, repr=False)
class AutoEstimate(MetricEstimate):
    """The result of ``method="auto"`` (:mod:`itemsampling.estimators.auto`): a
    :class:`MetricEstimate` (``method`` is ``"auto"``; without ``ci`` ``low``/``high`` are NaN and
    ``n_boot`` 0) with, per cut-off, the ``chosen`` estimator, the bias ``margin`` by which the
    interval was widened (when ``widened``), the kind of ``interval`` it got (``"bounds"``: the
    identification bounds of :mod:`.bounds`; ``"bootstrap+margin"``; ``"bootstrap"``; ``None`` without
    ``ci``) and its ``width``, and the whole ``selection`` (candidates, each one's simulated error
    under each fit, the reasons, the interval kinds and why, what was skipped)."""

    chosen: object = None
    margin: object = 0.0
    widened: bool = False
    selection: object = None
    width: object = float("nan")

    def __repr__(self) -> str:
        return (f"AutoEstimate(chosen={self.chosen!r}, estimate={self.estimate!r}, low={self.low!r}, "
                f"high={self.high!r}, margin={self.margin!r}, widened={self.widened}, interval={self.interval!r})")


@dataclass(frozen=True)
class ModelComparison:
    """The difference A - B of two models' estimates with its bootstrap interval.

    Attributes
    ----------
    difference : float or ndarray   estimate of A minus estimate of B on all users.
    low, high : float or ndarray    percentile interval of the bootstrap replicates of the difference.
    p_value : float or ndarray      two-sided bootstrap p-value of "no difference"
                                    (:func:`bootstrap_p_value`).
    estimate_a, estimate_b          the two estimates.
    confidence, n_boot, method, paired
    """

    difference: float | np.ndarray
    low: float | np.ndarray
    high: float | np.ndarray
    p_value: float | np.ndarray
    estimate_a: float | np.ndarray
    estimate_b: float | np.ndarray
    confidence: float
    n_boot: int
    method: str
    paired: bool

    @property
    def zero_inside(self):
        """Whether 0 lies inside the interval (no significant difference at this level)."""
        out = (np.asarray(self.low) <= 0.0) & (np.asarray(self.high) >= 0.0)
        return bool(out) if out.ndim == 0 else out


# ---------------------------------------------------------------------------------------------
# small pieces
# ---------------------------------------------------------------------------------------------
def check_confidence(value, name: str = "ci") -> float:
    """A confidence level strictly between 0 and 1 (e.g. 0.95)."""
    return check_open_unit(value, name, "a confidence level", ", e.g. 0.95")


def _check_n_boot(n_boot) -> int:
    return check_int(n_boot, "n_boot", low=10)


def _check_method(method, sizes=None) -> None:
    """``method`` one of :data:`~itemsampling.estimators.METHODS`; with per-user ``sizes`` (an array),
    one of :data:`PER_USER_METHODS`."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if sizes is not None and not isinstance(sizes, int) and method not in PER_USER_METHODS:
        raise ValueError(f"per-user sample sizes are supported by methods {PER_USER_METHODS}, not by {method!r}")


def _names(value, name: str) -> list:
    """One name or a non-empty sequence of names (``metrics``, ``methods``) as a list."""
    out = [value] if isinstance(value, str) else list(value)
    if not out:
        raise ValueError(f"{name} must not be empty")
    return out


def _metric_values(metrics, ks, size: int, ranks) -> np.ndarray:
    """:math:`F(r)` of every metric and cut-off in a list of ``size`` items at the ranks ``ranks``:
    an array ``(len(metrics), len(ks), len(ranks))`` (:func:`itemsampling.metrics.metric_function`)."""
    return np.array([[metric_function(m, k, size)(ranks) for k in ks] for m in metrics])


def percentile_interval(replicates, confidence: float, axis: int = 0):
    r"""The percentile interval :math:`[\widehat T^*_{(\alpha/2)}, \widehat T^*_{(1-\alpha/2)}]`,
    :math:`\alpha = 1 - ` ``confidence`` (Efron & Tibshirani 1993, Eq. 13.5), of bootstrap
    replicates along ``axis`` (linear interpolation between order statistics)."""
    confidence = check_confidence(confidence, "confidence")
    alpha = 1.0 - confidence
    lo, hi = np.quantile(np.asarray(replicates, dtype=np.float64), [alpha / 2, 1 - alpha / 2], axis=axis)
    return lo, hi


def bootstrap_p_value(replicates, axis: int = 0):
    r"""Two-sided bootstrap p-value of :math:`H_0: \Delta = 0` from replicates :math:`\Delta^*_b`:
    the smallest :math:`\alpha` at which the :math:`(1-\alpha)` percentile interval excludes 0,
    :math:`p = \min\{1,\ 2\min(\#\{\Delta^*_b \le 0\} + 1,\ \#\{\Delta^*_b \ge 0\} + 1)/(B + 1)\}`
    (the +1 keeps :math:`p \ge 2/(B+1)`: B replicates cannot certify a smaller p-value)."""
    d = np.asarray(replicates, dtype=np.float64)
    B = d.shape[axis]
    le = np.sum(d <= 0.0, axis=axis) + 1.0
    ge = np.sum(d >= 0.0, axis=axis) + 1.0
    p = np.minimum(1.0, 2.0 * np.minimum(le, ge) / (B + 1.0))
    return float(p) if np.ndim(p) == 0 else p


def _pair_table(r: np.ndarray, sizes, pools=None):
    """Distinct ``(n_u, r_u)`` pairs, their counts and, per user, the index of its pair; with per-user
    catalogue sizes ``pools`` the distinct triples ``(N_u, n_u, r_u)`` and, fifth, each triple's pool."""
    if pools is not None:
        sz = np.full(r.size, sizes, dtype=np.int64) if isinstance(sizes, (int, np.integer)) else sizes
        a, b = int(sz.max()) + 1, int(r.max()) + 1  # one int64 key per triple, in (N_u, n_u, r_u) order
        keys, inverse, counts = np.unique((pools * a + sz) * b + r, return_inverse=True, return_counts=True)
        return keys // b % a, keys % b, counts, inverse.reshape(-1), keys // b // a
    if isinstance(sizes, (int, np.integer)):
        ranks, inverse, counts = np.unique(r, return_inverse=True, return_counts=True)
        return np.full(ranks.size, int(sizes), dtype=np.int64), ranks, counts, inverse
    rows, inverse, counts = np.unique(np.column_stack([sizes, r]), axis=0, return_inverse=True,
                                      return_counts=True)
    return rows[:, 0].copy(), rows[:, 1].copy(), counts, inverse.reshape(-1)


def _check_input(sampled_ranks, n_items, sample_size, name="sampled_ranks", size_name="sample_size"):
    """``(r, N, sizes, pools)``; ``pools`` the per-user catalogue sizes or ``None`` (``N`` the largest)."""
    r = check_ranks(sampled_ranks, name)
    pools = check_n_items(n_items, r.size)
    N, pools = (pools, None) if isinstance(pools, int) else (int(pools.max()), pools)
    r, sizes = check_sampled_ranks(r, N, sample_size, name, size_name)
    if pools is not None:
        check_n_items(pools, r.size, sizes)
    return r, N, sizes, pools


def _checked(N, r, sizes, pools):
    """``(r, N, sizes, pools)`` of data validated by :func:`_check_input`, as ``estimate._prepare``
    makes it from ``n_items = N if pools is None else pools``: equal pools are one catalogue size."""
    if pools is None:
        return r, N, sizes, None
    if np.all(pools == pools[0]):
        return r, int(pools[0]), sizes, None
    return r, int(pools.max()), sizes, pools


def _draw_counts(counts: np.ndarray, n_boot: int, rng) -> np.ndarray:
    """``n_boot`` multinomial resamplings of the pair counts: (n_boot, n_pairs) float64."""
    check_memory(16.0 * n_boot * counts.size, f"{n_boot:,} bootstrap replicates of {counts.size:,} pair counts",
                 "n_boot")
    M = int(counts.sum())
    return rng.multinomial(M, counts / M, size=n_boot).astype(np.float64)


def _sum_counts(C: np.ndarray, idx: np.ndarray, width: int) -> np.ndarray:
    """Counts per replicate summed over the columns that share an index: column ``j`` of ``C``
    (B, T) added to column ``idx[j]`` of the result (B, ``width``); exact (integer counts)."""
    from scipy import sparse

    T = idx.size
    return np.asarray((sparse.csr_matrix((np.ones(T), (idx, np.arange(T))), shape=(width, T)) @ C.T).T)


def _joint_counts(tables, n_boot: int, rng) -> list:
    """Resampled pair counts of models scored on the same users (``tables`` from :func:`_pair_table`,
    users in one common order): one multinomial draw over the distinct tuples of the models' pairs
    per replicate, split back into each model's (n_boot, n_pairs) counts. One table: its own draw."""
    if len(tables) == 1:
        return [_draw_counts(tables[0][2], n_boot, rng)]
    rows, cnt = np.unique(np.column_stack([t[3] for t in tables]), axis=0, return_counts=True)
    Ct = _draw_counts(cnt, n_boot, rng)
    return [_sum_counts(Ct, rows[:, col], t[0].size) for col, t in enumerate(tables)]


# ---------------------------------------------------------------------------------------------
# EM on a batch of count vectors
# ---------------------------------------------------------------------------------------------
def batch_em(weights, kernel_columns, tol: float = 1e-6, max_iter: int = 10_000, pi0=None):
    r"""EM for the (weighted) MLE of :math:`P(R)` on many count vectors at once.

    The update of Jin et al. (2021) Eq. 20-21 (Eq. 23 weighted),
    :math:`\pi_R \leftarrow \pi_R \sum_j \hat c_j K_{R,j}/q_j`, :math:`q = K^\top\pi`, run from the
    uniform start for each row of ``weights`` (shape (B, J), one count or weight per column of
    ``kernel_columns``, shape (N, J)), with the stopping rule of
    :func:`itemsampling.estimators.distribution.mle_em`: a replicate stops when the relative
    change of its mean log-likelihood is at most ``tol``. Column :math:`j` is the kernel column
    :math:`P(r_j \mid R, n_j)` of one distinct (sampled-set size, sampled rank) pair, so per-user
    sample sizes (TORS Eq. 43 and Appendix H, Eq. 61-62) need nothing else. Each pass is two
    (B x N x J) matrix products, shared by the replicates still running (the one EM loop,
    :func:`itemsampling.estimators.distribution._em`). ``pi0`` (length N, optional): the start of every
    replicate instead of the uniform one (on a grid of cells the uniform :math:`P` over ranks, cell
    masses :math:`|c|/N`, as the single grid fit starts).

    Returns ``(P, iterations, converged)``: P of shape (B, N), rows summing to 1.
    """
    C = np.asarray(weights, dtype=np.float64)
    K = np.asarray(kernel_columns, dtype=np.float64)
    if C.ndim != 2 or K.ndim != 2 or C.shape[1] != K.shape[1]:
        raise ValueError("weights must be (B, J) and kernel_columns (N, J)")
    tot = C.sum(axis=1, keepdims=True)
    if np.any(tot <= 0) or np.any(C < 0) or not np.all(np.isfinite(C)):
        raise ValueError("weights must be non-negative and finite with a positive total per row")
    B, N = C.shape[0], K.shape[0]
    if pi0 is None:
        start = np.full((B, N), 1.0 / N)
    else:
        p0 = np.asarray(pi0, dtype=np.float64)
        if p0.shape != (N,) or np.any(p0 < 0) or not np.isclose(p0.sum(), 1.0):
            raise ValueError(f"pi0 must be a probability vector of length {N} (the kernel's rows)")
        start = np.tile(p0, (B, 1))
    P, _, _, iters, converged = _em(C / tot, K, start, tol, max_iter)
    if not np.all(converged):
        warnings.warn(f"EM did not reach relative log-likelihood change {tol:g} in {max_iter} iterations "
                      f"for {int(np.sum(~converged))} of {B} bootstrap replicates", ConvergenceWarning,
                      stacklevel=3)
    return P, iters, converged


# ---------------------------------------------------------------------------------------------
# replicates of one method
# ---------------------------------------------------------------------------------------------
def _kernel_columns(N, pair_sizes, pair_ranks, replacement):
    """The kernel columns of the distinct pairs, exactly as the single-fit EM uses them: columns of
    the cached dense kernel for one size, :func:`~.grid.kernel_columns` for per-user sizes."""
    if np.unique(pair_sizes).size == 1:
        return np.ascontiguousarray(cached_kernel(N, int(pair_sizes[0]), bool(replacement))[:, pair_ranks - 1])
    return kernel_columns(N, pair_sizes, pair_ranks, bool(replacement))


def _grid_columns(grid, pair_sizes, pair_ranks, replacement):
    """The grid-kernel columns of the distinct pairs, exactly as the single grid fit uses them
    (``distribution._fit``): columns of the cached grid kernel for one size,
    :func:`~.grid.grid_kernel_columns` for per-user sizes."""
    if np.unique(pair_sizes).size == 1:
        return np.ascontiguousarray(grid_kernel(grid, int(pair_sizes[0]), bool(replacement))[:, pair_ranks - 1])
    return grid_kernel_columns(grid, pair_sizes, pair_ranks, bool(replacement))


def _prior_key(base, dist_kw):
    # the key under which estimators._estimate caches a learnt prior (keep in step with it)
    return (base, tuple(sorted((k, repr(v)) for k, v in dist_kw.items())))


class _Replicator:
    """Replicates of several methods on one resampled pair table, sharing the learnt priors."""

    def __init__(self, N, sizes, pair_sizes, pair_ranks, C, metrics, ks, n_jobs: int = 1, pair_pools=None):
        self.N, self.sizes = N, sizes
        self.pair_sizes, self.pair_ranks, self.C = pair_sizes, pair_ranks, C
        self.pair_pools = pair_pools
        # the fit is free of the pools (distribution module): the prior is learnt on the (n, r) pairs
        self.fit_sizes, self.fit_ranks, self.Cfit = pair_sizes, pair_ranks, C
        if pair_pools is not None:  # counts per replicate summed over the triples of a pool / of a pair
            self.pools, g = np.unique(pair_pools, return_inverse=True)
            self.pool_of = g.reshape(-1)
            self.Cpool = _sum_counts(C, self.pool_of, self.pools.size)
            rows, inv = np.unique(np.column_stack([pair_sizes, pair_ranks]), axis=0, return_inverse=True)
            self.fit_sizes, self.fit_ranks = rows[:, 0].copy(), rows[:, 1].copy()
            self.Cfit = _sum_counts(C, inv.reshape(-1), rows.shape[0])
        self.metrics, self.ks = metrics, ks
        self.M = float(C[0].sum())
        self.priors: dict = {}
        self.n_jobs = n_jobs

    def _linear(self, Fpairs):
        """All replicates of a histogram-linear estimate: (B, n_metrics, n_ks)."""
        P = Fpairs.shape[0]
        return (self.C @ Fpairs.reshape(P, -1) / self.M).reshape(self.C.shape[0], len(self.metrics), len(self.ks))

    def _ranks(self, b):
        return np.repeat(self.pair_ranks, self.C[b].astype(np.int64))

    def _sizes(self, b):
        if isinstance(self.sizes, int):
            return self.sizes
        return np.repeat(self.pair_sizes, self.C[b].astype(np.int64))

    def _pools(self, b):
        return None if self.pair_pools is None else np.repeat(self.pair_pools, self.C[b].astype(np.int64))

    def prior_matrix(self, base, dist_kw, replacement, grid=None):
        """The prior of ``base`` in every replicate: (B, N), or (B, cells) on a ``grid`` (plain MLE / WMLE
        by EM only: :meth:`grid_em_metrics`)."""
        key = _prior_key(base, dist_kw) + (() if grid is None else (grid.key(),))
        if key in self.priors:
            return self.priors[key]
        solver = dist_kw.get("solver", "em")
        if base in ("mle", "wmle") and solver == "em":
            W = self.Cfit
            if base == "wmle":
                _check_method(base, self.sizes)
                w = wmle_weights(int(self.sizes), dist_kw.get("weight", "ndcg"), dist_kw.get("C", 10.0))
                W = self.Cfit * w[self.fit_ranks - 1]
            tol = dist_kw.get("tol") if dist_kw.get("tol") is not None else 1e-6
            max_iter = dist_kw.get("max_iter") if dist_kw.get("max_iter") is not None else 10_000
            K = _kernel_columns(self.N, self.fit_sizes, self.fit_ranks, replacement) if grid is None else \
                _grid_columns(grid, self.fit_sizes, self.fit_ranks, replacement)
            pi0 = None if grid is None else grid.widths / self.N
            # each row is its own EM (stopped by its own rule): fixed blocks of rows, shared out to
            # the threads, give the same numbers whatever the number of threads
            chunks = [np.arange(i, min(i + _EM_BLOCK, W.shape[0])) for i in range(0, W.shape[0], _EM_BLOCK)]
            parts = _thread_map(lambda rows: batch_em(W[rows], K, tol=tol, max_iter=max_iter, pi0=pi0)[0], chunks,
                                self.n_jobs)
            P = np.concatenate(parts, axis=0)
        elif grid is not None:  # pragma: no cover - grid_em_metrics asks for the EM fits only
            raise ValueError("the batched replicates on a grid are EM fits of MLE / WMLE")
        else:
            def fit(b):
                return estimate_rank_distribution(self._ranks(b), self.N, self._sizes(b), base, **dist_kw)

            P = np.stack(_thread_map(fit, range(self.C.shape[0]), self.n_jobs))
        P = P / P.sum(axis=1, keepdims=True)
        self.priors[key] = P
        return P

    def corrected(self, method, corr):
        r"""The corrected metric vectors :math:`\widehat F(r)` of a correction method (TORS Eq. 6;
        :func:`~.corrected.corrected_metrics` with options ``corr``, MN's :math:`M` the replicate's
        number of users): (n, n_metrics, n_ks), or (n, n_metrics, n_ks, G) over the distinct pools."""
        kw = dict(corr)
        if method in ("mn", "mn_weighted") and kw.get("n_users") is None:
            kw["n_users"] = int(self.M)
        if self.pair_pools is None:
            return corrected_metrics(list(self.metrics), self.ks, self.N, self.sizes, method, **kw)
        return corrected_metrics(list(self.metrics), self.ks, self.N, self.sizes, method, pools=self.pools, **kw)

    def prior(self, base, dist, replacement):
        """``(key, P)``: the prior of rank-distribution method ``base`` in every replicate
        (:meth:`prior_matrix`) and the key under which ``estimators._estimate`` looks it up."""
        dist_kw = dict(dist)
        if replacement is not True:
            dist_kw["replacement"] = replacement
        rd_kw = {k: v for k, v in dist_kw.items() if k != "replacement"}
        return _prior_key(base, dist_kw), self.prior_matrix(base, rd_kw, replacement)

    def each(self, method, params, key=None, priors=None):
        """The estimator itself (``estimators._estimate``) on every replicate's users; ``priors``
        (one row per replicate, cached under ``key``) the learnt prior each replicate reuses."""
        out = np.empty((self.C.shape[0], len(self.metrics), len(self.ks)))
        for b in range(self.C.shape[0]):
            out[b] = _estimate(self._ranks(b), self.N, self._sizes(b), self.metrics, self.ks, method, params,
                               {} if priors is None else {key: priors[b]}, self._pools(b))
        return out

    def grid_em_metrics(self, base, dist, replacement, grid):
        r"""Every replicate of plain MLE / WMLE (EM) on the cells of ``grid``: the cell masses of all
        replicates by one batched EM on the grid kernel's columns of the observed pairs (from the
        uniform :math:`P`, cell masses :math:`|c|/N`, as the single grid fit), the metric of each read off
        its cell masses (:func:`~.grid.grid_metric`: :math:`\sum_c w_c\frac1{|c|}\sum_{R\in c}F(R)`).
        The same fits as the estimator on each replicate (``each``) to rounding: one EM pass is the
        same arithmetic on the observed columns (the unobserved ones carry no weight), and each
        replicate stops by its own rule; instead of one fit per replicate."""
        dist_kw = dict(dist)
        if replacement is not True:
            dist_kw["replacement"] = replacement
        rd_kw = {k: v for k, v in dist_kw.items() if k != "replacement"}
        P = self.prior_matrix(base, rd_kw, replacement, grid=grid)  # (B, cells)
        widths = grid.widths.astype(np.float64)
        F = np.stack([np.stack([_cell_metric_sums(grid, m, k) / widths for k in self.ks], axis=-1)
                      for m in self.metrics], axis=1)  # (cells, n_metrics, n_ks)
        return (P @ F.reshape(grid.n_cells, -1)).reshape(-1, len(self.metrics), len(self.ks))

    def replicates(self, method, params):
        N, metrics, ks = self.N, self.metrics, self.ks
        corr, dist = _split(params)
        grid = corr.pop("grid", None)
        replacement = corr.get("replacement", True)
        if method == "sampled":
            F = np.empty((self.pair_ranks.size, len(metrics), len(ks)))
            for size in np.unique(self.pair_sizes):
                sel = np.flatnonzero(self.pair_sizes == size)
                F[sel] = np.moveaxis(_metric_values(metrics, ks, int(size), self.pair_ranks[sel]), -1, 0)
            return self._linear(F)
        if method != "rank_estimate" and _grid_in_use(grid, N, self.sizes, ks):
            if method in ("mle", "wmle") and dist.get("solver", "em") == "em" and self.pair_pools is None:
                return self.grid_em_metrics(method, dist, replacement, resolve_grid(grid, N, self.sizes, ks))
            return self.each(method, params)  # catalogue scale (estimators.grid): the estimator itself
        _check_method(method, self.sizes)
        if method in CORRECTION_METHODS:
            Fh = self.corrected(method, corr)
            return self._linear(Fh[self.pair_ranks - 1] if self.pair_pools is None
                                else Fh[self.pair_ranks - 1, :, :, self.pool_of])
        base = method.split("_")[-1]
        key, Pmat = self.prior(base, dist, replacement)
        if method == base and self.pair_pools is not None:  # sum_g (M_g / M) P @ F(R_g(R)) per replicate
            A = (Pmat @ pool_metric_matrix(metrics, ks, N, self.pools).reshape(N, -1)).reshape(
                -1, len(metrics), len(ks), self.pools.size)
            return np.einsum("bmkg,bg->bmk", A, self.Cpool) / self.M
        if method == base:
            F = np.moveaxis(_metric_values(metrics, ks, N, np.arange(1, N + 1)), -1, 0)
            return (Pmat @ F.reshape(N, -1)).reshape(-1, len(metrics), len(ks))
        return self.each(method, params, key, Pmat)


def _thread_map(fn, items, n_jobs: int) -> list:
    """``[fn(x) for x in items]``, on ``n_jobs`` threads when ``n_jobs > 1`` (the solvers spend
    their time in NumPy/BLAS calls that release the GIL). BLAS is held to one thread per worker for
    the whole map (its limit is process-wide, so it is set once here, not inside the workers):
    the products are memory-bound and threads only contend on shared cores. The result does not
    depend on ``n_jobs``: each item is computed exactly as in the serial loop."""
    items = list(items)
    with _single_blas_thread():
        if n_jobs <= 1 or len(items) <= 1:
            return [fn(x) for x in items]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(n_jobs, len(items))) as pool:
            return list(pool.map(fn, items))


def _check_n_jobs(n_jobs) -> int:
    """``None`` = the usable cores (at most 2 threads per core are never useful here), else an int >= 1."""
    if n_jobs is None:
        import os

        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # pragma: no cover - not on Linux
            return max(1, os.cpu_count() or 1)
    return check_int(n_jobs, "n_jobs", low=1)


def _grid_in_use(grid, N, n, ks) -> bool:
    return resolve_grid(grid, N, n, ks) is not None


def _metric_estimate(est, lo, hi, confidence, n_boot, method, seq) -> MetricEstimate:
    """A :class:`MetricEstimate` over the cut-offs (``seq``) or, for one cut-off, of plain floats."""
    est = np.atleast_1d(np.asarray(est, dtype=np.float64))
    if seq:
        return MetricEstimate(est, lo, hi, confidence, n_boot, method)
    return MetricEstimate(float(est[0]), float(lo[0]), float(hi[0]), confidence, n_boot, method)


def _finish(est, reps, confidence, n_boot, method, seq) -> MetricEstimate:
    """The estimate with the percentile interval of its replicates (n_boot, n_ks)."""
    return _metric_estimate(est, *percentile_interval(reps, confidence, axis=0), confidence, n_boot, method, seq)


def _comparison(reps_a, reps_b, est_a, est_b, confidence, n_boot, method, paired, seq) -> ModelComparison:
    """The :class:`ModelComparison` of two models from their replicates (n_boot, n_ks): the difference
    of the estimates, the percentile interval and bootstrap p-value of the replicates' difference."""
    d = reps_a - reps_b
    lo, hi = percentile_interval(d, confidence, axis=0)
    p = bootstrap_p_value(d, axis=0)
    ea, eb = (np.atleast_1d(np.asarray(e, dtype=np.float64)) for e in (est_a, est_b))
    diff = ea - eb
    if seq:
        return ModelComparison(diff, lo, hi, np.asarray(p), ea, eb, confidence, n_boot, method, paired)
    return ModelComparison(float(diff[0]), float(lo[0]), float(hi[0]), float(p[0]), float(ea[0]), float(eb[0]),
                           confidence, n_boot, method, paired)


# ---------------------------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------------------------
def bootstrap_metric(sampled_ranks, n_items, sample_size, metric, k, method, ci: float = 0.95,
                     n_boot: int = 200, rng=None, **params) -> MetricEstimate:
    r"""The estimate of :func:`itemsampling.estimators.estimate_metric` with a user-bootstrap
    percentile interval (module docstring).

    Parameters are those of :func:`~itemsampling.estimators.estimate_metric` plus ``ci`` (the
    confidence level in (0, 1)), ``n_boot`` (number of replicates, >= 10) and ``rng`` (seed or
    Generator: the same seed gives the same interval). ``sample_size`` may be one size per user
    for the methods that take per-user sizes (``"sampled"``, ``"mle"``); each user's
    :math:`(n_u, r_u)` pair is resampled together. ``n_items`` may be one catalogue size per user
    (module docstring; :data:`~itemsampling.estimators.POOL_METHODS`), resampled with the user; the
    same holds for :func:`compare_estimates` and :func:`bootstrap_models`.

    Returns
    -------
    MetricEstimate, with array fields when ``k`` is a sequence.
    """
    out = bootstrap_metrics(sampled_ranks, n_items, sample_size, [metric], k, [method], ci=ci,
                            n_boot=n_boot, rng=rng, _single=True, **params)
    return out[method][metric]


def bootstrap_metrics(sampled_ranks, n_items, sample_size, metrics, k, methods, ci: float = 0.95,
                      n_boot: int = 200, rng=None, _single: bool = False, **params) -> dict:
    r"""As :func:`itemsampling.estimators.estimate_metrics` (``{method: {metric: ...}}``), each
    value a :class:`MetricEstimate`. All methods see the *same* bootstrap replicates, and a prior
    learnt in a replicate is shared by every method and metric that uses it in that replicate."""
    ci = check_confidence(ci, "ci")
    n_boot = _check_n_boot(n_boot)
    gen = as_rng(rng)
    r, N, sizes, pools = _check_input(sampled_ranks, n_items, sample_size)
    metrics_l, methods_l = _names(metrics, "metrics"), _names(methods, "methods")
    for m in methods_l:
        _check_method(m, sizes)
    seq, ks = _ks(k)
    # the point estimate on all users (also validates every parameter)
    N_arg = N if pools is None else pools
    if _single:
        est = {methods_l[0]: {metrics_l[0]: _point_metric(r, N_arg, sizes, metrics_l[0], k, methods_l[0], params,
                                                           checked=(r, N, sizes, pools))}}
    else:
        est = _point_metrics(r, N_arg, sizes, metrics_l, k, methods_l, params, checked=(r, N, sizes, pools))
    pair_sizes, pair_ranks, counts, _, *pp = _pair_table(r, sizes, pools)
    rep = _Replicator(N, sizes, pair_sizes, pair_ranks, _draw_counts(counts, n_boot, gen), metrics_l, ks,
                      _check_n_jobs(None), *pp)
    out: dict = {}
    for meth in methods_l:
        p = params if _single else _route(meth, params)
        reps = rep.replicates(meth, p)
        out[meth] = {m: _finish(est[meth][m], reps[:, i, :], ci, n_boot, meth, seq)
                     for i, m in enumerate(metrics_l)}
    return out


def compare_estimates(sampled_ranks_a, sampled_ranks_b, n_items, sample_size, metric, k, method,
                      ci: float = 0.95, n_boot: int = 200, rng=None, paired: bool = True,
                      sample_size_b=None, **params) -> ModelComparison:
    r"""Bootstrap the difference :math:`\widehat T_A - \widehat T_B` of two models' estimates.

    ``paired=True`` (the usual design: both models ranked for the *same* users, entry ``u`` of
    both arrays is user ``u``): users are resampled jointly, so the interval accounts for the
    positive correlation of the two models' per-user results and is narrower than the unpaired
    one. ``paired=False``: two independent user samples, resampled independently (they may differ
    in size). ``sample_size`` applies to both models unless ``sample_size_b`` gives model B's
    (needed for adaptive sampling, where :math:`n_u` depends on the model). Each replicate
    re-estimates each model's prior from that model's resampled ranks.

    Returns a :class:`ModelComparison`: the difference, its percentile interval, the two-sided
    bootstrap p-value (:func:`bootstrap_p_value`) and whether 0 lies inside the interval.
    """
    ci = check_confidence(ci, "ci")
    n_boot = _check_n_boot(n_boot)
    if not isinstance(paired, (bool, np.bool_)):
        raise ValueError(f"paired must be True or False, got {paired!r}")
    _check_method(method)
    gen = as_rng(rng)
    ra, N, sa, pa = _check_input(sampled_ranks_a, n_items, sample_size, "sampled_ranks_a")
    rb, Nb, sb, pb = _check_input(sampled_ranks_b, n_items, sample_size if sample_size_b is None else sample_size_b,
                                 "sampled_ranks_b", "sample_size" if sample_size_b is None else "sample_size_b")
    if paired and ra.size != rb.size:
        raise ValueError(f"paired comparison needs one rank per user for both models: sampled_ranks_a has "
                         f"{ra.size} users, sampled_ranks_b has {rb.size} (use paired=False for "
                         "independent user samples)")
    for s in (sa, sb):
        _check_method(method, s)
    seq, ks = _ks(k)
    est_a = _point_metric(ra, N if pa is None else pa, sa, metric, k, method, params, checked=(ra, N, sa, pa))
    est_b = _point_metric(rb, N if pb is None else pb, sb, metric, k, method, params, checked=(rb, Nb, sb, pb))
    tables = [_pair_table(ra, sa, pa), _pair_table(rb, sb, pb)]
    counts = _joint_counts(tables, n_boot, gen) if paired else [C for t in tables for C in _joint_counts([t], n_boot, gen)]
    jobs = _check_n_jobs(None)
    reps_a, reps_b = (_Replicator(N, s, t[0], t[1], C, [metric], ks, jobs, *t[4:]).replicates(method, params)[:, 0, :]
                      for s, t, C in zip((sa, sb), tables, counts))
    return _comparison(reps_a, reps_b, est_a, est_b, ci, n_boot, method, bool(paired), seq)


@dataclass(frozen=True)
class ModelsBootstrap:
    """Estimates with intervals for several models and the comparison of every pair, all read off
    one set of bootstrap replicates per model (:func:`bootstrap_models`).

    Attributes
    ----------
    estimates : dict
        ``{model: {metric: MetricEstimate}}``.
    comparisons : dict
        ``{(model_a, model_b): {metric: ModelComparison}}`` for every pair a before b in the input
        order.
    groups : list
        The groups of models resampled jointly (scored on the same users), in order.
    replicates : dict
        ``{model: array (n_boot, n_metrics, n_cutoffs)}``, the bootstrap replicates (metrics in the
        order asked for); a comparison's replicates are the difference of its two models' arrays.
    """

    estimates: dict
    comparisons: dict
    groups: list
    replicates: dict


def _per_model(value, models, name: str) -> dict:
    """``{model: value}``: a dict must hold every model, any other value serves them all."""
    if not isinstance(value, dict):
        return {m: value for m in models}
    missing = [m for m in models if m not in value]
    if missing:
        raise ValueError(f"{name} has no entry for model(s) {missing}")
    return dict(value)


def _user_groups(models, n_users, users, paired):
    """Groups of models whose users are the same (resampled jointly), with, per model, the index
    array putting its users in the group's common order."""
    if paired is not None and not isinstance(paired, (bool, np.bool_)):
        raise ValueError(f"paired must be True, False or None, got {paired!r}")
    if paired is False:
        return [[m] for m in models], {m: None for m in models}
    if users is None:
        if paired:
            sizes = {m: n_users[m] for m in models}
            if len(set(sizes.values())) > 1:
                raise ValueError(f"paired comparison needs one rank per user for every model, got user counts "
                                 f"{sizes} (use paired=False for independent user samples)")
            return [list(models)], {m: None for m in models}
        return [[m] for m in models], {m: None for m in models}
    users = _per_model(users if isinstance(users, dict) else {}, models, "users")
    groups: list = []
    keys: list = []
    order: dict = {}
    for m in models:
        u = users[m]
        if u is None:
            groups.append([m])
            keys.append(None)
            order[m] = None
            continue
        u = np.asarray(u)
        if u.shape != (n_users[m],):
            raise ValueError(f"users[{m!r}] must hold one id per sampled rank ({n_users[m]}), got shape {u.shape}")
        idx = np.argsort(u, kind="stable")
        su = u[idx]
        if su.size > 1 and np.any(su[1:] == su[:-1]):
            raise ValueError(f"users[{m!r}] lists a user more than once")
        for g, key in enumerate(keys):
            if key is not None and key.size == su.size and np.array_equal(key, su):
                groups[g].append(m)
                break
        else:
            groups.append([m])
            keys.append(su)
        order[m] = idx
    if paired:
        split = [g for g in groups if len(g) < len(models)]
        if split:
            raise ValueError("paired=True needs every model scored on the same users; the user ids differ "
                             f"(groups {groups})")
    return groups, order


def bootstrap_models(ranks, n_items, sample_size, metrics, k, method, ci: float = 0.95, n_boot: int = 200,
                     rng=None, users=None, paired=None, n_jobs=None, progress=None, **params) -> ModelsBootstrap:
    r"""Every model's estimate with its interval and every pair's difference with its interval,
    from **one** set of user-bootstrap replicates per model.

    Parameters
    ----------
    ranks : dict
        ``{model: sampled ranks}``, one array per model (input order is kept).
    n_items : int, array or dict
        Catalogue size :math:`N`, one size :math:`N_u` per user (per-user catalogue sizes, the model
        of :mod:`.distribution`), or ``{model: int or per-user array}``.
    sample_size : int, array or dict
        One size for every model and user, or ``{model: int or per-user array}``.
    metrics, k, method, ci, n_boot, **params
        As :func:`bootstrap_metrics` (one method).
    rng : seed or Generator
        The same seed gives the same answer (for any ``n_jobs``).
    users : dict, optional
        ``{model: user ids}``. Models scored on the same set of users form a group: the group's
        users are resampled *jointly* (one multinomial draw of the users per replicate serves every
        model of the group and every paired comparison inside it, the design of
        :func:`compare_estimates` with ``paired=True``); models of different groups are resampled
        independently and compared unpaired.
    paired : bool or None
        ``None`` (default): pair by ``users`` (no ``users``: unpaired). ``True``: every model must
        be scored on the same users (entry ``u`` of every array is user ``u`` when ``users`` is
        not given). ``False``: every model resampled independently.
    n_jobs : int or None
        Threads for the per-replicate fits (``None`` = the usable cores).
    progress : callable, optional
        Called with one line of text before each model's replicates (the command's progress lines).

    Returns
    -------
    ModelsBootstrap
        Every model's estimates with their intervals and every pair's difference.

    Notes
    -----
    What is shared. Within a group one replicate is one multinomial draw over the distinct tuples
    of the models' ``(n_u, r_u)`` pairs; each model's replicate is then computed once for all
    metrics and cut-offs, its prior (MLE / WMLE / MES) re-estimated once per replicate (as TORS
    Sec. 5 fits it, from the same sampled ranks) and reused by every metric, cut-off and
    comparison. A comparison's replicates are the difference of its two models' replicates — exactly the statistic
    :func:`compare_estimates` bootstraps, without refitting either model. Point estimates are
    those of :func:`~itemsampling.estimators.estimate_metrics` (identical to today's).
    """
    ci = check_confidence(ci, "ci")
    n_boot = _check_n_boot(n_boot)
    n_jobs = _check_n_jobs(n_jobs)
    _check_method(method)
    if not isinstance(ranks, dict) or not ranks:
        raise ValueError("ranks must be a non-empty dict {model: sampled ranks}")
    models = list(ranks)
    metrics_l = _names(metrics, "metrics")
    size_of = _per_model(sample_size, models, "sample_size")
    gen = as_rng(rng)
    items_of = _per_model(n_items, models, "n_items")
    data, Ns = {}, []
    for m in models:
        r, Nm, s, pools = _check_input(ranks[m], items_of[m], size_of[m], f"ranks[{m!r}]", "sample_size")
        _check_method(method, s)
        data[m] = (r, s, pools)
        Ns.append(Nm)
    N = max(Ns)  # the common grid of rank fractions: the largest catalogue (pool) of any model
    seq, ks = _ks(k)
    groups, order = _user_groups(models, {m: data[m][0].size for m in models}, users, paired)
    for m, Nm in zip(models, Ns):
        r, s, pools = data[m]
        if pools is None and len(set(Ns)) > 1:  # every model's users on that grid, each in its own catalogue
            pools = np.full(r.size, Nm, dtype=np.int64)
        if order[m] is not None:  # put every group's users in one common order
            o = order[m]
            r, s, pools = r[o], s if isinstance(s, int) else s[o], None if pools is None else pools[o]
        data[m] = (r, s, pools)
    est = {m: _point_metrics(data[m][0], N if data[m][2] is None else data[m][2], data[m][1], metrics_l, k,
                             [method], params, checked=_checked(N, *data[m]))[method] for m in models}
    reps: dict = {}
    for group in groups:
        tables = [_pair_table(*data[m]) for m in group]
        for m, (ps, pr, _, _, *pp), C in zip(group, tables, _joint_counts(tables, n_boot, gen)):
            if progress is not None:
                progress(f"[{models.index(m) + 1}/{len(models)}] {m}: {data[m][0].size:,} users, {method} with a "
                         f"{n_boot}-replicate user bootstrap" + (f" (resampled jointly with {len(group) - 1} other "
                                                                  "model(s) on the same users)" if len(group) > 1 else "")
                         + " ...")
            reps[m] = _Replicator(N, data[m][1], ps, pr, C, metrics_l, ks, n_jobs, *pp).replicates(method, params)
    estimates = {m: {metric: _finish(est[m][metric], reps[m][:, i, :], ci, n_boot, method, seq)
                     for i, metric in enumerate(metrics_l)} for m in models}
    group_of = {m: g for g, members in enumerate(groups) for m in members}
    comparisons: dict = {}
    for ia, a in enumerate(models):
        for b in models[ia + 1:]:
            same = group_of[a] == group_of[b] and len(groups[group_of[a]]) > 1
            comparisons[(a, b)] = {metric: _comparison(reps[a][:, i, :], reps[b][:, i, :], est[a][metric],
                                                       est[b][metric], ci, n_boot, method, same, seq)
                                   for i, metric in enumerate(metrics_l)}
    return ModelsBootstrap(estimates, comparisons, groups, reps)
