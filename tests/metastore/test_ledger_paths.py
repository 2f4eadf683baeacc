"""Ledger keys as BookKeeper's hybrid hierarchical layout names them, and Java's URL encoding
of topic and cursor names."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metastore import paths


@pytest.mark.parametrize(
    ("ledger_id", "path"),
    [
        (0, "/ledgers/00/0000/L0000"),
        (1, "/ledgers/00/0000/L0001"),
        (1234567890, "/ledgers/12/3456/L7890"),
        (2**31 - 2, "/ledgers/21/4748/L3646"),
        # from Integer.MAX_VALUE on: %019d split 3-4-4-4-4
        (2**31 - 1, "/ledgers/000/0000/0021/4748/L3647"),
        ((1 << 32) | 1, "/ledgers/000/0000/0042/9496/L7297"),
        (2**63 - 1, "/ledgers/922/3372/0368/5477/L5807"),
    ],
)
def test_ledger_path(ledger_id: int, path: str) -> None:
    assert paths.ledger(ledger_id) == path
    assert paths.ledger_id_of(path) == ledger_id


@pytest.mark.parametrize("ledger_id", [-1, 2**63])
def test_ledger_ids_out_of_range(ledger_id: int) -> None:
    with pytest.raises(ValueError, match="64-bit"):
        paths.ledger(ledger_id)


@pytest.mark.parametrize(
    "path",
    [
        "/ledgers/available/127.0.0.1:3181",
        "/ledgers/LAYOUT",
        "/ledgers/00/0000",
        "/ledgers/00/0000/0001",
        "/ledgers/0/00000/L0001",
        "/ledgers/00/0000/L001",
        "/ledgers/00/0000/L00x1",
        "/ledgers/000/0000/0000/0000/L0001",  # id 1 lives at the short path
        "/other/00/0000/L0001",
    ],
)
def test_not_ledger_keys(path: str) -> None:
    assert paths.ledger_id_of(path) is None


@given(st.integers(0, 2**63 - 1))
def test_ledger_path_round_trip(ledger_id: int) -> None:
    assert paths.ledger_id_of(paths.ledger(ledger_id)) == ledger_id


def test_url_encode_is_javas_url_encoder() -> None:
    assert paths.url_encode("my-topic_1.x*") == "my-topic_1.x*"
    assert paths.url_encode("a b/c~é") == "a+b%2Fc%7E%C3%A9"
    assert paths.managed_ledger("public", "default", paths.url_encode("t 1")) == (
        "/managed-ledgers/public/default/persistent/t+1"
    )
    assert paths.managed_ledger_cursor("/managed-ledgers/p/d/persistent/t", "sub%2F1") == (
        "/managed-ledgers/p/d/persistent/t/sub%2F1"
    )
