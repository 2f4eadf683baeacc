"""Ledger ids as Pulsar's generator makes them on etcd: sequence keys, the switch to 63-bit
ids, and uniqueness under concurrent generators in one process and across processes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest

from metastore import paths
from metastore.embedded import EmbeddedEtcd
from metastore.errors import AlreadyExists
from metastore.ledger_ids import LedgerIdGenerator
from metastore.versioned_keys import VersionedKeys
from tests.support import REPO, RawEtcd, wait_until_async


@pytest.fixture
async def keys(etcd: EmbeddedEtcd, raw_etcd: RawEtcd) -> AsyncIterator[VersionedKeys]:
    raw_etcd.wipe()
    keys = VersionedKeys([etcd.endpoint], timeout=5)
    yield keys
    await keys.close()


async def test_ids_count_up_from_one_and_leave_no_sequence_keys(
    keys: VersionedKeys, raw_etcd: RawEtcd
) -> None:
    generator = LedgerIdGenerator(keys)
    assert [await generator.generate() for _ in range(3)] == [1, 2, 3]
    await generator.close()
    # the parent key counts; the ephemeral ID-<n> keys are gone
    assert raw_etcd.keys("/ledgers") == ["/ledgers/idgen"]
    idgen = await keys.read(paths.LEDGER_ID_GEN)
    assert idgen is not None and idgen.version == 3
    # a new generator (a restart) continues the same counter
    assert await LedgerIdGenerator(keys).generate() == 4


async def test_close_after_the_lease_expired_unused(keys: VersionedKeys,
                                                    raw_etcd: RawEtcd) -> None:
    """A client idle for longer than the session TTL closes without an error (it raised
    etcd's "requested lease not found" when revoking the expired lease)."""
    generator = LedgerIdGenerator(keys, session_ttl=1)
    await generator.generate()
    lease = await keys.grant_lease(1)  # granted after the generator's: expires after it
    await keys.create("/lease-probe", b"", lease=lease)
    # etcd expires a 1 s lease within a few seconds
    await wait_until_async(lambda: raw_etcd.get("/lease-probe") is None, timeout=10)
    await generator.close()
    await keys.revoke_lease(lease)  # again, directly: still no error


async def test_sequence_key_taken_by_someone_else_is_not_handed_out(
    keys: VersionedKeys,
) -> None:
    """The id is only handed out after its ID-<n> key was created (Pulsar's create-if-absent):
    a stale key with the next number fails the generation instead of duplicating it."""
    generator = LedgerIdGenerator(keys)
    assert await generator.generate() == 1
    await keys.put("/ledgers/idgen/ID-2", b"")
    with pytest.raises(AlreadyExists, match="idgen/ID-2"):
        await generator.generate()
    assert await generator.generate() == 3


async def test_63_bit_ids_after_31_bit_ids_run_out(keys: VersionedKeys) -> None:
    generator = LedgerIdGenerator(keys, id_limit=3)
    ids = [await generator.generate() for _ in range(6)]
    high1, high2 = 1 << 32, 2 << 32
    # 1, 2; then the short counter hits the limit and HOB-0000000001 starts at low bits 1;
    # when those reach the limit too, HOB-0000000002
    assert ids == [1, 2, high1 | 1, high1 | 2, high2 | 1, high2 | 2]
    assert await keys.children(paths.LEDGER_ID_GEN_LONG) == ["HOB-0000000001", "HOB-0000000002"]
    # once switched, every generator stays on 63-bit ids
    assert await LedgerIdGenerator(keys, id_limit=3).generate() == (3 << 32) | 1


async def test_concurrent_generators_never_share_an_id(keys: VersionedKeys) -> None:
    generators = [LedgerIdGenerator(keys) for _ in range(4)]
    ids = await asyncio.gather(*(generators[i % 4].generate() for i in range(60)))
    assert sorted(ids) == list(range(1, 61))


GENERATE = """
import asyncio, sys
from metastore.ledger_ids import LedgerIdGenerator
from metastore.store import parse_metadata_store_url
from metastore.versioned_keys import VersionedKeys

async def main():
    keys = VersionedKeys(parse_metadata_store_url(sys.argv[1]))
    generator = LedgerIdGenerator(keys)
    ids = await asyncio.gather(*(generator.generate() for _ in range(int(sys.argv[2]))))
    await generator.close()
    await keys.close()
    print(" ".join(map(str, ids)))

asyncio.run(main())
"""


async def test_two_processes_never_share_an_id(etcd: EmbeddedEtcd, keys: VersionedKeys) -> None:
    command = [sys.executable, "-c", GENERATE, etcd.url, "40"]
    processes = [
        await asyncio.create_subprocess_exec(
            *command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(2)
    ]
    here = LedgerIdGenerator(keys)
    mine = [await here.generate() for _ in range(10)]
    outputs = [await asyncio.wait_for(p.communicate(), timeout=60) for p in processes]
    assert all(p.returncode == 0 for p in processes), [err for _, err in outputs]
    theirs = [int(i) for out, _ in outputs for i in out.split()]
    assert len(theirs) == 80
    assert sorted(mine + theirs) == list(range(1, 91))
