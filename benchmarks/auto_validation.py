"""Validation study of method="auto" (issue 29), run by hand, not by pytest:

    PYTHONPATH=src nice python benchmarks/auto_validation.py REPEATS [OUT.json]

Cells: rank model (Beta a = 0.3, 0.6, and a popularity-like step: 40% of the targets uniform in the
top 2% of the items, the rest Beta(0.6)) x N/(n-1) = 5, 50, 200 (n = 50, N = 250, 2450, 9800) x
M = 500, 5000 x K = 10, 50: 36 cells. Per cell, REPEATS data sets; the relative RMSE (%) against the
users' own Recall@K and NDCG@K, averaged over the two metrics, of auto's candidates, of MES and MN_MLE
(the other corrected estimators of the guide's Table G.3, not candidates of auto: their cost) and of
auto's pick; at the end, per cell auto / best (best over all five) and auto / MLE and the counts
against the issue's targets (auto within 25% of the cell's best, never above 1.25 x MLE).
"""
import json
import sys
import time
import warnings

import numpy as np

from itemsampling.estimators import estimate_metrics
from itemsampling.estimators.auto import CANDIDATES, select_estimators
from itemsampling.mapping import sample_beta_ranks
from itemsampling.metrics import evaluate
from itemsampling.sampling import sample_ranks

METRICS, KS, n = ["recall", "ndcg"], [10, 50], 50
OTHERS = ("mes", "mn_mle")
ALL = tuple(CANDIDATES) + OTHERS


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


def main(reps, out_path, models=("0.3", "0.6", "step"), items=(250, 2450, 9800), users=(500, 5000)):
    warnings.simplefilter("ignore")
    out = []
    t0 = time.perf_counter()
    for model in models:
        for N in items:
            for M in users:
                errs, auto, scale, picks = {c: [] for c in ALL}, [], [], []
                for j in range(reps):
                    g = np.random.default_rng([j, N, M, len(model)])
                    R = draw(model, N, M, g)
                    r = sample_ranks(R, N, n, rng=g)
                    ex = np.array([[evaluate(R, m, k) for k in KS] for m in METRICS])
                    scale.append(ex)
                    s = select_estimators(r, N, n, METRICS, KS, rng=j)
                    other = estimate_metrics(r, N, n, METRICS, KS, list(OTHERS))
                    for c in CANDIDATES:
                        errs[c].append(np.array([[s.estimates[(m, k)][c] for k in KS] for m in METRICS]) - ex)
                    for c in OTHERS:
                        errs[c].append(np.array([np.atleast_1d(other[c][m]) for m in METRICS]) - ex)
                    auto.append(np.array([[s.estimates[(m, k)][s.chosen[(m, k)]] for k in KS] for m in METRICS]) - ex)
                    picks.append({f"{m}@{k}": s.chosen[(m, k)] for m in METRICS for k in KS})
                    picks[-1]["fits"] = list(s.fits)
                sc = np.mean(scale, axis=0)
                for ik, k in enumerate(KS):
                    row = {"model": model, "N": N, "n": n, "width": round(N / (n - 1)), "M": M, "K": k, "reps": reps,
                           **{c: rel(errs[c], sc, ik) for c in ALL}, "auto": rel(auto, sc, ik),
                           "picks": [p[f"{m}@{k}"] for p in picks for m in METRICS],
                           "fits": [p["fits"] for p in picks]}
                    out.append(row)
                    print(json.dumps(row), round(time.perf_counter() - t0), flush=True)
    with open(out_path, "w") as fh:
        json.dump(out, fh)
    summarise(out)


def summarise(out):
    near = above = near_c = 0
    for r in out:
        best = min(r[c] for c in ALL)
        best_c = min(r[c] for c in CANDIDATES)
        near += r["auto"] <= 1.25 * best
        near_c += r["auto"] <= 1.25 * best_c
        above += r["auto"] > 1.25 * r["mle"]
        print(f'{r["model"]:>5} N/(n-1)={r["width"]:>3} M={r["M"]:>4} K={r["K"]:>2}  auto {r["auto"]:6.2f}%  '
              f'best {best:6.2f}% ({min(ALL, key=lambda c: r[c])})  MLE {r["mle"]:6.2f}%  auto/best {r["auto"] / best:.2f}  '
              f'auto/MLE {r["auto"] / r["mle"]:.2f}')
    print(f"auto within 25% of the best of all five in {near} of {len(out)} cells (of its candidates: {near_c}); "
          f"above 1.25 x MLE in {above}")


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "auto_validation.json")
