"""Test support: the real server as a subprocess, raw etcd access, bounded waits."""

from __future__ import annotations

import ast
import asyncio
import base64
import contextlib
import gc
import inspect
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

import httpx
import jwt

from api.settings import TOKEN_PROVIDER
from metastore.embedded import free_port
from metastore.store import Endpoint, child_range

T = TypeVar("T")
REPO = Path(__file__).resolve().parent.parent
TOKEN_SECRET = b"0123456789abcdef0123456789abcdef"  # the token servers' HS256 secret


def token(role: str, key: Any = TOKEN_SECRET, algorithm: str = "HS256", **claims: Any) -> str:
    """A JWT for `role` (its `sub`), signed as the token servers (`token_conf`) expect."""
    return jwt.encode({"sub": role, **claims}, key, algorithm=algorithm)


class TokenServers(Protocol):
    """The `token_server` fixture: starts a token server (`token_conf`) for the module."""

    def __call__(self, super_users: str, *, metadata_store_url: str | None = None,
                 **conf: str) -> ServerProcess: ...


def token_conf(super_users: str, **extra: str) -> dict[str, str]:
    """broker.conf keys of a server with token authentication and authorisation on, tokens
    signed with `TOKEN_SECRET`, `super_users` (comma-separated) as super-users."""
    return {
        "authenticationEnabled": "true",
        "authorizationEnabled": "true",
        "authenticationProviders": TOKEN_PROVIDER,
        "tokenSecretKey": "data:;base64," + base64.b64encode(TOKEN_SECRET).decode(),
        "superUserRoles": super_users,
        "initializeClusterMetadata": "false",
        **extra,
    }


def reap(process: subprocess.Popen[Any], timeout: float) -> None:
    """Wait up to `timeout` seconds for `process`, already asked to stop, to exit; then kill it
    and wait for that."""
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def pause(process: subprocess.Popen[Any]) -> None:
    """Stop `process` (SIGSTOP) and return once every one of its threads has stopped. The
    signal takes effect as each thread is next scheduled: on a busy machine a server's threads
    went on answering requests for milliseconds (18 ms measured) after `kill` returned, so a
    request sent "while paused" could still be served. Resume with SIGCONT."""
    process.send_signal(signal.SIGSTOP)
    wait_until(lambda: _all_threads_stopped(process.pid))


def _all_threads_stopped(pid: int) -> bool:
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that exited meanwhile
            stat = (task / "stat").read_text()
            if stat[stat.rindex(")") + 2] not in "Tt":  # stopped, or stopped by a tracer
                return False
    return True


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


async def wait_until_async(condition: Callable[[], T | Awaitable[T]], timeout: float = 10.0,
                           interval: float = 0.02) -> T:
    """`wait_until` inside a running event loop: the loop keeps running between polls, and
    `condition` may be a coroutine function."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = condition()
            if inspect.isawaitable(last):
                last = await last
        except Exception as exc:  # conditions may raise until the system is ready
            last = exc
        else:
            if last:
                return cast(T, last)
        await asyncio.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s; last result: {last!r}")


class ServerProcess:
    """`python -m api` on a free port against a given etcd."""

    def __init__(
        self,
        metadata_store_url: str,
        workdir: Path,
        cluster_name: str = "test",
        extra_conf: dict[str, str] | None = None,
        extra_args: list[str] | None = None,
    ) -> None:
        self.metadata_store_url = metadata_store_url
        self.extra_args = extra_args or []
        self.workdir = workdir
        self.cluster_name = cluster_name
        self.extra_conf = extra_conf or {}
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        conf = self.workdir / "broker.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in self.extra_conf.items()))
        return [
            sys.executable, "-m", "api",
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--metadata-store-url", self.metadata_store_url,
            "--cluster-name", self.cluster_name,
            "--config", str(conf),
            *self.extra_args,
        ]  # fmt: skip

    def start(self) -> ServerProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
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
        response = httpx.get(f"{self.url}/admin/v2/brokers/configuration/runtime", timeout=1,
                             headers=self._ready_headers())
        return response.status_code == 200

    def _ready_headers(self) -> dict[str, str]:
        """A super-user's token for a token server (`token_conf`), else nothing."""
        if self.extra_conf.get("authenticationProviders") != TOKEN_PROVIDER:
            return {}
        super_user = self.extra_conf.get("superUserRoles", "").split(",")[0].strip()
        return {"Authorization": f"Bearer {token(super_user)}"}

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            reap(self.process, 15)

    def kill(self) -> None:
        self.stop(signal.SIGKILL)


RawValue = bytes | str | dict[str, Any] | list[Any]


class RawStore:
    """What `RawEtcd` and `tests.zookeeper.RawZooKeeper` share: JSON reads of `get`, and
    the bytes a `put` value stands for (a dict or list as JSON, a str as UTF-8)."""

    def get(self, path: str) -> bytes | None:
        raise NotImplementedError

    def get_json(self, path: str) -> Any:
        raw = self.get(path)
        return None if raw is None else json.loads(raw)

    @staticmethod
    def encode(value: RawValue) -> bytes:
        if isinstance(value, dict | list):
            value = json.dumps(value)
        return value.encode() if isinstance(value, str) else value


class RawEtcd(RawStore):
    """Direct etcd access for assertions, bypassing our store code: etcd's own v3 JSON
    gateway over plain HTTP, so it works from sync and async tests alike."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.base = f"http://{endpoint.host}:{endpoint.port}/v3"

    def _post(self, call: str, body: dict[str, Any]) -> dict[str, Any]:
        response = httpx.post(f"{self.base}/{call}", json=body, timeout=10)
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result

    def get(self, path: str) -> bytes | None:
        kvs = self._post("kv/range", {"key": _b64(path)}).get("kvs", [])
        return base64.b64decode(kvs[0].get("value", "")) if kvs else None

    def put(self, path: str, value: RawValue) -> None:
        raw = self.encode(value)
        self._post("kv/put", {"key": _b64(path), "value": base64.b64encode(raw).decode()})

    def delete(self, path: str) -> None:
        """Delete `path` and everything under `path + "/"`."""
        self._post("kv/deleterange", {"key": _b64(path)})
        start, end = child_range(path)
        self._post("kv/deleterange", {"key": _b64(start), "range_end": _b64(end)})

    def keys(self, prefix: str = "/") -> list[str]:
        start = prefix.encode()
        end = start[:-1] + bytes([start[-1] + 1])
        body = {"key": _b64(start), "range_end": _b64(end), "keys_only": True}
        return [
            base64.b64decode(kv["key"]).decode()
            for kv in self._post("kv/range", body).get("kvs", [])
        ]

    def snapshot(self) -> dict[str, bytes]:
        """Every key with its value (and nothing else), to compare before and after."""
        body = {"key": _b64(b"\0"), "range_end": _b64(b"\0")}
        return {
            base64.b64decode(kv["key"]).decode(): base64.b64decode(kv.get("value", ""))
            for kv in self._post("kv/range", body).get("kvs", [])
        }

    def wipe(self) -> None:
        self._post("kv/deleterange", {"key": _b64(b"\0"), "range_end": _b64(b"\0")})

    def revision(self) -> int:
        """etcd's current revision."""
        return int(self._post("kv/range", {"key": _b64(b"\0")})["header"]["revision"])

    def range_at(self, first: str, end: str, revision: int) -> dict[str, tuple[bytes, int]]:
        """Every key in [`first`, `end`) as it was at `revision`: (value, mod revision)."""
        body = {"key": _b64(first), "range_end": _b64(end), "revision": revision}
        return {
            base64.b64decode(kv["key"]).decode(): (
                base64.b64decode(kv.get("value", "")),
                int(kv["mod_revision"]),
            )
            for kv in self._post("kv/range", body).get("kvs", [])
        }

    def history(self, first: str, end: str, start: int, last: int) -> list[tuple[int, str, str]]:
        """(revision, "put"|"delete", key) of every change in [`first`, `end`) from revision
        `start` to `last`, from etcd's own watch (its JSON gateway); `last` must be the
        revision of a change in the range."""
        body = {
            "create_request": {"key": _b64(first), "range_end": _b64(end), "start_revision": start}
        }
        changes: list[tuple[int, str, str]] = []
        with httpx.stream("POST", f"{self.base}/watch", json=body, timeout=10) as response:
            for line in response.iter_lines():
                for event in json.loads(line).get("result", {}).get("events", []):
                    kv = event["kv"]
                    kind = "delete" if event.get("type") == "DELETE" else "put"
                    changes.append(
                        (int(kv["mod_revision"]), kind, base64.b64decode(kv["key"]).decode())
                    )
                if changes and changes[-1][0] >= last:
                    return changes
        raise AssertionError(f"etcd's watch ended before revision {last}")

    def watchers(self) -> int:
        """How many watches etcd holds (its `etcd_debugging_mvcc_watcher_total` gauge)."""
        metrics = httpx.get(f"http://{self.endpoint.host}:{self.endpoint.port}/metrics", timeout=10)
        for line in metrics.text.splitlines():
            if line.startswith("etcd_debugging_mvcc_watcher_total "):
                return int(float(line.split()[1]))
        raise AssertionError("etcd does not export etcd_debugging_mvcc_watcher_total")

    def compact(self, revision: int) -> None:
        """etcd's compaction: the history before `revision` is gone."""
        self._post("kv/compaction", {"revision": revision, "physical": True})


class _Flows:
    """Whether a proxy relays each direction, for the connections of one span between cuts."""

    def __init__(self, requests: bool = True, replies: bool = True) -> None:
        self.requests = threading.Event()
        self.replies = threading.Event()
        if requests:
            self.requests.set()
        if replies:
            self.replies.set()


class CuttableProxy:
    """A TCP relay to a local port, on a port of its own: `cut()` closes every connection
    open through it (a network cut, or a restarted load balancer, nothing faked on either
    side); new connections are relayed as before. `hold()` stops relaying one direction
    (a request sent but never delivered, or delivered with its reply lost) until the
    next `cut()`, which drops what was held. Each connection follows the flows of the span
    between cuts it was accepted in, so one accepted while a cut is under way is relayed
    as the span after the cut, never held by the span before it."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections: list[socket.socket] = []
        self.lock = threading.Lock()
        self._flows = _Flows()
        self.holding = threading.Event()  # some data is held (`hold`)
        self.held_requests = bytearray()  # what `hold` kept from the target, until `cut`
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            with self.lock:
                self.connections += [client, upstream]
                flows = self._flows
            for a, b, requests in ((client, upstream, True), (upstream, client, False)):
                threading.Thread(target=self._pump, args=(a, b, flows, requests),
                                 daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, flows: _Flows,
              requests: bool) -> None:  # fmt: skip
        flow = flows.requests if requests else flows.replies
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if not flow.is_set():  # held (read on, so it can be looked at) until a cut
                    with self.lock:
                        if flows is self._flows:  # not a span a cut already ended
                            if requests:
                                self.held_requests += data
                            self.holding.set()
                    continue
                sink.sendall(data)
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def hold(self, *, requests: bool = False, replies: bool = False) -> None:
        """Stop relaying requests (client to target) and/or replies until the next `cut`."""
        with self.lock:
            flows = self._flows
        if requests:
            flows.requests.clear()
        if replies:
            flows.replies.clear()

    def cut(self, *, keep_holding: bool = False) -> int:
        """Close every open connection, dropping anything held; returns how many there
        were. `keep_holding`: what `hold` stopped stays stopped on the connections made next
        (a server that accepts connections and answers nothing), until `release`."""
        with self.lock:
            connections, self.connections = self.connections, []
            old = self._flows
            if keep_holding:
                self._flows = _Flows(old.requests.is_set(), old.replies.is_set())
            else:
                self._flows = _Flows()
            self.held_requests = bytearray()
            self.holding.clear()
        for sock in connections:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes the pumps blocked reading it
            sock.close()
        return len(connections)

    def release(self) -> None:
        """Relay both directions again from now on; what was held stays dropped."""
        with self.lock:
            flows = self._flows
        flows.requests.set()
        flows.replies.set()

    def close(self) -> None:
        # shutdown, not close alone, wakes the accepting thread (Linux leaves a blocked
        # accept() waiting on a socket closed under it)
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self.cut()


def _b64(value: str | bytes) -> str:
    raw = value.encode() if isinstance(value, str) else value
    return base64.b64encode(raw).decode()


def parse_source(path: Path) -> ast.Module:
    """`ast.parse` of a source file with the cyclic collector paused: a collection during the
    parse that runs a finalizer (an unretrieved task's error log, from an earlier test)
    changes the thread's recursion depth under CPython 3.11's AST constructor, which then
    fails with `SystemError: AST constructor recursion depth mismatch`."""
    text = path.read_text()
    enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(text, str(path))
    finally:
        if enabled:
            gc.enable()
