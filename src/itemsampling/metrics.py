r"""Single-relevant-item ranking metrics as functions of the 1-based rank.

For one held-out item at rank :math:`R` in a list of :math:`N` items (Krichene & Rendle 2020,
Eq. 7-13; TORS Eq. 1-3):

=============  ===================================================  ==========================
metric         :math:`F(R)`                                         notes
=============  ===================================================  ==========================
``recall``      :math:`\mathbb 1[R \le K]`                           = ``hr`` (hit ratio), Eq. 9
``precision``   :math:`\mathbb 1[R \le K] / K`                       Eq. 8; untruncated: K = N
``ndcg``        :math:`\mathbb 1[R \le K] / \log_2(R+1)`              Eq. 11, untruncated Eq. 13
``ap``          :math:`\mathbb 1[R \le K] / R`                       Eq. 10, untruncated Eq. 12; = ``rr``
``auc``         :math:`(N - R)/(N - 1)`                              Eq. 7; needs ``n_items``
=============  ===================================================  ==========================

A metric :math:`T` is the mean of :math:`F` over users (TORS Eq. 3). The same functions give the
*sampled* metric :math:`T^S` when applied to sampled ranks :math:`r` with ``n_items`` set to the
sampled-set size :math:`n` (sampled AUC is :math:`(n-r)/(n-1)`).

With a *set* of relevant items per user (several held-out items, Ihemelandu & Ekstrand 2023) use
the general forms of Krichene & Rendle 2020, Eq. 2-6: :func:`set_metric_values` (positions of the
relevant items) and :func:`topk_metric_values` (boolean hits of top-K lists).
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from ._validation import check_int, check_ranks

__all__ = ["METRICS", "metric_function", "metric_values", "evaluate", "metric_curve", "canonical_metric",
           "SET_METRICS", "set_metric_values", "topk_metric_values"]

#: Accepted metric names and the canonical name they map to.
METRICS = {
    "recall": "recall",
    "hr": "recall",
    "hit_ratio": "recall",
    "precision": "precision",
    "ndcg": "ndcg",
    "ap": "ap",
    "rr": "ap",
    "mrr": "ap",
    "auc": "auc",
}


def canonical_metric(metric: str) -> str:
    """Map a metric name (``hr`` -> ``recall``, ``rr`` -> ``ap``) to its canonical name."""
    if not isinstance(metric, str) or metric.lower() not in METRICS:
        allowed = ", ".join(sorted(METRICS))
        raise ValueError(f"metric must be one of {{{allowed}}}, got {metric!r}")
    return METRICS[metric.lower()]


def _resolve(metric: str, k, n_items):
    name = canonical_metric(metric)
    if n_items is not None:
        n_items = check_int(n_items, "n_items", low=1)
    if name == "auc":
        if k is not None:
            raise ValueError("k must be None for metric 'auc' (AUC has no cut-off)")
        if n_items is None or n_items < 2:
            raise ValueError("n_items (>= 2) is required for metric 'auc'")
    if k is not None:
        k = check_int(k, "k", low=1)
    if name == "precision" and k is None:
        if n_items is None:
            raise ValueError("precision needs k (>= 1) or, untruncated, n_items")
        k = n_items
    return name, k, n_items


def metric_function(metric: str, k: int | None = None, n_items: int | None = None):
    r"""Return the vectorised metric function :math:`F(R)` on 1-based rank arrays.

    ``k=None`` means untruncated. The returned function does not validate its input; use
    :func:`metric_values` for checked evaluation.
    """
    name, k, n_items = _resolve(metric, k, n_items)

    def F(ranks):
        R = np.asarray(ranks, dtype=np.float64)
        if name == "auc":
            return (n_items - R) / (n_items - 1.0)
        hit = np.ones_like(R) if k is None else (R <= k).astype(np.float64)
        if name == "recall":
            return hit
        if name == "precision":
            return hit / k
        if name == "ndcg":
            return hit / np.log2(R + 1.0)
        return hit / R  # ap / rr

    F.metric, F.k, F.n_items = name, k, n_items
    return F


def metric_values(ranks, metric: str, k: int | None = None, n_items: int | None = None) -> np.ndarray:
    r"""Per-user metric values :math:`F(R_u)` for 1-based ranks (checked)."""
    F = metric_function(metric, k, n_items)
    R = check_ranks(ranks, "ranks", high=None if n_items is None else check_int(n_items, "n_items", low=1))
    return F(R)


def evaluate(ranks, metric: str, k: int | None = None, n_items: int | None = None) -> float:
    r"""The metric :math:`T = \frac1M \sum_u F(R_u)` (TORS Eq. 3) over 1-based ``ranks``.

    Parameters
    ----------
    ranks : array of int
        1-based ranks of the held-out items (global ranks, or sampled ranks for :math:`T^S`).
    metric : {"recall", "hr", "precision", "ndcg", "ap", "rr", "auc"}
    k : int or None
        Cut-off :math:`K \ge 1`; ``None`` means untruncated.
    n_items : int, optional
        Length of the ranked list (``N`` for global ranks, ``n`` for sampled ranks). Required for
        ``auc``; when given, ranks above it are refused.
    """
    return float(np.mean(metric_values(ranks, metric, k, n_items)))


def metric_curve(ranks, metric: str, ks: Iterable[int], n_items: int | None = None) -> np.ndarray:
    r"""The metric at every cut-off in ``ks`` (e.g. the Recall curve :math:`T_{Recall@K}`,
    TORS Eq. 11, which is the empirical CDF of the ranks), computed from one sort."""
    name = canonical_metric(metric)
    if name == "auc":
        raise ValueError("metric_curve needs a cut-off metric; 'auc' has no k")
    n_items = None if n_items is None else check_int(n_items, "n_items", low=1)
    R = check_ranks(ranks, "ranks", high=n_items)
    ks = np.atleast_1d(np.asarray(ks, dtype=object))
    if ks.ndim != 1:
        raise ValueError(f"ks must be a 1-d sequence of cut-offs, got shape {ks.shape}")
    if ks.size == 0:
        raise ValueError("ks must not be empty")
    ks = np.array([check_int(x, "k", low=1) for x in ks], dtype=np.int64)
    # cumulative sum of the untruncated per-rank weight over rank values
    w = metric_function(name if name != "precision" else "recall")(R)
    order = np.sort(R)
    w_sorted = w[np.argsort(R, kind="stable")]
    csum = np.concatenate([[0.0], np.cumsum(w_sorted)])
    idx = np.searchsorted(order, ks, side="right")
    out = csum[idx] / R.size
    if name == "precision":
        out = out / ks
    return out


# ---------------------------------------------------------------------------------------------
# several relevant items per user (Krichene & Rendle 2020, Eq. 2-6)
# ---------------------------------------------------------------------------------------------
#: Metrics with several relevant items per user; ``rr`` is the reciprocal rank of the first hit.
SET_METRICS = ("recall", "precision", "ndcg", "ap", "rr", "auc")
_SET_ALIASES = {"hr": "recall", "hit_ratio": "recall", "mrr": "rr"}


def _set_metric_name(metric) -> str:
    if isinstance(metric, str):
        m = _SET_ALIASES.get(metric.lower(), metric.lower())
        if m in SET_METRICS:
            return m
    allowed = ", ".join(sorted(set(SET_METRICS) | set(_SET_ALIASES)))
    raise ValueError(f"metric must be one of {{{allowed}}}, got {metric!r}")


def _check_groups(ranks, users, n_users, n_items):
    R = check_ranks(ranks, "ranks", high=None if n_items is None else np.max(n_items))
    u = np.asarray(users)
    if u.ndim == 0:
        u = u.reshape(1)
    if u.ndim != 1 or u.size != R.size:
        raise ValueError(f"users must be a 1-d array with one user index per rank ({R.size}), got shape {u.shape}")
    if u.dtype.kind not in "iu":
        raise ValueError(f"users must hold integer user indices, got dtype {u.dtype}")
    u = u.astype(np.int64)
    if u.size and u.min() < 0:
        raise ValueError(f"users must hold user indices >= 0, got {u.min()}")
    if n_users is None:
        n_users = int(u.max()) + 1
    n_users = check_int(n_users, "n_users", low=1)
    if u.min() < 0 or u.max() >= n_users:
        raise ValueError(f"users must lie in 0..{n_users - 1}, got {u.min() if u.min() < 0 else u.max()}")
    return R, u, n_users


def set_metric_values(ranks, users, metric: str, k: int | None = None, n_users: int | None = None,
                      n_items=None) -> np.ndarray:
    r"""Per-user metric values when a user has a *set* of relevant items (Krichene & Rendle 2020,
    Eq. 2-6), vectorised over users.

    ``ranks[j]`` is the 1-based position of one relevant item of user ``users[j]`` in that user's
    ranked list (positions distinct within a user); :math:`R_u` is the set of positions of user
    :math:`u`, :math:`|R_u|` its size and :math:`h_u(k) = |\{r \in R_u : r \le k\}|`:

    * ``recall`` (Eq. 4): :math:`h_u(K) / |R_u|`;
    * ``precision`` (Eq. 3): :math:`h_u(K) / K`;
    * ``ap`` (Eq. 5): :math:`\frac{1}{\min(|R_u|, K)} \sum_{r \in R_u, r \le K} h_u(r) / r`;
    * ``ndcg`` (Eq. 6): :math:`\sum_{r \in R_u, r \le K} \frac{1}{\log_2(r+1)} \big/
      \sum_{i=1}^{\min(|R_u|, K)} \frac{1}{\log_2(i+1)}`;
    * ``rr``: reciprocal rank of the first relevant item, :math:`\mathbb 1[\min R_u \le K] / \min R_u`
      (LensKit's ``recip_rank``, used by Ihemelandu & Ekstrand 2023);
    * ``auc`` (Eq. 2): :math:`\bigl(n_u - \frac{|R_u|-1}{2} - \frac{1}{|R_u|}\sum_{r\in R_u} r\bigr)
      / (n_u - |R_u|)`; needs ``n_items`` (:math:`n_u`, the list length: an int or one per user).

    ``k=None`` is untruncated (:math:`K = \infty`; precision then needs ``n_items`` as its
    :math:`K`). With one relevant item per user every form reduces to the single-item :math:`F(R)`
    of :func:`metric_function` (AP and RR both to :math:`1/R`). Users with no entry in ``ranks``
    (indices below ``n_users`` that never occur) get NaN: their metric is undefined.

    Returns a float64 array of length ``n_users`` (default ``max(users) + 1``).
    """
    name = _set_metric_name(metric)
    R, u, M = _check_groups(ranks, users, n_users, n_items)
    if k is not None:
        if name == "auc":
            raise ValueError(f"k must be None for metric 'auc' (AUC has no cut-off: it averages over the whole "
                             f"list), got k={k!r}")
        k = check_int(k, "k", low=1)
    n_list = None
    if n_items is not None:
        n_list = np.asarray(n_items)
        if n_list.ndim == 0:
            n_list = np.full(M, check_int(n_items, "n_items", low=1), dtype=np.int64)
        else:
            n_list = check_ranks(n_list, "n_items")
            if n_list.size != M:
                raise ValueError(f"n_items must be an int or have one list length per user ({M}), got length {n_list.size}")
        if np.any(R > n_list[u]):
            j = int(np.flatnonzero(R > n_list[u])[0])
            raise ValueError(f"ranks must lie in 1..n_items of their user; user {u[j]} has rank {R[j]} > {n_list[u[j]]}")
    # sort by (user, rank); h = position within the user (number of relevant items at ranks <= r)
    order = np.lexsort((R, u))
    su, sr = u[order], R[order]
    if np.any((su[1:] == su[:-1]) & (sr[1:] == sr[:-1])):
        raise ValueError("ranks must be distinct within a user (two relevant items cannot share a position)")
    size = np.bincount(su, minlength=M).astype(np.float64)
    start = np.concatenate([[0], np.cumsum(size)[:-1]]).astype(np.int64)
    h = np.arange(su.size) - start[su] + 1
    hit = np.ones(su.size, dtype=bool) if k is None else sr <= k
    with np.errstate(invalid="ignore", divide="ignore"):
        if name == "auc":
            if n_list is None:
                raise ValueError("n_items (the list length, >= 2) is required for metric 'auc'")
            nl = n_list.astype(np.float64)
            if np.any((size > 0) & (nl <= size)):
                raise ValueError("auc needs at least one non-relevant item: n_items must exceed each user's number of relevant items")
            out = (nl - (size - 1) / 2 - np.bincount(su, weights=sr, minlength=M) / size) / (nl - size)
        elif name == "rr":
            first = sr[h == 1]
            fu = su[h == 1]
            out = np.full(M, np.nan)
            out[fu] = np.where(first <= (np.inf if k is None else k), 1.0 / first, 0.0)
        else:
            nh = np.bincount(su, weights=hit, minlength=M)
            if name == "recall":
                out = nh / size
            elif name == "precision":
                if k is None:
                    if n_list is None:
                        raise ValueError("precision needs k (>= 1) or, untruncated, n_items")
                    out = nh / n_list
                else:
                    out = nh / k
            elif name == "ap":
                s = np.bincount(su, weights=np.where(hit, h / sr, 0.0), minlength=M)
                out = s / (size if k is None else np.minimum(size, k))
            else:  # ndcg
                dcg = np.bincount(su, weights=np.where(hit, 1.0 / np.log2(sr + 1.0), 0.0), minlength=M)
                depth = (size if k is None else np.minimum(size, k)).astype(np.int64)
                ideal_cum = np.concatenate([[0.0], np.cumsum(1.0 / np.log2(np.arange(2, depth.max() + 2)))])
                out = dcg / ideal_cum[depth]
    out = np.asarray(out, dtype=np.float64)
    out[size == 0] = np.nan
    return out


def topk_metric_values(hits, n_relevant, metric: str) -> np.ndarray:
    r"""Per-user metric values from top-:math:`K` recommendation lists (Krichene & Rendle 2020,
    Eq. 3-6, truncated at the list length :math:`K`).

    ``hits`` is a boolean array ``(M, K)``: ``hits[u, i]`` says whether the item at position
    :math:`i+1` of user :math:`u`'s list is relevant; ``n_relevant[u]`` :math:`= |R_u| \ge 1` counts
    *all* relevant items of the user, including those outside the list (recall and the ideal DCG
    need it). Metrics: ``recall``, ``precision``, ``ndcg``, ``ap``, ``rr`` as in
    :func:`set_metric_values` with ``k = K``; the two functions agree on the same lists.
    """
    name = _set_metric_name(metric)
    if name == "auc":
        raise ValueError("topk_metric_values needs a cut-off metric; 'auc' needs the whole ranking")
    H = np.asarray(hits)
    if H.ndim != 2 or H.shape[1] == 0:
        raise ValueError(f"hits must be a 2-d (users, K) array with K >= 1, got shape {H.shape}")
    if H.dtype.kind != "b":
        raise ValueError(f"hits must be a boolean array, got dtype {H.dtype}")
    M, K = H.shape
    nrel = np.asarray(n_relevant)
    if nrel.ndim == 0:
        nrel = np.full(M, nrel)
    if nrel.shape != (M,):
        raise ValueError(f"n_relevant must have one count per user ({M}), got shape {nrel.shape}")
    nrel = check_ranks(nrel, "n_relevant")
    h = np.cumsum(H, axis=1)
    if np.any(h[:, -1] > nrel):
        raise ValueError("n_relevant must be at least the number of hits in each user's list")
    pos = np.arange(1, K + 1, dtype=np.float64)
    if name == "recall":
        return h[:, -1] / nrel
    if name == "precision":
        return h[:, -1] / K
    if name == "ap":
        return (H * (h / pos)).sum(axis=1) / np.minimum(nrel, K)
    if name == "rr":
        first = np.argmax(H, axis=1)
        return np.where(H.any(axis=1), 1.0 / (first + 1.0), 0.0)
    disc = 1.0 / np.log2(pos + 1.0)
    ideal = np.cumsum(disc)[np.minimum(nrel, K) - 1]
    return (H * disc).sum(axis=1) / ideal
