r"""Learning the global rank distribution :math:`\widehat P(R)`, :math:`R = 1..N`, from sampled ranks.

Jin et al. (2021) and TORS Sec. 4 observe that any top-K metric is linear in the global rank
distribution, :math:`T = \sum_{R} P(R)\,F(R)` (Jin et al. Eq. 13-14; TORS Eq. 26-27), so it is
enough to learn :math:`P(R)` once from the sampled ranks :math:`r_1..r_M` and read every metric
off it.

What this module holds: the fits, each written once (EM ``_em``, CNM, WMLE's weights, the MES
Newton loop ``_mes_newton``, BV's rank-distribution baseline), the one option table
:data:`OPTIONS` and the one fit ``_fit`` behind :func:`fit_rank_distribution`,
:func:`~itemsampling.estimators.distribution.grid_fit_rank_distribution` and the estimate path of
:mod:`itemsampling.estimators`; the per-user catalogue-size model (pools). They work on the kernel
and sampled-rank statistics of :mod:`.grid` (over the global ranks ``1..N``, the exact grid, or
over the cells of a coarser :class:`~itemsampling.estimators.grid.RankGrid`).

The model
---------
A user whose target item sits at global rank :math:`R` produces the sampled rank :math:`r` with
probability :math:`K_{R,r} = P(r\mid R)` (the kernel of :mod:`itemsampling.kernel`:
:math:`r-1 \sim \mathrm{Binomial}(n-1, \theta_R)`, :math:`\theta_R = (R-1)/(N-1)`, Jin et al.
Eq. 16-17; hypergeometric without replacement). A population with rank distribution
:math:`\pi` therefore produces sampled ranks from the *mixture of binomials*

.. math:: q_r(\pi) = \sum_{R=1}^N \pi_R\,K_{R,r} = (K^\top \pi)_r \qquad\text{(Jin et al. Eq. 18).}

Everything here works with the histogram :math:`c_r = \#\{u : r_u = r\}` (or the empirical
sampled-rank distribution :math:`\tilde P(r) = c_r / M`): the likelihood depends on the data only
through it (the "speed-up" of Jin et al. Eq. 21), so each pass costs :math:`O(Nn)`, not
:math:`O(NM)`.

Estimators
----------
``"mle"``
    Maximise :math:`\ell(\pi) = \sum_r \tilde P(r)\log q_r(\pi)` over the simplex (Jin et al.
    Eq. 19; :math:`\ell` is the log-likelihood divided by :math:`M`). EM gives the multiplicative
    update :math:`\pi^{new}_R = \pi_R\,g_R(\pi)`, with the gradient
    :math:`g_R(\pi) = \sum_r \tilde P(r) K_{R,r}/q_r(\pi)` (Jin et al. Eq. 20-21, :func:`em_step`).
    The problem is concave, and :math:`\pi` is optimal iff (KKT) :math:`g_R \le 1` for every
    :math:`R`, with equality where :math:`\pi_R > 0`. Since :math:`\sum_R \pi_R g_R = 1`,
    concavity gives the certificate :math:`\ell^* - \ell(\pi) \le \max_R g_R - 1` (the *gap*).
    Two solvers:

    * ``solver="em"`` (default): the paper's EM from the uniform start, stopped when the relative
      change of :math:`\ell` falls below ``tol`` (default :math:`10^{-6}`; :func:`mle_em`). This is
      *not* the MLE: EM creeps towards the optimum over tens of thousands of passes, and the
      result depends on ``tol`` (early stopping acts as a regulariser). ``FitResult.gap`` reports
      the certified distance :math:`\max_R g_R - 1` from the optimum at the point where it stopped.
    * ``solver="cnm"``: the exact, certified MLE, by the constrained Newton method with
      multiple support-point addition (Wang 2007, J. R. Stat. Soc. B 69, 185-198;
      :func:`mle_cnm`): it keeps a small support, adds the local maxima of :math:`g`, re-weights
      by non-negative least squares on the quadratic approximation of :math:`\ell`, and
      line-searches; it stops when the *certified* gap is below ``tol`` (default
      :math:`10^{-9}`), i.e. when the KKT conditions hold to ``tol``. Plain EM needs minutes to
      get there at yelp scale; CNM under a second. The tests check it by KKT and against long EM.

    Why early-stopped EM stays the default: it is what Jin et al. ran, and :math:`P(R)` is not
    identified at a resolution finer than about :math:`N/n` ranks: :math:`q = K^\top\pi` is
    identified but :math:`\pi` is not (:math:`N \gg n`, and a binomial mixture is determined by
    only :math:`n-1` moments of :math:`\theta`). The exact MLE is a discrete distribution with a
    few dozen atoms (the classical non-parametric MLE of a mixing distribution), so its Recall@K
    jumps at the atoms; EM from the uniform start, stopped early, keeps :math:`\pi` smooth.
    Chapter 6 tabulates one estimate for several ``tol`` and for CNM.
``"wmle"``
    The weighted likelihood :math:`\sum_r \tilde P(r) w(r) \log q_r(\pi)` (Jin et al. Eq. 22-23)
    with :math:`w(r) = F_{AP}(r/C) = C/r` or :math:`F_{NDCG}(r/C) = 1/\log_2(1 + r/C)`; it is the
    MLE with the histogram re-weighted by :math:`w`, solved the same way.
``"mes"``
    Maximal entropy with squared distribution distance (TORS Eq. 35-36; Jin et al. Eq. 25-26):

    .. math:: \max_{\pi\in\Delta}\ a\,H(\pi) - \sum_r \tilde P(r)\bigl(q_r(\pi) - \tilde P(r)\bigr)^2,

    with :math:`a = \eta/n` (TORS Eq. 36, the book's default, ``eta_scaling="tors"``),
    :math:`a = \eta` (Jin et al. Eq. 26, ``eta_scaling="aaai"``) or :math:`a = \eta\,(100/n)^2`
    (``"quadratic"``, see :func:`mes_scale`); TORS Eq. 36 and Jin et al. Eq. 26 differ by this factor. Ranks
    never observed carry no weight. The problem is strictly concave; the default solver is its
    Lagrange dual (derived in :func:`mes_dual`), an unconstrained smooth problem in one variable
    per *observed* sampled rank, solved by Newton's method; ``solver="cvxpy"`` solves the primal
    with cvxpy and the open conic solver Clarabel (:func:`mes_cvxpy`).
``"bv"``
    The baseline of Jin et al. Eq. 15 / TORS Eq. 28:
    :math:`\widehat P(R) = \widehat{\mathrm{Recall}}_{BV}@R - \widehat{\mathrm{Recall}}_{BV}@(R-1)`,
    each recall estimated with the BV corrected metric (Krichene & Rendle Eq. 25) of
    :mod:`itemsampling.estimators.corrected`. It sums to 1 but may be negative; by default it is
    projected onto the simplex (Euclidean projection), ``project=False`` returns it raw.

Per-user catalogue sizes
------------------------
In leave-one-out protocols that exclude each user's training items, user :math:`u`'s target is
ranked among a pool of :math:`N_u` items that differs by user (``n_items`` as one size per user).
The book's model: the users' **rank fractions** :math:`t_u = (R_u-1)/(N_u-1)` are drawn from one
distribution :math:`P` on the common grid :math:`t = (R-1)/(N-1)`, :math:`R = 1..N`, with
:math:`N = \max_u N_u` (the finest pool lattice); the user's rank in its own pool is
:math:`R_u = 1 + \mathrm{round}(t\,(N_u-1))` (:func:`pool_rank_map`). With replacement the kernel
depends on the pool only through :math:`t`: :math:`r_u - 1 \sim \mathrm{Bin}(n_u - 1, t_u)`
(Krichene & Rendle Eq. 9 with :math:`\theta = t`), so **the likelihood is free of** :math:`N_u`: every
estimator of :math:`P` above runs unchanged on the grid of the largest pool, with the sufficient
statistic of the fit the table of distinct :math:`(n_u, r_u)` (the triple :math:`(N_u, n_u, r_u)`
collapses to it) and the pools entering only the metric,

.. math:: \widehat T = \frac1M\sum_u \sum_R \widehat P(R)\,F_{N_u}(R_u(R))
          = \sum_R \widehat P(R)\,\bar F(R),\qquad
          \bar F(R) = \sum_g \frac{M_g}{M}F_{N_g}(R_g(R))

over the distinct pools :math:`g` with :math:`M_g` users (:func:`pool_metric_matrix`). The only
approximation is that a user's fraction lies on its own lattice :math:`\{j/(N_u-1)\}`, which the
common grid (spacing :math:`1/(N-1) \le 1/(N_u-1)`) resolves to within half a step, far below the
kernel's resolution :math:`\approx 1/n`. With all :math:`N_u` equal the model *is* the
one-:math:`N` model (equal pools are sent down that path, bit-identical). Why not fit per
pool-size group: with :math:`N_u` from training-set sizes almost every user has its own pool, so
groups would hold one user each; why not the exact columns of every distinct
:math:`(N_u, n_u, r_u)`: their number grows to :math:`M` (e.g. :math:`10^5` columns of length
:math:`N`), while the fit above costs what the one-:math:`N` fit costs. Without replacement the
hypergeometric kernel depends on :math:`N_u` itself, and per-user sizes are refused there.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import linalg
from scipy.optimize import nnls
from scipy.special import logsumexp

from .._validation import (
    as_float_array, check_bool, check_int, check_kernel, check_memory, check_probability_vector, check_ranks,
    check_sizes,
)
from ..metrics import metric_function
from .corrected import corrected_metrics  # the BV baseline of P(R) is read off BV's corrected Recall@K
from .grid import (  # the representation: sampled-rank statistics, kernels, row blocks, pool metrics
    _block_products, _blocks, _check_grid, _rank_histogram, _check_positive, _row_bands, _single_blas_thread, cached_kernel,
    check_sampled_ranks, grid_kernel, grid_kernel_columns, kernel_columns, rank_grid, sampled_rank_table,
)
from .grid import pool_metric_matrix, pool_rank_map, sampled_rank_histogram  # noqa: F401  (importable from here, as before)

__all__ = [
    "DISTRIBUTION_METHODS",
    "ConvergenceWarning",
    "FitResult",
    "estimate_rank_distribution",
    "fit_rank_distribution",
    "kernel_blocks",
    "stack_blocks",
    "mle_em_blocks",
    "mle_cnm_blocks",
    "PER_USER_SIZE_METHODS",
    "OPTIONS",
    "check_n_items",
    "grid_fit_rank_distribution",
    "grid_mes_dual",
    "wmle_weights",
    "mes_scale",
    "mixture_log_likelihood",
    "likelihood_gradient",
    "kkt_gap",
    "em_step",
    "mle_em",
    "mle_cnm",
    "mes_objective",
    "mes_dual",
    "mes_cvxpy",
    "mes_primal_gap",
    "bv_rank_distribution",
    "project_to_simplex",
]

#: Methods accepted by :func:`estimate_rank_distribution`.
DISTRIBUTION_METHODS = ("mle", "wmle", "mes", "bv")

#: Rank-distribution methods that accept per-user sample sizes (adaptive sampling, TORS Sec. 6).
PER_USER_SIZE_METHODS = ("mle",)


class ConvergenceWarning(RuntimeWarning):
    """An iterative solver stopped at ``max_iter`` before meeting its convergence criterion."""


@dataclass
class FitResult:
    """Outcome of a rank-distribution fit.

    Attributes
    ----------
    distribution : ndarray (N,)   the estimate :math:`\\widehat P(R)`, non-negative, sums to 1.
    objective : float             the maximised objective (mean log-likelihood for MLE / WMLE,
                                  normalised by the total weight; :math:`aH - E` for MES).
    iterations : int
    stopped_by_tol : bool         the solver's own stopping rule was met before ``max_iter``. For
                                  EM that rule is a small relative change of the log-likelihood,
                                  which does *not* mean the MLE was reached: read ``gap``.
    gap : float                   always computed. MLE / WMLE (EM and CNM): the certified
                                  optimality gap :math:`\\max_R g_R - 1 \\ge \\ell^* - \\ell(\\pi)`
                                  (0 at the exact MLE); MES: the largest dual-gradient entry (KKT
                                  residual); NaN for BV and cvxpy.
    seconds : float               solver time (excluding the kernel, which is cached).
    solver : str                  ``"em"``, ``"cnm"``, ``"dual"``, ...; prefixed ``"grid-"`` for a
                                  fit on a :class:`~itemsampling.estimators.grid.RankGrid`.
    grid : RankGrid or None       the grid of a grid fit, whose ``distribution`` then holds the cell
                                  masses :math:`w_c` (``grid.expand(distribution)`` gives :math:`P(R)`
                                  over ``1..N`` for moderate N); ``None`` for a fit over ``1..N``.
    """

    distribution: np.ndarray
    objective: float
    iterations: int
    stopped_by_tol: bool
    gap: float
    seconds: float
    solver: str
    grid: object = None


# ---------------------------------------------------------------------------------------------
# the weights of WMLE and MES
# ---------------------------------------------------------------------------------------------


def wmle_weights(sample_size: int, weight: str = "ndcg", C: float = 10.0) -> np.ndarray:
    r"""WMLE weights :math:`w(r) = F(r/C)`, :math:`r = 1..n` (Jin et al. Eq. 22-23): ``"ap"``
    gives :math:`C/r`, ``"ndcg"`` gives :math:`1/\log_2(1 + r/C)`. ``C >= 1`` slows the decay
    (Jin et al. use :math:`C > 1`; their tables use NDCG with :math:`C = 10`)."""
    sample_size = check_int(sample_size, "sample_size", low=2)
    if weight not in ("ap", "ndcg"):
        raise ValueError(f"weight must be 'ap' or 'ndcg', got {weight!r}")
    C = _check_positive(C, "C", low=1.0, inclusive=True)
    r = np.arange(1, sample_size + 1, dtype=np.float64)
    return metric_function(weight)(r / C)


def mes_scale(eta: float, sample_size: int, eta_scaling: str = "tors") -> float:
    r"""The entropy weight :math:`a` of MES: :math:`\eta/n` (TORS Eq. 36, ``"tors"``),
    :math:`\eta` (Jin et al. Eq. 26, ``"aaai"``) or :math:`\eta\,(100/n)^2` (``"quadratic"``).
    ``eta`` must be positive and finite.

    ``"quadratic"`` is Jin et al.'s weight at their :math:`n = 100`, kept consistent across sample
    sizes: the fit term :math:`\sum_r \tilde P(r)(q_r - \tilde P(r))^2` has :math:`n` terms whose
    :math:`\tilde P(r)` and :math:`q_r` are of order :math:`1/n`, so for a fixed *relative* misfit
    it falls like :math:`1/n^2` while the entropy does not change; with :math:`a = \eta` fixed the
    entropy wins more and more as :math:`n` grows (the book's chapter 6 measures MES's error
    growing by more than an order of magnitude from :math:`n = 100` to :math:`500`)."""
    eta = _check_positive(eta, "eta")
    sample_size = check_int(sample_size, "sample_size", low=2)
    if eta_scaling == "tors":
        return eta / sample_size
    if eta_scaling == "aaai":
        return eta
    if eta_scaling == "quadratic":
        return eta * (100.0 / sample_size) ** 2
    raise ValueError(f"eta_scaling must be 'tors', 'aaai' or 'quadratic', got {eta_scaling!r}")


# ---------------------------------------------------------------------------------------------
# MLE
# ---------------------------------------------------------------------------------------------
def _normalise_counts(counts, sample_size: int) -> np.ndarray:
    c = as_float_array(counts, "counts")
    if c.shape != (sample_size,) or not np.all(np.isfinite(c)) or np.any(c < 0) or c.sum() <= 0:
        raise ValueError(f"counts must be a non-negative, finite vector of length {sample_size} with a "
                         "positive total")
    return c / c.sum()


def _solver_inputs(counts, K, tol, max_iter):
    """``(tol, max_iter, N, n, c)`` of an MLE solver: checked ``tol`` (> 0) and ``max_iter`` (>= 1), the
    kernel's shape and the normalised counts."""
    N, n = K.shape
    return _check_positive(tol, "tol"), check_int(max_iter, "max_iter", low=1), N, n, _normalise_counts(counts, n)


def _check_pi_kernel(pi, K) -> tuple[np.ndarray, np.ndarray]:
    """A kernel of finite, non-negative entries and a mixing distribution over its rows (refused
    with a ``ValueError`` naming ``K`` or ``pi``: negative, NaN or non-normalised input would
    otherwise give a plausible number)."""
    K = check_kernel(K, "K")
    return K, check_probability_vector(pi, "pi", length=K.shape[0])


def mixture_log_likelihood(pi, counts, K) -> float:
    r""":math:`\ell(\pi) = \sum_r \hat c_r \log q_r(\pi)` with :math:`q = K^\top\pi` and
    :math:`\hat c = c/\sum c` (Jin et al. Eq. 19 and 22 divided by the total weight). Ranks with
    :math:`c_r = 0` are skipped (no :math:`0 \log 0`); ``-inf`` if an observed rank gets
    :math:`q_r = 0`."""
    K, pi = _check_pi_kernel(pi, K)
    c = _normalise_counts(counts, K.shape[1])
    q = K.T @ pi
    obs = c > 0
    with np.errstate(divide="ignore"):
        return float(c[obs] @ np.log(q[obs]))


def likelihood_gradient(pi, counts, K) -> np.ndarray:
    r""":math:`g_R = \partial\ell/\partial\pi_R = \sum_r \hat c_r K_{R,r}/q_r` (0/0 guarded: ranks with
    :math:`c_r = 0` contribute nothing). KKT for the MLE over the simplex: :math:`g_R \le 1` for all
    :math:`R`, :math:`g_R = 1` where :math:`\pi_R > 0`."""
    K, pi = _check_pi_kernel(pi, K)
    c = _normalise_counts(counts, K.shape[1])
    q = K.T @ pi
    return K @ _ratio(c, q)


def _ratio(c, q):
    out = np.zeros_like(q)
    obs = c > 0
    if np.any(q[obs] <= 0):
        raise ValueError("an observed sampled rank has zero probability under the current estimate")
    out[obs] = c[obs] / q[obs]
    return out


def kkt_gap(pi, counts, K) -> float:
    r"""Certified optimality gap :math:`\max_R g_R(\pi) - 1 \ge \ell^* - \ell(\pi)` of a candidate MLE."""
    return float(np.max(likelihood_gradient(pi, counts, K)) - 1.0)


def em_step(pi, counts, K) -> np.ndarray:
    r"""One EM update :math:`\pi^{new}_R = \pi_R \sum_r \hat c_r K_{R,r}/q_r` (Jin et al. Eq. 21;
    weighted: Eq. 23 with :math:`\hat c \propto \tilde P(r)w(r)`). Never decreases :math:`\ell`."""
    K, p = _check_pi_kernel(pi, K)
    new = p * likelihood_gradient(p, counts, K)
    return new / new.sum()


def _em(c, K, P, tol: float, max_iter: int, dot: bool = False, bar=None, lean: bool = True):
    r"""The one EM loop of the package (Jin et al. Eq. 20-21, weighted Eq. 23; per-user sizes TORS
    Appendix H Eq. 61-62 on stacked kernel columns): :math:`\pi_R \leftarrow \pi_R \sum_j \hat c_j
    K_{R,j}/q_j`, :math:`q = K^\top\pi`, for a batch of fits at once (the single fit of
    :func:`mle_em` is a batch of one; the bootstrap's replicates, :func:`~.bootstrap.batch_em`, many).

    ``c`` (B, J): normalised weights, one row per fit; ``K`` (N, J); ``P`` (B, N): the starts
    (overwritten). A fit stops when the relative change of its mean log-likelihood is at most ``tol``
    (:math:`|\ell_t - \ell_{t-1}| \le \mathrm{tol}\cdot|\ell_t|`) or after ``max_iter`` passes. The
    working arrays hold only the fits still running (compacted when some stop), so each pass is two
    (B x N x J) products shared by them; with one BLAS thread a batch of one does the arithmetic of the
    matrix-vector EM bit for bit. ``dot``: the log-likelihood as the single fit computes it (a dot
    product over the observed columns; else a row sum, the batch's), so both keep their results bit
    for bit. ``bar``: a progress bar advanced once per pass. A single fit (``dot``) runs the same loop
    without the batch's bookkeeping (:func:`_em_one`; ``lean=False``: the batch's loop, which it equals bit
    for bit). Returns ``(P, Q, ll, iterations, converged)``, per fit: the estimates, :math:`q`, the last
    mean log-likelihood, the passes run and whether the rule was met."""
    B = c.shape[0]
    tiny = np.finfo(float).tiny
    obs = c > 0
    # every column observed (the distinct pairs of one fit): the same arithmetic without the masks of
    # unobserved columns (a third of a pass at MovieLens-1M scale)
    full = bool(obs.all())

    def loglik(cc, qq, oo):
        if (qq.min() if full else np.min(qq, where=oo, initial=np.inf)) <= 0:
            raise ValueError("an observed sampled rank has zero probability under the current estimate")
        if dot:
            return np.array([float(cc[0] @ np.log(qq[0]))] if full else [float(cc[0, oo[0]] @ np.log(qq[0, oo[0]]))])
        return np.sum(cc * np.log(qq if full else np.where(oo, qq, 1.0)), axis=1)

    fwd, back = _em_products(K)
    if B == 1 and dot and lean:
        return _em_one(c, P, tol, max_iter, fwd, back, obs, full, bar)
    Q = fwd(P)
    ll = loglik(c, Q, obs)
    iters = np.zeros(B, dtype=np.int64)
    converged = np.zeros(B, dtype=bool)
    P_out, Q_out, ll_out = np.empty_like(P), np.empty_like(Q), np.empty(B)
    act, Pa, Qa, ca, oa, lla = np.arange(B), P, Q, c, obs, ll
    for it in range(1, max_iter + 1):
        # Qa was checked by loglik: every observed column has a positive probability
        G = back(ca / Qa if full else np.divide(ca, Qa, out=np.zeros_like(ca), where=oa))
        np.multiply(Pa, G, out=G)
        G /= G.sum(axis=1, keepdims=True)
        Pa = G
        Qa = fwd(Pa)
        new = loglik(ca, Qa, oa)
        if bar is not None:
            bar.update(1)
        done = np.abs(new - lla) <= tol * np.maximum(np.abs(new), tiny)
        lla = new
        iters[act] = it
        if done.any():
            P_out[act[done]], Q_out[act[done]], ll_out[act[done]] = Pa[done], Qa[done], lla[done]
            converged[act[done]] = True
            keep = ~done
            act, Pa, Qa, ca, oa, lla = act[keep], Pa[keep], Qa[keep], ca[keep], oa[keep], lla[keep]
            if act.size == 0:
                break
    if act.size:
        P_out[act], Q_out[act], ll_out[act] = Pa, Qa, lla
    return P_out, Q_out, ll_out, iters, converged


def _em_one(c, P, tol, max_iter, fwd, back, obs, full, bar):
    """The loop of :func:`_em` for a single fit (``dot``): the same products, updates, log-likelihood and
    stopping rule in the same order, bit for bit (pinned in the tests), without the batch's bookkeeping
    (1.2-1.7x faster at the sizes of the book's chapters, where a pass costs tens of microseconds)."""
    tiny = np.finfo(float).tiny
    oi = None if full else np.flatnonzero(obs[0])
    co = c[0] if full else c[0, oi]
    zeros = None if full else np.zeros_like(c)

    def loglik(Q):
        q = Q[0] if full else Q[0, oi]
        if q.min() <= 0:
            raise ValueError("an observed sampled rank has zero probability under the current estimate")
        return float(co @ np.log(q))

    Q = fwd(P)
    ll = loglik(Q)
    it, done = 0, False
    for it in range(1, max_iter + 1):
        # Q was checked by loglik: every observed column has a positive probability
        G = back(c / Q if full else np.divide(c, Q, out=zeros.copy(), where=obs))
        np.multiply(P, G, out=G)
        G /= G.sum(axis=1, keepdims=True)
        P = G
        Q = fwd(P)
        new = loglik(Q)
        if bar is not None:
            bar.update(1)
        done = abs(new - ll) <= tol * max(abs(new), tiny)
        ll = new
        if done:
            break
    return P, Q, np.array([ll]), np.array([it], dtype=np.int64), np.array([done])


#: EM's products go through the kernel's non-negligible entries (:func:`_em_products`) when at most this
#: fraction of them is kept
_EM_SPARSE_DENSITY = 0.35
_EM_SPARSE_REL = 1e-30


def _em_products(K):
    r"""The two products of an EM pass, :math:`P \mapsto PK` and :math:`X \mapsto XK^\top` (rows of
    ``P`` and ``X``: fits), as functions. A kernel row (a global rank or a cell) is concentrated on a
    band of sampled ranks some standard deviations wide (Jin et al. Eq. 16-17: a binomial in
    :math:`r`), so the products run over the entries at least :math:`10^{-30}` of their row's or their
    column's largest (a compressed sparse row matrix) when these are at most
    :data:`_EM_SPARSE_DENSITY` of the kernel: 13 % at :math:`N = 10^5`, :math:`n = 1000` on the grid,
    about 8x fewer operations per pass. An entry left out changes :math:`q_r = \sum_R\pi_R K_{R,r}`
    by less than :math:`10^{-30}` of its column's scale, far below the last digit, and every observed
    column keeps its largest entries, so no observed rank loses its probability. Otherwise, or for a
    small kernel, the dense products (a kernel whose every 16th row keeps more than 1.5 times that
    fraction by the row rule alone is taken as dense without the full count)."""
    dense = (lambda P: P @ K), (lambda X: X @ K.T)
    if K.size < 200_000:
        return dense
    cached = K is not None and not K.flags.writeable and _EM_SPARSE_CACHE.get(id(K))
    if cached and cached[0] is K:  # a read-only (cached) kernel: its sparse form is kept beside it
        Ks, KsT = cached[1], cached[2]
    else:
        # a quick look first: every 16th row's entries kept by the row rule alone (a subset of what the
        # full rule keeps in those rows); a clearly dense kernel skips the full pass (the products are the
        # dense ones either way)
        sub = K[::16]
        if np.count_nonzero(sub >= _EM_SPARSE_REL * sub.max(axis=1, keepdims=True)) > 1.5 * _EM_SPARSE_DENSITY * sub.size:
            return dense
        keep = K >= _EM_SPARSE_REL * K.max(axis=1, keepdims=True)
        keep |= K >= _EM_SPARSE_REL * K.max(axis=0, keepdims=True)
        nnz = np.count_nonzero(keep, axis=1)
        if nnz.sum() > _EM_SPARSE_DENSITY * K.size:
            return dense
        from scipy import sparse

        Ks = sparse.csr_matrix((K[keep], np.nonzero(keep)[1], np.concatenate([[0], np.cumsum(nnz)])), shape=K.shape)
        KsT = Ks.T.tocsr()
        if not K.flags.writeable:
            if len(_EM_SPARSE_CACHE) >= 4:
                _EM_SPARSE_CACHE.pop(next(iter(_EM_SPARSE_CACHE)))
            _EM_SPARSE_CACHE[id(K)] = (K, Ks, KsT)
    return (lambda P: np.ascontiguousarray((KsT @ P.T).T)), (lambda X: np.ascontiguousarray((Ks @ X.T).T))


#: the sparse forms of read-only kernels (the cached ones), by ``id`` with the kernel held beside it
_EM_SPARSE_CACHE: dict = {}


def _mle_em_impl(counts, K, pi0=None, tol: float = 1e-6, max_iter: int = 10_000, progress: bool = False) -> FitResult:
    r"""Plain EM for the (weighted) MLE from the uniform start (Jin et al. Eq. 20-23).

    Stops when the relative change of the log-likelihood,
    :math:`|\ell_t - \ell_{t-1}| \le \mathrm{tol}\cdot|\ell_t|`, or after ``max_iter`` passes, with a
    :class:`ConvergenceWarning`. EM converges slowly in the flat directions of :math:`\ell`; use
    :func:`mle_cnm` for a certified optimum.
    """
    tol, max_iter, N, n, c = _solver_inputs(counts, K, tol, max_iter)
    p = np.full(N, 1.0 / N) if pi0 is None else check_probability_vector(pi0, "pi0", length=N).copy()
    start = time.perf_counter()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=max_iter, desc="EM", leave=False)
    try:
        P, Q, ll, its, conv = _em(c[None, :], K, p[None, :], tol, max_iter, dot=True, bar=bar)
    finally:
        if bar is not None:
            bar.close()
    converged = bool(conv[0])
    if not converged:
        warnings.warn(f"EM did not reach relative log-likelihood change {tol:g} in {max_iter} iterations",
                      ConvergenceWarning, stacklevel=3)
    gap = float(np.max(K @ _ratio(c, Q[0])) - 1.0)
    return FitResult(P[0], float(ll[0]), int(its[0]), converged, gap, time.perf_counter() - start, "em")


def _local_maxima(g: np.ndarray) -> np.ndarray:
    """Indices of the (weak) local maxima of ``g`` over the rank grid, ends included."""
    left = np.concatenate([[True], g[1:] >= g[:-1]])
    right = np.concatenate([g[:-1] >= g[1:], [True]])
    return np.flatnonzero(left & right)


def _mle_cnm_impl(counts, K, tol: float = 1e-9, max_iter: int = 1000) -> FitResult:
    r"""The (weighted) MLE of the mixing distribution by the constrained Newton method with
    multiple support-point addition (Wang 2007; the objective is Jin et al. Eq. 19 / 22).

    Each iteration (i) computes the gradient :math:`g = K\,(\hat c / q)` over all :math:`R` (one
    :math:`O(Nn)` pass); (ii) stops if the certified gap :math:`\max_R g_R - 1 \le` ``tol``;
    (iii) adds the local maxima of :math:`g` with :math:`g_R > 1` to the support :math:`S`;
    (iv) maximises the second-order expansion of :math:`\ell` in :math:`x_r = q^{new}_r / q_r`,
    :math:`\sum_r \hat c_r[(x_r-1) - (x_r-1)^2/2] = \mathrm{const} - \tfrac12\sum_r \hat c_r (x_r-2)^2`,
    over :math:`w \ge 0`, :math:`\sum w = 1` on :math:`S` — a non-negative least-squares problem
    :math:`\min_{w\ge0}\|\mathrm{diag}(\sqrt{\hat c}/q) K_S^\top w - 2\sqrt{\hat c}\|^2
    + \lambda^2(\textstyle\sum_j w_j - 1)^2` with a large :math:`\lambda` — and normalises :math:`w`; (v) backtracks along :math:`w - \pi` until the Armijo condition holds,
    and drops support points of zero weight. The log-likelihood increases at every iteration.
    Raises a :class:`ConvergenceWarning` if ``max_iter`` is reached first.
    """
    tol, max_iter, N, n, c = _solver_inputs(counts, K, tol, max_iter)
    obs = np.flatnonzero(c > 0)
    co = c[obs]
    sq = np.sqrt(co)
    start = time.perf_counter()
    # initial support: the mode of every observed column (so every observed rank has q_r > 0)
    # and an even grid over R; uniform weights.
    modes = np.argmax(K[:, obs], axis=0)
    grid = np.unique(np.linspace(0, N - 1, min(N, 32)).round().astype(np.int64))
    S = np.union1d(modes, grid)
    w = np.full(S.size, 1.0 / S.size)

    def q_of(S, w):
        return K[S][:, obs].T @ w

    q = q_of(S, w)
    ll = float(co @ np.log(q))
    converged = False
    gap = np.inf
    it = 0
    for it in range(1, max_iter + 1):
        v = np.zeros(n)
        v[obs] = co / q
        g = K @ v
        gap = float(g.max() - 1.0)
        if gap <= tol:
            converged = True
            break
        cand = _local_maxima(g)
        cand = cand[g[cand] > 1.0]
        cand = np.union1d(cand, [int(np.argmax(g))])
        S_new = np.union1d(S, cand)
        w_old = np.zeros(S_new.size)
        w_old[np.searchsorted(S_new, S)] = w
        KS = K[S_new][:, obs]  # |S| x n_obs
        A = (sq / q)[:, None] * KS.T
        # the constraint sum(w) = 1 enters as one heavily weighted extra row (without it the
        # quadratic model is minimised by 2 * pi, i.e. no step)
        lam = 100.0  # the target 2 sqrt(c) has norm 2
        A = np.vstack([A, np.full((1, S_new.size), lam)])
        x, _ = nnls(A, np.concatenate([2.0 * sq, [lam]]), maxiter=50 * S_new.size)
        if not np.all(np.isfinite(x)) or x.sum() <= 0:
            x = w_old * (K[S_new] @ v)  # fall back on an EM step on the support
        x = x / x.sum()
        d = x - w_old
        slope = float(d @ g[S_new])
        alpha = 1.0
        for _ in range(60):
            w_try = w_old + alpha * d
            q_try = KS.T @ w_try
            # safeguard: no observed rank loses more than a factor 100 of its probability in one
            # step (the quadratic model is poor there; without it CNM can jump far off and crawl back)
            if np.all(q_try >= 1e-2 * q):
                ll_try = float(co @ np.log(q_try))
                if ll_try >= ll + alpha * slope / 3.0:
                    break
            alpha *= 0.5
        else:  # no ascent possible in floating point: we are at the optimum to rounding
            w_try, q_try, ll_try = w_old, q, ll
        keep = w_try > 0
        S, w = S_new[keep], w_try[keep] / w_try[keep].sum()
        q = KS[keep].T @ w
        if ll_try <= ll and alpha < 1e-15:
            converged = gap <= max(tol, 1e-12)
            break
        ll = float(co @ np.log(q))
    if not converged:
        warnings.warn(f"CNM stopped with certified gap {gap:.3g} > tol = {tol:g} after {it} iterations",
                      ConvergenceWarning, stacklevel=3)
    pi = np.zeros(N)
    pi[S] = w
    return FitResult(pi, ll, it, converged, gap, time.perf_counter() - start, "cnm")


# ---------------------------------------------------------------------------------------------
# per-user sample sizes (adaptive sampling, TORS Sec. 6 and Appendix H)
# ---------------------------------------------------------------------------------------------


def kernel_blocks(n_items: int, sizes, ranks, counts, replacement: bool = True, support=None):
    r"""The EM / CNM input of adaptive sampling: one block ``(K_b, c_b)`` per distinct sample size
    :math:`n_b`, where ``K_b`` holds the kernel columns :math:`P(r \mid R; n_b)` of the sampled
    ranks observed at that size (:func:`kernel_columns`, rows = ``support``) and ``c_b`` their
    user counts. ``sizes, ranks, counts`` are the output of :func:`sampled_rank_table`."""
    sizes = np.asarray(sizes, dtype=np.int64)
    ranks = np.asarray(ranks, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.float64)
    if not (sizes.shape == ranks.shape == counts.shape) or sizes.ndim != 1:
        raise ValueError("sizes, ranks and counts must be 1-d arrays of the same length")
    K = kernel_columns(n_items, sizes, ranks, replacement, support)
    return [(np.ascontiguousarray(K[:, sizes == n]), counts[sizes == n]) for n in np.unique(sizes)]


def stack_blocks(blocks):
    r"""Concatenate the blocks ``[(K_b, c_b)]`` column-wise into one kernel and one count vector.

    The mixture log-likelihood with per-user sizes (TORS Eq. 43, Appendix H Eq. 60) is
    :math:`\sum_b\sum_r c_{b,r}\log (K_b^\top\pi)_r`: a sum over *columns*, so EM, its gradient and
    the KKT gap on the stacked matrix are exactly those of the adaptive model. Every block must
    have the same number of rows (the support of :math:`\pi`)."""
    if not blocks:
        raise ValueError("blocks must hold at least one (kernel, counts) pair")
    mats, cs = [], []
    L = None
    for i, (K, c) in enumerate(blocks):
        c = np.asarray(c, dtype=np.float64).ravel()
        K = np.asarray(K, dtype=np.float64)
        if K.ndim != 2 or K.shape[1] != c.size:
            raise ValueError(f"block {i}: the kernel must have one column per count, got {K.shape} and {c.size}")
        if L is None:
            L = K.shape[0]
        elif K.shape[0] != L:
            raise ValueError(f"block {i}: every kernel must have the same number of rows ({L}), got {K.shape[0]}")
        mats.append(K)
        cs.append(c)
    K = mats[0] if len(mats) == 1 else np.hstack(mats)
    return np.ascontiguousarray(K, dtype=np.float64), np.concatenate(cs)


def mle_em_blocks(blocks, pi0=None, tol: float = 1e-6, max_iter: int = 10_000, progress: bool = False) -> FitResult:
    r"""Adaptive EM (TORS Sec. 6.2 and Appendix H Eq. 60-62) on blocks ``[(K_b, c_b)]``.

    In the book's notation, user :math:`u` has sample size :math:`n_u` and sampled rank
    :math:`r_u`; the E-step's posterior is :math:`\phi_{uR} = \pi_R P(r_u\mid R; n_u) / q_u`,
    :math:`q_u = \sum_{R'} \pi_{R'} P(r_u \mid R'; n_u)` (Eq. 61), and the M-step
    :math:`\pi^{new}_R = \frac1M\sum_u \phi_{uR}` (Eq. 62). Users with the same :math:`(n_u, r_u)`
    have the same posterior, so with :math:`c_{n,r}` users per pair

    .. math:: \pi^{new}_R = \pi_R \sum_{(n,r)} \frac{c_{n,r}}{M}\,\frac{P(r\mid R;n)}{q_{n,r}},

    which is chapter 6's EM update (Jin et al. Eq. 21) with the kernel columns of every size side
    by side (:func:`stack_blocks`). Cost per pass: the non-zeros of the kernel columns of the
    observed pairs, independent of :math:`M`. Convergence, the certified gap and the warning are
    those of :func:`mle_em`. The rows of every block are the support of :math:`\pi` (any set of
    global ranks), so the result has one entry per row.
    """
    K, c = stack_blocks(blocks)
    with _single_blas_thread():
        return _mle_em_impl(c, K, pi0, tol, max_iter, progress)


def mle_cnm_blocks(blocks, tol: float = 1e-9, max_iter: int = 1000) -> FitResult:
    r"""The exact MLE with per-user sample sizes (TORS Eq. 43) by the constrained Newton method of
    :func:`mle_cnm` on the stacked blocks (:func:`stack_blocks`); KKT-certified to ``tol``."""
    K, c = stack_blocks(blocks)
    with _single_blas_thread():
        return _mle_cnm_impl(c, K, tol, max_iter)


# ---------------------------------------------------------------------------------------------
# per-user catalogue sizes (pools)
# ---------------------------------------------------------------------------------------------
def check_n_items(n_items, n_users: int | None = None, sample_size=None):
    r"""``n_items`` as the estimators take it: one catalogue size :math:`N` (an int >= 2) or one
    pool size :math:`N_u` per user (a 1-d integer array of length ``n_users``, each >= 2 and >= the
    user's sample size :math:`n_u`). Returns an ``int`` for a scalar or an array of equal sizes (so
    equal pools take exactly the one-:math:`N` code path), otherwise an int64 array. Errors name
    ``n_items`` and the allowed range."""
    if np.ndim(n_items) == 0:
        return check_int(n_items, "n_items", low=2)
    arr = np.asarray(n_items)
    if arr.ndim != 1:
        raise ValueError(f"n_items must be an int or a 1-d array of per-user catalogue sizes, got shape {arr.shape}")
    if n_users is not None and arr.size != n_users:
        raise ValueError(f"n_items must be an int or have one catalogue size per user ({n_users} sampled ranks), "
                         f"got length {arr.size}")
    what = "n_items must hold one integer catalogue size >= 2 per user"
    if arr.size == 0 or arr.dtype.kind not in "iuf":
        raise ValueError(f"{what}, got {'an empty array' if arr.size == 0 else f'dtype {arr.dtype}'}")
    bad = ~np.isfinite(arr) | (arr != np.round(arr)) | (arr < 2) if arr.dtype.kind == "f" else arr < 2
    if np.any(bad):
        u = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{what}, got {arr[u].item()!r} (user {u})")
    pools = arr.astype(np.int64)
    if sample_size is not None:
        n = np.asarray(sample_size)
        if n.ndim == 0 or n.shape == pools.shape and n.dtype.kind in "iu":
            n = np.broadcast_to(n, pools.shape)
        if n.shape == pools.shape and np.any(pools < n):
            u = int(np.flatnonzero(pools < n)[0])
            raise ValueError(f"n_items must be >= sample_size for every user (N_u >= n_u); user {u} has "
                             f"n_items {pools[u]} < sample_size {int(n[u])}")
    return int(pools[0]) if np.all(pools == pools[0]) else pools


def _pool_reference(sampled_ranks, n_items, sample_size, replacement, method=None) -> int:
    """The catalogue size of the common grid for per-user ``n_items``: the largest pool, after
    checking the pools against the ranks and sample sizes (and that the kernel is pool-free)."""
    r = check_ranks(sampled_ranks, "sampled_ranks")
    pools = check_n_items(n_items, r.size, sample_size if np.ndim(sample_size) == 0 else np.asarray(sample_size))
    _check_pool_replacement(pools, replacement, method)
    return int(np.max(pools))


def _check_pool_replacement(pools, replacement, method=None) -> None:
    """Per-user catalogue sizes (``pools`` an array) need the with-replacement kernel (``method``
    ``"sampled"`` needs no kernel)."""
    if not isinstance(pools, int) and pools is not None and method != "sampled" \
            and not check_bool(replacement, "replacement"):
        raise ValueError("per-user n_items (catalogue sizes) need replacement=True: without replacement the "
                         "hypergeometric kernel depends on each pool, not only on the rank fraction; pass one "
                         "n_items or decoys drawn with replacement")


# ---------------------------------------------------------------------------------------------
# MES
# ---------------------------------------------------------------------------------------------
def _entropy(pi):
    p = pi[pi > 0]
    return float(-(p @ np.log(p)))


def mes_objective(pi, p_tilde, K, a: float) -> float:
    r"""The MES objective :math:`a\,H(\pi) - \sum_r \tilde P(r)(q_r(\pi) - \tilde P(r))^2`
    (TORS Eq. 35-36 with :math:`a = \eta/n`; Jin et al. Eq. 25-26 with :math:`a = \eta`)."""
    pt, K = _check_mes_inputs(p_tilde, K)
    a = _check_positive(a, "a")
    pi = check_probability_vector(pi, "pi", length=K.shape[0])
    q = K.T @ pi
    return a * _entropy(np.asarray(pi, dtype=np.float64)) - float(pt @ (q - pt) ** 2)


def _check_mes_inputs(p_tilde, K) -> tuple[np.ndarray, np.ndarray]:
    """The sampled-rank distribution (length n, a probability vector) and a kernel of shape (N, n)
    with finite, non-negative entries."""
    Km = as_float_array(K, "K")
    if Km.ndim != 2 or Km.shape[0] < 2 or Km.shape[1] < 2:
        raise ValueError(f"K must be a kernel matrix of shape (N, n) with N, n >= 2, got shape {Km.shape}")
    if not np.all(np.isfinite(Km)) or np.any(Km < 0):
        raise ValueError("K must hold finite, non-negative probabilities")
    pt = check_probability_vector(p_tilde, "p_tilde", length=Km.shape[1])
    return pt, Km


#: the gradient at which a stalled MES Newton solve still counts as converged (floating-point accuracy)
_MES_STALL_GRAD = 1e-7


def _mes_dual_impl(p_tilde, K, a: float, tol: float = 1e-10, max_iter: int = 200, widths=None,
                   check: bool = True) -> FitResult:
    r"""MES through its Lagrange dual, solved by Newton's method.

    Write :math:`E(q) = \sum_{r\in O}\tilde P(r)(q_r - \tilde P(r))^2` over the observed ranks
    :math:`O` and dualise :math:`q = K^\top\pi` with multipliers :math:`a\mu_r`, :math:`r \in O`.
    The conjugates are :math:`\sup_{\pi\in\Delta} a H(\pi) + a\mu^\top K_O^\top\pi =
    a\log\sum_R e^{(K_O\mu)_R}` and :math:`\sup_q -E(q) - a\mu^\top q =
    \sum_r [a^2\mu_r^2/(4\tilde P(r)) - a\mu_r\tilde P(r)]`, so the dual is

    .. math:: \min_\mu\ f(\mu) = \log\sum_R e^{(K_O\mu)_R} - \mu^\top\tilde P_O
              + \frac a4\sum_{r\in O}\frac{\mu_r^2}{\tilde P(r)},

    smooth and strictly convex, with gradient :math:`K_O^\top\pi(\mu) - \tilde P_O + a\mu/(2\tilde P_O)`
    and Hessian :math:`K_O^\top(\mathrm{diag}\,\pi - \pi\pi^\top)K_O + \mathrm{diag}(a/(2\tilde P_O))`,
    where :math:`\pi(\mu) = \mathrm{softmax}(K_O\mu)`. Strong duality holds (Slater), and the
    primal optimum is :math:`\pi^* = \pi(\mu^*)`: positive everywhere, unique. Newton steps with
    backtracking; converges when :math:`\|\nabla f\|_\infty \le` ``tol`` (the primal KKT residual
    in units of probability). When the Newton decrement :math:`-\nabla f^\top\Delta\mu` falls
    below :math:`10^{-13}\max(1, |f|)` (no step can lower :math:`f` measurably) the full Newton
    step is still taken if it lowers the gradient (with a large entropy weight :math:`a` the
    decrement is tiny while the gradient is not); otherwise the solver has stalled, and it reports
    convergence only if the gradient is at most ``max(tol, 1e-7)`` (the accuracy attainable in
    floating point, set by the conditioning of the Hessian). In every other case - the iteration
    cap, a stall with a larger gradient, a failed line search - ``stopped_by_tol`` is False, a
    :class:`ConvergenceWarning` says why, and ``gap`` is the gradient at the returned point. The
    Hessian is accumulated over row blocks of the kernel restricted to their band of sampled
    ranks, which cuts its cost several-fold at :math:`n = 500`. From :data:`_MES_PCG_MIN` observed ranks
    the Newton systems after the first are solved by conjugate gradients preconditioned by the factor of
    an earlier iterate's Hessian (:func:`_stale_newton_step`; a fresh factorisation when that is slow), and
    the objective, gradient and Hessian-vector products use the kernel's entries above :math:`10^{-30}`
    of their row maximum: the same stopping rule, so the same optimum to its tolerance (the tests compare
    with the loop that factorises at every step: cell masses within :math:`10^{-9}` of their largest).

    On a grid (``widths``: the number of global ranks of each kernel row, a cell of
    :class:`~itemsampling.estimators.grid.RankGrid` with :math:`P` uniform within it) the entropy is
    over ranks, :math:`H = -\sum_c w_c\log(w_c/|c|)`, and the dual gains the widths as
    multiplicities, :math:`\log\sum_c |c|\,e^{(\bar K_O\mu)_c}`; beyond 2,000 observed sampled
    ranks its Newton system is solved inexactly by preconditioned conjugate gradients
    (:func:`_newton_cg_step`: :math:`O(Cn)` per product instead of an :math:`O(n^3)` factorisation).
    The result then holds the cell masses. ``check=False`` skips the scan of the kernel's entries
    (for a kernel this package built: :func:`_fit`).
    """
    given = K
    pt, K = _check_mes_inputs(p_tilde, K) if check else (np.asarray(p_tilde, dtype=np.float64), K)
    if isinstance(given, np.ndarray) and given.dtype == np.float64:
        K = given  # the checked array itself, not its float64 copy (a cached kernel keeps its sparse form)
    if widths is not None:
        widths = np.asarray(widths, dtype=np.float64)
        if widths.shape != (K.shape[0],) or np.any(widths < 1):
            raise ValueError("widths must hold one width >= 1 per kernel row")
    start = time.perf_counter()
    a, pi, it, converged, gmax, why = _mes_newton(K, pt, a, tol, max_iter, None if widths is None else
                                                  np.log(widths), None if widths is None else _MES_DIRECT)
    if not converged:
        warnings.warn(f"MES dual Newton {why} after {it} iterations; its gradient (KKT residual) is "
                      f"{gmax:.3g} > tol = {tol:g}: the result is not the MES optimum", ConvergenceWarning,
                      stacklevel=3)
    pi = pi / pi.sum()
    pos = pi > 0  # the entropy over ranks: of the cells, each spread over its |c| ranks
    H = _entropy(pi) if widths is None else float(-(pi[pos] @ np.log(pi[pos] / widths[pos])))
    obj = a * H - float(pt @ (K.T @ pi - pt) ** 2)  # TORS Eq. 35-36 (as mes_objective)
    return FitResult(pi, obj, it, converged, gmax, time.perf_counter() - start,
                     "dual" if widths is None else "grid-dual")


#: observed sampled ranks up to which the grid MES Newton system is factorised directly
_MES_DIRECT = 2000
#: rows per block of the MES Hessian (:func:`_mes_newton`): a kernel row is non-negligible on about
#: 24 standard deviations of sampled ranks, and a block of rows on the union of its rows' bands, so
#: blocks of 128 rows need 2.5-6x fewer products than blocks of 512 at N = 20,720-25,815, n = 500-1,000
#: (the arithmetic of each entry is the same; only its grouping in the sum changes)
_MES_BAND_ROWS = 128


def _newton_cg_step(Ko, pi, q, reg, grad, gmax):
    r"""Inexact Newton step of the MES dual for many observed ranks: conjugate gradients on
    :math:`H = \bar K_O^\top(\mathrm{diag}\,\pi - \pi\pi^\top)\bar K_O + \mathrm{diag}(reg)` through
    Hessian-vector products (:math:`O(Cn)` each, never the :math:`n\times n` matrix or its
    :math:`O(n^3)` factorisation), Jacobi-preconditioned, to the relative residual
    :math:`\min(0.1, \sqrt{\|\nabla f\|_\infty})` (superlinear convergence; Nocedal & Wright, Thm. 7.2)."""
    from scipy.sparse.linalg import LinearOperator, cg

    k = grad.size
    diag = np.asarray(Ko.multiply(Ko).T @ pi).ravel() - q * q + reg

    def hv(v):
        return Ko.T @ (pi * (Ko @ v)) - q * (q @ v) + reg * v

    H = LinearOperator((k, k), matvec=hv, dtype=np.float64)
    P = LinearOperator((k, k), matvec=lambda v: v / diag, dtype=np.float64)
    step, _ = cg(H, -grad, rtol=min(0.1, np.sqrt(gmax)), maxiter=10 * k, M=P)
    return step


#: the sparse forms of read-only (cached) kernels for :func:`_stale_newton_step`, by ``id`` with the kernel
_MES_SPARSE_CACHE: dict = {}


def _sparse_columns(K, obs):
    r"""The columns ``obs`` of ``K`` as a CSR matrix of the entries at least :math:`10^{-30}` of their row's
    largest (over those columns; for a read-only, cached, kernel over all its columns: its sparse form is
    kept beside it, by ``id`` with the kernel held too, and the columns ``obs`` taken from it). The
    entries left out are below :math:`10^{-30}` of their row's scale: they change no Hessian-vector
    product of :func:`_stale_newton_step` beyond its last digit."""
    from scipy import sparse

    def build(Ko):
        return sparse.csr_matrix(np.where(Ko >= 1e-30 * Ko.max(axis=1, keepdims=True), Ko, 0.0))

    if K.flags.writeable:
        return build(np.ascontiguousarray(K[:, obs]))
    got = _MES_SPARSE_CACHE.get(id(K))
    if got is None or got[0] is not K:
        if len(_MES_SPARSE_CACHE) >= 4:
            _MES_SPARSE_CACHE.pop(next(iter(_MES_SPARSE_CACHE)))
        got = (K, build(np.ascontiguousarray(K)))
        _MES_SPARSE_CACHE[id(K)] = got
    return got[1] if obs.size == K.shape[1] else got[1][:, obs]


#: the most PCG iterations :func:`_stale_newton_step` may take, the smallest relative residual it asks for,
#: and the iterations beyond which the next Newton iterate factorises its Hessian afresh
_MES_PCG_ITER = 12
_MES_PCG_RTOL = 1e-12
_MES_PCG_REFRESH = 5
#: observed sampled ranks from which the MES Newton loop takes PCG steps (:func:`_stale_newton_step`): below,
#: a fresh factorisation costs less than a PCG solve. Measured (least CPU time of 5 runs per fit, one BLAS
#: thread): N = 3,706, n = 146: 41 -> 32 ms; N = 25,815, n = 500 (grid): 66 -> 37 ms; n = 1,000: about 2x
_MES_PCG_MIN = 100


def _stale_newton_step(Ko, Ks, pi, q, reg, grad, factor, gmax):
    r"""The Newton step :math:`-H^{-1}\nabla f` of the MES dual at the current point without forming or
    factorising its Hessian :math:`H = K_O^\top(\mathrm{diag}\,\pi - \pi\pi^\top)K_O + \mathrm{diag}(reg)`:
    preconditioned conjugate gradients on Hessian-vector products (:math:`O(\mathrm{nnz}(K_O))` each, on
    ``Ks``, the entries of ``Ko`` >= 1e-30 of their row maximum, as the CG path), preconditioned by the
    Cholesky ``factor`` of the Hessian of an earlier iterate (:math:`O(n^2)` per solve), to the relative
    residual :math:`\min(0.1, \|\nabla f\|_\infty)` (at least :data:`_MES_PCG_RTOL`): an inexact Newton step
    whose residual shrinks with the gradient keeps Newton's quadratic convergence (Dembo, Eisenstat &
    Steihaug 1982; Nocedal & Wright, Thm. 7.2), and the Hessian changes little between iterates, so a few
    iterations reach it for a fraction of the :math:`O(C\bar b^2 + n^3)` cost of a fresh factorisation.
    The stopping rule of the Newton loop is unchanged, so the optimum is the factorised loop's to its
    tolerance. Returns ``None`` (the caller factorises afresh) when :data:`_MES_PCG_ITER` iterations do
    not reach it, or on a direction of non-positive curvature; with the step, the iterations taken."""
    rtol = max(min(0.1, gmax), _MES_PCG_RTOL)
    b = -grad
    bnorm = float(np.sqrt(b @ b))
    if bnorm == 0.0:
        return np.zeros_like(b), 0
    x = np.zeros_like(b)
    r = b.copy()
    z = linalg.cho_solve(factor, r, check_finite=False)
    d = z.copy()
    rz = float(r @ z)
    for it in range(1, _MES_PCG_ITER + 1):
        Hd = Ks.T @ (pi * (Ks @ d)) - q * (q @ d) + reg * d
        curv = float(d @ Hd)
        if not curv > 0.0 or not rz > 0.0:
            return None, it
        alpha = rz / curv
        x += alpha * d
        r -= alpha * Hd
        if float(np.sqrt(r @ r)) <= rtol * bnorm:
            return x, it
        z = linalg.cho_solve(factor, r, check_finite=False)
        rz_new = float(r @ z)
        d = z + (rz_new / rz) * d
        rz = rz_new
    return None, _MES_PCG_ITER


def _mes_newton(K, pt, a, tol, max_iter, logw=None, cg_above=None):
    r"""The one Newton loop of the MES dual (TORS Eq. 35-36; derivation and stopping rules in
    :func:`mes_dual`): minimise :math:`f(\mu) = \log\sum_R e^{(K_O\mu)_R + \log w_R} - \mu^\top\tilde P_O
    + \frac a4\sum_{r\in O}\mu_r^2/\tilde P(r)` from :math:`\mu = 0`. ``K``: the kernel (rows: ranks, or
    cells of widths :math:`w_R` with ``logw`` their logs, as :func:`grid_mes_dual` passes them;
    ``None``: width 1, the dense problem), ``pt`` the sampled-rank distribution :math:`\tilde P`; ``a``,
    ``tol`` and ``max_iter`` are checked here. Steps: the Newton system factorised directly (Hessian
    over the row bands of :func:`_row_bands`) or, beyond ``cg_above`` observed ranks, solved inexactly
    by :func:`_newton_cg_step` on the kernel's entries above :math:`10^{-30}` of their row maximum.
    Returns ``(a, pi, iterations, converged, gmax, why)``: :math:`\pi(\mu)` (not renormalised), the
    sup-norm of the gradient at the returned point and, when not converged, why."""
    a = _check_positive(a, "a")
    tol = _check_positive(tol, "tol")
    max_iter = check_int(max_iter, "max_iter", low=1)
    obs = np.flatnonzero(pt > 0)
    po = pt[obs]
    Ko = np.ascontiguousarray(K[:, obs])
    reg = a / (2.0 * po)
    cg = cg_above is not None and obs.size > cg_above
    if cg:  # products with the kernel's non-negligible entries only (>= 1e-30 of the row maximum)
        from scipy import sparse

        Kp = sparse.csr_matrix(np.where(Ko >= 1e-30 * Ko.max(axis=1, keepdims=True), Ko, 0.0))
    else:
        Kp, bands = Ko, _row_bands(Ko, block=_MES_BAND_ROWS)

    factor, reuse, Ks = None, True, []

    def sparse_K():  # the kernel's entries >= 1e-30 of their row maximum, for the PCG products (made once)
        if not Ks:
            Ks.append(_sparse_columns(K, obs))
        return Ks[0]

    pcg = not cg and po.size >= _MES_PCG_MIN
    if pcg:  # the objective and gradient on the same sparse form as the PCG products (O(nnz) each)
        Kp = sparse_K()

    def f_val(mu):  # f and pi = softmax(z): one pass of exp (a stable log-sum-exp, shifted by max z)
        z = Kp @ mu if logw is None else Kp @ mu + logw
        zmax = float(np.max(z))
        e = np.exp(z - zmax)
        total = float(e.sum())
        return zmax + np.log(total) - mu @ po + 0.5 * float(mu @ (reg * mu)), e / total

    def grad_max(mu, pi):
        return float(np.max(np.abs(Kp.T @ pi - po + reg * mu)))

    mu = np.zeros(po.size)
    f, pi = f_val(mu)
    converged = False
    why = f"reached the iteration cap max_iter = {max_iter}"
    gmax = np.inf
    it = 0
    for it in range(1, max_iter + 1):
        q = Kp.T @ pi
        grad = q - po + reg * mu
        gmax = float(np.max(np.abs(grad)))
        if gmax <= tol:
            converged = True
            why = ""
            break
        if cg:
            step = _newton_cg_step(Kp, pi, q, reg, grad, gmax)
        else:
            step = None
            if factor is not None and reuse and pcg:  # PCG, preconditioned by an earlier factor
                step, used = _stale_newton_step(Kp, sparse_K(), pi, q, reg, grad, factor, gmax)
                reuse = used <= _MES_PCG_REFRESH  # a slow solve: the next iterate factorises afresh
            if step is None:
                H = _block_products(_blocks(Ko, bands), Ko.shape[1], pi, sums=False)[0] - np.outer(q, q) + np.diag(reg)
                try:
                    factor = linalg.cho_factor(H, check_finite=False)
                    step = -linalg.cho_solve(factor, grad, check_finite=False)
                    reuse = True
                except (linalg.LinAlgError, ValueError):
                    factor = None
                    step = -linalg.lstsq(H, grad, check_finite=False)[0]
        dec = float(grad @ step)
        if -dec <= 1e-13 * max(1.0, abs(f)):
            # Newton decrement at rounding level: f cannot be lowered measurably. Take the full step
            # if it still lowers the gradient (large a: tiny decrement, large gradient) ...
            f_try, pi_try = f_val(mu + step)
            if f_try <= f + 1e-12 * max(1.0, abs(f)) and grad_max(mu + step, pi_try) < gmax:
                mu, f, pi = mu + step, f_try, pi_try
                continue
            # ... else the solver has stalled: converged only at floating-point accuracy
            converged = gmax <= max(tol, _MES_STALL_GRAD)
            why = "" if converged else "stalled (Newton decrement at rounding level)"
            break
        if dec >= 0:  # not a descent direction (rounding): fall back on the gradient
            step, dec = -grad, -float(grad @ grad)
        t = 1.0
        for _ in range(60):
            f_new, pi_new = f_val(mu + t * step)
            if f_new <= f + 1e-4 * t * dec:
                break
            t *= 0.5
        else:
            why = "stopped: the line search found no decrease"
            break
        mu, f, pi = mu + t * step, f_new, pi_new
    return a, pi, it, converged, grad_max(mu, pi), why


def mle_em(counts, K, pi0=None, tol: float = 1e-6, max_iter: int = 10_000, progress: bool = False) -> FitResult:
    K = check_kernel(K, "K")
    with _single_blas_thread():
        return _mle_em_impl(counts, K, pi0, tol, max_iter, progress)


def mle_cnm(counts, K, tol: float = 1e-9, max_iter: int = 1000) -> FitResult:
    K = check_kernel(K, "K")
    with _single_blas_thread():
        return _mle_cnm_impl(counts, K, tol, max_iter)


def mes_dual(p_tilde, K, a: float, tol: float = 1e-10, max_iter: int = 200) -> FitResult:
    with _single_blas_thread():
        return _mes_dual_impl(p_tilde, K, a, tol, max_iter)


mle_em.__doc__ = _mle_em_impl.__doc__
mle_cnm.__doc__ = _mle_cnm_impl.__doc__
mes_dual.__doc__ = _mes_dual_impl.__doc__


def mes_cvxpy(p_tilde, K, a: float, solver: str = "CLARABEL", **solver_options) -> FitResult:
    r"""MES (TORS Eq. 36) solved directly in the primal with cvxpy and an open conic solver
    (Clarabel by default; SCS also works): maximise ``a * sum(entr(pi)) - sum(P~ * (K^T pi - P~)^2)``
    subject to ``pi >= 0``, ``sum(pi) == 1``, over the observed ranks only."""
    import cvxpy as cp

    pt, K = _check_mes_inputs(p_tilde, K)
    a = _check_positive(a, "a")
    obs = np.flatnonzero(pt > 0)
    N = K.shape[0]
    start = time.perf_counter()
    pi = cp.Variable(N, nonneg=True)
    resid = K[:, obs].T @ pi - pt[obs]
    objective = cp.Maximize(a * cp.sum(cp.entr(pi)) - cp.sum(cp.multiply(pt[obs], cp.square(resid))))
    problem = cp.Problem(objective, [cp.sum(pi) == 1])
    problem.solve(solver=solver, **solver_options)
    if problem.status not in ("optimal", "optimal_inaccurate") or pi.value is None:
        raise ValueError(f"cvxpy could not solve the MES problem (status {problem.status})")
    p = np.maximum(np.asarray(pi.value, dtype=np.float64), 0.0)
    p /= p.sum()
    gap = mes_primal_gap(p, pt, K, a)
    return FitResult(p, mes_objective(p, pt, K, a), int(problem.solver_stats.num_iters or 0),
                     problem.status == "optimal", gap, time.perf_counter() - start, f"cvxpy-{solver.lower()}")


def mes_primal_gap(pi, p_tilde, K, a: float) -> float:
    r"""The KKT residual of :func:`mes_dual` (the sup-norm of its dual gradient, in units of
    probability) at the multipliers a primal point implies, so that a primal solver's answer (e.g.
    :func:`mes_cvxpy`) is checked as :func:`mes_dual`'s is, instead of trusting its status.

    At the optimum, the stationarity of :math:`-E(q) - a\mu^\top q` in :math:`q` gives
    :math:`\mu_r = -2\tilde P(r)(q_r - \tilde P(r))/a` with :math:`q = K_O^\top\pi`; the dual gradient
    there, :math:`K_O^\top\pi(\mu) - \tilde P_O + a\mu/(2\tilde P_O)`, reduces to
    :math:`K_O^\top(\pi(\mu) - \pi)` with :math:`\pi(\mu) = \mathrm{softmax}(K_O\mu)`: zero exactly
    when :math:`\pi` is the MES optimum (TORS Eq. 36; Jin et al. Eq. 25-26)."""
    pt, Km = _check_mes_inputs(p_tilde, K)
    a = _check_positive(a, "a")
    p = check_probability_vector(pi, "pi", length=Km.shape[0])
    obs = np.flatnonzero(pt > 0)
    Ko = Km[:, obs]
    q = Ko.T @ p
    mu = -2.0 * pt[obs] * (q - pt[obs]) / a
    z = Ko @ mu
    soft = np.exp(z - logsumexp(z))
    return float(np.max(np.abs(Ko.T @ (soft - p))))


# ---------------------------------------------------------------------------------------------
# BV baseline
# ---------------------------------------------------------------------------------------------
def project_to_simplex(v) -> np.ndarray:
    r"""Euclidean projection of ``v`` onto the probability simplex (sort-based; Duchi et al. 2008)."""
    v = as_float_array(v, "v")
    if v.ndim != 1 or v.size == 0 or not np.all(np.isfinite(v)):
        raise ValueError(f"v must be a non-empty, finite 1-d array, got shape {v.shape}")
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1.0
    idx = np.arange(1, v.size + 1)
    rho = np.flatnonzero(u - css / idx > 0)[-1]
    theta = css[rho] / (rho + 1.0)
    return np.maximum(v - theta, 0.0)


def bv_rank_distribution(p_tilde, n_items: int, sample_size: int, gamma: float = 0.1, prior=None,
                         replacement: bool = True, project: bool = True, chunk: int = 2048) -> np.ndarray:
    r"""The BV baseline (Jin et al. Eq. 15; TORS Eq. 28):
    :math:`\widehat P(R) = \sum_r \tilde P(r)\,[\widehat F_{R}(r) - \widehat F_{R-1}(r)]`, where
    :math:`\widehat F_K` is the BV corrected Recall@K (Krichene & Rendle Eq. 25, with ``gamma``
    and ``prior``, uniform by default) from
    :func:`itemsampling.estimators.corrected.corrected_metrics` and :math:`\widehat F_0 = 0`.

    Because the BV solution is linear in the metric and Recall@N corrects to the constant 1, the
    raw estimate sums to 1; it may have negative entries. ``project=True`` returns its Euclidean
    projection onto the simplex. Costs one BV factorisation and right-hand sides for all N
    cut-offs (computed ``chunk`` at a time).
    """
    N, n = check_sizes(n_items, sample_size)
    pt = check_probability_vector(p_tilde, "p_tilde", length=n)
    chunk = check_int(chunk, "chunk", low=1)
    replacement = check_bool(replacement, "replacement")
    check_memory(8.0 * N * (min(chunk, N) * 2 + 4), f"the BV rank distribution over {N} items", "n_items or chunk")
    project = check_bool(project, "project")
    recall = np.empty(N)
    for lo in range(0, N, chunk):
        ks = list(range(lo + 1, min(N, lo + chunk) + 1))
        F = corrected_metrics("recall", ks, N, n, "bv", prior=prior, gamma=gamma, replacement=replacement)
        recall[lo:lo + len(ks)] = pt @ F
    P = np.diff(np.concatenate([[0.0], recall]))
    return project_to_simplex(P) if project else P


# ---------------------------------------------------------------------------------------------
# public entry point
# ---------------------------------------------------------------------------------------------
#: The one option table of the rank-distribution fits: method -> its options and their defaults
#: (``None``: the solver's own default). The one fit ``_fit`` (behind :func:`fit_rank_distribution`,
#: :func:`itemsampling.estimators.distribution.grid_fit_rank_distribution` and the estimates) and
#: :func:`itemsampling.estimators.estimate_metrics` read it, through :func:`_fit_options`.
OPTIONS = {
    "mle": {"solver": "em", "tol": None, "max_iter": None},
    "wmle": {"solver": "em", "tol": None, "max_iter": None, "weight": "ndcg", "C": 10.0},
    "mes": {"solver": "dual", "tol": None, "max_iter": None, "eta": 0.001, "eta_scaling": "tors"},
    "bv": {"gamma": 0.1, "prior": None, "project": True},
}
#: the solvers of each method (the default is in :data:`OPTIONS`); MES on the grid has its dual Newton only
SOLVERS = {"mle": ("cnm", "em"), "wmle": ("cnm", "em"), "mes": ("dual", "cvxpy")}


def _fit_options(method: str, params: dict, per_user: bool = False, grid: bool = False):
    """The one option check of the fits: ``(opts, kw)`` with ``opts`` the options of ``method``
    (:data:`OPTIONS`) updated by ``params`` and ``kw`` the solver's ``tol`` / ``max_iter`` when set.
    Refuses, naming them, an unknown method, a method without per-user sample sizes when
    ``per_user`` (:data:`PER_USER_SIZE_METHODS`), and unknown options (on the grid, MES takes no
    ``solver`` and BV is not a fit)."""
    methods = tuple(m for m in OPTIONS if m != "bv") if grid else DISTRIBUTION_METHODS
    if method not in methods and not (grid and per_user):
        raise ValueError(f"method must be one of {methods}{' on the grid' if grid else ''}, got {method!r}")
    if per_user and method not in PER_USER_SIZE_METHODS:
        raise ValueError(f"method {method!r} needs one sample_size for every user; with per-user sample sizes "
                         f"(adaptive sampling) use method {' or '.join(map(repr, PER_USER_SIZE_METHODS))}")
    table = {k: v for k, v in OPTIONS[method].items() if not (grid and method == "mes" and k == "solver")}
    unknown = set(params) - set(table)
    if unknown:
        raise ValueError(f"unknown parameter(s) {sorted(unknown)} for method {method!r}; allowed: {sorted(table)}")
    opts = {**table, **params}
    return opts, {k: opts[k] for k in ("tol", "max_iter") if opts.get(k) is not None}


def _solver_error(method: str, solver) -> ValueError:
    return ValueError(f"solver must be {' or '.join(map(repr, SOLVERS[method]))} for method {method!r}, "
                      f"got {solver!r}")


def fit_rank_distribution(sampled_ranks, n_items: int, sample_size: int, method: str,
                          replacement: bool = True, **params) -> FitResult:
    r"""As :func:`estimate_rank_distribution`, but returns the :class:`FitResult` (objective,
    iterations, convergence, certified gap, solver time). With per-user catalogue sizes
    (``n_items`` an array) the distribution is over the common grid of rank fractions of the
    largest pool (module docstring, "Per-user catalogue sizes")."""
    if np.ndim(n_items) > 0:
        n_items = _pool_reference(sampled_ranks, n_items, sample_size, replacement)
    N = check_int(n_items, "n_items", low=2)
    r, n = check_sampled_ranks(sampled_ranks, N, sample_size)
    return _fit(r, N, n, method, check_bool(replacement, "replacement"), params)


def _fit(r, N: int, n, method: str, replacement: bool, params: dict, grid=None) -> FitResult:
    r"""The one rank-distribution fit, on validated ranks ``r`` with one sample size ``n`` (an int)
    or one per user (an array; MLE only, TORS Eq. 43 and Appendix H: one kernel column per distinct
    :math:`(n_u, r_u)` pair, :func:`sampled_rank_table`). Over the global ranks ``1..N``
    (``grid=None``: the kernel :func:`cached_kernel`, or :func:`kernel_columns` with per-user sizes)
    or over the cells of a :class:`~itemsampling.estimators.grid.RankGrid` (its kernel
    :func:`~itemsampling.estimators.grid.grid_kernel`; EM from the uniform :math:`P`, cell masses
    :math:`|c|/N`; MES with the cell widths, :func:`_mes_dual_impl`). Options as
    :func:`estimate_rank_distribution` (:data:`OPTIONS`; on a grid MES has its dual Newton only and
    BV is not a fit)."""
    per_user = not isinstance(n, int)
    opts, kw = _fit_options(method, params, per_user=per_user, grid=grid is not None)
    pi0 = None if grid is None else grid.widths / N
    if per_user:
        sizes, ranks, counts = sampled_rank_table(r, n)
        if grid is None:  # every observed (n, r) pair is one column; one block holds them all
            blocks = [(kernel_columns(N, sizes, ranks, replacement), counts.astype(np.float64))]
        else:  # the grid-kernel columns of the observed pairs only (never a cells x n_max kernel)
            blocks = [(grid_kernel_columns(grid, sizes, ranks, replacement), counts.astype(np.float64))]
        if opts["solver"] == "cnm":
            res = mle_cnm_blocks(blocks, **kw)
        elif opts["solver"] == "em":
            res = mle_em_blocks(blocks, pi0=pi0, **kw)
        else:
            raise _solver_error(method, opts["solver"])
        return res if grid is None else _on_grid(res, grid)
    counts = _rank_histogram(r, n)  # r: checked by the entry point
    p_tilde = counts / counts.sum()
    if method == "bv":
        start = time.perf_counter()
        P = bv_rank_distribution(p_tilde, N, n, gamma=opts["gamma"], prior=opts["prior"],
                                 replacement=replacement, project=opts["project"])
        return FitResult(P, np.nan, 1, True, np.nan, time.perf_counter() - start, "bv")
    K = cached_kernel(N, n, replacement) if grid is None else grid_kernel(grid, n, replacement)
    if method in ("mle", "wmle"):
        weights = counts if method == "mle" else counts * wmle_weights(n, opts["weight"], opts["C"])
        if opts["solver"] == "cnm":
            res = mle_cnm(weights, K, **kw)
        elif opts["solver"] == "em":
            res = mle_em(weights, K, pi0=pi0, **kw)
        else:
            raise _solver_error(method, opts["solver"])
        return res if grid is None else _on_grid(res, grid)
    a = mes_scale(opts["eta"], n, opts["eta_scaling"])
    if grid is not None:
        with _single_blas_thread():
            return _on_grid(_mes_dual_impl(p_tilde, K, a, widths=grid.widths, check=False, **kw), grid)
    if opts["solver"] == "dual":
        return mes_dual(p_tilde, K, a, **kw)
    if opts["solver"] == "cvxpy":
        if kw:
            raise ValueError("tol and max_iter are not used by solver 'cvxpy'")
        return mes_cvxpy(p_tilde, K, a)
    raise _solver_error(method, opts["solver"])


def _on_grid(res: FitResult, grid) -> FitResult:
    """``res`` as a fit on ``grid``: the solver named ``"grid-..."``, the grid attached."""
    solver = res.solver if res.solver.startswith("grid-") else "grid-" + res.solver
    return dataclasses.replace(res, solver=solver, grid=grid)


def estimate_rank_distribution(sampled_ranks, n_items: int, sample_size, method: str,
                               replacement: bool = True, **params) -> np.ndarray:
    r"""Learn the global rank distribution :math:`\widehat P(R)`, :math:`R = 1..N`, from sampled ranks.

    Parameters
    ----------
    sampled_ranks : array of int
        One sampled rank :math:`r_u \in 1..n` per user.
    n_items : int or array of int
        Catalog size :math:`N`, or one catalogue size :math:`N_u` per user (module docstring,
        "Per-user catalogue sizes": the result is then over the grid of rank fractions of the
        largest pool, :math:`R = 1..\max_u N_u`; with replacement only).
    sample_size : int or array of int
        Sampled-set size :math:`n \le N` including the target (:math:`n-1` decoys), or one size
        :math:`n_u` per user (adaptive sampling, TORS Sec. 6; ``_validation.check_sample_sizes``).
        Unequal sizes are taken by ``"mle"`` only (EM of TORS Appendix H, or ``solver="cnm"``,
        on the distinct :math:`(n_u, r_u)` pairs of :func:`sampled_rank_table`); the other methods
        refuse them. Equal sizes take the fixed-size path.
    method : {"mle", "wmle", "mes", "bv"}
        See the module docstring.
    replacement : bool
        Decoys drawn with replacement (binomial kernel, as in the papers) or without
        (hypergeometric).
    **params
        ``"mle"``: ``solver`` (``"em"`` default, or ``"cnm"`` for the exact MLE),
        ``tol`` (EM: relative log-likelihood change, default 1e-6; CNM: certified gap, default
        1e-9), ``max_iter`` (EM 10000, CNM 1000). The default, EM from the uniform distribution
        stopped at a relative change of 1e-6 (Jin et al. Eq. 20-21), is an *early-stopped*
        MLE: its value depends on ``tol`` (smaller ``tol``, closer to the exact MLE; early
        stopping regularises). The exact, certified MLE is ``solver="cnm"`` (KKT conditions met to
        ``tol``); :func:`fit_rank_distribution` returns the certified gap of either.
        ``"wmle"``: as MLE plus ``weight`` (``"ndcg"`` default or ``"ap"``) and ``C`` (>= 1,
        default 10; Jin et al. Table 2 use NDCG with C = 10).
        ``"mes"``: ``eta`` (> 0, default 0.001), ``eta_scaling`` (``"tors"``: entropy weight
        :math:`\eta/n`, default; ``"aaai"``: :math:`\eta`; ``"quadratic"``: :math:`\eta(100/n)^2`), ``solver`` (``"dual"`` Newton, default,
        or ``"cvxpy"`` with Clarabel), ``tol`` (dual gradient, 1e-10; the solver also stops, as converged, when the Newton
        decrement reaches rounding level), ``max_iter`` (200).
        ``"bv"``: ``gamma`` in [0, 1] (default 0.1), ``prior`` (length N, uniform by default),
        ``project`` (default True: Euclidean projection of Eq. 28 onto the simplex).

    Returns
    -------
    ndarray of shape (N,): non-negative, sums to 1 (for ``"bv"`` with ``project=False``: sums to 1,
    may be negative).

    Raises
    ------
    ValueError
        For sampled ranks outside ``1..n``, ``n > N``, an unknown method, solver or parameter,
        ``eta <= 0``, ``C < 1``, ``gamma`` outside [0, 1], a bad prior.
    """
    return fit_rank_distribution(sampled_ranks, n_items, sample_size, method, replacement, **params).distribution


# ---------------------------------------------------------------------------------------------
# the fits on a given grid (also importable from itemsampling.estimators.grid)
# ---------------------------------------------------------------------------------------------
def grid_mes_dual(p_tilde, K, widths, a: float, tol: float = 1e-10, max_iter: int = 200):
    r"""MES (TORS Eq. 35-36) over global ranks with :math:`P` uniform within cells, solved through
    its Lagrange dual by Newton's method: :func:`itemsampling.estimators.distribution.mes_dual` with
    the cell widths as multiplicities,

    .. math:: \min_\mu\ \log\sum_c |c|\,e^{(\bar K_O\mu)_c} - \mu^\top\tilde P_O
              + \frac a4\sum_{r\in O}\frac{\mu_r^2}{\tilde P(r)},

    (one implementation, :func:`.distribution._mes_dual_impl`, which this equals when every width
    is 1; beyond 2,000 observed sampled ranks the Newton system is solved by conjugate gradients).
    Returns a :class:`~itemsampling.estimators.distribution.FitResult` with the cell masses as
    ``distribution``; ``objective`` is :math:`aH - E` with :math:`H` over ranks."""
    with _single_blas_thread():
        return _mes_dual_impl(p_tilde, K, a, tol, max_iter, widths=widths)


def grid_fit_rank_distribution(sampled_ranks, n_items: int, sample_size: int, method: str, grid=None,
                               replacement: bool = True, **params):
    r"""Learn the global rank distribution on a grid of cells (see the module docstring).

    Parameters as :func:`itemsampling.estimators.distribution.fit_rank_distribution` for
    ``method`` in ``("mle", "wmle", "mes")`` (MES is solved by :func:`grid_mes_dual`; per-user
    sample sizes, one :math:`n_u` per rank, with ``"mle"`` only: one block of grid-kernel columns
    per distinct size, TORS Appendix H, on the grid of the largest size), plus
    ``grid``: a :class:`RankGrid` for ``n_items`` (default :func:`rank_grid` of ``(N, n)``).
    Returns a :class:`~itemsampling.estimators.distribution.FitResult` whose ``distribution`` holds
    the cell masses and whose ``grid`` is the grid. Memory and time per pass are :math:`O(Cn)`,
    independent of :math:`N`; with an exact grid the result equals the dense estimator's. The fit
    itself is the one of :func:`.distribution.fit_rank_distribution` (:func:`.distribution._fit`).
    """
    replacement = check_bool(replacement, "replacement")
    N = check_int(n_items, "n_items", low=2)
    r, n = check_sampled_ranks(sampled_ranks, N, sample_size)
    grid = rank_grid(N, int(np.max(n))) if grid is None else _check_grid(grid, N)
    return _fit(r, N, n, method, replacement, params, grid)
