"""Interaction frames: column layout, catalog sizes, statistics (Gini index, summaries) and the
train/test splits."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._validation import as_float_array, as_rng, check_int, check_memory, check_real

COLUMNS = ["user", "item", "rating", "timestamp"]


def gini(values) -> float:
    r"""Gini index of non-negative values (e.g. interaction counts per item, zeros included):

    .. math:: G = \frac{\sum_i (2i - n - 1)\, x_{(i)}}{n \sum_i x_{(i)}}

    with :math:`x_{(1)} \le \dots \le x_{(n)}`: 0 when all values are equal, :math:`1 - 1/n` when one
    item has every interaction (Ihemelandu & Ekstrand 2023, Sec. III-A and Table I)."""
    x = as_float_array(values, "values").ravel()
    if x.size == 0:
        raise ValueError("values must not be empty")
    if not np.all(np.isfinite(x)):
        raise ValueError("values must not contain NaN or infinite values")
    if np.any(x < 0):
        raise ValueError(f"values must be non-negative, got minimum {x.min()}")
    total = x.sum()
    if total == 0:
        raise ValueError("values must not all be zero")
    x = np.sort(x)
    n = x.size
    i = np.arange(1, n + 1, dtype=np.float64)
    return float(np.sum((2 * i - n - 1) * x) / (n * total))


def n_items_of(df: pd.DataFrame) -> int:
    """Catalog size of an interaction frame: ``attrs["n_items"]`` if set, else ``max(item) + 1``."""
    _check_frame(df, "df", columns=("user", "item"))
    n = df.attrs.get("n_items")
    m = int(df["item"].max()) + 1 if len(df) else 0
    return max(int(n), m) if n is not None else m


def n_users_of(df: pd.DataFrame) -> int:
    """Number of users: ``attrs["n_users"]`` if set, else ``max(user) + 1``."""
    _check_frame(df, "df", columns=("user", "item"))
    n = df.attrs.get("n_users")
    m = int(df["user"].max()) + 1 if len(df) else 0
    return max(int(n), m) if n is not None else m


def item_counts(df: pd.DataFrame, n_items: int | None = None) -> np.ndarray:
    """Number of interactions per item ``0..n_items-1`` (zeros included)."""
    _check_frame(df, "df", columns=("user", "item"))
    n = n_items_of(df) if n_items is None else check_int(n_items, "n_items", low=1)
    if len(df) and int(df["item"].max()) >= n:
        raise ValueError(f"n_items must exceed the largest item id {int(df['item'].max())}, got {n}")
    check_memory(8.0 * n, f"item counts for {n} items", "n_items")
    return np.bincount(df["item"].to_numpy(), minlength=n)


def dataset_summary(df: pd.DataFrame) -> dict:
    """Users, items, interactions, density, profile-size statistics and the item Gini index."""
    _check_frame(df, "df", columns=("user", "item"))
    if len(df) == 0:
        raise ValueError("df must not be empty")
    U, N = n_users_of(df), n_items_of(df)
    prof = np.bincount(df["user"].to_numpy(), minlength=U)
    return {"users": U, "items": N, "interactions": int(len(df)),
            "density": len(df) / (U * N), "profile_mean": float(prof.mean()),
            "profile_median": float(np.median(prof)), "profile_min": int(prof.min()),
            "profile_max": int(prof.max()), "gini": gini(item_counts(df, N))}


# ---------------------------------------------------------------------------------------------
# splits
# ---------------------------------------------------------------------------------------------
def _check_frame(df, name, columns=COLUMNS):
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"{name} must be a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{name} is missing column(s) {missing}; expected {list(columns)}")
    for c in ("user", "item"):
        if c in df.columns and len(df):
            col = df[c]
            if col.dtype.kind not in "iu":
                raise ValueError(f"{name}[{c!r}] must hold integer ids, got dtype {col.dtype}")
            if col.min() < 0:
                raise ValueError(f"{name}[{c!r}] must hold ids >= 0, got {col.min()}")


def _copy_attrs(src: pd.DataFrame, *dsts: pd.DataFrame) -> None:
    """The frame's attributes on its parts, except the row-aligned ``held_out`` flags of a given
    split (:func:`itemsampling.data.given_split`), which describe the whole frame's rows only."""
    for d in dsts:
        d.attrs.pop("held_out", None)
        d.attrs.update({k: v for k, v in src.attrs.items() if k != "held_out"})
        d.attrs["n_users"] = n_users_of(src)
        d.attrs["n_items"] = n_items_of(src)


def _keep_rows(interactions: pd.DataFrame, keep) -> pd.DataFrame:
    """The rows ``keep`` of ``interactions`` with its ids and ``attrs`` (row-aligned ``held_out`` flags cut
    to the kept rows; ``n_users`` / ``n_items`` those of the whole frame)."""
    out = interactions[keep].reset_index(drop=True)
    out.attrs.update(interactions.attrs)
    held = interactions.attrs.get("held_out")
    if held is not None and np.shape(held) == keep.shape:
        out.attrs["held_out"] = np.asarray(held)[keep]
    out.attrs["n_users"] = n_users_of(interactions)
    out.attrs["n_items"] = n_items_of(interactions)
    return out


def drop_short_users(interactions: pd.DataFrame, min_interactions: int = 2) -> tuple[pd.DataFrame, int]:
    """The rows of the users with at least ``min_interactions`` interactions (default 2: one to train
    on, one to hold out, what :func:`leave_last_out` and :func:`holdout_fraction` need), and the number
    of users dropped. User and item ids are kept as they are (no renumbering; ``attrs["n_users"]`` and
    ``attrs["n_items"]`` keep the whole frame's sizes), and so are the other ``attrs``, the row-aligned
    ``held_out`` flags of a given split cut to the kept rows. With no user to drop the frame itself is
    returned. Returns ``(frame, n_dropped)``."""
    _check_frame(interactions, "interactions", columns=("user", "item"))
    least = check_int(min_interactions, "min_interactions", low=1)
    users = interactions["user"].to_numpy()
    counts = np.bincount(users) if users.size else np.zeros(0, dtype=np.int64)
    short = (counts > 0) & (counts < least)
    dropped = int(short.sum())
    if not dropped:
        return interactions, 0
    keep = ~short[users]
    return _keep_rows(interactions, keep), dropped


def sample_users(interactions: pd.DataFrame, n_users: int, rng=None) -> pd.DataFrame:
    """The rows of ``n_users`` users drawn uniformly at random without replacement from the users of
    ``interactions`` (all their rows; the frame itself when it has at most ``n_users`` users). Ids and
    ``attrs`` are kept as in :func:`drop_short_users` (row-aligned ``held_out`` flags cut to the kept
    rows)."""
    _check_frame(interactions, "interactions", columns=("user", "item"))
    n = check_int(n_users, "n_users", low=1)
    users = interactions["user"].to_numpy()
    present = np.unique(users)
    if present.size <= n:
        return interactions
    chosen = np.zeros(int(present.max()) + 1, dtype=bool)
    chosen[as_rng(rng).choice(present, size=n, replace=False)] = True
    keep = chosen[users]
    return _keep_rows(interactions, keep)


def leave_last_out(interactions: pd.DataFrame, rng=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Hold out each user's last event (largest ``timestamp``); ties between a user's latest
    events are broken at random with ``rng`` (so data without timestamps get a random held-out
    item). Returns ``(train, test)``; ``test`` has exactly one row per user, sorted by user.

    Timestamps must be numbers or datetimes without NaN/NaT (a missing time cannot be ordered).
    Every user needs at least two interactions (one to train on, one to test): otherwise a
    ``ValueError`` names the offending users. ``attrs["n_users"]``/``attrs["n_items"]`` carry over.
    """
    _check_frame(interactions, "interactions", columns=("user", "item", "timestamp"))
    if len(interactions) == 0:
        raise ValueError("interactions must not be empty")
    gen = as_rng(rng)
    df = interactions
    users = df["user"].to_numpy()
    ts = df["timestamp"].to_numpy()
    if ts.dtype.kind not in "iufmM":
        raise ValueError(f"interactions['timestamp'] must hold numbers, got dtype {ts.dtype}")
    if ts.dtype.kind == "f" and not np.all(np.isfinite(ts)):
        bad = np.flatnonzero(~np.isfinite(ts))
        raise ValueError(f"interactions['timestamp'] must be finite: {bad.size} row(s) hold NaN or inf "
                         f"(e.g. row {bad[:5].tolist()}); which event is last cannot be decided")
    if ts.dtype.kind == "M" and np.any(np.isnat(ts)):
        raise ValueError("interactions['timestamp'] must not hold NaT: which event is last cannot be decided")
    tie = gen.random(len(df))
    order = np.lexsort((tie, ts, users))  # by user, then time, then random tie-break
    su = users[order]
    last = np.ones(su.size, dtype=bool)
    last[:-1] = su[1:] != su[:-1]
    counts = np.bincount(users)
    few = np.flatnonzero((counts > 0) & (counts < 2))
    if few.size:
        raise ValueError(f"every user needs >= 2 interactions for leave_last_out; {few.size} user(s) "
                         f"have only one (e.g. user {few[:5].tolist()})")
    test_rows = np.sort(order[last])
    train_mask = np.ones(len(df), dtype=bool)
    train_mask[test_rows] = False
    train = df.iloc[np.flatnonzero(train_mask)].reset_index(drop=True)
    test = df.iloc[test_rows].sort_values("user", kind="stable").reset_index(drop=True)
    _copy_attrs(df, train, test)
    return train, test


def _check_user_ids(values, name: str) -> np.ndarray:
    """A non-empty 1-d array of integer user ids (sorted, unique); booleans, strings, NaN and
    non-integer values are refused naming the argument."""
    if isinstance(values, (str, bytes, dict, set)):
        raise ValueError(f"{name} must be a non-empty 1-d array of integer user ids, got {type(values).__name__}")
    arr = np.atleast_1d(np.asarray(values))
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-d array of integer user ids, got shape {arr.shape}")
    if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.floor(arr)):
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold integer user ids, got {arr[:3].tolist()}... (dtype {arr.dtype})")
    return np.unique(arr.astype(np.int64))


def holdout_fraction(interactions: pd.DataFrame, fraction: float = 0.2, rng=None,
                     test_users=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Ihemelandu & Ekstrand 2023, Sec. III-A: hold out ``fraction`` (default 20%) of each test
    user's interactions, chosen at random (``round(fraction * size)``, at least 1, at most
    ``size - 1``); other users' interactions all go to train. ``test_users`` defaults to every
    user; given, it must be a non-empty array of integer ids of users present in ``interactions``
    (an empty, boolean or non-integer list is refused). Returns ``(train, test)``."""
    _check_frame(interactions, "interactions", columns=("user", "item"))
    fraction = check_real(fraction, "fraction", low=0.0, high=1.0, low_open=True, high_open=True)
    gen = as_rng(rng)
    df = interactions
    users = df["user"].to_numpy()
    counts = np.bincount(users)
    if test_users is None:
        selected = np.zeros(counts.size, dtype=bool)
        selected[np.flatnonzero(counts)] = True
    else:
        tu = _check_user_ids(test_users, "test_users")
        if tu.min() < 0 or tu.max() >= counts.size or np.any(counts[tu] == 0):
            raise ValueError("test_users must be users present in interactions")
        selected = np.zeros(counts.size, dtype=bool)
        selected[tu] = True
    few = np.flatnonzero(selected & (counts < 2))
    if few.size:
        raise ValueError(f"test users need >= 2 interactions; {few.size} have fewer (e.g. {few[:5].tolist()})")
    n_test = np.clip(np.rint(fraction * counts), 1, np.maximum(counts - 1, 1)).astype(np.int64)
    order = np.lexsort((gen.random(len(df)), users))
    su = users[order]
    pos = np.arange(su.size) - np.searchsorted(su, np.arange(counts.size))[su]
    is_test = np.zeros(len(df), dtype=bool)
    is_test[order] = selected[su] & (pos < n_test[su])
    train = df.iloc[np.flatnonzero(~is_test)].reset_index(drop=True)
    test = df.iloc[np.flatnonzero(is_test)].sort_values(["user", "item"]).reset_index(drop=True)
    _copy_attrs(df, train, test)
    return train, test
