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
name, and results are cached in ``data/cache/ranks`` (atomic writes) keyed by the dataset (a
simulated dataset's configuration, or the content of the files a real-data folder is read from:
:func:`dataset_fingerprint`), the model's class and parameters, the seed, ``exclude_train``, a
cache version and the package's version and source; a second call is instant. Every cache file
carries its key and a checksum, verified on read: a truncated, edited or inconsistent file (ranks
outside their pools, another split) is recomputed with a
:class:`~itemsampling.data.cache.CacheWarning`, never returned.
"""

from __future__ import annotations

import functools
import os
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from . import models as _models
from . import ranking as _ranking
from ._parallel import SCHEDULER_ENV as _SCHEDULER_ENV
from ._parallel import require_distributed
from ._validation import as_rng, check_bool, check_int, check_ranks, check_seed
from .data import (CACHE_VERSION, DATASETS, FORMATS, atomic_save_npz, cache_dir, detect_format, drop_short_users,
                   given_split, leave_last_out, load_dataset, load_ncf, load_npz, load_truth, n_items_of, stable_hash)
from .data import interactions as _interactions
from .data import load_interactions as _load_interactions
from .data import cache as _cache
from .data import frames as _frames
from .data import loaders as _loaders
from .data import simulator as _simulator
from .data.cache import CacheWarning, fingerprint, package_fingerprint, path_fingerprint
from .metrics import canonical_metric, evaluate, metric_values
from .ranking import global_ranks, sampled_ranks_explicit
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
    "dataset_source",
    "DataSource",
    "data_statement",
    "data_phrase",
    "has_given_split",
    "fit_models",
    "load_global_ranks",
    "sample_pool_ranks",
    "expected_sampled_by_pool",
    "exact_metric",
    "ExplicitSampler",
    "ExperimentResult",
    "run_experiment",
    "experiment_key",
    "dataset_fingerprint",
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
    rng = check_seed(rng, "rng")  # as as_rng: no float or bool seed
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


class DataSource(str):
    """The path of a data folder or file (a ``str``, so every helper takes it as ``dataset``) that
    also carries the user and item columns of a table or RecBole file (``user_column``,
    ``item_column``; ``None``: the usual names). Made by :func:`dataset_source`."""

    def __new__(cls, path, user_column=None, item_column=None):
        obj = super().__new__(cls, str(path))
        obj.user_column, obj.item_column = user_column, item_column
        return obj

    def __reduce__(self):
        return (DataSource, (str(self), self.user_column, self.item_column))


def _columns(dataset) -> tuple:
    return (getattr(dataset, "user_column", None), getattr(dataset, "item_column", None))


def dataset_source(dataset, user_column=None, item_column=None):
    """A chapter's ``dataset`` parameter with its ``user_column`` / ``item_column`` parameters: the
    dataset unchanged when both are ``None``, else a :class:`DataSource` (the resolved path with the
    columns). Columns given for a simulated dataset are refused naming the parameter."""
    for name, v in (("user_column", user_column), ("item_column", item_column)):
        if v is not None and (not isinstance(v, str) or not v.strip()):
            raise ValueError(f"{name} must be a column name (a non-empty string) or None, got {v!r:.60}")
    if user_column is None and item_column is None:
        return dataset
    key = _check_dataset(dataset)
    if key in DATASETS:
        raise ValueError(f"user_column / item_column name columns of a data file; dataset {key!r} is simulated")
    return DataSource(key, user_column, item_column)


def _check_dataset(dataset) -> str:
    """A simulated dataset's name (see :data:`itemsampling.data.DATASETS`) or the path of a folder
    or file of interactions in a format :func:`itemsampling.data.load_interactions` reads (recognised
    by content: :data:`itemsampling.data.FORMATS`); returns the name, or the absolute path as a
    string (a :class:`DataSource` keeps its columns)."""
    cols = _columns(dataset)
    if isinstance(dataset, Path):
        dataset = str(dataset)
    if not isinstance(dataset, str) or not dataset:
        raise ValueError(f"dataset must be one of {sorted(DATASETS)} or the path of a folder or file of "
                         f"interactions ({'; '.join(FORMATS)}), got {dataset!r}")
    if dataset in DATASETS:
        return str(dataset)
    path = Path(dataset).expanduser()
    if not path.exists():
        raise ValueError(f"dataset must be one of {sorted(DATASETS)} or the path of an existing folder or file "
                         f"of interactions ({'; '.join(FORMATS)}), got {str(dataset)!r}")
    detect_format(path)  # a ValueError listing the formats when no loader reads it
    key = str(path.resolve())
    return DataSource(key, *cols) if any(c is not None for c in cols) else key


def dataset_files(dataset) -> list[Path]:
    """The files a dataset is read from: none for a simulated dataset, else the files of its
    format (:func:`itemsampling.data.detect_format`)."""
    dataset = _check_dataset(dataset)
    if dataset in DATASETS:
        return []
    return detect_format(dataset)[1]


def _format(dataset) -> str | None:
    dataset = _check_dataset(dataset)
    return None if dataset in DATASETS else detect_format(dataset)[0]


_FORMAT_WORDS = {"user-lines": "the user-line split", "count-lines": "the count-prefixed user lines",
                 "recbole": "the RecBole atomic file", "table": "the interactions table",
                 "split": "the split given as tables"}


def describe_dataset(dataset) -> str:
    """One Markdown phrase saying which data a chapter ran on, for glued prose, such as "the
    simulated dataset ``sim-ml1m``", "the MovieLens file ``ratings.dat`` in ``/data/ml-1m``", "the
    NCF split ``ml-1m`` in ``/data/ncf``", "the user-line split ``train.txt`` + ``test.txt`` in
    ``/data/amazon-book``" or "the RecBole atomic file ``ml-100k.inter`` in ``/data``" (the names
    in Markdown backticks)."""
    dataset = _check_dataset(dataset)
    if dataset in DATASETS:
        return f"the simulated dataset `{dataset}`"
    kind, files = detect_format(dataset)
    if kind == "ncf":
        return f"the NCF split `{files[0].name[:-len('.train.rating')]}` in `{files[0].parent}`"
    if kind == "movielens":
        return f"the MovieLens file `{files[0].name}` in `{files[0].parent}`"
    names = " + ".join(f"`{f.name}`" for f in files)
    cols = [f"{r} column `{c}`" for r, c in zip(("user", "item"), _columns(dataset)) if c is not None]
    return f"{_FORMAT_WORDS[kind]} {names} in `{files[0].parent}`" + (f" ({', '.join(cols)})" if cols else "")


def load_interactions(dataset) -> pd.DataFrame:
    """All interactions of a dataset (``user, item, rating, timestamp``, ids 0-based): a simulated
    dataset's observed data, or a folder or file read by :func:`itemsampling.data.load_interactions`
    (with a :class:`DataSource`'s columns); an NCF or user-line split gives its training and test
    rows together, the test rows flagged in ``attrs["held_out"]``."""
    dataset = _check_dataset(dataset)
    if dataset in DATASETS:
        return load_dataset(dataset)
    return _load_interactions(dataset, *_columns(dataset))


def has_given_split(dataset) -> bool:
    """Whether a dataset comes with its own train/test split (an NCF split, ``train.txt`` with
    ``test.txt``), which :func:`load_split` keeps."""
    kind = _format(dataset)
    return kind in ("ncf", "split") or (kind == "user-lines" and len(dataset_files(dataset)) == 2)


def data_phrase(dataset) -> str:
    """A Markdown phrase naming a dataset with its users, items and interactions and the SHA-256
    digest of every file read, e.g. "the RecBole atomic file ``ml-100k.inter`` in ``/data``, 943
    users, 1,682 items, 100,000 interactions; SHA-256 ``ml-100k.inter`` ``4c5a...``" (a simulated
    dataset: generated by the package, no file to hash)."""
    dataset = _check_dataset(dataset)
    df = load_interactions(dataset)
    U, N, n = int(df.attrs.get("n_users", df["user"].max() + 1)), n_items_of(df), len(df)
    head = f"{describe_dataset(dataset)}, {U:,} users, {N:,} items, {n:,} interactions"
    if dataset in DATASETS:
        return head + " (generated by the package from its configuration; no file to hash)"
    files = df.attrs.get("source", {}).get("files", [])
    return head + "; SHA-256 " + ", ".join(f"`{f['name']}` `{f['sha256']}`" for f in files)


def data_statement(dataset, keeps_split: bool = True) -> str:
    """Markdown sentences stating the data a chapter ran on: its description, users, items,
    interactions and the SHA-256 digest of every file read (a simulated dataset: generated by the
    package, no file), and for a dataset with its own train/test split how :func:`load_split` keeps
    it (the held-out items), or, with ``keeps_split=False`` (a chapter that splits the data its own
    way), that the chapter does not use it."""
    keeps_split = check_bool(keeps_split, "keeps_split")
    dataset = _check_dataset(dataset)
    text = f"Data: {data_phrase(dataset)}."
    if dataset in DATASETS:
        return text
    files = dataset_files(dataset)
    if has_given_split(dataset) and not keeps_split:
        text += (" It comes with its own train/test split, which this chapter does not use: it splits the "
                 "interactions of both files its own way, as described below.")
    elif has_given_split(dataset):
        train_name, test_name = files[0].name, files[-1].name
        text += (f" It comes with its own train/test split, which the chapter's split keeps: the models train "
                 f"on `{train_name}`, and each test user's held-out item is one of their `{test_name}` items, "
                 "drawn with the seed (a user's other test items are neither trained on nor held out, so they "
                 "stay in the ranking pool); users without a training item are dropped.")
    return text


def load_split(dataset: str = "sim-ml1m", rng: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(train, test)`` with one held-out interaction per test user, the split every helper here uses.

    * a simulated dataset (``"sim-ml1m"``, ``"sim-ml100k"``) or data without a split of its own
      (MovieLens files, count-prefixed user lines, RecBole files, tables, ``train.txt`` alone):
      :func:`itemsampling.data.leave_last_out`, ties (and data without timestamps) broken with a seed
      derived from ``rng``; users with a single interaction cannot be split and are dropped (their
      number is in ``test.attrs["dropped_users"]``);
    * a folder holding an NCF-style split (:func:`itemsampling.data.load_ncf`): its own train and test
      files (leave-one-out by He et al. 2017); its 99 fixed decoys per user are not used, the book
      draws its own. Test users without a training interaction are dropped;
    * a user-line split (``train.txt`` + ``test.txt``): its own split is kept: train on
      ``train.txt``, and hold out for each test user one of their ``test.txt`` items drawn with a
      seed derived from ``rng`` (the user's other test items are not trained on and stay in the
      ranking pool); test users without a training item are dropped.
    """
    dataset = _check_dataset(dataset)
    rng = check_seed(rng, "rng")
    if dataset in DATASETS:
        return leave_last_out(load_dataset(dataset), rng=np.random.default_rng(_model_seed(rng, "split")))
    kind, files = detect_format(dataset)
    if kind == "ncf":
        train, test, _ = load_ncf(files[0].parent, files[0].name[:-len(".train.rating")])
        known = np.isin(test["user"].to_numpy(), train["user"].to_numpy())
        dropped = int((~known).sum())
        attrs = dict(test.attrs)
        test = test[known].sort_values("user", kind="stable").reset_index(drop=True)
        test.attrs.update(attrs)
        test.attrs["dropped_users"] = dropped
        return train, test
    df = _load_interactions(dataset, *_columns(dataset))
    split = given_split(df)
    if split is not None:
        train, held = split
        gen = np.random.default_rng(_model_seed(rng, "split"))
        hu = held["user"].to_numpy()
        order = np.lexsort((gen.random(hu.size), hu))
        first = np.ones(order.size, dtype=bool)
        first[1:] = hu[order][1:] != hu[order][:-1]
        pick = order[first]
        known = np.isin(hu[pick], train["user"].to_numpy())
        attrs = dict(train.attrs)
        test = held.iloc[np.sort(pick[known])].sort_values("user", kind="stable").reset_index(drop=True)
        test.attrs.update(attrs)
        test.attrs["dropped_users"] = int((~known).sum())
        test.attrs["held_out_rows"] = int(len(held))
        return train, test
    df, dropped = drop_short_users(df, 2)
    if df.empty:
        raise ValueError(f"dataset {dataset}: no user has two or more interactions to split")
    train, test = leave_last_out(df, rng=np.random.default_rng(_model_seed(rng, "split")))
    test.attrs["dropped_users"] = dropped
    return train, test


def fit_models(dataset: str = "sim-ml1m", models=None, rng: int = 0, progress: bool = False):
    """Fit models (names, default :data:`DEFAULT_MODELS`) on the ``load_split`` training part.
    Returns ``(train, test, {name: fitted model}, {name: fit seconds})``."""
    names = _model_names(models)
    progress = check_bool(progress, "progress")
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

    return stable_hash([inspect.getsource(m) for m in (_models, _ranking, _cache, _frames, _loaders, _simulator,
                                                       _interactions)])


def dataset_fingerprint(dataset) -> dict:
    """What a cache key records about a dataset: for an embedded dataset its name and simulator
    configuration; for a folder of real data its resolved path and a hash of the content of every
    file it is read from (:func:`dataset_files`; :func:`itemsampling.data.cache.path_fingerprint`),
    so editing or replacing a data file invalidates every result computed from it."""
    dataset = _check_dataset(dataset)
    if dataset in DATASETS:
        return {"name": dataset, "config": dict(DATASETS[dataset].__dict__)}
    files = dataset_files(dataset)
    out = {"path": str(dataset), "files": [f.name for f in files], "content": [path_fingerprint(f) for f in files]}
    if any(c is not None for c in _columns(dataset)):
        out["columns"] = list(_columns(dataset))
    return out


def _dataset_label(dataset) -> str:
    """A file-name-safe label of a dataset for the cache folder."""
    if isinstance(dataset, str) and dataset in DATASETS:
        return dataset
    text = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(dataset).name) or "data"
    return f"{text[:40]}-{stable_hash(str(Path(dataset).resolve()))[:8]}"


def _ranks_path(dataset, name, exclude_train, rng, data_key=None) -> tuple[Path, str]:
    cls_name, params = MODEL_SPECS[name]
    key = stable_hash({"v": CACHE_VERSION, "code": _code_version(), "package": package_fingerprint(),
                       "dataset": data_key if data_key is not None else dataset_fingerprint(dataset),
                       "model": cls_name, "params": params, "name": name, "rng": rng,
                       "exclude_train": bool(exclude_train)})
    return cache_dir("ranks", _dataset_label(dataset)) / f"{name}-{key}.npz", key


def _valid_ranks_file(z: dict, ref: dict | None) -> bool:
    """Semantic check of a verified ranks cache file: ranks in ``1..N_u``, pools in ``2..N``,
    aligned arrays, and the same test users as the other models' files (``ref``)."""
    try:
        ranks, pools, n = z["ranks"], z["pools"], int(z["n_items"])
        ok = (ranks.ndim == 1 and ranks.size > 0 and ranks.dtype.kind in "iu"
              and ranks.shape == pools.shape == z["users"].shape == z["items"].shape
              and ranks.min() >= 1 and np.all(ranks <= pools) and pools.max() <= n and n >= 2)
        if ok and ref is not None:
            ok = (int(ref["n_items"]) == n and np.array_equal(ref["users"], z["users"])
                  and np.array_equal(ref["items"], z["items"]) and np.array_equal(ref["pools"], z["pools"]))
    except (KeyError, ValueError, TypeError):
        ok = False
    if not ok:
        import warnings

        warnings.warn("a ranks cache file is inconsistent (ranks outside their pools or another split); "
                      "recomputing it", CacheWarning, stacklevel=3)
    return ok


def load_global_ranks(dataset: str = "sim-ml1m", models=None, exclude_train: bool = True, rng: int = 0,
                      progress: bool = True) -> GlobalRanks:
    """Global ranks of the held-out items under the named models on an embedded dataset, cached.

    Parameters
    ----------
    dataset : ``"sim-ml1m"`` (default) or ``"sim-ml100k"``, or the path of a folder holding MovieLens
        files or an NCF-style split (see :func:`load_split`; the cache key then holds the files'
        SHA-256 digests).
    models : ``None``, a name or a list of names
        ``None`` for :data:`DEFAULT_MODELS` (``itemknn, userknn, ease, als, popular, X, Y, Z``), or
        names from :data:`MODEL_SPECS` (also ``random``, ``oracle``).
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
    rng = check_seed(rng, "rng")
    exclude_train = check_bool(exclude_train, "exclude_train")
    progress = check_bool(progress, "progress")
    data_key = dataset_fingerprint(dataset)
    out, seconds = {}, {}
    todo = []
    meta = None
    for name in names:
        path, key = _ranks_path(dataset, name, exclude_train, rng, data_key)
        z = load_npz(path, cache_key=key)
        if z is None or not _valid_ranks_file(z, meta):
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
            path, key = _ranks_path(dataset, name, exclude_train, rng, data_key)
            atomic_save_npz(path, cache_key=key, ranks=ranks, pools=pools,
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
    R, P = _check_ranks_pools(global_ranks, pool_sizes)
    replacement = check_bool(replacement, "replacement")
    sample_size = check_int(sample_size, "sample_size", low=2, high=int(P.min()) if not replacement else None)
    gen = as_rng(rng)
    out = np.empty(R.size, dtype=np.int64)
    uniq, inv = np.unique(P, return_inverse=True)
    order = np.argsort(inv, kind="stable")
    bounds = np.searchsorted(inv[order], np.arange(uniq.size + 1))
    for g, N_u in enumerate(uniq):
        rows = order[bounds[g]:bounds[g + 1]]
        out[rows] = sample_ranks(R[rows], int(N_u), sample_size, rng=gen, replacement=replacement)
    return out


def _check_ranks_pools(global_ranks, pool_sizes) -> tuple[np.ndarray, np.ndarray]:
    """Integral pool sizes ``N_u >= 2`` and ranks ``1 <= R_u <= N_u`` of the same length."""
    P = check_ranks(pool_sizes, "pool_sizes")
    R = check_ranks(global_ranks, "global_ranks")
    if R.shape != P.shape:
        raise ValueError(f"global_ranks and pool_sizes must have the same length, got {R.size} and {P.size}")
    if P.min() < 2:
        raise ValueError(f"pool_sizes must be >= 2, got {P.min()}")
    bad = np.flatnonzero(R > P)
    if bad.size:
        raise ValueError(f"global_ranks must lie in 1..pool_sizes; user {bad[0]} has rank {R[bad[0]]} "
                         f"> pool size {P[bad[0]]}")
    return R, P


def expected_sampled_by_pool(global_ranks, pool_sizes, sample_size: int, metric: str, k: int | None = None,
                             replacement: bool = False) -> tuple[float, float]:
    r"""Exact mean and standard deviation of the sampled metric :math:`T^S` over the decoy draws
    when user :math:`u`'s decoys come from their own pool of :math:`N_u` items (``pool="user"``).

    Krichene & Rendle 2020, Eq. 16 with a per-user catalogue: users are grouped by pool size and
    :func:`itemsampling.sampling.sampled_metric_moments` gives each group's mean and variance;
    :math:`\mathbb E[T^S] = \frac1M\sum_u \mathbb E[F(r_u)\mid R_u, N_u]` and
    :math:`\mathrm{Var}[T^S] = \frac1{M^2}\sum_u \mathrm{Var}[F(r_u)\mid R_u, N_u]`.
    """
    R, P = _check_ranks_pools(global_ranks, pool_sizes)
    replacement = check_bool(replacement, "replacement")
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
    check_ranks(global_ranks, "global_ranks", high=check_int(n_items, "n_items", low=2))
    if name != "auc" or pool_sizes is None:
        return evaluate(global_ranks, name, k, n_items)
    R, P = _check_ranks_pools(global_ranks, pool_sizes)
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
        self.exclude_train = check_bool(exclude_train, "exclude_train")
        self.replacement = check_bool(replacement, "replacement")

    def __call__(self, name: str, sample_size: int, rng) -> np.ndarray:
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


class _ParentGone(Exception):
    """Raised in a worker whose parent process has died: it stops without writing anything."""


def _parent_alive(parent_pid) -> bool:
    import os

    return parent_pid is None or os.getppid() == parent_pid


_WATCHDOG: dict = {}


def _start_parent_watchdog(parent_pid, interval: float = 0.1) -> None:
    """In a worker process: a daemon thread that ends the process as soon as its parent (the
    process that called :func:`run_experiment`) is gone, so an orphaned worker neither keeps
    running nor writes cache files. Idempotent per worker and parent."""
    import os
    import threading

    if parent_pid is None or _WATCHDOG.get("pid") == parent_pid:
        return

    def watch():
        while True:
            if os.getppid() != parent_pid:
                os._exit(1)
            time.sleep(interval)

    _WATCHDOG["pid"] = parent_pid
    threading.Thread(target=watch, name="itemsampling-parent-watchdog", daemon=True).start()


def _one_repeat(repeat, ranks, pools, n_items, models, sample_sizes, metrics, estimators, rng, replacement,
                pool, sampler, path, cache_key="", parent_pid=None):
    _start_parent_watchdog(parent_pid)
    out = np.empty((len(models), len(sample_sizes), len(metrics), len(estimators)))
    for a, mo in enumerate(models):
        for b, n in enumerate(sample_sizes):
            if not _parent_alive(parent_pid):  # killed or interrupted parent: stop, write nothing
                raise _ParentGone(repeat)
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
    # a repeat holding NaN is returned but never cached; an orphaned worker never writes
    if path is not None and np.all(np.isfinite(out)) and _parent_alive(parent_pid):
        atomic_save_npz(Path(path) / f"repeat-{repeat:05d}.npz", cache_key=cache_key, values=out)
    return repeat, out


#: Environment variable naming a Dask scheduler address for :func:`run_experiment` (``backend=None``)
#: and every other experiment of the package (:func:`itemsampling._parallel.parallel_map`).
SCHEDULER_ENV = _SCHEDULER_ENV


def _check_backend(backend, scheduler):
    if backend is None:
        env = os.environ.get(SCHEDULER_ENV, "").strip()
        if scheduler is None and env:
            scheduler = env
        backend = "dask" if scheduler is not None else "local"
    if backend not in ("local", "dask"):
        raise ValueError(f"backend must be 'local', 'dask' or None, got {backend!r}")
    if scheduler is not None:
        if backend != "dask":
            raise ValueError("scheduler is used by backend='dask' only")
        if not isinstance(scheduler, str) or not scheduler.strip():
            raise ValueError(f"scheduler must be a Dask scheduler address such as 'tcp://host:8786', got {scheduler!r}")
    if backend == "dask":
        # a missing optional dependency is an ImportError with the install hint (as pandas and
        # scikit-learn report theirs), not a bad argument
        require_distributed()
    return backend, scheduler


def _dask_repeats(missing, args, scheduler, n_jobs):
    """Yield ``(repeat, values)`` for the ``missing`` repeats, computed as Dask tasks by
    :func:`_one_repeat` (the same function and seeds as the serial run), as they finish. Workers
    write nothing (the caller caches each result). A local cluster started here is closed on exit,
    also on error or interruption."""
    from distributed import Client, LocalCluster, as_completed

    cluster = None
    if scheduler is None:
        workers = n_jobs if n_jobs > 1 else (os.cpu_count() or 1)
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    else:
        try:
            client = Client(scheduler, timeout="30s")
        except OSError as exc:
            raise ValueError(f"cannot reach the Dask scheduler at {scheduler!r}: {exc}") from exc
    try:
        *shared, _path, key = args  # the cache folder stays here: workers get None and write nothing
        futs = client.scatter(list(shared), broadcast=True)
        tasks = [client.submit(_one_repeat, i, *futs, None, key, None, pure=False) for i in missing]
        for fut in as_completed(tasks):
            yield fut.result()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def experiment_key(ranks: GlobalRanks, sizes, metrics, estimators: dict, rng: int, replacement: bool, pool: str,
                   sampler=None, name=None) -> str:
    """The cache key of a :func:`run_experiment` call: a hash of every input that changes a value
    (see its ``cache`` argument)."""
    models = list(ranks.keys())
    return stable_hash({
        "v": CACHE_VERSION, "package": package_fingerprint(), "dataset": str(ranks.dataset),
        "exclude_train": bool(ranks.exclude_train), "rank_rng": ranks.rng, "models": models,
        "ranks": [fingerprint(np.asarray(ranks[m], dtype=np.int64)) for m in models],
        "n_items": int(ranks.n_items), "pool_sizes": fingerprint(np.asarray(ranks.pool_sizes, dtype=np.int64)),
        "users": fingerprint(np.asarray(ranks.users)), "test_items": fingerprint(np.asarray(ranks.test_items)),
        "sizes": [int(n) for n in sizes], "metrics": [list(m) for m in metrics],
        "estimators": {k: fingerprint(f) for k, f in estimators.items()}, "estimator_order": list(estimators),
        "rng": int(rng), "replacement": bool(replacement), "pool": pool,
        "sampler": None if sampler is None else fingerprint(sampler), "name": name})


def run_experiment(ranks: GlobalRanks, sample_sizes=(100,), n_repeats: int = 100, metrics=DEFAULT_METRICS,
                   estimators: dict | None = None, rng: int = 0, replacement: bool = True, pool: str = "user",
                   sampler: Callable | None = None, n_jobs: int = 1, cache: bool | str | Path = True,
                   name: str | None = None, progress: bool = True, backend: str | None = None,
                   scheduler: str | None = None) -> ExperimentResult:
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
      missing repeats only. The key covers every input that changes a value: the ranks themselves,
      the catalog size ``N``, the pool sizes and test users, the sample sizes, metrics, seed,
      ``replacement``, ``pool``, the estimators and the sampler (by content: code, parameters,
      closures; :func:`itemsampling.data.cache.fingerprint`) and the package version and source.
      An explicit folder holds one sub-folder per key, so runs with other inputs never share files.
      Every file carries its key and a checksum; a file that does not verify (truncated, edited,
      holding NaN) is recomputed with a :class:`~itemsampling.data.cache.CacheWarning`. A repeat
      whose values hold NaN is returned but never cached.
    * ``n_jobs`` > 1 runs repeats in parallel with joblib; a tqdm bar shows progress. Workers check
      that the calling process is alive before each step and before writing: when it is killed or
      interrupted they stop without writing any file.
    * ``backend="dask"`` runs the repeats as tasks on a Dask cluster (``dask.distributed``):
      ``scheduler=None`` starts a local cluster of ``n_jobs`` worker processes (all cores for
      ``n_jobs`` in (1, -1)) and shuts it down afterwards, also on error or interruption;
      ``scheduler="tcp://host:8786"`` uses an existing cluster. Results are bit-identical to
      ``n_jobs=1`` for the same ``rng`` (the same per-repeat function and seeds). Workers write
      nothing: this process caches each finished repeat as it arrives (same key, checksum and
      resume as above), so the cache works even when the workers share no disk with it.
      ``backend=None`` (default) is ``"local"`` (joblib / serial) unless the environment variable
      ``ITEMSAMPLING_SCHEDULER`` holds an address (set by ``python -m itemsampling.run
      --scheduler ADDRESS``), which selects ``"dask"`` on that cluster.
    """
    if not isinstance(ranks, GlobalRanks):
        raise ValueError("ranks must be a GlobalRanks (from load_global_ranks)")
    if len(ranks) == 0 or np.size(ranks.pool_sizes) == 0:
        raise ValueError("ranks must hold at least one model and one user")
    n_repeats = check_int(n_repeats, "n_repeats", low=1)
    rng = check_seed(rng, "rng")
    n_jobs = check_int(n_jobs, "n_jobs", low=-1)
    if n_jobs == 0:
        raise ValueError("n_jobs must be >= 1 or -1 (all cores), got 0")
    backend, scheduler = _check_backend(backend, scheduler)
    replacement = check_bool(replacement, "replacement")
    progress = check_bool(progress, "progress")
    if not isinstance(cache, (bool, np.bool_, str, Path)):
        raise ValueError(f"cache must be True, False or a folder path, got {cache!r}")
    if isinstance(cache, str) and cache in ("True", "False", ""):
        raise ValueError(f"cache must be True, False or a folder path, got the string {cache!r}")
    if name is not None and not isinstance(name, str):
        raise ValueError(f"name must be a string or None, got {name!r}")
    if sampler is not None and not callable(sampler):
        raise ValueError("sampler must be a callable sampler(model, n, rng) or None")
    _check_ranks_pools(ranks[next(iter(ranks))] if len(ranks) else [1], ranks.pool_sizes
                       if len(ranks) else [2])
    if int(ranks.pool_sizes.max()) > int(ranks.n_items):
        raise ValueError(f"ranks.pool_sizes must be <= ranks.n_items = {ranks.n_items}")
    if np.size(sample_sizes) == 0:
        raise ValueError("sample_sizes must hold at least one sample size, got none")
    sizes = [check_int(n, "sample_size", low=2, high=int(ranks.pool_sizes.min()) if pool == "user" and not replacement
                       else ranks.n_items) for n in np.atleast_1d(sample_sizes)]
    if pool not in ("user", "catalog"):
        raise ValueError(f"pool must be 'user' or 'catalog', got {pool!r}")
    mets = []
    for m in metrics:
        me, k = (m, None) if isinstance(m, str) else m
        mets.append((canonical_metric(me), None if k is None else check_int(k, "k", low=1)))
    if not mets:
        raise ValueError("metrics must hold at least one metric or (metric, k), got none")
    estimators = {"sampled": uncorrected} if estimators is None else dict(estimators)  # {} is refused below
    if not estimators or not all(callable(f) for f in estimators.values()):
        raise ValueError("estimators must be a non-empty dict of name -> callable")
    models = list(ranks.keys())
    exact = np.array([[exact_metric(ranks[mo], me, k, ranks.n_items, ranks.pool_sizes if pool == "user" else None)
                       for me, k in mets] for mo in models])
    path, key = None, ""
    if cache is not False and not (isinstance(cache, np.bool_) and not cache):
        key = experiment_key(ranks, sizes, mets, estimators, rng, replacement, pool, sampler, name)
        base = cache_dir("experiments") if isinstance(cache, (bool, np.bool_)) else Path(cache)
        path = base / key
        path.mkdir(parents=True, exist_ok=True)
    values = np.empty((n_repeats, len(models), len(sizes), len(mets), len(estimators)))
    missing = []
    for i in range(n_repeats):
        z = load_npz(path / f"repeat-{i:05d}.npz", cache_key=key) if path is not None else None
        if z is not None and "values" in z and z["values"].shape == values.shape[1:]:
            values[i] = z["values"]
        else:
            missing.append(i)
    t0 = time.perf_counter()
    if missing:
        from tqdm import tqdm

        import os

        args = (ranks.ranks, ranks.pool_sizes, ranks.n_items, models, sizes, mets, estimators, rng,
                replacement, pool, sampler, None if path is None else str(path), key)
        bar = tqdm(total=n_repeats, initial=n_repeats - len(missing), desc="repeats", disable=not progress)
        try:
            if backend == "dask":
                for i, v in _dask_repeats(missing, args, scheduler, n_jobs):
                    values[i] = v
                    if path is not None and np.all(np.isfinite(v)):
                        atomic_save_npz(path / f"repeat-{i:05d}.npz", cache_key=key, values=v)
                    bar.update(1)
            elif n_jobs == 1:
                for i in missing:
                    values[i] = _one_repeat(i, *args)[1]
                    bar.update(1)
            else:
                from joblib import Parallel, delayed

                par = Parallel(n_jobs=n_jobs, return_as="generator_unordered")
                for i, v in par(delayed(_one_repeat)(i, *args, os.getpid()) for i in missing):
                    values[i] = v
                    bar.update(1)
        finally:
            bar.close()
    return ExperimentResult(values, exact, models, sizes, mets, list(estimators), time.perf_counter() - t0,
                            None if path is None else str(path))
