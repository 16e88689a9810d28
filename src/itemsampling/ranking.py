r"""Global ranks :math:`R_u` of held-out items, and sampled ranks from explicit decoy draws.

Convention (Krichene & Rendle 2020, Sec. 6.1; Li et al. 2020's "actual" setting): with
``exclude_train=True`` a user's held-out item is ranked among the items **not in that user's
training set**, a pool of :math:`N_u = N - |H_u \setminus \{t_u\}|` items (:math:`H_u` the user's
training items, :math:`t_u` the target), so :math:`R_u \in 1..N_u`. With ``exclude_train=False``
it is ranked among all :math:`N` items (the other :math:`N-1` compete), :math:`R_u \in 1..N`.
Ties are broken uniformly at random (a random permutation of the tied items): with :math:`g`
items scoring strictly higher and :math:`e` other items scoring equal,
:math:`R_u = 1 + g + \mathrm{Uniform}\{0..e\}`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ._validation import as_rng, check_bool, check_int, check_memory
from .models import Recommender, interaction_matrix

__all__ = ["global_ranks", "pool_sizes", "sampled_ranks_explicit", "shared_decoy_ranks"]


def _check_inputs(model, train, test):
    if not isinstance(model, Recommender):
        raise ValueError(f"model must be an itemsampling.models recommender, got {type(model).__name__}")
    if not getattr(model, "fitted_", False):
        raise ValueError(f"{type(model).__name__} is not fitted: call fit(train) before ranking")
    for nm, df in (("train", train), ("test", test)):
        if not isinstance(df, pd.DataFrame) or not {"user", "item"} <= set(df.columns):
            raise ValueError(f"{nm} must be a DataFrame with columns user, item")
        for c in ("user", "item"):
            if len(df) and df[c].dtype.kind not in "iu":
                raise ValueError(f"{nm}[{c!r}] must hold integer ids, got dtype {df[c].dtype}")
    if len(test) == 0:
        raise ValueError("test must not be empty")
    N = model.n_items_
    tu = test["user"].to_numpy(np.int64)
    ti = test["item"].to_numpy(np.int64)
    if ti.min() < 0 or ti.max() >= N:
        raise ValueError(f"test items must lie in the model's catalog 0..{N - 1}")
    if tu.min() < 0 or tu.max() >= model.n_users_:
        raise ValueError(f"test users must lie in 0..{model.n_users_ - 1}")
    return tu, ti, N


def _train_csr(train, n_users, n_items):
    return interaction_matrix(train, n_users, n_items)


def _above_target_batches(model, X, tu, ti, batch_size, gen):
    """Score the users ``tu`` in batches of ``batch_size`` and yield, per batch,
    ``(start, rows, targets, blocked, above)``: ``blocked`` marks each user's training items (the
    target left unblocked), ``above`` the pool items scored above the target, ties broken by one
    uniform draw per item from ``gen`` (the target never counts). The caller may draw more from
    ``gen`` before asking for the next batch; the stream is then that of the caller's loop."""
    for s in range(0, tu.size, batch_size):
        u, t = tu[s:s + batch_size], ti[s:s + batch_size]
        b = np.arange(u.size)
        S = model.score(u)
        blocked = X[u].toarray() > 0
        blocked[b, t] = False
        tie = gen.random(S.shape)
        above = (S > S[b, t][:, None]) | ((S == S[b, t][:, None]) & (tie < tie[b, t][:, None]))
        above[b, t] = False
        above &= ~blocked
        yield s, b, t, blocked, above


def _take_training_off(above: np.ndarray, tied: np.ndarray, scores, target: np.ndarray, train_rows,
                       targets: np.ndarray) -> np.ndarray:
    """Take each user's training items (the items of its row of the CSR ``train_rows`` other than its
    target ``targets``) out of the counts of items scoring above (``above``) and tied with
    (``tied``) the target's score ``target``, in place: the same counts as masking the training
    items out of the comparison, without writing into the scores. ``scores`` is the users' score
    matrix (rows x N) or a function ``scores(rows, cols)`` of the gathered training items. Returns
    the number of training items taken off each row (each pair counted once: the CSR holds it
    once)."""
    h = train_rows.shape[0]
    r_idx = np.repeat(np.arange(h), np.diff(train_rows.indptr))
    c_idx = train_rows.indices
    keep = c_idx != targets[r_idx]  # the target stays in its own pool
    r_k, c_k = r_idx[keep], c_idx[keep]
    v = scores(r_k, c_k) if callable(scores) else scores[r_k, c_k]
    tv = target[r_k]
    above -= np.bincount(r_k[v > tv], minlength=h)
    tied -= np.bincount(r_k[v == tv], minlength=h)
    return np.bincount(r_k, minlength=h)


def pool_sizes(train: pd.DataFrame, test: pd.DataFrame, n_items: int, exclude_train: bool = True) -> np.ndarray:
    r"""Size of each test row's candidate pool: :math:`N_u = N - |H_u \setminus \{t_u\}|` with
    ``exclude_train`` (training items other than the target removed), else :math:`N`."""
    n_items = check_int(n_items, "n_items", low=1)
    exclude_train = check_bool(exclude_train, "exclude_train")
    for nm, df in (("train", train), ("test", test)):
        if not isinstance(df, pd.DataFrame) or not {"user", "item"} <= set(df.columns):
            raise ValueError(f"{nm} must be a DataFrame with columns user, item")
    if len(test) == 0:
        raise ValueError("test must not be empty")
    for nm, df in (("train", train), ("test", test)):
        for c in ("user", "item"):
            if len(df) and (df[c].dtype.kind not in "iu" or df[c].min() < 0):
                raise ValueError(f"{nm}[{c!r}] must hold integer ids >= 0")
    tu = test["user"].to_numpy(np.int64)
    ti = test["item"].to_numpy(np.int64)
    for nm, df in (("train", train), ("test", test)):
        if len(df) and int(df["item"].max()) >= n_items:
            raise ValueError(f"{nm} items must lie in 0..n_items - 1 = {n_items - 1}, got {int(df['item'].max())}")
    if not exclude_train:
        return np.full(tu.size, n_items, dtype=np.int64)
    n_users = int(max(tu.max(), train["user"].max() if len(train) else 0)) + 1
    X = _train_csr(train, n_users, n_items)
    h = np.diff(X.indptr)[tu]
    target_in_train = np.asarray(X[tu, ti]).ravel() > 0
    return (n_items - h + target_in_train).astype(np.int64)


def global_ranks(model, train: pd.DataFrame, test: pd.DataFrame, exclude_train: bool = True, rng=None,
                 batch_size: int = 1024, return_pool: bool = False):
    r"""1-based rank :math:`R` of each held-out item (one per row of ``test``, aligned with its
    rows) under ``model``'s scores.

    Parameters
    ----------
    model : a fitted :mod:`itemsampling.models` recommender.
    train, test : DataFrames with ``user, item``; ``test`` may hold several rows per user.
    exclude_train : rank among the items outside the user's training set (the usual pool; the
        target itself stays even if it also appears in train), else among all ``N`` items.
    rng : seed or Generator for the random tie-breaking.
    batch_size : users scored at once (memory is ``batch_size x N`` floats).
    return_pool : also return the pool sizes :math:`N_u` (see :func:`pool_sizes`).

    Returns
    -------
    ``int64`` array of ranks in ``1..N_u`` (and the pool sizes if ``return_pool``).

    Raises ``ValueError`` if the model is not fitted, ids lie outside the catalog, a test user has
    no training interactions, or the model returns non-finite scores.
    """
    tu, ti, N = _check_inputs(model, train, test)
    batch_size = check_int(batch_size, "batch_size", low=1)
    exclude_train = check_bool(exclude_train, "exclude_train")
    return_pool = check_bool(return_pool, "return_pool")
    # scores, two boolean masks and the comparison temporaries of one batch
    check_memory(float(min(batch_size, tu.size)) * N * 8 * 3, f"scoring a batch of {min(batch_size, tu.size)} "
                 f"users x {N} items", "batch_size")
    gen = as_rng(rng)
    X = _train_csr(train, model.n_users_, N)
    prof = np.diff(X.indptr)
    empty = np.unique(tu[prof[tu] == 0])
    if empty.size:
        raise ValueError(f"{empty.size} test user(s) have no training interactions (e.g. user "
                         f"{empty[:5].tolist()}); drop them or use a split that keeps one in train")
    ranks = np.empty(tu.size, dtype=np.int64)
    pools = np.empty(tu.size, dtype=np.int64)
    order = np.argsort(tu, kind="stable")
    for s in range(0, order.size, batch_size):
        rows = order[s:s + batch_size]
        u, t = tu[rows], ti[rows]
        uniq, inv = np.unique(u, return_inverse=True)
        scores = model.score(uniq)  # (b, N)
        if uniq.size != rows.size:  # several test rows of one user: their user's scores, repeated
            scores = scores[inv]
        if not np.all(np.isfinite(scores)):
            raise ValueError(f"{type(model).__name__} returned non-finite scores")
        b = np.arange(rows.size)
        target = scores[b, t]
        # items above / tied with the target over the whole catalogue, then the user's training items among
        # them taken off (each counted once: the matrix holds each pair once); the same counts as masking the
        # training items out of the comparison matrices, without writing into them
        g = np.count_nonzero(scores > target[:, None], axis=1)
        e = np.count_nonzero(scores == target[:, None], axis=1)
        if exclude_train:
            pools[rows] = N - _take_training_off(g, e, scores, target, X[u], t)
        else:
            pools[rows] = N
        e -= 1  # other items tied with the target
        ranks[rows] = 1 + g + gen.integers(0, e + 1)
    return (ranks, pools) if return_pool else ranks


def sampled_ranks_explicit(model, train: pd.DataFrame, test: pd.DataFrame, sample_size: int, rng=None,
                           exclude_train: bool = True, replacement: bool = True,
                           batch_size: int = 1024) -> np.ndarray:
    r"""Sampled ranks :math:`r_u \in 1..n` from explicit decoy draws scored by the model: for each
    test row, draw :math:`n-1` decoys uniformly from the user's pool (the items outside the
    training set other than the target with ``exclude_train``, else the :math:`N-1` other items),
    with or without replacement, score only those :math:`n` items with
    ``model.score_items`` and rank the target among them (ties at random).

    This is the procedure whose distribution the kernel :math:`P(r \mid R)` of
    :mod:`itemsampling.kernel` describes, with :math:`N` replaced by the pool size :math:`N_u`
    (with replacement: :math:`r-1 \sim \mathrm{Binomial}(n-1, (R_u-1)/(N_u-1))`)."""
    tu, ti, N = _check_inputs(model, train, test)
    gen = as_rng(rng)
    exclude_train = check_bool(exclude_train, "exclude_train")
    replacement = check_bool(replacement, "replacement")
    X = _train_csr(train, model.n_users_, N)
    pools = pool_sizes(train, test, N, exclude_train)
    sample_size = check_int(sample_size, "sample_size", low=2, high=N)
    batch_size = check_int(batch_size, "batch_size", low=1)
    check_memory(float(min(batch_size, tu.size)) * N * 8 * 3, f"drawing decoys for a batch of "
                 f"{min(batch_size, tu.size)} users x {N} items", "batch_size")
    if pools.min() < 2:
        raise ValueError("every test user needs at least one candidate decoy")
    if sample_size > pools.min():
        # with or without replacement: the kernel needs n <= N_u, and a rank above the pool is meaningless
        worst = int(np.argmin(pools))
        raise ValueError(f"sample_size must be <= every user's pool N_u (the target and its candidate decoys); "
                         f"test row {worst} (user {int(tu[worst])}) has N_u = {int(pools[worst])}, got {sample_size}")
    m = sample_size - 1
    out = np.empty(tu.size, dtype=np.int64)
    for s in range(0, tu.size, batch_size):
        rows = np.arange(s, min(s + batch_size, tu.size))
        b = rows.size
        allowed = np.ones((b, N), dtype=bool)  # each row's pool of candidate decoys
        if exclude_train:
            sub = X[tu[rows]]
            allowed[np.repeat(np.arange(b), np.diff(sub.indptr)), sub.indices] = False
        allowed[np.arange(b), ti[rows]] = False
        if replacement:
            # the j-th allowed item of a row, j uniform: invert the row-wise cumulative count
            size = allowed.sum(axis=1)
            j = np.floor(gen.random((b, m)) * size[:, None]).astype(np.int64)
            cs = np.cumsum(allowed, axis=1) + (np.arange(b) * (N + 1))[:, None]
            flat = np.searchsorted(cs.ravel(), (j + 1 + (np.arange(b) * (N + 1))[:, None]).ravel())
            decoys = (flat - np.repeat(np.arange(b) * N, m)).reshape(b, m)
        else:
            # uniform random keys; the m smallest keys among allowed items are a uniform draw
            keys = gen.random((b, N))
            keys[~allowed] = np.inf
            decoys = np.argpartition(keys, m - 1, axis=1)[:, :m]
        items = np.concatenate([ti[rows, None], decoys], axis=1)
        scores = model.score_items(tu[rows], items)
        target = scores[:, :1]
        g = (scores[:, 1:] > target).sum(axis=1)
        e = (scores[:, 1:] == target).sum(axis=1)
        out[rows] = 1 + g + gen.integers(0, e + 1)
    return out


def shared_decoy_ranks(models, train: pd.DataFrame, test: pd.DataFrame, sample_size: int, rng=None,
                       replacement: bool = True, repeats: int | None = None, batch_size: int = 512,
                       return_global: bool = False):
    r"""Sampled ranks of several models on **one shared list of uniform decoys per test row**.

    The usual protocol of sampled evaluation draws the decoys once and scores every model on them:
    Krichene & Rendle (2020, Sec. 4.2) describe it as ":math:`m = 99` random irrelevant items are
    sampled, the position :math:`\tilde{r}` of the relevant item among this sampled subset is found,
    and then the metrics are computed for the rank :math:`\tilde{r}` within the subsample", and the leave-one-out
    files of He et al. (2017; :func:`itemsampling.data.load_ncf`) fix one list of 99 decoys per
    user for every model; TORS (Li et al. 2024, Sec. 2.1) writes the sampled set
    :math:`I_u = \{i \sim I \setminus i_u\} \cup \{i_u\}`, :math:`|I_u| = n`, one per user.

    For each row :math:`u` of ``test`` (user, target :math:`t_u`) one list :math:`D_u` of
    :math:`n-1` decoys is drawn uniformly from the user's pool other than the target: the
    :math:`N_u - 1` items outside the user's training set (the target stays in the pool even if it
    also appears in ``train``), the pool of :func:`global_ranks` with ``exclude_train=True`` and
    :func:`pool_sizes`; with replacement (independent uniform draws) or without (a uniform subset).
    Every model ranks :math:`t_u` among :math:`D_u \cup \{t_u\}`:
    :math:`r^{(k)}_u = 1 + |\{d \in D_u : d \text{ above } t_u \text{ for model } k\}|`, counting a
    decoy drawn twice twice. The scores and the masks of the pool items above the target come from
    the package's one batch loop of scores (also behind :func:`itemsampling.candidates.target_ranks`;
    ties broken by one uniform permutation per model and row), and the global rank :math:`R^{(k)}_u = 1 + |\{\text{pool items above } t_u\}|`
    uses the same tie-break, so that given :math:`R^{(k)}_u` each model's sampled rank has exactly
    the law of :func:`itemsampling.sampling.sample_ranks` with the user's pool as the catalogue
    (:func:`itemsampling.experiments.sample_pool_ranks`): :math:`r - 1 \sim
    \mathrm{Binomial}(n-1, (R_u-1)/(N_u-1))` with replacement, :math:`\mathrm{Hypergeometric}(N_u-1,
    R_u-1, n-1)` without. What sharing changes is the *joint* law: two models' ranks are dependent
    (e.g. for :math:`n = 2`, :math:`P(r^{(A)} = r^{(B)} = 2 \mid R) = |\mathrm{above}_A \cap
    \mathrm{above}_B| / (N_u - 1)`, not the product of the two margins), which is what a paired
    comparison of the models exploits.

    Parameters
    ----------
    models : mapping ``name -> fitted`` :mod:`itemsampling.models` recommender (at least one), all
        fitted on the same catalogue and users (``train``).
    train, test : DataFrames with ``user, item`` (as :func:`global_ranks`); one decoy list per row
        of ``test``.
    sample_size : :math:`n`, the sampled set including the target, :math:`2 \le n \le N_u` for every row.
    rng : seed or Generator. The stream is consumed batch by batch (each model's tie-break draws,
        then the decoys of every repeat), so the result depends on ``rng`` and ``batch_size``.
    replacement : decoys with replacement (default, as :func:`itemsampling.sampling.sample_ranks`) or without.
    repeats : ``None`` (one list per row) or the number of independent shared lists per row, drawn
        from the same scores (one scoring pass for all repeats).
    batch_size : rows scored at once (memory about ``len(models) * batch_size * N * 18`` bytes).
    return_global : also return the global ranks (same tie-breaks) and the pool sizes :math:`N_u`.

    Returns
    -------
    ``{name: sampled ranks}``: int64 arrays in ``1..n`` aligned with ``test``'s rows (shape
    ``(repeats, len(test))`` with ``repeats``); with ``return_global`` the tuple
    ``(sampled, {name: global ranks}, pool_sizes)``.

    Raises ``ValueError`` for an empty or non-mapping ``models``, an unfitted model, models of
    different catalogues, ``sample_size`` above a row's pool (naming the row), a bad ``repeats``,
    ``replacement``, ``batch_size`` or ``return_global``.
    """
    from collections.abc import Mapping

    if not isinstance(models, Mapping) or len(models) == 0:
        raise ValueError(f"models must be a non-empty mapping name -> fitted recommender, got {type(models).__name__}"
                         + (" (empty)" if isinstance(models, Mapping) else ""))
    names = list(models)
    checked = [_check_inputs(models[nm], train, test) for nm in names]
    tu, ti, N = checked[0]
    first = models[names[0]]
    for nm in names[1:]:
        m = models[nm]
        if (m.n_items_, m.n_users_) != (first.n_items_, first.n_users_):
            raise ValueError(f"models must share one catalogue and user set: {names[0]!r} has "
                             f"{first.n_items_} items and {first.n_users_} users, {nm!r} has "
                             f"{m.n_items_} items and {m.n_users_} users")
    replacement = check_bool(replacement, "replacement")
    return_global = check_bool(return_global, "return_global")
    batch_size = check_int(batch_size, "batch_size", low=1)
    n_rep = 1 if repeats is None else check_int(repeats, "repeats", low=1)
    n = check_int(sample_size, "sample_size", low=2, high=N)
    pools = pool_sizes(train, test, N, exclude_train=True)
    if n > pools.min():
        worst = int(np.argmin(pools))
        raise ValueError(f"sample_size must be <= every row's pool N_u (the target and the items outside the "
                         f"user's training set); test row {worst} (user {int(tu[worst])}) has N_u = "
                         f"{int(pools[worst])}, got {n}")
    b0 = min(batch_size, tu.size)
    # per model: scores, tie keys, two masks; plus the decoy keys or pool order of the batch
    check_memory(float(b0) * N * (18 * len(names) + 16), f"scoring a batch of {b0} rows x {N} items for "
                 f"{len(names)} model(s)", "batch_size")
    gen = as_rng(rng)
    X = _train_csr(train, first.n_users_, N)
    m = n - 1
    sampled = {nm: np.empty((n_rep, tu.size), dtype=np.int64) for nm in names}
    glob = {nm: np.empty(tu.size, dtype=np.int64) for nm in names}
    loops = [_above_target_batches(models[nm], X, tu, ti, batch_size, gen) for nm in names]
    for parts in zip(*loops):
        s, b, t, blocked, _ = parts[0]
        rows = slice(s, s + b.size)
        for nm, (_, _, _, _, above) in zip(names, parts):
            glob[nm][rows] = 1 + above.sum(axis=1)
        allowed = ~blocked
        allowed[b, t] = False
        if replacement:
            # the j-th allowed item of each row, j uniform in 0..N_u - 2
            order = np.argsort(~allowed, axis=1, kind="stable")
            size = allowed.sum(axis=1)
        for rep in range(n_rep):
            if replacement:
                j = np.minimum(np.floor(gen.random((b.size, m)) * size[:, None]).astype(np.int64), size[:, None] - 1)
                dec = np.take_along_axis(order, j, axis=1)
            else:
                keys = gen.random(allowed.shape)
                keys[~allowed] = 2.0  # never among the m smallest: every row has >= m allowed items
                dec = np.argpartition(keys, m - 1, axis=1)[:, :m]
            for nm, (_, _, _, _, above) in zip(names, parts):
                sampled[nm][rep, rows] = 1 + np.take_along_axis(above, dec, axis=1).sum(axis=1)
    if repeats is None:
        sampled = {nm: v[0] for nm, v in sampled.items()}
    return (sampled, glob, pools) if return_global else sampled
