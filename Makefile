# Entry points for a fresh machine (Python 3.11+, Java 17 for Spark):
#   make scan                      set up, generate ticks, scan them on local Spark, draw out/matches.png
#   make test                      set up and run the test suite (TEST_WORKERS=1 for one process)
#   make example NAME=paper_query3 run one of examples/ (ARGS="--spark --events 100000" passes options)
#   make dist                      dist/colcep-<version>.zip, to ship colcep to Spark executors (--py-files)
#   make kernels                   the kernels compiled for any CPU into colcep/prebuilt/ (after editing a kernel)
#   make docs                      the documentation site from docs/ into site/ (strict: a broken link fails it)
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
# The set-up installs with uv (from PyPI, into the venv): it downloads in parallel, ~30 s on a
# fresh machine where pip took 50 s to 3 min. pip stays in the venv for the user's own installs.
# --compile-bytecode: pip writes every module's .pyc at install, uv only when asked; without them
# (and PYTHONDONTWRITEBYTECODE set, as here) every process imports numpy, pandas, pyarrow, numba and
# pyspark from source: colcep's import took 1.37 s instead of 0.57, the test run ~4 min longer.
# The Numba that colcep/prebuilt/'s kernels were compiled with (make kernels): set up with it, a
# fresh machine loads them instead of compiling them for a minute and a half (colcep.engine.shipped)
NUMBA_SHIPPED := $(shell ls colcep/prebuilt 2>/dev/null | sed -n 's/^numba\([0-9.]*\)-.*/\1/p' | head -n 1)
# Test processes (pytest-xdist): one per core by default
TEST_WORKERS ?= auto
EXAMPLES = $(filter-out _%,$(basename $(notdir $(wildcard examples/*.py))))

$(VENV)/.installed: pyproject.toml
	@echo "make: setting up $(VENV) (numpy, numba, pyarrow, pyspark, matplotlib, test tools; a minute or two the first time) ..."
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet uv
	$(PY) -m uv pip install --quiet --compile-bytecode --python $(PY) -e ".[dev]" $(if $(NUMBA_SHIPPED),"numba==$(NUMBA_SHIPPED)")
	@echo "make: $(VENV) is ready (activate it with: source $(VENV)/bin/activate)"
	touch $@

# The docs extra (MkDocs, Material, mkdocstrings) goes into the same venv the first time; strict mode
# fails the build on a broken link, anchor or API reference. NO_MKDOCS_2_WARNING silences Material's
# banner about its successor (it is not a warning about this site).
$(VENV)/.docs-installed: pyproject.toml | $(VENV)/.installed
	$(PY) -m uv pip install --quiet --compile-bytecode --python $(PY) -e ".[docs]"
	touch $@

.PHONY: setup test scan example bench dist kernels docs clean
setup: $(VENV)/.installed

test: $(VENV)/.installed
	$(PY) -m pytest -q -n $(TEST_WORKERS)

scan: $(VENV)/.installed
	$(VENV)/bin/colcep scan --events 1000000 --symbols 100 --pattern paper_query3 --out out/matches

example: $(VENV)/.installed
	@if [ -z "$(NAME)" ] || [ ! -f "examples/$(NAME).py" ]; then \
	  echo "usage: make example NAME=<name> [ARGS='...'], one of: $(EXAMPLES)"; exit 2; fi
	$(PY) examples/$(NAME).py $(ARGS)

bench: $(VENV)/.installed
	$(PY) asv_bench/table.py

dist: $(VENV)/.installed
	$(PY) -m colcep.tools.prebuild --check || $(PY) -m colcep.tools.prebuild
	$(PY) -c 'import sys; from colcep.spark.ship import main; sys.exit(main(["dist"]))'  # (-m: runpy warns, colcep.spark imports it)

kernels: $(VENV)/.installed
	$(PY) -m colcep.tools.prebuild

docs: $(VENV)/.docs-installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

clean:
	rm -rf $(VENV) out build dist site *.egg-info
