"""storage/ stands below the service: it never imports api/, and exports a sorted surface."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import storage
from tests.support import parse_source

STORAGE = Path(storage.__file__).parent


def test_storage_never_imports_api() -> None:
    offenders = []
    for path in STORAGE.rglob("*.py"):
        for node in ast.walk(parse_source(path)):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path}: {n}" for n in names if n == "api" or n.startswith("api.")]
    assert not offenders


def test_bookie_package_exports_a_sorted_existing_all() -> None:
    package = importlib.import_module("storage.bookie")
    assert package.__all__ == sorted(package.__all__)
    assert all(hasattr(package, name) for name in package.__all__)
