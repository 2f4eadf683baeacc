"""A ZooKeeper server (Debian's `zookeeper` package) on a free port, for benchmarks and tests.

Runs `org.apache.zookeeper.server.ZooKeeperServerMain` with a config of its own (client port,
data dir, admin server off) from /usr/share/java/zookeeper.jar, whose manifest names the
other jars it needs.

`start` returns once the server serves sessions (`srvr` reports its version), not merely once
the process answers `ruok`: ZooKeeper answers four-letter words as soon as it listens, before
it has loaded its data, and a session request that arrives before its database exists is left
open and unanswered (ZooKeeper 3.8.0 closes such a connection through a path that needs the
database), so a client that connects then waits its whole connect timeout (the session
timeout) for an answer that never comes.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from metastore.embedded import dying_with_parent, free_port

__all__ = ["ZOOKEEPER_JAR", "EmbeddedZooKeeper", "available", "serving"]

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")


def available() -> bool:
    return ZOOKEEPER_JAR.exists() and shutil.which("java") is not None


def serving(port: int, host: str = "127.0.0.1") -> bool:
    """Whether the ZooKeeper at `host:port` serves sessions: `srvr` (whitelisted) answers with
    its version; before that, "not currently serving requests", or nothing (module docstring)."""
    answer = b""
    try:
        with socket.create_connection((host, port), timeout=1) as conn:
            conn.sendall(b"srvr")
            while chunk := conn.recv(4096):
                answer += chunk
    except OSError:
        return False
    return answer.startswith(b"Zookeeper version:")


class EmbeddedZooKeeper:
    def __init__(self, workdir: Path, heap: str = "128m") -> None:
        """`heap`: the JVM's maximum heap (ZooKeeper holds every znode in memory)."""
        self.workdir = workdir
        self.heap = heap
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
                       "4lw.commands.whitelist=ruok,srvr\n")
        log = (self.workdir / "zookeeper.log").open("wb")
        self.process = subprocess.Popen(
            dying_with_parent(["java", f"-Xmx{self.heap}", "-cp", str(ZOOKEEPER_JAR),
                               "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg)]),
            stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"zookeeper exited with {self.process.returncode}: "
                                   f"{(self.workdir / 'zookeeper.log').read_text()[-2000:]}")
            if self.serving():
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"zookeeper on port {self.port} not ready in {timeout}s")

    def serving(self) -> bool:
        return serving(self.port)

    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
