"""A supervised local `etcd` child process, for `python -m api` without a metadata store URL
and for the test fixtures. Ports are picked free on 127.0.0.1; data lives in `data_dir`."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

from metastore.store import Endpoint

log = logging.getLogger(__name__)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child: get SIGTERM if the process that started us dies, even by SIGKILL
    (Linux only; elsewhere a crashed parent may leave etcd running)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class EmbeddedEtcd:
    def __init__(
        self,
        data_dir: Path,
        client_port: int | None = None,
        peer_port: int | None = None,
        binary: str = "etcd",
    ) -> None:
        self.data_dir = Path(data_dir)
        self.client_port = client_port or free_port()
        self.peer_port = peer_port or free_port()
        self.binary = binary
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint("127.0.0.1", self.client_port)

    @property
    def url(self) -> str:
        return f"etcd:http://127.0.0.1:{self.client_port}"

    def command(self) -> list[str]:
        client = f"http://127.0.0.1:{self.client_port}"
        peer = f"http://127.0.0.1:{self.peer_port}"
        return [
            self.binary,
            "--name",
            "embedded",
            "--data-dir",
            str(self.data_dir / "etcd"),
            "--listen-client-urls",
            client,
            "--advertise-client-urls",
            client,
            "--listen-peer-urls",
            peer,
            "--initial-advertise-peer-urls",
            peer,
            "--initial-cluster",
            f"embedded={peer}",
            "--log-level",
            "error",
            "--quota-backend-bytes",
            str(8 * 1024**3),
            # Every rack write stores the whole `/bookies` document again (55 KB at 1,000
            # bookies); without compaction those revisions fill the database until etcd
            # refuses writes. Keep the last 10,000 revisions (compacted every 5 minutes).
            "--auto-compaction-mode",
            "revision",
            "--auto-compaction-retention",
            "10000",
        ]

    def start(self, timeout: float = 20.0) -> None:
        if shutil.which(self.binary) is None:
            raise RuntimeError(
                f"'{self.binary}' not found: install Debian's etcd-server (make run does it)"
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log_file = open(self.data_dir / "etcd.log", "ab")  # noqa: SIM115 - owned by the child
        self.process = subprocess.Popen(
            self.command(),
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        log_file.close()
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(
                    f"etcd exited with {self.process.returncode}; see {self.data_dir}/etcd.log"
                )
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.client_port), timeout=0.2),
            ):
                return
            time.sleep(0.05)
        raise RuntimeError(f"etcd did not listen on {self.client_port} within {timeout}s")

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class EtcdSupervisor:
    """Keeps an `EmbeddedEtcd` running: restarts it if it dies, stops it on `stop()`.

    The client port stays the same across restarts, so clients reconnect by themselves."""

    def __init__(self, etcd: EmbeddedEtcd, check_every: float = 0.5) -> None:
        self.etcd = etcd
        self.check_every = check_every
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.etcd.start()
        self._thread = threading.Thread(target=self._watch, name="etcd-supervisor", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stopping.wait(self.check_every):
            if not self.etcd.running:
                log.warning("embedded etcd exited; restarting it")
                try:
                    self.etcd.start()
                except RuntimeError as exc:
                    log.error("could not restart embedded etcd: %s", exc)

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
        self.etcd.stop()
