"""etcd at Pulsar's metadata paths: CAS updates, watch-fed caches, an embedded etcd."""

from metastore.cache import CachedDocument, WatchedRange
from metastore.embedded import EmbeddedEtcd, EtcdSupervisor
from metastore.errors import AlreadyExists, BadVersion, MetastoreError, NotFound, Unavailable
from metastore.store import Endpoint, MetadataStore, Versioned, parse_metadata_store_url

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
