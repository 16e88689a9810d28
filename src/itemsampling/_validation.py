"""Input checks shared by the package: every public function refuses bad input with a
``ValueError`` that names the argument and the allowed range."""

from __future__ import annotations

import numbers
import os

import numpy as np


def as_rng(rng=None, name: str = "rng") -> np.random.Generator:
    """SPEC 7: accept ``None``, a non-negative integer seed, a ``SeedSequence`` or a ``Generator``.

    Floats (``rng=3.5``, even ``3.0``), booleans and negative seeds are refused with a
    ``ValueError`` naming the argument, never truncated."""
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, np.random.SeedSequence) or rng is None:
        return np.random.default_rng(rng)
    if isinstance(rng, (numbers.Integral, np.integer)) and not isinstance(rng, (bool, np.bool_)):
        if int(rng) < 0:
            raise ValueError(f"{name} must be a non-negative integer seed, got {int(rng)}")
        return np.random.default_rng(int(rng))
    raise ValueError(f"{name} must be None, a non-negative integer seed, a SeedSequence or a numpy Generator, "
                     f"got {rng!r} ({type(rng).__name__})")


def check_bool(value, name: str, allow_none: bool = False):
    """Return ``value`` as a Python bool if it is ``True``/``False`` (or a numpy bool).

    Strings (``'False'`` is truthy), integers 0/1 and ``None`` (unless ``allow_none``) are refused
    with a ``ValueError`` naming the argument: a flag is never read by its truthiness."""
    if value is None and allow_none:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    allowed = "True, False or None" if allow_none else "True or False"
    raise ValueError(f"{name} must be {allowed}, got {value!r} ({type(value).__name__})")


def check_open_unit(value, name: str, what: str = "a number", example: str = "") -> float:
    """Return ``value`` as a float strictly inside (0, 1) (a confidence level, a margin, a
    proportion); refuse bools, non-numbers, NaN and values outside with a ``ValueError`` naming
    ``name`` (``example``, e.g. ``", e.g. 0.95"``, is appended to the allowed range)."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise ValueError(f"{name} must be {what} in (0, 1){example}, got {value!r}")
    v = float(value)
    if not np.isfinite(v) or not 0.0 < v < 1.0:
        raise ValueError(f"{name} must be {what} in (0, 1){example}, got {value!r}")
    return v


def _format_bytes(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024.0
    return f"{n:.1f} PiB"  # pragma: no cover


def _process_memory_caps() -> list[int]:
    """Limits on this process's memory below the machine's: the address-space and data-segment
    rlimits (``ulimit -v`` / ``-d``) and the container's cgroup limit (v2 ``memory.max``, v1
    ``memory.limit_in_bytes``). A container sees the host's physical memory, so without these an
    allocation that the check accepts could still end in a raw ``MemoryError``."""
    caps = []
    try:
        import resource

        for which in ("RLIMIT_AS", "RLIMIT_DATA"):
            soft = resource.getrlimit(getattr(resource, which))[0]
            if soft not in (resource.RLIM_INFINITY, -1) and soft > 0:
                caps.append(int(soft))
    except (ImportError, AttributeError, ValueError, OSError):  # pragma: no cover - non-POSIX
        pass
    for f in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = open(f).read().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < 1 << 60:  # "max" or 2**63 - 4096: no limit
            caps.append(int(text))
    return caps


def memory_limit() -> int:
    """The largest single allocation the package attempts, in bytes: ``$ITEMSAMPLING_MEMORY_LIMIT``
    if set (bytes), otherwise the machine's physical memory, or less where the process is held to
    less (an address-space rlimit, a container's cgroup limit)."""
    env = os.environ.get("ITEMSAMPLING_MEMORY_LIMIT")
    if env:
        try:
            value = int(float(env))
        except ValueError:
            raise ValueError(f"ITEMSAMPLING_MEMORY_LIMIT must be a number of bytes, got {env!r}") from None
        if value <= 0:
            raise ValueError(f"ITEMSAMPLING_MEMORY_LIMIT must be positive, got {env!r}")
        return value
    try:
        physical = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        physical = 1 << 40
    return min([physical, *_process_memory_caps()])


def check_memory(n_bytes, what: str, argument: str) -> None:
    """Refuse, before allocating, a request that needs more than :func:`memory_limit` bytes.

    ``what`` describes the allocation (e.g. ``"the N x n kernel"``), ``argument`` the argument(s) to
    reduce; the ``ValueError`` says how much memory the request needs and how much there is."""
    need = float(n_bytes)
    limit = memory_limit()
    if not np.isfinite(need) or need > limit:
        raise ValueError(f"{what} needs {_format_bytes(need)} of memory but at most {_format_bytes(limit)} "
                         f"is available; reduce {argument}")


def check_int(value, name: str, low: int | None = None, high: int | None = None, int64: bool = True) -> int:
    """Return ``value`` as a Python int if it is an integer in ``[low, high]``; with ``int64`` (the
    default) it must also fit in a 64-bit integer, as every size, count and id numpy holds must (a
    count used only in Python arithmetic, such as a number of comparisons, passes ``int64=False``)."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        if isinstance(value, (float, np.floating)) and np.isfinite(value) and float(value).is_integer():
            value = int(value)
        else:
            raise ValueError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if low is not None and value < low:
        raise ValueError(f"{name} must be >= {low}" + (f" and <= {high}" if high is not None else "") + f", got {value}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high}" + (f" and >= {low}" if low is not None else "") + f", got {value}")
    if int64 and not -2**63 <= value < 2**63:  # numpy holds no larger integer: refused here, not as a later cast's NaN
        raise ValueError(f"{name} must fit in a 64-bit integer (-2**63..2**63-1)"
                         + (f" and be >= {low}" if low is not None else "") + f", got {value}")
    return value


def check_ranks(ranks, name: str, high: int | None = None) -> np.ndarray:
    """Return ``ranks`` as a 1-d int64 array of 1-based ranks in ``1..high``.

    Refuses empty input, NaN or infinite values, non-integer values and values outside the range.
    """
    arr = np.asarray(ranks)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-d array of ranks, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty")
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise ValueError(f"{name} must hold integer ranks, got dtype {arr.dtype}")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} must not contain NaN or infinite values")
        if not np.all(arr == np.floor(arr)):
            raise ValueError(f"{name} must hold integer ranks, got non-integer values")
    arr = arr.astype(np.int64)
    lo, hi = arr.min(), arr.max()
    rng_txt = f"1..{high}" if high is not None else ">= 1"
    if lo < 1 or (high is not None and hi > high):
        bad = lo if lo < 1 else hi
        raise ValueError(f"{name} must lie in {rng_txt}, got {bad}")
    return arr


def check_sizes(n_items, sample_size) -> tuple[int, int]:
    """Check the catalog size ``N >= 2`` and the sampled-set size ``2 <= n <= N``."""
    n_items = check_int(n_items, "n_items", low=2)
    sample_size = check_int(sample_size, "sample_size", low=2, high=n_items)
    return n_items, sample_size


def as_float_array(value, name: str) -> np.ndarray:
    """``np.asarray(value, dtype=float64)``, with a ``ValueError`` naming the argument (instead of
    numpy's "could not convert string to float") when ``value`` holds strings, ``None``, dicts or
    ragged lists. Booleans are refused too."""
    if isinstance(value, (str, bytes, dict, set)) or value is None:
        raise ValueError(f"{name} must be an array of numbers, got {type(value).__name__} {value!r:.60}")
    try:
        arr = np.asarray(value)
        if arr.dtype.kind == "b":
            raise ValueError
        return arr.astype(np.float64) if arr.dtype.kind in "iuf" else np.asarray(value, dtype=np.float64)
    except (ValueError, TypeError):
        raise ValueError(f"{name} must be an array of numbers, got {value!r:.80}") from None


def check_real(value, name: str, low: float | None = None, high: float | None = None,
               low_open: bool = False, high_open: bool = False) -> float:
    """Return ``value`` as a finite Python float in the given range (open or closed ends).

    Strings, booleans, ``None``, arrays and NaN/inf are refused with a ``ValueError`` naming the
    argument and the allowed range."""
    lo = "" if low is None else ("(" if low_open else "[") + f"{low:g}"
    hi = "" if high is None else f"{high:g}" + (")" if high_open else "]")
    if low == 0 and high is None:
        what = "a positive finite number (> 0)" if low_open else "a non-negative finite number (>= 0)"
    elif low is None and high is None:
        what = "a finite number"
    elif low is not None and high is not None:
        what = f"a number that lies in {lo}, {hi}"
    else:
        what = f"a finite number in {lo or '(-inf'}, {hi or 'inf)'}"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise ValueError(f"{name} must " + (f"lie in {lo}, {hi}" if low is not None and high is not None
                                            else f"be {what}") + f", got {value!r:.60}")
    v = float(value)
    if (not np.isfinite(v) or (low is not None and (v <= low if low_open else v < low))
            or (high is not None and (v >= high if high_open else v > high))):
        raise ValueError(f"{name} must " + (f"lie in {lo}, {hi}" if low is not None and high is not None
                                            else f"be {what}") + f", got {value!r}")
    return v


def check_probability_vector(p, name: str, length: int | None = None, atol: float = 1e-8) -> np.ndarray:
    """Return ``p`` as a float64 vector that is non-negative and sums to 1."""
    arr = as_float_array(p, name)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-d array")
    if length is not None and arr.size != length:
        raise ValueError(f"{name} must have length {length}, got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must not contain NaN or infinite values")
    if np.any(arr < 0):
        raise ValueError(f"{name} must be non-negative, got minimum {arr.min()}")
    s = arr.sum()
    if abs(s - 1.0) > atol * max(1.0, arr.size) ** 0.5 * 1e2:
        raise ValueError(f"{name} must sum to 1, got {s}")
    return arr


def check_sample_sizes(sample_size, n_items: int, n_users: int | None = None):
    """Check a sampled-set size that is either one integer for every user or one per user.

    The book's one convention for per-user sample sizes (adaptive sampling, TORS Sec. 6): every
    estimator entry point takes ``sample_size`` as an int ``2 <= n <= N`` *or* a 1-d integer array
    of length M (one :math:`n_u` per sampled rank, each in ``2..N``). Returns an ``int`` for a
    scalar and for an array whose entries are all equal (so equal sizes take exactly the
    fixed-size code path), otherwise an int64 array of length ``n_users``.
    """
    n_items = check_int(n_items, "n_items", low=2)
    if np.ndim(sample_size) == 0:
        return check_int(sample_size, "sample_size", low=2, high=n_items)
    arr = np.asarray(sample_size)
    if arr.ndim != 1:
        raise ValueError(f"sample_size must be an int or a 1-d array of per-user sizes, got shape {arr.shape}")
    if n_users is not None and arr.size != n_users:
        raise ValueError(f"sample_size must be an int or have one size per user ({n_users}), got length {arr.size}")
    sizes = check_ranks(arr, "sample_size", high=n_items)  # integral, finite, non-empty, <= N
    if sizes.min() < 2:
        raise ValueError(f"sample_size must lie in 2..{n_items}, got {sizes.min()}")
    if np.all(sizes == sizes[0]):
        return int(sizes[0])
    return sizes


def check_kernel(K, name: str = "K", n_rows: int | None = None) -> np.ndarray:
    """Return ``K`` as a 2-d float64 matrix of finite, non-negative entries (a kernel
    :math:`P(r \\mid R)`, possibly restricted to some columns or scaled by weights: its rows need not
    sum to 1). ``n_rows`` fixes the number of rows (the length of the mixing distribution)."""
    Km = as_float_array(K, name)
    if Km.ndim != 2 or Km.shape[0] < 1 or Km.shape[1] < 1:
        raise ValueError(f"{name} must be a non-empty 2-d kernel matrix of shape (N, n), got shape {Km.shape}")
    if n_rows is not None and Km.shape[0] != n_rows:
        raise ValueError(f"{name} must have {n_rows} rows (one per global rank), got {Km.shape[0]}")
    if not np.all(np.isfinite(Km)):
        raise ValueError(f"{name} must not contain NaN or infinite values")
    if np.any(Km < 0):
        raise ValueError(f"{name} must hold non-negative probabilities, got minimum {Km.min()}")
    return Km


def check_seed(value, name: str = "rng") -> int:
    """Return ``value`` as a Python int if it is a non-negative integer seed (the rule of
    :func:`as_rng` for an integer seed): floats (even ``3.0``), booleans and negative values are
    refused with a ``ValueError`` naming the argument, never truncated."""
    if isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, (bool, np.bool_)) \
            and int(value) >= 0:
        return int(value)
    raise ValueError(f"{name} must be a non-negative integer seed, got {value!r} ({type(value).__name__})")


class ResolutionWarning(UserWarning):
    """A cut-off :math:`K` below one kernel width :math:`N/(n-1)`: the sampled ranks cannot tell
    the top :math:`K` of the :math:`N` items apart, so an estimate of a metric at :math:`K` is driven
    by the estimator's prior rather than by the data (raised by
    :func:`itemsampling.estimators.estimate_metric` and :func:`~itemsampling.estimators.estimate_metrics`)."""


#: What an interval is for (``target=`` of the estimators, ``estimate --target``, ``plan --target``): the
#: population the test users were drawn from, or the test users themselves.
TARGETS = ("population", "test-users")


def check_target(target) -> str:
    """``target`` must be one of :data:`TARGETS`; a clear ``ValueError`` otherwise."""
    if isinstance(target, str) and target in TARGETS:
        return target
    raise ValueError(f"target must be one of {TARGETS}, got {target!r}")
