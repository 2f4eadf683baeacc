"""An upstream bookie (BookKeeper 4.17.2's `org.apache.bookkeeper.server.Main`) joins our
cluster, on etcd through Pulsar 4.0.8's metadata-store driver and on ZooKeeper through
BookKeeper's own: it registers at our keys, our tools list it, our ledgers place replicas on it
under a namespace's strict bookie affinity, and our auto-recovery re-replicates to it and from
it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from metastore import paths
from metastore.embedded import free_port
from metastore.ledger_metadata import decode_ledger_metadata
from metastore.versioned_keys import VersionedKeys
from placement import AffinityGroups
from storage.autorecovery import AutoRecovery
from storage.bookie_client import BookieClient
from storage.ledger import LedgerSpec
from storage.ledger.metadata import managed_ledger_custom_metadata
from tests.cli.conftest import clean_env, run_cli
from tests.interop.upstream import UpstreamBookie, UpstreamJvm, bookkeeper_service_uri
from tests.storage.bookie.support import BookieProcess
from tests.storage.chaos.support import FAST
from tests.storage.testbed import (
    TOPIC_CONF,
    Cluster,
    engine,
    start_cluster_on,
    stop_cluster,
)
from tests.support import ServerProcess, wait_until, wait_until_async

PULSAR_CLIENT = str(Path(sys.executable).parent / "pulsar-client")


@dataclass
class Mixed:
    cluster: Cluster
    service: ServerProcess
    upstream: UpstreamBookie


@pytest.fixture(scope="module", params=["etcd", "zookeeper"])
def mixed(request: pytest.FixtureRequest, upstream_classpath: str,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mixed]:
    """Two of our bookies, the service (which formats `/ledgers` as `pulsar
    initialize-cluster-metadata` does), then one upstream bookie: on an etcd of their own
    through Pulsar's driver, or on the session's ZooKeeper (under a chroot) through
    BookKeeper's own (`zk+hierarchical://`)."""
    workdir = tmp_path_factory.mktemp("mixed")
    cluster = start_cluster_on(request, workdir, 2, "/mixed")
    service = None
    upstream = None
    try:
        service = ServerProcess(cluster.etcd.url, workdir / "service",
                                extra_conf=dict(TOPIC_CONF)).start()
        upstream = UpstreamBookie(upstream_classpath, workdir / "upstream",
                                  bookkeeper_service_uri(cluster.etcd.url), free_port())

        def registered() -> bool:
            if upstream is not None and upstream.exited() is not None:
                raise AssertionError(f"upstream bookie exited: see {upstream.workdir}")
            return f"/ledgers/available/{upstream.bookie_id}" in cluster.raw.keys(
                "/ledgers/available/")

        wait_until(registered, timeout=90, interval=0.2)
        yield Mixed(cluster, service, upstream)
    finally:
        if upstream is not None:
            upstream.stop()
        if service is not None:
            service.stop()
        stop_cluster(cluster)


def test_it_registers_at_our_keys_and_our_tools_list_it(mixed: Mixed) -> None:
    listed = run_cli("--admin-url", mixed.service.url, "bookies", "list-bookies")
    assert listed.code == 0, listed.err
    ids = [b["bookieId"] for b in json.loads(listed.out)["bookies"]]
    assert sorted(ids) == sorted([*mixed.cluster.ids, mixed.upstream.bookie_id])


def test_strict_affinity_places_replicas_on_it(mixed: Mixed, upstream_bookkeeper: UpstreamJvm,
                                               tmp_path: Path) -> None:
    ours, theirs = mixed.cluster.ids, mixed.upstream.bookie_id
    mixed.cluster.raw.put("/bookies", json.dumps({
        "mixed": {theirs: {"rack": "/up", "hostname": "127.0.0.1"},
                  ours[0]: {"rack": "/ours", "hostname": "127.0.0.1"}},
        "other": {ours[1]: {"rack": "/other", "hostname": "127.0.0.1"}},
    }))
    with httpx.Client(base_url=mixed.service.url, timeout=10) as http:
        http.put("/admin/v2/tenants/mix", json={"allowedClusters": ["test"]}).raise_for_status()
        http.put("/admin/v2/namespaces/mix/ns").raise_for_status()
        http.post("/admin/v2/namespaces/mix/ns/persistence", json={
            "bookkeeperEnsemble": 2, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 2,
            "managedLedgerMaxMarkDeleteRate": 0}).raise_for_status()
        http.post("/admin/v2/namespaces/mix/ns/persistence/bookieAffinity", json={
            "bookkeeperAffinityGroupPrimary": "mixed",
            "bookkeeperAffinityGroupStrict": True}).raise_for_status()
        wait_until(lambda: theirs in http.get("/admin/v2/bookies/racks-info").json()["mixed"])
    topic = "persistent://mix/ns/t"
    produced = subprocess.run([PULSAR_CLIENT, "--url", mixed.service.url, "produce", topic,
                               "-m", "hello,upstream", "-n", "12"], capture_output=True,
                              text=True, env=clean_env(), timeout=120)
    assert produced.returncode == 0, produced.stderr
    stats = run_cli("--admin-url", mixed.service.url, "topics", "stats-internal", topic, "-m")
    assert stats.code == 0, stats.err
    ledgers = json.loads(stats.out)["ledgers"]
    assert len(ledgers) >= 2  # 24 entries, rollover every 10
    for ledger in ledgers:
        assert "ensembles={0=[" in ledger["metadata"]
        ensemble = ledger["metadata"].split("ensembles={0=[")[1].split("]")[0].split(", ")
        assert sorted(ensemble) == sorted([theirs, ours[0]]), ledger["metadata"]
    # every entry is on both bookies: upstream's client reads a closed ledger back
    first = str(ledgers[0]["ledgerId"])
    read = upstream_bookkeeper.run("bk-client", "read", f"metadata-store:{mixed.cluster.etcd.url}",
                                   "v2", first)
    assert read.code == 0, read
    assert read.out.splitlines()[:2] == ["lac 9", "closed true"]
    earliest = run_cli("--admin-url", mixed.service.url, "topics", "examine-messages", topic,
                       "-i", "earliest", "-m", "1")
    assert "|hello" in earliest.out, earliest


def ensemble_of(cluster: Cluster, ledger_id: int) -> tuple[str, ...]:
    raw = cluster.raw.get(paths.ledger(ledger_id))
    assert raw is not None
    return tuple(decode_ledger_metadata(ledger_id, raw).current_ensemble)


# on etcd only: our auto-recovery's own ZooKeeper runs are in tests/storage/autorecovery, and
# the upstream bookie's side of it (its reads and writes) does not depend on the store
@pytest.mark.parametrize("mixed", ["etcd"], indirect=True)
async def test_our_autorecovery_replicates_to_and_from_it(mixed: Mixed, tmp_path: Path) -> None:
    """A ledger on two of ours; one dies and our auto-recovery copies its replica to the
    upstream bookie (the group's one spare); then the other dies and the copy comes from the
    upstream bookie (the only holder left) to a new one of ours."""
    a, b = mixed.cluster.bookies
    theirs = mixed.upstream.bookie_id
    spare = BookieProcess(mixed.cluster.raw, mixed.cluster.etcd.url, tmp_path / "spare",
                          lease_ttl=2)

    def group(*members: str) -> None:
        mixed.cluster.raw.put("/bookies", json.dumps(
            {"rep": {m: {"rack": f"/r{i}"} for i, m in enumerate(members)}}))

    group(a.bookie_id, b.bookie_id)
    groups = AffinityGroups(("rep",), strict=True)
    data = [f"rep-{i}".encode() for i in range(30)]
    keys = VersionedKeys(mixed.cluster.etcd.url)
    try:
        async with engine(mixed.cluster) as running:
            client = running.client
            handle = await client.create(LedgerSpec(
                2, 2, 2, managed_ledger_custom_metadata("mix/rep/persistent/t", groups), groups))
            for payload in data:
                await handle.add(payload)
            await handle.close()
            ledger = handle.ledger_id
            assert set(ensemble_of(mixed.cluster, ledger)) == {a.bookie_id, b.bookie_id}
            recovery = AutoRecovery(keys, client, FAST, "127.0.0.1:8080", tick=0.1)
            recovery.start()
            try:
                group(a.bookie_id, b.bookie_id, theirs)
                b.kill()

                async def moved_to(target: str) -> bool:
                    return target in ensemble_of(mixed.cluster, ledger) and \
                        mixed.cluster.raw.get(paths.underreplicated_ledger(ledger)) is None

                await wait_until_async(lambda: moved_to(theirs), 90)
                async with await BookieClient.connect(theirs) as upstream_bookie:
                    for entry_id in range(len(data)):
                        assert (await upstream_bookie.read(ledger, entry_id))  # stored there

                spare.start()
                group(a.bookie_id, theirs, spare.bookie_id)
                a.kill()
                await wait_until_async(lambda: moved_to(spare.bookie_id), 90)
                assert set(ensemble_of(mixed.cluster, ledger)) == {theirs, spare.bookie_id}
                reader = await client.open(ledger)
                assert [(await reader.read(i)).payload for i in range(len(data))] == data
            finally:
                await recovery.stop()
    finally:
        spare.kill()
        await keys.close()
