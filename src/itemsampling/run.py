"""Rerun a chapter with other parameters.

Usage::

    python -m itemsampling.run notebooks/01-sampled-metrics-inconsistent.md -p n_repeats 200 --out runs/ch1

The MyST notebook is converted with jupytext, executed with papermill (its cell tagged
``parameters`` holds the defaults; ``-p NAME VALUE`` overrides them, VALUE parsed as YAML so
``-p sample_sizes "[50, 100]"`` gives a list), and written with its outputs to
``OUT/<name>.ipynb``. Every value the notebook records through :func:`itemsampling.book.record`
lands in ``OUT/results.json``, together with the parameters and the run time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import yaml

from .book import RESULTS_ENV

SCHEDULER_ENV = "ITEMSAMPLING_SCHEDULER"  # read by itemsampling.experiments.run_experiment

__all__ = ["run_notebook", "main"]


def _parameter_names(nb) -> set[str]:
    import ast

    names: set[str] = set()
    for cell in nb.cells:
        if cell.cell_type == "code" and "parameters" in cell.metadata.get("tags", []):
            for node in ast.parse(cell.source).body:
                if isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def run_notebook(notebook, parameters: dict | None = None, out=None, progress: bool = True,
                 timeout: int | None = None, scheduler: str | None = None) -> dict:
    """Execute a MyST notebook with ``parameters`` and return its recorded results.

    Parameters
    ----------
    notebook : path to a ``.md`` (MyST) or ``.ipynb`` notebook.
    parameters : dict of overrides for names assigned in the cell tagged ``parameters``.
    out : output folder (default ``_build/runs/<notebook stem>``).
    timeout : per-cell timeout in seconds (default: none).
    scheduler : address of a Dask scheduler; the chapter's experiment grids
        (:func:`itemsampling.experiments.run_experiment`) then run on that cluster.

    Raises ``ValueError`` for an unknown parameter name and ``RuntimeError`` (with the failing
    cell's error) when the notebook raises.
    """
    import jupytext
    import nbformat
    import papermill as pm

    notebook = Path(notebook).resolve()
    if not notebook.exists():
        raise ValueError(f"notebook {notebook} does not exist")
    parameters = dict(parameters or {})
    out = Path(out) if out is not None else Path("_build/runs") / notebook.stem
    out.mkdir(parents=True, exist_ok=True)
    out = out.resolve()

    nb = jupytext.read(notebook)
    allowed = _parameter_names(nb)
    if not allowed and parameters:
        raise ValueError(f"{notebook.name} has no cell tagged 'parameters'")
    unknown = sorted(set(parameters) - allowed)
    if unknown:
        raise ValueError(f"unknown parameter(s) {unknown} for {notebook.name}; allowed: {sorted(allowed)}")
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    source = out / f"{notebook.stem}.input.ipynb"
    target = out / f"{notebook.stem}.ipynb"
    nbformat.write(nb, source)

    results_path = out / "results.json"
    results_path.unlink(missing_ok=True)
    old = os.environ.get(RESULTS_ENV)
    os.environ[RESULTS_ENV] = str(results_path)
    old_scheduler = os.environ.pop(SCHEDULER_ENV, None)
    if scheduler is not None:
        os.environ[SCHEDULER_ENV] = str(scheduler)
    start = time.perf_counter()
    try:
        pm.execute_notebook(
            str(source), str(target), parameters=parameters, progress_bar=progress,
            kernel_name="python3", cwd=str(notebook.parent), execution_timeout=timeout,
        )
    except pm.PapermillExecutionError as exc:
        raise RuntimeError(f"{notebook.name} failed in cell {exc.exec_count}: {exc.ename}: {exc.evalue}") from exc
    finally:
        if old is None:
            os.environ.pop(RESULTS_ENV, None)
        else:
            os.environ[RESULTS_ENV] = old
        os.environ.pop(SCHEDULER_ENV, None)
        if old_scheduler is not None:
            os.environ[SCHEDULER_ENV] = old_scheduler
        source.unlink(missing_ok=True)
    elapsed = time.perf_counter() - start
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    payload = {"notebook": str(notebook), "parameters": parameters, "seconds": round(elapsed, 2),
               "results": results}
    results_path.write_text(json.dumps(payload, indent=1, sort_keys=True))
    return payload


def _parse(argv=None):
    p = argparse.ArgumentParser(prog="python -m itemsampling.run", description=__doc__.split("\n\n")[0])
    p.add_argument("notebook", help="path to a chapter's MyST .md notebook")
    p.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                   help="override a parameter; VALUE is parsed as YAML (numbers, lists, strings)")
    p.add_argument("--out", default=None, help="output folder (default _build/runs/<notebook>)")
    p.add_argument("--timeout", type=int, default=None, help="per-cell timeout in seconds")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run the chapter's experiment grids on the Dask cluster at ADDRESS (tcp://host:8786)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = _parse(argv)
    params = {name: yaml.safe_load(value) for name, value in args.parameter}
    try:
        payload = run_notebook(args.notebook, params, args.out, progress=not args.no_progress,
                               timeout=args.timeout, scheduler=args.scheduler)
    except (ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    out = Path(payload["notebook"]).stem
    print(f"ran {out} in {payload['seconds']} s; {len(payload['results'])} recorded values in "
          f"{Path(args.out or Path('_build/runs') / out) / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
