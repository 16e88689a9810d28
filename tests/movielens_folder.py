"""Small real-format datasets written by the tests: MovieLens ``ratings.dat`` / ``u.data`` /
``ratings.csv`` folders and an NCF-style split, with popularity-skewed interactions."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def interactions(n_users: int = 300, n_items: int = 400, seed: int = 0):
    """``(user, item, rating, timestamp)`` arrays with 1-based original ids (MovieLens style), item
    ids spread out (``3 * i + 1``) so the loaders' re-indexing is exercised, 15-60 distinct items
    per user drawn with Zipf-like popularity, and strictly increasing timestamps per user."""
    g = np.random.default_rng(seed)
    pop = 1.0 / np.arange(1, n_items + 1) ** 0.8
    pop /= pop.sum()
    rows = []
    for u in range(n_users):
        k = int(g.integers(15, 61))
        items = g.choice(n_items, size=k, replace=False, p=pop)
        ts = 978_300_000 + u * 10_000 + np.sort(g.choice(5_000, size=k, replace=False))
        for i, t in zip(items, ts):
            rows.append((u + 1, 3 * int(i) + 1, int(g.integers(1, 6)), int(t)))
    a = np.array(rows, dtype=np.int64)
    return a[:, 0], a[:, 1], a[:, 2], a[:, 3]


def write_movielens(folder, kind: str = "ratings.dat", **kw) -> Path:
    """Write a MovieLens-format file (``ratings.dat``, ``u.data`` or ``ratings.csv``) into
    ``folder/ml-small/`` and return ``folder``."""
    folder = Path(folder)
    sub = folder / "ml-small"
    sub.mkdir(parents=True, exist_ok=True)
    u, i, r, t = interactions(**kw)
    if kind == "ratings.dat":
        text = "".join(f"{a}::{b}::{c}::{d}\n" for a, b, c, d in zip(u, i, r, t))
    elif kind == "u.data":
        text = "".join(f"{a}\t{b}\t{c}\t{d}\n" for a, b, c, d in zip(u, i, r, t))
    elif kind == "ratings.csv":
        text = "userId,movieId,rating,timestamp\n" + "".join(f"{a},{b},{c}.0,{d}\n" for a, b, c, d in zip(u, i, r, t))
    else:
        raise ValueError(kind)
    (sub / kind).write_text(text)
    return folder


def write_ncf(folder, name: str = "ml-small", n_decoys: int = 99, **kw) -> Path:
    """Write an NCF-style leave-one-out split (``name.train.rating``, ``.test.rating``,
    ``.test.negative``; 0-based ids) of :func:`interactions` into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    u, i, r, t = interactions(**kw)
    _, u = np.unique(u, return_inverse=True)
    _, i = np.unique(i, return_inverse=True)
    n_items = int(i.max()) + 1
    g = np.random.default_rng(1)
    last = np.r_[u[1:] != u[:-1], True]
    tr = "".join(f"{a}\t{b}\t{c}\t{d}\n" for a, b, c, d in zip(u[~last], i[~last], r[~last], t[~last]))
    te = "".join(f"{a}\t{b}\t{c}\t{d}\n" for a, b, c, d in zip(u[last], i[last], r[last], t[last]))
    neg = []
    for a, b in zip(u[last], i[last]):
        seen = set(i[u == a].tolist())
        pool = np.array([x for x in range(n_items) if x not in seen])
        neg.append(f"({a},{b})\t" + "\t".join(map(str, g.choice(pool, n_decoys, replace=False))) + "\n")
    (folder / f"{name}.train.rating").write_text(tr)
    (folder / f"{name}.test.rating").write_text(te)
    (folder / f"{name}.test.negative").write_text("".join(neg))
    return folder


def write_user_lines(folder, test: bool = True, **kw) -> Path:
    """Write :func:`interactions` as a user-line split (NGCF / LightGCN / KGAT): ``train.txt`` with
    each user's earlier items and, with ``test``, ``test.txt`` with each user's last two items,
    lines ``user item item ...`` with 0-based ids."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    u, i, _, _ = interactions(**kw)
    _, u = np.unique(u, return_inverse=True)
    _, i = np.unique(i, return_inverse=True)
    tr, te = [], []
    for a in np.unique(u):
        items = i[u == a]
        cut = items.size - 2 if test else items.size
        tr.append(" ".join(map(str, [a, *items[:cut]])) + "\n")
        te.append(" ".join(map(str, [a, *items[cut:]])) + "\n")
    (folder / "train.txt").write_text("".join(tr))
    if test:
        (folder / "test.txt").write_text("".join(te))
    return folder


def write_recbole(folder, name: str = "ml-small", **kw) -> Path:
    """Write :func:`interactions` as a RecBole atomic file ``name.inter`` (tab-separated, header
    ``user_id:token item_id:token rating:float timestamp:float``) into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    u, i, r, t = interactions(**kw)
    text = "user_id:token\titem_id:token\trating:float\ttimestamp:float\n" + "".join(
        f"{a}\t{b}\t{c}.0\t{d}\n" for a, b, c, d in zip(u, i, r, t))
    (folder / f"{name}.inter").write_text(text)
    return folder
