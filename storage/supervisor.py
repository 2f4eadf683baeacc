"""An embedded cluster: N local bookie processes, supervised.

Each bookie is its own `python -m storage.bookie` process with id `127.0.0.1:<port>` (3181
upward by default, free ports with `free_ports`) and data under `<data_dir>/bookie-<port>/`,
its log next to it. A watcher thread restarts a bookie that exits (with a backoff that grows
while it keeps crashing); `stop()` sends SIGTERM to all of them (they deregister and
checkpoint) and waits.

One bookie at a time: `kill(id)` is an unclean stop (SIGKILL, files as they are) after which
the watcher leaves the bookie down until `start_bookie(id)`; `force_readonly(id)` writes the
flag file `<data_dir>/bookie-<port>/force-readonly` that the bookie's disk check honours
(`storage.bookie.registration.FORCE_READONLY_FILE`) and sends SIGUSR1 to run that check now.
Bookies on other machines join the same etcd the same way, with their own
`python -m storage.bookie`; nothing here is needed for them.

Metrics: each bookie serves its own in the Prometheus text format, as a BookKeeper bookie
does on `prometheusStatsHttpPort`; the supervisor gives each one a free port
(`LocalBookie.metrics_port`, `metrics_url`), kept across restarts, unless the configuration
sets `prometheusStatsHttpPort` itself (0 turns the servers off).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from metastore.embedded import dying_with_parent
from metastore.errors import MetastoreError
from metastore.repositories import BookieRegistrations
from metastore.store import MetadataStore
from storage.bookie.registration import FORCE_READONLY_FILE

log = logging.getLogger(__name__)

FIRST_PORT = 3181
METRICS_PORT_KEY = "prometheusStatsHttpPort"


async def wait_registered(
    store: MetadataStore, bookie_ids: Sequence[str], timeout: float, every: float = 0.1
) -> list[str]:
    """Wait until every bookie has registered (at `/ledgers/available/{id}`, or under
    `readonly/`); returns the ids still unregistered when `timeout` seconds ran out."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    missing = list(bookie_ids)
    while True:
        still = []
        for bookie_id in missing:
            try:
                found = await BookieRegistrations(store).exists(bookie_id)
            except MetastoreError:
                found = False
            if not found:
                still.append(bookie_id)
        missing = still
        if not missing or loop.time() >= deadline:
            return missing
        await asyncio.sleep(every)


def default_ports(count: int, first: int = FIRST_PORT) -> list[int]:
    return list(range(first, first + count))


def free_ports(count: int) -> list[int]:
    """`count` distinct ports nothing listens on now (the kernel's choice)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def ports_for(data_dir: Path, count: int) -> list[int]:
    """Ports for `count` bookies chosen freely: those of the bookies that already have data
    under `data_dir` (`bookie-<port>/`, lowest first) when free, so a restart keeps their ids
    and their ledgers stay readable, then free ports."""
    existing = sorted(
        int(path.name.removeprefix("bookie-"))
        for path in data_dir.glob("bookie-*")
        if path.is_dir() and path.name.removeprefix("bookie-").isdigit()
    )
    kept = [port for port in existing if port_is_free(port)][:count]
    for port in existing:
        if port not in kept and len(kept) < count:
            log.warning("bookie data %s/bookie-%d not used: its port is taken", data_dir, port)
    fresh = [port for port in free_ports(count) if port not in kept]
    return kept + fresh[: count - len(kept)]


@dataclass
class LocalBookie:
    port: int
    data_dir: Path
    host: str = "127.0.0.1"
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    next_start: float = 0.0
    failures: int = 0
    started_at: float = 0.0
    stopped: bool = False  # stopped on request: the watcher leaves it down
    metrics_port: int = 0  # its prometheusStatsHttpPort; 0: none

    @property
    def bookie_id(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def metrics_url(self) -> str | None:
        return f"http://{self.host}:{self.metrics_port}/metrics" if self.metrics_port else None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class LocalBookies:
    def __init__(
        self,
        data_dir: Path,
        metadata_store_url: str,
        ports: list[int],
        *,
        conf: dict[str, str] | None = None,
        lease_ttl: int = 30,
        check_every: float = 0.5,
    ) -> None:
        self.data_dir = data_dir
        self.metadata_store_url = metadata_store_url
        self.conf = conf or {}
        self.lease_ttl = lease_ttl
        self.check_every = check_every
        self.bookies = [LocalBookie(port, data_dir / f"bookie-{port}") for port in ports]
        if METRICS_PORT_KEY not in self.conf:
            taken = set(ports)
            spare = [p for p in free_ports(len(ports) * 2) if p not in taken]
            for bookie, metrics_port in zip(self.bookies, spare, strict=False):
                bookie.metrics_port = metrics_port
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def bookie_ids(self) -> list[str]:
        return [bookie.bookie_id for bookie in self.bookies]

    def command(self, bookie: LocalBookie) -> list[str]:
        settings = dict(self.conf)
        if bookie.metrics_port:
            settings[METRICS_PORT_KEY] = str(bookie.metrics_port)
        conf = [arg for key, value in settings.items() for arg in ("-c", f"{key}={value}")]
        return [
            sys.executable, "-m", "storage.bookie",
            "--bookie-id", bookie.bookie_id,
            "--data-dir", str(bookie.data_dir),
            "--metadata-store-url", self.metadata_store_url,
            "--lease-ttl", str(self.lease_ttl),
            *conf,
        ]  # fmt: skip

    def _spawn(self, bookie: LocalBookie) -> None:
        bookie.data_dir.mkdir(parents=True, exist_ok=True)
        log_path = bookie.data_dir.parent / f"bookie-{bookie.port}.log"
        with open(log_path, "ab") as out:
            bookie.process = subprocess.Popen(
                dying_with_parent(self.command(bookie)), stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        bookie.started_at = time.monotonic()
        log.info("started bookie %s (pid %d)", bookie.bookie_id, bookie.process.pid)

    def start(self) -> None:
        with self._lock:
            for bookie in self.bookies:
                self._spawn(bookie)
        self._thread = threading.Thread(target=self._watch, name="bookie-supervisor", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stopping.wait(self.check_every):
            with self._lock:
                for bookie in self.bookies:
                    self._check(bookie)

    def find(self, bookie_id: str) -> LocalBookie | None:
        return next((b for b in self.bookies if b.bookie_id == bookie_id), None)

    def _get(self, bookie_id: str) -> LocalBookie:
        bookie = self.find(bookie_id)
        if bookie is None:
            raise KeyError(bookie_id)
        return bookie

    def start_bookie(self, bookie_id: str) -> bool:
        """Start a bookie stopped by `kill` (False: it was not stopped, nothing done)."""
        with self._lock:
            bookie = self._get(bookie_id)
            if not bookie.stopped:
                return False
            bookie.stopped = False
            bookie.failures = 0
            bookie.next_start = 0.0
            self._spawn(bookie)
            return True

    def kill(self, bookie_id: str) -> bool:
        """An unclean stop (SIGKILL: no deregistration, no checkpoint); the watcher does not
        restart it until `start_bookie`. False: it was already stopped."""
        with self._lock:
            bookie = self._get(bookie_id)
            if bookie.stopped:
                return False
            bookie.stopped = True
            bookie.next_start = 0.0
            if bookie.process is not None and bookie.process.poll() is None:
                bookie.process.kill()
                bookie.process.wait()
            log.warning("stopped bookie %s (SIGKILL) on request", bookie.bookie_id)
            return True

    def force_readonly(self, bookie_id: str) -> bool:
        """Switch a running bookie to read-only for good (until its flag file is removed).
        False: it is not running."""
        with self._lock:
            bookie = self._get(bookie_id)
            if bookie.stopped or not bookie.running or bookie.process is None:
                return False
            bookie.data_dir.mkdir(parents=True, exist_ok=True)
            (bookie.data_dir / FORCE_READONLY_FILE).touch()
            bookie.process.send_signal(signal.SIGUSR1)
            return True

    def remove(self, bookie_id: str, timeout: float = 20.0) -> bool:
        """Decommissioned: stop the bookie cleanly (SIGTERM: it deregisters and checkpoints),
        forget it, and rename its data directory to `bookie-<port>.decommissioned` so a
        restart of the service does not bring it back (`ports_for` skips it). False: not
        one of ours."""
        with self._lock:
            bookie = self.find(bookie_id)
            if bookie is None:
                return False
            self.bookies.remove(bookie)
            process = bookie.process
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            if bookie.data_dir.exists():
                target = bookie.data_dir.with_name(f"{bookie.data_dir.name}.decommissioned")
                if target.exists():
                    target = target.with_name(f"{target.name}-{int(time.time())}")
                bookie.data_dir.rename(target)
            log.warning("removed decommissioned bookie %s", bookie_id)
            return True

    def _check(self, bookie: LocalBookie) -> None:
        if self._stopping.is_set() or bookie.running or bookie.stopped:
            return
        now = time.monotonic()
        if bookie.next_start == 0.0:
            code = bookie.process.returncode if bookie.process else None
            if now - bookie.started_at > 60:
                bookie.failures = 0  # it had been running fine: start the backoff over
            bookie.failures += 1
            delay = min(0.5 * 2 ** (bookie.failures - 1), 30.0)
            bookie.next_start = now + delay
            log.warning(
                "bookie %s exited (code %s); restarting in %.1fs", bookie.bookie_id, code, delay
            )
        if now >= bookie.next_start:
            bookie.next_start = 0.0
            bookie.restarts += 1
            self._spawn(bookie)

    def stop(self, timeout: float = 20.0) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            for bookie in self.bookies:
                if bookie.running and bookie.process is not None:
                    bookie.process.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + timeout
            for bookie in self.bookies:
                if bookie.process is None:
                    continue
                try:
                    bookie.process.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    log.warning("bookie %s did not stop within %.0fs: killed (its registration "
                                "goes with its lease)", bookie.bookie_id, timeout)
                    bookie.process.kill()
                    bookie.process.wait()
