# recprep — `make demo` and `make test` work on a fresh machine with only Python and make.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
HASH   := $(shell $(PYTHON) -c "import hashlib;print(hashlib.sha1(open('pyproject.toml','rb').read()).hexdigest()[:12])")
BASE   := $(VENV)/.base-$(HASH)
FULL   := $(VENV)/.test-$(HASH)
DEMO   := demo-output

DOCS_VENV := .venv-docs
DOCS_PY   := $(DOCS_VENV)/bin/python
DOCS      := $(DOCS_VENV)/.docs-$(HASH)

.PHONY: venv demo test lint bench plots fuzz docs clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# recprep itself (what the demo needs)
$(BASE): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e .
	rm -f $(VENV)/.base-*
	touch $@

# torch for the tests is the CPU build. PyPI's Linux torch wheels are CUDA builds (2.7 GB of
# nvidia-* libraries, 0.7 GB of triton), and a plain `torch==X` pin is not enough: while pip's
# resolver backtracks (s3fs/aiobotocore/moto) it may drop a find-links `X+cpu` wheel and take
# PyPI's `X` instead (a 7.5 GB .venv). So a constraint pins the `+cpu` build. It comes from a
# find-links directory that holds it (these machines: $PIP_FIND_LINKS=/opt/wheels), else from
# PyTorch's CPU index (TORCH_INDEX). `make venv TORCH_CPU=` lifts the pin (any torch==X build).
TORCH_VERSION = $(shell sed -n 's/^ *"torch==\([0-9][0-9.]*\)".*/\1/p' pyproject.toml)
TORCH_CPU    ?= torch==$(TORCH_VERSION)+cpu
TORCH_INDEX  ?= https://download.pytorch.org/whl/cpu
FIND_LINKS    = $(PIP_FIND_LINKS) $(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null)
TORCH_WHEEL   = $(firstword $(wildcard $(addsuffix /torch-$(TORCH_VERSION)+cpu-*.whl,$(FIND_LINKS))))
TORCH_PIN     = $(if $(TORCH_CPU),-c $(VENV)/torch-cpu.txt \
                  $(if $(TORCH_WHEEL),--find-links $(dir $(TORCH_WHEEL)),--extra-index-url $(TORCH_INDEX)))

# + everything the test suite and benchmarks use (pyspark, ray, moto, tensorflow-cpu, torch)
$(FULL): pyproject.toml | $(PY)
	echo '$(TORCH_CPU)' > $(VENV)/torch-cpu.txt
	$(PY) -m pip install --quiet $(TORCH_PIN) -e '.[test,bench]'
	rm -f $(VENV)/.test-* $(VENV)/.base-*
	touch $@ $(BASE)

venv: $(FULL)

demo: $(BASE)
	$(PY) examples/demo.py $(DEMO)/convert
	$(PY) examples/mnist/generate_raw.py $(DEMO)/raw --count 200
	$(VENV)/bin/recprep prepare examples/mnist/model.py $(DEMO)/raw/train $(DEMO)/prepared local \
		--num-workers 2 --num-shards 4 --name-prefix train --overwrite --no-progress
	$(VENV)/bin/recprep ls $(DEMO)/prepared
	$(VENV)/bin/recprep head $(DEMO)/prepared/train -n 1

lint: $(FULL)
	$(PY) -m ruff check src tests benchmarks examples docs/hooks
	$(PY) -m mypy src/recprep

test: lint
	$(PY) -m pytest -q

bench: $(FULL)
	$(PY) benchmarks/bench_core.py
	$(PY) benchmarks/bench_executors.py
	$(PY) benchmarks/bench_prepare.py

# the benchmark plots in docs/img/, from the tables in benchmarks/RESULTS*.md
plots: $(FULL)
	$(PY) benchmarks/plots.py

# longer fuzzing than CI's minute: FUZZ_EXAMPLES per target, fresh random inputs each run
FUZZ_EXAMPLES ?= 20000
fuzz: $(FULL)
	RECPREP_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) RECPREP_FUZZ_RANDOM=1 $(PY) -m pytest -q tests/test_fuzz.py

# the documentation site (site/), in its own venv with only what the docs need: mkdocs,
# Material, mkdocstrings and recprep without its engines. Strict: a broken link, a missing
# page or an API reference that doesn't resolve fails the build. Nothing is fetched from the
# network while building.
$(DOCS_PY):
	$(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_PY) -m pip install --quiet --upgrade pip

$(DOCS): pyproject.toml | $(DOCS_PY)
	$(DOCS_PY) -m pip install --quiet -e '.[docs]'
	rm -f $(DOCS_VENV)/.docs-*
	touch $@

docs: $(DOCS)
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) $(DOCS_VENV) site $(DEMO) .pytest_cache .hypothesis

# recprep side by side with the tools users would pick instead (litdata, mosaic streaming,
# webdataset, HF datasets, tf.data): benchmarks/RESULTS-peers.md. Its own venv, .venv-peers,
# since the peers bring their own pins (transformers, torchvision...). Mosaic's `streaming`
# imports torchvision, and PyPI's torchvision loads only beside a CUDA build of torch
# ("operator torchvision::nms does not exist" next to torch+cpu), so this venv takes torch
# 2.14.1 + torchvision 0.29.1 (~8 GB in all; everything runs on the CPU).
# `make bench-peers PEERS_TORCH=torch==2.13.0` keeps the CPU build (~3.6 GB): mosaic then
# can't import and the report says so. The written data goes to /tmp.
PEERS_VENV  := .venv-peers
PEERS_PY    := $(PEERS_VENV)/bin/python
PEERS_TORCH ?= torch==2.14.1 torchvision==0.29.1
PEERS       := litdata streaming-community webdataset datasets tensorflow-cpu psutil
PEERS_STAMP  = $(PEERS_VENV)/.peers-$(HASH)-$(shell echo '$(PEERS_TORCH)' | cksum | cut -d' ' -f1)

.PHONY: bench-peers

$(PEERS_PY):
	$(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_PY) -m pip install --quiet --upgrade pip

$(PEERS_STAMP): pyproject.toml | $(PEERS_PY)
	$(PEERS_PY) -m pip install --quiet -e . $(PEERS_TORCH) $(PEERS)
	rm -f $(PEERS_VENV)/.peers-*
	touch $@

bench-peers: $(PEERS_STAMP)
	$(PEERS_PY) benchmarks/bench_peers.py --out benchmarks/RESULTS-peers.md
