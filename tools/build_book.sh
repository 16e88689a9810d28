#!/usr/bin/env bash
# Build the Jupyter Book rooted at $1 (default: the repository root) from a clean state and fail
# on any warning or notebook execution error. `jupyter-book build` can exit 0 after a notebook
# failed, so the log and the execution reports are checked as well.
set -euo pipefail
root=${1:-.}
jb=${JUPYTER_BOOK:-jupyter-book}
cd "$root"
rm -rf _build/.doctrees _build/html _build/jupyter_execute
log=$(mktemp)
status=0
"$jb" build . -W --keep-going 2>&1 | tee "$log" || status=$?
if grep -Eq "Executing notebook failed|Notebook exception|Traceback|CellExecutionError|execution failed" "$log"; then
  echo "book: a notebook failed to execute (see the execution reports under _build/html/reports)" >&2
  status=1
fi
if [ -d _build/html/reports ] && [ -n "$(ls -A _build/html/reports 2>/dev/null)" ]; then
  echo "book: execution reports were written:" >&2
  ls _build/html/reports >&2
  status=1
fi
if [ ! -f _build/html/index.html ]; then
  echo "book: _build/html/index.html is missing" >&2
  status=1
fi
# the student notebooks the teaching page links (written by itemsampling.handout at the end of the build)
if [ -f _build/html/index.html ] && [ ! -f _build/html/exercises/itemsampling-student-notebooks.zip ]; then
  echo "book: the student notebooks (_build/html/exercises/) were not written" >&2
  status=1
fi
rm -f "$log"
exit $status
