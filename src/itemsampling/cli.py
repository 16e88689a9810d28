r"""Correct one's own sampled evaluation from the command line.

Usage::

    python -m itemsampling estimate ranks.csv --n-items 3706 --sample-size 100 \
        --metric ndcg recall --k 10 20 --ci 0.95 --n-boot 200 --seed 0 [--json]

``FILE`` is a CSV, TSV or Parquet table with a header row and one row per (model, user): the
1-based rank :math:`r_u` of the user's held-out item among the :math:`n` sampled items (the item
itself and :math:`n - 1` decoys). Recognised columns:

=================  =========================================================================
column             meaning
=================  =========================================================================
``rank``           sampled rank :math:`r_u \in 1..n_u` (also ``sampled_rank`` or ``r``); required
``sample_size``    per-user sampled-set size :math:`n_u \in 2..N` (also ``n``), for adaptive
                   sampling (TORS Sec. 6); otherwise give ``--sample-size``
``n_items``        per-user catalogue size :math:`N_u \ge n_u` (also ``pool_size``): the pool the
                   user's target is ranked in (e.g. all items but the user's training items);
                   otherwise give ``--n-items``. Giving both is refused (one source of N).
``model``          the model that produced the rank: several models are estimated and compared
``user``           user id (also ``user_id``): with it, two models scored on the same users are
                   compared by a *paired* user bootstrap
=================  =========================================================================

The command prints, for every model, metric and cut-off, the corrected estimate of the global
metric :math:`T = \frac1M\sum_u F(R_u)` with a user-bootstrap confidence interval
(:func:`itemsampling.estimators.estimate_metric` with ``ci``) beside the uncorrected sampled
metric, and, for every pair of models, the difference with its interval
(:func:`itemsampling.estimators.bootstrap.bootstrap_models`: one set of replicates per model
serves every metric, cut-off and comparison) and a verdict: the models are told
apart only when the interval excludes zero.

The default method is ``mle`` — the global rank distribution learnt by EM, stopped at a relative
change of :math:`10^{-6}` (Jin et al. 2021, Eq. 20-23), read off as
:math:`\widehat T = \sum_R \widehat P(R) F(R)`. In the book's experiments (chapters 6 and 7) the
learnt-distribution estimators are the most accurate family with no tuning parameter, one fit
serves every metric and cut-off, and MLE is the estimator that accepts per-user sample sizes; BV
and CLS with a uniform prior keep a bias that does not shrink with the number of users. The
guide chapter "Correcting your own evaluation" computes the comparison behind this choice.

With ``--weighted``, ``FILE`` is instead a long file of popularity-weighted decoys, one row per
decoy (:func:`itemsampling.inputs.read_weighted_file`), corrected by the ratio curve of Chapter 11
(:func:`itemsampling.estimators.weighted.estimate_metric_weighted`).

Every bad file is refused with a message naming the file, the line (CSV/TSV) or row (Parquet)
and the column; the command never prints a traceback for bad input.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings

import numpy as np

from ._validation import ResolutionWarning, as_rng, check_memory
# the file readers and their error live in itemsampling.inputs (documented there); still importable from here
from .inputs import (  # noqa: F401
    COLUMN_ALIASES, FORMATS, WEIGHTED_COLUMNS, InputError, RankTable, _k_value, k_value, read_rank_file,
    read_weighted_file, read_weighted_table, seed_value,
)
from .kernel import resolves
from .metrics import METRICS, canonical_metric

__all__ = ["DEFAULT_METHOD", "ranks_from_scores", "estimate_table", "format_report", "main"]

#: The method used when ``--method`` is not given (see the module docstring and the guide).
DEFAULT_METHOD = "mle"


def ranks_from_scores(target_scores, decoy_scores, ties: str = "random", rng=None) -> np.ndarray:
    r"""Sampled ranks from a model's scores: the input the command needs, from any framework.

    For user :math:`u` with target score :math:`s_u` and decoy scores :math:`s_{u,1..n-1}`, let
    :math:`g_u` be the number of decoys scoring strictly higher and :math:`e_u` the number scoring
    equal. The sampled rank is :math:`r_u = 1 + g_u + t_u` with :math:`t_u` the tie share:
    ``"random"`` (default) draws :math:`t_u` uniformly from :math:`0..e_u` (a random order of the
    tied items, the convention of :mod:`itemsampling.ranking`), ``"pessimistic"`` takes
    :math:`e_u`, ``"optimistic"`` 0.

    Parameters
    ----------
    target_scores : array of shape (M,)
        The score of each user's held-out item.
    decoy_scores : array of shape (M, n - 1)
        The scores of the user's :math:`n - 1` sampled decoys (higher = recommended first).
    ties : {"random", "pessimistic", "optimistic"}
    rng : seed or numpy Generator, used by ``ties="random"``.

    Returns
    -------
    ndarray of int64, shape (M,), ranks in ``1..n``.
    """
    t = np.asarray(target_scores, dtype=np.float64)
    d = np.asarray(decoy_scores, dtype=np.float64)
    if t.ndim != 1 or t.size == 0:
        raise ValueError(f"target_scores must be a non-empty 1-d array (one score per user), got shape {t.shape}")
    if d.ndim != 2 or d.shape[0] != t.size or d.shape[1] < 1:
        raise ValueError(f"decoy_scores must have shape (M, n - 1) = ({t.size}, >= 1), got {d.shape}")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(d))):
        raise ValueError("target_scores and decoy_scores must not contain NaN or infinite values")
    if ties not in ("random", "pessimistic", "optimistic"):
        raise ValueError(f"ties must be 'random', 'pessimistic' or 'optimistic', got {ties!r}")
    higher = np.count_nonzero(d > t[:, None], axis=1)
    equal = np.count_nonzero(d == t[:, None], axis=1)
    if ties == "pessimistic":
        share = equal
    elif ties == "optimistic":
        share = np.zeros_like(equal)
    else:
        share = np.floor(as_rng(rng).random(t.size) * (equal + 1)).astype(np.int64)
    return (1 + higher + share).astype(np.int64)


# --------------------------------------------------------------------------------------------
# estimating
# --------------------------------------------------------------------------------------------

def _label(metric, k) -> str:
    names = {"recall": "Recall", "ndcg": "NDCG", "ap": "AP", "precision": "Precision", "auc": "AUC"}
    return names[metric] + ("" if k is None else f"@{k}")


def _paired_order(users_a, users_b):
    """Index arrays putting both models' users in one common order, or ``None`` when the two
    models were not scored on the same users (then the comparison is unpaired)."""
    if users_a is None or users_b is None or users_a.size != users_b.size:
        return None
    ia, ib = np.argsort(users_a, kind="stable"), np.argsort(users_b, kind="stable")
    if not np.array_equal(users_a[ia], users_b[ib]):
        return None
    return ia, ib


def estimate_table(table: RankTable, metrics, ks, method: str = DEFAULT_METHOD, ci: float = 0.95,
                   n_boot: int = 200, seed: int = 0, progress=None, target: str = "population", **params) -> dict:
    """Estimates with intervals for every model, metric and cut-off of ``table``, and the pairwise
    model comparisons. Returns a JSON-ready dict (what ``--json`` prints).

    One set of user-bootstrap replicates per model serves every metric, cut-off and comparison
    (:func:`~itemsampling.estimators.bootstrap.bootstrap_models`; models scored on the same users
    are resampled jointly, so their comparisons are paired); the top-K metrics use
    ``numpy.random.default_rng([seed, 0])`` and AUC (when asked for) ``default_rng([seed, 1])``,
    so every number is reproducible from the arguments. ``progress`` is called with one line of
    text before each long step.

    ``target="test-users"`` replaces each estimate's interval by the interval for the test users'
    own metric (:mod:`itemsampling.estimators.conditional`, parametric replicates drawn with
    ``default_rng([seed, 2, g, model index])``); the comparisons stay user-bootstrap intervals.
    """
    # deferred: the estimators load scipy's solvers; `python -m itemsampling run|data` do without them
    from .estimators import METHODS, PER_USER_SIZE_METHODS, POOL_METHODS, estimate_metrics, resolution_note
    from .estimators import bootstrap_models
    from .estimators.conditional import check_target, conditional_metrics

    say = progress or (lambda text: None)
    interval = params.get("interval", "kept")
    if interval not in ("kept", "bootstrap"):
        raise InputError(f"--interval must be kept or bootstrap, got {interval!r}")
    if method != "auto":
        params = {x: v for x, v in params.items() if x != "interval"}
    try:
        check_target(target)
    except ValueError as err:
        raise InputError(f"--{err}") from None
    if target == "test-users" and table.per_user_sizes:
        raise InputError(f"{table.path} has per-user sample sizes (adaptive sampling); --target test-users needs "
                         "one sample size for every user, use --target population")
    if method not in METHODS + ("auto",):
        raise InputError(f"--method must be one of auto, {', '.join(METHODS)}; got {method!r}")
    if method == "auto":  # the candidates the input allows are chosen inside (estimators.auto)
        pass
    elif table.per_user_sizes and method not in PER_USER_SIZE_METHODS:
        raise InputError(f"{table.path} has per-user sample sizes (adaptive sampling); only --method "
                         f"{' or '.join(PER_USER_SIZE_METHODS)} can use them, got {method!r}")
    if table.per_user_pools and method not in POOL_METHODS + ("auto",):
        raise InputError(f"{table.path} has per-user catalogue sizes (n_items column); --method {method!r} needs one "
                         f"--n-items; methods that take per-user sizes: {', '.join(POOL_METHODS)}")
    if table.per_user_pools and params.get("replacement", True) is False:
        raise InputError(f"{table.path} has per-user catalogue sizes (n_items column), which need decoys drawn with "
                         "replacement (the without-replacement kernel depends on each pool); drop --without-replacement "
                         "or give one --n-items")
    pools = dict(table.pools) if table.pools else {m: table.n_items for m in table.models}
    metrics = list(dict.fromkeys(canonical_metric(m) for m in metrics))
    topk = [m for m in metrics if m != "auc"]
    ks = list(dict.fromkeys(ks))
    rows, comparisons, selections = [], [], {}
    N = table.n_items
    groups = ([(topk, ks)] if topk else []) + ([(["auc"], None)] if "auc" in metrics else [])
    users = {m: table.users[m] for m in table.models}
    paired_any = len(table.models) > 1 and all(u is not None for u in users.values())
    t0 = time.perf_counter()
    def resolved_by_any(k):
        return any(resolves(int(np.max(pools[m])), table.sizes[m], k) for m in table.models)

    plan = []
    for g, (group, kk) in enumerate(groups):
        if kk is None or method in ("auto", "sampled") or interval != "kept":
            plan.append((g, group, kk, True))
            continue
        # interval "kept": a cut-off no model resolves gets the identification bounds, so its bootstrap
        # would be thrown away; only the point estimates are computed there (the same numbers)
        boot = [k for k in kk if resolved_by_any(k)]
        low = [k for k in kk if not resolved_by_any(k)]
        plan += ([(g, group, boot, True)] if boot else []) + ([(g, group, low, False)] if low else [])
    for g, group, kk, boot in plan:
        # one set of user resamples per model (jointly for models scored on the same users) serves
        # every metric, cut-off and pairwise comparison of the group (bootstrap_models)
        with warnings.catch_warnings():  # the resolution note is printed once, under the table
            warnings.simplefilter("ignore", ResolutionWarning)
            res = (bootstrap_models(table.ranks, pools, table.sizes, group, kk, method, ci=ci, n_boot=n_boot,
                                    rng=np.random.default_rng([seed, g]), users=users if paired_any else None,
                                    progress=say, **params) if boot else
                   _point_models(table, pools, group, kk, method, params, users if paired_any else None, say))
        for im, model in enumerate(table.models):
            r, n = table.ranks[model], table.sizes[model]
            raw = estimate_metrics(r, N, n, group, kk, ["sampled"])["sampled"]
            if target == "test-users" and boot:
                say(f"      test-users intervals of {model} ({n_boot} parametric replicates)")
                with warnings.catch_warnings():  # the resolution note is printed under the table
                    warnings.simplefilter("ignore", ResolutionWarning)
                    if method != "auto":
                        cond = conditional_metrics(r, pools[model], n, group, kk, [method], ci=ci,
                                                   n_boot=n_boot, rng=np.random.default_rng([seed, 2, g, im]),
                                                   **params)[method]
                    else:  # the estimators auto chose, on the same parametric replicates, per cut-off
                        cond = _auto_conditional(res.estimates[model], r, pools[model], n, group, kk, ci, n_boot,
                                                 np.random.default_rng([seed, 2, g, im]), params)
            for metric in group:
                for j, k in enumerate(kk if kk is not None else [None]):
                    def pick(v, j=j):
                        return float(np.atleast_1d(v)[j])
                    e = res.estimates[model][metric] if target == "population" or not boot else cond[metric]
                    rows.append({"model": model, "metric": metric, "k": k, "label": _label(metric, k),
                                 "estimate": pick(e.estimate), "low": pick(e.low), "high": pick(e.high),
                                 "sampled": pick(raw[metric]), "n_users": int(r.size)})
                    rows[-1]["identified"] = bool(resolves(int(np.max(pools[model])), n, k))
                    rows[-1]["interval"] = "bootstrap"
                    if method == "auto":
                        a = res.estimates[model][metric]
                        rows[-1].update({"chosen": str(np.atleast_1d(a.chosen)[j]),
                                         "reason": a.selection.reason[(metric, k)],
                                         "bias_margin": pick(a.margin),
                                         "interval": str(np.atleast_1d(np.asarray(a.interval, dtype=object))[j]),
                                         "interval_reason": a.selection.intervals[(metric, k)]["why"],
                                         "interval_width": rows[-1]["high"] - rows[-1]["low"]})
            if method == "auto":
                selections.setdefault(model, []).append(res.estimates[model][group[0]].selection.to_dict())
            elif interval == "kept" and method != "sampled":
                _bounds_rows(rows, model, r, pools[model], n, group, kk, ci, params, say)
                if boot:
                    _margin_rows(rows, model, r, pools[model], n, group, kk, method, params,
                                 np.random.default_rng([seed, 3, g, im]), say)
        for (a, b), per_metric in res.comparisons.items():
            for metric in group:
                c = per_metric[metric]
                for t, k in enumerate(kk if kk is not None else [None]):
                    def pick(v, t=t):
                        return float(np.atleast_1d(v)[t])
                    lo, hi, d = pick(c.low), pick(c.high), pick(c.difference)
                    ident = method == "sampled" or all(
                        resolves(int(np.max(pools[x])), table.sizes[x], k) for x in (a, b))
                    # below the rule (kept): the difference's range from the two models' intervals (bounds)
                    bounded = not boot or (interval == "kept" and not ident)
                    if bounded:
                        ra, rb = (next(x for x in rows if x["model"] == mo and x["metric"] == metric and x["k"] == k)
                                  for mo in (a, b))
                        lo, hi = ra["low"] - rb["high"], ra["high"] - rb["low"]
                    apart = (lo > 0 or hi < 0) and ident
                    comparisons.append({
                        "model_a": a, "model_b": b, "metric": metric, "k": k, "label": _label(metric, k),
                        "difference": d, "low": lo, "high": hi,
                        "p_value": None if bounded else pick(c.p_value), "interval": "bounds" if bounded else "bootstrap",
                        "paired": c.paired, "told_apart": bool(apart), "identified": bool(ident),
                        "verdict": ((f"{a} > {b}" if d > 0 else f"{b} > {a}") if apart else
                                    "cannot be told apart" if ident else "not identified (K below the rule)"),
                    })
    order = {m: i for i, m in enumerate(table.models)}  # rows by model, then metric group as before
    korder = {k: i for i, k in enumerate(ks + [None])}
    morder = {m: i for i, m in enumerate(metrics)}
    rows.sort(key=lambda row: (order[row["model"]], morder[row["metric"]], korder[row["k"]]))
    comparisons.sort(key=lambda c: (order[c["model_a"]], order[c["model_b"]], morder[c["metric"]], korder[c["k"]]))
    say(f"      done in {time.perf_counter() - t0:.1f} s")
    return {
        "file": table.path,
        "n_items": N if not table.per_user_pools else "per-user",
        "sample_size": (next(iter(table.sizes.values())) if not table.per_user_sizes else "per-user"),
        "method": method, "parameters": {k: v for k, v in params.items()},
        "confidence": ci, "n_boot": n_boot, "seed": seed, "target": target,
        "models": {m: {"n_users": int(table.ranks[m].size),
                       "sample_size": (s if isinstance(s, int) else {"min": int(s.min()), "max": int(s.max()),
                                                                       "mean": float(s.mean())}),
                       "n_items": (pools[m] if isinstance(pools[m], int) else
                                   {"min": int(pools[m].min()), "max": int(pools[m].max()),
                                    "mean": float(pools[m].mean())})}
                   for m, s in table.sizes.items()},
        "estimates": rows, "comparisons": comparisons,
        **({"selection": selections} if method == "auto" else {}),
        "notes": [note for note in (resolution_note(N, s, ks) for s in table.sizes.values()) if note][:1]
        if topk else [],
    }


# --------------------------------------------------------------------------------------------
# output
# --------------------------------------------------------------------------------------------

def _point_models(table, pools, metrics, ks, method, params, users, say):
    """What :func:`~itemsampling.estimators.bootstrap_models` returns, for cut-offs no model resolves under
    ``interval="kept"``: each model's point estimates (:func:`~itemsampling.estimators.estimate_metrics`),
    the intervals left to the identification bounds (:func:`_bounds_rows`) and the comparisons' differences
    (their ranges from the two models' bounds): no bootstrap, whose intervals would be thrown away."""
    from types import SimpleNamespace

    # deferred: the estimators load scipy's solvers; `python -m itemsampling run|data` do without them
    from .estimators import estimate_metrics
    from .estimators.bootstrap import MetricEstimate

    nan = np.full(len(ks), np.nan)
    estimates = {}
    for model in table.models:
        say(f"      {model}: point estimates at K = {', '.join(map(str, ks))} (below the resolution rule: the "
            "interval is the identification bounds, no bootstrap)")
        est = estimate_metrics(table.ranks[model], pools[model], table.sizes[model], metrics, ks, [method],
                               **params)[method]
        estimates[model] = {m: MetricEstimate(np.asarray(est[m]), nan, nan, float("nan"), 0, method) for m in metrics}
    comparisons = {}
    models = list(table.models)
    for i, a in enumerate(models):
        for b in models[i + 1:]:
            paired = (users is not None and users[a] is not None and users[b] is not None
                      and np.array_equal(np.sort(np.asarray(users[a]).astype(str)),
                                         np.sort(np.asarray(users[b]).astype(str))))  # as bootstrap_models pairs
            comparisons[(a, b)] = {m: SimpleNamespace(difference=estimates[a][m].estimate - estimates[b][m].estimate,
                                                      low=nan, high=nan, p_value=nan, paired=bool(paired))
                                   for m in metrics}
    return SimpleNamespace(estimates=estimates, comparisons=comparisons)


def _bounds_rows(rows, model, r, n_items, n, metrics, ks, ci, params, say) -> None:
    """``interval="kept"`` for one model's rows (:func:`itemsampling.estimators.api._kept`, the same rule):
    every row whose cut-off the rule does not resolve gets the identification bounds as its interval
    (one computation for all its metrics and cut-offs, for either target)."""
    # deferred: the estimators load scipy's solvers; `python -m itemsampling run|data` do without them
    from .estimators import identification_bounds

    low = [k for k in (ks if ks is not None else [None]) if not resolves(int(np.max(n_items)), n, k)]
    if not low:
        return
    say(f"      identification bounds of {model} (K = {', '.join(map(str, low))}: below the resolution rule)")
    b = identification_bounds(r, n_items, n, metrics, low, ci, params.get("replacement", True), grid=params.get("grid"))
    for row in rows:
        if row["model"] == model and row["metric"] in metrics and row["k"] in low:
            j = low.index(row["k"])
            row["low"] = float(np.atleast_1d(b.low[row["metric"]])[j])
            row["high"] = float(np.atleast_1d(b.high[row["metric"]])[j])
            row["interval"] = "bounds"


def _margin_rows(rows, model, r, n_items, n, metrics, ks, method, params, rng, say) -> None:
    """``interval="kept"`` above the rule for one model's rows (:func:`itemsampling.estimators.api._kept`, the
    same rule): each resolved row's bootstrap interval widened at both ends by the method's bias margin
    (:func:`~itemsampling.estimators.auto.bias_margins`; ``interval`` ``"bootstrap+margin"``, the margin in
    ``bias_margin``) where the margin is defined."""
    # deferred: the estimators load scipy's solvers; `python -m itemsampling run|data` do without them
    from .estimators.auto import bias_margins
    from .estimators.estimate import _route

    high = [k for k in (ks if ks is not None else [None]) if resolves(int(np.max(n_items)), n, k)]
    if not high:
        return
    say(f"      bias margin of {model} (K = {', '.join(map(str, high))}: simulated under the smooth fits of P(R))")
    margins = bias_margins(r, n_items, n, metrics, high, method, _route(method, params), rng=rng)
    for row in rows:
        key = (row["metric"], row["k"])
        if row["model"] == model and key in margins and row["interval"] == "bootstrap":
            row["low"] -= margins[key]
            row["high"] += margins[key]
            row["interval"] = "bootstrap+margin"
            row["bias_margin"] = margins[key]


def _auto_conditional(auto, r, n_items, n, metrics, ks, ci, n_boot, rng, params):
    """Test-users intervals for ``method="auto"``: each estimator that auto chose (``auto``, the
    model's ``{metric: AutoEstimate}``) on one set of parametric replicates, read per cut-off and
    widened by the bias margin auto recorded."""
    # deferred: the estimators load scipy's solvers; `python -m itemsampling run|data` do without them
    from .estimators import AutoEstimate
    from .estimators.auto import _params
    from .estimators.conditional import conditional_metrics

    chosen = sorted({str(c) for e in auto.values() for c in np.atleast_1d(e.chosen)})
    seed = int(rng.integers(2 ** 63))
    cond = {c: conditional_metrics(r, n_items, n, metrics, ks, [c], ci=ci, n_boot=n_boot,
                                   rng=np.random.default_rng(seed),
                                   **_params(c, {x: v for x, v in params.items() if x != "interval"}))[c]
            for c in chosen}
    out = {}
    for m, e in auto.items():
        cs = np.atleast_1d(e.chosen)
        mar = np.atleast_1d(e.margin)
        kinds = np.atleast_1d(np.asarray(e.interval, dtype=object))
        # the identification bounds are an interval for both targets (estimators.bounds): kept as they are
        lo = np.array([np.atleast_1d(e.low)[j] if kinds[j] == "bounds" else
                       np.atleast_1d(cond[str(c)][m].low)[j] - mar[j] for j, c in enumerate(cs)])
        hi = np.array([np.atleast_1d(e.high)[j] if kinds[j] == "bounds" else
                       np.atleast_1d(cond[str(c)][m].high)[j] + mar[j] for j, c in enumerate(cs)])
        out[m] = AutoEstimate(e.estimate, lo, hi, ci, n_boot, "auto", identified=e.identified, interval=e.interval,
                              chosen=e.chosen, margin=e.margin, widened=e.widened, selection=e.selection, width=hi - lo)
    return out


def _fmt(v, digits=4):
    return "–" if v is None or not math.isfinite(v) else f"{v:.{digits}f}"


def format_report(result: dict) -> str:
    """The plain-text report: one table of estimates and one of comparisons with verdicts."""
    pct = f"{100 * result['confidence']:g}%"
    n = result["sample_size"]
    N = result["n_items"]
    lines = [f"{result['file']}: " + (f"N = {N:,} items, " if N != "per-user" else
                                      "per-user catalogue sizes N_u (n_items column), ")
             + (f"n = {n} sampled items per user (target included)" if n not in ("per-user", "per-model")
                else "per-user sample sizes (adaptive sampling)" if n == "per-user" else "per-model sample sizes")
             + (", popularity-weighted decoys (ratio-curve correction, chapter 11)" if result.get("weighted") else ""),
             "  " + "; ".join(f"{m}: M = {d['n_users']:,} users" for m, d in result["models"].items()),
             f"method {result['method']}" + (f" {result['parameters']}" if result["parameters"] else "")
             + (f", {pct} user-bootstrap percentile intervals from {result['n_boot']} replicates (seed {result['seed']})"
                + ("; identification bounds where a row is not identified" if any(
                    r.get("interval") == "bounds" for r in result["estimates"]) else "")
                if result.get("target", "population") == "population" else
                f", {pct} intervals for the test users' own metric (parametric bootstrap of the item sampling, "
                f"{result['n_boot']} replicates, seed {result['seed']}); comparisons: user bootstrap"),
             ""]
    weighted = bool(result.get("weighted"))
    header = ["model", "metric", "estimate", f"{pct} interval"] + (["uniform kernel"] if weighted else []) \
        + ["uncorrected", "identified"]
    body = [[r["model"], r["label"], _fmt(r["estimate"]), f"[{_fmt(r['low'])}, {_fmt(r['high'])}]"]
            + ([_fmt(r["uniform"])] if weighted else []) + [_fmt(r["sampled"])]
            + ["yes" if r.get("identified", True) else "not identified"] for r in result["estimates"]]
    lines += _columns(header, body, numeric=(2, 3, 4, 5))
    if not all(r.get("identified", True) for r in result["estimates"]):
        kept = any(r.get("interval") == "bounds" for r in result["estimates"])
        lines += ["", "not identified: the sampled ranks do not determine this metric@K (K below the resolution rule "
                      "K >= 2 N/(n-1)); the estimate is the estimator's prior's, not the data's, and "
                  + ("the interval is the identification bounds: the range of the metric over every rank distribution "
                     "the data allow." if kept else "the interval (--interval bootstrap) does not cover the "
                     "estimator's bias.")]
    if any(r.get("interval") == "bootstrap+margin" for r in result["estimates"]) and result["method"] != "auto":
        lines += ["", "identified rows: the bootstrap interval widened at both ends by the estimator's bias margin, its "
                      "largest simulated bias under the smooth fits of P(R) that the data do not reject (JSON: "
                      "bias_margin; --interval bootstrap drops it)."]
    if result["method"] == "auto":  # one line per model and metric@K: what auto chose and why
        lines += ["", "method auto chose, per model and metric (each candidate's error under the smooth fits of "
                      "P(R) that the data do not reject):"]
        lines += [f"  {r['model']} {r['label']}: {r['reason']}" for r in result["estimates"]]
        if any("interval" in r for r in result["estimates"]):
            lines += ["", "intervals of method auto, per model and metric (bounds: identification bounds, for either "
                          "target; bootstrap+margin: the chosen estimator's interval widened by its bias margin):"]
            lines += [f"  {r['model']} {r['label']}: {r['interval']}, width {_fmt(r['interval_width'])} "
                      f"({r['interval_reason']})" for r in result["estimates"]]
    for note in result.get("notes", []):  # the ResolutionWarning of estimate_metric, under the table
        lines += ["", f"Note: {note}"]
    if result["comparisons"]:
        lines += ["", f"Differences A - B with {pct} intervals "
                      "(paired: the same users resampled jointly; unpaired: resampled independently)"]
        header = ["A", "B", "metric", "A - B", f"{pct} interval", "pairing", "verdict"]
        body = [[c["model_a"], c["model_b"], c["label"], f"{c['difference']:+.4f}",
                 f"[{c['low']:+.4f}, {c['high']:+.4f}]", "paired" if c["paired"] else "unpaired", c["verdict"]]
                for c in result["comparisons"]]
        lines += _columns(header, body, numeric=(3, 4))
        same = sum(not c["told_apart"] and c.get("identified", True) for c in result["comparisons"])
        unknown = sum(not c.get("identified", True) for c in result["comparisons"])
        if unknown:
            bounds = all(c.get("interval") == "bounds" for c in result["comparisons"] if not c.get("identified", True))
            lines += ["", f"{unknown} of {len(result['comparisons'])} comparisons are not identified: K lies below the "
                          "resolution rule for at least one of the two models, so the sampled ranks do not say which "
                          "model is better there whatever the interval; "
                      + ("the interval of such a row is the difference of the two models' intervals (identification "
                         f"bounds), which holds with probability at least {100 * (1 - 2 * (1 - result['confidence'])):g}% "
                         f"(each model's at least {pct})." if bounds else "the interval of such a row (--interval bootstrap) is the bootstrap's, which "
                         "does not cover the estimators' bias.")]
        if same:
            lines += ["", f"{same} of {len(result['comparisons'])} comparisons cannot be told apart: their "
                          f"{pct} interval contains 0, so these data do not say which model is better."]
        if len(result["comparisons"]) > 1:
            lines += ["Each interval is for one comparison; with many comparisons some will exclude 0 by chance."]
        if not all(c["paired"] for c in result["comparisons"]):
            lines += ["Unpaired comparisons ignore that the same users may have scored both models; a 'user' "
                      "column with the same users for both models gives the narrower paired interval."]
    lines += ["", "uncorrected: the sampled metric computed on the n-item lists, for reference "
                  "(not an estimate of the global metric)."]
    if weighted:
        lines += ["uniform kernel: the estimate that ignores the decoys' weights (Chapter 6's MLE on the counts), "
                  "for reference."]
    return "\n".join(lines)


def _columns(header, body, numeric=()):
    """Plain-text table: text columns left-aligned, the columns listed in ``numeric`` right-aligned."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body)]

    def fmt_row(row):
        return "  ".join(str(x).rjust(w) if i in numeric else str(x).ljust(w)
                         for i, (x, w) in enumerate(zip(row, widths))).rstrip()

    return [fmt_row(header), fmt_row(["-" * w for w in widths])] + [fmt_row(r) for r in body]


# --------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------

def _build_parser():
    # deferred: the estimators load scipy's solvers; `python -m itemsampling run|data` do without them
    from .estimators import METHODS

    p = argparse.ArgumentParser(
        prog="python -m itemsampling",
        description="Item-sampling evaluation of recommender systems: correct sampled metrics, rerun "
                    "the book's chapters, fetch datasets.")
    sub = p.add_subparsers(dest="command", metavar="{estimate,plan,run,data}")
    e = sub.add_parser(
        "estimate", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="estimate global metrics, with intervals, from a file of sampled ranks",
        description=(
            "Estimate global top-K metrics, with user-bootstrap confidence intervals, from a file of\n"
            "per-user sampled ranks (CSV, TSV or Parquet with a header row), and tell whether models differ.\n\n"
            "Columns: rank (1-based rank of the held-out item among the n sampled items; required),\n"
            "sample_size (per-user n for adaptive sampling; else give --sample-size), n_items (per-user\n"
            "catalogue size N_u, e.g. all items but the user's training items; else give --n-items), model (several\n"
            "models are estimated and compared), user (same users for two models: paired comparison).\n\n"
            f"Default method: {DEFAULT_METHOD} — the global rank distribution learnt by EM (Jin et al. 2021),\n"
            "the most accurate tuning-free estimator in the book's chapters 6-7, one fit for every metric\n"
            "and cut-off, and the one that accepts per-user sample sizes. BV and CLS with a uniform\n"
            "prior keep a bias that more users do not remove. See the book's guide 'Correcting your own\n"
            "evaluation' for the comparison behind this choice."),
        epilog="example: python -m itemsampling estimate ranks.csv --n-items 3706 --sample-size 100 "
               "--metric ndcg recall --k 10 20")
    e.add_argument("file", help="CSV (.csv), TSV (.tsv) or Parquet (.parquet) file of sampled ranks")
    e.add_argument("--n-items", type=int, default=None, metavar="N",
                   help="catalogue size N (>= 2); omit when the file has a per-user n_items column")
    e.add_argument("--sample-size", type=int, default=None, metavar="n",
                   help="sampled-set size n, target included (n - 1 decoys), 2..N; omit when the file has a "
                        "sample_size column")
    e.add_argument("--metric", nargs="+", default=["ndcg", "recall"], metavar="METRIC",
                   help=f"metrics, any of {', '.join(sorted(METRICS))} (default: ndcg recall)")
    e.add_argument("--k", nargs="+", type=k_value, default=[10], metavar="K",
                   help="cut-offs (default 10); 'none' = untruncated; ignored by auc")
    e.add_argument("--method", default=DEFAULT_METHOD, choices=("auto",) + METHODS, metavar="METHOD",
                   help=f"estimator (default {DEFAULT_METHOD}); auto (chosen per metric@K from the data by "
                        f"simulated error, see the guide) or one of {', '.join(METHODS)}")
    e.add_argument("--gamma", type=float, default=None,
                   help="BV trade-off for methods bv, bv_mle, bv_mes (default 0.1 for them)")
    e.add_argument("--eta", type=float, default=None, help="MES entropy weight for the *mes methods")
    e.add_argument("--without-replacement", action="store_true",
                   help="decoys were drawn without replacement (default: with replacement)")
    e.add_argument("--ci", type=float, default=0.95, help="confidence level of the intervals, in (0, 1) (default 0.95)")
    e.add_argument("--n-boot", type=int, default=200, help="bootstrap replicates (default 200)")
    e.add_argument("--interval", default=None, choices=("kept", "bootstrap"),
                   help="kept (default): where K is below the resolution rule K >= 2 N/(n-1) the row is marked "
                        "'not identified' and its interval is the identification bounds (the range of the metric "
                        "the data allow); above it the bootstrap interval widened by the estimator's bias margin "
                        "(methods mle, mes, cls, bv with gamma 0.1, and auto's choice; the others: the bootstrap). "
                        "bootstrap: the estimator's own bootstrap interval everywhere (it does not cover the "
                        "estimator's bias below the rule)")
    e.add_argument("--target", default="population", choices=("population", "test-users"),
                   help="what the intervals are for: the population the users were drawn from (user bootstrap, "
                        "default) or the test users' own metric (item sampling only)")
    e.add_argument("--seed", type=seed_value, default=0, help="seed of the bootstrap, a non-negative integer (default 0)")
    e.add_argument("--json", action="store_true", help="print the results as JSON instead of tables")
    e.add_argument("--format", choices=("csv", "tsv", "parquet"), default=None,
                   help="file format (default: from the extension)")
    e.add_argument("--rank-column", default=None, help="name of the rank column (default: rank, sampled_rank or r)")
    e.add_argument("--size-column", default=None, help="name of the per-user sample-size column (default: sample_size or n)")
    e.add_argument("--n-items-column", default=None,
                   help="name of the per-user catalogue-size column (default: n_items or pool_size)")
    e.add_argument("--model-column", default=None, help="name of the model column (default: model)")
    e.add_argument("--user-column", default=None, help="name of the user column (default: user or user_id)")
    e.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    e.add_argument("--weighted", action="store_true",
                   help="FILE is a long file of weighted decoys (columns user, prob, above; one row per decoy): "
                        "correct a popularity-sampled evaluation (the book's chapter 11)")
    # deferred: the plan module loads scipy.optimize and the estimators; `run|data` do without them
    from .plan import add_plan_parser

    add_plan_parser(sub)
    sub.add_parser("run", add_help=False, help="rerun a chapter: python -m itemsampling run NOTEBOOK -p NAME VALUE ...")
    sub.add_parser("data", add_help=False, help="datasets: python -m itemsampling data fetch|summary ...")
    return p


def estimate_weighted_table(table, metrics, ks, ci: float = 0.95, n_boot: int = 200, seed: int = 0,
                            design: str = "with_replacement", progress=None, interval: str = "kept") -> dict:
    """Ratio-curve estimates with intervals for every model, metric and cut-off of a
    :class:`~itemsampling.inputs.WeightedTable`, and the pairwise model comparisons, in the JSON
    schema of :func:`estimate_table` (what ``estimate --weighted --json`` prints). The fields of the
    uniform path keep their names; the weighted path adds ``weighted`` (true), ``decoys`` per model
    and ``uniform`` (the uniform-kernel estimate) per estimate row, and the sampling ``design`` in
    ``parameters``.

    User-bootstrap draws (:func:`~itemsampling.estimators.weighted.bootstrap_weights`): models
    scored on the same users share one draw, aligned by user id, so their comparisons are
    *paired*; the first such group of models draws from ``seed`` (so one model's interval is
    ``estimate_metric_weighted(..., rng=seed)``'s), the group whose first model is model ``i``
    from ``numpy.random.default_rng([seed, i])``. Models on other users are compared unpaired
    (independent draws).

    ``interval="kept"`` (default; :func:`~itemsampling.estimators.weighted.estimate_metric_weighted`'s
    rule): a cut-off below the resolution rule gets the identification bounds
    (:func:`~itemsampling.estimators.weighted.weighted_bounds`, either design) as its
    interval, ``identified`` false and ``interval`` ``"bounds"``; a comparison where either model is
    below the rule gets the difference of the two models' bounds and the verdict "not identified".
    No bootstrap runs for a cut-off that no model resolves. ``"bootstrap"``: the bootstrap
    everywhere."""
    # deferred: the estimators load scipy's solvers; `python -m itemsampling run|data` do without them
    from .estimators.bootstrap import bootstrap_p_value, percentile_interval
    from .estimators.weighted import bootstrap_weights, weighted_bounds, weighted_replicates

    say = progress or (lambda text: None)
    metrics = list(dict.fromkeys(canonical_metric(m) for m in metrics))
    ks = list(dict.fromkeys(ks))
    names = list(table.models)
    draws, base = {}, {}
    for i, m in enumerate(names):
        users = table.models[m].users
        key = tuple(sorted(users))
        if key not in base:
            base[key] = (users, bootstrap_weights(users.size, n_boot, seed if not base else np.random.default_rng([seed, i])))
        ref, W = base[key]
        pos = {u: j for j, u in enumerate(ref)}
        draws[m] = (W[:, [pos[u] for u in users]], key)
    rows, reps, comparisons = [], {}, []
    t0 = time.perf_counter()

    def ident(m, k):
        d = table.models[m]
        return bool(resolves(int(np.max(d.pools)), d.probs.shape[1] + 1, k))

    bounded = interval == "kept"
    # cut-offs whose bootstrap some row or comparison needs: resolved for some model, or every cut-off
    boot_ks = {k for k in [None, *ks] if not bounded or any(ident(m, k) for m in names)}
    for m in names:
        d = table.models[m]
        say(f"      {m}: {d.users.size:,} users, {d.probs.shape[1]} decoys each ({n_boot} bootstrap replicates"
            + (", identification bounds below the rule)" if bounded else ")"))
        for metric in metrics:
            kk = [None] if metric == "auc" else ks
            kb = [k for k in kk if k in boot_ks]
            est = weighted_replicates(d.probs, d.above, d.pools, metric, kk, None, "ratio", design)[0]
            boot = {}
            if kb:
                _, rep = weighted_replicates(d.probs, d.above, d.pools, metric, kb, draws[m][0], "ratio", design)
                lo_b, hi_b = percentile_interval(rep, ci, axis=0)
                boot = {k: (rep[:, j], float(lo_b[j]), float(hi_b[j])) for j, k in enumerate(kb)}
            below = [k for k in kk if bounded and not ident(m, k)]
            bnd = {}
            if below:
                b = weighted_bounds(d.probs, d.above, d.pools, metric, below, ci, design=design)
                bnd = {k: (float(b.low[metric][j]), float(b.high[metric][j])) for j, k in enumerate(below)}
            uni = weighted_replicates(d.probs, d.above, d.pools, metric, kk, None, "uniform", design)[0]
            raw = weighted_replicates(d.probs, d.above, d.pools, metric, kk, None, "sampled", design)[0]
            for j, k in enumerate(kk):
                lo, hi = bnd[k] if k in bnd else boot[k][1:]
                reps[m, metric, k] = (float(est[j]), boot[k][0] if k in boot else None, (lo, hi))
                rows.append({"model": m, "metric": metric, "k": k, "label": _label(metric, k),
                             "estimate": float(est[j]), "low": lo, "high": hi,
                             "sampled": float(raw[j]), "n_users": int(d.users.size), "uniform": float(uni[j]),
                             "identified": ident(m, k), "interval": "bounds" if k in bnd else "bootstrap"})
    for ia, a in enumerate(names):
        for b in names[ia + 1:]:
            paired = draws[a][1] == draws[b][1]
            for metric in metrics:
                for k in ([None] if metric == "auc" else ks):
                    (ea, ra, ba), (eb, rb, bb) = reps[a, metric, k], reps[b, metric, k]
                    diff = ea - eb
                    both = ident(a, k) and ident(b, k)
                    if bounded and not both:  # the difference of the two models' intervals
                        (la, ha), (lb, hb) = ba, bb
                        lo, hi, pv, kind = float(la - hb), float(ha - lb), None, "bounds"
                    else:
                        lo, hi = (float(x) for x in percentile_interval(ra - rb, ci))
                        pv, kind = bootstrap_p_value(ra - rb), "bootstrap"
                    apart = (lo > 0 or hi < 0) and both
                    comparisons.append({
                        "model_a": a, "model_b": b, "metric": metric, "k": k, "label": _label(metric, k),
                        "difference": diff, "low": lo, "high": hi, "p_value": pv,
                        "paired": bool(paired), "told_apart": bool(apart), "identified": bool(both),
                        "interval": kind,
                        "verdict": ((f"{a} > {b}" if diff > 0 else f"{b} > {a}") if apart else
                                    "cannot be told apart" if both else "not identified (K below the rule)"),
                    })
    say(f"      done in {time.perf_counter() - t0:.1f} s")
    sizes = {m: int(d.probs.shape[1]) + 1 for m, d in table.models.items()}

    def pool_summary(pools):
        return pools if isinstance(pools, int) else {"min": int(pools.min()), "max": int(pools.max()),
                                                     "mean": float(pools.mean())}

    return {
        "file": table.path,
        "n_items": table.n_items if not table.per_user_pools else "per-user",
        "sample_size": next(iter(sizes.values())) if len(set(sizes.values())) == 1 else "per-model",
        "method": "ratio", "parameters": {"design": design},
        "confidence": ci, "n_boot": n_boot, "seed": seed, "target": "population",
        "models": {m: {"n_users": int(d.users.size), "sample_size": sizes[m], "n_items": pool_summary(d.pools),
                       "decoys": sizes[m] - 1} for m, d in table.models.items()},
        "estimates": rows, "comparisons": comparisons, "notes": [], "weighted": True,
    }


def estimate_weighted_file(args) -> int:
    """``python -m itemsampling estimate FILE --weighted``: read FILE
    (:func:`~itemsampling.inputs.read_weighted_table`) and print, for every model, metric and
    cut-off, the ratio-curve estimate with its bootstrap interval beside the uniform-kernel
    estimate and the uncorrected sampled metric, and the pairwise comparisons of the models (the
    report of the uniform path, or its JSON schema: :func:`estimate_weighted_table`)."""
    unused = [flag for flag, v in (("--sample-size", args.sample_size), ("--gamma", args.gamma), ("--eta", args.eta),
                                   ("--rank-column", args.rank_column), ("--size-column", args.size_column),
                                   ("--model-column", args.model_column), ("--user-column", args.user_column),
                                   ("--n-items-column", args.n_items_column))
              if v is not None]
    if args.method != "mle":
        unused.append("--method")
    if unused:
        raise InputError(f"{', '.join(unused)} not used with --weighted (the file gives the decoys and their "
                         "probabilities in the columns user, prob, above, model, n_items; the method is the "
                         "ratio-curve correction)")
    table = read_weighted_table(args.file, args.n_items, args.format)
    for m, d in table.models.items():
        smallest = d.pools if isinstance(d.pools, int) else int(d.pools.min())
        if args.without_replacement and smallest < d.probs.shape[1] + 1:
            raise InputError(("--n-items" if isinstance(d.pools, int) else f"{table.path}, column 'n_items'")
                             + f" must be at least the number of decoys + 1 = {d.probs.shape[1] + 1}"
                             + (f" (model {m!r})" if len(table.models) > 1 else "") + f", got {smallest}")
    _check_boot_memory(args.n_boot, max(d.probs.size for d in table.models.values()))
    progress = None if args.quiet else (lambda text: print(text, file=sys.stderr, flush=True))
    result = estimate_weighted_table(table, args.metric, args.k, args.ci, args.n_boot, args.seed,
                                     "successive" if args.without_replacement else "with_replacement", progress,
                                     interval=args.interval or "kept")
    _print(json.dumps(result, indent=1) if args.json else format_report(result))
    return 0


def _estimate(args) -> int:
    if not 0 < args.ci < 1:
        raise InputError(f"--ci must be a confidence level in (0, 1), e.g. 0.95; got {args.ci}")
    if args.n_boot < 2:
        raise InputError(f"--n-boot must be an integer >= 2, got {args.n_boot}")
    if args.weighted and args.target != "population":
        raise InputError("--target test-users is not available with --weighted (popularity-weighted decoys)")
    if args.weighted:
        return estimate_weighted_file(args)
    params = {}
    if args.method in ("bv", "bv_mle", "bv_mes"):
        params["gamma"] = 0.1 if args.gamma is None else args.gamma
    elif args.gamma is not None:
        raise InputError(f"--gamma is used by methods bv, bv_mle and bv_mes, not by {args.method!r}")
    if args.eta is not None:
        if not args.method.endswith("mes"):
            raise InputError(f"--eta is used by the MES methods (mes, bv_mes, mn_mes, mnw_mes), not by {args.method!r}")
        if not (math.isfinite(args.eta) and args.eta > 0):
            raise InputError(f"--eta must be a positive number, got {args.eta}")
        params["eta"] = args.eta
    if args.without_replacement:
        params["replacement"] = False
    if args.interval is not None:
        params["interval"] = args.interval
    table = read_rank_file(args.file, args.n_items, args.sample_size, fmt=args.format,
                           rank_column=args.rank_column, size_column=args.size_column,
                           model_column=args.model_column, user_column=args.user_column,
                           n_items_column=args.n_items_column)
    _check_boot_memory(args.n_boot, sum(r.size for r in table.ranks.values()))
    progress = None if args.quiet else (lambda text: print(text, file=sys.stderr, flush=True))
    result = estimate_table(table, args.metric, args.k, args.method, args.ci, args.n_boot, args.seed,
                            progress=progress, target=args.target, **params)
    _print(json.dumps(result, indent=1) if args.json else format_report(result))
    return 0


def _check_boot_memory(n_boot: int, n_users: int) -> None:
    """Refuse, before drawing, a bootstrap whose draws (``n_boot`` rows of one count per user, as
    integers and as floats, and a copy) do not fit in memory, naming ``--n-boot``."""
    check_memory(3 * 8.0 * n_boot * max(1, n_users), f"{n_boot:,} bootstrap replicates of {n_users:,} users",
                 "--n-boot")


def _print(text: str) -> None:
    print(text)
    sys.stdout.flush()  # a closed pipe (| head -0) is raised here, where main reports it


def main(argv=None) -> int:
    """Entry point of ``python -m itemsampling``; returns the exit status (0 ok, 2 bad input)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "run":
        # deferred: the chapter runner loads yaml, jupytext and papermill, which `estimate` does without
        from .run import main as run_main

        return run_main(argv[1:])
    if argv and argv[0] == "data":
        import runpy

        old = sys.argv
        sys.argv = ["python -m itemsampling.data"] + argv[1:]
        try:
            runpy.run_module("itemsampling.data", run_name="__main__", alter_sys=False)
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            sys.argv = old
        return 0
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        if args.command == "plan":
            # deferred: the plan module loads scipy.optimize and the estimators
            from .plan import plan_command

            return plan_command(args)
        return _estimate(args)
    except ValueError as exc:  # InputError and the package's own argument checks
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader of the output went away (`| head -0`): nothing more can reach it; point stdout at
        # /dev/null so that Python's exit does not report the same broken pipe again
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print("error: standard output was closed before the report was written (broken pipe)", file=sys.stderr)
        return 2
    except OSError as exc:  # a file that cannot be opened, a name longer than the system allows
        what = exc.filename if exc.filename is not None else getattr(args, "file", getattr(args, "pilot", ""))
        print(f"error: {what}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except MemoryError:
        print("error: out of memory: reduce --n-boot (bootstrap replicates), or estimate fewer users, models, "
              "metrics or cut-offs at once", file=sys.stderr)
        return 2
