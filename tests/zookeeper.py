"""The session's ZooKeeper for the tests (`metastore.embedded_zookeeper`, plus what tests do
to it: wipe, pause, resume) and direct access to it for assertions (`RawZooKeeper`)."""

from __future__ import annotations

import signal

import pytest

from metastore.embedded_zookeeper import EmbeddedZooKeeper as ZooKeeperServer
from metastore.embedded_zookeeper import available
from tests.support import RawStore, RawValue, pause

__all__ = ["ON_BOTH_STORES", "EmbeddedZooKeeper", "RawZooKeeper", "available"]

ON_BOTH_STORES = pytest.mark.parametrize("store_kind", ["etcd", "zookeeper"], indirect=True)
"""A module's `pytestmark`: its tests run on the etcd server, then on the ZooKeeper one
(the `store_kind` fixture under `admin` and `clean_store`)."""


class EmbeddedZooKeeper(ZooKeeperServer):
    """The server, with what tests do to it."""

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
        """Stop the server process (SIGSTOP): connections hang, nothing answers once it
        returns (`tests.support.pause`)."""
        assert self.process is not None
        pause(self.process)

    def resume(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        self.resume()
        super().stop()


class RawZooKeeper(RawStore):
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

    def put(self, path: str, value: RawValue) -> None:
        raw = self.encode(value)
        if self.client.exists(path):
            self.client.set(path, raw)
        else:
            self.client.create(path, raw, makepath=True)

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
