"""Fit time and peak memory of the item-item models on the real datasets (run by hand, not by pytest):

    PYTHONPATH=src nice -n 10 python benchmarks/real_models.py [--data /work/shared/data/real] [--out OUT.json]
        [--datasets yelp-mcrec citeulike-a amazon-book-kgat] [--models itemknn itemknn-dense ease]
        [--dense-max-gb 8] [--lapack 4000 8000]

Each fit runs alone in a fresh child process (one at a time: the machine this was written for has 2
cores), on the dataset's training interactions (:func:`itemsampling.data.load_interactions`; a
train/test split keeps only its training rows), and reports its wall time and its peak resident
memory above the process's memory after loading the data (``ru_maxrss``, so the figure counts what
the fit allocates, not the interpreter and the frame). Models:

* ``itemknn``: ``ItemKNN(q=1, k=50)``, the chapters' item-kNN (``candidates.RECOMMENDERS``), on its
  sparse, blocked path;
* ``itemknn-dense``: the same model on the dense path (``method="dense"``), skipped where its four
  :math:`N\\times N` matrices, :math:`32 N^2` bytes, exceed ``--dense-max-gb``; the sparse fit's
  scores are compared with it on 2,000 users (largest absolute difference);
* ``ease``: ``EASE(lam=500)`` on one :math:`N\\times N` matrix (above ``EASE.SINGLE_THREAD_ITEMS``
  items its factorisation runs on one BLAS thread);
* ``ease-old``: the previous EASE fit (the dense Gram matrix from a float32 product, ``cho_factor`` and
  ``cho_solve`` against the identity, :math:`B = -P/\\mathrm{diag}(P)` as a new matrix), for the memory
  it took; skipped beyond ``--dense-max-gb`` at :math:`3 \\times 8 N^2` bytes.

``--lapack N ...`` also times ``dpotrf`` + ``dpotri`` (EASE's :math:`O(N^3)` part) on a random
positive-definite :math:`N\\times N` matrix on 1 and on 2 BLAS threads, the figures from which the
time at other :math:`N` is extrapolated (:math:`\\propto N^3`).
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

DATASETS = ("yelp-mcrec", "citeulike-a", "amazon-book-kgat")
MODELS = ("itemknn", "itemknn-dense", "ease")


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: kilobytes


def _train(path: str):
    from itemsampling.data import load_interactions

    df = load_interactions(path)
    held = df.attrs.get("held_out")
    if held is not None:
        attrs = dict(df.attrs)
        df = df[~np.asarray(held, dtype=bool)].reset_index(drop=True)
        df.attrs.update({k: v for k, v in attrs.items() if k in ("n_users", "n_items")})
    return df


def _old_ease(train, n_items, lam=500.0):
    import scipy.linalg as sl

    from itemsampling.models import gram, interaction_matrix

    X = interaction_matrix(train, train.attrs["n_users"], n_items)
    G = gram(X)
    G[np.diag_indices_from(G)] += lam
    P = sl.cho_solve(sl.cho_factor(G, lower=False, check_finite=False), np.eye(n_items), check_finite=False)
    B = -P / np.diag(P)[None, :]
    np.fill_diagonal(B, 0.0)
    return B


def one(path: str, model: str) -> dict:
    """Fit ``model`` on the dataset at ``path`` in this process; its time and peak memory."""
    from itemsampling.models import EASE, ItemKNN

    train = _train(path)
    N, U = int(train.attrs["n_items"]), int(train.attrs["n_users"])
    base = _rss_mb()
    t = time.perf_counter()
    out = {"n_users": U, "n_items": N, "interactions": len(train)}
    if model == "ease-old":
        _old_ease(train, N)
    else:
        m = {"itemknn": lambda: ItemKNN(q=1.0, k=50), "itemknn-dense": lambda: ItemKNN(q=1.0, k=50, method="dense"),
             "ease": lambda: EASE(lam=500.0)}[model]()
        out["estimate_mb"] = m.item_matrix_bytes(N) / 1e6
        m.fit(train, n_items=N, n_users=U)
    out["seconds"] = time.perf_counter() - t
    out["peak_mb"] = _rss_mb() - base
    if model == "itemknn-dense":  # compare with the sparse path's scores
        users = np.random.default_rng(0).choice(U, size=min(U, 2000), replace=False)
        s = ItemKNN(q=1.0, k=50).fit(train, n_items=N, n_users=U)
        out["max_abs_diff_vs_sparse"] = float(np.abs(s.score(users) - m.score(users)).max())
    return out


def lapack(n: int, threads: int) -> dict:
    from scipy.linalg.lapack import dpotrf, dpotri
    from threadpoolctl import threadpool_limits

    g = np.random.default_rng(0)
    A = np.asfortranarray(g.random((n, 200)) @ g.random((200, n)))
    A[np.diag_indices(n)] += n
    with threadpool_limits(threads, "blas"):
        t = time.perf_counter()
        c, info = dpotrf(A, lower=0, clean=0, overwrite_a=1)
        P, info2 = dpotri(c, lower=0, overwrite_c=1)
        sec = time.perf_counter() - t
    return {"n": n, "threads": threads, "seconds": sec, "info": [int(info), int(info2)],
            "in_place": bool(np.shares_memory(P, A))}


def _child(args: list[str]) -> dict:
    cmd = [sys.executable, __file__, "--child", *args]
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return {"error": f"exit {r.returncode}: {r.stderr.strip()[-400:]}", "wall": time.perf_counter() - t}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/work/shared/data/real")
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS))
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--dense-max-gb", type=float, default=8.0)
    ap.add_argument("--lapack", nargs="*", type=int, default=[])
    ap.add_argument("--out", default=None)
    ap.add_argument("--child", nargs="+", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        if a.child[0] == "lapack":
            print(json.dumps(lapack(int(a.child[1]), int(a.child[2]))))
        else:
            print(json.dumps(one(a.child[0], a.child[1])))
        return
    rows = []
    for n in a.lapack:
        for th in (1, 2):
            r = _child(["lapack", str(n), str(th)])
            print(f"dpotrf+dpotri N={n:,} threads={th}: {r}", flush=True)
            rows.append({"what": "lapack", **r})
    for ds in a.datasets:
        path = str(Path(a.data) / ds)
        for model in a.models:
            from itemsampling.data import load_interactions

            N = int(load_interactions(path).attrs["n_items"])
            need = {"itemknn-dense": 32.0, "ease-old": 24.0}.get(model, 0.0) * N * N
            if need > a.dense_max_gb * 1e9:
                r = {"skipped": f"needs {need / 1e9:.1f} GB > --dense-max-gb {a.dense_max_gb:g}", "n_items": N}
            else:
                r = _child([path, model])
            print(f"{ds:18s} {model:14s} {r}", flush=True)
            rows.append({"dataset": ds, "model": model, **r})
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
