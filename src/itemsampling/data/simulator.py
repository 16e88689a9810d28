r"""The LDA true-preference simulator (Ihemelandu & Ekstrand 2023, Sec. IV) and the embedded
simulated datasets ``sim-ml100k`` and ``sim-ml1m`` (calibration in ``data/README.md``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .._validation import check_bool, check_int, check_memory
from .cache import CACHE_VERSION, atomic_save_npz, cache_dir, load_npz, stable_hash


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
        for name in ("alpha", "beta", "true_profile_mean", "profile_median", "zipf", "profile_sigma",
                     "popularity_exponent"):
            v = getattr(self, name)
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
                raise ValueError(f"{name} must be a number, got {v!r}")
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
    # dense de-duplication bitmap (1 byte per user-item pair), feature-item distributions and their
    # CDFs (2 x 8 bytes per feature-item pair), and about 48 bytes per true-preference draw
    check_memory(c.n_users * c.n_items + 16.0 * c.n_features * c.n_items
                 + 48.0 * c.n_users * c.true_profile_mean, "the simulator", "n_users, n_items or true_profile_mean")
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


def _sim_cache_path(name: str, config: SimulationConfig) -> tuple[Path, str]:
    import inspect

    code = stable_hash([inspect.getsource(simulate), inspect.getsource(_permute_within_groups)])
    key = stable_hash({"v": CACHE_VERSION, "code": code, **asdict(config)})
    return cache_dir("datasets") / f"{name}-{key}.npz", key


def load_simulation(name: str, progress: bool = False) -> Simulation:
    """The simulated dataset ``name`` (``"sim-ml100k"`` or ``"sim-ml1m"``) with its true
    preferences; generated on first use and cached under ``data/cache/datasets``."""
    if not isinstance(name, str) or name not in DATASETS:
        raise ValueError(f"dataset must be one of {sorted(DATASETS)}, got {name!r}")
    check_bool(progress, "progress")
    config = DATASETS[name]
    path, key = _sim_cache_path(name, config)
    z = load_npz(path, cache_key=key)
    if z is not None and not _valid_simulation_file(z, config):
        z = None
    if z is None:
        sim = simulate(config)
        o, t = sim.observed, sim.truth
        i32 = np.int32  # ids fit in 32 bits (n_users * n_items <= 2e9): half the file size
        atomic_save_npz(path, cache_key=key, user=o["user"].to_numpy(i32), item=o["item"].to_numpy(i32),
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


def _valid_simulation_file(z: dict, config: SimulationConfig) -> bool:
    """Semantic check of a verified dataset cache file (ids in range, matching lengths)."""
    import warnings

    from .cache import CacheWarning

    try:
        ok = (z["user"].shape == z["item"].shape == z["timestamp"].shape
              and z["truth_user"].shape == z["truth_item"].shape and z["user"].size > 0
              and z["user"].min() >= 0 and z["user"].max() < config.n_users
              and z["item"].min() >= 0 and z["item"].max() < config.n_items
              and z["truth_item"].min() >= 0 and z["truth_item"].max() < config.n_items)
    except (KeyError, ValueError):
        ok = False
    if not ok:
        warnings.warn("a simulated dataset cache file holds out-of-range ids; recomputing it", CacheWarning,
                      stacklevel=3)
    return ok


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
