# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q torch==2.13.0 || $(VPY) -m pip install -q torch
	$(VPY) -m pip install -q -e '.[test,cuda]'
	$(VPY) -m compileall -q tilecraft  # bytecode up front: a cached kernel loads in ~20 ms
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VPY) examples/demo.py

test: $(STAMP)
	$(VPY) -m pytest -q tests

.PHONY: venv demo test
