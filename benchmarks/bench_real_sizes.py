"""The estimators at real-data sizes through ``estimate_metrics`` at its defaults (issue 45, item 1).

Run by hand (each case in its own subprocess, so that no case inherits another's caches or memory):

    PYTHONPATH=src nice python benchmarks/bench_real_sizes.py [--cases NAME ...] [--no-dense] [--out OUT.json]

``make bench`` (``pytest benchmarks --benchmark-only``) times the cheap cases in-process as well
(``test_default_real_size``), with the default against the truth.

Data (seeded, :func:`_simulate`): N = 10^5 items, M = 10^5 users, global ranks
:math:`\\theta = (R-1)/(N-1) \\sim \\mathrm{Beta}(0.35, 1.2)` (the long-tailed shape of
``bench_distribution.py``), sampled ranks drawn by the package's own samplers
(:func:`itemsampling.sampling.sample_ranks`: n = 1,000, with replacement;
:func:`itemsampling.sampling.adaptive_sample_ranks`: n_0 = 100 doubling to n_max = 12,800, TORS
Algorithm 1). With per-user pools (``*-pools``) each user's pool is :math:`N_u = N - |\\text{train}_u|`,
:math:`|\\text{train}_u|` uniform in 0..2,000 (about 2,000 distinct pools), the rank fraction as above
scaled to the pool, the sampled ranks drawn in each pool.

Cases (Recall@1,000 and @5,000; ``*-dense`` are the same call with ``grid=False``, the dense
estimator the default replaced above :data:`~itemsampling.estimators.grid.AUTO_GRID_BYTES`):

* ``mle``, ``wmle``, ``mes``: one fixed-size fit (budget for ``mle``: 0.3 s and 500 MB);
* ``mle-pools``: MLE with per-user pools (a point estimate takes the grid by the same rule as one N;
  with ``ci`` the public entry points route pools to the dense estimators);
* ``adaptive``, ``adaptive-pools``: adaptive EM on the per-user sizes (without and with pools);
* ``mle-ci``: the default interval (``ci=0.95``: 200 bootstrap replicates, ``interval="kept"``: the
  bias margins' simulation above the resolution rule); ``mle-ci-bounds`` adds K = 50, below the rule
  :math:`K \\ge 2N/(n-1)`, whose interval is the identification bounds.

Each case prints ``seconds`` (wall time of the call, cold: fresh process, no cache), ``peak_MB`` (peak
of memory allocated during the call, tracemalloc, which sees numpy's buffers; measured in a second
subprocess, as tracemalloc slows Python-level code), ``rss_MB`` (the process's high-water RSS), and
the estimates against the truth (the users' full-ranking Recall@K, each in its own pool).
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np

from itemsampling.estimators import estimate_metrics
from itemsampling.sampling import adaptive_sample_ranks, sample_ranks

N, M, n = 100_000, 100_000, 1_000
N0, NMAX = 100, 12_800
KS = [1_000, 5_000]
TRAIN_MAX = 2_000

#: name -> (method, design, pools, grid, ci, extra cut-offs); grid "default" = not passed
CASES = {
    "mle": ("mle", "fixed", False, "default", None, ()),
    "mle-dense": ("mle", "fixed", False, False, None, ()),
    "wmle": ("wmle", "fixed", False, "default", None, ()),
    "wmle-dense": ("wmle", "fixed", False, False, None, ()),
    "mes": ("mes", "fixed", False, "default", None, ()),
    "mes-dense": ("mes", "fixed", False, False, None, ()),
    "mle-pools": ("mle", "fixed", True, "default", None, ()),
    "mle-pools-dense": ("mle", "fixed", True, False, None, ()),
    "adaptive": ("mle", "adaptive", False, "default", None, ()),
    "adaptive-dense": ("mle", "adaptive", False, False, None, ()),
    "adaptive-pools": ("mle", "adaptive", True, "default", None, ()),
    "adaptive-pools-dense": ("mle", "adaptive", True, False, None, ()),
    "mle-ci": ("mle", "fixed", False, "default", 0.95, ()),
    "mle-ci-bounds": ("mle", "fixed", False, "default", 0.95, (50,)),
}
#: cheap enough for the pytest-benchmark entry (the grid defaults, one fit each)
QUICK = ("mle", "wmle", "mes", "mle-pools", "adaptive", "adaptive-pools")


def _simulate(design: str, pools: bool, seed: int = 0):
    """``(r, sizes, n_items, R, Nu)``: sampled ranks, sample size(s), the ``n_items`` argument (N or the
    per-user pools), the global ranks in each user's pool and the pools."""
    rng = np.random.default_rng(seed)
    Nu = N - rng.integers(0, TRAIN_MAX + 1, size=M) if pools else np.full(M, N)
    R = np.minimum(Nu, 1 + np.floor((Nu - 1) * rng.beta(0.35, 1.2, size=M))).astype(np.int64)
    r = np.empty(M, dtype=np.int64)
    sizes = np.full(M, n, dtype=np.int64)
    for g in np.unique(Nu):  # with replacement the sampled rank is drawn in the user's own pool
        sel = np.flatnonzero(Nu == g)
        if design == "fixed":
            r[sel] = sample_ranks(R[sel], int(g), n, rng=rng)
        else:
            r[sel], sizes[sel] = adaptive_sample_ranks(R[sel], int(g), N0, NMAX, rng=rng)
    return r, (n if design == "fixed" else sizes), (Nu if pools else N), R, Nu


def _truth(R, Nu, ks):
    del Nu  # Recall@K = 1[R_u <= K] does not involve the pool's size
    return [float(np.mean(R <= k)) for k in ks]


def _inputs(name: str):
    """The arguments of the case's ``estimate_metrics`` call, its cut-offs and the truth's inputs."""
    method, design, pools, grid, ci, extra = CASES[name]
    ks = sorted(set(KS) | set(extra))
    r, sizes, n_items, R, Nu = _simulate(design, pools)
    kw = {} if grid == "default" else {"grid": grid}
    if ci is not None:
        kw.update(ci=ci, rng=0)
    return (r, n_items, sizes, ["recall"], ks, [method]), kw, ks, R, Nu


def _call(args, kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the resolution note at K = 50
        return estimate_metrics(*args, **kw)


def run_case(name: str, trace: bool = False) -> dict:
    """One case in this process: the call timed (or traced), its estimates and the truth."""
    method, design, pools, grid, ci, _ = CASES[name]
    args, kw, ks, R, Nu = _inputs(name)
    sizes = args[2]
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    if trace:
        tracemalloc.start()
    start = time.perf_counter()
    out = _call(args, kw)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / 1e6 if trace else None
    if trace:
        tracemalloc.stop()
    est = out[method]["recall"]
    row = {"case": name, "method": method, "design": design, "pools": pools, "grid": grid, "ci": ci, "ks": ks,
           "seconds": seconds, "peak_MB": peak, "rss_MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
           "rss_before_MB": rss0, "truth": _truth(R, Nu, ks), "mean_size": float(np.mean(sizes))}
    if ci is None:
        row["estimate"] = [float(x) for x in np.atleast_1d(est)]
    else:
        row.update(estimate=[float(x) for x in np.atleast_1d(est.estimate)],
                   low=[float(x) for x in np.atleast_1d(est.low)], high=[float(x) for x in np.atleast_1d(est.high)],
                   interval=[str(x) for x in np.atleast_1d(getattr(est, "interval", ["?"] * len(ks)))])
    return row


def _subprocess(name: str, trace: bool) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--one", name] + (["--trace"] if trace else [])
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"case": name, "error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(name: str) -> dict:
    """A case in two fresh subprocesses: the wall time (and RSS), then the traced peak."""
    row = _subprocess(name, trace=False)
    if "error" not in row:
        traced = _subprocess(name, trace=True)
        row["peak_MB"] = traced.get("peak_MB")
    return row


def _fmt(row: dict) -> str:
    if "error" in row:
        return f"{row['case']:<20} failed: {row['error']}"
    est = " ".join(f"{e:.5f}" for e in row["estimate"])
    tru = " ".join(f"{t:.5f}" for t in row["truth"])
    extra = f"  [{' '.join(f'{lo:.4f}-{hi:.4f}' for lo, hi in zip(row['low'], row['high']))}] " \
            f"{','.join(row['interval'])}" if row.get("ci") else ""
    peak = "-" if row.get("peak_MB") is None else f"{row['peak_MB']:.0f}"
    return (f"{row['case']:<20} {row['seconds']:>8.3f} {peak:>8} {row['rss_MB']:>8.0f}  K={row['ks']}  "
            f"est {est}  truth {tru}{extra}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    p.add_argument("--no-dense", action="store_true", help="leave out the dense (grid=False) cases")
    p.add_argument("--out", type=Path, help="write the rows as JSON")
    p.add_argument("--one", choices=list(CASES), help=argparse.SUPPRESS)  # a subprocess: one case, one JSON line
    p.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.one:
        print(json.dumps(run_case(a.one, a.trace)))
        return 0
    cases = [c for c in a.cases if not (a.no_dense and CASES[c][3] is False)]
    print(f"N = {N:,}, M = {M:,}, n = {n:,} (adaptive: n0 = {N0}, n_max = {NMAX:,}); Recall@K")
    print(f"{'case':<20} {'seconds':>8} {'peak_MB':>8} {'rss_MB':>8}")
    rows = []
    for c in cases:
        rows.append(measure(c))
        print(_fmt(rows[-1]), flush=True)
    if a.out:
        a.out.write_text(json.dumps(rows, indent=1))
    return 0


# ------------------------------------------------------------------------------------------ pytest-benchmark
try:  # the in-process entry of ``make bench``; the script itself needs no pytest
    import pytest
except ImportError:  # pragma: no cover
    pytest = None

if pytest is not None:
    @pytest.mark.parametrize("name", QUICK)
    def test_default_real_size(benchmark, name):
        """One call at its defaults (the grid above AUTO_GRID_BYTES), the first round cold; MLE's
        estimate within 1 % of the truth at both cut-offs (WMLE and MES are biased by design)."""
        args, kw, ks, R, Nu = _inputs(name)
        out = benchmark.pedantic(_call, args=(args, kw), rounds=3, iterations=1)
        est = np.atleast_1d(out[CASES[name][0]]["recall"])
        truth = _truth(R, Nu, ks)
        benchmark.extra_info.update({"estimate": est.tolist(), "truth": truth})
        if CASES[name][0] == "mle":
            assert np.allclose(est, truth, rtol=0.01)


if __name__ == "__main__":
    sys.exit(main())
