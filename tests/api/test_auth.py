"""Authentication and authorisation with Pulsar's token provider, against the real server.

One server with `authenticationEnabled` and `authorizationEnabled` serves every test here.
`test_every_route_needs_its_role` walks `app.routes` of the real app and asks each operation as
nobody, with broken tokens, as another tenant's admin, as the tenant's admin and as a
super-user.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi.routing import APIRoute

from api.app import create_app
from api.auth.authorization import (
    ALIASES,
    NEED_AUTHENTICATION,
    NEED_SUPER_USER,
    PATHS,
    TABLE,
    AnyRole,
    Before,
    ClusterOperation,
    ClusterPolicy,
    SuperUser,
    SuperUserOrTenant,
)
from api.authorization_doc import BEGIN, END, render
from api.settings import Settings
from metastore.embedded import EmbeddedEtcd
from tests.support import RawEtcd, ServerProcess, TokenServers, token, token_conf, wait_until

SUPER = "admin-role"
TENANT_ADMIN = "t1-admin"
OTHER_ADMIN = "t2-admin"
# Routes outside the admin authorisation, each with its row in `api.auth.authorization.PATHS`: the
# OpenAPI document, the pages that show it and their assets, and /metrics
# (authenticateMetricsEndpoint; tests/api/test_metrics.py).
PUBLIC_PATHS = set(PATHS)



def bearer(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}


@pytest.fixture(scope="module")
def auth_server(token_server: TokenServers) -> ServerProcess:
    return token_server(f"{SUPER},other-super")


@pytest.fixture
def tenants(raw_etcd: RawEtcd, auth_server: ServerProcess) -> RawEtcd:
    raw_etcd.wipe()
    raw_etcd.put("/admin/policies/t1", {"adminRoles": [TENANT_ADMIN], "allowedClusters": []})
    raw_etcd.put("/admin/policies/t2", {"adminRoles": [OTHER_ADMIN], "allowedClusters": []})
    return raw_etcd


def app_operations() -> list[tuple[str, str, str]]:
    """(method, path template, operation id) of every API route of the real app."""
    app = create_app(Settings(metadataStoreUrl="etcd:http://127.0.0.1:1"))
    found: list[tuple[str, str, str]] = []
    routes: list[Any] = list(app.routes)
    while routes:
        route = routes.pop(0)
        included = getattr(route, "original_router", None)  # FastAPI's included router
        if included is not None:
            routes.extend(included.routes)
        elif isinstance(route, APIRoute):
            # a route without an operation id (a hidden alias) needs super-user
            for method in sorted(route.methods):
                found.append((method, route.path, route.operation_id or ""))
        else:
            assert getattr(route, "path", None) in PUBLIC_PATHS, f"unexpected route {route}"
    return found


def fill(template: str, tenant: str) -> str:
    values = {"tenant": tenant, "namespace": "ns1", "cluster": "test", "topic": "tp"}
    return re.sub(r"\{(\w+)(?::path)?\}", lambda m: values.get(m.group(1), "x1"), template)


def ask(
    client: httpx.Client, method: str, template: str, role_token: str | None, tenant: str = "t1"
) -> httpx.Response:
    headers = bearer(role_token) if role_token is not None else {}
    content = b"{}" if method in ("POST", "PUT") else None
    if content is not None:
        headers["Content-Type"] = "application/json"
    query = {"tenant": tenant, "property": tenant, "group": "g", "ledger_id": "1"}
    return client.request(
        method, fill(template, tenant), headers=headers, content=content, params=query
    )


def refused(response: httpx.Response) -> bool:
    """Refused by authorisation (not by the operation's own rules, which may say 403 too)."""
    if response.status_code not in (401, 403):
        return False
    reason = response.json()["reason"]
    return reason in (NEED_AUTHENTICATION, NEED_SUPER_USER) or reason.startswith(
        "Unauthorized to validate"
    )


def test_every_operation_has_its_row_and_every_row_its_operation() -> None:
    operations = app_operations()
    # a route without an operation id is an alias of a BookKeeper admin path (ALIASES)
    assert all(path.startswith("/api/v1/") for _, path, operation in operations
               if not operation)
    served = {operation for _, _, operation in operations if operation}
    assert sorted(served - set(TABLE)) == []  # a new route needs its row
    assert sorted(set(TABLE) - served) == []  # a row of a route that is gone goes too
    for operation, rule in TABLE.items():
        assert rule.mirrors.strip(), operation


def test_the_readme_shows_the_table() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    section = readme[readme.index(BEGIN):readme.index(END) + len(END)] + "\n"
    assert section == render(), "run `python -m api.authorization_doc` into the README"


def test_every_route_needs_its_role(auth_server: ServerProcess, tenants: RawEtcd) -> None:
    operations = app_operations()
    assert len(operations) >= 50
    expired = token(TENANT_ADMIN, exp=int(time.time()) - 60)
    forged = token(SUPER, key=b"another key of thirty-two bytes!")
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    other_algorithm = token(SUPER, key=rsa_key, algorithm="RS256")
    unsigned = token(SUPER, key=None, algorithm="none")
    with httpx.Client(base_url=auth_server.url, timeout=10) as client:
        for method, template, operation in operations:
            where = f"{method} {template} ({operation})"
            for bad in (None, expired, forged, other_algorithm, unsigned, "not-a-jwt"):
                response = ask(client, method, template, bad)
                assert response.status_code == 401, where
                assert response.json() == {"reason": NEED_AUTHENTICATION}, where
            need = TABLE[operation].need if operation else ALIASES.need
            if operation and Before.NAMESPACE_EXISTS in TABLE[operation].before:
                # the resource looks the namespace up before it authorises
                tenants.put("/admin/policies/t1/ns1", {})
                wait_until(lambda m=method, t=template: refused(
                    ask(client, m, t, token(OTHER_ADMIN))))
            outsider = ask(client, method, template, token(OTHER_ADMIN))
            assert refused(outsider) != isinstance(need, AnyRole), where
            admin = ask(client, method, template, token(TENANT_ADMIN))
            if isinstance(need, SuperUser):
                assert admin.status_code == 401, where
                assert admin.json() == {"reason": NEED_SUPER_USER}, where
            elif isinstance(need, ClusterOperation | ClusterPolicy):
                assert admin.status_code == 401, where
                assert admin.json()["reason"].startswith(
                    "Unauthorized to validateBothSuperuserAndCluster"), where
            elif isinstance(need, SuperUserOrTenant) and need.tenant_param is None:
                assert admin.status_code == 401, where
                assert admin.json()["reason"].startswith(
                    "Unauthorized to validateBothTenantOperationAndSuperUser"), where
            else:
                assert not refused(admin), (where, admin.text)
                tenants.put(
                    "/admin/policies/t1", {"adminRoles": [TENANT_ADMIN], "allowedClusters": []}
                )
            # super-users act on a tenant of their own, so deletes leave t1 in place
            superuser = ask(client, method, template, token(SUPER), tenant="s1")
            assert not refused(superuser), (where, superuser.text)


def test_public_paths_stay_public(auth_server: ServerProcess) -> None:
    for path in ("/openapi.json", "/docs", "/redoc"):
        assert httpx.get(f"{auth_server.url}{path}").status_code == 200


def test_refusals_are_upstream_text(auth_server: ServerProcess, tenants: RawEtcd) -> None:
    with httpx.Client(base_url=auth_server.url, timeout=10) as client:
        as_other = bearer(token(OTHER_ADMIN))
        tenant_op = client.get("/admin/v2/namespaces/t1", headers=as_other)
        assert tenant_op.status_code == 401
        assert tenant_op.json() == {
            "reason": "Unauthorized to validateTenantOperation for originalPrincipal [null] and "
            f"clientAppId [{OTHER_ADMIN}] about operation [LIST_NAMESPACES] on tenant [t1]"
        }
        policy_op = client.get("/admin/v2/namespaces/t1/ns1/persistence", headers=as_other)
        assert policy_op.status_code == 403
        assert policy_op.json() == {
            "reason": "Unauthorized to validateNamespacePolicyOperation for operation [READ] "
            "on namespace [t1/ns1] on policy [PERSISTENCE]"
        }
        tenant_read = client.get("/admin/v2/tenants/t1", headers=as_other)
        assert tenant_read.status_code == 401
        assert tenant_read.json() == {
            "reason": "Unauthorized to validateBothTenantOperationAndSuperUser for "
            f"originalPrincipal [null] and clientAppId [{OTHER_ADMIN}] about operation "
            "[GET_TENANT] "
        }
        # cluster operations name themselves and the cluster (as 4.0's broker answers)
        cluster = client.get("/admin/v2/clusters/c9", headers=as_other)
        assert (cluster.status_code, cluster.json()) == (401, {
            "reason": "Unauthorized to validateBothSuperuserAndClusterOperation for "
            f"originalPrincipal [null] and clientAppId [{OTHER_ADMIN}] about operation "
            "[GET_CLUSTER] on cluster [c9]"})
        isolation = client.delete("/admin/v2/clusters/c9/namespaceIsolationPolicies/p",
                                  headers=as_other)
        assert (isolation.status_code, isolation.json()) == (401, {
            "reason": "Unauthorized to validateBothSuperuserAndClusterPolicyOperation for "
            f"originalPrincipal [null] and clientAppId [{OTHER_ADMIN}] about operation "
            "[WRITE] on cluster [c9]"})
        # a tenant that does not exist is 404 for a role that is not a super-user (the
        # provider reads the tenant to find its admins), and a namespace name that is not
        # valid is 412 before any of it
        for method, path in (("GET", "/admin/v2/namespaces/nope/ns1/persistence"),
                             ("PUT", "/admin/v2/namespaces/nope/ns1"),
                             ("GET", "/admin/v2/namespaces/nope")):
            missing = client.request(method, path, headers=as_other)
            assert (missing.status_code, missing.json()) == (
                404, {"reason": "Tenant does not exist"}), path
        invalid = client.post("/admin/v2/namespaces/t1/a+b/antiAffinity", content=b"g",
                              headers={**as_other, "Content-Type": "text/plain"})
        assert (invalid.status_code, invalid.json()) == (
            412, {"reason": "Namespace name is not valid"})
        for method, path in (("GET", "/admin/v2/namespaces/a+b"),
                             ("PUT", "/admin/v2/tenants/a+b")):
            invalid = client.request(method, path, headers=as_other)
            assert (invalid.status_code, invalid.json()) == (
                412, {"reason": "Tenant name is not valid"}), path
        # what a topic resource checks before it authorises comes first, in its order:
        # its TopicName, its namespace's existence, the partition rules
        json_body = {**as_other, "Content-Type": "application/json"}
        tenants.put("/admin/policies/t1/ns1", {})  # the namespace is looked up first
        wait_until(lambda: client.put("/admin/v2/persistent/t1/ns1/x/partitions", content=b"2",
                                      headers=json_body).status_code == 403)
        for method, path, body, answer in (
                ("GET", "/admin/v2/persistent/t1/a+b/x/partitions", None,
                 (412, "Topic name is not valid")),
                ("DELETE", "/admin/v2/persistent/t1/a+b/x", None,
                 (412, "Topic name is not valid")),
                ("PUT", "/admin/v2/persistent/t1/a+b/x/partitions", b"2",
                 (412, "Namespace name is not valid")),
                ("PUT", "/admin/v2/persistent/t1/nope/x/partitions", b"2",
                 (404, "Namespace not found")),
                ("PUT", "/admin/v2/persistent/t1/ns1/x-partition-y/partitions", b"2",
                 (412, "Partitioned Topic Name should not contain '-partition-'")),
                ("DELETE", "/admin/v2/persistent/t1/ns1/x-partition-1/partitions", None,
                 (412, "Partitioned Topic Name should not contain '-partition-'")),
                ("PUT", "/admin/v2/persistent/t1/ns1/x/partitions", b"2",
                 (403, "Unauthorized to validateTopicPolicyOperation for operation [WRITE] on "
                       "topic [persistent://t1/ns1/x] on policy [PARTITION]"))):
            refused = client.request(method, path, content=body, headers=json_body)
            assert (refused.status_code, refused.json()) == (
                answer[0], {"reason": answer[1]}), path
        # a tenant admin may neither read nor write its namespace's bookie affinity
        # (internalGetBookieAffinityGroup starts with validateSuperUserAccess)
        as_admin = bearer(token(TENANT_ADMIN))
        read = client.get(
            "/admin/v2/namespaces/t1/ns1/persistence/bookieAffinity", headers=as_admin
        )
        assert (read.status_code, read.json()) == (401, {"reason": NEED_SUPER_USER})
        write = client.post(
            "/admin/v2/namespaces/t1/ns1/persistence/bookieAffinity",
            headers=as_admin,
            json={"bookkeeperAffinityGroupPrimary": "g"},
        )
        assert write.status_code == 401
        assert write.json() == {"reason": NEED_SUPER_USER}


def test_rack_write_fast_path_is_authorised(auth_server: ServerProcess, tenants: RawEtcd) -> None:
    url = f"{auth_server.url}/admin/v2/bookies/racks-info/b1:3181?group=default"
    body = {"rack": "/r1"}
    assert httpx.post(url, json=body).status_code == 401
    refused = httpx.post(url, json=body, headers=bearer(token(TENANT_ADMIN)))
    assert (refused.status_code, refused.json()) == (401, {"reason": NEED_SUPER_USER})
    assert tenants.get("/bookies") is None
    assert httpx.post(url, json=body, headers=bearer(token("other-super"))).status_code == 204
    assert tenants.get_json("/bookies") == {"default": {"b1:3181": {"rack": "/r1"}}}


def test_role_claim_audience_and_public_key(
    etcd: EmbeddedEtcd, raw_etcd: RawEtcd, tmp_path: Path
) -> None:
    """RS256 from `tokenPublicKey=file:` (DER), the role from `tokenAuthClaim`, and the
    audience check; a token signed with the private key of another pair is refused."""
    from cryptography.hazmat.primitives import serialization

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = tmp_path / "public.key"
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    conf = token_conf(f"{SUPER},other-super") | {
        "tokenSecretKey": "",
        "tokenPublicKey": f"file://{public}",
        "tokenAuthClaim": "role",
        "tokenAudienceClaim": "aud",
        "tokenAudience": "pulsar",
    }

    def good(role: str) -> str:
        return jwt.encode({"role": role, "aud": "pulsar"}, key, algorithm="RS256")

    class RsaServer(ServerProcess):
        def _ready(self) -> bool:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError((self.workdir / "server.log").read_text())
            got = httpx.get(f"{self.url}/admin/v2/clusters", headers=bearer(good(SUPER)))
            return got.status_code == 200

    process = RsaServer(etcd.url, tmp_path / "server", extra_conf=conf).start()
    try:
        url = f"{process.url}/admin/v2/brokers/configuration/runtime"
        no_audience = jwt.encode({"role": SUPER}, key, algorithm="RS256")
        other_pair = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        forged = jwt.encode({"role": SUPER, "aud": "pulsar"}, other_pair, algorithm="RS256")
        sub_only = jwt.encode({"sub": SUPER, "aud": "pulsar"}, key, algorithm="RS256")
        for bad in (no_audience, forged, sub_only):
            assert httpx.get(url, headers=bearer(bad)).status_code == 401
        assert httpx.get(url, headers=bearer(good("nobody"))).status_code == 401
        wait_until(lambda: httpx.get(url, headers=bearer(good(SUPER))).status_code == 200)
    finally:
        process.stop()


def test_a_token_that_worked_still_expires(auth_server: ServerProcess, tenants: RawEtcd) -> None:
    """The server remembers tokens it has checked; a remembered one still expires on time."""
    url = f"{auth_server.url}/admin/v2/clusters"
    soon = bearer(token(SUPER, exp=int(time.time()) + 2))
    assert httpx.get(url, headers=soon).status_code == 200
    wait_until(lambda: httpx.get(url, headers=soon).status_code == 401, timeout=10)
    assert httpx.get(url, headers=bearer(token(SUPER))).status_code == 200


def test_metrics_need_no_token_unless_authenticate_metrics_endpoint(
    auth_server: ServerProcess,
) -> None:
    """Pulsar's `authenticateMetricsEndpoint` defaults to false: /metrics stays open with
    authentication on (tests/api/test_metrics.py covers it set to true)."""
    assert httpx.get(f"{auth_server.url}/metrics", timeout=10).status_code == 200
    assert httpx.get(f"{auth_server.url}/admin/v2/clusters", timeout=10).status_code == 401


# The roles of the route x role matrix: (name, role of the token or None for no token)
ROLES = (("super-user", SUPER), ("tenant admin", TENANT_ADMIN),
         ("other tenant's admin", OTHER_ADMIN), ("no token", None))
# Operations of ours the walk above cannot fully exercise (the watch needs its `prefix` to
# stream) or that are easy to forget: the watch, the console's data and BookKeeper's HTTP
# admin paths and aliases; and every path of `PATHS`.
WATCH = "watchChanges"


def edge_operations() -> list[tuple[str, str, str]]:
    """The watch, the console's data and BookKeeper's HTTP admin paths with their aliases (the
    routes without an operation id), from the app's routes."""
    found = [(method, path, operation) for method, path, operation in app_operations()
             if operation == WATCH or "Console" in operation or path.startswith("/api/v1/")]
    assert {operation for _, _, operation in found} >= {
        WATCH, "getConsoleOverview", "previewConsoleChange", "getConsoleNamespaceLedgers", ""}
    return found


def expected_refusal(need: Any, role: str | None) -> tuple[int, str] | bool | None:
    """What the table says a role gets: None (allowed), (status, reason) for an exact
    refusal, or True for a refusal in the tenant checks' words (`refused`)."""
    if role is None:
        return (401, NEED_AUTHENTICATION)
    if role == SUPER or isinstance(need, AnyRole):
        return None
    if isinstance(need, SuperUser):
        return (401, NEED_SUPER_USER)
    tenant_scoped = not (isinstance(need, SuperUserOrTenant) and need.tenant_param is None)
    if role == TENANT_ADMIN and tenant_scoped:
        return None
    return True


def watch(client: httpx.Client, role_token: str | None) -> tuple[int, str, bytes]:
    """Open the watch on `bookies` and read its first chunk (the stream's opening comment)
    when it is one; the connection is closed after it."""
    headers = bearer(role_token) if role_token is not None else {}
    with client.stream("GET", "/admin/v2/watch", params={"prefix": "bookies"},
                       headers=headers) as response:
        first = next(response.iter_raw(), b"") if response.status_code == 200 else (
            response.read())
        return response.status_code, response.headers.get("content-type", ""), first


@pytest.mark.parametrize(("role_name", "role"), ROLES, ids=[name for name, _ in ROLES])
def test_edge_routes_for_every_role(auth_server: ServerProcess, tenants: RawEtcd,
                                    role_name: str, role: str | None) -> None:
    """The route x role matrix for the watch, the console's data, BookKeeper's admin aliases
    and the paths outside the admin authorisation (/metrics, the console's page, the API's
    description), each answer derived from its row."""
    role_token = token(role) if role is not None else None
    with httpx.Client(base_url=auth_server.url, timeout=10) as client:
        for method, template, operation in edge_operations():
            where = f"{role_name}: {method} {template} ({operation or 'alias'})"
            need = TABLE[operation].need if operation else ALIASES.need
            expected = expected_refusal(need, role)
            if operation == WATCH:
                status, kind, first = watch(client, role_token)
                if expected is None:
                    assert status == 200 and kind.startswith("text/event-stream"), where
                    assert first.startswith(b": watching bookies"), (where, first)
                else:
                    assert isinstance(expected, tuple), where
                    assert (status, json.loads(first)) == (
                        expected[0], {"reason": expected[1]}), where
                continue
            response = ask(client, method, template, role_token)
            if expected is None:
                assert not refused(response), (where, response.text)
            elif expected is True:
                assert refused(response), (where, response.text)
            else:
                assert (response.status_code, response.json()) == (
                    expected[0], {"reason": expected[1]}), where
        headers = bearer(role_token) if role_token is not None else {}
        for path in PATHS:
            answer = client.get(path, headers=headers)
            assert answer.status_code not in (401, 403), (role_name, path)
        for path in ("/metrics", "/console/"):
            assert client.get(path, headers=headers).status_code == 200, (role_name, path)
        assert client.get("/console", headers=headers).status_code == 307, role_name
