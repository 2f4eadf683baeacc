"""Pure decoders of stored documents (metastore/documents.py): no etcd needed, and none of it
needs the etcd client to import."""

from __future__ import annotations

import subprocess
import sys

import pytest

from metastore.documents import (
    decode_broker,
    decode_failure_domain,
    decode_local_policies,
    decode_policies,
    decode_rack_config,
    registrations_of,
)
from metastore.errors import ContentDeserializationError
from placement import AffinityGroups, EnsembleRequest
from tests.support import REPO


def test_decoders_import_without_the_etcd_client() -> None:
    code = (
        "import sys; sys.modules['aetcd'] = None\n"
        "import metastore.documents, metastore.paths, metastore.codec, metastore.errors\n"
        "assert 'metastore.store' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_rack_config_tolerates_what_another_tool_wrote() -> None:
    assert decode_rack_config(b'{"g":{"b:1":{"rack":"/r"}},"bad":3}') == {
        "g": {"b:1": {"rack": "/r"}}
    }
    assert decode_rack_config(b"not json") == {} and decode_rack_config(None) == {}
    assert decode_rack_config(b"[1]") == {}


def test_registrations_split_writable_and_read_only() -> None:
    found = registrations_of([
        "/ledgers/available/a:3181", "/ledgers/available/readonly",
        "/ledgers/available/readonly/b:3181", "/ledgers/available/readonly/a:3181",
        "/ledgers/available/x/deeper",
    ])  # fmt: skip
    assert found.writable == {"a:3181"} and found.read_only == {"b:3181"}
    assert found.all == {"a:3181", "b:3181"}


def test_policies_persistence_with_pulsar_defaults() -> None:
    path = "/admin/policies/t/ns"
    assert decode_policies(path, b"{}").persistence is None
    stored = b'{"persistence":{"bookkeeperEnsemble":5,"bookkeeperWriteQuorum":3}}'
    assert decode_policies(path, stored).persistence_request == EnsembleRequest(5, 3, 2)
    with pytest.raises(ContentDeserializationError, match="t/ns"):
        decode_policies(path, b'{"persistence":{"bookkeeperEnsemble":"five"}}')
    with pytest.raises(ContentDeserializationError):
        decode_policies(path, b"[]")


def test_local_policies_affinity_strict_anti_affinity_and_bundles() -> None:
    raw = (b'{"bookieAffinityGroup":{"bookkeeperAffinityGroupPrimary":"a, b",'
           b'"bookkeeperAffinityGroupSecondary":"c","bookkeeperAffinityGroupStrict":true},'
           b'"namespaceAntiAffinityGroup":"g1","bundles":{"boundaries":["0x0","0xffffffff"]}}')
    local = decode_local_policies("/admin/local-policies/t/ns", raw)
    assert local.bookie_affinity == AffinityGroups(("a", "b"), ("c",), strict=True)
    assert local.anti_affinity_group == "g1"
    assert local.bundle_boundaries == ("0x0", "0xffffffff")
    empty = decode_local_policies("/p", b'{"bookieAffinityGroup":{}}')
    # Pulsar's LocalPolicies without `bundles`: one bundle over the whole range
    assert empty.bookie_affinity is None
    assert empty.bundle_boundaries == ("0x00000000", "0xffffffff")
    odd = decode_local_policies("/p", b'{"bundles":7}')
    assert odd.bundle_boundaries is None


def test_failure_domain_and_broker_registration() -> None:
    assert decode_failure_domain(b'{"brokers":["b1:8080",3]}') == ["b1:8080"]
    assert decode_failure_domain(b"oops") == []
    broker = decode_broker("h:8080", b'{"pulsarServiceUrl":"pulsar://h:6650",'
                           b'"cpu":{"usage":30,"limit":100},"memory":{"usage":1,"limit":2}}')
    assert broker.web_service_url == "http://h:8080"
    assert broker.pulsar_service_url == "pulsar://h:6650" and broker.load == 50.0
