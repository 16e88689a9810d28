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

from ._validation import as_rng, check_bool, check_int, check_memory, check_real, memory_limit
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
        item_bytes = self.item_matrix_bytes(self.n_items_)
        if item_bytes:
            N = self.n_items_
            check_memory(item_bytes, f"{type(self).__name__} on {N} items ({self.item_matrix_text()})",
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

    def dense_item_matrices(self) -> int:
        """How many dense :math:`N\\times N` float64 item-item matrices this model's fit holds at once
        (0: none)."""
        return self._dense_item_matrices

    def dense_item_bytes(self, n_items: int) -> float:
        """Bytes of the dense :math:`N\\times N` item-item matrices a fit on ``n_items`` items
        allocates: 8 bytes a cell times :meth:`dense_item_matrices` (0 for a model without one)."""
        return self.dense_item_matrices() * 8.0 * n_items * n_items

    def item_matrix_bytes(self, n_items: int) -> float:
        """Bytes of the item-item state a fit on ``n_items`` items allocates (dense matrices, or a
        sparse similarity and the block it is computed in; 0 for a model without one): what
        :meth:`fit` checks against the memory budget
        (:func:`~itemsampling._validation.memory_limit`) before fitting."""
        return self.dense_item_bytes(n_items)

    def item_matrix_text(self) -> str:
        """What :meth:`item_matrix_bytes` counts, in words."""
        return f"{self.dense_item_matrices()} dense N x N matrices"

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

    Krichene & Rendle's recommender Y is ``ItemKNN(q=3)``; Z is ``ItemKNN(q=1, k_prime=10)``.

    ``method``: ``"dense"`` computes :math:`s` as four dense :math:`N\times N` float64 matrices
    (:math:`32 N^2` bytes); ``"sparse"`` computes it in blocks of rows (:meth:`block_rows`, at most
    :data:`BLOCK_BYTES` at once) and keeps only the entries Eq. 28 can keep, the :math:`k` and
    :math:`k'` largest of each row, so its memory is :math:`O(N (k + k'))` (the time stays
    :math:`O(N^2)`: every pair is scored once); :math:`i \in N_k(j)` is read off row :math:`j` of
    :math:`s^\top`, computed in the same block from the same (symmetric) counts.
    ``"auto"`` (default) is ``"sparse"`` when ``k`` or ``k_prime`` is set and ``"dense"`` without
    a neighbourhood (every :math:`s_{ij}` is kept, so the similarity is dense by definition).
    Both paths give the same :math:`s''` and scores bit for bit (each value by the same
    floating-point operations in the same order; the row sums of Eq. 29-30 over dense rows), so
    ties that rounding makes or breaks (an item whose whole neighbourhood the user has consumed
    scores 1 up to rounding) fall the same way and the ranks do not depend on the path.
    """

    _dense_item_matrices = 4

    name = "itemknn"
    #: The most bytes the sparse path spends on one block of rows (less under a small memory budget:
    #: at most a quarter of :func:`~itemsampling._validation.memory_limit`).
    BLOCK_BYTES = 128 * 2**20
    #: Bytes per cell of a block of rows of the sparse path: the co-occurrence counts (sparse product
    #: and dense copy), a copy for the second cut, :math:`s` and the top-k selection's temporaries
    #: (measured peak about 41 with both cuts, tracemalloc, N = 3,000).
    _BLOCK_CELL_BYTES = 64
    #: Bytes per kept entry of the sparse path: its triplets, the CSR matrix, its transpose and product.
    _KEPT_BYTES = 48

    def __init__(self, q: float = 1.0, k: int | None = None, k_prime: int | None = None, method: str = "auto"):
        self.q = check_real(q, "q", low=0.0, low_open=True)
        self.k = None if k is None else check_int(k, "k", low=1)
        self.k_prime = None if k_prime is None else check_int(k_prime, "k_prime", low=1)
        if not isinstance(method, str) or method not in ("auto", "dense", "sparse"):
            raise ValueError(f"method must be one of ['auto', 'dense', 'sparse'], got {method!r}")
        if method == "sparse" and self.k is None and self.k_prime is None:
            raise ValueError("method 'sparse' needs a neighbourhood (k or k_prime): without one every similarity "
                             "is kept and the matrix is dense")
        self.method = method

    def _params(self):
        return {"q": self.q, "k": self.k, "k_prime": self.k_prime}

    @property
    def sparse(self) -> bool:
        """Whether the fit takes the sparse, blocked path (see ``method``)."""
        return self.method == "sparse" or (self.method == "auto" and (self.k is not None or self.k_prime is not None))

    def dense_item_matrices(self) -> int:
        return 0 if self.sparse else self._dense_item_matrices

    def block_rows(self, n_items: int) -> int:
        """Rows of :math:`s` the sparse path computes at once on ``n_items`` items: as many as
        ``min(BLOCK_BYTES, memory_limit() / 4)`` holds at ``_BLOCK_CELL_BYTES`` a cell, at least 1."""
        per_row = self._BLOCK_CELL_BYTES * float(n_items)
        return int(max(1, min(n_items, min(self.BLOCK_BYTES, memory_limit() // 4) // per_row)))

    def item_matrix_bytes(self, n_items: int) -> float:
        if not self.sparse:
            return self.dense_item_bytes(n_items)
        N = float(n_items)
        kept = sum(min(c, n_items) for c in (self.k, self.k_prime) if c is not None)
        return self._BLOCK_CELL_BYTES * N * self.block_rows(n_items) + self._KEPT_BYTES * N * kept

    def item_matrix_text(self) -> str:
        if not self.sparse:
            return super().item_matrix_text()
        return "a sparse top-k similarity and one block of its rows"

    @staticmethod
    def _topk_mask(S: np.ndarray, k: int, axis: int, positive: bool = False) -> np.ndarray:
        """Boolean mask of the k largest entries of each row (axis=1) or column (axis=0); ties at
        the cut go to the lower item id. With ``positive`` (for :math:`S \\ge 0`), only the positive
        ones among them: a 0 at the cut is not an entry of :math:`s'`, so its row needs no tie rule.
        One partition per row; the running count of ties only in the rows where they cross the cut."""
        A = S if axis == 1 else S.T
        n = A.shape[1]
        if k >= n:
            return (S > 0) if positive else np.ones_like(S, dtype=bool)
        # the k-th largest value of each row, as minus the k-th smallest of -A (numpy's partition is
        # several times slower on rows with many equal values, such as the zeros of s, at the top)
        neg = np.negative(A, order="C")
        neg.partition(k - 1, axis=1)
        kth = -neg[:, k - 1:k]
        del neg
        above = A > kth
        tied = A == kth
        if positive:
            tied &= kth > 0
        room = k - above.sum(axis=1)
        over = np.flatnonzero(tied.sum(axis=1) > room)
        t = tied[over]
        cut = above[over] | (t & (np.cumsum(t, axis=1) <= room[over, None]))
        mask = np.logical_or(above, tied, out=above)
        mask[over] = cut
        if positive and np.any(kth < 0):
            mask &= A > 0
        return mask if axis == 1 else mask.T

    def _similarity(self, co: np.ndarray, cnt: np.ndarray, norm: np.ndarray, start: int,
                    transpose: bool = False) -> np.ndarray:
        """Eq. 27 for rows ``start .. start + len(co) - 1`` of the co-occurrence counts ``co``
        (float64, overwritten): :math:`s_{ij} = ((c_{ij}/\\sqrt{|U_i|})/\\sqrt{|U_j|})^q` (``norm``:
        :math:`\\sqrt{|U_i|}`), 0 on the diagonal and for items without a training user. With
        ``transpose`` the rows are those of :math:`s^\\top` (row :math:`j` holds :math:`s_{ij}` over
        :math:`i`: the counts are symmetric, the two divisions are taken in :math:`s_{ij}`'s order), so
        every value is the one the dense path computes for the same pair, bit for bit."""
        b = co.shape[0]
        rows, cols = norm[start:start + b, None], norm[None, :]
        for d in ((cols, rows) if transpose else (rows, cols)):
            co /= d
        co[cnt[start:start + b] == 0, :] = 0.0
        co[:, cnt == 0] = 0.0
        co[np.arange(b), np.arange(start, start + b)] = 0.0
        np.clip(co, 0.0, 1.0, out=co)
        if self.q != 1.0:
            co **= self.q
        return co

    def _fit(self, X):
        cnt = np.asarray(X.sum(axis=0), dtype=np.float64).ravel()  # |U_i|, the diagonal of X^T X
        norm = np.sqrt(np.maximum(cnt, 1e-300))
        if self.sparse:
            S2, denom = self._fit_sparse(X, cnt, norm)
            self._S_T = S2.T.tocsr()
        else:
            S = self._fit_dense(X, cnt, norm)
            row_norm = np.sqrt((S * S).sum(axis=1))
            S2 = np.divide(S, row_norm[:, None], out=np.zeros_like(S), where=row_norm[:, None] > 0)  # Eq. 29
            denom = S2.sum(axis=1)
            # with neighbourhood cuts the matrix is sparse: score with a sparse product
            nnz = np.count_nonzero(S2)
            self._S_T = sp.csr_matrix(S2.T) if nnz < 0.05 * S2.size else None
        self.similarity_ = S2
        self._denom = np.where(denom > 0, denom, 1.0)

    def _fit_dense(self, X, cnt, norm):
        S = self._similarity(gram(X), cnt, norm, 0)  # gram: |U_i ∩ U_j|
        # Eq. 28: s'_{ij} keeps j if i in N_k(j) (column neighbourhood of j) and j in N_k'(i)
        # Both masks are computed from the same (unmasked) s, as Eq. 28 writes them.
        keep = None
        if self.k is not None:
            keep = self._topk_mask(S, self.k, axis=0, positive=True)
        if self.k_prime is not None:
            row_keep = self._topk_mask(S, self.k_prime, axis=1, positive=True)
            keep = row_keep if keep is None else keep & row_keep
        if keep is not None:
            S = np.where(keep, S, 0.0)
        return S

    def _fit_sparse(self, X, cnt, norm):
        """The sparse path: for each block of rows, the rows of :math:`s^\\top` for the column cut
        :math:`i \\in N_k(j)` (row :math:`j` of :math:`s^\\top` is column :math:`j` of :math:`s`) and
        those of :math:`s` for the row cut :math:`j \\in N_{k'}(i)` (:meth:`_similarity`), and the
        positive entries among the ``k`` (``k_prime``) largest of each row (:meth:`_topk_mask`, the
        dense path's own selection); then Eq. 28's :math:`s'` as a CSR matrix and, a block of its rows
        at a time written out densely, Eq. 29's row norms and Eq. 30's denominators summed over the
        dense rows as the dense path sums them. Returns :math:`s''` (CSR) and the denominators: both
        equal to the dense path's bit for bit."""
        N = self.n_items_
        XT = X.T.tocsr()  # items x users
        kept = {side: ([], [], []) for side, c in (("cols", self.k), ("rows", self.k_prime)) if c is not None}
        B = self.block_rows(N)
        for s in range(0, N, B):
            e = min(N, s + B)
            co = (XT[s:e] @ X).toarray().astype(np.float64, copy=False)
            for side, c, transpose in (("cols", self.k, True), ("rows", self.k_prime, False)):
                if c is None:
                    continue
                last = side == "rows" or self.k_prime is None
                S = self._similarity(co if last else co.copy(), cnt, norm, s, transpose)
                r, j = np.nonzero(self._topk_mask(S, c, axis=1, positive=True))
                kept[side][0].append(r + s)
                kept[side][1].append(j)
                kept[side][2].append(S[r, j])
                del S
            del co

        def top(side):  # row r holds the kept entries of row r of s (rows) or of s^T (cols)
            r, j, v = (np.concatenate(a) for a in kept.pop(side))
            return sp.csr_matrix((v, (r, j)), shape=(N, N))

        cols = top("cols").T.tocsr() if "cols" in kept else None  # s_ij for i in N_k(j)
        rows = top("rows") if "rows" in kept else None  # s_ij for j in N_k'(i)
        Sp = rows if cols is None else cols if rows is None else cols.multiply(rows > 0).tocsr()
        Sp.sort_indices()
        row_norm, denom = np.zeros(N), np.zeros(N)
        for s in range(0, N, B):
            D = Sp[s:s + B].toarray()
            rn = np.sqrt((D * D).sum(axis=1))
            denom[s:s + B] = np.divide(D, rn[:, None], out=np.zeros_like(D), where=rn[:, None] > 0).sum(axis=1)
            row_norm[s:s + B] = rn
            del D
        rn = np.repeat(row_norm, np.diff(Sp.indptr))
        S2 = sp.csr_matrix((np.divide(Sp.data, rn, out=np.zeros_like(Sp.data), where=rn > 0), Sp.indices, Sp.indptr),
                           shape=(N, N))  # Eq. 29
        return S2, denom

    def _score(self, users):
        if self._S_T is not None:
            num = (self.X_[users] @ self._S_T).toarray()
        else:
            num = self.X_[users] @ self.similarity_.T  # (b, N): sum_{j in H_u} s''_{ij}
        return np.asarray(num) / self._denom[None, :]

    def _score_items(self, users, items):
        Xu = self.X_[users]
        if sp.issparse(self.similarity_):
            num = (Xu @ self._S_T).tocsr()  # (b, N) sparse: sum_{j in H_u} s''_{ij}
            rows = np.repeat(np.arange(users.size), items.shape[1])
            vals = np.asarray(num[rows, items.ravel()]).reshape(items.shape)
            return vals / self._denom[items]
        out = np.empty(items.shape)
        for b in range(users.size):
            hist = Xu.indices[Xu.indptr[b]:Xu.indptr[b + 1]]
            out[b] = self.similarity_[np.ix_(items[b], hist)].sum(axis=1) / self._denom[items[b]]
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


class EASE(Recommender):
    r"""EASE (Steck 2019, Eq. 8): with the Gram matrix :math:`G = X^\top X` and
    :math:`P = (G + \lambda I)^{-1}`, the item-item weights are
    :math:`B = I - P\,\mathrm{diag}(1/\mathrm{diag}(P))` (so :math:`\mathrm{diag}(B) = 0`), and
    :math:`\hat y(u, \cdot) = x_u B`. ``lam`` is :math:`\lambda`.

    The fit holds one dense :math:`N\times N` float64 matrix (:math:`8 N^2` bytes): :math:`G` is
    written into it in blocks of columns (:meth:`gram_columns` at once), LAPACK's ``dpotrf`` and
    ``dpotri`` overwrite it with the Cholesky factor and then :math:`P`, and :math:`B` is formed in
    place. Above :data:`SINGLE_THREAD_ITEMS` items the factorisation and inverse run on one BLAS
    thread (``threadpoolctl``): OpenBLAS's multi-threaded ``dpotrf`` crashed on such matrices."""

    _dense_item_matrices = 1

    name = "ease"
    #: Above this many items the Cholesky factorisation and inverse run on one BLAS thread: scipy's OpenBLAS
    #: (0.3.30) segfaulted in its two-thread ``dpotrf`` at N = 23,100, 23,300 and 24,915 (random Gram
    #: matrices, every try) and ran at N = 14,284-20,000 (random ones; yelp-mcrec's and CiteULike-a's own,
    #: 14,284 and 16,980 items, in 47 and 75 s; yelp-mcrec's took 84 s on one thread). Was 12,000.
    SINGLE_THREAD_ITEMS = 20_000
    #: The most bytes one block of columns of the Gram matrix takes (sparse product and dense copy).
    BLOCK_BYTES = 64 * 2**20
    _BLOCK_CELL_BYTES = 24

    def __init__(self, lam: float = 500.0):
        self.lam = check_real(lam, "lam", low=0.0, low_open=True)

    def _params(self):
        return {"lam": self.lam}

    def gram_columns(self, n_items: int) -> int:
        """Columns of :math:`G` computed at once on ``n_items`` items: those ``BLOCK_BYTES`` holds at
        24 bytes a cell, at most a sixteenth of the catalogue (so the block adds at most 3/16 of the
        matrix), at least 1."""
        return int(max(1, min(-(-n_items // 16), self.BLOCK_BYTES // (self._BLOCK_CELL_BYTES * n_items))))

    def item_matrix_bytes(self, n_items: int) -> float:
        return self.dense_item_bytes(n_items) + self._BLOCK_CELL_BYTES * float(n_items) * self.gram_columns(n_items)

    def item_matrix_text(self) -> str:
        return "one dense N x N matrix and a block of its columns"

    def _fit(self, X):
        from contextlib import nullcontext

        from scipy.linalg.lapack import dpotrf, dpotri

        N = self.n_items_
        A = np.empty((N, N), order="F")  # column-major, as LAPACK overwrites it in place
        Xc = X.tocsc()
        XT = Xc.T.tocsr()
        step = self.gram_columns(N)
        for s in range(0, N, step):
            A[:, s:s + step] = (XT @ Xc[:, s:s + step]).toarray()
        A[np.diag_indices(N)] += self.lam
        if N > self.SINGLE_THREAD_ITEMS:
            from threadpoolctl import threadpool_limits

            limit = threadpool_limits(1, "blas")
        else:
            limit = nullcontext()
        with limit:
            c, info = dpotrf(A, lower=0, clean=0, overwrite_a=1)
            if info != 0:  # pragma: no cover - G + lam I is positive definite for lam > 0
                raise ValueError(f"EASE: the Cholesky factorisation of G + lam I failed (LAPACK info {info})")
            P, info = dpotri(c, lower=0, overwrite_c=1)
        if info != 0:  # pragma: no cover
            raise ValueError(f"EASE: inverting G + lam I failed (LAPACK info {info})")
        # dpotri leaves P in the upper triangle: mirror it into the lower one, a block of columns at a time
        for s in range(0, N, step):
            e = min(N, s + step)
            D = P[s:e, s:e]
            P[s:e, s:e] = np.triu(D) + np.triu(D, 1).T
            P[e:, s:e] = P[s:e, e:].T
        # P is symmetric now, so its transpose is the same matrix in row-major order: B in C order, whose rows
        # the sparse scoring product X_u B reads (a column-major B is copied whole for every batch of users:
        # 2.1 s a batch against 0.2-0.4 s at N = 14,284)
        P = P.T
        d = np.diag(P).copy()
        P /= -d[None, :]  # B = I - P diag(1/diag P), off the diagonal -P_ij / P_jj
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
