"""`pulsar-admin tenants`, end to end."""

from __future__ import annotations

import httpx

from javaformats import hash_set_order
from tests.cli.conftest import CliRunner, admin_error, failed, ok


def clusters(cli: CliRunner, *names: str) -> None:
    for name in names:
        ok(cli("clusters", "create", name, "--url", f"http://{name}:8080"))


def tenant_json(roles: list[str], allowed: list[str]) -> str:
    def array(items: list[str]) -> str:
        return "[ " + ", ".join(f'"{i}"' for i in hash_set_order(items)) + " ]" if items else "[ ]"

    return f'{{\n  "adminRoles" : {array(roles)},\n  "allowedClusters" : {array(allowed)}\n}}\n'


def test_create_get_list_delete(cli: CliRunner) -> None:
    clusters(cli, "us-west", "us-east")
    ok(cli("tenants", "create", "t1", "-r", "role-b,role-a", "-c", "us-west"))
    ok(cli("tenants", "create", "t0", "--admin-roles", "r", "--allowed-clusters", "us-east"))
    assert ok(cli("tenants", "get", "t1")) == tenant_json(["role-b", "role-a"], ["us-west"])
    assert ok(cli("tenants", "list")) == "t0\nt1\n"
    ok(cli("tenants", "delete", "t0"))
    assert ok(cli("tenants", "list")) == "t1\n"


def test_create_without_clusters_allows_every_cluster(cli: CliRunner) -> None:
    clusters(cli, "c1", "c2", "c3")
    ok(cli("tenants", "create", "t1"))
    assert ok(cli("tenants", "get", "t1")) == tenant_json([], ["c1", "c2", "c3"])


def test_update_keeps_what_is_not_given(cli: CliRunner, admin: httpx.Client) -> None:
    clusters(cli, "c1", "c2")
    ok(cli("tenants", "create", "t1", "-r", "admin", "-c", "c1"))
    ok(cli("tenants", "update", "t1", "-c", "c1,c2"))
    assert ok(cli("tenants", "get", "t1")) == tenant_json(["admin"], ["c1", "c2"])
    ok(cli("tenants", "update", "t1", "-r", "ops"))
    assert ok(cli("tenants", "get", "t1")) == tenant_json(["ops"], ["c1", "c2"])


def test_tenant_errors(cli: CliRunner) -> None:
    clusters(cli, "c1")
    assert failed(cli("tenants", "get", "nope")) == admin_error("Tenant does not exist")
    assert failed(cli("tenants", "create", "t1", "-c", "missing")) == admin_error(
        "Clusters do not exist"
    )
    ok(cli("tenants", "create", "t1"))
    assert failed(cli("tenants", "create", "t1")) == admin_error("Tenant already exist")
    err = failed(cli("tenants", "delete", "t1", "-f"))
    assert err == admin_error("Broker doesn't allow forced deletion of tenants")
    assert "Missing argument 'tenant-name'" in failed(cli("tenants", "get"))
