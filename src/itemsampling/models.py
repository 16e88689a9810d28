r"""Classical recommenders, fit on implicit interactions and scoring every item for a batch of users.

Every model follows one interface:

* ``model.fit(train)`` (a DataFrame with integer ``user`` and ``item`` columns, 0-based ids;
  every row is a positive interaction) returns the model;
* ``model.score(users)`` returns a float64 array of shape ``(len(users), n_items)``, larger is
  better; training items are **not** masked here (:func:`itemsampling.ranking.global_ranks`
  does that);
* ``model.score_items(users, items)`` scores one list of items per user (shape
  ``(len(users), k)``); factor and neighbourhood models compute only those entries, which is what
  a sampled evaluation pays for.

``n_users_``/``n_items_`` come from ``train.attrs`` (see :func:`itemsampling.data.n_items_of`)
or ``fit(train, n_items=...)``. Scoring before ``fit`` raises ``ValueError``.

Models: :class:`Random`, :class:`Popular`, :class:`ItemKNN` (Krichene & Rendle 2020, Sec. 9,
Eq. 27-30), :class:`UserKNN`, :class:`EASE` (Steck 2019), :class:`ALS` (Hu et al. 2008, via the
``implicit`` package, with Krichene & Rendle's loss parameterisation), :class:`BPR` (Rendle et al.
2009, via ``implicit``), :class:`Oracle` (the
simulator's true preferences; Ihemelandu & Ekstrand 2023, Sec. IV).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ._validation import as_rng, check_bool, check_int, check_memory, check_real
from .data import n_items_of, n_users_of

__all__ = ["Recommender", "Random", "Popular", "ItemKNN", "UserKNN", "EASE", "ALS", "BPR", "Oracle",
           "interaction_matrix", "gram"]


def interaction_matrix(df: pd.DataFrame, n_users: int, n_items: int) -> sp.csr_matrix:
    """Binary user x item CSR matrix of the (user, item) pairs in ``df`` (duplicates count once)."""
    for c in ("user", "item"):
        if c not in df.columns:
            raise ValueError(f"train is missing column {c!r}; expected columns user, item")
        if len(df) and df[c].dtype.kind not in "iu":
            raise ValueError(f"train[{c!r}] must hold integer ids, got dtype {df[c].dtype}")
    u = df["user"].to_numpy(np.int64)
    i = df["item"].to_numpy(np.int64)
    if u.size and (u.min() < 0 or u.max() >= n_users):
        raise ValueError(f"user ids must lie in 0..{n_users - 1}")
    if i.size and (i.min() < 0 or i.max() >= n_items):
        raise ValueError(f"item ids must lie in 0..{n_items - 1}")
    X = sp.csr_matrix((np.ones(u.size, dtype=np.float64), (u, i)), shape=(n_users, n_items))
    X.sum_duplicates()
    X.data[:] = 1.0
    return X


def gram(X: sp.csr_matrix) -> np.ndarray:
    """Dense item-item co-occurrence matrix :math:`X^\\top X` (float64). Uses a dense float32 BLAS
    product when ``X`` is small enough (exact: counts below 2**24), else a sparse product."""
    n_users, n_items = X.shape
    if n_users * n_items <= 60_000_000 and n_users < 2**24:
        Xd = X.toarray().astype(np.float32)
        return (Xd.T @ Xd).astype(np.float64)
    return (X.T @ X).toarray().astype(np.float64)


class Recommender:
    """Base class: bookkeeping, input checks and the default :meth:`score_items`."""

    name = "recommender"
    #: how many dense N x N float64 item-item matrices the fit holds at once (0: none)
    _dense_item_matrices = 0

    def _params(self) -> dict:
        return {}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._params().items())
        return f"{type(self).__name__}({args})"

    def fit(self, train: pd.DataFrame, n_items: int | None = None, n_users: int | None = None):
        if not isinstance(train, pd.DataFrame):
            raise ValueError(f"train must be a pandas DataFrame, got {type(train).__name__}")
        if len(train) == 0:
            raise ValueError("train must not be empty")
        self.n_items_ = n_items_of(train) if n_items is None else check_int(n_items, "n_items", low=1)
        self.n_users_ = n_users_of(train) if n_users is None else check_int(n_users, "n_users", low=1)
        if self._dense_item_matrices:
            N = self.n_items_
            check_memory(self.dense_item_bytes(N),
                         f"{type(self).__name__} on {N} items ({self._dense_item_matrices} dense N x N matrices)",
                         "the number of items (n_items), or use a model without an item-item matrix "
                         "(ALS, UserKNN, Popular)")
        need = self._fit_bytes(self.n_users_, self.n_items_)
        if need:
            check_memory(need, f"{type(self).__name__} on {self.n_users_} users and {self.n_items_} items "
                         f"with factors = {getattr(self, 'factors', '?')}", "factors (or the number of users and items)")
        self.X_ = interaction_matrix(train, self.n_users_, self.n_items_)
        self._fit(self.X_)
        self.fitted_ = True
        return self

    @classmethod
    def dense_item_bytes(cls, n_items: int) -> float:
        """Bytes of the dense :math:`N\\times N` item-item matrices a fit on ``n_items`` items
        allocates: 8 bytes a cell times the class's number of such matrices (0 for a model
        without one); what :meth:`fit` checks against the memory budget."""
        return cls._dense_item_matrices * 8.0 * n_items * n_items

    def _fit_bytes(self, n_users: int, n_items: int) -> float:
        """Bytes the fit allocates beyond the interaction matrix (0: nothing that grows with a
        parameter); checked with :func:`~itemsampling._validation.check_memory` before fitting."""
        return 0.0

    def _fit(self, X: sp.csr_matrix) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _check_users(self, users) -> np.ndarray:
        if not getattr(self, "fitted_", False):
            raise ValueError(f"{type(self).__name__} is not fitted: call fit(train) before scoring")
        u = np.atleast_1d(np.asarray(users))
        if u.ndim != 1 or u.dtype.kind not in "iu":
            raise ValueError("users must be a 1-d array of integer user ids")
        u = u.astype(np.int64)
        if u.size and (u.min() < 0 or u.max() >= self.n_users_):
            raise ValueError(f"users must lie in 0..{self.n_users_ - 1}")
        return u

    def score(self, users) -> np.ndarray:
        """Scores of every item for each user: float64 array ``(len(users), n_items)``."""
        u = self._check_users(users)
        return np.asarray(self._score(u), dtype=np.float64)

    def _score(self, users: np.ndarray) -> np.ndarray:  # pragma: no cover - overridden
        raise NotImplementedError

    def score_items(self, users, items) -> np.ndarray:
        """Scores of ``items[b, j]`` for user ``users[b]``: shape ``items.shape``."""
        u = self._check_users(users)
        it = np.asarray(items)
        if it.ndim != 2 or it.shape[0] != u.size or it.dtype.kind not in "iu":
            raise ValueError("items must be an integer array of shape (len(users), k)")
        if it.size and (it.min() < 0 or it.max() >= self.n_items_):
            raise ValueError(f"items must lie in 0..{self.n_items_ - 1}")
        return np.asarray(self._score_items(u, it.astype(np.int64)), dtype=np.float64)

    def _score_items(self, users, items):
        return np.take_along_axis(self._score(users), items, axis=1)


class Random(Recommender):
    """Uniformly random scores (a fresh draw at every call, from ``rng``)."""

    name = "random"

    def __init__(self, rng=None):
        self.rng = rng

    def _params(self):
        return {"rng": self.rng if not isinstance(self.rng, np.random.Generator) else "Generator"}

    def _fit(self, X):
        self._gen = as_rng(self.rng)

    def _score(self, users):
        return self._gen.random((users.size, self.n_items_))

    def _score_items(self, users, items):
        return self._gen.random(items.shape)


class Popular(Recommender):
    """Number of training users who interacted with the item (the same list for everyone)."""

    name = "popular"

    def _fit(self, X):
        self.popularity_ = np.asarray(X.sum(axis=0)).ravel()

    def _score(self, users):
        return np.broadcast_to(self.popularity_, (users.size, self.n_items_)).copy()

    def _score_items(self, users, items):
        return self.popularity_[items]


class ItemKNN(Recommender):
    r"""Item-based collaborative filtering as specified by Krichene & Rendle 2020, Sec. 9.

    * Eq. 27, cosine similarity sharpened by an exponent :math:`q`:
      :math:`s_{ij} = \bigl(|U_i \cap U_j| / \sqrt{|U_i|\,|U_j|}\bigr)^q` (:math:`U_i`: training
      users of item :math:`i`); the diagonal :math:`s_{ii}` is set to 0 (an item is not its own
      neighbour).
    * Eq. 28, optional neighbourhoods: :math:`s'_{ij} = s_{ij}\,\delta(i \in N_k(j))\,\delta(j \in
      N_{k'}(i))`, :math:`N_k(i)` the :math:`k` items most similar to :math:`i` (``k``,
      ``k_prime``; ``None`` is :math:`\infty`). Ties at the cut are broken by the lower item id.
    * Eq. 29, row normalisation :math:`s''_{ij} = s'_{ij} / \lVert s'_i \rVert_2`.
    * Eq. 30, prediction :math:`\hat y(u,i) = \sum_{j \in H_u} s''_{ij} / \sum_{j} s''_{ij}`.

    Note that the normalisation of Eq. 29 cancels in Eq. 30 (numerator and denominator share the
    factor), so the prediction is the share of item :math:`i`'s neighbourhood mass that the user
    has consumed; items whose row is empty score 0.

    The similarity is sparse (``similarity_``, a CSR matrix of :math:`s''`): :math:`s_{ij} > 0`
    only where items :math:`i` and :math:`j` share a user. The co-occurrence counts are computed
    for a block of item rows at a time (about ``block_entries`` counts), and each block's
    neighbourhoods are cut before the next, so a fit holds the kept similarities and one block,
    never an :math:`N \times N` array (on the real catalogues of 15,000-25,000 items 4-5 % of the
    pairs share a user). :math:`s` is symmetric (computed as :math:`c_{ij} / (\sqrt{c_i}\sqrt{c_j})`,
    the same number for :math:`ij` and :math:`ji`), so :math:`N_k(j)` is read off row :math:`j`.
    The fit refuses, before computing, a similarity whose entries (at most
    :math:`\min(N(N-1), \sum_u |H_u|^2)`) would exceed the memory budget.

    Krichene & Rendle's recommender Y is ``ItemKNN(q=3)``; Z is ``ItemKNN(q=1, k_prime=10)``.
    """

    name = "itemknn"
    #: bytes a similarity entry costs at the fit's peak (value and column index of s'', of its
    #: transpose and of the blocks it is built from, and the row normalisation's temporaries)
    _ENTRY_BYTES = 64

    def __init__(self, q: float = 1.0, k: int | None = None, k_prime: int | None = None, block_entries: int = 4_000_000):
        self.q = check_real(q, "q", low=0.0, low_open=True)
        self.k = None if k is None else check_int(k, "k", low=1)
        self.k_prime = None if k_prime is None else check_int(k_prime, "k_prime", low=1)
        self.block_entries = check_int(block_entries, "block_entries", low=1)

    def _params(self):
        return {"q": self.q, "k": self.k, "k_prime": self.k_prime}

    @staticmethod
    def _row_topk(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, k: int) -> np.ndarray:
        r"""Boolean mask of the entries among the ``k`` largest ``vals`` of their row, ties going
        to the lower column id (the entries of a sparse matrix as ``rows, cols, vals``). Values are
        compared on 40 bits of mantissa, so that similarities equal in exact arithmetic (e.g.
        :math:`2/\sqrt{28} = 3/\sqrt{63}`) tie whatever the last bits of their rounding."""
        m, e = np.frexp(vals)
        key = np.ldexp(np.round(m * 2.0**40), e)
        order = np.lexsort((cols, -key, rows))
        r = rows[order]
        start = np.searchsorted(r, r, side="left")  # first position of each entry's row (r sorted)
        keep = np.empty(r.size, dtype=bool)
        keep[order] = (np.arange(r.size) - start) < k
        return keep

    def _blocks(self, X: sp.csr_matrix):
        r"""The rows of :math:`s` (Eq. 27, diagonal 0) for consecutive blocks of items: pairs
        ``(a, B)``, ``B`` the CSR rows ``a, a+1, ...`` of :math:`s` (its nonzero entries only); a
        block holds at most about ``block_entries`` co-occurrence counts (bounded by
        :math:`\sum_{u \in U_i} |H_u|` per item row), or one row."""
        XT = X.T.tocsr()  # items x users
        norm = np.sqrt(np.diff(XT.indptr).astype(np.float64))  # sqrt |U_i|
        bound = XT @ np.diff(X.indptr).astype(np.float64)  # >= nnz of each row of X^T X
        N = XT.shape[0]
        a = 0
        while a < N:
            b = int(np.searchsorted(np.cumsum(bound[a:]), self.block_entries, side="right")) + a
            b = min(N, max(b, a + 1))
            C = sp.csr_matrix(XT[a:b] @ X)
            rows = np.repeat(np.arange(a, b), np.diff(C.indptr))
            vals = C.data / (norm[rows] * norm[C.indices])  # a symmetric product: s_ij == s_ji exactly
            vals[C.indices == rows] = 0.0
            del rows
            np.clip(vals, 0.0, 1.0, out=vals)
            if self.q != 1.0:
                vals **= self.q
            C.data = vals
            C.eliminate_zeros()
            yield a, C
            a = b

    def _fit(self, X):
        N = self.n_items_
        hist = np.diff(X.indptr).astype(np.float64)
        entries = min(float(N) * (N - 1), float((hist * hist).sum()))
        check_memory(self._ENTRY_BYTES * entries, f"ItemKNN's sparse similarity on {N} items (at most "
                     f"{entries:,.0f} co-occurring pairs)", "the number of items or interactions")
        uncut = self.k is None and self.k_prime is None
        full, col_cut, row_cut = [], [], []  # the uncut blocks, or (rows, cols, vals) kept by each cut
        for a, B in self._blocks(X):
            if uncut:
                full.append(B)
                continue
            rows = np.repeat(np.arange(a, a + B.shape[0], dtype=np.int32), np.diff(B.indptr))
            cols, vals = B.indices, B.data
            # Eq. 28: keep (i, j) when j is in N_k'(i) (row i) and i is in N_k(j) (row j, by symmetry),
            # both from the uncut s: an entry (j, i) of row j's top k is the pair (i, j).
            if self.k is not None:
                m = self._row_topk(rows, cols, vals, self.k)
                col_cut.append((cols[m], rows[m], vals[m]))
            if self.k_prime is not None:
                m = self._row_topk(rows, cols, vals, self.k_prime)
                row_cut.append((rows[m], cols[m], vals[m]))

        def build(parts):
            if not parts:
                return sp.csr_matrix((N, N))
            r, c, v = (np.concatenate([p[j] for p in parts]) for j in range(3))
            return sp.csr_matrix((v, (r, c)), shape=(N, N))

        if uncut:
            S = sp.vstack(full, format="csr") if full else sp.csr_matrix((N, N))
        elif self.k is None or self.k_prime is None:
            S = build(col_cut or row_cut)
        else:
            S = sp.csr_matrix(build(col_cut).multiply(build(row_cut) != 0))
        del full, col_cut, row_cut
        S.sum_duplicates()
        S.eliminate_zeros()
        S.sort_indices()
        lengths = np.diff(S.indptr)
        row_norm = np.sqrt(np.bincount(np.repeat(np.arange(N), lengths), weights=S.data * S.data, minlength=N))
        inv = np.divide(1.0, row_norm, out=np.zeros_like(row_norm), where=row_norm > 0)
        S.data *= np.repeat(inv, lengths)  # Eq. 29, in place
        denom = np.bincount(np.repeat(np.arange(N), lengths), weights=S.data, minlength=N)
        self.similarity_ = S
        self._denom = np.where(denom > 0, denom, 1.0)
        self._S_T = S.T.tocsr()  # row j: s''_{ij} over items i

    def _score(self, users):
        num = (self.X_[users] @ self._S_T).toarray()  # (b, N): sum_{j in H_u} s''_{ij}
        return num / self._denom[None, :]

    def _score_items(self, users, items):
        out = np.empty(items.shape)
        for s in range(0, users.size, 256):
            sl = slice(s, s + 256)
            out[sl] = np.take_along_axis(self._score(users[sl]), items[sl], axis=1)
        return out


class UserKNN(Recommender):
    r"""User-based collaborative filtering: cosine similarity between users' binary profiles,
    sharpened by an exponent ``q``; the ``k`` most similar other users of :math:`u` form
    :math:`N_k(u)` and :math:`\hat y(u,i) = \sum_{v \in N_k(u)} s_{uv}\, x_{vi}`
    (Ihemelandu & Ekstrand 2023 use LensKit's UserUser; this is its implicit-feedback form).
    Computed in chunks of users so memory stays bounded."""

    name = "userknn"

    def __init__(self, k: int = 50, q: float = 1.0, batch_size: int = 512):
        self.k = check_int(k, "k", low=1)
        self.q = check_real(q, "q", low=0.0, low_open=True)
        self.batch_size = check_int(batch_size, "batch_size", low=1)

    def _params(self):
        return {"k": self.k, "q": self.q}

    def _fit(self, X):
        cnt = np.asarray(X.sum(axis=1)).ravel()
        inv = np.divide(1.0, np.sqrt(cnt), out=np.zeros_like(cnt, dtype=np.float64), where=cnt > 0)
        self._Xn = sp.diags(inv) @ X  # rows scaled to unit norm
        self._XnT = self._Xn.T.tocsr()

    def _neighbours(self, users):
        S = np.asarray((self._Xn[users] @ self._XnT).todense())  # (b, U) cosine
        S[np.arange(users.size), users] = -np.inf  # not one's own neighbour
        k = min(self.k, self.n_users_ - 1)
        idx = np.argpartition(-S, k - 1, axis=1)[:, :k] if k < S.shape[1] else np.argsort(-S, axis=1)
        w = np.take_along_axis(S, idx, axis=1)
        w = np.where(np.isfinite(w), np.maximum(w, 0.0), 0.0) ** self.q
        rows = np.repeat(np.arange(users.size), idx.shape[1])
        return sp.csr_matrix((w.ravel(), (rows, idx.ravel())), shape=(users.size, self.n_users_))

    def _score(self, users):
        out = np.empty((users.size, self.n_items_))
        for s in range(0, users.size, self.batch_size):
            b = users[s:s + self.batch_size]
            out[s:s + b.size] = (self._neighbours(b) @ self.X_).toarray()
        return out


#: The largest catalogue on which EASE's Cholesky factorisation and inverse use more than one BLAS thread
#: (:class:`EASE`).
_EASE_THREADED_MAX_ITEMS = 12_000


class EASE(Recommender):
    r"""EASE (Steck 2019, Eq. 8): with the Gram matrix :math:`G = X^\top X` and
    :math:`P = (G + \lambda I)^{-1}`, the item-item weights are
    :math:`B = I - P\,\mathrm{diag}(1/\mathrm{diag}(P))` (so :math:`\mathrm{diag}(B) = 0`), and
    :math:`\hat y(u, \cdot) = x_u B`. ``lam`` is :math:`\lambda`.

    The fit holds one dense :math:`N \times N` float64 matrix: :math:`G + \lambda I` is built
    from the sparse Gram matrix, factored (Cholesky, LAPACK ``potrf``) and inverted (``potri``) in
    place, and turned into :math:`B` in place; :math:`O(N^3)` operations (on 2 cores about
    1 s at 3,706 items; see ``benchmarks/real_models.py`` for real catalogues)."""

    _dense_item_matrices = 1

    name = "ease"

    def __init__(self, lam: float = 500.0):
        self.lam = check_real(lam, "lam", low=0.0, low_open=True)

    def _params(self):
        return {"lam": self.lam}

    def _fit(self, X):
        from scipy.linalg import lapack
        from threadpoolctl import threadpool_limits

        N = X.shape[1]
        G = np.asfortranarray((X.T @ X).toarray())  # |U_i ∩ U_j|, exact in float64
        G[np.diag_indices(N)] += self.lam
        # Cholesky of G + lam I (positive definite for lam > 0) and its inverse, both in place. scipy's
        # OpenBLAS (0.3.30) crashes in a multi-threaded potrf above about 16,000 rows (measured: 12,000
        # works, 16,400 and 16,980 segfault, with 2 threads): one thread there.
        with threadpool_limits(1 if N > _EASE_THREADED_MAX_ITEMS else None, "blas"):
            G, info = lapack.dpotrf(G, lower=False, overwrite_a=True, clean=False)
            if info != 0:  # pragma: no cover - G + lam I is positive definite
                raise ValueError(f"EASE: the Gram matrix plus lam = {self.lam} is not positive definite "
                                 f"(potrf info {info})")
            P, info = lapack.dpotri(G, lower=False, overwrite_c=True)
        if info != 0:  # pragma: no cover
            raise ValueError(f"EASE: inverting the Gram matrix failed (potri info {info})")
        for s in range(0, N, 1024):  # the lower triangle from the upper, a block of rows at a time
            e = min(N, s + 1024)
            P[s:e, :s] = P[:s, s:e].T
            blk = P[s:e, s:e]
            lo = np.tril_indices(e - s, -1)
            blk[lo] = blk.T[lo]
        d = P.diagonal().copy()
        P /= -d[None, :]  # B = -P diag(1/diag(P)) off the diagonal, 0 on it
        P[np.diag_indices(N)] = 0.0
        self.B_ = P

    def _score(self, users):
        return np.asarray(self.X_[users] @ self.B_)

    def _score_items(self, users, items):
        Xu = self.X_[users]
        out = np.empty(items.shape)
        for b in range(users.size):
            hist = Xu.indices[Xu.indptr[b]:Xu.indptr[b + 1]]
            out[b] = self.B_[np.ix_(hist, items[b])].sum(axis=0)
        return out


def _fit_implicit(make, X, rng):
    """Fit an ``implicit`` CPU model built by ``make(seed)`` on the user-item matrix ``X`` with one
    BLAS thread and its notices silenced (implicit's BLAS-threads notice, tqdm's notebook notice);
    returns the user and item factors as float64 arrays."""
    import warnings

    from threadpoolctl import threadpool_limits

    seed = int(as_rng(rng).integers(2**31 - 1))
    with threadpool_limits(1, "blas"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = make(seed)
        model.fit(X.astype(np.float32), show_progress=False)
    return (np.asarray(model.user_factors, dtype=np.float64), np.asarray(model.item_factors, dtype=np.float64))


class ALS(Recommender):
    r"""Implicit-feedback matrix factorisation by alternating least squares (Hu et al. 2008), fit
    with the ``implicit`` package (CPU, Cholesky solves).

    Parameters follow Krichene & Rendle 2020, Sec. 9 (after Bayer et al. 2017):

    .. math::
        \begin{aligned}
        &\min_V \sum_{(u,i)\in H} (\hat y_{ui} - 1)^2 + \alpha \sum_{u,i} \hat y_{ui}^2
        + \lambda \lVert V \rVert_F^2,\\
        &\hat y_{ui} = v_u^\top v_i .
        \end{aligned}

    Dividing by :math:`\alpha` and completing the square, the observed terms are
    :math:`(1 + 1/\alpha)(\hat y - p)^2` + const with :math:`p = 1/(1+\alpha)`, the others
    :math:`\hat y^2`. Rescaling :math:`V \to \sqrt{p}\,V` (which rescales every score by :math:`p`
    and so leaves every ranking unchanged) gives Hu et al.'s loss with target 1, confidence
    :math:`c = 1 + 1/\alpha` on observed pairs (1 elsewhere) and regularisation
    :math:`\lambda_{\mathrm{Hu}} = \lambda (1+\alpha)/\alpha`. ``implicit`` uses the stored value as
    the confidence :math:`c`, so we pass ``alpha_implicit = 1 + 1/alpha`` and
    ``regularization = lam * (1 + alpha) / alpha``. Krichene & Rendle's recommender X is
    ``ALS(factors=16, lam=10, alpha=0.2)``, i.e. :math:`c = 6`, :math:`\lambda_{\mathrm{Hu}} = 60`.

    ``num_threads`` (default 2) limits implicit's OpenMP threads; BLAS is held to one thread while
    fitting, as implicit recommends. ``rng`` seeds the factor initialisation. ``use_cg=True``
    (default) uses implicit's conjugate-gradient solver (3 CG steps per update, float32), about 5x
    faster than exact Cholesky solves (``use_cg=False``, float64) at d = 64.
    """

    name = "als"

    def __init__(self, factors: int = 16, lam: float = 10.0, alpha: float = 0.2, iterations: int = 15,
                 rng=None, num_threads: int = 2, use_cg: bool = True):
        self.factors = check_int(factors, "factors", low=1)
        self.lam = check_real(lam, "lam", low=0.0, low_open=True)
        self.alpha = check_real(alpha, "alpha", low=0.0, low_open=True)
        self.iterations = check_int(iterations, "iterations", low=1)
        self.rng = rng
        self.num_threads = check_int(num_threads, "num_threads", low=0)
        self.use_cg = check_bool(use_cg, "use_cg")

    def _params(self):
        return {"factors": self.factors, "lam": self.lam, "alpha": self.alpha, "iterations": self.iterations}

    @property
    def confidence(self) -> float:
        """Hu et al.'s confidence on observed pairs, :math:`1 + 1/\\alpha`."""
        return 1.0 + 1.0 / self.alpha

    @property
    def hu_regularization(self) -> float:
        """Hu et al.'s :math:`\\lambda`, :math:`\\lambda (1+\\alpha)/\\alpha`."""
        return self.lam * (1.0 + self.alpha) / self.alpha

    def _fit_bytes(self, n_users, n_items):
        # implicit's factors (float32 with CG, float64 with Cholesky) and our float64 copies, and the
        # d x d Gram matrix Y^T Y with a temporary per thread
        itemsize = 4 if self.use_cg else 8
        d = float(self.factors)
        return (itemsize + 8) * (n_users + n_items) * d + itemsize * d * d * (2 + max(1, self.num_threads))

    def _fit(self, X):
        def make(seed):
            from implicit.cpu.als import AlternatingLeastSquares

            return AlternatingLeastSquares(
                factors=self.factors, regularization=self.hu_regularization, alpha=self.confidence,
                iterations=self.iterations, dtype=np.float32 if self.use_cg else np.float64, use_cg=self.use_cg,
                num_threads=self.num_threads, random_state=seed)

        self.user_factors_, self.item_factors_ = _fit_implicit(make, X, self.rng)

    def _score(self, users):
        return self.user_factors_[users] @ self.item_factors_.T

    def _score_items(self, users, items):
        return np.einsum("bf,bkf->bk", self.user_factors_[users], self.item_factors_[items])


class BPR(Recommender):
    r"""Bayesian personalised ranking (Rendle et al. 2009): matrix factorisation
    :math:`\hat y_{ui} = v_u^\top v_i + b_i` fit by stochastic gradient ascent on
    :math:`\sum_{(u, i, j)} \ln \sigma(\hat y_{ui} - \hat y_{uj}) - \lambda \lVert \Theta \rVert^2`
    over triples of a training item :math:`i` and a sampled non-training item :math:`j` of user
    :math:`u`; fit with the ``implicit`` package (CPU). ``factors`` excludes the item bias
    (``implicit`` stores it as an extra factor), ``lr`` is the learning rate, ``lam`` the
    regularisation :math:`\lambda`, ``rng`` seeds initialisation and the triple sampling,
    ``num_threads`` limits implicit's threads (with several threads the updates race, so a fit is
    reproducible only with ``num_threads=1``, the default)."""

    name = "bpr"

    def __init__(self, factors: int = 64, lr: float = 0.01, lam: float = 0.01, iterations: int = 100,
                 rng=None, num_threads: int = 1):
        self.factors = check_int(factors, "factors", low=1)
        for nm, v in (("lr", lr), ("lam", lam)):
            if not (np.isfinite(float(v)) and float(v) > 0):
                raise ValueError(f"{nm} must be a positive finite number, got {v}")
        self.lr, self.lam = float(lr), float(lam)
        self.iterations = check_int(iterations, "iterations", low=1)
        self.rng = rng
        self.num_threads = check_int(num_threads, "num_threads", low=0)

    def _params(self):
        return {"factors": self.factors, "lr": self.lr, "lam": self.lam, "iterations": self.iterations}

    def _fit_bytes(self, n_users, n_items):
        # implicit's float32 factors with the item bias column, and our float64 copies
        return 12.0 * (n_users + n_items) * (self.factors + 1)

    def _fit(self, X):
        def make(seed):
            from implicit.cpu.bpr import BayesianPersonalizedRanking

            return BayesianPersonalizedRanking(
                factors=self.factors, learning_rate=self.lr, regularization=self.lam,
                iterations=self.iterations, num_threads=self.num_threads, random_state=seed)

        self.user_factors_, self.item_factors_ = _fit_implicit(make, X, self.rng)

    def _score(self, users):
        return self.user_factors_[users] @ self.item_factors_.T

    def _score_items(self, users, items):
        return np.einsum("bf,bkf->bk", self.user_factors_[users], self.item_factors_[items])


class Oracle(Recommender):
    """Perfect knowledge of the simulator's complete true preferences (Ihemelandu & Ekstrand 2023,
    Sec. IV-A): score 1 for every true preference of the user, 0 otherwise (ties are broken at
    random by the ranking). ``truth`` is a DataFrame with ``user, item`` columns, e.g.
    :func:`itemsampling.data.load_truth`."""

    name = "oracle"

    def __init__(self, truth: pd.DataFrame):
        if not isinstance(truth, pd.DataFrame) or not {"user", "item"} <= set(truth.columns):
            raise ValueError("truth must be a DataFrame with columns user, item")
        self.truth = truth

    def _fit(self, X):
        n_users = max(self.n_users_, n_users_of(self.truth))
        n_items = n_items_of(self.truth)
        if n_items > self.n_items_:
            raise ValueError(f"truth has item ids up to {n_items - 1}, beyond the catalog 0..{self.n_items_ - 1}")
        self.n_users_ = n_users
        self.T_ = interaction_matrix(self.truth, n_users, self.n_items_)

    def _score(self, users):
        return self.T_[users].toarray()
