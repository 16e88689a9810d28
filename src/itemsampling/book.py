"""Helpers used by the book's notebooks: recording headline numbers and deciding verdicts.

Every chapter records its headline numbers with :func:`record`. When a notebook runs through
``python -m itemsampling.run`` (or the notebook tests), the runner sets the environment variable
``ITEMSAMPLING_RESULTS`` to a JSON file and every recorded value is written there; inside the
rendered book the value is also *glued* (:func:`glue`, ``myst_nb.glue``'s message without its
imports; the chapters glue with it too) so prose can quote it with ``{glue:text}`name:.3f```.

Every verdict the book prints ("larger than", "cannot be told apart", "equivalent within", "k of m
rows", an order "X > Y = Z") comes from the functions at the end of this module and is glued:
:func:`t_quantile` (t below 30 repeats), :func:`mean_interval`, :func:`compare_means`,
:func:`compare_with_paper`, :func:`coverage_verdict` and :func:`share_verdict` (a share, exactly), :func:`holm` and :func:`count_verdict` (multiple rows),
:func:`match_table` (saturated cells apart), :func:`order_verdict`, :func:`fmt_vs` and
:func:`fmt_bound` (rounding that cannot flip a comparison). A test that cannot come out the other
way raises :class:`VerdictRefused`.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ._glue import glue
from ._validation import as_float_array, check_bool, check_int, check_real

__all__ = ["glue", "record", "record_text", "recorded", "to_jsonable", "order_string", "standard_error",
           "compare_with_paper", "paired_difference", "RESULTS_ENV", "t_quantile", "mean_interval", "Interval",
           "Verdict", "VerdictRefused", "compare_means", "holm", "count_verdict", "match_table", "fmt_vs",
           "fmt_bound", "order_verdict", "p_value", "variance_p_value", "holm_signs", "coverage_verdict", "share_verdict"]

RESULTS_ENV = "ITEMSAMPLING_RESULTS"
_RECORDED: dict = {}


def to_jsonable(value):
    """Convert numpy scalars/arrays, pandas objects, tuples and dicts to JSON-ready values.

    Non-finite floats are refused: a recorded NaN is a bug, not a result.
    """
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if hasattr(value, "to_dict") and not isinstance(value, np.ndarray):  # pandas
        try:
            return to_jsonable(value.to_dict())
        except TypeError:
            pass
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        v = float(value)
        if not math.isfinite(v):
            raise ValueError(f"recorded value is not finite: {v}")
        return v
    if value is None or isinstance(value, (int, str)):
        return value
    raise ValueError(f"cannot record a value of type {type(value).__name__}")


def record(name: str, value):
    """Record a headline number (or a list / dict of numbers) under ``name``.

    Returns ``value`` unchanged so a cell can both record and display it.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("name must be a non-empty string")
    jv = to_jsonable(value)
    _RECORDED[name] = jv
    path = os.environ.get(RESULTS_ENV)
    if path:
        _write_record(Path(path), name, jv)
    try:  # glue into the rendered book, silently (display=False)
        if isinstance(jv, (int, float)):
            glue(name, jv, display=False)
    except Exception:  # pragma: no cover - myst_nb missing or not in a kernel
        pass
    return value


def _write_record(p: Path, name: str, jv) -> None:
    """Add ``name: jv`` to the results file ``p`` (``$ITEMSAMPLING_RESULTS``), atomically. A file
    that is not a JSON object, or a folder that cannot be written, is refused with a ``ValueError``
    naming the file and the variable (never overwritten: it may hold another run's records)."""
    where = f"the results file {p} (${RESULTS_ENV})"
    try:
        data = json.loads(p.read_text()) if p.exists() else {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read {where}: {exc}; remove it or point {RESULTS_ENV} elsewhere") from None
    if not isinstance(data, dict):
        raise ValueError(f"{where} must hold a JSON object of recorded values, got a JSON "
                         f"{type(data).__name__}; remove it or point {RESULTS_ENV} elsewhere")
    data[name] = jv
    try:
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".results-", suffix=".json")
    except OSError as exc:
        raise ValueError(f"cannot write {where}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
        os.replace(tmp, p)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise ValueError(f"cannot write {where}: {exc.strerror or exc}") from None
        raise


def recorded() -> dict:
    """All values recorded in this process so far."""
    return dict(_RECORDED)


def order_string(values: dict, atol: float = 1e-9, higher_is_better: bool = True) -> str:
    """The order of named values as ``"C > A = B"``: values within ``atol`` of the previous one are
    joined with ``=`` so round-off never shows as a strict order."""
    if not isinstance(values, dict):
        raise ValueError(f"values must be a dict of name -> number, got {type(values).__name__}")
    if not values:
        raise ValueError("values must not be empty")
    if not isinstance(higher_is_better, (bool, np.bool_)):
        raise ValueError(f"higher_is_better must be True or False, got {higher_is_better!r}")
    if isinstance(atol, (bool, np.bool_)) or not isinstance(atol, (int, float, np.integer, np.floating)):
        raise ValueError(f"atol must be a finite number >= 0, got {atol!r}")
    atol = float(atol)
    if not np.isfinite(atol) or atol < 0:
        raise ValueError(f"atol must be a finite number >= 0, got {atol}")
    for name, val in values.items():
        if isinstance(val, (bool, np.bool_)) or not isinstance(val, (int, float, np.integer, np.floating)) \
                or not np.isfinite(val):
            raise ValueError(f"values[{name!r}] must be a finite number, got {val!r:.60}"
                             + (" (not finite)" if isinstance(val, (float, np.floating)) else ""))
    items = sorted(values.items(), key=lambda kv: kv[1], reverse=higher_is_better)
    out = str(items[0][0])
    for (_, prev), (name, val) in zip(items, items[1:]):
        out += (" = " if abs(val - prev) <= atol else " > " if higher_is_better else " < ") + str(name)
    return out


_INLINE_TEX = re.compile(r"\$[^\s$][^$]*\$")


def record_text(name: str, text: str) -> str:
    """Record a sentence (or any Markdown) under ``name`` and glue it as Markdown, so prose can
    quote it with ``{glue:md}`name```. Returns ``text``.

    Glued Markdown is not typeset, so TeX (``$n_0$``, ``$\\tau$``) would reach the reader as raw
    dollars: it is refused; write ``*n*<sub>0</sub>`` or ``τ`` instead."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    tex = _INLINE_TEX.search(text)
    if tex:
        raise ValueError(f"text of {name!r} holds TeX ({tex.group(0)!r}), which glued Markdown shows as raw "
                         "dollars: write it as Markdown (*n*<sub>0</sub>, τ)")
    record(name, text)
    try:
        from IPython.display import Markdown

        glue(name, Markdown(text), display=False)
    except Exception:  # pragma: no cover - myst_nb missing or not in a kernel
        pass
    return text


def standard_error(values) -> float:
    """Standard error of the mean of independent repeats: ``std(values, ddof=1) / sqrt(len)``.

    At least two finite values are required (one draw has no standard error)."""
    v = as_float_array(values, "values").ravel()
    if v.size < 2:
        raise ValueError(f"values must hold at least 2 repeats to have a standard error, got {v.size}")
    if not np.all(np.isfinite(v)):
        raise ValueError("values must be finite")
    return float(np.std(v, ddof=1) / np.sqrt(v.size))


def paired_difference(a, b, z: float = 2.0) -> dict:
    """Mean of the per-repeat differences ``a - b`` (the same draws for both), its standard error
    over the repeats, and the sign that a margin of ``z`` standard errors allows: ``+1`` when the
    mean exceeds ``z * se``, ``-1`` when it is below ``-z * se``, ``0`` (within the noise) otherwise.
    Returns ``{"mean", "se", "sign"}``."""
    a = as_float_array(a, "a").ravel()
    b = as_float_array(b, "b").ravel()
    if a.shape != b.shape:
        raise ValueError(f"a and b must hold the same repeats, got {a.size} and {b.size} values")
    z = check_real(z, "z", low=0, low_open=True)
    d = a - b
    se = standard_error(d)
    mean = float(np.mean(d))
    sign = 1 if mean > z * se else -1 if mean < -z * se else 0
    return {"mean": mean, "se": se, "sign": sign}


# --------------------------------------------------------------------------------------------
# Verdicts: every "matches", "differs", "wins", "cannot be told apart" the book prints comes from
# the functions below, decided by a test that can come out either way, and glued.
# --------------------------------------------------------------------------------------------

_T_NORMAL_FROM = 30


class VerdictRefused(ValueError):
    """Raised when a verdict is asked of a test that cannot come out the other way (no variance,
    one repeat, a null value at the edge of what the statistic can take)."""


@dataclass(frozen=True)
class Interval:
    """A mean over repeats with its standard error ``se = sd / sqrt(n)`` and the two-sided interval
    ``mean ± q * se`` (``q = t_quantile(n, level)``)."""

    mean: float
    se: float
    low: float
    high: float
    n: int
    q: float

    @property
    def half_width(self) -> float:
        return self.q * self.se


@dataclass(frozen=True)
class Verdict:
    """A decided (or undecided) comparison. ``text`` is a sentence fragment ready to glue;
    ``decided`` is True when the test rejected "no difference" (or, for an equivalence verdict,
    "a difference of at least the margin"); ``direction`` is +1 / -1 for the first item larger /
    smaller, 0 when undecided or equivalent; ``p`` the two-sided p value (None where there is no
    single test); ``n`` the number of repeats behind it; ``detail`` the numbers behind the text."""

    text: str
    decided: bool
    direction: int
    p: float | None
    n: int
    detail: dict = field(default_factory=dict, compare=False, repr=False)

    def __str__(self) -> str:
        return self.text


def _check_level(level) -> float:

    return check_real(level, "level", low=0, high=1, low_open=True, high_open=True)


def _pct(x: float) -> str:
    """A level or alpha as a percentage: 0.95 -> '95 %', 0.05 -> '5 %', 0.975 -> '97.5 %'."""
    return f"{100 * x:.10g} %"


def t_quantile(n_repeats, level=0.95) -> float:
    """The two-sided ``level`` quantile for a mean over ``n_repeats`` independent repeats: Student's
    t with ``n_repeats - 1`` degrees of freedom below 30 repeats, the normal quantile from 30 on
    (``t_9 = 2.262`` at 10 repeats, not 2 or 1.96)."""
    from scipy import stats


    n = check_int(n_repeats, "n_repeats", low=2)
    level = _check_level(level)
    upper = 0.5 + level / 2
    if n < _T_NORMAL_FROM:
        return float(stats.t.ppf(upper, n - 1))
    return float(stats.norm.ppf(upper))


def _t_sf2(stat: float, n: int) -> float:
    """Two-sided p value of a statistic under the reference distribution :func:`t_quantile` uses."""
    from scipy import stats

    if not np.isfinite(stat):
        return 0.0
    if n < _T_NORMAL_FROM:
        return float(2 * stats.t.sf(abs(stat), n - 1))
    return float(2 * stats.norm.sf(abs(stat)))


def p_value(stat, n_repeats) -> float:
    """Two-sided p value of a t (or z) statistic over ``n_repeats`` repeats, under the reference
    distribution :func:`t_quantile` uses (t_{n-1} below 30 repeats, normal from 30 on)."""

    n = check_int(n_repeats, "n_repeats", low=2)
    stat = float(stat) if np.isinf(stat) else check_real(stat, "stat")
    return _t_sf2(stat, n)


def variance_p_value(sd, exact_sd, n_repeats) -> float:
    r"""Two-sided p value of the hypothesis that ``n_repeats`` independent normal repeats with sample
    standard deviation ``sd`` (``ddof=1``) come from a law whose standard deviation is ``exact_sd``:
    the chi-square test of a variance, :math:`X = (B-1)\,s^2/\sigma^2 \sim \chi^2_{B-1}`, with
    p = 2 min(P(χ² ≤ X), P(χ² ≥ X)) (e.g. Casella & Berger, *Statistical Inference*, Example 8.2.3;
    normality of each repeat is assumed, as for a sum over many independent users). A zero
    ``exact_sd`` has nothing to test (:class:`VerdictRefused`)."""

    from scipy import stats

    n = check_int(n_repeats, "n_repeats", low=2)
    sd = check_real(sd, "sd", low=0)
    exact_sd = check_real(exact_sd, "exact_sd", low=0)
    if exact_sd == 0:
        raise VerdictRefused("exact_sd is 0: a quantity without variance leaves nothing for a variance test to decide")
    x = (n - 1) * (sd / exact_sd) ** 2
    return float(min(1.0, 2 * min(stats.chi2.cdf(x, n - 1), stats.chi2.sf(x, n - 1))))


def _repeats(values, name: str) -> np.ndarray:

    v = as_float_array(values, name).ravel()
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{name} must be finite")
    if v.size < 2:
        raise VerdictRefused(f"{name} must hold at least 2 repeats to be tested, got {v.size}")
    return v


def _sd(v: np.ndarray) -> float:
    """Sample standard deviation, exactly 0 when the values are equal up to round-off (ten copies
    of 0.3 have a float sd of 6e-17, which is no variance)."""
    if np.ptp(v) <= 1e-12 * max(float(np.max(np.abs(v))), 1e-300):
        return 0.0
    return float(np.std(v, ddof=1))


def mean_interval(values, level=0.95) -> Interval:
    """Mean of independent repeats with its t interval (:func:`t_quantile`)."""
    v = _repeats(values, "values")
    n = v.size
    se = _sd(v) / np.sqrt(n)
    q = t_quantile(n, level)
    m = float(np.mean(v))
    return Interval(mean=m, se=se, low=m - q * se, high=m + q * se, n=n, q=q)


def _decimals(half_width: float, digits=None) -> int:
    """Decimals that show a half-width with two significant digits (``digits`` overrides)."""

    if digits is not None:
        return check_int(digits, "digits", low=0, high=12)
    if not np.isfinite(half_width) or half_width <= 0:
        return 3
    return int(min(12, max(0, 1 - math.floor(math.log10(half_width)))))


def fmt_vs(value, threshold, digits=3) -> str:
    """``value`` printed with ``digits`` decimals, or more where fewer would let rounding flip (or
    hide) its comparison with ``threshold``: 0.9495 against 0.95 prints ``"0.9495"`` (never
    ``"0.950"``), 0.95 itself ``"0.950"``, 0.5 ``"0.500"``. The printed number compares with
    ``threshold`` exactly as ``value`` does (<, = or >)."""

    value = check_real(value, "value")
    threshold = check_real(threshold, "threshold")
    d = check_int(digits, "digits", low=0, high=15)
    want = (value > threshold) - (value < threshold)
    for dd in range(d, 18):
        s = f"{value:.{dd}f}"
        r = float(s)
        if (r > threshold) - (r < threshold) == want:
            return s.replace("-", "−") if s.startswith("-") else s
    return repr(value)


def fmt_bound(value, digits=1, side="upper") -> str:
    """``value`` rounded *outwards* to ``digits`` decimals, for "at most" (``side="upper"``: 0.23
    -> ``"0.3"``) and "at least" (``side="lower"``: 0.27 -> ``"0.2"``) statements, so the printed
    bound is never violated by the value it summarises."""

    value = check_real(value, "value")
    d = check_int(digits, "digits", low=0, high=12)
    if side not in ("upper", "lower"):
        raise ValueError(f"side must be 'upper' or 'lower', got {side!r}")
    scale = 10.0 ** d
    x = math.ceil(value * scale - 1e-9) if side == "upper" else math.floor(value * scale + 1e-9)
    s = f"{x / scale:.{d}f}"
    return s.replace("-", "−")


def _num(x: float, dec: int, against: float = 0.0) -> str:
    return fmt_vs(x, against, dec) if x != against else f"{x:.{dec}f}"


def _interval_text(diff, low, high, dec, unit=""):
    return f"{_num(diff, dec)} [{_num(low, dec)}, {_num(high, dec)}]{unit}"


def _decide(diff: float, se: float, n: int, level: float, names, margin, unit, digits, what):
    """The shared decision for a difference ``diff`` with standard error ``se`` over ``n`` repeats."""

    if not np.isfinite(se) or se <= 0:
        raise VerdictRefused(f"{what}: the difference has no variance over the {n} repeats (se = {se}), "
                             "so a test of it cannot come out either way")
    if margin is not None:
        margin = check_real(margin, "margin", low=0, low_open=True)
    q = t_quantile(n, level)
    low, high = diff - q * se, diff + q * se
    p = _t_sf2(diff / se, n)
    a, b = names
    dec = _decimals(q * se, digits)
    lvl = _pct(level)
    detail = {"diff": diff, "se": se, "low": low, "high": high, "q": q, "margin": margin}
    if low > 0 or high < 0:
        sign = 1 if low > 0 else -1
        word = "larger" if sign > 0 else "smaller"
        lo_, hi_ = (low, high) if sign > 0 else (-high, -low)
        text = (f"{a} is {word} than {b} by {_interval_text(abs(diff), lo_, hi_, dec, unit)} "
                f"({lvl} t interval, {n} repeats)")
        return Verdict(text, True, sign, p, n, detail)
    if margin is not None:
        # TOST: equivalent at alpha = 1 - level when the (1 - 2 alpha) interval lies inside +-margin
        alpha = 1 - level
        q2 = t_quantile(n, 1 - 2 * alpha)
        lo2, hi2 = diff - q2 * se, diff + q2 * se
        detail.update(tost_low=lo2, tost_high=hi2)
        if -margin < lo2 and hi2 < margin:
            dm = dec
            text = (f"{a} and {b} are equivalent within ±{margin:g}{unit} (difference "
                    f"{_interval_text(diff, lo2, hi2, dm, unit)}, {_pct(1 - 2 * alpha)} t interval inside the "
                    f"margin, {n} repeats)")
            return Verdict(text, True, 0, p, n, detail)
    text = f"{a} and {b} cannot be told apart at {n} repeats (difference {_interval_text(diff, low, high, dec, unit)}, {lvl} t interval)"
    return Verdict(text, False, 0, p, n, detail)


def _check_support(values: np.ndarray, null: float, support, what: str):
    if support is None:
        return
    if not isinstance(support, (tuple, list)) or len(support) != 2:
        raise ValueError(f"support must be a pair (low, high) with None for an open end, got {support!r}")
    lo, hi = support
    if (lo is not None and null <= lo) or (hi is not None and null >= hi):
        raise VerdictRefused(f"{what}: the null value {null:g} lies at the edge of what the statistic can take "
                             f"({support}), so the test cannot come out the other way")


def compare_means(a, b=None, *, paired=True, names=("A", "B"), level=0.95, margin=None, unit="",
                  digits=None, support=None) -> Verdict:
    """Decide whether the mean of ``a`` differs from that of ``b`` (per-repeat values), or from 0
    when ``b`` is None, by a two-sided t test (t_{n-1} below 30 repeats, :func:`t_quantile`).

    ``paired=True`` tests the per-repeat differences ``a - b`` (the same draws for both);
    ``paired=False`` uses Welch's standard error with ``min(n_a, n_b)`` repeats for the quantile.
    The text reads "A is larger than B by d [low, high] (95 % t interval, 10 repeats)" when the test
    rejects; "A and B are equivalent within ±margin (...)" when it does not and the TOST interval lies
    inside ``±margin``; otherwise "A and B cannot be told apart at 10 repeats (...)". ``support``
    ``(low, high)`` states what the tested statistic can take by construction (a range or an
    absolute value is ``(0, None)``): a null at its edge cannot be rejected the other way and is
    refused (:class:`VerdictRefused`), as is a difference with no variance."""

    paired = check_bool(paired, "paired")
    _check_level(level)
    if not isinstance(names, (tuple, list)) or len(names) != 2 or not all(isinstance(s, str) for s in names):
        raise ValueError(f"names must be a pair of strings, got {names!r}")
    av = _repeats(a, "a")
    if b is None:
        _check_support(av, 0.0, support, "compare_means")
        n = av.size
        return _decide(float(av.mean()), _sd(av) / np.sqrt(n), n, level,
                       (names[0], "zero" if tuple(names) == ("A", "B") else names[1]), margin, unit, digits,
                       "compare_means")
    bv = _repeats(b, "b")
    if paired:
        if av.shape != bv.shape:
            raise ValueError(f"a and b must hold the same repeats when paired, got {av.size} and {bv.size} values")
        d = av - bv
        _check_support(d, 0.0, support, "compare_means")
        n = d.size
        return _decide(float(d.mean()), _sd(d) / np.sqrt(n), n, level, tuple(names), margin,
                       unit, digits, "compare_means")
    if support is not None:
        _check_support(av - av.mean(), 0.0, support, "compare_means")
    se = float(np.sqrt(_sd(av) ** 2 / av.size + _sd(bv) ** 2 / bv.size))
    return _decide(float(av.mean() - bv.mean()), se, min(av.size, bv.size), level, tuple(names), margin, unit,
                   digits, "compare_means")


def compare_with_paper(ours: float, ours_se: float, paper: float, paper_se: float = 0.0, z: float | None = None,
                       *, n_repeats=None, level=0.95, margin=None, names=("ours", "the paper's"), unit="",
                       digits=None) -> dict:
    """Decide "ours vs paper" by the standard error of the difference.

    The difference ``ours - paper`` has standard error ``se = sqrt(ours_se**2 + paper_se**2)``
    (independent estimates: ours over our repeats, the paper's from its printed ± where given, else 0).
    The verdict is ``"matches"`` when ``|ours - paper| < z * se``, else ``"above"`` or ``"below"``
    (ours above / below the paper's). A zero ``se`` only matches an exactly equal value.
    Returns ``{"diff", "se", "verdict"}``.

    Without ``n_repeats`` the margin is ``z`` standard errors (``z`` defaults to 2, as it always
    has). With ``n_repeats`` (our repeats behind ``ours_se``) the quantile is
    :func:`t_quantile` ``(n_repeats, level)`` unless ``z`` is given, and the dict holds instead
    ``"verdict"`` (a :class:`Verdict`, decided by :func:`compare_means`' rule: equivalence only
    within a stated ``margin``), ``"label"`` (the old string), ``"q"`` and ``"text"`` (ready to
    glue). A zero ``se`` is then refused (:class:`VerdictRefused`)."""

    ours = check_real(ours, "ours")
    paper = check_real(paper, "paper")
    ours_se = check_real(ours_se, "ours_se", low=0)
    paper_se = check_real(paper_se, "paper_se", low=0)
    if z is not None:
        z = check_real(z, "z", low=0, low_open=True)
    diff = ours - paper
    se = float(np.hypot(ours_se, paper_se))
    if n_repeats is None:
        z = 2.0 if z is None else z
        verdict = "matches" if abs(diff) < z * se or diff == 0 else ("above" if diff > 0 else "below")
        return {"diff": diff, "se": se, "verdict": verdict}
    n = check_int(n_repeats, "n_repeats", low=2)
    level = _check_level(level)
    if z is not None:  # an explicit quantile: the level it stands for
        from scipy import stats

        level = float(2 * stats.norm.cdf(z) - 1) if n >= _T_NORMAL_FROM else float(2 * stats.t.cdf(z, n - 1) - 1)
    v = _decide(diff, se, n, level, tuple(names), margin, unit, digits, "compare_with_paper")
    q = v.detail["q"]
    label = "matches" if abs(diff) < q * se else ("above" if diff > 0 else "below")
    return {"diff": diff, "se": se, "verdict": v, "label": label, "q": q, "text": v.text}


def holm(pvalues, alpha=0.05) -> np.ndarray:
    """Holm's step-down rejections at family-wise level ``alpha``: sort the m p values, reject the
    k-th smallest while ``p_(k) <= alpha / (m - k + 1)``, stop at the first that is not.
    Returns a boolean array in the input's order."""

    p = as_float_array(pvalues, "pvalues").ravel()
    alpha = check_real(alpha, "alpha", low=0, high=1, low_open=True, high_open=True)
    if np.any(~np.isfinite(p)) or np.any(p < 0) or np.any(p > 1):
        raise ValueError("pvalues must lie in [0, 1]")
    m = p.size
    reject = np.zeros(m, dtype=bool)
    for k, i in enumerate(np.argsort(p, kind="stable")):
        if p[i] <= alpha / (m - k):
            reject[i] = True
        else:
            break
    return reject


def holm_signs(diffs, ses, n_repeats, alpha=0.05) -> dict:
    """Several differences, each with its standard error over ``n_repeats`` repeats, tested at once:
    the two-sided p value of each (:func:`p_value`; a zero standard error gives p = 0 for a nonzero
    difference and p = 1 for an exact zero) and Holm's rejections over all of them. Returns
    ``{"p": array, "reject": bool array, "sign": int array}`` where ``sign`` is +1 / -1 for a
    rejected positive / negative difference and 0 where the test does not reject."""

    d = as_float_array(diffs, "diffs").ravel()
    se = as_float_array(ses, "ses").ravel()
    if d.shape != se.shape:
        raise ValueError(f"diffs and ses must have the same length, got {d.size} and {se.size}")
    if not (np.all(np.isfinite(d)) and np.all(np.isfinite(se))) or np.any(se < 0):
        raise ValueError("diffs must be finite and ses finite and >= 0")
    p = np.array([(1.0 if x == 0 else 0.0) if s == 0 else p_value(x / s, n_repeats) for x, s in zip(d, se)])
    rej = holm(p, alpha) if p.size else np.zeros(0, dtype=bool)
    return {"p": p, "reject": rej, "sign": np.where(rej, np.sign(d), 0).astype(int)}


def coverage_verdict(hits, total, nominal=0.95, alpha=0.05, *, what="the interval", unit="studies") -> Verdict:
    """Whether an interval's observed coverage, ``hits`` of ``total`` independent studies, differs
    from its ``nominal`` level, by the exact two-sided binomial test (no normal approximation, which
    misleads at a few dozen studies). The text reads "the interval covers its truth in 6 of 8
    studies (0.75), which cannot be told apart from 95 % at 8 studies (exact binomial test,
    p = 0.057)", or "..., below 95 % (...)" / "above"."""
    from scipy import stats


    total = check_int(total, "total", low=1)
    hits = check_int(hits, "hits", low=0, high=total)
    nominal = _check_level(nominal)

    alpha = check_real(alpha, "alpha", low=0, high=1, low_open=True, high_open=True)
    p = float(stats.binomtest(hits, total, nominal).pvalue)
    share = hits / total
    head = f"{what} covers its truth in {hits} of {total} {unit} ({share:.2f}), "
    if p <= alpha:
        direction = 1 if share > nominal else -1
        text = head + f"{'above' if direction > 0 else 'below'} {_pct(nominal)} (exact binomial test, p = {p:.2g})"
        return Verdict(text, True, direction, p, total, {"share": share})
    text = head + f"which cannot be told apart from {_pct(nominal)} at {total} {unit} (exact binomial test, p = {p:.2g})"
    return Verdict(text, False, 0, p, total, {"share": share})


def share_verdict(hits, total, null=0.5, *, what="the event", unit="repeats", null_name=None,
                  level=0.95) -> Verdict:
    """Whether a share, ``hits`` of ``total`` independent repeats, differs from ``null``, by one exact
    method: the Clopper-Pearson interval at ``level`` (scipy ``binomtest(...).proportion_ci("exact")``)
    decides (``null`` outside it), and ``p`` is the central exact p value that this interval inverts,
    ``min(1, 2 min(P(X >= hits), P(X <= hits)))`` under Binomial(total, null), so ``p < 1 - level``
    exactly when the interval excludes ``null``. The text reads "the event holds in 3 of 20 repeats
    (share 0.15, 95 % Clopper-Pearson interval [0.03, 0.38]), below one half (exact binomial test,
    p = 0.0026)" or "..., which cannot be told apart from one half at 20 repeats (...)"."""
    from scipy import stats

    total = check_int(total, "total", low=1)
    hits = check_int(hits, "hits", low=0, high=total)
    null = check_real(null, "null", low=0, high=1, low_open=True, high_open=True)
    level = _check_level(level)
    if not isinstance(what, str) or not what:
        raise ValueError(f"what must be a non-empty string, got {what!r}")
    name = null_name if null_name else f"{null:g}"
    lo, hi = stats.binomtest(hits, total, null).proportion_ci(level, method="exact")
    lo, hi = float(lo), float(hi)
    p = float(min(1.0, 2 * min(stats.binom.sf(hits - 1, total, null), stats.binom.cdf(hits, total, null))))
    share = hits / total
    head = (f"{what} in {hits} of {total} {unit} (share {share:.2f}, {_pct(level)} Clopper-Pearson interval "
            f"[{fmt_bound(lo, 2, 'lower')}, {fmt_bound(hi, 2, 'upper')}]), ")
    detail = {"share": share, "low": lo, "high": hi, "null": null}
    if lo > null or hi < null:
        direction = 1 if lo > null else -1
        text = head + f"{'above' if direction > 0 else 'below'} {name} (exact binomial test, p = {p:.2g})"
        return Verdict(text, True, direction, p, total, detail)
    text = head + f"which cannot be told apart from {name} at {total} {unit} (exact binomial test, p = {p:.2g})"
    return Verdict(text, False, 0, p, total, detail)


def count_verdict(pvalues, alpha=0.05, what="rows") -> str:
    """``"k of m rows (Holm-corrected at 5 %)"``: how many of the m tests reject, by :func:`holm`."""
    if not isinstance(what, str) or not what:
        raise ValueError(f"what must be a non-empty string, got {what!r}")
    r = holm(pvalues, alpha)
    return f"{int(r.sum())} of {r.size} {what} (Holm-corrected at {_pct(alpha)})"


def match_table(ours, ours_se, paper, paper_se=0.0, *, n_repeats, lo=0.0, hi=None, level=0.95,
                what="cells") -> dict:
    """Compare a table of our means (with standard errors over ``n_repeats`` repeats) cell by cell
    with a paper's.

    A cell is *saturated* when both sides sit at ``lo`` or both at ``hi`` (0/0, 100/100): it agrees
    by construction and is counted apart. Every other cell is *informative* and is tested like
    :func:`compare_with_paper` (t quantile below 30 repeats), with Holm's correction over the
    informative cells; a cell the test does not reject "cannot be told apart" (a match only in that
    sense), one it rejects differs. An informative cell whose two sides are exactly equal is a
    *tie* (counted among the matches; with no variance on either side it cannot be tested
    otherwise). Returns the counts ``saturated``, ``informative``, ``matches``, ``differ``, ``ties``,
    the boolean arrays ``saturated_mask``, ``match_mask``, ``differ_mask``, the p values ``p`` (NaN
    for saturated cells) and ``text``."""

    o = as_float_array(ours, "ours")
    p = as_float_array(paper, "paper")
    ose = np.broadcast_to(as_float_array(ours_se, "ours_se"), o.shape).astype(float)
    pse = np.broadcast_to(as_float_array(paper_se, "paper_se"), o.shape).astype(float)
    if o.shape != p.shape:
        raise ValueError(f"ours and paper must have the same shape, got {o.shape} and {p.shape}")
    for arr, nm in ((o, "ours"), (p, "paper"), (ose, "ours_se"), (pse, "paper_se")):
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{nm} must be finite")
    if np.any(ose < 0) or np.any(pse < 0):
        raise ValueError("ours_se and paper_se must be >= 0")
    n = check_int(n_repeats, "n_repeats", low=2)
    level = _check_level(level)
    lo = check_real(lo, "lo")
    if hi is not None:
        hi = check_real(hi, "hi", low=lo, low_open=True)
    sat = (o == lo) & (p == lo)
    if hi is not None:
        sat |= (o == hi) & (p == hi)
    diff = o - p
    se = np.hypot(ose, pse)
    pv = np.full(o.shape, np.nan)
    inf = ~sat
    with np.errstate(divide="ignore", invalid="ignore"):
        stat = np.where(se > 0, diff / np.where(se > 0, se, 1.0), np.where(diff == 0, 0.0, np.inf))
    pv[inf] = [_t_sf2(float(s), n) for s in stat[inf]]
    rej = np.zeros(o.shape, dtype=bool)
    if inf.any():
        rej[inf] = holm(pv[inf], 1 - level)
    ties = inf & (diff == 0)
    match = inf & ~rej
    k_sat, k_inf, k_match, k_diff = int(sat.sum()), int(inf.sum()), int(match.sum()), int(rej.sum())
    bounds = f"{lo:g}" if hi is None else f"{lo:g} or both at {hi:g}"
    text = (f"{k_match} of the {k_inf} informative {what} cannot be told apart from the paper's and {k_diff} "
            f"{'differs' if k_diff == 1 else 'differ'} "
            f"(t test, {n} repeats, Holm-corrected at {_pct(1 - level)})")
    if k_sat:
        text += f"; {k_sat} more {what} are saturated (both sides at {bounds}) and agree by construction"
    if ties.any():
        k_tie = int(ties.sum())
        text += f"; {k_tie} of the informative {what} {'is an exact tie' if k_tie == 1 else 'are exact ties'}"
    return {"saturated": k_sat, "informative": k_inf, "matches": k_match, "differ": k_diff,
            "ties": int(ties.sum()), "saturated_mask": sat, "match_mask": match, "differ_mask": rej,
            "p": pv, "text": text}


def order_verdict(means, ses, n_repeats, higher_is_better=True, level=0.95, *, names=None,
                  digits=None) -> Verdict:
    """The order of several items from their means and standard errors over ``n_repeats`` repeats:
    sorted best first, each adjacent pair tested (difference over ``hypot`` of the two standard
    errors, t quantile below 30 repeats, Holm-corrected over the adjacent pairs). Adjacent items the
    test cannot tell apart are joined with ``=`` and the text says so: ``"X > Y = Z (adjacent pairs by
    a t test, 10 repeats, Holm-corrected at 5 %; = : cannot be told apart)"``. Exactly equal means
    (a tie, e.g. 12 of 12 on every draw) are always ``=``; with no noise on either side a difference
    is a strict order. ``means`` and ``ses`` are dicts name -> value, or sequences with ``names``."""

    hib = check_bool(higher_is_better, "higher_is_better")
    n = check_int(n_repeats, "n_repeats", low=2)
    level = _check_level(level)
    if isinstance(means, dict):
        keys = list(means)
        m = as_float_array([means[k] for k in keys], "means")
        if not isinstance(ses, dict) or set(ses) != set(keys):
            raise ValueError("ses must be a dict with the same names as means")
        s = as_float_array([ses[k] for k in keys], "ses")
    else:
        m = as_float_array(means, "means").ravel()
        s = as_float_array(ses, "ses").ravel()
        keys = list(names) if names is not None else [str(i) for i in range(m.size)]
        if len(keys) != m.size or s.size != m.size:
            raise ValueError("means, ses and names must have the same length")
    if m.size < 2:
        raise ValueError(f"means must hold at least 2 items to order, got {m.size}")
    if not (np.all(np.isfinite(m)) and np.all(np.isfinite(s))) or np.any(s < 0):
        raise ValueError("means must be finite and ses finite and >= 0")
    order = np.argsort(-m if hib else m, kind="stable")
    pv = []
    for i, j in zip(order, order[1:]):
        d, se = m[i] - m[j], float(np.hypot(s[i], s[j]))
        pv.append(1.0 if d == 0 else (0.0 if se == 0 else _t_sf2(d / se, n)))
    rej = holm(pv, 1 - level) if pv else np.zeros(0, bool)
    strict = ">" if hib else "<"
    out = str(keys[order[0]])
    for k, j in enumerate(order[1:]):
        out += f" {strict if rej[k] else '='} {keys[j]}"
    text = (f"{out} (adjacent pairs by a t test, {n} repeats, Holm-corrected at {_pct(1 - level)}"
            + ("; = : cannot be told apart)" if not rej.all() else ")"))
    return Verdict(text, bool(rej.any()), 0, None, n,
                   {"order": [keys[i] for i in order], "p": pv, "strict": rej.tolist(), "sequence": out})
