"""The request rules (`api.http.request_rules`, names in `api.naming`): a request that
breaks one is a 4xx `{"reason": ...}` and leaves etcd byte-identical."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Callable
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.naming import is_valid_free_name, is_valid_name
from tests.factories import add_cluster, register_broker
from tests.support import RawEtcd, ServerProcess

NS = "/admin/v2/namespaces/acme/ns1"
PROPERTY = settings(
    max_examples=10,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def seed(admin: httpx.Client, store: RawEtcd) -> None:
    add_cluster(store, "test")
    tenant = admin.put("/admin/v2/tenants/acme", json={"allowedClusters": ["test"]})
    assert tenant.status_code == 204
    assert admin.put(NS).status_code == 204
    response = admin.post(
        "/admin/v2/bookies/racks-info/b1:3181", params={"group": "g1"}, json={"rack": "/r1"}
    )
    assert response.status_code == 204


@pytest.fixture
def seeded(admin: httpx.Client, clean_store: RawEtcd) -> httpx.Client:
    seed(admin, clean_store)
    return admin


def assert_refused(store: RawEtcd, send: Callable[[], httpx.Response]) -> httpx.Response:
    before = store.snapshot()
    response = send()
    assert 400 <= response.status_code < 500, (response.status_code, response.text)
    assert isinstance(response.json()["reason"], str)
    assert store.snapshot() == before
    return response


# (method, path, a valid body as a template: the bad value replaces "BAD")
BODY_ROUTES = [
    ("POST", f"{NS}/persistence", '{"bookkeeperEnsemble":BAD,"bookkeeperWriteQuorum":1,'
                                  '"bookkeeperAckQuorum":1}'),
    ("POST", "/admin/v2/bookies/racks-info/b2:3181?group=g1", '{"rack":"/r1","hostname":BAD}'),
    ("PUT", "/admin/v2/namespaces/acme/ns2", '{"bundles":{"numBundles":BAD}}'),
    ("POST", f"{NS}/persistence/bookieAffinity", '{"bookkeeperAffinityGroupPrimary":BAD}'),
    ("POST", "/admin/v2/clusters/test/failureDomains/d9", '{"brokers":[BAD]}'),
    ("PUT", "/admin/v2/tenants/t9", '{"allowedClusters":["test"],"adminRoles":[BAD]}'),
]  # fmt: skip

NOT_JAVA_NUMBERS = st.one_of(
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1e400", "1E309"]),
    st.integers(min_value=2**63).map(str),
    st.integers(max_value=-(2**63) - 1).map(str),
)


@PROPERTY
@given(route=st.sampled_from(BODY_ROUTES), number=NOT_JAVA_NUMBERS)
def test_numbers_java_cannot_hold_are_refused(
    seeded: httpx.Client, clean_store: RawEtcd, route: tuple[str, str, str], number: str
) -> None:
    method, path, template = route
    body = template.replace("BAD", number).encode()
    assert_refused(clean_store, lambda: seeded.request(
        method, path, content=body, headers={"content-type": "application/json"}))  # fmt: skip


@PROPERTY
@given(number=st.one_of(st.integers(min_value=2**31), st.integers(max_value=-(2**31) - 1)))
def test_int_fields_take_java_ints(seeded: httpx.Client, clean_store: RawEtcd, number: int) -> None:
    body = {"bookkeeperEnsemble": number, "bookkeeperWriteQuorum": 1, "bookkeeperAckQuorum": 1}
    assert_refused(clean_store, lambda: seeded.post(f"{NS}/persistence", json=body))


LONE_SURROGATES = st.integers(min_value=0xD800, max_value=0xDFFF).map(lambda c: f"\\u{c:04x}")


@PROPERTY
@given(
    route=st.sampled_from(BODY_ROUTES),
    prefix=st.text(alphabet="abc", max_size=3),
    surrogate=LONE_SURROGATES,
)
def test_text_that_is_not_utf8_is_refused(
    seeded: httpx.Client, clean_store: RawEtcd, route: tuple[str, str, str], prefix: str,
    surrogate: str,
) -> None:  # fmt: skip
    method, path, template = route
    body = template.replace("BAD", f'"{prefix}{surrogate}"').encode()
    assert_refused(clean_store, lambda: seeded.request(
        method, path, content=body, headers={"content-type": "application/json"}))  # fmt: skip


@PROPERTY
@given(route=st.sampled_from(BODY_ROUTES), depth=st.integers(min_value=65, max_value=5000),
       kind=st.sampled_from(["[]", '{"a":}']))  # fmt: skip
def test_nesting_beyond_the_limit_is_refused(
    seeded: httpx.Client, clean_store: RawEtcd, route: tuple[str, str, str], depth: int,
    kind: str,
) -> None:  # fmt: skip
    method, path, template = route
    opening, closing = (kind[:-1], kind[-1]) if kind == "[]" else ('{"a":', "}")
    nested = opening * depth + "1" + closing * depth
    body = template.replace("BAD", nested).encode()
    assert_refused(clean_store, lambda: seeded.request(
        method, path, content=body, headers={"content-type": "application/json"}))  # fmt: skip


PULSAR_NAME_WRITES = [
    lambda c, name: c.put(f"/admin/v2/tenants/{name}", json={"allowedClusters": ["test"]}),
    lambda c, name: c.put(f"/admin/v2/namespaces/acme/{name}"),
    lambda c, name: c.put(f"/admin/v2/clusters/{name}", json={}),
]
FREE_NAME_WRITES = [  # the name as given: each request encodes it where it goes
    lambda c, name: c.post(f"/admin/v2/bookies/racks-info/{quote(name, safe='')}",
                           params={"group": "g"}, json={"rack": "/r"}),
    lambda c, name: c.post("/admin/v2/bookies/racks-info/b3:3181", params={"group": name},
                           json={"rack": "/r"}),
    lambda c, name: c.post(f"/admin/v2/clusters/test/failureDomains/{quote(name, safe='')}",
                           json={}),
]  # fmt: skip


# `.` and `..` never reach the server: the client resolves them as path steps.
NOT_PATH_STEPS = st.text(min_size=1, max_size=300).filter(lambda n: n not in (".", ".."))


@PROPERTY
@given(write=st.sampled_from(PULSAR_NAME_WRITES),
       name=NOT_PATH_STEPS.filter(lambda n: not is_valid_name(n)))  # fmt: skip
def test_invalid_pulsar_names_are_refused(
    seeded: httpx.Client, clean_store: RawEtcd, write: Callable[..., httpx.Response], name: str
) -> None:
    assert_refused(clean_store, lambda: write(seeded, quote(name, safe="")))


@PROPERTY
@given(write=st.sampled_from(FREE_NAME_WRITES),
       name=NOT_PATH_STEPS.filter(lambda n: not is_valid_free_name(n)))  # fmt: skip
def test_invalid_free_names_are_refused(
    seeded: httpx.Client, clean_store: RawEtcd, write: Callable[..., httpx.Response], name: str
) -> None:
    assert_refused(clean_store, lambda: write(seeded, name))


def test_an_encoded_slash_is_refused_never_stored(
    seeded: httpx.Client, clean_store: RawEtcd
) -> None:
    for path in ("/admin/v2/bookies/racks-info/a%2Fb?group=g1", "/admin/v2/clusters/a%2Fb",
                 "/admin/v2/clusters/test/failureDomains/a%2fb"):  # fmt: skip
        method = "PUT" if path == "/admin/v2/clusters/a%2Fb" else "POST"
        response = assert_refused(clean_store, lambda p=path, m=method: seeded.request(
            m, p, json={"rack": "/r"}))  # fmt: skip
        assert response.status_code == 412


def raw_request(client: httpx.Client, method: str, path: str,
                body: bytes | None = None) -> tuple[int, bytes]:
    """A request whose path goes out byte for byte (an HTTP client would normalise it)."""
    url = client.base_url
    connection = http.client.HTTPConnection(url.host, url.port, timeout=10)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_paths_are_read_as_pulsars_jetty_reads_them(
    seeded: httpx.Client, clean_store: RawEtcd
) -> None:
    """Path parameters (`;x=1`) are dropped before routing; a bad escape, an escaped NUL, a
    `..` above the root and a dot segment with parameters are 400 and change nothing; other
    dot segments are routed as they are (404), as the broker answers them."""
    assert raw_request(seeded, "GET", "/admin/v2/clusters;x=1") == (200, b'["test"]')
    status, body = raw_request(seeded, "GET", "/admin/v2/clusters/test;v=2")
    assert status == 200 and json.loads(body)["serviceUrl"]
    status, _ = raw_request(seeded, "POST", "/admin/v2/bookies/racks-info/10.0.0.9:3181;x"
                            "?group=g", b'{"rack":"/r9"}')
    assert status == 204
    assert "10.0.0.9:3181" in clean_store.get_json("/bookies")["g"]
    before = clean_store.snapshot()
    for method, path in (("GET", "/admin/v2/clusters/te%ZZst"), ("GET", "/admin/v2/clusters/%"),
                         ("PUT", "/admin/v2/clusters/test%00"), ("GET", "/../admin/v2/clusters"),
                         ("GET", "/admin/../../admin/v2/clusters"),
                         ("GET", "/admin/v2/clusters/..;/clusters"),
                         ("POST", "/admin/v2/bookies/racks-info/h%00:1?group=g")):
        status, body = raw_request(seeded, method, path, b"{}" if method != "GET" else None)
        assert status == 400, (path, status, body)
        assert json.loads(body)["reason"].startswith("Invalid URI"), body
    assert clean_store.snapshot() == before
    for path in ("/admin/v2/clusters/./test", "/admin/v2/clusters/x/../test"):
        assert raw_request(seeded, "GET", path)[0] == 404


def test_a_body_over_http_max_request_size_is_413(
    seeded: httpx.Client, clean_store: RawEtcd
) -> None:
    huge = b'{"rack":"' + b"r" * (3 * 1024 * 1024) + b'"}'
    response = assert_refused(clean_store, lambda: seeded.post(
        "/admin/v2/bookies/racks-info/b1:3181", params={"group": "g1"}, content=huge,
        headers={"content-type": "application/json"}))  # fmt: skip
    assert response.status_code == 413
    assert "httpMaxRequestSize" in response.json()["reason"]


def test_a_document_over_etcds_limit_is_413_naming_it(
    seeded: httpx.Client, clean_store: RawEtcd
) -> None:
    roles = [f"role-{i:07d}-{'x' * 40}" for i in range(32_000)]  # ~1.6 MiB < 2 MiB body limit
    body = {"allowedClusters": ["test"], "adminRoles": roles}
    response = assert_refused(clean_store, lambda: seeded.post("/admin/v2/tenants/acme", json=body))
    assert response.status_code == 413
    assert "etcd" in response.json()["reason"]


def test_wrong_method_is_405_with_allow(seeded: httpx.Client) -> None:
    response = seeded.patch("/admin/v2/tenants/acme", json={})
    assert response.status_code == 405
    assert set(response.headers["allow"].split(", ")) == {"GET", "PUT", "POST", "DELETE"}
    assert "reason" in response.json()


def test_stored_documents_that_do_not_load_name_their_key_and_can_be_repaired(
    seeded: httpx.Client, clean_store: RawEtcd
) -> None:
    clean_store.put("/admin/policies/acme/ns1", {"persistence": {"bookkeeperEnsemble": "x"}})
    response = seeded.get(NS)
    reason = "Failed to deserialize payload for key '/admin/policies/acme/ns1'"
    assert (response.status_code, response.json()) == (500, {"reason": reason})
    assert seeded.delete(NS).status_code == 204
    assert seeded.put(NS).status_code == 204
    clean_store.put("/admin/clusters/test/namespaceIsolationPolicies", {"p": {"namespaces": 5}})
    response = seeded.get("/admin/v2/clusters/test/namespaceIsolationPolicies/p")
    assert response.status_code == 500
    assert "/admin/clusters/test/namespaceIsolationPolicies" in response.json()["reason"]
    assert seeded.delete("/admin/v2/clusters/test/namespaceIsolationPolicies/p").status_code == 204
    assert seeded.get("/admin/v2/clusters/test/namespaceIsolationPolicies").json() == {}
    clean_store.put("/admin/policies/acme", b"not json")
    assert seeded.get("/admin/v2/tenants/acme").status_code == 500
    body = {"allowedClusters": ["test"]}
    assert seeded.post("/admin/v2/tenants/acme", json=body).status_code == 204
    assert seeded.get("/admin/v2/tenants/acme").json()["allowedClusters"] == ["test"]


ISOLATION = "/admin/v2/clusters/test/namespaceIsolationPolicies"


def policy(namespaces: list[str], primary: list[str]) -> dict[str, object]:
    failover = {"policy_type": "min_available",
                "parameters": {"min_limit": "1", "usage_threshold": "80"}}
    return {"namespaces": namespaces, "primary": primary, "secondary": [],
            "auto_failover_policy": failover}  # fmt: skip


@pytest.mark.parametrize("field", ["namespaces", "primary"])
@pytest.mark.parametrize("pattern", ["(?P<n>b)", "(", "a(?=b)", "(a)\\1", "a++"])
def test_isolation_patterns_outside_javas_linear_dialect_are_refused(
    seeded: httpx.Client, clean_store: RawEtcd, field: str, pattern: str
) -> None:
    body = policy(["acme/.*"], ["b.*"])
    body[field] = [pattern]
    response = assert_refused(clean_store, lambda: seeded.post(f"{ISOLATION}/p1", json=body))
    assert response.status_code == 400


def test_java_named_groups_are_accepted(seeded: httpx.Client) -> None:
    body = policy(["acme/(?<rest>.*)"], ["(?<host>b)1"])
    assert seeded.post(f"{ISOLATION}/p1", json=body).status_code == 204
    view = seeded.get(f"{ISOLATION}/brokers/b1").json()
    assert view["primary"] is True


def test_a_pathological_pattern_holds_nobody(
    seeded: httpx.Client, clean_store: RawEtcd, server: ServerProcess
) -> None:
    """`(b+)+c` against a long run of b backtracks exponentially in a backtracking engine;
    here it answers within the deadline while another client's requests go on succeeding,
    and a pattern another tool stored that this service refuses breaks no lookup."""
    slow = policy(["other/.*"], ["(b+)+c"])
    assert seeded.post(f"{ISOLATION}/slow", json=slow).status_code == 204
    stored = clean_store.get_json("/admin/clusters/test/namespaceIsolationPolicies")
    stored["bad"] = policy(["(", "acme/(a)\\1"], ["(?P<x>b)"])
    clean_store.put("/admin/clusters/test/namespaceIsolationPolicies", stored)
    register_broker(clean_store, "b1:8080")
    broker = "b" * 30_000 + "x"
    started = threading.Event()
    results: list[int] = []

    def bad() -> None:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            started.set()
            for _ in range(5):
                results.append(client.get(f"{ISOLATION}/brokers/{broker}").status_code)

    thread = threading.Thread(target=bad)
    thread.start()
    assert started.wait(10)
    with httpx.Client(base_url=server.url, timeout=30) as other:
        others = [other.get(NS).status_code for _ in range(20)]
        lookup = other.get("/lookup/v2/topic/persistent/acme/ns1/t1")
    thread.join(60)
    assert not thread.is_alive()
    assert results == [200] * 5
    assert others == [200] * 20
    assert lookup.status_code == 200, lookup.text
    assert json.loads(lookup.text)["httpUrl"] == "http://b1:8080"
