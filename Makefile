# The two set-up commands are `make run` and `make test`; each installs what is missing.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8080
APT_UPDATED := /tmp/.pulsar-isolation-apt-updated

.PHONY: run test lint bench openapi system-deps clean

run: system-deps $(VENV)/.installed
	$(PY) -m api --port $(PORT) --data-dir data

test: system-deps $(VENV)/.installed-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/pytest -q -p no:cacheprovider

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

bench: system-deps $(VENV)/.installed-test
	@command -v wrk >/dev/null || { $(MAKE) --no-print-directory apt-update && DEBIAN_FRONTEND=noninteractive apt-get install -y wrk; }
	$(PY) -m bench

openapi: $(VENV)/.installed
	$(PY) -m api.openapi_export > openapi.yaml

# etcd (the metadata store), Java 17 (for the Spark pipeline) and Chromium (the audit report's
# headless test) from Debian when missing.
system-deps:
	@command -v etcd >/dev/null || { $(MAKE) --no-print-directory apt-update && DEBIAN_FRONTEND=noninteractive apt-get install -y etcd-server; }
	@command -v java >/dev/null || { $(MAKE) --no-print-directory apt-update && DEBIAN_FRONTEND=noninteractive apt-get install -y openjdk-17-jre-headless; }
	@command -v chromium >/dev/null || { $(MAKE) --no-print-directory apt-update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; }

apt-update:
	@[ -f $(APT_UPDATED) ] || { apt-get update && touch $(APT_UPDATED); }

$(VENV)/bin/python:
	python3 -m venv $(VENV) || { $(MAKE) --no-print-directory apt-update && DEBIAN_FRONTEND=noninteractive apt-get install -y python3-venv && python3 -m venv $(VENV); }

$(VENV)/.installed: $(VENV)/bin/python pyproject.toml
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[spark]'
	touch $@

$(VENV)/.installed-test: $(VENV)/bin/python pyproject.toml
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[spark,test]'
	touch $@ $(VENV)/.installed

clean:
	rm -rf $(VENV) data .mypy_cache .ruff_cache
