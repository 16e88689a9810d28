r"""Frozen and published decoys: the files in which papers and libraries fix the items each held-out item
is ranked against, read and written.

One layout covers both files in use: NCF's ``NAME.test.negative`` (He et al. 2017; the decoys of the
``ml-1m`` and ``pinterest-20`` splits, read also by :func:`itemsampling.data.load_ncf`) and Elliot's
fixed negatives file (Anelli et al. 2021, ``negative_sampling: strategy: fixed``; the file its ``random``
strategy stores beside the dataset). One line per held-out row::

    (user,test_item)<TAB>decoy<TAB>decoy ...

NCF writes ``(u,i)``, Elliot ``(u, i)`` (Python's tuple text, string ids quoted); both are read, and
:func:`write_decoys` writes ``(u,i)`` for integer ids and the quoted tuple for string ids, which both
libraries read back. Every line must hold the same number of decoys (the rows of a rank table).

A decoy set fixes *which* items a model is ranked against, not the law they were drawn from: pass it to
:func:`itemsampling.evaluation.sampled_ranks` as ``decoys=`` with ``replacement`` stated (or inferred
there: a row that repeats a decoy is a with-replacement draw; the published files repeat none, the
without-replacement draws of their authors' scripts), and the rows' pools as ``exclude``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from .loaders import _as_path

__all__ = ["read_decoys", "write_decoys", "map_ids"]


def _parse_head(head: str, path: Path, lineno: int):
    h = head.strip()
    if not (h.startswith("(") and h.endswith(")")):
        raise ValueError(f"{path}: line {lineno}, field 1 must be '(user,test_item)', got {h!r}")
    inner = h[1:-1]
    if "'" in inner or '"' in inner:
        try:
            pair = ast.literal_eval(h)
        except (ValueError, SyntaxError):
            pair = None
        if not (isinstance(pair, tuple) and len(pair) == 2):
            raise ValueError(f"{path}: line {lineno}, field 1 must be '(user,test_item)', got {h!r}")
        return pair
    parts = [p.strip() for p in inner.split(",")]
    if len(parts) != 2 or not all(parts):
        raise ValueError(f"{path}: line {lineno}, field 1 must be '(user,test_item)' with two ids, got {h!r}")
    return tuple(parts)


def _as_ids(values: list, path: Path, what: str):
    """Integer ids as int64 when every value is an integer (text or number), else the text."""
    try:
        return np.array([int(v) for v in values], dtype=np.int64)
    except (ValueError, TypeError, OverflowError):
        return np.array([str(v) for v in values], dtype=str)


def read_decoys(path, user_ids=None, item_ids=None):
    r"""Read a decoys file (NCF ``.test.negative`` or Elliot's fixed negatives; module docstring).

    Returns ``(users, targets, decoys)``: ``users`` and ``targets`` 1-d arrays of the rows' ids,
    ``decoys`` a ``(rows, n - 1)`` array, as the file writes them (int64 when every id is an integer,
    else strings). With ``user_ids`` / ``item_ids`` (a loaded frame's ``attrs["user_ids"]`` /
    ``attrs["item_ids"]``: the original id of each 0-based id) the ids are mapped to the frame's 0-based
    ids (:func:`map_ids`), ready for :func:`itemsampling.evaluation.sampled_ranks`. Refuses, naming the
    file, the line and the field, a line that does not start with ``(user,test_item)``, a missing or
    non-integer decoy where the ids are integers, a line with another number of decoys than the first,
    a decoy equal to the line's test item, an empty file, and an id the maps do not hold."""
    p = _as_path(path)
    if not p.is_file():
        raise ValueError(f"decoys file {p} does not exist or is not a regular file")
    text = p.read_bytes().decode("utf-8-sig", errors="replace")
    users, targets, rows = [], [], []
    width = None
    numbered = [(n, ln) for n, ln in enumerate(text.splitlines(), start=1) if ln.strip()]
    if not numbered:
        raise ValueError(f"{p}: no lines (expected '(user,test_item)<TAB>decoy<TAB>decoy ...' per held-out row)")
    for row, (lineno, line) in enumerate(numbered):
        fields = line.rstrip("\r").split("\t")
        u, i = _parse_head(fields[0], p, lineno)
        negs = [x.strip() for x in fields[1:] if x.strip()]
        if width is None:
            width = len(negs)
            if width == 0:
                raise ValueError(f"{p}: line {lineno} has no decoys after '(user,test_item)'")
        if len(negs) != width:
            raise ValueError(f"{p}: line {lineno} has {len(negs)} decoys, line {numbered[0][0]} has {width} (every "
                             "row needs the same number" + ("; truncated last line?)" if row == len(numbered) - 1
                                                            else ")"))
        if str(i).strip() in negs:
            j = negs.index(str(i).strip())
            raise ValueError(f"{p}: line {lineno}, field {j + 2} (decoy) equals the test item {i}")
        users.append(u)
        targets.append(i)
        rows.append(negs)
    U = _as_ids(users, p, "user")
    T = _as_ids(targets, p, "item")
    flat = [x for r in rows for x in r]
    D = _as_ids(flat, p, "decoy")
    if T.dtype.kind == "i" and D.dtype.kind != "i":
        k = next(k for k, x in enumerate(flat) if not x.lstrip("-").isdigit())
        r, c = divmod(k, width)
        raise ValueError(f"{p}: line {numbered[r][0]}, field {c + 2} (decoy) is not an integer item id: {flat[k]!r}")
    if D.dtype.kind == "i" and D.size and D.min() < 0:
        k = int(np.argmax(D < 0))
        r, c = divmod(k, width)
        raise ValueError(f"{p}: line {numbered[r][0]}, field {c + 2} (decoy) must be a non-negative item id, "
                         f"got {D[k]}")
    D = D.reshape(len(rows), width)
    if user_ids is not None:
        U = map_ids(U, user_ids, "user", p)
    if item_ids is not None:
        T = map_ids(T, item_ids, "item", p)
        D = map_ids(D, item_ids, "item", p)
    return U, T, D


def map_ids(values, ids, what: str = "item", path=None) -> np.ndarray:
    """0-based ids of original ``values`` under a frame's id map ``ids`` (``ids[new] == original``, sorted,
    as :mod:`itemsampling.data`'s loaders keep them); an id the map lacks is refused naming it."""
    ids = np.asarray(ids)
    v = np.asarray(values)
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError(f"{what}_ids must be a 1-d array of original ids, got shape {ids.shape}")
    if ids.dtype.kind in "iu" and v.dtype.kind not in "iu":
        try:
            v = v.astype(np.int64)
        except ValueError:
            raise ValueError(f"{path or what}: {what} ids are text but the {what} map holds integers") from None
    elif ids.dtype.kind not in "iu":
        ids, v = ids.astype(str), v.astype(str)
    order = np.argsort(ids, kind="stable")
    pos = np.searchsorted(ids[order], v.ravel())
    pos = np.minimum(pos, ids.size - 1)
    ok = ids[order][pos] == v.ravel()
    if not ok.all():
        bad = v.ravel()[int(np.argmax(~ok))].item()
        raise ValueError(f"{path or what}: {what} id {bad!r} is not in the data's {what}s ({what}_ids)")
    return order[pos].reshape(v.shape).astype(np.int64)


def _text(x) -> str:
    return str(x)


def write_decoys(path, users, targets, decoys) -> Path:
    """Write a decoys file that NCF and Elliot read (module docstring): line ``k`` is
    ``(users[k],targets[k])`` then the ``decoys[k]`` tab-separated. Ids are written as given (map them back
    to the original ids first, ``attrs["item_ids"][decoys]``, for a file others read with the dataset's
    ids). Returns the path. Refuses arrays of other lengths, a ``decoys`` that is not ``(rows, w)`` with
    ``w >= 1``, and a decoy equal to its row's target."""
    p = _as_path(path)
    U, T, D = np.asarray(users), np.asarray(targets), np.asarray(decoys)
    if U.ndim != 1 or T.shape != U.shape:
        raise ValueError(f"users and targets must be 1-d arrays of the same length, got shapes {U.shape} and {T.shape}")
    if D.ndim != 2 or D.shape[0] != U.size or D.shape[1] < 1:
        raise ValueError(f"decoys must be an array of shape (len(users), n - 1) = ({U.size}, n - 1), got {D.shape}")
    hit = D.astype(str) == T.astype(str)[:, None]
    if hit.any():
        r, c = np.argwhere(hit)[0]
        raise ValueError(f"decoys must not hold the row's target: row {r} has its target {T[r]!r} in column {c}")
    quoted = U.dtype.kind not in "iu" or T.dtype.kind not in "iu"
    lines = []
    for u, t, row in zip(U.tolist(), T.tolist(), D.tolist()):
        head = repr((u, t)) if quoted else f"({u},{t})"
        lines.append(head + "\t" + "\t".join(map(_text, row)))
    tmp = p.with_name(p.name + ".part")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(p)
    return p
