"""A real ZooKeeper (Debian's `zookeeper` package) on a free port, one for the test session.

Runs `org.apache.zookeeper.server.ZooKeeperServerMain` with a config of its own (client port,
data dir, admin server off) from /usr/share/java/zookeeper.jar, whose manifest names the
other jars it needs.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from metastore.embedded import free_port

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")

ON_BOTH_STORES = pytest.mark.parametrize("store_kind", ["etcd", "zookeeper"], indirect=True)
"""A module's `pytestmark`: its tests run on the etcd server, then on the ZooKeeper one
(the `store_kind` fixture under `admin` and `clean_store`)."""


def available() -> bool:
    return ZOOKEEPER_JAR.exists() and shutil.which("java") is not None


class EmbeddedZooKeeper:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Pulsar's metadataStoreUrl form."""
        return f"zk:127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        data = self.workdir / "data"
        data.mkdir(parents=True, exist_ok=True)
        cfg = self.workdir / "zoo.cfg"
        cfg.write_text(f"tickTime=2000\ndataDir={data}\nclientPort={self.port}\n"
                       "clientPortAddress=127.0.0.1\nadmin.enableServer=false\n"
                       "4lw.commands.whitelist=ruok\n")
        log = (self.workdir / "zookeeper.log").open("wb")
        self.process = subprocess.Popen(
            ["java", "-Xmx128m", "-cp", str(ZOOKEEPER_JAR),
             "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg)],
            stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"zookeeper exited with {self.process.returncode}: "
                                   f"{(self.workdir / 'zookeeper.log').read_text()[-2000:]}")
            if self._ruok():
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"zookeeper on port {self.port} not ready in {timeout}s")

    def _ruok(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as conn:
                conn.sendall(b"ruok")
                return conn.recv(4) == b"imok"
        except OSError:
            return False

    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def wipe(self) -> None:
        """Delete every znode but ZooKeeper's own `/zookeeper`."""
        from kazoo.client import KazooClient

        client = KazooClient(hosts=self.hosts(), timeout=10)
        client.start(10)
        try:
            for name in client.get_children("/"):
                if name != "zookeeper":
                    client.delete(f"/{name}", recursive=True)
        finally:
            client.stop()
            client.close()

    def pause(self) -> None:
        """Stop the server process (SIGSTOP): connections hang, nothing answers."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        self.resume()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


class RawZooKeeper:
    """Direct ZooKeeper access for assertions, bypassing our store code (kazoo, rooted at
    `chroot`), with `tests.support.RawEtcd`'s methods: a key is a znode that holds data or
    has no children (ZooKeeper's empty parents are not keys)."""

    def __init__(self, hosts: str, chroot: str) -> None:
        from kazoo.client import KazooClient

        self.chroot = chroot
        self.client = KazooClient(hosts=hosts, timeout=10)
        self.client.start(10)
        self.client.ensure_path(chroot)
        self.client.chroot = chroot

    def close(self) -> None:
        self.client.stop()
        self.client.close()

    def get(self, path: str) -> bytes | None:
        from kazoo.exceptions import NoNodeError

        try:
            value: bytes = self.client.get(path)[0]
        except NoNodeError:
            return None
        return value

    def get_json(self, path: str) -> Any:
        raw = self.get(path)
        return None if raw is None else json.loads(raw)

    def put(self, path: str, value: bytes | str | dict[str, Any] | list[Any]) -> None:
        if isinstance(value, dict | list):
            value = json.dumps(value)
        if isinstance(value, str):
            value = value.encode()
        if self.client.exists(path):
            self.client.set(path, value)
        else:
            self.client.create(path, value, makepath=True)

    def delete(self, path: str) -> None:
        """Delete `path` and everything under it."""
        self.client.delete(path, recursive=True)

    def _walk(self, path: str) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        base = path.rstrip("/")
        for name in self.client.get_children(base or "/"):
            child = f"{base}/{name}"
            value, stat = self.client.get(child)
            if value or not stat.numChildren:
                found[child] = value
            found.update(self._walk(child))
        return found

    def keys(self, prefix: str = "/") -> list[str]:
        return sorted(key for key in self._walk("/") if key.startswith(prefix))

    def snapshot(self) -> dict[str, bytes]:
        return self._walk("/")

    def wipe(self) -> None:
        for name in self.client.get_children("/"):
            self.client.delete(f"/{name}", recursive=True)
