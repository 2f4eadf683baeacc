"""`namespaces placement-preview`, `bookies lint`, `topics lookup`, `namespaces unload`, end to
end: the installed pulsar-admin against the real server over real etcd."""

from __future__ import annotations

import json

import httpx

from tests.cli.conftest import CliRunner, admin_error, failed, ok
from tests.factories import brokers_seen, make_namespace, register, register_broker, set_rack
from tests.support import RawEtcd, wait_until


def test_placement_preview_prints_pretty_json(
    cli: CliRunner, admin: httpx.Client, clean_store: RawEtcd
) -> None:
    make_namespace(admin, clean_store)
    register(clean_store, "b1:3181", "b2:3181", "b3:3181")
    for i in (1, 2, 3):
        set_rack(admin, f"b{i}:3181", f"/r{i}", "default")
    wait_until(lambda: admin.get("/admin/v2/namespaces/acme/ns1/placement",
                                 params={"ensembleSize": 3, "writeQuorum": 3}).status_code == 200)
    out = ok(cli("namespaces", "placement-preview", "acme/ns1", "-e", "3", "-w", "3", "-a", "2"))
    assert out.startswith('{\n  "ensemble" : [ {\n    "bookieId" : "b')
    body = json.loads(out)
    assert {b["bookieId"] for b in body["ensemble"]} == {"b1:3181", "b2:3181", "b3:3181"}
    assert body["policy"]["ensembleSize"] == 3 and body["policy"]["ackQuorum"] == 2
    table = ok(cli("-o", "table", "namespaces", "placement-preview", "acme/ns1"))
    assert "adherence" in table and "MEETS_STRICT" in table


def test_placement_preview_errors(cli: CliRunner, admin: httpx.Client,
                                  clean_store: RawEtcd) -> None:  # fmt: skip
    make_namespace(admin, clean_store)
    register(clean_store, "b1:3181")
    wait_until(lambda: admin.get("/admin/v2/namespaces/acme/ns1/placement",
                                 params={"ensembleSize": 1, "writeQuorum": 1,
                                         "ackQuorum": 1}).status_code == 200)  # fmt: skip
    err = failed(cli("namespaces", "placement-preview", "acme/ns1", "-e", "3", "-w", "2",
                     "-a", "2"))  # fmt: skip
    assert err.startswith("Not enough bookies: ") and "short by 2" in err
    assert failed(cli("namespaces", "placement-preview", "acme/nope")) == admin_error(
        "Namespace does not exist")
    err = failed(cli("namespaces", "placement-preview", "acme/ns1", "-e", "1", "-w", "2"))
    assert "less than write quorum" in err


def test_lint_and_fail_on_warning(cli: CliRunner, admin: httpx.Client,
                                  clean_store: RawEtcd) -> None:  # fmt: skip
    assert ok(cli("bookies", "lint")) == '{\n  "warnings" : [ ]\n}\n'
    assert ok(cli("bookies", "lint", "--fail-on-warning")) == '{\n  "warnings" : [ ]\n}\n'
    register(clean_store, "b1:3181")
    wait_until(lambda: admin.get("/admin/v2/bookies/lint").json()["warnings"])
    out = ok(cli("bookies", "lint"))
    assert json.loads(out)["warnings"][0]["kind"] == "unracked-bookie"
    err = failed(cli("bookies", "lint", "--fail-on-warning"))
    assert err.startswith("2 warning(s):\n{\n  \"warnings\" : [ {\n    \"kind\" : ")
    assert "unracked-bookie" in err and "too-few-racks" in err


def test_topics_lookup_prints_broker_url_and_unload(
    cli: CliRunner, admin: httpx.Client, clean_store: RawEtcd
) -> None:
    make_namespace(admin, clean_store)
    register_broker(clean_store, "b1:8080")
    brokers_seen(admin, 1)
    assert ok(cli("topics", "lookup", "persistent://acme/ns1/t1")) == "pulsar://b1:6650\n"
    assert ok(cli("topics", "lookup", "acme/ns1/t1")) == "pulsar://b1:6650\n"
    assert clean_store.keys("/namespace/acme/ns1/")
    assert ok(cli("namespaces", "unload", "acme/ns1")) == ""
    assert clean_store.keys("/namespace/") == []
    assert failed(cli("topics", "lookup", "persistent://acme/nope/t1")) == admin_error(
        "Namespace not found")  # the broker's ownership check's words
    assert failed(cli("namespaces", "unload", "acme/nope")) == admin_error(
        "Namespace not found")
    assert "Invalid topic name" in failed(cli("topics", "lookup", "bogus://a/b/c"))
