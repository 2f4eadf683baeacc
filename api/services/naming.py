"""Pulsar's name rules (`NamedEntity.checkName`) for tenants, namespaces and clusters."""

from __future__ import annotations

import re

# Java's `\w` is ASCII-only: letters, digits and `_`; plus `-`, `=`, `:` and `.`.
_NAME = re.compile(r"[-=:.\w]*", re.ASCII)


def is_valid_name(name: str) -> bool:
    return _NAME.fullmatch(name) is not None


def is_valid_namespace_name(tenant: str, namespace: str) -> bool:
    return bool(tenant) and bool(namespace) and is_valid_name(tenant) and is_valid_name(namespace)


def java_set(items: list[str]) -> str:
    """How a Java collection prints inside a message: `[a, b]`."""
    return "[" + ", ".join(items) + "]"
