"""Shared test builders: placement topologies and configs, and admin API resources over HTTP.

Test files import builders from here, never from each other.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import random
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from hypothesis import strategies as st

from metastore import paths
from metastore.ledger_metadata import LedgerMetadata, LedgerState, encode_ledger_metadata
from metastore.store import MetadataStore, parse_metadata_store_url
from metastore.topology import read_cluster_view
from placement import AffinityGroups, PlacementConfig, PlacementMode, Topology
from storage.bookie_client import BookieClient
from storage.engine import build_ledger_client
from storage.ledger import BookiePool, LedgerClient, LedgerSpec
from storage.ledger.metadata import managed_ledger_custom_metadata
from storage.ledger.recovery import recover
from tests.support import RawEtcd, wait_until

# -- placement ----------------------------------------------------------------------------------


def bid(i: int) -> str:
    return f"10.0.0.{i}:3181"


def rack_map(racks: Mapping[str, str], group: str = "default") -> dict[str, dict[str, dict]]:
    """{bookie: rack} -> the /bookies document with every bookie in `group`."""
    return {group: {b: {"rack": r} for b, r in racks.items()}}


def topology(
    racks: Mapping[str, str],
    writable: Iterable[str] | None = None,
    read_only: Iterable[str] = (),
    mode: PlacementMode = PlacementMode.RACK,
    weights: Mapping[str, float] | None = None,
    extra_writable: Iterable[str] = (),
) -> Topology:
    ids = list(racks) if writable is None else list(writable)
    return Topology.build(rack_map(racks), [*ids, *extra_writable], read_only, weights, mode)


def uniform_cluster(n: int, per_rack: int = 20, prefix: str = "/rack") -> Topology:
    racks = {f"bk{i}:3181": f"{prefix}{i // per_rack}" for i in range(n)}
    return topology(racks)


def config(**kw: object) -> PlacementConfig:
    return PlacementConfig(**kw)  # type: ignore[arg-type]


PLACEMENT_GROUPS = ("g0", "g1", "g2")
PLACEMENT_RACKS = {
    PlacementMode.RACK: ("/r0", "/r1", "/r2", "/r3", "", "/bad/depth"),
    PlacementMode.REGION: ("/e0/r0", "/e0/r1", "/e1/r0", "/e2/r5", "", "/flat"),
}


@dataclass(frozen=True)
class DrawnCluster:
    """A cluster drawn for a property test: what `Topology.build` takes (built in the test,
    never in a strategy: building may use `random`, which a strategy must not)."""

    mode: PlacementMode
    bookies: list[str]
    rack_map: dict[str, dict[str, dict[str, str]]]
    writable: list[str]
    read_only: list[str]

    def topology(self) -> Topology:
        return Topology.build(self.rack_map, self.writable, self.read_only, mode=self.mode)


@st.composite
def drawn_clusters(draw: st.DrawFn, max_bookies: int) -> DrawnCluster:
    """Rack- or region-aware clusters of 1 to `max_bookies` bookies, each in one of
    `PLACEMENT_GROUPS` or none, on a rack of its mode (malformed ones included), writable,
    read-only or not registered."""
    mode = draw(st.sampled_from((PlacementMode.RACK, PlacementMode.REGION)))
    bookies = [f"b{i}:3181" for i in range(draw(st.integers(1, max_bookies)))]
    rack_map: dict[str, dict[str, dict[str, str]]] = {}
    writable: list[str] = []
    read_only: list[str] = []
    for b in bookies:
        group = draw(st.sampled_from((*PLACEMENT_GROUPS, None)))
        if group is not None:
            rack_map.setdefault(group, {})[b] = {
                "rack": draw(st.sampled_from(PLACEMENT_RACKS[mode]))}
        state = draw(st.sampled_from(("w", "w", "ro", "gone")))
        (writable if state == "w" else read_only if state == "ro" else []).append(b)
    return DrawnCluster(mode, bookies, rack_map, writable, read_only)


def rngs(count: int, base: int = 0) -> Iterable[random.Random]:
    for seed in range(base, base + count):
        yield random.Random(seed)


# -- the admin API over HTTP (a server from tests/conftest.py) ---------------------------------

NAMESPACES = "/admin/v2/namespaces"
TENANTS = "/admin/v2/tenants"
RACKS = "/admin/v2/bookies/racks-info"
CLUSTER = "test"


def assert_reason(response: httpx.Response, status: int, reason: str) -> None:
    assert (response.status_code, response.json()) == (status, {"reason": reason})


def add_cluster(store: RawEtcd, name: str) -> None:
    store.put(f"/admin/clusters/{name}", {"serviceUrl": f"http://{name}:8080"})


def create_tenant(
    admin: httpx.Client, tenant: str, clusters: list[str], roles: list[str] | None = None
) -> httpx.Response:
    return admin.put(
        f"{TENANTS}/{tenant}", json={"adminRoles": roles or [], "allowedClusters": clusters}
    )


def make_namespace(
    admin: httpx.Client,
    store: RawEtcd,
    name: str = "acme/ns1",
    clusters: tuple[str, ...] = ("test",),
) -> str:
    """A tenant allowed on `clusters` (created as needed) and a namespace in it."""
    tenant = name.split("/")[0]
    for cluster in clusters:
        add_cluster(store, cluster)
    if admin.get(f"/admin/v2/tenants/{tenant}").status_code == 404:
        assert create_tenant(admin, tenant, list(clusters)).status_code == 204
    assert admin.put(f"{NAMESPACES}/{name}").status_code == 204
    return name


def register(store: RawEtcd, *ids: str, read_only: bool = False) -> None:
    """Bookie registrations as bookies write them (writable or read-only)."""
    for bookie_id in ids:
        base = "/ledgers/available/readonly/" if read_only else "/ledgers/available/"
        store.put(base + bookie_id, b"")


def set_rack(admin: httpx.Client, bookie_id: str, rack: str, group: str) -> None:
    response = admin.post(f"{RACKS}/{bookie_id}", params={"group": group}, json={"rack": rack})
    assert response.status_code == 204, response.text


def register_broker(store: RawEtcd, broker_id: str, cpu: float = 0.0, **fields: Any) -> None:
    """What a broker writes at start (LocalBrokerData; only a few of its fields)."""
    host = broker_id.split(":")[0]
    data = {"webServiceUrl": f"http://{broker_id}", "pulsarServiceUrl": f"pulsar://{host}:6650",
            "cpu": {"usage": cpu, "limit": 100.0}, **fields}  # fmt: skip
    store.put(f"/loadbalance/brokers/{broker_id}", data)


def brokers_seen(admin: httpx.Client, count: int, cluster: str = CLUSTER) -> None:
    wait_until(lambda: len(admin.get(f"/admin/v2/brokers/{cluster}").json()) == count)


# -- TLS: a throwaway CA and certificates --------------------------------------------------------

KEY_USAGES = (
    "digital_signature",
    "content_commitment",
    "key_encipherment",
    "data_encipherment",
    "key_agreement",
    "key_cert_sign",
    "crl_sign",
    "encipher_only",
    "decipher_only",
)


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    clients: dict[str, tuple[Path, Path]]  # common name -> (certificate, key)


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> Path:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return path


def make_pki(directory: Path, client_names: tuple[str, ...] = ("client",)) -> Pki:
    """A CA, a server certificate for localhost/127.0.0.1 and client certificates whose common
    names are `client_names` (the first is `client_cert`)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("test-ca"))
        .issuer_name(_name("test-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                **dict.fromkeys(KEY_USAGES, False)
                | {"digital_signature": True, "key_cert_sign": True, "crl_sign": True}
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    (directory / "ca.pem").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))

    def leaf(common: str, server: bool) -> tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
        usage = (
            x509.oid.ExtendedKeyUsageOID.SERVER_AUTH
            if server
            else (x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH)
        )
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        cert_path = directory / f"{common}.pem"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return cert_path, _write_key(key, directory / f"{common}.key")

    server_cert, server_key = leaf("server", True)
    clients = {name: leaf(name, False) for name in client_names}
    first_cert, first_key = clients[client_names[0]]
    return Pki(directory / "ca.pem", server_cert, server_key, first_cert, first_key, clients)


# -- ledgers on a live cluster (real bookies, real etcd) ---------------------------------------


@asynccontextmanager
async def ledger_client(url: str) -> AsyncIterator[LedgerClient]:
    store = MetadataStore(parse_metadata_store_url(url))
    config = PlacementConfig()

    async def topology() -> Topology:
        return (await read_cluster_view(store, config)).topology

    client = build_ledger_client(store, BookiePool(BookieClient.connect), topology, config,
                                 random.Random(3))
    try:
        yield client
    finally:
        await client.close()
        await store.close()


async def write_ledgers(url: str, groups: AffinityGroups, sizes: tuple[int, int, int],
                        count: int, *, leave_open: int = 0) -> dict[int, list[bytes]]:
    """`count` closed ledgers (and `leave_open` more left OPEN, writer gone) of 12 entries."""
    written: dict[int, list[bytes]] = {}
    rng = random.Random(count)
    async with ledger_client(url) as client:
        for i in range(count + leave_open):
            handle = await client.create(LedgerSpec(*sizes, managed_ledger_custom_metadata(
                f"t/ns/persistent/d{i}", groups), groups))
            data = [rng.randbytes(rng.randint(1, 200)) for _ in range(12)]
            for payload in data:
                await handle.add(payload)
            if i < count:
                await handle.close()
            written[handle.ledger_id] = data
    return written


async def delete_ledgers(url: str, ledger_ids: list[int]) -> None:
    async with ledger_client(url) as client:
        for ledger_id in ledger_ids:
            await client.delete(ledger_id)


async def read_all(url: str, ledgers: dict[int, list[bytes]]) -> dict[int, list[bytes]]:
    async with ledger_client(url) as client:
        out = {}
        for ledger_id, data in ledgers.items():
            if not (await client.read_metadata(ledger_id)).is_closed:
                await recover(client, ledger_id)
            reader = await client.open(ledger_id)
            out[ledger_id] = [(await reader.read(i)).payload for i in range(len(data))]
        return out


def put_ledgers(raw: Any, count: int, topic: str, ensemble: list[str], segments: int = 1
                ) -> None:
    """`count` ledger metadata records (ids 1..count) of `topic`'s managed ledger, each with
    `segments` ensembles (every 100 entries) all on `ensemble`, written through etcd's JSON
    gateway of `raw` (a `RawEtcd`), 100 puts per transaction."""
    for start in range(1, count + 1, 100):
        ops = []
        for ledger_id in range(start, min(start + 100, count + 1)):
            metadata = LedgerMetadata(
                ledger_id=ledger_id, ensemble_size=len(ensemble),
                write_quorum_size=len(ensemble), ack_quorum_size=len(ensemble),
                ensembles={100 * s: tuple(ensemble) for s in range(segments)},
                state=LedgerState.CLOSED, last_entry_id=100 * segments - 1,
                length=100 * segments,
                custom_metadata=managed_ledger_custom_metadata(topic, None))
            ops.append({"requestPut": {
                "key": base64.b64encode(paths.ledger(ledger_id).encode()).decode(),
                "value": base64.b64encode(encode_ledger_metadata(metadata)).decode()}})
        httpx.post(f"{raw.base}/kv/txn", json={"success": ops}, timeout=30).raise_for_status()


def local_policies_of(store: Any, namespace: str = "acme/ns1", **fields: Any) -> dict[str, Any]:
    """The local policies Pulsar writes for `namespace` (a `RawEtcd`'s): the namespace's
    bundles first, then `fields`, `migrated` last."""
    bundles = store.get_json(f"/admin/policies/{namespace}")["bundles"]
    return {"bundles": bundles, **fields, "migrated": False}


def local_policies_bytes(store: Any, namespace: str = "acme/ns1", **fields: Any) -> bytes:
    """`local_policies_of`, compact JSON as stored."""
    return json.dumps(local_policies_of(store, namespace, **fields), separators=(",", ":")).encode()
