"""The fixed cost of a chapter run and of chapter 10's decoy experiment, before and after issue 45's changes of
stop 54 (run by hand, not by pytest):

1. *Kernel shutdown*: papermill on a chapter that only imports what the chapters import, the kernel stopped
   gracefully (nbclient's default) or killed once the last cell is done (``itemsampling.run.KERNEL_SHUTDOWN``),
   ``--runs`` runs each, alternating.
2. *The style's import*: ``import itemsampling.plotting; set_style()`` in a fresh process, against the same with
   ``import seaborn`` before it (what ``set_style`` imported until this stop), ``--runs`` runs each, alternating.
3. *Decoy experiment*: ``candidates.decoy_experiment`` (the candidate sets prepared once for all models) against
   the loop it replaced, ``evaluate_candidates`` per model (which prepares them for every model), on the same
   split and candidate sets of ``--dataset`` (default sim-ml1m; a folder of real data works too), one BLAS
   thread; the frames must be equal, bit for bit.

    PYTHONPATH=src python benchmarks/chapter_overhead.py [--runs 5] [--dataset sim-ml1m]
"""

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from itemsampling.candidates import (_named_rng, decoy_experiment, draw_candidates, evaluate_candidates,
                                     make_recommender, split_holdout)
from itemsampling.data import drop_short_users
from itemsampling.experiments import load_interactions

#: the one cell of the chapter: what the chapters import, and the book's style
IMPORTS = """import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from itemsampling import estimators
from itemsampling.book import record
from itemsampling.plotting import set_style
set_style()"""


def kernel_shutdown(runs: int) -> dict:
    import nbformat
    import papermill as pm

    out = {"graceful": [], "immediate": []}
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "imports.ipynb", Path(tmp) / "out.ipynb"
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(IMPORTS)], metadata={"kernelspec": {
            "name": "python3", "display_name": "Python 3", "language": "python"}})
        nbformat.write(nb, src)
        for _ in range(runs):
            for mode in out:
                t0 = time.perf_counter()
                pm.execute_notebook(str(src), str(dst), progress_bar=False, kernel_name="python3", shutdown_kernel=mode)
                out[mode].append(time.perf_counter() - t0)
    return out


def style_import(runs: int) -> dict:
    code = {"with seaborn (before)": "import seaborn; import itemsampling.plotting as p; p.set_style()",
            "without (now)": "import itemsampling.plotting as p; p.set_style()"}
    out = {k: [] for k in code}
    for _ in range(runs):
        for k, c in code.items():
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", c], check=True)
            out[k].append(time.perf_counter() - t0)
    return out


def decoys(dataset: str) -> dict:
    inter, _ = drop_short_users(load_interactions(dataset), 2)
    models, sizes, seed = ["random", "popular", "itemknn", "als"], [10, 100, 1000], 3
    with threadpool_limits(1):
        t0 = time.perf_counter()
        new = decoy_experiment(inter, models=models, decoy_sizes=sizes, rng=seed, on_oversized="drop")
        t_new = time.perf_counter() - t0
        # the loop before: the same streams as decoy_experiment draws them, evaluate_candidates per model
        s_split, s_dec, s_mod, s_tie = np.random.SeedSequence(seed).spawn(4)
        t0 = time.perf_counter()
        split = split_holdout(inter, 0.2, rng=np.random.default_rng(s_split))
        csets, j, streams = [draw_candidates(split, "full")], 0, s_dec.spawn(2 * len(sizes))
        for strat in ("uniform", "popularity"):
            for d in sizes:
                if d not in new.attrs["dropped_sizes"][strat]:
                    csets.append(draw_candidates(split, strat, d, rng=np.random.default_rng(streams[j])))
                j += 1
        frames = []
        for name in models:
            model = make_recommender(name, rng=_named_rng(s_mod, name))
            model.fit(split.train, n_items=split.n_items, n_users=split.n_users)
            df = evaluate_candidates(model, split, csets, k=10, rng=_named_rng(s_tie, name))
            df.insert(0, "model", name)
            frames.append(df)
        old = pd.concat(frames, ignore_index=True)
        t_old = time.perf_counter() - t0
    pd.testing.assert_frame_equal(old, new, check_exact=True)
    return {"users x items": f"{split.users.size:,} x {split.n_items:,}", "per model (before)": t_old,
            "shared (now)": t_new}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dataset", default="sim-ml1m")
    a = ap.parse_args(argv)
    for what, res in (("kernel shutdown", kernel_shutdown(a.runs)), ("style import", style_import(a.runs))):
        print(f"{what}: " + "; ".join(f"{k} {min(v):.2f}-{max(v):.2f} s (median {np.median(v):.2f})"
                                      for k, v in res.items()), flush=True)
    d = decoys(a.dataset)
    print(f"decoy experiment on {a.dataset} ({d['users x items']}, 4 models, 7 candidate sets, one BLAS thread): "
          f"candidate sets prepared per model {d['per model (before)']:.1f} s, once {d['shared (now)']:.1f} s; "
          "the same frames, bit for bit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
