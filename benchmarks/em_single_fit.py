"""EM for one fit: the single-fit loop (``distribution._em_one``, the default of ``mle_em``) against the batch
loop it equals bit for bit (``_em(..., lean=False)``), one BLAS thread, mean of ``--runs`` runs per size.

    PYTHONPATH=src python benchmarks/em_single_fit.py [--runs 5]
"""

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

from itemsampling.estimators.distribution import _em
from itemsampling.estimators.grid import cached_kernel
from itemsampling.sampling import sample_ranks

SIZES = [(1000, 50, 500), (500, 50, 600), (3706, 100, 6040), (3706, 100, 300), (3706, 500, 6040)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    runs = ap.parse_args(argv).runs
    rng = np.random.default_rng(0)
    print(f"{'N':>6} {'n':>5} {'users':>6} {'passes':>6} {'batch loop':>11} {'single fit':>11}  bit-identical")
    for N, n, M in SIZES:
        R = 1 + (rng.beta(0.3, 3.0, M) * N).astype(int).clip(0, N - 1)
        c = np.bincount(sample_ranks(R, N, n, rng), minlength=n + 1)[1:].astype(float)[None, :]
        c /= c.sum()
        K = cached_kernel(N, n, True)
        out = {}
        with threadpool_limits(1):
            for lean in (False, True):
                _em(c, K, np.full((1, N), 1.0 / N), 1e-6, 10_000, dot=True, lean=lean)
                t0 = time.perf_counter()
                for _ in range(runs):
                    res = _em(c, K, np.full((1, N), 1.0 / N), 1e-6, 10_000, dot=True, lean=lean)
                out[lean] = ((time.perf_counter() - t0) / runs, res)
        same = all(np.array_equal(a, b) for a, b in zip(out[False][1], out[True][1]))
        print(f"{N:>6} {n:>5} {M:>6} {int(out[True][1][3][0]):>6} {out[False][0] * 1e3:>8.2f} ms "
              f"{out[True][0] * 1e3:>8.2f} ms  {same}")


if __name__ == "__main__":
    main()
