r"""The LDA true-preference simulator (Ihemelandu & Ekstrand 2023, Sec. IV), the embedded
simulated datasets ``sim-ml100k`` and ``sim-ml1m``, and the generator of datasets of a prescribed
shape behind the TORS-shaped ``sim-pinterest20``, ``sim-yelp`` and ``sim-ml20m`` (Li et al. 2024,
Table 2; calibration in ``data/README.md``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .._validation import check_bool, check_int, check_memory
from .cache import CACHE_VERSION, CacheWarning, atomic_save_npz, cache_dir, load_npz, stable_hash


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
DATASETS: dict = {
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


@dataclass(frozen=True)
class ShapedConfig:
    r"""A dataset generated to a prescribed shape: exactly ``n_users`` users, ``n_items`` items
    (every item observed at least once) and ``n_interactions`` distinct user-item pairs, with the
    LDA mixture structure of :class:`SimulationConfig` but without a separate true-preference layer
    (built for the TORS-shaped catalogues of Li et al. 2024, Table 2; ``data/README.md``).

    1. item base popularity :math:`b_i = \rho_i^{-s}` over a random permutation :math:`\rho`
       (``zipf`` = :math:`s`); feature item distributions
       :math:`\phi_k \sim \mathrm{Dirichlet}(\beta_0 N b / \sum_j b_j)` (``beta`` = :math:`\beta_0`);
    2. user mixtures :math:`\theta_u \sim \mathrm{Dirichlet}(\alpha)`;
    3. profile sizes :math:`o_u = \texttt{min\_profile} + e_u`, the extras :math:`e_u` proportional
       to LogNormal(0, :math:`\sigma`) draws (``profile_sigma``), capped at ``max_profile_share``
       :math:`\cdot N`, rescaled and rounded (largest remainders) so that :math:`\sum_u o_u` is
       exactly ``n_interactions``;
    4. each user's :math:`o_u` items are the first :math:`o_u` *distinct* items of a sequence of
       draws (feature :math:`k \sim \theta_u`, item :math:`i \sim \phi_k`); a user whose draws run
       out of distinct items (a heavy user on a narrow feature) is topped up from the catalogue
       mixture :math:`\bar\phi = \frac1K \sum_k \phi_k`;
    5. an item nobody drew replaces one interaction of the most popular items (of a user who does
       not hold it), so the catalogue has exactly ``n_items`` observed items and the counts stay
       exact.

    Timestamps as in :func:`simulate`. The "true preferences" of the resulting
    :class:`Simulation` are the observed pairs themselves.
    """

    n_users: int
    n_items: int
    n_interactions: int
    n_features: int = 50
    alpha: float = 0.1
    beta: float = 0.01
    zipf: float = 0.4
    min_profile: int = 20
    profile_sigma: float = 1.2
    max_profile_share: float = 0.25
    seed: int = 0

    def validate(self) -> "ShapedConfig":
        check_int(self.n_users, "n_users", low=1)
        check_int(self.n_items, "n_items", low=2)
        check_int(self.n_features, "n_features", low=1)
        check_int(self.min_profile, "min_profile", low=2)
        check_int(self.seed, "seed", low=0)
        for name in ("alpha", "beta", "zipf", "profile_sigma", "max_profile_share"):
            v = getattr(self, name)
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
                raise ValueError(f"{name} must be a number, got {v!r}")
        for name in ("alpha", "beta"):
            if not (np.isfinite(getattr(self, name)) and getattr(self, name) > 0):
                raise ValueError(f"{name} must be a positive finite number, got {getattr(self, name)!r}")
        for name in ("zipf", "profile_sigma"):
            if not (np.isfinite(getattr(self, name)) and getattr(self, name) >= 0):
                raise ValueError(f"{name} must be a non-negative finite number, got {getattr(self, name)!r}")
        if not (0 < self.max_profile_share <= 1):
            raise ValueError(f"max_profile_share must be in (0, 1], got {self.max_profile_share!r}")
        cap = int(self.max_profile_share * self.n_items)
        if self.min_profile > cap:
            raise ValueError(f"min_profile must be <= max_profile_share * n_items = {cap}, got {self.min_profile}")
        check_int(self.n_interactions, "n_interactions", low=self.n_users * self.min_profile,
                  high=self.n_users * cap)
        if self.n_users * self.n_items >= 1 << 33:
            raise ValueError("n_users * n_items must be < 2**33 for the generator's packed sort keys")
        return self


def _profile_sizes(c: ShapedConfig, g: np.random.Generator) -> np.ndarray:
    """Profile sizes o_u in min_profile..cap summing exactly to n_interactions (step 3 of
    :class:`ShapedConfig`)."""
    U, cap = c.n_users, int(c.max_profile_share * c.n_items)
    extra_total = c.n_interactions - U * c.min_profile
    room = cap - c.min_profile
    w = g.lognormal(0.0, c.profile_sigma, size=U)
    extra = np.zeros(U)
    free = np.ones(U, dtype=bool)
    remaining = float(extra_total)
    for _ in range(64):  # water-filling: scale the uncapped users, cap those above the room
        share = remaining * w[free] / w[free].sum()
        over = share > room
        extra[np.flatnonzero(free)] = np.minimum(share, room)
        if not over.any():
            break
        idx = np.flatnonzero(free)[over]
        free[idx] = False
        remaining = extra_total - extra[~free].sum()
    base = np.floor(extra).astype(np.int64)
    short = int(extra_total - base.sum())
    if short:  # largest remainders, among users below the room
        frac = np.where(base < room, extra - base, -1.0)
        base[np.argsort(-frac, kind="stable")[:short]] += 1
    return c.min_profile + base


def _first_distinct(users: np.ndarray, items: np.ndarray, keys: np.ndarray, want: np.ndarray, n_items: int):
    """For draws (users, items) in the order of the integer ``keys`` (0 <= key < 2**30): each
    user's first ``want[u]`` distinct items (fewer if the draws hold fewer). Returns the kept
    (user, item) pairs, sorted by user. Two sorts of one int64 key each (faster than lexsort)."""
    both = np.sort((users * n_items + items) << 30 | keys)
    pair = both >> 30
    first = np.ones(pair.size, dtype=bool)
    first[1:] = pair[1:] != pair[:-1]
    pair, key = pair[first], both[first] & ((1 << 30) - 1)  # each pair at its earliest draw
    pu = pair // n_items
    order = np.argsort(pu << 30 | key)  # by user, then by draw order
    pair, pu = pair[order], pu[order]
    pos = np.arange(pu.size) - (np.cumsum(np.bincount(pu, minlength=want.size)) - np.bincount(pu, minlength=want.size))[pu]
    keep = pos < want[pu]
    return pu[keep], pair[keep] % n_items


def simulate_shaped(config: ShapedConfig) -> Simulation:
    """Generate the dataset of a :class:`ShapedConfig` (see its steps); deterministic given
    ``config.seed``, vectorised (a few seconds for ten million interactions)."""
    if not isinstance(config, ShapedConfig):
        raise ValueError("config must be a ShapedConfig")
    c = config.validate()
    U, N, K = c.n_users, c.n_items, c.n_features
    # draws (~1.5 per interaction, 4 arrays of 8 bytes, and the sorts' copies), the mixtures
    check_memory(1.5 * c.n_interactions * 8 * 8 + 8.0 * U * K + 16.0 * K * N, "the shaped-dataset generator",
                 "n_interactions")
    g = np.random.default_rng(c.seed)
    base = 1.0 / np.arange(1, N + 1, dtype=np.float64) ** c.zipf
    base = g.permutation(base / base.sum() * N)
    phi = g.dirichlet(c.beta * base, size=K)  # K x N
    phi /= phi.sum(axis=1, keepdims=True)
    theta = g.dirichlet(np.full(K, c.alpha), size=U)  # U x K
    size = _profile_sizes(c, g)
    mix = phi.mean(axis=0)
    mix /= mix.sum()
    got_u, got_i = np.empty(0, np.int64), np.empty(0, np.int64)
    have = np.zeros(U, dtype=np.int64)
    items = np.arange(N, dtype=np.int64)
    for rnd in range(12):
        todo = np.flatnonzero(have < size)
        if todo.size == 0:
            break
        n_draw = np.ceil((size - have)[todo] * (1.5 * 2 ** rnd)).astype(np.int64) + 2
        if rnd < 3:  # from the user's own features: per feature, item counts, then users in random order
            counts = g.multinomial(n_draw, theta[todo])  # users x K
            per_feature = counts.sum(axis=0)
            di = np.concatenate([np.repeat(items, g.multinomial(int(n), phi[k])) for k, n in enumerate(per_feature)])
            du = np.concatenate([g.permutation(np.repeat(todo, counts[:, k])) for k in range(K)])
        else:  # top-up from the catalogue mixture
            du = np.repeat(todo, n_draw)
            di = np.repeat(items, g.multinomial(du.size, mix))
            g.shuffle(di)
        # the users still short: their pairs so far come first (key 0), then the new draws in a random order
        again = np.isin(got_u, todo) if got_u.size else np.zeros(0, dtype=bool)
        ku, ki = _first_distinct(np.concatenate([got_u[again], du]), np.concatenate([got_i[again], di]),
                                 np.concatenate([np.zeros(int(again.sum()), np.int64),
                                                 g.integers(1, 1 << 30, size=du.size)]), size, N)
        got_u, got_i = np.concatenate([got_u[~again], ku]), np.concatenate([got_i[~again], ki])
        have = np.bincount(got_u, minlength=U)
    else:  # pragma: no cover - the catalogue mixture reaches every item
        raise RuntimeError("the shaped-dataset generator did not reach the profile sizes")
    pairs = np.sort(got_u * N + got_i)
    got_u, got_i = pairs // N, pairs % N
    # every item observed: an unobserved item replaces one interaction of a popular item
    pop = np.bincount(got_i, minlength=N)
    missing = g.permutation(np.flatnonzero(pop == 0))
    if missing.size:  # rows of items held at least twice, each item keeping one; uniform over such rows
        cand = g.permutation(np.flatnonzero(pop[got_i] >= 2))
        ci = got_i[cand]
        order = np.argsort(ci, kind="stable")
        rank = np.empty(cand.size, dtype=np.int64)
        rank[order] = np.arange(cand.size) - np.searchsorted(ci[order], ci[order])
        rows = cand[rank < pop[ci] - 1][: missing.size]
        if rows.size < missing.size:
            raise ValueError("n_interactions is too small to observe every item once; raise it or lower n_items")
        got_i = got_i.copy()
        got_i[rows] = missing  # an unobserved item is in no profile: no duplicate pair
        pairs = np.sort(got_u * N + got_i)
        got_u, got_i = pairs // N, pairs % N
    truth = pd.DataFrame({"user": got_u, "item": got_i})
    # synthetic timestamps as in simulate: each user consumes their items in a random order
    order = np.argsort(got_u << 30 | g.integers(0, 1 << 30, size=got_u.size))
    ou, oi = got_u[order], got_i[order]
    pos = np.arange(ou.size) - np.repeat(np.cumsum(size) - size, size)
    t0 = g.integers(956_620_800, 1_046_390_400, size=U)
    ts = t0[ou] + 60 * pos + g.integers(0, 60, size=ou.size)
    observed = pd.DataFrame({"user": ou, "item": oi, "rating": np.ones(ou.size), "timestamp": ts.astype(np.int64)})
    for df in (observed, truth):
        df.attrs["n_users"] = U
        df.attrs["n_items"] = N
    return Simulation(observed=observed, truth=truth, config=c)


#: The TORS-shaped catalogues: users / items / interactions of Li et al. 2024 (TORS), Table 2.
DATASETS.update({
    "sim-pinterest20": ShapedConfig(n_users=55_187, n_items=9_916, n_interactions=1_463_581, min_profile=20,
                                    profile_sigma=1.0, seed=2001),
    "sim-yelp": ShapedConfig(n_users=25_677, n_items=25_815, n_interactions=696_865, min_profile=20,
                             profile_sigma=1.0, seed=2002),
    "sim-ml20m": ShapedConfig(n_users=136_677, n_items=20_720, n_interactions=9_990_682, min_profile=10,
                              profile_sigma=1.2, seed=2003),
})


def _sim_cache_path(name: str, config) -> tuple[Path, str]:
    import inspect

    if isinstance(config, ShapedConfig):
        code = stable_hash([inspect.getsource(f) for f in (simulate_shaped, _profile_sizes, _first_distinct,
                                                           _permute_within_groups)])
    else:
        code = stable_hash([inspect.getsource(simulate), inspect.getsource(_permute_within_groups)])
    key = stable_hash({"v": CACHE_VERSION, "code": code, **asdict(config)})
    return cache_dir("datasets") / f"{name}-{key}.npz", key


def load_simulation(name: str, progress: bool = False) -> Simulation:
    """The simulated dataset ``name`` (a key of :data:`DATASETS`: ``"sim-ml100k"``, ``"sim-ml1m"``,
    or the TORS-shaped ``"sim-pinterest20"``, ``"sim-yelp"``, ``"sim-ml20m"``) with its true
    preferences; generated on first use and cached under ``data/cache/datasets``, keyed on the
    configuration and the generator's code."""
    if not isinstance(name, str) or name not in DATASETS:
        raise ValueError(f"dataset must be one of {sorted(DATASETS)}, got {name!r}")
    check_bool(progress, "progress")
    config = DATASETS[name]
    path, key = _sim_cache_path(name, config)
    z = load_npz(path, cache_key=key)
    if z is not None and not _valid_simulation_file(z, config):
        z = None
    if z is None:
        sim = simulate_shaped(config) if isinstance(config, ShapedConfig) else simulate(config)
        o, t = sim.observed, sim.truth
        i32 = np.int32  # ids fit in 32 bits (n_users * n_items <= 2e9): half the file size
        truth = {} if isinstance(config, ShapedConfig) else {  # a shaped dataset's truth is its observed pairs
            "truth_user": t["user"].to_numpy(i32), "truth_item": t["item"].to_numpy(i32)}
        atomic_save_npz(path, cache_key=key, user=o["user"].to_numpy(i32), item=o["item"].to_numpy(i32),
                        timestamp=o["timestamp"].to_numpy(), **truth)
        return sim
    i64 = np.int64
    observed = pd.DataFrame({"user": z["user"].astype(i64), "item": z["item"].astype(i64),
                             "rating": np.ones(z["user"].size), "timestamp": z["timestamp"].astype(i64)})
    if isinstance(config, ShapedConfig):
        pairs = np.sort(z["user"].astype(i64) * config.n_items + z["item"])
        truth = pd.DataFrame({"user": pairs // config.n_items, "item": pairs % config.n_items})
    else:
        truth = pd.DataFrame({"user": z["truth_user"].astype(i64), "item": z["truth_item"].astype(i64)})
    for df in (observed, truth):
        df.attrs["n_users"] = config.n_users
        df.attrs["n_items"] = config.n_items
    return Simulation(observed=observed, truth=truth, config=config)


def _valid_simulation_file(z: dict, config) -> bool:
    """Semantic check of a verified dataset cache file (ids in range, matching lengths)."""
    import warnings

    try:
        if isinstance(config, ShapedConfig):
            z = {**z, "truth_user": z["user"], "truth_item": z["item"]}
            if z["user"].size != config.n_interactions:
                raise ValueError("not the configured number of interactions")
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
    about 100,000 interactions; for tests), ``"sim-ml1m"`` (6,040 users, 3,706 items, about
    1,000,000 interactions; for the book) or a TORS-shaped catalogue (``"sim-pinterest20"``,
    ``"sim-yelp"``, ``"sim-ml20m"``: the users, items and interactions of TORS Table 2). Columns ``user, item, rating, timestamp``; ids 0-based
    contiguous; ``attrs["n_items"]`` is the catalog size. See :func:`load_truth` for the
    simulator's complete true preferences."""
    if not isinstance(name, str) or name not in DATASETS:
        raise ValueError(f"dataset must be one of {sorted(DATASETS)}, got {name!r}")
    return load_simulation(name).observed


def load_truth(name: str) -> pd.DataFrame:
    """The complete true preferences (``user, item``) behind :func:`load_dataset` ``(name)``;
    the :class:`itemsampling.models.Oracle` recommender scores with them."""
    return load_simulation(name).truth
