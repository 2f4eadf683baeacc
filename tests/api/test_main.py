"""`python -m api` without a metadata store: it runs, supervises and stops its own etcd."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from metastore.embedded import free_port
from tests.support import REPO, wait_until


def etcd_pids(data_dir: Path) -> list[int]:
    """etcd processes serving `data_dir` (found through /proc, as `ps` would)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            cmdline
            and cmdline[0].endswith(b"etcd")
            and str(data_dir).encode() in b" ".join(cmdline)
        ):
            pids.append(int(entry.name))
    return pids


def start(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULSAR_")}
    command = [sys.executable, "-m", "api", "--host", "127.0.0.1", "--port", str(port),
               "--data-dir", str(data_dir), "--etcd-client-port", "0",
               "--etcd-peer-port", "0"]  # fmt: skip
    process = subprocess.Popen(command, cwd=REPO, env=env, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/admin/v2/bookies/racks-info"
    wait_until(lambda: httpx.get(url, timeout=1).status_code == 200, timeout=30)
    return process


def stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=20)


@pytest.mark.slow
def test_embedded_etcd_is_started_supervised_stopped_and_keeps_data(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    port = free_port()
    base = f"http://127.0.0.1:{port}/admin/v2/bookies/racks-info"
    process = start(data_dir, port)
    try:
        assert (data_dir / "etcd").is_dir()
        response = httpx.post(f"{base}/b1:3181", params={"group": "g"}, json={"rack": "/r1"})
        assert response.status_code == 204

        [child] = etcd_pids(data_dir)
        os.kill(child, signal.SIGKILL)  # the supervisor brings it back on the same port
        wait_until(lambda: etcd_pids(data_dir) not in ([], [child]), timeout=15)
        wait_until(lambda: httpx.get(base, timeout=2).status_code == 200, timeout=15)
        assert httpx.get(base).json() == {"g": {"b1:3181": {"rack": "/r1"}}}
    finally:
        stop(process)
    assert etcd_pids(data_dir) == [], "etcd outlived the service"

    process = start(data_dir, port)
    try:
        assert httpx.get(base).json() == {"g": {"b1:3181": {"rack": "/r1"}}}
    finally:
        stop(process)


def test_bad_configuration_exits_2_with_a_message(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("webServicePort=eighty\n")
    result = subprocess.run(
        [sys.executable, "-m", "api", "--config", str(conf)],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert "invalid value for webServicePort" in result.stderr


@pytest.mark.slow
def test_a_killed_service_leaves_no_orphan_etcd(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    process = start(data_dir, free_port())
    assert len(etcd_pids(data_dir)) == 1
    process.kill()
    process.wait(timeout=10)
    wait_until(lambda: etcd_pids(data_dir) == [], timeout=15)
