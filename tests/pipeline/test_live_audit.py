"""The placement audit of a live cluster, end to end, on etcd and then on ZooKeeper: the
store, four bookie processes on their own racks, the service, a strict namespace written
through the REST producer; then one bookie stopped and another moved to another group. The
snapshot of that store, audited on the
session's shared SparkSession, reports exactly the ledgers on the stopped bookie as
NOT_REGISTERED and those on the moved one as FOREIGN_GROUP.

The audit API (`pulsar-admin storage audit`) runs on the same cluster up to the end of its
snapshot (its Spark child is killed when the server stops); the whole API run to DONE, with
`--wait`, its report and summary, starts one more Spark and takes minutes on the shared
2-core machine: set AUDIT_LIVE_FULL=1 to run it (test_audit_api_to_done)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from metastore import paths
from metastore.ledger_metadata import decode_ledger_metadata
from pipeline.snapshot import snapshot
from placement import PlacementConfig
from placement.violations import kind_names
from tests.cli.conftest import run_cli
from tests.storage.testbed import (
    TOPIC_CONF,
    Cluster,
    start_cluster,
    start_zookeeper_cluster,
    stop_cluster,
)
from tests.support import ServerProcess, wait_until
from tests.zookeeper import EmbeddedZooKeeper

pytest.importorskip("pyspark")


@pytest.fixture(scope="module", params=["etcd", "zookeeper"])
def live(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[tuple[Cluster, ServerProcess, Path]]:
    """The cluster and the service on etcd, then on ZooKeeper (keys under `/live-audit`)."""
    work = tmp_path_factory.mktemp("live-audit")
    if request.param == "zookeeper":
        zookeeper: EmbeddedZooKeeper = request.getfixturevalue("zookeeper")
        cluster = start_zookeeper_cluster(work / "cluster", 4, zookeeper.hosts(), "/live-audit")
    else:
        cluster = start_cluster(work / "cluster", 4)
    server: ServerProcess | None = None
    try:
        cluster.set_groups({"iso": cluster.ids[:3], "other": cluster.ids[3:]})
        conf = {**TOPIC_CONF, "initializeClusterMetadata": "false",
                "dataDir": str(work / "data")}
        server = ServerProcess(cluster.etcd.url, work / "service", extra_conf=conf).start()
        yield cluster, server, work / "data"
    finally:
        if server is not None:
            server.stop()
        stop_cluster(cluster)


def ledger_ensembles(cluster: Cluster) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for key, value in cluster.raw.snapshot().items():
        ledger_id = paths.ledger_id_of(key)
        if ledger_id is not None:
            md = decode_ledger_metadata(ledger_id, value)
            out[ledger_id] = {b for ensemble in md.ensembles.values() for b in ensemble}
    return out


@dataclass
class Live:
    cluster: Cluster
    server: ServerProcess
    data: Path
    ensembles: dict[int, set[str]]
    stopped: str
    moved: str
    started: list[str] = field(default_factory=list)  # audits started through the API

    def expected(self) -> dict[int, list[str]]:
        """Ledger -> its violation kinds: on the moved bookie, on the stopped one."""
        out = {}
        for ledger_id, members in self.ensembles.items():
            kinds = (["FOREIGN_GROUP"] if self.moved in members else []) + (
                ["NOT_REGISTERED"] if self.stopped in members else [])
            if kinds:
                out[ledger_id] = sorted(kinds)
        return out


def findings_of(directory: Path) -> dict[int, list[str]]:
    rows = ds.dataset(directory / "ledger_findings", format="parquet").to_table().to_pylist()
    assert {r["namespace"] for r in rows} <= {"acme/strict"}
    return {r["ledger_id"]: sorted(kind_names(r["violations"])) for r in rows}


@pytest.fixture(scope="module")
def degraded(live: tuple[Cluster, ServerProcess, Path]) -> Live:
    """Two topics of the strict namespace written, then a bookie stopped, another moved."""
    cluster, server, data = live
    with httpx.Client(base_url=server.url, timeout=30) as http:
        http.put("/admin/v2/clusters/test", json={"serviceUrl": "http://x"}).raise_for_status()
        http.put("/admin/v2/tenants/acme", json={"allowedClusters": ["test"]}).raise_for_status()
        http.put("/admin/v2/namespaces/acme/strict").raise_for_status()
        http.post("/admin/v2/namespaces/acme/strict/persistence", json={
            "bookkeeperEnsemble": 2, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 2,
            "managedLedgerMaxMarkDeleteRate": 0}).raise_for_status()
        http.post("/admin/v2/namespaces/acme/strict/persistence/bookieAffinity", json={
            "bookkeeperAffinityGroupPrimary": "iso",
            "bookkeeperAffinityGroupStrict": True}).raise_for_status()
        for topic in ("t1", "t2"):  # rollover every 10 entries: three ledgers a topic
            http.post(f"/topics/persistent/acme/strict/{topic}", json={
                "messages": [{"payload": f"m{i}"} for i in range(25)]}).raise_for_status()
    ensembles = ledger_ensembles(cluster)
    assert len(ensembles) >= 6
    iso = cluster.ids[:3]
    used = [b for b in iso if any(b in e for e in ensembles.values())]
    stopped = used[0]
    moved = next(b for b in used if b != stopped)
    cluster.bookies[cluster.ids.index(stopped)].stop()
    wait_until(lambda: cluster.raw.get(paths.bookie_available(stopped)) is None, timeout=30)
    cluster.set_groups({"iso": [b for b in iso if b != moved],
                        "other": [cluster.ids[3], moved]})
    return Live(cluster, server, data, ensembles, stopped, moved)


def test_live_cluster_audit(degraded: Live, spark: Any, tmp_path: Path) -> None:
    from pipeline.audit import run_audit

    cfg = PlacementConfig.from_broker_conf({})
    counts = asyncio.run(snapshot(degraded.cluster.etcd.url, tmp_path / "snap", cfg))
    assert counts["ledgers"] == len(degraded.ensembles)
    # each registered bookie answered GET_BOOKIE_INFO: its data file system's figures; the
    # stopped one is not registered and has none
    bookies = pq.read_table(tmp_path / "snap" / "bookies").to_pylist()
    for row in bookies:
        if row["registered"]:
            assert row["disk_capacity"] > 0 and 0 < row["disk_used"] <= row["disk_capacity"]
        else:
            assert row["disk_used"] is None and row["disk_capacity"] is None
    assert any(r["registered"] for r in bookies) and any(not r["registered"] for r in bookies)
    summary = run_audit(spark, tmp_path / "snap", tmp_path / "audit")
    expected = degraded.expected()
    assert expected and any("NOT_REGISTERED" in k for k in expected.values())
    assert any("FOREIGN_GROUP" in k for k in expected.values())
    assert findings_of(tmp_path / "audit") == expected
    assert summary.violating_ledgers == len(expected)


def test_audit_api(degraded: Live) -> None:
    """Started through the CLI; its snapshot's progress through the API; one at a time."""
    url = degraded.server.url
    started = run_cli("--admin-url", url, "storage", "audit")
    assert started.code == 0, started.err
    status = json.loads(started.out)
    audit_id = status["id"]
    degraded.started.append(audit_id)
    assert status["state"] in ("SNAPSHOT", "AUDIT") and len(audit_id) == 12
    with httpx.Client(base_url=url, timeout=30) as http:
        second = http.post("/admin/v2/storage/audit")
        assert second.status_code == 409
        assert second.json() == {"reason": f"An audit is already running: {audit_id}"}

        def snapshot_done() -> dict[str, Any] | None:
            got: dict[str, Any] = http.get(f"/admin/v2/storage/audit/{audit_id}").json()
            assert got["state"] != "FAILED", got
            return got if got["state"] in ("AUDIT", "DONE") else None

        progressed = wait_until(snapshot_done, timeout=60, interval=0.2)
        assert progressed["ledgersRead"] == len(degraded.ensembles)
        snap = degraded.data / "audits" / audit_id / "snapshot"
        assert ds.dataset(snap / "ledgers", format="parquet").count_rows() == len(
            degraded.ensembles)
        if progressed["state"] == "AUDIT":
            early = http.get(f"/admin/v2/storage/audit/{audit_id}/report")
            assert early.status_code == 409 and "no report yet" in early.json()["reason"]
        if progressed["state"] == "AUDIT":
            repair = http.post(f"/admin/v2/storage/audit/{audit_id}/repair")
            assert repair.status_code == 409 and "no repair plan yet" in repair.json()["reason"]
        missing = http.get("/admin/v2/storage/audit/000000000000")
        assert missing.status_code == 404
        assert missing.json() == {"reason": "Audit 000000000000 not found"}
        assert http.post("/admin/v2/storage/audit/000000000000/repair").status_code == 404
    cli_status = run_cli("--admin-url", url, "storage", "audit-status", audit_id)
    assert cli_status.code == 0 and json.loads(cli_status.out)["id"] == audit_id


@pytest.mark.skipif(os.environ.get("AUDIT_LIVE_FULL") != "1",
                    reason="one more Spark run, minutes on the shared machine: AUDIT_LIVE_FULL=1")
def test_audit_api_to_done(degraded: Live) -> None:
    url = degraded.server.url
    with httpx.Client(base_url=url, timeout=30) as http:  # after test_audit_api's audit
        for earlier in degraded.started:
            wait_until(lambda a=earlier: http.get(f"/admin/v2/storage/audit/{a}").json()[
                "state"] in ("DONE", "FAILED"), timeout=600, interval=2)
    done = run_cli("--admin-url", url, "storage", "audit", "--wait", timeout=900)
    assert done.code == 0, done.err
    status = json.loads(done.out)
    assert status["state"] == "DONE", status
    assert "ledgers read" in done.err and "100%" in done.err
    assert status["summary"]["ledgers"] == len(degraded.ensembles)
    assert findings_of(degraded.data / "audits" / status["id"] / "audit") == degraded.expected()
    report = run_cli("--admin-url", url, "storage", "audit-report", status["id"])
    assert report.code == 0 and report.out.lstrip().lower().startswith("<!doctype html")
