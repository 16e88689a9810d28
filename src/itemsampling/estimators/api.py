r"""The public entry points of the estimators: :func:`estimate_metric` and :func:`estimate_metrics`,
a point estimate (the one estimate path of :mod:`.estimate`) or, with ``ci``, an estimate with its
interval (the user bootstrap of :mod:`.bootstrap`, ``target="population"``, or the parametric
bootstrap given the test users of :mod:`.conditional`, ``target="test-users"``).

Both are re-exported by :mod:`itemsampling.estimators`, the address to import them from. This is the
top of the estimators' layers: nothing in :mod:`itemsampling.estimators` imports it.
"""

from __future__ import annotations


import numpy as np

from .._validation import as_rng, check_int
from ..metrics import canonical_metric
from .auto import AUTO_ONLY, AUTO_OPTIONS, auto_estimates, check_auto_params
from .bootstrap import MetricEstimate, bootstrap_metrics
from .conditional import conditional_metrics
from .estimate import METHODS, _check_nonempty, _point_metric, _point_metrics, _warn_resolution
from .policy import (IntervalRule, _dense_for_pools, add_user_sampling, apply_interval_policy, check_interval_args,
                     interval_policy, is_full_ranking, user_sampling_half_widths, widen_bounds)

_AUTO_ONLY = tuple(x for x in AUTO_ONLY if x != "interval")  # ``interval`` is every method's (with ci)

__all__ = ["estimate_metric", "estimate_metrics"]


def estimate_metric(sampled_ranks, n_items, sample_size, metric, k, method, ci=None, n_boot=200, rng=None,
                    target="population", test_users=None, **params):
    r"""Estimate the global metric :math:`T = \frac1M\sum_u F(R_u)` from sampled ranks.

    Parameters
    ----------
    sampled_ranks : array of int
        One rank in ``1..sample_size`` per user.
    n_items : int or array of int
        Catalog size :math:`N`, or one catalogue size :math:`N_u \ge n_u` per user (the pool the
        user's target is ranked in, e.g. every item but the user's training items). The model for
        per-user sizes (:mod:`.distribution`, "Per-user catalogue sizes"): the users' rank fractions
        :math:`(R_u-1)/(N_u-1)` share one distribution, learnt on the grid of the largest pool (the
        with-replacement likelihood does not involve :math:`N_u`), and the estimate is the mean over
        users of :math:`F` at the rank in the user's own pool. Accepted by :data:`POOL_METHODS`
        (every method but CLS) with ``replacement=True``; a point estimate of
        :data:`~itemsampling.estimators.estimate.POOL_GRID_METHODS` (MLE, WMLE, MES) takes the grid by
        the same rule as one :math:`N`, every other method and every interval (``ci``) the dense
        estimators unless ``grid`` is given; equal sizes give exactly the one-:math:`N` result.
    sample_size : int or array of int
        Sampled-set size :math:`n` including the target, or one size :math:`n_u` per user
        (adaptive sampling, TORS Sec. 6). Unequal sizes are accepted by ``"sampled"`` (each user's
        metric on their own list of :math:`n_u` items) and ``"mle"`` (EM of TORS Appendix H, or
        the exact MLE with ``solver="cnm"``); every other method refuses them.
    metric : {"recall", "hr", "precision", "ndcg", "ap", "rr", "auc"}
    k : int, None or sequence of int
        Cut-off(s); ``None`` = untruncated. With a sequence the result is an array, and any rank
        distribution or factorisation is computed once for all cut-offs.
    method : str
        ``"sampled"`` (the uncorrected sampled metric, :math:`\frac1M\sum_u F(r_u)` on the list
        of length n); corrected metrics ``"rank_estimate"``, ``"cls"``, ``"bv"`` (needs
        ``gamma``), ``"mn"``, ``"mn_weighted"`` (``prior`` optional, uniform by default; MN uses
        ``n_users`` = number of sampled ranks unless given); rank distributions ``"mle"``,
        ``"wmle"``, ``"mes"`` (:math:`\sum_R \widehat P(R)F(R)`); and ``"bv_mle"``, ``"bv_mes"``
        (BV with ``gamma`` and prior :math:`\widehat P` from MLE / MES on the same ranks),
        ``"mn_mle"``, ``"mn_mes"`` (MN with that prior and :math:`M` = ``len(sampled_ranks)``);
        ``"mnw_mle"``, ``"mnw_mes"`` the same with the exactly-weighted MN variant
        (``"mn_weighted"`` in :func:`corrected_metric`, i.e. BV with :math:`\gamma = 1/M`).
        ``"auto"``: one of MLE, MES, CLS, BV (:math:`\gamma` = 0.1) and MN_MLE chosen per cut-off by
        its worst-case simulated error over four fits of :math:`P(R)` (:mod:`.auto`); the result is
        an :class:`~itemsampling.estimators.bootstrap.AutoEstimate` (with or without ``ci``)
        recording the choice, every candidate's simulated error under every fit and the reason. It
        takes ``replacement``, ``grid``, ``interval`` (with ``ci``: ``"kept"``, the default, the
        identification bounds of :mod:`.bounds` where :math:`K` is below two kernel widths
        :math:`N/(n-1)` and the chosen estimator's interval widened by its simulated bias margin
        above, an interval whose coverage holds for both targets; ``"bootstrap"``, the chosen
        estimator's own interval), ``widen`` (with ``interval="bootstrap"``: move the interval's
        ends out by the chosen estimator's worst-case simulated bias; default ``False``), ``n_sim``
        and ``candidates``, and refuses the options of one method (``gamma``, ``eta``, ...).
    **params
        ``grid``: ``None`` (default) uses the dense estimators unless the :math:`N\times n` kernel
        would exceed 1 MiB (:data:`~itemsampling.estimators.grid.AUTO_GRID_BYTES`) on more than 8,192 items, and then the
        grid estimators of :mod:`itemsampling.estimators.grid` (memory :math:`O(n\times` cells),
        independent of :math:`N`); ``True`` always uses the grid, ``False`` never; a
        :class:`~itemsampling.estimators.grid.RankGrid` uses that grid. ``"sampled"`` and
        ``"rank_estimate"`` need no kernel and ignore it; ``"cls"`` has no grid version.
        ``gamma``, ``prior``, ``n_users``, ``replacement`` go to the corrected metric; every other
        parameter (e.g. ``eta`` for MES, ``C`` / weighting for WMLE, solver tolerances) goes to
        :func:`estimate_rank_distribution`.

    ci : float in (0, 1), optional
        With a confidence level (e.g. 0.95) the result is a
        :class:`~itemsampling.estimators.bootstrap.MetricEstimate` ``(estimate, low, high,
        confidence, n_boot, method)`` whose interval is the percentile interval of a user
        bootstrap: ``n_boot`` replicates of the users drawn with replacement, every prior
        (``*_mle`` / ``*_mes``) re-estimated in each replicate
        (:func:`~itemsampling.estimators.bootstrap.bootstrap_metric`). The keyword ``interval``
        chooses what is reported: ``"kept"`` (default) marks each cut-off ``identified`` by the rule
        :math:`K \ge 2N/(n-1)` (:func:`itemsampling.kernel.resolves`); below it the interval is the
        identification bounds (:mod:`.bounds`, ``interval="bounds"``), above it the bootstrap interval
        widened at both ends by the method's simulated bias margin
        (:func:`~itemsampling.estimators.auto.bias_margins`, ``"bootstrap+margin"``; methods
        :data:`~itemsampling.estimators.auto.MARGIN_METHODS` with auto's settings, the others keep
        ``"bootstrap"``). ``"bootstrap"``: the bootstrap interval everywhere.
    n_boot : int
        Number of bootstrap replicates (>= 10; used only with ``ci``).
    rng : seed or numpy Generator
        Randomness of the bootstrap (used only with ``ci``).
    target : {"population", "test-users"}
        What the interval is for (used only with ``ci``). ``"population"`` (default): the metric
        of the population the test users were drawn from, by the user bootstrap above (it
        includes the between-user variance, so it stays wide even when every item is ranked).
        ``"test-users"``: the metric :math:`\frac1M\sum_u F(R_u)` of the evaluated users
        themselves, whose only uncertainty is the item sampling: a parametric bootstrap of the
        sampled ranks given the fitted MLE :math:`\widehat P(R)`
        (:mod:`itemsampling.estimators.conditional`, derivation and assumptions there). The default is ``"population"`` because it needs no model
        of the ranks (only that the users are a random sample), it is what a comparison meant
        to generalise to new users needs, and the model-based ``"test-users"`` interval
        under-covers wherever the estimator's bias given the test users is not small against
        the item-sampling noise (coverage studies in chapter 9 and the guide). Per-user sample
        sizes are those of adaptive sampling (TORS Algorithm 1: the replicates rerun the design).
    test_users : int or None
        With ``target="test-users"``: the number :math:`M_{test} \ge M` of test users the evaluated
        :math:`M` were drawn from at random (user sampling, ``sampled_ranks(..., n_users=M)``, whose
        table says it in its ``test_users`` column). The interval is then for the metric of all
        :math:`M_{test}` test users: the user-sampling error about it, :math:`z\,s\sqrt{(1-f)/M}`,
        :math:`f = M/M_{test}` (simple random sampling without replacement, the finite-population
        correction of TORS Eq. 45-46 as :mod:`itemsampling.plan` predicts it), is added to the item
        sampling's in quadrature (to the identification bounds at both ends below the rule), with
        :math:`s` the users' standard deviation of :math:`F(R_u)`: the sample's with a full ranking,
        else under the data's MLE :math:`\widehat P`. ``None`` (default) or :math:`M`: the evaluated users
        are the test users. Ignored by ``target="population"`` (whose users are a sample anyway).

    Returns
    -------
    float, or ndarray over the cut-offs when ``k`` is a sequence; a ``MetricEstimate`` with ``ci``.
    """
    ci, n_boot, rng, target, params = _entry(ci, n_boot, rng, target, n_items, params)
    test_users = _check_test_users(test_users, sampled_ranks)
    _warn_resolution(n_items, sample_size, k, method)
    if method == "auto":  # chosen per cut-off from the data (module .auto): an AutoEstimate
        canonical_metric(metric)
        return auto_estimates(sampled_ranks, n_items, sample_size, [metric], k, ci, n_boot, rng, target,
                              **params)[metric]
    _refuse_auto_only(params)
    if ci is not None:
        return _interval(True, sampled_ranks, n_items, sample_size, metric, k, method, ci, n_boot, rng, target, params,
                         test_users)
    params.pop("interval", None)
    return _point_metric(sampled_ranks, n_items, sample_size, metric, k, method, params, warn=False)


def estimate_metrics(sampled_ranks, n_items, sample_size, metrics, k, methods, ci=None, n_boot=200, rng=None,
                     target="population", test_users=None, **params):
    r"""Several metrics and methods on one set of sampled ranks.

    Returns ``{method: {metric: estimate}}`` where each estimate is as :func:`estimate_metric`
    returns it for ``k``. The rank distributions (MLE, MES, WMLE) are learnt once and shared by
    every metric and by the BV_* / MN_* combinations, and BV / MN solve one system for all metrics
    and cut-offs. ``params`` go to the methods that use them: ``gamma`` to the BV methods,
    ``eta`` / ``eta_scaling`` to the MES-based ones, ``C`` / ``weight`` to the WMLE-based ones;
    options for one rank-distribution method only can be given as a dict, e.g.
    ``mle={"solver": "em"}``, ``mes={"solver": "cvxpy"}``.

    With ``ci`` (a confidence level in (0, 1)) every estimate is a
    :class:`~itemsampling.estimators.bootstrap.MetricEstimate` with a user-bootstrap percentile
    interval; all methods share the same ``n_boot`` replicates drawn with ``rng``
    (:func:`~itemsampling.estimators.bootstrap.bootstrap_metrics`). ``target="test-users"``
    gives instead intervals for the test users' own metric, as :func:`estimate_metric` says
    (:func:`~itemsampling.estimators.conditional.conditional_metrics`).
    """
    ci, n_boot, rng, target, params = _entry(ci, n_boot, rng, target, n_items, params)
    test_users = _check_test_users(test_users, sampled_ranks)
    _check_nonempty(metrics, "metrics", "metric")
    _check_nonempty(methods, "methods", f"method of {METHODS}")
    _warn_resolution(n_items, sample_size, k, methods)
    methods = [methods] if isinstance(methods, str) else list(methods)
    if "auto" in methods:  # chosen per metric@K from the data (module .auto); the other methods as usual
        check_auto_params({x: v for x, v in params.items() if x not in _AUTO_ONLY})
        for m in ([metrics] if isinstance(metrics, str) else metrics):
            canonical_metric(m)
        gen = as_rng(rng)
        rest = [m for m in methods if m != "auto"]
        shared = {x: v for x, v in params.items() if x in AUTO_OPTIONS or x == "interval"}
        out = estimate_metrics(sampled_ranks, n_items, sample_size, metrics, k, rest, ci, n_boot, gen, target,
                               **shared) if rest else {}
        auto = auto_estimates(sampled_ranks, n_items, sample_size, metrics, k, ci, n_boot, gen, target, **params)
        return {m: (auto if m == "auto" else out[m]) for m in methods}
    _refuse_auto_only(params)
    if ci is not None:
        return _interval(False, sampled_ranks, n_items, sample_size, metrics, k, methods, ci, n_boot, rng, target,
                         params, test_users)
    params.pop("interval", None)
    return _point_metrics(sampled_ranks, n_items, sample_size, metrics, k, methods, params, warn=False)


def _interval(single, sampled_ranks, n_items, sample_size, metrics, k, methods, ci, n_boot, rng, target, params,
              test_users=None):
    """The ``ci`` branch of :func:`estimate_metric` (``single``) and :func:`estimate_metrics`: the interval
    policy (:func:`~.policy.interval_policy`, one rule per cut-off) applied by
    :func:`~.policy.apply_interval_policy`, on the user bootstrap (``target="population"``) or the
    parametric bootstrap given the test users, run only at the cut-offs whose interval starts from it."""
    params = dict(params)
    interval = params.pop("interval", "kept")
    several = conditional_metrics if target == "test-users" else bootstrap_metrics
    seq = np.ndim(k) > 0
    ks = list(np.atleast_1d(np.asarray(k, dtype=object))) if seq else [k]
    meths = [methods] if single or isinstance(methods, str) else list(methods)
    mets = [metrics] if single or isinstance(metrics, str) else list(metrics)
    full = is_full_ranking(n_items, sample_size)
    try:
        rules = {meth: interval_policy(n_items, sample_size, ks, meth, interval) for meth in meths}
    except (ValueError, TypeError):  # bad sizes: the estimators' own checks name them
        rules = {meth: {kk: IntervalRule("bootstrap", True, "") for kk in ks} for meth in meths}
    # a full ranking: every method's estimate is the plain mean over users (method "sampled")
    run = ["sampled"] if full else meths
    boot_ks = [kk for kk in ks if any(rules[meth][kk].needs_bootstrap for meth in meths)]
    own = {x: v for x, v in params.items() if x in ("replacement", "grid")} if full else params
    points = _point_metrics(sampled_ranks, n_items, sample_size, mets, ks, run, own, warn=False)
    boot = None
    if boot_ks and not (full and target == "test-users"):  # the test users' own metric is known exactly
        boot = several(sampled_ranks, n_items, sample_size, mets, boot_ks, run, ci=ci, n_boot=n_boot, rng=rng,
                       **own)
    user_part = None
    if target == "test-users" and test_users is not None and test_users > np.size(sampled_ranks):
        user_part = user_sampling_half_widths(sampled_ranks, n_items, sample_size, mets, ks, ci, test_users,
                                              params.get("replacement", True))
    res = {}
    for meth in meths:
        src = "sampled" if full else meth
        res[meth] = {}
        for m in mets:
            est = np.atleast_1d(np.asarray(points[src][m], dtype=float))
            lo, hi = np.full(len(ks), np.nan), np.full(len(ks), np.nan)
            if full and target == "test-users":
                lo, hi = est.copy(), est.copy()
            elif boot is not None:
                e = boot[src][m]
                for jb, kk in enumerate(boot_ks):
                    lo[ks.index(kk)] = np.atleast_1d(e.low)[jb]
                    hi[ks.index(kk)] = np.atleast_1d(e.high)[jb]
            if user_part is not None:  # the user sampling's error about the M_test users' metric, in quadrature
                lo, hi = add_user_sampling(est, lo, hi, user_part[m])
            conv = (lambda v: v) if seq else (lambda v: float(v[0]))
            res[meth][m] = MetricEstimate(conv(est), conv(lo), conv(hi), float(ci), int(n_boot) if boot else 0, meth)
    out = {}
    for meth in meths:  # one margin simulation per method, one computation of the bounds per method
        out.update(apply_interval_policy({meth: res[meth]}, sampled_ranks, n_items, sample_size, k, ci, interval,
                                         params, rng, rules=rules[meth]))
    if user_part is not None:  # below the rule the bounds hold for the M users: widened at both ends
        out = {meth: {m: widen_bounds(e, user_part[m], m, ks, n_items) for m, e in per.items()}
               for meth, per in out.items()}
    return out[methods][metrics] if single else out


def _check_test_users(test_users, sampled_ranks):
    """``test_users`` ``None`` or an integer at least the number of users (one rank each)."""
    if test_users is None:
        return None
    M = int(np.size(sampled_ranks))
    return check_int(test_users, "test_users", low=max(M, 1))



def _entry(ci, n_boot, rng, target, n_items, params):
    """The checks of the public entry points, once, whether or not the path taken uses the argument
    (:func:`~.policy.check_interval_args`), and, with ``ci``, the routing of per-user pools to the dense
    estimators (:func:`~.policy._dense_for_pools`: the bootstrap, the margins and the bounds work on the
    distinct :math:`(N_u, n_u, r_u)` triples). A point estimate (no ``ci``) with per-user pools takes the
    auto rule of :func:`~.grid.resolve_grid` as one :math:`N` does: the grid for the methods of
    :data:`~.estimate.POOL_GRID_METHODS` above :data:`~.grid.AUTO_GRID_BYTES` (N = 10^5, n = 1,000,
    M = 10^5 users, about 2,000 pools: MLE 0.09 s and 38 MB against 12 s and 2.5 GB dense, within the
    tolerance of ``tests/test_grid_tolerance.py``), the dense estimators otherwise. ``rng`` comes back as
    given (checked): a seed seeds the bootstrap and, afresh, the margins' simulation, as before."""
    params = dict(params)
    ci, n_boot, _, target, interval = check_interval_args(ci, n_boot, rng, target, params.get("interval", "kept"))
    if "interval" in params:
        params["interval"] = interval
    pools = n_items if np.ndim(n_items) > 0 and np.unique(np.asarray(n_items)).size > 1 else None
    if ci is not None and pools is not None and _dense_for_pools(params.get("grid"), pools) is False \
            and "grid" not in params:
        params["grid"] = False
    return ci, n_boot, rng, target, params


def _refuse_auto_only(params) -> None:
    used = sorted(set(params) & set(_AUTO_ONLY))
    if used:
        raise ValueError(f"{', '.join(used)} {'is an option' if len(used) == 1 else 'are options'} of method 'auto' only")
