"""Snapshot every chapter's recorded values at the notebook tests' small parameters, and compare
two snapshots value by value.

A change that must not move the book's numbers (a refactor of ``itemsampling.estimators``, a
faster sampler that keeps the random streams) is checked in two steps::

    python tools/snapshot_results.py run _build/snapshots/before      # on the old code
    python tools/snapshot_results.py run _build/snapshots/after       # on the new code
    python tools/snapshot_results.py compare _build/snapshots/before _build/snapshots/after --rtol 1e-9

``run`` executes the notebook tests (``tests/test_notebook_*.py``, each chapter through
:func:`itemsampling.run.run_notebook` at the test's parameters) with a fixed ``--basetemp``, so every
run's ``results.json`` lands at the same relative path, and gathers them into ``snapshot.json``
(``{path: recorded values}``). ``compare`` walks both snapshots (dicts by key, lists by position)
and prints every number whose relative difference exceeds ``--rtol`` (absolute below ``--atol``),
every string or shape that differs and every value present in one snapshot only; the exit status
is 1 when anything differs. Timings (keys containing ``seconds``, ``runtime``, ``minutes``, a ``ms``
word or ending in ``_s``) are
ignored, as are run metadata outside ``results``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMING = re.compile(r"seconds|runtime|minutes|_time\b|elapsed|(^|_)ms(_|$)|_s$", re.IGNORECASE)


def run(out: Path, tests: list[str]) -> int:
    out = out.resolve()
    base = out / "tmp"
    if base.exists():
        shutil.rmtree(base)
    out.mkdir(parents=True, exist_ok=True)
    tests = tests or sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_notebook_*.py"))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={base}", *tests]
    print("running:", " ".join(cmd), flush=True)
    rc = subprocess.call(cmd, cwd=ROOT)
    snapshot = {}
    for path in sorted(base.rglob("results.json")):
        snapshot[str(path.relative_to(base))] = json.loads(path.read_text())["results"]
    (out / "snapshot.json").write_text(json.dumps(snapshot, indent=1, sort_keys=True))
    print(f"{len(snapshot)} runs recorded in {out / 'snapshot.json'} (pytest exit status {rc})")
    return rc


def _walk(a, b, where: str, rtol: float, atol: float, found: list):
    if TIMING.search(where.rsplit("/", 1)[-1]):
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                found.append((f"{where}/{k}", a.get(k, "<absent>"), b.get(k, "<absent>"), "only in one"))
            else:
                _walk(a[k], b[k], f"{where}/{k}", rtol, atol, found)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            found.append((where, f"length {len(a)}", f"length {len(b)}", "shape"))
        else:
            for i, (x, y) in enumerate(zip(a, b)):
                _walk(x, y, f"{where}[{i}]", rtol, atol, found)
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) \
            and not isinstance(b, bool):
        if math.isnan(a) and math.isnan(b):
            return
        diff = abs(a - b)
        if not (diff <= atol or diff <= rtol * max(abs(a), abs(b))):
            rel = diff / max(abs(a), abs(b)) if max(abs(a), abs(b)) > 0 else math.inf
            found.append((where, a, b, f"rel {rel:.2e}"))
    elif a != b:
        found.append((where, a, b, "differs"))


def compare(before: Path, after: Path, rtol: float, atol: float) -> int:
    a = json.loads((before / "snapshot.json").read_text())
    b = json.loads((after / "snapshot.json").read_text())
    found: list = []
    _walk(a, b, "", rtol, atol, found)
    n_values = sum(1 for _ in _leaves(a))
    for where, x, y, why in found:
        print(f"{where}: {str(x)[:60]} -> {str(y)[:60]} ({why})")
    print(f"{len(found)} of {n_values} recorded values differ beyond rtol={rtol:g}, atol={atol:g}")
    return 1 if found else 0


def _leaves(x):
    if isinstance(x, dict):
        for v in x.values():
            yield from _leaves(v)
    elif isinstance(x, list):
        for v in x:
            yield from _leaves(v)
    else:
        yield x


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the notebook tests and gather their results.json")
    r.add_argument("out", type=Path)
    r.add_argument("tests", nargs="*", help="test files (default: tests/test_notebook_*.py)")
    c = sub.add_parser("compare", help="compare two snapshots")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    c.add_argument("--rtol", type=float, default=1e-9)
    c.add_argument("--atol", type=float, default=1e-12)
    args = p.parse_args(argv)
    if args.cmd == "run":
        return run(args.out, args.tests)
    for name in ("rtol", "atol"):
        v = getattr(args, name)
        if not (v >= 0 and math.isfinite(v)):
            p.error(f"--{name} must be a finite number >= 0, got {v}")
    return compare(args.before, args.after, args.rtol, args.atol)


if __name__ == "__main__":
    sys.exit(main())
