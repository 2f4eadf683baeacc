"""The bookie as a server: bad frames, fencing, registration on a lease, read-only mode."""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from metastore.bookie_service_info import BOOKIE_RPC, decode_bookie_service_info
from metastore.paths import bookie_available, bookie_readonly
from storage.bookie.errors import Fenced, ReadOnly, Unauthorized
from storage.bookie.protocol import encode_read
from storage.bookie_client import BookieClient
from tests.storage.bookie.conftest import BookieFactory
from tests.storage.bookie.support import MASTER_KEY, entry
from tests.support import RawEtcd, wait_until, wait_until_async

OTHER_KEY = b"\xee" * 20


def closed_by_peer(sock: socket.socket) -> bool:
    sock.settimeout(5)
    try:
        return sock.recv(1024) == b""
    except ConnectionResetError:
        return True


GARBAGE = [
    b"\xff\xff\xff\xff" + b"\0" * 32,  # a frame length far over the limit
    bytes.fromhex("000000080701000000000000"),  # protocol version 7
    bytes.fromhex("000000080201000000000000"),  # an add too short for its ids
    bytes.fromhex("0000001402630000") + b"\0" * 16,  # an unknown opcode
]


async def test_malformed_frame_closes_only_that_connection(start_bookie: BookieFactory) -> None:
    bookie = start_bookie()
    async with await BookieClient.connect(bookie.bookie_id) as good:
        await good.add(1, 0, MASTER_KEY, entry(1, 0))
        for i, garbage in enumerate(GARBAGE, start=1):
            with socket.create_connection(("127.0.0.1", bookie.port)) as bad:
                bad.sendall(garbage + encode_read(1, 0))
                assert closed_by_peer(bad), garbage
            await good.add(1, i, MASTER_KEY, entry(1, i))  # the other connection is unharmed
            assert await good.read(1, i) == entry(1, i)
    assert bookie.process is not None and bookie.process.poll() is None


async def test_fencing_semantics(start_bookie: BookieFactory) -> None:
    bookie = start_bookie()
    async with await BookieClient.connect(bookie.bookie_id) as client:
        for i in range(3):
            await client.add(2, i, MASTER_KEY, entry(2, i))
        with pytest.raises(Unauthorized):
            await client.read(2, -1, fence=True, master_key=OTHER_KEY)
        await client.add(2, 3, MASTER_KEY, entry(2, 3))  # a refused fence fenced nothing
        # A fencing read of "last" fences and answers the last entry.
        assert await client.read(2, -1, fence=True, master_key=MASTER_KEY) == entry(2, 3)
        with pytest.raises(Fenced):
            await client.add(2, 4, MASTER_KEY, entry(2, 4))
        await client.add(2, 4, MASTER_KEY, entry(2, 4), recovery=True)
        assert await client.read(2, 4) == entry(2, 4)  # reads are still served
        with pytest.raises(Unauthorized):
            await client.add(2, 5, OTHER_KEY, entry(2, 5), recovery=True)
        # Fencing a ledger the bookie never saw creates it fenced.
        assert await client.fence(77, MASTER_KEY) is None
        with pytest.raises(Fenced):
            await client.add(77, 0, MASTER_KEY, entry(77, 0))
    bookie.kill()  # the fence was journalled and synced before the reply
    bookie.start()
    async with await BookieClient.connect(bookie.bookie_id) as client:
        with pytest.raises(Fenced):
            await client.add(2, 5, MASTER_KEY, entry(2, 5))
        with pytest.raises(Fenced):
            await client.add(77, 0, MASTER_KEY, entry(77, 0))
        assert await client.read(2, -1) == entry(2, 4)


def test_registration_follows_the_lease(start_bookie: BookieFactory, raw_etcd: RawEtcd) -> None:
    bookie = start_bookie(lease_ttl=2)
    value = raw_etcd.get(bookie_available(bookie.bookie_id))
    assert value is not None
    info = decode_bookie_service_info(bookie.bookie_id, value)
    (endpoint,) = info.endpoints
    assert (endpoint.host, endpoint.port, endpoint.protocol) == (
        "127.0.0.1",
        bookie.port,
        BOOKIE_RPC,
    )
    # Still there after several lease periods: the bookie keeps its lease alive.
    time.sleep(2.5)
    assert raw_etcd.get(bookie_available(bookie.bookie_id)) is not None
    bookie.kill()  # no clean-up: only the lease expiring removes the key
    wait_until(lambda: raw_etcd.get(bookie_available(bookie.bookie_id)) is None, timeout=15)
    bookie.start()
    bookie.stop()  # a clean stop removes it at once
    assert raw_etcd.get(bookie_available(bookie.bookie_id)) is None


def fill(path: Path, leave_free: int) -> None:
    """Take the file system's free space down to about `leave_free` bytes. The bookie's
    journal writes zeros ahead of its records meanwhile, so when the space measured is gone
    before it is taken, it is measured again."""
    for _ in range(50):
        stat = os.statvfs(path.parent)
        size = stat.f_bavail * stat.f_frsize - leave_free
        try:
            with open(path, "wb") as f:
                os.posix_fallocate(f.fileno(), 0, size)
            return
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
    raise AssertionError(f"could not fill {path.parent}")


async def test_disk_full_switches_to_readonly_and_back(
    start_bookie: BookieFactory, raw_etcd: RawEtcd, small_disk: Path
) -> None:
    conf = {"journalPreAllocSizeMB": "1", "diskCheckInterval": "100"}
    bookie = start_bookie("disk/bookie", conf=conf)
    assert bookie.log_path.parent == small_disk
    writable, readonly = bookie_available(bookie.bookie_id), bookie_readonly(bookie.bookie_id)
    async with await BookieClient.connect(bookie.bookie_id) as client:
        await client.add(4, 0, MASTER_KEY, entry(4, 0))
        filler = small_disk / "filler"
        fill(filler, leave_free=512 * 1024)  # 98% used, over diskUsageThreshold 0.95
        wait_until(lambda: raw_etcd.get(readonly) is not None and raw_etcd.get(writable) is None)
        with pytest.raises(ReadOnly):
            await client.add(4, 1, MASTER_KEY, entry(4, 1))
        assert await client.read(4, 0) == entry(4, 0)  # reads go on
        filler.unlink()
        wait_until(lambda: raw_etcd.get(writable) is not None and raw_etcd.get(readonly) is None)

        async def added() -> bool:  # the bookie flips its own flag within one check interval
            await client.add(4, 1, MASTER_KEY, entry(4, 1))  # ReadOnly until then
            return True

        await wait_until_async(added, 5)
        assert await client.read(4, 1) == entry(4, 1)


def test_python_gc_modes(tmp_path: Path) -> None:
    """`--python-gc`: freeze-lazy by default (start-up objects frozen, a 20,000-object young
    generation, cycles still collected); CPython's own settings on request; bad modes refused."""
    from storage.bookie.__main__ import parse_command
    from storage.runtime import set_gc

    base = ["--bookie-id", "127.0.0.1:1", "--data-dir", str(tmp_path),
            "--metadata-store-url", "etcd:http://127.0.0.1:1"]
    assert parse_command(base)[1] == "freeze-lazy"
    assert parse_command([*base, "--python-gc", "default"])[1] == "default"
    with pytest.raises(SystemExit):
        parse_command([*base, "--python-gc", "sometimes"])
    probe = (
        "import gc, sys; from storage.runtime import set_gc; set_gc(sys.argv[1]); "
        "print(gc.isenabled(), gc.get_threshold()[0], gc.get_freeze_count() > 0)"
    )
    found = {
        mode: subprocess.run(
            [sys.executable, "-c", probe, mode], capture_output=True, text=True, check=True,
            cwd=Path(__file__).resolve().parents[3],
        ).stdout.split()
        for mode in ("freeze-lazy", "default", "off")
    }
    assert found["freeze-lazy"] == ["True", "20000", "True"]
    assert found["default"] == ["True", "700", "False"]
    assert found["off"][0] == "False"
    with pytest.raises(ValueError, match="unknown GC mode"):
        set_gc("sometimes")
