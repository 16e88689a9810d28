r"""Plan an evaluation before running it: which design, how many users, how many sampled items.

:func:`plan_evaluation` predicts, for every design, the half-width of the interval of a metric (or of the
difference of two models' metrics with ``compare``) and the cost in *item scorings* (one model score of one
item for one user), then picks the cheapest design that meets ``margin`` or the most accurate one within
``budget``.

**What the interval is for** (``target``, :data:`TARGETS`), as in ``estimate``: ``"test-users"``, the
:math:`M` users' own metric :math:`T = \frac1M\sum_u F(R_u)`; ``"population"`` (the default, as
``estimate``'s default interval, the user bootstrap), the metric :math:`\mathbb E\,F(R)` of the population
the :math:`M` users were drawn from. The designs' errors about :math:`T` below are the same for both; the
population target adds :math:`T`'s own error about :math:`\mathbb E\,F(R)`, variance :math:`\sigma^2/M`,
uncorrelated with the item sampling (which is drawn given the users), and samples users without the
finite-population correction (:math:`\sigma^2/m`), so that a plan's half-width is a prediction of the
interval ``estimate`` prints at its defaults, not of a narrower one. The designs, for :math:`T`:

* **full ranking** of every user: :math:`T` exactly (half-width 0; for the population
  :math:`z\sigma/\sqrt M`); cost :math:`MN`.
* **user sampling**: :math:`m` users drawn without replacement, fully ranked. TORS Eq. 46-47 give
  :math:`m_0 = \sigma^2 (z_{\alpha/2}/e)^2` for a proportion (:math:`\sigma^2 = p(1-p)`); here
  :math:`\sigma^2` is the variance of :math:`F(R_u)` over the users (any metric) and, since the
  :math:`m` users come from a finite population of :math:`M`, the half-width is
  :math:`z\,\sigma\sqrt{(M-m)/(m(M-1))}` (finite-population correction, so :math:`m = M` gives 0; for the
  population :math:`z\sigma/\sqrt m`).
  With ``compare`` the per-user variance is that of :math:`F(R^A_u) - F(R^B_u)` under independent
  models, the assumption of TORS Eq. 51-52. Cost :math:`mN`.
* **item sampling**: every user, :math:`n` sampled items (target included), one estimator. The
  prediction is *not* a formula for exact ranks: the :math:`M` users' global ranks are simulated
  from the pilot's rank distribution, and the design is run ``n_sim`` times on them - sampled ranks
  drawn through the kernel (:func:`itemsampling.sampling.sample_ranks`), the estimator applied
  (:func:`itemsampling.estimators.estimate_metrics`) - giving the error's bias :math:`b` and
  variance :math:`V` about :math:`T`; the half-width is the :math:`h` with
  :math:`P(|N(b, V)| \le h) = ` ``confidence`` (:func:`normal_error_quantile`). A user bootstrap
  would miss :math:`b`, which dominates the error of the shrinking estimators (BV at
  :math:`\gamma = 0.1` on few sampled items). Cost :math:`Mn`.
* **adaptive item sampling** (TORS Sec. 6, Algorithm 1): :math:`n_0` items, doubled while the
  target ranks first, up to :math:`n_{max}`; run the same way with
  :func:`itemsampling.sampling.adaptive_sample_ranks` and the MLE with per-user sizes. Cost
  :math:`\sum_u n_u`, the sampled items that TORS Eq. 44 apportions to the resolved users
  (:func:`itemsampling.sampling.adaptive_sampling_cost`).
* **adaptive ladders that resolve the cut-off** (the default, ``adaptive=None``): the ladders
  :math:`(n_0, n_{max})` whose :math:`n_{max}` is the first doubling of :math:`n_0` with
  :math:`K \ge c\,N/(n_{max}-1)` (:func:`resolving_ladders`; :math:`n_{max} \ge 1 + 2N/K`), for
  :math:`n_0` in ``sizes`` and the :math:`\lceil n^*/2^j \rceil` that end exactly at the smallest
  resolving size :math:`n^*`; each one's expected cost in closed form under every fit
  (:func:`expected_adaptive_size`, the worst case over the fits), the ``n_ladders`` cheapest simulated,
  and, when none meets ``margin`` on every user, the most accurate one's :math:`n_{max}` doubled (at
  most twice). Such a design's own sampled ranks identify the metric, whatever the pilot.
* **the fixed size that resolves the cut-off**, :math:`n^*`: listed with its cost, and simulated
  (a quarter of ``n_sim`` runs, at least 5, on the rank grid) only when it or its user + item mix on
  :math:`M/4` users could be chosen (:attr:`EvaluationPlan.skipped` otherwise): its estimator's time
  grows with :math:`n`.
* **user + item sampling**: :math:`m` of the :math:`M` users, :math:`n` items each. The error is
  the item-sampling error on :math:`m` users, variance :math:`V M/m` (per-user noise averaged over
  :math:`m` instead of :math:`M` users), bias :math:`b`, plus the user-sampling error, variance
  :math:`\sigma^2 (M-m)/(m(M-1))` (:math:`\sigma^2/m` for the population), the two uncorrelated (the second is fixed by which users are
  drawn, the first has mean :math:`b` whichever they are). Cost :math:`mn`. Only
  :math:`m \ge M/4` is offered: on fewer users the estimators' errors stop scaling as
  :math:`1/m` (a bounded estimate from few sampled ranks) and :math:`VM/m` overstates them.
  **User + adaptive sampling** is the same mix with an adaptive ladder (:math:`m` users, each with the
  ladder's expected cost); with ``margin`` only the fewest users that meet it are listed.

The rank distribution comes from a **pilot** (sampled ranks of a small run, in the format of
``python -m itemsampling estimate``) or, without one, from a **stated Beta prior** on the rank
fraction, :math:`(R - 1)/N \sim \mathrm{Beta}(a, b)` discretised onto :math:`1..N` (one
distribution; what follows is about pilots only).

**A pilot gives several plausible distributions, not one.** Every fit of :math:`P(R)` agrees with the
pilot's sampled-rank law, but the fits differ inside one kernel width :math:`N/(n-1)`, where the
estimators' biases live; the nonparametric MLE (Jin et al. 2021 Eq. 20-21) moreover reproduces
itself there, so under it a learnt estimator looks unbiased and a fixed correction's bias is
whatever that fit makes it (the trap of issue 29: BV predicted 0.0100, realised 0.0161). So the
designs are simulated under the fits of ``method="auto"``
(:func:`itemsampling.estimators.auto.plausible_fits`, module :mod:`itemsampling.estimators.auto`): the
ML Beta rank model, the Betas at the ends of the 95 % profile-likelihood interval of its shape, the ML
two-Beta mixture, each kept only if Pearson's chi-square test does not reject it at the 0.01 level;
the nonparametric MLE and MES fits when all are rejected. Each fit gets its own simulated
population of :math:`M` users and its own ``n_sim`` runs; a design's half-width under a fit is
computed as above, and its **predicted half-width is the worst case (the largest) over the fits**;
:attr:`Design.half_widths` keeps every fit's, :attr:`Design.fit` names the worst.

*Why the worst case and not the Akaike-weighted mean that auto uses to choose.* Auto compares
candidates with one another: a pessimistic fit that makes every fixed correction look biased
distorts the comparison, so there a weighted mean of the errors is the better ranking. A half-width
is a promise about one design's error, and the plan spends it: it picks the cheapest design whose
promise meets the margin. A fit the data do not reject may be the truth, and if it is, any
prediction below its half-width is a promise broken where nobody can see it (an understated
half-width makes the plan choose a design that misses the margin); the weights
:math:`w_f \propto e^{-\mathrm{AIC}_f/2}` only say which fit is likelier, and a weighted mean is
below the worst fit's value whenever that fit is not the likeliest. An overstated half-width costs
item scorings, visibly, and shrinks as the pilot grows (the profile interval narrows and the fits
agree). So the plan takes the largest; the guide's Table G.5b measures what that costs on data whose
truth is known. With ``pilot_fits="mle"`` the single MLE fit is used instead (the plan before; kept
so that the two can be set side by side).

**A pilot that does not resolve the cut-off identifies only the designs that do not rest on it.** A pilot
of sampled ranks at size :math:`n_0` *resolves* the cut-off :math:`K` when :math:`K \ge c\,N/(n_0 - 1)`,
:math:`c` = :data:`itemsampling.kernel.RESOLVED` (the rule of ``method="auto"``'s interval; a metric over
the whole list, ``k=None``, counts as resolved). Below it the metric is not identified by the pilot
(Chapter 7; :mod:`itemsampling.estimators.bounds`: rank distributions that differ only in how they
spread the mass inside the top kernel width give the same sampled-rank law up to sampling error, and
metrics at :math:`K` far apart), so no fit of the pilot knows :math:`P(R)` at ranks :math:`\le K`,
and every prediction that depends on it - an item-sampling design's bias, user sampling's per-user
spread of :math:`F(R)` - is a guess that the worst case over the fits does not bound (the guide's
Table G.5b shows the single-fit plan missing there). So, with ``pilot_fits="plausible"``, those designs
are still simulated and listed with their half-widths but marked not identified
(:attr:`Design.identified` ``False``) and never chosen (under ``margin`` or ``budget``). Identified, and
chosen by the usual rule among themselves:

* full ranking;
* **user sampling sized by the worst case** (:func:`worst_case_user_bound`, :func:`worst_case_users`),
  which needs no rank distribution at all: per-user variance :math:`\le 1/4` for Recall / HR (TORS
  Eq. 45-47 at :math:`p = 1/2`, with the finite-population correction for the test users), Hoeffding's bound (Eq. 48) for
  NDCG, AP and AUC, bounded in :math:`[0, 1]`; at the margin's size and at :math:`M/16, M/4, M/2`
  (:attr:`Design.worst_case` names the bound);
* **adaptive designs judged at their own resolution**: one whose :math:`n_{max}` resolves :math:`K`
  (:func:`itemsampling.kernel.resolves` at :math:`n_{max}`) produces sampled ranks that identify the
  metric, whatever the pilot; its half-width is still the simulation under the pilot's fits.

:attr:`EvaluationPlan.unresolved` says why: the pilot's resolution, :math:`K`, and the smallest pilot
size that resolves it, :math:`n_0 \ge 1 + cN/K` (:func:`resolving_pilot_size`). With ``compare`` one
unresolved pilot is enough. A ``prior`` is a stated distribution, not an estimate, and is unaffected; so
is ``pilot_fits="mle"``, the plan before, kept for the comparison.

**Every design names its run.** :attr:`Design.call` is the :func:`itemsampling.evaluation.sampled_ranks`
call that runs it on a reader's model (``design="full"`` for full ranking and, with ``n_users``, user
sampling; ``"fixed"`` with ``sample_size`` for item sampling, with ``n_users`` too for user + item
sampling; ``"adaptive"`` with ``initial_size`` and ``max_size``); ``format_plan`` prints the chosen one's.

With ``compare`` and two pilots, each model's fits give their own populations and runs (the cost
grows with the sum of the fits, not their product); the difference's error under a *pair* of fits
is model A's run minus model B's run of the same index (independent draws), so the half-width is
the worst case over *every pair* (at most 4 x 4 = 16), at the cost of arithmetic only. The
fixed-prior corrections (BV, CLS) are linear in the sampled-rank histogram, so each run's estimate
is the histogram times their corrected vectors, built once per size
(:func:`itemsampling.estimators.auto._linear_vectors`); the learnt ones (MLE, ...) are refitted each
run. The guide chapter "Correcting your own evaluation" runs every design on simulated data and
sets the predicted half-widths beside the realised errors (Table G.5 for a prior, Table G.5b for a
pilot from a population whose truth is known).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass, field, replace

import numpy as np
from scipy import optimize, stats

from ._validation import (  # TARGETS: what a plan's half-widths are for, as estimate's intervals
    TARGETS, ResolutionWarning, as_rng, check_int, check_open_unit, check_probability_vector, check_ranks, check_real,
    check_target,
)
from .inputs import InputError, k_value, read_rank_file, seed_value
from .evaluation import design_call
from .kernel import RESOLVED, resolves
from .metrics import canonical_metric, metric_function
from .sampling import adaptive_sample_ranks, adaptive_sizes, sample_ranks
from .users import hoeffding_margin

__all__ = ["Design", "EvaluationPlan", "plan_evaluation", "beta_rank_distribution", "normal_error_quantile",
           "pilot_resolves", "resolving_pilot_size", "worst_case_user_bound", "worst_case_users",
           "DEFAULT_SIZES", "DEFAULT_ESTIMATORS", "PILOT_FITS", "TARGETS", "expected_adaptive_size", "resolving_ladders",
           "design_kwargs"]

#: Sampled-set sizes tried by default (those below N).
DEFAULT_SIZES = (50, 100, 200, 500)
#: Estimators tried for fixed-size item sampling by default (MLE: the command's default; BV with
#: gamma = 0.1: the corrected metric of Krichene & Rendle).
DEFAULT_ESTIMATORS = ("mle", "bv")
#: The fits of P(R) a pilot gives (``pilot_fits``): the smooth fits of ``method="auto"`` that the pilot
#: does not reject (each design's half-width the worst case over them), or the single nonparametric MLE fit.
PILOT_FITS = ("plausible", "mle")
_EST_PARAMS = {"bv": {"gamma": 0.1}, "bv_mle": {"gamma": 0.1}, "bv_mes": {"gamma": 0.1}}


def _params(methods) -> dict:
    return {"gamma": 0.1} if any(m in _EST_PARAMS for m in methods) else {}


@dataclass(frozen=True)
class Design:
    r"""One design with its predicted half-width and cost.

    ``design`` is ``"full ranking"``, ``"user sampling"``, ``"item sampling"``,
    ``"adaptive item sampling"`` or ``"user + item sampling"``; ``users`` the users evaluated
    (:math:`m`), ``sample_size`` the sampled-set size :math:`n` (for adaptive sampling
    :math:`n_{max}`, with ``initial_size`` :math:`n_0`), ``estimator`` the estimator (``None`` for
    full rankings), ``half_width`` the predicted half-width at the plan's confidence, ``cost`` the
    item scorings, ``bias`` the simulated bias of the estimator (0 for full rankings) under ``fit``, the
    fit of :math:`P(R)` (with ``compare`` the pair of fits, ``"A:f, B:g"``) under which the half-width
    is the largest, and ``half_widths`` the half-width under each fit (``half_width`` is their maximum;
    module docstring). With a prior or ``pilot_fits="mle"`` there is one fit (``"prior"``, ``"mle"``).
    ``identified`` is ``False`` for a design whose prediction needs :math:`P(R)` at ranks :math:`\le K`
    planned from a pilot that does not resolve the cut-off (module docstring): listed, never chosen.
    ``worst_case`` names the bound of a user-sampling design sized without any rank distribution
    (:func:`worst_case_user_bound`), or of a mixed design's user sample so sized (below the pilot's
    resolution, where its :math:`n` resolves :math:`K`); ``None`` otherwise. ``call`` is the
    :func:`itemsampling.evaluation.sampled_ranks` call that runs the design on a reader's model (for each
    model with ``compare``).
    """

    design: str
    users: int
    sample_size: int | None
    estimator: str | None
    half_width: float
    cost: float
    initial_size: int | None = None
    bias: float = 0.0
    fit: str | None = None
    half_widths: dict = field(default_factory=dict, hash=False)
    identified: bool = True
    worst_case: str | None = None
    call: str = ""

    @property
    def label(self) -> str:
        if self.design == "full ranking":
            return f"full ranking, all {self.users:,} users"
        if self.design == "user sampling":
            return (f"user sampling, {self.users:,} users fully ranked"
                    + ("" if self.worst_case is None else f" (worst case: {self.worst_case})"))
        if self.design == "adaptive item sampling":
            return (f"adaptive item sampling, n0 = {self.initial_size}, nmax = {self.sample_size}, "
                    f"{self.users:,} users, {self.estimator}")
        if self.design == "item sampling":
            return f"item sampling, n = {self.sample_size}, all {self.users:,} users, {self.estimator}"
        users = f"{self.users:,} users" + ("" if self.worst_case is None else f" (worst case: {self.worst_case})")
        if self.design == "user + adaptive sampling":
            return (f"user + adaptive sampling, {users}, n0 = {self.initial_size}, nmax = {self.sample_size}, "
                    f"{self.estimator}")
        if self.worst_case is not None:
            return f"user + item sampling, {users}, n = {self.sample_size}, {self.estimator}"
        return f"user + item sampling, {self.users:,} users, n = {self.sample_size}, {self.estimator}"


@dataclass
class EvaluationPlan:
    """The designs of :func:`plan_evaluation` and the chosen one (``None`` when none qualifies:
    no design meets ``margin``).

    ``fits``: model (``"A"``, and ``"B"`` with ``compare``) -> the fits of :math:`P(R)` simulated
    under; ``fit_tests``: model -> each smooth fit's chi-square test of the pilot
    (:func:`itemsampling.estimators.auto.goodness_of_fit`: ``chi2``, ``df``, ``p``, ``kept``, ``aic``,
    ``weight``; empty for a prior or ``pilot_fits="mle"``); ``fallback``: model -> why the
    nonparametric fits were used ("" when a smooth fit was kept); ``truths`` and ``user_sds``: fit (or
    pair) -> the simulated users' metric and its per-user standard deviation (``truth`` and
    ``user_sd`` are those of the first fit, the ML one); ``unresolved``: why the sampled designs are not
    identified (a pilot that does not resolve the cut-off; module docstring), "" when they are."""

    n_items: int
    n_users: int
    metric: str
    k: int | None
    confidence: float
    margin: float | None
    budget: float | None
    source: str
    compare: bool
    truth: float
    user_sd: float
    designs: list = field(default_factory=list)
    chosen: Design | None = None
    fits: dict = field(default_factory=dict)
    fit_tests: dict = field(default_factory=dict)
    fallback: dict = field(default_factory=dict)
    truths: dict = field(default_factory=dict)
    user_sds: dict = field(default_factory=dict)
    unresolved: str = ""
    skipped: list = field(default_factory=list)
    target: str = "population"

    def to_dict(self) -> dict:
        out = {k: v for k, v in asdict(self).items() if k not in ("designs", "chosen")}
        out["designs"] = [dict(asdict(d), label=d.label) for d in self.designs]
        out["chosen"] = None if self.chosen is None else dict(asdict(self.chosen), label=self.chosen.label)
        return out


def beta_rank_distribution(n_items: int, a: float, b: float) -> np.ndarray:
    r""":math:`P(R)`, :math:`R = 1..N`, of a rank fraction :math:`(R-1)/N \sim \mathrm{Beta}(a, b)`:
    :math:`P(R) = I_{R/N}(a, b) - I_{(R-1)/N}(a, b)` (regularised incomplete beta function)."""
    N = check_int(n_items, "n_items", low=2)
    a = check_real(a, "prior a", low=0.0, low_open=True)
    b = check_real(b, "prior b", low=0.0, low_open=True)
    P = np.diff(stats.beta.cdf(np.arange(N + 1) / N, a, b))
    return P / P.sum()


def normal_error_quantile(bias: float, variance: float, confidence: float) -> float:
    r"""The :math:`h` with :math:`P(|X| \le h) = ` ``confidence`` for :math:`X \sim N(b, V)`: the
    half-width that holds the error of an estimate with bias :math:`b` and variance :math:`V`
    (:math:`z_{\alpha/2}\sqrt V` when :math:`b = 0`)."""
    b, s = abs(float(bias)), math.sqrt(max(float(variance), 0.0))
    if s == 0.0:
        return b
    f = lambda h: stats.norm.cdf((h - b) / s) - stats.norm.cdf((-h - b) / s) - confidence  # noqa: E731
    return float(optimize.brentq(f, 0.0, b + 10.0 * s))


def pilot_resolves(n_items: int, sample_size: int, k: int | None) -> bool:
    r"""Whether a pilot of sampled ranks at size :math:`n_0` resolves the cut-off :math:`K`:
    :math:`K \ge c\,N/(n_0 - 1)`, :math:`c` = :data:`itemsampling.kernel.RESOLVED` (module
    docstring; ``k=None``, the whole list, counts as resolved)."""
    return resolves(n_items, sample_size, k)


def resolving_pilot_size(n_items: int, k: int) -> int:
    r"""The smallest pilot size :math:`n_0` that resolves the cut-off :math:`K` (:func:`pilot_resolves`):
    :math:`n_0 = 1 + \lceil cN/K \rceil`, from :math:`n_0 - 1 \ge cN/K`; it may exceed :math:`N`
    (then no sampled pilot resolves :math:`K`)."""
    n0 = 1 + math.ceil(RESOLVED * n_items / k)
    while n0 > 2 and pilot_resolves(n_items, n0 - 1, k):  # guard the rounding of the ceiling
        n0 -= 1
    while not pilot_resolves(n_items, n0, k):
        n0 += 1
    return n0


def _user_variance(sd, m, M, target="test-users"):
    r"""Variance of the mean of :math:`m` users' values (per-user standard deviation ``sd``) about the plan's
    ``target`` (module docstring): about the :math:`M` users' own metric, drawn without replacement,
    :math:`\sigma^2 (M-m)/(m(M-1))` (finite-population correction, 0 at :math:`m = M`); about the
    population's, :math:`\sigma^2/m` (TORS Eq. 45-46)."""
    if target == "population":
        return sd * sd / m
    return 0.0 if m >= M else sd * sd * (M - m) / (m * (M - 1))


def _user_half_width(sd, m, M, z, target="test-users"):
    return z * math.sqrt(_user_variance(sd, m, M, target))


def _users_for_margin(sd, M, z, margin, target="test-users"):
    """Fewest users m (<= M) with the user-sampling half-width <= margin (TORS Eq. 46-47, with the
    finite-population correction for ``target="test-users"``); M when none of the M meets it."""
    if sd == 0:
        return 1
    m0 = (z * sd / margin) ** 2
    m = m0 if target == "population" else m0 / (1.0 + (m0 - 1.0) / M)
    m = min(max(int(math.ceil(m * (1 - 1e-12))), 1), M)
    while m < M and _user_half_width(sd, m, M, z, target) > margin:
        m += 1
    while m > 1 and _user_half_width(sd, m - 1, M, z, target) <= margin:
        m -= 1
    return m


def worst_case_user_bound(metric: str, k, compare: bool = False) -> tuple[str, float]:
    r"""The bound on user sampling's error that needs no rank distribution, for a metric's per-user values
    :math:`x_u = F(R_u)` (TORS Sec. 7):

    * Recall / HR@K, :math:`x_u \in \{0, 1\}`: :math:`\mathrm{Var}\,x_u = p(1-p) \le 1/4` (TORS Eq. 45-47 at
      :math:`p = 1/2`), so ``("variance", 1/2)``, the worst-case standard deviation; Precision@K,
      :math:`x_u \in \{0, 1/K\}`: standard deviation :math:`\le 1/(2K)`;
    * NDCG, AP / RR, AUC: values in :math:`[0, 1]` but not two-valued, where the normal approximation at the
      worst-case variance is least safe: Hoeffding's bound (TORS Eq. 48) for values in an interval of
      length 1, ``("hoeffding", 1)``; it holds for users drawn without replacement too (Hoeffding 1963,
      Sec. 6).

    With ``compare`` (the difference of two models): the two-valued metrics take TORS Eq. 52's variance
    :math:`2p(1-p) \le 1/2` (the plan's assumption of independent models), standard deviation
    :math:`\sqrt{1/2}` (:math:`\sqrt2/(2K)` for Precision); Hoeffding the interval :math:`[-1, 1]`, length 2."""
    name = canonical_metric(metric)
    factor = math.sqrt(2.0) if compare else 1.0
    if name == "recall":
        return "variance", 0.5 * factor
    if name == "precision" and k is not None:
        return "variance", 0.5 * factor / k
    return "hoeffding", 2.0 if compare else 1.0


def _worst_case_text(kind: str, value: float, compare: bool) -> str:
    if kind == "variance":
        return f"variance <= {value * value:.4g}"
    return f"Hoeffding, values in [{-1 if compare else 0}, 1]"


def _worst_case_half_width(kind, value, m, M, z, confidence, target="test-users"):
    if m >= M and target == "test-users":
        return 0.0
    if kind == "variance":
        return _user_half_width(value, m, M, z, target)
    return hoeffding_margin(m, confidence, value)


def worst_case_users(metric: str, k, n_users: int, margin: float, confidence: float = 0.95,
                     compare: bool = False, target: str = "population") -> int:
    r"""Fewest of the :math:`M` users whose full ranking meets ``margin`` at ``confidence`` under the bound of
    :func:`worst_case_user_bound`, whatever the rank distribution: for a variance bound :math:`\sigma^2`,
    TORS Eq. 46-47, :math:`m_0 = \sigma^2 (z_{\alpha/2}/e)^2` (so 1,068 users for Recall at :math:`e = 0.03`,
    95 %), with the finite-population correction for ``target="test-users"`` (the :math:`M` users' own
    metric; module docstring); for Hoeffding (Eq. 48), :math:`m = \lceil (b-a)^2 \ln(2/\alpha) / (2e^2)
    \rceil`. At most :math:`M` (:math:`m = M` is full ranking, which under ``"population"`` may still miss
    the margin)."""
    M = check_int(n_users, "n_users", low=1)
    e = check_real(margin, "margin", low=0.0, low_open=True)
    conf = check_open_unit(confidence, "confidence", "a confidence level", ", e.g. 0.95")
    check_target(target)
    kind, value = worst_case_user_bound(metric, k, compare)
    if kind == "variance":
        return _users_for_margin(value, M, float(stats.norm.ppf(1.0 - (1.0 - conf) / 2.0)), e, target)
    m = math.ceil(value * value * math.log(2.0 / (1.0 - conf)) / (2.0 * e * e) * (1 - 1e-12))
    while m > 1 and hoeffding_margin(m - 1, conf, value) <= e:
        m -= 1
    while hoeffding_margin(m, conf, value) > e:
        m += 1
    return min(max(m, 1), M)


def _worst_case_sd(kind: str, value: float, confidence: float) -> float:
    r"""The per-user standard deviation the user-sampling part of a mixed design takes under the worst case
    (:func:`worst_case_user_bound`): the bound itself for a variance bound; for Hoeffding's (values in an
    interval of length :math:`L`) the :math:`s` whose normal half-width :math:`z s/\sqrt m` equals Hoeffding's
    :math:`L\sqrt{\ln(2/\alpha)/(2m)}` (TORS Eq. 48), :math:`s = L\sqrt{\ln(2/\alpha)/2}/z`."""
    if kind == "variance":
        return value
    z = float(stats.norm.ppf(1.0 - (1.0 - confidence) / 2.0))
    return value * math.sqrt(math.log(2.0 / (1.0 - confidence)) / 2.0) / z


def expected_adaptive_size(rank_distribution, n_items: int, initial_size: int, max_size: int) -> float:
    r"""Expected item scorings per user of adaptive sampling (TORS Algorithm 1) under a rank distribution
    :math:`P(R)`: :math:`E\,n_u = n_0 + \sum_{j=1}^{t} (n_j - n_{j-1})\,\Pr(r_u = 1 \text{ at } n_{j-1})`,
    since the set doubles from :math:`n_{j-1}` exactly when the target still ranks first there; with decoys
    drawn with replacement :math:`\Pr(r = 1 \mid R; n) = (1 - \theta_R)^{n-1}`, :math:`\theta_R = (R-1)/(N-1)`.
    It is the mean of the cost that TORS Eq. 44 apportions (:attr:`itemsampling.sampling.SamplingCost.mean_size`
    of :func:`itemsampling.sampling.adaptive_sampling_cost`, :math:`\sum_j m_j n_j / M`), and what
    :func:`itemsampling.evaluation.sampled_ranks` counts per row (the target once, then the extra decoys). It
    depends on a pool only through the rank fraction, so per-user pools share it."""
    N = check_int(n_items, "n_items", low=2)
    P = check_probability_vector(rank_distribution, "rank_distribution", length=N, atol=1e-6)
    ladder = adaptive_sizes(initial_size, max_size, N)
    with np.errstate(divide="ignore"):
        log_keep = np.log1p(-np.arange(N) / (N - 1.0))  # log(1 - theta_R); -inf at R = N (never ranks first)
    size = float(ladder[0])
    for prev, nxt in zip(ladder[:-1], ladder[1:]):
        size += float(nxt - prev) * float(P @ np.exp((prev - 1) * log_keep))
    return size


def resolving_ladders(n_items: int, k, sizes=DEFAULT_SIZES, cap: int | None = None, low: int = 10) -> list:
    r"""The adaptive ladders :math:`(n_0, n_{max} = n_0 2^j)`, :math:`j \ge 1`, whose :math:`n_{max}` is the
    first size of the ladder that resolves :math:`K` (:func:`itemsampling.kernel.resolves`:
    :math:`n_{max} \ge n^* = 1 + \lceil cN/K \rceil`, :func:`resolving_pilot_size`), for :math:`n_0` in
    ``sizes`` and in :math:`\lceil n^*/2^j \rceil \ge` ``low`` (the ladders that end at :math:`n^*` itself,
    wasting nothing above it), with :math:`n_{max} \le` ``cap`` (default :math:`N`; the smallest pool).
    Empty for ``k=None`` or when no ladder fits under ``cap``."""
    N = check_int(n_items, "n_items", low=2)
    cap = N if cap is None else check_int(cap, "cap", low=2, high=N)
    if k is None:
        return []
    need = resolving_pilot_size(N, check_int(k, "k", low=1, high=N))
    n0s = {int(s) for s in sizes if 2 <= int(s) < need}
    j = 1
    while math.ceil(need / 2 ** j) >= max(2, low):
        n0s.add(math.ceil(need / 2 ** j))
        j += 1
    out = []
    for n0 in sorted(n0s):
        nmax = n0
        while nmax < need:
            nmax *= 2
        if nmax <= cap:
            out.append((n0, nmax))
    return out


def design_kwargs(design: Design) -> dict:
    """The keyword arguments of :func:`itemsampling.evaluation.sampled_ranks` that run a plan's design (those of
    :attr:`Design.call` besides the data): ``design`` and its sizes, ``n_users`` for a user sample."""
    if not isinstance(design, Design):
        raise ValueError(f"design must be a Design of a plan, got {type(design).__name__}")
    d = design
    if d.design in ("full ranking", "user sampling"):
        kw = {"design": "full"}
    elif d.initial_size is not None:
        kw = {"design": "adaptive", "initial_size": d.initial_size, "max_size": d.sample_size}
    else:
        kw = {"design": "fixed", "sample_size": d.sample_size}
    if d.design in ("user sampling", "user + item sampling", "user + adaptive sampling"):
        kw["n_users"] = d.users
    return kw


def _call(d: Design, N: int) -> str:
    """The sampled_ranks call of a design (:func:`itemsampling.evaluation.design_call`)."""
    if d.design == "full ranking":
        return design_call("full", n_items=N)
    if d.design == "user sampling":
        return design_call("full", n_users=d.users, n_items=N)
    if d.design in ("adaptive item sampling", "user + adaptive sampling"):
        return design_call("adaptive", initial_size=d.initial_size, max_size=d.sample_size, n_items=N,
                           n_users=d.users if d.design == "user + adaptive sampling" else None)
    return design_call("fixed", sample_size=d.sample_size, n_items=N,
                       n_users=d.users if d.design == "user + item sampling" else None)


def _fit_name(fa, fb=None):
    """The name of a fit (``fa``) or, with a second model, of a pair of fits."""
    return fa if fb is None else f"A:{fa}, B:{fb}"


def plan_evaluation(n_items, n_users, metric, k, margin=None, budget=None, confidence=0.95, pilot=None,
                    rng=None, *, sample_size=None, prior=(0.5, 3.0), compare=None, sizes=DEFAULT_SIZES,
                    estimators=DEFAULT_ESTIMATORS, adaptive=None, n_sim: int = 20,
                    pilot_fits: str = "plausible", pools=None, n_ladders: int = 2,
                    target: str = "population") -> EvaluationPlan:
    r"""Predicted half-width and cost of every design; the cheapest meeting ``margin`` or the most
    accurate within ``budget`` (module docstring for the designs and the predictions).

    Parameters
    ----------
    n_items, n_users : int
        Catalogue size :math:`N` and the users :math:`M` to evaluate.
    metric, k : str and int or None
        The metric and cut-off (``k <= N``).
    margin : float > 0, optional
        Wanted half-width; the plan picks the cheapest design that meets it.
    budget : float, optional
        Item scorings available; the plan picks the most accurate design within it. Refused when
        below the cheapest design's cost. Give at most one of ``margin`` and ``budget``.
    confidence : float in (0, 1)
    pilot : array of int, optional
        Sampled ranks of a pilot run (with ``sample_size``); without it, ``prior``.
    rng : seed or Generator
        Simulation randomness: one seed, one plan.
    sample_size : int
        The pilot's sampled-set size :math:`n`.
    prior : (a, b)
        Beta prior on the rank fraction when there is no pilot.
    compare : array of int or (a, b), optional
        A second model's pilot ranks (same ``sample_size``) or Beta prior: plan for the difference
        of the two models' metrics.
    sizes, estimators
        The sampled-set sizes (those below :math:`N` are used) and estimators tried.
    adaptive : (n0, nmax), optional
        One adaptive design to plan. Default: the ladders whose :math:`n_{max}` resolves :math:`K`
        (:func:`resolving_ladders`), the ``n_ladders`` cheapest by their expected cost
        (:func:`expected_adaptive_size`, the worst case over the fits) simulated; where none fits under
        :math:`N` (or ``k=None``), :math:`n_0` = the smallest size and :math:`n_{max}` the largest
        :math:`n_0 2^j \le N/8`.
    n_sim : int
        Simulated runs per item-sampling design and fit (>= 5).
    pilot_fits : ``"plausible"`` or ``"mle"``
        The fits of :math:`P(R)` a pilot gives (:data:`PILOT_FITS`): the smooth fits of
        ``method="auto"`` the pilot does not reject, each design's half-width the worst case over
        them (default), or the single nonparametric MLE fit (the plan before; kept for comparison).
    pools : array of int, optional
        The users' pool sizes :math:`N_u \le N` (per-user catalogues, e.g. a pilot table's ``n_items``):
        a design's sizes stay within the smallest (as :func:`itemsampling.evaluation.sampled_ranks`
        requires); the rank fraction, hence the kernel and the expected cost, is the same for every pool.
    n_ladders : int
        Adaptive ladders simulated (the cheapest by expected cost; default 2).
    target : {"population", "test-users"}
        What the half-widths are for (:data:`TARGETS`, module docstring), as ``estimate``'s ``--target``:
        the metric of the population the :math:`M` users were drawn from (default, the interval
        ``estimate`` prints by default: every design adds the users' own variance, full ranking
        included), or the :math:`M` users' own metric :math:`T` (full ranking exact, user sampling
        with the finite-population correction).
    """
    # deferred: the estimators load scipy's solvers; the plan sub-command's parser (`--help`) does without
    from .estimators import METHODS, estimate_metrics, estimate_rank_distribution
    from .estimators.auto import _LINEAR, AutoSelection, _linear_vectors, plausible_fits
    from .estimators.estimate import resolution_note

    N = check_int(n_items, "n_items", low=2)
    M = check_int(n_users, "n_users", low=2)
    metric = canonical_metric(metric)
    if k is not None:
        k = check_int(k, "k", low=1, high=N)
    conf = check_open_unit(confidence, "confidence", "a confidence level", ", e.g. 0.95")
    if margin is not None:
        margin = check_real(margin, "margin", low=0.0, low_open=True)
    if budget is not None:
        budget = check_real(budget, "budget", low=0.0, low_open=True)
    if margin is not None and budget is not None:
        raise ValueError("give margin or budget, not both")
    n_sim = check_int(n_sim, "n_sim", low=5)
    n_ladders = check_int(n_ladders, "n_ladders", low=1)
    target = check_target(target)
    if pilot_fits not in PILOT_FITS:
        raise ValueError(f"pilot_fits must be one of {PILOT_FITS}, got {pilot_fits!r}")
    sizes_l = sorted({check_int(s, "sizes", low=2) for s in sizes})
    sizes_l = [s for s in sizes_l if s < N]
    if not sizes_l:
        raise ValueError(f"sizes must include a sampled-set size below n_items = {N}, got {list(sizes)}")
    est_l = list(dict.fromkeys(estimators))
    for e in est_l:
        if e not in METHODS or e == "sampled":
            raise ValueError(f"estimators must be corrected estimators of {METHODS[1:]}, got {e!r}")
    gen = as_rng(rng)
    fit_tests, fallback = {}, {}

    def distribution(source, what, model):
        """``({fit: P(R)}, description)`` of a prior or a pilot (module docstring)."""
        if source is None or (isinstance(source, tuple) and len(source) == 2):
            a, b = (prior if source is None else source)
            return {"prior": beta_rank_distribution(N, a, b)}, f"Beta({a:g}, {b:g}) prior on (R - 1)/N"
        if sample_size is None:
            raise ValueError(f"sample_size is needed with pilot ranks ({what})")
        n0 = check_int(sample_size, "sample_size", low=2, high=N)
        r = np.asarray(source)
        if pilot_fits == "mle":
            P = np.asarray(estimate_rank_distribution(r, N, n0, "mle"), dtype=np.float64)
            return {"mle": P / P.sum()}, f"pilot of {r.size:,} users at n = {n0} (MLE of P(R))"
        r = check_ranks(r, what, high=n0)
        sel = AutoSelection([], [], ())
        fits = plausible_fits(r, N, n0, True, None, sel)
        fit_tests[model], fallback[model] = dict(sel.plausibility), sel.fallback
        how = ("nonparametric fits, every smooth fit rejected" if sel.fallback
               else "smooth fits the pilot does not reject")
        return fits, f"pilot of {r.size:,} users at n = {n0} ({how}: {', '.join(fits)})"

    fits_a, source = distribution(pilot, "pilot", "A")
    fits = {"A": list(fits_a)}
    fits_b = None
    if compare is not None:
        fits_b, source_b = distribution(compare, "compare", "B")
        fits["B"] = list(fits_b)
        source = f"A: {source}; B: {source_b}"
    F = metric_function(metric, k, N)
    # the simulated populations, one per fit (all of A's, then all of B's), and the scenarios: each
    # fit of A, or with a second model each pair of fits (their errors combine run by run: the two
    # models' sampled ranks are drawn independently)
    R_a = {f: 1 + gen.choice(N, size=M, p=P) for f, P in fits_a.items()}
    R_b = None if fits_b is None else {f: 1 + gen.choice(N, size=M, p=P) for f, P in fits_b.items()}
    scen = [(fa, fb) for fa in fits_a for fb in ([None] if fits_b is None else fits_b)]
    names = {sc: _fit_name(*sc) for sc in scen}
    truth_s, sd_s = {}, {}
    for sc in scen:
        per_user = F(R_a[sc[0]])
        if sc[1] is not None:
            per_user = per_user - F(R_b[sc[1]])
        truth_s[sc], sd_s[sc] = float(per_user.mean()), float(per_user.std(ddof=1))
    truth, sd = truth_s[scen[0]], sd_s[scen[0]]
    sd_max = max(sd_s.values())  # the user-sampling half-width grows with the per-user sd
    z = float(stats.norm.ppf(1.0 - (1.0 - conf) / 2.0))

    def worst(hw_of):
        """The largest half-width over the scenarios, its scenario's name, and every scenario's."""
        per = {names[sc]: hw_of(sc) for sc in scen}
        name = max(per, key=per.get)  # the first scenario among equals
        return per[name], name, per

    # a pilot that does not resolve the cut-off (module docstring): the designs whose prediction needs P(R) at
    # ranks <= K are not identified; the user-sampling part of a mixed design is then sized by the worst case
    pilots = [x for x in (pilot, compare) if x is not None and not (isinstance(x, tuple) and len(x) == 2)]
    below = bool(pilots) and pilot_fits == "plausible" and not pilot_resolves(N, sample_size, k)
    kind, value = worst_case_user_bound(metric, k, compare is not None)
    sd_mix = ({sc: _worst_case_sd(kind, value, conf) for sc in scen} if below else sd_s)

    # full ranking: exact for the test users; for the population, the M users' own sampling error
    hw0, name0, per0 = worst(lambda sc: _user_half_width(sd_s[sc], M, M, z, target))
    designs = [Design("full ranking", M, None, None, hw0, float(M) * N,
                      fit=name0 if target == "population" else None, half_widths=per0)]
    fractions = [M // 16, M // 4, M // 2]
    ms = sorted({m for m in fractions if 2 <= m < M} |
                ({_users_for_margin(sd_max, M, z, margin, target)} if margin else set()))
    ms = [m for m in ms if m < M]
    for m in ms:
        hw, name, per = worst(lambda sc, m=m: _user_half_width(sd_s[sc], m, M, z, target))
        designs.append(Design("user sampling", m, None, None, hw, float(m) * N, fit=name, half_widths=per))
    learnt_l = [m for m in est_l if m not in _LINEAR]
    linear_l = [m for m in est_l if m in _LINEAR]

    on_grid = set()  # sizes whose MLE runs on the rank grid (the resolving fixed size: the dense kernel is N x n)

    def estimates(r, size, methods):
        """``{method: estimate}`` on one run's sampled ranks; the fixed corrections (CLS, BV) through
        their data-free corrected vectors, built once per size (linear in the sampled-rank histogram)."""
        out = {}
        learnt = [m for m in methods if m not in _LINEAR]
        if learnt:
            grid = {"grid": True} if np.max(size) in on_grid else {}
            est = estimate_metrics(r, N, size, [metric], k, learnt, **_params(learnt), **grid)
            out.update({m: float(est[m][metric]) for m in learnt})
        lin = [m for m in methods if m in _LINEAR]
        if lin:
            h = np.bincount(r, minlength=size + 1)[1:].astype(np.float64)
            for m in lin:
                out[m] = float(h @ _linear_vectors(N, size, [metric], [k], m, _EST_PARAMS.get(m, {}), None)[:, 0, 0]
                               / r.size)
        return out

    def simulate(draw, methods, runs=n_sim):
        """Errors about T of each method over ``runs`` runs of an item-sampled census under every
        scenario: the users' global ranks stay, their sampled ranks are redrawn through the kernel
        each run (run by run, every population of A, then every population of B)."""
        est_a = {f: {m: np.empty(runs) for m in methods} for f in R_a}
        est_b = None if R_b is None else {f: {m: np.empty(runs) for m in methods} for f in R_b}
        for s in range(runs):
            for pops, out in ((R_a, est_a), (R_b, est_b)):
                if pops is None:
                    continue
                for f, R in pops.items():
                    r, size = draw(R)
                    for m, v in estimates(r, size, methods).items():
                        out[f][m][s] = v
        err = {}
        for sc in scen:
            fa, fb = sc
            err[sc] = {m: (est_a[fa][m] if fb is None else est_a[fa][m] - est_b[fb][m]) - truth_s[sc]
                       for m in methods}
        return err

    def add_item_designs(name, errors, size, method, cost_per_user, n0=None):
        mom = {sc: (float(errors[sc][method].mean()), float(errors[sc][method].var(ddof=1))) for sc in scen}
        # below the pilot's resolution, a design whose n resolves K sizes its user part by the worst case
        # (identified); the others keep the fits' spread (not identified either way)
        wc = below and resolves(N, size, k)
        sd_u = sd_mix if wc else sd_s
        # all M users: the item-sampling error about T, plus (target "population") T's own about the population's
        hw, fit, per = worst(lambda sc: normal_error_quantile(
            mom[sc][0], mom[sc][1] + _user_variance(sd_u[sc], M, M, target), conf))
        sc_w = next(sc for sc in scen if names[sc] == fit)
        designs.append(Design(name, M, size, method, hw, cost_per_user * M, n0, mom[sc_w][0], fit, per))
        mix = "user + item sampling" if name == "item sampling" else "user + adaptive sampling"

        def hw_m(m):  # m of the M users, n items each: item noise grows as M/m, plus user sampling
            return worst(lambda sc: normal_error_quantile(
                mom[sc][0], mom[sc][1] * M / m + _user_variance(sd_u[sc], m, M, target), conf))

        # m >= M/4: with fewer users the estimators' errors stop scaling as 1/m (a bounded
        # estimate on few sampled ranks), and M/m overstates them (the guide shows it)
        cand = {m for m in fractions[1:] if 2 <= m < M} if name == "item sampling" or margin is None else set()
        if margin is not None and hw_m(M - 1)[0] <= margin:  # fewest users meeting the margin at this n
            lo, hi = max(2, M // 4), M - 1
            while lo < hi:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if hw_m(mid)[0] <= margin else (mid + 1, hi)
            cand.add(lo)
        for m in sorted(cand):
            h, fit_m, per_m = hw_m(m)
            sc_m = next(sc for sc in scen if names[sc] == fit_m)
            designs.append(Design(mix, m, size, method, h, float(m) * cost_per_user, n0,
                                  mom[sc_m][0], fit_m, per_m,
                                  worst_case=_worst_case_text(kind, value, compare is not None) if wc else None))

    for size in sizes_l:
        if linear_l and not learnt_l:  # the estimators' own note, which only the learnt ones' calls give
            note = resolution_note(N, size, k)
            if note is not None:
                warnings.warn(note, ResolutionWarning, stacklevel=2)
        errs = simulate(lambda R, size=size: (sample_ranks(R, N, size, rng=gen), size), est_l)
        for method in est_l:
            add_item_designs("item sampling", errs, size, method, float(size))
    # adaptive ladders: the given one, or those whose n_max resolves K (the cheapest n_ladders by their expected
    # cost under the fits, TORS Eq. 44), or without one the ladder of the plan before
    cap = N if pools is None else min(N, int(np.min(check_ranks(pools, "pools", high=N))))
    if adaptive is not None:
        n0, nmax = adaptive
        adaptive_sizes(n0, nmax, N)  # validates n0 >= 2, nmax = n0 2^j <= N
        ladders = [(int(n0), int(nmax))] if nmax > n0 else []
    else:
        ladders = resolving_ladders(N, k, sizes_l, cap)
        if not ladders:
            n0 = nmax = sizes_l[0]
            while nmax * 2 <= min(N // 8, cap):
                nmax *= 2
            ladders = [(n0, nmax)] if nmax > n0 else []
    def expected_size(n0, nmax):
        """The largest expected set size per user over the scenarios (with compare the mean of both models')."""
        size_a = {f: expected_adaptive_size(P, N, n0, nmax) for f, P in fits_a.items()}
        size_b = None if fits_b is None else {f: expected_adaptive_size(P, N, n0, nmax) for f, P in fits_b.items()}
        return max(size_a[fa] if fb is None else 0.5 * (size_a[fa] + size_b[fb]) for fa, fb in scen)

    def add_ladder(n0, nmax):
        errs = simulate(lambda R: adaptive_sample_ranks(R, N, n0, nmax, rng=gen), ["mle"])
        add_item_designs("adaptive item sampling", errs, nmax, "mle", expected_size(n0, nmax), n0)
        return next(d for d in reversed(designs) if d.design == "adaptive item sampling")

    expected = {ld: expected_size(*ld) for ld in ladders}
    simulated = [add_ladder(*ld) for ld in sorted(ladders, key=lambda ld: (expected[ld], ld))[:n_ladders]]
    # none meets the margin on every user: the most accurate ladder's n_max doubled, at most twice (finer
    # resolution at the top, where the kernel noise of a cut-off just above the rule lives)
    if adaptive is None and margin is not None and simulated and min(d.half_width for d in simulated) > margin:
        base = min(simulated, key=lambda d: (d.half_width, d.cost))
        n0, nmax = base.initial_size, base.sample_size
        for _ in range(2):
            nmax *= 2
            if nmax > cap or add_ladder(n0, nmax).half_width <= margin:
                break
    if compare is not None:  # both models are scored: twice the item scorings
        designs = [replace(d, cost=2.0 * d.cost) for d in designs]
    unresolved = ""
    if below:
        need = resolving_pilot_size(N, k)
        larger = (f"a pilot at n >= {need:,} (1 + {RESOLVED:g} N/K)" if need <= N else
                  f"no sampled pilot (it would need n >= {need:,} > N)")
        bound = _worst_case_text(kind, value, compare is not None)
        ms_w = {m for m in fractions if 2 <= m < M}
        if margin is not None:
            ms_w.add(worst_case_users(metric, k, M, margin, conf, compare is not None, target))
        worst_designs = []
        for m in sorted(m for m in ms_w if m < M):
            hw = _worst_case_half_width(kind, value, m, M, z, conf, target)
            # the bound holds under every fit: the same half-width under each, and no fit it rests on
            worst_designs.append(Design("user sampling", m, None, None, hw, float(m) * N, fit=None,
                                        half_widths={names[sc]: hw for sc in scen}, worst_case=bound))
        if compare is not None:
            worst_designs = [replace(d, cost=2.0 * d.cost) for d in worst_designs]
        unresolved = (f"the pilot at n = {sample_size} resolves cut-offs K >= {RESOLVED:g} N/(n - 1) = "
                      f"{RESOLVED * N / (sample_size - 1):.1f}, and K = {k} is below it: no fit of the pilot knows "
                      f"P(R) at ranks <= K, so every design whose half-width rests on it (the bias of item sampling "
                      f"below the rule, user sampling's per-user spread) is a guess (not identified). Identified: full "
                      f"ranking; user sampling sized by the worst case ({bound}), which needs no rank distribution; "
                      f"fixed and adaptive designs whose n (n_max) resolves K (their own ranks identify it; their "
                      f"half-width is still simulated under the pilot's fits), with a user sample sized by the same "
                      f"worst case. For the other designs rank everything, or plan from {larger}, which resolves "
                      f"K = {k}.")
        if target == "population":  # full ranking's own user error by the same worst case (identified)
            hw = _worst_case_half_width(kind, value, M, M, z, conf, target)
            designs[0] = replace(designs[0], half_width=hw, fit=None, half_widths={names[sc]: hw for sc in scen},
                                 worst_case=bound)
        designs = [d if d.design == "full ranking" or (d.design != "user sampling" and resolves(N, d.sample_size, k))
                   else replace(d, identified=False) for d in designs] + worst_designs
    plan = EvaluationPlan(N, M, metric, k, conf, margin, budget, source, compare is not None, truth, sd, designs,
                          fits=fits, fit_tests=fit_tests, fallback=fallback,
                          truths={names[sc]: v for sc, v in truth_s.items()},
                          user_sds={names[sc]: v for sc, v in sd_s.items()}, unresolved=unresolved,
                          target=target)
    designs = plan.designs  # the list add_item_designs appends to

    def choose():
        usable = [d for d in plan.designs if d.identified]
        if budget is not None:
            within = [d for d in usable if d.cost <= budget]
            return min(within, key=lambda d: (d.half_width, d.cost)) if within else None
        if margin is not None:
            meet = [d for d in usable if d.half_width <= margin]
            return min(meet, key=lambda d: (d.cost, d.half_width)) if meet else None
        return None

    # the fixed size that resolves K: simulated only when it could be chosen (it costs n per user, and the
    # estimators' time grows with n); else listed in plan.skipped with its cost
    n_res = None if k is None else resolving_pilot_size(N, k)
    if n_res is not None and n_res < cap and n_res not in sizes_l:
        cost_res = float(M) * n_res * (2.0 if compare is not None else 1.0)
        best = choose()
        first = cost_res * (fractions[1] / M if fractions[1] >= 2 else 1.0)  # its cheapest mix, M/4 users
        if (budget is not None and first <= budget) or (budget is None and (best is None or first < best.cost)):
            before = len(designs)
            # a quarter of the runs (at least 5): the MLE's time grows with n, and a resolving size has little bias
            on_grid.add(n_res)
            errs = simulate(lambda R: (sample_ranks(R, N, n_res, rng=gen), n_res), ["mle"], max(5, n_sim // 4))
            add_item_designs("item sampling", errs, n_res, "mle", float(n_res))  # appends to plan.designs
            if compare is not None:
                designs[before:] = [replace(d, cost=2.0 * d.cost) for d in designs[before:]]
        else:
            why = (f"costs more than the cheapest identified design meeting the margin ({best.cost:,.0f})"
                   if budget is None else f"costs more than the budget even on M/4 users ({first:,.0f})")
            plan.skipped.append({"design": "item sampling", "sample_size": n_res, "estimator": "mle",
                                 "cost": cost_res, "label": f"item sampling, n = {n_res} (resolves K = {k}), "
                                                            f"all {M:,} users, mle", "why": why})
    plan.designs = [replace(d, call=_call(d, N)) for d in plan.designs]
    cheapest = min(d.cost for d in plan.designs)
    if budget is not None and budget < cheapest:
        raise ValueError(f"budget must be at least {cheapest:,.0f} item scorings, the cost of the cheapest "
                         f"design ({min(plan.designs, key=lambda d: d.cost).label}); got {budget:,.0f}")
    plan.chosen = choose()
    return plan


def format_plan(plan: EvaluationPlan) -> str:
    """The plain-text report of ``python -m itemsampling plan``."""
    what = f"{plan.metric}" + ("" if plan.k is None else f"@{plan.k}")
    pct = f"{100 * plan.confidence:g}%"
    several = len(plan.truths) > 1
    there = f"under {next(iter(plan.truths))}" if several else "there"
    lines = [f"Planning {'the difference A - B of ' if plan.compare else ''}{what}: N = {plan.n_items:,} items, "
             f"M = {plan.n_users:,} users, {pct} half-widths for "
             + ("the metric of the population the users come from (as estimate's default --target population)"
                if plan.target == "population" else "the M users' own metric (as estimate's --target test-users)"),
             f"rank distribution: {plan.source}; {what} {there} = {plan.truth:.4f} "
             f"(per-user sd {plan.user_sd:.4f})", ""]
    if several:  # one line: the fits, and what the half-widths are over them
        lo, hi = min(plan.truths.values()), max(plan.truths.values())
        kept = "; ".join(f"{mo}: {', '.join(f)}" + (" (fallback: every smooth fit rejected)" if plan.fallback.get(mo)
                                                    else "") for mo, f in plan.fits.items())
        lines.insert(2, f"fits of P(R) simulated under ({kept}): each half-width is the worst case over the "
                        f"{len(plan.truths)} {'pairs of fits' if plan.compare else 'fits'}; {what} under them "
                        f"{lo:.4f} to {hi:.4f}")
    rows = sorted(plan.designs, key=lambda d: d.cost)
    w = max(len(d.label) for d in rows)
    fw = max([len("worst under")] + [len(d.fit or "") for d in rows]) if several else 0
    extra = f"  {'worst under':<{fw}}" if several else ""
    lines.append(f"{'design':<{w}}  {'half-width':>10}  {'item scorings':>14}{extra}")
    lines.append(f"{'-' * w}  {'-' * 10}  {'-' * 14}" + (f"  {'-' * fw}" if several else ""))
    for d in rows:
        mark = ("  <- chosen" if plan.chosen is not None and d == plan.chosen else
                "" if d.identified else "  (not identified)")
        fit = f"  {(d.fit or '-'):<{fw}}" if several else ""
        lines.append(f"{d.label:<{w}}  {d.half_width:>10.4f}  {d.cost:>14,.0f}{fit}{mark}".rstrip())
    for x in plan.skipped:
        lines.append(f"{x['label']:<{w}}  {'-':>10}  {x['cost']:>14,.0f}  (not simulated: {x['why']})")
    lines.append("")
    if plan.unresolved:
        lines.append(f"Not identified: {plan.unresolved}")
    if plan.chosen is None and plan.budget is not None:
        lines.append(f"No design the pilot identifies fits within {plan.budget:,.0f} item scorings.")
    elif plan.chosen is None and plan.margin is not None:
        lines.append(f"No design meets the margin {plan.margin:g}"
                     + (f": even full ranking of all {plan.n_users:,} users leaves their own sampling error "
                        "(the table's first row); widen the margin or evaluate more users."
                        if plan.target == "population" else
                        ": only full ranking of all users does better than the table; widen the margin or rank "
                        "everything."))
    elif plan.chosen is not None:
        among = " the pilot identifies" if plan.unresolved else ""
        why = (f"the cheapest design{among} meeting the margin {plan.margin:g}" if plan.margin is not None
               else f"the most accurate design{among} within {plan.budget:,.0f} item scorings")
        lines.append(f"Chosen: {plan.chosen.label} ({why}).")
        each = " for each model" if plan.compare else ""
        e = plan.chosen.estimator
        opts = "".join(f", {k_}={v!r}" for k_, v in _EST_PARAMS.get(e, {}).items()) if e else ""
        tu = plan.target == "test-users"
        target = ', target="test-users"' if tu else ""
        est = ("" if e is None else
               f", then estimate_metrics(table.rank, table.n_items, table.sample_size, [\"{plan.metric}\"], "
               f"[{plan.k}], [\"{e}\"]{opts}, ci={plan.confidence:g}{target})")
        lines.append(f"Run it{each} with itemsampling.evaluation: table = {plan.chosen.call}{est}.")
        what_k = "" if plan.k is None else f" --k {plan.k}"
        lines.append(f"Or write it (table.to_csv(path, index=False){', one file with a model column' if plan.compare else ''}) "
                     f"and read it with: python -m itemsampling estimate path --metric {plan.metric}{what_k}"
                     f"{' --target test-users' if tu else ''}")
    source = "the worst case over the fits above" if several else "the rank distribution above"
    lines.append(f"Half-widths are predictions from {source} (simulated through the sampling "
                 "kernel, each design run --n-sim times); see the guide's 'Planning an evaluation'.")
    return "\n".join(lines)


def plan_command(args) -> int:
    """``python -m itemsampling plan``: read the pilot (if any), plan, print."""
    import json


    if args.pilot is not None and args.prior is not None:
        raise InputError("give --pilot FILE or --prior A B, not both")
    if args.margin is None and args.budget is None:
        raise InputError("give --margin (wanted half-width) or --budget (item scorings)")
    pilot = compare = pool_sizes = None
    if args.pilot is not None:
        if args.sample_size is None:
            raise InputError("--sample-size is required with --pilot (the pilot's sampled-set size n)")
        table = read_rank_file(args.pilot, args.n_items, args.sample_size)
        if table.per_user_sizes:
            raise InputError(f"{args.pilot}: the pilot must use one --sample-size for every user")
        models = table.models
        pilot = table.ranks[models[0]]
        pools = [np.atleast_1d(table.pools[m]) for m in models[:2 if args.compare else 1]]
        if any(p.size > 1 for p in pools):  # per-user pools: the designs' sizes stay within the smallest
            pool_sizes = np.concatenate(pools)
        if args.compare:
            if len(models) < 2:
                raise InputError(f"--compare needs a pilot file with two models (a 'model' column); "
                                 f"{args.pilot} has {len(models)}")
            compare = table.ranks[models[1]]
    else:
        prior = tuple(args.prior) if args.prior is not None else (0.5, 3.0)
        if args.compare:
            compare = tuple(args.compare_prior) if args.compare_prior is not None else prior
    kw = {} if pool_sizes is None else {"pools": pool_sizes}
    if args.prior is not None:
        kw["prior"] = tuple(args.prior)
    if args.sizes is not None:
        kw["sizes"] = args.sizes
    if args.estimators is not None:
        kw["estimators"] = args.estimators
    # the estimators warn (ResolutionWarning) for every simulated design whose cut-off is below one
    # kernel width: printed once, under the plan, as `estimate` prints its note
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResolutionWarning)
        plan = plan_evaluation(args.n_items, args.n_users, args.metric, args.k, margin=args.margin,
                               budget=args.budget, confidence=args.confidence, pilot=pilot, rng=args.seed,
                               sample_size=args.sample_size, compare=compare, n_sim=args.n_sim,
                               pilot_fits=args.pilot_fits, n_ladders=args.n_ladders, target=args.target, **kw)
    notes = []
    for w in caught:
        if issubclass(w.category, ResolutionWarning):
            notes.append(str(w.message))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    notes = list(dict.fromkeys(notes))[:1]
    if args.json:
        print(json.dumps({**plan.to_dict(), "notes": notes}, indent=1))
    else:
        print(format_plan(plan) + "".join(f"\n\nNote: {note}" for note in notes))
    return 0


def add_plan_parser(sub) -> None:
    """The ``plan`` sub-command's options (called by :mod:`itemsampling.cli`)."""
    p = sub.add_parser("plan", help="plan an evaluation: predicted error and cost of every design",
                       description="Predict, for full ranking, user sampling, item sampling (each estimator), "
                                   "adaptive item sampling and user + item sampling, the half-width of the "
                                   "interval of a metric and the cost in item scorings; pick the cheapest "
                                   "design meeting --margin or the most accurate within --budget.")
    p.add_argument("--n-items", type=int, required=True, metavar="N", help="catalogue size N")
    p.add_argument("--n-users", type=int, required=True, metavar="M", help="users to evaluate M")
    p.add_argument("--metric", default="recall", help="metric (default recall)")
    p.add_argument("--k", type=k_value, default=10, help="cut-off (default 10; 'none' = untruncated)")
    p.add_argument("--margin", type=float, default=None, help="wanted half-width of the interval (> 0)")
    p.add_argument("--budget", type=float, default=None, help="item scorings available")
    p.add_argument("--confidence", type=float, default=0.95, help="confidence level (default 0.95)")
    p.add_argument("--pilot", default=None, metavar="FILE",
                   help="pilot sampled ranks in the 'estimate' format (CSV, TSV or Parquet)")
    p.add_argument("--sample-size", type=int, default=None, metavar="n", help="the pilot's sampled-set size n")
    p.add_argument("--prior", type=float, nargs=2, default=None, metavar=("A", "B"),
                   help="without a pilot: Beta(A, B) prior on the rank fraction (R - 1)/N (default 0.5 3)")
    p.add_argument("--compare", action="store_true",
                   help="plan for the difference of two models (the pilot file's first two models)")
    p.add_argument("--compare-prior", type=float, nargs=2, default=None, metavar=("A", "B"),
                   help="with --compare and no pilot: model B's Beta prior (default: the same as A)")
    p.add_argument("--sizes", type=int, nargs="+", default=None, help=f"sampled-set sizes to try (default {DEFAULT_SIZES})")
    p.add_argument("--estimators", nargs="+", default=None, help=f"estimators to try (default {DEFAULT_ESTIMATORS})")
    p.add_argument("--n-sim", type=int, default=20, help="simulated runs per item-sampling design and fit (default 20)")
    p.add_argument("--pilot-fits", choices=PILOT_FITS, default="plausible",
                   help="with --pilot: simulate under the smooth fits of P(R) the pilot does not reject, each "
                        "half-width the worst case over them (plausible, the default), or under the pilot's single "
                        "MLE fit (mle)")
    p.add_argument("--n-ladders", type=int, default=2,
                   help="adaptive ladders whose n_max resolves K simulated, the cheapest by expected cost (default 2)")
    p.add_argument("--target", choices=TARGETS, default="population",
                   help="what the half-widths are for, as estimate's --target: the metric of the population the "
                        "users come from (population, the default) or the M users' own metric (test-users: full "
                        "ranking exact, user sampling with the finite-population correction)")
    p.add_argument("--seed", type=seed_value, default=0, help="seed of the simulation, a non-negative integer (default 0)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
