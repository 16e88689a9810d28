"""itemsampling.adapters against the libraries' own ranking calls, on tiny data fitted by the real
libraries: implicit's factor models (ALS, BPR, LMF) and item-item models (cosine, BM25) against
``model.recommend`` (full ranking with the training items filtered), Cornac's BPR and MF against
``model.rank`` (with id maps of string ids and an item Cornac never saw); the sampled designs' pair path
against the full path; bad models and unknown users refused."""

import numpy as np
import pytest
import scipy.sparse as sp

from itemsampling import adapters
from itemsampling.adapters import LibraryScorer, from_cornac, from_implicit
from itemsampling.evaluation import sampled_ranks

U, N = 40, 30


def _data(seed=0):
    """A users x items training matrix (about 6 items a user) and one held-out item per user outside it."""
    rng = np.random.default_rng(seed)
    pop = rng.dirichlet(np.ones(N) * 0.5)
    X = np.zeros((U, N))
    targets = np.empty(U, dtype=np.int64)
    for u in range(U):
        chosen = rng.choice(N, 7, replace=False, p=pop)
        X[u, chosen[:6]] = 1
        targets[u] = chosen[6]
    return sp.csr_matrix(X), targets


def _recommend_ranks(model, X, targets):
    """1 + position of each user's target in implicit's recommend list over every item not in training (an
    item-item model leaves out the items it scores 0: a target left out comes after the positive ones)."""
    users = np.arange(U)
    ids, scores = model.recommend(users, X[users], N=N, filter_already_liked_items=True)
    out = []
    for u in users:
        at = np.flatnonzero(ids[u] == targets[u])
        out.append(1 + int(at[0]) if at.size else 1 + int(np.sum((scores[u] > 0) & (ids[u] >= 0))))
    return np.array(out)


def _implicit_models():
    from implicit.als import AlternatingLeastSquares
    from implicit.bpr import BayesianPersonalizedRanking
    from implicit.lmf import LogisticMatrixFactorization
    from implicit.nearest_neighbours import BM25Recommender, CosineRecommender

    kw = dict(random_state=1, num_threads=1)
    return {"als": AlternatingLeastSquares(factors=8, iterations=5, **kw),
            "bpr": BayesianPersonalizedRanking(factors=8, iterations=20, **kw),
            "lmf": LogisticMatrixFactorization(factors=8, iterations=10, **kw),
            "cosine": CosineRecommender(K=10, num_threads=1),
            "bm25": BM25Recommender(K=10, num_threads=1)}


@pytest.mark.parametrize("name", ["als", "bpr", "lmf", "cosine", "bm25"])
def test_implicit_ranks_equal_its_recommend(name):
    """Full ranking through the adapter (the full-ranking fast path: one matrix product per batch) gives
    the target's position in implicit's own recommend list (up to the order of exact ties); the fixed design's ranks (the pair path) equal
    brute force on the full scores over the same decoys."""
    X, targets = _data()
    model = _implicit_models()[name]
    model.fit(X, show_progress=False)
    score = from_implicit(model, X)
    users = np.arange(U)
    full = sampled_ranks(score, users, targets, exclude=X, n_items=N, design="full")
    mine = full["rank"].to_numpy()
    theirs = _recommend_ranks(model, X, targets)
    # implicit orders tied items arbitrarily, sampled_ranks gives ties to the target (items no neighbour
    # reaches, or never trained, score exactly 0): equal where nothing ties with the target, else within the ties
    S = score.full(users)
    free = X.toarray() == 0
    ties = np.sum((S == S[users, targets][:, None]) & free, axis=1) - 1
    assert np.all(mine <= theirs) and np.all(theirs - mine <= ties)
    assert mine[ties == 0].tolist() == theirs[ties == 0].tolist() and np.mean(ties == 0) > 0.5
    assert score.calls >= 1
    tab, D = sampled_ranks(score, users, targets, exclude=X, n_items=N, sample_size=6, rng=2, return_decoys=True)
    rows = score.full(users)
    want = 1 + np.sum(rows[users[:, None], D] > rows[users, targets][:, None], axis=1)
    assert tab["rank"].tolist() == want.tolist()


def test_implicit_maps_and_refusals():
    """user_map / item_map: the model's index of each dataset id; an item unknown to the model scores -inf;
    a user unknown to it is refused; a model that is not implicit's, or an item-item model without its
    training matrix, is refused naming what is missing."""
    X, targets = _data(1)
    from implicit.als import AlternatingLeastSquares
    from implicit.nearest_neighbours import CosineRecommender

    m = AlternatingLeastSquares(factors=4, iterations=3, random_state=0, num_threads=1)
    m.fit(X, show_progress=False)
    P, Q = m.user_factors, m.item_factors
    item_map = np.r_[np.arange(N), -1]  # dataset item N is unknown to the model
    user_map = np.r_[np.arange(U)[::-1], -1]
    s = from_implicit(m, user_map=user_map, item_map=item_map)
    got = s(np.array([0, 3]), np.array([[1, 2, N], [0, N, 5]]))
    assert got[0, 0] == pytest.approx(P[U - 1] @ Q[1], rel=1e-5) and got[1, 2] == pytest.approx(P[U - 4] @ Q[5], rel=1e-5)
    assert got[0, 2] == -np.inf and got[1, 1] == -np.inf
    full = s(np.array([0]), np.broadcast_to(np.arange(N + 1), (1, N + 1)))
    assert full[0, N] == -np.inf and full[0, :N] == pytest.approx(P[U - 1] @ Q.T, rel=1e-5)
    with pytest.raises(ValueError, match="user 40 is not a user the implicit model was fitted on"):
        s(np.array([U]), np.array([[1]]))
    with pytest.raises(ValueError, match="from_implicit takes a fitted implicit model"):
        from_implicit(object())
    with pytest.raises(ValueError, match="user_items must be the users x items CSR matrix"):
        from_implicit(CosineRecommender(K=5).fit(X, show_progress=False) or CosineRecommender(K=5))
    with pytest.raises(ValueError, match="give user_map / item_map"):
        from_implicit(m, item_ids=np.arange(N))


def test_gathers_are_chunked(monkeypatch):
    """A tiny GATHER_ENTRIES splits the factor gather into one user a chunk with the same scores."""
    rng = np.random.default_rng(0)
    P, Q = rng.standard_normal((5, 3)), rng.standard_normal((9, 3))
    s = LibraryScorer(*adapters._factor_pairs(P, Q))
    items = rng.integers(0, 9, (5, 4))
    want = np.einsum("bf,bkf->bk", P, Q[items])
    monkeypatch.setattr(adapters, "GATHER_ENTRIES", 1)
    assert np.allclose(s(np.arange(5), items), want)


def _cornac_data():
    X, targets = _data(2)
    rows, cols = X.nonzero()
    triples = [(f"u{u}", f"i{i}", 1.0) for u, i in zip(rows, cols)]
    return X, targets, triples


@pytest.mark.parametrize("name", ["bpr", "mf"])
def test_cornac_ranks_equal_its_rank(name):
    """Cornac fitted on string ids: with the dataset's id maps (user_ids / item_ids) the adapter's full
    ranking (no exclusion) gives the target's position in model.rank's list; an item of the dataset that
    Cornac never saw scores -inf."""
    import cornac
    from cornac.models import BPR, MF

    X, targets, triples = _cornac_data()
    ds = cornac.data.Dataset.from_uir(triples, seed=1)
    model = (BPR(k=8, max_iter=50, seed=1, verbose=False) if name == "bpr"
             else MF(k=8, max_iter=50, seed=1, verbose=False)).fit(ds)
    user_ids = np.array([f"u{u}" for u in range(U)])
    item_ids = np.array([f"i{i}" for i in range(N)] + ["never-seen"])
    score = from_cornac(model, user_ids=user_ids, item_ids=item_ids)
    users = np.arange(U)
    seen = [i for i in range(N) if f"i{i}" in model.iid_map]
    keep = np.isin(targets, seen)
    tab = sampled_ranks(score, users[keep], targets[keep], n_items=N + 1, design="full")
    for r, (u, t) in enumerate(zip(users[keep], targets[keep])):
        ranked, _ = model.rank(model.uid_map[f"u{u}"])
        assert tab["rank"].iloc[r] == 1 + int(np.flatnonzero(np.asarray(ranked) == model.iid_map[f"i{t}"])[0])
    got = score(np.array([0]), np.array([[N, seen[0]]]))
    assert got[0, 0] == -np.inf and np.isfinite(got[0, 1])
    with pytest.raises(ValueError, match="from_cornac takes a Cornac Recommender"):
        from_cornac(object())
    with pytest.raises(ValueError, match="user ids are not integers: give user_ids"):
        from_cornac(model, item_ids=item_ids)
