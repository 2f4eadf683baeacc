"""Metadata store URLs in Pulsar's and BookKeeper's forms, and the store each one opens."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient

from metastore.embedded import EmbeddedEtcd
from metastore.etcd_backend import Endpoint
from metastore.store import open_metadata_store, parse_metadata_store_url
from metastore.store_url import (
    EtcdUrl,
    ZooKeeperUrl,
    parse_metadata_service_uri,
    parse_store_url,
)
from storage.bookie.__main__ import parse as parse_bookie
from tests.support import RawEtcd
from tests.zookeeper import EmbeddedZooKeeper


@pytest.mark.parametrize(("url", "parsed"), [
    ("etcd:http://a:2379,b:2380", EtcdUrl((Endpoint("a", 2379), Endpoint("b", 2380)))),
    ("etcd:a:2379", EtcdUrl((Endpoint("a", 2379),))),
    ("http://127.0.0.1:1", EtcdUrl((Endpoint("127.0.0.1", 1),))),
    ("zk:zk1:2181", ZooKeeperUrl("zk1:2181")),
    ("zk:zk1:2181,zk2:2182/pulsar/one", ZooKeeperUrl("zk1:2181,zk2:2182", "/pulsar/one")),
    ("zk1:2181", ZooKeeperUrl("zk1:2181")),  # Pulsar: no known prefix means ZooKeeper
    ("zk1:2181,zk2:2181/chroot/", ZooKeeperUrl("zk1:2181,zk2:2181", "/chroot")),
])  # fmt: skip
def test_metadata_store_url_forms(url: str, parsed: object) -> None:
    assert parse_store_url(url) == parsed


@pytest.mark.parametrize(("url", "message"), [
    ("zk:nohostport", "invalid ZooKeeper server 'nohostport'"),
    ("zk:h:1//x", "invalid ZooKeeper chroot"),
    ("etcd:http://nohostport", "invalid etcd endpoint"),
    ("memory:local", "unsupported metadata store"),
])  # fmt: skip
def test_malformed_urls_are_refused(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_store_url(url)


def test_etcd_endpoints_refuse_a_zookeeper_url() -> None:
    assert parse_metadata_store_url("127.0.0.1:2379") == [Endpoint("127.0.0.1", 2379)]
    with pytest.raises(ValueError, match="not an etcd metadata store URL"):
        parse_metadata_store_url("zk:127.0.0.1:2181")


@pytest.mark.parametrize(("uri", "parsed"), [
    ("metadata-store:zk:zk1:2181/ledgers", ZooKeeperUrl("zk1:2181")),
    ("metadata-store:zk:zk1:2181;zk2:2181/ledgers", ZooKeeperUrl("zk1:2181,zk2:2181")),
    ("metadata-store:zk:zk1:2181/pulsar/ledgers", ZooKeeperUrl("zk1:2181", "/pulsar")),
    ("metadata-store:etcd:http://e1:2379/ledgers", EtcdUrl((Endpoint("e1", 2379),))),
    ("zk+hierarchical://zk1:2181;zk2:2181/ledgers", ZooKeeperUrl("zk1:2181,zk2:2181")),
    ("zk+hierarchical://zk1:2181/c/ledgers", ZooKeeperUrl("zk1:2181", "/c")),
    ("zk+null://zk1:2181/ledgers", ZooKeeperUrl("zk1:2181")),
])  # fmt: skip
def test_metadata_service_uri_forms(uri: str, parsed: object) -> None:
    assert parse_metadata_service_uri(uri) == parsed


def test_metadata_service_uri_needs_the_ledgers_root() -> None:
    with pytest.raises(ValueError, match="must end with /ledgers"):
        parse_metadata_service_uri("zk+hierarchical://zk1:2181/bk")
    with pytest.raises(ValueError, match="unsupported metadataServiceUri"):
        parse_metadata_service_uri("bk://x:1/ledgers")


def test_bookie_takes_either_form(tmp_path: object) -> None:
    base = ["--bookie-id", "127.0.0.1:3181", "--data-dir", "d"]
    by_service_uri = parse_bookie([*base, "-c",
                                   "metadataServiceUri=zk+hierarchical://z:2181;y:2181/p/ledgers"])
    assert by_service_uri.metadata_store_url == "zk:z:2181,y:2181/p"
    by_flag = parse_bookie([*base, "--metadata-service-uri", "metadata-store:zk:z:2181/ledgers"])
    assert by_flag.metadata_store_url == "zk:z:2181"
    by_url = parse_bookie([*base, "--metadata-store-url", "etcd:http://e:2379"])
    assert by_url.metadata_store_url == "etcd:http://e:2379"
    with pytest.raises(SystemExit):
        parse_bookie(base)


async def test_opened_store_keeps_every_key_in_the_chroot(
    zookeeper: EmbeddedZooKeeper, etcd: EmbeddedEtcd, raw_etcd: RawEtcd
) -> None:
    zookeeper.wipe()
    store = open_metadata_store(f"zk:{zookeeper.hosts()}/tenants/one", timeout=5)
    try:
        await store.put("/bookies", b"{}")
    finally:
        await store.close()
    client = KazooClient(hosts=zookeeper.hosts(), timeout=10)
    client.start(10)
    try:
        assert client.get_children("/") == sorted(["tenants", "zookeeper"])
        assert client.get("/tenants/one/bookies")[0] == b"{}"
    finally:
        client.stop()
        client.close()
    raw_etcd.wipe()
    store = open_metadata_store(etcd.url, timeout=5)
    try:
        await store.put("/bookies", b"{}")
    finally:
        await store.close()
    assert raw_etcd.get("/bookies") == b"{}"
