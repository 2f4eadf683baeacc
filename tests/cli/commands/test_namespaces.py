"""`pulsar-admin namespaces`, end to end."""

from __future__ import annotations

import httpx

from tests.cli.conftest import CliRunner, admin_error, failed, ok
from tests.support import RawEtcd


def tenant(cli: CliRunner, name: str = "t1") -> None:
    ok(cli("clusters", "create", "test", "--url", "http://localhost:8080"))
    ok(cli("tenants", "create", name))


def test_create_list_delete(cli: CliRunner) -> None:
    tenant(cli)
    ok(cli("namespaces", "create", "t1/ns1"))
    ok(cli("namespaces", "create", "t1/ns2", "-b", "8", "-c", "test"))
    assert ok(cli("namespaces", "list", "t1")) == "t1/ns1\nt1/ns2\n"
    ok(cli("namespaces", "delete", "t1/ns1"))
    assert ok(cli("namespaces", "list", "t1")) == "t1/ns2\n"


def test_create_sends_bundles_and_clusters(cli: CliRunner, clean_store: RawEtcd) -> None:
    tenant(cli)
    ok(cli("namespaces", "create", "t1/ns1", "--bundles", "8", "--clusters", "test"))
    stored = clean_store.get_json("/admin/policies/t1/ns1")
    assert stored["replication_clusters"] == ["test"]
    assert stored["bundles"]["numBundles"] == 8


def test_policies_is_pretty_json_of_the_policies(cli: CliRunner, admin: httpx.Client) -> None:
    tenant(cli)
    ok(cli("namespaces", "create", "t1/ns1"))
    out = ok(cli("namespaces", "policies", "t1/ns1"))
    assert out.startswith("{\n  ")
    assert '  "replication_clusters" : [ "test" ],\n' in out
    assert out.endswith("\n}\n")


def test_namespace_errors(cli: CliRunner) -> None:
    tenant(cli)
    ok(cli("namespaces", "create", "t1/ns1"))
    assert failed(cli("namespaces", "create", "t1/ns1")) == admin_error("Namespace already exists")
    assert failed(cli("namespaces", "create", "nope/ns1")) == admin_error("Tenant does not exist")
    err = failed(cli("namespaces", "create", "t1/ns2", "-b", "-1"))
    assert err.startswith(
        "Invalid number of bundles. Number of bundles has to be in the range of (0, 2^32].\n"
    )
    err = failed(cli("namespaces", "policies", "t1"))
    assert err.startswith("Invalid namespace name format: t1")


def test_anti_affinity_group(cli: CliRunner) -> None:
    tenant(cli)
    ok(cli("namespaces", "create", "t1/ns1"))
    ok(cli("namespaces", "create", "t1/ns2"))
    assert ok(cli("namespaces", "get-anti-affinity-group", "t1/ns1")) == "\n"
    ok(cli("namespaces", "set-anti-affinity-group", "t1/ns1", "-g", "grp-a"))
    ok(cli("namespaces", "set-anti-affinity-group", "t1/ns2", "--group", "grp-a"))
    assert ok(cli("namespaces", "get-anti-affinity-group", "t1/ns1")) == "grp-a\n"
    assert ok(cli("namespaces", "get-anti-affinity-namespaces", "-c", "test", "-g", "grp-a",
                  "-p", "t1")) == "t1/ns1\nt1/ns2\n"  # fmt: skip
    assert ok(cli("namespaces", "get-anti-affinity-namespaces", "--cluster", "test",
                  "--group", "other", "--tenant", "t1")) == ""  # fmt: skip
    ok(cli("namespaces", "delete-anti-affinity-group", "t1/ns1"))
    assert ok(cli("namespaces", "get-anti-affinity-group", "t1/ns1")) == "\n"
    err = failed(cli("namespaces", "get-anti-affinity-namespaces", "-c", "nope", "-g", "grp-a",
                     "-p", "t1"))  # fmt: skip
    assert err == admin_error("Cluster nope does not exist.")


def test_bookie_affinity_group(cli: CliRunner, clean_store: RawEtcd) -> None:
    tenant(cli)
    ok(cli("namespaces", "create", "t1/ns1"))
    ok(cli("namespaces", "set-bookie-affinity-group", "t1/ns1", "-pg", "group-ssd",
           "-sg", "default"))  # fmt: skip
    assert ok(cli("namespaces", "get-bookie-affinity-group", "t1/ns1")) == (
        "{\n"
        '  "bookkeeperAffinityGroupPrimary" : "group-ssd",\n'
        '  "bookkeeperAffinityGroupSecondary" : "default"\n'
        "}\n"
    )
    ok(cli("namespaces", "set-bookie-affinity-group", "t1/ns1", "--primary-group=a,b"))
    assert ok(cli("namespaces", "get-bookie-affinity-group", "t1/ns1")) == (
        '{\n  "bookkeeperAffinityGroupPrimary" : "a,b"\n}\n'
    )
    ok(cli("namespaces", "delete-bookie-affinity-group", "t1/ns1"))
    assert ok(cli("namespaces", "get-bookie-affinity-group", "t1/ns1")) == "null\n"


def test_two_letter_options_with_equals(cli: CliRunner, clean_store: RawEtcd) -> None:
    tenant(cli)
    ok(cli("namespaces", "create", "t1/ns1"))
    ok(cli("namespaces", "set-bookie-affinity-group", "t1/ns1", "-pg=p1", "-sg=s1"))
    local = clean_store.get_json("/admin/local-policies/t1/ns1")
    assert local["bookieAffinityGroup"] == {
        "bookkeeperAffinityGroupPrimary": "p1",
        "bookkeeperAffinityGroupSecondary": "s1",
    }


def test_strict_bookie_affinity_extension(cli: CliRunner, clean_store: RawEtcd) -> None:
    tenant(cli)
    ok(cli("namespaces", "create", "t1/ns1"))
    ok(cli("namespaces", "set-bookie-affinity-group", "t1/ns1", "-pg", "share",
           "--strict", "true"))  # fmt: skip
    local = clean_store.get_json("/admin/local-policies/t1/ns1")
    assert local["bookieAffinityGroup"]["bookkeeperAffinityGroupStrict"] is True
    assert ok(cli("namespaces", "get-bookie-affinity-group", "t1/ns1")) == (
        "{\n"
        '  "bookkeeperAffinityGroupPrimary" : "share",\n'
        '  "bookkeeperAffinityGroupStrict" : true\n'
        "}\n"
    )
    ok(cli("namespaces", "set-bookie-affinity-group", "t1/ns1", "-pg", "share",
           "--strict", "false"))  # fmt: skip
    assert ok(cli("namespaces", "get-bookie-affinity-group", "t1/ns1")) == (
        '{\n  "bookkeeperAffinityGroupPrimary" : "share"\n}\n'
    )
    err = failed(cli("namespaces", "set-bookie-affinity-group", "t1/ns1", "-pg", "share",
                     "--strict", "maybe"))  # fmt: skip
    assert err.startswith("Invalid value for option '--strict': 'maybe' is not a boolean")


def test_bookie_affinity_errors(cli: CliRunner) -> None:
    tenant(cli)
    err = failed(cli("namespaces", "set-bookie-affinity-group", "t1/nope", "-pg", "g"))
    assert err.endswith("\n\nReason: " + err.split("\n", 1)[0] + "\n")
    assert "Missing option '-pg' / '--primary-group'" in failed(
        cli("namespaces", "set-bookie-affinity-group", "t1/ns1")
    )


def test_persistence(cli: CliRunner) -> None:
    tenant(cli)
    ok(cli("namespaces", "create", "t1/ns1"))
    assert ok(cli("namespaces", "get-persistence", "t1/ns1")) == "null\n"
    ok(cli("namespaces", "set-persistence", "t1/ns1", "-e", "3", "-w", "2", "-a", "2"))
    assert ok(cli("namespaces", "get-persistence", "t1/ns1")) == (
        "{\n"
        '  "bookkeeperEnsemble" : 3,\n'
        '  "bookkeeperWriteQuorum" : 2,\n'
        '  "bookkeeperAckQuorum" : 2,\n'
        '  "managedLedgerMaxMarkDeleteRate" : 0.0\n'
        "}\n"
    )
    ok(cli("namespaces", "set-persistence", "t1/ns1", "--bookkeeper-ensemble", "2",
           "--ml-mark-delete-max-rate", "1.5"))  # fmt: skip
    out = ok(cli("namespaces", "get-persistence", "t1/ns1"))
    assert '"bookkeeperEnsemble" : 2,' in out
    assert '"managedLedgerMaxMarkDeleteRate" : 1.5\n' in out
    ok(cli("namespaces", "remove-persistence", "t1/ns1"))
    assert ok(cli("namespaces", "get-persistence", "t1/ns1")) == "null\n"


def test_persistence_errors(cli: CliRunner) -> None:
    tenant(cli)
    ok(cli("namespaces", "create", "t1/ns1"))
    err = failed(cli("namespaces", "set-persistence", "t1/ns1", "-e", "3", "-w", "4", "-a", "2"))
    assert err == admin_error("Bookkeeper Ensemble (3) >= WriteQuorum (4) >= AckQuorum (2)")
    err = failed(cli("namespaces", "set-persistence", "t1/ns1", "-e", "0"))
    assert err.startswith(
        "[--bookkeeper-ensemble], [--bookkeeper-write-quorum] and [--bookkeeper-ack-quorum] "
        "must greater than 0.\n"
    )
    err = failed(cli("namespaces", "set-persistence", "t1/ns1", "-r", "-1"))
    assert err.startswith("[--ml-mark-delete-max-rate] cannot less than 0.\n")
    assert failed(cli("namespaces", "get-persistence", "t1/nope")) == admin_error(
        "Namespace does not exist"
    )


def test_set_and_get_clusters(cli: CliRunner, clean_store: RawEtcd) -> None:
    clean_store.put("/admin/clusters/us-west", {"serviceUrl": "http://w:8080"})
    ok(cli("clusters", "create", "test", "--url", "http://localhost:8080"))
    ok(cli("tenants", "create", "t1", "-c", "test,us-west"))
    ok(cli("namespaces", "create", "t1/ns1", "-c", "us-west"))
    assert ok(cli("namespaces", "get-clusters", "t1/ns1")) == "us-west\n"
    assert ok(cli("namespaces", "set-clusters", "t1/ns1", "--clusters", "us-west,test")) == ""
    # A java.util.HashSet of the two names: "test" hashes before "us-west".
    assert clean_store.get_json("/admin/policies/t1/ns1")["replication_clusters"] == [
        "test",
        "us-west",
    ]
    assert ok(cli("namespaces", "get-clusters", "t1/ns1")) == "test\nus-west\n"
    assert failed(cli("namespaces", "set-clusters", "t1/ns1", "-c", "nope")) == admin_error(
        "Invalid cluster id: nope"
    )
