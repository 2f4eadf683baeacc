"""The codecs Spark workers use import without the etcd client (DESIGN.md section 2)."""

from __future__ import annotations

import subprocess
import sys

from tests.support import REPO

PURE_MODULES = [
    "metastore.bookie_service_info",
    "metastore.errors",
    "metastore.ledger_metadata",
    "metastore.managed_ledger_info",
    "metastore.paths",
    "metastore.proto",
    "metastore.underreplication_marks",
]

BLOCK_AND_IMPORT = """
import importlib, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("aetcd", "grpc"):
            raise ImportError(f"blocked: {name}")
sys.meta_path.insert(0, Block())
for name in sys.argv[1:]:
    importlib.import_module(name)
print("ok")
"""


def test_pure_modules_import_without_the_etcd_client() -> None:
    done = subprocess.run(
        [sys.executable, "-c", BLOCK_AND_IMPORT, *PURE_MODULES],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_the_blocker_does_block() -> None:
    done = subprocess.run(
        [sys.executable, "-c", BLOCK_AND_IMPORT, "metastore.store"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "blocked: aetcd" in done.stderr
