"""Upstream BookKeeper 4.17.2 (its client API and BookieShell) against our bookies and our
ledger client, on each metadata store: on etcd through Pulsar 4.0.8's `metadata-store:` driver
reading our keys, on ZooKeeper through BookKeeper's own driver (`zk+hierarchical://`: its
hierarchical ledger znodes, ids from `/ledgers/idgen`, registrations under
`/ledgers/available`). Each flow runs with the V2 protocol (Pulsar's brokers:
`bookkeeperUseV2WireProtocol=true`) and with V3 (BookKeeper's default)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from metastore.paths import bookie_cookie
from storage.ledger import LedgerSpec
from tests.interop.upstream import UpstreamJvm, bookkeeper_service_uri
from tests.storage.testbed import (
    Cluster,
    ledger_client,
    start_cluster_on,
    stop_cluster,
)

CHROOT = "/bk-interop"


@pytest.fixture(scope="module", params=["etcd", "zookeeper"])
def bk_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[Cluster]:
    """Three of our bookie processes, on racks of their own in group `iso`, on an etcd of
    their own or on the session's ZooKeeper (every key under `CHROOT`)."""
    running = start_cluster_on(request, tmp_path_factory.mktemp("bk-interop"), 3, CHROOT)
    running.set_groups({"iso": running.ids})
    yield running
    stop_cluster(running)


def service_uri(cluster: Cluster) -> str:
    return bookkeeper_service_uri(cluster.etcd.url)


def lines(jvm: UpstreamJvm, *args: str) -> list[str]:
    result = jvm.run("bk-client", *args)
    assert result.code == 0, result
    return result.out.splitlines()


def plain_spec(e: int, w: int, a: int) -> LedgerSpec:
    return LedgerSpec(e, w, a, {"application": b"interop"})


PROTOCOLS = pytest.mark.parametrize("protocol", ["v2", "v3"])


@PROTOCOLS
def test_upstream_client_writes_and_reads_on_our_bookies(
    upstream_bookkeeper: UpstreamJvm, bk_cluster: Cluster, protocol: str
) -> None:
    uri = service_uri(bk_cluster)
    (created,) = lines(upstream_bookkeeper, "write", uri, protocol, "3", "2", "2", "20")
    ledger = created.split()[1]
    expected = ["lac 19", "closed true", *(f"entry {i} entry-{i}" for i in range(20))]
    for reader in ("v2", "v3"):
        assert lines(upstream_bookkeeper, "read", uri, reader, ledger) == expected
    ensembles = lines(upstream_bookkeeper, "ensembles", uri, ledger)
    assert len(ensembles) == 1 and set(ensembles[0].split()[2].split(",")) == set(bk_cluster.ids)


@PROTOCOLS
async def test_our_client_reads_what_upstream_wrote(upstream_bookkeeper: UpstreamJvm,
                                                   bk_cluster: Cluster, protocol: str) -> None:
    uri = service_uri(bk_cluster)
    (created,) = lines(upstream_bookkeeper, "write", uri, protocol, "3", "3", "2", "10")
    async with ledger_client(bk_cluster) as client:
        reader = await client.open(int(created.split()[1]))
        assert [(await reader.read(i)).payload for i in range(10)] == [
            f"entry-{i}".encode() for i in range(10)]


@PROTOCOLS
async def test_upstream_reads_what_our_client_wrote(upstream_bookkeeper: UpstreamJvm,
                                                    bk_cluster: Cluster, protocol: str) -> None:
    async with ledger_client(bk_cluster) as client:
        handle = await client.create(plain_spec(3, 2, 2))
        for i in range(12):
            await handle.add(f"entry-{i}".encode())
        await handle.close()
        reader = await client.open(handle.ledger_id)
        assert (await reader.read(11)).payload == b"entry-11"
    assert lines(upstream_bookkeeper, "read", service_uri(bk_cluster), protocol,
                 str(handle.ledger_id)) == [
        "lac 11", "closed true", *(f"entry {i} entry-{i}" for i in range(12))]


@PROTOCOLS
async def test_upstream_recovers_a_ledger_our_client_left_open(
    upstream_bookkeeper: UpstreamJvm, bk_cluster: Cluster, protocol: str
) -> None:
    async with ledger_client(bk_cluster) as client:
        handle = await client.create(plain_spec(3, 3, 2))
        for i in range(7):
            await handle.add(f"entry-{i}".encode())
        ledger = handle.ledger_id
        assert lines(upstream_bookkeeper, "recover", service_uri(bk_cluster), protocol,
                     str(ledger)) == [
            "lac 6", "closed true", *(f"entry {i} entry-{i}" for i in range(7))]
        closed = await client.read_metadata(ledger)
        assert closed.last_entry_id == 6
        # fenced: our writer cannot add past the recovered end
        with pytest.raises(Exception):  # noqa: B017 - any failure of the add is the point
            await handle.add(b"late")


def test_bookie_shell_reads_our_cluster(upstream_bookkeeper: UpstreamJvm, bk_cluster: Cluster,
                                        tmp_path: Path) -> None:
    uri = service_uri(bk_cluster)
    (created,) = lines(upstream_bookkeeper, "write", uri, "v3", "3", "2", "2", "3")
    ledger = created.split()[1]
    conf = tmp_path / "bk_server.conf"
    conf.write_text(f"metadataServiceUri={uri}\n")

    def shell(*args: str) -> str:
        result = upstream_bookkeeper.run("bookkeeper-shell", str(conf), *args)
        assert result.code == 0, result
        return result.out

    listed = shell("listbookies", "-rw").splitlines()
    assert listed[0] == "ReadWrite Bookies :"
    assert sorted(line.split(",")[0] for line in listed[1:]) == sorted(
        f"BookieID:{bookie}" for bookie in bk_cluster.ids)
    every = shell("listbookies", "-a").splitlines()  # the cookies under /ledgers/cookies
    assert every[0] == "All Bookies :", every
    assert sorted(line.split(",")[0] for line in every[1:]) == sorted(
        f"BookieID:{bookie}" for bookie in bk_cluster.ids)
    for bookie in bk_cluster.ids:  # upstream's Cookie parses ours and prints it back
        printed = shell("cookie_get", bookie)
        stored = bk_cluster.raw.get(bookie_cookie(bookie))
        assert stored is not None and stored.decode() in printed, (printed, stored)
    assert f"ledgerID: {ledger}" in shell("listledgers").splitlines()
    metadata = shell("ledgermetadata", "-l", ledger)
    assert ("ensembleSize=3, writeQuorumSize=2, ackQuorumSize=2, state=CLOSED, length=21, "
            "lastEntryId=2, digestType=CRC32C") in metadata, metadata
    read = shell("readledger", "-l", ledger).splitlines()
    assert [line.split(",")[:2] for line in read] == [
        [f"--------- Lid={ledger}", f" Eid={i}"] for i in range(3)], read
    with_bodies = shell("readledger", "-l", ledger, "-m")
    assert all(f"entry-{i}" in with_bodies or f"entry-{i}".encode().hex() in with_bodies
               for i in range(3)), with_bodies
