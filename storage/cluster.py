"""An embedded cluster: N local bookie processes, supervised.

Each bookie is its own `python -m storage.bookie` process with id `127.0.0.1:<port>` (3181
upward by default) and data under `<data_dir>/bookie-<port>/`, its log next to it. A watcher
thread restarts a bookie that exits (with a backoff that grows while it keeps crashing);
`stop()` sends SIGTERM to all of them (they deregister and checkpoint) and waits.
Bookies on other machines join the same etcd the same way, with their own
`python -m storage.bookie`; nothing here is needed for them.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

FIRST_PORT = 3181
_PR_SET_PDEATHSIG = 1


def default_ports(count: int, first: int = FIRST_PORT) -> list[int]:
    return list(range(first, first + count))


def _die_with_parent() -> None:
    """In the child: be killed if the supervising process dies, even by SIGKILL (Linux)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


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

    @property
    def bookie_id(self) -> str:
        return f"{self.host}:{self.port}"

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
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def bookie_ids(self) -> list[str]:
        return [bookie.bookie_id for bookie in self.bookies]

    def command(self, bookie: LocalBookie) -> list[str]:
        conf = [arg for key, value in self.conf.items() for arg in ("-c", f"{key}={value}")]
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
                self.command(bookie), stdout=out, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
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

    def _check(self, bookie: LocalBookie) -> None:
        if self._stopping.is_set() or bookie.running:
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
                    bookie.process.kill()
                    bookie.process.wait()
