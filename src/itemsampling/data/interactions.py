"""Interactions in the formats researchers publish, recognised by their content: one dispatcher,
:func:`load_interactions`, and a loader per format.

Every loader returns the frame of :func:`itemsampling.data.load_movielens`: columns ``user, item,
rating, timestamp`` (rating 1.0 and timestamp 0 where the file has none), ids re-indexed to 0-based
contiguous ``int64`` (users and items sorted by their original id, numerically when every id is an
integer), the original ids in ``attrs["user_ids"]`` / ``attrs["item_ids"]``, the catalog sizes in
``attrs["n_users"]`` / ``attrs["n_items"]``, and the provenance in ``attrs["source"]``: the format
and, for each file read, its path, size in bytes and SHA-256 digest. A file pair that is a
train/test split (``train.txt`` + ``test.txt``, an NCF split, train / [valid /] test tables: :func:`load_split`) also sets ``attrs["held_out"]``, a
boolean array aligned with the rows that is true for the rows of the test file
(:func:`given_split` turns it back into ``(train, test)``).
"""

from __future__ import annotations

import hashlib
import io
import re
from pathlib import Path

import numpy as np
import pandas as pd

from .loaders import _ML_FILES, _as_path, load_movielens, load_ncf

#: The formats :func:`load_interactions` recognises, as its refusal lists them.
FORMATS = (
    "MovieLens ratings (u.data, ratings.dat, ratings.csv; a folder searched recursively)",
    "an NCF leave-one-out split (NAME.train.rating, NAME.test.rating, NAME.test.negative)",
    "a user-line split (train.txt, with test.txt beside it when there is one; lines 'user item item ...', "
    "as NGCF, LightGCN and KGAT publish them)",
    "count-prefixed user lines (CiteULike's users.dat: line u is 'count item item ...')",
    "a RecBole atomic file (*.inter: tab-separated, header 'user_id:token item_id:token ...')",
    "a split given as two or three tables (train / valid / test: train.csv + test.csv, train.tsv + test.tsv, "
    "headerless 'user item [rating [timestamp]]' rows, or RecBole's NAME.train.inter + NAME.valid.inter + "
    "NAME.test.inter)",
    "an interactions table (.csv, .tsv, .parquet, or delimited text) with a header naming the user and item "
    "columns ('user'/'item', or user_column / item_column), or headerless 'user item [rating [timestamp]]' rows",
)

#: Column names recognised when ``user_column`` / ``item_column`` are not given (case-insensitive).
USER_NAMES = ("user", "user_id", "userid", "uid", "user_name", "reviewerid", "customer_id")
ITEM_NAMES = ("item", "item_id", "itemid", "iid", "movieid", "movie_id", "business_id", "asin", "product_id",
              "track_id", "artist_id", "book_id", "venue_id")
RATING_NAMES = ("rating", "ratings", "stars", "score", "rating_score")
TIME_NAMES = ("timestamp", "time", "ts", "date", "datetime", "unixreviewtime")

_TABLE_SUFFIXES = (".csv", ".tsv", ".tab", ".txt", ".dat", ".parquet", ".pq", ".inter")
_RECBOLE_TYPES = ("token", "token_seq", "float", "float_seq")


def formats_message(path) -> str:
    """The refusal of a path no loader reads: the path and the formats known."""
    return (f"cannot read {path} as interactions; the formats known are: " + "; ".join(FORMATS)
            + ". Pass a folder holding one of them or the file itself")


# ---------------------------------------------------------------------------------------------
# reading, provenance, the common frame
# ---------------------------------------------------------------------------------------------
def _read(path: Path) -> tuple[bytes, dict]:
    """The bytes of a regular file and its provenance entry (path, bytes, sha256)."""
    if not path.is_file():
        raise ValueError(f"{path} is not a regular file")
    raw = path.read_bytes()
    return raw, {"path": str(path.resolve()), "name": path.name, "bytes": len(raw),
                 "sha256": hashlib.sha256(raw).hexdigest()}


def _decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _file_entry(path: Path) -> dict:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return {"path": str(path.resolve()), "name": path.name, "bytes": path.stat().st_size, "sha256": h.hexdigest()}


def _ids(values, path: Path, column: str, lines=None) -> np.ndarray:
    """Ids as int64 when every value is an integer, else as strings (tokens); empty or missing ids
    are refused naming the file, line and column."""
    s = pd.Series(values)

    def where(j):
        return f"line {lines[j]}" if lines is not None else f"row {j + 1}"

    if s.dtype.kind == "b":
        raise ValueError(f"{path}: column {column!r} holds booleans, not ids")
    if s.dtype.kind in "iu":
        return s.to_numpy(np.int64)
    if s.dtype.kind == "f":
        arr = s.to_numpy(np.float64)
        bad = ~np.isfinite(arr) | (arr != np.floor(arr))
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{path}: {where(j)}, column {column!r} must be an id (an integer or a token), "
                             f"got {s.iat[j]!r}")
        return arr.astype(np.int64)
    missing = s.isna().to_numpy().copy()
    text = s.astype(str).str.strip()
    missing |= (text == "").to_numpy()
    if missing.any():
        j = int(np.flatnonzero(missing)[0])
        raise ValueError(f"{path}: {where(j)}, column {column!r} is empty; every row needs a {column} id")
    num = pd.to_numeric(text, errors="coerce")
    if num.dtype.kind in "iu":
        return num.to_numpy(np.int64)
    return text.to_numpy(dtype=str)


def _numbers(values, path: Path, column: str, lines=None) -> np.ndarray:
    s = pd.Series(values)
    num = pd.to_numeric(s, errors="coerce")
    arr = num.to_numpy(np.float64)
    bad = ~np.isfinite(arr)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        where = f"line {lines[j]}" if lines is not None else f"row {j + 1}"
        raise ValueError(f"{path}: {where}, column {column!r} must be a finite number, got {s.iat[j]!r}")
    return arr


def _times(values, path: Path, column: str, lines=None) -> np.ndarray:
    """Timestamps as int64 seconds: numbers, or date-times (ISO text or a datetime column)."""
    s = pd.Series(values)
    if s.dtype.kind == "M":
        if s.isna().any():
            raise ValueError(f"{path}: column {column!r} holds a missing date-time (row "
                             f"{int(np.flatnonzero(s.isna().to_numpy())[0]) + 1})")
        return (s.astype("datetime64[s]").astype(np.int64)).to_numpy()
    num = pd.to_numeric(s, errors="coerce")
    if num.notna().all():
        return _numbers(s, path, column, lines).astype(np.int64)
    dt = pd.to_datetime(s, errors="coerce", utc=True)
    if dt.notna().all():
        return (dt.dt.tz_localize(None).astype("datetime64[s]").astype(np.int64)).to_numpy()
    j = int(np.flatnonzero((num.isna() & dt.isna()).to_numpy())[0])
    where = f"line {lines[j]}" if lines is not None else f"row {j + 1}"
    raise ValueError(f"{path}: {where}, column {column!r} must be a number or a date-time, got {s.iat[j]!r}")


def _frame(user, item, rating, ts, fmt: str, files: list[dict], held_out=None) -> pd.DataFrame:
    """The common frame: ids re-indexed (sorted originals), rows sorted by user then timestamp."""
    uids, u = np.unique(np.asarray(user), return_inverse=True)
    iids, i = np.unique(np.asarray(item), return_inverse=True)
    n = u.size
    rating = np.ones(n) if rating is None else np.asarray(rating, dtype=np.float64)
    ts = np.zeros(n, dtype=np.int64) if ts is None else np.asarray(ts, dtype=np.int64)
    order = np.lexsort((ts, u))
    df = pd.DataFrame({"user": u[order].astype(np.int64), "item": i[order].astype(np.int64),
                       "rating": rating[order], "timestamp": ts[order]})
    df.attrs["n_users"] = int(uids.size)
    df.attrs["n_items"] = int(iids.size)
    df.attrs["user_ids"] = uids
    df.attrs["item_ids"] = iids
    df.attrs["source"] = {"format": fmt, "files": files}
    if held_out is not None:
        df.attrs["held_out"] = np.asarray(held_out, dtype=bool)[order]
    return df


def _no_columns(fmt: str, user_column, item_column) -> None:
    given = [n for n, v in (("user_column", user_column), ("item_column", item_column)) if v is not None]
    if given:
        raise ValueError(f"{' and '.join(given)} only applies to a table or a RecBole file; {fmt} has no columns "
                         f"to name (its user and item are fixed by the format), so leave {given[0]} unset")


def _check_column_name(value, name: str):
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ValueError(f"{name} must be a column name (a non-empty string) or None, got {value!r:.60}")
    return value


# ---------------------------------------------------------------------------------------------
# user lines
# ---------------------------------------------------------------------------------------------
def _parse_user_lines(path: Path, text: str, count_prefixed: bool) -> tuple[np.ndarray, np.ndarray]:
    lines = text.splitlines()
    toks = [line.split() for line in lines]
    if count_prefixed:
        lens = np.fromiter((len(t) for t in toks), dtype=np.int64, count=len(toks))
        empty = np.flatnonzero(lens == 0)
        if empty.size:
            raise ValueError(f"{path}: line {empty[0] + 1} is empty; count-prefixed user lines need 'count item "
                             "item ...' on every line (line u is user u; a user without items writes 0)")
    else:
        toks = [t for t in toks if t]
        keep = [k + 1 for k, line in enumerate(lines) if line.split()]
    if not toks:
        raise ValueError(f"{path}: no data rows")
    lens = np.fromiter((len(t) for t in toks), dtype=np.int64, count=len(toks))
    flat = [x for t in toks for x in t]
    try:
        values = np.array(flat, dtype=np.int64)
    except (ValueError, OverflowError):
        for k, t in enumerate(toks):
            for j, x in enumerate(t):
                try:
                    v = int(x)
                except ValueError:
                    v = None
                if v is None or not -2**63 <= v < 2**63:
                    lineno = k + 1 if count_prefixed else keep[k]
                    what = ("the count" if count_prefixed else "the user id") if j == 0 else "an item id"
                    raise ValueError(f"{path}: line {lineno}, field {j + 1} ({what}) must be an integer that "
                                     f"fits in 64 bits, got {x!r}") from None
        raise
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    heads = values[starts]
    if count_prefixed:
        bad = np.flatnonzero(heads != lens - 1)
        if bad.size:
            k = int(bad[0])
            raise ValueError(f"{path}: line {k + 1} starts with the count {heads[k]} but lists {lens[k] - 1} "
                             "item(s); count-prefixed user lines are 'count item item ...'")
        users = np.arange(len(toks), dtype=np.int64)
    else:
        users = heads
    mask = np.ones(values.size, dtype=bool)
    mask[starts] = False
    return np.repeat(users, lens - 1), values[mask]


def load_user_lines(train, test=None) -> pd.DataFrame:
    """A user-line split as NGCF, LightGCN and KGAT publish it (Wang et al. 2019): ``train.txt``
    and, when given, ``test.txt``, one line per user ``user item item ...`` (whitespace-separated
    integers). Returns the common frame (module docstring) of both files' rows; with a test file,
    ``attrs["held_out"]`` marks its rows, so the split can be kept (:func:`given_split`). Non-integer
    tokens are refused naming the file, line and field."""
    tr = _as_path(train, "train")
    files, users, items, held = [], [], [], []
    for p, is_test in ((tr, False), (None if test is None else _as_path(test, "test"), True)):
        if p is None:
            continue
        raw, entry = _read(p)
        u, i = _parse_user_lines(p, _decode(raw), count_prefixed=False)
        files.append(entry)
        users.append(u)
        items.append(i)
        held.append(np.full(u.size, is_test))
    if sum(u.size for u in users) == 0:
        raise ValueError(f"{tr}: no interactions (every line holds a user without items)")
    return _frame(np.concatenate(users), np.concatenate(items), None, None, "user-lines", files,
                  np.concatenate(held) if test is not None else None)


def load_count_lines(path) -> pd.DataFrame:
    """Count-prefixed user lines, as CiteULike's ``users.dat`` (Wang & Blei 2011): line ``u``
    (0-based) is user ``u``, written ``count item item ...``. A count that disagrees with the items
    listed is refused naming the file and line. Returns the common frame (module docstring)."""
    p = _as_path(path)
    raw, entry = _read(p)
    u, i = _parse_user_lines(p, _decode(raw), count_prefixed=True)
    if u.size == 0:
        raise ValueError(f"{p}: no interactions (every line has the count 0)")
    return _frame(u, i, None, None, "count-lines", [entry])


# ---------------------------------------------------------------------------------------------
# tables and RecBole atomic files
# ---------------------------------------------------------------------------------------------
def _pick(columns: list[str], given, names: tuple, role: str, path: Path, arg: str, required: bool = True):
    if given is not None:
        if given in columns:
            return given
        low = [c for c in columns if c.split(":")[0] == given]
        if len(low) == 1:
            return low[0]
        raise ValueError(f"{arg} {given!r} is not a column of {path}; its columns are {columns}")
    base = {c: c.split(":")[0].strip().lower() for c in columns}
    for name in names:
        hits = [c for c in columns if base[c] == name]
        if hits:
            return hits[0]
    if required:
        raise ValueError(f"{path} has no {role} column (looked for {list(names)}); its columns are {columns}: "
                         f"name the column with {arg} (-p {arg} NAME, or --{arg.replace('_', '-')} NAME)")
    return None


def _sniff_sep(first: str) -> str | None:
    counts = {s: first.count(s) for s in ("\t", ",", ";", "|")}
    sep, n = max(counts.items(), key=lambda kv: kv[1])
    return sep if n else None


def _is_number(tok: str) -> bool:
    try:
        float(tok)
    except ValueError:
        return False
    return True


def _table_from_frame(df: pd.DataFrame, path: Path, fmt: str, entry: dict, user_column, item_column,
                      header_line: bool) -> pd.DataFrame:
    cols = [str(c) for c in df.columns]
    df.columns = cols
    if len(df) == 0:
        raise ValueError(f"{path}: no data rows")
    ucol = _pick(cols, user_column, USER_NAMES, "user", path, "user_column")
    icol = _pick(cols, item_column, ITEM_NAMES, "item", path, "item_column")
    if ucol == icol:
        raise ValueError(f"user_column and item_column must name different columns of {path}, both are {ucol!r}")
    rcol = _pick(cols, None, RATING_NAMES, "rating", path, "", required=False)
    tcol = _pick(cols, None, TIME_NAMES, "timestamp", path, "", required=False)
    lines = np.arange(len(df)) + (2 if header_line else 1) if header_line is not None else None
    user = _ids(df[ucol], path, ucol, lines)
    item = _ids(df[icol], path, icol, lines)
    rating = _numbers(df[rcol], path, rcol, lines) if rcol not in (None, ucol, icol) else None
    ts = _times(df[tcol], path, tcol, lines) if tcol not in (None, ucol, icol) else None
    out = _frame(user, item, rating, ts, fmt, [entry])
    out.attrs["source"]["columns"] = {"user": ucol, "item": icol, "rating": rcol, "timestamp": tcol}
    return out


def load_table(path, user_column=None, item_column=None) -> pd.DataFrame:
    """Any interactions table: CSV, TSV or other delimited text (the delimiter is the most frequent
    of tab, comma, semicolon and bar in the first line, else whitespace), or Parquet. With a header,
    the user and item columns are ``user_column`` / ``item_column`` when given, else the first of
    :data:`USER_NAMES` / :data:`ITEM_NAMES` present (case-insensitive; RecBole's ``:type`` suffixes
    ignored), and a rating and a timestamp column are used when one of :data:`RATING_NAMES` /
    :data:`TIME_NAMES` is present. Without a header (every field of the first line a number), rows
    are ``user item [rating [timestamp]]``. Ids may be integers or tokens (strings). Returns the
    common frame (module docstring); empty ids, non-numeric ratings and unreadable times are refused
    naming the file, line and column."""
    p = _as_path(path)
    user_column = _check_column_name(user_column, "user_column")
    item_column = _check_column_name(item_column, "item_column")
    raw, entry = _read(p)
    if raw[:4] == b"PAR1" or p.suffix.lower() in (".parquet", ".pq"):
        try:
            df = pd.read_parquet(io.BytesIO(raw))
        except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for a damaged file
            raise ValueError(f"{p}: not a readable Parquet file ({type(exc).__name__}: {exc})") from None
        return _table_from_frame(df, p, "table", entry, user_column, item_column, None)
    text = _decode(raw)
    lines = text.splitlines()
    first = next((ln for ln in lines if ln.strip()), None)
    if first is None:
        raise ValueError(f"{p}: empty file")
    sep = _sniff_sep(first)
    fields = first.split(sep) if sep else first.split()
    header = not all(_is_number(f.strip()) for f in fields)
    kw = dict(sep=sep, engine="c") if sep else dict(sep=r"\s+", engine="python")
    try:
        df = pd.read_csv(io.StringIO(text), header=0 if header else None, dtype=str, keep_default_na=False,
                         skip_blank_lines=True, on_bad_lines="error", **kw)
    except (pd.errors.ParserError, ValueError) as exc:
        raise ValueError(f"{p}: rows of unequal length or bad quoting ({exc})") from None
    if header:
        df.columns = [str(c).strip() for c in df.columns]
    else:
        if user_column is not None or item_column is not None:
            raise ValueError(f"{p} has no header line, so user_column / item_column cannot name its columns; "
                             "its rows are read as 'user item [rating [timestamp]]'")
        if not 2 <= df.shape[1] <= 4:
            raise ValueError(f"{p}: headerless rows must be 'user item [rating [timestamp]]' (2 to 4 fields), "
                             f"got {df.shape[1]} fields; add a header naming the columns")
        df.columns = ["user", "item", "rating", "timestamp"][:df.shape[1]]
    return _table_from_frame(df, p, "table", entry, user_column, item_column, header)


def load_recbole(path, user_column=None, item_column=None) -> pd.DataFrame:
    """A RecBole atomic interaction file (``*.inter``; Zhao et al. 2021): tab-separated, with a
    header of typed fields ``name:type`` (``token``, ``token_seq``, ``float``, ``float_seq``). The
    user, item, rating and timestamp fields are found by RecBole's default names (``user_id``,
    ``item_id``, ``rating``, ``timestamp``), or ``user_column`` / ``item_column`` (with or without
    the ``:type``). Returns the common frame (module docstring)."""
    p = _as_path(path)
    user_column = _check_column_name(user_column, "user_column")
    item_column = _check_column_name(item_column, "item_column")
    raw, entry = _read(p)
    text = _decode(raw)
    first = text.split("\n", 1)[0].rstrip("\r")
    fields = first.split("\t")
    for j, f in enumerate(fields):
        name, _, kind = f.partition(":")
        if not name or kind not in _RECBOLE_TYPES:
            raise ValueError(f"{p}: line 1, field {j + 1} is {f!r}; a RecBole header field is 'name:type' with "
                             f"type one of {list(_RECBOLE_TYPES)}, separated by tabs")
    try:
        df = pd.read_csv(io.StringIO(text), sep="\t", header=0, dtype=str, keep_default_na=False,
                         skip_blank_lines=True, engine="c", on_bad_lines="error", quoting=3)
    except (pd.errors.ParserError, ValueError) as exc:
        raise ValueError(f"{p}: rows of unequal length ({exc})") from None
    return _table_from_frame(df, p, "recbole", entry, user_column, item_column, True)


# ---------------------------------------------------------------------------------------------
# splits given as tables
# ---------------------------------------------------------------------------------------------
#: The names of a split's parts: ``[PREFIX.]ROLE.SUFFIX`` with ROLE one of these (case-insensitive).
SPLIT_ROLES = {"train": ("train", "training"), "valid": ("valid", "validation", "val", "dev"),
               "test": ("test", "testing")}
#: What :func:`load_split` does with the validation rows: join the training rows, or leave them out.
VALIDATION = ("train", "drop")


def _split_parts(folder: Path) -> dict | None:
    """``{"train": path, ["valid": path,] "test": path}`` of the one split a folder holds as tables, ``None``
    when it holds none; several candidate splits (another prefix or suffix) are refused naming them."""
    role_of = {name: role for role, names in SPLIT_ROLES.items() for name in names}
    groups: dict = {}
    for f in sorted(folder.iterdir()):
        if not f.is_file() or f.name.startswith(".") or f.suffix.lower() not in _TABLE_SUFFIXES:
            continue
        parts = f.name.split(".")
        role = role_of.get(parts[-2].lower()) if len(parts) >= 2 else None
        if role is None:
            continue
        key = (".".join(parts[:-2]), f.suffix.lower())
        got = groups.setdefault(key, {})
        if role in got:
            raise ValueError(f"dataset folder {folder} holds two {role} tables {[got[role].name, f.name]}; keep one")
        got[role] = f
    splits = {k: v for k, v in groups.items() if "train" in v and "test" in v}
    if len(splits) > 1:
        names = [sorted(x.name for x in v.values()) for v in splits.values()]
        raise ValueError(f"dataset folder {folder} holds several splits {names}; pass the folder of one")
    if not splits:
        return None
    (key, parts), = splits.items()
    whole = folder / f"{key[0]}{key[1]}" if key[0] else None
    if whole is not None and whole.is_file():
        raise ValueError(f"dataset folder {folder} holds both the whole file {whole.name} and the split "
                         f"{sorted(x.name for x in parts.values())}; pass the file, or move it to read the split")
    return {r: parts[r] for r in ("train", "valid", "test") if r in parts}


def load_split(train, test, valid=None, *, validation: str = "train", user_column=None,
               item_column=None) -> pd.DataFrame:
    """A split given as tables (each read by :func:`load_table`, or :func:`load_recbole` for ``.inter``):
    the training, test and optional validation files. Returns the common frame (module docstring) of all
    rows with the ids of the three files in one index, ``attrs["held_out"]`` marking the test rows (the
    split kept: :func:`given_split`), and ``attrs["split"]``, the rows of each part and what was done with
    the validation rows: ``validation="train"`` (default) adds them to the training rows (a model
    evaluated on the test rows is fitted on both, as the published protocols that tune on validation and
    then refit do), ``"drop"`` leaves them out."""
    if validation not in VALIDATION:
        raise ValueError(f"validation must be one of {VALIDATION} (the validation rows join training, or are left "
                         f"out), got {validation!r}")
    paths = {"train": _as_path(train, "train"), "test": _as_path(test, "test")}
    if valid is not None:
        paths["valid"] = _as_path(valid, "valid")
    users, items, ratings, times, held, files, counts = [], [], [], [], [], [], {}
    fmt = "recbole" if all(p.suffix.lower() == ".inter" for p in paths.values()) else "table"
    for role in ("train", "valid", "test"):
        if role not in paths:
            continue
        p = paths[role]
        part = (load_recbole if p.suffix.lower() == ".inter" else load_table)(p, user_column, item_column)
        counts[role] = len(part)
        files.append({**part.attrs["source"]["files"][0], "role": role})
        if role == "valid" and validation == "drop":
            continue
        users.append(part.attrs["user_ids"][part["user"].to_numpy()])
        items.append(part.attrs["item_ids"][part["item"].to_numpy()])
        ratings.append(part["rating"].to_numpy())
        times.append(part["timestamp"].to_numpy())
        held.append(np.full(len(part), role == "test"))
    kinds = {u.dtype.kind for u in users} | {i.dtype.kind for i in items}
    if len(kinds) > 1:  # integer ids in one file, text in another: compared as text
        users = [u.astype(str) for u in users]
        items = [i.astype(str) for i in items]
    out = _frame(np.concatenate(users), np.concatenate(items), np.concatenate(ratings), np.concatenate(times),
                 f"{fmt}-split", files, np.concatenate(held))
    out.attrs["split"] = {**{f"{r}_rows": n for r, n in counts.items()},
                          "validation": ("none" if "valid" not in counts else
                                         "joined training" if validation == "train" else "dropped")}
    return out


# ---------------------------------------------------------------------------------------------
# recognition and dispatch
# ---------------------------------------------------------------------------------------------
def _head(path: Path, n: int = 64 * 1024) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(n)


def _sniff_file(path: Path) -> str | None:
    """The format of one file from its name and first lines, or ``None``."""
    name = path.name
    if name in _ML_FILES:
        return "movielens"
    if name.endswith(".train.rating"):
        return "ncf"
    if name.endswith(".inter"):
        return "recbole"
    head = _head(path)
    if head[:4] == b"PAR1" or path.suffix.lower() in (".parquet", ".pq"):
        return "table"
    if b"\0" in head:
        return None
    text = _decode(head)
    lines = text.splitlines()
    if len(head) == 64 * 1024 and len(lines) > 1:
        lines = lines[:-1]  # the last line of the sample may be cut
    lines = [ln for ln in lines if ln.strip()]
    if not lines:
        return None
    first = lines[0]
    if re.fullmatch(r"[^\t:]+:(token|token_seq|float|float_seq)(\t[^\t:]+:(token|token_seq|float|float_seq))*",
                    first.strip("\r")):
        return "recbole"
    if name in ("train.txt", "test.txt"):
        return "user-lines"
    sep = _sniff_sep(first)
    if sep is not None and sep != "\t" or not all(_is_number(t) for t in first.split()):
        return "table"
    rows = [ln.split() for ln in lines[:2000]]
    if not all(all(_is_number(t) for t in r) for r in rows):
        return None
    widths = {len(r) for r in rows}
    counted = all(int(float(r[0])) == len(r) - 1 for r in rows)
    if counted and (len(widths) > 1 or name == "users.dat"):
        return "count-lines"
    firsts = [r[0] for r in rows]
    if len(widths) == 1 and 2 <= widths.pop() <= 4 and (len(set(firsts)) < len(firsts) or len(rows) < 20):
        return "table"  # rows 'user item [rating [timestamp]]': a user on several rows
    return "user-lines"  # one line per user (each user once), 'user item item ...'



def detect_format(path) -> tuple[str, list[Path]]:
    """``(format, files)`` of a folder or file, recognised by content: ``"movielens"``,
    ``"ncf"``, ``"user-lines"``, ``"count-lines"``, ``"recbole"``, ``"table"`` or ``"split"`` (train,
    [valid,] test tables), and the files the loader reads. A folder is searched for, in this order, an NCF
    split, ``train.txt``, a split given as tables (:func:`load_split`), a
    MovieLens ratings file (recursively), one ``*.inter`` file, ``users.dat``, and a single table
    file; a path no loader reads raises a ``ValueError`` listing the formats (:data:`FORMATS`)."""
    p = _as_path(path).expanduser()
    if not p.exists():
        raise ValueError(f"path {p} does not exist; " + formats_message(p).split("; ", 1)[1])
    if p.is_dir():
        ncf = sorted(f.name[:-len(".train.rating")] for f in p.glob("*.train.rating"))
        if len(ncf) > 1:
            raise ValueError(f"dataset folder {p} holds several NCF splits {ncf}; pass the folder of one")
        if ncf:
            return "ncf", [p / f"{ncf[0]}.{k}" for k in ("train.rating", "test.rating", "test.negative")]
        if (p / "train.txt").is_file():
            return "user-lines", [p / "train.txt"] + ([p / "test.txt"] if (p / "test.txt").is_file() else [])
        split = _split_parts(p)
        if split is not None:
            return "split", list(split.values())
        for name in _ML_FILES:
            hits = sorted(p.rglob(name))
            if hits:
                return "movielens", [hits[0]]
        inter = sorted(p.glob("*.inter"))
        if len(inter) > 1:
            raise ValueError(f"dataset folder {p} holds several RecBole files {[f.name for f in inter]}; "
                             "pass the file to read")
        if inter:
            return "recbole", inter
        if (p / "users.dat").is_file() and _sniff_file(p / "users.dat") == "count-lines":
            return "count-lines", [p / "users.dat"]
        cands = sorted(f for f in p.iterdir() if f.is_file() and f.suffix.lower() in _TABLE_SUFFIXES
                       and not f.name.startswith("."))
        known = [f for f in cands if _sniff_file(f) is not None]
        if len(known) == 1:
            return _sniff_file(known[0]), known
        if len(known) > 1:
            raise ValueError(f"dataset folder {p} holds several data files {[f.name for f in known]} and none of "
                             "the known layouts; pass the file to read")
        raise ValueError(formats_message(p))
    if not p.is_file():
        raise ValueError(f"{p} is not a regular file or folder; " + formats_message(p).split("; ", 1)[1])
    kind = _sniff_file(p)
    if kind is None:
        raise ValueError(formats_message(p))
    if kind == "ncf":
        prefix = p.name[:-len(".train.rating")]
        return kind, [p.parent / f"{prefix}.{k}" for k in ("train.rating", "test.rating", "test.negative")]
    if kind == "user-lines" and p.name == "train.txt" and (p.parent / "test.txt").is_file():
        return kind, [p, p.parent / "test.txt"]
    return kind, [p]


def load_interactions(path, user_column=None, item_column=None, validation: str = "train") -> pd.DataFrame:
    """Load interactions from a folder or file in any format of :data:`FORMATS`, recognised by its
    content (:func:`detect_format`). ``user_column`` / ``item_column`` name the columns of a table
    or RecBole file (default: the usual names, see :func:`load_table`). Returns the common frame
    (module docstring), with ``attrs["source"]`` (format and each file's path, bytes and SHA-256)
    and, for a train/test split, ``attrs["held_out"]``. A path no loader reads is refused with one
    message listing the formats known. A split given as tables (:func:`load_split`) keeps its split;
    ``validation`` says what becomes of its validation rows (``"train"``: they join training, the default;
    ``"drop"``)."""
    user_column = _check_column_name(user_column, "user_column")
    item_column = _check_column_name(item_column, "item_column")
    if validation not in VALIDATION:
        raise ValueError(f"validation must be one of {VALIDATION} (the validation rows join training, or are left "
                         f"out), got {validation!r}")
    kind, files = detect_format(path)
    if kind == "split":
        roles = _split_parts(Path(path).expanduser())
        return load_split(roles["train"], roles["test"], roles.get("valid"), validation=validation,
                          user_column=user_column, item_column=item_column)
    if kind == "table":
        return load_table(files[0], user_column, item_column)
    if kind == "recbole":
        return load_recbole(files[0], user_column, item_column)
    _no_columns({"movielens": "a MovieLens ratings file", "ncf": "an NCF split", "user-lines": "a user-line split",
                 "count-lines": "a count-prefixed user-line file"}[kind], user_column, item_column)
    if kind == "user-lines":
        return load_user_lines(files[0], files[1] if len(files) > 1 else None)
    if kind == "count-lines":
        return load_count_lines(files[0])
    if kind == "movielens":
        df = load_movielens(files[0])
    else:  # ncf: ids as published (already 0-based); the decoys file names the catalogue
        train, test, _ = load_ncf(files[0].parent, files[0].name[:-len(".train.rating")])
        df = pd.concat([train.assign(_h=False), test.assign(_h=True)], ignore_index=True)
        df = df.sort_values(["user", "timestamp"], kind="stable").reset_index(drop=True)
        held = df.pop("_h").to_numpy(bool)
        df.attrs.update({"n_users": train.attrs["n_users"], "n_items": train.attrs["n_items"], "held_out": held})
    df.attrs["source"] = {"format": kind, "files": [_file_entry(f) for f in files]}
    return df


def given_split(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """``(train, test)`` of a frame loaded from a train/test split (``attrs["held_out"]``), or
    ``None`` when the data came without one. Both parts keep the frame's attributes (ids, sizes)."""
    held = df.attrs.get("held_out")
    if held is None:
        return None
    held = np.asarray(held, dtype=bool)
    if held.shape != (len(df),):
        raise ValueError(f"df.attrs['held_out'] must have one flag per row ({len(df)}), got shape {held.shape}")
    attrs = {k: v for k, v in df.attrs.items() if k != "held_out"}
    train = df[~held].reset_index(drop=True)
    test = df[held].reset_index(drop=True)
    for part in (train, test):
        part.attrs.clear()
        part.attrs.update(attrs)
    return train, test
