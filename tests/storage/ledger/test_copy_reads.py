"""Reads for a repair copy (`ReadableLedger.read_packaged` with `avoid` and `spread`), against
real bookies: the bookies to avoid are asked only when no other replica serves the entry, and
a stripe's reads are shared among the replicas instead of going mostly to the first one."""

from __future__ import annotations

from collections import Counter

from placement import AffinityGroups
from storage.bookie_client import BookieClient
from storage.ledger import BookiePool, LedgerSpec
from storage.ledger.bookies import BookieConnection
from storage.ledger.handle import ReadableLedger
from storage.ledger.metadata import managed_ledger_custom_metadata
from tests.storage.testbed import GROUP, Cluster, ledger_client

STRICT = AffinityGroups((GROUP,), strict=True)


class CountingConnection:
    """A real bookie connection that counts the reads it sends."""

    def __init__(self, inner: BookieClient, bookie: str, reads: Counter[str]) -> None:
        self.inner = inner
        self.bookie = bookie
        self.reads = reads
        self.add = inner.add
        self.timeout = inner.timeout
        self.send_add = inner.send_add
        self.listen_adds = inner.listen_adds
        self.unlisten_adds = inner.unlisten_adds

    async def read(self, ledger_id: int, entry_id: int, *, fence: bool = False,
                   master_key: bytes | None = None) -> bytes:
        self.reads[self.bookie] += 1
        return await self.inner.read(ledger_id, entry_id, fence=fence, master_key=master_key)

    @property
    def connected(self) -> bool:
        return self.inner.connected

    async def close(self) -> None:
        await self.inner.close()


def counting_pool(reads: Counter[str]) -> BookiePool:
    async def connect(bookie: str) -> BookieConnection:
        return CountingConnection(await BookieClient.connect(bookie), bookie, reads)

    return BookiePool(connect)


async def test_copy_reads_skip_the_lost_bookie_and_share_the_rest(cluster: Cluster) -> None:
    async with ledger_client(cluster) as client:
        handle = await client.create(LedgerSpec(
            3, 3, 2, managed_ledger_custom_metadata("t/ns/persistent/copy", STRICT), STRICT))
        payloads = [bytes([i]) * 100 for i in range(30)]
        for payload in payloads:
            await handle.add(payload)
        md = await handle.close()
    first, second, third = md.current_ensemble

    reads: Counter[str] = Counter()
    pool = counting_pool(reads)
    try:
        reader = ReadableLedger(md, pool)
        # plain reads: each entry from the first replica of its write set
        for entry_id in range(30):
            await reader.read_packaged(entry_id)
        assert reads == {first: 10, second: 10, third: 10}

        reads.clear()
        for entry_id in range(30):  # the copy of `first`'s stripe: it is never asked
            packaged, header = await reader.read_packaged(entry_id, avoid={first}, spread=True)
            assert packaged[36:] == payloads[entry_id] and header.entry_id == entry_id
        assert reads == {second: 15, third: 15}

        reads.clear()
        # without `spread`, the survivors' share follows the write sets: `second` is first
        # in the write sets of two entries out of three once `first` is skipped
        for entry_id in range(30):
            await reader.read_packaged(entry_id, avoid={first})
        assert reads == {second: 20, third: 10}

        reads.clear()
        # every other replica avoided: the avoided ones are still tried, last
        for entry_id in range(3):
            await reader.read_packaged(entry_id, avoid={second, third})
        assert reads == {first: 3}
    finally:
        await pool.close()
