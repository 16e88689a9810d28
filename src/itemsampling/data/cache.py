"""On-disk cache of the package: the cache folder, atomic writes, ``.npz`` files and stable hashes."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
from pathlib import Path

import numpy as np

#: Bump when the simulator or the cache layout changes: old cache files are then ignored.
CACHE_VERSION = 1


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


def atomic_save_npz(path: Path, **arrays) -> None:
    """Write a ``.npz`` file atomically (temporary file + ``os.replace``): an interrupted write
    never leaves a partial file under the final name."""
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    _atomic_write_bytes(Path(path), buf.getvalue())


def load_npz(path: Path) -> dict | None:
    """Read a cache file written by :func:`atomic_save_npz`; ``None`` if absent or unreadable."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except Exception:  # corrupt (e.g. written by an older, non-atomic version): recompute
        return None


def stable_hash(obj) -> str:
    """A short hash of a JSON-serialisable object, stable across processes and sessions."""
    text = json.dumps(obj, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]

