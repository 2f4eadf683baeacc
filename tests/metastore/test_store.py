"""MetadataStore against a real etcd and a real ZooKeeper: keys, children, CAS, leases."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from metastore.embedded import EmbeddedEtcd
from metastore.errors import AlreadyExists, BadVersion, NotFound, Unavailable
from metastore.store import (
    UNCHANGED,
    Endpoint,
    MetadataStore,
    parse_metadata_store_url,
)
from metastore.zookeeper_backend import ZooKeeperBackend
from tests.support import RawEtcd
from tests.zookeeper import EmbeddedZooKeeper


@pytest.fixture(params=["etcd", "zookeeper"])
async def store(
    request: pytest.FixtureRequest, etcd: EmbeddedEtcd, raw_etcd: RawEtcd
) -> AsyncIterator[MetadataStore]:
    """A wiped `MetadataStore` on the session's etcd, then on its ZooKeeper."""
    if request.param == "etcd":
        raw_etcd.wipe()
        store = MetadataStore([etcd.endpoint], timeout=5)
    else:
        zookeeper: EmbeddedZooKeeper = request.getfixturevalue("zookeeper")
        zookeeper.wipe()
        backend = ZooKeeperBackend(zookeeper.hosts(), "/chroot", timeout=5)
        store = MetadataStore([], timeout=5, zookeeper=backend)
    yield store
    await store.close()


def test_parse_metadata_store_url() -> None:
    assert parse_metadata_store_url("etcd:http://a:2379,b:2380") == [
        Endpoint("a", 2379),
        Endpoint("b", 2380),
    ]
    assert parse_metadata_store_url("http://127.0.0.1:1") == [Endpoint("127.0.0.1", 1)]
    with pytest.raises(ValueError, match="invalid etcd endpoint"):
        parse_metadata_store_url("etcd:http://nohostport")


async def test_path_is_the_key_verbatim(store: MetadataStore, raw_etcd: RawEtcd) -> None:
    if store.backend.kind != "etcd":
        pytest.skip("etcd keys (ZooKeeper paths: tests/metastore/test_zookeeper_store.py)")
    await store.put("/admin/clusters/us-west", b'{"serviceUrl":"http://x:8080"}')
    assert raw_etcd.get("/admin/clusters/us-west") == b'{"serviceUrl":"http://x:8080"}'


async def test_children_are_direct_and_sorted(store: MetadataStore) -> None:
    for path in ("/admin/policies/t2", "/admin/policies/t1", "/admin/policies/t1/ns1"):
        await store.put(path, b"{}")
    await store.put("/admin/policiesX/other", b"{}")
    assert await store.children("/admin/policies") == ["t1", "t2"]
    assert await store.children("/admin/policies/t1") == ["ns1"]
    assert await store.children("/nothing") == []


async def test_create_refuses_an_existing_key(store: MetadataStore) -> None:
    await store.create("/k", b"1")
    with pytest.raises(AlreadyExists):
        await store.create("/k", b"2")
    assert (await store.get("/k")).value == b"1"  # type: ignore[union-attr]


async def test_put_with_stale_revision_is_bad_version(store: MetadataStore) -> None:
    first = await store.put("/k", b"1")
    await store.put("/k", b"2")
    with pytest.raises(BadVersion):
        await store.put("/k", b"3", expected_revision=first)


async def test_delete_missing_key_is_not_found(store: MetadataStore) -> None:
    with pytest.raises(NotFound):
        await store.delete("/missing")


async def test_update_mutates_deletes_and_leaves_unchanged(store: MetadataStore) -> None:
    written = await store.update_json("/doc", lambda doc: {"n": 1} if doc is None else doc)
    assert written is not None and json.loads(written.value) == {"n": 1}
    same = await store.update_json("/doc", lambda doc: UNCHANGED)
    assert same is not None and same.revision == written.revision
    assert await store.update("/doc", lambda raw: None) is None
    assert await store.get("/doc") is None


async def test_update_aborts_without_writing_when_mutation_raises(store: MetadataStore) -> None:
    await store.put("/doc", b'{"n":1}')

    def refuse(doc: object) -> object:
        raise ValueError("no")

    with pytest.raises(ValueError):
        await store.update_json("/doc", refuse)
    assert (await store.get_json("/doc")) == {"n": 1}


def test_pipeline_depth_must_be_positive(etcd: EmbeddedEtcd) -> None:
    with pytest.raises(ValueError, match="pipeline_depth"):
        MetadataStore([etcd.endpoint], pipeline_depth=0)


async def test_delete_tree_removes_the_key_and_everything_under_it(store: MetadataStore) -> None:
    for path in ("/admin/clusters/c", "/admin/clusters/c/failureDomain/d", "/admin/clusters/cx"):
        await store.put(path, b"{}")
    await store.delete_tree("/admin/clusters/c")
    assert await store.children("/admin/clusters") == ["cx"]


async def test_ephemeral_key_lives_with_its_lease(store: MetadataStore) -> None:
    lease = await store.grant_lease(ttl=5)
    await store.put_ephemeral("/loadbalance/brokers/b:8080", b"{}", lease)
    assert await store.children("/loadbalance/brokers") == ["b:8080"]
    await store.revoke_lease(lease)
    assert await store.children("/loadbalance/brokers") == []


async def test_unreachable_etcd_is_unavailable_within_the_timeout() -> None:
    from metastore.embedded import free_port

    store = MetadataStore([Endpoint("127.0.0.1", free_port())], timeout=1)
    try:
        with pytest.raises(Unavailable):
            await asyncio.wait_for(store.get("/k"), 30)  # a liveness bound, not a timing claim
    finally:
        await store.close()
