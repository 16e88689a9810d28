"""The package installs like a library: every third-party import is declared (core or an extra),
the sdist and wheel build (`python -m build`), the wheel installed into a fresh virtual environment
runs `estimate` and `plan` and, with the [dask] extra, a run on a local Dask cluster; a missing
extra is named ("install itemsampling[dask]"), not a traceback.

Offline by design: the build runs without isolation (the environment's pinned setuptools), the wheel
is installed with ``--no-deps --no-index``, and the fresh environment reaches the dependencies
through a ``.pth`` line naming this environment's site-packages (a plain path: the ``.pth`` files
there, among them the editable install of the working tree, are *not* processed, so
``import itemsampling`` can only find the installed wheel - the test checks it)."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "itemsampling"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


#: Sphinx extensions of the book (_config.yml), imported by the book build only ([book] extra).
BOOK_EXTENSIONS = {"handout.py"}


def _requirement_names(reqs) -> set:
    return {re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0].lower().replace("_", "-") for r in reqs}


def _imports(path: Path):
    """(module, top_level) for every absolute import in a source file; top_level = at module scope."""
    tree = ast.parse(path.read_text(), filename=str(path))
    top = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name.split(".")[0], id(node) in top
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0], id(node) in top


def test_every_third_party_import_is_declared():
    """Module-scope imports need a core dependency; imports inside functions may come from an extra."""
    project = PYPROJECT["project"]
    core = _requirement_names(project["dependencies"])
    extras = {name: _requirement_names(reqs) for name, reqs in project["optional-dependencies"].items()}
    declared = core.union(*extras.values())
    assert {"dask", "book", "teach", "test"} <= set(extras)
    assert {"nbgrader", "sphinx-exercise"} <= extras["teach"] and "distributed" in extras["dask"]
    dists = metadata.packages_distributions()
    missing, not_core = set(), set()
    for path in SRC.rglob("*.py"):
        for mod, at_top in _imports(path):
            if mod in sys.stdlib_module_names or mod in ("itemsampling", "__future__"):
                continue
            names = {d.lower().replace("_", "-") for d in dists.get(mod, [mod])}
            if not names & declared:
                missing.add(f"{path.relative_to(ROOT)}: {mod} ({sorted(names)})")
            elif at_top and not names & core and path.name not in BOOK_EXTENSIONS:
                not_core.add(f"{path.relative_to(ROOT)}: {mod}")
    assert not missing, f"imports without a declared dependency: {sorted(missing)}"
    assert not not_core, f"module-scope imports of optional dependencies: {sorted(not_core)}"


def test_version_is_one_everywhere():
    import itemsampling

    assert PYPROJECT["project"]["version"] == itemsampling.__version__ == "1.0.0"
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(r"^## \[?1\.0\.0\]?", changelog, flags=re.M)
    cff = (ROOT / "CITATION.cff").read_text()
    assert re.search(r'^version: "?1\.0\.0"?$', cff, flags=re.M)
    bib = (ROOT / "book" / "references.bib").read_text()
    for key in ("krichene2020sampled", "li2020sampling", "jin2021estimating", "li2024itemsampling",
                "ihemelandu2023candidate"):  # the five papers: each DOI of the bibliography is cited
        doi = re.search(r"@\w+\{" + key + r",.*?doi\s*=\s*\{([^}]+)\}", bib, flags=re.S).group(1)
        assert doi in cff, key


def test_missing_dask_extra_is_named_not_a_traceback(monkeypatch):
    from itemsampling import experiments as E

    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    monkeypatch.delenv(E.SCHEDULER_ENV, raising=False)
    with pytest.raises(ImportError, match=r"install itemsampling\[dask\]"):
        E._check_backend("dask", None)
    assert E._check_backend("local", None) == ("local", None)  # the local backend needs nothing


# ---------------------------------------------------------------------------------------------
# build, install into a fresh environment, run the commands there
# ---------------------------------------------------------------------------------------------
def _run(cmd, **kw):
    res = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600, **kw)
    assert res.returncode == 0, f"{cmd} failed ({res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res


@pytest.fixture(scope="module")
def fresh_env(tmp_path_factory):
    """sdist and wheel built from a copy of the project; the wheel installed into a new venv."""
    work = tmp_path_factory.mktemp("pkg")
    project = work / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, project / name)
    shutil.copytree(ROOT / "src", project / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"))
    dist = work / "dist"
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, project])
    sdists, wheels = sorted(dist.glob("*.tar.gz")), sorted(dist.glob("*.whl"))
    assert [p.name for p in sdists] == ["itemsampling-1.0.0.tar.gz"]
    assert [p.name for p in wheels] == ["itemsampling-1.0.0-py3-none-any.whl"]
    env = work / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", env])
    py = env / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", py, "install", "--no-deps", "--no-index", "--quiet",
          wheels[0]])
    site = Path(_run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ITEMSAMPLING_SCHEDULER")}
    where = _run([py, "-c", "import itemsampling, importlib.metadata as m; "
                            "print(itemsampling.__file__); print(itemsampling.__version__, m.version('itemsampling'))"],
                 env=clean).stdout.split("\n")
    assert where[0].startswith(str(env)), where  # the wheel, not the working tree
    assert where[1] == "1.0.0 1.0.0"
    return env, clean


def test_wheel_in_a_fresh_environment_runs_estimate_and_plan(fresh_env, tmp_path):
    env, clean = fresh_env
    rng = np.random.default_rng(0)
    N, n, M = 500, 50, 300
    R = np.minimum(N, 1 + np.floor((N - 1) * rng.beta(0.4, 1.5, size=M))).astype(int)
    from itemsampling.sampling import sample_ranks

    ranks = tmp_path / "ranks.csv"
    pd.DataFrame({"rank": sample_ranks(R, N, n, rng=1)}).to_csv(ranks, index=False)
    out = _run([env / "bin" / "itemsampling", "estimate", ranks, "--n-items", N, "--sample-size", n,
                "--metric", "recall", "--k", 10, "--n-boot", 20, "--json", "--quiet"], env=clean, cwd=tmp_path)
    import json

    res = json.loads(out.stdout)
    assert res["n_items"] == N and len(res["estimates"]) == 1
    row = res["estimates"][0]
    assert row["low"] <= row["estimate"] <= row["high"]
    # the same numbers as this environment's package (same code, same seed)
    from itemsampling.cli import estimate_table, read_rank_file
    from itemsampling.plan import plan_evaluation

    here = estimate_table(read_rank_file(ranks, N, n), ["recall"], [10], n_boot=20)
    assert row["estimate"] == pytest.approx(here["estimates"][0]["estimate"], rel=1e-12)
    assert (row["low"], row["high"]) == pytest.approx((here["estimates"][0]["low"], here["estimates"][0]["high"]),
                                                      rel=1e-12)
    plan = _run([env / "bin" / "python", "-m", "itemsampling", "plan", "--n-items", N, "--n-users", M,
                 "--metric", "recall", "--k", 10, "--margin", 0.05, "--pilot", ranks, "--sample-size", n,
                 "--sizes", 20, "--estimators", "mle", "--n-sim", 5, "--json"], env=clean, cwd=tmp_path)
    designs = json.loads(plan.stdout)["designs"]
    assert {d["design"] for d in designs} >= {"full ranking", "user sampling", "item sampling"}
    here_plan = plan_evaluation(N, M, "recall", 10, margin=0.05, pilot=read_rank_file(ranks, N, n).ranks["model"],
                                sample_size=n, rng=0, sizes=(20,), estimators=("mle",), n_sim=5)
    assert [d["half_width"] for d in designs] == pytest.approx([d.half_width for d in here_plan.designs], rel=1e-9)


def test_wheel_with_the_dask_extra_runs_on_a_local_cluster(fresh_env, tmp_path):
    """run_experiment(backend="dask") from the installed wheel on a LocalCluster it starts; the
    values equal the serial run's, computed in the same fresh environment."""
    env, clean = fresh_env
    script = tmp_path / "dask_run.py"
    script.write_text(
        "import numpy as np\n"
        "from itemsampling import experiments as E\n"
        "from itemsampling.estimators import estimate_metric\n"
        "assert E.__file__.startswith(%r)\n"
        "if __name__ == '__main__':\n"
        "    gr = E.load_global_ranks('sim-ml100k', ['X', 'popular'], progress=False)\n"
        "    kw = dict(sample_sizes=(20,), n_repeats=4, rng=3, metrics=(('recall', 10),), cache=False, progress=False)\n"
        "    a = E.run_experiment(gr, backend='dask', n_jobs=2, **kw)\n"
        "    b = E.run_experiment(gr, backend='local', **kw)\n"
        "    assert np.array_equal(a.values, b.values), (a.values, b.values)\n"
        "    print('dask ok', a.values.shape)\n" % str(env))
    run_env = dict(clean, ITEMSAMPLING_CACHE=str(tmp_path / "cache"))
    out = _run([env / "bin" / "python", script], env=run_env, cwd=tmp_path)
    assert "dask ok" in out.stdout
