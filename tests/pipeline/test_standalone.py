"""The audit against a `spark://` master: a standalone master and one worker started from the
pyspark package (`bin/spark-class`), free ports, stopped at the end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from metastore.embedded import free_port
from tests.support import REPO, wait_until

pytestmark = pytest.mark.slow


def _daemon(cmd: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as sink:
        return subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A standalone master with one worker (1 core) on 127.0.0.1: its spark:// URL."""
    pyspark = pytest.importorskip("pyspark")
    home = Path(pyspark.__file__).parent
    where = tmp_path_factory.mktemp("standalone")
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOG_DIR": str(where), "SPARK_WORKER_DIR": str(where / "work"),
           "PYSPARK_PYTHON": sys.executable}
    spark_class = str(home / "bin" / "spark-class")
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    procs = [_daemon([spark_class, "org.apache.spark.deploy.master.Master", "--host",
                      "127.0.0.1", "--port", str(port), "--webui-port", str(free_port())],
                     where / "master.log", env)]
    try:
        wait_until(lambda: "ALIVE" in (where / "master.log").read_text(), timeout=180,
                   interval=0.2)
        procs.append(_daemon([spark_class, "org.apache.spark.deploy.worker.Worker", url,
                              "--host", "127.0.0.1", "--cores", "1", "--memory", "1536m",
                              "--webui-port", str(free_port()),
                              "--work-dir", str(where / "work")], where / "worker.log", env))
        wait_until(lambda: "Successfully registered with master"
                   in (where / "worker.log").read_text(), timeout=180, interval=0.2)
        yield url
    finally:
        for proc in reversed(procs):
            _stop(proc)


@pytest.mark.timeout(900)  # three JVMs start: minutes when the shared machine is loaded
def test_audit_on_a_standalone_master(master: str, snapshot: Path, tmp_path: Path) -> None:
    out = tmp_path / "audit"
    # not from the repository root: the executors get the code from the zip the driver ships
    done = subprocess.run([sys.executable, "-m", "pipeline", "audit", "--snapshot", str(snapshot),
                           "--out", str(out), "--master", master, "--driver-memory", "1g"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO),
                               "SPARK_LOCAL_IP": "127.0.0.1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert master in done.stderr  # the CLI says where it ran
    truth = pq.read_table(snapshot / "ground_truth").to_pylist()
    found = pq.read_table(out / "fragment_verdicts").to_pandas()
    bad = found[found.violations != 0]
    assert dict(zip(zip(bad.ledger_id, bad.segment, strict=True), bad.violations,
                    strict=True)) == {(r["ledger_id"], r["segment"]): r["violations"]
                                      for r in truth}
    assert len(found) == pq.read_metadata(snapshot / "fragments" / "part-00000.parquet").num_rows
    assert pq.read_table(out / "repair_plan.parquet").num_rows > 0
