"""The anti-affinity group body is bare text whatever its Content-Type (as Jersey reads a String
parameter): text/plain (what the OpenAPI document declares), application/octet-stream (its twin
for generators without text/plain bodies) and application/json (what Pulsar's client sends)
all store the same bare name; a JSON-quoted body keeps its quotes, as Pulsar stores it."""

from __future__ import annotations

import httpx
import pytest

from tests.factories import NAMESPACES, local_policies_of, make_namespace
from tests.support import RawEtcd

GROUP = f"{NAMESPACES}/acme/ns1/antiAffinity"
LOCAL = "/admin/local-policies/acme/ns1"


@pytest.mark.parametrize(
    "content_type", ["text/plain", "text/plain; charset=utf-8", "application/octet-stream",
                     "application/json"]
)  # fmt: skip
def test_bare_name_under_every_declared_type(
    admin: httpx.Client, clean_store: RawEtcd, content_type: str
) -> None:
    make_namespace(admin, clean_store)
    response = admin.post(GROUP, content=b"grp1", headers={"Content-Type": content_type})
    assert response.status_code == 204, response.text
    assert clean_store.get_json(LOCAL) == local_policies_of(
        clean_store, namespaceAntiAffinityGroup="grp1"
    )
    assert admin.get(GROUP).content == b"grp1"
    listed = admin.get("/admin/v2/namespaces/test/antiAffinity/grp1", params={"tenant": "acme"})
    assert listed.json() == ["acme/ns1"]


def test_json_quoted_body_is_stored_verbatim_like_pulsar(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    make_namespace(admin, clean_store)
    response = admin.post(GROUP, json="grp1")  # sends "grp1", quotes included
    assert response.status_code == 204
    assert clean_store.get_json(LOCAL) == local_policies_of(
        clean_store, namespaceAntiAffinityGroup='"grp1"'
    )
    assert admin.get(GROUP).content == b'"grp1"'
    listed = admin.get("/admin/v2/namespaces/test/antiAffinity/grp1", params={"tenant": "acme"})
    assert listed.json() == []
