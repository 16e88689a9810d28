"""Chapter 10's decoy draws (``candidates.draw_decoys``) and the catalogue ranks of chapters 8-9
(``catalogue._model_ranks``) against the implementations they replaced (run by hand, not by pytest):

1. *Decoys*: ``_gumbel_top`` (uniform draws, a threshold, the candidates' keys only) against
   ``_gumbel_top_reference`` (every user x item Gumbel key, a partition of every row), on chapter
   10's split of ``--dataset`` (default sim-ml1m; a folder of real data, cut to the chapter's
   ``max_cells`` = 10^8 users x items as the chapter cuts it), for both strategies and the decoy sizes
   10, 100 and 2,000 that fit; the decoys must be equal, bit for bit.
2. *Catalogue ranks* (``--catalogue``, e.g. sim-ml20m): ``_model_ranks`` of ``popular``, ``svd16`` and
   ``svd64`` against the previous code (``--previous FILE``: the module as it was, e.g. ``git show
   3ace266:src/itemsampling/catalogue.py > /tmp/old_catalogue.py``); the ranks must be equal.

One BLAS thread, one process.

    PYTHONPATH=src python benchmarks/decoy_draws.py [--dataset PATH] [--catalogue sim-ml20m --previous FILE]
"""

import argparse
import importlib.util
import time

import numpy as np
from threadpoolctl import threadpool_limits

from itemsampling import catalogue as C
from itemsampling.candidates import _gumbel_top, _gumbel_top_reference, _pool_counts, split_holdout
from itemsampling.data import drop_short_users, sample_users
from itemsampling.data.simulator import load_simulation
from itemsampling.experiments import load_interactions


def decoys(dataset: str) -> None:
    if dataset.startswith("sim-"):
        df = load_simulation(dataset).observed
    else:
        df = load_interactions(dataset)
    df, _ = drop_short_users(df, 2)
    N = int(df.attrs.get("n_items", df["item"].max() + 1))
    if df["user"].nunique() * N > 100_000_000:
        df = sample_users(df, 100_000_000 // N, rng=np.random.default_rng([0, 13]))
    split = split_holdout(df, 0.2, rng=np.random.default_rng(0))
    print(f"{dataset}: {split.users.size:,} test users x {N:,} items")
    for strategy in ("uniform", "popularity"):
        counts, logw, seen = _pool_counts(split, strategy)
        for d in (10, 100, 2000):
            if d > counts.min():
                continue
            t = time.perf_counter()
            ref = _gumbel_top_reference(logw, seen, d, np.random.default_rng(d))
            t_ref = time.perf_counter() - t
            t = time.perf_counter()
            new = _gumbel_top(logw, seen, d, np.random.default_rng(d))
            t_new = time.perf_counter() - t
            same = "equal" if np.array_equal(ref, new) else "DIFFERENT"
            print(f"  {strategy:10s} d = {d:5d}: every key {t_ref:6.2f} s, threshold {t_new:6.2f} s "
                  f"({t_ref / t_new:4.1f}x), decoys {same}", flush=True)


def ranks(catalogue: str, previous: str) -> None:
    spec = importlib.util.spec_from_file_location("itemsampling._previous_catalogue", previous)
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    X, _, targets = C.catalogue_split(catalogue)
    print(f"{catalogue}: {X.shape[0]:,} users x {X.shape[1]:,} items")
    for name in ("popular", "svd16", "svd64"):
        t = time.perf_counter()
        ro, po = old._model_ranks(name, X, targets, 0, 2048)
        t_old = time.perf_counter() - t
        t = time.perf_counter()
        rn, pn = C._model_ranks(name, X, targets, 0, 2048)
        t_new = time.perf_counter() - t
        same = "equal" if np.array_equal(ro, rn) and np.array_equal(po, pn) else "DIFFERENT"
        print(f"  {name:8s}: previous {t_old:6.2f} s, now {t_new:6.2f} s, ranks {same}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="sim-ml1m")
    ap.add_argument("--catalogue", default=None)
    ap.add_argument("--previous", default=None)
    a = ap.parse_args()
    with threadpool_limits(1):
        decoys(a.dataset)
        if a.catalogue:
            if not a.previous:
                ap.error("--catalogue needs --previous FILE (the module as it was)")
            ranks(a.catalogue, a.previous)


if __name__ == "__main__":
    main()
