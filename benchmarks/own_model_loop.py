"""The guide's loop on a real dataset: plan -> sampled_ranks for three models -> estimate -> decision, against
the full-ranking truth (issue 44, items 1 and 7; run by hand, not by pytest).

Usage::

    PYTHONPATH=src nice -n 10 python benchmarks/own_model_loop.py PATH [--seed 0] [--json OUT]

``PATH`` is one of the shared datasets, read and split by :func:`real_data_designs.load` (one held-out item per
test user; each row's pool is every item but the user's training items and other test items). Models
(:func:`real_data_designs.scorer`): PureSVD of rank 128 and 16 and Popular. Steps, the first four timed as "the
loop":

1. *Pilot*: ``sampled_ranks(design="fixed", sample_size=100, n_users=3000)`` of the first model (``--pilot-size``,
   ``--pilot-users``; ``--pilot-size resolve``: the smallest size that resolves K = 10, 1 + 2N/K, whose fits then
   identify the top of the rank distribution; the pilot's item scorings are reported beside the design's).
2. *Plan*: :func:`itemsampling.plan.plan_evaluation` for Recall@10 with margin 0.01 (or the most accurate design
   within ``--budget``, a share of full ranking's item scorings) at 95 % from the pilot
   (its per-user pools; sizes tried ``--sizes``, estimator MLE), the chosen design's ``sampled_ranks`` call.
3. *Sampling*: that call for the three models at once (a dict of scorers: the same users and the same decoys).
4. *Estimate*: the rank file of the three tables through ``estimate`` at its defaults
   (:func:`itemsampling.cli.estimate_table`: Recall and NDCG at K = 10, 20, 50, 95 % intervals, comparisons),
   for the plan's ``--target`` (``estimate --target``; population by default).
5. *Truth* (not in the loop): ``design="full"`` of every test row per model; rows identified, intervals that
   cover, the median half-width relative to the truth, best vs second best decided (of 6 metric@K), and the
   realised cost (item scorings of step 3 over full ranking's) beside the plan's prediction.

BLAS is held to one thread; the wall time is on the shared 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_data import _sha256 as sha256  # noqa: E402  (the file digests of the real-data benchmark)
from real_data_designs import load, scorer  # noqa: E402

from itemsampling.cli import estimate_table  # noqa: E402
from itemsampling.evaluation import sampled_ranks  # noqa: E402
from itemsampling.inputs import read_rank_file  # noqa: E402
from itemsampling.metrics import metric_function  # noqa: E402
from itemsampling.plan import design_kwargs, format_plan, plan_evaluation, resolving_pilot_size  # noqa: E402

MODELS = ("svd128", "svd16", "popular")
METRICS, KS = ("recall", "ndcg"), (10, 20, 50)



def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("path")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--margin", type=float, default=0.01)
    p.add_argument("--budget", type=float, default=None,
                   help="plan for the most accurate design within this share of full ranking's item scorings "
                        "(e.g. 0.05) instead of the cheapest meeting --margin")
    p.add_argument("--pilot-users", type=int, default=3000)
    p.add_argument("--pilot-size", default="100", help="the pilot's sampled-set size, or 'resolve' (1 + 2N/K at K = 10)")
    p.add_argument("--sizes", type=int, nargs="+", default=[100])
    p.add_argument("--n-sim", type=int, default=20)
    p.add_argument("--target", choices=("population", "test-users"), default="population",
                   help="what the plan's half-widths and estimate's intervals are for (plan and estimate --target)")
    p.add_argument("--compare-margin", type=float, default=None,
                   help="plan for the difference of the first two models' Recall@10 at this margin (plan --compare): "
                        "the pilot ranks both (one call, the same decoys)")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    X, users, targets, E, N, name = load(Path(a.path), rng)
    files = sorted(f for f in Path(a.path).iterdir() if f.is_file() and f.suffix in (".txt", ".dat"))
    M = users.size
    print(f"{name}: {M:,} test rows, N = {N:,} items", flush=True)
    scores = {m: scorer(m, X, np.random.default_rng([a.seed, 1])) for m in MODELS}
    out = {"dataset": name, "files": {f.name: sha256(f) for f in files}, "n_items": N, "rows": int(M),
           "seed": a.seed, "margin": None if a.budget else a.margin, "budget_share": a.budget, "seconds": {}}
    t_loop = time.perf_counter()
    # 1. pilot
    n_pilot = resolving_pilot_size(N, 10) if a.pilot_size == "resolve" else int(a.pilot_size)
    pilot_models = MODELS[:2] if a.compare_margin else MODELS[:1]
    both = sampled_ranks({m: scores[m] for m in pilot_models}, users, targets, exclude=E, n_items=N, design="fixed",
                         sample_size=n_pilot, n_users=min(a.pilot_users, M), rng=np.random.default_rng([a.seed, 3]))
    pilot = both[both["model"] == MODELS[0]]
    compare = both.loc[both["model"] == MODELS[1], "rank"].to_numpy() if a.compare_margin else None
    out["seconds"]["pilot"] = both.attrs["seconds"]
    out["compare_margin"] = a.compare_margin
    out["pilot"] = {"users": int(len(pilot)), "sample_size": n_pilot, "models": list(pilot_models),
                    "cost_share": both.attrs["scorings"] / len(pilot_models) / (M * N)}
    print(f"pilot: {len(pilot):,} users at n = {n_pilot:,}, {100 * out['pilot']['cost_share']:.2f} % of full ranking",
          flush=True)
    # 2. plan
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = plan_evaluation(N, M, "recall", 10, margin=None if a.budget else (a.compare_margin or a.margin),
                               compare=compare,
                               budget=a.budget * M * N if a.budget else None, pilot=pilot["rank"].to_numpy(), sample_size=n_pilot,
                               pools=pilot["n_items"].to_numpy(), sizes=a.sizes, estimators=("mle",), n_sim=a.n_sim,
                               rng=a.seed, target=a.target)
    out["target"] = a.target
    print(format_plan(plan), flush=True)
    out["margin_met"] = plan.chosen is not None
    if plan.chosen is None:  # no design meets the margin: the most accurate within a 5 % budget, said in the output
        print("\nno design meets the margin: planning the most accurate design within 5 % of full ranking instead",
              flush=True)
        out["budget_share"] = 0.05
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            plan = plan_evaluation(N, M, "recall", 10, budget=0.05 * M * N, pilot=pilot["rank"].to_numpy(), compare=compare,
                                   sample_size=n_pilot, pools=pilot["n_items"].to_numpy(), sizes=a.sizes,
                                   estimators=("mle",), n_sim=a.n_sim, rng=a.seed, target=a.target)
        print(format_plan(plan), flush=True)
    out["seconds"]["plan"] = time.perf_counter() - t
    print(f"pilot {out['seconds']['pilot']:.1f} s, plan {out['seconds']['plan']:.1f} s", flush=True)
    d = plan.chosen
    kw = design_kwargs(d)
    per_model = d.cost / len(pilot_models)  # with --compare-margin the plan counts both models' scorings
    out["chosen"] = {"label": d.label, "call": d.call, "predicted_cost": per_model,
                     "predicted_cost_share": per_model / (M * N), "predicted_half_width": d.half_width}
    # 3. sampling: the three models in one call, on the same users and the same decoys (common random numbers)
    t = time.perf_counter()
    table = sampled_ranks(scores, users, targets, exclude=E, n_items=N, rng=np.random.default_rng([a.seed, 4]), **kw)
    out["seconds"]["sampling"] = time.perf_counter() - t
    print(f"sampling {out['seconds']['sampling']:.1f} s", flush=True)
    # a model's item scorings: its rows' sample sizes (module docstring of itemsampling.evaluation, "Several models")
    scorings = {m: int(table.loc[table["model"] == m, "sample_size"].sum()) for m in MODELS}
    # 4. estimate at its defaults, on the rank file the table writes
    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "ranks.csv"
        table.to_csv(f, index=False)
        res = estimate_table(read_rank_file(f, None, None), list(METRICS), list(KS), target=a.target)
    out["seconds"]["estimate"] = time.perf_counter() - t
    out["seconds"]["loop"] = time.perf_counter() - t_loop
    # 5. the truth
    t = time.perf_counter()
    truth = {}
    for m in MODELS:
        full = sampled_ranks(scores[m], users, targets, exclude=E, n_items=N, design="full")
        truth[m] = full["rank"].to_numpy()
    out["seconds"]["truth"] = time.perf_counter() - t
    full_cost = float(M) * N
    out["realised_cost_share"] = {m: s / full_cost for m, s in scorings.items()}
    rows = []
    for row in res["estimates"]:
        tv = float(np.mean(metric_function(row["metric"], row["k"], N)(truth[row["model"]])))
        rows.append({"model": row["model"], "metric": row["metric"], "k": row["k"], "truth": tv,
                     "estimate": row["estimate"], "low": row["low"], "high": row["high"],
                     "identified": bool(row["identified"]), "covered": bool(row["low"] <= tv <= row["high"]),
                     "relative_half_width": (row["high"] - row["low"]) / 2 / tv if tv > 0 else float("nan")})
    out["rows"] = rows
    means = {m: float(np.mean(metric_function("recall", 10, N)(truth[m]))) for m in MODELS}
    best, second = sorted(MODELS, key=means.get, reverse=True)[:2]
    comps = [c for c in res["comparisons"] if {c["model_a"], c["model_b"]} == {best, second}]
    out["comparison"] = {"best": best, "second": second,
                         "decided": sum(bool(c["told_apart"]) for c in comps), "of": len(comps),
                         "right": sum(bool(c["told_apart"]) and (c["difference"] > 0) == (c["model_a"] == best)
                                      for c in comps),
                         "rows": [{k: c[k] for k in ("metric", "k", "difference", "low", "high", "told_apart")}
                                  for c in comps]}
    r10 = next(r for r in rows if r["model"] == MODELS[0] and r["metric"] == "recall" and r["k"] == 10)
    out["chosen"].update(realised_cost_share=out["realised_cost_share"][MODELS[0]],
                         realised_half_width=(r10["high"] - r10["low"]) / 2,
                         realised_error=abs(r10["estimate"] - r10["truth"]))
    summary = {"identified": sum(r["identified"] for r in rows), "covered": sum(r["covered"] for r in rows),
               "rows": len(rows),
               "median_relative_half_width": float(np.nanmedian([r["relative_half_width"] for r in rows]))}
    out["summary"] = summary
    print(f"\nchosen: {d.label}\n  predicted cost {100 * per_model / full_cost:.2f} % of full ranking, half-width "
          f"{d.half_width:.4f}; realised cost {', '.join(f'{m} {100 * v:.2f} %' for m, v in out['realised_cost_share'].items())}, "
          f"{MODELS[0]} Recall@10 half-width {out['chosen']['realised_half_width']:.4f} (error "
          f"{out['chosen']['realised_error']:.4f})")
    print(f"  rows identified {summary['identified']} of {summary['rows']}, intervals covering the truth "
          f"{summary['covered']} of {summary['rows']}, median half-width {100 * summary['median_relative_half_width']:.1f} "
          f"% of the truth; {best} vs {second} decided in {out['comparison']['decided']} of {out['comparison']['of']} "
          f"({out['comparison']['right']} the right way)")
    print("  seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in out["seconds"].items()), flush=True)
    for r in rows:
        print(f"    {r['model']:<8} {r['metric']}@{r['k']:<3} truth {r['truth']:.4f}  est {r['estimate']:.4f} "
              f"[{r['low']:.4f}, {r['high']:.4f}]  {'identified' if r['identified'] else 'NOT identified'}  "
              f"{'covers' if r['covered'] else 'MISSES'}")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    with threadpool_limits(1):  # one BLAS thread: the machine is shared
        sys.exit(main())
