"""`pulsar-admin clusters`, end to end, including failure domains."""

from __future__ import annotations

from pathlib import Path

import httpx

from javaformats import hash_set_order
from tests.cli.conftest import CliRunner, admin_error, failed, ok

CREATED = (
    "{\n"
    '  "serviceUrl" : "http://pulsar.example.com:8080",\n'
    '  "brokerServiceUrl" : "pulsar://pulsar.example.com:6650",\n'
    '  "brokerClientTlsEnabled" : false,\n'
    '  "tlsAllowInsecureConnection" : false,\n'
    '  "brokerClientTlsEnabledWithKeyStore" : false,\n'
    '  "brokerClientTlsTrustStoreType" : "JKS",\n'
    '  "brokerClientTlsKeyStoreType" : "JKS",\n'
    '  "brokerClientSslFactoryPlugin" : "org.apache.pulsar.common.util.DefaultPulsarSslFactory"\n'
    "}\n"
)


def create(cli: CliRunner, name: str = "us-west") -> None:
    ok(cli("clusters", "create", name, "--url", "http://pulsar.example.com:8080",
           "--broker-url", "pulsar://pulsar.example.com:6650"))  # fmt: skip


def test_create_get_list_delete(cli: CliRunner) -> None:
    create(cli)
    assert ok(cli("clusters", "get", "us-west")) == CREATED
    assert set(ok(cli("clusters", "list")).splitlines()) == {"us-west"}
    assert ok(cli("clusters", "delete", "us-west")) == ""
    assert ok(cli("clusters", "list")) == ""


def test_list_current_marks_the_service_cluster(cli: CliRunner) -> None:
    create(cli, "test")
    create(cli, "other")
    assert sorted(ok(cli("clusters", "list", "-c")).splitlines()) == ["other", "test(*)"]
    assert sorted(ok(cli("clusters", "list", "--current")).splitlines()) == ["other", "test(*)"]
    assert sorted(ok(cli("clusters", "list")).splitlines()) == ["other", "test"]


def test_update_replaces_whole_configuration(cli: CliRunner, admin: httpx.Client) -> None:
    create(cli)
    ok(cli("clusters", "update", "us-west", "--url", "http://other.example.com:8080"))
    data = admin.get("/admin/v2/clusters/us-west").json()
    assert data["serviceUrl"] == "http://other.example.com:8080"
    assert "brokerServiceUrl" not in data


def test_create_from_yaml_file_with_flag_override(
    cli: CliRunner, admin: httpx.Client, tmp_path: Path
) -> None:
    config = tmp_path / "cluster.yaml"
    config.write_text("serviceUrl: http://from-file:8080\nbrokerServiceUrl: pulsar://f:6650\n")
    ok(cli("clusters", "create", "c1", "--cluster-config-file", str(config),
           "--url", "http://from-flag:8080"))  # fmt: skip
    data = admin.get("/admin/v2/clusters/c1").json()
    assert data["serviceUrl"] == "http://from-flag:8080"
    assert data["brokerServiceUrl"] == "pulsar://f:6650"


def test_cluster_errors(cli: CliRunner) -> None:
    create(cli)
    assert failed(cli("clusters", "create", "us-west")) == admin_error("Cluster already exists")
    assert failed(cli("clusters", "get", "nope")) == admin_error("Cluster does not exist")
    assert failed(cli("clusters", "delete", "nope")) == admin_error("Cluster does not exist")
    err = failed(cli("clusters", "create", "bad", "--url", "pulsar://x:6650"))
    assert err == admin_error("Illegal service url, example: http://pulsar.example.com:8080")


def test_tls_keystore_check_is_client_side(cli: CliRunner, admin: httpx.Client) -> None:
    err = failed(cli("clusters", "create", "c1", "--tls-enable", "--tls-enable-keystore"))
    assert err.startswith(
        "You must specify tls-trust-store-type, tls-trust-store and tls-trust-store-pwd when "
        "enable tls-enable-keystore\n"
    )
    assert "Usage: pulsar-admin clusters create" in err
    assert admin.get("/admin/v2/clusters").json() == []


def test_failure_domains(cli: CliRunner) -> None:
    create(cli)
    ok(cli("clusters", "create-failure-domain", "us-west", "--domain-name", "domain-a",
           "--broker-list", "broker-1:8080,broker-2:8080"))  # fmt: skip
    ok(cli("clusters", "create-failure-domain", "us-west", "--domain-name", "domain-b"))
    brokers = hash_set_order(["broker-1:8080", "broker-2:8080"])
    assert ok(cli("clusters", "get-failure-domain", "us-west", "--domain-name", "domain-a")) == (
        '{\n  "brokers" : [ "' + '", "'.join(brokers) + '" ]\n}\n'
    )
    assert ok(cli("clusters", "get-failure-domain", "us-west", "--domain-name", "domain-b")) == (
        "{ }\n"
    )
    assert ok(cli("clusters", "list-failure-domains", "us-west")) == (  # a HashMap's order
        "domain-b    FailureDomainImpl(brokers=null)\n"
        f"domain-a    FailureDomainImpl(brokers=[{', '.join(brokers)}])\n"
    )
    ok(cli("clusters", "update-failure-domain", "us-west", "--domain-name", "domain-b",
           "--broker-list", "broker-3:8080"))  # fmt: skip
    assert ok(cli("clusters", "get-failure-domain", "us-west", "--domain-name", "domain-b")) == (
        '{\n  "brokers" : [ "broker-3:8080" ]\n}\n'
    )
    ok(cli("clusters", "delete-failure-domain", "us-west", "--domain-name", "domain-b"))
    assert ok(cli("clusters", "list-failure-domains", "us-west")).startswith("domain-a    ")
    assert len(ok(cli("clusters", "list-failure-domains", "us-west")).splitlines()) == 1


def test_failure_domain_errors(cli: CliRunner) -> None:
    create(cli)
    ok(cli("clusters", "create-failure-domain", "us-west", "--domain-name", "domain-a",
           "--broker-list", "broker-1:8080,broker-2:8080"))  # fmt: skip
    err = failed(cli("clusters", "create-failure-domain", "us-west", "--domain-name", "domain-b",
                     "--broker-list", "broker-2:8080"))  # fmt: skip
    assert err == admin_error("[broker-2:8080] already exists in domain-a")
    err = failed(cli("clusters", "get-failure-domain", "us-west", "--domain-name", "nope"))
    assert err == admin_error("Domain nope for cluster us-west does not exist")
    err = failed(cli("clusters", "get-failure-domain", "nope", "--domain-name", "d"))
    assert err == admin_error("Cluster nope does not exist.")
    err = failed(cli("clusters", "create-failure-domain", "us-west"))
    assert "Missing option '--domain-name'" in err


def test_delete_all_force_deletes_namespaces_like_upstream(
    cli: CliRunner, admin: httpx.Client
) -> None:
    """`-a` deletes each namespace with force=true, as the Java CLI does, so a service with
    forceDeleteNamespaceAllowed=false (the default) refuses it and nothing is removed."""
    create(cli, "test")
    ok(cli("tenants", "create", "t1"))
    ok(cli("namespaces", "create", "t1/ns1"))
    assert failed(cli("clusters", "delete", "-a", "test")) == admin_error(
        "Broker doesn't allow forced deletion of namespaces"
    )
    assert admin.get("/admin/v2/namespaces/t1").json() == ["t1/ns1"]
    assert admin.get("/admin/v2/clusters").json() == ["test"]


def test_peer_clusters(cli: CliRunner, admin: httpx.Client) -> None:
    """`update-peer-clusters` sends the names as a LinkedHashSet (a blank value clears them);
    `get-peer-clusters` prints the Set the Java client reads, `null` when none are set."""
    for name in ("us-west", "us-east", "eu"):
        create(cli, name)
    assert ok(cli("clusters", "get-peer-clusters", "us-west")) == "null\n"
    ok(cli("clusters", "update-peer-clusters", "us-west", "--peer-clusters", "us-east,eu,eu,"))
    assert admin.get("/admin/v2/clusters/us-west/peers").json() == ["us-east", "eu"]
    shown = hash_set_order(["us-east", "eu"])
    assert ok(cli("clusters", "get-peer-clusters", "us-west")) == (
        '[ "' + '", "'.join(shown) + '" ]\n')
    assert failed(cli("clusters", "update-peer-clusters", "us-west", "--peer-clusters",
                      "nope")) == admin_error("Peer cluster nope does not exist")
    ok(cli("clusters", "update-peer-clusters", "us-west", "--peer-clusters", ""))
    assert ok(cli("clusters", "get-peer-clusters", "us-west")) == "null\n"
