r"""Intervals for the metric of the *test users themselves* (``target="test-users"``).

Two different quantities are called "the metric" of an item-sampling evaluation:

* the **population** metric :math:`\mathbb E_{R\sim P}\,F(R)` of the users the test users were
  drawn from; the user bootstrap (:mod:`.bootstrap`) is an interval for it: it resamples users
  and so includes the between-user variance of :math:`F(R_u)`;
* the **test-users** metric :math:`T = \frac1M\sum_{u=1}^M F(R_u)` of the :math:`M` users that were
  evaluated. The :math:`R_u` are fixed numbers; the only uncertainty is the item sampling
  (which decoys were drawn), so with every item ranked (:math:`n = N` without replacement) the
  interval has width zero, while the user bootstrap stays as wide as with any :math:`n`.

Derivation. Write :math:`\widehat T(r)` for the estimator and :math:`e = \widehat T(r) - T` for its
error. Given the test users' global ranks :math:`R_1..R_M`, the distribution of :math:`e` comes
from the item sampling alone; if :math:`e` is roughly normal with mean square
:math:`\mathbb E[e^2\mid R]` (variance plus squared bias), :math:`\widehat T \pm
z_{\alpha/2}\sqrt{\mathbb E[e^2\mid R]}` covers :math:`T` with probability about
:math:`1-\alpha` (at least that when the bias is zero). The :math:`R_u` are unknown; under the model
of every rank-distribution estimator (TORS Sec. 5; Jin et al. 2021 Eq. 11-13: global ranks drawn
from :math:`P(R)`, sampled rank given :math:`R` from the kernel :math:`K(r\mid R; n)`, binomial with
replacement, hypergeometric without, :mod:`itemsampling.kernel`) the users are independent given
their sampled ranks, each with posterior

.. math::  \Pr(R_u = R \mid r_u) = \frac{P(R)\,K(r_u\mid R; n)}{\sum_{R'} P(R')\,K(r_u\mid R'; n)}.

The parametric bootstrap replaces :math:`P` by the MLE :math:`\widehat P` of the same ranks (EM
with the package defaults) and, in each of ``n_boot`` replicates, (1) draws every user's
:math:`R^*_u` from this posterior (users sharing a sampled rank together: one multinomial draw),
(2) draws fresh sampled ranks :math:`r^*_u \sim K(\cdot\mid R^*_u; n)`, (3) reruns the estimator and
records :math:`e^* = \widehat T(r^*) - T(R^*)`, :math:`T(R^*) = \frac1M\sum_u F(R^*_u)`. The
interval is :math:`\widehat T \pm z_{\alpha/2}\sqrt{\overline{e^{*2}}}`, clipped to the range of
:math:`F` over :math:`1..N`. It is centred on the
estimate rather than corrected by :math:`\overline{e^*}`: the replicate bias is itself a product of
:math:`\widehat P` and, in trials on a smooth rank model, the bias-corrected (basic-bootstrap)
interval covered less often than the centred one. The posterior keeps each user's evidence
(a user at :math:`r_u = 1` stays near the top), and at the EM fixed point the posteriors average to
:math:`\widehat P`. With every item ranked (:math:`n = N` without replacement) the posterior is a
point mass at :math:`R_u = r_u`, :math:`e^* = 0` and the interval has width zero, whereas the user
bootstrap keeps the between-user variance. :func:`posterior_metric_moments` gives the analytic
mean and variance of :math:`T` under the posterior (no estimator involved).

Assumptions, and what they cost (the coverage studies of chapter 9 and the guide measure it):
(i) uniform decoys and the kernel above; (ii) :math:`\widehat P` close to :math:`P` at the
resolution the metric needs: the replicates reproduce the estimator's bias only as far as the
test users resemble draws from :math:`\widehat P`. Because the test-users interval has no
between-user variance to hide behind, an estimator bias the model does not see (e.g. at cut-offs
:math:`K` well below the resolution :math:`N/(n-1)`, where :math:`P` is not identified) makes it
under-cover; it is reliable where the estimator's bias is small against its item-sampling
standard deviation. (iii) One sample size for every user, or the sizes of adaptive sampling.

Adaptive sampling (TORS Algorithm 1, per-user sizes :math:`n_u` on a ladder :math:`n_0 2^j`,
:func:`adaptive_ladder`): the stopping rule depends only on the sampled ranks, so the posterior of a user
is the one above with its own :math:`n_u` (TORS Eq. 43), and step (2) reruns the design on
:math:`R^*_u` (:func:`itemsampling.sampling.adaptive_sample_ranks`): the replicate sizes :math:`n^*_u`
are drawn with the ranks, as the study's were, and the estimator sees them.

Per-user catalogue sizes (``n_items`` one :math:`N_u` per user, the model of :mod:`.distribution`):
the posterior lives on the common grid of rank fractions of the largest pool and is free of the
pool (with replacement); each user keeps its pool, so :math:`T(R^*) = \frac1M\sum_u
F_{N_u}(R_u(R^*_u))` and the replicate estimates see every user's :math:`N_u`.

What the module holds: the posterior (:func:`rank_posterior`, :func:`posterior_metric_moments`),
the draws of :math:`(R^*, r^*)`, and :func:`conditional_metrics`. The input check, the table of
distinct pairs and the estimates on the replicates' histograms are the user bootstrap's
(:mod:`.bootstrap`: ``_check_input``, ``_pair_table``, ``_Replicator``), so both targets run every
estimator through the same code; :func:`itemsampling.estimators.estimate_metric` calls this module
for ``target="test-users"``.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from .._validation import as_float_array, as_rng, check_bool, check_int
from ..metrics import canonical_metric, metric_function
from ..sampling import adaptive_sample_ranks, adaptive_sizes, sample_ranks
from .bootstrap import (
    MetricEstimate, _check_input, _check_n_boot, _grid_in_use, _metric_estimate, _metric_values, _pair_table,
    _Replicator, check_confidence,
)
from .corrected import CORRECTION_METHODS
from .distribution import estimate_rank_distribution
from .estimate import _check_options, _ks, _point_metrics, _route, _split
from .estimate import TARGETS, check_target  # noqa: F401  (importable from here, as before the move)
from .grid import kernel_columns, pool_metric_matrix, pool_ranks

__all__ = ["rank_posterior", "posterior_metric_moments", "conditional_metric",
           "conditional_metrics", "adaptive_ladder"]

def _pairs(sampled_ranks, n_items, sample_size):
    """The validated input as the user bootstrap takes it (:func:`.bootstrap._check_input`) with its
    table of distinct ``(n_u, r_u)`` pairs: ``(N, n, r, pair sizes, pair ranks, counts, each user's
    pair, pools)``, ``N`` the largest catalogue and ``pools`` the per-user ones or ``None``."""
    r, N, n, pools = _check_input(sampled_ranks, n_items, sample_size)
    ps, pr, counts, inverse = _pair_table(r, n)
    return N, n, r, ps, pr, counts.astype(np.float64), inverse, pools


def rank_posterior(prior, n_items, pair_sizes, pair_ranks, replacement: bool = True) -> np.ndarray:
    r"""Posterior :math:`\Pr(R \mid r; n) \propto P(R)\,K(r\mid R; n)` of the global rank given a
    sampled rank, for each pair ``(pair_sizes[j], pair_ranks[j])``: an ``(N, J)`` array whose
    columns sum to 1 (Bayes' rule with the kernel of :func:`~.grid.kernel_columns`)."""
    N = check_int(n_items, "n_items", low=2)
    P = as_float_array(prior, "prior")
    if P.shape != (N,) or not np.all(np.isfinite(P)) or np.any(P < 0) or P.sum() <= 0:
        raise ValueError(f"prior must be a finite, non-negative array of length n_items = {N} with positive sum")
    K = kernel_columns(N, np.asarray(pair_sizes), np.asarray(pair_ranks), check_bool(replacement, "replacement"))
    joint = P[:, None] * K
    q = joint.sum(axis=0)
    if np.any(q <= 0):
        j = int(np.flatnonzero(q <= 0)[0])
        raise ValueError(f"the prior gives sampled rank {int(np.asarray(pair_ranks)[j])} zero probability; "
                         "no posterior exists")
    return joint / q


def posterior_metric_moments(sampled_ranks, n_items, sample_size, prior, metrics, ks, replacement: bool = True):
    r""":math:`\mathbb E[T\mid r]` and :math:`\operatorname{Var}[T\mid r]` of the test users' metric
    :math:`T = \frac1M\sum_u F(R_u)` under ``prior`` (module docstring), for every metric and
    cut-off: two arrays of shape ``(len(metrics), len(ks))``."""
    if np.ndim(n_items) > 0 and np.ptp(np.asarray(n_items)) > 0:
        raise ValueError("posterior_metric_moments takes one n_items; per-user catalogue sizes are taken by "
                         "conditional_metrics (estimate_metric(..., target='test-users'))")
    N, _, r, ps, pr, cnt, _, _ = _pairs(sampled_ranks, n_items, sample_size)
    post = rank_posterior(prior, N, ps, pr, replacement)          # (N, J)
    Fs = _metric_values(metrics, ks, N, np.arange(1, N + 1))     # (n_metrics, n_ks, N)
    mean_j = Fs @ post                                              # (n_metrics, n_ks, J)
    var_j = np.maximum((Fs ** 2) @ post - mean_j ** 2, 0.0)
    M = float(r.size)
    return mean_j @ cnt / M, var_j @ cnt / M ** 2


def _posterior_draws(post, counts, n_boot, rng):
    """Global-rank histograms of ``n_boot`` draws of every user's rank from its posterior:
    (n_boot, N) counts; users sharing a pair j draw Multinomial(c_j, post[:, j]) together."""
    H = np.zeros((n_boot, post.shape[0]))
    for j in np.flatnonzero(np.asarray(counts) > 0):
        H += rng.multinomial(int(counts[j]), post[:, j] / post[:, j].sum(), size=n_boot)
    return H


def _sampled_histograms(H, N, pair_size, n_boot, replacement, rng):
    """Fresh sampled ranks (one size n for all users) of the users in each global-rank histogram
    row of ``H``: (n_boot, n) counts of r* = 1..n (:func:`itemsampling.sampling.sample_ranks`)."""
    support = np.arange(1, N + 1)
    out = np.zeros((n_boot, pair_size))
    for b in range(n_boot):
        Rb = np.repeat(support, H[b].astype(np.int64))
        rb = sample_ranks(Rb, N, pair_size, rng=rng, replacement=replacement)
        out[b] = np.bincount(rb, minlength=pair_size + 1)[1:]
    return out


def _draw_ranks(cdf, col, U):
    r"""Global ranks :math:`R^*` by inversion of the posterior CDF ``cdf`` (N, J): user ``u``'s uniform
    draws ``U[:, u]`` read on the column of its pair ``col[u]``: (B, M) ranks in 1..N."""
    N = cdf.shape[0]
    Rs = np.empty(U.shape, dtype=np.int64)
    order = np.argsort(col, kind="stable")  # the users of each pair, by one sort (not one scan per pair)
    for users in np.split(order, np.flatnonzero(np.diff(col[order])) + 1):
        j = int(col[users[0]])
        Rs[:, users] = 1 + np.minimum(np.searchsorted(cdf[:, j], U[:, users], side="right"), N - 1)
    return Rs


def _pool_draws(post, col, g, Fp, n, n_boot, replacement, rng):
    r"""Per-user pools: every user's :math:`R^*_u` from the posterior of its pair ``col[u]`` (by
    inversion of the posterior CDF), :math:`T(R^*) = \frac1M\sum_u F_{N_u}(R_u(R^*_u))` with the
    user's pool ``g[u]`` (``Fp`` from :func:`.distribution.pool_metric_matrix`), and fresh
    :math:`r^*_u \mid R^*_u` (pool-free kernel): ``T*`` (n_boot, m, k) and the (n_boot, G, n)
    histograms of (pool, r*). Replicates are drawn in chunks of bounded memory."""
    N, M, G = post.shape[0], col.size, Fp.shape[-1]
    cdf = np.cumsum(post, axis=0)
    cdf /= cdf[-1]
    T_star = np.zeros((n_boot,) + Fp.shape[1:3])
    S = np.zeros((n_boot, G, n))
    step = max(1, int(2e6 // M))
    for b0 in range(0, n_boot, step):
        B = min(step, n_boot - b0)
        Rs = _draw_ranks(cdf, col, rng.random((B, M)))
        T_star[b0:b0 + B] = Fp[Rs - 1, :, :, g[None, :]].sum(axis=1) / M
        rs = sample_ranks(Rs.reshape(-1), N, n, rng=rng, replacement=replacement).reshape(B, M)
        for i in range(B):
            S[b0 + i] = np.bincount(g * n + rs[i] - 1, minlength=G * n).reshape(G, n)
    return T_star, S


def adaptive_ladder(sizes, ranks) -> np.ndarray:
    r"""The ladder :math:`n_0, 2n_0, \dots, n_{max}` of TORS Algorithm 1 that per-user sample sizes
    ``sizes`` come from (:func:`itemsampling.sampling.adaptive_sizes`): :math:`n_0` the smallest size and
    :math:`n_{max}` the largest seen. Refuses sizes that are not :math:`n_0 2^j`, and a user below
    :math:`n_{max}` ranked first (the design would have doubled its set): such sizes were not written
    by adaptive sampling, and the replicates of :func:`conditional_metrics` could not redraw them."""
    sizes = np.asarray(sizes, dtype=np.int64)
    ranks = np.asarray(ranks, dtype=np.int64)
    n0, top = int(sizes.min()), int(sizes.max())
    try:
        ladder = adaptive_sizes(n0, top, top)
        bad = None if np.all(np.isin(sizes, ladder)) else int(sizes[~np.isin(sizes, ladder)][0])
    except ValueError:  # n_max is not n0 * 2**j
        bad = top
    if bad is not None:
        raise ValueError("target='test-users' with per-user sample sizes needs the sizes of adaptive sampling "
                         f"(n0 * 2**j: {', '.join(str(n0 << j) for j in range(3))}, ...), got size {bad}; "
                         "for other per-user sizes use target='population'")
    early = (sizes < top) & (ranks == 1)
    if np.any(early):
        u = int(np.flatnonzero(early)[0])
        raise ValueError(f"target='test-users' with per-user sample sizes needs the sizes of adaptive sampling, "
                         f"which doubles a set while its target ranks first; user {u} ranks first in a set of "
                         f"{int(sizes[u])} < {top}: use target='population'")
    return ladder


def _user_metric_values(metrics, ks, N, R, pools):
    r""":math:`F_{N_u}(R_u(R))` of each draw ``R`` (global ranks on the grid of the largest pool
    :math:`N`) in its user's pool ``pools`` (an array like ``R``, or ``None``: one catalogue),
    (:func:`~.grid.pool_rank_map`): shape ``R.shape + (n_metrics, n_ks)``."""
    out = np.empty(R.shape + (len(metrics), len(ks)))
    if pools is not None:
        pools = np.broadcast_to(pools, R.shape)
    Rg = R if pools is None else pool_ranks(N, R, pools)
    for i, m in enumerate(metrics):
        for j, k in enumerate(ks):
            if pools is not None and (canonical_metric(m) == "auc" or (canonical_metric(m) == "precision"
                                                                       and k is None)):
                vals = np.empty(R.shape)
                for size in np.unique(pools):  # the metric involves the pool's size
                    sel = pools == size
                    vals[sel] = metric_function(m, k, int(size))(Rg[sel])
                out[..., i, j] = vals
            else:
                out[..., i, j] = metric_function(m, k, N)(Rg)
    return out


def _adaptive_draws(post, col, pools, N, ladder, metrics, ks, n_boot, replacement, rng):
    r"""Adaptive sampling (per-user sizes of TORS Algorithm 1, ``ladder``): every user's :math:`R^*_u`
    from the posterior of its pair ``col[u]`` (inversion of the posterior CDF), :math:`T(R^*) =
    \frac1M\sum_u F_{N_u}(R_u(R^*_u))` (``pools`` the users' pools or ``None``), and a fresh run of the
    design on :math:`R^*` (:func:`itemsampling.sampling.adaptive_sample_ranks`, pool-free kernel on
    the common grid): ``T*`` (n_boot, m, k) and the replicates' tables as counts ``S`` (n_boot, J) of the
    distinct triples ``(pool, n*, r*)`` seen in any replicate, given as three arrays. Replicates are
    drawn in chunks of bounded memory."""
    M = col.size
    cdf = np.cumsum(post, axis=0)
    cdf /= cdf[-1]
    n0, top = int(ladder[0]), int(ladder[-1])
    g, pool_sizes = (np.zeros(M, dtype=np.int64), np.array([N])) if pools is None else \
        np.unique(pools, return_inverse=True)[::-1]
    g = np.asarray(g).reshape(-1)
    width = top + 1
    T_star = np.zeros((n_boot, len(metrics), len(ks)))
    parts = []
    step = max(1, int(2e6 // M))
    for b0 in range(0, n_boot, step):
        B = min(step, n_boot - b0)
        Rs = _draw_ranks(cdf, col, rng.random((B, M)))
        T_star[b0:b0 + B] = _user_metric_values(metrics, ks, N, Rs, None if pools is None else pools[None, :]
                                                ).mean(axis=1)
        rs, ns = adaptive_sample_ranks(Rs.reshape(-1), N, n0, top, rng=rng, replacement=replacement)
        keys = (np.tile(g, B) * width + ns) * width + rs
        uk, inv = np.unique(keys, return_inverse=True)
        counts = np.bincount(np.repeat(np.arange(B), M) * uk.size + inv.reshape(-1),
                             minlength=B * uk.size).reshape(B, uk.size)
        parts.append((b0, uk, counts))
    union = np.unique(np.concatenate([uk for _, uk, _ in parts]))
    S = np.zeros((n_boot, union.size))
    for b0, uk, counts in parts:
        S[b0:b0 + counts.shape[0], np.searchsorted(union, uk)] = counts
    pair_pools = None if pools is None else pool_sizes[union // width // width]
    return T_star, S, (union // width % width, union % width, pair_pools)


def _replicate_estimates(S, N, n, metrics, ks, method, params, pools=None, pairs=None):
    """The estimate of ``method`` on every row of ``S`` (histograms of sampled ranks 1..n):
    (n_boot, n_metrics, n_ks), by the machinery of the user bootstrap (:class:`.bootstrap._Replicator`
    on the table of pairs ``(n, r)``, r = 1..n): histogram-linear methods in one product; EM-MLE on
    all rows at once (:func:`~.bootstrap.batch_em`); every other method replicate by replicate. With
    per-user pools (``pools`` the G distinct sizes) ``S`` is (n_boot, G, n), one pair ``(N_g, n, r)``
    per pool and rank."""
    own = _route(method, params)
    corr, dist = _split(own)
    corr.pop("grid", None)
    if pairs is not None:  # per-user sizes (adaptive): S (n_boot, J) over the triples (sizes, ranks, pools)
        ps, pr, pp = pairs
        rep = _Replicator(N, n, ps, pr, S, list(metrics), ks, 1, pp)
        if method == "mle" and own.get("solver", "em") == "em":  # the bootstrap's batched EM, as below
            P = rep.prior("mle", dist, corr.get("replacement", True))[1]
            if pp is None:
                return np.einsum("bN,mkN->bmk", P, _metric_values(metrics, ks, N, np.arange(1, N + 1)))
            A = np.einsum("bN,Nmkg->bmkg", P, pool_metric_matrix(metrics, ks, N, rep.pools))
            return np.einsum("bmkg,bg->bmk", A, rep.Cpool) / rep.M
        return rep.replicates(method, own) if method == "sampled" else rep.each(method, own)
    if pools is not None and method == "sampled":  # the sampled metric is free of the pools
        S, pools = S.sum(axis=1), None
    G = 1 if pools is None else pools.size
    rep = _Replicator(N, n, np.full(G * n, n), np.tile(np.arange(1, n + 1), G), S.reshape(S.shape[0], -1),
                      list(metrics), ks, 1, None if pools is None else np.repeat(pools, n))
    if method in ("sampled", "rank_estimate") or not _grid_in_use(own.get("grid"), N, n, ks):
        if method in CORRECTION_METHODS and pools is not None:
            return np.einsum("bgr,rmkg->bmk", S, rep.corrected(method, corr)) / rep.M  # Fh (n, m, k, G)
        if method == "mle" and own.get("solver", "em") == "em":  # the bootstrap's batched EM, this module's sums
            P = rep.prior("mle", dist, corr.get("replacement", True))[1]
            if pools is None:
                return np.einsum("bN,mkN->bmk", P, _metric_values(metrics, ks, N, np.arange(1, N + 1)))
            A = np.einsum("bN,Nmkg->bmkg", P, pool_metric_matrix(metrics, ks, N, pools))
            return np.einsum("bmkg,bg->bmk", A, rep.Cpool) / rep.M
        if method in CORRECTION_METHODS + ("sampled",):
            return rep.replicates(method, own)
    return rep.each(method, own)


def conditional_metrics(sampled_ranks, n_items, sample_size, metrics, k, methods, ci: float = 0.95,
                        n_boot: int = 200, rng=None, **params) -> dict:
    r"""Estimates with an interval for the metric of the test users themselves (``target="test-users"``).

    Returns ``{method: {metric: MetricEstimate}}`` as
    :func:`itemsampling.estimators.estimate_metrics` with ``ci``: ``estimate`` is the method's
    estimate on the observed ranks, ``low``/``high`` the parametric-bootstrap interval
    :math:`\widehat T \pm z_{\alpha/2}\sqrt{\overline{e^{*2}}}` of the module docstring, ``n_boot`` the number of parametric replicates. The same draws of
    :math:`(R^*, r^*)` serve every method and metric. ``n_items`` may be one catalogue size per
    user (module docstring). One sample size for every user, or the per-user sizes of adaptive
    sampling (the replicates rerun the design; :func:`adaptive_ladder` reads and checks the ladder). ``params`` as for ``estimate_metrics``; the prior of the
    posterior draws is the MLE of the same ranks with the options of ``mle={...}`` or of the
    ``solver``/``tol``/``max_iter`` given to an MLE method (package defaults otherwise).
    """
    conf = check_confidence(ci, "ci")
    n_boot = _check_n_boot(n_boot)
    gen = as_rng(rng)
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    methods = [methods] if isinstance(methods, str) else list(methods)
    for m in metrics:
        canonical_metric(m)
    points = _point_metrics(sampled_ranks, n_items, sample_size, metrics, k, methods, params)
    _check_options(params, methods)
    seq, ks = _ks(k)
    N, n, r, ps, pr, cnt, col, pools = _pairs(sampled_ranks, n_items, sample_size)
    ladder = None if isinstance(n, int) else adaptive_ladder(n, r)
    replacement = check_bool(params.get("replacement", True), "replacement")
    mle_opts = dict(params.get("mle", {}) or {})
    mle_opts.update({k2: v for k2, v in params.items() if k2 in ("solver", "tol", "max_iter")})
    P = np.asarray(estimate_rank_distribution(r, N, n, "mle", replacement=replacement, **mle_opts),
                   dtype=np.float64)
    P = P / P.sum()
    post = rank_posterior(P, N, ps, pr, replacement)
    pairs = None
    if ladder is not None:  # adaptive sampling: every user's draw, the design rerun on R*
        T_star, S, pairs = _adaptive_draws(post, col, pools, N, ladder, metrics, ks, n_boot, replacement, gen)
        Fs = _metric_values(metrics, ks, N, np.arange(1, N + 1))  # its range: that of every pool's metric
    elif pools is not None:  # per-user pools: draws per pool, each user's pair col[u]
        pools, g = np.unique(pools, return_inverse=True)
        Fp = pool_metric_matrix(metrics, ks, N, pools)                              # (N, m, k, G)
        T_star, S = _pool_draws(post, col, g.reshape(-1), Fp, n, n_boot, replacement, gen)
        Fs = np.moveaxis(Fp, 0, -1).reshape(len(metrics), len(ks), -1)  # F over every pool: its range
    else:
        H = _posterior_draws(post, cnt, n_boot, gen)                       # (B, N) global ranks R*
        Fs = _metric_values(metrics, ks, N, np.arange(1, N + 1))
        T_star = np.einsum("bN,mkN->bmk", H, Fs) / r.size                  # T(R*)
        S = _sampled_histograms(H, N, n, n_boot, replacement, gen)          # r* | R*
    z = float(stats.norm.ppf(0.5 + conf / 2))
    out: dict = {}
    for meth in methods:
        err = _replicate_estimates(S, N, n, metrics, ks, meth, params, pools, pairs) - T_star
        half = z * np.sqrt(np.mean(err ** 2, axis=0))                         # (n_metrics, n_ks)
        out[meth] = {}
        for i, m in enumerate(metrics):
            est = np.atleast_1d(np.asarray(points[meth][m], dtype=np.float64))
            # clipped to the range of F over 1..N: T lies there whatever the estimate
            lo, hi = np.maximum(est - half[i], Fs[i].min(axis=1)), np.minimum(est + half[i], Fs[i].max(axis=1))
            out[meth][m] = _metric_estimate(est, lo, hi, conf, n_boot, meth, seq)
    return out


def conditional_metric(sampled_ranks, n_items, sample_size, metric, k, method, ci: float = 0.95,
                       n_boot: int = 200, rng=None, **params) -> MetricEstimate:
    """One method and metric of :func:`conditional_metrics`."""
    return conditional_metrics(sampled_ranks, n_items, sample_size, [metric], k, [method], ci=ci,
                               n_boot=n_boot, rng=rng, **params)[method][metric]
