"""A supervised local `etcd` child process, for `python -m api` without a metadata store URL
and for the test fixtures. Ports are picked free on 127.0.0.1; data lives in `data_dir`."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from metastore.store import Endpoint

log = logging.getLogger(__name__)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Run by `dying_with_parent` in a fresh interpreter, between `subprocess`'s fork and the
# command's exec: argv is (parent pid, signal number, command...). The death signal is set
# before the parent is checked, so a parent that dies in between is seen either way; it is
# kept across execve (not for set-user-id programs). Without prctl (not Linux) it only execs.
_LAUNCHER = """\
import os, sys
parent, sig, argv = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
try:
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, sig)  # PR_SET_PDEATHSIG
except (ImportError, OSError, AttributeError):
    pass
if os.getppid() != parent:
    os.kill(os.getpid(), sig)
    os._exit(128 + sig)
os.execvp(argv[0], argv)
"""


def dying_with_parent(argv: Sequence[str], sig: int = signal.SIGTERM) -> list[str]:
    """`argv` wrapped so that the process it runs gets `sig` when the thread that started it
    exits (its whole process dying too, even by SIGKILL; Linux's PR_SET_PDEATHSIG), and never
    runs at all if that process is already gone. Pass the result to `subprocess.Popen`
    instead of a `preexec_fn`: the death signal is set by a short launcher in a new
    interpreter (`python -I -S`), which then execs `argv` under the same pid, so no Python
    code runs in the forked child of a parent that has threads."""
    if not argv:
        raise ValueError("an empty command")
    return [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(os.getpid()), str(int(sig)),
            *argv]  # fmt: skip


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
            dying_with_parent(self.command()),
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
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
            # Listening is not enough: until etcd has elected itself leader, calls fail with
            # ConnectionFailedError (each cache's first load then logs a spurious "watch lost").
            if self._healthy():
                return
            time.sleep(0.05)
        raise RuntimeError(f"etcd did not become healthy on {self.client_port} within {timeout}s")

    def _healthy(self) -> bool:
        """etcd's own /health: listening is not enough, it must have a leader and serve."""
        url = f"http://127.0.0.1:{self.client_port}/health"
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                return bool(json.load(response).get("health") == "true")
        except (OSError, ValueError):
            return False

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
