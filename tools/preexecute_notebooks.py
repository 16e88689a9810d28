"""Execute the book's notebooks in parallel into a fresh jupyter-cache, before Sphinx runs.

``tools/build_book.sh`` calls this script first; Sphinx then runs with MyST-NB in ``cache`` mode
on the cache written here, so MyST-NB executes no notebook itself: it merges the outputs executed
here into each page (glue, figures, stderr removal work as before). The cache is emptied at the
start of every build, so every notebook is still executed from scratch on every build; the
parallelism is the only change. Usage::

    python tools/preexecute_notebooks.py BOOK [--jobs 2] [--config-out FILE]
    python tools/preexecute_notebooks.py BOOK --verify

- Which notebooks: every page of ``BOOK/_toc.yml`` that MyST-NB reads as a notebook (a MyST
  Markdown notebook or an ``.ipynb``), read by MyST-NB's own reader with the book's MyST and
  MyST-NB settings (``jupyter_book.config.get_final_config``), so the notebook hashed here is the
  one MyST-NB hashes when it looks the page up in the cache (jupyter-cache 1.0.1: code cells'
  source and metadata, and the kernelspec). Notebooks MyST-NB would not execute (its
  ``execution_excludepatterns``, a notebook's own ``execution_mode``) are left to it.
- How: ``--jobs`` worker processes (default 2), each running one notebook at a time with
  jupyter-cache's ``single_nb_execution`` (what MyST-NB calls), with the book's timeout,
  ``allow_errors`` and working folder (the notebook's own folder unless ``run_in_temp``).
  The notebooks are handed out longest first (:func:`schedule`), by the seconds each took in the
  previous build (``_build/notebook-seconds.json``, written at the end of every build) or, on a
  fresh clone, by :data:`DEFAULT_SECONDS`; a notebook with no estimate goes first.
- A failing notebook: every other notebook still runs (as ``--keep-going``); then each failure is
  printed with its chapter, the error and the traceback, the traceback is kept where MyST-NB keeps
  it (``_build/html/reports/<page>.err.log``), nothing of it is cached, and the exit status is 1.
- ``--config-out FILE`` writes the book's ``_config.yml`` with ``execute_notebooks: cache`` and
  ``cache:`` this cache: the configuration ``tools/build_book.sh`` gives ``jupyter-book build``.
  ``_config.yml`` itself keeps ``force``, so a plain ``jupyter-book build .`` still executes
  every notebook itself (one after another) and never reads a stale cache.
- ``--verify`` (after Sphinx): exit 1 if MyST-NB executed a notebook itself (it adds a project
  record to the cache whenever it does), i.e. a page did not find its outputs here.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import dataclasses as dc
import json
import multiprocessing
import os
import shutil
import sys
import time
import traceback
from pathlib import Path

#: Seconds each notebook took in the book build on 2 cores (November 2026, one after another):
#: the order of the first build of a fresh clone. Later builds use their own measurements
#: (``_build/notebook-seconds.json``).
DEFAULT_SECONDS = {
    "notebooks/08-adaptive-sampling": 429,
    "notebooks/10-candidate-sets": 237,
    "notebooks/09-user-sampling": 129,
    "notebooks/06-learning-rank-distribution": 118,
    "notebooks/11-popularity-sampled-evaluations": 116,
    "notebooks/guide-correcting-your-evaluation": 97,
    "notebooks/guide-evaluate-your-model": 45,
    "notebooks/03-models-and-rank-distributions": 92,
    "notebooks/07-bv-vs-mn": 85,
    "notebooks/04-mapping-functions": 43,
    "notebooks/02-sampling-theorem": 28,
    "notebooks/01-sampled-metrics-inconsistent": 15,
    "notebooks/05-correcting-sampled-metrics": 13,
}
CACHE_DIR = Path("_build") / ".jupyter_cache"          # MyST-NB's default, under the book
SECONDS_FILE = Path("_build") / "notebook-seconds.json"
REPORTS_DIR = Path("_build") / "html" / "reports"       # where MyST-NB keeps execution tracebacks
#: variables the kernels must not inherit: ``book.record`` would write every chapter's numbers
#: into one results file from two processes at once (the book build records through glue only)
DROPPED_ENV = ("ITEMSAMPLING_RESULTS",)


@dc.dataclass
class Job:
    """One notebook to execute: its page name, source file, the notebook as MyST-NB reads it
    (unexecuted) and the execution settings MyST-NB would use for it."""

    docname: str
    path: Path
    notebook: object
    timeout: int | None
    allow_errors: bool
    in_temp: bool


@dc.dataclass
class Outcome:
    """What a worker sends back: the executed notebook, its seconds, and on failure the error's
    class name and traceback."""

    docname: str
    notebook: object
    seconds: float
    error: str | None = None
    traceback: str | None = None


def schedule(docnames, seconds) -> list[str]:
    """The order in which the notebooks are handed to the workers: longest first (a greedy
    longest-processing-time schedule: each free worker takes the longest notebook left, so the
    build takes about max(longest notebook, total / workers) rather than a bad static split).
    ``seconds`` maps a page name to its estimated seconds; a page without an estimate comes
    first (it may be the longest); ties keep the table of contents' order."""
    order = {name: i for i, name in enumerate(docnames)}
    if len(order) != len(docnames):
        raise ValueError("docnames must not repeat a page")
    for name, s in seconds.items():
        if not isinstance(s, (int, float)) or s != s or s < 0:
            raise ValueError(f"seconds[{name!r}] must be a non-negative number, got {s!r}")
    return sorted(docnames, key=lambda d: (d in seconds, -seconds.get(d, 0.0), order[d]))


def makespan(ordered, seconds, jobs: int) -> float:
    """Seconds the schedule takes when each of ``jobs`` workers takes the next notebook of
    ``ordered`` as soon as it is free and each takes ``seconds[name]`` (the prediction printed
    before a build; pages without an estimate count 0)."""
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise ValueError(f"jobs must be an integer >= 1, got {jobs!r}")
    free = [0.0] * jobs
    for name in ordered:
        i = min(range(jobs), key=free.__getitem__)
        free[i] += float(seconds.get(name, 0.0))
    return max(free)


def read_seconds(book: Path) -> dict:
    """The previous build's seconds per notebook (``_build/notebook-seconds.json``), over
    :data:`DEFAULT_SECONDS`; an unreadable file is ignored (it only orders the work)."""
    seconds = dict(DEFAULT_SECONDS)
    try:
        measured = json.loads((book / SECONDS_FILE).read_text())
    except (OSError, ValueError):
        return seconds
    if isinstance(measured, dict):
        seconds.update({k: float(v) for k, v in measured.items()
                        if isinstance(k, str) and isinstance(v, (int, float)) and v >= 0})
    return seconds


# --- reading the book as MyST-NB does --------------------------------------------------------------

def sphinx_config(book: Path, config: Path | None = None) -> dict:
    """The Sphinx configuration ``jupyter-book build`` makes of the book's ``_config.yml``."""
    from jupyter_book.config import get_final_config

    config = config or book / "_config.yml"
    values, _ = get_final_config(user_yaml=config, cli_config={"latex_individualpages": False},
                                 sourcedir=book)
    return values


def parser_configs(values: dict):
    """MyST's and MyST-NB's parser settings from the Sphinx configuration, field by field as their
    Sphinx extensions build them (``myst_<name>``, ``nb_<name>``; defaults for the rest)."""
    from myst_nb.core.config import NbParserConfig
    from myst_parser.config.main import MdParserConfig

    md = MdParserConfig(**{name: values[f"myst_{name}"] for name, _, field in MdParserConfig().as_triple()
                           if "sphinx" not in field.metadata.get("omit", []) and f"myst_{name}" in values})
    nb = NbParserConfig(**{name: values[f"nb_{name}"] for name, _, field in NbParserConfig().as_triple()
                           if not field.metadata.get("sphinx_exclude") and f"nb_{name}" in values})
    return md, nb


def toc_pages(book: Path) -> list[str]:
    """The page names of ``BOOK/_toc.yml``, in its order."""
    from sphinx_external_toc.parsing import parse_toc_yaml

    site = parse_toc_yaml(book / "_toc.yml")
    if site.globs():
        raise ValueError("tools/preexecute_notebooks.py does not expand glob entries of _toc.yml; list the files")
    return list(site)


def source_of(book: Path, docname: str, exclude, suffixes) -> Path | None:
    """The file Sphinx reads for ``docname``: the first of ``suffixes`` that exists and is not
    excluded by ``exclude_patterns``."""
    from sphinx.util.matching import Matcher

    excluded = Matcher(list(exclude))
    for suffix in suffixes:
        rel = f"{docname}{suffix}"
        if (book / rel).is_file() and not excluded(rel):
            return book / rel
    return None


def collect_jobs(book: Path, config: Path | None = None) -> list[Job]:
    """The notebooks MyST-NB would execute in this book, read as MyST-NB reads them."""
    from pathlib import PurePosixPath

    from myst_nb.core.read import create_nb_reader
    from myst_nb.core.nb_to_tokens import nb_node_to_dict
    import re

    values = sphinx_config(book, config)
    md_config, nb_config = parser_configs(values)
    suffixes = [".md", ".ipynb", ".rst", *[s for s in nb_config.custom_formats if s not in (".md", ".ipynb")]]
    jobs = []
    for docname in toc_pages(book):
        path = source_of(book, docname, values.get("exclude_patterns", []), suffixes)
        if path is None or path.suffix == ".rst":
            continue
        path = path.resolve()
        text = path.read_text(encoding="utf8")
        reader = create_nb_reader(str(path), md_config, nb_config, text)
        if reader is None:               # a plain Markdown page
            continue
        notebook = reader.read(text)
        kernel = notebook.metadata.get("kernelspec", {}).get("name", None)
        if kernel is not None and nb_config.kernel_rgx_aliases:
            for rgx, alias in nb_config.kernel_rgx_aliases.items():
                if re.fullmatch(rgx, kernel):
                    notebook.metadata["kernelspec"]["name"] = alias
                    break
        page_config = nb_config
        if nb_config.metadata_key in notebook.metadata:
            overrides = nb_node_to_dict(notebook.metadata[nb_config.metadata_key])
            overrides.pop("output_folder", None)
            if "execution_mode" in overrides:   # the notebook chose its own execution: MyST-NB's
                continue
            page_config = nb_config.copy(**overrides)
        posix = PurePosixPath(path.as_posix())
        if any(posix.match(p) for p in page_config.execution_excludepatterns):
            continue
        jobs.append(Job(docname, path, notebook, page_config.execution_timeout,
                        page_config.execution_allow_errors, page_config.execution_in_temp))
    return jobs


# --- execution ------------------------------------------------------------------------------------

def _drop_env() -> None:
    """In a worker, before any kernel starts: forget :data:`DROPPED_ENV`."""
    for name in DROPPED_ENV:
        os.environ.pop(name, None)


def execute(job: Job) -> Outcome:
    """Run one notebook as MyST-NB would (``single_nb_execution`` with its settings); in a worker."""
    import tempfile
    from contextlib import nullcontext

    from jupyter_cache.executors.utils import single_nb_execution

    start = time.perf_counter()
    try:
        context = tempfile.TemporaryDirectory() if job.in_temp else nullcontext(str(job.path.parent))
        with context as cwd:
            # the kernel killed after the last cell, as the runner stops it (itemsampling.run.KERNEL_SHUTDOWN)
            result = single_nb_execution(job.notebook, cwd=os.path.abspath(cwd), timeout=job.timeout,
                                         allow_errors=job.allow_errors, meta_override=True,
                                         shutdown_kernel="immediate")
    except Exception as exc:   # a dead kernel, a kernel that does not start: a failure too
        return Outcome(job.docname, job.notebook, time.perf_counter() - start,
                       type(exc).__name__, "".join(traceback.format_exc()))
    if result.err is not None:
        return Outcome(job.docname, result.nb, result.time, type(result.err).__name__, result.exc_string)
    return Outcome(job.docname, result.nb, result.time)


def _report(book: Path, outcome: Outcome, path: Path) -> Path:
    """Print a failure with its chapter and keep its traceback where MyST-NB keeps it."""
    report = book.joinpath(REPORTS_DIR, *(outcome.docname + ".err.log").split("/"))
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(outcome.traceback or outcome.error or "", encoding="utf8")
    print(f"Executing notebook failed: {outcome.error}\n{outcome.traceback}", file=sys.stderr)
    print(f"book: {outcome.docname} ({path}) failed to execute: {outcome.error}; "
          f"traceback saved in {report}", file=sys.stderr)
    return report


def preexecute(book: Path, jobs: int = 2, config: Path | None = None, out=sys.stdout) -> int:
    """Execute every notebook of ``book`` into a fresh cache with ``jobs`` workers, longest first.
    Returns 0 when all succeeded, 1 otherwise (failures printed and reported)."""
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise ValueError(f"jobs must be an integer >= 1, got {jobs!r}")
    book = Path(book).resolve()
    cache_dir = book / CACHE_DIR
    shutil.rmtree(cache_dir, ignore_errors=True)     # from scratch: nothing of an earlier build
    shutil.rmtree(book / REPORTS_DIR, ignore_errors=True)
    cache = get_cache(str(cache_dir))
    todo = {job.docname: job for job in collect_jobs(book, config)}
    seconds = read_seconds(book)
    order = schedule(list(todo), seconds)
    print(f"preexecute: {len(order)} notebooks on {jobs} workers, longest first "
          f"(predicted {makespan(order, seconds, jobs):.0f} s): {', '.join(Path(d).name for d in order)}",
          file=out, flush=True)
    failed, measured = [], {}
    start = time.perf_counter()
    with cf.ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                                initializer=_drop_env) as pool:
        # submitted in order; the pool hands the next one to whichever worker is free first
        futures = {pool.submit(execute, todo[d]): d for d in order}
        for future in cf.as_completed(futures):
            docname = futures[future]
            job = todo[docname]
            try:
                outcome = future.result()
            except Exception as exc:   # the worker process itself died
                outcome = Outcome(docname, job.notebook, 0.0, type(exc).__name__, "".join(traceback.format_exc()))
            if outcome.error is not None:
                failed.append(_report(book, outcome, job.path))
                continue
            measured[docname] = round(outcome.seconds, 1)
            cache.cache_notebook_bundle(
                CacheBundleIn(outcome.notebook, str(job.path), data={"execution_seconds": outcome.seconds}),
                check_validity=False, overwrite=True)
            cache.match_cache_notebook(job.notebook)   # MyST-NB's look-up finds it (KeyError otherwise)
            print(f"preexecute: {docname} executed in {outcome.seconds:.1f} s "
                  f"({time.perf_counter() - start:.0f} s since the start)", file=out, flush=True)
    try:   # keep the other pages' measurements (a preview book holds a few chapters)
        previous = json.loads((book / SECONDS_FILE).read_text())
        previous = previous if isinstance(previous, dict) else {}
    except (OSError, ValueError):
        previous = {}
    previous.update(measured)
    (book / SECONDS_FILE).parent.mkdir(parents=True, exist_ok=True)
    (book / SECONDS_FILE).write_text(json.dumps({k: previous[k] for k in sorted(previous)}, indent=1))
    print(f"preexecute: {len(measured)} of {len(order)} notebooks executed in "
          f"{time.perf_counter() - start:.0f} s", file=out, flush=True)
    if failed:
        print(f"book: {len(failed)} notebook(s) failed to execute (see the execution reports under "
              f"{book / REPORTS_DIR})", file=sys.stderr)
        return 1
    return 0


def verify(book: Path) -> list[str]:
    """The notebooks MyST-NB executed itself during the Sphinx build (in cache mode it adds a
    project record for each notebook it executes; the pre-execution adds none)."""
    from jupyter_cache import get_cache

    cache_dir = Path(book).resolve() / CACHE_DIR
    if not cache_dir.is_dir():
        raise ValueError(f"no cache at {cache_dir}: run the pre-execution first")
    return [record.uri for record in get_cache(str(cache_dir)).list_project_records()]


def write_config(book: Path, target: Path) -> Path:
    """``BOOK/_config.yml`` with MyST-NB in cache mode on this build's cache, and this module as a
    Sphinx extension (:func:`setup`), written to ``target``."""
    import yaml

    book = Path(book).resolve()
    config = yaml.safe_load((book / "_config.yml").read_text())
    execute_ = config.setdefault("execute", {})
    execute_["execute_notebooks"] = "cache"
    execute_["cache"] = str(book / CACHE_DIR)
    sphinx = config.setdefault("sphinx", {})
    sphinx.setdefault("local_extensions", {})[Path(__file__).stem] = str(Path(__file__).resolve().parent)
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("# written by tools/preexecute_notebooks.py from _config.yml for this build\n"
                      + yaml.safe_dump(config, sort_keys=False))
    return target


# --- the Sphinx side (cache mode) -----------------------------------------------------------------

def restore_outputs(app, env) -> None:
    """``env-updated``: put the cached outputs into the notebooks MyST-NB wrote to
    ``_build/jupyter_execute/``. In cache mode MyST-NB 1.4.0 renders the page from the cached
    notebook but writes the notebook it read, without outputs; in force mode it writes the executed
    one. ``itemsampling.handout`` offers that file for download, so it must hold the outputs, as
    with ``force``."""
    from jupyter_cache import get_cache

    config = env.mystnb_config
    if config.execution_mode != "cache":
        return
    cache = get_cache(config.execution_cache_path)
    folder = Path(config.output_folder)
    for docname in sorted(env.found_docs):
        path = folder.joinpath(*(docname + ".ipynb").split("/"))
        if path.is_file():
            restore_notebook(path, cache)


def restore_notebook(path: Path, cache) -> bool:
    """Merge the cached outputs into the notebook file ``path`` as MyST-NB does for the page
    (``merge_match_into_notebook``, then the glue outputs taken out of the cells, as MyST-NB's glue
    extraction does to the notebook it writes in force mode). False if the cache does not hold it
    (a notebook MyST-NB does not execute)."""
    import nbformat
    from myst_nb.ext.glue import extract_glue_data_cell

    notebook = nbformat.read(path, as_version=4)
    try:
        _, merged = cache.merge_match_into_notebook(notebook)
    except KeyError:
        return False
    for cell in merged.cells:
        if cell.cell_type == "code":
            extract_glue_data_cell(cell)
    path.write_text(nbformat.writes(merged), encoding="utf8")
    return True


def setup(app):
    """Sphinx extension (added by :func:`write_config` to the cache-mode configuration only)."""
    app.connect("env-updated", restore_outputs)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("book", type=Path, help="the book's folder (with _config.yml and _toc.yml)")
    parser.add_argument("--jobs", type=int, default=2, help="notebooks executed at once (default 2)")
    parser.add_argument("--config-out", type=Path, help="write the cache-mode configuration here")
    parser.add_argument("--verify", action="store_true",
                        help="after Sphinx: fail if MyST-NB executed a notebook itself")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be an integer >= 1, got {args.jobs}")
    if args.verify:
        executed = verify(args.book)
        for uri in executed:
            print(f"book: MyST-NB executed {uri} itself: its notebook did not match the pre-executed one "
                  "(tools/preexecute_notebooks.py)", file=sys.stderr)
        return 1 if executed else 0
    if args.config_out:
        write_config(args.book, args.config_out)
    return preexecute(args.book, args.jobs)


if __name__ == "__main__":
    sys.exit(main())
