"""Name rules, one place for every name the API stores.

Pulsar's own names (tenants, namespaces, clusters) follow `NamedEntity.checkName`:
`[-=:.\\w]*` with Java's ASCII `\\w` (letters, digits, `_`). On top of it, as upstream's
resources do in practice, `.` and `..` are refused (they would read as path steps), and so is
anything longer than `MAX_NAME_LENGTH` characters.

Names Pulsar leaves free-form (bookie ids, bookie group names, failure-domain names, namespace
isolation policy names) follow this service's documented rule (`is_valid_free_name`): 1 to
`MAX_NAME_LENGTH` characters, printable (no NUL, no control or line-separator characters),
no `/` (a name is one segment of an etcd key), and not `.` or `..`. An encoded slash (`%2F`) in
a path segment reaches the services as `ENCODED_SLASH` (NUL), which no rule accepts, so it is
refused rather than stored as some other character.
"""

from __future__ import annotations

import re

from api.errors import PreconditionFailed

# Java's `\w` is ASCII-only: letters, digits and `_`; plus `-`, `=`, `:` and `.`.
_NAME = re.compile(r"[-=:.\w]*", re.ASCII)
MAX_NAME_LENGTH = 255
_PATH_STEPS = (".", "..")


def is_valid_name(name: str) -> bool:
    return (
        len(name) <= MAX_NAME_LENGTH
        and name not in _PATH_STEPS
        and _NAME.fullmatch(name) is not None
    )


def is_valid_namespace_name(tenant: str, namespace: str) -> bool:
    return bool(tenant) and bool(namespace) and is_valid_name(tenant) and is_valid_name(namespace)


INVALID_TENANT_NAME = "Tenant name is not valid"
INVALID_NAMESPACE_NAME = "Namespace name is not valid"


def require_valid_tenant_name(tenant: str) -> None:
    """412 `Tenant name is not valid` (`NamedEntity.checkName`), as Pulsar answers it."""
    if not tenant or not is_valid_name(tenant):
        raise PreconditionFailed(INVALID_TENANT_NAME)


def require_valid_namespace_name(tenant: str, namespace: str) -> None:
    """412 `Namespace name is not valid` (`NamespaceName`'s check), as Pulsar answers it."""
    if not is_valid_namespace_name(tenant, namespace):
        raise PreconditionFailed(INVALID_NAMESPACE_NAME)


def is_valid_free_name(name: str) -> bool:
    return (
        0 < len(name) <= MAX_NAME_LENGTH
        and name not in _PATH_STEPS
        and "/" not in name
        and name.isprintable()
    )


def free_name_rule(what: str) -> str:
    return (
        f"{what} is not valid: 1 to {MAX_NAME_LENGTH} printable characters, no '/', "
        "not '.' or '..'"
    )


def require_free_name(what: str, name: str) -> None:
    """412 (Pulsar's status for an invalid name) naming the rule."""
    if not is_valid_free_name(name):
        raise PreconditionFailed(free_name_rule(what))
