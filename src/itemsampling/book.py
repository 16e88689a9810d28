"""Helpers used by the book's notebooks: recording headline numbers.

Every chapter records its headline numbers with :func:`record`. When a notebook runs through
``python -m itemsampling.run`` (or the notebook tests), the runner sets the environment variable
``ITEMSAMPLING_RESULTS`` to a JSON file and every recorded value is written there; inside the
rendered book the value is also *glued* (``myst_nb.glue``) so prose can quote it with
``{glue:text}`name:.3f```.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from pathlib import Path

import numpy as np

from ._validation import as_float_array, check_real

__all__ = ["record", "record_text", "recorded", "to_jsonable", "order_string", "standard_error",
           "compare_with_paper", "paired_difference", "RESULTS_ENV"]

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
        from myst_nb import glue

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
        from myst_nb import glue

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


def compare_with_paper(ours: float, ours_se: float, paper: float, paper_se: float = 0.0, z: float = 2.0) -> dict:
    """Decide "ours vs paper" by the standard error of the difference.

    The difference ``ours - paper`` has standard error ``se = sqrt(ours_se**2 + paper_se**2)``
    (independent estimates: ours over our repeats, the paper's from its printed ± where given, else 0).
    The verdict is ``"matches"`` when ``|ours - paper| < z * se``, else ``"above"`` or ``"below"``
    (ours above / below the paper's). A zero ``se`` only matches an exactly equal value.
    Returns ``{"diff", "se", "verdict"}``."""
    ours = check_real(ours, "ours")
    paper = check_real(paper, "paper")
    ours_se = check_real(ours_se, "ours_se", low=0)
    paper_se = check_real(paper_se, "paper_se", low=0)
    z = check_real(z, "z", low=0, low_open=True)
    diff = ours - paper
    se = float(np.hypot(ours_se, paper_se))
    verdict = "matches" if abs(diff) < z * se or diff == 0 else ("above" if diff > 0 else "below")
    return {"diff": diff, "se": se, "verdict": verdict}


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
