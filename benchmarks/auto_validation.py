"""Validation study of method="auto" (issue 29), run by hand, not by pytest:

    PYTHONPATH=src nice python benchmarks/auto_validation.py REPEATS [OUT.json]

Cells: rank model (Beta a = 0.3, 0.6, and a popularity-like step: 40% of the targets uniform in the
top 2% of the items, the rest Beta(0.6)) x N/(n-1) = 5, 50, 200 (n = 50, N = 250, 2450, 9800) x
M = 500, 5000 x K = 10, 50. Per cell, REPEATS data sets; the relative RMSE (%) against the users' own
Recall@K and NDCG@K, averaged over the two metrics, of every candidate and of auto's pick; at the
end, per cell auto / best and auto / MLE and the counts against the issue's targets (auto within 25%
of the cell's best, never above 1.25 x MLE). About 15 minutes at 5 repeats on two busy cores.
"""
import json
import sys
import time
import warnings

import numpy as np

from itemsampling.estimators.auto import CANDIDATES, select_estimators
from itemsampling.mapping import sample_beta_ranks
from itemsampling.metrics import evaluate
from itemsampling.sampling import sample_ranks

METRICS, KS, n = ["recall", "ndcg"], [10, 50], 50


def draw(model, N, M, g):
    """Global ranks: Beta(a) (mapping.sample_beta_ranks) or the popularity-like step."""
    if model == "step":
        top = g.random(M) < 0.4
        return np.where(top, g.integers(1, max(2, N // 50) + 1, M), sample_beta_ranks(0.6, N, M, rng=g))
    return sample_beta_ranks(float(model), N, M, rng=g)


def rel(errors, scale, ik):
    """Relative RMSE (%) at cut-off index ik, averaged over the metrics."""
    e = np.array(errors)[:, :, ik]
    return float(np.mean(100 * np.sqrt(np.mean(e ** 2, axis=0)) / scale[:, ik]))


def main(reps, out_path):
    warnings.simplefilter("ignore")
    out = []
    t0 = time.perf_counter()
    for model in ["0.3", "0.6", "step"]:
        for N in [250, 2450, 9800]:
            for M in [500, 5000]:
                errs, auto, scale, picks = {c: [] for c in CANDIDATES}, [], [], []
                for j in range(reps):
                    g = np.random.default_rng([j, N, M, len(model)])
                    R = draw(model, N, M, g)
                    r = sample_ranks(R, N, n, rng=g)
                    ex = np.array([[evaluate(R, m, k) for k in KS] for m in METRICS])
                    scale.append(ex)
                    s = select_estimators(r, N, n, METRICS, KS, rng=j)
                    for c in CANDIDATES:
                        errs[c].append(np.array([[s.estimates[(m, k)][c] for k in KS] for m in METRICS]) - ex)
                    auto.append(np.array([[s.estimates[(m, k)][s.chosen[(m, k)]] for k in KS] for m in METRICS]) - ex)
                    picks.append({f"{m}@{k}": s.chosen[(m, k)] for m in METRICS for k in KS})
                sc = np.mean(scale, axis=0)
                for ik, k in enumerate(KS):
                    row = {"model": model, "N": N, "n": n, "width": round(N / (n - 1)), "M": M, "K": k, "reps": reps,
                           **{c: rel(errs[c], sc, ik) for c in CANDIDATES}, "auto": rel(auto, sc, ik),
                           "picks": [p[f"{m}@{k}"] for p in picks for m in METRICS]}
                    out.append(row)
                    print(json.dumps(row), round(time.perf_counter() - t0), flush=True)
    with open(out_path, "w") as fh:
        json.dump(out, fh)
    summarise(out)


def summarise(out):
    near = above = 0
    for r in out:
        best = min(r[c] for c in CANDIDATES)
        near += r["auto"] <= 1.25 * best
        above += r["auto"] > 1.25 * r["mle"]
        print(f'{r["model"]:>5} N/(n-1)={r["width"]:>3} M={r["M"]:>4} K={r["K"]:>2}  auto {r["auto"]:6.2f}%  '
              f'best {best:6.2f}%  MLE {r["mle"]:6.2f}%  auto/best {r["auto"] / best:.2f}  auto/MLE {r["auto"] / r["mle"]:.2f}')
    print(f"auto within 25% of the best in {near} of {len(out)} cells; above 1.25 x MLE in {above}")


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "auto_validation.json")
