"""Every stored Pulsar document, differentially against upstream's own classes: Pulsar 4.0.8's
Policies, LocalPolicies, ClusterData, FailureDomainImpl, TenantInfo, the cluster's
`Map<String, NamespaceIsolationDataImpl>` and BookiesRackConfiguration, read and written by the
JSON serde Pulsar's metadata cache uses (`pulsar-json` in the shared JVM, a batch per call).

- upstream -> ours: what upstream stores reads through our model to the same values, and what
  we write back is byte-identical to upstream's own serialisation;
- ours -> upstream: what our models write upstream reads and writes back to the same bytes;
- odd documents another tool may store: our reading side follows its documented rule, and
  agrees with upstream where upstream defines the outcome (unknown fields are ignored: Pulsar's
  mapper has FAIL_ON_UNKNOWN_PROPERTIES off).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from api.services.racks import put_bookie, sorted_config
from metastore.codec import dump_json, load_json
from metastore.documents import decode_rack_config
from metastore.errors import ContentDeserializationError
from metastore.models import (
    BookieInfo,
    ClusterData,
    FailureDomain,
    LocalPolicies,
    NamespaceIsolationData,
    Policies,
    PulsarModel,
    TenantInfo,
)
from metastore.repositories.admin import read_isolation_policies
from tests.interop.upstream import UpstreamJvm

PATH = "/admin/document"


def _isolation_read(raw: bytes) -> dict[str, NamespaceIsolationData]:
    return {name: NamespaceIsolationData.from_stored(PATH, policy)
            for name, policy in read_isolation_policies(PATH, raw).items()}  # fmt: skip


def _isolation_write(value: dict[str, NamespaceIsolationData]) -> bytes:
    return dump_json({name: data.dump() for name, data in value.items()})


def _bookies_build(document: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """The rack map the racks service writes after setting each bookie of `document`."""
    config: dict[str, dict[str, dict[str, Any]]] = {}
    for group, bookies in document.items():
        for bookie, info in bookies.items():
            put_bookie(config, bookie, group, BookieInfo.model_validate(info))
    return config


def _bookies_write(config: dict[str, dict[str, dict[str, Any]]]) -> bytes:
    return dump_json(sorted_config(config))


@dataclass(frozen=True)
class Kind:
    """A stored document: how our repositories read its bytes and write a value back."""

    name: str
    read: Callable[[bytes], Any]
    write: Callable[[Any], bytes]
    build: Callable[[dict[str, Any]], Any]


def _model(model: type[PulsarModel]) -> Kind:
    return Kind(
        name="",
        read=lambda raw: model.from_stored(PATH, raw),
        write=lambda value: value.to_bytes(),
        build=model.model_validate,
    )


def _kind(name: str, base: Kind) -> Kind:
    return Kind(name, base.read, base.write, base.build)


KINDS = {
    "policies": _kind("policies", _model(Policies)),
    # Our repositories never write null bundles (Pulsar reads null as one bundle, so not even
    # Pulsar's own null survives its round trip): a generated null is left out.
    "local-policies": Kind(
        "local-policies",
        lambda raw: LocalPolicies.from_stored(PATH, raw),
        lambda value: value.to_bytes(),
        lambda doc: LocalPolicies.model_validate(
            {k: v for k, v in doc.items() if not (k == "bundles" and v is None)}
        ),
    ),
    "cluster": _kind("cluster", _model(ClusterData)),
    "failure-domain": _kind("failure-domain", _model(FailureDomain)),
    "tenant": _kind("tenant", _model(TenantInfo)),
    "isolation": Kind(
        "isolation",
        _isolation_read,
        _isolation_write,
        lambda doc: {name: NamespaceIsolationData.model_validate(p) for name, p in doc.items()},
    ),
    "bookies": Kind("bookies", decode_rack_config, _bookies_write, _bookies_build),
}


# -- generated documents, with Pulsar's field names ---------------------------------------------

# Unicode of every plane, control characters included (both sides escape them), no surrogates.
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
NAMES = st.lists(TEXT, max_size=5)
INT = st.integers(-(2**31), 2**31 - 1)
LONG = st.integers(-(2**63), 2**63 - 1)


def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A field that is set, null or absent (absent: dropped by `_document`)."""
    return st.one_of(strategy, st.none(), st.just(ABSENT))


ABSENT = object()


def _document(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({k: _maybe(v) for k, v in fields.items()}).map(
        lambda d: {k: v for k, v in d.items() if v is not ABSENT}
    )


# Doubles whose shortest digits JDK 17's Double.toString also prints (it may print one digit
# more for others, e.g. 2.2965458667586432E16; JDK 19+ and ours print the shortest).
DOUBLE = st.one_of(
    st.integers(-(10**9), 10**9).map(lambda n: n / 64),
    st.sampled_from([1.5e10, 1e-5, 1e7, 9999999.0, 0.001, 1.7976931348623157e308, -0.0]),
)
BUNDLES = st.fixed_dictionaries({"boundaries": st.lists(TEXT, max_size=3), "numBundles": INT})
PERSISTENCE = st.fixed_dictionaries({
    "bookkeeperEnsemble": INT,
    "bookkeeperWriteQuorum": INT,
    "bookkeeperAckQuorum": INT,
    "managedLedgerMaxMarkDeleteRate": DOUBLE,
})  # fmt: skip
AFFINITY = _document(
    bookkeeperAffinityGroupPrimary=TEXT, bookkeeperAffinityGroupSecondary=TEXT
)

DOCUMENTS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "policies": _document(
        replication_clusters=NAMES,
        allowed_clusters=NAMES,
        bundles=BUNDLES,
        persistence=PERSISTENCE,
        deleted=st.booleans(),
        encryption_required=st.booleans(),
        offload_threshold=LONG,
        offload_threshold_in_seconds=LONG,
        message_ttl_in_seconds=INT,
        schema_validation_enforced=st.booleans(),
        subscription_types_enabled=st.lists(st.sampled_from(["Exclusive", "Shared"])),
        properties=st.dictionaries(TEXT, TEXT, max_size=3),
        migrated=st.booleans(),
        resource_group_name=TEXT,
    ),
    "local-policies": _document(
        bundles=BUNDLES,
        bookieAffinityGroup=AFFINITY,
        namespaceAntiAffinityGroup=TEXT,
        migrated=st.booleans(),
    ),
    "cluster": _document(
        serviceUrl=TEXT,
        serviceUrlTls=TEXT,
        brokerServiceUrl=TEXT,
        proxyServiceUrl=TEXT,
        authenticationPlugin=TEXT,
        proxyProtocol=st.just("SNI"),
        peerClusterNames=NAMES,
        brokerClientTlsEnabled=st.booleans(),
        tlsAllowInsecureConnection=st.booleans(),
        brokerClientTlsTrustStoreType=TEXT,
        brokerClientTlsKeyStore=TEXT,
        brokerClientSslFactoryPlugin=TEXT,
        listenerName=TEXT,
    ),
    "failure-domain": _document(brokers=NAMES),
    "tenant": _document(adminRoles=NAMES, allowedClusters=NAMES),
    "isolation": st.dictionaries(
        TEXT,
        _document(
            namespaces=NAMES,
            primary=NAMES,
            secondary=NAMES,
            auto_failover_policy=_document(
                parameters=st.dictionaries(TEXT, TEXT, max_size=2),
                policy_type=st.just("min_available"),
            ),
            unload_scope=st.sampled_from(["all_matching", "none", "changed"]),
        ),
        max_size=3,
    ),
    "bookies": st.dictionaries(
        TEXT, st.dictionaries(TEXT, _document(rack=TEXT, hostname=TEXT), max_size=3), max_size=3
    ),
}

# Written by hand: unset, null, empty collections, unicode, large numbers, unknown fields.
HAND: dict[str, list[bytes]] = {
    "policies": [
        b"{}",
        b'{"replication_clusters":["b","a","c","a"],"bundles":{"boundaries":["0x00000000",'
        b'"0xffffffff"],"numBundles":1},"persistence":{"bookkeeperEnsemble":3,'
        b'"bookkeeperWriteQuorum":2,"bookkeeperAckQuorum":2,'
        b'"managedLedgerMaxMarkDeleteRate":1.5E10},"offload_threshold":9223372036854775807}',
        b'{"message_ttl_in_seconds":60,"deduplicationEnabled":true,"someday":{"x":1},'
        b'"properties":{"\xc3\xa9":"\xf0\x9f\x98\x80"},"replication_clusters":["r"]}',
        b'{"schema_auto_update_compatibility_strategy":"Backward",'
        b'"is_allow_auto_update_schema":false,"subscription_auth_mode":"Prefix"}',
        b'{"backlog_quota_map":{"message_age":{"limitTime":5,"policy":"producer_request_hold"},'
        b'"destination_storage":{"limitSize":10,"policy":"consumer_backlog_eviction"}},'
        b'"retention_policies":{"retentionTimeInMinutes":1,"retentionSizeInMB":2},'
        b'"auth_policies":{"namespace_auth":{"r":["produce","consume"]},"destination_auth":{},'
        b'"subscription_auth_roles":{"s":["b","a"]}},'
        b'"clusterDispatchRate":{"c":{"dispatchThrottlingRateInMsg":1}}}',
    ],
    "local-policies": [
        b"{}",
        b'{"bookieAffinityGroup":{"bookkeeperAffinityGroupPrimary":"a"},'
        b'"namespaceAntiAffinityGroup":"g","unknown":[1]}',
        b'{"bundles":null,"bookieAffinityGroup":null,"migrated":true}',
    ],
    "cluster": [
        b"{}",
        b'{"serviceUrl":"http://x:8080","brokerClientTlsTrustStoreType":"PKCS12",'
        b'"peerClusterNames":["b","a"],"proxyProtocol":"SNI","extra":1}',
        b'{"proxyProtocol":"HTTP2"}',
    ],
    "failure-domain": [b"{}", b'{"brokers":[]}', b'{"brokers":["b:8080","a:8080","b:8080"]}'],
    "tenant": [b"{}", b'{"adminRoles":[],"allowedClusters":["z","y","x"]}'],
    "isolation": [
        b"{}",
        b'{"p":{}}',
        b'{"p2":{"namespaces":["a/.*"],"primary":["b.*"],"auto_failover_policy":'
        b'{"policy_type":"min_available","parameters":{"min_limit":"1",'
        b'"usage_threshold":"80"}}},"p1":{"unload_scope":"none"}}',
    ],
    "bookies": [
        b"{}",
        b'{"default":{"127.0.0.1:3181":{"rack":"/r1","hostname":"h"}},'
        b'"a":{"b:1":{"rack":"/r2"}}}',
    ],
}


def _read_ours(kind: Kind, raw: bytes) -> Any:
    return kind.read(raw)


def _agree(upstream: UpstreamJvm, kind: Kind, documents: list[bytes]) -> None:
    """Upstream stores `documents` as U; ours reads each U and writes back what upstream writes
    when it reads U (U itself, but where Pulsar's defaults differ from null: a LocalPolicies
    stored without `bundles` reads as one bundle)."""
    stored = upstream.pulsar_json(kind.name, documents)
    readable = [(d, u) for d, u in zip(documents, stored, strict=True) if isinstance(u, bytes)]
    again = upstream.pulsar_json(kind.name, [u for _, u in readable])
    for (document, first), second in zip(readable, again, strict=True):
        assert isinstance(second, bytes), (kind.name, first, second)
        ours = kind.write(_read_ours(kind, first))
        assert ours == second, (
            f"{kind.name}: {document!r}\nupstream {second!r}\nours     {ours!r}"
        )


def _accepted(upstream: UpstreamJvm, kind: Kind, values: list[Any]) -> None:
    """What ours writes for `values`, upstream reads and writes back to the same bytes."""
    written = [kind.write(value) for value in values]
    for ours, theirs in zip(written, upstream.pulsar_json(kind.name, written), strict=True):
        assert theirs == ours, f"{kind.name}:\nours     {ours!r}\nupstream {theirs!r}"


@pytest.mark.parametrize("name", sorted(KINDS))
def test_upstream_written_documents_read_and_write_back_identically(
    upstream_documents: UpstreamJvm, name: str
) -> None:
    kind = KINDS[name]
    defaults = upstream_documents.pulsar_json_defaults(name)
    made = [raw for raw in defaults.values() if raw is not None]
    _agree(upstream_documents, kind, [*HAND[name], *made])


@pytest.mark.parametrize("name", sorted(KINDS))
def test_generated_documents_upstream_to_ours_and_back(
    upstream_documents: UpstreamJvm, name: str
) -> None:
    @settings(max_examples=2, deadline=None, phases=(Phase.generate,), database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.lists(DOCUMENTS[name], min_size=15, max_size=15))
    def check(documents: list[dict[str, Any]]) -> None:
        encoded = [json.dumps(d, ensure_ascii=False).encode() for d in documents]
        _agree(upstream_documents, KINDS[name], encoded)

    check()


@pytest.mark.parametrize("name", sorted(KINDS))
def test_what_ours_writes_upstream_reads_and_writes_identically(
    upstream_documents: UpstreamJvm, name: str
) -> None:
    kind = KINDS[name]

    @settings(max_examples=2, deadline=None, phases=(Phase.generate,), database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.lists(DOCUMENTS[name], min_size=15, max_size=15))
    def check(documents: list[dict[str, Any]]) -> None:
        values = []
        for document in documents:
            try:
                values.append(kind.build(document))
            except ValueError:
                continue  # not a value of our model (our API refuses it)
        _accepted(upstream_documents, kind, values)

    check()


# -- odd documents another tool may store ---------------------------------------------------

UNREADABLE = [b"", b"not json", b"[]", b'"text"', b"7"]


@pytest.mark.parametrize("name", sorted(KINDS))
def test_unknown_fields_are_ignored_as_upstream_ignores_them(
    upstream_documents: UpstreamJvm, name: str
) -> None:
    """Pulsar's mapper has FAIL_ON_UNKNOWN_PROPERTIES off: an unknown field reads as if it
    were absent, on both sides."""
    kind = KINDS[name]
    plain, extended = {
        "isolation": (b'{"p":{"namespaces":["a"]}}', b'{"p":{"namespaces":["a"],"x":[1]}}'),
        "bookies": (b'{"g":{"b:1":{"rack":"/r"}}}', b'{"g":{"b:1":{"rack":"/r","x":{}}}}'),
    }.get(name, (b"{}", b'{"someFutureField":{"a":[1,null]}}'))
    theirs = upstream_documents.pulsar_json(name, [plain, extended])
    assert theirs[0] == theirs[1] and isinstance(theirs[0], bytes)
    ours = kind.read(extended)
    if name == "bookies":  # kept as stored: our rack map is never rewritten by a reader
        assert ours == {"g": {"b:1": {"rack": "/r", "x": {}}}}
        return
    if name in ("policies", "local-policies"):  # kept, so a later write does not drop it
        assert kind.write(ours).endswith(b',"someFutureField":{"a":[1,null]}}')
        ours = kind.build({k: v for k, v in ours.dump().items() if k != "someFutureField"})
    assert kind.write(ours) == kind.write(kind.read(plain))


@pytest.mark.parametrize("name", sorted(KINDS))
def test_unreadable_documents(upstream_documents: UpstreamJvm, name: str) -> None:
    """Bytes that are not a JSON object: upstream's reader fails on each. Ours: /bookies reads
    as no racks (placement is never taken down by another tool's rack map), a cluster's
    isolation policies that are JSON but not a map as none; every other document is
    `ContentDeserializationError` with Pulsar's message (a namespace's own unreadable
    document is an error, never "no policy")."""
    theirs = upstream_documents.pulsar_json(name, UNREADABLE)
    assert all(isinstance(answer, str) for answer in theirs), theirs
    for raw in UNREADABLE:
        if name == "bookies" or (name == "isolation" and raw.startswith((b"[", b'"', b"7"))):
            assert KINDS[name].read(raw) == {}
            continue
        with pytest.raises(ContentDeserializationError) as failed:
            KINDS[name].read(raw)
        assert str(failed.value) == f"Failed to deserialize payload for key '{PATH}'"


def test_wrong_types_inside_documents(upstream_documents: UpstreamJvm) -> None:
    """Fields of the wrong type. Upstream fails on each; our reading sides follow their rules:
    the strict model (the API's view) fails alike, the tolerant reading side for placement
    and lookup reads what it can."""
    odd_local = [
        b'{"bookieAffinityGroup":7}',
        b'{"bookieAffinityGroup":{"bookkeeperAffinityGroupPrimary":["a"]}}',
        b'{"namespaceAntiAffinityGroup":{"g":1}}',
        b'{"bundles":"0x0"}',
    ]
    assert all(isinstance(a, str) for a in upstream_documents.pulsar_json("local-policies",
                                                                          odd_local))
    for raw in odd_local:
        with pytest.raises(ContentDeserializationError):
            LocalPolicies.from_stored(PATH, raw)
    read = [LocalPolicies.read(PATH, raw) for raw in odd_local]
    assert [r.bookie_affinity for r in read] == [None, None, None, None]
    assert read[2].anti_affinity_group is None and read[3].bundle_boundaries is None

    odd_policies = [b'{"persistence":"x"}', b'{"persistence":{"bookkeeperEnsemble":"three"}}']
    assert all(isinstance(a, str) for a in upstream_documents.pulsar_json("policies",
                                                                          odd_policies))
    assert Policies.read(PATH, odd_policies[0]).persistence_request is None
    with pytest.raises(ContentDeserializationError):
        Policies.read(PATH, odd_policies[1])  # a count that is not a number: an error

    odd_bookies = [b'{"g":7,"h":{"b:1":{"rack":"/r"}}}']
    assert isinstance(upstream_documents.pulsar_json("bookies", odd_bookies)[0], str)
    assert decode_rack_config(odd_bookies[0]) == {"h": {"b:1": {"rack": "/r"}}}

    odd_domain = [b'{"brokers":"b:8080"}', b'{"brokers":[{"b":1}]}']
    assert all(isinstance(a, str) for a in upstream_documents.pulsar_json("failure-domain",
                                                                          odd_domain))
    assert [FailureDomain.read(raw).brokers for raw in odd_domain] == [[], []]


def test_nulls_and_scalars_where_upstream_coerces(upstream_documents: UpstreamJvm) -> None:
    """Where Jackson coerces, ours reads the same values: a null primitive is its default, a
    scalar in a list of strings is its text."""
    documents = [
        b'{"deleted":null,"offload_threshold":null,"replication_clusters":[1,true]}',
        b'{"p":{"namespaces":[1,true],"auto_failover_policy":{"parameters":{"a":1}}}}',
    ]
    policies, isolation = (upstream_documents.pulsar_json("policies", documents[:1])[0],
                           upstream_documents.pulsar_json("isolation", documents[1:])[0])
    assert isinstance(policies, bytes) and isinstance(isolation, bytes)
    assert KINDS["isolation"].write(KINDS["isolation"].read(documents[1])) == isolation
    assert load_json(policies)["replication_clusters"] == ["1", "true"]
    assert load_json(policies)["offload_threshold"] == 0


def test_a_kept_integer_beyond_64_bits_is_written_back() -> None:
    """A field another tool stored with an integer Java could not hold is kept as given."""
    raw = b'{"someFutureField":123456789012345678901234567890,"persistence":{}}'
    assert Policies.from_stored(PATH, raw).to_bytes().endswith(
        b',"someFutureField":123456789012345678901234567890}'
    )
