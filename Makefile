# recprep — `make demo` and `make test` work on a fresh machine with only Python and make.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell $(PYTHON) -c "import hashlib,sys;print(hashlib.sha1(open('pyproject.toml','rb').read()).hexdigest()[:12])")

.PHONY: venv demo test lint bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,bench]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

venv: $(STAMP)

demo: venv
	$(PY) examples/demo.py demo-output

lint: venv
	$(PY) -m ruff check src tests benchmarks examples

test: venv lint
	$(PY) -m pytest -q

bench: venv
	$(PY) benchmarks/bench_core.py

clean:
	rm -rf $(VENV) demo-output .pytest_cache .hypothesis
