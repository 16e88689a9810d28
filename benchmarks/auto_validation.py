"""Validation study of method="auto" (issue 29) at full size, run by hand, not by pytest:

    PYTHONPATH=src nice python benchmarks/auto_validation.py REPEATS [OUT.json]

The study is :func:`itemsampling.estimators.auto.validation_study` (the guide runs the same function
with fewer repeats): rank model (Beta a = 0.3, 0.6, and a popularity-like step: 40% of the targets
uniform in the top 2% of the items, the rest Beta(0.6)) x N/(n-1) = 5, 50, 200 (n = 50, N = 250, 2450,
9800) x M = 500, 5000 x K = 10, 50: 36 cells. Per cell, REPEATS data sets; the relative RMSE (%) against
the users' own Recall@K and NDCG@K, averaged over the two metrics, of auto's candidates, of MES and
MN_MLE and of auto's pick; per cell auto / best (best over all five) and auto / MLE, and the counts
against the issue's targets (auto within 25% of the cell's best, never above 1.25 x MLE).
"""
import json
import sys
import time
import warnings

from itemsampling.estimators.auto import CANDIDATES, VALIDATION_OTHERS, validation_rmse, validation_study

ALL = tuple(CANDIDATES) + tuple(VALIDATION_OTHERS)


def main(reps, out_path, **kw):
    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    rows = validation_study(repeats=reps, progress=lambda msg: print(msg, round(time.perf_counter() - t0), flush=True),
                            **kw)
    out = [{**{k: v for k, v in r.items() if k != "errors"}, **{c: validation_rmse(e) for c, e in r["errors"].items()}}
           for r in rows]
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
        print(f'{r["model"]:>5} N/(n-1)={r["width"]:>5.0f} M={r["M"]:>4} K={r["K"]:>2}  auto {r["auto"]:6.2f}%  '
              f'best {best:6.2f}% ({min(ALL, key=lambda c: r[c])})  MLE {r["mle"]:6.2f}%  auto/best {r["auto"] / best:.2f}  '
              f'auto/MLE {r["auto"] / r["mle"]:.2f}  picks {"".join(p[0] for p in r["picks"])}')
    print(f"auto within 25% of the best of all five in {near} of {len(out)} cells (of its candidates: {near_c}); "
          f"above 1.25 x MLE in {above}")


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "auto_validation.json")
