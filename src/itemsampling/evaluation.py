r"""Evaluate your own model with the designs the book derives: sampled ranks from a scorer.

:func:`sampled_ranks` runs one evaluation design on a reader's model (a function ``score(users, items)``)
and a test set (one held-out item per row) and returns the table that ``python -m itemsampling
estimate`` reads (columns ``user, item, rank, sample_size, n_items``), with the number of item
scorings the design spent. Three designs:

* ``"fixed"``: :math:`n-1` uniform decoys per row, the target ranked among the :math:`n` items
  (Krichene & Rendle 2020, Sec. 4; TORS Sec. 2.1);
* ``"adaptive"``: TORS Algorithm 1 (Sec. 6.1) on the model: :math:`n_0` items, and while the target
  ranks first the set doubles (:math:`n_u` *extra* decoys, :math:`n_u \to 2n_u`) up to :math:`n_{max}`,
  the rule of :func:`itemsampling.sampling.adaptive_sample_ranks`;
* ``"full"``: the target ranked in its whole pool (the truth); with ``n_users`` a random sample of that
  many users, i.e. user sampling (TORS Sec. 7, Eq. 45-48), which needs no rank distribution.

The pool and the law of the sampled rank
----------------------------------------
Row :math:`i` (user :math:`u`, target :math:`t`) ranks its target among the *pool* of items that are
not excluded (``exclude[u]`` non-zero: e.g. the user's training items and other test items); the
target is always in it, so the pool has :math:`N_u = N - |\mathrm{exclude}_u|` items. Its global rank is
:math:`R = 1 + |\{j \in \mathrm{pool} : s_j > s_t\}|`, **ties counted in the target's favour** (an item
scoring exactly as the target does not outrank it), and a sampled rank is
:math:`r = 1 + |\{\text{decoys } d : s_d > s_t\}|` by the same rule.

Decoys are drawn uniformly **with replacement** from the :math:`N_u - 1` pool items other than the target
(a decoy drawn twice counts twice). Of those items exactly :math:`R - 1` outrank the target, so, given
:math:`R`, :math:`r - 1 \sim \mathrm{Binomial}(n - 1, (R-1)/(N_u-1))`: the with-replacement kernel of
:mod:`itemsampling.kernel` (Krichene & Rendle Eq. 15; TORS Eq. 5) with the pool as the catalogue, which is
the likelihood the estimators use by default (``replacement=True``) and the only one they accept with
per-user pools (``n_items`` one size per row; :mod:`itemsampling.estimators.distribution`, "Per-user
catalogue sizes": with replacement the kernel depends on the pool only through the rank fraction). The
adaptive design's extra decoys are drawn the same way, so at a stop at size :math:`n_u` the rank is
:math:`1 + \mathrm{Binomial}(n_u/2, \theta_R)` (or :math:`\mathrm{Binomial}(n_0 - 1, \theta_R)` at the
first size), exactly the law of :func:`itemsampling.sampling.adaptive_sample_ranks` with replacement, and
the stopping rule depends only on :math:`r_u`, so the likelihood is the fixed-size kernel at
:math:`n_u` (TORS Eq. 43). Read the tables with :func:`itemsampling.estimators.estimate_metrics`
(``table.rank, table.n_items, table.sample_size``, default ``replacement=True``), or ``python -m
itemsampling estimate`` on the table written to a file (``table.to_csv(path, index=False)``; the command
takes one row per user and model, so with several held-out items per user drop the ``user`` column,
which only pairs two models' rows). A design ``"full"`` table has ``sample_size = n_items``
(:math:`n_u = N_u`, the exact rank): its metric is the plain mean over rows, method ``"sampled"``; the
rank-distribution estimators would treat it as :math:`N_u - 1` decoys drawn with replacement.

Several models
--------------
``score`` may be a dict ``{model name: scorer}``: every model is evaluated on **the same decoys**
(common random numbers), so that the difference of two models' metrics is estimated on paired rows
(``estimate`` pairs two models' rows by their ``user`` column). Fixed design: each batch's decoys are
drawn once and scored by every model (model ``a``'s ranks are those of a run of ``a`` alone with the
same seed). Adaptive design: the decoys of stage :math:`j` are drawn once for the rows that some model
still asks them for (its target still ranks first) and every such model scores them, so each row's
decoys form one sequence of which every model consumes the prefix its stopping rule asks for; each
model's decoys are still fresh uniform draws at every stage, so its law is the single-model one. The
users sampled with ``n_users`` are the same for every model. The table holds the models one after the
other in a ``model`` column; a model's item scorings are ``sample_size`` summed over its rows (fixed,
adaptive) or :math:`N` a row (full).

**Frozen and published decoys.** ``return_decoys=True`` also returns the decoys (fixed: the :math:`n - 1`
of each row; adaptive: each row's whole sequence up to :math:`n_{max} - 1`, drawn in full for it), and
``decoys=`` ranks against a given set instead of drawing, so that a model evaluated next month meets
the decoys of today's, and a paper's published decoys (:func:`itemsampling.data.read_decoys`: NCF's
``.test.negative``, Elliot's fixed negatives) can be used as they are. Their law decides the kernel:
with replacement (a row repeating a decoy shows it) the binomial one above; without replacement (no row
repeats one: the published files) the hypergeometric one, ``estimate --without-replacement``, which the
estimators take with one pool size for every row (the table's ``replacement`` column says it, and the
rank-file reader refuses it with per-user pools); the adaptive design only with replacement. Decoys
drawn by popularity are another law: the weighted path of chapter 11 (``estimate --weighted``).

Tables concatenate with ``pd.concat`` (``attrs`` holds only numbers and text; pandas keeps them where
every table has the same and drops them otherwise), and the input row of each table row is its index.

Cost and memory
---------------
``attrs["scorings"]`` counts the (row, item) pairs passed to ``score``: :math:`n` per row (fixed);
:math:`n_u` per row (adaptive: the target once, then only the extra decoys, compared with the target's
stored score); :math:`N` per row (full: the whole catalogue is scored and the excluded items are masked,
since one call takes one rectangular item array). ``score`` is called with at most
:data:`BATCH_ENTRIES` pairs (at least one row); besides what ``score`` allocates, one batch holds about
40 bytes per pair (the item ids, the decoy positions, the returned scores and the comparison mask),
about 80 MiB, and the decoy draw a 4 MiB mask of excluded items. A progress bar (tqdm) appears on a terminal when a run lasts more than two seconds.
``attrs["seconds"]`` and ``attrs["score_seconds"]`` give the wall time of the whole call and of the
calls to ``score``: the difference is this function's own overhead
(``benchmarks/bench_evaluation.py``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ._validation import as_rng, check_bool, check_int
from .sampling import adaptive_sizes

__all__ = ["sampled_ranks", "DESIGNS", "DECOY_LAWS", "BATCH_ENTRIES", "design_call"]

#: The designs of :func:`sampled_ranks`.
DESIGNS = ("fixed", "adaptive", "full")
#: Most (row, item) pairs passed to ``score`` in one call (at least one row).
BATCH_ENTRIES = 1 << 21


def design_call(design: str, *, sample_size=None, initial_size=None, max_size=None, n_users=None,
                n_items=None) -> str:
    """The :func:`sampled_ranks` call that runs a design, as text (what ``plan`` prints), e.g.
    ``sampled_ranks(score, users, targets, exclude=exclude, n_items=1000, design="adaptive",
    initial_size=100, max_size=3200)``."""
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {DESIGNS}, got {design!r}")
    parts = ["score", "users", "targets", "exclude=exclude", f"n_items={n_items if n_items is not None else 'N'}",
             f'design="{design}"']
    if design == "fixed":
        parts.append(f"sample_size={int(sample_size)}")
    elif design == "adaptive":
        parts += [f"initial_size={int(initial_size)}", f"max_size={int(max_size)}"]
    if n_users is not None:
        parts += [f"n_users={int(n_users)}", "rng=seed"]
    elif design != "full":
        parts.append("rng=seed")
    return f"sampled_ranks({', '.join(parts)})"


def _int_ids(values, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-d array of integer ids, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty")
    if arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold integer ids, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if arr.min() < 0:
        row = int(np.flatnonzero(arr < 0)[0])
        raise ValueError(f"{name} must be >= 0, got {arr[row]} (row {row})")
    return arr


def _check_exclude(exclude, n_items: int, users: np.ndarray):
    """``exclude`` as a CSR matrix whose stored entries are exactly the excluded (user, item) pairs."""
    if exclude is None:
        return None
    if not sp.issparse(exclude):
        raise ValueError(f"exclude must be a scipy.sparse matrix (users x n_items, non-zero = not a candidate) "
                         f"or None, got {type(exclude).__name__}")
    if exclude.ndim != 2 or exclude.shape[1] != n_items:
        raise ValueError(f"exclude must have n_items = {n_items} columns, got shape {exclude.shape}")
    if exclude.shape[0] <= users.max():
        row = int(np.flatnonzero(users >= exclude.shape[0])[0])
        raise ValueError(f"exclude must have a row for every user: it has {exclude.shape[0]} rows, users has "
                         f"{users[row]} (row {row})")
    if exclude.dtype.kind not in "biuf":
        raise ValueError(f"exclude must hold numbers or booleans, got dtype {exclude.dtype}")
    X = sp.csr_matrix(exclude, copy=True)
    X.sum_duplicates()
    X.eliminate_zeros()
    X.sort_indices()
    return X


class _Scorer:
    """Calls ``score`` on one batch, checks what it returns and keeps the count and the time."""

    def __init__(self, score, name=None):
        what = "score" if name is None else f"score[{name!r}]"
        if not callable(score):
            raise ValueError(f"{what} must be a function score(users, items) -> scores, got {type(score).__name__}")
        self.score = score
        self.what = what
        self.scorings = 0
        self.seconds = 0.0

    def __call__(self, rows: np.ndarray, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        t0 = time.perf_counter()
        out = self.score(users, items)
        self.seconds += time.perf_counter() - t0
        self.scorings += items.size
        s = np.asarray(out)
        what = f"{self.what}(users, items) for rows {rows[0]}..{rows[-1]}"
        if s.shape != items.shape:
            raise ValueError(f"{self.what} must return an array of shape (len(users), k) = {items.shape}, got shape "
                             f"{s.shape} ({what})")
        if s.dtype.kind not in "fiu":
            raise ValueError(f"{self.what} must return real numbers, got dtype {s.dtype} ({what})")
        if s.dtype.kind == "f":
            bad = np.isnan(s)
            if bad.any():
                b, j = np.unravel_index(int(np.argmax(bad)), s.shape)
                raise ValueError(f"{self.what} returned NaN for row {rows[b]} (user {users[b]}, item {items[b, j]}); "
                                 "scores must be numbers (ties and +-inf are allowed)")
        return s


def _scorers(score) -> tuple[list, list | None]:
    """One :class:`_Scorer` per model: ``score`` a function (one model, no name) or a non-empty mapping
    ``name -> function`` (several models, evaluated on the same decoys)."""
    if isinstance(score, Mapping):
        if not score:
            raise ValueError("score must be a function or a non-empty dict {model name: function}, got an empty dict")
        names = []
        for name in score:
            if not isinstance(name, str) or not name.strip() or name != name.strip():
                raise ValueError(f"score's model names must be non-empty strings without surrounding blanks (they fill "
                                 f"the table's model column), got {name!r}")
            names.append(name)
        return [_Scorer(score[n], n) for n in names], names
    return [_Scorer(score)], None


def _batches(n_rows: int, width: int):
    step = max(1, BATCH_ENTRIES // max(int(width), 1))
    for lo in range(0, n_rows, step):
        yield lo, min(lo + step, n_rows)


#: Rows whose pool (less the target) holds at least this share of the catalogue draw their decoys by
#: rejection against a dense mask; the others by the exact position map (both exact, see :func:`_decoys`).
_REJECTION_SHARE = 0.5
#: Bytes of the dense mask of excluded items built at once by the rejection draw (rows x N booleans).
_MASK_BYTES = 1 << 22


def _decoys_by_position(gen, X, n_items: int, users, targets, pools, k: int) -> np.ndarray:
    r"""Position :math:`j \sim U\{0..N_u - 2\}`, mapped to the :math:`j`-th allowed item: with the row's
    removed items :math:`e_0 < e_1 < \dots` (excluded items and the target), it is
    :math:`j + |\{p : e_p - p \le j\}|` (:math:`e_p - p` allowed items lie below :math:`e_p`); one
    ``searchsorted`` over the batch, rows kept apart by an offset of :math:`N + 1` per row."""
    b = users.size
    j = gen.integers(0, (pools - 1)[:, None], size=(b, k), dtype=np.int64)
    sub = X[users]
    counts = np.diff(sub.indptr)
    row = np.repeat(np.arange(b, dtype=np.int64), counts)
    keys = np.concatenate([row * n_items + sub.indices, np.arange(b, dtype=np.int64) * n_items + targets])
    keys.sort()
    row = keys // n_items
    col = keys - row * n_items
    start = np.concatenate([[0], np.cumsum(counts + 1)[:-1]])
    adj = col - (np.arange(keys.size) - start[row])  # allowed items below e_p
    offset = np.arange(b, dtype=np.int64)[:, None] * (n_items + 1)
    above = np.searchsorted(row * (n_items + 1) + adj, (j + offset).ravel(), side="right").reshape(b, k)
    j += above - start[:, None]
    return j


def _decoys_by_rejection(gen, X, n_items: int, users, targets, k: int) -> np.ndarray:
    """Uniform items of the catalogue, each redrawn while it is excluded or the target (a uniform draw
    conditioned on the pool less the target is uniform on it); the rows in chunks whose dense mask of
    removed items takes at most ``_MASK_BYTES``. For rows whose pool is at least half the catalogue, so
    that each round at least halves the draws left."""
    b = users.size
    out = np.empty((b, k), dtype=np.int64)
    step = min(b, max(1, _MASK_BYTES // n_items))
    mask = np.zeros(step * n_items, dtype=bool)  # reused: each chunk sets its entries and clears them after
    for lo in range(0, b, step):
        hi = min(lo + step, b)
        c = hi - lo
        sub = X[users[lo:hi]]
        base = np.arange(c, dtype=np.int64) * n_items
        removed = np.concatenate([np.repeat(base, np.diff(sub.indptr)) + sub.indices, base + targets[lo:hi]])
        mask[removed] = True
        x = gen.integers(0, n_items, size=(c, k), dtype=np.int64)
        flat = x.ravel()
        bad = np.flatnonzero(mask[(x + base[:, None]).ravel()])
        while bad.size:
            flat[bad] = gen.integers(0, n_items, size=bad.size, dtype=np.int64)
            bad = bad[mask[flat[bad] + base[bad // k]]]
        mask[removed] = False
        out[lo:hi] = x
    return out


def _decoys(gen, X, n_items: int, users: np.ndarray, targets: np.ndarray, pools: np.ndarray, k: int) -> np.ndarray:
    """``k`` decoys per row, uniform with replacement over the row's pool less its target. Without
    ``exclude``: a position j in 0..N - 2, shifted past the target. With it: rows whose pool less the
    target holds at least half the catalogue by rejection (:func:`_decoys_by_rejection`, cheaper), the
    others by the position map (:func:`_decoys_by_position`); both exact."""
    if X is None:
        j = gen.integers(0, (pools - 1)[:, None], size=(users.size, k), dtype=np.int64)
        j += j >= targets[:, None]
        return j
    dense = (pools - 1) >= _REJECTION_SHARE * n_items
    if dense.all():
        return _decoys_by_rejection(gen, X, n_items, users, targets, k)
    if not dense.any():
        return _decoys_by_position(gen, X, n_items, users, targets, pools, k)
    out = np.empty((users.size, k), dtype=np.int64)
    d, p = np.flatnonzero(dense), np.flatnonzero(~dense)
    out[d] = _decoys_by_rejection(gen, X, n_items, users[d], targets[d], k)
    out[p] = _decoys_by_position(gen, X, n_items, users[p], targets[p], pools[p], k)
    return out


def _progress(total: int, desc: str):
    # deferred: tqdm is needed only for a run long enough to show a bar; the plain text bar (not tqdm.auto's
    # widget) goes to stderr and is off when stderr is not a terminal, so no frozen bar reaches a book page
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="rows", delay=2.0, disable=None, leave=False)


def _check_decoys(decoys, users: np.ndarray, targets: np.ndarray, X, n_items: int) -> np.ndarray:
    """A given decoy set: an integer array ``(rows, w)``, ``w >= 1``, of items ``0..n_items - 1`` that are
    neither the row's target nor excluded for the row's user; refused naming the row and the column."""
    D = np.asarray(decoys)
    if D.ndim != 2 or D.shape[0] != users.size or D.shape[1] < 1:
        raise ValueError(f"decoys must be an array of shape (len(users), n - 1) = ({users.size}, n - 1) with at least "
                         f"one column, got shape {D.shape}")
    if D.dtype.kind not in "iu":
        raise ValueError(f"decoys must hold integer item ids, got dtype {D.dtype}")
    D = D.astype(np.int64)
    bad = (D < 0) | (D >= n_items)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise ValueError(f"decoys must lie in 0..n_items - 1 = {n_items - 1}, got {D[r, c]} (row {r}, column {c})")
    bad = D == targets[:, None]
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise ValueError(f"decoys must not hold the row's target: row {r} (user {users[r]}) has its target {targets[r]} "
                         f"in column {c}")
    if X is not None:
        w = D.shape[1]
        for lo, hi in _batches(users.size, w):
            sub = X[users[lo:hi]]
            b = hi - lo
            keys = np.repeat(np.arange(b, dtype=np.int64), np.diff(sub.indptr)) * n_items + sub.indices
            probe = (np.arange(b, dtype=np.int64)[:, None] * n_items + D[lo:hi]).ravel()
            hit = np.isin(probe, keys)
            if hit.any():
                r, c = divmod(int(np.argmax(hit)), w)
                raise ValueError(f"decoys must come from the row's pool: row {lo + r} (user {users[lo + r]}) has the "
                                 f"excluded item {D[lo + r, c]} in column {c}")
    return D


def _repeats(D: np.ndarray) -> np.ndarray:
    """Rows of ``D`` that hold some item twice."""
    S = np.sort(D, axis=1)
    return np.flatnonzero(np.any(S[:, 1:] == S[:, :-1], axis=1))


#: What ``attrs["decoys"]`` says of the decoys' law.
DECOY_LAWS = {
    "drawn": "drawn: uniform with replacement over each row's pool less its target",
    "given_with": "given: uniform with replacement over each row's pool less its target (as stated or as its repeats "
                  "show)",
    "given_without": "given: uniform without replacement over each row's pool less its target (no row repeats a "
                     "decoy): the hypergeometric kernel",
    "none": "none: full ranking",
}


def sampled_ranks(score, users, targets, *, exclude=None, n_items, design="fixed", sample_size=None,
                  initial_size=100, max_size=3200, n_users=None, rng=None, decoys=None, replacement=None,
                  return_decoys=False):
    r"""Sampled ranks of held-out items under a reader's model(s), by one evaluation design (module docstring).

    Parameters
    ----------
    score : callable, or dict ``{model name: callable}``
        ``score(users, items) -> scores``: ``users`` an int64 array ``(m,)``, ``items`` an int64 array
        ``(m, k)`` (row :math:`b` holds items for user ``users[b]``), returns a real array ``(m, k)``,
        larger = better. Called in batches of at most :data:`BATCH_ENTRIES` pairs; it must score an item
        the same whichever batch or column it comes in (the adaptive design keeps the target's score).
        A dict evaluates several models **on the same decoys** (common random numbers): every model ranks
        each row's target against the same decoys (fixed design), the same decoy sequence of which it
        consumes the prefix its stopping rule asks for (adaptive design), the same sampled users
        (``n_users``); the table then has a ``model`` column, and two models' rows are paired by
        ``(user, item)`` (module docstring, "Several models"). :mod:`itemsampling.adapters` turns a fitted
        model of ``implicit``, Cornac, LensKit or RecBole into such a function.
    users, targets : arrays of int, same length
        One held-out item per row: the user and the target item (``0..n_items - 1``). A user may have
        several rows.
    exclude : scipy.sparse matrix or None
        ``users x n_items``, non-zero = not a candidate for that user (e.g. training items and the user's
        other test items); ``None``: every item is a candidate. A row's target must not be excluded.
    n_items : int
        Catalogue size :math:`N \ge 2`; a row's pool is :math:`N_u = N - |\mathrm{exclude}_u|` (target included).
    design : ``"fixed"``, ``"adaptive"`` or ``"full"``
    sample_size : int or None
        ``"fixed"``: :math:`n`, the sampled set including the target (:math:`2 \le n \le N_u` for every row);
        ``None``: 100, or one more than the columns of ``decoys``.
    initial_size, max_size : int
        ``"adaptive"``: :math:`n_0 \ge 2` and :math:`n_{max} = n_0 2^j \le N_u` for every row.
    n_users : int or None
        Evaluate a uniform random sample of this many distinct users (without replacement), all their
        rows; with ``"full"`` this is user sampling. ``None``: every row. The table then has a
        ``test_users`` column, the number of distinct users sampled from, which ``estimate --target
        test-users`` reads (the interval is for all of them, the user sampling's error included).
    rng : seed or Generator
        The users' sample and the decoys; the same seed gives the same table.
    decoys : integer array ``(len(users), w)`` or None
        Rank against these decoys instead of drawing them (frozen or published decoys, e.g. read by
        :func:`itemsampling.data.read_decoys`): row :math:`i`'s items, none its target or excluded.
        ``"fixed"``: :math:`w = n - 1`; ``"adaptive"``: :math:`w \ge n_{max} - 1`, each model consuming the
        prefix its stopping rule asks for (stage :math:`j` the next :math:`n_j / 2` columns). Not with
        ``"full"``.
    replacement : bool or None
        The law of the given ``decoys``: ``True`` uniform with replacement over the pool less the target (the
        law this function draws), ``False`` uniform without replacement (the hypergeometric kernel:
        ``estimate --without-replacement``; fixed design only, since the adaptive stages' kernel is then not
        the fixed-size one); ``None``: ``True`` if some row repeats a decoy, else ``False``. Without
        ``decoys`` only ``None`` or ``True``.
    return_decoys : bool
        Also return the decoys, an int64 array aligned with one model's rows of the table: ``(rows, n - 1)``
        (fixed) or ``(rows, n_max - 1)`` (adaptive: every row's whole sequence is then drawn, which costs
        :math:`n_{max} - 1` draws and 8 bytes each a row); pass it back as ``decoys`` to rank another model
        against them in a later run. Not with ``"full"``.

    Returns
    -------
    pandas.DataFrame, or ``(table, decoys)`` with ``return_decoys``
        One row per evaluated row (per model), in the input order, indexed by the input row number:
        ``[model,] user, item, rank, sample_size, n_items`` (int64; ``model`` the dict's names, the models
        one after the other; ``n_items`` the row's pool :math:`N_u`, ``sample_size`` :math:`n` / :math:`n_u` /
        :math:`N_u`), and a boolean column ``replacement`` (all ``False``) when the given decoys were drawn
        without replacement. ``attrs`` holds only numbers and text, so that tables concatenate with
        ``pd.concat`` (which keeps the attributes where every table has the same and drops them otherwise):
        ``"design"``, ``"call"`` (the call that runs it again), ``"decoys"`` (their law, :data:`DECOY_LAWS`),
        ``"replacement"`` (bool), ``"models"`` (how many), ``"scorings"`` (item scorings, all models),
        ``"seconds"`` and ``"score_seconds"``.

    Raises ``ValueError`` naming the argument (and the row) for a non-callable ``score``, a score of the
    wrong shape, of a non-real dtype or with NaN, users or targets that are not integer ids, of different
    lengths or out of range, an excluded target, an ``exclude`` that is not a sparse ``users x n_items``
    matrix, a pool with fewer than two items or smaller than the sample (``sample_size``, ``max_size``), an
    unknown ``design``, bad sizes, ``n_users`` or ``rng``, and given ``decoys`` of the wrong shape, out of
    the row's pool, too few for the design or repeating an item when ``replacement=False``.
    """
    t_start = time.perf_counter()
    scorers, names = _scorers(score)
    N = check_int(n_items, "n_items", low=2)
    if not isinstance(design, str) or design not in DESIGNS:
        raise ValueError(f"design must be one of {DESIGNS}, got {design!r}")
    return_decoys = check_bool(return_decoys, "return_decoys")
    if replacement is not None:
        replacement = check_bool(replacement, "replacement")
    u_all = _int_ids(users, "users")
    t_all = _int_ids(targets, "targets")
    if t_all.size != u_all.size:
        raise ValueError(f"targets must have one item per row of users ({u_all.size} rows), got {t_all.size}")
    if t_all.max() >= N:
        row = int(np.flatnonzero(t_all >= N)[0])
        raise ValueError(f"targets must lie in 0..n_items - 1 = {N - 1}, got {t_all[row]} (row {row})")
    X = _check_exclude(exclude, N, u_all)
    if X is not None:
        hit = np.asarray(X[u_all, t_all]).ravel() != 0
        if hit.any():
            row = int(np.flatnonzero(hit)[0])
            raise ValueError(f"exclude must not exclude a row's target: row {row} (user {u_all[row]}) has its "
                             f"target {t_all[row]} excluded")
        pools_all = N - np.diff(X.indptr)[u_all].astype(np.int64)
    else:
        pools_all = np.full(u_all.size, N, dtype=np.int64)
    if pools_all.min() < 2:
        row = int(np.argmin(pools_all))
        raise ValueError(f"every row's pool needs the target and at least one other item: row {row} (user "
                         f"{u_all[row]}) has a pool of {pools_all[row]} item(s) (n_items minus its excluded items)")

    def refuse_small(size, name):
        if size > pools_all.min():
            row = int(np.argmin(pools_all))
            raise ValueError(f"{name} must be <= every row's pool N_u (n_items minus the excluded items); row "
                             f"{row} (user {u_all[row]}) has N_u = {pools_all[row]}, got {name} = {size}")

    D_all = None
    if design == "full" and (decoys is not None or return_decoys):
        raise ValueError("decoys and return_decoys apply to the fixed and adaptive designs; design \"full\" ranks "
                         "every item of the pool and draws no decoys")
    if decoys is None:
        if replacement is False:
            raise ValueError("replacement=False describes given decoys; the decoys this function draws are uniform "
                             "with replacement (leave replacement unset, or pass the decoys drawn without replacement "
                             "as decoys=)")
        law = "none" if design == "full" else "drawn"
        with_replacement = True
    else:
        D_all = _check_decoys(decoys, u_all, t_all, X, N)
        rep = _repeats(D_all)
        if replacement is False and rep.size:
            r = int(rep[0])
            raise ValueError(f"replacement=False (decoys drawn without replacement) but row {r} (user {u_all[r]}) "
                             "repeats a decoy; pass replacement=True if they were drawn with replacement")
        with_replacement = bool(rep.size) if replacement is None else replacement
        if not with_replacement:
            too_many = D_all.shape[1] > pools_all - 1
            if too_many.any():
                r = int(np.argmax(too_many))
                raise ValueError(f"decoys: row {r} (user {u_all[r]}) has {D_all.shape[1]} distinct decoys but only "
                                 f"{pools_all[r] - 1} pool items besides its target")
            if design == "adaptive":
                raise ValueError("decoys drawn without replacement (no row repeats a decoy) cannot run the adaptive "
                                 "design: its stages' kernel is the fixed-size one only with replacement (TORS Eq. 43); "
                                 "use design=\"fixed\", or pass replacement=True if they were drawn with replacement")
        law = "given_with" if with_replacement else "given_without"

    if design == "fixed":
        if sample_size is None:
            sample_size = 100 if D_all is None else D_all.shape[1] + 1
        n = check_int(sample_size, "sample_size", low=2, high=N)
        refuse_small(n, "sample_size")
        if D_all is not None and D_all.shape[1] != n - 1:
            raise ValueError(f"decoys must have sample_size - 1 = {n - 1} columns for the fixed design, got "
                             f"{D_all.shape[1]} (leave sample_size unset to take it from the decoys)")
        call = dict(sample_size=n)
    elif design == "adaptive":
        ladder = adaptive_sizes(initial_size, max_size, N)
        refuse_small(int(ladder[-1]), "max_size")
        if D_all is not None and D_all.shape[1] < int(ladder[-1]) - 1:
            raise ValueError(f"decoys must have at least max_size - 1 = {int(ladder[-1]) - 1} columns for the adaptive "
                             f"design (each row's sequence up to n_max), got {D_all.shape[1]}")
        call = dict(initial_size=int(ladder[0]), max_size=int(ladder[-1]))
    else:
        call = {}
    gen = as_rng(rng)
    rows = np.arange(u_all.size, dtype=np.int64)
    if n_users is not None:
        distinct = np.unique(u_all)
        m = check_int(n_users, "n_users", low=1, high=distinct.size)
        chosen = gen.choice(distinct, size=m, replace=False)
        rows = rows[np.isin(u_all, chosen)]
        call["n_users"] = m
    u, t, pools = u_all[rows], t_all[rows], pools_all[rows]
    D = None if D_all is None else D_all[rows]
    M, K = rows.size, len(scorers)
    ranks = np.empty((K, M), dtype=np.int64)
    sizes = np.empty((K, M), dtype=np.int64)
    drawn = None

    if design == "fixed":
        if return_decoys and D is None:
            drawn = np.empty((M, n - 1), dtype=np.int64)
        with _progress(M, "sampled_ranks fixed") as bar:
            for lo, hi in _batches(M, n):
                sl = slice(lo, hi)
                items = np.empty((hi - lo, n), dtype=np.int64)
                items[:, 0] = t[sl]
                items[:, 1:] = D[sl] if D is not None else _decoys(gen, X, N, u[sl], t[sl], pools[sl], n - 1)
                if drawn is not None:
                    drawn[sl] = items[:, 1:]
                for k, scorer in enumerate(scorers):
                    s = scorer(rows[sl], u[sl], items)
                    ranks[k, sl] = 1 + np.count_nonzero(s[:, 1:] > s[:, :1], axis=1)
                bar.update(hi - lo)
        sizes[:] = n
    elif design == "adaptive":
        n0, width = int(ladder[0]), int(ladder[-1]) - 1
        if return_decoys and D is None:  # every row's whole sequence, drawn once, so that it can be given back
            D = drawn = np.empty((M, width), dtype=np.int64)
            for lo, hi in _batches(M, width):
                D[lo:hi] = _decoys(gen, X, N, u[lo:hi], t[lo:hi], pools[lo:hi], width)

        def stage(a, start, count):
            """Decoys ``start..start + count - 1`` of rows ``a``'s sequences: read, or drawn now (uniform, fresh)."""
            if D is not None:
                return D[a, start:start + count]
            return _decoys(gen, X, N, u[a], t[a], pools[a], count)

        target_score = [None] * K
        with _progress(M, f"sampled_ranks adaptive, n = {n0}") as bar:
            for lo, hi in _batches(M, n0):
                sl = slice(lo, hi)
                items = np.empty((hi - lo, n0), dtype=np.int64)
                items[:, 0] = t[sl]
                items[:, 1:] = stage(np.arange(lo, hi), 0, n0 - 1)
                for k, scorer in enumerate(scorers):
                    s = scorer(rows[sl], u[sl], items)
                    if target_score[k] is None:
                        target_score[k] = np.empty(M, dtype=s.dtype)
                    target_score[k][sl] = s[:, 0]
                    ranks[k, sl] = 1 + np.count_nonzero(s[:, 1:] > s[:, :1], axis=1)
                bar.update(hi - lo)
        sizes[:] = n0
        active = ranks == 1  # (model, row): the target ranks first so far
        start = n0 - 1
        for size in ladder[1:]:
            union = np.flatnonzero(active.any(axis=0))  # rows some model still asks decoys for
            if union.size == 0:
                break
            extra = int(size // 2)  # n_u extra decoys double the set from n_u to 2 n_u (Algorithm 1, line 5)
            with _progress(union.size, f"sampled_ranks adaptive, n = {int(size)}") as bar:
                for lo, hi in _batches(union.size, extra):
                    a = union[lo:hi]
                    items = stage(a, start, extra)  # the same decoys for every model still on these rows
                    for k, scorer in enumerate(scorers):
                        on = active[k, a]
                        if not on.any():
                            continue
                        ak = a[on]
                        s = scorer(rows[ak], u[ak], items if on.all() else items[on])
                        above = np.count_nonzero(s > target_score[k][ak][:, None], axis=1)
                        ranks[k, ak] = above + 1
                        sizes[k, ak] = size
                        active[k, ak[above > 0]] = False
                    bar.update(hi - lo)
            start += extra
    else:
        with _progress(M, "sampled_ranks full") as bar:
            for lo, hi in _batches(M, N):
                sl = slice(lo, hi)
                b = hi - lo
                items = np.broadcast_to(np.arange(N, dtype=np.int64), (b, N))
                sub = X[u[sl]] if X is not None else None
                for k, scorer in enumerate(scorers):
                    s = scorer(rows[sl], u[sl], items)
                    tgt = s[np.arange(b), t[sl]]
                    greater = np.count_nonzero(s > tgt[:, None], axis=1)
                    if sub is not None:  # the excluded items that score above the target leave the count
                        r_idx = np.repeat(np.arange(b), np.diff(sub.indptr))
                        greater -= np.bincount(r_idx[s[r_idx, sub.indices] > tgt[r_idx]], minlength=b)
                    ranks[k, sl] = 1 + greater
                bar.update(b)
        sizes[:] = pools
    columns = {"user": np.tile(u, K), "item": np.tile(t, K), "rank": ranks.ravel(), "sample_size": sizes.ravel(),
               "n_items": np.tile(pools, K)}
    if names is not None:
        columns = {"model": np.repeat(np.array(names, dtype=object), M), **columns}
    if not with_replacement:
        columns["replacement"] = np.zeros(K * M, dtype=bool)
    if n_users is not None:  # the number of test users the sample was drawn from (estimate --target test-users)
        columns["test_users"] = np.full(K * M, int(np.unique(u_all).size), dtype=np.int64)
    table = pd.DataFrame(columns, index=pd.Index(np.tile(rows, K), name="row"))
    table.attrs.update({
        "design": design,
        "call": design_call(design, n_items=N, **call),
        "decoys": DECOY_LAWS[law],
        "replacement": bool(with_replacement),
        "models": K,
        "scorings": int(sum(sc.scorings for sc in scorers)),
        "seconds": time.perf_counter() - t_start,
        "score_seconds": float(sum(sc.seconds for sc in scorers)),
    })
    if return_decoys:
        return table, (drawn if drawn is not None else D.copy())
    return table
