# The two set-up commands are `make run` and `make test`; each installs what is missing.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8080
BOOKIES ?= 4
STORE ?= etcd
ZK_PORT ?= 2181
APT_UPDATED := /tmp/.pulsar-isolation-apt-updated
OPENAPI_CLIENT := $(VENV)/openapi-client/bin/openapi-python-client

.PHONY: run test lint bench openapi proto system-deps clean

# STORE=zookeeper: the same service on Debian's ZooKeeper (started here on ZK_PORT, data under
# data/zookeeper, stopped with the service) instead of the embedded etcd.
run: system-deps $(VENV)/.installed
ifeq ($(STORE),zookeeper)
	@mkdir -p data/zookeeper
	@printf 'tickTime=2000\ndataDir=%s\nclientPort=$(ZK_PORT)\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n4lw.commands.whitelist=ruok,srvr\n' \
		"$(CURDIR)/data/zookeeper" > data/zookeeper/zoo.cfg
	java -Xmx256m -cp /usr/share/java/zookeeper.jar org.apache.zookeeper.server.ZooKeeperServerMain \
		data/zookeeper/zoo.cfg > data/zookeeper/zookeeper.log 2>&1 & zk=$$!; \
	trap 'kill $$zk' EXIT; \
	$(PY) -c $$'import sys, time\nfrom metastore.embedded_zookeeper import serving\nfor _ in range(300):\n    if serving($(ZK_PORT)): sys.exit(0)\n    time.sleep(0.1)\nsys.exit("zookeeper did not start: see data/zookeeper/zookeeper.log")' && \
	$(PY) -m api --port $(PORT) --data-dir data --bookies $(BOOKIES) --metadata-store-url zk:127.0.0.1:$(ZK_PORT)
else
	$(PY) -m api --port $(PORT) --data-dir data --bookies $(BOOKIES)
endif

test: system-deps $(VENV)/.installed-test $(OPENAPI_CLIENT) interop-deps
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(VENV)/bin/pytest -q -p no:cacheprovider

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

bench: system-deps $(VENV)/.installed-test
	@command -v wrk >/dev/null || { $(MAKE) --no-print-directory apt-update && DEBIAN_FRONTEND=noninteractive apt-get install -y wrk; }
	$(PY) -m bench

openapi: $(VENV)/.installed
	$(PY) -m api.openapi_export > openapi.yaml

# etcd (the metadata store), etcdctl (the README's examples), Java 17 (for the Spark pipeline),
# Chromium (the docs and audit report's headless tests), and gcc with Python's headers (the
# bookie's compiled add path, built by the editable install) from Debian when missing.
system-deps:
	@command -v etcd >/dev/null || { $(MAKE) --no-print-directory apt-update && DEBIAN_FRONTEND=noninteractive apt-get install -y etcd-server; }
	@command -v etcdctl >/dev/null || { $(MAKE) --no-print-directory apt-update && DEBIAN_FRONTEND=noninteractive apt-get install -y etcd-client; }
	@command -v java >/dev/null || { $(MAKE) --no-print-directory apt-update && DEBIAN_FRONTEND=noninteractive apt-get install -y openjdk-17-jre-headless; }
	@command -v chromium >/dev/null || { $(MAKE) --no-print-directory apt-update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; }
	@test -e /usr/share/java/zookeeper.jar || { $(MAKE) --no-print-directory apt-update && DEBIAN_FRONTEND=noninteractive apt-get install -y zookeeper; }
	@command -v gcc >/dev/null || { $(MAKE) --no-print-directory apt-update && DEBIAN_FRONTEND=noninteractive apt-get install -y gcc; }
	@python3 -c 'import os, sysconfig; raise SystemExit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' || { $(MAKE) --no-print-directory apt-update && DEBIAN_FRONTEND=noninteractive apt-get install -y python3-dev; }

# javac and Maven for tests/interop: upstream Pulsar and BookKeeper jars resolved from Maven
# Central into ~/.m2 and the runner compiled; an artifact that cannot be resolved fails here.
system-deps: interop-system-deps
interop-system-deps:
	@command -v javac >/dev/null || { $(MAKE) --no-print-directory apt-update && DEBIAN_FRONTEND=noninteractive apt-get install -y openjdk-17-jdk-headless; }
	@command -v mvn >/dev/null || { $(MAKE) --no-print-directory apt-update && DEBIAN_FRONTEND=noninteractive apt-get install -y maven; }

interop-deps: interop-system-deps $(VENV)/.installed-test
	$(PY) -c 'from tests.interop.upstream import resolve, resolve_broker; resolve(); resolve_broker()'
.PHONY: interop-system-deps interop-deps

apt-update:
	@[ -f $(APT_UPDATED) ] || { apt-get update && touch $(APT_UPDATED); }

$(VENV)/bin/python:
	python3 -m venv $(VENV) || { $(MAKE) --no-print-directory apt-update && DEBIAN_FRONTEND=noninteractive apt-get install -y python3-venv && python3 -m venv $(VENV); }

# The editable install also compiles storage/bookie/addpath.pyx,
# storage/bookie_client/addacks.pyx, bench/leanloop.pyx and bench/bookiefloor.pyx in place
# (setup.py, Cython).
COMPILED := storage/bookie/addpath.pyx storage/bookie/addpath_crc.h \
	storage/bookie_client/addacks.pyx bench/leanloop.pyx bench/bookiefloor.pyx setup.py

$(VENV)/.installed: $(VENV)/bin/python pyproject.toml $(COMPILED)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[spark]'
	touch $@

$(VENV)/.installed-test: $(VENV)/bin/python pyproject.toml $(COMPILED)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[spark,test]'
	touch $@ $(VENV)/.installed

# openapi-python-client, for the generated-client test, in a venv of its own: it pins typer
# below the version the CLI is built and tested with.
$(OPENAPI_CLIENT): $(VENV)/bin/python
	python3 -m venv $(VENV)/openapi-client
	$(VENV)/openapi-client/bin/pip install -q 'openapi-python-client>=0.29,<0.30'

clean:
	rm -rf $(VENV) data .mypy_cache .ruff_cache

# Python modules and mypy stubs for metastore/proto/*.proto (checked in; run after editing a
# .proto). The generator is a development tool only: `protobuf` is the runtime dependency, and
# the generated code requires a runtime at least as new as the protoc that wrote it.
PROTO_TOOLS := grpcio-tools==1.85.1 mypy-protobuf==5.1.0

proto: $(VENV)/.installed-test
	@$(PY) -c 'import grpc_tools, mypy_protobuf' 2>/dev/null || $(PY) -m pip install -q $(PROTO_TOOLS)
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m grpc_tools.protoc -I. --python_out=. --mypy_out=. metastore/proto/*.proto

# The bookies' V3 wire protocol (storage/bookie/proto): `make proto` regenerates it too.
proto: bookie-proto
bookie-proto: $(VENV)/.installed-test
	@$(PY) -c 'import grpc_tools, mypy_protobuf' 2>/dev/null || $(PY) -m pip install -q $(PROTO_TOOLS)
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m grpc_tools.protoc -I. --python_out=. --mypy_out=. storage/bookie/proto/*.proto
.PHONY: bookie-proto
