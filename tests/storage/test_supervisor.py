"""The embedded cluster: N supervised local bookie processes."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import httpx

from metastore.embedded import EmbeddedEtcd, free_port
from metastore.paths import bookie_available
from storage.bookie.format import package_entry
from storage.bookie_client import BookieClient
from storage.supervisor import LocalBookie, LocalBookies, default_ports, ports_for
from tests.support import RawEtcd, wait_until

KEY = b"\x02" * 20


def test_default_ports_start_at_3181() -> None:
    assert default_ports(4) == [3181, 3182, 3183, 3184]


def test_supervisor_starts_restarts_and_stops_bookies(
    etcd: EmbeddedEtcd, raw_etcd: RawEtcd, tmp_path: Path
) -> None:
    cluster = LocalBookies(
        tmp_path, etcd.url, [free_port(), free_port()], conf={}, lease_ttl=5, check_every=0.1
    )
    cluster.start()
    try:
        for bookie_id in cluster.bookie_ids:
            wait_until(lambda b=bookie_id: raw_etcd.get(bookie_available(b)) is not None, 30)
        victim = cluster.bookies[0]
        assert victim.process is not None
        old_pid = victim.process.pid
        entry = package_entry(1, 0, -1, 3, b"abc")
        asyncio.run(_add(victim.bookie_id, entry))
        # each bookie serves its metrics on a port of its own (prometheusStatsHttpPort)
        ports = {b.metrics_port for b in cluster.bookies} | {b.port for b in cluster.bookies}
        assert len(ports) == 4 and 0 not in ports
        assert victim.metrics_url is not None
        text = httpx.get(victim.metrics_url, timeout=10).text
        assert 'bookkeeper_server_ADD_ENTRY_count{success="true"} 1.0' in text
        assert f'bookie_WRITE_BYTES {float(len(entry))}' in text
        assert "bookie_SERVER_STATUS 1.0" in text
        os.kill(old_pid, signal.SIGKILL)
        wait_until(lambda: victim.restarts == 1 and victim.running, timeout=15)
        assert victim.process is not None and victim.process.pid != old_pid
        # The restarted bookie serves what it acknowledged before the crash.
        assert wait_until(lambda: asyncio.run(_read(victim.bookie_id)) == entry, timeout=30)
        assert (tmp_path / f"bookie-{victim.port}" / "journal").is_dir()
    finally:
        cluster.stop()
    assert not any(bookie.running for bookie in cluster.bookies)
    for bookie in cluster.bookies:  # a clean stop deregisters at once
        left = raw_etcd.get(bookie_available(bookie.bookie_id))
        assert left is None, (bookie.process and bookie.process.returncode, _log_tail(bookie))


def _log_tail(bookie: LocalBookie) -> str:
    return (bookie.data_dir.parent / f"bookie-{bookie.port}.log").read_text()[-4000:]


async def _add(address: str, entry: bytes) -> None:
    async with await BookieClient.connect(address) as client:
        await client.add(1, 0, KEY, entry)


async def _read(address: str) -> bytes:
    async with await BookieClient.connect(address, timeout=2) as client:
        return await client.read(1, 0)


def test_free_ports_are_reused_from_existing_bookie_data(tmp_path: Path) -> None:
    first = ports_for(tmp_path, 2)
    assert len(set(first)) == 2
    for port in first:
        (tmp_path / f"bookie-{port}").mkdir()
    again = ports_for(tmp_path, 3)  # a restart keeps the ids of the bookies with data
    assert again[:2] == sorted(first) and len(set(again)) == 3
