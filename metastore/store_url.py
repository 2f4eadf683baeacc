"""Metadata store URLs as Pulsar and BookKeeper take them, and the store each one opens.

`metadataStoreUrl` / `--metadata-store-url` (Pulsar's `MetadataStoreFactoryImpl`):

- `etcd:http://h1:2379,h2:2379` — etcd (the `http://` and `https://` schemes are optional);
- `zk:h1:2181,h2:2181[/chroot]` — ZooKeeper; the chroot znode holds every key;
- anything else is a ZooKeeper connect string, as Pulsar treats it: `h1:2181[,h2:2181][/chroot]`.
  (A bare `http://h:p` list is read as etcd, as this project always has.)

`metadataServiceUri` / `bookkeeperMetadataServiceUri` (bookies and the auditor):

- `metadata-store:<metadataStoreUrl>/ledgers` — Pulsar's driver (`;` separates hosts as `,`);
- `zk+hierarchical://h1:2181;h2:2181[/chroot]/ledgers` — BookKeeper's ZooKeeper driver
  (also `zk+null://`, `zk://`, the same hierarchical layout);

where the path ends with the ledgers root, which is `/ledgers` (what Pulsar's drivers use and
this project's ledger paths are); anything before it is the ZooKeeper chroot.

Pure: no store client is imported here.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Endpoint",
    "EtcdUrl",
    "StoreUrl",
    "ZooKeeperUrl",
    "parse_metadata_service_uri",
    "parse_store_url",
]

LEDGERS_ROOT = "/ledgers"
_BOOKKEEPER_ZK_SCHEMES = ("zk+hierarchical://", "zk+null://", "zk+flat://", "zk://")
_METADATA_STORE_SCHEME = "metadata-store:"


@dataclass(frozen=True)
class Endpoint:
    """One etcd server."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class EtcdUrl:
    endpoints: tuple[Endpoint, ...]

    @property
    def url(self) -> str:
        """The `metadataStoreUrl` form."""
        return "etcd:" + ",".join(f"http://{endpoint}" for endpoint in self.endpoints)


@dataclass(frozen=True)
class ZooKeeperUrl:
    hosts: str  # "h1:p1,h2:p2"
    chroot: str = ""  # "" or "/a/b"

    @property
    def url(self) -> str:
        """The `metadataStoreUrl` form."""
        return f"zk:{self.hosts}{self.chroot}"


StoreUrl = EtcdUrl | ZooKeeperUrl


def _etcd(url: str, body: str) -> EtcdUrl:
    endpoints = []
    for item in body.split(","):
        item = item.strip()
        for scheme in ("http://", "https://"):
            item = item.removeprefix(scheme)
        host, sep, port = item.rstrip("/").rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"invalid etcd endpoint {item!r} in metadata store URL {url!r}")
        endpoints.append(Endpoint(host.strip("[]"), int(port)))
    return EtcdUrl(tuple(endpoints))


def _zookeeper(url: str, body: str) -> ZooKeeperUrl:
    hosts, slash, chroot = body.partition("/")
    chroot = (slash + chroot).rstrip("/")
    if any(part in ("", ".", "..") for part in chroot.split("/")[1:]):
        raise ValueError(f"invalid ZooKeeper chroot {chroot!r} in metadata store URL {url!r}")
    for item in hosts.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"invalid ZooKeeper server {item!r} in metadata store URL {url!r}"
                             " (expected host:port)")
    return ZooKeeperUrl(",".join(item.strip() for item in hosts.split(",")), chroot)


def parse_store_url(url: str) -> StoreUrl:
    """Pulsar's `metadataStoreUrl` forms (module docstring); `ValueError` when malformed."""
    url = url.strip()
    if url.startswith("etcd:"):
        return _etcd(url, url.removeprefix("etcd:"))
    if url.startswith(("http://", "https://")):
        return _etcd(url, url)
    if url.startswith("zk:"):
        return _zookeeper(url, url.removeprefix("zk:").removeprefix("//"))
    for other in ("memory:", "rocksdb:", "oxia:"):
        if url.startswith(other):
            raise ValueError(f"unsupported metadata store {url!r}: use etcd: or zk:")
    return _zookeeper(url, url)


def parse_metadata_service_uri(uri: str) -> StoreUrl:
    """BookKeeper's `metadataServiceUri` in Pulsar's and BookKeeper's forms (module
    docstring): the store it names. `ValueError` when malformed or when the ledgers root is
    not `/ledgers`."""
    uri = uri.strip()
    if uri.startswith(_METADATA_STORE_SCHEME):
        body = uri.removeprefix(_METADATA_STORE_SCHEME).replace(";", ",")
        store_url, _ = _split_ledgers_root(uri, body)
        return parse_store_url(store_url)
    for scheme in _BOOKKEEPER_ZK_SCHEMES:
        if uri.startswith(scheme):
            body = uri.removeprefix(scheme).replace(";", ",")
            store_url, _ = _split_ledgers_root(uri, body)
            return _zookeeper(uri, store_url)
    if uri.startswith("etcd:") or uri.startswith("zk:"):
        return parse_store_url(uri)
    raise ValueError(f"unsupported metadataServiceUri {uri!r}: expected metadata-store:... "
                     "or zk+hierarchical://host:port/ledgers")


def _split_ledgers_root(uri: str, body: str) -> tuple[str, str]:
    """(the store part, the ledgers root) of `body`, whose path must end with `/ledgers`."""
    if not body.rstrip("/").endswith(LEDGERS_ROOT):
        raise ValueError(f"unsupported ledgers root in metadataServiceUri {uri!r}: the path "
                         f"must end with {LEDGERS_ROOT}")
    store_url = body.rstrip("/")[: -len(LEDGERS_ROOT)]
    return store_url, LEDGERS_ROOT
