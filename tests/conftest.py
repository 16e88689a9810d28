"""How the suite spreads over pytest-xdist workers (``make test``: ``pytest -n 2``; pyproject.toml's
``addopts`` add ``--dist loadgroup --no-loadscope-reorder``). Nothing here changes what a test runs
or asserts; without ``-n`` it changes nothing at all but the ``xdist_group`` marks.

* **Groups.** A test that uses a module-, class- or session-scoped fixture of the project (a chapter
  run, a Dask cluster, a built wheel, a dataset loaded once) runs on the same worker as the other
  tests of its file (``xdist_group`` = the file), so each such fixture is built once and not once per
  worker. A fixture parametrized at module scope (the real-data tests' MovieLens and NCF folders)
  makes one group per parameter: the two folders' chapter runs may go to different workers. Tests
  that use only function-scoped fixtures spread one by one.
* **Order.** On the workers the files run longest first (``WEIGHTS``: seconds of a file's tests,
  from ``--durations`` on the 2-core machine), the others after them in collection order, so the
  workers finish together (longest processing time first). A file missing from ``WEIGHTS`` counts as
  short; a stale weight only costs balance, never a result.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Seconds per file (all its tests, fixtures included) on the 2-core machine, single process.
WEIGHTS = {
    "test_experiments_dask.py": 150,
    "test_real_data_08_09.py": 120,
    "test_real_data_candidates.py": 110,
    "test_exercises.py": 100,
    "test_notebook_03.py": 45,
    "test_notebook_02.py": 35,
    "test_notebook_06.py": 35,
    "test_notebook_08.py": 35,
    "test_notebook_09.py": 35,
    "test_notebook_10.py": 35,
    "test_notebook_11.py": 35,
    "test_notebook_guide.py": 30,
    "test_notebook_01.py": 30,
    "test_packaging.py": 30,
    "test_notebook_04.py": 20,
    "test_notebook_05.py": 20,
    "test_notebook_07.py": 20,
    "test_real_data.py": 20,
    "test_classroom.py": 20,
    "test_data.py": 20,
    "test_cli.py": 20,
    "test_hardening.py": 15,
    "test_book_build.py": 15,
    "test_runner.py": 15,
}


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


def _group(item) -> str | None:
    shared = _shared_fixtures(item)
    if not shared:
        return None
    group = Path(str(item.path)).name
    params = getattr(getattr(item, "callspec", None), "params", {})
    for name in sorted(shared):
        if name in params:
            group += f"[{name}={params[name]}]"
    return group


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    groups = {}
    for item in items:
        group = _group(item)
        groups[item.nodeid] = group
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # one process: the usual order
    first = {}
    for i, item in enumerate(items):
        first.setdefault(groups[item.nodeid] or item.nodeid, i)

    def key(pair):
        i, item = pair
        return (-WEIGHTS.get(Path(str(item.path)).name, 0), first[groups[item.nodeid] or item.nodeid], i)

    items[:] = [item for _, item in sorted(enumerate(items), key=key)]
