"""Test support: the real server as a subprocess, raw etcd access, bounded waits."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx

from metastore.embedded import free_port
from metastore.store import Endpoint, MetadataStore

T = TypeVar("T")
REPO = Path(__file__).resolve().parent.parent


def wait_until(condition: Callable[[], T], timeout: float = 10.0, interval: float = 0.02) -> T:
    """Poll `condition` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = condition()
        except Exception as exc:  # conditions may raise until the system is ready
            last = exc
        else:
            if last:
                return last
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s; last result: {last!r}")


class ServerProcess:
    """`python -m api` on a free port against a given etcd."""

    def __init__(
        self,
        metadata_store_url: str,
        workdir: Path,
        cluster_name: str = "test",
        extra_conf: dict[str, str] | None = None,
    ) -> None:
        self.metadata_store_url = metadata_store_url
        self.workdir = workdir
        self.cluster_name = cluster_name
        self.extra_conf = extra_conf or {}
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        self.workdir.mkdir(parents=True, exist_ok=True)
        conf = self.workdir / "broker.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in self.extra_conf.items()))
        return [
            sys.executable, "-m", "api",
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--metadata-store-url", self.metadata_store_url,
            "--cluster-name", self.cluster_name,
            "--config", str(conf),
        ]  # fmt: skip

    def start(self) -> ServerProcess:
        log = open(self.workdir / "server.log", "ab")  # noqa: SIM115 - handed to the child
        env = {k: v for k, v in os.environ.items() if not k.startswith("PULSAR_")}
        self.process = subprocess.Popen(
            self.command(), cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env
        )
        log.close()
        wait_until(self._ready, timeout=30)
        return self

    def _ready(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"server exited: {(self.workdir / 'server.log').read_text()}")
        response = httpx.get(f"{self.url}/admin/v2/brokers/configuration/runtime", timeout=1)
        return response.status_code == 200

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def kill(self) -> None:
        self.stop(signal.SIGKILL)


class RawEtcd:
    """Direct etcd access for assertions, bypassing the server (synchronous, for tests)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint

    def _run(self, action: Callable[[MetadataStore], Any]) -> Any:
        async def run() -> Any:
            store = MetadataStore([self.endpoint], timeout=5)
            try:
                return await action(store)
            finally:
                await store.close()

        return asyncio.run(run())

    def get(self, path: str) -> bytes | None:
        found = self._run(lambda s: s.get(path))
        return None if found is None else found.value

    def get_json(self, path: str) -> Any:
        raw = self.get(path)
        return None if raw is None else json.loads(raw)

    def put(self, path: str, value: bytes | str | dict[str, Any] | list[Any]) -> None:
        if isinstance(value, dict | list):
            value = json.dumps(value)
        if isinstance(value, str):
            value = value.encode()
        data = value
        self._run(lambda s: s.put(path, data))

    def delete(self, path: str) -> None:
        self._run(lambda s: s.delete_tree(path))

    def keys(self, prefix: str = "/") -> list[str]:
        async def keys(store: MetadataStore) -> list[str]:
            result = await store.call(lambda c: c.get_prefix(prefix.encode(), keys_only=True))
            return [kv.key.decode() for kv in result]

        return list(self._run(keys))

    def wipe(self) -> None:
        async def wipe(store: MetadataStore) -> None:
            await store.call(lambda c: c.delete_range(b"\0", b"\0"))

        self._run(wipe)
