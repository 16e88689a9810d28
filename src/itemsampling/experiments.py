r"""Experiments: cached global ranks of the book's default recommenders, and a resumable,
parallel runner for repeated sampled evaluations.

Global ranks, quickly and repeatedly::

    from itemsampling.experiments import load_global_ranks
    gr = load_global_ranks("sim-ml1m")            # every default model; cached on disk
    gr["X"], gr["Y"], gr["Z"]                     # int64 arrays of 1-based ranks, one per user
    gr.n_items                                    # N, the catalog size (3706 for sim-ml1m)
    gr.pool_sizes                                 # N_u, each user's candidate pool

**What is returned.** The dataset is split with :func:`itemsampling.data.leave_last_out` (each
user's last event held out; 6,040 test users on sim-ml1m), each model is fit on the training part
and :func:`itemsampling.ranking.global_ranks` ranks each user's held-out item:

* ``exclude_train=True`` (default; Krichene & Rendle 2020, Sec. 6.1; Li et al. 2020 "actual"):
  among the items outside the user's training set, so :math:`R_u \in 1..N_u` with
  :math:`N_u = N - |H_u|` (``pool_sizes``; :math:`H_u` the user's training items);
* ``exclude_train=False``: among all :math:`N` items, :math:`R_u \in 1..N` (``pool_sizes == N``).

**Which N for the kernel.** Every rank satisfies :math:`R_u \le N_u \le N`, so the arrays can be
passed to every function of :mod:`itemsampling.kernel`, :mod:`itemsampling.sampling` and
:mod:`itemsampling.metrics` with ``n_items = gr.n_items``. With ``exclude_train=True`` that is the
*common approximation* of the papers (Krichene & Rendle's corrections use the catalog size): a
decoy drawn from the user's pool outranks the target with probability :math:`(R_u-1)/(N_u-1)`,
not :math:`(R_u-1)/(N-1)`. On sim-ml1m the median pool is 97% of the catalog (3,589 of 3,706
items). The runner below can simulate the exact per-user pools (``pool="user"``) or the
approximation (``pool="catalog"``).

Ties are broken at random (seeded), models are fit with seeds derived from ``rng`` and the model
name, and results are cached in ``data/cache/ranks`` (atomic writes) keyed by the dataset, the
model's class and parameters, the seed, ``exclude_train``, a cache version and a hash of the
source of :mod:`itemsampling.models`, :mod:`itemsampling.ranking` and :mod:`itemsampling.data`;
a second call is instant.
"""

from __future__ import annotations

import functools
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from . import models as _models
from ._validation import check_int
from .data import (CACHE_VERSION, DATASETS, atomic_save_npz, cache_dir, leave_last_out, load_dataset,
                   load_movielens, load_ncf, load_npz, load_truth, n_items_of, stable_hash)
from .data import _find_movielens_file
from .metrics import canonical_metric, evaluate, metric_values
from .ranking import global_ranks
from .sampling import sample_ranks, sampled_metric_moments

__all__ = [
    "MODEL_SPECS",
    "DEFAULT_MODELS",
    "GlobalRanks",
    "make_model",
    "load_split",
    "load_interactions",
    "describe_dataset",
    "dataset_files",
    "fit_models",
    "load_global_ranks",
    "sample_pool_ranks",
    "expected_sampled_by_pool",
    "exact_metric",
    "ExplicitSampler",
    "ExperimentResult",
    "run_experiment",
    "uncorrected",
]

#: Every named model the helpers know: name -> (class name in :mod:`itemsampling.models`, params).
MODEL_SPECS: dict[str, tuple[str, dict]] = {
    # q = 1 with the column cut k = 50 of Krichene & Rendle's Eq. 28: each item passes score only to
    # its 50 most similar items (without a cut q = 1 puts almost no held-out item in the top 10).
    # Sarwar et al. 2001 instead cut the neighbourhood of the *target* item (the row cut k').
    "itemknn": ("ItemKNN", {"q": 1.0, "k": 50}),
    "userknn": ("UserKNN", {"k": 50}),
    "ease": ("EASE", {"lam": 500.0}),
    "als": ("ALS", {"factors": 64, "lam": 10.0, "alpha": 0.2, "iterations": 15}),
    "popular": ("Popular", {}),
    # Krichene & Rendle 2020, Sec. 6 and 9: recommenders X, Y, Z
    "X": ("ALS", {"factors": 16, "lam": 10.0, "alpha": 0.2, "iterations": 15}),
    "Y": ("ItemKNN", {"q": 3.0}),
    "Z": ("ItemKNN", {"q": 1.0, "k_prime": 10}),
    # not in the default set
    "random": ("Random", {}),
    "oracle": ("Oracle", {}),
}
#: The book's default set of models (``models=None``).
DEFAULT_MODELS = ("itemknn", "userknn", "ease", "als", "popular", "X", "Y", "Z")
_SEEDED = {"ALS", "Random"}


def _model_seed(rng: int, name: str) -> np.random.SeedSequence:
    return np.random.SeedSequence([int(rng), zlib.crc32(name.encode())])


def make_model(name: str, rng: int = 0, dataset: str | None = None):
    """A fresh, unfitted model by name (see :data:`MODEL_SPECS`); ``"oracle"`` needs a simulated
    ``dataset`` (real data has no true preferences)."""
    if name not in MODEL_SPECS:
        raise ValueError(f"model must be one of {sorted(MODEL_SPECS)}, got {name!r}")
    cls_name, params = MODEL_SPECS[name]
    cls = getattr(_models, cls_name)
    if cls_name == "Oracle":
        if not isinstance(dataset, str) or dataset not in DATASETS:
            raise ValueError(f"the 'oracle' model needs a simulated dataset {sorted(DATASETS)} (its true "
                             f"preferences), got dataset={dataset!r}")
        return cls(load_truth(dataset))
    if cls_name in _SEEDED:
        return cls(**params, rng=np.random.default_rng(_model_seed(rng, name)))
    return cls(**params)


def _ncf_prefix(folder: Path) -> str | None:
    """The prefix ``NAME`` of an NCF-style split (``NAME.train.rating``, ``NAME.test.rating``,
    ``NAME.test.negative``) in ``folder``, or ``None`` when the folder holds none."""
    names = sorted(f.name[:-len(".train.rating")] for f in folder.glob("*.train.rating"))
    if not names:
        return None
    if len(names) > 1:
        raise ValueError(f"dataset folder {folder} holds several NCF splits {names}; pass the folder of one")
    return names[0]


def _check_dataset(dataset) -> str:
    """A simulated dataset's name (see :data:`itemsampling.data.DATASETS`) or the path of a folder
    holding MovieLens files (``u.data``, ``ratings.dat`` or ``ratings.csv``; searched recursively)
    or an NCF-style split; returns the name, or the folder's absolute path as a string."""
    if isinstance(dataset, Path):
        dataset = str(dataset)
    if not isinstance(dataset, str) or not dataset:
        raise ValueError(f"dataset must be one of {sorted(DATASETS)} or the path of a folder holding MovieLens "
                         f"files (u.data, ratings.dat, ratings.csv) or an NCF split, got {dataset!r}")
    if dataset in DATASETS:
        return dataset
    folder = Path(dataset).expanduser()
    if not folder.is_dir():
        raise ValueError(f"dataset must be one of {sorted(DATASETS)} or the path of an existing folder holding "
                         f"MovieLens files (u.data, ratings.dat, ratings.csv) or an NCF split, got {dataset!r}")
    if _ncf_prefix(folder) is None:
        _find_movielens_file(folder)  # a ValueError naming the folder when it holds no ratings file
    return str(folder.resolve())


def dataset_files(dataset) -> list[Path]:
    """The files a dataset is read from: none for a simulated dataset, else the MovieLens ratings
    file or the three NCF files."""
    dataset = _check_dataset(dataset)
    if dataset in DATASETS:
        return []
    folder = Path(dataset)
    prefix = _ncf_prefix(folder)
    if prefix is not None:
        return [folder / f"{prefix}.{k}" for k in ("train.rating", "test.rating", "test.negative")]
    return [_find_movielens_file(folder)]


def describe_dataset(dataset) -> str:
    """One Markdown phrase saying which data a chapter ran on, for glued prose: ``the simulated
    dataset `sim-ml1m` ``, ``the MovieLens file `ratings.dat` in `/data/ml-1m` `` or ``the NCF split
    `ml-1m` in `/data/ncf` ``."""
    dataset = _check_dataset(dataset)
    if dataset in DATASETS:
        return f"the simulated dataset `{dataset}`"
    files = dataset_files(dataset)
    if len(files) == 3:
        return f"the NCF split `{files[0].name[:-len('.train.rating')]}` in `{dataset}`"
    return f"the MovieLens file `{files[0].name}` in `{files[0].parent}`"


def _dataset_key(dataset: str) -> dict:
    """What identifies a dataset in cache keys: a simulated dataset's configuration, or the names,
    sizes and SHA-256 digests of a folder dataset's files."""
    if dataset in DATASETS:
        return DATASETS[dataset].__dict__
    import hashlib

    out = []
    for f in dataset_files(dataset):
        h = hashlib.sha256()
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                h.update(block)
        out.append([f.name, f.stat().st_size, h.hexdigest()])
    return {"files": out}


def _dataset_dir_name(dataset: str) -> str:
    """A cache sub-folder name for a dataset (a folder dataset gets its last path part and a hash)."""
    if dataset in DATASETS:
        return dataset
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(dataset).name) or "data"
    return f"{safe}-{stable_hash(dataset)[:12]}"


def load_interactions(dataset) -> pd.DataFrame:
    """All interactions of a dataset (``user, item, rating, timestamp``, ids 0-based): a simulated
    dataset's observed data, a MovieLens file re-indexed by :func:`itemsampling.data.load_movielens`,
    or an NCF split's training and test rows together."""
    dataset = _check_dataset(dataset)
    if dataset in DATASETS:
        return load_dataset(dataset)
    files = dataset_files(dataset)
    if len(files) == 1:
        return load_movielens(files[0])
    train, test, _ = load_ncf(Path(dataset), files[0].name[:-len(".train.rating")])
    df = pd.concat([train, test], ignore_index=True).sort_values(["user", "timestamp"], kind="stable")
    df = df.reset_index(drop=True)
    df.attrs.update({"n_users": train.attrs["n_users"], "n_items": train.attrs["n_items"]})
    return df


def load_split(dataset: str = "sim-ml1m", rng: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(train, test)`` with one held-out interaction per test user, the split every helper here uses.

    * a simulated dataset (``"sim-ml1m"``, ``"sim-ml100k"``) or a folder of MovieLens files
      (:func:`itemsampling.data.load_movielens`): :func:`itemsampling.data.leave_last_out`, ties
      broken with a seed derived from ``rng``; users with a single interaction cannot be split and are
      dropped (their number is in ``test.attrs["dropped_users"]``);
    * a folder holding an NCF-style split (:func:`itemsampling.data.load_ncf`): its own train and test
      files (leave-one-out by He et al. 2017); its 99 fixed decoys per user are not used, the book
      draws its own. Test users without a training interaction are dropped.
    """
    dataset = _check_dataset(dataset)
    rng = check_int(rng, "rng", low=0)
    if dataset in DATASETS:
        return leave_last_out(load_dataset(dataset), rng=np.random.default_rng(_model_seed(rng, "split")))
    files = dataset_files(dataset)
    if len(files) == 3:
        train, test, _ = load_ncf(Path(dataset), files[0].name[:-len(".train.rating")])
        known = np.isin(test["user"].to_numpy(), train["user"].to_numpy())
        dropped = int((~known).sum())
        attrs = dict(test.attrs)
        test = test[known].sort_values("user", kind="stable").reset_index(drop=True)
        test.attrs.update(attrs)
    else:
        df = load_movielens(files[0])
        counts = np.bincount(df["user"].to_numpy())
        keep = counts[df["user"].to_numpy()] >= 2
        dropped = int(np.sum((counts > 0) & (counts < 2)))
        if dropped:
            attrs = dict(df.attrs)
            df = df[keep].reset_index(drop=True)
            df.attrs.update(attrs)
        if df.empty:
            raise ValueError(f"dataset {dataset}: no user has two or more interactions to split")
        train, test = leave_last_out(df, rng=np.random.default_rng(_model_seed(rng, "split")))
    test.attrs["dropped_users"] = dropped
    return train, test


def fit_models(dataset: str = "sim-ml1m", models=None, rng: int = 0, progress: bool = False):
    """Fit models (names, default :data:`DEFAULT_MODELS`) on the ``load_split`` training part.
    Returns ``(train, test, {name: fitted model}, {name: fit seconds})``."""
    names = _model_names(models)
    train, test = load_split(dataset, rng)
    fitted, seconds = {}, {}
    it = names
    if progress:
        from tqdm import tqdm

        it = tqdm(names, desc="fit")
    for name in it:
        t = time.perf_counter()
        fitted[name] = make_model(name, rng, dataset).fit(train)
        seconds[name] = time.perf_counter() - t
    return train, test, fitted, seconds


def _model_names(models) -> list[str]:
    if models is None:
        return list(DEFAULT_MODELS)
    if isinstance(models, str):
        models = [models]
    names = list(models)
    if not names:
        raise ValueError("models must name at least one model")
    bad = [m for m in names if m not in MODEL_SPECS]
    if bad:
        raise ValueError(f"unknown model(s) {bad}; known: {sorted(MODEL_SPECS)}")
    if len(set(names)) != len(names):
        raise ValueError("models must not repeat a name")
    return names


@dataclass
class GlobalRanks(Mapping):
    """Global ranks of several models on one dataset; behaves like ``{name: ranks}``.

    Attributes
    ----------
    ranks : dict name -> int64 array of 1-based ranks, aligned with ``users``/``items``.
    n_items : catalog size N.
    pool_sizes : int64 array, each test user's pool N_u (= N with ``exclude_train=False``).
    users, test_items : the test users and their held-out items.
    dataset, exclude_train, rng : how they were computed.
    """

    ranks: dict
    n_items: int
    pool_sizes: np.ndarray
    users: np.ndarray
    test_items: np.ndarray
    dataset: str
    exclude_train: bool
    rng: int
    seconds: dict = field(default_factory=dict)

    def __getitem__(self, name):
        return self.ranks[name]

    def __iter__(self):
        return iter(self.ranks)

    def __len__(self):
        return len(self.ranks)

    @property
    def n_users(self) -> int:
        """Number of test users M."""
        return int(self.users.size)

    def subset(self, names) -> "GlobalRanks":
        return GlobalRanks({n: self.ranks[n] for n in names}, self.n_items, self.pool_sizes, self.users,
                           self.test_items, self.dataset, self.exclude_train, self.rng,
                           {n: self.seconds.get(n) for n in names})


@functools.lru_cache(maxsize=1)
def _code_version() -> str:
    """Hash of the source of the modules that produce the ranks: editing them invalidates caches."""
    import inspect

    from . import data as _data
    from . import ranking as _ranking

    return stable_hash([inspect.getsource(m) for m in (_models, _ranking, _data)])


def _ranks_path(dataset, name, exclude_train, rng) -> Path:
    cls_name, params = MODEL_SPECS[name]
    key = stable_hash({"v": CACHE_VERSION, "code": _code_version(), "dataset": dataset,
                       "config": _dataset_key(dataset),
                       "model": cls_name, "params": params, "name": name, "rng": rng,
                       "exclude_train": bool(exclude_train)})
    return cache_dir("ranks", _dataset_dir_name(dataset)) / f"{name}-{key}.npz"


def load_global_ranks(dataset: str = "sim-ml1m", models=None, exclude_train: bool = True, rng: int = 0,
                      progress: bool = True) -> GlobalRanks:
    """Global ranks of the held-out items under the named models on an embedded dataset, cached.

    Parameters
    ----------
    dataset : ``"sim-ml1m"`` (default) or ``"sim-ml100k"``, or the path of a folder holding MovieLens
        files or an NCF-style split (see :func:`load_split`; the cache key then holds the files'
        SHA-256 digests).
    models : ``None`` for :data:`DEFAULT_MODELS` (``itemknn, userknn, ease, als, popular, X, Y,
        Z``), or a name / list of names from :data:`MODEL_SPECS` (also ``random``, ``oracle``).
    exclude_train : rank among the items outside the user's training set (default), or among all.
    rng : non-negative integer seed (split tie-breaks, model initialisation, rank ties).

    Returns
    -------
    :class:`GlobalRanks`: a mapping ``name -> int64 array`` of 1-based ranks (one per test user,
    sorted by user), with ``n_items`` (N), ``pool_sizes`` (N_u), ``users``, ``test_items``. See the
    module docstring for the conventions.
    """
    dataset = _check_dataset(dataset)
    names = _model_names(models)
    rng = check_int(rng, "rng", low=0)
    out, seconds = {}, {}
    todo = []
    meta = None
    for name in names:
        z = load_npz(_ranks_path(dataset, name, exclude_train, rng))
        if z is None:
            todo.append(name)
        else:
            out[name] = z["ranks"]
            seconds[name] = float(z["seconds"])
            meta = z
    if todo:
        train, test = load_split(dataset, rng)
        it = todo
        if progress:
            from tqdm import tqdm

            it = tqdm(todo, desc=f"ranks on {dataset}")
        for name in it:
            t = time.perf_counter()
            model = make_model(name, rng, dataset).fit(train)
            fit_s = time.perf_counter() - t
            ranks, pools = global_ranks(model, train, test, exclude_train=exclude_train,
                                        rng=np.random.default_rng(_model_seed(rng, "ties-" + name)),
                                        return_pool=True)
            users = test["user"].to_numpy(np.int64)
            items = test["item"].to_numpy(np.int64)
            atomic_save_npz(_ranks_path(dataset, name, exclude_train, rng), ranks=ranks, pools=pools,
                            users=users, items=items, n_items=np.int64(n_items_of(train)),
                            seconds=np.float64(time.perf_counter() - t), fit_seconds=np.float64(fit_s))
            out[name] = ranks
            seconds[name] = time.perf_counter() - t
            meta = {"pools": pools, "users": users, "items": items, "n_items": np.int64(n_items_of(train))}
    return GlobalRanks({n: out[n] for n in names}, int(meta["n_items"]), np.asarray(meta["pools"]),
                       np.asarray(meta["users"]), np.asarray(meta["items"]), dataset, bool(exclude_train),
                       rng, seconds)


# ---------------------------------------------------------------------------------------------
# sampled ranks with per-user pools, exact metrics
# ---------------------------------------------------------------------------------------------
def sample_pool_ranks(global_ranks, pool_sizes, sample_size: int, rng=None, replacement: bool = True) -> np.ndarray:
    r"""Sampled ranks when each user's decoys come from their own pool of :math:`N_u` items:
    :func:`itemsampling.sampling.sample_ranks` applied to each group of users with the same pool
    size (so :math:`r_u - 1 \sim \mathrm{Binomial}(n-1, (R_u-1)/(N_u-1))` with replacement)."""
    R = np.asarray(global_ranks)
    P = np.asarray(pool_sizes)
    if R.shape != P.shape or R.ndim != 1:
        raise ValueError("global_ranks and pool_sizes must be 1-d arrays of the same length")
    gen = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    out = np.empty(R.size, dtype=np.int64)
    uniq, inv = np.unique(P, return_inverse=True)
    order = np.argsort(inv, kind="stable")
    bounds = np.searchsorted(inv[order], np.arange(uniq.size + 1))
    for g, N_u in enumerate(uniq):
        rows = order[bounds[g]:bounds[g + 1]]
        out[rows] = sample_ranks(R[rows], int(N_u), sample_size, rng=gen, replacement=replacement)
    return out


def expected_sampled_by_pool(global_ranks, pool_sizes, sample_size: int, metric: str, k: int | None = None,
                             replacement: bool = False) -> tuple[float, float]:
    r"""Exact mean and standard deviation of the sampled metric :math:`T^S` over the decoy draws
    when user :math:`u`'s decoys come from their own pool of :math:`N_u` items (``pool="user"``).

    Krichene & Rendle 2020, Eq. 16 with a per-user catalogue: users are grouped by pool size and
    :func:`itemsampling.sampling.sampled_metric_moments` gives each group's mean and variance;
    :math:`\mathbb E[T^S] = \frac1M\sum_u \mathbb E[F(r_u)\mid R_u, N_u]` and
    :math:`\mathrm{Var}[T^S] = \frac1{M^2}\sum_u \mathrm{Var}[F(r_u)\mid R_u, N_u]`.
    """
    R = np.asarray(global_ranks)
    P = np.asarray(pool_sizes)
    if R.shape != P.shape or R.ndim != 1 or R.size == 0:
        raise ValueError("global_ranks and pool_sizes must be non-empty 1-d arrays of the same length")
    total, var = 0.0, 0.0
    for N_u in np.unique(P):
        sel = P == N_u
        mean, sd = sampled_metric_moments(R[sel], int(N_u), sample_size, metric, k, replacement)
        total += mean * sel.sum()
        var += (sd * sel.sum()) ** 2  # sum of the group's per-user variances
    return total / R.size, float(np.sqrt(var)) / R.size


def exact_metric(global_ranks, metric: str, k: int | None, n_items: int, pool_sizes=None) -> float:
    """The exact metric :math:`T` on global ranks; AUC uses each user's pool size when given
    (:math:`(N_u - R_u)/(N_u - 1)`), else ``n_items``."""
    name = canonical_metric(metric)
    if name != "auc" or pool_sizes is None:
        return evaluate(global_ranks, name, k, n_items)
    R = np.asarray(global_ranks)
    P = np.asarray(pool_sizes)
    total = 0.0
    for N_u in np.unique(P):
        sel = P == N_u
        total += metric_values(R[sel], "auc", None, int(N_u)).sum()
    return float(total / R.size)


def uncorrected(sampled_ranks, n_items, sample_size, metric, k):
    """The uncorrected sampled metric :math:`T^S` (the metric on the sampled ranks, list length n)."""
    return evaluate(sampled_ranks, metric, k, sample_size)


class ExplicitSampler:
    """Sampled ranks from explicit decoy draws scored by fitted models
    (:func:`itemsampling.ranking.sampled_ranks_explicit`), for :func:`run_experiment`'s
    ``sampler``. Picklable, so it runs in joblib workers."""

    def __init__(self, fitted: dict, train: pd.DataFrame, test: pd.DataFrame, exclude_train: bool = True,
                 replacement: bool = True):
        self.fitted, self.train, self.test = fitted, train, test
        self.exclude_train, self.replacement = exclude_train, replacement

    def __call__(self, name: str, sample_size: int, rng) -> np.ndarray:
        from .ranking import sampled_ranks_explicit

        return sampled_ranks_explicit(self.fitted[name], self.train, self.test, sample_size, rng=rng,
                                      exclude_train=self.exclude_train, replacement=self.replacement)


# ---------------------------------------------------------------------------------------------
# runner
# ---------------------------------------------------------------------------------------------
DEFAULT_METRICS = (("recall", 10), ("ndcg", 10), ("ap", 10), ("auc", None))


@dataclass
class ExperimentResult:
    """Results of :func:`run_experiment`.

    ``values[repeat, model, size, metric, estimator]`` holds every estimate; ``exact[model,
    metric]`` the exact metrics; the label lists name each axis."""

    values: np.ndarray
    exact: np.ndarray
    models: list
    sample_sizes: list
    metrics: list
    estimators: list
    seconds: float = 0.0
    cache_path: str | None = None

    def _metric_label(self, m):
        return m[0] if m[1] is None else f"{m[0]}@{m[1]}"

    def records(self) -> pd.DataFrame:
        """Long table: repeat, model, sample_size, metric, estimator, value, exact."""
        R, Mo, S, Me, E = self.values.shape
        idx = np.indices(self.values.shape).reshape(5, -1)
        ml = [self._metric_label(m) for m in self.metrics]
        return pd.DataFrame({
            "repeat": idx[0], "model": np.asarray(self.models, dtype=object)[idx[1]],
            "sample_size": np.asarray(self.sample_sizes)[idx[2]], "metric": np.asarray(ml, dtype=object)[idx[3]],
            "estimator": np.asarray(self.estimators, dtype=object)[idx[4]], "value": self.values.ravel(),
            "exact": self.exact[idx[1], idx[3]]})

    def summary(self) -> pd.DataFrame:
        """Per model, sample size, metric and estimator: exact value, mean and std of the estimate
        over repeats, bias, and mean relative error ``|estimate - exact| / |exact|``."""
        v = self.values
        exact = self.exact[None, :, None, :, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.abs(v - exact) / np.abs(exact)
        rows = []
        for a, mo in enumerate(self.models):
            for b, n in enumerate(self.sample_sizes):
                for c, me in enumerate(self.metrics):
                    for d, es in enumerate(self.estimators):
                        x = v[:, a, b, c, d]
                        rows.append({"model": mo, "sample_size": n, "metric": self._metric_label(me),
                                     "estimator": es, "exact": self.exact[a, c], "mean": x.mean(),
                                     "std": x.std(ddof=1) if x.size > 1 else 0.0,
                                     "bias": x.mean() - self.exact[a, c],
                                     "rel_error": float(np.mean(rel[:, a, b, c, d]))})
        return pd.DataFrame(rows)

    def pairwise_order(self) -> pd.DataFrame:
        """Krichene & Rendle 2020, Table 4: for each pair of models, metric, sample size and
        estimator, the percentage of repeats in which the estimates order the pair as the exact
        metric does (ties count as wrong)."""
        rows = []
        v = self.values
        for a in range(len(self.models)):
            for b in range(a + 1, len(self.models)):
                for c, me in enumerate(self.metrics):
                    truth = np.sign(self.exact[a, c] - self.exact[b, c])
                    for s, n in enumerate(self.sample_sizes):
                        for d, es in enumerate(self.estimators):
                            got = np.sign(v[:, a, s, c, d] - v[:, b, s, c, d])
                            rows.append({"pair": f"{self.models[a]} vs {self.models[b]}",
                                         "metric": self._metric_label(me), "sample_size": n, "estimator": es,
                                         "percent_correct": 100.0 * float(np.mean(got == truth))})
        return pd.DataFrame(rows)

    def winner_accuracy(self) -> pd.DataFrame:
        """How often (fraction of repeats) each estimator picks the exact metric's best model."""
        best = np.argmax(self.exact, axis=0)  # per metric
        hits = np.argmax(self.values, axis=1) == best[None, None, :, None]  # (R, S, Me, E)
        rows = []
        for s, n in enumerate(self.sample_sizes):
            for c, me in enumerate(self.metrics):
                for d, es in enumerate(self.estimators):
                    rows.append({"sample_size": n, "metric": self._metric_label(me), "estimator": es,
                                 "true_winner": self.models[best[c]], "accuracy": float(hits[:, s, c, d].mean())})
        return pd.DataFrame(rows)


def _repeat_seed(rng: int, repeat: int, *labels) -> np.random.SeedSequence:
    return np.random.SeedSequence(int(rng), spawn_key=(int(repeat),) + tuple(zlib.crc32(str(x).encode()) for x in labels))


def _one_repeat(repeat, ranks, pools, n_items, models, sample_sizes, metrics, estimators, rng, replacement,
                pool, sampler, path):
    out = np.empty((len(models), len(sample_sizes), len(metrics), len(estimators)))
    for a, mo in enumerate(models):
        for b, n in enumerate(sample_sizes):
            gen = np.random.default_rng(_repeat_seed(rng, repeat, mo, n))
            if sampler is not None:
                r = sampler(mo, n, gen)
            elif pool == "user":
                r = sample_pool_ranks(ranks[mo], pools, n, gen, replacement)
            else:
                r = sample_ranks(ranks[mo], n_items, n, gen, replacement)
            for c, (me, k) in enumerate(metrics):
                for d, fn in enumerate(estimators.values()):
                    out[a, b, c, d] = fn(r, n_items, n, me, k)
    if path is not None:
        atomic_save_npz(Path(path) / f"repeat-{repeat:05d}.npz", values=out)
    return repeat, out


def run_experiment(ranks: GlobalRanks, sample_sizes=(100,), n_repeats: int = 100, metrics=DEFAULT_METRICS,
                   estimators: dict | None = None, rng: int = 0, replacement: bool = True, pool: str = "user",
                   sampler: Callable | None = None, n_jobs: int = 1, cache: bool | str | Path = True,
                   name: str | None = None, progress: bool = True) -> ExperimentResult:
    """Repeat a sampled evaluation ``n_repeats`` times and evaluate metrics and estimators.

    For every repeat, model and sample size ``n``: draw each user's sampled rank (through the
    kernel from the global ranks, or with ``sampler(model, n, rng)``, e.g. an
    :class:`ExplicitSampler`), then apply every estimator ``fn(sampled_ranks, N, n, metric, k)``
    (default ``{"sampled": uncorrected}``) for every ``(metric, k)`` in ``metrics``.

    * ``pool="user"``: each user's decoys come from their own pool of ``ranks.pool_sizes[u]`` items
      (exactly the protocol behind ``exclude_train=True``); ``pool="catalog"``: from the ``N - 1``
      other items (the kernel with ``N = ranks.n_items``).
    * Repeat ``i`` uses ``SeedSequence(rng, spawn_key=(i, model, n))``: results do not depend on
      ``n_jobs`` or on which repeats were already done.
    * ``cache`` (True: ``data/cache/experiments/<key>``; or a folder; False: off): every finished
      repeat is written atomically as soon as it is done, so an interrupted run resumes with the
      missing repeats only. The key hashes the ranks' provenance, the settings and the estimator
      *names* (rename an estimator when you change its code, or pass ``name``).
    * ``n_jobs`` > 1 runs repeats in parallel with joblib; a tqdm bar shows progress.
    """
    if not isinstance(ranks, GlobalRanks):
        raise ValueError("ranks must be a GlobalRanks (from load_global_ranks)")
    n_repeats = check_int(n_repeats, "n_repeats", low=1)
    rng = check_int(rng, "rng", low=0)
    n_jobs = check_int(n_jobs, "n_jobs", low=-1)
    sizes = [check_int(n, "sample_size", low=2, high=int(ranks.pool_sizes.min()) if pool == "user" and not replacement
                       else ranks.n_items) for n in np.atleast_1d(sample_sizes)]
    if pool not in ("user", "catalog"):
        raise ValueError(f"pool must be 'user' or 'catalog', got {pool!r}")
    mets = []
    for m in metrics:
        me, k = (m, None) if isinstance(m, str) else m
        mets.append((canonical_metric(me), None if k is None else check_int(k, "k", low=1)))
    estimators = dict(estimators or {"sampled": uncorrected})
    if not estimators or not all(callable(f) for f in estimators.values()):
        raise ValueError("estimators must be a non-empty dict of name -> callable")
    models = list(ranks.keys())
    exact = np.array([[exact_metric(ranks[mo], me, k, ranks.n_items, ranks.pool_sizes if pool == "user" else None)
                       for me, k in mets] for mo in models])
    path = None
    if cache:
        key = stable_hash({"v": CACHE_VERSION, "dataset": ranks.dataset, "exclude_train": ranks.exclude_train,
                           "rank_rng": ranks.rng, "models": models, "model_specs": [MODEL_SPECS.get(m) for m in models],
                           "ranks_digest": [stable_hash(ranks[m].tolist()) for m in models],
                           "sizes": sizes, "metrics": mets, "estimators": list(estimators), "rng": rng,
                           "replacement": replacement, "pool": pool, "sampler": None if sampler is None else
                           (name or type(sampler).__name__), "name": name})
        path = Path(cache) if not isinstance(cache, bool) else cache_dir("experiments") / key
        path.mkdir(parents=True, exist_ok=True)
    values = np.empty((n_repeats, len(models), len(sizes), len(mets), len(estimators)))
    missing = []
    for i in range(n_repeats):
        z = load_npz(path / f"repeat-{i:05d}.npz") if path is not None else None
        if z is not None and z["values"].shape == values.shape[1:]:
            values[i] = z["values"]
        else:
            missing.append(i)
    t0 = time.perf_counter()
    if missing:
        from tqdm import tqdm

        args = (ranks.ranks, ranks.pool_sizes, ranks.n_items, models, sizes, mets, estimators, rng,
                replacement, pool, sampler, None if path is None else str(path))
        bar = tqdm(total=n_repeats, initial=n_repeats - len(missing), desc="repeats", disable=not progress)
        if n_jobs == 1:
            for i in missing:
                values[i] = _one_repeat(i, *args)[1]
                bar.update(1)
        else:
            from joblib import Parallel, delayed

            par = Parallel(n_jobs=n_jobs, return_as="generator_unordered")
            for i, v in par(delayed(_one_repeat)(i, *args) for i in missing):
                values[i] = v
                bar.update(1)
        bar.close()
    return ExperimentResult(values, exact, models, sizes, mets, list(estimators), time.perf_counter() - t0,
                            None if path is None else str(path))
