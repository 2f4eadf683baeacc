"""Every package declares its public surface in a sorted `__all__` whose names exist."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = [
    "api",
    "api.routes",
    "api.services",
    "cli",
    "cli.commands",
    "javaformats",
    "metastore",
    "placement",
    "storage",
    "pipeline",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_package_has_a_sorted_existing_all(name: str) -> None:
    package = importlib.import_module(name)
    exported = package.__all__
    assert exported == sorted(exported), f"{name}.__all__ is not sorted"
    missing = [item for item in exported if not hasattr(package, item)]
    assert not missing, f"{name}.__all__ names missing attributes: {missing}"
