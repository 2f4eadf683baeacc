"""Namespace anti-affinity group: bare-text body and response, local policies, listings."""

from __future__ import annotations

import httpx
import pytest

from tests.factories import (
    NAMESPACES,
    add_cluster,
    assert_reason,
    local_policies_bytes,
    local_policies_of,
    make_namespace,
)
from tests.support import RawEtcd

GROUP = f"{NAMESPACES}/acme/ns1/antiAffinity"
LOCAL = "/admin/local-policies/acme/ns1"


def test_set_get_remove_bare_text(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store)
    unset = admin.get(GROUP)
    assert unset.status_code == 204
    assert unset.content == b""

    response = admin.post(GROUP, content=b"my-group", headers={"Content-Type": "application/json"})
    assert response.status_code == 204
    assert clean_store.get(LOCAL) == local_policies_bytes(
        clean_store, namespaceAntiAffinityGroup="my-group"
    )

    got = admin.get(GROUP)
    assert got.status_code == 200
    assert got.content == b"my-group"  # not JSON-quoted
    assert got.headers["content-type"] == "application/json"

    assert admin.delete(GROUP).status_code == 204
    assert clean_store.get_json(LOCAL) == local_policies_of(clean_store)
    assert admin.get(GROUP).status_code == 204


def test_blank_group_is_412_and_writes_nothing(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store)
    for body in (b"", b"   "):
        assert_reason(admin.post(GROUP, content=body), 412, "antiAffinityGroup can't be empty")
    assert clean_store.get(LOCAL) is None


def test_unknown_namespace_is_404(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store)
    url = f"{NAMESPACES}/acme/ghost/antiAffinity"
    for response in (admin.get(url), admin.post(url, content=b"g"), admin.delete(url)):
        assert_reason(response, 404, "Namespace does not exist")
    assert clean_store.get("/admin/local-policies/acme/ghost") is None


def test_remove_when_never_set_writes_nothing(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store)
    assert admin.delete(GROUP).status_code == 204
    assert clean_store.get(LOCAL) is None


def test_update_keeps_other_local_fields(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store)
    written_by_pulsar = {
        "bundles": {"boundaries": ["0x00000000", "0xffffffff"], "numBundles": 1},
        "bookieAffinityGroup": {"bookkeeperAffinityGroupPrimary": "ssd"},
        "namespaceAntiAffinityGroup": "old",
        "futureField": {"x": 1},
    }
    clean_store.put(LOCAL, written_by_pulsar)
    assert admin.post(GROUP, content=b"new").status_code == 204
    # `migrated` (false unless given) is one of LocalPolicies' fields
    assert clean_store.get_json(LOCAL) == {
        **written_by_pulsar, "namespaceAntiAffinityGroup": "new", "migrated": False
    }
    assert admin.delete(GROUP).status_code == 204
    expected = {k: v for k, v in written_by_pulsar.items() if k != "namespaceAntiAffinityGroup"}
    expected["migrated"] = False
    assert clean_store.get_json(LOCAL) == expected


@pytest.mark.parametrize(
    "path",
    [
        "/admin/v2/namespaces/test/antiAffinity/{group}?tenant=acme",
        "/admin/namespaces/test/antiAffinity/{group}?property=acme",
    ],
)
def test_anti_affinity_namespaces(admin: httpx.Client, clean_store: RawEtcd, path: str) -> None:
    for name, group in (("acme/a", "Blue"), ("acme/b", "blue"), ("acme/c", "red"), ("acme/d", "")):
        make_namespace(admin, clean_store, name)
        if group:
            admin.post(f"{NAMESPACES}/{name}/antiAffinity", content=group.encode())
    make_namespace(admin, clean_store, "other/x")
    admin.post(f"{NAMESPACES}/other/x/antiAffinity", content=b"blue")

    response = admin.get(path.format(group="BLUE"))
    assert response.status_code == 200
    assert response.json() == ["acme/a", "acme/b"]
    assert admin.get(path.format(group="green")).json() == []


@pytest.mark.parametrize(
    "base", ["/admin/v2/namespaces/{c}/antiAffinity/{g}", "/admin/namespaces/{c}/antiAffinity/{g}"]
)
def test_anti_affinity_namespaces_errors(
    admin: httpx.Client, clean_store: RawEtcd, base: str
) -> None:
    add_cluster(clean_store, "test")
    tenant_param = "tenant" if "/v2/" in base else "property"
    ok = {tenant_param: "acme"}
    assert_reason(admin.get(base.format(c="test", g="g")), 400, "Tenant should not be null")
    assert_reason(
        admin.get(base.format(c="test", g="%20"), params=ok),
        412,
        "anti-affinity group can't be empty.",
    )
    assert_reason(
        admin.get(base.format(c="mars", g="g"), params=ok), 412, "Cluster mars does not exist."
    )
