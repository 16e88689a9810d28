r"""Corrected metric functions :math:`\widehat F(r)`, :math:`r = 1..n`.

A sampled evaluation observes, for each of :math:`M` users, the rank :math:`r_u \in 1..n` of the
held-out item among :math:`n` sampled items. A *corrected metric* is a vector
:math:`\widehat F \in \mathbb R^n` applied to the sampled ranks instead of the metric itself
(Krichene & Rendle 2020, Sec. 5; TORS Eq. 6):

.. math:: \widehat T = \frac1M \sum_u \widehat F(r_u) = \sum_{r=1}^n \tilde P(r)\,\widehat F(r)
          \;\approx\; T = \frac1M \sum_u F(R_u).

What this module holds: every corrected metric, each written once. BV, MN and MNW share one
assembly of their normal equations (``_system``) and one solve (``_solve_system``: Jacobi-scaled
Cholesky, dense or banded, with one refusal rule); their kernel products come from the row blocks of
:mod:`.grid` (``_banded_kernel``, ``_block_products``) over the global ranks or over the cells of a
:class:`~itemsampling.estimators.grid.RankGrid` (``_corrected`` serves both; on cells the prior holds
cell masses and the targets are cell means). CLS, BV with :math:`\gamma = 0` and the rank estimate
exist on the global ranks only.

Notation (the book's, see its notation page): :math:`N` items, sampled set of :math:`n` items *including* the target
(:math:`n-1` decoys; Krichene & Rendle's :math:`m` is our :math:`n-1` and their :math:`n` our
:math:`N`); kernel :math:`K_{R,r} = P(r \mid R)` from :mod:`itemsampling.kernel`; prior
:math:`p(R)`, uniform :math:`1/N` unless given.

Methods (all return a length-:math:`n` float64 vector):

``"rank_estimate"`` (Krichene & Rendle Eq. 20)
    :math:`\widehat F(r) = F\bigl(\lfloor 1 + (N-1)(r-1)/(n-1) \rfloor\bigr)`: the metric applied
    to the unbiased estimate of the global rank, :math:`\mathbb E[r-1 \mid R] = (n-1)(R-1)/(N-1)`
    (true with and without replacement), floored as in their experiments.

``"cls"`` (Krichene & Rendle Eq. 21-23 with the order constraint of their Sec. 5.2 and 6.3)
    :math:`\min_x \sum_R p(R)\bigl(\sum_r P(r\mid R) x_r - F(R)\bigr)^2` subject to
    :math:`x_1 \ge x_2 \ge \dots \ge x_n`. (Sec. 5.2 prints the inequality reversed,
    :math:`\hat M_{r+1} \ge \hat M_r`, a misprint: its text asks for a non-increasing vector, and
    Sec. 6.3 writes :math:`\hat M_r \ge \hat M_{r+1}`.) Solved exactly as a bounded least-squares problem on
    the reparametrisation :math:`x_r = \sum_{j \ge r} z_j` with :math:`z_j \ge 0` for
    :math:`j < n` and :math:`z_n` free (``scipy.optimize.lsq_linear``, method ``"bvls"``, an
    active-set method that terminates at the exact optimum). In these coordinates the design
    matrix is :math:`\sqrt{p(R)}\,\Pr(r \le j \mid R)`, the kernel CDF.

``"bv"`` (Krichene & Rendle Eq. 24-26; TORS Eq. 8-10)
    (TORS Eq. 8 squares the whole objective, a misprint: Krichene & Rendle Eq. 24 is the form used.)
    :math:`\min_x \sum_R p(R)\bigl[(\mathbb E[x_r\mid R] - F(R))^2 + \gamma\,\mathrm{Var}[x_r\mid R]\bigr]`,
    whose normal equations are

    .. math::
        \begin{aligned}
        &\bigl((1-\gamma) A^\top A + \gamma\,\mathrm{diag}(c)\bigr)\,x = A^\top b,\\
        &A_{R,r} = \sqrt{p(R)}P(r\mid R),\ b_R = \sqrt{p(R)}F(R),\ c_r = \sum_R p(R)P(r\mid R).
        \end{aligned}

    :math:`\gamma = 1` gives the posterior mean :math:`x_r = \sum_R p(R\mid r) F(R)` (Eq. 26);
    :math:`\gamma = 0` the minimal-bias least squares of Eq. 21-22 without the order constraint.

``"mn"`` (TORS Sec. 5, Eq. 39-42, as published: the variance term of Eq. 39 unweighted over :math:`R`)
    :math:`\min_x \sum_R p(R)(\mathbb E[x_r\mid R] - F(R))^2 + \frac1M\sum_R \mathrm{Var}[x_r\mid R]`,
    i.e. :math:`x = (K^\top D K - \frac1M K^\top K + \frac1M\Lambda_1)^{-1} K^\top D F` with the
    *unweighted* kernel :math:`K`, :math:`D = \mathrm{diag}(p)` and
    :math:`\Lambda_1 = \mathrm{diag}(\sum_R P(r\mid R))`. The variance term is summed over
    :math:`R` without the weight :math:`p(R)`: that is how TORS prints it (it comes from their
    Jensen bound). With a uniform prior and :math:`N \le M` it equals BV with :math:`\gamma = N/M`.

``"mn_weighted"`` (our exactly-weighted variant of TORS Eq. 38)
    The exact variance of :math:`\widehat T` over the decoy draws is
    :math:`\frac1M\sum_R p(R)\,\mathrm{Var}[x_r\mid R]`. Replacing TORS's unweighted variance term
    by it gives exactly the BV objective with :math:`\gamma = 1/M`, which is how it is computed.

Numerics: every system is solved in float64. The :math:`n\times n` matrices
:math:`K^\top W K` are accumulated over blocks of 256 consecutive global ranks, each restricted to
the band of sampled ranks where the block's kernel rows are non-negligible (never an
:math:`N\times N` matrix; see :func:`_banded_kernel`), skipping blocks of zero weight; the banded
kernel and the prior-free pieces :math:`K^\top K` and :math:`\Lambda_1` are cached per
:math:`(N, n)`.
Symmetric positive definite systems (BV with :math:`\gamma > 0`, MN) are solved by a Cholesky
factorisation after symmetric diagonal (Jacobi) scaling; a system whose scaled reciprocal
condition number is below ``1e3 * n * eps`` is refused with a ``ValueError`` rather than solved
into noise. BV with :math:`\gamma = 0` is a least-squares problem and is solved by SVD
(``scipy.linalg.lstsq``) *under the same rule*: its normal matrix :math:`A^\top A` is the
:math:`\gamma \to 0` limit of the BV matrix, so the column-scaled :math:`A` must satisfy
:math:`(\sigma_{\min}/\sigma_{\max})^2 > 10^3\,n\,\varepsilon` (the 2-norm reciprocal
condition number of the scaled :math:`A^\top A`), and a sampled rank with :math:`c_r = 0` is
refused too. So one rule decides across :math:`\gamma \in [0, 1]`: where :math:`\gamma = 10^{-12}` is
refused as numerically singular, :math:`\gamma = 0` is refused as well instead of returning a
minimum-norm solution with entries of size :math:`10^{10}` (it is singular for :math:`n` beyond a
few dozen with a uniform prior); use :math:`\gamma > 0` large enough, or CLS, there.
"""

from __future__ import annotations

import contextlib
import functools
import numbers

import numpy as np
from scipy import linalg
from scipy.linalg import lapack
from scipy.optimize import lsq_linear

from .._validation import as_float_array, check_bool, check_int, check_memory, check_probability_vector, check_ranks, check_sizes
from ..kernel import kernel, kernel_cdf
from ..metrics import canonical_metric, metric_function
from .grid import (
    RankGrid, _BAND_BLOCK, _BANDED_MIN_N, _banded_kernel, _blas_threads, _block_products, _cell_metric_sums,
    _grid_blocks_key, _gram_band_rows, _make_grid, _range_sums, _row_bands, _single_blas_thread, grid_kernel,
    pool_metric_matrix,
)

__all__ = [
    "CORRECTION_METHODS",
    "grid_corrected_metrics",
    "corrected_metric",
    "corrected_metrics",
    "corrected_estimate",
    "corrected_moments",
    "expected_corrected_given_rank",
    "mse_decomposition",
    "check_gamma",
    "rank_estimate",
]

#: Methods accepted by :func:`corrected_metric`.
CORRECTION_METHODS = ("rank_estimate", "cls", "bv", "mn", "mn_weighted")

_RCOND_FACTOR = 1e3


# ---------------------------------------------------------------------------------------------
# validation helpers
# ---------------------------------------------------------------------------------------------
def check_gamma(gamma) -> float:
    """Return ``gamma`` as a float in [0, 1] or raise ``ValueError``."""
    if gamma is None or isinstance(gamma, bool) or not isinstance(gamma, (numbers.Real, np.floating, np.integer)):
        raise ValueError(f"gamma must be a number in [0, 1], got {gamma!r}")
    g = float(gamma)
    if not np.isfinite(g) or g < 0.0 or g > 1.0:
        raise ValueError(f"gamma must lie in [0, 1], got {gamma!r}")
    return g


def _check_prior(prior, n_items: int) -> np.ndarray:
    if prior is None:
        return np.full(n_items, 1.0 / n_items)
    p = check_probability_vector(prior, "prior", length=n_items)
    return p / p.sum()


def _metric_matrix(metric: str, ks, n_items: int) -> tuple[np.ndarray, list]:
    """F(R) for R = 1..N, one column per cut-off in ``ks`` (``None`` = untruncated)."""
    R = np.arange(1, n_items + 1)
    cols = []
    for k in ks:
        if k is not None:
            k = check_int(k, "k", low=1)
        cols.append(metric_function(metric, k, n_items)(R))
    return np.column_stack(cols), list(ks)


# ---------------------------------------------------------------------------------------------
# kernel products over row blocks, on global ranks or cells
# ---------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def _prior_free(n_items: int, sample_size: int, replacement: bool, lo_bytes=None):
    r"""Cached prior-free products: :math:`\sum m\,K K^\top` (n x n) and the column sums
    :math:`\Lambda_1 = \sum m\,K` (n), with multiplicity :math:`m = 1` per global rank, or
    :math:`m = |c|` per cell of the grid whose first ranks are ``lo_bytes`` (:func:`.grid._banded_kernel`)."""
    m = np.ones(n_items) if lo_bytes is None else \
        _make_grid(n_items, np.frombuffer(lo_bytes, dtype=np.int64)).widths.astype(np.float64)
    gram, _, colsum = _weighted_products(n_items, sample_size, replacement, m, None, lo_bytes)
    gram.flags.writeable = False
    colsum.flags.writeable = False
    return gram, colsum


def _weighted_products(n_items, sample_size, replacement, weights, Fmat, lo_bytes=None, gram=True):
    r"""Return :math:`K^\top W K`, :math:`K^\top W F` (or ``None``) and :math:`K^\top w` for
    ``W = diag(weights)`` over the global ranks, or over the cells of the grid whose first ranks are
    ``lo_bytes`` (:func:`.grid._block_products` on the row blocks of :func:`.grid._banded_kernel`)."""
    with _blas_threads(n_items, sample_size):
        return _block_products(_banded_kernel(n_items, sample_size, replacement, lo_bytes), sample_size, weights,
                               Fmat, gram)


@functools.lru_cache(maxsize=4)
def _prior_products(n_items: int, sample_size: int, replacement: bool, lo_bytes, p_bytes: bytes):
    r"""``(K^T W K, K^T w)`` of :func:`_weighted_products` for the weights whose float64 bytes are
    ``p_bytes`` (a learnt prior), cached on them and on every other input: BV and MN with the same
    prior (BV_MLE and MN_MLE, BV_MES and MN_MES of one sample) share one computation, the same
    arithmetic (read-only results)."""
    p = np.frombuffer(p_bytes, dtype=np.float64)
    KtDK, _, c = _weighted_products(n_items, sample_size, replacement, p, None, lo_bytes)
    KtDK.flags.writeable = False
    c.flags.writeable = False
    return KtDK, c


@functools.lru_cache(maxsize=4)
def _prior_rhs(names: tuple, ks: tuple, n_items: int, sample_size: int, replacement: bool, lo_bytes,
               p_bytes: bytes) -> np.ndarray:
    r""":math:`K^\top W F` of :meth:`_Targets.kernel_rhs` for the metrics ``names`` at the cut-offs
    ``ks`` on the rows (ranks, or the cells starting at ``lo_bytes``), with the weights whose float64
    bytes are ``p_bytes``; cached on every input, as :func:`_prior_products` (read-only)."""
    grid = None if lo_bytes is None else _make_grid(n_items, np.frombuffer(lo_bytes, dtype=np.int64))
    out = _Targets(list(names), list(ks), n_items, grid).kernel_rhs(n_items, sample_size, replacement,
                                                                    np.frombuffer(p_bytes, dtype=np.float64))
    out.flags.writeable = False
    return out


_CHECKED_PAIRS: set = set()  # (metrics, cut-offs, N) found valid by _check_pairs, with the types of the cut-offs


def _check_pairs(names, ks, n_items) -> None:
    """Validate every (metric, cut-off) pair (k >= 1 or None, the metric / k combination), as
    :func:`~itemsampling.metrics.metric_function` does; a combination found valid once is not checked
    again (keyed on the names, the cut-offs with their types, and N): the experiments' repeats ask for
    the same 50 cut-offs thousands of times."""
    try:
        key = (tuple(names), tuple((type(k), k) for k in ks), n_items)
        hash(key)
    except TypeError:  # an unhashable cut-off: checked (and refused) below, never remembered
        key = None
    if key is not None and key in _CHECKED_PAIRS:
        return
    for name in names:
        for k in ks:
            metric_function(name, None if k is None else check_int(k, "k", low=1), n_items)
    if key is not None:
        if len(_CHECKED_PAIRS) > 1024:
            _CHECKED_PAIRS.clear()
        _CHECKED_PAIRS.add(key)


class _Targets:
    r"""The target metric vectors F(R), one per (metric, cut-off) pair, built lazily, over the global
    ranks or (``grid``, a :class:`~itemsampling.estimators.grid.RankGrid` with cells wider than one
    rank) over its cells, as cell means :math:`\bar F_c = \frac1{|c|}\sum_{R\in c}F(R)`.

    ``matrix()`` is the dense ``(N, J)`` array (needed by CLS and the gamma = 0 least squares);
    ``kernel_rhs(weights)`` is :math:`K^\top W F` without forming it: a cut-off metric is
    :math:`F_k(R) = g(R)\,\mathbb 1[R \le k]` with :math:`g` the untruncated metric, so
    :math:`K^\top W F_k = \sum_{R \le k} w_R g(R) K_{R,\cdot}` is a running sum over global ranks
    (cells: over the cells before the one holding :math:`k`, plus that cell's share
    :math:`\frac{w_c}{|c|}\sum_{R=l_c}^{k} g(R)\,\bar K_c`), read off at every requested cut-off in
    one pass (memory :math:`O(nJ)` however many cut-offs, e.g. all K = 1..N for the BV
    rank-distribution baseline).
    """

    def __init__(self, names, ks, n_items, grid=None):
        self.names, self.ks, self.N = list(names), list(ks), n_items
        self.grid = None if grid is None or grid.exact else grid  # the rows: ranks, or cells wider than one rank
        self.solve_grid = grid  # the grid the caller asked for (the banded solver's choice)
        self.pairs = [(name, k) for name in self.names for k in self.ks]
        _check_pairs(self.names, self.ks, n_items)
        self._matrix = None

    def matrix(self) -> np.ndarray:
        if self.grid is not None:  # pragma: no cover - CLS and gamma = 0 are refused on a grid first
            raise ValueError("the dense target matrix needs one cell per rank")
        if self._matrix is None:
            self._matrix = np.column_stack([_metric_matrix(name, self.ks, self.N)[0] for name in self.names])
        return self._matrix

    def _means(self, name, k) -> np.ndarray:
        """F_k per row: at every global rank, or its mean over every cell."""
        if self.grid is None:
            return metric_function(name, k, self.N)(np.arange(1, self.N + 1))
        return _cell_metric_sums(self.grid, name, k) / self.grid.widths

    def kernel_rhs(self, n_items, sample_size, replacement, weights) -> np.ndarray:
        grid = self.grid
        out = np.zeros((sample_size, len(self.pairs)))
        blocks = _banded_kernel(n_items, sample_size, replacement, _grid_blocks_key(grid))
        dense_cols, cut_cols = [], {}
        for j, (name, k) in enumerate(self.pairs):
            if k is None or name == "auc":
                dense_cols.append(j)
            else:
                cut_cols.setdefault(name, []).append((j, k))

        def row_of(k):  # the row (rank or cell) holding rank min(k, N), and whether k ends it
            k = min(k, n_items)
            if grid is None:
                return k - 1, True
            c = int(np.searchsorted(grid.lo, k, side="right")) - 1
            return c, int(grid.hi[c]) == k

        with _blas_threads(n_items, sample_size):
            if dense_cols:
                F = np.column_stack([self._means(*self.pairs[j]) for j in dense_cols])
                for start, stop, lo, hi, B in blocks:
                    wF = weights[start:stop, None] * F[start:stop]
                    if np.any(wF):
                        out[lo:hi, dense_cols] += B.T @ wF
            for name, cols in cut_cols.items():
                g = self._means("recall" if name in ("recall", "precision") else name, None)  # precision: 1[R <= k] / k
                wg = weights * g
                order = sorted(cols, key=lambda jk: jk[1])
                last = row_of(order[-1][1])[0]
                carry = np.zeros(sample_size)
                pos = 0
                for start, stop, lo, hi, B in blocks:
                    if start > last or pos == len(order):
                        break
                    Z = np.cumsum(B * wg[start:stop, None], axis=0)  # running sums within the block
                    while pos < len(order) and row_of(order[pos][1])[0] < stop:
                        j, k = order[pos]
                        c, whole = row_of(k)
                        out[:, j] = carry
                        if whole:
                            out[lo:hi, j] += Z[c - start]
                        else:  # the cell holding k: its ranks up to k only
                            if c > start:
                                out[lo:hi, j] += Z[c - start - 1]
                            part = _range_sums(name, grid.lo[c:c + 1], np.array([min(k, n_items)]))[0]
                            out[lo:hi, j] += B[c - start] * (weights[c] * part / grid.widths[c])
                        pos += 1
                    carry[lo:hi] += Z[-1]
                while pos < len(order):  # cut-offs beyond the last block read (k >= N)
                    out[:, order[pos][0]] = carry
                    pos += 1
                if name == "precision":
                    for j, k in cols:
                        out[:, j] /= k
        return out


class _PoolTargets(_Targets):
    r"""Targets for per-user catalogue sizes: one column per (metric, cut-off, pool) holding
    :math:`F_{N_g}(R_g(R))` on the common grid :math:`R = 1..N` (:func:`.distribution.pool_metric_matrix`).
    The BV / MN / CLS systems do not depend on the targets, so every pool shares one factorisation."""

    def __init__(self, names, ks, n_items, pools):
        super().__init__(names, ks, n_items)
        self.pools = [int(g) for g in pools]

    def matrix(self) -> np.ndarray:
        if self._matrix is None:
            self._matrix = pool_metric_matrix(self.names, self.ks, self.N, self.pools).reshape(self.N, -1)
        return self._matrix

    def kernel_rhs(self, n_items, sample_size, replacement, weights) -> np.ndarray:
        F = self.matrix()
        out = np.zeros((sample_size, F.shape[1]))
        last = int(np.flatnonzero(F.any(axis=1))[-1]) if F.any() else -1  # cut-off metrics vanish below
        with _blas_threads(n_items, sample_size):
            for start, stop, lo, hi, B in _banded_kernel(n_items, sample_size, replacement):
                if start <= last:
                    out[lo:hi] += B.T @ (weights[start:stop, None] * F[start:stop])
        return out


# ---------------------------------------------------------------------------------------------
# solvers
# ---------------------------------------------------------------------------------------------
def _zero_probability(what: str, r: int) -> ValueError:
    return ValueError(f"the {what} system is singular: sampled rank r = {r} has zero probability under the "
                      "prior (c_r = 0), so its corrected value is not determined; use a prior that gives every "
                      "sampled rank positive probability")


def _check_system(G, diag, rhs, what: str) -> None:
    """Refuse a system ``G x = rhs`` (dense, or banded storage) with non-finite entries or a
    non-positive diagonal entry, i.e. a sampled rank with zero probability under the prior."""
    if not np.all(np.isfinite(G)) or not np.all(np.isfinite(rhs)):
        raise ValueError(f"the {what} system has non-finite entries")
    if np.any(diag <= 0.0):
        bad = int(np.flatnonzero(diag <= 0.0)[0]) + 1
        raise _zero_probability(what, bad)


def _check_rcond(rcond: float, n: int, what: str,
                 advice: str = "the prior gives some sampled ranks almost no probability") -> None:
    """The one refusal rule of the corrected-metric systems: a reciprocal condition number (after
    diagonal scaling) of at most ``1e3 * n * eps`` is numerically singular."""
    if not rcond > _RCOND_FACTOR * n * np.finfo(float).eps:
        raise ValueError(f"the {what} system is numerically singular (reciprocal condition number {rcond:.2e} "
                         f"after diagonal scaling); {advice}")


def _solve_spd(G: np.ndarray, rhs: np.ndarray, what: str) -> np.ndarray:
    """Solve the symmetric positive definite system ``G x = rhs`` by Jacobi-scaled Cholesky;
    refuse (ValueError) a singular or numerically singular system."""
    n = G.shape[0]
    d = np.diag(G).copy()
    _check_system(G, d, rhs, what)
    s = 1.0 / np.sqrt(d)
    Gs = G * s[:, None] * s[None, :]
    try:
        cho, low = linalg.cho_factor(Gs, lower=False, check_finite=False)
    except linalg.LinAlgError:
        raise ValueError(f"the {what} system is singular (not positive definite)") from None
    anorm = np.max(np.sum(np.abs(Gs), axis=0))
    rcond, info = lapack.dpocon(cho, anorm, uplo="U")
    _check_rcond(rcond if info == 0 else 0.0, n, what)
    y = linalg.cho_solve((cho, low), rhs * s.reshape((-1,) + (1,) * (rhs.ndim - 1)), check_finite=False)
    return y * s.reshape((-1,) + (1,) * (rhs.ndim - 1))


def _solve_spd_banded(S: np.ndarray, rhs: np.ndarray, what: str) -> np.ndarray:
    r"""Solve ``G x = rhs`` for symmetric positive definite ``G`` given by its upper band
    ``S[i, d] = G[i, i + d]`` (see :func:`.grid._gram_band_rows`): Jacobi scaling and Cholesky in band
    storage (LAPACK ``dpbtrf`` / ``dpbtrs``, :math:`O(nu^2)` for half-bandwidth :math:`u`, exact
    in exact arithmetic since the factor has no fill-in outside the band), refused by the rule of
    :func:`_solve_spd`: a zero or negative diagonal, a failed factorisation, or a
    reciprocal 1-norm condition number of the scaled matrix below :math:`10^3 n\varepsilon`
    (:math:`\|G_s^{-1}\|_1` by Higham's estimator, as LAPACK's ``dpocon`` does for the dense
    solve) raises ``ValueError``."""
    from scipy.sparse.linalg import LinearOperator, onenormest

    n, w = S.shape
    u = w - 1
    d = S[:, 0].copy()
    _check_system(S, d, rhs, what)
    s = 1.0 / np.sqrt(d)
    s_next = np.lib.stride_tricks.sliding_window_view(np.concatenate([s, np.zeros(u)]), w)  # s[i + d]
    Ss = S * s[:, None]
    Ss *= s_next  # padding beyond the matrix becomes 0
    Ss[:, 0] = 1.0
    absS = np.abs(Ss)
    colsum = absS.sum(axis=1)
    for k in range(1, w):
        colsum[k:] += absS[:n - k, k]
    anorm = float(colsum.max())
    del absS
    try:  # Ss.T is LAPACK's lower band storage ab[d, j] = G[j + d, j], already in Fortran order
        cb = linalg.cholesky_banded(Ss.T, overwrite_ab=True, lower=True, check_finite=False)
    except linalg.LinAlgError:
        raise ValueError(f"the {what} system is singular (not positive definite)") from None

    def solve(x):
        return linalg.cho_solve_banded((cb, True), x, check_finite=False)

    op = LinearOperator((n, n), matvec=solve, rmatvec=solve, matmat=solve, rmatmat=solve, dtype=np.float64)
    rcond = 1.0 / (anorm * onenormest(op)) if n > 1 else 1.0
    _check_rcond(rcond, n, what)
    shape = (-1,) + (1,) * (rhs.ndim - 1)
    return solve(rhs * s.reshape(shape)) * s.reshape(shape)


def _drop_band_rows(S: np.ndarray, idx: np.ndarray) -> None:
    """Decouple rows / columns ``idx`` of the banded matrix (see :func:`.grid._gram_band_rows`) in place:
    zero them and put 1 on their diagonal, which solves the others exactly as the subsystem
    without ``idx`` (``G[np.ix_(ok, ok)]`` in the dense solve)."""
    if idx.size == 0:
        return
    n, w = S.shape
    S[idx, :] = 0.0
    rows = idx[:, None] - np.arange(w)[None, :]
    cols = np.broadcast_to(np.arange(w)[None, :], rows.shape)
    keep = rows >= 0
    S[rows[keep], cols[keep]] = 0.0
    S[idx, 0] = 1.0


def _bv_mn_args(method: str, gamma, n_users):
    r"""``(kind, gamma, M)`` of BV / MN / MNW: ``"mn_weighted"`` is BV with :math:`\gamma = 1/M`
    (its exact weighting of TORS Eq. 38), ``"mn"`` takes ``n_users`` :math:`M \ge 1` (``gamma``
    ``None``), ``"bv"`` takes ``gamma`` in [0, 1] (``M`` ``None``); misplaced arguments are refused."""
    if method in ("mn", "mn_weighted"):
        if n_users is None:
            raise ValueError(f"n_users (the number of users M >= 1) is required for method {method!r}")
        M = check_int(n_users, "n_users", low=1)
        if gamma is not None:
            raise ValueError(f"gamma is not used by method {method!r}; leave it None")
        return ("bv", 1.0 / M, M) if method == "mn_weighted" else ("mn", None, M)
    if n_users is not None:
        raise ValueError("n_users is not used by method 'bv'; leave it None")
    if gamma is None:
        raise ValueError("gamma (a number in [0, 1]) is required for method 'bv'")
    return "bv", check_gamma(gamma), None


def _system(kind: str, g: float, M, gram, c, colsum, banded: bool = False):
    r"""The one assembly of the BV, MNW and MN normal equations from the kernel products, on the
    global ranks and on the cells of a grid alike (:func:`_corrected`).

    With weights :math:`p` (the prior, per rank or per cell) and multiplicities :math:`m` (1 per
    rank, :math:`|c|` per cell), ``gram(M)`` returns :math:`\sum p\,K K^\top` (``M=None``) or
    :math:`\sum p\,K K^\top - \frac1M\sum m\,K K^\top`, dense ``(n, n)`` or as its upper band
    (``banded``: ``S[i, d] = G[i, i + d]``); ``c`` is :math:`\sum p K` and ``colsum``
    :math:`\Lambda_1 = \sum m K`. Returns ``(G, what)``:

    * BV (Krichene & Rendle Eq. 25; MNW = BV with :math:`\gamma = 1/M`, our exactly-weighted TORS
      Eq. 38): :math:`G = (1-\gamma)\sum p KK^\top + \gamma\,\mathrm{diag}(c)`;
    * MN (TORS Eq. 42, as published): :math:`G = \sum p KK^\top - \frac1M\sum m KK^\top + \frac1M\Lambda_1`.
    """
    if kind == "mn":
        G = gram(M)
        add = colsum / M
        what = "MN (TORS Eq. 42)"
    else:
        G = (1.0 - g) * gram(None)
        add = g * c
        what = f"BV (gamma = {g:g})"
    if banded:
        G[:, 0] += add
    else:
        G[np.diag_indices_from(G)] += add
    return G, what


def _solve_system(G, rhs, c, what: str, unidentified: str = "raise", banded: bool = False):
    r"""Solve the system of :func:`_system` for every right-hand side column. ``unidentified``:
    ``"raise"`` solves the whole system (a sampled rank with :math:`c_r = 0` makes it singular:
    refused by :func:`_check_system`); ``"nan"`` / ``"zero"`` solve the subsystem of the ranks with
    :math:`c_r > 0` (the others do not enter the objective) and fill the others with NaN (for the
    estimate path to refuse them where observed) or 0. Dense systems by :func:`_solve_spd` with every
    BLAS thread (:math:`O(n^3)`: it dominates for :math:`n` in the thousands); banded ones by
    :func:`_solve_spd_banded` with one (its many small block updates ran 4-15x slower with two
    threads on the shared 2-core machine at :math:`N = 10^6, n = 10^4`)."""
    if unidentified == "raise" and not banded:
        return _solve_spd(G, rhs, what)
    ok = np.flatnonzero(c > 0)
    if not banded and ok.size == c.size:
        return _solve_spd(G, rhs, what)
    out = np.zeros(rhs.shape) if unidentified == "zero" else np.full(rhs.shape, np.nan)
    if banded:
        _drop_band_rows(G, np.flatnonzero(~(c > 0)))
        with _single_blas_thread():
            out[ok] = _solve_spd_banded(G, np.where((c > 0)[:, None], rhs, 0.0), what)[ok]
    else:
        out[ok] = _solve_spd(G[np.ix_(ok, ok)], rhs[ok], what)
    return out


def _bv_lstsq(n_items, sample_size, replacement, prior, Fmat, _unidentified="raise"):
    r"""gamma = 0: least squares :math:`\min_x \|A x - b\|` with :math:`A = \sqrt{p}\,K`,
    :math:`b = \sqrt{p}\,F` (Krichene & Rendle Eq. 21-23), by SVD, refused by the rule of
    :func:`_solve_spd` (see the module docstring): a zero column (a sampled rank with
    :math:`c_r = 0`) or a column-scaled :math:`A` with :math:`(\sigma_{\min}/\sigma_{\max})^2
    \le 10^3 n \varepsilon` raises ``ValueError``. With ``_unidentified="nan"`` zero columns are
    returned as NaN (not determined) and the others solved, as for :math:`\gamma > 0`."""
    what = "BV (gamma = 0)"
    rows = np.flatnonzero(prior) + 1
    sq = np.sqrt(prior[rows - 1])
    A = kernel(n_items, sample_size, replacement, rows) * sq[:, None]
    b = Fmat[rows - 1] * sq[:, None]
    norms = np.sqrt(np.sum(A * A, axis=0))
    ok = np.flatnonzero(norms > 0.0)
    if ok.size < sample_size and _unidentified != "nan":
        bad = int(np.flatnonzero(norms <= 0.0)[0]) + 1
        raise _zero_probability(what, bad)
    As = A[:, ok] / norms[ok]
    sv = linalg.svd(As, compute_uv=False, check_finite=False)
    rcond = (sv[-1] / sv[0]) ** 2 if sv.size and sv[0] > 0 else 0.0
    _check_rcond(rcond, sample_size, what, "least squares would return noise: use gamma > 0 (e.g. 0.01) or method "
                 "'cls'")
    y, *_ = linalg.lstsq(As, b, lapack_driver="gelsd", check_finite=False)
    x = np.full((sample_size,) + b.shape[1:], np.nan)
    x[ok] = y / norms[ok].reshape((-1,) + (1,) * (b.ndim - 1))
    return x


def _cls(n_items, sample_size, replacement, prior, Fmat):
    r"""Constrained least squares (Krichene & Rendle Eq. 21-23 with
    :math:`x_1 \ge \dots \ge x_n`), exact by bounded-variable least squares."""
    rows = np.flatnonzero(prior) + 1
    sq = np.sqrt(prior[rows - 1])
    # x = U z with U upper-triangular ones, so K x = (K U) z and K U is the kernel CDF
    C = kernel_cdf(n_items, sample_size, replacement, rows) * sq[:, None]
    lb = np.zeros(sample_size)
    lb[-1] = -np.inf
    ub = np.full(sample_size, np.inf)
    out = np.empty((sample_size, Fmat.shape[1]))
    for j in range(Fmat.shape[1]):
        res = lsq_linear(C, Fmat[rows - 1, j] * sq, bounds=(lb, ub), method="bvls", tol=1e-12)
        if not np.all(np.isfinite(res.x)):
            raise ValueError("the CLS problem could not be solved (non-finite solution)")
        out[:, j] = np.cumsum(res.x[::-1])[::-1]
    return out


def rank_estimate(sampled_ranks, n_items: int, sample_size: int) -> np.ndarray:
    r"""Krichene & Rendle 2020, Eq. 20: the unbiased estimate of the global rank from a sampled
    rank, floored as in their experiments,

    .. math:: \widehat R = \bigl\lfloor 1 + (N-1)(r-1)/(n-1) \bigr\rfloor ,

    (their :math:`m` decoys are our :math:`n-1`). Returns int64 ranks in ``1..N``."""
    n_items, sample_size = check_sizes(n_items, sample_size)
    r = check_ranks(sampled_ranks, "sampled_ranks", high=sample_size)
    return 1 + ((n_items - 1) * (r - 1)) // (sample_size - 1)


def _rank_estimate(n_items, sample_size, Fmat_fn):
    return Fmat_fn(rank_estimate(np.arange(1, sample_size + 1), n_items, sample_size))


# ---------------------------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------------------------
def corrected_metrics(metric, ks, n_items: int, sample_size: int, method: str, prior=None,
                      n_users: int | None = None, gamma: float | None = None,
                      replacement: bool = True, _unidentified: str = "raise", pools=None) -> np.ndarray:
    r"""Corrected metric vectors for several cut-offs (and metrics) at once.

    With one metric name, returns an ``(n, len(ks))`` array whose column ``j`` is
    :func:`corrected_metric` with ``k = ks[j]``; with a sequence of metric names, an
    ``(n, len(metric), len(ks))`` array. BV and MN build and factorise the :math:`n\times n` system
    once for all metrics and cut-offs (only the right-hand side :math:`K^\top D F` depends on the
    metric), so asking for K = 1..50 of three metrics costs about as much as one.

    ``pools`` (per-user catalogue sizes, :mod:`.distribution` "Per-user catalogue sizes"): the
    distinct pool sizes :math:`N_g \le N`; ``n_items`` is then the largest pool, the prior lives on
    its grid of rank fractions, the kernel is free of the pool (with replacement only), and the
    target of pool :math:`g` is :math:`F_{N_g}(R_g(R))`; the result gains a last axis over the pools,
    ``(n, len(metric), len(ks), len(pools))``. ``"rank_estimate"`` applies Eq. 20 in each pool.
    """
    several = not isinstance(metric, str)
    if several and not isinstance(metric, (list, tuple, np.ndarray)):
        raise ValueError(f"metric must be a metric name or a list of names, got {metric!r}")
    names = [canonical_metric(m) for m in (metric if several else [metric])]
    if several and len(names) == 0:
        raise ValueError("metric must not be an empty sequence")
    n_items, sample_size = check_sizes(n_items, sample_size)
    if method not in CORRECTION_METHODS:
        raise ValueError(f"method must be one of {CORRECTION_METHODS}, got {method!r}")
    ks_arr = np.atleast_1d(np.asarray(ks, dtype=object)) if ks is not None else np.array([None], dtype=object)
    if ks_arr.ndim != 1:
        raise ValueError(f"ks must be a 1-d sequence of cut-offs, got shape {ks_arr.shape}")
    ks = [None if kk is None else check_int(kk, "k", low=1) for kk in ks_arr]
    if len(ks) == 0:
        raise ValueError("ks must not be empty")
    # the targets F(R) for every (metric, cut-off) over R = 1..N and a few work vectors of length N
    check_memory(8.0 * n_items * (len(names) * len(ks) + 4), f"corrected metrics over a catalog of {n_items} items",
                 "n_items (or the number of metrics and cut-offs)")
    replacement = check_bool(replacement, "replacement")
    if pools is not None:
        pools = check_ranks(pools, "pools", high=n_items)
        if not replacement:
            raise ValueError("per-user n_items (catalogue sizes) need replacement=True")
        targets = _PoolTargets(names, ks, n_items, pools)
        out = _corrected(targets, n_items, sample_size, method, prior, n_users, gamma, replacement, _unidentified)
        return out.reshape(sample_size, len(names), len(ks), pools.size)
    targets = _Targets(names, ks, n_items)
    out = _corrected(targets, n_items, sample_size, method, prior, n_users, gamma, replacement, _unidentified)
    return out.reshape(sample_size, len(names), len(ks)) if several else out


def _corrected(targets, n_items, sample_size, method, prior, n_users, gamma, replacement, _unidentified,
               solver="dense"):
    """Solve for every (metric, cut-off) pair of ``targets``: over the global ranks, or over the cells
    of ``targets.grid`` (``prior`` then holds cell masses; BV with gamma > 0, MN and MNW only; the
    ``solver`` rule of :func:`_corrected_on_grid`)."""
    grid = targets.grid
    pairs = targets.pairs
    if method == "rank_estimate":
        for arg, val in (("prior", prior), ("gamma", gamma), ("n_users", n_users)):
            if val is not None:
                raise ValueError(f"{arg} is not used by method 'rank_estimate'; leave it None")
        if isinstance(targets, _PoolTargets):  # Eq. 20 in each user's own pool
            return np.column_stack([_rank_estimate(g, sample_size, metric_function(name, k, g))
                                    for name, k in pairs for g in targets.pools])
        fns = [metric_function(name, k, n_items) for name, k in pairs]
        return np.column_stack([_rank_estimate(n_items, sample_size, f) for f in fns])

    if targets.solve_grid is not None and method not in ("bv", "mn", "mn_weighted"):
        raise ValueError(f"method must be 'bv', 'mn' or 'mn_weighted' on the grid, got {method!r}")
    if grid is not None:
        widths = grid.widths.astype(np.float64)
        p = widths / n_items if prior is None else check_probability_vector(prior, "prior", length=grid.n_cells)
    else:
        widths = np.ones(n_items)
        p = _check_prior(prior, n_items)

    if method == "cls":
        if gamma is not None or n_users is not None:
            raise ValueError("gamma and n_users are not used by method 'cls'; leave them None")
        return _cls(n_items, sample_size, replacement, p, targets.matrix())

    method, g, M = _bv_mn_args(method, gamma, n_users)
    if method == "bv" and g == 0.0:
        if targets.solve_grid is not None:
            raise ValueError("gamma = 0 (least squares) is not available on the grid; use gamma > 0")
        return _bv_lstsq(n_items, sample_size, replacement, p, targets.matrix(), _unidentified)

    key = _grid_blocks_key(grid)
    banded, K, bands, u = _banded_choice(targets.solve_grid, sample_size, replacement, solver)
    if banded:  # never an n x n matrix: c and Lambda_1 alone, the Gram in band storage below
        c = _weighted_products(n_items, sample_size, replacement, p, None, key, gram=False)[2]
        colsum = _weighted_products(n_items, sample_size, replacement, widths, None, key, gram=False)[2] \
            if method == "mn" else None
    elif prior is None or (grid is None and np.ptp(p) == 0.0):  # uniform over the global ranks
        KtK, colsum = _prior_free(n_items, sample_size, replacement, key)
        KtDK = KtK / n_items
        c = colsum / n_items
    else:
        KtDK, c = _prior_products(n_items, sample_size, replacement, key, np.ascontiguousarray(p).tobytes())
        colsum = _prior_free(n_items, sample_size, replacement, key)[1] if method == "mn" else None
    if type(targets) is _Targets:  # shared by BV and MN with the same prior (BV_MLE and MN_MLE, ...)
        rhs = _prior_rhs(tuple(targets.names), tuple(None if k is None else int(k) for k in targets.ks), n_items,
                         sample_size, replacement, key, np.ascontiguousarray(p).tobytes())
    else:
        rhs = targets.kernel_rhs(n_items, sample_size, replacement, p)

    def gram(M):  # sum p K K^T, less (1/M) sum m K K^T for MN (m = 1 per rank, |c| per cell)
        if banded:  # the upper bands, cached: BV and MN with one prior share sum p K K^T
            lo_b = targets.solve_grid.lo.tobytes()
            Gp = _band_products(n_items, sample_size, replacement, lo_b, np.ascontiguousarray(p).tobytes())
            return Gp.copy() if M is None else \
                Gp - _band_products(n_items, sample_size, replacement, lo_b, widths.tobytes()) / M
        return KtDK if M is None else KtDK - _prior_free(n_items, sample_size, replacement, key)[0] / M

    with _single_blas_thread() if banded else contextlib.nullcontext():
        G, what = _system(method, g, M if method == "mn" else None, gram, c, colsum, banded)
    on_grid = targets.solve_grid is not None
    return _solve_system(G, rhs, c, what, _unidentified if method == "bv" or on_grid else "raise", banded)


@functools.lru_cache(maxsize=6)
def _band_products(N: int, n: int, replacement: bool, lo_bytes, w_bytes: bytes) -> np.ndarray:
    r"""The upper band of :math:`\sum_c w_c\bar K_c\bar K_c^\top` (:func:`.grid._gram_band_rows`) on the grid
    whose first ranks are ``lo_bytes``, for the weights whose float64 bytes are ``w_bytes`` (a learnt prior,
    or the cell widths of MN's prior-free term), cached on every input (read-only): the banded BV and MN
    systems of one prior (BV_MLE and MN_MLE, ...) share it, and MN's :math:`\frac1M\sum_c |c|\bar K_c\bar
    K_c^\top` is the same for every sample. MN's matrix is then the difference of two bands instead of one
    band of the weights :math:`p_c - |c|/M` (the same sum, grouped differently: agreement to rounding)."""
    grid = _make_grid(N, np.frombuffer(lo_bytes, dtype=np.int64))
    K = grid_kernel(grid, n, replacement)
    bands = _grid_row_bands(N, n, replacement, lo_bytes)
    u = max(hi - lo for _, _, lo, hi in bands)
    with _single_blas_thread():
        out = _gram_band_rows(K, np.frombuffer(w_bytes, dtype=np.float64), bands, u)
    out.flags.writeable = False
    return out


def _banded_choice(grid, n: int, replacement: bool, solver: str):
    r"""``(banded, K, bands, u)``: whether the BV / MN system is formed and solved in band storage
    (``solver="banded"``, or ``"auto"`` with :math:`n \ge 1000` and a half-bandwidth :math:`u` of at
    most about :math:`n/2`, on a grid), with the grid kernel and its bands of 16 cells when it is."""
    if solver not in ("auto", "dense", "banded"):
        raise ValueError(f"solver must be 'auto', 'dense' or 'banded', got {solver!r}")
    if grid is None or solver == "dense" or (solver == "auto" and n < _BANDED_MIN_N):
        return False, None, None, n
    K = grid_kernel(grid, n, replacement)
    bands = _grid_row_bands(grid.n_items, n, replacement, grid.lo.tobytes())
    u = max(hi - lo for _, _, lo, hi in bands)
    return solver == "banded" or (n >= _BANDED_MIN_N and 2 * (u + 1) <= n), K, bands, u


@functools.lru_cache(maxsize=6)
def _grid_row_bands(N: int, n: int, replacement: bool, lo_bytes) -> tuple:
    """The bands of 16 cells (:func:`.grid._row_bands`) of the grid kernel (:func:`.grid.grid_kernel`,
    cached) of the grid whose first ranks are ``lo_bytes``: cached beside it, as every BV / MN solve
    on the same grid and size reads them."""
    K = grid_kernel(_make_grid(N, np.frombuffer(lo_bytes, dtype=np.int64)), n, replacement)
    with _single_blas_thread():
        return tuple(_row_bands(K, block=_BAND_BLOCK))


def _corrected_on_grid(names, ks, grid, sample_size, method, prior=None, n_users=None, gamma=None,
                       replacement=True, solver="auto", _unidentified="zero"):
    r"""BV, MN and MNW corrected metric vectors on the grid, shape ``(n, len(metrics), len(ks))``.

    ``prior`` holds cell masses (uniform over ranks, :math:`p_c = |c|/N`, by default). Systems as in
    :mod:`.corrected`: BV :math:`((1-\gamma)\sum_c p_c\bar K_c\bar K_c^\top + \gamma\,\mathrm{diag}(c))x
    = \sum_c p_c \bar F_c\bar K_c` (Krichene & Rendle Eq. 25; ``gamma`` in (0, 1]), MN (TORS Eq. 42)
    :math:`(\sum_c p_c\bar K_c\bar K_c^\top - \frac1M\sum_c |c|\bar K_c\bar K_c^\top + \frac1M\Lambda_1)x
    = \sum_c p_c\bar F_c\bar K_c`, MNW = BV with :math:`\gamma = 1/M`; :math:`\bar F_c` is the cell
    mean of :math:`F`.

    Solvers (``solver``): both matrices are banded. Kernel row :math:`c` is non-negligible (at least
    :math:`10^{-30}` of its maximum, the threshold of every product here) only on sampled ranks
    within about 12 standard deviations :math:`\sqrt{(n-1)\theta_c(1-\theta_c)}` of
    :math:`1 + (n-1)\theta_c`, so :math:`G_{rr'} = 0` (as computed) unless :math:`|r - r'| \le u`,
    the largest column band of a block of 16 cells (:math:`u \approx 1{,}270` at
    :math:`N = 10^6, n = 10^4`; 480 at :math:`N = 10^7, n = 1000`). ``"banded"`` forms only that
    band, block by block, and solves it by banded Cholesky: time :math:`O(C\bar b^2 + nu^2)` and
    memory :math:`O(nu)` instead of :math:`O(C\bar b^2 + n^3)` and :math:`O(n^2)`. Truncation
    error: every dropped kernel entry is below :math:`10^{-30}` of its row's maximum, so each dropped
    product :math:`p_c\bar K_{cr}\bar K_{cr'}` is below :math:`10^{-30}` of the row's
    :math:`p_c\max_r\bar K_{cr}^2` and the matrix changes by less than :math:`10^{-30}\|G\|`
    entrywise relative to its diagonal, far below float64 rounding (:math:`10^{-16}`); the
    factorisation itself is exact in exact arithmetic (Cholesky of a banded matrix has no fill-in
    outside the band), so the banded and dense solves differ by rounding only (relative
    :math:`10^{-9}` or less in the tests, times the condition number). ``"dense"`` is the
    :math:`n\times n` Cholesky; ``"auto"`` takes the banded solve when :math:`n \ge 1000` and
    :math:`u + 1 \le n/2`, else the dense one (so small problems are solved exactly as before).
    Both refuse singular or numerically singular systems with ``ValueError``.
    """
    replacement = check_bool(replacement, "replacement")
    N, n = check_sizes(grid.n_items, sample_size)
    names = [canonical_metric(m) for m in ([names] if isinstance(names, str) else names)]
    targets = _Targets(names, list(ks), N, grid)
    out = _corrected(targets, N, n, method, prior, n_users, gamma, replacement, _unidentified, solver)
    return np.ascontiguousarray(out).reshape(n, len(names), len(ks))


def corrected_metric(metric: str, k, n_items: int, sample_size: int, method: str, prior=None,
                     n_users: int | None = None, gamma: float | None = None,
                     replacement: bool = True) -> np.ndarray:
    r"""The corrected metric vector :math:`\widehat F(r)`, :math:`r = 1..n`.

    Parameters
    ----------
    metric : {"recall", "hr", "precision", "ndcg", "ap", "rr", "auc"}
        The global metric :math:`F(R)` to estimate.
    k : int or None
        Cut-off :math:`K \ge 1`; ``None`` means untruncated (and is required for ``"auc"``).
    n_items : int
        Catalog size :math:`N`.
    sample_size : int
        Sampled-set size :math:`n` including the target, :math:`2 \le n \le N`.
    method : {"rank_estimate", "cls", "bv", "mn", "mn_weighted"}
        See the module docstring for the equations.
    prior : array of length N, optional
        Prior :math:`p(R)` (non-negative, summing to 1); uniform when omitted. Used by
        ``"cls"``, ``"bv"``, ``"mn"``, ``"mn_weighted"``.
    n_users : int, optional
        Number of users :math:`M`; required by ``"mn"`` and ``"mn_weighted"``.
    gamma : float in [0, 1], optional
        Bias-variance weight; required by ``"bv"``. One rule across :math:`\gamma`: a system whose
        diagonally scaled reciprocal condition number is at most ``1e3 * n * eps`` is refused, for
        :math:`\gamma = 0` (least squares, condition of the scaled :math:`A^\top A`) as for
        :math:`\gamma > 0`; see the module docstring.
    replacement : bool
        Binomial (with replacement, default) or hypergeometric kernel.

    Returns
    -------
    ndarray of shape ``(n,)``: entry ``r-1`` is :math:`\widehat F(r)`.

    Raises
    ------
    ValueError
        For an unknown method or metric, :math:`n > N`, ``gamma`` outside [0, 1], a prior that is
        negative or does not sum to 1, a missing ``n_users`` / ``gamma``, or a singular system.
    """
    return corrected_metrics(metric, [k], n_items, sample_size, method, prior=prior, n_users=n_users,
                             gamma=gamma, replacement=replacement)[:, 0]


def corrected_estimate(sampled_ranks, corrected) -> np.ndarray | float:
    r""":math:`\widehat T = \frac1M\sum_u \widehat F(r_u)` (TORS Eq. 6).

    ``sampled_ranks`` is a 1-d array of ranks in ``1..n`` (returns a float) or a 2-d array with one
    row per repeat (returns one estimate per row); ``corrected`` is :math:`\widehat F`, of shape
    ``(n,)`` or ``(n, n_cutoffs)`` (then the result gains a trailing cut-off axis).
    """
    Fh = _check_corrected(corrected)
    n = Fh.shape[0]
    r = np.asarray(sampled_ranks)
    if r.ndim not in (1, 2) or r.size == 0:
        raise ValueError("sampled_ranks must be a non-empty 1-d or 2-d array of ranks")
    if r.dtype.kind not in "iu":
        if r.dtype.kind != "f" or not np.all(np.isfinite(r)) or not np.all(r == np.floor(r)):
            raise ValueError("sampled_ranks must hold integer ranks")
        r = r.astype(np.int64)
    if r.min() < 1 or r.max() > n:
        raise ValueError(f"sampled_ranks must lie in 1..{n}, got {r.min() if r.min() < 1 else r.max()}")
    two_d = r.ndim == 2
    r2 = r.reshape(1, -1) if not two_d else r
    counts = np.stack([np.bincount(row, minlength=n + 1)[1:] for row in r2]) / r2.shape[1]
    out = counts @ Fh
    if two_d:
        return out
    out = out[0]
    return float(out) if Fh.ndim == 1 else out


def _check_corrected(corrected) -> np.ndarray:
    Fh = as_float_array(corrected, "corrected")
    if Fh.ndim not in (1, 2) or Fh.shape[0] < 2 or not np.all(np.isfinite(Fh)):
        raise ValueError("corrected must be a finite array of shape (n,) or (n, n_cutoffs) with n >= 2")
    return Fh


def _rows_of(global_ranks, n_items, corrected, replacement):
    """``(Fh, K, inverse, R)``: the checked corrected vector, the kernel rows of the distinct global
    ranks (sampled-set size ``len(corrected)``), each rank's row index, and the ranks."""
    Fh = _check_corrected(corrected)
    n_items, n = check_sizes(n_items, Fh.shape[0])
    R = check_ranks(global_ranks, "global_ranks", high=n_items)
    uniq, inverse = np.unique(R, return_inverse=True)
    return Fh, kernel(n_items, n, replacement, uniq), inverse, R


def expected_corrected_given_rank(global_ranks, n_items: int, corrected, replacement: bool = True) -> np.ndarray:
    r""":math:`\mathbb E[\widehat F(r)\mid R] = \sum_{r=1}^n P(r\mid R)\,\widehat F(r)` for each global rank
    (Krichene & Rendle Eq. 16 with the corrected vector; their Fig. 4, right panel, plots it against
    :math:`R`). The sampled-set size is ``len(corrected)``."""
    Fh, K, inverse, _ = _rows_of(global_ranks, n_items, corrected, replacement)
    return (K @ Fh)[inverse]


def corrected_moments(global_ranks, n_items: int, corrected, replacement: bool = True):
    r"""Exact mean and standard deviation, over the decoy draws, of
    :math:`\widehat T = \frac1M\sum_u \widehat F(r_u)` for users with known global ranks.

    Krichene & Rendle Eq. 16 with the corrected vector in place of the metric:
    :math:`\mathbb E[\widehat T] = \frac1M\sum_u\sum_r P(r\mid R_u)\widehat F(r)` and, users drawing
    decoys independently, :math:`\mathrm{Var}[\widehat T] = \frac1{M^2}\sum_u \mathrm{Var}[\widehat F(r)\mid R_u]`.
    The sampled-set size is ``len(corrected)``. Returns floats, or arrays over the columns of a
    2-d ``corrected``.
    """
    Fh, K, inverse, R = _rows_of(global_ranks, n_items, corrected, replacement)
    counts = np.bincount(inverse, minlength=K.shape[0])
    mean_u = K @ Fh
    var_u = np.maximum(K @ Fh**2 - mean_u**2, 0.0)
    M = R.size
    mean = counts @ mean_u / M
    std = np.sqrt(counts @ var_u) / M
    if Fh.ndim == 1:
        return float(mean), float(std)
    return mean, std


def mse_decomposition(corrected, metric: str, k, n_items: int, prior, n_users: int,
                      replacement: bool = True) -> dict:
    r"""The terms of TORS Eq. 38-39 for a corrected vector, computed exactly.

    For :math:`M` users whose global ranks have the (empirical) distribution :math:`P(R)`, with
    :math:`T = \sum_R P(R)F(R)`, :math:`\mu_R = \mathbb E[\widehat F(r)\mid R]` and
    :math:`\sigma^2_R = \mathrm{Var}[\widehat F(r)\mid R]`:

    * ``bias`` :math:`= \mathbb E[\widehat T] - T = \sum_R P(R)(\mu_R - F(R))`;
    * ``variance`` :math:`= \mathrm{Var}[\widehat T] = \frac1M\sum_R P(R)\sigma^2_R` (exact);
    * ``mse`` :math:`=` ``bias**2 + variance`` (Eq. 38);
    * ``L1`` :math:`= \sum_R P(R)(\mu_R - F(R))^2 \ge` ``bias**2`` (the Jensen step);
    * ``L2`` :math:`= \frac1M\sum_R \sigma^2_R` (TORS's variance term, Eq. 39, unweighted);
    * ``bound`` :math:`=` ``L1 + L2``, the objective MN minimises (Eq. 41).
    """
    Fh = _check_corrected(corrected)
    if Fh.ndim != 1:
        raise ValueError("corrected must be a 1-d vector")
    n_items, n = check_sizes(n_items, Fh.shape[0])
    p = _check_prior(prior, n_items)
    M = check_int(n_users, "n_users", low=1)
    F = metric_function(metric, k, n_items)(np.arange(1, n_items + 1))
    mu = np.zeros(n_items)
    second = np.zeros(n_items)
    for start, stop, lo, hi, B in _banded_kernel(n_items, n, check_bool(replacement, "replacement")):
        mu[start:stop] = B @ Fh[lo:hi]
        second[start:stop] = B @ Fh[lo:hi] ** 2
    var = np.maximum(second - mu**2, 0.0)
    bias = float(p @ (mu - F))
    variance = float(p @ var / M)
    L1 = float(p @ (mu - F) ** 2)
    L2 = float(var.sum() / M)
    return {"bias": bias, "variance": variance, "mse": bias**2 + variance, "L1": L1, "L2": L2, "bound": L1 + L2}


# ---------------------------------------------------------------------------------------------
# the corrected metrics on a given grid (also importable from itemsampling.estimators.grid)
# ---------------------------------------------------------------------------------------------
def grid_corrected_metrics(metrics, ks, grid: RankGrid, sample_size: int, method: str, prior=None,
                           n_users: int | None = None, gamma: float | None = None,
                           replacement: bool = True, solver: str = "auto") -> np.ndarray:
    r"""BV, MN and MNW corrected metric vectors on the grid, shape ``(n, len(metrics), len(ks))``:
    ``prior`` holds cell masses (uniform over ranks, :math:`p_c = |c|/N`, by default); ``solver``
    ``"auto"``, ``"dense"`` or ``"banded"``. The systems (Krichene & Rendle Eq. 25, TORS Eq. 42) and
    the banded solver are those of :mod:`.corrected` (:func:`.corrected._corrected_on_grid`, where
    they are derived)."""
    return _corrected_on_grid(metrics, ks, grid, sample_size, method, prior, n_users, gamma, replacement, solver)
