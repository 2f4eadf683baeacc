"""Ledger ids as Pulsar's generator makes them on etcd: sequence keys, the switch to 63-bit
ids, and uniqueness under concurrent generators in one process and across processes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest

from metastore import paths, pulsar_versions
from metastore.embedded import EmbeddedEtcd
from metastore.errors import AlreadyExists
from metastore.ledger_ids import LedgerIdGenerator
from metastore.store import MetadataStore
from tests.support import REPO, RawEtcd


@pytest.fixture
async def store(etcd: EmbeddedEtcd, raw_etcd: RawEtcd) -> AsyncIterator[MetadataStore]:
    raw_etcd.wipe()
    store = MetadataStore([etcd.endpoint], timeout=5)
    yield store
    await store.close()


async def test_ids_count_up_from_one_and_leave_no_sequence_keys(
    store: MetadataStore, raw_etcd: RawEtcd
) -> None:
    generator = LedgerIdGenerator(store)
    assert [await generator.generate() for _ in range(3)] == [1, 2, 3]
    await generator.close()
    # the parent key counts; the ephemeral ID-<n> keys are gone
    assert raw_etcd.keys("/ledgers") == ["/ledgers/idgen"]
    idgen = await pulsar_versions.read(store, paths.LEDGER_ID_GEN)
    assert idgen is not None and idgen.version == 3
    # a new generator (a restart) continues the same counter
    assert await LedgerIdGenerator(store).generate() == 4


async def test_sequence_key_taken_by_someone_else_is_not_handed_out(
    store: MetadataStore,
) -> None:
    """The id is only handed out after its ID-<n> key was created (Pulsar's create-if-absent):
    a stale key with the next number fails the generation instead of duplicating it."""
    generator = LedgerIdGenerator(store)
    assert await generator.generate() == 1
    await store.put("/ledgers/idgen/ID-2", b"")
    with pytest.raises(AlreadyExists, match="idgen/ID-2"):
        await generator.generate()
    assert await generator.generate() == 3


async def test_63_bit_ids_after_31_bit_ids_run_out(store: MetadataStore) -> None:
    generator = LedgerIdGenerator(store, id_limit=3)
    ids = [await generator.generate() for _ in range(6)]
    high1, high2 = 1 << 32, 2 << 32
    # 1, 2; then the short counter hits the limit and HOB-0000000001 starts at low bits 1;
    # when those reach the limit too, HOB-0000000002
    assert ids == [1, 2, high1 | 1, high1 | 2, high2 | 1, high2 | 2]
    assert await store.children(paths.LEDGER_ID_GEN_LONG) == ["HOB-0000000001", "HOB-0000000002"]
    # once switched, every generator stays on 63-bit ids
    assert await LedgerIdGenerator(store, id_limit=3).generate() == (3 << 32) | 1


async def test_concurrent_generators_never_share_an_id(store: MetadataStore) -> None:
    generators = [LedgerIdGenerator(store) for _ in range(4)]
    ids = await asyncio.gather(*(generators[i % 4].generate() for i in range(60)))
    assert sorted(ids) == list(range(1, 61))


GENERATE = """
import asyncio, sys
from metastore.ledger_ids import LedgerIdGenerator
from metastore.store import MetadataStore, parse_metadata_store_url

async def main():
    store = MetadataStore(parse_metadata_store_url(sys.argv[1]))
    generator = LedgerIdGenerator(store)
    ids = await asyncio.gather(*(generator.generate() for _ in range(int(sys.argv[2]))))
    await generator.close()
    await store.close()
    print(" ".join(map(str, ids)))

asyncio.run(main())
"""


async def test_two_processes_never_share_an_id(etcd: EmbeddedEtcd, store: MetadataStore) -> None:
    command = [sys.executable, "-c", GENERATE, etcd.url, "40"]
    processes = [
        await asyncio.create_subprocess_exec(
            *command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(2)
    ]
    here = LedgerIdGenerator(store)
    mine = [await here.generate() for _ in range(10)]
    outputs = [await asyncio.wait_for(p.communicate(), timeout=60) for p in processes]
    assert all(p.returncode == 0 for p in processes), [err for _, err in outputs]
    theirs = [int(i) for out, _ in outputs for i in out.split()]
    assert len(theirs) == 80
    assert sorted(mine + theirs) == list(range(1, 91))
