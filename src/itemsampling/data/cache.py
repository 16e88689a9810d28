"""On-disk cache of the package: the cache folder, atomic writes, checksummed ``.npz`` files,
stable hashes and content fingerprints.

Every cache file written by :func:`atomic_save_npz` carries the key it was written under and a
SHA-256 checksum of that key and of every array (name, dtype, shape, bytes). :func:`load_npz`
verifies both on read: a file that was truncated, edited, written for another key or that holds
NaN is reported with a :class:`CacheWarning` and treated as absent, so the caller recomputes it.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import io
import json
import os
import tempfile
import warnings
from pathlib import Path

import numpy as np

from .._version import __version__

#: Bump when the simulator or the cache layout changes: old cache files are then ignored.
#: (2: every file carries its key and a checksum.)
CACHE_VERSION = 2

_KEY_FIELD = "__cache_key__"
_SUM_FIELD = "__checksum__"


class CacheWarning(UserWarning):
    """A cache file did not verify (corrupt, edited, another run's, or holding NaN) and is recomputed."""


def cache_dir(*parts: str) -> Path:
    """The on-disk cache folder (created on demand).

    ``$ITEMSAMPLING_CACHE`` if set; otherwise ``data/cache`` of the source checkout (the folder
    holding ``pyproject.toml``); otherwise ``~/.cache/itemsampling``.
    """
    env = os.environ.get("ITEMSAMPLING_CACHE")
    if env:
        base = Path(env)
    else:
        root = Path(__file__).resolve().parents[3]
        if (root / "pyproject.toml").exists() and (root / "src" / "itemsampling").is_dir():
            base = root / "data" / "cache"
        else:
            base = Path.home() / ".cache" / "itemsampling"
    path = base.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _checksum(cache_key: str, arrays: dict) -> str:
    h = hashlib.sha256()
    h.update(str(cache_key).encode())
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"\0{name}\0{a.dtype.str}\0{a.shape}\0".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def atomic_save_npz(path: Path, cache_key: str = "", **arrays) -> None:
    """Write a ``.npz`` file atomically (temporary file + ``os.replace``): an interrupted write
    never leaves a partial file under the final name. The file also stores ``cache_key`` and a
    SHA-256 checksum of the key and the arrays, which :func:`load_npz` verifies."""
    for reserved in (_KEY_FIELD, _SUM_FIELD):
        if reserved in arrays:
            raise ValueError(f"array name {reserved!r} is reserved")
    arrays = {k: np.asarray(v) for k, v in arrays.items()}
    buf = io.BytesIO()
    np.savez(buf, **arrays, **{_KEY_FIELD: np.str_(cache_key), _SUM_FIELD: np.str_(_checksum(cache_key, arrays))})
    _atomic_write_bytes(Path(path), buf.getvalue())


def _reject(path: Path, why: str) -> None:
    warnings.warn(f"cache file {path} {why}; recomputing it", CacheWarning, stacklevel=3)
    return None


def load_npz(path: Path, cache_key: str = "", allow_nan: bool = False) -> dict | None:
    """Read a cache file written by :func:`atomic_save_npz` and verify it; ``None`` if absent.

    A file that cannot be read, has no checksum, was written under another ``cache_key``, whose
    checksum does not match its content, or (unless ``allow_nan``) holds NaN in a float array,
    gives a :class:`CacheWarning` and ``None``: the caller recomputes and overwrites it."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except Exception:  # truncated or not an npz file
        return _reject(path, "is unreadable")
    stored_key, stored_sum = data.pop(_KEY_FIELD, None), data.pop(_SUM_FIELD, None)
    if stored_key is None or stored_sum is None:
        return _reject(path, "carries no checksum")
    if str(stored_key) != str(cache_key):
        return _reject(path, "was written for another key (another run's inputs)")
    if str(stored_sum) != _checksum(cache_key, data):
        return _reject(path, "does not match its checksum (truncated or edited)")
    if not allow_nan:
        for name, a in data.items():
            if a.dtype.kind in "fc" and not np.all(np.isfinite(a)):
                return _reject(path, f"holds NaN or infinite values in {name!r}")
    return data


def stable_hash(obj) -> str:
    """A short hash of a JSON-serialisable object, stable across processes and sessions."""
    text = json.dumps(obj, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def fingerprint(obj, _seen=None) -> str:
    """A content hash of (almost) any object, stable across processes: used in cache keys.

    Arrays and data frames are hashed by content (dtype, shape, bytes, column names, ``attrs``);
    functions by module, qualified name, source code (or byte code), defaults and closure values;
    ``functools.partial`` objects by their function, arguments and keywords; other objects by
    their class and attributes, unless they define ``cache_token`` (a value, or a method returning
    one), which then stands for everything that determines their results (use it for callables that
    keep counters or other state that does not change what they compute). Two objects with equal
    fingerprints produce the same results."""
    seen = set() if _seen is None else _seen
    h = hashlib.sha256()

    def put(*parts):
        for part in parts:
            h.update(str(part).encode() if not isinstance(part, bytes) else part)
            h.update(b"\0")

    if obj is None or isinstance(obj, (bool, int, float, complex, str, np.generic)):
        put(type(obj).__name__, repr(obj))
        return h.hexdigest()[:32]
    if id(obj) in seen:
        put("cycle", type(obj).__qualname__)
        return h.hexdigest()[:32]
    seen = seen | {id(obj)}
    token = getattr(obj, "cache_token", None)
    if token is not None and not inspect.isclass(obj):
        # an object that declares what determines its results (e.g. a callable with a call counter)
        put("token", type(obj).__module__, type(obj).__qualname__, fingerprint(token() if callable(token) else token, seen))
        return h.hexdigest()[:32]
    import pandas as pd
    import scipy.sparse as sp

    if isinstance(obj, bytes):
        put("bytes", obj)
    elif isinstance(obj, np.ndarray):
        if obj.dtype.kind == "O":
            put("object-array", obj.shape, *[fingerprint(x, seen) for x in obj.ravel()])
        else:
            a = np.ascontiguousarray(obj)
            put("ndarray", a.dtype.str, a.shape, a.tobytes())
    elif isinstance(obj, pd.DataFrame):
        put("DataFrame", list(map(str, obj.columns)), list(map(str, obj.dtypes)),
            pd.util.hash_pandas_object(obj, index=True).to_numpy().tobytes(), fingerprint(dict(obj.attrs), seen))
    elif isinstance(obj, pd.Series):
        put("Series", str(obj.name), str(obj.dtype), pd.util.hash_pandas_object(obj, index=True).to_numpy().tobytes())
    elif sp.issparse(obj):
        c = sp.csr_matrix(obj)
        put("sparse", c.shape, fingerprint(c.data, seen), fingerprint(c.indices, seen), fingerprint(c.indptr, seen))
    elif isinstance(obj, dict):
        items = sorted(((fingerprint(k, seen), fingerprint(v, seen)) for k, v in obj.items()))
        put("dict", *[f"{a}:{b}" for a, b in items])
    elif isinstance(obj, (list, tuple)):
        put(type(obj).__name__, *[fingerprint(x, seen) for x in obj])
    elif isinstance(obj, (set, frozenset)):
        put("set", *sorted(fingerprint(x, seen) for x in obj))
    elif isinstance(obj, Path):
        put("Path", str(obj))
    elif isinstance(obj, functools.partial):
        put("partial", fingerprint(obj.func, seen), fingerprint(obj.args, seen), fingerprint(obj.keywords, seen))
    elif inspect.isfunction(obj) or inspect.ismethod(obj):
        fn = obj.__func__ if inspect.ismethod(obj) else obj
        try:
            src = inspect.getsource(fn)
        except (OSError, TypeError):
            src = fn.__code__.co_code.hex() + repr(fn.__code__.co_consts)
        closure = [c.cell_contents for c in (fn.__closure__ or ()) if _cell_filled(c)]
        put("function", fn.__module__, fn.__qualname__, src, fingerprint(fn.__defaults__, seen),
            fingerprint(fn.__kwdefaults__, seen), fingerprint(closure, seen))
        if inspect.ismethod(obj):
            put(fingerprint(obj.__self__, seen))
    elif isinstance(obj, np.random.Generator):
        put("Generator", json.dumps(obj.bit_generator.state, sort_keys=True, default=str))
    elif isinstance(obj, np.random.SeedSequence):
        put("SeedSequence", repr(obj.entropy), repr(obj.spawn_key), obj.pool_size)
    elif inspect.isclass(obj) or inspect.isbuiltin(obj) or inspect.ismodule(obj):
        put(type(obj).__name__, getattr(obj, "__module__", ""), getattr(obj, "__qualname__", getattr(obj, "__name__", "")))
    elif hasattr(obj, "__dict__") or hasattr(obj, "__slots__"):
        cls = type(obj)
        try:
            src = inspect.getsource(cls)
        except (OSError, TypeError):
            src = ""
        state = dict(getattr(obj, "__dict__", {}))
        for slot in getattr(cls, "__slots__", ()):
            if hasattr(obj, slot):
                state[slot] = getattr(obj, slot)
        put("object", cls.__module__, cls.__qualname__, src, fingerprint(state, seen))
    else:
        put("repr", type(obj).__qualname__, repr(obj))
    return h.hexdigest()[:32]


def _cell_filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def path_fingerprint(path) -> str:
    """Content hash of a file, or of every file under a folder (relative names and bytes): a cache
    keyed on it is invalidated when any data file changes, is added or is removed."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"path {path} does not exist")
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(path) if f != path else f.name).encode() + b"\0")
        with f.open("rb") as fh:
            while chunk := fh.read(1 << 22):
                h.update(chunk)
        h.update(b"\0")
    return h.hexdigest()[:32]


@functools.lru_cache(maxsize=1)
def package_fingerprint() -> str:
    """The package version and a hash of every source file of :mod:`itemsampling`: results cached
    by one version of the code are never returned by another."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256(__version__.encode())
    for f in sorted(root.rglob("*.py")):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return f"{__version__}-{h.hexdigest()[:16]}"
