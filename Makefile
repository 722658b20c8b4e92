# Two entry points for a fresh machine (Python 3.11+, Java 17 for Spark):
#   make scan   set up, generate ticks and scan them on local Spark
#   make test   set up and run the test suite
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

.PHONY: setup test scan bench clean
setup: $(VENV)/.installed

test: $(VENV)/.installed
	$(PY) -m pytest -q

scan: $(VENV)/.installed
	$(VENV)/bin/colcep scan --generate 1000000 --symbols 100 --pattern paper_query3 --out out/matches

bench: $(VENV)/.installed
	$(PY) asv_bench/table.py

clean:
	rm -rf $(VENV) out build *.egg-info
