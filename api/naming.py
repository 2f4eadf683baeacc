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

Topic names are read as Pulsar's `TopicName` reads them (a partition is `<name>-partition-<i>`,
`partition_index`), and system topics are told apart as `SystemTopicNames` and
`NamespaceService.isSystemServiceNamespace` tell them (`is_system_topic`).
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


# -- topic names (`TopicName`) ----------------------------------------------------------------

INVALID_TOPIC_NAME = "Topic name is not valid"
PARTITION_SUFFIX = "-partition-"  # TopicName.PARTITIONED_TOPIC_SUFFIX
PARTITIONED_NAME = "Partitioned Topic Name should not contain '-partition-'"


def require_valid_topic_name(tenant: str, namespace: str, topic: str) -> None:
    """`AdminResource.validateTopicName`: 412 when `TopicName.get` would not parse. Beyond
    upstream's rule, a local name with a NUL (or an encoded slash, which reaches here as
    one: `api.http.encoded_slash`) or a `/`, or that is `.` or `..`, is refused too: a slash
    would make it another namespace's name, and a NUL, which ZooKeeper refuses in a path,
    would otherwise share one managed ledger with the encoded slash."""
    if (not topic or "\x00" in topic or "/" in topic or topic in (".", "..")
            or not is_valid_namespace_name(tenant, namespace)):
        raise PreconditionFailed(INVALID_TOPIC_NAME)


def topic_url(tenant: str, namespace: str, topic: str) -> str:
    """A persistent topic's full name, as `TopicName.toString` writes it."""
    return f"persistent://{tenant}/{namespace}/{topic}"


def partition_name(topic: str, index: int) -> str:
    """The local name of partition `index` of `topic` (`TopicName.getPartition`)."""
    return f"{topic}{PARTITION_SUFFIX}{index}"


_JAVA_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)


def partition_index(topic: str) -> int:
    """`TopicName.getPartitionIndex`: for a name containing `-partition-`, what follows its
    last `-` read by `Integer.parseInt` (a sign allowed), else -1; -1 when it is no int."""
    if PARTITION_SUFFIX not in topic:
        return -1
    tail = topic[topic.rfind("-") + 1:]
    if not _JAVA_INT.fullmatch(tail) or not -(2**31) <= int(tail) < 2**31:
        return -1
    return int(tail)


def base_topic(topic: str) -> str:
    """`TopicName.getPartitionedTopicName`'s local part: the name before its last
    `-partition-` when it names a partition (`partition_index`), else the name itself."""
    if partition_index(topic) == -1:
        return topic
    return topic[:topic.rfind(PARTITION_SUFFIX)]


# `SystemTopicNames` (pulsar-common 4.0): the event topics, by their local name without a
# partition suffix, and the transaction-internal names.
EVENTS_TOPIC_NAMES = frozenset({
    "__change_events", "__transaction_buffer_snapshot",
    "__transaction_buffer_snapshot_segments", "__transaction_buffer_snapshot_indexes",
})
TRANSACTION_COORDINATOR_ASSIGN = "persistent://pulsar/system/transaction_coordinator_assign"
TRANSACTION_COORDINATOR_LOG = "persistent://pulsar/system/__transaction_log_"
PENDING_ACK_STORE_SUFFIX = "__transaction_pending_ack"
# `NamespaceService.isSystemServiceNamespace`: the system namespace, the SLA-monitor and the
# heartbeat namespaces (v1 and v2 forms).
SYSTEM_NAMESPACE = "pulsar/system"
_SERVICE_NAMESPACES = (
    re.compile(r"sla-monitor/[^/]+/([^:]+:\d+)"),
    re.compile(r"pulsar/[^/]+/([^:]+:\d+)"),
    re.compile(r"pulsar/([^:]+:\d+)"),
)


def is_transaction_internal(full_name: str) -> bool:
    """`SystemTopicNames.isTransactionInternalName` of `persistent://tenant/ns/topic`."""
    return (full_name.startswith(TRANSACTION_COORDINATOR_ASSIGN)
            or full_name.startswith(TRANSACTION_COORDINATOR_LOG)
            or full_name.endswith(PENDING_ACK_STORE_SUFFIX))


def is_system_topic(tenant: str, namespace: str, topic: str) -> bool:
    """`BrokerService.isSystemTopic`: a topic of a system service namespace, an event topic
    or a transaction-internal one (judged on the name without its partition suffix)."""
    full_namespace = f"{tenant}/{namespace}"
    if full_namespace == SYSTEM_NAMESPACE or any(
            pattern.fullmatch(full_namespace) for pattern in _SERVICE_NAMESPACES):
        return True
    base = base_topic(topic)
    return base in EVENTS_TOPIC_NAMES or is_transaction_internal(
        topic_url(tenant, namespace, base))
