"""MetadataStore against a real etcd: keys, children, CAS, leases."""

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
from tests.support import RawEtcd


@pytest.fixture
async def store(etcd: EmbeddedEtcd, raw_etcd: RawEtcd) -> AsyncIterator[MetadataStore]:
    raw_etcd.wipe()
    store = MetadataStore([etcd.endpoint], timeout=5)
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


def in_flight(store: MetadataStore, path: str) -> int:
    writer = store._writers.get(path)
    return 0 if writer is None else len(writer[0].in_flight)


@pytest.mark.parametrize("depth", [1, 2, 3])
async def test_concurrent_updates_from_many_clients_lose_nothing(
    store: MetadataStore, etcd: EmbeddedEtcd, depth: int
) -> None:
    """Separate clients (as separate servers would be) incrementing one counter, each with a
    steady stream of writers: batches lose CAS races to other clients, pipelined batches
    chained on a lost one must be retried, and no increment may be lost or doubled."""
    clients = [MetadataStore([etcd.endpoint], timeout=5, pipeline_depth=depth) for _ in range(4)]
    most_in_flight = 0

    async def bump(client: MetadataStore) -> None:
        nonlocal most_in_flight
        updates = []
        for _ in range(10):  # each wave queues while the previous ones are in flight
            updates += [
                asyncio.ensure_future(client.update_json("/counter", increment)) for _ in range(4)
            ]
            for _ in range(10_000):  # bounded: until the wave is sent
                await asyncio.sleep(0)
                most_in_flight = max(most_in_flight, in_flight(client, "/counter"))
                if "/counter" not in client._pending:
                    break
        await asyncio.gather(*updates)

    def increment(n: int | None) -> int:
        return (n or 0) + 1

    try:
        await asyncio.gather(*(bump(c) for c in clients))
    finally:
        await asyncio.gather(*(c.close() for c in clients))
    assert await store.get_json("/counter") == 160
    assert most_in_flight >= min(depth, 2)


async def test_pipelined_writes_keep_order_and_isolate_failures(
    etcd: EmbeddedEtcd, raw_etcd: RawEtcd
) -> None:
    """With two transactions in flight, each writer's answer is its own and the stored
    document holds every successful change in arrival order."""
    raw_etcd.wipe()
    store = MetadataStore([etcd.endpoint], timeout=5, pipeline_depth=2)

    def append(item: int):  # type: ignore[no-untyped-def]
        def mutate(doc: list[int] | None) -> list[int]:
            if item % 7 == 3:
                raise ValueError(f"refused {item}")
            return [*(doc or []), item]

        return mutate

    most_in_flight = 0
    try:
        results = []
        for wave in range(5):  # each wave queues while the previous one is in flight
            results += [
                asyncio.ensure_future(store.update_json("/list", append(wave * 20 + i)))
                for i in range(20)
            ]
            for _ in range(10_000):  # bounded: until this wave is sent too
                await asyncio.sleep(0)
                most_in_flight = max(most_in_flight, in_flight(store, "/list"))
                if "/list" not in store._pending:
                    break
        outcomes = await asyncio.gather(*results, return_exceptions=True)
    finally:
        await store.close()
    assert most_in_flight == 2
    refused = sorted(int(str(o).split()[1]) for o in outcomes if isinstance(o, ValueError))
    assert refused == [i for i in range(100) if i % 7 == 3]
    assert raw_etcd.get_json("/list") == [i for i in range(100) if i % 7 != 3]


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
    await store.call(lambda c: c.revoke_lease(lease))
    assert await store.children("/loadbalance/brokers") == []


async def test_unreachable_etcd_is_unavailable_within_the_timeout() -> None:
    from metastore.embedded import free_port

    store = MetadataStore([Endpoint("127.0.0.1", free_port())], timeout=1)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(Unavailable):
        await store.get("/k")
    assert loop.time() - started < 2
    await store.close()


async def test_concurrent_updates_in_one_process_are_coalesced_and_isolated(
    store: MetadataStore,
) -> None:
    """Many writers of one key share transactions; one writer's failure fails only itself."""
    await store.put("/doc", b"[]")

    def append(item: int):  # type: ignore[no-untyped-def]
        def mutate(raw: bytes | None) -> bytes:
            if item == 13:
                raise ValueError("unlucky")
            return json.dumps([*json.loads(raw or b"[]"), item]).encode()

        return mutate

    revision_before = (await store.get("/doc")).revision  # type: ignore[union-attr]
    results = await asyncio.gather(
        *(store.update("/doc", append(i)) for i in range(50)), return_exceptions=True
    )
    failures = [r for r in results if isinstance(r, Exception)]
    assert [str(f) for f in failures] == ["unlucky"]
    stored = json.loads((await store.get("/doc")).value)  # type: ignore[union-attr]
    assert sorted(stored) == [i for i in range(50) if i != 13]
    revision_after = (await store.get("/doc")).revision  # type: ignore[union-attr]
    assert revision_after - revision_before < 50, "writes were not coalesced"
