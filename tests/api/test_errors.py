"""Every error of every layer has its own entry in api/errors.py's one table."""

from __future__ import annotations

import pytest

from api import errors
from metastore import errors as store_errors
from placement import errors as placement_errors
from storage.ledger import errors as ledger_errors
from storage.managed_ledger import errors as managed_ledger_errors


def subclasses(root: type[Exception]) -> list[type[Exception]]:
    found = [root]
    for sub in root.__subclasses__():
        found.extend(subclasses(sub))
    return found


@pytest.mark.parametrize(
    "kind",
    subclasses(errors.ServiceError)
    + subclasses(store_errors.MetastoreError)
    + subclasses(placement_errors.PlacementError)
    + subclasses(ledger_errors.LedgerError)
    + subclasses(managed_ledger_errors.ManagedLedgerError),
    ids=lambda k: k.__name__,
)
def test_every_error_is_mapped(kind: type[Exception]) -> None:
    assert kind in errors.STATUS_BY_ERROR


def test_placement_statuses() -> None:
    short = placement_errors.NotEnoughBookies(short_set="group 'a'", needed=3, available=1)
    assert errors.status_for(short) == 412
    assert errors.reason_for(short) == str(short)
    assert errors.status_for(placement_errors.InvalidPlacementRequest("E < Qw")) == 400
    assert errors.status_for(errors.ServiceUnavailable("no broker")) == 503
