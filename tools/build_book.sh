#!/usr/bin/env bash
# Build the Jupyter Book rooted at $1 (default: the repository root) from a clean state and fail
# on any warning or notebook execution error. `jupyter-book build` can exit 0 after a notebook
# failed, so the log and the execution reports are checked as well.
#
# The notebooks run in parallel before Sphinx (tools/preexecute_notebooks.py): $BOOK_JOBS
# notebooks at once (default 2), longest first, each executed from scratch into a jupyter-cache
# that is emptied at the start of every build (_build/.jupyter_cache). Sphinx then runs with
# MyST-NB in cache mode on that cache (the configuration _build/_config.cache.yml, which is
# _config.yml with `execute_notebooks: cache`), so it merges the outputs executed a moment ago into
# the pages and executes nothing itself; afterwards `--verify` fails the build if it did execute a
# notebook (one whose outputs it did not find). "From scratch" thus still means: every notebook
# executed on every build, against the sources of this checkout; nothing of an earlier build is
# read. A notebook that fails in the pre-execution fails the build before Sphinx runs: the chapter
# is named, its traceback printed and kept in _build/html/reports/<page>.err.log; the other
# notebooks still run, so one build lists every failure.
set -euo pipefail
root=${1:-.}
jb=${JUPYTER_BOOK:-jupyter-book}
cd "$root"
tools=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# the Python that runs jupyter-book runs the pre-execution (same kernels, same packages)
jb_path=$(command -v "$jb" || true)
py=${PYTHON:-}
if [ -z "$py" ]; then
  if [ -n "$jb_path" ] && [ -x "$(dirname "$jb_path")/python" ]; then py="$(dirname "$jb_path")/python"; else py=python3; fi
fi
rm -rf _build/.doctrees _build/html _build/jupyter_execute _build/.jupyter_cache _build/_config.cache.yml
log=$(mktemp)
status=0
start=$(date +%s)
"$py" "$tools/preexecute_notebooks.py" . --jobs "${BOOK_JOBS:-2}" --config-out _build/_config.cache.yml 2>&1 | tee "$log" || status=$?
if [ "$status" -ne 0 ]; then
  echo "book: a notebook failed to execute (see the execution reports under _build/html/reports)" >&2
  ls -R _build/html/reports >&2 2>/dev/null || true
  rm -f "$log"
  exit 1
fi
echo "book: notebooks executed in $(( $(date +%s) - start )) s; building the pages"
"$jb" build . -W --keep-going --config _build/_config.cache.yml 2>&1 | tee -a "$log" || status=$?
if ! "$py" "$tools/preexecute_notebooks.py" . --verify; then
  status=1
fi
echo "book: built in $(( $(date +%s) - start )) s"
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
