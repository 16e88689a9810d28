"""The default grid against the dense estimators it replaced below the old threshold (``AUTO_GRID_BYTES`` was
32 MiB, now 1 MiB: the grid wherever it is coarser than the ranks, N > 8,192): ``estimate_metrics`` of MLE,
BV-MES and MN-MLE, Recall and NDCG at K = 1..50, one BLAS thread, mean of ``--runs`` calls after a warm-up
call, and the largest relative difference of the two paths' estimates.

    PYTHONPATH=src python benchmarks/grid_threshold.py [--runs 3]

The ranks are M = 20,000 draws of a Beta(0.4, 3) rank distribution (a strong model's shape) on each N.
"""

import argparse
import time
import warnings

import numpy as np
from threadpoolctl import threadpool_limits

import itemsampling.estimators as est
from itemsampling.estimators.grid import AUTO_GRID_BYTES, rank_grid
from itemsampling.sampling import sample_ranks

SIZES = [(9_916, n) for n in (20, 50, 100, 200)] + [(14_284, n) for n in (20, 50, 100, 200)] + \
        [(25_815, n) for n in (20, 50, 100, 200)]
KS = np.arange(1, 51)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    runs = ap.parse_args(argv).runs
    g = np.random.default_rng(0)
    print(f"AUTO_GRID_BYTES = {AUTO_GRID_BYTES:,}")
    print(f"{'N':>7} {'n':>4} {'cells':>6} {'kernel MiB':>10} {'dense':>9} {'grid':>9} {'max rel diff':>12}")
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the resolution note below the rule
        for N, n in SIZES:
            R = np.minimum(N, 1 + (g.beta(0.4, 3.0, 20_000) * N).astype(int))
            r = sample_ranks(R, N, n, g)
            res = {}
            for grid in (False, True):
                est.estimate_metrics(r, N, n, ["recall"], KS, ["mle"], grid=grid)
                t = time.perf_counter()
                for _ in range(runs):
                    out = est.estimate_metrics(r, N, n, ["recall", "ndcg"], KS, ["mle", "bv_mes", "mn_mle"],
                                               gamma=0.01, eta=0.01, grid=grid)
                res[grid] = ((time.perf_counter() - t) / runs, out)
            a, b = res[False][1], res[True][1]
            rel = max(float(np.max(np.abs(np.asarray(b[m][k]) - np.asarray(a[m][k]))
                                   / np.maximum(np.abs(np.asarray(a[m][k])), 1e-12))) for m in a for k in a[m])
            print(f"{N:>7,} {n:>4} {rank_grid(N, n).lo.size:>6} {8 * N * n / 2**20:>10.1f} "
                  f"{res[False][0] * 1e3:>6.0f} ms {res[True][0] * 1e3:>6.0f} ms {rel:>12.1e}", flush=True)


if __name__ == "__main__":
    main()
