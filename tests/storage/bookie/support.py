"""Bookie processes for tests: `python -m storage.bookie` on a free port against a real etcd."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx

from metastore.embedded import EmbeddedEtcd, dying_with_parent, free_port
from metastore.paths import bookie_available, bookie_cookie, bookie_readonly
from storage.bookie.format import package_entry
from tests.support import REPO, RawEtcd, ServerProcess, reap, wait_until

MASTER_KEY = bytes(range(20))


class BookieProcess:
    def __init__(
        self,
        etcd: RawEtcd,
        metadata_store_url: str,
        data_dir: Path,
        *,
        conf: dict[str, str] | None = None,
        lease_ttl: int = 30,
        port: int | None = None,
    ) -> None:
        self.etcd = etcd
        self.metadata_store_url = metadata_store_url
        self.data_dir = data_dir
        self.conf = conf or {}
        self.lease_ttl = lease_ttl
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bookie_id(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir.parent / f"{self.data_dir.name}.log"

    def command(self) -> list[str]:
        conf = [arg for key, value in self.conf.items() for arg in ("-c", f"{key}={value}")]
        return [
            sys.executable, "-m", "storage.bookie",
            "--bookie-id", self.bookie_id,
            "--data-dir", str(self.data_dir),
            "--metadata-store-url", self.metadata_store_url,
            "--lease-ttl", str(self.lease_ttl),
            *conf,
        ]  # fmt: skip

    def start(self, *, readonly: bool = False) -> BookieProcess:
        if not self.data_dir.exists():
            # A new bookie: a cookie left at its id by an earlier bookie on the same port (one
            # store serves many tests) would make it refuse to start, as upstream's does until
            # `bookieformat -deleteCookie`.
            cookie = bookie_cookie(self.bookie_id)
            if self.etcd.get(cookie) is not None:
                self.etcd.delete(cookie)
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.process = subprocess.Popen(
            dying_with_parent(self.command(), signal.SIGKILL), cwd=REPO, stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()
        path = bookie_readonly(self.bookie_id) if readonly else bookie_available(self.bookie_id)
        wait_until(lambda: self._alive() and self.etcd.get(path) is not None, timeout=30)
        wait_until(self._accepts, timeout=10)
        return self

    def _alive(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"bookie exited: {self.log_path.read_text()[-3000:]}")
        return True

    def _accepts(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), timeout=1):
            return True

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            reap(self.process, 20)

    def kill(self) -> None:
        self.stop(signal.SIGKILL)


@contextlib.contextmanager
def service_on_bookies(
    work: Path, count: int, *, bookie_conf: dict[str, str] | None = None,
    service_conf: dict[str, str] | None = None, namespaces: Sequence[str] = (),
) -> Iterator[tuple[ServerProcess, RawEtcd, list[BookieProcess]]]:
    """A fresh etcd, `count` bookie processes and the service on them (cluster metadata not
    initialised), with cluster `test` and each of `namespaces` ("tenant" or "tenant/ns",
    tenants allowed on `test`) created; everything stopped on exit."""
    etcd = EmbeddedEtcd(work / "etcd")
    etcd.start()
    raw = RawEtcd(etcd.endpoint)
    bookies = [BookieProcess(raw, etcd.url, work / f"bookie{i}", conf=bookie_conf)
               for i in range(count)]
    server = None
    try:
        for bookie in bookies:
            bookie.start()
        server = ServerProcess(etcd.url, work / "service", extra_conf={
            "initializeClusterMetadata": "false", **(service_conf or {})}).start()
        with httpx.Client(base_url=server.url, timeout=10) as http:
            http.put("/admin/v2/clusters/test", json={"serviceUrl": "http://x"}
                     ).raise_for_status()
            tenants: set[str] = set()
            for name in namespaces:
                tenant, _, namespace = name.partition("/")
                if tenant not in tenants:
                    http.put(f"/admin/v2/tenants/{tenant}", json={"allowedClusters": ["test"]}
                             ).raise_for_status()
                    tenants.add(tenant)
                if namespace:
                    http.put(f"/admin/v2/namespaces/{tenant}/{namespace}").raise_for_status()
        yield server, raw, bookies
    finally:
        if server is not None:
            server.stop()
        for bookie in bookies:
            bookie.kill()
        etcd.stop()


def entry(ledger_id: int, entry_id: int, payload: bytes | None = None) -> bytes:
    data = payload if payload is not None else f"L{ledger_id}E{entry_id}".encode() * 8
    return package_entry(ledger_id, entry_id, entry_id - 1, 100 * (entry_id + 1), data)
