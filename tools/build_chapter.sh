#!/usr/bin/env bash
# Preview one or more chapters: build a throwaway book holding only them (plus the references
# page, and with the guide the notation and API pages it links to) with the repository's
# configuration, failing on any warning or execution error exactly as `make book` does.
# Usage: tools/build_chapter.sh notebooks/08-adaptive-sampling.md [...]
# The HTML lands in _build/preview/_build/html/ (or $PREVIEW_DIR/_build/html/, so that two previews
# can be built at once).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out="${PREVIEW_DIR:-$repo/_build/preview}"
rm -rf "$out"
mkdir -p "$out/notebooks" "$out/book"
cp "$repo/_config.yml" "$out/"
cp -r "$repo/_static" "$out/_static"
cp "$repo/book/references.bib" "$repo/book/references.md" "$repo/book/notation.md" "$repo/book/api.md" "$out/book/"
printf '# Preview\n\nA preview build of selected chapters.\n' > "$out/index.md"
{
  echo "format: jb-book"
  echo "root: index"
  echo "chapters:"
  for nb in "$@"; do
    cp "$repo/$nb" "$out/notebooks/"
    echo "  - file: notebooks/$(basename "${nb%.md}")"
  done
  # the guide links to the notation and API pages, which link back to it: both come with the guide only
  case " $* " in *guide-correcting-your-evaluation*)
    echo "  - file: book/notation"
    echo "  - file: book/api";;
  esac
  echo "  - file: book/references"
} > "$out/_toc.yml"
PATH="$repo/.venv/bin:$PATH" bash "$repo/tools/build_book.sh" "$out"
echo "preview: $out/_build/html/index.html"
