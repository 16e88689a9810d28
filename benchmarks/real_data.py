"""The default ``estimate`` on real data, against the full-ranking truth (run by hand, not by pytest):

    PYTHONPATH=src nice python benchmarks/real_data.py PATH [--users 30000] [--repeats 1] [--out OUT.json]

PATH is a dataset the project does not ship, in a format researchers publish (a folder with a
user-line split ``train.txt``/``test.txt``, NGCF/LightGCN/KGAT; a count-prefixed ``users.dat``,
CiteULike; a ``user item [rating]`` table): read by :func:`itemsampling.data.load_interactions` when
the package has it, else by the small readers below. Steps, each reproducible from ``--seed``:

1. *Split.* A user-line split keeps its own: one held-out item per user, drawn from the user's test
   line; otherwise one interaction per user is held out. Users with no training item are dropped; at
   most ``--users`` test users, drawn at random.
2. *Models*: three of the package's own (:mod:`itemsampling.models`): ``Popular`` and ``ALS`` with 16
   and 128 factors, fitted on the training interactions.
3. *Truth*: each test user's rank of the held-out item among the user's **pool** (every item but the
   user's training items and other held-out items; the target counted in), 1 + the pool items scoring
   strictly higher, and the users' own Recall@K / NDCG@K.
4. *Sampled evaluations*: for n = 100 and n = 500, n - 1 decoys per user drawn uniformly with
   replacement from the pool (the kernel the estimators assume), the sampled rank 1 + the decoys
   scoring strictly higher.
5. *The default* ``estimate`` (:func:`itemsampling.cli.estimate_table` on the rank file with a
   per-user ``n_items`` column: method MLE, 95 % intervals, ``interval="kept"``): per model, metric
   (Recall, NDCG) and K (10, 20, 50), whether the interval covers the truth and whether the row is
   marked identified; its wall time.
6. *TORS Table 4's measure*: the average relative error of Recall@K over K = 1..50,
   :math:`\\frac1{50}\\sum_K |\\hat T_K - T_K| / T_K`, per estimator (MLE, MES, BV_MES, MN_MES), mean over
   ``--repeats`` sampled evaluations.

7. *Popularity-weighted decoys* (``--weighted-users``, default 3,000): for a random subset of the test
   users, 99 decoys drawn with replacement from the pool with probabilities proportional to the
   items' training popularity (:func:`itemsampling.candidates.draw_weighted_decoys`), written as the
   long file of ``estimate --weighted`` (columns user, prob, above, model, n_items) and run through its
   default (:func:`itemsampling.cli.estimate_weighted_table`); coverage of those users' full-ranking
   truth.

Prints a table and writes the figures to ``--out`` (JSON), with the dataset's files, sizes and sha256.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

from itemsampling.candidates import draw_weighted_decoys
from itemsampling.cli import estimate_table, estimate_weighted_table
from itemsampling.estimators import estimate_metrics
from itemsampling.inputs import read_rank_file, read_weighted_table
from itemsampling.metrics import metric_function
from itemsampling.models import ALS, Popular

KS = (10, 20, 50)
METRICS = ("recall", "ndcg")
TABLE4 = ("mle", "mes", "bv_mes", "mn_mes")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _user_lines(path: Path, count_prefixed: bool = False):
    users, items = [], []
    with open(path) as fh:
        for u, line in enumerate(fh):
            parts = line.split()
            if not parts:
                continue
            if count_prefixed:
                ids = parts[1:]
                user = u
            else:
                user, ids = int(parts[0]), parts[1:]
            users.extend([user] * len(ids))
            items.extend(int(x) for x in ids)
    return pd.DataFrame({"user": np.array(users, np.int64), "item": np.array(items, np.int64)})


def load(path: Path):
    """``(train, test_pool, files)``: the interactions (original ids), the held-out candidates per user
    (``None``: hold one out of each user's interactions), and the files read."""
    path = Path(path)
    if path.is_dir() and (path / "train.txt").exists():
        files = [path / "train.txt"] + ([path / "test.txt"] if (path / "test.txt").exists() else [])
        train = _user_lines(files[0])
        test = _user_lines(files[1]) if len(files) > 1 else None
        return train, test, files
    f = path / "users.dat" if path.is_dir() and (path / "users.dat").exists() else path
    if f.is_dir():
        cands = sorted(p for p in f.iterdir() if p.is_file() and not p.name.startswith(".") and p.suffix != ".md")
        f = cands[0]
    first = f.open().readline().split()
    if f.name == "users.dat" or (len(first) > 1 and int(first[0]) == len(first) - 1 and "\t" not in f.open().readline()):
        return _user_lines(f, count_prefixed=True), None, [f]
    df = pd.read_csv(f, sep=None, engine="python", header=None, usecols=[0, 1], names=["user", "item"])
    return df, None, [f]


def split(train, test, max_users, g):
    """0-based ids over train and test together; one held-out item per user; the exclusion matrix."""
    if test is None:  # hold one interaction out of each user with at least two
        train = train.drop_duplicates()
        order = g.permutation(len(train))
        shuffled = train.iloc[order]
        counts = shuffled.groupby("user")["item"].transform("size")
        shuffled = shuffled[counts >= 2]
        held = shuffled.drop_duplicates("user")
        train = shuffled.drop(held.index)
        test_all = held
    else:
        test_all = test.drop_duplicates()
        train = train.drop_duplicates()
    users = np.union1d(train.user.unique(), test_all.user.unique())
    items = np.union1d(train.item.unique(), test_all.item.unique())
    umap = pd.Series(np.arange(users.size), index=users)
    imap = pd.Series(np.arange(items.size), index=items)
    tr = pd.DataFrame({"user": umap[train.user].to_numpy(), "item": imap[train.item].to_numpy()})
    te = pd.DataFrame({"user": umap[test_all.user].to_numpy(), "item": imap[test_all.item].to_numpy()})
    M, N = users.size, items.size
    has_train = np.bincount(tr.user, minlength=M) > 0
    te = te[has_train[te.user]]
    # one held-out item per user, at random, and at most max_users users
    te = te.iloc[g.permutation(len(te))].drop_duplicates("user")
    if len(te) > max_users:
        te = te.iloc[np.sort(g.choice(len(te), max_users, replace=False))]
    te = te.sort_values("user")
    excl = sp.csr_matrix((np.ones(len(tr) + len(test_all)), (np.concatenate([tr.user, umap[test_all.user]]),
                                                              np.concatenate([tr.item, imap[test_all.item]]))),
                         shape=(M, N))
    excl.data[:] = 1.0
    excl.sum_duplicates()
    excl.data[:] = 1.0
    tr.attrs.update({"n_users": M, "n_items": N})
    return tr, te.user.to_numpy(), te.item.to_numpy(), excl, M, N


def rank_all(model, users, targets, excl, N, sizes, g, batch=512):
    """Full-pool ranks, pool sizes, and for each n in ``sizes`` the sampled ranks (decoys uniform with
    replacement from the pool; ``g`` a list of ints, the seed of each size's own stream with n appended)."""
    full = np.empty(users.size, np.int64)
    pools = np.empty(users.size, np.int64)
    sampled = {n: np.empty(users.size, np.int64) for n in sizes}
    gens = {n: np.random.default_rng([*g, n]) for n in sizes}  # one stream per n: a size's draws do not
    # depend on which other sizes are asked for
    for s in range(0, users.size, batch):
        u, t = users[s:s + batch], targets[s:s + batch]
        S = model.score(u)
        rows = np.arange(u.size)
        ts = S[rows, t]
        X = excl[u].toarray() > 0
        X[rows, t] = False  # the target is in its own pool
        higher = (S > ts[:, None]) & ~X
        full[s:s + batch] = 1 + higher.sum(axis=1)
        pools[s:s + batch] = N - X.sum(axis=1)
        for n in sizes:
            # decoys: uniform over the pool without the target, with replacement (rejection from all items)
            pool_wo = ~X
            pool_wo[rows, t] = False
            cum = np.cumsum(pool_wo, axis=1)
            k = cum[:, -1]
            draw = (gens[n].random((u.size, n - 1)) * k[:, None]).astype(np.int64)
            idx = np.array([np.searchsorted(cum[i], draw[i], side="right") for i in range(u.size)])
            sampled[n][s:s + batch] = 1 + (S[rows[:, None], idx] > ts[:, None]).sum(axis=1)
    return full, pools, sampled


def weighted_draws(model, users, targets, excl, N, popularity, n_decoys, seed, batch=512, replacement=True):
    """``(probs, above, pools)`` of ``n_decoys`` popularity-weighted decoys per user, drawn with
    replacement (or successively without) from the pool less the target (``above``: the decoy scores
    strictly higher)."""
    g = np.random.default_rng(seed)
    probs, above, pools = [], [], []
    for s in range(0, users.size, batch):
        u, t = users[s:s + batch], targets[s:s + batch]
        S = model.score(u)
        rows = np.arange(u.size)
        ts = S[rows, t]
        X = excl[u].toarray() > 0
        X[rows, t] = False
        pools.append(N - X.sum(axis=1))
        X[rows, t] = True  # never a decoy
        higher = (S > ts[:, None]) & ~X
        p, a = draw_weighted_decoys(higher, X, popularity, n_decoys, replacement=replacement, rng=g)
        probs.append(p)
        above.append(a)
    return np.vstack(probs), np.vstack(above), np.concatenate(pools)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path")
    ap.add_argument("--users", type=int, default=30_000)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 500])
    ap.add_argument("--methods", nargs="+", default=["mle"],
                    help="methods of the default estimate to run and compare (e.g. mle auto); with auto, the TORS "
                         "Table 4 measure includes auto")
    ap.add_argument("--weighted-users", type=int, default=3_000,
                    help="test users for the popularity-weighted part (0: skip it)")
    ap.add_argument("--weighted-only", action="store_true", help="run only the popularity-weighted part")
    ap.add_argument("--without-replacement", action="store_true",
                    help="draw the popularity-weighted decoys without replacement (successive sampling, the "
                         "estimate --without-replacement design)")
    ap.add_argument("--compare-bootstrap", action="store_true",
                    help="also run estimate with --interval bootstrap (the estimator's own interval, the default "
                         "before) and report its coverage beside the default's")
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    g = np.random.default_rng(a.seed)
    t0 = time.perf_counter()
    train, test, files = load(Path(a.path))
    tr, users, targets, excl, M, N = split(train, test, a.users, g)
    print(f"{a.path}: {M:,} users, {N:,} items, {len(tr):,} training interactions, {users.size:,} test users "
          f"({time.perf_counter() - t0:.1f} s)", flush=True)
    models = {"popular": Popular(), "als16": ALS(factors=16, rng=a.seed), "als128": ALS(factors=128, rng=a.seed)}
    out = {"dataset": {"path": str(a.path), "files": [{"name": f.name, "bytes": f.stat().st_size,
                                                          "sha256": _sha256(f)} for f in files],
                       "users": int(M), "items": int(N), "train": int(len(tr)), "test_users": int(users.size)},
           "seed": a.seed, "repeats": a.repeats, "coverage": {}, "table4": {}, "seconds": {}}
    truth, ranks = {}, {}
    for name, model in models.items():
        t = time.perf_counter()
        model.fit(tr, n_items=N, n_users=M)
        full, pools, sampled = rank_all(model, users, targets, excl, N, [] if a.weighted_only else a.sizes,
                                        [a.seed, 1])
        truth[name] = full
        ranks[name] = (pools, sampled)
        print(f"  {name}: fitted and ranked in {time.perf_counter() - t:.1f} s; median full rank {np.median(full):.0f}"
              f" of {np.median(pools):.0f}", flush=True)
    if a.weighted_users:
        run_weighted(a, models, truth, users, targets, excl, N, tr, out)
    for n in ([] if a.weighted_only else a.sizes):
        rows = []
        for name in models:
            pools, sampled = ranks[name]
            rows.append(pd.DataFrame({"model": name, "user": users, "rank": sampled[n], "n_items": pools}))
        f = Path(f"/tmp/real_data_ranks_{n}.csv")
        pd.concat(rows).to_csv(f, index=False)
        table = read_rank_file(f, None, n)
        for meth in a.methods:
            t = time.perf_counter()
            res = estimate_table(table, list(METRICS), list(KS), method=meth, ci=0.95, n_boot=200, seed=a.seed)
            secs = time.perf_counter() - t
            out["seconds"][f"estimate n={n}" + ("" if meth == "mle" else f" --method {meth}")] = secs
            cov = []
            for row in res["estimates"]:
                R = truth[row["model"]]
                tv = float(np.mean(metric_function(row["metric"], row["k"], N)(R)))
                cov.append({"model": row["model"], "metric": row["metric"], "k": row["k"], "truth": tv,
                            "estimate": row["estimate"], "low": row["low"], "high": row["high"],
                            "covered": bool(row["low"] <= tv <= row["high"]), "identified": row["identified"],
                            "interval": row["interval"], "abs_error": abs(row["estimate"] - tv)})
            out.setdefault("coverage" if meth == "mle" else f"coverage_{meth}", {})[n] = cov
            print(f"\n n = {n}: default estimate, method {meth} ({len(pd.concat(rows)):,} rows) in {secs:.1f} s; "
                  f"{sum(c['covered'] for c in cov)} of {len(cov)} intervals cover the full-ranking truth; "
                  f"{sum(not c['identified'] for c in cov)} rows not identified; median relative error "
                  f"{100 * np.median([c['abs_error'] / c['truth'] for c in cov]):.1f} %")
            if meth != "mle" and "mle" in a.methods:
                base = {(c["model"], c["metric"], c["k"]): c["abs_error"] for c in out["coverage"][n]}
                wins = sum(c["abs_error"] <= base[c["model"], c["metric"], c["k"]] + 1e-12 for c in cov)
                out.setdefault("as_accurate", {})[f"{meth} n={n}"] = wins
                print(f"   {meth}'s estimate is at least as close to the truth as MLE's in {wins} of {len(cov)} rows")
        cov = out["coverage"][n] if "mle" in a.methods else cov
        for c in cov:
            print(f"   {c['model']:8s} {c['metric']}@{c['k']:<3d} truth {c['truth']:.4f}  estimate {c['estimate']:.4f}  "
                  f"[{c['low']:.4f}, {c['high']:.4f}] {c['interval']:9s} {'covered' if c['covered'] else 'MISSED'}"
                  f"{'' if c['identified'] else '  (not identified)'}")
        if a.compare_bootstrap:
            t = time.perf_counter()
            boot = estimate_table(table, list(METRICS), list(KS), ci=0.95, n_boot=200, seed=a.seed, interval="bootstrap")
            secs_b = time.perf_counter() - t
            hits = []
            for row in boot["estimates"]:
                tv = float(np.mean(metric_function(row["metric"], row["k"], N)(truth[row["model"]])))
                hits.append(bool(row["low"] <= tv <= row["high"]))
            out["coverage_bootstrap"] = {**out.get("coverage_bootstrap", {}), n: hits}
            out["seconds"][f"estimate --interval bootstrap n={n}"] = secs_b
            print(f"   --interval bootstrap (the estimator's bootstrap everywhere): {sum(hits)} of {len(hits)} cover "
                  f"({secs_b:.1f} s)")
        # TORS Table 4: average relative error of Recall@1..50
        table4 = TABLE4 + (("auto",) if "auto" in a.methods else ())
        err = {m: [] for m in table4}
        for name in models:
            R = truth[name]
            tv = np.array([np.mean(R <= k) for k in range(1, 51)])
            pools, sampled = ranks[name]
            for rep in range(a.repeats):
                if rep == 0:
                    r = sampled[n]
                else:
                    _, _, s2 = rank_all(models[name], users, targets, excl, N, [n], [a.seed, 2, rep])
                    r = s2[n]
                est = estimate_metrics(r, pools, n, ["recall"], list(range(1, 51)), list(TABLE4), gamma=0.1)
                if "auto" in table4:  # auto takes no options of one method (gamma)
                    a_est = estimate_metrics(r, pools, n, ["recall"], list(range(1, 51)), ["auto"])["auto"]
                    est["auto"] = {"recall": a_est["recall"].estimate}  # an AutoEstimate: its point estimates
                for m in table4:
                    e = np.asarray(est[m]["recall"])
                    ok = tv > 0
                    err[m].append((name, rep, float(np.mean(np.abs(e[ok] - tv[ok]) / tv[ok]) * 100)))
        out["table4"][n] = err
        print(f"   TORS Table 4 measure (average relative error of Recall@1..50, %), n = {n}:")
        for name in models:
            print(f"     {name:8s} " + "  ".join(f"{m} {np.mean([e for mo, _, e in err[m] if mo == name]):6.2f}"
                                               for m in table4))
    out["seconds"]["total"] = time.perf_counter() - t0
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1, default=str))
    return 0


def run_weighted(a, models, truth, users, targets, excl, N, tr, out):
    """Step 7 of the module docstring."""
    g = np.random.default_rng([a.seed, 7])
    take = np.sort(g.choice(users.size, min(a.weighted_users, users.size), replace=False))
    popularity = np.bincount(tr.item.to_numpy(), minlength=N).astype(np.float64)
    frames = []
    for name, model in models.items():
        p, ab, pools = weighted_draws(model, users[take], targets[take], excl, N, popularity, 99, [a.seed, 7, 1],
                                      replacement=not a.without_replacement)
        d = p.shape[1]
        frames.append(pd.DataFrame({"model": name, "user": np.repeat(users[take], d), "prob": p.ravel(),
                                    "above": ab.ravel().astype(int), "n_items": np.repeat(pools, d)}))
    f = Path("/tmp/real_data_weighted.csv")
    pd.concat(frames).to_csv(f, index=False)
    table = read_weighted_table(f)
    for kind in ("kept", "bootstrap") if a.compare_bootstrap else ("kept",):
        t = time.perf_counter()
        res = estimate_weighted_table(table, list(METRICS), list(KS), ci=0.95, n_boot=200, seed=a.seed,
                                      design="successive" if a.without_replacement else "with_replacement",
                                      interval=kind)
        secs = time.perf_counter() - t
        cov = []
        for row in res["estimates"]:
            R = truth[row["model"]][take]
            tv = float(np.mean(metric_function(row["metric"], row["k"], N)(R)))
            cov.append({"model": row["model"], "metric": row["metric"], "k": row["k"], "truth": tv,
                        "estimate": row["estimate"], "low": row["low"], "high": row["high"],
                        "covered": bool(row["low"] <= tv <= row["high"]), "identified": row["identified"],
                        "interval": row["interval"]})
        out.setdefault("weighted", {})[kind] = {"rows": cov, "seconds": secs, "users": int(take.size)}
        print(f"\n popularity-weighted, 99 decoys {'without' if a.without_replacement else 'with'} replacement, "
              f"{take.size:,} users, --interval {kind}: "
              f"{sum(c['covered'] for c in cov)} of {len(cov)} intervals cover those users' full-ranking truth "
              f"({secs:.1f} s)")
        for c in cov:
            print(f"   {c['model']:8s} {c['metric']}@{c['k']:<3d} truth {c['truth']:.4f}  estimate {c['estimate']:.4f}  "
                  f"[{c['low']:.4f}, {c['high']:.4f}] {c['interval']:9s} {'covered' if c['covered'] else 'MISSED'}")


if __name__ == "__main__":
    sys.exit(main())
