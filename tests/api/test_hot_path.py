"""The `set-bookie-rack` fast path (`api.http.hot_path`) answers exactly as the FastAPI route.

Every case is sent twice from the same stored rack map: once as `application/json`, which the
fast path serves, and once as `application/vnd.pulsar+json`, which FastAPI parses as JSON too
but the fast path leaves to the route. Status, body and the stored document must agree.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support import RawEtcd

RACKS = "/admin/v2/bookies/racks-info"
SEED = b'{"default":{"b1:3181":{"rack":"/rack0"}},"other":{"b2:3181":{"rack":"/rack9"}}}'
FAST = "application/json"
ROUTE = "application/vnd.pulsar+json"

Query = list[tuple[str, str]]

CASES: list[tuple[str, Query, bytes]] = [
    ("b1:3181", [("group", "default")], b'{"rack":"/rack1","hostname":"h1"}'),
    ("b1:3181", [("group", "other")], b'{"rack":"/rack1"}'),  # moves group
    ("b3:3181", [("group", "new")], b'{"rack":"/rack1","hostname":"h3"}'),
    ("b1:3181", [], b'{"rack":"/rack1"}'),  # missing group: 412
    ("b1:3181", [("group", "")], b'{"rack":"/rack1"}'),
    ("b1:3181", [("group", "a"), ("group", "b")], b'{"rack":"/rack1"}'),
    ("b1:3181", [("group", "default")], b'{"rack":"/rack/a"}'),  # invalid in rack mode
    ("b1:3181", [("group", "default")], b'{"rack":"rack1"}'),
    ("b1:3181", [("group", "default")], b'{"rack":""}'),
    ("b1:3181", [("group", "default")], b"{}"),
    ("b1:3181", [("group", "default")], b'{"rack":null,"hostname":"h1"}'),
    ("b1:3181", [("group", "default")], b'{"rack":"/r1","extra":[1,2]}'),
    ("b1:3181", [("group", "default")], b'{"rack":"/a","rack":"/b"}'),
    ("b1:3181", [("group", "default")], b'{"rack":5}'),  # not a string: 400 from both
    ("b1:3181", [("group", "default")], b"[]"),
    ("b1:3181", [("group", "default")], b"null"),
    ("b1:3181", [("group", "default")], b"{not json"),
    ("b1:3181", [("group", "default")], b""),
    ("b%C3%B8:3181", [("group", "default")], b'{"rack":"/rack1"}'),
    ("a%2Fb:3181", [("group", "default")], b'{"rack":"/rack1"}'),
]
# Requests the rules refuse (api.http.request_rules, naming): 4xx from both, nothing written.
RULE_CASES: list[tuple[str, Query, bytes]] = [
    ("b1:3181", [("group", "default")], b'{"rack":"/r\\ud800"}'),
    ("b1:3181", [("group", "default")], b'{"rack":"/r1","hostname":1e999}'),
    ("b1:3181", [("group", "default")], b'{"rack":"/r1","x":' + b"[" * 100 + b"]" * 100 + b"}"),
    ("b1:3181", [("group", "default")], b'{"rack":"/r1","x":99999999999999999999}'),
    ("b%00:3181", [("group", "default")], b'{"rack":"/rack1"}'),
    ("b1:3181", [("group", "a\nb")], b'{"rack":"/rack1"}'),
]
CASES += RULE_CASES


def answer(
    admin: httpx.Client, store: RawEtcd, case: tuple[str, Query, bytes], content_type: str
) -> tuple[int, Any, bytes | None]:
    store.put("/bookies", SEED)
    bookie, query, body = case
    response = admin.post(
        f"{RACKS}/{bookie}", params=query, content=body, headers={"content-type": content_type}
    )
    content = response.json() if response.content else None
    return response.status_code, content, store.get("/bookies")


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[1]}-{c[2]!r}" for c in CASES])
def test_fast_path_answers_as_the_route(
    admin: httpx.Client, clean_store: RawEtcd, case: tuple[str, Query, bytes]
) -> None:
    assert answer(admin, clean_store, case, FAST) == answer(admin, clean_store, case, ROUTE)


def test_fast_path_writes_what_the_route_writes(admin: httpx.Client, clean_store: RawEtcd) -> None:
    clean_store.put("/bookies", SEED)
    response = admin.post(
        f"{RACKS}/b1:3181", params={"group": "other"}, json={"hostname": "h1", "rack": "/r2"}
    )
    assert response.status_code == 204
    # BookiesRackConfiguration.updateBookie: out of its group, then last in the new one
    assert clean_store.get("/bookies") == (
        b'{"other":{"b2:3181":{"rack":"/rack9"},"b1:3181":{"rack":"/r2","hostname":"h1"}}}'
    )


@pytest.mark.parametrize("content_type", [None, "text/plain"])
def test_a_body_not_sent_as_json_is_415_and_writes_nothing(
    admin: httpx.Client, clean_store: RawEtcd, content_type: str | None
) -> None:
    """Jersey's answer for a body a `@Consumes(APPLICATION_JSON)` resource cannot read (no
    Content-Type reads as application/octet-stream)."""
    headers = {} if content_type is None else {"content-type": content_type}
    response = admin.post(
        f"{RACKS}/b1:3181", params={"group": "default"}, content=b'{"rack":"/r1"}', headers=headers
    )
    assert response.status_code == 415
    assert "reason" in response.json()
    assert clean_store.get("/bookies") is None


@pytest.mark.parametrize("case", RULE_CASES, ids=[f"{c[0]}-{c[1]}-{c[2]!r}" for c in RULE_CASES])
def test_fast_path_applies_the_request_rules(
    admin: httpx.Client, clean_store: RawEtcd, case: tuple[str, Query, bytes]
) -> None:
    status, content, stored = answer(admin, clean_store, case, FAST)
    assert status in (400, 412) and "reason" in content
    assert stored == SEED
