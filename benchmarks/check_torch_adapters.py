"""Check of the PyTorch-based adapters (``itemsampling.adapters.from_lenskit``, ``from_recbole``) against
the libraries' own ranking calls, on tiny data fitted by the real library; the counterpart of
``tests/test_adapters.py`` for the libraries that are extras, not in ``requirements.txt`` (they bring
PyTorch, gigabytes that do not fit CI's time). Not collected by pytest (not a ``bench_*`` file).

    python -m venv /tmp/venv-x && /tmp/venv-x/bin/pip install -e '.[lenskit,recbole]'
    /tmp/venv-x/bin/python benchmarks/check_torch_adapters.py [lenskit] [recbole]

For each library: full ranking through the adapter (``sampled_ranks(design="full")``, the full-ranking
fast path) against the target's position in the library's own ranking (LensKit: ``recommend`` of a
``topn_pipeline``, which leaves out the training items; RecBole: the order of ``full_sort_predict``),
and the fixed design's ranks (the pair path: LensKit's scorer on an ``ItemList``, RecBole's ``predict``)
against brute force on the full scores over the same decoys. Prints one line per check and exits 1 if
one fails.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

from itemsampling.adapters import from_lenskit, from_recbole
from itemsampling.evaluation import sampled_ranks

U, N = 60, 40


def _data(seed=0):
    rng = np.random.default_rng(seed)
    pop = rng.dirichlet(np.ones(N) * 0.5)
    train, targets = [], np.empty(U, dtype=np.int64)
    for u in range(U):
        chosen = rng.choice(N, 8, replace=False, p=pop)
        train += [(u, i) for i in chosen[:7]]
        targets[u] = chosen[7]
    df = pd.DataFrame(train, columns=["user", "item"])
    X = sp.csr_matrix((np.ones(len(df)), (df.user, df.item)), shape=(U, N))
    return df, X, targets


def _report(name, ok, detail):
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)
    return ok


def _pair_path(score, users, targets, X, full_rows):
    tab, D = sampled_ranks(score, users, targets, exclude=X, n_items=X.shape[1], sample_size=8, rng=2,
                           return_decoys=True)
    want = 1 + np.sum(full_rows[np.arange(users.size)[:, None], D] > full_rows[np.arange(users.size), targets][:, None],
                      axis=1)
    return tab["rank"].to_numpy(), want


def check_lenskit() -> bool:
    from lenskit import recommend
    from lenskit.als import ImplicitMFScorer
    from lenskit.data import from_interactions_df
    from lenskit.pipeline import topn_pipeline

    df, X, targets = _data()
    t0 = time.perf_counter()
    ds = from_interactions_df(df.rename(columns={"user": "user_id", "item": "item_id"}))
    pipe = topn_pipeline(ImplicitMFScorer(features=8, epochs=5))
    pipe.train(ds)
    fit = time.perf_counter() - t0
    user_ids, item_ids = np.arange(U), np.arange(N)
    score = from_lenskit(pipe, user_ids=user_ids, item_ids=item_ids)
    users = np.arange(U)
    tab = sampled_ranks(score, users, targets, exclude=X, n_items=N, design="full")
    mine = tab["rank"].to_numpy()
    theirs = []
    for u in users:
        recs = recommend(pipe, int(u), n=N)
        ids = recs.ids()
        at = np.flatnonzero(ids == targets[u])
        theirs.append(1 + int(at[0]) if at.size else -1)
    theirs = np.array(theirs)
    # a target LensKit cannot score (an item no training row holds) is left out of its list; the adapter
    # scores it -inf, below every known item (ties with other unknown items go to the target)
    known = theirs > 0
    unknown_ok = np.all(mine[~known] == 1 + np.sum(np.isfinite(score.full(users[~known])) & (X[~known].toarray() == 0),
                                                   axis=1))
    ok = _report("lenskit full ranking = recommend's order",
                 bool(np.array_equal(mine[known], theirs[known]) and unknown_ok),
                 f"{int(np.sum(mine[known] == theirs[known]))}/{int(known.sum())} rows equal; {int((~known).sum())} "
                 f"targets LensKit cannot score, ranked below its known items (fit {fit:.1f} s)")
    full_rows = score.full(users)
    got, want = _pair_path(score, users, targets, X, full_rows)
    return _report("lenskit pair path = full path", bool(np.array_equal(got, want)), f"{U} rows, n = 8") and ok


def check_recbole() -> bool:
    # RecBole 1.2.1 (its latest release) still sets np.float = np.float_ and friends, gone in NumPy 2: the
    # aliases it reads are put back for it
    for old, new in (("float_", np.float64), ("complex_", np.complex128), ("unicode_", np.str_)):
        if old not in np.__dict__:
            setattr(np, old, new)
    from recbole.config import Config
    from recbole.data import create_dataset, data_preparation
    from recbole.model.general_recommender import BPR
    from recbole.trainer import Trainer
    from recbole.utils import init_seed

    df, X, targets = _data(1)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "tiny"
        folder.mkdir()
        rows = ["user_id:token\titem_id:token"] + [f"{u}\t{i}" for u, i in zip(df.user, df.item)]
        (folder / "tiny.inter").write_text("\n".join(rows) + "\n")
        config = Config(model="BPR", dataset="tiny", config_dict={
            "data_path": tmp, "epochs": 2, "train_batch_size": 256, "eval_args": {"split": {"RS": [1.0, 0.0, 0.0]},
                                                                                "order": "RO", "mode": "full"},
            "load_col": {"inter": ["user_id", "item_id"]}, "seed": 1, "show_progress": False, "state": "ERROR",
            "device": "cpu", "use_gpu": False, "checkpoint_dir": tmp, "embedding_size": 8})
        init_seed(config["seed"], True)
        dataset = create_dataset(config)
        train_data, _, _ = data_preparation(config, dataset)
        model = BPR(config, train_data.dataset)
        t0 = time.perf_counter()
        Trainer(config, model).fit(train_data, saved=False, show_progress=False)
        fit = time.perf_counter() - t0
        score = from_recbole(model, dataset, user_ids=np.arange(U), item_ids=np.arange(N))
        users = np.arange(U)
        tab = sampled_ranks(score, users, targets, exclude=X, n_items=N, design="full")
        mine = tab["rank"].to_numpy()
        import torch
        from recbole.data.interaction import Interaction

        uid = torch.as_tensor(score.user_index[users])
        with torch.no_grad():
            S = model.full_sort_predict(Interaction({dataset.uid_field: uid})).reshape(U, -1).numpy()
        S = S[:, score.item_index]  # RecBole's columns in the dataset's item order
        S[:, score.item_index < 0] = -np.inf  # items RecBole never saw
        S[X.toarray() > 0] = -np.inf
        order = np.argsort(-S, axis=1, kind="stable")
        theirs = np.array([1 + int(np.flatnonzero(order[u] == targets[u])[0]) for u in users])
        ok = _report("recbole full ranking = full_sort_predict's order", bool(np.array_equal(mine, theirs)),
                     f"{int(np.sum(mine == theirs))}/{U} rows equal (fit {fit:.1f} s)")
        got, want = _pair_path(score, users, targets, X, score(users, np.broadcast_to(np.arange(N), (U, N))))
        return _report("recbole predict (pair path) = full_sort_predict", bool(np.array_equal(got, want)),
                       f"{U} rows, n = 8") and ok


def main(argv=None) -> int:
    which = (argv if argv is not None else sys.argv[1:]) or ["lenskit", "recbole"]
    ok = True
    for name in which:
        ok = {"lenskit": check_lenskit, "recbole": check_recbole}[name]() and ok
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
