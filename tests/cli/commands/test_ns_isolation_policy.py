"""`pulsar-admin ns-isolation-policy`, end to end."""

from __future__ import annotations

import httpx

from tests.cli.conftest import CliRunner, admin_error, failed, ok
from tests.support import RawEtcd

SET = ("ns-isolation-policy", "set", "test", "pol-1", "--namespaces", "my-tenant/isolated-.*",
       "--primary", "broker-[0-1]\\..*", "--auto-failover-policy-type", "min_available",
       "--auto-failover-policy-params", "min_limit=1,usage_threshold=80")  # fmt: skip

POLICY_JSON = (
    "{\n"
    '  "namespaces" : [ "my-tenant/isolated-.*" ],\n'
    '  "primary" : [ "broker-[0-1]\\\\..*" ],\n'
    '  "secondary" : [ ],\n'
    '  "auto_failover_policy" : {\n'
    '    "parameters" : {\n'
    '      "min_limit" : "1",\n'
    '      "usage_threshold" : "80"\n'
    "    },\n"
    '    "policy_type" : "min_available"\n'
    "  }\n"
    "}\n"
)


def cluster(cli: CliRunner) -> None:
    ok(cli("clusters", "create", "test", "--url", "http://localhost:8080"))


def test_set_get_list_delete(cli: CliRunner) -> None:
    cluster(cli)
    assert ok(cli(*SET)) == ""
    assert ok(cli("ns-isolation-policy", "get", "test", "pol-1")) == POLICY_JSON
    assert ok(cli("ns-isolation-policy", "list", "test")) == (
        "pol-1    NamespaceIsolationDataImpl(namespaces=[my-tenant/isolated-.*], "
        "primary=[broker-[0-1]\\..*], secondary=[], autoFailoverPolicy="
        "AutoFailoverPolicyDataImpl(policyType=min_available, parameters={min_limit=1, "
        "usage_threshold=80}), unloadScope=null)\n"
    )
    ok(cli("ns-isolation-policy", "delete", "test", "pol-1"))
    assert ok(cli("ns-isolation-policy", "list", "test")) == ""


def test_secondary_and_unload_scope(cli: CliRunner, admin: httpx.Client) -> None:
    cluster(cli)
    ok(cli(*SET, "--secondary", "broker-2\\..*,broker-3\\..*", "--unload-scope", "none"))
    policy = admin.get("/admin/v2/clusters/test/namespaceIsolationPolicies/pol-1").json()
    assert policy["secondary"] == ["broker-2\\..*", "broker-3\\..*"]
    assert policy["unload_scope"] == "none"
    assert ok(cli("ns-isolation-policy", "list", "test")).endswith(", unloadScope=none)\n")


def test_brokers_print_one_json_block_each(cli: CliRunner, clean_store: RawEtcd) -> None:
    cluster(cli)
    ok(cli(*SET))
    clean_store.put("/loadbalance/brokers/broker-0.example:8080", {})
    clean_store.put("/loadbalance/brokers/other.example:8080", {})
    out = ok(cli("ns-isolation-policy", "brokers", "test"))
    blocks = out.split("}\n")
    assert len(blocks) == 3 and blocks[2] == ""
    assert '"brokerName" : "broker-0.example:8080"' in blocks[0]
    assert '"policyName" : "pol-1"' in blocks[0]
    assert '"brokerName" : "other.example:8080"' in blocks[1]
    out = ok(cli("ns-isolation-policy", "broker", "test", "--broker", "broker-1.example:8080"))
    assert out.startswith('{\n  "brokerName" : "broker-1.example:8080",\n')
    assert '  "namespaceRegex" : [ "my-tenant/isolated-.*" ]' in out


def test_client_side_checks_send_nothing(cli: CliRunner, admin: httpx.Client) -> None:
    cluster(cli)
    base = list(SET)
    cases = {
        "--namespaces": ("", "unable to parse namespaces parameter list: []"),
        "--primary": ("", "unable to parse primary parameter list: [my-tenant/isolated-.*]"),
        "--auto-failover-policy-type": ("max", "Unknown auto failover policy type specified : max"),
        "--auto-failover-policy-params": (
            "min_limit=1", "Unknown auto failover policy params specified : {min_limit=1}"),
    }  # fmt: skip
    for option, (value, message) in cases.items():
        args = base.copy()
        args[args.index(option) + 1] = value
        err = failed(cli(*args))
        assert err.startswith(message + "\n"), err
        assert "Usage: pulsar-admin ns-isolation-policy set" in err
    assert admin.get("/admin/v2/clusters/test/namespaceIsolationPolicies").status_code == 404


def test_strict_points_to_bookie_affinity(cli: CliRunner) -> None:
    cluster(cli)
    err = failed(cli(*SET, "--strict", "true"))
    assert err.startswith("--strict is not an option of ns-isolation-policy")
    assert "pulsar-admin namespaces set-bookie-affinity-group <tenant/namespace> " in err
    assert "--strict true" in err


def test_server_errors(cli: CliRunner) -> None:
    err = failed(cli("ns-isolation-policy", "get", "nope", "pol-1"))
    assert err == admin_error("Cluster nope does not exist.")
    cluster(cli)
    ok(cli(*SET))
    err = failed(cli("ns-isolation-policy", "get", "test", "pol-x"))
    assert err == admin_error("Cannot find NamespaceIsolationPolicy pol-x for cluster test")
