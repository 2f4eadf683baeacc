"""`python -m api` on a fresh data directory, as `make run` starts it: the standalone metadata,
one "ready" line with every address, the access log (and its off switch), and no spurious
watch-loss lines."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from metastore.embedded import free_port
from tests.support import REPO, wait_until


class Started:
    def __init__(self, data_dir: Path, port: int, etcd_port: int, **env: str) -> None:
        self.log = data_dir.parent / f"server-{len(list(data_dir.parent.glob('*.log')))}.log"
        self.url = f"http://127.0.0.1:{port}"
        environ = {k: v for k, v in os.environ.items() if not k.startswith("PULSAR_")}
        command = [sys.executable, "-m", "api", "--host", "127.0.0.1", "--port", str(port),
                   "--data-dir", str(data_dir), "--etcd-client-port", str(etcd_port),
                   "--etcd-peer-port", str(free_port())]  # fmt: skip
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                command, cwd=REPO, env={**environ, **env}, stdout=log, stderr=log
            )
        wait_until(lambda: "ready:" in self.text() or self.process.poll() is not None, 60)
        assert self.process.poll() is None, self.text()

    def text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=20)


def test_first_start_then_restart(tmp_path: Path) -> None:
    data_dir, port, etcd_port = tmp_path / "data", free_port(), free_port()
    server = Started(data_dir, port, etcd_port)
    try:
        with httpx.Client(base_url=server.url, timeout=10) as http:
            assert http.get("/admin/v2/clusters").json() == ["standalone"]
            assert http.get("/admin/v2/clusters/standalone").json()["serviceUrl"] == (
                f"http://localhost:{port}"
            )
            assert http.get("/admin/v2/tenants").json() == ["public", "pulsar"]
            assert http.get("/admin/v2/namespaces/public").json() == ["public/default"]
            assert http.get("/admin/v2/namespaces/pulsar").json() == ["pulsar/system"]
            response = http.post(
                "/admin/v2/namespaces/public/default/persistence/bookieAffinity",
                json={"bookkeeperAffinityGroupPrimary": "g1"},
            )
            assert response.status_code == 204
            rack = http.post("/admin/v2/bookies/racks-info/b1:3181?group=g1", json={"rack": "/r"})
            assert rack.status_code == 204  # the fast path
            assert http.get("/admin/v2/clusters/nope").status_code == 404
            changed = {"serviceUrl": "http://moved:8080"}
            assert http.post("/admin/v2/clusters/standalone", json=changed).status_code == 200
        wait_until(lambda: '"GET /admin/v2/clusters/nope HTTP/1.1" 404' in server.text())
    finally:
        server.stop()
    text = server.text()
    [ready] = [line for line in text.splitlines() if "ready:" in line]
    assert f"admin http://127.0.0.1:{port}/admin/v2" in ready
    assert f"docs http://127.0.0.1:{port}/docs" in ready
    assert f"etcd http://127.0.0.1:{etcd_port}" in ready
    assert '"GET /admin/v2/clusters HTTP/1.1" 200' in text
    assert '"POST /admin/v2/bookies/racks-info/b1%3A3181?group=g1 HTTP/1.1" 204' in text
    assert "lost" not in text and "Traceback" not in text, text
    assert "initialised cluster metadata" in text

    # A restart keeps everything it finds; the access log can be switched off.
    server = Started(data_dir, port, etcd_port, PULSAR_accessLogEnabled="false")
    try:
        with httpx.Client(base_url=server.url, timeout=10) as http:
            assert http.get("/admin/v2/clusters/standalone").json()["serviceUrl"] == (
                "http://moved:8080"
            )
            affinity = http.get("/admin/v2/namespaces/public/default/persistence/bookieAffinity")
            assert affinity.json() == {"bookkeeperAffinityGroupPrimary": "g1"}
    finally:
        server.stop()
    second = server.text()
    assert f"etcd http://127.0.0.1:{etcd_port}" in second  # the same port again
    assert "uvicorn.access" not in second and "initialised cluster metadata" not in second
