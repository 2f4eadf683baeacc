"""`PUT /api/v1/bookie/gc` on the real service with its own supervised bookies: a deleted
topic's ledgers are garbage-collected and the bookies' entry logs shrink; the other topic
reads back byte for byte."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from metastore.embedded import EmbeddedEtcd
from tests.cli.conftest import ok, run_cli
from tests.storage.testbed import TOPIC_CONF
from tests.support import ServerProcess, wait_until

BOOKIE_CONF = {
    "logSizeLimit": str(64 * 1024),  # many complete entry logs from a little data
    "flushInterval": "100",
    "gcWaitTime": "3600000",  # GC only when forced
    "compactionRateByEntries": "100000",
}
NOT_GC_METHOD = "Not found method. Should be PUT to trigger GC, Or GET to get Force GC state."


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    workdir = tmp_path_factory.mktemp("bookiegc")
    etcd = EmbeddedEtcd(workdir / "etcd")
    etcd.start()
    conf = [arg for k, v in BOOKIE_CONF.items() for arg in ("--bookie-conf", f"{k}={v}")]
    server = ServerProcess(etcd.url, workdir / "service", extra_conf=TOPIC_CONF,
                           extra_args=["--bookies", "2", "--bookie-port", "0",
                                       "--data-dir", str(workdir / "data"), *conf])  # fmt: skip
    try:
        server.start()
        with httpx.Client(base_url=server.url, timeout=15) as http:
            wait_until(lambda: len(http.get("/api/v1/bookie/list_bookies").json()) == 2,
                       timeout=30)
            wait_until(lambda: http.get("/admin/v2/clusters/test").status_code == 200)
            http.put("/admin/v2/tenants/acme", json={"allowedClusters": ["test"]}
                     ).raise_for_status()
            http.put("/admin/v2/namespaces/acme/gc").raise_for_status()
            http.post("/admin/v2/namespaces/acme/gc/persistence", json={
                "bookkeeperEnsemble": 2, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 2,
                "managedLedgerMaxMarkDeleteRate": 0}).raise_for_status()
        yield server, workdir / "data"
    finally:
        server.stop()
        etcd.stop()


def log_bytes(data_dir: Path) -> int:
    return sum(p.stat().st_size for p in data_dir.glob("bookie-*/ledgers/current/*.log"))


def produce(http: httpx.Client, topic: str, payloads: list[str]) -> list[tuple[int, int]]:
    body: dict[str, Any] = {"messages": [{"payload": p} for p in payloads]}
    response = http.post(f"/topics/persistent/acme/gc/{topic}", json=body)
    assert response.status_code == 200, response.text
    ids = []
    for ack in response.json()["messagePublishResults"]:
        ledger, entry, _ = ack["messageId"].split(":")
        ids.append((int(ledger), int(entry)))
    return ids


def test_force_gc_frees_disk_after_topic_deletion(service: tuple[ServerProcess, Path]) -> None:
    server, data_dir = service
    with httpx.Client(base_url=server.url, timeout=15) as http:
        kept: dict[tuple[int, int], bytes] = {}
        raw = 0
        for i in range(20):
            messages = [f"doomed-{i:02}-{j}".encode() * 150 for j in range(10)]
            raw += sum(len(m) for m in messages)
            produce(http, "doomed", [base64.b64encode(m).decode() for m in messages])
            payload = base64.b64encode(f"kept-{i}".encode() * 100).decode()
            for message_id in produce(http, "kept", [payload]):
                kept[message_id] = payload.encode()
        # Two copies of everything (E=Qw=2), in the entry logs after the next checkpoints.
        before = wait_until(lambda: (n := log_bytes(data_dir)) >= 2 * raw and n, timeout=20)
        assert http.delete("/admin/v2/persistent/acme/gc/doomed").status_code == 204

        answer = http.put("/api/v1/bookie/gc")
        assert answer.status_code == 200, answer.text
        assert answer.text.startswith('"Triggered GC on BookieServer: Bookie Server listening on')
        assert "content-type" not in answer.headers

        def freed() -> bool:
            # Each forced run deletes what the previous one left in the log it was writing.
            if http.get("/api/v1/bookie/gc").json()["is_in_force_gc"] == "false":
                http.put("/api/v1/bookie/gc", json={"forceMajor": True, "forceMinor": True})
            return log_bytes(data_dir) < before * 0.5

        wait_until(freed, timeout=60, interval=0.3)
        for (ledger, entry), payload in kept.items():
            got = http.get(f"/admin/v2/persistent/acme/gc/kept/ledger/{ledger}/entry/{entry}")
            assert got.status_code == 200 and got.content == payload
        idle = '{\n  "is_in_force_gc" : "false"\n}'
        wait_until(lambda: http.get("/api/v1/bookie/gc").text == idle)


def test_gc_answers_as_upstream(service: tuple[ServerProcess, Path]) -> None:
    server, _ = service
    with httpx.Client(base_url=server.url, timeout=15) as http:
        for method in ("POST", "DELETE"):
            answer = http.request(method, "/api/v1/bookie/gc")
            assert (answer.status_code, answer.text) == (404, NOT_GC_METHOD)
        # upstream unboxes both flags: a body without them is its server's bare 500
        bad = http.put("/api/v1/bookie/gc", json={"forceMajor": True})
        assert (bad.status_code, bad.text) == (500, "Internal Server Error")
        flags_not_booleans = http.put("/api/v1/bookie/gc/", json={"forceMajor": 1,
                                                                   "forceMinor": 0})
        assert flags_not_booleans.status_code == 500
        state = http.get("/api/v1/bookie/gc/")
        assert state.status_code == 200 and '"is_in_force_gc" : ' in state.text


def test_cli(service: tuple[ServerProcess, Path], tmp_path: Path) -> None:
    server, _ = service
    said = ok(run_cli("--admin-url", server.url, "storage", "gc", "--force-major",
                      "--no-force-minor", cwd=tmp_path))
    assert said.startswith('"Triggered GC on BookieServer: Bookie Server listening on')
    status = ok(run_cli("--admin-url", server.url, "storage", "gc-status", cwd=tmp_path))
    assert json.loads(status)["is_in_force_gc"] in ("true", "false")
