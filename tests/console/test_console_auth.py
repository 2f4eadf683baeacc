"""The console with authentication and authorization on: nothing before a token is given, a
refused token in words, a super-user's full view, a tenant admin's own namespaces only, and a
refused change shown with Pulsar's reason."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import httpx
import jwt
import pytest
from playwright.sync_api import expect

from api.settings import TOKEN_PROVIDER
from metastore.embedded import EmbeddedEtcd
from tests.console.conftest import Page, open_page
from tests.support import ServerProcess, wait_until

expect.set_options(timeout=10_000)

SECRET = b"console-secret-0123456789abcdef!"
SUPER, TENANT_ADMIN = "ops", "acme-admin"


def token(role: str) -> str:
    return jwt.encode({"sub": role}, SECRET, algorithm="HS256")


class AuthServer(ServerProcess):
    def _ready(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"server exited: {(self.workdir / 'server.log').read_text()}")
        response = httpx.get(f"{self.url}/admin/v2/clusters",
                             headers={"Authorization": f"Bearer {token(SUPER)}"}, timeout=1)
        return response.status_code == 200


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthServer]:
    """Tenants `acme` (admin role `acme-admin`) and `zeta`, each with namespace `ns1`."""
    work = tmp_path_factory.mktemp("console-auth")
    etcd = EmbeddedEtcd(work / "etcd")
    etcd.start()
    server = AuthServer(etcd.url, work / "service", extra_conf={
        "authenticationEnabled": "true",
        "authorizationEnabled": "true",
        "authenticationProviders": TOKEN_PROVIDER,
        "tokenSecretKey": "data:;base64," + base64.b64encode(SECRET).decode(),
        "superUserRoles": SUPER,
        "initializeClusterMetadata": "false",
    })  # fmt: skip
    try:
        server.start()
        auth = {"Authorization": f"Bearer {token(SUPER)}"}
        with httpx.Client(base_url=server.url, headers=auth, timeout=10) as http:
            http.put("/admin/v2/clusters/test", json={"serviceUrl": "http://x"}
                     ).raise_for_status()
            for tenant, admins in (("acme", [TENANT_ADMIN]), ("zeta", ["zeta-admin"])):
                http.put(f"/admin/v2/tenants/{tenant}", json={
                    "adminRoles": admins, "allowedClusters": ["test"]}).raise_for_status()
                http.put(f"/admin/v2/namespaces/{tenant}/ns1").raise_for_status()
        yield server
    finally:
        server.stop()
        etcd.stop()


@pytest.fixture
def console(browser: Any, secured: AuthServer) -> Iterator[Page]:
    with open_page(browser, secured.url) as watched:
        watched.expected_statuses.add(401)  # the page asks, is refused, then asks for a token
        yield watched
        assert watched.unexpected_errors() == []
        assert watched.foreign == []


def sign_in(page: Any, role_token: str) -> None:
    page.get_by_label("Token").fill(role_token)
    page.get_by_role("button", name="Sign in").click()


def test_nothing_is_shown_before_login_and_a_bad_token_is_refused_in_words(
    console: Page,
) -> None:
    page = console.open()
    expect(page.get_by_label("Token")).to_be_visible()
    expect(page.locator("#main")).to_be_hidden()
    assert "ns1" not in page.content()
    sign_in(page, token("nobody").replace(".", "x", 1))
    expect(page.locator("#auth-error")).to_have_text(
        "401 Unauthorized: Need to authenticate to perform the request")
    expect(page.locator("#main")).to_be_hidden()


def test_a_super_user_sees_everything_and_the_token_lasts_the_tab_only(
    console: Page, browser: Any, secured: AuthServer
) -> None:
    page = console.open()
    sign_in(page, token(SUPER))
    expect(page.locator("#main")).to_be_visible()
    expect(page.locator("#namespace-rows tr")).to_have_count(2)
    expect(page.locator("#topology-hidden")).to_be_hidden()
    expect(page.locator("#live")).to_have_text("live")
    page.reload()  # the same tab keeps its token
    expect(page.locator("#namespace-rows tr")).to_have_count(2)
    assert page.evaluate("() => localStorage.length") == 0
    with open_page(browser, secured.url) as other:  # another browser session asks again
        other.expected_statuses.add(401)
        expect(other.open().get_by_label("Token")).to_be_visible()
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("Token")).to_be_visible()
    expect(page.locator("#main")).to_be_hidden()


def test_a_tenant_admin_sees_its_own_namespaces_and_a_refusal_in_words(console: Page) -> None:
    page = console.open()
    sign_in(page, token(TENANT_ADMIN))
    rows = page.locator("#namespace-rows tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("acme/ns1")
    expect(page.locator("#topology-hidden")).to_have_text("Bookies are shown to super-users only.")
    expect(page.locator(".tile")).to_have_count(0)
    expect(page.locator("#move-form")).to_be_hidden()
    page.get_by_role("button", name="acme/ns1").click()
    expect(page.locator("#namespace-ledgers")).to_contain_text("(none)")
    page.get_by_label("Primary groups (comma separated)").fill("iso")
    page.get_by_role("button", name="Preview change").click()
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("#change-error")).to_have_text(
        "401 Unauthorized: This operation requires super-user access")


def test_a_tenant_admin_follows_its_namespaces_by_conditional_get(
    console: Page, secured: AuthServer
) -> None:
    """The watch is for super-users; a tenant admin's page asks for the overview each second
    with the entity tag it was given: 304 while nothing changed, the change within 2 s after."""
    page = console.open()
    statuses: list[int] = []
    page.on("response", lambda r: statuses.append(r.status)
            if r.url.endswith("/admin/v2/console/overview") else None)
    sign_in(page, token(TENANT_ADMIN))
    row = page.locator('tr[data-namespace="acme/ns1"]')
    expect(row).to_contain_text("not strict")
    expect(page.locator("#live")).to_have_text("live (polling)")
    page.wait_for_function("() => Number(document.body.dataset.unchanged || 0) >= 2",
                           timeout=10_000)
    assert statuses.count(304) >= 2
    auth = {"Authorization": f"Bearer {token(SUPER)}"}
    httpx.post(f"{secured.url}/admin/v2/namespaces/acme/ns1/persistence/bookieAffinity",
               headers=auth, json={"bookkeeperAffinityGroupPrimary": "iso",
                                   "bookkeeperAffinityGroupStrict": True}).raise_for_status()
    try:
        expect(row.locator("td").nth(3)).to_have_text("strict", timeout=2_000)
        expect(row.locator("td").nth(1)).to_have_text("iso")
        assert 200 in statuses[statuses.index(304):]
    finally:
        httpx.delete(f"{secured.url}/admin/v2/namespaces/acme/ns1/persistence/bookieAffinity",
                     headers=auth).raise_for_status()


def test_the_overview_tag_answers_304_until_a_change_and_differs_by_role(
    secured: AuthServer,
) -> None:
    url = f"{secured.url}/admin/v2/console/overview"
    acme = {"Authorization": f"Bearer {token(TENANT_ADMIN)}"}
    first = httpx.get(url, headers=acme)
    tag = first.headers["ETag"]
    assert first.json()["tenants"] == ["acme"]

    def unchanged() -> bool:  # the first answer may still see a judgement being kept
        nonlocal tag
        again = httpx.get(url, headers={**acme, "If-None-Match": tag})
        tag = again.headers["ETag"]
        return again.status_code == 304 and again.content == b""

    wait_until(unchanged, timeout=10)
    zeta = httpx.get(url, headers={"Authorization": f"Bearer {token('zeta-admin')}",
                                   "If-None-Match": tag})
    assert zeta.status_code == 200 and zeta.json()["tenants"] == ["zeta"]
    assert zeta.headers["ETag"] != tag
    super_user = httpx.get(url, headers={"Authorization": f"Bearer {token(SUPER)}",
                                         "If-None-Match": tag})
    assert super_user.status_code == 200 and "ETag" not in super_user.headers
    httpx.put(f"{secured.url}/admin/v2/namespaces/acme/ns2",
              headers={"Authorization": f"Bearer {token(SUPER)}"}).raise_for_status()
    try:
        changed = wait_until(lambda: (r := httpx.get(url, headers={**acme, "If-None-Match": tag}))
                             .status_code == 200 and r)
        assert [n["name"] for n in changed.json()["namespaces"]] == ["acme/ns1", "acme/ns2"]
    finally:
        httpx.delete(f"{secured.url}/admin/v2/namespaces/acme/ns2",
                     headers={"Authorization": f"Bearer {token(SUPER)}"}).raise_for_status()
