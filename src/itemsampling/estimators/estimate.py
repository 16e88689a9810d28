r"""The one estimate path: every estimate of a global metric from sampled ranks, on validated input.

What this module holds, and who uses it:

* the method tables (:data:`METHODS`, :data:`PER_USER_SIZE_METHODS`, :data:`POOL_METHODS`,
  :data:`GRID_METHODS`) and the routing of options to the methods (``_route``, ``_check_options``);
* the input check of the entry points (``_prepare``: ranks, sample sizes, catalogue sizes; ``_ks``:
  the cut-offs), done once, at the entry point;
* ``_estimate``, the one estimate of every method — corrected metrics (:mod:`.corrected`), rank
  distributions (:mod:`.distribution`, one fit ``_fit``) read off by :func:`metric_from_distribution`
  or :func:`~.grid.grid_metric`, and the combinations BV_MLE ... MNW_MES (TORS Sec. 8.1.5), which
  use as prior the :math:`\widehat P(R)` learnt from the *same* sampled ranks — over the global
  ranks ``1..N`` or the cells of a :class:`~.grid.RankGrid`;
* the point estimates ``_point_metric`` / ``_point_metrics`` behind
  :func:`~itemsampling.estimators.estimate_metric` and
  :func:`~itemsampling.estimators.estimate_metrics` (without ``ci``), and the entry point on a given
  grid :func:`grid_estimate_metrics` (also importable from :mod:`itemsampling.estimators.grid`).

The public entry points (:mod:`.api`), both bootstraps (:mod:`.bootstrap`, :mod:`.conditional`)
build on it; it builds on :mod:`.distribution`, :mod:`.corrected` and the representation
:mod:`.grid`, and never imports a module above it.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np

from .._validation import (  # noqa: F401  (TARGETS, check_target: importable from here, as before the move)
    TARGETS, ResolutionWarning, check_bool, check_int, check_probability_vector, check_ranks, check_sizes, check_target,
)
from ..kernel import RESOLVED, resolution_limit
from ..metrics import canonical_metric, metric_function
from .corrected import CORRECTION_METHODS, _corrected_on_grid, check_gamma, corrected_estimate, corrected_metrics
from .distribution import (
    OPTIONS, PER_USER_SIZE_METHODS as _FIT_PER_USER, _check_pool_replacement, _fit, _pool_reference, check_n_items,
)
from .grid import check_sampled_ranks, grid_metric, pool_cell_metric, pool_metric_matrix, resolve_grid

__all__ = [
    "METHODS",
    "PER_USER_SIZE_METHODS",
    "POOL_METHODS",
    "POOL_GRID_METHODS",
    "GRID_METHODS",
    "TARGETS",
    "check_target",
    "metric_from_distribution",
    "resolution_note",
    "grid_estimate_metrics",
]

#: Methods accepted by :func:`estimate_metric`.
METHODS = ("sampled", "rank_estimate", "cls", "bv", "mn", "mn_weighted", "mle", "wmle", "mes",
           "bv_mle", "bv_mes", "mn_mle", "mn_mes", "mnw_mle", "mnw_mes")

_DISTRIBUTION_METHODS = ("mle", "wmle", "mes")
#: Methods of :func:`estimate_metric` that accept per-user sample sizes (adaptive sampling).
PER_USER_SIZE_METHODS = ("sampled",) + _FIT_PER_USER
#: Methods of :func:`estimate_metric` that accept per-user catalogue sizes (``n_items`` an array; the
#: model in :mod:`.distribution`, "Per-user catalogue sizes"). CLS is left out: its bounded least
#: squares is solved once per distinct pool, minutes for hundreds of pools.
POOL_METHODS = tuple(m for m in METHODS if m != "cls")
#: Methods that take per-user catalogue sizes on the grid too (the fits are free of the pools; the pools
#: enter the metric only, :func:`~.grid.pool_cell_metric`); the others run dense with per-user pools.
POOL_GRID_METHODS = ("mle", "wmle", "mes")
_CORRECTION_PARAMS = {"gamma", "prior", "n_users", "replacement", "grid"}
#: the options of each rank-distribution fit (:data:`.distribution.OPTIONS`, the one table), and those
#: that only it takes (routed to it alone by :func:`estimate_metrics`)
_DIST_OPTIONS = {m: tuple(OPTIONS[m]) for m in _DISTRIBUTION_METHODS}
_DIST_ONLY = {m: tuple(o for o in _DIST_OPTIONS[m] if o not in _DIST_OPTIONS["mle"]) for m in _DISTRIBUTION_METHODS}



def resolution_note(n_items, sample_size, k) -> str | None:
    r"""The note for cut-offs the sampled ranks do not resolve, or ``None``: a sampled rank :math:`r`
    places the global rank only to within about :math:`N/(n-1)` ranks (:math:`\mathbb E[r-1\mid R] =
    (n-1)(R-1)/(N-1)`, Krichene & Rendle Eq. 20), and the one resolution rule
    (:func:`itemsampling.kernel.resolves`) asks for :math:`K \ge c\,N/(n-1)`, :math:`c` =
    :data:`~itemsampling.kernel.RESOLVED`; below it every estimator's value of a metric at :math:`K`
    comes from its prior or regulariser, not from the data. The advice "use n >= ..." is the smallest
    :math:`n` the rule accepts for the smallest such :math:`K`: :math:`n = \lceil cN/K \rceil + 1`. With
    per-user sizes the largest :math:`n_u` counts, with per-user catalogue sizes the largest :math:`N_u`.
    Bad input gives ``None`` (the estimators' own checks report it)."""
    try:
        N = check_int(int(np.max(n_items)) if np.ndim(n_items) else n_items, "n_items", low=2)
        n = int(np.max(np.asarray(sample_size)))
        ks = [check_int(x, "k", low=1) for x in np.atleast_1d(np.asarray(k, dtype=object)) if x is not None]
    except (ValueError, TypeError):
        return None
    if n < 2 or n > N:
        return None
    width = N / (n - 1.0)
    limit = resolution_limit(N, n)  # the rule of kernel.resolves, once for the checked N, n and cut-offs
    low = sorted({x for x in ks if not x >= limit})
    if not low:
        return None
    need = int(np.ceil(RESOLVED * N / low[0])) + 1
    larger = f"n >= {need} for K = {low[0]}" if need <= N else f"for K = {low[0]}, n = N: rank every item"
    return (f"cut-off K = {', '.join(map(str, low))} is below the resolution rule K >= {RESOLVED:g} N/(n-1) = "
            f"{RESOLVED * width:.4g} (N = {N}, n = {n}): the sampled ranks do not determine the metric at these "
            f"cut-offs, so every point estimate there is the estimator's prior's, not the data's; the default "
            f"interval there is the identification bounds (the range the data allow; interval='bootstrap' gives the "
            f"estimator's bootstrap, which does not cover its bias). To resolve K: rank every item, rank every "
            f"item for a random sample of users (itemsampling.evaluation.sampled_ranks(design='full', n_users=...)),"
            f" sample adaptively (design='adaptive'), or use a larger sample size ({larger}).")


def _warn_resolution(n_items, sample_size, k, methods) -> None:
    methods = [methods] if isinstance(methods, str) else list(methods) if np.ndim(methods) else [methods]
    if all(m == "sampled" for m in methods):  # the uncorrected sampled metric estimates nothing global
        return
    note = resolution_note(n_items, sample_size, k)
    if note is not None:
        warnings.warn(note, ResolutionWarning, stacklevel=3)


def _check_nonempty(values, name: str, what: str) -> None:
    """An empty list of metrics, methods or cut-offs is a caller's mistake, not a request for an
    empty result: refused naming the argument."""
    if not isinstance(values, str) and np.ndim(values) > 0 and np.size(values) == 0:
        raise ValueError(f"{name} must name at least one {what}, got an empty {type(values).__name__}")


def metric_from_distribution(rank_distribution, metric: str, k, n_items: int | None = None):
    r""":math:`\widehat T = \sum_{R=1}^N \widehat P(R)\,F(R)` (TORS Eq. 26-27; Jin et al. 2021 Eq. 13-14),
    for one cut-off ``k`` (returns a float) or a sequence of cut-offs (returns an array)."""
    P = check_probability_vector(rank_distribution, "rank_distribution")  # >= 0, finite, sums to 1
    if P.size < 2:
        raise ValueError(f"rank_distribution must have length N >= 2, got {P.size}")
    if n_items is not None and check_int(n_items, "n_items", low=2) != P.size:
        raise ValueError(f"rank_distribution must have length n_items = {n_items}, got {P.size}")
    N = P.size
    _check_nonempty(k, "k", "cut-off")
    seq = np.ndim(k) > 0
    ks = list(np.atleast_1d(np.asarray(k, dtype=object))) if seq else [k]
    try:
        key = (metric, tuple((type(kk), kk) for kk in ks), N)
        hash(key)
    except TypeError:  # an unhashable cut-off: evaluated (and refused) directly, never remembered
        key = None
    if key is None or len(ks) * N > _METRIC_ROWS_MAX:
        R = np.arange(1, N + 1)
        vals = np.array([float(P @ metric_function(metric, kk, N)(R)) for kk in ks])
    else:
        rows = _metric_rows(*key)
        vals = np.array([float(P @ rows[i]) for i in range(len(ks))])
    return vals if seq else float(vals[0])


#: the largest table (cut-offs x N entries) :func:`_metric_rows` keeps (16 MB)
_METRIC_ROWS_MAX = 2_000_000


@functools.lru_cache(maxsize=16)
def _metric_rows(metric: str, ks: tuple, N: int) -> np.ndarray:
    """:math:`F_k(R)`, :math:`R = 1..N`, one row per cut-off of ``ks`` (pairs ``(type, k)``), each
    row the vector :func:`metric_from_distribution` takes the dot product with (the same values, so
    the same arithmetic); validated as :func:`~itemsampling.metrics.metric_function` does, and cached:
    the experiments' repeats read the same 50 cut-offs of the same metric thousands of times."""
    R = np.arange(1, N + 1)
    out = np.empty((len(ks), N))
    for i, (_, kk) in enumerate(ks):
        out[i] = metric_function(metric, kk, N)(R)
    out.flags.writeable = False
    return out


def _split(params: dict):
    corr = {k: v for k, v in params.items() if k in _CORRECTION_PARAMS}
    dist = {k: v for k, v in params.items() if k not in _CORRECTION_PARAMS}
    return corr, dist


def _apply(r, Fh, n_metrics, n_ks):
    """Estimates from corrected vectors ``Fh`` of shape (n, n_metrics, n_ks): (n_metrics, n_ks)."""
    n = Fh.shape[0]
    return np.asarray(corrected_estimate(r, Fh.reshape(n, -1))).reshape(n_metrics, n_ks)


def _pool_apply(r, pools, Fh):
    r"""Per-user catalogue sizes: :math:`\frac1M\sum_u \widehat F_{N_u}(r_u)` from corrected vectors
    ``Fh`` of shape (n, n_metrics, n_ks, G) over the distinct pools ``np.unique(pools)``: (n_metrics, n_ks)."""
    g = np.unique(pools, return_inverse=True)[1].reshape(-1)
    keys, counts = np.unique(g * (Fh.shape[0] + 1) + r, return_counts=True)
    gg, rr = keys // (Fh.shape[0] + 1), keys % (Fh.shape[0] + 1)
    return np.tensordot(counts.astype(np.float64), Fh[rr - 1, :, :, gg], axes=(0, 0)) / r.size


def _estimate(r, N, n, metrics, ks, method, params, prior_cache, pools=None):
    """The one estimate path of :func:`estimate_metric`, :func:`estimate_metrics`, the bootstraps and
    :func:`~itemsampling.estimators.estimate.grid_estimate_metrics`, on validated input: an array
    (len(metrics), len(ks)). Every method runs over the global ranks ``1..N`` or, with a grid
    (``params["grid"]``, resolved by :func:`~itemsampling.estimators.grid.resolve_grid`), over the
    cells of a :class:`~itemsampling.estimators.grid.RankGrid`: the fit is
    :func:`.distribution._fit`, the metric of a distribution :func:`metric_from_distribution` or
    :func:`~itemsampling.estimators.grid.grid_metric`, the corrected vectors :func:`_vectors`.
    ``prior_cache`` (a dict) shares fits between calls on the same ranks. ``pools``: ``None``, or the
    per-user catalogue sizes (``N`` their largest; model in :mod:`.distribution`, "Per-user
    catalogue sizes")."""
    corr, dist = _split(params)
    grid = corr.pop("grid", None)
    replacement = corr.get("replacement", True)
    gp = None if pools is None else np.unique(pools)  # the distinct pools, the last axis of Fh
    if pools is not None and method not in POOL_METHODS:
        raise ValueError(f"method {method!r} needs one n_items for every user; per-user n_items (catalogue "
                         f"sizes) are accepted by methods {POOL_METHODS}")
    if method not in ("sampled", "rank_estimate"):
        asked = grid
        grid = resolve_grid(grid, N, n, ks)
        unsupported = method == "cls" or (pools is not None and method not in POOL_GRID_METHODS)
        if asked is None and unsupported:
            grid = None  # the default takes the grid only where the method has a grid version
        if grid is not None and pools is not None and method not in POOL_GRID_METHODS:
            raise ValueError(f"per-user n_items (catalogue sizes) are supported on the grid by methods "
                             f"{POOL_GRID_METHODS}, not by {method!r}; pass grid=False (dense estimators on the "
                             "largest pool) or one n_items")
        if grid is not None and method == "cls":
            raise ValueError("method 'cls' has no grid version; pass grid=False for the dense estimator")
    else:
        grid = None  # no kernel: nothing to put on a grid
    if not isinstance(n, int) and method not in PER_USER_SIZE_METHODS:
        raise ValueError(f"method {method!r} needs one sample_size for every user; with per-user sample sizes "
                         f"(adaptive sampling) use method {' or '.join(map(repr, PER_USER_SIZE_METHODS))}")
    if method == "sampled":
        unused = set(params) - {"replacement", "grid"}
        if unused:
            raise ValueError(f"method 'sampled' takes no parameters, got {sorted(unused)}")
        if isinstance(n, int):
            return np.array([[float(np.mean(metric_function(m, k, n)(r))) for k in ks] for m in metrics])
        # per-user sizes: each user's sampled metric on their own list of n_u items
        groups = [(int(size), r[n == size]) for size in np.unique(n)]
        return np.array([[sum(float(np.sum(metric_function(m, k, size)(rs))) for size, rs in groups) / r.size
                          for k in ks] for m in metrics])

    if method in CORRECTION_METHODS:
        if dist:
            raise ValueError(f"unknown parameter(s) {sorted(dist)} for method {method!r}")
        kw = dict(corr)
        if method in ("mn", "mn_weighted") and kw.get("n_users") is None:
            kw["n_users"] = r.size
        Fh = _vectors(metrics, ks, N, n, method, grid, gp, **kw)
        return _apply(r, Fh, len(metrics), len(ks)) if gp is None else _pool_apply(r, pools, Fh)

    base = method.split("_")[-1]  # mle / wmle / mes
    if base not in _DISTRIBUTION_METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    # the key of a learnt prior (bootstrap._prior_key builds the same one over 1..N: keep in step)
    dist_kw = dict(dist) if replacement is True else {**dist, "replacement": replacement}
    key = (base, tuple(sorted((k, repr(v)) for k, v in dist_kw.items()))) + (() if grid is None else (grid.key(),))
    if key not in prior_cache:
        P = _fit(r, N, n, base, check_bool(replacement, "replacement"), dist, grid).distribution
        prior_cache[key] = P / P.sum() if grid is None else P
    P = prior_cache[key]

    if method == base:  # plain mle / wmle / mes
        if "gamma" in corr or "prior" in corr or "n_users" in corr:
            raise ValueError(f"gamma, prior and n_users are not used by method {method!r}")
        if pools is not None:  # sum_R P(R) Fbar(R), Fbar the pool-weighted metric (grid.pool_metric_matrix)
            w = np.unique(pools, return_counts=True)[1] / r.size
            if grid is not None:  # cell masses times the cell means of Fbar (grid.pool_cell_metric)
                F = pool_cell_metric(metrics, ks, grid, gp, w)
                return (P @ F.reshape(grid.n_cells, -1)).reshape(len(metrics), len(ks))
            return (P @ pool_metric_matrix(metrics, ks, N, gp, w).reshape(N, -1)).reshape(len(metrics), len(ks))
        if grid is not None:
            return np.array([np.atleast_1d(grid_metric(P, grid, m, ks)) for m in metrics])
        return np.array([np.atleast_1d(metric_from_distribution(P, m, ks)) for m in metrics])
    if "prior" in corr:
        raise ValueError(f"method {method!r} estimates its own prior; do not pass prior")
    head = method[: -len(base) - 1]
    kind = {"bv": "bv", "mn": "mn", "mnw": "mn_weighted"}.get(head)
    if kind is None:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if kind == "bv":
        if "n_users" in corr:
            raise ValueError("n_users is not used by BV")
        kw = {"gamma": corr.get("gamma")}
    else:
        if "gamma" in corr:
            raise ValueError("gamma is not used by MN")
        kw = {"n_users": corr.get("n_users", r.size)}
    if kind == "mn":
        Fh = _vectors(metrics, ks, N, n, "mn", grid, gp, prior=P, replacement=replacement, **kw)
    else:  # BV's ranks of zero prior-predictive probability are undetermined (NaN): refused if observed
        Fh = _vectors(metrics, ks, N, n, kind, grid, gp, prior=P, replacement=replacement, _unidentified="nan", **kw)
        observed = np.flatnonzero(np.bincount(r, minlength=Fh.shape[0] + 1)[1:])  # the observed sampled ranks - 1
        if np.any(np.isnan(Fh[observed])):
            raise ValueError(f"the {base.upper()} prior gives an observed sampled rank zero probability; "
                             "BV cannot correct it")
        Fh = np.where(np.isnan(Fh), 0.0, Fh)  # unobserved, undetermined ranks carry no weight
    return _apply(r, Fh, len(metrics), len(ks)) if gp is None else _pool_apply(r, pools, Fh)


def _vectors(metrics, ks, N, n, method, grid, pools, prior=None, **kw):
    """Corrected vectors ``(n, len(metrics), len(ks)[, len(pools)])`` of ``method`` (one of
    :data:`~itemsampling.estimators.corrected.CORRECTION_METHODS`) over ``1..N``
    (:func:`~itemsampling.estimators.corrected.corrected_metrics`) or on ``grid``
    (:func:`.corrected._corrected_on_grid`; a prior over ``1..N`` becomes
    cell masses)."""
    if grid is None:
        return corrected_metrics(list(metrics), ks, N, n, method, prior=prior, pools=pools, **kw)
    if prior is not None:
        p = np.asarray(prior, dtype=np.float64)
        prior = grid.masses(p) if p.shape == (grid.n_items,) and grid.n_items != grid.n_cells else p
    return _corrected_on_grid(list(metrics), ks, grid, n, method, prior=prior, **kw)


def _prepare(sampled_ranks, n_items, sample_size, params, method=None):
    """Validated ``(r, N, n, pools)``: ``pools`` is ``None`` for one catalogue size (or equal
    per-user sizes), else the per-user sizes :math:`N_u` and ``N`` the largest of them."""
    pools = None
    if np.ndim(n_items) > 0:
        N = _pool_reference(sampled_ranks, n_items, sample_size, params.get("replacement", True), method)
        p = check_n_items(n_items)
        pools = None if isinstance(p, int) else p
        n_items = N
    N = check_int(n_items, "n_items", low=2)
    r, n = check_sampled_ranks(sampled_ranks, N, sample_size)  # n: an int if all sizes are equal
    _check_params(params)
    return r, N, n, pools


def _check_params(params: dict) -> None:
    if "replacement" in params:
        check_bool(params["replacement"], "replacement")
    if "gamma" in params and params["gamma"] is not None:
        check_gamma(params["gamma"])


def _prepared(checked, params, method=None):
    """``(r, N, n, pools)`` already validated by the caller's entry point (the bootstraps'
    ``_check_input``): only what depends on ``params`` is checked here, as :func:`_prepare` does."""
    r, N, n, pools = checked
    if pools is not None:
        _check_pool_replacement(pools, params.get("replacement", True), method)
    _check_params(params)
    return r, N, n, pools


def _ks(k):
    seq = np.ndim(k) > 0
    ks = list(np.atleast_1d(np.asarray(k, dtype=object))) if seq else [k]
    if seq and len(ks) == 0:
        raise ValueError("k must not be an empty sequence")
    for kk in ks:
        if kk is not None:
            check_int(kk, "k", low=1)
    return seq, ks


def _route(meth: str, params: dict) -> dict:
    """The parameters of :func:`estimate_metrics` that method ``meth`` uses."""
    p = {k2: v for k2, v in params.items() if k2 in _options_of(meth) or k2 == "grid"}  # each method its own
    if meth not in ("bv", "bv_mle", "bv_mes"):
        p.pop("gamma", None)
    if meth == "sampled":
        p = {}
    elif meth in ("rank_estimate",):
        p = {k2: v for k2, v in p.items() if k2 == "replacement"}
    elif meth in CORRECTION_METHODS:
        p = {k2: v for k2, v in p.items() if k2 in _CORRECTION_PARAMS}
    else:  # mle / wmle / mes and the combinations: route the rank-distribution options
        base = meth.split("_")[-1]
        p.pop("prior", None)
        for key in _DIST_ONLY:
            if key != base:
                for opt in _DIST_ONLY[key]:
                    p.pop(opt, None)
        for key in _DISTRIBUTION_METHODS:
            own = p.pop(key, None)
            if key == base and own:
                p.update(own)
    return p


def _options_of(method: str) -> set:
    """The keyword options a method of :data:`METHODS` uses in :func:`estimate_metrics`."""
    if method == "sampled":
        return {"replacement"}
    if method == "rank_estimate":
        return {"replacement"}
    if method == "cls":
        return {"prior", "replacement"}
    if method == "bv":
        return {"gamma", "prior", "replacement"}
    if method in ("mn", "mn_weighted"):
        return {"prior", "n_users", "replacement"}
    base = method.split("_")[-1]
    own = set(_DIST_OPTIONS[base]) | {base, "replacement"}
    head = method[: -len(base) - 1]
    return own | ({"gamma"} if head == "bv" else {"n_users"} if head in ("mn", "mnw") else set())


def _check_options(params: dict, methods) -> None:
    """Refuse, naming them, options that no requested method uses (misspelt ones included), and
    per-method option dicts (``mle={...}``) that are not dicts or hold unknown keys."""
    used = set().union(*(_options_of(m) for m in methods)) | {"grid"}  # every method takes grid (some ignore it)
    known = set(_CORRECTION_PARAMS) | set(_DISTRIBUTION_METHODS) | set().union(*map(set, _DIST_OPTIONS.values()))
    unknown = sorted(set(params) - known)
    if unknown:
        raise ValueError(f"unknown parameter(s) {unknown} for estimate_metrics; allowed: {sorted(known)}")
    unused = sorted(set(params) - used)
    if unused:
        raise ValueError(f"parameter(s) {unused} are not used by any of the methods {list(methods)}")
    for base in _DISTRIBUTION_METHODS:
        if base in params:
            own = params[base]
            if not isinstance(own, dict):
                raise ValueError(f"{base} must be a dict of options for the {base.upper()} rank distribution, "
                                 f"got {own!r}")
            bad = sorted(set(own) - set(_DIST_OPTIONS[base]))
            if bad:
                raise ValueError(f"unknown option(s) {bad} in {base}=...; allowed: {sorted(_DIST_OPTIONS[base])}")
    if "replacement" in params:
        check_bool(params["replacement"], "replacement")


def _point_metric(sampled_ranks, n_items, sample_size, metric, k, method, params, warn=True, checked=None):
    """The point estimate of :func:`~itemsampling.estimators.estimate_metric` (no ``ci``): validates
    its input (every refusal of the public function) and runs the one estimate path. ``warn``: the
    resolution note (:func:`resolution_note`) as a :class:`ResolutionWarning` at the caller's caller;
    ``checked``: ``(r, N, n, pools)`` when the caller has validated the data already (not checked again)."""
    if warn:
        _warn_resolution(n_items, sample_size, k, method)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    r, N, n, pools = (_prepare(sampled_ranks, n_items, sample_size, params, method) if checked is None
                      else _prepared(checked, params, method))
    canonical_metric(metric)
    seq, ks = _ks(k)
    out = _estimate(r, N, n, [metric], ks, method, params, {}, pools)[0]
    return out if seq else float(out[0])


def _point_metrics(sampled_ranks, n_items, sample_size, metrics, k, methods, params, warn=True, checked=None):
    """The point estimates of :func:`~itemsampling.estimators.estimate_metrics` (no ``ci``), as
    :func:`_point_metric`: ``{method: {metric: estimate}}``, each prior learnt once."""
    _check_nonempty(metrics, "metrics", "metric")
    _check_nonempty(methods, "methods", f"method of {METHODS}")
    if warn:
        _warn_resolution(n_items, sample_size, k, methods)
    methods = [methods] if isinstance(methods, str) else list(methods)
    only = "sampled" if set(methods) == {"sampled"} else None
    r, N, n, pools = (_prepare(sampled_ranks, n_items, sample_size, params, only) if checked is None
                      else _prepared(checked, params, only))
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    for m in metrics:
        canonical_metric(m)
    for meth in methods:
        if meth not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {meth!r}")
    _check_options(params, methods)
    seq, ks = _ks(k)
    cache: dict = {}
    out: dict = {}
    for meth in methods:
        est = _estimate(r, N, n, metrics, ks, meth, _route(meth, params), cache, pools)
        out[meth] = {m: (est[i] if seq else float(est[i, 0])) for i, m in enumerate(metrics)}
    return out


GRID_METHODS = ("mle", "wmle", "mes", "bv", "mn", "mn_weighted", "bv_mle", "bv_mes", "mn_mle", "mn_mes",
                "mnw_mle", "mnw_mes")


def grid_estimate_metrics(sampled_ranks, n_items: int, sample_size: int, metrics, k, methods, grid=None,
                          replacement: bool = True, gamma: float = 0.1, **params) -> dict:
    r"""Estimate global metrics at catalogue scale: ``{method: {metric: estimate}}`` as
    :func:`itemsampling.estimators.estimate_metrics` returns it, every method on the grid.

    ``methods`` from :data:`GRID_METHODS`: rank distributions ``"mle"``, ``"wmle"``, ``"mes"``
    (:func:`grid_fit_rank_distribution`, metric by :func:`grid_metric`); corrected metrics
    ``"bv"`` (``gamma``, default 0.1), ``"mn"``, ``"mn_weighted"`` with the uniform prior; and the
    combinations ``"bv_mle"`` ... ``"mnw_mes"`` with the prior learnt from the same ranks. Options
    for one rank-distribution method go as a dict (``mle={"solver": "cnm"}``, ``mes={"eta": 0.01}``).
    ``grid`` defaults to :func:`rank_grid` of ``(N, n)`` with breaks at the cut-offs.
    :func:`itemsampling.estimators.estimate_metrics` with ``grid=True`` routes here.
    """
    replacement = check_bool(replacement, "replacement")
    N, n = check_sizes(n_items, sample_size)
    r = check_ranks(sampled_ranks, "sampled_ranks", high=n)
    names = [metrics] if isinstance(metrics, str) else list(metrics)
    for m in names:
        canonical_metric(m)
    methods = [methods] if isinstance(methods, str) else list(methods)
    if not names or not methods:  # a caller's mistake, as in estimate_metrics
        raise ValueError("metrics must name at least one metric" if not names else
                         f"methods must name at least one method of {GRID_METHODS}")
    for meth in methods:
        if meth not in GRID_METHODS:
            raise ValueError(f"method must be one of {GRID_METHODS}, got {meth!r}")
    seq = np.ndim(k) > 0
    ks = list(np.atleast_1d(np.asarray(k, dtype=object))) if seq else [k]
    if len(ks) == 0:
        raise ValueError("k must not be an empty sequence")
    for kk in ks:
        if kk is not None:
            check_int(kk, "k", low=1, high=N)
    fits = tuple(m for m in OPTIONS if m != "bv")  # the rank-distribution fits on the grid
    unknown = set(params) - set(fits)
    if unknown:
        raise ValueError(f"unknown parameter(s) {sorted(unknown)}; options of a rank-distribution method go "
                         f"as a dict named after it, one of {fits}")
    grid = resolve_grid(True if grid is None else grid, N, n, ks)

    cache: dict = {}
    out: dict = {}
    for meth in methods:
        base = meth.split("_")[-1]
        opts = params.get(base) or {} if base in fits else {}
        if not isinstance(opts, dict):
            raise ValueError(f"{base} options must be a dict, got {opts!r}")
        own = {"grid": grid, "replacement": replacement, **opts}
        if meth in ("bv", "bv_mle", "bv_mes"):
            own["gamma"] = gamma
        est = _estimate(r, N, n, names, ks, meth, own, cache)
        out[meth] = {m: (est[i] if seq else float(est[i, 0])) for i, m in enumerate(names)}
    return out
