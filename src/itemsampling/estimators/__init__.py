r"""Estimating global top-K metrics from sampled ranks.

Two families (TORS Sec. 4-5; Krichene & Rendle 2020 Sec. 5; Jin et al. 2021):

* **corrected metric functions** :math:`\widehat F(r)` (:mod:`.corrected`): rank estimate, CLS,
  BV, MN; the estimate is :math:`\widehat T = \frac1M\sum_u \widehat F(r_u)` (TORS Eq. 6);
* **global rank distributions** :math:`\widehat P(R)` (:mod:`.distribution`): MLE, WMLE, MES and
  the BV-derived baseline; the estimate is :math:`\widehat T = \sum_R \widehat P(R) F(R)`
  (TORS Eq. 27).

The combinations BV_MLE, BV_MES, MN_MLE and MN_MES (TORS Sec. 8.1.5) use as prior the
:math:`\widehat P(R)` learnt by MLE or MES from the *same* sampled ranks (a prior averaged over
repeats would leak information between them), and MN uses :math:`M` = the number of sampled ranks.

One call for everything: :func:`estimate_metric`. :func:`estimate_metrics` evaluates several
metrics and methods on one set of sampled ranks and learns each rank distribution only once.

The package, in layers from the bottom up (each module opens with what it holds; a module imports
only modules below it, checked by ``lint-imports``, contract in ``pyproject.toml``):

* :mod:`.grid`: the representation. :math:`P(R)` on a :class:`~.grid.RankGrid` of cells of global
  ranks (the exact grid, one cell per rank, is the dense estimator), the kernel on those cells, its
  row blocks and their products, the sampled-rank statistics and their one validation, metrics
  read off cell masses and per-user catalogue sizes;
* :mod:`.bounds`: the identification bounds of a metric (its range over every rank distribution the
  sampled ranks allow), the interval ``method="auto"`` reports below a few kernel widths;
* :mod:`.corrected`: the corrected metrics (rank estimate, CLS, BV, MN, MNW), one BV/MN/MNW core,
  and ``grid_corrected_metrics``;
* :mod:`.distribution`: the fits (EM, CNM, WMLE, MES, the BV baseline read off BV's corrected
  Recall@K), one option table, one fit, and the fits on a given grid;
* :mod:`.estimate`: the one estimate path (``_estimate``) that every caller (point estimates, both
  bootstraps, ``grid_estimate_metrics``) goes through, with the method tables;
* :mod:`.bootstrap` and :mod:`.conditional`: intervals (user bootstrap; parametric bootstrap given
  the test users), on replicate tables of the same estimators;
* :mod:`.auto`: ``method="auto"``, the estimator chosen per metric and cut-off by its worst-case
  simulated error over several fits of :math:`P(R)`, its interval that keeps its coverage, with the
  bootstrap entry points that take it (re-exported here);
* :mod:`.policy`: the one interval policy (:func:`interval_policy`: full ranking / bounds below the rule
  / bootstrap with the bias margin above it / the bootstrap on request), applied by
  :func:`apply_interval_policy` and :func:`difference_interval`, for the API, the command and the planner;
* :mod:`.api` (:func:`estimate_metric`, :func:`estimate_metrics`: a point estimate or, with ``ci``,
  an interval) and :mod:`.weighted` (estimators for popularity-weighted decoys, chapter 11);
* this module: the public names, re-exported (it holds no code of its own).
"""


from __future__ import annotations

from .._validation import ResolutionWarning
from .api import estimate_metric, estimate_metrics
from .auto import AutoSelection, bootstrap_metric, bootstrap_metrics, bootstrap_models, compare_estimates
from .bootstrap import AutoEstimate, MetricEstimate, ModelComparison
from .bounds import BoundsResult, identification_bounds
from .corrected import __all__ as _corrected_all
from .corrected import (  # noqa: F401  (CORRECTION_METHODS, check_gamma: importable as before)
    CORRECTION_METHODS, check_gamma, corrected_estimate, corrected_metric, corrected_metrics,
    corrected_moments, expected_corrected_given_rank, mse_decomposition, rank_estimate,
)
from .distribution import estimate_rank_distribution, grid_fit_rank_distribution, grid_mes_dual
from .corrected import grid_corrected_metrics
from .estimate import (
    GRID_METHODS, METHODS, PER_USER_SIZE_METHODS, POOL_METHODS, grid_estimate_metrics, metric_from_distribution,
    resolution_note,
)
from .policy import (  # the one interval policy (module policy)
    IntervalRule, KeptEstimate, add_user_sampling, apply_interval_policy, difference_interval, interval_policy,
    is_full_ranking, outside_note, user_sampling_half_widths, widen_bounds,
)
from .weighted import estimate_metric_weighted  # popularity-weighted decoys, Chapter 11

__all__ = [
    "METHODS",
    "PER_USER_SIZE_METHODS",
    "POOL_METHODS",
    *(name for name in _corrected_all if name not in ("CORRECTION_METHODS", "check_gamma", "grid_corrected_metrics")),
    "estimate_metric",
    "estimate_metrics",
    "estimate_rank_distribution",
    "metric_from_distribution",
    "MetricEstimate",
    "AutoEstimate",
    "AutoSelection",
    "BoundsResult",
    "identification_bounds",
    "ModelComparison",
    "bootstrap_models",
    "bootstrap_metric",
    "bootstrap_metrics",
    "compare_estimates",
    "estimate_metric_weighted",
    "interval_policy",
    "apply_interval_policy",
    "difference_interval",
    "is_full_ranking",
    "outside_note",
    "user_sampling_half_widths",
    "add_user_sampling",
    "widen_bounds",
    "IntervalRule",
    "KeptEstimate",
    "resolution_note",
    "ResolutionWarning",
    "GRID_METHODS",
    "grid_fit_rank_distribution",
    "grid_mes_dual",
    "grid_corrected_metrics",
    "grid_estimate_metrics",
]
