"""Topic names as Pulsar persists them (`TopicName.getPersistenceNamingEncoding`): the
managed ledger `tenant/ns/persistent/<URL-encoded local name>` (`metastore.paths.url_encode`,
Java's URLEncoder) at `/managed-ledgers/<name>`."""

from __future__ import annotations

from urllib.parse import unquote_plus

from metastore import paths

codec_encode = paths.url_encode


def codec_decode(text: str) -> str:
    return unquote_plus(text)


def managed_ledger_name(tenant: str, namespace: str, topic: str) -> str:
    return f"{tenant}/{namespace}/persistent/{codec_encode(topic)}"


def split_managed_ledger_name(name: str) -> tuple[str, str, str]:
    """(tenant, namespace, local topic name) of a managed-ledger name."""
    tenant, namespace, domain, encoded = name.split("/", 3)
    if domain != "persistent" or not (tenant and namespace and encoded):
        raise ValueError(f"not a persistent topic's managed-ledger name: {name!r}")
    return tenant, namespace, codec_decode(encoded)


def managed_ledger_path(name: str) -> str:
    return f"{paths.MANAGED_LEDGERS}/{name}"
