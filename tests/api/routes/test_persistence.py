"""Namespace persistence policies, in the global `Policies.persistence`."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.factories import NAMESPACES, assert_reason, make_namespace
from tests.support import RawEtcd

PERSISTENCE = f"{NAMESPACES}/acme/ns1/persistence"
POLICIES = "/admin/policies/acme/ns1"


def policy(e: int, w: int, a: int, rate: float = 0.0) -> dict[str, Any]:
    return {
        "bookkeeperEnsemble": e,
        "bookkeeperWriteQuorum": w,
        "bookkeeperAckQuorum": a,
        "managedLedgerMaxMarkDeleteRate": rate,
    }


def test_unset_is_200_with_an_empty_body(admin: httpx.Client, clean_store: RawEtcd) -> None:
    """As the broker answers (its asynchronous response resumed with null)."""
    make_namespace(admin, clean_store)
    response = admin.get(PERSISTENCE)
    assert response.status_code == 200
    assert response.content == b"" and "content-type" not in response.headers


def test_set_get_delete(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store)
    assert admin.post(PERSISTENCE, json=policy(3, 2, 2, 1.5)).status_code == 204
    assert clean_store.get_json(POLICIES)["persistence"] == policy(3, 2, 2, 1.5)
    got = admin.get(PERSISTENCE)
    assert got.status_code == 200
    assert got.json() == policy(3, 2, 2, 1.5)

    assert admin.delete(PERSISTENCE).status_code == 204
    assert "persistence" not in clean_store.get_json(POLICIES)
    assert admin.get(PERSISTENCE).content == b""


def test_defaults_fill_missing_fields(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store)
    assert admin.post(PERSISTENCE, json={"bookkeeperEnsemble": 3}).status_code == 204
    assert admin.get(PERSISTENCE).json() == policy(3, 2, 2)


def test_storage_class_is_kept(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store)
    body = {**policy(2, 2, 1), "managedLedgerStorageClassName": "bookkeeper"}
    assert admin.post(PERSISTENCE, json=body).status_code == 204
    assert admin.get(PERSISTENCE).json() == body


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (policy(3, 4, 2), "Bookkeeper Ensemble (3) >= WriteQuorum (4) >= AckQuorum (2)"),
        (policy(3, 2, 3), "Bookkeeper Ensemble (3) >= WriteQuorum (2) >= AckQuorum (3)"),
        (policy(0, 2, 2), "Bookkeeper-Ensemble must be <= 5 and > 0."),
        (policy(6, 2, 2), "Bookkeeper-Ensemble must be <= 5 and > 0."),
        (policy(5, 6, 2), "Bookkeeper-WriteQuorum must be <= 5 and > 0."),
        (policy(5, 0, 2), "Bookkeeper-WriteQuorum must be <= 5 and > 0."),
        (policy(5, 5, 0), "Bookkeeper-AckQuorum must be <= 5 and > 0."),
        (policy(5, 5, -1), "Bookkeeper-AckQuorum must be <= 5 and > 0."),
    ],
)
def test_invalid_policies_are_400_and_write_nothing(
    admin: httpx.Client, clean_store: RawEtcd, body: dict[str, Any], reason: str
) -> None:
    make_namespace(admin, clean_store)
    admin.post(PERSISTENCE, json=policy(2, 2, 2))
    before = clean_store.get(POLICIES)
    assert_reason(admin.post(PERSISTENCE, json=body), 400, reason)
    assert clean_store.get(POLICIES) == before


def test_missing_body_is_400(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store)
    assert_reason(admin.post(PERSISTENCE), 400, "persistence policies should not be null")


def test_wrong_type_is_400(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store)
    response = admin.post(PERSISTENCE, json={"bookkeeperEnsemble": "many"})
    assert response.status_code == 400
    assert "bookkeeperEnsemble" in response.json()["reason"]
    assert "persistence" not in clean_store.get_json(POLICIES)


def test_unknown_namespace_is_404(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store)
    url = f"{NAMESPACES}/acme/ghost/persistence"
    for response in (admin.get(url), admin.post(url, json=policy(2, 2, 2)), admin.delete(url)):
        assert_reason(response, 404, "Namespace does not exist")
    assert clean_store.get("/admin/policies/acme/ghost") is None


def test_update_keeps_fields_pulsar_wrote(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store)
    document = clean_store.get_json(POLICIES)
    document.update({"message_ttl_in_seconds": 30, "max_producers_per_topic": 7})
    clean_store.put(POLICIES, document)
    assert admin.post(PERSISTENCE, json=policy(3, 3, 2)).status_code == 204
    assert clean_store.get_json(POLICIES) == {**document, "persistence": policy(3, 3, 2)}
    assert admin.delete(PERSISTENCE).status_code == 204
    assert clean_store.get_json(POLICIES) == document


def test_persistence_lives_apart_from_local_policies(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    make_namespace(admin, clean_store)
    admin.post(PERSISTENCE, json=policy(2, 2, 2))
    assert clean_store.get("/admin/local-policies/acme/ns1") is None
