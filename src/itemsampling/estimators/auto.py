r"""``method="auto"``: the estimator chosen from the data, per metric and cut-off, and an interval
that keeps its coverage.

The rule
--------
No estimator wins everywhere: the most accurate one moves with the rank distribution, the
resolution :math:`N/(n-1)`, the number of users :math:`M` and the cut-off :math:`K` (guide,
"Which estimator?"). But each estimator's error on a data set *like this one* can be computed:
draw :math:`M` global ranks from a rank distribution :math:`P(R)`, their sampled ranks through the
kernel :math:`P(r\mid R)` (TORS Eq. 5), apply the estimator and compare with the users' own metric
:math:`\frac1M\sum_u F(R_u)` (what :mod:`itemsampling.plan` does for one estimator). The catch is
:math:`P(R)`: a choice made under one fitted distribution inherits that fit's blind spots. Every fit
agrees with the sampled-rank law :math:`\tilde P(r) = \sum_R P(R) P(r\mid R)`, but they differ inside
one kernel width, exactly where the estimators' biases live; and the nonparametric fits (MLE, MES)
*reproduce themselves* there (an estimator re-fitted on data drawn from its own fit finds it again),
so under them a learnt estimator looks unbiased and a fixed correction (CLS, BV) looks badly biased,
whatever the truth. The last session's rule (worst case over the MLE, MES, BV-derived and Beta fits)
stayed with a learnt estimator where CLS or BV was far more accurate for that reason.

So the errors are computed under **smooth plausible fits** only:

* the maximum-likelihood **Beta rank model** (:func:`beta_fit`; Li et al. 2020) with an offset that
  gives rank 1 no mass (the book's model) or some (:math:`R/N \sim` Beta);
* the two Betas at the ends of the 95 % **profile-likelihood interval** of its shape :math:`a`
  (:func:`beta_profile_ends`): with few users the shape is poorly determined, and the estimators'
  biases inside one kernel width move with it;
* the maximum-likelihood **mixture of two Betas** (:func:`beta_mixture_fit`), which holds a
  popularity-like step or two modes that one Beta cannot;

each kept only if the data do not reject it: Pearson's chi-square test of the sampled-rank histogram
against the fit's sampled-rank law (:func:`goodness_of_fit`, level :data:`GOF_LEVEL` = 0.01, ranks
pooled to :data:`GOF_MIN_EXPECTED` expected users per cell, degrees of freedom less the fit's
parameters). The truth is smooth; the NPMLE's spikes are an artefact of the estimator, and a smooth
fit the data cannot tell from the truth extrapolates inside one kernel width instead of copying
itself there. Each candidate :math:`c` is scored by its mean squared error averaged over the kept
fits with their **Akaike weights** (Burnham & Anderson 2002, Eq. 2.14),
:math:`\sqrt{\sum_f w_f \mathrm{RMSE}_f(c)^2}`, :math:`w_f \propto e^{-\mathrm{AIC}_f/2}`, and the
candidate with the smallest score is chosen (ties go to the earlier candidate of :data:`CANDIDATES`).
A worst case over the kept fits (minimax) was tried first: wherever few users leave the shape open
the steepest plausible fit made the fixed corrections look biased and it stayed with MLE where CLS
was far more accurate (Beta a = 0.6, N/(n-1) = 50-200, M = 500: auto 2.1-2.6 x the best). If every
smooth fit is rejected, the errors are computed under the nonparametric MLE and MES fits instead
(:data:`FALLBACK_FITS`, worst case over them), and :attr:`AutoSelection.fallback` and every reason say
so.

**The errors.** The fixed corrections (CLS, BV with :math:`\gamma` = :data:`GAMMA`) are linear in the
sampled-rank histogram, :math:`\widehat T = \frac1M\sum_u \widehat F(r_u)`, so their bias and RMSE
under a fit are closed forms of the kernel (:func:`_linear_exact`), with no simulation; MLE's are
simulated: :data:`N_SIM` data sets of :math:`M` users drawn from the fit, EM on each histogram (one
batched EM, :class:`~.bootstrap._Replicator`). The draws come from ``rng``: one seed, one choice.

Candidates (:data:`CANDIDATES`): MLE, CLS and BV (:math:`\gamma = 0.1`, uniform prior). MES and
MN_MLE are not candidates: a MES fit costs several times an EM fit, so a MES pick would make the
interval's bootstrap alone break the cost target (3 x plain MLE), and MN_MLE is built on MLE's own
prior (the guide's validation table sets both beside auto all the same). Any subset of
``("mle", "mes", "cls", "bv", "mn_mle")`` can be passed as ``candidates``. The input restricts them:
per-user sample sizes leave MLE alone (the only one that takes them), per-user catalogue sizes drop
CLS (one bounded least squares per pool), and the grid (catalogue scale) drops CLS (no grid version);
with per-user catalogue sizes the errors are computed on the largest pool, on a grid the fixed
corrections' errors are simulated. A candidate that fails on the data (or in the simulation) is
skipped with its error recorded in :attr:`AutoSelection.skipped`.

How well it does
----------------
:func:`validation_study` (the guide's Table G.4; ``benchmarks/auto_validation.py`` at full size):
rank models Beta a = 0.3, 0.6 and a popularity-like step, N/(n-1) = 5, 50, 200, M = 500 and 5,000,
K = 10 and 50 (36 cells), 10 repeats. Auto's relative RMSE was within 25 % of the cell's best (over
all five corrected estimators, MES and MN_MLE included) in 26 of the 36 cells, below MLE's in 25 (equal,
MLE picked every time, in 7), and above 1.25 x MLE's in 1 (the step model, N/(n-1) = 50, M = 5,000,
K = 50: 1.27 x). The last session's minimax over the MLE, MES, BV-derived and Beta fits: 16 of 36 and
3. The validation targets (20 of 24 cells, i.e. five in six, and none above 1.25 x MLE) are **not met**.
The misses are the step model at N/(n-1) of 50 and 200 (all 8 of its cells there: the step, the top
2 % of the catalogue, lies inside one kernel width, where no fit of the sampled ranks can tell a step
from a steep Beta; the smooth fits disagree and the pick changes between data sets) and Beta a = 0.6
at N/(n-1) = 200 with M = 500 (1.5-1.7 x: MLE picked on 2 of 20 data sets, whose MLE errors dominate
the RMSE). So the default method stays MLE; ``method="auto"`` is an option. The guide's Table G.4
runs the same study with fewer repeats.

Cost (``benchmarks/bench_auto.py``: N = 3,706, n = 100, M = 6,040, 2 models x 9 metric@K with 200
bootstrap replicates), measured back to back on two cores shared with other jobs: plain MLE 12.3 s,
auto 34.0 s, **2.8 x** (load average 9-10); an earlier run at load 12-14: 16.7 s and 55.6 s, 3.3 x.
The last session's rule took 96 s against 6.2 s for MLE, 15 x, at load about 2. A profile of the
auto call (31.7 s): the selection 18.3 s, of which CLS's bounded least squares 10.5 s (5 of the 9
metric@K not screened out by BV; seconds each at this N), the four smooth fits 2.8 s (Nelder-Mead on
a coarse grid of about 240 cells instead of 3,706 ranks), MLE's simulated errors (12 batched EM
fits per kept fit) and the closed forms of the fixed corrections (0.5 s) the rest; the bootstrap of
the chosen estimator (MLE in every metric@K here) 13.4 s, the plain MLE call itself.

The interval
------------
A bootstrap interval is centred on what the estimator returns, so it misses a bias of the
estimator itself; below one kernel width the bias is of the order of the interval (guide, Table
G.2b: the population bootstrap of MLE at NDCG@10 covered 0.81, 26 of 32, where it claims 0.95). With ``ci``,
``method="auto"`` reports by default (``interval="kept"``) per cut-off, by a rule of the design
:math:`(N, n, K)` and never of the data (:func:`interval_plan`; a data-dependent switch between two
intervals would break the coverage of both):

* :math:`K \ge c\,N/(n-1)`, :math:`c` = :data:`RESOLVED` = 2 (and AUC): the chosen estimator's
  interval (the user bootstrap; for ``target="test-users"`` the parametric bootstrap of
  :mod:`.conditional`) with both ends moved out by the **bias margin** :meth:`AutoSelection.margin`,
  :math:`\max_f |b_f|` over the smooth fits, the chosen estimator's bias under each (the bias-aware
  half-width of :func:`itemsampling.plan.normal_error_quantile` uses the same :math:`b`; here it is
  added to an interval that already holds the variance);
* :math:`K < c\,N/(n-1)`: the **identification bounds** (:func:`~.bounds.identification_bounds`): the
  range of the metric over every rank distribution whose sampled-rank law lies in a simultaneous
  exact (Clopper-Pearson, Bonferroni) band around the observed one, two linear programs. Their
  coverage needs no fit and no asymptotics: whenever the band covers the truth's sampled-rank law
  (probability :math:`\ge` ``ci``), the truth is feasible, so the bounds cover the population metric
  with probability at least ``ci`` for every rank distribution, :math:`M` and :math:`K`; for the test
  users' own metric the counts are Poisson-binomial, whose tails are no heavier than the binomial's
  with the same mean (Hoeffding 1956), and the same bounds cover it too (:mod:`.bounds` has the
  argument, edge cases included). Where the bounds cannot be computed (per-user catalogue or sample
  sizes, a catalogue-scale grid) the bootstrap with its margin is reported instead and the recorded
  reason says that its coverage is not guaranteed there.

``interval="bootstrap"`` gives the chosen estimator's own interval, widened by the margin only with
``widen=True`` (the behaviour before the kept interval). The result records per metric@K which kind
it got, why and its width (:attr:`~.bootstrap.AutoEstimate.interval`,
:attr:`~.bootstrap.AutoEstimate.width`, :attr:`AutoSelection.intervals`); ``estimate --method auto``
prints one line per metric@K and ``--json`` carries ``interval``, ``interval_reason`` and
``interval_width`` in every estimate row. With several models (:func:`auto_models`, the command)
each model's intervals are its own; the comparisons between models stay the bootstrap intervals
of the differences (widened by twice the larger margin with ``widen``).

Why the bounds only below :math:`c` kernel widths, and why :math:`c = 2`. The bounds are the honest
answer where the data cannot locate the cut-off, but they are wide everywhere: the kernel spreads the
users at global rank :math:`K` over several sampled ranks, and a rank distribution may move mass
across :math:`K` inside that spread unseen (:mod:`.bounds`, "What it costs"). Bounds everywhere would
multiply the width of resolved cut-offs several times for nothing. The bootstrap with its margin is
narrow but its coverage rests on the smooth fits seeing the estimator's bias, which they do only where
the cut-off is resolved. :math:`c` was set by the coverage study below, on the validation grid (a
measurement on simulated designs, not on the user's data). With today's interval beside the kept
one (``benchmarks/auto_coverage.py --today 20``: 20 data sets per cell at :math:`N/(n-1)` = 5 and 50,
24 cells, 96 rows of cell x metric x target), the bootstrap widened by its margin covered at least
0.95 in all 24 rows at :math:`K/(N/(n-1))` = 1.96 (:math:`K` = 10, :math:`N` = 250) and 0.80-1.00
(pooled 0.969) at 9.8, but as little as 0.20 at 1.02 (the step model, :math:`N` = 2,450, :math:`K` = 50:
0.20-0.90 over its 8 rows) and 0.55 at 0.2: within about one kernel width the smooth fits do not see
the estimator's bias (a step inside the first kernel width is what no fit of the sampled ranks can
see). :math:`c` = 2 is the smallest round multiple above the largest ratio where it failed. The grid
has no cell between 1.02 and 1.96, so its cells at 1.96 get the bounds although the bootstrap with
its margin held there too (:math:`c` = 1.5 would give them an interval about 6 times narrower; the
grid cannot tell whether that is safe in general).

How well it keeps its coverage
------------------------------
:func:`coverage_study` (the guide's Table G.4c at a small size; ``benchmarks/auto_coverage.py`` at
full size): the validation grid of :func:`validation_study` (36 cells), Recall@K and NDCG@K, both
targets, nominal 0.95. ``python benchmarks/auto_coverage.py 100``: 100 data sets per cell, all 36
cells, 144 rows of cell x metric x target (18 min on two shared cores at load 3-4). The kept interval
covered its truth in every one of the 12,000 data sets of the 120 rows where it is the bounds (exact
one-sided 95 % lower bound on the pooled coverage 0.9995 for each target) and 0.972 pooled over the
24 rows where it is the bootstrap with its margin (population 0.958, test users 0.986); the lowest row
0.89 (Monte Carlo se 0.031; the step model, :math:`N/(n-1)` = 5, :math:`M` = 5,000, Recall@50,
population), the only one below 0.90, and not significantly so (exact binomial test of a coverage of at
least 0.90, :math:`p` = 0.42; none of the 144 rows is below 0.90 by that test, Holm-corrected at 5 %).
The weakest spot is the population Recall@50 at ten kernel widths (0.89-0.95 over the three rank
models), where the chosen estimator's percentile interval is narrow and its bias margin small.
A second pass with today's interval beside the kept one (``--today 20``), 20 data sets per cell at
:math:`N/(n-1)` = 5 and 50 (96 rows; 31 min on two shared cores at load 3-4, as the auto selection and a
bootstrap run per data set and target for today's interval): the kept interval covered its truth in every data set of the 72 rows where it
is the bounds, and 0.969 pooled over the 24 rows where it is the bootstrap with its margin (lowest
0.80: Beta a = 0.6, :math:`M` = 5,000, Recall@50, population); today's interval (the chosen
estimator's plain bootstrap) 0.842 pooled over the bounds rows (below 0.90 in 21 of 72, down to
0.00: the step model, :math:`N/(n-1)` = 50, :math:`M` = 5,000, NDCG@50) and 0.892 over the others.
Widths: the kept interval is a median 1.17 times as wide as today's where it is the bootstrap with
its margin (1.01-2.64) and 6.4 times where it is the bounds (2.1-26.5): the price of a guarantee
where the data cannot locate the cut-off. The same pass at :math:`N/(n-1)` = 200 (``--today 10
--items 9800``: 10 data sets per cell, 48 rows, all of them bounds, 11 min): the bounds covered every
data set, today's interval 0.692 pooled (below 0.90 in 24 of 48 rows, down to 0.00: Beta a = 0.3,
:math:`M` = 5,000, NDCG@10, both targets; Beta a = 0.6, :math:`M` = 500, Recall@10, population), the
bootstrap with its margin 0.992 (lowest 0.90); the bounds were a median 7.9 times as wide as today's
interval (2.0-49).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._validation import TARGETS, as_rng, check_bool, check_int
from ..mapping import sample_beta_ranks
from ..kernel import RESOLVED, resolves
from ..metrics import canonical_metric, metric_function
from ..sampling import adaptive_sample_ranks
from . import bootstrap as _boot
from .bootstrap import AutoEstimate, ModelComparison, ModelsBootstrap, _per_model, _Replicator
from .bounds import identification_bounds
from .conditional import check_target, conditional_metrics
from .distribution import _fit
from .estimate import _estimate, _ks, _prepare, _vectors
from .grid import _single_blas_thread, cached_kernel, grid_kernel, rank_grid, resolve_grid

__all__ = ["CANDIDATES", "GAMMA", "N_SIM", "FITS", "SMOOTH_FITS", "FALLBACK_FITS", "GOF_LEVEL", "AutoSelection",
           "select_estimators", "plausible_fits", "beta_fit", "beta_mixture_fit", "goodness_of_fit", "validation_study",
           "validation_rmse", "draw_validation_ranks", "INTERVALS", "RESOLVED", "check_interval", "interval_plan",
           "MARGIN_METHODS", "bias_margins", "design_margins",
           "coverage_study",
           "auto_estimates", "bootstrap_metric", "bootstrap_metrics", "compare_estimates", "bootstrap_models"]

#: The candidates of ``method="auto"``, in tie-break order (module docstring: why not MES and MN_MLE).
CANDIDATES = ("mle", "cls", "bv")
#: BV's :math:`\gamma` among the candidates (Krichene & Rendle's value; the guide's "BV 0.1").
GAMMA = 0.1
#: Simulated data sets per fit (for the learnt candidates; the fixed corrections' errors are exact).
N_SIM = 12
#: The smooth fits of :math:`P(R)` the errors are computed under, when the data do not reject them: the
#: ML Beta, the Betas at the ends of its shape's profile-likelihood interval, the ML two-Beta mixture.
SMOOTH_FITS = ("beta", "beta-", "beta+", "beta2")
#: Free parameters of each smooth fit (the goodness-of-fit test's degrees of freedom).
N_PARAMS = {"beta": 3, "beta-": 3, "beta+": 3, "beta2": 6}
#: CLS is assessed only where BV's score is at most this many times the best score of the other
#: candidates (one bounded least squares per metric@K costs seconds at N in the thousands; the two
#: fixed corrections share the uniform prior's bias: in the validation grid CLS's error was never
#: below 0.55 x BV's, so where BV is more than twice the best, CLS is still at least 1.1 x the best).
CLS_SCREEN = 2.0
#: The nonparametric fits, used only when every smooth fit is rejected.
FALLBACK_FITS = ("mle", "mes")
#: Every fit the selection may use.
FITS = SMOOTH_FITS + FALLBACK_FITS
#: Level of the chi-square goodness-of-fit test that keeps a smooth fit, and the least expected count per
#: pooled cell.
GOF_LEVEL = 0.01
GOF_MIN_EXPECTED = 5.0
_LINEAR = ("cls", "bv")
#: options of the candidates that ``auto`` sets itself, and those it accepts from the caller
_OWN = {"bv": {"gamma": GAMMA}}
AUTO_OPTIONS = ("replacement", "grid")
#: the options of ``method="auto"`` itself
AUTO_ONLY = ("widen", "n_sim", "candidates", "interval")
#: the intervals of ``method="auto"`` with ``ci``: ``"kept"`` (the default; module docstring, "The interval")
#: and ``"bootstrap"`` (the chosen estimator's own interval, widened by the bias margin only with ``widen``)
INTERVALS = ("kept", "bootstrap")


def check_interval(interval) -> str:
    """``interval`` one of :data:`INTERVALS`, else a ``ValueError`` naming it."""
    if not isinstance(interval, str) or interval not in INTERVALS:
        raise ValueError(f"interval must be one of {', '.join(repr(x) for x in INTERVALS)}, "
                         f"got {interval!r}")
    return interval


def interval_plan(N, n, ks, pools=None, grid_in_use=False, interval="kept", widen=False, resolved=RESOLVED) -> dict:
    r"""The kind of interval each cut-off gets (module docstring, "The interval"): ``{k: (kind, why)}``.
    With ``interval="kept"``: ``"bootstrap+margin"`` where :math:`K \ge` :data:`RESOLVED`
    :math:`\times N/(n-1)` (and for AUC, ``k=None``), ``"bounds"`` (:mod:`.bounds`) below it, with
    every input the bounds take (per-user catalogue and sample sizes, a grid: :mod:`.bounds`). A
    rule of the design (:math:`N`, :math:`n`, :math:`K`), never of the data (``resolved``:
    the multiple of the kernel width, for the coverage study of the rule itself). With
    ``interval="bootstrap"``: ``"bootstrap+margin"`` if ``widen``, else ``"bootstrap"``."""
    out = {}
    if interval == "bootstrap":
        kind = "bootstrap+margin" if widen else "bootstrap"
        return {k: (kind, "interval='bootstrap'" + (" with widen" if widen else "")) for k in ks}
    w = N / (int(np.max(n)) - 1)
    for k in ks:
        if resolves(N, n, k, resolved):
            out[k] = ("bootstrap+margin", f"K resolved: K >= {resolved:g} x N/(n-1) = {resolved * w:.3g}"
                      if k is not None else "untruncated metric: resolved")
        else:
            out[k] = ("bounds", f"K below {resolved:g} x N/(n-1) = {resolved * w:.3g}: identification bounds")
    return out


def _params(method: str, base: dict) -> dict:
    return {**base, **_OWN.get(method, {})}


def check_auto_params(params: dict) -> None:
    """``method="auto"`` takes only :data:`AUTO_OPTIONS`; an option of one method (``gamma``,
    ``eta``, ...) is refused, naming it."""
    bad = sorted(set(params) - set(AUTO_OPTIONS))
    if bad:
        raise ValueError(f"method 'auto' chooses each estimator with its own settings; option(s) {bad} belong to "
                         f"one method: pass an explicit method to use them (auto accepts only {list(AUTO_OPTIONS)}, and "
                         f"{', '.join(AUTO_ONLY)})")


@dataclass
class AutoSelection:
    """What ``method="auto"`` chose and why.

    Attributes
    ----------
    metrics, ks : the metrics and cut-offs.
    candidates : tuple      the candidates the input allows (:data:`CANDIDATES` restricted).
    restricted : str        why candidates were left out by the input ("" if none).
    skipped : dict          candidate or fit -> the error that removed it.
    fits : tuple            the fits of :math:`P(R)` the errors were simulated under.
    n_sim : int             simulated data sets per fit.
    chosen : dict           (metric, k) -> chosen method.
    rmse, bias : dict       (metric, k) -> {candidate: {fit: simulated RMSE / bias}}.
    reason : dict           (metric, k) -> one line saying why.
    estimates : dict        (metric, k) -> {candidate: its estimate on the data}.
    plausibility : dict     smooth fit -> its chi-square test against the data (``chi2``, ``df``, ``p``,
                            ``kept``).
    fallback : str          why the nonparametric fits were used ("" when a smooth fit was kept).
    score : dict            (metric, k) -> {candidate: the error the choice minimised}.
    screened : dict         (metric, k) -> why CLS was not assessed there (:data:`CLS_SCREEN`).
    intervals : dict        (metric, k) -> ``{"kind", "why", "width"}`` of the interval it got (with ``ci``).
    """

    metrics: list
    ks: list
    candidates: tuple
    restricted: str = ""
    skipped: dict = field(default_factory=dict)
    fits: tuple = ()
    n_sim: int = 0
    chosen: dict = field(default_factory=dict)
    rmse: dict = field(default_factory=dict)
    bias: dict = field(default_factory=dict)
    reason: dict = field(default_factory=dict)
    estimates: dict = field(default_factory=dict)
    plausibility: dict = field(default_factory=dict)
    fallback: str = ""
    score: dict = field(default_factory=dict)
    screened: dict = field(default_factory=dict)
    intervals: dict = field(default_factory=dict)

    def method(self, metric, k) -> str:
        return self.chosen[(metric, k)]

    def worst(self, metric, k, method=None) -> float:
        """The worst-case RMSE over the fits of ``method`` (default: the chosen one)."""
        e = self.rmse.get((metric, k), {}).get(method or self.method(metric, k))
        return float("nan") if not e else max(e.values())

    def predicted(self, metric, k, method=None) -> float:
        """The error the choice minimised (module docstring) of ``method`` (default: the chosen one)."""
        return float(self.score.get((metric, k), {}).get(method or self.method(metric, k), float("nan")))

    def margin(self, metric, k) -> float:
        r"""The bias margin :math:`\max_f |b_f|` of the chosen estimator (0 when nothing was simulated)."""
        b = self.bias.get((metric, k), {}).get(self.method(metric, k))
        return 0.0 if not b else max(abs(v) for v in b.values())

    def to_dict(self) -> dict:
        def lab(mk):
            m, k = mk
            return f"{m}@{'all' if k is None else k}"

        return {"candidates": list(self.candidates), "restricted": self.restricted, "skipped": dict(self.skipped),
                "fits": list(self.fits), "n_sim": self.n_sim, "plausibility": dict(self.plausibility),
                "fallback": self.fallback,
                "choices": {lab(mk): {"method": c, "reason": self.reason[mk], "margin": self.margin(*mk),
                                      "rmse": self.rmse.get(mk, {}), "bias": self.bias.get(mk, {}),
                                      **({"interval": self.intervals[mk]} if mk in self.intervals else {})}
                            for mk, c in self.chosen.items()}}


def _draw_global(P, grid, N, size, gen):
    """Global ranks drawn from a fit: over 1..N, or over cells (uniform within a cell)."""
    if grid is None:
        return 1 + gen.choice(N, size=size, p=P)
    c = gen.choice(grid.n_cells, size=size, p=P)
    return grid.lo[c] + np.floor(gen.random(size) * grid.widths[c]).astype(np.int64)


def _sampled(R, N, n, replacement, gen):
    if replacement:
        return 1 + gen.binomial(n - 1, (R - 1) / (N - 1))
    return 1 + gen.hypergeometric(R - 1, N - R, n - 1)


def _sampled_law(P, K):
    r"""The sampled-rank law :math:`\tilde P(r) = \sum_R P(R) P(r\mid R)` of a fit (TORS Eq. 5)."""
    q = np.clip(P @ K, 0.0, None)
    return q / q.sum()


def goodness_of_fit(counts, q, n_params: int) -> tuple:
    r"""Pearson's chi-square test of the sampled-rank histogram ``counts`` (:math:`c_r`, :math:`r = 1..n`)
    against a fit's sampled-rank law ``q``: adjacent ranks are pooled from the top until each pooled
    cell expects at least :data:`GOF_MIN_EXPECTED` users (the last remainder joins the cell before it),
    :math:`X^2 = \sum (c - Mq)^2 / (Mq)` on :math:`B` cells with :math:`B - 1 -` ``n_params`` degrees
    of freedom. Returns ``(X2, df, p)`` (``p = 1`` when no degree of freedom is left)."""
    from scipy import stats

    M = float(np.sum(counts))
    e, o = M * np.asarray(q, np.float64), np.asarray(counts, np.float64)
    bins_e, bins_o, acc_e, acc_o = [], [], 0.0, 0.0
    for ei, oi in zip(e, o):
        acc_e += ei
        acc_o += oi
        if acc_e >= GOF_MIN_EXPECTED:
            bins_e.append(acc_e)
            bins_o.append(acc_o)
            acc_e = acc_o = 0.0
    if acc_e > 0 or acc_o > 0:
        if bins_e:
            bins_e[-1] += acc_e
            bins_o[-1] += acc_o
        else:
            bins_e, bins_o = [acc_e], [acc_o]
    be, bo = np.array(bins_e), np.array(bins_o)
    x2 = float(np.sum((bo - be) ** 2 / np.maximum(be, 1e-300)))
    df = be.size - 1 - int(n_params)
    return x2, df, (float(stats.chi2.sf(x2, df)) if df > 0 else 1.0)


def _linear_exact(P, N, n, metrics, ks, method, params, replacement, M):
    r"""Exact bias and RMSE of a fixed correction under a fit :math:`P(R)` (no simulation): the estimate
    :math:`\frac1M\sum_u \widehat F(r_u)` is linear in the sampled ranks, so its error against the users'
    own metric, :math:`\frac1M\sum_u [\widehat F(r_u) - F(R_u)]`, is a mean of :math:`M` independent
    per-user errors :math:`e = \widehat F(r) - F(R)`, :math:`R \sim P`, :math:`r \sim P(r\mid R)`:
    bias :math:`b = \sum_R P(R)\,[(K\widehat F)_R - F(R)]`, second moment
    :math:`s = \sum_R P(R)\,[(K\widehat F^2)_R - 2F(R)(K\widehat F)_R + F(R)^2]`, and
    :math:`\mathrm{RMSE} = \sqrt{b^2 + (s - b^2)/M}`. Returns ``(rmse, bias)``, each (metrics, ks)."""
    K = cached_kernel(N, n, replacement)
    Fh = _linear_vectors(N, n, metrics, ks, method, params, None).reshape(n, -1)
    R = np.arange(1, N + 1)
    F = np.column_stack([metric_function(m, k, N)(R) for m in metrics for k in ks])
    KF, KF2 = K @ Fh, K @ (Fh ** 2)
    b = P @ (KF - F)
    s = P @ (KF2 - 2.0 * F * KF + F ** 2)
    rmse = np.sqrt(b ** 2 + np.maximum(s - b ** 2, 0.0) / M)
    shape = (len(metrics), len(ks))
    return rmse.reshape(shape), b.reshape(shape)


def _smooth_fits(r, N, n, replacement, g, sel):
    r"""The smooth fits (Beta, two-Beta mixture), each with its goodness-of-fit test; ``{name: P}`` of
    those not rejected at :data:`GOF_LEVEL` (the record goes to ``sel.plausibility``). With one BLAS
    thread (:func:`~.grid._single_blas_thread`): the fits' likelihoods are about 1,000 matrix-vector
    products with the kernel, 7x slower multi-threaded on a busy 2-core machine (measured at
    N = 10^5, n = 1,000 on the grid: 11 ms against 1.5 ms each)."""
    with _single_blas_thread():
        return _smooth_fits_impl(r, N, n, replacement, g, sel)


def _smooth_fits_impl(r, N, n, replacement, g, sel):
    K = cached_kernel(N, n, replacement) if g is None else grid_kernel(g, n, replacement)
    counts = np.bincount(r, minlength=n + 1)[1:]
    kept, beta = {}, None
    fits = {}
    for f in ("beta", "beta2"):
        try:
            if f == "beta":
                beta = beta_fit(r, N, n, replacement, g, return_params=True)
                fits["beta"] = beta[0]
                fits.update(beta_profile_ends(r, N, n, replacement, g, fit=beta))
            else:
                fits[f] = beta_mixture_fit(r, N, n, replacement, g, start=None if beta is None else beta[1])
        except (ValueError, np.linalg.LinAlgError, FloatingPointError) as e:
            sel.skipped[f"fit {f}"] = f"{type(e).__name__}: {e}"
    for f in SMOOTH_FITS:
        if f not in fits:
            continue
        P = fits[f]
        q = _sampled_law(P, K)
        x2, df, p = goodness_of_fit(counts, q, N_PARAMS[f])
        ok = p >= GOF_LEVEL
        loglik = float(counts @ np.log(np.maximum(q, 1e-300)))
        sel.plausibility[f] = {"chi2": x2, "df": df, "p": p, "kept": bool(ok), "loglik": loglik,
                               "aic": 2.0 * N_PARAMS[f] - 2.0 * loglik}
        if ok:
            kept[f] = P
    if kept:  # Akaike weights of the kept fits (Burnham & Anderson 2002, Eq. 2.14)
        aic = np.array([sel.plausibility[f]["aic"] for f in kept])
        w = np.exp(-0.5 * (aic - aic.min()))
        for f, wf in zip(kept, w / w.sum()):
            sel.plausibility[f]["weight"] = float(wf)
    return kept


def plausible_fits(r, N, n, replacement, g, sel) -> dict:
    r"""The fits of :math:`P(R)` the errors are computed under (module docstring), on validated ranks ``r``:
    ``{name: P}`` of the smooth fits the data do not reject (:func:`_smooth_fits`), else of the
    nonparametric :data:`FALLBACK_FITS` (``sel.fallback`` says so). ``sel`` (an :class:`AutoSelection`)
    receives the tests (``plausibility``) and the fits that failed (``skipped``). Shared with
    :func:`itemsampling.plan.plan_evaluation`, which simulates its designs under the same fits."""
    fits = _smooth_fits(r, N, n, replacement, g, sel)
    if not fits:
        sel.fallback = (f"every smooth fit was rejected at the {GOF_LEVEL:g} level: the errors were simulated "
                        f"under the nonparametric {'/'.join(x.upper() for x in FALLBACK_FITS)} fits, which "
                        "underrate the learnt estimators' bias below one kernel width")
        for f in FALLBACK_FITS:
            try:
                P = np.asarray(_fit(r, N, n, f, replacement, {}, g).distribution, np.float64)
                P = np.clip(P, 0.0, None)
                fits[f] = P / P.sum()
            except (ValueError, np.linalg.LinAlgError, FloatingPointError) as e:
                sel.skipped[f"fit {f}"] = f"{type(e).__name__}: {e}"
        if not fits:
            raise ValueError(f"method 'auto': no fit of P(R) works on these data ({sel.skipped})")
    return fits


def select_estimators(r, N, n, metrics, ks, rng=None, replacement=True, grid=None, pools=None, n_sim=N_SIM,
                      candidates=CANDIDATES, simulate=False) -> AutoSelection:
    r"""Choose an estimator per metric and cut-off (module docstring) on validated ranks ``r``
    (one per user), catalogue size ``N`` (the largest pool with per-user ``pools``), sample size
    ``n`` (an int, or per-user sizes), ``grid`` as for :func:`itemsampling.estimators.estimate_metric`.
    One candidate is chosen without simulating its errors unless ``simulate`` (:func:`bias_margins`)."""
    n_sim = check_int(n_sim, "n_sim", low=2)
    replacement = check_bool(replacement, "replacement")
    gen = as_rng(rng)
    metrics, ks = list(metrics), list(ks)
    cands, why = list(candidates), []
    sel = AutoSelection(metrics, ks, ())
    if not isinstance(n, int):
        cands, why = ["mle"], ["per-user sample sizes: MLE is the only candidate that takes them"]
    g = resolve_grid(grid, N, n if isinstance(n, int) else int(np.max(n)), ks)
    if pools is not None and "cls" in cands:
        cands.remove("cls")
        why.append("per-user catalogue sizes: CLS left out (one bounded least squares per pool); errors "
                   "simulated on the largest pool")
    if g is not None and "cls" in cands:
        cands.remove("cls")
        why.append("catalogue-scale grid: CLS has no grid version")
    sel.restricted = "; ".join(why)
    base = {"replacement": replacement} if replacement is not True else {}
    if grid is not None:
        base["grid"] = grid
    # CLS is screened: assessed only where BV, the other fixed correction, is not far behind (below)
    screen = "cls" in cands and "bv" in cands and g is None and pools is None and isinstance(n, int)
    if screen:
        cands.remove("cls")
    # each candidate on the data; one that fails is skipped with its error
    cache: dict = {}
    est = {}
    for c in cands:
        try:
            if c in _LINEAR and pools is None and isinstance(n, int):  # cached corrected vectors
                h = np.bincount(r, minlength=n + 1)[1:].astype(np.float64)
                est[c] = np.einsum("r,rmk->mk", h, _linear_vectors(N, n, metrics, ks, c, _params(c, base), g)) / r.size
            else:
                est[c] = _estimate(r, N, n, metrics, ks, c, _params(c, base), cache, pools)
        except (ValueError, np.linalg.LinAlgError, FloatingPointError) as e:
            sel.skipped[c] = f"{type(e).__name__}: {e}"
    cands = [c for c in cands if c in est]
    if not cands:
        raise ValueError(f"method 'auto': no candidate estimator works on these data ({sel.skipped})")
    sel.candidates = tuple(cands)
    for i, m in enumerate(metrics):
        for j, k in enumerate(ks):
            sel.estimates[(m, k)] = {c: float(est[c][i, j]) for c in cands}
    if len(cands) == 1 and not screen and not simulate:
        for m in metrics:
            for k in ks:
                sel.chosen[(m, k)] = cands[0]
                sel.reason[(m, k)] = f"{cands[0]}: the only candidate ({sel.restricted or 'the others failed'})"
        return sel
    # the fits of P(R) the errors are simulated under: the smooth fits the data do not reject, else
    # the nonparametric ones
    fits = plausible_fits(r, N, n, replacement, g, sel)
    sel.fits = tuple(fits)
    sel.n_sim = n_sim
    M = r.size
    Fs = [[metric_function(m, k, N) for k in ks] for m in metrics]
    rmse = {c: {} for c in cands}
    bias = {c: {} for c in cands}
    exact = g is None  # the fixed corrections' errors in closed form on ranks; simulated on a grid
    for f, P in fits.items():
        learnt = [c for c in cands if c not in _LINEAR or not exact]
        if learnt:
            R = _draw_global(P, g, N, (n_sim, M), gen)
            rs = _sampled(R, N, n, replacement, gen)
            T = np.array([[[float(np.mean(F(R[s]))) for F in row] for row in Fs] for s in range(n_sim)])
            C = np.stack([np.bincount(rs[s], minlength=n + 1)[1:] for s in range(n_sim)]).astype(np.float64)
            rep = _Replicator(N, n, np.full(n, n), np.arange(1, n + 1), C, metrics, ks)
        for c in list(cands):
            try:
                if c in _LINEAR and exact:
                    rmse[c][f], bias[c][f] = _linear_exact(P, N, n, metrics, ks, c, _params(c, base), replacement, M)
                    continue
                if c in _LINEAR:  # linear in the histogram: the data's corrected vectors, already built
                    E = _linear_sims(C, r, N, n, metrics, ks, c, _params(c, base), est, g)
                else:
                    E = rep.replicates(c, _params(c, base))
            except (ValueError, np.linalg.LinAlgError, FloatingPointError) as e:
                sel.skipped[c] = f"in the simulation under the {f.upper()} fit: {type(e).__name__}: {e}"
                cands.remove(c)
                continue
            err = E - T
            rmse[c][f] = np.sqrt(np.mean(err ** 2, axis=0))
            bias[c][f] = np.mean(err, axis=0)
    sel.candidates = tuple(c for c in candidates if c in cands or (screen and c == "cls"))
    fit_names = "/".join(x.upper() for x in fits)
    weights = {f: sel.plausibility.get(f, {}).get("weight") for f in fits}

    def scores(errs):
        if sel.fallback:  # the nonparametric fits: the worst case over them
            return {c: max(v.values()) for c, v in errs.items()}
        # the smooth fits: the root of the Akaike-weighted mean squared error
        return {c: float(np.sqrt(sum(weights[f] * e ** 2 for f, e in v.items()))) for c, v in errs.items()}

    h = np.bincount(r, minlength=n + 1)[1:].astype(np.float64)
    for i, m in enumerate(metrics):
        for j, k in enumerate(ks):
            mk = (m, k)
            sel.rmse[mk] = {c: {f: float(rmse[c][f][i, j]) for f in rmse[c]} for c in cands}
            sel.bias[mk] = {c: {f: float(bias[c][f][i, j]) for f in bias[c]} for c in cands}
            score = scores(sel.rmse[mk])
            here = list(cands)
            if screen and "bv" in score:
                if score["bv"] <= CLS_SCREEN * min(score.values()):
                    try:
                        kw = _params("cls", base)
                        Fh = _linear_vectors(N, n, [m], [k], "cls", kw, None)
                        sel.estimates[mk]["cls"] = float(h @ Fh[:, 0, 0] / r.size)
                        sel.rmse[mk]["cls"], sel.bias[mk]["cls"] = {}, {}
                        for f, P in fits.items():
                            e, b = _linear_exact(P, N, n, [m], [k], "cls", kw, replacement, M)
                            sel.rmse[mk]["cls"][f], sel.bias[mk]["cls"][f] = float(e[0, 0]), float(b[0, 0])
                        score["cls"] = scores({"cls": sel.rmse[mk]["cls"]})["cls"]
                        here.append("cls")
                    except (ValueError, np.linalg.LinAlgError, FloatingPointError) as e:
                        sel.skipped["cls"] = f"{type(e).__name__}: {e}"
                        sel.rmse[mk].pop("cls", None)
                        sel.bias[mk].pop("cls", None)
                else:
                    sel.screened[mk] = (f"cls not assessed: BV's predicted error {score['bv']:.3g} is more than "
                                        f"{CLS_SCREEN:g} x the best's {min(score.values()):.3g}")
            sel.score[mk] = score
            order = sorted(here, key=lambda c: (score[c], sel.candidates.index(c)))
            sel.chosen[mk] = order[0]
            second = f"; next {order[1]} {score[order[1]]:.3g}" if len(order) > 1 else ""
            how = ("smallest worst-case simulated RMSE over the nonparametric " + fit_names + " fits"
                   if sel.fallback else f"smallest plausibility-weighted RMSE over the smooth {fit_names} fits")
            sel.reason[mk] = (f"{order[0]}: {how} ({score[order[0]]:.3g}{second}; {n_sim} simulated data sets per "
                              "fit" + ("; fallback: every smooth fit rejected" if sel.fallback else "")
                              + (f"; {sel.screened[mk]}" if mk in sel.screened else "") + ")")
    return sel


def _beta_masses(a, b, N, g, s=1.0):
    r"""Masses of the Beta rank model :math:`\Pr(R \le K) = I_{u_K}(a, b)`,
    :math:`u_K = (K - 1 + s)/(N - 1 + s)`, on the ranks 1..N or on the cells of ``g`` (exact cell masses
    from the cells' upper ends). The offset :math:`s` spans the book's model
    (:math:`s = 0`: :func:`itemsampling.mapping.beta_rank_cdf`, :math:`R = 1` has probability 0) and the
    rank fraction :math:`R/N \sim \mathrm{Beta}(a, b)` (:math:`s = 1`, as
    :func:`itemsampling.plan.beta_rank_distribution`)."""
    from scipy import special

    hi = np.arange(1, N + 1) if g is None else g.hi
    P = np.diff(special.betainc(a, b, np.concatenate([[0.0], (hi - 1.0 + s) / (N - 1.0 + s)])))
    return np.clip(P, 0.0, None)


def _fit_grid(N, n, g):
    """The representation the smooth fits are optimised on: ``g`` when given, else a coarse grid (one
    cell per rank for the first 64 ranks, 4 cells per kernel width below) when it is much smaller than
    the catalogue; cell masses of the smooth families are exact and the grid kernel averages the kernel
    over each cell (:func:`~.grid.grid_kernel`), so the likelihood is that of the ranks to within the
    kernel's variation inside a cell."""
    if g is not None:
        return g
    gf = rank_grid(N, n, resolution=4.0, top=64, exact=False)
    return None if gf.exact or gf.n_cells > N // 4 else gf


def _ml_fit(r, N, n, replacement, g, masses, starts, maxiter):
    r"""Maximise the sampled-rank likelihood :math:`\sum_r c_r \log \sum_R P_x(R) P(r\mid R)` (Jin et al.
    2021 Eq. 19 restricted to a family ``masses(x, N, grid)``) by Nelder-Mead from each start; the best
    ``(x, negative log-likelihood)``."""
    from scipy import optimize

    c = np.bincount(r, minlength=n + 1)[1:].astype(np.float64)
    gf = _fit_grid(N, n, g)
    K = cached_kernel(N, n, replacement) if gf is None else grid_kernel(gf, n, replacement)

    def nll(x):
        return -float(c @ np.log(np.maximum(masses(x, N, gf) @ K, 1e-300)))

    best = min((optimize.minimize(nll, np.array(x0, np.float64), method="Nelder-Mead",
                                  options={"xatol": 1e-3, "fatol": 1e-6 * r.size, "maxiter": maxiter})
                for x0 in starts), key=lambda res: res.fun)
    return best.x, best.fun


def _beta_x(s):
    def masses(x, N, g):
        a, b = np.exp(np.clip(x[:2], -6.0, 8.0))
        return _beta_masses(a, b, N, g, s)
    return masses


def _mix_x(s):
    def masses(x, N, g):
        a1, b1, a2, b2 = np.exp(np.clip(x[:4], -6.0, 8.0))
        w = 1.0 / (1.0 + np.exp(-np.clip(x[4], -30.0, 30.0)))
        return w * _beta_masses(a1, b1, N, g, s) + (1.0 - w) * _beta_masses(a2, b2, N, g, s)
    return masses


#: the offsets s of the Beta rank model that the fits try (the book's model and R/N ~ Beta)
OFFSETS = (0.0, 1.0)
#: level of the profile-likelihood interval of the Beta fit's shape a whose ends are plausible fits too
PROFILE_LEVEL = 0.95


def beta_profile_ends(r, N, n, replacement=True, g=None, fit=None, level=PROFILE_LEVEL) -> dict:
    r"""The Beta rank models at the two ends of the profile-likelihood interval of the shape :math:`a`
    (offset :math:`s` of the fit kept, :math:`b` re-maximised for each :math:`a`): the :math:`a` where
    :math:`2[\ell(\hat a, \hat b) - \max_b \ell(a, b)] = \chi^2_{1,\text{level}}` on each side (Wilks;
    bisection on :math:`\log a` within a factor :math:`e^3` of :math:`\hat a`). With few users the shape is
    poorly determined, and the estimators' biases inside one kernel width move with it: these two fits
    are as plausible as the ML one at ``level``. ``fit``: :func:`beta_fit`'s ``(P, (a, b, s))`` if
    already computed. Returns ``{"beta-": P, "beta+": P}`` (smaller and larger :math:`a`)."""
    from scipy import optimize, stats

    _, (a, b, s_) = fit if fit is not None else beta_fit(r, N, n, replacement, g, return_params=True)
    c = np.bincount(r, minlength=n + 1)[1:].astype(np.float64)
    gf = _fit_grid(N, n, g)
    K = cached_kernel(N, n, replacement) if gf is None else grid_kernel(gf, n, replacement)
    fam = _beta_x(s_)

    def nll(x):
        return -float(c @ np.log(np.maximum(fam(x, N, gf) @ K, 1e-300)))

    lb_hat = [np.log(b)]

    def profile(la):
        res = optimize.minimize_scalar(lambda lb: nll([la, lb]), bracket=(lb_hat[0] - 0.5, lb_hat[0] + 0.5),
                                       options={"xtol": 1e-4})
        return res.fun, res.x

    la0 = np.log(a)
    base, _ = profile(la0)
    crit = 0.5 * float(stats.chi2.ppf(level, 1))
    out = {}
    for name, sign in (("beta-", -1.0), ("beta+", 1.0)):
        lo, hi = 0.0, 3.0  # distance from log a-hat
        lb_hat[0] = np.log(b)
        if profile(la0 + sign * hi)[0] - base < crit:
            d = hi
        else:
            for _ in range(12):
                mid = 0.5 * (lo + hi)
                if profile(la0 + sign * mid)[0] - base < crit:
                    lo = mid
                else:
                    hi = mid
            d = lo
        f, lb = profile(la0 + sign * d)
        P = fam([la0 + sign * d, lb], N, g)
        out[name] = P / P.sum()
    return out


def beta_fit(r, N, n, replacement=True, g=None, return_params=False):
    r"""The maximum-likelihood Beta rank model: :math:`\Pr(R \le K) = I_{(K-1+s)/(N-1+s)}(a, b)`
    (:func:`_beta_masses`; the offset :math:`s` is one of :data:`OFFSETS`: the book's model, Li et al.
    2020 Sec. 3.2, who fit its :math:`b = 1` case to real data, and :math:`R/N \sim \mathrm{Beta}(a, b)`),
    :math:`(a, b, s)` maximising the sampled-rank likelihood :math:`\sum_r c_r \log \sum_R P_{a,b}(R)
    P(r\mid R)` (Jin et al. 2021 Eq. 19 restricted to the family). Smooth by construction: its power law
    at the top of the ranking extrapolates inside one kernel width, where the nonparametric fits cannot
    see. Masses on the ranks 1..N, or on the cells of ``g``; with ``return_params`` also ``(a, b, s)``."""
    starts = ([np.log(0.5), 0.0], [0.0, np.log(3.0)])
    fits = [(*_ml_fit(r, N, n, replacement, g, _beta_x(s), starts, 400), s) for s in OFFSETS]
    x, _, s = min(fits, key=lambda f: f[1])
    P = _beta_x(s)(x, N, g)
    P = P / P.sum()
    a, b = np.exp(np.clip(x[:2], -6.0, 8.0))
    return (P, (float(a), float(b), float(s))) if return_params else P


def beta_mixture_fit(r, N, n, replacement=True, g=None, start=None) -> np.ndarray:
    r"""The maximum-likelihood mixture of two Beta rank models,
    :math:`P(R) = w P_{a_1,b_1,s}(R) + (1-w) P_{a_2,b_2,s}(R)` (:func:`beta_fit`'s family, with the Beta
    fit's offset :math:`s`), maximising the sampled-rank likelihood over :math:`(a_1, b_1, a_2, b_2, w)`
    (Nelder-Mead on log / logit scales from two starts: the Beta fit ``start`` :math:`(a, b, s)` beside a component Beta(1, n - 1) that holds the
    top kernel width of the ranking, and a two-mode start). It covers a popularity-like step or two
    modes, which one Beta cannot. Masses on the ranks 1..N, or on the cells of ``g``."""
    a0, b0, s = start if start is not None else (0.5, 1.0, 0.0)
    starts = ([np.log(a0), np.log(b0), 0.0, np.log(max(n - 1, 1)), 1.0],
              [np.log(0.5), np.log(2.0), np.log(2.0), np.log(0.7), 0.0])
    x, _ = _ml_fit(r, N, n, replacement, g, _mix_x(s), starts, 1200)
    P = _mix_x(s)(x, N, g)
    return P / P.sum()


_FH_CACHE: dict = {}


def _linear_vectors(N, n, metrics, ks, method, params, g):
    """The corrected vectors of a fixed-prior correction (data-independent): cached per process
    (CLS's bounded least squares takes about a second per metric and cut-off at N in the thousands)."""
    rep = params.get("replacement", True)
    out = []
    for m in metrics:
        row = []
        for k in ks:
            key = (N, n, method, m, k, rep, params.get("gamma"), None if g is None else g.key())
            if key not in _FH_CACHE:
                kw = {x: v for x, v in params.items() if x in ("gamma", "replacement")}
                _FH_CACHE[key] = _vectors([m], [k], N, n, method, g, None, **kw)[:, 0, 0]
            row.append(_FH_CACHE[key])
        out.append(row)
    return np.moveaxis(np.array(out), -1, 0)  # (n, metrics, ks)


def _linear_sims(C, r, N, n, metrics, ks, method, params, est, g):
    Fh = _linear_vectors(N, n, metrics, ks, method, params, g)
    return np.einsum("sr,rmk->smk", C, Fh) / C[0].sum()


# ---------------------------------------------------------------------------------------------
# the estimate of method="auto", with or without an interval
# ---------------------------------------------------------------------------------------------
#: The fixed methods whose bias margin :func:`bias_margins` simulates: auto's candidates that take no
#: option of their own, and BV with auto's :math:`\gamma`.
MARGIN_METHODS = ("mle", "mes", "cls", "bv")


def bias_margins(sampled_ranks, n_items, sample_size, metrics, ks, method: str, params=None, rng=None) -> dict:
    r"""The bias margin of a fixed ``method`` (module docstring, "The interval"): :math:`\max_f |b_f|`, its
    simulated bias under each smooth fit of :math:`P(R)` the data do not reject (the nonparametric fits if
    every smooth one is), per ``(metric, k)``; what ``interval="kept"`` adds to both ends of a resolved
    cut-off's bootstrap interval for every method, as ``method="auto"`` does for the one it chose
    (:func:`select_estimators` with that candidate alone, its errors simulated). ``{}`` where the margin is
    not defined: a method outside :data:`MARGIN_METHODS`, options of its own (other than BV's
    :math:`\gamma` = :data:`GAMMA`), per-user sample sizes for another method than MLE, per-user
    catalogue sizes for CLS, or a failure of the method in the simulation (its interval then stays the
    bootstrap's)."""
    params = dict(params or {})
    own = {x: v for x, v in params.items() if x not in AUTO_OPTIONS}
    if method not in MARGIN_METHODS or (own and not (method == "bv" and own == {"gamma": GAMMA})):
        return {}
    r, N, n, pools = _prepare(sampled_ranks, n_items, sample_size, {x: params[x] for x in AUTO_OPTIONS if x in params})
    if (not isinstance(n, int) and method != "mle") or (pools is not None and method == "cls"):
        return {}
    metrics, ks = list(metrics), list(ks)
    try:
        sel = select_estimators(r, N, n, metrics, ks, rng=rng, replacement=params.get("replacement", True),
                                grid=params.get("grid"), pools=pools, candidates=(method,), simulate=True)
    except (ValueError, np.linalg.LinAlgError, FloatingPointError):
        return {}
    if method not in sel.candidates:
        return {}
    return {(m, k): sel.margin(m, k) for m in metrics for k in ks if sel.bias.get((m, k), {}).get(method)}


def _design_ladder(n) -> np.ndarray | None:
    r"""The adaptive ladder :math:`n_0, 2n_0, \dots, n_{max}` the per-user sizes ``n`` were drawn from
    (TORS Algorithm 1: every size seen is the smallest one times a power of two), else ``None``."""
    seen = np.unique(n)
    n0, top = int(seen[0]), int(seen[-1])
    ladder = [n0]
    while ladder[-1] < top:
        ladder.append(2 * ladder[-1])
    ladder = np.array(ladder, dtype=np.int64)
    return ladder if ladder[-1] == top and np.all(np.isin(seen, ladder)) else None


def _simulate_design(P, N, n, M, replacement, gen):
    r"""``(r, n)`` of ``M`` users whose global ranks are drawn from ``P`` (over 1..N) under the data's
    design: one size ``n`` (an int); the adaptive ladder of per-user sizes ``n`` (:func:`_design_ladder`:
    TORS Algorithm 1, the set doubles while the target ranks first, :func:`itemsampling.sampling.
    adaptive_sample_ranks`); or, for other per-user sizes, each user's own size (sizes fixed by the design)."""
    R = 1 + gen.choice(N, size=M, p=P)
    if isinstance(n, int):
        return _sampled(R, N, n, replacement, gen), n
    ladder = _design_ladder(n)
    if ladder is None:
        return _sampled(R, N, n, replacement, gen), n
    return adaptive_sample_ranks(R, N, int(ladder[0]), int(ladder[-1]), rng=gen, replacement=replacement)


def design_margins(r, N, n, pools, metrics, ks, method: str, params=None, rng=None, n_sim: int = N_SIM) -> dict:
    r"""The bias margin of any ``method`` on any design, simulated under the data's own MLE fit: the
    parametric-bootstrap estimate of bias (Efron & Tibshirani 1993, Sec. 10.2). :math:`\widehat P` is the MLE
    of the global rank distribution (EM, TORS Appendix H: it takes per-user sample sizes and pools);
    ``n_sim`` data sets of the data's :math:`M` users are drawn from it with the data's design (one
    size, the adaptive ladder of TORS Algorithm 1, or each user's own size; each simulated user keeps
    the pool :math:`N_u` of a data user: the rank-fraction model of :mod:`.distribution`), the method is
    applied to each (the user bootstrap's replicate machinery, :class:`.bootstrap._Replicator`), and the
    margin is :math:`|\bar T^* - T(\widehat P)|`, the mean simulated error against the metric of the fit
    (the truth of the simulation); for CLS and BV with one sample size (linear in the sampled-rank
    histogram) the bias under the fit in closed form (:func:`_linear_exact`), free of simulation noise.
    Added to both ends of a percentile interval, it moves the interval by
    the estimator's bias where the fit is close to the truth, which is what the identified rows (the
    resolution rule) assume. On validated input; ``{(metric, k): margin}``, ``{}`` if the method or the
    fit fails (the caller then keeps the identification bounds)."""
    params = dict(params or {})
    gen = as_rng(rng)
    replacement = params.get("replacement", True)
    metrics, ks = list(metrics), list(ks)
    dense = {**params, "grid": False}  # the replicates on the distinct (N_u, n_u, r_u) triples
    try:
        P = np.asarray(_fit(r, N, n, "mle", replacement, {}, None).distribution, np.float64)
        P = np.clip(P, 0.0, None)
        P = P / P.sum()
        if isinstance(n, int) and pools is None and method in _LINEAR:  # linear: the bias in closed form
            own = {x: v for x, v in params.items() if x in ("gamma", "replacement")}
            _, b = _linear_exact(P, N, n, metrics, ks, method, own, replacement, r.size)
            return {(m, k): float(abs(b[i, j])) for i, m in enumerate(metrics) for j, k in enumerate(ks)}
        truth = _estimate(r, N, n, metrics, ks, "mle", {"replacement": replacement}, {}, pools)
        keys = []
        for _ in range(n_sim):
            rs, ns = _simulate_design(P, N, n, r.size, replacement, gen)
            nn = np.full(r.size, ns, dtype=np.int64) if isinstance(ns, (int, np.integer)) else ns
            pp = np.zeros(r.size, dtype=np.int64) if pools is None else pools
            keys.append(np.column_stack([pp, nn, rs]))
        allk = np.concatenate(keys)
        rows, inv = np.unique(allk, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        C = np.zeros((n_sim, rows.shape[0]))
        for s in range(n_sim):
            C[s] = np.bincount(inv[s * r.size:(s + 1) * r.size], minlength=rows.shape[0])
        sizes = n if isinstance(n, int) else rows[:, 1]
        rep = _Replicator(N, sizes, rows[:, 1].copy(), rows[:, 2].copy(), C, metrics, ks,
                          pair_pools=None if pools is None else rows[:, 0].copy())
        E = rep.replicates(method, dense)
    except (ValueError, np.linalg.LinAlgError, FloatingPointError):
        return {}
    bias = np.mean(E, axis=0) - truth
    if not np.all(np.isfinite(bias)):
        return {}
    return {(m, k): float(abs(bias[i, j])) for i, m in enumerate(metrics) for j, k in enumerate(ks)}


def _unsimulated_margin(cache, sel, r, N, n, pools, metrics, ks, plan, params, gen) -> dict:
    """The bias margins of auto's only candidate where its selection simulated nothing (per-user sample
    sizes: MLE alone), by :func:`design_margins` under the data's MLE fit, once per call (``cache``)."""
    if "done" not in cache:
        high = [kk for kk in ks if plan[kk][0] == "bootstrap+margin"]
        c = sel.chosen[(metrics[0], high[0])] if high else "mle"
        opts = {x: params[x] for x in ("replacement",) if x in params}
        cache.update(design_margins(r, N, n, pools, metrics, high, c, opts, rng=gen) if high else {})
        cache["done"] = True
    return cache


def _pick(values, j):
    return float(np.atleast_1d(values)[j])


def auto_estimates(sampled_ranks, n_items, sample_size, metrics, k, ci=None, n_boot=200, rng=None,
                   target="population", widen=False, n_sim=N_SIM, candidates=CANDIDATES, interval="kept",
                   **params) -> dict:
    r"""``{metric: AutoEstimate}`` for ``method="auto"`` (module docstring): the estimator chosen per
    metric and cut-off (:func:`select_estimators`, on the first draws of ``rng``), its estimate and,
    with ``ci``, an interval for ``target``. ``interval="kept"`` (default; module docstring, "The
    interval"): per cut-off by :func:`interval_plan`, the identification bounds
    (:func:`~.bounds.identification_bounds`, the same for both targets) below :data:`RESOLVED` kernel
    widths, else the chosen estimator's bootstrap (the user bootstrap, or the test users' parametric
    bootstrap, on the next draws of ``rng``) with each end moved out by the bias margin
    :meth:`AutoSelection.margin`. ``interval="bootstrap"``: the bootstrap everywhere, widened by the
    margin only when ``widen``."""
    check_auto_params(params)
    widen = check_bool(widen, "widen")
    interval = check_interval(interval)
    gen = as_rng(rng)
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    for m in metrics:
        canonical_metric(m)
    r, N, n, pools = _prepare(sampled_ranks, n_items, sample_size, params)
    seq, ks = _ks(k)
    target = check_target(target)
    sel = select_estimators(r, N, n, metrics, ks, rng=gen, replacement=params.get("replacement", True),
                            grid=params.get("grid"), pools=pools, n_sim=n_sim, candidates=candidates)
    ivals, plan, bnd = {}, {}, None
    if ci is not None:
        g = resolve_grid(params.get("grid"), N, n if isinstance(n, int) else int(np.max(n)), ks)
        plan = interval_plan(N, n, ks, pools, g is not None, interval, widen)
        boot_ks = [kk for kk in ks if plan[kk][0] != "bounds"]
        bnd_ks = [kk for kk in ks if plan[kk][0] == "bounds"]
        if bnd_ks:
            bnd = identification_bounds(r, N if pools is None else pools, n, metrics, bnd_ks, ci,
                                        params.get("replacement", True), grid=params.get("grid"))
        chosen = sorted({sel.chosen[(m, kk)] for m in metrics for kk in boot_ks}, key=list(CANDIDATES).index)
        own = {c: _params(c, dict(params)) for c in chosen}
        seed = int(gen.integers(2 ** 63))
        several = conditional_metrics if target == "test-users" else _boot.bootstrap_metrics
        for c in chosen:  # each chosen method with its own settings, on the same replicates (same seed)
            ivals[c] = several(sampled_ranks, n_items, sample_size, metrics, boot_ks, [c], ci=ci, n_boot=n_boot,
                               rng=np.random.default_rng(seed), **own[c])[c]
    out, dm = {}, {}
    for m in metrics:
        est, lo, hi, mar, meth, kind, width = [], [], [], [], [], [], []
        for j, kk in enumerate(ks):
            c = sel.chosen[(m, kk)]
            meth.append(c)
            est.append(sel.estimates[(m, kk)][c])
            kd = plan[kk][0] if ci is not None else None
            b = sel.margin(m, kk) if kd == "bootstrap+margin" or (ci is None and widen) else 0.0
            if kd == "bootstrap+margin" and not sel.bias.get((m, kk)):  # nothing simulated (per-user sizes)
                b = _unsimulated_margin(dm, sel, r, N, n, pools, metrics, ks, plan, params, gen).get((m, kk), b)
            mar.append(b)
            kind.append(kd)
            if ci is not None:
                if kd == "bounds":
                    jb = bnd_ks.index(kk)
                    lo.append(float(bnd.low[m][jb]))
                    hi.append(float(bnd.high[m][jb]))
                else:
                    e, jb = ivals[c][m], boot_ks.index(kk)
                    lo.append(_pick(e.low, jb) - b)
                    hi.append(_pick(e.high, jb) + b)
                width.append(hi[-1] - lo[-1])
                sel.intervals[(m, kk)] = {"kind": kd, "why": plan[kk][1], "width": width[-1]}
        nan = [float("nan")] * len(ks)
        lo, hi, width = (lo, hi, width) if ci is not None else (nan, nan, nan)
        conv = (lambda v: np.array(v)) if seq else (lambda v: v[0])
        ident = [resolves(N, n, kk) for kk in ks]
        out[m] = AutoEstimate(conv(est), conv(lo), conv(hi), float("nan") if ci is None else float(ci),
                              0 if ci is None else int(n_boot), "auto", identified=conv(ident),
                              interval=(np.array(kind, dtype=object) if seq else kind[0]),
                              chosen=conv(meth) if seq else meth[0], margin=conv(mar),
                              widened=bool(ci is not None and any(x == "bootstrap+margin" for x in kind)),
                              selection=sel, width=conv(width))
    return out


def common_choice(selections: list) -> dict:
    r"""One estimator per (metric, k) for several models (a comparison needs the same estimator on
    both sides): the candidate all of them allow with the smallest worst case over the models of the
    error each model's choice minimised (:meth:`AutoSelection.predicted`). Returns ``{(metric, k):
    (method, reason)}``."""
    out = {}
    for mk in selections[0].chosen:
        common = [c for c in selections[0].candidates if all(c in s.candidates for s in selections)]
        if not common:
            raise ValueError("method 'auto': the models share no candidate estimator")
        if all(s.score.get(mk) for s in selections):
            # a candidate one model did not assess (CLS screened out there) counts as infinitely bad
            worst = {c: max(s.score[mk].get(c, np.inf) for s in selections) for c in common}
            c = min(common, key=lambda x: (worst[x], common.index(x)))
            out[mk] = (c, f"{c}: smallest predicted RMSE, worst case over the {len(selections)} models "
                          f"({worst[c]:.3g}; {selections[0].reason[mk].split(': ', 1)[1].split(' (')[0]})")
        else:
            out[mk] = (common[0], selections[0].reason[mk])
    return out


def auto_models(ranks, n_items, sample_size, metrics, k, ci, n_boot, rng, users, paired, n_jobs, progress,
                widen=False, n_sim=N_SIM, candidates=CANDIDATES, interval="kept", **params):
    """:func:`~.bootstrap.bootstrap_models` with ``method="auto"``: one selection per model
    (:func:`select_estimators`), one estimator per metric and cut-off for all models
    (:func:`common_choice`), and each chosen estimator bootstrapped on the *same* replicates (one
    seed), so the comparisons are as for a fixed method. Each model's intervals as
    :func:`auto_estimates` makes them for ``interval`` (the population target): with ``"kept"`` the
    identification bounds of that model's ranks below :data:`RESOLVED` kernel widths and the
    bootstrap widened by that model's bias margin above; with ``"bootstrap"`` the bootstrap, widened
    when ``widen``. The comparisons are the bootstrap intervals of the differences, widened by twice
    the larger margin of the two models when ``widen``."""
    check_auto_params(params)
    widen = check_bool(widen, "widen")
    interval = check_interval(interval)
    gen = as_rng(rng)
    models = list(ranks)
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    seq, ks = _ks(k)
    items_of, size_of = _per_model(n_items, models, "n_items"), _per_model(sample_size, models, "sample_size")
    sels = {}
    for mo in models:
        if progress:
            progress(f"      choosing the estimator for {mo} ({n_sim} simulated data sets per fit)")
        r, N, n, pools = _prepare(ranks[mo], items_of[mo], size_of[mo], params)
        sels[mo] = select_estimators(r, N, n, metrics, ks, rng=gen, replacement=params.get("replacement", True),
                                     grid=params.get("grid"), pools=pools, n_sim=n_sim, candidates=candidates)
    pick = common_choice([sels[mo] for mo in models])
    chosen = sorted({c for c, _ in pick.values()}, key=list(CANDIDATES).index)
    seed = int(gen.integers(2 ** 63))
    res = {c: _boot.bootstrap_models(ranks, n_items, sample_size, metrics, k, c, ci=ci, n_boot=n_boot,
                               rng=np.random.default_rng(seed), users=users, paired=paired, n_jobs=n_jobs,
                               progress=progress, **_params(c, dict(params))) for c in chosen}
    first = res[chosen[0]]

    def margin(mk, c, mos):
        if not widen:
            return 0.0
        return max((max((abs(v) for v in sels[mo].bias.get(mk, {}).get(c, {}).values()), default=0.0) for mo in mos))

    conv = (lambda v: np.array(v)) if seq else (lambda v: v[0])
    estimates, comparisons, reps, dms = {}, {}, {}, {}
    for mo in models:
        estimates[mo] = {}
        reps[mo] = np.empty_like(first.replicates[mo])
        r, N, n, pools = _prepare(ranks[mo], items_of[mo], size_of[mo], params)
        g = resolve_grid(params.get("grid"), N, n if isinstance(n, int) else int(np.max(n)), ks)
        plan = interval_plan(N, n, ks, pools, g is not None, interval, widen)
        bnd_ks = [kk for kk in ks if plan[kk][0] == "bounds"]
        bnd = (identification_bounds(r, N if pools is None else pools, n, metrics, bnd_ks, ci,
                                     params.get("replacement", True), grid=params.get("grid")) if bnd_ks else None)
        for i, m in enumerate(metrics):
            est, lo, hi, mar, meth, kind, width = [], [], [], [], [], [], []
            for j, kk in enumerate(ks):
                c = pick[(m, kk)][0]
                e = res[c].estimates[mo][m]
                kd = plan[kk][0]
                b = (max((abs(v) for v in sels[mo].bias.get((m, kk), {}).get(c, {}).values()), default=0.0)
                     if kd == "bootstrap+margin" else 0.0)
                if kd == "bootstrap+margin" and not sels[mo].bias.get((m, kk)):  # nothing simulated (per-user sizes)
                    b = _unsimulated_margin(dms.setdefault(mo, {}), sels[mo], r, N, n, pools, metrics, ks, plan,
                                            params, gen).get((m, kk), b)
                est.append(_pick(e.estimate, j))
                if kd == "bounds":
                    lo.append(float(bnd.low[m][bnd_ks.index(kk)]))
                    hi.append(float(bnd.high[m][bnd_ks.index(kk)]))
                else:
                    lo.append(_pick(e.low, j) - b)
                    hi.append(_pick(e.high, j) + b)
                mar.append(b)
                meth.append(c)
                kind.append(kd)
                width.append(hi[-1] - lo[-1])
                sels[mo].intervals[(m, kk)] = {"kind": kd, "why": plan[kk][1], "width": width[-1]}
                reps[mo][:, i, j] = res[c].replicates[mo][:, i, j]
            sel = sels[mo]
            sel.reason.update({(m, kk): pick[(m, kk)][1] for kk in ks})
            sel.chosen.update({(m, kk): pick[(m, kk)][0] for kk in ks})
            estimates[mo][m] = AutoEstimate(conv(est), conv(lo), conv(hi), float(ci), int(n_boot), "auto",
                                            identified=conv([resolves(N, n, kk) for kk in ks]),
                                            interval=np.array(kind, dtype=object) if seq else kind[0],
                                            chosen=conv(meth), margin=conv(mar), widened="bootstrap+margin" in kind,
                                            selection=sel, width=conv(width))
    for pair, per_metric in first.comparisons.items():
        comparisons[pair] = {}
        for m in metrics:
            f = {}
            for name in ("difference", "low", "high", "p_value", "estimate_a", "estimate_b"):
                vals = []
                for j, kk in enumerate(ks):
                    c = pick[(m, kk)][0]
                    v = _pick(getattr(res[c].comparisons[pair][m], name), j)
                    b = margin((m, kk), c, list(pair))
                    vals.append(v - 2 * b if name == "low" else v + 2 * b if name == "high" else v)
                f[name] = conv(vals)
            comparisons[pair][m] = ModelComparison(f["difference"], f["low"], f["high"], f["p_value"],
                                                   f["estimate_a"], f["estimate_b"], float(ci), int(n_boot), "auto",
                                                   per_metric[m].paired)
    return ModelsBootstrap(estimates, comparisons, first.groups, reps)


# ---------------------------------------------------------------------------------------------
# the bootstrap entry points, with method="auto" (re-exported by itemsampling.estimators)
# ---------------------------------------------------------------------------------------------
def bootstrap_metric(sampled_ranks, n_items, sample_size, metric, k, method, ci: float = 0.95, n_boot: int = 200,
                     rng=None, **params):
    """:func:`.bootstrap.bootstrap_metric`, and ``method="auto"`` (an :class:`~.bootstrap.AutoEstimate`;
    ``widen`` as :func:`auto_estimates`)."""
    if method != "auto":
        return _boot.bootstrap_metric(sampled_ranks, n_items, sample_size, metric, k, method, ci=ci, n_boot=n_boot,
                                      rng=rng, **params)
    return auto_estimates(sampled_ranks, n_items, sample_size, [metric], k, _boot.check_confidence(ci, "ci"),
                          _boot._check_n_boot(n_boot), rng, **params)[metric]


def bootstrap_metrics(sampled_ranks, n_items, sample_size, metrics, k, methods, ci: float = 0.95,
                      n_boot: int = 200, rng=None, **params) -> dict:
    """:func:`.bootstrap.bootstrap_metrics`; ``"auto"`` among ``methods`` is chosen per metric@K
    (:func:`auto_estimates`), the other methods on the bootstrap's own replicates."""
    methods = [methods] if isinstance(methods, str) else list(methods)
    if "auto" not in methods:
        return _boot.bootstrap_metrics(sampled_ranks, n_items, sample_size, metrics, k, methods, ci=ci, n_boot=n_boot,
                                       rng=rng, **params)
    gen = as_rng(rng)
    ci = _boot.check_confidence(ci, "ci")
    n_boot = _boot._check_n_boot(n_boot)
    auto_kw = {x: v for x, v in params.items() if x in AUTO_OPTIONS + AUTO_ONLY}
    check_auto_params({x: v for x, v in params.items() if x not in AUTO_ONLY})
    rest = [m for m in methods if m != "auto"]
    out = {}
    if rest:
        out = _boot.bootstrap_metrics(sampled_ranks, n_items, sample_size, metrics, k, rest, ci=ci, n_boot=n_boot,
                                      rng=gen, **{x: v for x, v in params.items() if x in AUTO_OPTIONS})
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    auto = auto_estimates(sampled_ranks, n_items, sample_size, metrics, k, ci, n_boot, gen, **auto_kw)
    return {m: (auto if m == "auto" else out[m]) for m in methods}


def compare_estimates(sampled_ranks_a, sampled_ranks_b, n_items, sample_size, metric, k, method, ci: float = 0.95,
                      n_boot: int = 200, rng=None, paired: bool = True, sample_size_b=None, **params):
    """:func:`.bootstrap.compare_estimates`; with ``method="auto"`` one estimator per cut-off for both
    models (:func:`common_choice`), bootstrapped as for a fixed method."""
    if method != "auto":
        return _boot.compare_estimates(sampled_ranks_a, sampled_ranks_b, n_items, sample_size, metric, k, method,
                                       ci=ci, n_boot=n_boot, rng=rng, paired=paired, sample_size_b=sample_size_b,
                                       **params)
    if not isinstance(paired, (bool, np.bool_)):
        raise ValueError(f"paired must be True or False, got {paired!r}")
    sizes = {"A": sample_size, "B": sample_size if sample_size_b is None else sample_size_b}
    res = bootstrap_models({"A": sampled_ranks_a, "B": sampled_ranks_b}, n_items, sizes, [metric], k, "auto", ci=ci,
                           n_boot=n_boot, rng=rng, paired=bool(paired), **params)
    return res.comparisons[("A", "B")][metric]


def bootstrap_models(ranks, n_items, sample_size, metrics, k, method, ci: float = 0.95, n_boot: int = 200, rng=None,
                     users=None, paired=None, n_jobs=None, progress=None, **params):
    """:func:`.bootstrap.bootstrap_models`; with ``method="auto"`` :func:`auto_models`."""
    if method != "auto":
        return _boot.bootstrap_models(ranks, n_items, sample_size, metrics, k, method, ci=ci, n_boot=n_boot, rng=rng,
                                      users=users, paired=paired, n_jobs=n_jobs, progress=progress, **params)
    if not isinstance(ranks, dict) or not ranks:
        raise ValueError("ranks must be a non-empty dict {model: sampled ranks}")
    return auto_models(ranks, n_items, sample_size, metrics, k, _boot.check_confidence(ci, "ci"),
                       _boot._check_n_boot(n_boot), rng, users, paired, n_jobs, progress, **params)


# ---------------------------------------------------------------------------------------------
# the validation study (guide, "Which estimator?"; benchmarks/auto_validation.py at full size)
# ---------------------------------------------------------------------------------------------
#: the rank models of the validation: Beta(a) of the book (mapping.sample_beta_ranks) and a popularity-like step
VALIDATION_MODELS = ("0.3", "0.6", "step")
#: the estimators the validation sets beside auto's candidates (not candidates: their cost, module docstring)
VALIDATION_OTHERS = ("mes", "mn_mle")


def draw_validation_ranks(model: str, n_items: int, n_users: int, rng=None) -> np.ndarray:
    """Global ranks of ``n_users`` users from a validation rank model: ``"a"`` (a number as a string) the
    book's Beta(a) model (:func:`itemsampling.mapping.sample_beta_ranks`), ``"step"`` 40 % of the targets
    uniform in the top 2 % of the items (a popularity-like step) and the rest Beta(0.6)."""
    gen = as_rng(rng)
    N = check_int(n_items, "n_items", low=2)
    M = check_int(n_users, "n_users", low=1)
    if model == "step":
        top = gen.random(M) < 0.4
        return np.where(top, gen.integers(1, max(2, N // 50) + 1, M), sample_beta_ranks(0.6, N, M, rng=gen))
    try:
        a = float(model)
    except (TypeError, ValueError):
        raise ValueError(f"model must be 'step' or a Beta parameter a > 0 as a string, got {model!r}") from None
    return sample_beta_ranks(a, N, M, rng=gen)


def validation_study(models=VALIDATION_MODELS, items=(250, 2450, 9800), users=(500, 5000), ks=(10, 50),
                     metrics=("recall", "ndcg"), sample_size: int = 50, repeats: int = 10, seed: int = 0,
                     n_sim: int = N_SIM, others=VALIDATION_OTHERS, progress=None) -> list:
    r"""Auto's pick against every estimator on simulated data whose truth is known (the guide's validation grid):
    for each rank model (:func:`draw_validation_ranks`), catalogue size :math:`N`, number of users
    :math:`M`, ``repeats`` data sets of :math:`M` users (global ranks, then sampled ranks through the
    kernel with replacement), each candidate's and each of ``others``' estimate, and auto's pick
    (:func:`select_estimators`, seeded by the repeat). One row per cell (model, N, M, K) with
    ``errors``: ``{estimator or "auto": (repeats, metrics) array}`` of relative errors (estimate minus
    the users' own metric, over the cell's mean true metric) and ``picks`` (auto's choice per repeat and
    metric). The relative RMSE of a cell is :func:`validation_rmse`."""
    reps = check_int(repeats, "repeats", low=1)
    n = check_int(sample_size, "sample_size", low=2)
    metrics, ks = list(metrics), [int(k) for k in ks]
    names = tuple(CANDIDATES) + tuple(others)
    rows = []
    for im, model in enumerate(models):
        for N in items:
            for M in users:
                est = {c: [] for c in names + ("auto",)}
                truth, picks = [], []
                for j in range(reps):
                    g = np.random.default_rng([seed, im, N, M, j])
                    R = draw_validation_ranks(model, N, M, g)
                    r = 1 + g.binomial(n - 1, (R - 1) / (N - 1))
                    truth.append([[float(np.mean(metric_function(m, k, N)(R))) for k in ks] for m in metrics])
                    s = select_estimators(r, N, n, metrics, ks, rng=np.random.default_rng([seed, j]), n_sim=n_sim)
                    h = np.bincount(r, minlength=n + 1)[1:].astype(np.float64)
                    for c in CANDIDATES:  # CLS where auto screened it out: its estimate all the same
                        est[c].append([[s.estimates[(m, k)].get(c) if c in s.estimates[(m, k)] else
                                        float(h @ _linear_vectors(N, n, [m], [k], c, _params(c, {}), None)[:, 0, 0])
                                        / M for k in ks] for m in metrics])
                    cache: dict = {}
                    for c in others:
                        est[c].append(_estimate(r, N, n, metrics, ks, c, {}, cache, None))
                    est["auto"].append([[s.estimates[(m, k)][s.chosen[(m, k)]] for k in ks] for m in metrics])
                    picks.append([[s.chosen[(m, k)] for k in ks] for m in metrics])
                T = np.array(truth)                       # (reps, metrics, ks)
                scale = T.mean(axis=0)
                for ik, k in enumerate(ks):
                    errs = {c: (np.array(v, np.float64)[:, :, ik] - T[:, :, ik]) / scale[:, ik] for c, v in est.items()}
                    rows.append({"model": model, "N": N, "n": n, "width": N / (n - 1), "M": M, "K": k, "repeats": reps,
                                 "errors": errs, "picks": [p[i][ik] for p in picks for i in range(len(metrics))]})
                if progress:
                    progress(f"validation: model {model}, N = {N}, M = {M} done")
    return rows


def validation_rmse(errors, idx=None) -> float:
    """Relative RMSE (%) of a cell's ``(repeats, metrics)`` relative errors, averaged over the metrics;
    ``idx`` resamples the repeats (a bootstrap replicate)."""
    e = np.asarray(errors, np.float64)
    if idx is not None:
        e = e[idx]
    out = 100 * np.mean(np.sqrt(np.mean(e ** 2, axis=-2)), axis=-1)
    return float(out) if np.ndim(out) == 0 else out


# ---------------------------------------------------------------------------------------------
# the coverage study of the interval (guide, Table G.4c; benchmarks/auto_coverage.py at full size)
# ---------------------------------------------------------------------------------------------
#: the targets of the coverage study
COVERAGE_TARGETS = TARGETS
#: users drawn once per rank model and catalogue size for the population truth (Monte Carlo se below 4e-4)
TRUTH_USERS = 2_000_000


def _coverage_lower(hits: int, total: int, level: float = 0.95) -> float:
    """The exact one-sided (Clopper-Pearson) lower confidence bound on a coverage of ``hits`` in ``total``."""
    from scipy import stats

    return 0.0 if hits == 0 else float(stats.beta.ppf(1.0 - level, hits, total - hits + 1))


def coverage_study(models=VALIDATION_MODELS, items=(250, 2450, 9800), users=(500, 5000), ks=(10, 50),
                   metrics=("recall", "ndcg"), sample_size: int = 50, repeats: int = 100, ci: float = 0.95,
                   n_boot: int = 100, n_sim: int = N_SIM, floor: float = 0.90, today: bool = True, seed: int = 0,
                   truth_users: int = TRUTH_USERS, resolved: float = RESOLVED, kinds=("bounds", "bootstrap+margin"),
                   progress=None) -> list:
    r"""The coverage of ``method="auto"``'s kept interval (module docstring, "The interval") for both
    targets on data whose truth is known: for each rank model (:func:`draw_validation_ranks`), catalogue
    size :math:`N`, number of users :math:`M` and cut-off :math:`K`, ``repeats`` data sets of :math:`M`
    users (global ranks, sampled ranks with replacement at ``sample_size``), each drawn from
    ``numpy.random.default_rng([seed, model index, N, M, K, repeat])``. Where :func:`interval_plan`
    gives the bounds, :func:`~.bounds.identification_bounds` (no estimator run, so no bootstrap); else
    :func:`auto_estimates` with ``ci`` for each target (``n_boot`` replicates, ``n_sim`` simulated data
    sets per fit). The population truth is the metric of ``truth_users`` users drawn once per model and
    :math:`N`; the test-users truth the users' own :math:`\frac1M\sum_u F(R_u)`.

    With ``today`` the study also measures today's interval, the chosen estimator's plain bootstrap
    (``interval="bootstrap"``; for the bootstrap cut-offs it is the kept interval less the margin, on the
    same replicates, so it is free there; for the bounds cut-offs it costs one auto call per target), and
    the bootstrap widened by the margin in the bounds cut-offs too (``margin_*``: what the rule would give
    there with a smaller ``resolved``, the multiple of :math:`N/(n-1)` of :func:`interval_plan`). Only the
    cells whose kind of interval is in ``kinds`` are run (``("bounds",)``: no estimator, no bootstrap).

    One row per cell, metric and target: ``model, N, n, width`` (:math:`N/(n-1)`), ``M, K, metric, target,
    kind`` (the kind of interval), ``repeats, hits, coverage, se`` (the Monte Carlo standard error
    :math:`\sqrt{c(1-c)/\text{repeats}}`), ``lower`` (the exact one-sided 95 % lower confidence bound on the
    coverage), ``p_below`` (the exact binomial test of a coverage of at least ``floor``: :math:`\Pr(X \le
    \text{hits})`, :math:`X \sim` Binomial(repeats, floor)), ``width`` of the kept interval (mean), and with
    ``today`` ``today_hits, today_coverage, today_width``."""
    reps = check_int(repeats, "repeats", low=1)
    n = check_int(sample_size, "sample_size", low=2)
    n_boot = _boot._check_n_boot(n_boot)
    ci = _boot.check_confidence(ci, "ci")
    today = check_bool(today, "today")
    truth_users = check_int(truth_users, "truth_users", low=1)
    floor = _boot.check_confidence(floor, "floor")
    metrics, ks = [canonical_metric(m) for m in metrics], [check_int(k, "k", low=1) for k in ks]
    from scipy import stats

    rows = []
    for im, model in enumerate(models):
        for N in items:
            N = check_int(N, "items", low=2)
            if not any(interval_plan(N, n, [K], resolved=resolved)[K][0] in kinds for K in ks):
                continue
            Rt = draw_validation_ranks(model, N, truth_users, np.random.default_rng([seed, im, N, 1]))
            pop = {(m, k): float(np.mean(metric_function(m, k, N)(Rt))) for m in metrics for k in ks}
            del Rt
            for M in users:
                for K in ks:
                    kind = interval_plan(N, n, [K], resolved=resolved)[K][0]
                    if kind not in kinds:
                        continue
                    acc = {(m, t): {"hits": 0, "width": [], "today_hits": 0, "today_width": [], "margin_hits": 0,
                                    "margin_width": []} for m in metrics for t in COVERAGE_TARGETS}
                    for j in range(reps):
                        g = np.random.default_rng([seed, im, N, M, K, j])
                        R = draw_validation_ranks(model, N, M, g)
                        r = 1 + g.binomial(n - 1, (R - 1) / (N - 1))
                        truth = {"population": {m: pop[(m, K)] for m in metrics},
                                 "test-users": {m: float(np.mean(metric_function(m, K, N)(R))) for m in metrics}}
                        kept, plain, wide = {}, {}, {}
                        if kind == "bounds":
                            b = identification_bounds(r, N, n, metrics, K, ci)
                            for t in COVERAGE_TARGETS:
                                kept[t] = {m: (b.low[m], b.high[m]) for m in metrics}
                        for t in COVERAGE_TARGETS:
                            if kind == "bounds" and not today:
                                continue
                            a = auto_estimates(r, N, n, metrics, K, ci, n_boot, np.random.default_rng([seed, j, 1]),
                                               target=t, n_sim=n_sim, interval="bootstrap", widen=True)
                            wide[t] = {m: (a[m].low, a[m].high) for m in metrics}
                            if kind != "bounds":  # the kept interval here (interval_plan): bootstrap + margin
                                kept[t] = wide[t]
                            plain[t] = {m: (a[m].low + a[m].margin, a[m].high - a[m].margin) for m in metrics}
                        for m in metrics:
                            for t in COVERAGE_TARGETS:
                                lo, hi = kept[t][m]
                                d = acc[(m, t)]
                                d["hits"] += int(lo <= truth[t][m] <= hi)
                                d["width"].append(hi - lo)
                                if today:
                                    for key, iv in (("today", plain), ("margin", wide)):
                                        lo, hi = iv[t][m]
                                        d[f"{key}_hits"] += int(lo <= truth[t][m] <= hi)
                                        d[f"{key}_width"].append(hi - lo)
                    for m in metrics:
                        for t in COVERAGE_TARGETS:
                            d = acc[(m, t)]
                            c = d["hits"] / reps
                            row = {"model": model, "N": N, "n": n, "width": N / (n - 1), "M": M, "K": K, "metric": m,
                                   "target": t, "kind": kind, "repeats": reps, "hits": d["hits"], "coverage": c,
                                   "se": float(np.sqrt(c * (1 - c) / reps)), "lower": _coverage_lower(d["hits"], reps),
                                   "p_below": float(stats.binom.cdf(d["hits"], reps, floor)),
                                   "mean_width": float(np.mean(d["width"]))}
                            if today:
                                for key in ("today", "margin"):
                                    row.update({f"{key}_hits": d[f"{key}_hits"],
                                                f"{key}_coverage": d[f"{key}_hits"] / reps,
                                                f"{key}_width": float(np.mean(d[f"{key}_width"]))})
                            rows.append(row)
                    if progress:
                        progress(f"coverage: model {model}, N = {N}, M = {M}, K = {K} ({kind}) done")
    return rows
