"""User samples whose users have several rows (test items): the coverage of all test users' Recall@10 by
``user_sampling_half_widths`` with the users as the sampled units (``users=``) and with the rows taken as
users (before), in simulated studies with strongly correlated rows of one user; a full ranking of the
sampled users, and item sampling at n = 500 (the user part of the interval about the sampled users' own
metric).

    PYTHONPATH=src python benchmarks/user_sampling_clusters.py [--studies 400]
"""

import argparse
import warnings

import numpy as np

from itemsampling.estimators import user_sampling_half_widths
from itemsampling.sampling import sample_ranks


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=400)
    studies = ap.parse_args(argv).studies
    warnings.simplefilter("ignore")
    N, Mt, m, rows, n = 1000, 2000, 300, 4, 500
    g = np.random.default_rng(31)
    hits = {"full": [0, 0], "item": [0, 0]}
    item_studies = studies // 2
    for s in range(studies):
        level = g.beta(0.4, 3.0, Mt)
        R = np.clip(1 + (N * np.clip(level[:, None] + 0.02 * g.standard_normal((Mt, rows)), 0, 1)).astype(int), 1, N)
        truth = np.mean(R <= 10)
        pick = g.choice(Mt, m, replace=False)
        sub, ids = R[pick].reshape(-1), np.repeat(pick, rows)
        own = np.mean(sub <= 10)
        for key, (ranks, size) in {"full": (sub, N), "item": (sample_ranks(sub, N, n, rng=g) if s < item_studies
                                                                 else None, n)}.items():
            if ranks is None:
                continue
            h_users = user_sampling_half_widths(ranks, N, size, ["recall"], [10], 0.95, Mt, users=ids)["recall"][0]
            h_rows = user_sampling_half_widths(ranks, N, size, ["recall"], [10], 0.95, Mt * rows)["recall"][0]
            hits[key][0] += abs(own - truth) <= h_users
            hits[key][1] += abs(own - truth) <= h_rows
    for key, total in (("full", studies), ("item", item_studies)):
        u, r = hits[key]
        print(f"{key:>4}: users as units {u}/{total} = {u / total:.1%}; rows as users {r}/{total} = {r / total:.1%}")


if __name__ == "__main__":
    main()
