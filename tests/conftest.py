"""How the suite spreads over pytest-xdist workers (``make test``: ``pytest -n 2``; pyproject.toml's
``addopts`` add ``--dist loadgroup --no-loadscope-reorder``). Nothing here changes what a test runs
or asserts; without ``-n`` it changes nothing at all but the ``xdist_group`` marks.

* **Groups.** A test that uses a module-, class- or session-scoped fixture of the project (a chapter
  run, a Dask cluster, a built wheel, a dataset loaded once) runs on the same worker as the other
  tests of its file (``xdist_group`` = the file), so each such fixture is built once and not once per
  worker. A fixture parametrized at module scope (the real-data tests' MovieLens and NCF folders)
  makes one group per parameter: the two folders' chapter runs may go to different workers. So do
  the tests that share module state (``SAME_WORKER``). Files that share a chapter run (the
  ``chapter_run`` fixture, ``SHARED_RUNS``) run as one group. Other tests spread one by one.
* **Order.** On the workers the files run longest first (``WEIGHTS``: seconds of a file's tests,
  from ``--durations`` on the 2-core machine), the others after them in collection order, so the
  workers finish together (longest processing time first). A file missing from ``WEIGHTS`` counts as
  short; a stale weight only costs balance, never a result.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

# Seconds per file (all its tests, fixtures included) on the 2-core machine, one process; a group
# named here (see _group) has its own weight, in place of its files'.
WEIGHTS = {
    "chapter runs 08, 10": 210,  # test_experiments_dask.py, test_notebook_08.py, test_notebook_10.py
    "test_real_data_candidates.py": 110,
    "test_real_data_08_09.py": 60,
    "test_exercises.py, chapter 09-user-sampling.md": 30,
    "test_exercises.py, chapter 10-candidate-sets.md": 27,
    "test_exercises.py, chapter 08-adaptive-sampling.md": 18,
    "test_exercises.py, chapter 11-popularity-sampled-evaluations.md": 13,
    "test_exercises.py, chapter 01-sampled-metrics-inconsistent.md": 8,
    "test_exercises.py, chapter 02-sampling-theorem.md": 8,
    "test_exercises.py": 15,
    "test_notebook_03.py": 35,
    "test_notebook_02.py": 25,
    "test_notebook_06.py": 25,
    "test_notebook_09.py": 25,
    "test_notebook_11.py": 25,
    "test_notebook_guide.py": 25,
    "test_notebook_01.py": 20,
    "test_packaging.py": 20,
    "test_notebook_04.py": 15,
    "test_notebook_05.py": 15,
    "test_notebook_07.py": 15,
    "test_real_data.py": 15,
    "test_classroom.py": 15,
    "test_data.py": 15,
    "test_cli.py": 15,
    "test_hardening.py": 10,
    "test_book_build.py": 10,
    "test_runner.py": 10,
}

# Files whose tests share state that is not a fixture, and the parameter it is kept by: the run of a
# chapter's exercise section in test_exercises.py (its module's _RUNS), used by three tests per chapter.
SAME_WORKER = {"test_exercises.py": "chapter"}


def _shared_fixtures(item) -> list[str]:
    """The project's fixtures (not pytest's or a plugin's) wider than one test that ``item`` uses."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    names = []
    for name, defs in info.name2fixturedefs.items():
        fixturedef = defs[-1]
        if fixturedef.scope != "function" and fixturedef.baseid:  # baseid "": pytest's and plugins' fixtures
            names.append(name)
    return names


# Files that share chapter runs (the ``chapter_run`` fixture) run as one group: the Dask test runs
# chapters 8 and 10 at their notebook tests' parameters and compares the cluster's run with theirs.
SHARED_RUNS = {"test_experiments_dask.py": "chapter runs 08, 10", "test_notebook_08.py": "chapter runs 08, 10",
               "test_notebook_10.py": "chapter runs 08, 10"}


@pytest.fixture(scope="session")
def chapter_run(tmp_path_factory):
    """``chapter_run(notebook, params)``: ``itemsampling.run.run_notebook(notebook, params, out)`` (no
    progress bar, no HTML), run once per worker for each notebook and parameters, and a copy of its
    payload for every caller."""
    from itemsampling.run import run_notebook

    runs = {}

    def run(notebook, params):
        key = (str(Path(notebook).resolve()), json.dumps(params, sort_keys=True))
        if key not in runs:
            out = tmp_path_factory.mktemp(f"run-{Path(notebook).stem[:2]}")
            runs[key] = run_notebook(notebook, params, out, progress=False)
        return copy.deepcopy(runs[key])

    return run


def _label(value) -> str:
    """A parameter in a group name: a path by its name; no ``@`` or ``]``, which end xdist's group suffix."""
    text = getattr(value, "name", None) or str(value)
    return text.replace("@", "_").replace("[", "(").replace("]", ")")


def _group(item) -> str | None:
    group = Path(str(item.path)).name
    params = getattr(getattr(item, "callspec", None), "params", {})
    shared = _shared_fixtures(item)
    if group in SHARED_RUNS and shared:
        return SHARED_RUNS[group]
    if not shared:
        by = SAME_WORKER.get(group)
        return f"{group}, {by} {_label(params[by])}" if by in params else None
    for name in sorted(shared):
        if name in params:
            group += f", {name} {_label(params[name])}"
    return group


_GROUP = pytest.StashKey[str]()  # an item's group ("" for none); the nodeid changes under loadgroup


@pytest.hookimpl(tryfirst=True)  # before xdist's worker appends the group to the nodeid
def pytest_collection_modifyitems(config, items):
    for item in items:
        group = _group(item)
        item.stash[_GROUP] = group or ""
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")
def pytest_collection_modifyitems_longest_first(config, items):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # one process: the usual order
    first, files = {}, {}  # a scope's first position and its files
    for i, item in enumerate(items):
        scope = item.stash[_GROUP] or item.nodeid
        first.setdefault(scope, i)
        files.setdefault(scope, set()).add(Path(str(item.path)).name)

    def key(pair):
        i, item = pair
        scope = item.stash[_GROUP] or item.nodeid
        weight = WEIGHTS[scope] if scope in WEIGHTS else sum(WEIGHTS.get(f, 0) for f in files[scope])
        return (-weight, first[scope], i)

    items[:] = [item for _, item in sorted(enumerate(items), key=key)]
