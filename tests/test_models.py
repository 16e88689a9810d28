"""Tests of itemsampling.models against hand computations and direct solves."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from itemsampling import models as M


def _df(pairs, n_users=None, n_items=None):
    df = pd.DataFrame(pairs, columns=["user", "item"]).astype("int64")
    if n_users is not None:
        df.attrs["n_users"] = n_users
    if n_items is not None:
        df.attrs["n_items"] = n_items
    return df


# a tiny dataset: 4 users, 4 items
#   user 0: items 0, 1        user 1: items 0, 1, 2
#   user 2: items 1, 2        user 3: items 2, 3
TINY = _df([(0, 0), (0, 1), (1, 0), (1, 1), (1, 2), (2, 1), (2, 2), (3, 2), (3, 3)])
X_TINY = np.array([[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 0], [0, 0, 1, 1]], dtype=float)


def test_interaction_matrix_and_gram():
    X = M.interaction_matrix(pd.concat([TINY, TINY.iloc[:1]]), 4, 4)  # a duplicate counts once
    assert np.array_equal(X.toarray(), X_TINY)
    assert np.array_equal(M.gram(X), X_TINY.T @ X_TINY)


def test_popular():
    m = M.Popular().fit(TINY)
    assert np.array_equal(m.score([0, 3]), np.array([[2, 3, 3, 1]] * 2, dtype=float))
    assert np.array_equal(m.score_items([1], np.array([[3, 0]])), [[1, 2]])


def test_itemknn_hand_computation():
    # co-occurrence: |U_0|=2, |U_1|=3, |U_2|=3, |U_3|=1; |U_0∩U_1|=2, |U_0∩U_2|=1, |U_1∩U_2|=2,
    # |U_2∩U_3|=1, others 0. Cosine s_ij = co / sqrt(c_i c_j), diagonal 0.
    s01, s02, s12, s23 = 2 / np.sqrt(6), 1 / np.sqrt(6), 2 / 3, 1 / np.sqrt(3)
    S = np.array([[0, s01, s02, 0], [s01, 0, s12, 0], [s02, s12, 0, s23], [0, 0, s23, 0]])
    for q in (1.0, 3.0):
        Sq = S**q
        m = M.ItemKNN(q=q).fit(TINY)
        # Eq. 30: y(u, i) = sum_{j in H_u} s''_ij / sum_j s''_ij; the row normalisation cancels
        expect = (X_TINY @ Sq.T) / Sq.sum(axis=1)[None, :]
        assert np.allclose(m.score(np.arange(4)), expect)
        # user 3 (items 2, 3), item 0: (s02^q) / (s01^q + s02^q)
        assert m.score([3])[0, 0] == pytest.approx(s02**q / (s01**q + s02**q))
        # Eq. 29: rows of s'' have unit L2 norm
        assert np.allclose(np.linalg.norm(m.similarity_, axis=1), 1.0)
        assert np.allclose(m.score_items([3, 0], np.array([[0, 1], [3, 2]])),
                           expect[[3, 0]][np.arange(2)[:, None], [[0, 1], [3, 2]]])


def _similarity(m):
    """ItemKNN's s'' as a dense array (the sparse path keeps a CSR matrix)."""
    return m.similarity_.toarray() if sp.issparse(m.similarity_) else m.similarity_


@pytest.mark.parametrize("method", ["dense", "sparse"])
def test_itemknn_neighbourhoods(method):
    # k' = 1: each row i keeps only its most similar item j (Eq. 28, delta(j in N_k'(i)))
    m = M.ItemKNN(q=1.0, k_prime=1, method=method).fit(TINY)
    assert m.sparse == (method == "sparse") and sp.issparse(m.similarity_) == m.sparse
    s01, s12, s23 = 2 / np.sqrt(6), 2 / 3, 1 / np.sqrt(3)
    kept = _similarity(m) > 0
    assert kept.sum(axis=1).tolist() == [1, 1, 1, 1]
    assert np.argmax(_similarity(m), axis=1).tolist() == [1, 0, 1, 2]  # s01 > s12 for item 1
    assert s01 > s12 > s23
    # with one neighbour, y(u, i) = 1 if the neighbour is in H_u else 0
    # neighbours: 0->1, 1->0, 2->1, 3->2; H_0={0,1}, H_1={0,1,2}, H_2={1,2}, H_3={2,3}
    expect = np.array([[1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 1, 1], [0, 0, 0, 1]], dtype=float)
    assert np.array_equal(m.score(np.arange(4)), expect)
    # k = 1 (column neighbourhoods): s'_ij kept iff i is j's nearest item; ties to the lower id
    mk = M.ItemKNN(q=1.0, k=1, method=method).fit(TINY)
    assert (_similarity(mk) > 0).sum(axis=0).tolist() == [1, 1, 1, 1]


@pytest.mark.parametrize("method", ["dense", "sparse"])
def test_itemknn_both_cuts_use_the_original_similarities(method):
    # Eq. 28: s'_ij = s_ij delta(i in N_k(j)) delta(j in N_k'(i)), both neighbourhoods taken on s.
    # On TINY (q = 1): s01 = .816 > s12 = .667 > s23 = .577 > s02 = .408, s03 = s13 = 0.
    #   k = 1 (column j keeps its nearest i):  (1,0), (0,1), (1,2), (2,3)
    #   k' = 1 (row i keeps its nearest j):    (0,1), (1,0), (2,1), (3,2)
    # Both: only (0,1) and (1,0). (Taking the row cut on the already column-cut matrix would also
    # keep (2,3), the only entry left in row 2.)
    m = M.ItemKNN(q=1.0, k=1, k_prime=1, method=method).fit(TINY)
    kept = np.argwhere(_similarity(m) > 0).tolist()
    assert kept == [[0, 1], [1, 0]]
    # y(u, 0) = [1 in H_u], y(u, 1) = [0 in H_u]; items 2 and 3 have empty rows and score 0
    expect = np.array([[1, 1, 0, 0], [1, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]], dtype=float)
    assert np.array_equal(m.score(np.arange(4)), expect)
    assert np.array_equal(m.score_items([2], np.array([[0, 1, 3]])), [[1, 0, 0]])


def test_ease_matches_direct_solve():
    rng = np.random.default_rng(0)
    X = (rng.random((30, 8)) < 0.35).astype(float)
    X[0, :] = 1  # every item used
    u, i = np.nonzero(X)
    df = _df(list(zip(u, i)))
    lam = 3.0
    m = M.EASE(lam=lam).fit(df)
    # Steck 2019: minimise ||X - XB||^2 + lam ||B||^2 subject to diag(B) = 0, column by column:
    # for column j, B_{-j, j} = (X_{-j}^T X_{-j} + lam I)^{-1} X_{-j}^T X_j
    n = X.shape[1]
    B = np.zeros((n, n))
    for j in range(n):
        o = np.delete(np.arange(n), j)
        A = X[:, o].T @ X[:, o] + lam * np.eye(n - 1)
        B[o, j] = np.linalg.solve(A, X[:, o].T @ X[:, j])
    assert np.allclose(m.B_, B, atol=1e-10)
    assert np.allclose(m.score(np.arange(30)), X @ B)
    assert np.allclose(m.score_items([2], np.array([[5, 1]])), (X @ B)[2, [5, 1]])


def _zipf_log(n_users=300, n_items=400, seed=0):
    """Users with 1-29 items drawn with Zipf-like popularity: many equal co-occurrence counts, so many tied
    similarities, several items without a training user (the catalogue is passed as n_items)."""
    g = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, n_items + 1) ** 0.8
    p /= p.sum()
    rows = [(u, int(i)) for u in range(n_users) for i in g.choice(n_items, size=int(g.integers(1, 30)),
                                                                   replace=False, p=p)]
    return _df(rows), n_items


def _topk_mask_before(S, k, axis):
    """ItemKNN's top-k mask as the package computed it before (one partition, a running count of ties in
    every row): the k largest entries of each row (axis=1) or column (axis=0), ties to the lower id."""
    A = S if axis == 1 else S.T
    n = A.shape[1]
    if k >= n:
        return np.ones_like(S, dtype=bool)
    kth = -np.partition(-A, k - 1, axis=1)[:, k - 1:k]
    above = A > kth
    tied = A == kth
    room = k - above.sum(axis=1, keepdims=True)
    mask = above | (tied & (np.cumsum(tied, axis=1) <= room))
    return mask if axis == 1 else mask.T


@pytest.mark.parametrize("k", [1, 3, 10, 39, 40, 60])
def test_topk_mask_equals_the_previous_one(k):
    """The mask (ties at the cut in many rows, rows of zeros) equals the previous implementation's; with positive,
    its positive entries."""
    g = np.random.default_rng(k)
    S = g.integers(0, 4, size=(30, 40)).astype(float) / 3  # many ties at every cut
    S[:5] = 0.0
    S[5:8, 10:] = 0.0  # rows with fewer than k positive entries
    for axis in (0, 1):
        before = _topk_mask_before(S, k, axis)
        assert np.array_equal(M.ItemKNN._topk_mask(S, k, axis), before)
        assert np.array_equal(M.ItemKNN._topk_mask(S, k, axis, positive=True), before & (S > 0))
        assert (before.sum(axis=axis) == min(k, S.shape[axis])).all()


def _itemknn_before(X, q, k, k_prime):
    """ItemKNN's fit as the package computed it before the sparse path (version 0.x, one dense N x N
    computation): s'' (Eq. 27-29) and the denominators of Eq. 30, operation for operation."""
    co = M.gram(X)
    cnt = np.diag(co).copy()
    norm = np.sqrt(np.maximum(cnt, 1e-300))
    S = co / norm[:, None] / norm[None, :]
    S[cnt == 0, :] = 0.0
    S[:, cnt == 0] = 0.0
    np.fill_diagonal(S, 0.0)
    np.clip(S, 0.0, 1.0, out=S)
    if q != 1.0:
        S **= q
    keep = None
    if k is not None:
        keep = _topk_mask_before(S, k, axis=0)
    if k_prime is not None:
        row_keep = _topk_mask_before(S, k_prime, axis=1)
        keep = row_keep if keep is None else keep & row_keep
    if keep is not None:
        S = np.where(keep, S, 0.0)
    row_norm = np.sqrt((S * S).sum(axis=1))
    S2 = np.divide(S, row_norm[:, None], out=np.zeros_like(S), where=row_norm[:, None] > 0)
    denom = S2.sum(axis=1)
    return S2, np.where(denom > 0, denom, 1.0)


@pytest.mark.parametrize("q, k, k_prime", [(1.0, 5, None), (3.0, None, 10), (1.0, 10, 10), (2.5, 7, 3),
                                           (1.0, 3, 20), (1.0, 1000, None), (1.0, 1, 1), (0.5, 50, 2),
                                           (3.0, None, None)])
@pytest.mark.parametrize("block_bytes", [None, 1, 7 * 64 * 400])
def test_sparse_itemknn_equals_the_dense_one(monkeypatch, q, k, k_prime, block_bytes):
    """The sparse, blocked path keeps the dense path's entries of Eq. 28 (ties at the cut to the lower id) with
    the same values, and gives the same scores, bit for bit, in one block, in blocks of 1 row and of 7 rows; both
    paths are bit for bit the fit before the sparse path existed (:func:`_itemknn_before`), so a model that now
    takes the sparse path ranks every item as before (no tie is broken differently)."""
    df, N = _zipf_log()
    dense = M.ItemKNN(q=q, k=k, k_prime=k_prime, method="dense").fit(df, n_items=N)
    S_before, denom_before = _itemknn_before(M.interaction_matrix(df, 300, N), q, k, k_prime)
    assert np.array_equal(dense.similarity_, S_before) and np.array_equal(dense._denom, denom_before)
    users = np.arange(300)
    if k is None and k_prime is None:
        assert not dense.sparse
        return
    if block_bytes is not None:
        monkeypatch.setattr(M.ItemKNN, "BLOCK_BYTES", block_bytes)
    sparse = M.ItemKNN(q=q, k=k, k_prime=k_prime).fit(df, n_items=N)
    assert sparse.sparse and not dense.sparse
    assert sparse.block_rows(N) == {None: N, 1: 1, 7 * 64 * 400: 7}[block_bytes]
    S = dense.similarity_
    # ties: the cut falls inside a run of equal similarities in some rows, so the tie rule decides
    ties = any(np.sum(row == np.sort(row)[-c]) > 1 for row in S[:50] for c in (k, k_prime) if c and c < N)
    assert ties or (k or 0) >= N
    assert np.array_equal(np.argwhere(S > 0), np.argwhere(sparse.similarity_.toarray() > 0))
    assert np.array_equal(sparse.similarity_.toarray(), S)
    assert np.array_equal(sparse._denom, dense._denom)
    assert np.array_equal(sparse.score(users), dense.score(users))
    # score_items of the dense path sums each user's items in another order (np.sum over the history)
    items = np.random.default_rng(1).integers(0, N, size=(300, 17))
    assert np.abs(sparse.score_items(users, items) - dense.score_items(users, items)).max() <= 1e-12
    assert np.array_equal(sparse.score_items(users, items), np.take_along_axis(sparse.score(users), items, axis=1))
    assert dense.score(users).max() > 0


def test_itemknn_paths_and_their_memory():
    """auto is sparse with a neighbourhood and dense without; the sparse path's memory is one block of rows and
    48 bytes per kept entry (k + k' per row), the dense one four N x N float64 matrices."""
    assert M.ItemKNN(k=50).sparse and M.ItemKNN(k_prime=10).sparse and not M.ItemKNN().sparse
    assert not M.ItemKNN(k=50, method="dense").sparse
    assert M.ItemKNN().item_matrix_bytes(1000) == 32e6 == M.ItemKNN(k=5, method="dense").item_matrix_bytes(1000)
    m = M.ItemKNN(k=50, k_prime=10)
    assert m.dense_item_bytes(1000) == 0 and m.block_rows(1000) == 1000  # 64 MB of block: all 1,000 rows
    assert m.item_matrix_bytes(1000) == 64 * 1000 * 1000 + 48 * 1000 * 60
    assert M.ItemKNN(k=50).block_rows(10**6) == 2  # 128 MiB / (64 bytes x 10^6 items)
    with pytest.raises(ValueError, match="^method must be one of"):
        M.ItemKNN(method="fast")
    with pytest.raises(ValueError, match="^method 'sparse' needs a neighbourhood"):
        M.ItemKNN(method="sparse")


def test_sparse_itemknn_block_follows_a_small_budget(monkeypatch):
    """Under a small memory budget the block shrinks to a quarter of it, so the sparse fit runs where the dense one
    (32 x 400^2 bytes = 5.1 MB) is refused, with the same scores."""
    df, N = _zipf_log()
    ref = M.ItemKNN(k=5, method="dense").fit(df, n_items=N)
    monkeypatch.setenv("ITEMSAMPLING_MEMORY_LIMIT", str(4_000_000))
    m = M.ItemKNN(k=5)
    assert m.block_rows(400) == 1_000_000 // (64 * 400)
    assert m.item_matrix_bytes(400) == 64 * 400 * 39 + 48 * 400 * 5 <= 4_000_000
    assert np.array_equal(m.fit(df, n_items=N).score(np.arange(300)), ref.score(np.arange(300)))
    with pytest.raises(ValueError, match=r"^ItemKNN on 400 items \(4 dense N x N matrices\) needs 4\.9 MiB"):
        M.ItemKNN(k=5, method="dense").fit(df, n_items=N)


@pytest.mark.parametrize("single_thread", [False, True])
def test_ease_in_place_equals_the_cholesky_solve(monkeypatch, single_thread):
    """EASE's in-place fit (Gram matrix in blocks of columns, dpotrf/dpotri, the upper triangle mirrored) equals
    the closed form B = -P / diag(P) with P = (G + lam I)^-1 from scipy's Cholesky solve, to 1e-12, in one
    block and in blocks of 7 columns, on several BLAS threads and on one (above SINGLE_THREAD_ITEMS)."""
    from scipy.linalg import cho_factor, cho_solve

    assert M.EASE().item_matrix_bytes(1000) == 8e6 + 24 * 1000 * 63 and M.EASE().dense_item_bytes(1000) == 8e6
    df, N = _zipf_log()
    X = M.interaction_matrix(df, 300, N)
    G = (X.T @ X).toarray() + 50.0 * np.eye(N)
    P = cho_solve(cho_factor(G), np.eye(N))
    B = -P / np.diag(P)[None, :]
    np.fill_diagonal(B, 0.0)
    if single_thread:
        monkeypatch.setattr(M.EASE, "SINGLE_THREAD_ITEMS", 10)
    for block in (None, 7 * 24 * N):
        if block is not None:
            monkeypatch.setattr(M.EASE, "BLOCK_BYTES", block)
        m = M.EASE(lam=50.0)
        assert m.gram_columns(N) == (25 if block is None else 7)  # at most N / 16, else the block's bytes
        m.fit(df, n_items=N)
        assert np.abs(m.B_ - B).max() <= 1e-12 * np.abs(B).max() and np.abs(B).max() > 0.01
        # row-major, as the sparse scoring product X_u B reads it (a column-major B is copied whole per batch)
        assert m.B_.flags.c_contiguous
        np.testing.assert_array_equal(m.score(np.arange(5)), np.asarray(X[:5] @ np.ascontiguousarray(m.B_)))


def test_als_solves_the_krichene_rendle_objective():
    """With exact (Cholesky) solves, the item factors after the last half-step satisfy the
    normal equations of Hu et al.'s loss with c = 1 + 1/alpha and lambda_Hu = lam (1+alpha)/alpha,
    and so the stationarity condition of Krichene & Rendle's loss (Sec. 9) after rescaling."""
    rng = np.random.default_rng(1)
    X = (rng.random((40, 15)) < 0.3).astype(float)
    X[:, 0] = 1
    u, i = np.nonzero(X)
    m = M.ALS(factors=3, lam=2.0, alpha=0.5, iterations=5, rng=0, use_cg=False).fit(_df(list(zip(u, i))))
    assert m.confidence == pytest.approx(3.0) and m.hu_regularization == pytest.approx(6.0)
    W, H = m.user_factors_, m.item_factors_
    # K&R loss: sum_{H} (y - 1)^2 + alpha sum_all y^2 + lam (|W|^2 + |H|^2), y = W H^T, after
    # rescaling the factors by sqrt(p), p = 1/(1+alpha): gradient wrt H must vanish
    p = 1.0 / (1.0 + 0.5)
    Wk, Hk = W * np.sqrt(p), H * np.sqrt(p)
    Y = Wk @ Hk.T
    grad = 2 * ((Y - 1) * X).T @ Wk + 2 * 0.5 * Y.T @ Wk + 2 * 2.0 * Hk
    assert np.abs(grad).max() < 1e-6 * max(1.0, np.abs(Hk).max())
    # scores rank like the factor product
    assert np.allclose(m.score([0, 1]), W[[0, 1]] @ H.T)


def test_als_cg_close_to_exact():
    rng = np.random.default_rng(2)
    X = (rng.random((60, 20)) < 0.3).astype(float)
    u, i = np.nonzero(X)
    df = _df(list(zip(u, i)), 60, 20)
    a = M.ALS(factors=4, iterations=30, rng=0, use_cg=False).fit(df).score(np.arange(60))
    b = M.ALS(factors=4, iterations=30, rng=0, use_cg=True).fit(df).score(np.arange(60))
    # same objective: the predictions agree closely
    assert np.corrcoef(a.ravel(), b.ravel())[0, 1] > 0.99


def test_userknn_hand_computation():
    m = M.UserKNN(k=1).fit(TINY)
    # cosine between users: u0={0,1}, u1={0,1,2}, u2={1,2}, u3={2,3}
    # u0's nearest: u1 (2/sqrt(6)); u3's nearest: u1 and u2 tie at 1/sqrt(6) vs 1/2 -> u2 (1/2)
    sc = m.score([0, 3])
    assert np.allclose(sc[0], 2 / np.sqrt(6) * X_TINY[1])
    assert np.allclose(sc[1], 0.5 * X_TINY[2])
    m2 = M.UserKNN(k=3).fit(TINY)
    cos = (X_TINY @ X_TINY.T) / np.sqrt(X_TINY.sum(1)[:, None] * X_TINY.sum(1)[None, :])
    np.fill_diagonal(cos, 0)
    assert np.allclose(m2.score(np.arange(4)), cos @ X_TINY)
    assert np.allclose(m2.score_items([1, 2], np.array([[0, 3], [2, 2]])),
                       (cos @ X_TINY)[[1, 2]][np.arange(2)[:, None], [[0, 3], [2, 2]]])


def test_oracle_and_random():
    truth = _df([(0, 3), (0, 1), (1, 2)])
    m = M.Oracle(truth).fit(TINY)
    assert np.array_equal(m.score([0, 1]), [[0, 1, 0, 1], [0, 0, 1, 0]])
    r = M.Random(rng=0).fit(TINY)
    s = r.score(np.arange(4))
    assert s.shape == (4, 4) and np.all((0 <= s) & (s < 1))
    assert np.array_equal(M.Random(rng=5).fit(TINY).score([0]), M.Random(rng=5).fit(TINY).score([0]))


def test_catalog_size_from_attrs():
    m = M.Popular().fit(_df([(0, 0), (1, 1)], n_users=3, n_items=10))
    assert m.score([2]).shape == (1, 10)
    assert M.Popular().fit(TINY, n_items=7).score([0]).shape == (1, 7)


@pytest.mark.parametrize("model", [M.Popular(), M.ItemKNN(), M.UserKNN(), M.EASE(), M.ALS(), M.Random(0)])
def test_score_before_fit(model):
    with pytest.raises(ValueError, match="not fitted"):
        model.score([0])


def test_bad_input():
    with pytest.raises(ValueError, match="q must be"):
        M.ItemKNN(q=0)
    with pytest.raises(ValueError, match="k_prime"):
        M.ItemKNN(k_prime=0)
    with pytest.raises(ValueError, match="lam"):
        M.EASE(lam=-1)
    with pytest.raises(ValueError, match="factors"):
        M.ALS(factors=0)
    with pytest.raises(ValueError, match="train must not be empty"):
        M.Popular().fit(TINY.iloc[:0])
    with pytest.raises(ValueError, match="integer ids"):
        M.Popular().fit(pd.DataFrame({"user": [0.5], "item": [1]}))
    m = M.Popular().fit(TINY)
    with pytest.raises(ValueError, match="users must lie in"):
        m.score([4])
    with pytest.raises(ValueError, match="items must lie in"):
        m.score_items([0], np.array([[4]]))
    with pytest.raises(ValueError, match="truth"):
        M.Oracle([(0, 1)])
