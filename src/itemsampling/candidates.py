r"""Candidate-set sampling and popularity bias (Ihemelandu & Ekstrand 2023).

The protocol of their Sec. III:

* **split** (:func:`split_holdout`): a fraction (their 20%) of each test user's interactions is
  held out; :math:`I_u^{\mathrm{test}}` are the held-out items, :math:`I_u^{\mathrm{train}}` the
  rest.
* **candidate sets** (:func:`draw_candidates`), the items a recommender ranks for user :math:`u`,
  :math:`C_u = I_u^{\mathrm{test}} \cup I_u^{\mathrm{decoy}}`:

  - ``"full"``: :math:`C_u = I \setminus I_u^{\mathrm{train}}`;
  - ``"uniform"``: :math:`d` decoys drawn uniformly without replacement from
    :math:`I \setminus I_u^{\mathrm{test}} \setminus I_u^{\mathrm{train}}`,
    :math:`P[i \in I_u^{\mathrm{decoy}}] \propto 1`;
  - ``"popularity"``: :math:`d` decoys drawn without replacement from the same pool with
    probability proportional to the item's popularity :math:`|R_i|`, the number of training users
    who interacted with it (their Sec. II and III-C); items of popularity 0 are never drawn.

  Candidate selection is separate from the models: any :mod:`itemsampling.models` recommender
  ranks any candidate set (:func:`evaluate_candidates`).
* **metrics** over the top-:math:`K` list of each candidate set with the user's *set* of relevant
  items (:func:`itemsampling.metrics.set_metric_values`, Krichene & Rendle 2020, Eq. 2-6; the
  paper's nDCG, RR, precision and recall at :math:`K = 10`);
* **popularity score** (their Sec. III-D, :func:`popularity_score`): the mean popularity rank
  (rank 1 = least popular) of the items of a list, averaged over lists;
  :func:`popularity_prone` names the algorithms whose lists are more popular than the relevant
  items themselves.

Sec. IV, the LDA true-preference simulation (:func:`truth_experiment`): observed data drawn from
the simulator's complete preferences; metrics against the observed test items
(:math:`M^{\mathrm{obs}}`) and, for the full candidate set, against the complete preferences
(:math:`M^{\mathrm{truth}}`); bias :math:`= M^{\mathrm{obs}} - M^{\mathrm{truth}}`.

Ranks and decoys for the estimators: :func:`target_ranks` (global and sampled ranks of one
held-out item per user) and, for Chapter 11's popularity-weighted decoys, :func:`rank_masks` (the
items above each target) and :func:`draw_weighted_decoys` (the decoys' single-draw probabilities
and flags, the input of :func:`itemsampling.estimators.weighted.estimate_metric_weighted`), and
the chapter's coverage study of their intervals, each model's target scored against its own truth
(:func:`weighted_coverage`; its repeats run through :func:`itemsampling._parallel.parallel_map`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy import stats

from . import models as _models
from ._parallel import parallel_map
from ._validation import as_rng, check_bool, check_int, check_memory, check_real, check_seed, memory_limit
from .data import SimulationConfig, gini, holdout_fraction, item_counts, n_items_of, n_users_of, simulate
from .estimators.weighted import estimate_metric_weighted, weighted_bounds
from .metrics import set_metric_values, topk_metric_values
from .ranking import _above_target_batches, _check_inputs, _train_csr

__all__ = [
    "STRATEGIES",
    "PAPER_DECOY_SIZES",
    "PAPER_GINI",
    "HoldoutSplit",
    "CandidateSets",
    "split_holdout",
    "item_popularity",
    "draw_decoys",
    "draw_candidates",
    "popularity_ranks",
    "popularity_score",
    "popularity_prone",
    "max_decoys",
    "make_recommender",
    "dense_matrix_bytes",
    "item_matrix_bytes",
    "replace_models",
    "DENSE_MAX_ITEMS",
    "replacement_text",
    "evaluate_candidates",
    "decoy_experiment",
    "decoy_experiments",
    "truth_experiment",
    "truth_decoy_pools",
    "truth_repeats_rule",
    "weighted_coverage",
    "CoverageStudy",
    "COVERAGE_COLUMNS",
    "target_ranks",
    "rank_masks",
    "draw_weighted_decoys",
    "gini_sweep",
]

#: Candidate-set strategies of Ihemelandu & Ekstrand 2023, Sec. III-C.
STRATEGIES = ("full", "uniform", "popularity")
#: Their decoy sizes (Sec. III-C).
PAPER_DECOY_SIZES = (10, 20, 50, 100, 200, 500, 1000, 2000)
#: Their Table I, Gini index of the number of ratings per item.
PAPER_GINI = {"ML-100K": 0.6290, "ML-25M": 0.8922, "Yahoo!R3 - Train": 0.5595, "Yahoo!R3 - Test": 0.0798}

#: Recommenders by name: (class in :mod:`itemsampling.models`, parameters). The neighbourhood and
#: factor models follow the book's defaults (:data:`itemsampling.experiments.MODEL_SPECS`).
RECOMMENDERS: dict[str, tuple[str, dict]] = {
    "random": ("Random", {}),
    "popular": ("Popular", {}),
    "itemknn": ("ItemKNN", {"q": 1.0, "k": 50}),
    "userknn": ("UserKNN", {"k": 50}),
    "als": ("ALS", {"factors": 64, "lam": 10.0, "alpha": 0.2, "iterations": 15}),
    "bpr": ("BPR", {"factors": 64, "lr": 0.01, "lam": 0.01, "iterations": 100}),
    "ease": ("EASE", {"lam": 500.0}),
    "oracle": ("Oracle", {}),
}
_SEEDED = {"Random", "ALS", "BPR"}


@dataclass
class HoldoutSplit:
    """A per-user hold-out split: ``train`` and ``test`` frames, the catalogue size ``n_items``,
    the test users (sorted) and the binary CSR matrices ``train_matrix`` / ``test_matrix``
    (all users x items)."""

    train: pd.DataFrame
    test: pd.DataFrame
    n_items: int
    n_users: int
    users: np.ndarray
    train_matrix: sp.csr_matrix
    test_matrix: sp.csr_matrix


@dataclass
class CandidateSets:
    """Candidate sets of the test users ``users`` (aligned rows): ``strategy`` in
    :data:`STRATEGIES`, ``n_decoys`` (``None`` for ``"full"``) and ``decoys`` (int array
    ``(len(users), n_decoys)`` in draw order; ``None`` for ``"full"``)."""

    strategy: str
    n_decoys: int | None
    users: np.ndarray
    decoys: np.ndarray | None

    @property
    def label(self) -> str:
        return "full" if self.strategy == "full" else f"{self.strategy} {self.n_decoys}"

    def mask(self, split: HoldoutSplit, rows=slice(None)) -> np.ndarray:
        """Boolean ``(len(rows), n_items)`` membership of :math:`C_u` for the selected rows."""
        users = self.users[rows]
        if self.strategy == "full":
            return split.train_matrix[users].toarray() == 0
        m = split.test_matrix[users].toarray() > 0
        d = self.decoys[rows]
        m[np.repeat(np.arange(users.size), d.shape[1]), d.ravel()] = True
        return m


def _binary(df: pd.DataFrame, n_users: int, n_items: int) -> sp.csr_matrix:
    return _models.interaction_matrix(df, n_users, n_items)


def split_holdout(interactions: pd.DataFrame, fraction: float = 0.2, rng=None, test_users=None) -> HoldoutSplit:
    """Ihemelandu & Ekstrand 2023, Sec. III-A: hold out ``fraction`` of each test user's
    interactions at random (:func:`itemsampling.data.holdout_fraction`); ``test_users`` defaults to
    every user. Returns a :class:`HoldoutSplit`."""
    train, test = holdout_fraction(interactions, fraction=fraction, rng=rng, test_users=test_users)
    N, U = n_items_of(interactions), n_users_of(interactions)
    return HoldoutSplit(train=train, test=test, n_items=N, n_users=U,
                        users=np.unique(test["user"].to_numpy(np.int64)),
                        train_matrix=_binary(train, U, N), test_matrix=_binary(test, U, N))


def item_popularity(train: pd.DataFrame, n_items: int | None = None) -> np.ndarray:
    """:math:`|R_i|`: the number of distinct training users who interacted with each item
    ``0..n_items-1`` (Ihemelandu & Ekstrand 2023, Sec. III-C)."""
    N = n_items_of(train) if n_items is None else check_int(n_items, "n_items", low=1)
    return np.asarray(_binary(train, n_users_of(train), N).sum(axis=0)).ravel().astype(np.float64)


def _check_popularity(popularity, n_items: int) -> np.ndarray:
    p = np.asarray(popularity, dtype=np.float64) if not isinstance(popularity, str) else None
    if p is None or p.ndim != 1:
        raise ValueError("popularity must be a 1-d array with one non-negative weight per item")
    if p.size != n_items:
        raise ValueError(f"popularity must have one weight per item ({n_items}), got length {p.size}")
    if not np.all(np.isfinite(p)):
        raise ValueError("popularity must not contain NaN or infinite values")
    if np.any(p < 0):
        raise ValueError(f"popularity must be non-negative, got minimum {p.min()}")
    if not np.any(p > 0):
        raise ValueError("popularity must not be all zero (no item could be drawn as a decoy)")
    return p


def _check_strategy(strategy) -> str:
    if not isinstance(strategy, str) or strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {list(STRATEGIES)}, got {strategy!r}")
    return strategy


def _pool_counts(split: HoldoutSplit, strategy: str, popularity=None):
    N = split.n_items
    seen = split.train_matrix[split.users] + split.test_matrix[split.users]
    seen.data[:] = 1.0  # an item in both train and test counts once
    seen = seen.tocsr()
    if strategy == "uniform":
        return N - np.diff(seen.indptr), np.zeros(N), seen
    w = _check_popularity(item_popularity(split.train, N) if popularity is None else popularity, N)
    logw = np.log(w, out=np.full(N, -np.inf), where=w > 0)
    pos = w > 0
    return int(pos.sum()) - np.asarray(seen[:, pos].sum(axis=1)).ravel().astype(np.int64), logw, seen


def max_decoys(split: HoldoutSplit, strategy: str, popularity=None) -> int:
    """The largest decoy size every test user's pool allows for ``strategy`` (``"uniform"``: items
    outside the user's training and test items; ``"popularity"``: those of positive popularity)."""
    strategy = _check_strategy(strategy)
    if strategy == "full":
        raise ValueError("strategy 'full' has no decoys; use 'uniform' or 'popularity'")
    return int(_pool_counts(split, strategy, popularity)[0].min())


def draw_decoys(split: HoldoutSplit, n_decoys: int, strategy: str = "uniform", popularity=None, rng=None,
                batch_size: int = 2048) -> np.ndarray:
    r"""Draw ``n_decoys`` decoys per test user (rows aligned with ``split.users``) without
    replacement from :math:`I \setminus I_u^{\mathrm{test}} \setminus I_u^{\mathrm{train}}`.

    ``strategy="uniform"``: every eligible item equally likely. ``strategy="popularity"``: the
    successive draws pick each remaining eligible item with probability proportional to
    ``popularity`` (default :func:`item_popularity` of the training data); items of weight 0 are
    never drawn. Both are vectorised over users with the Gumbel-top-:math:`d` trick
    (Efraimidis & Spirakis 2006): the :math:`d` largest keys :math:`\ln w_i + G_i`,
    :math:`G_i \sim \mathrm{Gumbel}(0, 1)`, in decreasing order, are distributed as :math:`d`
    successive draws without replacement with probabilities proportional to :math:`w_i`; so column
    0 holds the first draw, column 1 the second, and so on.

    Raises ``ValueError`` naming ``n_decoys`` when a user's pool has fewer eligible items.
    """
    if not isinstance(split, HoldoutSplit):
        raise ValueError(f"split must be a HoldoutSplit (see split_holdout), got {type(split).__name__}")
    strategy = _check_strategy(strategy)
    if strategy == "full":
        raise ValueError("strategy 'full' has no decoys; use 'uniform' or 'popularity'")
    d = check_int(n_decoys, "n_decoys", low=1)
    batch_size = check_int(batch_size, "batch_size", low=1)
    if strategy == "uniform" and popularity is not None:
        raise ValueError("popularity is only used by strategy 'popularity'")
    eligible_counts, logw, seen = _pool_counts(split, strategy, popularity)
    users = split.users
    smallest = int(eligible_counts.min())
    if d > smallest:
        u = int(users[np.argmin(eligible_counts)])
        what = "items outside its training and test items" if strategy == "uniform" else \
            "items of positive popularity outside its training and test items"
        raise ValueError(f"n_decoys must be <= {smallest}, the smallest candidate pool (user {u} has only {smallest} "
                         f"{what}); got {d}")
    return _draw_top(logw, seen, d, as_rng(rng), batch_size)


def _draw_top(logw, seen: sp.csr_matrix, d: int, gen: np.random.Generator, batch_size: int = 2048) -> np.ndarray:
    """The Gumbel-top-``d`` decoys of :func:`_gumbel_top_reference`: by :func:`_gumbel_top`, or by the
    reference itself where the candidates would be a fifth of the catalogue or more (there the
    reference is as fast: sim-ml1m's 3,706 items, 0.074 against 0.083 s at d = 1,000 for 400 users,
    ``benchmarks/decoy_draws.py``); the same decoys either way."""
    if d + _CAND_SD * np.sqrt(d) + _CAND_ADD > seen.shape[1] / 5:
        return _gumbel_top_reference(logw, seen, d, gen, batch_size)
    return _gumbel_top(logw, seen, d, gen)


def _gumbel_top_reference(logw, seen: sp.csr_matrix, d: int, gen: np.random.Generator,
                          batch_size: int = 2048) -> np.ndarray:
    """The Gumbel-top-``d`` draw written out over every user x item key (kept as the reference of
    :func:`_gumbel_top`, which returns the same decoys from the same generator, bit for bit): keys
    ``logw + gen.gumbel(size=(users, N))``, the ``seen`` items at minus infinity, the ``d`` largest
    of each row in decreasing order."""
    M, N = seen.shape
    out = np.empty((M, d), dtype=np.int64)
    for s in range(0, M, batch_size):
        rows = slice(s, s + batch_size)
        b = seen[rows].shape[0]
        keys = logw[None, :] + gen.gumbel(size=(b, N))
        blocked = seen[rows].toarray() > 0
        keys[blocked] = -np.inf
        out[rows] = _top_keys(keys, d)
    return out


def _top_keys(keys: np.ndarray, d: int) -> np.ndarray:
    """The columns of the ``d`` largest ``keys`` of each row, in decreasing order: one partition per
    row, then a stable sort of the ``d`` (the order of the Gumbel-top-``d`` draws)."""
    part = np.argpartition(-keys, d - 1, axis=1)[:, :d]
    kd = np.take_along_axis(keys, part, axis=1)
    return np.take_along_axis(part, np.argsort(-kd, axis=1, kind="stable"), axis=1)


def _exact_gumbel(x: np.ndarray) -> np.ndarray:
    """numpy's Gumbel(0, 1) variate of each uniform ``x`` (``Generator.random``'s draw): ``0 - 1 *
    log(-log(1 - x))`` with the C library's ``log``, as ``Generator.gumbel`` computes it (numpy's own
    vectorised ``np.log`` can differ from it in the last bit)."""
    log = math.log
    return np.fromiter((0.0 - 1.0 * log(-log(1.0 - v)) for v in np.ravel(x)), dtype=np.float64,
                       count=np.size(x)).reshape(np.shape(x))


#: :func:`_gumbel_top`'s expected candidates above the threshold: d + _CAND_SD sqrt(d) + _CAND_ADD.
_CAND_SD, _CAND_ADD = 6.0, 16.0
#: Two sorted candidate keys this close (relative) are ranked by their exact keys (:func:`_gumbel_top`).
_NEAR_TIE = 1e-12


def _gumbel_top(logw, seen: sp.csr_matrix, d: int, gen: np.random.Generator, block: int | None = None) -> np.ndarray:
    r"""The decoys of :func:`_gumbel_top_reference` (the ``d`` largest keys :math:`\ln w_i + G_{ui}`
    of each user's items outside ``seen``, in decreasing order) from the same draws of ``gen``, bit
    for bit, without computing or partitioning every key.

    ``Generator.gumbel`` turns one uniform double :math:`x` into :math:`G = -\ln(-\ln(1 - x))`
    (drawing again only when :math:`x = 0`), so ``gen.random`` yields the same stream, and a key
    exceeds a threshold :math:`\tau` exactly when :math:`x < h_i(\tau) = 1 - \exp(-w_i e^{-\tau})`.
    For each block of ``block`` users (default: about 2^22 keys, 32 MB):

    1. :math:`\tau` is the largest threshold at which every user of the block expects at least
       :math:`d + 6\sqrt d + 16` eligible items above it (bisection on
       :math:`\sum_{i\ \mathrm{eligible}} h_i(\tau)`); a user whose pool is not larger keeps all of it;
    2. the candidates are the eligible items with :math:`x < h_i(\tau)` (with a relative margin of
       1e-9); their keys are computed (numpy's ``log``, within a few units in the last place of the
       exact ones), and a user with fewer than :math:`d` of them above :math:`\tau` plus a margin
       keeps its whole pool, so the ``d`` largest keys are always among the candidates;
    3. the ``d + 1`` largest candidate keys are sorted; where two of them lie within 1e-12
       (relative) of each other, the order could depend on the last bits, and that user's keys are
       recomputed exactly (:func:`_exact_gumbel`) and ranked by the reference's own partition.

    A block in which some :math:`x = 0` (probability about :math:`2^{-53}` per key) is redrawn from
    the generator's saved state by the reference itself. Cost: one uniform draw per key and the
    candidates' logarithms, instead of two logarithms per key and a partition of every row."""
    M, N = seen.shape
    block = max(64, 2**22 // N) if block is None else block  # about 4 million keys (32 MB) at once
    out = np.empty((M, d), dtype=np.int64)
    finite = np.isfinite(logw)
    target = d + _CAND_SD * np.sqrt(d) + _CAND_ADD
    buf = np.empty((min(block, M), N))
    for s in range(0, M, block):
        sub = seen[s:s + block]
        b = sub.shape[0]
        x = buf[:b]
        state = gen.bit_generator.state
        gen.random(out=x)
        if not x.min() > 0.0:  # Generator.gumbel would draw again here: let it
            gen.bit_generator.state = state
            out[s:s + b] = _gumbel_top_reference(logw, sub, d, gen, batch_size=b)
            continue
        seen_pos = sub.multiply(finite[None, :]).tocsr()
        n_elig = int(finite.sum()) - np.diff(seen_pos.indptr)  # each user's pool
        big = n_elig > target
        tau = -np.inf
        if big.any():
            lo, hi = float(logw[finite].min()) - 50.0, float(logw[finite].max()) + 50.0
            sb = seen_pos[big]
            for _ in range(60):  # the expected count above tau falls as tau rises
                mid = 0.5 * (lo + hi)
                p = -np.expm1(-np.exp(logw - mid))
                if (p.sum() - sb @ p).min() >= target:
                    lo = mid
                else:
                    hi = mid
            tau = lo
        h = finite.astype(np.float64) if tau == -np.inf else -np.expm1(-np.exp(logw - tau)) * (1 + 1e-9)
        cand = x < h[None, :]
        cand[~big] = finite[None, :]
        r_idx = np.repeat(np.arange(b), np.diff(sub.indptr))
        cand[r_idx, sub.indices] = False
        r, c = np.nonzero(cand)
        key = logw[c] - np.log(-np.log(1.0 - x[r, c]))
        if tau > -np.inf:
            over = np.bincount(r[key >= tau + 1e-9 * max(1.0, abs(tau))], minlength=b)
            short = np.flatnonzero((over < d) & big)
            if short.size:  # too few candidates above tau: these users keep their whole pool
                cand[short] = finite[None, :]
                cand[r_idx, sub.indices] = False
                r, c = np.nonzero(cand)
                key = logw[c] - np.log(-np.log(1.0 - x[r, c]))
        counts = np.bincount(r, minlength=b)
        width = int(counts.max())
        pos = np.arange(r.size) - np.repeat(np.cumsum(counts) - counts, counts)
        K = np.full((b, width), -np.inf)
        C = np.zeros((b, width), dtype=np.int64)
        K[r, pos] = key
        C[r, pos] = c
        top = min(d + 1, width)
        part = np.argpartition(-K, top - 1, axis=1)[:, :top] if top < width else np.tile(np.arange(width), (b, 1))
        kp = np.take_along_axis(K, part, axis=1)
        o = np.argsort(-kp, axis=1, kind="stable")
        part, kp = np.take_along_axis(part, o, axis=1), np.take_along_axis(kp, o, axis=1)
        out[s:s + b] = np.take_along_axis(C, part[:, :d], axis=1)
        fin = np.isfinite(kp)
        gap = np.diff(kp, axis=1)
        near = (-gap <= _NEAR_TIE * np.maximum(1.0, np.abs(kp[:, 1:]))) & fin[:, 1:]
        for u in np.flatnonzero(near.any(axis=1)):  # the exact keys of this user decide the order
            keys = logw + _exact_gumbel(x[u])
            keys[sub.indices[sub.indptr[u]:sub.indptr[u + 1]]] = -np.inf
            out[s + u] = _top_keys(keys[None, :], d)[0]
    return out


def draw_candidates(split: HoldoutSplit, strategy: str, n_decoys: int | None = None, popularity=None,
                    rng=None) -> CandidateSets:
    """The candidate sets of every test user for one ``strategy`` (see the module docstring);
    ``n_decoys`` is required for ``"uniform"`` and ``"popularity"`` and must be ``None`` for
    ``"full"``."""
    strategy = _check_strategy(strategy)
    if strategy == "full":
        if n_decoys is not None:
            raise ValueError("n_decoys must be None for strategy 'full' (every non-training item is a candidate)")
        return CandidateSets("full", None, split.users, None)
    if n_decoys is None:
        raise ValueError(f"n_decoys (>= 1) is required for strategy {strategy!r}")
    dec = draw_decoys(split, n_decoys, strategy, popularity=popularity, rng=rng)
    return CandidateSets(strategy, int(n_decoys), split.users, dec)


def popularity_ranks(popularity) -> np.ndarray:
    """Popularity rank of each item, 1 = least popular, :math:`N` = most popular; tied items share
    their average rank (Ihemelandu & Ekstrand 2023, Sec. III-D)."""
    p = np.asarray(popularity, dtype=np.float64)
    if p.ndim != 1 or p.size == 0 or not np.all(np.isfinite(p)) or np.any(p < 0):
        raise ValueError("popularity must be a non-empty 1-d array of finite non-negative values")
    _, inv, counts = np.unique(p, return_inverse=True, return_counts=True)
    last = np.cumsum(counts)  # a value shared by c items occupies ranks last - c + 1 .. last
    return (last - (counts - 1) / 2.0)[inv]


def popularity_score(lists, popularity, normalize: bool = False) -> float:
    r"""Ihemelandu & Ekstrand 2023, Sec. III-D: "the average of the ranks of recommended items by
    their popularity (where rank 1 is the least-popular item)" for each list, averaged over lists:

    .. math:: \mathrm{PS} = \frac{1}{|L|} \sum_{\ell \in L} \frac{1}{|\ell|} \sum_{i \in \ell} \mathrm{poprank}(i).

    ``lists`` is an int array ``(n_lists, K)`` of item ids; entries ``-1`` pad lists shorter than
    :math:`K` (empty lists are skipped). ``normalize=True`` divides by :math:`N`, so the score lies
    in :math:`(0, 1]` and is comparable across catalogues."""
    normalize = check_bool(normalize, "normalize")
    L = np.asarray(lists)
    if L.ndim != 2 or L.dtype.kind not in "iu":
        raise ValueError("lists must be a 2-d integer array (n_lists, K) of item ids, -1 for padding")
    pr = popularity_ranks(popularity)
    N = pr.size
    if L.size and (L.max() >= N or L.min() < -1):
        raise ValueError(f"lists must hold item ids in 0..{N - 1} (or -1 for padding)")
    valid = L >= 0
    srt = np.sort(np.where(valid, L, -1), axis=1)
    rep = (srt[:, 1:] == srt[:, :-1]) & (srt[:, 1:] >= 0)
    if rep.any():
        row = int(np.flatnonzero(rep.any(axis=1))[0])
        item = int(srt[row, 1:][rep[row]][0])
        raise ValueError(f"lists must not repeat an item within a list (a recommendation list holds each item "
                         f"once); list {row} holds item {item} more than once")
    n = valid.sum(axis=1)
    if not np.any(n):
        raise ValueError("lists must contain at least one item")
    per_list = np.where(valid, pr[np.where(valid, L, 0)], 0.0).sum(axis=1)[n > 0] / n[n > 0]
    score = float(per_list.mean())
    return score / N if normalize else score


def popularity_prone(scores: dict, reference: float, margin: float = 0.0, relative: float | None = None) -> list:
    """Names of the *popularity-prone* algorithms (Ihemelandu & Ekstrand 2023, Sec. III-E: "the
    tendency to recommend popular items disproportionately to their relevance"): those whose
    popularity score exceeds ``reference``, the popularity score of the relevant (held-out) items
    themselves, i.e. what relevance alone warrants, by more than ``margin`` (in the score's units,
    e.g. a share of :math:`N` for mean popularity ranks; ``margin=0``: any excess). With
    ``relative`` in (0, 1], an algorithm must also have an excess over ``reference`` of at least
    ``relative`` times the largest excess among ``scores`` (the paper reads the label off "very high
    popularity scores" relative to the other algorithms in its Fig. 2). Sorted by decreasing score."""
    reference = check_real(reference, "reference")
    margin = check_real(margin, "margin", low=0.0)
    if not isinstance(scores, dict):
        raise ValueError(f"scores must be a dict mapping algorithm names to popularity scores, got "
                         f"{type(scores).__name__}")
    for k, v in scores.items():
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)) \
                or not np.isfinite(v):
            raise ValueError(f"scores[{k!r}] must be a finite number (a popularity score), got {v!r}")
    excess = {k: float(v) - reference for k, v in scores.items()}
    floor = 0.0
    if relative is not None:
        relative = check_real(relative, "relative", low=0.0, high=1.0, low_open=True)
        floor = relative * max(excess.values(), default=0.0)
    return [k for k, v in sorted(scores.items(), key=lambda kv: -kv[1]) if excess[k] > margin and excess[k] >= floor]


def _spec_model(name: str, n_items: int, specs):
    specs = RECOMMENDERS if specs is None else specs
    if not isinstance(name, str) or name not in specs:
        raise ValueError(f"model must be one of {sorted(specs)}, got {name!r}")
    n_items = check_int(n_items, "n_items", low=1)
    cls_name, params = specs[name]
    cls = getattr(_models, cls_name)
    if cls_name == "Oracle":  # needs the simulator's truth to be built, and has no item-item matrix
        return None, n_items
    return cls(**params), n_items


def dense_matrix_bytes(name: str, n_items: int, specs=None) -> float:
    """Bytes of the dense :math:`N\\times N` item-item matrices that model ``name`` allocates when it is
    fitted on ``n_items`` items (:meth:`itemsampling.models.Recommender.dense_item_bytes`): EASE holds one
    (:math:`8 N^2` bytes), ItemKNN without a neighbourhood four, ItemKNN with one (the chapters' ``k = 50``)
    none (it keeps a sparse top-k similarity, :func:`item_matrix_bytes`). ``specs`` maps names to
    ``(class name, parameters)`` (default :data:`RECOMMENDERS`; chapter 9 passes
    :data:`itemsampling.experiments.MODEL_SPECS`)."""
    model, n_items = _spec_model(name, n_items, specs)
    return 0.0 if model is None else model.dense_item_bytes(n_items)


def item_matrix_bytes(name: str, n_items: int, specs=None) -> float:
    """Bytes of the item-item state that model ``name`` allocates when fitted on ``n_items`` items, dense or
    sparse (:meth:`itemsampling.models.Recommender.item_matrix_bytes`): the request
    :meth:`itemsampling.models.Recommender.fit` checks against the memory budget, and so the one
    :func:`replace_models` compares with it. 0 for a model without an item-item matrix."""
    model, n_items = _spec_model(name, n_items, specs)
    return 0.0 if model is None else model.item_matrix_bytes(n_items)


#: The largest catalogue on which chapters 8-11 fit a model with a dense N x N item-item matrix (EASE;
#: ItemKNN without a neighbourhood) (:func:`replace_models`), a limit on time: EASE's fit factorises and
#: inverts its N x N matrix, O(N^3). Measured on 2 cores (benchmarks/real_models.py, one BLAS
#: thread above 12,000 items): 192 s and 1.6 GB on Yelp's 14,284 items, 109 s and 2.2 GB on CiteULike-a's 16,980,
#: 324 s and 4.7 GB on Amazon-book's 24,915 (most of a chapter's 6 minutes; 40,000 items, by N^3, about 22 min and
#: 13 GB). So 20,000: EASE runs on the first two and is replaced on Amazon-book. Above it
#: such a model is replaced by one without an item-item matrix. ItemKNN with a neighbourhood (the chapters'
#: k = 50) keeps a sparse top-k similarity (O(N k) memory, 42 MB on Yelp's 14,284 items) and is not
#: limited by it: only the memory budget counts for it.
DENSE_MAX_ITEMS = 20_000


def replace_models(models, n_items: int, specs=None, substitute: str = "userknn", max_items: int | None = None):
    """The models that fit the memory budget (:func:`itemsampling._validation.memory_limit`) at
    ``n_items`` items, the rule of chapter 8's TORS-shaped catalogues applied to a data folder:
    a model whose item-item state (:func:`item_matrix_bytes`, the request its fit checks: dense
    matrices, or ItemKNN's sparse top-k similarity and one block of its rows) exceeds the budget, or,
    with ``max_items`` (chapters 8-11 pass :data:`DENSE_MAX_ITEMS`), that has a dense
    :math:`N\\times N` matrix (:func:`dense_matrix_bytes`) on more than ``max_items`` items, is
    replaced by ``substitute`` (a model with no item-item matrix; default UserKNN), or left out when
    ``substitute`` is already in the list. Returns ``(kept, swaps)``: the list in the given order with
    the replacements in place, and ``{model: substitute or None}`` for the models replaced or left out
    (empty when everything fits)."""
    specs = RECOMMENDERS if specs is None else specs
    max_items = None if max_items is None else check_int(max_items, "max_items", low=1)
    models = [models] if isinstance(models, str) else list(models)
    if substitute not in specs:
        raise ValueError(f"substitute must be one of {sorted(specs)}, got {substitute!r}")
    if item_matrix_bytes(substitute, n_items, specs) > 0:
        raise ValueError(f"substitute must be a model without an item-item matrix, got {substitute!r}")
    budget = memory_limit()
    kept, swaps = [], {}
    for m in models:
        need = item_matrix_bytes(m, n_items, specs)
        dense = dense_matrix_bytes(m, n_items, specs)
        if need <= budget and (max_items is None or dense == 0 or n_items <= max_items):
            kept.append(m)
        else:
            alt = substitute if substitute not in models and substitute not in kept else None
            swaps[m] = alt
            if alt:
                kept.append(alt)
    return kept, swaps


def replacement_text(swaps: dict, n_items: int, specs=None, max_items: int | None = None) -> str:
    """The sentence a chapter prints for the ``swaps`` of :func:`replace_models` (same ``n_items``,
    ``specs`` and ``max_items``): each model replaced or left out, the bytes of its item-item state and
    why (the memory budget, or a dense matrix on a catalogue above ``max_items``); ``""`` when nothing was
    replaced."""
    if not swaps:
        return ""
    N = check_int(n_items, "n_items", low=1)
    budget = memory_limit()
    parts = []
    for m, alt in swaps.items():
        need = item_matrix_bytes(m, N, specs)
        model, _ = _spec_model(m, N, specs)
        what = "a sparse top-*k* similarity and a block of its rows" if dense_matrix_bytes(m, N, specs) == 0 else \
            ("one dense *N* × *N* matrix and a block of its columns" if model.dense_item_matrices() == 1 else
             f"{model.dense_item_matrices()} dense *N* × *N* matrices")
        why = (f"more than the memory budget of {budget / 1e6:,.0f} MB" if need > budget or max_items is None else
               f"and *N* is above the {max_items:,} items (`dense_max_items`) up to which the chapters fit a model "
               f"with a dense item-item matrix (one such matrix is {8.0 * max_items ** 2 / 1e6:,.0f} MB there, and "
               "EASE factorises and inverts it, in a time that grows as *N*³)")
        parts.append(f"{m} needs {need / 1e6:,.0f} MB for {what}, {why}, and is "
                     + (f"replaced by {alt}" if alt else "left out"))
    return (f"At this catalogue size (*N* = {N:,}) " + "; ".join(parts)
            + " (the rule of chapter 8's TORS-shaped catalogues).")


def make_recommender(name: str, truth: pd.DataFrame | None = None, rng=None):
    """A fresh, unfitted recommender by name (:data:`RECOMMENDERS`); ``"oracle"`` needs the
    simulator's ``truth`` frame; ``rng`` seeds the models that draw random numbers."""
    if not isinstance(name, str) or name not in RECOMMENDERS:
        raise ValueError(f"model must be one of {sorted(RECOMMENDERS)}, got {name!r}")
    cls_name, params = RECOMMENDERS[name]
    cls = getattr(_models, cls_name)
    if cls_name == "Oracle":
        if truth is None:
            raise ValueError("the 'oracle' model needs truth (the simulator's complete preferences)")
        return cls(truth)
    if cls_name in _SEEDED:
        return cls(**params, rng=as_rng(rng))
    return cls(**params)


def _relevance(split: HoldoutSplit, relevance) -> dict:
    if relevance is None:
        return {"obs": split.test_matrix}
    out = {}
    for name, rel in relevance.items():
        if isinstance(rel, pd.DataFrame):
            rel = _binary(rel, max(split.n_users, n_users_of(rel)), split.n_items)[:split.n_users]
        if not sp.issparse(rel) or rel.shape != (split.n_users, split.n_items):
            raise ValueError(f"relevance[{name!r}] must be a (user, item) DataFrame or a "
                             f"{split.n_users} x {split.n_items} sparse matrix")
        # training items are never candidates: they cannot count as relevant
        rel = sp.csr_matrix(rel, dtype=np.float64)
        rel.data[:] = 1.0
        rel = rel - rel.multiply(split.train_matrix)
        rel.eliminate_zeros()
        out[name] = rel.tocsr()
    return out


def _top_lists(S: np.ndarray, allowed: np.ndarray, tie: np.ndarray, k: int) -> np.ndarray:
    """The top-``k`` columns of each row of ``S`` among the ``allowed`` ones, by decreasing score,
    ties by increasing ``tie`` key: int array ``(rows, k)`` of column indices, ``-1`` past the end
    of a row with fewer than ``k`` allowed columns. Equal to a full sort by ``(-S, tie)``
    restricted to ``allowed`` and truncated, at the cost of one partition per row: the ``k``-th
    largest :math:`q` of the jittered keys :math:`S + \\delta\\,\\mathrm{tie}` (:math:`\\delta` =
    1e-7 of the row's largest absolute score; jitter makes the keys distinct, which keeps the
    partition fast on tied scores) bounds the ``k``-th largest score :math:`t` from above by
    :math:`\\delta`, so the columns with :math:`S \\ge q - 2\\delta` hold the exact top ``k``;
    only they are sorted, exactly, by ``(-S, tie)``."""
    b, N = S.shape
    kk = min(k, N)
    # the largest |S| among the allowed columns (0 if none), without a temporary |S|
    scale = np.maximum(np.max(S, axis=1, where=allowed, initial=0.0, keepdims=True),
                       -np.min(S, axis=1, where=allowed, initial=0.0, keepdims=True))
    delta = np.where(scale > 0, 1e-7 * scale, 1.0)
    key = np.multiply(tie, delta)
    key += S
    np.copyto(key, -np.inf, where=~allowed)
    key.partition(N - kk, axis=1)  # in place: only the k-th largest key is read
    q = key[:, N - kk:N - kk + 1]
    del key
    top = np.greater_equal(S, q - 2 * delta)
    top &= allowed
    rows, cols = np.nonzero(top)
    o = np.lexsort((tie[rows, cols], -S[rows, cols], rows))
    rows, cols = rows[o], cols[o]
    pos = np.arange(rows.size) - np.searchsorted(rows, np.arange(b))[rows]
    keep = pos < kk
    out = np.full((b, k), -1, dtype=np.int64)
    out[rows[keep], pos[keep]] = cols[keep]
    return out


@dataclass
class _Prepared:
    """Per-user inputs of :func:`evaluate_candidates` that do not depend on the model, built once
    and shared by every model: for the full set the dense membership mask ``(M, N)``, for a sampled
    set the candidate ids ``(M, c)`` (held-out items, then decoys; ``-1`` pads, here 0) and their
    mask (``allowed``), the dense relevance rows, each user's number of relevant candidates per
    candidate set and relevance (``n_rel``) and the popularity ranks."""

    cands: dict
    allowed: dict
    rels: dict
    n_rel: dict
    pranks: np.ndarray


def _candidate_ids(split: HoldoutSplit, c: CandidateSets) -> np.ndarray:
    T = split.test_matrix[c.users]
    counts = np.diff(T.indptr)
    t = int(counts.max()) if counts.size else 0
    ids = np.full((c.users.size, t + c.decoys.shape[1]), -1, dtype=np.int64)
    rows = np.repeat(np.arange(c.users.size), counts)
    ids[rows, np.arange(rows.size) - np.repeat(T.indptr[:-1], counts)] = T.indices
    ids[:, t:] = c.decoys
    return ids


def _prepare(split: HoldoutSplit, candidate_sets, relevance=None, popularity=None) -> _Prepared:
    M, N = split.users.size, split.n_items
    rels = _relevance(split, relevance)
    n_full = sum(c.strategy == "full" for c in candidate_sets)
    check_memory(float(M) * N * (n_full + len(rels)) + 9.0 * M * sum(
        (c.decoys.shape[1] if c.decoys is not None else 0) for c in candidate_sets),
        "the dense candidate masks and relevance rows", "the number of test users or of candidate sets")
    dense = {r: mat[split.users].toarray() > 0 for r, mat in rels.items()}
    cands, allowed, n_rel = {}, {}, {}
    bidx = np.arange(M)[:, None]
    for c in candidate_sets:
        if c.strategy == "full":
            cands[c.label] = allowed[c.label] = c.mask(split)
            for r, rel in dense.items():
                n_rel[(c.label, r)] = (rel & allowed[c.label]).sum(axis=1)
        else:
            ids = _candidate_ids(split, c)
            allowed[c.label] = ids >= 0
            cands[c.label] = np.where(allowed[c.label], ids, 0)
            for r, rel in dense.items():
                n_rel[(c.label, r)] = (rel[bidx, cands[c.label]] & allowed[c.label]).sum(axis=1)
    pop = item_popularity(split.train, N) if popularity is None else _check_popularity(popularity, N)
    return _Prepared(cands=cands, allowed=allowed, rels=dense, n_rel=n_rel, pranks=popularity_ranks(pop))


def _evaluate_prepared(model, split: HoldoutSplit, candidate_sets, prep: _Prepared, k: int, metrics, gen,
                       batch_size: int, per_user: bool = False) -> pd.DataFrame:
    users = split.users
    M = users.size
    per = {(c.label, r, m): np.full(M, np.nan) for c in candidate_sets for r in prep.rels for m in metrics}
    psum = {c.label: np.zeros(M) for c in candidate_sets}
    plen = {c.label: np.zeros(M) for c in candidate_sets}
    for s in range(0, M, batch_size):
        rows = slice(s, s + batch_size)
        S = model.score(users[rows])
        if np.isnan(S).any():
            raise ValueError(f"model {getattr(model, 'name', type(model).__name__)!r} returned NaN scores; "
                             "candidate sets can only be ranked by comparable scores")
        tie = gen.random(S.shape)
        bidx = np.arange(S.shape[0])[:, None]
        for c in candidate_sets:
            allowed = prep.allowed[c.label][rows]
            if c.strategy == "full":
                L = _top_lists(S, allowed, tie, k)
            else:  # rank the gathered candidates only
                cz = prep.cands[c.label][rows]
                flat = cz + bidx * S.shape[1]  # S[bidx, cz] as a gather from the flat array (3x faster)
                pos = _top_lists(np.take(S, flat), allowed, np.take(tie, flat), k)
                L = np.where(pos >= 0, cz[bidx, np.maximum(pos, 0)], -1)
            valid = L >= 0
            Lz = np.where(valid, L, 0)
            psum[c.label][rows] = np.where(valid, prep.pranks[Lz], 0.0).sum(axis=1)
            plen[c.label][rows] = valid.sum(axis=1)
            for r, rel in prep.rels.items():
                n_rel = prep.n_rel[(c.label, r)][rows]
                ok = n_rel > 0
                if not ok.any():
                    continue
                hits = (rel[rows][bidx, Lz] & valid)[ok]
                for m in metrics:
                    v = per[(c.label, r, m)][rows]
                    v[ok] = topk_metric_values(hits, n_rel[ok], m)
    rows_out = []
    for c in candidate_sets:
        for r in prep.rels:
            for m in metrics:
                v = per[(c.label, r, m)]
                ok = np.isfinite(v)
                rows_out.append((c.label, c.strategy, c.n_decoys, r, m, float(v[ok].mean()) if ok.any() else np.nan,
                                 int(ok.sum())))
        ln = plen[c.label]
        ps = float((psum[c.label][ln > 0] / ln[ln > 0]).mean())
        rows_out.append((c.label, c.strategy, c.n_decoys, "-", "popularity_score", ps, int((ln > 0).sum())))
    out = pd.DataFrame(rows_out, columns=["candidates", "strategy", "n_decoys", "relevance", "metric", "value", "n_users"])
    if per_user:
        out.attrs["per_user"] = per
    return out


def evaluate_candidates(model, split: HoldoutSplit, candidate_sets, k: int = 10,
                        metrics=("ndcg", "rr", "precision", "recall"), relevance=None, popularity=None,
                        rng=None, batch_size: int = 512, per_user: bool = False) -> pd.DataFrame:
    r"""Rank every candidate set with a fitted ``model`` and evaluate the top-``k`` lists.

    Each user's items are ordered by decreasing score, ties broken by one random permutation (so
    every candidate set, a subset, inherits a uniformly random tie order); a candidate set's
    ranking is that order restricted to :math:`C_u`, and its top-``k`` list the first ``k`` items
    of it. Metrics are :func:`itemsampling.metrics.topk_metric_values` of those lists (Krichene &
    Rendle 2020, Eq. 3-6 with :math:`|R_u|` the user's relevant items *in the candidate set*) with
    the relevant items of ``relevance`` (a dict ``name -> (user, item) frame or sparse matrix``;
    default ``{"obs": the held-out test items}``; training items never count), averaged over test
    users with at least one relevant candidate. Only the top of each order is sorted
    (:func:`_top_lists`: one partition per row, then a sort of the items scoring at least the
    ``k``-th largest candidate score), which gives the lists of a full sort exactly.

    Returns a long DataFrame with columns ``candidates, strategy, n_decoys, relevance, metric,
    value, n_users``; metric ``"popularity_score"`` (relevance ``"-"``) is the
    :func:`popularity_score` of the top-``k`` lists. With ``per_user=True``,
    ``result.attrs["per_user"]`` maps ``(candidates, relevance, metric)`` to the per-user values
    (aligned with ``split.users``; NaN for users without a relevant candidate).
    """
    candidate_sets, k, metrics, batch_size, per_user = _check_evaluation(split, candidate_sets, k, metrics,
                                                                         batch_size, per_user)
    prep = _prepare(split, candidate_sets, relevance, popularity)
    return _evaluate_prepared(model, split, candidate_sets, prep, k, metrics, as_rng(rng), batch_size, per_user)


def _check_evaluation(split, candidate_sets, k, metrics, batch_size, per_user):
    """The arguments of :func:`evaluate_candidates` checked: ``(candidate_sets, k, metrics, batch_size,
    per_user)`` as lists and ints, or a ``ValueError`` naming the argument."""
    if not isinstance(split, HoldoutSplit):
        raise ValueError(f"split must be a HoldoutSplit (see split_holdout), got {type(split).__name__}")
    if isinstance(candidate_sets, CandidateSets):
        candidate_sets = [candidate_sets]
    candidate_sets = list(candidate_sets)
    if not candidate_sets or not all(isinstance(c, CandidateSets) for c in candidate_sets):
        raise ValueError("candidate_sets must be a CandidateSets or a non-empty list of them (see draw_candidates)")
    for c in candidate_sets:
        if c.users.shape != split.users.shape or not np.array_equal(c.users, split.users):
            raise ValueError("candidate_sets must be drawn for this split's test users")
    k = check_int(k, "k", low=1)
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    for m in metrics:
        set_metric_values([1], [0], m, k=k, n_items=2)  # validates the name
    if "auc" in [str(m).lower() for m in metrics]:
        raise ValueError("metrics must be cut-off metrics (ndcg, rr, precision, recall, ap); 'auc' needs the whole ranking")
    return candidate_sets, k, metrics, check_int(batch_size, "batch_size", low=1), check_bool(per_user, "per_user")


def _named_rng(ss: np.random.SeedSequence, name: str) -> np.random.Generator:
    """A stream of ``ss`` for one model, keyed by the model's name: a model's results do not depend
    on which other models run beside it."""
    import zlib

    return np.random.default_rng(np.random.SeedSequence([*ss.generate_state(4), zlib.crc32(name.encode())]))


def _progress(it, progress, desc, total=None):
    if not progress:
        return it
    from tqdm.auto import tqdm

    return tqdm(it, desc=desc, total=total)


def decoy_experiment(interactions: pd.DataFrame, models=("random", "popular", "itemknn", "userknn", "als"),
                     decoy_sizes=PAPER_DECOY_SIZES, strategies=("uniform", "popularity"), k: int = 10,
                     metrics=("ndcg", "rr", "precision", "recall"), fraction: float = 0.2, truth=None,
                     rng=0, on_oversized: str = "error", progress: bool = False,
                     per_user: bool = False) -> pd.DataFrame:
    """Ihemelandu & Ekstrand 2023, Sec. III (Fig. 2 and 3): one hold-out split, every model fit on
    it, every model ranks the full candidate set and, for each strategy and decoy size, the same
    sampled candidate sets (drawn once, shared by all models). A decoy size above the smallest
    user's pool is refused (:func:`draw_decoys`) with ``on_oversized="error"`` and skipped with
    ``"drop"`` (the skipped sizes per strategy are listed in ``result.attrs["dropped_sizes"]``).
    Returns the rows of :func:`evaluate_candidates` with a ``model`` column;
    ``result.attrs["test_popularity_score"]`` is the :func:`popularity_score` of the users'
    held-out items (each user's test set as one list), the reference of :func:`popularity_prone`,
    and ``result.attrs["max_decoys"]`` the largest decoy size each strategy allows. ``rng`` (an int) seeds the split, the decoys, the models and the tie-breaks
    through separate streams (a model's streams are keyed by its name). With ``per_user=True``,
    ``result.attrs["per_user"][model]`` holds the per-user values of :func:`evaluate_candidates`
    (``(candidates, relevance, metric) -> array`` over the split's test users)."""
    progress = check_bool(progress, "progress")
    per_user = check_bool(per_user, "per_user")
    seed = check_int(rng, "rng", low=0)
    ss = np.random.SeedSequence(seed)
    s_split, s_dec, s_mod, s_tie = ss.spawn(4)
    split = split_holdout(interactions, fraction, rng=np.random.default_rng(s_split))
    sizes = [check_int(d, "decoy_sizes", low=1) for d in decoy_sizes]
    if on_oversized not in ("error", "drop"):
        raise ValueError(f"on_oversized must be 'error' or 'drop', got {on_oversized!r}")
    csets = [draw_candidates(split, "full")]
    dec_streams = s_dec.spawn(len(strategies) * len(sizes))
    dropped, largest = {}, {}
    j = 0
    for strat in strategies:
        _check_strategy(strat)
        if strat == "full":
            raise ValueError("strategies lists the sampled strategies ('uniform', 'popularity'); 'full' is always included")
        largest[strat] = max_decoys(split, strat)
        dropped[strat] = [d for d in sizes if d > largest[strat]] if on_oversized == "drop" else []
        for d in sizes:
            if d not in dropped[strat]:
                csets.append(draw_candidates(split, strat, d, rng=np.random.default_rng(dec_streams[j])))
            j += 1
    frames, per = [], {}
    csets, k, metrics, batch, _ = _check_evaluation(split, csets, k, metrics, 512, per_user)
    # the candidate masks and relevance rows: built once, shared by every model (as evaluate_candidates builds them)
    prep = _prepare(split, csets)
    for name in _progress(list(models), progress, "models"):
        model = make_recommender(name, truth=truth, rng=_named_rng(s_mod, name))
        model.fit(split.train, n_items=split.n_items, n_users=split.n_users)
        df = _evaluate_prepared(model, split, csets, prep, k, metrics, _named_rng(s_tie, name), batch, per_user)
        per[name] = df.attrs.pop("per_user", None)
        df.insert(0, "model", name)
        frames.append(df)
    out = pd.concat(frames, ignore_index=True)
    if per_user:
        out.attrs["per_user"] = per
    counts = np.diff(split.test_matrix.indptr)[split.users]
    lists = np.full((split.users.size, int(counts.max())), -1, dtype=np.int64)
    rows = np.repeat(np.arange(split.users.size), counts)
    pos = np.arange(rows.size) - np.repeat(np.cumsum(counts) - counts, counts)
    lists[rows, pos] = split.test_matrix[split.users].indices
    out.attrs["test_popularity_score"] = popularity_score(lists, item_popularity(split.train, split.n_items))
    out.attrs["dropped_sizes"] = dropped
    out.attrs["max_decoys"] = largest
    return out


def _decoy_run(interactions, rng, kwargs):
    return decoy_experiment(interactions, rng=rng, **kwargs)


def decoy_experiments(interactions: pd.DataFrame, rngs, n_jobs: int = 1, **kwargs) -> list:
    """:func:`decoy_experiment` once per seed in ``rngs`` (independent splits, fits and decoy draws; ``kwargs`` are
    its other arguments), the runs as independent tasks of :func:`itemsampling._parallel.parallel_map`: in this
    process, in ``n_jobs`` joblib workers, or on the Dask cluster that ``$ITEMSAMPLING_SCHEDULER`` names. Each run
    draws only from its own seed, so the results (a list of :func:`decoy_experiment` frames, in the order of
    ``rngs``) are the same in every case."""
    rngs = [check_int(r, "rngs", low=0) for r in np.atleast_1d(rngs).tolist()]
    n_jobs = check_int(n_jobs, "n_jobs", low=-1)
    if n_jobs == 0:
        raise ValueError("n_jobs must be >= 1 or -1 (all cores), got 0")
    if "rng" in kwargs:
        raise ValueError("decoy_experiments takes the seeds in rngs, not rng")
    return parallel_map(_decoy_run, [(interactions, r, kwargs) for r in rngs], n_jobs)


def _truth_data(config: SimulationConfig, fraction: float, ss: np.random.SeedSequence):
    """The simulated data and split of one repeat of :func:`truth_experiment` from its seed sequence
    ``ss``, and the streams left for its decoys, models and tie-breaks."""
    s_sim, s_split, s_dec, s_mod, s_tie = ss.spawn(5)
    cfg = dataclasses.replace(config, seed=int(s_sim.generate_state(1)[0] % (2**31)))
    sim = simulate(cfg)
    split = split_holdout(sim.observed, fraction, rng=np.random.default_rng(s_split))
    return sim, split, s_dec, s_mod, s_tie


def _truth_pools(config: SimulationConfig, fraction: float, ss: np.random.SeedSequence) -> tuple:
    sim, split = _truth_data(config, fraction, ss)[:2]
    return max_decoys(split, "uniform"), max_decoys(split, "popularity")


def truth_decoy_pools(config: SimulationConfig, fraction: float = 0.2, n_repeats: int = 1, rng=0,
                      n_jobs: int = 1) -> pd.DataFrame:
    r"""The largest decoy size each simulation of :func:`truth_experiment` (same ``config``,
    ``fraction``, ``n_repeats`` and ``rng``: the same simulated data and splits) allows: per repeat, the
    smallest test user's pool of uniform decoys (items outside the user's training and test items)
    and of popularity-weighted ones (those items of positive training popularity, the only ones the
    popularity-weighted draw can pick; :func:`max_decoys`). A ``n_decoys`` of :func:`truth_experiment`
    above a repeat's smaller pool is refused by :func:`draw_decoys`, so a caller that scales the decoy
    size with the catalogue caps it at the minimum over the repeats. Only the data are simulated (no
    model is fitted). Returns one row per repeat, columns ``repeat, uniform, popularity``."""
    if not isinstance(config, SimulationConfig):
        raise ValueError(f"config must be a SimulationConfig, got {type(config).__name__}")
    n_repeats = check_int(n_repeats, "n_repeats", low=1)
    n_jobs = check_int(n_jobs, "n_jobs", low=-1)
    if n_jobs == 0:
        raise ValueError("n_jobs must be >= 1 or -1 (all cores), got 0")
    seed = check_int(rng, "rng", low=0)
    streams = np.random.SeedSequence(seed).spawn(n_repeats)
    pools = parallel_map(_truth_pools, [(config, fraction, ss) for ss in streams], n_jobs)
    return pd.DataFrame([(rep, int(u), int(p)) for rep, (u, p) in enumerate(pools)],
                        columns=["repeat", "uniform", "popularity"])


def _truth_repeat(config: SimulationConfig, models, n_decoys: int, k: int, metrics, fraction: float, rep: int,
                  ss: np.random.SeedSequence, batch_size: int = 512) -> list:
    """One simulation of :func:`truth_experiment` from its own seed sequence ``ss`` (so its result
    does not depend on where or beside which other repeats it runs)."""
    sim, split, s_dec, s_mod, s_tie = _truth_data(config, fraction, ss)
    g = gini(item_counts(sim.observed, config.n_items))
    d1, d2 = s_dec.spawn(2)
    csets = [draw_candidates(split, "full"),
             draw_candidates(split, "uniform", n_decoys, rng=np.random.default_rng(d1)),
             draw_candidates(split, "popularity", n_decoys, rng=np.random.default_rng(d2))]
    # candidate masks, relevance rows and popularity ranks: built once, shared by every model
    prep = _prepare(split, csets, {"obs": split.test_matrix, "truth": sim.truth})
    out = []
    for name in models:
        model = make_recommender(name, truth=sim.truth, rng=_named_rng(s_mod, name))
        model.fit(split.train, n_items=split.n_items, n_users=split.n_users)
        df = _evaluate_prepared(model, split, csets, prep, k, metrics, _named_rng(s_tie, name), batch_size)
        df = df[df["metric"] != "popularity_score"]
        truth_vals = df[(df["candidates"] == "full") & (df["relevance"] == "truth")].set_index("metric")["value"]
        for row in df[df["relevance"] == "obs"].itertuples():
            mt = float(truth_vals[row.metric])
            out.append((rep, name, row.candidates, row.strategy, row.metric, row.value, mt, row.value - mt, g))
    return out


#: The catalogue size up to which chapter 10 runs its default number of simulations (:func:`truth_repeats_rule`).
TRUTH_REFERENCE_ITEMS = 7_000


def truth_repeats_rule(n_items: int, models, repeats: int = 100, reference: int = TRUTH_REFERENCE_ITEMS,
                       least: int = 20) -> int:
    r"""Chapter 10's number of simulations of :func:`truth_experiment` on a catalogue of :math:`N` items
    with ``models``: ``repeats`` when no model has an item-item matrix (:func:`item_matrix_bytes`)
    or :math:`N \le` ``reference``, else :math:`\lceil \mathrm{repeats}\,(\mathrm{reference}/N)^2\rceil`,
    at least ``least``. A model with an item-item matrix (item-kNN, EASE) scores every pair of items and
    dominates a simulation's cost, which grows at least as :math:`N^2` (on 2 cores, 400 users: the dense
    item-kNN 20 s a simulation at :math:`N` = 16,980, the other models about 1 s each; the sparse item-kNN
    keeps :math:`O(N k)` memory but still scores the :math:`N^2` pairs, in blocks of rows); ``least`` keeps
    enough simulations for the chapter's :math:`t` intervals and paired tests."""
    N = check_int(n_items, "n_items", low=1)
    repeats = check_int(repeats, "repeats", low=2)
    reference = check_int(reference, "reference", low=1)
    least = check_int(least, "least", low=2)
    models = [models] if isinstance(models, str) else list(models)
    dense = any(m != "oracle" and item_matrix_bytes(m, N) > 0 for m in models)
    if not dense or N <= reference:
        return repeats
    return int(min(repeats, max(least, int(np.ceil(repeats * (reference / N) ** 2)))))


def truth_experiment(config: SimulationConfig, models=("random", "popular", "itemknn", "als", "oracle"),
                     n_decoys: int = 1000, k: int = 50, metrics=("ndcg", "rr"), fraction: float = 0.2,
                     n_repeats: int = 1, rng=0, progress: bool = False, n_jobs: int = 1) -> pd.DataFrame:
    r"""Ihemelandu & Ekstrand 2023, Sec. IV-A (Fig. 4 and 5), repeated ``n_repeats`` times:

    1. simulate true preferences and observations (:func:`itemsampling.data.simulate` with
       ``config``, its seed replaced by one drawn for the repeat);
    2. hold out ``fraction`` of each user's observations;
    3. fit every model on the training part (the Oracle scores with the true preferences); the
       default models are the paper's (Random, Popular, item-kNN, implicit MF, Oracle);
    4. rank the full, uniformly sampled and popularity-weighted candidate sets (``n_decoys``
       decoys) and keep the top-``k`` lists (their :math:`K = 50`);
    5. :math:`M^{\mathrm{obs}}`: metrics against the held-out observed items, for each candidate
       set; :math:`M^{\mathrm{truth}}`: against the complete true preferences (training items
       removed), for the full candidate set;
    6. bias :math:`= M^{\mathrm{obs}} - M^{\mathrm{truth}}`.

    Every repeat draws from its own stream (``SeedSequence(rng).spawn(n_repeats)``), so the result
    is the same, bit for bit, for every ``n_jobs`` (``> 1`` or ``-1`` runs the repeats in joblib
    worker processes) and on a Dask cluster of any size, which runs the repeats when
    ``$ITEMSAMPLING_SCHEDULER`` names one (:func:`itemsampling._parallel.parallel_map`). The
    candidate masks and relevance rows of a repeat are built once and
    shared by its models; each list is the top of one partition, not of a full sort
    (:func:`evaluate_candidates`).

    Returns one row per repeat, model, candidate set and metric with columns ``repeat, model,
    candidates, strategy, metric, M_obs, M_truth, bias, gini``; ``gini`` is the Gini index of the
    observed item counts of the repeat's data.
    """
    progress = check_bool(progress, "progress")
    if not isinstance(config, SimulationConfig):
        raise ValueError(f"config must be a SimulationConfig, got {type(config).__name__}")
    n_repeats = check_int(n_repeats, "n_repeats", low=1)
    n_jobs = check_int(n_jobs, "n_jobs", low=-1)
    if n_jobs == 0:
        raise ValueError("n_jobs must be >= 1 or -1 (all cores), got 0")
    seed = check_int(rng, "rng", low=0)
    n_decoys = check_int(n_decoys, "n_decoys", low=1)
    k = check_int(k, "k", low=1)
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    for m in metrics:
        set_metric_values([1], [0], m, k=k, n_items=2)  # validates the name
    models = [models] if isinstance(models, str) else list(models)
    for name in models:
        if name == "oracle":
            continue
        make_recommender(name)  # validates the name
    streams = np.random.SeedSequence(seed).spawn(n_repeats)
    args = (config, models, n_decoys, k, metrics, fraction)
    parts = parallel_map(_truth_repeat, [(*args, rep, ss) for rep, ss in enumerate(streams)], n_jobs, generator=True)
    out = [row for part in _progress(parts, progress, "simulations", n_repeats) for row in part]
    return pd.DataFrame(out, columns=["repeat", "model", "candidates", "strategy", "metric", "M_obs", "M_truth", "bias", "gini"])


def target_ranks(model, train: pd.DataFrame, test: pd.DataFrame, sample_size: int, strategy: str = "uniform",
                 popularity=None, rng=None, batch_size: int = 512, return_pool: bool = False):
    r"""Global and sampled ranks of one held-out item per user, with the decoys of ``strategy``.

    The user's pool is :math:`I \setminus I_u^{\mathrm{train}}` (the target :math:`t_u` stays in it
    even if it also appears in ``train``), of size :math:`N_u` (:func:`itemsampling.ranking.pool_sizes`):
    the convention of :func:`itemsampling.ranking.global_ranks` with ``exclude_train=True`` (the
    book's default since Chapter 3) and of the paper's candidate sets. The user's training items
    are never ranked and never drawn as decoys. :math:`R_u \in 1..N_u` is the target's rank in the
    pool; the sampled set holds the target and :math:`n-1` decoys drawn without replacement from
    the :math:`N_u - 1` other pool items, uniformly (``"uniform"``: then
    :math:`r_u - 1 \sim \mathrm{Hypergeometric}(N_u-1, R_u-1, n-1)`, the kernel the estimators
    assume, with the user's own pool size as in
    :func:`itemsampling.experiments.sample_pool_ranks`) or with probability proportional to
    ``popularity`` (``"popularity"``, default :func:`item_popularity` of ``train``; Ihemelandu &
    Ekstrand 2023, Sec. III-C, decoys from :math:`I \setminus I_u^{\mathrm{train}}`; no closed-form
    kernel; items of popularity 0 are never drawn; the decoys are drawn as in
    :func:`draw_decoys`). Ties are broken by one random permutation shared by both ranks. ``test``
    must hold exactly one row per user.

    Returns ``(global_ranks, sampled_ranks)``, int64 arrays aligned with ``test``'s rows, and the
    pool sizes :math:`N_u` as a third array with ``return_pool=True``. Raises ``ValueError``
    naming ``sample_size`` when a user's pool has fewer than :math:`n-1` eligible decoys.
    """
    tu, ti, N = _check_inputs(model, train, test)
    if np.unique(tu).size != tu.size:
        raise ValueError("test must hold exactly one row (one target item) per user")
    strategy = _check_strategy(strategy)
    if strategy == "full":
        raise ValueError("strategy must be 'uniform' or 'popularity' for sampled ranks")
    return_pool = check_bool(return_pool, "return_pool")
    batch_size = check_int(batch_size, "batch_size", low=1)
    n = check_int(sample_size, "sample_size", low=2, high=N)
    X = _train_csr(train, model.n_users_, N)
    in_train = np.asarray(X[tu, ti]).ravel() > 0
    pool = (N - np.diff(X.indptr)[tu] + in_train).astype(np.int64)
    if strategy == "popularity":
        w = _check_popularity(item_popularity(train, N) if popularity is None else popularity, N)
        logw = np.log(w, out=np.full(N, -np.inf), where=w > 0)
        pos = w > 0
        # positive-popularity items of the pool other than the target
        eligible = int(pos.sum()) - np.asarray(X[tu][:, pos].sum(axis=1)).ravel().astype(np.int64) \
            - (pos[ti] & ~in_train)
        what = "items of positive popularity outside its training items"
    else:
        if popularity is not None:
            raise ValueError("popularity is only used by strategy 'popularity'")
        logw = np.zeros(N)
        eligible = pool - 1
        what = "items outside its training items"
    if np.any(eligible < n - 1):
        i = int(np.argmin(eligible))
        raise ValueError(f"sample_size must be <= {int(eligible[i]) + 1}: user {int(tu[i])} has only {int(eligible[i])} "
                         f"{what} besides the target to draw decoys from, got {n}")
    gen = as_rng(rng)
    R = np.empty(tu.size, dtype=np.int64)
    r = np.empty(tu.size, dtype=np.int64)
    for s, b, t, blocked, above in _above_target_batches(model, X, tu, ti, batch_size, gen):
        R[s:s + b.size] = 1 + above.sum(axis=1)
        excluded = blocked.copy()
        excluded[b, t] = True  # the target is not a decoy
        # the n - 1 largest keys logw + Gumbel of the other items (draw_decoys' draw, the same generator's draws)
        dec = _draw_top(logw, sp.csr_matrix(excluded, dtype=np.float64), n - 1, gen, batch_size=b.size)
        r[s:s + b.size] = 1 + np.take_along_axis(above, dec, axis=1).sum(axis=1)
    return (R, r, pool) if return_pool else (R, r)


# ---------------------------------------------------------------------------------------------
# Chapter 11: which items lie above the target, and weighted decoy draws
# ---------------------------------------------------------------------------------------------
def rank_masks(model, train, test, rng=None, batch_size: int = 512):
    r"""For one held-out item per user (rows of ``test``): ``above`` (boolean ``(M, N)``, the pool
    items the model ranks above the target, ties broken at random) and ``excluded`` (the user's
    training items and the target: never a decoy). :math:`R_u = 1 +` ``above[u].sum()``, the
    convention of :func:`itemsampling.candidates.target_ranks`."""
    tu, ti, N = _check_inputs(model, train, test)
    batch_size = check_int(batch_size, "batch_size", low=1)
    check_memory(2 * tu.size * N, "the above / excluded masks", "test")
    gen = as_rng(rng)
    X = _train_csr(train, model.n_users_, N)
    above = np.empty((tu.size, N), dtype=bool)
    excluded = np.empty((tu.size, N), dtype=bool)
    for s, b, t, blocked, ab in _above_target_batches(model, X, tu, ti, batch_size, gen):
        blocked[b, t] = True
        above[s:s + b.size] = ab
        excluded[s:s + b.size] = blocked
    return above, excluded


def draw_weighted_decoys(above, excluded, popularity, n_decoys: int, replacement: bool = True, rng=None,
                         batch_size: int = 1024):
    r"""Draw ``n_decoys`` decoys per user from the items not ``excluded`` with single-draw
    probabilities :math:`p_i = w_i / \sum_{j \notin \mathrm{excluded}} w_j` (``popularity`` =
    :math:`w`; items of weight 0 are never drawn). ``replacement=True``: independent draws;
    ``False``: successive sampling (Gumbel-top-k, as :func:`itemsampling.candidates.draw_decoys`),
    columns in draw order. Returns ``(decoy_probs, decoy_above)``, the input of
    :func:`estimate_metric_weighted` (``decoy_probs`` are the single-draw probabilities)."""
    above = np.asarray(above, dtype=bool)
    excluded = np.asarray(excluded, dtype=bool)
    if above.ndim != 2 or excluded.shape != above.shape:
        raise ValueError("above and excluded must be boolean (M, N) arrays of the same shape")
    w = np.asarray(popularity, dtype=np.float64)
    if w.shape != (above.shape[1],) or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"popularity must hold {above.shape[1]} non-negative finite weights")
    d = check_int(n_decoys, "n_decoys", low=1)
    replacement = check_bool(replacement, "replacement")
    gen = as_rng(rng)
    M, N = above.shape
    elig = ~excluded & (w[None, :] > 0)
    if not replacement and elig.sum(axis=1).min() < d:
        raise ValueError(f"n_decoys must be <= {int(elig.sum(axis=1).min())} (the smallest pool), got {d}")
    if not np.all(elig.any(axis=1)):
        raise ValueError("every user needs at least one eligible decoy of positive popularity")
    probs = np.empty((M, d))
    ab = np.empty((M, d), dtype=bool)
    for s in range(0, M, batch_size):
        rows = slice(s, s + batch_size)
        W = np.where(elig[rows], w[None, :], 0.0)
        tot = W.sum(axis=1, keepdims=True)
        b = W.shape[0]
        if replacement:
            cum = np.cumsum(W / tot, axis=1)
            cum[:, -1] = 1.0
            off = np.arange(b)[:, None]
            u = gen.random((b, d))
            dec = np.searchsorted((cum + off).ravel(), (u + off).ravel(), side="right").reshape(b, d) - off * N
            dec = np.minimum(dec, N - 1)
            # guard against landing on a zero-weight item through rounding
            bad = W[np.arange(b)[:, None], dec] == 0
            if np.any(bad):
                dec[bad] = np.argmax(W, axis=1)[np.nonzero(bad)[0]]
        else:
            with np.errstate(divide="ignore"):
                keys = np.log(W) + gen.gumbel(size=W.shape)
            dec = _top_keys(keys, d)
        probs[rows] = np.take_along_axis(W, dec, axis=1) / tot
        ab[rows] = np.take_along_axis(above[rows], dec, axis=1)
    return probs, ab


def gini_sweep(base: SimulationConfig, zipfs, models=("popular", "itemknn", "als"), n_decoys: int = 100,
               k: int = 10, metric: str = "ndcg", fraction: float = 0.2, rng=0, progress: bool = False) -> pd.DataFrame:
    """Beyond Ihemelandu & Ekstrand 2023: the popularity concentration of the data as a dial. For
    each ``zipf`` exponent of the simulator's item base measure (:class:`SimulationConfig`, larger =
    more concentrated), simulate, record the Gini index of the observed item counts and run
    :func:`decoy_experiment` with ``n_decoys`` decoys. Returns columns ``zipf, gini, model,
    candidates, value`` (``metric`` at cut-off ``k``)."""
    progress = check_bool(progress, "progress")
    if not isinstance(base, SimulationConfig):
        raise ValueError(f"base must be a SimulationConfig, got {type(base).__name__}")
    zipfs = [float(z) for z in np.atleast_1d(zipfs)]
    if not zipfs or not all(np.isfinite(z) and z >= 0 for z in zipfs):
        raise ValueError("zipfs must be non-empty, finite and >= 0")
    out = []
    for z in _progress(zipfs, progress, "zipf"):
        sim = simulate(dataclasses.replace(base, zipf=z))
        g = gini(item_counts(sim.observed, base.n_items))
        df = decoy_experiment(sim.observed, models=models, decoy_sizes=(n_decoys,), k=k, metrics=(metric,),
                              fraction=fraction, truth=sim.truth, rng=rng)
        df = df[df["metric"] == metric]
        for row in df.itertuples():
            out.append((z, g, row.model, row.candidates, row.value))
    return pd.DataFrame(out, columns=["zipf", "gini", "model", "candidates", "value"])


def _coverage_repeat(above_bits, excluded_bits, n_cols, popularity, n_decoys, n_items, metric, k, n_boot,
                     confidence, seed, case, rep):
    """One repeat of :func:`weighted_coverage` (masks packed with ``numpy.packbits`` along the items, so
    that a task on a cluster carries an eighth of the bytes)."""
    above = np.unpackbits(above_bits, axis=1, count=n_cols).view(bool)
    excluded = np.unpackbits(excluded_bits, axis=1, count=n_cols).view(bool)
    g = np.random.default_rng([seed, 5, case, rep])
    idx = g.integers(0, above.shape[0], size=above.shape[0])  # a new sample of users from the population
    p, a = draw_weighted_decoys(above[idx], excluded[idx], popularity, n_decoys, rng=g)
    e = estimate_metric_weighted(p, a, n_items, metric, k, ci=confidence, n_boot=n_boot,
                                 rng=np.random.default_rng([seed, 6, case, rep]), interval="bootstrap")
    b = weighted_bounds(p, a, n_items, metric, k, confidence)
    return float(e.estimate), float(e.low), float(e.high), float(b.low[metric]), float(b.high[metric])


@dataclass
class CoverageStudy:
    """The result of :func:`weighted_coverage`: ``table`` (one row per case, see there) and, per case,
    the arrays over the repeats ``hits`` (bool), ``estimates``, ``low`` and ``high`` of the bootstrap
    interval, and ``bounds_hits``, ``bounds_low``, ``bounds_high`` of the identification bounds
    (:func:`~itemsampling.estimators.weighted.weighted_bounds`, the default interval below the rule)."""

    table: pd.DataFrame
    hits: dict
    estimates: dict
    low: dict
    high: dict
    bounds_hits: dict = None
    bounds_low: dict = None
    bounds_high: dict = None


#: Columns of :attr:`CoverageStudy.table`.
COVERAGE_COLUMNS = ("coverage", "MC s.e.", "lowest coverage compatible", "exact", "mean estimate", "bias %",
                    "s.d. of estimates", "mean width", "width / (2 z s.d.)")


def weighted_coverage(cases, popularity, n_decoys: int, metric: str, k: int, n_repeats: int, n_boot: int = 100,
                      confidence: float = 0.95, rng: int = 0, n_jobs: int = 1) -> CoverageStudy:
    r"""Chapter 11's coverage study of the weighted correction's intervals, each target scored against
    its own truth.

    ``cases`` maps a name (a model) to ``(above, excluded, n_items, exact)``: the masks of
    :func:`rank_masks` for the population of test users, the catalogue or pool size passed to
    :func:`itemsampling.estimators.estimate_metric_weighted`, and the population value of the metric
    (the mean of :math:`F(R_u)` over those users). The intervals of ``estimate_metric_weighted(...,
    ci=confidence)`` resample users, so they are intervals for the population metric; each repeat
    therefore draws a new sample of users (as many as the population, with replacement) and new
    popularity-weighted decoys for them (:func:`draw_weighted_decoys`, ``n_decoys`` per user with
    replacement, weights ``popularity``), and the bootstrap interval (``interval="bootstrap"``,
    ``n_boot`` replicates) and the identification bounds (``weighted_bounds``, the default interval
    where the cut-off is below the rule) are scored against ``exact``.

    Repeat ``j`` of the ``i``-th case draws its users and decoys from
    ``numpy.random.default_rng([rng, 5, i, j])`` and its bootstrap from ``default_rng([rng, 6, i, j])``,
    so the repeats are independent tasks and the values are the same in this process, in ``n_jobs``
    joblib workers and on the Dask cluster that ``$ITEMSAMPLING_SCHEDULER`` names (the runner's
    ``--scheduler``; :func:`itemsampling._parallel.parallel_map`).

    ``table`` has one row per case: ``coverage`` :math:`\hat c` (the share of repeats whose interval
    holds ``exact``), its Monte Carlo standard error :math:`\sqrt{\hat c(1-\hat c)/J}` over the
    :math:`J` repeats, ``lowest coverage compatible`` (the one-sided 95% exact binomial lower bound
    of Clopper & Pearson 1934, the 5% quantile of Beta(hits, J - hits + 1); 0 without a hit),
    ``exact``, the mean estimate and its bias in %, the standard deviation of the estimates over the
    repeats, the mean interval width and the width over :math:`2 z\,\mathrm{s.d.}` with
    :math:`z = \Phi^{-1}((1 + \mathrm{confidence})/2)` (above 1: wider than the spread of the
    estimates calls for; NaN when the estimates do not vary)."""
    if not isinstance(cases, dict) or not cases:
        raise ValueError("cases must be a non-empty dict {name: (above, excluded, n_items, exact)}")
    n_decoys = check_int(n_decoys, "n_decoys", low=1)
    n_repeats = check_int(n_repeats, "n_repeats", low=2)
    n_boot = check_int(n_boot, "n_boot", low=2)
    confidence = check_real(confidence, "confidence", 0.0, 1.0, low_open=True, high_open=True)
    n_jobs = check_int(n_jobs, "n_jobs", low=-1)
    if n_jobs == 0:
        raise ValueError("n_jobs must be >= 1 or -1 (all cores), got 0")
    rng = check_seed(rng, "rng")  # the first word of every repeat's seed
    w = np.asarray(popularity, dtype=np.float64)
    tasks, exact = [], {}
    for i, (name, case) in enumerate(cases.items()):
        if not isinstance(case, (tuple, list)) or len(case) != 4:
            raise ValueError(f"cases[{name!r}] must be (above, excluded, n_items, exact), got {type(case).__name__}")
        above, excluded, n_items, ex = case
        above, excluded = np.asarray(above, dtype=bool), np.asarray(excluded, dtype=bool)
        if above.ndim != 2 or excluded.shape != above.shape or above.shape[0] < 1:
            raise ValueError(f"cases[{name!r}]: above and excluded must be boolean (M, N) arrays of the same shape")
        if w.shape != (above.shape[1],) or not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError(f"popularity must hold {above.shape[1]} non-negative finite weights")
        exact[name] = check_real(ex, f"cases[{name!r}] exact")
        packed = (np.packbits(above, axis=1), np.packbits(excluded, axis=1), above.shape[1])
        tasks += [(*packed, w, n_decoys, n_items, metric, k, n_boot, confidence, int(rng), i, rep)
                  for rep in range(n_repeats)]
    out = np.array(parallel_map(_coverage_repeat, tasks, n_jobs), dtype=float).reshape(len(cases), n_repeats, 5)
    z = float(stats.norm.ppf((1 + confidence) / 2))
    rows, hits, ests, low, high, b_hits, b_low, b_high = {}, {}, {}, {}, {}, {}, {}, {}
    for (name, ex), res in zip(exact.items(), out):
        ests[name], low[name], high[name] = res[:, 0], res[:, 1], res[:, 2]
        hits[name] = (low[name] <= ex) & (ex <= high[name])
        b_low[name], b_high[name] = res[:, 3], res[:, 4]
        b_hits[name] = (b_low[name] <= ex) & (ex <= b_high[name])
        h = int(hits[name].sum())
        c = h / n_repeats
        sd = float(np.std(ests[name], ddof=1))
        width = float(np.mean(high[name] - low[name]))
        rows[name] = dict(zip(COVERAGE_COLUMNS, (
            c, float(np.sqrt(c * (1 - c) / n_repeats)),
            float(stats.beta.ppf(0.05, h, n_repeats - h + 1)) if h > 0 else 0.0,
            ex, float(np.mean(ests[name])), 100 * (float(np.mean(ests[name])) / ex - 1) if ex != 0 else np.nan,
            sd, width, width / (2 * z * sd) if sd > 0 else np.nan)))
    table = pd.DataFrame.from_dict(rows, orient="index", columns=list(COVERAGE_COLUMNS))
    return CoverageStudy(table, hits, ests, low, high, b_hits, b_low, b_high)
