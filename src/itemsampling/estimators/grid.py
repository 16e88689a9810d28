r"""The representation every estimator works on: the global rank distribution :math:`P(R)` on a
grid of cells of global ranks, the sampling kernel on those cells, and the sampled-rank statistics.

What this module holds, and how the rest of :mod:`itemsampling.estimators` uses it:

* :class:`RankGrid` / :func:`rank_grid` / :func:`resolve_grid`: a partition of :math:`1..N` into
  *cells* :math:`c = [l_c, h_c]`, with :math:`P` uniform within each cell, so that an estimate is
  the vector of cell masses :math:`w_c = \sum_{R\in c} P(R)`. The *exact* grid (one cell per rank)
  is the dense estimator: every estimator below runs on it with the dense arithmetic, bit for bit.
* the kernel :math:`\bar K_{c,r}` (:func:`grid_kernel`; one cache, of which :func:`cached_kernel`
  is the exact grid), the columns of observed :math:`(n_u, r_u)` pairs (:func:`kernel_columns`),
  and the kernel in row blocks restricted to their band of sampled ranks (:func:`_banded_kernel`,
  :func:`_row_bands`) with the one routine for its products :math:`K^\top W K`, :math:`K^\top W F`,
  :math:`K^\top w` (:func:`_block_products`);
* the sufficient statistics of the data (:func:`sampled_rank_histogram`, :func:`sampled_rank_table`)
  and the one validation of sampled ranks with their sample sizes (:func:`check_sampled_ranks`);
* metrics read off cell masses (:func:`grid_metric`) and, for per-user catalogue sizes, the metric
  of each pool on the common grid of rank fractions (:func:`pool_rank_map`, :func:`pool_metric_matrix`).

Each estimator is written once, against this representation, in the modules above it (this module
imports none of them): the fits (EM, CNM, WMLE, MES) in :mod:`.distribution` (one fit,
``distribution._fit``), BV / MN / MNW in :mod:`.corrected` (one assembly ``corrected._system``, one
solve ``corrected._solve_system``, products on ranks or cells), and the combinations in
:mod:`.estimate` (one estimate path). The entry points on a given grid live with the algorithms
they call: ``grid_fit_rank_distribution`` and ``grid_mes_dual`` in :mod:`.distribution`,
``grid_corrected_metrics`` in :mod:`.corrected`, ``grid_estimate_metrics`` in :mod:`.estimate`
(all exported by :mod:`itemsampling.estimators`; ``estimators.grid.<name>`` still resolves).

Why cells: the dense kernel :math:`K_{R,r} = P(r\mid R)` for every global rank :math:`R = 1..N`
takes :math:`8Nn` bytes, 7.45 GiB at :math:`N = 10^6`, :math:`n = 1000`. But the data cannot tell
global ranks apart that are much closer than the kernel's own width (chapter 6: :math:`P(R)` is
identified no finer than about :math:`N/n` ranks at the top).

The grid (:func:`rank_grid`)
----------------------------
Cell widths follow what :math:`n` can resolve. With replacement, the sampled rank of a user at
:math:`\theta = (R-1)/(N-1)` has standard deviation :math:`\sqrt{(n-1)\theta(1-\theta)}`: the
kernel changes on a scale :math:`\sigma_\theta = \sqrt{(\theta(1-\theta) + 1/(n-1))/(n-1)}` in
:math:`\theta` (:math:`\approx 1/n` at the top, i.e. :math:`N/n` ranks; :math:`\approx 1/(2\sqrt n)`
in the middle). A cell starting at :math:`R` has width

.. math:: w(R) = \max\Bigl(1,\ \min\bigl(\lfloor R\,\rho\rfloor,\ \lfloor (N-1)\sigma_\theta/s\rfloor\bigr)\Bigr)

with ``resolution`` :math:`s` cells per kernel width (default 8) and a relative width :math:`\rho`
(default 1/32) that keeps the top fine where top-K metrics live; the first ``top`` ranks (default
1024) and the last rank are cells of their own. The number of cells is about
``top`` :math:`+\ \log(\cdot)/\rho + \pi s\sqrt n`, independent of :math:`N`: 1,957 cells at
:math:`N = 10^7, n = 1000` (against :math:`10^7` ranks). When this grid would not save at least
half of the ranks, or :math:`N \le 8\,` ``top``, the grid is exact (one cell per rank) and every
estimator here reproduces the dense one.

The kernel per cell (:func:`grid_kernel`)
-----------------------------------------
Row :math:`c` of the grid kernel is the exact cell average
:math:`\bar K_{c,r} = \frac1{w_c}\sum_{R=l_c}^{h_c} P(r\mid R)`.

* **Without replacement** it is exact in closed form: :math:`P(r\mid R)` is, up to the factor
  :math:`N/n`, the distribution of the :math:`r`-th smallest of :math:`n` items drawn from
  :math:`1..N`, so :math:`\sum_{R\le x} P(r \mid R) = \frac Nn\Pr[\mathrm{Hyp}(N, x, n) \ge r]`
  (hypergeometric: population :math:`N`, :math:`x` successes, :math:`n` draws) and a cell sum is a
  difference of two hypergeometric tails.
* **With replacement** (:math:`r-1\sim\mathrm{Bin}(m,\theta)`, :math:`m = n-1`):
  :math:`\int_0^x b_{j,m}(t)\,dt = \Pr[\mathrm{Bin}(m+1, x) \ge j+1]/(m+1)` (the regularized
  incomplete beta function) integrates the kernel exactly in :math:`\theta`; the sum over the
  integers of a cell follows by the Euler-Maclaurin formula around the cell's half-integer ends
  :math:`a = l_c - \tfrac12`, :math:`b = h_c + \tfrac12`:

  .. math::
      \begin{aligned}
      \sum_{R=l_c}^{h_c} f(R) &= \int_a^b f(R)\,dR - \tfrac1{24}\bigl(f'(b) - f'(a)\bigr) + E_c,\\
      |E_c| &\le \tfrac1{12}\int_a^b |f''(R)|\,dR,
      \end{aligned}

  with :math:`f'` from the Bernstein identity :math:`b'_{j,m} = m(b_{j-1,m-1} - b_{j,m-1})`.
  Since :math:`\int_0^1 |b''_{j,m}| \le 4m`, the error summed over all cells of one column is at most
  :math:`m/(3(N-1))`, i.e. a relative error of at most :math:`m(m+1)/(3(N-1)^2)` of the column's
  total (:math:`3\cdot10^{-9}` at :math:`N = 10^7`, :math:`n = 1000`); cells of width 1 are exact.
  The tests compare with exact sums.

Estimators on cells
-------------------
* MLE / WMLE (Jin et al. Eq. 19-23): the mixture :math:`q = \bar K^\top w` is the dense one for any
  :math:`P` uniform within cells, so EM and the exact CNM of :mod:`.distribution` run unchanged on
  :math:`\bar K` (EM from the uniform :math:`P`, i.e. :math:`w_c = |c|/N`). Each pass costs
  :math:`O(Cn)` for :math:`C` cells.
* MES (TORS Eq. 35-36): the entropy is over global ranks, :math:`H(P) = -\sum_c w_c\log(w_c/|c|)`,
  so the dual of :func:`.distribution.mes_dual` gains the cell widths as multiplicities:
  :math:`f(\mu) = \log\sum_c |c|\,e^{(\bar K_O\mu)_c} - \mu^\top\tilde P_O + \frac a4\sum_r\mu_r^2/\tilde P(r)`
  (``distribution.grid_mes_dual``).
* BV, MN and MNW corrected metrics (Krichene & Rendle Eq. 24-26; TORS Eq. 42) with a prior
  uniform within cells: the :math:`n\times n` matrices :math:`\sum_R p(R)K_RK_R^\top` become
  :math:`\sum_c p_c \bar K_c\bar K_c^\top` (exact for width-1 cells; elsewhere the within-cell
  covariance of the kernel, of relative size :math:`O(1/(12 s^2))`, is left out), :math:`c_r` and
  :math:`\Lambda_1` are exact, and the right-hand sides use the cell means :math:`\bar F_c` (a cell
  holding a cut-off :math:`K` contributes its ranks up to :math:`K` only).
* Metrics of any :math:`K \le N` from cell masses (:func:`grid_metric`):
  :math:`\sum_c w_c \frac1{|c|}\sum_{R\in c}F(R)`, with cells split at :math:`K` and the within-cell
  sums of :math:`1/R` (digamma) and :math:`1/\log_2(R+1)` (Euler-Maclaurin on the exponential
  integral, exact below 4096) in closed form.

Costs: building :math:`\bar K` takes :math:`O(Cn)` time and memory; EM :math:`O(Cn)` per pass; MES
:math:`O(Cn\bar b)` per Newton step (band :math:`\bar b`); BV and MN :math:`O(C\bar b^2 + n^3)` with the
dense :math:`n\times n` Cholesky, :math:`O(C\bar b^2 + nu^2)` time and :math:`O(nu)` memory with the
banded one that ``corrected.grid_corrected_metrics`` takes for large :math:`n` (half-bandwidth
:math:`u \approx 25\sqrt n`). None depends on :math:`N` beyond the :math:`O(\log N)` growth of :math:`C`.
"""

from __future__ import annotations

import contextlib
import functools
import numbers
from dataclasses import dataclass

import numpy as np
from scipy.special import expi, gammaln, psi

from .._validation import (
    check_bool, check_int, check_memory, check_probability_vector, check_ranks, check_sample_sizes, check_sizes,
)
from ..kernel import kernel
from ..metrics import canonical_metric, metric_function

__all__ = [
    "RankGrid",
    "rank_grid",
    "resolve_grid",
    "AUTO_GRID_BYTES",
    "sampled_rank_histogram",
    "sampled_rank_table",
    "check_sampled_ranks",
    "grid_kernel",
    "grid_kernel_columns",
    "cached_kernel",
    "kernel_columns",
    "grid_metric",
    "pool_rank_map",
    "pool_ranks",
    "pool_metric_matrix",
    "pool_cell_metric",
]


# ---------------------------------------------------------------------------------------------
# BLAS threads
# ---------------------------------------------------------------------------------------------
_CONTROLLER = []  # the process's one threadpoolctl controller, made on first use


def _single_blas_thread():
    """Run the iterative solvers with one BLAS thread: their work is memory-bound matrix-vector
    products and small factorisations, and multi-threaded OpenBLAS slows them by 10x or more
    when the cores are shared (measured under load on 2 cores).

    One ``ThreadpoolController`` per process, made on first use (numpy's and scipy's BLAS are
    loaded by then): ``threadpool_limits`` would scan the loaded libraries (``/proc/self/maps``) on
    every call, about 10 ms each with scipy loaded, several times per estimate."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - threadpoolctl ships with the pinned environment
        return contextlib.nullcontext()
    if not _CONTROLLER:
        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0].limit(limits=1, user_api="blas")


def _blas_threads(n_items: int, sample_size: int):
    """Single-threaded BLAS (:func:`_single_blas_thread`) for small banded products: they are many
    small matrix products, for which thread start-up and contention with other processes cost more
    than the arithmetic (measured 5-10x slower with two threads on a busy 2-core machine at
    N = 3,706, n = 100). Large problems keep every thread."""
    if n_items * sample_size * sample_size > 2e8:
        return contextlib.nullcontext()
    return _single_blas_thread()


# ---------------------------------------------------------------------------------------------
# the grid
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class RankGrid:
    """A partition of the global ranks ``1..n_items`` into consecutive cells.

    Attributes
    ----------
    n_items : int          the catalogue size N.
    lo, hi : ndarray       first and last global rank of each cell (int64, 1-based, inclusive).
    """

    n_items: int
    lo: np.ndarray
    hi: np.ndarray

    @property
    def widths(self) -> np.ndarray:
        """Number of global ranks in each cell."""
        return self.hi - self.lo + 1

    @property
    def n_cells(self) -> int:
        return int(self.lo.size)

    @property
    def exact(self) -> bool:
        """True when every cell is one global rank (the grid reproduces the dense estimators)."""
        return self.n_cells == self.n_items

    def key(self) -> tuple:
        """A hashable key of the partition (used to cache kernels and fits); O(1) for an exact grid."""
        return (self.n_items, None if self.exact else self.lo.tobytes())

    def cell_of(self, global_ranks) -> np.ndarray:
        """Index of the cell holding each global rank."""
        R = check_ranks(global_ranks, "global_ranks", high=self.n_items)
        return np.searchsorted(self.lo, R, side="right") - 1

    def expand(self, masses) -> np.ndarray:
        """The distribution over all ``1..N`` that spreads each cell's mass uniformly over it
        (memory O(N): for moderate N only)."""
        w = np.asarray(masses, dtype=np.float64)
        if w.shape != (self.n_cells,):
            raise ValueError(f"masses must have one entry per cell ({self.n_cells}), got shape {w.shape}")
        return np.repeat(w / self.widths, self.widths)

    def masses(self, distribution) -> np.ndarray:
        """Cell masses :math:`w_c = \\sum_{R\\in c} P(R)` of a distribution over ``1..N``."""
        P = check_probability_vector(distribution, "distribution", length=self.n_items)
        return np.add.reduceat(P, self.lo - 1)


def _make_grid(N: int, lo: np.ndarray) -> RankGrid:
    lo = np.ascontiguousarray(lo, dtype=np.int64)
    hi = np.append(lo[1:] - 1, N).astype(np.int64)
    lo.flags.writeable = False
    hi.flags.writeable = False
    return RankGrid(N, lo, hi)


def rank_grid(n_items: int, sample_size: int, resolution: float = 8.0, top: int = 1024,
              rel_width: float = 1.0 / 32, breaks=(), exact: bool | None = None) -> RankGrid:
    r"""The grid of global-rank cells for catalogue size :math:`N` and sampled-set size :math:`n`.

    Cost :math:`O(C)` for :math:`C` cells (a loop over the cells of the adaptive part).

    Parameters
    ----------
    n_items, sample_size : int
        :math:`N` and :math:`n` (:math:`2 \le n \le N`).
    resolution : float
        Cells per kernel width :math:`\sigma_\theta` (module docstring), > 0; default 8.
    top : int
        The first ``top`` ranks are cells of one rank each (default 1024, >= 1).
    rel_width : float
        Largest cell width relative to its first rank, in (0, 1] (default 1/32).
    breaks : sequence of int
        Extra cell boundaries: a cell ends at each of these ranks (e.g. metric cut-offs).
    exact : bool or None
        ``True``: one cell per rank; ``False``: the adaptive grid; ``None`` (default): the adaptive
        grid unless :math:`N \le 8\,` ``top`` (8,192 by default) or it would keep more than half
        of the ranks as cells.
    """
    N, n = check_sizes(n_items, sample_size)
    if isinstance(resolution, bool) or not np.isfinite(float(resolution)) or float(resolution) <= 0:
        raise ValueError(f"resolution must be a positive number, got {resolution!r}")
    if isinstance(rel_width, bool) or not (0.0 < float(rel_width) <= 1.0):
        raise ValueError(f"rel_width must lie in (0, 1], got {rel_width!r}")
    top = check_int(top, "top", low=1)
    if exact is not None and not isinstance(exact, (bool, np.bool_)):
        raise ValueError(f"exact must be True, False or None, got {exact!r}")
    brk = np.unique(check_ranks(list(breaks), "breaks", high=N)) if len(breaks) else \
        np.zeros(0, dtype=np.int64)
    return _rank_grid(N, n, float(resolution), top, float(rel_width), tuple(int(b) for b in brk),
                      None if exact is None else bool(exact))


@functools.lru_cache(maxsize=8)
def _rank_grid(N: int, n: int, s: float, top: int, rho: float, breaks: tuple, exact) -> RankGrid:
    """:func:`rank_grid` on checked arguments (``breaks``: sorted, distinct), cached on every one of
    them: a grid is immutable (read-only ``lo`` / ``hi``), and the repeats of an experiment ask for
    the same grid hundreds of times (its loop over cells costs about 15 ms at N = 25,815)."""
    brk = np.asarray(breaks, dtype=np.int64)
    if exact:
        return _make_grid(N, np.arange(1, N + 1))
    m = n - 1
    starts = [np.arange(1, min(top, N) + 1)]
    R = min(top, N) + 1
    adaptive = []
    bi = int(np.searchsorted(brk, R - 1, side="right"))
    while R < N:
        theta = (R - 1.0) / (N - 1.0)
        sig = np.sqrt((theta * (1.0 - theta) + 1.0 / m) / m)
        w = max(1, min(int(R * rho), int((N - 1) * sig / s)))
        end = min(R + w - 1, N - 1)  # the last rank is a cell of its own
        while bi < brk.size and brk[bi] < R:
            bi += 1
        if bi < brk.size and brk[bi] < end:
            end = int(brk[bi])
        adaptive.append(R)
        R = end + 1
        if len(adaptive) > 2 * N:  # pragma: no cover - widths are >= 1, so this cannot happen
            raise RuntimeError("grid construction did not terminate")
    lo = np.concatenate([starts[0], np.asarray(adaptive, dtype=np.int64), [N] if R == N else []]).astype(np.int64)
    lo = np.unique(lo)
    if exact is None and (lo.size > N / 2 or N <= 8 * top):
        lo = np.arange(1, N + 1)
    return _make_grid(N, lo)


def _check_grid(grid, n_items: int) -> RankGrid:
    if not isinstance(grid, RankGrid):
        raise ValueError(f"grid must be a RankGrid (from rank_grid), got {type(grid).__name__}")
    if grid.n_items != n_items:
        raise ValueError(f"grid is for n_items = {grid.n_items}, not {n_items}")
    return grid


#: Dense kernels larger than this (bytes; 1 MiB, :math:`N n > 131{,}072`) make the estimators take the
#: default grid by themselves (``grid=None``) wherever that grid is coarser than the ranks (:func:`rank_grid`:
#: :math:`N > 8{,}192`); ``grid=False`` keeps the dense estimators. The grid is the faster one at every such
#: size measured (one BLAS thread, ``estimate_metrics`` of MLE, BV-MES and MN-MLE, Recall and NDCG at
#: K = 1..50): :math:`N = 9{,}916`, :math:`n = 20`: 17 against 36 ms; :math:`N = 14{,}284`, :math:`n = 200`: 67
#: against 584 ms; :math:`N = 25{,}815`, :math:`n = 100`: 45 against 610 ms; on yelp-mcrec's real ranks
#: (:math:`N = 14{,}284`, :math:`n` = 111-315) 5-10x; within :math:`2\cdot10^{-5}` (relative) of the dense
#: estimates in every case. At :math:`N = 10^5`, :math:`n = 1000`, :math:`M = 10^5`
#: (``benchmarks/bench_real_sizes.py``) the dense MLE takes 8.0 s and 2.5 GB, the grid one 0.10 s and 38 MB.
#: ``tests/test_grid_tolerance.py`` pins the default to the dense path (WMLE, MES, per-user pools alike).
#: Before: 32 MiB, which left the dense kernel (and EM passes 5-10x slower) to real catalogues of
#: :math:`10^4`-:math:`2\cdot10^4` items with :math:`n` in the hundreds.
AUTO_GRID_BYTES = 2**20


def resolve_grid(grid, n_items: int, sample_size, ks=()):
    r"""The grid an estimator call uses: ``False`` -> ``None`` (dense); ``True`` -> :func:`rank_grid`
    of :math:`(N, \max n)` with breaks at the cut-offs; a :class:`RankGrid` for ``n_items`` as
    given; ``None`` (the default) -> that default grid when the dense :math:`N\times n` kernel would
    exceed :data:`AUTO_GRID_BYTES` and the grid has fewer cells than ranks, else ``None`` (dense: an
    exact grid is the dense estimator itself)."""
    nmax = int(np.max(sample_size))
    if grid is None:
        if not 8.0 * n_items * nmax > AUTO_GRID_BYTES:
            return None
        out = resolve_grid(True, n_items, sample_size, ks)
        return None if out.exact else out
    if isinstance(grid, (bool, np.bool_)):
        if not grid:
            return None
        # every grid estimator needs at least the first 1024 one-rank cells x n of the grid kernel:
        # refuse an impossible n before building the grid (whose cost grows with N / n)
        check_memory(3 * 8.0 * min(1024, n_items) * nmax, f"the grid kernel (at least {min(1024, n_items)} cells "
                     f"x n = {nmax})", "sample_size")
        return rank_grid(n_items, nmax, breaks=[int(k) for k in ks if k is not None and int(k) <= n_items])
    return _check_grid(grid, n_items)


# ---------------------------------------------------------------------------------------------
# sampled ranks
# ---------------------------------------------------------------------------------------------
def _check_positive(value, name: str, low: float = 0.0, inclusive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise ValueError(f"{name} must be a finite number {'>=' if inclusive else '>'} {low:g}, got {value!r}")
    v = float(value)
    if not np.isfinite(v) or (v < low if inclusive else v <= low):
        raise ValueError(f"{name} must be a finite number {'>=' if inclusive else '>'} {low:g}, got {value!r}")
    return v


def sampled_rank_histogram(sampled_ranks, sample_size: int) -> np.ndarray:
    r"""Counts :math:`c_r = \#\{u: r_u = r\}`, :math:`r = 1..n` (float64), the sufficient statistic
    of Jin et al. Eq. 21 (:math:`\tilde P(r) = c_r/M`)."""
    sample_size = check_int(sample_size, "sample_size", low=2)
    r = check_ranks(sampled_ranks, "sampled_ranks", high=sample_size)
    check_memory(16.0 * sample_size, f"a histogram of {sample_size} sampled ranks", "sample_size")
    return _rank_histogram(r, sample_size)


def _rank_histogram(r: np.ndarray, n: int) -> np.ndarray:
    """:func:`sampled_rank_histogram` of checked ranks ``r`` in ``1..n`` (the fits, on validated input)."""
    return np.bincount(r, minlength=n + 1)[1:].astype(np.float64)


def check_sampled_ranks(sampled_ranks, n_items: int, sample_size, name: str = "sampled_ranks",
                        size_name: str | None = None):
    r"""The one validation of sampled ranks with their sample size(s) (every estimator entry point
    calls it): ``(r, n)``, ``r`` the int64 ranks, ``n`` one size :math:`2 \le n \le N` = ``n_items``
    (an int, also for equal per-user sizes) or one size :math:`n_u` per user
    (``_validation.check_sample_sizes``), with :math:`1 \le r_u \le n_u` for every user. Errors name
    ``name`` and ``size_name`` (default ``"sample_size"``); with one size and no ``size_name`` they
    read as ``check_ranks``'s (``1..n``)."""
    label = size_name or "sample_size"
    if np.ndim(sample_size) == 0 and size_name is None:
        n = check_sample_sizes(sample_size, n_items)
        return check_ranks(sampled_ranks, name, high=n), n
    r = check_ranks(sampled_ranks, name)
    try:
        n = check_sample_sizes(sample_size, n_items, r.size)
    except ValueError as err:
        if label != "sample_size":
            raise ValueError(str(err).replace("sample_size", label)) from None
        raise
    if np.any(r > n):
        u = int(np.flatnonzero(r > n)[0])
        raise ValueError(f"{name} must lie in 1..{label} for every user; user {u} has rank {r[u]} with {label} "
                         f"{n if isinstance(n, int) else int(n[u])}")
    return r, n


def sampled_rank_table(sampled_ranks, sample_size):
    r"""The sufficient statistic of sampled ranks with per-user sample sizes: the distinct pairs
    :math:`(n_u, r_u)` and how many users share each (TORS Eq. 43: a user's likelihood depends on
    the data only through the pair, so users with equal pairs are grouped).

    ``sample_size`` is one int for every user or one per user (``check_sample_sizes``); each
    :math:`r_u` must lie in :math:`1..n_u`. Returns ``(sizes, ranks, counts)``, three int64 arrays
    sorted by size, then rank.
    """
    r, n = check_sampled_ranks(sampled_ranks, np.iinfo(np.int64).max, sample_size, size_name="sample_size")
    sizes = np.full(r.size, n, dtype=np.int64) if isinstance(n, int) else n
    key = sizes * (int(r.max()) + 1) + r
    uniq, counts = np.unique(key, return_counts=True)
    return uniq // (int(r.max()) + 1), uniq % (int(r.max()) + 1), counts.astype(np.int64)


# ---------------------------------------------------------------------------------------------
# the kernel per cell
# ---------------------------------------------------------------------------------------------
def _binom_logpmf(theta: np.ndarray, d: int, k: np.ndarray) -> np.ndarray:
    """log Binomial(d, theta) pmf at the counts ``k`` (-inf outside 0..d), one row per theta in [0, 1]."""
    k = np.asarray(k, dtype=np.float64)
    inside = (k >= 0) & (k <= d)
    kk = np.clip(k, 0, d)
    lc = gammaln(d + 1.0) - gammaln(kk + 1.0) - gammaln(d - kk + 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        lp, lq = np.log(theta), np.log1p(-theta)
        out = np.where(kk[None, :] > 0, np.multiply.outer(lp, kk), 0.0)
        out += np.where(kk[None, :] < d, np.multiply.outer(lq, d - kk), 0.0)
    out += lc
    out[:, ~inside] = -np.inf
    return out


def _band(ta: float, tb: float, m: int) -> tuple[int, int]:
    """Sampled-rank columns j = r - 1 in [c0, c1) outside which every kernel row with theta in
    [ta, tb] is below exp(-112) (15 standard deviations plus 20 from the binomial mean)."""
    v = 0.25 if ta <= 0.5 <= tb else max(ta * (1 - ta), tb * (1 - tb))
    sd = np.sqrt((m + 1) * v)
    c0 = max(0, int(np.floor((m + 1) * ta - 15 * sd - 20)))
    c1 = min(m + 1, int(np.ceil((m + 1) * tb + 15 * sd + 20)))
    return c0, c1


def _binomial_cell_sums(lo: np.ndarray, hi: np.ndarray, N: int, n: int, c0: int, c1: int) -> np.ndarray:
    r""":math:`\sum_{R=l}^{h} P(r\mid R)` for wide cells (with replacement) and the columns
    :math:`r-1 \in [c_0, c_1)`, by the incomplete-beta integral and the Euler-Maclaurin correction
    (module docstring). Tails beyond the band (below :math:`e^{-112}`) are left out."""
    m = n - 1
    a = (lo - 1.5) / (N - 1.0)  # theta at l - 1/2
    b = (hi - 0.5) / (N - 1.0)  # theta at h + 1/2
    k = np.arange(c0, c1 + 1)  # Bin(m+1, x) at k = c0..c1

    def tails(x):  # P(Bin(m+1, x) <= j) and P(Bin(m+1, x) >= j+1), j = c0..c1-1
        p = np.exp(_binom_logpmf(x, m + 1, k))
        lower = np.cumsum(p, axis=1)[:, :-1]
        upper = np.cumsum(p[:, ::-1], axis=1)[:, ::-1][:, 1:]
        return lower, upper

    def deriv(x):  # d/dtheta of b_{j,m}(theta) = m (b_{j-1,m-1} - b_{j,m-1})
        p = np.exp(_binom_logpmf(x, m - 1, np.arange(c0 - 1, c1)))
        return m * (p[:, :-1] - p[:, 1:])

    La, Ua = tails(a)
    Lb, Ub = tails(b)
    integral = np.where(Ua <= 0.5, Ub - Ua, La - Lb) * ((N - 1.0) / (m + 1.0))
    out = integral - (deriv(b) - deriv(a)) / (24.0 * (N - 1.0))
    np.maximum(out, 0.0, out=out)
    return out


def _hypergeometric_cell_sums(lo: np.ndarray, hi: np.ndarray, N: int, n: int, c0: int, c1: int) -> np.ndarray:
    r""":math:`\sum_{R=l}^{h} P(r\mid R)` without replacement for the columns :math:`r-1\in[c_0, c_1)`,
    exactly: :math:`\frac Nn(\Pr[\mathrm{Hyp}(N, h, n)\ge r] - \Pr[\mathrm{Hyp}(N, l-1, n)\ge r])`."""
    k = np.arange(c0, c1 + 1, dtype=np.float64)[None, :]

    def tails(x):  # P(Hyp(N, x, n) <= j) and P(Hyp >= j + 1), j = c0..c1-1, from the log pmf
        x = x.astype(np.float64)[:, None]
        with np.errstate(invalid="ignore"):
            lp = (gammaln(x + 1) - gammaln(k + 1) - gammaln(np.maximum(x - k, 0) + 1)
                  + gammaln(N - x + 1) - gammaln(np.maximum(n - k, 0) + 1)
                  - gammaln(np.maximum(N - x - n + k, 0) + 1)
                  - (gammaln(N + 1.0) - gammaln(n + 1.0) - gammaln(N - n + 1.0)))
        lp = np.where((k <= x) & (k <= n) & (n - k <= N - x), lp, -np.inf)
        p = np.exp(lp)
        lower = np.cumsum(p, axis=1)[:, :-1]
        upper = np.cumsum(p[:, ::-1], axis=1)[:, ::-1][:, 1:]
        return lower, upper

    La, Ua = tails(lo - 1)
    Lb, Ub = tails(hi)
    diff = np.where(Ua <= 0.5, Ub - Ua, La - Lb)
    return np.maximum(diff * (N / n), 0.0)


@functools.lru_cache(maxsize=6)
def _grid_kernel_cached(N: int, n: int, replacement: bool, lo_bytes) -> np.ndarray:
    """The one kernel cache: the grid kernel of the cells starting at ``lo_bytes`` (int64 bytes), or,
    for ``None`` (one cell per rank), the dense kernel of :func:`itemsampling.kernel.kernel`."""
    if lo_bytes is None:
        out = np.ascontiguousarray(kernel(N, n, replacement))
        out.flags.writeable = False
        return out
    cells = _make_grid(N, np.frombuffer(lo_bytes, dtype=np.int64))
    lo, hi, widths = cells.lo, cells.hi, cells.widths
    out = np.zeros((lo.size, n))
    one = widths == 1
    chunk = max(1, int(4e6 // n))  # bounded temporaries: about 32 MB per block
    idx = np.flatnonzero(one)
    for s in range(0, idx.size, chunk):
        rows = idx[s:s + chunk]
        out[rows] = kernel(N, n, replacement, lo[rows])
    idx = np.flatnonzero(~one)
    cell_sums = _binomial_cell_sums if replacement else _hypergeometric_cell_sums
    for s in range(0, idx.size, 64):  # 64 consecutive wide cells share one band of sampled ranks
        rows = idx[s:s + 64]
        c0, c1 = _band(max(0.0, (lo[rows[0]] - 1.5) / (N - 1.0)), min(1.0, (hi[rows[-1]] - 0.5) / (N - 1.0)), n - 1)
        sums = cell_sums(lo[rows], hi[rows], N, n, c0, c1)
        sums /= sums.sum(axis=1, keepdims=True)  # rows of cell averages sum to 1
        if rows[-1] - rows[0] + 1 == rows.size:  # consecutive cells: a plain slice
            out[rows[0]:rows[-1] + 1, c0:c1] = sums
        else:
            out[rows, c0:c1] = sums
    out.flags.writeable = False
    return out


def grid_kernel_columns(grid: RankGrid, sizes, ranks, replacement: bool = True) -> np.ndarray:
    r"""Columns :math:`\bar K_{c,(n,r)}` of the grid kernel (:func:`grid_kernel`) for the given pairs of
    sample size and sampled rank only (the distinct pairs of :func:`sampled_rank_table`): a
    ``(cells, len(ranks))`` array, never the whole ``cells x n`` kernel of any size. One-rank cells are
    the exact kernel's entries (:func:`_column_log_kernel`, as :func:`kernel_columns`); the wide cells
    are computed as :func:`grid_kernel` computes them (the same blocks of 64 cells, each on its band of
    sampled ranks, normalised over that band), but only for the blocks whose band holds an asked rank:
    adaptive sampling (TORS Sec. 6) observes at its large sizes only the top sampled ranks, so the cells
    far down the catalogue are never computed. Equal to :func:`grid_kernel`'s columns to rounding
    (the tests compare); time :math:`O(\text{cells}\times\text{pairs})` plus the bands of the blocks
    that are needed. A column depends on :math:`(N`, the cells, ``replacement``, :math:`n, r)` only, so the
    columns computed (and the blocks of wide cells, :func:`_wide_block`) are kept for the next samples of an
    experiment (at most :data:`_COLUMN_BUDGET` bytes, cleared with the kernel cache): a repeat of chapter 8's
    Table 8.5 computes only the pairs no earlier repeat has observed."""
    if not isinstance(grid, RankGrid):
        raise ValueError(f"grid must be a RankGrid (from rank_grid), got {type(grid).__name__}")
    replacement = check_bool(replacement, "replacement")
    N = grid.n_items
    sizes = np.atleast_1d(np.asarray(sizes, dtype=np.int64))
    ranks = np.atleast_1d(np.asarray(ranks, dtype=np.int64))
    if sizes.shape != ranks.shape or sizes.ndim != 1:
        raise ValueError("sizes and ranks must be 1-d arrays of the same length")
    if sizes.size and (sizes.min() < 2 or sizes.max() > N or ranks.min() < 1 or np.any(ranks > sizes)):
        raise ValueError(f"sizes must lie in 2..{N} and ranks in 1..size")
    check_memory(8.0 * grid.n_cells * (sizes.size + 64), f"the grid kernel's columns ({grid.n_cells} cells x "
                 f"{sizes.size} pairs)", "sample_size")
    # each column depends on (N, the cells, replacement, n, r) only, not on the sample: the repeats of an
    # experiment ask for the same columns again and again, so the computed ones are kept (_column_store)
    out = np.empty((grid.n_cells, sizes.size))
    key = (N, None if grid.exact else grid.lo.tobytes(), bool(replacement))
    for n in np.unique(sizes):
        cols = np.flatnonzero(sizes == n)
        store = _column_store(key + (int(n),))
        asked = ranks[cols]
        missing = np.unique(asked[[int(r) not in store for r in asked]])
        if missing.size:
            fresh = _grid_kernel_columns_of(grid, int(n), missing, replacement)
            for i, r in enumerate(missing.tolist()):
                col = np.ascontiguousarray(fresh[:, i])
                col.flags.writeable = False
                store[r] = col
            _COLUMN_BYTES[0] += fresh.nbytes
        for c, r in zip(cols.tolist(), asked.tolist()):
            out[:, c] = store[r]
    _trim_columns()
    return out


#: the columns of :func:`grid_kernel_columns` computed so far, per (N, grid, replacement, n): {r: column}
#: (read-only), the least recently used key first; cleared with the kernel cache
#: (``_grid_kernel_cached.cache_clear()``)
_COLUMN_CACHE: dict = {}
_COLUMN_BYTES = [0]
#: the most bytes of columns kept (older keys are dropped beyond it, the newest always kept)
_COLUMN_BUDGET = 2**28


def _column_store(key) -> dict:
    """The cache of grid-kernel columns for one (N, grid, replacement, n), made on first use and
    moved to the end (the most recently used)."""
    store = _COLUMN_CACHE.pop(key, None)
    _COLUMN_CACHE[key] = {} if store is None else store
    return _COLUMN_CACHE[key]


def _trim_columns() -> None:
    """Drop the least recently used keys of the column cache while it holds more than
    :data:`_COLUMN_BUDGET` bytes (the most recent key stays)."""
    while _COLUMN_BYTES[0] > _COLUMN_BUDGET and len(_COLUMN_CACHE) > 1:
        old = _COLUMN_CACHE.pop(next(iter(_COLUMN_CACHE)))
        _COLUMN_BYTES[0] -= sum(col.nbytes for col in old.values())


def _clear_columns() -> None:
    _COLUMN_CACHE.clear()
    _COLUMN_BYTES[0] = 0


def _grid_kernel_columns_of(grid: RankGrid, n: int, ranks: np.ndarray, replacement: bool) -> np.ndarray:
    """The columns of the grid kernel of size ``n`` for the sampled ranks ``ranks`` (checked), as
    :func:`grid_kernel_columns` describes them, computed (no cache)."""
    N = grid.n_items
    lo, hi, widths = grid.lo, grid.hi, grid.widths
    out = np.zeros((grid.n_cells, ranks.size))
    one = np.flatnonzero(widths == 1)
    wide = np.flatnonzero(widths > 1)
    j = ranks - 1
    if one.size:
        chunk = max(1, int(4e6 // max(ranks.size, 1)))
        for s in range(0, one.size, chunk):
            rows = one[s:s + chunk]
            out[rows] = np.exp(_column_log_kernel(N, np.full(ranks.size, n), ranks, lo[rows], replacement,
                                                  per_column=True))
    for s in range(0, wide.size, 64):  # the blocks of grid_kernel, each on its band
        rows = wide[s:s + 64]
        c0, c1 = _band(max(0.0, (lo[rows[0]] - 1.5) / (N - 1.0)), min(1.0, (hi[rows[-1]] - 0.5) / (N - 1.0)), n - 1)
        inside = (j >= c0) & (j < c1)
        if not inside.any():
            continue
        sums = _wide_block(N, lo.tobytes(), bool(replacement), n, s, c0, c1)
        out[np.ix_(rows, np.flatnonzero(inside))] = sums[:, j[inside] - c0]
    return out


@functools.lru_cache(maxsize=256)
def _wide_block(N: int, lo_bytes: bytes, replacement: bool, n: int, start: int, c0: int, c1: int) -> np.ndarray:
    """Rows ``start..start+63`` of the wide cells (width > 1) of the grid whose first ranks are ``lo_bytes``,
    in the grid kernel of size ``n`` on the band ``c0:c1`` of sampled ranks (:func:`_band`), normalised over
    it, as :func:`_grid_kernel_cached` computes them (the same block, the same arithmetic); cached on every
    input (read-only): :func:`grid_kernel_columns` reads columns of it for each sample of an experiment."""
    cells = _make_grid(N, np.frombuffer(lo_bytes, dtype=np.int64))
    rows = np.flatnonzero(cells.widths > 1)[start:start + 64]
    cell_sums = _binomial_cell_sums if replacement else _hypergeometric_cell_sums
    sums = cell_sums(cells.lo[rows], cells.hi[rows], N, n, c0, c1)
    sums /= sums.sum(axis=1, keepdims=True)
    sums.flags.writeable = False
    return sums


def grid_kernel(grid: RankGrid, sample_size: int, replacement: bool = True) -> np.ndarray:
    r"""The grid kernel :math:`\bar K_{c,r} = \frac1{|c|}\sum_{R\in c} P(r\mid R)` (cells x n,
    float64, rows sum to 1; cached and read-only). On an exact grid (one cell per rank) it is the
    dense kernel :math:`K_{R,r} = P(r\mid R)` of :func:`itemsampling.kernel.kernel` (Jin et al.
    Eq. 16-17), the same array as :func:`cached_kernel`; width-1 cells are rows of it; wider cells
    are computed as in the module docstring (exact without replacement; with replacement within the
    stated Euler-Maclaurin bound). Time and memory :math:`O(Cn)`."""
    replacement = check_bool(replacement, "replacement")
    if not isinstance(grid, RankGrid):
        raise ValueError(f"grid must be a RankGrid (from rank_grid), got {type(grid).__name__}")
    N, n = check_sizes(grid.n_items, sample_size)
    check_memory(3 * 8.0 * grid.lo.size * n, f"the {grid.lo.size} x {n} grid kernel", "sample_size")
    return _grid_kernel_cached(N, n, bool(replacement), None if grid.exact else grid.lo.tobytes())


def cached_kernel(n_items: int, sample_size: int, replacement: bool = True) -> np.ndarray:
    r"""The dense kernel :math:`K_{R,r} = P(r\mid R)` (N x n, float64, computed in log space by
    :func:`itemsampling.kernel.kernel`), cached and read-only: repeated estimates on the same
    :math:`(N, n)` pay for it once. It is :func:`grid_kernel` on the exact grid (one cache for both)."""
    N, n = check_sizes(n_items, sample_size)
    return _grid_kernel_cached(N, n, check_bool(replacement, "replacement"), None)


_clear_kernels = _grid_kernel_cached.cache_clear


def _clear_kernel_caches() -> None:
    """Clear the one kernel cache and the grid-kernel columns and blocks computed from the same formulas."""
    _clear_kernels()
    _clear_columns()
    _wide_block.cache_clear()


_grid_kernel_cached.cache_clear = _clear_kernel_caches  # type: ignore[attr-defined]
cached_kernel.cache_clear = _clear_kernel_caches  # type: ignore[attr-defined]


def _column_log_kernel(n_items: int, sizes: np.ndarray, ranks: np.ndarray, support: np.ndarray,
                       replacement: bool, per_column: bool = False) -> np.ndarray:
    """log P(r | R; n) for the given (n, r) columns and global ranks R (rows), binomial or
    hypergeometric (the formulas of :mod:`itemsampling.kernel`), without the other columns.
    ``per_column``: the binomial terms summed elementwise, so that each entry is the same whatever other
    columns are computed with it (a matrix product may group its three terms differently for another
    number of columns; the cached columns of :func:`grid_kernel_columns` must not depend on that)."""
    N = n_items
    j = ranks.astype(np.float64) - 1.0  # decoys above the target
    m = sizes.astype(np.float64) - 1.0  # decoys
    R = support.astype(np.float64)
    if replacement:
        p = (R - 1.0) / (N - 1.0)
        interior = (p > 0) & (p < 1)
        # (r-1) log p + (n-r) log(1-p) + log C(n-1, r-1) as one (L x 3) @ (3 x J) product
        rows = np.column_stack([np.log(np.where(interior, p, 0.5)), np.log1p(-np.where(interior, p, 0.5)),
                                np.ones_like(p)])
        cols = np.vstack([j, m - j, gammaln(m + 1.0) - gammaln(j + 1.0) - gammaln(m - j + 1.0)])
        if per_column:
            out = rows[:, 0:1] * cols[0] + rows[:, 1:2] * cols[1] + cols[2]  # rows[:, 2] is 1
        else:
            out = rows @ cols
        if not interior.all():
            out[p <= 0] = np.where(j == 0, 0.0, -np.inf)
            out[p >= 1] = np.where(j == m, 0.0, -np.inf)
        return out
    pop = N - 1.0
    good = R - 1.0
    bad = N - R
    a = np.subtract.outer(good, j)  # good - j
    b = np.add.outer(bad, j - m)  # bad - (m - j)
    valid = (a >= 0) & (b >= 0)
    out = -gammaln(np.maximum(a, 0.0) + 1.0)
    out -= gammaln(np.maximum(b, 0.0) + 1.0)
    out += (gammaln(good + 1.0) + gammaln(bad + 1.0))[:, None]
    out += (-gammaln(j + 1.0) - gammaln(m - j + 1.0)
            - (gammaln(pop + 1.0) - gammaln(m + 1.0) - gammaln(pop - m + 1.0)))[None, :]
    out[~valid] = -np.inf
    return out


def kernel_columns(n_items: int, sample_size, ranks, replacement: bool = True, support=None,
                   rel: float = 1e-30) -> np.ndarray:
    r"""Columns :math:`K_{R,(n,r)} = P(r \mid R; n)` of the sampling kernel (:mod:`itemsampling.kernel`)
    for the given sampled ranks :math:`r` only, over the rows ``support`` (global ranks, default
    :math:`1..N`): an ``(L, len(ranks))`` array computed in log space. ``sample_size`` is one
    :math:`n` for every column or one per column (the distinct pairs of :func:`sampled_rank_table`).

    Entries below ``rel`` times their column's largest entry are set to exactly 0: they change
    :math:`q_r = \sum_R \pi_R K_{R,r}` by less than ``rel`` of the column's scale, and leaving them
    as subnormal numbers would slow every matrix-vector product of EM many times over. With
    :math:`n` up to :math:`n_{max}` this keeps adaptive EM from building an :math:`N\times n_{max}`
    kernel: only the columns of observed pairs are computed.
    """
    N = check_int(n_items, "n_items", low=2)
    r = check_ranks(ranks, "ranks", high=N)
    if np.ndim(sample_size) == 0:
        n = np.full(r.size, check_int(sample_size, "sample_size", low=2, high=N), dtype=np.int64)
    else:
        n = check_ranks(sample_size, "sample_size", high=N)
        if n.size != r.size or n.min() < 2:
            raise ValueError(f"sample_size must be an int in 2..{N} or one such size per rank ({r.size})")
    if np.any(r > n):
        raise ValueError("ranks must lie in 1..sample_size")
    S = np.arange(1, N + 1, dtype=np.int64) if support is None else check_ranks(support, "support", high=N)
    rel = _check_positive(rel, "rel")
    logk = _column_log_kernel(N, n, r, S, bool(replacement))
    logk[logk < logk.max(axis=0, keepdims=True) + np.log(rel)] = -np.inf
    return np.exp(logk, out=logk)


# ---------------------------------------------------------------------------------------------
# row blocks of the kernel and their products
# ---------------------------------------------------------------------------------------------
_BLOCK_ROWS = 256
_BAND_TOL = 1e-30


@functools.lru_cache(maxsize=2)
def _banded_kernel(n_items: int, sample_size: int, replacement: bool, lo_bytes=None):
    r"""The kernel stored as row blocks of 256 consecutive rows, each restricted to the band of
    sampled ranks where some row of the block holds at least ``1e-30`` times its own largest entry:
    the rows are the global ranks :math:`P(r \mid R)` (``lo_bytes`` ``None``, computed block by
    block, never the whole :math:`N\times n` matrix) or the cells of the grid whose first ranks are
    ``lo_bytes`` (rows of :func:`grid_kernel`).

    Every kernel row is unimodal in :math:`r` and concentrated within a few standard deviations
    of :math:`1 + (n-1)\theta_R`, so a block of 256 consecutive rows needs only a band of columns.
    Dropping entries below ``1e-30`` of their row's maximum changes no float64 sum
    :math:`\sum_R w_R P(r\mid R)P(s\mid R)` beyond its last digit, and cuts the cost of
    :math:`K^\top W K` from :math:`O(Nn^2)` to :math:`O(N\,\bar b^2)` (mean band :math:`\bar b`),
    and the memory to :math:`N\bar b` floats. Returns a tuple of ``(start, stop, lo, hi, block)``
    with ``block = K[start:stop, lo:hi]`` (0-based rows and columns).
    """
    whole = None if lo_bytes is None else _grid_kernel_cached(n_items, sample_size, replacement, lo_bytes)
    rows = n_items if whole is None else whole.shape[0]
    out = []
    for start in range(0, rows, _BLOCK_ROWS):
        stop = min(rows, start + _BLOCK_ROWS)
        K = kernel(n_items, sample_size, replacement, np.arange(start + 1, stop + 1)) if whole is None \
            else whole[start:stop]
        keep = K >= _BAND_TOL * K.max(axis=1, keepdims=True)
        cols = np.flatnonzero(keep.any(axis=0))
        lo, hi = int(cols[0]), int(cols[-1]) + 1
        block = np.array(K[:, lo:hi], order="C")  # a copy: the grid kernel is read-only
        block[~keep[:, lo:hi]] = 0.0
        block.flags.writeable = False
        out.append((start, stop, lo, hi, block))
    return tuple(out)


def _grid_blocks_key(grid) -> bytes | None:
    """The ``lo_bytes`` argument of :func:`_banded_kernel` (and the corrected-metric caches) for a
    grid: ``None`` for the exact grid (the global ranks themselves)."""
    return None if grid is None or grid.exact else grid.lo.tobytes()


def _row_bands(K, block: int = 512, rel: float = 1e-30):
    """Row blocks of ``K`` with the band of columns where some row of the block holds at least
    ``rel`` times its own largest entry (kernel rows are unimodal and concentrated in :math:`r`)."""
    out = []
    for start in range(0, K.shape[0], block):
        B = K[start:start + block]
        keep = (B >= rel * B.max(axis=1, keepdims=True)).any(axis=0)
        cols = np.flatnonzero(keep)
        out.append((start, min(K.shape[0], start + block), int(cols[0]), int(cols[-1]) + 1))
    return out


def _blocks(K, bands):
    """The row blocks ``(start, stop, lo, hi, K[start:stop, lo:hi])`` of a kernel held whole, for the
    bands of :func:`_row_bands` (views, no copy)."""
    return [(start, stop, lo, hi, K[start:stop, lo:hi]) for start, stop, lo, hi in bands]


def _block_products(blocks, n: int, weights, F=None, gram: bool = True, sums: bool = True):
    r"""The one routine for the kernel products of the estimators: :math:`K^\top W K` (n x n,
    symmetrised), :math:`K^\top W F` (or ``None``) and :math:`K^\top w` for ``W = diag(weights)``,
    summed over row blocks ``(start, stop, lo, hi, B)`` restricted to their band of sampled ranks
    (:func:`_banded_kernel` for the dense kernel, :func:`_blocks` of a kernel held whole), skipping
    blocks of zero weight and rows of ``F`` that are zero (top-K metrics: rows :math:`R \le K` only).
    Cost :math:`O(N\bar b^2)` for mean band :math:`\bar b` instead of :math:`O(Nn^2)`. Used for the
    BV / MN matrices (:mod:`.corrected`) on ranks and on cells, and for the MES Hessian
    (:mod:`.distribution`). ``gram=False`` leaves the Gram matrix out (``None``): memory :math:`O(n)`
    instead of :math:`O(n^2)`, for the banded BV / MN solve; ``sums=False`` leaves :math:`K^\top w` out
    (the MES Hessian needs the Gram matrix only)."""
    G = np.zeros((n, n)) if gram else None
    rhs = None if F is None else np.zeros((n, F.shape[1]))
    nonzero_F = None if F is None else np.any(F != 0, axis=1)
    c = np.zeros(n)
    for start, stop, lo, hi, B in blocks:
        w = weights[start:stop]
        if not np.any(w):
            continue
        Bw = B * w[:, None]
        if gram:
            G[lo:hi, lo:hi] += B.T @ Bw
        if sums:
            c[lo:hi] += Bw.sum(axis=0)
        if rhs is not None and np.any(nonzero_F[start:stop]):
            rhs[lo:hi] += Bw.T @ F[start:stop]
    return (0.5 * (G + G.T) if gram else None), rhs, c


_BAND_BLOCK = 16
#: The banded solve is used (``solver="auto"``) for n >= this and a band at most half of n.
_BANDED_MIN_N = 1000


def _gram_band_rows(K, weights, bands, u: int) -> np.ndarray:
    r"""The upper band of :math:`\sum_c \mathrm{weights}_c \bar K_c\bar K_c^\top` as an
    ``(n, u + 1)`` array ``S[i, d] = G[i, i + d]`` (rows of ``S`` beyond ``n - i`` are padding;
    ``S.T`` is LAPACK's lower band storage). Each row block's product ``B^T W B`` (columns
    ``lo:hi``, ``hi - lo <= u + 1``) is added through a strided view of ``S`` in which element
    ``(a, b)`` is ``S[lo + a, b - a]``; only the upper triangle is added (the lower one as zeros)."""
    n = K.shape[1]
    S = np.zeros((n, u + 1))
    flat = S.reshape(-1)
    for start, stop, lo, hi in bands:
        wb = weights[start:stop]
        if not np.any(wb):
            continue
        B = K[start:stop, lo:hi]
        m = hi - lo
        view = np.lib.stride_tricks.as_strided(flat[lo * (u + 1):], shape=(m, m), strides=(u * 8, 8))
        view += np.triu(B.T @ (B * wb[:, None]))
    return S


# ---------------------------------------------------------------------------------------------
# metrics from cell masses
# ---------------------------------------------------------------------------------------------
_NDCG_EXACT = 4096


@functools.lru_cache(maxsize=1)
def _ndcg_table() -> np.ndarray:
    R = np.arange(1, _NDCG_EXACT + 1, dtype=np.float64)
    return np.concatenate([[0.0], np.cumsum(1.0 / np.log2(R + 1.0))])


def _ndcg_cumsum(x: np.ndarray) -> np.ndarray:
    r""":math:`\sum_{R=1}^{x} 1/\log_2(R+1)` for integer ``x >= 0``: a table up to 4096, beyond it
    Euler-Maclaurin on :math:`\int dR\,\ln 2/\ln(R+1) = \ln 2\,\mathrm{Ei}(\ln(R+1))` with the end
    corrections (remainder below :math:`10^{-13}`)."""
    x = np.asarray(x, dtype=np.int64)
    out = np.empty(x.shape)
    small = x <= _NDCG_EXACT
    out[small] = _ndcg_table()[x[small]]
    if np.any(~small):
        X0 = float(_NDCG_EXACT)
        xs = x[~small].astype(np.float64)
        ln2 = np.log(2.0)

        def f(r):
            return ln2 / np.log(r + 1.0)

        def fp(r):
            return -ln2 / ((r + 1.0) * np.log(r + 1.0) ** 2)

        integral = ln2 * (expi(np.log(xs + 1.0)) - expi(np.log(X0 + 1.0)))
        out[~small] = _ndcg_table()[-1] + integral + (f(xs) - f(X0)) / 2.0 + (fp(xs) - fp(X0)) / 12.0
    return out


def _range_sums(name: str, lo, top) -> np.ndarray:
    r""":math:`\sum_{R=l}^{t} g(R)` of the untruncated metric :math:`g` (recall: 1 per rank; AP:
    :math:`1/R` by the digamma function; NDCG: :math:`1/\log_2(R+1)` by :func:`_ndcg_cumsum`), for
    arrays of first ranks ``lo`` and last ranks ``top`` (0 where ``top < lo``)."""
    below = np.asarray(lo) - 1
    top = np.maximum(top, below)
    if name in ("recall", "precision"):
        return (top - below).astype(np.float64)
    if name == "ap":
        return psi(top + 1.0) - psi(below + 1.0)
    return _ndcg_cumsum(top) - _ndcg_cumsum(below)  # ndcg


def _cell_metric_sums(grid: RankGrid, metric: str, k):
    r""":math:`\sum_{R\in c} F(R)` for every cell, for the metric with cut-off ``k`` (None = none)."""
    name = canonical_metric(metric)
    metric_function(name, k, grid.n_items)  # validates the (metric, k) pair
    N = grid.n_items
    lo, hi = grid.lo, grid.hi
    if name == "auc":
        w = grid.widths.astype(np.float64)
        return (w * N - (lo + hi) * w / 2.0) / (N - 1.0)
    s = _range_sums(name, lo, hi if k is None else np.minimum(hi, k))
    return s / k if name == "precision" and k is not None else (s / N if name == "precision" else s)


def grid_metric(masses, grid: RankGrid, metric: str, k):
    r""":math:`\widehat T = \sum_c w_c\,\frac1{|c|}\sum_{R\in c} F(R)` (TORS Eq. 26-27 with
    :math:`P` uniform within cells) for one cut-off ``k`` (float) or a sequence (array). Any
    :math:`K \le N` works; cells are split at :math:`K`. Exact for an exact grid."""
    if not isinstance(grid, RankGrid):
        raise ValueError(f"grid must be a RankGrid (from rank_grid), got {type(grid).__name__}")
    w = np.asarray(masses, dtype=np.float64)
    if w.shape != (grid.n_cells,) or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"masses must be a finite, non-negative vector with one entry per cell ({grid.n_cells})")
    seq = np.ndim(k) > 0
    ks = list(np.atleast_1d(np.asarray(k, dtype=object))) if seq else [k]
    widths = grid.widths.astype(np.float64)
    vals = np.array([float((w / widths) @ _cell_metric_sums(grid, metric, kk)) for kk in ks])
    return vals if seq else float(vals[0])


# ---------------------------------------------------------------------------------------------
# metrics of per-user catalogue sizes on the common grid of rank fractions
# ---------------------------------------------------------------------------------------------
def pool_ranks(n_items: int, ranks, pools) -> np.ndarray:
    r""":math:`R_u(R) = 1 + \mathrm{round}\bigl(\frac{R-1}{N-1}(N_u - 1)\bigr)` (halves rounded up), elementwise
    (``ranks`` and ``pools`` broadcast, integers, unchecked): the rank in a pool of :math:`N_u` items of the
    point :math:`R` of the largest pool's grid, the one map of :func:`pool_rank_map`, the metrics on the
    pools and the identification bounds."""
    return 1 + (2 * (np.asarray(ranks) - 1) * (np.asarray(pools) - 1) + (n_items - 1)) // (2 * (n_items - 1))


def pool_rank_map(n_items: int, pool) -> np.ndarray:
    r"""The rank in a pool of :math:`N_u` items of each point of the common grid of rank fractions
    :math:`t = (R-1)/(N-1)`, :math:`R = 1..N` (:math:`N` = the largest pool):
    :math:`R_u(R) = 1 + \mathrm{round}\bigl(t\,(N_u - 1)\bigr)` (halves rounded up), an int64 array
    of length :math:`N` onto :math:`1..N_u`; the identity when :math:`N_u = N`. With an array of
    pools, one column per pool: shape ``(N, len(pool))``."""
    N = check_int(n_items, "n_items", low=2)
    if np.ndim(pool) == 0:
        Nu = np.int64(check_int(pool, "pool", low=2, high=N))
    else:
        Nu = check_ranks(pool, "pool", high=N)[None, :]
        if Nu.min() < 2:
            raise ValueError(f"pool must hold catalogue sizes in 2..{N}, got {Nu.min()}")
    R = np.arange(1, N + 1, dtype=np.int64)
    return pool_ranks(N, R[:, None] if np.ndim(pool) else R, Nu)


def pool_metric_matrix(metrics, ks, n_items: int, pools, weights=None) -> np.ndarray:
    r""":math:`F(R_u(R))` on the common grid :math:`R = 1..N` for each distinct pool :math:`N_g` in
    ``pools`` (:func:`pool_rank_map`): an array ``(N, len(metrics), len(ks), len(pools))``, each
    metric evaluated in the pool's own catalogue (e.g. AUC :math:`(N_g - R_g)/(N_g - 1)`). With
    ``weights`` (one per pool, e.g. :math:`M_g/M`) the weighted sum over the pools,
    :math:`\bar F(R) = \sum_g w_g F_{N_g}(R_g(R))`, shape ``(N, len(metrics), len(ks))``, computed a
    block of pools at a time (memory :math:`O(N)` plus a block of about 32 MB, whatever the number of
    pools; a cut-off metric only on the rows some pool maps to a rank :math:`\le K`)."""
    N = check_int(n_items, "n_items", low=2)
    pools = np.atleast_1d(np.asarray(pools, dtype=np.int64))
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64).reshape(-1)
        if w.shape != pools.shape:
            raise ValueError(f"weights must hold one weight per pool ({pools.size}), got shape {np.shape(weights)}")
        check_memory(8.0 * N * (len(metrics) * len(ks) + 2), "the pool-weighted metric values", "n_items")
        check_ranks(pools, "pools", high=N)
        out = np.zeros((N, len(metrics), len(ks)))
        for i, m in enumerate(metrics):
            for j, k in enumerate(ks):
                out[:, i, j] = _weighted_pool_metric(m, k, N, pools, w)
        return out
    G = pools.size
    check_memory(8.0 * N * (len(metrics) * len(ks) * G + 2 * pools.size), f"metric values over {pools.size} "
                 "catalogue sizes", "n_items")
    Rg = pool_rank_map(N, pools)  # (N, G)
    out = np.empty((N, len(metrics), len(ks), pools.size))
    for i, m in enumerate(metrics):
        for j, k in enumerate(ks):
            if canonical_metric(m) == "auc" or (canonical_metric(m) == "precision" and k is None):
                F = np.column_stack([metric_function(m, k, int(g))(Rg[:, c]) for c, g in enumerate(pools)])
            else:  # F(R) does not involve the catalogue size: all pools in one call, and with a
                # cut-off only the rows some pool maps to a rank <= K (the smallest pool maps highest)
                top = N if k is None else int(np.searchsorted(Rg[:, int(np.argmin(pools))], k, side="right"))
                F = np.zeros((N, pools.size))
                F[:top] = metric_function(m, k, N)(Rg[:top])
            out[:, i, j] = F
    return out


def _weighted_pool_metric(metric, k, N: int, pools: np.ndarray, w: np.ndarray) -> np.ndarray:
    r""":math:`\bar F(R) = \sum_g w_g F_{N_g}(R_g(R))`, :math:`R = 1..N`, for one metric and cut-off
    (:func:`pool_metric_matrix` with ``weights``): blocks of pools, each on the rows where some pool of
    the block maps to a rank :math:`\le K` (all rows without a cut-off); the rank map is
    :func:`pool_rank_map`'s. Recall@K and Precision@K, :math:`1[R_g \le K]` (over :math:`K`), need no
    block: each pool contributes :math:`w_g` to the rows before its threshold (time :math:`O(N + G)`;
    the tests compare with the blocks). ``pools``: checked sizes in ``2..N``."""
    name = canonical_metric(metric)
    own_size = name == "auc" or (name == "precision" and k is None)  # F involves the pool's size
    out = np.zeros(N)
    if k is not None:
        check_int(k, "k", low=1)
    nu = pools.astype(np.int64)
    if k is None:
        top = N
    else:  # the rows R whose rank in the smallest pool is <= K: 2 j (N_min - 1) + N - 1 < 2 (N - 1) K
        top = int(min(N, -(-(2 * (N - 1) * int(k) - (N - 1)) // (2 * (int(nu.min()) - 1)))))
    if k is not None and name in ("recall", "precision"):  # 1[R_g <= K] (/ K): one threshold per pool
        # R_g(R) <= K for exactly the rows j = R - 1 < ceil((2 (N - 1) K - (N - 1)) / (2 (N_g - 1))), so
        # Fbar(j) = sum of w_g over the pools whose count of such rows exceeds j: O(N + G), not O(N G)
        count = np.minimum(N, -(-(2 * (N - 1) * int(k) - (N - 1)) // (2 * (nu - 1))))
        acc = np.bincount(count, weights=w, minlength=N + 1)
        out[:] = np.cumsum(acc[::-1])[::-1][1:]
        return out / int(k) if name == "precision" else out
    block = max(1, int(4e6 // max(top, 1)))
    rows = np.arange(1, top + 1, dtype=np.int64)[:, None]
    for s in range(0, nu.size, block):
        g = nu[s:s + block][None, :]
        Rg = pool_ranks(N, rows, g)  # pool_rank_map on the rows 1..top
        if own_size:
            F = np.column_stack([metric_function(name, k, int(gg))(Rg[:, c]) for c, gg in enumerate(g[0])])
        else:
            F = metric_function(name, k, N)(Rg)
        out[:top] += F @ w[s:s + block]
    return out


def pool_cell_metric(metrics, ks, grid: RankGrid, pools, weights) -> np.ndarray:
    r"""The pool-weighted metric :math:`\bar F` (:func:`pool_metric_matrix` with ``weights``) averaged
    over each cell of ``grid``, :math:`\frac1{|c|}\sum_{R\in c}\bar F(R)`: an array
    ``(cells, len(metrics), len(ks))``; :math:`\widehat T = \sum_c w_c` times it is the metric of cell
    masses :math:`w_c` with :math:`P` uniform within cells (TORS Eq. 26-27, per-user pools as in
    :mod:`.distribution`). Exact on every cell (the ranks of a cell are summed one by one)."""
    F = pool_metric_matrix(metrics, ks, grid.n_items, pools, weights)
    if grid.exact:
        return F
    return np.add.reduceat(F, grid.lo - 1, axis=0) / grid.widths[:, None, None]


# ---------------------------------------------------------------------------------------------
# old import paths of the entry points on a grid, which moved up to the modules whose algorithms they
# call: resolved on first use by name (importlib), so that the representation imports none of them
# ---------------------------------------------------------------------------------------------
_MOVED = {
    "grid_fit_rank_distribution": "itemsampling.estimators.distribution",
    "grid_mes_dual": "itemsampling.estimators.distribution",
    "grid_corrected_metrics": "itemsampling.estimators.corrected",
    "grid_estimate_metrics": "itemsampling.estimators.estimate",
    "GRID_METHODS": "itemsampling.estimators.estimate",
    "GridFit": "itemsampling.estimators.distribution",  # a fit on the grid is a FitResult with its grid
}


def __getattr__(name):
    """The names in :data:`_MOVED` (the entry points on a given grid, and ``GridFit``, now
    :class:`~itemsampling.estimators.distribution.FitResult`) still resolve from here."""
    if name in _MOVED:
        import importlib

        return getattr(importlib.import_module(_MOVED[name]), "FitResult" if name == "GridFit" else name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
