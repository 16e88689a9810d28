#!/usr/bin/env python
"""Write the classroom notebooks of every chapter (``make exercises``).

For each MyST chapter ``notebooks/NN-*.md`` (or the chapters named on the command line) this
writes ``_build/exercises/student/NN-*.ipynb``, with every solution cell replaced by the stub
``answer_NN_k = ...  # your answer``, and ``_build/exercises/teacher/NN-*.ipynb``, with the
solutions between nbgrader's ``### BEGIN SOLUTION`` / ``### END SOLUTION`` markers. Both carry
nbgrader's cell metadata (solution cells and autograded check cells), so the teacher version can
be put in an nbgrader course's ``source/`` folder as it is. Nothing is maintained twice: both
come from the chapter's MyST source (``itemsampling.exercises.classroom_notebook``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from itemsampling.exercises import write_classroom_notebooks  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="MyST chapters (default: every notebooks/NN-*.md)")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "exercises",
                        help="output folder (default: _build/exercises)")
    args = parser.parse_args(argv)
    chapters = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.md"))
    if not chapters:
        parser.error("no chapters found")
    for chapter in chapters:
        try:
            paths = write_classroom_notebooks([chapter], args.out)
        except ValueError as err:
            print(f"make exercises: {chapter}: {err}", file=sys.stderr)
            return 1
        print(f"{chapter.name}: " + ", ".join(str(p.relative_to(args.out)) for p in paths))
    print(f"exercises: student and teacher notebooks in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
