r"""From a fitted model of a recommender library to the ``score(users, items)`` that
:func:`itemsampling.evaluation.sampled_ranks` takes.

Each adapter returns a :class:`LibraryScorer`: a function ``score(users, items) -> scores`` over the
*dataset's* 0-based ids (the ids of :mod:`itemsampling.data`'s frames), which maps them to the library's
own indices, calls the library's batched scoring, and takes the full-ranking fast path (one call that
scores the whole catalogue for a batch of users) where the library has one: the full design
(``design="full"``) passes ``items`` as the whole catalogue in every row, which the scorer recognises.

* :func:`from_implicit` — ``implicit`` (Frederickson 2018): the factor models (ALS, BPR, LMF; score
  :math:`\langle p_u, q_i \rangle`, the item factors carrying BPR's and LMF's bias column) and the
  item-item models (cosine, TF-IDF, BM25: :math:`x_u^\top S_{\cdot i}` with the training matrix and the
  model's sparse similarity), as its ``recommend`` scores them;
* :func:`from_cornac` — Cornac (Salah et al. 2020): ``Recommender.score(user_idx)`` (every item of one
  user, the library's call), ids through ``uid_map`` / ``iid_map``;
* :func:`from_lenskit` — LensKit 2025+ (Ekstrand 2020; needs PyTorch: the ``lenskit`` extra): a scorer
  component or a pipeline, called on an ``ItemList`` of each user's candidates;
* :func:`from_recbole` — RecBole (Zhao et al. 2021; PyTorch: the ``recbole`` extra): ``predict`` on an
  ``Interaction`` of (user, item) pairs, ``full_sort_predict`` for full ranking, ids through
  ``dataset.field2id_token``.

**Ids.** The library learnt its own indices. ``user_ids`` / ``item_ids`` are the original id of each of
the dataset's 0-based ids (a frame's ``attrs["user_ids"]`` / ``attrs["item_ids"]``); the adapter maps
them to the library's through its own map (Cornac's ``uid_map``, RecBole's tokens, LensKit's
vocabularies). Without them the dataset's ids are the library's (``implicit``: the rows and columns of the
matrix it was fitted on). An item the library never saw gets the score :math:`-\infty` (it ranks below
every item the model knows, and a tie with another unknown target goes to the target, the rule of
``sampled_ranks``); a user it never saw is refused naming the user.

The libraries are imported only when an adapter is called: ``implicit`` and Cornac are in
``requirements.txt`` (tested against their own ranking calls in ``tests/test_adapters.py``); LensKit and
RecBole need PyTorch and are extras (``pip install itemsampling[lenskit]`` / ``[recbole]``), checked by
``benchmarks/check_torch_adapters.py``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["LibraryScorer", "from_implicit", "from_cornac", "from_lenskit", "from_recbole", "GATHER_ENTRIES"]

#: Most float entries one gather of factor rows holds (pairs x factors): about 64 MiB in float32.
GATHER_ENTRIES = 1 << 24


def _index_map(ids, lookup, what: str) -> np.ndarray:
    """The library index of each dataset id (``-1``: unknown to the library): ``ids[k]`` the original id of
    dataset id ``k``, ``lookup`` a dict original id -> library index."""
    out = np.full(len(ids), -1, dtype=np.int64)
    for k, key in enumerate(np.asarray(ids).tolist()):
        j = lookup.get(key)
        if j is None and isinstance(key, (int, np.integer)):
            j = lookup.get(str(key))
        if j is not None:
            out[k] = int(j)
    return out


class LibraryScorer:
    r"""``score(users, items) -> scores`` over the dataset's ids for a library's fitted model.

    ``user_index[u]`` / ``item_index[i]`` are the library's indices of the dataset's user ``u`` and item
    ``i`` (``-1``: unknown; ``None``: the same ids); ``pairs(lu, li)`` scores library indices
    ``(m,)`` x ``(m, k)``; ``full(lu)`` (optional) scores every library item for users ``lu``,
    ``(m, n_library_items)``. ``library`` names it in messages. ``calls`` counts the library calls."""

    def __init__(self, pairs, full=None, *, user_index=None, item_index=None, n_items=None, library="model"):
        self.pairs = pairs
        self.full = full
        self.user_index = None if user_index is None else np.asarray(user_index, dtype=np.int64)
        self.item_index = None if item_index is None else np.asarray(item_index, dtype=np.int64)
        self.n_items = n_items if item_index is None else len(self.item_index)
        self.library = library
        self.calls = 0

    def _users(self, users):
        u = np.asarray(users, dtype=np.int64)
        if self.user_index is None:
            return u
        if u.size and (u.min() < 0 or u.max() >= self.user_index.size):
            raise ValueError(f"user {int(u.max())} is outside the {self.user_index.size} users of user_ids")
        lu = self.user_index[u]
        if (lu < 0).any():
            raise ValueError(f"user {int(u[np.argmax(lu < 0)])} is not a user the {self.library} model was fitted on")
        return lu

    def _is_catalogue(self, items) -> bool:
        n = self.n_items
        return (self.full is not None and n is not None and items.ndim == 2 and items.shape[1] == n
                and items.strides[0] == 0 and np.array_equal(items[0], np.arange(n)))

    def __call__(self, users, items):
        items = np.asarray(items)
        lu = self._users(users)
        self.calls += 1
        if self._is_catalogue(items):
            s = np.asarray(self.full(lu), dtype=np.float64)
            if self.item_index is None:
                return s
            out = np.full((lu.size, self.item_index.size), -np.inf)
            known = self.item_index >= 0
            out[:, known] = s[:, self.item_index[known]]
            return out
        if self.item_index is None:
            return np.asarray(self.pairs(lu, items.astype(np.int64)), dtype=np.float64)
        if items.size and (items.min() < 0 or items.max() >= self.item_index.size):
            raise ValueError(f"item {int(items.max())} is outside the {self.item_index.size} items of item_ids (the "
                             "original id of every dataset item)")
        li = self.item_index[items]
        unknown = li < 0
        s = np.asarray(self.pairs(lu, np.where(unknown, 0, li)), dtype=np.float64)
        if unknown.any():
            s = np.where(unknown, -np.inf, s)
        return s


def _dense(a):
    """A factor matrix as a NumPy array (implicit's GPU models hold them on the device)."""
    if hasattr(a, "to_numpy"):
        return a.to_numpy()
    return np.asarray(a)


def _factor_pairs(P, Q):
    """``<P[u], Q[i]>`` for users ``(m,)`` and items ``(m, k)``, in chunks of :data:`GATHER_ENTRIES`."""
    F = P.shape[1]

    def pairs(lu, li):
        m, k = li.shape
        out = np.empty((m, k), dtype=np.result_type(P.dtype, Q.dtype))
        step = max(1, GATHER_ENTRIES // max(k * F, 1))
        for lo in range(0, m, step):
            hi = min(lo + step, m)
            out[lo:hi] = np.einsum("bf,bkf->bk", P[lu[lo:hi]], Q[li[lo:hi]])
        return out

    def full(lu):
        return P[lu] @ Q.T

    return pairs, full


def from_implicit(model, user_items=None, *, user_ids=None, item_ids=None, user_map=None, item_map=None):
    r"""``score(users, items)`` of a fitted ``implicit`` model (module docstring).

    Factor models (``AlternatingLeastSquares``, ``BayesianPersonalizedRanking``,
    ``LogisticMatrixFactorization``, CPU or GPU): :math:`\langle p_u, q_i\rangle` from ``user_factors`` /
    ``item_factors``, what ``model.recommend`` ranks by. Item-item models (``CosineRecommender``,
    ``TFIDFRecommender``, ``BM25Recommender``): :math:`x_u^\top S_{\cdot i}` with ``user_items`` (the
    users x items CSR matrix the model was fitted on; required) and ``model.similarity``.

    ``implicit`` has no id maps of its own: the model's rows and columns are those of the matrix it was
    fitted on. ``user_map`` / ``item_map`` (int arrays) give the model's index of each dataset id when the
    two differ (``-1``: unknown to the model); ``user_ids`` / ``item_ids`` are not used by this adapter
    and refused (say the maps instead)."""
    if user_ids is not None or item_ids is not None:
        raise ValueError("implicit models have no id maps of their own: give user_map / item_map (the model's index "
                         "of each dataset id) instead of user_ids / item_ids")
    if hasattr(model, "similarity") and not hasattr(model, "item_factors"):
        import scipy.sparse as sp

        if user_items is None or not sp.issparse(user_items):
            raise ValueError("user_items must be the users x items CSR matrix the item-item model was fitted on "
                             f"(scipy.sparse), got {type(user_items).__name__}")
        X = sp.csr_matrix(user_items)
        Sim = sp.csr_matrix(model.similarity)
        if X.shape[1] != Sim.shape[0]:
            raise ValueError(f"user_items has {X.shape[1]} columns but the model's similarity is {Sim.shape}")
        SimT = Sim.T.tocsr()  # row i: similarities into item i, so a score is a row dot product

        def full(lu):
            return np.asarray((X[lu] @ Sim).todense())

        def pairs(lu, li):
            m, k = li.shape
            out = np.empty((m, k))
            for b in range(m):  # one user's profile against the items' similarity columns
                xb = X[lu[b]]
                out[b] = np.asarray((SimT[li[b]] @ xb.T).todense()).ravel()
            return out

        n = Sim.shape[0]
    elif hasattr(model, "item_factors") and hasattr(model, "user_factors"):
        P, Q = _dense(model.user_factors), _dense(model.item_factors)
        if P.ndim != 2 or Q.ndim != 2 or P.shape[1] != Q.shape[1] or P.shape[0] == 0:
            raise ValueError("the implicit model has no fitted factors (call model.fit first): user_factors "
                             f"{getattr(P, 'shape', None)}, item_factors {getattr(Q, 'shape', None)}")
        pairs, full = _factor_pairs(P, Q)
        n = Q.shape[0]
    else:
        raise ValueError(f"from_implicit takes a fitted implicit model (factor model or item-item model), got "
                         f"{type(model).__name__}")
    return LibraryScorer(pairs, full, user_index=user_map, item_index=item_map, n_items=n, library="implicit")


def from_cornac(model, *, user_ids=None, item_ids=None):
    """``score(users, items)`` of a fitted Cornac ``Recommender`` (module docstring): ``model.score(u)`` (every
    item of user ``u``, Cornac's call) for each distinct user of a batch, the batch's items read from it.
    ``user_ids`` / ``item_ids``: the original id of each dataset id, mapped through the model's ``uid_map`` /
    ``iid_map`` (default: the dataset's ids are the keys of those maps)."""
    uid_map, iid_map = getattr(model, "uid_map", None), getattr(model, "iid_map", None)
    if not callable(getattr(model, "score", None)) or uid_map is None or iid_map is None:
        raise ValueError(f"from_cornac takes a Cornac Recommender fitted on a train set (with uid_map and iid_map), "
                         f"got {type(model).__name__}")
    n_lib = len(iid_map)
    if item_ids is None:
        item_ids = np.arange(max(int(k) for k in iid_map) + 1) if all(str(k).lstrip("-").isdigit() for k in iid_map) \
            else None
        if item_ids is None:
            raise ValueError("the Cornac model's item ids are not integers: give item_ids (the original id of each "
                             "dataset item, a frame's attrs['item_ids'])")
    if user_ids is None:
        if not all(str(k).lstrip("-").isdigit() for k in uid_map):
            raise ValueError("the Cornac model's user ids are not integers: give user_ids (the original id of each "
                             "dataset user, a frame's attrs['user_ids'])")
        user_ids = np.arange(max(int(k) for k in uid_map) + 1)
    user_index = _index_map(user_ids, dict(uid_map), "user")
    item_index = _index_map(item_ids, dict(iid_map), "item")

    def full(lu):
        out = np.empty((lu.size, n_lib))
        for b, u in enumerate(lu):
            out[b] = np.asarray(model.score(int(u)), dtype=np.float64).ravel()[:n_lib]
        return out

    def pairs(lu, li):
        uniq, inv = np.unique(lu, return_inverse=True)
        rows = full(uniq)
        return rows[inv[:, None], li]

    return LibraryScorer(pairs, full, user_index=user_index, item_index=item_index, library="Cornac")


def from_lenskit(scorer_or_pipeline, *, user_ids, item_ids, component="scorer"):
    """``score(users, items)`` of a trained LensKit (2025+) scorer component or pipeline (module docstring):
    for each distinct user of a batch, one call on an ``ItemList`` of the items it asks for
    (``lenskit.operations.score`` on a pipeline, the component itself otherwise); ``user_ids`` /
    ``item_ids`` are the original ids LensKit was trained on. Items the model cannot score (NaN) get
    :math:`-\\infty`. Needs the ``lenskit`` extra (PyTorch)."""
    from lenskit.data import ItemList, RecQuery
    from lenskit.pipeline import Pipeline

    uids, iids = np.asarray(user_ids), np.asarray(item_ids)
    obj = scorer_or_pipeline

    def one(user, wanted):
        items = ItemList(item_ids=iids[wanted])
        if isinstance(obj, Pipeline):
            from lenskit.operations import score

            got = score(obj, RecQuery(user_id=user), items, component=component)
        else:
            got = obj(query=RecQuery(user_id=user), items=items)
        s = got.scores("pandas", index="ids")
        vals = s.reindex(iids[wanted]).to_numpy(dtype=np.float64) if s is not None else np.full(wanted.size, np.nan)
        return np.where(np.isnan(vals), -np.inf, vals)

    def pairs(lu, li):
        out = np.empty(li.shape)
        uniq, inv = np.unique(lu, return_inverse=True)
        for j, u in enumerate(uniq):
            rows = np.flatnonzero(inv == j)
            wanted, back = np.unique(li[rows], return_inverse=True)
            out[rows] = one(uids[u].item(), wanted)[back.reshape(rows.size, -1)]
        return out

    def full(lu):
        return pairs(lu, np.broadcast_to(np.arange(iids.size), (lu.size, iids.size)))

    return LibraryScorer(pairs, full, n_items=iids.size, user_index=None, item_index=None, library="LensKit")


def from_recbole(model, dataset, *, user_ids=None, item_ids=None, device=None):
    """``score(users, items)`` of a trained RecBole model (module docstring): ``model.predict`` on an
    ``Interaction`` of (user, item) pairs, ``model.full_sort_predict`` for full ranking; ``user_ids`` /
    ``item_ids`` (the original tokens of the dataset's ids) mapped through ``dataset.field2token_id``
    (default: the dataset's ids are RecBole's tokens, as integers). Needs the ``recbole`` extra (PyTorch)."""
    import torch
    from recbole.data.interaction import Interaction

    uf, itf = dataset.uid_field, dataset.iid_field
    u_tok, i_tok = dataset.field2token_id[uf], dataset.field2token_id[itf]
    if user_ids is None:
        user_ids = np.arange(max(int(k) for k in u_tok if k != "[PAD]") + 1)
    if item_ids is None:
        item_ids = np.arange(max(int(k) for k in i_tok if k != "[PAD]") + 1)
    user_index = _index_map([str(x) for x in np.asarray(user_ids).tolist()], dict(u_tok), "user")
    item_index = _index_map([str(x) for x in np.asarray(item_ids).tolist()], dict(i_tok), "item")
    dev = device or next(model.parameters()).device
    model.eval()

    def pairs(lu, li):
        m, k = li.shape
        inter = Interaction({uf: torch.as_tensor(np.repeat(lu, k), device=dev),
                             itf: torch.as_tensor(li.ravel(), device=dev)})
        with torch.no_grad():
            return model.predict(inter).reshape(m, k).cpu().numpy()

    def full(lu):
        with torch.no_grad():
            s = model.full_sort_predict(Interaction({uf: torch.as_tensor(lu, device=dev)}))
        return s.reshape(lu.size, -1).cpu().numpy()

    return LibraryScorer(pairs, full, user_index=user_index, item_index=item_index, library="RecBole")
