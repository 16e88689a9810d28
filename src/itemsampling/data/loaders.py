"""Loaders for real data a reader has downloaded (MovieLens releases, the NCF leave-one-out
files) and the MovieLens download helper."""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from .._validation import check_bool
from .frames import COLUMNS

_ML_FILES = {  # file name -> (separator, header, columns)
    "u.data": ("\t", False),
    "ratings.dat": ("::", False),
    "ratings.csv": (",", True),
}


_RATING_FIELDS = ("user", "item", "rating", "timestamp")
_INT64_MIN, _INT64_MAX = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)


def _parse_rows(path: Path, sep: str, header: bool, n_cols: int, kinds: str,
                names: tuple = _RATING_FIELDS, nonneg: tuple = ()) -> list[np.ndarray]:
    """Parse a delimited text file strictly: every row must have ``n_cols`` fields of the given
    kinds (``i`` integer, ``f`` finite float: NaN and inf are refused), and the fields named in
    ``nonneg`` must be >= 0. A fast pandas pass reads well-formed files; when anything is wrong, a
    line-by-line pass reports the first bad value with its file, line number and field name."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")  # a byte-order mark (as spreadsheet programs write it) is dropped
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    lines = text.splitlines()
    start = 1 if header else 0
    if header and not lines:
        raise ValueError(f"{path}: empty file (expected a header line)")
    body = lines[start:]
    if not any(line.strip() for line in body):
        raise ValueError(f"{path}: no data rows")
    if text and not text.endswith("\n"):
        # a file cut in the middle of its last line is truncated: refused when a field is missing;
        # when every field is there, the last number may still have lost digits, which no parser can
        # tell, so the reader is warned with the file and line to check against the original
        last = body[-1].split(sep)
        if len(last) != n_cols or not all(last):
            raise ValueError(f"{path}: truncated last line {len(lines)}: {body[-1]!r}")
        warnings.warn(f"{path}: the file does not end with a newline, so its last line {len(lines)} "
                      f"({body[-1]!r}) may be cut inside a number; it was read as it stands: compare it with "
                      "the original file (every MovieLens and NCF file ends with a newline)", UserWarning,
                      stacklevel=3)
    fast = _parse_fast(text, sep, start, n_cols, kinds)
    if fast is not None and all(fast[names.index(c)].size == 0 or fast[names.index(c)].min() >= 0 for c in nonneg):
        return fast
    cols: list[list] = [[] for _ in range(n_cols)]
    for lineno, line in enumerate(body, start=start + 1):
        if not line.strip():
            continue
        fields = line.split(sep)
        if len(fields) != n_cols:
            raise ValueError(f"{path}: line {lineno} has {len(fields)} field(s), expected {n_cols}: {line!r}")
        for j, (kind, f) in enumerate(zip(kinds, fields)):
            try:
                v = int(f) if kind == "i" else float(f)
            except ValueError:
                v = None
            if v is not None and kind == "i" and not _INT64_MIN <= v <= _INT64_MAX:
                raise ValueError(f"{path}: line {lineno}, field {j + 1} ({names[j]}) must fit in a 64-bit "
                                 f"integer (-2**63..2**63-1), got {f!r}")
            if v is not None and kind == "f" and not np.isfinite(v):
                raise ValueError(f"{path}: line {lineno}, field {j + 1} ({names[j]}) must be a finite number, "
                                 f"got {f!r}")
            if v is not None and names[j] in nonneg and v < 0:
                raise ValueError(f"{path}: line {lineno}, field {j + 1} ({names[j]}) must be a non-negative id, "
                                 f"got {f!r}")
            if v is not None:
                cols[j].append(v)
            else:
                raise ValueError(f"{path}: line {lineno}, field {j + 1} ({names[j]}) is not "
                                 f"{'an integer' if kind == 'i' else 'a number'}: {f!r}") from None
    return [np.asarray(c, dtype=np.int64 if k == "i" else np.float64) for c, k in zip(cols, kinds)]


def _parse_fast(text: str, sep: str, skip: int, n_cols: int, kinds: str) -> list[np.ndarray] | None:
    """pandas' C parser on a well-formed file; ``None`` if anything looks wrong (then the strict
    parser finds and reports the bad line)."""
    if sep != "\t":
        if "\t" in text:
            return None
        text = text.replace(sep, "\t")
    try:
        df = pd.read_csv(io.StringIO(text), sep="\t", header=None, skiprows=skip, engine="c",
                         on_bad_lines="error", skip_blank_lines=True, dtype=str, na_filter=False)
    except Exception:
        return None
    if df.shape[1] != n_cols or len(df) == 0:
        return None
    out = []
    for j, kind in enumerate(kinds):
        col = df.iloc[:, j]
        try:
            arr = pd.to_numeric(col, errors="raise").to_numpy()
        except (ValueError, TypeError):
            return None
        if kind == "i":
            if arr.dtype.kind not in "iu" or (arr.size and arr.dtype.kind == "u" and arr.max() > _INT64_MAX):
                return None  # not integers, or too large for int64 (the strict parser names the line)
            out.append(arr.astype(np.int64))
        else:
            if not np.all(np.isfinite(arr.astype(np.float64))):
                return None
            out.append(arr.astype(np.float64))
    return out


def _as_path(path, name: str = "path") -> Path:
    """``path`` as a :class:`~pathlib.Path`; anything but a string or an ``os.PathLike`` is refused
    with a ``ValueError`` naming the argument."""
    if isinstance(path, (str, os.PathLike)) and not isinstance(path, bytes):
        return Path(path)
    raise ValueError(f"{name} must be a folder or file path (a string or os.PathLike), got "
                     f"{type(path).__name__} {path!r:.60}")


def _find_movielens_file(path: Path) -> Path:
    if path.is_file():
        if path.name not in _ML_FILES:
            raise ValueError(f"path must be a MovieLens ratings file ({', '.join(_ML_FILES)}) or a folder "
                             f"holding one, got {path.name!r}")
        return path
    if not path.exists():
        raise ValueError(f"path {path} does not exist")
    for name in _ML_FILES:
        hits = sorted(path.rglob(name))
        if hits:
            return hits[0]
    raise ValueError(f"no MovieLens ratings file ({', '.join(_ML_FILES)}) under {path}")


def _reindex(user: np.ndarray, item: np.ndarray, rating: np.ndarray, ts: np.ndarray) -> pd.DataFrame:
    uids, u = np.unique(user, return_inverse=True)
    iids, i = np.unique(item, return_inverse=True)
    df = pd.DataFrame({"user": u.astype(np.int64), "item": i.astype(np.int64),
                       "rating": rating.astype(np.float64), "timestamp": ts.astype(np.int64)})
    df = df.sort_values(["user", "timestamp"], kind="stable").reset_index(drop=True)
    df.attrs["n_users"] = int(uids.size)
    df.attrs["n_items"] = int(iids.size)
    df.attrs["user_ids"] = uids
    df.attrs["item_ids"] = iids
    return df


def load_movielens(path) -> pd.DataFrame:
    """Load a MovieLens release a reader has downloaded: a folder (searched recursively) or one
    of the files ``u.data`` (100K; tab-separated ``user item rating timestamp``), ``ratings.dat``
    (1M and 10M; ``user::item::rating::timestamp``) or ``ratings.csv`` (20M, 25M, latest; header
    ``userId,movieId,rating,timestamp``).

    Returns ``user, item, rating, timestamp`` with ids re-indexed to 0-based contiguous (originals
    in ``attrs["user_ids"]`` / ``attrs["item_ids"]``). Missing files, truncated files, malformed
    rows, negative user or item ids and integers beyond 64 bits raise ``ValueError`` naming the file,
    line and field. A file whose last line is complete but has no trailing newline is read with a
    ``UserWarning`` naming the file and line (its last number may have lost digits). A UTF-8
    byte-order mark at the start of a file (as spreadsheet programs write ``ratings.csv``) is
    dropped."""
    f = _find_movielens_file(_as_path(path))
    sep, header = _ML_FILES[f.name]
    if header:
        with f.open("r", encoding="utf-8-sig", errors="replace") as fh:  # utf-8-sig: a byte-order mark is valid
            first = fh.readline().strip()
        if [c.strip() for c in first.split(",")][:4] != ["userId", "movieId", "rating", "timestamp"]:
            raise ValueError(f"{f}: expected the header 'userId,movieId,rating,timestamp', got {first!r}")
    user, item, rating, ts = _parse_rows(f, sep, header, 4, "iifi", nonneg=("user", "item"))
    return _reindex(user, item, rating, ts)


def load_ncf(path, name: str | None = None):
    """Load the leave-one-out files of He et al. 2017 (NCF), in which the papers' ``ml-1m`` and
    ``pinterest-20`` circulate: ``NAME.train.rating`` and ``NAME.test.rating`` (tab-separated
    ``user item rating timestamp``) and ``NAME.test.negative`` (``(user,item)`` then 99 decoy
    items, tab-separated).

    ``path`` is the folder (then ``name`` is the prefix, e.g. ``"ml-1m"``) or the common prefix
    (``.../ml-1m``). Ids are used as they are (already 0-based). Returns ``(train, test,
    negatives)`` with ``negatives`` an int64 array of shape ``(len(test), n_decoys)`` aligned with
    ``test`` rows."""
    p = _as_path(path)
    if name is not None and not isinstance(name, str):
        raise ValueError(f"name must be a file prefix such as 'ml-1m' (a string) or None, got {name!r:.60}")
    prefix = p / name if name is not None else p
    files = {k: Path(f"{prefix}.{k}") for k in ("train.rating", "test.rating", "test.negative")}
    for k, f in files.items():
        if not f.exists():
            raise ValueError(f"NCF file {f} does not exist (need {prefix}.train.rating, .test.rating, .test.negative)")
    ids = ("user", "item")
    tr = _parse_rows(files["train.rating"], "\t", False, 4, "iifi", nonneg=ids)
    te = _parse_rows(files["test.rating"], "\t", False, 4, "iifi", nonneg=ids)
    train = pd.DataFrame(dict(zip(COLUMNS, tr)))
    test = pd.DataFrame(dict(zip(COLUMNS, te)))
    neg_rows, neg_lines = [], []
    fneg = files["test.negative"]
    text = fneg.read_bytes().decode("utf-8-sig", errors="replace")
    numbered = [(n, ln) for n, ln in enumerate(text.splitlines(), start=1) if ln.strip()]
    if len(numbered) != len(test):
        raise ValueError(f"{fneg}: {len(numbered)} rows but {len(test)} test rows in {files['test.rating']}")
    width = None
    for row, (lineno, line) in enumerate(numbered):
        fields = line.split("\t")
        head = fields[0].strip()
        if not (head.startswith("(") and head.endswith(")")):
            raise ValueError(f"{fneg}: line {lineno}, field 1 must start with '(user,item)', got {head!r}")
        try:
            u, i = (int(x) for x in head[1:-1].split(","))
        except ValueError:
            raise ValueError(f"{fneg}: line {lineno}, field 1 must be '(user,item)' with integer ids, "
                             f"got {head!r}") from None
        negs = []
        for j, x in enumerate(fields[1:], start=2):
            if not x.strip():
                continue
            try:
                v = int(x)
            except ValueError:
                raise ValueError(f"{fneg}: line {lineno}, field {j} (decoy) is not an integer: {x!r}") from None
            if not 0 <= v <= _INT64_MAX:
                raise ValueError(f"{fneg}: line {lineno}, field {j} (decoy) must be a non-negative item id "
                                 f"that fits in a 64-bit integer (0..2**63-1), got {v}")
            if v == i:
                raise ValueError(f"{fneg}: line {lineno}, field {j} (decoy) equals the test item {i}")
            negs.append(v)
        if width is None:
            width = len(negs)
        if len(negs) != width or width == 0:
            raise ValueError(f"{fneg}: line {lineno} has {len(negs)} decoys, expected {width}"
                             + (" (truncated last line?)" if row == len(numbered) - 1 else ""))
        if u != test["user"].iat[row] or i != test["item"].iat[row]:
            raise ValueError(f"{fneg}: line {lineno} is for ({u},{i}) but test row {row + 1} "
                             f"is ({test['user'].iat[row]},{test['item'].iat[row]})")
        neg_rows.append(negs)
        neg_lines.append(lineno)
    negatives = np.asarray(neg_rows, dtype=np.int64)
    n_users = int(max(train["user"].max(), test["user"].max())) + 1
    n_items = int(max(train["item"].max(), test["item"].max(), negatives.max())) + 1
    # a decoy the user interacted with in training is not a negative
    trained = np.unique(train["user"].to_numpy() * n_items + train["item"].to_numpy())
    keys = test["user"].to_numpy()[:, None] * n_items + negatives
    hit = np.isin(keys, trained)
    if hit.any():
        row, col = np.argwhere(hit)[0]
        raise ValueError(f"{fneg}: line {neg_lines[row]}, field {col + 2} (decoy) is item {negatives[row, col]}, "
                         f"which user {test['user'].iat[row]} has in {files['train.rating']}")
    for df in (train, test):
        df.attrs["n_users"] = n_users
        df.attrs["n_items"] = n_items
    return train, test, negatives


# ---------------------------------------------------------------------------------------------
# fetch (network; never called by the build or the tests)
# ---------------------------------------------------------------------------------------------
#: GroupLens archives and their MD5 checksums (as published next to the archives).
MOVIELENS_ARCHIVES = {
    "ml-100k": ("https://files.grouplens.org/datasets/movielens/ml-100k.zip", "0e33842e24a9c977be4e0107933c0723"),
    "ml-1m": ("https://files.grouplens.org/datasets/movielens/ml-1m.zip", "c4d9eecfca2ab87c1945afe126590906"),
    "ml-10m": ("https://files.grouplens.org/datasets/movielens/ml-10m.zip", "ce571fd55effeba0271552578f2648bd"),
    "ml-20m": ("https://files.grouplens.org/datasets/movielens/ml-20m.zip", "cd245b17a1ae2cc31bb14903e1204af3"),
    "ml-25m": ("https://files.grouplens.org/datasets/movielens/ml-25m.zip", "6b51fb2759a8657d3bfcbfc42b592ada"),
}


def fetch_movielens(release: str, dest="data/raw", progress: bool = True) -> Path:
    """Download a MovieLens archive (``ml-100k``, ``ml-1m``, ``ml-10m``, ``ml-20m``, ``ml-25m``)
    into ``dest``, verify its MD5 checksum and unpack it. Returns the unpacked folder, to pass to
    :func:`load_movielens`. Needs a network; the book and the tests never call it. Command line::

        python -m itemsampling.data fetch ml-1m --dest data/raw
    """
    import urllib.request

    progress = check_bool(progress, "progress")
    if release not in MOVIELENS_ARCHIVES:
        raise ValueError(f"release must be one of {sorted(MOVIELENS_ARCHIVES)}, got {release!r}")
    url, md5 = MOVIELENS_ARCHIVES[release]
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    archive = dest / f"{release}.zip"
    if not archive.exists() or hashlib.md5(archive.read_bytes()).hexdigest() != md5:
        from tqdm import tqdm

        fd, tmp = tempfile.mkstemp(dir=dest, prefix=f".{release}.", suffix=".part")
        try:
            try:
                with os.fdopen(fd, "wb") as fh, urllib.request.urlopen(url) as resp:
                    total = int(resp.headers.get("Content-Length") or 0)
                    with tqdm(total=total or None, unit="B", unit_scale=True, desc=release,
                              disable=not progress) as bar:
                        while chunk := resp.read(1 << 20):
                            fh.write(chunk)
                            bar.update(len(chunk))
            except OSError as exc:  # urllib's URLError and HTTPError are OSErrors, as are disk errors
                state = (f"the archive {archive} fails its MD5 checksum (corrupt or incomplete)" if archive.exists()
                         else f"there is no archive {archive} yet")
                reason = getattr(exc, "reason", None) or exc.strerror or exc
                raise ValueError(f"cannot download {url} ({reason}), and {state}; connect to the network, or "
                                 f"place the archive (MD5 {md5}) in {dest}") from None
            got = hashlib.md5(Path(tmp).read_bytes()).hexdigest()
            if got != md5:
                raise ValueError(f"checksum mismatch for {url}: expected MD5 {md5}, got {got}")
            os.replace(tmp, archive)
        finally:
            Path(tmp).unlink(missing_ok=True)
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(dest)
    return dest / release if (dest / release).exists() else dest
