# `make book` builds the book, `make test` runs the tests, `make exercises` writes the student and
# teacher notebooks of every chapter into _build/exercises/.
# Both create the virtual environment in .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
UV_VERSION := 0.13.8

.PHONY: book test bench clean env exercises

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip uv==$(UV_VERSION)
	# uv installs the pinned requirements in seconds (pip: about a minute); pip again where uv fails. The
	# bytecode is compiled here, as pip does: where PYTHONDONTWRITEBYTECODE is set, no process caches it
	# and every import would compile its sources again (imports 2.5x slower)
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -r requirements.txt \
	  || $(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	$(BIN)/python -m compileall -q src  # the package's own bytecode (a changed source is compiled afresh)
	touch $(STAMP)

env: $(STAMP)

book: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" bash tools/build_book.sh .
	@echo "book: open _build/html/index.html"

exercises: $(STAMP)
	$(BIN)/python tools/make_exercises.py --out _build/exercises

# pytest-xdist: one worker per core (tests/conftest.py keeps a file's shared fixtures on one worker and
# starts the longest files first); TEST_WORKERS=0 runs everything in this process
TEST_WORKERS ?= auto

test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS)

bench: $(STAMP)
	$(BIN)/python -m pytest -q benchmarks --benchmark-only -p no:cacheprovider

clean:
	rm -rf _build data/cache
