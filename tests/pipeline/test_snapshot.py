"""`pipeline.snapshot` against a real etcd: ledgers written through our ledger store, the
other documents as Pulsar stores them; the five tables it writes, and its errors."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from metastore import paths
from metastore.embedded import EmbeddedEtcd, free_port
from metastore.ledger_metadata import LedgerMetadata, LedgerState
from metastore.ledgers import LedgerMetadataStore
from metastore.managed_ledger_info import LedgerInfo, ManagedLedgerInfo, encode_managed_ledger_info
from metastore.versioned_keys import VersionedKeys
from pipeline.placement_inputs import build_placement_inputs
from pipeline.schema import LEDGER_COLUMNS, TABLES, check_snapshot, denormalised, read_table
from pipeline.snapshot import snapshot
from placement import PlacementConfig
from tests.support import RawEtcd
from tests.zookeeper import EmbeddedZooKeeper

B1, B2, B3, B4, GHOST = "b1:3181", "b2:3181", "b3:3181", "b4:3181", "ghost:3181"
STRICT_ML = "public/strict/persistent/t+1%2Fx"  # local name "t 1/x", URL-encoded
LONG_ID = 2**31 + 5
BULK = 700  # enough ledgers for several pages at page size 100
RACKS = {"g1": {B1: {"rack": "/r1", "hostname": "b1"}, B2: {"rack": "/r2"}},
         "g2": {B3: {"rack": "/r1", "hostname": "b3"}}}
CONF = {"bookkeeperClientEnforceMinNumRacksPerWriteQuorum": "true",
        "strictBookieAffinityEnabled": "true"}


def ledgers() -> list[LedgerMetadata]:
    named = {"application": b"pulsar", "component": b"managed-ledger",
             "pulsar/managed-ledger": STRICT_ML.encode(),
             "EnsemblePlacementPolicyConfig": b'{\n  "policyClass" : "x"\n}'}
    out = [
        LedgerMetadata(1, 2, 2, 2, {0: (B1, B2), 10: (B1, B3)}, state=LedgerState.CLOSED,
                       last_entry_id=19, length=2000, custom_metadata=named),
        LedgerMetadata(2, 3, 2, 1, {0: (B1, GHOST, B4)}),  # open; ghost: never registered
        LedgerMetadata(3, 2, 2, 2, {0: (B2, B3)}, state=LedgerState.CLOSED, last_entry_id=4,
                       length=50),  # topic only from /managed-ledgers
        LedgerMetadata(LONG_ID, 2, 2, 2, {0: (B3, B4)}, state=LedgerState.CLOSED,
                       last_entry_id=0, length=7),
    ]
    out += [LedgerMetadata(100 + i, 2, 2, 2, {0: (B1, B2)}) for i in range(BULK)]
    return out


def populate(endpoint: object, raw: RawEtcd) -> None:
    """The test cluster's metadata: ledgers through the ledger store, the rest raw."""

    async def write() -> None:
        keys = VersionedKeys([endpoint])  # type: ignore[list-item]
        store = LedgerMetadataStore(keys)
        try:
            await asyncio.gather(*(store.create(md) for md in ledgers()))
        finally:
            await keys.close()

    asyncio.run(write())
    raw.put(paths.BOOKIES_RACK_CONFIG, RACKS)
    for key in (paths.BOOKIES_AVAILABLE, paths.BOOKIES_READONLY, paths.bookie_available(B1),
                paths.bookie_available(B4), paths.bookie_readonly(B2)):
        raw.put(key, b"")
    raw.put(paths.LEDGERS_LAYOUT, b"2\nx:1")
    raw.put(paths.LEDGERS_INSTANCE_ID, b"uuid")
    raw.put(paths.underreplicated_ledger(1), b'replica: "b1:3181"\n')
    raw.put(paths.tenant("public"), {"allowedClusters": ["test"]})
    raw.put(paths.namespace("public", "strict"),
            {"persistence": {"bookkeeperEnsemble": 3, "bookkeeperWriteQuorum": 2,
                             "bookkeeperAckQuorum": 2}})
    raw.put(paths.local_policies("public", "strict"),
            {"bookieAffinityGroup": {"bookkeeperAffinityGroupPrimary": "g1",
                                     "bookkeeperAffinityGroupSecondary": "g2",
                                     "bookkeeperAffinityGroupStrict": True}})
    raw.put(paths.namespace("public", "default"), {})
    raw.put(paths.local_policies("public", "default"), {"bundles": {}})
    ml = paths.managed_ledger("public", "default", "t2")
    raw.put(ml, encode_managed_ledger_info(ManagedLedgerInfo((LedgerInfo(3, 5, 50),))))
    raw.put(paths.managed_ledger_cursor(ml, "sub"), b"\x08\x01")  # a cursor: not a topic


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedEtcd]:
    server = EmbeddedEtcd(tmp_path_factory.mktemp("snap-etcd"))
    server.start()
    try:
        populate(server.endpoint, RawEtcd(server.endpoint))
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def exported(populated: EmbeddedEtcd, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("snap-out")
    cfg = PlacementConfig.from_broker_conf(CONF)
    asyncio.run(snapshot(populated.url, out, cfg, page_size=100, concurrency=3))
    return out


def tables(out: Path) -> dict[str, pa.Table]:
    found = check_snapshot(out)
    return {name: read_table(found[name], schema) for name, schema in TABLES.items()}


def test_ledgers_and_fragments(exported: Path) -> None:
    t = tables(exported)
    led = {r["ledger_id"]: r for r in t["ledgers"].to_pylist()}
    assert len(led) == 4 + BULK
    assert t["ledgers"].column("ledger_id").to_pylist() == sorted(led)
    one = led[1]
    assert (one["tenant"], one["namespace"], one["topic"]) == (
        "public", "public/strict", "persistent://public/strict/t 1/x")
    assert (one["state"], one["length"], one["last_entry_id"]) == ("CLOSED", 2000, 19)
    assert one["placement_policy"] == '{\n  "policyClass" : "x"\n}'
    assert (led[2]["ensemble_size"], led[2]["write_quorum"], led[2]["ack_quorum"]) == (3, 2, 1)
    assert (led[2]["state"], led[2]["last_entry_id"], led[2]["topic"]) == ("OPEN", -1, None)
    assert led[3]["topic"] == "persistent://public/default/t2"
    assert led[LONG_ID]["length"] == 7
    ids = t["bookies"].column("bookie_id").to_pylist()
    frags = [(r["ledger_id"], r["segment"], r["first_entry_id"], r["last_entry_id"],
              [ids[b] for b in r["ensemble"]])
             for r in t["fragments"].to_pylist() if r["ledger_id"] in (1, 2, LONG_ID)]
    assert frags == [(1, 0, 0, 9, [B1, B2]), (1, 1, 10, 19, [B1, B3]),
                     (2, 0, 0, -1, [B1, GHOST, B4]), (LONG_ID, 0, 0, 0, [B3, B4])]
    assert t["fragments"].num_rows == 5 + BULK
    assert denormalised(check_snapshot(exported)["fragments"])  # the ledger's columns too
    two = pq.read_table(exported / "fragments").filter(pc.equal(
        pc.field("ledger_id"), 2)).select([f.name for f in LEDGER_COLUMNS]).to_pylist()
    assert two == [{"namespace": None, "state": "OPEN", "write_quorum": 2, "ack_quorum": 1,
                    "ledger_length": 0, "ledger_last_entry_id": -1}]


def test_bookies_policies_config(exported: Path) -> None:
    t = tables(exported)
    rows = {r["bookie_id"]: r for r in t["bookies"].to_pylist()}
    assert list(rows) == sorted([B1, B2, B3, B4, GHOST])
    assert [r["bookie_index"] for r in rows.values()] == list(range(5))
    pick = ("registered", "read_only", "rack", "region", "group", "hostname")
    assert {b: tuple(r[k] for k in pick) for b, r in rows.items()} == {
        B1: (True, False, "/r1", "UnknownRegion", "g1", "b1"),
        B2: (True, True, "/r2", "UnknownRegion", "g1", None),
        B3: (False, False, "/r1", "UnknownRegion", "g2", "b3"),
        B4: (True, False, None, "UnknownRegion", None, None),
        GHOST: (False, False, None, "UnknownRegion", None, None),
    }
    assert t["policies"].to_pylist() == [{  # every namespace, groups null when none
        "namespace": "public/default", "primary_groups": None, "secondary_groups": None,
        "strict": None, "ensemble_size": None, "write_quorum": None, "ack_quorum": None}, {
        "namespace": "public/strict", "primary_groups": ["g1"], "secondary_groups": ["g2"],
        "strict": True, "ensemble_size": 3, "write_quorum": 2, "ack_quorum": 2}]
    config = t["config"].to_pylist()[0]
    assert (config["placement_mode"], config["enforce_min_racks"],
            config["strict_bookie_affinity"], config["min_racks"]) == ("rack-aware", True, True, 2)
    cluster = build_placement_inputs(t["bookies"], t["policies"], t["config"])
    assert cluster.bookie_ids == tuple(sorted([B1, B2, B3, B4, GHOST]))


def test_cli_and_unreachable_store(populated: EmbeddedEtcd, exported: Path,
                                   tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("# placement\n" + "".join(f"{k}={v}\n" for k, v in CONF.items())
                    + f"metadataStoreUrl={populated.url}\n")
    done = subprocess.run([sys.executable, "-m", "pipeline", "snapshot", "--config", str(conf),
                           "--out", str(tmp_path / "cli"), "--page-size", "64"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ledgers"] == 4 + BULK
    assert "ledgers read" in done.stderr
    for name, table in tables(tmp_path / "cli").items():
        assert table.equals(tables(exported)[name]), name
    port = free_port()
    bad = subprocess.run([sys.executable, "-m", "pipeline", "snapshot", "--metadata-store-url",
                          f"etcd:http://127.0.0.1:{port}", "--out", str(tmp_path / "x"),
                          "--timeout", "1"], capture_output=True, text=True, timeout=60,
                         check=False)
    assert bad.returncode == 2
    assert f"metadata store etcd:http://127.0.0.1:{port}" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_zookeeper_gives_the_same_tables(populated: EmbeddedEtcd, exported: Path,
                                         zookeeper: EmbeddedZooKeeper, tmp_path: Path) -> None:
    """Every key of the etcd cluster as a znode with the same bytes (parents created as
    ZooKeeper needs them, empty): snapshotting ZooKeeper gives the same five tables."""
    from kazoo.client import KazooClient

    zookeeper.wipe()
    stored = RawEtcd(populated.endpoint).snapshot()
    client = KazooClient(hosts=f"127.0.0.1:{zookeeper.port}", timeout=10)
    client.start(10)
    try:
        for path in sorted(stored):
            if client.exists(path):
                client.set(path, stored[path])
            else:
                client.create(path, stored[path], makepath=True)
    finally:
        client.stop()
        client.close()
    cfg = PlacementConfig.from_broker_conf(CONF)
    counts = asyncio.run(snapshot(zookeeper.url, tmp_path, cfg, page_size=100, concurrency=3))
    assert counts["ledgers"] == 4 + BULK
    from_etcd, from_zk = tables(exported), tables(tmp_path)
    for name in TABLES:
        assert from_zk[name].equals(from_etcd[name]), name


def test_unreachable_zookeeper(tmp_path: Path) -> None:
    port = free_port()
    bad = subprocess.run([sys.executable, "-m", "pipeline", "snapshot", "--metadata-store-url",
                          f"zk:127.0.0.1:{port}", "--out", str(tmp_path), "--timeout", "1"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2
    assert f"metadata store zk:127.0.0.1:{port}" in bad.stderr
    assert "Traceback" not in bad.stderr
