r"""The one interval policy: which interval each metric@K gets, decided in one place.

:func:`interval_policy` is the rule, a function of the design only (catalogue sizes, sample sizes,
cut-offs, the method and the ``interval`` asked for), never of the data; :func:`apply_interval_policy`
turns estimates with user-bootstrap intervals into the intervals the rule names;
:func:`difference_interval` does the same for the difference of two models. The public entry points
(:func:`itemsampling.estimators.estimate_metrics` with ``ci``), the command (``python -m itemsampling
estimate``) and the planner (:mod:`itemsampling.plan`) all call them.

The rule, per cut-off :math:`K` (``interval="kept"``, the default):

* **full ranking** (``sample_size == n_items`` for every user: each user's exact global rank): the plain
  mean over users :math:`\frac1M\sum_u F(R_u)`, which has no bias, with the user-bootstrap percentile
  interval; identified (kind ``"full"``);
* **below the resolution rule** :math:`K < c\,N/(n-1)` (:func:`itemsampling.kernel.resolves`, the
  largest :math:`N_u` and :math:`n_u`): the identification bounds (:mod:`.bounds`; coverage at least
  ``ci`` by construction, for both targets); not identified (``"bounds"``);
* **above it**: the bootstrap percentile interval widened at both ends by the estimator's bias margin
  (``"bootstrap+margin"``): for one sample size and the methods of :data:`~.auto.MARGIN_METHODS`, the
  largest simulated bias under the smooth fits of :math:`P(R)` the data do not reject
  (:func:`~.auto.bias_margins`); for every other method and design (per-user sample sizes of adaptive
  sampling included) the bias simulated under the data's own MLE fit with the data's design
  (:func:`~.auto.design_margins`). Where no margin can be computed the row falls back to the
  identification bounds, whose coverage needs no margin: an identified row's interval always accounts
  for the estimator's bias;
* ``method="sampled"`` (the uncorrected sampled metric estimates itself): the bootstrap.

``interval="bootstrap"`` (on request): the estimator's own bootstrap interval everywhere (a full
ranking keeps its plain mean).

**Why the margin interval covers.** Let :math:`b` be the estimator's bias and :math:`[\ell, h]` the
percentile interval of its bootstrap, which covers :math:`E\widehat T = T + b` with probability about
``ci`` (the estimator is asymptotically normal above the rule, where its bias is small against the
kernel's resolution). If the margin :math:`m \ge |b|`, then :math:`[\ell - m, h + m] \ni T` whenever
:math:`[\ell, h] \ni T + b`. The simulated margin estimates :math:`|b|` at the fit; the coverage of the
result is measured by simulation (``tests/test_policy.py``, exact binomial test).

**Comparisons** (:func:`difference_interval`): a difference of two models is decided (``decides``)
whenever its interval excludes 0, whatever produced the interval. Both rows bootstrap (full or
``"sampled"``): the bootstrap of the difference at ``ci``; with margins, that interval widened by the
sum of the two margins, at ``ci``; where either row has the identification bounds (or the two rows come
from different bootstraps), the difference of the two rows' intervals, which holds with probability at
least :math:`1 - 2(1 - \text{ci})` (Bonferroni: 90 % for two 95 % intervals), its ``level``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from scipy import stats

from .._validation import as_rng, check_int, check_open_unit, check_target
from ..kernel import RESOLVED, resolves
from ..metrics import canonical_metric, metric_function
from .auto import MARGIN_METHODS, GAMMA, bias_margins, check_interval, design_margins
from .bootstrap import MetricEstimate
from .bounds import identification_bounds
from .distribution import estimate_rank_distribution
from .conditional import rank_posterior
from .estimate import _prepare, _route

__all__ = ["KINDS", "IntervalRule", "KeptEstimate", "is_full_ranking", "interval_policy", "check_interval_args",
           "apply_interval_policy", "difference_interval", "metric_range", "outside_note", "user_sampling_half_widths",
           "add_user_sampling", "widen_bounds"]

#: The kinds of interval the policy gives (module docstring).
KINDS = ("full", "bounds", "bootstrap+margin", "bootstrap")


@dataclass(frozen=True)
class IntervalRule:
    """What one cut-off gets: ``kind`` (one of :data:`KINDS`), whether the cut-off is ``identified``
    (its estimate is the data's, not a prior's) and ``why`` (one line)."""

    kind: str
    identified: bool
    why: str

    @property
    def needs_bootstrap(self) -> bool:
        """Whether the interval starts from a user bootstrap (every kind but ``"bounds"``)."""
        return self.kind != "bounds"


@dataclass(frozen=True, repr=False)
class KeptEstimate(MetricEstimate):
    """A :class:`~itemsampling.estimators.bootstrap.MetricEstimate` whose interval the policy gave
    (:func:`apply_interval_policy`), with, per cut-off, the bias ``margin`` added at both ends (0 where
    none) and ``impossible``: ``True`` where the point estimate lies outside its own identification
    bounds or outside the metric's range, a value no rank distribution the data allow can give (the
    estimator's extrapolation; :func:`outside_note` says so)."""

    margin: object = 0.0
    impossible: object = False


def is_full_ranking(n_items, sample_size) -> bool:
    """Whether every user's sampled set is the user's whole pool (``sample_size == n_items``, per user
    or as scalars): then every sampled rank is the global rank, and the metric is the plain mean."""
    try:
        n = np.asarray(sample_size)
        N = np.asarray(n_items)
        return bool(n.size > 0 and np.all(n == N))
    except (TypeError, ValueError):  # shapes that do not broadcast: not a full ranking (checked elsewhere)
        return False


def interval_policy(n_items, sample_size, k, method: str = "mle", interval: str = "kept") -> dict:
    r"""The interval each cut-off of ``k`` gets (module docstring): ``{k: IntervalRule}``.

    A rule of the design only: ``n_items`` (:math:`N`, or per-user :math:`N_u`), ``sample_size``
    (:math:`n`, or per-user :math:`n_u`), the cut-offs (``None`` = untruncated), ``method`` and
    ``interval`` (``"kept"``, default, or ``"bootstrap"``). :mod:`itemsampling.plan` calls it to say
    which interval a design will get; :func:`~itemsampling.estimators.estimate_metrics` and the command
    apply it (:func:`apply_interval_policy`). The margin's kind is the plan's: a row whose margin cannot
    be computed on the data falls back to ``"bounds"`` when applied."""
    interval = check_interval(interval)
    ks = list(np.atleast_1d(np.asarray(k, dtype=object))) if np.ndim(k) > 0 else [k]
    N = int(np.max(n_items))
    nmax = int(np.max(sample_size))
    width = N / max(nmax - 1, 1)
    full = is_full_ranking(n_items, sample_size)
    out = {}
    for kk in ks:
        ident = True if full else bool(resolves(N, sample_size, kk))
        rule = f"K >= {RESOLVED:g} N/(n-1) = {RESOLVED * width:.4g}" if kk is not None else "untruncated metric"
        if full:
            out[kk] = IntervalRule("full", True, "full ranking: every user's exact rank; the plain mean over users "
                                                 "with the user bootstrap")
        elif method == "sampled" or interval == "bootstrap":
            out[kk] = IntervalRule("bootstrap", ident, "the uncorrected sampled metric" if method == "sampled" else
                                   "interval='bootstrap': the estimator's own bootstrap")
        elif not ident:
            out[kk] = IntervalRule("bounds", False, f"K below the resolution rule ({rule}): identification bounds")
        else:
            out[kk] = IntervalRule("bootstrap+margin", True, f"resolved ({rule}): bootstrap widened by the "
                                                             "simulated bias margin")
    return out


def check_interval_args(ci, n_boot, rng, target, interval):
    """Every interval argument checked once, whichever path uses it: ``ci`` a confidence level in (0, 1)
    or ``None``, ``n_boot`` an integer >= 10, ``rng`` a seed or Generator, ``target`` one of
    :data:`~itemsampling._validation.TARGETS`, ``interval`` one of :data:`~.auto.INTERVALS`. Returns them checked."""
    if ci is not None:
        ci = check_open_unit(ci, "ci", "a confidence level", ", e.g. 0.95")
    n_boot = check_int(n_boot, "n_boot", low=10)
    gen = as_rng(rng)
    return ci, n_boot, gen, check_target(target), check_interval(interval)


def metric_range(metric, k, n_items) -> tuple:
    r"""The range :math:`[0, F(1)]` of a metric's value (:math:`F` decreasing in the rank, non-negative)."""
    F = metric_function(canonical_metric(metric), k, int(np.max(n_items)))
    return 0.0, float(np.max(F(np.array([1]))))


def outside_note(estimate, low, high, kind) -> str:
    """The row's note when its point estimate is impossible (:class:`KeptEstimate`)."""
    where = "its identification bounds" if kind == "bounds" else "the metric's range"
    return (f"the point estimate {estimate:.4g} lies outside {where} [{low:.4g}, {high:.4g}]: no rank distribution "
            "the data allow gives it (the estimator's extrapolation); read the interval, not the estimate")


def _margins(method, r, N, n, pools, metrics, ks, params, rng) -> dict:
    """The bias margins of ``method`` at the cut-offs ``ks`` (module docstring): the smooth fits' for one
    sample size and :data:`~.auto.MARGIN_METHODS` (BV with auto's gamma), else the data's MLE fit's."""
    own = {x: v for x, v in params.items() if x not in ("replacement", "grid")}
    if (isinstance(n, int) and method in MARGIN_METHODS and not (pools is not None and method == "cls")
            and (not own or (method == "bv" and own == {"gamma": GAMMA}))):
        out = bias_margins(r, N if pools is None else pools, n, metrics, ks, method, params, rng=rng)
        if len(out) == len(metrics) * len(ks):
            return out
    return design_margins(r, N, n, pools, metrics, ks, method, params, rng=rng)


def apply_interval_policy(estimates, sampled_ranks, n_items, sample_size, k, ci, interval="kept", params=None,
                          rng=None, rules=None) -> dict:
    r"""The policy's intervals (module docstring) for ``estimates`` (``{method: {metric:
    MetricEstimate}}``, each with its bootstrap interval where the rule needs one, NaN elsewhere):
    ``{method: {metric: KeptEstimate}}``. One computation of the identification bounds for every method
    and metric below the rule, one margin simulation per method above it (draws from ``rng``). ``params``: the
    methods' options (``replacement``, ``grid``, ``gamma``, ...; the routed ones of each method)."""
    params = dict(params or {})
    seq = np.ndim(k) > 0
    ks = list(np.atleast_1d(np.asarray(k, dtype=object))) if seq else [k]
    gen = as_rng(rng)
    r, N, n, pools = _prepare(sampled_ranks, n_items, sample_size, {x: params[x] for x in ("replacement",)
                                                                     if x in params})
    metrics = sorted({canonical_metric(m) for per in estimates.values() for m in per})
    rules_of = {meth: (rules if rules is not None else interval_policy(n_items, sample_size, ks, meth, interval))
                for meth in estimates}
    low_ks = [kk for kk in ks if any(rules_of[meth][kk].kind == "bounds" for meth in estimates)]
    margins = {}
    for meth in estimates:
        high = [kk for kk in ks if rules_of[meth][kk].kind == "bootstrap+margin"]
        if high:
            mp = _route(meth, params)
            margins[meth] = _margins(meth, r, N, n, pools, metrics, high, mp, gen)
            missing = [kk for kk in high if any((m, kk) not in margins[meth] for m in metrics)]
            low_ks += [kk for kk in missing if kk not in low_ks]
    need = low_ks
    bnd = {}
    if need:
        b = identification_bounds(r, N if pools is None else pools, n, metrics, need, ci,
                                  params.get("replacement", True), grid=_dense_for_pools(params.get("grid"), pools))
        bnd.update({(m, kk): (float(np.atleast_1d(b.low[m])[j]), float(np.atleast_1d(b.high[m])[j]))
                    for m in metrics for j, kk in enumerate(need)})
    out = {}
    for meth, per in estimates.items():
        out[meth] = {}
        for name, e in per.items():
            m = canonical_metric(name)
            est = np.atleast_1d(np.asarray(e.estimate, float))
            lo, hi = np.atleast_1d(np.asarray(e.low, float)).copy(), np.atleast_1d(np.asarray(e.high, float)).copy()
            kinds, idents, mar, bad = [], [], np.zeros(len(ks)), np.zeros(len(ks), dtype=bool)
            for j, kk in enumerate(ks):
                rule = rules_of[meth][kk]
                kind = rule.kind
                if kind == "bootstrap+margin":
                    b = margins.get(meth, {}).get((m, kk))
                    if b is None:
                        kind = "bounds"  # no margin on these data: the bounds, whose coverage needs none
                    else:
                        lo[j], hi[j], mar[j] = lo[j] - b, hi[j] + b, b
                if kind == "bounds":
                    lo[j], hi[j] = bnd[(m, kk)]
                    bad[j] = not (lo[j] - 1e-9 <= est[j] <= hi[j] + 1e-9)
                lo_m, hi_m = metric_range(m, kk, N)
                bad[j] |= not (lo_m - 1e-9 <= est[j] <= hi_m + 1e-9) or not np.isfinite(est[j])
                kinds.append(kind)
                idents.append(rule.identified)
            conv = (lambda v: np.asarray(v)) if seq else (lambda v: v[0])
            fields = {f.name: getattr(e, f.name) for f in dataclasses.fields(MetricEstimate)}
            fields.update(low=conv(lo) if seq else float(lo[0]), high=conv(hi) if seq else float(hi[0]),
                          identified=np.array(idents) if seq else bool(idents[0]),
                          interval=np.array(kinds, dtype=object) if seq else kinds[0])
            out[meth][name] = KeptEstimate(**fields, margin=conv(mar) if seq else float(mar[0]),
                                           impossible=np.array(bad) if seq else bool(bad[0]))
    return out


def _dense_for_pools(grid, pools):
    """Per-user pools go to the dense estimators (the EM and the bounds work on the distinct
    :math:`(N_u, n_u, r_u)` triples, not on an :math:`N \\times n` kernel) unless a grid is asked for:
    the catalogue-scale grid does not take pools today."""
    return False if pools is not None and grid is None else grid


def difference_interval(row_a: dict, row_b: dict, boot_low, boot_high, ci: float, same_bootstrap: bool = True) -> dict:
    r"""The interval of the difference A - B of two rows (dicts with ``low``, ``high``, ``interval``
    (a kind of :data:`KINDS`) and ``bias_margin``), given the bootstrap interval of the difference
    ``[boot_low, boot_high]`` (ignored where the rule does not use it; ``same_bootstrap``: both rows
    come from one set of replicates). Returns ``{"low", "high", "interval", "level", "decides"}``: the
    rule of the module docstring; ``decides`` whenever the interval excludes 0, except for a plain
    bootstrap of a row that is not ``identified`` (``interval="bootstrap"`` asked for below the rule),
    which does not cover the estimator's bias."""
    kinds = {row_a["interval"], row_b["interval"]}
    if "bounds" in kinds or not same_bootstrap or not (np.isfinite(boot_low) and np.isfinite(boot_high)):
        lo, hi = row_a["low"] - row_b["high"], row_a["high"] - row_b["low"]
        kind, level = ("bounds" if "bounds" in kinds else "intervals"), 1.0 - 2.0 * (1.0 - ci)
    else:
        m = float(row_a.get("bias_margin") or 0.0) + float(row_b.get("bias_margin") or 0.0)
        lo, hi = boot_low - m, boot_high + m
        kind, level = ("bootstrap+margin" if m > 0 else "bootstrap"), ci
    # a plain bootstrap below the rule (interval="bootstrap" on request) does not cover the bias: it never decides
    covers = kind != "bootstrap" or (row_a.get("identified", True) and row_b.get("identified", True))
    return {"low": float(lo), "high": float(hi), "interval": kind, "level": float(level),
            "decides": bool((lo > 0 or hi < 0) and covers)}


def user_sampling_half_widths(sampled_ranks, n_items, sample_size, metrics, ks, ci, test_users, replacement=True,
                              users=None) -> dict:
    r"""The user sampling's half-width :math:`z\,s\sqrt{(1-f)/M}`, :math:`f = M/M_{test}`, per metric (an array
    over ``ks``), :math:`s^2` the users' variance of :math:`F(R_u)` (:func:`~itemsampling.estimators.estimate_metric`, ``test_users``):
    the sample variance with a full ranking, else :math:`\widehat P F^2 - (\widehat P F)^2` under the MLE of
    the ranks on the grid of the largest pool. Simple random sampling of the test users without replacement:
    the finite-population correction of TORS Eq. 45-46, as :mod:`itemsampling.plan` predicts it.

    ``users`` (one id per row, optional): the rows' users. Where a user has several rows (several test
    items), the users, not the rows, are the sampled units, and the metric, the mean over the rows, is a
    ratio of two user totals: :math:`M` and :math:`M_{test}` count users, and :math:`s^2` is the cluster
    sample's :math:`\frac{1}{\bar k^2}\operatorname{Var}_u(T_u - \mu k_u)` (the ratio estimator of a sample of
    clusters of unequal sizes: Cochran 1977, *Sampling Techniques*, Ch. 6 and 9A; :math:`T_u` the user's sum of :math:`F` over its :math:`k_u` rows, :math:`\mu` the mean
    over the rows), which counts the correlation of one user's rows (:func:`_cluster_variance`). Each row
    its own user gives the formula above."""
    r = np.asarray(sampled_ranks, dtype=np.int64).reshape(-1)
    groups = None
    if users is not None:
        ids = np.asarray(users).reshape(-1)
        if ids.size != r.size:
            raise ValueError(f"users must give one id per sampled rank ({r.size}), got {ids.size}")
        _, groups = np.unique(ids, return_inverse=True)
        if groups.max() + 1 == r.size:
            groups = None  # one row per user: the users are the rows
    M = r.size if groups is None else int(groups.max()) + 1
    full = is_full_ranking(n_items, sample_size)
    z = float(stats.norm.ppf(0.5 + ci / 2))
    fpc = (1.0 - M / test_users) / M
    N = int(np.max(n_items))
    P = None
    if not full:
        P = np.asarray(estimate_rank_distribution(r, np.asarray(n_items) if np.ndim(n_items) else N, sample_size,
                                                  "mle", replacement=replacement), dtype=np.float64)
        P = P / P.sum()
    out = {}
    for m in metrics:
        sd = []
        for kk in ks:
            if full:
                F = (metric_function(m, kk, N)(r) if np.ndim(n_items) == 0 or canonical_metric(m) != "auc"
                     else (np.asarray(n_items) - r) / (np.asarray(n_items) - 1.0))  # AUC in each user's pool
                if groups is not None:
                    sd.append(np.sqrt(_cluster_variance(F, np.zeros_like(F), groups)))
                else:
                    sd.append(float(np.std(F, ddof=1)) if M > 1 else 0.0)
            else:
                F = metric_function(m, kk, N)(np.arange(1, P.size + 1))
                if groups is not None:
                    mean, var = _row_posterior_moments(P, F, N, sample_size, r, replacement)
                    sd.append(np.sqrt(_cluster_variance(mean, var, groups)))
                else:
                    sd.append(float(np.sqrt(max(P @ F ** 2 - (P @ F) ** 2, 0.0))))
        out[m] = z * np.asarray(sd) * np.sqrt(fpc)
    return out


def _cluster_variance(mean, var, groups) -> float:
    r""":math:`s^2` of a sample of users whose rows hold :math:`F`'s conditional ``mean`` and ``var`` (0 and
    :math:`F` itself with a full ranking): :math:`\frac{1}{\bar k^2}\bigl[\frac{1}{M-1}\sum_u (E_u - \hat\mu
    k_u)^2 + \frac1M\sum_u V_u\bigr]`, :math:`E_u` and :math:`V_u` the sums over the user's rows, :math:`\hat\mu =
    \sum_u E_u/\sum_u k_u`. By the law of total variance, :math:`\operatorname{Var}(T_u - \mu k_u)` is the
    variance of its conditional mean given the user's sampled ranks plus the mean of its conditional
    variance, which is :math:`V_u` because the rows' global ranks are independent given their sampled ranks
    (each row's decoys are drawn apart). With a full ranking it is the ratio estimator's :math:`s^2` (Cochran
    1977, Ch. 9A)."""
    k = np.bincount(groups).astype(np.float64)
    M = k.size
    if M < 2:
        return 0.0
    E = np.bincount(groups, weights=mean, minlength=M)
    V = np.bincount(groups, weights=var, minlength=M)
    mu = E.sum() / k.sum()
    d = E - mu * k
    return float((d @ d / (M - 1) + V.mean()) / k.mean() ** 2)


def _row_posterior_moments(P, F, N, sample_size, r, replacement, block: int = 2 ** 24):
    r""":math:`\mathbb E[F(R)\mid r_i]` and :math:`\operatorname{Var}[F(R)\mid r_i]` of every row under the
    prior ``P`` over :math:`1..N`: the posterior of :func:`~.conditional.rank_posterior` for the rows'
    distinct :math:`(n_i, r_i)` pairs, in blocks of pairs of at most ``block`` entries."""
    n = np.broadcast_to(np.asarray(sample_size, dtype=np.int64), r.shape)
    pairs, inverse = np.unique(np.stack([n, r]), axis=1, return_inverse=True)
    inverse = np.asarray(inverse).reshape(-1)
    J = pairs.shape[1]
    m1, m2 = np.empty(J), np.empty(J)
    step = max(1, block // N)
    for s in range(0, J, step):
        post = rank_posterior(P, N, pairs[0, s:s + step], pairs[1, s:s + step], replacement)
        m1[s:s + step] = F @ post
        m2[s:s + step] = (F * F) @ post
    mean = m1[inverse]
    return mean, np.maximum(m2[inverse] - mean ** 2, 0.0)


def add_user_sampling(est, low, high, user_half_width):
    """An interval about the evaluated users' metric widened, each side in quadrature, by the user sampling's
    half-width (:func:`user_sampling_half_widths`): ``(low, high)`` about the metric of every test user."""
    est, low, high = (np.asarray(v, dtype=np.float64) for v in (est, low, high))
    return est - np.hypot(est - low, user_half_width), est + np.hypot(high - est, user_half_width)


def widen_bounds(e, user_half_width, metric, ks, n_items):
    """A policy row (:class:`KeptEstimate`) whose identification bounds (kind ``"bounds"``) hold for the
    evaluated users, widened at both ends by the user sampling's half-width and kept in the metric's range:
    bounds about the metric of every test user. Other kinds come back as they are."""
    kinds = np.atleast_1d(np.asarray(e.interval, dtype=object))
    if not np.any(kinds == "bounds"):
        return e
    seq = np.ndim(e.estimate) > 0
    w = np.where(kinds == "bounds", user_half_width, 0.0)
    top = np.array([metric_range(metric, kk, n_items)[1] for kk in ks])
    lo = np.maximum(np.atleast_1d(e.low) - w, 0.0)
    hi = np.minimum(np.atleast_1d(e.high) + w, top)
    return dataclasses.replace(e, low=lo if seq else float(lo[0]), high=hi if seq else float(hi[0]))
