"""Rerun a chapter with other parameters.

Usage::

    python -m itemsampling.run notebooks/01-sampled-metrics-inconsistent.md -p n_repeats 200 --out runs/ch1
    python -m itemsampling.run 7 -p sample_size 500          # a chapter by its number
    python -m itemsampling.run --list-params 6                # each parameter, its default and comment

The MyST notebook is converted with jupytext and executed with papermill: its cell tagged
``parameters`` holds the defaults, and ``-p NAME VALUE`` overrides them, VALUE parsed as YAML
(``-p sample_sizes "[50, 100]"`` gives a list). Every override is checked against the type of its
default before the kernel starts (an int where the default is an int, ``true``/``false`` where it
is a bool, a list of numbers where it is a list of numbers, ...); a relative path given for a
``dataset`` parameter is taken relative to the current folder.

The run writes into ``OUT`` (default ``_build/runs/<notebook>``):

* ``<name>.ipynb`` — the executed notebook;
* ``<name>.html`` — the executed notebook rendered as a one-page Jupyter Book with the
  repository's ``_config.yml`` and execution off, so every glued number is filled in (its
  assets in ``_static/``, ``_images/`` and ``book/`` beside it; ``--no-html`` skips it);
* ``results.json`` — every value recorded with :func:`itemsampling.book.record`, the full
  parameter set (defaults included), the overrides, the package version, the git commit (and
  whether the working tree had changes), the datasets used (files with sizes and SHA-256 digests),
  the Dask cluster given by ``--scheduler`` (address, workers, threads) and the run time. It is replaced atomically and only by a run that succeeded: a failing run
  leaves the previous ``results.json``, ``.ipynb`` and ``.html`` in place and writes its partial
  records and the error to ``results.failed.json`` and its notebook to ``<name>.failed.ipynb``.

Progress bars of long cells (tqdm, written to the kernel's stderr) are passed to the terminal;
warnings from the cells and the kernel's own log lines are not (the kernel's stderr goes to
``OUT/kernel.log``; the warnings stay in the executed notebook).
"""

from __future__ import annotations

import argparse
import ast
import datetime as _dt
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tokenize
from dataclasses import dataclass
from pathlib import Path

import yaml

from ._parallel import SCHEDULER_ENV as _SCHEDULER_ENV
from ._parallel import cluster_info
from ._validation import check_int
from .inputs import int_argument
from ._version import __version__
from .book import RESULTS_ENV

SCHEDULER_ENV = _SCHEDULER_ENV  # read by itemsampling.experiments.run_experiment and _parallel.parallel_map
#: How a chapter's kernel is stopped after its last cell (nbclient's ``shutdown_kernel``): ``"immediate"`` kills
#: its process group (the kernel and the worker processes it started) instead of asking it to exit and waiting
#: while its interpreter tears down. Nothing of the run is lost: every record is written when ``book.record``
#: is called, and the outputs are in the executed notebook. Measured on a chapter of the chapters' imports only
#: (``benchmarks/chapter_overhead.py``, idle machine): 2.84-3.41 s a run graceful, 2.43-2.54 s immediate; the
#: book's pre-execution stops its kernels the same way.
KERNEL_SHUTDOWN = "immediate"

__all__ = ["Parameter", "notebook_parameters", "check_parameters", "resolve_notebook", "render_html",
           "run_notebook", "main", "SCHEDULER_ENV", "KERNEL_SHUTDOWN"]

_REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------------------
# the parameters cell
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Parameter:
    """One name assigned in a notebook's ``parameters`` cell: its default (the literal value, or
    ``None`` with ``literal=False`` when the default is an expression), the default's source text
    and the comment that documents it (the comment on its line, else the comment line above)."""

    name: str
    default: object
    source: str
    comment: str
    literal: bool = True


def _parameters_cell(nb):
    cells = [c for c in nb.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]
    return cells[0].source if cells else None


def _parse_parameters(source: str, where: str) -> dict[str, Parameter]:
    try:
        body = ast.parse(source).body
    except SyntaxError as exc:
        raise ValueError(f"{where}: the parameters cell does not parse: {exc}") from None
    lines = source.splitlines()
    comments: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
    out: dict[str, Parameter] = {}
    for node in body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        inline = [comments[ln] for ln in range(node.lineno, node.end_lineno + 1)
                  if ln in comments and lines[ln - 1].lstrip()[:1] != "#"]
        # the comment line right above documents the name, unless it is the cell's opening line
        above = comments.get(node.lineno - 1) if node.lineno > 2 and lines[node.lineno - 2].lstrip().startswith("#") else None
        comment = " ".join(inline) if inline else (above or "")
        pairs = []
        for t in targets:
            if isinstance(t, ast.Name):
                pairs.append((t.id, node.value))
            elif isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple) and len(t.elts) == len(node.value.elts):
                pairs.extend((e.id, v) for e, v in zip(t.elts, node.value.elts) if isinstance(e, ast.Name))
        for name, value in pairs:
            text = ast.get_source_segment(source, value) or ""
            try:
                default, literal = ast.literal_eval(value), True
            except ValueError:
                default, literal = None, False
            out[name] = Parameter(name, default, text, comment, literal)
    return out


def notebook_parameters(notebook) -> dict[str, Parameter]:
    """The parameters a chapter declares: ``{name: Parameter}`` in the order of its cell tagged
    ``parameters`` (empty when it has none)."""
    import jupytext

    notebook = resolve_notebook(notebook)
    source = _parameters_cell(jupytext.read(notebook))
    return {} if source is None else _parse_parameters(source, notebook.name)


def resolve_notebook(chapter) -> Path:
    """A notebook path, or a chapter number (``6``, ``"06"``) looked up as ``notebooks/06-*.md``
    in the repository."""
    if not isinstance(chapter, (str, int, os.PathLike)) or isinstance(chapter, bool):
        raise ValueError(f"notebook must be a path to a chapter's .md or .ipynb, or a chapter number, got "
                         f"{type(chapter).__name__} {chapter!r:.60}")
    p = Path(str(chapter))
    if p.is_dir():
        raise ValueError(f"notebook {chapter} is a folder: give a chapter's .md or .ipynb file, or its number")
    if p.exists():
        return p.resolve()
    if re.fullmatch(r"\d{1,2}", str(chapter).strip()):
        for root in (Path.cwd(), _REPO):
            hits = sorted((root / "notebooks").glob(f"{int(chapter):02d}-*.md"))
            if hits:
                return hits[0].resolve()
        raise ValueError(f"no chapter {chapter}: no notebooks/{int(chapter):02d}-*.md under {Path.cwd()} or {_REPO}")
    raise ValueError(f"notebook {chapter} does not exist (give a path to a chapter's .md or a chapter number)")


def _kind(value) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, dict):
        return "dict"
    return type(value).__name__


_WORDS = {"bool": "true or false", "int": "an integer", "float": "a number", "str": "a string",
          "list": "a list", "dict": "a mapping"}
_PLURAL = {"bool": "true/false values", "int": "integers", "float": "numbers", "str": "strings",
           "list": "lists", "dict": "mappings"}


def _fits(value, kind: str) -> bool:
    got = _kind(value)
    return got == kind or (kind == "float" and got == "int")


def check_parameters(parameters: dict, declared: dict[str, Parameter], where: str = "the notebook") -> dict:
    """Check overrides against the declared parameters: unknown names are refused, and every value
    must have the type of its default (a bool for a bool, an int for an int, a number for a float,
    a string for a string, a list for a list with elements of the default's element type, a
    mapping for a mapping; a default of ``None`` or an expression accepts anything). Returns the
    overrides with ints converted to float where the default is a float. Raises ``ValueError``
    naming the parameter, its default and the value given."""
    if parameters and not declared:
        raise ValueError(f"{where} has no cell tagged 'parameters'")
    unknown = sorted(set(parameters) - set(declared))
    if unknown:
        raise ValueError(f"unknown parameter(s) {unknown} for {where}; allowed: {sorted(declared)}")
    out = {}
    for name, value in parameters.items():
        p = declared[name]
        if not p.literal or p.default is None:
            out[name] = value
            continue
        kind = _kind(p.default)
        if not _fits(value, kind):
            raise ValueError(f"parameter {name} must be {_WORDS.get(kind, kind)} like its default {p.source}, "
                             f"got {value!r} ({_kind(value)})")
        if kind == "list":
            kinds = {_kind(x) for x in p.default}
            if len(kinds) == 1:
                (elem,) = kinds
                bad = [x for x in value if not _fits(x, elem)]
                if bad:
                    raise ValueError(f"parameter {name} must be a list of {_PLURAL.get(elem, elem)} like its default "
                                     f"{p.source}, got {value!r} (element {bad[0]!r} is {_kind(bad[0])})")
                if elem == "float":
                    value = [float(x) for x in value]
            value = list(value)
        elif kind == "float":
            value = float(value)
        out[name] = value
    return out


# ---------------------------------------------------------------------------------------------
# provenance
# ---------------------------------------------------------------------------------------------
def _git(folder: Path) -> dict | None:
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True, timeout=20)
        if head.returncode != 0:
            return None
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=folder,
                                capture_output=True, text=True, timeout=20)
        return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return None


def _is_dataset_name(name: str) -> bool:
    return name == "dataset" or name.endswith("_dataset") or name.endswith("datasets")


def _datasets(params: dict) -> dict:
    """Each dataset parameter's value, and for a folder dataset the files read with their sizes
    and SHA-256 digests."""
    out = {}
    for name, value in params.items():
        if not _is_dataset_name(name):
            continue
        values = value if isinstance(value, list) else [value]
        entries = []
        for v in values:
            entry = {"value": v}
            try:
                # deferred: the experiments load pandas and the models; only --list-params of a dataset needs them
                from .experiments import _check_dataset, dataset_files, describe_dataset

                key = _check_dataset(v)
                entry["description"] = describe_dataset(key)
                files = dataset_files(key)
                entry["kind"] = "folder" if files else "simulated"
                if files:
                    entry["path"] = key
                    entry["files"] = [{"name": f.name, "bytes": f.stat().st_size, "sha256": _sha256(f)} for f in files]
            except (ValueError, TypeError):
                entry["kind"] = "other"  # e.g. a chapter's "synthetic"
            entries.append(entry)
        out[name] = entries if isinstance(value, list) else entries[0]
    return out


def _sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _resolve_dataset_paths(params: dict) -> dict:
    """A dataset given as a relative path that exists from the current folder becomes absolute
    (the notebook runs in its own folder)."""
    # deferred: the data package loads pandas; a run without a dataset parameter does without it
    from .data import DATASETS

    out = dict(params)
    for name, value in params.items():
        if _is_dataset_name(name) and isinstance(value, str) and value not in DATASETS and Path(value).exists():
            out[name] = str(Path(value).resolve())
    return out


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _atomic_write_json(path: Path, payload) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(payload, fh, indent=1, sort_keys=True)
        # mkstemp creates the file 0600: give it the mode of the run's other outputs (0644 under
        # the usual umask 022)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ---------------------------------------------------------------------------------------------
# terminal: progress through, warnings out
# ---------------------------------------------------------------------------------------------
_WARNING = re.compile(r"(^|\n)\S[^\n]*:\d+: \w*Warning: ")


class _ProgressOnly:
    """Receives the cells' stderr (papermill's ``stderr_file``): passes progress bars and other
    text on to ``stream``, drops Python warnings (``file:line: XWarning: message`` and the source
    line that follows)."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        if text and not _WARNING.search(text):
            self.stream.write(text)
            self.stream.flush()
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


class _KernelStderr:
    """Redirect file descriptor 2 to ``log`` while the kernel runs (the kernel inherits it, so its
    own log lines land there), keeping ``sys.stderr`` pointed at the terminal."""

    def __init__(self, log: Path):
        self.log = log

    def __enter__(self):
        sys.stderr.flush()
        self.saved_fd = os.dup(2)
        self.log_fh = open(self.log, "wb")
        os.dup2(self.log_fh.fileno(), 2)
        self.saved_stream = sys.stderr
        self.terminal = io.TextIOWrapper(os.fdopen(os.dup(self.saved_fd), "wb", buffering=0), write_through=True,
                                         encoding=getattr(sys.stderr, "encoding", None) or "utf-8", errors="replace")
        sys.stderr = self.terminal
        return self.terminal

    def __exit__(self, *exc):
        try:
            self.terminal.flush()
        finally:
            sys.stderr = self.saved_stream
            os.dup2(self.saved_fd, 2)
            os.close(self.saved_fd)
            self.log_fh.close()
            self.terminal.close()
        return False


# ---------------------------------------------------------------------------------------------
# rendering
# ---------------------------------------------------------------------------------------------
_ASSETS = ("_static", "_images", "_sphinx_design_static", "book", "_sources")  # _sources: the .ipynb download


def _build_book_here(book: Path) -> tuple[int, str]:
    """``jupyter-book build BOOK --quiet`` in this process (what :func:`render_html` runs in a child
    process with ``in_process=False``): its exit status and everything it printed. Sphinx keeps
    docutils' registries within the build (``docutils_namespace``); the working folder is the
    book's during the build, as for the child process, and restored after it."""
    import contextlib
    import traceback

    from jupyter_book.cli.main import main as jupyter_book

    log = io.StringIO()
    here = os.getcwd()
    try:
        os.chdir(book)
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            try:
                jupyter_book(["build", str(book), "--quiet"], standalone_mode=False)
                returncode = 0
            except SystemExit as exc:   # the command's sys.exit(status) after a failed build
                returncode = 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
            except Exception:           # a failed build raises (jupyter_book's _error)
                traceback.print_exc(file=log)
                returncode = 1
    finally:
        os.chdir(here)
    return returncode, log.getvalue()


def render_html(ipynb, out=None, repo=None, name: str | None = None, timeout: int = 600,
                in_process: bool = True) -> Path:
    """Render an executed notebook as one HTML page with its glued numbers filled in.

    Builds a throwaway Jupyter Book holding the notebook (as root page) and the references page,
    with ``repo``'s ``_config.yml`` (default: this repository's) and execution turned off, so the
    page shows the outputs and glued values of *this* run. Writes ``OUT/<name>.html`` (default
    ``OUT`` = the notebook's folder; ``name`` defaults to the notebook's stem) with the asset folders ``_static``, ``_images``,
    ``_sphinx_design_static``, ``book`` (the references page) and ``_sources`` (the notebook the page offers
    for download, its Markdown as plain Markdown) beside it, and returns the
    page's path. Raises ``RuntimeError`` with the end of the build log when the build fails.

    The book is built in this process (``in_process``, the default: Jupyter Book's and Sphinx's
    imports, several seconds, are paid once per process, not once per page) or, with
    ``in_process=False``, by ``jupyter-book build`` in a child process stopped after ``timeout``
    seconds; both write the same page (``tests/test_runner.py`` compares them byte for byte).
    """
    ipynb = Path(ipynb).resolve()
    out = Path(out).resolve() if out is not None else ipynb.parent
    repo = Path(repo).resolve() if repo is not None else _REPO
    config_file = repo / "_config.yml"
    if not config_file.exists():
        raise ValueError(f"render_html needs the book's configuration; {config_file} does not exist")
    config = yaml.safe_load(config_file.read_text())
    config.setdefault("execute", {})["execute_notebooks"] = "off"
    # a rerun's notebook is not in the repository: no Binder / Colab buttons pointing at it
    config.pop("launch_buttons", None)
    config["only_build_toc_files"] = True
    stem = name or ipynb.stem
    with tempfile.TemporaryDirectory(prefix=".render-", dir=out) as tmp:
        book = Path(tmp)
        (book / "book").mkdir()
        for name in ("references.bib", "references.md"):
            if (repo / "book" / name).exists():
                shutil.copy(repo / "book" / name, book / "book" / name)
        for static in config.get("sphinx", {}).get("config", {}).get("html_static_path", []):
            if (repo / static).is_dir():
                shutil.copytree(repo / static, book / static)
        (book / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        toc = {"format": "jb-book", "root": stem}
        if (book / "book" / "references.md").exists():
            toc["chapters"] = [{"file": "book/references"}]
        (book / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False))
        shutil.copy(ipynb, book / f"{stem}.ipynb")
        if in_process:
            returncode, log = _build_book_here(book)
        else:
            cmd = [sys.executable, "-c", "import sys; from jupyter_book.cli.main import main; sys.exit(main())",
                   "build", str(book), "--quiet"]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=book)
            returncode, log = proc.returncode, proc.stdout + proc.stderr
        html = book / "_build" / "html"
        page = html / f"{stem}.html"
        if returncode != 0 or not page.exists():
            raise RuntimeError(f"rendering {ipynb.name} as HTML failed:\n{log[-3000:]}")
        for name in _ASSETS:
            if (html / name).exists():
                shutil.rmtree(out / name, ignore_errors=True)
                shutil.copytree(html / name, out / name)
        os.replace(page, out / f"{stem}.html")
    return out / f"{stem}.html"


# ---------------------------------------------------------------------------------------------
# running
# ---------------------------------------------------------------------------------------------
def _package_version() -> str:
    return str(__version__)


def run_notebook(notebook, parameters: dict | None = None, out=None, progress: bool = True,
                 timeout: int | None = None, html: bool = False, scheduler: str | None = None) -> dict:
    """Execute a MyST notebook with ``parameters`` and return the run's record (what lands in
    ``OUT/results.json``).

    Parameters
    ----------
    notebook : path to a ``.md`` (MyST) or ``.ipynb`` notebook, or a chapter number.
    parameters : dict of overrides for names assigned in the cell tagged ``parameters``; each must
        have its default's type (see :func:`check_parameters`).
    out : output folder (default ``_build/runs/<notebook stem>``).
    progress : show papermill's cell progress bar and the cells' progress bars in the terminal.
    timeout : per-cell timeout in seconds, a positive integer (default: none).
    html : also render ``OUT/<name>.html`` (:func:`render_html`; the command line does by default).
    scheduler : address of a Dask scheduler; the chapter's repeated experiments
        (:func:`itemsampling.experiments.run_experiment`, Table 5 and the TORS-shaped catalogues
        of :mod:`itemsampling.catalogue`, the truth simulations of
        :func:`itemsampling.candidates.truth_experiment`: every caller of
        :func:`itemsampling._parallel.parallel_map`) then run on that cluster, with the same results
        for any number of workers; its address and worker count are recorded (``scheduler``).

    Returns
    -------
    dict
        Keys ``notebook``, ``parameters`` (all, defaults included), ``overrides``,
        ``package_version``, ``git``, ``datasets``, ``scheduler`` (``None``, or the cluster's
        ``address``, ``workers`` and ``threads`` when the run starts), ``started``, ``seconds``,
        ``html``, ``results``.

    Raises
    ------
    ValueError
        For an unknown parameter or a value of the wrong type (before any kernel starts).
    RuntimeError
        With the failing cell's error, when the notebook raises; a failing run leaves an earlier
        ``results.json`` untouched and writes ``results.failed.json``.
    """
    import jupytext
    import nbformat
    import papermill as pm

    if parameters is not None and not isinstance(parameters, dict):
        raise ValueError(f"parameters must be a dict of name -> value (e.g. {{'n_repeats': 10}}), got "
                         f"{type(parameters).__name__} {parameters!r:.60}")
    if timeout is not None:
        timeout = check_int(timeout, "timeout", low=1)
    notebook = resolve_notebook(notebook)
    if out is not None and Path(out).exists() and not Path(out).is_dir():
        raise ValueError(f"out {out} exists and is not a folder: give a folder for the run's outputs")
    nb = jupytext.read(notebook)
    source_cell = _parameters_cell(nb)
    declared = {} if source_cell is None else _parse_parameters(source_cell, notebook.name)
    overrides = check_parameters(_resolve_dataset_paths(dict(parameters or {})), declared, notebook.name)
    full = {name: (p.default if p.literal else p.source) for name, p in declared.items()}
    full.update(overrides)

    out = Path(out) if out is not None else Path("_build/runs") / notebook.stem
    out.mkdir(parents=True, exist_ok=True)
    out = out.resolve()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    stem = notebook.stem
    source = out / f"{stem}.input.ipynb"
    running = out / f"{stem}.running.ipynb"
    nbformat.write(nb, source)

    results_path = out / "results.json"
    partial = out / "results.partial.json"
    partial.unlink(missing_ok=True)
    old = os.environ.get(RESULTS_ENV)
    os.environ[RESULTS_ENV] = str(partial)
    # the cluster the chapter's experiments run on, as found before the kernel starts (an unreachable
    # scheduler is refused here, not in the middle of the chapter)
    cluster = None if scheduler is None else cluster_info(scheduler)
    old_scheduler = os.environ.pop(SCHEDULER_ENV, None)
    if scheduler is not None:
        os.environ[SCHEDULER_ENV] = cluster["address"]
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    start = time.perf_counter()
    payload = {"notebook": str(notebook), "parameters": full, "overrides": overrides,
               "package_version": _package_version(), "git": _git(notebook.parent),
               "datasets": _datasets(full), "scheduler": cluster, "started": started}
    error = None
    page = None
    try:
        # papermill re-reads the parameters cell with its own parser, which misreads comments that hold
        # an "=" and then warns about "unknown" parameters; the runner has already parsed and checked
        # the cell (notebook_parameters, check_parameters), so only papermill's errors are shown
        import logging

        for name in ("papermill.translators", "papermill.execute", "papermill"):
            logging.getLogger(name).setLevel(logging.ERROR)
        with _KernelStderr(out / "kernel.log") as terminal:
            # the kernel is killed once its last cell is done (KERNEL_SHUTDOWN: its records and outputs are in)
            pm.execute_notebook(
                str(source), str(running), parameters=overrides, progress_bar=progress,
                kernel_name="python3", cwd=str(notebook.parent), execution_timeout=timeout,
                stderr_file=_ProgressOnly(terminal) if progress else None, shutdown_kernel=KERNEL_SHUTDOWN,
            )
        if html:
            page = render_html(running, out, name=stem)
    except pm.PapermillExecutionError as exc:
        error = f"{notebook.name} failed in cell {exc.exec_count}: {exc.ename}: {exc.evalue}"
    except Exception as exc:  # a dead kernel, a timeout, a failed rendering
        log = (out / "kernel.log").read_text(errors="replace")[-2000:] if (out / "kernel.log").exists() else ""
        error = f"{notebook.name} failed: {type(exc).__name__}: {exc}" + (f"\nkernel log:\n{log}" if log.strip() else "")
    finally:
        if old is None:
            os.environ.pop(RESULTS_ENV, None)
        else:
            os.environ[RESULTS_ENV] = old
        os.environ.pop(SCHEDULER_ENV, None)
        if old_scheduler is not None:
            os.environ[SCHEDULER_ENV] = old_scheduler
        source.unlink(missing_ok=True)
    payload["seconds"] = round(time.perf_counter() - start, 2)
    payload["results"] = json.loads(partial.read_text()) if partial.exists() else {}
    partial.unlink(missing_ok=True)
    if error is not None:
        payload["error"] = error
        if running.exists():
            os.replace(running, out / f"{stem}.failed.ipynb")
        _atomic_write_json(out / "results.failed.json", payload)
        raise RuntimeError(error + f"\n(partial records in {out / 'results.failed.json'}; "
                           f"earlier results, if any, left in {results_path})")
    os.replace(running, out / f"{stem}.ipynb")
    payload["html"] = None if page is None else page.name
    _atomic_write_json(results_path, payload)
    (out / "results.failed.json").unlink(missing_ok=True)
    (out / f"{stem}.failed.ipynb").unlink(missing_ok=True)
    return payload


# ---------------------------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------------------------
def _positive_seconds(text: str) -> int:
    return int_argument(text, 1, "a positive whole number of seconds")


def _parse(argv=None):
    p = argparse.ArgumentParser(prog="python -m itemsampling.run", description=__doc__.split("\n\n")[0])
    p.add_argument("notebook", nargs="?", help="a chapter's MyST .md notebook, or its number")
    p.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                   help="override a parameter; VALUE is parsed as YAML (numbers, lists, strings, true/false)")
    p.add_argument("--out", default=None, help="output folder (default _build/runs/<notebook>)")
    p.add_argument("--timeout", type=_positive_seconds, default=None, help="per-cell timeout in seconds (> 0)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run the chapter's repeated experiments on the Dask cluster at ADDRESS (tcp://host:8786)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    p.add_argument("--no-html", action="store_true", help="do not render the rerun as an HTML page")
    p.add_argument("--list-params", metavar="CHAPTER", default=None,
                   help="print each parameter of CHAPTER (a notebook or a number) with its default and comment")
    return p, p.parse_args(argv)


def _list_params(chapter) -> str:
    params = notebook_parameters(chapter)
    if not params:
        return f"{resolve_notebook(chapter).name} has no parameters"
    width = max(len(n) for n in params)
    shown = {n: " ".join(p.source.split()) for n, p in params.items()}
    dwidth = min(40, max(len(v) for v in shown.values()))
    lines = [f"parameters of {resolve_notebook(chapter).name}:"]
    for p in params.values():
        lines.append(f"  {p.name:<{width}}  {shown[p.name]:<{dwidth}}  {('# ' + p.comment) if p.comment else ''}".rstrip())
    return "\n".join(lines)


def main(argv=None) -> int:
    parser, args = _parse(argv)
    try:
        if args.list_params is not None:
            print(_list_params(args.list_params))
            return 0
        if args.notebook is None:
            parser.error("give a notebook (or --list-params CHAPTER)")
        params = {}
        for name, value in args.parameter:
            try:
                params[name] = yaml.safe_load(value)
            except yaml.YAMLError as exc:
                raise ValueError(f"parameter {name}: cannot parse {value!r}: {exc}") from None
        payload = run_notebook(args.notebook, params, args.out, progress=not args.no_progress,
                               timeout=args.timeout, html=not args.no_html, scheduler=args.scheduler)
    except (ValueError, RuntimeError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    out = Path(args.out) if args.out else Path("_build/runs") / Path(payload["notebook"]).stem
    page = f"; page {out / payload['html']}" if payload.get("html") else ""
    print(f"ran {Path(payload['notebook']).stem} in {payload['seconds']} s; {len(payload['results'])} recorded "
          f"values in {out / 'results.json'}{page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
