"""The change history in the store against a real etcd and a real ZooKeeper: records written
in the write's own transaction (every write method), their order, paging by whole
transactions, pruning by count and by age (the background pruner of `api.change_history`
included), and a group-commit batch's records in one znode on ZooKeeper."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kazoo.client import KazooClient

from api.change_history import HistoryPruner
from api.settings import Settings
from metastore import paths
from metastore.change_history import (
    ChangeContext,
    ChangeLog,
    ChangeRecord,
    KeyChange,
    apply_changed_parts,
    changed_parts,
    recording,
)
from metastore.embedded import EmbeddedEtcd
from metastore.errors import BadVersion
from metastore.guards import Guard
from metastore.store import MetadataStore
from metastore.zookeeper_backend import ZooKeeperBackend
from tests.support import RawEtcd, wait_until_async
from tests.zookeeper import EmbeddedZooKeeper

CONTEXT = ChangeContext("ops", "10.0.0.1", "POST", "/admin/v2/test")
BOUND = 30  # seconds: a liveness bound, never a timing claim
CHROOT = "/change-history-test"


@pytest.fixture(params=["etcd", "zookeeper"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[MetadataStore]:
    """A `MetadataStore` on the session's etcd, or on its ZooKeeper under a chroot of its
    own; empty."""
    if request.param == "etcd":
        etcd: EmbeddedEtcd = request.getfixturevalue("etcd")
        raw: RawEtcd = request.getfixturevalue("raw_etcd")
        raw.wipe()
        store = MetadataStore([etcd.endpoint], timeout=5)
    else:
        zookeeper: EmbeddedZooKeeper = request.getfixturevalue("zookeeper")
        client = KazooClient(hosts=zookeeper.hosts(), timeout=10)
        client.start(10)
        try:
            client.delete(CHROOT, recursive=True)
        finally:
            client.stop()
            client.close()
        backend = ZooKeeperBackend(zookeeper.hosts(), CHROOT, timeout=5)
        store = MetadataStore([], timeout=5, zookeeper=backend)
    yield store
    await store.close()


def keys_changed(records: list[ChangeRecord]) -> list[list[tuple[str, Any, Any]]]:
    return [[(c["key"], c["before"], c["after"]) for c in r.body["changes"]] for r in records]


async def test_every_write_method_records_in_its_own_transaction(store: MetadataStore) -> None:
    await store.put("/admin/x/unrecorded", b"{}")  # no context: no record
    with recording(CONTEXT):
        await store.put("/ledgers/x", b"{}")  # not an admin document: no record
        created = await store.create("/admin/x/a", b'{"v":1}')
        await store.put("/admin/x/a", b'{"v":2}')
        await store.commit([Guard("/admin/x/a", created + 1)],
                           {"/admin/x/a": b'{"v":3}', "/admin/x/b": b"[]"})  # fmt: skip
        await store.update_json("/admin/x/b", lambda doc: [*doc, 1])
        await store.put("/admin/x/t/x", b"1")
        await store.delete_tree("/admin/x/t")
        await store.delete("/admin/x/a")
        with pytest.raises(BadVersion):
            await store.commit([Guard("/admin/x/b", 1)], {"/admin/x/b": b"[9]"})  # no record
    records = await store.read_changes()
    assert keys_changed(records) == [
        [("/admin/x/a", None, {"v": 1})],
        [("/admin/x/a", {"v": 1}, {"v": 2})],
        [("/admin/x/a", {"v": 2}, {"v": 3}), ("/admin/x/b", None, [])],
        [("/admin/x/b", [], [1])],
        [("/admin/x/t/x", None, 1)],
        [("/admin/x/t/x", 1, None)],
        [("/admin/x/a", {"v": 3}, None)],
    ]
    assert records[0].revision == created
    assert {r.body["role"] for r in records} == {"ops"}
    assert all(a.revision < b.revision for a, b in itertools.pairwise(records))


async def test_group_commit_records_each_update_in_order_in_one_transaction(
    store: MetadataStore,
) -> None:
    async def add(item: int) -> None:
        context = ChangeContext(None, None, "POST", f"/item/{item}")
        with recording(context):
            await store.update_json("/admin/x/list", lambda doc: [*(doc or []), item])

    await asyncio.wait_for(asyncio.gather(*(add(i) for i in range(20))), BOUND)
    records = await store.read_changes()
    assert len(records) == 20
    assert len({r.revision for r in records}) < 20  # batches shared transactions
    befores = [r.body["changes"][0]["before"] for r in records]
    afters = [r.body["changes"][0]["after"] for r in records]
    assert befores[0] is None and befores[1:] == afters[:-1]
    assert afters[-1] == await store.get_json("/admin/x/list")
    # Paging never splits a transaction: every page ends where a revision ends.
    since, paged = 0, []
    while page := await store.read_changes(since, limit=3):
        paged += page
        since = page[-1].revision
    assert [r.key for r in paged] == [r.key for r in records]


async def test_pruning_by_count_counts_the_records_of_a_batch(store: MetadataStore) -> None:
    async def add(item: int) -> None:
        with recording(ChangeContext(None, None, "POST", f"/item/{item}")):
            await store.update_json("/admin/x/list", lambda doc: [*(doc or []), item])

    await asyncio.wait_for(asyncio.gather(*(add(i) for i in range(20))), BOUND)
    records = await store.read_changes()
    deleted = await store.prune_changes(max_records=5, max_age_seconds=0)
    kept = await store.read_changes()
    # The newest records stay: 5, or on ZooKeeper the newest batches whole that hold them.
    assert deleted + len(kept) == 20 and len(kept) >= 5
    assert [r.key for r in kept] == [r.key for r in records[20 - len(kept):]]
    oldest_kept = [r for r in records if r.revision == kept[0].revision]
    assert len(kept) == 5 or (oldest_kept[0] == kept[0] and len(kept) - len(oldest_kept) < 5)


def test_a_batch_of_records_in_one_key_reads_back_as_its_records() -> None:
    log = ChangeLog()
    made = [log.record(ChangeContext("r", None, "POST", f"/p/{i}"),
                       [KeyChange("/admin/x/a", b'{"v":%d}' % i, b'{"v":%d}' % (i + 1))])
            for i in range(3)]  # fmt: skip
    key, value = ChangeLog.batch(made)
    assert key == f"{made[0][0]}-3" and ChangeLog.records_in(key) == 3
    assert ChangeLog.records_in(made[0][0]) == 1
    decoded = ChangeLog.decode(key, value, 7)
    assert [(r.key, r.revision, r.body) for r in decoded] == [
        (k, 7, json.loads(v)) for k, v in made
    ]
    assert [r.sequence for r in decoded] == sorted(r.sequence for r in decoded)
    [single] = ChangeLog.decode(made[0][0], made[0][1], 7)
    assert single.body == json.loads(made[0][1]) and single.key == made[0][0]


async def test_prune_by_count_and_by_age(store: MetadataStore) -> None:
    with recording(CONTEXT):
        for index in range(10):
            await store.put(f"/admin/x/k{index}", b"1")
    assert await store.prune_changes(max_records=4, max_age_seconds=0) == 6
    assert [r.body["changes"][0]["key"] for r in await store.read_changes()] == [
        "/admin/x/k6", "/admin/x/k7", "/admin/x/k8", "/admin/x/k9"
    ]
    assert await store.prune_changes(max_records=0, max_age_seconds=3600) == 0
    log = ChangeLog()
    assert log.age_cutoff_key(60, now=1000.0) == f"{paths.CHANGE_HISTORY}/0000000940000"
    # A cutoff in the future (a negative age) is "everything is older".
    assert await store.prune_changes(max_records=0, max_age_seconds=-1e9) == 0
    assert await store.prune_changes(max_records=0, max_age_seconds=1e-9) == 4
    assert await store.read_changes() == []


async def test_the_pruner_keeps_the_history_within_its_limit(store: MetadataStore) -> None:
    settings = Settings(changeHistoryMaxRecords=3, changeHistoryPruneIntervalSeconds=0.05)
    pruner = HistoryPruner(store, settings)
    pruner.start()
    try:
        with recording(CONTEXT):
            for index in range(8):
                await store.put(f"/admin/x/p{index}", b"1")

        async def pruned() -> bool:
            return len(await store.read_changes()) == 3

        await wait_until_async(pruned, BOUND)
    finally:
        await pruner.stop()


def apply_partial(document: dict[str, Any], before: dict[str, Any],
                  after: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """Replay a partial change (`changed_parts`) onto the document it was taken from."""
    result = dict(document)
    for key in before.keys() - after.keys():
        del result[key]
    for key, new in after.items():
        old = before.get(key)
        if key in before and isinstance(old, dict) and isinstance(new, dict):
            result[key] = apply_partial(result[key], old, new)
        else:
            result[key] = new
    return result


async def test_a_large_document_is_recorded_as_the_parts_that_changed(
    store: MetadataStore,
) -> None:
    racks = {f"10.0.{i // 250}.{i % 250}:3181": {"rack": f"/r{i % 20}"} for i in range(1000)}
    await store.put(paths.BOOKIES_RACK_CONFIG, json.dumps({"default": racks}).encode())

    async def move(index: int) -> None:
        bookie = f"10.0.{index // 250}.{index % 250}:3181"

        def change(doc: dict[str, Any]) -> dict[str, Any]:
            if index % 3 == 0:
                del doc["default"][bookie]
            else:
                doc["default"][bookie] = {"rack": "/moved"}
            doc.setdefault("other", {})[f"new-{index}"] = {"rack": "/n"}
            return doc

        with recording(ChangeContext(None, None, "POST", f"/move/{index}")):
            await store.update_json(paths.BOOKIES_RACK_CONFIG, change)

    await asyncio.wait_for(asyncio.gather(*(move(i) for i in range(12))), BOUND)
    records = await store.read_changes()
    assert len(records) == 12
    document: dict[str, Any] = {"default": racks}
    for record in records:
        change = record.body["changes"][0]
        assert change["partial"] is True
        assert len(json.dumps(change)) < 300  # the parts that changed, not 2 x 40 KB
        document = apply_partial(document, change["before"], change["after"])
    assert document == await store.get_json(paths.BOOKIES_RACK_CONFIG)
    first = next(r for r in records if r.body["path"] == "/move/0").body["changes"][0]
    assert first["before"]["default"] == {"10.0.0.0:3181": {"rack": "/r0"}}
    assert "10.0.0.0:3181" not in first["after"].get("default", {})


def test_changed_parts_rebuild_the_new_document_and_hold_only_what_changed() -> None:
    rng = random.Random(7)
    for size in (3, 40, 300):  # small objects key by key, large ones compared in C first
        before = {
            "g1": {f"b{i}": {"rack": f"/r{i % 5}", "n": i} for i in range(size)},
            "g2": {f"c{i}": [i, {"x": i}] for i in range(size)},
            "flag": True,
        }
        for _ in range(20):
            after = json.loads(json.dumps(before))
            for _ in range(rng.randrange(1, 4)):
                group = after[rng.choice(["g1", "g2"])]
                if not group:
                    continue
                key = rng.choice(list(group))
                action = rng.randrange(4)
                if action == 0:
                    del group[key]
                elif action == 1:
                    group[f"new{rng.randrange(10**6)}"] = {"rack": "/n"}
                elif action == 2:
                    group[key] = {"rack": "/moved"}
                else:
                    after["flag"] = not after["flag"]
            removed, added = changed_parts(before, after)
            rebuilt = json.loads(json.dumps(before))
            apply_changed_parts(rebuilt, removed, added)
            assert rebuilt == after
            assert len(json.dumps([removed, added])) < 400  # never the unchanged bookies
            before = after
    assert changed_parts({"a": 1, "b": {"c": 2}}, {"b": {"c": 2}, "a": 1}) == ({}, {})
    assert changed_parts({"a": {"x": 1}}, {"a": 5}) == ({"a": {"x": 1}}, {"a": 5})
