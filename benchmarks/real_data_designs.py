"""The evaluation designs of :func:`itemsampling.evaluation.sampled_ranks` on a real dataset: error against
full ranking, item scorings, wall time (issue 38, point 3).

Usage::

    python benchmarks/real_data_designs.py PATH [--models svd128 popular] [--users M] [--seed 0] [--json OUT]

``PATH`` is one of the shared datasets (never copied into the repository):

* ``amazon-book-kgat`` (a folder with ``train.txt`` and ``test.txt``, one line per user ``user item item
  ...``, 0-based; the KGAT split): train = train.txt; each user's held-out item is one item of the user's
  test line drawn with the seeded generator; the user's other test items are excluded with the training
  items;
* ``yelp-mcrec`` (``user_business.dat``: ``user<TAB>business<TAB>stars``, 1-based ids, every rating an
  interaction) and ``citeulike-a`` (``users.dat``: line u = ``count item item ...``, 0-based items): one
  interaction per user with at least two, drawn with the seeded generator, is held out; the rest is train.

Each row's pool is every item but the user's training items and other test items (``exclude``). The
models are the package's own: ``svd<d>``, PureSVD of rank d (:mod:`itemsampling.catalogue`: the top d
right singular vectors V of the binary training matrix, scores x_u V V^T); ``popular`` (training counts);
``als<d>``, :class:`itemsampling.models.ALS` with d factors and its defaults (Krichene & Rendle's
lambda = 10, alpha = 0.2; 15 iterations, one thread). The scorer gathers the item factors (``einsum``)
for a sampled design and takes one matrix product when asked for the whole catalogue (``design="full"``).

Designs, each through ``sampled_ranks``: ``full`` on every row (the truth); ``fixed`` (99 uniform decoys,
n = 100, the common protocol, and n = 500); ``adaptive`` (TORS Algorithm 1, n0 = 100, n_max = 3,200);
``users`` (``design="full"`` on ``n_users`` users: TORS Eq. 47's size for a margin of 0.01 at 95 % with the
worst-case variance 1/4 and the finite-population correction, the plan's user-sampling design; 9,604 in an
infinite population). Error: the average relative error of
Recall@1..50 (TORS Table 4's measure), each design's estimate from
``estimate_metrics(table.rank, table.n_items, table.sample_size, ["recall"], range(1, 51), ["mle"])``
(per-user pools, with-replacement likelihood) against the full ranking's Recall@K; user sampling's
estimate is the mean over its users (method ``"sampled"``: its ranks are exact). Item scorings as a
fraction of full ranking's (N per row), the wall time of ``sampled_ranks`` and of the estimate. Ties count
in the target's favour (:mod:`itemsampling.evaluation`), in the truth and in every design alike.

Run it niced on a shared machine (``nice -n 10``); it holds BLAS to one thread.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from itemsampling.catalogue import _item_factors
from itemsampling.estimators import estimate_metrics
from itemsampling.evaluation import sampled_ranks
from itemsampling.plan import _users_for_margin
from itemsampling.users import critical_value

KS = range(1, 51)


def _lines(path: Path):
    with open(path) as fh:
        for line in fh:
            parts = line.split()
            if parts:
                yield [int(x) for x in parts]


def load(path: Path, rng: np.random.Generator):
    """``(X_train csr, users, targets, exclude csr, n_items, name)`` of one shared dataset (module docstring)."""
    path = Path(path)
    if (path / "train.txt").exists() and (path / "test.txt").exists():
        train = {row[0]: row[1:] for row in _lines(path / "train.txt")}
        test = {row[0]: row[1:] for row in _lines(path / "test.txt") if len(row) > 1}
        n_users = 1 + max(max(train), max(test))
        n_items = 1 + max(max((max(v) for v in train.values() if v), default=0),
                          max(max(v) for v in test.values()))
        tr_u = np.concatenate([np.full(len(v), u) for u, v in train.items() if v])
        tr_i = np.concatenate([np.asarray(v) for v in train.values() if v])
        users = np.array(sorted(u for u in test if train.get(u)), dtype=np.int64)
        targets = np.empty(users.size, dtype=np.int64)
        ex_u, ex_i = [], []
        for j, u in enumerate(users):
            items = np.asarray(test[u])
            pick = int(rng.integers(items.size))
            targets[j] = items[pick]
            other = np.delete(items, pick)
            ex_u.append(np.full(other.size, u))
            ex_i.append(other)
        X = sp.csr_matrix((np.ones(tr_u.size, np.float32), (tr_u, tr_i)), shape=(n_users, n_items))
        X.sum_duplicates()
        X.data[:] = 1
        other = sp.csr_matrix((np.ones(sum(a.size for a in ex_u)), (np.concatenate(ex_u), np.concatenate(ex_i))),
                              shape=(n_users, n_items))
        E = (X + other).tocsr()
        E.data[:] = 1
        return X, users, targets, E, n_items, "amazon-book-kgat"
    if (path / "user_business.dat").exists():
        raw = np.loadtxt(path / "user_business.dat", dtype=np.int64, usecols=(0, 1))
        u, i = raw[:, 0] - 1, raw[:, 1] - 1
        name = "yelp-mcrec"
    elif (path / "users.dat").exists():
        u_l, i_l = [], []
        for uid, row in enumerate(_lines(path / "users.dat")):
            if row[0] != len(row) - 1:
                raise ValueError(f"{path / 'users.dat'}, line {uid + 1}: count {row[0]} but {len(row) - 1} items")
            u_l.append(np.full(len(row) - 1, uid))
            i_l.append(np.asarray(row[1:]))
        u, i = np.concatenate(u_l), np.concatenate(i_l)
        name = "citeulike-a"
    else:
        raise ValueError(f"{path}: not a shared dataset folder (train.txt + test.txt, user_business.dat or users.dat)")
    n_users, n_items = int(u.max()) + 1, int(i.max()) + 1
    A = sp.csr_matrix((np.ones(u.size, np.float32), (u, i)), shape=(n_users, n_items))
    A.sum_duplicates()
    A.data[:] = 1
    counts = np.diff(A.indptr)
    users = np.flatnonzero(counts >= 2).astype(np.int64)
    pick = A.indptr[users] + (rng.random(users.size) * counts[users]).astype(np.int64)
    targets = A.indices[pick].astype(np.int64)
    X = A.copy()
    X.data[pick] = 0
    X.eliminate_zeros()
    return X, users, targets, X, n_items, name


def scorer(name: str, X: sp.csr_matrix, rng: np.random.Generator):
    """``score(users, items)`` of a model fitted to X."""
    N = X.shape[1]
    if name == "popular":
        pop = np.asarray(X.sum(axis=0)).ravel().astype(np.float32)

        def score(users, items):
            return pop[items]

        return score
    als = re.fullmatch(r"als([1-9][0-9]*)", name)
    if als:
        import pandas as pd

        from itemsampling.models import ALS

        coo = X.tocoo()
        train = pd.DataFrame({"user": coo.row.astype(np.int64), "item": coo.col.astype(np.int64)})
        fitted = ALS(factors=int(als.group(1)), rng=rng, num_threads=1).fit(train, n_items=N, n_users=X.shape[0])
        P = fitted.user_factors_.astype(np.float32)
        V = fitted.item_factors_.astype(np.float32)
    else:
        d = int(re.fullmatch(r"svd([1-9][0-9]*)", name).group(1))
        V = _item_factors(X.astype(np.float32), d, rng)
        P = np.asarray(X @ V, dtype=np.float32)

    def score(users, items):
        if items.shape[1] == N and items.strides[0] == 0:  # the whole catalogue: one product
            return P[users] @ V.T
        return np.einsum("bf,bkf->bk", P[users], V[items])

    return score


def recall_curve(table, method="mle"):
    with warnings.catch_warnings():  # the note on cut-offs below one kernel width: the error below shows it
        warnings.simplefilter("ignore")
        est = estimate_metrics(table["rank"].to_numpy(), table["n_items"].to_numpy(), table["sample_size"].to_numpy(),
                               ["recall"], list(KS), [method])
    return np.asarray(est[method]["recall"], dtype=np.float64)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("path")
    p.add_argument("--models", nargs="+", default=["svd128", "popular"])
    p.add_argument("--users", type=int, default=None, help="evaluate a random sample of this many test rows")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    X, users, targets, E, N, name = load(Path(args.path), rng)
    if args.users is not None and args.users < users.size:
        keep = np.sort(rng.choice(users.size, size=args.users, replace=False))
        users, targets = users[keep], targets[keep]
    print(f"{name}: {X.shape[0]:,} users, N = {N:,} items, {X.nnz:,} training interactions, {users.size:,} test "
          f"rows, loaded in {time.perf_counter() - t0:.1f} s", flush=True)
    # the plan's user-sampling size with the worst-case variance 1/4: margin 0.01 at 95 %, TORS Eq. 47 with the
    # finite-population correction (9,604 users in an infinite population)
    m_users = _users_for_margin(0.5, np.unique(users).size, critical_value(0.95), 0.01)
    designs = {"fixed n=100": dict(design="fixed", sample_size=100),
               "fixed n=500": dict(design="fixed", sample_size=500),
               "adaptive 100-3200": dict(design="adaptive", initial_size=100, max_size=3200),
               f"users m={m_users}": dict(design="full", n_users=m_users)}
    out = {"dataset": name, "n_items": N, "rows": int(users.size), "seed": args.seed, "models": {}}
    for model in args.models:
        t = time.perf_counter()
        score = scorer(model, X, np.random.default_rng([args.seed, 1]))
        fit_s = time.perf_counter() - t
        full = sampled_ranks(score, users, targets, exclude=E, n_items=N, design="full")
        truth = np.array([np.mean(full["rank"].to_numpy() <= k) for k in KS])
        res = {"fit_seconds": fit_s, "truth_recall@10": float(truth[9]), "truth_recall@50": float(truth[49]),
               "full": {"scorings": full.attrs["scorings"], "seconds": full.attrs["seconds"],
                        "score_seconds": full.attrs["score_seconds"]}}
        print(f"  {model}: fitted in {fit_s:.1f} s; full ranking {full.attrs['seconds']:.1f} s "
              f"(scorer {full.attrs['score_seconds']:.1f} s), Recall@10 = {truth[9]:.4f}, @50 = {truth[49]:.4f}",
              flush=True)
        for label, kw in designs.items():
            tab = sampled_ranks(score, users, targets, exclude=E, n_items=N, rng=np.random.default_rng([args.seed, 2]),
                                **kw)
            t = time.perf_counter()
            est = recall_curve(tab, "sampled" if kw["design"] == "full" else "mle")
            est_s = time.perf_counter() - t
            ok = truth > 0
            err = float(np.mean(np.abs(est[ok] - truth[ok]) / truth[ok]))
            frac = tab.attrs["scorings"] / full.attrs["scorings"]
            own = (tab.attrs["seconds"] - tab.attrs["score_seconds"]) / max(tab.attrs["score_seconds"], 1e-12)
            res[label] = {"error": err, "scorings": tab.attrs["scorings"], "scoring_fraction": frac,
                          "items_per_row": tab.attrs["scorings"] / len(tab), "seconds": tab.attrs["seconds"],
                          "score_seconds": tab.attrs["score_seconds"], "overhead": own, "estimate_seconds": est_s,
                          "call": tab.attrs["call"]}
            print(f"    {label:<20} error {100 * err:5.1f} %   scorings {100 * frac:6.2f} % of full "
                  f"({tab.attrs['scorings'] / len(tab):,.0f} a row)   sampled_ranks {tab.attrs['seconds']:.1f} s "
                  f"(own {100 * own:.0f} % over the scorer)   estimate {est_s:.1f} s", flush=True)
        out["models"][model] = res
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    with threadpool_limits(1):  # one BLAS thread: the machine is shared
        sys.exit(main())
