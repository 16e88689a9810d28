#!/usr/bin/env python
"""Write the classroom notebooks of every chapter (``make exercises``).

For each MyST chapter ``notebooks/NN-*.md`` (or the chapters named on the command line) this
writes ``_build/exercises/student/NN-*.ipynb``, with every solution cell replaced by the stub
``answer_NN_k = ...  # your answer``, and ``_build/exercises/teacher/NN-*.ipynb``, with the
solutions between nbgrader's ``### BEGIN SOLUTION`` / ``### END SOLUTION`` markers. Both carry
nbgrader's cell metadata (solution cells and autograded check cells), so the teacher version can
be put in an nbgrader course's ``source/`` folder as it is. Nothing is maintained twice: both
come from the chapter's MyST source (``itemsampling.exercises.classroom_notebook``).

No check cell of either hands out an expected value: each checks the answer against the digest
of the expected value at the exercise's precision (``check_digest``), which the chapter's checks
glued when it was executed; the teacher version keeps the chapter's independent check below it,
between nbgrader's ``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS`` (stripped from the
release by ``nbgrader generate_assignment``, put back by ``nbgrader autograde``).

Their Markdown is plain Markdown: exercises titled "Exercise C.k", citations and cross-references
as text, and every glued number (and every check's digest) filled in from the executed chapter: the
book's execution (``_build/jupyter_execute/notebooks``, written by ``make book``), else a rerun's
(``_build/runs/<chapter>/``); a chapter executed by neither (or executed before its checks glued
digests) is run at its defaults first (``python -m itemsampling.run``, minutes), unless
``--no-run`` is given.
``--student-only`` writes only the student versions (what the book publishes) and ``--zip FILE``
packs the written student notebooks into one zip.
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from itemsampling.exercises import (  # noqa: E402
    check_labels, executed_chapter, glue_values, glued_digests, read_notebook, write_classroom_notebooks,
)


def _has_digests(chapter: Path, found: Path) -> bool:
    """Whether the executed chapter glued the digest of every check (a chapter executed before
    the checks glued them has none: it is rerun)."""
    labels = check_labels(read_notebook(chapter))
    return set(labels) <= set(glued_digests(glue_values(found)))


def _executed(chapter: Path, folders: list[Path], run: bool) -> Path | None:
    stale = None
    for folder in folders:
        found = executed_chapter(chapter, folder)
        if found is not None:
            if _has_digests(chapter, found):
                return found.parent
            stale = stale or found
    if not run:
        return None
    from itemsampling.run import run_notebook

    out = ROOT / "_build" / "runs" / chapter.stem
    why = f"{stale} has no digests of its checks" if stale else "no executed version"
    print(f"{chapter.name}: {why}; running it at its defaults into {out}", flush=True)
    run_notebook(chapter, {}, out, progress=True, html=False)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="MyST chapters (default: every notebooks/NN-*.md)")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "exercises",
                        help="output folder (default: _build/exercises)")
    parser.add_argument("--executed", type=Path, action="append", default=None,
                        help="folder of executed chapters to take glued values from (repeatable; default: "
                             "_build/jupyter_execute/notebooks, then _build/runs/<chapter>)")
    parser.add_argument("--no-run", action="store_true",
                        help="fail instead of running a chapter that has no executed version")
    parser.add_argument("--student-only", action="store_true", help="write the student notebooks only")
    parser.add_argument("--zip", type=Path, default=None, help="also pack the student notebooks into this zip")
    args = parser.parse_args(argv)
    chapters = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.md"))
    if not chapters:
        parser.error("no chapters found")
    folders = args.executed or [ROOT / "_build" / "jupyter_execute" / "notebooks", ROOT / "_build" / "runs"]
    versions = ("student",) if args.student_only else ("student", "teacher")
    students = []
    for chapter in chapters:
        try:
            executed = _executed(chapter, folders, run=not args.no_run)
            if executed is None:
                raise ValueError(f"no executed version with the digests of its checks in "
                                 f"{', '.join(map(str, folders))} (run `make book` or drop --no-run)")
            paths = write_classroom_notebooks([chapter], args.out, executed=executed, versions=versions)
        except (ValueError, RuntimeError) as err:
            print(f"make exercises: {chapter}: {err}", file=sys.stderr)
            return 1
        students += [p for p in paths if p.parent.name == "student"]
        print(f"{chapter.name}: " + ", ".join(str(p.relative_to(args.out)) for p in paths))
    if args.zip is not None:
        args.zip.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(args.zip, "w", zipfile.ZIP_DEFLATED) as z:
            for p in students:
                z.write(p, f"itemsampling-exercises/{p.name}")
        print(f"exercises: {len(students)} student notebooks zipped into {args.zip}")
    print(f"exercises: notebooks in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
