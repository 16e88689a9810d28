"""Coverage study of method="auto"'s kept interval (issue 29, point 2) at full size, run by hand, not by pytest:

    PYTHONPATH=src nice python benchmarks/auto_coverage.py REPEATS [OUT.json] [--today REPEATS_TODAY]
        [--items N ...] [--resolved C]

The study is :func:`itemsampling.estimators.auto.coverage_study` (the guide's Table G.4c runs the same
function with fewer repeats): rank model (Beta a = 0.3, 0.6, a popularity-like step) x N/(n-1) = 5, 50,
200 (n = 50, N = 250, 2450, 9800) x M = 500, 5000 x K = 10, 50: 36 cells, each for Recall@K and NDCG@K and
for both targets (the population metric, the test users' own). Per cell REPEATS data sets: the coverage
of the kept interval at nominal 0.95 with its Monte Carlo error and exact one-sided 95 % lower bound, the
exact binomial test of a coverage of at least 0.90 (Holm over all rows), the mean width.

With ``--today R`` a second pass of R repeats per cell measures today's interval (the chosen
estimator's plain bootstrap, 100 replicates) and the bootstrap widened by auto's bias margin beside
the kept one, with their widths (it runs auto's selection and a bootstrap per data set and target: the
expensive part).
"""
import argparse
import json
import time
import warnings

import numpy as np

from itemsampling.book import holm
from itemsampling.estimators.auto import RESOLVED, coverage_study


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("repeats", type=int)
    p.add_argument("out", nargs="?", default="auto_coverage.json")
    p.add_argument("--today", type=int, default=0)
    p.add_argument("--items", type=int, nargs="+", default=[250, 2450, 9800])
    p.add_argument("--models", nargs="+", default=["0.3", "0.6", "step"])
    p.add_argument("--resolved", type=float, default=RESOLVED)
    a = p.parse_args(argv)
    warnings.simplefilter("ignore")
    t0 = time.perf_counter()

    def say(msg):
        print(msg, round(time.perf_counter() - t0), flush=True)

    out = {"kept": coverage_study(models=a.models, items=a.items, repeats=a.repeats, today=False,
                                  resolved=a.resolved, progress=say)}
    out["kept_seconds"] = time.perf_counter() - t0
    if a.today:
        t1 = time.perf_counter()
        out["today"] = coverage_study(models=a.models, items=a.items, repeats=a.today, today=True,
                                      resolved=a.resolved, progress=say)
        out["today_seconds"] = time.perf_counter() - t1
    with open(a.out, "w") as fh:
        json.dump(out, fh)
    summarise(out)


def summarise(out):
    rows = out["kept"]
    below = holm([r["p_below"] for r in rows])
    for r, b in zip(rows, below):
        print(f'{r["model"]:>5} N/(n-1)={r["width"]:>5.0f} M={r["M"]:>4} K={r["K"]:>2} {r["metric"]:>6} '
              f'{r["target"]:>10} {r["kind"]:>16}: coverage {r["coverage"]:.3f} (se {r["se"]:.3f}, lower {r["lower"]:.3f})'
              f' width {r["mean_width"]:.4f}' + ("  BELOW 0.90 (Holm)" if b else ""))
    cov = np.array([r["coverage"] for r in rows])
    print(f"kept interval: {len(rows)} rows, coverage min {cov.min():.3f}, below 0.90 observed in "
          f"{int((cov < 0.90).sum())}, significantly (exact binomial, Holm 5 %) in {int(below.sum())}; "
          f"{out['kept_seconds']:.0f} s")
    if "today" in out:
        for r in out["today"]:
            print(f'{r["model"]:>5} N/(n-1)={r["width"]:>5.0f} M={r["M"]:>4} K={r["K"]:>2} {r["metric"]:>6} '
                  f'{r["target"]:>10} {r["kind"]:>16}: kept {r["coverage"]:.2f} w {r["mean_width"]:.4f} | '
                  f'today {r["today_coverage"]:.2f} w {r["today_width"]:.4f} | '
                  f'boot+margin {r["margin_coverage"]:.2f} w {r["margin_width"]:.4f}')
        print(f"today pass: {out['today_seconds']:.0f} s")


if __name__ == "__main__":
    main()
