"""Concurrency, multiple servers, restarts and etcd outages, against real processes."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from metastore.embedded import EmbeddedEtcd
from tests.support import RawEtcd, ServerProcess, wait_until

RACKS = "/admin/v2/bookies/racks-info"


def set_rack(url: str, bookie: str, rack: str, group: str = "default") -> int:
    response = httpx.post(f"{url}{RACKS}/{bookie}", params={"group": group}, json={"rack": rack})
    return response.status_code


def test_32_concurrent_writers_lose_no_update(admin: httpx.Client, server: ServerProcess) -> None:
    bookies = [f"10.0.{i // 256}.{i % 256}:3181" for i in range(32 * 4)]
    with ThreadPoolExecutor(max_workers=32) as pool:
        codes = list(pool.map(lambda b: set_rack(server.url, b, "/rack1"), bookies))
    assert codes == [204] * len(bookies)
    assert sorted(admin.get(RACKS).json()["default"]) == sorted(bookies)


def test_two_servers_writing_one_document_lose_no_update(
    admin: httpx.Client, server: ServerProcess, etcd: EmbeddedEtcd, tmp_path: Path
) -> None:
    other = ServerProcess(etcd.url, tmp_path / "second").start()
    try:
        jobs = [(server.url if i % 2 else other.url, f"b{i}:3181") for i in range(64)]
        with ThreadPoolExecutor(max_workers=16) as pool:
            codes = list(pool.map(lambda job: set_rack(job[0], job[1], "/r"), jobs))
        assert codes == [204] * len(jobs)
        assert len(admin.get(RACKS).json()["default"]) == len(jobs)
    finally:
        other.stop()


def test_second_server_sees_changes_within_one_second(
    admin: httpx.Client, etcd: EmbeddedEtcd, tmp_path: Path
) -> None:
    other = ServerProcess(etcd.url, tmp_path / "second").start()
    try:
        assert set_rack(str(admin.base_url), "b1:3181", "/rack1") == 204
        wait_until(lambda: httpx.get(f"{other.url}{RACKS}/b1:3181").status_code == 200, 1.0)
        assert httpx.get(f"{other.url}{RACKS}/b1:3181").json() == {"rack": "/rack1"}

        assert admin.delete(f"{RACKS}/b1:3181").status_code == 204
        wait_until(lambda: httpx.get(f"{other.url}{RACKS}/b1:3181").status_code == 404, 1.0)
        assert httpx.get(f"{other.url}{RACKS}").json() == {}
    finally:
        other.stop()


def test_restart_keeps_all_state(admin: httpx.Client, etcd: EmbeddedEtcd, tmp_path: Path) -> None:
    first = ServerProcess(etcd.url, tmp_path / "first").start()
    assert set_rack(first.url, "b1:3181", "/rack1", "ssd") == 204
    first.kill()
    second = ServerProcess(etcd.url, tmp_path / "second").start()
    try:
        assert httpx.get(f"{second.url}{RACKS}").json() == {"ssd": {"b1:3181": {"rack": "/rack1"}}}
    finally:
        second.stop()


@pytest.fixture
def private_etcd(tmp_path: Path) -> EmbeddedEtcd:
    etcd = EmbeddedEtcd(tmp_path / "etcd")
    etcd.start()
    yield etcd  # type: ignore[misc]
    etcd.stop()


@pytest.mark.slow
def test_etcd_outage_fails_fast_with_503_and_recovers(
    private_etcd: EmbeddedEtcd, tmp_path: Path
) -> None:
    server = ServerProcess(private_etcd.url, tmp_path / "server").start()
    try:
        assert set_rack(server.url, "before:3181", "/r1") == 204
        private_etcd.kill()

        for path in (f"{RACKS}/during:3181", f"{RACKS}/before:3181"):
            started = time.monotonic()
            response = httpx.post(
                f"{server.url}{path}", params={"group": "g"}, json={"rack": "/r2"}, timeout=30
            )
            assert time.monotonic() - started < 5.5
            assert response.status_code == 503
            # Answered by the store's failure, as a read is, not left to the request deadline.
            assert "metadata store unavailable" in response.json()["reason"]
        started = time.monotonic()
        read = httpx.get(f"{server.url}{RACKS}", timeout=30)
        assert time.monotonic() - started < 5.5
        assert read.status_code == 503

        private_etcd.start()
        wait_until(lambda: set_rack(server.url, "after:3181", "/r3") == 204, timeout=15)
        racks = httpx.get(f"{server.url}{RACKS}").json()
        assert racks == {"default": {"after:3181": {"rack": "/r3"}, "before:3181": {"rack": "/r1"}}}
        assert RawEtcd(private_etcd.endpoint).get_json("/bookies") == racks
    finally:
        server.stop()


@pytest.mark.slow
def test_etcd_killed_under_load_loses_no_acknowledged_write(
    private_etcd: EmbeddedEtcd, tmp_path: Path
) -> None:
    server = ServerProcess(private_etcd.url, tmp_path / "server").start()
    acknowledged: list[str] = []

    def writer(worker: int) -> None:
        for i in range(40):
            bookie = f"w{worker}-{i}:3181"
            try:
                if set_rack(server.url, bookie, "/r") == 204:
                    acknowledged.append(bookie)
            except httpx.HTTPError:
                pass

    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            futures = [pool.submit(writer, w) for w in range(8)]
            wait_until(lambda: len(acknowledged) >= 20, timeout=20)
            private_etcd.kill()
            private_etcd.start()
            for future in futures:
                future.result()
        stored = RawEtcd(private_etcd.endpoint).get_json("/bookies")["default"]
        assert set(acknowledged) <= set(stored)
        wait_until(lambda: set_rack(server.url, "final:3181", "/r") == 204, timeout=15)
    finally:
        server.stop()
