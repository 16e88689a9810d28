"""How the suite spreads over pytest-xdist workers (``make test``: ``pytest -n auto``). Nothing here
changes what a test runs or asserts; without ``-n`` it changes nothing but provides ``chapter_run``.

* **Scopes.** The workers take whole files (xdist's ``loadfile``), so that a file's module-scoped
  fixtures (a chapter run, a Dask cluster, a built wheel) are built once, not once per worker, with
  two refinements (``_scope``): files that share chapter runs through the session fixture
  ``chapter_run`` go to one worker together (``SHARED_RUNS``), and in the files of ``SPLIT`` each
  parameter of a parametrized test is a scope of its own (the real-data tests' MovieLens and NCF
  folders, test_exercises.py's chapters, whose three tests share one run of the chapter's exercises)
  while the file's other tests stay together. (xdist's ``loadgroup`` marks cannot do this: under
  pytest 9 the worker can no longer append the group to the test's id.)
* **Order.** On the workers the scopes run longest first (``WEIGHTS``: seconds, from ``--durations``
  on the 2-core machine), the others after them in collection order, so the workers finish together
  (longest processing time first). A scope missing from ``WEIGHTS`` counts as short; a stale weight
  only costs balance, never a result.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

# Seconds per file (all its tests, fixtures included) on the 2-core machine, one process; a scope
# named here (see _scope) has its own weight, in place of its files'.
WEIGHTS = {
    "chapter runs 08, 10": 210,  # test_experiments_dask.py, test_notebook_08.py, test_notebook_10.py
    "test_real_data_candidates.py": 110,
    "test_real_data_08_09.py": 60,
    "test_exercises.py[09]": 30,
    "test_exercises.py[10]": 27,
    "test_exercises.py[08]": 18,
    "test_exercises.py[11]": 13,
    "test_exercises.py[01]": 8,
    "test_exercises.py[02]": 8,
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

# Files that share chapter runs (the ``chapter_run`` fixture) run as one scope: the Dask test runs
# chapters 8 and 10 at their notebook tests' parameters and compares the cluster's run with theirs.
SHARED_RUNS = {"test_experiments_dask.py": "chapter runs 08, 10", "test_notebook_08.py": "chapter runs 08, 10",
               "test_notebook_10.py": "chapter runs 08, 10"}

# Files whose parametrized tests run as one scope per parameter id (see the module's docstring).
SPLIT = {"test_real_data_08_09.py", "test_real_data_candidates.py", "test_exercises.py"}


def _scope(nodeid: str) -> str:
    """The unit of work a worker takes: the test's file, its ``SHARED_RUNS`` name or, in a ``SPLIT``
    file, the file and the parameter id."""
    path = nodeid.split("::", 1)[0]
    name = Path(path).name
    if name in SHARED_RUNS:
        return SHARED_RUNS[name]
    if name in SPLIT and nodeid.endswith("]") and "[" in nodeid:
        return f"{name}[{nodeid[nodeid.index('[') + 1:-1]}]"
    return path


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: absent under -p no:xdist
def pytest_xdist_make_scheduler(config, log):
    """xdist's scheduler of whole scopes (``loadscope``), with ``_scope`` for scopes and the
    workers' collection order for their order."""
    from xdist.scheduler import LoadScopeScheduling

    class ScopeScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return _scope(nodeid)

    config.option.loadscopereorder = False  # keep the order of _longest_first
    return ScopeScheduling(config, log)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Longest scopes first, on the workers only (all workers collect the same order)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # one process: the usual order
    first, files = {}, {}  # a scope's first position and its files
    for i, item in enumerate(items):
        scope = _scope(item.nodeid)
        first.setdefault(scope, i)
        files.setdefault(scope, set()).add(Path(str(item.path)).name)

    def key(pair):
        i, item = pair
        scope = _scope(item.nodeid)
        weight = WEIGHTS[scope] if scope in WEIGHTS else sum(WEIGHTS.get(f, 0) for f in files[scope])
        return (-weight, first[scope], i)

    items[:] = [item for _, item in sorted(enumerate(items), key=key)]


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
