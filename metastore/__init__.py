"""etcd at Pulsar's metadata paths: CAS updates, watch-fed caches, an embedded etcd.

The names below are loaded on first use, so that importing a pure submodule (the codecs of
ledger metadata, ManagedLedgerInfo and bookie registrations, `paths`, `errors`) does not load
the etcd client: Spark workers decode metadata with those modules alone.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from metastore.cache import CachedDocument, WatchedRange
    from metastore.embedded import EmbeddedEtcd, EtcdSupervisor
    from metastore.errors import AlreadyExists, BadVersion, MetastoreError, NotFound, Unavailable
    from metastore.store import Endpoint, MetadataStore, Versioned, parse_metadata_store_url

_MODULE_OF = {
    "AlreadyExists": "metastore.errors",
    "BadVersion": "metastore.errors",
    "CachedDocument": "metastore.cache",
    "EmbeddedEtcd": "metastore.embedded",
    "Endpoint": "metastore.store",
    "EtcdSupervisor": "metastore.embedded",
    "MetadataStore": "metastore.store",
    "MetastoreError": "metastore.errors",
    "NotFound": "metastore.errors",
    "Unavailable": "metastore.errors",
    "Versioned": "metastore.store",
    "WatchedRange": "metastore.cache",
    "parse_metadata_store_url": "metastore.store",
}


def __getattr__(name: str) -> Any:
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'metastore' has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULE_OF[name]), name)


__all__ = [
    "AlreadyExists",
    "BadVersion",
    "CachedDocument",
    "EmbeddedEtcd",
    "Endpoint",
    "EtcdSupervisor",
    "MetadataStore",
    "MetastoreError",
    "NotFound",
    "Unavailable",
    "Versioned",
    "WatchedRange",
    "parse_metadata_store_url",
]
