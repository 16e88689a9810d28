r"""Datasets: the simulated default datasets, loaders for real MovieLens / NCF files, splits and
statistics.

Every loader returns a pandas DataFrame with the columns ``user, item, rating, timestamp``:

* ``user`` and ``item`` are **0-based contiguous** ``int64`` ids (``0..n_users-1``,
  ``0..n_items-1``). Real files are re-indexed on load (users and items sorted by their original
  id); the original ids are kept in ``df.attrs["user_ids"]`` / ``df.attrs["item_ids"]`` (numpy
  arrays: ``attrs["item_ids"][new_id] == original_id``).
* ``df.attrs["n_users"]`` and ``df.attrs["n_items"]`` hold the catalog sizes (for the simulated
  datasets the catalog is the simulator's ``n_items``, even if an item was never observed).
  Use :func:`n_items_of` rather than reading the attribute directly.
* ``rating`` is the explicit rating where the file has one and 1.0 for implicit data; the book
  treats every row as a positive interaction ("binarized", as Krichene & Rendle 2020, Sec. 6).
* ``timestamp`` is an ``int64`` (seconds); files without timestamps get 0 and the splits then break
  ties at random.

The simulated datasets ``sim-ml100k`` and ``sim-ml1m`` follow the LDA true-preference model of
Ihemelandu & Ekstrand 2023, Sec. IV (after Tian & Ekstrand 2020); see :func:`simulate` and
``data/README.md`` for the calibration. They are generated deterministically on first use and
cached under ``data/cache/`` (atomic writes).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ._validation import as_rng, check_int

__all__ = [
    "SimulationConfig",
    "Simulation",
    "DATASETS",
    "simulate",
    "load_dataset",
    "load_simulation",
    "load_truth",
    "load_movielens",
    "load_ncf",
    "gini",
    "item_counts",
    "n_items_of",
    "n_users_of",
    "leave_last_out",
    "holdout_fraction",
    "dataset_summary",
    "cache_dir",
    "fetch_movielens",
    "MOVIELENS_ARCHIVES",
]

COLUMNS = ["user", "item", "rating", "timestamp"]
#: Bump when the simulator or the cache layout changes: old cache files are then ignored.
CACHE_VERSION = 1


# ---------------------------------------------------------------------------------------------
# cache
# ---------------------------------------------------------------------------------------------
def cache_dir(*parts: str) -> Path:
    """The on-disk cache folder (created on demand).

    ``$ITEMSAMPLING_CACHE`` if set; otherwise ``data/cache`` of the source checkout (the folder
    holding ``pyproject.toml``); otherwise ``~/.cache/itemsampling``.
    """
    env = os.environ.get("ITEMSAMPLING_CACHE")
    if env:
        base = Path(env)
    else:
        root = Path(__file__).resolve().parents[2]
        if (root / "pyproject.toml").exists() and (root / "src" / "itemsampling").is_dir():
            base = root / "data" / "cache"
        else:
            base = Path.home() / ".cache" / "itemsampling"
    path = base.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_save_npz(path: Path, **arrays) -> None:
    """Write a ``.npz`` file atomically (temporary file + ``os.replace``): an interrupted write
    never leaves a partial file under the final name."""
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    _atomic_write_bytes(Path(path), buf.getvalue())


def load_npz(path: Path) -> dict | None:
    """Read a cache file written by :func:`atomic_save_npz`; ``None`` if absent or unreadable."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except Exception:  # corrupt (e.g. written by an older, non-atomic version): recompute
        return None


def stable_hash(obj) -> str:
    """A short hash of a JSON-serialisable object, stable across processes and sessions."""
    text = json.dumps(obj, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# simulator
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SimulationConfig:
    r"""Parameters of the LDA true-preference simulator (Ihemelandu & Ekstrand 2023, Sec. IV).

    True preferences:

    1. item distribution of each of ``n_features`` latent features:
       :math:`\phi_k \sim \mathrm{Dirichlet}(\beta)` with the concentration vector
       :math:`\beta_i = \beta_0 \, N\, b_i / \sum_j b_j`, :math:`b_i = \rho_i^{-s}` for a random
       permutation :math:`\rho` of ``1..N`` (``beta`` = :math:`\beta_0`, ``zipf`` = :math:`s`;
       ``zipf = 0`` is the symmetric Dirichlet of the paper; :math:`s > 0` gives every feature the
       same long-tailed base measure, which produces the skewed item popularity of MovieLens);
    2. user mixture :math:`\theta_u \sim \mathrm{Dirichlet}(\alpha)` (``alpha``, symmetric);
    3. profile size :math:`n_u \sim \mathrm{Poisson}(\lambda)` (``true_profile_mean``);
    4. :math:`n_u` draws: feature :math:`k \sim \theta_u`, item :math:`i \sim \phi_k`;
    5. de-duplicate user-item pairs.

    Observation: each user gets a target observed-profile size
    :math:`o_u = \texttt{min\_profile} + \lfloor \mathrm{LogNormal}(\ln m, \sigma) \rfloor`
    (``profile_median`` = m, ``profile_sigma`` = :math:`\sigma`), capped at the size of the true
    profile, and :math:`o_u` of the user's true preferences are observed without replacement,

    * ``observation="popularity"``: with probability proportional to
      :math:`\mathrm{pop}_i^{\gamma}` where :math:`\mathrm{pop}_i` is the number of users with a true
      preference for item :math:`i` (``popularity_exponent`` = :math:`\gamma`; Ihemelandu & Ekstrand's
      popularity sampler is :math:`\gamma = 1`);
    * ``observation="uniform"``: uniformly.

    Observed interactions get synthetic, distinct per-user timestamps in a random order.
    """

    n_users: int
    n_items: int
    n_features: int = 50
    alpha: float = 0.1
    beta: float = 0.01
    zipf: float = 0.4
    true_profile_mean: float = 1000.0
    min_profile: int = 20
    profile_median: float = 80.0
    profile_sigma: float = 1.2
    observation: str = "popularity"
    popularity_exponent: float = 1.0
    seed: int = 0

    def validate(self) -> "SimulationConfig":
        check_int(self.n_users, "n_users", low=1)
        check_int(self.n_items, "n_items", low=2)
        check_int(self.n_features, "n_features", low=1)
        check_int(self.min_profile, "min_profile", low=1)
        check_int(self.seed, "seed", low=0)
        for name in ("alpha", "beta", "true_profile_mean", "profile_median"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive finite number, got {v!r}")
        for name in ("zipf", "profile_sigma", "popularity_exponent"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a non-negative finite number, got {v!r}")
        if self.observation not in ("popularity", "uniform"):
            raise ValueError(f"observation must be 'popularity' or 'uniform', got {self.observation!r}")
        if self.n_users * self.n_items > 2_000_000_000:
            raise ValueError("n_users * n_items must be <= 2e9 for the simulator's dense de-duplication")
        return self


@dataclass
class Simulation:
    """Output of :func:`simulate`: ``observed`` (columns ``user, item, rating, timestamp``) and
    ``truth`` (columns ``user, item``: the complete, de-duplicated true preferences; every observed
    pair is a true preference), plus the ``config``."""

    observed: pd.DataFrame
    truth: pd.DataFrame
    config: SimulationConfig


#: The embedded default datasets (calibration in ``data/README.md``).
DATASETS: dict[str, SimulationConfig] = {
    "sim-ml100k": SimulationConfig(n_users=943, n_items=1682, n_features=50, beta=0.01, zipf=0.45,
                                   true_profile_mean=1000.0, profile_median=58.0, seed=100),
    "sim-ml1m": SimulationConfig(n_users=6040, n_items=3706, n_features=50, beta=0.01, zipf=0.4,
                                 true_profile_mean=1000.0, profile_median=100.0, seed=1000),
}


def simulate(config: SimulationConfig) -> Simulation:
    """Run the LDA true-preference simulator and the observation model of ``config``
    (see :class:`SimulationConfig`). Deterministic given ``config.seed``; vectorised."""
    if not isinstance(config, SimulationConfig):
        raise ValueError("config must be a SimulationConfig")
    c = config.validate()
    g = np.random.default_rng(c.seed)
    U, N, K = c.n_users, c.n_items, c.n_features
    # 1. feature-item distributions, with a long-tailed base measure
    base = 1.0 / np.arange(1, N + 1, dtype=np.float64) ** c.zipf
    base = g.permutation(base / base.sum() * N)
    phi = g.dirichlet(c.beta * base, size=K)  # K x N
    # 2-3. user mixtures and true profile sizes
    theta = g.dirichlet(np.full(K, c.alpha), size=U)  # U x K
    n_u = g.poisson(c.true_profile_mean, size=U)
    counts = g.multinomial(n_u, theta)  # U x K draws per (user, feature)
    # 4. item draws, grouped by feature (inverse-CDF sampling)
    per_feature = counts.sum(axis=0)
    users = np.repeat(np.tile(np.arange(U, dtype=np.int64), K), counts.T.ravel())
    cdf = np.cumsum(phi, axis=1)
    cdf /= cdf[:, -1:]
    items = np.concatenate([np.searchsorted(cdf[k], g.random(per_feature[k]), side="right")
                            for k in range(K)]).astype(np.int64)
    np.minimum(items, N - 1, out=items)
    # 5. de-duplicate: a dense bitmap, so the pairs come out sorted by (user, item)
    mask = np.zeros(U * N, dtype=bool)
    mask[users * N + items] = True
    key = np.flatnonzero(mask)
    del mask
    tu, ti = key // N, key % N
    truth = pd.DataFrame({"user": tu, "item": ti})
    # observation model
    profile = np.bincount(tu, minlength=U)
    target = c.min_profile + np.floor(g.lognormal(np.log(c.profile_median), c.profile_sigma, size=U))
    target = np.minimum(target.astype(np.int64), profile)
    gumbel = g.gumbel(size=key.size)
    if c.observation == "popularity" and c.popularity_exponent > 0:
        pop = np.bincount(ti, minlength=N).astype(np.float64)
        weight = c.popularity_exponent * np.log(pop[ti]) + gumbel
    else:
        weight = gumbel
    # Gumbel top-k: the o_u largest keys of a user are a draw without replacement with
    # probabilities proportional to exp(weight). Sort by user, then by decreasing key.
    order = np.lexsort((-weight, tu))
    su, si = tu[order], ti[order]
    start = np.searchsorted(su, np.arange(U))
    pos = np.arange(su.size) - start[su]
    keep = pos < target[su]
    ou, oi = su[keep], si[keep]
    # synthetic timestamps: each user starts at a random time between 2000-04-25 and 2003-02-28
    # (the span of ML-1M) and rates the observed items in a random order, minutes apart
    t0 = g.integers(956_620_800, 1_046_390_400, size=U)
    opos = np.arange(ou.size) - np.searchsorted(ou, np.arange(U))[ou]
    order_in_user = _permute_within_groups(ou, opos, g)
    ts = t0[ou] + 60 * order_in_user + g.integers(0, 60, size=ou.size)
    observed = pd.DataFrame({"user": ou, "item": oi, "rating": np.ones(ou.size), "timestamp": ts.astype(np.int64)})
    observed = observed.sort_values(["user", "timestamp"], kind="stable").reset_index(drop=True)
    for df in (observed, truth):
        df.attrs["n_users"] = U
        df.attrs["n_items"] = N
    return Simulation(observed=observed, truth=truth, config=c)


def _permute_within_groups(groups: np.ndarray, positions: np.ndarray, g: np.random.Generator) -> np.ndarray:
    """A uniformly random permutation of ``0..size-1`` within each group (groups sorted)."""
    order = np.lexsort((g.random(groups.size), groups))
    out = np.empty_like(positions)
    out[order] = positions
    return out


def _sim_cache_path(name: str, config: SimulationConfig) -> Path:
    import inspect

    code = stable_hash([inspect.getsource(simulate), inspect.getsource(_permute_within_groups)])
    key = stable_hash({"v": CACHE_VERSION, "code": code, **asdict(config)})
    return cache_dir("datasets") / f"{name}-{key}.npz"


def load_simulation(name: str, progress: bool = False) -> Simulation:
    """The simulated dataset ``name`` (``"sim-ml100k"`` or ``"sim-ml1m"``) with its true
    preferences; generated on first use and cached under ``data/cache/datasets``."""
    if name not in DATASETS:
        raise ValueError(f"dataset must be one of {sorted(DATASETS)}, got {name!r}")
    config = DATASETS[name]
    path = _sim_cache_path(name, config)
    z = load_npz(path)
    if z is None:
        sim = simulate(config)
        o, t = sim.observed, sim.truth
        i32 = np.int32  # ids fit in 32 bits (n_users * n_items <= 2e9): half the file size
        atomic_save_npz(path, user=o["user"].to_numpy(i32), item=o["item"].to_numpy(i32),
                        timestamp=o["timestamp"].to_numpy(), truth_user=t["user"].to_numpy(i32),
                        truth_item=t["item"].to_numpy(i32))
        return sim
    i64 = np.int64
    observed = pd.DataFrame({"user": z["user"].astype(i64), "item": z["item"].astype(i64),
                             "rating": np.ones(z["user"].size), "timestamp": z["timestamp"].astype(i64)})
    truth = pd.DataFrame({"user": z["truth_user"].astype(i64), "item": z["truth_item"].astype(i64)})
    for df in (observed, truth):
        df.attrs["n_users"] = config.n_users
        df.attrs["n_items"] = config.n_items
    return Simulation(observed=observed, truth=truth, config=config)


def load_dataset(name: str) -> pd.DataFrame:
    """Observed interactions of an embedded dataset: ``"sim-ml100k"`` (943 users, 1,682 items,
    about 100,000 interactions; for tests) or ``"sim-ml1m"`` (6,040 users, 3,706 items, about
    1,000,000 interactions; for the book). Columns ``user, item, rating, timestamp``; ids 0-based
    contiguous; ``attrs["n_items"]`` is the catalog size. See :func:`load_truth` for the
    simulator's complete true preferences."""
    if not isinstance(name, str) or name not in DATASETS:
        raise ValueError(f"dataset must be one of {sorted(DATASETS)}, got {name!r}")
    return load_simulation(name).observed


def load_truth(name: str) -> pd.DataFrame:
    """The complete true preferences (``user, item``) behind :func:`load_dataset` ``(name)``;
    the :class:`itemsampling.models.Oracle` recommender scores with them."""
    return load_simulation(name).truth


# ---------------------------------------------------------------------------------------------
# statistics
# ---------------------------------------------------------------------------------------------
def gini(values) -> float:
    r"""Gini index of non-negative values (e.g. interaction counts per item, zeros included):

    .. math:: G = \frac{\sum_i (2i - n - 1)\, x_{(i)}}{n \sum_i x_{(i)}}

    with :math:`x_{(1)} \le \dots \le x_{(n)}`: 0 when all values are equal, :math:`1 - 1/n` when one
    item has every interaction (Ihemelandu & Ekstrand 2023, Sec. III-A and Table I)."""
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0:
        raise ValueError("values must not be empty")
    if not np.all(np.isfinite(x)):
        raise ValueError("values must not contain NaN or infinite values")
    if np.any(x < 0):
        raise ValueError(f"values must be non-negative, got minimum {x.min()}")
    total = x.sum()
    if total == 0:
        raise ValueError("values must not all be zero")
    x = np.sort(x)
    n = x.size
    i = np.arange(1, n + 1, dtype=np.float64)
    return float(np.sum((2 * i - n - 1) * x) / (n * total))


def n_items_of(df: pd.DataFrame) -> int:
    """Catalog size of an interaction frame: ``attrs["n_items"]`` if set, else ``max(item) + 1``."""
    _check_frame(df, "interactions", columns=("user", "item"))
    n = df.attrs.get("n_items")
    m = int(df["item"].max()) + 1 if len(df) else 0
    return max(int(n), m) if n is not None else m


def n_users_of(df: pd.DataFrame) -> int:
    """Number of users: ``attrs["n_users"]`` if set, else ``max(user) + 1``."""
    _check_frame(df, "interactions", columns=("user", "item"))
    n = df.attrs.get("n_users")
    m = int(df["user"].max()) + 1 if len(df) else 0
    return max(int(n), m) if n is not None else m


def item_counts(df: pd.DataFrame, n_items: int | None = None) -> np.ndarray:
    """Number of interactions per item ``0..n_items-1`` (zeros included)."""
    n = n_items_of(df) if n_items is None else check_int(n_items, "n_items", low=1)
    return np.bincount(df["item"].to_numpy(), minlength=n)


def dataset_summary(df: pd.DataFrame) -> dict:
    """Users, items, interactions, density, profile-size statistics and the item Gini index."""
    U, N = n_users_of(df), n_items_of(df)
    prof = np.bincount(df["user"].to_numpy(), minlength=U)
    return {"users": U, "items": N, "interactions": int(len(df)),
            "density": len(df) / (U * N), "profile_mean": float(prof.mean()),
            "profile_median": float(np.median(prof)), "profile_min": int(prof.min()),
            "profile_max": int(prof.max()), "gini": gini(item_counts(df, N))}


# ---------------------------------------------------------------------------------------------
# splits
# ---------------------------------------------------------------------------------------------
def _check_frame(df, name, columns=COLUMNS):
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"{name} must be a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{name} is missing column(s) {missing}; expected {list(columns)}")
    for c in ("user", "item"):
        if c in df.columns and len(df):
            col = df[c]
            if col.dtype.kind not in "iu":
                raise ValueError(f"{name}[{c!r}] must hold integer ids, got dtype {col.dtype}")
            if col.min() < 0:
                raise ValueError(f"{name}[{c!r}] must hold ids >= 0, got {col.min()}")


def _copy_attrs(src: pd.DataFrame, *dsts: pd.DataFrame) -> None:
    for d in dsts:
        d.attrs.update({k: v for k, v in src.attrs.items()})
        d.attrs["n_users"] = n_users_of(src)
        d.attrs["n_items"] = n_items_of(src)


def leave_last_out(interactions: pd.DataFrame, rng=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Hold out each user's last event (largest ``timestamp``); ties between a user's latest
    events are broken at random with ``rng`` (so data without timestamps get a random held-out
    item). Returns ``(train, test)``; ``test`` has exactly one row per user, sorted by user.

    Every user needs at least two interactions (one to train on, one to test): otherwise a
    ``ValueError`` names the offending users. ``attrs["n_users"]``/``attrs["n_items"]`` carry over.
    """
    _check_frame(interactions, "interactions", columns=("user", "item", "timestamp"))
    if len(interactions) == 0:
        raise ValueError("interactions must not be empty")
    gen = as_rng(rng)
    df = interactions
    users = df["user"].to_numpy()
    ts = df["timestamp"].to_numpy()
    tie = gen.random(len(df))
    order = np.lexsort((tie, ts, users))  # by user, then time, then random tie-break
    su = users[order]
    last = np.ones(su.size, dtype=bool)
    last[:-1] = su[1:] != su[:-1]
    counts = np.bincount(users)
    few = np.flatnonzero((counts > 0) & (counts < 2))
    if few.size:
        raise ValueError(f"every user needs >= 2 interactions for leave_last_out; {few.size} user(s) "
                         f"have only one (e.g. user {few[:5].tolist()})")
    test_rows = np.sort(order[last])
    train_mask = np.ones(len(df), dtype=bool)
    train_mask[test_rows] = False
    train = df.iloc[np.flatnonzero(train_mask)].reset_index(drop=True)
    test = df.iloc[test_rows].sort_values("user", kind="stable").reset_index(drop=True)
    _copy_attrs(df, train, test)
    return train, test


def holdout_fraction(interactions: pd.DataFrame, fraction: float = 0.2, rng=None,
                     test_users=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Ihemelandu & Ekstrand 2023, Sec. III-A: hold out ``fraction`` (default 20%) of each test
    user's interactions, chosen at random (``round(fraction * size)``, at least 1, at most
    ``size - 1``); other users' interactions all go to train. ``test_users`` defaults to every
    user. Returns ``(train, test)``."""
    _check_frame(interactions, "interactions", columns=("user", "item"))
    fraction = float(fraction)
    if not (0 < fraction < 1):
        raise ValueError(f"fraction must lie in (0, 1), got {fraction}")
    gen = as_rng(rng)
    df = interactions
    users = df["user"].to_numpy()
    counts = np.bincount(users)
    if test_users is None:
        selected = np.zeros(counts.size, dtype=bool)
        selected[np.flatnonzero(counts)] = True
    else:
        tu = np.unique(np.asarray(test_users, dtype=np.int64))
        if tu.size and (tu.min() < 0 or tu.max() >= counts.size or np.any(counts[tu] == 0)):
            raise ValueError("test_users must be users present in interactions")
        selected = np.zeros(counts.size, dtype=bool)
        selected[tu] = True
    few = np.flatnonzero(selected & (counts < 2))
    if few.size:
        raise ValueError(f"test users need >= 2 interactions; {few.size} have fewer (e.g. {few[:5].tolist()})")
    n_test = np.clip(np.rint(fraction * counts), 1, np.maximum(counts - 1, 1)).astype(np.int64)
    order = np.lexsort((gen.random(len(df)), users))
    su = users[order]
    pos = np.arange(su.size) - np.searchsorted(su, np.arange(counts.size))[su]
    is_test = np.zeros(len(df), dtype=bool)
    is_test[order] = selected[su] & (pos < n_test[su])
    train = df.iloc[np.flatnonzero(~is_test)].reset_index(drop=True)
    test = df.iloc[np.flatnonzero(is_test)].sort_values(["user", "item"]).reset_index(drop=True)
    _copy_attrs(df, train, test)
    return train, test


# ---------------------------------------------------------------------------------------------
# real data
# ---------------------------------------------------------------------------------------------
_ML_FILES = {  # file name -> (separator, header, columns)
    "u.data": ("\t", False),
    "ratings.dat": ("::", False),
    "ratings.csv": (",", True),
}


def _parse_rows(path: Path, sep: str, header: bool, n_cols: int, kinds: str) -> list[np.ndarray]:
    """Parse a delimited text file strictly: every row must have ``n_cols`` fields of the given
    kinds (``i`` integer, ``f`` float). A fast pandas pass reads well-formed files; when it fails,
    a line-by-line pass reports the first bad row with its line number."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    lines = text.splitlines()
    start = 1 if header else 0
    if header and not lines:
        raise ValueError(f"{path}: empty file (expected a header line)")
    body = lines[start:]
    if not any(line.strip() for line in body):
        raise ValueError(f"{path}: no data rows")
    if text and not text.endswith("\n"):
        # a file cut in the middle of its last line is truncated; a complete last row is fine
        last = body[-1].split(sep)
        if len(last) != n_cols or not all(last):
            raise ValueError(f"{path}: truncated last line {len(lines)}: {body[-1]!r}")
    fast = _parse_fast(text, sep, start, n_cols, kinds)
    if fast is not None:
        return fast
    cols: list[list] = [[] for _ in range(n_cols)]
    for lineno, line in enumerate(body, start=start + 1):
        if not line.strip():
            continue
        fields = line.split(sep)
        if len(fields) != n_cols:
            raise ValueError(f"{path}: line {lineno} has {len(fields)} field(s), expected {n_cols}: {line!r}")
        for j, (kind, f) in enumerate(zip(kinds, fields)):
            try:
                cols[j].append(int(f) if kind == "i" else float(f))
            except ValueError:
                raise ValueError(f"{path}: line {lineno}, field {j + 1} is not "
                                 f"{'an integer' if kind == 'i' else 'a number'}: {f!r}") from None
    return [np.asarray(c, dtype=np.int64 if k == "i" else np.float64) for c, k in zip(cols, kinds)]


def _parse_fast(text: str, sep: str, skip: int, n_cols: int, kinds: str) -> list[np.ndarray] | None:
    """pandas' C parser on a well-formed file; ``None`` if anything looks wrong (then the strict
    parser finds and reports the bad line)."""
    if sep != "\t":
        if "\t" in text:
            return None
        text = text.replace(sep, "\t")
    try:
        df = pd.read_csv(io.StringIO(text), sep="\t", header=None, skiprows=skip, engine="c",
                         on_bad_lines="error", skip_blank_lines=True, dtype=str, na_filter=False)
    except Exception:
        return None
    if df.shape[1] != n_cols or len(df) == 0:
        return None
    out = []
    for j, kind in enumerate(kinds):
        col = df.iloc[:, j]
        try:
            arr = pd.to_numeric(col, errors="raise").to_numpy()
        except (ValueError, TypeError):
            return None
        if kind == "i":
            if arr.dtype.kind not in "iu":
                return None
            out.append(arr.astype(np.int64))
        else:
            if not np.all(np.isfinite(arr.astype(np.float64))):
                return None
            out.append(arr.astype(np.float64))
    return out


def _find_movielens_file(path: Path) -> Path:
    if path.is_file():
        if path.name not in _ML_FILES:
            raise ValueError(f"path must be a MovieLens ratings file ({', '.join(_ML_FILES)}) or a folder "
                             f"holding one, got {path.name!r}")
        return path
    if not path.exists():
        raise ValueError(f"path {path} does not exist")
    for name in _ML_FILES:
        hits = sorted(path.rglob(name))
        if hits:
            return hits[0]
    raise ValueError(f"no MovieLens ratings file ({', '.join(_ML_FILES)}) under {path}")


def _reindex(user: np.ndarray, item: np.ndarray, rating: np.ndarray, ts: np.ndarray) -> pd.DataFrame:
    uids, u = np.unique(user, return_inverse=True)
    iids, i = np.unique(item, return_inverse=True)
    df = pd.DataFrame({"user": u.astype(np.int64), "item": i.astype(np.int64),
                       "rating": rating.astype(np.float64), "timestamp": ts.astype(np.int64)})
    df = df.sort_values(["user", "timestamp"], kind="stable").reset_index(drop=True)
    df.attrs["n_users"] = int(uids.size)
    df.attrs["n_items"] = int(iids.size)
    df.attrs["user_ids"] = uids
    df.attrs["item_ids"] = iids
    return df


def load_movielens(path) -> pd.DataFrame:
    """Load a MovieLens release a reader has downloaded: a folder (searched recursively) or one
    of the files ``u.data`` (100K; tab-separated ``user item rating timestamp``), ``ratings.dat``
    (1M and 10M; ``user::item::rating::timestamp``) or ``ratings.csv`` (20M, 25M, latest; header
    ``userId,movieId,rating,timestamp``).

    Returns ``user, item, rating, timestamp`` with ids re-indexed to 0-based contiguous (originals
    in ``attrs["user_ids"]`` / ``attrs["item_ids"]``). Missing files, truncated files and malformed
    rows raise ``ValueError`` naming the file and line."""
    f = _find_movielens_file(Path(path))
    sep, header = _ML_FILES[f.name]
    if header:
        first = f.open("r", encoding="utf-8", errors="replace").readline().strip()
        if [c.strip() for c in first.split(",")][:4] != ["userId", "movieId", "rating", "timestamp"]:
            raise ValueError(f"{f}: expected the header 'userId,movieId,rating,timestamp', got {first!r}")
    user, item, rating, ts = _parse_rows(f, sep, header, 4, "iifi")
    return _reindex(user, item, rating, ts)


def load_ncf(path, name: str | None = None):
    """Load the leave-one-out files of He et al. 2017 (NCF), in which the papers' ``ml-1m`` and
    ``pinterest-20`` circulate: ``NAME.train.rating`` and ``NAME.test.rating`` (tab-separated
    ``user item rating timestamp``) and ``NAME.test.negative`` (``(user,item)`` then 99 decoy
    items, tab-separated).

    ``path`` is the folder (then ``name`` is the prefix, e.g. ``"ml-1m"``) or the common prefix
    (``.../ml-1m``). Ids are used as they are (already 0-based). Returns ``(train, test,
    negatives)`` with ``negatives`` an int64 array of shape ``(len(test), n_decoys)`` aligned with
    ``test`` rows."""
    p = Path(path)
    prefix = p / name if name is not None else p
    files = {k: Path(f"{prefix}.{k}") for k in ("train.rating", "test.rating", "test.negative")}
    for k, f in files.items():
        if not f.exists():
            raise ValueError(f"NCF file {f} does not exist (need {prefix}.train.rating, .test.rating, .test.negative)")
    tr = _parse_rows(files["train.rating"], "\t", False, 4, "iifi")
    te = _parse_rows(files["test.rating"], "\t", False, 4, "iifi")
    train = pd.DataFrame(dict(zip(COLUMNS, tr)))
    test = pd.DataFrame(dict(zip(COLUMNS, te)))
    neg_rows = []
    text = files["test.negative"].read_text()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) != len(test):
        raise ValueError(f"{files['test.negative']}: {len(lines)} rows but {len(test)} test rows")
    width = None
    for lineno, line in enumerate(lines, start=1):
        fields = line.split("\t")
        head = fields[0].strip()
        if not (head.startswith("(") and head.endswith(")")):
            raise ValueError(f"{files['test.negative']}: line {lineno} must start with '(user,item)', got {head!r}")
        try:
            u, i = (int(x) for x in head[1:-1].split(","))
            negs = [int(x) for x in fields[1:] if x.strip()]
        except ValueError:
            raise ValueError(f"{files['test.negative']}: line {lineno} holds a non-integer id") from None
        if width is None:
            width = len(negs)
        if len(negs) != width or width == 0:
            raise ValueError(f"{files['test.negative']}: line {lineno} has {len(negs)} decoys, expected {width}")
        if u != test["user"].iat[lineno - 1] or i != test["item"].iat[lineno - 1]:
            raise ValueError(f"{files['test.negative']}: line {lineno} is for ({u},{i}) but test row {lineno} "
                             f"is ({test['user'].iat[lineno - 1]},{test['item'].iat[lineno - 1]})")
        neg_rows.append(negs)
    negatives = np.asarray(neg_rows, dtype=np.int64)
    n_users = int(max(train["user"].max(), test["user"].max())) + 1
    n_items = int(max(train["item"].max(), test["item"].max(), negatives.max())) + 1
    for df in (train, test):
        df.attrs["n_users"] = n_users
        df.attrs["n_items"] = n_items
    return train, test, negatives


# ---------------------------------------------------------------------------------------------
# fetch (network; never called by the build or the tests)
# ---------------------------------------------------------------------------------------------
#: GroupLens archives and their MD5 checksums (as published next to the archives).
MOVIELENS_ARCHIVES = {
    "ml-100k": ("https://files.grouplens.org/datasets/movielens/ml-100k.zip", "0e33842e24a9c977be4e0107933c0723"),
    "ml-1m": ("https://files.grouplens.org/datasets/movielens/ml-1m.zip", "c4d9eecfca2ab87c1945afe126590906"),
    "ml-10m": ("https://files.grouplens.org/datasets/movielens/ml-10m.zip", "ce571fd55effeba0271552578f2648bd"),
    "ml-20m": ("https://files.grouplens.org/datasets/movielens/ml-20m.zip", "cd245b17a1ae2cc31bb14903e1204af3"),
    "ml-25m": ("https://files.grouplens.org/datasets/movielens/ml-25m.zip", "6b51fb2759a8657d3bfcbfc42b592ada"),
}


def fetch_movielens(release: str, dest="data/raw", progress: bool = True) -> Path:
    """Download a MovieLens archive (``ml-100k``, ``ml-1m``, ``ml-10m``, ``ml-20m``, ``ml-25m``)
    into ``dest``, verify its MD5 checksum and unpack it. Returns the unpacked folder, to pass to
    :func:`load_movielens`. Needs a network; the book and the tests never call it. Command line::

        python -m itemsampling.data fetch ml-1m --dest data/raw
    """
    import urllib.request

    if release not in MOVIELENS_ARCHIVES:
        raise ValueError(f"release must be one of {sorted(MOVIELENS_ARCHIVES)}, got {release!r}")
    url, md5 = MOVIELENS_ARCHIVES[release]
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    archive = dest / f"{release}.zip"
    if not archive.exists() or hashlib.md5(archive.read_bytes()).hexdigest() != md5:
        from tqdm import tqdm

        fd, tmp = tempfile.mkstemp(dir=dest, prefix=f".{release}.", suffix=".part")
        try:
            with urllib.request.urlopen(url) as resp, os.fdopen(fd, "wb") as fh:
                total = int(resp.headers.get("Content-Length") or 0)
                with tqdm(total=total or None, unit="B", unit_scale=True, desc=release, disable=not progress) as bar:
                    while chunk := resp.read(1 << 20):
                        fh.write(chunk)
                        bar.update(len(chunk))
            got = hashlib.md5(Path(tmp).read_bytes()).hexdigest()
            if got != md5:
                raise ValueError(f"checksum mismatch for {url}: expected MD5 {md5}, got {got}")
            os.replace(tmp, archive)
        finally:
            Path(tmp).unlink(missing_ok=True)
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(dest)
    return dest / release if (dest / release).exists() else dest


def _main(argv=None) -> int:
    import argparse
    import sys

    p = argparse.ArgumentParser(prog="python -m itemsampling.data",
                                description="Datasets of the itemsampling book.")
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="download and verify a MovieLens archive")
    f.add_argument("release", choices=sorted(MOVIELENS_ARCHIVES))
    f.add_argument("--dest", default="data/raw")
    s = sub.add_parser("summary", help="statistics of an embedded dataset or a MovieLens folder/file")
    s.add_argument("dataset")
    args = p.parse_args(argv)
    try:
        if args.cmd == "fetch":
            print(fetch_movielens(args.release, args.dest))
        else:
            df = load_dataset(args.dataset) if args.dataset in DATASETS else load_movielens(args.dataset)
            print(json.dumps(dataset_summary(df), indent=1))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
