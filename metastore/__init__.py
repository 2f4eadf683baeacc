"""etcd or ZooKeeper at Pulsar's metadata paths: CAS updates, watch-fed caches, typed document
readers, the live topology, an embedded etcd and ZooKeeper.

The names below are imported on first use (PEP 562), so the pure modules (`paths`, `codec`,
`documents`, `errors`) load without the etcd client: a Spark worker imports
`metastore.documents` alone.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from metastore.cache import CachedDocument, WatchedRange
    from metastore.embedded import EmbeddedEtcd, EtcdSupervisor
    from metastore.embedded_zookeeper import EmbeddedZooKeeper
    from metastore.errors import (
        AlreadyExists,
        BadVersion,
        ContentDeserializationError,
        InvalidValue,
        MetastoreError,
        NotFound,
        Unavailable,
    )
    from metastore.store import (
        Endpoint,
        MetadataStore,
        Versioned,
        open_metadata_store,
        parse_metadata_store_url,
    )
    from metastore.store_url import parse_metadata_service_uri, parse_store_url
    from metastore.topology import ClusterView, TopologySnapshot, read_cluster_view

_HOME = {
    "AlreadyExists": "metastore.errors",
    "BadVersion": "metastore.errors",
    "CachedDocument": "metastore.cache",
    "ClusterView": "metastore.topology",
    "ContentDeserializationError": "metastore.errors",
    "EmbeddedEtcd": "metastore.embedded",
    "EmbeddedZooKeeper": "metastore.embedded_zookeeper",
    "Endpoint": "metastore.store",
    "EtcdSupervisor": "metastore.embedded",
    "InvalidValue": "metastore.errors",
    "MetadataStore": "metastore.store",
    "MetastoreError": "metastore.errors",
    "NotFound": "metastore.errors",
    "TopologySnapshot": "metastore.topology",
    "Unavailable": "metastore.errors",
    "Versioned": "metastore.store",
    "WatchedRange": "metastore.cache",
    "open_metadata_store": "metastore.store",
    "parse_metadata_service_uri": "metastore.store_url",
    "parse_metadata_store_url": "metastore.store",
    "parse_store_url": "metastore.store_url",
    "read_cluster_view": "metastore.topology",
}

__all__ = [
    "AlreadyExists",
    "BadVersion",
    "CachedDocument",
    "ClusterView",
    "ContentDeserializationError",
    "EmbeddedEtcd",
    "EmbeddedZooKeeper",
    "Endpoint",
    "EtcdSupervisor",
    "InvalidValue",
    "MetadataStore",
    "MetastoreError",
    "NotFound",
    "TopologySnapshot",
    "Unavailable",
    "Versioned",
    "WatchedRange",
    "open_metadata_store",
    "parse_metadata_service_uri",
    "parse_metadata_store_url",
    "parse_store_url",
    "read_cluster_view",
]


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'metastore' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
