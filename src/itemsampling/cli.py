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

from ._validation import TARGETS, ResolutionWarning, as_rng, check_memory
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


def _comparison_row(a, b, metric, k, diff, d, p_value, why, paired, identified, ci) -> dict:
    """One comparison of the report (both paths, uniform and weighted decoys): the difference ``d`` of
    :func:`~itemsampling.estimators.difference_interval`, its p-value or ``why`` there is none, and the verdict
    (an order when the interval excludes 0, at its level when that is not ``ci``)."""
    lev = f"{100 * d['level']:g}%"
    return {
        "model_a": a, "model_b": b, "metric": metric, "k": k, "label": _label(metric, k),
        "difference": diff, "low": d["low"], "high": d["high"],
        "p_value": p_value if why is None else None, **({"p_value_reason": why} if why else {}),
        "interval": d["interval"], "level": d["level"],
        "paired": bool(paired), "told_apart": d["decides"], "identified": bool(identified),
        "verdict": ((f"{a} > {b}" if d["low"] > 0 else f"{b} > {a}")
                    + ("" if d["level"] == ci else f" (at {lev})") if d["decides"] else
                    "cannot be told apart" if identified else "not identified (K below the rule)"),
    }


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

    Every row's interval is the one interval policy's (:func:`itemsampling.estimators.interval_policy`,
    applied by :func:`~itemsampling.estimators.apply_interval_policy`, the rule
    :func:`~itemsampling.estimators.estimate_metrics` uses too): a model whose table is a full ranking
    (``sample_size == n_items`` for every user) gets the plain mean over users with the user bootstrap;
    a cut-off below the resolution rule the identification bounds; above it the bootstrap widened by
    the estimator's simulated bias margin (adaptive sampling included); ``interval="bootstrap"`` the
    bootstrap everywhere. Each comparison's interval is
    :func:`~itemsampling.estimators.difference_interval`'s, and a difference whose interval excludes 0
    decides the order, at the comparison's ``level``.

    One set of user-bootstrap replicates per model serves every metric, cut-off and comparison
    (:func:`~itemsampling.estimators.bootstrap.bootstrap_models`; models scored on the same users
    are resampled jointly, so their comparisons are paired); the top-K metrics use
    ``numpy.random.default_rng([seed, 0])`` and AUC (when asked for) ``default_rng([seed, 1])``, the
    margins ``default_rng([seed, 3, g, model index])``, so every number is reproducible from the
    arguments. ``progress`` is called with one line of text before each long step.

    ``target="test-users"`` replaces each estimate's bootstrap by the interval for the test users'
    own metric (:mod:`itemsampling.estimators.conditional`, parametric replicates drawn with
    ``default_rng([seed, 2, g, model index])``), under the same policy; the comparisons stay
    user-bootstrap intervals. A model whose users were sampled from more test users (the ``test_users``
    column that ``sampled_ranks(..., n_users=...)`` writes) gets intervals for all of them: the user
    sampling's error is added (:func:`~itemsampling.estimators.user_sampling_half_widths`), and its
    ``models`` entry in the result says ``test_users``.
    """
    # deferred: the estimators load scipy's solvers; `python -m itemsampling run|data` do without them
    from .estimators import METHODS, PER_USER_SIZE_METHODS, POOL_METHODS, estimate_metrics, resolution_note
    from .estimators import (add_user_sampling, apply_interval_policy, bootstrap_models, difference_interval,
                             interval_policy, is_full_ranking, outside_note, widen_bounds)
    # deferred: as above (the estimators' solvers)
    from .estimators.bootstrap import MetricEstimate
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
    if method not in METHODS + ("auto",):
        raise InputError(f"--method must be one of auto, {', '.join(METHODS)}; got {method!r}")
    pools = dict(table.pools) if table.pools else {m: table.n_items for m in table.models}
    full = {m: is_full_ranking(pools[m], table.sizes[m]) for m in table.models}
    sampled_models = [m for m in table.models if not full[m]]
    sizes_vary = any(not isinstance(table.sizes[m], int) for m in sampled_models)
    pools_vary = any(not isinstance(pools[m], int) for m in sampled_models)
    if method != "auto" and sizes_vary and method not in PER_USER_SIZE_METHODS:
        raise InputError(f"{table.path} has per-user sample sizes (adaptive sampling); only --method "
                         f"{' or '.join(PER_USER_SIZE_METHODS)} can use them, got {method!r}")
    if pools_vary and method not in POOL_METHODS + ("auto",):
        raise InputError(f"{table.path} has per-user catalogue sizes (n_items column); --method {method!r} needs one "
                         f"--n-items; methods that take per-user sizes: {', '.join(POOL_METHODS)}")
    laws = {v for v in (getattr(table, "replacement", None) or {}).values() if v is not None}
    if len(laws) > 1:
        raise InputError(f"{table.path}: column 'replacement' says some models' decoys were drawn with replacement "
                         "and others' without; one run reads one kernel, so estimate them in two runs")
    if laws == {False}:  # the file says how its decoys were drawn (sampled_ranks' column for given decoys)
        params = {**params, "replacement": False}
    elif laws == {True} and params.get("replacement", True) is False:
        raise InputError(f"{table.path}: column 'replacement' says the decoys were drawn with replacement, but "
                         "--without-replacement was given; drop one of the two")
    if pools_vary and params.get("replacement", True) is False:
        raise InputError(f"{table.path} has per-user catalogue sizes (n_items column), which need decoys drawn with "
                         "replacement (the without-replacement kernel depends on each pool); drop --without-replacement "
                         "or give one --n-items")
    shown = dict(params)  # the parameters the report prints: the command's own options only
    if table.per_user_pools and "grid" not in params:
        params["grid"] = False  # per-user pools: the dense estimators on the distinct (N_u, n_u, r_u) triples
    metrics = list(dict.fromkeys(canonical_metric(m) for m in metrics))
    topk = [m for m in metrics if m != "auc"]
    ks = list(dict.fromkeys(ks))
    rows, comparisons, selections = [], [], {}
    N = table.n_items
    groups = ([(topk, ks)] if topk else []) + ([(["auc"], None)] if "auc" in metrics else [])
    users = {m: table.users[m] for m in table.models}
    paired_any = len(table.models) > 1 and all(u is not None for u in users.values())
    # the two bootstraps: the models ranked in full (their plain mean) and the sampled ones (the estimator)
    parts = [(mods, meth) for mods, meth in ((sampled_models, method), ([m for m in table.models if full[m]],
                                                                          "sampled")) if mods]
    part_of = {m: i for i, (mods, _) in enumerate(parts) for m in mods}
    t0 = time.perf_counter()
    for g, (group, kk) in enumerate(groups):
        kl = kk if kk is not None else [None]
        rules = {m: interval_policy(pools[m], table.sizes[m], kl, "sampled" if full[m] else method, interval)
                 for m in table.models}
        results = []
        for mods, meth in parts:
            boot_ks = [k for k in kl if method == "auto" and meth == method or any(rules[m][k].needs_bootstrap
                                                                                 for m in mods)]
            sub = _sub_table(table, mods)
            with warnings.catch_warnings():  # the resolution note is printed once, under the table
                warnings.simplefilter("ignore", ResolutionWarning)
                kw = dict(params) if meth != "sampled" else {}
                res_b = (bootstrap_models(sub.ranks, {m: pools[m] for m in mods}, sub.sizes, group,
                                          boot_ks if kk is not None else None, meth, ci=ci, n_boot=n_boot,
                                          rng=np.random.default_rng([seed, g]),
                                          users={m: users[m] for m in mods} if paired_any else None,
                                          progress=say, **kw) if boot_ks else None)
                low_ks = [k for k in kl if k not in boot_ks]
                points = (_point_models(sub, pools, group, low_ks, meth, kw, say)
                          if low_ks and (method != "auto" or meth != method) else {})
            results.append((boot_ks, res_b, points))
        for im, model in enumerate(table.models):
            r, n = table.ranks[model], table.sizes[model]
            boot_ks, res_b, points = results[part_of[model]]
            meth = parts[part_of[model]][1]
            raw = estimate_metrics(r, pools[model], n, group, kk, ["sampled"], grid=False)["sampled"]
            if method == "auto" and meth == method:  # auto's own intervals (estimators.auto)
                est = res_b.estimates[model]
            else:
                cond = None
                if target == "test-users" and boot_ks and not full[model]:
                    say(f"      test-users intervals of {model} ({n_boot} parametric replicates)")
                    with warnings.catch_warnings():  # the resolution note is printed under the table
                        warnings.simplefilter("ignore", ResolutionWarning)
                        cond = conditional_metrics(r, pools[model], n, group, boot_ks, [method], ci=ci,
                                                   n_boot=n_boot, rng=np.random.default_rng([seed, 2, g, im]),
                                                   **params)[method]
                user_part = _user_part(table, model, r, pools[model], n, group, kl, ci, target, params)
                est = {}
                for metric in group:
                    e = np.array([float(np.atleast_1d(res_b.estimates[model][metric].estimate)[boot_ks.index(k)])
                                  if k in boot_ks else float(np.atleast_1d(points[model][metric])[
                                      [x for x in kl if x not in boot_ks].index(k)]) for k in kl])
                    lo, hi = np.full(len(kl), np.nan), np.full(len(kl), np.nan)
                    if target == "test-users" and full[model]:
                        lo, hi = e.copy(), e.copy()  # the test users' own metric is known exactly
                    elif boot_ks:
                        b = cond[metric] if cond is not None else res_b.estimates[model][metric]
                        for jb, k in enumerate(boot_ks):
                            lo[kl.index(k)] = np.atleast_1d(b.low)[jb]
                            hi[kl.index(k)] = np.atleast_1d(b.high)[jb]
                    if user_part is not None:  # a user sample: the interval for every test user
                        lo, hi = add_user_sampling(e, lo, hi, user_part[metric])
                    est[metric] = MetricEstimate(e, lo, hi, ci, n_boot, meth)
                if any(rules[model][k].kind in ("bounds", "bootstrap+margin") for k in kl):
                    say(f"      intervals of {model}: identification bounds below the rule, simulated bias margins "
                        "above it")
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ResolutionWarning)
                    est = apply_interval_policy({meth: est}, r, pools[model], n, kl, ci, interval, params,
                                                np.random.default_rng([seed, 3, g, im]), rules=rules[model])[meth]
                if user_part is not None:
                    est = {metric: widen_bounds(e, user_part[metric], metric, kl, pools[model])
                           for metric, e in est.items()}
            for metric in group:
                for j, k in enumerate(kl):
                    def pick(v, j=j):
                        return float(np.atleast_1d(v)[j])
                    e = est[metric]
                    kind = str(np.atleast_1d(np.asarray(e.interval, dtype=object))[j])
                    row = {"model": model, "metric": metric, "k": k, "label": _label(metric, k),
                           "estimate": pick(e.estimate), "low": pick(e.low), "high": pick(e.high),
                           "sampled": pick(raw[metric]), "n_users": int(r.size),
                           "identified": bool(np.atleast_1d(e.identified)[j]), "interval": kind,
                           "design": "full" if full[model] else "adaptive" if not isinstance(n, int) else "fixed"}
                    if method == "auto" and meth == method:
                        row.update({"chosen": str(np.atleast_1d(e.chosen)[j]),
                                    "reason": e.selection.reason[(metric, k)],
                                    "bias_margin": pick(e.margin),
                                    "interval_reason": e.selection.intervals[(metric, k)]["why"]})
                    else:
                        row["bias_margin"] = pick(e.margin)
                        if bool(np.atleast_1d(e.impossible)[j]):
                            row["impossible"] = True
                            row["note"] = outside_note(row["estimate"], row["low"], row["high"], kind)
                    row["interval_width"] = row["high"] - row["low"]
                    rows.append(row)
            if method == "auto" and meth == method:
                selections.setdefault(model, []).append(est[group[0]].selection.to_dict())
        by = {(x["model"], x["metric"], x["k"]): x for x in rows}
        models = list(table.models)
        for ia, a in enumerate(models):
            for b in models[ia + 1:]:
                same = part_of[a] == part_of[b]
                boot_ks, res_b, points = results[part_of[a]]
                for metric in group:
                    for k in kl:
                        ra, rb = by[(a, metric, k)], by[(b, metric, k)]
                        lo_b = hi_b = pv = float("nan")
                        paired = False
                        if same and res_b is not None and k in boot_ks:
                            c = res_b.comparisons[(a, b)][metric]
                            jb = boot_ks.index(k)
                            lo_b, hi_b = float(np.atleast_1d(c.low)[jb]), float(np.atleast_1d(c.high)[jb])
                            pv = float(np.atleast_1d(c.p_value)[jb])
                            paired = bool(c.paired)
                        elif same and paired_any:
                            paired = bool(_paired_order(users[a], users[b]) is not None)
                        d = difference_interval(ra, rb, lo_b, hi_b, ci, same_bootstrap=same)
                        ident = ra["identified"] and rb["identified"]
                        diff = ra["estimate"] - rb["estimate"]
                        why = (None if d["interval"] == "bootstrap" else
                               "the interval includes the two models' bias margins, which the bootstrap p-value does "
                               "not" if d["interval"] == "bootstrap+margin" else
                               "the interval is the difference of the two models' intervals (Bonferroni), which "
                               "gives a level, not a p-value")
                        comparisons.append(_comparison_row(a, b, metric, k, diff, d, pv, why, paired, ident, ci))
    order = {m: i for i, m in enumerate(table.models)}  # rows by model, then metric group as before
    korder = {k: i for i, k in enumerate(ks + [None])}
    morder = {m: i for i, m in enumerate(metrics)}
    rows.sort(key=lambda row: (order[row["model"]], morder[row["metric"]], korder[row["k"]]))
    comparisons.sort(key=lambda c: (order[c["model_a"]], order[c["model_b"]], morder[c["metric"]], korder[c["k"]]))
    say(f"      done in {time.perf_counter() - t0:.1f} s")
    designs = {"full" if full[m] else "adaptive" if not isinstance(table.sizes[m], int) else "fixed"
               for m in table.models}
    return {
        "file": table.path,
        "n_items": N if not table.per_user_pools else "per-user",
        "sample_size": (next(iter(table.sizes.values())) if not table.per_user_sizes else "per-user"),
        "method": method, "parameters": shown,
        "design": (designs.pop() if len(designs) == 1 else "mixed"),
        "confidence": ci, "n_boot": n_boot, "seed": seed, "target": target,
        "models": {m: {"n_users": int(table.ranks[m].size),
                       **({"test_users": table.test_users[m]} if target == "test-users"
                          and getattr(table, "test_users", {}).get(m) is not None else {}),
                       "sample_size": (s if isinstance(s, int) else {"min": int(s.min()), "max": int(s.max()),
                                                                       "mean": float(s.mean())}),
                       "n_items": (pools[m] if isinstance(pools[m], int) else
                                   {"min": int(pools[m].min()), "max": int(pools[m].max()),
                                    "mean": float(pools[m].mean())})}
                   for m, s in table.sizes.items()},
        "estimates": rows, "comparisons": comparisons,
        **({"selection": selections} if method == "auto" else {}),
        "notes": [note.replace("interval='bootstrap'", "--interval bootstrap")  # the command's own option
                  for note in (resolution_note(pools[m], table.sizes[m], ks) for m in sampled_models) if note][:1]
        if topk and method != "sampled" else [],
    }


# --------------------------------------------------------------------------------------------
# output
# --------------------------------------------------------------------------------------------

def _user_part(table, model, r, pools, n, metrics, ks, ci, target, params):
    """With ``--target test-users`` and a model whose users were sampled from more test users (the table's
    ``test_users`` column): the user sampling's half-widths per metric
    (:func:`~itemsampling.estimators.user_sampling_half_widths`), else ``None``. The sampled units are the
    users (distinct ids): with several rows per user, the half-width is the cluster sample's, which counts
    the correlation of one user's rows."""
    total = getattr(table, "test_users", {}).get(model)
    if target != "test-users" or total is None:
        return None
    users = table.users[model]
    distinct = np.unique(users).size if users is not None else r.size
    if total <= distinct:
        return None
    # deferred: the estimators load scipy's solvers; `python -m itemsampling run|data` do without them
    from .estimators import user_sampling_half_widths

    return user_sampling_half_widths(r, pools, n, metrics, ks, ci, total, params.get("replacement", True),
                                     users=users)


def _sub_table(table, models):
    """The part of ``table`` that holds ``models`` (the full rankings and the sampled models are
    bootstrapped apart: their estimators differ)."""
    return RankTable(table.path, table.n_items, {m: table.ranks[m] for m in models},
                     {m: table.sizes[m] for m in models}, {m: table.users[m] for m in models},
                     {m: table.pools[m] for m in models} if table.pools else {})


def _point_models(table, pools, metrics, ks, method, params, say):
    """Each model's point estimates ``{model: {metric: array over ks}}`` at cut-offs whose interval
    needs no bootstrap (the identification bounds below the rule): no bootstrap, whose intervals
    would be thrown away."""
    # deferred: the estimators load scipy's solvers; `python -m itemsampling run|data` do without them
    from .estimators import estimate_metrics

    out = {}
    for model in table.models:
        say(f"      {model}: point estimates at K = {', '.join(map(str, ks))} (below the resolution rule: the "
            "interval is the identification bounds, no bootstrap)")
        out[model] = estimate_metrics(table.ranks[model], pools[model], table.sizes[model], metrics, ks, [method],
                                      **params)[method]
    return out


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


def _parameters_text(parameters) -> str:
    """A method's parameters in words for the report's header: ``gamma = 0.05, eta = 0.01``."""
    if not isinstance(parameters, dict):
        return str(parameters)
    return ", ".join(f"{k} = {v:g}" if isinstance(v, float) else f"{k} = {v}" for k, v in parameters.items())


def format_report(result: dict) -> str:
    """The plain-text report: one table of estimates and one of comparisons with verdicts."""
    pct = f"{100 * result['confidence']:g}%"
    n = result["sample_size"]
    N = result["n_items"]
    design = result.get("design")
    full = design == "full"
    size_text = ("full ranking: every item of each user's pool ranked (sample_size = n_items), the exact metric"
                 if full else
                 f"n = {n} sampled items per user (target included)" if n not in ("per-user", "per-model")
                 else "per-user sample sizes (adaptive sampling)" if design == "adaptive" else
                 "per-user sample sizes" if n == "per-user" else "per-model sample sizes")
    method_text = ("plain mean over users (full ranking; --method not used)" if full else
                   f"method {result['method']}" + (f" ({_parameters_text(result['parameters'])})"
                                                    if result["parameters"] else ""))
    kinds = {r.get("interval") for r in result["estimates"]}
    lines = [f"{result['file']}: " + (f"N = {N:,} items, " if N != "per-user" else
                                      "per-user catalogue sizes N_u (n_items column), ")
             + size_text
             + (", popularity-weighted decoys (ratio-curve correction, chapter 11)" if result.get("weighted") else ""),
             "  " + "; ".join(f"{m}: M = {d['n_users']:,} users" + (f" sampled from {d['test_users']:,} test users "
                                                                      "(intervals for all of them)"
                                                                      if d.get("test_users") else "")
                              for m, d in result["models"].items()),
             method_text
             + (f", {pct} user-bootstrap percentile intervals from {result['n_boot']} replicates (seed {result['seed']})"
                + ("; widened by the estimator's bias margin where identified" if "bootstrap+margin" in kinds else "")
                + ("; identification bounds where a row is not identified" if "bounds" in kinds else "")
                if result.get("target", "population") == "population" else
                f", {pct} intervals for the test users' own metric (parametric bootstrap of the item sampling, "
                f"{result['n_boot']} replicates, seed {result['seed']}); comparisons: user bootstrap"),
             ""]
    weighted = bool(result.get("weighted"))
    header = ["model", "metric", "estimate", f"{pct} interval"] + (["uniform kernel"] if weighted else []) \
        + ["uncorrected", "identified"]
    body = [[r["model"], r["label"], _fmt(r["estimate"]), f"[{_fmt(r['low'])}, {_fmt(r['high'])}]"]
            + ([_fmt(r["uniform"])] if weighted else []) + [_fmt(r["sampled"])]
            + [("yes" if r.get("identified", True) else "not identified") + (" (!)" if r.get("impossible") else "")]
            for r in result["estimates"]]
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
                      "simulated bias (one sample size: the largest under the smooth fits of P(R) that the data do not "
                      "reject; adaptive sampling: under the data's own fit, with the data's design) (JSON: "
                      "bias_margin; --interval bootstrap drops it)."]
    if any(r.get("interval") == "bounds" and r.get("identified", True) for r in result["estimates"]):
        lines += ["", "identified rows with the identification bounds: no bias margin could be simulated for the "
                      "method on these data, and the bounds need none."]
    for r in result["estimates"]:
        if r.get("impossible"):
            lines += [f"(!) {r['model']} {r['label']}: {r['note']}."]
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
        levels = sorted({c.get("level", result["confidence"]) for c in result["comparisons"]}, reverse=True)
        lev_text = ", ".join(f"{100 * x:g}%" for x in levels)
        lines += ["", f"Differences A - B with intervals at level {lev_text} (column 'level'; "
                      f"{pct}: the bootstrap of the difference, widened by the two models' bias margins where they "
                      f"have one; {100 * (1 - 2 * (1 - result['confidence'])):g}%: the difference of the two models' "
                      "intervals where either has the identification bounds, which holds with probability at least "
                      f"{100 * (1 - 2 * (1 - result['confidence'])):g}%). A difference whose interval excludes 0 "
                      "decides the order. Paired: the same users resampled jointly; unpaired: independently."]
        header = ["A", "B", "metric", "A - B", "interval", "level", "pairing", "verdict"]
        body = [[c["model_a"], c["model_b"], c["label"], f"{c['difference']:+.4f}",
                 f"[{c['low']:+.4f}, {c['high']:+.4f}]", f"{100 * c.get('level', result['confidence']):g}%",
                 "paired" if c["paired"] else "unpaired", c["verdict"]]
                for c in result["comparisons"]]
        lines += _columns(header, body, numeric=(3, 4, 5))
        same = sum(not c["told_apart"] and c.get("identified", True) for c in result["comparisons"])
        unknown = sum(not c.get("identified", True) and not c["told_apart"] for c in result["comparisons"])
        decided_low = sum(not c.get("identified", True) and c["told_apart"] for c in result["comparisons"])
        if decided_low:
            lines += ["", f"{decided_low} of {len(result['comparisons'])} comparisons are decided below the resolution "
                          "rule: the difference of the two models' identification bounds excludes 0, so every rank "
                          "distribution the data allow orders the two models the same way (at the level shown)."]
        if unknown:
            lines += ["", f"{unknown} of {len(result['comparisons'])} comparisons are not identified and not decided: K "
                          "lies below the resolution rule for at least one of the two models and the interval of the "
                          "difference contains 0, so the sampled ranks do not say which model is better there."]
        if same:
            lines += ["", f"{same} of {len(result['comparisons'])} comparisons cannot be told apart: their "
                          "interval contains 0, so these data do not say which model is better."]
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
                        "the data allow); above it the bootstrap interval widened by the estimator's simulated bias "
                        "margin (every method and design, adaptive sampling included); a full ranking (sample_size = "
                        "n_items) the plain mean with the user bootstrap. "
                        "bootstrap: the estimator's own bootstrap interval everywhere (it does not cover the "
                        "estimator's bias below the rule)")
    e.add_argument("--target", default="population", choices=TARGETS,
                   help="what the intervals are for: the population the users were drawn from (user bootstrap, "
                        "default) or the test users' own metric (item sampling only; with a test_users column, "
                        "all the test users the rows were sampled from)")
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
    from .estimators import difference_interval
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
                             "identified": ident(m, k), "interval": "bounds" if k in bnd else "bootstrap",
                             "design": "fixed", "bias_margin": 0.0, "interval_width": hi - lo})
    for ia, a in enumerate(names):
        for b in names[ia + 1:]:
            paired = draws[a][1] == draws[b][1]
            for metric in metrics:
                for k in ([None] if metric == "auc" else ks):
                    (ea, ra, ba), (eb, rb, bb) = reps[a, metric, k], reps[b, metric, k]
                    diff = ea - eb
                    both = ident(a, k) and ident(b, k)
                    kinds = {m_: ("bounds" if bounded and not ident(m_, k) else "bootstrap") for m_ in (a, b)}
                    lo_b = hi_b = pv = float("nan")
                    if ra is not None and rb is not None:  # paired draws, or independent ones (unpaired)
                        lo_b, hi_b = (float(x) for x in percentile_interval(ra - rb, ci))
                        pv = float(bootstrap_p_value(ra - rb))
                    d = difference_interval({"low": ba[0], "high": ba[1], "interval": kinds[a], "identified": ident(a, k)},
                                            {"low": bb[0], "high": bb[1], "interval": kinds[b], "identified": ident(b, k)},
                                            lo_b, hi_b, ci)
                    why = (None if d["interval"] == "bootstrap" else
                           "the interval is the difference of the two models' intervals (Bonferroni), which gives a "
                           "level, not a p-value")
                    comparisons.append(_comparison_row(a, b, metric, k, diff, d, pv, why, paired, both, ci))
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
        "estimates": rows, "comparisons": comparisons, "notes": [], "weighted": True, "design": "fixed",
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
