"""Group commit (metastore/group_commit.py) against a real etcd: coalescing, pipelining, and
failure isolation (a failure while preparing or sending a batch fails only its cause)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import pytest

from metastore.embedded import EmbeddedEtcd, free_port
from metastore.errors import InvalidValue, Unavailable
from metastore.guards import Guard
from metastore.store import Endpoint, MetadataStore
from tests.support import RawEtcd

BOUND = 30  # seconds: a liveness bound for awaiting answers, never a timing claim


class CountingStore(MetadataStore):
    """A store that counts the group-commit writes it has in flight (through the `swap`
    seam group commit calls) and says when one starts."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.in_flight = 0
        self.most_in_flight = 0
        self.writes = 0
        self.write_started = asyncio.Event()

    async def swap(
        self, path: str, guard: Guard, value: bytes | None, records: Sequence[Any] = ()
    ) -> int:
        self.in_flight += 1
        self.writes += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        self.write_started.set()
        try:
            return await super().swap(path, guard, value, records)
        finally:
            self.in_flight -= 1


@pytest.fixture
async def store(etcd: EmbeddedEtcd, raw_etcd: RawEtcd) -> AsyncIterator[CountingStore]:
    raw_etcd.wipe()
    store = CountingStore([etcd.endpoint], timeout=5)
    yield store
    await store.close()


async def in_waves(
    store: CountingStore, waves: int, make: Callable[[int], list[Awaitable[Any]]]
) -> list[Any]:
    """Queue each wave once a write of the previous one has started, so waves queue while
    earlier batches are in flight; the answers of every update (exceptions included)."""
    pending: list[asyncio.Future[Any]] = []
    for wave in range(waves):
        store.write_started.clear()
        pending += [asyncio.ensure_future(update) for update in make(wave)]
        await asyncio.wait_for(store.write_started.wait(), BOUND)
    return await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), BOUND)


def rack_write(bookie: str, rack: str) -> Callable[[Any], Any]:
    def mutate(doc: Any) -> Any:
        config = doc if isinstance(doc, dict) else {}
        config.setdefault("default", {})[bookie] = {"rack": rack}
        return config

    return mutate


async def test_a_value_that_cannot_be_encoded_fails_only_its_own_update(
    store: CountingStore, raw_etcd: RawEtcd, caplog: pytest.LogCaptureFixture
) -> None:
    """60 concurrent valid rack writes and one with a lone surrogate: the 60 succeed, the
    poisoned one fails with a clear error, and the log names the key, not the document."""
    await store.put("/bookies", b'{"default":{"seed:3181":{"rack":"/r0"}}}')
    updates = [store.update_json("/bookies", rack_write(f"b{i}:3181", f"/r{i}")) for i in range(30)]
    updates.append(store.update_json("/bookies", rack_write("bad:3181", "/\ud800")))
    updates += [
        store.update_json("/bookies", rack_write(f"b{i}:3181", f"/r{i}")) for i in range(30, 60)
    ]
    with caplog.at_level(logging.WARNING, logger="metastore"):
        results = await asyncio.wait_for(asyncio.gather(*updates, return_exceptions=True), BOUND)
    failures = [r for r in results if isinstance(r, BaseException)]
    assert len(failures) == 1 and isinstance(failures[0], InvalidValue), failures
    assert "/bookies" in str(failures[0]) and "surrogate" in str(failures[0])
    stored = raw_etcd.get_json("/bookies")["default"]
    assert sorted(stored) == sorted(["seed:3181", *(f"b{i}:3181" for i in range(60))])
    assert all(stored[f"b{i}:3181"] == {"rack": f"/r{i}"} for i in range(60))
    logged = [r.getMessage() for r in caplog.records]
    assert any("/bookies" in line for line in logged), logged
    assert not any("seed:3181" in line or "b59:3181" in line for line in logged), logged


async def test_updates_taken_off_the_queue_are_always_answered() -> None:
    """Reading the key before a batch fails (etcd unreachable): every queued update is
    answered with the error instead of waiting forever."""
    store = MetadataStore([Endpoint("127.0.0.1", free_port())], timeout=1)
    try:
        updates = [store.update_json("/k", lambda doc: {"n": 1}) for _ in range(5)]
        results = await asyncio.wait_for(asyncio.gather(*updates, return_exceptions=True), BOUND)
    finally:
        await store.close()
    assert all(isinstance(r, Unavailable) for r in results), results


@pytest.mark.parametrize("depth", [1, 2])
async def test_a_poisoned_batch_behind_one_in_flight_leaves_the_others_intact(
    etcd: EmbeddedEtcd, raw_etcd: RawEtcd, depth: int
) -> None:
    """A batch queued while another is in flight (chained on its value when pipelined)
    holds a poisoned update: the batch in flight and the valid updates beside the poisoned
    one land, and a later update starts from the right document."""
    raw_etcd.wipe()
    store = CountingStore([etcd.endpoint], timeout=5, pipeline_depth=depth)
    try:
        first = asyncio.ensure_future(store.update_json("/bookies", rack_write("a:3181", "/a")))
        await asyncio.wait_for(store.write_started.wait(), BOUND)
        behind = [
            store.update_json("/bookies", rack_write("bad:3181", "/\ud800")),
            store.update_json("/bookies", rack_write("b:3181", "/b")),
        ]
        results = await asyncio.wait_for(
            asyncio.gather(first, *behind, return_exceptions=True), BOUND
        )
        later = await store.update_json("/bookies", rack_write("c:3181", "/c"))
    finally:
        await store.close()
    assert isinstance(results[1], InvalidValue)
    assert not isinstance(results[0], BaseException) and not isinstance(results[2], BaseException)
    assert later is not None
    assert raw_etcd.get_json("/bookies") == {
        "default": {"a:3181": {"rack": "/a"}, "b:3181": {"rack": "/b"}, "c:3181": {"rack": "/c"}}
    }


async def test_concurrent_updates_in_one_process_are_coalesced_and_isolated(
    store: CountingStore,
) -> None:
    """Many writers of one key share transactions; one writer's failure fails only itself."""
    await store.put("/doc", b"[]")

    def append(item: int) -> Callable[[bytes | None], bytes]:
        def mutate(raw: bytes | None) -> bytes:
            if item == 13:
                raise ValueError("unlucky")
            return json.dumps([*json.loads(raw or b"[]"), item]).encode()

        return mutate

    results = await asyncio.gather(
        *(store.update("/doc", append(i)) for i in range(50)), return_exceptions=True
    )
    failures = [r for r in results if isinstance(r, Exception)]
    assert [str(f) for f in failures] == ["unlucky"]
    stored = json.loads((await store.get("/doc")).value)  # type: ignore[union-attr]
    assert sorted(stored) == [i for i in range(50) if i != 13]
    assert store.writes < 50, "writes were not coalesced"


async def test_writers_that_repeat_their_writes_share_one_transaction_per_round(
    store: CountingStore,
) -> None:
    """Eight writers each setting one rack after another (awaiting each answer), the second
    half starting while the first half's write is in flight: the batch after one that
    answered writers waits for their next writes, so the halves join in one transaction
    instead of alternating (each half's batch sent while the other's is in flight), and
    every write lands."""
    writers, rounds = 8, 10

    async def writer(index: int) -> None:
        for n in range(rounds):
            await store.update_json("/bookies", rack_write(f"bk{index}", f"/rack{n}"))

    store.write_started.clear()
    first = [asyncio.ensure_future(writer(i)) for i in range(writers // 2)]
    await asyncio.wait_for(store.write_started.wait(), BOUND)
    second = [asyncio.ensure_future(writer(i)) for i in range(writers // 2, writers)]
    await asyncio.wait_for(asyncio.gather(*first, *second), BOUND)
    stored = await store.get_json("/bookies")
    assert stored == {"default": {f"bk{i}": {"rack": f"/rack{rounds - 1}"} for i in range(writers)}}
    # Alternating halves take writers * rounds / 4 = 20 transactions, joined ones about 11.
    assert store.writes <= 15, f"{store.writes} transactions"


@pytest.mark.parametrize("depth", [1, 2, 3])
async def test_concurrent_updates_from_many_clients_lose_nothing(
    store: CountingStore, etcd: EmbeddedEtcd, depth: int
) -> None:
    """Separate clients (as separate servers would be) incrementing one counter, each with a
    steady stream of writers: batches lose CAS races to other clients, pipelined batches
    chained on a lost one must be retried, and no increment may be lost or doubled."""
    clients = [CountingStore([etcd.endpoint], timeout=5, pipeline_depth=depth) for _ in range(4)]

    def increment(n: int | None) -> int:
        return (n or 0) + 1

    def waves(client: CountingStore) -> Awaitable[list[Any]]:
        return in_waves(
            client, 10, lambda _: [client.update_json("/counter", increment) for _ in range(4)]
        )

    try:
        outcomes = await asyncio.gather(*(waves(c) for c in clients))
    finally:
        await asyncio.gather(*(c.close() for c in clients))
    assert not any(isinstance(o, BaseException) for per in outcomes for o in per)
    assert await store.get_json("/counter") == 160
    assert max(c.most_in_flight for c in clients) >= min(depth, 2)


async def test_pipelined_writes_keep_order_and_isolate_failures(
    etcd: EmbeddedEtcd, raw_etcd: RawEtcd
) -> None:
    """With two transactions in flight, each writer's answer is its own and the stored
    document holds every successful change in arrival order."""
    raw_etcd.wipe()
    store = CountingStore([etcd.endpoint], timeout=5, pipeline_depth=2)

    def append(item: int) -> Callable[[Any], Any]:
        def mutate(doc: list[int] | None) -> list[int]:
            if item % 7 == 3:
                raise ValueError(f"refused {item}")
            return [*(doc or []), item]

        return mutate

    try:
        outcomes = await in_waves(
            store, 5,
            lambda wave: [store.update_json("/list", append(wave * 20 + i)) for i in range(20)],
        )  # fmt: skip
    finally:
        await store.close()
    assert store.most_in_flight == 2
    refused = sorted(int(str(o).split()[1]) for o in outcomes if isinstance(o, ValueError))
    assert refused == [i for i in range(100) if i % 7 == 3]
    assert raw_etcd.get_json("/list") == [i for i in range(100) if i % 7 != 3]
