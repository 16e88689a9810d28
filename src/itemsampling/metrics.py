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
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from ._validation import check_int, check_ranks

__all__ = ["METRICS", "metric_function", "metric_values", "evaluate", "metric_curve", "canonical_metric"]

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
