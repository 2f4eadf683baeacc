"""Watchers that never read, during sustained rack writes on a 1,000-bookie map: each is told
to resync once the changes waiting for it exceed their byte bound, is dropped once a write to
it has been blocked for `watchSendTimeoutSeconds`, and the service's memory stays within the
bound the README states (QUEUE_BYTES + 2 x CHUNK_BYTES per watcher), while other clients'
writes go on."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from api.services.watch import CHUNK_BYTES, QUEUE_BYTES
from metastore.embedded import EmbeddedEtcd
from tests.support import ServerProcess

WATCHERS = 10
SEND_TIMEOUT = 3.0
MARGIN = 30.0
BOOKIES = 1000
TCP_ESTABLISHED = 1  # tcp_info's first byte, Linux's TCP state
# per watcher, as stated, plus room for the service's own growth under the write load
BOUND = WATCHERS * (QUEUE_BYTES + 2 * CHUNK_BYTES) + 150 * 2**20


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    work: Path = tmp_path_factory.mktemp("watchers")
    etcd = EmbeddedEtcd(work / "etcd")
    etcd.start()
    server = None
    try:
        server = ServerProcess(etcd.url, work / "service", extra_conf={
            "initializeClusterMetadata": "false",
            "watchSendTimeoutSeconds": str(SEND_TIMEOUT),
        }).start()
        yield server
    finally:
        if server is not None:
            server.stop()
        etcd.stop()


def rss(server: ServerProcess) -> int:
    assert server.process is not None
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def stalled_watcher(port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(b"GET /admin/v2/watch?prefix=bookies HTTP/1.1\r\nHost: x\r\n\r\n")
    return sock


def is_closed(sock: socket.socket) -> bool:
    """The peer closed (or reset) it, seen in the TCP state without reading anything."""
    state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]
    return state != TCP_ESTABLISHED


def test_watchers_that_never_read_are_bounded_and_dropped(service: ServerProcess) -> None:
    port = int(service.url.rsplit(":", 1)[1])
    rack_map = {"default": {f"10.0.{i // 250}.{i % 250}:3181": {
        "rack": f"/rack-{i % 40}", "hostname": f"bookie-{i}.example.com"}
        for i in range(BOOKIES)}}
    with httpx.Client(base_url=service.url, timeout=30) as http:
        assert http.put("/admin/v2/bookies/racks-info", json=rack_map).status_code in (200, 204)
        baseline = rss(service)
        watchers = [stalled_watcher(port) for _ in range(WATCHERS)]
        stop = threading.Event()
        writes: list[int] = []

        def write() -> None:
            with httpx.Client(base_url=service.url, timeout=30) as writer:
                n = 0
                while not stop.is_set():
                    bookie = f"10.0.0.{n % 250}:3181"
                    writes.append(writer.post(
                        f"/admin/v2/bookies/racks-info/{bookie}", params={"group": "default"},
                        json={"rack": f"/rack-{n % 41}", "hostname": "h"}).status_code)
                    n += 1

        writer = threading.Thread(target=write)
        writer.start()
        peak = baseline
        started = time.monotonic()
        dropped: dict[int, float] = {}
        try:
            while len(dropped) < WATCHERS and time.monotonic() - started < SEND_TIMEOUT + MARGIN:
                peak = max(peak, rss(service))
                for index, sock in enumerate(watchers):
                    if index not in dropped and is_closed(sock):
                        dropped[index] = time.monotonic() - started
                time.sleep(0.1)
            # the writes go on after the watchers are gone, and memory does not climb
            time.sleep(1)
            peak = max(peak, rss(service))
        finally:
            stop.set()
            writer.join(timeout=60)
            for sock in watchers:
                sock.close()
    assert len(dropped) == WATCHERS, dropped
    assert max(dropped.values()) <= SEND_TIMEOUT + MARGIN
    assert len(writes) > 50 and set(writes) == {204}, (len(writes), set(writes))
    assert peak - baseline <= BOUND, (peak - baseline) / 2**20
    log = (service.workdir / "server.log").read_text()
    assert "read nothing for 3 s" in log and "Traceback" not in log
