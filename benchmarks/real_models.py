"""Fit time, peak memory and full-ranking accuracy of the models on real catalogues (run by hand, not
by pytest; issue 45, part 2):

    PYTHONPATH=src nice python benchmarks/real_models.py fit [--datasets D ...] [--models M ...] [--out OUT.json]
    PYTHONPATH=src nice python benchmarks/real_models.py als [--datasets D ...] [--seeds 3] [--out OUT.json]
    PYTHONPATH=src nice python benchmarks/real_models.py agree [--datasets D ...]

``D`` is a folder of ``$ITEMSAMPLING_REAL`` (default ``../shared/data/real``; the data are not part of
the project) or a path; the split is :func:`itemsampling.experiments.load_split` (seed 0).

* ``fit``: each model of :data:`itemsampling.experiments.MODEL_SPECS` is fitted in a fresh process
  (so that its peak resident memory is its own): seconds of ``fit``, peak RSS of the process and the
  RSS after loading the split (the data's share); a model the fit refuses (the memory budget) is
  reported as refused. Run it once with ``PYTHONPATH`` on an older checkout's ``src`` for "before".
* ``als``: ALS with the same hyper-parameters (factors, regularisation, iterations, confidence) fitted
  by ``implicit``'s two CPU solvers, conjugate gradient (float32, the package's default) and exact
  Cholesky solves (float64), over ``--seeds`` seeds: seconds and Recall@20 / NDCG@20 of the full
  ranking (every item outside the user's training set), mean and standard error over the seeds.
* ``agree``: the sparse ItemKNN's scores against the previous, dense implementation (read from git at
  ``--dense-commit``) on 500 test users: largest score difference, share of identical top-20 lists
  (the dense one holds four N x N arrays: 6.5 GB at Yelp's 14,284 items; run it where they fit).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REAL = Path(os.environ.get("ITEMSAMPLING_REAL", Path(__file__).resolve().parents[2] / "shared" / "data" / "real"))
DATASETS = ("citeulike-a", "yelp-mcrec", "amazon-book-kgat")
FIT_MODELS = ("itemknn", "Y", "Z", "ease", "userknn", "als", "X")


def _path(d: str) -> str:
    p = Path(d)
    if not p.exists():
        p = REAL / d
    if not p.exists():
        raise SystemExit(f"dataset {d!r} not found (looked in {REAL})")
    return str(p)


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _current_rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return float(line.split()[1]) / 1024.0
    return float("nan")


def _child_fit(dataset: str, model: str) -> dict:
    from itemsampling.data import n_items_of, n_users_of
    from itemsampling.experiments import load_split, make_model

    train, test = load_split(_path(dataset), 0)
    base = _current_rss_mb()
    m = make_model(model, 0)
    t = time.perf_counter()
    try:
        m.fit(train)
    except ValueError as e:
        return {"dataset": dataset, "model": model, "refused": str(e)}
    sec = time.perf_counter() - t
    out = {"dataset": dataset, "model": model, "users": n_users_of(train), "items": n_items_of(train),
           "fit_s": sec, "peak_rss_mb": _rss_mb(), "data_rss_mb": base, "class": type(m).__name__}
    sim = getattr(m, "similarity_", None)
    if sim is not None and hasattr(sim, "nnz"):
        out["similarity_nnz"] = int(sim.nnz)
    return out


def _run_child(args: list[str]) -> dict:
    res = subprocess.run([sys.executable, __file__, "_child", *args], capture_output=True, text=True)
    if res.returncode != 0:
        return {"args": args, "error": res.stderr.strip().splitlines()[-1] if res.stderr.strip() else res.returncode}
    return json.loads(res.stdout.strip().splitlines()[-1])


def cmd_fit(a) -> list[dict]:
    rows = []
    for d in a.datasets:
        for m in a.models:
            r = _run_child(["fit", d, m])
            rows.append(r)
            if "fit_s" in r:
                print(f"{d:18s} {m:8s} {r['class']:8s} N={r['items']:6,d}  fit {r['fit_s']:7.2f} s  peak "
                      f"{r['peak_rss_mb']:8,.0f} MB (data {r['data_rss_mb']:,.0f} MB)"
                      + (f"  nnz {r['similarity_nnz']:,d}" if "similarity_nnz" in r else ""), flush=True)
            else:
                print(f"{d:18s} {m:8s} {r.get('refused') or r.get('error')}", flush=True)
    return rows


def _full_ranking(model, train, test, K: int = 20) -> tuple[float, float]:
    from itemsampling.ranking import global_ranks

    R = global_ranks(model, train, test, rng=0)
    hit = R <= K
    return float(hit.mean()), float(np.mean(np.where(hit, 1.0 / np.log2(R + 1.0), 0.0)))


def _child_als(dataset: str, solver: str, seed: int, factors: int, lam: float, alpha: float, iterations: int) -> dict:
    from itemsampling.experiments import load_split
    from itemsampling.models import ALS

    train, test = load_split(_path(dataset), 0)
    m = ALS(factors=factors, lam=lam, alpha=alpha, iterations=iterations, rng=seed, use_cg=solver == "cg",
            num_threads=2)
    t = time.perf_counter()
    m.fit(train)
    sec = time.perf_counter() - t
    recall, ndcg = _full_ranking(m, train, test)
    return {"dataset": dataset, "solver": solver, "seed": seed, "fit_s": sec, "recall@20": recall, "ndcg@20": ndcg,
            "peak_rss_mb": _rss_mb()}


def cmd_als(a) -> list[dict]:
    rows = []
    for d in a.datasets:
        for solver in ("cg", "cholesky"):
            runs = [_run_child(["als", d, solver, str(s), str(a.factors), str(a.lam), str(a.alpha), str(a.iterations)])
                    for s in range(a.seeds)]
            rows += runs
            ok = [r for r in runs if "fit_s" in r]
            if not ok:
                print(d, solver, runs)
                continue
            def ms(key):
                v = np.array([r[key] for r in ok])
                return v.mean(), (v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else float("nan"))
            (t, ts), (rc, rs), (nd, ns) = ms("fit_s"), ms("recall@20"), ms("ndcg@20")
            print(f"{d:18s} {solver:9s} fit {t:6.2f} ± {ts:.2f} s  Recall@20 {rc:.4f} ± {rs:.4f}  "
                  f"NDCG@20 {nd:.4f} ± {ns:.4f}  ({len(ok)} seeds)", flush=True)
    return rows


def _previous_models(commit: str):
    """The module ``itemsampling.models`` as it was at ``commit`` (the dense ItemKNN), loaded beside
    the current one."""
    import importlib.util

    import itemsampling  # noqa: F401  (the package its relative imports resolve in)

    root = Path(__file__).resolve().parents[1]
    code = subprocess.run(["git", "-C", str(root), "show", f"{commit}:src/itemsampling/models.py"],
                          capture_output=True, text=True, check=True).stdout
    spec = importlib.util.spec_from_loader("itemsampling._models_previous", loader=None)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "itemsampling"
    exec(compile(code, f"{commit}:models.py", "exec"), mod.__dict__)
    return mod


def cmd_agree(a) -> list[dict]:
    """The sparse ItemKNN against the previous dense implementation (``--dense-commit``) on 500 test
    users: the largest score difference, and the share of users whose top-20 lists are the same."""
    from itemsampling.experiments import MODEL_SPECS, load_split
    from itemsampling.models import ItemKNN

    old = _previous_models(a.dense_commit)
    rows = []
    for d in a.datasets:
        train, test = load_split(_path(d), 0)
        users = np.random.default_rng(0).choice(np.unique(test["user"].to_numpy()), 500, replace=False)
        for name in a.models:
            if MODEL_SPECS[name][0] != "ItemKNN":
                continue
            params = MODEL_SPECS[name][1]
            t = time.perf_counter()
            new = ItemKNN(**params).fit(train).score(users)
            t_new = time.perf_counter() - t
            t = time.perf_counter()
            ref = old.ItemKNN(**params).fit(train).score(users)
            t_old = time.perf_counter() - t
            top = lambda s: np.argsort(-s, axis=1, kind="stable")[:, :20]  # noqa: E731
            same = float(np.mean([set(x) == set(y) for x, y in zip(top(new), top(ref))]))
            err = float(np.abs(new - ref).max())
            rows.append({"dataset": d, "model": name, "max_abs_score_difference": err, "same_top20": same,
                         "sparse_fit_and_score_s": t_new, "dense_fit_and_score_s": t_old})
            print(f"{d:18s} {name:8s} max |sparse - dense| {err:.2e}  same top-20 lists {same:.1%}  "
                  f"(sparse {t_new:.1f} s, dense {t_old:.1f} s)", flush=True)
            del ref
    return rows


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_child":
        kind, rest = argv[1], argv[2:]
        if kind == "fit":
            out = _child_fit(*rest)
        else:
            d, solver, seed, factors, lam, alpha, it = rest
            out = _child_als(d, solver, int(seed), int(factors), float(lam), float(alpha), int(it))
        print(json.dumps(out))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=("fit", "als", "agree"))
    p.add_argument("--datasets", nargs="+", default=list(DATASETS))
    p.add_argument("--models", nargs="+", default=list(FIT_MODELS))
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--factors", type=int, default=64)
    p.add_argument("--lam", type=float, default=10.0)
    p.add_argument("--alpha", type=float, default=0.2)
    p.add_argument("--iterations", type=int, default=15)
    p.add_argument("--dense-commit", default="4aed960", help="agree: the commit of the dense ItemKNN")
    p.add_argument("--out")
    a = p.parse_args(argv)
    rows = {"fit": cmd_fit, "als": cmd_als, "agree": cmd_agree}[a.command](a)
    if a.out:
        Path(a.out).write_text(json.dumps({"command": a.command, "python_path": os.environ.get("PYTHONPATH", ""),
                                           "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
