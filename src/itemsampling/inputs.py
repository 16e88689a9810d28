r"""Reading and validating users' files: the one place where a file given on the command line
becomes validated arrays.

* :func:`read_rank_file` — a table of sampled ranks (CSV, TSV or Parquet; one row per (model, user),
  columns in :data:`COLUMN_ALIASES`) as a :class:`RankTable`;
* :func:`read_weighted_file` — a long file of popularity-weighted decoys (chapter 11), one row per
  decoy (columns in :data:`WEIGHTED_COLUMNS`);
* :class:`InputError` — a bad file or a bad option (a ``ValueError``): the message names the file,
  the line (CSV/TSV) or row (Parquet) and the column, or the option;
* :func:`k_value` — the parser of a cut-off on the command line (a positive integer, or
  ``none`` / ``all`` / ``full`` for the untruncated metric).

Used by the commands (:mod:`itemsampling.cli`: ``estimate`` and ``estimate --weighted``;
:mod:`itemsampling.plan`: ``plan --pilot``); none of the library's algorithms imports it (the
contract in ``pyproject.toml``). The names are also importable from :mod:`itemsampling.cli`.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ._validation import check_int

__all__ = ["COLUMN_ALIASES", "FORMATS", "WEIGHTED_COLUMNS", "WEIGHTED_OPTIONAL", "InputError", "RankTable",
           "WeightedModel", "WeightedTable", "MAX_ITEMS", "read_rank_file", "read_weighted_file", "read_weighted_table",
           "k_value", "seed_value"]

#: Accepted header names for each role, first = canonical. ``item`` (the held-out item's id, the column
#: :func:`itemsampling.evaluation.sampled_ranks` writes) is recognised and not used by the estimates;
#: ``replacement`` (true/false, one value per model: how the decoys were drawn, the column
#: ``sampled_ranks`` writes for given decoys drawn without replacement) sets :attr:`RankTable.replacement`.
COLUMN_ALIASES = {
    "rank": ("rank", "sampled_rank", "r"),
    "sample_size": ("sample_size", "n"),
    "n_items": ("n_items", "pool_size"),
    "model": ("model",),
    "user": ("user", "user_id"),
    "item": ("item", "item_id"),
    "replacement": ("replacement",),
    "test_users": ("test_users",),
}

FORMATS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".parquet": "parquet", ".pq": "parquet"}


class InputError(ValueError):
    """A bad file or a bad option: the message names the file, line/row and column, or the option."""


@dataclass
class RankTable:
    """The validated content of a rank file.

    ``ranks[model]`` is an int64 array of sampled ranks; ``sizes[model]`` an int (one sample size
    for everybody) or an int64 array of per-user sizes; ``pools[model]`` likewise the catalogue
    size (``n_items`` is then the largest); ``users[model]`` the user ids (strings) or
    ``None`` when the file has no user column; ``replacement[model]`` ``True`` / ``False`` from a
    ``replacement`` column (how the decoys were drawn: ``False`` asks for the without-replacement kernel),
    ``None`` without one; ``test_users[model]`` the number of test users the rows' users were sampled
    from (a ``test_users`` column, the one ``sampled_ranks(..., n_users=...)`` writes), ``None`` without one.
    Models keep their order of first appearance.
    """

    path: str
    n_items: int
    ranks: dict = field(default_factory=dict)
    sizes: dict = field(default_factory=dict)
    users: dict = field(default_factory=dict)
    pools: dict = field(default_factory=dict)
    replacement: dict = field(default_factory=dict)
    test_users: dict = field(default_factory=dict)

    @property
    def per_user_pools(self) -> bool:
        return any(not isinstance(s, int) for s in self.pools.values())

    @property
    def models(self) -> list:
        return list(self.ranks)

    @property
    def per_user_sizes(self) -> bool:
        return any(not isinstance(s, int) for s in self.sizes.values())


# --------------------------------------------------------------------------------------------
# reading and validating
# --------------------------------------------------------------------------------------------

def _where(path, fmt, i) -> str:
    """Position of data row ``i`` (0-based) as a reader finds it: the file line for CSV/TSV (the
    header is line 1), the 1-based data row for Parquet."""
    return f"{path}, line {i + 2}" if fmt != "parquet" else f"{path}, row {i + 1}"


def _read_frame(path: Path, fmt: str):
    import pandas as pd

    if fmt == "parquet":
        try:
            return pd.read_parquet(path)
        except Exception as exc:  # pyarrow raises many types for a file that is not Parquet
            raise InputError(f"{path}: cannot be read as Parquet ({type(exc).__name__}: {exc})") from None
    try:
        empty = path.stat().st_size == 0
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if empty:
        raise InputError(f"{path}: the file is empty (expected a header row such as 'rank' and one row per user)")
    try:
        return pd.read_csv(path, sep="," if fmt == "csv" else "\t", dtype=str, keep_default_na=False,
                           skip_blank_lines=False, encoding="utf-8")
    except pd.errors.ParserError as exc:
        msg = str(exc).strip()
        import re

        m = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", msg)
        if m:
            raise InputError(f"{path}, line {m.group(2)}: {m.group(3)} fields where the header has "
                             f"{m.group(1)}") from None
        raise InputError(f"{path}: cannot be parsed as {fmt.upper()} ({msg})") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not a UTF-8 text file ({exc.reason} at byte {exc.start}); "
                         "is it a Parquet file with another extension? (use --format parquet)") from None
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: the file is empty (expected a header row such as 'rank')") from None


def _resolve_columns(path, columns, overrides: dict) -> dict:
    """Map each role (rank, sample_size, model, user) to a header name; refuse unknown columns."""
    cols = [str(c) for c in columns]
    dupes = sorted({c for c in cols if cols.count(c) > 1})
    if dupes:
        raise InputError(f"{path}: column(s) {dupes} appear more than once in the header")
    roles: dict = {}
    for role, aliases in COLUMN_ALIASES.items():
        given = overrides.get(role)
        if given is not None:
            if given not in cols:
                raise InputError(f"{path}: no column {given!r} (named by --{role.replace('_', '-')}-column); "
                                 f"the header has {cols}")
            roles[role] = given
            continue
        found = [a for a in aliases if a in cols]
        if len(found) > 1:
            raise InputError(f"{path}: columns {found} all look like the {role} column; keep one or name it "
                             f"with --{role.replace('_', '-')}-column")
        if found:
            roles[role] = found[0]
    seen: dict = {}
    for role, col in roles.items():
        if col in seen:
            named = [f"--{r.replace('_', '-')}-column" for r in (seen[col], role) if overrides.get(r) is not None]
            raise InputError(f"{path}: column {col!r} cannot be both the {seen[col].replace('_', ' ')} column and the "
                             f"{role.replace('_', ' ')} column" + (f" (named by {' and '.join(named)})" if named else "")
                             + "; name a different column for each")
        seen[col] = role
    if "rank" not in roles:
        numeric_header = all(_is_number(c) for c in cols)
        hint = (" (the first line holds numbers: the file needs a header row)" if numeric_header else
                " (or name it with --rank-column)")
        raise InputError(f"{path}: missing column 'rank' (the sampled rank, 1..n); the header has {cols}{hint}")
    used = set(roles.values())
    unknown = [c for c in cols if c not in used]
    if unknown:
        known = ", ".join(a for aliases in COLUMN_ALIASES.values() for a in aliases)
        raise InputError(f"{path}: unknown column(s) {unknown}; recognised columns are {known} "
                         "(drop the others, or name yours with --rank-column / --size-column / "
                         "--model-column / --user-column)")
    return roles


def _is_number(text) -> bool:
    try:
        float(text)
        return True
    except (TypeError, ValueError):
        return False


def _integers(values, path, fmt, column, low, high, what, high_per_row=None, per_row="this row's sample size"):
    """Parse a column of integers in ``low..high`` (or ``low..high_per_row[i]``); refuse missing,
    NaN, non-numeric, non-integer and out-of-range values, naming the first offending row."""
    import pandas as pd

    s = pd.Series(values)
    numeric = pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype)
    if pd.api.types.is_bool_dtype(s.dtype):
        raise InputError(f"{path}, column {column!r}: holds true/false values, not integers (expected a {what})")
    raw = None if numeric else s.astype(object).where(s.notna(), "").astype(str)
    num = pd.to_numeric(s, errors="coerce").to_numpy(dtype=np.float64)
    missing = s.isna().to_numpy() | ((raw.str.strip() == "").to_numpy() if raw is not None else False)
    bad_text = np.isnan(num) & ~missing
    nan_text = bad_text & (raw.str.strip().str.lower().isin(["nan", "na", "n/a", "null", "none"]).to_numpy()
                           if raw is not None else False)

    def fail(i, msg):
        n_bad = int(np.count_nonzero(bad))
        more = f" (and {n_bad - 1} more bad value{'s' if n_bad > 2 else ''} in this column)" if n_bad > 1 else ""
        raise InputError(f"{_where(path, fmt, i)}, column {column!r}: {msg}{more}")

    bad = missing | bad_text
    if bad.any():
        i = int(np.argmax(bad))
        if missing[i]:
            fail(i, f"missing value (every row needs a {what})")
        if nan_text[i]:
            fail(i, f"{raw.iloc[i].strip()!r} is not a {what} (NaN is not allowed)")
        fail(i, f"{raw.iloc[i] if raw is not None else values[i]!r} is not a number (expected an integer {what})")
    bad = ~np.isfinite(num)
    if bad.any():
        i = int(np.argmax(bad))
        fail(i, f"{num[i]} is not a {what} (NaN or infinite values are not allowed)")
    bad = num != np.floor(num)
    if bad.any():
        i = int(np.argmax(bad))
        fail(i, f"{num[i]:g} is not an integer {what}")
    hi = high if high_per_row is None else np.asarray(high_per_row)
    bad = (num < low) | (num > hi)
    if bad.any():
        i = int(np.argmax(bad))
        top = hi if np.ndim(hi) == 0 else hi[i]
        extra = "" if high_per_row is None else f" ({per_row})"
        span = f"lie in {low}..{top}" if top < MAX_ITEMS else f"lie in {low}..2^62"
        fail(i, f"{num[i]:.0f} is out of range: a {what} must {span}{extra}")
    return num.astype(np.int64)


def read_rank_file(path, n_items: int | None, sample_size: int | None = None, fmt: str | None = None,
                   rank_column: str | None = None, size_column: str | None = None,
                   model_column: str | None = None, user_column: str | None = None,
                   n_items_column: str | None = None) -> RankTable:
    """Read and validate a file of sampled ranks (CSV, TSV or Parquet; see the module docstring).

    ``sample_size`` is the sampled-set size :math:`n` (target included) shared by every user; it
    must be ``None`` exactly when the file has a per-user sample-size column; ``n_items`` likewise
    the catalogue size, ``None`` exactly when the file has a per-user ``n_items`` column. Raises
    :class:`InputError` (a ``ValueError``) naming the file, the line or row, and the column of the
    first bad value: missing or unknown columns, an empty file, missing values, NaN, non-integer
    or out-of-range ranks and sizes, empty model names, a user listed twice for one model.
    """
    p = Path(path)
    try:
        N = None if n_items is None else check_int(n_items, "n_items", low=2, high=MAX_ITEMS)
    except ValueError as exc:
        raise InputError(f"--n-items: {exc}") from None
    if not p.exists():
        raise InputError(f"{p}: no such file")
    if p.is_dir():
        raise InputError(f"{p}: is a folder, not a file of sampled ranks")
    if not p.is_file():  # a FIFO with no writer would block the read forever; a device or socket is no file
        raise InputError(f"{p}: not a regular file (a named pipe, device or socket cannot be read as a file of "
                         "sampled ranks); write the ranks to a file first")
    if fmt is None:
        fmt = FORMATS.get(p.suffix.lower())
        if fmt is None:
            raise InputError(f"{p}: cannot tell the format from the extension {p.suffix!r}; use a .csv, .tsv "
                             "or .parquet name, or --format csv|tsv|parquet")
    elif fmt not in ("csv", "tsv", "parquet"):
        raise InputError(f"--format must be csv, tsv or parquet, got {fmt!r}")
    df = _read_frame(p, fmt)
    roles = _resolve_columns(p, df.columns, {"rank": rank_column, "sample_size": size_column,
                                            "model": model_column, "user": user_column, "n_items": n_items_column})
    if len(df) == 0:
        raise InputError(f"{p}: no data rows below the header (expected one row per user)")
    if N is not None and "n_items" in roles:
        raise InputError(f"{p}: the file has a per-user catalogue-size column {roles['n_items']!r} and --n-items "
                         "was given too; give one of them")
    if N is None and "n_items" not in roles:
        raise InputError(f"--n-items is required: {p} has no per-user 'n_items' column")
    pools = None
    if N is None:  # per-user catalogue sizes: each >= 2 and >= the user's sample size (checked below)
        low = 2 if sample_size is None else max(2, sample_size) if isinstance(sample_size, int) else 2
        pools = _integers(df[roles["n_items"]], p, fmt, roles["n_items"], low, MAX_ITEMS,
                          "catalogue size" + (" (n_items >= --sample-size)" if low > 2 else ""))
        N = int(pools.max())
    if sample_size is not None and "sample_size" in roles:
        raise InputError(f"{p}: the file has a per-user sample-size column {roles['sample_size']!r} and "
                         "--sample-size was given too; give one of them")
    if sample_size is None and "sample_size" not in roles:
        raise InputError(f"--sample-size is required: {p} has no per-user 'sample_size' column")
    if sample_size is not None:
        try:
            n = check_int(sample_size, "sample_size", low=2, high=N)
        except ValueError:
            raise InputError(f"--sample-size must be an integer in 2..{N} (--n-items), got {sample_size!r}") from None
        sizes = None
        ranks = _integers(df[roles["rank"]], p, fmt, roles["rank"], 1, n, "sampled rank")
    else:
        what = f"sample size (2..N = {N}, --n-items)" if pools is None else "sample size (2..n_items of the row)"
        sizes = _integers(df[roles["sample_size"]], p, fmt, roles["sample_size"], 2, N if pools is None else None,
                          what, high_per_row=pools, per_row="this row's n_items")
        ranks = _integers(df[roles["rank"]], p, fmt, roles["rank"], 1, None, "sampled rank", high_per_row=sizes)

    def labels(role):
        col = df[roles[role]]
        missing = col.isna().to_numpy() | (col.astype(str).str.strip() == "").to_numpy()
        if missing.any():
            i = int(np.argmax(missing))
            raise InputError(f"{_where(p, fmt, i)}, column {roles[role]!r}: missing {role} name")
        return col.astype(str).str.strip().to_numpy()

    models = labels("model") if "model" in roles else np.full(len(df), "model", dtype=object)
    users = labels("user") if "user" in roles else None
    if users is not None:
        import pandas as pd

        dup = pd.DataFrame({"m": models, "u": users}).duplicated(keep=False).to_numpy()
        if dup.any():
            i = int(np.argmax(dup))
            j = int(np.flatnonzero(dup & (models == models[i]) & (users == users[i]))[1])
            who = f"user {users[i]!r}" + (f" of model {models[i]!r}" if "model" in roles else "")
            raise InputError(f"{_where(p, fmt, j)}, column {roles['user']!r}: {who} already appears on "
                             f"{_where(p, fmt, i).split(', ', 1)[1]} (one row per user and model)")
    drawn_with = None
    if "replacement" in roles:
        col = roles["replacement"]
        txt = df[col].astype(str).str.strip().str.lower()
        truthy = txt.isin(["1", "true", "1.0"]).to_numpy()
        falsy = txt.isin(["0", "false", "0.0"]).to_numpy()
        bad = ~(truthy | falsy)
        if bad.any():
            i = int(np.argmax(bad))
            raise InputError(f"{_where(p, fmt, i)}, column {col!r}: {df[col].iloc[i]!r} is not true/false (were the "
                             "decoys drawn with replacement?)")
        drawn_with = truthy
    test_users = None
    if "test_users" in roles:
        test_users = _integers(df[roles["test_users"]], p, fmt, roles["test_users"], 1, MAX_ITEMS,
                               "number of test users")
    table = RankTable(path=str(p), n_items=N)
    for m in dict.fromkeys(models):
        sel = models == m
        table.ranks[m] = ranks[sel]
        if sizes is None:
            table.sizes[m] = n
        else:
            s = sizes[sel]
            table.sizes[m] = int(s[0]) if np.all(s == s[0]) else s
        table.pools[m] = N if pools is None else (int(pools[sel][0]) if np.all(pools[sel] == pools[sel][0])
                                                  else pools[sel])
        table.users[m] = users[sel] if users is not None else None
        table.replacement[m] = None
        table.test_users[m] = None
        if test_users is not None:
            t = test_users[sel]
            i = int(np.flatnonzero(sel)[0])
            if not np.all(t == t[0]):
                i = int(np.flatnonzero(sel)[np.argmax(t != t[0])])
                raise InputError(f"{_where(p, fmt, i)}, column {roles['test_users']!r}: "
                                 + (f"model {m!r} " if "model" in roles else "")
                                 + f"gives {int(t[np.argmax(t != t[0])])} test users where an earlier row gives "
                                   f"{int(t[0])} (one number per model)")
            who = np.unique(users[sel]).size if users is not None else int(sel.sum())
            if t[0] < who:
                raise InputError(f"{_where(p, fmt, i)}, column {roles['test_users']!r}: "
                                 + (f"model {m!r} " if "model" in roles else "")
                                 + f"has {who} users, more than the {int(t[0])} test users it says they were sampled "
                                   "from")
            table.test_users[m] = int(t[0])
        if drawn_with is not None:
            w = drawn_with[sel]
            if not (w.all() or not w.any()):
                i = int(np.flatnonzero(sel)[np.argmax(w != w[0])])
                raise InputError(f"{_where(p, fmt, i)}, column {roles['replacement']!r}: "
                                 + (f"model {m!r} " if "model" in roles else "")
                                 + "mixes rows drawn with and without replacement (one law per model)")
            table.replacement[m] = bool(w[0])
            if not w[0] and not isinstance(table.pools[m], int):
                raise InputError(f"{p}: " + (f"model {m!r}: " if "model" in roles else "") + "decoys drawn without "
                                 "replacement (column 'replacement' false) from per-user pools (n_items differs between "
                                 "rows): their kernel, the hypergeometric, depends on each pool, and the estimators "
                                 "take per-user pools only for decoys drawn with replacement; draw the decoys with "
                                 "replacement, or give every row one pool (the same n_items)")
    return table


#: Recognised columns of the long file (one row per drawn decoy).
WEIGHTED_COLUMNS = {"user": ("user", "user_id"), "prob": ("prob", "probability", "decoy_prob", "p"),
                    "above": ("above", "decoy_above")}


#: Optional columns of the long file: the model that scored the decoys, the user's pool size.
WEIGHTED_OPTIONAL = {"model": ("model",), "n_items": ("n_items", "pool_size")}


@dataclass
class WeightedModel:
    """One model's weighted decoys: ``users`` (ids, in order of first appearance), ``probs`` and
    ``above`` (``(M, n-1)`` arrays), ``pools`` (one catalogue size, or an int64 array of per-user
    pool sizes)."""

    users: np.ndarray
    probs: np.ndarray
    above: np.ndarray
    pools: object


@dataclass
class WeightedTable:
    """The validated content of a long file of weighted decoys: ``models[name]`` a
    :class:`WeightedModel` (models in order of first appearance; one model called ``"model"`` when
    the file has no ``model`` column); ``n_items`` the largest catalogue size."""

    path: str
    n_items: int
    models: dict = field(default_factory=dict)

    @property
    def per_user_pools(self) -> bool:
        return any(not isinstance(m.pools, int) for m in self.models.values())


def read_weighted_table(path, n_items: int | None = None, fmt: str | None = None) -> WeightedTable:
    """Read a long file of weighted decoys (CSV, TSV or Parquet with a header row): one row per
    drawn decoy with columns ``user``, ``prob`` (its single-draw probability, in (0, 1]) and
    ``above`` (1/0 or true/false: did it score above the user's held-out item?), and optionally
    ``model`` (several models, each estimated and compared) and ``n_items`` (also ``pool_size``:
    the user's pool size :math:`N_u`, the same on each of the user's rows; then ``n_items`` must be
    ``None``, otherwise it is required). Every user of a model must have the same number of decoys;
    a user appears once per model. Bad input raises :class:`InputError` (a ``ValueError``) naming
    the file, the line (or Parquet row) and the column."""
    return _read_weighted(path, n_items, fmt, optional=True)


def _read_weighted(path, n_items, fmt, optional: bool) -> WeightedTable:
    import pandas as pd

    path = Path(path)
    try:
        N = None if n_items is None else check_int(n_items, "n_items", low=2, high=MAX_ITEMS)
    except ValueError as exc:
        raise InputError(f"--n-items: {exc}") from None
    if path.is_dir():
        raise InputError(f"{path}: is a folder, not a file of weighted decoys")
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    fmt = fmt or {".csv": "csv", ".tsv": "tsv", ".parquet": "parquet"}.get(path.suffix.lower())
    if fmt not in ("csv", "tsv", "parquet"):
        raise InputError(f"{path}: unknown format (use a .csv, .tsv or .parquet file, or --format)")
    df = _read_frame(path, fmt)
    cols = [str(c) for c in df.columns]
    roles = {}
    for role, aliases in {**WEIGHTED_COLUMNS, **(WEIGHTED_OPTIONAL if optional else {})}.items():
        found = [a for a in aliases if a in cols]
        if len(found) > 1 or (not found and role in WEIGHTED_COLUMNS):
            raise InputError(f"{path}: " + (f"missing column {role!r} ({' or '.join(aliases)})" if not found else
                                            f"columns {found} all look like the {role} column; keep one")
                             + f"; the header has {cols}")
        if found:
            roles[role] = found[0]
    extra = [c for c in cols if c not in roles.values()]
    if extra:
        raise InputError(f"{path}: unknown column(s) {extra}; a weighted file has the columns user, prob, above"
                         + (" and optionally model and n_items" if optional else ""))
    if len(df) == 0:
        raise InputError(f"{path}: no data rows")
    if N is not None and "n_items" in roles:
        raise InputError(f"{path}: the file has a per-user pool-size column {roles['n_items']!r} and --n-items was "
                         "given too; give one of them")
    if N is None and "n_items" not in roles and optional:
        raise InputError(f"--n-items is required: {path} has no per-user 'n_items' column")

    def labels(role):
        col = df[roles[role]]
        txt = col.astype(str).str.strip().to_numpy()
        missing = col.isna().to_numpy() | (txt == "")
        if missing.any():
            i = int(np.argmax(missing))
            raise InputError(f"{_where(path, fmt, i)}, column {roles[role]!r}: missing {role} "
                             + ("id" if role == "user" else "name"))
        return txt

    user = labels("user")
    model = labels("model") if "model" in roles else np.full(len(df), "model", dtype=object)
    raw_p = df[roles["prob"]]
    p = pd.to_numeric(raw_p, errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(p) | (p <= 0) | (p > 1)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"{_where(path, fmt, i)}, column {roles['prob']!r}: {raw_p.iloc[i]!r} is not a "
                         "probability in (0, 1] (the decoy's single-draw probability)")
    raw_a = df[roles["above"]]
    txt = raw_a.astype(str).str.strip().str.lower()
    truthy, falsy = txt.isin(["1", "true", "1.0"]).to_numpy(), txt.isin(["0", "false", "0.0"]).to_numpy()
    bad = ~(truthy | falsy)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"{_where(path, fmt, i)}, column {roles['above']!r}: {raw_a.iloc[i]!r} is not boolean "
                         "(expected 1/0 or true/false: did the decoy score above the target?)")
    pools = None
    if "n_items" in roles:
        pools = _integers(df[roles["n_items"]], path, fmt, roles["n_items"], 2, MAX_ITEMS,
                          "pool size")
    table = WeightedTable(path=str(path), n_items=N if pools is None else int(pools.max()))
    for m in dict.fromkeys(model):
        rows = np.flatnonzero(model == m)
        u = user[rows]
        users, first, inv, counts = np.unique(u, return_index=True, return_inverse=True, return_counts=True)
        who = "" if "model" not in roles else f" of model {m!r}"
        if np.unique(counts).size > 1:
            common = int(np.bincount(counts).argmax())
            j = int(np.flatnonzero(counts != common)[0])
            raise InputError(f"{_where(path, fmt, int(rows[first[j]]))}, column {roles['user']!r}: user {users[j]!r}"
                             f"{who} has {int(counts[j])} decoys, the other users {common}: every user needs the same "
                             "number of decoys (rows of different length)")
        order = np.argsort(first, kind="stable")            # users in order of first appearance
        rank_of = np.empty_like(order)
        rank_of[order] = np.arange(order.size)
        idx = rows[np.argsort(rank_of[inv], kind="stable")]
        d = int(counts[0])
        mp = N
        if pools is not None:
            per_row = pools[idx].reshape(-1, d)
            diff = np.flatnonzero(np.any(per_row != per_row[:, :1], axis=1))
            if diff.size:
                r = idx.reshape(-1, d)[diff[0]]
                i = int(r[np.flatnonzero(per_row[diff[0]] != per_row[diff[0], 0])[0]])
                raise InputError(f"{_where(path, fmt, i)}, column {roles['n_items']!r}: user {user[i]!r}"
                                 f"{who} has pool size {pools[i]} here and {per_row[diff[0], 0]} on another row (one "
                                 "pool size per user)")
            col = per_row[:, 0]
            mp = int(col[0]) if np.all(col == col[0]) else col.astype(np.int64)
        table.models[m] = WeightedModel(users[order], p[idx].reshape(-1, d), truthy[idx].reshape(-1, d), mp)
    return table


def read_weighted_file(path, fmt: str | None = None):
    """Read a long file of weighted decoys with the columns ``user``, ``prob`` and ``above`` only
    (:func:`read_weighted_table` reads the optional ``model`` and ``n_items`` columns too).
    Returns ``(users, decoy_probs, decoy_above)``, users in order of first appearance. Bad input
    raises :class:`InputError` (a ``ValueError``) naming the file, the line (or Parquet row) and the
    column."""
    (m,) = _read_weighted(path, None, fmt, optional=False).models.values()
    return m.users, m.probs, m.above


# --------------------------------------------------------------------------------------------
# command-line values
# --------------------------------------------------------------------------------------------

def k_value(text):
    """A cut-off given on the command line: a positive integer, or ``None`` for ``none`` / ``all`` /
    ``full`` (the untruncated metric); anything else is an ``argparse.ArgumentTypeError``."""
    if text.lower() in ("none", "all", "full"):
        return None
    try:
        k = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"cut-off must be a positive integer or 'none', got {text!r}") from None
    if k < 1:
        raise argparse.ArgumentTypeError(f"cut-off must be >= 1, got {k}")
    return k



def int_argument(text, low: int, expected: str) -> int:
    """An integer option given on the command line, at least ``low``; anything else is an
    ``argparse.ArgumentTypeError`` saying ``must be <expected>`` (argparse names the option)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {expected}, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be {expected}, got {text!r}")
    return value


def seed_value(text):
    """A seed given on the command line (``--seed``): a non-negative integer; anything else is an
    ``argparse.ArgumentTypeError`` (argparse names the option)."""
    return int_argument(text, 0, "a non-negative integer")


#: The largest catalogue size the commands accept (--n-items, an n_items column): 2^62, so that
#: every size and rank fits a 64-bit integer with room for sums.
MAX_ITEMS = 2**62


#: the former private name (``itemsampling.cli._k_value``)
_k_value = k_value
