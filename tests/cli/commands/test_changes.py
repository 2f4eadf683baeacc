"""`pulsar-admin changes list`, end to end against the shared server (history on by default)."""

from __future__ import annotations

import json

import httpx

from tests.cli.conftest import CliRunner, failed, ok
from tests.support import RawEtcd, ServerProcess

GROUP = {"group": "default"}


def test_list_prints_the_history_since_a_revision_and_under_a_prefix(
    cli: CliRunner, server: ServerProcess, clean_store: RawEtcd
) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        assert http.put("/admin/v2/clusters/c-cli", json={"serviceUrl": "http://c"}).is_success
        since = http.get("/admin/v2/changes").json()[-1]["revision"]
        assert http.post("/admin/v2/clusters/c-cli", json={"serviceUrl": "http://d"}).is_success
        assert http.post("/admin/v2/bookies/racks-info/10.7.0.1:3181",
                         json={"rack": "/r7"}, params=GROUP).status_code == 204  # fmt: skip
    listed = json.loads(ok(cli("changes", "list", "--since", str(since))))
    assert [(r["method"], r["path"]) for r in listed] == [
        ("POST", "/admin/v2/clusters/c-cli"),
        ("POST", "/admin/v2/bookies/racks-info/10.7.0.1:3181"),
    ]
    (change,) = listed[0]["changes"]
    assert (change["key"], change["partial"]) == ("/admin/clusters/c-cli", False)
    assert (change["before"]["serviceUrl"], change["after"]["serviceUrl"]) == (
        "http://c", "http://d"
    )
    only_racks = json.loads(ok(cli("changes", "list", "--since", str(since),
                                   "--prefix", "/bookies")))  # fmt: skip
    assert [r["changes"][0]["after"] for r in only_racks] == [
        {"default": {"10.7.0.1:3181": {"rack": "/r7"}}}
    ]
    everything = json.loads(ok(cli("changes", "list", "--limit", "1")))
    assert [r["path"] for r in everything] == ["/admin/v2/clusters/c-cli"]


def test_list_refuses_a_negative_revision(cli: CliRunner) -> None:
    assert "--since" in failed(cli("changes", "list", "--since", "-1"))
