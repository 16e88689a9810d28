"""From a fitted model to `estimate` on real data: implicit ALS on each dataset of a folder (by default
``../shared/data/real``), fitted, adapted (``itemsampling.adapters.from_implicit``), sampled by the adaptive
design (``sampled_ranks(design="adaptive")``) and read by ``python -m itemsampling estimate`` at its
defaults, with the wall time of each step (issue 46). Not collected by pytest.

    PYTHONPATH=src python benchmarks/measure_implicit_als.py [FOLDER] [--estimate-timeout S]

Each dataset is loaded by ``load_interactions``; a given split (the KGAT ``train.txt`` / ``test.txt``) is
kept, otherwise each user's last interaction is held out (``leave_last_out``, ties at random; users
with one interaction dropped). One test
item per user (the first of a user's test items), the pool the user's other training and test items
excluded. ALS: 64 factors, 15 iterations. Adaptive design: n0 = 100, n_max = 12,800. The estimate step
runs as a subprocess with a timeout (default 300 s) and reports what it printed, beside the truth
(full ranking of every test user through the same adapter).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from itemsampling.adapters import from_implicit
from itemsampling.data import drop_short_users, given_split, leave_last_out, load_interactions
from itemsampling.evaluation import sampled_ranks


def run(folder: Path, timeout: float) -> None:
    from implicit.als import AlternatingLeastSquares

    for ds in sorted(p for p in folder.iterdir() if p.is_dir()):
        t0 = time.perf_counter()
        df = load_interactions(ds)
        split = given_split(df)
        train, test = split if split is not None else leave_last_out(drop_short_users(df)[0], rng=0)
        U, N = df.attrs["n_users"], df.attrs["n_items"]
        first = test.drop_duplicates("user")
        X = sp.csr_matrix((np.ones(len(train)), (train.user, train.item)), shape=(U, N))
        X.data[:] = 1.0
        excl = X + sp.csr_matrix((np.ones(len(test)), (test.user, test.item)), shape=(U, N))
        excl = excl - sp.csr_matrix((np.ones(len(first)), (first.user, first.item)), shape=(U, N)).multiply(excl > 0)
        excl.eliminate_zeros()
        t_load = time.perf_counter() - t0
        t0 = time.perf_counter()
        model = AlternatingLeastSquares(factors=64, iterations=15, random_state=0, num_threads=2)
        model.fit(X.tocsr(), show_progress=False)
        t_fit = time.perf_counter() - t0
        t0 = time.perf_counter()
        score = from_implicit(model)
        t_adapt = time.perf_counter() - t0
        t0 = time.perf_counter()
        tab = sampled_ranks({"als": score}, first.user.to_numpy(), first.item.to_numpy(), exclude=excl, n_items=N,
                            design="adaptive", initial_size=100, max_size=12800, rng=0)
        t_sample = time.perf_counter() - t0
        full_cost = len(tab) * N
        t0 = time.perf_counter()
        truth = sampled_ranks(score, first.user.to_numpy(), first.item.to_numpy(), exclude=excl, n_items=N,
                              design="full")["rank"].to_numpy()
        t_full = time.perf_counter() - t0
        disc = 1 / np.log2(truth + 1)
        true = ", ".join(f"Recall@{k} {np.mean(truth <= k):.4f} NDCG@{k} {np.mean(disc * (truth <= k)):.4f}"
                         for k in (10, 20, 50))
        path = Path(tempfile.mkdtemp()) / f"{ds.name}.csv"
        tab.to_csv(path, index=False)
        t0 = time.perf_counter()
        try:
            out = subprocess.run([sys.executable, "-m", "itemsampling", "estimate", str(path), "--metric", "recall",
                                  "ndcg", "--k", "10", "20", "50", "--quiet"], capture_output=True, text=True,
                                 timeout=timeout, env=os.environ.copy())
            est = f"rc {out.returncode}, {time.perf_counter() - t0:.1f} s"
            shown = (out.stdout.strip() or out.stderr.strip()).splitlines()
        except subprocess.TimeoutExpired:
            est = f"stopped after {timeout:.0f} s"
            shown = []
        print(f"\n## {ds.name}: {U:,} users x {N:,} items, {len(train):,} training rows, {len(tab):,} test rows")
        print(f"load {t_load:.1f} s | fit ALS {t_fit:.1f} s | adapt {t_adapt * 1e3:.2f} ms | sample adaptive "
              f"{t_sample:.1f} s ({tab.attrs['scorings']:,} scorings = {100 * tab.attrs['scorings'] / full_cost:.2f} % "
              f"of full ranking; scorer {tab.attrs['score_seconds']:.1f} s) | estimate {est}")
        print(f"truth (full ranking, {t_full:.1f} s): {true}")
        for line in shown[:40]:
            print("    " + line)
        sys.stdout.flush()


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("folder", nargs="?", default=str(Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
                                                   / "real"))
    p.add_argument("--estimate-timeout", type=float, default=300.0)
    a = p.parse_args(argv)
    run(Path(a.folder), a.estimate_timeout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
