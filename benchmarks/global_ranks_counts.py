"""``ranking.global_ranks`` (counts over the catalogue, the training items taken off by their gathered scores)
against the masking loop it replaced (the training items written out of two boolean matrices), on a real
split, the models' scores as the chapters compute them: time of each and whether the ranks and pools are
equal, bit for bit.

    PYTHONPATH=src python benchmarks/global_ranks_counts.py DATASET_FOLDER [--models popular als]

(a folder the package reads, e.g. one of the real datasets the project does not ship).
"""

import argparse
import time

import numpy as np

from itemsampling._validation import as_rng
from itemsampling.experiments import load_split, make_model
from itemsampling.ranking import _check_inputs, _train_csr, global_ranks


def masking_loop(model, train, test, rng, batch_size=1024):
    """The loop ``global_ranks`` ran before (exclude_train=True)."""
    tu, ti, N = _check_inputs(model, train, test)
    gen = as_rng(rng)
    X = _train_csr(train, model.n_users_, N)
    ranks = np.empty(tu.size, dtype=np.int64)
    pools = np.empty(tu.size, dtype=np.int64)
    order = np.argsort(tu, kind="stable")
    for s in range(0, order.size, batch_size):
        rows = order[s:s + batch_size]
        u, t = tu[rows], ti[rows]
        uniq, inv = np.unique(u, return_inverse=True)
        scores = model.score(uniq)[inv]
        target = scores[np.arange(rows.size), t]
        greater = scores > target[:, None]
        equal = scores == target[:, None]
        sub = X[u]
        r_idx = np.repeat(np.arange(rows.size), np.diff(sub.indptr))
        c_idx = sub.indices
        keep = c_idx != t[r_idx]
        greater[r_idx[keep], c_idx[keep]] = False
        equal[r_idx[keep], c_idx[keep]] = False
        pools[rows] = N - np.bincount(r_idx[keep], minlength=rows.size)
        g = greater.sum(axis=1)
        e = equal.sum(axis=1) - 1
        ranks[rows] = 1 + g + gen.integers(0, e + 1)
    return ranks, pools


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset")
    ap.add_argument("--models", nargs="+", default=["popular", "als"])
    a = ap.parse_args(argv)
    train, test = load_split(a.dataset, 0)
    for name in a.models:
        model = make_model(name, 0, a.dataset).fit(train)
        t = time.perf_counter()
        old = masking_loop(model, train, test, rng=1)
        t_old = time.perf_counter() - t
        t = time.perf_counter()
        new = global_ranks(model, train, test, rng=1, return_pool=True)
        t_new = time.perf_counter() - t
        same = all(np.array_equal(x, y) for x, y in zip(old, new))
        print(f"{name:>8}: {len(test):,} test rows, masking loop {t_old:.1f} s, counts {t_new:.1f} s, "
              f"bit-identical: {same}", flush=True)


if __name__ == "__main__":
    main()
