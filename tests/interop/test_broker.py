"""An upstream Pulsar broker (pulsar-broker 4.0.8, `PulsarBrokerStarter`) beside our control
plane: its metadata on our etcd, its BookKeeper client on our bookies (through Pulsar's
metadata-store driver on the same etcd), the namespace's isolation set through our CLI. Pulsar's
Java client produces through the broker; every ensemble of the broker's ledgers lies in the
namespace's strict bookie-affinity group, as our Spark audit of the live store confirms; moving
a bookie out of the group makes the audit flag exactly the broker's ledgers on it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pyarrow.dataset as ds
import pytest

from metastore import paths
from metastore.embedded import free_port
from metastore.ledger_metadata import decode_ledger_metadata
from pipeline.snapshot import snapshot
from placement import PlacementConfig
from placement.violations import kind_names
from tests.cli.conftest import run_cli
from tests.interop.upstream import UpstreamBroker, UpstreamJvm
from tests.storage.testbed import TOPIC_CONF, Cluster, start_cluster, stop_cluster
from tests.support import ServerProcess, wait_until

NAMESPACE = "mix/isolated"
TOPIC = f"persistent://{NAMESPACE}/orders"
BROKER_CONF = {
    "strictBookieAffinityEnabled": "true",
    "managedLedgerMaxEntriesPerLedger": "10",
    "managedLedgerMinLedgerRolloverTimeMinutes": "0",
    # kept after rollover (no subscription would otherwise let the broker trim them)
    "defaultRetentionTimeInMinutes": "60",
    "defaultRetentionSizeInMB": "100",
}


@dataclass
class Beside:
    cluster: Cluster
    service: ServerProcess
    broker: UpstreamBroker


@pytest.fixture(scope="module")
def beside(upstream_broker_classpath: str, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Beside]:
    """Three of our bookies (0 and 1 in group `iso`, 2 in `other`), our service (which creates
    cluster `test` and formats `/ledgers`), the namespace and its strict affinity through our
    CLI, then the upstream broker on the same etcd."""
    work = tmp_path_factory.mktemp("beside")
    cluster = start_cluster(work, 3)
    service = broker = None
    try:
        cluster.set_groups({"iso": cluster.ids[:2], "other": cluster.ids[2:]})
        service = ServerProcess(cluster.etcd.url, work / "service",
                                extra_conf=dict(TOPIC_CONF)).start()
        admin = ("--admin-url", service.url)
        for step in (("tenants", "create", "mix", "--allowed-clusters", "test"),
                     ("namespaces", "create", NAMESPACE),
                     ("namespaces", "set-bookie-affinity-group", NAMESPACE,
                      "--primary-group", "iso", "--strict", "true")):
            done = run_cli(*admin, *step)
            assert done.code == 0, (step, done)
        broker = UpstreamBroker(upstream_broker_classpath, work / "broker", cluster.etcd.url,
                                free_port(), free_port(), BROKER_CONF)
        running = broker

        def ready() -> bool:
            if running.exited() is not None:
                raise AssertionError(f"broker exited: see {running.workdir}")
            return httpx.get(f"{running.web_url}/admin/v2/clusters", timeout=2).status_code == 200

        wait_until(ready, timeout=180, interval=0.5)
        yield Beside(cluster, service, broker)
    finally:
        if broker is not None:
            broker.stop()
        if service is not None:
            service.stop()
        stop_cluster(cluster)


def ensembles(cluster: Cluster) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for key, value in cluster.raw.snapshot().items():
        ledger_id = paths.ledger_id_of(key)
        if ledger_id is not None:
            md = decode_ledger_metadata(ledger_id, value)
            out[ledger_id] = {b for ensemble in md.ensembles.values() for b in ensemble}
    return out


def audit(spark: Any, cluster: Cluster, out: Path) -> dict[int, list[str]]:
    from pipeline.audit import run_audit

    config = PlacementConfig.from_broker_conf(BROKER_CONF)
    asyncio.run(snapshot(cluster.etcd.url, out / "snap", config))
    run_audit(spark, out / "snap", out / "audit")
    rows = ds.dataset(out / "audit" / "ledger_findings", format="parquet").to_table().to_pylist()
    return {r["ledger_id"]: sorted(kind_names(r["violations"])) for r in rows}


def test_broker_ledgers_follow_our_isolation_and_our_audit_sees_them(
    beside: Beside, upstream_admin: UpstreamJvm, spark: Any, tmp_path: Path
) -> None:
    produced = upstream_admin.run("pulsar-produce", beside.broker.service_url, TOPIC, "25")
    assert produced.code == 0, produced
    # the broker's ledgers: three (rollover every 10 entries), recorded for the topic
    placed = ensembles(beside.cluster)
    assert len(placed) >= 3
    iso, other = beside.cluster.ids[:2], beside.cluster.ids[2]
    assert all(members <= set(iso) for members in placed.values()), placed
    assert audit(spark, beside.cluster, tmp_path / "before") == {}

    moved = iso[0]
    beside.cluster.set_groups({"iso": iso[1:], "other": [other, moved]})
    expected = {ledger: ["FOREIGN_GROUP"] for ledger, members in placed.items()
                if moved in members}
    assert expected
    assert audit(spark, beside.cluster, tmp_path / "after") == expected
